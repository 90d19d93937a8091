"""Hu et al.'s optimal transport rule (``hu``, ``hu-norep``): exact maximum flow at each node,
the L = 1 optimum of the direct K-path LP attained exactly, lossless on prefix-dependent rows,
below the LP at L >= 2, and a planted bug caught."""

from __future__ import annotations

from fractions import Fraction

import pytest

from spectheory.runtime.errors import SizeLimitError
from spectheory.inputs.instances import instance_from_dict
from spectheory.engine.analysis import analyze_multipath
from spectheory.engine.lossless import check_lossless_multipath
from spectheory.inputs.random_instances import random_instance
from spectheory.registry import VerifierSpec
from spectheory.verifiers import MULTI_PATH
from spectheory.verifiers.coupling import NodePlan, node_acceptance, outcomes, plan_rule
from spectheory.verifiers.hu import hu_plan, max_transport
from spectheory.verifiers.specinfer import node_recursive_law

from spectheory import lp


def one_token(p, q):
    return instance_from_dict({"vocab_size": len(p), "block_length": 1, "target": p,
                               "draft": q}, exact=True)


TOY1 = one_token(["1/3", "2/3"], ["2/3", "1/3"])


def test_outcome_laws_sum_to_one_and_match_brute_force():
    q = [Fraction(1, 2), Fraction(1, 3), Fraction(0), Fraction(1, 6)]
    for m in (1, 2, 3):
        law = outcomes(q, m, "iid")
        assert sum(law.values()) == 1
        assert all(2 not in S for S in law)
        law = outcomes(q, m, "norep")
        assert sum(law.values()) == 1
        assert all(len(set(S)) == len(S) == min(m, 3) for S in law)
    # without replacement, two draws: P({0, 1}) = q0 q1/(1-q0) + q1 q0/(1-q1)
    assert outcomes(q, 2, "norep")[(0, 1)] == q[0] * q[1] / (1 - q[0]) + q[1] * q[0] / (1 - q[1])


def test_max_flow_equals_the_min_cut_formula():
    """The flow's value is Hu et al.'s alpha* = min_H p(H) + 1 - q(H)^m, exactly."""
    for seed in range(12):
        inst = random_instance(4, 1, seed, denominator=7, alpha=0.6)
        p = list(inst.target.level(0)[0])
        q = list(inst.draft.level(0)[0])
        for m in (1, 2, 3, 4):
            _, total = max_transport(outcomes(q, m, "iid"), p)
            alpha, _ = lp.multidraft_acceptance_L1(p, q, m)
            assert total == alpha, (seed, m)
            assert node_acceptance(hu_plan, q, p, m, "iid") == alpha


@pytest.mark.parametrize("K", [2, 3, 4])
def test_L1_attains_the_direct_lp_optimum_exactly(K):
    insts = [TOY1, random_instance(3, 1, 4, denominator=9), random_instance(4, 1, 9,
                                                                             denominator=5)]
    for inst in insts:
        got = analyze_multipath(inst, MULTI_PATH["hu"], K, "iid").block_efficiency
        assert got == lp.direct_lp(inst, K, exact=True).optimum
    assert analyze_multipath(TOY1, MULTI_PATH["hu"], 3).block_efficiency == 2
    assert analyze_multipath(TOY1, MULTI_PATH["gbv"], 3).block_efficiency == Fraction(53, 27)


@pytest.mark.parametrize("K", [2, 3])
def test_norep_L1_attains_the_direct_lp_optimum_exactly(K):
    for inst in (TOY1, random_instance(3, 1, 2, denominator=8), random_instance(4, 1, 5,
                                                                                denominator=6)):
        got = analyze_multipath(inst, MULTI_PATH["hu-norep"], K, "norep").block_efficiency
        assert got == lp.direct_lp(inst, K, exact=True, drafting="norep").optimum


def test_prefix_dependent_rows_lossless_and_below_the_lp():
    inst = random_instance(2, 2, 7, denominator=9)  # rows differ by prefix
    assert list(inst.target.level(1)[0]) != list(inst.target.level(1)[1])
    for name, drafting in (("hu", "iid"), ("hu-norep", "norep")):
        for K in (2, 3):
            rep = check_lossless_multipath(MULTI_PATH[name], inst, K, drafting)
            assert rep.lossless and rep.tv == 0
            be = analyze_multipath(inst, MULTI_PATH[name], K, drafting).block_efficiency
            assert be <= lp.direct_lp(inst, K, exact=True, drafting=drafting).optimum


