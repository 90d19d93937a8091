"""Bad inputs of the kit's command lines and Python helpers, each refused by name where before
it gave a traceback (exit 1), a raw error from inside, a verdict on garbage or a silent
acceptance:

* an option written ``--alpha=--``: argparse handed the option an empty list, skipping its type
  and choices (a TypeError from ``float``, exit 1); ``check-step --alpha`` read other scripts'
  digits and ``0.0_1`` through ``float()``;
* ``point_mass_tv(10**400)`` (an OverflowError), ``TableLM(5, ...)`` (an AttributeError),
  ``check_model_rows`` of a list, complex, meta or boolean rows;
* the vLLM port's ``expand_batch_to_tokens`` (a negative repeat, a bare AssertionError),
  ``counter_uniforms`` (a negative domain, a float seed read as its integer part, seeds and
  positions of two lengths), coin samplers handed coins of the wrong shape, NaN or 5.0;
* sampler factories with an unknown method, bug or dtype (a ValueError at the first call that
  the kit blamed on the sampler as user code); ``StepRequest`` seeds and ``num_drafts`` of the
  wrong length, negative or fractional;
* ``row_chi_square`` of cells whose sum overflows (X^2 = 0, p = 1) or all zero (p = 1);
  ``sharp_rows(paths=0)`` (one path); a history handed with no rows or to ``processed`` with
  parameters that read none (not checked); a ``draft_sampling`` that leaves the draft no token
  (blamed on the step); a torch -inf bias and torch stop ids (refused, where numpy's were taken).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import spectheory as st
from spectheory.cli import main
from spectheory.runtime.errors import InputError, OptionError, SpectheoryError
from spectheory.testing.engines import adapters as A


def _cli(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv,option", [
    (["check-step", "spectheory.testing.checks.step:vllm_v1_step", "--alpha=--"], "--alpha"),
    (["check-sampler", "mod:fn", "--samples", "2000", "--tree=--"], "--tree"),
    (["check-sampler", "mod:fn", "--mode=--"], "--mode"),
    (["check-step", "mod:fn", "--sampling=--"], "--sampling"),
    (["exact", "x.json", "--verifier=--"], "--verifier"),
])
def test_an_option_whose_value_is_two_dashes_is_refused_by_name(argv, option, capsys):
    code, out, err = _cli(argv, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"argument {option}: expected a value, got '--'" in err, err


@pytest.mark.parametrize("alpha", ["\u0660.\u0660\u0661", "0.0_1", "abc"])
def test_check_step_reads_alpha_in_ascii_digits_as_check_sampler_does(alpha, capsys):
    for cmd in ("check-step", "check-sampler"):
        code, out, err = _cli([cmd, "spectheory.testing.checks.step:nosuch", "--alpha", alpha],
                              capsys)
        assert code == 2 and f"--alpha = {alpha!r} is not a number in ASCII digits" in err, err


def test_kit_helpers_refuse_what_they_cannot_read():
    from spectheory.inputs.processing import SamplingError, check_model_rows
    from spectheory.testing import TableLM, point_mass_tv

    assert point_mass_tv(10**400) == 0.0 and point_mass_tv(2**999) > 0
    assert point_mass_tv(1000) == pytest.approx(-math.expm1(math.log(0.1) / 1000))
    with pytest.raises(SpectheoryError, match="TableLM takes a TableModel .*not int"):
        TableLM(5, "target")
    for rows, words in (([[0.5, 0.5]], "must be a torch tensor or a numpy array"),
                        (torch.tensor([[0.5 + 0j, 0.5]]), "must hold floats, not torch.complex64"),
                        (torch.zeros((2, 3), device="meta"), "meta tensors"),
                        (torch.tensor([[True, False]]), "must hold floats, not torch.bool"),
                        (np.array([[1, 0]]), "must hold floats, not int64")):
        with pytest.raises(SamplingError) as exc:
            check_model_rows(rows)
        assert words in str(exc.value)
    check_model_rows(np.array([[0.5, 0.5]], dtype=np.float16))  # a float row of any width


def test_engine_port_helpers_refuse_what_the_engines_never_hold():
    e = A.expand_batch_to_tokens
    with pytest.raises(OptionError, match="cu_num_tokens must not decrease"):
        e(torch.tensor([1, 2]), torch.tensor([3, 1]), 3)
    with pytest.raises(OptionError, match="num_tokens = -1 is not the last cumulative count, 2"):
        e(torch.tensor([1, 2]), torch.tensor([1, 2]), -1)
    assert e(torch.tensor([1, 2]), torch.tensor([1, 3]), 3).tolist() == [1, 2, 2]
    c = A.counter_uniforms
    for args, words in ((([1], [0], -1), "domain = -1 must be an integer in [0, 2^64)"),
                        (([1], [0], 2**70), "must be an integer in [0, 2^64)"),
                        (([1], [0], 0.5), "domain = 0.5"),
                        (([1, 2, 3], [0, 1], 0), "seeds [3] and positions [2]"),
                        (("ab", [0], 0), "seeds must be integers [n] (int64), not str"),
                        ((torch.tensor([1.7]), [0], 0), "not torch.float32")):
        with pytest.raises(OptionError) as exc:
            c(*args)
        assert words in str(exc.value), str(exc.value)
    assert c([1, 2], [0, 1], 3).shape == (2,)
    d = torch.zeros(2, 2, dtype=torch.long)
    q, p = torch.full((2, 2, 3), 1 / 3), torch.full((2, 3, 3), 1 / 3)
    for f in (A.vllm_coin_sampler, A.sglang_coin_sampler("token")):
        for u, words in ((torch.rand(2, 1), "takes uniforms [B, L+1] = [2, 3] of floats"),
                         (torch.full((2, 3), math.nan), "uniforms must lie in [0, 1], got nan"),
                         (torch.full((2, 3), 5.0), "uniforms must lie in [0, 1], got 5.0")):
            with pytest.raises(InputError) as exc:
                f(d, q, p, u)
            assert words in str(exc.value), str(exc.value)
        assert f(d, q, p, torch.full((2, 3), 0.5))[0].shape == (2,)


@pytest.mark.parametrize("make,words", [
    (lambda: A.sglang_sampler("nope"), "unknown method 'nope'; choose token or block"),
    (lambda: A.vllm_mrv2_sampler("nope"), "unknown method 'nope'; choose standard or block"),
    (lambda: A.vllm_mrv2_sampler("block", bug="nope"), "unknown bug 'nope'"),
    (lambda: A.vllm_mrv2_sampler("block", dtype="float32"), "must be torch.float32 or"),
    (lambda: A.vllm_mrv2_coin_sampler("x"), "unknown method 'x'"),
])
def test_sampler_factories_refuse_their_arguments_when_built(make, words):
    with pytest.raises(OptionError) as exc:
        make()
    assert words in str(exc.value)


def test_a_hand_built_step_request_checks_seeds_and_draft_counts():
    from spectheory.testing import StepRequest, TableLM

    m = TableLM(st.random_instance(3, 2, 1).target, "t")
    c = torch.zeros((2, 0), dtype=torch.long)
    for kw, words in ((dict(num_drafts=torch.tensor([1, 1, 1])), "num_drafts must be an integer "
                                                                  "tensor [B] = [2]"),
                      (dict(num_drafts=torch.tensor([-1, 2])), "num_drafts must lie in 0..num_"
                                                               "draft = 0..2, got [-1, 2]"),
                      (dict(num_drafts=torch.tensor([0.5, 2.7])), "not torch.float32"),
                      (dict(num_drafts="ab"), "not str"),
                      (dict(seeds=torch.tensor([1, 2, 3])), "seeds must be an integer tensor")):
        with pytest.raises(OptionError) as exc:
            StepRequest(c, m, m, 2, **kw)
        assert words in str(exc.value), str(exc.value)
    StepRequest(c, m, m, 2, seeds=torch.tensor([1, 2]), num_drafts=torch.tensor([0, 2]))


def test_statistics_and_processing_refuse_what_holds_no_law_or_no_history():
    from spectheory.inputs.processing import SamplingError, process_rows
    from spectheory.testing import processed
    from spectheory.testing.designs.sharp import sharp_rows
    from spectheory.testing.statistics.stats import row_chi_square

    with np.errstate(all="raise"):  # no overflow warning either
        huge = row_chi_square(np.array([10, 0]), np.array([1e308, 1e308]), 10)
    assert huge.p_value == row_chi_square(np.array([10, 0]), np.array([0.5, 0.5]), 10).p_value
    assert huge.p_value < 0.002
    with pytest.raises(InputError, match="probs are all zero: no law to test"):
        row_chi_square(np.array([5, 5]), np.array([0.0, 0.0]), 10)
    for paths in (0, False, 0.0):
        with pytest.raises(OptionError, match="paths = "):
            sharp_rows("law", "token", paths=paths)
    with pytest.raises(SamplingError, match=r"history of shape \[5, 2\] does not match rows of "
                                            r"shape \[0, 3\]"):
        process_rows(np.zeros((0, 3)), "no_repeat_ngram_size=1",
                     history=np.zeros((5, 2), dtype=np.int64))
    rows = torch.full((2, 3), 1 / 3)
    for params in ("top_k=1", None):
        for h, words in (("garbage", "history must hold token ids"),
                         (torch.full((5, 1), 99), "history of shape [5, 1] does not match"),
                         (torch.full((2, 1), 9), "")):
            with pytest.raises(OptionError) as exc:  # (SamplingError is one)
                processed(rows, params, history=h)
            assert words in str(exc.value)
        processed(rows, params, history=torch.zeros((2, 1), dtype=torch.long))


def test_draft_sampling_that_leaves_no_token_is_refused_before_the_step_runs():
    from spectheory.testing import check_step
    from spectheory.testing.checks.step import vllm_v1_step
    from spectheory.inputs.stateful import GrammarError

    calls = []

    def step(request):
        calls.append(1)
        return vllm_v1_step(request)

    with pytest.raises(GrammarError, match=r"^instance 0: draft rows \(draft sampling\): the "
                                           r"masks leave no token .*the draft_sampling "
                                           r"parameters leave no law to draft from; the instance "
                                           r"and parameters are at fault, not the step$"):
        check_step(step, instances=[st.random_instance(3, 2, 1)], samples=400,
                   draft_sampling="logit_bias=0:-inf;1:-inf;2:-inf")
    assert calls == []


def test_torch_numbers_are_sampling_values_as_numpy_numbers_are():
    from spectheory.inputs.processing import SamplingParams, parse_sampling

    assert str(SamplingParams(logit_bias={1: torch.tensor(-math.inf)})) == "logit_bias=1:-inf"
    assert str(SamplingParams(logit_bias={1: np.float32(-math.inf)})) == "logit_bias=1:-inf"
    for ids in (torch.tensor([0, 1]), np.array([0, 1])):
        assert str(SamplingParams(min_tokens=1, stop_token_ids=ids)) == \
            "min_tokens=1,stop_token_ids=0;1"
    assert str(SamplingParams(min_tokens=1, stop_token_ids=torch.tensor(1))).endswith("=1")
    for text, words in (("logit_bias=0:-1e400", "is below the lowest float (about -1.8e308)"),
                        ("logit_bias=0:1e400", "is above the largest float (about 1.8e308)")):
        with pytest.raises(OptionError) as exc:
            parse_sampling(text)
        assert words in str(exc.value)


def test_a_history_token_past_int64_is_named_as_given():
    """A uint64 token of 2^63 + 5 was named as -9223372036854775803 (wrapped into int64)."""
    from spectheory.inputs.processing import process_rows

    with pytest.raises(OptionError, match=r"^history holds token 9223372036854775813, outside "
                                          r"0\.\.1$"):
        process_rows(np.array([0.5, 0.5]), "no_repeat_ngram_size=1",
                     history=np.array([2**63 + 5], dtype=np.uint64))
    out = process_rows(np.array([0.5, 0.5]), "no_repeat_ngram_size=1",
                       history=np.array([1], dtype=np.uint8))
    assert out.tolist() == [1.0, 0.0]
