"""A real grammar engine's masks (llguidance) against automata written independently, and laws
and whole steps under them."""

from __future__ import annotations

import dataclasses
import itertools
import re

import numpy as np
import pytest

import spectheory as st
from spectheory.inputs.processing import SamplingParams
from spectheory.inputs.stateful import GrammarError, TokenAutomaton

llguidance = pytest.importorskip("llguidance")

from spectheory.inputs.grammar_engines import llguidance_grammar  # noqa: E402

TOKENS = ["1", "2", "12", "a", "<eos>"]
JSON_TOKENS = ["{", "}", '"a"', ":", "1", "2", ",", "<eos>"]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
          "additionalProperties": False}
# the schema's language over these tokens, written by hand as a table (state 5: after '}')
JSON_TABLE = [[1, None, None, None, None, None, None, None],
              [None, None, 2, None, None, None, None, None],
              [None, None, None, 3, None, None, None, None],
              [None, None, None, None, 4, 4, None, None],
              [None, 5, None, None, 4, 4, None, None],
              [None] * 8]


def _all_masks(g, V, depth):
    out = []
    for d in range(1, depth + 1):
        H = np.array(list(itertools.product(range(V), repeat=d)), dtype=np.int64)
        out.append(g.allowed(g.run(H)))
    return np.concatenate(out)


@pytest.mark.parametrize("rx", [r"(12|1)*2", r"a(1|2)*a", r"(a|12)+"])
def test_regex_masks_agree_with_the_kits_automaton(rx):
    kit = TokenAutomaton.from_regex(rx, TOKENS, eos=4)
    eng = llguidance_grammar(TOKENS, 4, regex=rx)
    a, b = _all_masks(kit, 5, 5), _all_masks(eng, 5, 5)  # 3,905 histories
    assert a.shape == (3905, 5) and np.array_equal(a, b)
    assert a.sum() > 100  # not a trivially empty comparison


def test_json_schema_masks_agree_with_a_hand_table():
    eng = llguidance_grammar(JSON_TOKENS, 7, json_schema=SCHEMA)
    table = TokenAutomaton(JSON_TABLE)
    H = [(), (0,), (0, 2), (0, 2, 3), (0, 2, 3, 4), (0, 2, 3, 4, 5), (0, 2, 3, 4, 1)]
    for h in H:
        got = eng.allowed(eng.run(np.array([h], dtype=np.int64).reshape(1, len(h))))[0]
        want = table.allowed(table.run(np.array([h], dtype=np.int64).reshape(1, len(h))))[0]
        if h == (0, 2, 3, 4, 1):  # after '}' the engine allows only the stop token
            assert got.tolist() == [False] * 7 + [True]
        else:
            assert got[:7].tolist() == want[:7].tolist(), h


def _engine_step(grammar):
    """vLLM-V1-like step whose masks come from ``grammar`` (per position along the draft path),
    whatever the request says: the engine's own grammar backend."""
    from spectheory.testing.checks.step import vllm_v1_step

    def step(request):
        sp = dataclasses.replace(request.sampling, grammar=grammar)
        return vllm_v1_step(dataclasses.replace(request, sampling=sp))

    return step


def _one_state_step(grammar):
    """TGI's reading (`HeterogeneousNextTokenChooser`): every speculative position masked with
    the FSM state of the context, not of the draft path before it."""
    from spectheory.testing.checks.step import StepRequest, vllm_v1_step

    def step(request):
        n = request.context.shape[1]
        ctx_state = grammar.run(request.context.numpy())

        class OneState(TokenAutomaton):
            def __init__(self):
                self.name, self.vocab_size, self.eos, self._pattern = "one state", 5, 4, None

            def run(self, history):
                return np.array([ctx_state[0]] * history.shape[0]) if history.shape[1] >= n \
                    else grammar.run(history)

            def allowed(self, states):
                return grammar.allowed(states)

        sp = dataclasses.replace(request.sampling, grammar=OneState())
        return vllm_v1_step(dataclasses.replace(request, sampling=sp))

    return step


def test_whole_step_under_engine_masks_against_the_exact_masked_law():
    """alpha = 1e-3. The law: the target masked by the kit's regex automaton; the step: masks
    from llguidance. A step that masks every position with the context's state fails."""
    from spectheory.testing.checks.step import check_step

    rx = r"(1|2|a)(12|1|a)*2?"
    kit = TokenAutomaton.from_regex(rx, TOKENS, eos=4)
    eng = llguidance_grammar(TOKENS, 4, regex=rx)
    insts = [st.random_instance(5, 2, 31), st.random_instance(5, 2, 32, alpha=0.5)]
    sp = SamplingParams(grammar=kit, repetition_penalty=1.3)
    ok = check_step(_engine_step(eng), instances=insts, samples=8000, steps=2, sampling=sp)
    assert ok.passed, ok
    bad = check_step(_one_state_step(eng), instances=insts, samples=8000, steps=2,
                     sampling=sp)
    assert not bad.passed, bad


