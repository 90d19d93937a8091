"""Pieces shared by several verifiers (kept here so that no formula has two copies)."""

from __future__ import annotations

import numpy as np
from ..runtime._lazy import torch

from ..runtime import backend as B
from ..runtime.errors import InputError, check_arrays
from ..law import engine_rows, rows_follow_prefixes  # noqa: F401  (the engine's declaration)


def drafted_probs(drafts, q, p):
    """p(X_i|X^{i-1}) and q(X_i|X^{i-1}) for i = 1..L, each [B, L]."""
    check_arrays(drafts, q, p, paths=False)
    L = drafts.shape[-1]
    idx = B.expand_dims(B.as_index(drafts, q), -1)
    px = B.take_along(p[:, :L], idx, axis=-1)[..., 0]
    qx = B.take_along(q, idx, axis=-1)[..., 0]
    return px, qx


def residuals(weights, q, p):
    """max(w_i p(.|X^i) - q(.|X^i), 0) for i = 0..L-1, [B, L, V]; ``weights`` [B, L]."""
    L = q.shape[1]
    return B.positive_part(B.expand_dims(weights, -1) * p[:, :L] - q)


def residual_corrections(res, p, total=None):
    """Corrections normalise(res_i) for i < L (``res`` from
    [`residuals`][spectheory.verifiers.common.residuals]), and p(.|X^L) at i = L. A residual of
    total mass zero (a stop that has probability zero) falls back to p(.|X^i), so every row is a
    distribution and nothing is NaN. Returns [B, L+1, V]. ``total`` [B, L, 1] may pass the residual
    masses when the caller already has them.
    """
    L = res.shape[1]
    if total is None:
        total = B.sum(res, axis=-1, keepdims=True)
    corr = B.safe_div(res, total, p[:, :L])
    return B.concat([corr, p[:, L:]], axis=1)


def stop_from_acceptance_weights(h):
    """P(tau = i) = h_i * prod_{j>i} (1 - h_j) for independent eta_i ~ Bernoulli(h_i), tau = max
    {i : eta_i = 1}; h [B, L+1] with h_0 = 1."""
    survive = B.flip(B.cumprod(B.flip(1 - h, 1), axis=1), 1)  # prod_{j>=i} (1 - h_j)
    tail = B.concat([survive[:, 1:], B.ones_like(h[:, :1])], axis=1)  # prod_{j>i}
    return h * tail


def normalise_residual(res, total, p):
    """Correction rows res / total [N, V] (``total`` [N]), falling back to the target row p where
    the residual mass is zero (a stop of probability zero). Equal to
    ``residual_corrections`` row by row; on torch the division runs in place and only the rare
    zero rows are patched, so it costs one pass over the rows."""
    zero = total == 0
    if B.is_torch(res):
        out = res.div_(torch.where(zero, torch.ones_like(total), total).unsqueeze(-1))
        if bool(zero.any()):
            rows = torch.nonzero(zero).reshape(-1)
            out[rows] = p[rows]
        return out
    return B.safe_div(res, B.expand_dims(total, -1), p)


def float_law_only(p, name: str) -> None:
    """TypeError naming the verifier when its rows ``p`` are not a torch tensor: a law that uses
    exp, log or other operations with no exact rational form has a float law only."""
    if not hasattr(p, "shape"):  # not rows at all: the caller's input, not a float-only law
        raise InputError(f"{name}: p must be an array of rows (a torch tensor), not "
                         f"{type(p).__name__}")
    if not B.is_torch(p):
        raise TypeError(f"{name} has a float (torch) law only")


def drafted_ratio(px, qx):
    """p(X_i|X^{i-1}) / q(X_i|X^{i-1}), capped (`cap_ratio`); a draft token of probability zero
    gets ratio 1."""
    if B.is_torch(px):  # one division; the rare zero-probability drafts patched afterwards
        r = torch.div(px, qx)
        zero = qx == 0
        if bool(zero.any()):
            r = torch.where(zero, torch.ones_like(r), r)
        return cap_ratio(r)
    return cap_ratio(B.safe_div(px, qx, B.scalar(px, 1)))


def cap_ratio(r):
    """``r`` at most the largest finite value of its float dtype (in place on torch), NaN kept;
    exact rows as they are. p / q overflows to inf where q is subnormal (1 / 3e-315), and a
    weight that had underflowed to 0 times inf was NaN (block verification "NOT A LAW" on valid
    rows); capped, 0 times the cap is 0. Only a draft of probability below 5.6e-309 reaches the
    cap, so the law moves by less than that."""
    if B.is_torch(r):
        return r.clamp_(max=torch.finfo(r.dtype).max)
    r = np.asarray(r)
    return np.minimum(r, np.finfo(r.dtype).max) if r.dtype.kind == "f" else r


