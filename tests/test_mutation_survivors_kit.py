"""Defects of the kit, its engine layouts, the claims ledger and sweep families that a hidden
mutation pass found the suite let through (each test kills one or more of mutants 644-; see
docs/mutation.md). Expected values are written from the rule or the engine's documented
behaviour, never read from the code under test."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys

import pytest
import torch

from spectheory.runtime.errors import OptionError, SpectheoryError
from spectheory.testing import VLLM_V1, check_sampler, engine_coin_sampler, engine_sampler
from spectheory.testing.checks.report import DraftRows, SamplerReport
from spectheory.testing.checks.sampler import make_sampler, reference_coin_sampler
from spectheory.testing.engines import layouts as Lm
from spectheory.testing.engines.adapters import apply_top_k_top_p, vllm_v1_rejection_sample


def test_an_engine_that_corrupts_its_last_accepted_draft_is_named():
    """The check that the emitted tokens before Y are the drafts left out the last accepted
    draft (< tau - 1): an engine corrupting it PASSed."""
    @functools.wraps(vllm_v1_rejection_sample)
    def buggy(*a, **k):
        out = vllm_v1_rejection_sample(*a, **k).clone()
        for b in range(out.shape[0]):
            n = int((out[b] != -1).sum()) - 1  # tau
            if n >= 1:
                out[b, n - 1] = (out[b, n - 1] + 1) % 3
        return out

    with pytest.raises(Lm.EngineOutputError, match="where the drafts are"):
        check_sampler(engine_sampler(buggy, VLLM_V1), "token", samples=2000)


def test_a_token_coin_convention_reads_the_bonus_from_the_row_after_the_block():
    """With the engine's own token coin, the bonus after L acceptances is inverse_cdf of
    p(. | X^L) (the row at L); the row at L - 1 FAILed the correct engine (Y off support)."""
    from spectheory.testing.engines.layouts import VLLM_V1_COINS

    conv = dataclasses.replace(VLLM_V1_COINS, name="vllm-v1-tokcoin", token_coin=True,
                               low_closed=False)
    s = engine_coin_sampler(vllm_v1_rejection_sample, VLLM_V1, convention=conv)
    assert check_sampler(s, "token", mode="coins-tau", samples=4000).passed


def test_an_older_sglang_tree_kernel_with_fourteen_positional_parameters_gets_its_draft():
    """A kernel whose draft argument is named draft_prob is recognised by its 14 positional
    parameters (> 14 dropped the draft argument and shifted every later one)."""
    from spectheory.testing.checks.tree import check_tree_sampler
    from spectheory.testing.checks.tree_ports import SGLANG_TREE, tree_engine_sampler
    from spectheory.testing.checks.tree_ports import (
        tree_speculative_sampling_target_only as port)

    def kernel(predicts, accept_index, accept_token_num, candidates, retrive_index,
               retrive_next_token, retrive_next_sibling, uniform_samples,
               uniform_samples_for_final_sampling, target_probs, draft_prob,
               threshold_single=1.0, threshold_acc=1.0, deterministic=True):
        return port(predicts, accept_index, accept_token_num, candidates, retrive_index,
                    retrive_next_token, retrive_next_sibling, uniform_samples,
                    uniform_samples_for_final_sampling, target_probs, draft_prob,
                    threshold_single, threshold_acc, deterministic)

    s = tree_engine_sampler(kernel, SGLANG_TREE, threshold_acc=0.5)
    assert check_tree_sampler(s, tree=[[0], [1], [0, 0], [0, 1], [1, 0]], samples=3000).passed


def test_vllm_top_p_keeps_the_token_at_the_boundary_as_vllm_does():
    """vLLM's apply_top_k_top_p masks sorted tokens whose cumulative probability is <= 1 - p:
    at p = 0.75 over (1/4, 1/4, 1/2) the first 1/4 goes (cum 1/4 <= 1/4), leaving
    (0, 1/3, 2/3); < kept all three."""
    out = apply_top_k_top_p(torch.log(torch.tensor([[0.25, 0.25, 0.5]])), None,
                            torch.tensor([0.75])).softmax(-1)
    assert torch.allclose(out, torch.tensor([[0.0, 1 / 3, 2 / 3]]), atol=1e-6)


@pytest.mark.parametrize("call, words", [
    (lambda: check_sampler(reference_coin_sampler("block"), "token", mode="coins", tol=1.0,
                           samples=200), "tol = 1.0 must lie in [0, 1)"),
    (lambda: check_sampler(reference_coin_sampler("token"), "token", mode="coins", paths=2,
                           samples=200), "coins mode compares single-path samplers"),
    (lambda: check_sampler(make_sampler("token"), "token", mode="law", convention="block",
                           samples=200), "applies to the coins modes only"),
])
def test_coins_mode_arguments_that_would_be_ignored_are_refused(call, words):
    """tol = 1 skipped 1,971 of 2,000 rows and PASSed; paths = 2 ran as one path; a convention
    in law mode was ignored: each PASSed a check that did not run as asked."""
    with pytest.raises(SpectheoryError, match=words.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        call()


def test_draft_rows_off_one_are_refused_at_the_tolerance_of_their_dtype():
    """A float64 q row summing to 1.000005 (tolerance 1e-6) and a bfloat16 one summing to
    1.0078 (2^-8, its rounding) ran and PASSed as distributions."""
    from spectheory.testing.checks.rows import _check_draft_rows

    V, L = 3, 2
    q = torch.full((1, L, V), 1 / 3, dtype=torch.float64)
    q[0, 0, 0] += 5e-6
    p = torch.full((1, L + 1, V), 1 / 3, dtype=torch.float64)
    with pytest.raises(SpectheoryError, match="sums to 1.000005, not 1 within 1e-06"):
        check_sampler(make_sampler("token"), "token",
                      instances=[DraftRows(torch.tensor([[0, 1]]), q, p)], samples=200)
    qb = torch.full((1, 1, L, V), 1 / 3).to(torch.bfloat16)
    qb[0, 0, 0, 0] += 0.005
    pb = torch.full((1, 1, L + 1, V), 1 / 3).to(torch.bfloat16)
    with pytest.raises(SpectheoryError, match="sums to 1.0078125, not 1 within 0.00390625"):
        _check_draft_rows(torch.tensor([[[0, 1]]]), qb, pb)


def test_k_path_draft_rows_read_their_block_length_from_the_last_axis():
    from spectheory.testing.checks.rows import _dims

    d = torch.zeros(4, 2, 5, dtype=torch.long)
    rows = DraftRows(d, torch.full((4, 2, 5, 3), 1 / 3), torch.full((4, 2, 6, 3), 1 / 3))
    assert _dims(rows) == (4, 5, 3)  # B, L, V (not K = 2 for L)


def test_reports_state_their_detectable_bias_and_write_json_without_infinity():
    r = SamplerReport(True, 0.5, "law", 1000, 1e-3, None, 0.05, rows=2, dof=3)
    lines = r._test_lines("instance(s)", "instance", finite_only=True)
    assert any("detects a total-variation bias >= 0.05" in line for line in lines)
    j = SamplerReport(False, 0.0, "law", 10, 1e-3, None, math.inf).to_json()
    assert j["min_detectable_tv"] is None
    json.dumps(j, allow_nan=False)


def test_relaxed_claims_error_margin_and_tolerance():
    """Cactus's h-claim at p = (1/10, 9/10), q = (1, 0): its value 9.99988e-11 is below a
    budget of 1e-10 (holds; delta - err refuted it), and the greedy radius check's tolerance is
    the solver's 1e-6 (1e-2 let gaps through)."""
    from spectheory.inputs.instances import instance_from_dict
    from spectheory.lp.claims.relaxed_checks import cactus_h_claim, check_greedy_radius

    b = instance_from_dict({"vocab_size": 2, "block_length": 1, "target": ["1/10", "9/10"],
                            "draft": ["1", "0"]})
    v = cactus_h_claim(b, 1e-10)
    assert v.exact < 1e-10 and not v.refuted
    assert check_greedy_radius([0.5, 0.3, 0.2], 0, "rp").error == 1e-6


