"""Hostile arguments to the sharp designs' allocation and power prediction, the statistics'
family and the budget's sizing functions, and a negative budget after ``spectheory lp --tv``:
each is refused in one line naming the argument and its allowed range (a SpectheoryError
subclass; never a traceback from inside numpy, scipy or torch, a NaN power, or a silent answer to
another question), and the nearest valid call keeps its value, checked against the formula
computed here with scipy.stats directly."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import chi2 as sp_chi2
from scipy.stats import ncx2 as sp_ncx2

from cli_helpers import TOY, refused as cli_refused, run, write
from spectheory.law import Law
from spectheory.runtime.errors import InputError, OptionError, SizeLimitError, SpectheoryError
from spectheory.testing.designs import sharp
from spectheory.testing.statistics import budget as B
from spectheory.testing.statistics import stats


def refused(cls, match, call):
    with pytest.raises(cls, match=match) as e:
        call()
    assert "\n" not in str(e.value)
    return str(e.value)


def one_row_power(lam: float, dof: int, alpha: float, m: int = 1) -> float:
    """The family's predicted power on m rows of which one has non-centrality ``lam`` (the rest
    none), from scipy.stats itself: max(global test at alpha/2, per-row tests at alpha/(2m))."""
    glob = sp_ncx2.sf(sp_chi2.isf(alpha / 2, dof * m), dof * m, lam)
    row = sp_ncx2.sf(sp_chi2.isf(alpha / (2 * m), dof), dof, lam)
    return float(max(glob, row))


# ----------------------------------------------------------------------------- allocate

REF = [np.array([[0.5, 0.5], [0.5, 0.5]])]
LAWS = {"a": [np.array([[0.9, 0.1], [0.5, 0.5]])], "b": [np.array([[0.5, 0.5], [0.62, 0.38]])]}


def alloc(**kw):
    args = dict(ref=REF, laws=LAWS, budget=2000, alpha=1e-3, max_rows=4)
    args.update(kw)
    return sharp.allocate(**args)


@pytest.mark.parametrize("kw,cls,match", [
    (dict(budget=10**30), SizeLimitError, r"^budget = 1000.* exceeds the limit: .*1\.\.1,000,000"),
    (dict(max_rows=10**12), SizeLimitError, r"^max_rows = 1000000000000 exceeds the limit: it "
                                            r"must be an integer in 1\.\.1,024$"),
    (dict(max_rows=0), OptionError, r"^max_rows = 0 must be an integer in 1\.\.1,024"),
    (dict(max_rows=4.0), OptionError, r"^max_rows = 4\.0 .*, not float$"),
    (dict(generic_tv=math.nan), OptionError, r"^generic_tv = nan must be None or a number in "
                                             r"\(0, 1\]$"),
    (dict(generic_tv=-0.1), OptionError, r"^generic_tv = -0\.1 must be None or a number"),
    (dict(generic_tv=2.0), OptionError, r"^generic_tv = 2\.0 must be None or a number"),
    (dict(generic_tv="0.1"), OptionError, r"^generic_tv = '0\.1' .*\(0, 1\], not str$"),
    (dict(bonus=[np.array([0.5, 0.5])], bonus_tv=math.nan), OptionError,
     r"^bonus_tv = nan must be None or a number in \(0, 1\]"),
    (dict(bonus=[np.array([0.5, 0.5])], bonus_tv=-1.0), OptionError, r"^bonus_tv = -1\.0 must"),
    (dict(bonus_tv=0.1), OptionError, r"^bonus_tv = 0\.1 needs bonus"),
    (dict(bonus=[np.array([0.5, 0.5, 0.5])], bonus_tv=0.1), InputError,
     r"^bonus\[0\] has 3 entries and ref\[0\] 2 rows"),
    (dict(bonus=[np.array([0.5, 0.5]), np.array([0.5])], bonus_tv=0.1), InputError,
     r"^bonus has 2 groups and ref 1"),
    (dict(bonus=[np.array([math.nan, 0.5])], bonus_tv=0.1), InputError,
     r"^bonus\[0\] has an entry nan; each is a probability"),
    (dict(bonus=[np.array([2.0, 0.5])], bonus_tv=0.1), InputError,
     r"^bonus\[0\] has an entry 2\.0"),
    (dict(bonus="ab", bonus_tv=0.1), InputError, r"^bonus = 'ab' must be a list of arrays"),
    (dict(ref=[np.array([0.5, 0.5])]), InputError, r"^ref\[0\] has 1 dimension"),
    (dict(ref=np.array([[0.5, 0.5]])), InputError, r"^ref = array.* must be a list of arrays"),
    (dict(ref=[]), InputError, r"^ref is empty"),
    (dict(ref="ab"), InputError, r"^ref = 'ab' must be a list of arrays"),
    (dict(ref=[np.array([[0.5, 0.5], [1.5, -0.5]])]), InputError,
     r"^ref\[0\] row 1 has an entry -0\.5; cell probabilities are finite and >= 0"),
    (dict(ref=[np.array([[1.0, 1.0], [0.5, 0.5]])]), InputError,
     r"^ref\[0\] row 0 sums to 2\.0, not 1 \(tolerance 1e-06\)$"),
    (dict(laws={"a": [np.array([[0.9, 0.1]])]}), InputError,
     r"^laws\['a'\]\[0\] has shape \[1, 2\] and ref\[0\] \[2, 2\]"),
    (dict(laws={"a": [np.array([[0.9, 0.1], [0.5, 0.5]]), np.array([[0.5, 0.5]])]}),
     InputError, r"^laws\['a'\] has 2 groups and ref 1"),
    (dict(laws={"a": np.array([[0.9, 0.1], [0.5, 0.5]])}), InputError,
     r"^laws\['a'\] = array.* must be a list of arrays"),
    (dict(laws={"a": None}), InputError, r"^laws\['a'\] = None must be a list of arrays"),
    (dict(laws=[1, 2]), InputError, r"^laws = \[1, 2\] must be a dict.*, not list$"),
    (dict(laws={"a": [np.array([[math.inf, 0.1], [0.5, 0.5]])]}), InputError,
     r"^laws\['a'\]\[0\] row 0 has an entry inf"),
    (dict(laws={"a": [np.array([[0.5, 0.5], [1.9, 0.1]])]}), InputError,
     r"^laws\['a'\]\[0\] row 1 sums to 2\.0, not 1"),
])
def test_allocate_refuses_bad_arguments_at_the_door(kw, cls, match):
    refused(cls, match, lambda: alloc(**kw))


def test_allocate_valid_neighbours_keep_their_value():
    """One candidate row, one copy: n = budget, c = sum (bug - ref)^2 / ref = 0.64 on 1 dof, so
    the predicted power is the non-central chi-square's with lambda = 64 n / 100; the bounds
    themselves (budget = MAX_BUDGET, max_rows = MAX_ALLOC_ROWS, TVs of 1), numpy scalars, a NaN
    row (no law there) and a P(tau = L) a rounding above 1 are accepted."""
    ref = [np.array([[0.5, 0.5]])]
    laws = {"a": [np.array([[0.9, 0.1]])]}
    a = sharp.allocate(ref, laws, 100, 1e-3, max_rows=1)
    assert a.copies.tolist() == [1] and a.n == 100
    assert a.powers["a"] == pytest.approx(one_row_power(64.0, 1, 1e-3), rel=1e-12)
    b = sharp.allocate([r.astype(np.float32) for r in ref], laws, np.int64(100),
                       np.float64(1e-3), max_rows=np.int32(1))
    assert b.copies.tolist() == [1] and b.powers == a.powers
    assert a.powers["a"] < 1.0  # the control is a value, not a saturated 1
    # the bounds are inclusive
    top = sharp.allocate(ref, laws, sharp.MAX_BUDGET, 1e-3, max_rows=1)
    assert top.n == sharp.MAX_BUDGET and top.powers["a"] == 1.0
    wide = alloc(max_rows=sharp.MAX_ALLOC_ROWS, budget=60)  # stops at n = budget // m = 0
    assert 1 <= wide.copies.sum() <= 60
    g = alloc(generic_tv=1.0, bonus=[np.array([1.0 + 1e-12, 0.5])], bonus_tv=1)
    assert sharp.GENERIC in g.powers and sharp.GENERIC_BONUS in g.powers
    # a row with a NaN is a row without a law: the replica is served by the other row only
    nan_row = sharp.allocate(REF, {"a": [np.array([[math.nan, 0.1], [0.9, 0.1]])]}, 100, 1e-3,
                             max_rows=1)
    assert nan_row.copies.tolist() == [0, 1]
    assert nan_row.powers["a"] == pytest.approx(one_row_power(64.0, 1, 1e-3), rel=1e-12)
    # the kit's replica laws are off 1 by up to 5e-9: inside CELL_SUM_TOL
    off = sharp.allocate(ref, {"a": [np.array([[0.9 + 5e-9, 0.1]])]}, 100, 1e-3, max_rows=1)
    assert off.powers["a"] == pytest.approx(a.powers["a"], rel=1e-6)


def test_sharp_design_refuses_bounds_before_any_law():
    pool = sharp.candidate_pool(size=12, seed=3)
    rep = sharp.bonus_replicas("token")[0]
    refused(SizeLimitError, r"^max_rows = 1000000000 exceeds the limit",
            lambda: sharp.sharp_design([rep], "token", 600, pool=pool, max_rows=10**9))
    refused(SizeLimitError, r"^budget = 10000000000000 exceeds the limit",
            lambda: sharp.sharp_design([rep], "token", 10**13, pool=pool))
    refused(OptionError, r"^generic_tv = nan must be None or a number in \(0, 1\]",
            lambda: sharp.sharp_design([rep], "token", 600, pool=pool, generic_tv=math.nan))
    refused(InputError, r"^pool\[0\] = 'abc' is not a \(drafts, q, p\) triple: a str$",
            lambda: sharp.sharp_design([rep], "token", 600, pool=["abc"]))
    d, q, p = pool[0]
    refused(InputError, r"^pool\[1\] q has a row summing to 2\.0, not 1",
            lambda: sharp.sharp_design([rep], "token", 600, pool=[pool[0], (d, 2 * q, p)]))
    refused(InputError, r"^the pool's rows carry 1 path; the design is for K = 2",
            lambda: sharp.sharp_design(None, "gbv", 600, pool=pool, paths=2))


# ----------------------------------------------------------------------------- predicted power

D1 = torch.tensor([[0]])
Q1 = torch.tensor([[[0.5, 0.5]]], dtype=torch.float64)
P1 = torch.tensor([[[0.5, 0.5], [0.5, 0.5]]], dtype=torch.float64)
ROWS = [(D1, Q1, P1)]


def bonus_bias(drafts, q, p):
    """p = q: every draft accepted (tau = 1), the bonus token from (0.9, 0.1) instead of p_1."""
    B_ = drafts.shape[0]
    stop = torch.tensor([[0.0, 1.0]], dtype=torch.float64).expand(B_, 2)
    corr = torch.tensor([[[0.5, 0.5], [0.9, 0.1]]], dtype=torch.float64).expand(B_, 2, 2)
    return Law(stop, corr)


REP = ("bonus-bias", bonus_bias)


@pytest.mark.parametrize("kw,cls,match", [
    (dict(rows="ab"), InputError, r"^rows = 'ab' must be a list of DraftRows .*, not str$"),
    (dict(rows=None), InputError, r"^rows = None must be a list of DraftRows"),
    (dict(rows=[(D1, Q1)]), InputError, r"^rows\[0\] = .* is not a \(drafts, q, p\) triple: a "
                                        r"tuple of 2 items$"),
    (dict(rows=[(D1, Q1, P1, P1)]), InputError, r"triple: a tuple of 4 items$"),
    (dict(rows=[(D1, Q1, P1[:, :1])]), InputError,
     r"^rows\[0\]: drafts \[1, 1\], q \[1, 1, 2\] and p \[1, 1, 2\] do not fit"),
    (dict(rows=[(D1.double(), Q1, P1)]), InputError, r"^rows\[0\] drafts are torch\.float64"),
    (dict(rows=[(D1 + 5, Q1, P1)]), InputError, r"^rows\[0\] has a draft token outside 0\.\.1"),
    (dict(rows=[(D1, Q1 * math.nan, P1)]), InputError, r"^rows\[0\] q has a negative or "
                                                       r"non-finite entry"),
    (dict(rows=[(D1, Q1, 3 * P1)]), InputError, r"^rows\[0\] p has a row summing to 3\.0"),
    (dict(rows=[ROWS[0], (torch.tensor([[[0], [1]]]), Q1[:, None].expand(1, 2, 1, 2),
                          P1[:, None].expand(1, 2, 2, 2))]), InputError,
     r"^rows\[1\] has 2 paths and rows\[0\] 1; one path count K for all rows$"),
    (dict(replicas=[42]), InputError, r"^replicas\[0\] = 42: a replica must be a Replica or a "
                                      r"\(name, law\) pair, not int$"),
    (dict(replicas=[("x", bonus_bias, 1)]), InputError,
     r"^replicas\[0\] is a tuple of 3 items; a replica is a Replica or a \(name, law\) tuple$"),
    (dict(replicas=[["x", bonus_bias]]), InputError, r"^replicas\[0\] is a list of 2 items"),
    (dict(replicas=REP), InputError, r"^replicas = \('bonus-bias', law\) is one \(name, law\) "
                                     r"pair; give a list of them"),
    (dict(replicas=[(bonus_bias, "x")]), InputError, r"^replicas\[0\] is a \(law, name\) pair"),
    (dict(replicas=[("x", 3)]), InputError, r"^replica 'x': its law is not callable"),
    (dict(verifier="nope"), InputError, r"^unknown verifier 'nope'"),
    (dict(paths=0), OptionError, r"^paths = 0 must be an integer >= 1"),
    (dict(paths=10**9), OptionError, r"^paths = 1000000000 but the rows carry 1 path"),
    (dict(paths=1.0), OptionError, r"^paths = 1\.0 .*not float$"),
])
def test_predicted_power_refuses_bad_arguments(kw, cls, match):
    args = dict(rows=ROWS, replicas=[REP], verifier="token", samples=100, alpha=1e-3)
    args.update(kw)
    refused(cls, match, lambda: sharp.predicted_power(**args))


def test_predicted_power_valid_neighbours_keep_their_value():
    """Cells (tau, Y): the reference puts (1/2, 1/2) on tau = 1, the replica (0.9, 0.1): at 100
    samples c = 0.64 on 1 dof, lambda = 64, TV 0.4; DraftRows, lists, paths = 1 and a path axis
    K = 1 with paths = None give the same."""
    from spectheory.testing.checks.report import DraftRows

    want = one_row_power(64.0, 1, 1e-3)
    for rows, paths in ((ROWS, None), ([DraftRows(D1, Q1, P1)], 1), ([[D1, Q1, P1]], 1),
                        ([(D1.int(), Q1.float(), P1.float())], None)):
        r = sharp.predicted_power(rows, [REP], "token", 100, 1e-3, paths=paths)["bonus-bias"]
        assert r.power == pytest.approx(want, rel=1e-12)
        assert r.noncentrality == pytest.approx(64.0, rel=1e-12) and r.tv == pytest.approx(0.4)
    assert want < 1.0
    # simulated_power checks its rows the same way
    refused(InputError, r"^rows = 'x' must be a list of DraftRows",
            lambda: sharp.simulated_power("x", REP))
    refused(OptionError, r"^paths = 2 but the rows carry 1 path",
            lambda: sharp.simulated_power(ROWS, REP, samples=100, reps=10, paths=2))


# ----------------------------------------------------------------------------- binned divergence


def test_binned_divergence_and_replica_power_refuse_rows_that_are_not_laws():
    r, b = np.array([[0.5, 0.5]]), np.array([[0.9, 0.1]])
    refused(InputError, r"^ref row 0 has an entry -0\.5", lambda: sharp.binned_divergence(
        np.array([[1.5, -0.5]]), b, 100))
    refused(InputError, r"^ref row 0 has no positive entry", lambda: sharp.binned_divergence(
        np.array([[0.0, 0.0]]), b, 100))
    refused(InputError, r"^bug row 0 has an entry -0\.5", lambda: sharp.binned_divergence(
        r, np.array([[1.5, -0.5]]), 100))
    refused(SizeLimitError, r"^n = 1000.* exceeds the limit", lambda: sharp.binned_divergence(
        r, b, 10**400))
    refused(InputError, r"^ns has an entry 1e\+30", lambda: sharp.replica_power(
        [1e30], [1.0], [0.0], [1], 1e-3))
    refused(InputError, r"^dofs has an entry 1e\+30", lambda: sharp.replica_power(
        [10], [1.0], [0.0], [1e30], 1e-3))
    c, z, d = sharp.binned_divergence(r, b, 100)
    assert c[0] == pytest.approx(0.64) and z[0] == 0.0 and d[0] == 1
    # a non-centrality past scipy's range (NaN there) is a power of 1, not NaN
    assert sharp.replica_power([1e15], [1e10], [0.0], [1], 1e-3) == 1.0
    assert sharp.replica_power([100], [0.64], [0.0], [1], 1e-3) == \
        pytest.approx(one_row_power(64.0, 1, 1e-3), rel=1e-12)


# ----------------------------------------------------------------------------- family


def _tests():
    a = stats.row_chi_square(np.array([30, 20]), np.array([0.5, 0.5]), 50)
    b = stats.row_chi_square(np.array([10, 30, 10]), np.array([0.25, 0.5, 0.25]), 50)
    return [a, b]


@pytest.mark.parametrize("make,cls,match", [
    (lambda t: "ab", InputError, r"^tests = 'ab' must be a list of RowTest"),
    (lambda t: None, InputError, r"^tests = None must be a list of RowTest"),
    (lambda t: t[0], InputError, r"^tests = RowTest\(.* must be a list of RowTest.*not RowTest$"),
    (lambda t: {"a": t[0]}, InputError, r"not dict$"),
    (lambda t: [1, 2], InputError, r"^tests\[0\] = 1 is not a RowTest .* but a int$"),
    (lambda t: [tuple(t[0])], InputError, r"^tests\[0\] = \(2\.0, .* is not a RowTest"),
    (lambda t: [t[0]._replace(statistic=math.nan)], OptionError,
     r"^tests\[0\]\.statistic = nan must be a finite number in \[0, inf\)$"),
    (lambda t: [t[0], t[1]._replace(p_value=math.nan)], OptionError,
     r"^tests\[1\]\.p_value = nan must be a finite number in \[0, 1\]$"),
    (lambda t: [t[0]._replace(p_value=-1.0)], OptionError, r"^tests\[0\]\.p_value = -1\.0"),
    (lambda t: [t[0]._replace(statistic=-5.0)], OptionError, r"^tests\[0\]\.statistic = -5\.0"),
    (lambda t: [t[0]._replace(dof=-3)], OptionError, r"^tests\[0\]\.dof = -3 must be an "
                                                     r"integer >= 0"),
    (lambda t: [t[0]._replace(dof=1.5)], OptionError, r"^tests\[0\]\.dof = 1\.5 .*not float$"),
    (lambda t: [t[0]._replace(impossible=-1)], OptionError, r"^tests\[0\]\.impossible = -1"),
    (lambda t: [t[0]._replace(statistic="1")], OptionError, r"^tests\[0\]\.statistic = '1' .*"
                                                            r"not str$"),
    (lambda t: [t[0]._replace(n=10**30)], SizeLimitError, r"^tests\[0\]\.n = 1000.* exceeds"),
])
def test_family_refuses_items_that_are_not_sound_row_tests(make, cls, match):
    bad = make(_tests())
    refused(cls, match, lambda: stats.family(bad))
    refused(cls, match, lambda: stats.family_power(0.1, bad, 1e-3))
    refused(cls, match, lambda: stats.min_detectable_tv(bad, 1e-3))


def test_family_valid_neighbours_keep_their_value():
    """Two rows (statistics 2 and 2 on 1 and 2 dof, 50 samples each): p = min(1, 2 p_global,
    2 m min_b p_b) and the power bound from scipy.stats; an empty list keeps its answers."""
    t = _tests()
    assert (t[0].statistic, t[0].dof, t[1].statistic, t[1].dof) == (2.0, 1, 2.0, 2)
    f = stats.family(t)
    p_glob = sp_chi2.sf(4.0, 3)
    p_rows = [sp_chi2.sf(2.0, 1), sp_chi2.sf(2.0, 2)]
    assert f.p_value == pytest.approx(min(1.0, 2 * p_glob, 4 * min(p_rows)), rel=1e-12)
    assert (f.statistic, f.dof, f.worst_row, f.impossible) == (4.0, 3, 0, 0)
    assert stats.family(tuple(t)) == f
    assert stats.family([]) == stats.FamilyTest(1.0, 0.0, 0, -1, 0)
    assert stats.family_power(0.1, [], 1e-3) == 0.0
    assert stats.min_detectable_tv([], 1e-3) == math.inf
    lam = 4 * 50 * 0.1 ** 2
    glob = sp_ncx2.sf(sp_chi2.isf(1e-3 / 2, 3), 3, 2 * lam)
    miss = (1 - sp_ncx2.sf(sp_chi2.isf(1e-3 / 4, 1), 1, lam)) * \
        (1 - sp_ncx2.sf(sp_chi2.isf(1e-3 / 4, 2), 2, lam))
    assert stats.family_power(0.1, t, 1e-3) == pytest.approx(max(glob, 1 - miss), rel=1e-12)
    # 2^53 samples a row: the non-centrality past scipy's range is a power of 1, not NaN
    big = [x._replace(n=stats.MAX_ROW_SAMPLES) for x in t] * 300
    assert stats.family_power(1.0, big, 1e-3) == 1.0


# ----------------------------------------------------------------------------- budget


@pytest.mark.parametrize("call,cls,match", [
    (lambda: B.family_power(0.5, [1e30], [3], 1e-3), InputError,
     r"^ns has an entry 1e\+30; sample counts are finite and in \[0, 2\^53\]$"),
    (lambda: B.family_power(0.1, [100], [2**40], 1e-3), InputError,
     r"^dofs has an entry 1099511627776\.0; degrees of freedom are integers in 0\.\.2,147"),
    (lambda: B.row_dof([0.5, 0.5], 10**400), SizeLimitError, r"^n = 1000.* exceeds the limit"),
    (lambda: B.planned_tv([[0.5, 0.5]], 10**30, 1e-3), SizeLimitError,
     r"^samples = 1000000000000000000000000000000 exceeds the limit"),
    (lambda: B.planned_tv([[0.5, 0.5]] * 3, 2, 1e-3), OptionError,
     r"^samples = 2 is fewer than the 3 rows"),
    (lambda: B.planned_tv({"a": [0.5, 0.5]}, 100, 1e-3), InputError,
     r"^row_probs = \{'a'.* is not a list of probability rows but a dict$"),
    (lambda: B.planned_tv({1, 2}, 100, 1e-3), InputError, r"but a set$"),
    (lambda: B.samples_for_tv([[0.5, 0.5]], 1e-9, 1e-3, max_samples=10**400), SizeLimitError,
     r"^max_samples = 1000.* exceeds the limit"),
    (lambda: B.coin_detectable_rate(10**400), SizeLimitError, r"^rows = 1000.* exceeds"),
    (lambda: B.fit_cost([(10**400, 1.0)]), SizeLimitError, r"^points\[0\] samples = 1000"),
    (lambda: B.fit_cost({1: 2}), InputError, r"^points = \{1: 2\} must be a non-empty list"),
    (lambda: B.check_budget(5, most=math.nan), OptionError, r"^most = nan must be a finite"),
    (lambda: B.size_run(lambda n: (None, 0.0), -1.0, 5), SpectheoryError,
     r"^budget_s = -1\.0 must be a number of seconds in \(0, 604800\]$"),
    (lambda: B.size_run(lambda n: (None, 0.0), math.nan, 5), SpectheoryError,
     r"^budget_s = nan must be a number of seconds"),
    (lambda: B.size_run(lambda n: (None, 0.0), 1.0, -5), OptionError,
     r"^minimum = -5 must be an integer >= 1$"),
    (lambda: B.size_run(lambda n: (None, 0.0), 1.0, "5"), OptionError,
     r"^minimum = '5' must be an integer >= 1, not str$"),
    (lambda: B.size_run(3, 1.0, 5), InputError, r"^run = 3 is not callable$"),
    (lambda: B.size_run(lambda n: 3, 1.0, 5), InputError,
     r"^run\(32\) returned 3; expected \(result, seconds inside the sampler\)$"),
    (lambda: B.size_run(lambda n: (None, math.nan), 1.0, 5), OptionError,
     r"^run\(32\) seconds inside the sampler = nan must be a finite number"),
])
def test_budget_refuses_bad_arguments(call, cls, match):
    refused(cls, match, call)


def test_budget_valid_neighbours_keep_their_value():
    lam = 4 * 100 * 0.2 ** 2
    want = max(sp_ncx2.sf(sp_chi2.isf(1e-3 / 2, 3), 3, lam),
               sp_ncx2.sf(sp_chi2.isf(1e-3 / 2, 3), 3, lam))
    assert B.family_power(0.2, [100], [3], 1e-3) == pytest.approx(want, rel=1e-12)
    assert B.family_power(1.0, [2.0 ** 53] * 300, [3] * 300, 1e-3) == 1.0  # NaN before
    assert B.check_budget(np.int64(5)) == 5.0  # refused before
    assert B.coin_detectable_rate(10) == pytest.approx(1 - 0.1 ** 0.1, rel=1e-12)
    assert B.fit_cost([(10, 1.0), (20, 1.5)]) == (pytest.approx(0.5), pytest.approx(0.05))
    assert B.row_dof([0.5, 0.5], 10) == 1
    # samples equal to the rows: one each, no test (inf), as before
    assert B.planned_tv([[0.5, 0.5]] * 3, 3, 1e-3) == math.inf
    # an instant sampler on a fake clock: the pilots stop at MAX_AUTO_SAMPLES, not 2^55
    ticks = iter(range(10**6))
    out = B.size_run(lambda n: (None, 0.0), 10.0, 1, clock=lambda: next(ticks) * 1e-9)
    assert out["samples"] == B.MAX_AUTO_SAMPLES
    assert max(n for n, _ in out["pilot"]) <= B.MAX_AUTO_SAMPLES


# ----------------------------------------------------------------------------- lp --tv


@pytest.mark.parametrize("opt", ["--tv", "--kl"])
@pytest.mark.parametrize("text", ["-1/20", "-1e-3", "-.5", "-1E+3", "-0.05", "-1/0"])
def test_lp_negative_budget_after_the_option_reaches_its_check(tmp_path, capsys, opt, text):
    """argparse took "-1/20" after --tv for an option ("expected one argument"); the budget's own
    check now says what is wrong, as it did for --tv=-1/20 (-1/0: the division by zero)."""
    path = write(tmp_path, TOY)
    words = "divides by zero" if text.endswith("/0") else "must be a finite number >= 0"
    cli_refused(*run(["lp", path, "--problem", "frontier", opt, text], capsys), opt, words)
    cli_refused(*run(["lp", path, "--problem", "frontier", f"{opt}={text}"], capsys), words)


def test_lp_budget_spellings_keep_their_optimum(tmp_path, capsys):
    import json

    path = write(tmp_path, TOY)
    got = []
    for args in (["--tv", "1/20"], ["--tv=1/20"], ["--tv", "0.05"], ["--tv", "5e-2"]):
        code, out, err = run(["lp", path, "--problem", "frontier", *args, "--json"], capsys)
        assert code == 0, err
        got.append(json.loads(out)["optimum"])
    assert len(set(got)) == 1
    cli_refused(*run(["lp", path, "--problem", "frontier", "--tv", "-inf"], capsys),
                "--tv", "not a finite number")
    cli_refused(*run(["lp", path, "--problem", "frontier", "--tv", "-x"], capsys),
                "--tv", "expected one argument")  # not a number: still an option


# ----------------------------------------------------------------------------- replica laws


def _token_law(d, q, p):
    from spectheory.verifiers.token import token_verification

    return token_verification(d, q, p)


def test_a_replica_law_that_writes_into_its_rows_leaves_the_pool_alone():
    """A replica law that wrote into its p changed the caller's pool (and the design's rows, and
    every later design on the same pool); replica laws are handed copies."""
    pool = sharp.candidate_pool(size=20)
    before = [(r.drafts.clone(), r.q.clone(), r.p.clone()) for r in pool]

    def writes(d, q, p):
        p[...] = 1.0 / p.shape[-1]
        q[...] = 0.0
        d[...] = 0
        return _token_law(d, q + 1.0 / q.shape[-1], p)

    des = sharp.sharp_design([("w", writes)], budget=500, pool=pool)
    assert all(torch.equal(a, r.drafts) and torch.equal(b, r.q) and torch.equal(c, r.p)
               for (a, b, c), r in zip(before, pool))
    again = sharp.sharp_design([("w", writes)], budget=500, pool=pool)
    assert [r.p.tolist() for r in des.rows] == [r.p.tolist() for r in again.rows]
    rows = des.rows
    sharp.predicted_power(rows, [("w", writes)], samples=3000)
    sharp.simulated_power(rows, ("w", writes), samples=3000, reps=50)
    assert all(torch.equal(c, r.p) for (_, _, c), r in zip(before, pool))


@pytest.mark.parametrize("fault,words", [
    ("scaled", r"returned a law whose row 0 sums to 5\.0, not 1"),
    ("negative", r"returned a law whose row 0 has an entry -0\.\d+; cell probabilities are "
                 r"finite and >= 0"),
    ("infinite", r"returned a law whose stop has an infinite entry"),
])
def test_powers_refuse_a_replica_law_that_is_not_a_law(fault, words):
    """`predicted_power` and `simulated_power` reported a total variation of 2 (a law scaled by
    5) or a power of 1.0 (negative cells clipped) where `sharp_design` refused the same law."""
    def bad(d, q, p):
        law = _token_law(d, q, p)
        stop = law.stop.clone()
        if fault == "scaled":
            return Law(stop * 5, law.correction)
        if fault == "negative":
            stop[:, 0] -= 0.5
            stop[:, -1] += 0.5
        else:
            stop[:, 0] = float("inf")
        return Law(stop, law.correction)

    rows = sharp.candidate_pool(size=20)
    match = rf"^the law of replica 'r' {words}"
    refused(InputError, match, lambda: sharp.predicted_power(rows, [("r", bad)]))
    refused(InputError, match, lambda: sharp.simulated_power(rows, ("r", bad), reps=20))
    refused(InputError, match, lambda: sharp.sharp_design([("r", bad)], budget=500,
                                                          pool=rows))


def test_a_group_of_no_rows_and_huge_sample_counts_are_refused():
    rows = sharp.candidate_pool(size=20)
    empty = (torch.zeros(0, 1, dtype=torch.long), torch.full((0, 1, 2), 0.5, dtype=torch.float64),
             torch.full((0, 2, 2), 0.5, dtype=torch.float64))
    for call in (lambda: sharp.sharp_design(budget=500, pool=[empty]),
                 lambda: sharp.predicted_power([rows[0], empty], [("r", _token_law)]),
                 lambda: sharp.simulated_power([rows[0], empty], ("r", _token_law), reps=20)):
        refused(InputError, r"\[\d\] has no draft rows \(drafts \[0, 1\]\)", call)
    for n in (10**13, 10**30):
        refused(SizeLimitError, rf"^samples = {n} exceeds the limit: it must be an integer in "
                                r"1\.\.1,000,000,000,000", lambda: sharp.simulated_power(
                                    rows, ("r", _token_law), samples=n))
        refused(SizeLimitError, rf"^samples = {n} exceeds the limit", lambda: sharp.predicted_power(
            rows, [("r", _token_law)], samples=n))
