"""Keep freed memory for reuse (glibc malloc), so large temporaries do not page-fault.

The exact engine allocates many temporaries of one level of the sequence tree (V^L entries, 16 MiB
at V = 8, L = 7) one after the other. With glibc's defaults an allocation above its mmap threshold
(at most 32 MiB, adapted at run time) gets fresh pages from the kernel, and the first write to every
4 KiB page faults: on the V = 8, L = 7 block analysis that costs about a third of the time.
[`keep_freed_memory`][spectheory.runtime.allocator.keep_freed_memory] raises the mmap threshold to 1 GiB and
the trim threshold to 2 GiB, so such blocks come from the heap and freed ones are reused (the
process may keep up to 2 GiB of freed memory for reuse instead of returning it at once).

The ``spectheory`` command line applies it before every command (disable with
``SPECTHEORY_MALLOC=default``); in Python call it once. Same effect as the environment variables
``MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=2147483647`` of glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

#: glibc mallopt parameters.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Environment variable: "default" leaves the allocator alone in the command line.
ENV_VAR = "SPECTHEORY_MALLOC"


def keep_freed_memory(mmap_threshold: int = 1 << 30, trim_threshold: int = (1 << 31) - 1
                      ) -> bool:
    """Serve allocations below ``mmap_threshold`` bytes from the heap and keep up to
    ``trim_threshold`` bytes of freed memory for reuse (glibc ``mallopt``). Returns True when
    applied, False where the C library has no ``mallopt`` (not glibc): then nothing changes."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, int(mmap_threshold))
                and mallopt(M_TRIM_THRESHOLD, int(trim_threshold)))


def apply_default() -> bool:
    """What the command line does: [`keep_freed_memory`][spectheory.runtime.allocator.keep_freed_memory]
    unless ``SPECTHEORY_MALLOC`` is ``default``."""
    if os.environ.get(ENV_VAR, "").strip().lower() == "default":
        return False
    return keep_freed_memory()


__all__ = ["ENV_VAR", "apply_default", "keep_freed_memory"]
