"""Relaxed (lossy) acceptance and its divergence certificates: Cactus (Hao, Mou, ICLR 2026, arXiv
2604.04987), the exact-certificate notion of "When Is a Draft Accepted?" (Sharma, arXiv
2606.30265), and the lossy frontier LP at zero budget against block verification's optimality
(Sun et al., arXiv 2403.10444).

Notation: Cactus writes the letters the other way round from spectheory. Its released code
(``solve_constraint`` in github.com/MANGA-UOFA/Cactus, ``cactus/cactus.py``, commit 3b01b81)
names the target (verifier) ``target_probs`` "q" and the draft ``draft_probs`` "p" (only p_n is
used; the residual is ``h - p_phi``), n the drafted token: h_n = clamp(q_n + sqrt(2 delta q_n
(1 - q_n)), 0, 1), h = q (1 - h_n) / (1 - q_n) off n; accept w.p. min(1, h_n / p_n), correct from
normalise(max(h - p, 0)). The paper's text (reached only through summaries) also calls the
verifier distribution q. So Cactus's q is spectheory's p (the target) and Cactus's p is
spectheory's q (the draft); in spectheory's letters h(x) = min(1, p(x) + sqrt(2 delta p(x)
(1 - p(x)))) at the drafted token, the rest scaled proportionally, and the claim is
D_KL(h || p) <= delta. The checks follow the released code's reading (its formulas, clamp and
residual), which is the rule [`cactus_acceptance`][spectheory.verifiers.relaxed.cactus_acceptance]
implements. The checks are in [`relaxed_checks`][spectheory.lp.claims.relaxed_checks] (KL in
float64 with a stated error bound, on instances whose rows are exact rationals) and
[`spectheory.lp.frontier`][spectheory.lp.frontier] (exact rationals).
"""

from __future__ import annotations

from fractions import Fraction

from .common import OURS, Claim, Finding, Hypotheses, be, note, note_rows


def _cactus_instances():
    from spectheory.inputs.instances import instance_from_dict

    a = instance_from_dict({"vocab_size": 3, "block_length": 1, "target": ["1/2", "1/4", "1/4"],
                            "draft": ["1/4", "1/2", "1/4"]}, exact=True)
    b = instance_from_dict({"vocab_size": 2, "block_length": 1, "target": ["1/10", "9/10"],
                            "draft": ["1", "0"]}, exact=True)
    return [(a, "p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4), L = 1"),
            (b, "p = (1/10, 9/10), q = (1, 0), L = 1")]


def _cactus(which: str) -> Finding:
    from .relaxed_checks import cactus_h_claim, cactus_output_claim

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
    from .relaxed_checks import check_greedy_radius

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
#: An instance on which token verification is strictly below block verification, so that the
#: frontier at TV 0 can tell the two apart (on FRONTIER_INSTANCE both give 149/72).
FRONTIER_ZERO_INSTANCE = "random_instance(3, 2, 1, alpha=0.5, denominator=12)"


def c_frontier_zero() -> Finding:
    import spectheory as st
    from spectheory.lp.frontier import frontier_lp
    from spectheory.lp.trust import _tables, greedy_value

    inst = st.random_instance(3, 2, 1, alpha=0.5, denominator=12)
    note(inst, "single", 1)
    p, Q = _tables(inst, True)
    block, token = greedy_value(p, Q, 2), be(inst, "token")
    front = frontier_lp(inst, tv=0, exact=True, rules=()).optimum
    ok = front == block and front > token
    return Finding(f"frontier LP at TV 0: {front} = block verification {block} > token "
                   f"verification {token}", "confirmed" if ok else "refuted",
                   FRONTIER_ZERO_INSTANCE)


def c_free_block() -> Finding:
    inst, block, _, free_block_lp, coupling_bound = _frontier()
    free = free_block_lp(inst, exact=True).optimum
    coupling = coupling_bound(inst, exact=True).optimum
    ok = free == coupling and free > block
    return Finding(f"free block at TV 0: {free} = coupling bound {coupling} > block "
                   f"verification {block}", "confirmed" if ok else "refuted", FRONTIER_INSTANCE)


