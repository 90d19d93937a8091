"""Command line for multi-path verifiers: --paths / --drafting, JSON keys, errors."""

from __future__ import annotations

import json

from cli_helpers import TOY, run, write

TIE = {"vocab_size": 3, "block_length": 2, "target": ["1/4", "3/8", "3/8"],
       "draft": ["1/2", "1/4", "1/4"]}


def test_exact_multi_path_json(tmp_path, capsys):
    path = write(tmp_path, TOY)
    code, out, err = run(["exact", path, "--verifier", "gbv", "--paths", "1", "--exact",
                          "--json"], capsys)
    assert code == 0 and err == ""
    obj = json.loads(out)
    assert obj["verifier"] == "gbv" and obj["paths"] == 1 and obj["drafting"] == "iid"
    assert obj["expected_accepted"] == "11/9" and obj["tv_to_target"] == "0"
    code, out, _ = run(["exact", path, "--verifier", "traversal", "--paths", "2", "--json"],
                       capsys)
    obj = json.loads(out)
    assert code == 0 and obj["drafting"] == "norep" and obj["paths"] == 2
    assert obj["tv_to_target"] < 1e-12
    assert set(obj) >= {"verifier", "vocab_size", "block_length", "expected_accepted",
                        "block_efficiency", "tau_pmf", "tv_to_target", "paths", "drafting"}


def test_exact_text_and_mismatch_note(tmp_path, capsys):
    path = write(tmp_path, TOY)
    code, out, err = run(["exact", path, "--verifier", "gbv", "--paths", "2", "--drafting",
                          "norep"], capsys)
    assert code == 0
    assert "gbv (K = 2, norep drafting)" in out
    assert "designed for iid drafting" in err


def test_single_path_verifier_with_paths_is_an_error(tmp_path, capsys):
    path = write(tmp_path, TOY)
    code, out, err = run(["exact", path, "--verifier", "block", "--paths", "3"], capsys)
    assert code == 2 and out == ""
    assert "single-path" in err and "block-first" in err and "Traceback" not in err
    code, out, err = run(["exact", path, "--verifier", "block", "--paths", "1", "--json"], capsys)
    assert code == 0 and json.loads(out)["paths"] == 1


def test_check_flags_mismatched_tie_gbv(tmp_path, capsys):
    path = write(tmp_path, TIE)
    code, out, _ = run(["check", path, "--verifier", "gbv-mismatched-ties", "--paths", "2",
                        "--exact", "--json"], capsys)
    obj = json.loads(out)
    assert code == 1 and obj["lossless"] is False
    assert obj["offending_sequence"] == [0, 1, 0]
    assert obj["output_probability"] == "15/896" and obj["target_probability"] == "3/128"
    code, out, _ = run(["check", path, "--verifier", "gbv", "--paths", "2", "--exact"], capsys)
    assert code == 0 and "lossless exactly" in out
