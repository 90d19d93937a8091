"""SpecTr-GBV as released (Lin, Sheng, Cai, Zhou: "SpecTr-GBV: Multi-Draft Block Verification
Accelerating Speculative Decoding", arXiv 2604.25925; code github.com/junemily/SpecTr-GBV,
``Decoding.speculative_decoding`` in ``src/engine.py``): one iteration of the released code's
verification loop, as a K-path verifier. A LOSSY bug replica, not a lossless verifier.

K candidates x^1..x^K of length L >= 2 are drafted i.i.d. from q (the code refuses
``--gamma`` below 2, and so does this module). For candidate j and 1 <= l <= L, with the joint
probabilities P_l = p(x^j_{1:l}), Q_l = q(x^j_{1:l}) and the next rows p+ = p(.|x^j_{1:l}),
q+ = q(.|x^j_{1:l}):

    m(v) = min(1, Q_l q+(v) / (P_l p+(v))),      m_0 = min(1, Q_l / P_l)      (q/p ratios),
    h_l  = [sum_v P_l p+(v) (1 - m(v))^K - P_l (1 - m_0)^K]
           / [1 - (1 - Q_l)^K - sum_v P_l p+(v) (1 - (1 - m(v))^K)]           (1 <= l <= L-1),
    a_L  = P_L (1 - (1 - m_0)^K) / (1 - (1 - Q_L)^K)                          (l = L).

The code compares a uniform u in [0, 1) with these (``u < h``), so they act clamped to [0, 1];
its ``+ 1e-20`` in the denominators is read as an exact guard against 0 (a zero denominator
gives 1 when the numerator is positive, else 0, as num / 1e-20 does; a ratio whose P p+(v) is 0
only ever multiplies P p+(v) and is taken as 1).

Control flow (the law follows it exactly). Start with the accepted prefix A empty (a = 0), the
selected candidate j* = 1 and an empty set ``seen`` of rejected prefixes. For j = 1..K in index
order: for l = a+1..L-1 (a as it was when candidate j started): if x^j_{1:l} is in ``seen``,
skip it; else with probability h_l set A = x^j_{1:l}, a = l, j* = j (a later, longer prefix of
the same or a later candidate overwrites A, even one that does not extend A), otherwise add
x^j_{1:l} to ``seen``. Then the full block: with probability a_L output all of x^j (A = x^j,
j* = j) and stop visiting candidates; full blocks are never checked against ``seen``. The
output is A and then Y: for a < L from the residual

    rho(v) proportional to P_a p(v|A) (1 - min(1, Q_a q(v|A) / (P_a p(v|A)))^K)

(the power is on the min; P_0 = Q_0 = 1), and for a = L the bonus Y ~ p(.|A). Where rho has no
mass the code's sampler would fail (all-zero weights); spectheory then draws Y from p(.|A).

Not lossless. The paper keeps its output law by modifying the distribution used in the *next*
iteration (its Algorithm 2, "distribution modification"); the released code restarts every
iteration from the plain target, so one iteration's output is not distributed as the target,
already at K = 1 (the tests show TV > 0 exactly). At K = 1 the rule is greedy block
verification: h_l = 1 if r_l = P_l / Q_l >= 1, else S / (S + 1 - r_l) with
S = sum_v (r_l p+(v) - q+(v))^+, a_L = min(1, r_L), residual (r_a p - q)^+, and the expected
number of accepted tokens is the full-information bound sum_{l<=L} sum_{x^l} min(p(x^l), q(x^l))
(exactly; tests), above block verification's optimum among valid verifiers. K = 2 can accept
fewer tokens than K = 1 (tests).

Exact law. Given the K drafts, the law is a propagation of probabilities over the states
(a, j*, seen) of the loop, one accept/reject branch per visited prefix: a per-row Python loop
over at most 2^((L-1) K) histories (refused above `MAX_DECISIONS` decisions, in one line),
exact in rationals (numpy object arrays) and in float64 on torch (then returned in the input's
dtype). The acceptance and residual rows are computed batched with the backend ops.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from ..runtime._lazy import torch

from ..runtime import backend as B
from ..runtime.errors import SizeLimitError, SpectheoryError, check_arrays
from ..law import MultiLaw, empty_law
from ..registry import VerifierSpec
from .common import normalise_residual

#: Most accept/reject decisions (L - 1) K one row's loop may take (2^MAX_DECISIONS histories).
MAX_DECISIONS = 16


def check_sizes(L: int, K: int) -> None:
    """Refuse L = 1 (as the released code does) and more than `MAX_DECISIONS` decisions."""
    if L < 2:
        raise SpectheoryError(f"spectr-gbv needs block length L >= 2 (the released code refuses "
                              f"--gamma below 2), not L = {L}")
    if (L - 1) * K > MAX_DECISIONS:
        raise SizeLimitError(f"spectr-gbv's exact law follows up to 2^((L-1) K) accept/reject "
                             f"histories per draft; (L-1) K = {(L - 1) * K} (L = {L}, K = {K}) is "
                             f"above the limit of {MAX_DECISIONS}; use fewer paths or a shorter "
                             f"block")


def _some_of(x, K: int):
    """1 - (1 - x)^K = x sum_{j<K} (1 - x)^j (no cancellation for small x)."""
    total, term = B.ones_like(x), B.ones_like(x)
    for _ in range(K - 1):
        term = term * (1 - x)
        total = total + term
    return x * total


def _clamped_ratio(num, den):
    """num / den clamped to [0, 1], as ``u < num / (den + eps)`` with u ~ U[0, 1) acts; a zero
    denominator gives 1 for a positive numerator and 0 otherwise."""
    one, zero = B.scalar(num, 1), B.scalar(num, 0)
    h = B.safe_div(num, den, B.where(num > 0, B.ones_like(num), B.zeros_like(num)))
    return B.minimum(B.maximum(h, zero), one)


def _q_over_p(Qq, Pp):
    """min(1, Q q / (P p)), 1 where P p = 0 (then it multiplies P p = 0 wherever it is used)."""
    return B.minimum(B.safe_div(Qq, Pp, B.scalar(Pp, 1)), 1)


def _joint(drafts, q, p):
    """P_l, Q_l for l = 0..L along each row's draft: [N, L+1] each (drafts [N, L])."""
    L = drafts.shape[-1]
    idx = B.expand_dims(B.as_index(drafts, q), -1)
    px = B.take_along(p[:, :L], idx, axis=-1)[..., 0]
    qx = B.take_along(q, idx, axis=-1)[..., 0]
    one = B.ones_like(px[:, :1])
    return (B.concat([one, B.cumprod(px, axis=1)], axis=1),
            B.concat([one, B.cumprod(qx, axis=1)], axis=1))


