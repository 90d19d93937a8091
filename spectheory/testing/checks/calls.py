"""Calling a sampler and counting what it returns, shared by every mode of the sampler check.

How [`check_sampler`][spectheory.testing.checks.sampler.check_sampler] hands rows to the sampler
(`_row_counts`: mixed batches of draft rows, or stride-0 views of one row), validates its outputs
(`_outputs`: one note naming the function and what it returned), paces the run against
``max_seconds`` (`_Pace`), and turns counted cells into the report
(`_cells`, `_report`, from the chi-square family of `spectheory.testing.statistics.stats`). The
context variables here name the function being called (`_WHO`), hold the running check's pace
(`_PACE`) and, while a budgeted run plans, collect each row's cell probabilities (`_ROW_LAWS`).
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import math
import time

import numpy as np
from ...runtime._lazy import torch

from ...runtime.errors import SpectheoryError, TimeLimitError, TooFewSamplesError, whole_ids
from ...runtime.kept import Kept, digest
from ..statistics import stats
from ..statistics._args import level
from .report import RUNNING, MIN_EXPECTED, POWER, SAMPLE_LIMIT, Cell, DraftRows, SamplerReport, declared
from ...runtime.limits import shown as _repr_cut

#: Default bound on the floats of the inputs of one sampler call (rows x K (2L+1) V).
MAX_CALL_FLOATS = 2**25
#: Most samples handed to one call of a ``repeat_aware`` sampler (its outputs are counted, and
#: dropped, call by call, so the check's memory does not grow with ``samples``).
COUNT_CHUNK = 2**18
#: Seconds of calls after which the measured rate is projected onto ``samples``.
PROJECT_AFTER_S = 2.0


#: True while a budget's pilot checks run: a check with too few samples to test anything
#: returns its failing report (``needs_samples``) for the sizing to read, instead of refusing.
UNTESTED_REPORTS = contextvars.ContextVar("spectheory_untested_reports", default=False)
#: What a check is calling, for its notes ("sampler module:function").
_WHO = contextvars.ContextVar("spectheory_sampler_who", default="the sampler")
#: The running check's `_Pace` (None outside a check).
_PACE = contextvars.ContextVar("spectheory_sampler_pace", default=None)
#: A list while a budgeted check plans: each row's cell probabilities, in the check's order.
_ROW_LAWS = contextvars.ContextVar("spectheory_sampler_row_laws", default=None)


#: A sampler call in a budgeted check is stopped once it has run this many times the budget
#: (plus `WATCHDOG_SLACK_S`), and one in a check under a caller's ``max_seconds`` this many times
#: that: a sampler call that never returns cannot hold a check silently.
WATCHDOG_FACTOR = 2.0
#: Seconds added to the watchdog's deadline (start-up, the first calls).
WATCHDOG_SLACK_S = 1.0


@contextlib.contextmanager
def _watchdog(seconds: float, what: str):
    """Stop the block with one [`TimeLimitError`][spectheory.runtime.errors.TimeLimitError] line,
    naming the sampler and ``what`` (the budget, ``max_seconds``), when a call of user code
    (`RUNNING`) is still running ``seconds`` after it began: a sampler that never returns. A
    bound on each call, not on the block: a check that runs long on a loaded machine, its calls
    all returning, is not stopped. Past a call's deadline in the check's own work the block goes
    on, and the first user call still running when it is looked at again (every 0.05 s) is
    stopped. A ``SIGALRM`` timer in the main thread (it interrupts a sampler sleeping or looping in
    Python; a call blocked inside one C routine is stopped when it returns). An earlier alarm
    already armed (``--time-limit``'s backstop) keeps its time: sooner than ``seconds`` it
    bounds the block alone; later, its handler is called when its time comes, and it is
    re-armed after the block. Off the main thread, or without ``setitimer``, the block runs
    unwatched."""
    import signal
    import threading

    from ...runtime.limits import _collection_starts, _collection_stops, _unsafe_to_raise

    if not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return
    earlier = signal.getitimer(signal.ITIMER_REAL)[0]
    if earlier and earlier <= seconds:  # a sooner alarm bounds the block already
        yield
        return
    torch.zeros(0)  # the lazy import done before the alarm is armed (an alarm inside an
    # import would leave the module half-initialised)
    # when the earlier alarm is due (perf_counter time; None: delivered, or none was armed)
    outer = [time.perf_counter() + earlier if earlier else None]

    def again(after: float) -> None:
        """Look again ``after`` seconds from now, or when the earlier alarm is due if sooner."""
        if outer[0] is not None and callable(old):
            after = min(after, outer[0] - time.perf_counter())
        signal.setitimer(signal.ITIMER_REAL, max(0.001, after))

    def on_alarm(signum, frame):
        now = time.perf_counter()
        if outer[0] is not None and now >= outer[0] and callable(old):  # the earlier alarm is
            outer[0] = None  # due (--time-limit): delivered once, not re-armed after the block
            old(signum, frame)  # its handler stops the run, or defers: it re-arms the timer
            left = signal.getitimer(signal.ITIMER_REAL)[0]
            if left:  # called again then, as its own timer would have
                outer[0] = time.perf_counter() + left
            now = time.perf_counter()
        # (an earlier alarm without a Python handler, SIG_IGN or SIG_DFL, is delivered when
        # the block ends: the block cannot run its default action in its place)
        who, since = RUNNING[0], RUNNING[1]
        if who is None or _unsafe_to_raise(frame):  # in a collection, a finaliser or an import
            # an exception would be lost or leave a module half-imported; in the check's own
            # work (counting) nothing hangs: look again just after
            again(0.05)
            return
        if now - since < seconds:  # a call that began later: its own deadline
            again(seconds - (now - since))
            return
        raise TimeLimitError(f"{who} did not return: the call was stopped after "
                             f"{now - since:.1f} s, past {WATCHDOG_FACTOR:g} times {what} plus "
                             f"{WATCHDOG_SLACK_S:g} s ({seconds:.1f} s); a call of the code "
                             f"under test must return")

    old = signal.signal(signal.SIGALRM, on_alarm)
    tracking = _collection_starts not in gc.callbacks
    if tracking:  # mark garbage collections (first and last callbacks), as a time limit does
        gc.callbacks.insert(0, _collection_starts)
        gc.callbacks.append(_collection_stops)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if tracking:
            for callback in (_collection_starts, _collection_stops):
                if callback in gc.callbacks:
                    gc.callbacks.remove(callback)
        if outer[0] is not None:  # the earlier alarm, not yet delivered: at its own time
            signal.setitimer(signal.ITIMER_REAL, max(0.001, outer[0] - time.perf_counter()))


def _budget_bound(budget_s: float):
    """The watchdog of a budgeted check: one sampler call still running `WATCHDOG_FACTOR` times
    the budget plus `WATCHDOG_SLACK_S` after it began is stopped."""
    return _watchdog(WATCHDOG_FACTOR * budget_s + WATCHDOG_SLACK_S,
                     f"the budget of {budget_s:g} s")


def _caller_bound(max_seconds, default: float):
    """The watchdog of a ``max_seconds`` the caller chose (below the check's ``default``, a day):
    one sampler call still running `WATCHDOG_FACTOR` times it plus `WATCHDOG_SLACK_S` after it
    began is stopped. The pace bounds the run of a sampler that returns (from its rate, once
    the calls have run `PROJECT_AFTER_S`); this bounds a call that does not return."""
    if max_seconds is None or max_seconds >= default:
        return contextlib.nullcontext()
    return _watchdog(WATCHDOG_FACTOR * float(max_seconds) + WATCHDOG_SLACK_S,
                     f"max_seconds = {float(max_seconds):g}")


def _collect_law(probs) -> None:
    laws = _ROW_LAWS.get()
    if laws is not None:
        laws.append(np.asarray(probs, dtype=np.float64))


class _Pace:
    """Samples counted against time in one check: honours a `spectheory.runtime.limits.running` time
    limit, and once the calls have run `PROJECT_AFTER_S` seconds, stops the check with a
    `TimeLimitError` when the rate measured after the first call projects the whole run past
    ``max_seconds``."""

    #: The advice that ends a refusal: what the check's caller can change.
    REMEDY = "lower samples, raise max_seconds, or let samples='auto' with budget_s size the run"

    def __init__(self, samples: int, max_seconds: float | None, remedy: str = REMEDY,
                 bound: str | None = None, what: str = "check_sampler"):
        self.samples, self.max_seconds, self.remedy = int(samples), max_seconds, remedy
        self.what = what  # the check, as notes and time-limit messages name it
        self.bound = bound  # the limit as the refusal names it (None: "max_seconds = ...")
        self.start = time.perf_counter()
        self.done = 0
        self.first = None  # (time, samples done) after the first call: warm-up excluded
        self.noted = False  # the estimate noted on stderr (a command line run over 30 s)

    def add(self, m: int) -> None:
        from ...runtime.limits import NOTE_SECONDS, check_time, human_seconds, note

        check_time(f" in {self.what}", "fewer samples")
        self.done += int(m)
        now = time.perf_counter()
        if self.first is None:
            self.first = (now, self.done)
            return
        t0, d0 = self.first
        if now - self.start < PROJECT_AFTER_S or self.done <= d0:
            return
        rate = (now - t0) / (self.done - d0)
        total = (now - self.start) + rate * max(0, self.samples - self.done)
        if not self.noted and NOTE_SECONDS < total <= (self.max_seconds or math.inf):
            self.noted = True
            note(f"{self.what}: {self.samples:,} samples, estimated {human_seconds(total)} "
                 f"({rate:.3g} s a sample, measured on the first {self.done:,}); --time-limit "
                 f"SECONDS bounds it")
        if self.max_seconds is not None and total > self.max_seconds:
            raise TimeLimitError(
                f"samples = {self.samples:,} would take about {human_seconds(total)} "
                f"({rate:.3g} s a sample, measured on the first {self.done:,}), over "
                f"{self.bound or f'max_seconds = {self.max_seconds:g}'}; {self.remedy}")


def _pace_add(m: int) -> None:
    pace = _PACE.get()
    if pace is not None:
        pace.add(m)


def kit_seed(seed) -> int:
    """A check's ``seed``: an integer in 0..2^63-1 (a negative seed or one past 2^63 would reach
    torch's ``manual_seed`` in another form, 1.5 would be cut to 1, and a string would fail deep
    inside), else an `OptionError` in one line."""
    from ...inputs.random_instances import MAX_SEED
    from ...runtime.errors import OptionError

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or \
            not 0 <= seed <= MAX_SEED:
        raise OptionError(f"seed = {_repr_cut(seed, 40)} must be an integer in 0..{MAX_SEED:,}")
    return int(seed)


def readable(t, name: str):
    """``t`` copied to the CPU, or a note naming why its values cannot be read there (a tensor on
    the ``meta`` device has a shape and no data; another device may fail to copy)."""
    if t.device.type == "meta":
        return None, f"{name} on the meta device (a shape without values)"
    try:
        return t.cpu(), None
    except Exception as exc:  # noqa: BLE001 - a device's copy failing is the output's fault
        detail = " ".join(str(exc).split())[:120]
        return None, f"{name} on device {t.device} that could not be copied to the CPU ({detail})"


def unreadable(read):
    """``read`` (a function of a sampler's return value and the rest of its arguments, giving
    (values, None) or (None, note)) with whatever the returned object raises while it is read
    (a tuple whose iteration raises, a tensor layout torch cannot reshape) made a note naming
    the object and the error, never a traceback from inside the kit nor a "sampler raised" line
    (the sampler returned). Interrupts and the run's time limit pass through."""
    import functools

    @functools.wraps(read)
    def guarded_read(out, *args, **kwargs):
        try:
            return read(out, *args, **kwargs)
        except (KeyboardInterrupt, TimeLimitError):
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the returned object does when read
            who = kwargs.get("who") or _WHO.get()
            return None, (f"{who} returned a {type(out).__name__} that cannot be read "
                          f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]})")
    return guarded_read


