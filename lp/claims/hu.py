"""Hu et al., "Towards Optimal Multi-draft Speculative Decoding" (ICLR 2025, arXiv 2502.18779):
the optimal multi-draft acceptance as a subset problem (the dual of the optimal transport), its
threshold sets, drafting without replacement, and recursive rejection sampling's gap.

Notation: the paper's claims concern one token step (L = 1) of one iteration; its acceptance
rate alpha is P(the emitted token is one of the drafts) = E[tau] at L = 1, so E[tau + 1] =
1 + alpha. The target and the draft keep their roles (spectheory's p and q)."""

from __future__ import annotations

from fractions import Fraction

from .common import (RANDOM_L1, Claim, Finding, Hypotheses, all_hold, be, direct, f,
                      note_rows, rnd, rows)


def c_hu_subset_formula() -> Finding:
    from spectheory.bounds import optimal_acceptance

    ok, n = [], 0
    for a in RANDOM_L1:
        inst = rnd(*a)
        p, q = rows(inst)
        for K in (2, 3):
            for drafting in ("iid", "norep"):
                ok.append(1 + optimal_acceptance(p, q, K, drafting)[0] ==
                          direct(inst, K, drafting))
                n += 1
    return Finding(f"1 + min_H [p(H) - D(all drafts in H)] = direct LP exactly in {sum(ok)} of "
                   f"{n} cases (K = 2, 3; i.i.d. and without replacement)", all_hold(ok),
                   ", ".join(f"random{a}" for a in RANDOM_L1))


def c_hu_threshold_sets() -> Finding:
    import itertools

    from spectheory.bounds import draws_inside, optimal_acceptance, ratio_order

    ok, n = [], 0
    for V in (3, 4, 5):
        for s in range(6):
            p, q = rows(rnd(V, 1, s, 7))
            for K in (2, 3):
                note_rows(p, q, "iid", K)
                note_rows(p, q, "norep", K)
                brute = min(sum((p[a] for a in H), Fraction(0)) + 1 - sum(
                    (q[a] for a in H), Fraction(0)) ** K for r in range(V + 1)
                    for H in itertools.combinations(range(V), r))
                ok.append(brute == optimal_acceptance(p, q, K)[0])
                # without replacement: the best threshold set of p/q against all 2^V sets
                order = ratio_order(p, q)
                pref = min(sum((p[a] for a in order[:k]), Fraction(0)) + 1 -
                           draws_inside(q, K, set(order[:k])) for k in range(V + 1))
                ok.append(pref == optimal_acceptance(p, q, K, "norep")[0])
                n += 2
    return Finding(f"a lower threshold set of p/q attains the minimum over all 2^V sets in "
                   f"{sum(ok)} of {n} cases (i.i.d. and without replacement)", all_hold(ok),
                   "random(V,1,0..5,7), V = 3, 4, 5, K = 2, 3")


def c_hu_norep_beats_iid() -> Finding:
    from spectheory.bounds import optimal_acceptance

    worse, n = None, 0
    for V in (2, 3, 4):
        for s in range(8):
            p, q = rows(rnd(V, 1, s, 7))
            for K in (2, 3):
                note_rows(p, q, "iid", K)
                note_rows(p, q, "norep", K)
                d = optimal_acceptance(p, q, K, "norep")[0] - optimal_acceptance(p, q, K)[0]
                n += 1
                if d < 0 and worse is None:
                    worse = (V, s, K, d)
    if worse:
        return Finding(f"without replacement below i.i.d. by {f(-worse[3])}", "refuted",
                       f"random({worse[0]},1,{worse[1]},7) K={worse[2]}")
    return Finding(f"alpha*(without replacement) >= alpha*(i.i.d.) in all {n} cases",
                   "confirmed", "random(V,1,0..7,7), V = 2, 3, 4, K = 2, 3")


def c_hu_rrs_gap() -> Finding:
    inst = rnd(3, 1, 2, 6)
    opt_i, opt_n = direct(inst, 2), direct(inst, 2, "norep")
    rrs, rrsn = be(inst, "specinfer", 2), be(inst, "specinfer-norep", 2)
    return Finding(f"E[tau+1], K=2: RRS {rrs} < optimum {opt_i} (i.i.d.); RRS without "
                   f"replacement {rrsn} < optimum {opt_n}", all_hold([rrs < opt_i, rrsn < opt_n]),
                   "random(3,1,2,6)")



HU = ("arXiv 2502.18779: target p, draft q (roles as in spectheory); acceptance rate alpha = "
      "E[tau] at L = 1, one iteration; the ledger compares 1 + alpha with E[tau + 1]")
STEP = dict(L=(1,))

ROWS = [
    Claim("hu-subset-formula", "arXiv 2502.18779", "Eq. 8 (dual of the optimal transport)",
          "theorem", "the optimal multi-draft acceptance is min_H [p(H) + 1 - P(all drafts in H)], "
          "so E[tau + 1] = 1 + that, with and without replacement", HU,
          Hypotheses(("iid", "norep"), K=(2, 3), **STEP), "confirmed", c_hu_subset_formula),
    Claim("hu-threshold-sets", "arXiv 2502.18779", "the q-convex cases of the subset problem",
          "theorem",
          "the minimising H is among the V + 1 threshold sets of p/q", HU,
          Hypotheses(("iid", "norep"), K=(2, 3), **STEP), "confirmed", c_hu_threshold_sets),
    Claim("hu-norep-beats-iid", "arXiv 2502.18779", "comparison of drafting methods",
          "stated result", "drafting without replacement gives a higher optimal acceptance than "
          "i.i.d. drafting", HU, Hypotheses(("iid", "norep"), K=(2, 3), **STEP), "confirmed",
          c_hu_norep_beats_iid),
    Claim("hu-rrs-gap", "arXiv 2502.18779", "gap of existing verifiers to the bound",
          "stated result", "recursive rejection sampling, with and without replacement, falls "
          "short of the optimum", HU, Hypotheses(("iid", "norep"), K=(2,), **STEP), "confirmed",
          c_hu_rrs_gap),
]
