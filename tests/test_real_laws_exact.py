"""GBV and SpecInfer at the real-model shape change no law.

The current law functions (GBV: rank positions counted only at contested nodes, the root ranked by
the sort its q^G row needs, q^G rows without a sort where x below is under half an ulp of A,
corrections written in place; SpecInfer: the residual chain built up to each node's number of
candidates, written into one output array) equal the previous implementations
(tests/previous_real_laws.py):

* exactly in rationals, on every joint draft outcome of small prefix-dependent instances whose
  rows have equal ratios (ties) and zeros;
* bit for bit in float32 and float64, on rows that take every fast path and every fallback: a
  shared root (bit for bit), a root whose rows differ in one entry, a root with a -0.0 ratio
  next to a drafted token of ratio 0, tied drafted tokens, never-drafted tokens (q = 0), a node
  with p = q, paths sharing a prefix (contested nodes and nodes with two candidates below the
  root), and, in float32, rows where x below(a) is negligible against A;
* and on the exact engine's float batches (thousands of joint outcomes, repeated node inputs).

GBV's CPU float rows take two routes (``spectheory.verifiers._gbv_cpu``'s compiled kernels from
``KERNEL_MIN_VOCAB`` on, torch operations below it or with ``SPECTHEORY_NUMBA=0``): the float
comparisons run on both (the threshold lowered to 1 for the kernels), the small engine batches
(V = 3) included.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import previous_real_laws as prev
from spectheory import random_instance
from spectheory.engine import nodes
from spectheory.engine.joint import path_tables
from spectheory.engine.seqtree import levels
from spectheory.verifiers import gbv, gbv_mismatched_ties, specinfer

# modules by path: the package exports functions of the same names
gbv_module = importlib.import_module("spectheory.verifiers.gbv")

LAWS = {"gbv": (gbv, prev.gbv), "gbv-mismatched-ties": (gbv_mismatched_ties,
                                                         prev.gbv_mismatched_ties),
        "specinfer": (specinfer, prev.specinfer)}


def joint_inputs(inst, K: int, exact: bool):
    """drafts [n, K, L], q, p of every ordered joint outcome of K paths below the root."""
    V, L = inst.vocab_size, inst.block_length
    tok, q, p, _ = path_tables(levels(inst.draft, 0, L, exact),
                               levels(inst.target, 0, L + 1, exact), L, V)
    f = np.arange(V ** (L * K))
    seq = np.stack([f // (V**L) ** (K - 1 - k) % V**L for k in range(K)], axis=1)
    if not exact:
        seq = torch.as_tensor(seq)
    return tok[seq], q[seq], p[seq]


def _equal(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool((a == b).all())
    return torch.equal(a, b)


@pytest.mark.parametrize("V,L,K,seed", [(3, 2, 2, 5), (2, 2, 3, 3), (3, 1, 3, 8)])
def test_equal_previous_in_rationals(V, L, K, seed):
    inst = random_instance(V, L, seed, denominator=4)  # small denominators: many equal ratios
    drafts, q, p = joint_inputs(inst, K, exact=True)
    for name, (new, old) in LAWS.items():
        a, b = new(drafts, q, p), old(drafts, q, p)
        assert _equal(a.stop, b.stop) and _equal(a.correction, b.correction), name


def _rows(gen, *shape, dtype):
    return torch.softmax(torch.randn(*shape, generator=gen, dtype=torch.float64) * 3, -1).to(dtype)


def real_like_batch(dtype, V: int = 1501, Bn: int = 6, K: int = 4, L: int = 8, seed: int = 0):
    """Prefix-dependent rows (every path and position its own row, the root shared by the K
    paths) with planted cases, one per block (see the module doc)."""
    gen = torch.Generator().manual_seed(seed)
    p = _rows(gen, Bn, K, L + 1, V, dtype=dtype)
    q = _rows(gen, Bn, K, L, V, dtype=dtype)
    q[..., :40] = 1e-4
    p[..., :40] = 2e-4  # tokens 0..39: the same ratio 2 at every node
    q[..., 40:45] = 0  # never drafted
    p[1, :, 2] = q[1, :, 2] = 1 / V  # p = q at one node
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
    p[4, :, 0, 55] = -0.0  # block 4: ratio -0.0 at token 55, ratio +0 at token 60
    p[4, :, 0, 60] = 0.0
    p[:, :, 0], q[:, :, 0] = p[:, :1, 0], q[:, :1, 0]  # the root row of each block, bit for bit
    x = torch.multinomial(q.reshape(-1, V).double(), 1, generator=gen).view(Bn, K, L)
    x[0, 0, 0], x[0, 1, 0] = 5, 3  # tied drafted tokens at a shared root: the later path wins
    x[5, 0, 0], x[5, 1, 0] = 5, 3  # the same at a root whose rows differ (block 5, below)
    x[4, :, 0] = torch.tensor([60, 55, 60, 60])  # equal ratios 0 and -0.0: token 55 first
    q[5, 2, 0, 7] = torch.nextafter(q[5, 2, 0, 7], torch.tensor(1.0, dtype=dtype))
    for b in (2, 3):  # paths 0 and 1 share their first tokens and the rows along them
        share = 3 if b == 3 else L
        x[b, 1, :share] = x[b, 0, :share]
        q[b, 1, :share] = q[b, 0, :share]
        p[b, 1, :share + 1] = p[b, 0, :share + 1]
    return x, q, p


ROUTES = ["kernels", "torch"]


def use_route(monkeypatch, route: str) -> None:
    """Send GBV's CPU rows through the compiled kernels (the vocabulary threshold lowered to 1,
    so that these small rows take them) or through torch, and check that the route is the one
    asked for."""
    if route == "kernels":
        pytest.importorskip("numba")
        monkeypatch.delenv(gbv_module.KERNEL_ENV, raising=False)
        monkeypatch.setattr(gbv_module, "KERNEL_MIN_VOCAB", 1)
    else:
        monkeypatch.setenv(gbv_module.KERNEL_ENV, "0")
    probe = torch.zeros(1, max(gbv_module.KERNEL_MIN_VOCAB, 1))
    assert (gbv_module._kernels_for(probe) is not None) == (route == "kernels")


def _screens(monkeypatch):
    """Count the rows by how their q^G row was made, on either route: {True: rows where x
    below is negligible against A (no sort), False: rows the screen did not pass}. The torch
    route's verdicts are counted at `_negligible_rows` and `_negligible_node` (its one-node
    branch calls the latter too, so such a row may count twice); the kernels' route screens
    inside one compiled call per path, counted from what `_compiled_positions` returns (False:
    the rows sorted, up to the last one)."""
    seen = _counted(monkeypatch, "_negligible_rows")
    seen = _counted(monkeypatch, "_negligible_node", seen)
    fn = gbv_module._compiled_positions

    def wrapped(*args, **kw):
        last, skipped = fn(*args, **kw)
        seen[True] = seen.get(True, 0) + int(skipped.sum())
        seen[False] = seen.get(False, 0) + int((~skipped[:last + 1]).sum())
        return last, skipped

    monkeypatch.setattr(gbv_module, "_compiled_positions", wrapped)
    return seen


def _counted(monkeypatch, name, seen=None):
    """Wrap gbv_module.<name> to count its results: {result: count} (None vs a value; for
    the per-row screen, rows True / False), into ``seen`` if given."""
    seen = {} if seen is None else seen
    fn = getattr(gbv_module, name)

    def wrapped(*args, **kw):
        out = fn(*args, **kw)
        if isinstance(out, torch.Tensor):  # the screen's rows
            for key in (True, False):
                seen[key] = seen.get(key, 0) + int((out == key).sum())
            return out
        key = out if isinstance(out, bool) else out is not None
        seen[key] = seen.get(key, 0) + 1
        return out

    monkeypatch.setattr(gbv_module, name, wrapped)
    return seen


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("one_row", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bit_identical_to_previous_in_float(dtype, one_row, route, monkeypatch):
    """``one_row``: one block per chunk, as at V = 151,936 (the root sort shared with the
    selection, the per-row screens); otherwise a few blocks per chunk."""
    use_route(monkeypatch, route)
    x, q, p = real_like_batch(dtype)
    if one_row:
        monkeypatch.setattr(gbv_module, "RANK_CHUNK_ELEMENTS", 1)
        monkeypatch.setattr(nodes, "ROW_CHUNK_ELEMENTS", 1)
    shortcut = _screens(monkeypatch)
    shared_root = _counted(monkeypatch, "_root_ranks")
    for name, (new, old) in LAWS.items():
        a, b = new(x, q, p), old(x, q, p)
        assert torch.equal(a.stop, b.stop), name
        assert torch.equal(a.correction, b.correction), name
    assert shortcut.get(False, 0) > 0  # q^G rows ranked by a sort
    assert shortcut.get(True, 0) > 0  # and rows where x below is negligible against A
    if one_row and (dtype == torch.float32 or route == "kernels"):  # blocks 4 and 5 counted
        assert shared_root == {True: 4, False: 2}  # gbv only: its two tie rules agree


def test_selection_and_specinfer_paths_are_exercised():
    """The planted blocks decide what they are meant to: tied tokens at a shared root and at a
    counted root, the -0.0 ratio, and two candidates at nodes below the root (SpecInfer)."""
    x, q, p = real_like_batch(torch.float32)
    k = gbv_module.best_path(x, q, p, "low", {})
    assert k[0] == 1 and k[5] == 1 and k[4] == 1  # token 3 over 5 (ties low), 55 over 60
    assert gbv_module.best_path(x, q, p, "high", {})[0] == 0  # ties high: token 5 over 3
    law = specinfer(x, q, p)
    assert float(law.stop[3, 1].sum()) == 0.0  # block 3's path 1 shares its nodes with path 0


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("ties", ["low", "high"])
def test_root_ranks_equal_counts(ties, route, monkeypatch):
    """Rank positions read off the sort of a shared root row equal the counted ones, tied drafted
    tokens included; roots that differ bit for bit or hold a -0.0 ratio are left to counting."""
    use_route(monkeypatch, route)
    x, q, p = real_like_batch(torch.float32)
    x[0, :, 0] = torch.tensor([39, 5, 3, 0])  # tokens 0..39 all have the ratio 2
    x[1, :, 0] = torch.tensor([41, 7, 100, 41])  # 41: never drafted (q = 0, ratio -1)
    for b in range(4):
        ranked = gbv_module._root_ranks(q[b, :, 0], p[b, :, 0], x[b, :, 0], ties)
        counted = gbv_module._rank_rows(q[b, :, 0], p[b, :, 0], x[b, :, 0], ties)
        assert ranked is not None and torch.equal(ranked[0], counted)
    for b in (4, 5):
        assert gbv_module._root_ranks(q[b, :, 0], p[b, :, 0], x[b, :, 0], ties) is None


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("K", [2, 3])
def test_engine_batches_bit_identical(K, route, monkeypatch):
    """Thousands of joint outcomes in float64 (repeated node inputs, rows evaluated once per
    distinct input): the same bits as before, on both routes (V = 3: every row has few distinct
    ratios)."""
    use_route(monkeypatch, route)
    drafts, q, p = joint_inputs(random_instance(3, 2, 7), K, exact=False)
    for name, (new, old) in LAWS.items():
        a, b = new(drafts, q, p), old(drafts, q, p)
        assert torch.equal(a.stop, b.stop) and torch.equal(a.correction, b.correction), name


@pytest.mark.parametrize("route", ROUTES)
def test_a_negligible_row_before_a_sorted_one(route, monkeypatch):
    """A path whose row at depth 1 passes the screen (x = q(X_1) = 1e-10 at the root) and whose
    row at depth 2 does not (an unnormalised row of mass 1e12 there): the general formula then
    runs on rows 0..2 with below = 0 at row 1, written over whatever an earlier path left in the
    reused scratch. Bit for bit the previous implementation's values (which sorts every row)."""
    use_route(monkeypatch, route)
    x, q, p = real_like_batch(torch.float32)
    # an earlier path sorts its row at depth 1 (a likely root token: x = q(X_1) is large), an
    # unnormalised row of mass 1e12, so the scratch row there holds masses far above block b's
    # row sum when block b's path comes
    x[2, :, 0] = int(q[2, 0, 0].argmax())
    q[2, :, 1], p[2, :, 1] = q[2, :1, 1] * 1e12, p[2, :1, 1]
    b, t0 = 3, 100
    q[b, :, 0, t0] = 1e-10  # the shared root row keeps its K copies equal
    x[b, :, 0] = t0
    q[b, :, 1], p[b, :, 1] = q[b, :1, 1], p[b, :1, 1]  # every path through X_1 = t0: one node
    x[b, :, 1] = x[b, 0, 1]
    q[b, :, 2] = q[b, :, 2] * 1e12
    seen = _screens(monkeypatch)
    a, prev_law = gbv(x, q, p), prev.gbv(x, q, p)
    assert torch.equal(a.stop, prev_law.stop) and torch.equal(a.correction, prev_law.correction)
    assert seen.get(True, 0) > 0


