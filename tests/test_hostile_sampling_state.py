"""Hostile inputs against the sampling state: temperatures beyond the float range, histories
that are not token ids, token automata handed foreign ids or states, penalties that overflow the
float range, regex grammars that backtrack without end, duplicate token strings, the kit's
logits of rows that are not probabilities, stop ids outside the vocabulary, non-ASCII digits and
n-gram sizes below 1.

Each is refused with one line naming the problem and the value (exit code 2 and one stderr line
from the command line, no warning text, no traceback); next to each, the nearest valid input
still gives its value, computed here independently.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from cli_helpers import refused, run, write
from spectheory.inputs.processing import SamplingError, parse_sampling, process_rows
from spectheory.inputs.stateful import GrammarError, TokenAutomaton
from spectheory.runtime.errors import OptionError

P = np.array([0.5, 0.25, 0.25])


def one_line(exc_info, *words):
    msg = str(exc_info.value)
    assert "\n" not in msg, msg
    for w in words:
        assert w in msg, (w, msg)


@pytest.fixture
def inst_path(tmp_path):
    """`spectheory instance random --vocab 3 --block 2 --seed 1 --denominator 60`."""
    import spectheory as st
    from spectheory.inputs.instances import instance_to_dict

    return write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1, denominator=60)))


# ----------------------------------------------------------------------------- histories


@pytest.mark.parametrize("history,words", [
    (["a"], ("token ids", "'a'")),
    ([1.5], ("token ids", "1.5")),          # would be truncated to token 1
    ([[0], [1, 2]], ("token ids",)),        # ragged
])
def test_history_that_is_not_token_ids_is_refused(history, words):
    with pytest.raises(SamplingError) as exc:
        process_rows(P, "repetition_penalty=1.2", history=history)
    one_line(exc, *words)


def test_grammar_history_outside_the_vocabulary_is_refused():
    sp = {"grammar": {"transitions": [[0, 0, 0]]}}
    with pytest.raises(OptionError) as exc:
        process_rows(P, sp, history=np.array([9]))
    one_line(exc, "history holds token 9", "0..2")
    with pytest.raises(OptionError) as exc:
        process_rows(P, sp, history=np.array([-1]))
    one_line(exc, "history holds token -1", "0..2")
    # control: an in-vocabulary history of a list gives the grammar's (all-allowing) row back
    assert process_rows(P, sp, history=[2]).tolist() == [0.5, 0.25, 0.25]
    # and a penalty on a list history: token 0 seen, its logit (positive) divided by 2
    lg = np.log(P) - (np.log(0.5) + np.log(0.25)) / 2
    lg[0] /= 2
    want = np.exp(lg - lg.max()) / np.exp(lg - lg.max()).sum()
    got = process_rows(P, "repetition_penalty=2", history=[0])
    assert np.allclose(got, want, rtol=0, atol=1e-15)


# ----------------------------------------------------------------------------- automata


@pytest.fixture
def g():
    """0 --0--> 1, 0 --2--> 0; 1 --1--> 0, 1 --2--> 1."""
    return TokenAutomaton([[1, None, 0], [None, 0, 1]])


@pytest.mark.parametrize("call,words", [
    (lambda g: g.step(np.array([0]), np.array([7])), ("token 7", "0..2")),
    (lambda g: g.step(np.array([0]), np.array([-1])), ("token -1", "0..2")),
    (lambda g: g.accepts_prefix([5]), ("token 5", "0..2")),
    (lambda g: g.accepts_prefix([-1]), ("token -1", "0..2")),   # wrapped to token 2: True
    (lambda g: g.accepts_prefix([0.5]), ("integer ids",)),
    (lambda g: g.run(np.array([[0.5]])), ("integer ids", "float64")),
    (lambda g: g.run(np.array([[0, -3]])), ("token -3",)),
    (lambda g: g.run(np.array([0, 1])), ("2-D",)),
    (lambda g: g.step(np.array([9]), np.array([0])), ("state 9", "0..1")),
    (lambda g: g.step(np.array([-2]), np.array([0])), ("state -2",)),
    (lambda g: g.step(np.array([0, 1]), np.array([0])), ("2 states and 1 tokens",)),
    (lambda g: g.allowed(np.array([9])), ("state 9", "0..1")),
    (lambda g: g.allowed(np.array([-5])), ("state -5",)),
])
def test_automaton_refuses_foreign_tokens_and_states(g, call, words):
    with pytest.raises(GrammarError) as exc:
        call(g)
    one_line(exc, *words)


def test_automaton_controls(g):
    assert g.accepts_prefix([2]) and g.accepts_prefix([0, 1, 2]) and g.accepts_prefix([])
    assert not g.accepts_prefix([1]) and not g.accepts_prefix([0, 0])
    assert g.step(np.array([0, 1, -1]), np.array([0, 2, 1])).tolist() == [1, 1, -1]
    assert g.run(np.array([[0, 1], [2, 2], [1, 0]])).tolist() == [0, 0, -1]
    assert g.allowed(np.array([0, 1, -1])).tolist() == [[True, False, True],
                                                         [False, True, True],
                                                         [True, True, True]]


# ----------------------------------------------------------------------------- temperature

FLOAT_MAX = Fraction(np.finfo(np.float64).max)


@pytest.mark.parametrize("T", [10**400, Fraction(2**1024 - 1), FLOAT_MAX + 1],
                         ids=["1e400", "2^1024-1", "max+1"])
def test_temperature_beyond_the_float_range_is_refused(T):
    with pytest.raises(SamplingError) as exc:
        process_rows(P, {"temperature": T})
    one_line(exc, "temperature", "beyond the float range")


def test_temperature_beyond_the_float_range_analyze():
    import spectheory as st
    from spectheory.cli.report import toy_instance

    with pytest.raises(SamplingError) as exc:
        st.analyze(toy_instance(exact=False), "token", sampling={"temperature": 10**400})
    one_line(exc, "beyond the float range")


def test_largest_float_temperature_still_works():
    """T = the largest float: p^(1/T) = exp(log p / T), log p / T ~ 1e-308, so the row is
    uniform on its support to the last bit."""
    got = process_rows(np.array([0.5, 0.25, 0.25, 0.0]), {"temperature": FLOAT_MAX})
    assert got.tolist() == [1 / 3, 1 / 3, 1 / 3, 0.0]


def test_temperature_beyond_the_float_range_cli(inst_path, capsys):
    T = f"temperature={2**1024 - 1}/1"
    for extra in ([], ["--exact"]):
        refused(*run(["check", inst_path, "--verifier", "token", "--sampling", T] + extra,
                     capsys), "temperature", "beyond the float range", warnings=False)


# ----------------------------------------------------------------------------- overflow


def test_penalty_overflow_is_named_not_blamed_on_masks():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning either
        with pytest.raises(OptionError) as exc:
            process_rows(np.array([1e308, -1e308, 0.0]), "repetition_penalty=1e-6",
                         inputs="logits", history=np.array([0, 1]))
        one_line(exc, "repetition_penalty = 1e-06", "logit 1e+308 of token 0",
                 "beyond the float range", "overflows to inf")
        assert "mask" not in str(exc.value)
        # every logit of the row pushed below -1.8e308 (x * r): nothing finite is left
        with pytest.raises(OptionError) as exc:
            process_rows(np.array([[-1e308, -1.5e308, -1e308]]), "repetition_penalty=2",
                         inputs="logits", history=np.array([[0, 1, 2]]))
        one_line(exc, "logit -1e+308 of token 0", "overflows to -inf")


def test_penalty_controls_keep_their_values():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # 1e308 / 2 beside -1e308: the first token takes all the mass, exactly
        got = process_rows(np.array([[1e308, -1e308, 0.0]]), "repetition_penalty=2",
                           inputs="logits", history=np.array([[0]]))
        assert got.tolist() == [[1.0, 0.0, 0.0]]
        # one logit pushed below -1.8e308 beside finite ones: its probability is 0 either way
        got = process_rows(np.array([[-1e308, -1.5e308, -1e308]]), "repetition_penalty=2",
                           inputs="logits", history=np.array([[1]]))
        assert got.tolist() == [[0.5, 0.0, 0.5]]
        # huge logits without any penalty: the gap overflows to -inf, exp of it is 0
        got = process_rows(np.array([1e308, -1e308, 0.0]), None, inputs="logits")
        assert got.tolist() == [1.0, 0.0, 0.0]
        # a tiny penalty that stays in range: token 0's kit logit is log(2)/2 > 0, divided by
        # 1e-300 it is ~3.5e299, and the others' (-log(2)/2) stay: a point mass on token 0
        got = process_rows(P, "repetition_penalty=1e-300", history=np.array([0]))
        assert got.tolist() == [1.0, 0.0, 0.0]


def test_penalty_overflow_cli(inst_path, capsys):
    refused(*run(["check", inst_path, "--verifier", "token", "--sampling",
                  "repetition_penalty=1e-308"], capsys),
            "repetition_penalty = 1e-308", "beyond the float range", "overflows to inf",
            warnings=False)


# ----------------------------------------------------------------------------- regex work

REDOS = {"tokens": ["a" * 14, "a" * 16, "b"], "regex": "(a|a)*c"}


def test_backtracking_regex_is_stopped_at_the_bound(monkeypatch):
    """'(a|a)*c' on 28 a's and a b takes 2^28 steps (about a minute); the bound stops it (set
    to 0.05 s here to keep the test short; the command-line case below runs the real one)."""
    import time

    from spectheory.inputs import stateful

    monkeypatch.setattr(stateful, "REGEX_TIMEOUT_S", 0.05)
    g = TokenAutomaton.from_regex(REDOS["regex"], REDOS["tokens"], name="g")
    t0 = time.perf_counter()
    with pytest.raises(GrammarError) as exc:
        g.allowed(g.run(np.array([[0, 0]])))
    assert time.perf_counter() - t0 < 5
    one_line(exc, "g: regex '(a|a)*c'", "took over 0.05 s", "'aaaaaaaaaaaaaaaaaaaaaaaaaaaab'")


def test_linear_regex_over_the_same_tokens_still_works():
    g = TokenAutomaton.from_regex("a*c", REDOS["tokens"])
    assert g.allowed(g.run(np.array([[0, 0], [1, 1], [2, 0]]))).tolist() == [
        [True, True, False], [True, True, False], [True, True, True]]  # (2, 0): rejected


def test_backtracking_regex_cli(inst_path, tmp_path, capsys):
    from spectheory.inputs.stateful import REGEX_TIMEOUT_S

    g = write(tmp_path, REDOS, "g.json")
    refused(*run(["check", inst_path, "--verifier", "token", "--sampling", f"grammar={g}"],
                 capsys), "regex '(a|a)*c'", f"took over {REGEX_TIMEOUT_S:g} s", warnings=False)


# ----------------------------------------------------------------------------- duplicates


def test_duplicate_token_strings_refused_by_the_kits_automaton():
    with pytest.raises(GrammarError) as exc:
        TokenAutomaton.from_regex("a+", ["a", "a", "<e>"], eos=2)
    one_line(exc, "tokens 0 and 1 both spell 'a'")
    with pytest.raises(GrammarError) as exc:  # a token spelling the stop token's string
        TokenAutomaton.from_regex("a+", ["a", "<e>", "<e>"], eos=2)
    one_line(exc, "tokens 1 and 2 both spell '<e>'")


def test_duplicate_token_strings_refused_by_llguidance():
    pytest.importorskip("llguidance")
    from spectheory.inputs.grammar_engines import llguidance_grammar

    with pytest.raises(GrammarError) as exc:
        llguidance_grammar(["a", "a", "<e>"], 2, regex="a+")
    one_line(exc, "tokens 0 and 1 both spell 'a'")


def test_distinct_token_strings_agree_across_engines():
    """The nearest valid vocabulary ("a", "aa", "<e>") under a+: both engines allow both
    tokens at the start and after "a", and the stop token only after a match."""
    pytest.importorskip("llguidance")
    from spectheory.inputs.grammar_engines import llguidance_grammar

    kit = TokenAutomaton.from_regex("a+", ["a", "aa", "<e>"], eos=2)
    eng = llguidance_grammar(["a", "aa", "<e>"], 2, regex="a+")
    H = np.array([[0], [1]])
    want = [[True, True, True], [True, True, True]]
    assert kit.allowed(kit.run(H)).tolist() == want == eng.allowed(eng.run(H)).tolist()
    start = [[True, True, False]]
    assert kit.allowed(np.array([0])).tolist() == start == eng.allowed(np.array([0])).tolist()


def test_duplicate_token_strings_cli(inst_path, tmp_path, capsys):
    pytest.importorskip("llguidance")
    g = write(tmp_path, {"engine": "llguidance", "tokens": ["a", "a", "<e>"], "eos": 2,
                         "regex": "a+"}, "g.json")
    refused(*run(["check", inst_path, "--verifier", "token", "--sampling", f"grammar={g}"],
                 capsys), "tokens 0 and 1 both spell 'a'", warnings=False)


# ----------------------------------------------------------------------------- kit logits


@pytest.mark.parametrize("rows,where,value", [
    (np.array([-0.5, 1.5]), "[0]", "-0.5"),
    (np.array([[0.5, 0.5], [1.0, np.nan]]), "[1, 1]", "nan"),
    (np.array([[0.5, np.inf]]), "[0, 1]", "inf"),
])
def test_kit_logits_refuse_what_is_not_a_probability(rows, where, value):
    import torch

    from spectheory.inputs.stateful import kit_logits

    for x in (rows, torch.as_tensor(rows)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(OptionError) as exc:
                kit_logits(x)
        assert type(exc.value) is OptionError
        one_line(exc, "kit_logits takes probabilities", f"entry {where} is {value}")


def test_kit_logits_control():
    """[0.25, 0.75, 0]: log p shifted by the midpoint of log .75 and log .25, -inf for 0."""
    import torch

    from spectheory.inputs.stateful import kit_logits

    p = np.array([0.25, 0.75, 0.0])
    h = (math.log(0.75) - math.log(0.25)) / 2
    for x in (p, torch.as_tensor(p)):
        got = np.asarray(kit_logits(x)).tolist()
        assert got[2] == -math.inf
        assert abs(got[0] + h) < 1e-15 and abs(got[1] - h) < 1e-15


# ----------------------------------------------------------------------------- stop ids, top_k


def test_stop_ids_outside_the_vocabulary_refused():
    """Stop ids outside the vocabulary are a typo; stop ids without min_tokens do nothing to the
    rows' law (it models no end of generation) and are refused as such."""
    import spectheory as st

    for text in ("min_tokens=1,stop_token_ids=5", "min_tokens=2,stop_token_ids=1;5"):
        with pytest.raises(OptionError) as exc:
            process_rows(P, text)
        one_line(exc, "stop token 5 is outside the vocabulary 0..2")
    for text in ("stop_token_ids=5", "stop_token_ids=1;5"):
        with pytest.raises(OptionError) as exc:
            process_rows(P, text)
        one_line(exc, "act here only with min_tokens")
    inst = st.random_instance(3, 2, 1, denominator=60)
    for kw in ({"sampling": "min_tokens=1,stop_token_ids=7"},
               {"draft_sampling": "min_tokens=1,stop_token_ids=7"}):
        with pytest.raises(OptionError) as exc:
            st.analyze(inst, "token", **kw)
        one_line(exc, "stop token 7 is outside the vocabulary 0..2")


