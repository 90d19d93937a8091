"""Size guards: refuse an enumeration of the sequence tree over the limit, before allocating it.

The exact engine ([`spectheory.engine`][spectheory.engine]), the LPs and the instance generators
enumerate V**(L+1) sequences or more; [`check_size`][spectheory.runtime.sizes.check_size] names the
sizes, memory and time of a refused enumeration in one line.
"""

from __future__ import annotations

import os

import numpy as np

from . import limits
from .errors import OptionError, SizeLimitError
from .limits import human_bytes, shown  # one format of byte counts in every refusal (re-exported)

#: Default limit on the number of leaves an enumeration may touch (float64 mode); the environment
#: variable SPECTHEORY_MAX_SEQUENCES overrides it (read on use:
#: [`max_sequences`][spectheory.runtime.sizes.max_sequences]).
DEFAULT_MAX_SEQUENCES = limits.ENV_LIMITS["SPECTHEORY_MAX_SEQUENCES"]
#: Default limit in exact rational mode (Python Fractions are ~1000x slower and ~20x bigger);
#: environment variable SPECTHEORY_MAX_EXACT_SEQUENCES.
DEFAULT_MAX_EXACT_SEQUENCES = limits.ENV_LIMITS["SPECTHEORY_MAX_EXACT_SEQUENCES"]

#: Bytes per leaf the exact engine keeps alive at once (about six float64 arrays over the
#: leaves: target levels, output law, target law, emitted-block masses), and in exact mode.
BYTES_PER_LEAF = {False: 6 * 8, True: 6 * 120}


def max_sequences(exact: bool = False) -> int:
    """The default enumeration limit, from the environment when set (validated on each call)."""
    return limits.env_limit("SPECTHEORY_MAX_EXACT_SEQUENCES" if exact
                            else "SPECTHEORY_MAX_SEQUENCES")


def check_size(count: int, what: str, exact: bool = False, limit: int | None = None,
               formula: str = "", outcomes: bool = False, remedy: str | None = None,
               bytes_per_leaf: int | None = None, node: bool = False,
               seconds: float | None = None) -> None:
    """Refuse an enumeration of ``count`` leaves over the limit, naming sizes, memory and time
    (``node``: a float analysis on the per-node route, whose time is estimated at its own rate).

    ``limit`` None means the default ([`max_sequences`][spectheory.runtime.sizes.max_sequences]); an explicit
    limit must be a positive integer. The time estimate uses the throughput constants of
    [`spectheory.runtime.limits`][spectheory.runtime.limits] (``outcomes``: ``count`` joint draft outcomes of the
    K-path engine). An accepted enumeration estimated above `spectheory.runtime.limits.NOTE_SECONDS` is
    announced on stderr by the command line before it starts. ``remedy`` replaces the advice
    that ends a refusal (default: a smaller vocabulary or block length, or ``--max-sequences``
    where the command takes it, else the environment variable: a sweep job and
    `spectheory.random_instance` take no ``max_sequences``), for a limit that no option raises. ``bytes_per_leaf`` replaces `BYTES_PER_LEAF` for an
    enumeration that holds more a leaf than the engine's levels. The memory stated is checked
    against the machine's ([`check_memory`][spectheory.runtime.limits.check_memory]) for every
    count of leaves, however its limit was raised (``--max-sequences`` of 10^15 let L = 30 over
    V = 2 run 37 s into a MemoryError), and for joint outcomes (``outcomes``, enumerated in
    chunks of bounded memory) only with ``bytes_per_leaf``. ``seconds`` replaces the time
    estimate for a route whose cost is not a rate per leaf (the adaptive draft's Python calls
    per prefix)."""
    if not isinstance(exact, (bool, np.bool_)):
        raise OptionError(f"exact = {exact!r} must be True or False")
    exact = bool(exact)
    var = "SPECTHEORY_MAX_EXACT_SEQUENCES" if exact else "SPECTHEORY_MAX_SEQUENCES"
    from_env = limit is None and bool(os.environ.get(var, "").strip())
    given = limit is not None  # by a command's --max-sequences or a function's max_sequences=
    if limit is None:
        limit = max_sequences(exact)
    elif isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise OptionError(f"max_sequences = {shown(limit)} must be a positive integer")
    count = int(count)
    own = seconds is not None
    if not own:
        seconds = limits.estimate_seconds(count, exact, outcomes, node)
    rate = ("exact" if exact else "outcomes" if outcomes else "node" if node else "float")
    per_leaf = BYTES_PER_LEAF[exact] if bytes_per_leaf is None else int(bytes_per_leaf)
    need = human_bytes(count * per_leaf)
    mode = "exact" if exact else "float64"
    if count > limit:
        raise SizeLimitError(
            f"{what}: {formula + ' = ' if formula else ''}{limits.human_count(count)} "
            f"sequences exceed the {mode} limit of {limit:,} by {limits.human_count(count - limit)} "
            f"({limits.ratio(count, limit)}; about {need} of memory and "
            f"{limits.human_seconds(seconds)} would be needed); "
            + (remedy or "use a smaller vocabulary or block length, or raise the limit with "
                         + (f"{var} (set to {limit:,} here) or a command's --max-sequences"
                            if from_env else "--max-sequences" if given else
                            f"--max-sequences (max_sequences= in Python) where the command or "
                            f"function takes it, else {var}")))
    if bytes_per_leaf is not None or not outcomes:  # the levels grow with the leaves
        limits.check_memory(count * per_leaf, f"{what}: {formula + ' = ' if formula else ''}"
                            f"{limits.human_count(count)} sequences",
                            "use a smaller vocabulary or block length")
    if seconds > limits.NOTE_SECONDS:
        per = {"exact": limits.EXACT_SEQUENCES_PER_SECOND, "float": limits.FLOAT_SEQUENCES_PER_SECOND,
               "outcomes": limits.OUTCOMES_PER_SECOND,
               "node": limits.NODE_SEQUENCES_PER_SECOND}[rate]
        limits.note(f"{what}: {count:,} {'outcomes' if outcomes else 'sequences'}, estimated "
                    f"{limits.human_seconds(seconds)}"
                    f"{'' if own else f' (at about {per:.2g}/s)'} and {need}; "
                    f"--time-limit SECONDS bounds it")


__all__ = ["BYTES_PER_LEAF", "DEFAULT_MAX_EXACT_SEQUENCES", "DEFAULT_MAX_SEQUENCES", "check_size",
           "human_bytes", "max_sequences"]
