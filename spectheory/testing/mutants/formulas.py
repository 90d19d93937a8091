"""Formula errors: wrong verifier laws replicated from bug reports (an exact law exists).

Each function here is a law function in spectheory's verifier signature (single-path
``f(drafts [B, L], q [B, L, V], p [B, L+1, V]) -> Law`` or the K-path form), written from the
published description of a bug, so that [`check_lossless`][spectheory.engine.lossless.check_lossless] computes
its exact output law and names the first output sequence whose probability is wrong. The matching
[`VerifierSpec`][spectheory.registry.VerifierSpec] objects (all ``lossless=False``) are at the end.

Notation as in [`spectheory.verifiers.block`][spectheory.verifiers.block]: w_i are the block
weights, S_i the residual masses, h_i the acceptance weights (Sun et al., arXiv 2403.10444).
"""

from __future__ import annotations

import math

import torch

from ...runtime import backend as B
from ...law import Law
from ...registry import VerifierSpec
from ...verifiers.block import block_weights
from ...verifiers.common import (drafted_probs, residual_corrections, residuals,
                                 stop_from_acceptance_weights)
from ...verifiers.token import token_verification

__all__ = [
    "SOFTMAX_RESIDUAL", "LAST_ACCEPTED_UNIFORM_PRODUCT", "BLOCK_WRONG_ROW", "TOKEN_OFF_BY_ONE",
    "softmax_residual", "last_accepted_uniform_product", "block_wrong_row", "token_off_by_one",
]


# ----------------------------------------------------------------------------- HF #28508


def softmax_residual(drafts, q, p) -> Law:
    """Token verification whose residual is ``softmax(clamp(p - q, min=0))``.

    Replica of Hugging Face transformers issue #28508: on rejection at position tau + 1 the
    correction was drawn from a softmax of the clipped difference of *probabilities*,
    softmax(max(p(.|X^tau) - q(.|X^tau), 0)), instead of that difference divided by its sum.
    Acceptance (min(1, p/q)) and the bonus row p(.|X^L) are right. exp() makes this a float
    (torch) law only. Lossy: on the two-token example p = (1/3, 2/3), q = (2/3, 1/3), L = 2 the
    residual (0, 1/3) becomes (0.417, 0.583) instead of (0, 1).
    """
    if not isinstance(p, torch.Tensor):
        raise TypeError("softmax_residual has a float (torch) law only")
    law = token_verification(drafts, q, p)
    L = drafts.shape[-1]
    soft = torch.softmax(torch.clamp(p[:, :L] - q, min=0.0), dim=-1)
    return Law(law.stop, torch.cat([soft, p[:, L:]], dim=1))


# ----------------------------------------------------------------------------- vllm-ascend #3794


def _poisson_pmf_capped(delta, cap: int):
    """P(N = n) for n = 0..cap-1 and P(N >= cap) in the last column, N ~ Poisson(delta);
    delta [B] >= 0, possibly +inf (all mass on ">= cap")."""
    n = torch.arange(cap, dtype=delta.dtype, device=delta.device)
    d = delta.unsqueeze(-1)
    finite = torch.isfinite(d)
    dd = torch.where(finite, d, torch.zeros_like(d))
    logpmf = -dd + n * torch.log(torch.where(dd > 0, dd, torch.ones_like(dd))) - torch.lgamma(n + 1)
    pmf = torch.where(dd > 0, torch.exp(logpmf), (n == 0).to(delta.dtype).expand_as(logpmf))
    pmf = torch.where(finite, pmf, torch.zeros_like(pmf))
    tail = (1 - pmf.sum(-1, keepdim=True)).clamp(min=0.0)
    return torch.cat([pmf, tail], dim=-1)  # [B, cap + 1]


