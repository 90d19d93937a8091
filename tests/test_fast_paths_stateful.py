"""The fast paths of the stateful processing against the general ones they stand for.

`stateful_step_law` fills its rows a draft-tree level at a time (one `process_rows` call per
parameters and history length) instead of one row at a time; `SamplingParams.stateless` is built
once per object; `apply_logits` counts the history only for the penalties; a grammar's `run`
checks the history once instead of at every step. Each test compares the fast path with the
general one on prefix-dependent rows with ties (`stateful_instance`: rows in twelfths, five
target rows with a tie), bit for bit for floats, and checks that bad input is still refused with
the same line. No statistics: every comparison is exact.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from spectheory.inputs.processing import SamplingParams, keep_mask, process_rows
from spectheory.inputs.random_instances import random_instance
from spectheory.inputs.stateful import GrammarError, TokenAutomaton, apply_logits, kit_logits
from spectheory.testing.mutants import stateful_steps as ss

INST = ss.stateful_instance()
#: A grammar over V = 3 that rejects some histories (state -1), so masks differ by history.
GRAMMAR = TokenAutomaton([[1, 0, -1], [1, -1, 0]], name="two-state")
PARAMS = [SamplingParams(frequency_penalty=1.0), SamplingParams(repetition_penalty=2.0),
          SamplingParams(presence_penalty=0.7, top_k=2), SamplingParams(min_tokens=2,
                                                                       stop_token_ids=(2,)),
          SamplingParams(grammar=GRAMMAR, temperature=0.5),
          SamplingParams(no_repeat_ngram_size=1, top_p=0.6),
          SamplingParams(logit_bias={0: "*1/2", 1: 0.5}, temperature=0),
          SamplingParams(top_k=1), None]


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _specs():
    """Row requests of the enumeration's kind: model histories of length 0..2 with histories
    that are the model history, a shorter or reordered one, or longer (a bug's history)."""
    out = []
    hists = [(), (0,), (2,), (0, 0), (1, 2), (2, 2)]
    for which in ("target", "draft"):
        for mh in hists:
            if which == "draft" and len(mh) > 1:
                continue
            for p in PARAMS:
                for h in {mh, mh[::-1], mh + (1,), mh[:1]}:
                    out.append((which, mh, p, h))
    return out


def test_filled_rows_are_the_rows_computed_one_at_a_time():
    specs = _specs()
    fast, slow = ss._Rows(INST), ss._Rows(INST)
    fast.fill(specs)
    assert len(fast.cache) == len({(w, m, ss._key(p), h) for w, m, p, h in specs})
    for which, mh, p, h in specs:
        key = (which, mh, ss._key(p), h)
        assert _same(fast.cache[key], slow.row(which, mh, p, h)), key


def test_a_group_that_raises_is_left_to_the_one_row_path_and_its_line():
    dead = SamplingParams(grammar=TokenAutomaton([[1, 1, 1], [-1, -1, -1]], name="dead"))
    fast = ss._Rows(INST)
    specs = [("target", (0,), dead, (0,)), ("target", (1,), dead, (1,)),
             ("target", (0,), PARAMS[0], (0,))]
    fast.fill(specs)
    assert ("target", (0,), ss._key(dead), (0,)) not in fast.cache  # the dead group: not filled
    assert ("target", (0,), ss._key(PARAMS[0]), (0,)) in fast.cache  # the other group: filled
    with pytest.raises(GrammarError) as a:
        fast.row("target", (1,), dead, (1,))
    with pytest.raises(GrammarError) as b:
        ss._Rows(INST).row("target", (1,), dead, (1,))
    assert str(a.value) == str(b.value)
    assert "after history (1,) (row 0)" in str(a.value)


@pytest.mark.parametrize("name", ["vmlx-361", "tgi-grammar", "mistralrs-2424", "sglang-28242",
                                  "vllm-42744", "sglang-33643-min-tokens"])
def test_step_law_with_the_level_fill_is_the_law_row_by_row(name, monkeypatch):
    """Rules that sort, freeze, or grow their histories, argmax picks, match and token
    verification; drafts processed by top-p (ties at its boundary in twelfths). Two steps (the
    kept state read), one for vmlx-swift #361 (its two-step law takes seconds)."""
    rep = ss.REPLICAS[name]
    steps = 1 if name == "vmlx-361" else 2
    inst = random_instance(3, 2, 7, denominator=12)  # prefix-dependent, a second instance
    for instance in (INST, inst):
        fast = ss.stateful_step_law(rep.rule, instance, steps, rep.sampling(), "top_p=0.9")
        with monkeypatch.context() as m:
            m.setattr(ss, "_prefetch", lambda *args: None)
            slow = ss.stateful_step_law(rep.rule, instance, steps, rep.sampling(), "top_p=0.9")
        assert _same(fast, slow), name


def test_a_time_limit_inside_the_level_fill_stops_the_law(monkeypatch):
    """The run's clock fires once (SIGALRM raises TimeLimitError where the computation is): a
    limit reached inside the batched fill stops the law there. The fill retries other errors
    row by row, and a retried time limit was lost: the law then ran to its end."""
    from spectheory.runtime.errors import TimeLimitError

    rep = ss.REPLICAS["sglang-33643-min-tokens"]
    real, fired = ss.process_rows, []

    def alarm_once(*args, **kwargs):
        if not fired:
            fired.append(1)
            raise TimeLimitError("time limit of 1 s reached")
        return real(*args, **kwargs)

    monkeypatch.setattr(ss, "process_rows", alarm_once)
    with pytest.raises(TimeLimitError, match="time limit of 1 s reached"):
        ss.stateful_step_law(rep.rule, INST, 1, rep.sampling(), "top_p=0.9")
    assert fired == [1]


def test_stateless_is_built_once_and_is_the_stateless_part():
    sp = SamplingParams(temperature=0.5, top_k=2, top_p=0.9, min_p=0.1, order="transformers",
                        frequency_penalty=1.0, grammar=GRAMMAR)
    first = sp.stateless()
    assert sp.stateless() is first
    assert first == SamplingParams(0.5, 2, 0.9, 0.1, "transformers") and not first.stateful
    twin = SamplingParams(temperature=0.5, top_k=2, top_p=0.9, min_p=0.1, order="transformers",
                          frequency_penalty=1.0, grammar=GRAMMAR)
    assert twin == sp and hash(twin) == hash(sp) and repr(twin) == repr(sp)  # the cache is
    other = dataclasses.replace(sp, temperature=0.25)                         # not a field
    assert other.stateless().temperature == 0.25 and sp.stateless().temperature == 0.5
    assert SamplingParams(top_k=3).stateless().top_k == 3


def _apply_by_hand(lg, mask_rows, sp, hist):
    """The logits processing written out: mask, bias, repetition, frequency and presence."""
    x = np.where(mask_rows, lg, -np.inf) + np.zeros_like(lg)
    for t, v, f in sp.logit_bias:
        if v != -np.inf:
            x[:, t] += math.log(v) if f else float(v)
    c = np.array([[h.count(t) for t in range(lg.shape[1])] for h in hist])
    rep = float(sp.repetition_penalty)
    if rep != 1:
        x = np.where((c > 0) & (x > 0), x / rep, np.where((c > 0) & np.isfinite(x), x * rep, x))
    return x - float(sp.frequency_penalty) * c - float(sp.presence_penalty) * (c > 0)


@pytest.mark.parametrize("sp", [SamplingParams(min_tokens=3, stop_token_ids=(2,)),
                                SamplingParams(presence_penalty=0.5),
                                SamplingParams(frequency_penalty=0.5, logit_bias={1: 2.0}),
                                SamplingParams(repetition_penalty=1.5),
                                SamplingParams(logit_bias={0: "*1/3"})],
                         ids=["mask-only", "presence", "frequency+bias", "repetition", "factor"])
def test_apply_logits_is_the_processing_written_out(sp):
    rows = np.array([np.asarray(INST.target.conditional(h), dtype=np.float64)
                     for h in [(), (0,), (1,), (2,)]])  # prefix-dependent, with ties
    lg = kit_logits(rows)
    hist = [(0, 2), (1, 1), (2, 0), (1, 2)]
    mask_rows = np.ones_like(lg, dtype=bool)
    if sp.min_tokens:
        mask_rows[:, 2] = False
    got = apply_logits(lg, sp, np.array(hist))
    assert _same(got, _apply_by_hand(lg, mask_rows, sp, hist))
    out = apply_logits(np.array([[-0.0, 1.0]]), SamplingParams(min_tokens=1, stop_token_ids=(1,)),
                       None)
    assert out[0, 1] == -np.inf and out[0, 0] == 0 and not np.signbit(out[0, 0])  # x + 0


def test_grammar_run_is_the_steps_one_by_one_and_refuses_the_same_token():
    rng = np.random.default_rng(0)
    h = rng.integers(0, 3, size=(40, 4))
    states = np.zeros(40, dtype=np.int64)
    for j in range(4):
        states = GRAMMAR.step(states, h[:, j])
    assert (GRAMMAR.run(h) == states).all() and (states == -1).any() and (states >= 0).any()
    with pytest.raises(GrammarError, match="token 3 is outside the vocabulary 0..2"):
        GRAMMAR.run(np.array([[0, 3]]))
    with pytest.raises(GrammarError, match="token -1 is outside"):
        GRAMMAR.run(np.array([[-1, 0]]))


def test_rows_summed_once_are_still_refused_in_one_line():
    with pytest.raises(Exception, match="probability row 1 sums to 1.5, not 1 within 1e-05"):
        process_rows(np.array([[0.5, 0.5], [1.0, 0.5]]), "top_k=1")
    with pytest.raises(Exception, match="row 0 has no probability mass"):
        process_rows(np.array([[0.0, 0.0]]), None)
    exact = np.array([[Fraction(1, 3), Fraction(1, 2)]], dtype=object)
    with pytest.raises(Exception, match="probability row 0 sums to 0.8333"):
        process_rows(exact, None)


@pytest.mark.parametrize("sp", [SamplingParams(temperature=0.5, top_k=2, top_p=0.6),
                                SamplingParams(top_p=0.75, min_p=0.4, order="transformers"),
                                SamplingParams(frequency_penalty=0.5, top_k=1),
                                SamplingParams(repetition_penalty=2.0, top_p=0.5)],
                         ids=["temp-topk-topp", "topp-minp", "freq-topk", "rep-topp"])
def test_process_rows_masks_as_the_public_keep_mask_does(sp):
    """process_rows masks its own normalised rows without checking their sums again: the
    result is the public keep_mask (which checks them) applied to the same rows."""
    rows = np.array([np.asarray(INST.target.conditional(h), dtype=np.float64)
                     for h in [(), (0,), (1,), (2,), (0, 1), (2, 2)]])
    hist = np.array([[0], [1], [1], [2], [0], [2]])
    loose = SamplingParams(sp.temperature, order=sp.order,
                           repetition_penalty=sp.repetition_penalty,
                           frequency_penalty=sp.frequency_penalty)
    probs = process_rows(rows, loose, history=hist)
    kept = np.where(keep_mask(probs, sp.stateless()), probs, 0.0)
    assert _same(process_rows(rows, sp, history=hist), kept / kept.sum(-1, keepdims=True))
    for r in (rows, torch.tensor(rows)):
        assert _same(np.asarray(process_rows(r, sp, history=hist)),
                     process_rows(rows, sp, history=hist))


def test_kit_logits_still_refuses_what_is_not_a_probability():
    for bad, what in (([0.5, np.nan], "nan"), ([1.5, -0.5], "-0.5"), ([np.inf, 0.0], "inf")):
        with pytest.raises(Exception, match=f"kit_logits takes probabilities .*is {what}"):
            kit_logits(np.array([bad]))
        with pytest.raises(Exception, match=f"kit_logits takes probabilities .*is {what}"):
            kit_logits(torch.tensor([bad]))
