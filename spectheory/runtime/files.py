"""Output files written whole: a result goes to a temporary file in the destination's own folder
and is renamed into place only when complete (``os.replace`` is atomic on one file system), so an
interrupted run never leaves half a file behind.

The destination is checked first (`output_path`): an existing path that is not a regular file (a
folder, a character or block device such as ``/dev/full``, a FIFO, a socket) is refused in one
line, since a rename would replace the device or pipe itself with a plain file; a symbolic link is
written through (its target is replaced, the link kept), as ``open(path, "w")`` would. A new file
gets the mode the process's umask gives (``0o666 & ~umask``) and a replaced one keeps its own,
not the ``0o600`` of a temporary file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from .errors import OptionError
from ..runtime.limits import shown as _repr_cut

#: What a path that is not a regular file is, for the refusal line.
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"))


def _refused(what: str, path, exc: OSError) -> OptionError:
    """The one line of a file-system error while writing ``path``."""
    return OptionError(f"cannot write {what} {str(path)!r}: {exc.strerror or exc}")


def output_path(path: str | os.PathLike, what: str = "output") -> Path:
    """The regular file ``path`` names, following symbolic links (a dangling link names its
    target, created on write); `OptionError` when it exists and is not a regular file."""
    try:
        text = os.fspath(path)
        if not isinstance(text, str) or text == "" or "\0" in text:
            raise ValueError
    except (TypeError, ValueError):
        raise OptionError(f"cannot write {what} {_repr_cut(path, 80)}: not a file name (a non-empty "
                          f"string or path without NUL characters)") from None
    p = Path(text)
    real = Path(os.path.realpath(p)) if p.is_symlink() else p
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return real
    except OSError as exc:
        raise _refused(what, p, exc) from None
    for test, kind in _KINDS:
        if test(mode):
            shown = str(p) if real == p else f"{p} (a link to {real})"
            raise OptionError(f"cannot write {what} {shown!r}: it is {kind}, not a regular file; "
                              f"give a file name")
    return real


def _umask() -> int:
    """The process's umask, read without changing it where the system shows it (Linux: setting it
    to read it back would leave other threads a moment of umask 0)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _mode_for(path: Path) -> int:
    """The mode a file written at ``path`` gets: the replaced file's own, else the umask's."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def folder_mode_for(path: Path) -> int:
    """The mode a folder made in place of ``path`` gets: the replaced (empty) folder's own, else
    the one ``mkdir`` gives under the process's umask (``0o777 & ~umask``). For a folder built
    under a temporary name (``tempfile.mkdtemp``: mode 0700) and renamed into place."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o777 & ~_umask()


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, what: str = "output"):
    """Context manager: yields a temporary file name in the folder of the regular file ``path``
    names (`output_path`); the caller writes it whole (``torch.save(obj, tmp)``), and on a clean
    exit it is given the destination's mode and renamed into place. On an error it is removed and
    the destination left as it was; file-system errors are one `OptionError` line naming
    ``path``."""
    target = output_path(path, what)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as exc:
        raise _refused(what, path, exc) from None
    try:
        yield tmp
        try:
            os.chmod(tmp, _mode_for(target))
            os.replace(tmp, target)
        except OSError as exc:
            raise _refused(what, path, exc) from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def write_bytes(path: str | os.PathLike, data: bytes, what: str = "output") -> Path:
    """Write ``data`` to the regular file ``path`` names (`output_path`) through a temporary file
    in its folder (`atomic_file`), flushed to disk before the rename; returns the path written."""
    with atomic_file(path, what) as tmp:
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise _refused(what, path, exc) from None
    return output_path(path, what)


def write_text(path: str | os.PathLike, text: str, what: str = "output") -> Path:
    """`write_bytes` of ``text`` in UTF-8."""
    return write_bytes(path, text.encode("utf-8"), what)


def shown_path(path) -> str:
    """``path`` as a summary line prints it: as typed, or quoted with escapes when it holds a
    character that is not printable (a name with a newline split the summary over two lines)."""
    text = os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)
    return text if text.isprintable() else repr(text)


#: How long a named pipe with no writer is waited for (a writer blocked in its own open wakes
#: when the reader opens, a moment later), seconds.
FIFO_WRITER_WAIT = 1.0


def open_input(path: str | os.PathLike):
    """``open(path, "rb")`` for an input file, except that a named pipe (a FIFO) is opened
    without waiting for a writer for ever: a writer that comes within `FIFO_WRITER_WAIT` (one
    blocked in its own open wakes when the reader opens) is read as before, blocking for its
    data; a pipe that no writer writes to within it raises ``OSError`` ("no writer wrote to
    the named pipe within 1 s", the reader's one-line refusal), where ``open`` blocked for
    ever. A shell's ``<(command)`` has its writer already."""
    import io
    import time

    try:
        fifo = stat.S_ISFIFO(os.stat(path).st_mode)
    except (OSError, ValueError):  # let open() report it in its own words
        fifo = False
    if not fifo:
        return open(path, "rb")
    import errno

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    deadline, first = time.monotonic() + FIFO_WRITER_WAIT, b""
    try:
        while True:
            try:
                first = os.read(fd, 1 << 16)
            except BlockingIOError:  # a writer, no data yet
                break
            if first:
                break
            if time.monotonic() > deadline:
                raise OSError(errno.ENXIO, f"no writer wrote to the named pipe within "
                                           f"{FIFO_WRITER_WAIT:g} s")
            time.sleep(0.02)  # no writer yet (end of file until one opens)
        os.set_blocking(fd, True)
    except BaseException:  # the refusal, a time limit, an interrupt: the descriptor closed
        os.close(fd)
        raise

    class _Pipe(io.RawIOBase):  # the bytes read while looking for the writer, then the pipe
        def readable(self):
            return True

        def fileno(self):
            return fd

        def readinto(self, buf):
            nonlocal first
            if first:
                n = min(len(buf), len(first))
                buf[:n], first = first[:n], first[n:]
                return n
            data = os.read(fd, len(buf))
            buf[:len(data)] = data
            return len(data)

        def close(self):
            if not self.closed:
                os.close(fd)
            super().close()

    return io.BufferedReader(_Pipe())


__all__ = ["FIFO_WRITER_WAIT", "atomic_file", "open_input", "output_path", "shown_path",
           "write_bytes", "write_text"]
