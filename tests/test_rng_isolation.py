"""The kit's checks leave the caller's random generators as they were, on a machine with a GPU
too: every place that seeds torch's global generator inside ``torch.random.fork_rng(devices=[])``
seeds the CPU's alone (`seed_forked`). ``torch.manual_seed`` also seeds every CUDA device's
generator (queued until CUDA starts), which such a block does not put back, so a check moved
the caller's CUDA streams. Here CUDA's seeding functions are replaced by recorders: no entry
point may call them when no device is asked for, and the CPU draws are those of the same seed.
"""

from __future__ import annotations

import pytest
import torch

from spectheory import random_instance
from spectheory.testing import (TRTLLM, VLLM_V1, check_sampler, check_step, engine_sampler,
                                make_sampler, vllm_v1_rejection_sample)
from spectheory.testing.checks.step import transformers_step
from spectheory.testing.engines.adapters import hf_sampler
from spectheory.testing.engines.ports.trtllm import process_draft_tokens_rejection_sampling
from spectheory.testing.mutants.steps import sampler_half


@pytest.fixture
def cuda_seeding(monkeypatch):
    calls = []
    for name in ("manual_seed", "manual_seed_all"):
        monkeypatch.setattr(torch.cuda, name, lambda seed, name=name: calls.append(name))
    return calls


def _rows(B=16, L=2, V=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.softmax(torch.randn(B, L, V, generator=gen, dtype=torch.float64), -1)
    p = torch.softmax(torch.randn(B, L + 1, V, generator=gen, dtype=torch.float64), -1)
    drafts = torch.multinomial(q.reshape(-1, V), 1, generator=gen).reshape(B, L)
    return drafts, q, p


def _global_sampler(drafts, q, p, generator=None):
    """The kit's token sampler, drawing from torch's global generator."""
    return make_sampler("token")(drafts, q, p, None)


ENTRY_POINTS = {
    "a check (its global generator set aside)":
        lambda: check_sampler(_global_sampler, "token", samples=400),
    "an engine function, batched": lambda: engine_sampler(vllm_v1_rejection_sample, VLLM_V1)(
        *_rows(), torch.Generator().manual_seed(1)),
    "an engine function, request by request": lambda: engine_sampler(
        process_draft_tokens_rejection_sampling, TRTLLM)(*_rows(), torch.Generator().manual_seed(1)),
    "the transformers port": lambda: hf_sampler(*_rows(), torch.Generator().manual_seed(1)),
    "a replica's sampler half": lambda: sampler_half("hf-47932")(
        *_rows(), torch.Generator().manual_seed(1)),
    "the transformers step": lambda: check_step(transformers_step,
                                                instances=[random_instance(3, 2, seed=4)],
                                                samples=300, steps=1),
}


def _hf_generate():
    pytest.importorskip("transformers")
    from spectheory.testing.checks import hf_generate as H

    target, draft, _ = H.hf_models(random_instance(3, 2, seed=4))
    H.generate_counts(target, draft, samples=2, tokens=1)


ENTRY_POINTS["transformers' generate"] = _hf_generate


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_no_cuda_generator_is_seeded(name, cuda_seeding):
    ENTRY_POINTS[name]()
    assert cuda_seeding == []


def test_the_caller_cpu_stream_is_left_alone_and_the_draws_repeat():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = engine_sampler(vllm_v1_rejection_sample, VLLM_V1)(*_rows(), torch.Generator().manual_seed(1))
    assert torch.equal(torch.random.get_rng_state(), before)
    b = engine_sampler(vllm_v1_rejection_sample, VLLM_V1)(*_rows(), torch.Generator().manual_seed(1))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