def _dense(t, name: str):
    """A note when ``t`` is not a plain dense tensor (sparse, nested, quantized layouts have no
    values the kit reads as ids); else None."""
    if getattr(t, "is_nested", False):
        return f"{name} as a nested tensor, not a dense tensor"
    if t.layout != torch.strided:
        return f"{name} of layout {t.layout}, not a dense tensor"
    return None


def _as_index(x, name: str):
    """A sampler's output as a flat int64 tensor, or a note on what it is instead."""
    try:
        t = torch.as_tensor(x)
    except Exception as exc:  # noqa: BLE001 - anything that is not array-like
        if isinstance(exc, (OverflowError, ValueError)) and "verflow" in str(exc) and \
                isinstance(x, (list, tuple)):
            # a list is read (as engines return ids): this one holds a value no int64 holds
            return None, (f"{name}, a {type(x).__name__} of {len(x)}, holds a value out of "
                          f"the range of token ids (int64): {str(exc)[:60]}")
        dtype = getattr(x, "dtype", None)
        return None, (f"{name} of type {type(x).__name__}"
                      f"{f' (dtype {dtype})' if dtype is not None else ''}, not a tensor of "
                      f"integer ids")
    note = _dense(t, name)
    if note:
        return None, note
    if t.dtype == torch.bool or t.is_complex():
        return None, f"{name} of dtype {t.dtype}, not an integer tensor"
    if t.dim() > 1:  # [B] expected: [1, B] or [B, 1] is a layout mistake, not a batch of B
        return None, f"{name} of shape {list(t.shape)}, not a vector [B]"
    t, note = readable(t, name)
    if note:
        return None, note
    return whole_ids(t.reshape(-1), name)


