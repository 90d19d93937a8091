"""Core sub-commands: ``instance``, ``exact``, ``check`` and ``verifiers`` (``report`` is in
`spectheory.cli.report`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import warnings

from ..runtime import limits
from ..runtime.errors import OptionError, SpectheoryError, result_stream
from ..engine.lossless import MAX_LOSSLESS_TOL, check_lossless, check_tolerance
from ..engine.analysis import analysis_summary, analyze
from ..law import LawError
from ..registry import DRAFTING
from ..inputs.processing import add_sampling_options
from ..inputs.processing import describe as sampling_extra
from ..inputs.instances import (DEFAULT_TOL, MAX_BLOCK, MAX_JSON_PREFIXES, MAX_TOL, MAX_VOCAB,
                                check_row_tolerance, instance_from_text, instance_to_dict,
                                load_instance, read_instance_text)
from ..inputs.random_instances import (ALPHA_RANGE, MAX_DENOMINATOR, MAX_SEED, check_alpha,
                                       check_seed, random_instance)
from ..runtime.limits import shown as _repr_cut

#: Most draft paths K a command accepts (the engine counts the K! orderings of a joint outcome
#: in int64; the joint outcomes grow like V^(L K)).
MAX_PATHS = 20
#: Most tokens ``check --tokens`` accepts (the law of N tokens has V^N >= 2^N entries).
MAX_TOKENS = 64
#: Memory per probability while ``instance random`` builds and prints a float instance (the
#: table, the Python lists and the JSON text): 94 bytes measured (V = 2048, L = 1, peak
#: resident memory), rounded up.
JSON_ENTRY_BYTES = 128


# ----------------------------------------------------------------------------- option types
# Each raises argparse.ArgumentTypeError, which the command line prints as one line naming the
# option, the value and the accepted range, with exit code 2.


def int_in(lo: int, hi: int):
    """An argparse type: a decimal integer in [lo, hi]."""
    def parse(text: str) -> int:
        s = text.strip()
        digits = s[1:] if s[:1] in "+-" else s
        if not (digits.isascii() and digits.isdigit()):
            raise argparse.ArgumentTypeError(f"{_repr_cut(text, 40)} is not an integer (accepted: "
                                             f"{lo:,}..{hi:,})")
        if len(digits.lstrip("0")) > 30:  # refused before a huge integer is made
            raise argparse.ArgumentTypeError(f"{s[:12]}... ({len(digits)} digits) is out of "
                                             f"range {lo:,}..{hi:,}")
        value = int(s)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value:,} is out of range {lo:,}..{hi:,}")
        return value

    parse.__name__ = "integer"
    return parse


#: A positive integer (at least 1, at most 10^15).
positive_int = int_in(1, limits.MAX_LIMIT)


def count_in(lo: int, hi: int):
    """An argparse type: a count in [lo, hi] as ``--samples`` reads it
    ([`parse_count`][spectheory.runtime.limits.parse_count]): decimal digits (``1000000``,
    ``1_000_000``) or a whole number in scientific notation (``1e6``, ``2.5e6``), its range
    checked before any integer of its size is made."""
    def parse(text: str) -> int:
        try:
            return limits.parse_count(text, "", lo, hi)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc).strip()) from None

    parse.__name__ = "count"
    return parse


#: A size cap (``--max-sequences``): a count of at least 1, at most 10^15.
positive_count = count_in(1, limits.MAX_LIMIT)


def whole_number(text: str) -> int:
    """An argparse type: a decimal integer of at most 30 digits, its range left to the option's
    own check (``--workers``: `spectheory.engine.split.check_workers`, the rule the sweeps and
    `analyze` share)."""
    s = text.strip()
    digits = s[1:] if s[:1] in "+-" else s
    if not (digits.isascii() and digits.isdigit()) or len(digits.lstrip("0")) > 30:
        raise argparse.ArgumentTypeError(f"{_repr_cut(text, 40)} is not an integer")
    return int(s)


whole_number.__name__ = "integer"


def _from_checker(check, name: str):
    def parse(text: str):
        try:
            return check(text)
        except SpectheoryError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = name
    return parse


row_tolerance = _from_checker(lambda t: check_row_tolerance(limits.parse_float(t), "tolerance"),
                              "tolerance")
lossless_tolerance = _from_checker(lambda t: check_tolerance(limits.parse_float(t), "tolerance"),
                                   "tolerance")
seed_type = _from_checker(lambda t: check_seed(int_in(0, MAX_SEED)(t)), "seed")
alpha_type = _from_checker(lambda t: check_alpha(limits.parse_float(t)), "alpha")
time_limit_type = _from_checker(
    lambda t: limits.check_time_limit(limits.parse_float(t), "time limit"), "seconds")


def add_time_limit_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--time-limit", type=time_limit_type, default=None, metavar="SECONDS",
                   help="stop with exit code 2 and no output once this many seconds have "
                        f"passed (0 < SECONDS <= {limits.MAX_TIME_LIMIT:.0f}; default: none)")


#: ``--max-sequences`` of the commands that enumerate sequences.
MAX_SEQUENCES_HELP = ("refuse enumerations over this many sequences (default: 2^26 float, "
                      "200000 exact; env SPECTHEORY_MAX_SEQUENCES, under --exact "
                      "SPECTHEORY_MAX_EXACT_SEQUENCES)")


def add_instance_options(p: argparse.ArgumentParser, max_help: str = MAX_SEQUENCES_HELP) -> None:
    """Options shared by commands that read an instance (``max_help``: what
    ``--max-sequences`` caps in this command)."""
    p.add_argument("instance", help="instance JSON file ('-' for standard input)")
    p.add_argument("--exact", action="store_true",
                   help="exact rational arithmetic (rows must sum to exactly 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(json_result=True)  # the result through result_stream (json_stdout)
    p.add_argument("--tol", type=row_tolerance, default=None,
                   help=f"row-sum tolerance in float mode, in [0, {MAX_TOL:g}] "
                        f"(default {DEFAULT_TOL:g}; not with --exact)")
    p.add_argument("--max-sequences", type=positive_count, default=None, help=max_help)
    add_time_limit_option(p)


def row_tol(args) -> float:
    """``--tol``, or its default; refused under ``--exact``, where rows must sum to exactly 1
    and a tolerance would do nothing."""
    if getattr(args, "tol", None) is None:
        return DEFAULT_TOL
    if args.exact:
        raise OptionError(f"--tol {args.tol:g} applies to float mode; under --exact rows must sum "
                          "to exactly 1: drop --tol or --exact")
    return args.tol


def all_verifiers() -> dict:
    """name -> spec of every registered verifier (lossless ones first, then the controls)."""
    from ..registry import registered

    return {**registered(lossless=True), **registered(lossless=False)}


def plan_with_notes(args):
    """The [`Plan`][spectheory.registry.Plan] of ``--verifier/--paths/--drafting`` and the notes
    to print (a drafting scheme other than the verifier's own); defaults are those of
    [`plan`][spectheory.registry.plan]. Print the notes with `print_notes` once every input
    has been validated, so that a refusal stays one line."""
    import warnings

    from ..registry import DraftingWarning, plan

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DraftingWarning)
        how = plan(args.verifier, getattr(args, "paths", None), getattr(args, "drafting", None))
    notes = [str(w.message) for w in caught if issubclass(w.category, DraftingWarning)]
    return how, notes


def verifier_plan(args):
    """The plan of `plan_with_notes`, its notes printed on stderr at once."""
    how, notes = plan_with_notes(args)
    print_notes(notes)
    return how


@contextlib.contextmanager
def user_verifier_errors(name: str):
    """A ``module:function`` verifier is the user's code: an exception it raises (a wrong
    signature, a bug) becomes one line naming the verifier and the exception, exit code 2.
    Errors of the toolkit itself, interrupts and memory errors pass through unchanged."""
    try:
        yield
    except (SpectheoryError, KeyboardInterrupt, MemoryError):
        raise
    except Exception as exc:
        if ":" not in str(name):
            raise
        text = " ".join(str(exc).split())
        raise SpectheoryError(f"verifier {name!r} raised {type(exc).__name__}: {text[:300]} "
                              "(a verifier takes drafts [B, L], q [B, L, V], p [B, L+1, V] and "
                              "returns a law; see `spectheory verifiers`)") from exc


@contextlib.contextmanager
def _quiet_drafting():
    import warnings

    from ..registry import DraftingWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DraftingWarning)
        yield


def print_notes(notes) -> None:
    for n in notes:
        print(f"spectheory: note: {n}", file=sys.stderr)


def emit(obj, as_json: bool, text: str) -> None:
    """Print the finished result (nothing is printed before the work is complete)."""
    if as_json:  # to standard output's descriptor, held for the result (json_stdout)
        result_stream().write(json.dumps(obj) + "\n")
    else:
        sys.stdout.write(text.rstrip("\n") + "\n")


# ----------------------------------------------------------------------------- instance


def cmd_instance_random(args) -> int:
    if not args.context_independent:
        rows = sum(args.vocab**d for d in range(args.block + 1))
        if rows > MAX_JSON_PREFIXES:
            raise SpectheoryError(
                f"a table instance with V = {args.vocab}, L = {args.block} has "
                f"{limits.human_count(rows)} target prefixes, over the JSON limit of "
                f"{MAX_JSON_PREFIXES:,}"
                + (f" by {rows - MAX_JSON_PREFIXES:,}" if rows < 10**15 else "")
                + "; use --context-independent or smaller sizes")
    V, L = args.vocab, args.block
    entries = V * (1 if args.context_independent else sum(V**d for d in range(L + 1)))
    limits.check_memory(entries * JSON_ENTRY_BYTES, f"--vocab {V} --block {L}",
                        f"the JSON instance has {entries:,} probabilities, about "
                        f"{JSON_ENTRY_BYTES} bytes each while it is built and printed; use "
                        f"smaller sizes")  # exact rows (--denominator): the engine's limit
    inst = random_instance(V, L, args.seed, alpha=args.alpha,
                           context_independent=args.context_independent,
                           denominator=args.denominator)
    sys.stdout.write(json.dumps(instance_to_dict(inst)) + "\n")
    return 0


# ----------------------------------------------------------------------------- exact


def _exact_adaptive(args) -> int:
    """``exact --stop RULE [--stop-aware]``: the verifier on the drafted prefix of random length
    (`spectheory.engine.adaptive`); options the adaptive engine does not combine with are
    refused in one line before any work."""
    from ..engine.adaptive import analyze_adaptive, parse_rule

    given = [f for f, v in (("--executor", args.executor), ("--split-depth", args.split_depth),
                            ("--workers", args.workers), ("--address", args.address),
                            ("--sampling", args.sampling), ("--draft-sampling",
                                                            args.draft_sampling),
                            ("--drafting", getattr(args, "drafting", None)))  # one path: no scheme
             if v is not None] + (["--backend"] if args.backend != "auto" else [])
    if given:
        raise OptionError(f"--stop does not combine with {', '.join(given)}")
    rule = parse_rule(args.stop)
    how, notes = plan_with_notes(args)
    if how.paths != 1:
        raise OptionError("--stop analyses one draft path; drop --paths")
    rows = row_tol(args)  # options first, then the file
    name, text = read_instance_text(args.instance)
    inst = instance_from_text(name, text, exact=args.exact, tol=rows)
    print_notes(notes)
    with user_verifier_errors(args.verifier):
        res = analyze_adaptive(inst, how.spec, rule, exact=args.exact, aware=args.stop_aware,
                               max_sequences=args.max_sequences)
    written = _as_written(args, how, inst, name, text, lambda i, **kw: analyze_adaptive(
        i, how.spec, rule, aware=args.stop_aware, **kw))
    obj = res.to_json()
    obj["verifier"] = args.verifier
    differ = written is not None and _differ(written, res)
    if written is not None and (differ or written.lossless != res.lossless):
        if differ:
            _tie_note(_efficiency(res), _efficiency(written))
        else:  # the same law to rounding, another verdict
            _verdict_note(res.lossless, res.tv_to_target, written.lossless,
                          written.tv_to_target, res.tolerance)
        obj["as_written"] = {"block_efficiency": str(written.block_efficiency),
                             "tv_to_target": str(written.tv_to_target),
                             "lossless": written.lossless}
    limits.check_time(" (after the analysis)")
    emit(obj, args.json, res.summary())
    return 0


#: Leaves of the enumeration up to which a float ``exact`` or ``check`` also reads the instance as
#: written (Fractions) to see whether a threshold ties there (a second run of at most this size).
TIE_CHECK_LEAVES = 1024
#: A difference between the float and the as-written answers above this is a decision, not
#: rounding (float64 rounding of a law of 1,024 leaves stays below 1e-12).
TIE_CHECK_GAP = 1e-6


def _as_written(args, how, inst, name: str, text: str, run):
    """``run(instance, exact=True, max_sequences=TIE_CHECK_LEAVES)`` on the instance as written,
    for a float run (of the float instance ``inst``) whose verifier has an exact mode; None where
    that is not possible (the exact route refused the size or the instance, or the verifier
    failed there): the check is an extra, and its absence claims nothing. An instance whose
    V^(L+1) (every route's least count) is past `TIE_CHECK_LEAVES` is not read again: its rows
    as Fractions came before the run's size check (V = 2,500, L = 1: 6 million Fractions, a
    minute, for a check the size then refused)."""
    if args.exact or not how.spec.exact or getattr(args, "executor", None) is not None:
        return None
    if inst.vocab_size ** (inst.block_length + 1) > TIE_CHECK_LEAVES:
        return None
    try:
        with warnings.catch_warnings(), _quiet_drafting():
            warnings.simplefilter("ignore")
            inst = instance_from_text(name, text, exact=True, tol=row_tol(args))
            return run(inst, exact=True, max_sequences=TIE_CHECK_LEAVES)
    except (Exception, SystemExit):  # noqa: BLE001 - any failure: no note
        return None


def _differ(written, res) -> bool:
    """The as-written analysis and the float one differ by more than rounding (tau's law or
    the TV to the target)."""
    a = [float(v) for v in written.tau_pmf]
    b = [float(v) for v in res.tau_pmf]
    return (len(a) != len(b) or max(abs(x - y) for x, y in zip(a, b)) > TIE_CHECK_GAP
            or abs(float(written.tv_to_target) - float(res.tv_to_target)) > TIE_CHECK_GAP)


def _efficiency(res) -> str:
    if res.exact:
        return f"E[tau+1] = {res.block_efficiency}, TV {res.tv_to_target}"
    return f"E[tau+1] = {float(res.block_efficiency):.6g}, TV {float(res.tv_to_target):.3g}"


def _tie_note(what_float: str, what_exact: str, tolerance: float | None = None,
              rounding: bool = False) -> None:
    """The note on an as-written answer that differs: with ``tolerance``, the float verdict
    called a TV within it lossless where the exact TV is not 0 (the laws agree); with
    ``rounding``, the float law is lossy by rounding alone (the laws agree, the exact one is
    lossless); else a threshold ties in the decimals."""
    why = (f"the float check calls a TV up to {tolerance:g} lossless" if tolerance is not None
           else "the two laws agree to rounding and the float one is off the target by more "
           "than the float check's tolerance" if rounding
           else "a threshold ties in its decimals and their float64 values fall on the other side")
    print_notes([f"read exactly as written, the instance gives {what_exact}, not {what_float}: "
                 f"{why}; --exact answers for the instance as written"])


def _verdict_note(lossless: bool, tv, written_lossless: bool, written_tv,
                  tolerance: float) -> None:
    """`_tie_note` on a float verdict (``lossless``, ``tv``) and an as-written one that differ,
    each named as it is. Where the two TVs agree to rounding, the reason is the float check's
    ``tolerance`` (float lossless, exact LOSSY) or the float law's distance to the target (float
    LOSSY, exact lossless), not a tie."""
    agree = abs(float(written_tv) - float(tv)) <= TIE_CHECK_GAP
    _tie_note(f"{'lossless' if lossless else 'LOSSY'} (TV {float(tv):.3g})",
              f"{'lossless' if written_lossless else 'LOSSY'} (TV {written_tv})",
              tolerance if agree and lossless and not written_lossless else None,
              rounding=agree and written_lossless and not lossless)


def cmd_exact(args) -> int:
    from ..engine.split import check_executor_options

    if args.stop is not None or args.stop_aware:
        if args.stop is None:
            raise OptionError("--stop-aware needs --stop RULE")
        return _exact_adaptive(args)
    check_executor_options(args.executor, args.split_depth, args.workers, args.address,
                           flags=True)
    how, notes = plan_with_notes(args)
    rows = row_tol(args)  # options first, then the file
    name, text = read_instance_text(args.instance)
    inst = instance_from_text(name, text, exact=args.exact, tol=rows)
    print_notes(notes)
    with _quiet_drafting(), user_verifier_errors(args.verifier):  # notes: printed above
        res = analyze(inst, how.spec, name=args.verifier, exact=args.exact,
                      max_sequences=args.max_sequences, progress=limits.progress_enabled(),
                      paths=how.paths, drafting=how.drafting, sampling=args.sampling,
                      draft_sampling=args.draft_sampling, laws=args.executor is None,
                      executor=args.executor, split_depth=args.split_depth,
                      workers=args.workers, address=args.address, backend=args.backend)
    written = _as_written(args, how, inst, name, text, lambda i, **kw: analyze(
        i, how.spec, name=args.verifier, paths=how.paths, drafting=how.drafting,
        sampling=args.sampling, draft_sampling=args.draft_sampling, **kw))
    if how.spec.single_path and (args.paths is not None or args.drafting is not None):
        res.extra.update({"paths": how.paths, "drafting": how.drafting})
    if not how.spec.single_path:
        res.verifier = f"{args.verifier} (K = {how.paths}, {how.drafting} drafting)"
    text = analysis_summary(res) + "\n  tau pmf: " + ", ".join(
        str(v) if res.exact else f"{v:.6f}" for v in res.tau_pmf)
    text += "".join(f"\n  {k.replace('_', ' ')}: {v} (rows processed before verification)"
                    for k, v in sampling_extra(args.sampling, args.draft_sampling).items())
    obj = res.to_json()
    obj["verifier"] = args.verifier
    obj["backend"] = res.backend
    if written is not None and _differ(written, res):  # the note, its numbers in --json
        _tie_note(_efficiency(res), _efficiency(written))
        obj["as_written"] = {"block_efficiency": str(written.block_efficiency),
                             "tv_to_target": str(written.tv_to_target)}
    limits.check_time(" (after the analysis)")  # a result past the limit is not printed
    emit(obj, args.json, text)
    return 0


def cmd_check(args) -> int:
    how, notes = plan_with_notes(args)
    if args.lossless_tol and args.exact:  # an exact check calls only TV = 0 lossless (0: agrees)
        raise OptionError(f"--lossless-tol {args.lossless_tol:g} applies to float mode; --exact "
                          "calls a verifier lossless only at TV = 0: drop --lossless-tol or "
                          "--exact")
    tol = check_tolerance(1e-12 if args.lossless_tol is None else args.lossless_tol,
                          "--lossless-tol")
    rows = row_tol(args)  # options first, then the file
    name, text = read_instance_text(args.instance)
    inst = instance_from_text(name, text, exact=args.exact, tol=rows)
    print_notes(notes)
    try:
        with _quiet_drafting(), user_verifier_errors(args.verifier):  # notes: printed above
            report = check_lossless(how.spec, inst, exact=args.exact, tol=tol,
                                    n_tokens=args.tokens, max_sequences=args.max_sequences,
                                    paths=how.paths, drafting=how.drafting,
                                    sampling=args.sampling, draft_sampling=args.draft_sampling,
                                    backend=args.backend)
        written = _as_written(args, how, inst, name, text, lambda i, **kw: check_lossless(
            how.spec, i, n_tokens=args.tokens, paths=how.paths, drafting=how.drafting,
            sampling=args.sampling, draft_sampling=args.draft_sampling, **kw))
    except LawError as exc:  # the verifier under test returned something that is not a law
        obj = {"verifier": args.verifier, "paths": how.paths, "drafting": how.drafting,
               "lossless": False, "law_error": {"kind": exc.kind, "message": str(exc),
                                                "where": list(exc.where) if exc.where else None}}
        emit(obj, args.json, f"{args.verifier}: NOT A LAW ({exc.kind}): {exc}")
        return 1
    enc = (lambda v: None if v is None else str(v)) if report.exact else \
        (lambda v: None if v is None else float(v))
    obj = {
        "verifier": args.verifier,
        "paths": report.paths,
        "drafting": report.drafting,
        "lossless": report.lossless,
        "tokens": report.n_tokens,
        "tolerance": report.tolerance,
        "tv_to_target": enc(report.tv),
        "max_difference": enc(report.max_difference),
        "offending_sequence": list(report.offending) if report.offending else None,
        "output_probability": enc(report.output_probability),
        "target_probability": enc(report.target_probability),
    }
    extra = sampling_extra(args.sampling, args.draft_sampling)
    obj.update(extra)
    if written is not None and (written.lossless != report.lossless or abs(
            float(written.tv) - float(report.tv)) > TIE_CHECK_GAP):
        _verdict_note(report.lossless, report.tv, written.lossless, written.tv, tol)
        obj["as_written"] = {"lossless": written.lossless, "tv_to_target": str(written.tv)}
    limits.check_time(" (after the check)")  # a verdict past the limit is not printed
    emit(obj, args.json, f"{args.verifier}: {report}" + "".join(
        f"\n  {k.replace('_', ' ')}: {v} (the target law is the processed target's)"
        if k == "sampling" else f"\n  {k.replace('_', ' ')}: {v}" for k, v in extra.items()))
    return 0 if report.lossless else 1


def cmd_verifiers(args) -> int:
    table = all_verifiers()
    if args.json:
        emit([s.describe() for s in table.values()], True, "")
        return 0
    lines = [f"{'name':20s} {'paths':5s} {'drafting':8s} {'exact':5s} {'lossless':8s} summary"]
    for s in table.values():
        lines.append(f"{s.name:20s} {'1' if s.single_path else 'K':5s} {s.drafting:8s} "
                     f"{'yes' if s.exact else 'no':5s} {'yes' if s.lossless else 'NO':8s} "
                     f"{s.summary}")
    lines.append("(any importable function works too: --verifier module:function)")
    emit(None, False, "\n".join(lines))
    return 0


# ----------------------------------------------------------------------------- register


def add_backend_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=("auto", "numpy", "torch"), default="auto",
                   help="what the float route computes on: auto (numpy float64 where the "
                        "verifier and route declare it and the analysis is small, else torch), "
                        "numpy (refused where it cannot run), torch; the same law within a few "
                        "ulps")


def add_multi_path_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--paths", type=int_in(1, MAX_PATHS), default=None, metavar="K",
                   help="number of draft paths (default 1); a single-path verifier accepts "
                        "only 1, a module:function verifier with K > 1 is read as K-path")
    p.add_argument("--drafting", choices=DRAFTING, default=None,
                   help="drafting scheme of the K paths: iid (with replacement), norep "
                        "(distinct first tokens) or hub (SpecHub's top token and one "
                        "companion, K <= 2); default: the scheme the verifier is lossless "
                        "under")


def register(sub) -> None:
    p = sub.add_parser("instance", help="make instances")
    isub = p.add_subparsers(dest="instance_command", metavar="KIND")
    isub.required = True
    r = isub.add_parser("random", help="random Dirichlet instance as JSON on stdout")
    r.add_argument("--vocab", type=int_in(2, MAX_VOCAB), required=True,
                   help=f"vocabulary size V (2..{MAX_VOCAB:,})")
    r.add_argument("--block", type=int_in(1, MAX_BLOCK), required=True,
                   help=f"block length L (1..{MAX_BLOCK})")
    r.add_argument("--seed", type=seed_type, default=0, help="seed (0..2^63-1; default 0)")
    r.add_argument("--alpha", type=alpha_type, default=1.0,
                   help=f"Dirichlet concentration in [{ALPHA_RANGE[0]:g}, {ALPHA_RANGE[1]:g}] "
                        "(smaller: more peaked, more divergent; default 1)")
    r.add_argument("--context-independent", action="store_true",
                   help="one conditional for every prefix")
    r.add_argument("--denominator", type=int_in(1, MAX_DENOMINATOR), default=None,
                   help="round rows to exact multiples of 1/D (for --exact analysis; "
                        f"1..{MAX_DENOMINATOR:.0e})")
    r.set_defaults(func=cmd_instance_random)

    e = sub.add_parser("exact", help="exact law of a verifier on an instance",
                       description="The exact law of a verifier's output on an instance: tau's "
                                   "pmf, E[tau+1] and the TV to the target law, in float64 or "
                                   "(--exact) rationals, by enumerating the sequence tree.")
    add_instance_options(e)
    e.add_argument("--verifier", default="block",
                   help="a name from `spectheory verifiers` or module:function")
    add_multi_path_options(e)
    add_sampling_options(e)
    add_backend_option(e)
    e.add_argument("--executor", choices=("local", "ray"), default=None,
                   help="split the per-node route into the V^d subtrees below depth "
                        "--split-depth and run them as tasks: local (processes) or ray "
                        "(pip install 'spectheory[ray]'); the same law, exactly in rationals")
    e.add_argument("--split-depth", type=int_in(1, 64), default=None, metavar="D",
                   help="with --executor: the depth d whose V^d subtrees are the tasks "
                        "(1 <= d <= L - 1; default 1)")
    e.add_argument("--workers", type=whole_number, default=None, metavar="N",
                   help="with --executor: tasks at once, at most 4 x the cores (default: the "
                        "cores, at most 8; with --address the Ray cluster's CPUs decide)")
    e.add_argument("--address", default=None,
                   help="with --executor ray: the cluster's address (default: a local cluster)")
    e.add_argument("--stop", default=None, metavar="RULE",
                   help="draft until a stopping rule fires (at most L tokens), e.g. "
                        "'draft-confidence(1/2)' (llama.cpp's p_min), 'draft-prob(0.3)', "
                        "'target-peek(1)', 'coin(1/4)', 'draft-drop(1/2)'; see "
                        "docs/adaptive-draft-length.md")
    e.add_argument("--stop-aware", action="store_true",
                   help="with --stop: verify against the stopped draft (a stop token of "
                        "target probability 0) instead of the instance's draft rows")
    e.set_defaults(func=cmd_exact)

    c = sub.add_parser("check", help="exact losslessness verdict (exit 1 when lossy)",
                       description="Whether a verifier's output law equals the target law, "
                                   "exactly (--exact) or within float rounding: exit 0 lossless, "
                                   "1 lossy (naming the first offending sequence), 2 bad input.")
    add_instance_options(c)
    c.add_argument("--verifier", default="block",
                   help="a name from `spectheory verifiers` or module:function")
    c.add_argument("--tokens", type=int_in(1, MAX_TOKENS), default=None,
                   help="check the law of the first N generated tokens over repeated "
                        "iterations (default: one block, L+1 tokens)")
    add_multi_path_options(c)
    add_sampling_options(c)
    add_backend_option(c)
    c.add_argument("--lossless-tol", type=lossless_tolerance, default=None,
                   help="float mode: largest total variation still called lossless "
                        f"(finite, in [0, {MAX_LOSSLESS_TOL:g}]; default 1e-12; not with "
                        "--exact, which calls only TV = 0 lossless)")
    c.set_defaults(func=cmd_check)

    v = sub.add_parser("verifiers", help="list the registered verifiers and their metadata")
    v.add_argument("--json", action="store_true", help="print one JSON list")
    v.set_defaults(json_result=True)  # the result through result_stream (json_stdout)
    v.set_defaults(func=cmd_verifiers)

