"""Independent bounds that every LP answer of `spectheory.lp` is checked against before it is
returned, and so before the command line prints it.

Whatever route produced an optimum (HiGHS, cvxpy, an exact certificate, a closed form), the LP
functions return it through [`checked`][spectheory.lp.trust.checked], which compares it with
bounds computed without an LP solver:

* **upper, L + 1**: E[tau + 1] counts at most the L drafted tokens and one more (D + 1 for a
  tree of depth D);
* **upper, coverage** (K paths, draft trees): a verifier can go past a sequence s only if s is
  a drafted prefix, and validity gives M(s, a) <= p(a | s) M(s) for M(s) = P(tau >= |s|, the
  emitted block starts with s) (the node-budget LP's target matching, Thomas & Pal, arXiv
  2602.16961, Thm 3.3), so E[tau + 1] <= 1 + sum_s M*(s) with the greedy
  M*(s) = min(C(s), p(s_last | s^-) M*(s^-)), C(s) = P(s is a drafted prefix): for i.i.d.
  paths C(s) = 1 - (1 - q(s))^K; without replacement and under SpecHub's hub drafting
  C(s) = P(s_1 is drafted) q(s | s_1), with P(s_1 is drafted) from
  `spectheory.bounds.draws_inside` or SpecHub's closed form; for draft trees the probability of
  the tree's outcomes that draft s. For K = 1 this is the node-budget LP's closed form, block
  verification's E[tau + 1] (Sun et al., arXiv 2403.10444);
* **lower, block verification** (K-path problems): its E[tau + 1] (the same closed form with
  C = q); path 1 of the ``iid``, ``norep`` and ``hub`` schemes is a plain draft path, so
  block-verifying it alone is a valid K-path verifier (and a member of the selection class);
* **lower, registered verifiers**: the exact E[tau + 1] (`spectheory.analyze`, or
  `spectheory.engine.analysis.analyze_tree` for trees) of the verifiers of `LOWER_BOUND_VERIFIERS` under
  the same drafting, each only if it is lossless on the instance (TV to the target at most
  `LOSSLESS_TOL`) and its analysis fits `LOWER_BOUND_MAX_SEQUENCES`; under ``norep`` with
  K >= m, the m tokens of positive root probability, with m paths (the others repeat path 1);
* **lower, K - 1 paths** (direct and selection LPs, which are monotone in K: a K-path verifier
  may ignore its last path, and the first K - 1 paths of every scheme here follow the
  (K - 1)-path scheme): the float optimum with one path fewer, when that LP has at most
  `MONOTONE_MAX_VARIABLES` variables.

Comparisons are exact when the optimum and the bound are both fractions, else within
`BOUND_TOL` x max(1, |bound|). A violation is an
[`UntrustedLPError`][spectheory.lp.trust.UntrustedLPError] naming the optimum, the bound and its
source: a refused answer, never a printed one. The bounds passed are kept in
``details["bounds"]``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from spectheory.runtime.errors import SpectheoryError
from spectheory.runtime.kept import Kept, digest

from spectheory.bounds import shown

from ._guards import check_flag, check_instance, check_paths, check_table_memory
from .result import LPError, LPResult

#: Float slack of a bound comparison, times max(1, |bound|): the float certificates of
#: `spectheory.lp.sparse` close within `spectheory.lp.sparse.GAP_TOL` = 1e-6 relative.
BOUND_TOL = 2e-6
#: A registered verifier's value is a lower bound only if its TV to the target is at most this.
LOSSLESS_TOL = 1e-9
#: The registered verifiers whose exact E[tau + 1] bounds each problem from below, by drafting
#: scheme (cheap node routes; the selection LP uses GBV only, the member of its class).
LOWER_BOUND_VERIFIERS = {
    "direct": {"iid": ("specinfer",), "norep": ("specinfer-norep",), "hub": ("spechub",)},
    "multipath": {"iid": ("specinfer",)},
    "selection": {"iid": ("gbv",)},
    "tree": {"iid": ("specinfer",), "norep": ("specinfer-norep",), "topk": ("topk",)},
}
#: Size guard (`max_sequences` of the exact engine) of a lower-bound analysis; a larger one is
#: skipped (named in ``details["bounds"]``).
LOWER_BOUND_MAX_SEQUENCES = 20_000
#: The K - 1 comparison runs when the (K - 1)-path LP has at most this many variables (the size
#: bound before enumeration; about a second of HiGHS at the largest).
MONOTONE_MAX_VARIABLES = 50_000


class UntrustedLPError(LPError):
    """An LP optimum outside an independent bound (`spectheory.lp.trust`): refused."""


@dataclass
class Bound:
    """One bound: ``side`` "lower" or "upper", its ``value`` (a Fraction when exact) and where it
    comes from."""

    side: str
    value: Any
    source: str

    def __post_init__(self):
        """A side other than "lower" / "upper" was skipped by `checked` (a misspelt side let any
        optimum through), as was a NaN value (every comparison with it false)."""
        if self.side not in ("lower", "upper"):
            raise LPError(f"Bound side = {shown(self.side)} must be 'lower' or 'upper'")
        if not _finite_number(self.value):
            raise LPError(f"Bound value = {shown(self.value)} ({self.source}) is not a finite "
                          "number")


def _finite_number(v) -> bool:
    """A Fraction, or a finite real number (no bool, no string)."""
    if isinstance(v, Fraction):
        return True
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                             np.floating)):
        return False
    return math.isfinite(float(v))


def _num(v) -> str:
    return f"{v} (= {float(v):.12g})" if isinstance(v, Fraction) else f"{float(v):.12g}"


def _tol(opt, bound):
    """0 (exact comparison) for two fractions, else the float slack."""
    if isinstance(opt, Fraction) and isinstance(bound, Fraction):
        return 0
    return BOUND_TOL * max(1.0, abs(float(bound)))


def checked(result: LPResult, bounds: list, skipped: list | None = None) -> LPResult:
    """Return ``result`` once its optimum lies within every bound (module docstring); else raise
    [`UntrustedLPError`][spectheory.lp.trust.UntrustedLPError] naming the optimum and the first
    bound it violates. Records ``details["bounds"]``: the tightest lower and upper bound, every
    bound checked, and the ones ``skipped`` (with why)."""
    opt = result.optimum
    what = f"{result.problem} LP, K = {result.paths}"
    if not _finite_number(opt):
        raise UntrustedLPError(f"{what}: the solver's optimum {opt} is not a finite number; "
                               "refused")
    for b in bounds:
        tol = _tol(opt, b.value)
        if b.side == "upper" and opt > b.value + tol:
            raise UntrustedLPError(
                f"{what}: the solver's optimum {_num(opt)} is above the upper bound "
                f"{_num(b.value)} ({b.source}) by {float(opt - b.value):.3g}; refused as wrong")
        if b.side == "lower" and opt < b.value - tol:
            raise UntrustedLPError(
                f"{what}: the solver's optimum {_num(opt)} is below the lower bound "
                f"{_num(b.value)} ({b.source}) by {float(b.value - opt):.3g}; refused as wrong")
    lows = [b for b in bounds if b.side == "lower"]
    ups = [b for b in bounds if b.side == "upper"]
    result.details["bounds"] = {
        "lower": max(lows, key=lambda b: b.value) if lows else None,
        "upper": min(ups, key=lambda b: b.value) if ups else None,
        "checked": list(bounds), "skipped": list(skipped or []),
        "tolerance": BOUND_TOL}  # relative: BOUND_TOL x max(1, |bound|), as checked above
    return result


# ---------------------------------------------------------------- closed forms


def _tables(instance, exact: bool):
    """The target's conditionals p[j] [V^j, V] (j = 0..L) and the draft's path probabilities
    Q[j] [V^j] (j = 0..L), read from the instance here (not from the LP builders); refused
    before reading when they would not fit the machine's memory."""
    check_table_memory(instance, exact, "LP")
    inst = instance.to_exact() if exact else instance.to_float()
    L = inst.block_length
    p = [np.ascontiguousarray(inst.target.level(j)) for j in range(L + 1)]
    Q = [np.array([Fraction(1)], dtype=object) if exact else np.ones(1)]
    for j in range(L):
        Q.append((Q[-1][:, None] * np.asarray(inst.draft.level(j))).reshape(-1))
    return p, Q


