"""``spectheory vectors export DIR`` / ``spectheory vectors check DIR`` (see
[`spectheory.testing.checks.vectors`][spectheory.testing.checks.vectors] and
``docs/vectors.md``)."""

from __future__ import annotations

import argparse
import sys

from ..runtime.errors import OptionError
from ..runtime.limits import ascii_int, shown
from ..registry import DRAFTING


def _integer(text: str) -> int:
    """An argparse type: a decimal integer (its range is checked by `cmd_export`, before anything is
    computed or allocated, with the limits of
    [`spectheory.testing.checks.vectors`][spectheory.testing.checks.vectors])."""
    value = ascii_int(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer in ASCII digits")
    return value


def _progress(args) -> bool:
    """A progress bar on stderr when it is a terminal, as the other long commands show one, and
    ``--no-progress`` is not given (a log or a pipe gets the one result line only)."""
    return sys.stderr.isatty() and not args.no_progress


def cmd_export(args) -> int:
    from ..cli.commands import user_verifier_errors
    from .checks.vectors import (MAX_VECTOR_PATHS, check_decisions, check_vector_seed,
                                 export_vectors)

    if not 1 <= args.paths <= MAX_VECTOR_PATHS:
        raise OptionError(f"--paths = {args.paths} must be an integer in 1..{MAX_VECTOR_PATHS}")
    check_decisions(args.decisions, "--decisions")
    check_vector_seed(args.seed, "--seed")
    import warnings

    from ..cli.commands import print_notes
    from ..registry import DraftingWarning

    users = ", ".join(n for n in args.verifier or [] if ":" in n)
    with user_verifier_errors(users), warnings.catch_warnings(record=True) as seen:
        # a verifier under another drafting scheme than its own: one note line each, once (the
        # warning was printed with its source line, three times for one verifier)
        warnings.simplefilter("always", DraftingWarning)
        names = export_vectors(args.directory, args.verifier, args.instances or ["battery"],
                               paths=args.paths, drafting=args.drafting,
                               decisions=args.decisions, seed=args.seed,
                               progress=_progress(args))
    notes = []
    for w in seen:
        text = str(w.message) if issubclass(w.category, DraftingWarning) else \
            f"{w.category.__name__}: {w.message}"
        if text not in notes:
            notes.append(" ".join(text.split()))
    print_notes(notes)
    from ..runtime.files import shown_path

    sys.stdout.write(f"wrote {len(names)} vector file{'s' if len(names) != 1 else ''} to "
                     f"{shown_path(args.directory)}\n")
    return 0


def cmd_check(args) -> int:
    from .checks.vectors import check_vectors

    bad = check_vectors(args.directory, progress=_progress(args),
                        allow_import=args.allow_import)
    if not bad:
        from pathlib import Path

        n = sum(1 for f in Path(args.directory).iterdir() if f.suffix == ".json" and f.is_file())
        sys.stdout.write(f"all {n} vector files match a fresh computation\n")
        return 0
    for fname, field, have, fresh in bad:
        sys.stdout.write(f"MISMATCH {fname}: field {field}: file has {shown(have, 80)}, fresh "
                         f"computation gives {shown(fresh, 80)}\n")  # a 100 KB entry: cut
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
    e.add_argument("--paths", type=_integer, default=2, metavar="K",
                   help="number of paths for multi-path verifiers (1..20; default 2; single-path "
                        "verifiers always get 1)")
    e.add_argument("--drafting", choices=DRAFTING, default=None,
                   help="drafting scheme of multi-path verifiers (default: each one's own)")
    e.add_argument("--decisions", type=_integer, default=2,
                   help="fixed-uniform decisions per joint draft (0..100; default 2)")
    e.add_argument("--seed", type=_integer, default=0,
                   help="seed of the uniforms (0..2^63-1; default 0)")
    e.add_argument("--no-progress", action="store_true",
                   help="no progress bar on stderr (shown on a terminal: one step per file "
                        "written)")
    from ..cli.commands import add_time_limit_option

    add_time_limit_option(e)  # a verifier that never returns is stopped, nothing written
    e.set_defaults(func=cmd_export)
    c = vsub.add_parser("check", help="re-verify every file of a directory against a fresh "
                                      "computation (exit 1 on a mismatch)")
    c.add_argument("directory")
    c.add_argument("--allow-import", action="store_true",
                   help="let files name a verifier as module:function and import it (your own "
                        "verifier's vectors; a downloaded file could name any module)")
    c.add_argument("--no-progress", action="store_true",
                   help="no progress bar on stderr (shown on a terminal: one step per file "
                        "checked)")
    c.set_defaults(func=cmd_check)
