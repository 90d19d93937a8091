"""The verifier law functions as they were before the per-node rewrite (token, block, GBV with
two sorts per row), kept verbatim as the reference that the current implementations must
reproduce to float tolerance (tests/test_real_laws.py)."""

from __future__ import annotations

from spectheory.runtime import backend as B
from spectheory.law import Law, MultiLaw
from spectheory.verifiers.common import (drafted_probs, residual_corrections, residuals,
                                         stop_from_acceptance_weights)

TIE_RULES = ("low", "high")


def block_weights(drafts, q, p):
    px, qx = drafted_probs(drafts, q, p)
    ratio = B.safe_div(px, qx, B.scalar(px, 1))
    w = [B.ones_like(ratio[:, 0])]
    for i in range(drafts.shape[-1]):
        w.append(B.minimum(w[-1] * ratio[:, i], 1))
    return B.stack(w, axis=1)


def block_verification(drafts, q, p) -> Law:
    L = drafts.shape[-1]
    w = block_weights(drafts, q, p)
    res = residuals(w[:, :L], q, p)
    S = B.sum(res, axis=-1)
    h_mid = B.safe_div(S, S + (1 - w[:, :L]), B.scalar(S, 1))
    h = B.concat([B.ones_like(S[:, :1]), h_mid[:, 1:], w[:, L:]], axis=1)
    return Law(stop_from_acceptance_weights(h), residual_corrections(res, p, B.expand_dims(S, -1)))


def token_verification(drafts, q, p) -> Law:
    px, qx = drafted_probs(drafts, q, p)
    accept = B.minimum(B.safe_div(px, qx, B.scalar(px, 1)), 1)
    one = B.ones_like(accept[:, :1])
    reached = B.cumprod(B.concat([one, accept], axis=1), axis=1)
    stop = reached * B.concat([1 - accept, one], axis=1)
    res = residuals(B.ones_like(accept), q, p)
    return Law(stop, residual_corrections(res, p))


def rank_and_below(q_rows, p_rows, ties: str = "low"):
    """Rank of every token at each node and the draft mass ranked strictly below it.

    ``q_rows``, ``p_rows`` [..., V] conditionals at the same nodes. Returns ``(pos, below)``:
    ``pos[..., a]`` the rank position of token a (0 = largest p/q) and ``below[..., a]`` =
    sum_{b ranked below a} q(b|node). Tokens with q = 0 get ratio -1 (ranked last).
    """
    if ties not in TIE_RULES:
        raise ValueError(f"unknown tie rule {ties!r}; choose from {TIE_RULES}")
    V = q_rows.shape[-1]
    r = B.safe_div(p_rows, q_rows, B.scalar(p_rows, -1))
    if ties == "low":
        order = B.argsort(r, axis=-1, descending=True)
    else:  # stable sort of the reversed token axis, mapped back: equal ratios, larger id first
        order = (V - 1) - B.argsort(B.flip(r, -1), axis=-1, descending=True)
    pos = B.argsort(order, axis=-1)
    q_sorted = B.take_along(q_rows, order, axis=-1)
    at_or_below = B.flip(B.cumsum(B.flip(q_sorted, -1), axis=-1), -1)  # sum over ranks >= j
    below_sorted = B.concat([at_or_below[..., 1:], B.zeros_like(q_sorted[..., :1])], axis=-1)
    return pos, B.take_along(below_sorted, pos, axis=-1)


def _power_sum(u, d, K: int):
    """S_K(u, d) = sum_{j<K} (u + d)^j u^(K-1-j) = ((u + d)^K - u^K) / d, without division."""
    # Horner form: S_1 = 1, S_{j+1} = (u + d) S_j + u^j.
    ud = u + d
    total = B.ones_like(ud)
    power = B.ones_like(u)
    for _ in range(K - 1):
        power = power * u
        total = total * ud + power
    return total


def skewed_rows(q_rows, below, A, x, K: int):
    """q^G(.|c) rows [N, V] at N nodes with masses ``A`` [N] (ranked below c) and ``x`` = Q(c)."""
    A1, x1 = B.expand_dims(A, -1), B.expand_dims(x, -1)
    num = _power_sum(A1 + x1 * below, x1 * q_rows, K)
    den = _power_sum(A1, x1, K)
    return B.safe_div(q_rows * num, den, q_rows)


