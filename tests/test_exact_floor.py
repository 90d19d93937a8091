"""The compiled kernels of the per-node route (``spectheory.engine._nodes_cpu``) against the torch
route they replace, bit for bit.

Token and block verification at depths L-1 and L, and the output law's last step, run on numba
kernels for float64 CPU tensors from `COMPILED_MIN_NODES` nodes on (lowered to 0 here, so small
instances take them). Every check compares the two routes on the same instance with
``torch.equal`` (a zero may carry another sign): tau pmf, output law, TV, target law, and every
array of the per-node law. Instances: prefix-dependent Dirichlet rows; rows on a grid of 1/4
(ties among ratios, zeros in p and q); rows where p = q (a residual of total zero: the correction
falls back to p) or p = 0 where q > 0; vocabularies below, at and above torch's vector width.
A kernel with a planted bug (the other rounding of ``addcmul``, another order of a row sum, a
sign, an index) is caught by the same comparison; failing screens rerun the torch route and
raise its diagnosis; a non-finite target row at depth L, whose check the kernel makes on the
way, is refused with the message of the check before the analysis.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spectheory.engine import analysis as analysis_mod
from spectheory.engine import nodes as nodes_mod
from spectheory.engine.analysis import analyze
from spectheory.engine.nodes import CompiledKernels, compiled_kernels, node_block_law
from spectheory.engine.output import node_output_law
from spectheory.engine.seqtree import levels
from spectheory.inputs import instances as instances_mod
from spectheory.inputs.instances import Instance
from spectheory.inputs.models import TableModel
from spectheory.inputs.random_instances import random_instance
from spectheory.law import LawError
from spectheory.runtime.errors import SpectheoryError
from spectheory.verifiers.block import BLOCK_NODE
from spectheory.verifiers.token import TOKEN_NODE

pytest.importorskip("numba")

FORMS = {"token": TOKEN_NODE, "block": BLOCK_NODE}


@pytest.fixture
def small(monkeypatch):
    """Kernels from the smallest instances on."""
    monkeypatch.setattr(nodes_mod, "COMPILED_MIN_NODES", 0)
    monkeypatch.delenv("SPECTHEORY_NUMBA", raising=False)


def _grid_instance(V: int, L: int, seed: int) -> Instance:
    """Rows on a grid of 1/4 (ties and zeros), some target rows equal to the draft's (residual
    zero) and some target entries zero where the draft's are not, all prefix-dependent."""
    rng = np.random.default_rng(seed)

    def table(d):
        counts = rng.multinomial(4, np.ones(V) / V, size=V**d).astype(np.float64)
        return counts / 4

    q = [table(d) for d in range(L)]
    p = [table(d) for d in range(L + 1)]
    for d in range(L):
        same = rng.random(V**d) < 0.3
        p[d][same] = q[d][same]
    return Instance(V, L, TableModel(V, tuple(p)), TableModel(V, tuple(q)))


def _instances():
    yield "dirichlet-8-3", random_instance(8, 3, 5)
    yield "dirichlet-3-4", random_instance(3, 4, 6)
    yield "dirichlet-5-3", random_instance(5, 3, 7, alpha=0.3)
    yield "dirichlet-17-2", random_instance(17, 2, 8)
    yield "dirichlet-2-6", random_instance(2, 6, 9)
    yield "grid-4-4", _grid_instance(4, 4, 1)
    yield "grid-8-3", _grid_instance(8, 3, 2)
    yield "grid-3-3", _grid_instance(3, 3, 3)
    yield "rationals-6-3", random_instance(6, 3, 10, alpha=0.5, denominator=6).to_float()


INSTANCES = dict(_instances())


def _eq(a, b) -> bool:
    a = a if isinstance(a, torch.Tensor) else torch.as_tensor(np.asarray(a, dtype=np.float64))
    b = b if isinstance(b, torch.Tensor) else torch.as_tensor(np.asarray(b, dtype=np.float64))
    return torch.equal(a, b)


def _torch_route(monkeypatch):
    monkeypatch.setenv("SPECTHEORY_NUMBA", "0")


