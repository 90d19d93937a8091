"""Static ensemble verification (DIVERSED, Wang, Kasa et al., AISTATS 2026, arXiv 2604.07622;
transformers PR #45979, ``assistant_ensemble_weight``): its per-token acceptance and its place on
the lossy frontier ([`spectheory.lp.frontier`][spectheory.lp.frontier]).

Notation: the paper and the PR write p for the target and q for the draft, as spectheory does, and
the verification target v = w p + (1 - w) q with w the target's weight (transformers'
``assistant_ensemble_weight``; the paper's released code weights the draft instead,
``--draft_ensemble_weights`` = 1 - w). The paper's text (its proposition and hypotheses) was not
reachable here: the rows quote its abstract ("a training-free fixed-weight mixture of draft and
target that provably traces the Pareto-optimal trade-off between rejection probability and
distributional bias") and the PR's rule, and state the per-token reading they check. The rule is
[`static_ensemble`][spectheory.verifiers.static_ensemble.static_ensemble].
"""

from __future__ import annotations

from fractions import Fraction

from .common import Claim, Finding, Hypotheses, f, note

#: Target weights checked.
WEIGHTS = (Fraction(0), Fraction(1, 3), Fraction(1, 2), Fraction(2, 3), Fraction(1))
#: One-token instances (V, seed) of random_instance(V, 1, seed, denominator=6).
L1 = ((2, 0), (3, 4), (4, 2))
#: Two-token instances (V, seed) of random_instance(V, 2, seed, denominator=6).
L2 = ((3, 1), (3, 4), (2, 0))


def instance(V: int, L: int, seed: int):
    import spectheory as st

    return st.random_instance(V, L, seed, denominator=6)


def name(V: int, L: int, seed: int) -> str:
    return f"random({V},{L},{seed},6)"


def root_tv(inst) -> Fraction:
    p, q = inst.target.level(0)[0], inst.draft.level(0)[0]
    return sum((abs(Fraction(a) - Fraction(b)) for a, b in zip(p, q)), Fraction(0)) / 2


def point(inst, w):
    """(E[tau + 1], TV to the target, P(first draft accepted)) of static-ensemble(w), exactly."""
    import spectheory as st
    from spectheory.verifiers.static_ensemble import static_ensemble

    note(inst, "single", 1)
    res = st.analyze(inst, static_ensemble(w), exact=True)
    return res.block_efficiency, res.tv_to_target, 1 - res.tau_pmf[0]


def frontier(inst, budget):
    from spectheory.lp.frontier import frontier_lp

    note(inst, "single", 1)
    return frontier_lp(inst, tv=budget, exact=True, rules=()).optimum


def c_acceptance() -> Finding:
    ok, parts = [], []
    for V, seed in L1:
        inst = instance(V, 1, seed)
        T = root_tv(inst)
        accs = [point(inst, w)[2] for w in WEIGHTS]
        ok += [a == 1 - w * T for a, w in zip(accs, WEIGHTS)]
        parts.append(f"{name(V, 1, seed)}: TV(q, p) = {f(T)}, P(accept) at w = "
                     f"{', '.join(map(f, WEIGHTS))}: {', '.join(map(f, accs))}")
    return Finding("; ".join(parts), "confirmed" if all(ok) else "refuted",
                   ", ".join(name(V, 1, s) for V, s in L1))


def c_pareto_one_token() -> Finding:
    ok, parts = [], []
    for V, seed in L1:
        inst = instance(V, 1, seed)
        T = root_tv(inst)
        pts = []
        for w in WEIGHTS:
            E, tv, _ = point(inst, w)
            front = frontier(inst, tv)
            ok += [E == front, E == 2 - w * T, tv == (1 - w) * T]
            pts.append(f"w = {f(w)}: (TV {f(tv)}, E {f(E)}, frontier {f(front)})")
        parts.append(f"{name(V, 1, seed)} (T = {f(T)}): " + "; ".join(pts))
    return Finding(" | ".join(parts), "confirmed" if all(ok) else "refuted",
                   ", ".join(name(V, 1, s) for V, s in L1))


def c_pareto_blocks() -> Finding:
    below, parts = [], []
    for V, seed in L2:
        inst = instance(V, 2, seed)
        pts = []
        for w in WEIGHTS:
            E, tv, _ = point(inst, w)
            front = frontier(inst, tv)
            assert E <= front
            if 0 < w:
                below.append(E < front)
            pts.append(f"w = {f(w)}: E {f(E)} at TV {f(tv)}, frontier {f(front)}")
        parts.append(f"{name(V, 2, seed)}: " + "; ".join(pts))
    # the claim of the row: below the block frontier for some w in (0, 1] on some instance
    return Finding(" | ".join(parts), "confirmed" if any(below) else "refuted",
                   ", ".join(name(V, 2, s) for V, s in L2))


NOTATION = ("arXiv 2604.07622 and transformers PR #45979: p the target, q the draft (as "
            "spectheory); v = w p + (1 - w) q with w the target's weight "
            "(assistant_ensemble_weight); rejection probability = 1 - P(accept) of one drafted "
            "token; bias = TV(output, target); E[tau + 1] per iteration")
SOURCE = "arXiv 2604.07622"

ROWS = [
    Claim("diversed-acceptance-identity", SOURCE, "static ensemble (abstract; the rule as "
          "shipped in transformers PR #45979: accept X with min(1, v(X)/q(X)), else resample "
          "from normalise(max(v - q, 0)))", "stated result",
          "verifying against v = w p + (1 - w) q raises the per-token acceptance from "
          "1 - TV(q, p) to 1 - w TV(q, p)", NOTATION,
          Hypotheses(("single",), K=(1,), L=(1,),
                     notes="one drafted token, weights w in {0, 1/3, 1/2, 2/3, 1}"),
          "confirmed", c_acceptance),
    Claim("diversed-pareto-one-token", SOURCE, "Prop. 1 as the abstract states it (the paper's "
          "text not reached): the static ensemble traces the Pareto-optimal trade-off between "
          "rejection probability and distributional bias", "stated result",
          "per token (L = 1), static-ensemble(w) reaches the lossy frontier: its E[tau + 1] = "
          "2 - w T equals the best E[tau + 1] of any verifier within its own TV (1 - w) T, "
          "T = TV(p, q)", NOTATION,
          Hypotheses(("single",), K=(1,), L=(1,),
                     notes="the frontier is spectheory's lossy frontier LP (spectheory lp "
                           "--problem frontier --tv), solved exactly"),
          "confirmed", c_pareto_one_token),
    Claim("diversed-pareto-not-over-blocks", "spectheory.lp.frontier", "Prop. 1 of arXiv "
          "2604.07622 read over L-token blocks", "spectheory result",
          "over L = 2 blocks the static ensemble is not on the block frontier: for some w in "
          "(0, 1] its E[tau + 1] is strictly below the best E[tau + 1] within its own TV (at "
          "w = 1, token verification below block verification); the per-token Pareto property "
          "does not carry over to the block", NOTATION,
          Hypotheses(("single",), K=(1,), L=(2,),
                     notes="the frontier over L + 1 = 3 output tokens, exact rationals"),
          "confirmed", c_pareto_blocks),
]
