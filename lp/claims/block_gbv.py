"""Block verification (Sun et al., arXiv 2403.10444), its optimality and greedy multi-path block
verification, GBV (Thomas & Pal, arXiv 2602.16961), and spectheory's selection-rule result.

Notation: arXiv 2403.10444 writes M_s for the small (draft) model and M_b for the large (target)
model, spectheory's q and p; its block efficiency is the expected number of tokens one iteration
emits, E[tau + 1]. arXiv 2602.16961 states its results for the same per-iteration quantities."""

from __future__ import annotations

from fractions import Fraction

from .common import (OURS, RANDOM_L2, Claim, Finding, Hypotheses, all_hold, be, direct, f,
                      note, rnd, toy)


def selection(inst, K):
    """The best select-a-path-then-block-verify rule's E[tau + 1] (exact)."""
    from ..selection import selection_lp

    note(inst, "iid", K)
    return selection_lp(inst, K, exact=True).optimum


def c_block_toy() -> Finding:
    t = toy()
    tok, blk = be(t, "token") - 1, be(t, "block") - 1
    return Finding(f"E[tau]: token {tok}, block {blk}",
                   all_hold([tok == Fraction(10, 9), blk == Fraction(11, 9)]), "toy")


def c_block_never_worse() -> Finding:
    gains = []
    for V, L, s in [(2, 2, s) for s in range(6)] + [(3, 2, s) for s in range(4)] + \
            [(2, 3, s) for s in range(3)]:
        inst = rnd(V, L, s)
        gains.append(be(inst, "block") - be(inst, "token"))
    return Finding(f"smallest E[tau] gain of block over token {f(min(gains))}, over "
                   f"{len(gains)} instances", all_hold(g >= 0 for g in gains),
                   "random(2,2,0..5,8), random(3,2,0..3,8), random(2,3,0..2,8)")


def c_block_optimal() -> Finding:
    from ..node_budget import node_budget_lp

    ok, vals = [], []
    for inst in [toy()] + [rnd(*a) for a in RANDOM_L2]:
        note(inst, "single", 1)
        opt = node_budget_lp(inst, exact=True).optimum
        ok.append(opt == be(inst, "block"))
        vals.append(f(opt))
    return Finding(f"node-budget LP optimum = block E[tau+1] exactly: {', '.join(vals)}",
                   all_hold(ok), "toy, " + ", ".join(f"random{a}" for a in RANDOM_L2))


def c_block_off_path() -> Finding:
    ok, vals = [], []
    for inst in [toy(), rnd(2, 2, 3), rnd(3, 2, 1, 6)]:
        opt = direct(inst, 1)
        ok.append(opt == be(inst, "block"))
        vals.append(f(opt))
    return Finding(f"direct LP over all randomised maps (any information) = block: "
                   f"{', '.join(vals)}", all_hold(ok), "toy, random(2,2,3,8), random(3,2,1,6)")


def c_gbv_toy_optimum() -> Finding:
    t = toy()
    g, opt = be(t, "gbv", 2), direct(t, 2)
    return Finding(f"GBV K=2 {g}, direct LP {opt}", all_hold([g == opt == Fraction(212, 81)]),
                   "toy, K = 2 i.i.d.")


def c_gbv_best_selection() -> Finding:
    t = toy()
    s2, s3 = (selection(t, K) for K in (2, 3))
    g2, g3 = be(t, "gbv", 2), be(t, "gbv", 3)
    verdict = "qualified" if g2 == s2 and g3 < s3 else ("confirmed" if g3 == s3 else "refuted")
    return Finding(f"K=2: GBV {g2} = best selection rule {s2}; K=3: GBV {g3} < best selection "
                   f"rule {s3}", verdict, "toy")


def c_gbv_beats_block() -> Finding:
    t, inst = toy(), rnd(3, 2, 7)
    gt, bt = be(t, "gbv", 2), be(t, "block")
    gi, bi = be(inst, "gbv", 2), be(inst, "block")
    verdict = "qualified" if gt > bt and gi < bi else ("confirmed" if gi >= bi else "refuted")
    return Finding(f"toy: GBV K=2 {gt} > block {bt}; random(3,2,7,8): GBV K=2 {gi} < block "
                   f"{bi}", verdict, "toy, random(3,2,7,8)")


