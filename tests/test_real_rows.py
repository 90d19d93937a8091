"""The compiled correction rows of token and block verification (float32, CPU) are the torch
route's bit for bit.

``spectheory.verifiers.compiled_rows`` builds the correction rows of real vocabularies with
numba kernels that reproduce torch's arithmetic (its residuals, the order of its row sums, its
zero-total patch). Every comparison here is of bit patterns (``int32`` views: the sign of a zero
and a NaN's bits count), between the whole law with the kernels and with
``SPECTHEORY_NUMBA=0``. The threshold ``ROWS_MIN_VOCAB`` is lowered so that small vocabularies
(every length of the tail past the last whole step and vector) take the kernels; the cascade of
torch's partial sums is reached at its second and third levels (V >= 8,192 and 131,072) and, on
one row, at a level width of 32 (V > 2^24).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from spectheory.verifiers import block_verification, token_verification
from spectheory.verifiers import gbv as gbv_law
from spectheory.verifiers import compiled_rows
from spectheory.engine.nodes import stop_probabilities

rows_cpu = importlib.import_module("spectheory.verifiers._rows_cpu")
pytestmark = pytest.mark.xdist_group("numba")


def bits(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().numpy().view(np.int32)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(bits(a), bits(b))


@pytest.fixture
def kernels(monkeypatch):
    """Every float32 CPU vocabulary of at least 8 entries takes the kernels; counts the calls that
    the kernels completed and those left to torch."""
    monkeypatch.delenv(compiled_rows.KERNEL_ENV, raising=False)
    monkeypatch.setattr(compiled_rows, "ROWS_MIN_VOCAB", rows_cpu.LANES)
    return counted(monkeypatch, compiled_rows, "_run")


def counted(monkeypatch, owner, name: str) -> dict:
    """Wrap ``owner.<name>`` (a function returning None where the torch route must run) to count
    its calls: {"kernel": completed by the kernels, "torch": left to torch}."""
    calls = {"kernel": 0, "torch": 0}
    fn = getattr(owner, name)

    def wrapped(*args):
        out = fn(*args)
        calls["torch" if out is None else "kernel"] += 1
        return out

    monkeypatch.setattr(owner, name, wrapped)
    return calls


def torch_route(monkeypatch, fn, *args):
    monkeypatch.setenv(compiled_rows.KERNEL_ENV, "0")
    try:
        return fn(*args)
    finally:
        monkeypatch.delenv(compiled_rows.KERNEL_ENV)


def instance(V: int, B: int = 5, L: int = 3, seed: int = 0, spread: float = 3.0):
    """Prefix-dependent rows (every row its own draw) with ties (q = p on a third of each row),
    zeros, a drafted token of q = 0 and a row of p = q (token's residual of total zero)."""
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(B, L + 1, V, generator=g) * spread, -1)
    q = torch.softmax(torch.randn(B, L, V, generator=g) * spread, -1)
    q[..., : V // 3] = p[:, :L, : V // 3]
    q[..., -1] = 0
    q = q / q.sum(-1, keepdim=True)
    p[:, :, V // 2] = 0
    x = torch.multinomial(q.reshape(-1, V), 1, generator=g).view(B, L)
    x[0, -1] = V - 1  # q(x) = 0: ratio 1
    if B > 1:
        q[1, 0] = p[1, 0]  # p = q: token's residual is zero, its correction p
    return x, q, p


VOCABS = [8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 100, 255, 256, 257, 513, 1000, 4099, 8197]


@pytest.mark.parametrize("law", [token_verification, block_verification],
                         ids=["token", "block"])
@pytest.mark.parametrize("V", VOCABS)
def test_laws_bit_for_bit(law, V, kernels, monkeypatch):
    x, q, p = instance(V, seed=V)
    got = law(x, q, p)
    ref = torch_route(monkeypatch, law, x, q, p)
    assert same(got.stop, ref.stop) and same(got[1], ref[1])
    assert kernels["kernel"] > 0


@pytest.mark.parametrize("V", VOCABS)
def test_block_stop_probabilities_alone_bit_for_bit(V, kernels, monkeypatch):
    """Block's stop probabilities without its corrections (``stop_probabilities``, the paired
    comparisons' route): the sums S_i from one compiled read of each row (`compiled_totals`, no
    row written), the torch route's stop table bit for bit, and the full law's."""
    totals = counted(monkeypatch, importlib.import_module("spectheory.verifiers.block"),
                     "compiled_totals")
    x, q, p = instance(V, seed=V + 1)
    block_verification(x, q, p)  # the kernels' probe, once
    before = kernels["kernel"]
    got = stop_probabilities("block", x, q, p)
    assert kernels["kernel"] == before and totals["kernel"] > 0  # sums only, no row written
    ref = torch_route(monkeypatch, lambda *a: stop_probabilities("block", *a), x, q, p)
    assert same(got, ref) and same(got, block_verification(x, q, p).stop)


@pytest.mark.parametrize("law", [token_verification, block_verification],
                         ids=["token", "block"])
def test_real_vocabulary_and_the_third_cascade_level(law, monkeypatch):
    monkeypatch.delenv(compiled_rows.KERNEL_ENV, raising=False)
    for V in (151936, 131072 + 77):
        x, q, p = instance(V, B=2, L=2, seed=1)
        got = law(x, q, p)
        ref = torch_route(monkeypatch, law, x, q, p)
        assert same(got.stop, ref.stop) and same(got[1], ref[1])
    assert compiled_rows._PROBES[151936] is not None  # the route was taken here


def test_block_zero_totals_in_a_mixed_batch(kernels, monkeypatch):
    """A drafted token of target probability zero makes w = 0, so block's residual below it has
    total zero and its correction is p; the other rows of the batch keep their quotients as they
    are (-0.0 where the residual is zero): a row's bits do not depend on the rest of its batch,
    on either route."""
    V = 100
    x, q, p = instance(V, B=6, L=3, seed=7)
    x[::2, 0] = V // 2  # p = 0 there
    got = block_verification(x, q, p)
    ref = torch_route(monkeypatch, block_verification, x, q, p)
    assert same(got[1], ref[1]) and same(got.stop, ref.stop)
    assert same(ref[1][::2, 1], p[::2, 1])
    other = ref[1][1::2, 1]
    assert bool((torch.signbit(other) & (other == 0)).any())
    assert kernels["kernel"] > 0


@pytest.mark.parametrize("law", [token_verification, block_verification],
                         ids=["token", "block"])
def test_a_rows_bits_do_not_depend_on_its_batch(law, monkeypatch):
    """Each draft's law alone equals its rows in the batch, bit for bit, on both routes (the
    batch mixes rows of total zero with others)."""
    V = 64
    x, q, p = instance(V, B=6, L=3, seed=5)
    x[::2, 0] = V // 2
    monkeypatch.setattr(compiled_rows, "ROWS_MIN_VOCAB", rows_cpu.LANES)
    for route in ("1", "0"):
        monkeypatch.setenv(compiled_rows.KERNEL_ENV, route)
        whole = law(x, q, p)
        for b in range(x.shape[0]):
            alone = law(x[b:b + 1], q[b:b + 1], p[b:b + 1])
            assert same(alone[1][0], whole[1][b]) and same(alone.stop[0], whole.stop[b])


def test_all_rows_nonzero_keep_the_sign_of_zero(kernels, monkeypatch):
    """Where no total is zero torch divides only: block's zero entries are 0 / (negative) =
    -0.0, and so are the kernels'."""
    x, q, p = instance(64, B=3, L=2, seed=3)
    got = block_verification(x, q, p)
    ref = torch_route(monkeypatch, block_verification, x, q, p)
    assert same(got[1], ref[1])
    assert bool((torch.signbit(ref[1]) & (ref[1] == 0)).any())


@pytest.mark.parametrize("bad", ["nan", "inf", "negative", "minus zero"])
@pytest.mark.parametrize("law", [token_verification, block_verification],
                         ids=["token", "block"])
def test_entries_left_to_torch(law, bad, kernels, monkeypatch):
    """An entry of q or p that is NaN, infinite, negative or -0.0 sends the batch to the torch
    route (the kernels' comparisons could part from torch's there): the same bits, NaN included.
    At a drafted token it also makes block's weight below it NaN, infinite or negative, which
    the kernels leave to torch as well (the rows below are clean)."""
    x, q, p = instance(40, B=4, L=2, seed=11)
    value = {"nan": float("nan"), "inf": float("inf"), "negative": -1e-3,
             "minus zero": -0.0}[bad]
    p[2, 1, 7] = value
    q[3, 0, 9] = value
    p[1, 0, x[1, 0]] = value
    got = law(x, q, p)
    ref = torch_route(monkeypatch, law, x, q, p)
    assert same(got[1], ref[1]) and same(got.stop, ref.stop)
    assert kernels["torch"] > 0


@pytest.mark.parametrize("offset", range(8))
@pytest.mark.parametrize("w", [None, 0.75, 1.0, 0.0])
def test_unaligned_rows_and_weights(offset, w, kernels):
    """Rows that start anywhere (entries before the first 32-byte boundary of the output written
    one by one), and weights 1 and 0 (0: every total zero, the rows are p)."""
    g = torch.Generator().manual_seed(offset)
    V, n = 77, 3
    buf = torch.rand(3, n * V + 8, generator=g)
    p, q, out = (b[offset:offset + n * V].view(n, V) for b in buf)
    p.div_(p.sum(-1, keepdim=True))
    q.div_(q.sum(-1, keepdim=True))
    wt = None if w is None else torch.full((n,), w)
    total = compiled_rows.compiled_corrections(wt, p, q, out)
    if w is None:
        res = torch.sub(p, q).clamp_(min=0)
    else:
        res = torch.addcmul(q, p, wt.unsqueeze(-1), value=-1).clamp_(max=0)
    s = res.sum(-1)
    assert total is not None and same(total, s)
    if w == 0.0:
        assert same(out, p)
    else:
        assert same(out, res / s.unsqueeze(-1))


def test_overlapping_output_and_other_inputs_keep_torch(kernels):
    x = torch.rand(2, 64)
    assert compiled_rows.compiled_corrections(None, x, torch.rand(2, 64), x) is None
    p, q = torch.rand(2, 64), torch.rand(2, 64)
    assert compiled_rows.compiled_corrections(None, p.double(), q.double(),
                                              torch.empty(2, 64).double()) is None
    assert compiled_rows.compiled_corrections(None, p[:, ::2], q[:, ::2],
                                              torch.empty(2, 32)) is None
    assert compiled_rows.compiled_corrections(torch.ones(3), p, q, torch.empty(2, 64)) is None
    assert kernels["kernel"] == 0


def test_off_switch_and_a_mismatched_probe(monkeypatch):
    """SPECTHEORY_NUMBA=0, or a probe that found torch's arithmetic to differ, keep torch."""
    p, q = torch.rand(2, 20000), torch.rand(2, 20000)
    monkeypatch.delenv(compiled_rows.KERNEL_ENV, raising=False)
    assert compiled_rows.takes(p) and not compiled_rows.takes(p.double())
    assert not compiled_rows.takes(p[:, :16000])  # under ROWS_MIN_VOCAB
    monkeypatch.setenv(compiled_rows.KERNEL_ENV, "0")
    assert compiled_rows.compiled_corrections(None, p, q, torch.empty(2, 20000)) is None
    assert not compiled_rows.takes(p)
    monkeypatch.delenv(compiled_rows.KERNEL_ENV)
    monkeypatch.setitem(compiled_rows._PROBES, 20000, None)
    assert compiled_rows.compiled_corrections(None, p, q, torch.empty(2, 20000)) is None
    assert not compiled_rows.takes(p)


def test_a_cascade_level_32_steps_wide():
    """Past 2^19 steps (V > 2^24) torch's cascade levels are 2^5 steps apart, not 2^4."""
    V = 2**24 + 4 * rows_cpu.LANES * 3 + 5
    g = torch.Generator().manual_seed(5)
    p, q = torch.rand(1, V, generator=g), torch.rand(1, V, generator=g)
    levels = np.empty(4 * rows_cpu.STEP, np.float32)
    total, seen = rows_cpu.residual_sum(rows_cpu.TOKEN, q.numpy()[0], 0, p.numpy()[0], 0, V,
                                        np.float32(0), levels)
    assert seen < rows_cpu.BAD_BITS
    assert np.float32(total) == torch.sub(p, q).clamp_(min=0).sum(-1).numpy()[0]


def test_gbv_block_steps_bit_for_bit(kernels, monkeypatch):
    """GBV's block step against q^G takes the same kernels (its rows of one path at a time)."""
    g = torch.Generator().manual_seed(2)
    B, K, L, V = 2, 3, 3, 50
    q = torch.softmax(torch.randn(B, K, L, V, generator=g) * 2, -1)
    p = torch.softmax(torch.randn(B, K, L + 1, V, generator=g) * 2, -1)
    q[:, :, 0] = q[:, :1, 0]
    p[:, :, 0] = p[:, :1, 0]
    x = torch.multinomial(q.reshape(-1, V), 1, generator=g).view(B, K, L)
    got = gbv_law(x, q, p)
    ref = torch_route(monkeypatch, gbv_law, x, q, p)
    assert all(same(a, b) for a, b in zip(got, ref) if isinstance(a, torch.Tensor))
    assert kernels["kernel"] > 0


@pytest.mark.parametrize("value", [None, float("nan"), float("inf"), float("-inf"), -1e-3, -0.0])
@pytest.mark.parametrize("weight", [0.0, 0.5, 1.0, float("nan"), 2.0])
def test_hostile_entries_and_weights_at_one_node(value, weight, kernels, monkeypatch):
    """Block's step on rows with one hostile entry, under weights 0, 1/2, 1, NaN and 2 (outside
    [0, 1]): the same bits as the torch route. An infinite p under w = 0 is where the two could
    part (-inf 0 = NaN, which torch's clamp keeps and a comparison would drop), and so is a NaN
    weight (on clean rows: ``value`` None); both are left to torch. The hostile entry of p
    faces q = 0, where the screen (the entries' bits or-ed) sees its bits alone. The same for
    block's sums alone (``correction=False``: `compiled_totals`)."""
    from spectheory.verifiers.block import block_node
    from spectheory.verifiers.token import token_node

    g = torch.Generator().manual_seed(4)
    V, n = 40, 3
    p = torch.softmax(torch.randn(n, V, generator=g), -1)
    q = torch.softmax(torch.randn(n, V, generator=g), -1)
    if value is not None:
        p[1, 3] = value
        q[1, 3] = 0
    state = torch.full((n,), weight)
    one = torch.ones(n)

    def both(step, *args):
        got = step(*args, q, p, out=torch.empty(n, V))
        ref = torch_route(monkeypatch, step, *args, q, p)
        return got, ref

    for got, ref in (both(block_node, state, one, one), both(token_node, None, one, one)):
        assert all((a is None and b is None) or same(a, b) for a, b in zip(got, ref))
    alone = block_node(state, one, one, q, p, correction=False)  # the sums alone
    ref = torch_route(monkeypatch, lambda: block_node(state, one, one, q, p, correction=False))
    assert alone[2] is None and same(alone[0], ref[0]) and same(alone[1], ref[1])


@pytest.mark.parametrize("name", ["specinfer", "specinfer_norep"])
def test_specinfer_residual_chains_bit_for_bit(name, kernels, monkeypatch):
    """SpecInfer's residual chains p'_{r+1} = normalise(max(p'_r - q, 0)) (with replacement:
    several steps at the root, where K candidates meet; without: q renormalised between steps)
    take the same kernels: the same bits, with ties, a root where p = q (a residual of total
    zero, whose chain falls back to p) and paths sharing a prefix."""
    from spectheory import verifiers

    law = getattr(verifiers, name)
    g = torch.Generator().manual_seed(9)
    B, K, L, V = 3, 4, 2, 48
    q = torch.softmax(torch.randn(B, K, L, V, generator=g) * 2, -1)
    p = torch.softmax(torch.randn(B, K, L + 1, V, generator=g) * 2, -1)
    q[..., : V // 4] = p[:, :, :L, : V // 4]
    q[:, :, 0] = q[:, :1, 0]
    p[:, :, 0] = p[:, :1, 0]
    p[1, :, 0] = q[1, :, 0]  # p = q at one root
    x = torch.multinomial(q.reshape(-1, V), 1, generator=g).view(B, K, L)
    x[0, 1] = x[0, 0]  # two paths sharing their whole prefix
    got = law(x, q, p)
    ref = torch_route(monkeypatch, law, x, q, p)
    assert all(same(a, b) for a, b in zip(got, ref) if isinstance(a, torch.Tensor))
    assert kernels["kernel"] > 0


@pytest.mark.parametrize("law", [token_verification, block_verification],
                         ids=["token", "block"])
def test_the_kernels_take_every_draft_at_once(law, kernels, monkeypatch):
    """Where the kernels take the rows (``row_by_row``), the per-draft law hands them every
    draft in one batch per depth (L calls), not chunks of ``ROW_CHUNK_ELEMENTS``; the values are
    the chunked torch route's, bit for bit."""
    from spectheory.engine import nodes

    V, B, L = 40, 5, 3
    x, q, p = instance(V, B=B, L=L, seed=2)
    monkeypatch.setattr(nodes, "ROW_CHUNK_ELEMENTS", V)  # one draft per chunk
    assert compiled_rows.takes(p)  # probed here, not counted below
    kernels.update(kernel=0, torch=0)
    got = law(x, q, p)
    assert kernels == {"kernel": L, "torch": 0}
    ref = torch_route(monkeypatch, law, x, q, p)
    assert same(got[1], ref[1]) and same(got.stop, ref.stop)


def test_block_residual_underflowing_to_minus_zero(kernels, monkeypatch):
    """q - p w rounded once (where torch's ``addcmul`` is fused) can underflow to -0.0 on
    subnormal entries; torch's ``clamp_(max=0)`` keeps it, so its quotient is +0.0, and the
    kernels keep it too (a comparison ``d < 0 ? d : 0`` would not)."""
    V = 16
    tiny = float(np.float32(2.0 ** -149))
    p = torch.full((1, 3, V), 1.0 / V)
    q = torch.full((1, 2, V), 1.0 / V)
    p[0, 0, 0], q[0, 0, 0] = 0.25, 0.5  # w_1 = 1/2
    p[0, 1, 5], q[0, 1, 5] = 19 * tiny, 9 * tiny  # q - w p = -2^-150: -0.0 rounded once
    q[0, 1, 6] = 0.0
    x = torch.tensor([[0, 1]])
    got = block_verification(x, q, p)
    ref = torch_route(monkeypatch, block_verification, x, q, p)
    assert same(got[1], ref[1]) and same(got.stop, ref.stop)
    assert kernels["kernel"] > 0


def test_rows_that_require_grad_are_read_as_values_on_both_routes(kernels, monkeypatch):
    """Rows that require grad are read as values (detached before any row is written): the
    same law, bit for bit, as the plain rows on both routes, the kernels taking as many calls
    as for the plain rows; the law carries no gradient."""
    x, q, p = instance(40, B=2, L=2, seed=1)
    for route in ("1", "0"):
        monkeypatch.setenv(compiled_rows.KERNEL_ENV, route)
        token_verification(x, q, p)  # the kernels' probe, once
        before = kernels["kernel"]
        want = token_verification(x, q, p)
        plain = kernels["kernel"] - before
        got = token_verification(x, q.clone().requires_grad_(), p.clone().requires_grad_())
        assert kernels["kernel"] - before == 2 * plain and (plain > 0) == (route == "1")
        assert same(got.stop, want.stop) and same(got[1], want[1])
        assert not got.stop.requires_grad and not got[1].requires_grad


def test_the_kernels_sum_in_torchs_one_thread_order_at_any_thread_count():
    """With two torch threads torch splits the sum of a lone row of 32,768 entries or more
    between them; the kernels' totals stay those of torch with one thread."""
    g = torch.Generator().manual_seed(6)
    V = 40000
    p = torch.softmax(torch.randn(1, V, generator=g) * 3, -1)
    q = torch.softmax(torch.randn(1, V, generator=g) * 3, -1)
    one_thread = torch.sub(p, q).clamp_(min=0).sum(-1)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        total = compiled_rows.compiled_corrections(None, p, q, torch.empty(1, V))
    finally:
        torch.set_num_threads(threads)
    assert total is not None and same(total, one_thread)
