"""Hierarchical Speculative Decoding (``hsd``, arXiv 2601.05724, Algorithm 2 from the paper's own
capped joint ratios): equal to block verification draft by draft in exact rationals (so the
paper's Theorem 7, a strict gain over block verification for L > 1, does not hold), lossless;
the released code's uncapped full-block test (``hsd-released``) caught as lossy at L >= 2 and
lossless at L = 1; a planted bug (uncapped residual) caught."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from spectheory.runtime import backend as B
from spectheory.engine.analysis import analyze
from spectheory.engine.lossless import check_lossless
from spectheory.law import Law, validate_law
from spectheory.engine.joint import path_tables
from spectheory.inputs.random_instances import random_instance
from spectheory.registry import VerifierSpec
from spectheory.cli.report import toy_instance
from spectheory.testing import check_lossless_battery
from spectheory.testing.checks.battery import default_battery
from spectheory.engine.seqtree import levels, path_probabilities
from spectheory.verifiers.block import block_verification
from spectheory.verifiers.common import normalise_residual, stop_from_acceptance_weights
from spectheory.verifiers.hsd import (HSD, HSD_RELEASED, capped_branch_masses, hsd,
                                      hsd_released, joint_ratios)


def every_draft(inst, exact: bool = True):
    """All V^L drafts of an instance with the rows along them and their draft probabilities:
    drafts [V^L, L], q [V^L, L, V], p [V^L, L+1, V], q(X) [V^L]."""
    V, L = inst.vocab_size, inst.block_length
    ql = levels(inst.draft, 0, L, exact)
    pl = levels(inst.target, 0, L + 1, exact)
    drafts, q, p, _ = path_tables(ql, pl, L, V)
    one = B.full((1,), 1, pl[0])
    return drafts, q, p, path_probabilities(ql, one)[L]


CASES = [(V, L, seed) for V in (2, 3) for L in (1, 2, 3) for seed in range(4)]


@pytest.mark.parametrize("V,L,seed", CASES)
def test_equals_block_verification_draft_by_draft(V, L, seed):
    inst = random_instance(V, L, seed, denominator=12)  # prefix-dependent rows, rationals
    assert L == 1 or list(inst.target.level(1)[0]) != list(inst.target.level(1)[1])
    drafts, q, p, qx = every_draft(inst)
    got, ref = hsd(drafts, q, p), block_verification(drafts, q, p)
    proposed = qx != 0  # a draft of probability zero is never proposed (any valid law will do)
    assert proposed.sum() >= V ** L // 2
    assert (got.stop[proposed] == ref.stop[proposed]).all()
    assert (got.correction[proposed] == ref.correction[proposed]).all()
    validate_law(Law(got.stop[:, None], got.correction[:, None]), V**L, 1, L, V, True)
    a, b = analyze(inst, HSD), analyze(inst, "block")
    assert a.tau_pmf == b.tau_pmf and a.block_efficiency == b.block_efficiency
    assert (a.output_law == b.output_law).all() and a.tv_to_target == 0


def test_equals_block_with_zeros_and_equal_rows():
    """Rows with zeros, p = q at some nodes, one-hot rows: the battery, each exactly lossless,
    with block verification's law (S_t = 0 with w_t = 1: the 0/0 convention never matters)."""
    reps = check_lossless_battery(HSD)
    assert len(reps) == 8 and all(r.lossless and r.exact and r.tv == 0 for r in reps)
    for b in default_battery():
        a, ref = analyze(b.instance, HSD), analyze(b.instance, "block")
        assert a.tau_pmf == ref.tau_pmf and (a.output_law == ref.output_law).all(), b.name


def test_toy_values_and_repeated_iterations():
    toy = toy_instance()
    res = analyze(toy, HSD)
    assert res.expected_accepted == Fraction(11, 9) and res.block_efficiency == Fraction(20, 9)
    rep = check_lossless(HSD, random_instance(3, 2, 5, denominator=10), n_tokens=5)
    assert rep.lossless and rep.tv == 0 and rep.n_tokens == 5


def test_capped_divergences_are_the_block_quantities():
    """D*(p, q | X^t) = Q_t S_t and D*(q, p | X^t) = Q_t (S_t + 1 - w_t), w_t = r_t / M_t."""
    inst = random_instance(3, 3, 2, denominator=10)
    drafts, q, p, _ = every_draft(inst)
    deficit, excess, r, M = capped_branch_masses(drafts, q, p)
    P, Q, _ = joint_ratios(drafts, q, p)
    w = r / M
    for t in range(3):
        on = Q[:, t] != 0  # prefixes the draft proposes
        S = B.sum(B.positive_part(B.expand_dims(w[:, t], -1) * p[:, t] - q[:, t]), axis=-1)
        assert (B.sum(deficit[:, t], axis=-1) == Q[:, t] * S)[on].all()
        assert (B.sum(excess[:, t], axis=-1) == Q[:, t] * (S + 1 - w[:, t]))[on].all()
        assert on.sum() >= 9
    assert (w <= 1).all() and (r[:, 0] == 1).all()


