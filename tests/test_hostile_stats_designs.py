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


# ----------------------------------------------------------------------------- sharp designs


@pytest.fixture(scope="module")
def sharp():
    from spectheory.testing.designs import sharp as module

    return module


def test_candidate_pool_bounds_are_refused_before_drawing(sharp):
    import time

    t0 = time.perf_counter()
    refused(SizeLimitError, r"^size = 1000000000000 exceeds the limit",
            lambda: sharp.candidate_pool(size=10**12))
    refused(SizeLimitError, r"^vocab\[0\] = 1000000000 exceeds the limit",
            lambda: sharp.candidate_pool(vocab=(10**9,)))
    refused(SizeLimitError, r"^lengths\[0\] = 1000000 exceeds the limit",
            lambda: sharp.candidate_pool(lengths=(10**6,)))
    refused(OptionError, r"^vocab\[0\] = 0 must be an integer in 1\.\.",
            lambda: sharp.candidate_pool(vocab=(0,)))
    refused(OptionError, r"^lengths\[0\] = -1 must be an integer in 1\.\.",
            lambda: sharp.candidate_pool(lengths=(-1,)))
    refused(OptionError, r"^lengths\[1\] = 2\.0 .*not float",
            lambda: sharp.candidate_pool(lengths=(1, 2.0)))
    refused(InputError, r"^vocab = \(\) must be a non-empty sequence",
            lambda: sharp.candidate_pool(vocab=()))
    refused(InputError, r"^vocab = '23' must be a non-empty sequence",
            lambda: sharp.candidate_pool(vocab="23"))
    refused(OptionError, r"^seed = -1 must be an integer >= 0",
            lambda: sharp.candidate_pool(seed=-1))
    refused(SizeLimitError, r"^paths = 10 exceeds the limit",
            lambda: sharp.candidate_pool(paths=10))
    assert time.perf_counter() - t0 < 5
    assert sharp.DEFAULT_POOL <= sharp.MAX_POOL


def test_candidate_pool_valid_neighbours_keep_their_rows(sharp):
    a = sharp.candidate_pool(size=12, seed=3, vocab=(2, 3), lengths=(1, 2))
    b = sharp.candidate_pool(size=np.int64(12), seed=np.int64(3), vocab=[np.int64(2), 3],
                             lengths=(1, np.int32(2)))
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            assert u.shape == v.shape and bool((u == v).all())
    # the largest vocabulary and length allowed still run
    top = sharp.candidate_pool(size=1, vocab=(sharp.MAX_POOL_VOCAB,),
                               lengths=(sharp.MAX_POOL_LENGTH,))
    assert top[0].q.shape == (1, sharp.MAX_POOL_LENGTH, sharp.MAX_POOL_VOCAB)


def test_kit_replicas_and_sharp_design_refuse_bad_arguments(sharp):
    refused(OptionError, r"^paths = -2 must be an integer >= 1",
            lambda: sharp.kit_replicas(paths=-2))
    refused(OptionError, r"^paths = 1\.0 .*not float", lambda: sharp.kit_replicas(paths=1.0))
    assert [r.name for r in sharp.kit_replicas(paths=np.int64(1), ports=False)] == \
        [r.name for r in sharp.kit_replicas(paths=1, ports=False)]
    refused(InputError, r"^pool is empty", lambda: sharp.sharp_design(pool=[]))
    refused(InputError, r"^pool must be a list of DraftRows, not str",
            lambda: sharp.sharp_design(pool="rows"))


def test_simulated_power_bounds_reps(sharp):
    row = sharp.candidate_pool(size=1, vocab=(2,), lengths=(1,))[:1]
    rep = [r for r in sharp.kit_replicas(ports=False) if r.law is not None][0]
    refused(SizeLimitError, r"^reps = 1000000000000 exceeds the limit",
            lambda: sharp.simulated_power(row, rep, reps=10**12))
    refused(OptionError, r"^seed = -1 must be an integer >= 0",
            lambda: sharp.simulated_power(row, rep, samples=100, reps=10, seed=-1))
    # the nearest valid call keeps its value (same seed, same draws)
    a = sharp.simulated_power(row, rep, samples=100, reps=50, seed=1)
    assert a == sharp.simulated_power(row, rep, samples=100, reps=np.int64(50), seed=1)
    assert 0.0 <= a <= 1.0 and sharp.MAX_SIM_REPS >= 20_000