def greedy_value(p_levels, C, L: int):
    """1 + sum_{1 <= |s| <= L} M*(s), M*(s) = min(C(s), p(s_last | s^-) M*(s^-)), M*() = 1, for
    ``C[j]`` [V^j] (j = 1..L; ``C[0]`` is ignored): block verification's E[tau + 1] for C = the
    draft's path probabilities, the coverage bound for C = drafting probabilities."""
    exact = np.asarray(p_levels[0]).dtype == object
    one = Fraction(1) if exact else 1.0
    M = np.array([one], dtype=object if exact else np.float64)
    total = one
    for j in range(1, L + 1):
        M = np.minimum(C[j], (M[:, None] * p_levels[j - 1]).reshape(-1))
        total = total + M.sum()
    return total if exact else float(total)


def iid_coverage(Q, K: int):
    """``C[j](s)`` = 1 - (1 - q(s))^K: some of K i.i.d. paths starts with s."""
    K = check_paths(K)
    return [None] + [1 - (1 - Q[j]) ** K for j in range(1, len(Q))]


def norep_coverage(Q, K: int, V: int):
    """``C[j](s)`` = P(s_1 is among the first tokens) q(s | s_1) under drafting without replacement
    at the root (at most one path starts with a given token; the rest of it is drawn from q)."""
    from spectheory.bounds import draws_inside

    root = list(Q[1])
    drafted = [1 - draws_inside(root, K, set(range(V)) - {f}) if root[f] != 0 else root[f] * 0
               for f in range(V)]
    return _first_token_coverage(Q, drafted, V)