def _counting(monkeypatch):
    """Count the calls of the kernels and keep what their screens said (so a test knows they
    ran and that their values were used, not the torch route's after a failed screen)."""
    mod = nodes_mod._kernel_module()
    calls = {}
    screening = ("block_level", "token_level", "block_last", "token_last", "output_top")
    for name in screening + ("block_scan", "token_scan", "output_level"):
        f = getattr(mod, name)

        def spy(*args, f=f, name=name):
            calls[name] = calls.get(name, 0) + 1
            ok = f(*args)
            if name in screening:
                calls.setdefault("screens", []).append(bool(ok))
            return ok

        monkeypatch.setattr(mod, name, spy)
    return calls


@pytest.mark.parametrize("verifier", ["token", "block"])
@pytest.mark.parametrize("key", list(INSTANCES))
def test_analysis_bit_for_bit(key, verifier, small, monkeypatch):
    inst = INSTANCES[key]
    calls = _counting(monkeypatch)
    fast = analyze(inst, verifier, exact=False, backend="torch")
    L = inst.block_length
    assert calls.get(f"{verifier}_last") == 1 and calls.get("output_top", 0) >= 1
    # every depth above L-1 stepped, scanned and carried into the output law by a kernel
    assert calls.get(f"{verifier}_level") == calls.get(f"{verifier}_scan") == L - 1
    assert calls.get("output_level") == L - 1
    assert all(calls["screens"])  # the kernels' values, not a rerun of the torch route
    _torch_route(monkeypatch)
    slow = analyze(inst, verifier, exact=False, backend="torch")
    assert calls.get(f"{verifier}_last") == 1  # the torch route did not call them
    assert calls.get(f"{verifier}_level") == L - 1
    assert fast.tau_pmf == slow.tau_pmf
    assert _eq(fast.tau_pmf, slow.tau_pmf)
    assert _eq([fast.tv_to_target], [slow.tv_to_target])
    assert _eq(fast.output_law, slow.output_law)
    assert _eq(fast.target_law, slow.target_law)
    # lossless, and the law is the target's up to rounding (an independent property)
    assert float(fast.tv_to_target) < 1e-12
    np.testing.assert_allclose(fast.output_law, fast.target_law, rtol=0, atol=1e-15)


@pytest.mark.parametrize("key", ["dirichlet-8-3", "dirichlet-17-2", "grid-4-4", "dirichlet-3-4",
                                 "dirichlet-2-6"])
def test_tv_terms_of_a_lossy_law_summed_in_the_torch_routes_order(key, small, monkeypatch):
    """The TV of a lossless verifier sums terms of the order of rounding errors, many of them
    exact zeros, where the order of addition hardly matters; here the stop masses of depth L
    (the same array for both routes) are rescaled so the output law is far from the target's,
    and the kernel's per-node sums of |top - t| (torch's row order), then torch's sum of them,
    must give the torch route's TV bit for bit."""
    import dataclasses

    inst = INSTANCES[key]
    calls = _counting(monkeypatch)
    V, L = inst.vocab_size, inst.block_length
    ql, pl = levels(inst.draft, 0, L, False), levels(inst.target, 0, L + 1, False)
    law = node_block_law(BLOCK_NODE, ql, pl, V, L, "block", compiled=False)
    scale = torch.from_numpy(np.random.default_rng(V * L).uniform(0.3, 1.7, V**L))
    lossy = dataclasses.replace(law, stop_mass=law.stop_mass[:L] + [law.stop_mass[L] * scale])
    out_k, _, tv_k = node_output_law(lossy, pl, V, L)
    assert calls["output_top"] >= 1 and all(calls["screens"])
    _torch_route(monkeypatch)
    out_t, _, tv_t = node_output_law(lossy, pl, V, L)
    assert float(tv_t) > 1e-3  # far from lossless: the terms are large and unequal
    assert _eq(out_k, out_t) and _eq(tv_k, tv_t), (float(tv_k), float(tv_t))


