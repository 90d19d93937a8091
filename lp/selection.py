"""The best "select a path, then block-verify it" multi-path verifier, as one LP.

Thomas & Pal (arXiv 2602.16961) describe a class of K-path verifiers: a selection rule picks one of
the K drafted paths (any randomised function of the drafts), and the selected path is then
verified by block verification (Sun et al., arXiv 2403.10444) against its own law, the *induced*
law Q of the selected path. Every member is valid (the verifier sees one path whose law is Q), and
GBV is the member whose rule takes the lexicographically best path by p/q.

A selection rule acts only through Q: with s(omega, x) = P(drafts = omega, selected path = x),

    Q(x) = sum_omega s(omega, x),   sum_x s(omega, x) = P(omega),   s >= 0, s(omega, x) = 0 unless
    x is one of omega's paths,

a linear image of the rule. Block verification against Q has the efficiency of the node-budget
LP with draft path probabilities Q(s) = sum_{x extends s} Q(x) (Thomas & Pal, Thm 3.3):

    maximise  1 + sum_{1 <= |s| <= L} M(s)
    s.t.      M(s) <= Q(s),  M(a) <= p(a),  M(s a) <= p(a | s) M(s),  M >= 0.

Taking Q as variables through s(omega, x) makes the best member of the class one LP (the node-budget
optimum is concave in Q, the feasible Q convex). As in
[`spectheory.lp.direct`][spectheory.lp.direct] it suffices to optimise over multisets omega of paths
(averaging a rule over permutations of the paths keeps Q). Its optimum lies between GBV's E[tau + 1]
and the direct LP's optimum over all valid K-path verifiers.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from spectheory.engine.plan import MAX_PATHS
from spectheory.inputs.instances import Instance

from .direct import DRAFTING, draft_outcomes
from .node_budget import _tables
from ._guards import check_common, check_flag, check_instance, check_paths
from .result import LPError, LPResult
from .sparse import SparseLP, Timer, check_lp_size, concat_blocks, solve_exact_via_highs
from .trust import checked, monotone_bound, paths_bounds


def selection_size(V: int, L: int, K: int) -> tuple[int, int]:
    """Upper bounds (variables, nonzeros), computed before any enumeration."""
    from math import comb

    s = comb(V**L + K - 1, K) * K
    m = sum(V**j for j in range(1, L + 1))
    return s + m, s * (L + 1) + 3 * m


def build_selection(instance: Instance, paths: int, exact: bool = False,
                    drafting: str = "iid", limit: int | None = None):
    """The selection-rule LP as a [`SparseLP`][spectheory.lp.sparse.SparseLP]; variables s(omega, x)
    for each multiset omega and each distinct path x in it, then M(s) depth by depth."""
    check_instance(instance, "selection LP")
    paths = check_paths(paths, MAX_PATHS)
    if not isinstance(drafting, str) or drafting not in DRAFTING:
        raise LPError(f"unknown drafting scheme {drafting!r}; choose from {', '.join(DRAFTING)}")
    V, L, K = instance.vocab_size, instance.block_length, paths
    n_est, nnz_est = selection_size(V, L, K)
    check_lp_size(n_est, nnz_est, "selection-rule LP", limit, "exact" if exact else "float",
                  f"C(V^L + K - 1, K) K + sum_j V^j with V = {V}, L = {L}, K = {K}")
    p_levels, Q = _tables(instance, exact)
    combos, prob = draft_outcomes(Q, V, L, K, drafting, exact)
    # one variable per (outcome, distinct path)
    sorted_c = np.sort(combos, axis=1)
    keep = np.ones(sorted_c.shape, dtype=bool)
    keep[:, 1:] = sorted_c[:, 1:] != sorted_c[:, :-1]
    out_idx, col = np.nonzero(keep)
    path = sorted_c[out_idx, col]
    n_s = len(path)
    moff = {1: n_s}
    for j in range(1, L):
        moff[j + 1] = moff[j] + V**j
    n = n_s + sum(V**j for j in range(1, L + 1))
    one = Fraction(1) if exact else 1.0
    dt = object if exact else np.float64
    ones_s = np.full(n_s, one, dtype=dt)
    eq = [(out_idx, np.arange(n_s), ones_s, prob)]  # sum_x s(omega, x) = P(omega)
    ub = []
    for j in range(1, L + 1):  # M(s) - sum_{x extends s} Q(x) <= 0
        k = V**j
        node = path // V ** (L - j)
        ub.append((np.concatenate([np.arange(k), node]),
                   np.concatenate([moff[j] + np.arange(k), np.arange(n_s)]),
                   np.concatenate([np.full(k, one, dtype=dt), -ones_s]),
                   np.zeros(k, dtype=dt) * one))
    ub.append((np.arange(V), moff[1] + np.arange(V), np.full(V, one, dtype=dt),
               p_levels[0][0]))  # M(a) <= p(a)
    for j in range(1, L):  # M(s a) - p(a|s) M(s) <= 0
        k = V ** (j + 1)
        t = np.arange(k)
        ub.append((np.concatenate([t, t]),
                   np.concatenate([moff[j + 1] + t, moff[j] + t // V]),
                   np.concatenate([np.full(k, one, dtype=dt), -p_levels[j].reshape(-1)]),
                   np.zeros(k, dtype=dt) * one))
    c = np.zeros(n, dtype=dt) * one
    c[n_s:] = one
    ppath, scale = np.ones(1), [np.asarray(prob, dtype=np.float64)[out_idx]]
    for j in range(L):
        ppath = (ppath[:, None] * np.asarray(p_levels[j], dtype=np.float64)).reshape(-1)
        scale.append(ppath)
    empty_ok = [b for b in ub if len(b[3])]
    lp = SparseLP(n, c, concat_blocks(empty_ok, exact), concat_blocks(eq, exact), offset=one,
                  col_scale=np.concatenate(scale))
    if exact:
        escale, ep = [prob[out_idx]], np.ones(1, dtype=object) * one
        for j in range(L):
            ep = (ep[:, None] * p_levels[j]).reshape(-1)
            escale.append(np.where(ep != 0, ep, one))
        lp.exact_col_scale = np.concatenate(escale)
    info = {"outcomes": len(combos), "selection_variables": n_s, "drafting": drafting,
            "selected_path": path}
    return lp, info


def induced_law(lp_x, info: dict, vocab_size: int, block_length: int):
    """The induced law Q(x) [V^L] of a solution ``lp_x`` of
    [`build_selection`][spectheory.lp.selection.build_selection] (``info`` is its second result: the
    path of each selection variable)."""
    path = info["selected_path"]
    law = np.zeros(vocab_size**block_length,
                   dtype=object if isinstance(lp_x[0], Fraction) else np.float64)
    np.add.at(law, path, lp_x[:len(path)])
    return law


def selection_lp(instance: Instance, paths: int = 2, exact: bool = False,
                 solver: str | None = None, drafting: str = "iid",
                 limit: int | None = None, monotone: bool = True) -> LPResult:
    """Optimum E[tau + 1] of the best "select a path, then block-verify it against its induced law"
    K-path verifier (module docstring). Float: HiGHS (default) or cvxpy; exact: HiGHS' point rounded
    to fractions and verified as a certificate
    ([`solve_exact_via_highs`][spectheory.lp.sparse.solve_exact_via_highs]).
    ``details["induced_law"]`` holds the optimal Q over V^L (float solves),
    ``details[ "selected_path"]`` the path of each selection variable.

    The optimum is checked before it is returned ([`checked`][spectheory.lp.trust.checked]):
    L + 1 and the coverage bound above (the class is below the direct LP), block verification of
    path 1 and (i.i.d.) GBV below, both members of the class, and (``monotone``, when small) the
    float optimum with K - 1 paths below."""
    timer = Timer()
    exact = check_common(instance, "selection_lp", exact, limit, solver,
                         exacts=("exact-certificate",))
    paths = check_paths(paths, MAX_PATHS)
    monotone = check_flag(monotone, "monotone")
    lp, info = build_selection(instance, paths, exact, drafting, limit)
    if exact:
        opt, how = solve_exact_via_highs(lp)
        info["certificate"] = how
        res = LPResult("selection", int(paths), opt, "exact-certificate", "optimal", lp.n,
                       lp.constraints, timer.seconds, info)
    else:
        x, opt, status, name = lp.solve(solver)
        info["induced_law"] = induced_law(np.asarray(x), info, instance.vocab_size,
                                          instance.block_length)
        info["float_certificate"] = lp.last_certificate
        res = LPResult("selection", int(paths), opt, name, status, lp.n, lp.constraints,
                       timer.seconds, info)
    K = int(paths)
    skipped: list = []
    bounds = paths_bounds(instance, K, drafting, exact, "selection", skipped)
    if monotone:
        V, L = instance.vocab_size, instance.block_length
        bounds += monotone_bound(
            lambda: selection_lp(instance, K - 1, drafting=drafting, limit=limit,
                                 monotone=False),
            K, selection_size(V, L, K - 1)[0] if K > 1 else 0, skipped)
    return checked(res, bounds, skipped)


__all__ = ["build_selection", "induced_law", "selection_lp", "selection_size"]
