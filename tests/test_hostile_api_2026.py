"""Bad input through the Python API and instance files, each refused in one line naming it:

* exact mode reads a JSON number by its text, not by the float json makes of it (``1e-400`` was
  read as 0 and ``0.10000000000000000001`` as 1/10: a different instance, analysed without a
  word);
* number strings in ASCII digits only (``Fraction`` also takes other scripts' digits and ``1_0``);
* Fraction entries in ``instance_from_dict`` (an exact instance built in Python), and messages
  that stay printable for a Fraction or integer of thousands of digits;
* a verifier function handed to ``analyze`` or ``check_lossless`` is user code: an exception,
  ``sys.exit`` or a wrong signature is one ``UserCodeError`` naming it.
"""

from __future__ import annotations

import sys
from fractions import Fraction

import pytest

import spectheory as st
from cli_helpers import refused, run, write
from spectheory.inputs.instances import instance_from_dict, load_instance
from spectheory.runtime.errors import InstanceError, UserCodeError
from spectheory.verifiers.block import block_verification


def _instance(target, draft=("1/2", "1/2")):
    return {"vocab_size": 2, "block_length": 1, "target": list(target), "draft": list(draft)}


# ----------------------------------------------------------------------------- JSON numbers


def test_exact_mode_reads_json_numbers_by_their_text(tmp_path, capsys):
    path = write(tmp_path, '{"vocab_size": 2, "block_length": 1, "target": [1e-400, 1], '
                           '"draft": [0.5, 0.5]}')
    refused(*run(["exact", path, "--verifier", "token", "--exact"], capsys),
            "sums to 1 + 1e-400, off from 1 by 1e-400")
    with pytest.raises(InstanceError, match=r"off from 1 by 1e-20"):
        load_instance(write(tmp_path, '{"vocab_size": 2, "block_length": 1, "target": '
                                      '[0.10000000000000000001, 0.9], "draft": [0.5, 0.5]}',
                            "long.json"),
                      exact=True)
    # controls: a number that is its own shortest text is that fraction; float mode reads the
    # float json gives (1e-400 is 0.0 in float64, and the row sums to 1)
    inst = load_instance(write(tmp_path, '{"vocab_size": 2, "block_length": 1, "target": '
                                         '[0.1, 0.9], "draft": [0.5, 0.5]}', "short.json"),
                         exact=True)
    assert list(inst.target.level(0)[0]) == [Fraction(1, 10), Fraction(9, 10)]
    inst = load_instance(path)
    assert inst.target.level(0)[0].tolist() == [0.0, 1.0]


@pytest.mark.parametrize("entry", ["\u0661/\u0663", "1_0/30", "\uff11/3", "1/3.0", "0x1/3"])
def test_number_strings_are_ascii_numbers_or_fractions(entry):
    with pytest.raises(InstanceError, match=r"not a number or fraction in ASCII digits"):
        instance_from_dict(_instance([entry, "2/3"]), exact=True)


@pytest.mark.parametrize("a, b", [(" 1/3 ", "2/3"), ("+1/4", "0.75"), ("2.5e-1", "3/4"),
                                  ("-0", "1"), (".25", "75e-2")])
def test_plain_number_strings_still_read(a, b):
    inst = instance_from_dict(_instance([a, b]), exact=True)
    assert sum(inst.target.level(0)[0]) == 1


# ----------------------------------------------------------------------------- Fractions


def test_fraction_entries_are_read_in_both_modes():
    d = _instance([Fraction(1, 3), Fraction(2, 3)], [Fraction(1, 2), Fraction(1, 2)])
    exact = instance_from_dict(d, exact=True)
    assert list(exact.target.level(0)[0]) == [Fraction(1, 3), Fraction(2, 3)]
    assert instance_from_dict(d).target.level(0)[0].tolist() == [1 / 3, 2 / 3]
    # L = 1: E[tau + 1] = 1 + sum_x min(p(x), q(x)) = 1 + 1/3 + 1/2
    assert st.analyze(exact, "token", exact=True).block_efficiency == Fraction(11, 6)


def test_fractions_of_thousands_of_digits_are_named_by_their_size():
    tiny = Fraction(1, 10**5000)
    inst = instance_from_dict(_instance([tiny, 1 - tiny]), exact=True)  # a valid row
    # L = 1: E[tau + 1] = 1 + min(tiny, 1/2) + min(1 - tiny, 1/2)
    assert st.analyze(inst, "token", exact=True).block_efficiency == Fraction(3, 2) + tiny
    with pytest.raises(InstanceError, match=r"sums to 1 - 0\.667, off from 1 by 0\.667"):
        instance_from_dict(_instance([tiny, Fraction(1, 3)]), exact=True)
    with pytest.raises(InstanceError, match=r"a fraction with a 1-digit numerator and a 5001-digit "
                       r"denominator is negative"):
        instance_from_dict(_instance([-tiny, 1]), exact=True)
    with pytest.raises(InstanceError, match=r"an integer of 6001 digits is over 1"):
        instance_from_dict(_instance([10**6000, 1]), exact=True)


# ----------------------------------------------------------------------------- user verifiers


def _raises(drafts, q, p):
    return [][1]


def _exits(drafts, q, p):
    sys.exit(0)


def _one_argument(drafts):
    return block_verification(drafts, None, None)


def _block_copy(drafts, q, p):
    return block_verification(drafts, q, p)


@pytest.mark.parametrize("fn, words", [
    (_raises, "verifier '_raises' raised IndexError: list index out of range"),
    (_exits, "verifier '_exits' called sys.exit(0)"),
    (_one_argument, "verifier '_one_argument' raised TypeError"),
])
def test_a_verifier_function_is_user_code(fn, words):
    inst = st.random_instance(3, 2, 1, denominator=60)
    for call in (lambda: st.analyze(inst, fn), lambda: st.analyze(inst, fn, exact=True),
                 lambda: st.check_lossless(fn, inst)):
        with pytest.raises(UserCodeError) as info:
            call()
        assert words in str(info.value) and "\n" not in str(info.value)


def test_a_correct_verifier_function_gives_the_registered_law():
    inst = st.random_instance(3, 2, 1, denominator=60)
    mine = st.analyze(inst, _block_copy, exact=True)
    ref = st.analyze(inst, "block", exact=True)
    assert mine.tau_pmf == ref.tau_pmf and mine.block_efficiency == ref.block_efficiency


def test_paths_take_numpy_integers_as_the_lps_do():
    import numpy as np

    from spectheory.runtime.errors import SpectheoryError

    inst = st.random_instance(3, 2, 1, denominator=60)
    ref = st.analyze(inst, "gbv", paths=2, exact=True)
    assert st.analyze(inst, "gbv", paths=np.int64(2), exact=True).tau_pmf == ref.tau_pmf
    for bad in (True, 2.0, np.float64(2), "2", 0, np.int64(0)):
        with pytest.raises(SpectheoryError, match="must be a positive integer"):
            st.analyze(inst, "gbv", paths=bad)
