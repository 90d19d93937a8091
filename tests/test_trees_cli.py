"""``spectheory tree``: exact results through the command line, bad input one line, exit 2."""

from __future__ import annotations

import argparse
import json
from fractions import Fraction

import pytest
from cli_helpers import TOY, write

from spectheory.runtime.errors import SpectheoryError
from spectheory.inputs.instances import instance_to_dict
from spectheory.inputs.random_instances import random_instance
from spectheory.engine.analysis import analyze_tree
from spectheory.cli.trees import register


def parser():
    p = argparse.ArgumentParser(prog="spectheory")
    sub = p.add_subparsers(dest="command")
    register(sub)
    return p


def run(argv, capsys):
    """Run the command as the CLI does: SpectheoryError -> one line, exit 2."""
    args = parser().parse_args(argv)
    try:
        code = args.func(args)
    except SpectheoryError as exc:
        print(f"spectheory: error: {exc}", file=__import__("sys").stderr)
        code = 2
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_matches_the_api_exactly(tmp_path, capsys):
    inst = random_instance(3, 2, 1, denominator=12)
    path = write(tmp_path, instance_to_dict(inst))
    code, out, err = run(["tree", path, "--tree", "2,2", "--verifier", "specinfer-norep",
                          "--drafting", "norep", "--exact", "--json"], capsys)
    assert code == 0 and err == ""
    obj = json.loads(out)
    ref = analyze_tree(inst, "specinfer-norep", (2, 2), "norep")
    assert Fraction(obj["block_efficiency"]) == ref.block_efficiency
    assert obj["lossless"] is True and obj["tv_to_target"] == "0"
    assert obj["tree"] == "2,2" and obj["paths"] == 4 and obj["drafted_nodes"] == 6


def test_text_names_a_lossy_combination(tmp_path, capsys):
    path = write(tmp_path, instance_to_dict(random_instance(3, 2, 1, denominator=12)))
    code, out, _ = run(["tree", path, "--tree", "2,2", "--drafting", "norep", "--exact"],
                       capsys)
    assert code == 0 and "LOSSY" in out and "TV = 0.00694444" in out  # 1/144


def test_toy_chain_is_block_verification(tmp_path, capsys):
    path = write(tmp_path, TOY)
    code, out, _ = run(["tree", path, "--tree", "1,1", "--verifier", "block-first", "--exact",
                        "--json"], capsys)
    assert code == 0 and json.loads(out)["expected_accepted"] == "11/9"


@pytest.mark.parametrize("extra,needle", [
    (["--tree", "3,x"], "comma-separated"),
    (["--tree", "0,1"], "positive integers"),
    (["--tree", "2,1", "--drafting", "beam"], "unknown tree drafting"),
    (["--tree", "2,1", "--route", "fast"], "unknown route"),
    (["--tree", "2,1", "--verifier", "nope"], "unknown verifier"),
    (["--tree", "3,1", "--drafting", "topk"], "at most V"),
    (["--tree", "2,2,2", "--verifier", "traversal-tree", "--max-sequences", "100"], "exceed"),
    # spechub's own scheme, not typed: named as the verifier's ("unknown ... 'hub'" before)
    (["--tree", "2,1", "--verifier", "spechub"], "verifier 'spechub' drafts its paths by 'hub', "
                                                 "which has no tree form; give a tree drafting "
                                                 "scheme (iid, norep, topk: --drafting)"),
    (["--tree", "2,1", "--verifier", "spechub", "--drafting", "hub"], "unknown tree drafting "
                                                                      "scheme 'hub'"),
])
def test_bad_input_one_line_exit_2(tmp_path, capsys, extra, needle):
    path = write(tmp_path, TOY)
    code, out, err = run(["tree", path] + extra, capsys)
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1


def test_uneven_tree_by_parents_and_choices_matches_the_api(tmp_path, capsys):
    inst = random_instance(3, 3, 2, denominator=12)
    path = write(tmp_path, instance_to_dict(inst))
    ref = analyze_tree(inst, "topk", {"parents": [0, 1, 2, 1, 0]}, "topk")
    outs = []
    for form in (["--parents", "0,1,2,1,0"], ["--choices", "[[0],[1],[0,0],[0,1],[0,0,0]]"]):
        code, out, err = run(["tree", path, *form, "--verifier", "topk", "--exact", "--json"],
                             capsys)
        assert code == 0 and err == ""
        obj = json.loads(out)
        assert Fraction(obj["block_efficiency"]) == ref.block_efficiency
        assert obj["tau_pmf"] == [str(v) for v in ref.tau_pmf] and obj["lossless"] is True
        assert obj["tree"] == "parents 0,1,2,1,0" and obj["leaf_depths"] == [1, 2, 3]
        outs.append(out)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("extra,needle", [
    (["--parents", "0,x"], "comma-separated integers"),
    (["--parents", "2,1"], "not connected"),
    (["--choices", "[[0],[2]]"], "ranks 0..b-1"),
    (["--choices", "[[0"], "not JSON"),
    (["--choices", "{}"], "JSON list"),
    (["--tree", "2,1", "--parents", "0,0"], "exactly one of"),
    ([], "exactly one of"),
    (["--parents", "0,1,0", "--verifier", "traversal-tree"], "node route"),
    (["--parents", "0,1,0", "--route", "enumerate"], "padding"),
])
def test_uneven_bad_input_one_line_exit_2(tmp_path, capsys, extra, needle):
    path = write(tmp_path, TOY)
    code, out, err = run(["tree", path] + extra, capsys)
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1
