"""Hierarchical Speculative Decoding, HSD (Zhou, Huang, Li, Wu, Wang, Zhang, Lin, Cheng:
"Overcoming Joint Intractability with Lossless Hierarchical Speculative Decoding", arXiv
2601.05724, ICLR 2026), Algorithm 2 on one drafted chain X = X_1..X_L, computed from the
paper's own definitions (its Section 4, Definitions 4 to 6, eqs. 19 and 20).

Joint probabilities along the draft: P_t = p(X^t), Q_t = q(X^t), ratios r_t = P_t / Q_t
(r_0 = 1). The capped ratio of a sequence x^t is

    r*(x^t) = r(x^t) / max(1, max_{1<=i<t} r(x^i)),

so for a child X^t v of the drafted prefix X^t, with M_t = max(1, max_{1<=i<=t} r_i),
r*(X^t v) = p(X^t v) / (q(X^t v) M_t). The capped branch divergences of the children of X^t are

    D*(p, q | X^t) = sum_v (r*(X^t v) - 1)^+ q(X^t v),
    D*(q, p | X^t) = sum_v (1 - r*(X^t v))^+ q(X^t v).

Acceptance weights: h_L = min(r*(X^L), 1); h_t = D*(p, q | X^t) / D*(q, p | X^t) for
0 < t < L (0 when the denominator is 0); h_0 = 1. Algorithm 2 scans t = L, L-1, ..., 1 with
fresh uniforms and stops at the first success (tau = 0 if none succeeds), so

    P(tau = t | X) = h_t prod_{j>t} (1 - h_j).

Correction: for tau < L, Y ~ normalise((q(X^tau v) (r*(X^tau v) - 1))^+) (eq. 20); for tau = L
the bonus Y ~ p(.|X^L).

Zero probabilities. q(X^t v) (r*(X^t v) - 1) is evaluated as p(X^t v) / M_t - q(X^t v): the same
number where q(X^t v) > 0, and its limit where q(X^t v) = 0 (a child the draft never proposes,
whose deficit mass p(X^t v) / M_t the residual must hold). No division by a joint draft
probability of a child is made; r_t along the draft is P_t / Q_t, taken as 1 on a draft of
probability zero (never proposed: any law is valid there, and this one is). A residual of mass
zero falls back to p(.|X^tau) (its stop has probability zero). Joint probabilities are formed in
float64 on torch (they underflow in float32 over long blocks); the law is returned in the
input's dtype. P_t / M_t is formed as Q_t (r_t / M_t), the capped ratio r_t / M_t along the draft
in [0, 1] (`_capped_ratios`): a draft conditional of 1e-315 made r_t overflow to inf and
r_L / M_{L-1} NaN. A draft whose joint probability Q_t underflows float64 (below 2^-1074) is a
draft of probability zero to every float64 computation, and gets the convention above.

HSD is block verification. The paper's Theorem 7 claims E[tau] of HSD >= that of block
verification (Sun et al., arXiv 2403.10444) with equality iff L = 1. In fact the block weights
w_t = min(1, w_{t-1} p(X_t|X^{t-1}) / q(X_t|X^{t-1})) are w_t = r_t / M_t (r_t over its running
maximum, r_0 = 1 included), so r*(X^t v) = w_t p(v|X^t) / q(v|X^t), D*(p, q | X^t) = Q_t S_t and
D*(q, p | X^t) = Q_t (S_t + 1 - w_t) with S_t = sum_v (w_t p(v|X^t) - q(v|X^t))^+; hence
h_t = S_t / (S_t + 1 - w_t), h_L = w_L and the residual is (w_tau p - q)^+: Algorithm 2 is
block verification on every draft. (Where S_t = 0 and w_t = 1 the two conventions for 0/0
differ, 0 here and 1 in block verification, but the scan never reaches such a position: the
next weight is exactly 1, so some deeper h_j is 1.) The tests check the laws equal draft by
draft in exact rationals; nothing here calls block verification.

``hsd-released`` ([`hsd_released`][spectheory.verifiers.hsd.hsd_released], a LOSSY bug replica). The
authors' released code (github.com/ZhouYuxuanYX/Hierarchical-Speculative-Decoding:
``_speculative_sampling`` in the patched ``transformers/generation/utils.py``, its first draft, as
of commit f3adf7f; the later commits vectorise the same cap with tab-indented lines that raise
TabError on import; the paper's Listing 2 in Appendix F is reported to do the same) caps the joint
target mass in the step-back and residual terms, P_t / max(1, cummax_{i<=t} r_i), exactly as above,
but accepts the full block with the UNCAPPED joint ratio, min(1, r_L)
(``exp(cumsum(log p_i) - cumsum(log q_i))`` compared with a uniform). With every other quantity as
in Algorithm 2 that test is not lossless for L >= 2 (the checker finds it); at L = 1 the cap is
max(1, nothing) = 1 and the two agree. (The repository's stand-alone ``algorithm.py`` caps
differently and does not run as published: it uses names it never defines; it is not replicated.)
"""