def last_accepted_uniform_product(drafts, q, p) -> Law:
    """"Block verification" as a running product of uniforms, last accepted position.

    Replica of vllm-ascend #3794 (the rule shipped as block verification, found in #7807):
    running value pi_i = min(pi_{i-1} p(X_i|X^{i-1}) / q(X_i|X^{i-1}), 1), pi_0 = 1 (the block
    weights w_i); a running product of i.i.d. uniforms U_1 ... U_i; position i is "accepted" when
    q(X_i) > 0 and pi_i >= U_1 ... U_i, and tau is the *last* accepted position (0 if none): a
    later position may succeed after an earlier one failed. The extra token comes from the plain
    residual normalise(max(p(.|X^tau) - q(.|X^tau), 0)), or p(.|X^L) when tau = L.

    Exact law. With E_j = -ln U_j ~ Exp(1), T_i = E_1 + ... + E_i are the arrival times of a unit
    Poisson process N, and "accepted at i" is {T_i >= b_i} = {N(b_i) <= i - 1} with
    b_i = -ln pi_i (b_i = +inf when pi_i = 0 or q(X_i) = 0). So

        P(tau = i) = P(N(b_i) <= i - 1 and N(b_j) >= j for every j > i),

    which a pass over the points b_j in increasing order computes exactly (independent Poisson
    increments between consecutive points; counts capped at L). exp/log make this a float
    (torch) law. The torch fallback of the same code used prod min(1, p/q) for pi; the rule
    above is the one of the shipped kernel.
    """
    if not isinstance(p, torch.Tensor):
        raise TypeError("last_accepted_uniform_product has a float (torch) law only")
    Bsz, L = drafts.shape
    px, qx = drafted_probs(drafts, q, p)
    ratio = torch.where(qx > 0, px / torch.where(qx > 0, qx, torch.ones_like(qx)),
                        torch.zeros_like(px))
    pis = []
    pi = torch.ones_like(ratio[:, 0])
    for i in range(L):
        pi = torch.clamp(pi * ratio[:, i], max=1.0)
        pis.append(pi)
    pi = torch.stack(pis, dim=1)  # [B, L]
    b = torch.where(pi > 0, -torch.log(torch.where(pi > 0, pi, torch.ones_like(pi))),
                    torch.full_like(pi, math.inf))
    b = torch.where(qx > 0, b, torch.full_like(b, math.inf))
    b_sorted, order = torch.sort(b, dim=1)
    prev = torch.cat([torch.zeros_like(b_sorted[:, :1]), b_sorted[:, :-1]], dim=1)
    gaps = b_sorted - torch.where(torch.isfinite(prev), prev, torch.zeros_like(prev))
    gaps = torch.where(torch.isfinite(b_sorted) & ~torch.isfinite(prev),
                       torch.zeros_like(gaps), gaps)  # inf - inf: no new arrivals counted
    inc = [_poisson_pmf_capped(gaps[:, s], L) for s in range(L)]  # each [B, L+1]
    counts = torch.arange(L + 1, device=p.device)
    position = order + 1  # the original position j (1-based) of each sorted point
    stop = torch.zeros(Bsz, L + 1, dtype=p.dtype, device=p.device)
    for i in range(1, L + 1):
        f = torch.zeros(Bsz, L + 1, dtype=p.dtype, device=p.device)
        f[:, 0] = 1.0
        for s in range(L):
            g = torch.zeros_like(f)  # convolve the capped count with the increment
            for m in range(L + 1):
                for n in range(m + 1):
                    if m < L:
                        g[:, m] += f[:, n] * inc[s][:, m - n]
                    else:
                        g[:, L] += f[:, n] * inc[s][:, L - n:].sum(-1)
            j = position[:, s].unsqueeze(-1)  # [B, 1]
            anything = torch.ones_like(counts, dtype=torch.bool)
            ok = torch.where(j == i, counts <= i - 1, torch.where(j > i, counts >= j, anything))
            f = torch.where(ok, g, torch.zeros_like(g))
        stop[:, i] = f.sum(-1)
    stop[:, 0] = (1 - stop[:, 1:].sum(-1)).clamp(min=0.0)
    return Law(stop, residual_corrections(residuals(torch.ones_like(pi), q, p), p))


# ----------------------------------------------------------------------------- vLLM PR 40819


