"""Refusals say what the user typed: a number past float64's range is named as typed (``1e400``
was reported as ``inf``, ``1e-400`` as ``0.0``), and an option's range is the one it enforces
(``audit --vocab 1`` passed a range of 1.. and was refused later in other words)."""

from __future__ import annotations

import pytest

from cli_helpers import TOY, refused, run, write
from spectheory.inputs.processing import parse_sampling
from spectheory.runtime.errors import OptionError, SpectheoryError
from spectheory.runtime.limits import parse_float


@pytest.mark.parametrize("text", ["1e400", "-1e400", " 2e308 "])
def test_a_float_past_the_range_is_named_as_typed(text):
    with pytest.raises(OptionError, match="above the largest float") as exc:
        parse_float(text, "--tol")
    assert text.strip() in str(exc.value) and "inf " not in str(exc.value)


@pytest.mark.parametrize("text,value", [("inf", float("inf")), ("1.7e308", 1.7e308),
                                        ("-Infinity", float("-inf"))])
def test_infinity_spelled_out_and_the_largest_floats_are_read(text, value):
    assert parse_float(text) == value  # the option's own range check decides on inf


@pytest.mark.parametrize("argv,typed", [
    (["check", "{inst}", "--tol", "1e400"], "1e400"),
    (["check", "{inst}", "--lossless-tol", "1e999"], "1e999"),
    (["instance", "random", "--vocab", "3", "--block", "1", "--alpha", "1e400"], "1e400"),
    (["exact", "{inst}", "--sampling", "temperature=1e400"], "1e400"),
    (["exact", "{inst}", "--sampling", "top_p=1e-400"], "1e-400"),
])
def test_the_command_line_names_the_number_typed(tmp_path, capsys, argv, typed):
    inst = write(tmp_path, TOY)
    code, out, err = run([a.format(inst=inst) for a in argv], capsys)
    refused(code, out, err, typed)
    assert " inf " not in err and "= 0.0 " not in err


def test_sampling_parameters_past_float_range_from_python():
    with pytest.raises(SpectheoryError, match="'1e400' is above the largest float"):
        parse_sampling("top_k=5,temperature=1e400")
    with pytest.raises(SpectheoryError, match="'1e-400' is below the smallest float"):
        parse_sampling("min_p=1e-400")
    assert parse_sampling("min_p=1e-300").min_p == 1e-300
    assert parse_sampling("min_p=0e-5").min_p == 0  # a zero written with an exponent is zero


@pytest.mark.parametrize("vocab", ["0", "1"])
def test_audit_vocab_below_two_is_refused_by_its_range(capsys, vocab):
    code, out, err = run(["audit", "--vocab", vocab], capsys)
    refused(code, out, err, f"argument --vocab: {vocab} is out of range 2..")


def test_audit_memory_refusal_spells_every_size(capsys):
    code, out, err = run(["audit", "--batch", "100000000"], capsys)
    refused(code, out, err, "B = 100,000,000", "TiB", "a smaller batch (--batch)")


HUGE = 10**5000  # past Python's int-to-str limit: formatting it raises ValueError


def _huge_calls():
    import spectheory as st
    from spectheory.cli.audit import audit
    from spectheory.registry import get_verifier
    from spectheory.toy_models import families

    inst = st.instance_from_dict({"vocab_size": 3, "block_length": 2,
                                  "target": ["1/2", "1/4", "1/4"], "draft": ["1/3"] * 3})
    return {
        "seed": lambda: st.random_instance(3, 2, seed=HUGE),
        "vocab_size": lambda: st.random_instance(HUGE, 2, seed=0),
        "n_tokens": lambda: st.check_lossless(get_verifier("token"), inst, n_tokens=HUGE),
        "paths": lambda: st.analyze(inst, "specinfer", paths=HUGE),
        "V = ~10^5000": lambda: audit("block", vocab_size=HUGE),
        "vocab_size = ~10^5000": lambda: families.dirichlet(vocab_size=HUGE, block_length=2),
        "block_length = -~10^5000": lambda: st.instance_from_dict(
            {"vocab_size": 3, "block_length": -HUGE, "target": [1], "draft": [1]}),
    }


@pytest.mark.parametrize("name", list(_huge_calls()))
def test_an_integer_too_long_to_print_is_refused_by_name(name):
    """A size of 10^5000 from Python is refused naming the argument (it raised Python's
    "Exceeds the limit (4300 digits) for integer string conversion" while the refusal was
    being written, or an OverflowError in the audit's advice)."""
    with pytest.raises(SpectheoryError) as exc:
        _huge_calls()[name]()
    assert name in str(exc.value) and "4300" not in str(exc.value), str(exc.value)


