"""Bad input on the command line and the public helpers behind it, found by outside-style probing
(2026-12-02); each was a hang, a silent opposite, a wrong exit code or count, half-written output
or a deep exception, and is now one line (exit 2) or right:

1. ``vectors check`` compared the files' strings with Python's ``Fraction``: ``"1e999999999"``
   built a billion-digit integer (a hang), and other scripts' digits or ``1_0`` matched.
2. ``toy two-token exact=no`` gave an exact instance (the string's truth value).
3. ``--threads`` before and after the command: the first was never read, even when invalid.
4. An error line that cannot be written (standard error on a full device) ended with exit 1,
   the code of a LOSSY verdict.
5. SIGHUP (a closed terminal) left the folder being written; it is cleaned as on SIGTERM.
6. The size note of a long analysis was printed twice, and a logit_bias token outside the
   vocabulary was refused only after it.
7. ``vectors check`` counted folders named ``*.json`` as matching files.
8. Public helpers: tokenizers, the random rational models, the toy families' paths and
   temperatures, the vector export's arguments, a heterogeneous instance whose alphabet its
   tokenizers do not fit, a JSON entry past float64 under ``--exact``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import refused, run
from spectheory.runtime.errors import SpectheoryError

PY = [sys.executable, "-m", "spectheory"]


def _one_vector(tmp_path) -> Path:
    from spectheory.testing.checks.vectors import export_vectors

    out = tmp_path / "vec"

    export_vectors(out, ["block"], ["battery"])
    return out


ARABIC = str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667"
                                     "\u0668\u0669")


@pytest.mark.parametrize("change", [
    lambda v: v.translate(ARABIC),          # the same value in other digits matched
    lambda v: v.replace("/", "_0/") + "0",  # 1_30/9_0: the same value with underscores
    lambda v: f" {v} ",
    lambda v: "1e999999999",                # a billion-digit integer: a hang
])
def test_vector_values_are_read_as_plain_rationals_only(tmp_path, capsys, change):
    out = _one_vector(tmp_path)
    path = sorted(out.glob("*.json"))[0]
    data = json.loads(path.read_text())
    assert "/" in data["expected_accepted"]
    data["expected_accepted"] = change(data["expected_accepted"])
    path.write_text(json.dumps(data))
    start = time.monotonic()
    code, stdout, err = run(["vectors", "check", str(out), "--no-progress"], capsys)
    # not a fraction as the files write one: a malformed file, refused (no verdict on it)
    refused(code, stdout, err, f"{path.name}: field expected_accepted = ",
            "is not a fraction string")
    assert time.monotonic() - start < 30


def test_vectors_check_counts_files_only(tmp_path, capsys):
    out = _one_vector(tmp_path)
    n = len(list(out.glob("*.json")))
    (out / "x.json").mkdir()
    code, stdout, err = run(["vectors", "check", str(out), "--no-progress"], capsys)
    assert code == 0 and stdout == f"all {n} vector files match a fresh computation\n", err


def test_toy_flags_and_paths_are_checked(capsys):
    from toy_models.families import make_instance

    for value in ("no", "off", "2"):
        refused(*run(["toy", "two-token", "q0=0.3", f"exact={value}"], capsys),
                "exact must be true or false")
    with pytest.raises(SpectheoryError, match="text_path = 5 is not a file path"):
        make_instance("ngram", text_path=5)
    cold = make_instance("temperature", temperature=1e-320)  # NaN rows before: the 1-hot limit
    for table in cold.draft.tables:
        assert np.isfinite(table).all() and set(np.unique(table)) <= {0.0, 1.0}


def test_threads_given_before_and_after_the_command_is_refused(tmp_path, capsys):
    from cli_helpers import write

    inst = write(tmp_path, {"vocab_size": 2, "block_length": 1, "target": [0.5, 0.5],
                            "draft": [0.5, 0.5]})
    for argv in (["--threads", "abc", "exact", "--threads", "1", inst],
                 ["--threads", "1", "exact", "--threads=1", inst]):
        refused(*run(argv, capsys), "--threads given twice")
    code, out, err = run(["--threads", "1", "exact", inst], capsys)
    assert code == 0, err


def test_bad_input_with_stderr_on_a_full_device_still_exits_2(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        for args in (["check", str(tmp_path / "absent.json")], ["check", "--bogus", "x"]):
            done = subprocess.run(PY + args, stderr=full, stdout=subprocess.PIPE, timeout=60)
            assert done.returncode == 2, args


def test_sighup_removes_the_folder_being_written(tmp_path):
    out = tmp_path / "x"
    proc = subprocess.Popen(PY + ["vectors", "export", "--no-progress", str(out)],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".x*")) and time.monotonic() < deadline \
            and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None and list(tmp_path.glob(".x*")), "the export did not start"
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 129, err
    assert err == "spectheory: terminated (SIGHUP); nothing half-written was left\n"
    assert list(tmp_path.iterdir()) == []


def test_a_long_analysis_notes_its_size_once_and_checks_its_sampling_first(tmp_path, capsys,
                                                                          monkeypatch):
    from spectheory.runtime import limits

    # 2^23 leaves on the per-node route are estimated at about 10 s: past a threshold of 1 s
    monkeypatch.setattr(limits, "NOTE_SECONDS", 1.0)
    inst = tmp_path / "ci.json"
    code, out, err = run(["instance", "random", "--vocab", "2", "--block", "22",
                          "--context-independent"], capsys)
    assert code == 0, err
    inst.write_text(out)
    code, out, err = run(["exact", "--verifier", "token", str(inst)], capsys)
    assert code == 0 and err.count("spectheory: note: exact analysis:") == 1, err
    code, out, err = run(["exact", "--sampling", "logit_bias=5:1", str(inst)], capsys)
    assert code == 2 and out == "" and err == ("spectheory: error: logit_bias token 5 is "
                                               "outside the vocabulary 0..1\n")


def test_tokenizers_and_rational_models_check_their_arguments():
    import dataclasses

    from spectheory.inputs.hetero_pairs import hetero_pair, random_rational_model
    from spectheory.inputs.tokenizers import Tokenizer, check_hetero_instance, make_tokenizer

    t = make_tokenizer(["a", "b", "ab"], "ab")
    for ids in ([7], [-1], [0.0]):
        with pytest.raises(SpectheoryError, match="is not in 0..2"):
            t.decode(ids)
    assert t.decode([0, np.int64(2)]) == "aab"
    cases = [(lambda: Tokenizer(()), "must be a non-empty tuple"),
             (lambda: make_tokenizer(["a", "b"], None), "alphabet must be a non-empty string"),
             (lambda: hetero_pair([]), "unknown tokenizer pair"),
             (lambda: random_rational_model(None, 2, 1, 3), "is not a numpy Generator"),
             (lambda: random_rational_model(np.random.default_rng(0), 2, 1, 2**70), "2^62")]
    for call, words in cases:
        with pytest.raises(SpectheoryError, match=words.replace("^", "\\^")):
            call()
    one = random_rational_model(np.random.default_rng(0), 1, 2, 3)  # 0/0 in some row before
    assert all(t[:, 0].tolist() == [1] * len(t) for t in one.tables)
    pair = hetero_pair("crossed-bounds", 0)
    with pytest.raises(SpectheoryError, match="not in the alphabet 'xyz'"):
        check_hetero_instance(dataclasses.replace(pair, alphabet="xyz"))


def test_vector_export_and_check_arguments(tmp_path):
    from spectheory.testing.checks.vectors import check_vectors, export_vectors

    cases = [(lambda: export_vectors(None), "names no folder"),
             (lambda: export_vectors(tmp_path / "a", "block"), "verifiers = 'block' must be a list"),
             (lambda: export_vectors(tmp_path / "a", ["block"], "battery"), "must be a list"),
             (lambda: export_vectors(tmp_path / "a", []), "verifiers is empty"),
             (lambda: export_vectors(tmp_path / "a", ["block"], []), "instances is empty"),
             (lambda: check_vectors(None), "is not a path"),
             (lambda: check_vectors(tmp_path, progress="x"), "progress = 'x'")]
    for call, words in cases:
        with pytest.raises(SpectheoryError, match=words):
            call()
    assert list(tmp_path.iterdir()) == []
    names = export_vectors(tmp_path / "g", (v for v in ["block"]), ["battery"])  # a generator
    assert names and all(n.startswith("block--K1--") for n in names)


def test_a_json_entry_past_float64_is_named_under_exact(tmp_path, capsys):
    inst = tmp_path / "big.json"
    inst.write_text('{"vocab_size":2,"block_length":1,"target":[1e400,0],"draft":[0.5,0.5]}')
    refused(*run(["exact", str(inst), "--exact"], capsys), "entry '1e400' overflows float64")


@pytest.mark.parametrize("body, words", [
    ("sweep = 5\n", "sweep must be one table, [sweep], not an integer"),
    ("instances = [1, 2]\n", "instances must be an array of tables, [[instances]] (one per "
                             "entry), not an array of values"),
    ('[instances]\nfamily = "random"\n', "not a table"),
    ('[verifiers]\nname = "token"\n', "verifiers must be an array of tables"),
    ("optima = 'direct'\n", "optima must be an array of tables, [[optima]] (one per entry), "
                            "not a string"),
    ('[[sweep]]\nname = "a"\n', "sweep must be one table, [sweep], not an array of tables"),
])
def test_a_sweep_files_top_level_types_are_checked(tmp_path, capsys, body, words):
    """A table where an array of tables belongs was walked key by key (``[verifiers] name``
    refused as "unknown key 'n'"), other types raised inside the reader."""
    (tmp_path / "s.toml").write_text(body)
    refused(*run(["sweep", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o")], capsys),
            words)
    assert not (tmp_path / "o").exists()


def test_lp_budgets_and_closed_forms_past_the_float_range():
    import spectheory as st
    from spectheory import lp
    from spectheory.lp.frontier import free_block_lp, frontier_lp

    inst = st.random_instance(3, 1, seed=0)
    p, q = inst.target.tables[0][0].tolist(), inst.draft.tables[0][0].tolist()
    for K in (10 ** 16, 10 ** 18, 2 ** 63 - 1):  # (1 + 2e-16)^K gave -7.2 and -2.7e96
        alpha, _ = lp.multidraft_acceptance_L1(p, q, K)
        assert alpha == 1.0
    assert lp.optimal_multidraft_L1(inst, paths=10 ** 15).optimum == 2.0  # was 1.7514
    two = st.random_instance(2, 2, 0)
    for tv in (1e308, 1.7e308, 2):  # a TV budget over 1 is 1 (1e308 overflowed the LP rows)
        assert abs(frontier_lp(two, tv=tv).optimum - frontier_lp(two, tv=1).optimum) < 1e-9
    assert free_block_lp(two, tv=1e308).optimum == free_block_lp(two, tv=1).optimum


def test_a_certificate_refusal_shows_long_fractions_by_value(tmp_path, capsys):
    """At --tv 1e-400 --exact the float solutions cannot be certified (refused, correctly), but
    the line printed the two 800-digit objectives in full (1,600 characters)."""
    from fractions import Fraction

    from spectheory.lp.sparse import _show

    assert _show(Fraction(5, 3)) == "5/3"
    long = Fraction(23 * 10 ** 400 + 1, 12 * 10 ** 400)
    assert _show(long) == "1.91666666667 (a fraction of 802 digits)"  # reduced by 3
    inst = tmp_path / "i.json"
    code, out, _ = run(["instance", "random", "--vocab", "2", "--block", "1",
                        "--denominator", "12"], capsys)
    inst.write_text(out)
    code, stdout, err = run(["lp", str(inst), "--problem", "frontier", "--tv", "1e-400",
                             "--exact"], capsys)
    assert code == 2 and err.count("\n") == 1 and len(err) < 400, err
    assert "no exact certificate" in err and "digits)" in err, err


def test_deep_trees_and_huge_ranks_are_refused_before_any_work():
    """tree_lp built the instance's levels to a 64-deep chain before its size check (25 s and
    6.5 GB at depth 30); a choices list with a rank of 10^18 built a set of 10^18 integers."""
    import spectheory as st
    from spectheory import lp
    from spectheory.engine.drafttrees import tree_shape

    start = time.monotonic()
    with pytest.raises(SpectheoryError, match="at least sum_j V\\^j"):
        lp.tree_lp(st.random_instance(2, 2, seed=0), ",".join("1" * 64))
    for choices, missing in (([[10 ** 18]], "[0]"), ([[0], [2], [1], [4]], "[3]")):
        with pytest.raises(SpectheoryError, match=f"is listed without \\{missing[:-1]}\\]"):
            tree_shape(choices)
    assert time.monotonic() - start < 10


def test_frontier_rules_and_tree_sets_are_checked():
    import spectheory as st
    from spectheory.engine.drafttrees import tree_shape
    from spectheory.lp.frontier import frontier_lp

    inst = st.random_instance(2, 2, 0)
    for rules, words in ((42, "must be a list of registered rule names"),
                         ("token", "must be a list"), (["nope"], "'nope' is not a registered"),
                         ([42], "42 is not a registered rule")):
        with pytest.raises(SpectheoryError, match=words):
            frontier_lp(inst, tv=0.1, rules=rules)
    with pytest.raises(SpectheoryError, match="ordered by depth: give a list"):
        tree_shape({2, 1})
    assert tree_shape([2, 1]).paths == 2


def test_a_kl_budget_of_zero_is_the_lossless_optimum():
    """KL(A || p) = 0 iff A = p: the frontier at KL 0 is the TV frontier at 0 (the convex program
    at a budget of 0 was refused for its solver's gap)."""
    import spectheory as st
    from spectheory.lp.frontier import frontier_lp

    inst = st.random_instance(2, 2, 0)
    res = frontier_lp(inst, kl=0)
    assert res.optimum == frontier_lp(inst, tv=0).optimum and res.details["budget"] == ("kl", 0.0)


def test_a_signal_during_the_import_of_multiprocessing_still_ends_in_one_line(monkeypatch,
                                                                               capsys):
    """SIGHUP arrived while multiprocessing was half imported (no active_children yet): ending
    the process raised AttributeError and exited 1 instead of 129. The end path now goes on."""
    import types

    from spectheory import cli

    half = types.ModuleType("multiprocessing")  # what sys.modules holds mid-import
    monkeypatch.setitem(sys.modules, "multiprocessing", half)
    codes = []
    monkeypatch.setattr("spectheory.runtime.errors.real_exit", lambda code: codes.append(code))
    cli._end_now("spectheory: terminated (SIGHUP)", 129)
    assert codes == [129]
    assert capsys.readouterr().err.startswith("spectheory: terminated (SIGHUP)")
