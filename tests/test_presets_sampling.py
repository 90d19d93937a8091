"""Layout presets under sampling parameters, coins pinned through torch.rand / torch.rand_like,
and the TensorRT-LLM and llama.cpp ports (spectheory.testing.engines.engine_sampling,
spectheory.testing.engines.layouts, spectheory.testing.engines.ports).

Law-mode checks run at family-wise false-alarm rate alpha = 1e-3 with fixed seeds (a fixed
verdict); at 1,500 samples on the default instances they detect a TV bias of about 0.11-0.13 in
every row's law with 90% power (the report states it). The planted processing errors (min-p
dropped, top-k ignored, misaligned residuals) put mass on outcomes of probability 0 and are
caught at p-value 0; each failing check below is paired with a passing one on the same rows.
Coin-level checks are exact comparisons: no false alarm, no power statement needed. The default
instances have no tie at a top-k, top-p or greedy boundary (asserted below), so the engines'
``torch.sort`` tie order cannot make a correct engine differ from the reference here.
"""

from __future__ import annotations

import functools
import types

import numpy as np
import pytest
import torch

from spectheory.runtime.errors import InputError, OptionError, UserCodeError
from spectheory.testing.engines import adapters as A
from spectheory.testing.engines import engine_sampling as ES
from spectheory.testing.engines import layouts as Lm
from spectheory.testing.engines.ports import PORT_BUGS, llamacpp, trtllm
from spectheory.testing.checks.sampler import check_sampler, default_instances

transformers = pytest.importorskip("transformers")
from transformers.generation.utils import _speculative_sampling  # noqa: E402

INSTANCES = default_instances()
ZEROS = INSTANCES[2]  # the target has zeros where the draft has mass
CLEAN = [INSTANCES[0], INSTANCES[1], INSTANCES[3]]
SETTINGS = ["temperature=0", "temperature=0.7", "top_k=2", "top_p=0.8", "min_p=0.1"]
SAMPLES = 1_500

PORTS = {  # engine function, preset
    "vllm-v1": (A.vllm_v1_rejection_sample, Lm.VLLM_V1),
    "vllm-mrv2": (A.vllm_mrv2_engine_rejection_sample, Lm.VLLM_MRV2),
    "sglang-chain": (A.sglang_chain_speculative_sampling, Lm.SGLANG_CHAIN),
    "transformers": (_speculative_sampling, Lm.TRANSFORMERS),  # the installed library's own
    "trtllm": (trtllm.process_draft_tokens_rejection_sampling, Lm.TRTLLM),
}
#: (preset, setting) pairs whose engine path does not apply the setting: the check must fail.
DROPS = {("vllm-v1", "min_p=0.1"), ("sglang-chain", "min_p=0.1")}


def _check(name, setting, samples=SAMPLES, instances=None, fn=None):
    f, lay = PORTS[name] if fn is None else (fn, PORTS[name][1])
    s = Lm.engine_sampler(f, lay, sampling=setting)
    rep = check_sampler(s, "token", sampling=setting, samples=samples, instances=instances)
    rep.sampler_name = s.__name__
    return rep


def test_default_instances_have_no_tie_at_a_boundary_of_the_five_settings():
    for setting in SETTINGS:
        for inst in INSTANCES:
            for d in range(inst.block_length + 1):
                rows = torch.tensor(np.asarray(inst.target.level(d), dtype=float))
                assert ES.boundary_ties(rows, setting) == [], (setting, d)


