"""Errors that the command line reports as one line with exit code 2 (never a traceback).

Every error the toolkit raises is a [`SpectheoryError`][spectheory.runtime.errors.SpectheoryError], so
Python callers can catch one type; its message is the same one line the command line prints after
``spectheory: error:``.

* **Bad input** (a value, option, file or instance the toolkit refuses, a size over a limit, user
  code that raises, exits or returns something unusable) is an
  [`InputError`][spectheory.runtime.errors.InputError], which is also a `ValueError`.
  ``SpectheoryError(message)`` raised directly is bad input too: it is created as an
  [`InputError`][spectheory.runtime.errors.InputError] (as ``OSError(errno.ENOENT, ...)`` is created as a
  ``FileNotFoundError``), so ``except ValueError`` keeps catching every refusal of an input.
* **A time limit reached** ([`TimeLimitError`][spectheory.runtime.errors.TimeLimitError]) is *not* a
  ``ValueError``: the alarm that stops a long step may fire inside any code, a number parser's
  ``except ValueError`` included, and must never be taken there for a bad number.

User code (a verifier, sampler or module named as ``module:function``) is loaded by
[`import_user`][spectheory.runtime.errors.import_user] and called through
[`call_user`][spectheory.runtime.errors.call_user]: whatever it raises, including ``SystemExit``, becomes
one [`UserCodeError`][spectheory.runtime.errors.UserCodeError] line naming it (an interrupt, Ctrl-C
or SIGINT, stays an interrupt, exit code 130; on the command line a ``KeyboardInterrupt`` that
user code raises with no SIGINT received is the code's failure, `counting_interrupts`). The
command line's ``--debug`` prints the chained original traceback.
"""

from __future__ import annotations

import functools
import re
from contextlib import contextmanager
from fractions import Fraction


#: One-line descriptions of values for messages (`shown`), kept here, below every module that
#: refuses a value; `spectheory.runtime.limits` re-exports them.


def about_digits(n: int) -> int:
    """The decimal digits of ``|n|``, to within one, from its bit length (``str(n)`` is refused
    past 4,300 digits, and would be slow long before): for messages that describe a number too
    long to print."""
    return int(abs(n).bit_length() * 0.30103) + 1


def shown(value, width: int = 40) -> str:
    """``repr(value)`` cut at ``width`` characters, for a one-line message; never raises (an
    integer or Fraction too long to print, past Python's int-to-str limit, is described by its
    number of digits, from its bit length)."""
    try:
        if isinstance(value, Fraction) and max(abs(value.numerator),
                                                value.denominator).bit_length() > 10 * width:
            return (f"a fraction with a {about_digits(value.numerator)}-digit numerator and a "
                    f"{about_digits(value.denominator)}-digit denominator")
        if isinstance(value, int) and abs(value).bit_length() > 10 * width:
            return f"an integer of {about_digits(value)} digits"
        text = repr(value)
    except Exception:  # a value whose repr fails (a list of huge integers, a broken object)
        text = f"a {type(value).__name__}"
    # one line: the repr of a 2-D array or tensor spans several (a string's repr escapes its own)
    text = re.sub(r"\s*\n\s*", " ", text)
    return text if len(text) <= width else text[:width - 3] + "..."


class SpectheoryError(Exception):
    """Base class: a request the toolkit refuses, with a message naming the problem.

    Instantiated directly (``raise SpectheoryError("...")``), it gives an
    [`InputError`][spectheory.runtime.errors.InputError]: a refused input, also a ``ValueError``."""

    #: Raised by a toolkit function that the user's code called (a sampler calling
    #: ``random_instance(0, ...)``), the error becomes that code's
    #: [`UserCodeError`][spectheory.runtime.errors.UserCodeError] (`call_user`). False for a
    #: signal a check turns into its verdict (``LawError``: not a law), whoever raised it.
    user_code_raises = True

    def __new__(cls, *args, **kwargs):
        if cls is SpectheoryError:
            cls = InputError
        return super().__new__(cls, *args, **kwargs)


class InputError(SpectheoryError, ValueError):
    """Bad input: a value, option, file, instance or size the toolkit refuses."""


class InstanceError(InputError):
    """An instance or model is malformed (missing prefix, bad row, bad size, unreadable JSON)."""


class SizeLimitError(InputError):
    """An enumeration, LP or allocation would exceed the configured size or memory limit."""


class OptionError(InputError):
    """An option, parameter or environment variable is outside its accepted range."""


class GeneratorError(InputError):
    """A random generator argument that is not a ``torch.Generator`` (`check_generator`): a seed
    or a tensor of uniforms where a generator was meant."""


class TooFewSamplesError(OptionError):
    """A check was asked for too few samples to test anything (no degree of freedom): a bad
    input, never a verdict. ``needs_samples`` is the count a test of every row needs."""

    def __init__(self, message: str, needs_samples: int = 0):
        super().__init__(message)
        self.needs_samples = int(needs_samples)