def _first_token_coverage(Q, drafted, V: int):
    """``C[j](s)`` = ``drafted[s_1]`` q(s | s_1): at most one path starts with a given first
    token, and the rest of it is drawn from q."""
    root = list(Q[1])
    C = [None]
    for j in range(1, len(Q)):
        first = np.arange(V**j) // V ** (j - 1)
        C.append(np.array([drafted[f] * Q[j][s] / root[f] if root[f] != 0 else root[f] * 0
                           for s, f in enumerate(first)],
                          dtype=object if isinstance(root[0], Fraction) else np.float64))
    return C


def outcome_coverage(combos, prob, V: int, L: int, lengths=None):
    """``C[j](s)`` = the probability of the outcomes (``combos`` [n, K] path indices in V^L, with
    ``lengths`` [n, K] drafted lengths, default L) that draft s as a prefix."""
    combos = np.asarray(combos, dtype=np.int64)
    exact = len(prob) > 0 and isinstance(prob[0], Fraction)
    C = [None]
    for j in range(1, L + 1):
        pre = combos // V ** (L - j)
        if lengths is not None:
            pre = np.where(np.asarray(lengths) >= j, pre, -1)
        pre = np.sort(pre, axis=1)
        first = np.ones(pre.shape, dtype=bool)
        first[:, 1:] = pre[:, 1:] != pre[:, :-1]
        rows, cols = np.nonzero(first & (pre >= 0))
        if exact:
            c = np.empty(V**j, dtype=object)
            c[:] = [Fraction(0)] * V**j
            np.add.at(c, pre[rows, cols], np.asarray(prob, dtype=object)[rows])
        else:
            c = np.bincount(pre[rows, cols], weights=np.asarray(prob, dtype=np.float64)[rows],
                            minlength=V**j)
        C.append(c)
    return C