def positive_residual(w, p, q, out=None):
    """max(w p - q, 0) row by row: ``w`` [N] (or None for w = 1), ``p``, ``q`` [N, V] (the same
    values as [`residuals`][spectheory.verifiers.common.residuals]; on torch built in one array,
    ``out`` if given, in place)."""
    if B.is_torch(p):
        if w is None:
            return torch.sub(p, q, out=out).clamp_(min=0)
        return torch.mul(p, w.unsqueeze(-1), out=out).sub_(q).clamp_(min=0)
    if w is None:
        return B.positive_part(p - q)
    return B.positive_part(B.expand_dims(w, -1) * p - q)


#: Fewest batch rows for which [`on_distinct`][spectheory.verifiers.common.on_distinct] looks for
#: repeated inputs (below it the search costs more than it saves).
DISTINCT_MIN_ROWS = 512


def _unique_inverse(key):
    """(number of distinct values, index of each entry's value among them) of an int array
    >= 0 (values ranked in increasing order). On torch, keys below a few times the number of
    entries are ranked by marking the values present and a cumulative sum instead of a sort."""
    if B.is_torch(key):
        top = int(key.max()) + 1
        if top <= max(4 * int(key.shape[0]), 4096):
            present = torch.zeros(top, dtype=key.dtype, device=key.device)
            present[key] = 1
            rank = present.cumsum_(0)
            return int(rank[-1]), rank.index_select(0, key).sub_(1)
        uniq, inverse = torch.unique(key, return_inverse=True)
    else:
        uniq, inverse = np.unique(np.asarray(key), return_inverse=True)
    return int(uniq.shape[0]), inverse.reshape(-1)


def on_distinct(fn, key, args, keyed: int = 0, prefix_rows: tuple = (),
                min_rows: int | None = None, expand: bool = True):
    """``fn(*args)`` evaluated once per distinct input row and copied to the repeats, or None.

    Parameters
    ----------
    fn : callable
        Treats rows independently (row r of each output depends on row r of each input only)
        and returns a tuple of arrays with the batch first.
    key : int array [N]
        Groups rows expected to have equal inputs (in the exact engine, where every joint
        outcome shares one context, the drafted tokens that determine them), values >= 0.
    args : tuple of arrays
        The inputs, batch (N rows) first. Each row is compared exactly with its group's
        representative, so a key that groups unequal rows costs time, never correctness,
        except for the two kinds below.
    keyed : int
        The first ``keyed`` args are encoded in the key one to one (equal keys imply equal
        rows): not compared.
    prefix_rows : tuple of int
        Indices of args that are rows q, p at nodes whose drafted prefix the key encodes, taken from
        the engine's own arrays (the caller has checked
        [`engine_rows`][spectheory.law.engine_rows]): not compared, since there equal
        prefixes carry equal rows by construction.
    min_rows : int, optional
        Fewer rows are not searched (default `DISTINCT_MIN_ROWS`).
    expand : bool
        False: return ``(outputs on the distinct rows, inverse)``, row r's output being row
        inverse[r] (for callers that gather several at once).

    Returns
    -------
    The outputs, equal to ``fn(*args)`` row by row; or None (the caller evaluates every row)
    for too few rows, mostly distinct keys (more than N / 2), or a grouping the rows refute.
    """
    N = int(key.shape[0])
    if N < (DISTINCT_MIN_ROWS if min_rows is None else min_rows):
        return None
    U, inverse = _unique_inverse(key)
    if 2 * U > N:
        return None
    rep = B.zeros_like(inverse[:U])
    rep[inverse] = B.arange(N, inverse)  # some row of each group
    trusted = set(range(keyed)) | set(prefix_rows)
    reps = []
    for i, a in enumerate(args):
        r = take_rows(a, rep)
        if i not in trusted and not _equal(take_rows(r, inverse), a):
            return None
        reps.append(r)
    if not expand:
        return tuple(fn(*reps)), inverse
    return tuple(take_rows(o, inverse) for o in fn(*reps))


def take_rows(a, idx):
    """a[idx] along the first axis (on torch index_select, cheaper than advanced indexing)."""
    return a.index_select(0, idx) if B.is_torch(a) else a[idx]


def _equal(a, b) -> bool:
    """Every entry of a equals (==) the corresponding entry of b (NaN equals nothing)."""
    if B.is_torch(a):
        return torch.equal(a, b)
    return bool((a == b).all())
