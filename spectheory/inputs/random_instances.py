"""Random instances: Dirichlet conditional tables for the target and the draft.

Every row of the target (all prefixes of length <= L) and of the draft (length < L) is drawn
i.i.d. from a symmetric Dirichlet(alpha): small alpha gives peaked, dissimilar conditionals (low
acceptance), large alpha near-uniform ones. With ``denominator`` D, each row is rounded to
multiples of 1/D that sum to exactly 1 (largest-remainder rounding), giving exact Fractions for
exact rational analysis; such rows may contain exact zeros.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..runtime.errors import InstanceError, check_flag
from ..runtime.limits import check_real, shown
from .instances import MAX_BLOCK, MAX_VOCAB, Instance, _trusted
from .models import TableModel
from ..runtime.sizes import check_size


def quantize_rows(rows: np.ndarray, denominator: int) -> np.ndarray:
    """Round each row to multiples of 1/denominator summing exactly to 1 (object Fractions)."""
    scaled = rows * denominator
    base = np.floor(scaled).astype(np.int64)
    short = denominator - base.sum(axis=1)
    order = np.argsort(-(scaled - base), axis=1, kind="stable")
    # the short[r] entries first in that order get one more unit: those of rank < short[r]
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(order.shape[1]), order.shape),
                      axis=1)
    base += rank < short[:, None]
    return _as_fractions(base, denominator)


def _as_fractions(counts: np.ndarray, denominator: int) -> np.ndarray:
    """counts / denominator as Fractions, one Fraction built per distinct count."""
    values, inverse = np.unique(counts.reshape(-1), return_inverse=True)
    fractions = [Fraction(int(c), denominator) for c in values]
    out = np.empty(counts.size, dtype=object)
    out[:] = [fractions[j] for j in inverse.reshape(-1).tolist()]
    return out.reshape(counts.shape)


#: Rows drawn per call of the generator: a level's rows are written into one table chunk by
#: chunk (the same values as one draw: the generator's stream is consumed row by row), so a
#: large level needs no second full-size temporary.
CHUNK_ROWS = 2**20


def _dirichlet_rows(rng: np.random.Generator, V: int, n: int, alpha: float,
                    normalise: bool) -> np.ndarray:
    out = np.empty((n, V))
    for r0 in range(0, n, CHUNK_ROWS):
        r1 = min(r0 + CHUNK_ROWS, n)
        rows = rng.dirichlet(np.full(V, float(alpha)), size=r1 - r0)
        out[r0:r1] = rows / rows.sum(axis=1, keepdims=True) if normalise else rows
    return out


def dirichlet_model(rng: np.random.Generator, V: int, depth: int, alpha: float,
                    context_independent: bool = False, denominator: int | None = None
                    ) -> TableModel:
    """A table model whose rows at depths 0..depth (depth 0 only if ``context_independent``) are
    i.i.d. Dirichlet(alpha), each divided by its sum, or rounded to multiples of 1/``denominator``
    ([`quantize_rows`][spectheory.inputs.random_instances.quantize_rows]). No size guard:
    [`random_instance`][spectheory.inputs.random_instances.random_instance] has it."""
    tables = []
    for d in range(1 if context_independent else depth + 1):
        rows = _dirichlet_rows(rng, V, V**d, alpha, normalise=not denominator)
        tables.append(quantize_rows(rows, denominator) if denominator else rows)
    return TableModel(V, tuple(tables))


#: Accepted range of the Dirichlet concentration alpha.
ALPHA_RANGE = (1e-3, 1e6)
#: Largest denominator of exact rows (rows * D must stay exact in float64 before rounding).
MAX_DENOMINATOR = 10**9
#: Seeds accepted: 0 .. 2^63 - 1.
MAX_SEED = 2**63 - 1


def check_integer(value, name: str, lo: int, hi: int) -> int:
    """``value`` as an int: a whole number (an int or numpy integer, not a bool) in [lo, hi], else
    [`InstanceError`][spectheory.runtime.errors.InstanceError] naming it and its range."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InstanceError(f"{name} = {shown(value)} must be an integer in [{lo:,}, {hi:,}]")
    if not lo <= value <= hi:
        raise InstanceError(f"{name} = {shown(value)} is out of range [{lo:,}, {hi:,}]")
    return int(value)


def check_seed(seed, name: str = "seed") -> int:
    """A seed must be an integer in [0, 2^63 - 1]."""
    return check_integer(seed, name, 0, MAX_SEED)


def check_alpha(alpha, name: str = "alpha") -> float:
    """The Dirichlet concentration must be a finite number in [1e-3, 1e6]."""
    return check_real(alpha, f"{name} =", *ALPHA_RANGE, InstanceError)


def random_instance(vocab_size: int, block_length: int, seed: int, alpha: float = 1.0,
                    context_independent: bool = False, denominator: int | None = None
                    ) -> Instance:
    """A random (draft, target) instance; target rows for depth <= L, draft rows for depth < L.

    Parameters are validated first (vocab_size in [2, 10^6], block_length in [1, 64], seed in
    [0, 2^63 - 1], alpha finite in [1e-3, 1e6], denominator in [1, 10^9]); a bad one raises
    [`InstanceError`][spectheory.runtime.errors.InstanceError] (a ``ValueError``) naming it and its range.
    """
    V = check_integer(vocab_size, "vocab_size", 2, MAX_VOCAB)
    L = check_integer(block_length, "block_length", 1, MAX_BLOCK)
    context_independent = check_flag(context_independent, "context_independent")
    seed = check_seed(seed)
    alpha = check_alpha(alpha)
    if denominator is not None:
        denominator = check_integer(denominator, "denominator", 1, MAX_DENOMINATOR)
    if not context_independent:  # the deepest target table has V^(L+1) entries
        check_size(V ** (L + 1), "random table instance", exact=bool(denominator),
                   formula=f"V^(L+1) = {V}^{L + 1}")
    rng = np.random.default_rng(seed)
    target = dirichlet_model(rng, V, L, alpha, context_independent, denominator)
    draft = dirichlet_model(rng, V, L - 1, alpha, context_independent, denominator)
    for name, model in (("target", target), ("draft", draft)):
        for t in model.tables:
            if t.dtype != object and not np.isfinite(t).all():  # cannot happen in range; guard
                raise InstanceError(f"random {name} rows are not finite for alpha = {alpha}")
    return _trusted(Instance(V, L, target, draft))  # Dirichlet rows: distributions
