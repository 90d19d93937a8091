"""The multi-path verifier law functions (SpecInfer, its without-replacement variant, SpecTr,
traversal) as they were before the enumeration speed-up, kept verbatim as the reference that the
current implementations must reproduce (tests/test_multipath_speed.py): exactly in rationals and
to float rounding."""

from __future__ import annotations

from spectheory.runtime import backend as B
from spectheory.law import MultiLaw
from spectheory.verifiers.block import block_verification


def _row_at(rows, tok):
    """rows[b, k, tok[b]] for rows [B, K, V] and tok [B] -> [B, K]."""
    Bsz, K, _ = rows.shape
    idx = B.broadcast_to(tok.reshape(Bsz, 1, 1), (Bsz, K, 1))
    return B.take_along(rows, idx, axis=-1)[..., 0]


def prefix_membership(drafts):
    """``same[i]`` [B, K, K'] (int 0/1): path k' passes through the depth-i node of path k, for
    i = 0..L (``same[0]`` all ones)."""
    eq = B.to_int(B.expand_dims(drafts, 2) == B.expand_dims(drafts, 1))  # [B, K, K', L]
    pref = B.cumprod(eq, axis=3)
    out = [B.to_int(eq[..., 0] == eq[..., 0])]
    for i in range(drafts.shape[-1]):
        out.append(pref[..., i])
    return out


def node_recursive_law(drafts, q, p, rule) -> MultiLaw:
    """Law of a root-to-leaf node-by-node verifier (see module doc).

    Paths that share a prefix must carry identical rows there (true for any model, and for the
    exact engine); the root rows q[:, k, 0], p[:, k, 0] are the same for every k.

    ``rule(member [B,K,K'] int, tokens [B,K'], q_rows [B,K,V], p_rows [B,K,V])`` returns
    ``(accept [B,K,K'], none [B,K], correction [B,K,V])``: at the node of path k, the probability
    that candidate k' is the accepted one, that all are rejected, and Y's law in that case.
    """
    Bsz, K, L = drafts.shape
    same = prefix_membership(drafts)
    lower = B.to_int(B.expand_dims(B.arange(K, drafts), 1) > B.expand_dims(B.arange(K, drafts), 0))
    reach = B.ones_like(q[:, :, 0, 0])  # [B, K]
    stops, corrs = [], []
    for i in range(L + 1):
        member = same[i]
        first = B.sum(member * B.expand_dims(lower, 0), axis=2) == 0  # no earlier path here
        if i == L:
            none, corr = B.ones_like(reach), p[:, :, L]
        else:
            tok = drafts[:, :, i]
            accept, none, corr = rule(member, tok, q[:, :, i], p[:, :, i])
            same_tok = B.expand_dims(tok, 2) == B.expand_dims(tok, 1)  # [B, K, K']
            child = B.sum(B.where(same_tok, accept, B.zeros_like(accept)), axis=2)
        stops.append(B.where(first, reach * none, B.zeros_like(reach)))
        corrs.append(corr)
        if i < L:
            reach = reach * child
    return MultiLaw(B.stack(stops, axis=2), B.stack(corrs, axis=2))


def _normalise(rows, fallback):
    return B.safe_div(rows, B.sum(rows, axis=-1, keepdims=True), fallback)


def rrs_rule(member, tok, q_rows, p_rows, without_replacement: bool = False):
    """Recursive rejection sampling at one node (with or without replacement; module doc)."""
    K = tok.shape[1]
    V = q_rows.shape[-1]
    pcur, qcur = p_rows, q_rows
    survive = B.ones_like(q_rows[..., 0])
    tried = B.zeros_like(q_rows)
    accepts = []
    for j in range(K):
        t = tok[:, j]
        active = member[:, :, j] == 1
        if without_replacement:
            active = active & (_row_at(tried, t) == 0)
            tried = tried + B.where(B.expand_dims(active, -1), B.one_hot(
                B.broadcast_to(B.expand_dims(t, 1), active.shape), V, q_rows),
                B.zeros_like(tried))
        a = B.minimum(B.safe_div(_row_at(pcur, t), _row_at(qcur, t), B.scalar(p_rows, 1)), 1)
        a = B.where(active, a, B.zeros_like(a))
        accepts.append(survive * a)
        survive = survive * (1 - a)
        act = B.expand_dims(active, -1)
        new_p = _normalise(B.positive_part(pcur - qcur), pcur)
        if without_replacement:
            onehot = B.one_hot(B.broadcast_to(B.expand_dims(t, 1), active.shape), V, q_rows)
            kept = qcur * (1 - onehot)
            qcur = B.where(act, _normalise(kept, kept), qcur)
        pcur = B.where(act, new_p, pcur)
    return B.stack(accepts, axis=2), survive, pcur


