"""Core sub-commands: ``instance``, ``exact``, ``check`` and ``report``."""

from __future__ import annotations

import argparse
import json
import sys

from .errors import InstanceError, SpectheoryError
from .exact import analysis_summary, analyze, check_lossless
from .instances import DEFAULT_TOL, MAX_JSON_PREFIXES, instance_to_dict, load_instance
from .random_instances import random_instance
from .verifiers import LOSSY_EXAMPLES, LOSSY_MULTI_PATH, MULTI_PATH, SINGLE_PATH


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def add_instance_options(p: argparse.ArgumentParser) -> None:
    """Options shared by commands that read an instance."""
    p.add_argument("instance", help="instance JSON file ('-' for standard input)")
    p.add_argument("--exact", action="store_true",
                   help="exact rational arithmetic (rows must sum to exactly 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--tol", type=float, default=DEFAULT_TOL,
                   help=f"row-sum tolerance in float mode (default {DEFAULT_TOL:g})")
    p.add_argument("--max-sequences", type=positive_int, default=None,
                   help="refuse enumerations over this many sequences (default: 2^26 float, "
                        "200000 exact; env SPECTHEORY_MAX_SEQUENCES)")


def all_verifiers() -> dict:
    return {**SINGLE_PATH, **LOSSY_EXAMPLES, **MULTI_PATH, **LOSSY_MULTI_PATH}


def _multi_path_plan(args):
    """(is_multi_path, K, drafting) for ``--verifier/--paths/--drafting`` (see ``exact --help``).

    A multi-path verifier runs on K = --paths paths (default 1) under --drafting (default: the
    scheme the verifier is lossless under). A single-path verifier with --paths > 1 is an error
    (use block-first / token-first to run block / token verification on the first of K paths).
    """
    paths = getattr(args, "paths", None)
    drafting = getattr(args, "drafting", None)
    name = args.verifier
    if name in MULTI_PATH or name in LOSSY_MULTI_PATH:
        v = {**MULTI_PATH, **LOSSY_MULTI_PATH}[name]
        native = getattr(v, "drafting", "iid")
        if drafting is None:
            drafting = "iid" if native == "any" else native
        elif native not in ("any", drafting):
            print(f"spectheory: note: {name} is designed for {native} drafting; analysing it "
                  f"under {drafting} drafting", file=sys.stderr)
        return True, paths or 1, drafting
    if paths is not None and paths > 1:
        raise SpectheoryError(
            f"verifier {name!r} is single-path; --paths {paths} needs a multi-path verifier "
            f"({', '.join(MULTI_PATH)}; block-first / token-first run block / token "
            f"verification on the first path)")
    if drafting == "norep":
        raise SpectheoryError(f"--drafting norep needs a multi-path verifier, not {name!r}")
    return False, 1, "iid"


def _verifier(name: str):
    table = all_verifiers()
    if name not in table:
        raise SpectheoryError(f"unknown verifier {name!r}; choose from {', '.join(table)}")
    return table[name]


def emit(obj, as_json: bool, text: str) -> None:
    """Print the finished result (nothing is printed before the work is complete)."""
    if as_json:
        sys.stdout.write(json.dumps(obj) + "\n")
    else:
        sys.stdout.write(text.rstrip("\n") + "\n")


# ----------------------------------------------------------------------------- instance


def cmd_instance_random(args) -> int:
    if args.vocab < 2:
        raise InstanceError(f"--vocab {args.vocab} is out of range (at least 2)")
    if args.block < 1:
        raise InstanceError(f"--block {args.block} is out of range (at least 1)")
    if not args.context_independent:
        rows = sum(args.vocab**d for d in range(args.block + 1))
        if rows > MAX_JSON_PREFIXES:
            raise InstanceError(
                f"a table instance with V = {args.vocab}, L = {args.block} has {rows:,} target "
                f"prefixes, over the JSON limit of {MAX_JSON_PREFIXES:,} by "
                f"{rows - MAX_JSON_PREFIXES:,}; use --context-independent or smaller sizes")
    inst = random_instance(args.vocab, args.block, args.seed, alpha=args.alpha,
                           context_independent=args.context_independent,
                           denominator=args.denominator)
    sys.stdout.write(json.dumps(instance_to_dict(inst)) + "\n")
    return 0


# ----------------------------------------------------------------------------- exact