def test_exact_laws_under_engine_masks():
    rx = r"(a|12)+"
    kit = TokenAutomaton.from_regex(rx, TOKENS, eos=4)
    eng = llguidance_grammar(TOKENS, 4, regex=rx)
    inst = st.random_instance(5, 2, 9, denominator=30)
    a = st.analyze(inst, "block", exact=True, sampling=SamplingParams(grammar=kit))
    b = st.analyze(inst, "block", exact=True, sampling=SamplingParams(grammar=eng))
    assert a.block_efficiency == b.block_efficiency and a.tv_to_target == 0
    assert st.check_lossless("token", inst, exact=True, sampling=SamplingParams(grammar=eng),
                             n_tokens=4).lossless


def test_engine_grammar_refusals():
    with pytest.raises(GrammarError, match="exactly one"):
        llguidance_grammar(TOKENS, 4)
    with pytest.raises(GrammarError, match="eos"):
        llguidance_grammar(TOKENS, 9, regex="a")
    with pytest.raises(GrammarError, match="refused the grammar"):
        llguidance_grammar(TOKENS, 4, regex="(")


def test_engine_grammar_from_json_file(tmp_path):
    import json

    from spectheory.inputs.processing import parse_sampling

    path = tmp_path / "g.json"
    path.write_text(json.dumps({"engine": "llguidance", "tokens": JSON_TOKENS, "eos": 7,
                                "json_schema": SCHEMA}))
    sp = parse_sampling(f"grammar={path}")
    assert sp.grammar.allowed(np.zeros(1, dtype=np.int64)).tolist()[0] == \
        [True] + [False] * 7


@pytest.mark.parametrize("regex", ["c", "ac", "a(c|cc)"])
def test_a_grammar_that_accepts_nothing_is_refused_as_the_kits_own_is(regex):
    """llguidance keeps the stop token in the mask of a state no text can complete (a dead
    grammar ends a generation): a regex no token sequence matches gave a number (the root row
    allowed the stop token only). The stop token is allowed at a complete match only, as in the
    kit's automaton, and both refuse the grammar where the masks leave nothing."""
    import spectheory as st
    from spectheory.inputs.grammar_engines import llguidance_grammar
    from spectheory.inputs.stateful import GrammarError

    inst = st.random_instance(3, 2, 0)
    tokens = ["a", "b", "<eos>"]
    for grammar in (llguidance_grammar(tokens, 2, regex=regex),
                    {"tokens": tokens, "regex": regex, "eos": 2}):
        with pytest.raises(GrammarError, match="the masks leave no token of positive "
                                               "probability after history"):
            st.analyze(inst, "block", sampling={"grammar": grammar})
    for ok in ("a", "ab|b", "(a|b)*"):
        engine = st.analyze(inst, "block", sampling={"grammar": llguidance_grammar(tokens, 2,
                                                                                 regex=ok)})
        kit = st.analyze(inst, "block", sampling={"grammar": {"tokens": tokens, "regex": ok,
                                                              "eos": 2}})
        assert engine.tau_pmf == pytest.approx(kit.tau_pmf, abs=1e-15)


def test_an_llguidance_grammar_file_is_named_in_its_refusals(tmp_path):
    """Two of llguidance's refusals of a grammar file did not say which file."""
    import json

    from spectheory.inputs.grammar_engines import load_grammar

    cases = [({"regex": "a", "lark": 'start: "a"'}, "give exactly one of regex, json_schema or "
                                                     "lark"),
             ({"json_schema": "{not json"}, "llguidance refused the grammar"),
             ({"regex": "a", "eos": 7}, "eos = 7 is not a token id in 0..2")]
    for extra, words in cases:
        path = tmp_path / "g.json"
        path.write_text(json.dumps({"engine": "llguidance", "tokens": ["a", "b", "<e>"],
                                    "eos": 2, **extra}))
        with pytest.raises(GrammarError, match=rf"^grammar '{path}': {re.escape(words)}"):
            load_grammar(str(path))


def test_where_the_grammar_forces_text_llguidance_masks_the_tokens_that_split_it():
    """docs/sampling-params.md: llguidance allows only the token spelling forced text whole,
    the kit's automaton every token that starts it; elsewhere the masks agree."""
    t = ["a", "b", "ab", "<e>"]
    root = np.zeros(1, dtype=np.int64)
    for rx, kit, llg in [("(ab)+", [1, 0, 1, 0], [0, 0, 1, 0]),
                         ("x?(ab)+", [1, 0, 1, 0], [1, 0, 1, 0]),
                         ("(ab)+|ac", [1, 0, 1, 0], [1, 0, 1, 0])]:
        assert TokenAutomaton.from_regex(rx, t, eos=3).allowed(root).astype(int).tolist() == [kit]
        assert llguidance_grammar(t, 3, regex=rx).allowed(root).astype(int).tolist() == [llg]