def test_replica_power_and_binned_divergence_refuse_mismatched_rows(sharp):
    refused(InputError, r"^ns has 1 rows and cs 2",
            lambda: sharp.replica_power([10], [1.0, 2.0], [1.0], [1], 1e-3))
    refused(InputError, r"^zs has an entry 1\.5",
            lambda: sharp.replica_power([10], [1.0], [1.5], [1], 1e-3))
    refused(InputError, r"^cs has an entry nan",
            lambda: sharp.replica_power([10], [math.nan], [0.0], [1], 1e-3))
    refused(InputError, r"^ref has 1 dimension",
            lambda: sharp.binned_divergence(np.array([0.5, 0.5]), np.array([1.0]), 10))
    refused(InputError, r"^ref has shape \[1, 2\] and bug \[1, 1\]",
            lambda: sharp.binned_divergence(np.array([[0.5, 0.5]]), np.array([[1.0]]), 0))
    refused(OptionError, r"^n = -1 must be an integer >= 0",
            lambda: sharp.binned_divergence(np.array([[0.5, 0.5]]), np.array([[0.6, 0.4]]), -1))
    # controls: one row, two kept cells, c = sum (bug - ref)^2 / ref
    c, z, d = sharp.binned_divergence(np.array([[0.5, 0.5]]), np.array([[0.6, 0.4]]), 100)
    assert c[0] == pytest.approx(0.04) and z[0] == 0.0 and d[0] == 1
    assert sharp.replica_power([10], [0.0], [1.0], [1], 1e-3) == 1.0  # a zero-cell row caught


def test_bonus_law_refuses_rows_of_other_shapes(sharp):
    import torch

    refused(InputError, r"^drafts are torch\.float64",
            lambda: sharp.bonus_law(np.zeros((1, 2)), np.zeros((1, 1, 3)), np.zeros((1, 2, 3))))
    refused(InputError, r"^drafts \[1, 2\], q \[1, 1, 3\] and p \[1, 2, 3\] do not fit",
            lambda: sharp.bonus_law(torch.zeros(1, 2, dtype=torch.long), torch.zeros(1, 1, 3),
                                    torch.zeros(1, 2, 3)))
    refused(InputError, r"^a draft token lies outside 0\.\.2",
            lambda: sharp.bonus_law(torch.full((1, 1), 3), torch.full((1, 1, 3), 1 / 3),
                                    torch.full((1, 2, 3), 1 / 3)))
    refused(InputError, r"^unknown bonus-path bug 'x'",
            lambda: sharp.bonus_law(torch.zeros(1, 1, dtype=torch.long),
                                    torch.full((1, 1, 3), 1 / 3), torch.full((1, 2, 3), 1 / 3),
                                    bug="x"))
    # control: the bonus row of bonus-previous-row is p_{L-1}, the rest the token verifier's law
    d = torch.tensor([[0]])
    q = torch.tensor([[[0.5, 0.25, 0.25]]], dtype=torch.float64)
    p = torch.tensor([[[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]], dtype=torch.float64)
    law = sharp.bonus_law(d, q, p)
    assert torch.allclose(torch.as_tensor(law.correction)[0, 1], p[0, 0], atol=0, rtol=0)
    assert float(torch.as_tensor(law.stop)[0, 1]) == pytest.approx(1.0)  # min(1, .5/.5)


# ----------------------------------------------------------------------------- check_sampler


def test_check_sampler_names_the_type_of_a_non_number_alpha():
    from spectheory.testing import check_sampler, make_sampler

    msg = refused(SpectheoryError, r"^alpha = '0\.01' must be a number .*, not str$",
                  lambda: check_sampler(make_sampler("token"), "token", alpha="0.01",
                                        samples=100))
    assert len(msg) < 120
    refused(SpectheoryError, r"^alpha = 2 must be a number strictly between 0 and 1$",
            lambda: check_sampler(make_sampler("token"), "token", alpha=2, samples=100))
    rep = check_sampler(make_sampler("token"), "token", alpha=0.01, samples=2_000, seed=0)
    assert rep.passed and rep.alpha == 0.01
