"""SpecHub (``spechub``, ``hub`` drafting): exactly lossless in rationals, the closed-form
acceptance and the direct LP optimum of its own draft law at L = 1, below the LP at L = 2, the
authors' staged rule on the worked example, float rows against rationals, planted bugs caught,
K > 2 refused in one line, and the ``hub`` scheme's joint law."""

from __future__ import annotations

import importlib
import warnings
from fractions import Fraction

import numpy as np
import pytest
import torch
from cli_helpers import run, write

from spectheory.runtime import backend as Bk
from spectheory import registry
from spectheory.runtime.errors import SpectheoryError
from spectheory.engine.analysis import analyze
from spectheory.inputs.instances import instance_from_dict
from spectheory.engine.analysis import analyze_multipath
from spectheory.engine.lossless import check_lossless_multipath
from spectheory.engine.joint import draft_weight, path_tables
from spectheory.engine.sampling import sample_drafts
from spectheory.inputs.random_instances import random_instance
from spectheory.registry import DraftingWarning
from spectheory.engine.seqtree import levels, path_probabilities
from spectheory.verifiers import MULTI_PATH, token_verification
from spectheory.verifiers.spechub import SPECHUB, spechub, spechub_rule
from spectheory.registry import hub_tokens

#: The module (``spectheory.verifiers.spechub`` is also the name of the function).
sh = importlib.import_module("spectheory.verifiers.spechub")

from spectheory import lp

F = Fraction


def ci(p, q, L=1):
    """A context-independent exact instance (the same rows at every prefix)."""
    return instance_from_dict({"vocab_size": len(p), "block_length": L, "target": p,
                               "draft": q}, exact=True)


#: The worked example: hub 0, acceptance 9/10.
EXAMPLE = ci(["1/10", "3/5", "3/10"], ["3/5", "1/5", "1/5"])


def degenerate_instances(L):
    """q(a) = 1, ties in argmax q, disjoint supports (with and without q(a) = 1), p = q, a
    one-hot target on a non-hub token, a zero in q."""
    yield "q(a) = 1", ci(["1/4", "1/2", "1/4"], ["1", "0", "0"], L)
    yield "ties in argmax q", ci(["1/4", "1/4", "1/2"], ["2/5", "2/5", "1/5"], L)
    yield "three-way tie", ci(["1/2", "1/6", "1/3"], ["1/3", "1/3", "1/3"], L)
    yield "disjoint, q(a) = 1", ci(["0", "1/2", "1/2"], ["1", "0", "0"], L)
    yield "disjoint", ci(["0", "0", "1"], ["1/2", "1/2", "0"], L)
    yield "p = q", ci(["1/3", "1/6", "1/2"], ["1/3", "1/6", "1/2"], L)
    yield "one-hot on a non-hub token", ci(["0", "0", "1"], ["1/2", "1/4", "1/4"], L)
    yield "draft zero", ci(["1/2", "1/4", "1/4"], ["0", "1/3", "2/3"], L)
    yield "random zeros", random_instance(3, L, 11, alpha=0.3, denominator=6)


def root_rows(inst):
    return list(inst.target.level(0)[0]), list(inst.draft.level(0)[0])


def closed_form(p, q):
    """1 - sum_{i != a} (p(i) - q(i) / (1 - q(a)))^+ (a = argmax q, the smallest id on ties)."""
    a = max(range(len(q)), key=lambda x: (q[x], -x))
    return 1 - sum(max(p[i] - q[i] / (1 - q[a]), 0) for i in range(len(p)) if i != a)


# ----------------------------------------------------------------------------- losslessness


@pytest.mark.parametrize("L", [1, 2])
def test_lossless_exactly_on_prefix_dependent_instances(L):
    for V, seed in ((2, 1), (3, 2), (3, 5), (4, 7)):
        inst = random_instance(V, L, seed, denominator=9)
        if L == 2:  # rows depend on the prefix
            assert list(inst.target.level(1)[0]) != list(inst.target.level(1)[1])
        rep = check_lossless_multipath(SPECHUB, inst, 2, "hub")
        assert rep.lossless and rep.tv == 0, (V, L, seed, str(rep))