from __future__ import annotations

from ..runtime._lazy import torch

from ..runtime import backend as B
from ..law import Law
from ..registry import VerifierSpec
from ..runtime.errors import check_arrays
from .common import drafted_probs, normalise_residual, stop_from_acceptance_weights


def _as_float64(*arrays):
    """torch arrays in float64 (joint probabilities underflow in float32), numpy as they are."""
    if B.is_torch(arrays[0]):
        return tuple(a.to(torch.float64) for a in arrays)
    return arrays


def joint_ratios(drafts, q, p):
    """P_t, Q_t and r_t = P_t / Q_t for t = 0..L along each draft, each [B, L+1] (r_t = 1 where
    Q_t = 0: a draft of probability zero)."""
    px, qx = drafted_probs(drafts, q, p)
    one = B.ones_like(px[:, :1])
    P = B.concat([one, B.cumprod(px, axis=1)], axis=1)
    Q = B.concat([one, B.cumprod(qx, axis=1)], axis=1)
    return P, Q, B.safe_div(P, Q, B.scalar(P, 1))


def running_caps(r):
    """M_t = max(1, max_{1<=i<=t} r_i) for t = 0..L, [B, L+1] (M_0 = 1): the cap of the capped
    ratio of every child of X^t, r*(X^t v) = r(X^t v) / M_t (Definition 5)."""
    caps = [B.ones_like(r[:, 0])]
    for t in range(1, r.shape[1]):
        caps.append(B.maximum(caps[-1], r[:, t]))
    return B.stack(caps, axis=1)


def _capped_ratios(px, qx, Q, r, M):
    """c_t = r_t / M_t for t = 0..L, [B, L+1], each in [0, 1], without forming r_t where it
    overflows. Along the draft c_t = min(1, c_{t-1} p(X_t|X^{t-1}) / q(X_t|X^{t-1})), c_0 = 1
    (r_t / M_t is 1 where r_t is a new maximum, else (r_{t-1} / M_{t-1}) p / q), evaluated as 1
    where c_{t-1} p >= q, else the quotient (below 1: no overflow). A draft conditional of
    1e-315 made r_t = P_t / Q_t infinite, M_t too, and r_L / M_{L-1} NaN. Where Q_t = 0 (a
    draft never proposed) r_t / M_t with the convention r_t = 1. ``px``, ``qx`` [B, L]: the
    drafted tokens' conditionals; ``Q``, ``r``, ``M`` [B, L+1]."""
    c = [B.ones_like(px[:, 0])]
    for t in range(px.shape[1]):
        num = c[-1] * px[:, t]
        c.append(B.where(num >= qx[:, t], B.scalar(num, 1), B.safe_div(num, qx[:, t],
                                                                        B.scalar(num, 1))))
    return B.where(Q == 0, B.ones_like(r) / M, B.stack(c, axis=1))  # r_t = 1 there, M_t >= 1


def capped_branch_masses(drafts, q, p):
    """The children of X^t for t = 0..L-1: ``deficit`` = (q(X^t v) (r*(X^t v) - 1))^+ and
    ``excess`` = (q(X^t v) (1 - r*(X^t v)))^+, each [B, L, V] (summed over v: the capped
    branch divergences D*(p, q | X^t), D*(q, p | X^t) of Definition 6), with r and M."""
    return _branch_masses(drafts, q, p)[:4]


