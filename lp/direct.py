"""Direct verifier LP: the best valid K-path verifier, by brute force over randomised maps.

Drafting (``drafting="iid"``, the default): K paths X_1..X_K of length L drawn i.i.d. from q (with
replacement, duplicates allowed); ``drafting="norep"``: the first tokens drawn without replacement
(the ``norep`` scheme of [`spectheory.engine.joint`][spectheory.engine.joint]); ``drafting="hub"``:
SpecHub's two paths, the draft's most probable first token a and one companion (K <= 2, the
``hub`` scheme of [`spectheory.engine.joint`][spectheory.engine.joint]), so that
``direct_lp(instance, 2, drafting="hub")`` bounds every valid verifier of SpecHub's drafts (at L =
1 SpecHub attains it). A K-path verifier is any randomised map from the drafted paths to an output
block b = (y^i, a): a prefix y^i (0 <= i <= L) of one of the drafted paths followed by one token a
(for i = L it is the bonus token). Its law is the table z(omega, b) = P(drafts = omega, output =
b) >= 0 with sum_b z(omega, b) = P(omega).

Validity (Sun et al., arXiv 2403.10444, section 2): the block followed by target sampling up to
length L+1 must have the target law,

    sum_b E(b) p(y_{|b|+1..L+1} | b) [b is a prefix of y] = p(y)   for every y in V^{L+1},
    E(b) = sum_omega z(omega, b)   (the law of the emitted block),

and the objective is E[tau + 1] = sum_b |b| E(b). This LP uses no structure of any verifier, so
(for K = 1) its optimum equalling the node-budget LP's checks the theorem that block verification
is optimal among all valid verifiers, including those that read off-path probabilities (Sun et
al.; Thomas & Pal, arXiv 2602.16961). For K >= 2 it is the true K-path optimum that bounds every
multi-path verifier under this drafting scheme.

Reduction used: the verifier may depend on the order of the paths, but averaging a solution over
permutations of the K paths keeps it feasible with the same value, so it suffices to optimise over
multisets of paths (outcome probability: multinomial coefficient times the product of q(X_k); under
``norep`` and ``hub``, which are not exchangeable, the ordered outcomes with one multiset are
merged: a verifier of the merged outcome splits back in proportion to their probabilities);
``details["ordered_outcomes"]`` reports V^(LK), the number of ordered draft outcomes.
Size: variables = sum over multisets of V * (number of distinct prefixes of its paths, at most
1 + K L), plus sum_{j=1}^{L+1} V^j block-law variables.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb, factorial

import numpy as np

from spectheory.runtime.errors import SpectheoryError
from spectheory.engine.plan import MAX_PATHS
from spectheory.inputs.instances import Instance
from spectheory.registry import check_drafting_paths

from .node_budget import _tables
from ._guards import check_common, check_flag, check_instance, check_paths
from .result import LPError, LPResult
from .sparse import SparseLP, Timer, check_lp_size, concat_blocks, solve_exact_via_highs
from .trust import checked, monotone_bound, paths_bounds

DRAFTING = ("iid", "norep", "hub")


def direct_size(V: int, L: int, K: int) -> tuple[int, int]:
    """Upper bounds (variables, nonzeros) of the direct LP, computed before any enumeration."""
    outcomes = comb(V**L + K - 1, K)
    z = outcomes * V * (1 + K * L)
    blocks = sum(V**j for j in range(1, L + 2))
    return z + blocks, 2 * z + blocks + (L + 1) * V ** (L + 1)


def _outcomes(N: int, K: int, qpath, exact: bool):
    """Multisets of K path indices (sorted tuples) with positive probability, and their
    probabilities (multinomial coefficient x product of path probabilities)."""
    support = [i for i in range(N) if qpath[i] != 0]
    combos = np.array(list(itertools.combinations_with_replacement(support, K)),
                      dtype=np.int64).reshape(-1, K)
    prob = np.ones(len(combos), dtype=object) if exact else np.ones(len(combos))
    if exact:
        prob[:] = [Fraction(1)] * len(combos)
    for k in range(K):
        prob = prob * qpath[combos[:, k]]
    # multinomial coefficient K! / prod(multiplicities!)
    coef = np.full(len(combos), factorial(K), dtype=np.int64)
    for k in range(1, K):
        # run length of equal entries ending at k: divide by it (builds prod of m!)
        run = np.ones(len(combos), dtype=np.int64)
        for j in range(k - 1, -1, -1):
            same = np.all(combos[:, j:k + 1] == combos[:, k:k + 1], axis=1)
            run += same
        coef //= np.where(run > 1, run, 1)
    # coef now K!/prod(m!) computed incrementally (m! = prod of run lengths 1..m)
    prob = prob * (coef.astype(object) if exact else coef)
    return combos, prob


def _outcomes_norep(N: int, K: int, L: int, V: int, qpath, qroot, exact: bool):
    """Root-without-replacement drafting (Jeon et al., arXiv 2402.14160; the ``norep`` scheme of
    [`spectheory.engine.joint`][spectheory.engine.joint]): path k's first token is drawn from q(.|c)
    without the first tokens of paths 1..k-1 (renormalised), the rest autoregressively; if q(.|c)
    has only m < K tokens of positive probability, paths m+1..K repeat path 1. Ordered outcomes are
    enumerated (N^K of them) and merged into multisets (the verifier may be symmetrised, as for
    iid)."""
    from collections import defaultdict

    m = sum(1 for v in qroot if v != 0)
    kk = min(K, m)
    zero = Fraction(0) if exact else 0.0
    acc = defaultdict(lambda: zero)
    support = [x for x in range(N) if qpath[x] != 0]
    for head in itertools.product(support, repeat=kk):
        firsts = [x // V ** (L - 1) for x in head]
        if len(set(firsts)) < kk:
            continue
        prob = Fraction(1) if exact else 1.0
        left = set(range(V))
        for x, f in zip(head, firsts):  # 1 - q(used) summed over the tokens left (no
            prob = prob * qpath[x] / sum((qroot[v] for v in left), zero)  # cancellation)
            left.discard(f)
        acc[tuple(sorted(head + (head[0],) * (K - kk)))] += prob
    keys = sorted(acc)
    combos = np.array(keys, dtype=np.int64).reshape(-1, K)
    prob = np.empty(len(keys), dtype=object) if exact else np.empty(len(keys))
    prob[:] = [acc[k] for k in keys]
    return combos, prob


def _outcomes_hub(K: int, L: int, V: int, qpath, qroot, exact: bool):
    """SpecHub's drafting (the ``hub`` scheme of [`spectheory.engine.joint`][spectheory.engine.joint], K
    <= 2): the ordered outcomes of positive probability, their probabilities from
    [`draft_weight`][spectheory.engine.joint.draft_weight] (one copy of the scheme's law), merged into
    multisets."""
    from collections import defaultdict

    from spectheory.engine.joint import draft_weight

    N = V**L
    support = np.array([x for x in range(N) if qpath[x] != 0], dtype=np.int64)
    seq = np.array(list(itertools.product(support, repeat=K)), dtype=np.int64).reshape(-1, K)
    qpath, qroot = np.asarray(qpath), np.asarray(qroot)
    first = np.arange(N) // V ** (L - 1)
    zero = Fraction(0) if exact else 0.0
    tail = np.array([qpath[x] / qroot[first[x]] if qroot[first[x]] != 0 else zero
                     for x in range(N)], dtype=object if exact else np.float64)
    weight = draft_weight(seq, "hub", qpath, qroot, tail, L, V)
    acc = defaultdict(lambda: zero)
    for row, w in zip(seq, weight):
        if w != 0:
            acc[tuple(sorted(int(x) for x in row))] += w
    keys = sorted(acc)
    combos = np.array(keys, dtype=np.int64).reshape(-1, K)
    prob = np.empty(len(keys), dtype=object) if exact else np.empty(len(keys))
    prob[:] = [acc[k] for k in keys]
    return combos, prob


def build_direct(instance: Instance, paths: int = 1, exact: bool = False,
                 drafting: str = "iid", limit: int | None = None, sympy: bool = False):
    check_instance(instance, "direct LP")
    K = check_paths(paths, MAX_PATHS)
    V, L = instance.vocab_size, instance.block_length
    if not isinstance(drafting, str) or drafting not in DRAFTING:
        raise LPError(f"unknown drafting scheme {drafting!r}; choose from {', '.join(DRAFTING)}")
    try:
        check_drafting_paths(drafting, K)
    except SpectheoryError as exc:
        raise LPError(str(exc)) from None
    n_est, nnz_est = direct_size(V, L, K)
    mode = "sympy" if sympy else ("exact" if exact else "float")
    check_lp_size(n_est, nnz_est, f"direct LP with K = {K}", limit, mode,
                  f"C(V^L + K - 1, K) x V(1 + KL) + sum_j V^j with V = {V}, L = {L}")
    p_levels, Q = _tables(instance, exact)
    N = V**L
    combos, prob = draft_outcomes(Q, V, L, K, drafting, exact)
    lp, info = build_direct_outcomes(instance, combos, prob, exact, p_levels)
    info.update({"ordered_outcomes": N**K, "drafting": drafting})
    return lp, info


def draft_outcomes(Q, V: int, L: int, K: int, drafting: str, exact: bool, merge: bool = True):
    """The joint draft outcomes of K paths under a drafting scheme and their probabilities, from
    the draft's path probabilities ``Q`` (as from `spectheory.lp.node_budget._tables`): multisets
    of path indices [n, K], merged by their set of distinct paths (`merge_outcomes`) unless
    ``merge`` is False."""
    if drafting == "iid":
        combos, prob = _outcomes(V**L, K, Q[L], exact)
    elif drafting == "hub":
        combos, prob = _outcomes_hub(K, L, V, Q[L], Q[1], exact)
    else:
        combos, prob = _outcomes_norep(V**L, K, L, V, Q[L], Q[1], exact)
    if not exact and not abs(float(np.sum(prob)) - 1.0) <= 1e-9:  # path probabilities that
        raise LPError(  # underflowed (5e-324 x 0.5 = 0) dropped outcomes: an empty LP crashed
            f"the {drafting} draft outcomes' probabilities sum to {float(np.sum(prob)):.6g}, not "
            "1, in float64 (a draft probability near the subnormal range underflows along a "
            "path); use --exact")
    return merge_outcomes(combos, prob, exact) if merge else (combos, prob)


def merge_outcomes(combos: np.ndarray, prob, exact: bool):
    """Merge the outcomes [n, K] that draft the same set of distinct paths, adding their
    probabilities; a merged outcome is its distinct paths, sorted, padded to K with the smallest
    (its set of drafted prefixes is unchanged).

    Exact: the direct LP (`build_direct_outcomes`) and the selection LP see an outcome only
    through its distinct paths, and a solution for a merged outcome splits back over its members
    in proportion to their probabilities. It keeps the LP small for many paths (K = 20 i.i.d.
    paths over V^L = 4 sequences: 1,771 multisets, 15 sets) and removes most of the tiny
    multinomial weights (q(x)^K) that made badly scaled rows."""
    combos = np.sort(np.asarray(combos, dtype=np.int64), axis=1)
    if combos.shape[1] > 1:
        repeat = np.zeros(combos.shape, dtype=bool)
        repeat[:, 1:] = combos[:, 1:] == combos[:, :-1]
        combos = np.sort(np.where(repeat, combos[:, :1], combos), axis=1)
    keys, inverse = np.unique(combos, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    if exact:
        total = np.empty(len(keys), dtype=object)
        total[:] = [Fraction(0)] * len(keys)
        np.add.at(total, inverse, np.asarray(prob, dtype=object))
    else:
        total = np.bincount(inverse, weights=np.asarray(prob, dtype=np.float64),
                            minlength=len(keys))
    return keys.reshape(-1, combos.shape[1]), total


def build_direct_outcomes(instance: Instance, combos: np.ndarray, prob, exact: bool = False,
                          p_levels=None, lengths=None):
    """The direct LP over explicit draft outcomes: ``combos`` [n, K] are the K drafted paths of
    each outcome as sequence indices in V**L (any drafting scheme, a draft tree's leaf paths
    included), ``prob`` [n] their probabilities (summing to 1). The verifier may output any
    drafted prefix of an outcome followed by one token (module docstring). ``lengths`` [n, K]
    (optional, default L): path k of outcome n has only its first ``lengths[n, k]`` tokens
    drafted (a draft tree with leaves at different depths); its index is read as that prefix."""
    V, L = instance.vocab_size, instance.block_length
    if p_levels is None:
        p_levels, _ = _tables(instance, exact)
    combos = np.asarray(combos, dtype=np.int64)
    n_out = len(combos)
    # global prefix ids: depth i prefix of path x is x // V^(L-i); id = pre_off[i] + index
    pre_off = np.cumsum([0] + [V**i for i in range(L + 1)])
    pid = np.stack([pre_off[i] + combos // V ** (L - i) for i in range(L + 1)], axis=2)
    if lengths is not None:  # no prefixes past a path's length (the root id 0 stands in)
        pid = np.where(np.arange(L + 1) <= np.asarray(lengths)[:, :, None], pid, 0)
    pid = np.sort(pid.reshape(n_out, -1), axis=1)
    keep = np.ones(pid.shape, dtype=bool)
    keep[:, 1:] = pid[:, 1:] != pid[:, :-1]
    out_idx, col = np.nonzero(keep)
    uniq = pid[out_idx, col]  # one row per (outcome, distinct prefix)
    depth = np.searchsorted(pre_off, uniq, side="right") - 1
    pindex = uniq - pre_off[depth]
    # block ids (D layout): length j = depth + 1 at offset sum_{i=1}^{j-1} V^i
    blk_off = np.cumsum([0, 0] + [V**j for j in range(1, L + 2)])  # blk_off[j] for j >= 1
    n_z = len(uniq) * V
    z_out = np.repeat(out_idx, V)
    z_blk = np.repeat(blk_off[depth + 1] + pindex * V, V) + np.tile(np.arange(V), len(uniq))
    n_blocks = int(blk_off[L + 2])
    n = n_z + n_blocks
    one = Fraction(1) if exact else 1.0
    dt = object if exact else np.float64
    ones_z = np.full(n_z, one, dtype=dt)
    eq = []
    eq.append((z_out, np.arange(n_z), ones_z, prob))  # sum_b z(omega, b) = P(omega)
    # E(b) - sum_omega z(omega, b) = 0
    eq.append((np.concatenate([np.arange(n_blocks), z_blk]),
               np.concatenate([n_z + np.arange(n_blocks), np.arange(n_z)]),
               np.concatenate([np.full(n_blocks, one, dtype=dt), -ones_z]),
               np.zeros(n_blocks, dtype=dt) * one))
    # validity: sum_b E(b) p(y after b | b) = p(y), y in V^{L+1}
    rows, cols, vals = [], [], []
    for j in range(1, L + 2):
        cond = np.ones(V**j, dtype=dt) * one
        for d in range(j, L + 1):
            lev = p_levels[d].reshape(V**j, V ** (d - j), V)
            cond = (cond.reshape(V**j, V ** (d - j), 1) * lev).reshape(-1)
        y = np.arange(V ** (L + 1))
        rows.append(y)
        cols.append(n_z + blk_off[j] + y // V ** (L + 1 - j))
        vals.append(cond)
    target = np.ones(1, dtype=dt) * one
    for d in range(L + 1):
        target = (target[:, None] * p_levels[d]).reshape(-1)
    eq.append((np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), target))
    c = np.zeros(n, dtype=dt) * one
    for j in range(1, L + 2):
        c[n_z + blk_off[j]:n_z + blk_off[j + 1]] = j * one
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, dt), np.zeros(0, dt))
    # float solves see z / P(omega) and E(b) / p(b) (both at most 1)
    ppath, scale = np.ones(1), [np.asarray(prob, dtype=np.float64)[z_out]]
    for d in range(L + 1):
        ppath = (ppath[:, None] * np.asarray(p_levels[d], dtype=np.float64)).reshape(-1)
        scale.append(ppath)
    lp = SparseLP(n, c, empty, concat_blocks(eq, exact), col_scale=np.concatenate(scale))
    if exact:
        escale, ep = [prob[z_out]], np.ones(1, dtype=object) * one
        for d in range(L + 1):
            ep = (ep[:, None] * p_levels[d]).reshape(-1)
            escale.append(np.where(ep != 0, ep, one))
        lp.exact_col_scale = np.concatenate(escale)
    info = {"outcomes": n_out, "z_variables": n_z, "nonzeros": lp.nonzeros}
    return lp, info


def direct_lp(instance: Instance, paths: int = 1, exact: bool = False, solver: str | None = None,
              drafting: str = "iid", limit: int | None = None,
              monotone: bool = True) -> LPResult:
    """Optimum E[tau + 1] over all valid K-path verifiers (module docstring).

    Float mode: HiGHS (default) or cvxpy. Exact mode: HiGHS' primal and dual points rounded to
    fractions and verified exactly as a certificate
    ([`solve_exact_via_highs`][spectheory.lp.sparse.solve_exact_via_highs], falling back to sympy's
    rational simplex for the primal); ``solver="sympy"`` uses sympy's primal directly (tiny
    instances). Float solves are returned only with a closed float certificate
    ([`float_certificate`][spectheory.lp.sparse.SparseLP.float_certificate]).

    Every optimum is checked against independent bounds before it is returned
    ([`checked`][spectheory.lp.trust.checked]): L + 1 and the coverage bound above, block
    verification and a registered verifier of the drafting scheme below, and (``monotone``, when
    the LP with K - 1 paths is small) the float optimum with K - 1 paths below. An optimum outside
    them is refused ([`UntrustedLPError`][spectheory.lp.trust.UntrustedLPError]).
    """
    timer = Timer()
    exact = check_common(instance, "direct_lp", exact, limit, solver)
    paths = check_paths(paths, MAX_PATHS)
    monotone = check_flag(monotone, "monotone")
    lp, info = build_direct(instance, paths, exact, drafting, limit, sympy=exact and
                            solver == "sympy")
    if exact:
        if solver == "sympy":
            _, opt = lp.solve_sympy()
            how = "sympy"
        else:
            opt, how = solve_exact_via_highs(lp)
        info["certificate"] = how
        res = LPResult("direct", int(paths), opt, "sympy" if how == "sympy" else
                       "exact-certificate", "optimal", lp.n, lp.constraints, timer.seconds, info)
    else:
        _, opt, status, name = lp.solve(solver)
        info["float_certificate"] = lp.last_certificate
        res = LPResult("direct", int(paths), opt, name, status, lp.n, lp.constraints,
                       timer.seconds, info)
    K = int(paths)
    skipped: list = []
    bounds = paths_bounds(instance, K, drafting, exact, "direct", skipped)
    if monotone:
        V, L = instance.vocab_size, instance.block_length
        bounds += monotone_bound(
            lambda: direct_lp(instance, K - 1, drafting=drafting, limit=limit, monotone=False),
            K, direct_size(V, L, K - 1)[0] if K > 1 else 0, skipped)
    return checked(res, bounds, skipped)