@unreadable
def _outputs(out, K: int, n: int, L: int, V: int):
    """Validate a sampler's return value; (k, tau, y) long tensors [n] or a note naming the
    function and what it returned."""
    who = _WHO.get()
    want = 2 if K == 1 else 3
    names = ("accepted", "token") if K == 1 else ("path", "accepted", "token")
    if not isinstance(out, (tuple, list)) or len(out) != want:
        return None, (f"{who} returned {type(out).__name__}"
                      f"{' of length ' + str(len(out)) if isinstance(out, (tuple, list)) else ''}"
                      f", not a tuple of {want} tensors ({', '.join(names)})")
    parts = []
    for name, x in zip(names, out):
        t, note = _as_index(x, name)
        if note:
            return None, f"{who} returned {note}"
        parts.append(t)
    if any(x.shape[0] != n for x in parts):
        shapes = ", ".join(f"{name} {list(torch.as_tensor(x).shape)}"
                           for name, x in zip(names, out))
        return None, f"{who} returned {shapes} for a batch of {n}"
    if K == 1:
        parts = [torch.zeros(n, dtype=torch.long)] + parts
    k, tau, y = parts
    for name, x, hi in (("path", k, K - 1), ("accepted", tau, L), ("token", y, V - 1)):
        bad = (x < 0) | (x > hi)
        if bad.any():
            i = int(bad.nonzero()[0])
            return None, f"{who} returned {name} = {int(x[i])} outside 0..{hi} (row {i})"
    return (k, tau, y), None