def acceptance_weights(drafts, q, p, K: int):
    """h [N, L+1]: h[:, l] = h_l of the row's draft prefix of length l for 1 <= l <= L-1 and
    h[:, L] = a_L (h[:, 0] = 0, unused); rows N of drafts [N, L], q [N, L, V], p [N, L+1, V]."""
    L = drafts.shape[-1]
    P, Q = _joint(drafts, q, p)
    Pl, Ql = P[:, 1:L], Q[:, 1:L]  # l = 1..L-1
    Pp = B.expand_dims(Pl, -1) * p[:, 1:L]  # P_l p(v|x_{1:l}), [N, L-1, V]
    Qq = B.expand_dims(Ql, -1) * q[:, 1:L]
    none = (1 - _q_over_p(Qq, Pp)) ** K
    num = B.sum(Pp * none, axis=-1) - Pl * (1 - _q_over_p(Ql, Pl)) ** K
    den = _some_of(Ql, K) - B.sum(Pp * (1 - none), axis=-1)
    h_mid = _clamped_ratio(num, den)
    PL, QL = P[:, L], Q[:, L]
    a_L = _clamped_ratio(PL * _some_of(_q_over_p(QL, PL), K), _some_of(QL, K))
    return B.concat([B.zeros_like(h_mid[:, :1]), h_mid, B.expand_dims(a_L, 1)], axis=1)


def residual_rows(drafts, q, p, K: int):
    """Correction rows [N, L+1, V]: normalise(P_a p (1 - min(1, Q_a q / (P_a p))^K)) at each
    prefix length a < L of the row's draft (p(.|x_{1:a}) where it has no mass), p(.|x_{1:L}) at
    a = L."""
    L = drafts.shape[-1]
    P, Q = _joint(drafts, q, p)
    Pp = B.expand_dims(P[:, :L], -1) * p[:, :L]
    m = _q_over_p(B.expand_dims(Q[:, :L], -1) * q, Pp)
    powers, term = B.ones_like(m), B.ones_like(m)  # 1 - m^K = (1 - m) sum_{j<K} m^j
    for _ in range(K - 1):
        term = term * m
        powers = powers + term
    res = Pp * (1 - m) * powers
    total = B.sum(res, axis=-1)
    rows = [normalise_residual(res[:, a], total[:, a], p[:, a]) for a in range(L)]
    return B.stack(rows + [p[:, L]], axis=1)


