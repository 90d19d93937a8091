"""EARS: token verification whose acceptance uniform is lowered by the target's uncertainty.

EARS (Entropy-Adaptive Rejection Sampling), vllm-ascend PR #7845 (the RFC is vllm-ascend issue
#5471, first filed as PR #5587), ``VLLM_EARS_TOLERANCE`` = t in [0, 1] (0, the default, is off).
Its description: ``rejection_sample()`` adjusts ``uniform_probs`` by the target's uncertainty
``1.0 - max(target_probs)`` before the sequential and block-verify kernels, with
``torch.finfo(dtype).eps`` as the lower clamp of the adjusted uniform. The kernels accept X_i iff
p(X_i) / q(X_i) >= u' (vLLM's comparison), correct from normalise(max(p - q, 0)) and add the
target's bonus token.

Reading chosen (the PR's diff was not readable here): the adjusted uniform is
u' = max(u - t (1 - max p_i), eps), a relaxation of the threshold by the tolerance times the
uncertainty. A lower clamp only binds if the adjusted uniform can fall below zero, which a
subtraction does and a scaling of u by a factor in (0, 1] does not; so with u ~ U[0, 1),

    a_i = 1{p_i(X_i) >= eps q_i(X_i)} min(1, p_i(X_i) / q_i(X_i) + t (1 - max p_i)),
    r_i = normalise(max(p_i - q_i, 0)),   b = p(.|X^L).

The clamp is read as an infinitesimal eps: a drafted token of target probability 0 is never
accepted, any p(X_i) > 0 is unaffected (exact whenever p(X_i)/q(X_i) >= eps; float32's eps is
1.19e-7). A rejection happens only where p_i(X_i) < q_i(X_i), so the residual is never empty.

t = 0 is token verification (lossless); t > 0 accepts more wherever the target is uncertain
(max p_i < 1). Rational: the law is exact in rationals for rational t, and runs on numpy float64
as on torch. A pure batched chain law ([`chain_law`][spectheory.verifiers.contrasts.chain_law])
of (drafts [B, L], q [B, L, V], p [B, L+1, V]).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from ..law import Law
from ..registry import VerifierSpec
from ..runtime import backend as B
from .common import drafted_probs
from .contrasts import _const, _normalise, chain_law
from .params import number, unit

PAPER = ("vllm-ascend PR #7845, EARS entropy-adaptive rejection sampling "
         "(VLLM_EARS_TOLERANCE; RFC vllm-ascend #5471)")


def ears(tolerance) -> VerifierSpec:
    """EARS with tolerance t in [0, 1] (module doc): accept X_i w.p.
    1{p(X_i) > 0} min(1, p(X_i)/q(X_i) + t (1 - max p)); Y ~ normalise(max(p - q, 0)); bonus ~ p."""
    t = number(tolerance, "ears", unit("tolerance"))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        L = drafts.shape[-1]
        rows = p[:, :L]
        px, qx = drafted_probs(drafts, q, p)  # [B, L]
        order = B.argsort(rows, axis=-1, descending=True)[..., :1]
        top = B.take_along(rows, order, axis=-1)[..., 0]  # max p, [B, L]
        ratio = B.safe_div(px, qx, B.scalar(px, 1))
        a = B.minimum(ratio + (1 - top) * _const(px, t), 1)
        a = B.where(px > 0, a, B.zeros_like(a))
        return chain_law(a, _normalise(B.positive_part(rows - q), rows), p[:, L])

    return VerifierSpec(f"ears({t})", law, lossless=(t == 0), numpy_float=True, paper=PAPER,
                        node_form="accept X_i w.p. 1{p(X_i) > 0} min(1, p(X_i)/q(X_i) + "
                                  "t (1 - max p)); else Y ~ normalise(max(p - q, 0)); bonus ~ p",
                        summary=f"{'' if t == 0 else 'LOSSY: '}EARS, tolerance {t}")


#: The registered member (tolerance 3/10, the PR's tested setting; the factory takes any t).
EARS = replace(ears(Fraction(3, 10)), name="ears")

__all__ = ["EARS", "PAPER", "ears"]
