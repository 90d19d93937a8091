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

from .errors import InstanceError
from .instances import Instance
from .models import TableModel
from .tree import check_size


def quantize_rows(rows: np.ndarray, denominator: int) -> np.ndarray:
    """Round each row to multiples of 1/denominator summing exactly to 1 (object Fractions)."""
    scaled = rows * denominator
    base = np.floor(scaled).astype(np.int64)
    short = denominator - base.sum(axis=1)
    order = np.argsort(-(scaled - base), axis=1, kind="stable")
    for r in range(rows.shape[0]):
        base[r, order[r, : short[r]]] += 1
    return _as_fractions(base, denominator)


def _as_fractions(counts: np.ndarray, denominator: int) -> np.ndarray:
    out = np.empty(counts.shape, dtype=object)
    flat = out.reshape(-1)
    for k, c in enumerate(counts.reshape(-1)):
        flat[k] = Fraction(int(c), denominator)
    return out


def dirichlet_model(rng: np.random.Generator, V: int, depth: int, alpha: float,
                    context_independent: bool = False, denominator: int | None = None
                    ) -> TableModel:
    tables = []
    for d in range(1 if context_independent else depth + 1):
        rows = rng.dirichlet(np.full(V, float(alpha)), size=V**d)
        if denominator:
            tables.append(quantize_rows(rows, denominator))
        else:
            tables.append(rows / rows.sum(axis=1, keepdims=True))
    return TableModel(V, tuple(tables))


def random_instance(vocab_size: int, block_length: int, seed: int, alpha: float = 1.0,
                    context_independent: bool = False, denominator: int | None = None
                    ) -> Instance:
    """A random (draft, target) instance; target rows for depth <= L, draft rows for depth < L."""
    V, L = int(vocab_size), int(block_length)
    if V < 2:
        raise InstanceError(f"vocab_size = {V} is out of range (at least 2)")
    if L < 1:
        raise InstanceError(f"block_length = {L} is out of range (at least 1)")
    if not alpha > 0:
        raise InstanceError(f"alpha = {alpha} must be positive")
    if denominator is not None and denominator < 1:
        raise InstanceError(f"denominator = {denominator} must be a positive integer")
    if not context_independent:  # the deepest target table has V^(L+1) entries
        check_size(V ** (L + 1), "random table instance", exact=bool(denominator),
                   formula=f"V^(L+1) = {V}^{L + 1}")
    rng = np.random.default_rng(seed)
    target = dirichlet_model(rng, V, L, alpha, context_independent, denominator)
    draft = dirichlet_model(rng, V, L - 1, alpha, context_independent, denominator)
    return Instance(V, L, target, draft)
