"""Khisti et al., "Multi-Draft Speculative Sampling: Canonical Decomposition and Theoretical
Limits" (ICLR 2025, arXiv 2410.18234): the importance-sampling decomposition of the optimal
token-level selection, full acceptance with two (and K) identical drafts, the closed form for two
identical drafts, and the ordering of Table 3.

Notation: the paper works at one token step (L = 1); its drafts come from draft models that are
identical in Theorems 2 and 3 (spectheory's K i.i.d. paths from q); its acceptance probability
is E[tau] at L = 1. The formulas are transcribed by role (target, draft) into spectheory's p, q."""

from __future__ import annotations

from fractions import Fraction

from .common import (RANDOM_L1, Claim, Finding, Hypotheses, all_hold, be, direct, note_rows,
                      one, rnd, rows)


def c_khisti_canonical() -> Finding:
    from spectheory.bounds import optimal_acceptance
    from spectheory.verifiers.coupling import node_acceptance
    from spectheory.verifiers.khisti import khisti_plan

    ok, n = [], 0
    for a in RANDOM_L1 + [(2, 1, 0, 3)]:
        p, q = rows(rnd(*a))
        for K in (2, 3, 4):
            note_rows(p, q, "iid", K)
            sel = khisti_plan(q, p, K, "iid").stats["selected_acceptance"]
            alpha = optimal_acceptance(p, q, K)[0]
            ok.append(sel == alpha == node_acceptance(khisti_plan, q, p, K, "iid"))
            n += 1
    return Finding(f"importance-weighted selection + single-draft verification reaches alpha* "
                   f"exactly in {sum(ok)} of {n} cases", all_hold(ok),
                   ", ".join(f"random{a}" for a in RANDOM_L1) + ", K = 2..4")


FIG2 = [(["1/3", "0", "2/3"], "8/9"), (["1/3", "1/18", "11/18"], "17/18"),
        (["1/3", "1/9", "5/9"], "1"), (["1/6", "0", "5/6"], "13/18"),
        (["1/6", "1/3", "1/2"], "1")]


def c_khisti_full_acceptance() -> Finding:
    from spectheory.bounds import full_acceptance_possible, optimal_acceptance

    u = [Fraction(1, 3)] * 3
    ok = []
    for p, _ in FIG2:
        p = [Fraction(x) for x in p]
        note_rows(p, u, "iid", 2)
        ok.append(full_acceptance_possible(p, u, 2)[0] == (optimal_acceptance(p, u, 2)[0] == 1))
    for a in RANDOM_L1:
        p, q = rows(rnd(*a))
        note_rows(p, q, "iid", 2)
        ok.append(full_acceptance_possible(p, q, 2)[0] == (optimal_acceptance(p, q, 2)[0] == 1))
    return Finding(f"alpha* = 1 exactly when p(S) >= q(S)^2 for every S, in {sum(ok)} of "
                   f"{len(ok)} cases (both outcomes occur)", all_hold(ok),
                   "uniform q on 3 tokens with Figure 2's targets; random L=1 instances")


def c_khisti_closed_form() -> Finding:
    from spectheory.bounds import two_identical_drafts_acceptance

    u = [Fraction(1, 3)] * 3
    ok, vals = [], []
    for p, want in FIG2:
        inst = one(p, ["1/3"] * 3)
        a = two_identical_drafts_acceptance([Fraction(x) for x in p], u)
        ok.append(a == Fraction(want) and 1 + a == direct(inst, 2))
        vals.append(str(a))
    return Finding("Theorem 3's closed form = direct LP for Figure 2's targets: " +
                   ", ".join(vals), all_hold(ok), "uniform q on 3 tokens, K = 2, L = 1")


def c_khisti_remark2() -> Finding:
    from spectheory.bounds import full_acceptance_possible, optimal_acceptance

    ok, both = [], set()
    for V in (2, 3):
        for s in range(10):
            p, q = rows(rnd(V, 1, s, 4))
            for K in (3, 4):
                note_rows(p, q, "iid", K)
                full = optimal_acceptance(p, q, K)[0] == 1
                both.add(full)
                ok.append(full_acceptance_possible(p, q, K)[0] == full)
    return Finding(f"alpha* = 1 exactly when p(S) >= q(S)^K for every S (K = 3, 4), in "
                   f"{sum(ok)} of {len(ok)} cases; {len(both)} outcome(s) seen", all_hold(ok),
                   "random(V,1,0..9,4), V = 2, 3")


def c_khisti_ordering() -> Finding:
    ok, vals = [], []
    for p, _ in FIG2:
        inst = one(p, ["1/3"] * 3)
        k, t, s = (float(be(inst.to_float(), n, 2)) for n in ("khisti", "spectr",
                                                                "specinfer"))
        ok.append(k >= t - 1e-12 and t >= s - 1e-12)
        vals.append(f"{k:.4f}/{t:.4f}/{s:.4f}")
    return Finding("E[tau+1] IS/SpecTr/SpecInfer at L=1, K=2: " + "; ".join(vals),
                   "reproduced" if all(ok) else "not reproduced",
                   "uniform q on 3 tokens with Figure 2's targets (float64)")


KH = ("arXiv 2410.18234: target and draft by role as spectheory's p, q; acceptance probability "
      "P*(acc) = E[tau] at L = 1, one iteration; E[tau + 1] = 1 + P*(acc)")
IDENT = "identical draft models (K i.i.d. drafts from one q)"

ROWS = [
    Claim("khisti-canonical", "arXiv 2410.18234", "Theorem 1", "theorem",
          "importance-weighted selection then single-draft speculative sampling attains the "
          "optimal acceptance", KH, Hypotheses(("iid",), K=(2, 3, 4), L=(1,)), "confirmed",
          c_khisti_canonical),
    Claim("khisti-full-acceptance", "arXiv 2410.18234", "Theorem 2", "theorem",
          "with two identical drafts, acceptance 1 is possible iff p(S) >= q(S)^2 for every set "
          "S", KH, Hypotheses(("iid",), K=(2,), L=(1,), notes=IDENT), "confirmed",
          c_khisti_full_acceptance),
    Claim("khisti-closed-form", "arXiv 2410.18234", "Theorem 3", "theorem",
          "two identical drafts: alpha* = min_S p(S) + q(S^c)^2 + 2 q(S) q(S^c)", KH,
          Hypotheses(("iid",), K=(2,), L=(1,), notes=IDENT), "confirmed", c_khisti_closed_form),
    Claim("khisti-remark-2", "arXiv 2410.18234", "Remark 2", "conjecture",
          "K identical drafts: acceptance 1 iff p(S) >= q(S)^K for every S", KH,
          Hypotheses(("iid",), K=(3, 4), L=(1,), notes=IDENT), "confirmed", c_khisti_remark2),
    Claim("khisti-ordering", "arXiv 2410.18234", "Table 3", "empirical observation",
          "importance sampling accepts more than SpecTr, which accepts more than SpecInfer", KH,
          Hypotheses(("iid",), K=(2,), L=(1,), exact=False, notes="float64 E[tau + 1]"),
          "reproduced", c_khisti_ordering,
          reading="SpecTr as K-SEQ (arXiv 2310.15141) with the smallest valid rho, the one of "
                  "largest acceptance"),
]