def test_boundary_ties_lists_the_rows_where_sort_order_decides():
    r = torch.tensor([[0.5, 0.25, 0.25, 0.0], [0.4, 0.3, 0.2, 0.1], [0.4, 0.4, 0.2, 0.0]],
                     dtype=torch.float64)
    assert ES.boundary_ties(r, "top_p=0.6") == [(0,)]  # 1/2 + one 1/4 reaches 0.6
    assert ES.boundary_ties(r, "top_k=2") == [(0,)]
    assert ES.boundary_ties(r, "temperature=0") == [(2,)]
    assert ES.boundary_ties(r, None) == []
    assert ES.boundary_ties(r.view(1, 3, 4), "temperature=0") == [(0, 2)]
    # the rows are read at the setting's temperature: (0.6, 0.2, 0.2) at T = 1/2 is (0.818,
    # 0.091, 0.091), whose top-p 0.7 boundary falls after the first token, with no tie there
    assert ES.boundary_ties(torch.tensor([[0.6, 0.2, 0.2]], dtype=torch.float64),
                            "temperature=0.5,top_p=0.7") == []
    # an exact tie at the k-th value is a tie at tol = 0
    assert ES.boundary_ties(torch.tensor([[0.4, 0.3, 0.3]], dtype=torch.float64), "top_k=2",
                            tol=0) == [(0,)]


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("name", sorted(PORTS))
def test_every_preset_under_the_five_settings_in_three_lines(name, setting):
    """The engine's own processing path through its preset: passes where the engine applies the
    setting, fails (an outcome of probability 0 under the processed target) where its speculative
    path drops it (vLLM V1 and SGLang ignore min_p there)."""
    rep = _check(name, setting)
    assert rep.passed is ((name, setting) not in DROPS), str(rep)
    if not rep.passed:
        assert rep.p_value < 1e-6 and "min_p not applied" in rep.sampler_name


def test_a_preset_without_sampling_fails_a_processed_check():
    """Negative control: the preset built without sampling= hands the engine raw rows."""
    for name in ("vllm-v1", "sglang-chain", "trtllm"):
        f, lay = PORTS[name]
        rep = check_sampler(Lm.engine_sampler(f, lay), "token", sampling="top_k=2",
                            samples=SAMPLES)
        assert not rep.passed and rep.p_value < 1e-6, name


def test_v1_runs_the_apply_sampling_constraints_of_the_engine_functions_module():
    """The preset calls the ``apply_sampling_constraints`` that sits next to the engine function
    (so the released one runs with the released rejection_sample): an engine module whose
    constraint function skips top-k is caught; a wrapper that hides the module is refused."""
    g = dict(vars(A))

    def no_top_k(logits, cu, meta):
        return A.apply_sampling_constraints(logits, cu, types.SimpleNamespace(
            **{**vars(meta), "top_k": None}))

    g["apply_sampling_constraints"] = no_top_k
    f = A.vllm_v1_rejection_sample
    broken = types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)
    broken.__kwdefaults__ = f.__kwdefaults__
    rep = _check("vllm-v1", "top_k=2", fn=broken)
    assert not rep.passed and rep.p_value < 1e-6
    assert _check("vllm-v1", "top_k=2", fn=functools.partial(f)).passed

    def hidden(**kw):
        return f(**kw)

    with pytest.raises(OptionError, match="no apply_sampling_constraints .*functools.wraps"):
        Lm.engine_sampler(hidden, Lm.VLLM_V1, sampling="top_k=2")(
            *_rows(0), torch.Generator().manual_seed(0))


def test_transformers_processors_are_the_librarys_warpers_in_its_order():
    from transformers.generation.logits_process import (MinPLogitsWarper,
                                                        TemperatureLogitsWarper,
                                                        TopKLogitsWarper, TopPLogitsWarper)

    sp = ES.parse_sampling("temperature=0.7,top_k=2,top_p=0.8,min_p=0.1,order=transformers")
    kinds = [type(x) for x in ES.transformers_processors(sp)]
    assert kinds == [TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper,
                     MinPLogitsWarper]
    assert list(ES.transformers_processors(ES.parse_sampling("top_p=1"))) == []
    with pytest.raises(OptionError, match="order=transformers"):
        Lm.engine_sampler(_speculative_sampling, Lm.TRANSFORMERS, sampling="top_p=0.8,min_p=0.1")


def test_transformers_greedy_runs_the_inline_argmax_match():
    s = Lm.engine_sampler(_speculative_sampling, Lm.TRANSFORMERS, sampling="temperature=0")
    assert "inline argmax match" in s.__name__
    d = torch.tensor([[1, 0]])
    q = torch.full((1, 2, 3), 1 / 3, dtype=torch.float64)
    p = torch.tensor([[[0.2, 0.5, 0.3], [0.1, 0.2, 0.7], [0.6, 0.3, 0.1]]], dtype=torch.float64)
    tau, y = s(d, q, p, torch.Generator().manual_seed(0))
    assert (int(tau[0]), int(y[0])) == (1, 2)  # 1 is the argmax, 0 is not: emits the argmax 2