def test_human_count_and_bytes_take_any_integer():
    from spectheory.runtime.limits import human_bytes, human_count

    assert human_count(-HUGE) == "-~10^5000" and human_count(-12_345) == "-12,345"
    assert human_bytes(HUGE) == "~10^5000 B" and human_bytes(3 * 2**30) == "3 GiB"


@pytest.mark.parametrize("vocab,block,words", [
    ("1000000", "64", "has ~10^384 target prefixes, over the JSON limit of 2,000,000; use "),
    ("1000", "3", "has 1,001,001,001 target prefixes, over the JSON limit of 2,000,000 by "
                  "999,001,001; use "),
])
def test_a_table_instance_too_large_for_json_states_its_size_in_one_short_line(capsys, vocab,
                                                                               block, words):
    """The prefix count of V = 10^6, L = 64 was printed whole: about 500 characters of digits
    in one line."""
    code, out, err = run(["instance", "random", "--vocab", vocab, "--block", block], capsys)
    refused(code, out, err, words)
    assert len(err) < 200, err


@pytest.mark.parametrize("value,words", [
    ("1", "alpha = '1' is not a number"),
    (b"1", "alpha = b'1' is not a number"),
    (" 1e0 ", "alpha = ' 1e0 ' is not a number"),
    pytest.param(10**400, "alpha = an integer of 401 digits is out of range",
                 id="integer-past-float64"),
])
def test_random_instance_alpha_is_a_number_not_a_string_float_can_read(value, words):
    """A string alpha was read by float() ('1' gave alpha = 1), where True, complex and arrays
    were refused; an integer past float64 was called 'not a number'."""
    import spectheory as st

    with pytest.raises(SpectheoryError) as exc:
        st.random_instance(3, 2, 0, alpha=value)
    assert words in str(exc.value), str(exc.value)
    assert st.random_instance(3, 2, 0, alpha=1).vocab_size == 3  # control


@pytest.mark.parametrize("value,words", [
    ("1e-9", "tolerance '1e-9' is not a number"),
    (True, "tolerance True is not a number"),
    pytest.param(10**400, "tolerance an integer of 401 digits is out of range",
                 id="integer-past-float64"),
])
def test_check_lossless_tol_is_a_number_not_a_string_float_can_read(value, words):
    """check_lossless(tol='1e-9') ran as if 1e-9 had been given; check_sampler refuses a string
    alpha the same way."""
    import spectheory as st

    inst = st.random_instance(3, 2, 0)
    with pytest.raises(SpectheoryError) as exc:
        st.check_lossless("token", inst, tol=value)
    assert words in str(exc.value), str(exc.value)
    assert st.check_lossless("token", inst, tol=1e-9).lossless  # control


@pytest.mark.parametrize("value,words", [
    ("1e-9", "tol '1e-9' is not a number"),
    (b"0", "tol b'0' is not a number"),
    pytest.param(10**400, "tol an integer of 401 digits is out of range: row sums are checked",
                 id="integer-past-float64"),
])
def test_an_instances_row_tolerance_is_a_number_not_a_string_float_can_read(value, words):
    """instance_from_dict(tol='1e-9') read the string as 1e-9, where check_lossless's tol and
    random_instance's alpha refused it (the three now share `limits.check_real`); an integer
    past float64 was 'not a number'."""
    import spectheory as st
    from spectheory.inputs.instances import instance_to_dict, instance_from_dict

    data = instance_to_dict(st.random_instance(3, 2, 0))
    with pytest.raises(SpectheoryError) as exc:
        instance_from_dict(data, tol=value)
    assert words in str(exc.value), str(exc.value)
    assert instance_from_dict(data, tol=0).vocab_size == 3  # control


@pytest.mark.parametrize("text", ["-0.0", "-0", "-0e3", "-0/5"])
def test_a_frontier_budget_of_negative_zero_is_zero(text):
    """`lp --problem frontier --tv -0.0` was refused as "'-0.0' must be a finite number >= 0",
    which -0.0 is; -0.1 is still refused (the control)."""
    from fractions import Fraction

    from spectheory.lp.frontier import _budget_text
    from spectheory.lp.result import LPError

    assert _budget_text(text, "TV") == Fraction(0)
    with pytest.raises(LPError, match=r"TV budget '-0\.1' must be a finite number >= 0"):
        _budget_text("-0.1", "TV")
