"""GBV and SpecInfer (with replacement) law functions as they were before the real-model-shape
speed-up (O(V) counting of every drafted rank, a full residual chain per node), kept verbatim as
the reference that the current implementations must reproduce bit for bit in float and exactly in
rationals (tests/test_real_laws_exact.py)."""

from __future__ import annotations

import torch

from spectheory.runtime import backend as B
from spectheory.law import MultiLaw
from spectheory.verifiers import common
from spectheory.verifiers.block import block_verification
from spectheory.verifiers.common import (drafted_ratio, normalise_residual, on_distinct,
                                         positive_residual)
from spectheory.verifiers.specinfer import _rrs_norep

TIE_RULES = ("low", "high")


# ----------------------------------------------------------------------------- GBV


def _ratio(p_rows, q_rows):
    """p/q with ratio -1 where q = 0 (never drafted: ranked last)."""
    if B.is_torch(p_rows):
        r = torch.div(p_rows, q_rows)
        if q_rows.numel() and float(q_rows.amin()) <= 0:  # a read-only screen for zeros
            r = r.masked_fill_(q_rows == 0, -1)
        return r
    return B.safe_div(p_rows, q_rows, B.scalar(p_rows, -1))


#: Token ids fit in the low bits of a packed sort key (the vocabulary limit is 1,000,000).
_ID_BITS = 20


def _order_packed(r, ties: str):
    """Rank order (best first) of float32 ratios r [..., V] on the CPU by ONE sort of values.

    Non-negative float32 bit patterns increase with the value (and -1, the ratio of q = 0, has a
    negative pattern), so key = -bits(r) * 2^20 + t, with t = id (ties "low") or 2^20 - 1 - id
    ("high"), is unique per token and increases along the rank order; sorting the keys
    (numpy's vectorised sort) orders the tokens and t is read back from the low 20 bits.
    """
    V = r.shape[-1]
    ids = torch.arange(V, dtype=torch.int64)
    t = ids if ties == "low" else (2**_ID_BITS - 1 - ids)
    key = r.contiguous().view(torch.int32).to(torch.int64).neg_().mul_(2**_ID_BITS).add_(t)
    keys = key.numpy()
    keys.sort(axis=-1)  # in place
    low = key.bitwise_and_(2**_ID_BITS - 1)
    return low if ties == "low" else low.neg_().add_(2**_ID_BITS - 1)


def _rank_order(r, ties: str):
    """Token order by rank (ratio descending, ties by id per ``ties``): one sort per row."""
    V = r.shape[-1]
    if (B.is_torch(r) and r.dtype == torch.float32 and r.device.type == "cpu"
            and V < 2**_ID_BITS):
        return _order_packed(r, ties)
    if ties == "low":
        return B.argsort(r, axis=-1, descending=True)
    # stable sort of the reversed token axis, mapped back: equal ratios, larger id first
    return (V - 1) - B.argsort(B.flip(r, -1), axis=-1, descending=True)


def _below_from_order(q_rows, order):
    """below[..., a] = q-mass of the tokens after a in ``order``: a cumulative sum in rank order
    put back in token order by one scatter."""
    q_sorted = B.take_along(q_rows, order, axis=-1)
    at_or_below = B.flip(B.cumsum(B.flip(q_sorted, -1), axis=-1), -1)  # sum over ranks >= j
    below_sorted = B.concat([at_or_below[..., 1:], B.zeros_like(q_sorted[..., :1])], axis=-1)
    return B.unsort(below_sorted, order)


def below_mass(q_rows, p_rows, ties: str = "low"):
    """``below`` of [`rank_and_below`][spectheory.verifiers.gbv.rank_and_below] alone (no rank
    positions): one sort, one scatter."""
    if ties not in TIE_RULES:
        raise ValueError(f"unknown tie rule {ties!r}; choose from {TIE_RULES}")
    return _below_from_order(q_rows, _rank_order(_ratio(p_rows, q_rows), ties))