def test_stop_ids_inside_the_vocabulary_controls():
    got = process_rows(P, "min_tokens=1,stop_token_ids=2")
    assert got.tolist() == [0.5 / 0.75, 0.25 / 0.75, 0.0]


def test_stop_ids_outside_the_vocabulary_cli(inst_path, capsys):
    ids = ";".join(str(i) for i in range(15000))
    refused(*run(["check", inst_path, "--verifier", "token", "--sampling",
                  f"min_tokens=1,stop_token_ids={ids}"], capsys),
            "stop token 3 is outside the vocabulary",
            warnings=False)


@pytest.mark.parametrize("text", ["top_k=\u0663", "top_k=1_0", "top_k=+3", "top_k=-",
                                  "top_k=--1"])
def test_top_k_digits_are_ascii(text):
    with pytest.raises(SamplingError) as exc:
        parse_sampling(text)
    one_line(exc, "top_k", "is not an integer")


def test_top_k_controls():
    assert parse_sampling("top_k=-1").top_k is None and parse_sampling("top_k=0").top_k is None
    assert parse_sampling(" top_k = 2 ").top_k == 2
    assert process_rows(P, "top_k=1").tolist() == [1.0, 0.0, 0.0]
    assert process_rows(P, "top_k=2").tolist() == P.tolist()  # the tie at the 2nd value kept


