"""Command-line contract and bad input: JSON keys, exact strings, exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cli_helpers import TOY, run, write


def test_exact_json_contract(tmp_path, capsys):
    path = write(tmp_path, TOY)
    code, out, _ = run(["exact", path, "--verifier", "block", "--exact", "--json"], capsys)
    assert code == 0
    obj = json.loads(out)
    assert set(obj) >= {"verifier", "vocab_size", "block_length", "expected_accepted",
                        "block_efficiency", "tau_pmf", "tv_to_target"}
    assert obj["expected_accepted"] == "11/9"
    assert obj["block_efficiency"] == "20/9"
    assert obj["tau_pmf"] == ["1/3", "1/9", "5/9"]
    assert obj["tv_to_target"] == "0"
    code, out, _ = run(["exact", path, "--verifier", "token", "--json"], capsys)
    assert json.loads(out)["expected_accepted"] == pytest.approx(10 / 9, abs=1e-15)


def test_random_instance_round_trip(tmp_path, capsys):
    code, out, _ = run(["instance", "random", "--vocab", "3", "--block", "2", "--seed", "4",
                        "--denominator", "12"], capsys)
    assert code == 0
    obj = json.loads(out)
    assert set(obj["target"]) == {"", "0", "1", "2"} | {f"{a},{b}" for a in range(3)
                                                       for b in range(3)}
    assert len(obj["draft"]) == 4
    path = write(tmp_path, out)
    code, out, _ = run(["exact", path, "--exact", "--json"], capsys)
    assert code == 0 and json.loads(out)["tv_to_target"] == "0"
    code, out, _ = run(["instance", "random", "--vocab", "4", "--block", "3",
                        "--context-independent", "--alpha", "0.5"], capsys)
    obj = json.loads(out)
    assert isinstance(obj["target"], list) and len(obj["target"]) == 4


def test_check_command_exit_codes(tmp_path, capsys):
    path = write(tmp_path, TOY)
    code, out, _ = run(["check", path, "--verifier", "block", "--exact", "--tokens", "5"],
                       capsys)
    assert code == 0 and "lossless exactly" in out
    code, out, _ = run(["check", path, "--verifier", "uniform-product", "--json"], capsys)
    obj = json.loads(out)
    assert code == 1 and obj["lossless"] is False and len(obj["offending_sequence"]) == 3


BAD = [
    ("{not json", "unreadable JSON"),
    (json.dumps({"vocab_size": 2, "block_length": 2, "target": ["1/3", "2/3"]}),
     "missing the key 'draft'"),
    (json.dumps({**TOY, "target": {"": [0.5, 0.5], "0": [0.5, 0.5]}}), "missing prefix '1'"),
    (json.dumps({**TOY, "target": [0.5, 0.25, 0.25]}), "has 3 entries, expected vocab_size = 2"),
    (json.dumps({**TOY, "draft": [1.5, -0.5]}), "negative"),
    (json.dumps({**TOY, "draft": ["nan", 1]}), "not finite"),
    ('{"vocab_size": 2, "block_length": 2, "target": [NaN, 1], "draft": [0.5, 0.5]}',
     "not finite"),
    (json.dumps({**TOY, "draft": [0.5, 0.4]}), "sums to 0.90000000000000002, not 1"),
    (json.dumps({**TOY, "vocab_size": 1}), "vocab_size = 1 is out of range"),
    (json.dumps({**TOY, "block_length": 0}), "block_length = 0 is out of range"),
    (json.dumps({**TOY, "target": {"": [0.5, 0.5], "0": [1, 0], "1": [0, 1], "5": [1, 0]}}),
     "outside 0..1"),
    (json.dumps({**TOY, "target": ["a", "b"]}), "not a number"),
]


@pytest.mark.parametrize("text,message", BAD)
def test_bad_input_one_line_exit_2(tmp_path, capsys, text, message):
    path = write(tmp_path, text)
    code, out, err = run(["exact", path], capsys)
    assert code == 2
    assert out == ""
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_exact_mode_needs_exact_rows(tmp_path, capsys):
    path = write(tmp_path, {**TOY, "target": [0.1, 0.9], "draft": [1 / 3, 2 / 3]})
    code, out, err = run(["exact", path, "--exact"], capsys)
    assert code == 2 and "exactly 1" in err and out == ""


def test_size_guard_names_count_and_memory(tmp_path, capsys):
    path = write(tmp_path, {"vocab_size": 10, "block_length": 9, "target": [0.1] * 10,
                            "draft": [0.1] * 10})
    code, out, err = run(["exact", path], capsys)
    assert code == 2 and out == ""
    assert "10,000,000,000 sequences exceed" in err and "GiB" in err and "by " in err
    code, out, err = run(["exact", path, "--exact"], capsys)
    assert code == 2 and "exact limit of 200,000" in err


def test_missing_file_and_unknown_verifier(tmp_path, capsys):
    code, _, err = run(["exact", str(tmp_path / "nope.json")], capsys)
    assert code == 2 and "cannot read instance" in err
    path = write(tmp_path, TOY)
    code, _, err = run(["exact", path, "--verifier", "magic"], capsys)
    assert code == 2 and "unknown verifier 'magic'" in err


def test_console_script_no_traceback(tmp_path):
    """The installed entry point: exit code 2 and a single line for bad input."""
    path = write(tmp_path, "[1, 2")
    proc = subprocess.run([sys.executable, "-m", "spectheory.cli", "exact", path],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("spectheory: error:") and "Traceback" not in proc.stderr


def test_report_runs_main_job(capsys):
    code, out, _ = run(["report"], capsys)
    assert code == 0
    assert "E[tau] = 10/9" in out and "E[tau] = 11/9" in out
    assert "LOSSY" in out and "lossless exactly" in out
