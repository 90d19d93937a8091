"""Exact (Fraction) sums and accumulations of the rational backend: the integer forms over a
common denominator give the very Fractions numpy's running sums give, and entries that are not
Fractions keep numpy's own rules (types included)."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from spectheory.runtime import backend as B


def _fractions(shape, seed: int) -> np.ndarray:
    """Fractions with zeros, ones, negatives, repeated values (ties) and mixed denominators."""
    rng = random.Random(seed)
    pool = [Fraction(0), Fraction(1), Fraction(1, 3), Fraction(-2, 7), Fraction(5, 1024),
            Fraction(3, 3 * 2**20 + 1)]
    out = np.empty(shape, dtype=object)
    flat = out.reshape(-1)
    for j in range(flat.size):
        if rng.random() < 0.4:
            flat[j] = rng.choice(pool)
        else:
            flat[j] = Fraction(rng.randint(-9, 60), rng.choice([1, 2, 6, 97, 360, 2**30]))
    return out


def _same(x, y) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.shape == y.shape
                and x.dtype == y.dtype
                and all(type(a) is type(b) and a == b
                        for a, b in zip(x.reshape(-1).tolist(), y.reshape(-1).tolist())))
    return type(x) is type(y) and x == y


@pytest.mark.parametrize("shape", [(1,), (2,), (7,), (3, 2), (4, 3, 5), (2, 1, 3, 9), (300, 4)])
def test_sum_is_numpys_fraction_sum(shape):
    a = _fractions(shape, seed=len(shape) * 100 + shape[-1])
    for axis in range(-len(shape), len(shape)):
        for keepdims in (False, True):
            got = B.sum(a, axis, keepdims)
            want = a.sum(axis=axis, keepdims=keepdims)
            assert _same(got, want), (shape, axis, keepdims)
    # a vector sums to the scalar Fraction, as numpy's sum does
    assert type(B.sum(a.reshape(-1), 0)) is Fraction


def test_rows_whose_sum_cancels_are_in_lowest_terms():
    a = np.array([[Fraction(1, 6), Fraction(1, 3), Fraction(1, 2)],
                  [Fraction(1, 4), Fraction(-1, 4), Fraction(0)],
                  [Fraction(7, 10), Fraction(1, 15), Fraction(7, 30)]], dtype=object)
    got = B.sum(a, 1)
    assert [(v.numerator, v.denominator) for v in got] == [(1, 1), (0, 1), (1, 1)]


@pytest.mark.parametrize("other", [0, 1, True, 0.5, np.int64(2), np.float64(0.25)])
def test_entries_that_are_not_fractions_keep_numpys_rules(other):
    a = np.array([[Fraction(1, 3), other, Fraction(1, 2)],
                  [Fraction(1), Fraction(2, 3), Fraction(0)]], dtype=object)
    for axis in (0, 1, -1):
        for keepdims in (False, True):
            assert _same(B.sum(a, axis, keepdims), a.sum(axis=axis, keepdims=keepdims))
    ints = np.array([1, 2, 3], dtype=object)
    assert _same(B.sum(ints, 0), 6)


def test_fraction_sums_refuses_mixed_rows():
    assert B.fraction_sums([[Fraction(1, 2), 1]]) is None
    assert B.fraction_sums([[Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)]]) == [Fraction(1)]


# ----------------------------------------------------------------------------- exact law checks


def _exact_law(seed: int, B_: int = 3, K: int = 2, L: int = 2, V: int = 4):
    """A valid exact law with zeros, ties and mixed denominators."""
    rng = random.Random(seed)

    def dist(n):
        w = [rng.choice([0, 0, 1, 1, 2, 7, 10**12]) for _ in range(n)]
        w[rng.randrange(n)] += 1
        return [Fraction(x, sum(w)) for x in w]

    stop = np.array([dist(K * (L + 1)) for _ in range(B_)], dtype=object).reshape(B_, K, L + 1)
    corr = np.array([dist(V) for _ in range(B_ * K * (L + 1))],
                    dtype=object).reshape(B_, K, L + 1, V)
    return stop, corr


def test_exact_laws_are_accepted_as_they_are():
    from spectheory.law import validate_law
    for seed in range(20):
        stop, corr = _exact_law(seed)
        out = validate_law((stop, corr), 3, 2, 2, 4, True)
        assert out.stop is stop and out.correction is corr
    stop, corr = _exact_law(0)  # integer 0 and 1 entries are exact too
    corr[0, 0, 0] = [0, 1, 0, 0]
    corr[1, 0, 0] = [np.int64(0)] * 3 + [np.int64(1)]
    assert validate_law((stop, corr), 3, 2, 2, 4, True).correction is corr


@pytest.mark.parametrize("defect, kind", [
    ("negative-compensated", "negative"), ("one-ulp-over", "correction-sum"),
    ("stop-short", "stop-sum"), ("correction-short", "correction-sum"),
    ("float", "not-exact"), ("bool", "not-exact"), ("negative-stop", "negative")])
def test_exact_law_defects_are_named(defect, kind):
    """Every defect is refused with its kind and the offending entry, also where a row's sum
    stays exactly 1 (a negative entry balanced by a larger one)."""
    from spectheory.law import LawError, validate_law
    stop, corr = _exact_law(7)
    if defect == "negative-compensated":
        corr[2, 1, 1, 0] -= Fraction(1, 9)
        corr[2, 1, 1, 3] += Fraction(1, 9)
        if corr[2, 1, 1, 0] >= 0:
            corr[2, 1, 1, 0] -= 1
            corr[2, 1, 1, 3] += 1
        where = (2, 1, 1, 0)
    elif defect == "one-ulp-over":
        corr[1, 0, 2, 2] += Fraction(1, 2**70)
        where = (1, 0, 2)
    elif defect == "stop-short":
        k, i = next((k, i) for k in range(2) for i in range(3) if stop[2, k, i] > 0)
        stop[2, k, i] -= Fraction(1, 3 * 2**40)
        where = (2,)
    elif defect == "correction-short":
        y = next(y for y in range(4) if corr[0, 1, 2, y] > 0)
        corr[0, 1, 2, y] -= Fraction(1, 3 * 2**40)
        where = (0, 1, 2)
    elif defect == "float":
        corr[0, 1, 0, 1] = float(corr[0, 1, 0, 1])
        where = (0, 1, 0, 1)
    elif defect == "bool":
        stop[1, 0, 0] = bool(stop[1, 0, 0])
        where = (1, 0, 0)
    else:
        stop[0, 0, 1] = -stop[0, 0, 1] - 1
        stop[0, 1, 1] += 2 - sum(stop[0].reshape(-1).tolist())
        where = (0, 0, 1)
    with pytest.raises(LawError) as err:
        validate_law((stop, corr), 3, 2, 2, 4, True)
    assert err.value.kind == kind
    assert err.value.where == where


def test_weighted_row_accumulation_is_the_sum_of_products():
    """target[idx[j]] += w[j] rows[j]: in rationals the zero-weight rows are left out, which must
    give the very Fractions of adding every product (repeated indices, zero weights, zero rows)."""
    rows = _fractions((40, 3), seed=11)
    w = _fractions((40,), seed=12)
    w[::3] = Fraction(0)
    idx = np.array([j % 7 for j in range(40)], dtype=np.int64)
    base = _fractions((7, 3), seed=13)
    want = base.copy()
    for j in range(40):
        for y in range(3):
            want[idx[j], y] = want[idx[j], y] + w[j] * rows[j, y]
    got = B.index_add_weighted(base.copy(), idx, w, rows)
    assert _same(got, want)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    wf, rf = rng.random(40), rng.random((40, 3))
    wf[::3] = 0.0
    t = torch.zeros(7, 3, dtype=torch.float64)
    B.index_add_weighted(t, torch.as_tensor(idx), torch.as_tensor(wf), torch.as_tensor(rf))
    ref = torch.zeros(7, 3, dtype=torch.float64).index_add_(
        0, torch.as_tensor(idx), torch.as_tensor(wf).unsqueeze(-1) * torch.as_tensor(rf))
    assert torch.equal(t, ref)


@pytest.mark.parametrize("denominator", [1, 3, 12, 1000])
def test_quantized_rows_are_the_largest_remainder_rounding(denominator):
    """Each row becomes multiples of 1/D summing to exactly 1; the units left after flooring go to
    the largest remainders, ties to the smaller index (rows with ties, zeros and one-hots)."""
    from spectheory.inputs.random_instances import quantize_rows
    rng = np.random.default_rng(denominator)
    rows = rng.dirichlet(np.full(5, 0.7), size=60)
    rows[:5] = np.eye(5)
    rows[5] = 0.2
    rows[6] = [0.5, 0.5, 0.0, 0.0, 0.0]
    got = quantize_rows(rows, denominator)
    for r in range(rows.shape[0]):
        scaled = [float(v) * denominator for v in rows[r]]
        floors = [int(np.floor(v)) for v in scaled]
        short = denominator - sum(floors)
        ranked = sorted(range(5), key=lambda y: (-(scaled[y] - floors[y]), y))
        want = [Fraction(floors[y] + (y in ranked[:short]), denominator) for y in range(5)]
        assert got[r].tolist() == want and all(type(v) is Fraction for v in got[r])
        assert sum(want) == 1


def test_safe_div_in_rationals_is_the_division_of_fractions():
    """num / den where den != 0, else the fallback: zero numerators, denominators of 1 and 2, and
    integer denominators that are not 1 give what dividing every Fraction gives."""
    num = _fractions((6, 5), seed=21)
    num[:, 0] = Fraction(0)
    den = _fractions((6, 1), seed=22)
    den[0, 0], den[1, 0], den[2, 0], den[3, 0] = Fraction(1), Fraction(0), Fraction(2), \
        Fraction(-1)
    fallback = _fractions((6, 5), seed=23)
    got = B.safe_div(num, den, fallback)
    want = np.empty((6, 5), dtype=object)
    for r in range(6):
        for y in range(5):
            want[r, y] = fallback[r, y] if den[r, 0] == 0 else num[r, y] / den[r, 0]
    assert _same(got, want)
    mixed = np.array([0, Fraction(1, 2), 0.5], dtype=object)  # numpy's rules: int / F is F
    got = B.safe_div(mixed, np.array([Fraction(1), Fraction(3), Fraction(2)], dtype=object),
                     Fraction(0))
    assert _same(got, np.array([Fraction(0), Fraction(1, 6), 0.25], dtype=object))


def test_traversal_tree_law_in_rationals_has_fraction_entries_only():
    """traversal-tree on exact rows whose zeros and ones are Python ints (numpy's where writes
    them so) gives the law of the same rows as Fractions: the same values, and a stop table of
    Fractions only (its column writes turn an int into a Fraction as value + 0 does; correction
    rows the walk leaves alone are the rows handed in)."""
    from spectheory.engine.joint import path_tables, sorted_tuples
    from spectheory.engine.seqtree import levels
    from spectheory.inputs.random_instances import random_instance
    from spectheory.verifiers.traversal import traversal_tree
    inst = random_instance(3, 2, 4, denominator=12)
    ql, pl = levels(inst.draft, 0, 2, True, "cpu"), levels(inst.target, 0, 3, True, "cpu")
    tok, q, p, _ = path_tables(ql, pl, 2, 3)
    seq = sorted_tuples(9, 2)
    d, qq, pp = tok[seq], q[seq], p[seq]
    as_ints = [np.where(a == 0, 0, np.where(a == 1, 1, a)) for a in (qq, pp)]
    assert any(type(v) is int for v in as_ints[0].reshape(-1).tolist())
    want = traversal_tree(d, qq, pp)
    got = traversal_tree(d, *as_ints)
    assert _same(got.stop, want.stop)
    assert set(map(type, got.stop.reshape(-1).tolist())) == {Fraction}
    assert got.correction.tolist() == want.correction.tolist()


@pytest.mark.parametrize("other", ["array", "column", "zero", "half", "float", "int-array"])
def test_minimum_and_maximum_in_rationals_are_numpys(other):
    """minimum, maximum and positive_part of Fractions (ties, zeros, negatives, broadcasting)
    are numpy's object minimum and maximum: the same Fractions (of the first operand on a tie),
    and numpy's own rules where an operand is not a Fraction."""
    a = _fractions((6, 4), seed=31)
    a[0, :] = [Fraction(1, 2), Fraction(-1, 2), Fraction(0), Fraction(2, 4)]
    b = {"array": _fractions((6, 4), seed=32), "column": _fractions((6, 1), seed=33),
         "zero": 0, "half": Fraction(1, 2), "float": 0.25,
         "int-array": np.arange(4) - 1}[other]
    bn = b if isinstance(b, np.ndarray) else Fraction(b)
    assert _same(B.minimum(a, b), np.minimum(a, bn))
    assert _same(B.maximum(a, b), np.maximum(a, bn))
    assert _same(B.positive_part(a), np.maximum(a, Fraction(0)))
    tie = np.array([Fraction(1, 3)], dtype=object)
    assert B.minimum(tie, np.array([Fraction(2, 6)], dtype=object))[0] is tie[0]


