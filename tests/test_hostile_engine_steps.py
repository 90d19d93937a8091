"""Bad input on the whole-step checks of released engines (transformers' assisted generation,
MLX-LM) and the seeds checks, each refused in one line instead of a wrong verdict or a raw error:

* a temperature in (0, 1e-5) is refused by name: the kit's law reads it as greedy (vLLM's
  rule) while transformers and MLX-LM sample at it, so the unmodified libraries FAILed (and
  transformers' float32 logits overflow far below it: "probability tensor contains inf");
* numpy scalars reach transformers as Python numbers (``np.int64(2)`` was "not a strictly
  positive integer, but is 2"), and text where transformers takes a number is refused before
  any law is computed;
* `generate_counts`'s assistant settings hold for its own calls only (they stayed on the draft
  model, and the next valid call failed with the last one's error);
* seeds given as a 0-d array are refused (a raw ``len() of unsized object``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spectheory.inputs.instances import instance_from_dict
from spectheory.runtime.errors import OptionError, SpectheoryError

pytest.importorskip("transformers")

from spectheory.testing.checks import hf_generate as H  # noqa: E402

TIE = {"vocab_size": 3, "block_length": 2, "target": [0.4, 0.4, 0.2], "draft": [0.2, 0.3, 0.5]}


@pytest.mark.parametrize("temperature", [1e-6, 9e-6, 1e-39])
def test_hf_a_temperature_the_law_would_read_as_greedy_is_refused(temperature):
    with pytest.raises(OptionError, match=rf"^temperature = {temperature:g} is below 1e-05, "
                                          "which the kit's law reads as greedy"):
        H.check_hf_generate(instance_from_dict(TIE), samples=300, tokens=2,
                            generate_kwargs={"temperature": temperature})


def test_mlx_a_temperature_the_law_would_read_as_greedy_is_refused():
    pytest.importorskip("mlx_lm", reason="mlx-lm is not installed")
    from spectheory.testing.checks import mlx_generate as M

    with pytest.raises(OptionError, match=r"^temp = 1e-06 is below 1e-05, which the kit's law "
                                          r"reads as greedy"):
        M.check_mlx_generate(instance_from_dict(TIE), samples=300, tokens=2,
                             kwargs={"temp": 1e-6})


@pytest.mark.parametrize("kwargs", [{"top_k": np.int64(2)}, {"temperature": np.float32(0.75)}])
def test_hf_numpy_scalars_reach_transformers_as_numbers(kwargs):
    rep = H.check_hf_generate(samples=600, tokens=2, generate_kwargs=kwargs)
    assert rep.passed, str(rep)  # the released library, unmodified
    assert all(type(v) in (int, float) for v in rep.generate_kwargs.values())


@pytest.mark.parametrize("kwargs, words", [
    ({"temperature": "0.5"}, "generate argument temperature = '0.5' must be a number"),
    ({"top_k": 2.0}, "generate argument top_k = 2.0 must be an integer"),
    ({"top_p": True}, "generate argument top_p = True must be a number"),
])
def test_hf_text_or_bools_where_transformers_takes_numbers_are_refused(kwargs, words):
    with pytest.raises(OptionError, match=__import__("re").escape(words)):
        H.check_hf_generate(samples=300, tokens=2, generate_kwargs=kwargs)


def test_hf_generate_counts_puts_the_assistant_settings_back():
    target, draft, _ = H.hf_models(H.default_instances()[0])
    before = draft.generation_config.num_assistant_tokens
    with pytest.raises(SpectheoryError, match="invalid literal for int"):
        H.generate_counts(target, draft, 3, 2, assistant={"num_assistant_tokens": "x"})
    assert draft.generation_config.num_assistant_tokens == before
    assert H.generate_counts(target, draft, 3, 2).sum() == 3  # the next call is not affected
    H.generate_counts(target, draft, 2, 2, assistant={"num_assistant_tokens": 3})
    assert draft.generation_config.num_assistant_tokens == before  # set, then put back


@pytest.mark.parametrize("seeds", [np.array(5), torch.tensor(5), np.array([[1, 2]])],
                         ids=["numpy-0d", "torch-0d", "2d"])
def test_seeds_must_be_a_one_dimensional_list(seeds):
    from spectheory.testing import sample_match_step
    from spectheory.testing.checks.seeds import check_batch_invariance, check_seed_replay

    for check in (check_seed_replay, check_batch_invariance):
        with pytest.raises(OptionError, match=r"seeds must be a list of integers \(a 1-d array\)"):
            check(sample_match_step, seeds=seeds)
    assert check_seed_replay(sample_match_step, seeds=np.array([1, 2])).passed


@pytest.mark.parametrize("call, why", [
    (lambda t, d: H.generate_counts(t, d, float("nan"), 2), r"samples = nan must be an integer"),
    (lambda t, d: H.generate_counts(t, d, -5, 2), r"samples = -5 must be an integer"),
    (lambda t, d: H.generate_counts(t, d, 3, float("nan")), r"tokens = nan must be an integer"),
    (lambda t, d: H.generate_counts(t, d, 3, 2, seed=-1), r"seed = -1 must be an integer"),
    (lambda t, d: H.generate_counts(t, d, 3, 2, generate_kwargs=[1]), "must be a mapping"),
    (lambda t, d: H.generate_counts("t", d, 3, 2), "target = str is not a table model"),
    (lambda t, d: H.generate_counts(t, d, 3, 2, stop=9), r"stop = 9 must be a token id in 0\.\.2"),
    (lambda t, d: H.generate_counts(t, d, 3, 2, assistant={"foo": 1}),
     "assistant setting 'foo' is not one of"),
    (lambda t, d: H.generate_counts(t, d, 3, 2, generate_kwargs={"temperature": 1e-39}),
     "temperature = 1e-39 is below 1e-05"),
    (lambda t, d: H.sampling_of("temperature=0.5", 3), "generate_kwargs must be a mapping"),
    (lambda t, d: H.sampling_of({"temperature": 0.5}, None), "vocab_size = None must be"),
    (lambda t, d: H.stop_cells("3", 2, None), "V = '3' must be an integer"),
    (lambda t, d: H.stop_cells(-3, 2, None), "V = -3 must be an integer"),
    (lambda t, d: H.stop_cells(3, 2, 3), r"stop = 3 must be a token id in 0\.\.2"),
], ids=lambda x: None if callable(x) else str(x)[:20])
def test_the_public_helpers_of_the_hf_check_refuse_bad_arguments(call, why):
    target, draft, _ = H.hf_models(H.default_instances()[0])
    with pytest.raises(OptionError, match=why):
        call(target, draft)
    assert list(H.stop_cells(3, 2, 1)) == [0, 1, 2, 4, 4, 4, 6, 7, 8]  # after 1: 1 from then on