@pytest.mark.parametrize("L", [1, 2])
def test_lossless_exactly_on_degenerate_instances(L):
    for label, inst in degenerate_instances(L):
        for K in (1, 2):
            res = analyze_multipath(inst, SPECHUB, K, "hub")
            assert res.exact and res.tv_to_target == 0, (label, K)
            assert sum(res.tau_pmf) == 1


def test_q_hub_one_is_token_verification():
    """q(a) = 1: path 2 repeats path 1 and is skipped, so the law is token verification's."""
    for L in (1, 2):
        inst = ci(["1/4", "1/2", "1/4"], ["1", "0", "0"], L)
        two = analyze_multipath(inst, SPECHUB, 2, "hub")
        tok = analyze(inst, token_verification)
        assert two.tau_pmf == tok.tau_pmf


def test_k1_is_token_verification():
    for inst in (EXAMPLE, random_instance(3, 2, 4, denominator=8)):
        one = analyze_multipath(inst, SPECHUB, 1, "hub")
        tok = analyze(inst, token_verification)
        assert one.tau_pmf == tok.tau_pmf
        assert all(x == y for x, y in zip(one.output_law, tok.output_law))


def test_lossy_under_another_drafting_scheme():
    """The rule is lossless for its own draft law only: under i.i.d. drafting the checker
    finds it lossy (pairs without the hub are rejected into a residual that omits the hub)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DraftingWarning)
        rep = check_lossless_multipath(SPECHUB, EXAMPLE, 2, "iid")
    assert not rep.lossless and rep.offending is not None


# ----------------------------------------------------------------------------- acceptance


def test_worked_example():
    """p = (1/10, 3/5, 3/10), q = (3/5, 1/5, 1/5): acceptance 9/10, E[tau + 1] = 19/10."""
    res = analyze_multipath(EXAMPLE, SPECHUB, 2, "hub")
    assert res.tau_pmf == [F(1, 10), F(9, 10)]
    assert res.block_efficiency == F(19, 10)
    assert closed_form(*root_rows(EXAMPLE)) == F(9, 10)


def _conditional_law(p, q, x1, x2):
    """P(Y = y | ordered drafts (x1, x2)) of the rule at one node, exactly."""
    V = len(p)
    member = np.ones((1, 1, 2), dtype=np.int64)
    tok = np.array([[x1, x2]], dtype=np.int64)
    qr = Bk.to_exact(np.array([[q]], dtype=object))
    pr = Bk.to_exact(np.array([[p]], dtype=object))
    acc, none, corr = spechub_rule(member, tok, qr, pr)
    law = [none[0, 0] * corr[0, 0, y] for y in range(V)]
    law[x1] += acc[0, 0, 0]
    law[x2] += acc[0, 0, 1]
    return law, acc[0, 0].tolist(), none[0, 0]


def test_worked_example_staged_rule():
    """The authors' staged rule given the ordered drafts: (a, i) tests the second draft i
    first, then the hub; (i, a) tests i, then the hub."""
    p, q = root_rows(EXAMPLE)
    law, acc, none = _conditional_law(p, q, 0, 2)  # hub first: Y in {2, 0, 1} w.p. 1/3 each
    assert acc == [F(1, 3), F(1, 3)] and none == F(1, 3)
    assert law == [F(1, 3), F(1, 3), F(1, 3)]
    for x1, x2, y in ((0, 1, 1), (1, 0, 1), (2, 0, 2)):
        assert _conditional_law(p, q, x1, x2)[0] == [F(int(t == y)) for t in range(3)]
    # the output law over the hub scheme's pairs is p
    a = 0
    out = [F(0)] * 3
    for i in (1, 2):
        for (x1, x2), w in (((i, a), q[i]), ((a, i), q[a] * q[i] / (1 - q[a]))):
            out = [o + w * v for o, v in zip(out, _conditional_law(p, q, x1, x2)[0])]
    assert out == p


@pytest.mark.parametrize("V,seeds", [(2, range(3)), (3, range(6)), (4, range(4))])
def test_L1_acceptance_is_the_closed_form_and_the_direct_lp_optimum(V, seeds):
    """alpha = 1 - sum_{i != a} (p(i) - q(i)/(1 - q(a)))^+, and SpecHub is the best valid
    verifier of its own draft law: the direct LP under hub drafting has the same optimum."""
    insts = [random_instance(V, 1, s, denominator=7, alpha=0.6) for s in seeds]
    insts += [inst for _, inst in degenerate_instances(1)] if V == 3 else []
    insts += [EXAMPLE] if V == 3 else []
    for inst in insts:
        p, q = root_rows(inst)
        res = analyze_multipath(inst, SPECHUB, 2, "hub")
        if max(q) < 1:
            assert res.tau_pmf[1] == closed_form(p, q)
        assert res.block_efficiency == lp.direct_lp(inst, 2, exact=True, drafting="hub").optimum


def test_L2_below_the_direct_lp_under_hub_drafting():
    for V, seed in ((2, 3), (3, 1), (3, 4)):
        inst = random_instance(V, 2, seed, denominator=8)
        be = analyze_multipath(inst, SPECHUB, 2, "hub").block_efficiency
        opt = lp.direct_lp(inst, 2, exact=True, drafting="hub").optimum
        assert be <= opt, (V, seed)
        assert be >= analyze(inst, token_verification).block_efficiency  # never below 1 draft


# ----------------------------------------------------------------------------- planted bugs


def _hub_keeps_residual(h, q_rows, p_rows):
    """Bug: the residual R keeps the hub, R(a) = p(a)."""
    h["R"] = Bk.positive_part(p_rows - h["qt"])


def _qt_wrong_mass(h, q_rows, p_rows):
    """Bug: q~ = q off the hub, not renormalised by 1 - q(a) (and everything built on it)."""
    zero = Bk.zeros_like(q_rows)
    h["qt"] = Bk.where(h["hub"], zero, q_rows)
    h["qai"] = Bk.expand_dims(h["qa"], -1) * h["qt"]
    h["S_ai"] = Bk.sum(Bk.positive_part(h["qai"] - h["p1"]), axis=-1)
    h["pa1"] = Bk.positive_part(h["pa"] - h["S_ai"])
    h["R"] = Bk.where(h["hub"], zero, Bk.positive_part(p_rows - h["qt"]))


@pytest.mark.parametrize("bug", [_hub_keeps_residual, _qt_wrong_mass])
def test_planted_bug_is_caught(bug, monkeypatch):
    right = sh.hub_quantities

    def wrong(q_rows, p_rows):
        h = right(q_rows, p_rows)
        bug(h, q_rows, p_rows)
        return h

    monkeypatch.setattr(sh, "hub_quantities", wrong)
    inst = random_instance(3, 2, 2, denominator=9)
    rep = check_lossless_multipath(SPECHUB, inst, 2, "hub")
    assert not rep.lossless and rep.tv > 0
    assert rep.offending is not None and len(rep.offending) == 3  # a sequence of L + 1 tokens
    assert str(rep.offending) in str(rep)


# ----------------------------------------------------------------------------- float rows


def _hub_outcomes(inst, exact=True):
    """Every joint draft of positive probability under ``hub`` (K = 2) with its rows."""
    V, L = inst.vocab_size, inst.block_length
    ql, pl = levels(inst.draft, 0, L, exact), levels(inst.target, 0, L + 1, exact)
    tok, q, p, _ = path_tables(ql, pl, L, V)
    tail = path_probabilities(ql[1:], Bk.full((V,), 1, ql[0]))[L - 1]
    qpath = path_probabilities(ql, Bk.full((1,), 1, ql[0]))[L]
    N = V**L
    seq = np.stack(np.meshgrid(np.arange(N), np.arange(N), indexing="ij"), -1).reshape(-1, 2)
    w = draft_weight(seq, "hub", qpath, ql[0][0], tail, L, V)
    seq = seq[np.array([x != 0 for x in w])]
    return tok[seq], q[seq], p[seq]


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_float_rows_give_the_rational_law(dtype, tol):
    for inst in (random_instance(3, 2, 6, denominator=11), EXAMPLE,
                 ci(["1/4", "1/4", "1/2"], ["2/5", "2/5", "1/5"], 2)):
        drafts, q, p = _hub_outcomes(inst)
        exact = spechub(drafts, q, p)
        t = [torch.as_tensor(np.asarray(x, dtype=np.float64)).to(dtype) for x in (q, p)]
        fl = spechub(torch.as_tensor(drafts), *t)
        assert fl.stop.dtype == dtype
        for a, b in ((exact.stop, fl.stop), (exact.correction, fl.correction)):
            assert np.abs(np.asarray(a, dtype=np.float64) - b.double().numpy()).max() <= tol
    inst = random_instance(3, 2, 8, denominator=10)
    ex, f64 = analyze_multipath(inst, SPECHUB, 2, "hub"), \
        analyze_multipath(inst.to_float(), SPECHUB, 2, "hub")
    assert f64.tv_to_target <= 1e-12
    assert np.abs(np.asarray(ex.tau_pmf, dtype=np.float64) - np.asarray(f64.tau_pmf)).max() \
        <= 1e-12


def test_real_vocabulary_rows_in_one_pass():
    """V = 151,936 (a real vocabulary), float32: one O(V) pass per node, every output a
    distribution, and at a hub pair the acceptance is the closed form's conditional."""
    V, Bsz = 151_936, 4
    g = torch.Generator().manual_seed(0)
    q = torch.softmax(4 * torch.randn(Bsz, 1, V, generator=g), -1)
    p = torch.softmax(4 * torch.randn(Bsz, 1, V, generator=g), -1)
    a = hub_tokens(q[:, 0])
    other = torch.multinomial(q[:, 0], 1, generator=g)[:, 0]
    other = torch.where(other == a, (a + 1) % V, other)
    tok = torch.stack([torch.stack([a[0], other[0]]), torch.stack([other[1], a[1]]),
                       torch.stack([other[2], other[2]]), torch.stack([other[3], a[3]])])
    member = torch.ones(Bsz, 1, 2, dtype=torch.long)
    acc, none, corr = spechub_rule(member, tok, q, p)
    assert torch.isfinite(corr).all() and (corr >= 0).all()
    assert torch.allclose(acc.sum(-1) + none, torch.ones(Bsz, 1), atol=1e-6)
    assert torch.allclose(corr.sum(-1), torch.ones(Bsz, 1), atol=1e-4)
    assert (corr[[0, 1, 3], 0, a[[0, 1, 3]]] == 0).all()  # R(a) = 0
    assert acc[2, 0, 1] == 0  # a repeated token is skipped


