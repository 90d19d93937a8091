"""Block verification (Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro, Suresh:
"Block Verification Accelerates Speculative Decoding", arXiv 2403.10444, ICLR 2025).

Weights along the drafted path:   w_0 = 1,  w_i = min(1, w_{i-1} p(X_i|X^{i-1}) / q(X_i|X^{i-1})).
Residual mass at prefix X^i:      S_i = sum_x max(w_i p(x|X^i) - q(x|X^i), 0).
Acceptance weights:               h_L = w_L;  h_i = S_i / (S_i + 1 - w_i) for 0 < i < L
                                  (h_i = 1 when the denominator is 0);  h_0 = 1.
With independent eta_i ~ Bernoulli(h_i) and tau = max{i : eta_i = 1} (all positions are looked
at, i.e. scan i = L down to 0 and stop at the first success):

    P(tau = i | X) = h_i prod_{j>i} (1 - h_j).

Correction: for tau < L, Y ~ normalise(max(w_tau p(.|X^tau) - q(.|X^tau), 0)); for tau = L,
Y ~ p(.|X^L). Block verification is lossless and optimal in E[tau] among all valid single-path
verifiers; L = 1 or a one-hot target reduce it to token verification.
"""

from __future__ import annotations

from .. import backend as B
from ..law import Law
from ..registry import VerifierSpec
from .common import drafted_probs, residual_corrections, residuals, stop_from_acceptance_weights


def block_weights(drafts, q, p):
    """w_0..w_L [B, L+1] (w_0 = 1). A draft token of probability zero gets ratio 1."""
    px, qx = drafted_probs(drafts, q, p)
    ratio = B.safe_div(px, qx, B.scalar(px, 1))
    w = [B.ones_like(ratio[:, 0])]
    for i in range(drafts.shape[-1]):  # loop over positions only, batched over drafts
        w.append(B.minimum(w[-1] * ratio[:, i], 1))
    return B.stack(w, axis=1)


def block_verification(drafts, q, p) -> Law:
    """Law of block verification. Shapes: drafts [B, L], q [B, L, V], p [B, L+1, V]."""
    L = drafts.shape[-1]
    w = block_weights(drafts, q, p)
    res = residuals(w[:, :L], q, p)
    S = B.sum(res, axis=-1)  # [B, L]
    # S + (1 - w), not S + 1 - w: with w <= 1 this keeps h <= 1 (and P(tau) >= 0) in float32
    h_mid = B.safe_div(S, S + (1 - w[:, :L]), B.scalar(S, 1))
    h = B.concat([B.ones_like(S[:, :1]), h_mid[:, 1:], w[:, L:]], axis=1)  # [B, L+1]
    return Law(stop_from_acceptance_weights(h), residual_corrections(res, p, B.expand_dims(S, -1)))


BLOCK = VerifierSpec(
    "block", block_verification, paths=1,
    node_form="w_i = min(1, w_{i-1} p/q); h_i = S_i / (S_i + 1 - w_i); "
              "correction normalise(max(w_i p - q, 0))",
    paper="Sun et al., Block Verification Accelerates Speculative Decoding, arXiv 2403.10444",
    summary="block verification (optimal single-path verifier)")
