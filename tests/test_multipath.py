"""Multi-path verification: losslessness, K = 1 reductions, GBV's two exact routes,
the mismatched-tie GBV caught by the checker, SpecTr's parameter, real-model shapes."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import KINDS, make_instance

from spectheory.runtime.errors import SizeLimitError, SpectheoryError
from spectheory.engine.analysis import analyze
from spectheory.inputs.instances import instance_from_dict
from spectheory.engine.analysis import analyze_gbv_fast, analyze_multipath
from spectheory.engine.lossless import check_lossless_multipath
from spectheory.verifiers.gbv import gbv_skewed_draft
from spectheory.engine.joint import sorted_tuples
from spectheory.inputs.random_instances import random_instance
from spectheory.registry import DRAFTING_MAX_PATHS
from spectheory.cli.report import toy_instance
from spectheory.verifiers import (LOSSY_MULTI_PATH, MULTI_PATH, block_verification,
                                  token_verification)
from spectheory.verifiers.spectr import _beta, _c, kseq_rho

#: (name, drafting scheme it is lossless under)
NATIVE = [(name, "iid" if v.drafting == "any" else v.drafting) for name, v in MULTI_PATH.items()]
BOTH = [(name, d) for name, v in MULTI_PATH.items() if v.drafting == "any"
        for d in ("iid", "norep")]


def upto(drafting, Ks):
    """The Ks that a drafting scheme defines (``hub``: K <= 2; DRAFTING_MAX_PATHS)."""
    return tuple(K for K in Ks if K <= DRAFTING_MAX_PATHS.get(drafting, K))


#: A tie: p/q = 3/2 for tokens 1 and 2.
TIE = {"vocab_size": 3, "block_length": 2, "target": ["1/4", "3/8", "3/8"],
       "draft": ["1/2", "1/4", "1/4"]}


def ci(p, q, L, exact=True):
    return instance_from_dict({"vocab_size": len(p), "block_length": L, "target": p, "draft": q},
                              exact=exact)


def degenerate_instances():
    """Equal models, a one-hot (greedy) target, disjoint supports, a draft with a zero, a
    draft with a single token (fewer tokens than paths), a zero-mass drafted branch."""
    yield "p=q", ci(["1/3", "1/6", "1/2"], ["1/3", "1/6", "1/2"], 2)
    yield "one-hot target", ci(["0", "1", "0"], ["1/2", "1/4", "1/4"], 2)
    yield "disjoint", ci(["0", "1/2", "1/2"], ["1", "0", "0"], 2)
    yield "draft zero", ci(["1/2", "1/4", "1/4"], ["0", "1/3", "2/3"], 2)
    yield "ties", instance_from_dict(TIE, exact=True)
    yield "random zeros", random_instance(3, 2, 11, alpha=0.3, denominator=6)


# ----------------------------------------------------------------------------- losslessness


@pytest.mark.parametrize("name,drafting", NATIVE + BOTH)
def test_lossless_float_random(name, drafting):
    for seed, (V, L, K) in enumerate([(3, 2, 2), (2, 3, 3), (4, 2, 2), (3, 3, 2)]):
        if not upto(drafting, (K,)):
            continue
        inst = random_instance(V, L, seed, alpha=0.7)
        res = analyze_multipath(inst, MULTI_PATH[name], K, drafting)
        assert res.tv_to_target <= 1e-12, (name, seed)
        assert sum(res.tau_pmf) == pytest.approx(1, abs=1e-12)
        assert res.extra == {"paths": K, "drafting": drafting}


@pytest.mark.parametrize("name,drafting", NATIVE)
def test_lossless_exact_degenerate(name, drafting):
    for label, inst in degenerate_instances():
        Ks = (2,) if name == "spectr" else (2, 3)  # Fraction bisection is slow
        for K in upto(drafting, Ks):
            rep = check_lossless_multipath(MULTI_PATH[name], inst, K, drafting)
            assert rep.lossless and rep.tv == 0, (name, label, K, str(rep))


@pytest.mark.parametrize("name,drafting", NATIVE)
def test_lossless_exact_random_context_dependent(name, drafting):
    inst = random_instance(2, 3, 5, denominator=10)
    res = analyze_multipath(inst, MULTI_PATH[name], 2, drafting)
    assert res.exact and res.tv_to_target == 0
    assert sum(res.tau_pmf) == 1


def test_float_degenerate_no_nan():
    for label, inst in degenerate_instances():
        for name, drafting in NATIVE:
            K = upto(drafting, (1, 2, 3))[-1]
            res = analyze_multipath(inst.to_float(), MULTI_PATH[name], K, drafting)
            assert res.tv_to_target <= 1e-12, (label, name)


@settings(max_examples=30)
@given(kind=st.sampled_from(KINDS), V=st.integers(2, 3), L=st.integers(1, 2),
       K=st.integers(1, 3), seed=st.integers(0, 10**6))
def test_lossless_property(kind, V, L, K, seed):
    """Every multi-path verifier, under its scheme, on the core's random and degenerate families
    (sparse rows, equal models, one-hot target or draft, peaked rows): float64 TV <= 1e-12."""
    inst = make_instance(kind, V, L, seed)
    for name, drafting in NATIVE:
        if not upto(drafting, (K,)):
            continue
        res = analyze_multipath(inst, MULTI_PATH[name], K, drafting)
        assert res.tv_to_target <= 1e-12, (name, kind, V, L, K, seed)
        assert abs(sum(res.tau_pmf) - 1) <= 1e-12


# ----------------------------------------------------------------------------- reductions


def _same_law(a, b):
    assert a.tau_pmf == b.tau_pmf
    assert a.expected_accepted == b.expected_accepted
    assert all(x == y for x, y in zip(a.output_law, b.output_law))


def test_k1_reductions_exact():
    for inst in [toy_instance(), random_instance(3, 3, 2, denominator=12)]:
        blk = analyze(inst, block_verification)
        tok = analyze(inst, token_verification)
        for name in ("gbv", "traversal", "traversal-iid", "block-first"):
            for drafting in ("iid", "norep"):
                if name == "gbv" and drafting == "norep":
                    continue
                _same_law(analyze_multipath(inst, MULTI_PATH[name], 1, drafting), blk)
        for name in ("specinfer", "specinfer-norep", "spectr", "token-first"):
            _same_law(analyze_multipath(inst, MULTI_PATH[name], 1), tok)


def test_toy_vector():
    inst = toy_instance()
    assert analyze_multipath(inst, MULTI_PATH["gbv"], 1).expected_accepted == Fraction(11, 9)
    assert analyze_multipath(inst, MULTI_PATH["token-first"], 3).expected_accepted == \
        Fraction(10, 9)
    assert analyze_multipath(inst, MULTI_PATH["block-first"], 3).expected_accepted == \
        Fraction(11, 9)


def test_gbv_root_skew_closed_form():
    """At the root q^G(a) = F(a)^K - F(a-)^K, F the CDF of q accumulated from the worst rank
    (smallest p/q) up: the selected first token is the best of K i.i.d. draws."""
    p = [Fraction(1, 5), Fraction(1, 2), Fraction(3, 10)]
    q = [Fraction(1, 2), Fraction(1, 5), Fraction(3, 10)]
    inst = ci([str(x) for x in p], [str(x) for x in q], 1)
    order = sorted(range(3), key=lambda a: (-(p[a] / q[a]), a))
    for K in (1, 2, 3, 4):
        row = gbv_skewed_draft(inst, K).tables[0][0]
        F = Fraction(0)
        for a in reversed(order):
            assert row[a] == (F + q[a]) ** K - F**K
            F += q[a]


@pytest.mark.parametrize("K", [2, 3])
def test_gbv_fast_route_equals_enumeration_exactly(K):
    for inst in [random_instance(3, 2, 4, denominator=12), instance_from_dict(TIE, exact=True)]:
        enum = analyze_multipath(inst, MULTI_PATH["gbv"], K, route="enumerate")
        ordered = analyze_multipath(inst, MULTI_PATH["gbv"], K, symmetric=False)
        fast = analyze_gbv_fast(inst, K)
        _same_law(enum, fast)
        _same_law(enum, ordered)


def test_sorted_tuples_count():
    t = sorted_tuples(5, 3)
    assert len(t) == 35 and (np.diff(t, axis=1) >= 0).all()


def test_more_paths_help_on_toy():
    """On the two-token example every multi-path method with K = 2 accepts more than K = 1."""
    inst = toy_instance()
    for name, drafting in NATIVE:
        if name.endswith("-first"):
            continue
        one = analyze_multipath(inst, MULTI_PATH[name], 1, drafting).expected_accepted
        two = analyze_multipath(inst, MULTI_PATH[name], 2, drafting).expected_accepted
        assert two > one, name


# ----------------------------------------------------------------------------- lossy GBV


def test_mismatched_ties_flagged_with_offending_sequence():
    inst = instance_from_dict(TIE, exact=True)
    bad = LOSSY_MULTI_PATH["gbv-mismatched-ties"]
    rep = check_lossless_multipath(bad, inst, 2)
    assert not rep.lossless
    assert rep.offending == (0, 1, 0)
    assert rep.output_probability == Fraction(15, 896)
    assert rep.target_probability == Fraction(3, 128)
    assert "LOSSY" in str(rep) and "(0, 1, 0)" in str(rep)
    assert check_lossless_multipath(MULTI_PATH["gbv"], inst, 2).lossless
    # K = 1 has nothing to select, so the mismatch is harmless there
    assert check_lossless_multipath(bad, inst, 1).lossless


def test_mismatched_ties_harmless_without_ties():
    inst = random_instance(3, 2, 4, denominator=12)  # no equal ratios at any node (checked)
    for lvl in range(2):
        p, q = inst.target.level(lvl), inst.draft.level(lvl)
        for row in range(p.shape[0]):
            r = [p[row, a] / q[row, a] for a in range(3) if q[row, a] != 0]
            assert len(set(r)) == len(r)
    _same_law(analyze_multipath(inst, LOSSY_MULTI_PATH["gbv-mismatched-ties"], 2),
              analyze_multipath(inst, MULTI_PATH["gbv"], 2))


# ----------------------------------------------------------------------------- SpecTr


def _scalar_rho(p, q, m, steps=200):
    """Independent bisection for the smallest rho in [1, m] with rho >= c_m(beta(rho))."""
    def ok(rho):
        beta = sum(min(qq, pp / rho) for pp, qq in zip(p, q))
        return rho >= sum((1 - beta) ** j for j in range(m)) - 1e-15

    if ok(1.0):
        return 1.0
    lo, hi = 1.0, float(m)
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


@pytest.mark.parametrize("K", [1, 2, 3, 4])
def test_spectr_l1_acceptance_closed_form(K):
    """L = 1: P(tau = 1) = 1 - (1 - beta(rho*))^K, rho* the smallest valid rho."""
    inst = random_instance(4, 1, 9 + K, alpha=0.5)
    p = inst.target.tables[0][0]
    q = inst.draft.tables[0][0]
    rho = _scalar_rho(p, q, K)
    beta = sum(min(qq, pp / rho) for pp, qq in zip(p, q))
    res = analyze_multipath(inst, MULTI_PATH["spectr"], K)
    assert res.tau_pmf[1] == pytest.approx(1 - (1 - beta) ** K, abs=1e-9)
    assert res.tv_to_target <= 1e-12
    t = torch.as_tensor
    r = kseq_rho(t(q).reshape(1, 1, -1), t(p).reshape(1, 1, -1), t([[K]]), K)
    assert float(r) == pytest.approx(rho, abs=1e-9)
    b = _beta(t(q).reshape(1, 1, -1), t(p).reshape(1, 1, -1), r)
    assert float(r) >= float(_c(b, t([[K]]), K)) - 1e-12


# ----------------------------------------------------------------------------- real-model use


def _model_batch(Bsz=6, K=3, L=4, V=50, seed=0, dtype=torch.float32):
    """Drafts sampled from 'model' rows that depend on the prefix only (as a real model's do):
    path 2 copies path 1's first two tokens, so paths share nodes."""
    g = torch.Generator().manual_seed(seed)
    rows = {}

    def row(kind, b, prefix):
        key = (kind, b, prefix)
        if key not in rows:
            rows[key] = torch.softmax(3 * torch.randn(V, generator=g, dtype=torch.float64), -1)
        return rows[key]

    drafts = torch.zeros(Bsz, K, L, dtype=torch.long)
    for b in range(Bsz):
        for k in range(K):
            for i in range(L):
                if k == 1 and i < 2:
                    drafts[b, k, i] = drafts[b, 0, i]
                else:
                    pre = tuple(drafts[b, k, :i].tolist())
                    drafts[b, k, i] = torch.multinomial(row("q", b, pre), 1, generator=g)[0]
    q = torch.stack([torch.stack([torch.stack([row("q", b, tuple(drafts[b, k, :i].tolist()))
                                               for i in range(L)]) for k in range(K)])
                     for b in range(Bsz)]).to(dtype)
    p = torch.stack([torch.stack([torch.stack([row("p", b, tuple(drafts[b, k, :i].tolist()))
                                               for i in range(L + 1)]) for k in range(K)])
                     for b in range(Bsz)]).to(dtype)
    return drafts, q, p


@pytest.mark.parametrize("name", list(MULTI_PATH) + list(LOSSY_MULTI_PATH))
def test_float32_batch_rows_are_distributions(name):
    """The same functions on float32 'model' rows (as the real-model loop calls them): the law
    is a distribution over (path, tau) and every correction row a distribution over tokens.
    (Block verification's stop can be -1e-7 in float32 from rounding, hence the tolerance.)"""
    spec = {**MULTI_PATH, **LOSSY_MULTI_PATH}[name]
    drafts, q, p = _model_batch(K=upto(spec.drafting, (1, 2, 3))[-1])
    try:
        law = spec(drafts, q, p)
    except SizeLimitError as exc:  # rules that enumerate the outcomes at a node refuse first
        assert "candidate outcomes at each node" in str(exc)
        drafts, q, p = _model_batch(K=2)
        law = spec(drafts, q, p)
    Bsz, K, L = drafts.shape
    assert law.stop.shape == (Bsz, K, L + 1) and law.correction.shape == (Bsz, K, L + 1, 50)
    assert law.stop.dtype == torch.float32
    assert torch.isfinite(law.stop).all() and torch.isfinite(law.correction).all()
    assert (law.stop >= -1e-6).all() and (law.correction >= 0).all()
    assert torch.allclose(law.stop.sum((1, 2)), torch.ones(Bsz), atol=1e-5)
    assert torch.allclose(law.correction.sum(-1), torch.ones(Bsz, K, L + 1), atol=1e-5)
    # float64 on the same rows: the float32 law is the float64 law up to rounding
    law64 = {**MULTI_PATH, **LOSSY_MULTI_PATH}[name](drafts, q.double(), p.double())
    assert torch.allclose(law.stop.double(), law64.stop, atol=1e-4)


def test_plan_acceptance_is_the_acceptance_of_its_rule():
    """The acceptance a node plan reports of itself (hu's total flow, Global Resolution's
    repaired rows, khisti's selected law) equals P(Y in S) recomputed from its rule and the
    outcome law (`node_acceptance`), exactly: on rows with a tie and a zero, and on float32 rows
    (read as the Fractions they are). For khisti the selected law's acceptance is the optimum
    alpha*, which no lossless rule exceeds and its residual draws cannot lower."""
    from spectheory.verifiers.coupling import _normalised, node_acceptance, set_law
    from spectheory.verifiers.global_resolution import global_resolution_plan
    from spectheory.verifiers.hu import hu_plan
    from spectheory.verifiers.khisti import khisti_plan

    F = Fraction
    g = torch.Generator().manual_seed(7)
    rows = [([F(1, 2), F(1, 4), F(1, 4), F(0)], [F(1, 4), F(3, 8), F(3, 8), F(0)]),
            ([F(0), F(1, 3), F(1, 6), F(1, 2)], [F(1, 2), F(1, 4), F(0), F(1, 4)])]
    for _ in range(2):
        q, p = (torch.softmax(2 * torch.randn(5, generator=g), -1).tolist() for _ in range(2))
        rows.append((_normalised(q), _normalised(p)))
    for q, p in rows:
        for m in (1, 2, 3):
            for plan, scheme in ((hu_plan, "iid"), (hu_plan, "norep"),
                                 (global_resolution_plan, "iid")):
                got = plan(q, p, m, scheme).stats["acceptance"]
                assert got == node_acceptance(plan, q, p, m, scheme), (plan.__name__, m, q, p)
            sel = khisti_plan(q, p, m, "iid").stats["selected_acceptance"]
            assert sel == node_acceptance(khisti_plan, q, p, m, "iid") and sel <= 1
    # Global Resolution on a target row read as given, summing to 2: sum_D P(D) sum pi(. | D)
    q, p = rows[0]
    plan = global_resolution_plan(q, [2 * x for x in p], 2, "iid")
    want = sum((P * sum(plan.accept[D].values(), F(0)) for D, P in set_law(q, 2).items()), F(0))
    assert plan.stats["acceptance"] == want


# ----------------------------------------------------------------------------- guards


def test_size_guard_and_bad_arguments():
    inst = random_instance(4, 4, 0)
    # GBV is order-invariant: the guard counts the sorted tuples it would visit, others V^(L K)
    with pytest.raises(SizeLimitError, match=r"C\(4\^4 \+ 4, 5\) sorted"):
        analyze_multipath(inst, MULTI_PATH["gbv"], 5, route="enumerate")
    with pytest.raises(SizeLimitError, match=r"V\^\(L K\) = 4\^20"):
        analyze_multipath(inst, MULTI_PATH["specinfer"], 5, route="enumerate")
    with pytest.raises(SizeLimitError, match="exact limit"):
        analyze_multipath(random_instance(3, 3, 0, denominator=6), MULTI_PATH["specinfer"], 4,
                          route="enumerate")
    with pytest.raises(SizeLimitError, match="node by node"):  # the tree route has its guard
        analyze_multipath(random_instance(4, 3, 0, denominator=6), MULTI_PATH["hu"], 8)
    with pytest.raises(SpectheoryError, match="drafting"):
        analyze_multipath(toy_instance(), MULTI_PATH["gbv"], 2, "bogus")
    with pytest.raises(SpectheoryError, match="paths"):
        analyze_multipath(toy_instance(), MULTI_PATH["gbv"], 0)


# ----------------------------------------------------------------------------- LP bound


def test_block_efficiency_below_direct_lp_optimum():
    from spectheory.lp import direct as lp_direct
    inst = random_instance(2, 2, 3, alpha=0.8)
    for K in (1, 2):
        for drafting in ("iid", "norep"):
            opt = float(lp_direct.direct_lp(inst, paths=K, drafting=drafting).optimum)
            for name, v in MULTI_PATH.items():
                if v.drafting not in ("any", drafting) and not (
                        name.startswith("traversal") or name.startswith("specinfer")):
                    continue
                res = analyze_multipath(inst, v, K, drafting)
                if res.tv_to_target > 1e-12:
                    continue  # only valid verifiers are bounded by the LP
                assert res.block_efficiency <= opt + 1e-7, (name, K, drafting)
        if K == 1:
            blk = analyze(inst, block_verification).block_efficiency
            assert blk == pytest.approx(opt, abs=1e-7)


def test_gbv_attains_the_direct_lp_optimum_on_the_toy():
    """On the paper's two-token example GBV with K = 2 i.i.d. paths reaches the best E[tau+1]
    of any valid 2-path verifier exactly (212/81); without replacement the best verifier here
    (traversal, 25/9) stays below the norep optimum (26/9)."""
    from spectheory.lp import direct as lp_direct
    inst = toy_instance()
    gbv2 = analyze_multipath(inst, MULTI_PATH["gbv"], 2).block_efficiency
    assert gbv2 == Fraction(212, 81) == lp_direct.direct_lp(inst, 2, exact=True).optimum
    trav = analyze_multipath(inst, MULTI_PATH["traversal"], 2, "norep").block_efficiency
    opt = lp_direct.direct_lp(inst, 2, exact=True, drafting="norep").optimum
    assert trav == Fraction(25, 9) < opt == Fraction(26, 9)


@pytest.mark.parametrize("name,drafting", [("specinfer", "iid"), ("specinfer-norep", "norep"),
                                           ("specinfer-norep", "iid"), ("hu", "iid"),
                                           ("hu-norep", "norep"), ("khisti", "iid"),
                                           ("global-resolution", "iid")])
def test_tree_route_is_the_default_and_equals_the_enumeration(name, drafting):
    """Node-rule verifiers have the draft-tree route (the K paths as the tree (K, 1, ..., 1)),
    taken by default where it visits fewer cases than the enumeration; its law equals the joint
    enumeration's exactly, on prefix-dependent rows with a draft zero and at L = 1, 2, 3."""
    insts = [random_instance(3, 2, 7, denominator=9), random_instance(2, 3, 1, denominator=8),
             ci(["1/2", "1/4", "1/4"], ["0", "1/3", "2/3"], 1)]
    assert analyze_multipath(insts[1].to_float(), MULTI_PATH[name], 6, drafting).route == "tree"
    for inst in insts:
        for K in (2, 3):
            tree = analyze_multipath(inst, MULTI_PATH[name], K, drafting, route="tree")
            enum = analyze_multipath(inst, MULTI_PATH[name], K, drafting, route="enumerate")
            assert tree.route == "tree" and enum.route == "enumerate"
            assert tree.tau_pmf == enum.tau_pmf and tree.tv_to_target == enum.tv_to_target
            assert all(a == b for a, b in zip(tree.output_law, enum.output_law))


def _bfs_max_flow(law, caps):
    """The maximum flow of `spectheory.verifiers.hu` written out plainly: greedy fill in outcome
    order, then shortest augmenting paths, breadth first from every outcome with supply left
    (in order), an outcome's distinct tokens in order, a token's holders in order."""
    from collections import deque
    supply, cap = dict(law), dict(enumerate(caps))
    flow = {S: {} for S in law}
    holders = {y: [S for S in law if y in S] for y in cap}
    for S in law:
        for y in dict.fromkeys(S):
            push = min(supply[S], cap[y])
            if push > 0:
                flow[S][y] = flow[S].get(y, 0) + push
                supply[S] -= push
                cap[y] -= push
    while True:
        parent = {("S", S): None for S in law if supply[S] > 0}
        queue, end = deque(parent), None
        while queue and end is None:
            kind, node = queue.popleft()
            for nxt in ([("y", y) for y in dict.fromkeys(node)] if kind == "S" else
                        [("S", S) for S in holders[node] if flow[S].get(node, 0) > 0]):
                if nxt not in parent:
                    parent[nxt] = (kind, node)
                    if nxt[0] == "y" and cap[nxt[1]] > 0:
                        end = nxt
                        break
                    queue.append(nxt)
        if end is None:
            return flow
        path = [end]
        while parent[path[-1]] is not None:
            path.append(parent[path[-1]])
        path.reverse()
        push = min([supply[path[0][1]], cap[end[1]]]
                   + [flow[path[i][1]][path[i - 1][1]] for i in range(2, len(path), 2)])
        for (k, a), (_, b) in zip(path, path[1:]):
            if k == "S":
                flow[a][b] = flow[a].get(b, 0) + push
            else:
                flow[b][a] -= push
        supply[path[0][1]] -= push
        cap[end[1]] -= push


@pytest.mark.parametrize("scheme", ["iid", "norep"])
def test_hu_flow_is_the_breadth_first_augmenting_flow(scheme):
    """The flow Hu's rule reads (not only its total: which outcome sends mass to which token
    sets the rule's law) is the plain breadth-first augmenting-path flow, in integers and in
    Fractions: on prefix-free rows with ties, zeros and float32 values, K = 1..4."""
    from spectheory.verifiers.coupling import integer_row, outcomes
    from spectheory.verifiers.hu import _max_transport

    rng = np.random.default_rng(7)
    rows = [[Fraction(1, 4), Fraction(3, 8), Fraction(3, 8)],  # a tie
            [Fraction(0), Fraction(1, 2), Fraction(1, 2)],  # a zero
            [Fraction(1, 2), Fraction(1, 4), Fraction(1, 4)]]
    for V in (4, 6, 9):
        x = rng.dirichlet([0.4] * V).astype(np.float32)
        rows.append([Fraction(float(v)) for v in x / x.sum(dtype=np.float32)])
        w = rng.integers(0, 3, V)
        w[0] += 1
        rows.append([Fraction(int(v), int(w.sum())) for v in w])  # ties and zeros
    pairs = [(q, p) for q in rows for p in rows if len(q) == len(p)]
    moved = 0
    for q, p in pairs:
        for K in range(1, 5 if len(q) < 9 else 3):
            if scheme == "norep" and K > sum(v > 0 for v in q):
                continue
            law = outcomes(q, K, scheme)
            n, _ = integer_row(list(law.values()) + list(p))
            for supply, caps in ((law, list(p)), (dict(zip(law, n)), n[len(law):])):
                got, total = _max_transport(supply, caps)
                want = _bfs_max_flow(supply, caps)
                assert {S: {y: f for y, f in fs.items()} for S, fs in got.items()} == want
                assert [list(fs) for fs in got.values()] == [list(fs) for fs in want.values()]
                assert total == sum(sum(fs.values()) for fs in want.values())
                moved += any(f != min(supply[S], caps[y]) for S, fs in got.items()
                             for y, f in fs.items())
    assert moved  # instances where augmenting paths, not the greedy fill alone, set the flow


def test_spectr_exact_bisection_in_integers_is_the_rational_bisection(monkeypatch):
    """K-SEQ's rho in exact mode halves its interval in integers (`_bisect_exact`); the plain
    bisection in Fractions (`_bisect`, the float and torch route) on the same nodes gives the
    same rho, value and type, at every node of the exact SpecTr laws of instances with a tie,
    zeros, a one-hot target and prefix-dependent rows, K = 2, 3 (and m = 1..K at the nodes)."""
    import importlib

    spectr_mod = importlib.import_module("spectheory.verifiers.spectr")

    calls = []
    fast = spectr_mod._bisect_exact

    def both(lo, hi, P, R, m, K, steps):
        got = fast(lo, hi, P, R, m, K, steps)
        want = spectr_mod._bisect(lo, hi, P, R, m, K, steps)
        assert got.shape == want.shape
        assert all(type(g) is Fraction and g == w for g, w in zip(got.flat, want.flat))
        calls.append((int(np.max(m)), int(np.sum(got != hi))))
        return got

    monkeypatch.setattr(spectr_mod, "_bisect_exact", both)
    F = Fraction
    rows = [[F(1, 2), F(1, 4), F(1, 4)], [F(1, 4), F(3, 8), F(3, 8)], [F(0), F(1), F(0)],
            [F(0), F(1, 3), F(2, 3)], [F(1, 3), F(1, 6), F(1, 2)], [F(5, 12), F(1, 12), F(1, 2)]]
    pairs = [(a, b) for a in rows for b in rows]  # [B] nodes: every (q, p) pair, p = q among them
    for K in (2, 3):
        q = np.array([[a] * K for a, _ in pairs], dtype=object)  # [B, K, V]
        p = np.array([[b] * K for _, b in pairs], dtype=object)
        m = np.array([[1 + (i + k) % K for k in range(K)] for i in range(len(pairs))])  # [B, K]
        rho = spectr_mod.kseq_rho(q, p, m, K)
        fl = spectr_mod.kseq_rho(q.astype(float), p.astype(float), m, K)
        assert np.abs(rho.astype(float) - fl).max() < 1e-9
    assert {mx for mx, _ in calls} == {2, 3} and all(moved > 0 for _, moved in calls)
    # the SpecTr law on a prefix-dependent instance with zeros, through the engine
    assert analyze(random_instance(3, 2, 11, alpha=0.3, denominator=6), "spectr",
                   paths=2).tv_to_target == 0


def test_lazy_plan_entries_read_as_the_dict_of_every_entry():
    """A plan's accept and reject may be `LazyOutcomes`: each entry computed on its first
    lookup (once), the keys, order, length, membership, ``get`` and equality those of the dict
    of every entry, whichever entries were read first; a key outside the law is missing."""
    from spectheory.verifiers.coupling import LazyOutcomes, lazy_pair
    from spectheory.verifiers.global_resolution import global_resolution_plan
    from spectheory.verifiers.khisti import khisti_plan

    calls = []
    keys = {(0, 1): None, (1, 1): None, (2,): None}
    lazy = LazyOutcomes(keys, lambda S: calls.append(S) or sum(S))
    assert lazy[(1, 1)] == 2 and lazy[(1, 1)] == 2 and calls == [(1, 1)]
    assert lazy.get((5,)) is None and (5,) not in lazy and (2,) in lazy and len(lazy) == 3
    with pytest.raises(KeyError):
        lazy[(5,)]
    assert list(lazy) == list(keys) and dict(lazy) == {(0, 1): 1, (1, 1): 2, (2,): 2}
    assert calls == [(1, 1), (0, 1), (2,)]
    first, second = lazy_pair(keys, lambda S: (calls.append(S) or S[0], -S[0]))
    calls.clear()
    assert second[(2,)] == -2 and first[(2,)] == 2 and calls == [(2,)]
    q = [Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)]
    p = [Fraction(1, 5), Fraction(1, 5), Fraction(3, 5)]
    for make in (khisti_plan, global_resolution_plan):
        read, whole = make(q, p, 2, "iid"), make(q, p, 2, "iid")
        some = next(iter(read.accept))
        assert read.reject[some] == whole.reject[some] and read.accept[some] == \
            whole.accept[some]
        assert dict(read.accept) == dict(whole.accept) and dict(read.reject) == \
            dict(whole.reject)
        assert list(read.accept) == list(whole.accept) and read.accept.get((9, 9)) is None
        for S in whole.accept:  # accepting some token or rejecting: probability one
            assert sum(whole.accept[S].values(), Fraction(0)) + whole.reject[S] == 1
