"""Traversal verification (Weng, Hu, Chen, Liu, Mei, Qiu, Tian, Shi: "Traversal Verification for
Speculative Tree Decoding", NeurIPS 2025, arXiv 2505.12398), on K drafted paths.

(Only the paper's abstract was available to us; the node rule below is our reconstruction,
chosen so that a chain is exactly block verification as the paper states, and checked lossless by
the exact multi-path checker.) Traversal verification visits the draft tree leaf to root in
post-order. Every node v = u x keeps
a sequence-level weight p_alpha(v) = min(1, p_alpha(u) M_b(x|u) / M_s(x|u)) (p_alpha(root) = 1,
M_b = p and M_s = q initially). A node is visited once all its children are deleted; it is
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

What we implement. The K paths are the branches of the root, visited in path order, each a chain
(shared prefixes are NOT merged into one token-tree node; under ``norep`` drafting the first tokens
are distinct, so there is nothing to merge, and surplus paths that repeat path 1 are skipped).
Leaf-to-root on branch k is block verification of that branch with the root rows (M_b, M_s) in
place of (p(.|c), q(.|c)); if the branch is rejected down to the root, M_b becomes the root
residual normalise(max(M_b - M_s, 0)) (p_alpha(root) = 1 throughout, since h(root) = 1) and M_s
loses the rejected first token (``traversal``, for ``norep`` drafting) or stays q(.|c)
(``traversal-iid``, with-replacement drafting: each branch is an independent q-path). When all
branches are rejected the output is (root, Y ~ M_b). Each branch is verified losslessly against
the residual target left by the previous ones, so both are lossless under their drafting scheme.
"""

from __future__ import annotations

from .. import backend as B
from ..law import MultiLaw
from .block import block_verification


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


traversal.drafting = "norep"
traversal_iid.drafting = "iid"
