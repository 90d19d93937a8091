"""Compact node-budget relaxation for K i.i.d. draft paths, and the L = 1 closed form.

Compact LP (an upper bound on the best valid K-path verifier). Take the node-budget LP of
[`spectheory.lp.node_budget`][spectheory.lp.node_budget] in its reduced form (variables M(s), 1
<= |s| <= L, with target matching substituted: M(s, a) <= p(a|s) M(s)) and replace "M(s) <= q(s)"
by coverage constraints: for every depth j and every set S of depth-j sequences,

    sum_{s in S} M(s) <= f(S) = 1 - (1 - q(S))^K,

the probability that at least one of K i.i.d. paths starts in S (any verifier that goes past a
sequence of S needs a drafted path through it). Exponentially many sets, so they are generated
lazily: start from the singletons, solve, separate, add, repeat.

Separation is exact and takes a sort per depth: f(S) = g(q(S)) with g(t) = 1 - (1 - t)^K concave,
so g(t) = min over lambda of (a_lambda + lambda t) and

    max_S [M(S) - g(q(S))] = max_lambda [ -a_lambda + max_S sum_{s in S} (M(s) - lambda q(s)) ],

whose inner maximum is the threshold set {s : M(s) / q(s) > lambda}. So the most violated set is
a prefix of the sequences sorted by M(s) / q(s) (decreasing); all depth-j prefixes are scanned.

The relaxation is an upper bound on the direct K-path LP
([`direct_lp`][spectheory.lp.direct.direct_lp]). It is tight for K = 1 (coverage of singletons is
M(s) <= q(s) and sets add nothing) and for L = 1, where both equal the closed form of Hu et al.
(arXiv 2502.18779, "Towards optimal multi-draft speculative decoding", the dual of the
optimal-transport LP):

    alpha* = min_{H subset of vocab} [ p(H) + 1 - q(H)^K ],      E[tau + 1] = 1 + alpha*,

(1 - q(H)^K is the chance that some draft falls outside H). By the same concavity argument the
minimising H is a lower threshold set of p(a)/q(a), so V + 1 candidate sets suffice
([`multidraft_acceptance_L1`][spectheory.lp.multipath.multidraft_acceptance_L1]). With L >= 2 and
K >= 2 the relaxation can exceed the direct LP: the coverage constraints only see one depth at a
time, not how the K paths share prefixes.
"""

from __future__ import annotations

import numpy as np

from spectheory.bounds import optimal_acceptance
from spectheory.runtime.errors import InstanceError, is_integer
from spectheory.inputs.instances import Instance

from .node_budget import build_node_budget_reduced
from ._guards import check_common, check_paths
from .result import LPError, LPResult
from .sparse import SparseLP, Timer
from .trust import checked, paths_bounds
from spectheory.runtime.limits import shown as _repr_cut

#: A coverage constraint counts as violated above this (absolute, in probability units).
SEPARATION_TOL = 1e-8
MAX_ROUNDS = 200


def coverage(qS, K: int):
    """f = 1 - (1 - q(S))^K (works on arrays and Fractions)."""
    return 1 - (1 - qS) ** K


