"""Exact engine, token and block verification: values, losslessness, orderings."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings

from reference_rational import block_law, reference_analysis, token_law
from spectheory.runtime import backend as Bk
from spectheory.engine.analysis import analyze, multi_iteration_law
from spectheory.engine.lossless import check_lossless
from spectheory.inputs.models import prefix_from_index
from spectheory.cli.report import toy_instance
from spectheory.verifiers import block_verification, token_verification
from strategies import instances, make_instance

F = Fraction


# ----------------------------------------------------------------------------- test vector


def test_paper_test_vector_exact():
    inst = toy_instance(exact=True)
    tok = analyze(inst, token_verification)
    blk = analyze(inst, block_verification)
    assert tok.expected_accepted == F(10, 9)
    assert blk.expected_accepted == F(11, 9)
    assert blk.block_efficiency == F(20, 9)
    assert tok.tau_pmf == [F(1, 3), F(2, 9), F(4, 9)]
    assert blk.tau_pmf == [F(1, 3), F(1, 9), F(5, 9)]
    assert tok.tv_to_target == 0 and blk.tv_to_target == 0
    assert all(isinstance(v, Fraction) for v in blk.tau_pmf)


def test_paper_test_vector_float():
    inst = toy_instance(exact=False)
    assert analyze(inst, token_verification).expected_accepted == pytest.approx(10 / 9, abs=1e-15)
    assert analyze(inst, block_verification).expected_accepted == pytest.approx(11 / 9, abs=1e-15)


# ----------------------------------------------------------------------------- vs reference


@pytest.mark.parametrize("kind", ["dirichlet", "sparse", "equal", "onehot_target", "peaked",
                                  "context_independent", "onehot_draft"])
@pytest.mark.parametrize("name,fn,ref", [("token", token_verification, token_law),
                                         ("block", block_verification, block_law)])
def test_engine_matches_independent_rational_reference(kind, name, fn, ref):
    """The vectorised engine equals a naive per-draft Fraction implementation, exactly."""
    inst = make_instance(kind, V=3, L=3, seed=7, denominator=6)
    res = analyze(inst, fn)
    pmf, out, target = reference_analysis(inst, ref)
    assert res.tau_pmf == pmf
    V, N = 3, 4
    for k in range(V**N):
        seq = prefix_from_index(k, N, V)
        assert res.output_law[k] == out.get(seq, 0)
        assert res.target_law[k] == target.get(seq, 0)


def test_float_engine_matches_exact_engine():
    inst = make_instance("sparse", V=3, L=4, seed=3, denominator=12)
    for fn in (token_verification, block_verification):
        ex = analyze(inst, fn)
        fl = analyze(inst.to_float(), fn)
        np.testing.assert_allclose(fl.tau_pmf, [float(v) for v in ex.tau_pmf], atol=1e-14)


def test_chunked_engine_equals_unchunked(monkeypatch):
    import spectheory.engine.perdraft as ex

    inst = make_instance("dirichlet", V=4, L=5, seed=11)
    full = analyze(inst, block_verification)
    monkeypatch.setattr(ex, "CHUNK_ELEMENTS", 4 * 6 * 16)  # force 16-draft chunks
    chunked = analyze(inst, block_verification)
    np.testing.assert_allclose(chunked.tau_pmf, full.tau_pmf, atol=1e-15)
    np.testing.assert_allclose(chunked.output_law, full.output_law, rtol=0, atol=1e-16)


# ----------------------------------------------------------------------------- properties


@settings(max_examples=80)
@given(instances(max_vocab=4, max_block=4, max_leaves=1024))
def test_lossless_and_block_dominates_float(inst):
    tok = analyze(inst, token_verification)
    blk = analyze(inst, block_verification)
    assert tok.tv_to_target <= 1e-12
    assert blk.tv_to_target <= 1e-12
    assert abs(sum(blk.tau_pmf) - 1) <= 1e-12
    assert min(blk.tau_pmf) >= -1e-15
    assert blk.block_efficiency >= tok.block_efficiency - 1e-12


@settings(max_examples=40)
@given(instances(max_vocab=3, max_block=3, max_leaves=256, exact=True))
def test_lossless_and_block_dominates_exact(inst):
    tok = analyze(inst, token_verification)
    blk = analyze(inst, block_verification)
    assert tok.tv_to_target == 0
    assert blk.tv_to_target == 0
    assert sum(blk.tau_pmf) == 1
    assert blk.expected_accepted >= tok.expected_accepted


@settings(max_examples=30)
@given(instances(max_vocab=4, max_block=1, max_leaves=64))
def test_block_equals_token_when_L_is_1(inst):
    tok = analyze(inst, token_verification)
    blk = analyze(inst, block_verification)
    np.testing.assert_allclose(blk.tau_pmf, tok.tau_pmf, atol=1e-14)


@settings(max_examples=30)
@given(instances(max_vocab=4, max_block=4, max_leaves=1024, kinds=["equal"]))
def test_p_equals_q_accepts_everything(inst):
    L = inst.block_length
    for fn in (token_verification, block_verification):
        r = analyze(inst, fn)
        assert r.expected_accepted == pytest.approx(L, abs=1e-12)


@settings(max_examples=30)
@given(instances(max_vocab=4, max_block=4, max_leaves=1024, exact=True,
                 kinds=["onehot_target"]))
def test_one_hot_target_block_equals_token_exactly(inst):
    assert analyze(inst, block_verification).tau_pmf == analyze(inst, token_verification).tau_pmf


@settings(max_examples=15)
@given(instances(max_vocab=3, max_block=2, max_leaves=27, exact=True))
def test_multi_iteration_law_is_target_law_exact(inst):
    for fn in (token_verification, block_verification):
        law, tgt, tv = multi_iteration_law(inst, fn, n_tokens=inst.block_length + 3)
        assert tv == 0
        assert (law == tgt).all()


def test_multi_iteration_float_long_horizon():
    inst = make_instance("dirichlet", V=2, L=3, seed=5)
    law, tgt, tv = multi_iteration_law(inst, block_verification, n_tokens=9)
    assert tv <= 1e-12
    assert float(law.sum()) == pytest.approx(1.0, abs=1e-12)


# ----------------------------------------------------------------------------- degenerate


def test_no_nan_on_degenerate_rows():
    """q(x) = 0 where p(x) > 0, p(x) = 0, p = q and one-hot rows: finite laws, valid rows."""
    V, L = 3, 3
    p = torch.tensor([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0]],
                     dtype=torch.float64)
    q = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]], dtype=torch.float64)
    drafts = torch.tensor([[0, 0, 1], [2, 1, 0], [1, 0, 2]])
    for fn in (token_verification, block_verification):
        law = fn(drafts, q.expand(3, L, V), p.expand(3, L + 1, V))
        assert torch.isfinite(law.stop).all() and torch.isfinite(law.correction).all()
        assert torch.allclose(law.stop.sum(1), torch.ones(3, dtype=torch.float64))
        assert torch.allclose(law.correction.sum(-1), torch.ones(3, L + 1, dtype=torch.float64))


def test_exact_backend_never_divides_by_zero():
    inst = make_instance("onehot_draft", V=3, L=3, seed=1, denominator=2)
    res = analyze(inst, block_verification)
    assert res.tv_to_target == 0
    assert all(isinstance(v, Fraction) for v in res.tau_pmf)
    assert Bk.is_exact(res.output_law)


# ----------------------------------------------------------------------------- checker


def test_checker_flags_running_product_of_uniforms():
    from spectheory.verifiers import uniform_product_verification

    inst = toy_instance(exact=False)
    rep = check_lossless(uniform_product_verification, inst)
    assert not rep.lossless
    assert rep.tv > 1e-3
    assert rep.offending is not None and len(rep.offending) == 3
    assert abs(rep.output_probability - rep.target_probability) > 1e-12
    k = sum(t * 2 ** (2 - i) for i, t in enumerate(rep.offending))
    res = analyze(inst, uniform_product_verification)
    assert float(res.output_law[k]) == pytest.approx(rep.output_probability)
    # and the real verifiers pass the same checker
    assert check_lossless(block_verification, inst).lossless
    assert check_lossless(token_verification, toy_instance(exact=True)).lossless


def test_float_model_that_is_not_exactly_normalised_refuses_exact_mode():
    from spectheory.runtime.errors import InstanceError

    with pytest.raises(InstanceError, match="not exactly 1"):
        toy_instance(exact=False).to_exact()
    # decimal floats that do sum to 1 convert fine
    inst = make_instance("dirichlet", V=2, L=1, seed=0, denominator=4).to_float().to_exact()
    assert analyze(inst, block_verification).tv_to_target == 0


def test_uniform_product_law_matches_monte_carlo():
    """The lossy variant's closed-form law (Poisson recursion) agrees with direct simulation."""
    from spectheory.verifiers import uniform_product_verification

    g = torch.Generator().manual_seed(0)
    L, V, n = 4, 3, 200_000
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64).expand(1, L + 1, V)
    q = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64).expand(1, L, V)
    drafts = torch.tensor([[0, 1, 0, 2]])
    law = uniform_product_verification(drafts, q, p)
    a = torch.clamp(p[0, :L].gather(1, drafts.T)[:, 0] / q[0].gather(1, drafts.T)[:, 0], max=1)
    c = torch.cumprod(a, 0)
    u = torch.cumprod(torch.rand(n, L, generator=g, dtype=torch.float64), 1)
    ok = (u <= c).to(torch.int64)
    tau = torch.cumprod(ok, 1).sum(1)
    freq = torch.bincount(tau, minlength=L + 1).double() / n
    assert torch.allclose(freq, law.stop[0], atol=5e-3)