def cmd_exact(args) -> int:
    verifier = _verifier(args.verifier)
    multi, paths, drafting = _multi_path_plan(args)
    inst = load_instance(args.instance, exact=args.exact, tol=args.tol)
    if multi:
        from .multipath import analyze_multipath

        res = analyze_multipath(inst, verifier, paths, drafting, name=args.verifier,
                                exact=args.exact, max_sequences=args.max_sequences,
                                progress=sys.stderr.isatty())
    else:
        res = analyze(inst, verifier, name=args.verifier, exact=args.exact,
                      max_sequences=args.max_sequences, progress=sys.stderr.isatty())
        if args.paths is not None or args.drafting is not None:
            res.extra.update({"paths": paths, "drafting": drafting})
    if multi:
        res.verifier = f"{args.verifier} (K = {paths}, {drafting} drafting)"
    text = analysis_summary(res) + "\n  tau pmf: " + ", ".join(
        str(v) if res.exact else f"{v:.6f}" for v in res.tau_pmf)
    obj = res.to_json()
    obj["verifier"] = args.verifier
    emit(obj, args.json, text)
    return 0


def cmd_check(args) -> int:
    verifier = _verifier(args.verifier)
    multi, paths, drafting = _multi_path_plan(args)
    inst = load_instance(args.instance, exact=args.exact, tol=args.tol)
    if multi:
        from .multipath import check_lossless_multipath

        if args.tokens is not None and args.tokens != inst.block_length + 1:
            raise SpectheoryError("--tokens is single-path only; multi-path verifiers are "
                                  "checked over one block (L+1 tokens)")
        report = check_lossless_multipath(verifier, inst, paths, drafting, exact=args.exact,
                                          tol=args.lossless_tol,
                                          max_sequences=args.max_sequences)
    else:
        report = check_lossless(verifier, inst, exact=args.exact, tol=args.lossless_tol,
                                n_tokens=args.tokens, max_sequences=args.max_sequences)
    obj = {
        "verifier": args.verifier,
        "lossless": report.lossless,
        "tokens": report.n_tokens,
        "tv_to_target": str(report.tv) if report.exact else float(report.tv),
        "offending_sequence": list(report.offending) if report.offending else None,
        "output_probability": None if report.output_probability is None
        else (str(report.output_probability) if report.exact
              else float(report.output_probability)),
        "target_probability": None if report.target_probability is None
        else (str(report.target_probability) if report.exact
              else float(report.target_probability)),
    }
    emit(obj, args.json, f"{args.verifier}: {report}")
    return 0 if report.lossless else 1


# ----------------------------------------------------------------------------- register


def add_multi_path_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--paths", type=positive_int, default=None, metavar="K",
                   help="number of draft paths for a multi-path verifier (default 1); a "
                        "single-path verifier accepts only 1")
    p.add_argument("--drafting", choices=("iid", "norep"), default=None,
                   help="drafting scheme of the K paths: iid (with replacement) or norep "
                        "(distinct first tokens); default: the scheme the verifier is "
                        "lossless under")


def register(sub) -> None:
    p = sub.add_parser("instance", help="make instances")
    isub = p.add_subparsers(dest="instance_command", metavar="KIND")
    isub.required = True
    r = isub.add_parser("random", help="random Dirichlet instance as JSON on stdout")
    r.add_argument("--vocab", type=int, required=True, help="vocabulary size V (>= 2)")
    r.add_argument("--block", type=int, required=True, help="block length L (>= 1)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--alpha", type=float, default=1.0,
                   help="Dirichlet concentration (smaller: more peaked, more divergent)")
    r.add_argument("--context-independent", action="store_true",
                   help="one conditional for every prefix")
    r.add_argument("--denominator", type=positive_int, default=None,
                   help="round rows to exact multiples of 1/D (for --exact analysis)")
    r.set_defaults(func=cmd_instance_random)

    e = sub.add_parser("exact", help="exact law of a verifier on an instance")
    add_instance_options(e)
    e.add_argument("--verifier", default="block", help=f"one of: {', '.join(all_verifiers())}")
    add_multi_path_options(e)
    e.set_defaults(func=cmd_exact)

    c = sub.add_parser("check", help="exact losslessness verdict (exit 1 when lossy)")
    add_instance_options(c)
    c.add_argument("--verifier", default="block", help=f"one of: {', '.join(all_verifiers())}")
    c.add_argument("--tokens", type=positive_int, default=None,
                   help="check the law of the first N generated tokens over repeated "
                        "iterations (default: one block, L+1 tokens; single-path only)")
    add_multi_path_options(c)
    c.add_argument("--lossless-tol", type=float, default=1e-12,
                   help="float mode: largest probability difference still called equal")
    c.set_defaults(func=cmd_check)

    from .report import register as register_report

    register_report(sub)
