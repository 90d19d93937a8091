"""CPU threads of the array engine (torch).

The exact engine, the verifiers and the LP builders run many small-to-medium float64 array
operations. Torch's default (one thread per core) is a poor fit for them on small machines: with
two cores, two threads contend with everything else the machine runs and are measured several
times slower than one thread, and a single thread already reaches the memory bandwidth on the
large levels of the sequence tree. The default is therefore

    threads = 1                         on machines with at most 2 cores,
    threads = min(cores // 2, 8)        otherwise,

overridden by the environment variable ``SPECTHEORY_THREADS`` (an integer >= 1), by the global
command-line option ``spectheory --threads N COMMAND ...`` (also accepted after the command,
``spectheory COMMAND ... --threads N``), and in Python by
[`set_threads`][spectheory.runtime.threads.set_threads]. Every one of them accepts at most
``min(4 * cores, 256)`` threads ([`max_threads`][spectheory.runtime.threads.max_threads]): torch's thread
pool crashes the process when asked for tens of thousands, so a larger request is refused in one
line.

The command line applies the setting before the command runs. Importing [`spectheory`][spectheory]
leaves torch's own setting alone unless ``SPECTHEORY_THREADS`` is set; call
[`set_threads`][spectheory.runtime.threads.set_threads] (with no argument for the default above) to choose.

Torch is not imported to apply the setting: when it is already loaded,
[`set_threads`][spectheory.runtime.threads.set_threads] calls ``torch.set_num_threads``; when it is not, the
setting waits, and is applied right after torch is first imported, whichever module imports it (a
one-shot import hook on ``sys.meta_path`` that wraps torch's loader for that one import). So
commands that never touch torch, such as ``spectheory instance`` and the LPs, start without paying
for it (about 1 s).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

from .errors import OptionError, is_integer
from .limits import ascii_int, human_count
from .limits import shown as _repr_cut

#: Environment variable that sets the number of threads.
ENV_VAR = "SPECTHEORY_THREADS"
#: Largest default (more threads rarely help the engine's memory-bound passes).
MAX_DEFAULT_THREADS = 8


#: Most threads accepted on any machine (torch's thread pool crashes the process, exit 139, when
#: asked for tens of thousands of threads).
MAX_THREADS = 256
#: Most threads accepted per core (more only adds contention).
THREADS_PER_CORE = 4


def max_threads(cores: int | None = None) -> int:
    """The largest thread count accepted: ``min(4 * cores, 256)``."""
    if cores is None:
        cores = os.cpu_count() or 1
    return max(1, min(THREADS_PER_CORE * cores, MAX_THREADS))


def parse_threads(value, what: str = "--threads") -> int:
    """``value`` as a thread count: an integer in [1,
    [`max_threads`][spectheory.runtime.threads.max_threads]], else `SpectheoryError` naming ``what`` and
    the limit. Checked before torch sees it: a request for 100000 threads would crash the process
    (exit 139) instead of being refused."""
    if isinstance(value, bool):
        raise OptionError(f"{what} {_repr_cut(value, 40)} must be an integer >= 1")
    n = value if isinstance(value, int) else ascii_int(value)  # ASCII digits only
    if n is None:
        raise OptionError(f"{what} {_repr_cut(value, 40)} is not an integer (threads must be >= 1)")
    if n < 1:
        raise OptionError(f"{what} {n} must be at least 1")
    limit = max_threads()
    if n > limit:
        raise OptionError(f"{what} {human_count(n)} is over the limit of {limit} threads ({THREADS_PER_CORE} "
                          f"per core on this machine's {os.cpu_count() or 1} cores, at most "
                          f"{MAX_THREADS})")
    return n


def default_threads(cores: int | None = None) -> int:
    """The default thread count: ``SPECTHEORY_THREADS`` if set, else 1 for at most 2 cores and
    ``min(cores // 2, 8)`` above."""
    env = os.environ.get(ENV_VAR)
    if env is not None and env.strip():
        return parse_threads(env, ENV_VAR)
    if cores is None:
        cores = os.cpu_count() or 1
    elif not is_integer(cores) or cores < 1:
        raise OptionError(f"cores = {_repr_cut(cores, 40)} must be an integer >= 1 (or None: this "
                          "machine's)")
    cores = int(cores)
    if cores <= 2:
        return 1
    return max(1, min(cores // 2, MAX_DEFAULT_THREADS))


def set_threads(n: int | None = None) -> int:
    """Set the number of CPU threads torch uses (intra-op), and return it.

    Torch is not imported for this: if it is not loaded yet, the setting is applied when it is.

    Parameters
    ----------
    n : int, optional
        Threads, >= 1. Default: [`default_threads`][spectheory.runtime.threads.default_threads]
        (``SPECTHEORY_THREADS``, else 1 on a machine with at most 2 cores and half the cores, at
        most 8, above).

    Raises
    ------
    SpectheoryError
        ``n`` (or ``SPECTHEORY_THREADS``) is not an integer in [1,
        [`max_threads`][spectheory.runtime.threads.max_threads]] (``min(4 * cores, 256)``).
    """
    if isinstance(n, str):  # a count given in Python is a number, not text
        raise OptionError(f"threads = {_repr_cut(n, 40)} must be an integer >= 1, not text")
    n = default_threads() if n is None else parse_threads(n, "threads =")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    else:
        _set_pending(n)
    return n


def get_threads() -> int:
    """Torch's current number of intra-op threads (imports torch, which applies a pending
    setting)."""
    import torch

    return torch.get_num_threads()


# ----------------------------------------------------------------------------- pending setting

_pending: int | None = None  # threads to set when torch is imported
_imported_with: int | None = None  # torch's own count at import, before the pending one was set


class _ThenSetThreads(importlib.abc.Loader):
    """Torch's loader, then ``torch.set_num_threads(pending)``; puts the loader back after."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        global _imported_with
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        if _pending is not None:
            _imported_with = module.get_num_threads()
            module.set_num_threads(_pending)

    def __getattr__(self, name):  # get_resource_reader, is_package, ...: the real loader's
        return getattr(self._loader, name)


class _OnTorchImport(importlib.abc.MetaPathFinder):
    """Finds torch through the other finders and wraps its loader (one shot)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        _unhook()
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenSetThreads(spec.loader)
        return spec


_HOOK = _OnTorchImport()


def _unhook() -> None:
    while _HOOK in sys.meta_path:
        sys.meta_path.remove(_HOOK)


def _set_pending(n: int | None) -> None:
    global _pending
    _pending = n
    if n is None:
        _unhook()
    elif _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)


def snapshot():
    """The thread setting as it stands, for [`restore`][spectheory.runtime.threads.restore] (imports
    nothing): torch's thread count if torch is loaded, else the pending setting (None: torch's own
    default)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return ("torch", torch.get_num_threads())
    return ("pending", _pending)


def restore(state) -> None:
    """Put back a [`snapshot`][spectheory.runtime.threads.snapshot], also when torch was imported in between
    (it then gets the count it would have started with)."""
    kind, value = state
    torch = sys.modules.get("torch")
    if torch is None:
        _set_pending(value)
        return
    if kind == "pending":
        value = _imported_with if value is None else value
    if value is not None and torch.get_num_threads() != value:
        torch.set_num_threads(value)


__all__ = ["ENV_VAR", "MAX_THREADS", "default_threads", "get_threads", "max_threads",
           "parse_threads", "restore", "set_threads", "snapshot"]
