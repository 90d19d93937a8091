"""Command-line inputs an outside probe (about 690 hostile inputs) found not clean, each now
handled as its neighbours are:

- a sweep table whose every random instance is over the size limit: each job failed and the
  output folder was written with the failed rows (refused when the file is read now, as
  docs/sweeps.md promises for what every job of a table would fail on);
- ``lp --problem frontier --exact --tv 1e-8``: "no exact certificate" with no word of what the
  float solutions did show (an exact feasible point and an exact dual bound, 1e-8 apart);
- ``vectors export`` made its folder 0700 (mkdtemp's mode, renamed into place) and took an
  existing empty folder's group access away;
- a sweep file that starts with a byte-order mark ("invalid statement at line 1"), a truncated
  instance file ("starting at at line 1"), ``validate summarize`` of a file ("run.json
  missing").
"""

from __future__ import annotations

import json
import os
import stat
from fractions import Fraction

import pytest

from spectheory.runtime.errors import OptionError
from spectheory.sweep.config import load_config
from tests.cli_helpers import refused, run, write

TABLE = """
[[instances]]
family = "random"
vocab = {vocab}
block = {block}
seeds = [0]

[[verifiers]]
name = ["token"]
"""


@pytest.mark.parametrize("vocab,block", [([1000], [10]), ([9000], [1]), ([3], [64]),
                                         ([1000, 9000], [3, 4])])
def test_a_sweep_table_every_instance_of_which_is_too_large_is_refused_when_read(
        tmp_path, capsys, vocab, block):
    text = TABLE.format(vocab=vocab, block=block)
    with pytest.raises(OptionError, match=r"\[\[instances\]\] #1: every instance of the table "
                                          r"is over the size limit, so each job would fail"):
        load_config(text)
    (tmp_path / "s.toml").write_text(text)
    out = tmp_path / "out"
    refused(*run(["sweep", str(tmp_path / "s.toml"), "--out", str(out), "--no-progress"],
                 capsys), "every instance of the table", "V^(L+1)")
    assert not out.exists()


def test_a_sweep_table_with_an_instance_within_the_limit_runs_the_others_as_failed_rows():
    cfg = load_config(TABLE.format(vocab=[3, 1000], block=[2]))
    assert len(cfg.instances) == 1
    # context-independent rows have no V^(L+1) table: not refused on its size
    load_config(TABLE.format(vocab=[1000], block=[10]).replace(
        "seeds = [0]", "seeds = [0]\ncontext_independent = [true]"))


def test_a_frontier_budget_below_the_float_solve_is_refused_with_the_exact_bracket(
        tmp_path, capsys):
    """p = (3/4, 1/4), q = (1/2, 1/2), L = 1: the frontier is 7/4 + delta up to TV(p, q) = 1/4
    (lossless optimum 7/4, accept-all 2 at 1/4). At delta = 1e-8 the exact bracket holds it."""
    inst = write(tmp_path, {"vocab_size": 2, "block_length": 1,
                            "target": {"": ["3/4", "1/4"], "0": ["3/4", "1/4"],
                                       "1": ["3/4", "1/4"]},
                            "draft": {"": ["1/2", "1/2"]}})
    code, out, err = run(["lp", inst, "--problem", "frontier", "--tv", "1e-8", "--exact"], capsys)
    if code == 0:  # a solver whose dual rounds: then it is the exact optimum
        assert "175000001/100000000" in out
        return
    refused(code, out, err, "exact feasible point of value 175000001/100000000",
            "the optimum lies between", "a gap of 1e-08")
    hi = Fraction(err.split("exact dual bound ")[1].split(" ")[0])
    assert Fraction(7, 4) + Fraction(1, 10**8) <= hi
    code, out, _ = run(["lp", inst, "--problem", "frontier", "--tv", "1/1000", "--exact"],
                       capsys)
    assert code == 0 and "1751/1000" in out