def specinfer(drafts, q, p) -> MultiLaw:
    """SpecInfer recursive rejection sampling, i.i.d. drafting (module doc)."""
    return node_recursive_law(drafts, q, p, rrs_rule)


def specinfer_norep(drafts, q, p) -> MultiLaw:
    """Recursive rejection sampling without replacement (Jeon et al.), ``norep`` drafting."""
    return node_recursive_law(
        drafts, q, p, lambda m, t, qr, pr: rrs_rule(m, t, qr, pr, without_replacement=True))



BISECTION_STEPS = {False: 50, True: 40}


def _beta(q_rows, p_rows, rho):
    return B.sum(B.minimum(q_rows, p_rows / B.expand_dims(rho, -1)), axis=-1)


def _c(beta, m, K: int):
    """c_m(beta) = sum_{j<m} (1 - beta)^j with a per-node count m [B, K] (1 <= m <= K)."""
    total = B.zeros_like(beta)
    term = B.ones_like(beta)
    for j in range(K):
        total = total + B.where(m > j, term, B.zeros_like(term))
        term = term * (1 - beta)
    return total


def kseq_rho(q_rows, p_rows, m, K: int):
    """Smallest valid rho in [1, m] per node (see module doc). m [B, K] >= 1.

    rho beta(rho) = T(rho) = sum_x min(rho q(x), p(x)) is piecewise linear with breakpoints at
    the ratios p(x)/q(x). One sort locates the piece holding the smallest valid rho (validity is
    checked at every breakpoint in [1, m] from prefix sums, O(V) per node); inside that piece
    T(rho) = P + rho (Q_tot - Q) and the bisection needs no more sums over the vocabulary.
    """
    exact = B.is_exact(q_rows)
    one = B.ones_like(q_rows[..., 0])
    mm = one * m if not exact else B.to_exact(m)
    big = B.scalar(p_rows, K + 1)  # q = 0: min(rho q, p) = rho q for every rho <= m
    r = B.safe_div(p_rows, q_rows, big)
    order = B.argsort(r, axis=-1)
    r_s = B.take_along(r, order, axis=-1)
    P_c = B.cumsum(B.take_along(p_rows, order, axis=-1), axis=-1)
    Q_c = B.cumsum(B.take_along(q_rows, order, axis=-1), axis=-1)
    Q_tot = B.sum(q_rows, axis=-1)
    m1 = B.expand_dims(mm, -1)
    inside = (r_s >= 1) & (r_s <= m1)
    r_safe = B.where(inside, r_s, B.ones_like(r_s))
    beta_bp = B.safe_div(P_c + r_safe * (B.expand_dims(Q_tot, -1) - Q_c), r_safe, B.zeros_like(r_s))
    ok_bp = inside & (r_safe >= _c(beta_bp, B.expand_dims(m, -1), K))
    ok1 = one >= _c(_beta(q_rows, p_rows, one), m, K)
    hi = B.amin(B.where(ok_bp, r_s, m1), axis=-1)
    hi = B.where(ok1, one, hi)
    below = inside & ~ok_bp & (r_s < B.expand_dims(hi, -1))
    lo = -B.amin(B.where(below, -r_s, -B.ones_like(r_s)), axis=-1)  # largest invalid breakpoint
    passed = r <= B.expand_dims(lo, -1)
    P = B.sum(B.where(passed, p_rows, B.zeros_like(p_rows)), axis=-1)
    Q = B.sum(B.where(passed, q_rows, B.zeros_like(q_rows)), axis=-1)
    for _ in range(BISECTION_STEPS[exact]):
        mid = (lo + hi) / 2
        ok = mid >= _c((P + mid * (Q_tot - Q)) / mid, m, K)
        hi = B.where(ok, mid, hi)
        lo = B.where(ok, lo, mid)
    return hi