def _wrong_residual_plan(q, p, m, scheme):
    """Planted bug: the rejection law is p itself instead of the unmatched part of p."""
    plan = hu_plan(q, p, m, scheme)
    return NodePlan(plan.accept, plan.reject, list(p), plan.stats)


@pytest.mark.parametrize("make", [_wrong_residual_plan])
def test_planted_bug_is_caught(make):
    rule = plan_rule(make, "iid", "bug")
    spec = VerifierSpec("hu-bug", lambda d, q, p: node_recursive_law(d, q, p, rule),
                        paths=None, drafting="iid", lossless=False)
    inst = random_instance(3, 2, 3, denominator=8)
    rep = check_lossless_multipath(spec, inst, 2, "iid")
    assert not rep.lossless and rep.tv > 0 and rep.offending is not None


def test_size_guard_names_the_count():
    inst = random_instance(12, 1, 0)
    with pytest.raises(SizeLimitError, match="75582 multisets"):
        analyze_multipath(inst, MULTI_PATH["hu"], 8, "iid")


@pytest.mark.parametrize("m", [2, 3])
def test_plans_of_float_rows_equal_the_rational_plans(m):
    """The plans compute in integers over one denominator when their rows are rationals (every
    engine call) and in the rows' own arithmetic otherwise (a direct call with floats): the two
    give the same plan to 1e-12 on a row with a tie and a zero (outcome laws, the set law, hu's
    and khisti's acceptance, rejection and correction)."""
    from spectheory.verifiers.coupling import set_law
    from spectheory.verifiers.khisti import khisti_plan

    q = [Fraction(1, 3), Fraction(1, 3), Fraction(1, 4), Fraction(1, 12), Fraction(0)]
    p = [Fraction(1, 2), Fraction(1, 8), Fraction(1, 8), Fraction(0), Fraction(1, 4)]
    qf, pf = [float(v) for v in q], [float(v) for v in p]

    def close(a, b):
        assert abs(float(a) - float(b)) <= 1e-12, (a, b)

    for scheme in ("iid", "norep"):
        exact, approx = outcomes(q, m, scheme), outcomes(qf, m, scheme)
        assert exact.keys() == approx.keys()
        for S in exact:
            close(exact[S], approx[S])
    exact, approx = set_law(q, m), set_law(qf, m)
    assert exact.keys() == approx.keys()
    for D in exact:
        close(exact[D], approx[D])
    for make in (hu_plan, khisti_plan):
        a, b = make(q, p, m, "iid"), make(qf, pf, m, "iid")
        assert a.accept.keys() == b.accept.keys()
        for S in a.accept:
            close(a.reject[S], b.reject[S])
            for y in a.accept[S]:
                close(a.accept[S][y], b.accept[S].get(y, 0))
            for x, y in zip(a.correction_for(S), b.correction_for(S)):
                close(x, y)


def test_augmenting_push_is_capped_by_the_end_token():
    """An augmenting path pushes min(supply, capacity left at its end token): q = (3/10, 0,
    1/5, 1/2) (a token never drafted), p = (4/15, 4/15, 4/15, 1/5), m = 2. The flow equals the
    min-cut formula and the direct LP, and the rule stays lossless (an uncapped push overfills
    the end token: more than p there)."""
    p = [Fraction(4, 15), Fraction(4, 15), Fraction(4, 15), Fraction(1, 5)]
    q = [Fraction(3, 10), Fraction(0), Fraction(1, 5), Fraction(1, 2)]
    flow, total = max_transport(outcomes(q, 2, "iid"), p)
    assert total == lp.multidraft_acceptance_L1(p, q, 2)[0]
    into = [sum((sent.get(y, 0) for sent in flow.values()), Fraction(0)) for y in range(4)]
    assert all(into[y] <= p[y] for y in range(4)) and sum(into) == total == Fraction(11, 15)
    assert all(set(sent) <= set(S) for S, sent in flow.items())  # along the edges y in S
    inst = one_token([str(v) for v in p], [str(v) for v in q])
    res = analyze_multipath(inst, MULTI_PATH["hu"], 2, "iid")
    assert res.tv_to_target == 0
    assert res.block_efficiency == lp.direct_lp(inst, 2, exact=True).optimum == 1 + total
