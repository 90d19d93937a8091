"""Bad input on the public helpers of the state around the sampler (`spectheory.inputs.stateful`,
`spectheory.inputs.grammar_laws`, ``logit_bias``'s pair and triple forms, `process_rows`), each
refused in one line naming it instead of a raw error, a confident number or the wrong reason:

* a regex grammar whose row of V matches would take past `REGEX_ROW_S` in all is refused from
  its pace (each match stayed under its 1 s bound, and a row of 400 tokens after 20 a's ran for
  a minute unannounced);
* ``logit_bias`` triples take a bool flag only (the string "False" read as true, a factor x2
  where +2 was asked), an entry is a pair or a triple (the string "01" read as (0, 1));
* `apply_exact` refuses the penalties and additive biases (it ignored them and returned the rows
  as given) and rows that are not exact laws (it normalised [-1, 2] to [1, 0]);
* `kit_logits` takes probability rows only (softmax(kit_logits([3, 1])) was [0.75, 0.25]);
* `counts` and `no_repeat_mask` bound V before they allocate [N, V] (72 TiB for V = 10^13);
* the helpers take parsed parameters (`SamplingParams`) and say so for anything else (a raw
  AttributeError before);
* `apply_logits` names a NaN or +inf logit (it blamed the masks);
* `grammar_laws.total_variation` takes laws only (a TV of 5.5 from [-5, 6]); a Doob transform
  whose phi is 0 at the root has no law; `dyck1` names the argument at fault;
* `process_rows` takes numbers, not numeric strings; `TokenAutomaton` refuses a negative
  vocabulary and a string table.
"""

from __future__ import annotations

import time
from fractions import Fraction as F

import numpy as np
import pytest
import torch

import spectheory as st
from spectheory.inputs import grammar_laws as G
from spectheory.inputs import stateful as S
from spectheory.inputs.processing import SamplingError
from spectheory.inputs.processing import SamplingParams as SP
from spectheory.inputs.processing import process_rows
from spectheory.runtime.errors import OptionError


def test_a_regex_row_projected_past_its_bound_is_refused_from_its_pace(monkeypatch):
    monkeypatch.setattr(S, "REGEX_ROW_PROJECT_S", 0.05)
    monkeypatch.setattr(S, "REGEX_ROW_S", 1.0)
    tokens = ["a" * 18] + [f"b{i}" for i in range(2000)]  # ~10 ms a match: ~20 s a row
    slow = S.TokenAutomaton.from_regex("(a|a)*c", tokens, name="slow")
    state = slow.step(np.array([0]), np.array([0]))  # after the 18 a's
    start = time.monotonic()
    with pytest.raises(S.GrammarError, match=r"^slow: regex '\(a\|a\)\*c' would take about "
                                             r"[\d,]+ s to read one row of 2,001 tokens after "
                                             r"the text 'a{18}' .* at most 1 s a row\)"):
        slow.allowed(state)
    assert time.monotonic() - start < 1.5  # stopped from its pace, long before the row's end
    # control: a regex that matches at once reads the same row under the same bounds
    fast = S.TokenAutomaton.from_regex("a*(b[0-9]+)?", tokens, name="fast")
    assert fast.allowed(fast.step(np.array([0]), np.array([0])))[0].sum() == 2001


@pytest.mark.parametrize("bias, why", [
    ([(1, 2, "False")], "has an is_factor flag that is not True or False"),
    ([(1, 2, 0.5)], "has an is_factor flag that is not True or False"),
    ([(1, 2, np.array([1, 1]))], "has an is_factor flag that is not True or False"),
    (["01"], "is not a mapping of token to bias (pairs"),
    ([(0, 1), "12"], "is not a mapping of token to bias (pairs"),
])
def test_logit_bias_entries_are_pairs_or_triples_with_a_bool_flag(bias, why):
    with pytest.raises(SamplingError, match=r"^sampling parameter logit_bias = .*"
                                            + __import__("re").escape(why)):
        SP(logit_bias=bias)


