"""Bounded memos: results of pure computations kept per key, the oldest dropped when full.

The toolkit keeps a few results that a run asks for again on the same input (a verifier's law
on the same rows seed after seed, the exact laws behind a vector file, a power curve's
bisection, an engine port's candidate lists, the float analyses of an LP's bounds). Each is kept
in a [`Kept`][spectheory.runtime.kept.Kept]: a dict with a size bound, insertion-ordered, that
drops its oldest entry before it grows past the bound. What a caller stores must be immutable or
a copy the caller does not hand out (each call site says which); a key must determine the value
(a digest of the input's bytes and every parameter it depends on).
"""

from __future__ import annotations

from typing import Any, Hashable


class Kept:
    """At most ``size`` values, each under its key; the oldest is dropped first.

    ``get(key)`` is the value kept under ``key`` or None; ``keep(key, value)`` stores ``value``
    (dropping the oldest entry if ``size`` are kept) and returns it. None is never stored, so a
    ``get`` that returns None always means "not kept"."""

    __slots__ = ("size", "_values")

    def __init__(self, size: int):
        if int(size) < 1:
            raise ValueError(f"a Kept memo holds at least one value, not {size!r}")
        self.size = int(size)
        self._values: dict = {}

    def get(self, key: Hashable) -> Any:
        return self._values.get(key)

    def keep(self, key: Hashable, value: Any) -> Any:
        if value is None:
            raise ValueError("a Kept memo does not store None (get() returns None when a key "
                             "is not kept)")
        values = self._values
        if key not in values and len(values) >= self.size:
            values.pop(next(iter(values)))  # the oldest entry
        values[key] = value
        return value

    def clear(self) -> None:
        self._values.clear()

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._values
