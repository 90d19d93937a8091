"""GBV's compiled CPU kernels (``spectheory.verifiers._gbv_cpu``) against plain references.

* the rank order (worst first) equals Python's ``sorted`` by (ratio, tie rule) and the torch
  route's stable sort of bit patterns, for float32 and float64, both tie rules, rows with many
  equal ratios, never-drafted tokens (q = 0, ratio -1), all ratios equal, and one token;
* the ``odd`` flag of the ratio keys: set for a NaN ratio, a -0.0 ratio and a negative one (where
  bit order and comparisons could disagree), clear for rows whose only negative is the -1 of q = 0;
* the q^G row and below(token) equal the torch route's values bit for bit for K = 1..5 (Horner
  depth), including a node with S_K(A, x) = 0 (then q), and the mass accumulated in float64 from
  the worst rank (a float32 running sum differs: the test shows it would be caught);
* rank positions read off an order equal the comparison counts of ``_rank_rows``.

The law-level comparisons (the previous implementation, bit for bit, on both routes) are in
``tests/test_real_laws_exact.py``."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

pytest.importorskip("numba")
kernels = importlib.import_module("spectheory.verifiers._gbv_cpu")
gbv_module = importlib.import_module("spectheory.verifiers.gbv")

DTYPES = [torch.float32, torch.float64]


def _rows(dtype, V=2000, seed=0):
    """A p, q row pair with 300 tokens of ratio 2, 200 of ratio 1/2, 50 never drafted and a
    prefix of random ratios (prefix-dependent rows elsewhere are the law tests' business)."""
    gen = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(V, generator=gen, dtype=torch.float64) * 3, 0).to(dtype)
    q = torch.softmax(torch.randn(V, generator=gen, dtype=torch.float64) * 3, 0).to(dtype)
    q[100:400], p[100:400] = 1e-4, 2e-4
    q[500:700], p[500:700] = 4e-4, 2e-4
    q[800:850] = 0
    return p, q


def _order(p, q, ties):
    scratch = gbv_module._KernelScratch(p.shape[0], gbv_module._np_float(p.dtype))
    order, odd = scratch.order(kernels, p.numpy(), q.numpy(), ties)
    return order.copy(), odd


def _reference_order(p, q, ties):
    """Worst first: ascending ratio (-1 where q = 0); among equal ratios the token ranked worse
    first: the larger id for ties "low" (smaller id ranks better), the smaller one for "high"."""
    r = [(-1.0 if qa == 0 else pa / qa) for pa, qa in zip(p.tolist(), q.tolist())]
    r = np.array(r, dtype=p.numpy().dtype).tolist()  # the ratio in the row's dtype
    sign = -1 if ties == "low" else 1
    return np.array(sorted(range(len(r)), key=lambda a: (r[a], sign * a)))


