"""Hostile inputs to ``audit``, ``tree``, ``exact --stop``, ``models fetch``, the tree parsers and
the adaptive rules: each is refused in one line naming the problem and the value (command line:
exit code 2, one stderr line, no traceback, nothing left on disk), and each has a valid
neighbour that still runs with its value unchanged.
"""

from __future__ import annotations

import pytest

from cli_helpers import TOY, run, write


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# ----------------------------------------------------------------------------- audit --seed


@pytest.mark.parametrize("seed", ["18446744073709551616", "-9999999999999999999999", "-1",
                                  "9223372036854775808"])
def test_audit_seed_out_of_range_is_refused_at_parse_time(seed, capsys):
    """torch's generator overflowed on seeds past 64 bits (a 20-line traceback, exit 1) and
    took -1 and 2^63; the range is now that of ``report --seed``."""
    code, out, err = run(["audit", f"--seed={seed}", "--vocab", "3", "--batch", "1",
                          "--block", "1"], capsys)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert "argument --seed" in line and "out of range 0..9,223,372,036,854,775,807" in line


def test_audit_seed_in_range_runs_and_the_library_checks_it_too(capsys):
    from spectheory.cli.audit import audit_rows
    from spectheory.runtime.errors import SpectheoryError

    code, out, err = run(["audit", "--seed", "9223372036854775807", "--vocab", "3", "--batch",
                          "1", "--block", "1", "--dtypes", "float32"], capsys)
    assert code == 0 and err == "" and "float32" in out
    a = audit_rows("flat", 3, 1, 1, 1, seed=7)
    b = audit_rows("flat", 3, 1, 1, 1, seed=7)
    assert all(bool((x == y).all()) for x, y in zip(a, b))
    with pytest.raises(SpectheoryError, match="seed"):
        audit_rows("flat", 3, 1, 1, 1, seed=2**64)


# ----------------------------------------------------------------------------- audit --rows-file


def test_audit_rows_file_that_is_not_a_regular_file(capsys, tmp_path):
    """/dev/null exists: it used to be called "no such file"."""
    code, out, err = run(["audit", "--rows-file", "/dev/null"], capsys)
    assert code == 2 and out == ""
    assert "/dev/null: not a regular file" in _one_line(err)
    code, out, err = run(["audit", "--rows-file", str(tmp_path / "absent.pt")], capsys)
    assert code == 2 and "absent.pt: no such file" in _one_line(err)
