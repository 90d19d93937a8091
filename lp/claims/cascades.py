"""Speculative cascades (Narasimhan et al., "Faster Cascades via Speculative Decoding", ICLR 2025,
arXiv 2405.19261; shipped in MTPLX PR #485): the optimal deferral rule and the token-specific
rules against the lossy frontier ([`spectheory.lp.frontier`][spectheory.lp.frontier]).

Notation: the paper writes q for the small (draft) model and p for the large (target) one, as
spectheory does; a speculative cascade verifies the draft against a cascade target pi built
from p and q by a deferral rule (`spectheory.verifiers.cascades`). The paper's text beyond its
abstract and introduction was not reachable here: the rows quote the abstract ("we characterize
the optimal deferral rule for our speculative cascades") and state the per-token reading they
check: the rule's (bias, acceptance) point against the most any verifier accepts within that
bias, bias = TV(output, target).
"""

from __future__ import annotations

from fractions import Fraction

from .common import Claim, Finding, Hypotheses, f, note

#: Deferral costs checked.
ALPHAS = (Fraction(0), Fraction(1, 10), Fraction(1, 4), Fraction(1, 2))
#: One-token instances (V, seed) of random_instance(V, 1, seed, denominator=12): OPT defers on
#: them for some alpha in ALPHAS and keeps the draft for others.
L1 = ((3, 1), (3, 3), (3, 17))
#: Two-token instances (V, seed) of random_instance(V, 2, seed, denominator=6).
L2 = ((3, 1), (3, 3), (2, 0))


def instance(V: int, L: int, seed: int):
    import spectheory as st

    return st.random_instance(V, L, seed, denominator=12 if L == 1 else 6)


def name(V: int, L: int, seed: int) -> str:
    return f"random({V},{L},{seed},{12 if L == 1 else 6})"


def point(inst, rule: str):
    """(E[tau + 1], TV to the target) of a parametric rule's name, exactly."""
    import spectheory as st

    note(inst, "single", 1)
    res = st.analyze(inst, rule, exact=True)
    return res.block_efficiency, res.tv_to_target


def frontier(inst, budget):
    from spectheory.lp.frontier import frontier_lp

    note(inst, "single", 1)
    return frontier_lp(inst, tv=budget, exact=True, rules=()).optimum


def _gaps(kind: str, L: int = 1):
    gaps, parts = [], []
    for V, seed in (L1 if L == 1 else L2):
        inst = instance(V, L, seed)
        pts = []
        for a in ALPHAS:
            E, tv = point(inst, f"{kind}({a})")
            front = frontier(inst, tv)
            assert E <= front  # the frontier bounds every verifier
            gaps.append(front - E)
            pts.append(f"alpha = {f(a)}: E {f(E)} at TV {f(tv)}, frontier {f(front)}")
        parts.append(f"{name(V, L, seed)}: " + "; ".join(pts))
    return gaps, " | ".join(parts), ", ".join(name(V, L, s) for V, s in (L1 if L == 1 else L2))


def c_opt_on_frontier() -> Finding:
    gaps, text, where = _gaps("cascade-opt")
    return Finding(text, "confirmed" if all(g == 0 for g in gaps) else "refuted", where)


def c_opt_off_frontier_over_blocks() -> Finding:
    gaps, text, where = _gaps("cascade-opt", L=2)
    return Finding(text, "confirmed" if any(g > 0 for g in gaps) else "refuted", where)


def c_token_rules_off_frontier() -> Finding:
    gaps, text, where = _gaps("cascade-token-v1")
    return Finding(text, "confirmed" if any(g > 0 for g in gaps) else "refuted", where)


NOTATION = ("arXiv 2405.19261: q the draft (small) model, p the target (large) model, as "
            "spectheory; deferral cost alpha; the cascade target pi defers to p by the rule; "
            "bias = TV(output, target) of one verified token; E[tau + 1] per iteration")
SOURCE = "arXiv 2405.19261"

ROWS = [
    Claim("cascade-opt-on-frontier", SOURCE, "abstract: 'we characterize the optimal deferral "
          "rule for our speculative cascades'; the OPT rule as MTPLX PR #485 ships it ('peak "
          "rule': defer when max q < max p - alpha TV(p, q))", "stated result",
          "per token (L = 1), the optimal deferral rule is optimal in the rejection-bias trade-off: "
          "cascade-opt(alpha)'s E[tau + 1] equals the best E[tau + 1] of any verifier within its "
          "own TV to the target", NOTATION,
          Hypotheses(("single",), K=(1,), L=(1,),
                     notes="alpha in {0, 1/10, 1/4, 1/2}; the frontier is spectheory's lossy "
                           "frontier LP, solved exactly"),
          "confirmed", c_opt_on_frontier),
    Claim("cascade-opt-off-frontier-over-blocks", "spectheory.lp.frontier", "the optimal "
          "deferral rule of arXiv 2405.19261 read over L-token blocks", "spectheory result",
          "over L = 2 blocks cascade-opt(alpha) is not on the block frontier: for some alpha "
          "its E[tau + 1] is strictly below the best E[tau + 1] within its own TV (at L = 1 "
          "the frontier is the segment from token verification to accepting every draft, "
          "which both of OPT's choices lie on, so the per-token optimality says little)",
          NOTATION,
          Hypotheses(("single",), K=(1,), L=(2,),
                     notes="the frontier over L + 1 = 3 output tokens, exact rationals"),
          "confirmed", c_opt_off_frontier_over_blocks),
    Claim("cascade-token-rules-off-frontier", "spectheory.lp.frontier", "the token-specific "
          "deferral rules of arXiv 2405.19261 (the V1 reading: defer token v when "
          "p(v) < max p - alpha)", "spectheory result",
          "per token (L = 1), the token-specific rule cascade-token-v1(alpha) is not on the "
          "lossy frontier: for some alpha and instance its E[tau + 1] is strictly below the "
          "best within its own TV", NOTATION,
          Hypotheses(("single",), K=(1,), L=(1,),
                     notes="the reading of V1 is spectheory's (the paper's text not reached)"),
          "confirmed", c_token_rules_off_frontier),
]