@pytest.mark.parametrize("V", [3, 8, 17, 40])
def test_output_kernel_terms_are_torchs_row_sums(V):
    """The output kernel's TV terms, one per node, against torch's own row sums of |top - t| on
    rows spread over 2^-30..1 (where another order of addition shows in the last bits, which
    the TV of a whole law, far larger than one row's terms, would absorb), and its law rows."""
    kernels = compiled_kernels(None, torch.zeros((1, V), dtype=torch.float64), V, nodes=2**40)
    assert kernels is not None
    rng = np.random.default_rng(V)

    def spread(*shape):
        return rng.random(shape) * np.exp2(-rng.integers(0, 30, shape))

    r = 64
    A, T, m, c, p = spread(r), spread(r), spread(r), spread(r, V), spread(r, V)
    stop_L, pL = spread(r * V), spread(r * V, V)
    terms, out = np.empty(r), np.empty((r * V, V))
    assert kernels.module.output_top(A, T, m, c, p, stop_L, pL, kernels.fma_out, kernels.lanes,
                                     terms, out)
    tA, tT, tm, tc, tp, tL, tpL = (torch.from_numpy(x) for x in (A, T, m, c, p, stop_L, pL))
    top = torch.mul(tp, tA.unsqueeze(1)).addcmul_(tc, tm.unsqueeze(1)).reshape(-1) + tL
    t = (tT.unsqueeze(1) * tp).reshape(-1)
    assert torch.equal(torch.from_numpy(terms), (top - t).abs().view(r, V).sum(dim=1))
    assert torch.equal(torch.from_numpy(out), tpL * top.unsqueeze(1))


@pytest.mark.parametrize("verifier", ["token", "block"])
@pytest.mark.parametrize("key", ["dirichlet-8-3", "grid-4-4", "dirichlet-3-4"])
def test_node_law_arrays_bit_for_bit(key, verifier, small, monkeypatch):
    inst = INSTANCES[key]
    calls = _counting(monkeypatch)
    V, L = inst.vocab_size, inst.block_length
    ql, pl = levels(inst.draft, 0, L, False), levels(inst.target, 0, L + 1, False)
    form = FORMS[verifier]
    assert compiled_kernels(form, pl[L - 1], V) is not None
    a = node_block_law(form, ql, pl, V, L, verifier)
    b = node_block_law(form, ql, pl, V, L, verifier, compiled=False)
    for d in range(L + 1):
        assert _eq(a.stop_mass[d], b.stop_mass[d]), d
        assert _eq(a.correction[d], b.correction[d]), d
    assert a.corr_is_target == b.corr_is_target
    out_a, tgt_a, tv_a = node_output_law(a, pl, V, L)
    out_b, tgt_b, tv_b = node_output_law(b, pl, V, L)
    assert _eq(out_a, out_b) and _eq(tgt_a(), tgt_b()) and _eq(tv_a, tv_b)
    assert calls[f"{verifier}_last"] == 1 and calls["output_top"] >= 1 and all(calls["screens"])


@pytest.mark.parametrize("verifier", ["token", "block"])
def test_split_subtrees_bit_for_bit(verifier, small, monkeypatch):
    """A split analysis steps each subtree from a start (its parent's state, pass product and
    draft mass): the kernels take that path too."""
    inst = INSTANCES["dirichlet-3-4"]
    fast = analyze(inst, verifier, executor="local", workers=1, split_depth=1)
    _torch_route(monkeypatch)
    slow = analyze(inst, verifier, executor="local", workers=1, split_depth=1)
    assert _eq(fast.tau_pmf, slow.tau_pmf) and _eq(fast.output_law, slow.output_law)
    assert _eq([fast.tv_to_target], [slow.tv_to_target])


def _law_with(kernels, form, inst):
    V, L = inst.vocab_size, inst.block_length
    ql, pl = levels(inst.draft, 0, L, False), levels(inst.target, 0, L + 1, False)
    law = nodes_mod._compiled_route(kernels, form, ql, pl, V, L, None, "v")
    return law, node_block_law(form, ql, pl, V, L, compiled=False)


@pytest.mark.parametrize("verifier", ["token", "block"])
def test_planted_arithmetic_bugs_are_caught(verifier, small):
    """The comparison has power: kernels told the wrong rounding of addcmul or the wrong
    order of torch's row sums give other bits, which the equality test reports."""
    inst = INSTANCES["dirichlet-8-3"]
    form = FORMS[verifier]
    V, L = inst.vocab_size, inst.block_length
    pl = levels(inst.target, 0, L + 1, False)
    right = compiled_kernels(form, pl[L - 1], V)
    law, ref = _law_with(right, form, inst)
    assert all(_eq(a, b) for a, b in zip(law.stop_mass, ref.stop_mass))
    wrong = [CompiledKernels(right.module, 8 if right.lanes != 8 else 4, right.fma_neg,
                             right.fma_out)]
    if verifier == "block":
        wrong.append(CompiledKernels(right.module, right.lanes, not right.fma_neg,
                                     right.fma_out))
    for k in wrong:
        bad, _ = _law_with(k, form, inst)
        assert not all(_eq(a, b) and _eq(c, e) for a, b, c, e in
                       zip(bad.stop_mass, ref.stop_mass, bad.correction, ref.correction))


