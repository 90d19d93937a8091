"""The chi-square and non-central chi-square functions of the sampler checks' statistics, as
``chi2.sf``, ``chi2.isf``, ``ncx2.sf`` and ``ncx2.cdf`` with the arguments of `scipy.stats`.

Each returns what `scipy.stats.chi2` / `scipy.stats.ncx2` return, bit for bit: where every
argument lies inside the distribution's open support and parameter range (x > 0 finite, df > 0
finite, nc > 0 finite, 0 < q < 1; for ``chi2.sf`` also x = 0, where both give 1.0: a step check's
sample-size test computes the statistic of a row against itself, 0), it calls the same `scipy.special` kernel that scipy.stats calls
there (``chi2._sf = chdtrc(df, x)``, ``chi2._isf = chdtri(df, q)``, ``ncx2._sf = _ncx2_sf(x, df,
nc)``, ``ncx2._cdf = chndtr(x, df, nc)``, x promoted to float64 first as scipy.stats does), without
the generic distribution wrapper around it (argument parsing, masks, compress and place: about
0.1 ms a call, thousands of calls per sharp design or power bisection); anything else (the
support's edges, nc = 0, NaN, bad parameters, other dtypes) goes to scipy.stats itself. scipy.stats
is imported only then, so a sampler or step check that stays inside the support does not load it
(about 0.75 s of start-up in a fresh interpreter).
"""

from __future__ import annotations

import numpy as np
import scipy.special as _sc

try:  # the kernel scipy.stats.ncx2.sf calls for nc != 0 (scipy.special's own ufunc module)
    from scipy.special._ufuncs import _ncx2_sf as _ncx2_sf_kernel
except ImportError:  # pragma: no cover - another scipy layout: scipy.stats for every call
    _ncx2_sf_kernel = None


def _stats():
    import scipy.stats

    return scipy.stats


def _float64(a) -> np.ndarray | None:
    """``a`` as a float64 array where scipy.stats would compute in float64 (integer and float
    dtypes up to 64 bits), else None."""
    if type(a) is float:  # the common case, without an array
        return np.float64(a)
    arr = np.asarray(a)
    if arr.dtype.kind not in "iuf" or arr.dtype.itemsize > 8:
        return None
    return arr.astype(np.float64, copy=False)


def _inside(arr: np.ndarray | None, upper: float = np.inf) -> bool:
    """Every entry of ``arr`` in the open interval (0, upper)."""
    if arr is None:
        return False
    if arr.ndim == 0:
        return bool(0 < arr < upper)
    return bool(((arr > 0) & (arr < upper)).all())


def _nonnegative(arr: np.ndarray | None) -> bool:
    """Every entry of ``arr`` in [0, inf) (-0.0 included)."""
    if arr is None:
        return False
    if arr.ndim == 0:
        return bool(0 <= arr < np.inf)
    return bool(((arr >= 0) & (arr < np.inf)).all())


class _Chi2:
    """``sf(x, df)`` and ``isf(q, df)`` of `scipy.stats.chi2` (see the module)."""

    @staticmethod
    def sf(x, df):
        xa, da = _float64(x), _float64(df)
        if _nonnegative(xa) and _inside(da):  # sf(0, df) = chdtrc(df, 0) = 1.0, as scipy.stats
            return _sc.chdtrc(np.asarray(df), xa)
        return _stats().chi2.sf(x, df)

    @staticmethod
    def isf(q, df):
        qa, da = _float64(q), _float64(df)
        if _inside(qa, 1.0) and _inside(da):
            return _sc.chdtri(np.asarray(df), qa)
        return _stats().chi2.isf(q, df)


class _Ncx2:
    """``sf(x, df, nc)`` and ``cdf(x, df, nc)`` of `scipy.stats.ncx2` (see the module)."""

    @staticmethod
    def sf(x, df, nc):
        xa, da, na = _float64(x), _float64(df), _float64(nc)
        if _ncx2_sf_kernel is not None and _inside(xa) and _inside(da) and _inside(na):
            try:
                with np.errstate(over="ignore"):
                    return _ncx2_sf_kernel(xa, np.asarray(df), np.asarray(nc))
            except ArithmeticError:  # Boost's overflow: scipy.stats says what it says
                pass
        return _stats().ncx2.sf(x, df, nc)

    @staticmethod
    def cdf(x, df, nc):
        xa, da, na = _float64(x), _float64(df), _float64(nc)
        if _inside(xa) and _inside(da) and _inside(na):
            try:
                with np.errstate(over="ignore"):
                    return _sc.chndtr(xa, np.asarray(df), np.asarray(nc))
            except ArithmeticError:  # as in sf
                pass
        return _stats().ncx2.cdf(x, df, nc)


chi2 = _Chi2()
ncx2 = _Ncx2()
