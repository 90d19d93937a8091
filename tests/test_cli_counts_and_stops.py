"""Three readings made consistent with their neighbours: ``--max-sequences`` takes a count as
``--samples`` does (``1e6``; "not an integer" before), a stopping rule's fraction takes blanks
around its bar as a verifier's parameter does (``coin(1 / 3)``; refused before), and a verifier
that refuses the length of a draft a stopping rule ended early says so (spectr-gbv named
"L = 1" on an L = 3 instance before)."""

from __future__ import annotations

import json

import pytest

from spectheory.engine.adaptive import analyze_adaptive, parse_rule
from spectheory.inputs.instances import instance_to_dict
from spectheory.inputs.random_instances import random_instance
from spectheory.runtime.errors import InputError, SpectheoryError
from tests.cli_helpers import run, write


@pytest.fixture
def path33(tmp_path):
    """V = 3, L = 3, prefix-dependent rows: 3^4 = 81 sequences."""
    return write(tmp_path, instance_to_dict(random_instance(3, 3, seed=4)))


@pytest.mark.parametrize("command", [["exact"], ["check"], ["tree", "--tree", "2,1"]])
def test_max_sequences_is_read_as_a_count(path33, capsys, command):
    """1e2 = 100 caps at 100 (81 pass); 5e1 = 50 refuses the 81; the run under 1e2 prints what
    the run under 100 prints."""
    code, out_sci, err = run([*command, path33, "--max-sequences", "1e2"], capsys)
    assert code in (0, 1) and err == "", err  # check: exit 1 when lossy
    code, out_int, _ = run([*command, path33, "--max-sequences", "100"], capsys)
    assert out_int == out_sci and out_sci
    code, out, err = run([*command, path33, "--max-sequences", "5e1"], capsys)
    assert code == 2 and out == "" and "max-sequences" in err and "50" in err.replace(",", "")
    for text, words in (("1.5e0", "not a whole number"), ("1e30", "out of range"),
                        ("abc", "not an integer"), ("0", "out of range"), ("1e999", "range")):
        code, out, err = run([*command, path33, "--max-sequences", text], capsys)
        assert code == 2 and out == "" and words in err, (text, err)
        assert err.count("\n") == 1 and "--max-sequences" in err


@pytest.mark.parametrize("text", ["coin(1 / 3)", "coin( 1 /3 )", "coin(1/ 3)", " coin(1/3) "])
def test_a_rule_fraction_with_blanks_is_the_fraction(text):
    inst = random_instance(3, 2, seed=1, denominator=12)
    rule = parse_rule(text)
    assert rule.name == "coin(1/3)"
    want = analyze_adaptive(inst, "token", "coin(1/3)")
    got = analyze_adaptive(inst, "token", rule)
    assert got.tau_pmf == want.tau_pmf and got.length_pmf == want.length_pmf


@pytest.mark.parametrize("text", ["coin(1 / 3 / 4)", "coin(- 1/3)", "coin(1 / )", "coin(/ 3)",
                                  "coin(1 / 0)", "coin(4 / 3)", "coin(1 /\n3)x"])
def test_a_broken_rule_fraction_is_still_refused(text):
    with pytest.raises(InputError, match="stopping rule"):
        parse_rule(text)


def test_a_verifier_refusing_a_stopped_drafts_length_names_the_rule_and_the_instances_L(
        path33, capsys):
    inst = random_instance(3, 3, seed=4)
    with pytest.raises(SpectheoryError) as info:
        analyze_adaptive(inst, "spectr-gbv", "coin(1/3)")
    msg = str(info.value)
    assert msg.startswith("spectr-gbv needs block length L >= 2") and "not L = 1" in msg
    assert msg.endswith("the stopping rule 'coin(1/3)' ends drafts after 1 of the instance's "
                        "L = 3 tokens"), msg
    with pytest.raises(SpectheoryError, match=r"after 0 of the instance's L = 3 tokens \(with "
                                              r"the stop token, 1\)$"):
        analyze_adaptive(inst, "spectr-gbv", "coin(1/3)", aware=True)
    # a rule that never stops early: the full drafts only, as without --stop
    law = analyze_adaptive(inst, "spectr-gbv", "never")
    assert law.length_pmf[-1] == 1 and abs(sum(law.tau_pmf) - 1) < 1e-12
    code, out, err = run(["exact", path33, "--verifier", "spectr-gbv", "--stop", "coin(1/3)"],
                         capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "ends drafts after 1 of the instance's L = 3 tokens" in err
    # the CLI's JSON under a rule that works is unchanged by the wrapper
    code, out, _ = run(["exact", path33, "--verifier", "token", "--stop", "coin(1 / 3)",
                        "--json"], capsys)
    assert code == 0 and json.loads(out)["stop"] == "coin(1/3)"


def test_the_size_limits_environment_variables_read_a_count_as_the_options_do(path33, capsys,
                                                                               monkeypatch):
    """SPECTHEORY_MAX_SEQUENCES=1e2 caps as --max-sequences 1e2 does (digits only before)."""
    monkeypatch.setenv("SPECTHEORY_MAX_SEQUENCES", "1e2")
    code, out, err = run(["exact", path33], capsys)
    assert code == 0 and err == ""
    monkeypatch.setenv("SPECTHEORY_MAX_SEQUENCES", "5e1")
    code, out, err = run(["exact", path33], capsys)
    assert code == 2 and "SPECTHEORY_MAX_SEQUENCES" in err and err.count("\n") == 1
    for text in ("1.5e0", "1e30", "abc"):
        monkeypatch.setenv("SPECTHEORY_MAX_SEQUENCES", text)
        code, out, err = run(["exact", path33], capsys)
        assert code == 2 and "SPECTHEORY_MAX_SEQUENCES" in err and err.count("\n") == 1, text
