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