@pytest.mark.parametrize("ties", ["low", "high"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_rank_order_equals_sorted_and_torch(dtype, ties):
    p, q = _rows(dtype)
    order, odd = _order(p, q, ties)
    assert not odd
    assert np.array_equal(order, _reference_order(p, q, ties))
    r = gbv_module._ratio(p[None], q[None])
    torch_order = gbv_module._order_by_bits(r, ties, worst_first=True)[0].numpy()
    assert np.array_equal(order, torch_order)


@pytest.mark.parametrize("ties", ["low", "high"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_rank_order_all_equal_and_one_token(dtype, ties):
    """Every ratio equal (every radix pass trivial): the tie order alone; all equal but one
    (every digit shared by all keys but one: no pass may be skipped there); V = 1."""
    V = 1500
    p = torch.full((V,), 1.0 / V, dtype=dtype)
    order, _ = _order(p, p.clone(), ties)
    expected = np.arange(V)[::-1] if ties == "low" else np.arange(V)
    assert np.array_equal(order, expected)
    for t, factor in ((700, 2.0), (3, 0.5), (1499, 1 + 2**-20)):
        q = p.clone()
        q[t] = q[t] / factor
        order, _ = _order(p, q, ties)
        assert np.array_equal(order, _reference_order(p, q, ties)), (t, factor)
    one = torch.ones(1, dtype=dtype)
    assert _order(one, one, ties)[0].tolist() == [0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_odd_ratios_are_flagged(dtype):
    p, q = _rows(dtype)
    assert not _order(p, q, "low")[1]  # q = 0 gives -1: allowed
    for value in (float("nan"), -0.0, -1e-3):
        bad = p.clone()
        bad[7] = value
        assert _order(bad, q, "low")[1], value
    qnan = q.clone()
    qnan[9] = float("nan")
    assert _order(p, qnan, "low")[1]


def _torch_row(q, order, A, x, K):
    """below and the q^G row by the torch route's functions (its scratch-free forms)."""
    below = gbv_module._below_from_order(q[None], torch.as_tensor(order, dtype=torch.long)[None],
                                         worst_first=True)
    A1, x1 = A.reshape(1, 1), x.reshape(1, 1)
    den = gbv_module._power_sum(A.reshape(1), x.reshape(1), K).reshape(1, 1)
    row = gbv_module._skew_from_u(q[None], below * x1 + A1, x1, den, K)
    return below[0], row[0]


@pytest.mark.parametrize("K", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("dtype", DTYPES)
def test_skew_row_bit_identical_to_torch(dtype, K):
    p, q = _rows(dtype, seed=K)
    order, _ = _order(p, q, "low")
    f = gbv_module._np_float(dtype)
    for A, x in ((0.0, 1.0), (0.4375123, 1.3e-3), (0.9, 2.0**-20), (0.0, 0.0)):
        At, xt = torch.tensor(A, dtype=dtype), torch.tensor(x, dtype=dtype)
        below, row = _torch_row(q, order, At, xt, K)
        scratch = gbv_module._KernelScratch(q.shape[0], f)
        out = np.empty(q.shape[0], f)
        tok = 123
        b_tok = kernels.skew_row(q.numpy(), order, f(A), f(x), K, tok, scratch.below,
                                 scratch.ud, scratch.power, out)
        assert b_tok == below[tok].item()
        assert np.array_equal(out, row.numpy()), (A, x)
        if A == x == 0 and K > 1:  # S_K(0, 0) = 0: the row falls back to q
            assert np.array_equal(out, q.numpy())


def test_a_float32_running_sum_would_be_caught():
    """The masses below are float64 running sums rounded to float32 (as torch.cumsum of a
    float32 row); summing in float32 changes some of them, so the comparisons above can tell."""
    p, q = _rows(torch.float32)
    order, _ = _order(p, q, "low")
    acc, below32 = np.float32(0), np.empty(q.shape[0], np.float32)
    for t in order.tolist():
        below32[t] = acc
        acc = np.float32(acc + q[t].item())
    below, _ = _torch_row(q, order, torch.tensor(0.0), torch.tensor(1.0), 2)
    assert not np.array_equal(below32, below.numpy())


@pytest.mark.parametrize("ties", ["low", "high"])
def test_positions_equal_counts(ties):
    p, q = _rows(torch.float32)
    toks = torch.tensor([150, 399, 820, 5, 600])  # tied (ratio 2, 1/2), never drafted, random
    order, _ = _order(p, q, ties)
    pos = kernels.positions(order, toks.numpy(), np.empty(5, np.int64))
    counted = gbv_module._rank_rows(q.expand(5, -1), p.expand(5, -1), toks, ties)
    assert pos.tolist() == counted.tolist()


def test_route_rule(monkeypatch):
    """CPU float32/float64 rows of at least KERNEL_MIN_VOCAB tokens take the kernels; smaller
    rows, other dtypes and SPECTHEORY_NUMBA=0 take torch."""
    monkeypatch.delenv(gbv_module.KERNEL_ENV, raising=False)
    V = gbv_module.KERNEL_MIN_VOCAB
    assert gbv_module._kernels_for(torch.zeros(2, V)) is kernels
    assert gbv_module._kernels_for(torch.zeros(2, V, dtype=torch.float64)) is kernels
    assert gbv_module._kernels_for(torch.zeros(2, V - 1)) is None
    assert gbv_module._kernels_for(torch.zeros(2, V, dtype=torch.float16)) is None
    assert gbv_module._kernels_for(np.zeros((2, V))) is None
    monkeypatch.setenv(gbv_module.KERNEL_ENV, "0")
    assert gbv_module._kernels_for(torch.zeros(2, V)) is None


def test_zeros_beside_nan_rank_last_on_both_routes():
    """A row holding a NaN draft probability and zeros: the zeros get ratio -1 on both routes
    (a NaN minimum does not rule zeros out of the torch route's screen)."""
    p, q = _rows(torch.float32)
    q[10], q[11] = 0.0, float("nan")
    r = gbv_module._ratio(p[None], q[None])
    assert float(r[0, 10]) == -1.0
    torch_order = gbv_module._order_by_bits(r, "low", worst_first=True)[0].numpy()
    order, odd = _order(p, q, "low")
    assert odd and np.array_equal(order, torch_order)


@pytest.mark.parametrize("route", ["kernels", "torch"])
def test_p_of_another_dtype_or_vocabulary(route, monkeypatch):
    """p in float64 beside float32 q takes the torch route (the kernels read both rows with one
    dtype) and gives the torch route's law; p over another vocabulary is refused in one line."""
    from test_real_laws_exact import real_like_batch, use_route

    use_route(monkeypatch, route)
    x, q, p = real_like_batch(torch.float32)
    p64 = p.double()
    assert gbv_module._kernels_for(q, p64) is None
    mixed = gbv_module.gbv(x, q, p64)
    monkeypatch.setenv(gbv_module.KERNEL_ENV, "0")
    ref = gbv_module.gbv(x, q, p64)
    assert torch.equal(mixed.stop, ref.stop) and torch.equal(mixed.correction, ref.correction)
    wide = torch.cat([p, p[..., :1]], dim=-1)
    with pytest.raises(ValueError, match="one vocabulary; got 1502 and 1501$"):
        gbv_module.gbv(x, q, wide)


def test_kernels_that_cannot_load_leave_the_torch_route(tmp_path):
    """Where numba cannot cache its compiled code (no writable locator), importing the kernels
    fails: GBV then computes on torch, the same law, and says why it could not load them."""
    import json
    import os
    import subprocess
    import sys

    code = ("import importlib, json, torch\n"
            "g = importlib.import_module('spectheory.verifiers.gbv')\n"
            "g.KERNEL_MIN_VOCAB = 1\n"
            "gen = torch.Generator().manual_seed(0)\n"
            "q = torch.softmax(torch.randn(2, 3, 3, 50, generator=gen), -1)\n"
            "p = torch.softmax(torch.randn(2, 3, 4, 50, generator=gen), -1)\n"
            "x = torch.multinomial(q.reshape(-1, 50), 1, generator=gen).view(2, 3, 3)\n"
            "law = g.gbv(x, q, p)\n"
            "print(json.dumps([g._kernels_for(q) is None, g._KERNELS_UNAVAILABLE,\n"
            "                  law.stop.sum().item()]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["NUMBA_CACHE_LOCATOR_CLASSES"] = "UserProvidedCacheLocator"  # and no NUMBA_CACHE_DIR
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    none, why, total = json.loads(out.stdout.strip().splitlines()[-1])
    assert none and len(why) == 1 and "cache" in why[0]
    assert abs(total - 2.0) < 1e-6  # two blocks, each a probability law of tau


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("V", [1, 7, 4095, 4096, 4097, 10000])
def test_rows_equal_finds_a_difference_anywhere(dtype, V):
    """`rows_equal` (the shared-root check) against numpy: equal rows, and one differing entry
    at the first place, the last of every 4,096-entry block, the middle and the end."""
    rng = np.random.default_rng(V)
    a = rng.integers(-2**31, 2**31 - 1, V).astype(dtype)
    assert kernels.rows_equal(a, a.copy())
    for at in sorted({0, V // 2, V - 1, *range(4095, V, 4096)}):
        b = a.copy()
        b[at] ^= 1 << (at % 31)
        assert not kernels.rows_equal(a, b) and not kernels.rows_equal(b, a), at


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K", [1, 2, 3, 4, 5])
def test_path_tail_equals_the_torch_route(dtype, K):
    """The rows that need no rank order, px, qx and the block weights of a path, as the torch
    route computes them (`_skew_negligible`, gathers, `block_weight` position by position),
    bit for bit: S_K(A, x) = 0 (a row of q), q^G(X) = 0 (ratio 1), a weight clamped at 1, a
    NaN weight, and rows left alone (written by skew_row)."""
    from spectheory.verifiers.block import block_weight
    from spectheory.verifiers.gbv import _power_sum, _skew_negligible

    rng = np.random.default_rng(K)
    L, V = 7, 1001
    q = (rng.random((L, V)) * np.exp2(-rng.integers(0, 40, (L, V)))).astype(dtype)
    q /= q.sum(1, keepdims=True)
    p = (rng.random((L + 1, V)) * np.exp2(-rng.integers(0, 40, (L + 1, V)))).astype(dtype)
    p /= p.sum(1, keepdims=True)
    toks = rng.integers(0, V, L)
    q[3, toks[3]] = 0  # q^G(X_3) = 0 below (A = x = 0 keeps the row q): ratio 1
    p[4, toks[4]] = np.nan  # a NaN weight from position 5 on
    p[0, toks[0]] = 1  # ratio above 1 at position 0 (q^G there is skew_row's, below 1): the clamp
    A = rng.random(L).astype(dtype) * 0.3
    x = rng.random(L).astype(dtype) * 1e-3
    A[3] = x[3] = 0  # S_K(0, 0) = 0 for K >= 2: the row is q
    A[5] = np.float32(-0.0) if dtype == np.float32 else -0.0  # A + 0 = +0.0
    skipped = np.array([False, True, False, True, False, False, False])
    j = 4
    written = rng.random((L, V)).astype(dtype)  # rows 0 and 2: skew_row's (left alone)
    qg = written.copy()
    f = dtype
    px, qx, w = np.empty(L, f), np.empty(L, f), np.empty(L + 1, f)
    kernels.path_tail(q, p, toks, A, x, K, j, skipped, qg, px, qx, w, f(0), f(1))
    tq, tA, tx = torch.from_numpy(q), torch.from_numpy(A), torch.from_numpy(x)
    ref = torch.from_numpy(written.copy())
    den1 = _power_sum(tA, tx, K).unsqueeze(-1)
    for i in range(L):
        if i >= j or skipped[i]:
            ref[i:i + 1] = _skew_negligible(tq[i:i + 1], tA[i:i + 1], den1[i:i + 1], K)
    bits = np.int32 if dtype == np.float32 else np.int64
    assert np.array_equal(qg.view(bits), ref.numpy().view(bits))
    t = torch.from_numpy(toks).unsqueeze(-1)
    rpx = torch.from_numpy(p)[:L].gather(1, t)[:, 0]
    rqx = ref.gather(1, t)[:, 0]
    rw = torch.ones(L + 1, dtype=rpx.dtype)
    for i in range(1, L + 1):
        rw[i:i + 1] = block_weight(rw[i - 1:i], rpx[i - 1:i], rqx[i - 1:i])
    assert np.array_equal(px.view(bits), rpx.numpy().view(bits))
    assert np.array_equal(qx.view(bits), rqx.numpy().view(bits))
    assert np.array_equal(w.view(bits), rw.numpy().view(bits))
    assert np.isnan(w[-1]) and w[1] == 1 and (K == 1 or qx[3] == 0)
