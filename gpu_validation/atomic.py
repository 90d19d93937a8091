"""Atomic writes: a result file is written to a temporary name in its own folder and renamed into
place only when complete (`os.replace` is atomic on one file system), so a reader, or an
interrupted run, never leaves half a file behind."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file next to it; returns the path."""
    from spectheory.runtime.errors import SpectheoryError

    path = Path(path)
    if path.is_dir():  # os.replace would name the temporary file in its error
        raise SpectheoryError(f"cannot write {str(path)!r}: it is a folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            os.replace(tmp, path)
        except OSError as exc:
            raise SpectheoryError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_json(path: str | os.PathLike, obj) -> Path:
    """Atomic JSON write (indent 1) of ``obj``."""
    return write_text(path, json.dumps(obj, indent=1))


__all__ = ["write_text", "write_json"]
