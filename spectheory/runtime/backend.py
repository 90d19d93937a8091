"""The few array operations verifiers and the exact engine need, for two backends.

Every verifier in [`spectheory.verifiers`][spectheory.verifiers] is written once against these
functions, so the same code runs

* on ``torch.Tensor`` (float64 for the exact engine off the CPU or for verifiers that need
  torch, float32/float64 on CPU or CUDA for real models),
* on ``numpy`` float64 arrays (the exact engine's float route on the CPU, for verifiers that
  declare it: [`VerifierSpec.numpy_float`][spectheory.registry.VerifierSpec]), where every
  operation gives the value the torch branch gives (elementwise the same IEEE operations;
  reductions may add in another order) and, as on torch, a division by zero, an overflow or a NaN
  produces inf or NaN without a warning (the engine's validation then names the entry), and
* on ``numpy`` object arrays of `fractions.Fraction` (exact rational mode), where every
  operation is exact and a division by zero would raise instead of producing NaN.

The dispatch is on the type of the first array argument. Only operations that are exact on
rationals appear here (no exp/log), so a verifier built from them is exact in rational mode.
[`float_errors`][spectheory.runtime.backend.float_errors] silences numpy's floating-point
warnings around a computation, as the engine does around its numpy float route.
"""

from __future__ import annotations

import builtins
import itertools
from fractions import Fraction
from math import lcm
from typing import Any, Sequence

import numpy as np
from ._lazy import is_tensor, torch

Array = Any  # torch.Tensor or numpy.ndarray


def float_errors():
    """A context in which numpy float arithmetic behaves as torch's: 1/0 = inf, 0/0 = NaN,
    overflow to inf, no RuntimeWarning (``numpy.errstate(all="ignore")``)."""
    return np.errstate(all="ignore")


def is_torch(x: Array) -> bool:
    return is_tensor(x)


def values(*arrays):
    """The arrays as values: torch tensors detached from autograd (a view, no copy), others as
    they are. A law is a table of values: a verifier called through its spec
    ([`VerifierSpec.law`][spectheory.registry.VerifierSpec.law], as the engine, the checks and
    the real-model loop call it), and the laws that write into preallocated outputs (``out=``,
    in place, which autograd refuses: the per-draft law of the node forms, GBV, SpecInfer), read
    rows that require grad as values, so their law carries no gradient."""
    return tuple(a.detach() if is_torch(a) and a.requires_grad else a for a in arrays)


def is_exact(x: Array) -> bool:
    """True for numpy object arrays (holding Fractions)."""
    return isinstance(x, np.ndarray) and x.dtype == object


def scalar(x: Array, value) -> Any:
    """A scalar constant of the backend/dtype of ``x`` (a Fraction in exact mode)."""
    if is_exact(x):
        return Fraction(value)
    return value


def full(shape: Sequence[int], value, like: Array) -> Array:
    if is_torch(like):
        return torch.full(tuple(shape), float(value), dtype=like.dtype, device=like.device)
    if is_exact(like):
        out = np.empty(tuple(shape), dtype=object)
        out.fill(Fraction(value))
        return out
    return np.full(tuple(shape), value, dtype=like.dtype)


def zeros_like(x: Array) -> Array:
    return full(x.shape, 0, x)


def ones_like(x: Array) -> Array:
    return full(x.shape, 1, x)


def minimum(a: Array, b) -> Array:
    if is_torch(a):
        if not is_tensor(b):
            return torch.clamp(a, max=b)
        return torch.minimum(a, b)
    if is_exact(a):
        b = b if isinstance(b, np.ndarray) else Fraction(b)
        out = _fraction_pick(a, b, lower=True)
        return np.minimum(a, b) if out is None else out
    with float_errors():  # NaN propagates, as torch's
        return np.minimum(a, b)


def maximum(a: Array, b) -> Array:
    if is_torch(a):
        if not is_tensor(b):
            return torch.clamp(a, min=b)
        return torch.maximum(a, b)
    if is_exact(a):
        b = b if isinstance(b, np.ndarray) else Fraction(b)
        out = _fraction_pick(a, b, lower=False)
        return np.maximum(a, b) if out is None else out
    with float_errors():
        return np.maximum(a, b)


def all_fractions(*seqs) -> bool:
    """Whether every item of every iterable in ``seqs`` is of type Fraction exactly (not an int,
    a bool, a float or a subclass): where this holds, the rational shortcuts of this module give
    the very Fractions numpy's object loops give; elsewhere they leave the work to numpy."""
    return not builtins.any(set(map(type, s)) - {Fraction} for s in seqs)


