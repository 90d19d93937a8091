"""``spectheory lp INSTANCE.json --problem {node-budget,direct,coupling,multipath,selection,frontier}
[--paths K] [--tv DELTA | --kl DELTA] [--exact] [--json] [--time-limit SECONDS]``: solve one of the optimality LPs and print its
optimum in block-efficiency units E[tau + 1], with solver, status, the dual bound of a float
certificate, the independent bounds it was checked against (`spectheory.lp.trust`), size and
time. Bad input (unreadable or malformed instance, sizes over the limits, a failed or
uncertified solve, an optimum outside its independent bounds, ``--solver cvxpy`` without the
``[cvxpy]`` extra, the time limit reached) is one line on stderr and exit code 2, as for every
``spectheory`` command.
``--max-sequences`` caps the number of LP variables.

The frontier LP (``--problem frontier``) is counted from V, L and K before it is built
(`spectheory.lp.frontier.frontier_size`): over `spectheory.lp.frontier.FRONTIER_MAX_VARIABLES`
variables (60,000: V, L = 6, 4 has 55,986 and its TV solve took 22-36 s on a loaded 2-core
machine; V, L = 7, 4, 120,449 variables, over 11 min) it is refused with the sizes, the estimate
and how to lower them unless ``--max-sequences N`` raises the cap; a size whose memory estimate
is over half the machine's memory is refused whatever the cap. An accepted size estimated over
`spectheory.runtime.limits.NOTE_SECONDS` is noted on stderr, then each stage with the time so
far.

Before a float solve starts, its time is estimated from the sizes (`estimate_lp_seconds`,
fitted to the solves timed in ``benchmarks/bench_lp.py`` on a 2-core x86_64 machine). A solve
estimated over `UNBOUNDED_SECONDS` runs only when the user asked for it explicitly, with
``--time-limit`` (the solve is then stopped there: HiGHS gets the time left, cutting-plane rounds
stop) or ``--max-sequences`` (the size is accepted as is); otherwise it is refused with the
estimate. A solve estimated over `spectheory.runtime.limits.NOTE_SECONDS` is announced on stderr.
"""

from __future__ import annotations

import re

from spectheory.runtime import limits
from spectheory.cli.commands import MAX_PATHS, add_instance_options, emit, int_in, row_tol
from spectheory.runtime.errors import SizeLimitError, SpectheoryError
from spectheory.inputs.instances import load_instance
from spectheory.registry import DRAFTING

#: What the lp parser reads as a negative number rather than an option (`register`): -N, -N.N,
#: -.N, with an exponent, a fraction -N/M, -inf, -infinity and -nan.
NEGATIVE_NUMBER = re.compile(r"^-(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:/\d+)?"
                             r"|inf|infinity|nan)$", re.IGNORECASE | re.ASCII)

PROBLEMS = ("node-budget", "direct", "coupling", "multipath", "selection", "frontier")

#: A float LP estimated to take longer than this runs only with --time-limit or --max-sequences.
UNBOUNDED_SECONDS = 60.0

#: Timed reference solves (HiGHS, float): problem -> (size measure, seconds, exponent); the
#: estimate is seconds * (size / measure) ** exponent. Measured: node-budget reduced form
#: V, L = 4, 9 (349,524 variables) 5.3 s and 4, 10 (1,398,100) 16.3 s; direct V, L, K = 3, 3, 3
#: (size bound 109,740 variables) 4.6 s and 3, 3, 4 (1.07e6) over 100 s; multipath relaxation
#: V, L, K = 4, 5, 3 (1,364 base variables) 1.5 s, 3, 7, 2 (3,279) 11.5 s, 4, 6, 2 (5,460)
#: 56.9 s and 3, 8, 2 (9,840) over 100 s.
REFERENCE = {
    "node-budget": (349_524, 5.3, 1.0),
    "direct": (109_740, 4.6, 1.5),
    "multipath": (5_460, 56.9, 3.0),
}


