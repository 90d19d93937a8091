"""``spectheory vectors export DIR`` / ``spectheory vectors check DIR`` (see
:mod:`spectheory.testing.vectors` and ``docs/vectors.md``)."""

from __future__ import annotations

import argparse
import sys

from ..registry import DRAFTING


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} must be at least 1")
    return v


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} must be at least 0")
    return v


def cmd_export(args) -> int:
    from ..commands import user_verifier_errors
    from .vectors import export_vectors

    users = ", ".join(n for n in args.verifier or [] if ":" in n)
    with user_verifier_errors(users):  # a module:function verifier's exception: one line
        names = export_vectors(args.directory, args.verifier, args.instances or ["battery"],
                               paths=args.paths, drafting=args.drafting,
                               decisions=args.decisions, seed=args.seed)
    sys.stdout.write(f"wrote {len(names)} vector files to {args.directory}\n")
    return 0


def cmd_check(args) -> int:
    from .vectors import check_vectors

    bad = check_vectors(args.directory)
    if not bad:
        from pathlib import Path

        n = sum(1 for f in Path(args.directory).iterdir() if f.suffix == ".json")
        sys.stdout.write(f"all {n} vector files match a fresh computation\n")
        return 0
    for fname, field, have, fresh in bad:
        sys.stdout.write(f"MISMATCH {fname}: field {field}: file has {have!r}, fresh "
                         f"computation gives {fresh!r}\n")
    return 1


def register(sub) -> None:
    p = sub.add_parser("vectors", help="language-neutral test vectors (exact laws as JSON)")
    vsub = p.add_subparsers(dest="vectors_command", metavar="ACTION")
    vsub.required = True
    e = vsub.add_parser("export", help="write one JSON file per (verifier, instance) into a new "
                                       "directory")
    e.add_argument("directory", help="output directory (must not exist, or be empty)")
    e.add_argument("--verifier", action="append", default=None, metavar="NAME",
                   help="a verifier with an exact law (name or module:function; repeat for "
                        "several; default: every registered verifier with an exact law)")
    e.add_argument("--instances", nargs="+", default=None, metavar="SOURCE",
                   help="'battery' (the default battery of spectheory.testing) and/or instance "
                        "JSON files in exact fractions (default: battery)")
    e.add_argument("--paths", type=_positive, default=2, metavar="K",
                   help="number of paths for multi-path verifiers (default 2; single-path "
                        "verifiers always get 1)")
    e.add_argument("--drafting", choices=DRAFTING, default=None,
                   help="drafting scheme of multi-path verifiers (default: each one's own)")
    e.add_argument("--decisions", type=_count, default=2,
                   help="fixed-uniform decisions per joint draft (default 2)")
    e.add_argument("--seed", type=int, default=0, help="seed of the uniforms (default 0)")
    e.set_defaults(func=cmd_export)
    c = vsub.add_parser("check", help="re-verify every file of a directory against a fresh "
                                      "computation (exit 1 on a mismatch)")
    c.add_argument("directory")
    c.set_defaults(func=cmd_check)
