"""Size, time and environment limits, read when they are used (never at import).

* **Environment variables** (`ENV_LIMITS`) raise or lower the default size limits. They are read and
  validated on every use by [`env_limit`][spectheory.runtime.limits.env_limit], so a bad value gives one
  [`OptionError`][spectheory.runtime.errors.OptionError] naming the variable and the accepted range instead
  of breaking ``import spectheory`` (and with it ``spectheory --help``).
* **Time**: [`running`][spectheory.runtime.limits.running] sets a wall-clock limit
  (``--time-limit SECONDS``) for a block of work. Long loops call
  [`check_time`][spectheory.runtime.limits.check_time] between chunks; LP solves read
  [`remaining`][spectheory.runtime.limits.remaining] and hand it to the solver; a ``SIGALRM`` backstop (main
  thread, POSIX) stops a single long step shortly after the limit. On expiry a
  [`TimeLimitError`][spectheory.runtime.errors.TimeLimitError] is raised and nothing is printed or written.
* **Estimates**: [`estimate_seconds`][spectheory.runtime.limits.estimate_seconds] turns an enumeration size
  into a time estimate from the throughput constants below, so the size guard
  ([`check_size`][spectheory.runtime.sizes.check_size]) can say how long a run will take before it starts.

Throughput constants were measured with ``python benchmarks/bench_limits.py`` (one torch thread,
random table instances; results with the machine in ``benchmarks/results/bench_limits.json``)
and rounded down to the lowest rate seen, so estimates lean long: a run usually finishes well
within its estimate (up to about 7x sooner).
"""

from __future__ import annotations

import gc
import math
import os
import re
import signal
import sys
import threading
import time
from fractions import Fraction
from contextlib import contextmanager

from .errors import OptionError, SizeLimitError, TimeLimitError
from .errors import about_digits, shown  # noqa: F401  (defined beside the errors; used here)

#: Environment variables that set default size limits, with their defaults.
ENV_LIMITS = {
    "SPECTHEORY_MAX_SEQUENCES": 2**26,
    "SPECTHEORY_MAX_EXACT_SEQUENCES": 200_000,
    "SPECTHEORY_MAX_LP_VARIABLES": 8_000_000,
    "SPECTHEORY_MAX_EXACT_LP_VARIABLES": 200_000,
    "SPECTHEORY_MAX_SYMPY_LP_VARIABLES": 1_500,
}
#: Largest value a size limit may be set to (an environment variable or ``--max-sequences``).
MAX_LIMIT = 10**15
#: Longest ``--time-limit`` accepted, in seconds (one week).
MAX_TIME_LIMIT = 7 * 24 * 3600.0

#: Output-law leaves (sequences of length L+1, V^(L+1)) per second of the float64 engine, one
#: path (block verification on V, L = 8, 6 / 16, 5 / 4, 9: 2.2e5 - 1.4e6 in the recorded run,
#: up to 7.7e6 in others; the rates vary several-fold between runs, the lowest is used).
FLOAT_SEQUENCES_PER_SECOND = 2.0e5
#: The same on the per-node route of one path (token and block verification, float64:
#: `analyze` of random V, L = 8, 6 / 4, 10 / 2, 20 / 2, 22 (context-independent), 3.5e6 - 6.7e7
#: with the compiled kernels loaded, 8.9e5 for a first call that loads them; the lowest, rounded
#: down). Used where the analysis will run on that route.
NODE_SEQUENCES_PER_SECOND = 8.0e5
#: The same in exact rational mode (Python Fractions; V, L = 4, 6 / 3, 9: 9.0e2 - 1.6e3 in the
#: recorded run, up to 6.6e3 in others).
EXACT_SEQUENCES_PER_SECOND = 8.0e2
#: Joint draft outcomes per second of the K-path engine, float64 (specinfer V, L, K = 3, 5, 2
#: and GBV 3, 4, 3 / 4, 4, 2: 2.0e4 - 2.5e4 in the recorded run, up to 2.3e5 in others).
OUTCOMES_PER_SECOND = 2.0e4
#: Estimated run time above which the command line notes the estimate before starting.
NOTE_SECONDS = 30.0

