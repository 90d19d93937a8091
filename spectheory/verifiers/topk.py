"""The top-k rule: node-by-node verification of a deterministic (top-k) draft tree.

EAGLE (Li et al., arXiv 2401.15077) and Medusa (Cai et al., arXiv 2401.10774) draft static trees
whose children at a node u are the b most probable tokens of q(.|u) (ties to the smaller token
id): the draft is a deterministic function of q, so its law is a point mass and q itself must not
enter the acceptance ratio. The top-k rule is recursive rejection sampling without replacement
(Jeon et al., arXiv 2402.14160) with q replaced by point masses in candidate order,
q'_j = delta(c_j): at a node with candidates c_1..c_b (distinct tokens, in path order; repeated
tokens are skipped),

    accept c_j w.p. p'_j(c_j),   on rejection p'_{j+1} = normalise(p'_j with c_j removed),

with p'_1 = p(.|u); when all are rejected Y ~ p'_{b+1}. The child c_j is reached with probability
p(c_j|u) exactly (prod_{i<j} (1 - p'_i(c_i)) p'_j(c_j) telescopes), and the rejection row is p
restricted to the other tokens, so the rule is lossless for any deterministic candidate list. The
function ignores its q argument: handed the raw q by mistake, it stays this rule, while a rule that
reads q (``specinfer-norep``) handed the raw q on top-k children is lossy (tests).
"""

from __future__ import annotations

from ..runtime import backend as B
from ..law import MultiLaw
from ..registry import VerifierSpec
from .specinfer import _normalise, _row_at, node_recursive_law


def topk_rule(member, tok, q_rows, p_rows):
    """The top-k node rule (module doc), in the node-rule signature of
    [`node_recursive_law`][spectheory.verifiers.specinfer.node_recursive_law]."""
    K = tok.shape[1]
    V = p_rows.shape[-1]
    pcur = p_rows
    survive = B.ones_like(p_rows[..., 0])
    tried = B.zeros_like(p_rows)
    accepts = []
    for j in range(K):
        t = tok[:, j]
        active = (member[:, :, j] == 1) & (_row_at(tried, t) == 0)
        onehot = B.one_hot(B.broadcast_to(B.expand_dims(t, 1), active.shape), V, p_rows)
        act = B.expand_dims(active, -1)
        tried = tried + B.where(act, onehot, B.zeros_like(tried))
        a = B.where(active, _row_at(pcur, t), B.zeros_like(survive))
        accepts.append(survive * a)
        survive = survive * (1 - a)
        kept = pcur * (1 - onehot)
        pcur = B.where(act, _normalise(kept, pcur), pcur)
    return B.stack(accepts, axis=2), survive, pcur


def topk_verification(drafts, q, p) -> MultiLaw:
    """The top-k rule on the token tree of K drafted paths (module doc; q is not read)."""
    return node_recursive_law(drafts, q, p, topk_rule)


TOPK = VerifierSpec(
    "topk", topk_verification, paths=None, drafting="any",
    node_form="accept candidate c_j w.p. p'(c_j); p' <- normalise(p' with c_j removed)",
    paper="recursive rejection sampling without replacement (Jeon et al., arXiv 2402.14160) "
          "with q replaced by point masses in candidate order (EAGLE / Medusa static trees)",
    summary="node-by-node rule for deterministic top-k children (lossless for the topk scheme)",
    rule=topk_rule, rule_skips_repeats=True, tree_drafting=("topk", "iid", "norep"))
