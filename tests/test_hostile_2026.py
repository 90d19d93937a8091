"""Hostile inputs against the stateful sampling parameters, grammars, grammar-conditional laws,
seed checks, engine ports, adaptive draft lengths, parametric lossy rules, frontier budgets,
check-step options and heterogeneous-vocabulary sizes.

Every case is bad input: refused before any work with one line naming the problem (exit code 2
from the command line, nothing on stdout, no traceback; a `SpectheoryError` from Python). User
code that raises or exits is refused as `UserCodeError`. Classes: NaN / infinite / negative /
huge / string / boolean / fraction-with-zero-denominator values, wrong types, empty lists,
duplicate keys, out-of-vocabulary tokens, mismatched vocabularies, enormous sizes, deeply nested
JSON, unreadable paths, user callables that raise, exit or return garbage.
"""

from __future__ import annotations

import sys
import time
from fractions import Fraction

import numpy as np
import pytest

import spectheory as st
from cli_helpers import refused, run, write
from spectheory.engine import adaptive
from spectheory.inputs.random_instances import random_instance
from spectheory.inputs import grammar_laws as gl
from spectheory.inputs.grammar_engines import llguidance_grammar
from spectheory.inputs.instances import instance_to_dict
from spectheory.inputs.processing import SamplingError, parse_sampling
from spectheory.inputs.stateful import TokenAutomaton
from spectheory.inputs.tokenizers import MAX_WORK, check_hetero_sizes
from spectheory.runtime.errors import (InstanceError, OptionError, SpectheoryError,
                                       UserCodeError)
from spectheory.testing.checks import seeds as sd


def one_line(exc_info, *words):
    msg = str(exc_info.value)
    assert "\n" not in msg, msg
    for w in words:
        assert w in msg, (w, msg)


@pytest.fixture(scope="module")
def inst3():
    """A prefix-dependent V = 3, L = 2 instance with exact rows."""
    return st.random_instance(3, 2, 0, alpha=0.5, denominator=12)


@pytest.fixture
def path3(tmp_path, inst3):
    return write(tmp_path, instance_to_dict(inst3))


# ----------------------------------------------------------------------------- --sampling text

BAD_SAMPLING_TEXT = [
    ("min_tokens=--5,stop_token_ids=0", "min_tokens"),
    ("min_tokens=\u00b2,stop_token_ids=0", "min_tokens"),      # isdigit, but not int()
    ("stop_token_ids=\u00b2", "stop_token_ids"),
    ("logit_bias=\u00b2:1", "logit_bias"),
    ("logit_bias=0:*-inf", "factor"),                           # a factor, not a ban
    ("logit_bias=0:*inf", "factor"),
    ("logit_bias=0:*0", "factor"),
    ("logit_bias=0:*nan", "logit_bias"),
    ("logit_bias=0:nan", "logit_bias"),
    ("logit_bias=0:+inf", "logit_bias"),
    ("logit_bias=0:1/0", "logit_bias"),
    ("logit_bias=0:1;0:2", "twice"),
    ("logit_bias=0", "token:bias"),
    ("logit_bias=:1", "logit_bias"),
    ("logit_bias=-1:1", "logit_bias"),
    ("repetition_penalty=nan", "repetition_penalty"),
    ("repetition_penalty=inf", "repetition_penalty"),
    ("repetition_penalty=-1", "repetition_penalty"),
    ("repetition_penalty=0", "repetition_penalty"),
    ("repetition_penalty=1/0", "repetition_penalty"),
    ("repetition_penalty=1e999", "repetition_penalty"),
    ("repetition_penalty=" + "9" * 5000, "repetition_penalty"),
    ("repetition_penalty=1" + "0" * 500 + "/3", "digits"),
    ("repetition_penalty=True", "repetition_penalty"),
    ("presence_penalty=1e7", "presence_penalty"),
    ("frequency_penalty=-inf", "frequency_penalty"),
    ("min_tokens=1.5,stop_token_ids=0", "min_tokens"),
    ("min_tokens=2", "needs stop_token_ids"),
    ("min_tokens=10000000,stop_token_ids=0", "min_tokens"),
    ("stop_token_ids=-1", "stop_token_ids"),
    ("stop_token_ids=1e3", "stop_token_ids"),
    ("stop_token_ids=99999999999999", "stop_token_ids"),
    ("no_repeat_ngram_size=-1", "no_repeat_ngram_size"),
    ("no_repeat_ngram_size=true", "no_repeat_ngram_size"),
    ("grammar=/nonexistent/grammar.json", "cannot read"),
    ("grammar=/tmp", "grammar"),                                # a directory
    ("grammar=", "grammar"),
    ("temperature=1,temperature=2", "twice"),
    ("repetition_penaltyy=2", "did you mean"),
]


