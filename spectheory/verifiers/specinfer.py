"""SpecInfer recursive rejection sampling (Miao et al., "SpecInfer", ASPLOS 2024) and its
without-replacement variant (Jeon et al., "Recursive Speculative Decoding", arXiv 2402.14160),
on the token tree formed by K drafted paths; plus the node-by-node engine they share with SpecTr.

Node engine (:func:`node_recursive_law`). Start at the root. At the current node u the candidates
are the next tokens of the drafted paths through u, in path order (a path's next token is a
draft sample from q(.|u)); a per-node rule either accepts one candidate, and the walk moves to that
child (the paths through it continue), or rejects all, and the output is (u, Y) with Y from the
rule's correction row. At depth L the output is (u, Y ~ p(.|u)). Because the walk stops at the
first all-reject, P(reach u x) = P(reach u) P(rule at u accepts x), and the law follows in one pass
over depths (vectorised over paths; a node's output mass is reported on the first path through it).

SpecInfer, with replacement (i.i.d. drafting, ``specinfer``). Candidates x_1..x_m (i.i.d. q, with
repeats; every path is a trial, a repeat after a rejection has p'(x) = 0 and is rejected surely
but still updates the residual, as the i.i.d. argument requires):

    p'_1 = p(.|u);  accept x_j w.p. min(1, p'_j(x_j) / q(x_j|u));
    on rejection p'_{j+1} = normalise(max(p'_j - q(.|u), 0));  all rejected: Y ~ p'_{m+1}.

Without replacement (``specinfer-norep``, Jeon et al.): the candidates at u are distinct tokens
drawn sequentially without replacement, and the draft law is updated as well:

    accept x_j w.p. min(1, p'_j(x_j) / q'_j(x_j)),  on rejection
    p'_{j+1} = normalise(max(p'_j - q'_j, 0)),  q'_{j+1} = normalise(q'_j with x_j removed),

(q'_1 = q(.|u)); repeated tokens (surplus paths of the ``norep`` scheme) are skipped. It is
lossless under the ``norep`` drafting scheme of :mod:`spectheory.multipath`, not under i.i.d.
"""

from __future__ import annotations

from .. import backend as B
from ..law import MultiLaw
from ..registry import VerifierSpec


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


SPECINFER = VerifierSpec(
    "specinfer", specinfer, paths=None, drafting="iid",
    node_form="try drafted children in turn, accept w.p. min(1, p'/q); "
              "p' <- normalise(max(p' - q, 0)) on rejection",
    paper="Miao et al., SpecInfer, ASPLOS 2024",
    summary="recursive rejection sampling on the token tree (i.i.d. drafting)")
SPECINFER_NOREP = VerifierSpec(
    "specinfer-norep", specinfer_norep, paths=None, drafting="norep",
    node_form="as specinfer, and q' loses the rejected token (renormalised)",
    paper="Jeon et al., Recursive Speculative Decoding, arXiv 2402.14160",
    summary="recursive rejection sampling without replacement")