_INT = re.compile(r"[0-9]+")
_SIGNED_INT = re.compile(r"[+-]?[0-9]{1,4000}")


def ascii_int(text) -> int | None:
    """``text`` (surrounding blanks ignored) as an int when it is an optional sign and 1 to 4,000
    ASCII digits, else None: Python's ``int()`` also reads other scripts' digits (``"٣"``) and
    ``"1_0"``, and a hand-made test such as ``lstrip("+-")`` lets ``"+-5"`` through to it."""
    s = str(text).strip()
    return int(s) if _SIGNED_INT.fullmatch(s) else None


def parse_limit(text, name: str, lo: int = 1, hi: int = MAX_LIMIT) -> int:
    """A size limit written as decimal digits or a whole number in scientific notation (``1e6``,
    as ``--max-sequences`` and ``--samples`` take it), in [lo, hi]; else
    [`OptionError`][spectheory.runtime.errors.OptionError]. The range is checked on the text's
    value before an integer of its size is made."""
    from decimal import Decimal

    s = str(text).strip()
    if _INT.fullmatch(s):
        value = Decimal(s)
    elif _SCIENTIFIC.fullmatch(s) and Decimal(s) == Decimal(s).to_integral_value():
        value = Decimal(s)
    else:
        raise OptionError(f"{name}={text!r} is not a whole number: write decimal digits or a "
                          f"whole number such as 1e6, in [{lo:,}, {hi:.0e}]")
    if not lo <= value <= hi:
        shown_value = f"{int(value):,}" if value < 10**30 else f"{value:.3e}"
        raise OptionError(f"{name}={shown_value} is out of range [{lo:,}, {hi:.0e}]")
    return int(value)


_SCIENTIFIC = re.compile(r"([0-9]+)(\.[0-9]*)?[eE]\+?([0-9]{1,4})")


#: A number as typed on a command line: ASCII digits (Python's float() also takes "1_0" and
#: other scripts' digits such as "٣"), or inf / nan (each option's own check refuses those).
_FLOAT_TEXT = re.compile(r"\s*[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                         r"|inf|infinity|nan)\s*", re.IGNORECASE)


def parse_float(text, name: str = "") -> float:
    """A number typed on the command line, as a float: ASCII digits only, and a nonzero number
    that would be read as 0 (``1e-400``) or a finite one read as infinity (``1e400``) refused; else
    [`OptionError`][spectheory.runtime.errors.OptionError] naming ``name``. The option's own range
    check comes after."""
    lead = f"{name} " if name else ""
    if not isinstance(text, str) or not _FLOAT_TEXT.fullmatch(text):
        raise OptionError(f"{lead}{shown(text, 60)} is not a number in ASCII digits (such as 0.5 or "
                          "1e-3)")
    value = float(text)
    if value == 0 and re.search(r"[1-9]", text.lower().split("e")[0]):
        raise OptionError(f"{lead}{shown(text.strip(), 60)} is below the smallest float (it would "
                          "be read as 0)")
    if math.isinf(value) and "inf" not in text.lower():  # 1e400: not "inf" in a message
        raise OptionError(f"{lead}{shown(text.strip(), 60)} is above the largest float (about "
                          "1.8e308; it would be read as infinity)")
    return value


def parse_count(text, name: str, lo: int = 1, hi: int = MAX_LIMIT) -> int:
    """A count typed on the command line (``--samples``, ...), in [lo, hi]: decimal digits
    (``100000``, ``100_000``) or a whole number in scientific notation (``1e5``, ``2.5e6``); else
    [`OptionError`][spectheory.runtime.errors.OptionError] naming ``name``. The range is checked on the
    text's value before any integer of that size is made, so ``1e999`` is refused at once."""
    from decimal import Decimal

    s = str(text).strip().replace("_", "")
    body = s[1:] if s[:1] in "+-" and len(s) > 1 else s  # a sign: a number, maybe out of range
    if _INT.fullmatch(body):
        value = Decimal(s)
    elif _SCIENTIFIC.fullmatch(body):
        value = Decimal(s)
        if value != value.to_integral_value():
            raise OptionError(f"{name} {text!r} is not a whole number")
    else:
        raise OptionError(f"{name} {text!r} is not an integer: write decimal digits or a whole "
                          f"number such as 1e6 (accepted: {lo:,}..{hi:.0e})")
    if not lo <= value <= hi:
        shown = f"{int(value):,}" if abs(value) < 10**30 else f"{value:.3e}"
        raise OptionError(f"{name} {shown} is out of range {lo:,}..{hi:.0e}")
    return int(value)


