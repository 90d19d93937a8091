"""SpecInfer recursive rejection sampling (Miao et al., "SpecInfer", ASPLOS 2024) and its
without-replacement variant (Jeon et al., "Recursive Speculative Decoding", arXiv 2402.14160),
on the token tree formed by K drafted paths; plus the node-by-node engine they share with SpecTr.

Node engine ([`node_recursive_law`][spectheory.verifiers.specinfer.node_recursive_law]). Start at
the root. At the current node u the candidates are the next tokens of the drafted paths through u,
in path order (a path's next token is a draft sample from q(.|u)); a per-node rule either accepts
one candidate, and the walk moves to that child (the paths through it continue), or rejects all, and
the output is (u, Y) with Y from the rule's correction row. At depth L the output is (u, Y ~
p(.|u)). Because the walk stops at the first all-reject, P(reach u x) = P(reach u) P(rule at u
accepts x), and the law follows in one pass over depths (vectorised over paths; a node's output mass
is reported on the first path through it). The rule is evaluated once per distinct node input in the
batch (the exact engine's joint outcomes repeat every node many times;
[`on_distinct`][spectheory.verifiers.common.on_distinct]).

SpecInfer, with replacement (i.i.d. drafting, ``specinfer``). Candidates x_1..x_m (i.i.d. q, with
repeats; every path is a trial, a repeat after a rejection has p'(x) = 0 and is rejected surely
but still updates the residual, as the i.i.d. argument requires):

    p'_1 = p(.|u);  accept x_j w.p. min(1, p'_j(x_j) / q(x_j|u));
    on rejection p'_{j+1} = normalise(max(p'_j - q(.|u), 0));  all rejected: Y ~ p'_{m+1}.

Without replacement (``specinfer-norep``, Jeon et al.): the candidates at u are distinct tokens
drawn sequentially without replacement, and the draft law is updated as well:

    accept x_j w.p. min(1, p'_j(x_j) / q'_j(x_j)),  on rejection
    p'_{j+1} = normalise(max(p'_j - q'_j, 0)),  q'_{j+1} = normalise(q'_j with x_j removed),

(q'_1 = q(.|u)); repeated tokens (surplus paths of the ``norep`` scheme) are skipped. It is lossless
under the ``norep`` drafting scheme of [`spectheory.engine.joint`][spectheory.engine.joint], not under
i.i.d.
"""

from __future__ import annotations

from ..runtime._lazy import torch

from ..runtime import backend as B
from ..runtime import buffers
from ..engine import nodes
from ..law import MultiLaw, empty_law
from ..registry import VerifierSpec
from ..runtime.errors import check_arrays
from . import common
from .common import drafted_ratio, normalise_residual, on_distinct, positive_residual
from .compiled_rows import compiled_corrections


