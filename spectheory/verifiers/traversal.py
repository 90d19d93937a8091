"""Traversal verification (Weng, Hu, Chen, Liu, Mei, Qiu, Tian, Shi: "Traversal Verification for
Speculative Tree Decoding", NeurIPS 2025, arXiv 2505.12398), on K drafted paths.

The node rule below is a reconstruction from the paper's summary, chosen so that a chain is
exactly block verification as the paper states, and checked lossless by the exact multi-path
checker; it has not been compared line by line with the authors' code. Traversal verification
visits the draft tree leaf to root in post-order. Every node v = u x keeps a sequence-level
weight p_alpha(v) = min(1, p_alpha(u) M_b(x|u) / M_s(x|u)) (p_alpha(root) = 1, M_b = p and
M_s = q initially). A node is visited once all its children are deleted; it is
accepted with probability p_alpha(v) when it is a drafted leaf and, after its children were
deleted, with the block-verification weight h(v) = S / (S + 1 - p_alpha(v)),
S = sum_y max(p_alpha(v) M_b(y|v) - M_s(y|v), 0). Acceptance ends the walk with output
(v, Y ~ M_b(.|v)); a rejected node is deleted and its parent u updated:
M_b(.|u) <- normalise(max(p_alpha(u) M_b(.|u) - M_s(.|u), 0)), M_s(.|u) <- M_s(.|u) with x removed
and renormalised (siblings drafted without replacement) or unchanged (with replacement), and the
p_alpha of the remaining children of u recomputed from the new rows.

On a single chain (K = 1) this is exactly block verification (Sun et al., arXiv 2403.10444): the
visit of depth i accepts with h_i = S_i / (S_i + 1 - w_i) and corrects from
normalise(max(w_i p - q, 0)).

What is implemented. The K paths are the branches of the root, visited in path order, each a chain
(shared prefixes are NOT merged into one token-tree node; under ``norep`` drafting the first tokens
are distinct, so there is nothing to merge, and surplus paths that repeat path 1 are skipped).
Leaf-to-root on branch k is block verification of that branch with the root rows (M_b, M_s) in
place of (p(.|c), q(.|c)); if the branch is rejected down to the root, M_b becomes the root
residual normalise(max(M_b - M_s, 0)) (p_alpha(root) = 1 throughout, since h(root) = 1) and M_s
loses the rejected first token (``traversal``, for ``norep`` drafting) or stays q(.|c)
(``traversal-iid``, with-replacement drafting: each branch is an independent q-path). When all
branches are rejected the output is (root, Y ~ M_b). Each branch is verified losslessly against
the residual target left by the previous ones, so both are lossless under their drafting scheme.
A branch's block verification is evaluated once per distinct input in the batch
([`on_distinct`][spectheory.verifiers.common.on_distinct], keyed on the branch's tokens).

``traversal-tree`` ([`traversal_tree`][spectheory.verifiers.traversal.traversal_tree]) runs the node
rule above on the MERGED token tree of the K paths (shared prefixes are one node; children ordered
by the first path through them; siblings updated without replacement). Under ``norep`` it equals
``traversal``; under i.i.d. drafting the exact checker finds it lossless on every random and
degenerate instance tested (tests; there is no proof). Neither it nor ``traversal-iid`` accepts more
on every instance. With with-replacement sibling updates the merged tree is lossy under i.i.d.
drafting (a test).
"""

from __future__ import annotations


from ..runtime import backend as B
from ..law import Law, MultiLaw, empty_law
from ..registry import VerifierSpec
from ..runtime.errors import check_arrays
from .block import block_verification
from ..law import engine_rows
from .common import drafted_ratio, on_distinct, take_rows