def c_gbv_monotone() -> Finding:
    t = toy(1)
    vals = [be(t, "gbv", K) for K in range(1, 7)]
    drops = [K for K in range(2, 7) if vals[K - 1] < vals[K - 2]]
    return Finding("GBV E[tau+1] for K = 1..6: " + ", ".join(map(str, vals)) +
                   (f" (falls from K = {drops[0] - 1} to K = {drops[0]})" if drops else ""),
                   "not reproduced" if drops else "reproduced", "toy L=1")


def c_selection_equals_direct() -> Finding:
    ok, vals = [], []
    for inst, K in [(toy(), 2), (toy(), 3), (rnd(2, 2, 3), 2), (rnd(3, 1, 4, 9), 2)]:
        s, d = selection(inst, K), direct(inst, K)
        ok.append(s == d)
        vals.append(f"{f(s)}={f(d)}" if s == d else f"{f(s)}!={f(d)}")
    return Finding("best selection rule vs direct LP: " + ", ".join(vals) + " (proved equal "
                   "in docs/selection-optimum.md)", all_hold(ok),
                   "toy K=2,3; random(2,2,3,8) K=2; random(3,1,4,9) K=2")



SUN = ("arXiv 2403.10444: M_s = draft (q), M_b = target (p); tau = accepted draft tokens in one "
       "iteration; the paper's block efficiency is E[tau + 1], per iteration")
TP = ("arXiv 2602.16961: draft and target as in spectheory (q, p); E[tau + 1] per iteration "
      "(block efficiency), K paths")
SINGLE = Hypotheses(("single",), K=(1,), notes="any lossless verifier of one drafted path")

ROWS = [
    Claim("block-toy", "arXiv 2403.10444", "worked example (two-token p, q, L = 2)",
          "stated result", "on the two-token example block verification gets E[tau] = 11/9, "
          "token verification 10/9", SUN, Hypotheses(("single",), K=(1,), L=(2,)), "confirmed",
          c_block_toy),
    Claim("block-never-worse", "arXiv 2403.10444", "the optimality theorem (implies it)",
          "theorem", "block verification never accepts fewer tokens than token verification",
          SUN, SINGLE, "confirmed", c_block_never_worse),
    Claim("block-optimal", "arXiv 2602.16961", "Theorem 3.3", "theorem",
          "block verification attains the node-budget LP optimum among valid single-path "
          "verifiers", TP, SINGLE, "confirmed", c_block_optimal),
    Claim("block-off-path", "arXiv 2403.10444", "the optimality theorem", "theorem",
          "block verification is optimal among all valid verifiers of one drafted path, even "
          "those that read off-path probabilities", SUN, SINGLE, "confirmed", c_block_off_path),
    Claim("gbv-toy-optimum", "arXiv 2602.16961", "two-token example", "stated result",
          "GBV with 2 i.i.d. paths attains the best valid 2-path verifier on the two-token "
          "example", TP, Hypotheses(("iid",), K=(2,), L=(2,)), "confirmed", c_gbv_toy_optimum),
    Claim("gbv-best-selection", "arXiv 2602.16961", "optimality of GBV among selection rules",
          "theorem", "GBV is optimal among select-a-path-then-block-verify rules", TP,
          Hypotheses(("iid",), K=(2, 3), notes="rules that select one path from the drafts and "
                     "block-verify it against its induced law"), "qualified",
          c_gbv_best_selection),
    Claim("gbv-beats-block", "arXiv 2602.16961", "multi-path gain", "stated result",
          "GBV with K > 1 paths accepts more than block verification", TP,
          Hypotheses(("iid", "single"), K=(1, 2)), "qualified", c_gbv_beats_block),
    Claim("gbv-monotone-K", "arXiv 2602.16961", "experiments (no theorem states it)",
          "empirical observation", "GBV's block efficiency grows with the number of paths K",
          TP, Hypotheses(("iid", "single"), K=(1, 2, 3, 4, 5, 6), L=(1,)), "not reproduced",
          c_gbv_monotone),
    Claim("selection-equals-direct", "spectheory", "docs/selection-optimum.md",
          "spectheory result", "the best select-then-block-verify rule equals the direct K-path "
          "LP optimum", OURS, Hypotheses(("iid",), K=(2, 3)), "confirmed",
          c_selection_equals_direct),
]
