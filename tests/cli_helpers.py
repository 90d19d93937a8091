"""Shared helpers for the command-line tests: run the CLI in-process, write instance files."""

from __future__ import annotations

import json

from spectheory.cli import main
from spectheory.cli.report import TOY  # the paper's two-token example, as instance JSON

__all__ = ["TOY", "refused", "run", "write"]


def run(args, capsys):
    """Run ``spectheory ARGS``; returns (exit code, stdout, stderr)."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def write(tmp_path, obj, name="inst.json"):
    """Write ``obj`` (a dict, or raw text) to tmp_path/name; returns the path."""
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def refused(code, out, err, *words, warnings: bool = True):
    """Exit code 2, one line on stderr naming the problem (each of ``words`` in it), no
    traceback, nothing on stdout; ``warnings=False``: no warning text either."""
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert warnings or "Warning" not in err, err
    for w in words:
        assert w in err, (w, err)