def _branch_law(drafts, Ms, q_rest, Mb, p_rest, key, prefix_rows: tuple):
    """Block verification ([`block_verification`][spectheory.verifiers.block.block_verification]) of
    one branch: its drafts [B, L], with the root rows (M_s, M_b) [B, V] before its own rows q [B,
    L-1, V], p [B, L, V]. Evaluated once per distinct input when ``key`` [B] repeats
    ([`on_distinct`][spectheory.verifiers.common.on_distinct]: the grouping is checked against the
    rows, so a key is a guess that costs time if wrong, never correctness, except for the engine's
    own prefix rows named by ``prefix_rows``: the path's rows, and M_s, M_b while they are still the
    context's root rows). Returns (stop [B, L+1], correction at the root [B, V], correction rows [U,
    L+1, V], inverse [B] or None): row b's corrections are row inverse[b] of the third."""
    def law(d, ms, qr, mb, pr):
        q_k = B.concat([B.expand_dims(ms, 1), qr], axis=1)
        p_k = B.concat([B.expand_dims(mb, 1), pr], axis=1)
        return tuple(block_verification(d, q_k, p_k))

    args = (drafts, Ms, q_rest, Mb, p_rest)
    out = None if key is None else on_distinct(law, key, args, keyed=1, expand=False,
                                               prefix_rows=prefix_rows)
    if out is None:
        stop, corr = law(*args)
        return stop, corr[:, 0], corr, None
    (stop, corr), inverse = out
    return take_rows(stop, inverse), take_rows(corr[:, 0], inverse), corr, inverse


def _traversal(drafts, q, p, without_replacement: bool) -> MultiLaw:
    check_arrays(drafts, q, p, paths=True)
    if drafts.shape[0] == 0:
        return empty_law(p)
    Bsz, K, L = drafts.shape
    V = q.shape[-1]
    Mb, Ms = p[:, 0, 0], q[:, 0, 0]
    reach = B.ones_like(Mb[:, 0])
    used = B.zeros_like(Mb)
    stops, tables, inverses = [], [], []
    zero_col = B.zeros_like(q[:, 0, :1, 0])
    # Branch k's input is its path's tokens and rows and the root rows (M_b, M_s) left by the
    # earlier branches. M_b after a rejected branch is its root correction normalise(max(M_b -
    # M_s, 0)), whatever the branch's tokens; M_s changes only without replacement, by the first
    # tokens of the earlier branches. So below one context the input is a function of this key:
    # (earlier first tokens, without replacement) and the branch's tokens.
    trusted = engine_rows(drafts, q, p)  # the engine's own rows: prefix rows by construction
    firsts = B.zeros_like(drafts[:, 0, 0])
    keyable = float(V) ** (L + K) < 2.0**62
    for k in range(K):
        first = drafts[:, k, 0]
        key = None
        if keyable:
            key = firsts if without_replacement else B.zeros_like(firsts)
            for i in range(L):
                key = key * V + drafts[:, k, i]
            firsts = firsts * V + first
        root = ((1,) if k == 0 or not without_replacement else ()) + ((3,) if k == 0 else ())
        prefix_rows = (2, 4) + root if trusted else ()  # M_s, M_b: root rows until changed
        law_stop, root_corr, table, inverse = _branch_law(drafts[:, k], Ms, q[:, k, 1:], Mb,
                                                          p[:, k, 1:], key, prefix_rows)
        go_on = law_stop[:, 0]  # branch rejected down to the root
        stop = B.expand_dims(reach, 1) * B.concat([zero_col, law_stop[:, 1:]], axis=1)
        new_Mb, new_reach = root_corr, reach * go_on
        if without_replacement:
            onehot = B.one_hot(first, V, q)
            skip = B.sum(used * onehot, axis=-1) > 0  # a surplus path repeating a first token
            kept = Ms * (1 - onehot)
            new_Ms = B.safe_div(kept, B.sum(kept, axis=-1, keepdims=True), kept)
            stop = B.where(B.expand_dims(skip, 1), B.zeros_like(stop), stop)
            new_Mb = B.where(B.expand_dims(skip, 1), Mb, new_Mb)
            new_reach = B.where(skip, reach, new_reach)
            Ms = B.where(B.expand_dims(skip, 1), Ms, new_Ms)
            used = B.maximum(used, onehot)
        Mb, reach = new_Mb, new_reach
        stops.append(stop)
        tables.append(table)
        inverses.append(inverse)
    stop = B.stack(stops, axis=1)  # [B, K, L+1] (fresh arrays: written in place below)
    if all(inv is None for inv in inverses):
        corr = B.stack(tables, axis=1)
    else:  # one gather of every branch's correction rows from their distinct rows
        offset, idx = 0, []
        for table, inv in zip(tables, inverses):
            idx.append((B.arange(Bsz, drafts) if inv is None else inv) + offset)
            offset += int(table.shape[0])
        corr = take_rows(B.concat(tables, axis=0), B.stack(idx, axis=1).reshape(-1))
        corr = corr.reshape(Bsz, K, L + 1, V)
    # all branches rejected: output (root, Y ~ M_b), reported on path 1 at tau = 0
    stop[:, 0, 0] = reach
    corr[:, 0, 0] = Mb
    return MultiLaw(stop, corr)


