"""Sweep output folders, environment variables read at start-up, the allocator's arguments and
``audit --rows-file``: each bad input refused in one line (exit code 2 from the command line,
nothing written), each next to a valid neighbour that still works.

1. ``sweep --out ''`` and ``figures --out ''`` (an empty path is the current folder);
2. ``sweep --out`` naming the folder of a different sweep (its table would be overwritten);
3. ``SPECTHEORY_MALLOC`` and ``SPECTHEORY_BUFFER_POOL`` checked at start-up, as
   ``SPECTHEORY_THREADS`` and ``SPECTHEORY_NUMBA`` are;
4. ``keep_freed_memory`` arguments outside glibc ``mallopt``'s range;
5. ``audit --rows-file`` naming a folder.
"""

from __future__ import annotations

import pytest
import torch

from cli_helpers import run
from spectheory.runtime.errors import SpectheoryError


def refused(code, out, err, *words):
    """Exit code 2, one line on stderr naming the problem, no traceback, nothing on stdout."""
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


# ----------------------------------------------------------------------------- 5. --rows-file


def test_rows_file_that_is_a_folder_is_named_a_folder(tmp_path, capsys):
    folder = tmp_path / "adir"
    folder.mkdir()
    refused(*run(["audit", "--rows-file", str(folder)], capsys), "is a folder, not a file",
            str(folder))
    refused(*run(["audit", "--rows-file", str(tmp_path / "nothing.pt")], capsys),
            "no such file")


def test_rows_file_that_is_a_file_still_loads(tmp_path):
    from spectheory.cli.audit import load_rows

    drafts = torch.tensor([[[0, 1]]])  # [B=1, K=1, L=2]
    q = torch.tensor([[[[0.5, 0.5], [0.25, 0.75]]]])  # [B, K, L, V=2]
    p = torch.tensor([[[[0.5, 0.5], [1.0, 0.0], [0.75, 0.25]]]])  # [B, K, L+1, V]
    path = tmp_path / "rows.pt"
    torch.save({"drafts": drafts, "q": q, "p": p}, path)
    got_drafts, got_q, got_p, _ = load_rows(str(path))
    assert torch.equal(got_drafts, drafts) and torch.equal(got_q, q.double())
    assert torch.equal(got_p, p.double())


# ----------------------------------------------------------------------------- 3. environment


@pytest.mark.parametrize("value", ["garbage", "defualt", "0", "off"])
def test_malloc_setting_garbage_refused_at_start_up(monkeypatch, capsys, value):
    """A typo in ``SPECTHEORY_MALLOC`` used to keep the tuned allocator without a word; it is
    refused before any command runs (``verifiers`` allocates nothing)."""
    from spectheory.runtime import allocator, limits
    from spectheory.runtime.errors import OptionError

    monkeypatch.setenv("SPECTHEORY_MALLOC", value)
    refused(*run(["verifiers"], capsys), "SPECTHEORY_MALLOC", repr(value), "default", "tuned")
    with pytest.raises(OptionError, match=f"SPECTHEORY_MALLOC={value!r} is not an allocator"):
        allocator.apply_default()
    with pytest.raises(OptionError, match="SPECTHEORY_MALLOC"):
        limits.check_environment()


@pytest.mark.parametrize("value,setting", [("default", "default"), (" DEFAULT ", "default"),
                                           ("tuned", "tuned"), ("", "tuned")])
def test_malloc_setting_values(monkeypatch, capsys, value, setting):
    from spectheory.runtime import allocator, limits

    monkeypatch.setenv("SPECTHEORY_MALLOC", value)
    assert limits.env_malloc() == setting
    if setting == "default":
        assert allocator.apply_default() is False  # the allocator is left alone
    code, out, err = run(["verifiers"], capsys)
    assert code == 0 and err == "" and "block" in out
    monkeypatch.delenv("SPECTHEORY_MALLOC")
    assert limits.env_malloc() == "tuned"