@pytest.mark.parametrize("text,word", BAD_SAMPLING_TEXT)
def test_sampling_text_refused(path3, capsys, text, word):
    refused(*run(["exact", path3, "--verifier", "token", "--sampling", text], capsys), word)


@pytest.mark.parametrize("text", ["min_tokens=--5,stop_token_ids=0",
                                  "min_tokens=\u00b2,stop_token_ids=0", "stop_token_ids=\u00b2",
                                  "logit_bias=\u00b2:1", "no_repeat_ngram_size=\u0663\u00b2"])
def test_sampling_text_refused_from_python(text):
    """argparse turned int()'s ValueError into a usage line; parse_sampling itself raised it."""
    with pytest.raises(SamplingError) as e:
        parse_sampling(text)
    one_line(e, "sampling parameter")


def test_sampling_nul_byte_in_grammar_path():
    with pytest.raises(SamplingError.__mro__[1]) as e:  # a GrammarError or SamplingError
        parse_sampling("grammar=a\x00b")
    one_line(e, "cannot read")


@pytest.mark.parametrize("text,word", [
    ("stop_token_ids=7,min_tokens=1", "outside the vocabulary"),    # out of vocabulary (V = 3)
    ("logit_bias=9:1", "outside the vocabulary"),
    ("logit_bias=0:-inf;1:-inf;2:-inf", "no token of positive probability"),
])
def test_sampling_against_the_instance_refused(path3, capsys, text, word):
    refused(*run(["exact", path3, "--verifier", "token", "--sampling", text], capsys), word)


# ----------------------------------------------------------------------------- mappings (Python)

BAD_SAMPLING_MAPPINGS = [
    {"repetition_penalty": True}, {"repetition_penalty": Fraction(1, 10**5000)},
    {"repetition_penalty": float("nan")}, {"repetition_penalty": np.float32("nan")},
    {"repetition_penalty": 1 + 2j}, {"repetition_penalty": [1]},
    {"presence_penalty": 10**400}, {"min_tokens": 2**70, "stop_token_ids": 0},
    {"min_tokens": float("inf"), "stop_token_ids": 0},
    {"min_tokens": float("nan"), "stop_token_ids": 0}, {"min_tokens": None},
    {"stop_token_ids": [True]}, {"stop_token_ids": [1.0]}, {"stop_token_ids": {1: 2}},
    {"stop_token_ids": [[1]]}, {"stop_token_ids": 3.5},
    {"stop_token_ids": iter(range(3 * 10**6))},
    {"logit_bias": {True: 1}}, {"logit_bias": {0: True}}, {"logit_bias": {0: None}},
    {"logit_bias": [(0,)]}, {"logit_bias": 5}, {"logit_bias": [(0, 1, 2, 3)]},
    {"logit_bias": {0: float("inf")}}, {"logit_bias": {0: "*"}}, {"logit_bias": {"0": "*1/0"}},
    {"logit_bias": [(0, 1), (0, 2)]}, {"logit_bias": [(0, 1, True), (1, 2)]},
    {"logit_bias": [("a", "b")]}, {"logit_bias": "abc"}, {"logit_bias": {0: Fraction(10**7)}},
    {"no_repeat_ngram_size": 2.5}, {"bogus": 1}, {1: 2},
]


@pytest.mark.parametrize("mapping", BAD_SAMPLING_MAPPINGS,
                         ids=[f"m{i}" for i in range(len(BAD_SAMPLING_MAPPINGS))])
def test_sampling_mapping_refused(mapping):
    with pytest.raises(SpectheoryError) as e:
        parse_sampling(mapping)
    one_line(e, "sampling parameter")


# ----------------------------------------------------------------------------- grammars