def traversal(drafts, q, p) -> MultiLaw:
    """Traversal verification for ``norep`` drafting (siblings without replacement)."""
    return _traversal(drafts, q, p, without_replacement=True)


def traversal_iid(drafts, q, p) -> MultiLaw:
    """Traversal verification for i.i.d. drafting (siblings with replacement)."""
    return _traversal(drafts, q, p, without_replacement=False)


TRAVERSAL = VerifierSpec(
    "traversal", traversal, paths=None, drafting="norep",
    node_form="leaf to root, h(v) = S / (S + 1 - p_alpha(v)); a rejected child updates its parent",
    paper="Weng et al., Traversal Verification, NeurIPS 2025, arXiv 2505.12398",
    summary="traversal verification, branches visited in path order (norep drafting)")
TRAVERSAL_IID = VerifierSpec(
    "traversal-iid", traversal_iid, paths=None, drafting="iid",
    node_form=TRAVERSAL.node_form, paper=TRAVERSAL.paper,
    summary="traversal verification, siblings with replacement (i.i.d. drafting)")


# ----------------------------------------------------------------------------- merged token tree


def _node_reps(drafts):
    """rep[i] [B, K]: the first path through the depth-i node of path k (i = 0..L)."""
    from .specinfer import prefix_membership

    K = drafts.shape[1]
    ids = B.arange(K, drafts)
    reps = []
    for member in prefix_membership(drafts):  # [B, K, K'] int
        idx = B.broadcast_to(B.expand_dims(B.expand_dims(ids, 0), 0), member.shape)
        reps.append(B.amin(B.where(member == 1, idx, K), axis=2))
    return reps


def _gather_node(x, node):
    """x[b, node[b]] for x [B, N, ...] and node [B]."""
    idx = node.reshape((node.shape[0], 1) + (1,) * (x.ndim - 2))
    idx = B.broadcast_to(idx, (x.shape[0], 1) + tuple(x.shape[2:]))
    return B.take_along(x, idx, axis=1)[:, 0]


def _set_node(x, node, value, mask):
    """x with x[b, node[b]] = value[b] where mask[b] (x [B, N, ...])."""
    N = x.shape[1]
    hit = (B.expand_dims(B.arange(N, node), 0) == B.expand_dims(node, 1)) & B.expand_dims(mask, 1)
    while hit.ndim < x.ndim:
        hit = B.expand_dims(hit, -1)
    return B.where(hit, B.expand_dims(value, 1), x)