class TimeLimitError(SpectheoryError):
    """A computation ran past its time limit (``--time-limit``) and was stopped; no result.

    Not a ``ValueError`` (see the module docstring): no ``except ValueError`` can swallow it."""


class MissingExtraError(SpectheoryError):
    """A route needs an optional dependency that is not installed; the message names the extra
    to install (``pip install 'spectheory[cvxpy]'``) and the route that works without it."""


class UserCodeError(InputError):
    """A user's function (verifier, sampler, draft step, module) raised, exited or returned
    something unusable; the message names the function and what it did."""


def _describe(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}:{name}" if module and module not in ("builtins", "__main__") else str(name)


def is_integer(value) -> bool:
    """Whether ``value`` is a whole number given as an integer (Python's or numpy's), not a
    bool (which Python counts as an int) nor a float: the test of every count and token id a
    user passes in Python, before its range."""
    import numpy as np

    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_arrays(drafts, q, p, where: str = "verifier law", *, paths: bool,
                 q_read: bool = True) -> None:
    """[`InputError`][spectheory.runtime.errors.InputError] naming ``where`` unless ``drafts``,
    ``q`` and ``p`` are arrays (torch tensors or numpy arrays: anything with a shape) of the
    law's form (`check_law_shapes`; multi-path with ``paths``) with integer drafts whose ids lie
    in the vocabulary (`check_token_ids`): the check of a verifier's law function called
    directly, as the registry's ``VerifierSpec.law`` checks, instead of an ``AttributeError``,
    an indexing error from inside the law, or the law of other tokens or of a broadcast batch.
    ``q_read`` False: a law that reads no q (``q`` is not looked at; the form is checked on
    ``p``). O(1) but for the ids' two reductions."""
    arrays = (drafts, q, p) if q_read else (drafts, p)
    if not all(hasattr(x, "shape") and hasattr(x, "dtype") for x in arrays):
        raise InputError(f"{where}: {'drafts, q and p' if q_read else 'drafts and p'} must be "
                         f"arrays (torch or numpy), got "
                         f"{', '.join(type(x).__name__ for x in arrays)}"
                         + ("" if q_read else " (q is not read)"))
    kinds = [type(x).__module__.partition(".")[0] for x in arrays]
    if len({kind == "torch" for kind in kinds}) > 1:  # gather() of a numpy index, a comparison
        # of a tensor and an array: errors from inside torch or numpy, naming neither argument
        got = ", ".join(f"{kind}.{type(x).__name__}" for kind, x in zip(kinds, arrays))
        raise InputError(f"{where}: {'drafts, q and p' if q_read else 'drafts and p'} must all "
                         f"be torch tensors or all numpy arrays, got {got}")
    check_law_shapes(tuple(drafts.shape), tuple(q.shape) if q_read else None, tuple(p.shape),
                     paths, where)
    if "int" not in str(drafts.dtype):
        raise InputError(f"{where}: drafts are {drafts.dtype}; draft tokens are integer ids")
    if str(drafts.dtype) in ("torch.uint8", "torch.int8", "torch.int16"):  # not gather's index
        raise InputError(f"{where}: drafts are {drafts.dtype}; torch token ids are int32 or "
                         "int64 tensors")
    if any(getattr(x, "is_meta", False) for x in arrays):
        raise InputError(f"{where}: drafts, q and p must hold values, not meta tensors")
    check_row_dtypes(where, **({"q": q, "p": p} if q_read else {"p": p}))
    check_token_ids(drafts, p.shape[-1], where)


def check_row_dtypes(where: str, **rows) -> None:
    """[`InputError`][spectheory.runtime.errors.InputError] naming ``where`` and the argument
    unless each array of ``rows`` holds floating-point numbers (torch or numpy) or Fractions (a
    numpy object array): complex rows failed inside torch's comparisons, integer or boolean rows
    gave a law of 0/1 weights."""
    for name, x in rows.items():
        kind = getattr(x.dtype, "kind", None)  # numpy: "f" floats, "O" Fractions
        if kind is None:
            real = bool(getattr(x.dtype, "is_floating_point", False))
        else:
            real = kind in ("f", "O")
        if not real:
            raise InputError(f"{where}: {name} rows are {x.dtype}; probabilities are "
                             "floating-point numbers or exact Fractions")