BAD_GRAMMARS = [
    ({"transitions": [[0, 1], [0]]}, "transitions"),              # ragged
    ({"transitions": []}, "non-empty"), ({"transitions": [[]]}, "non-empty"),
    ({"transitions": 5}, "transitions"), ({"transitions": [[0.0]]}, "next state"),
    ({"transitions": [[True]]}, "next state"), ({"transitions": [[5]]}, "next state"),
    ({"transitions": [[-2]]}, "next state"), ({"transitions": [[[0]]]}, "transitions"),
    ({"transitions": [[0, 1]] * 100_001}, "over the limit"),
    ({"tokens": ["a", "b"], "regex": "("}, "does not compile"),
    ({"tokens": ["a", ""], "regex": "a"}, "empty string"), ({"tokens": [], "regex": "a"}, "tokens"),
    ({"tokens": "ab", "regex": "a"}, "tokens"), ({"tokens": ["a", 1], "regex": "a"}, "tokens"),
    ({"tokens": ["a", "b"], "regex": 5}, "regex must be a string"),
    ({"tokens": ["a", "b"], "regex": "a", "eos": 5}, "eos"),
    ({"tokens": ["a", "b"], "regex": "a", "eos": True}, "eos"),
    ({"tokens": ["a", "b"], "regex": "a", "eos": "1"}, "eos"),
    ({"tokens": ["a", "b"], "regex": "a", "extra": 1}, "keys"),
    ({"engine": "llguidance", "tokens": ["a", "b"], "eos": 1}, "exactly one"),
    ({"engine": "llguidance", "tokens": ["a", "b"], "eos": 1, "regex": "("}, "llguidance"),
    ({"engine": "llguidance", "tokens": ["a", "b"], "eos": 1, "regex": "a", "lark": "x"},
     "exactly one"),
    ({"engine": "llguidance", "tokens": ["a", "b"], "eos": 1, "json_schema": "{not json"},
     "llguidance"),
    ({"engine": "llguidance", "tokens": ["a"] * 5000, "eos": 1, "regex": "a"}, "over the limit"),
    ({"engine": "other", "tokens": ["a"]}, "keys"),
]


@pytest.mark.parametrize("grammar,word", BAD_GRAMMARS,
                         ids=[f"g{i}" for i in range(len(BAD_GRAMMARS))])
def test_grammar_object_refused(grammar, word):
    if grammar.get("engine") == "llguidance":
        pytest.importorskip("llguidance")
    with pytest.raises(SpectheoryError) as e:
        parse_sampling({"grammar": grammar})
    one_line(e, word)