def traversal_tree(drafts, q, p) -> MultiLaw:
    """Traversal verification on the merged token tree of the K paths (module doc, node rule as
    stated there; siblings updated without replacement).

    Nodes are the distinct drafted prefixes, a node's children ordered by the first path through
    them; the visit order is the post-order of that tree. Because the walk stops at the first
    acceptance, the state when a node is visited is deterministic, and the law is one sweep over the
    at most K L + 1 nodes (vectorised over the batch; a node's mass is reported on the first path
    through it). Lossless under ``norep`` drafting (then it is
    [`traversal`][spectheory.verifiers.traversal.traversal]) and, as the exact checker finds on
    random and degenerate instances (tests; no proof), under i.i.d. drafting, where updating the
    siblings without replacement is what keeps it lossless (with replacement it is lossy on the
    merged tree).
    """
    check_arrays(drafts, q, p, paths=True)
    if drafts.shape[0] == 0:
        return empty_law(p)
    Bsz, K, L = drafts.shape
    V = q.shape[-1]
    N = K * (L + 1)
    reps = _node_reps(drafts)  # reps[i] [B, K]
    ids = B.arange(K, drafts)
    # node (k, i) has flat index k (L+1) + i; rows of non-first paths are never read
    Mb = p.reshape(Bsz, N, V)
    Ms = B.concat([q, B.expand_dims(q[:, :, 0], 2)], axis=2).reshape(Bsz, N, V)  # depth-L pad
    parent = [None] + [reps[i - 1] * (L + 1) + (i - 1) for i in range(1, L + 1)]  # [B, K]
    order, valid_sorted = _post_order(reps, ids, K, L)
    deleted_kids = B.zeros_like(Mb[..., 0]) == 1  # [B, N] bool: a child was deleted
    pa = B.ones_like(Mb[..., 0])

    cols = [B.broadcast_to(B.expand_dims(ids * (L + 1) + i, 0), (Bsz, K)) for i in range(L + 1)]

    def refresh(pa):
        """p_alpha(child) = min(1, p_alpha(parent) M_b(x|parent) / M_s(x|parent)), top-down,
        except for nodes that already lost a child (their p_alpha is the updated h)."""
        for i in range(1, L + 1):
            par = parent[i]
            x = B.expand_dims(drafts[:, :, i - 1], -1)
            rb = B.take_along(_gather_rows(Mb, par), x, axis=-1)[..., 0]
            rs = B.take_along(_gather_rows(Ms, par), x, axis=-1)[..., 0]
            pa_par = B.take_along(pa, par, axis=1)
            new = B.minimum(B.mul(pa_par, drafted_ratio(rb, rs)), 1)  # capped: 1 / 3e-315
            cur = B.take_along(pa, cols[i], axis=1)
            keep = B.take_along(deleted_kids, cols[i], axis=1)
            pa = _set_cols(pa, cols[i][0], B.where(keep, cur, new))
        return pa

    pa = refresh(pa)
    stop = B.zeros_like(pa)
    alive = B.ones_like(pa[:, 0])
    for t in range(N):
        v = order[:, t]
        ok = valid_sorted[:, t]
        a = B.where(ok, _gather_node(pa, v), B.zeros_like(alive))
        # B.mul: in rationals a zero or unit factor gives the other Fraction without a product
        stop = _set_node(stop, v, B.mul(alive, a), ok)
        alive = B.mul(alive, 1 - a)
        depth = v % (L + 1)
        k = v // (L + 1)
        dele = ok & (depth > 0)
        if not bool(dele.any()):
            continue
        dm1 = B.maximum(depth - 1, 0)
        u = _parent_of(reps, k, depth, L)
        x = B.take_along(drafts.reshape(Bsz, K * L), B.expand_dims(k * L + dm1, 1), axis=1)[:, 0]
        w = _gather_node(pa, u)
        mb, ms = _gather_node(Mb, u), _gather_node(Ms, u)
        res = B.positive_part(B.mul(B.expand_dims(w, -1), mb) - ms)
        S = B.sum(res, axis=-1)
        onehot = B.one_hot(x, V, ms)
        kept = B.mul(ms, 1 - onehot)
        Mb = _set_node(Mb, u, B.safe_div(res, B.expand_dims(S, -1), mb), dele)
        Ms = _set_node(Ms, u, B.safe_div(kept, B.sum(kept, axis=-1, keepdims=True), ms), dele)
        pa = _set_node(pa, u, B.safe_div(S, S + (1 - w), B.scalar(S, 1)), dele)
        deleted_kids = _set_node(deleted_kids, u, dele, dele)
        pa = refresh(pa)
    return MultiLaw(stop.reshape(Bsz, K, L + 1), Mb.reshape(Bsz, K, L + 1, V))


#: The largest base-(K+1) key `_post_order` packs in one int64 (its sentinel (K+1)^(L+1) included).
_PACKED_KEY_MAX = 2 ** 62


