"""Pieces shared by several verifiers (kept here so that no formula has two copies)."""

from __future__ import annotations

from .. import backend as B


def drafted_probs(drafts, q, p):
    """p(X_i|X^{i-1}) and q(X_i|X^{i-1}) for i = 1..L, each [B, L]."""
    L = drafts.shape[-1]
    idx = B.expand_dims(B.as_index(drafts, q), -1)
    px = B.take_along(p[:, :L], idx, axis=-1)[..., 0]
    qx = B.take_along(q, idx, axis=-1)[..., 0]
    return px, qx


def residuals(weights, q, p):
    """max(w_i p(.|X^i) - q(.|X^i), 0) for i = 0..L-1, [B, L, V]; ``weights`` [B, L]."""
    L = q.shape[1]
    return B.positive_part(B.expand_dims(weights, -1) * p[:, :L] - q)


def residual_corrections(res, p, total=None):
    """Corrections normalise(res_i) for i < L (``res`` from :func:`residuals`), and p(.|X^L) at
    i = L. A residual of total mass zero (a stop that has probability zero) falls back to
    p(.|X^i), so every row is a distribution and nothing is NaN. Returns [B, L+1, V].
    ``total`` [B, L, 1] may pass the residual masses when the caller already has them.
    """
    L = res.shape[1]
    if total is None:
        total = B.sum(res, axis=-1, keepdims=True)
    corr = B.safe_div(res, total, p[:, :L])
    return B.concat([corr, p[:, L:]], axis=1)


def stop_from_acceptance_weights(h):
    """P(tau = i) = h_i * prod_{j>i} (1 - h_j) for independent eta_i ~ Bernoulli(h_i), tau = max
    {i : eta_i = 1}; h [B, L+1] with h_0 = 1."""
    survive = B.flip(B.cumprod(B.flip(1 - h, 1), axis=1), 1)  # prod_{j>=i} (1 - h_j)
    tail = B.concat([survive[:, 1:], B.ones_like(h[:, :1])], axis=1)  # prod_{j>i}
    return h * tail