def _power_sum(u, d, K: int):
    """S_K(u, d) = sum_{j<K} (u + d)^j u^(K-1-j) = ((u + d)^K - u^K) / d, without division."""
    # Horner form: S_1 = 1, S_{j+1} = (u + d) S_j + u^j.
    ud = u + d
    if B.is_torch(ud) and K > 1:  # same operations, in place
        total = ud + u  # S_2 = (u + d) + u
        power = u.clone()
        for _ in range(K - 2):
            power.mul_(u)
            total.mul_(ud).add_(power)
        return total
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


#: Elements per chunk of rows when ranking drafted tokens on torch (keeps temporaries in cache).
RANK_CHUNK_ELEMENTS = 2**18


def _rank_rows(q, p, x, ties: str):
    """Number of tokens ranked above token x[...] in each row: q, p [..., V], x [...]."""
    V = q.shape[-1]
    r = _ratio(p, q)
    xi = B.expand_dims(x, -1)
    rx = B.take_along(r, xi, axis=-1)
    ids = B.arange(V, x)
    earlier = (lambda: (ids < xi) if ties == "low" else (ids > xi))
    if B.is_torch(r):  # count r > rx; ties (another token with the same ratio) are rare
        above = (r > rx).sum(dim=-1, dtype=torch.int64)
        n_eq = (r == rx).sum(dim=-1, dtype=torch.int64)
        tied = n_eq > 1
        if bool(tied.any()):
            above = above + torch.where(tied, ((r == rx) & earlier()).sum(dim=-1), 0)
        return above
    above = (r > rx) | ((r == rx) & earlier())
    return B.sum(B.to_int(above), axis=-1)


