"""Block verification (Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro, Suresh:
"Block Verification Accelerates Speculative Decoding", arXiv 2403.10444, ICLR 2025).

Weights along the drafted path:   w_0 = 1,  w_i = min(1, w_{i-1} p(X_i|X^{i-1}) / q(X_i|X^{i-1})).
Residual mass at prefix X^i:      S_i = sum_x max(w_i p(x|X^i) - q(x|X^i), 0).
Acceptance weights:               h_L = w_L;  h_i = S_i / (S_i + 1 - w_i) for 0 < i < L
                                  (h_i = 1 when the denominator is 0);  h_0 = 1.
With independent eta_i ~ Bernoulli(h_i) and tau = max{i : eta_i = 1} (all positions are looked
at, i.e. scan i = L down to 0 and stop at the first success):

    P(tau = i | X) = h_i prod_{j>i} (1 - h_j).

Correction: for tau < L, Y ~ normalise(max(w_tau p(.|X^tau) - q(.|X^tau), 0)); for tau = L,
Y ~ p(.|X^L). Block verification is lossless and optimal in E[tau] among all valid single-path
verifiers; L = 1 or a one-hot target reduce it to token verification.

Everything at position i depends on the prefix X^i only, so the verifier is stated once per node
([`block_node`][spectheory.verifiers.block.block_node], a backward-scan
[`NodeForm`][spectheory.engine.nodes.NodeForm]); the batched per-draft law
[`block_verification`][spectheory.verifiers.block.block_verification] and the exact engine's
per-node route are both built from it.
"""

from __future__ import annotations

from ..runtime._lazy import torch

from ..runtime import backend as B
from ..law import Law
from ..engine.nodes import NodeForm, law_from_nodes
from ..registry import VerifierSpec
from .common import drafted_probs, drafted_ratio, normalise_residual, positive_residual
from .compiled_rows import compiled_copy, compiled_corrections, compiled_totals, takes
from .token import residual_rows, screened_ratio


def block_node(state, px, qx, q, p, correction: bool = True, out=None):
    """Block verification at a batch of nodes of one depth i (see
    [`NodeForm`][spectheory.engine.nodes.NodeForm]).

    ``state`` = w_{i-1} [N] (None at the root), ``px``/``qx`` the drafted token's probabilities
    [N], ``q``/``p`` the rows at the node [N, V] (q None at depth L). Returns (w_i, h_i,
    correction_i): h_L = w_L with correction p; else h_i = S_i / (S_i + 1 - w_i) (1 at the root
    and when the denominator is 0) with correction normalise(max(w_i p - q, 0)). With
    ``correction=False`` the correction is None (S_i is still a pass over the rows: on float32
    CPU rows of a real vocabulary one compiled read,
    [`compiled_totals`][spectheory.verifiers.compiled_rows.compiled_totals]); ``out``
    [N, V] (torch) receives the correction rows (on float32 CPU rows of a real vocabulary built,
    with S_i, by [`compiled_corrections`][spectheory.verifiers.compiled_rows.compiled_corrections]:
    the same values in one pass).
    """
    w = B.ones_like(p[:, 0]) if state is None else block_weight(state, px, qx)
    if state is None and q is not None and not correction:
        return w, w, None  # h_0 = 1
    h, c = block_rows(w, q, p, correction, out)
    return w, (B.ones_like(h) if state is None and q is not None else h), c  # h_0 = 1