def test_released_variant_is_lossy_at_L2_and_lossless_at_L1():
    toy = toy_instance()
    rep = check_lossless(HSD_RELEASED, toy)
    assert not rep.lossless and rep.tv == Fraction(1, 9)
    assert rep.offending == (1, 0, 0)
    assert (rep.output_probability, rep.target_probability) == (Fraction(1, 9), Fraction(2, 27))
    res = analyze(toy, HSD_RELEASED)
    assert res.block_efficiency == Fraction(7, 3)  # above block's optimum 20/9: accepts too much
    caught = 0
    for V, L, seed in CASES:
        inst = random_instance(V, L, seed, denominator=12)
        rep = check_lossless(HSD_RELEASED, inst)
        if L == 1:  # max(1, no earlier ratio) = 1: capping changes nothing
            assert rep.lossless and rep.tv == 0
            drafts, q, p, _ = every_draft(inst)
            a, b = hsd_released(drafts, q, p), hsd(drafts, q, p)
            assert (a.stop == b.stop).all() and (a.correction == b.correction).all()
        else:
            caught += not rep.lossless
            if not rep.lossless:
                assert rep.tv > 0 and rep.offending is not None
                assert rep.output_probability != rep.target_probability
    assert caught == 14  # of the 16 instances with L >= 2 (the others have TV 0 there)


def test_released_variant_largest_tv():
    """The largest TV found over 360 exact instances (V, L in (2, 2), (2, 3), (3, 2), (3, 3),
    (2, 4), (4, 2); alpha 1 and 1/2; seeds 0..29; rows in multiples of 1/12)."""
    inst = random_instance(2, 2, 26, denominator=12)
    assert analyze(inst, HSD_RELEASED).tv_to_target == Fraction(25, 144)
    assert analyze(inst, HSD).tv_to_target == 0
    worst = max(analyze(random_instance(V, L, seed, denominator=12), HSD_RELEASED).tv_to_target
                for V in (2, 3) for L in (2, 3) for seed in range(8))
    assert worst == Fraction(1, 12)  # random_instance(3, 2, 6, denominator=12)


def _uncapped_residual(drafts, q, p):
    """Planted bug: HSD whose residual uses the uncapped joint ratio, (p(X^t v) - q(X^t v))^+."""
    L = drafts.shape[-1]
    deficit, excess, r, M = capped_branch_masses(drafts, q, p)
    d_pq, d_qp = B.sum(deficit, axis=-1), B.sum(excess, axis=-1)
    h_mid = B.minimum(B.safe_div(d_pq, d_qp, B.scalar(d_pq, 0)), 1)
    h = B.concat([B.ones_like(h_mid[:, :1]), h_mid[:, 1:],
                  B.expand_dims(B.minimum(r[:, L] / M[:, L - 1], 1), 1)], axis=1)
    P, Q, _ = joint_ratios(drafts, q, p)
    res = B.positive_part(B.expand_dims(P[:, :L], -1) * p[:, :L] - B.expand_dims(Q[:, :L], -1) * q)
    rows = [normalise_residual(res[:, t], B.sum(res[:, t], axis=-1), p[:, t]) for t in range(L)]
    return Law(stop_from_acceptance_weights(h), B.stack(rows + [p[:, L]], axis=1))


def test_planted_uncapped_residual_is_caught():
    bug = VerifierSpec("hsd-bug", _uncapped_residual, paths=1, lossless=False)
    reps = [check_lossless(bug, random_instance(V, 3, seed, denominator=12))
            for V in (2, 3) for seed in range(3)]
    assert all(not r.lossless and r.tv > 0 and r.offending is not None for r in reps)


def test_float64_and_float32_rows():
    inst = random_instance(3, 3, 1, denominator=12)
    exact = analyze(inst, HSD)
    flt = analyze(inst.to_float(), HSD)
    assert abs(float(flt.expected_accepted) - float(exact.expected_accepted)) < 1e-12
    assert flt.tv_to_target < 1e-12
    drafts, q, p, qx = every_draft(inst.to_float(), exact=False)
    law32 = hsd(drafts, q.float(), p.float())
    law64 = block_verification(drafts, q, p)
    assert law32.stop.dtype == torch.float32 and law32.correction.dtype == torch.float32
    on = qx > 0
    assert torch.allclose(law32.stop.double()[on], law64.stop[on], atol=1e-6)
    assert torch.allclose(law32.correction.sum(-1), torch.ones(27, 4), atol=1e-6)
    for law in (law32, hsd_released(drafts, q.float(), p.float())):
        assert torch.isfinite(law.stop).all() and (law.stop >= 0).all()


