"""``engine_sampler(fn, preset, device=...)``: the engine function runs on a device, with every
argument built on the CPU as without it (the same randomness from the kit's generator) and
moved there, its outputs read back on the CPU; bad devices and unsupported combinations are
refused in one line. Where CUDA is present, the ports run on it and pass the law check."""

from __future__ import annotations

import functools

import pytest
import torch

from spectheory.runtime.errors import OptionError
from spectheory.testing import (SGLANG_CHAIN, TRANSFORMERS, VLLM_MRV2, VLLM_V1, check_sampler,
                                engine_sampler, sglang_chain_speculative_sampling,
                                vllm_mrv2_engine_rejection_sample, vllm_v1_rejection_sample)
from spectheory.testing.engines.adapters import hf_sampler

PORTS = [(vllm_v1_rejection_sample, VLLM_V1), (vllm_mrv2_engine_rejection_sample, VLLM_MRV2),
         (sglang_chain_speculative_sampling, SGLANG_CHAIN)]


def _rows(seed=0, B=64, L=3, V=5):
    gen = torch.Generator().manual_seed(seed)
    q = torch.softmax(torch.randn(B, L, V, generator=gen, dtype=torch.float64) * 2, -1)
    p = torch.softmax(torch.randn(B, L + 1, V, generator=gen, dtype=torch.float64) * 2, -1)
    drafts = torch.multinomial(q.reshape(-1, V), 1, generator=gen).reshape(B, L)
    return drafts, q, p


@pytest.mark.parametrize("fn,layout", PORTS, ids=[lay.name for _, lay in PORTS])
def test_device_cpu_draws_what_the_plain_sampler_draws(fn, layout):
    """The arguments are built before they move, from the same generator: on the CPU the
    outputs are the plain sampler's, draw for draw, and the engine sees tensors on the device
    asked for (and its per-request generators there)."""
    seen = set()

    @functools.wraps(fn)
    def spy(*args, **kw):
        for v in list(args) + list(kw.values()):
            if isinstance(v, torch.Tensor):
                seen.add(v.device.type)
            if isinstance(v, dict):
                seen.update(g.device.type for g in v.values() if isinstance(g, torch.Generator))
        return fn(*args, **kw)

    drafts, q, p = _rows()
    plain = engine_sampler(spy, layout)(drafts, q, p, torch.Generator().manual_seed(7))
    moved = engine_sampler(spy, layout, device="cpu")(drafts, q, p,
                                                      torch.Generator().manual_seed(7))
    assert all(torch.equal(a, b) for a, b in zip(plain, moved))
    assert seen == {"cpu"}


@pytest.mark.parametrize("device,says", [
    ("nonsense", "device 'nonsense' cannot be used here"),
    (3, "not int"),
    (True, "not bool"),
    ("meta", "holds no values"),
])
def test_bad_devices_are_refused_in_one_line(device, says):
    with pytest.raises(OptionError) as err:
        engine_sampler(vllm_v1_rejection_sample, VLLM_V1, device=device)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_device_with_sampling_or_a_per_row_layout_is_refused():
    with pytest.raises(OptionError, match="leave one out"):
        engine_sampler(vllm_v1_rejection_sample, VLLM_V1, sampling="top_k=2", device="cpu")
    with pytest.raises(OptionError, match="one request at a time"):
        engine_sampler(hf_sampler, TRANSFORMERS, device="cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("fn,layout", PORTS, ids=[lay.name for _, lay in PORTS])
def test_ports_on_cuda_pass_the_law_check(fn, layout):
    rep = check_sampler(engine_sampler(fn, layout, device="cuda"), "token", samples=20_000)
    assert rep.passed, rep


@pytest.mark.parametrize("layout", [VLLM_V1, VLLM_MRV2, SGLANG_CHAIN], ids=lambda lay: lay.name)
def test_every_argument_is_moved_to_the_device(layout, monkeypatch):
    """`_build` with a device: every tensor handed to the engine (rows, drafts, counts, coins,
    buffers) is on it and every per-request generator is made for it, the randomness drawn on
    the CPU first (the meta device, which any machine has, stands in for a GPU; generators,
    which it cannot hold, are recorded)."""
    from spectheory.testing.engines.layouts import _build

    drafts, q, p = _rows(B=4)
    gen = torch.Generator().manual_seed(1)
    made, real = [], torch.Generator

    def generator(device=None):
        made.append(torch.device(device).type)
        return real()

    monkeypatch.setattr(torch, "Generator", generator)
    kw, values = _build(layout, drafts, q, p, gen, device=torch.device("meta"))
    tensors = [v for v in values.values() if isinstance(v, torch.Tensor)]
    assert tensors and all(t.device.type == "meta" for t in tensors)
    if "generators" in values:
        assert made == ["meta"] * 4
