"""The law of a verifier's output, the common currency of the whole toolkit.

A verifier is a pure, batched function of the drafted paths and the conditionals along them. In
its general (K-path) form

    verifier(drafts [B, K, L], q [B, K, L, V], p [B, K, L+1, V]) -> Law

where ``q[b, k, i] = q(.|c, X_k^i)`` (i = 0..L-1) and ``p[b, k, i] = p(.|c, X_k^i)`` (i = 0..L) are
the full draft and target rows at every drafted node. It returns the conditional law of its
output given the drafts:

* ``stop[b, k, i] = P(output follows path k, tau = i | drafts)``; it sums to 1 over (k, i);
* ``correction[b, k, i, :]``, the distribution of the extra token Y given (k, tau = i); for
  tau = L it is the bonus distribution p(.|X_k^L).

The output block is (X_{k,1}..X_{k,tau}, Y). A single-path verifier is the case K = 1 and may be
written without the path axis: ``verifier(drafts [B, L], q [B, L, V], p [B, L+1, V])`` with
``stop [B, L+1]`` and ``correction [B, L+1, V]`` (token and block verification are written that
way). [`VerifierSpec`][spectheory.registry.VerifierSpec] adapts either form to the K-path one, so
the exact engine, the checker, the sampler and the real-model loop each exist once.

[`validate_law`][spectheory.law.validate_law] is the checker's guard: a law with NaN or infinite
entries, negative probabilities, rows that do not sum to one, the wrong shape, or floats inside an
exact-mode law is refused with a [`LawError`][spectheory.law.LawError] naming the class, the row and
the value, so that no verdict is ever computed from it.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
from fractions import Fraction
from math import lcm
from typing import Any, Callable, NamedTuple

import numpy as np
from .runtime._lazy import is_tensor, torch
from .runtime.backend import all_fractions

from .runtime.errors import InputError, SpectheoryError


class Law(NamedTuple):
    """``stop`` [B, L+1] or [B, K, L+1]; ``correction`` [B, L+1, V] or [B, K, L+1, V]."""

    stop: Any
    correction: Any

    @property
    def has_path_axis(self) -> bool:
        """True for the K-path form (stop of rank 3)."""
        return len(self.stop.shape) == 3


#: Kept for the K-path form's name in signatures; the same type as [`Law`][spectheory.law.Law].
MultiLaw = Law


def empty_law(p) -> Law:
    """The law of a batch of no drafts (B = 0): stop [0, L+1] or [0, K, L+1] and corrections of
    the shape of ``p``, in its backend and dtype (the law functions' answer to an empty batch,
    instead of an error from inside them)."""
    from .runtime import backend as B

    return Law(B.zeros_like(p[..., 0]), B.zeros_like(p))

#: A single-path verifier ``f(drafts [B, L], q [B, L, V], p [B, L+1, V]) -> Law``.
Verifier = Callable[[Any, Any, Any], Law]
#: A K-path verifier ``f(drafts [B, K, L], q [B, K, L, V], p [B, K, L+1, V]) -> Law``.
MultiVerifier = Callable[[Any, Any, Any], Law]

#: Largest |row sum - 1| accepted in a float64 law (float64 laws of the library's verifiers are
#: within 1e-15 of 1; a correction normalised in float32 is within ~1e-6: pass a larger tolerance).
ROW_SUM_TOL = 1e-9


def dtype_tolerance(arr, vocab: int) -> float:
    """The row-sum tolerance of a float law of ``arr``'s dtype: `ROW_SUM_TOL` for float64 (up to
    a million tokens), 4 V eps of a coarser float (float32, float16, bfloat16: a row normalised
    in that dtype is within about V eps / 2 of 1), at most 1e-2."""
    if is_tensor(arr):
        eps = torch.finfo(arr.dtype).eps if arr.dtype.is_floating_point else 0.0
    else:
        dtype = getattr(arr, "dtype", None)
        eps = float(np.finfo(dtype).eps) if dtype is not None and dtype.kind == "f" else 0.0
    return max(ROW_SUM_TOL, min(1e-2, 4 * vocab * eps))


class LawError(InputError):
    """A verifier returned something that is not a law: the checker refuses to give a verdict.

    ``kind`` is one of ``"shape"``, ``"nan"``, ``"inf"``, ``"negative"``, ``"stop-sum"``,
    ``"correction-sum"``, ``"not-exact"``; ``where`` the offending index; ``value`` the entry.
    A check reports it as its verdict (NOT A LAW) also when the user's verifier raised it
    itself (``validate_law`` on its own result).
    """

    user_code_raises = False

    def __init__(self, kind: str, message: str, where: tuple | None = None, value: Any = None):
        super().__init__(message)
        self.kind = kind
        self.where = where
        self.value = value

    def __reduce__(self):  # rebuilt with all four fields (worker processes send it back)
        return (type(self), (self.kind, str(self), self.where, self.value))


def _first(mask) -> tuple:
    idx = np.argwhere(np.asarray(mask))
    return tuple(int(i) for i in idx[0])


def _as_numpy(x):
    if is_tensor(x):
        if x.dtype == torch.bfloat16:  # numpy has no bfloat16: its values, exactly, in float32
            x = x.float()
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _real_dtype(law, name: str) -> None:
    """Refuse, as a `LawError`, a float-mode law whose tables hold complex numbers, strings or
    other values that are not real numbers (probabilities are real)."""
    for what, arr in zip(("stop", "correction"), law):
        if is_tensor(arr):
            bad = arr.is_complex()
        else:
            kind = getattr(getattr(arr, "dtype", None), "kind", "f")
            bad = kind not in "fiubO"
        if bad:
            raise LawError("dtype", f"{name} returned a {arr.dtype} {what}; a law holds real "
                           "probabilities (float64 or float32)")


_NOT_EXACT, _NEGATIVE = 1, 2


def _exact_code(v) -> int:
    """0 for a Fraction or integer >= 0 (not a bool), `_NEGATIVE` for a negative one,
    `_NOT_EXACT` for anything else (a Fraction's sign is its numerator's)."""
    if type(v) is Fraction:
        return _NEGATIVE if v.numerator < 0 else 0
    if isinstance(v, (Fraction, int, np.integer)) and not isinstance(v, bool):
        return _NEGATIVE if v < 0 else 0
    return _NOT_EXACT


def _rows_ok(rows: list) -> bool:
    """Every row (a list of Fractions) >= 0 and summing to exactly 1: with d = lcm of the row's
    denominators, sum_j n_j (d / b_j) = d, in integers (no Fraction built)."""
    for row in rows:
        nums = [v.numerator for v in row]
        if min(nums) < 0:
            return False
        dens = [v.denominator for v in row]
        d = lcm(*dens)
        if sum([n * (d // b) for n, b in zip(nums, dens)]) != d:
            return False
    return True


def _fractions_ok(stop, corr, batch: int, vocab: int) -> bool:
    """A sufficient test that the exact branch of [`validate_law`][spectheory.law.validate_law]
    accepts (stop, correction) of the checked shapes: both object arrays of Fractions only, no
    numerator below zero, every stop table and every correction row summing to exactly 1. Anything
    else returns False and goes through the checks that name the problem, so no law is accepted
    that they would refuse."""
    if not (isinstance(stop, np.ndarray) and isinstance(corr, np.ndarray)) or \
            stop.dtype != object or corr.dtype != object or stop.size == 0 or corr.size == 0:
        return False
    srows = stop.reshape(batch, -1).tolist()
    crows = corr.reshape(-1, vocab).tolist()
    for rows in (srows, crows):
        if not all_fractions(itertools.chain.from_iterable(rows)):  # rows are not empty
            return False
    return _rows_ok(srows) and _rows_ok(crows)


def law_form(law: Any, batch: int, paths: int, length: int, vocab: int,
             name: str = "verifier") -> tuple:
    """``(stop, correction)`` of ``law``, or a [`LawError`][spectheory.law.LawError] for a result
    that is not such a pair, or of shapes other than stop [batch, paths, length+1] and
    correction [batch, paths, length+1, vocab]: the form `validate_law` checks before the
    values (and the sampler checks, whose reference laws may hold NaN rows, check alone)."""
    try:
        stop, corr = law
    except (TypeError, ValueError):
        raise LawError("shape", f"{name} returned {type(law).__name__}, not a law "
                       f"(stop, correction)") from None
    want_s = (batch, paths, length + 1)
    want_c = (batch, paths, length + 1, vocab)
    for what, arr, want in (("stop", stop, want_s), ("correction", corr, want_c)):
        if is_tensor(arr) and arr.device.type == "meta":
            raise LawError("dtype", f"{name} returned {what} on the meta device, which holds "
                           "no values")
        shape = tuple(getattr(arr, "shape", ()))
        if shape != want:
            raise LawError("shape", f"{name} returned {what} of shape {list(shape)}, expected "
                           f"{list(want)} ([B, K, L+1{', V' if what == 'correction' else ''}])")
    return stop, corr


def validate_law(law: Any, batch: int, paths: int, length: int, vocab: int, exact: bool,
                 drafts=None, tol: float = ROW_SUM_TOL, name: str = "verifier") -> Law:
    """Check that ``law`` is a K-path law of the expected shape and return it.

    Raises [`LawError`][spectheory.law.LawError] for: a result that is not ``(stop, correction)``;
    shapes other than stop [batch, paths, length+1] and correction [batch, paths, length+1, vocab];
    NaN or infinite entries; negative probabilities; a stop table whose entries do not sum to 1 over
    (k, i); a correction row (every one, also where P(tau = i) = 0) that does not sum to 1; a float
    or other non-rational entry in an exact-mode law (``exact=True``: only Fractions and integers).
    Float sums are compared with ``tol``, or with the law's own dtype's tolerance where that is
    larger (`dtype_tolerance`: a float32 or float16 law, as a user's verifier may return, is
    held to its own rounding); exact sums must equal 1 exactly. ``drafts`` [batch, paths,
    length] (optional) lets the message name the draft of the offending row.
    """
    stop, corr = law_form(law, batch, paths, length, vocab, name)

    def draft_of(ix):
        if drafts is None:
            return ""
        d = _as_numpy(drafts)[ix[0], ix[1]].tolist()
        return f" (draft {tuple(int(t) for t in d)})"

    def at(what, ix):
        b, k, i = ix[:3]
        return f"{what}[b={b}, k={k}, tau={i}" + (f", y={ix[3]}]" if len(ix) > 3 else "]")

    if exact:
        if _fractions_ok(stop, corr, batch, vocab):
            return Law(stop, corr)
        negative = {}  # object arrays: the sign read in the pass that checks the types
        for what, arr in (("stop", stop), ("correction", corr)):
            a = np.asarray(arr, dtype=object) if not isinstance(arr, np.ndarray) else arr
            if a.dtype != object and not np.issubdtype(a.dtype, np.integer):
                raise LawError("not-exact", f"{name} returned a {a.dtype} {what} in exact mode "
                               f"(entries must be Fractions)", None, None)
            if a.dtype == object:
                code = np.frompyfunc(_exact_code, 1, 1)(a).astype(np.int8)
                ok = code != _NOT_EXACT
                if not ok.all():
                    ix = _first(~ok)
                    v = a[ix]
                    raise LawError("not-exact", f"{name}: {at(what, ix)} = {v!r} is a "
                                   f"{type(v).__name__}, not a Fraction, in an exact-mode "
                                   f"law{draft_of(ix)}", ix, v)
                negative[what] = code == _NEGATIVE
        s = np.asarray(stop, dtype=object)
        c = np.asarray(corr, dtype=object)
        for what, a in (("stop", s), ("correction", c)):
            neg = negative[what] if what in negative else a < 0
            if neg.any():
                ix = _first(neg)
                raise LawError("negative", f"{name}: negative probability {at(what, ix)} = "
                               f"{a[ix]}{draft_of(ix)}", ix, a[ix])
        tot = s.sum(axis=(1, 2))
        bad = tot != 1
        if bad.any():
            b = int(np.flatnonzero(bad)[0])
            raise LawError("stop-sum", f"{name}: stop probabilities of batch row {b} sum to "
                           f"{tot[b]}, not 1{draft_of((b, 0))}", (b,), tot[b])
        rows = c.sum(axis=3)
        bad = rows != 1
        if bad.any():
            ix = _first(bad)
            raise LawError("correction-sum", f"{name}: correction row {at('correction', ix)} "
                           f"sums to {rows[ix]}, not 1{draft_of(ix)} (every row must be a "
                           f"distribution, also where P(tau) = 0)", ix, rows[ix])
        return Law(stop, corr)
    _real_dtype((stop, corr), name)
    note_rounding(stop, corr)
    tol = max(tol, dtype_tolerance(stop, vocab), dtype_tolerance(corr, vocab))
    s = _as_numpy(stop)
    c = _as_numpy(corr)
    if s.dtype == object or c.dtype == object:
        raise LawError("not-exact", f"{name} returned an object array (exact values?) in float "
                       f"mode")
    for what, a in (("stop", s), ("correction", c)):
        for kind, mask in (("nan", np.isnan(a)), ("inf", np.isinf(a)), ("negative", a < 0)):
            if mask.any():
                ix = _first(mask)
                label = {"nan": "NaN", "inf": "infinite", "negative": "negative"}[kind]
                raise LawError(kind, f"{name}: {label} probability {at(what, ix)} = "
                               f"{float(a[ix])!r}{draft_of(ix)}", ix, float(a[ix]))
    tot = s.sum(axis=(1, 2))
    err = np.abs(tot - 1)
    if (err > tol).any():
        b = int(np.argmax(err > tol))
        raise LawError("stop-sum", f"{name}: stop probabilities of batch row {b} sum to "
                       f"{float(tot[b])!r}, not 1 (tolerance {tol:g}){draft_of((b, 0))}", (b,),
                       float(tot[b]))
    rows = c.sum(axis=3)
    err = np.abs(rows - 1)
    if (err > tol).any():
        ix = _first(err > tol)
        raise LawError("correction-sum", f"{name}: correction row {at('correction', ix)} sums "
                       f"to {float(rows[ix])!r}, not 1 (tolerance {tol:g}){draft_of(ix)}; every row "
                       f"must be a distribution, also where P(tau) = 0", ix, float(rows[ix]))
    return Law(stop, corr)


_LAW_ROUNDING = contextvars.ContextVar("spectheory_law_rounding", default=None)


def note_rounding(stop, corr) -> None:
    """Note, for `law_rounding`, the machine epsilon of the coarsest float dtype of a float law
    (`validate_law` does; a route that accepts a law by a cheaper test calls it itself)."""
    box = _LAW_ROUNDING.get()
    if box is None:
        return
    for arr in (stop, corr):
        if is_tensor(arr):
            eps = torch.finfo(arr.dtype).eps if arr.dtype.is_floating_point else 0.0
            name = str(arr.dtype).replace("torch.", "")
        else:
            dt = getattr(arr, "dtype", None)
            eps = float(np.finfo(dt).eps) if dt is not None and dt.kind == "f" else 0.0
            name = str(dt)
        if eps > box[0]:
            box[0], box[1] = float(eps), name


@contextlib.contextmanager
def law_rounding():
    """Collect, over the float laws `validate_law` accepts inside the block, the machine epsilon
    of their coarsest dtype and its name: yields a list ``[eps, name]``, ``[0.0, ""]`` until a
    law is seen (float64 laws: 2.2e-16; a verifier returning float32: 1.2e-7). The lossless
    checker reads it to tell a float32 law's rounding from a loss."""
    box = [0.0, ""]
    token = _LAW_ROUNDING.set(box)
    try:
        yield box
    finally:
        _LAW_ROUNDING.reset(token)