def env_limit(name: str) -> int:
    """The limit of environment variable ``name`` (`ENV_LIMITS`), validated on each read."""
    text = os.environ.get(name)
    if text is None or text == "":
        return ENV_LIMITS[name]
    return parse_limit(text, f"environment variable {name}")


#: Environment variables that switch a route on or off: name -> (what "on" does, what "off"
#: does). Unset or empty means on.
ENV_SWITCHES = {
    "SPECTHEORY_NUMBA": ("compiled kernels: GBV's from KERNEL_MIN_VOCAB tokens on, the per-node "
                         "route's (token, block) from COMPILED_MIN_NODES nodes on; the default",
                         "torch operations only; numba is never imported"),
}
#: The values a switch accepts (compared after stripping blanks and lower-casing).
SWITCH_ON = ("1", "on", "true", "yes")
SWITCH_OFF = ("0", "off", "false", "no")


def env_switch(name: str) -> bool:
    """Whether the switch ``name`` of `ENV_SWITCHES` is on, validated on each read (a few string
    operations, no import): unset, empty or one of `SWITCH_ON` is on, one of `SWITCH_OFF` is off,
    anything else an [`OptionError`][spectheory.runtime.errors.OptionError] naming the variable
    and the accepted values."""
    text = os.environ.get(name)
    if text is None:
        return True
    value = text.strip().lower()
    if value == "" or value in SWITCH_ON:
        return True
    if value in SWITCH_OFF:
        return False
    on, off = ENV_SWITCHES[name]
    shown = text if len(text) <= 40 else text[:37] + "..."
    raise OptionError(f"environment variable {name}={shown!r} is not a switch value: use "
                      f"{', '.join(SWITCH_ON)} ({on}) or {', '.join(SWITCH_OFF)} ({off})")


#: Environment variable of the command line's allocator setting
#: ([`spectheory.runtime.allocator`][spectheory.runtime.allocator]): its accepted values
#: (compared after stripping blanks and lower-casing) and what each does. Unset or empty is
#: ``tuned``.
MALLOC_ENV = "SPECTHEORY_MALLOC"
MALLOC_SETTINGS = {"tuned": "keep freed memory for reuse; the default",
                   "default": "leave the C allocator's own settings"}


def env_malloc() -> str:
    """The allocator setting of ``SPECTHEORY_MALLOC``, validated on each read: ``"tuned"``
    (unset, empty or ``tuned``) or ``"default"``; anything else an
    [`OptionError`][spectheory.runtime.errors.OptionError] naming the variable, its value and the
    accepted values (a typo used to keep the tuned allocator without a word)."""
    text = os.environ.get(MALLOC_ENV)
    value = "" if text is None else text.strip().lower()
    if value == "":
        return "tuned"
    if value in MALLOC_SETTINGS:
        return value
    shown = text if len(text) <= 40 else text[:37] + "..."
    raise OptionError(f"environment variable {MALLOC_ENV}={shown!r} is not an allocator "
                      "setting: use " + " or ".join(f"{k} ({v})"
                                                      for k, v in MALLOC_SETTINGS.items()))


#: Environment variable of the buffer pool's capacity in bytes
#: ([`spectheory.runtime.buffers`][spectheory.runtime.buffers]).
BUFFER_POOL_ENV = "SPECTHEORY_BUFFER_POOL"
_BYTE_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_bytes(text: str, name: str = BUFFER_POOL_ENV) -> int:
    """A size in bytes written as ASCII digits (at most 15) with an optional suffix K, M or G
    (powers of 1024); else an [`OptionError`][spectheory.runtime.errors.OptionError] naming
    ``name`` and the value."""
    given = str(text).strip()
    scale = _BYTE_SUFFIXES.get(given[-1:].upper(), 1)
    digits = given[:-1] if scale > 1 else given
    if not (digits.isascii() and digits.isdigit()):
        raise OptionError(f"{name}={given[:40]!r} is not a size in bytes (e.g. 0, 512M, 4G)")
    if len(digits) > 15:  # a size, but past any machine's memory
        raise OptionError(f"{name}={given[:40]!r} is over the largest size taken, 15 digits "
                          f"(e.g. 0, 512M, 4G)")
    return int(digits) * scale


