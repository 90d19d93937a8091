"""Guarded child processes: the part of the sweep runner (`spectheory.sweep.runner`) that runs
work in forked children under a clock and a memory limit, shared by the jobs and by the calls of
the families made when a sweep file is read (`spectheory.sweep.families`).

A child runs its items one after the other, ``work(item)`` each, and sends each result when it
is done; the parent watches the clock and the private resident memory of the item the child is
running and kills the child past the item's ``time_limit`` (seconds) or ``memory_limit_mb``
(0: none). A stopped or crashed child is the item's result (``timeout``, ``memory``,
``crashed``), and the items after it run again in a new child.
"""

from __future__ import annotations

import os
import time

_POLL = 0.02
#: Reading a child's private memory (``smaps_rollup``) walks its page tables: milliseconds a
#: read for a child forked from a large parent (14 ms from a test process with torch loaded),
#: a third of a core at one read every `_POLL` seconds. Its resident set (``statm``, a counter)
#: bounds the private part from above and costs microseconds: the private memory is read at
#: once when the resident set reaches `_NEAR` times the limit (so a job is stopped when it was
#: before), and otherwise, for the job's peak, from `_FIRST_PEAK` seconds into the job (most
#: jobs are done before: their row's peak is the child's own) at most once per `_PEAK_EVERY`
#: times the last read's own cost (about 5% of the parent's time).
_NEAR = 0.9
_FIRST_PEAK = 0.1
_PEAK_EVERY = 20
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _die_with(parent: int) -> None:  # pragma: no cover - runs in the forked child
    """End this child when the process that forked it ends, however it ends (a SIGKILL too,
    which runs no clean-up): Linux's ``prctl(PR_SET_PDEATHSIG, SIGKILL)``; where it is not
    available the child finishes its jobs as before. A parent gone already: end now."""
    import signal

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent ended between the fork and the prctl
        os._exit(1)


def _child(jobs: list, conn, work, parent: int) -> None:  # pragma: no cover - forked child
    """A child's jobs (one, or a batch) in order: each job's outputs (``work(job)``: a sweep
    job's, or a family call's), sent as ``(index, outputs)`` when it is done. Ctrl-C is the
    parent's to handle (it reaches the whole process group: each child printed its own
    KeyboardInterrupt traceback under the parent's one line); the parent kills its children."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with(parent)
    _one_thread()
    try:
        for i, job in enumerate(jobs):
            conn.send((i, work(job)))
    finally:
        conn.close()


def _one_thread() -> None:  # pragma: no cover - runs in the forked child
    try:
        from ..runtime.threads import set_threads

        set_threads(1)
    except Exception:  # noqa: BLE001 - threads are a speed setting, never a failure
        pass


def _resident_mb(pid: int) -> float | None:
    """The child's resident set in MB (``/proc/PID/statm``: shared pages included, so at least
    its private memory), or None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * _PAGE_BYTES / 2**20
    except (OSError, ValueError, IndexError):
        return None


def _private_mb(pid: int) -> float:
    """The job's own resident memory: the child's private pages (``Private_Clean`` +
    ``Private_Dirty`` of ``/proc/PID/smaps_rollup``), not the pages it still shares with the
    parent it was forked from; ``VmRSS`` where smaps_rollup is missing."""
    try:
        total, seen = 0, False
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1])
                    seen = True
        if seen:
            return total / 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