def check_law_shapes(shape: tuple, qs: tuple | None, ps: tuple, paths: bool,
                     where: str) -> None:
    """[`InputError`][spectheory.runtime.errors.InputError] naming ``where`` unless the shapes
    of drafts, q and p fit ``drafts [B, L], q [B, L, V], p [B, L+1, V]`` (``paths``: ``[B, K,
    L]``, ``[B, K, L, V]``, ``[B, K, L+1, V]``) with V >= 1: a batch or path count that differs
    broadcast one draft's law over the batch, p over another vocabulary gave a law of mixed
    rows. ``qs`` None: a law that reads no q (drafts and p alone, and the message names no q)."""
    nd = 3 if paths else 2
    fits = len(shape) == nd and len(ps) == nd + 1 and ps[:-2] == tuple(shape[:-1]) and \
        ps[-2] == shape[-1] + 1
    if qs is None:
        if not fits:
            form = "drafts [B, K, L], p [B, K, L+1, V]" if paths else "drafts [B, L], p [B, L+1, V]"
            raise InputError(f"{where}: drafts {list(shape)} and p {list(ps)} do not fit "
                             f"{form} (q is not read)")
    elif not (fits and len(qs) == nd + 1 and qs[:-1] == tuple(shape) and ps[-1] == qs[-1]):
        form = ("drafts [B, K, L], q [B, K, L, V], p [B, K, L+1, V]" if paths
                else "drafts [B, L], q [B, L, V], p [B, L+1, V]")
        raise InputError(f"{where}: drafts {list(shape)}, q {list(qs)} and p {list(ps)} do not "
                         f"fit {form}")
    if ps[-1] < 1:  # q's rows have as many tokens (checked above)
        raise InputError(f"{where}: rows of {ps[-1]} tokens")
    if shape[-1] < 1:  # a block of no drafts: its law is p's row, no verifier's to compute
        raise InputError(f"{where}: drafts of L = 0 tokens; a law needs at least one drafted "
                         "token")
    if paths and shape[1] < 1:
        raise InputError(f"{where}: drafts of K = 0 paths; a K-path law needs at least one "
                         "path")


def check_token_ids(drafts, V: int, where: str) -> None:
    """[`InputError`][spectheory.runtime.errors.InputError] naming ``where`` unless every token
    id of the integer array ``drafts`` lies in 0..V-1: an id past the vocabulary indexed a row
    out of bounds, a negative one read a row from the end, and a rule that looks its tokens up
    in a table gave the path the mass of another. Two reductions over the ids, none over the
    rows."""
    n = drafts.numel() if hasattr(drafts, "numel") else drafts.size
    if n:
        lo, hi = int(drafts.min()), int(drafts.max())
        if lo < 0 or hi >= V:
            raise InputError(f"{where}: a drafted token lies outside 0..{V - 1} (min {lo}, max "
                             f"{hi})")


def check_generator(generator, where: str = "") -> None:
    """[`GeneratorError`][spectheory.runtime.errors.GeneratorError] (an `InputError`) unless
    ``generator`` is None or a ``torch.Generator`` (a seed or another object reached torch's own
    TypeError); ``where`` (such as ``"draft_trees: "``) leads the message."""
    if generator is None:
        return
    from ._lazy import torch

    if not isinstance(generator, torch.Generator):
        raise GeneratorError(f"{where}generator = {shown(generator, 40)} must be a torch.Generator "
                             "or None")


def as_list(items, name: str, kinds: str, lone: tuple = ()) -> list:
    """``items`` given in Python as a list (any iterable but text; a lone object of a type in
    ``lone`` as a list of one), else one [`OptionError`][spectheory.runtime.errors.OptionError]
    line: "``name`` must be a list of ``kinds``, not <type>" (a number or an object where a list
    was meant, instead of Python's "object is not iterable" from deep inside a check)."""
    if lone and isinstance(items, lone):
        return [items]
    if not isinstance(items, (str, bytes)):
        try:
            return list(items)
        except TypeError:
            pass
    raise OptionError(f"{name} must be a list of {kinds}, not {type(items).__name__}")


def check_flag(value, name: str, none: bool = False) -> bool | None:
    """A switch given in Python: True or False (a numpy bool too; None where ``none``), never a
    truthy string such as ``'no'`` (which Python reads as True); else one
    [`OptionError`][spectheory.runtime.errors.OptionError] line naming it."""
    import numpy as np

    if value is None and none:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise OptionError(f"{name} = {shown(value, 40)} must be True or False"
                          + (" (or None)" if none else ""))
    return bool(value)


