"""Node-budget LP for single-path verifiers (Thomas & Pal, arXiv 2602.16961, Thm 3.3).

For a draft q, target p and block length L, let the verifier's output block be (X^tau, Y) and, for
every sequence s with 1 <= |s| <= L+1,

    D(s) = P(the output block has length >= |s| and starts with s),
    M(s) = sum_a D(s, a) = P(tau >= |s| and X^{|s|} = s)          (M(empty) = 1).

Validity (the block followed by target sampling has law p(y^{L+1})) holds iff every marginal
matches: P(first j tokens = s) = (p(s) - M(s)) + M(s). Writing E(s) = D(s) - M(s) >= 0 for the
probability that the block is exactly s, the completion recursion of
[`spectheory.engine.analysis`][spectheory.engine.analysis] gives E(s, a) = p(a|s) M(s) - M(s, a), i.e. the LP

    maximise   sum_{1 <= |s| <= L+1} D(s)                      ( = E[tau + 1] )
    subject to D(s, a) = p(a|s) M(s)   for 0 <= |s| <= L, every a   (target matching)
               M(s) <= q(s)            for 1 <= |s| <= L            (q(s) = q's PATH probability
                                                                     of s: tau >= |s| and
                                                                     X^|s| = s needs the draft
                                                                     to start with s)
               M(s) <= D(s)            for 1 <= |s| <= L            (E(s) >= 0)
               D >= 0,                 M(empty) = 1.

This restates the theorem's LP, checked here by the derivation above (it is exactly "E(s) >= 0 and
marginals of the completed output equal p's") and numerically: its optimum equals block
verification's E[tau + 1] from [`analyze`][spectheory.engine.analysis.analyze] (tests/test_lp_node_budget.py).
Every valid verifier, whatever it observes, gives a feasible point (its D, M), so the optimum bounds
all of them.

Closed form. Substituting D(s, a) = p(a|s) M(s) leaves: maximise sum_{1<=|s|<=L} M(s) subject to
0 <= M(s) <= min(q(s), p(a|s^-) M(s^-)). The objective is increasing and a larger parent only
loosens its children, so the pointwise-largest feasible point

    M*(s) = min(q(s), p(s_last | s^-) M*(s^-)),   M*(empty) = 1

is optimal; on the paper's example (p = (1/3, 2/3), q = (2/3, 1/3), L = 2) it gives E[tau + 1] = 1 +
11/9 = 20/9. A matching dual is built backwards: with g(s) = 1 + sum_a p(a|s) beta(s, a) (beta = 0
below depth L), put alpha(s) = g(s), beta(s) = 0 where M*(s) = q(s) and beta(s) = g(s), alpha(s) = 0
otherwise; the equality rows get y(s, a) = 1 + beta(s, a) (1 at depth L+1). Complementary slackness
holds by construction, and
[`SparseLP.check_certificate`][spectheory.lp.sparse.SparseLP.check_certificate] verifies the pair
exactly in rationals.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from spectheory.inputs.instances import Instance

from ._guards import EXACT_SOLVERS, FLOAT_SOLVERS, check_common
from .result import LPError, LPResult
from .sparse import SparseLP, Timer, check_lp_size, concat_blocks
from .trust import Bound, _tables, checked, single_path_bounds


def node_budget_size(V: int, L: int) -> tuple[int, int]:
    """(variables, nonzeros) of the node-budget LP: sum_{j=1}^{L+1} V^j variables."""
    n = sum(V**j for j in range(1, L + 2))
    nnz = V ** (L + 1) * V + 2 * sum(V**j * (V + 1) for j in range(1, L + 1))
    return n, nnz


def build_node_budget(instance: Instance, exact: bool = False, limit: int | None = None):
    """The node-budget LP as a [`SparseLP`][spectheory.lp.sparse.SparseLP] over the variables D
    (levels 1..L+1, each in lexicographic order, level j at offset sum_{i<j} V^i - 1); also returns
    (p_levels, Q, off)."""
    V, L = instance.vocab_size, instance.block_length
    n, nnz = node_budget_size(V, L)
    check_lp_size(n, nnz, "node-budget LP", limit, "exact" if exact else "float",
                  f"sum_(j=1..L+1) V^j with V = {V}, L = {L}")
    p_levels, Q = _tables(instance, exact)
    off = {1: 0}
    for j in range(1, L + 1):
        off[j + 1] = off[j] + V**j
    one = Fraction(1) if exact else 1.0
    eq_blocks, ub_blocks = [], []
    # target matching, depth 0: D(a) = p(a) * M(empty) = p(a)
    eq_blocks.append((np.arange(V), off[1] + np.arange(V),
                      np.full(V, one, dtype=object if exact else np.float64), p_levels[0][0]))
    for j in range(1, L + 1):
        m = V ** (j + 1)  # rows (s, a) with |s| = j
        t = np.repeat(np.arange(m), V)  # child (s, a)
        b = np.tile(np.arange(V), m)  # sibling (s, b) summed into M(s)
        parent = t // V
        cols = off[j + 1] + parent * V + b
        pflat = p_levels[j].reshape(-1)[t]
        vals = (t % V == b).astype(np.int64) - pflat
        eq_blocks.append((t, cols, vals, np.zeros(m, dtype=object) * one if exact
                          else np.zeros(m)))
        # M(s) <= q(s) and M(s) - D(s) <= 0 for |s| = j
        k = V**j
        s = np.repeat(np.arange(k), V)
        child = off[j + 1] + s * V + np.tile(np.arange(V), k)
        ones = np.full(k * V, one, dtype=object if exact else np.float64)
        ub_blocks.append((s, child, ones, Q[j]))
        zero_b = np.zeros(k, dtype=object) * one if exact else np.zeros(k)
        ub_blocks.append((np.concatenate([s, np.arange(k)]),
                          np.concatenate([child, off[j] + np.arange(k)]),
                          np.concatenate([ones, np.full(k, -one, dtype=ones.dtype)]), zero_b))
    c = np.full(n, one, dtype=object if exact else np.float64)
    # float solves see D(s) / p(s) (D(s) <= p(s), the target's path probability)
    ppath, scale = np.ones(1), []
    for j in range(L + 1):
        ppath = (ppath[:, None] * np.asarray(p_levels[j], dtype=np.float64)).reshape(-1)
        scale.append(ppath)
    lp = SparseLP(n, c, concat_blocks(ub_blocks, exact), concat_blocks(eq_blocks, exact),
                  col_scale=np.concatenate(scale))
    return lp, (p_levels, Q, off)


def greedy_budgets(p_levels, Q, L: int):
    """Closed-form optimum: ``M*[j]`` (V^j entries) for j = 0..L with
    M*(s) = min(q(s), p(a|s^-) M*(s^-)), and ``D*[j]`` = p(a|s^-) M*(s^-) for j = 1..L+1 (lists
    indexed by depth)."""
    M = [Q[0] * 0 + Q[0]]
    D = [None]
    for j in range(1, L + 2):
        reach = (M[j - 1][:, None] * p_levels[j - 1]).reshape(-1)
        D.append(reach)
        if j <= L:
            M.append(np.minimum(Q[j], reach))
    return M, D


def certificate(lp_tables, L: int, V: int):
    """Rational primal point D* and dual point (y, lambda) for the LP of
    [`build_node_budget`][spectheory.lp.node_budget.build_node_budget] (see the module
    docstring)."""
    p_levels, Q, off = lp_tables
    M, D = greedy_budgets(p_levels, Q, L)
    x = np.concatenate([D[j] for j in range(1, L + 2)])
    beta = {L + 1: np.zeros(V ** (L + 1), dtype=object) * Fraction(1)}
    alpha = {}
    for j in range(L, 0, -1):
        g = 1 + (p_levels[j] * beta[j + 1].reshape(V**j, V)).sum(axis=1)
        tight_q = M[j] == Q[j]
        alpha[j] = np.where(tight_q, g, Fraction(0)).astype(object)
        beta[j] = np.where(tight_q, Fraction(0), g).astype(object)
    y = [1 + beta[1]]  # depth-0 rows D(a) = p(a)
    for j in range(1, L + 1):
        y.append(1 + beta[j + 1])
    lam = []
    for j in range(1, L + 1):
        lam += [alpha[j], beta[j]]
    return x, np.concatenate(y), np.concatenate(lam)


def node_budget_lp(instance: Instance, exact: bool = False, solver: str | None = None,
                   limit: int | None = None, form: str = "reduced") -> LPResult:
    """Optimum E[tau + 1] of the node-budget LP (module docstring).

    Float mode solves a sparse LP with ``solver`` ("highs", the default and faster route, or
    "cvxpy"), in ``form`` "reduced" (default: variables M(s), 1 <= |s| <= L, target matching
    substituted; 6 s for V = 4, L = 9) or "full" (the literal LP over all D(s), 1 <= |s| <= L+1;
    much slower in HiGHS at large sizes, same optimum); ``solver="closed-form"`` returns the greedy
    optimum without an LP solve; ``solver="certificate"`` returns the closed-form optimum after
    checking it against a constructed dual, row by row, without building the LP
    ([`certify_node_budget`][spectheory.lp.certificate.certify_node_budget]; float64 with tolerance
    1e-12, or exact rationals; the size guard applies to the full form). Exact mode builds the full
    LP in rationals and returns the optimum only after verifying a primal/dual certificate exactly
    (``solver`` "exact-certificate"); ``solver="sympy"`` instead takes sympy's rational simplex
    primal (tiny instances).

    Every optimum is checked before it is returned ([`checked`][spectheory.lp.trust.checked]): it
    must equal block verification's E[tau + 1] computed in closed form from the instance (within
    `BOUND_TOL` in float, exactly in rationals) and be at most L + 1. The matrix-free
    ``certificate`` route, meant for instances too big to hold twice, is checked against
    1 <= optimum <= L + 1 only (its certificate is the closed form).
    """
    exact = check_common(instance, "node_budget_lp", exact, limit, solver,
                         FLOAT_SOLVERS + ("closed-form", "certificate"),
                         EXACT_SOLVERS + ("certificate",))
    res = _node_budget_lp(instance, exact, solver, limit, form)
    if res.solver == "certificate":
        one = Fraction(1) if isinstance(res.optimum, Fraction) else 1.0
        return checked(res, [Bound("upper", one * (instance.block_length + 1), "L + 1"),
                             Bound("lower", one, "E[tau+1] >= 1")],
                       ["block verification's closed form: the certificate's own primal"])
    bounds = single_path_bounds(instance, exact)
    bounds.append(Bound("upper", bounds[1].value, "block verification's E[tau+1], closed form "
                        "(the LP's optimum, Thomas & Pal Thm 3.3)"))
    return checked(res, bounds)


def _node_budget_lp(instance: Instance, exact: bool, solver: str | None, limit: int | None,
                    form: str) -> LPResult:
    timer = Timer()
    V, L = instance.vocab_size, instance.block_length
    if form not in ("reduced", "full"):
        raise LPError(f"unknown node-budget form {form!r}; choose reduced or full")
    if solver == "certificate":  # matrix-free: no LP is built (lp.certificate)
        from .certificate import certify_node_budget

        n, nnz = node_budget_size(V, L)
        if limit is not None:  # the instance itself holds V^(L+1) entries: no default guard
            check_lp_size(n, nnz, "node-budget LP (certificate)", limit,
                          "exact" if exact else "float", f"sum_(j=1..L+1) V^j with V = {V}, L = {L}")
        cert = certify_node_budget(instance, exact)
        if not cert.certified:
            raise LPError(f"node-budget certificate failed: {cert.summary()}")
        rows = n + 2 * (n - V ** (L + 1))
        return LPResult("node-budget", 1, cert.primal_objective, "certificate", "optimal", n,
                        rows, timer.seconds, {"form": "full", "certificate": cert.to_json()})
    if exact or form == "full":
        lp, tables = build_node_budget(instance, exact, limit)
    else:
        lp, tables = build_node_budget_reduced(instance, exact, limit)
    info = {"nonzeros": lp.nonzeros, "form": "full" if exact else form}
    if exact:
        if solver == "sympy":
            _, opt = lp.solve_sympy()
            name = "sympy"
        else:
            if solver not in (None, "exact-certificate"):
                raise LPError(f"solver {solver!r} is not an exact route; use "
                              "exact-certificate or sympy")
            opt = lp.check_certificate(*certificate(tables, L, V))
            name = "exact-certificate"
        return LPResult("node-budget", 1, opt, name, "optimal", lp.n, lp.constraints,
                        timer.seconds, info)
    if solver == "closed-form":
        p_levels, Q, _ = tables
        M, _ = greedy_budgets(p_levels, Q, L)
        opt = 1.0 + float(sum(m.sum() for m in M[1:]))
        return LPResult("node-budget", 1, opt, "closed-form", "optimal", lp.n, lp.constraints,
                        timer.seconds, info)
    _, opt, status, name = lp.solve(solver)
    info["float_certificate"] = lp.last_certificate
    return LPResult("node-budget", 1, opt, name, status, lp.n, lp.constraints, timer.seconds,
                    info)


def build_node_budget_reduced(instance: Instance, exact: bool = False, limit: int | None = None):
    """The same LP with the target-matching equalities substituted: variables M(s) for
    1 <= |s| <= L only (D(s, a) = p(a|s) M(s) is implied), rows M(s) <= q(s) and
    M(s, a) - p(a|s) M(s) <= 0 (M(empty) = 1, so M(a) <= p(a) at depth 1), objective
    1 + sum M(s). About V/(V-1) V^(L-1) times fewer variables than the full form; same optimum.
    Returns (lp, (p_levels, Q, moff)) with depth-j variables at offset moff[j]."""
    V, L = instance.vocab_size, instance.block_length
    n = sum(V**j for j in range(1, L + 1))
    check_lp_size(n, 3 * n, "node-budget LP (reduced form)", limit,
                  "exact" if exact else "float", f"sum_(j=1..L) V^j with V = {V}, L = {L}")
    p_levels, Q = _tables(instance, exact)
    moff = {1: 0}
    for j in range(1, L):
        moff[j + 1] = moff[j] + V**j
    one = Fraction(1) if exact else 1.0
    dt = object if exact else np.float64
    blocks = [(np.arange(n), np.arange(n), np.full(n, one, dtype=dt),
               np.concatenate([Q[j] for j in range(1, L + 1)]))]
    # depth 1: M(a) <= p(a)
    blocks.append((np.arange(V), np.arange(V), np.full(V, one, dtype=dt), p_levels[0][0]))
    for j in range(1, L):
        k = V ** (j + 1)
        t = np.arange(k)
        rows = np.concatenate([t, t])
        cols = np.concatenate([moff[j + 1] + t, moff[j] + t // V])
        vals = np.concatenate([np.full(k, one, dtype=dt), -p_levels[j].reshape(-1)])
        blocks.append((rows, cols, vals, np.zeros(k, dtype=dt) * one))
    ppath, scale = np.ones(1), []
    for j in range(L):
        ppath = (ppath[:, None] * np.asarray(p_levels[j], dtype=np.float64)).reshape(-1)
        scale.append(ppath)
    c = np.full(n, one, dtype=dt)
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, dt), np.zeros(0, dt))
    lp = SparseLP(n, c, concat_blocks(blocks, exact), empty, offset=one,
                  col_scale=np.concatenate(scale))
    return lp, (p_levels, Q, moff)