def test_long_block_float32_no_underflow():
    """Joint probabilities of a 40-token block underflow float32 (1e-5^40); the law is formed
    in float64 and still equals block verification's."""
    g = torch.Generator().manual_seed(0)
    L, V = 40, 64
    q = torch.softmax(4 * torch.randn(2, L, V, generator=g, dtype=torch.float64), -1)
    p = torch.softmax(4 * torch.randn(2, L + 1, V, generator=g, dtype=torch.float64), -1)
    drafts = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(2, L)
    got = hsd(drafts, q.float(), p.float())
    ref = block_verification(drafts, q, p)
    assert torch.allclose(got.stop.double(), ref.stop, atol=1e-5)
    assert np.isclose(float(got.stop.sum()), 2.0)


def test_registration_metadata():
    assert HSD.name == "hsd" and HSD.single_path and HSD.lossless and HSD.exact
    assert HSD_RELEASED.name == "hsd-released" and not HSD_RELEASED.lossless
    assert "2601.05724" in HSD.paper and HSD.summary and HSD_RELEASED.summary


@pytest.mark.parametrize("tiny", [3e-315, 5e-324, 1e-300])
def test_subnormal_draft_conditionals_keep_the_law_finite_and_equal_to_block(tiny):
    """A draft conditional of 3e-315 made r_t = P_t / Q_t overflow to inf, M_t too, and
    r_L / M_{L-1} = inf / inf: `check` reported the lossless HSD "NOT A LAW (nan)" (exit 1)
    where block verification passed. Every draft, both backends: finite, equal to block."""
    inst = random_instance(2, 3, 4)
    q1 = inst.draft.tables[1].copy()
    q1[0] = [tiny, 1.0]  # the row after "0"
    rng = np.random.default_rng(0)
    p2 = rng.dirichlet([0.2, 0.2], size=4)
    from spectheory.inputs.instances import Instance
    from spectheory.inputs.models import TableModel

    draft = TableModel(2, [inst.draft.tables[0], q1, inst.draft.tables[2]])
    target = TableModel(2, [inst.target.tables[0], inst.target.tables[1], p2,
                            inst.target.tables[3]])
    bad = Instance(2, 3, target, draft)
    drafts, q, p, _ = every_draft(bad, exact=False)
    for args in ((drafts, q, p), tuple(torch.as_tensor(np.asarray(a)) for a in (drafts, q, p))):
        got, want = hsd(*args), block_verification(*args)
        joint = np.asarray(q, dtype=np.float64)[np.arange(len(drafts))[:, None],
                                                  np.arange(3), np.asarray(drafts)].prod(axis=1)
        seen = joint > 0  # a joint draft probability below 2^-1074 is 0 to float64: any law
        for a, b in ((got.stop, want.stop), (got.correction, want.correction)):
            a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
            assert np.isfinite(a).all()
            assert np.abs(a - b)[seen].max() < 1e-12
        assert np.isfinite(np.asarray(hsd_released(*args).stop, dtype=np.float64)).all()
    assert check_lossless(HSD, bad).lossless


def test_a_draft_the_draft_model_never_proposes_follows_the_stated_convention():
    """Where Q_t = 0 the capped ratio is r_t / M_t with r_t = 1 (the module's convention; any
    valid law would do, but an engine's kernel compared with this law on such a draft meets
    this one). d = (0, 1), q(.) = (1/4, 3/4), q(.|0) = (1, 0): r_1 = p(0)/q(0) = 3, M_2 = 3, so
    the whole block is accepted with c_2 = 1/3; c_1 = min(1, 3) = 1, so nothing stops at 0."""
    F = Fraction
    d = np.array([[0, 1]])
    q = np.array([[[F(1, 4), F(3, 4)], [F(1), F(0)]]], dtype=object)
    p = np.array([[[F(3, 4), F(1, 4)], [F(1, 2), F(1, 2)], [F(1, 3), F(2, 3)]]], dtype=object)
    law = hsd(d, q, p)
    assert list(law.stop[0]) == [0, F(2, 3), F(1, 3)]
    validate_law(Law(law.stop[:, None], law.correction[:, None]), 1, 1, 2, 2, True)