class _UserProcessExit(BaseException):
    """Raised in place of ``os._exit(code)`` while user code runs under
    [`call_user`][spectheory.runtime.errors.call_user]."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


#: While user code runs: [the real os._exit, the process it belongs to, the nesting depth].
_exit_guard: list = []


def _guard_process_exit():
    """Replace ``os._exit`` for the duration of a user call: in the calling thread of this
    process it raises `_UserProcessExit` (a sampler that calls ``os._exit(0)`` must not end a
    check with exit 0 and no output); in a child forked meanwhile (multiprocessing) or another
    thread it still exits."""
    import os
    import threading

    if _exit_guard and _exit_guard[1] == os.getpid():
        _exit_guard[2] += 1
        return
    if _exit_guard:  # a child forked while its parent's guard was on: a guard of its own
        os._exit = _exit_guard[0]
        _exit_guard.clear()
    real, pid, thread = os._exit, os.getpid(), threading.get_ident()

    def _exit(code=0):
        if os.getpid() != pid:  # a forked child (multiprocessing): the real exit
            real(code)
        if threading.get_ident() != thread:  # a thread the user code started: it ends, and
            _thread_failures.append(  # the check it ran in is refused (`thread_failure`)
                f"thread {threading.current_thread().name!r} called os._exit({code!r}) while "
                "the check ran; user code must not end the process")
            raise SystemExit(code)
        raise _UserProcessExit(code)

    _exit_guard[:] = [real, pid, 1]
    os._exit = _exit


#: What threads did while the guard of `guard_threads` (or a user call) was on: one line each
#: (a thread that called ``os._exit``, a thread that raised), oldest first.
_thread_failures: list = []


def thread_failure() -> str | None:
    """The first line of `_thread_failures` (and clears them), or None."""
    if not _thread_failures:
        return None
    first = _thread_failures[0]
    _thread_failures.clear()
    return first


@contextmanager
def guard_threads(debug: bool = False):
    """For a whole check or command: ``os._exit`` stays guarded between user calls too (a thread
    a sampler started that calls it ends, instead of ending the process with exit 0 and no
    output), and an exception that ends a thread is recorded in one line instead of a traceback
    on standard error (``debug``: the traceback is printed too). On leaving, what the threads
    did is raised as a [`UserCodeError`][spectheory.runtime.errors.UserCodeError] (the first of
    them); user calls raise it as soon as they return (`call_user`). Nests."""
    import threading
    import traceback

    previous = threading.excepthook

    def hook(args):
        if issubclass(args.exc_type, SystemExit):  # a thread ended by sys.exit or os._exit
            return
        name = args.thread.name if args.thread is not None else "?"
        exc = args.exc_value if args.exc_value is not None else args.exc_type()
        _thread_failures.append(f"thread {name!r} raised {_exception_text(exc)}; the code "
                                "under test must not fail in a thread it starts")
        if debug:
            traceback.print_exception(args.exc_type, args.exc_value, args.exc_traceback)

    _guard_process_exit()
    threading.excepthook = hook
    try:
        yield
    finally:
        if threading.excepthook is hook:
            threading.excepthook = previous
        _unguard_process_exit()
    failure = thread_failure()
    if failure is not None:
        raise UserCodeError(failure)


def guarded_check(check):
    """``check`` run under `guard_threads` (the public checks of `spectheory.testing`), with
    torch's global random generator set aside (`global_rng_set_aside`): code under test that
    draws from it (``torch.rand`` with no generator) gets a stream fixed by the check's ``seed``,
    so its verdict no longer depends on the caller's global seed, and the caller's generator is
    left as it was (a check advanced it)."""
    import inspect

    signature = inspect.signature(check)
    default = signature.parameters["seed"].default if "seed" in signature.parameters else 0

    @functools.wraps(check)
    def run(*args, **kwargs):
        try:
            seed = signature.bind_partial(*args, **kwargs).arguments.get("seed", default)
        except TypeError:  # the check names the bad call itself
            seed = default
        with guard_threads(), global_rng_set_aside(seed):
            return check(*args, **kwargs)
    return run


@contextmanager
def global_rng_set_aside(seed):
    """torch's global (CPU) random generator seeded for the block from ``seed`` (through a hash:
    not the stream of the check's own ``torch.Generator().manual_seed(seed)``, which would
    correlate the code under test's draws with the kit's), the caller's state put back after."""
    import hashlib

    from ._lazy import torch

    if not is_integer(seed) or not 0 <= seed < 2**63:  # refused by the check itself
        seed = 0
    derived = int.from_bytes(hashlib.sha256(f"spectheory global rng {int(seed)}".encode())
                             .digest()[:8], "big") >> 1
    with torch.random.fork_rng(devices=[]):
        seed_forked(derived)
        yield


def seed_forked(seed: int, device=None) -> None:
    """Seed torch's global CPU generator (and, with ``device`` a CUDA device, that device's)
    with ``seed``: the generators that ``torch.random.fork_rng(devices=[])`` (or
    ``devices=[device]``) puts back, and no other. ``torch.manual_seed`` also seeds every CUDA
    device's generator (queued until CUDA starts, where it has not), which such a block leaves
    changed: a check run on a machine with a GPU moved the caller's CUDA streams."""
    from ._lazy import torch

    torch.random.default_generator.manual_seed(seed)
    if device is not None and torch.device(device).type == "cuda":
        with torch.cuda.device(device):
            torch.cuda.manual_seed(seed)


def left_threads(before) -> list:
    """The non-daemon threads alive now that were not in ``before`` (a set of threads): what a
    process would wait for at exit."""
    import threading

    return [t for t in threading.enumerate()
            if t.is_alive() and not t.daemon and t not in before
            and t is not threading.main_thread()]


def real_exit(code: int):
    """End the process at once with ``code`` (``os._exit``), also while user code runs under
    `call_user`, where ``os._exit`` raises instead: the toolkit's own SIGTERM handler must end
    the command, not be reported as the user code calling ``os._exit``."""
    import os

    (_exit_guard[0] if _exit_guard else os._exit)(code)


def _unguard_process_exit():
    import os

    if not _exit_guard:
        return
    _exit_guard[2] -= 1
    if _exit_guard[2] == 0:
        os._exit = _exit_guard[0]
        _exit_guard.clear()