GRAMMAR_FILES = [
    ("nested", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("nested-object", '{"transitions": ' + "[" * 50_000 + "]" * 50_000 + "}", "nested too deeply"),
    ("duplicate-keys", '{"transitions": [[0, 0, 0]], "transitions": [[0, 0, 0]]}', "duplicate"),
    ("huge-integer", '{"transitions": [[' + "9" * 5000 + "]]}", "not a JSON grammar"),
    ("nan", '{"transitions": [[NaN, 0, 0]]}', "NaN"),
    ("empty", "", "not a JSON grammar"),
    ("list", "[1, 2]", "JSON object"),
    ("other-vocabulary", '{"transitions": [[0, 0]]}', "2 tokens"),        # V = 3 instance
    ("dead", '{"transitions": [[-1, -1, -1]]}', "no token of positive probability"),
]


@pytest.mark.parametrize("name,text,word", GRAMMAR_FILES, ids=[g[0] for g in GRAMMAR_FILES])
def test_grammar_file_refused(tmp_path, path3, capsys, name, text, word):
    g = write(tmp_path, text, "g.json")
    refused(*run(["exact", path3, "--verifier", "token", "--sampling", f"grammar={g}"], capsys),
            word)


def test_grammar_file_not_utf8(tmp_path, path3, capsys):
    g = tmp_path / "g.json"
    g.write_bytes(b"\xff\xfe\x00{")
    refused(*run(["exact", path3, "--verifier", "token", "--draft-sampling", f"grammar={g}"],
                 capsys), "not a JSON grammar")


@pytest.mark.parametrize("make,word", [
    (lambda: TokenAutomaton([[0, 0]], vocab_size=3), "the vocabulary 3"),
    (lambda: TokenAutomaton(None), "transitions"),
    (lambda: TokenAutomaton(np.zeros((2, 2))), "next state"),
    (lambda: TokenAutomaton(np.zeros((2, 2, 2), dtype=np.int64)), "S x V"),
    (lambda: llguidance_grammar("ab", 1, regex="a"), "tokens"),
    (lambda: llguidance_grammar(["a", "b"], 1), "exactly one"),
    (lambda: llguidance_grammar(["a", "b"], 2, regex="a"), "eos"),
    (lambda: llguidance_grammar(["a", ""], 0, regex="a"), "at least one character"),
    (lambda: llguidance_grammar(["a", "b"], 1, lark="start: x\nx: ("), "llguidance"),
])
def test_automaton_constructors_refuse(make, word):
    pytest.importorskip("llguidance")
    with pytest.raises(SpectheoryError) as e:
        make()
    one_line(e, word)


# ----------------------------------------------------------------------------- grammar laws


def _phi(value):
    return [np.full(3 ** d, value) for d in range(4)]


GRAMMAR_LAW_CASES = [
    ("validity_levels N = 10^6", lambda i: gl.validity_levels(gl.dyck1(), 3, 10**6),
     "over the limit"),
    ("validity_levels other V", lambda i: gl.validity_levels(gl.dyck1(), 7, 2), "V = 7"),
    ("validity_levels N str", lambda i: gl.validity_levels(gl.dyck1(), 3, "2"), "horizon"),
    ("dyck1 'abc'", lambda i: gl.dyck1("abc"), "depth"),
    ("dyck1 nan", lambda i: gl.dyck1(float("nan")), "depth"),
    ("dyck1 inf", lambda i: gl.dyck1(float("inf")), "depth"),
    ("dyck1 2.7", lambda i: gl.dyck1(2.7), "depth"),
    ("dyck1 True", lambda i: gl.dyck1(True), "depth"),
    ("dyck1 10^9 states", lambda i: gl.dyck1(None, 10**9), "depth"),
    ("dyck2 13", lambda i: gl.dyck2(13), "depth"),
    ("dyck2 'x'", lambda i: gl.dyck2("x"), "depth"),
    ("dyck2 None", lambda i: gl.dyck2(None), "depth"),
    ("future N = 0", lambda i: gl.future_validity(i, gl.dyck1(), 0), "horizon"),
    ("future N = 10^9", lambda i: gl.future_validity(i, gl.dyck1(), 10**9), "over the limit"),
    ("future N = 2.0", lambda i: gl.future_validity(i, gl.dyck1(), 2.0), "horizon"),
    ("future N = True", lambda i: gl.future_validity(i, gl.dyck1(), True), "horizon"),
    ("future V = 5 grammar", lambda i: gl.future_validity(i, gl.dyck2(), 2), "5 tokens"),
    ("future grammar dict", lambda i: gl.future_validity(i, {"transitions": [[0, 0, 0]]}, 2),
     "TokenAutomaton"),
    ("future no eos", lambda i: gl.future_validity(i, TokenAutomaton([[0, 0, 0]]), 2), "eos"),
    ("future complete 'no'", lambda i: gl.future_validity(i, gl.dyck1(), 2, complete="no"),
     "complete"),
    ("future exact 'yes'", lambda i: gl.future_validity(i, gl.dyck1(), 2, exact="yes"), "exact"),
    ("lookahead k = -1", lambda i: gl.lookahead_validity(i, gl.dyck1(), 3, -1), "lookahead"),
    ("lookahead k = 1.0", lambda i: gl.lookahead_validity(i, gl.dyck1(), 3, 1.0), "lookahead"),
    ("masked dead grammar", lambda i: gl.masked_law(i, TokenAutomaton([[-1, -1, -1]]), 2),
     "no token of positive probability"),
    ("conditional: none valid",
     lambda i: gl.grammar_conditional_law(i, TokenAutomaton([[-1, -1, -1]], _eos=2), 2),
     "no sequence"),
    ("tv shapes", lambda i: gl.total_variation(np.ones(3), np.ones(4)), "laws over"),
    ("tv strings", lambda i: gl.total_variation(["a"], ["b"]), "finite numbers"),
    ("tv nan", lambda i: gl.total_variation([np.nan], [0.0]), "finite numbers"),
    ("doob phi 5", lambda i: gl.doob_instance(i, 5, 3), "phi"),
    ("doob phi nan", lambda i: gl.doob_instance(i, _phi(np.nan), 3), "probabilities"),
    ("doob phi -1", lambda i: gl.doob_instance(i, _phi(-1.0), 3), "probabilities"),
    ("doob phi inf", lambda i: gl.doob_instance(i, _phi(np.inf), 3), "probabilities"),
    ("doob phi 'a'", lambda i: gl.doob_instance(i, _phi("a"), 3), "probabilities"),
    ("doob N = 10^6", lambda i: gl.doob_instance(i, _phi(1.0), 10**6), "over the limit"),
    ("doob N = 1 < L + 1", lambda i: gl.doob_instance(i, _phi(1.0), 1), "L + 1"),
    ("doob_law phi nan", lambda i: gl.doob_law(i, _phi(np.nan), 3), "probabilities"),
    ("doob_law phi short", lambda i: gl.doob_law(i, _phi(1.0)[:2], 3), "N + 1"),
    ("doob_law N = 40", lambda i: gl.doob_law(i, _phi(1.0), 40), "over the limit"),
    ("chain bound phi short", lambda i: gl.chain_tv_bound(i, gl.dyck1(), 3, _phi(1.0)[:2]),
     "N + 1"),
    ("chain bound phi nan", lambda i: gl.chain_tv_bound(i, gl.dyck1(), 3, _phi(np.nan)),
     "probabilities"),
    ("conditional instance N = 10^6",
     lambda i: gl.grammar_conditional_instance(i, gl.dyck1(), 10**6), "over the limit"),
]


@pytest.mark.parametrize("label,call,word", GRAMMAR_LAW_CASES,
                         ids=[c[0] for c in GRAMMAR_LAW_CASES])
def test_grammar_laws_refuse(inst3, label, call, word):
    with pytest.raises(SpectheoryError) as e:
        call(inst3)
    one_line(e, word)


# ----------------------------------------------------------------------------- seeds


def _raises(request):
    raise RuntimeError("boom in the step")


def _exits(request):
    sys.exit(3)


def _factory_raises():
    raise ValueError("boom in the factory")


SEED_CASES = [
    ("seeds '123'", dict(seeds="123"), "list of integers"),
    ("seeds 1.5", dict(seeds=[1.5, 2.5]), "list of integers"),
    ("seeds inf", dict(seeds=[float("inf")]), "list of integers"),
    ("seeds nan", dict(seeds=[float("nan")]), "list of integers"),
    ("seeds bool", dict(seeds=[True, False]), "list of integers"),
    ("seeds Fraction", dict(seeds=[Fraction(1, 2)]), "list of integers"),
    ("seeds range(10^9)", dict(seeds=range(10**9)), "over the limit"),
    ("seeds iterator 10^9", dict(seeds=iter(range(10**9))), "over the limit"),
    ("seeds empty", dict(seeds=[]), "non-empty"),
    ("seeds -1", dict(seeds=[-1]), "0..2^62-1"),
    ("seeds 2^62", dict(seeds=[2**62]), "0..2^62-1"),
    ("seeds duplicate", dict(seeds=[1, 1]), "distinct"),
    ("seeds None", dict(seeds=None), "list of integers"),
    ("seeds 5", dict(seeds=5), "list of integers"),
    ("tokens 0", dict(seeds=[1], tokens=0), "tokens"),
    ("tokens 10^9", dict(seeds=[1], tokens=10**9), "tokens"),
    ("tokens 2.0", dict(seeds=[1], tokens=2.0), "tokens"),
    ("schedule bogus", dict(seeds=[1], schedule="bogus"), "schedule"),
    ("instances empty", dict(seeds=[1], instances=[]), "no instances"),
    ("instances 'abc'", dict(seeds=[1], instances="abc"), "Instance"),
    ("sampling temperature -1", dict(seeds=[1], sampling="temperature=-1"), "temperature"),
    ("step raises", dict(seeds=[1], step=_raises), "boom in the step"),
    ("step exits", dict(seeds=[1], step=_exits), "exit"),
    ("plain step raises", dict(seeds=[1], plain=_raises), "boom in the step"),
    ("factory raises", dict(seeds=[1], step=_factory_raises), "boom in the factory"),
    ("not callable step", dict(seeds=[1], step=5), "not a function"),
]


@pytest.mark.parametrize("label,kw,word", SEED_CASES, ids=[c[0] for c in SEED_CASES])
def test_seed_replay_refuses(label, kw, word):
    kw = dict(kw)
    step = kw.pop("step", sd.sample_match_step)
    kw.setdefault("tokens", 2)
    t0 = time.monotonic()
    with pytest.raises(SpectheoryError) as e:
        sd.check_seed_replay(step, **kw)
    assert time.monotonic() - t0 < 10  # refused before a list of 10^9 seeds is built
    one_line(e, word)
    if label.startswith(("step", "plain", "factory")):
        assert isinstance(e.value, UserCodeError)


@pytest.mark.parametrize("kw,word", [(dict(seeds=[1]), "two seeds"),
                                     (dict(seeds=[1, float("inf")]), "list of integers"),
                                     (dict(seeds=range(10**7)), "over the limit")])
def test_batch_invariance_refuses(kw, word):
    with pytest.raises(OptionError) as e:
        sd.check_batch_invariance(sd.sample_match_step, tokens=2, **kw)
    one_line(e, word)


def test_single_instance_is_a_list_of_one(inst3):
    """A single Instance was a TypeError ('not iterable'); it is now the list of it, and the
    kit's own sample-match step replays its stream on it."""
    rep = sd.check_seed_replay(sd.sample_match_step, instances=inst3, seeds=[1, 2], tokens=2)
    assert rep.passed and rep.rows == 2 and rep.compared == 4


# ----------------------------------------------------------------------------- engine ports


def test_ports_refuse_bad_options():
    from spectheory.testing.engines.ports.mistralrs import mistralrs_step
    from spectheory.testing.engines.ports.tgi import tgi_step
    from spectheory.testing.checks.step import check_step

    for step, word in [(lambda r: tgi_step(r, fixed="no"), "fixed"),
                       (lambda r: mistralrs_step(r, version="bogus"), "version")]:
        with pytest.raises(SpectheoryError) as e:
            check_step(step, samples=100)
        one_line(e, word)
    with pytest.raises(SpectheoryError) as e:
        check_step(tgi_step, samples=100, sampling="presence_penalty=1")
    one_line(e, "presence_penalty")


# ----------------------------------------------------------------------------- --stop, rules

BAD_STOP = [("coin(1/0)", "not a number"), ("coin(2)", "above 1"), ("coin(-1)", "non-negative"),
            ("coin(nan)", "non-negative"), ("coin(inf)", "non-negative"), ("coin", "needs"),
            ("never(1)", "takes no parameter"), ("x" * 5000, "not a rule name"),
            ("coin((1/2))", "unknown"), ("", "unknown"), ("coin(0/0)", "not a number"),
            ("coin(\u0660.5)", "non-negative"), ("COIN(1/2)", "unknown"),
            ("target-peek(1e101)", "more than 100 digits; the rules take at most 100"),
            ("coin(1e-999999999)", "more than 100 digits"), ("coin(1e-3/2)", "non-negative"),
            ("coin(1e)", "non-negative"), ("coin(2e-1)x", "unknown")]


@pytest.mark.parametrize("rule,word", BAD_STOP, ids=[f"s{i}" for i in range(len(BAD_STOP))])
def test_stop_rule_refused(path3, capsys, rule, word):
    refused(*run(["exact", path3, "--verifier", "token", "--stop", rule], capsys), word)


def test_stop_option_combinations_refused(path3, capsys):
    refused(*run(["exact", path3, "--verifier", "token", "--stop-aware"], capsys), "--stop")
    refused(*run(["exact", path3, "--verifier", "token", "--stop", "coin(1/2)", "--paths"],
                 capsys), "--paths")


def _rule(value):
    def rule(s, q, p):
        if isinstance(value, BaseException):
            raise value
        if value == "exit":
            sys.exit(1)
        return value
    return rule


@pytest.mark.parametrize("value,exact,word", [
    (ValueError("rule boom"), None, "rule boom"), (SystemExit(1), None, "exit"),
    (float("nan"), False, "finite"), ("x", False, "not a number"), (2.0, False, "[0, 1]"),
    (Fraction(2), True, "[0, 1]"), (0.5, True, "exact mode"), (10**400, False, "not a number"),
    ([0.5, 0.5], False, "not a number")])
def test_user_stopping_rule_refused(inst3, value, exact, word):
    with pytest.raises(UserCodeError) as e:
        adaptive.analyze_adaptive(inst3, "token", _rule(value), exact=exact)
    one_line(e, word)


# ----------------------------------------------------------------------------- lossy names

BAD_RULE_NAMES = ["cascade-opt(1/0)", "cascade-opt(-1/4)", "cascade-opt(nan)", "cascade-opt()",
                  "cascade-opt(1/4", "cascade-opt(1/4)(1/4)", "cascade-opt(" + "1" * 5000 + ")",
                  "cascade-opt(1e400)", "ears()", "ears(nan)", "ears(-1)", "ears(1/0)",
                  "ears(1e400)", "ears(a=1)", "ears(1,2,3,4,5)", "entropy-verify(nan)",
                  "entropy-verify(-1)", "entropy-verify(1/0)", "entropy-verify(inf)",
                  "entropy-verify(,)", "static-ensemble(1/0)", "static-ensemble(3/2)",
                  "static-ensemble(-1/3)", "static-ensemble(nan)", "static-ensemble(True)",
                  "typical-medusa(nan)", "typical-medusa()", "TYPICAL-MEDUSA"]


@pytest.mark.parametrize("name", BAD_RULE_NAMES,
                         ids=[f"r{i}" for i in range(len(BAD_RULE_NAMES))])
def test_lossy_rule_name_refused(path3, capsys, name):
    refused(*run(["exact", path3, "--verifier", name], capsys))


# ----------------------------------------------------------------------------- frontier budgets


@pytest.mark.parametrize("args,word", [
    (["--tv", "1/0"], "divides by zero"), (["--tv", "nan", "--kl", "1"], "--tv"),
    (["--tv", "--1"], "--tv"), (["--tv", "1/2/3"], "--tv"), (["--tv", "\u00bd"], "--tv"),
    (["--kl", "0x1p-3"], "--kl"), (["--tv", "0.5", "--max-sequences", "0"], "--max-sequences"),
    (["--tv", "0.5", "--max-sequences", "-5"], "--max-sequences"),
    (["--tv", "0.5", "--max-sequences", "1.5e0"], "--max-sequences"),
    (["--tv", "0.5", "--max-sequences", "9" * 5000], "--max-sequences")])
def test_frontier_budget_refused(path3, capsys, args, word):
    refused(*run(["lp", path3, "--problem", "frontier", *args], capsys), word)


# ----------------------------------------------------------------------------- check-step


@pytest.fixture
def user_steps(tmp_path, monkeypatch):
    (tmp_path / "hostile_steps.py").write_text(
        "import sys\n"
        "def raises(request): raise RuntimeError('boom in the step')\n"
        "def exits(request): sys.exit(3)\n"
        "def exits0(request): sys.exit(0)\n"
        "notcallable = 5\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("hostile_steps", None)
    return tmp_path


@pytest.mark.parametrize("args,word", [
    (["hostile_steps:raises"], "boom in the step"), (["hostile_steps:exits"], "exit"),
    (["hostile_steps:exits0"], "exit"), (["hostile_steps:notcallable"], "callable"),
    (["hostile_steps:missing"], "missing"), (["no_such_module_xyz:f"], "no_such_module_xyz"),
    (["hostile_steps"], "module:function"),
    (["hostile_steps:raises", "--samples", "0"], "--samples"),
    (["hostile_steps:raises", "--samples", "-1"], "--samples"),
    (["hostile_steps:raises", "--samples", "10000000000000"], "--samples"),
    (["hostile_steps:raises", "--steps", "0"], "--steps"),
    (["hostile_steps:raises", "--steps", "1000000"], "--steps"),
    (["hostile_steps:raises", "--alpha", "nan"], "--alpha"),
    (["hostile_steps:raises", "--alpha", "0"], "--alpha"),
    (["hostile_steps:raises", "--alpha", "1"], "--alpha"),
    (["hostile_steps:raises", "--alpha", "1/0"], "--alpha"),
    (["hostile_steps:raises", "--seed", "-1"], "--seed"),
    (["hostile_steps:raises", "--seed", "9" * 5000], "--seed"),
    (["hostile_steps:raises", "--seed", "1.5"], "--seed"),
    (["hostile_steps:raises", "--instance", "/nonexistent"], "/nonexistent"),
    (["hostile_steps:raises", "--inputs", "bogus"], "--inputs"),
])
def test_check_step_refused(user_steps, capsys, args, word):
    refused(*run(["check-step", *args], capsys), word)


@pytest.mark.parametrize("sampling,word", [("stop_token_ids=5,min_tokens=1", "vocabulary"),
                                           ("logit_bias=5:1", "vocabulary")])
def test_check_step_sampling_against_instance(user_steps, tmp_path, path3, capsys, sampling,
                                              word):
    refused(*run(["check-step", "hostile_steps:raises", "--instance", path3, "--sampling",
                  sampling], capsys), word)


def test_check_step_grammar_other_vocabulary(user_steps, tmp_path, path3, capsys):
    g = write(tmp_path, {"transitions": [[0, 0]]}, "g.json")
    refused(*run(["check-step", "hostile_steps:raises", "--instance", path3, "--sampling",
                  f"grammar={g}"], capsys), "2 tokens")


# ----------------------------------------------------------------------------- hetero sizes


def _hetero(VT, N, VD, L):
    """An instance over 'ab' with VT target and VD draft strings, depth-1 rational rows."""
    def vocab(n):
        v = ["a", "b", "aa", "ab", "ba", "bb", "aaa", "aab", "aba", "abb", "baa", "bab"]
        return v[:n]

    def model(V):
        rows = {"": [f"{1 + i % 3}/{sum(1 + j % 3 for j in range(V))}" for i in range(V)]}
        for c in range(V):
            w = [1 + (i + c) % 4 for i in range(V)]
            rows[str(c)] = [f"{x}/{sum(w)}" for x in w]
        return rows

    return {"alphabet": "ab", "target_vocab": vocab(VT), "draft_vocab": vocab(VD),
            "draft_length": L, "n_tokens": N, "target": model(VT), "draft": model(VD)}


@pytest.mark.parametrize("sizes", [(4, 8, 8, 5), (4, 6, 6, 4), (4, 6, 4, 6), (5, 5, 5, 4)])
def test_hetero_work_over_the_limit_refused(tmp_path, capsys, sizes):
    """Each size passes both enumeration limits (V_D^L and V_T^N at most 200,000) but the emitted
    law evaluates every draft path at every target context: (4, 8, 8, 5) ran past three
    minutes, (4, 6, 6, 4) took 42 s in float. Refused at once, naming the product."""
    path = write(tmp_path, _hetero(*sizes), "h.json")
    t0 = time.monotonic()
    refused(*run(["hetero", path, "--scheme", "slem"], capsys), "draft-path evaluations",
            f"{MAX_WORK:,}")
    assert time.monotonic() - t0 < 5


def test_hetero_work_limit_is_the_product():
    VT, N, VD, L = 3, 6, 5, 4  # 364 contexts x 625 paths = 227,500: accepted
    assert sum(VT ** n for n in range(N)) * VD ** L <= MAX_WORK
    check_hetero_sizes(VT, VD, L, N)
    with pytest.raises(InstanceError) as e:  # one more draft token: 1,137,500
        check_hetero_sizes(VT, VD, L + 1, N)
    one_line(e, "1,137,500 draft-path evaluations")
    with pytest.raises(InstanceError):  # --n-tokens raises the contexts of a stored instance
        check_hetero_sizes(VT, VD, L, N + 1)


# ----------------------------------------------------------------------------- transformers


@pytest.mark.parametrize("kw,word", [
    (dict(seed=-1), "seed"), (dict(seed=2**80), "seed"), (dict(seed=1.5), "seed"),
    (dict(seed="1"), "seed"), (dict(shift=True), "shift"), (dict(shift=2), "shift"),
    (dict(generate_kwargs=[1, 2]), "generate_kwargs"),
    (dict(generate_kwargs="temperature=0"), "generate_kwargs"), (dict(assistant=5), "assistant"),
    (dict(samples=0), "samples"), (dict(samples=10**12), "samples"), (dict(samples=True), "samples"),
    (dict(alpha=float("nan")), "alpha"), (dict(tokens=10**6), "tokens"),
    (dict(max_seconds=float("nan")), "max_seconds"), (dict(instances=[]), "no instances"),
    (dict(instances="abc"), "Instance"), (dict(generate_kwargs={"bogus": 1}), "bogus"),
    (dict(generate_kwargs={"eos_token_id": 99}), "eos_token_id"),
    (dict(generate_kwargs={"temperature": float("nan")}), "temperature")])
def test_check_hf_generate_refuses(inst3, kw, word):
    pytest.importorskip("transformers")
    from spectheory.testing.checks.hf_generate import check_hf_generate

    with pytest.raises(SpectheoryError) as e:
        check_hf_generate(**{"instances": [inst3], "samples": 30, "max_seconds": 60, **kw})
    one_line(e, word)


# ----------------------------------------------------------------------------- generate loops


@pytest.mark.parametrize("field,value,match", [
    ("samples", 0, "samples"), ("samples", True, "samples"), ("samples", 2.0, "samples"),
    ("alpha", 1.0, "alpha"), ("alpha", float("nan"), "alpha"), ("tokens", 0, "tokens"),
    ("seed", -1, "seed"), ("seed", 2**62, "seed"), ("seed", 1.5, "seed"),
    ("max_seconds", True, "max_seconds"), ("max_seconds", 0, "max_seconds"),
    ("max_seconds", float("nan"), "max_seconds"), ("instances", [], "no instances"),
    ("instances", ["x"], "Instance"),
    ("instances", [random_instance(2, 2, 1)] * 11, "fewer than the 11 instances"),
    ("instances", 5, "must be a list of spectheory Instances, not int"),
])
def test_generate_checks_share_one_refusal_of_their_run_arguments(field, value, match):
    """The arguments of `check_hf_generate` and `check_mlx_generate` are refused in one line by
    the one helper both call, before any engine is loaded (so also where transformers or MLX is
    missing): a seed of -1 (which MLX took) and ``max_seconds=True`` (which transformers' check
    took as one second) included."""
    from spectheory.testing.checks.calls import _run_arguments

    args = dict(samples=10, alpha=1e-3, tokens=4, seed=0, max_seconds=None, instances=None)
    args[field] = value
    with pytest.raises(OptionError, match=match) as info:
        _run_arguments(**args, default=lambda: [random_instance(3, 2, 0)], max_samples=100,
                       max_tokens=8)
    assert "\n" not in str(info.value)
    args[field] = {"samples": 10, "alpha": 1e-3, "tokens": 4, "seed": 2**62 - 1,
                   "max_seconds": 0.5, "instances": random_instance(2, 2, 1)}[field]
    insts, per, alpha = _run_arguments(**args, default=lambda: [random_instance(3, 2, 0)],
                                       max_samples=100, max_tokens=8)
    assert len(insts) == 1 and insts[0].vocab_size in (2, 3) and per == [10]
    assert type(alpha) is float and alpha == 1e-3