def _first_true(mask, like_index):
    """Index of the first True along axis 1 of ``mask`` [B, K] (every row has one)."""
    K = mask.shape[1]
    idx = B.broadcast_to(B.expand_dims(B.arange(K, like_index), 0), mask.shape)
    return B.amin(B.where(mask, idx, K), axis=1)


def drafted_rank(drafts, q, p, ties: str = "low"):
    """Rank position [B, K, L] of every drafted token at its node (0 = best): the number of
    tokens ranked above it, by the same order as :func:`rank_and_below` (ratio descending, ties
    by token id), counted by comparisons (O(V) per node, no sort)."""
    L, V = drafts.shape[-1], q.shape[-1]
    r = B.safe_div(p[:, :, :L], q, B.scalar(p, -1))  # [B, K, L, V]
    x = B.expand_dims(drafts, -1)
    rx = B.take_along(r, x, axis=-1)
    ids = B.arange(V, drafts)
    earlier = (ids < x) if ties == "low" else (ids > x)
    above = (r > rx) | ((r == rx) & earlier)
    return B.sum(B.to_int(above), axis=-1)


def select_path(drafts, dpos, V: int):
    """Index [B] of the lexicographically best drafted path, from the rank positions ``dpos``
    [B, K, L] of the drafted tokens (walk from the root keeping the best-ranked children)."""
    L = drafts.shape[-1]
    alive = drafts[:, :, 0] == drafts[:, :, 0]
    for i in range(L):
        key = B.where(alive, dpos[:, :, i], V)
        alive = alive & (key == B.amin(key, axis=1, keepdims=True))
    return _first_true(alive, drafts)


def _gather_path(x, k):
    """x[b, k[b]] for x [B, K, ...]."""
    idx = k.reshape((k.shape[0], 1) + (1,) * (x.ndim - 2))
    idx = B.broadcast_to(idx, (x.shape[0], 1) + tuple(x.shape[2:]))
    return B.take_along(x, idx, axis=1)[:, 0]


def _gbv(drafts, q, p, selection_ties: str, ranking_ties: str) -> MultiLaw:
    Bsz, K, L = drafts.shape
    V = q.shape[-1]
    k = select_path(drafts, drafted_rank(drafts, q, p, selection_ties), V)
    d_sel, q_sel, p_sel = (_gather_path(a, k) for a in (drafts, q, p))
    _, below_sel = rank_and_below(q_sel, p_sel[:, :L], ranking_ties)  # [B, L, V]
    A = B.zeros_like(q_sel[:, 0, 0])
    x = B.ones_like(A)
    rows = []
    for i in range(L):
        rows.append(skewed_rows(q_sel[:, i], below_sel[:, i], A, x, K))
        t = B.expand_dims(d_sel[:, i], -1)
        A = A + x * B.take_along(below_sel[:, i], t, axis=-1)[:, 0]
        x = x * B.take_along(q_sel[:, i], t, axis=-1)[:, 0]
    law = block_verification(d_sel, B.stack(rows, axis=1), p_sel)
    chosen = B.expand_dims(B.arange(K, drafts) == B.expand_dims(k, 1), -1)  # [B, K, 1]
    stop = B.where(chosen, B.expand_dims(law.stop, 1), B.zeros_like(B.expand_dims(law.stop, 1)))
    corr = B.broadcast_to(B.expand_dims(law.correction, 1), (Bsz, K, L + 1, V))
    return MultiLaw(stop, corr)


def gbv(drafts, q, p) -> MultiLaw:
    """Law of GBV (i.i.d. drafting). drafts [B,K,L], q [B,K,L,V], p [B,K,L+1,V]; see module doc."""
    return _gbv(drafts, q, p, "low", "low")


def gbv_mismatched_ties(drafts, q, p) -> MultiLaw:
    """Mismatched tie rules."""
    return _gbv(drafts, q, p, "high", "low")


