"""Argument checks shared by the toy families
([`spectheory.toy_models.families`][spectheory.toy_models.families],
[`spectheory.toy_models.ngram`][spectheory.toy_models.ngram]): sizes, ranges and seeds, each failing
with a one-line [`InstanceError`][spectheory.runtime.errors.InstanceError]."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from spectheory.runtime.errors import InstanceError
from spectheory.runtime.limits import human_count, shown
from spectheory.inputs.instances import MAX_BLOCK, MAX_JSON_PREFIXES
from spectheory.runtime.limits import shown as _repr_cut

#: Largest vocabulary the toy families build tables for (they enumerate V**L prefixes).
MAX_TOY_VOCAB = 64


def _is_number(x) -> bool:
    return isinstance(x, (int, float, Fraction, np.integer, np.floating)) and not isinstance(x, bool)


def check_sizes(vocab_size, block_length, context_independent: bool = False,
                table_depth: int | None = None) -> tuple[int, int]:
    """Validate V and L; ``table_depth`` is the deepest table level a family will build
    (default L, or 0 for context-independent models)."""
    for name, v in (("vocab_size", vocab_size), ("block_length", block_length)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise InstanceError(f"{name} must be an integer, got {v!r}")
    V, L = int(vocab_size), int(block_length)
    if not 2 <= V <= MAX_TOY_VOCAB:
        raise InstanceError(f"vocab_size = {human_count(V)} is out of range "
                            f"(2..{MAX_TOY_VOCAB:,})")
    if not 1 <= L <= MAX_BLOCK:  # before any V^L is formed
        raise InstanceError(f"block_length = {human_count(L)} is out of range (1..{MAX_BLOCK})")
    depth = 0 if context_independent else (L if table_depth is None else table_depth)
    rows = sum(V**d for d in range(depth + 1))
    if rows > MAX_JSON_PREFIXES:
        raise InstanceError(
            f"a table model with V = {V} and depth {depth} has {rows:,} prefixes, over the limit "
            f"of {MAX_JSON_PREFIXES:,} by {rows - MAX_JSON_PREFIXES:,}; use context_independent "
            f"or smaller sizes")
    return V, L


def check_range(name: str, value, lo: float, hi: float, lo_open: bool = False,
                 hi_open: bool = False) -> float:
    if not _is_number(value):
        raise InstanceError(f"{name} must be a number, got {shown(value)}")
    try:
        v = float(value)
    except OverflowError:  # an int or Fraction past float's range: out of every range here
        v = math.inf if value > 0 else -math.inf
    ok = (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok or math.isnan(v):
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        raise InstanceError(f"{name} = {shown(value)} is out of range {lb}{lo:g}, {hi:g}{rb}")
    return v


def text_knob(name: str, value):
    """A knob given as text (``1/3``, ``0.25``) as a Fraction, read as an instance file's entries
    are (`spectheory.inputs.instances.number_text`, else a one-line `InstanceError`); any other
    value as given (`check_range` judges it)."""
    if isinstance(value, str):
        from spectheory.inputs.instances import number_text

        return number_text(value, f"{name} = {_repr_cut(value, 60)}")
    return value


def check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InstanceError(f"seed must be a non-negative integer, got {shown(seed)}")
    return int(seed)


def check_denominator(denominator) -> int | None:
    """None, or the denominator of exact rows as an int in [1, `MAX_DENOMINATOR`] (the bound of
    `random_instance`: rows times the denominator stay exact in float64 before rounding)."""
    from spectheory.inputs.random_instances import MAX_DENOMINATOR, check_integer

    return None if denominator is None else check_integer(denominator, "denominator", 1,
                                                          MAX_DENOMINATOR)


def checked(inst, what: str):
    """A family's instance, its rows checked (``check_instance``): a knob at the edge of its
    range whose rows overflow (a sigma of 1e308 gives inf - inf = NaN logits) is refused here,
    naming the family's call, rather than returned."""
    from spectheory.inputs.instances import check_instance

    try:
        return check_instance(inst, what)
    except InstanceError as exc:
        raise InstanceError(f"{what}: {exc} (these parameters are past what float64 rows can "
                            f"hold)") from None
