"""Input files are bounded before their memory is taken (`inputs.instances.read_json_text`).

`spectheory exact /dev/zero` read 2 GiB (2.1 GB of memory, 1.3 s) before refusing the file as
too big; `/dev/urandom` and `yes |` did the same. A regular file is now sized before it is read,
a stream is read a chunk at a time under the same bounds, and text that cannot be a JSON object
ends at its first chunk.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import time

import pytest

import spectheory as st
from spectheory.cli import main
from spectheory.inputs import instances, tokenizers
from spectheory.inputs.instances import instance_to_dict, load_instance
from spectheory.runtime.errors import InstanceError, SizeLimitError


class Endless:
    """A stream that never ends: ``head`` once, then ``body`` forever; counts the bytes read."""

    def __init__(self, body: bytes, head: bytes = b""):
        self.head, self.body, self.read_bytes = head, body, 0

    def read(self, n: int = -1) -> bytes:
        assert n > 0, "an endless stream read whole"
        out, self.head = self.head, b""
        while len(out) < n:
            out += self.body * max(1, (n - len(out)) // len(self.body))
        out = out[:n]
        self.read_bytes += len(out)
        return out

    def fileno(self):
        raise io.UnsupportedOperation("no descriptor")


def stdin_of(monkeypatch, stream):
    monkeypatch.setattr(sys, "stdin", type("In", (), {"buffer": stream})())


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("body,words", [
    (b"\0", "not a JSON object (it starts with U+0000)"),  # /dev/zero
    (b"y\n", "not a JSON object (it starts with 'y')"),  # yes |
    (b"\xff\xfe\x87", "not UTF-8 text (byte 0xff at offset 0)"),  # /dev/urandom
])
def test_an_endless_stream_that_is_not_json_ends_at_its_first_chunk(monkeypatch, body, words):
    stream = Endless(body)
    stdin_of(monkeypatch, stream)
    with pytest.raises(InstanceError, match=re.escape(words)):
        load_instance("-")
    assert stream.read_bytes == instances.READ_CHUNK


def test_an_endless_object_is_refused_at_the_size_bound(monkeypatch):
    """``{`` and then spaces forever: read up to the bound, a chunk at a time, then refused."""
    monkeypatch.setattr(instances, "MAX_FILE_BYTES", 3 * instances.READ_CHUNK)
    stream = Endless(b" " * 64, head=b"{")
    stdin_of(monkeypatch, stream)
    with pytest.raises(InstanceError, match=r"standard input: over 3 MiB, too big for an "
                                            r"instance file \(at most 3 MiB\)"):
        load_instance("-")
    assert stream.read_bytes == 4 * instances.READ_CHUNK


def test_a_stream_is_refused_when_its_parse_would_not_fit(monkeypatch):
    """The memory bound is checked chunk by chunk, before the chunk is kept."""
    from spectheory.runtime import limits

    monkeypatch.setattr(limits, "physical_memory", lambda: 100 * instances.READ_CHUNK)
    stream = Endless(b" " * 64, head=b"{")
    stdin_of(monkeypatch, stream)
    with pytest.raises(SizeLimitError, match=r"reading the instance standard input "
                                             r"\(\d{1,3}(,\d{3})* bytes\) needs about"):
        load_instance("-")
    # 12 bytes a byte against half of 100 chunks: refused at the 5th chunk
    limit = limits.MEMORY_SHARE * 100 / instances.PARSE_BYTES_PER_BYTE
    assert stream.read_bytes == (int(limit) + 1) * instances.READ_CHUNK


def test_a_regular_file_over_the_bound_is_refused_unread(tmp_path, monkeypatch):
    """A sparse file of 3 GiB (no disk taken) is refused by its size, without a read."""
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(3 * 1024**3)
    t = time.perf_counter()
    with pytest.raises(InstanceError, match=r"big.json: 3,221,225,472 bytes, too big for an "
                                            r"instance file \(at most 2 GiB\)"):
        load_instance(str(big))
    assert time.perf_counter() - t < 3  # (reading the 3 GiB took 4.7 s here)
    with pytest.raises(InstanceError, match="too big for a heterogeneous instance file"):
        tokenizers.load_hetero(str(big))
    # at the bound exactly, the size is not refused (the memory check and parse come next)
    monkeypatch.setattr(instances, "MAX_FILE_BYTES", 3 * 1024**3)
    from spectheory.runtime import limits

    monkeypatch.setattr(limits, "physical_memory", lambda: 4 * 1024**3)
    with pytest.raises(SizeLimitError, match=r"reading the instance .*big.json "
                                             r"\(3,221,225,472 bytes\)"):
        load_instance(str(big))


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
@pytest.mark.parametrize("command", [["exact"], ["check", "--verifier", "token"],
                                     ["hetero", "--scheme", "slem"]])
def test_devices_on_the_command_line(command, capsys):
    """``/dev/zero`` as an instance: one line, exit 2, at once (the process's memory barely
    moves: it read one chunk)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    code, out, err = run([command[0], "/dev/zero", *command[1:]], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "/dev/zero: not a JSON object (it starts with U+0000)" in err
    assert time.perf_counter() - t < 5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024  # KiB


@pytest.mark.parametrize("chunk", [1, 2, 3, 7])
def test_chunks_that_split_characters_read_the_same_text(tmp_path, monkeypatch, chunk):
    """A byte-order mark and multi-byte characters split across chunks decode as one piece; an
    invalid byte is reported at its offset in the whole file, and a file that ends inside a
    character is refused."""
    monkeypatch.setattr(instances, "READ_CHUNK", chunk)
    inst = st.random_instance(3, 2, 4, denominator=12)
    good = tmp_path / "good.json"
    good.write_bytes(b"\xef\xbb\xbf" + json.dumps(instance_to_dict(inst)).encode())
    read = load_instance(str(good), exact=True)
    assert instance_to_dict(read) == instance_to_dict(inst)
    wide = tmp_path / "wide.json"
    wide.write_bytes(b"\xef\xbb\xbf" + '{"\u20ac": "\u00fc\U0001f600", "a": 1}'.encode())
    assert instances.read_json_text(str(wide), "wide", 10**6) == \
        wide.read_bytes().decode("utf-8-sig")
    bad = tmp_path / "bad.json"
    bad.write_bytes('{"\u20ac": '.encode() + b"\xc3\x28")
    with pytest.raises(InstanceError, match=r"not UTF-8 text \(byte 0xc3 at offset 8\)"):
        load_instance(str(bad))
    cut = tmp_path / "cut.json"
    cut.write_bytes('{"\u20ac'.encode()[:-1])
    with pytest.raises(InstanceError, match="ends inside a character"):
        load_instance(str(cut))


def test_files_that_are_not_objects_are_named_by_their_first_character(tmp_path, capsys):
    for text, shown in (("[1, 2]", "'['"), ('"x"', "'\"'"), ("\n\t 7", "'7'")):
        path = tmp_path / "x.json"
        path.write_text(text)
        code, out, err = run(["exact", path], capsys)
        assert code == 2 and out == "" and f"not a JSON object (it starts with {shown})" in err
    empty = tmp_path / "empty.json"
    empty.write_text(" \n")
    code, _, err = run(["exact", empty], capsys)
    assert code == 2 and "empty file, expected an instance JSON object" in err
