"""SpecTr K-SEQ (Sun, Suresh, Ro, Beirami, Jain, Yu: "SpecTr: Fast Speculative Decoding via
Optimal Transport", NeurIPS 2023, arXiv 2310.15141), applied node by node on the token tree of K
i.i.d. drafted paths (the multi-path use in that paper).

K-SEQ at a node with target p, draft q and m i.i.d. candidates x_1..x_m (m = number of drafted
paths through the node, repeats included). For a parameter rho in [1, m] let

    beta(rho) = sum_x min(q(x), p(x) / rho),    c_m(beta) = sum_{j<m} (1 - beta)^j
                                                          (= (1 - (1 - beta)^m) / beta).

Try the candidates in order and accept x_j with probability min(1, p(x_j) / (rho q(x_j))); the
first success is the output (the walk moves to that child). If all m fail (probability
prod_j (1 - min(1, p(x_j)/(rho q(x_j))))), Y is drawn from the residual

    p_res(x) = (p(x) - min(q(x), p(x)/rho) c_m(beta)) / (1 - beta)^m.

The output has law p whenever p_res >= 0, i.e. whenever rho >= c_m(beta(rho)). The left side
grows and the right side shrinks with rho, and rho = m is always valid, so the smallest valid rho
(the one with the largest acceptance, 1 - (1 - beta)^m) is found by a 1-D search on [1, m]
(what we implement: one sort locates the linear piece of rho beta(rho) that holds it, then 50
halvings in float, 40 in exact rationals, inside that piece, keeping the valid upper end, so the
rational result is exactly lossless). m = 1 gives rho = 1: token verification.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..runtime import backend as B
from ..law import MultiLaw
from ..registry import VerifierSpec
from .specinfer import _row_at, node_recursive_law

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
    if exact:
        return _bisect_exact(lo, hi, P, Q_tot - Q, m, K, BISECTION_STEPS[exact])
    return _bisect(lo, hi, P, Q_tot - Q, m, K, BISECTION_STEPS[exact])


def _bisect(lo, hi, P, R, m, K: int, steps: int):
    """``steps`` halvings of [lo, hi] keeping the valid upper end: rho = mid is valid when
    mid >= c_m(beta) with beta = (P + mid R) / mid (T(rho) on the piece, R = Q_tot - Q).
    ``lo, hi, P, R, m [B, K]``; the backend's arithmetic (float, torch or Fractions)."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        ok = mid >= _c((P + mid * R) / mid, m, K)
        hi = B.where(ok, mid, hi)
        lo = B.where(ok, lo, mid)
    return hi


def _bisect_exact(lo, hi, P, R, m, K: int, steps: int):
    """`_bisect` on Fractions in integers, node by node: the same halvings and the same tests,
    hence the same hi. With lo = l/D, hi = h/D, mid = a/b (a = l + h, b = 2D), P = p/d and
    R = r/d: 1 - beta = x/y with y = d a, x = y - p b - r a, so c_m(beta) = N / y^(n-1) with
    N = sum_{j<n} x^j y^(n-1-j), n = min(m, K) (c = 0 for n = 0), and mid >= c_m(beta) is
    a y^(n-1) >= N b, reversed when y^(n-1) < 0 (b > 0). ``lo, hi, P, R, m [B, K]`` object /
    int arrays; returns hi [B, K] as an object array (a node never moved keeps its hi)."""
    out = np.empty(hi.shape, dtype=object)
    for i in np.ndindex(hi.shape):
        out[i] = _bisect_node(Fraction(lo[i]), hi[i], Fraction(P[i]), Fraction(R[i]),
                              min(max(int(m[i]), 0), K), steps)
    return out


def _bisect_node(lo: Fraction, hi, P: Fraction, R: Fraction, n: int, steps: int):
    hi_f = Fraction(hi)
    D = math.lcm(lo.denominator, hi_f.denominator)
    l, h = lo.numerator * (D // lo.denominator), hi_f.numerator * (D // hi_f.denominator)
    d = math.lcm(P.denominator, R.denominator)
    p, r = P.numerator * (d // P.denominator), R.numerator * (d // R.denominator)
    moved = False
    for _ in range(steps):
        a, b = l + h, 2 * D  # mid = a / b
        if a == 0:
            raise ZeroDivisionError("Fraction(0, 0)")  # beta's division by mid, as in rationals
        y = d * a
        x = y - p * b - r * a
        N, xp = 0, 1
        for j in range(n):  # N = sum_{j<n} x^j y^(n-1-j)
            N += xp * y ** (n - 1 - j)
            xp *= x
        yy = y ** (n - 1) if n else 1  # mid >= N / yy, multiplied through by b yy
        ok = a * yy >= N * b if yy > 0 else a * yy <= N * b
        l, h, D = (2 * l, a, b) if ok else (a, 2 * h, b)
        moved = moved or ok
    return Fraction(h, D) if moved else hi


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


SPECTR = VerifierSpec(
    "spectr", spectr, paths=None, drafting="iid",
    node_form="K-SEQ: accept x_j w.p. min(1, p/(rho q)) with the smallest valid rho",
    paper="Sun et al., SpecTr, NeurIPS 2023, arXiv 2310.15141",
    summary="SpecTr K-SEQ node by node on the token tree")
