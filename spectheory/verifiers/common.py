"""Pieces shared by several verifiers (kept here so that no formula has two copies)."""

from __future__ import annotations

from .._lazy import torch

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


def normalise_residual(res, total, p):
    """Correction rows res / total [N, V] (``total`` [N]), falling back to the target row p where
    the residual mass is zero (a stop of probability zero). Equal to
    ``residual_corrections`` row by row; on torch the division runs in place and only the rare
    zero rows are patched, so it costs one pass over the rows."""
    zero = total == 0
    if B.is_torch(res):
        out = res.div_(torch.where(zero, torch.ones_like(total), total).unsqueeze(-1))
        if bool(zero.any()):
            rows = torch.nonzero(zero).reshape(-1)
            out[rows] = p[rows]
        return out
    return B.safe_div(res, B.expand_dims(total, -1), p)


def drafted_ratio(px, qx):
    """p(X_i|X^{i-1}) / q(X_i|X^{i-1}); a draft token of probability zero gets ratio 1."""
    if B.is_torch(px):  # one division; the rare zero-probability drafts patched afterwards
        r = torch.div(px, qx)
        zero = qx == 0
        if bool(zero.any()):
            r = torch.where(zero, torch.ones_like(r), r)
        return r
    return B.safe_div(px, qx, B.scalar(px, 1))


def positive_residual(w, p, q, out=None):
    """max(w p - q, 0) row by row: ``w`` [N] (or None for w = 1), ``p``, ``q`` [N, V] (the same
    values as :func:`residuals`; on torch built in one array, ``out`` if given, in place)."""
    if B.is_torch(p):
        if w is None:
            return torch.sub(p, q, out=out).clamp_(min=0)
        return torch.mul(p, w.unsqueeze(-1), out=out).sub_(q).clamp_(min=0)
    if w is None:
        return B.positive_part(p - q)
    return B.positive_part(B.expand_dims(w, -1) * p - q)