def test_top_k_non_ascii_cli(inst_path, capsys):
    refused(*run(["check", inst_path, "--verifier", "token", "--sampling", "top_k=\u0663"],
                 capsys), "top_k", "is not an integer", warnings=False)


# ----------------------------------------------------------------------------- n-gram masks


@pytest.mark.parametrize("args,words", [
    ((np.array([[0, 1]]), 3, -2), ("n = -2",)),
    ((np.array([[0, 1]]), 3, 0), ("n = 0",)),
    ((np.array([[0, 1]]), 3, 1.5), ("n = 1.5",)),
    ((np.array([[0, 1]]), 0, 2), ("V = 0",)),
    ((np.array([[0, 1]]), True, 2), ("V = True",)),
    ((np.array([[0, -1]]), 3, 2), ("token -1", "0..2")),   # would ban token 2 by wrapping
    ((np.array([[0, 5]]), 3, 2), ("token 5", "0..2")),
    ((np.array([[0.0, 1.0]]), 3, 2), ("integer array",)),
    ((np.array([0, 1]), 3, 2), ("integer array", "[2]")),
])
def test_no_repeat_mask_refuses_bad_sizes_and_tokens(args, words):
    from spectheory.inputs.stateful import no_repeat_mask

    with pytest.raises(OptionError) as exc:
        no_repeat_mask(*args)
    one_line(exc, *words)


