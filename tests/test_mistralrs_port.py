"""mistral.rs's speculative step (a port of sample_target_sequence_speculative): as released it
emits the greedy chain of the processed target at any temperature (the exact law: a point mass,
TV 1 - P(greedy sequence)); PR #2424 samples plainly when the request is not greedy; under a
repetition penalty its positions read the committed tokens only. alpha = 1e-3 throughout."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import spectheory as st
from spectheory.runtime.errors import OptionError
from spectheory.testing.engines.ports.mistralrs import mistralrs_step
from spectheory.testing.checks.step import check_step, sample_steps, target_sequence_law

def _self_draft(inst):
    """The target as its own draft (q = p): greedy drafts are the unpenalised argmax chain, so
    a target position penalised from the committed tokens only accepts them."""
    from spectheory.inputs.instances import Instance

    return Instance(inst.vocab_size, inst.block_length, inst.target, inst.target)


INSTS = [st.random_instance(3, 2, 21), st.random_instance(3, 2, 23, alpha=0.5)]
SELF = [_self_draft(st.random_instance(3, 2, s)) for s in (24, 28)]  # penalties move their argmax


def step(version):
    return functools.partial(mistralrs_step, version=version)


def test_released_emits_the_greedy_chain_at_any_temperature():
    import torch

    from spectheory.testing.checks.step import StepRequest, TableLM

    inst = INSTS[0]
    req = StepRequest(torch.zeros(64, 0, dtype=torch.long), TableLM(inst.draft, "draft"),
                      TableLM(inst.target, "target"), 2, st.parse_sampling("temperature=0.7")
                      if hasattr(st, "parse_sampling") else "temperature=0.7",
                      generator=torch.Generator().manual_seed(0))
    out = step("released")(req)
    assert (out == out[0]).all()  # one output for every row: a point mass
    k = int((out[0] >= 0).sum())
    emitted = tuple(out[0, :k].tolist())
    chain = target_sequence_law(inst, k, "temperature=0")
    law = target_sequence_law(inst, k, "temperature=0.7")
    idx = int(np.dot(emitted, [3 ** (k - 1 - j) for j in range(k)]))
    assert chain[idx] == 1  # the processed target's greedy chain
    assert 1 - law[idx] > 0.5  # the exact TV of the released step's first block to the target
    rep = check_step(step("released"), INSTS, samples=2000, steps=2,
                     sampling="temperature=0.7")
    assert not rep.passed


@pytest.mark.parametrize("version,sampling,passes", [
    ("released", "temperature=0", True),
    ("released", "temperature=0,repetition_penalty=4,presence_penalty=1", False),
    ("pr2424", "temperature=0.7", True),
    ("pr2424", "temperature=0,repetition_penalty=4,presence_penalty=1", False),
    ("fixed", "temperature=0,repetition_penalty=4,presence_penalty=1", True),
    ("fixed", "temperature=0.7,repetition_penalty=4,presence_penalty=1", True),
])
def test_versions(version, sampling, passes):
    rep = check_step(step(version), SELF, samples=3000, steps=2, sampling=sampling)
    assert rep.passed is passes, rep


def test_bad_version():
    with pytest.raises(OptionError, match="version"):
        mistralrs_step(None, version="nightly")
