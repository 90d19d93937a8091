"""The optimality LPs' part of ``spectheory report``.

`contribute` adds to `spectheory.cli.report` (which does not import this package) a section
showing that block verification attains the node-budget LP optimum (Thomas & Pal, arXiv
2602.16961) and the direct LP over all valid verifiers, and the direct K-path LP optimum as the
reference of the multi-path table. Every comparison printed is a counted check of the report.
"""

from __future__ import annotations

from spectheory.engine.analysis import analyze
from spectheory.inputs.random_instances import random_instance
from spectheory.cli.report import (Checks, Section, add_multipath_optimum, add_section, mark,
                                   toy_instance)

from .coupling import coupling_bound
from .direct import direct_lp
from .node_budget import node_budget_lp

#: |LP optimum - block E[tau+1]| still called equal in float64 (LP solver tolerance).
LP_TOL = 1e-8


def section_lp(args, checks: Checks) -> list[str]:
    """Node-budget LP optimum = block verification's E[tau+1] (exact and float64); the direct LP
    over all valid single-path verifiers agrees; more paths and full knowledge can only help."""
    inst = toy_instance()
    nb = node_budget_lp(inst, exact=True)
    blk = analyze(inst, "block").block_efficiency
    d1, d2 = (direct_lp(inst, K, exact=True).optimum for K in (1, 2))
    cb = coupling_bound(inst, exact=True).optimum
    eq = checks("node-budget LP optimum = block E[tau+1] (two-token example, exact)",
                nb.optimum == blk)
    ok = [checks("direct LP optimum, K = 1 = block E[tau+1] (exact)", d1 == blk),
          checks("direct LP optimum, K = 2 >= K = 1 (exact)", d2 >= d1),
          checks("coupling bound >= single-path optimum (exact)", cb >= d1)]
    lines = [f"two-token example, exact rationals: node-budget LP optimum {nb.optimum} "
             f"({nb.solver}: primal and dual verified exactly) = block E[tau+1] {blk}: "
             f"{mark(eq, 'equal', 'DIFFERENT')}",
             f"  direct LP over all valid verifiers, K = 1: {d1} (= block: {mark(ok[0])});"
             f" K = 2 i.i.d. paths: {d2} (>= K = 1: {mark(ok[1])});"
             f" full-knowledge coupling bound: {cb} (>= K = 1: {mark(ok[2])})"]
    inst = random_instance(4, 6, args.seed, alpha=0.7)
    nb = node_budget_lp(inst)
    blk = float(analyze(inst, "block").block_efficiency)
    diff = abs(nb.optimum - blk)
    eq = checks(f"node-budget LP optimum = block E[tau+1] (V = 4, L = 6, seed {args.seed}, "
                f"float64)", diff <= LP_TOL)
    lines.append(f"random V = 4, L = 6 (seed {args.seed}), float64: node-budget LP "
                 f"{nb.optimum:.10f} ({nb.solver}, {nb.variables:,} variables, {nb.seconds:.2f} s)"
                 f" vs block {blk:.10f}: |difference| = {diff:.1e} "
                 f"(<= {LP_TOL:g}: {mark(eq, 'equal', 'DIFFERENT')})")
    return lines


def direct_optimum(instance, paths: int, drafting: str) -> float:
    """Largest E[tau+1] of any valid K-path verifier
    ([`direct_lp`][spectheory.lp.direct.direct_lp]), float64."""
    return float(direct_lp(instance, paths, drafting=drafting).optimum)


def contribute() -> None:
    """Add the LP section (before the multi-path one) and the direct LP optimum row of the
    multi-path table to ``spectheory report``; calling it again changes nothing."""
    add_section(Section("lp", "Optimality LPs: block verification attains the node-budget LP "
                              "optimum", section_lp), before="multipath")
    add_multipath_optimum("LP optimum", direct_optimum)