def test_probe_reproduces_torch_row_sums():
    """The kernels' row sums equal torch's on random rows of several widths (the probe's
    choice), and another lane width differs (the order matters)."""
    mod = nodes_mod._kernel_module()
    rng = np.random.default_rng(0)
    for V in (2, 3, 4, 5, 8, 13, 16, 33, 100):
        probe = nodes_mod._probe(mod, V)
        assert probe is not None, V
        lanes = probe[0]
        rows = rng.random((256, V)) * np.exp2(-rng.integers(0, 40, (256, V)))
        ref = torch.from_numpy(rows).sum(dim=-1)
        got = torch.from_numpy(mod.probe_sums(rows, lanes, np.empty(256)))
        assert torch.equal(got, ref), V
        if V >= 8:  # another width adds in another order (V = 8: 8 lanes, r0 + ... + r7)
            other = torch.from_numpy(mod.probe_sums(rows, 8 if lanes != 8 else 4,
                                                    np.empty(256)))
            assert not torch.equal(other, ref), V


@pytest.mark.parametrize("lanes", [0, 1, 2, 4, 8, 16, 32])
def test_unrolled_sums_of_8_are_the_loops_sums(lanes):
    """Rows of 8 entries are summed by straight-line code (`_row_sum_of_8`), one order per
    vector width: each must add exactly as `row_sum`'s loops do for that width, on rows spread
    over 2^-40..1 with both signs and signed zeros (where another order or a lost ``0.0 +``
    shows in the bits). A width the loops order differently from the others (2, 4, 8) is
    told apart."""
    mod = nodes_mod._kernel_module()
    rng = np.random.default_rng(lanes)
    rows = (rng.random((512, 8)) * np.exp2(-rng.integers(0, 40, (512, 8)))
            * rng.choice([-1.0, 1.0], (512, 8)))
    rows[::7] = rng.choice([0.0, -0.0, 1.0, -1.0], (len(rows[::7]), 8))
    fast = mod.probe_sums8(rows, lanes, np.empty(512))
    loops = mod.probe_sums(rows, lanes, np.empty(512))
    assert np.array_equal(fast.view(np.uint64), loops.view(np.uint64))
    if lanes in (2, 4, 8):
        other = mod.probe_sums(rows, 4 if lanes != 4 else 8, np.empty(512))
        assert not np.array_equal(fast, other)


@pytest.mark.parametrize("V", [3, 8, 16, 17])
def test_output_kernel_streamed_and_cached_stores_agree(V):
    """The output kernel writes rows of whole vectors (V = 8, 16) by non-temporal stores where
    the law starts on a 64-byte boundary, by ordinary stores elsewhere, and other rows (V = 3,
    17) entry by entry: the same law and TV terms on an aligned and a misaligned output, equal
    to torch's products, and a non-finite target entry anywhere in a row is noticed."""
    kernels = compiled_kernels(None, torch.zeros((1, V), dtype=torch.float64), V, nodes=2**40)
    mod = kernels.module
    rng = np.random.default_rng(100 + V)
    r = 37
    A, T, m, c, p = rng.random(r), rng.random(r), rng.random(r), rng.random((r, V)), rng.random(
        (r, V))
    stop_L, pL = rng.random(r * V), rng.random((r * V, V))
    raw = np.empty(r * V * V + 16)
    skip = (-raw.ctypes.data % 64) // 8
    outs = {"aligned": raw[skip:skip + r * V * V], "misaligned": raw[skip + 1:skip + 1 + r * V * V]}
    got = {}
    for name, out in outs.items():
        terms = np.empty(r)
        assert mod.output_top(A, T, m, c, p, stop_L, pL, kernels.fma_out, kernels.lanes, terms,
                              out.reshape(r * V, V))
        got[name] = (out.copy(), terms)
    assert outs["aligned"].ctypes.data % 64 == 0 and outs["misaligned"].ctypes.data % 64 != 0
    tA, tm, tc, tp, tL, tpL = (torch.from_numpy(x) for x in (A, m, c, p, stop_L, pL))
    top = torch.mul(tp, tA.unsqueeze(1)).addcmul_(tc, tm.unsqueeze(1)).reshape(-1) + tL
    want = (tpL * top.unsqueeze(1)).reshape(-1).numpy()
    for out, terms in got.values():
        assert np.array_equal(out, want) and np.array_equal(terms, got["aligned"][1])
    for where in (0, V - 1):  # the first entry of a row (a vector where V >= 8) and the last
        bad = pL.copy()
        bad[5 * V + 2, where] = np.inf
        assert not mod.output_top(A, T, m, c, p, stop_L, bad, kernels.fma_out, kernels.lanes,
                                  np.empty(r), outs["aligned"].reshape(r * V, V))


