"""GBV: the analytic route (block verification against the skewed draft q^G, per node) is the
default of analyze and equals the joint enumeration exactly (rationals, prefix-dependent rows,
ties, zeros) and to 1e-14 in float64; the enumeration stays available as route="enumerate".

The skew's running mass A (the q-mass of the prefixes ranked below the current node) first
depends on the path mass x at depth 2 (A_2 = A_1 + x_1 below_1), so the comparisons run up to
L = 4: an A-update that drops the factor x is exact at L <= 2 and off at L >= 3."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

from spectheory.engine.analysis import analyze, multi_iteration_law
from spectheory.engine.lossless import check_lossless
from spectheory.inputs.instances import Instance, instance_from_dict
from spectheory.inputs.models import TableModel
from spectheory.engine.analysis import analyze_gbv_fast
from spectheory.inputs.random_instances import random_instance
from spectheory.registry import DraftingWarning, get_verifier
from strategies import make_instance

TIE = {"vocab_size": 3, "block_length": 2, "target": ["1/4", "3/8", "3/8"],
       "draft": ["1/2", "1/4", "1/4"]}


def _exact_instances():
    yield random_instance(3, 2, 4, denominator=12)            # prefix-dependent rows
    yield random_instance(2, 3, 5, alpha=0.3, denominator=6)  # zeros, prefix-dependent
    yield instance_from_dict(TIE, exact=True)                 # equal ratios (ties)
    yield make_instance("equal", V=3, L=2, seed=3, denominator=6)
    yield make_instance("onehot_target", V=3, L=2, seed=4, denominator=6)


@pytest.mark.parametrize("K", [1, 2, 3])
def test_analytic_equals_enumeration_exactly(K):
    for inst in _exact_instances():
        fast = analyze(inst, "gbv", paths=K)
        enum = analyze(inst, "gbv", paths=K, route="enumerate")
        assert fast.route == "analytic" and enum.route in ("enumerate", "per-draft")
        assert fast.tau_pmf == enum.tau_pmf
        assert fast.tv_to_target == enum.tv_to_target == 0
        assert (np.asarray(fast.output_law) == np.asarray(enum.output_law)).all()
        assert fast.extra == enum.extra == {"paths": K, "drafting": "iid"}


@pytest.mark.parametrize("K", [2, 3])
def test_analytic_equals_enumeration_float(K):
    inst = random_instance(3, 2, 9, alpha=0.5)
    fast = analyze(inst, "gbv", paths=K)
    enum = analyze(inst, "gbv", paths=K, route="enumerate")
    assert max(abs(a - b) for a, b in zip(fast.tau_pmf, enum.tau_pmf)) <= 1e-14
    assert float(np.abs(fast.output_law - enum.output_law).max()) <= 1e-14
    assert abs(fast.tv_to_target - enum.tv_to_target) <= 1e-14
    assert analyze_gbv_fast(inst, K).tau_pmf == fast.tau_pmf


def test_k1_is_block_verification():
    inst = random_instance(3, 3, 2, denominator=10)
    assert analyze(inst, "gbv", paths=1).tau_pmf == analyze(inst, "block").tau_pmf


def test_multi_iteration_and_checker_on_both_routes():
    inst = random_instance(2, 2, 1, alpha=0.5, denominator=8)
    a = multi_iteration_law(inst, "gbv", 3, paths=2)
    b = multi_iteration_law(inst, "gbv", 3, paths=2, route="enumerate")
    assert (a[0] == b[0]).all() and a[2] == b[2] == 0
    assert check_lossless("gbv", inst, paths=2).lossless
    assert check_lossless("gbv", inst, paths=2, route="enumerate").lossless


def test_lossy_control_is_still_caught_and_enumerated():
    """The mismatched-ties control has no analytic route: it is enumerated and found lossy."""
    inst = instance_from_dict(TIE, exact=True)
    assert get_verifier("gbv-mismatched-ties").analytic is None
    res = analyze(inst, "gbv-mismatched-ties", paths=2)
    assert res.route == "enumerate" and res.tv_to_target > 0


def test_other_drafting_scheme_falls_back_to_enumeration():
    inst = random_instance(3, 2, 4, denominator=12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DraftingWarning)
        res = analyze(inst, "gbv", paths=2, drafting="norep")
    assert res.route == "enumerate"


def test_large_case_only_possible_on_analytic_route():
    """V = 4, L = 4, K = 3: 16.7 M ordered joint outcomes; the analytic route is lossless and its
    E[tau] exceeds block verification's."""
    inst = random_instance(4, 4, 0)
    g = analyze(inst, "gbv", paths=3)
    assert g.tv_to_target < 1e-14
    assert g.expected_accepted > analyze(inst, "block").expected_accepted