def test_sglang_renorm_keeps_ties_at_the_pivot_and_renormalises():
    p = torch.tensor([[0.5, 0.2, 0.2, 0.1], [0.1, 0.6, 0.3, 0.0]], dtype=torch.float32)
    nine = torch.tensor([5 / 9, 2 / 9, 2 / 9, 0.0])
    thirds = torch.tensor([0.0, 2 / 3, 1 / 3, 0.0])
    k = ES.sglang_renorm(p, 2, 1.0)  # the two 0.2 tie at the pivot: both kept
    assert torch.allclose(k[0], nine) and torch.allclose(k[1], thirds)
    t = ES.sglang_renorm(p, None, 0.65)  # ascending cdf reaches 0.35 at 0.2 (row 0), 0.3 (row 1)
    assert torch.allclose(t[0], nine) and torch.allclose(t[1], thirds)
    t = ES.sglang_renorm(p, None, 0.45)  # reaches 0.55 only at the largest
    assert torch.equal(t, torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0]]))


def test_mrv2_block_rule_under_sampling_and_its_draft_temperature():
    """MRV2's kernel divides the draft logits by the request's temperature: the preset stores
    them as T log q, so the q the kernel sees is the q the drafts follow; the block rule passes
    too. Negative control: the preset without sampling= (raw rows, temperature 1) is caught
    against the target processed at T = 0.7."""
    lay = Lm.VLLM_MRV2.with_constants(use_block_verification=True)
    for s in ("temperature=0", "temperature=0.7", "top_p=0.8"):
        rep = check_sampler(Lm.engine_sampler(A.vllm_mrv2_engine_rejection_sample, lay,
                                              sampling=s), "block", sampling=s, samples=SAMPLES)
        assert rep.passed, (s, str(rep))
    rep = check_sampler(Lm.engine_sampler(A.vllm_mrv2_engine_rejection_sample, Lm.VLLM_MRV2),
                        "token", sampling="temperature=0.7", samples=SAMPLES)
    assert not rep.passed and rep.p_value < 1e-6


def test_layouts_without_a_path_refuse_sampling_in_one_line():
    with pytest.raises(OptionError, match="names no processing path"):
        Lm.engine_sampler(A.vllm_v1_rejection_sample, Lm.VLLM_V1.replace(processing=None),
                          sampling="top_k=2")
    with pytest.raises(OptionError, match="topk"):
        Lm.engine_sampler(A.vllm_v1_rejection_sample, Lm.VLLM_V1, sampling="topk=2")


# ----------------------------------------------------------------------------- pinned coins


def test_the_kit_finds_transformers_zero_coin_acceptance_by_itself():
    """The installed transformers' ``_speculative_sampling`` draws its coins with
    ``torch.rand_like``; pinned there, the kit's smallest coin becomes the engine's 0 and
    ``r <= p/q`` accepts a draft of target probability 0 (the class of SGLang #35771)."""
    s = Lm.engine_coin_sampler(_speculative_sampling, Lm.TRANSFORMERS)
    rep = check_sampler(s, "token", mode="coins-tau", samples=2_000)
    m = rep.mismatch
    assert not rep.passed and m.differs == "tau" and m.got[0] > m.expected[0]
    assert m.threshold == 0.0 and m.engine_threshold == 0.0 and m.engine_coin == 0.0
    assert "engine side: u <= p/q with p/q = 0.0 and u = 0.0 (float32): accept" in str(rep)
    # everything else agrees coin for coin: the instances without zero-probability drafts pass
    assert check_sampler(s, "token", instances=CLEAN, mode="coins-tau", samples=2_000).passed
    assert torch.rand is not None and torch.rand.__module__ == "torch"


@pytest.mark.parametrize("name", ["trtllm", "llama.cpp"])
def test_new_ports_take_pinned_coins_and_share_the_zero_coin_flaw(name):
    fn = {"trtllm": trtllm.process_draft_tokens_rejection_sampling,
          "llama.cpp": llamacpp.verify}[name]
    s = Lm.engine_coin_sampler(fn, name)
    assert check_sampler(s, "token", instances=CLEAN, mode="coins-tau", samples=1_500).passed
    rep = check_sampler(s, "token", instances=[ZEROS], mode="coins-tau", samples=500)
    assert not rep.passed and rep.mismatch.engine_coin == 0.0
    assert rep.mismatch.engine_threshold == 0.0


