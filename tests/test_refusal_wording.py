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