#: How a user call is watched while it runs, set by `spectheory.runtime.limits` (which notes a
#: call still running after ``USER_CALL_NOTE_S`` on the command line): ``[start, stop]`` with
#: ``start(label) -> token or None`` and ``stop(token)``; empty: not watched.
_call_watch: list = []


class _KeptOpen:
    """Standard error as user code's standard output: what it prints goes there, and a
    ``sys.stdout.close()`` leaves it open (closing it would lose the one line that reports the
    user code's failure)."""

    def __init__(self, stream):
        self._stream = stream

    def close(self):  # user code closing "stdout": nothing to do
        pass

    @property
    def closed(self) -> bool:
        return False

    def __getattr__(self, name):
        return getattr(self._stream, name)


#: The stand-ins for standard output made lately, kept alive: CPython 3.11's ``print`` holds
#: ``sys.stdout`` as a borrowed reference while it writes, so a thread of user code printing
#: while ``call_user`` or a user module's import puts the real stdout back would write through
#: a freed stand-in (a
#: segmentation fault, or "'TableModel' object has no attribute 'write'" once its memory is
#: reused). One per standard-error stream, the last few.
_KEPT: list = []


def _kept_stderr() -> _KeptOpen:
    """The kept stand-in that sends standard output to the current ``sys.stderr``."""
    import sys

    for kept in _KEPT:
        if kept._stream is sys.stderr:
            return kept
    kept = _KeptOpen(sys.stderr)
    _KEPT[:] = [kept] + _KEPT[:7]
    return kept


#: The stream a command's JSON result goes to while `json_stdout` holds standard output's file
#: descriptor for it (None otherwise: ``sys.stdout``).
_RESULT: list = [None]


def result_stream():
    """Where a command writes its result: the held standard output under `json_stdout`, else
    ``sys.stdout``."""
    import sys

    return _RESULT[0] or sys.stdout


@contextmanager
def json_stdout(active: bool, keep: bool = False):
    """For a ``--json`` command that runs user code: standard output's file descriptor is held
    for the result (`result_stream`) and descriptor 1 points at standard error while the
    command runs, so that what a thread of user code prints, or writes with ``os.write(1,
    ...)``, or a compiled library writes, goes to standard error and standard output carries one
    JSON object. `call_user`'s redirect of ``sys.stdout`` covers the calls themselves only.
    With ``keep`` (the process's own command line) descriptor 1 is not put back, since such a
    thread may print until the process exits; otherwise (``main`` called in a process that
    goes on) it is put back after the result is flushed. Inactive where ``sys.stdout`` is not
    descriptor 1 (a captured or replaced stdout: the caller reads ``sys.stdout``)."""
    import os
    import sys

    try:
        fd = sys.stdout.fileno() if active else -1
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd != 1 or _RESULT[0] is not None:
        yield
        return
    sys.stdout.flush()
    held = os.dup(1)
    os.dup2(2, 1)
    out = os.fdopen(held, "w", encoding=sys.stdout.encoding or "utf-8", errors="replace")
    _RESULT[0] = out
    try:
        yield
    finally:
        _RESULT[0] = None
        try:
            out.flush()
        finally:
            if not keep:
                try:
                    sys.stdout.flush()
                except (OSError, ValueError):
                    pass
                os.dup2(held, 1)
            try:
                out.close()
            except OSError:  # a reader that went away: the flush above has said so
                pass


def check_whole(name: str, value, lo: int, hi: int) -> int:
    """``value`` as an int in lo..hi (a Python or numpy integer, not a bool), else one
    [`OptionError`][spectheory.runtime.errors.OptionError] line naming ``name``."""
    if not is_integer(value) or not lo <= value <= hi:
        raise OptionError(f"{name} = {shown(value, 40)} must be an integer in {lo:,}..{hi:,}")
    return int(value)


def whole_ids(t, name: str):
    """A readable CPU tensor of ids as int64, floating ids with whole values included (every
    mode of the kit reads them so), or (None, a note naming the first NaN, infinite, fractional
    or too large one). Tensor methods only: no import of torch here."""
    if t.is_floating_point():
        flat = t.reshape(-1)
        bad = ~flat.isfinite()
        if bad.any():
            i = int(bad.nonzero()[0])
            return None, f"{name} = {float(flat[i])} (dtype {t.dtype}) at row {i}"
        frac = flat != flat.round()
        if frac.any():
            i = int(frac.nonzero()[0])
            return None, (f"{name} = {float(flat[i])} (dtype {t.dtype}), not an integer, at "
                          f"row {i}")
        huge = flat.abs() > 2.0 ** 53  # int64 would wrap 1e30 to -2^63 (named as the value)
        if huge.any():
            i = int(huge.nonzero()[0])
            return None, f"{name} = {float(flat[i]):g} (dtype {t.dtype}) at row {i}, not an id"
    return t.long(), None


