"""The fast batched laws (token, block: row-chunked node steps; GBV: O(V) rank counting and one
sort of packed keys) equal the previous implementations (tests/previous_laws.py) to float32
tolerance on real-model-like rows, and exactly in rationals; the stop-only route equals the
stop table of the full law."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import previous_laws as prev
import spectheory.engine.nodes as nodes
from spectheory.law import validate_law
from spectheory.engine.nodes import expected_accepted, stop_probabilities
from spectheory.inputs.random_instances import random_instance
from spectheory.engine.seqtree import levels, sequence_tokens
from spectheory.verifiers import (block_verification, gbv, gbv_mismatched_ties,
                                  token_verification, uniform_product_verification)
from spectheory.verifiers.gbv import drafted_rank, rank_and_below

V, Bn, K, L = 3001, 5, 3, 4


def _rows(gen, *shape, dtype):
    return torch.softmax(torch.randn(*shape, generator=gen, dtype=torch.float64) * 3, -1).to(dtype)


def _batch(dtype, seed=0):
    """Prefix-dependent rows (every path and position its own row, the root shared by the K
    paths), with planted ties (equal p/q), zero draft probabilities and a row with p = q."""
    gen = torch.Generator().manual_seed(seed)
    p = _rows(gen, Bn, K, L + 1, V, dtype=dtype)
    q = _rows(gen, Bn, K, L, V, dtype=dtype)
    q[..., :40] = 1e-4
    p[..., :40] = 2e-4  # 40 tokens with the same ratio 2 at every node
    q[..., 40:45] = 0  # never drafted
    p[1, :, 2] = q[1, :, 2] = 1 / V  # p = q at one node
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
    p[:, :, 0], q[:, :, 0] = p[:, :1, 0], q[:, :1, 0]
    x = torch.multinomial(q.reshape(-1, V).double(), 1, generator=gen).view(Bn, K, L)
    x[0, 0, 0] = 3  # a tied token drafted
    x[0, 1, 0] = 3
    return x, q, p


def _close(a, b, tol):
    assert a.shape == b.shape
    assert float((a.double() - b.double()).abs().max()) <= tol


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-6), (torch.float64, 1e-13)])
def test_single_path_equal_previous(dtype, tol, monkeypatch):
    x, q, p = _batch(dtype)
    for fn, old in ((token_verification, prev.token_verification),
                    (block_verification, prev.block_verification)):
        a, b = fn(x[:, 0], q[:, 0], p[:, 0]), old(x[:, 0], q[:, 0], p[:, 0])
        _close(a.stop, b.stop, tol)
        _close(a.correction, b.correction, tol)
        assert not (a.correction < 0).any()
        validate_law((a.stop[:, None], a.correction[:, None]), Bn, 1, L, V, False,
                     tol=1e-4 if dtype == torch.float32 else 1e-9)
        monkeypatch.setattr(nodes, "ROW_CHUNK_ELEMENTS", 2 * V)  # two rows per chunk
        c = fn(x[:, 0], q[:, 0], p[:, 0])
        assert torch.equal(c.stop, a.stop) and torch.equal(c.correction, a.correction)
        monkeypatch.undo()


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-6), (torch.float64, 1e-13)])
def test_gbv_equal_previous(dtype, tol):
    x, q, p = _batch(dtype, seed=1)
    for fn, old in ((gbv, prev.gbv), (gbv_mismatched_ties, prev.gbv_mismatched_ties)):
        a, b = fn(x, q, p), old(x, q, p)
        _close(a.stop, b.stop, tol)
        _close(a.correction, b.correction, tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ties", ["low", "high"])
def test_ranks_equal_previous(dtype, ties):
    x, q, p = _batch(dtype, seed=2)
    pos, below = rank_and_below(q, p[:, :, :L], ties)
    pos0, below0 = prev.rank_and_below(q, p[:, :, :L], ties)
    assert torch.equal(pos, pos0)
    assert torch.equal(below, below0)
    assert torch.equal(drafted_rank(x, q, p, ties), prev.drafted_rank(x, q, p, ties))


def test_gbv_exact_rationals_equal_previous():
    inst = random_instance(3, 2, 4, denominator=6)  # prefix-dependent rows with ties and zeros
    ql, pl = levels(inst.draft, 0, 2, True), levels(inst.target, 0, 3, True)
    f = np.arange(9)
    d1 = sequence_tokens(f, 2, 3)
    drafts = np.stack([d1, d1[::-1]], axis=1)  # [9, 2, 2]
    idx = np.stack([f, f[::-1]], axis=1)
    q = np.stack([np.stack([ql[j][idx[:, k] // 3 ** (2 - j)] for j in range(2)], 1)
                  for k in range(2)], 1)
    p = np.stack([np.stack([pl[j][idx[:, k] // 3 ** (2 - j)] for j in range(3)], 1)
                  for k in range(2)], 1)
    for fn, old in ((gbv, prev.gbv), (gbv_mismatched_ties, prev.gbv_mismatched_ties)):
        a, b = fn(drafts, q, p), old(drafts, q, p)
        assert (a.stop == b.stop).all() and (a.correction == b.correction).all()


def test_stop_only_route():
    x, q, p = _batch(torch.float32, seed=3)
    x, q, p = x[:, 0], q[:, 0], p[:, 0]
    for name, fn in (("token", token_verification), ("block", block_verification),
                     ("uniform-product", uniform_product_verification)):
        stop = stop_probabilities(name, x, q, p)
        assert torch.equal(stop, fn(x, q, p).stop)
        e = expected_accepted(name, x, q, p)
        assert torch.allclose(e, (stop * torch.arange(L + 1)).sum(1))
