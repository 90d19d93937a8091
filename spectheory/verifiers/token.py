"""Token verification: standard speculative sampling.

Leviathan et al., "Fast Inference from Transformers via Speculative Decoding" (ICML 2023) and
Chen et al., "Accelerating Large Language Model Decoding with Speculative Sampling" (2023).

For i = 1..L accept X_i with probability a_i = min(1, p(X_i|X^{i-1}) / q(X_i|X^{i-1})) and stop
at the first rejection, so

    P(tau = i | X) = (prod_{j<=i} a_j) * (1 - a_{i+1})   for i < L,
    P(tau = L | X) =  prod_{j<=L} a_j.

On rejection at position tau+1 the correction is Y ~ normalise(max(p(.|X^tau) - q(.|X^tau), 0));
after L acceptances the bonus token is Y ~ p(.|X^L).

The rule is stated once per node ([`token_node`][spectheory.verifiers.token.token_node], a
forward-scan [`NodeForm`][spectheory.engine.nodes.NodeForm] with pass probability a_i); the batched
per-draft law [`token_verification`][spectheory.verifiers.token.token_verification] and the exact
engine's per-node route are both built from it.
"""

from __future__ import annotations

from ..runtime._lazy import torch

from ..runtime import backend as B
from ..law import Law
from ..engine.nodes import NodeForm, law_from_nodes
from ..registry import VerifierSpec
from .common import cap_ratio, drafted_ratio, normalise_residual, positive_residual
from .compiled_rows import compiled_copy, compiled_corrections, takes


def screened_ratio(px, qx):
    """p(X_i|X^{i-1}) / q(X_i|X^{i-1}) as a new array, equal to
    [`drafted_ratio`][spectheory.verifiers.common.drafted_ratio] (ratio 1 for a draft token of
    probability zero). On torch one division and a screen ``min(qx) > 0`` (one read, no
    temporary; False on a zero, a negative entry or NaN); only when the screen fails does
    `drafted_ratio` look for the zeros, so the result is the same in every case."""
    if B.is_torch(qx) and qx.numel() and bool(qx.min() > 0):
        return cap_ratio(torch.div(px, qx))
    return drafted_ratio(px, qx)


#: Rows of total zero that `residual_rows` copies from p one by one; more are copied by one
#: indexed assignment (159,312 zero rows of a 100,000-draft block law: 0.38 s one by one).
ROW_COPIES = 32


def residual_rows(res, total, p):
    """[`normalise_residual`][spectheory.verifiers.common.normalise_residual] for residual rows
    ``res`` [N, V] whose entries have one sign (max(., 0) or min(., 0)), so that a row of total 0
    is all zeros: the same values. On torch the division runs in place after a screen
    (``aminmax(total)``, one read: no zero and no NaN when min > 0 or max < 0); otherwise the
    rows of total 0 are copied from p afterwards. Either way a row's quotients are res / total
    whatever the other rows of the batch hold (the total itself is torch's sum, whose order
    depends on the batch only where more than one thread sums a lone row), which the compiled
    route ([`compiled_rows`][spectheory.verifiers.compiled_rows]) relies on to finish one row
    before it reads the next."""
    if not B.is_torch(res):
        return normalise_residual(res, total, p)
    if total.numel():
        lo, hi = torch.aminmax(total)
        if bool(lo > 0) or bool(hi < 0):
            return res.div_(total.unsqueeze(-1))
    zero = total == 0
    out = res.div_(torch.where(zero, torch.ones_like(total), total).unsqueeze(-1))
    rows = torch.nonzero(zero).reshape(-1)
    if len(rows) > ROW_COPIES:  # many short rows (the exact engine's batches): one gather
        out[rows] = p[rows]
        return out
    for r in rows.tolist():  # row by row: one copy each, where an indexed assignment into
        out[r].copy_(p[r])  # these strided rows of a real-size law was slower than the law
    return out


def token_node(state, px, qx, q, p, correction: bool = True, out=None):
    """Token verification at a batch of nodes of one depth i (see
    [`NodeForm`][spectheory.engine.nodes.NodeForm]).

    Returns (None, a_i, correction_i): a_0 = 1, a_i = min(1, px / qx) (ratio 1 for a draft token
    of probability zero); correction normalise(max(p - q, 0)) (p where the residual is zero) for
    i < L and p at depth L; None with ``correction=False`` (then the rows are not read).
    ``out`` [N, V] (torch) receives the correction rows (on float32 CPU rows of a real vocabulary
    built by [`compiled_corrections`][spectheory.verifiers.compiled_rows.compiled_corrections]:
    the same values in one pass).
    """
    if px is None:
        a = B.ones_like(p[:, 0])
    elif B.is_torch(px):
        a = screened_ratio(px, qx).clamp_(max=1)
    else:
        a = B.minimum(drafted_ratio(px, qx), 1)
    if not correction:
        return None, a, None
    if q is None:
        return None, a, (out if out is not None and compiled_copy(p, out) else p)
    if out is not None and compiled_corrections(None, p, q, out) is not None:
        return None, a, out
    res = positive_residual(None, p, q, out)
    return None, a, residual_rows(res, B.sum(res, axis=-1), p)


TOKEN_NODE = NodeForm(token_node, "forward",
                      "accept X_i w.p. min(1, p(X_i|X^{i-1}) / q(X_i|X^{i-1})); "
                      "correction normalise(max(p - q, 0))",
                      weights_only=True, row_by_row=takes)


def token_verification(drafts, q, p) -> Law:
    """Law of token verification. Shapes: drafts [B, L], q [B, L, V], p [B, L+1, V].

    Degenerate inputs are exact: q(X_i) = 0 (a draft of probability zero) is treated as ratio 1, p =
    q gives certain acceptance, and an all-zero residual (a stop of probability zero) falls back to
    p so that every correction row is a distribution. The node rule
    [`token_node`][spectheory.verifiers.token.token_node] at positions 0..L of every draft
    ([`law_from_nodes`][spectheory.engine.nodes.law_from_nodes]).
    """
    return law_from_nodes(TOKEN_NODE, drafts, q, p)


TOKEN = VerifierSpec(
    "token", token_verification, paths=1,
    node_form=TOKEN_NODE.formula,
    paper="Leviathan et al., ICML 2023; Chen et al., arXiv 2302.01318",
    summary="token verification (standard speculative sampling)",
    node=TOKEN_NODE, numpy_float=True)