def test_switch_off_and_numba_missing(small, monkeypatch):
    inst = INSTANCES["grid-8-3"]
    pl = levels(inst.target, 0, 4, False)
    assert compiled_kernels(BLOCK_NODE, pl[2], 8) is not None
    monkeypatch.setenv("SPECTHEORY_NUMBA", "0")
    assert compiled_kernels(BLOCK_NODE, pl[2], 8) is None
    monkeypatch.setenv("SPECTHEORY_NUMBA", "maybe")
    with pytest.raises(SpectheoryError, match="SPECTHEORY_NUMBA"):
        compiled_kernels(BLOCK_NODE, pl[2], 8)
    monkeypatch.delenv("SPECTHEORY_NUMBA")
    monkeypatch.setattr(nodes_mod, "_KERNELS", [None])  # numba could not be loaded
    assert compiled_kernels(BLOCK_NODE, pl[2], 8) is None
    a = analyze(inst, "block", backend="torch")
    monkeypatch.setattr(nodes_mod, "_KERNELS", [])
    b = analyze(inst, "block", backend="torch")
    assert _eq(a.output_law, b.output_law) and _eq(a.tau_pmf, b.tau_pmf)


def test_only_token_and_block_take_the_kernels(small):
    from spectheory.registry import get_verifier

    pl = levels(INSTANCES["grid-8-3"].target, 0, 4, False)
    for name in ("token", "block"):
        assert compiled_kernels(get_verifier(name).node, pl[2], 8) is not None
    lossy = [s for s in ("uniform-product",) if get_verifier(s).node is not None]
    for name in lossy:
        assert compiled_kernels(get_verifier(name).node, pl[2], 8) is None
    assert compiled_kernels(BLOCK_NODE, pl[2].to(torch.float32), 8) is None
    assert compiled_kernels(BLOCK_NODE, pl[2].numpy(), 8) is None


def test_threshold(monkeypatch):
    monkeypatch.delenv("SPECTHEORY_NUMBA", raising=False)
    pl = levels(INSTANCES["grid-8-3"].target, 0, 4, False)
    monkeypatch.setattr(nodes_mod, "COMPILED_MIN_NODES", 8**3 + 1)
    assert compiled_kernels(BLOCK_NODE, pl[2], 8) is None
    monkeypatch.setattr(nodes_mod, "COMPILED_MIN_NODES", 8**3)
    assert compiled_kernels(BLOCK_NODE, pl[2], 8) is not None


def _unnormalised(depth: int, row: int) -> Instance:
    """A target row at ``depth`` that does not sum to 1 and makes the residual zero (block: p =
    q / 2, so w p <= q; token: p = q / 2 too, so max(p - q, 0) = 0): the correction falls back
    to the target row, whose sum 1/2 the validation refuses."""
    inst = random_instance(3, 3, 4)
    p = [t.copy() for t in inst.target.tables]
    p[depth][row] = inst.draft.tables[depth][row] / 2
    return _changed_after_check(Instance(3, 3, TableModel(3, tuple(p)), inst.draft))


def _changed_after_check(inst: Instance) -> Instance:
    """``inst`` as if its tables were changed in place after the instance check (which the
    engines run once per instance, at their entry, and which refuses such rows first): what
    reaches the engine's own screens, the subject of these tests."""
    return instances_mod._trusted(inst)