_ENGINE_ROWS = contextvars.ContextVar("spectheory_engine_rows", default=None)


@contextlib.contextmanager
def rows_follow_prefixes(drafts, q, p):
    """Declare, for the verifier call inside the block, that the rows ``q``, ``p`` handed over with
    ``drafts`` are functions of the drafted prefix: the exact engine's joint outcomes below one
    context, whose rows it gathers from one table per path
    ([`path_tables`][spectheory.engine.joint.path_tables]). A verifier that receives exactly these
    three arrays ([`engine_rows`][spectheory.law.engine_rows]) may let
    [`on_distinct`][spectheory.verifiers.common.on_distinct] skip comparing the rows its key
    determines through the prefix; rows it derives itself, or arrays other than these (a real
    model's batch mixes contexts; a wrapper may change the rows), are always compared."""
    token = _ENGINE_ROWS.set((drafts, q, p))
    try:
        yield
    finally:
        _ENGINE_ROWS.reset(token)


def engine_rows(drafts, q, p) -> bool:
    """True when (drafts, q, p) are the very arrays declared by
    [`rows_follow_prefixes`][spectheory.law.rows_follow_prefixes]."""
    declared = _ENGINE_ROWS.get()
    return declared is not None and declared[0] is drafts and declared[1] is q \
        and declared[2] is p


__all__ = ["Law", "LawError", "MultiLaw", "MultiVerifier", "ROW_SUM_TOL", "Verifier",
           "engine_rows", "law_rounding", "note_rounding", "rows_follow_prefixes",
           "validate_law"]
