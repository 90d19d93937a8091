"""Autoregressive models over a finite vocabulary, stored as conditional tables by depth.

A model is given by its conditionals p(.|s) for prefixes s. We store them level by level:
``tables[d]`` has shape [V**d, V] and row ``n`` is the conditional after the prefix whose
lexicographic (base-V, most significant token first) index is ``n``; so the children of node n at
depth d are n*V + a at depth d+1, and the prefixes of one context form a contiguous block.

* A **table model** has explicit tables for every prefix up to its depth D.
* A **context-independent model** is the case D = 0 (one row used after every prefix).
* Beyond its depth a model is read as an order-D Markov chain: the conditional after a prefix
  longer than D is the table row of its last D tokens. This is what the multi-iteration analysis
  uses when it needs prefixes deeper than an instance provides.

Entries are float64 (numpy) or exact `fractions.Fraction` (numpy object arrays).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np
from ..runtime._lazy import is_tensor, torch

from ..runtime.backend import to_exact
from ..runtime.errors import InstanceError
from ..runtime.limits import shown as _repr_cut


@dataclass(frozen=True)
class TableModel:
    vocab_size: int
    tables: tuple  # tables[d]: np.ndarray [V**d, V], float64 or object (Fraction)

    @property
    def depth(self) -> int:
        return len(self.tables) - 1

    @property
    def exact(self) -> bool:
        return self.tables[0].dtype == object

    @property
    def context_independent(self) -> bool:
        return self.depth == 0

    def level(self, d: int) -> np.ndarray:
        """Conditionals after every prefix of length d, [V**d, V] (read-only view if broadcast).
        ``d`` a whole number >= 0; a level deeper than the tables is built (V**d rows), so its
        memory is checked first against the machine's
        ([`check_memory`][spectheory.runtime.limits.check_memory]; the engines' own size guards
        come before it)."""
        V, D = self.vocab_size, self.depth
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 0:
            raise InstanceError(f"level d = {_repr_cut(d, 40)} must be a whole number >= 0 (a prefix "
                                "length)")
        d = int(d)
        if d > D and V > 1 and (d > 62 or (d + 1) * math.log2(V) > 62):  # before V ** d is made
            from ..runtime.errors import SizeLimitError

            raise SizeLimitError(f"level d = {_repr_cut(d, 40)} of a depth-{D} model would have "
                                 f"V^(d+1) entries with V = {V}, past 2^62")
        if d > D > 0:  # built (a context-independent model's level is a broadcast view)
            from ..runtime.limits import check_memory

            check_memory(V ** d * V * (100 if self.exact else 8),
                         f"level {d} of a depth-{D} model (V^(d+1) = {V}^{d + 1} entries)")
        if d <= D:
            return self.tables[d]
        if D == 0:
            return np.broadcast_to(self.tables[0], (V**d, V))
        return self.tables[D][np.arange(V**d) % (V**D)]

    def conditional(self, prefix: Sequence[int]) -> np.ndarray:
        """p(.|prefix) for one prefix (any length) of token ids in 0..V-1."""
        V = self.vocab_size
        try:
            prefix = tuple(prefix)
        except TypeError:  # None, a number
            raise InstanceError(f"prefix = {_repr_cut(prefix, 40)} must be a sequence of token "
                                f"ids in 0..{V - 1}") from None
        for t in prefix:
            if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)) \
                    or not 0 <= t < V:
                raise InstanceError(f"prefix token {_repr_cut(t, 40)} is not a token id in 0..{V - 1}")
        s = tuple(prefix)[-self.depth:] if self.depth else ()
        n = 0
        for t in s:
            n = n * self.vocab_size + int(t)
        return self.tables[len(s)][n]

    def torch_level(self, d: int, device="cpu", dtype=None) -> torch.Tensor:
        """Conditionals after every prefix of length d as a torch tensor [V**d, V]
        (``dtype`` default: float64)."""
        if self.exact:
            raise TypeError("exact model: use level() (object array) instead of torch_level()")
        rows = self.level(d)
        if not rows.flags.c_contiguous:  # a context-independent model's broadcast view: copied
            from ..runtime.limits import check_memory

            check_memory(rows.size * 8, f"level {d} of a context-independent model as a tensor "
                         f"(V^(d+1) = {self.vocab_size}^{int(d) + 1} entries)")
        return torch.as_tensor(np.ascontiguousarray(rows),
                               dtype=torch.float64 if dtype is None else dtype, device=device)

    def to_float(self) -> "TableModel":
        if not self.exact:
            return self
        return TableModel(self.vocab_size, tuple(t.astype(np.float64) for t in self.tables))

    def to_exact(self) -> "TableModel":
        """Exact copy; floats are converted through their shortest decimal representation.

        Raises [`InstanceError`][spectheory.runtime.errors.InstanceError] when a converted row does not sum
        to exactly 1 (exact analysis of such a model would report spurious lossiness).
        """
        if self.exact:
            return self
        tables = []
        for d, t in enumerate(self.tables):
            ex = to_exact(np.vectorize(lambda v: Fraction(repr(float(v))), otypes=[object])(t))
            sums = ex.sum(axis=1)
            bad = np.flatnonzero(sums != 1)
            if len(bad):
                n = int(bad[0])
                off = sums[n] - 1  # the float of the sum may print as 1
                raise InstanceError(
                    f"row {n} at depth {d} sums to 1 {'+' if off > 0 else '-'} "
                    f"{float(abs(off)):.3g} after converting its floats to exact rationals, "
                    f"not exactly 1; give exact fractions instead")
            tables.append(ex)
        return TableModel(self.vocab_size, tuple(tables))


def context_independent(probs) -> TableModel:
    """A model using the same conditional after every prefix."""
    flat = np.asarray(probs, dtype=object).reshape(-1) if not isinstance(probs, np.ndarray) \
        else probs.reshape(-1)
    if any(isinstance(v, (str, bytes, bool, np.bool_, np.str_)) for v in flat):
        raise InstanceError("context_independent: the row must be numbers (floats, or exact "
                            "Fractions), not text or booleans")
    try:
        row = np.asarray(probs, dtype=object if _has_fraction(probs) else np.float64)
    except (TypeError, ValueError) as err:
        raise InstanceError(f"context_independent: the row must be numbers (floats, or exact "
                            f"Fractions), not {str(err).splitlines()[0][:80]}") from None
    if row.ndim != 1 or row.size == 0:
        raise InstanceError(f"context_independent: the row must be one non-empty list of V "
                            f"probabilities, got shape {list(row.shape)}")
    return TableModel(len(row), (row.reshape(1, -1),))


def prefix_index(prefix: Sequence[int], vocab_size: int) -> int:
    n = 0
    for t in prefix:
        n = n * vocab_size + int(t)
    return n


def prefix_from_index(n: int, depth: int, vocab_size: int) -> tuple:
    out = []
    for _ in range(depth):
        n, t = divmod(n, vocab_size)
        out.append(t)
    return tuple(reversed(out))


def all_prefixes(depth: int, vocab_size: int, like=None):
    """All prefixes of one length as token ids [V**depth, depth] (lexicographic order)."""
    n = np.arange(vocab_size**depth, dtype=np.int64)
    powers = vocab_size ** np.arange(depth - 1, -1, -1, dtype=np.int64)
    tokens = (n[:, None] // powers[None, :]) % vocab_size
    if like is not None and is_tensor(like):
        return torch.as_tensor(tokens, device=like.device)
    return tokens


def _has_fraction(values) -> bool:
    return any(isinstance(v, Fraction) for v in np.asarray(values, dtype=object).reshape(-1))
