"""Whole draft-and-verify steps (spectheory.testing.checks.step) and the bug kit's seam replicas.

False alarms: every check runs at alpha = 1e-3 family-wise (Bonferroni over one global and one
per-instance chi-square) with a fixed seed, so each correct step's verdict below is fixed; its
chance of being a false alarm is at most 1e-3. Power: each replica's sample count is chosen so
that detection_power (non-central chi-square on the check's pooled cells, against the replica's
exact law) is >= 0.99, asserted below; the replicas themselves are the planted bugs (negative
controls) that check_step must catch.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from cli_helpers import run, write
from spectheory.inputs.instances import instance_to_dict
from spectheory.inputs.random_instances import random_instance
from spectheory.runtime.errors import OptionError, SizeLimitError, UserCodeError
from spectheory.testing.statistics import stats
from spectheory.testing.mutants import KINDS, MUTANTS
from spectheory.testing.mutants import steps as S
from spectheory.testing.checks.sampler import check_proposal, check_sampler
from spectheory.testing.checks.step import (TableLM, check_step, default_step_instances,
                                            detection_power, sample_steps, sglang_step,
                                            transformers_step, vllm_v1_step)

ALPHA = 1e-3
SETTINGS = [None, "temperature=0.7", "top_k=2", "top_p=0.8", "min_p=0.1", "temperature=0"]
CORRECT = [(vllm_v1_step, 6_000), (sglang_step, 6_000), (transformers_step, 2_000)]


# ----------------------------------------------------------------------------- the models


def test_table_lm_rows_follow_the_prefix_and_the_markov_extension():
    inst = random_instance(3, 2, 21)
    lm = TableLM(inst.target, "target")
    toks = torch.tensor([[2, 0, 1, 1]])
    rows = lm(toks)[0]
    assert rows.shape == (5, 3)
    for j in range(5):
        want = inst.target.conditional(tuple(toks[0, :j].tolist()))
        assert np.allclose(rows[j].numpy(), np.asarray(want, dtype=float))
    logits = TableLM(inst.target, "target", "logits")(toks)
    assert logits.dtype == torch.float32
    assert torch.allclose(torch.softmax(logits, -1).double(), rows.unsqueeze(0), atol=1e-6)
    with pytest.raises(Exception, match="outside 0..2"):
        lm(torch.tensor([[3]]))
    with pytest.raises(SizeLimitError, match="over the limit"):
        lm(torch.zeros(2**23, 2, dtype=torch.long))


# ----------------------------------------------------------------------------- correct steps


@pytest.mark.parametrize("step,samples", CORRECT, ids=lambda x: getattr(x, "__name__", str(x)))
@pytest.mark.parametrize("sampling", SETTINGS)
def test_correct_engine_steps_pass_under_sampling_parameters(step, samples, sampling):
    # drafting and the target both under the request's parameters, as the engines run them;
    # default instances are prefix-dependent (V = 3, L = 2 and V = 2, L = 3)
    rep = check_step(step, samples=samples, alpha=ALPHA, sampling=sampling,
                     draft_sampling=sampling)
    assert rep.passed, str(rep)
    assert rep.mode == "step" and rep.rows == 2 and rep.tokens == [3, 4]
    if sampling == "temperature=0":  # greedy: every law is a point mass, any other sequence
        # fails the check: 90% power at TV t once 1 - (1 - t)^1000 >= 0.9 (1,000 samples each)
        assert rep.dof == 0 and any("is one sequence" in n for n in rep.notes)
        n = samples // 2
        assert rep.min_detectable_tv == pytest.approx(1 - 0.1 ** (1 / n))
        assert rep.to_json()["min_detectable_tv"] == pytest.approx(rep.min_detectable_tv)
    else:
        assert rep.dof > 0 and 0 < rep.min_detectable_tv < 0.12


@pytest.mark.parametrize("step", [vllm_v1_step, sglang_step])
def test_correct_steps_pass_over_consecutive_steps_and_with_logits(step):
    rep = check_step(step, samples=8_000, steps=3, inputs="logits")
    assert rep.passed, str(rep)
    assert rep.tokens == [5, 6] and rep.steps == 3


def test_raw_draft_rows_with_processed_target_pass_when_q_is_what_was_drafted():
    # drafting unprocessed while the request is top-k: still lossless (q handed is the draft law)
    rep = check_step(sglang_step, samples=6_000, sampling="top_k=2")
    assert rep.passed, str(rep)


# ----------------------------------------------------------------------------- exact laws


def test_shared_gumbel_joint_sums_to_the_draft_law_and_vanishes_at_two_tokens():
    q = [Fraction(1, 2), Fraction(1, 6), Fraction(1, 3)]
    r = [Fraction(0), Fraction(3, 10), Fraction(1, 6)]  # p - q at p = (1/10, 2/5, 1/2)
    assert S.shared_gumbel_joint(q, r, 0, 1) + S.shared_gumbel_joint(q, r, 0, 2) == q[0]
    # one recovery candidate: the joint is the draft's own probability
    assert S.shared_gumbel_joint(q, [0, 1, 0], 0, 1) == q[0]
    # V = 2: a rejected draft leaves one token with residual mass, so shared noise is harmless
    inst = random_instance(2, 2, 3, denominator=12)
    assert S.exact_step_law("vllm-47386", inst)[2] == 0


EXACT_TV = {"vllm-47386": Fraction(1, 26), "sglang-7207": Fraction(23, 200),
            "hf-47932": Fraction(1, 4)}
SAMPLES = {"vllm-47386": 10_000, "sglang-7207": 2_000, "hf-47932": 2_000, "deepspec-31": 120_000}


def test_replicas_exact_total_variation():
    for name, tv in EXACT_TV.items():
        _, inst, sp, dp = S.REPLICAS[name]
        assert S.exact_step_law(name, inst(), sp, dp)[2] == tv, name
        assert S.exact_step_law("correct", inst(), sp, dp)[2] == 0
    # DeepSpec #31 at V = 2, L = 1: TV = |qt_0 - q_0| p_0 / q_0 (token 0 is the over-drafted
    # one), qt the float64 law of the bfloat16 logits, taken exactly
    _, inst, sp, dp = S.REPLICAS["deepspec-31"]
    qt = S.bf16_draft_probs(torch.tensor([2 / 3, 1 / 3], dtype=torch.float64))
    qt = [Fraction(float(v)) for v in qt]
    qt0 = qt[0] / sum(qt)
    closed = abs(qt0 - Fraction(2, 3)) * Fraction(5, 8) / Fraction(2, 3)
    tv = S.exact_step_law("deepspec-31", inst(), sp, dp)[2]
    assert tv == closed and abs(float(tv) - 0.0117300305) < 1e-9


@pytest.mark.parametrize("name", list(S.REPLICAS))
def test_each_replica_follows_its_exact_law(name):
    # the exact law under the declared coupling is the law the replica's code samples from
    step, inst, sp, dp = S.REPLICAS[name]
    law, _, _ = S.exact_step_law(name, inst(), sp, dp)
    n = 4_000 if name == "hf-47932" else 20_000
    obs = sample_steps(step, inst(), n, seed=5, sampling=sp, draft_sampling=dp)
    t = stats.row_chi_square(obs, np.array([float(x) for x in law]), n)
    assert t.impossible == 0 and t.p_value > ALPHA, (name, t)


# ----------------------------------------------------------------------------- the bug kit


@pytest.mark.parametrize("name", list(S.REPLICAS))
def test_check_step_catches_each_seam_replica_with_stated_power(name):
    step, inst, sp, dp = S.REPLICAS[name]
    law, target, _ = S.exact_step_law(name, inst(), sp, dp)
    n = SAMPLES[name]
    power = detection_power(np.array([float(x) for x in law]),
                            np.array([float(x) for x in target]), n, ALPHA)
    assert power >= 0.99, (name, power)
    rep = check_step(step, instances=[inst()], samples=n, alpha=ALPHA, sampling=sp,
                     draft_sampling=dp)
    assert not rep.passed and rep.p_value < ALPHA, str(rep)


def test_bug_kit_step_entries():
    assert "step" in KINDS
    entries = {m.name: m for m in MUTANTS.values() if m.kind == "step"}
    assert len(entries) == 4
    c = MUTANTS["vllm-47386-shared-noise-step"].catch()
    assert c.caught and c.tv == Fraction(1, 26) and c.samples == 10_000


def test_vllm_47386_halves_pass_the_other_checks():
    # the truth: drafting by an exponential race samples q exactly (check_proposal passes), and
    # the verification half, handed drafts the kit drew, has no draft noise to re-use
    # (check_sampler passes); only the whole step couples them
    _, inst, _, _ = S.REPLICAS["vllm-47386"]
    prop = check_proposal(S.draft_half("vllm-47386"), instances=[inst()], samples=20_000)
    assert prop.passed, str(prop)
    rep = check_sampler(S.sampler_half("vllm-47386"), "token", instances=[inst()],
                        samples=20_000)
    assert rep.passed, str(rep)


def test_sglang_7207_passes_check_proposal_and_fails_check_sampler():
    # the truth: the drafting is right (check_proposal passes), and the coin re-use lives inside
    # the verification, which check_sampler draws coins for and sees (it fails)
    _, inst, _, _ = S.REPLICAS["sglang-7207"]
    prop = check_proposal(S.draft_half("sglang-7207"), instances=[inst()], samples=20_000)
    assert prop.passed, str(prop)
    rep = check_sampler(S.sampler_half("sglang-7207"), "token", instances=[inst()],
                        samples=20_000)
    assert not rep.passed, str(rep)


def test_hf_47932_passes_check_sampler_and_fails_check_proposal():
    # the truth: _speculative_sampling is right for the q it is handed (check_sampler passes);
    # the drafting half reports the raw q while sampling the top-1 rows (check_proposal fails)
    _, inst, _, dp = S.REPLICAS["hf-47932"]
    rep = check_sampler(S.sampler_half("hf-47932"), "token", instances=[inst()], samples=3_000)
    assert rep.passed, str(rep)
    prop = check_proposal(S.draft_half("hf-47932", dp), instances=[inst()], samples=2_000)
    assert not prop.passed


def test_deepspec_31_passes_check_sampler_and_its_draft_half_fails_check_proposal():
    # the truth: the verification is right for the q handed (check_sampler passes); the drafting
    # half reports the float q while sampling the bfloat16 law, 0.0125 away on this row:
    # check_proposal sees it with enough draws (chi^2 distance 7e-4 a draw, 120,000 draws)
    _, inst, _, _ = S.REPLICAS["deepspec-31"]
    rep = check_sampler(S.sampler_half("deepspec-31"), "token", instances=[inst()],
                        samples=20_000)
    assert rep.passed, str(rep)
    rows = torch.tensor([[2 / 3, 1 / 3]], dtype=torch.float64)
    prop = check_proposal(S.draft_half("deepspec-31"), instances=[rows], samples=120_000)
    assert not prop.passed


def test_replica_is_caught_over_consecutive_steps_too():
    step, inst, _, _ = S.REPLICAS["sglang-7207"]
    rep = check_step(step, instances=[inst()], samples=3_000, steps=2)
    assert not rep.passed and rep.tokens == [3]


# ----------------------------------------------------------------------------- bad input


def test_bad_returns_fail_with_one_note_and_raising_steps_are_user_code_errors():
    def wrong_shape(request):
        return torch.zeros(request.context.shape[0], 7, dtype=torch.long)

    rep = check_step(wrong_shape, samples=100)
    assert not rep.passed and "shape" in rep.notes[0] and "wrong_shape" in rep.notes[0]

    def gap(request):
        out = torch.full((request.context.shape[0], request.num_draft + 1), -1)
        out[:, 1] = 0
        return out

    rep = check_step(gap, samples=100)
    assert not rep.passed and "-1 before" in rep.notes[0]

    def boom(request):
        raise RuntimeError("kaput")

    with pytest.raises(UserCodeError, match="boom.*kaput"):
        check_step(boom, samples=100)


def test_sizes_and_arguments_are_refused_before_the_step_runs():
    calls = []

    def step(request):
        calls.append(1)
        return sglang_step(request)

    with pytest.raises(SizeLimitError, match="over the limit"):
        check_step(step, instances=[random_instance(8, 3, 0)], steps=5)
    with pytest.raises(OptionError, match="samples"):
        check_step(step, samples=0)
    with pytest.raises(OptionError, match="steps"):
        check_step(step, steps=0)
    with pytest.raises(OptionError, match="sampling parameter top_k"):
        check_step(step, sampling="top_k=-5")
    with pytest.raises(OptionError, match="nothing would be tested"):
        check_step(step, samples=4)  # no instance has two cells of expected count >= 5
    assert not calls


# ----------------------------------------------------------------------------- command line


def test_cli_pass_fail_and_bad_input(tmp_path, capsys):
    code, out, _ = run(["check-step", "spectheory.testing.checks.step:sglang_step", "--samples",
                        "4000", "--sampling", "top_k=2", "--draft-sampling", "top_k=2"], capsys)
    assert code == 0 and "PASS" in out
    f = write(tmp_path, instance_to_dict(S.reused_coin_instance()))
    code, out, _ = run(["check-step", "spectheory.testing.mutants.steps:reused_coin_step",
                        "--instance", f, "--samples", "2000", "--json"], capsys)
    assert code == 1 and '"passed": false' in out
    code, out, err = run(["check-step", "no_such_module_here:step"], capsys)
    assert code == 2 and not out and len(err.strip().splitlines()) == 1
    code, out, err = run(["check-step", "spectheory.testing.checks.step:sglang_step", "--steps", "0"],
                         capsys)
    assert code == 2 and "--steps" in err and len(err.strip().splitlines()) == 1


def test_default_instances_are_prefix_dependent():
    for inst in default_step_instances():
        t = inst.target.tables
        assert len(t) > 1 and not np.allclose(t[1][0], t[1][1])


def test_docs_page_example_runs_as_printed(capsys):
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "whole-steps.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    exec(compile(code, "whole-steps.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "True" and out[1] == "False" and out[2].startswith("check_step")
    for name, tv in EXACT_TV.items():  # the page's table states the exact values
        assert f"| {tv} |" in text, name


def test_a_bug_of_later_steps_is_caught_over_consecutive_steps_only():
    # planted: the target is run on the drafts without the context (a position or cache offset
    # lost after the first step); on the first step the context is empty, so one step passes
    from spectheory.testing.checks.step import StepRequest

    def lost_context(request):
        n = request.context.shape[1]

        def target(toks):  # rows n.. computed as if the context were absent
            return torch.cat([request.target(toks)[:, :n], request.target(toks[:, n:])], dim=1)

        blind = StepRequest(request.context, request.draft, target, request.num_draft, request.sampling, request.draft_sampling,
                            request.inputs, request.generator, request.seed)
        return sglang_step(blind)

    inst = [random_instance(3, 1, 4)]  # prefix-dependent rows, V = 3, L = 1
    one = check_step(lost_context, instances=inst, samples=6_000)
    assert one.passed, str(one)
    two = check_step(lost_context, instances=inst, samples=6_000, steps=2)
    assert not two.passed, str(two)


@pytest.mark.parametrize("name", list(S.REPLICAS))
def test_exact_law_matches_each_replica_at_two_positions(name):
    # L = 2 with prefix-dependent draft and target rows: the rejection at position 2 reads the
    # rows after the first draft, and (SGLang #7207) the bonus the coin of position 2
    step, _, sp, dp = S.REPLICAS[name]
    inst = random_instance(3, 2, 7, denominator=12)
    law, target, tv = S.exact_step_law(name, inst, sp, dp)
    assert tv > 0 and S.exact_step_law("correct", inst, sp, dp)[2] == 0
    n = 3_000 if name == "hf-47932" else 20_000
    obs = sample_steps(step, inst, n, seed=11, sampling=sp, draft_sampling=dp)
    t = stats.row_chi_square(obs, np.array([float(x) for x in law]), n)
    assert t.impossible == 0 and t.p_value > ALPHA, (name, t, float(tv))


def test_a_list_of_emitted_rows_is_accepted():
    def as_list(request):
        out = sglang_step(request)
        return [row[row >= 0] for row in out]

    rep = check_step(as_list, samples=4_000)
    assert rep.passed, str(rep)

    def float_list(request):  # whole-valued floats are tokens, as in chain mode
        return [row[row >= 0].double() for row in sglang_step(request)]

    assert check_step(float_list, samples=4_000).passed

    def half_list(request):
        return [row[row >= 0].double() + 0.5 for row in sglang_step(request)]

    rep = check_step(half_list, samples=100)
    assert not rep.passed and "(dtype torch.float64), not an integer" in rep.notes[0]


def test_a_run_projected_past_max_seconds_stops_with_one_line():
    import time as _time

    from spectheory.runtime.errors import TimeLimitError

    def slow(request):
        _time.sleep(0.05)
        return sglang_step(request)

    with pytest.raises(TimeLimitError, match="max_seconds = 0.01"):
        check_step(slow, samples=200_000, max_seconds=0.01)