def test_no_repeat_mask_controls():
    """History (0, 1, 0): n = 2 bans 1 after the last 0 (the bigram 0 1 occurred); n = 1 bans
    every token seen; n = 3 bans nothing (no trigram starts with the last two tokens 1 0).
    History (2, 2, 2) bans 2 for n = 1, 2, 3. n = 5 is longer than the history plus one:
    nothing is banned."""
    from spectheory.inputs.stateful import no_repeat_mask

    h = np.array([[0, 1, 0], [2, 2, 2]])
    assert no_repeat_mask(h, 3, 2).tolist() == [[True, False, True], [True, True, False]]
    assert no_repeat_mask(h, 3, 1).tolist() == [[False, False, True], [True, True, False]]
    assert no_repeat_mask(h, 3, 3).tolist() == [[True, True, True], [True, True, False]]
    assert no_repeat_mask(h, 3, 5).tolist() == [[True] * 3, [True] * 3]


def test_rows_on_the_meta_device_are_refused():
    import torch

    with pytest.raises(SamplingError, match="meta device have a shape and no values"):
        process_rows(torch.tensor([0.5, 0.5]).to("meta"), "top_k=1")
    kept = process_rows(torch.tensor([0.75, 0.25]), "top_k=1")  # control: on the CPU
    assert kept.tolist() == [1.0, 0.0]