def _chunk(K: int, L: int, V: int, max_batch: int | None, sampler=None) -> int:
    if max_batch is None and declared(sampler, "repeat_aware", False):
        return COUNT_CHUNK
    if max_batch is not None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise SpectheoryError(f"max_batch = {max_batch!r} must be a positive integer")
        return max_batch
    return max(1, MAX_CALL_FLOATS // (K * (2 * L + 1) * V))


#: Rows of the first call of a run too large for one interleaved batch; each later call may be
#: four times larger, up to the run's chunk (a sampler at 1 ms a row gives its rate in seconds,
#: not after a first call of 1.6 million rows).
RAMP_FIRST_ROWS = 4096


def _row_counts(sampler, rows: DraftRows, counts: list[int], generator, chunk: int):
    """Call the sampler on each draft row repeated counts[b] times, at most ``chunk`` rows a
    call, and yield ``(b, observed counts of the cells (k, tau, Y) [K (L+1) V], None)`` for
    b = 0, 1, ... in order, or ``(b, None, note)`` once the sampler returns something invalid.

    Inputs of at most `MAX_CALL_FLOATS` floats in all are gathered into batches of interleaved
    draft rows (so that a sampler mixing up the rows of a batch is seen); larger ones are handed
    over one draft row at a time as read-only stride-0 views, and each call's outputs are counted
    and dropped, so memory does not grow with the counts."""
    d, q, p = rows
    Bn, K, L = d.shape
    V = q.shape[-1]
    C = K * (L + 1) * V
    total = sum(counts)

    def call(dd, qq, pp):
        m = dd.shape[0]
        if K == 1:
            out = sampler(dd[:, 0], qq[:, 0], pp[:, 0], generator)
        else:
            out = sampler(dd, qq, pp, generator)
        res, note = _outputs(out, K, m, L, V)
        if note:
            return None, note
        _pace_add(m)
        k, tau, y = res
        return ((k * (L + 1) + tau) * V + y).numpy(), None

    if total * K * (2 * L + 1) * V <= MAX_CALL_FLOATS:
        # draft rows interleaved, so that a sampler mixing up rows of a batch is seen
        ids = torch.repeat_interleave(torch.arange(Bn), torch.as_tensor(counts))
        ids = ids[torch.randperm(len(ids), generator=generator)]
        rid_parts, cell_parts = [], []
        s, ramp = 0, RAMP_FIRST_ROWS  # the first calls grow to `chunk`, as below: the pace
        while s < total:  # measures a slow sampler's rate on a small call, and notes or stops
            part = ids[s:s + min(chunk, ramp)]  # the run seconds in, not after a full call
            s += len(part)
            ramp *= 4
            cells, note = call(d[part], q[part], p[part])
            if note:
                yield 0, None, note
                return
            rid_parts.append(part.numpy())
            cell_parts.append(cells)
        rid, cell = np.concatenate(rid_parts), np.concatenate(cell_parts)
        if Bn * C <= 2**24:
            table = np.bincount(rid * C + cell, minlength=Bn * C).reshape(Bn, C)
            for b in range(Bn):
                yield b, table[b], None
        else:
            order = np.argsort(rid, kind="stable")
            rid, cell = rid[order], cell[order]
            bounds = np.searchsorted(rid, np.arange(Bn + 1))
            for b in range(Bn):
                yield b, np.bincount(cell[bounds[b]:bounds[b + 1]], minlength=C), None
        return
    ramp = RAMP_FIRST_ROWS  # the first calls of a large run grow to `chunk`: the pace measures
    for b in range(Bn):  # the sampler's rate on small calls and stops a run that would take days
        obs = np.zeros(C, dtype=np.int64)  # before one full call of a slow sampler ends
        left = counts[b]
        while left > 0:
            m = min(left, chunk, ramp)
            ramp *= 4
            cells, note = call(d[b:b + 1].expand(m, -1, -1), q[b:b + 1].expand(m, -1, -1, -1),
                               p[b:b + 1].expand(m, -1, -1, -1))
            if note:
                yield b, None, note
                return
            obs += np.bincount(cells, minlength=C)
            left -= m
        yield b, obs, None


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _an_instance(instance, what: str) -> None:
    """`OptionError` naming ``what`` unless ``instance`` is a spectheory Instance (before its
    attributes are read: an AttributeError otherwise)."""
    from ...inputs.instances import Instance
    from ...runtime.errors import OptionError

    if not isinstance(instance, Instance):
        raise OptionError(f"{what}: the instance is {type(instance).__name__}, not a spectheory "
                          "Instance")


def _instance_list(instances, default, empty: str) -> list:
    """``instances`` (one Instance, or an iterable of them; ``default()`` when None) as a
    non-empty list of Instances, else an `OptionError` in one line (``empty`` when there are
    none)."""
    from ...inputs.instances import Instance, check_instance
    from ...runtime.errors import OptionError

    if isinstance(instances, Instance):
        instances = [instances]
    try:
        insts = default() if instances is None else list(instances)
    except TypeError:
        raise OptionError(f"instances must be a list of spectheory Instances, not "
                          f"{type(instances).__name__}") from None
    if not insts:
        raise OptionError(empty)
    for inst in insts:
        if not isinstance(inst, Instance):
            raise OptionError(f"an instance must be a spectheory Instance, not "
                              f"{type(inst).__name__}")
    for i, inst in enumerate(insts):  # sizes and rows: a bad table is the input's fault,
        check_instance(inst, where=f"instances[{i}]")  # never a failing engine's
    return insts


def _run_arguments(samples, alpha, tokens, seed, max_seconds, instances, default,
                   max_samples: int, max_tokens: int) -> list:
    """The arguments shared by the checks that run a real engine's generate loop
    (`check_hf_generate`, `check_mlx_generate`), each refused in one line
    ([`OptionError`][spectheory.runtime.errors.OptionError]) before anything runs: ``samples``
    an integer in 1..max_samples, ``alpha`` in (0, 1), ``tokens`` an integer in 1..max_tokens,
    ``seed`` an integer in 0..2^62-1 (-1 would wrap, 1.5 would be 1), ``max_seconds`` a positive
    number or None (not a boolean). Returns the instances (``instances``: one Instance, or a
    sequence of them; ``default()`` when None), the samples each gets (at least one) and
    ``alpha`` as a float."""
    from ...runtime.errors import OptionError

    def integer(x):
        return not isinstance(x, bool) and isinstance(x, (int, np.integer))

    if not integer(samples) or not 1 <= samples <= max_samples:
        raise OptionError(f"samples = {_repr_cut(samples, 40)} must be an integer in 1..{max_samples:,}")
    alpha = level("alpha", alpha)
    if not integer(tokens) or not 1 <= tokens <= max_tokens:
        raise OptionError(f"tokens = {_repr_cut(tokens, 40)} must be an integer in 1..{max_tokens}")
    if not integer(seed) or not 0 <= seed < 2**62:
        raise OptionError(f"seed = {_repr_cut(seed, 40)} must be an integer in 0..2^62-1")
    if max_seconds is not None and (isinstance(max_seconds, bool) or
                                    not isinstance(max_seconds, (int, float)) or
                                    not max_seconds > 0):
        raise OptionError(f"max_seconds = {_repr_cut(max_seconds, 40)} must be a positive number or None")
    insts = _instance_list(instances, default, "no instances to check")
    per = _split(int(samples), len(insts))
    if min(per) < 1:
        raise TooFewSamplesError(f"samples = {samples} is fewer than the {len(insts)} instances", len(insts))
    return insts, per, alpha


def _failed(mode, samples, alpha, name, note, rows=0) -> SamplerReport:
    return SamplerReport(False, 0.0, mode, samples, alpha, None, float("nan"), name, rows=rows,
                         notes=[note])


def _tokens(x) -> tuple:
    return tuple(int(t) for t in x)


def _sequence_label(inst_i: int, V: int, L: int):
    """The cell label of a lossless check over output sequences of L + 1 tokens: cell c is the
    sequence c in base V (the pooled cell, c < 0, named as such)."""
    def label(c):
        if c < 0:
            return f"instance {inst_i}: pooled sequences (expected < {MIN_EXPECTED:g} each)"
        toks = [(int(c) // V ** (L - j)) % V for j in range(L + 1)]
        return f"instance {inst_i}: output sequence {tuple(toks)}"

    return label


def _cells(test, probs, obs, label, zero: str, impossible, worst):
    """Update the report's two cells with one test: the first sample on an outcome of
    probability 0 (kept once found), and the cell with the largest standardised deviation
    ``(z, Cell)``; ``label(c)`` names cell ``c`` (negative: the pooled bin)."""
    if test.impossible and impossible is None:
        c = int(np.flatnonzero((probs <= 0) & (obs > 0))[0])
        impossible = Cell(label(c) + f" ({zero})", float(obs[c]), 0.0)
    if test.dof > 0:
        z = abs(test.worst_observed - test.worst_expected) / math.sqrt(test.worst_expected)
        if worst is None or z > worst[0]:
            worst = (z, Cell(label(test.worst), test.worst_observed, test.worst_expected))
    return impossible, worst


def _summary(tests, alpha, worst, impossible, zero="outcomes of probability zero"):
    """What every chi-square report starts from: the family of ``tests``, the cell to show (a
    sample on an outcome of probability zero first, else the worst cell), the detection figure,
    and the note on samples that fell on ``zero``."""
    fam = stats.family(tests)
    notes = []
    cell = worst[1] if worst else None
    if impossible is not None:
        cell = impossible
        notes.append(f"{fam.impossible} sample(s) fell on {zero}")
    return fam, cell, stats.min_detectable_tv(tests, alpha, POWER), notes


def point_mass_figure(n_min: int) -> tuple[float, str]:
    """(min detectable TV, note) of a check whose every instance's law is one sequence (greedy
    decoding: no chi-square has a degree of freedom): any bias puts mass on a sequence of
    probability zero, and one such sample fails the check, so a bias of total variation t is
    caught with probability 1 - (1 - t)^n in an instance's n >= ``n_min`` samples."""
    mdt = stats.point_mass_tv(n_min, POWER)
    return mdt, (f"every instance's law is one sequence (a point mass, as under greedy decoding "
                 f"or masks and biases that leave one token): a sample of any other "
                 f"sequence fails the check, so a bias of total variation t is caught with "
                 f"probability 1 - (1 - t)^n, n >= {n_min:,}")


def _needs_text(per: int, rows: int, first: int, limit: int | None, each: str) -> str:
    """The advice of a too-few-samples refusal: a test of every one of ``rows`` rows needs
    ``per`` samples each, a first test ``first`` in all; a count over ``limit`` (the most samples
    the mode runs; None: no limit) is said to be out of reach, never advised as such."""
    total = per * rows
    if limit is not None and first > limit:
        return (f"no sample count within the limit of {limit:,} tests any of them (a first test "
                f"needs {first:,}: the rows are too close to point masses to be tested by "
                f"sampling)")
    if limit is not None and total > limit:
        return (f"a first test needs at least {first:,} samples; a test of every {each} needs "
                f"{total:,} ({per:,} each), over the limit of {limit:,}")
    return (f"a test of every {each} needs at least {total:,} samples ({per:,} each), a first "
            f"test {first:,}")


def _report(mode, tests, samples, alpha, name, worst, impossible, laws=None,
            limit=SAMPLE_LIMIT) -> SamplerReport:
    """The report of a chi-square family ``tests``; with ``laws`` (each row's cell
    probabilities, in the tests' order) two cases without a degree of freedom are told apart:
    every row's law a point mass (greedy decoding: the detection figure is that of a sample off
    the point, `stats.point_mass_tv`), and too few samples for any row to be tested, refused
    (`TooFewSamplesError`, saying how many samples a test of every row needs, and when that is
    over ``limit``, the most samples the mode runs)."""
    fam, cell, mdt, notes = _summary(tests, alpha, worst, impossible)
    unit = {"lossless": "instances", "proposal": "proposal rows"}.get(mode, "draft rows")
    if fam.dof == 0 and laws is not None and len(laws) == len(tests) and tests:
        need = [stats.samples_for_a_test(p_, MIN_EXPECTED) for p_ in laws]
        need = [x for x in need if x is not None]
        if not need:  # every row a point mass
            n = min(t.n for t in tests)
            mdt = stats.point_mass_tv(n, POWER)
            notes.append(f"no row has two cells to compare (each row's law sits on one outcome, "
                         f"as under greedy decoding): the check fails on any sample of an "
                         f"outcome of probability zero, so a bias of total variation t in a "
                         f"row's n >= {n:,} samples is caught with probability 1 - (1 - t)^n, "
                         f"at least {POWER:.0%} for t >= {mdt:.3g}")
        elif not fam.impossible:
            per = max(need)
            total = per * len(tests)
            notes.append(f"no degree of freedom was tested: {samples:,} samples over "
                         f"{len(tests)} {unit} leave no row two bins of expected count >= "
                         f"{MIN_EXPECTED:g}, so no bias could be seen; "
                         + _needs_text(per, len(tests), min(need) * len(tests), limit, "row"))
            if UNTESTED_REPORTS.get():  # a budget's pilot: the sizing reads the report
                return SamplerReport(False, float("nan"), mode, samples, alpha, None,
                                     float("inf"), name, fam.statistic, 0, 0, notes=notes,
                                     needs_samples=total)
            # nothing was tested: the sample count is at fault, never a verdict (every mode
            # refuses it the same way: chain, tree, step)
            from ...runtime.errors import TooFewSamplesError

            raise TooFewSamplesError(f"samples = {samples:,}: {notes[-1]}", total)
    return SamplerReport(fam.p_value > alpha, fam.p_value, mode, samples, alpha, cell, mdt,
                         name, fam.statistic, fam.dof, len(tests), notes=notes)


#: Reference laws kept (`_reference_law`): a check computes its verifier's law on the same
#: draft rows seed after seed, and its hints the other rule's law on them again.
LAW_CACHE_SIZE = 64
_LAW_CACHE = Kept(LAW_CACHE_SIZE)


def _kit_law(spec) -> bool:
    """Whether ``spec`` is a verifier of the toolkit's own: the spec registered under its name,
    whose law function is defined in this package (not a ``module:function``, an entry point's or
    a function handed over in Python, each wrapped as user code). Such a law is a pure function
    of its input rows."""
    from ...registry import GuardedFunction, UserVerifier, _REGISTRY
    from ...runtime.errors import package_code

    fn = spec.function
    return (_REGISTRY.get(spec.name) is spec
            and not isinstance(fn, (GuardedFunction, UserVerifier)) and package_code(fn))


def _reference_law(spec, d, q, p, what: str):
    """``spec.law(d, q, p)`` through [`call_user`][spectheory.runtime.errors.call_user]. For the
    toolkit's own verifiers (`_kit_law`), whose law is a pure function of the rows, the law is
    kept per (spec, digest of the three row tensors' dtype, shape and bytes): the same rows give
    the same law bit for bit, so it is computed once and handed out as fresh copies (a caller may
    alter what it gets). A law that raises is not kept (the next call raises again); a user's
    verifier is called every time (its law may be impure or raise), on copies of the rows: a
    law that writes into its inputs would otherwise change the rows the sampler is handed next
    (a correct sampler then failed, or a wrong one passed against the altered target)."""
    from ...runtime.errors import call_user

    key = None
    if not _kit_law(spec):
        d, q, p = (x.clone() if isinstance(x, torch.Tensor) else x for x in (d, q, p))
    else:
        rows = digest(d, q, p)
        if rows is not None:
            key = (spec, rows)
            hit = _LAW_CACHE.get(key)
            if hit is not None:
                return type(hit)(*(x.clone() for x in hit))
    law = call_user(spec.law, d, q, p, what=what)
    if key is not None and isinstance(law, tuple) and len(law) == 2 \
            and all(isinstance(x, torch.Tensor) for x in law):
        _LAW_CACHE.keep(key, type(law)(*(x.clone() for x in law)))
    return law