def separate(M, q, K: int, tol: float = SEPARATION_TOL, max_sets: int = 4):
    """Most violated coverage sets at one depth: indices of the threshold sets (sorted by
    M(s)/q(s), decreasing) whose violation M(S) - f(S) exceeds ``tol``, the worst first."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q > 0, M / np.where(q > 0, q, 1), np.where(M > 0, np.inf, 0))
    order = np.argsort(-ratio, kind="stable")
    cm = np.cumsum(M[order])
    cq = np.minimum(np.cumsum(q[order]), 1.0)
    viol = cm - coverage(cq, K)
    viol[-1] = min(viol[-1], cm[-1] - 1)  # the full level: f = 1 exactly
    cand = np.flatnonzero(viol > tol)
    if len(cand) == 0:
        return []
    best = cand[np.argsort(-viol[cand])][:max_sets]
    return [(order[:k + 1], float(viol[k])) for k in best]


def multipath_lp(instance: Instance, paths: int = 2, solver: str | None = None,
                 limit: int | None = None, tol: float = SEPARATION_TOL,
                 max_rounds: int = MAX_ROUNDS, cuts_per_depth: int = 3,
                 progress: bool = False) -> LPResult:
    """Optimum E[tau + 1] of the compact K-path relaxation (module docstring), float64, by
    cutting planes, stopped when no coverage constraint is violated by more than ``tol``.

    A violated set S found by [`separate`][spectheory.lp.multipath.separate] at depth j is cut off
    with the tangent of g at t0 = q(S), slope lam = g'(t0), intercept h = g(t0) - lam t0: since g <=
    tangent, M(S') <= h + lam q(S') for EVERY depth-j set S', i.e. sum_s (M(s) - lam q(s))^+ <= h,
    which is written with auxiliary u(s) >= M(s) - lam q(s), u >= 0, sum_s u(s) <= h (only for s
    with p(s) > lam q(s); elsewhere M(s) <= p(s) makes the term 0). The tangent cut is implied by
    the coverage constraints (the relaxation is unchanged) and is tight at S, but it removes a whole
    family of sets at once: adding single-set cuts instead tails off for hundreds of rounds.
    ``details`` reports rounds, tangent cuts and auxiliary variables added.
    """
    timer = Timer()
    check_common(instance, "multipath_lp", False, limit, solver)
    K = check_paths(paths)
    if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, (int, float, np.floating)) \
            or not 0 <= float(tol) <= 1e-2:
        raise LPError(f"multipath LP: tol = {_repr_cut(tol, 40)} must be a number in [0, 1e-2] (how far a "
                      "coverage constraint may be violated when the cutting planes stop)")
    for name, n, hi in (("max_rounds", max_rounds, 100_000), ("cuts_per_depth", cuts_per_depth,
                                                             1_000)):
        if not is_integer(n) \
                or not 1 <= n <= hi:
            raise LPError(f"multipath LP: {name} = {_repr_cut(n, 40)} must be an integer in 1..{hi:,}")
    V, L = instance.vocab_size, instance.block_length
    base, (p_levels, Q, moff) = build_node_budget_reduced(instance, False, limit)
    n0 = base.n
    # the first n0 rows of the ub block are "M(s) <= q(s)" in variable order: make them the
    # singleton coverage constraints M(s) <= 1 - (1 - q(s))^K
    r, col, v, b = base.ub
    b = b.copy()
    b[:n0] = coverage(np.concatenate([Q[j] for j in range(1, L + 1)]), K)
    P = {}
    ppath = np.ones(1)
    for j in range(1, L + 1):
        ppath = (ppath[:, None] * p_levels[j - 1]).reshape(-1)
        P[j] = ppath
    rows, cols, vals, rhs = [r], [col], [v], [b]
    scale = [base.col_scale]
    m, n = len(b), n0
    tangents = {j: [] for j in range(1, L + 1)}
    rounds = 0
    lp = base
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc=f"multipath LP K={K} (cutting-plane rounds)", unit="round", leave=False)
    while True:
        rounds += 1
        if bar is not None:
            bar.update(1)
        lp = SparseLP(n, np.concatenate([base.c, np.zeros(n - n0)]),
                      (np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
                       np.concatenate(rhs)), base.eq, offset=base.offset,
                      col_scale=np.concatenate(scale))
        x, opt, status, name = solved = lp.solve(solver, certify=False)
        new = 0
        for j in range(1, L + 1):
            Mj = x[moff[j]:moff[j] + V**j]
            for S, _ in separate(Mj, Q[j], K, tol, max_sets=cuts_per_depth):
                t0 = min(float(Q[j][S].sum()), 1.0)
                if any(abs(t0 - t) < 1e-9 for t in tangents[j]):
                    continue  # already cut there: what is left is solver tolerance
                tangents[j].append(t0)
                lam = K * (1.0 - t0) ** (K - 1)
                h = float(coverage(t0, K)) - lam * t0
                nodes = np.flatnonzero(P[j] > lam * Q[j])
                k = len(nodes)
                u = n + np.arange(k)
                # M(s) - u(s) <= lam q(s)  and  sum u <= h
                rows.append(np.concatenate([m + np.arange(k), m + np.arange(k),
                                            np.full(k, m + k, dtype=np.int64)]))
                cols.append(np.concatenate([moff[j] + nodes, u, u]))
                vals.append(np.concatenate([np.ones(k), -np.ones(k), np.ones(k)]))
                rhs.append(np.concatenate([lam * Q[j][nodes], [h]]))
                scale.append(np.maximum(P[j][nodes], 1e-300))
                m += k + 1
                n += k
                new += 1
        if bar is not None:
            bar.set_postfix(optimum=f"{opt:.8f}", cuts=sum(len(t) for t in tangents.values()))
        if not new:
            break
        if rounds >= max_rounds:
            if bar is not None:
                bar.close()
            raise LPError(f"multipath LP: separation did not converge in {max_rounds} rounds")
    if bar is not None:
        bar.close()
    # the last round's point satisfies every coverage constraint (within tol), so the optimum
    # of its LP is the relaxation's: that solve is the one certified (re-solved if need be)
    x, opt, status, name = lp.recertify(solver, solved)
    res = LPResult("multipath", K, opt, name, status, lp.n, lp.constraints, timer.seconds,
                   {"rounds": rounds, "tangent_cuts": sum(len(t) for t in tangents.values()),
                    "auxiliary_variables": n - n0, "nonzeros": lp.nonzeros,
                    "float_certificate": lp.last_certificate})
    # checked (spectheory.lp.trust): at most L + 1 and the singleton-coverage bound (the first
    # round's LP), at least block verification and SpecInfer (the relaxation bounds the direct LP)
    skipped: list = []
    return checked(res, paths_bounds(instance, K, "iid", False, "multipath", skipped), skipped)


def multidraft_acceptance_L1(p, q, paths: int):
    """Hu et al.'s optimal acceptance probability for K i.i.d. drafts of one token:
    alpha* = min_H [p(H) + 1 - q(H)^K] over lower threshold sets H of p/q (exact for Fraction
    inputs). Returns (alpha*, H as a sorted tuple of token ids). The one implementation is the
    core's [`optimal_acceptance`][spectheory.bounds.optimal_acceptance]."""
    return optimal_acceptance(p, q, paths, "iid")


