"""Hostile arguments to the kit's statistics and sharp designs: each is refused in one line naming
the argument (a SpectheoryError subclass, never a bare IndexError, ZeroDivisionError, numpy or
torch error, a hang or a wrong number), and the nearest valid input keeps its value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from spectheory.runtime.errors import InputError, OptionError, SizeLimitError, SpectheoryError
from spectheory.testing.checks.step import detection_power
from spectheory.testing.statistics import budget as B
from spectheory.testing.statistics import stats


def refused(cls, match, call):
    with pytest.raises(cls, match=match) as e:
        call()
    assert "\n" not in str(e.value)
    return str(e.value)


# ----------------------------------------------------------------------------- detection_power


def test_detection_power_refuses_bad_arguments():
    P, Q = [0.5, 0.5], [0.9, 0.1]
    refused(OptionError, r"^samples = -10 must be an integer in 1\.\.",
            lambda: detection_power(Q, P, -10))
    refused(OptionError, r"^samples = '100' .*not str", lambda: detection_power(Q, P, "100"))
    refused(OptionError, r"^samples = True ", lambda: detection_power(Q, P, True))
    refused(OptionError, r"^samples = 100\.0 ", lambda: detection_power(Q, P, 100.0))
    msg = refused(SizeLimitError, r"^samples = 1000.*exceeds the limit",
                  lambda: detection_power(Q, P, 10**400))
    assert len(msg) < 200
    refused(OptionError, r"^alpha = 2 must be a number strictly between 0 and 1",
            lambda: detection_power(Q, P, 100, alpha=2))
    refused(OptionError, r"^alpha = '0\.01' .*not str", lambda: detection_power(Q, P, 100, "0.01"))
    refused(OptionError, r"^alpha = nan ", lambda: detection_power(Q, P, 100, math.nan))
    refused(InputError, r"^law has a negative entry \(-0\.5\)",
            lambda: detection_power([1.5, -0.5], P, 100))
    refused(InputError, r"^target sums to 10\.0, not 1",
            lambda: detection_power([0.5, 0.5], [5, 5], 100))
    refused(InputError, r"^law has a non-finite entry \(nan\)",
            lambda: detection_power([math.nan, 0.5], P, 100))
    refused(InputError, r"^law = 'ab' is not an array of numbers",
            lambda: detection_power("ab", P, 100))
    refused(OptionError, r"^law has 2 cells and target 3",
            lambda: detection_power([0.5, 0.5], [0.2, 0.3, 0.5], 100))


def test_detection_power_valid_neighbours_keep_their_value():
    """Numpy scalars are accepted; the value is that of the non-central chi-square (1 dof)."""
    from scipy.stats import chi2, ncx2

    P, Q = np.array([0.5, 0.5]), np.array([0.55, 0.45])
    lam = 100 * float(((Q - P) ** 2 / P).sum())
    want = float(ncx2.sf(chi2.isf(1e-3 / 2, 1), 1, lam))
    assert detection_power(Q, P, 100) == pytest.approx(want, rel=1e-12)
    assert detection_power(Q, P, np.int64(100), np.float64(1e-3)) == \
        detection_power(Q, P, 100, 1e-3)
    assert detection_power(list(Q), list(P), 1) == detection_power(Q, P, 1)


# ----------------------------------------------------------------------------- budget


def test_budget_refuses_bad_arguments():
    refused(OptionError, r"^alpha = 5 must be a number strictly between 0 and 1",
            lambda: B.family_power(0.1, [100], [2], 5))
    refused(OptionError, r"^delta = 2 must be a finite number in \[0, 1\]",
            lambda: B.family_power(2, [100], [2], 0.01))
    refused(InputError, r"^ns has 2 rows and dofs 1",
            lambda: B.family_power(0.1, [100, 5], [2], 0.01))
    refused(InputError, r"^ns has an entry -100\.0",
            lambda: B.detectable_tv([-100], [2], 1e-3))
    refused(InputError, r"^dofs has an entry 1\.5", lambda: B.detectable_tv([100], [1.5], 1e-3))
    refused(InputError, r"^row_probs is empty", lambda: B.planned_tv([], 100, 1e-3))
    refused(InputError, r"^row_probs is empty", lambda: B.samples_for_tv([], 0.1, 1e-3))
    refused(InputError, r"^row_probs\[1\] has a negative entry",
            lambda: B.planned_tv([[0.5, 0.5], [1.5, -0.5]], 100, 1e-3))
    refused(InputError, r"^row_probs\[0\] has a non-finite entry",
            lambda: B.planned_tv([[math.nan, 0.5]], 100, 1e-3))
    refused(OptionError, r"^samples = 0 must be an integer >= 1",
            lambda: B.planned_tv([[0.5, 0.5]], 0, 1e-3))
    refused(OptionError, r"^parts = 0 must be an integer in 1\.\.",
            lambda: B.split(10, 0))
    refused(OptionError, r"^total = -10 must be an integer >= 0", lambda: B.split(-10, 3))
    refused(OptionError, r"^total = 10\.0 .*not float", lambda: B.split(10.0, 3))
    refused(SizeLimitError, r"^parts = 10000000000 exceeds the limit",
            lambda: B.split(10, 10**10))
    refused(OptionError, r"^power = 1 must be a number strictly between 0 and 1",
            lambda: B.coin_detectable_rate(10, power=1))
    refused(OptionError, r"^rows = -1 must be an integer >= 0",
            lambda: B.coin_detectable_rate(-1))
    refused(InputError, r"^points = \[\] must be a non-empty list",
            lambda: B.fit_cost([]))
    refused(InputError, r"^points\[0\] = 5 is not a \(samples, seconds\) pair",
            lambda: B.fit_cost([5]))
    refused(OptionError, r"^points\[1\] seconds = nan ",
            lambda: B.fit_cost([(10, 1.0), (20, math.nan)]))
    refused(OptionError, r"^tv = '0\.1' .*not str",
            lambda: B.samples_for_tv([[0.5, 0.5]], "0.1", 1e-3))
    assert B.MAX_SPLIT_PARTS >= 10**6


def test_budget_valid_neighbours_keep_their_value():
    from scipy.stats import chi2, ncx2

    # one row, 2 dof, alpha = 0.01: the larger of two tests that are the same test at alpha/2
    want = float(ncx2.sf(chi2.isf(0.01 / 2, 2), 2, 4 * 100 * 0.1 ** 2))
    assert B.family_power(0.1, [100], [2], 0.01) == pytest.approx(want, rel=1e-12)
    assert B.family_power(np.float32(0.1), np.array([100]), np.array([2]), np.float64(0.01)) == \
        pytest.approx(want, rel=1e-6)
    assert B.family_power(0.1, [100], [2.0], 0.01) == B.family_power(0.1, [100], [2], 0.01)
    assert B.split(10, 3) == [4, 3, 3] and B.split(0, 2) == [0, 0]
    assert B.split(np.int64(10), np.int32(3)) == [4, 3, 3]
    assert B.coin_detectable_rate(0) == math.inf
    assert B.coin_detectable_rate(10) == pytest.approx(1 - 0.1 ** 0.1, rel=1e-12)
    assert B.fit_cost([(10, 2.0)]) == (0.0, 0.2)
    assert B.fit_cost([(10, 2.0), (20, 3.0)]) == pytest.approx((1.0, 0.1))
    assert B.fit_cost([(10, 1.0), (10, 2.0)]) == (0.0, 0.2)  # two points of one size
    rows = [[0.5, 0.5]]
    assert B.samples_for_tv(rows, np.float32(0.1), 1e-3) == \
        B.samples_for_tv(rows, float(np.float32(0.1)), 1e-3)
    # float laws need not sum to 1 exactly: divided by their sum, as the check does
    assert B.planned_tv([[0.5, 0.5 - 5e-9]], 400, 1e-3) == B.planned_tv([[0.5, 0.5]], 400, 1e-3)


# ----------------------------------------------------------------------------- stats


def test_stats_refuse_bad_arguments():
    refused(InputError, r"^observed has 3 cells and probs 2",
            lambda: stats.row_chi_square(np.array([1, 2, 3]), np.array([0.5, 0.5]), 6))
    refused(InputError, r"^probs has an entry nan",
            lambda: stats.row_chi_square(np.array([1, 2]), np.array([math.nan, 0.5]), 3))
    refused(OptionError, r"^n = -1 must be an integer >= 0",
            lambda: stats.row_chi_square(np.array([1, 2]), np.array([0.5, 0.5]), -1))
    refused(OptionError, r"^power = 1 must be a number strictly between 0 and 1",
            lambda: stats.point_mass_tv(10, power=1))
    refused(OptionError, r"^n = 2\.5 .*not float", lambda: stats.point_mass_tv(2.5))
    refused(InputError, r"cell probabilities are not finite",
            lambda: stats.samples_for_a_test([math.nan, 1]))
    refused(InputError, r"^probs = 'ab' is not an array of numbers",
            lambda: stats.samples_for_a_test("ab"))


def test_stats_valid_neighbours_keep_their_value():
    t = stats.row_chi_square(np.array([1, 2]), np.array([0.5, 0.5]), 3, min_expected=1.0)
    assert (t.statistic, t.dof) == (pytest.approx(1 / 3), 1)  # (1-1.5)^2/1.5 twice
    assert stats.row_chi_square(np.array([1, 2]), np.array([0.5, 0.5]), np.int64(3), 1.0) == t
    assert stats.point_mass_tv(10, power=0.9) == pytest.approx(1 - 0.1 ** 0.1, rel=1e-12)
    assert stats.point_mass_tv(0) == math.inf
    assert stats.samples_for_a_test([0.5, 0.5]) == 10  # n/2 >= 5 in both cells
    assert stats.samples_for_a_test([0.0, 1.0]) is None