def test_logit_bias_triples_read_as_their_flag_says():
    p = np.array([0.5, 0.25, 0.15, 0.1])
    add = process_rows(p, SP(logit_bias=[(1, 2, False)]), history=[])
    factor = process_rows(p, SP(logit_bias=[(1, 2, True)]), history=[])
    assert add == pytest.approx(process_rows(p, "logit_bias=1:2", history=[]))
    assert factor == pytest.approx(process_rows(p, "logit_bias=1:*2", history=[]))
    assert factor == pytest.approx([0.4, 0.4, 0.12, 0.08])
    w = p * np.exp([0, 2, 0, 0])
    assert add == pytest.approx(w / w.sum())


EXACT = np.array([[F(1, 4), F(3, 4)]], dtype=object)


@pytest.mark.parametrize("sp, name", [
    (SP(repetition_penalty=2), "repetition_penalty"),
    (SP(presence_penalty=3), "presence_penalty"),
    (SP(frequency_penalty=1), "frequency_penalty"),
    (SP(logit_bias={0: 5}), "an additive logit_bias"),
])
def test_apply_exact_refuses_the_steps_that_act_on_logits(sp, name):
    with pytest.raises(OptionError, match=rf"^apply_exact: {name} acts on logits"):
        S.apply_exact(EXACT, sp, np.array([[1]]))


def test_apply_exact_applies_masks_and_factors_exactly():
    out = S.apply_exact(EXACT, SP(logit_bias={0: "*3"}), np.array([[1]]))
    assert list(out[0]) == [F(1, 2), F(1, 2)]  # (3/4, 3/4) renormalised
    out = S.apply_exact(EXACT, SP(no_repeat_ngram_size=1), np.array([[1]]))
    assert list(out[0]) == [F(1), F(0)]  # token 1 seen: banned
    assert list(S.apply_exact([[1, 0]], SP(), None)[0]) == [F(1), F(0)]


@pytest.mark.parametrize("rows, why", [
    ([[-1, 2]], r"probs\[0, 0\] = -1 is negative"),
    ([[0.5, 0.5]], r"probs\[0, 0\] = 0.5 is not an exact rational"),
    ([[F(1, 2), F(1, 3)]], "row 0 sums to 5/6, not 1"),
    ([[True, False]], "is not an exact rational"),
    ([F(1, 2), F(1, 2)], r"rows \[N, V\]"),
])
def test_apply_exact_takes_exact_laws_only(rows, why):
    with pytest.raises(OptionError, match=why):
        S.apply_exact(np.array(rows, dtype=object), SP(no_repeat_ngram_size=1),
                      np.array([[1]]))


@pytest.mark.parametrize("probs, why", [
    (["a"], "of numbers, not <U1"),
    ([], r"with V >= 1, not shape \[0\]"),
    (0.5, r"with V >= 1, not shape \[\]"),
    ([0.0, 0.0], "the row sums to 0"),
    ([3.0, 1.0], "the row sums to 4"),
    ([[0.5, 0.5], [0.75, 0.5]], r"row \[1\] sums to 1.25"),
    ([True, False], "of numbers, not bool"),
    ([0.5, -0.5, 1.0], r"entry \[1\] is -0.5"),
])
def test_kit_logits_takes_probability_rows_only(probs, why):
    with pytest.raises(OptionError, match=why):
        S.kit_logits(probs)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_kit_logits_of_a_law_give_the_law_back(backend):
    p = np.array([[0.75, 0.25, 0.0], [0.2, 0.3, 0.5]])
    x = torch.tensor(p) if backend == "torch" else p
    lg = np.asarray(S.kit_logits(x))
    back = np.exp(lg - lg.max(-1, keepdims=True))
    assert back / back.sum(-1, keepdims=True) == pytest.approx(p, abs=1e-15)
    with pytest.raises(OptionError, match=r"row \[0\] sums to 4"):
        S.kit_logits(torch.tensor([[3.0, 1.0]]) if backend == "torch" else [[3.0, 1.0]])