def _fraction_pick(a: np.ndarray, b, lower: bool) -> np.ndarray | None:
    """numpy.minimum (``lower``) or numpy.maximum of an object array ``a`` and ``b`` (an array
    or a Fraction), broadcast, when every entry is a Fraction, else None (numpy's own then). As
    numpy's object loop, each entry is x where x <= y (x >= y), else y, the entries themselves;
    x <= y is compared as x.num * y.den <= y.num * x.den (denominators are positive), integer
    products instead of a Fraction comparison call each. None for a 0-d result (numpy's is a
    scalar)."""
    if isinstance(b, np.ndarray):
        if b.dtype != object:
            return None
        x, y = np.broadcast_arrays(a, b)
        if x.ndim == 0:
            return None
        xs, ys = x.reshape(-1).tolist(), y.reshape(-1).tolist()
        if not all_fractions(xs, ys):
            return None
        if lower:
            picked = [u if u.numerator * v.denominator <= v.numerator * u.denominator else v
                      for u, v in zip(xs, ys)]
        else:
            picked = [u if u.numerator * v.denominator >= v.numerator * u.denominator else v
                      for u, v in zip(xs, ys)]
    else:
        if a.ndim == 0:
            return None
        xs = a.reshape(-1).tolist()
        if not all_fractions(xs):
            return None
        x = a
        bn, bd = b.numerator, b.denominator
        if lower:
            picked = [u if u.numerator * bd <= bn * u.denominator else b for u in xs]
        else:
            picked = [u if u.numerator * bd >= bn * u.denominator else b for u in xs]
    out = np.empty(len(picked), dtype=object)
    out[:] = picked
    return out.reshape(x.shape)


def positive_part(a: Array) -> Array:
    """max(a, 0), elementwise."""
    return maximum(a, 0)


def where(cond: Array, a, b) -> Array:
    if is_torch(cond):
        return torch.where(cond, a, b)
    out = np.where(cond, a, b)
    if out.dtype != object and (is_exact(np.asarray(a)) or is_exact(np.asarray(b))):
        out = out.astype(object)
    return out


def safe_div(num: Array, den: Array, fallback) -> Array:
    """num / den where den != 0, else ``fallback`` (no ZeroDivisionError; floats: a NaN or
    infinite operand gives what IEEE division gives, NaN or inf, silently on either backend)."""
    zero = den == 0
    if is_torch(den):
        safe = torch.where(zero, torch.ones_like(den), den)
        return where(zero, fallback, num / safe)
    safe = np.where(zero, scalar(den, 1), den)
    if is_exact(den):
        return where(zero, fallback, fraction_quotients(num, safe.astype(object)))
    with float_errors():
        return where(zero, fallback, num / safe)


def mul(a: Array, b: Array) -> Array:
    """a * b elementwise (broadcast). In rationals a zero factor gives that zero and a factor
    of 1 the other factor, the very Fractions the product gives (most of the engine's stop
    masses and many correction entries are zeros); otherwise, and on floats, ``a * b``."""
    if is_exact(a) and is_exact(b):
        x, y = np.broadcast_arrays(a, b)
        if x.ndim:
            xs, ys = x.reshape(-1).tolist(), y.reshape(-1).tolist()
            if all_fractions(xs, ys):
                out = np.empty(len(xs), dtype=object)
                out[:] = [u if u.numerator == 0 or (v.numerator == 1 and v.denominator == 1)
                          else v if v.numerator == 0 or (u.numerator == 1 and u.denominator == 1)
                          else u * v for u, v in zip(xs, ys)]
                return out.reshape(x.shape)
    return a * b


def fraction_quotients(num, den) -> np.ndarray:
    """num / den elementwise (broadcast; ``den`` an object array without zeros). Where every
    entry is a Fraction, a zero numerator and a denominator of 1 give the numerator itself, the
    very Fraction the division gives (half of the exact engine's divisions are of a residual's
    zero entries); other entries keep numpy's rules."""
    n, d = np.broadcast_arrays(np.asarray(num), den)
    nl, dl = n.reshape(-1).tolist(), d.reshape(-1).tolist()
    if not all_fractions(nl, dl):
        return num / den
    out = np.empty(len(nl), dtype=object)
    out[:] = [x if x.numerator == 0 or (y.denominator == 1 and y.numerator == 1) else x / y
              for x, y in zip(nl, dl)]
    return out.reshape(n.shape)