def _add(table: dict, key, value) -> None:
    table[key] = table[key] + value if key in table else value


def loop_law(tokens, h, K: int, L: int, zero):
    """P(output is candidate j's first a tokens, then Y) ``[K][L+1]`` for one row: ``tokens`` the K
    drafts (lists of ints), ``h[j][l]`` the acceptance of candidate j's prefix of length l
    (1 <= l <= L-1) and ``h[j][L]`` its full-block acceptance a_L; the loop of the module doc,
    with probabilities propagated over its states (a, j*, seen)."""
    stop = [[zero] * (L + 1) for _ in range(K)]
    states = {(0, 0, frozenset()): zero + 1}
    for j in range(K):
        cand = tuple(tokens[j])
        nxt: dict = {}
        for (a, sel, seen), prob in states.items():
            branches = [(a, sel, seen, prob)]
            for ell in range(a + 1, L):  # the range the code fixes when candidate j starts
                key, acc = cand[:ell], h[j][ell]
                grown = []
                for a2, sel2, seen2, pr in branches:
                    if key in seen2:  # rejected before: skipped
                        grown.append((a2, sel2, seen2, pr))
                        continue
                    if acc != 0:
                        grown.append((ell, j, seen2, pr * acc))
                    if acc != 1:
                        grown.append((a2, sel2, seen2 | {key}, pr * (1 - acc)))
                branches = grown
            full = h[j][L]
            for a2, sel2, seen2, pr in branches:
                if full != 0:
                    stop[j][L] += pr * full
                if full != 1:
                    _add(nxt, (a2, sel2, seen2), pr * (1 - full))
        states = nxt
    for (a, sel, _), prob in states.items():
        stop[sel][a] += prob
    return stop


def spectr_gbv(drafts, q, p) -> MultiLaw:
    """Law of one iteration of SpecTr-GBV's released verification loop (module doc). Shapes:
    drafts [B, K, L], q [B, K, L, V], p [B, K, L+1, V]; L >= 2. Lossy (no next-iteration
    modification)."""
    check_arrays(drafts, q, p, paths=True)
    if drafts.shape[0] == 0:
        return empty_law(p)
    Bsz, K, L = drafts.shape
    V = q.shape[-1]
    check_sizes(L, K)
    exact = B.is_exact(p)
    dtype = None if exact else p.dtype
    on_torch = B.is_torch(p)
    if not exact:  # float64 inside, the rows' dtype out (numpy floats as torch's)
        q, p = ((q.to(torch.float64), p.to(torch.float64)) if on_torch else
                (q.astype(np.float64), p.astype(np.float64)))
    flat_d = drafts.reshape(Bsz * K, L)
    flat_q, flat_p = q.reshape(Bsz * K, L, V), p.reshape(Bsz * K, L + 1, V)
    h = acceptance_weights(flat_d, flat_q, flat_p, K).reshape(Bsz, K, L + 1)
    corr = residual_rows(flat_d, flat_q, flat_p, K).reshape(Bsz, K, L + 1, V)
    toks = drafts.tolist()
    hs = h.tolist()
    zero = Fraction(0) if exact else 0.0
    stop = [loop_law(toks[b], hs[b], K, L, zero) for b in range(Bsz)]
    if exact:
        stop = B.to_exact(np.array(stop, dtype=object).reshape(Bsz, K, L + 1))
        return MultiLaw(stop, corr)
    if not on_torch:
        stop = np.array(stop, dtype=np.float64).reshape(Bsz, K, L + 1)
        return MultiLaw(stop.astype(dtype), corr.astype(dtype))
    stop = torch.tensor(stop, dtype=torch.float64, device=p.device).reshape(Bsz, K, L + 1)
    return MultiLaw(stop.to(dtype), corr.to(dtype))


SPECTR_GBV = VerifierSpec(
    "spectr-gbv", spectr_gbv, paths=None, drafting="iid", lossless=False,
    paper="Lin et al., SpecTr-GBV: Multi-Draft Block Verification Accelerating Speculative "
          "Decoding, arXiv 2604.25925; released code github.com/junemily/SpecTr-GBV "
          "(src/engine.py)",
    summary="LOSSY as released: the authors' code's per-iteration rule; the paper's "
            "cross-iteration distribution modification (its Algorithm 2) is not in the "
            "released code, so one iteration is lossy")
