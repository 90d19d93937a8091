"""Speculative cascades: token verification against a per-node mix of draft and target.

Narasimhan, Jitkrittum, Rawat, Kim, Gupta, Menon, Kumar, "Faster Cascades via Speculative
Decoding", ICLR 2025, arXiv 2405.19261; shipped as an opt-in acceptance mode in MTPLX (PR #485,
``--cascade-threshold`` = alpha, "peak rule" and "token-specific rule"). A speculative cascade
replaces the target p_i = p(.|X^{i-1}) at the node of X_i by a cascade target pi_i built from p_i
and the draft row q_i = q(.|X^{i-1}) by a deferral rule, then runs speculative sampling of the
draft against pi_i:

    a_i = min(1, pi_i(X_i) / q_i(X_i)),   r_i = normalise(max(pi_i - q_i, 0))  (p_i where zero),
    b   = p(.|X^L)   (the bonus token is the target's: there is no draft row at position L + 1).

So one node's emitted token has law exactly pi_i, and a node that does not defer (pi_i = q_i)
accepts the draft surely. With T_i = TV(p_i, q_i) (= sum_v max(p_i(v) - q_i(v), 0), MTPLX's
D_TV, here over the whole vocabulary, not a scored top-k) and alpha >= 0 the deferral cost:

| rule | cascade target pi_i | defers when |
|---|---|---|
| ``cascade-opt(alpha)`` | p_i if it defers, else q_i | max q_i < max p_i - alpha T_i |
| ``cascade-token-v1(alpha)`` | q_i (1 - d_i) + p_i sum_u q_i(u) d_i(u) | d_i(v) = 1{p_i(v) < max p_i - alpha} |
| ``cascade-token-v2(alpha)`` | same | d_i(v) = 1{p_i(v) < max p_i - alpha T_i} |
| ``cascade-token-v3(alpha)`` | same | d_i(v) = 1{p_i(v) < (1 - alpha) max p_i} |

* **OPT** (the paper's optimal deferral rule for its speculative-cascade objective, plugged in
  with the true rows; MTPLX's "peak rule"): the whole row is deferred or not, decided on the
  peaks max q, max p and T. The inequality is strict as written in the paper (ties keep q).
* **Token-specific** (the paper's token-specific speculative cascades; MTPLX's
  "token-specific rule"): the deferral is decided per drafted token v; a drafted token that is
  not deferred is kept, a deferred one is replaced by a target sample, so
  pi_i(v) = q_i(v) (1 - d_i(v)) + p_i(v) sum_u q_i(u) d_i(u). Only the paper's abstract and
  introduction and the PR's summary were readable here; the three deferral sets are the reading
  chosen: V1 the additive gap to the target's peak, V2 the gap scaled by T_i (the OPT rule's
  cost term applied to the drafted token), V3 the multiplicative gap. Ties with the threshold
  are not deferred (strict inequality).

Limits: at alpha = 0 the token rules never defer a token tied with max p_i and OPT keeps q_i
wherever max q_i >= max p_i, so no alpha >= 0 is lossless in general. OPT is lossless at a node
with p_i = q_i; the token rules are not: there pi_i = q_i (1 - d_i) + q_i sum_u q_i(u) d_i(u)
still moves mass from the deferred tokens to the kept ones (unless d_i is constant). The
lossless limit lies at alpha < 0 (outside the rules' range, a reward for deferring): V1 and V3
then defer every token (pi_i = p_i), OPT defers every node with T_i > 0 once alpha < -1 (since
max q_i - max p_i <= T_i); V2 has none, as its bar max p_i - alpha T_i is max p_i wherever
T_i = 0. Large alpha
(alpha >= 1 for V1, V3; alpha T_i >= max p_i for V2, OPT) never defers: every draft is accepted
and the output is the draft's law.

All four are rational: max, T_i and the indicator are exact, so the laws are exact in rationals
for rational alpha, and run on numpy float64 as on torch. Pure batched chain laws
([`chain_law`][spectheory.verifiers.contrasts.chain_law]) of (drafts [B, L], q [B, L, V],
p [B, L+1, V]), registered with ``lossless=False``.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from ..law import Law
from ..registry import VerifierSpec
from ..runtime.errors import check_arrays
from ..runtime import backend as B
from .common import drafted_probs
from .contrasts import _const, _normalise, chain_law
from .params import nonnegative, number, unit

PAPER = ("Narasimhan et al., Faster Cascades via Speculative Decoding, ICLR 2025, "
         "arXiv 2405.19261; MTPLX PR #485 (speculative-cascade acceptance)")


def _peak(rows):
    """max over the last axis, [..., V] -> [..., 1]."""
    order = B.argsort(rows, axis=-1, descending=True)[..., :1]
    return B.take_along(rows, order, axis=-1)


def _indicator(cond, like):
    return B.where(cond, B.ones_like(like), B.zeros_like(like))


def verify_against(pi, drafts, q, p) -> Law:
    """Token verification of the drafts against the cascade targets ``pi`` [B, L, V] (module
    doc): a_i = min(1, pi(X_i)/q(X_i)), r_i = normalise(max(pi - q, 0)), b = p(.|X^L)."""
    _, qx = drafted_probs(drafts, q, p)  # checks the arguments before pi is read by the ids
    L = drafts.shape[-1]
    idx = B.expand_dims(B.as_index(drafts, q), -1)
    pix = B.take_along(pi, idx, axis=-1)[..., 0]  # [B, L]
    a = B.minimum(B.safe_div(pix, qx, B.scalar(qx, 1)), 1)
    return chain_law(a, _normalise(B.positive_part(pi - q), p[:, :L]), p[:, L])


def opt_target(q, p_rows, alpha):
    """OPT's cascade target [B, L, V]: p where max q < max p - alpha TV(p, q), else q."""
    tv = B.sum(B.positive_part(p_rows - q), axis=-1, keepdims=True)  # [B, L, 1]
    defer = _indicator(_peak(q) < _peak(p_rows) - tv * _const(q, alpha), tv)
    return p_rows * defer + q * (1 - defer)