def sum(a: Array, axis: int, keepdims: bool = False) -> Array:  # noqa: A001 - mirrors numpy
    if is_torch(a):
        return a.sum(dim=axis, keepdim=keepdims)
    if not is_exact(a):
        with float_errors():  # inf + (-inf) = NaN as on torch
            ax = axis % a.ndim if a.ndim else axis
            if a.ndim > 1 and ax != a.ndim - 1 and a.shape[ax] > 8:
                # numpy adds pairwise only along the contiguous axis (a running sum elsewhere,
                # whose error grows with the length, 16 ulps over 32,768 terms): sum a
                # contiguous copy with the axis last, as accurate as torch's staged sums
                out = np.ascontiguousarray(np.moveaxis(a, ax, -1)).sum(axis=-1)
                return np.expand_dims(out, ax) if keepdims else out
            return a.sum(axis=axis, keepdims=keepdims)
    if a.shape[axis] == 0:
        shape = list(a.shape)
        if keepdims:
            shape[axis] = 1
        else:
            del shape[axis]
        return full(shape, 0, a)
    last = np.moveaxis(a, axis, -1)  # [..., n]
    sums = fraction_sums(last.reshape(-1, a.shape[axis]).tolist())
    if sums is None:  # an entry that is not a Fraction: numpy's running sum (its type rules)
        return a.sum(axis=axis, keepdims=keepdims)
    out = np.empty(len(sums), dtype=object)
    out[:] = sums
    out = out.reshape(last.shape[:-1])
    if keepdims:
        return np.expand_dims(out, axis)
    return out if out.ndim else out[()]  # numpy's sum of a vector is the scalar


