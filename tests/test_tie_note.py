"""A float ``exact`` or ``check`` whose decimals tie at a rule's threshold says so.

Without ``--exact`` the rows are the float64 values nearest the decimals written; a rule that
compares at a threshold (a cascade's cut max p - alpha, a stopping rule's p/q < c) can decide
a decimal tie the other way on those values. On small instances the command line also reads
the instance as written and adds a note (and an ``as_written`` key to ``--json``) where the two
answers differ by more than rounding; the float answer itself is kept."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from cli_helpers import run, write
from spectheory.cli import commands

# 0.3 >= 0.4 - 0.1 is true for the decimals, false for their float64 values
# (0.29999999999999999 against 0.30000000000000004): cascade-token-v1 defers differently.
CASCADE_TIE = {"vocab_size": 3, "block_length": 1, "target": ["0.4", "0.3", "0.3"],
               "draft": ["0", "1", "0"]}
# p/q = 0.6/0.2 is 3 as written and 2.9999999999999996 in float64: target-peek(3) stops early.
PEEK_TIE = {"vocab_size": 2, "block_length": 2, "target": ["0.6", "0.4"], "draft": ["0.2", "0.8"]}


def _note(err):
    return [line for line in err.splitlines() if "read exactly as written" in line]


def test_check_notes_a_cascade_tie_and_keeps_the_float_verdict(tmp_path, capsys):
    path = write(tmp_path, CASCADE_TIE)
    code, out, err = run(["check", path, "--verifier", "cascade-token-v1"], capsys)
    assert code == 0 and "lossless" in out  # the float64 values' verdict
    (line,) = _note(err)
    assert "LOSSY (TV 7/10)" in line and "not lossless (TV 0)" in line and "--exact" in line
    code, out, err = run(["check", path, "--verifier", "cascade-token-v1", "--json"], capsys)
    obj = json.loads(out)
    assert obj["lossless"] is True
    assert obj["as_written"] == {"lossless": False, "tv_to_target": "7/10"}
    # --exact answers as written, with no note
    code, out, err = run(["check", path, "--verifier", "cascade-token-v1", "--exact"], capsys)
    assert code == 1 and "LOSSY" in out and not _note(err)


def test_exact_notes_the_tie_with_both_efficiencies(tmp_path, capsys):
    path = write(tmp_path, CASCADE_TIE)
    code, out, err = run(["exact", path, "--verifier", "cascade-token-v1", "--json"], capsys)
    assert code == 0
    obj = json.loads(out)
    assert obj["block_efficiency"] == pytest.approx(1.3)
    assert obj["as_written"] == {"block_efficiency": "2", "tv_to_target": "7/10"}
    (line,) = _note(err)
    assert "E[tau+1] = 2, TV 7/10" in line and "E[tau+1] = 1.3, TV 0" in line


def test_a_stopping_rules_ratio_tie_is_noted(tmp_path, capsys):
    path = write(tmp_path, PEEK_TIE)
    code, out, err = run(["exact", path, "--verifier", "token", "--stop", "target-peek(3)",
                          "--json"], capsys)
    assert code == 0
    obj = json.loads(out)
    # as written: the first draft (q = 1/5 for token 0, p/q = 3) does not stop the drafting
    code2, out2, _ = run(["exact", path, "--verifier", "token", "--stop", "target-peek(3)",
                          "--exact", "--json"], capsys)
    exact = json.loads(out2)
    assert Fraction(obj["as_written"]["block_efficiency"]) == Fraction(
        exact["block_efficiency"]) == Fraction(43, 25)
    assert obj["block_efficiency"] == pytest.approx(1.6)
    (line,) = _note(err)
    assert "43/25" in line


@pytest.mark.parametrize("argv", [
    ["check", "{path}", "--verifier", "token"],            # lossless, no threshold
    ["exact", "{path}", "--verifier", "block"],
    ["exact", "{path}", "--verifier", "cascade-token-v1(0.05)"],  # away from the tie
])
def test_no_note_without_a_tie(tmp_path, capsys, argv):
    path = write(tmp_path, CASCADE_TIE)
    code, out, err = run([a.format(path=path) for a in argv], capsys)
    assert code == 0 and not _note(err), err


def test_no_note_past_the_size_of_the_second_run(tmp_path, capsys, monkeypatch):
    """The as-written run is bounded (TIE_CHECK_LEAVES leaves); past it the float answer stands
    alone, and the bound is what the second run is given."""
    seen = []
    real = commands._as_written

    def spy(args, how, inst, name, text, run_):
        return real(args, how, inst, name, text,
                    lambda i, **kw: seen.append(kw["max_sequences"]) or run_(i, **kw))

    monkeypatch.setattr(commands, "_as_written", spy)
    path = write(tmp_path, CASCADE_TIE)
    run(["check", path, "--verifier", "cascade-token-v1"], capsys)
    assert seen == [commands.TIE_CHECK_LEAVES]
    monkeypatch.setattr(commands, "TIE_CHECK_LEAVES", 2)  # the 3-token law has 9 leaves
    code, out, err = run(["check", path, "--verifier", "cascade-token-v1"], capsys)
    assert code == 0 and not _note(err)


def test_an_instance_past_the_bound_is_not_read_again(tmp_path, capsys, monkeypatch):
    """Past TIE_CHECK_LEAVES in V^(L+1) the instance is not read again as Fractions: that
    reading came before the second run's size check (V = 2,500, L = 1, exact decimals: over a
    minute of Fractions for a run the bound then refused, where the float answer took 5 s)."""
    reads = []
    real = commands.instance_from_text

    def spy(name, text, exact, tol):
        reads.append(exact)
        return real(name, text, exact=exact, tol=tol)

    monkeypatch.setattr(commands, "instance_from_text", spy)
    V = 33  # 33^2 = 1,089 > 1,024 leaves; 32^2 = 1,024 is read again
    for vocab, again in ((V, False), (V - 1, True)):
        row = ["0.5", "0.5"] + ["0"] * (vocab - 2)
        path = write(tmp_path, {"vocab_size": vocab, "block_length": 1, "draft": row,
                                "target": {"": row, **{str(a): row for a in range(vocab)}}})
        reads.clear()
        code, out, err = run(["exact", path, "--verifier", "block", "--json"], capsys)
        assert code == 0 and json.loads(out)["block_efficiency"] == pytest.approx(2.0)
        assert reads == ([False, True] if again else [False]), (vocab, reads)


def test_a_failing_second_run_adds_nothing(tmp_path, capsys, monkeypatch):
    """The as-written run is an extra: its failure (here the instance refused in exact mode)
    leaves the float answer and adds no note."""
    path = write(tmp_path, CASCADE_TIE)

    def boom(*a, **k):
        raise SystemExit(3)

    monkeypatch.setattr(commands, "instance_from_text", lambda name, text, exact=False, tol=0:
                        boom() if exact else _float(name, text, tol))
    code, out, err = run(["check", path, "--verifier", "cascade-token-v1"], capsys)
    assert code == 0 and "lossless" in out and not _note(err)


def _float(name, text, tol):
    from spectheory.inputs.instances import instance_from_text

    return instance_from_text(name, text, exact=False, tol=tol)


def test_a_verifier_without_an_exact_mode_is_run_once(tmp_path, capsys, user_modules):
    """A verifier that declares no exact mode is called on float tensors only: no as-written
    run (which would hand it Fractions) is tried. The same rule with an exact mode (a plain
    module:function is taken to have one) gets the as-written run and its note."""
    mod = user_modules(tie_user=(
        "import dataclasses, torch\n"
        "from spectheory.registry import get_verifier\n"
        "SEEN = []\n"
        "def cascade(drafts, q, p):\n"
        "    SEEN.append(isinstance(q, torch.Tensor))\n"
        "    return get_verifier('cascade-token-v1').function(drafts, q, p)\n"
        "declared = dataclasses.replace(get_verifier('cascade-token-v1'), name='float-cascade',\n"
        "                               function=cascade, exact=False)\n"))
    path = write(tmp_path, CASCADE_TIE)
    code, out, err = run(["check", path, "--verifier", f"{mod}:declared"], capsys)
    import tie_user

    assert code == 0 and not _note(err)
    assert tie_user.SEEN and all(tie_user.SEEN), tie_user.SEEN
    tie_user.SEEN.clear()
    code, out, err = run(["check", path, "--verifier", f"{mod}:cascade"], capsys)
    assert code == 0 and len(_note(err)) == 1
    assert True in tie_user.SEEN and False in tie_user.SEEN  # float, then as written


# q(0) = 10^-13: draft-drop(10^-12) drops token 0 and loses 1/2 * 10^-13 of TV, under the float
# tolerance of 1e-12 (a lossy rule, not a tie: the two laws agree to rounding)
TINY_Q = {"vocab_size": 2, "block_length": 1, "target": ["1/2", "1/2"],
          "draft": ["1/10000000000000", "9999999999999/10000000000000"]}


def test_a_stopping_rules_float_verdict_says_its_tolerance_and_the_exact_one_is_noted(
        tmp_path, capsys):
    """exact --stop printed a bare "lossless" for a lossy drop rule (TV 5e-14 within the float
    tolerance) and compared only tau's law and the TV with the as-written run, never the
    verdict: no note, no "as_written" in --json, where `check` notes a verdict that differs."""
    path = write(tmp_path, TINY_Q)
    argv = ["exact", path, "--stop", "draft-drop(1/1000000000000)", "--verifier", "token"]
    code, out, err = run(argv, capsys)
    assert code == 0 and out.rstrip().endswith("TV to target = 5e-14; lossless within 1e-12"), out
    (line,) = _note(err)
    assert "LOSSY (TV 1/20000000000000)" in line and "not lossless (TV 5e-14)" in line
    assert "the float check calls a TV up to 1e-12 lossless" in line and "ties" not in line
    code, out, err = run(argv + ["--json"], capsys)
    obj = json.loads(out)
    assert obj["lossless"] is True and obj["as_written"]["lossless"] is False
    assert obj["as_written"]["tv_to_target"] == "1/20000000000000"
    code, out, err = run(argv + ["--exact"], capsys)  # the exact verdict itself
    assert "LOSSY" in out and not _note(err)


def test_a_check_decided_by_the_float_tolerance_names_the_tolerance_not_a_tie(tmp_path, capsys):
    """static-ensemble has no threshold; its float check is lossless within 1e-12 (TV 1.3e-16)
    and its exact one LOSSY: the note blamed a threshold tie."""
    path = write(tmp_path, TINY_Q)
    code, out, err = run(["check", path, "--verifier", "static-ensemble(0.9999999999999999)"],
                         capsys)
    assert code == 0 and "lossless within 1e-12" in out
    (line,) = _note(err)
    assert "the float check calls a TV up to 1e-12 lossless" in line and "ties" not in line
    path = write(tmp_path, CASCADE_TIE)  # control: a real tie keeps its reason
    code, out, err = run(["check", path, "--verifier", "cascade-token-v1"], capsys)
    (line,) = _note(err)
    assert "a threshold ties in its decimals" in line


def test_a_float_law_lossy_where_the_exact_one_is_lossless_gets_the_verdicts_the_right_way(
        tmp_path, capsys, user_modules):
    """A user's verifier whose float law is 1e-8 off the target (its exact law exact): the note
    said "the instance gives LOSSY (TV 0), not lossless (TV 4.71e-09): the float check calls a
    TV up to 1e-12 lossless", both verdicts and the reason inverted."""
    user_modules(offby=(
        "import torch\n"
        "import spectheory as st\n"
        "def tok(d, q, p):\n"
        "    stop, corr = st.token_verification(d, q, p)\n"
        "    if torch.is_tensor(corr):\n"
        "        corr = (1 - 1e-8) * corr + 1e-8 / corr.shape[-1]\n"
        "    return stop, corr\n"))
    path = write(tmp_path, {"vocab_size": 3, "block_length": 1, "target": ["1/2", "1/3", "1/6"],
                            "draft": ["1/6", "1/2", "1/3"]})
    code, out, err = run(["exact", path, "--stop", "never", "--verifier", "offby:tok"], capsys)
    assert code == 0 and "LOSSY" in out
    (line,) = _note(err)
    assert "gives lossless (TV 0), not LOSSY (TV " in line and "agree to rounding" in line
    assert "calls a TV up to" not in line
    code, out, err = run(["check", path, "--verifier", "offby:tok"], capsys)  # the same note
    (line,) = _note(err)
    assert code == 1 and "gives lossless (TV 0), not LOSSY (TV " in line and "agree to " \
        "rounding" in line and "ties" not in line
