"""Folders a command is writing into while it runs: its outputs before it moves them in place
(hidden, beside the output) and its scratch (a figure grid's sweep folder), removed when the
command ends either way. The command line's SIGTERM handler
([`spectheory.cli`][spectheory.cli]) removes those still held, so a terminated command leaves
nothing half-written: SIGTERM's default action ends the process at once, without the cleanup
that an exception would run."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

_HELD: set = set()  # the folders being written in this process
_KEPT: dict = {}  # what a terminated command leaves on purpose: {path: the line's clause}


def partial_folder(prefix: str, parent) -> Path:
    """A new folder ``parent/prefix<random>`` (``tempfile.mkdtemp``; the system's temporary
    folder where ``parent`` is None), held until
    [`release`][spectheory.runtime.partial.release]."""
    import signal

    # SIGTERM and SIGINT wait until the folder is held: a signal between the mkdir and the
    # holding left the new folder behind (the handler removes held folders only; seen under
    # load, the signal sent as soon as the folder appeared)
    stop = {signal.SIGTERM, signal.SIGINT}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    try:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        _HELD.add(path)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return path


def release(path) -> None:
    """Remove the folder (if still there) and stop holding it."""
    shutil.rmtree(path, ignore_errors=True)
    _HELD.discard(Path(path))


def remove_held() -> None:
    """Remove every folder still held (the SIGTERM handler's cleanup)."""
    for path in list(_HELD):
        release(path)


@contextmanager
def kept(path, clause: str):
    """Within the block, ``path`` is complete files a terminated command leaves on purpose (a
    sweep's cache of finished jobs, which the same command resumes from): the SIGTERM handler
    says so with ``clause`` (`kept_clauses`) instead of letting its line read as if nothing
    were left."""
    _KEPT[Path(path)] = clause
    try:
        yield
    finally:
        _KEPT.pop(Path(path), None)


def kept_clauses() -> list[str]:
    """The clauses of the paths kept now (`kept`), in the order they were kept."""
    return list(_KEPT.values())
