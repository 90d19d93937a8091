"""Token verification (Leviathan, Kalman, Matias, "Fast Inference from Transformers via Speculative
Decoding", ICML 2023, arXiv 2211.17192): its acceptance rate and its expected number of tokens per
iteration.

Notation: the paper writes p for the target (M_p) and q for the draft (M_q), as spectheory does;
gamma is the number of drafted tokens (spectheory's L); beta = sum_x min(p(x), q(x)) is the
acceptance rate of one token and alpha = E[beta]; the expected number of tokens one iteration
generates, (1 - alpha^(gamma + 1)) / (1 - alpha), is E[tau + 1] under the paper's assumption that
the betas are i.i.d. (here: rows that do not depend on the prefix, so beta is one number)."""

from __future__ import annotations

from fractions import Fraction

from .common import Claim, Finding, Hypotheses, all_hold, be, rows


def _ci(V, L, seed, d):
    from spectheory.inputs.random_instances import random_instance

    return random_instance(V, L, seed, context_independent=True, denominator=d)


def _one_step(V, seed, d):
    from spectheory.inputs.random_instances import random_instance

    return random_instance(V, 1, seed, denominator=d)


def c_acceptance_rate() -> Finding:
    from .common import toy

    ok, vals = [], []
    for inst in [toy(1)] + [_one_step(V, s, 7) for V in (3, 4) for s in range(3)]:
        p, q = rows(inst)
        beta = sum((min(a, b) for a, b in zip(p, q)), Fraction(0))
        tv = sum((abs(a - b) for a, b in zip(p, q)), Fraction(0)) / 2
        e = be(inst, "token") - 1
        ok.append(e == beta == 1 - tv)
        vals.append(str(e))
    return Finding("E[tau] of token verification at L = 1 = sum min(p, q) = 1 - TV(p, q): " +
                   ", ".join(vals), all_hold(ok), "toy L=1; random(V,1,0..2,7), V = 3, 4")


def c_expected_tokens() -> Finding:
    from .common import toy

    ok, vals = [], []
    for inst in [toy(2), toy(3)] + [_ci(3, L, s, 9) for L in (2, 3) for s in range(2)]:
        p, q = rows(inst)
        alpha = sum((min(a, b) for a, b in zip(p, q)), Fraction(0))
        L = inst.block_length
        formula = (1 - alpha ** (L + 1)) / (1 - alpha) if alpha != 1 else Fraction(L + 1)
        e = be(inst, "token")
        ok.append(e == formula)
        vals.append(str(e))
    return Finding("E[tau + 1] of token verification = (1 - alpha^(L+1)) / (1 - alpha) exactly: "
                   + ", ".join(vals), all_hold(ok),
                   "toy at L = 2, 3; random(3,L,0..1,9) context-independent, L = 2, 3")


LEV = ("arXiv 2211.17192: p = target (M_p), q = draft (M_q), as spectheory; gamma = L; "
       "beta, alpha = acceptance rate of one token; expected generated tokens per iteration = "
       "E[tau + 1]")

ROWS = [
    Claim("leviathan-acceptance-rate", "arXiv 2211.17192", "acceptance rate beta",
          "theorem", "the acceptance rate of one token is beta = sum_x min(p(x), q(x)) = "
          "1 - TV(p, q)", LEV, Hypotheses(("single",), K=(1,), L=(1,)), "confirmed",
          c_acceptance_rate),
    Claim("leviathan-expected-tokens", "arXiv 2211.17192", "expected number of generated tokens "
          "(i.i.d. acceptance)", "theorem", "one iteration generates (1 - alpha^(gamma + 1)) / "
          "(1 - alpha) tokens in expectation", LEV,
          Hypotheses(("single",), K=(1,), context_independent=True,
                     notes="the betas i.i.d. (rows that do not depend on the prefix)"),
          "confirmed", c_expected_tokens),
]