def fraction_sums(rows: list) -> list | None:
    """The exact sum of every row of ``rows`` (equal-length lists of Fractions), or None when an
    entry is not a Fraction (a bool, an int, a float: the caller adds those by numpy's rules).

    A row x_1..x_n = a_j / b_j sums to (sum_j a_j (d / b_j)) / d with d = lcm(b_1..b_n): integer
    products and additions, one Fraction (one gcd) per row, instead of a Fraction and its gcds per
    addition (rows of two are added as Fractions, which is as fast). Fractions are kept in lowest
    terms, so this is the very Fraction a running sum gives."""
    if not all_fractions(itertools.chain.from_iterable(rows)):
        return None
    if not rows or len(rows[0]) <= 2:
        return [row[0] + row[1] if len(row) == 2 else row[0] for row in rows]
    out = []
    for row in rows:
        dens = [v.denominator for v in row]
        d = lcm(*dens)
        out.append(Fraction(builtins.sum([v.numerator * (d // b) for v, b in zip(row, dens)]), d))
    return out


def cumprod(a: Array, axis: int) -> Array:
    if is_torch(a):
        return torch.cumprod(a, dim=axis)
    with float_errors():  # overflow / inf * 0 as on torch
        return np.multiply.accumulate(a, axis=axis)


def flip(a: Array, axis: int) -> Array:
    if is_torch(a):
        return torch.flip(a, dims=(axis,))
    return np.flip(a, axis=axis)


def take_along(a: Array, idx: Array, axis: int) -> Array:
    """``a`` indexed by ``idx`` along ``axis`` (torch.gather / numpy.take_along_axis)."""
    if is_torch(a):
        return torch.gather(a, axis, idx)
    return np.take_along_axis(a, np.asarray(idx), axis=axis)


def unsort(values: Array, order: Array) -> Array:
    """The array whose entry ``order[..., j]`` is ``values[..., j]`` along the last axis: undoes
    a sort by ``order`` (the inverse of ``take_along(a, order, -1)``) in one scatter, O(V)."""
    if is_torch(values):
        return torch.empty_like(values).scatter_(-1, order, values)
    out = np.empty_like(values)
    np.put_along_axis(out, np.asarray(order), values, axis=-1)
    return out


def stack(arrays: Sequence[Array], axis: int) -> Array:
    if is_torch(arrays[0]):
        return torch.stack(list(arrays), dim=axis)
    return np.stack(list(arrays), axis=axis)


def concat(arrays: Sequence[Array], axis: int) -> Array:
    if is_torch(arrays[0]):
        return torch.cat(list(arrays), dim=axis)
    return np.concatenate(list(arrays), axis=axis)


def expand_dims(a: Array, axis: int) -> Array:
    if is_torch(a):
        return a.unsqueeze(axis)
    return np.expand_dims(a, axis)


def broadcast_to(a: Array, shape: Sequence[int]) -> Array:
    if is_torch(a):
        return a.expand(*shape)
    return np.broadcast_to(a, tuple(shape))


def abs(a: Array) -> Array:  # noqa: A001 - mirrors numpy
    if is_torch(a):
        return a.abs()
    return np.abs(a)


def as_index(x: Array, like: Array) -> Array:
    """Integer token ids in the backend of ``like``."""
    if is_torch(like):
        return torch.as_tensor(x, dtype=torch.long, device=like.device)
    return np.asarray(x, dtype=np.int64)


def one_hot(idx: Array, num_classes: int, like: Array) -> Array:
    """One-hot rows in the dtype/backend of ``like`` (exact 0/1 Fractions in exact mode)."""
    if is_torch(like):
        return torch.nn.functional.one_hot(idx.long(), num_classes).to(like.dtype)
    eye = np.eye(num_classes, dtype=np.int64)[np.asarray(idx)]
    if is_exact(like):
        return to_exact(eye)
    return eye.astype(like.dtype)


def to_exact(a) -> np.ndarray:
    """A numpy object array of Fractions from ints, Fractions or decimal-exact values."""
    arr = np.asarray(a, dtype=object)
    flat = [v if isinstance(v, Fraction) else Fraction(v) for v in arr.reshape(-1)]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(arr.shape)


# ----------------------------------------------------------------------------- added for multi-path


def cumsum(a: Array, axis: int) -> Array:
    if is_torch(a):
        return torch.cumsum(a, dim=axis)
    with float_errors():
        return np.add.accumulate(a, axis=axis)


def others_mass(rows: Array) -> Array:
    """``out[..., x] = sum_{v != x} rows[..., v]`` [..., V], as the sums of the entries before
    and after x (exclusive prefix and suffix sums), never as 1 - rows[..., x]: a draft entry of
    1 - 1e-12 left 1 - q(x) with a relative error of 1e-4 (1e-17: 0), and the norep and hub
    weights with it. Exact rows: the same sums in rationals."""
    zero = zeros_like(rows[..., :1])
    before = concat([zero, cumsum(rows[..., :-1], axis=-1)], axis=-1)
    after = flip(concat([zero, cumsum(flip(rows, -1)[..., :-1], axis=-1)], axis=-1), -1)
    return before + after


def argsort(a: Array, axis: int = -1, descending: bool = False) -> Array:
    """Stable argsort (ties keep their index order, also when ``descending``); NaN ranks as
    the largest value, as on torch (last ascending, first descending)."""
    if is_torch(a):
        return torch.sort(a, dim=axis, descending=descending, stable=True).indices
    key = -a if descending else a
    if descending and not is_exact(a) and np.issubdtype(a.dtype, np.floating):
        nan = np.isnan(a)
        if nan.any():  # -NaN is NaN, which numpy sorts last: put it first (a stable lexsort)
            return np.lexsort((key, ~nan), axis=axis)
    return np.argsort(key, axis=axis, kind="stable")


def amin(a: Array, axis: int, keepdims: bool = False) -> Array:
    if is_torch(a):
        return a.amin(dim=axis, keepdim=keepdims)
    return np.min(a, axis=axis, keepdims=keepdims)


def to_int(a: Array) -> Array:
    """Booleans or integers as int64 (torch long / numpy int64)."""
    if is_torch(a):
        return a.long()
    return np.asarray(a).astype(np.int64)


def arange(n: int, like: Array) -> Array:
    """0..n-1 as int64 in the backend of ``like`` (torch long or numpy int64)."""
    if is_torch(like):
        return torch.arange(n, device=like.device)
    return np.arange(n, dtype=np.int64)


def index_add_rows(target: Array, idx: Array, values: Array) -> Array:
    """target[idx[j]] += values[j] for every j (repeated indices accumulate); in place."""
    if is_torch(target):
        target.index_add_(0, idx, values)
        return target
    np.add.at(target, np.asarray(idx), values)
    return target


def index_add_weighted(target: Array, idx: Array, weight: Array, rows: Array) -> Array:
    """target[idx[j]] += weight[j] * rows[j] for every j (``target`` [N, V], ``idx`` [M],
    ``weight`` [M], ``rows`` [M, V]); in place. In rationals the rows of weight zero are left
    out before the products: they add exact zeros, so the sums are the same Fractions."""
    if is_exact(weight):
        keep = np.flatnonzero(weight)  # truth of each Fraction: its numerator != 0
        if len(keep) < len(weight):
            idx, weight, rows = np.asarray(idx)[keep], weight[keep], rows[keep]
    return index_add_rows(target, idx, mul(expand_dims(weight, -1), rows))
