"""Keep freed memory for reuse (glibc malloc), so large temporaries do not page-fault.

The exact engine allocates many temporaries of one level of the sequence tree (V^L entries, 16 MiB
at V = 8, L = 7) one after the other. With glibc's defaults an allocation above its mmap threshold
(at most 32 MiB, adapted at run time) gets fresh pages from the kernel, and the first write to every
4 KiB page faults: on the V = 8, L = 7 block analysis that costs about a third of the time.
[`keep_freed_memory`][spectheory.runtime.allocator.keep_freed_memory] raises the mmap threshold to 1 GiB and
the trim threshold to 2 GiB, so such blocks come from the heap and freed ones are reused (the
process may keep up to 2 GiB of freed memory for reuse instead of returning it at once).

The ``spectheory`` command line applies it before every command (disable with
``SPECTHEORY_MALLOC=default``; ``tuned`` or unset applies it, any other value is refused at
start-up); in Python call it once. Same effect as the environment variables
``MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=2147483647`` of glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util

from .errors import OptionError
from .limits import MALLOC_ENV, env_malloc

#: glibc mallopt parameters.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Largest value mallopt takes (its value is a C ``int``).
INT_MAX = (1 << 31) - 1
#: Environment variable: "default" leaves the allocator alone in the command line, "tuned" (or
#: unset) applies `keep_freed_memory`; any other value is refused at start-up
#: ([`env_malloc`][spectheory.runtime.limits.env_malloc]).
ENV_VAR = MALLOC_ENV


def _bytes_argument(value, name: str) -> int:
    """``value`` as a whole number of bytes in [0, `INT_MAX`] (an integer, not a bool); else one
    [`OptionError`][spectheory.runtime.errors.OptionError] line naming ``name`` and the value."""
    import operator

    if isinstance(value, bool):
        ok = None
    else:
        try:
            ok = operator.index(value)
        except TypeError:
            ok = None
    if ok is None:
        from .errors import shown

        raise OptionError(f"keep_freed_memory: {name}={shown(value)} is not a whole number of "
                          "bytes")
    if not 0 <= ok <= INT_MAX:
        shown = str(ok) if ok.bit_length() <= 200 else f"an integer of {ok.bit_length()} bits"
        raise OptionError(f"keep_freed_memory: {name}={shown} is out of range [0, {INT_MAX}] "
                          "(mallopt takes a C int)")
    return ok


_LIBC: list = []  # the C library's name, once looked up


def _libc_name() -> str:
    """The C library's file name, looked up once per process (``ctypes.util.find_library``
    runs ``ldconfig -p`` in a child process on each call: about 1.5 ms of every command)."""
    if not _LIBC:
        _LIBC.append(ctypes.util.find_library("c") or "libc.so.6")
    return _LIBC[0]


def keep_freed_memory(mmap_threshold: int = 1 << 30, trim_threshold: int = (1 << 31) - 1
                      ) -> bool:
    """Serve allocations below ``mmap_threshold`` bytes from the heap and keep up to
    ``trim_threshold`` bytes of freed memory for reuse (glibc ``mallopt``). Returns True when
    applied, False where the C library has no ``mallopt`` (not glibc): then nothing changes.

    Both are whole numbers of bytes in [0, `INT_MAX`] (mallopt's arguments are C ``int``);
    anything else (a bool, a float, a negative or larger number) is refused with an
    [`OptionError`][spectheory.runtime.errors.OptionError] before mallopt is called."""
    mmap_threshold = _bytes_argument(mmap_threshold, "mmap_threshold")
    trim_threshold = _bytes_argument(trim_threshold, "trim_threshold")
    try:
        libc = ctypes.CDLL(_libc_name())
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)
                and mallopt(M_TRIM_THRESHOLD, trim_threshold))


def apply_default() -> bool:
    """What the command line does: [`keep_freed_memory`][spectheory.runtime.allocator.keep_freed_memory]
    unless ``SPECTHEORY_MALLOC`` is ``default`` (a value other than ``default``, ``tuned`` or
    empty raises [`OptionError`][spectheory.runtime.errors.OptionError])."""
    if env_malloc() == "default":
        return False
    return keep_freed_memory()


__all__ = ["ENV_VAR", "apply_default", "keep_freed_memory"]