def _tie_instance(V: int, L: int, seed: int) -> Instance:
    """Prefix-dependent exact rows (multiples of 1/12) with every other row of each depth replaced
    by a rotated pair with ties in p/q: q = (1/2, 1/4, 1/4), p = (1/4, 3/8, 3/8) (ratios 1/2, 3/2,
    3/2) for V = 3, p = q = (1/3, 2/3) (ratios 1, 1) for V = 2; the rotation depends on the row."""
    base = random_instance(V, L, seed, denominator=12)
    if V == 2:
        tie_q = tie_p = [Fraction(1, 3), Fraction(2, 3)]
    else:
        tie_q = [Fraction(1, 2), Fraction(1, 4), Fraction(1, 4)] + [Fraction(0)] * (V - 3)
        tie_p = [Fraction(1, 4), Fraction(3, 8), Fraction(3, 8)] + [Fraction(0)] * (V - 3)

    def model(tables, tie):
        out = []
        for d, t in enumerate(tables):
            t = np.array(t, dtype=object)
            for r in range(0, V**d, 2):
                t[r] = np.roll(np.array(tie, dtype=object), (r // 2 + d) % V)
            out.append(t)
        return TableModel(V, tuple(out))

    return Instance(V, L, model(base.target.tables, tie_p), model(base.draft.tables, tie_q))


def _tied_nodes(inst: Instance, depth: int) -> int:
    """Nodes of ``depth`` where two tokens of positive draft probability have equal p/q."""
    q, p = inst.draft.tables[depth], inst.target.tables[depth]
    count = 0
    for qr, pr in zip(q, p):
        ratios = [pr[a] / qr[a] for a in range(inst.vocab_size) if qr[a] > 0]
        count += len(ratios) != len(set(ratios))
    return count


#: (V, L, K, rows) of the deep comparisons: the joint enumeration visits C(V^L + K - 1, K)
#: sorted outcomes (3,321 at V = 3, L = 4, K = 2, run on the prefix-dependent rows only).
DEEP = [(3, 3, 2, "prefix-dependent"), (3, 3, 2, "ties"), (2, 3, 3, "prefix-dependent"),
        (2, 3, 3, "ties"), (2, 4, 2, "prefix-dependent"), (2, 4, 2, "ties"),
        (2, 4, 3, "prefix-dependent"), (2, 4, 3, "ties"), (3, 4, 2, "prefix-dependent")]


@pytest.mark.parametrize("V,L,K,kind", DEEP)
def test_analytic_equals_enumeration_exactly_at_depth(V, L, K, kind):
    """Exact equality (tau pmf, output law over V^(L+1) sequences, TV 0) of the analytic route
    and the joint enumeration at L = 3..4, K = 2..3, on prefix-dependent rational rows with zeros
    and on rows with exact ties in p/q at every depth."""
    if kind == "ties":
        inst = _tie_instance(V, L, V + L + K)
        assert all(_tied_nodes(inst, d) > 0 for d in range(L))
    else:
        inst = random_instance(V, L, 10 * L + K, alpha=0.5, denominator=12)
    fast = analyze(inst, "gbv", paths=K)
    enum = analyze(inst, "gbv", paths=K, route="enumerate")
    assert fast.route == "analytic" and enum.route == "enumerate"
    assert fast.tau_pmf == enum.tau_pmf
    assert (np.asarray(fast.output_law) == np.asarray(enum.output_law)).all()
    assert fast.tv_to_target == enum.tv_to_target == 0


@pytest.mark.parametrize("L,K", [(3, 2), (3, 3), (4, 2)])
def test_analytic_equals_enumeration_float_at_depth(L, K):
    """The same comparison in float64 (V = 3, prefix-dependent rows with zeros): within 1e-14."""
    inst = random_instance(3, L, 20 + L + K, alpha=0.5)
    fast = analyze(inst, "gbv", paths=K)
    enum = analyze(inst, "gbv", paths=K, route="enumerate")
    assert max(abs(a - b) for a, b in zip(fast.tau_pmf, enum.tau_pmf)) <= 1e-14
    assert float(np.abs(fast.output_law - enum.output_law).max()) <= 1e-14


def test_batch_rows_that_repeat_a_path_equal_each_row_alone():
    """The CPU route computes a selected path once per distinct (tokens, rows) in a batch: rows
    repeating a path with the same rows, and rows drafting the same tokens over other rows (as
    a real model's different contexts would), each equal the law of that row alone,
    bit for bit (float64 and float32)."""
    import torch

    from spectheory.verifiers.gbv import gbv

    g = torch.Generator().manual_seed(3)
    Bsz, K, L, V = 6, 2, 3, 4
    drafts = torch.randint(0, V, (Bsz, K, L), generator=g)
    q = torch.softmax(2 * torch.randn(Bsz, K, L, V, generator=g, dtype=torch.float64), -1)
    p = torch.softmax(2 * torch.randn(Bsz, K, L + 1, V, generator=g, dtype=torch.float64), -1)
    drafts[1:] = drafts[0]
    q[1:4], p[1:4] = q[0], p[0]          # row 1 repeats row 0; rows 2..5 draft its tokens
    q[2, :, 1] = q[2, :, 1].flip(-1)      # over other q rows (2), other p rows (3), both (4)
    p[3, :, 2] = p[3, :, 2].flip(-1)
    q[4], p[4] = q[2], p[3]
    for dt in (torch.float64, torch.float32):
        law = gbv(drafts, q.to(dt), p.to(dt))
        for b in range(Bsz):
            one = gbv(drafts[b:b + 1], q[b:b + 1].to(dt), p[b:b + 1].to(dt))
            assert torch.equal(law.stop[b:b + 1], one.stop), (b, dt)
            assert torch.equal(law.correction[b:b + 1], one.correction), (b, dt)
        for b in (2, 3, 4, 5):  # the other rows change the law
            assert not torch.equal(law.correction[b], law.correction[0]), (b, dt)


def test_path_reuse_compares_bits():
    """A path is reused only for rows of the same bit patterns: -0.0 and 0.0 (equal under
    torch.equal, ranked apart by GBV's bit orders) are different rows, in every dtype."""
    import torch

    from spectheory.verifiers.gbv import _same_bits

    for dt in (torch.float64, torch.float32, torch.float16):
        a = torch.tensor([0.0, 0.25, 0.75], dtype=dt)
        b = torch.tensor([-0.0, 0.25, 0.75], dtype=dt)
        assert torch.equal(a, b) and not _same_bits(a, b) and _same_bits(a, a.clone())
        assert not _same_bits(a, torch.tensor([0.0, 0.75, 0.25], dtype=dt))