def lp_size(problem: str, V: int, L: int, K: int) -> tuple[int, str]:
    """The size measure of `REFERENCE` for one problem, and what it counts."""
    base = sum(V**j for j in range(1, L + 1))
    if problem == "direct":
        from .direct import direct_size

        return direct_size(V, L, K)[0], "variables (upper bound)"
    if problem == "multipath":
        return base, "base variables before cuts"
    return base, "variables"


def estimate_lp_seconds(problem: str, V: int, L: int, K: int) -> float:
    """Rough float solve time of an LP (`REFERENCE`); 0 for the closed-form coupling bound."""
    if problem not in REFERENCE:
        return 0.0
    size, _ = lp_size(problem, V, L, K)
    measure, seconds, power = REFERENCE[problem]
    if size > 10**30:
        return float("inf")
    return seconds * (size / measure) ** power


def guard_time(args, V: int, L: int, K: int) -> None:
    """Refuse a solve estimated over `UNBOUNDED_SECONDS` unless --time-limit or
    --max-sequences was given; note a long estimate on stderr."""
    if args.exact or args.problem not in REFERENCE:
        return
    est = estimate_lp_seconds(args.problem, V, L, K)
    size, what = lp_size(args.problem, V, L, K)
    if est > UNBOUNDED_SECONDS and args.time_limit is None and args.max_sequences is None:
        raise SizeLimitError(
            f"{args.problem} LP with V = {V}, L = {L}, K = {K}: {limits.human_count(size)} "
            f"{what}, estimated {limits.human_seconds(est)} (over {UNBOUNDED_SECONDS:.0f} s); "
            "run it with --time-limit SECONDS to stop it there, or --max-sequences N to accept "
            "the size, or use a smaller instance")
    if est > limits.NOTE_SECONDS:
        limits.note(f"{args.problem} LP: {limits.human_count(size)} {what}, estimated "
                    f"{limits.human_seconds(est)}")


def cmd_lp(args) -> int:
    from . import coupling_bound, direct_lp, multipath_lp, node_budget_lp, selection_lp

    K = args.paths
    budgets = [b for b in (args.tv, args.kl) if b is not None]
    if args.problem == "frontier" and len(budgets) != 1:
        raise SpectheoryError("--problem frontier needs exactly one budget: --tv DELTA or "
                              "--kl DELTA")
    if args.problem != "frontier" and budgets:
        raise SpectheoryError("--tv and --kl apply to --problem frontier only")
    if args.problem in ("node-budget", "coupling") and K != 1:
        raise SpectheoryError(f"--paths {K}: the {args.problem} problem is single-path "
                              "(use --problem direct, multipath or selection for K paths)")
    if args.exact and args.problem == "multipath":
        raise SpectheoryError("--exact is not available for the multipath relaxation (float "
                              "cutting planes); use --problem direct --exact for an exact K-path "
                              "optimum")
    if args.drafting != "iid" and args.problem not in ("direct", "selection", "frontier"):
        raise SpectheoryError(f"--drafting {args.drafting} applies to --problem direct and "
                              "selection only")
    if args.solver is not None and args.problem == "coupling":
        raise SpectheoryError("--solver does not apply to --problem coupling (a closed form)")
    if args.solver is not None and args.exact:
        raise SpectheoryError(f"--solver {args.solver} picks a float route; --exact solves with "
                              "an exact certificate of its own: drop --solver or --exact")
    inst = load_instance(args.instance, exact=args.exact, tol=row_tol(args))
    guard_time(args, inst.vocab_size, inst.block_length, K)
    limit = args.max_sequences
    if args.problem == "node-budget":
        res = node_budget_lp(inst, exact=args.exact, solver=args.solver, limit=limit)
    elif args.problem == "direct":
        res = direct_lp(inst, paths=K, exact=args.exact, solver=args.solver, limit=limit,
                        drafting=args.drafting)
    elif args.problem == "selection":
        res = selection_lp(inst, paths=K, exact=args.exact, solver=args.solver, limit=limit,
                           drafting=args.drafting)
    elif args.problem == "coupling":
        res = coupling_bound(inst, exact=args.exact, limit=limit)
    elif args.problem == "frontier":
        from .frontier import frontier_lp

        res = frontier_lp(inst, tv=args.tv, kl=args.kl, paths=K,
                          drafting=args.drafting, exact=args.exact, solver=args.solver,
                          limit=limit)
    else:
        res = multipath_lp(inst, paths=K, solver=args.solver, limit=limit,
                           progress=limits.progress_enabled())
    limits.check_time(" (after the solve)")
    emit(res.to_json(), args.json, res.summary())
    return 0