@pytest.mark.parametrize("verifier", ["token", "block"])
@pytest.mark.parametrize("depth, row", [(2, 5), (1, 1)])
def test_failing_screen_reruns_torch_and_raises_its_diagnosis(verifier, depth, row, small,
                                                              monkeypatch):
    """A bad row at depth L-1 fails the screen of the last levels' kernel; one at a shallower
    depth fails the screen of that depth's kernel, and nothing deeper runs compiled."""
    inst = _unnormalised(depth, row)
    calls = _counting(monkeypatch)
    with pytest.raises(LawError) as fast:
        analyze(inst, verifier, backend="torch")
    assert calls["screens"] == [True] * depth + [False]
    assert calls.get(f"{verifier}_last", 0) == (1 if depth == 2 else 0)
    _torch_route(monkeypatch)
    with pytest.raises(LawError) as slow:
        analyze(inst, verifier, backend="torch")
    assert str(fast.value) == str(slow.value)
    assert fast.value.kind == "correction-sum" and f"node {row}" in str(fast.value)
    assert f"depth {depth}" in str(fast.value)


def _with_bad(inst, which: str, depth: int, row: int, value: float) -> Instance:
    model = inst.target if which == "target" else inst.draft
    tables = [t.copy() for t in model.tables]
    tables[depth][row, 1] = value
    m = TableModel(inst.vocab_size, tuple(tables))
    return _changed_after_check(
        Instance(inst.vocab_size, inst.block_length, m, inst.draft) if which == "target"
        else Instance(inst.vocab_size, inst.block_length, inst.target, m))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("verifier", ["token", "block"])