def test_vectors_export_gives_its_folder_the_mode_mkdir_would(tmp_path, capsys):
    inst = write(tmp_path, {"vocab_size": 2, "block_length": 1,
                            "target": {"": ["3/4", "1/4"], "0": ["1/2", "1/2"],
                                       "1": ["1/3", "2/3"]},
                            "draft": {"": ["1/2", "1/2"]}})
    kept = tmp_path / "shared"
    kept.mkdir()
    os.chmod(kept, 0o775)
    old = os.umask(0o022)
    try:
        assert run(["vectors", "export", str(kept), "--verifier", "token", "--instances",
                    inst], capsys)[0] == 0
        assert run(["vectors", "export", str(tmp_path / "new"), "--verifier", "token",
                    "--instances", inst], capsys)[0] == 0
        os.umask(0o077)
        assert run(["vectors", "export", str(tmp_path / "private"), "--verifier", "token",
                    "--instances", inst], capsys)[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o775 and any(kept.iterdir())
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "private").stat().st_mode) == 0o700


def test_a_byte_order_mark_before_a_sweep_file_is_skipped(tmp_path):
    text = TABLE.format(vocab=[2], block=[1])
    (tmp_path / "bom.toml").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "plain.toml").write_text(text)
    with_bom, plain = load_config(str(tmp_path / "bom.toml")), load_config(str(tmp_path /
                                                                            "plain.toml"))
    assert with_bom.instances == plain.instances and with_bom.verifiers == plain.verifiers


def test_a_truncated_instance_file_is_named_once(tmp_path, capsys):
    path = write(tmp_path, '{"vocab_size": 3, "block')
    code, out, err = run(["exact", path], capsys)
    refused(code, out, err, "unreadable JSON (Unterminated string starting at line 1 column 19)")
    assert "at at" not in err


def test_validate_summarize_of_a_file_says_it_is_not_a_folder(tmp_path, capsys):
    (tmp_path / "afile").write_text("x\n")
    refused(*run(["validate", "summarize", str(tmp_path / "afile")], capsys),
            "is not a folder")


SLEEPER = '''
import threading, time
from spectheory.testing import make_sampler
_token = make_sampler("token")
_started = []
def sampler(d, q, p, g):
    if not _started:
        t = threading.Thread(target=time.sleep, args=(10**6,))
        t.start()
        _started.append(t)
    return _token(d, q, p, g)
def failing(d, q, p, g):
    sampler(d, q, p, g)
    raise RuntimeError("boom after a thread")
'''


@pytest.mark.parametrize("function,code", [("sampler", 0), ("failing", 2)])
def test_a_command_whose_user_code_left_a_thread_ends_when_its_reader_goes_away(tmp_path,
                                                                                 function, code):
    """``check-sampler ... 2>&1 | head -1`` printed the verdict, then waited for ever for the
    sampler's non-daemon thread (Python joins them at exit; the note-and-exit path ran only when
    the output could still be written)."""
    import subprocess
    import sys

    (tmp_path / "sleeper.py").write_text(SLEEPER)
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                                    ""))
    proc = subprocess.Popen([sys.executable, "-m", "spectheory", "check-sampler",
                             f"sleeper:{function}", "--verifier", "token", "--samples", "2000"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            cwd=tmp_path)
    try:
        first = proc.stdout.readline()
        proc.stdout.close()  # the reader goes away, as head -1 does
        assert proc.wait(timeout=60) == code, first
    finally:
        if proc.poll() is None:
            proc.kill()
    assert first.startswith(b"check_sampler (law mode" if code == 0 else b"spectheory: error:")


@pytest.mark.parametrize("tv", ["1e-8", "1e-2"])
def test_a_float_optimum_outside_its_bounds_as_printed_says_it_is_within_tolerance(tmp_path, capsys,
                                                                                   tv):
    """``lp --problem frontier --tv 1e-8`` printed 1.7500000600 "within the independent bounds
    [1.7500000100, 1.7500000100]": true to the check's tolerance, which the line did not say."""
    import re

    inst = write(tmp_path, {"vocab_size": 2, "block_length": 1,
                            "target": {"": ["3/4", "1/4"], "0": ["3/4", "1/4"],
                                       "1": ["3/4", "1/4"]},
                            "draft": {"": ["1/2", "1/2"]}})
    code, out, err = run(["lp", inst, "--problem", "frontier", "--tv", tv], capsys)
    assert code == 0, err
    opt = float(re.search(r"optimum E\[tau\+1\] = ([0-9.]+)", out).group(1))
    lo, hi = map(float, re.search(r"independent bounds \[([0-9.]+), ([0-9.]+)\]", out).groups())
    assert ("to the float solver's tolerance" in out) == (not lo <= opt <= hi), out
    if tv == "1e-8":
        assert abs(opt - 1.75000001) < 2e-6 and lo == hi == 1.75000001
