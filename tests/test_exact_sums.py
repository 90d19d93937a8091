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
