"""Goodness-of-fit pieces of the sampler checks: pooled chi-square per row, a Bonferroni family,
and the power of the family against a bias of given total variation.

For one row (a draft row, an instance, a proposal row) with n samples, cells with an expected
count below ``min_expected`` are pooled into one bin (merged into the smallest cell if the pooled
bin is itself too small), and Pearson's statistic X^2 = sum (O - E)^2 / E is referred to a
chi-square law with (bins - 1) degrees of freedom (Pearson 1900; Cochran 1954 for the pooling
rule). The family is one global test (sum of the rows' statistics and degrees of freedom) at level
alpha/2 plus one test per row at level alpha/(2m), so a correct sampler raises a false alarm with
probability at most alpha (Bonferroni).

Power. Under a bias that moves the binned law of a row from P to P' with total variation
delta = TV(P, P'), the statistic is approximately non-central chi-square with non-centrality
lambda = n chi^2(P', P) = n sum (P' - P)^2 / P (Cohen 1988, ch. 7). Since chi^2(P', P) >=
4 TV(P', P)^2 (Cauchy-Schwarz), with equality for the least-favourable direction that raises one
half of the mass and lowers the other in proportion to P, lambda >= 4 n delta^2: the smallest
delta at which the family reaches 90% power at that lambda is detected with at least 90% power
in every direction ([`min_detectable_tv`][spectheory.testing.statistics.stats.min_detectable_tv]).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from ._chisq import chi2, ncx2
from . import _args
from ...runtime.errors import InputError
from ...runtime.kept import Kept


class RowTest(NamedTuple):
    """Chi-square of one row: statistic, degrees of freedom, p-value, samples, the index of the
    worst bin (-1 for the pooled bin) with its observed and expected counts, and the count seen in
    cells of probability zero."""

    statistic: float
    dof: int
    p_value: float
    n: int
    worst: int
    worst_observed: float
    worst_expected: float
    impossible: int


def row_chi_square(observed: np.ndarray, probs: np.ndarray, n: int,
                   min_expected: float = 5.0) -> RowTest:
    """Pooled Pearson chi-square of ``observed`` counts against cell probabilities ``probs``.

    ``probs`` need not be normalised exactly (float laws): expected = n probs / sum(probs).
    Cells of probability exactly zero are excluded and their counts returned as ``impossible``.
    Refused in one line: ``observed`` [C] and ``probs`` [C] not one-dimensional rows of numbers of
    one length, ``probs`` with a negative or non-finite entry, ``observed`` with a negative or
    non-finite entry (counts may be fractional where a caller pools shares of rows), ``n`` not
    an integer >= 0, counts that do not sum to ``n`` (to 1e-9 n: fractional shares round; the
    pooled bin's count is n less the counted cells, so a wrong n would test garbage), ``probs``
    all zero (no law). Cells whose sum overflows float are scaled by their largest first.
    """
    observed = _args.numbers("observed", observed)
    probs = _args.numbers("probs", probs)
    if observed.shape != probs.shape:
        raise InputError(f"observed has {observed.shape[0]} cells and probs {probs.shape[0]}; "
                         f"one count a cell")
    if not np.isfinite(probs).all() or (probs < 0).any():
        bad = probs[~(np.isfinite(probs) & (probs >= 0))][0]
        raise InputError(f"probs has an entry {float(bad)!r}; cell probabilities are finite "
                         f"and >= 0")
    n = _args.integer("n", n, 0)
    ok = np.isfinite(observed) & (observed >= 0)
    if not ok.all():
        raise InputError(f"observed has an entry {float(observed[~ok][0])!r}; counts are finite "
                         f"and >= 0")
    counted = float(observed.sum())
    if abs(counted - n) > 1e-9 * max(n, 1):
        raise InputError(f"observed sums to {counted!r} counts, not n = {n}; the counts of one "
                         f"row's n samples")
    min_expected = _args.real("min_expected", min_expected, 0.0)
    if probs.size and not (probs > 0).any():  # every cell impossible: p = 1 was returned
        raise InputError("probs are all zero: no law to test the counts against")
    zero = probs <= 0
    impossible = int(observed[zero].sum())
    with np.errstate(over="ignore"):
        tot = probs.sum()
    if not np.isfinite(tot):  # finite cells whose sum overflows: X^2 = 0 and p = 1 were returned
        probs = probs / probs.max()
        tot = probs.sum()
    expected = n * probs / tot if tot > 0 else np.zeros_like(probs)
    big = (expected >= min_expected) & ~zero
    idx = np.flatnonzero(big)
    e = expected[idx]
    o = observed[idx]
    pooled_e = n - e.sum()
    pooled_o = n - impossible - o.sum()
    if pooled_e > 1e-9 * max(n, 1):
        if pooled_e < min_expected and len(e):
            j = int(np.argmin(e))  # merge the pooled bin into the smallest cell
            e = e.copy()
            o = o.copy()
            e[j] += pooled_e
            o[j] += pooled_o
            idx = idx.copy()
            idx[j] = -1
        else:
            e = np.append(e, pooled_e)
            o = np.append(o, pooled_o)
            idx = np.append(idx, -1)
    dof = len(e) - 1
    if dof < 1:
        return RowTest(0.0, 0, 1.0, n, -1, float(n - impossible), float(n), impossible)
    z = (o - e) / np.sqrt(e)
    stat = float((z * z).sum())
    w = int(np.argmax(np.abs(z)))
    return RowTest(stat, dof, float(chi2.sf(stat, dof)), n, int(idx[w]), float(o[w]),
                   float(e[w]), impossible)


#: Largest degrees of freedom of a row test `family` and `family_power` take (a row's bins
#: less one; scipy's chi-square quantile takes a C long, and 2^31 bins are past any row).
MAX_ROW_DOF = 2**31 - 1
#: Largest sample count of a row test they take: counts exact in float64.
MAX_ROW_SAMPLES = 2**53
#: Non-centralities above this are lowered to it before the non-central chi-square tail is
#: taken: scipy returns NaN from about 1e19 on, and at 1e18 the tail past any critical value of
#: at most `MAX_ROW_DOF` times a list's rows (far below 1e18) is 1.0 exactly.
MAX_NONCENTRALITY = 1e18


def _tests(tests) -> list:
    """``tests`` as a list of `RowTest` whose fields `family` and `family_power` read are
    sound: statistic finite and >= 0, dof an integer in 0..`MAX_ROW_DOF`, p-value in [0, 1],
    n an integer in 0..`MAX_ROW_SAMPLES`, impossible an integer in 0..n; else one `InputError`
    line naming the first item at fault (an empty list is valid)."""
    if isinstance(tests, (str, bytes, RowTest, dict)) or not isinstance(tests, (list, tuple)):
        raise InputError(f"tests = {_args.show(tests)} must be a list of RowTest (the results of "
                         f"row_chi_square), not {type(tests).__name__}")
    for i, t in enumerate(tests):
        if not isinstance(t, RowTest):
            raise InputError(f"tests[{i}] = {_args.show(t)} is not a RowTest (a result of "
                             f"row_chi_square) but a {type(t).__name__}")
        where = f"tests[{i}]"
        _args.real(f"{where}.statistic", t.statistic, 0.0, lo_open=False)
        _args.count(f"{where}.dof", t.dof, 0, MAX_ROW_DOF)
        _args.real(f"{where}.p_value", t.p_value, 0.0, 1.0, lo_open=False, hi_open=False)
        n = _args.count(f"{where}.n", t.n, 0, MAX_ROW_SAMPLES)
        _args.integer(f"{where}.impossible", t.impossible, 0, n)
    return list(tests)


class FamilyTest(NamedTuple):
    """Bonferroni family over rows: adjusted p-value, global statistic and dof, the row whose
    test is most extreme (by p-value)."""

    p_value: float
    statistic: float
    dof: int
    worst_row: int
    impossible: int


def family(tests: list[RowTest]) -> FamilyTest:
    """Global test at alpha/2 plus per-row tests at alpha/(2m): adjusted p-value
    min(1, 2 p_global, 2 m min_b p_b) (0 when an impossible outcome was seen). ``tests`` a
    list of `RowTest` (empty: p-value 1), each with a finite statistic >= 0, an integer dof
    >= 0, a p-value in [0, 1], counts n >= 0 and impossible in 0..n; else one line."""
    tests = _tests(tests)
    m = len(tests)
    stat = float(sum(t.statistic for t in tests))
    dof = int(sum(t.dof for t in tests))
    impossible = int(sum(t.impossible for t in tests))
    p_global = float(chi2.sf(stat, dof)) if dof > 0 else 1.0
    rows_p = [t.p_value for t in tests]
    worst = int(np.argmin(rows_p)) if m else -1
    p = min(1.0, 2 * p_global, 2 * m * min(rows_p)) if m else 1.0
    if impossible:
        p = 0.0
        worst = next(i for i, t in enumerate(tests) if t.impossible)
    return FamilyTest(p, stat, dof, worst, impossible)


def family_power(delta: float, tests: list[RowTest], alpha: float) -> float:
    """Lower bound on the family's power against a bias of total variation ``delta`` on the binned
    law of every row: the larger of the global test's power and that of the per-row tests
    (independent rows), with non-centrality 4 n delta^2 per row (at most `MAX_NONCENTRALITY`).
    ``delta`` in [0, 1], ``alpha`` in (0, 1), ``tests`` as for `family`; else one line."""
    delta = _args.real("delta", delta, 0.0, 1.0, lo_open=False, hi_open=False)
    alpha = _args.level("alpha", alpha)
    return _power_of(_tests(tests), alpha)(delta)


def _power_of(tests: list[RowTest], alpha: float):
    """`family_power` as a function of ``delta`` for checked ``tests`` and ``alpha``."""
    return _power_curve(np.array([float(t.n) for t in tests]),
                       np.array([t.dof for t in tests], dtype=np.int64), alpha)


def _power_curve(ns: np.ndarray, dofs: np.ndarray, alpha: float):
    """The Bonferroni family's power lower bound as a function of ``delta``, for rows of ``ns``
    [m] float64 samples and ``dofs`` [m] int64 degrees of freedom (a row of none has no test
    but counts in m) at level ``alpha`` (all checked by the caller): the larger of the global
    test's power and that of the per-row tests at alpha / (2 m), non-centrality 4 n delta^2 a
    row (at most `MAX_NONCENTRALITY`). The critical values, which do not depend on delta, are
    computed once (a bisection evaluates the power some twenty times)."""
    m = len(ns)
    keep = dofs > 0
    if not keep.any():
        return lambda delta: 0.0
    n_kept, d = ns[keep], dofs[keep]
    g_dof = int(d.sum())
    crit_global = chi2.isf(alpha / 2, g_dof)
    crit = chi2.isf(alpha / (2 * m), d)

    def power(delta: float) -> float:
        # non-centralities capped where scipy's tail turns NaN (its value there is 1.0 exactly)
        lam = np.minimum(4.0 * n_kept * delta * delta, MAX_NONCENTRALITY)
        p_global = float(ncx2.sf(crit_global, g_dof,
                                 min(float(lam.sum()), MAX_NONCENTRALITY)))
        miss = np.prod(1.0 - ncx2.sf(crit, d, lam))
        return max(p_global, float(1.0 - miss))

    return power


def _smallest_detectable(power_at, power: float) -> float:
    """The smallest delta in (0, 1] with ``power_at(delta) >= power``, by bisection to a relative
    precision of 1e-5 (``inf`` when even delta = 1 falls short); ``power_at`` non-decreasing."""
    lo, hi = 0.0, 1.0
    if power_at(hi) < power:
        return float("inf")
    while hi - lo > 1e-5 * hi:  # relative precision 1e-5
        mid = 0.5 * (lo + hi)
        if power_at(mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def min_detectable_tv(tests: list[RowTest], alpha: float, power: float = 0.9) -> float:
    """Smallest total-variation bias (on the binned law of every row) that the family detects with
    probability ``power`` at level ``alpha``, by bisection on
    [`family_power`][spectheory.testing.statistics.stats.family_power] (``inf`` when no row has a
    test)."""
    alpha, power = _args.level("alpha", alpha), _args.level("power", power)
    tests = _tests(tests)
    if not any(t.dof > 0 for t in tests):
        return float("inf")
    # the power curve reads only each row's sample count and degrees of freedom: the bisection's
    # result is kept per (counts, dofs, alpha, power), as a check of the same size on the same
    # rows gives the same ones seed after seed
    key = (tuple(int(t.n) for t in tests), tuple(int(t.dof) for t in tests), float(alpha),
           float(power))
    found = _MDT_CACHE.get(key)
    if found is None:
        found = _MDT_CACHE.keep(key, _smallest_detectable(_power_of(tests, alpha), power))
    return found


#: Results of `min_detectable_tv` kept (a float each; the oldest dropped first).
MDT_CACHE_SIZE = 256
_MDT_CACHE = Kept(MDT_CACHE_SIZE)


def is_point_mass(probs) -> bool:
    """Whether a row's law puts all its mass on one cell (greedy decoding): no chi-square has a
    degree of freedom there, and any sample off that cell has probability zero. ``probs`` [C]
    need not be normalised; refused in one line: not a row of numbers, an entry NaN, infinite
    or negative, or no positive entry (no law: an empty or all-zero row)."""
    try:
        row = _args.numbers("probs", probs)
    except InputError as exc:
        raise InputError(f"is_point_mass: probs = {_args.show(probs)} is not a row of numbers "
                         f"({exc})") from None
    if not (np.isfinite(row) & (row >= 0)).all():
        bad = row[~(np.isfinite(row) & (row >= 0))][0]
        raise InputError(f"is_point_mass: probs has an entry {float(bad)!r}; cell "
                         f"probabilities are finite and >= 0")
    if not (row > 0).any():
        raise InputError(f"is_point_mass: probs has no positive entry ({len(row)} cells): no "
                         f"law to test")
    return int(np.count_nonzero(row > 0)) == 1


def samples_for_a_test(probs, min_expected: float = 5.0) -> int | None:
    """The fewest samples n at which
    [`row_chi_square`][spectheory.testing.statistics.stats.row_chi_square] of a row with cell
    probabilities ``probs`` has a degree of freedom (two bins of expected count at least
    ``min_expected`` after pooling), None for a point mass (never) or a row that no count below 2^62
    tests (its second largest probability below about 1e-18). With p_1 the largest normalised
    probability: n p_1 >= min_expected (one cell kept) and n (1 - p_1) >= min_expected (the rest,
    pooled or kept, is a second bin), so n = ceil(min_expected / min(p_1, 1 - p_1)), checked against
    the pooling itself."""
    probs = _args.numbers("probs", probs)
    if not np.isfinite(probs).all():
        raise InputError("samples_for_a_test: the cell probabilities are not finite")
    if (probs < 0).any():
        raise InputError(f"samples_for_a_test: a cell probability is negative "
                         f"({float(probs[probs < 0][0])!r})")
    min_expected = _args.real("min_expected", min_expected, 0.0)
    if not (probs > 0).any():
        raise InputError("samples_for_a_test: the cell probabilities are all zero (no law)")
    if is_point_mass(probs):
        return None
    w = probs[probs > 0] / probs[probs > 0].sum()
    w_all = probs / probs.sum()  # counts of m samples at their expectations: they sum to m
    p1 = float(w.max())
    rest = min(p1, 1.0 - p1)
    first = min_expected / rest * (1 - 1e-12) if rest > 0 else math.inf
    n = max(2, math.ceil(first)) if first < 2.0**62 else None

    def tested(m: int) -> bool:  # the degrees of freedom do not depend on the counts
        return row_chi_square(m * w_all, probs, m, min_expected).dof >= 1

    if n is not None and tested(n):
        return n
    # float edges, and rows whose rest is below the pooling's floor (a pooled bin of mass at most
    # 1e-9 n is dropped): the row is certainly tested once its two largest cells are both kept,
    # at n = min_expected / p_2 (p_2 the second largest probability). Whether a row is tested is
    # monotone in n (the expected counts grow with it), so bisect between the two.
    p2 = float(np.sort(w)[-2])
    bound = min_expected / p2 * (1 + 1e-9)
    if not bound < 2.0**62:  # no sample count a check can draw tests this row
        return None
    hi = math.ceil(bound) + 1
    while not tested(hi):  # float edges of the bound itself: a step or two
        hi += max(1, hi // 10**9)
    lo = 1 if n is None else n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if tested(mid) else (mid, hi)
    return hi


def point_mass_tv(n: int, power: float = 0.9) -> float:
    """Rows whose law is a point mass: the smallest total-variation bias t that n samples of a
    row catch with probability ``power`` (a sample off the point has probability zero and fails
    the check): 1 - (1 - t)^n >= power, t = 1 - (1 - power)^(1/n); ``inf`` for n = 0.
    ``n`` an integer >= 0, ``power`` strictly between 0 and 1."""
    n = _args.integer("n", n, 0)
    power = _args.level("power", power)
    if n < 1:
        return float("inf")
    nf = float(n) if n < 2**1000 else math.inf  # past float's range t is 0.0 (an int of 10^400
    return -math.expm1(math.log1p(-power) / nf)  # samples was an OverflowError)


__all__ = ["FamilyTest", "RowTest", "family", "family_power", "is_point_mass",
           "min_detectable_tv", "point_mass_tv", "row_chi_square", "samples_for_a_test"]