def _budget_type(name: str):
    """An argparse type for a divergence budget on the command line: a nonnegative decimal or
    fraction (`spectheory.lp.frontier`'s checks: finite, within the float range, its length and
    exponent bounded before any Fraction is built), kept as a Fraction (exact) and converted to
    float by the float routes."""
    def parse(text: str):
        import argparse

        from .frontier import _budget
        from .result import LPError

        try:
            return _budget(text, name, exact=True)
        except LPError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = "budget"
    return parse


def register(sub) -> None:
    from .report import contribute

    contribute()  # the LP section of `spectheory report`
    p = sub.add_parser(
        "lp", help="optimality LPs: node-budget, direct, coupling, multipath, selection, frontier",
        description="Solve an optimality LP; the optimum is in block-efficiency units E[tau+1]. "
                    "--max-sequences caps the number of LP variables. A float solve estimated "
                    f"over {UNBOUNDED_SECONDS:.0f} s is refused unless --time-limit (stop there) "
                    "or --max-sequences (accept the size) is given. The frontier LP is capped at "
                    "60,000 variables by default (a solve under a minute; V, L = 6, 4 has "
                    "55,986); --max-sequences N replaces that cap.")
    add_instance_options(p, "cap on the LP's variables (default: 8,000,000 float, 200,000 exact, "
                            "60,000 for the frontier LP; env SPECTHEORY_MAX_LP_VARIABLES, under "
                            "--exact SPECTHEORY_MAX_EXACT_LP_VARIABLES)")
    p.add_argument("--problem", choices=PROBLEMS, default="node-budget",
                   help="node-budget (single-path optimum), direct (all valid K-path "
                        "verifiers, tiny instances), coupling (full-knowledge bound), "
                        "multipath (compact K-path relaxation), selection (best 'select a "
                        "path, then block-verify it' rule), frontier (best lossy verifier "
                        "within --tv or --kl of the target)")
    p.add_argument("--paths", type=int_in(1, MAX_PATHS), default=1,
                   help=f"number K of drafted paths (direct, multipath, selection; "
                        f"1..{MAX_PATHS}, default 1)")
    p.add_argument("--drafting", choices=DRAFTING, default="iid",
                   help="direct and selection LPs: i.i.d. paths (default), first tokens "
                        "without replacement (norep) or SpecHub's hub drafting (hub, K <= 2)")
    p.add_argument("--tv", type=_budget_type("TV"), default=None, metavar="DELTA",
                   help="frontier: total-variation budget (a number or a fraction such as 1/20; "
                        "exact with --exact). The frontier LP is refused over 60,000 variables "
                        "(under a minute) unless --max-sequences N raises the cap")
    p.add_argument("--kl", type=_budget_type("KL"), default=None, metavar="DELTA",
                   help="frontier: KL(output || target) budget (cvxpy)")
    p.add_argument("--solver", choices=("highs", "cvxpy"), default=None,
                   help="float LP route (default highs: HiGHS on the sparse matrices); not "
                        "with --exact")
    # argparse reads an argument that starts with "-" as an option unless it matches its
    # negative-number pattern (-N and -N.N only), so "--tv -1/20" or "--tv -1e-3" used to end in
    # "expected one argument"; a negative decimal, exponent, fraction, -inf or -nan now reaches
    # the budget's own check ("must be a finite number >= 0"). The lp parser has no option that
    # looks like a negative number, which argparse's pattern exists to tell apart.
    p._negative_number_matcher = NEGATIVE_NUMBER
    p.set_defaults(func=cmd_lp)