# ----------------------------------------------------------------------------- K > 2


def test_three_paths_refused_in_one_line():
    inst = random_instance(3, 1, 0, denominator=6)
    for call in (lambda: analyze_multipath(inst, SPECHUB, 3),
                 lambda: analyze_multipath(inst, MULTI_PATH["block-first"], 3, "hub"),
                 lambda: sample_drafts(inst.to_float(), 3, 10, "hub"),
                 lambda: lp.direct_lp(inst, 3, drafting="hub")):
        with pytest.raises(SpectheoryError, match="at most 2") as err:
            call()
        assert "\n" not in str(err.value)
    drafts, q, p = _hub_outcomes(inst)
    three = (np.concatenate([x, x[:, :1]], axis=1) for x in (drafts, q, p))
    with pytest.raises(SpectheoryError, match="at most 2"):
        spechub(*three)


@pytest.fixture
def spechub_registered(monkeypatch):
    """``spechub`` under its name for the command line (a no-op once it is built in)."""
    table = registry.registered()
    if "spechub" not in table:
        monkeypatch.setitem(registry._REGISTRY, "spechub", SPECHUB)


def test_cli_refuses_three_paths(tmp_path, capsys, spechub_registered):
    path = write(tmp_path, {"vocab_size": 3, "block_length": 1,
                            "target": ["1/10", "3/5", "3/10"], "draft": ["3/5", "1/5", "1/5"]})
    code, out, err = run(["exact", path, "--verifier", "spechub", "--paths", "3"], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "at most 2" in err
    assert "Traceback" not in err
    code, out, err = run(["exact", path, "--verifier", "spechub", "--paths", "2", "--exact"],
                         capsys)
    assert code == 0 and "hub drafting" in out and "19/10" in out


# ----------------------------------------------------------------------------- hub drafting


def test_hub_joint_law_sums_to_one_exactly():
    insts = [random_instance(3, 2, 3, denominator=7), EXAMPLE]
    insts += [inst for _, inst in degenerate_instances(2)]
    for inst in insts:
        V, L = inst.vocab_size, inst.block_length
        ql = levels(inst.draft, 0, L, True)
        tail = path_probabilities(ql[1:], Bk.full((V,), 1, ql[0]))[L - 1]
        qpath = path_probabilities(ql, Bk.full((1,), 1, ql[0]))[L]
        N = V**L
        for K in (1, 2):
            seq = np.stack(np.meshgrid(*[np.arange(N)] * K, indexing="ij"), -1).reshape(-1, K)
            w = draft_weight(seq, "hub", qpath, ql[0][0], tail, L, V)
            assert sum(w) == 1
            if K == 2:
                first = seq // V ** (L - 1)
                q = list(ql[0][0])
                a = int(hub_tokens(ql[0][0]))
                pos = [tuple(f) for f, x in zip(first, w) if x != 0]
                if max(q) < 1:  # the pairs hold the hub once, drafts distinct
                    assert all((f0 == a) != (f1 == a) for f0, f1 in pos)
                else:  # no companion: path 2 repeats path 1
                    assert all(s0 == s1 for (s0, s1), x in zip(seq, w) if x != 0)
    # the direct LP's outcomes under hub carry the same law
    _, Q = lp.node_budget._tables(EXAMPLE, True)
    combos, prob = lp.direct.draft_outcomes(Q, 3, 1, 2, "hub", True)
    assert sum(prob) == 1
    assert dict(zip(map(tuple, combos.tolist()), prob)) == {
        (0, 1): F(3, 5) * F(1, 5) / F(2, 5) + F(1, 5), (0, 2): F(3, 5) * F(1, 5) / F(2, 5)
        + F(1, 5)}


def test_other_verifiers_stay_lossless_under_hub_drafting():
    """Path 1 is a plain draft path, so verifying path 1 only is lossless under hub drafting."""
    for inst in (random_instance(3, 2, 9, denominator=8), EXAMPLE):
        for name in ("block-first", "token-first"):
            rep = check_lossless_multipath(MULTI_PATH[name], inst, 2, "hub")
            assert rep.lossless and rep.tv == 0, name


def test_sampled_hub_drafts_follow_the_joint_law():
    inst = random_instance(3, 2, 3, denominator=7)
    n = 40_000
    d = sample_drafts(inst.to_float(), 2, n, "hub", torch.Generator().manual_seed(1))
    q = [float(x) for x in inst.draft.level(0)[0]]
    a = int(np.argmax(q))
    assert bool((d[:, 0, 0] != d[:, 1, 0]).all())
    assert bool(((d[:, 0, 0] == a) != (d[:, 1, 0] == a)).all())
    for i in range(3):
        if i == a:
            continue
        freq_ia = float(((d[:, 0, 0] == i) & (d[:, 1, 0] == a)).float().mean())
        freq_ai = float(((d[:, 0, 0] == a) & (d[:, 1, 0] == i)).float().mean())
        assert freq_ia == pytest.approx(q[i], abs=0.01)
        assert freq_ai == pytest.approx(q[a] * q[i] / (1 - q[a]), abs=0.01)
