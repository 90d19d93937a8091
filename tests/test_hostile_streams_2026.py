"""Bad input found by a probe of the command line, each now one line and exit 2 (or a
clean run):

* the JSON of ``claims --json`` went to standard error once standard output's descriptor was
  held for the JSON results of the commands that run user code;
* a command started with standard output, standard error or standard input closed (``>&-``,
  ``2>&-``, ``<&-``) ended in an AttributeError traceback (exit 1), even on a valid run;
* Python's limit on integer text (4,300 digits): an exact result too long to print, a TOML
  integer or a ``toy`` knob of 5,000 digits ended in a ValueError traceback;
* ``toy markov`` and ``toy ngram`` listed a depth-1 table at every depth of the block before
  the read-back refused it (block_length=30: still running after a minute; V = 4, L = 12:
  6.7 GB).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

import spectheory as st
from cli_helpers import refused, run, write
from spectheory.inputs.instances import instance_to_dict


def _spectheory(args, cwd, close=None, **kw):
    """``python -m spectheory ARGS`` with descriptor ``close`` closed in the child."""
    pre = (lambda: os.close(close)) if close is not None else None
    return subprocess.run([sys.executable, "-m", "spectheory", *args], cwd=cwd, text=True,
                          capture_output=close not in (1, 2), preexec_fn=pre, timeout=120,
                          **kw)


def test_claims_json_is_on_standard_output(tmp_path):
    proc = _spectheory(["claims", "--only", "leviathan-acceptance-rate", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["id"] for r in rows] == ["leviathan-acceptance-rate"]


def test_closed_standard_streams(tmp_path):
    path = write(tmp_path, instance_to_dict(st.random_instance(2, 2, 0)))
    # standard output closed: refused in one line on standard error
    err = tmp_path / "err.txt"
    with open(err, "w") as fh:
        proc = _spectheory(["exact", path], tmp_path, close=1, stderr=fh)
    assert proc.returncode == 2
    assert err.read_text().strip() == ("spectheory: error: standard output is closed; start "
                                       "the command with an open standard output (e.g. > FILE)")
    # standard error closed: the run goes on, its result on standard output
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:
        proc = _spectheory(["exact", path], tmp_path, close=2, stdout=fh)
    assert proc.returncode == 0 and "block efficiency E[tau+1]" in out.read_text()
    # standard input closed, an instance read from it: one line
    proc = _spectheory(["exact", "-"], tmp_path, close=0)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == ("spectheory: error: cannot read instance '-': standard input "
                                   "is closed")


def _long_denominators(V: int, L: int) -> dict:
    """An instance whose rows have 91-digit denominators, one per row: its exact E[tau] has a
    denominator of thousands of digits."""
    k = itertools.count(1)

    def row():
        i = next(k)
        d = 10**90 + 2 * i + 1
        a = d // 3 + i
        return [f"{a}/{d}", f"{d - a}/{d}"]

    def model(depth):
        return {",".join(map(str, s)): row() for n in range(depth + 1)
                for s in itertools.product(range(V), repeat=n)}

    return {"vocab_size": V, "block_length": L, "target": model(L), "draft": model(L - 1)}


def test_python_limit_on_integer_text_is_one_line(tmp_path, capsys):
    path = write(tmp_path, _long_denominators(2, 7))
    for extra in ([], ["--json"]):
        refused(*run(["exact", path, "--exact", *extra], capsys),
                "an exact result holds an integer of more than 4,300 digits, over Python's "
                "limit for printing one; use floats (drop --exact) or a smaller instance")
    digits = "1" + "0" * 5000
    cfg = tmp_path / "huge.toml"
    cfg.write_text(f'[[instances]]\nfamily = "random"\nvocab = [{digits}]\nblock = 1\n'
                   'seeds = [0]\n[[verifiers]]\nname = "token"\n')
    out = tmp_path / "sweep"
    refused(*run(["sweep", str(cfg), "--out", str(out)], capsys),
            "a number in the input has 5,001 digits, over Python's limit of 4,300 digits")
    assert not out.exists()
    refused(*run(["toy", "logit-noise", f"vocab_size={digits}"], capsys),
            "a number in the input has 5,001 digits")


@pytest.mark.parametrize("family, params, rows", [
    ("markov", ["block_length=30", "vocab_size=2"], "2,147,483,647"),
    ("ngram", ["block_length=12", "vocab_size=4"], "22,369,621")])
def test_toy_tables_too_large_for_a_file_are_refused_before_they_are_listed(capsys, family,
                                                                            params, rows):
    from spectheory.runtime import limits

    with limits.running(20):  # a backstop (another message) if the rows were listed first
        result = run(["toy", family, *params], capsys)
    refused(*result, f"has {rows} prefixes, over the limit of 2,000,000 of an instance file")
