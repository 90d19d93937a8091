"""Bounded memos: results of pure computations kept per key, the oldest dropped when full.

The toolkit keeps a few results that a run asks for again on the same input (a verifier's law
on the same rows seed after seed, the exact laws behind a vector file, a power curve's
bisection, an engine port's candidate lists, the float analyses of an LP's bounds). Each is kept
in a [`Kept`][spectheory.runtime.kept.Kept]: a dict with a size bound, insertion-ordered, that
drops its oldest entry before it grows past the bound. What a caller stores must be immutable or
a copy the caller does not hand out (each call site says which); a key must determine the value
(a digest of the input's bytes and every parameter it depends on:
[`digest`][spectheory.runtime.kept.digest]).
"""

from __future__ import annotations

import hashlib
from typing import Any, Hashable

import numpy as np

from ._lazy import is_tensor

#: The parameters `digest` takes as they are (by their ``repr``, tagged with their type).
_SCALARS = (bool, int, float, str, type(None))


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


def digest(*parts) -> bytes | None:
    """A key for a `Kept` memo: a 32-byte BLAKE2b digest of ``parts`` in order, or None when a
    part is not one this function reads (then nothing should be kept for the call).

    Each array part enters as its dtype, shape and bytes (C order), so equal values of another
    dtype or shape give another digest:

    * a numpy array of numbers or booleans (not an object array: Fractions are not bytes);
    * a torch tensor on the CPU, strided, not requiring grad and not complex (bfloat16 and the
      other dtypes numpy lacks are read as raw bytes);

    a ``bool``, ``int``, ``float``, ``str`` or None enters as its type and ``repr``. Anything
    else (a CUDA tensor, a tensor in autograd, a list, a Fraction) gives None."""
    h = hashlib.blake2b(digest_size=32)
    for x in parts:
        if is_tensor(x):
            import torch

            if x.device.type != "cpu" or x.requires_grad or x.is_complex() \
                    or x.layout != torch.strided:
                return None
            h.update(f"tensor|{x.dtype}|{tuple(x.shape)}|".encode())
            h.update(x.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(x, np.ndarray):
            if x.dtype.kind not in "biuf":
                return None
            h.update(f"ndarray|{x.dtype.str}|{x.shape}|".encode())
            h.update(np.ascontiguousarray(x).tobytes())
        elif type(x) in _SCALARS:
            h.update(f"{type(x).__name__}|{x!r}|".encode())
        else:
            return None
    return h.digest()


__all__ = ["Kept", "digest"]