def env_bytes(name: str = BUFFER_POOL_ENV) -> int | None:
    """The size in bytes of environment variable ``name`` ([`parse_bytes`][spectheory.runtime.limits.parse_bytes]),
    None when unset or empty; a size over the machine's physical memory is refused (a pool of
    1e23 bytes is no cap: the digit limit alone let suffixed values through)."""
    text = os.environ.get(name)
    if text is None or not text.strip():
        return None
    n = parse_bytes(text, name)
    total = physical_memory()
    if total is not None and n > total:
        raise OptionError(f"{name}={text.strip()[:40]!r} is over this machine's memory "
                          f"({human_bytes(total)})")
    return n


def check_environment() -> None:
    """Validate every variable of `ENV_LIMITS` and `ENV_SWITCHES`, ``SPECTHEORY_MALLOC``
    ([`env_malloc`][spectheory.runtime.limits.env_malloc]) and ``SPECTHEORY_BUFFER_POOL``
    ([`env_bytes`][spectheory.runtime.limits.env_bytes]) (raises
    [`OptionError`][spectheory.runtime.errors.OptionError]): the command line calls it at start-up,
    so a bad value is refused before any work, not at the first large allocation."""
    for name in ENV_LIMITS:
        env_limit(name)
    for name in ENV_SWITCHES:
        env_switch(name)
    env_malloc()
    env_bytes(BUFFER_POOL_ENV)


# ----------------------------------------------------------------------------- time


class _State:
    deadline: float | None = None
    limit: float | None = None
    start: float = 0.0
    progress: bool = False
    notes: bool = False


_state = _State()


def check_time_limit(seconds, what: str = "--time-limit") -> float | None:
    """A time limit must be a finite number of seconds in (0, `MAX_TIME_LIMIT`]."""
    if seconds is None:
        return None
    try:
        t = float(seconds)
    except (TypeError, ValueError):
        raise OptionError(f"{what} {seconds!r} is not a number of seconds") from None
    if not math.isfinite(t) or t <= 0 or t > MAX_TIME_LIMIT:
        raise OptionError(f"{what} {seconds!r} is out of range: a finite number of seconds in "
                          f"(0, {MAX_TIME_LIMIT:.0f}]")
    return t


def _expired(where: str = "", smaller: str = "a smaller instance") -> TimeLimitError:
    took = time.monotonic() - _state.start
    running = _running_calls[-1][0] if _running_calls else None  # the user call it stopped
    if running is not None:
        where += f" while {running} was running"
    return TimeLimitError(
        f"time limit of {_state.limit:g} s reached after {took:.1f} s{where}; stopped with no "
        f"result: raise --time-limit"
        + (f" or look at {running}" if running is not None else f" or use {smaller}"))


def remaining() -> float | None:
    """Seconds left before the current time limit (None: no limit)."""
    if _state.deadline is None:
        return None
    return _state.deadline - time.monotonic()


def check_time(where: str = "", smaller: str = "a smaller instance") -> None:
    """Raise [`TimeLimitError`][spectheory.runtime.errors.TimeLimitError] when the current time limit has
    passed. ``where`` follows the time in the message (" (tree node route)"), and ``smaller``
    names what to make smaller ("fewer samples")."""
    if _state.deadline is not None and (_pending[0] or time.monotonic() >= _state.deadline):
        _pending[0] = False
        raise _expired(where, smaller)


def tick(_count: int = 0) -> None:
    """Progress callback of the engines: checks the clock between chunks."""
    check_time(" (between enumeration chunks)")


def progress_enabled() -> bool:
    """Whether long loops show a progress bar (set by [`running`][spectheory.runtime.limits.running])."""
    return _state.progress


def note(message: str) -> None:
    """A one-line note on stderr, only inside [`running`][spectheory.runtime.limits.running] with
    ``notes=True`` and no time limit (a run under ``--time-limit`` is bounded already, and a refusal
    stays one line)."""
    if _state.notes and _state.deadline is None:
        print(f"spectheory: note: {message}", file=sys.stderr, flush=True)


