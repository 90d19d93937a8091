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