class _Guarded:
    """The jobs of one forked child (one job, or a batch run one after the other), the clock
    and memory of the job it is running watched and the child killed past that job's limits.
    ``work(job)`` computes a job's outputs in the child; a job is anything with
    ``time_limit`` and ``memory_limit_mb``."""

    def __init__(self, jobs: list, work):
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        self.jobs = list(jobs)
        self.done = 0  # jobs whose outputs arrived; the child runs jobs[done]
        self.recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_child, args=(self.jobs, send, work, os.getpid()),
                                daemon=True)
        self.start = self.checked = time.perf_counter()
        self.peak = 0.0
        self.next_peak = self.start + _FIRST_PEAK  # the next read for the peak alone
        self.proc.start()
        send.close()

    def _end(self, status: str, error: str) -> dict:
        if self.proc.is_alive():
            if self.done < len(self.jobs) and self.jobs[self.done].memory_limit_mb:
                self.peak = max(self.peak, _private_mb(self.proc.pid))  # its last state
            self.proc.kill()
        self.proc.join()
        self.recv.close()
        return {"status": status, "error": error,
                "seconds": round(time.perf_counter() - self.start, 4),
                "peak_rss_mb": round(self.peak, 1)}

    def poll(self) -> tuple[list, list | None]:
        """The ``(job, outputs)`` pairs that arrived, and None while the child runs, else the
        jobs to run again in a new child (those after a job that was stopped or crashed)."""
        results = []
        ended = False
        while self.recv.poll():
            try:
                i, out = self.recv.recv()
            except (EOFError, OSError):  # the child closed the pipe: done or dead
                ended = True
                break
            results.append((self.jobs[i], out))
            self.done = i + 1
            self.start = time.perf_counter()
            self.peak = 0.0
            self.next_peak = self.start + _FIRST_PEAK
        if self.done == len(self.jobs):
            self.proc.join()
            self.recv.close()
            return results, []
        job, rest = self.jobs[self.done], self.jobs[self.done + 1:]
        if ended or not self.proc.is_alive():
            self.proc.join(timeout=5)
            results.append((job, self._end("crashed", f"the job's process ended with exit code "
                                                     f"{self.proc.exitcode} before returning a "
                                                     "result")))
            return results, rest
        now = time.perf_counter()
        if now - self.start > job.time_limit:
            results.append((job, self._end("timeout", f"stopped at the time limit of "
                                                      f"{job.time_limit:g} s")))
            return results, rest
        if job.memory_limit_mb and now - self.checked >= _POLL:  # as often as for one job
            self.checked = now
            rss = _resident_mb(self.proc.pid)
            if rss is not None and rss < _NEAR * job.memory_limit_mb and now < self.next_peak:
                return results, None  # private <= resident < the limit: nothing to read
            own = _private_mb(self.proc.pid)
            after = time.perf_counter()
            self.next_peak = after + _PEAK_EVERY * (after - now)
            self.peak = max(self.peak, own)
            if own > job.memory_limit_mb:
                results.append((job, self._end(
                    "memory", f"stopped at {own:.0f} MB of its own resident memory, over the "
                              f"memory limit of {job.memory_limit_mb} MB")))
                return results, rest
        return results, None


def _wait(running: list) -> None:
    """Sleep until a running job has sent its result or ended, at most `_POLL` seconds (the
    limits are checked at least that often; a finished job is collected at once)."""
    from multiprocessing.connection import wait

    wait([g.recv for g in running] + [g.proc.sentinel for g in running], timeout=_POLL)


def run_batches(jobs: list, workers: int, done, batch: int, work) -> None:
    """``workers`` children at once, each with about ``batch`` jobs, dealt round-robin (job i
    to batch i mod B, B = ceil(jobs / batch)), so that the costly parts of a grid spread over
    the children; each batch runs its jobs in order, ``work(job)`` each, and ``done(job,
    outputs)`` is called in this process as each result arrives (an exception it raises stops
    the children and passes through)."""
    n = -(-len(jobs) // batch)
    pending = [jobs[i::n] for i in reversed(range(n))]  # batches, the next one last
    running: list[_Guarded] = []
    try:
        while pending or running:
            while pending and len(running) < workers:
                running.append(_Guarded(pending.pop(), work))
            still = []
            for g in running:
                results, rest = g.poll()
                for job, out in results:
                    done(job, out)
                if rest is None:
                    still.append(g)
                elif rest:
                    pending.append(rest)  # the rest of the batch, next
            running = still
            if running and (len(running) >= workers or not pending):
                _wait(running)
    finally:
        for g in running:
            if g.proc.is_alive():
                g.proc.kill()
                g.proc.join()


def describe_error(exc: BaseException) -> str:
    """One line for a failed job (or a failed call in a guarded child)."""
    from ..runtime.errors import SpectheoryError

    if isinstance(exc, SpectheoryError):
        return " ".join(str(exc).split())
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
