"""Greedy multi-path block verification, GBV (Thomas & Pal, arXiv 2602.16961).

K draft paths X_1..X_K of length L are drawn i.i.d. from q (with replacement). At every node c
tokens are ranked by the ratio r(a) = p(a|c) / q(a|c), largest first, ties broken by the
smaller token id (ONE rule, used both for selecting the path and for the skewed law below;
tokens with q(a|c) = 0 are never drafted and rank last). This ranking of the children of every
node orders all sequences of one length lexicographically.

Selection. x* = the lexicographically largest drafted path: walk from the root and at each node
step to the drafted child of best rank (among the paths still through the current node).

Skewed draft law. x* is the maximum of K i.i.d. draws in a total order, so P(x*^i <= s) = Q(<= s)^K
and x* is autoregressive with conditionals q^G: at a node c on x* of depth i, with x = Q(c) the
draft probability of c, A = the q-mass of depth-i prefixes ranked strictly below c,
y(a) = x * sum_{b ranked below a} q(b|c) and z(a) = x q(a|c),

    q^G(a|c) = ((A + y + z)^K - (A + y)^K) / ((A + x)^K - A^K)
             = q(a|c) * S_K(A + y, z) / S_K(A, x),   S_K(u, d) = sum_{j<K} (u + d)^j u^(K-1-j),

(the second form, from (u+d)^K - u^K = d S_K(u, d), has no cancellation and no division by x; it is
what we compute). Along x*: A_0 = 0, x_0 = 1, A_{i+1} = A_i + y(X*_{i+1}), x_{i+1} = x_i q(X*_{i+1}|c).
At the root q^G(a) = F(a)^K - F(a-)^K with F the CDF of q in rank order.

Verification. Block verification (Sun et al., arXiv 2403.10444) of x* with q replaced by q^G:
weights w_i = min(1, w_{i-1} p/q^G), residuals max(w_i p - q^G, 0), h_i = S_i / (S_i + 1 - w_i),
P(tau = i) = h_i prod_{j>i} (1 - h_j). It is lossless because x* has the autoregressive law q^G
and the verifier sees only x* and the rows along it. For K = 1, S_K = 1 and q^G = q: exactly
block verification (in exact rationals, too).

Exact analysis. Because of this, the exact engine's default route for GBV (``analytic``,
[`gbv_block_law`][spectheory.verifiers.gbv.gbv_block_law]) is block verification against q^G
evaluated per node of the sequence tree; ``route="enumerate"`` keeps the enumeration of all joint
draft outcomes as the independent cross-check (the tests compare the two exactly).

Mismatched tie-breaking ([`gbv_mismatched_ties`][spectheory.verifiers.gbv.gbv_mismatched_ties]):
selecting with one tie rule and ranking for q^G with the other (a constructed example of a tie-rule
mismatch between selection and ranking) makes the selected path's law differ from q^G on instances
with equal ratios, and the result is lossy; it is kept as a negative control for the checker.
"""

from __future__ import annotations

import numpy as np
from ..runtime._lazy import torch

from ..runtime import backend as B
from ..law import MultiLaw
from ..registry import VerifierSpec
from .block import block_verification

#: Tie rules: "low" ranks the smaller token id first among equal ratios, "high" the larger one.
TIE_RULES = ("low", "high")


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


def rank_and_below(q_rows, p_rows, ties: str = "low"):
    """Rank of every token at each node and the draft mass ranked strictly below it.

    ``q_rows``, ``p_rows`` [..., V] conditionals at the same nodes. Returns ``(pos, below)``:
    ``pos[..., a]`` the rank position of token a (0 = largest p/q) and ``below[..., a]`` =
    sum_{b ranked below a} q(b|node). Tokens with q = 0 get ratio -1 (ranked last). One stable
    sort per row; positions and masses are put back in token order by a scatter (O(V)).
    """
    if ties not in TIE_RULES:
        raise ValueError(f"unknown tie rule {ties!r}; choose from {TIE_RULES}")
    V = q_rows.shape[-1]
    order = _rank_order(_ratio(p_rows, q_rows), ties)
    ranks = B.broadcast_to(B.arange(V, order), tuple(order.shape))
    pos = B.unsort(ranks.contiguous() if B.is_torch(order) else np.ascontiguousarray(ranks),
                  order)
    return pos, _below_from_order(q_rows, order)


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