def block_rows(w, q, p, correction: bool = True, out=None):
    """(h_i, correction_i) of [`block_node`][spectheory.verifiers.block.block_node] at N nodes
    below the root whose weights w_i [N] are known (rows q, p [N, V]): h_i = S_i / (S_i + 1 -
    w_i) (1 where the denominator is 0) and the correction normalise(max(w_i p - q, 0)), the
    rows into ``out`` [N, V] if given; at depth L (q None) h_L = w_L and the correction p. At a
    root (w_0 = 1) the rule's h_0 is 1, which the caller sets. For callers that know the
    weights along a path before its rows (GBV: the positions 0..L-1 of a path in one call)."""
    if q is None:
        if not correction:
            return w, None
        return w, (out if out is not None and compiled_copy(p, out) else p)
    total = None
    if correction and out is not None:
        total = compiled_corrections(w, p, q, out)  # sum(min(q - w p, 0)), rows in out
    elif not correction:
        total = compiled_totals(w, p, q)  # the same sums, no rows written
    if total is not None:
        S = -total
    elif B.is_torch(p):  # -res = min(q - w p, 0) in two passes; corrections res/S = (-res)/(-S)
        neg = torch.addcmul(q, p, w.unsqueeze(-1), value=-1, out=out if correction else None)
        neg = neg.clamp_(max=0)
        S = -neg.sum(dim=-1)
    else:
        neg = None
        res = positive_residual(w, p, q)
        S = B.sum(res, axis=-1)
    # S + (1 - w), not S + 1 - w: with w <= 1 this keeps h <= 1 (and P(tau) >= 0) in float32
    if B.is_torch(S):  # S / den, 1 where den = 0; a screen min(den) > 0 skips the search
        den = S + torch.rsub(w, 1)  # 1 - w (in C: the operator's Python wrapper costs more)
        h = torch.div(S, den)
        if not (den.numel() == 0 or bool(den.min() > 0)):
            h = torch.where(den == 0, torch.ones_like(h), h)
    else:
        h = B.safe_div(S, S + (1 - w), B.scalar(S, 1))
    if not correction:
        return h, None
    if total is not None:
        return h, out
    if neg is not None:
        return h, residual_rows(neg, -S, p)  # zeros may carry a sign bit (-0.0 == 0)
    return h, normalise_residual(res, S, p)


def block_weight(state, px, qx):
    """w_i = min(1, w_{i-1} px / qx) [N] from ``state`` = w_{i-1} [N] and the drafted token's
    probabilities px, qx [N] (ratio 1 for a draft token of probability zero): the weight update
    of [`block_node`][spectheory.verifiers.block.block_node], for callers that need the weights
    along a path before its rows (GBV)."""
    w = screened_ratio(px, qx)
    return w.mul_(state).clamp_(max=1) if B.is_torch(w) else B.minimum(state * w, 1)


BLOCK_NODE = NodeForm(block_node, "backward",
                      "w_i = min(1, w_{i-1} p/q); h_i = S_i / (S_i + 1 - w_i); "
                      "correction normalise(max(w_i p - q, 0))",
                      weights_only=True, row_by_row=takes)


def block_weights(drafts, q, p):
    """w_0..w_L [B, L+1] (w_0 = 1). A draft token of probability zero gets ratio 1."""
    px, qx = drafted_probs(drafts, q, p)
    ratio = drafted_ratio(px, qx)
    w = [B.ones_like(ratio[:, 0])]
    for i in range(drafts.shape[-1]):  # loop over positions only, batched over drafts
        w.append(B.minimum(w[-1] * ratio[:, i], 1))
    return B.stack(w, axis=1)


def block_verification(drafts, q, p) -> Law:
    """Law of block verification. Shapes: drafts [B, L], q [B, L, V], p [B, L+1, V].

    The node rule [`block_node`][spectheory.verifiers.block.block_node] applied at positions 0..L of
    every draft ([`law_from_nodes`][spectheory.engine.nodes.law_from_nodes])."""
    return law_from_nodes(BLOCK_NODE, drafts, q, p)


BLOCK = VerifierSpec(
    "block", block_verification, paths=1,
    node_form=BLOCK_NODE.formula,
    paper="Sun et al., Block Verification Accelerates Speculative Decoding, arXiv 2403.10444",
    summary="block verification (optimal single-path verifier)",
    node=BLOCK_NODE, numpy_float=True)