CACTUS = ("arXiv 2604.04987 and its released code (solve_constraint, cactus/cactus.py): q the "
          "target (target_probs, the verifier) = spectheory's p; p the draft (draft_probs) = "
          "spectheory's q; n the drafted token; h Cactus's reweighted target, h_n = q_n + "
          "sqrt(2 delta q_n (1 - q_n)) clamped to [0, 1], the rest of q scaled by (1 - h_n) / "
          "(1 - q_n); delta the divergence budget; one token (L = 1). The check follows the "
          "released code's reading")
CACTUS_READING = ("the released code's, not the paper's text (reached only through summaries): "
                  "solve_constraint's q is the target, h_n = clamp(q_n + sqrt(2 delta q_n "
                  "(1 - q_n)), 0, 1), the rest of q scaled by (1 - h_n) / (1 - q_n); the "
                  "recomputation in tests/independent_claims.py takes the same formula")
SHARMA = ("arXiv 2606.30265: p the target; a certificate is the least KL divergence that moves the "
          "target's row to one where the rule rejects; one token")

ROWS = [
    Claim("cactus-kl-reweighted-target", "arXiv 2604.04987", "Cactus's constraint solution "
          "(solve_constraint: h_n = min(1, q_n + sqrt(2 delta q_n (1 - q_n))) with q the target, "
          "from a second-order expansion; in spectheory's letters h(x) = min(1, p(x) + "
          "sqrt(2 delta p(x)(1 - p(x)))))",
          "stated result", "the reweighted target h stays within the budget: D_KL(h || q) <= "
          "delta in Cactus's letters (q the target), D_KL(h || p) <= delta in spectheory's",
          CACTUS,
          Hypotheses(("single",), K=(1,), L=(1,), exact=False,
                     notes="KL in float64 with its rounding bound; rows exact; follows the "
                           "released code's reading (solve_constraint's q = the target)"),
          "refuted", c_cactus_h, reading=CACTUS_READING),
    Claim("cactus-kl-emitted-token", "arXiv 2604.04987", "Cactus as received (the law of the "
          "emitted token: accept n w.p. min(1, h_n / p_n), else normalise(max(h - p, 0)), "
          "Cactus's letters)", "stated result", "the emitted token's law stays within the "
          "budget: D_KL(law || target) <= delta at every node", CACTUS,
          Hypotheses(("single",), K=(1,), L=(1,), exact=False,
                     notes="KL in float64 with its rounding bound; rows exact; follows the "
                           "released code's reading (_get_accepted and _get_recovered_probs "
                           "with solve_constraint's q = the target)"),
          "refuted", c_cactus_emitted, reading=CACTUS_READING),
    Claim("sharma-greedy-radius", "arXiv 2606.30265", "exact certificates for strict greedy "
          "(abstract: the least KL that forces rejection); closed form derived in "
          "spectheory.lp.claims.relaxed_checks, not transcribed from the paper's text",
          "spectheory result", "the least KL(r || p) and KL(p || r) that make greedy reject the "
          "target's argmax equal spectheory's closed form (checked against a convex solver)",
          SHARMA, Hypotheses(("single",), K=(1,), L=(1,), exact=False,
                             notes="a convex solver's minimum within 1e-6"),
          "confirmed", c_greedy_radius),
    Claim("frontier-at-zero-is-block", "arXiv 2403.10444", "optimality of block verification "
          "(Sun et al.), through the lossy frontier LP", "theorem",
          "within TV 0 (a lossless rule) no verifier beats block verification's E[tau + 1]: "
          "the frontier at zero budget equals block verification's E[tau + 1], strictly above "
          "token verification's on the instance", OURS,
          Hypotheses(("single",), K=(1,)), "confirmed", c_frontier_zero),
    Claim("free-block-not-a-verifier", "spectheory.lp.frontier", "free_block_lp",
          "spectheory result", "a rule that chooses the whole L + 1 block freely (not a "
          "verifier) reaches the coupling bound at TV 0, above block verification", OURS,
          Hypotheses(("single",), K=(1,)), "confirmed", c_free_block),
]
