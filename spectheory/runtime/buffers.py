"""Large output arrays that reuse freed memory instead of fresh pages.

A verifier's law at the real-model shape writes its correction rows into one new array (350 MB
for B = 64 blocks of L + 1 = 9 rows over V = 151,936 tokens in float32, 1.4 GB for K = 4 paths).
Memory of that size comes straight from the kernel (``mmap``) and goes back to it when the array
is freed, so every call pays a page fault and the kernel's zeroing on the first write to each
page: on a 2-core x86_64 machine about 0.5 ms per MB, i.e. 0.2 s for 350 MB and 0.7 s for 1.4 GB,
more than computing the law itself. A loop that evaluates laws of one shape batch after batch (the
real-model loop, a benchmark, a sweep) would fault in the same amount again at every call.

[`empty`][spectheory.runtime.buffers.empty] keeps large buffers in a small pool (the idea of
PyTorch's CUDA caching allocator, for host memory): a request is served by a pooled buffer that
nothing references any more, else by a new one that joins the pool. A buffer is in use exactly
while some array or tensor built on it is alive (its reference count, which every view and every
tensor made from it holds), so a law that is still referenced is never overwritten. The arrays it
returns are uninitialised, as ``torch.empty``: the laws that use it write every entry.

Only requests of at least ``MIN_BYTES`` (64 MiB) are pooled. The pool
holds at most [`capacity`][spectheory.runtime.buffers.capacity] bytes (default: a quarter of the
machine's memory, at most 8 GiB; environment variable ``SPECTHEORY_BUFFER_POOL`` in bytes, with
suffixes K, M, G, at most the machine's memory; ``0`` turns pooling off); free buffers are
dropped, oldest first, to stay under it. [`release`][spectheory.runtime.buffers.release] returns every free buffer to the system.
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np

from ._lazy import torch
from .limits import BUFFER_POOL_ENV, env_bytes

#: Requests below this many bytes are plain allocations (no pool).
MIN_BYTES = 64 << 20
#: Environment variable: pool capacity in bytes (``0``: off); checked at the command line's
#: start-up ([`check_environment`][spectheory.runtime.limits.check_environment]).
ENV_VAR = BUFFER_POOL_ENV

_lock = threading.Lock()
_pool: list[np.ndarray] = []  # uint8 base buffers, oldest first
_capacity: int | None = None


def capacity() -> int:
    """Bytes the pool may hold (in use and free together); 0 when pooling is off."""
    global _capacity
    if _capacity is None:
        env = env_bytes(ENV_VAR)
        if env is not None:
            _capacity = env
        else:
            try:
                total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            except (ValueError, OSError, AttributeError):
                total = 4 << 30
            _capacity = min(total // 4, 8 << 30)
    return _capacity


def _free(i: int) -> bool:
    # references: the pool's list and getrefcount's own argument; any view or tensor adds one
    return sys.getrefcount(_pool[i]) <= 2


def _fresh(nbytes: int) -> np.ndarray:
    """New memory from torch's allocator, seen as a uint8 numpy array (which keeps the tensor
    alive). Not numpy's own: numpy asks the kernel for huge pages on large arrays, and first
    writes to a fresh 1.4 GB of huge pages measured 3-4x slower than to plain pages here."""
    return torch.empty(nbytes, dtype=torch.uint8).numpy()


def _take(nbytes: int) -> np.ndarray:
    """A uint8 buffer of at least ``nbytes`` bytes that nothing else references."""
    cap = capacity()
    if nbytes < MIN_BYTES or nbytes > cap:
        return _fresh(nbytes)
    with _lock:
        best = None
        for i in range(len(_pool)):  # the smallest free buffer that fits, up to twice the size
            size = _pool[i].nbytes
            if nbytes <= size <= 2 * nbytes and _free(i) and (
                    best is None or size < _pool[best].nbytes):
                best = i
        if best is not None:
            buf = _pool.pop(best)
            _pool.append(buf)  # most recently used last
            return buf
        held = sum(b.nbytes for b in _pool)
        i = 0
        while held + nbytes > cap and i < len(_pool):  # drop free buffers, oldest first
            if _free(i):
                held -= _pool.pop(i).nbytes
            else:
                i += 1
        buf = _fresh(nbytes)
        if held + nbytes <= cap:
            _pool.append(buf)
        return buf


def empty(shape, dtype) -> "torch.Tensor":
    """An uninitialised CPU tensor of ``shape`` and torch ``dtype``, from the pool when it is
    float32 or float64 and large (module doc); other dtypes get ``torch.empty``."""
    shape = tuple(int(n) for n in shape)
    np_dtype = {torch.float32: np.float32, torch.float64: np.float64}.get(dtype)
    if np_dtype is None:
        return torch.empty(shape, dtype=dtype)
    count = 1
    for n in shape:
        count *= n
    nbytes = count * np.dtype(np_dtype).itemsize
    buf = _take(nbytes)
    return torch.from_numpy(buf[:nbytes].view(np_dtype).reshape(shape))


def empty_like(p) -> "torch.Tensor":
    """[`empty`][spectheory.runtime.buffers.empty] with the shape and dtype of a CPU float tensor
    ``p``; other tensors get ``torch.empty`` on their device."""
    if p.device.type == "cpu" and p.dtype in (torch.float32, torch.float64):
        return empty(p.shape, p.dtype)
    return torch.empty(tuple(p.shape), dtype=p.dtype, device=p.device)


def pooled_bytes() -> tuple[int, int]:
    """(bytes held by the pool, of which free)."""
    with _lock:
        return (sum(b.nbytes for b in _pool),
                sum(_pool[i].nbytes for i in range(len(_pool)) if _free(i)))


def release() -> int:
    """Drop every free buffer (the memory goes back to the system); returns the bytes freed."""
    with _lock:
        freed, i = 0, 0
        while i < len(_pool):
            if _free(i):
                freed += _pool.pop(i).nbytes
            else:
                i += 1
        return freed


__all__ = ["ENV_VAR", "MIN_BYTES", "capacity", "empty", "empty_like", "pooled_bytes", "release"]
