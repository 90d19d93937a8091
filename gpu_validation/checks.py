"""Checks of the inputs of the real-model experiments, run before any work starts.

Each check raises [`SpectheoryError`][spectheory.runtime.errors.SpectheoryError] with one line naming the
value and the accepted range (the command line prints it and exits with code 2). The configuration
dataclasses of `spectheory.gpu_validation.experiments` call them in ``__post_init__``, so the Python
API refuses the same inputs with the same message.
"""

from __future__ import annotations

import math
import numbers

from spectheory.runtime.errors import SpectheoryError

#: Largest seed accepted: seeds feed ``torch.Generator.manual_seed``, ``random.Random`` and
#: ``numpy.random.default_rng``, which agree on [0, 2**32).
MAX_SEED = 2 ** 32 - 1


def check_int(name: str, value, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int in [lo, hi] (either bound may be None), else a one-line error."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise SpectheoryError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise SpectheoryError(f"{name} = {value} is out of range; accepted: {_range(lo, hi)}")
    return value


def check_float(name: str, value, lo: float | None = None, hi: float | None = None,
                lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a finite float in the interval from lo to hi (open ends when asked)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SpectheoryError(f"{name} must be a number, got {value!r}")
    value = float(value)
    bad = not math.isfinite(value)
    if lo is not None:
        bad = bad or value < lo or (lo_open and value == lo)
    if hi is not None:
        bad = bad or value > hi or (hi_open and value == hi)
    if bad:
        left = "-inf" if lo is None else f"{lo:g}"
        right = "inf" if hi is None else f"{hi:g}"
        interval = f"{'(' if lo_open or lo is None else '['}{left}, {right}" \
                   f"{')' if hi_open or hi is None else ']'}"
        raise SpectheoryError(f"{name} = {value!r} is out of range; accepted: a finite number "
                              f"in {interval}")
    return value


def check_choice(name: str, value, choices) -> str:
    """``value`` must be one of ``choices``."""
    if value not in choices:
        raise SpectheoryError(f"unknown {name} {value!r}; choose from {', '.join(choices)}")
    return value


def check_seed(value) -> int:
    return check_int("seed", value, 0, MAX_SEED)


def parse_int_list(name: str, text: str, lo: int = 1, hi: int | None = None) -> tuple[int, ...]:
    """A comma list of integers (``"4,8"``) in ASCII digits as a sorted tuple, each in [lo, hi];
    a value listed twice is refused (``--L 4,4``), as a name listed twice is."""
    from spectheory.runtime.limits import ascii_int

    parts = [s.strip() for s in str(text).split(",")]
    if not text or any(not s for s in parts):
        raise SpectheoryError(f"{name} must be a comma list of integers like 4,8, got {text!r}")
    out = set()
    for s in parts:
        v = ascii_int(s)  # int() read other scripts' digits and 1_0
        if v is None:
            raise SpectheoryError(f"{name} must be a comma list of integers like 4,8, got "
                                  f"{text!r} ({s!r} is not an integer in ASCII digits)")
        if v in out:
            raise SpectheoryError(f"{name} lists {v} twice: {text!r}")
        out.add(check_int(name, v, lo, hi))
    return tuple(sorted(out))


def parse_name_list(name: str, text: str) -> tuple[str, ...]:
    """A comma list of names (``"token,block"``), order kept, repeats refused."""
    parts = [s.strip() for s in str(text).split(",")]
    if not text or any(not s for s in parts):
        raise SpectheoryError(f"{name} must be a comma list of names, got {text!r}")
    if len(set(parts)) != len(parts):
        raise SpectheoryError(f"{name} lists a name twice: {text!r}")
    return tuple(parts)


def check_device(device: str) -> str:
    """A torch device this machine has: ``cpu``, ``cuda`` or ``cuda:N``."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise SpectheoryError(f"unknown device {device!r}; use cpu, cuda or cuda:N") from None
    if dev.type == "cpu":
        return device
    if dev.type != "cuda":
        raise SpectheoryError(f"device {device!r} is not supported here; use cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise SpectheoryError(f"device {device!r} asked for, but CUDA is not available on this "
                              "machine; use --device cpu")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise SpectheoryError(f"device {device!r}: this machine has "
                              f"{torch.cuda.device_count()} CUDA device(s)")
    return device


def _range(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f"{lo} to {hi}"
    if lo is not None:
        return f">= {lo}"
    return f"<= {hi}"


__all__ = ["MAX_SEED", "check_int", "check_float", "check_choice", "check_seed",
           "parse_int_list", "parse_name_list", "check_device"]