@pytest.mark.parametrize("call, why", [
    (lambda: S.counts(np.array([[0, 1]]), 10**13), r"^counts: V = 10000000000000 is not an "
                                                   r"integer in 1\.\.1,000,000$"),
    (lambda: S.no_repeat_mask(np.array([[0, 1]]), 10**13, 2), r"^no_repeat_mask: V = "),
    (lambda: S.counts(np.array([[0.5, 1]]), 3), "history must be an integer array"),
    (lambda: S.counts(np.array([0, 1]), 3), r"not int64 of shape \[2\]"),
    (lambda: S.counts(np.array([[0, 1]]), "3"), r"V = '3' is not an integer"),
    (lambda: S.counts(np.array([[0, 3]]), 3), r"history holds token 3, outside 0\.\.2"),
    (lambda: S.check_vocabulary(SP(logit_bias={0: 1}), "3"), r"V = '3' is not an integer"),
    (lambda: S.apply_logits(np.array([[0.0, np.nan, 1.0]]), SP(repetition_penalty=1.2),
                            np.array([[0]])), r"^apply_logits: logit \[0, 1\] is nan"),
    (lambda: S.apply_logits(np.array([[0.0, np.inf, 1.0]]), SP(), np.array([[0]])),
     r"^apply_logits: logit \[0, 1\] is inf"),
    (lambda: S.apply_logits(np.array([["a", "b"]]), SP(), np.array([[0]])),
     "logits must be real numbers, not <U1"),
])
def test_the_stateful_helpers_name_their_bad_arguments(call, why):
    with pytest.raises(OptionError, match=why):
        call()


@pytest.mark.parametrize("call", [
    lambda: S.mask("top_k=2", np.array([[0]]), 3),
    lambda: S.apply_logits(np.array([[0.0, 0.0]]), "repetition_penalty=1.2", np.array([[0]])),
    lambda: S.apply_exact(EXACT, {"no_repeat_ngram_size": 1}, np.array([[1]])),
    lambda: S.check_vocabulary(None, 3),
], ids=["mask", "apply_logits", "apply_exact", "check_vocabulary"])
def test_the_helpers_take_parsed_parameters_and_say_so(call):
    with pytest.raises(OptionError, match="is not SamplingParams .*parse_sampling"):
        call()


def test_counts_of_a_list_and_parsed_parameters():
    from spectheory.inputs.processing import ROW_SUM_TOL, parse_sampling

    assert S.ROW_SUM_TOL == ROW_SUM_TOL  # kit_logits reads rows as the processing does
    assert S.counts([[0, 1, 1]], 3).tolist() == [[1, 2, 0]]
    assert S.mask(parse_sampling("top_k=2"), np.array([[0]]), 3) is None  # no mask among them
    assert S.mask(parse_sampling("no_repeat_ngram_size=1"), [[0]], 3).tolist() == \
        [[False, True, True]]
    x = S.apply_logits(np.array([[1.0, -np.inf, -1.0]]), parse_sampling("repetition_penalty=2"),
                       np.array([[0, 2]]))
    assert x.tolist() == [[0.5, -np.inf, -2.0]]  # x / 2 for x > 0, x * 2 for x < 0


@pytest.mark.parametrize("a, b, why", [
    ([-5, 6], [0.5, 0.5], r"law a has a negative entry \(-5\)"),
    ([0.3, 0.3], [0.5, 0.5], "law a sums to 0.6, not 1"),
    ([0.5, 0.5], [F(1, 3), F(1, 3)], "law b sums to 2/3, not 1"),
    (np.array([F(1, 2), "x"], dtype=object), [0.5, 0.5], "must hold finite numbers"),
])
def test_total_variation_takes_laws_only(a, b, why):
    with pytest.raises(OptionError, match=why):
        G.total_variation(a, b)


