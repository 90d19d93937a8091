"""Pieces shared by the experiment configurations: where results go, logging to stderr."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from spectheory.runtime.errors import SpectheoryError

#: Default output folder of ``validate run`` / ``costs`` / ``summarize``.
DEFAULT_OUT = "benchmarks/results/qwen-coder-cpu"


def _writable_place(p: Path, what: str) -> None:
    """Refuse, before any work, an output path that cannot be written: an empty one (the current
    folder), one under a file, or one whose nearest existing folder is not writable."""
    import os

    if str(p) in ("", "."):
        raise SpectheoryError(f"{what} is empty: give a path (an empty one would write into the "
                              "current folder)")
    up = p.parent
    while not up.exists() and up != up.parent:
        up = up.parent
    if up.exists() and not up.is_dir():
        raise SpectheoryError(f"{what} {p}: {up} is a file, not a folder")
    if up.exists() and not os.access(up, os.W_OK | os.X_OK):
        raise SpectheoryError(f"{what} {p}: cannot write under {up} (permission denied)")


def check_out_folder(out) -> Path:
    """An output folder: may exist (a resumed run), must not be a file, must be writable (checked
    before any model is loaded)."""
    if str(out) == "":
        raise SpectheoryError("output folder is empty: give a path (an empty one would write "
                              "into the current folder)")
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise SpectheoryError(f"output {p} is a file; give a folder")
    _writable_place(p, "output folder")
    return p


def check_out_file(out) -> Path | None:
    """An output file (or None): must not be an existing folder, and its folder must be
    writable (checked before any work)."""
    if out is None:
        return None
    if str(out) == "":
        raise SpectheoryError("output file is empty: give a file name")
    p = Path(out)
    if p.is_dir():
        raise SpectheoryError(f"output {p} is a folder; give a file name")
    _writable_place(p, "output file")
    from spectheory.runtime.files import output_path

    output_path(p, "output file")  # a device or FIFO would be replaced by a plain file
    return p


def stderr_log(msg: str) -> None:
    """Time-stamped progress line on stderr (stdout carries results only)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


__all__ = ["DEFAULT_OUT", "check_out_folder", "check_out_file", "stderr_log"]