def drafted_rank(drafts, q, p, ties: str = "low"):
    """Rank position [B, K, L] of every drafted token at its node (0 = best): the number of tokens
    ranked above it, by the same order as
    [`rank_and_below`][spectheory.verifiers.gbv.rank_and_below] (ratio descending, ties by token
    id), counted by comparisons (O(V) per node, no sort; on torch a few paths at a time, so the
    temporaries stay small)."""
    L, V = drafts.shape[-1], q.shape[-1]
    lead = tuple(drafts.shape)
    x = B.as_index(drafts, q)
    if not B.is_torch(q):
        return _rank_rows(q, p[:, :, :L], x, ties)
    qf = q.reshape(-1, L, V)
    pf = p.reshape(-1, L + 1, V)
    xf = x.reshape(-1, L)
    n = qf.shape[0]
    step = max(1, RANK_CHUNK_ELEMENTS // (L * V))
    out = torch.empty(n, L, dtype=torch.long, device=q.device)
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        out[r0:r1] = _rank_rows(qf[r0:r1], pf[r0:r1, :L], xf[r0:r1], ties)
    return out.reshape(lead)


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


def _skewed_path_rows(d_sel, q_sel, p_sel, K: int, ties: str, denominators=None):
    """q^G rows [B, L, V] along the selected paths: A_0 = 0, x_0 = 1, then per position one sort
    ([`below_mass`][spectheory.verifiers.gbv.below_mass]) and the skewed row; A += x below(X_i), x
    *= q(X_i). On torch a few rows at a time (their temporaries stay in cache), written into one
    array.

    ``denominators`` [B, L], if given, receives the skew denominator S_K(A, x) of every position
    (zero where the row falls back to q; [`spectheory.cli.audit`][spectheory.cli.audit] reports that
    underflow)."""
    Bsz, L = d_sel.shape
    V = q_sel.shape[-1]
    if B.is_torch(q_sel) and q_sel.device.type == "cpu":
        out = torch.empty_like(q_sel)
        step = max(1, RANK_CHUNK_ELEMENTS // V)
    else:
        out, step = None, max(Bsz, 1)
    rows_all = []
    for b0 in range(0, Bsz, step):
        b1 = min(Bsz, b0 + step)
        A = B.zeros_like(q_sel[b0:b1, 0, 0])
        x = B.ones_like(A)
        rows = []
        for i in range(L):
            qi = q_sel[b0:b1, i]
            below = below_mass(qi, p_sel[b0:b1, i], ties)
            row = skewed_rows(qi, below, A, x, K)
            if denominators is not None:
                denominators[b0:b1, i] = _power_sum(A, x, K)
            if out is not None:
                out[b0:b1, i] = row
            else:
                rows.append(row)
            t = B.expand_dims(d_sel[b0:b1, i], -1)
            A = A + x * B.take_along(below, t, axis=-1)[:, 0]
            x = x * B.take_along(qi, t, axis=-1)[:, 0]
        if out is None:
            rows_all.append(B.stack(rows, axis=1))
    return out if out is not None else rows_all[0]


def _gbv(drafts, q, p, selection_ties: str, ranking_ties: str) -> MultiLaw:
    Bsz, K, L = drafts.shape
    V = q.shape[-1]
    k = select_path(drafts, drafted_rank(drafts, q, p, selection_ties), V)
    d_sel, q_sel, p_sel = (_gather_path(a, k) for a in (drafts, q, p))
    law = block_verification(d_sel, _skewed_path_rows(d_sel, q_sel, p_sel, K, ranking_ties),
                             p_sel)
    chosen = B.expand_dims(B.arange(K, drafts) == B.expand_dims(k, 1), -1)  # [B, K, 1]
    stop = B.where(chosen, B.expand_dims(law.stop, 1), B.zeros_like(B.expand_dims(law.stop, 1)))
    corr = B.broadcast_to(B.expand_dims(law.correction, 1), (Bsz, K, L + 1, V))
    return MultiLaw(stop, corr)


def gbv(drafts, q, p) -> MultiLaw:
    """Law of GBV (i.i.d. drafting). drafts [B,K,L], q [B,K,L,V], p [B,K,L+1,V]; see module doc."""
    return _gbv(drafts, q, p, "low", "low")


def gbv_mismatched_ties(drafts, q, p) -> MultiLaw:
    """LOSSY negative control: select with ties to the larger token id, rank for q^G with ties to
    the smaller one. Equal to [`gbv`][spectheory.verifiers.gbv.gbv] when no two drafted children
    have equal p/q."""
    return _gbv(drafts, q, p, "high", "low")


# ----------------------------------------------------------------------------- SpecInfer


def prefix_membership(drafts):
    """``same[i]`` [B, K, K'] (int 0/1): path k' passes through the depth-i node of path k, for
    i = 0..L (``same[0]`` all ones)."""
    eq = B.expand_dims(drafts, 2) == B.expand_dims(drafts, 1)  # [B, K, K', L] bool
    out = [B.to_int(eq[..., 0] == eq[..., 0])]
    same = None
    for i in range(drafts.shape[-1]):  # a running AND over depths: equal prefixes
        same = eq[..., i] if same is None else same & eq[..., i]
        out.append(B.to_int(same))
    return out


def _rule_on_distinct(rule, member, tok, q_rows, p_rows, prefix, V: int, trusted: bool):
    """``rule`` evaluated once per distinct node input
    ([`on_distinct`][spectheory.verifiers.common.on_distinct]), or None.

    The rule's output for row (b, k) depends only on that row's inputs: its rows q, p, its
    candidates member[b, k] and their tokens (a rule ignores the tokens of non-candidates, which are
    passed as 0). The key is the node's drafted prefix ``prefix`` [B, Kr] (a number) and the
    candidates' tokens in path order, so member and tokens are read off it one to one and the rows
    q, p are prefix rows. In the exact engine, where all outcomes share the context, a few distinct
    inputs stand for thousands of rows. None when the key would not fit in int64. ``trusted``: q, p
    are the engine's prefix rows ([`common.engine_rows`][spectheory.verifiers.common.engine_rows]),
    not compared.
    """
    Bsz, Kr, K = member.shape
    span = (V + 1) ** K
    if Bsz * Kr < common.DISTINCT_MIN_ROWS or float(prefix.max()) * span + span >= 2.0**62:
        return None
    toks = B.where(member == 1, B.expand_dims(tok, 1), 0)  # a non-candidate's token: 0
    code = B.zeros_like(toks[..., 0])
    for j in range(K):
        code = code * (V + 1) + toks[..., j] + member[..., j]  # 0 for a non-candidate
    N = Bsz * Kr
    toks = toks.reshape(N, K)

    def flat_rule(m, t, qr, pr):
        a, none, c = rule(B.expand_dims(m, 1), t, B.expand_dims(qr, 1), B.expand_dims(pr, 1))
        return a[:, 0], none[:, 0], c[:, 0]

    out = on_distinct(flat_rule, (prefix * span + code).reshape(-1),
                      (member.reshape(N, K), toks, q_rows.reshape(N, V), p_rows.reshape(N, V)),
                      keyed=2, prefix_rows=(2, 3) if trusted else ())  # member, tokens: keyed
    if out is None:
        return None
    return out[0].reshape(Bsz, Kr, K), out[1].reshape(Bsz, Kr), out[2].reshape(Bsz, Kr, V)


def node_recursive_law(drafts, q, p, rule) -> MultiLaw:
    """Law of a root-to-leaf node-by-node verifier (see module doc).

    Paths that share a prefix must carry identical rows there (true for any model, and for the
    exact engine); the root rows q[:, k, 0], p[:, k, 0] are the same for every k, so the rule at
    the root (where every path is a candidate) is evaluated once, on path 1, and shared. Node
    inputs that repeat across the batch (the exact engine's joint outcomes) are evaluated once
    (`_rule_on_distinct`).

    ``rule(member [B,K,K'] int, tokens [B,K'], q_rows [B,K,V], p_rows [B,K,V])`` returns
    ``(accept [B,K,K'], none [B,K], correction [B,K,V])``: at the node of path k, the probability
    that candidate k' is the accepted one, that all are rejected, and Y's law in that case. The
    rule must treat the K rows of its batch independently (row k's outputs depend on row k's
    inputs only).
    """
    Bsz, K, L = drafts.shape
    V = q.shape[-1]
    trusted = common.engine_rows(drafts, q, p)
    same = prefix_membership(drafts)
    ids = B.expand_dims(B.arange(K, drafts), 0)  # [1, K]
    reach = B.ones_like(q[:, :, 0, 0])  # [B, K]
    prefix = B.zeros_like(drafts[:, :, 0])  # [B, K] the drafted prefix of path k as a number
    stops, corrs = [], []
    for i in range(L + 1):
        member = same[i]
        first = ids >= 0  # no earlier path here (K is small: a loop over the earlier paths)
        for kp in range(K - 1):
            first = first & ~((member[:, :, kp] == 1) & (ids > kp))
        if i == L:
            none, corr = B.ones_like(reach), p[:, :, L]
        else:
            tok = drafts[:, :, i]
            if i == 0:  # one node, the same for every path: evaluate it once
                args = (member[:, :1], tok, q[:, :1, 0], p[:, :1, 0])
                out = _rule_on_distinct(rule, *args, prefix[:, :1], V, trusted) or rule(*args)
                accept = B.broadcast_to(out[0], (Bsz, K, K))
                none = B.broadcast_to(out[1], (Bsz, K))
                corr = B.broadcast_to(out[2], (Bsz, K, V))
            else:
                args = (member, tok, q[:, :, i], p[:, :, i])
                accept, none, corr = (_rule_on_distinct(rule, *args, prefix, V, trusted)
                                      or rule(*args))
            child = None  # sum of the acceptances of candidates with path k's token
            for kp in range(K):
                a = accept[:, :, kp]
                term = B.where(tok == tok[:, kp:kp + 1], a, B.zeros_like(a))
                child = term if child is None else child + term
            prefix = prefix * V + tok
        stops.append(B.where(first, reach * none, B.zeros_like(reach)))
        corrs.append(corr)
        if i < L:
            reach = reach * child
    return MultiLaw(B.stack(stops, axis=2), B.stack(corrs, axis=2))


def _normalise(rows, fallback):
    return B.safe_div(rows, B.sum(rows, axis=-1, keepdims=True), fallback)


def _residual_step(p_rows, q_rows):
    """normalise(max(p' - q', 0)) row by row (rows [..., V]), p' itself where the residual has
    no mass: the same values as ``_normalise(positive_part(p' - q'), p')``."""
    V = p_rows.shape[-1]
    shape = tuple(p_rows.shape)
    p2, q2 = p_rows.reshape(-1, V), B.broadcast_to(q_rows, shape).reshape(-1, V)
    res = positive_residual(None, p2, q2)
    return normalise_residual(res, B.sum(res, axis=-1), p2).reshape(shape)


def _residual_chain(p_rows, q_rows, steps: int):
    """p'_1 = p, p'_{r+1} = normalise(max(p'_r - q, 0)) (p'_r where the residual has no mass),
    r = 1..steps, stacked first: [steps + 1, *p_rows.shape]. On torch written in place into one
    array (no stacking copy)."""
    if not B.is_torch(p_rows):
        chain = [p_rows]
        for _ in range(steps):
            chain.append(_residual_step(chain[-1], q_rows))
        return B.stack(chain, axis=0)
    V = p_rows.shape[-1]
    chain = torch.empty((steps + 1,) + tuple(p_rows.shape), dtype=p_rows.dtype,
                        device=p_rows.device)
    chain[0] = p_rows
    flat = chain.view(steps + 1, -1, V)
    q2 = q_rows.reshape(-1, V)
    for r in range(steps):
        res = positive_residual(None, flat[r], q2, out=flat[r + 1])
        normalise_residual(res, res.sum(dim=-1), flat[r])
    return chain


def rrs_rule(member, tok, q_rows, p_rows, without_replacement: bool = False):
    """Recursive rejection sampling at one node (with or without replacement; module doc)."""
    if without_replacement:
        return _rrs_norep(member, tok, q_rows, p_rows)
    # With replacement q' = q throughout, so after r rejections of active candidates the target
    # is p'_{r+1} = normalise(max(p'_r - q, 0)) whatever the tokens were: build the chain
    # p'_1..p'_{K+1} once and read candidate j's acceptance at r_j = its active predecessors.
    K = tok.shape[1]
    Bsz, Kr = member.shape[0], member.shape[1]
    chain = _residual_chain(p_rows, q_rows, K)  # [K+1, B, Kr, V]
    b = B.arange(Bsz, tok).reshape(Bsz, 1, 1)
    k = B.arange(Kr, tok).reshape(1, Kr, 1)
    t = B.expand_dims(tok, 1)  # [B, 1, K']
    before = B.cumsum(member, axis=2) - member  # active candidates before j  [B, Kr, K']
    ratio = B.minimum(drafted_ratio(chain[before, b, k, t], q_rows[b, k, t]), 1)
    a_all = B.where(member == 1, ratio, B.zeros_like(ratio))
    survive = B.ones_like(ratio[:, :, 0])
    accepts = []
    for j in range(K):
        a = a_all[:, :, j]
        accepts.append(survive * a)
        survive = survive * (1 - a)
    m = B.sum(member, axis=2)  # [B, Kr] active candidates: the correction is p'_{m+1}
    return B.stack(accepts, axis=2), survive, chain[m, b[..., 0], k[..., 0]]


def specinfer(drafts, q, p) -> MultiLaw:
    """SpecInfer recursive rejection sampling, i.i.d. drafting (module doc)."""
    return node_recursive_law(drafts, q, p, rrs_rule)