def block_wrong_row(drafts, q, p) -> Law:
    """Block verification whose residual mass for h_i is read from the rows at position i - 1.

    Replica of the pure-torch reference ``rejection_random_sample_block_verify_pytorch`` of vLLM
    V1 pull request 40819 (the same code went into vllm-ascend #7808): the acceptance weight
    h_i = S'_i / (S'_i + 1 - w_i) uses S'_i = sum_x max(w_i p(x|X^{i-1}) - q(x|X^{i-1}), 0), the
    rows one position too early, instead of the rows at X^i. Weights w_i, h_L = w_L and the
    corrections normalise(max(w_tau p(.|X^tau) - q(.|X^tau), 0)) are right. Exact in rationals.
    When p and q do not depend on the prefix the rows at i - 1 and i are equal and the law is
    exactly right; prefix-dependent rows make it lossy.
    """
    L = drafts.shape[-1]
    w = block_weights(drafts, q, p)
    res = residuals(w[:, :L], q, p)  # max(w_i p(.|X^i) - q(.|X^i), 0), i = 0..L-1
    S = B.sum(res, axis=-1)
    if L > 1:  # S'_i for i = 1..L-1: w_i with the rows of position i - 1
        wrong = B.positive_part(B.expand_dims(w[:, 1:L], -1) * p[:, : L - 1] - q[:, : L - 1])
        S_wrong = B.sum(wrong, axis=-1)  # [B, L-1]
        h_mid = B.safe_div(S_wrong, S_wrong + (1 - w[:, 1:L]), B.scalar(S_wrong, 1))
        h = B.concat([B.ones_like(S[:, :1]), h_mid, w[:, L:]], axis=1)
    else:
        h = B.concat([B.ones_like(S[:, :1]), w[:, L:]], axis=1)
    return Law(stop_from_acceptance_weights(h),
               residual_corrections(res, p, B.expand_dims(S, -1)))


# ----------------------------------------------------------------------------- TensorRT-LLM #15098


def token_off_by_one(drafts, q, p) -> Law:
    """Token verification that accepts X_i with min(1, p(X_i|X^i) / q(X_i|X^{i-1})).

    Replica of the off-by-one class seen in TensorRT-LLM #15098 (a wrong logits slice): the
    target probability of the drafted token is read from the row one position later,
    p(.|X^i), instead of p(.|X^{i-1}); residuals and the bonus row are right. Exact in
    rationals. Invisible when the target does not depend on the prefix (the two rows are equal).
    """
    idx = B.expand_dims(B.as_index(drafts, q), -1)
    px = B.take_along(p[:, 1:], idx, axis=-1)[..., 0]  # the wrong row: p(.|X^i)
    qx = B.take_along(q, idx, axis=-1)[..., 0]
    accept = B.minimum(B.safe_div(px, qx, B.scalar(px, 1)), 1)
    one = B.ones_like(accept[:, :1])
    reached = B.cumprod(B.concat([one, accept], axis=1), axis=1)
    stop = reached * B.concat([1 - accept, one], axis=1)
    res = residuals(B.ones_like(accept), q, p)
    return Law(stop, residual_corrections(res, p))


SOFTMAX_RESIDUAL = VerifierSpec(
    "hf-28508-softmax-residual", softmax_residual, paths=1, lossless=False, exact=False,
    paper="Hugging Face transformers issue #28508",
    summary="LOSSY replica: token verification with a softmax of the clipped residual")
LAST_ACCEPTED_UNIFORM_PRODUCT = VerifierSpec(
    "vllm-ascend-3794-uniform-product", last_accepted_uniform_product, paths=1, lossless=False,
    exact=False, paper="vllm-ascend issue #3794 (found in #7807)",
    summary="LOSSY replica: running product of uniforms, last accepted position, plain residual")
BLOCK_WRONG_ROW = VerifierSpec(
    "vllm-40819-block-wrong-row", block_wrong_row, paths=1, lossless=False,
    paper="vLLM pull request 40819 (pure-torch block verification reference)",
    summary="LOSSY replica: block verification with h_i from the rows at position i - 1")
TOKEN_OFF_BY_ONE = VerifierSpec(
    "trtllm-15098-off-by-one", token_off_by_one, paths=1, lossless=False,
    paper="TensorRT-LLM issue #15098 (off-by-one target row class)",
    summary="LOSSY replica: token verification reading p(X_i) from the row at X^i")