def hub_coverage(Q, K: int, V: int):
    """``C[j](s)`` = P(s_1 is drafted) q(s | s_1) under SpecHub's drafting (K <= 2; the ``hub``
    scheme of `spectheory.engine.joint`): the hub a = argmax q (ties: the smallest id) is always
    drafted when K = 2, another token f with probability q(f) + q(a) q(f) / (1 - q(a)) =
    q(f) / (1 - q(a)) (path 1 draws it, or path 1 draws a and the companion is f); with one
    token of positive probability only a is drafted. K = 1 is plain drafting."""
    root = list(Q[1])
    if K == 1:
        return iid_coverage(Q, 1)
    a = max(range(V), key=lambda f: (root[f], -f))
    zero, one = root[0] * 0, root[0] * 0 + 1
    rest = sum((root[f] for f in range(V) if f != a), zero)  # 1 - q(a), without cancellation
    drafted = [one if f == a else (zero if rest == 0 else root[f] / rest) for f in range(V)]
    return _first_token_coverage(Q, drafted, V)


# ---------------------------------------------------------------- bounds per problem


def single_path_bounds(instance, exact: bool) -> list:
    """L + 1 above; block verification's E[tau + 1] (closed form) below."""
    check_instance(instance, "single_path_bounds")
    exact = check_flag(exact, "exact")
    L = instance.block_length
    p_levels, Q = _tables(instance, exact)
    one = Fraction(1) if exact else 1.0
    return [Bound("upper", one * (L + 1), "L + 1"),
            Bound("lower", greedy_value(p_levels, Q, L),
                  "block verification's E[tau+1], closed form")]


def paths_bounds(instance, paths: int, drafting: str, exact: bool, problem: str,
                 skipped: list) -> list:
    """Bounds of a K-path problem (direct, selection, multipath) under ``drafting``: L + 1 and
    the coverage bound above, block verification and the registered verifiers below."""
    bounds = single_path_bounds(instance, exact)
    V, L, K = instance.vocab_size, instance.block_length, check_paths(paths)
    if drafting not in ("iid", "norep", "hub"):
        raise LPError(f"drafting = {shown(drafting)}: the K-path bounds know 'iid', 'norep' "
                      "and 'hub'")
    p_levels, Q = _tables(instance, exact)
    if drafting == "iid" or K == 1:
        C, how = iid_coverage(Q, K), "1 - (1 - q(s))^K"
    elif drafting == "norep":
        C, how = norep_coverage(Q, K, V), "first tokens without replacement"
    else:
        C, how = hub_coverage(Q, K, V), "SpecHub's hub and companion"
    bounds.append(Bound("upper", greedy_value(p_levels, C, L),
                        f"coverage bound, C(s) = P(s drafted) from {how}"))
    # under norep, paths past the m tokens of positive root probability repeat path 1: a
    # verifier of the first min(K, m) paths is one of K paths
    k = min(K, int(np.count_nonzero(np.asarray(Q[1], dtype=np.float64)))) \
        if drafting == "norep" else K
    if k > 1:
        for name in LOWER_BOUND_VERIFIERS.get(problem, {}).get(drafting, ()):
            bounds += _verifier_bound(lambda n=name: _analyze(instance, n, k, drafting),
                                      f"{name} with {k} paths ({drafting} drafting, exact "
                                      "engine)", skipped)
    return bounds


@dataclass(frozen=True)
class _Analysed:
    """What a lower bound reads of a verifier's analysis."""

    tv_to_target: float
    block_efficiency: float


#: The lower-bound analyses already run, by verifier, paths, drafting, size guard and a digest
#: of the float rows analysed, each with the registered spec it analysed (a hit needs the same
#: spec): a sweep over K asks for the verifier with K paths from the LP with K paths and again
#: from the monotone bound of the LP with K + 1, and the LPs of one instance (direct, selection,
#: multipath) share them. The oldest is dropped when 1024 are kept.
_ANALYSES = Kept(1024)


def _rows_digest(instance) -> bytes:
    """A digest of a float instance's sizes and tables (equal rows, equal digest)."""
    tables = tuple(instance.target.tables) + tuple(instance.draft.tables)
    return digest(int(instance.vocab_size), int(instance.block_length),
                  *(np.asarray(t, dtype=np.float64) for t in tables))