#: Whether the garbage collector is running, tracked while a backstop alarm is armed: an
#: exception raised inside a garbage-collector callback or a finaliser is printed as "Exception
#: ignored" and lost, so the alarm waits for the collection to end instead of raising inside it.
#: Two callbacks mark it: one first in ``gc.callbacks`` (sets it at "start", before any other
#: callback runs) and one last (clears it at "stop", after every other callback has run).
_collecting = [False]
#: Set when the backstop alarm fired where it could not raise (a collection, a finaliser): the
#: alarm is re-armed for just after, and the next [`check_time`][spectheory.runtime.limits.check_time]
#: raises as well.
_pending = [False]
#: How soon a deferred alarm tries again, in seconds.
RETRY_SECONDS = 0.01


def _collection_starts(phase: str, info: dict) -> None:
    if phase == "start":
        _collecting[0] = True


#: How soon after a collection a deferred alarm tries again, in seconds. Re-armed from the
#: collection's end, not only `RETRY_SECONDS` after it was deferred: a loop that allocates fast
#: starts a collection every few milliseconds, and a retry timed from the deferral could land at
#: the start of the next collection again and again (observed: 200 retries, 7 s past a limit).
RETRY_AFTER_COLLECTION = 1e-4


def _collection_stops(phase: str, info: dict) -> None:
    if phase == "stop":
        _collecting[0] = False
        if _pending[0] and signal.getsignal(signal.SIGALRM) is _on_alarm:
            left = signal.getitimer(signal.ITIMER_REAL)[0]
            if left == 0 or left > RETRY_AFTER_COLLECTION:
                signal.setitimer(signal.ITIMER_REAL, RETRY_AFTER_COLLECTION)


#: Names of the functions inside which an exception is swallowed by the interpreter.
_SWALLOWING = ("__del__", "_collection_starts", "_collection_stops")


def _unsafe_to_raise(frame) -> bool:
    """Whether an exception raised at ``frame`` would be lost or would break the process: during a
    garbage collection (its callbacks and the finalisers it runs), inside a ``__del__`` method
    (both swallow it), or while a module is imported (a module left half-initialised in
    ``sys.modules``, torch's included, breaks every later use in an in-process caller)."""
    if _collecting[0]:
        return True
    depth = 0
    while frame is not None and depth < 400:
        code = frame.f_code
        if code.co_name in _SWALLOWING or code.co_filename.startswith("<frozen importlib"):
            return True
        frame, depth = frame.f_back, depth + 1
    return False


def _on_alarm(signum, frame) -> None:
    """The backstop alarm: raise the time limit's error where it cannot be lost, else defer it
    (flag it for the next [`check_time`][spectheory.runtime.limits.check_time] and try again
    `RETRY_SECONDS` later)."""
    if _unsafe_to_raise(frame):
        _pending[0] = True
        signal.setitimer(signal.ITIMER_REAL, RETRY_SECONDS)
        return
    _pending[0] = False
    raise _expired()


@contextmanager
def running(time_limit: float | None = None, progress: bool = False, notes: bool = False):
    """Run a block of work under a wall-clock limit (seconds, None: none), with progress bars
    and notes on stderr when asked. Nested use keeps the earlier deadline if it is sooner."""
    saved = (_state.deadline, _state.limit, _state.start, _state.progress, _state.notes)
    limit = check_time_limit(time_limit)
    now = time.monotonic()
    alarm = False
    old_handler = None
    if limit is not None and (_state.deadline is None or now + limit < _state.deadline):
        _state.deadline, _state.limit, _state.start = now + limit, limit, now
        if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
            old_handler = signal.signal(signal.SIGALRM, _on_alarm)
            gc.callbacks.insert(0, _collection_starts)
            gc.callbacks.append(_collection_stops)
            signal.setitimer(signal.ITIMER_REAL, limit + 0.5)  # backstop after the soft checks
            alarm = True
    _state.progress = progress or _state.progress
    _state.notes = notes or _state.notes
    try:
        yield
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
            if old_handler is _on_alarm and saved[0] is not None:  # an outer limit's backstop
                signal.setitimer(signal.ITIMER_REAL, max(saved[0] - time.monotonic(), 0) + 0.5)
            for callback in (_collection_starts, _collection_stops):
                if callback in gc.callbacks:
                    gc.callbacks.remove(callback)
            _collecting[0] = _pending[0] = False
        (_state.deadline, _state.limit, _state.start, _state.progress, _state.notes) = saved