def test_greedy_radius_in_kl_p_r_may_use_a_token_the_target_never_emits():
    """min KL(p || r) over r with r(1) >= r(0) at p = (1, 0) is log 2 (r = (1/2, 1/2)): the
    closed form and the numeric check both skipped p(y) = 0 (right for KL(r || p) only) and
    agreed on inf."""
    from spectheory.lp.claims.relaxed_checks import check_greedy_radius, greedy_rejection_radius

    assert greedy_rejection_radius([1, 0], 0, "pr") == pytest.approx(math.log(2), abs=1e-15)
    assert greedy_rejection_radius([1, 0], 0, "rp") == math.inf
    v = check_greedy_radius([1, 0], 0, "pr")
    assert not v.refuted and v.exact == pytest.approx(math.log(2), abs=1e-5)


def test_a_fact_is_prefix_dependent_when_either_model_is():
    from spectheory.lp.claims import common as C
    from spectheory.lp.claims.engines import fms_instance

    C.reset_facts()
    inst = fms_instance()
    assert not (inst.target.context_independent and inst.draft.context_independent)
    C.note(inst, "tree", 4)
    assert C.take_facts()[0].prefix_dependent


def test_a_family_must_return_the_block_asked_for_and_knobs_keep_their_type(tmp_path,
                                                                             monkeypatch):
    from spectheory.runtime.errors import UserCodeError
    from spectheory.sweep.families import _call_family, knob_key

    (tmp_path / "famwrong.py").write_text(
        "import spectheory as st\n\ndef wrong_block(vocab_size, block_length, seed):\n"
        "    return st.random_instance(vocab_size, block_length + 1, seed)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserCodeError, match="block_length=3, not the sizes asked for"):
        _call_family("famwrong:wrong_block", 3, 2, 0, {})
    assert knob_key([("sigma", 1)]) != knob_key([("sigma", 1.0)])


def test_coins_tau_sees_a_correction_drawn_from_p_on_dyadic_rows():
    """coins-tau checks Y's support in the residual max(p - q, 0): on dyadic rows p = (1/2,
    1/4, 1/4), q = (1/4, 1/4, 1/2) the residual's signed sum is exactly 0, and only its positive
    part says it has mass. A sampler drawing Y from p at a rejection returns token 2 (residual
    -1/4) and must FAIL; the reference passes."""
    from spectheory.inputs.instances import instance_from_dict
    from spectheory.sampling import inverse_cdf

    inst = instance_from_dict({"vocab_size": 3, "block_length": 1, "target": [0.5, 0.25, 0.25],
                               "draft": [0.25, 0.25, 0.5]})
    ref = reference_coin_sampler("token")

    def from_p(drafts, q, p, uniforms):
        tau, y = ref(drafts, q, p, uniforms)
        rows = p[torch.arange(p.shape[0]), tau].to(torch.float64)
        return tau, torch.where(tau < drafts.shape[1], inverse_cdf(rows, uniforms[:, -1]), y)

    assert check_sampler(ref, "token", [inst], mode="coins-tau", samples=4000).passed
    bad = check_sampler(from_p, "token", [inst], mode="coins-tau", samples=4000)
    assert not bad.passed


def test_sizing_plans_what_its_docstrings_state():
    """The fewest samples of a lossless check is one per instance (a budgeted lossless check of
    4 instances runs; a warm-up of 1 sample was refused as fewer than the instances); its memory
    plan holds the target law and counts over V^(L+1) sequences (24 bytes each, on top of what
    coins mode plans); a time plan exactly at max_seconds is accepted (refused when it exceeds
    it)."""
    from spectheory.inputs.random_instances import random_instance
    from spectheory.runtime.errors import SizeLimitError
    from spectheory.testing.checks import sizing as S

    insts = [random_instance(3, 1, seed=s) for s in range(4)]
    assert S._min_samples("lossless", insts, 1) == 4 and S._min_samples("coins", insts, 1) == 1
    rep = check_sampler(make_sampler("token"), "token", insts, mode="lossless",
                        samples="auto", budget_s=2.0)
    assert rep.passed and rep.samples >= 4
    big = random_instance(8, 4, seed=0)
    lossless = S._planned_bytes(1000, "lossless", [big], 1, 1)[0]
    assert lossless - S._planned_bytes(1000, "coins", [big], 1, 1)[0] == 24 * 8 ** 5
    least = 1000 * S.MIN_SECONDS_PER_SAMPLE
    S._refuse_time(1000, least)
    with pytest.raises(SizeLimitError, match="max_seconds"):
        S._refuse_time(1000, least * (1 - 1e-9))