def _row_at(rows, tok):
    """rows[b, k, tok[b]] for rows [B, K, V] and tok [B] -> [B, K]."""
    Bsz, K, _ = rows.shape
    idx = B.broadcast_to(tok.reshape(Bsz, 1, 1), (Bsz, K, 1))
    return B.take_along(rows, idx, axis=-1)[..., 0]


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
    are the engine's prefix rows ([`common.engine_rows`][spectheory.law.engine_rows]),
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

    Rows that require grad are read as values ([`values`][spectheory.runtime.backend.values]).

    ``rule(member [B,K,K'] int, tokens [B,K'], q_rows [B,K,V], p_rows [B,K,V])`` returns
    ``(accept [B,K,K'], none [B,K], correction [B,K,V])``: at the node of path k, the probability
    that candidate k' is the accepted one, that all are rejected, and Y's law in that case. The
    rule must treat the K rows of its batch independently (row k's outputs depend on row k's
    inputs only).
    """
    check_arrays(drafts, q, p, paths=True)
    q, p = B.values(q, p)
    if drafts.shape[0] == 0:
        return empty_law(p)
    Bsz, K, L = drafts.shape
    V = q.shape[-1]
    trusted = common.engine_rows(drafts, q, p)
    same = prefix_membership(drafts)
    ids = B.expand_dims(B.arange(K, drafts), 0)  # [1, K]
    reach = B.ones_like(q[:, :, 0, 0])  # [B, K]
    prefix = B.zeros_like(drafts[:, :, 0])  # [B, K] the drafted prefix of path k as a number
    stops, corrs = [], []
    # A rule that can write its correction rows into a given array (``rule.writes_out``) gets
    # a view of one preallocated [B, K, L+1, V] array: no stacking copy of the corrections.
    # Large CPU outputs reuse pooled memory (`spectheory.runtime.buffers`): filling a fresh
    # 1.4 GB array (the real-model shape) costs more in page faults than the law itself.
    into = (buffers.empty_like(p)
            if B.is_torch(p) and getattr(rule, "writes_out", False) else None)

    def call(args, key, at):
        out = _rule_on_distinct(rule, *args, key, V, trusted)
        if into is None:
            return out or rule(*args)
        if out is None:
            return rule(*args, out=into[at])
        into[at] = out[2]
        return out[0], out[1], into[at]

    for i in range(L + 1):
        member = same[i]
        first = ids >= 0  # no earlier path here (K is small: a loop over the earlier paths)
        for kp in range(K - 1):
            first = first & ~((member[:, :, kp] == 1) & (ids > kp))
        if i == L:
            none, corr = B.ones_like(reach), p[:, :, L]
            if into is not None:
                corr = into[:, :, L].copy_(corr)
        else:
            tok = drafts[:, :, i]
            if i == 0:  # one node, the same for every path: evaluate it once
                args = (member[:, :1], tok, q[:, :1, 0], p[:, :1, 0])
                out = call(args, prefix[:, :1], (slice(None), slice(0, 1), 0))
                accept = B.broadcast_to(out[0], (Bsz, K, K))
                none = B.broadcast_to(out[1], (Bsz, K))
                corr = B.broadcast_to(out[2], (Bsz, K, V))
                if into is not None:
                    corr = into[:, :, 0]
                    corr[:, 1:] = out[2]
            else:
                args = (member, tok, q[:, :, i], p[:, :, i])
                accept, none, corr = call(args, prefix, (slice(None), slice(None), i))
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
    return MultiLaw(B.stack(stops, axis=2), into if into is not None else B.stack(corrs, axis=2))


def _normalise(rows, fallback):
    return B.safe_div(rows, B.sum(rows, axis=-1, keepdims=True), fallback)


def _residual_step(p_rows, q_rows):
    """normalise(max(p' - q', 0)) row by row (rows [..., V]), p' itself where the residual has
    no mass: the same values as ``_normalise(positive_part(p' - q'), p')``."""
    V = p_rows.shape[-1]
    shape = tuple(p_rows.shape)
    p2, q2 = p_rows.reshape(-1, V), B.broadcast_to(q_rows, shape).reshape(-1, V)
    if B.is_torch(p2):
        out = torch.empty_like(p2)
        if compiled_corrections(None, p2, q2, out) is not None:  # real vocabularies, float32
            return out.reshape(shape)
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
        if compiled_corrections(None, flat[r], q2, flat[r + 1]) is not None:
            continue  # the same values in one pass (real vocabularies, float32 CPU rows)
        res = positive_residual(None, flat[r], q2, out=flat[r + 1])
        normalise_residual(res, res.sum(dim=-1), flat[r])
    return chain


def _chain_reads(p_rows, q_rows, member, tok, out=None):
    """The residual chain p'_1 = p, p'_{r+1} = normalise(max(p'_r - q, 0)) of recursive rejection
    sampling with replacement, read where the rule needs it (torch): ``vals`` [B, Kr, K'] =
    p'_{r_j + 1}(t_j) with r_j = the candidates before j, and the correction rows p'_{m+1}
    [B, Kr, V] (m = the number of candidates), written into ``out`` if given. A row's chain is
    built only up to its own m: at a node below the root usually one step (one candidate), computed
    a few rows at a time straight into ``out``; the same values as the full chain of
    [`_residual_chain`][spectheory.verifiers.specinfer._residual_chain]."""
    Bsz, Kr, V = p_rows.shape
    K = tok.shape[1]
    N = Bsz * Kr
    member = member.long()
    before = (member.cumsum(2) - member).reshape(N, K)
    m = member.sum(2).reshape(N)
    t = tok.unsqueeze(1).expand(Bsz, Kr, K).reshape(N, K)
    p2, q2 = p_rows.reshape(N, V), q_rows.reshape(N, V)
    dest = out if out is not None else torch.empty((Bsz, Kr, V), dtype=p_rows.dtype,
                                                   device=p_rows.device)
    try:
        o2 = dest.view(N, V)
    except RuntimeError:  # not viewable as rows: build in a fresh array, copied at the end
        o2 = torch.empty((N, V), dtype=p_rows.dtype, device=p_rows.device)
    vals = p2.gather(1, t)  # p'_1 = p at every candidate
    step = max(1, nodes.ROW_CHUNK_ELEMENTS // max(1, V)) if p_rows.device.type == "cpu" else N
    for r0 in range(0, N, step):  # p'_2 for every row, in place in the output
        r1 = min(N, r0 + step)
        if compiled_corrections(None, p2[r0:r1], q2[r0:r1], o2[r0:r1]) is not None:
            continue  # the same values in one pass (real vocabularies, float32 CPU rows)
        res = positive_residual(None, p2[r0:r1], q2[r0:r1], out=o2[r0:r1])
        normalise_residual(res, res.sum(dim=-1), p2[r0:r1])
    vals = torch.where(before == 1, o2.gather(1, t), vals)
    deep = torch.nonzero(m >= 2).reshape(-1).tolist()
    for r0 in range(0, len(deep), step):  # nodes with several candidates (the root): further
        idx = torch.tensor(deep[r0:r0 + step], device=p_rows.device)  # steps, a few rows at a time
        cur, qd, level = o2.index_select(0, idx), q2.index_select(0, idx), 1
        while idx.numel():
            cur, level = _residual_step(cur, qd), level + 1
            sel = before.index_select(0, idx) == level
            vals[idx] = torch.where(sel, cur.gather(1, t.index_select(0, idx)), vals[idx])
            done = m.index_select(0, idx) == level
            o2.index_copy_(0, idx[done], cur[done])
            keep = ~done
            idx, cur, qd = idx[keep], cur[keep], qd[keep]
    none = torch.nonzero(m == 0).reshape(-1)
    if none.numel():  # no candidate: the correction is p itself
        o2.index_copy_(0, none, p2.index_select(0, none))
    if o2.data_ptr() != dest.data_ptr():
        dest.copy_(o2.view(Bsz, Kr, V))
    return vals.reshape(Bsz, Kr, K), dest


def rrs_rule(member, tok, q_rows, p_rows, without_replacement: bool = False, out=None):
    """Recursive rejection sampling at one node (with or without replacement; module doc).
    ``out`` [B, Kr, V] (torch, with replacement) receives the correction rows."""
    if without_replacement:
        corr = _rrs_norep(member, tok, q_rows, p_rows)
        if out is not None:
            out.copy_(corr[2])
            return corr[0], corr[1], out
        return corr
    # With replacement q' = q throughout, so after r rejections of active candidates the target
    # is p'_{r+1} = normalise(max(p'_r - q, 0)) whatever the tokens were: the chain
    # p'_1..p'_{K+1} is read at candidate j's token at r_j = its active predecessors.
    K = tok.shape[1]
    Bsz, Kr = member.shape[0], member.shape[1]
    if B.is_torch(p_rows):
        reads, corr = _chain_reads(p_rows, q_rows, member, tok, out)
        k_t = B.broadcast_to(B.expand_dims(tok, 1), (Bsz, Kr, K))
        q_at = torch.gather(q_rows, 2, k_t)
    else:
        chain = _residual_chain(p_rows, q_rows, K)  # [K+1, B, Kr, V]
        b = B.arange(Bsz, tok).reshape(Bsz, 1, 1)
        k = B.arange(Kr, tok).reshape(1, Kr, 1)
        t = B.expand_dims(tok, 1)  # [B, 1, K']
        before = B.cumsum(member, axis=2) - member  # active candidates before j  [B, Kr, K']
        reads, q_at = chain[before, b, k, t], q_rows[b, k, t]
        m = B.sum(member, axis=2)  # [B, Kr] active candidates: the correction is p'_{m+1}
        corr = chain[m, b[..., 0], k[..., 0]]
    ratio = B.minimum(drafted_ratio(reads, q_at), 1)
    a_all = B.where(member == 1, ratio, B.zeros_like(ratio))
    survive = B.ones_like(ratio[:, :, 0])
    accepts = []
    for j in range(K):
        a = a_all[:, :, j]
        accepts.append(survive * a)
        survive = survive * (1 - a)
    return B.stack(accepts, axis=2), survive, corr


rrs_rule.writes_out = True


def _rrs_norep(member, tok, q_rows, p_rows):
    """Recursive rejection sampling without replacement at one node (module doc)."""
    K = tok.shape[1]
    V = q_rows.shape[-1]
    pcur, qcur = p_rows, q_rows
    survive = B.ones_like(q_rows[..., 0])
    vocab = B.expand_dims(B.expand_dims(B.arange(V, tok), 0), 0)  # [1, 1, V]
    actives = []
    accepts = []
    for j in range(K):
        t = tok[:, j]
        active = member[:, :, j] == 1
        for jj, was in enumerate(actives):  # a token already tried at the node is skipped
            active = active & ~(was & B.expand_dims(tok[:, jj] == t, 1))
        actives.append(active)
        a = B.minimum(drafted_ratio(_row_at(pcur, t), _row_at(qcur, t)), 1)
        a = B.where(active, a, B.zeros_like(a))
        accepts.append(survive * a)
        survive = survive * (1 - a)
        act = B.expand_dims(active, -1)
        new_p = _residual_step(pcur, qcur)
        hit = vocab == B.expand_dims(B.expand_dims(t, 1), 2)  # [B, 1, V]: the tried token
        kept = B.where(hit, B.zeros_like(qcur), qcur)
        qcur = B.where(act, _normalise(kept, kept), qcur)
        pcur = B.where(act, new_p, pcur)
    return B.stack(accepts, axis=2), survive, pcur


def specinfer(drafts, q, p) -> MultiLaw:
    """SpecInfer recursive rejection sampling, i.i.d. drafting (module doc)."""
    return node_recursive_law(drafts, q, p, rrs_rule)


def rrs_norep_rule(member, tok, q_rows, p_rows):
    """Recursive rejection sampling without replacement at one node (module doc)."""
    return rrs_rule(member, tok, q_rows, p_rows, without_replacement=True)


def specinfer_norep(drafts, q, p) -> MultiLaw:
    """Recursive rejection sampling without replacement (Jeon et al.), ``norep`` drafting."""
    return node_recursive_law(drafts, q, p, rrs_norep_rule)


SPECINFER = VerifierSpec(
    "specinfer", specinfer, paths=None, drafting="iid",
    node_form="try drafted children in turn, accept w.p. min(1, p'/q); "
              "p' <- normalise(max(p' - q, 0)) on rejection",
    paper="Miao et al., SpecInfer, ASPLOS 2024",
    summary="recursive rejection sampling on the token tree (i.i.d. drafting)", rule=rrs_rule,
    tree_drafting=("iid",))
SPECINFER_NOREP = VerifierSpec(
    "specinfer-norep", specinfer_norep, paths=None, drafting="norep",
    node_form="as specinfer, and q' loses the rejected token (renormalised)",
    paper="Jeon et al., Recursive Speculative Decoding, arXiv 2402.14160",
    summary="recursive rejection sampling without replacement", rule=rrs_norep_rule,
    rule_skips_repeats=True, tree_drafting=("norep",))
