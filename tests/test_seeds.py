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


def test_mixed_schedule_varies_each_rows_draft_count_from_step_to_step():
    """The mixed schedule draws each row's count per (seed, step): an engine that leaves its
    seeded stream whenever a row's draft count changes between calls fails it (with a count fixed
    per seed across steps, it passed)."""
    from spectheory.testing.checks.seeds import _schedule

    counts = torch.stack([_schedule("mixed", list(range(64)), i, 3) for i in range(4)])
    assert ((counts[1:] != counts[:-1]).any(0)).sum() > 32  # most rows change count

    class SwitchesOnChange:
        def __init__(self):
            self.last = {}

        def __call__(self, request):
            seeds = request.seeds.clone()
            nd = torch.as_tensor(request.num_drafts).tolist()
            for i, (s, k) in enumerate(zip(seeds.tolist(), nd)):
                if self.last.get(s, k) != k:
                    seeds[i] = s ^ 1
                self.last[s] = k
            return sample_match_step(type(request)(**{**request.__dict__, "seeds": seeds}))

    assert not check_seed_replay(lambda: SwitchesOnChange(), schedule="mixed").passed


def test_batch_invariance_reverses_the_batch():
    """A step that reads the seeds sorted, apart from their rows, is right on a batch in seed
    order and wrong reversed: the check's reversed batch must catch it."""
    def sorted_seeds(request):
        s = request.seeds.sort().values
        return sample_match_step(type(request)(**{**request.__dict__, "seeds": s}))

    rep = check_batch_invariance(sorted_seeds)
    assert not rep.passed and "reverse" in str(rep)


def test_replay_counts_its_rows_and_the_zero_draft_engine_matches_as_drafted():
    """check_seed_replay's rows are instances x seeds; the generator engine without the planted
    bug emits its draft while it matches the target's token and stops at the first mismatch."""
    from spectheory.testing.checks.seeds import default_step_instances
    from spectheory.testing.checks.step import StepRequest, TableLM

    rep = check_seed_replay(sample_match_step, seeds=range(4), tokens=2)
    assert rep.passed and rep.rows == 4 * len(default_step_instances())
    # draft = target, both one-hot on token 1: every draft matches, all 2 drafts and the next
    # token are emitted (stopping at the first match instead emitted one token)
    sure = st.instance_from_dict({"vocab_size": 2, "block_length": 2, "target": [0.0, 1.0],
                                  "draft": [0.0, 1.0]})
    req = StepRequest(torch.zeros(8, 0, dtype=torch.long), TableLM(sure.draft, "draft"),
                      TableLM(sure.target, "target"), 2, None, None, "probs",
                      torch.Generator().manual_seed(0), 0, seeds=torch.arange(8))
    assert ZeroDraftAdvanceEngine(False)(req).tolist() == [[1, 1, 1]] * 8


def test_sample_match_drafts_at_the_keyed_draft_uniform_of_each_position():
    """The reference step's drafts are the inverse CDF of the draft rows at
    ``keyed_uniform(seed, n + j, DRAFT)``: its emitted tokens never show them (they are the
    target's), but how many tokens a step emits does (1 + the drafts matched in a row), so a
    draft drawn at another position's uniform changes the step's length on some row."""
    from spectheory.testing.checks.seeds import DRAFT, TARGET
    from spectheory.testing.checks.step import StepRequest, TableLM

    inst = st.random_instance(3, 3, seed=4)  # prefix-dependent rows
    B, L, n = 64, 3, 0
    seeds = torch.arange(100, 100 + B)
    req = StepRequest(torch.zeros(B, n, dtype=torch.long), TableLM(inst.draft, "draft"),
                      TableLM(inst.target, "target"), L, None, None, "probs",
                      torch.Generator().manual_seed(0), 0, seeds=seeds)
    out = sample_match_step(req)
    lengths = (out != -1).sum(dim=1).tolist()
    expect = []
    for b in range(B):
        seq: list[int] = []
        for j in range(L):
            q = torch.tensor(inst.draft.conditional(tuple(seq)), dtype=torch.float64)
            u = keyed_uniform(seeds[b:b + 1], n + j, DRAFT)
            seq.append(int(inverse_cdf(q.unsqueeze(0), u)[0]))
        k = 0
        while k < L:
            p = torch.tensor(inst.target.conditional(tuple(seq[:k])), dtype=torch.float64)
            t = int(inverse_cdf(p.unsqueeze(0), keyed_uniform(seeds[b:b + 1], n + k, TARGET))[0])
            if t != seq[k]:
                break
            k += 1
        expect.append(k + 1)
    assert lengths == expect
    assert len(set(expect)) > 1  # the rows differ in length: the check has something to see


def test_a_step_with_a_default_request_is_a_step_and_a_partial_factory_a_factory():
    """A step written step(request=None) was taken for a factory (a callable callable with no
    argument) and called with none: "step factory ... raised AttributeError: 'NoneType' object
    has no attribute 'context'". A factory takes no parameter but keyword-only ones with
    defaults (functools.partial of a maker with its options bound)."""
    import functools

    def defaulted(request=None):
        return keyed_plain_step(request)

    assert check_seed_replay(defaulted, schedule="none").passed

    def make(*, rolled=False):
        return keyed_plain_step

    assert check_seed_replay(functools.partial(make, rolled=False), schedule="none").passed
    assert check_seed_replay(lambda: keyed_plain_step, schedule="none").passed  # control