def test_total_variation_of_laws():
    assert G.total_variation([F(1, 2), F(1, 2)], [F(1, 3), F(2, 3)]) == F(1, 6)
    assert G.total_variation([0.25, 0.75], [0.75, 0.25]) == pytest.approx(0.5)


def test_a_doob_transform_with_phi_zero_at_the_root_has_no_law():
    inst = st.random_instance(3, 2, 0).to_float()
    with pytest.raises(OptionError, match="phi is 0 on every token of positive target "
                                          "probability after the empty prefix"):
        G.doob_instance(inst, [np.zeros(3 ** d) for d in range(4)], 3)
    same = G.doob_instance(inst, [np.ones(3 ** d) for d in range(4)], 3)  # phi = 1: p itself
    assert np.array_equal(same.target.level(1), inst.target.level(1))
    with pytest.raises(OptionError, match=r"^max_depth_states 1000000000 must be an integer"):
        G.dyck1(None, 10**9)
    with pytest.raises(OptionError, match=r"^depth -1 must be an integer"):
        G.dyck1(-1)


@pytest.mark.parametrize("rows", [["0.5", "0.5"], [True, False], [[0.5, "0.5"]]])
def test_process_rows_takes_numbers_not_text_or_bools(rows):
    with pytest.raises(SamplingError, match="rows must be an array of numbers; they hold"):
        process_rows(rows, "top_k=1")


@pytest.mark.parametrize("table, kw, why", [
    ([[0, 0]], {"vocab_size": -1}, "vocab_size = -1 is not an integer >= 1"),
    ([[0, 0]], {"vocab_size": True}, "vocab_size = True is not an integer >= 1"),
    ("abc", {}, "transitions must be a list of rows .*, not a str"),
    ({0: [0]}, {}, "transitions must be a list of rows .*, not a dict"),
])
def test_a_token_automaton_refuses_a_bad_table_or_vocabulary(table, kw, why):
    with pytest.raises(S.GrammarError, match=why):
        S.TokenAutomaton(table, **kw)


@pytest.mark.parametrize("text,want", [
    ("top_k=2.0", {"top_k": 2}), ("top_k=1e1", {"top_k": 10}), ("top_k=2.", {"top_k": 2}),
    ("no_repeat_ngram_size=2.0", {"no_repeat_ngram_size": 2}),
    ("min_tokens=3.0,stop_token_ids=0", {"min_tokens": 3}),
])
def test_a_count_written_as_a_whole_decimal_is_taken_as_a_mappings_is(text, want):
    """A mapping's {"top_k": 2.0} was top_k = 2 while the string "top_k=2.0" was refused as not
    an integer: a whole-valued decimal literal is now that integer in both."""
    from spectheory.inputs.processing import parse_sampling

    got = parse_sampling(text)
    mapped = parse_sampling({k: float(v) for k, v in want.items()} | (
        {"stop_token_ids": [0]} if "min_tokens" in want else {}))
    for key, value in want.items():
        assert getattr(got, key) == value == getattr(mapped, key)


@pytest.mark.parametrize("text,why", [
    ("top_k=2.5", "is not an integer"), ("top_k=2.0000000000000001", "is not an integer"),
    ("top_k=1e-1", "is not an integer"), ("top_k=.5", "is not an integer"),
    ("top_k=1_0", "is not an integer"), ("top_k=\u0663", "is not an integer"),
    ("min_tokens=2.5,stop_token_ids=0", "is not an integer"),
    ("top_k=1e19", "is out of range"), ("top_k=1e999999999", "is out of range"),
    ("top_k=10000000000000000000", "is out of range"),
    ("top_k=1e1000000000000000000", "is out of range"),
])
def test_a_count_that_is_not_a_whole_decimal_is_refused_by_its_text(text, why):
    from spectheory.inputs.processing import parse_sampling

    with pytest.raises(SamplingError) as err:
        parse_sampling(text)
    value = text.split("=")[1].split(",")[0]
    assert f"= {value!r} {why}" in str(err.value) and "\n" not in str(err.value)