def kseq_rule(member, tok, q_rows, p_rows):
    """K-SEQ at the node of every path (see module doc)."""
    K = tok.shape[1]
    m = B.sum(member, axis=2)  # [B, K] candidates at the node, >= 1
    rho = kseq_rho(q_rows, p_rows, m, K)
    beta = _beta(q_rows, p_rows, rho)
    survive = B.ones_like(rho)
    accepts = []
    for j in range(K):
        t = tok[:, j]
        ratio = B.safe_div(_row_at(p_rows, t), rho * _row_at(q_rows, t), B.scalar(p_rows, 1))
        a = B.minimum(ratio, 1)
        a = B.where(member[:, :, j] == 1, a, B.zeros_like(a))
        accepts.append(survive * a)
        survive = survive * (1 - a)
    cm = B.expand_dims(_c(beta, m, K), -1)
    res = B.positive_part(p_rows - B.minimum(q_rows, p_rows / B.expand_dims(rho, -1)) * cm)
    # sum_x res(x) = 1 - beta c_m = (1 - beta)^m exactly for a valid rho: normalising by the sum
    # is the formula above (and is robust to rounding in float mode).
    total = B.sum(res, axis=-1, keepdims=True)
    return B.stack(accepts, axis=2), survive, B.safe_div(res, total, p_rows)


def spectr(drafts, q, p) -> MultiLaw:
    """SpecTr K-SEQ on the token tree of K i.i.d. paths (module doc)."""
    return node_recursive_law(drafts, q, p, kseq_rule)



def _traversal(drafts, q, p, without_replacement: bool) -> MultiLaw:
    Bsz, K, L = drafts.shape
    V = q.shape[-1]
    Mb, Ms = p[:, 0, 0], q[:, 0, 0]
    reach = B.ones_like(Mb[:, 0])
    used = B.zeros_like(Mb)
    stops, corrs = [], []
    zero_col = B.zeros_like(q[:, 0, :1, 0])
    for k in range(K):
        first = drafts[:, k, 0]
        q_k = B.concat([B.expand_dims(Ms, 1), q[:, k, 1:]], axis=1)
        p_k = B.concat([B.expand_dims(Mb, 1), p[:, k, 1:]], axis=1)
        law = block_verification(drafts[:, k], q_k, p_k)
        go_on = law.stop[:, 0]  # branch rejected down to the root
        stop = B.expand_dims(reach, 1) * B.concat([zero_col, law.stop[:, 1:]], axis=1)
        new_Mb, new_reach = law.correction[:, 0], reach * go_on
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
        corrs.append(law.correction)
    stop = B.stack(stops, axis=1)  # [B, K, L+1]
    corr = B.stack(corrs, axis=1)
    # all branches rejected: output (root, Y ~ M_b), reported on path 1 at tau = 0
    root = B.expand_dims(B.expand_dims(B.arange(K, drafts) == 0, 0), -1)  # [1, K, 1]
    tau0 = B.expand_dims(B.expand_dims(B.arange(L + 1, drafts) == 0, 0), 0)  # [1, 1, L+1]
    at_root = root & tau0
    stop = B.where(at_root, B.expand_dims(B.expand_dims(reach, 1), 1), stop)
    corr = B.where(B.expand_dims(at_root, -1), B.expand_dims(B.expand_dims(Mb, 1), 1), corr)
    return MultiLaw(stop, corr)


def traversal(drafts, q, p) -> MultiLaw:
    """Traversal verification for ``norep`` drafting (siblings without replacement)."""
    return _traversal(drafts, q, p, without_replacement=True)


def traversal_iid(drafts, q, p) -> MultiLaw:
    """Traversal verification for i.i.d. drafting (siblings with replacement)."""
    return _traversal(drafts, q, p, without_replacement=False)


