"""Full-knowledge coupling bound (for figures): the best coupling of draft and target sequences.

If one could couple the draft X^L ~ q and the target Y^{L+1} ~ p freely (no verifier can: it sees
only the draft), the expected common prefix length is at most

    sum_{i=1}^{L} P(X^i = Y^i) <= sum_{i=1}^{L} sum_{x^i} min(q(x^i), p(x^i)),

since P(X^i = Y^i = x^i) <= min(q(x^i), p(x^i)); the bound is attained (couple the agreement masses
m(x^i) = min(q, p) level by level: the mass that stops agreeing below x^i can always be paired
off-diagonal, because the draft's and the target's leftovers q - m and p - m live on disjoint
children). In block-efficiency units the bound is 1 + that sum: 21/9 = 1 + 12/9 on the two-token
example p = (1/3, 2/3), q = (2/3, 1/3), L = 2. [`coupling_lp`][spectheory.lp.coupling.coupling_lp]
solves the coupling LP itself on tiny instances, which checks the attainment numerically.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from spectheory.inputs.instances import Instance

from .node_budget import _tables
from ._guards import check_common
from .result import LPResult
from .sparse import SparseLP, Timer, check_lp_size, concat_blocks
from .trust import Bound, checked, single_path_bounds


def _target_paths(p_levels, L: int, exact: bool):
    P = [np.array([Fraction(1)], dtype=object) if exact else np.ones(1)]
    for j in range(L + 1):
        P.append((P[-1][:, None] * p_levels[j]).reshape(-1))
    return P


def coupling_bound(instance: Instance, exact: bool = False, limit: int | None = None) -> LPResult:
    """1 + sum_{i=1}^{L} sum_{x^i} min(q(x^i), p(x^i)) (exact Fraction when ``exact``)."""
    timer = Timer()
    exact = check_common(instance, "coupling_bound", exact, limit)
    V, L = instance.vocab_size, instance.block_length
    n = sum(V**j for j in range(1, L + 1))
    check_lp_size(n, n, "coupling bound", limit, "exact" if exact else "float",
                  f"sum_(i=1..L) V^i with V = {V}, L = {L}")
    p_levels, Q = _tables(instance, exact)
    P = _target_paths(p_levels, L, exact)
    total = Fraction(1) if exact else 1.0
    for i in range(1, L + 1):
        total = total + np.minimum(Q[i], P[i]).sum()
    opt = total if exact else float(total)
    # checked (spectheory.lp.trust): at most L + 1, at least block verification's E[tau+1]
    return checked(LPResult("coupling", 1, opt, "closed-form", "optimal", n, 0, timer.seconds),
                   single_path_bounds(instance, exact))


def coupling_lp(instance: Instance, exact: bool = False, limit: int | None = 200_000) -> LPResult:
    """The coupling LP itself: variables pi(x, y) for x in V^L, y in V^{L+1} (V^{2L+1} of them),
    marginals q and p, objective E[1 + common prefix length of x and y]. Tiny instances only."""
    timer = Timer()
    exact = check_common(instance, "coupling_lp", exact, limit)
    V, L = instance.vocab_size, instance.block_length
    nx, ny = V**L, V ** (L + 1)
    n = nx * ny
    check_lp_size(n, 2 * n, "coupling LP", limit, "exact" if exact else "float",
                  f"V^(2L+1) = {V}^{2 * L + 1}")
    p_levels, Q = _tables(instance, exact)
    P = _target_paths(p_levels, L, exact)
    dt = object if exact else np.float64
    one = Fraction(1) if exact else 1.0
    x = np.repeat(np.arange(nx), ny)
    y = np.tile(np.arange(ny), nx)
    ones = np.full(n, one, dtype=dt)
    eq = [(x, np.arange(n), ones, Q[L]), (y, np.arange(n), ones, P[L + 1])]
    cp = np.zeros(n, dtype=np.int64)
    for i in range(1, L + 1):
        cp += (x // V ** (L - i) == y // V ** (L + 1 - i))
    c = cp.astype(object) * one if exact else cp.astype(np.float64)
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, dt), np.zeros(0, dt))
    # float solves see pi(x, y) / min(q(x), p(y)), a bound of pi (sparse.SparseLP.upper_bounds)
    scale = np.minimum(np.asarray(Q[L], dtype=np.float64)[x],
                       np.asarray(P[L + 1], dtype=np.float64)[y])
    lp = SparseLP(n, c, empty, concat_blocks(eq, exact), offset=one, col_scale=scale)
    if exact:
        from .sparse import solve_exact_via_highs

        opt, _ = solve_exact_via_highs(lp, sympy_primal=False)
        res = LPResult("coupling", 1, opt, "exact-certificate", "optimal", n, lp.constraints,
                       timer.seconds)
    else:
        _, opt, status, name = lp.solve()
        res = LPResult("coupling", 1, opt, name, status, n, lp.constraints, timer.seconds,
                       {"float_certificate": lp.last_certificate})
    # checked (spectheory.lp.trust): at most the closed-form bound (P(X^i = Y^i = x^i) <=
    # min(q, p)) and L + 1, at least block verification's E[tau+1]
    return checked(res, single_path_bounds(instance, exact) + [
        Bound("upper", coupling_bound(instance, exact).optimum,
              "sum_i sum_x min(q(x^i), p(x^i)) + 1, closed form")])