@contextmanager
def without_notes():
    """No [`note`][spectheory.runtime.limits.note] inside the block: a size check made ahead of the
    one the work makes (which notes its estimate) would print it twice."""
    saved = _state.notes
    _state.notes = False
    try:
        yield
    finally:
        _state.notes = saved


def interruptible(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` for a long call into compiled code that releases the GIL (a HiGHS
    solve): run on a worker thread while the main thread waits in short joins, so that signal
    handlers run during it. A Python signal handler runs only when the main thread executes
    bytecode: during a solve in the main thread, SIGTERM, Ctrl-C and the time limit's alarm
    waited for the solve to end (minutes), while the command line promises one line and exit
    143 or 130 at once. Returns ``fn``'s result or raises its exception; off the main thread,
    ``fn`` is called directly. Stopped by a signal in Python code (not the command line, which
    exits), the call goes on in the background until it ends."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args, **kwargs)
    box: dict = {}

    def work():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="spectheory-solve", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.05)
    if "error" in box:
        raise box["error"]
    return box["value"]


# ----------------------------------------------------------------------------- estimates


def estimate_seconds(count: int, exact: bool = False, outcomes: bool = False,
                     node: bool = False) -> float:
    """Rough wall time of an enumeration over ``count`` sequences (or joint draft outcomes;
    ``node``: float sequences on the per-node route), from the throughput constants of this
    module."""
    rate = (EXACT_SEQUENCES_PER_SECOND if exact else OUTCOMES_PER_SECOND if outcomes else
            NODE_SEQUENCES_PER_SECOND if node else FLOAT_SEQUENCES_PER_SECOND)
    return float(count) / rate if count < 10**300 else math.inf


def human_seconds(s: float) -> str:
    """``0.004 s``, ``0.4 s``, ``12 s``, ``3.5 min``, ``2.0 h``, ``4e+05 years`` (under 0.1 s
    two significant digits, so that a small positive time never reads ``0.0 s``)."""
    if not math.isfinite(s):
        return "forever"
    if s < 0.1:
        return f"{s:.2g} s"
    if s < 10:
        return f"{s:.1f} s"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    if s < 3 * 365 * 86400:
        return f"{s / 86400:.0f} days"
    return f"{s / (365 * 86400):.2g} years"


def human_count(n: int) -> str:
    """``1,234,567`` up to 10^15 in size, then ``~10^43`` (``-~10^43`` below -10^15)."""
    n = int(n)
    if abs(n) < 10**15:
        return f"{n:,}"
    return f"{'-' if n < 0 else ''}~10^{decimal_exponent(abs(n))}"


def check_real(value, label: str, lo: float, hi: float, error: type[Exception],
               in_range: str = "") -> float:
    """``value`` as a float in [lo, hi], or ``error`` with a one-line message that starts with
    ``label`` and the value. Bools, text and bytes are refused as not numbers (``float("1e-9")``
    reads text as a number); an integer past float64 is a number out of range, not "not a number";
    NaN and infinities are out of range; -0.0 is returned as 0.0 (it printed as "-0").
    ``in_range`` says what the range is (default: "a finite number in [lo, hi]")."""
    if isinstance(value, (bool, str, bytes)):
        raise error(f"{label} {shown(value)} is not a number")
    try:
        x = float(value)
    except OverflowError:  # an integer past float64: a number, out of every range below
        x = math.inf
    except (TypeError, ValueError):
        raise error(f"{label} {shown(value)} is not a number") from None
    if not (math.isfinite(x) and lo <= x <= hi):
        raise error(f"{label} {shown(value)} is out of range: "
                    f"{in_range or f'a finite number in [{lo:g}, {hi:g}]'}")
    return x + 0.0


def decimal_exponent(n: int) -> int:
    """floor(log10(n)) of a positive integer of any size, without ``str(n)`` (which Python
    refuses past 4,300 digits)."""
    e = int((n.bit_length() - 1) * 0.30102999566398120)  # from below, at most one short
    while 10 ** (e + 1) <= n:
        e += 1
    return e


def ratio(a: int, b: int) -> str:
    """a / b for any size of integers (``2.5x``, ``about 10^40x``)."""
    a, b = int(a), max(int(b), 1)
    if a // b < 10**15:
        return f"{a / b:.1f}x" if a < 10**300 else f"{a // b:,}x"
    return f"{human_count(a // b)}x"


# ----------------------------------------------------------------------------- memory

#: Share of the machine's physical memory that one estimated allocation of a command may take
#: ([`check_memory`][spectheory.runtime.limits.check_memory]); the rest is left to the operating system and
#: the other processes.
MEMORY_SHARE = 0.5


def physical_memory() -> int | None:
    """Bytes of physical memory of this machine (None where the system does not say)."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * size if pages > 0 and size > 0 else None


def human_bytes(n: float) -> str:
    """``512 B``, ``1.5 GiB``, ``2,328 TiB``, ``~10^21 B`` (an integer past float range too)."""
    if isinstance(n, int) and n >= 10**18:
        return f"~10^{decimal_exponent(n)} B"
    n = float(n)
    if n >= 1e18:
        return f"~10^{math.floor(math.log10(n))} B"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}" if n < 1000 * size else f"{n / size:,.0f} {unit}"
    return f"{int(n)} B"


def check_memory(nbytes: int, what: str, advice: str = "") -> None:
    """Refuse, before allocating, work estimated to need ``nbytes`` of memory when that is over
    `MEMORY_SHARE` of [`physical_memory`][spectheory.runtime.limits.physical_memory] (no refusal where the
    machine's memory is unknown): a [`SizeLimitError`][spectheory.runtime.errors.SizeLimitError] naming
    ``what`` (the option and value), the estimate and the machine's memory, then ``advice``."""
    total = physical_memory()
    if total is None or nbytes <= MEMORY_SHARE * total:
        return
    raise SizeLimitError(f"{what} needs about {human_bytes(nbytes)} of memory, over "
                         f"{MEMORY_SHARE:.0%} of this machine's {human_bytes(total)}"
                         + (f"; {advice}" if advice else ""))


# ----------------------------------------------------------------------------- long user calls

from . import errors as _errors  # noqa: E402 - the module of call_user, imported above already

#: Seconds one call of user code may run before the command line notes it on stderr (once per
#: call, without a time limit only): a function that never returns is then no longer silent.
USER_CALL_NOTE_S = 30.0
#: The user calls running in this process, outermost first: ``[label, start, noted]``.
_running_calls: list = []
_watcher: list = []  # the daemon thread that notes long calls, once started


def _watch_calls() -> None:
    while True:
        time.sleep(min(1.0, USER_CALL_NOTE_S / 4))
        try:
            call = _running_calls[0]
        except IndexError:
            continue
        if not call[2] and _state.deadline is None and \
                time.monotonic() - call[1] >= USER_CALL_NOTE_S:
            call[2] = True
            note(f"{call[0]} has run {USER_CALL_NOTE_S:g} s in one call without returning; "
                 f"--time-limit SECONDS stops the command")


def _watch_start(label: str):
    """Watch a user call (`spectheory.runtime.errors.call_user`): on the command line (notes on)
    with no time limit, to note one that runs long; under a time limit, to name the call the
    limit stops. The token to hand `_watch_stop`, or None when not watched."""
    if _state.deadline is not None:
        call = [label, time.monotonic(), False]
        _running_calls.append(call)
        return call
    if not _state.notes:
        return None
    if not _watcher:
        thread = threading.Thread(target=_watch_calls, name="spectheory-user-calls", daemon=True)
        _watcher.append(thread)
        thread.start()
    call = [label, time.monotonic(), False]
    _running_calls.append(call)
    return call


def _watch_stop(call) -> None:
    if _running_calls and _running_calls[-1] is call:
        _running_calls.pop()


_errors._call_watch[:] = [_watch_start, _watch_stop]  # call_user's watch