@pytest.mark.parametrize("shapes", [((6, 4), (6, 4)), ((6, 1), (6, 4)), ((3, 1, 1), (3, 2, 5)),
                                    ((5,), ())])
def test_products_in_rationals_are_numpys(shapes):
    """mul of Fractions with zeros and ones among the factors (either side, broadcast) gives the
    Fractions numpy's product gives; other entries keep numpy's rules; floats are a * b."""
    sa, sb = shapes
    a = _fractions(sa, seed=41)
    a.reshape(-1)[::3] = Fraction(0)
    a.reshape(-1)[1::4] = Fraction(1)
    b = _fractions(sb, seed=42) if sb else np.array(Fraction(2, 3), dtype=object)
    if sb:
        b.reshape(-1)[::5] = Fraction(1)
        b.reshape(-1)[2::5] = Fraction(0)
    assert _same(B.mul(a, b), a * b)
    assert _same(B.mul(b, a), b * a)
    mixed = np.array([0, Fraction(1, 2), 1, 0.5], dtype=object)
    fr = np.array([Fraction(1, 3), Fraction(1), Fraction(0), Fraction(3)], dtype=object)
    assert _same(B.mul(mixed, fr), mixed * fr)
    x = np.random.default_rng(1).random((4, 3))
    assert np.array_equal(B.mul(x, x[:, :1]), x * x[:, :1])
