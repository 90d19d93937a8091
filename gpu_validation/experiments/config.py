"""Pieces shared by the experiment configurations: where results go, logging to stderr."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from spectheory.runtime.errors import SpectheoryError

#: Default output folder of ``validate run`` / ``costs`` / ``summarize``.
DEFAULT_OUT = "benchmarks/results/qwen-coder-cpu"


def check_out_folder(out) -> Path:
    """An output folder: may exist (a resumed run), must not be a file."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise SpectheoryError(f"output {p} is a file; give a folder")
    return p


def check_out_file(out) -> Path | None:
    """An output file (or None): must not be an existing folder."""
    if out is None:
        return None
    p = Path(out)
    if p.is_dir():
        raise SpectheoryError(f"output {p} is a folder; give a file name")
    return p


def stderr_log(msg: str) -> None:
    """Time-stamped progress line on stderr (stdout carries results only)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


__all__ = ["DEFAULT_OUT", "check_out_folder", "check_out_file", "stderr_log"]
