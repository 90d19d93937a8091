"""HSD, hierarchical speculative decoding (arXiv 2601.05724): Algorithm 2's losslessness
(Theorem 6), its claimed gain over block verification (Theorem 7), and the released code.

Notation: one drafted path of L tokens, one iteration; the paper counts accepted draft tokens
(tau) and compares expected accepted lengths; target and draft by role (p, q)."""

from __future__ import annotations

from .common import Claim, Finding, Hypotheses, all_hold, analysis, be, rnd, toy, tv


def c_hsd_equals_block() -> Finding:
    same, n = [], 0
    for V, L in ((2, 2), (2, 3), (3, 2)):
        for seed in range(4):
            inst = rnd(V, L, seed, 12)
            a, b = analysis(inst, "hsd"), analysis(inst, "block")
            same.append(a.tau_pmf == b.tau_pmf and a.tv_to_target == 0 and
                        all(x == y for x, y in zip(a.output_law, b.output_law)))
            n += 1
    return Finding(f"HSD's tau law and output law equal block verification's exactly on "
                   f"{sum(same)} of {n} instances; TV = 0", all_hold(same),
                   "random(V,L,0..3,12), (V, L) = (2,2), (2,3), (3,2)")


def c_hsd_strictly_more() -> Finding:
    t = toy(3)
    h, b = be(t, "hsd"), be(t, "block")
    return Finding(f"E[tau+1] at L = 3: HSD {h}, block {b} (equal; equal everywhere, see "
                   f"hsd-equals-block)", "confirmed" if h > b else "refuted", "toy, L = 3")


def c_hsd_released() -> Finding:
    t = toy()
    d = tv(t, "hsd-released")
    return Finding(f"TV {d}; E[tau+1] {be(t, 'hsd-released')} above block's optimum "
                   f"{be(t, 'block')}", "confirmed" if d == 0 else "refuted", "toy")


HSD = ("arXiv 2601.05724: target and draft by role (p, q); tau = accepted draft tokens of one "
       "iteration; the ledger compares E[tau + 1] (equal gaps)")
SINGLE = dict(drafting=("single",), K=(1,))

ROWS = [
    Claim("hsd-equals-block", "arXiv 2601.05724", "Theorem 6 (Algorithm 2)", "theorem",
          "HSD is a lossless sequence-level verifier", HSD, Hypotheses(**SINGLE), "confirmed",
          c_hsd_equals_block),
    Claim("hsd-beats-block", "arXiv 2601.05724", "Theorem 7", "theorem",
          "HSD accepts strictly more tokens than block verification for L > 1", HSD,
          Hypotheses(**SINGLE, L=(2, 3, 4)), "refuted", c_hsd_strictly_more),
    Claim("hsd-released-code", "arXiv 2601.05724 (released code)", "Listing 2 and the released "
          "verifier", "released code", "the released HSD code keeps the target law", HSD,
          Hypotheses(**SINGLE, notes="the code's control flow as released"), "refuted",
          c_hsd_released),
]
