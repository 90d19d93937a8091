"""Argument checks shared by the statistics and the designs of the conformance kit: each refuses
a bad value in one line naming the argument and its value, before any work or allocation.

* counts (``integer``, ``count``): Python or numpy integers, never a bool, a float or a string;
* numbers (``real``, ``level``): Python or numpy reals (ints included), never a bool or a
  string, finite and inside the stated range (a level such as ``alpha`` or ``power`` strictly
  between 0 and 1);
* probability rows (``prob_row``): a one-dimensional array of real numbers, finite,
  non-negative, summing to 1 within `spectheory.law.ROW_SUM_TOL` (the tolerance the float laws
  of the library are held to), or, where the function divides a row by its sum (the chi-square
  pooling of float laws normalised in float32), with a positive sum.
"""

from __future__ import annotations

import math

import numpy as np

from ...law import ROW_SUM_TOL
from ...runtime.errors import InputError, OptionError, SizeLimitError

#: Longest rendering of a refused value in a message.
SHOW_CHARS = 40


def show(value) -> str:
    """``repr(value)`` clipped to `SHOW_CHARS` characters (a 400-digit integer stays one short
    line)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr raises is still named by its type
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= SHOW_CHARS else text[:SHOW_CHARS - 3] + "..."


def integer(name: str, value, least: int = 1, most: int | None = None) -> int:
    """``value`` as an int in ``least..most``; `OptionError` for a non-integer or one below
    ``least``, `SizeLimitError` above ``most``."""
    span = f">= {least}" if most is None else f"in {least}..{most:,}"
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise OptionError(f"{name} = {show(value)} must be an integer {span}, not "
                          f"{type(value).__name__}")
    v = int(value)
    if v < least:
        raise OptionError(f"{name} = {show(value)} must be an integer {span}")
    if most is not None and v > most:
        raise SizeLimitError(f"{name} = {show(value)} exceeds the limit: it must be an integer "
                             f"{span}")
    return v


def count(name: str, value, least: int, most: int) -> int:
    """`integer` with the lower bound alone in the message of a value below it (``name = 0 must
    be an integer >= 1``) and a `SizeLimitError` line naming ``most`` above it: for counts whose
    upper bound guards the work rather than defines the argument."""
    v = integer(name, value, least)
    if v > most:
        raise SizeLimitError(f"{name} = {show(value)} exceeds the limit: it must be an integer "
                             f"in {least}..{most:,}")
    return v


def real(name: str, value, lo: float = -math.inf, hi: float = math.inf, *,
         lo_open: bool = True, hi_open: bool = True) -> float:
    """``value`` as a finite float in the interval (``lo``, ``hi``) (ends closed where asked);
    else one `OptionError` line."""
    span = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    if isinstance(value, (bool, np.bool_)) or \
            not isinstance(value, (int, float, np.integer, np.floating)):
        raise OptionError(f"{name} = {show(value)} must be a number in {span}, not "
                          f"{type(value).__name__}")
    try:
        v = float(value)
    except OverflowError:
        v = math.inf if value > 0 else -math.inf
    if not math.isfinite(v) or (v <= lo if lo_open else v < lo) or \
            (v >= hi if hi_open else v > hi):
        raise OptionError(f"{name} = {show(value)} must be a finite number in {span}")
    return v


def level(name: str, value) -> float:
    """A level or a power: a finite number strictly between 0 and 1."""
    if isinstance(value, (bool, np.bool_)) or \
            not isinstance(value, (int, float, np.integer, np.floating)):
        raise OptionError(f"{name} = {show(value)} must be a number strictly between 0 and 1, "
                          f"not {type(value).__name__}")
    try:
        v = float(value)
    except OverflowError:  # an integer past float range: outside (0, 1) all the same
        v = math.inf
    if not math.isfinite(v) or not 0 < v < 1:
        raise OptionError(f"{name} = {show(value)} must be a number strictly between 0 and 1")
    return v


def numbers(name: str, value, ndim: int | None = 1) -> np.ndarray:
    """``value`` as a float64 array of real numbers (integer or float dtype; bools, strings,
    bytes and objects refused) with ``ndim`` dimensions (None: any), else one `InputError`
    line."""
    if isinstance(value, (str, bytes)):
        raise InputError(f"{name} = {show(value)} is not an array of numbers")
    try:
        raw = np.asarray(value)
    except Exception:  # noqa: BLE001 - ragged lists and objects numpy cannot read
        raise InputError(f"{name} = {show(value)} is not an array of numbers") from None
    if raw.dtype.kind not in "iuf":
        raise InputError(f"{name} = {show(value)} is not an array of numbers (dtype "
                         f"{raw.dtype})")
    if ndim is not None and raw.ndim != ndim:
        raise InputError(f"{name} has {raw.ndim} dimension{'s' * (raw.ndim != 1)} (shape "
                         f"{list(raw.shape)}); expected {ndim}")
    return raw.astype(np.float64, copy=False)


def prob_row(name: str, value, tol: float | None = ROW_SUM_TOL) -> np.ndarray:
    """A probability row [C]: finite, non-negative, summing to 1 within ``tol`` (None: a
    positive sum, for the functions that divide a row by its sum, as
    `spectheory.testing.statistics.stats.row_chi_square` does with float laws)."""
    arr = numbers(name, value, 1)
    if arr.size == 0:
        raise InputError(f"{name} is empty; a probability row needs at least one cell")
    if not np.isfinite(arr).all():
        raise InputError(f"{name} has a non-finite entry ({float(arr[~np.isfinite(arr)][0])!r})")
    if (arr < 0).any():
        raise InputError(f"{name} has a negative entry ({show(float(arr[arr < 0][0]))})")
    tot = float(arr.sum())
    if tol is None:
        if not tot > 0:
            raise InputError(f"{name} has no positive entry; a probability row has mass")
        return arr
    if not abs(tot - 1.0) <= tol:
        raise InputError(f"{name} sums to {tot!r}, not 1 (tolerance {tol:g})")
    return arr


__all__ = ["SHOW_CHARS", "count", "integer", "level", "numbers", "prob_row", "real", "show"]