def _analyze(instance, name: str, K: int, drafting: str) -> _Analysed:
    from spectheory.engine.analysis import analyze
    from spectheory.registry import get_verifier

    inst = instance.to_float()
    try:
        spec = get_verifier(name)
    except SpectheoryError:  # refused by the analysis below, in its words
        spec = None
    key = (name, K, drafting, LOWER_BOUND_MAX_SEQUENCES, _rows_digest(inst))
    hit = _ANALYSES.get(key)
    if spec is not None and hit is not None and hit[0] is spec:
        return hit[1]
    res = analyze(inst, name, paths=K, drafting=drafting,
                  max_sequences=LOWER_BOUND_MAX_SEQUENCES, laws=False)
    found = _Analysed(res.tv_to_target, res.block_efficiency)
    if spec is not None:
        _ANALYSES.keep(key, (spec, found))
    return found


def _verifier_bound(run, source: str, skipped: list) -> list:
    """[Bound] of one registered verifier's E[tau + 1] when its analysis fits the guard and it
    is lossless on the instance; else [] and a line in ``skipped``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = run()
    except SpectheoryError as exc:
        skipped.append(f"{source}: {exc}")
        return []
    tv = float(res.tv_to_target)
    if tv > LOSSLESS_TOL:
        skipped.append(f"{source}: TV to the target {tv:.2g}, not lossless here")
        return []
    return [Bound("lower", float(res.block_efficiency), source)]


def tree_bounds(instance, tree, drafting: str, combos, lengths, prob, exact: bool,
                skipped: list) -> list:
    """Bounds of the tree LP: D + 1 and the coverage bound (from the tree's merged outcomes)
    above, the registered tree verifier of the drafting scheme below."""
    V, D = instance.vocab_size, tree.height
    p_levels, _ = _tables(instance, exact)
    one = Fraction(1) if exact else 1.0
    C = outcome_coverage(combos, prob, V, D, lengths)
    bounds = [Bound("upper", one * (D + 1), "D + 1 (the tree's depth)"),
              Bound("upper", greedy_value(p_levels, C, D),
                    "coverage bound, C(s) = P(s drafted) from the tree's outcomes")]
    for name in LOWER_BOUND_VERIFIERS["tree"].get(drafting, ()):
        def run(name=name):
            from spectheory.engine.analysis import analyze_tree

            return analyze_tree(instance.to_float(), name, tree, drafting,
                                max_sequences=LOWER_BOUND_MAX_SEQUENCES)
        bounds += _verifier_bound(run, f"{name} on the tree ({drafting} drafting, exact engine)",
                                  skipped)
    return bounds


def monotone_bound(solve_previous, paths: int, size: int, skipped: list) -> list:
    """[Bound] below from the optimum with K - 1 paths (``solve_previous()``, a float solve that
    goes through its own bounds), when K > 1 and the (K - 1)-path LP's size bound ``size`` is at
    most `MONOTONE_MAX_VARIABLES`."""
    if paths <= 1:
        return []
    source = f"the optimum with K - 1 = {paths - 1} paths (monotone in K)"
    if size > MONOTONE_MAX_VARIABLES:
        skipped.append(f"{source}: {size:,} variables, over {MONOTONE_MAX_VARIABLES:,}")
        return []
    try:
        prev = solve_previous()
    except SpectheoryError as exc:
        skipped.append(f"{source}: {exc}")
        return []
    return [Bound("lower", float(prev.optimum), source)]


__all__ = ["BOUND_TOL", "Bound", "LOSSLESS_TOL", "LOWER_BOUND_MAX_SEQUENCES",
           "LOWER_BOUND_VERIFIERS", "MONOTONE_MAX_VARIABLES", "UntrustedLPError", "checked",
           "greedy_value", "hub_coverage", "iid_coverage", "monotone_bound", "norep_coverage",
           "outcome_coverage", "paths_bounds", "single_path_bounds", "tree_bounds"]