def _branch_masses(drafts, q, p):
    """`capped_branch_masses` and c_t = r_t / M_t, [B, L+1]."""
    L = drafts.shape[-1]
    P, Q, r = joint_ratios(drafts, q, p)
    M = running_caps(r)
    # q(X^t v) r*(X^t v) = p(X^t v) / M_t: the capped joint target mass of the child, with
    # P_t / M_t = Q_t (r_t / M_t) (finite where r_t and M_t overflow)
    c = _capped_ratios(*drafted_probs(drafts, q, p), Q, r, M)
    capped_p = B.expand_dims(Q[:, :L] * c[:, :L], -1) * p[:, :L]
    joint_q = B.expand_dims(Q[:, :L], -1) * q
    diff = capped_p - joint_q
    return B.positive_part(diff), B.positive_part(-diff), r, M, c


def _hsd_law(drafts, q, p, capped_final: bool) -> Law:
    check_arrays(drafts, q, p, paths=False)
    dtype = p.dtype if B.is_torch(p) else None
    q, p = _as_float64(q, p)
    L = drafts.shape[-1]
    deficit, excess, r, M, c = _branch_masses(drafts, q, p)
    d_pq = B.sum(deficit, axis=-1)  # D*(p, q | X^t), t = 0..L-1
    d_qp = B.sum(excess, axis=-1)  # D*(q, p | X^t)
    # eq. 19; D*(p,q) - D*(q,p) = Q_t (r_t / M_t - 1) <= 0, so h <= 1 (min guards float rounding)
    h_mid = B.minimum(B.safe_div(d_pq, d_qp, B.scalar(d_pq, 0)), 1)
    # min(1, r*(X^L)) = min(1, r_L / M_{L-1}) = r_L / M_L = c_L; or the uncapped r_L
    final = c[:, L] if capped_final else r[:, L]
    h = B.concat([B.ones_like(h_mid[:, :1]), h_mid[:, 1:],
                  B.expand_dims(B.minimum(final, 1), 1)], axis=1)  # h_0 = 1, ..., h_L
    stop = stop_from_acceptance_weights(h)
    rows = [normalise_residual(deficit[:, t], d_pq[:, t], p[:, t]) for t in range(L)]
    correction = B.stack(rows + [p[:, L]], axis=1)  # eq. 20; the bonus row at tau = L
    if dtype is not None:
        stop, correction = stop.to(dtype), correction.to(dtype)
    return Law(stop, correction)


def hsd(drafts, q, p) -> Law:
    """Law of HSD's Algorithm 2 (module doc). Shapes: drafts [B, L], q [B, L, V], p [B, L+1, V].
    Equal to [`block_verification`][spectheory.verifiers.block.block_verification] on every draft of
    positive probability (exactly, in rationals)."""
    return _hsd_law(drafts, q, p, capped_final=True)


def hsd_released(drafts, q, p) -> Law:
    """LOSSY bug replica: HSD as released, whose full-block test uses the uncapped joint ratio
    min(1, r_L) instead of min(1, r*(X^L)) (module doc). Lossless at L = 1 only."""
    return _hsd_law(drafts, q, p, capped_final=False)


HSD_PAPER = ("Zhou et al., Overcoming Joint Intractability with Lossless Hierarchical "
             "Speculative Decoding, ICLR 2026, arXiv 2601.05724")

HSD = VerifierSpec(
    "hsd", hsd, paths=1, paper=HSD_PAPER, numpy_float=True,
    summary="hierarchical speculative decoding (Algorithm 2, capped joint ratios); equals "
            "block verification on every draft")
HSD_RELEASED = VerifierSpec(
    "hsd-released", hsd_released, paths=1, lossless=False, numpy_float=True,
    paper=HSD_PAPER + "; released code (github.com/ZhouYuxuanYX/Hierarchical-Speculative-"
                      "Decoding) and the paper's Listing 2",
    summary="LOSSY bug replica: HSD with the released code's uncapped full-block test "
            "min(1, r_L)")