@pytest.mark.parametrize("planted", [False, True])
def test_kernel_screen_reads_each_rows_sum_and_sign_bits(planted, monkeypatch):
    """On the kernels' route the screen runs inside one compiled call per path
    (`_gbv_cpu.path_positions`), from one compiled read of the screened row (`row_total`: its
    sum and whether an entry has its sign bit set). ``planted``: -0.0 at token 3 of every row
    below the root, so no screen may pass; otherwise rows of nonnegative entries, where some
    screens pass; the law is the torch route's either way."""
    x, q, p = real_like_batch(torch.float32)
    if planted:
        q[:, :, 1:, 3] = -0.0
    use_route(monkeypatch, "torch")
    want = gbv(x, q, p)
    use_route(monkeypatch, "kernels")
    seen = _screens(monkeypatch)
    got = gbv(x, q, p)
    assert torch.equal(got.stop, want.stop)
    assert torch.equal(got.correction.view(torch.int32), want.correction.view(torch.int32))
    assert seen.get(False, 0) > 0 and (seen.get(True, 0) > 0) != planted


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_screen_is_the_python_screen(dtype):
    """`_gbv_cpu._negligible` (the screen inside the compiled loop) gives `_negligible_node`'s
    verdict on every combination of A (0, -0.0, subnormal, tiny, 1/3, 1, huge, inf, NaN), x
    (around half a unit of A's last place, 0, -x, NaN), the row's sum (1, 1 + 2^-20, 0, NaN,
    inf) and its sign bits: the same float64 operations."""
    kernels = importlib.import_module("spectheory.verifiers._gbv_cpu")
    f = dtype
    t = torch.float32 if dtype == np.float32 else torch.float64
    tiny = np.finfo(f).tiny
    As = [f(0), f(-0.0), f(tiny / 4), f(tiny), f(1e-30), f(1 / 3), f(1), f(np.finfo(f).max),
          f(np.inf), f(np.nan)]
    V = 151936
    eps = torch.finfo(t).eps
    checked = passed = 0
    for a in As:
        with np.errstate(all="ignore"):
            ulp = float(np.spacing(a)) if np.isfinite(a) else 1.0
        for x in (ulp / 2, ulp / 2 * (1 - 2 ** -10), ulp / 8, ulp / (2 * (1 + 2 * V * eps)),
                  0.0, -ulp / 8, np.nan):
            xf = f(x)
            for total in (1.0, 1 + 2 ** -20, 0.0, np.nan, np.inf):
                for signed in (False, True):
                    with np.errstate(all="ignore"):  # nextafter past the largest float
                        want = gbv_module._negligible_node(float(a), float(xf), total,
                                                           -1.0 if signed else 0.0, V, t)
                    got = kernels._negligible(a, xf, total, signed, V, eps, f(np.inf),
                                              f(-np.inf))
                    assert bool(got) == want, (a, x, total, signed)
                    checked += 1
                    passed += want
    assert checked == 700 and passed > 20