def test_pinned_torch_coins_are_restored_and_miscounted_draws_refused():
    saved = torch.rand, torch.rand_like
    d, q, p = _rows(1)
    u = torch.full((d.shape[0], d.shape[1] + 1), 0.5, dtype=torch.float64)

    def two_draws(candidate_input_ids, candidate_logits, candidate_length, new_logits):
        torch.rand_like(candidate_logits[0, :, 0])
        torch.rand(1)  # one more than the drafts
        return candidate_input_ids[:, -1:], 0

    with pytest.raises(Lm.EngineOutputError, match="drew 4 uniforms .* pins 3"):
        Lm.engine_coin_sampler(two_draws, Lm.TRANSFORMERS)(d, q, p, u)
    assert (torch.rand, torch.rand_like) == saved

    def no_draw(candidate_input_ids, candidate_logits, candidate_length, new_logits):
        return candidate_input_ids[:, -1:], 0

    with pytest.raises(Lm.EngineOutputError, match="never called torch.rand_like"):
        Lm.engine_coin_sampler(no_draw, Lm.TRANSFORMERS)(d, q, p, u)

    def raises(**kw):
        torch.rand_like(kw["candidate_logits"][0, :, 0])
        raise RuntimeError("boom")

    with pytest.raises(UserCodeError, match="boom"):
        Lm.engine_coin_sampler(raises, Lm.TRANSFORMERS)(d, q, p, u)
    assert (torch.rand, torch.rand_like) == saved


# ----------------------------------------------------------------------------- new ports


@pytest.mark.parametrize("fn,lay", [(trtllm.process_draft_tokens_rejection_sampling, Lm.TRTLLM),
                                    (llamacpp.verify, Lm.LLAMA_CPP)])
def test_new_ports_pass_law_mode(fn, lay):
    rep = check_sampler(Lm.engine_sampler(fn, lay), "token", instances=CLEAN, samples=2_500)
    assert rep.passed and rep.min_detectable_tv < 0.1, str(rep)


@pytest.mark.parametrize("bug", PORT_BUGS)
@pytest.mark.parametrize("name", ["trtllm", "llama.cpp"])
def test_new_ports_planted_bugs_are_caught(name, bug):
    """coins-tau on the instances without zero-probability drafts (exact, where the correct port
    passes): a changed acceptance shows in tau, a wrong correction row as a token of reference
    probability 0."""
    fn = {"trtllm": trtllm.process_draft_tokens_rejection_sampling,
          "llama.cpp": llamacpp.verify}[name]
    s = Lm.engine_coin_sampler(functools.partial(fn, bug=bug), name)
    rep = check_sampler(s, "token", instances=CLEAN, mode="coins-tau", samples=800)
    assert not rep.passed
    if (name, bug) == ("trtllm", "target-row"):
        # on the third instance this port builds an all-zero residual and torch.multinomial
        # raises: the mismatches already found stand, and the report says what happened next
        assert any("then, on instance 2" in n and "raised RuntimeError" in n for n in rep.notes)
    want = {"correction-from-p": {"Y outside the support"}, "residual-row":
            {"Y outside the support"}, "coin-compare": {"tau"},
            # llama.cpp's port reads the late row for the residual too: either shows first
            "target-row": {"tau"} if name == "trtllm" else {"tau", "Y outside the support"}}[bug]
    assert rep.mismatch.differs in want


def test_llama_cpp_residual_is_misaligned_when_candidate_lists_differ():
    """examples/speculative/speculative.cpp subtracts the draft's candidates from the target's
    position by position after sorting both by token id: right when both lists hold the same
    tokens (full rows: law mode passes above), wrong when a zero (a token a sampler dropped)
    sits in one list and not the other, as on the instance with zeros and under top-k."""
    s = Lm.engine_sampler(llamacpp.verify, Lm.LLAMA_CPP)
    rep = check_sampler(s, "token", instances=[ZEROS], samples=SAMPLES)
    assert not rep.passed and rep.p_value < 1e-6
    rep = check_sampler(Lm.engine_sampler(llamacpp.verify, Lm.LLAMA_CPP, sampling="top_k=2"),
                        "token", sampling="top_k=2", instances=CLEAN, samples=SAMPLES)
    assert not rep.passed and rep.p_value < 1e-6
    ok = check_sampler(Lm.engine_sampler(llamacpp.verify, Lm.LLAMA_CPP,
                                         sampling="temperature=0.7"),
                       "token", sampling="temperature=0.7", instances=CLEAN, samples=SAMPLES)
    assert ok.passed, str(ok)


