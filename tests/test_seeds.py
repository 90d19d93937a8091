"""Seeds and batches: seed replay, RNG accounting and batch invariance (exact checks: a seeded
step is deterministic, so a correct one never fails them and one differing token fails)."""

from __future__ import annotations

import pytest
import torch

import spectheory as st
from spectheory.runtime.errors import OptionError, UserCodeError
from spectheory.testing.checks.seeds import (GlobalSeedEngine, ZeroDraftAdvanceEngine,
                                             check_batch_invariance, check_seed_replay, inverse_cdf,
                                             keyed_plain_step, keyed_uniform, sample_match_step)
from spectheory.testing.checks.step import check_step

PENALISED = "repetition_penalty=1.5,presence_penalty=0.2,top_k=2"


def test_keyed_uniform_is_a_function_of_seed_position_stream():
    a = keyed_uniform(torch.tensor([1, 2, 3]), 5, 2)
    assert torch.equal(a, keyed_uniform(torch.tensor([1, 2, 3]), torch.tensor([5, 5, 5]), 2))
    assert not torch.equal(a, keyed_uniform(torch.tensor([1, 2, 3]), 6, 2))
    assert not torch.equal(a, keyed_uniform(torch.tensor([1, 2, 3]), 5, 1))
    u = keyed_uniform(torch.arange(20000), 0, 2)
    assert 0 <= float(u.min()) and float(u.max()) < 1
    assert abs(float(u.mean()) - 0.5) < 0.01  # 20,000 uniforms: sd of the mean 0.002


def test_inverse_cdf_convention():
    rows = torch.tensor([[0.25, 0.0, 0.75]] * 4, dtype=torch.float64)
    u = torch.tensor([0.0, 0.2499, 0.25, 0.999], dtype=torch.float64)
    assert inverse_cdf(rows, u).tolist() == [0, 0, 2, 2]  # never the zero-probability token


@pytest.mark.parametrize("schedule", ["full", "none", "mixed"])
def test_sample_match_replays_the_plain_stream(schedule):
    rep = check_seed_replay(sample_match_step, schedule=schedule, sampling=PENALISED)
    assert rep.passed and rep.compared == 2 * 16 * 8, rep


def test_sample_match_is_lossless_as_a_step():
    """alpha = 1e-3; check_step's report states its power (TV >= ~0.05 at 90%)."""
    rep = check_step(sample_match_step, samples=8000, steps=2, sampling=PENALISED)
    assert rep.passed, rep


def test_global_seed_replica_fails_replay_and_batch_invariance_but_not_the_law():
    """TensorRT-LLM PR #17599: its law is the target's (check_step cannot see it); the seeded
    checks catch it."""
    assert not check_seed_replay(lambda: GlobalSeedEngine()).passed
    rep = check_batch_invariance(lambda: GlobalSeedEngine())
    assert not rep.passed and rep.first["run"] == "batched"
    assert check_step(lambda r: GlobalSeedEngine()(r), samples=6000, steps=2).passed


def test_zero_draft_advance_replica():
    """vllm-ascend #13608: only steps where a row has zero drafts show it."""
    fresh = (lambda bug: (lambda: ZeroDraftAdvanceEngine(bug)))
    plain = (lambda bug: (lambda: ZeroDraftAdvanceEngine(bug).plain))
    for schedule in ("none", "mixed"):
        ok = check_seed_replay(fresh(False), plain(False), schedule=schedule)
        assert ok.passed, ok
        bad = check_seed_replay(fresh(True), plain(True), schedule=schedule)
        assert not bad.passed and bad.mismatches >= 10, bad
    # with drafts on every step the bug never triggers: the schedule matters
    assert check_seed_replay(fresh(True), plain(True), schedule="full").passed
    assert check_batch_invariance(fresh(False), schedule="mixed").passed