def test_non_finite_top_target_row_refused_as_before(value, verifier, small, monkeypatch):
    """The target table at depth L is screened by the output kernel, not before the analysis:
    the refusal is the same line, raised before any result."""
    inst = _with_bad(random_instance(3, 3, 2), "target", 3, 17, value)
    checked = []
    real = analysis_mod._check_instance
    monkeypatch.setattr(analysis_mod, "_check_instance",
                        lambda i, skip_top=False: (checked.append(skip_top), real(i, skip_top)))
    with pytest.raises(SpectheoryError) as fast:
        analyze(inst, verifier, backend="torch")
    assert checked == [True, False]  # deferred, then the whole check after the kernel's screen
    _torch_route(monkeypatch)
    with pytest.raises(SpectheoryError) as slow:
        analyze(inst, verifier, backend="torch")
    assert str(fast.value) == str(slow.value)
    assert "target: the row after prefix (1, 2, 2) has a non-finite entry" in str(fast.value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("which", ["target", "draft"])
@pytest.mark.parametrize("V, column", [(3, 1), (8, 5), (9, 8), (16, 12)])
def test_non_finite_row_at_depth_L_minus_1_refused_as_before(value, which, V, column, small,
                                                             monkeypatch):
    """The draft and target tables at depth L-1 are screened by the last levels' kernel where
    its rows are whole vectors of eight entries (V = 8, 16), else by a sum of each table (V = 3,
    9): the same refusal, naming the same row, as the whole check before the analysis, and no
    diagnosis of the node quantities (which a non-finite row also upsets) first."""
    inst = random_instance(V, 3, 2)
    model = inst.target if which == "target" else inst.draft
    tables = [t.copy() for t in model.tables]
    tables[2][V + 2, column] = value
    m = TableModel(V, tuple(tables))
    inst = _changed_after_check(Instance(V, 3, m, inst.draft) if which == "target"
                                else Instance(V, 3, inst.target, m))
    checked = []
    real = analysis_mod._check_instance
    monkeypatch.setattr(analysis_mod, "_check_instance",
                        lambda i, skip_top=False: (checked.append(skip_top), real(i, skip_top)))
    calls = _counting(monkeypatch)
    with pytest.raises(SpectheoryError) as fast:
        analyze(inst, "block" if V != 8 else "token", backend="torch")
    assert checked == [True, False]  # deferred, then the whole check after the kernel's screen
    assert calls.get("block_last", 0) + calls.get("token_last", 0) == 1
    assert "output_top" not in calls  # refused before the output law
    _torch_route(monkeypatch)
    with pytest.raises(SpectheoryError) as slow:
        analyze(inst, "block" if V != 8 else "token", backend="torch")
    assert str(fast.value) == str(slow.value)
    assert f"{which}: the row after prefix (1, 2) has a non-finite entry" in str(fast.value)


@pytest.mark.parametrize("which, depth", [("target", 0), ("target", 1), ("draft", 0),
                                          ("draft", 1)])
@pytest.mark.parametrize("V", [3, 8])
def test_non_finite_shallow_row_refused_before_the_analysis(which, depth, V, small,
                                                            monkeypatch):
    """The tables above depth L-1, which no kernel screens, are still checked before the
    analysis (one sum each): a NaN there is refused with the torch route's line, by the first
    check, before any kernel runs."""
    inst = _with_bad(random_instance(V, 3, 2), which, depth, V**depth - 1, float("nan"))
    calls = _counting(monkeypatch)
    with pytest.raises(SpectheoryError) as fast:
        analyze(inst, "block", backend="torch")
    assert not calls  # refused before the route
    _torch_route(monkeypatch)
    with pytest.raises(SpectheoryError) as slow:
        analyze(inst, "block", backend="torch")
    assert str(fast.value) == str(slow.value) and "non-finite entry" in str(fast.value)


def test_shallow_screen_failure_does_not_hide_a_non_finite_deep_row(small, monkeypatch):
    """A row at depth 1 that upsets the node quantities and a NaN in the target table at depth
    L-1: the whole check runs before any diagnosis, so the NaN is named first, as by the torch
    route."""
    inst = _unnormalised(1, 1)
    inst = _with_bad(inst, "target", 2, 4, float("nan"))
    with pytest.raises(SpectheoryError) as fast:
        analyze(inst, "block", backend="torch")
    assert not isinstance(fast.value, LawError)
    _torch_route(monkeypatch)
    with pytest.raises(SpectheoryError) as slow:
        analyze(inst, "block", backend="torch")
    assert str(fast.value) == str(slow.value) and "non-finite entry" in str(fast.value)


def test_order_of_refusals_kept(small, monkeypatch):
    """A non-finite draft row and a non-finite top target row: the target is named first, as
    by the whole check (target tables before draft tables)."""
    inst = _with_bad(random_instance(3, 3, 2), "target", 3, 17, float("nan"))
    inst = _with_bad(inst, "draft", 1, 0, float("nan"))
    with pytest.raises(SpectheoryError, match=r"target: the row after prefix \(1, 2, 2\)"):
        analyze(inst, "block", backend="torch")


def test_deferral_only_where_the_kernel_reads_the_table(small):
    inst = random_instance(3, 3, 2)
    how = analysis_mod.plan("block", None, None)
    args = dict(route="auto", symmetric=None, exact=None, device="cpu", backend="torch",
                laws=True, executor=None, sampling=None, draft_sampling=None, max_sequences=None)
    assert analysis_mod._screens_top(inst, how, **args)
    for change in (dict(laws=False), dict(sampling="temperature=0.5"), dict(exact=True),
                   dict(route="per-draft"), dict(executor="local"), dict(backend="numpy"),
                   dict(max_sequences=10)):
        assert not analysis_mod._screens_top(inst, how, **{**args, **change}), change
    assert not analysis_mod._screens_top(inst, analysis_mod.plan("traversal", None, None),
                                         **args)


def test_deferred_check_runs_when_the_kernel_did_not(small, monkeypatch):
    """The check of the top target table is left to the output kernel; where the kernel does
    not run after all (numba could not be loaded), the whole check runs after the torch
    route, before any result, and refuses in the same line."""
    inst = _with_bad(random_instance(3, 3, 2), "target", 3, 17, float("inf"))
    monkeypatch.setattr(nodes_mod, "_KERNELS", [None])
    with pytest.raises(SpectheoryError, match=r"target: the row after prefix \(1, 2, 2\) has a "
                                              r"non-finite entry \(inf\)"):
        analyze(inst, "token", backend="torch")


def _aten_row_sum(row, lanes: int) -> float:
    """torch's CPU sum of a contiguous row, written from ATen's cascade_sum (row_sum with four
    accumulators over vectors of ``lanes`` entries; scalars when lanes < 2 or the row is
    shorter than a vector), for rows of fewer than 64 vectors: an independent statement of the
    order the kernels reproduce."""
    V = len(row)
    if lanes < 2 or V < lanes:
        acc = [0.0] * 4
        for i in range(V // 4):
            for k in range(4):
                acc[k] += row[4 * i + k]
        for i in range(4 * (V // 4), V):
            acc[0] += row[i]
        return ((acc[0] + acc[1]) + acc[2]) + acc[3]
    nv = V // lanes
    acc = [[0.0] * lanes for _ in range(4)]
    for i in range(nv // 4):
        for k in range(4):
            for j in range(lanes):
                acc[k][j] += row[(4 * i + k) * lanes + j]
    for i in range(4 * (nv // 4), nv):
        for j in range(lanes):
            acc[0][j] += row[i * lanes + j]
    for k in range(1, 4):
        for j in range(lanes):
            acc[0][j] += acc[k][j]
    total = 0.0
    for i in range(nv * lanes, V):
        total += row[i]
    for j in range(lanes):
        total += acc[0][j]
    return total


def test_row_sum_is_atens_order():
    """`row_sum` against the written-out ATen order for every lane width the probe may choose
    and widths around them (a wrong index or accumulator is caught even where the probe would
    pick another width that happens to agree with torch)."""
    mod = nodes_mod._kernel_module()
    rng = np.random.default_rng(3)
    for lanes in (1, 2, 4, 8, 16):
        for V in list(range(1, 41)) + [63, 64, 100, 129]:
            if (V if lanes < 2 or V < lanes else V // lanes) >= 64:
                continue
            rows = rng.random((16, V)) * np.exp2(-rng.integers(0, 40, (16, V)))
            got = mod.probe_sums(rows, lanes, np.empty(16))
            ref = np.array([_aten_row_sum(list(r), lanes) for r in rows])
            assert np.array_equal(got, ref), (lanes, V)


@pytest.mark.parametrize("verifier", ["token", "block"])
@pytest.mark.parametrize("depth, row", [(2, 4), (0, 0)])
def test_negative_weight_fails_the_screen(verifier, depth, row, small, monkeypatch):
    """A negative target entry at depth d makes the weight of a child at depth d + 1 negative:
    a kernel's screen fails and the torch route names it. At d = L-1 the last levels' kernel
    screens it; at d = 0 token verification's pass weight a_1 is screened by the kernel of depth
    1, while block verification's running weight w_1 is a state, not a weight that is screened
    (as in the torch route): its effect shows in the weights at depth L."""
    inst = random_instance(3, 3, 4)
    p = [t.copy() for t in inst.target.tables]
    p[depth][row] = [-0.25, 0.75, 0.5]
    inst = _changed_after_check(Instance(3, 3, TableModel(3, tuple(p)), inst.draft))
    calls = _counting(monkeypatch)
    with pytest.raises(LawError) as fast:
        analyze(inst, verifier, backend="torch")
    first_bad = 1 if depth == 0 and verifier == "token" else 2  # index of the failing screen
    assert calls["screens"] == [True] * first_bad + [False]
    _torch_route(monkeypatch)
    with pytest.raises(LawError) as slow:
        analyze(inst, verifier, backend="torch")
    assert str(fast.value) == str(slow.value) and fast.value.kind == "negative"


@pytest.mark.parametrize("verifier", ["token", "block"])
def test_multi_iteration_many_contexts_bit_for_bit(verifier, small, monkeypatch):
    """The law of the first N tokens steps the per-node route below V^n contexts at once (C > 1
    rows at depth 0): the kernels' values there are the torch route's."""
    from spectheory.engine.analysis import multi_iteration_law

    inst = random_instance(3, 3, 12)
    calls = _counting(monkeypatch)
    fast = multi_iteration_law(inst, verifier, 4, backend="torch")
    assert calls[f"{verifier}_last"] >= 2 and all(calls["screens"])
    _torch_route(monkeypatch)
    slow = multi_iteration_law(inst, verifier, 4, backend="torch")
    assert _eq(fast[0], slow[0]) and _eq(fast[1], slow[1]) and _eq([fast[2]], [slow[2]])
    assert fast[2] < 1e-12