# ----------------------------------------------------------------------------- friction


def _rows(seed, B=3, L=3, V=4):
    g = torch.Generator().manual_seed(seed)
    q = torch.rand(B, L, V, generator=g, dtype=torch.float64) + 0.05
    p = torch.rand(B, L + 1, V, generator=g, dtype=torch.float64) + 0.05
    q, p = q / q.sum(-1, keepdim=True), p / p.sum(-1, keepdim=True)
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(B, L)
    return d, q, p


def test_a_wrapped_engine_function_keeps_its_coin_hook():
    """V1's coin hook replaces ``generate_uniform_probs`` in the engine's module, found through
    ``functools.wraps`` and ``functools.partial`` chains; a wrapper that hides the engine is
    refused in one line saying how to write one."""
    f = A.vllm_v1_rejection_sample

    @functools.wraps(f)
    def logged(*args, **kwargs):
        return f(*args, **kwargs)

    for fn in (logged, functools.partial(logged), functools.wraps(logged)(
            lambda *a, **k: logged(*a, **k))):
        rep = check_sampler(Lm.engine_coin_sampler(fn, Lm.VLLM_V1), "token", instances=CLEAN,
                            samples=600, mode="coins-tau")
        assert rep.passed, str(rep)

    def hidden(**kw):
        return f(**kw)

    d, q, p = _rows(0)
    u = torch.full((3, 4), 0.5, dtype=torch.float64)
    with pytest.raises(OptionError, match=r"not a module-level name .*functools.wraps"):
        Lm.engine_coin_sampler(hidden, Lm.VLLM_V1)(d, q, p, u)
    assert A.generate_uniform_probs.__name__ == "generate_uniform_probs"


def test_layout_replace_refuses_an_unknown_field_in_one_line():
    with pytest.raises(OptionError) as e:
        Lm.VLLM_V1.replace(bogus=1)
    msg = str(e.value)
    assert "\n" not in msg and "'bogus'" in msg and "coin_hook" in msg and "processing" in msg
    assert Lm.VLLM_V1.replace(dtype="float64").dtype == "float64"
    with pytest.raises(OptionError, match="coin_source"):
        Lm.VLLM_V1.replace(coin_source="numpy.random")


def test_the_wrong_sampler_kind_is_refused_in_one_line():
    coin = Lm.engine_coin_sampler(A.vllm_v1_rejection_sample, Lm.VLLM_V1)
    d, q, p = _rows(2)
    with pytest.raises(OptionError, match="takes uniforms \\[B, L\\+1\\].*engine_sampler"):
        coin(d, q, p, torch.Generator().manual_seed(0))
    # a coin sampler in law mode: refused by check_sampler by its parameter name (InputError)
    with pytest.raises(InputError, match="takes 'uniforms' .*coin-driven sampler.*mode 'law'"):
        check_sampler(coin, "token", samples=200)
    with pytest.raises(OptionError, match="already a coin-driven sampler"):
        Lm.engine_coin_sampler(coin, Lm.VLLM_V1)
    law = Lm.engine_sampler(A.vllm_v1_rejection_sample, Lm.VLLM_V1)  # a law sampler, coins mode
    with pytest.raises(InputError, match="takes a 'generator' .*law sampler.*mode 'coins-tau'"):
        check_sampler(law, "token", samples=200, mode="coins-tau")
    # called directly with uniforms, the law sampler itself refuses in one line
    with pytest.raises(OptionError, match="takes a torch.Generator, got Tensor.*engine_coin"):
        law(d, q, p, torch.rand(d.shape[0], d.shape[1] + 1, dtype=torch.float64))