def skewed_levels(q_levels, p_levels, K: int, V: int):
    """q^G tables below C contexts, level by level (``q_levels[d]``, ``p_levels[d]`` [C V^d, V],
    d < L): at each context A = 0, x = 1; for a child c a, A = A_c + x_c below_c(a) and
    x = x_c q(a|c) (module doc). Returns the list of [C V^d, V] rows of q^G."""
    C = q_levels[0].shape[0]
    A = B.full((C,), 0, q_levels[0])
    x = B.full((C,), 1, q_levels[0])
    out = []
    for d, q in enumerate(q_levels):
        below = below_mass(q, p_levels[d], "low")
        out.append(skewed_rows(q, below, A, x, K))
        A = (B.expand_dims(A, 1) + B.expand_dims(x, 1) * below).reshape(-1)
        x = (B.expand_dims(x, 1) * q).reshape(-1)
    return out


def gbv_block_law(how, q_levels, p_levels, V: int, L: int):
    """Analytic route of GBV (i.i.d. drafting): the exact block law below C contexts is that of
    block verification with the draft q replaced by q^G (the selected path has the
    autoregressive law q^G and the verifier sees only it), computed per node of the sequence
    tree: ~V^L work instead of the V^(L K) joint outcomes of the enumeration, the same law
    (equal in exact rationals)."""
    from ..engine.perdraft import BlockLaw
    from ..engine.nodes import node_block_law
    from .block import BLOCK_NODE

    qg = skewed_levels(q_levels, p_levels, how.paths, V)
    nodes = node_block_law(BLOCK_NODE, qg, p_levels, V, L, name=how.spec.name)
    C = p_levels[0].shape[0]
    return BlockLaw(nodes.tau_pmf(C), [None] + [nodes.emitted(d) for d in range(L + 1)])


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


# The law over output sequences depends only on the multiset of drafted paths (the selected path
# is the lexicographic maximum), so the exact engine may enumerate sorted tuples of paths.
GBV = VerifierSpec(
    "gbv", gbv, paths=None, drafting="iid", order_invariant=True,
    node_form="select the lexicographically best path by p/q; block verification against q^G",
    paper="Thomas & Pal, arXiv 2602.16961",
    summary="greedy multi-path block verification",
    analytic=gbv_block_law)
GBV_MISMATCHED_TIES = VerifierSpec(
    "gbv-mismatched-ties", gbv_mismatched_ties, paths=None, drafting="iid", lossless=False,
    order_invariant=True, paper="Thomas & Pal, arXiv 2602.16961 (tie rule mismatched)",
    summary="LOSSY control: GBV selecting and ranking with different tie rules")


def gbv_skewed_draft(instance, paths: int, exact: bool | None = None,
                     max_sequences: int | None = None):
    """The skewed draft model q^G of GBV with K = ``paths`` i.i.d. paths, as tables of depth
    0..L-1 (same ranking and formula as [`gbv`][spectheory.verifiers.gbv.gbv]). Level by level:
    A_root = 0, x_root = 1; for a child c a: A = A_c + x_c below_c(a), x = x_c q(a|c)."""
    from ..engine.joint import _check_args
    from ..engine.seqtree import levels
    from ..inputs.models import TableModel
    from ..runtime.sizes import check_size

    _check_args(paths, "iid")
    V, L = instance.vocab_size, instance.block_length
    exact = instance.exact if exact is None else exact
    check_size(V**L, "GBV skewed draft", exact, max_sequences, f"V^L = {V}^{L}")
    q_levels = levels(instance.draft, 0, L, exact)
    p_levels = levels(instance.target, 0, L, exact)
    tables = skewed_levels(q_levels, p_levels, paths, V)
    if not exact:
        tables = [t.cpu().numpy() for t in tables]
    return TableModel(V, tuple(tables))
