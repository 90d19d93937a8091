"""Atomic writes: a result file is written to a temporary name in its own folder and renamed into
place only when complete (`os.replace` is atomic on one file system), so a reader, or an
interrupted run, never leaves half a file behind."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file next to it; returns the path written
    (`spectheory.runtime.files.write_text`: a device, FIFO or folder at ``path`` is refused, a
    link written through)."""
    from spectheory.runtime.files import write_text as _write

    return _write(path, text)


def write_json(path: str | os.PathLike, obj) -> Path:
    """Atomic JSON write (indent 1) of ``obj``."""
    return write_text(path, json.dumps(obj, indent=1))


__all__ = ["write_text", "write_json"]
