"""GBV's device route (rows off the CPU: every row of a chunk ranked in one sort, the rows that
need a sort batched) gives the CPU route's values.

On a machine without a GPU the route is taken with CPU rows (``_DEVICE_ROUTE_ON_CPU``): the same
operations in the same order per row, so the laws must equal the CPU route's bit for bit, for
each way of sorting (``DEVICE_SORT``), in chunks of one row and of many, on rows that take every
branch: a shared root, ties, zeros, q^G rows whose x below is negligible against A beside rows in
the same batch that need a sort, float32 and float64. Where CUDA is present the law on the GPU is
compared with the CPU's to float rounding.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from spectheory import random_instance
from test_real_laws_exact import LAWS, _counted, joint_inputs, real_like_batch

gbv_module = importlib.import_module("spectheory.verifiers.gbv")

SORTS = ["flat", "rows", "float"]


def _calls(monkeypatch, name):
    """Wrap gbv_module.<name>: the list of the row counts it was called with."""
    sizes, real = [], getattr(gbv_module, name)

    def spy(q_rows, *args, **kw):
        sizes.append(int(q_rows.shape[0]))
        return real(q_rows, *args, **kw)

    monkeypatch.setattr(gbv_module, name, spy)
    return sizes


def _cpu_laws(x, q, p, monkeypatch):
    monkeypatch.setenv(gbv_module.KERNEL_ENV, "0")
    return {name: new(x, q, p) for name, (new, _) in LAWS.items() if name != "specinfer"}


def _device_laws(x, q, p, monkeypatch, sort: str, chunk: int,
                 names=("gbv", "gbv-mismatched-ties")):
    monkeypatch.setattr(gbv_module, "_DEVICE_ROUTE_ON_CPU", True)
    monkeypatch.setattr(gbv_module, "DEVICE_SORT", sort)
    monkeypatch.setattr(gbv_module, "DEVICE_CHUNK_ELEMENTS", chunk)
    try:
        return {name: LAWS[name][0](x, q, p) for name in names}
    finally:
        monkeypatch.setattr(gbv_module, "_DEVICE_ROUTE_ON_CPU", False)


@pytest.mark.parametrize("chunk", [1, 2**27])
@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_device_route_is_the_cpu_route_bit_for_bit(dtype, sort, chunk, monkeypatch):
    x, q, p = real_like_batch(dtype)
    want = _cpu_laws(x, q, p, monkeypatch)
    screens = _counted(monkeypatch, "_negligible_rows")
    batched = _calls(monkeypatch, "_device_below")
    got = _device_laws(x, q, p, monkeypatch, sort, chunk)
    for name in want:
        assert torch.equal(got[name].stop, want[name].stop), name
        assert torch.equal(got[name].correction, want[name].correction), name
    assert batched  # the device sorts ran
    if dtype == torch.float32:  # some rows needed no sort, beside rows that did
        assert screens.get(True, 0) > 0 and screens.get(False, 0) > 0


def test_the_rows_a_batch_sorts_are_the_ones_the_screen_did_not_pass(monkeypatch):
    """In a batch where only some rows pass the screen, only the others reach the sort (one
    sort for all of them), and a row's q^G row is the one it has when ranked alone."""
    x, q, p = real_like_batch(torch.float32)
    sizes = _calls(monkeypatch, "_device_below")
    got = _device_laws(x, q, p, monkeypatch, "flat", 2**27, ["gbv"])["gbv"]
    Bn, L = x.shape[0], x.shape[2]
    assert sizes[0] == Bn  # the root: every block sorts (A = 0 never passes)
    assert any(0 < n < Bn for n in sizes)  # a depth where some rows passed and were not sorted
    assert sum(sizes) < Bn * L
    for b in range(Bn):  # each block alone: the same law as in the batch
        alone = _device_laws(x[b:b + 1], q[b:b + 1], p[b:b + 1], monkeypatch, "flat", 2**27,
                             ["gbv"])
        assert torch.equal(alone["gbv"].stop[0], got.stop[b])
        assert torch.equal(alone["gbv"].correction[0], got.correction[b])


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("K", [2, 3])
def test_engine_batches_on_the_device_route(K, sort, monkeypatch):
    """Thousands of joint outcomes of a small instance (V = 3, few distinct ratios: many ties),
    float64, and the exact engine's analytic route: the CPU route's values."""
    drafts, q, p = joint_inputs(random_instance(3, 2, 7), K, exact=False)
    want = _cpu_laws(drafts, q, p, monkeypatch)
    got = _device_laws(drafts, q, p, monkeypatch, sort, 2**27)
    for name in want:
        assert torch.equal(got[name].stop, want[name].stop), name
        assert torch.equal(got[name].correction, want[name].correction), name


@pytest.mark.parametrize("ties", ["low", "high"])
@pytest.mark.parametrize("sort", SORTS)
def test_device_order_is_the_cpu_bit_order(sort, ties, monkeypatch):
    """The worst-first order of each way of sorting equals `_order_by_bits`', row by row, on
    rows with runs of equal ratios and never-drafted tokens (ratio -1); on a row with a ratio
    -0.0 beside a 0.0, torch's float sort (``"float"``) alone orders them otherwise."""
    gen = torch.Generator().manual_seed(3)
    r = torch.randint(0, 6, (9, 40), generator=gen).float() / 4  # many ties
    r[:, 7] = -1.0
    r[2] = 0.5
    r[4, 11] = -0.0  # below +0.0 in the bit order; torch's float sort takes it for 0.0
    r[4, 12] = 0.0
    monkeypatch.setattr(gbv_module, "DEVICE_SORT", sort)
    got = gbv_module._device_worst_first(r, ties)
    for i in range(r.shape[0]):
        want = gbv_module._order_by_bits(r[i:i + 1], ties, worst_first=True)
        assert torch.equal(got[i], want[0]) == (sort != "float" or i != 4), i


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_law_matches_the_cpu_law(dtype):
    x, q, p = real_like_batch(dtype)
    for name, (new, _) in LAWS.items():
        want = new(x, q, p)
        got = new(x.cuda(), q.cuda(), p.cuda())
        tol = 1e-5 if dtype == torch.float32 else 1e-12
        assert torch.allclose(got.stop.cpu(), want.stop, atol=tol, rtol=0), name
        assert torch.allclose(got.correction.cpu(), want.correction, atol=tol, rtol=0), name


@pytest.mark.parametrize("sort", SORTS)
def test_below_mass_in_chunks_of_rows(sort, monkeypatch):
    """`below_mass` of many device rows in chunks of 3 rows (the last one short): every chunk
    ranked, the CPU's masses bit for bit."""
    gen = torch.Generator().manual_seed(5)
    q = torch.softmax(torch.randn(10, 50, generator=gen, dtype=torch.float64), -1)
    p = torch.softmax(torch.randn(10, 50, generator=gen, dtype=torch.float64), -1)
    q[:, :6] = q[:, 6:12]
    p[:, :6] = p[:, 6:12]  # ties
    q[:, 20] = 0.0
    want = gbv_module.below_mass(q, p, "low")
    monkeypatch.setattr(gbv_module, "_DEVICE_ROUTE_ON_CPU", True)
    monkeypatch.setattr(gbv_module, "DEVICE_SORT", sort)
    monkeypatch.setattr(gbv_module, "DEVICE_CHUNK_ELEMENTS", 3 * 50)
    sizes = _calls(monkeypatch, "_device_worst_first")
    assert torch.equal(gbv_module.below_mass(q, p, "low"), want)
    assert sizes == [3, 3, 3, 1]