def optimal_multidraft_L1(instance: Instance, paths: int = 2, exact: bool = False) -> LPResult:
    """Closed form E[tau + 1] = 1 + alpha* for an L = 1 instance (Hu et al., arXiv 2502.18779), to
    compare with [`direct_lp`][spectheory.lp.direct.direct_lp] /
    [`multipath_lp`][spectheory.lp.multipath.multipath_lp] (they agree for L = 1)."""
    timer = Timer()
    exact = check_common(instance, "optimal_multidraft_L1", exact)
    paths = check_paths(paths)
    if instance.block_length != 1:
        raise InstanceError(f"the closed form is for block length 1, got L = "
                            f"{instance.block_length}")
    inst = instance.to_exact() if exact else instance.to_float()
    p = list(inst.target.level(0)[0])
    q = list(inst.draft.level(0)[0])
    alpha, H = multidraft_acceptance_L1(p, q, paths)
    opt = 1 + alpha if exact else 1.0 + float(alpha)
    res = LPResult("multidraft-L1", int(paths), opt, "closed-form", "optimal",
                   instance.vocab_size, 0, timer.seconds, {"acceptance": alpha, "H": H})
    # checked (spectheory.lp.trust): at most 1 + sum_a min(p(a), 1 - (1 - q(a))^K), at least
    # token (= block) verification's 1 + sum_a min(p(a), q(a))
    skipped: list = []
    return checked(res, paths_bounds(inst, int(paths), "iid", exact, "multidraft-L1", skipped),
                   skipped)
