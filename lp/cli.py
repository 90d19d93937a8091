"""``spectheory lp INSTANCE.json --problem {node-budget,direct,coupling,multipath} [--paths K]
[--exact] [--json]``: solve one of the optimality LPs and print its optimum in block-efficiency
units E[tau + 1], with solver, status, size and time. Bad input (unreadable or malformed
instance, sizes over the limits, a failed solve) is one line on stderr and exit code 2, as for
every ``spectheory`` command. ``--max-sequences`` caps the number of LP variables."""

from __future__ import annotations

import sys

from spectheory.commands import add_instance_options, emit, positive_int
from spectheory.errors import SpectheoryError
from spectheory.instances import load_instance

PROBLEMS = ("node-budget", "direct", "coupling", "multipath", "selection")


def cmd_lp(args) -> int:
    from . import coupling_bound, direct_lp, multipath_lp, node_budget_lp, selection_lp

    inst = load_instance(args.instance, exact=args.exact, tol=args.tol)
    K = args.paths
    limit = args.max_sequences
    if args.problem in ("node-budget", "coupling") and K != 1:
        raise SpectheoryError(f"--paths {K}: the {args.problem} problem is single-path "
                              "(use --problem direct or multipath for K paths)")
    if args.exact and args.problem == "multipath":
        raise SpectheoryError("--exact is not available for the multipath relaxation (float "
                              "cutting planes); use --problem direct --exact for an exact K-path "
                              "optimum")
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
    else:
        res = multipath_lp(inst, paths=K, solver=args.solver, limit=limit,
                           progress=sys.stderr.isatty())
    emit(res.to_json(), args.json, res.summary())
    return 0


def register(sub) -> None:
    from .report import contribute

    contribute()  # the LP section of `spectheory report`
    p = sub.add_parser("lp", help="optimality LPs: node-budget, direct, coupling, multipath")
    add_instance_options(p)
    p.add_argument("--problem", choices=PROBLEMS, default="node-budget",
                   help="node-budget (single-path optimum), direct (all valid K-path "
                        "verifiers, tiny instances), coupling (full-knowledge bound), "
                        "multipath (compact K-path relaxation), selection (best 'select a "
                        "path, then block-verify it' rule)")
    p.add_argument("--paths", type=positive_int, default=1,
                   help="number K of drafted paths (direct, multipath, selection; default 1)")
    p.add_argument("--drafting", choices=("iid", "norep"), default="iid",
                   help="direct and selection LPs: i.i.d. paths (default) or first tokens "
                        "without replacement")
    p.add_argument("--solver", choices=("highs", "cvxpy"), default=None,
                   help="float LP route (default highs: HiGHS on the sparse matrices)")
    p.set_defaults(func=cmd_lp)
