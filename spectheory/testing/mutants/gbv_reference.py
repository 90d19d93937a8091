"""Bugs of the published GBV reference code, replicated from their description.

Greedy multi-path block verification (GBV; Thomas & Pal, arXiv 2602.16961) selects the
lexicographically best of K i.i.d. drafted paths by the ratio r = p/q and verifies it by block
verification against the skewed draft law q^G of that maximum
([`spectheory.verifiers.gbv`][spectheory.verifiers.gbv]). It is lossless only when the selection and
the ranking behind q^G are the *same* total order. The published reference code breaks this in three
ways, and its traversal baseline visits the draft tree in the wrong order:

* [`gbv_tie_rule`][spectheory.testing.mutants.gbv_reference.gbv_tie_rule]: on a p/q tie the
  selection keeps the earliest-drafted child (path order), while the q^G ranking puts the larger
  token id first;
* [`gbv_capped_ranking`][spectheory.testing.mutants.gbv_reference.gbv_capped_ranking]: the same,
  ranking by min(1, p/q), so every token with p >= q ties;
* [`gbv_fp16_skew`][spectheory.testing.mutants.gbv_reference.gbv_fp16_skew]: q^G is computed in
  float16 and, where its normaliser underflows to 0, the code uses q instead: the selected path is
  then verified as if it were drawn from q;
* [`traversal_first_leaf`][spectheory.testing.mutants.gbv_reference.traversal_first_leaf]: the
  traversal baseline takes as its next node the remaining leaf of smallest node index, which is not
  post-order once K >= 3.

The first three are K-path law functions exact in rationals; their laws depend on the order of
the paths, so the exact engine must enumerate ordered outcomes (``symmetric=False``).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

from ...runtime import backend as B
from ...law import Law
from ...registry import VerifierSpec
from ...verifiers.block import block_verification
from ...verifiers.gbv import rank_and_below, skewed_rows

__all__ = [
    "GBV_TIE_RULE", "GBV_CAPPED_RANKING", "GBV_FP16_SKEW", "TRAVERSAL_FIRST_LEAF",
    "TRAVERSAL_POST_ORDER",
    "gbv_tie_rule", "gbv_capped_ranking", "gbv_fp16_skew", "traversal_first_leaf",
    "traversal_post_order", "first_leaf_order", "post_order",
]


def _ratio(px, qx, capped: bool):
    r = B.safe_div(px, qx, B.scalar(px, -1))  # q = 0: never drafted, ranked last
    return B.minimum(r, 1) if capped else r


def _select_earliest(drafts, q, p, capped: bool):
    """Index [B] of the selected path: from the root, step to the drafted child of largest
    ratio; on a tie keep the child drafted by the earliest path (smallest path index)."""
    Bsz, K, L = drafts.shape
    idx = B.expand_dims(drafts, -1)
    px = B.take_along(p[:, :, :L], idx, axis=-1)[..., 0]
    qx = B.take_along(q, idx, axis=-1)[..., 0]
    r = _ratio(px, qx, capped)  # [B, K, L]
    alive = drafts[:, :, 0] == drafts[:, :, 0]
    ids = B.broadcast_to(B.expand_dims(B.arange(K, drafts), 0), (Bsz, K))
    for i in range(L):
        ri = r[:, :, i]
        best = None
        for k in range(K):  # largest ratio among the alive paths (exact-friendly, no -inf)
            cand = B.where(alive[:, k], ri[:, k], B.scalar(ri, -2) + 0 * ri[:, k])
            best = cand if best is None else B.maximum(best, cand)
        top = alive & (ri == B.expand_dims(best, 1))
        first = B.amin(B.where(top, ids, K), axis=1)  # earliest path with the best ratio
        token = B.take_along(drafts[:, :, i], B.expand_dims(first, 1), axis=1)
        alive = alive & (drafts[:, :, i] == token)
    return B.amin(B.where(alive, ids, K), axis=1)


def _gather_path(x, k):
    idx = k.reshape((k.shape[0], 1) + (1,) * (x.ndim - 2))
    idx = B.broadcast_to(idx, (x.shape[0], 1) + tuple(x.shape[2:]))
    return B.take_along(x, idx, axis=1)[:, 0]


def _skewed_along(d_sel, q_sel, p_sel, K: int, capped: bool, ties: str, guard=None):
    """q^G rows [B, L, V] along the selected path (ranking ``ties``; ``capped`` ranks by
    min(1, p/q)); ``guard(A, x) -> bool [B]`` marks rows replaced by q."""
    L = d_sel.shape[-1]
    p_rank = B.minimum(p_sel[:, :L], q_sel) if capped else p_sel[:, :L]  # ratio min(1, p/q)
    _, below = rank_and_below(q_sel, p_rank, ties)
    A = B.zeros_like(q_sel[:, 0, 0])
    x = B.ones_like(A)
    rows = []
    for i in range(L):
        row = skewed_rows(q_sel[:, i], below[:, i], A, x, K)
        if guard is not None:
            row = B.where(B.expand_dims(guard(A, x, K), -1), q_sel[:, i], row)
        rows.append(row)
        t = B.expand_dims(d_sel[:, i], -1)
        A = A + x * B.take_along(below[:, i], t, axis=-1)[:, 0]
        x = x * B.take_along(q_sel[:, i], t, axis=-1)[:, 0]
    return B.stack(rows, axis=1)


def _as_multi(law, k, K: int):
    Bsz, L1, V = law.correction.shape
    chosen = B.expand_dims(B.arange(K, k) == B.expand_dims(k, 1), -1)  # [B, K, 1]
    stop = B.where(chosen, B.expand_dims(law.stop, 1), B.zeros_like(B.expand_dims(law.stop, 1)))
    corr = B.broadcast_to(B.expand_dims(law.correction, 1), (Bsz, K, L1, V))
    return Law(stop, corr)


def _reference_gbv(drafts, q, p, capped: bool, guard=None) -> Law:
    K = drafts.shape[1]
    k = _select_earliest(drafts, q, p, capped)
    d_sel, q_sel, p_sel = (_gather_path(a, k) for a in (drafts, q, p))
    rows = _skewed_along(d_sel, q_sel, p_sel, K, capped, "high", guard)
    return _as_multi(block_verification(d_sel, rows, p_sel), k, K)


def gbv_tie_rule(drafts, q, p) -> Law:
    """GBV whose selection keeps the earliest-drafted child on a p/q tie while q^G ranks the
    larger token id first.

    Replica of the tie handling of the published GBV reference code (Thomas & Pal,
    arXiv 2602.16961, ``TreeVerifier``). With equal ratios the selected path is not the maximum
    of the K paths in the order behind q^G, so its law is not q^G. Smallest case: p = q =
    (1/2, 1/2), V = 2, K = 2, L = 1: the selected token is path 1's, uniform, but q^G = (1/4, 3/4)
    and the output is (1/3, 2/3): TV 1/6. Exact in rationals; the law depends on the path order.
    """
    return _reference_gbv(drafts, q, p, capped=False)


def gbv_capped_ranking(drafts, q, p) -> Law:
    """GBV ranking by min(1, p/q) (selection and q^G), with the reference code's tie rules.

    Replica of the second copy of the tie bug in the published GBV reference code (Thomas & Pal,
    arXiv 2602.16961): capping the ratio at 1 makes every token with p >= q tie, so the
    mismatch between the selection (earliest-drafted child) and the q^G ranking (larger token id
    first) shows on generic instances, not only on exact ties of p/q. Exact in rationals.
    """
    return _reference_gbv(drafts, q, p, capped=True)


def fp16_underflow(A, x, K: int, dtype=torch.float16):
    """True [B] where the q^G normaliser (A + x)^K - A^K evaluates to 0 in ``dtype``."""
    a = torch.as_tensor(np.asarray([float(v) for v in _flat(A)]), dtype=dtype)
    xx = torch.as_tensor(np.asarray([float(v) for v in _flat(x)]), dtype=dtype)
    zero = ((a + xx) ** K - a**K) == 0
    if isinstance(A, torch.Tensor):
        return zero.to(A.device)
    return zero.numpy()


def _flat(a):
    if isinstance(a, torch.Tensor):
        return a.reshape(-1).tolist()
    return list(np.asarray(a).reshape(-1))


def gbv_fp16_skew(drafts, q, p, dtype=torch.float16) -> Law:
    """GBV whose q^G row falls back to q where its normaliser underflows in float16.

    Replica of the precision fallback of the published GBV reference code (Thomas & Pal,
    arXiv 2602.16961): the skewed law q^G(a|c) = ((A + y + z)^K - (A + y)^K) /
    ((A + x)^K - A^K) is computed in float16; at a node where A (the mass ranked below) is 0 the
    normaliser is x^K, which underflows to exactly 0 in float16 once x^K < 2^-25, and the code
    then uses q(.|c): the best-of-K path is verified there as if it were drawn from q. In
    bfloat16 and float32 the normaliser does not underflow (pass ``dtype``). Only the fallback
    decision is taken in ``dtype``; the rows themselves are exact, so the measured bias is that
    of the fallback alone. Selection and ranking follow [`gbv`][spectheory.verifiers.gbv.gbv].
    """
    K = drafts.shape[1]
    from ...verifiers.gbv import drafted_rank, select_path

    V = q.shape[-1]
    k = select_path(drafts, drafted_rank(drafts, q, p, "low"), V)
    d_sel, q_sel, p_sel = (_gather_path(a, k) for a in (drafts, q, p))
    rows = _skewed_along(d_sel, q_sel, p_sel, K, False, "low",
                         guard=lambda A, x, KK: fp16_underflow(A, x, KK, dtype))
    return _as_multi(block_verification(d_sel, rows, p_sel), k, K)


# ----------------------------------------------------------------------------- traversal order


def _tree(drafts_k):
    """Merged token tree of K paths (lists of tokens): nodes numbered level by level, within a
    level in the order of the first path through them. Returns (parent, token, depth, first
    path, node of (k, i)) with node 0 the root."""
    K, L = len(drafts_k), len(drafts_k[0])
    parent, token, depth, first = [-1], [-1], [0], [0]
    node_of = [[0] * (L + 1) for _ in range(K)]
    index = {(): 0}
    for i in range(1, L + 1):
        for k in range(K):
            key = tuple(drafts_k[k][:i])
            if key not in index:
                index[key] = len(parent)
                parent.append(index[key[:-1]])
                token.append(key[-1])
                depth.append(i)
                first.append(k)
            node_of[k][i] = index[key]
    return parent, token, depth, first, node_of


def first_leaf_order(parent):
    """Visit order of the reference code: repeatedly the remaining leaf of smallest index."""
    n = len(parent)
    kids = [0] * n
    for v in range(1, n):
        kids[parent[v]] += 1
    leaves = {v for v in range(n) if kids[v] == 0}
    order = []
    while leaves:
        v = min(leaves)
        leaves.remove(v)
        order.append(v)
        if v:
            kids[parent[v]] -= 1
            if kids[parent[v]] == 0:
                leaves.add(parent[v])
    return order


def post_order(parent):
    """True post-order, children in the order of their node index (first path through them)."""
    n = len(parent)
    children = [[] for _ in range(n)]
    for v in range(1, n):
        children[parent[v]].append(v)
    out = []

    def walk(v):
        for c in children[v]:
            walk(c)
        out.append(v)

    walk(0)
    return out


def _traverse_one(drafts_k, q_k, p_k, order_fn, zero, one):
    """Law of the traversal node rule on one outcome (python lists of numbers)."""
    K, L, V = len(drafts_k), len(drafts_k[0]), len(p_k[0][0])
    parent, token, depth, first, node_of = _tree(drafts_k)
    n = len(parent)
    Mb = [list(p_k[first[v]][depth[v]]) for v in range(n)]
    Ms = [list(q_k[first[v]][depth[v]]) if depth[v] < L else [zero] * V for v in range(n)]
    lost = [False] * n
    pa = [one] * n

    def refresh():
        for v in range(1, n):  # parents have smaller indices: top-down
            if lost[v]:
                continue
            u, x = parent[v], token[v]
            ratio = Mb[u][x] / Ms[u][x] if Ms[u][x] != 0 else one
            pa[v] = min(one, pa[u] * ratio)

    refresh()
    stop = [[zero] * (L + 1) for _ in range(K)]
    corr = [[list(p_k[k][i]) for i in range(L + 1)] for k in range(K)]
    alive = one
    for v in order_fn(parent):
        a = pa[v]
        stop[first[v]][depth[v]] = alive * a
        corr[first[v]][depth[v]] = list(Mb[v])
        alive = alive * (1 - a)
        if v == 0:
            break
        u, x, w = parent[v], token[v], pa[parent[v]]
        res = [max(w * Mb[u][y] - Ms[u][y], zero) for y in range(V)]
        S = sum(res, zero)
        kept = [Ms[u][y] if y != x else zero for y in range(V)]
        tot = sum(kept, zero)
        Mb[u] = [r / S for r in res] if S != 0 else Mb[u]
        Ms[u] = [t / tot for t in kept] if tot != 0 else Ms[u]
        pa[u] = S / (S + (1 - w)) if S + (1 - w) != 0 else one
        lost[u] = True
        refresh()
    return stop, corr


def _traversal(drafts, q, p, order_fn) -> Law:
    exact = B.is_exact(p)
    conv = (lambda a: a.tolist()) if not exact else (lambda a: a.tolist())
    d, qq, pp = conv(drafts), conv(q), conv(p)
    zero, one = (Fraction(0), Fraction(1)) if exact else (0.0, 1.0)
    stops, corrs = [], []
    for b in range(len(d)):
        s, c = _traverse_one([[int(t) for t in path] for path in d[b]], qq[b], pp[b], order_fn,
                             zero, one)
        stops.append(s)
        corrs.append(c)
    if exact:
        return Law(B.to_exact(stops), B.to_exact(corrs))
    return Law(torch.tensor(stops, dtype=p.dtype, device=p.device),
               torch.tensor(corrs, dtype=p.dtype, device=p.device))


def traversal_first_leaf(drafts, q, p) -> Law:
    """Traversal verification on the merged tree visiting the remaining leaf of smallest index.

    Replica of the traversal baseline in the published GBV reference code (Thomas & Pal, arXiv
    2602.16961). The node rule is the one of
    [`traversal_tree`][spectheory.verifiers.traversal.traversal_tree] (Weng et al., arXiv
    2505.12398): accept a node with p_alpha(v), or after losing children with h(v) = S / (S + 1 -
    p_alpha(v)); a rejected child turns its parent's target row into the residual and drops itself
    from the parent's draft row. Nodes are numbered level by level (within a level in the order of
    the first path through them) and the next node visited is the remaining leaf of smallest index.
    That is post-order for K <= 2 but not from K = 3 (paths (0, 0), (1, 0), (0, 1): the node (1, 0)
    is visited before (0, 1)), and lossy there. Exact in rationals (a Python loop over outcomes: for
    small instances only).
    """
    return _traversal(drafts, q, p, first_leaf_order)


def traversal_post_order(drafts, q, p) -> Law:
    """The same code walking in true post-order: equals spectheory's ``traversal-tree`` law
    (the control that shows the visit order alone is the bug)."""
    return _traversal(drafts, q, p, post_order)


GBV_TIE_RULE = VerifierSpec(
    "gbv-ref-tie-rule", gbv_tie_rule, paths=None, drafting="iid", lossless=False,
    paper="GBV reference code (Thomas & Pal, arXiv 2602.16961)",
    summary="LOSSY replica: selection keeps the earliest-drafted child on a tie, q^G ranks the "
            "larger id first")
GBV_CAPPED_RANKING = VerifierSpec(
    "gbv-ref-capped-ranking", gbv_capped_ranking, paths=None, drafting="iid", lossless=False,
    paper="GBV reference code (Thomas & Pal, arXiv 2602.16961)",
    summary="LOSSY replica: ranking by min(1, p/q) with mismatched tie rules")
GBV_FP16_SKEW = VerifierSpec(
    "gbv-ref-fp16-skew", gbv_fp16_skew, paths=None, drafting="iid", lossless=False,
    paper="GBV reference code (Thomas & Pal, arXiv 2602.16961)",
    summary="LOSSY replica: q^G falls back to q where its float16 normaliser underflows")
TRAVERSAL_FIRST_LEAF = VerifierSpec(
    "gbv-ref-traversal-first-leaf", traversal_first_leaf, paths=None, drafting="iid",
    lossless=False, paper="GBV reference code (Thomas & Pal, arXiv 2602.16961); traversal "
                          "verification, Weng et al., arXiv 2505.12398",
    summary="LOSSY replica: traversal visiting the smallest-index leaf first")
TRAVERSAL_POST_ORDER = VerifierSpec(
    "traversal-post-order-control", traversal_post_order, paths=None, drafting="iid",
    paper=TRAVERSAL_FIRST_LEAF.paper,
    summary="control: the replica's code walking in post-order (equals traversal-tree)")