def test_batch_invariance_catches_a_row_mixing_step():
    def rolled(request):  # uses the next row's seed: a batch-position bug
        seeds = request.seeds.roll(1) if request.seeds is not None else None
        r = type(request)(**{**request.__dict__, "seeds": seeds})
        return sample_match_step(r)

    assert not check_seed_replay(rolled).passed  # batched: each row reads another seed
    rep = check_batch_invariance(rolled)
    assert not rep.passed


def test_batch_invariance_passes_the_correct_step_with_penalties():
    assert check_batch_invariance(sample_match_step, sampling=PENALISED, schedule="mixed").passed


def test_plain_step_alone_is_its_own_stream():
    assert check_seed_replay(keyed_plain_step, schedule="none").passed


@pytest.mark.parametrize("kw,match", [
    (dict(seeds=[]), "non-empty"),
    (dict(seeds=[1, 1]), "distinct"),
    (dict(seeds=[-1]), "0..2\\^62"),
    (dict(tokens=0), "tokens"),
    (dict(schedule="some"), "schedule"),
    (dict(instances=["x"]), "Instance"),
])
def test_bad_arguments_one_line(kw, match):
    with pytest.raises(OptionError, match=match) as exc:
        check_seed_replay(sample_match_step, **kw)
    assert "\n" not in str(exc.value)


def test_user_code_guarded():
    def boom(request):
        raise RuntimeError("kaput")

    with pytest.raises(UserCodeError, match="kaput"):
        check_seed_replay(boom)

    def too_many(request):  # emits L + 1 tokens on a row allowed no drafts
        out = sample_match_step(request)
        out[:, :] = 0
        return out

    with pytest.raises(UserCodeError, match="allowed 0 drafts"):
        check_seed_replay(too_many, schedule="none")
    with pytest.raises(OptionError, match="not a function"):
        check_seed_replay(3)
    with pytest.raises(UserCodeError, match="not a step"):
        check_seed_replay(lambda: 3)


def test_work_and_time_are_bounded():
    """The seeded checks had no size pre-check past MAX_ROWS (4,096 seeds of batch invariance
    beside companions: 10^9 rows handed to step calls, hours) and no time bound."""
    import time

    from spectheory.runtime.errors import TimeLimitError
    from spectheory.testing.checks.seeds import MAX_ROW_STEPS

    calls = []

    def counted(request):
        calls.append(1)
        return sample_match_step(request)

    inst = [st.random_instance(3, 2, 1)]
    n = 1500  # (n^2 + 3n) x 8 tokens = 18.0M rows, over 2^24; 1,400 seeds (15.7M) are not
    assert (n * n + 3 * n) * 8 > MAX_ROW_STEPS > (1400 ** 2 + 3 * 1400) * 8
    with pytest.raises(OptionError, match="rows handed to the step calls, over the limit"):
        check_batch_invariance(counted, instances=inst, seeds=range(n), tokens=8)
    assert not calls  # refused before the first step call

    def slow(request):
        time.sleep(0.03)
        return sample_match_step(request)

    start = time.perf_counter()
    with pytest.raises(TimeLimitError, match="past max_seconds = 0.2; lower seeds or tokens"):
        check_seed_replay(slow, max_seconds=0.2)
    with pytest.raises(TimeLimitError, match="past max_seconds = 0.2"):
        check_batch_invariance(slow, max_seconds=0.2)
    assert time.perf_counter() - start < 3
    for bad in (float("nan"), 0, -1, True, "1"):
        with pytest.raises(OptionError, match="max_seconds"):
            check_seed_replay(sample_match_step, max_seconds=bad)
    assert check_seed_replay(sample_match_step, max_seconds=None).passed


def test_batch_invariance_needs_two_seeds():
    with pytest.raises(OptionError, match="two seeds"):
        check_batch_invariance(sample_match_step, seeds=[3])


def test_on_another_instance():
    inst = st.random_instance(4, 3, 5)
    assert check_seed_replay(sample_match_step, instances=[inst], tokens=10,
                             schedule="mixed").passed
