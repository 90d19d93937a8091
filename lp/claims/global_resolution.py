"""Global Resolution (arXiv 2511.15898): the relaxed optimal-transport LP shared by importance
sampling and subset selection, its reduction to a convex program, and the truncated solver.

Notation: one token step (L = 1) of one iteration, K i.i.d. drafts from one draft model; the
acceptance is E[tau]; target and draft by role (p, q). The convex program is solved in float64,
so the row that checks it compares within a stated tolerance."""

from __future__ import annotations

from fractions import Fraction

from .common import (RANDOM_L1, Claim, Finding, Hypotheses, all_hold, note, note_rows, rnd,
                      rows)


def c_gr_same_relaxation() -> Finding:
    from spectheory.bounds import optimal_acceptance
    from spectheory.verifiers.coupling import node_acceptance, outcomes
    from spectheory.verifiers.hu import hu_plan, max_transport
    from spectheory.verifiers.khisti import khisti_plan

    ok, n = [], 0
    for a in RANDOM_L1:
        p, q = rows(rnd(*a))
        for K in (2, 3):
            note_rows(p, q, "iid", K)
            flow = max_transport(outcomes(q, K, "iid"), p)[1]
            ok.append(flow == optimal_acceptance(p, q, K)[0] ==
                      node_acceptance(khisti_plan, q, p, K, "iid") ==
                      node_acceptance(hu_plan, q, p, K, "iid"))
            n += 1
    return Finding(f"max-flow value = subset formula = importance-sampling optimum, exactly, in "
                   f"{sum(ok)} of {n} cases", all_hold(ok), ", ".join(f"random{a}"
                                                                 for a in RANDOM_L1))


def c_gr_convex() -> Finding:
    from spectheory.bounds import optimal_acceptance
    from spectheory.verifiers.coupling import node_acceptance, node_output_law
    from spectheory.verifiers.global_resolution import global_resolution_plan

    last = {}

    def plan(q, p, m, scheme):
        # the acceptance and the output law read one plan: it is a function of (q, p, m, scheme)
        # alone (a deterministic solve, its entries the same whenever read), so the second
        # reading takes the plan the first one built for the same rows
        key = (tuple(q), tuple(p), m, scheme)
        if key not in last:
            last.clear()
            last[key] = global_resolution_plan(q, p, m, scheme)
        return last[key]

    gap, exact = Fraction(0), True
    for V in (3, 4, 5, 6):
        for s in range(3):
            p, q = rows(rnd(V, 1, s, 11))
            for K in (2, 3, 4):
                note_rows(p, q, "iid", K, exact=False)
                acc = node_acceptance(plan, q, p, K, "iid")
                gap = max(gap, optimal_acceptance(p, q, K)[0] - acc)
                exact &= node_output_law(plan, q, p, K, "iid") == p
    verdict = "confirmed" if gap <= 1e-9 and exact else "refuted"
    # the gap is the Newton solve's error: its digits below the 1e-9 tolerance move with the
    # BLAS and numpy build (6.2e-12 on one, 8.9e-11 on another), so the ledger states the bound
    # it checked and prints the value only where the bound fails
    shown = "below 1e-9" if gap <= 1e-9 else f"{float(gap):.2e}"
    return Finding(f"largest gap to alpha* {shown} (V <= 6, K <= 4); output law exactly "
                   f"p after spectheory's repair", verdict, "random(V,1,0..2,11), V = 3..6")


def c_gr_truncation() -> Finding:
    from spectheory.engine.analysis import analyze_multipath
    from spectheory.inputs.random_instances import random_instance
    from spectheory.verifiers.global_resolution import truncated_global_resolution

    parts, ok = [], []
    for tau in (0.01, 0.05):
        spec = truncated_global_resolution(tau)
        worst = 0.0
        for s in range(4):
            inst = random_instance(8, 1, s, alpha=0.3)
            for K in (2, 3):
                note(inst, "iid", K)
                worst = max(worst, 2 * analyze_multipath(inst, spec, K).tv_to_target)
        ok.append(1e-6 < worst <= 15 * tau)
        parts.append(f"tau = {tau}: largest L1 distance to p {worst:.3g} <= 15 tau")
    return Finding("; ".join(parts) + " (the paper's handling of the truncated sets is not "
                   "published: spectheory's reading)", "qualified" if all(ok) else "refuted",
                   "random_instance(8, 1, 0..3, alpha=0.3) float64, K = 2, 3")



GR = ("arXiv 2511.15898: target and draft by role (p, q); acceptance = E[tau] at L = 1, one "
      "iteration; K i.i.d. drafts")

ROWS = [
    Claim("gr-same-relaxation", "arXiv 2511.15898", "Theorem 4.1", "theorem",
          "Khisti's importance sampling and Hu's subset selection solve the same relaxed OT LP",
          GR, Hypotheses(("iid",), K=(2, 3), L=(1,)), "confirmed", c_gr_same_relaxation),
    Claim("gr-convex-program", "arXiv 2511.15898", "the convex reduction of the transport",
          "theorem", "the OT reduces to a convex program in at most V variables whose rule is "
          "optimal", GR, Hypotheses(("iid",), K=(2, 3, 4), L=(1,), exact=False,
                                    notes="the program solved in float64 (gap <= 1e-9)"),
          "confirmed", c_gr_convex),
    Claim("gr-truncation-bound", "arXiv 2511.15898", "Lemma 6.6", "lemma",
          "the truncated solver deviates from p by at most 15 tau in L1", GR,
          Hypotheses(("iid",), K=(2, 3), L=(1,), exact=False,
                     notes="the handling of the truncated sets is spectheory's reading"),
          "qualified", c_gr_truncation),
]
