"""What a sampler check plans before its first call: the fewest samples it accepts, and the
refusals of a run past ``max_seconds`` or ``max_memory_bytes`` (one `SizeLimitError` line, before
anything is allocated).
"""

from __future__ import annotations

from ...runtime.errors import SpectheoryError
from ...registry import plan
from .calls import COUNT_CHUNK, MAX_CALL_FLOATS
from .report import MAX_SECONDS, MIN_SECONDS_PER_SAMPLE, SAMPLE_LIMIT  # noqa: F401 (re-exported)
from .lossless_mode import MAX_LOSSLESS_CELLS
from .rows import _dims

#: Most memory (bytes) a check may plan to hold by default (``max_memory_bytes``; half of the
#: machine's memory when that is less): count tables, laws, rows and one call's inputs and
#: outputs; a larger plan is refused before anything is allocated.
MAX_MEMORY_BYTES = 8 * 2**30
#: Bytes a sample of one call holds while it is counted (path, accepted, token, row index, cell
#: and the uniforms of spectheory's own sampler, int64 / float64).
BYTES_PER_SAMPLE = 64


def _min_samples(mode: str, instances, draft_rows: int) -> int:
    """The fewest samples a check accepts: one per draft row (law), one per instance
    (lossless), one (coins modes)."""
    if mode == "law":
        return sum(draft_rows if rows is None else rows
                   for rows, _, _ in (_dims(i) for i in instances))
    return len(instances) if mode == "lossless" else 1


def _refuse_time(samples: int, max_seconds: float | None, what: str | None = None,
                 remedy: str = "lower samples, or let samples='auto' with budget_s size the "
                               "run") -> None:
    """Refuse, before any call, a count whose least cost (`MIN_SECONDS_PER_SAMPLE` a sample,
    the check's own work) exceeds ``max_seconds``; ``what`` names the count in the message
    (default ``samples = N``; the command line says ``--samples N``)."""
    if max_seconds is None:
        return
    if isinstance(max_seconds, bool) or not isinstance(max_seconds, (int, float)) or \
            not max_seconds > 0:
        raise SpectheoryError(f"max_seconds = {max_seconds!r} must be a positive number of "
                              f"seconds or None")
    least = samples * MIN_SECONDS_PER_SAMPLE
    if least > max_seconds:
        from ...runtime.errors import SizeLimitError
        from ...runtime.limits import human_seconds

        raise SizeLimitError(
            f"{what or f'samples = {samples:,}'} would take at least {human_seconds(least)} (the "
            f"check's own work costs at least {MIN_SECONDS_PER_SAMPLE:g} s a sample; the "
            f"sampler's time comes on top), over max_seconds = {max_seconds:g} "
            f"({human_seconds(max_seconds)}); {remedy}")


def _planned_bytes(samples: int, mode: str, instances, K: int, draft_rows: int) -> tuple:
    """(bytes, what) a check plans to hold: law mode the rows (float64), the exact law and a
    count table per draft row; lossless mode the target law and counts over V^(L+1) sequences;
    every mode one call's inputs (at most `MAX_CALL_FLOATS` floats, copied once) and the
    samples counted at once (`BYTES_PER_SAMPLE` each; counting is call by call, so this is
    bounded whatever ``samples``)."""
    fixed = held = call = 0
    rows_total, cells = 0, 0
    for inst in instances:
        rows, L, V = _dims(inst)
        per_sample_floats = K * (2 * L + 1) * V
        if mode == "law":
            R = draft_rows if rows is None else rows
            C = K * (L + 1) * V
            fixed += 8 * R * (per_sample_floats + K * (L + 1) * (V + 1) + C)
            rows_total, cells = rows_total + R, max(cells, C)
        elif mode == "lossless" and V ** (L + 1) <= MAX_LOSSLESS_CELLS:
            fixed += 8 * 3 * V ** (L + 1)
        at_once = min(samples, max(COUNT_CHUNK, MAX_CALL_FLOATS // per_sample_floats))
        held = max(held, at_once)
        call = max(call, 2 * 8 * min(MAX_CALL_FLOATS, at_once * per_sample_floats))
    total = fixed + call + held * BYTES_PER_SAMPLE
    what = (f"rows, exact laws and count tables of {rows_total:,} draft rows of up to "
            f"{cells:,} cells, " if mode == "law" else
            "the target laws and counts, " if mode == "lossless" else "")
    what += (f"one call's inputs and {held:,} samples counted at once ({BYTES_PER_SAMPLE} bytes "
             f"each)")
    return total, what


def _refuse_size(samples, mode, instances, verifier, paths, draft_rows, max_seconds,
                 max_memory_bytes) -> None:
    """Refuse, before anything is allocated or called, a check planned past ``max_seconds`` or
    ``max_memory_bytes`` (one `SizeLimitError` line naming ``samples`` and the estimate)."""
    _refuse_time(samples, max_seconds)
    if max_memory_bytes is None:
        from ...runtime.limits import MEMORY_SHARE, physical_memory

        total = physical_memory()
        max_memory_bytes = MAX_MEMORY_BYTES if total is None else \
            min(MAX_MEMORY_BYTES, int(MEMORY_SHARE * total))
    if isinstance(max_memory_bytes, bool) or not isinstance(max_memory_bytes, (int, float)) or \
            not max_memory_bytes > 0:
        raise SpectheoryError(f"max_memory_bytes = {max_memory_bytes!r} must be a positive "
                              f"number")
    K = 1 if mode in ("coins", "coins-tau") else plan(verifier, paths).paths
    need, what = _planned_bytes(samples, mode, instances, K, draft_rows)
    if need > max_memory_bytes:
        from ...runtime.errors import SizeLimitError

        raise SizeLimitError(
            f"samples = {samples:,}: the check would hold about {need / 2**30:.3g} GiB ({what}), "
            f"over max_memory_bytes = {max_memory_bytes / 2**30:.3g} GiB; check fewer draft rows "
            f"or a smaller vocabulary")