def test_keyed_uniforms_and_grammar_paths_refuse_what_they_cannot_read():
    """``keyed_uniform`` wrapped a negative seed, truncated a fractional one and raised a raw
    OverflowError for a stream of -1 or 2^70; ``load_grammar(5)`` read file descriptor 5 and
    ``load_grammar(None)`` raised a raw TypeError."""
    import torch

    from spectheory.inputs.grammar_engines import load_grammar
    from spectheory.testing.checks.seeds import keyed_uniform

    base = keyed_uniform(torch.tensor([1, 2]), 3, 5)
    assert base.shape == (2,) and bool(((base >= 0) & (base < 1)).all())
    for stream in (-1, 2**20, 2**70, 1.5, True):
        with pytest.raises(OptionError, match=r"^stream = .* must be an integer in 0\.\.1048575$"):
            keyed_uniform(torch.tensor([1, 2]), 3, stream)
    for seeds, why in (([1.5], "float64"), ([-1], "out of range"), (torch.tensor([-3]),
                                                                   "out of range")):
        with pytest.raises(OptionError, match=rf"^seeds must be integers in 0\.\.2\^63-1, not "
                                              rf"{why}$"):
            keyed_uniform(seeds, 0, 1)
    with pytest.raises(OptionError, match="^positions must be integers"):
        keyed_uniform(torch.tensor([1]), -2, 1)
    assert keyed_uniform([2**63 - 1], 0, 2**20 - 1).shape == (1,)
    for path in (None, 5, 2.5):
        with pytest.raises(GrammarError, match=rf"a grammar file is a path, not "
                                               rf"{type(path).__name__}"):
            load_grammar(path)