def test_checker_catches_a_subtly_wrong_residual_exactly():
    """A user verifier that forgets the weight w_i in block verification's residual."""
    from spectheory.verifiers.block import block_weights
    from spectheory.verifiers.common import residual_corrections, residuals

    def wrong(drafts, q, p):
        law = block_verification(drafts, q, p)
        w = block_weights(drafts, q, p)
        res = residuals(Bk.ones_like(w[:, :-1]), q, p)
        return law._replace(correction=residual_corrections(res, p))

    # (with V = 2 both residuals normalise to the same one-hot row, so use V = 3)
    assert check_lossless(wrong, toy_instance(exact=True)).lossless
    rep = check_lossless(wrong, make_instance("dirichlet", V=3, L=2, seed=2, denominator=12))
    assert not rep.lossless and rep.exact
    assert rep.output_probability != rep.target_probability
    assert isinstance(rep.tv, Fraction) and rep.tv > 0
    assert prefix_from_index(0, 3, 2) == (0, 0, 0)


def test_block_law_is_nonnegative_in_float32():
    """Near-equal p and q in float32: the acceptance weights stay in [0, 1] (no -1e-7 stops)."""
    g = torch.Generator().manual_seed(0)
    B_, L, V = 4096, 6, 50
    logits = torch.randn(B_, L + 1, V, generator=g)
    p = torch.softmax(logits, -1)
    q = torch.softmax(logits[:, :L] + 1e-3 * torch.randn(B_, L, V, generator=g), -1)
    drafts = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(B_, L)
    law = block_verification(drafts, q, p)
    assert law.stop.dtype == torch.float32
    assert (law.stop >= 0).all() and (law.stop <= 1).all()
    assert torch.allclose(law.stop.sum(1), torch.ones(B_), atol=1e-5)


def test_dirichlet_tables_do_not_depend_on_the_chunk_size(monkeypatch):
    """Large levels are drawn in chunks of rows (no second full-size temporary): the tables
    are the same values as with one draw per level, float and exact (denominator) alike."""
    import spectheory.inputs.random_instances as R

    cases = [dict(vocab_size=3, block_length=3, seed=0),
             dict(vocab_size=4, block_length=3, seed=5, alpha=0.05),
             dict(vocab_size=3, block_length=2, seed=1, denominator=60)]
    whole = [R.random_instance(**c) for c in cases]
    monkeypatch.setattr(R, "CHUNK_ROWS", 7)
    for c, ref in zip(cases, whole):
        inst = R.random_instance(**c)
        for a, b in ((inst.target, ref.target), (inst.draft, ref.draft)):
            assert all(np.array_equal(x, y) for x, y in zip(a.tables, b.tables))
    assert R.random_instance(3, 3, 0).target.tables[3].shape == (27, 3)