def test_presets_by_new_names_and_conventions():
    assert Lm.get_layout("llama_cpp") is Lm.LLAMA_CPP and Lm.get_layout("TRTLLM") is Lm.TRTLLM
    assert (Lm.TRTLLM_COINS.smallest, Lm.TRTLLM_COINS.largest) == (0.0, 1.0 - 2.0**-24)
    assert (Lm.LLAMA_CPP_COINS.smallest, Lm.LLAMA_CPP_COINS.largest) == (0.0, 1.0)
    assert "coin_source='torch.rand'" in Lm.describe(Lm.TRTLLM)


def test_coin_checks_under_sampling_parameters():
    """Coins under a processed target: SGLang's strict ``coin * q < p`` agrees with the reference
    decision for decision under top-k = 2 (coins mode, the final token included); under the same
    top-k the target has zeros on every instance, so transformers' ``r <= p/q`` shows its coin-0
    acceptance on the instances that had none before."""
    s = Lm.engine_coin_sampler(A.sglang_chain_speculative_sampling, Lm.SGLANG_CHAIN,
                               sampling="top_k=2")
    rep = check_sampler(s, "token", sampling="top_k=2", mode="coins", samples=1_000)
    assert rep.passed, str(rep)
    h = Lm.engine_coin_sampler(_speculative_sampling, Lm.TRANSFORMERS, sampling="top_k=2")
    rep = check_sampler(h, "token", sampling="top_k=2", instances=CLEAN, mode="coins-tau",
                        samples=1_000)
    assert not rep.passed and rep.mismatch.engine_coin == 0.0


def test_trtllm_late_row_port_raising_is_one_line():
    """The same planted bug on the instance where its residual row is all zero alone: the port's
    torch.multinomial raises before any decision differed, and the check refuses in one line
    naming the engine function."""
    from spectheory.runtime.errors import UserCodeError

    s = Lm.engine_coin_sampler(functools.partial(trtllm.process_draft_tokens_rejection_sampling,
                                                 bug="target-row"), "trtllm")
    with pytest.raises(UserCodeError, match="process_draft_tokens_rejection_sampling raised "
                                            "RuntimeError"):
        check_sampler(s, "token", instances=CLEAN[2:], mode="coins-tau", samples=400)


#: Settings that read the request's history (the drafts before each row).
STATEFUL = ["repetition_penalty=1.5", "frequency_penalty=1", "min_tokens=2,stop_token_ids=0",
            "no_repeat_ngram_size=2"]


@pytest.mark.parametrize("setting", STATEFUL)
@pytest.mark.parametrize("name", ["trtllm", "vllm-mrv2"])
def test_upstream_processing_follows_each_rows_history(name, setting):
    """The presets whose rows are processed upstream (TensorRT-LLM, vLLM MRV2's stand-in)
    process row i after the drafts before it, as the reference does: a correct port passes
    (they processed every row with no history, and FAILed it at p = 0). Negative control: the
    same preset with the history dropped fails, at 3,000 samples."""
    assert _check(name, setting, samples=3_000).passed

    def no_history(p, drafts, sp):
        return ES.process_rows(p.to(torch.float64), sp)

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(ES, "_processed_along", no_history)
        bad = _check(name, setting, samples=3_000)
    finally:
        mp.undo()
    assert not bad.passed and bad.p_value < 1e-6


@pytest.mark.parametrize("name", ["vllm-v1", "sglang-chain", "transformers"])
def test_stateless_engine_paths_refuse_history_parameters(name):
    """The vLLM V1, SGLang and transformers presets run the engines' temperature, top-k and top-p
    path: a penalty, a bias or a mask given to them was dropped and the correct port FAILed; it
    is refused in one line naming the parameters."""
    f, lay = PORTS[name]
    for setting, named in (("repetition_penalty=1.5", "repetition_penalty"),
                           ("logit_bias=0:-inf", "logit_bias"),
                           ("min_tokens=2,stop_token_ids=0", "min_tokens"),
                           ("no_repeat_ngram_size=2,presence_penalty=0.5",
                            "presence_penalty, no_repeat_ngram_size")):
        with pytest.raises(OptionError, match=f"not {named} \\(parameters that read the "
                                              f"request's history\\)") as exc:
            Lm.engine_sampler(f, lay, sampling=setting)
        assert "\n" not in str(exc.value)
