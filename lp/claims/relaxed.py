"""Relaxed (lossy) acceptance and its divergence certificates: Cactus (Hao, Mou, ICLR 2026, arXiv
2604.04987), the exact-certificate notion of "When Is a Draft Accepted?" (Sharma, arXiv
2606.30265), and the lossy frontier LP at zero budget against block verification's optimality
(Sun et al., arXiv 2403.10444).

Notation: Cactus writes p for the target and h for its reweighted target, h(x) = min(1, p(x) +
sqrt(2 delta p(x) (1 - p(x)))) at the drafted token (the rest scaled proportionally), and claims
D_KL(h || p) <= delta; spectheory's p is the same target. The checks are in
[`spectheory.lp.relaxed_claims`][spectheory.lp.relaxed_claims] (KL in float64 with a stated
error bound, on instances whose rows are exact rationals) and
[`spectheory.lp.frontier`][spectheory.lp.frontier] (exact rationals).
"""

from __future__ import annotations

from fractions import Fraction

from .common import OURS, Claim, Finding, Hypotheses, note, note_rows


def _cactus_instances():
    from spectheory.inputs.instances import instance_from_dict

    a = instance_from_dict({"vocab_size": 3, "block_length": 1, "target": ["1/2", "1/4", "1/4"],
                            "draft": ["1/4", "1/2", "1/4"]}, exact=True)
    b = instance_from_dict({"vocab_size": 2, "block_length": 1, "target": ["1/10", "9/10"],
                            "draft": ["1", "0"]}, exact=True)
    return [(a, "p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4), L = 1"),
            (b, "p = (1/10, 9/10), q = (1, 0), L = 1")]


def _cactus(which: str) -> Finding:
    from spectheory.lp.relaxed_claims import cactus_h_claim, cactus_output_claim

    fn = cactus_h_claim if which == "h" else cactus_output_claim
    verdicts = []
    for inst, name in _cactus_instances():
        note(inst, "single", 1)
        verdicts.append(fn(inst, 0.1, name))
    refuted = [v for v in verdicts if v.refuted]
    ours = "; ".join(f"{v.instance}: KL {v.exact:.6g} (float64, error <= {v.error:.1g}) against "
                     f"delta = {v.bound:g}{' at ' + v.where if v.where else ''}"
                     for v in verdicts)
    return Finding(ours, "refuted" if refuted else "confirmed",
                   (refuted[0] if refuted else verdicts[0]).instance)


def c_cactus_h() -> Finding:
    return _cactus("h")


def c_cactus_emitted() -> Finding:
    return _cactus("output")


def c_greedy_radius() -> Finding:
    from spectheory.lp.relaxed_claims import check_greedy_radius

    row = [Fraction(1, 2), Fraction(3, 10), Fraction(1, 5)]
    note_rows(row, row, "single", 1, exact=False)
    directions = {"rp": "KL(r || p)", "pr": "KL(p || r)"}
    verdicts = {d: check_greedy_radius(row, 0, d, "p = (1/2, 3/10, 1/5)") for d in directions}
    ok = all(not v.refuted and abs(v.exact - v.bound) <= v.error for v in verdicts.values())
    ours = "; ".join(f"{directions[d]}: closed form {v.bound:.9g}, convex solver {v.exact:.9g}"
                     for d, v in verdicts.items())
    return Finding(ours, "confirmed" if ok else "refuted", "p = (1/2, 3/10, 1/5)")


def _frontier():
    import spectheory as st
    from spectheory.lp.coupling import coupling_bound
    from spectheory.lp.frontier import free_block_lp, frontier_lp
    from spectheory.lp.trust import _tables, greedy_value

    inst = st.random_instance(3, 2, 0, alpha=0.5, denominator=12)
    note(inst, "single", 1)
    p, Q = _tables(inst, True)
    return inst, greedy_value(p, Q, 2), frontier_lp, free_block_lp, coupling_bound


FRONTIER_INSTANCE = "random_instance(3, 2, 0, alpha=0.5, denominator=12)"


def c_frontier_zero() -> Finding:
    inst, block, frontier_lp, _, _ = _frontier()
    front = frontier_lp(inst, tv=0, exact=True, rules=()).optimum
    return Finding(f"frontier LP at TV 0: {front}; block verification: {block}",
                   "confirmed" if front == block else "refuted", FRONTIER_INSTANCE)


def c_free_block() -> Finding:
    inst, block, _, free_block_lp, coupling_bound = _frontier()
    free = free_block_lp(inst, exact=True).optimum
    coupling = coupling_bound(inst, exact=True).optimum
    ok = free == coupling and free > block
    return Finding(f"free block at TV 0: {free} = coupling bound {coupling} > block "
                   f"verification {block}", "confirmed" if ok else "refuted", FRONTIER_INSTANCE)


CACTUS = ("arXiv 2604.04987: p the target (as spectheory), h Cactus's reweighted target at the "
          "drafted token, delta the divergence budget; one token (L = 1)")
SHARMA = ("arXiv 2606.30265: p the target; a certificate is the least KL divergence that moves the "
          "target's row to one where the rule rejects; one token")

ROWS = [
    Claim("cactus-kl-reweighted-target", "arXiv 2604.04987", "Cactus's constraint solution "
          "(h(x) = min(1, p(x) + sqrt(2 delta p(x)(1 - p(x)))), from a second-order expansion)",
          "stated result", "the reweighted target h stays within the budget: D_KL(h || p) <= "
          "delta", CACTUS,
          Hypotheses(("single",), K=(1,), L=(1,), exact=False,
                     notes="KL in float64 with its rounding bound; rows exact"),
          "refuted", c_cactus_h),
    Claim("cactus-kl-emitted-token", "arXiv 2604.04987", "Cactus as received (the law of the "
          "emitted token)", "stated result", "the emitted token's law stays within the budget: "
          "D_KL(law || p) <= delta at every node", CACTUS,
          Hypotheses(("single",), K=(1,), L=(1,), exact=False,
                     notes="KL in float64 with its rounding bound; rows exact"),
          "refuted", c_cactus_emitted),
    Claim("sharma-greedy-radius", "arXiv 2606.30265", "exact certificates for strict greedy "
          "(abstract: the least KL that forces rejection); closed form derived in "
          "spectheory.lp.relaxed_claims, not transcribed from the paper's text",
          "spectheory result", "the least KL(r || p) and KL(p || r) that make greedy reject the "
          "target's argmax equal spectheory's closed form (checked against a convex solver)",
          SHARMA, Hypotheses(("single",), K=(1,), L=(1,), exact=False,
                             notes="a convex solver's minimum within 1e-6"),
          "confirmed", c_greedy_radius),
    Claim("frontier-at-zero-is-block", "arXiv 2403.10444", "optimality of block verification "
          "(Sun et al.), through the lossy frontier LP", "theorem",
          "within TV 0 (a lossless rule) no verifier beats block verification's E[tau + 1]",
          OURS, Hypotheses(("single",), K=(1,)), "confirmed", c_frontier_zero),
    Claim("free-block-not-a-verifier", "spectheory.lp.frontier", "free_block_lp",
          "spectheory result", "a rule that chooses the whole L + 1 block freely (not a "
          "verifier) reaches the coupling bound at TV 0, above block verification", OURS,
          Hypotheses(("single",), K=(1,)), "confirmed", c_free_block),
]