def _post_order(reps, ids, K: int, L: int):
    """The visit order of the merged tree's nodes: ``order`` [B, K (L+1)] (flat node indices
    k (L+1) + i, the post-order of the tree first, then the nodes that are not the first path's,
    by index) and ``valid`` [B, K (L+1)] (whether the node at each place is a first-path node).

    A node's key is the first-path indices of its prefix, digits 1..i, padded with the digit K
    up to L digits (ancestors after their descendants); its lexicographic order is the
    post-order. Packed in base K + 1 into one int64 where (K + 1)^(L + 1) fits (one stable
    sort); past it, one stable sort per digit from the last (the same order: the packed key
    overflowed int64 at K = 15, L = 15)."""
    Bsz = reps[0].shape[0]
    firsts = [reps[i] == B.expand_dims(ids, 0) for i in range(L + 1)]  # [B, K] each
    valid = B.stack(firsts, axis=2).reshape(Bsz, K * (L + 1))
    if L == 0 or (K + 1) ** (L + 1) <= _PACKED_KEY_MAX:
        key = B.zeros_like(reps[0])
        keys = []
        for i in range(L + 1):
            if i > 0:
                key = key * (K + 1) + reps[i]
            pad = key * (K + 1) ** (L - i) + ((K + 1) ** (L - i) - 1)  # K in every padded digit
            keys.append(B.where(firsts[i], pad, (K + 1) ** (L + 1)))
        key = B.stack(keys, axis=2).reshape(Bsz, K * (L + 1))
        order = B.argsort(key, axis=-1)
        return order, B.take_along(valid, order, axis=-1)
    # digit j of node (k, i): reps[j][k] for j <= i, K past the node's depth, K + 1 for every
    # digit of a node that is not a first-path node (the packed key's sentinel: they tie in each
    # pass, keep their index order and come last)
    order = None
    for j in range(L, 0, -1):
        digit = B.stack([B.where(firsts[i], reps[j] if j <= i else B.zeros_like(reps[j]) + K,
                                 K + 1) for i in range(L + 1)], axis=2)
        digit = digit.reshape(Bsz, K * (L + 1))
        if order is not None:
            digit = B.take_along(digit, order, axis=-1)
        rank = B.argsort(digit, axis=-1)
        order = rank if order is None else B.take_along(order, rank, axis=-1)
    return order, B.take_along(valid, order, axis=-1)


def _gather_rows(x, node):
    """x[b, node[b, k]] for x [B, N, V] and node [B, K] -> [B, K, V]."""
    idx = B.broadcast_to(B.expand_dims(node, -1), tuple(node.shape) + (x.shape[-1],))
    return B.take_along(x, idx, axis=1)


def _set_cols(x, col, value):
    """x with columns ``col`` (a length-K index of distinct columns) replaced by value [B, K]:
    column n takes value[:, k] for the k with col[k] = n, gathered (value + 0: as 0 + value,
    -0.0 becomes 0.0 and an exact entry a Fraction)."""
    Bsz, N, K = x.shape[0], x.shape[1], col.shape[0]
    hit = B.expand_dims(B.arange(N, col), 1) == B.expand_dims(col, 0)  # [N, K]
    ks = B.broadcast_to(B.expand_dims(B.arange(K, col), 0), tuple(hit.shape))  # [N, K]
    pos = B.sum(B.where(hit, ks, B.zeros_like(ks)), axis=1)  # [N]: k with col[k] = n, else 0
    any_hit = B.sum(B.to_int(hit), axis=1) > 0
    src = B.take_along(_plus_zero(value),
                       B.broadcast_to(B.expand_dims(pos, 0), (Bsz, N)), axis=1)  # [B, N]
    return B.where(B.expand_dims(any_hit, 0), src, x)


def _plus_zero(value):
    """value + 0: -0.0 becomes 0.0 and an exact int entry a Fraction; an exact array of Fractions
    only is already its own value + 0 (the same Fractions, without an addition each)."""
    if B.is_exact(value) and B.all_fractions(value.reshape(-1).tolist()):
        return value
    return value + B.scalar(value, 0)


def _parent_of(reps, k, depth, L: int):
    """Flat index of the parent of node (k, depth) (depth >= 1; junk where depth = 0)."""
    Bsz = k.shape[0]
    stacked = B.stack(reps, axis=2)  # [B, K, L+1]
    dm1 = B.maximum(depth - 1, 0)
    row = B.take_along(stacked, B.broadcast_to(B.expand_dims(B.expand_dims(k, 1), 2),
                                               (Bsz, 1, L + 1)), axis=1)[:, 0]  # [B, L+1]
    rep = B.take_along(row, B.expand_dims(dm1, 1), axis=1)[:, 0]
    return rep * (L + 1) + dm1


TRAVERSAL_TREE = VerifierSpec(
    "traversal-tree", traversal_tree, paths=None, drafting="iid",
    node_form=TRAVERSAL.node_form, paper=TRAVERSAL.paper,
    summary="traversal verification on the merged token tree of the K paths")
