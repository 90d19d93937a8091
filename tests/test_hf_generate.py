"""transformers' assisted generation, unmodified, against the exact law
(spectheory.testing.checks.hf_generate).

False alarms: every check runs at alpha = 1e-3 family-wise with a fixed seed, so each verdict on
the released library below is fixed; its chance of being a false alarm is at most 1e-3. Power:
the planted bug (the target reading one token late) is run at a sample count where
`detection_power` against its exact law is >= 0.999 (asserted); the correct runs state the
total-variation bias they detect with 90% power (asserted below a bound). The tests skip, with
the reason, where transformers is not installed.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
import torch

from spectheory.inputs.random_instances import random_instance
from spectheory.runtime.errors import OptionError, SpectheoryError
from spectheory.testing.checks import hf_generate as H
from spectheory.testing.checks.step import detection_power

ALPHA = 1e-3


@pytest.fixture
def hf():
    return pytest.importorskip("transformers", reason="transformers is not installed "
                                                     "(pip install 'spectheory[models]')")


def _stateful_law_available() -> bool:
    from spectheory.inputs.processing import SamplingParams

    return "repetition_penalty" in getattr(SamplingParams, "__dataclass_fields__", {})


def test_without_transformers_the_check_is_refused_in_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers raises
    with pytest.raises(OptionError, match="transformers is not installed"):
        H.check_hf_generate(samples=10)


# ----------------------------------------------------------------------------- the models


def test_model_rows_are_the_law_instance_rows_and_the_cache_is_the_libraries(hf):
    from transformers.cache_utils import DynamicCache

    inst = random_instance(3, 2, 21)
    target, draft, law = H.hf_models(inst)
    V = 3
    full = torch.tensor([[V, 2, 0, 1, 1]])
    logits = target(full).logits[0]  # [5, V+1]
    assert logits.dtype == torch.float32 and logits.shape == (5, V + 1)
    assert torch.isneginf(logits[:, V]).all()  # the prompt id has probability 0
    assert (logits[:, :V] > 0).any() and (logits[:, :V] < 0).any()  # both signs (kit logits)
    probs = torch.softmax(logits.double(), -1)[:, :V].numpy()
    for t in range(5):
        prefix = tuple(full[0, 1:t + 1].tolist())
        np.testing.assert_allclose(probs[t], law.target.conditional(prefix), rtol=0, atol=1e-15)
        np.testing.assert_allclose(law.target.conditional(prefix),
                                   inst.target.conditional(prefix), rtol=0, atol=1e-6)
    # the law's kit logits are the float32 logits the library reads
    lg = H._kit_logits(np.asarray(law.target.tables[2]))
    np.testing.assert_allclose(lg, target.logit_tables[2][:, :V].double().numpy(), rtol=0,
                               atol=1e-12)
    # incremental calls through a DynamicCache, cropped as after a rejection, give the same rows
    cache = DynamicCache()
    a = target(full[:, :3], past_key_values=cache).logits
    cache.crop(-1)  # the last token rejected
    b = target(full[:, 2:], past_key_values=cache).logits
    assert torch.equal(torch.cat([a[:, :2], b], 1), logits.unsqueeze(0))
    with pytest.raises(SpectheoryError, match="outside 0..2"):
        target(torch.tensor([[V, V]]))
    with pytest.raises(SpectheoryError, match="prompt"):
        target(torch.tensor([[0, 1]]))


def test_the_planted_shift_reads_one_token_late(hf):
    inst = random_instance(3, 2, 21)
    target, _, law = H.hf_models(inst, shift=1)
    full = torch.tensor([[3, 2, 0, 1]])
    probs = torch.softmax(target(full).logits[0].double(), -1)[:, :3].numpy()
    late = H.shifted_law_instance(law).target
    for t in range(4):
        prefix = tuple(full[0, 1:t + 1].tolist())
        want = law.target.conditional(prefix[:max(t - 1, 0)])
        np.testing.assert_allclose(probs[t], want, rtol=0, atol=1e-15)
        np.testing.assert_allclose(late.conditional(prefix), want, rtol=0, atol=0)


# ----------------------------------------------------------------------------- the law


def test_stop_cells_replace_what_follows_the_first_stop_token():
    cells = H.stop_cells(2, 3, 0)
    # (1, 0, 1) -> (1, 0, 0); (0, 1, 1) -> (0, 0, 0); (1, 1, 0) stays
    assert cells[0b101] == 0b100 and cells[0b011] == 0b000 and cells[0b110] == 0b110
    assert cells[0b111] == 0b111
    assert list(H.stop_cells(2, 3, None)) == list(range(8))


def test_generate_law_merges_onto_stop_cells(hf):
    inst = random_instance(3, 2, 21)
    _, _, law_inst = H.hf_models(inst)
    full = H.generate_law(law_inst, 3)
    merged = H.generate_law(law_inst, 3, stop=1)
    assert abs(merged.sum() - 1) < 1e-12
    p1 = law_inst.target.conditional(())[1]  # the first token is the stop token
    assert abs(merged[1 * 9 + 1 * 3 + 1] - p1) < 1e-12
    assert merged[1 * 9 + 0 * 3 + 2] == 0  # nothing follows a stop token but itself
    assert abs(full[9:18].sum() - p1) < 1e-12


def test_sampling_of_reads_generate_arguments_and_refuses_the_rest():
    sp, stop = H.sampling_of({"temperature": 0.7, "top_k": 2, "eos_token_id": 1}, 3)
    assert (sp.temperature, sp.top_k, sp.order, stop) == (0.7, 2, "transformers", 1)
    assert H.sampling_of({}, 3) == (None, None)
    assert H.sampling_of({}, 60)[0].top_k == 50  # transformers' default top-k bites past 50 ids
    with pytest.raises(OptionError, match="not modelled"):
        H.sampling_of({"typical_p": 0.9}, 3)
    with pytest.raises(OptionError, match="set by the check"):
        H.sampling_of({"max_new_tokens": 3}, 3)
    with pytest.raises(OptionError, match="eos_token_id"):
        H.sampling_of({"eos_token_id": 3}, 3)  # the prompt id, not a token of the tables


def test_bad_arguments_are_refused_in_one_line(hf):
    for kwargs, match in [({"samples": 0}, "samples"), ({"tokens": 0}, "tokens"),
                          ({"alpha": 1.5}, "alpha"), ({"instances": ["x"]}, "Instance"),
                          ({"tokens": 20}, "over the limit"),
                          ({"assistant": {"num_beams": 2}}, "assistant setting"),
                          ({"samples": 2}, "fewer than two cells")]:
        with pytest.raises(SpectheoryError, match=match):
            H.check_hf_generate(**kwargs)


# ----------------------------------------------------------------------------- the library


def test_released_assisted_generation_is_lossless_over_several_steps(hf):
    # N = 4 tokens, 2 drafts a step: at least two verification steps per sequence
    rep = H.check_hf_generate(samples=500, seed=1)
    assert rep.passed, str(rep)
    assert rep.min_detectable_tv < 0.2
    assert rep.tokens == 4 and rep.assistant["num_assistant_tokens"] == 2


def test_released_assisted_generation_under_temperature_and_a_stop_token(hf):
    rep = H.check_hf_generate(samples=400, seed=2,
                              generate_kwargs={"temperature": 0.7, "eos_token_id": 0})
    assert rep.passed, str(rep)
    assert rep.min_detectable_tv < 0.3


def test_released_assisted_generation_under_repetition_penalty(hf):
    if not _stateful_law_available():
        pytest.skip("the kit's sampling parameters do not model repetition_penalty yet")
    inst = random_instance(3, 2, 21)
    _, _, law_inst = H.hf_models(inst)
    sp, _ = H.sampling_of({"repetition_penalty": 1.3}, 3)
    plain = H.generate_law(law_inst, 4)
    penalised = H.generate_law(law_inst, 4, sp)
    assert 0.5 * np.abs(penalised - plain).sum() > 0.05  # the history changes the law
    rep = H.check_hf_generate(samples=400, seed=3, generate_kwargs={"repetition_penalty": 1.3})
    assert rep.passed, str(rep)


def test_planted_bug_target_one_token_late_fails(hf):
    inst = H.default_instances()[0]
    _, _, law_inst = H.hf_models(inst)
    target = H.generate_law(law_inst, 4)
    bugged = H.generate_law(H.shifted_law_instance(law_inst), 4)
    n = 150
    assert 0.5 * np.abs(bugged - target).sum() > 0.3
    assert detection_power(bugged, target, n, ALPHA) >= 0.999
    rep = H.check_hf_generate(samples=n, seed=4, shift=1)
    assert not rep.passed, str(rep)
    assert rep.p_value < 1e-6


def test_released_assisted_generation_on_ties_and_zeros_under_top_k(hf):
    # rows in multiples of 1/4: ties at the k-th value (kept by both the library and the law)
    # and tokens of probability 0 (-inf logits) in the target and in the draft
    inst = random_instance(3, 2, 2, denominator=4)
    root = np.asarray(inst.target.tables[0][0], dtype=float)
    assert sorted(root) == [0.25, 0.25, 0.5]
    assert any((np.asarray(t, dtype=float) == 0).any() for t in inst.draft.tables)
    rep = H.check_hf_generate(inst, samples=300, seed=5, generate_kwargs={"top_k": 2})
    assert rep.passed, str(rep)


def test_the_library_refusing_its_arguments_is_one_line(hf):
    # an argument the kit's law takes and the library refuses (a temperature of 0, greedy for the
    # kit, is not a strictly positive float for sampling): the library's own refusal, in one line
    with pytest.raises(SpectheoryError, match="generate raised ValueError: `temperature` "
                                              r"\(=0\) has to be a strictly positive") as info:
        H.check_hf_generate(samples=60, generate_kwargs={"temperature": 0})
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("bad", ["two", 0, -1, True, 10**9])
def test_the_draft_length_is_refused_by_its_own_name(bad):
    """The library reads num_assistant_tokens as the assistant's max_new_tokens and would refuse
    -1 under that name; the check names the setting the user gave, before any model is built."""
    with pytest.raises(SpectheoryError, match=r"^num_assistant_tokens = .* must be an integer "
                                              r"in 1\.\.64$"):
        H.check_hf_generate(samples=60, assistant={"num_assistant_tokens": bad})


SETTINGS = [{}, {"temperature": 0.7}, {"top_k": 2}, {"top_p": 0.8}, {"min_p": 0.1},
            {"repetition_penalty": 1.3}, {"no_repeat_ngram_size": 2}]


@pytest.mark.parametrize("kwargs", SETTINGS, ids=lambda k: ",".join(k) or "none")
def test_the_assisted_loop_enumerated_exactly_is_the_target_law(hf, kwargs):
    # the loop's exact law, step by step with L = 2 drafts (k = min(L, N - g - 1)), equals the
    # processed target's N-token law: losslessness of the rule transformers implements
    if set(kwargs) & {"repetition_penalty", "no_repeat_ngram_size"} and \
            not _stateful_law_available():
        pytest.skip("the kit's sampling parameters do not model stateful parameters yet")
    _, _, law_inst = H.hf_models(random_instance(3, 2, 21))
    sp, _ = H.sampling_of(kwargs, 3)
    target = H.generate_law(law_inst, 4, sp)
    np.testing.assert_allclose(H.assisted_law(law_inst, 4, 2, sp), target, rtol=0, atol=1e-14)
    raw = H.assisted_law(law_inst, 4, 2, sp, handed="raw")
    tv = 0.5 * np.abs(raw - target).sum()
    if sp is None:
        assert tv < 1e-14  # raw rows are the sampled rows: no bug to see
    elif "temperature" in kwargs:
        assert tv > 0.05  # the planted raw-q bug's exact bias (power: benchmarks)


@pytest.mark.parametrize("kwargs,words", [
    ({"num_assistant_tokens_schedule": "bogus"}, "num_assistant_tokens_schedule = 'bogus' must be one of"),
    ({"num_assistant_tokens_schedule": None}, "num_assistant_tokens_schedule = None must be one of"),
    ({"assistant_confidence_threshold": float("nan")}, "assistant_confidence_threshold = nan"),
    ({"assistant_confidence_threshold": 1}, "assistant_confidence_threshold = 1 must be"),
    ({"min_new_tokens": -5}, "min_new_tokens = -5 must be an integer in 0..1,000,000"),
    ({"min_new_tokens": 2}, "min_new_tokens = 2 acts only with eos_token_id"),
])
def test_assistant_settings_and_min_new_tokens_are_checked(hf, kwargs, words):
    """A schedule transformers does not have, a NaN confidence threshold and a negative
    min_new_tokens were taken, and a verdict given on them."""
    with pytest.raises(OptionError, match=re.escape(words)):
        H.check_hf_generate(samples=300, generate_kwargs=kwargs)