def package_code(obj) -> bool:
    """Whether ``obj`` (a function, a class) is this package's own code, its module under
    ``spectheory.``: the built-in verifiers, grammars and laws are called directly, anything else
    through [`call_user`][spectheory.runtime.errors.call_user]."""
    try:
        module = getattr(obj, "__module__", None)
    except Exception:  # noqa: BLE001 - a user object's __getattr__ may raise anything
        return False
    return isinstance(module, str) and (module == "spectheory" or module.startswith("spectheory."))


#: SIGINTs received while `counting_interrupts` is on (the command line's run), else None: how
#: `call_user` tells an interrupt (Ctrl-C, SIGINT) from user code raising KeyboardInterrupt.
_INTERRUPTS: list = [None]


@contextmanager
def counting_interrupts():
    """Count the SIGINTs received in the block (then raise ``KeyboardInterrupt`` as Python's own
    handler does), so that [`call_user`][spectheory.runtime.errors.call_user] can tell an
    interrupt from user code that raises ``KeyboardInterrupt`` itself: the first still ends the
    command (exit code 130), the second is the user code's failure (one line naming it, exit
    code 2), where it was reported as an interrupt nobody made. Off (nothing counted, every
    ``KeyboardInterrupt`` an interrupt) outside the main thread, under a SIGINT handler other
    than Python's default, and when nested."""
    import signal
    import threading

    if _INTERRUPTS[0] is not None or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def counted(signum, frame):
        _INTERRUPTS[0] += 1
        signal.default_int_handler(signum, frame)

    _INTERRUPTS[0] = 0
    signal.signal(signal.SIGINT, counted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _INTERRUPTS[0] = None


def _leave_if_forked(pid: int) -> None:
    """In a child that user code forked (``os.fork()``) and that came back into the toolkit
    instead of exiting: leave at once, silently (``os._exit``: no buffered output of the parent
    flushed again, no second report, no exit code of its own); the parent goes on alone. The
    child is not reaped (a wait for any child would take the user code's own): it stays a
    zombie until the command ends."""
    import os

    if os.getpid() != pid:
        (_exit_guard[0] if _exit_guard else os._exit)(0)


def call_user(fn, *args, what: str | None = None, **kwargs):
    """Call a user's ``fn(*args, **kwargs)``; anything it raises (any exception, and ``SystemExit``
    with any code, so that user code can never end a check with exit 0) becomes a
    [`UserCodeError`][spectheory.runtime.errors.UserCodeError] naming the function (``what``, else
    ``module:name``) and what it did. ``os._exit`` called in the main process while ``fn`` runs
    is refused the same way (it is replaced for the call, and put back after it; a process
    forked meanwhile still exits, and a child forked by ``fn`` that returns into the toolkit
    leaves silently: `_leave_if_forked`). ``KeyboardInterrupt`` passes through as an interrupt
    (unless `counting_interrupts` is on and counted no SIGINT during the call: then the user
    code raised it, and it is that code's failure), as does a
    [`SpectheoryError`][spectheory.runtime.errors.SpectheoryError] raised by the toolkit's own
    code (already one line); one that the user's code got from a toolkit function it called is
    named as that code's (`_through_user_code`). The original exception is chained (``--debug``
    prints it). What ``fn`` prints to standard output goes to
    standard error while it runs: standard output is the toolkit's (a report, one JSON object
    under ``--json``), and a sampler's debugging print must not break it."""
    import contextlib
    import inspect
    import os
    import sys

    _guard_process_exit()
    seen, pid = _INTERRUPTS[0], os.getpid()
    token = None
    if _call_watch:
        try:
            label = what or _describe(fn)
        except Exception:  # noqa: BLE001 - a user object's attributes may raise anything
            label = "user code"
        token = _call_watch[0](label)
    try:
        with contextlib.redirect_stdout(_kept_stderr()):
            out = fn(*args, **kwargs)
        if inspect.iscoroutine(out):  # an async function: never run, and closed so that Python
            out.close()  # warns of no coroutine "never awaited"; the caller refuses the result
    except SpectheoryError as exc:
        if isinstance(exc, (UserCodeError, TimeLimitError)) or not exc.user_code_raises or \
                not _through_user_code(exc):  # named already (a nested user call, the running
            raise  # call), a verdict's signal (not a law), or the kit's own
        label = what or _describe(fn)  # the toolkit refusing what the user's code passed it
        raise UserCodeError(f"{label} raised {_exception_text(exc)}") from exc
    except _UserProcessExit as exc:
        label = what or _describe(fn)
        raise UserCodeError(f"{label} called os._exit({exc.code!r}); user code must return, "
                            "not exit") from exc
    except SystemExit as exc:
        label = what or _describe(fn)
        raise UserCodeError(f"{label} called sys.exit({exc.code!r}); user code must return, "
                            "not exit") from exc
    except KeyboardInterrupt as exc:
        if seen is None or _INTERRUPTS[0] != seen:  # an interrupt (or none counted): it ends
            raise  # the command
        label = what or _describe(fn)
        raise UserCodeError(f"{label} raised KeyboardInterrupt with no interrupt received; "
                            "user code must return, not raise an interrupt") from exc
    except Exception as exc:  # noqa: BLE001 - user code may raise anything
        label = what or _describe(fn)
        raise UserCodeError(f"{label} raised {_exception_text(exc)}") from exc
    except BaseException as exc:  # GeneratorExit, asyncio.CancelledError, a test runner's
        label = what or _describe(fn)  # outcome exceptions: still the user code's failure
        raise UserCodeError(f"{label} raised {_exception_text(exc)}") from exc
    finally:
        _leave_if_forked(pid)
        if token is not None:
            _call_watch[1](token)
        _unguard_process_exit()
    failure = thread_failure()  # a thread the call started called os._exit, or raised
    if failure is not None:
        raise UserCodeError(failure)
    return out


def _users_frame(frame) -> bool:
    """Whether a frame runs the user's code, read from the module its code belongs to (its
    globals' ``__name__``, which a layout of files cannot change): not the toolkit's
    (``spectheory`` and its sub-packages, wherever their files lie, and the figure gallery's
    scripts), not Python's library (a module of ``sys.stdlib_module_names`` whose file lies in
    the library's folders, importlib's frozen frames); anything else is: a script or
    ``python -c`` (``__main__``), a module of the working folder, an installed package. A
    function generated by ``dataclasses`` runs in the globals of the module that defined the
    class, so it is that module's."""
    import sys

    name = frame.f_globals.get("__name__")
    if not isinstance(name, str):  # code run with bare globals: the user's exec
        return True
    if name == "spectheory" or name.startswith(("spectheory.", "spectheory_gallery_")):
        return False
    filename = frame.f_code.co_filename
    if filename.startswith("<frozen "):
        return False
    if name.partition(".")[0] not in sys.stdlib_module_names:
        return True
    # a user's own package may share a library module's name (code, token, profile): the
    # library's is in its folders, or code it generated (no file)
    return not (filename.startswith("<") or _in_library(filename))


def _in_library(filename: str) -> bool:
    """Whether a file lies in Python's library folders and not among installed packages."""
    import os

    library, installed = _library_folders()
    path = os.path.realpath(filename)
    return path.startswith(library) and not path.startswith(installed)


@functools.lru_cache(maxsize=1)
def _library_folders() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(Python's library folders, the installed packages' folders)."""
    import os
    import site
    import sysconfig

    def folders(paths):
        return tuple(sorted({os.path.join(os.path.realpath(d), "") for d in paths if d}))

    paths = sysconfig.get_paths()
    installed = [paths.get("purelib"), paths.get("platlib")]
    try:
        installed += [*site.getsitepackages(), site.getusersitepackages()]
    except AttributeError:  # a reduced site module (an embedded interpreter)
        pass
    return folders([paths.get("stdlib"), paths.get("platstdlib")]), folders(installed)


def _through_user_code(exc: BaseException) -> bool:
    """Whether a toolkit error came out of the user's own code: its traceback, from the user
    call down to where it was raised, passes through a frame of the user's (`_users_frame`):
    the user's sampler called a toolkit function, which refused its arguments. An error
    raised by the toolkit's own wrapper around the call (its check of what a user law
    returned) has no such frame, and passes through in its own words."""
    tb = exc.__traceback__
    while tb is not None:
        if _users_frame(tb.tb_frame):
            return True
        tb = tb.tb_next
    return False


#: Longest part of a user exception's message quoted in the one line.
MAX_QUOTED = 300


def _exception_text(exc: BaseException) -> str:
    """``TypeName: message`` on one line, the message cut at `MAX_QUOTED` characters (a message
    that cannot be made, a user exception whose ``__str__`` raises or returns no text, is said
    to be unprintable)."""
    try:
        text = str(exc)
        if not isinstance(text, str):
            raise TypeError("__str__ returned no text")
    except (KeyboardInterrupt, TimeLimitError):
        raise
    except BaseException:  # noqa: BLE001 - a user exception's __str__ may raise anything
        text = "(its message cannot be printed: its __str__ raised)"
    try:
        name = type(exc).__name__
        name = name if isinstance(name, str) else "exception"
    except Exception:  # noqa: BLE001 - a metaclass may make even the name raise
        name = "exception"
    detail = " ".join(text.split())
    if len(detail) > MAX_QUOTED:
        detail = detail[:MAX_QUOTED - 3] + "..."
    return name + (f": {detail}" if detail else "")


def _dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def import_user(text, what: str = "function"):
    """The object named by ``"module:attribute"`` (``attribute`` may be dotted), for a user's
    verifier, sampler or other function named on the command line: the one loader behind every
    ``module:function`` the toolkit accepts.

    A module not found on ``sys.path`` is looked for in the working folder too (as ``python -m``
    does; a console script does not put it on ``sys.path``). Every failure is one line:

    * not of the form ``module:function``, or a file path such as ``../x:f`` or ``x.py:f`` (a module
      name is dotted identifiers: [`InputError`][spectheory.runtime.errors.InputError] saying how to name
      it);
    * no such module, or no such attribute ([`InputError`][spectheory.runtime.errors.InputError]);
    * the module raises while it is imported, has a syntax error or calls ``sys.exit`` with any code
      ([`UserCodeError`][spectheory.runtime.errors.UserCodeError], naming the module and the error; the
      original is chained for ``--debug``).

    ``KeyboardInterrupt`` passes through (an interrupt, exit code 130), unless interrupts are
    counted (`counting_interrupts`) and none came: then the module raised it, and that is its
    failure ([`UserCodeError`][spectheory.runtime.errors.UserCodeError]). A
    [`TimeLimitError`][spectheory.runtime.errors.TimeLimitError] raised by the time-limit alarm during the
    import passes through. A child the module forked leaves silently (`_leave_if_forked`).
    """
    import importlib
    import os

    if not isinstance(text, str):
        raise InputError(f"{what} {text!r} is not a module:function name")
    module, sep, attr = text.partition(":")
    if not sep or not module or not attr:
        raise InputError(f"{what} {text!r} is not of the form module:function")
    if "/" in module or "\\" in module or module.endswith(".py") or module.startswith("."):
        raise InputError(
            f"{what} {text!r}: {module!r} is a file path, not a module name; name the module "
            f"as it is imported (e.g. x:f for x.py in the working folder, or pkg.x:f with the "
            f"folder above pkg on PYTHONPATH)")
    if not _dotted(module):
        raise InputError(f"{what} {text!r}: {module!r} is not a module name (dotted Python "
                         f"identifiers, e.g. pkg.module)")
    if not _dotted(attr):
        raise InputError(f"{what} {text!r}: {attr!r} is not an attribute name (dotted Python "
                         f"identifiers, e.g. function or Class.method)")
    _guard_process_exit()  # a module that calls os._exit while it is imported: refused too
    seen, pid = _INTERRUPTS[0], os.getpid()
    try:
        obj = _import_module(importlib, module)
    except TimeLimitError:
        raise
    except KeyboardInterrupt as exc:
        if seen is None or _INTERRUPTS[0] != seen:  # an interrupt (or none counted)
            raise
        raise UserCodeError(f"module {module!r} (for {what} {text!r}) raised KeyboardInterrupt "
                            "while being imported, with no interrupt received; a module must "
                            "not raise an interrupt") from exc
    except _UserProcessExit as exc:
        raise UserCodeError(f"module {module!r} (for {what} {text!r}) called "
                            f"os._exit({exc.code!r}) while being imported; a module must not "
                            f"exit") from exc
    except SystemExit as exc:
        raise UserCodeError(f"module {module!r} (for {what} {text!r}) called "
                            f"sys.exit({exc.code!r}) while being imported; a module must not "
                            f"exit") from exc
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.startswith(exc.name) and \
                (len(exc.name) == len(module) or module[len(exc.name)] == "."):
            raise InputError(f"cannot import module {module!r} for {what} {text!r}: no module "
                             f"named {exc.name!r} in the working folder or on sys.path") \
                from exc
        raise UserCodeError(f"cannot import module {module!r} for {what} {text!r}: "
                            f"{_exception_text(exc)}") from exc
    except Exception as exc:  # noqa: BLE001 - importing user code may raise anything
        raise UserCodeError(f"cannot import module {module!r} for {what} {text!r}: "
                            f"{_exception_text(exc)}") from exc
    finally:
        _leave_if_forked(pid)
        _unguard_process_exit()
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise InputError(f"module {module!r} has no attribute {attr!r} (for {what} "
                             f"{text!r})") from None
        except (KeyboardInterrupt, TimeLimitError):
            raise
        except SystemExit as exc:
            raise UserCodeError(f"looking up {attr!r} in module {module!r} called "
                                f"sys.exit({exc.code!r})") from exc
        except Exception as exc:  # noqa: BLE001 - a module __getattr__ may raise anything
            raise UserCodeError(f"looking up {attr!r} in module {module!r} raised "
                                f"{_exception_text(exc)}") from exc
    return obj


def _import_module(importlib, module: str):
    """Import a user's module, what it prints while imported sent to standard error (standard
    output is the toolkit's: one JSON object under ``--json``), as for its calls (`call_user`)."""
    import contextlib
    import os
    import sys

    with contextlib.redirect_stdout(_kept_stderr()):
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            here = os.getcwd()
            if exc.name != module.split(".")[0] or here in sys.path:
                raise
        sys.path.append(here)  # outside the handler: a failure here is not chained to the first
        return importlib.import_module(module)


def check_keys(obj: dict, valid, where: str, error: type = InputError) -> None:
    """Refuse a key of the JSON object ``obj`` that is not in ``valid``, in one line naming
    the nearest valid key (``difflib.get_close_matches``), so that a misspelt key (``"tagret"``)
    is never silently ignored."""
    import difflib

    valid = list(valid)
    for key in obj:
        if key in valid:
            continue
        shown = repr(key) if len(repr(key)) <= 40 else repr(key)[:37] + "..."
        near = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise error(f"{where}: unknown key {shown}; {hint}the keys are "
                    f"{', '.join(repr(k) for k in valid)}")
