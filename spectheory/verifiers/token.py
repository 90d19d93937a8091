"""Token verification: standard speculative sampling.

Leviathan et al., "Fast Inference from Transformers via Speculative Decoding" (ICML 2023) and
Chen et al., "Accelerating Large Language Model Decoding with Speculative Sampling" (2023).

For i = 1..L accept X_i with probability a_i = min(1, p(X_i|X^{i-1}) / q(X_i|X^{i-1})) and stop
at the first rejection, so

    P(tau = i | X) = (prod_{j<=i} a_j) * (1 - a_{i+1})   for i < L,
    P(tau = L | X) =  prod_{j<=L} a_j.

On rejection at position tau+1 the correction is Y ~ normalise(max(p(.|X^tau) - q(.|X^tau), 0));
after L acceptances the bonus token is Y ~ p(.|X^L).
"""

from __future__ import annotations

from .. import backend as B
from ..law import Law
from ..registry import VerifierSpec
from .common import drafted_probs, residual_corrections, residuals


def token_verification(drafts, q, p) -> Law:
    """Law of token verification. Shapes: drafts [B, L], q [B, L, V], p [B, L+1, V].

    Degenerate inputs are exact: q(X_i) = 0 (a draft of probability zero) is treated as ratio 1,
    p = q gives certain acceptance, and an all-zero residual (a stop of probability zero) falls
    back to p so that every correction row is a distribution.
    """
    px, qx = drafted_probs(drafts, q, p)
    accept = B.minimum(B.safe_div(px, qx, B.scalar(px, 1)), 1)  # a_i, [B, L]
    one = B.ones_like(accept[:, :1])
    reached = B.cumprod(B.concat([one, accept], axis=1), axis=1)  # prod_{j<=i} a_j, [B, L+1]
    stop = reached * B.concat([1 - accept, one], axis=1)
    res = residuals(B.ones_like(accept), q, p)  # plain residual max(p - q, 0)
    return Law(stop, residual_corrections(res, p))


TOKEN = VerifierSpec(
    "token", token_verification, paths=1,
    node_form="accept X_i w.p. min(1, p(X_i|X^{i-1}) / q(X_i|X^{i-1})); "
              "correction normalise(max(p - q, 0))",
    paper="Leviathan et al., ICML 2023; Chen et al., arXiv 2302.01318",
    summary="token verification (standard speculative sampling)")
