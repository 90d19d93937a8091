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
``spectheory COMMAND ... --threads N``), and in Python by :func:`set_threads`.

The command line applies the setting before the command runs. Importing :mod:`spectheory` leaves
torch's own setting alone unless ``SPECTHEORY_THREADS`` is set; call :func:`set_threads` (with
no argument for the default above) to choose.
"""

from __future__ import annotations

import os

from .errors import SpectheoryError

#: Environment variable that sets the number of threads.
ENV_VAR = "SPECTHEORY_THREADS"
#: Largest default (more threads rarely help the engine's memory-bound passes).
MAX_DEFAULT_THREADS = 8


def parse_threads(value, what: str = "--threads") -> int:
    """``value`` as a thread count: an integer >= 1, else :class:`SpectheoryError`."""
    if isinstance(value, bool):
        raise SpectheoryError(f"{what} {value!r} must be an integer >= 1")
    try:
        n = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise SpectheoryError(f"{what} {value!r} is not an integer (threads must be >= 1)") from None
    if n < 1:
        raise SpectheoryError(f"{what} {n} must be at least 1")
    return n


def default_threads(cores: int | None = None) -> int:
    """The default thread count: ``SPECTHEORY_THREADS`` if set, else 1 for at most 2 cores and
    ``min(cores // 2, 8)`` above."""
    env = os.environ.get(ENV_VAR)
    if env is not None and env.strip():
        return parse_threads(env, ENV_VAR)
    if cores is None:
        cores = os.cpu_count() or 1
    if cores <= 2:
        return 1
    return max(1, min(cores // 2, MAX_DEFAULT_THREADS))


def set_threads(n: int | None = None) -> int:
    """Set the number of CPU threads torch uses (intra-op), and return it.

    Parameters
    ----------
    n : int, optional
        Threads, >= 1. Default: :func:`default_threads` (``SPECTHEORY_THREADS``, else 1 on a
        machine with at most 2 cores and half the cores, at most 8, above).

    Raises
    ------
    SpectheoryError
        ``n`` (or ``SPECTHEORY_THREADS``) is not an integer >= 1.
    """
    n = default_threads() if n is None else parse_threads(n, "threads =")
    import torch

    torch.set_num_threads(n)
    return n


def get_threads() -> int:
    """Torch's current number of intra-op threads."""
    import torch

    return torch.get_num_threads()


__all__ = ["ENV_VAR", "default_threads", "get_threads", "parse_threads", "set_threads"]
