"""The stateful seam replicas (`spectheory.testing.mutants.stateful_steps`): penalties, grammar
masks and sampling parameters fed wrongly around the sampler.

Statistics: every agreement test below is a pooled chi-square of a replica's counts against its
exact law at alpha = 1e-4 (15 tests: family-wise false-alarm rate <= 1.5e-3); each catch test
runs check_step (alpha = 1e-3) at the replica's stated samples, where its power against the
exact law is >= 0.99 (asserted from detection_power). The correct steps pass under every
parameter set at alpha = 1e-3 each (33 checks, each sized to catch a TV of about 0.1).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spectheory.inputs.processing import SamplingParams
from spectheory.runtime.errors import SpectheoryError
from spectheory.testing.statistics import stats
from spectheory.testing.mutants import stateful_steps as ss
from spectheory.testing.checks.sampler import check_proposal
from spectheory.testing.checks.step import (StepRequest, TableLM, check_step, detection_power,
                                            sample_steps, sglang_step, target_sequence_law,
                                            transformers_step, vllm_v1_step)

INST = ss.stateful_instance()
AGREE_ALPHA = 1e-4


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _distinct_samplings():
    seen, out = set(), []
    for rep in ss.REPLICAS.values():
        sp = rep.sampling()
        if str(sp) not in seen:
            seen.add(str(sp))
            out.append(sp)
    return out


def _agrees(obs, law, n):
    t = stats.row_chi_square(obs, law, n, 5.0)
    if law.max() >= 1 - 1e-12:  # a point mass (greedy): every sample on its sequence
        return int(obs[int(np.argmax(law))]) == n, t
    return t.impossible == 0 and t.dof >= 1 and t.p_value > AGREE_ALPHA, t


_LAWS: dict = {}


def _law(name, steps, sched=None):
    """The replica's exact law and the target's, memoised (the enumeration of vmlx-swift #361
    takes seconds)."""
    key = (name, steps)
    if key not in _LAWS:
        rep = ss.REPLICAS[name]
        sp = rep.sampling()
        sch: list = []
        law = ss.stateful_step_law(rep.rule, INST, steps, sp, schedule=sch)
        _LAWS[key] = (law, target_sequence_law(INST, steps + 2, sp), sch)
    return _LAWS[key]


def _gap(sched, n):
    return sum((1 - pi) ** n for rnd in sched for pi in rnd.values())


# ----------------------------------------------------------------------------- the enumeration


@pytest.mark.parametrize("steps", [2, 3])
def test_enumeration_of_correct_rules_is_the_target_law(steps):
    # token verification and exact-match verification fed the right histories are lossless:
    # the enumeration (its own code) must give the kit's target_sequence_law, under every
    # parameter set, over s steps under check_step's schedule
    for sp in _distinct_samplings():
        tgt = target_sequence_law(INST, steps + 2, sp)
        for rule in ("correct", "correct-match"):
            law = ss.stateful_step_law(rule, INST, steps, sp)
            assert np.abs(law - tgt).max() < 1e-12, (rule, str(sp))


def test_every_replica_is_lossy_at_two_steps_and_the_history_bugs_hide_at_one():
    # exact TVs: every replica moves the law over 2 steps; the bugs that only read a wrong
    # committed state (one token per step, the last token counted twice) are exact at s = 1,
    # where the context is empty
    hidden = {"sglang-33643-frequency", "sglang-33643-min-tokens", "vllm-33251"}
    for name in ss.REPLICAS:
        tv1 = ss.tv(*_law(name, 1)[:2])
        tv2 = ss.tv(*_law(name, 2)[:2])
        assert tv2 > 0.05, name
        if name in hidden:
            assert tv1 < 1e-12, name
        else:
            assert tv1 > 0.02, name


def test_grammar_bugs_put_mass_on_sequences_the_grammar_forbids():
    # vLLM #31858: token 1 after the reasoning end 2; TGI: a token twice in a row
    V, N = 3, 4
    for name, bad in (("vllm-31858", lambda s: any(s[i] == 2 and 1 in s[i + 1:]
                                                   for i in range(N))),
                      ("tgi-grammar", lambda s: any(s[i] == s[i + 1] for i in range(N - 1)))):
        law, tgt, _ = _law(name, 2)
        seqs = [tuple((i // V ** (N - 1 - j)) % V for j in range(N)) for i in range(V ** N)]
        forbidden = np.array([bad(s) for s in seqs])
        assert tgt[forbidden].sum() == 0, name
        assert law[forbidden].sum() > 0.01, name


# ----------------------------------------------------------------------------- replicas vs laws


@pytest.mark.parametrize("name", list(ss.REPLICAS))
def test_replica_counts_follow_its_exact_law(name):
    rep = ss.REPLICAS[name]
    sp = rep.sampling()
    n = 3000
    law, tgt, sched = _law(name, 2)
    assert _gap(sched, n) < 1e-9
    obs = sample_steps(ss.replica_step(rep.rule), INST, n, seed=11, steps=2, sampling=sp)
    ok, t = _agrees(obs, law, n)
    assert ok, (name, t)
    # power against a planted bias: the same counts reject the target law
    bad, _ = _agrees(obs, tgt, n)
    assert not bad, name


def test_stateful_replica_follows_its_law_when_samples_are_stepped_twice_in_a_round():
    # steps = 3: in round 3 check_step steps again a sample moved to a count still to come;
    # SGLang #33643's per-step state sees those boundaries
    rep = ss.REPLICAS["sglang-33643-frequency"]
    sp = rep.sampling()
    n = 4000
    law, _, sched = _law("sglang-33643-frequency", 3)
    assert _gap(sched, n) < 1e-9
    assert sched[2] and len(sched[1]) == 3  # round 2 steps counts 1, 2 and 3
    obs = sample_steps(ss.replica_step(rep.rule), INST, n, seed=5, steps=3, sampling=sp)
    ok, t = _agrees(obs, law, n)
    assert ok, t


def test_stateful_replica_refuses_a_call_it_cannot_place():
    step = ss.replica_step("vmlx-361")
    lm_d, lm_t = TableLM(INST.draft, "draft"), TableLM(INST.target, "target")
    sp = ss.REPLICAS["vmlx-361"].sampling()
    step(StepRequest(torch.zeros(2, 0, dtype=torch.long), lm_d, lm_t, 2, sp, None, "probs",
                     None, 1))
    with pytest.raises(SpectheoryError, match="calling order"):
        step(StepRequest(torch.zeros(3, 5, dtype=torch.long), lm_d, lm_t, 2, sp, None, "probs",
                         None, 2))


# ----------------------------------------------------------------------------- the checks


@pytest.mark.parametrize("name", list(ss.REPLICAS))
def test_check_step_catches_each_replica_at_its_stated_samples(name):
    rep = ss.REPLICAS[name]
    sp = rep.sampling()
    law, tgt, _ = _law(name, rep.steps)
    assert ss.check_step_power(law, tgt, rep.samples, 1e-3, trials=1000) >= 0.99
    assert detection_power(law, tgt, rep.samples, 1e-3) >= 0.99
    r = check_step(ss.replica_step(rep.rule), instances=[INST], samples=rep.samples,
                   steps=rep.steps, sampling=sp, seed=0)
    assert not r.passed, name


def test_one_step_passes_the_bugs_of_the_committed_state():
    # vLLM #33251's double count needs a last sampled token: one step from the root passes it
    rep = ss.REPLICAS["vllm-33251"]
    sp = rep.sampling()
    r = check_step(ss.replica_step(rep.rule), instances=[INST], samples=rep.samples, steps=1,
                   sampling=sp, seed=0)
    assert r.passed


@pytest.mark.parametrize("step", [sglang_step, vllm_v1_step, transformers_step],
                         ids=["sglang", "vllm", "transformers"])
def test_correct_steps_pass_under_every_parameter_set(step):
    for sp in _distinct_samplings():
        r = check_step(step, instances=[INST], samples=1500, steps=2, sampling=sp, seed=3)
        assert r.passed, (step.__name__, str(sp), str(r))


def test_mistralrs_draft_half_fails_check_proposal_and_other_halves_do_not_exist():
    prop = check_proposal(ss.draft_half("mistralrs-2424"), instances=[INST], samples=2000)
    assert not prop.passed
    with pytest.raises(SpectheoryError, match="no half of this replica holds its defect"):
        ss.draft_half("sglang-40244")


# ----------------------------------------------------------------------------- numbers


def test_sglang_33643_effective_frequency_penalty():
    r = ss.effective_frequency_penalty(1.0, steps=3)
    # the buggy repeats lie strictly between a correct engine's at 0 and at the nominal 1
    assert r["repeats_nominal"] < r["repeats_buggy"]
    assert 0 < r["effective"] < 1
    # the effective penalty reproduces the buggy repeats in a correct engine's law
    inst = ss.toy_repeat_instance()
    N = 5
    law = target_sequence_law(inst, N, SamplingParams(frequency_penalty=r["effective"]))
    seqs = np.array(np.unravel_index(np.arange(3 ** N), (3,) * N)).T
    rep = np.array([sum(s[i] in s[:i] for i in range(N)) for s in seqs], dtype=float)
    assert abs(law @ rep - r["repeats_buggy"]) < 1e-8
    # the draft equals the target: most steps accept both drafts
    assert 2.5 < r["tokens_per_step"] <= 3


def test_step_law_size_and_a_grammar_over_another_vocabulary_are_refused_in_one_line(tmp_path):
    """stateful_step_law past 2^16 sequences raised a bare ValueError; a grammar over 2 tokens
    given with an instance of 3 is refused before any call, naming the instance."""
    import json

    from spectheory.inputs.random_instances import random_instance
    from spectheory.runtime.errors import OptionError, SizeLimitError
    from spectheory.testing import check_step, vllm_v1_step
    from spectheory.testing.mutants.stateful_steps import stateful_instance, stateful_step_law

    with pytest.raises(SizeLimitError, match=r"3\^32 is over 2\^16"):
        stateful_step_law("correct", stateful_instance(), 30)
    g = tmp_path / "g.json"
    g.write_text(json.dumps({"transitions": [[1, 0], [1, None]]}))
    insts = [random_instance(2, 2, 0), random_instance(3, 2, 1)]
    with pytest.raises(OptionError, match=r"the grammar has 2 tokens, the rows it masks 3 .*"
                                          r"\(instance 1\)"):
        check_step(vllm_v1_step, instances=insts, samples=4000, sampling=f"grammar={g}")


def test_a_row_emptied_past_the_laws_tokens_but_read_by_a_step_is_the_inputs_fault(tmp_path):
    """Two steps, L = 2: the last step's context has up to 3 tokens and it reads the target's
    rows after 5, past the N - 1 = 3 the law over N = 4 tokens reads. A grammar leaving no token
    after the reachable history (0, 0, 1, 2) ended in the step's GrammarError, blamed on the
    step; it is refused before the first call, naming the instance. With one step (contexts
    empty) nothing past the law is read and the same input is checked."""
    import json

    from spectheory.inputs.random_instances import random_instance
    from spectheory.inputs.stateful import GrammarError
    from spectheory.testing import check_step, vllm_v1_step

    g = tmp_path / "g4.json"
    g.write_text(json.dumps({"transitions": [[1, None, 0], [1, 2, None], [0, 0, 0]]}))
    inst = random_instance(3, 2, 5, denominator=12)
    calls = []

    def step(request):
        calls.append(1)
        return vllm_v1_step(request)

    with pytest.raises(GrammarError, match=r"^instance 0: the masks leave no token .* after "
                                           r"history \(0, 0, 1, 2\).*a step reads the target's "
                                           r"row there .*not the step$"):
        check_step(step, instances=[inst], steps=2, samples=4000, sampling=f"grammar={g}")
    assert calls == []
    assert check_step(vllm_v1_step, instances=[inst], steps=1, samples=4000,
                      sampling=f"grammar={g}").passed