@pytest.mark.parametrize("value", ["-5", "lots", "1.5G", "4T"])
def test_buffer_pool_garbage_refused_at_start_up(monkeypatch, capsys, value):
    """A bad ``SPECTHEORY_BUFFER_POOL`` passed small runs and failed at the first allocation of
    64 MiB or more; now every command refuses it at start-up, ``verifiers`` included."""
    from spectheory.runtime import buffers, limits
    from spectheory.runtime.errors import OptionError

    monkeypatch.setattr(buffers, "_capacity", None)
    monkeypatch.setenv("SPECTHEORY_BUFFER_POOL", value)
    refused(*run(["verifiers"], capsys), f"SPECTHEORY_BUFFER_POOL={value!r} is not a size")
    with pytest.raises(OptionError, match="SPECTHEORY_BUFFER_POOL"):
        limits.check_environment()
    with pytest.raises(OptionError, match="SPECTHEORY_BUFFER_POOL"):
        buffers.capacity()
    monkeypatch.setattr(buffers, "_capacity", None)


@pytest.mark.parametrize("value,nbytes", [("0", 0), ("512M", 512 << 20), (" 4g ", 4 << 30),
                                          ("1000", 1000)])
def test_buffer_pool_values(monkeypatch, capsys, value, nbytes):
    from spectheory.runtime import buffers, limits

    monkeypatch.setattr(buffers, "_capacity", None)
    monkeypatch.setenv("SPECTHEORY_BUFFER_POOL", value)
    limits.check_environment()
    assert buffers.capacity() == nbytes
    code, out, err = run(["verifiers"], capsys)
    assert code == 0 and err == ""
    monkeypatch.setattr(buffers, "_capacity", None)


# ----------------------------------------------------------------------------- 4. mallopt


@pytest.mark.parametrize("args,words", [
    ((10**30,), "mmap_threshold=1000000000000000000000000000000 is out of range"),
    ((-1, -1), "mmap_threshold=-1 is out of range"),
    ((1 << 30, -1), "trim_threshold=-1 is out of range"),
    ((1 << 31,), "mmap_threshold=2147483648 is out of range [0, 2147483647]"),
    ((1 << 30, 10**5000), "trim_threshold=an integer of 16610 bits"),
    ((1.5e9,), "mmap_threshold=1500000000.0 is not a whole number"),
    ((True,), "mmap_threshold=True is not a whole number"),
    (("1G",), "mmap_threshold='1G' is not a whole number")])
def test_keep_freed_memory_refuses_values_mallopt_cannot_take(monkeypatch, args, words):
    """mallopt's value is a C int: 10**30 and -1 used to go to it unchecked (and True came back).
    Refused before the C library is touched (a loader that is never reached)."""
    import ctypes

    from spectheory.runtime import allocator
    from spectheory.runtime.errors import OptionError

    def never(*a, **k):
        raise AssertionError("mallopt reached")

    monkeypatch.setattr(ctypes, "CDLL", never)
    with pytest.raises(OptionError) as info:
        allocator.keep_freed_memory(*args)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_keep_freed_memory_takes_the_ends_of_the_range(monkeypatch):
    """0 and 2^31 - 1 (and numpy integers) reach mallopt unchanged, in its parameter order."""
    import ctypes

    import numpy as np

    from spectheory.runtime import allocator

    calls = []

    def mallopt(param, value):
        calls.append((param, value))
        return 1

    class Fake:
        def __init__(self, *a, **k):
            self.mallopt = mallopt  # a function: takes the argtypes/restype attributes

    monkeypatch.setattr(ctypes, "CDLL", Fake)
    monkeypatch.setattr(allocator.ctypes, "CDLL", Fake)
    assert allocator.keep_freed_memory(0, (1 << 31) - 1) is True
    assert allocator.keep_freed_memory(np.int64(1 << 30)) is True
    assert calls == [(-3, 0), (-1, (1 << 31) - 1), (-3, 1 << 30), (-1, (1 << 31) - 1)]
