"""``spectheory check-sampler MODULE:FUNCTION``: check a sampler against the exact law.

Exit codes: 0 the sampler passes, 1 it fails, 2 bad input (an unimportable sampler, a sampler
that raises on the kit's inputs, non-positive samples, alpha outside (0, 1), ...), always as one
line without a traceback.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

from ..errors import SpectheoryError


def _import(text: str, what: str):
    module, _, attr = text.partition(":")
    if not module or not attr:
        raise SpectheoryError(f"{what} {text!r} is not of the form module:function")
    if os.getcwd() not in sys.path:  # a module next to the caller is found, as with python -m
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(module)
    except Exception as exc:  # ImportError, or an error raised while importing the module
        raise SpectheoryError(f"cannot import module {module!r} for {what} {text!r}: "
                              f"{type(exc).__name__}: {exc}".replace("\n", " ")) from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise SpectheoryError(f"module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise SpectheoryError(f"{what} {text!r} is {type(obj).__name__}, not a function")
    return obj


def _int(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise SpectheoryError(f"{name} = {text!r} is not an integer") from None
    return value


def _float(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise SpectheoryError(f"{name} = {text!r} is not a number") from None


def run_check_sampler(args) -> int:
    from ..instances import load_instance
    from ..registry import get_verifier
    from .sampler import check_sampler

    samples = _int(args.samples, "--samples")
    if samples < 1:
        raise SpectheoryError(f"--samples = {samples} must be a positive integer")
    alpha = _float(args.alpha, "--alpha")
    if not 0 < alpha < 1:
        raise SpectheoryError(f"--alpha = {args.alpha} must lie strictly between 0 and 1")
    seed = _int(args.seed, "--seed")
    paths = None if args.paths is None else _int(args.paths, "--paths")
    if paths is not None and paths < 1:
        raise SpectheoryError(f"--paths = {paths} must be a positive integer")
    verifier = args.verifier
    if args.mode != "coins":
        get_verifier(verifier, multi_path=(paths or 1) > 1)  # a bad name fails before importing
    instances = [load_instance(f) for f in args.instance] if args.instance else None
    sampler = _import(args.sampler, "sampler")
    try:
        report = check_sampler(sampler, verifier, instances, samples=samples, alpha=alpha,
                               mode=args.mode, seed=seed, paths=paths,
                               convention=args.convention)
    except SpectheoryError:
        raise
    except Exception as exc:  # the sampler itself raised on the kit's inputs
        raise SpectheoryError(f"sampler {args.sampler} raised {type(exc).__name__}: "
                              f"{exc}".replace("\n", " ")) from None
    if args.json:
        sys.stdout.write(json.dumps({"sampler": args.sampler, **report.to_json()}) + "\n")
    else:
        sys.stdout.write(str(report) + "\n")
    return 0 if report.passed else 1


def register(sub) -> None:
    p = sub.add_parser(
        "check-sampler",
        help="check a sampler (module:function) against the exact law (exit 1 when it fails)",
        description="Check a rejection sampler with the canonical signature sampler(drafts [B, L], "
                    "q [B, L, V], p [B, L+1, V], generator) -> (accepted [B], token [B]) (K-path "
                    "form with --paths K; coin-driven form sampler(drafts, q, p, "
                    "uniforms [B, L+1]) "
                    "with --mode coins) against the exact law. Exit 0 pass, 1 fail, 2 bad input.")
    p.add_argument("sampler", metavar="MODULE:FUNCTION", help="the sampler to check")
    p.add_argument("--verifier", default="block",
                   help="the law it claims: a registered name or module:function (default block)")
    p.add_argument("--mode", choices=("law", "lossless", "coins"), default="law",
                   help="law: (tau, Y) per fixed draft against the verifier's exact law; "
                        "lossless: output plus target completion against the target law; coins: "
                        "decisions against the reference on the same uniforms")
    p.add_argument("--convention", choices=("token", "block"), default=None,
                   help="coins mode: the coin convention (default the verifier's name)")
    p.add_argument("--samples", default="100000", metavar="N",
                   help="sampler outputs drawn (default 100000)")
    p.add_argument("--alpha", default="0.001", metavar="A",
                   help="family-wise false-alarm rate in (0, 1) (default 0.001)")
    p.add_argument("--seed", default="0", metavar="S", help="seed of drafts and generator")
    p.add_argument("--paths", default=None, metavar="K", help="K for a K-path sampler")
    p.add_argument("--instance", action="append", default=None, metavar="FILE",
                   help="instance JSON file to check on (repeatable; default: the kit's "
                        "prefix-dependent instances)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_check_sampler)