def test_kernel_route_across_path_lengths_and_batches(monkeypatch):
    """The kernels' route keeps one path's q^G rows per thread and the root q^G rows in the
    law's own output: laws of other lengths and batch sizes in turn (L = 8, 3, 8; B = 6, 2)
    give the torch route's bits every time, and an earlier law's output is not touched."""
    x, q, p = real_like_batch(torch.float32)
    cases = [(x, q, p), tuple(t[:2, :, :3] if t is not p else t[:2, :, :4] for t in (x, q, p)),
             (x[2:4], q[2:4], p[2:4])]
    use_route(monkeypatch, "torch")
    want = [gbv(*c) for c in cases]
    use_route(monkeypatch, "kernels")
    got = [gbv(*c) for c in cases]
    kept = [g.correction.clone() for g in got]
    got.append(gbv(*cases[0]))
    for g, w in zip(got, want + want[:1]):
        assert torch.equal(g.stop, w.stop) and torch.equal(g.correction, w.correction)
    for g, k in zip(got, kept):
        assert torch.equal(g.correction, k)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_row_total_kernel(dtype):
    """`row_total`: the row's sum (any order, float64) and whether an entry's sign bit is set
    (-0.0 and negative entries; NaN makes the sum NaN)."""
    kernels = pytest.importorskip("spectheory.verifiers._gbv_cpu")
    row = torch.rand(5000, generator=torch.Generator().manual_seed(3), dtype=dtype).numpy()
    uint = np.uint32 if row.itemsize == 4 else np.uint64
    shift = 8 * row.itemsize - 1
    total, signed = kernels.row_total(row, row.view(uint), shift)
    assert abs(total - float(row.astype(np.float64).sum())) <= 1e-12 * total and not signed
    for at, value in ((0, -0.0), (4999, -1e-30), (2500, float("nan"))):
        r = row.copy()
        r[at] = value
        total, signed = kernels.row_total(r, r.view(uint), shift)
        assert signed == (value != value or np.signbit(value)) or value != value
        assert (total != total) == (value != value)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("bad", [-1, 1501, 10**9])
