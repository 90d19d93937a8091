"""Direct verifier LP for a draft tree: the best valid verifier for a tree drafting scheme.

A drafting scheme on a tree shape ([`spectheory.engine.drafttrees`][spectheory.engine.drafttrees]: ``iid``, ``norep`` or
``topk`` children at every node) induces a law over joint draft outcomes omega (a token on every
edge). A verifier is any randomised map from omega to an output block b = (y^i, a): a drafted node
y^i of omega (the root included) followed by one token a. Its law is z(omega, b) >= 0 with sum_b
z(omega, b) = P(omega), and validity is the direct LP's (Sun et al., arXiv 2403.10444, section 2;
[`spectheory.lp.direct`][spectheory.lp.direct]):

    sum_b E(b) p(y_{|b|+1..D+1} | b) [b is a prefix of y] = p(y),  E(b) = sum_omega z(omega, b),

maximising E[tau + 1] = sum_b |b| E(b). The LP is
[`build_direct_outcomes`][spectheory.lp.direct.build_direct_outcomes] on the tree's outcomes, each
given by its K leaf paths with their lengths (a tree may have leaves at different depths; D is the
deepest, and a path of length d offers only its prefixes up to d). Outcomes with the same set of
drafted nodes are merged (their probabilities added): the verifier's output may depend on omega only
through the drafted nodes without loss (averaging a solution over a class keeps it feasible with the
same value). Every tree verifier's E[tau + 1] is at most this optimum; for a chain (K = 1) it equals
the node-budget LP's optimum, block verification; under ``topk`` drafting it is 1 + sum over drafted
nodes v of p(v), which the top-k rule attains (tests, uneven trees included).

Sizes: the outcomes are enumerated (V**E for E drafted nodes under ``iid`` / ``norep``, one under
``topk``), then the LP has sum over merged outcomes of V * (drafted nodes + 1) plus
sum_{j=1}^{D+1} V**j variables.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import numpy as np

from spectheory.runtime.backend import as_index
from spectheory.runtime.errors import SpectheoryError
from spectheory.inputs.instances import Instance
from spectheory.runtime.sizes import check_size
from spectheory.engine.seqtree import levels, sequence_tokens
from spectheory.engine.drafttrees import (_check_drafting, _outcome_weight, _topk_outcome,
                                          tree_shape)

from .direct import build_direct_outcomes
from ._guards import check_common, check_flag
from .result import LPResult
from .sparse import Timer, check_lp_size, solve_exact_via_highs
from .trust import checked, tree_bounds

#: Largest number of joint outcomes enumerated before merging.
MAX_TREE_OUTCOMES = 2**20


def tree_outcomes(instance: Instance, shape, drafting: str = "iid", exact: bool = False,
                  limit: int | None = None, with_lengths: bool = False):
    """Merged joint outcomes of a drafted tree: leaf paths [n, K] as sequence indices in V**D
    (sorted within an outcome) and probabilities [n] (Fractions in exact mode).

    With ``with_lengths`` the result is (paths, lengths, probabilities): ``lengths`` [n, K] the
    depth of each path's leaf, its index read as that prefix padded with token 0 (the form of
    [`build_direct_outcomes`][spectheory.lp.direct.build_direct_outcomes]). A tree whose leaves are
    at different depths needs it (a path shorter than D has no index in V**D of its own). Outcomes
    are merged by their set of drafted nodes, which the paths that are no other path's prefix
    determine."""
    check_common(instance, "tree_outcomes", exact, limit)
    exact = bool(exact)
    with_lengths = check_flag(with_lengths, "with_lengths")
    tree = tree_shape(shape)
    _check_drafting(drafting)
    if not (with_lengths or tree.uniform):
        raise SpectheoryError(f"tree {tree.describe()} has leaves at different depths; its "
                              f"outcomes need with_lengths=True")
    V, D, K, N = instance.vocab_size, tree.height, tree.paths, tree.n_nodes
    q_levels = levels(instance.draft, 0, D, exact)
    leaf = tree.leaf_nodes  # [K, D], -1 past a shallower leaf
    depths = np.array(tree.leaf_depths, dtype=np.int64)
    if drafting == "topk":
        tok = _topk_outcome(tree, q_levels, V)
        tok = np.concatenate([np.zeros((1, 1), np.int64), tok], axis=1)
        weight = [Fraction(1) if exact else 1.0]
        gone = np.zeros((1, K), dtype=bool)
    else:
        total = V ** (N - 1)
        check_size(total, f"tree LP outcomes ({tree.describe()})", exact,
                   limit or MAX_TREE_OUTCOMES, f"V^E = {V}^{N - 1}")
        f = np.arange(total, dtype=np.int64)
        tok = np.concatenate([np.zeros((total, 1), np.int64), sequence_tokens(f, N - 1, V)],
                             axis=1)
        like = q_levels[0]
        t = as_index(tok, like)  # the backend of the rows: torch in float mode, numpy if exact
        w, _, dropped = _outcome_weight(tree, t, q_levels, V, drafting, like, drop=True)
        weight = list(w) if exact else w.numpy().tolist()
        gone = np.stack([np.asarray(dropped[u]) for u in tree.leaves], axis=1)  # [n, K]
    powers = V ** np.arange(D - 1, -1, -1)
    drafted = (leaf >= 0).reshape(-1)
    cols = np.where(drafted, leaf.reshape(-1), 0)  # column 0 is the root's token 0
    paths = ((tok[:, cols] * drafted).reshape(-1, K, D) * powers).sum(axis=2)  # [n, K]
    zero = Fraction(0) if exact else 0.0
    acc: dict = defaultdict(lambda: zero)
    for row, w, off in zip(paths, weight, gone):
        if w != 0:
            acc[_maximal(row[~off].tolist(), depths[~off], V, D)] += w
    # pad each outcome's paths to K with its first path (prefix sets are unchanged)
    keys = sorted(acc)
    combos = np.array([[x for _, x in k] + [k[0][1]] * (K - len(k)) for k in keys],
                      dtype=np.int64).reshape(-1, K)
    lengths = np.array([[d for d, _ in k] + [k[0][0]] * (K - len(k)) for k in keys],
                       dtype=np.int64).reshape(-1, K)
    prob = np.empty(len(keys), dtype=object if exact else np.float64)
    prob[:] = [acc[k] for k in keys]
    return (combos, lengths, prob) if with_lengths else (combos, prob)


def _maximal(row: list, depths, V: int, D: int) -> tuple:
    """The distinct (length, index) paths of one outcome that are no other path's prefix, sorted
    (index first, so a tree with every leaf at depth D sorts as before)."""
    if len(set(depths.tolist())) == 1:  # every leaf at depth D: no path is another's prefix
        return tuple((D, x) for x in sorted(set(row)))
    paths = set(zip(depths.tolist(), row))
    keep = [(d, x) for d, x in paths
            if not any(e > d and y // V ** (D - d) == x // V ** (D - d) for e, y in paths)]
    return tuple(sorted(keep, key=lambda t: (t[1], t[0])))


def tree_lp(instance: Instance, shape, drafting: str = "iid", exact: bool = False,
            solver: str | None = None, limit: int | None = None) -> LPResult:
    """Optimum E[tau + 1] over all valid verifiers of a drafted tree (module docstring).

    Parameters
    ----------
    instance : Instance
        Draft and target tables; the block length is the tree's depth.
    shape : any form of [`tree_shape`][spectheory.engine.drafttrees.tree_shape] (branching factors "2,2", a
        choices list, ``{"parents": [...]}``, a graph, a TreeShape); leaves may be at
        different depths
    drafting : {"iid", "norep", "topk"}
    exact : bool
        Float: HiGHS. Exact: HiGHS' primal and dual rounded to fractions and verified as a
        certificate ([`solve_exact_via_highs`][spectheory.lp.sparse.solve_exact_via_highs]).
    limit : int, optional
        Largest number of LP variables ([`check_lp_size`][spectheory.lp.sparse.check_lp_size]).
    """
    timer = Timer()
    exact = check_common(instance, "tree_lp", exact, limit, solver,
                         exacts=("exact-certificate",))
    tree = tree_shape(shape)
    V, D = instance.vocab_size, tree.height
    # the rows' part of the LP first: the outcomes read the tables to depth D, which a tree
    # deeper than the instance's tables builds level by level (V^d rows each)
    rows = sum(V**j for j in range(1, D + 2))
    check_lp_size(rows, 3 * rows + (D + 1) * V ** (D + 1), f"tree LP ({tree.describe()}, "
                  f"{drafting})", limit, "exact" if exact else "float", "at least sum_j V^j")
    inst = Instance(instance.vocab_size, tree.height, instance.target, instance.draft)
    inst = inst.to_exact() if exact else inst.to_float()
    combos, lengths, prob = tree_outcomes(inst, tree, drafting, exact, with_lengths=True)
    n_est = len(combos) * V * tree.n_nodes + sum(V**j for j in range(1, D + 2))
    check_lp_size(n_est, 3 * n_est + (D + 1) * V ** (D + 1), f"tree LP ({tree.describe()}, "
                  f"{drafting})", limit, "exact" if exact else "float",
                  "merged outcomes x V x nodes + sum_j V^j")
    lp, info = build_direct_outcomes(inst, combos, prob, exact, lengths=lengths)
    info.update({"tree": tree.describe(), "drafting": drafting,
                 "drafted_nodes": tree.n_drafted, "ordered_outcomes":
                 1 if drafting == "topk" else V**tree.n_drafted})
    if exact:
        opt, how = solve_exact_via_highs(lp)
        info["certificate"] = how
        res = LPResult("tree", tree.paths, opt, "sympy" if how == "sympy" else
                       "exact-certificate", "optimal", lp.n, lp.constraints, timer.seconds, info)
    else:
        _, opt, status, name = lp.solve(solver)
        info["float_certificate"] = lp.last_certificate
        res = LPResult("tree", tree.paths, opt, name, status, lp.n, lp.constraints,
                       timer.seconds, info)
    skipped: list = []
    return checked(res, tree_bounds(inst, tree, drafting, combos, lengths, prob, exact, skipped),
                   skipped)


__all__ = ["MAX_TREE_OUTCOMES", "tree_lp", "tree_outcomes"]