def token_target(q, p_rows, defer):
    """Token-specific cascade target [B, L, V] from the deferral indicators ``defer`` [B, L, V]:
    q (1 - d) + p sum_u q(u) d(u)."""
    mass = B.sum(q * defer, axis=-1, keepdims=True)  # [B, L, 1]
    return q * (1 - defer) + p_rows * mass


def token_deferral(version: int, q, p_rows, alpha):
    """d(v) [B, L, V] of TokenV1, V2 or V3 (module doc)."""
    top = _peak(p_rows)  # [B, L, 1]
    a = _const(q, alpha)
    if version == 1:
        bar = top - a
    elif version == 2:
        bar = top - B.sum(B.positive_part(p_rows - q), axis=-1, keepdims=True) * a
    else:
        bar = top * (1 - a)
    return _indicator(p_rows < bar, p_rows)


def cascade_opt(alpha) -> VerifierSpec:
    """Speculative cascade with the OPT deferral rule (module doc): defer the node to p iff
    max q < max p - alpha TV(p, q), else keep q; token verification against that target."""
    alpha = number(alpha, "cascade-opt", nonnegative("alpha"))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        check_arrays(drafts, q, p, paths=False)  # before the targets read the rows
        L = drafts.shape[-1]
        return verify_against(opt_target(q, p[:, :L], alpha), drafts, q, p)

    return VerifierSpec(f"cascade-opt({alpha})", law, lossless=False, numpy_float=True,
                        paper=PAPER + ", OPT deferral rule",
                        node_form="pi = p if max q < max p - alpha TV(p, q) else q; accept X_i "
                                  "w.p. min(1, pi(X_i)/q(X_i)), else Y ~ normalise(max(pi - q, "
                                  "0)); bonus Y ~ p",
                        summary=f"LOSSY: speculative cascade, OPT deferral, alpha {alpha}")


def _token_rule(version: int, param):
    name = f"cascade-token-v{version}"

    def factory(alpha) -> VerifierSpec:
        alpha = number(alpha, name, param("alpha"))

        def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
            check_arrays(drafts, q, p, paths=False)  # before the deferral reads the rows
            L = drafts.shape[-1]
            d = token_deferral(version, q, p[:, :L], alpha)
            return verify_against(token_target(q, p[:, :L], d), drafts, q, p)

        bar = {1: "max p - alpha", 2: "max p - alpha TV(p, q)", 3: "(1 - alpha) max p"}[version]
        return VerifierSpec(f"{name}({alpha})", law, lossless=False, numpy_float=True,
                            paper=PAPER + f", token-specific deferral V{version}",
                            node_form=f"d(v) = 1{{p(v) < {bar}}}; pi = q (1 - d) + p sum q d; "
                                      "token verification against pi; bonus Y ~ p",
                            summary=f"LOSSY: token-specific speculative cascade V{version}, "
                                    f"alpha {alpha}")

    factory.__name__ = f"cascade_token_v{version}"
    factory.__qualname__ = factory.__name__
    factory.__doc__ = (f"Token-specific speculative cascade, deferral rule V{version}: defer the "
                       f"drafted token v iff p(v) < "
                       f"{ {1: 'max p - alpha', 2: 'max p - alpha TV(p, q)', 3: '(1 - alpha) max p'}[version]} "
                       "(module doc); token verification against q (1 - d) + p sum_u q(u) d(u).")
    return factory


#: TokenV1 (alpha in [0, 1]), TokenV2 (alpha >= 0), TokenV3 (alpha in [0, 1]).
cascade_token_v1 = _token_rule(1, unit)
cascade_token_v2 = _token_rule(2, nonnegative)
cascade_token_v3 = _token_rule(3, unit)

#: The registered members (alpha 1/10; the factories take any alpha in range).
CASCADE_OPT = replace(cascade_opt(Fraction(1, 10)), name="cascade-opt")
CASCADE_TOKEN_V1 = replace(cascade_token_v1(Fraction(1, 10)), name="cascade-token-v1")
CASCADE_TOKEN_V2 = replace(cascade_token_v2(Fraction(1, 10)), name="cascade-token-v2")
CASCADE_TOKEN_V3 = replace(cascade_token_v3(Fraction(1, 10)), name="cascade-token-v3")

#: Registered cascade rules, in listing order.
CASCADES = (CASCADE_OPT, CASCADE_TOKEN_V1, CASCADE_TOKEN_V2, CASCADE_TOKEN_V3)

__all__ = ["CASCADES", "CASCADE_OPT", "CASCADE_TOKEN_V1", "CASCADE_TOKEN_V2", "CASCADE_TOKEN_V3",
           "PAPER", "cascade_opt", "cascade_token_v1", "cascade_token_v2", "cascade_token_v3",
           "opt_target", "token_deferral", "token_target", "verify_against"]