def test_draft_tokens_out_of_range_are_refused(bad, route, monkeypatch):
    """A drafted token outside 0..V-1 on a path that is not selected, or at the root, is refused
    in one line on both routes (the kernels index rows with the tokens and check no bounds)."""
    use_route(monkeypatch, route)
    x, q, p = real_like_batch(torch.float32)
    for at in ((0, 3, 5), (1, slice(None), 0)):
        y = x.clone()
        y[at] = bad
        with pytest.raises(ValueError, match=f"draft tokens must lie in 0..1500 .*found {bad}$"):
            gbv(y, q, p)


@pytest.mark.parametrize("where", ["negative q at a drafted token", "zero q at a drafted token",
                                   "zero p at a drafted token"])
def test_hostile_drafted_entries_same_bits_on_both_routes(where, monkeypatch):
    """Rows no real model gives, on a path that is surely selected (all K paths of block 0 the
    same): q^G or p of the drafted token negative or zero, which the kernels' route handles on
    numpy scalars (block weights: ratio 1 only where q^G = 0, a negative ratio kept). The two
    routes give the same bits."""
    g = torch.Generator().manual_seed(12)
    B, K, L, V = 2, 3, 3, 40
    q = torch.softmax(torch.randn(B, K, L, V, generator=g), -1)
    p = torch.softmax(torch.randn(B, K, L + 1, V, generator=g), -1)
    q[0], p[0] = q[0, :1].clone(), p[0, :1].clone()  # one path, K times
    q[:, :, 0], p[:, :, 0] = q[:, :1, 0].clone(), p[:, :1, 0].clone()
    x = torch.multinomial(q.reshape(-1, V), 1, generator=g).view(B, K, L)
    x[0] = x[0, :1]
    t = int(x[0, 0, 1])
    if where.startswith("negative"):
        q[0, :, 1, t] = -0.01
    elif where.startswith("zero q"):
        q[0, :, 1, t] = 0
    else:
        p[0, :, 1, t] = 0
    laws = {}
    for route in ROUTES:
        use_route(monkeypatch, route)
        laws[route] = gbv(x, q, p)
    a, b = laws["kernels"], laws["torch"]
    assert np.array_equal(a.stop.numpy().view(np.int32), b.stop.numpy().view(np.int32))
    assert np.array_equal(a.correction.numpy().view(np.int32),
                          b.correction.numpy().view(np.int32))


@pytest.mark.parametrize("route", ROUTES)
def test_best_path_reads_rows_that_require_grad_as_values(route, monkeypatch):
    """`best_path` on rows that require grad: the same paths as on their values, without
    torch's warning about converting a tensor that requires grad to a number."""
    import warnings

    use_route(monkeypatch, route)
    x, q, p = real_like_batch(torch.float32)
    want = gbv_module.best_path(x, q, p, "low")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = gbv_module.best_path(x, q.clone().requires_grad_(), p.clone().requires_grad_(),
                                   "low", {})
    assert torch.equal(got, want)
