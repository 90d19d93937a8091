"""The multi-draft optimal-transport rules beside ``hu``: Global Resolution (its exact repair,
its optimum, its truncated setting) and Khisti et al.'s canonical architecture; the L = 1
toolbox (subset formula with and without replacement, Khisti's K = 2 closed form and its
"acceptance = 1" condition) against the direct LP; planted bugs caught."""

from __future__ import annotations

from fractions import Fraction

import pytest

from spectheory.bounds import (full_acceptance_possible, optimal_acceptance,
                               two_identical_drafts_acceptance)
from spectheory.inputs.instances import instance_from_dict
from spectheory.engine.analysis import analyze_multipath
from spectheory.engine.lossless import check_lossless_multipath
from spectheory.inputs.random_instances import random_instance
from spectheory.registry import VerifierSpec
from spectheory.verifiers import MULTI_PATH
from spectheory.verifiers.coupling import (NodePlan, node_acceptance, node_output_law,
                                           plan_rule)
from spectheory.verifiers.global_resolution import (global_resolution_plan, outer_targets,
                                                    truncated_global_resolution)
from spectheory.verifiers.khisti import khisti_plan
from spectheory.verifiers.specinfer import node_recursive_law

from spectheory import lp


def rows(V, seed, denominator=9, alpha=0.6):
    inst = random_instance(V, 1, seed, denominator=denominator, alpha=alpha)
    return list(inst.target.level(0)[0]), list(inst.draft.level(0)[0])


def one_token(p, q):
    return instance_from_dict({"vocab_size": len(p), "block_length": 1, "target": p,
                               "draft": q}, exact=True)


#: ties in p/q (tokens 1, 2), a token the draft never proposes, a token the target never emits
EDGE = [(["1/4", "3/8", "3/8", "0"], ["1/2", "1/4", "1/4", "0"]),
        (["0", "1/2", "1/4", "1/4"], ["1/4", "1/4", "1/2", "0"]),
        (["1/3", "1/3", "1/3"], ["1/3", "1/3", "1/3"]),
        (["0", "0", "1"], ["1/2", "1/2", "0"])]


# ----------------------------------------------------------------------------- Global Resolution


def test_global_resolution_is_exactly_lossless_and_optimal_within_1e9():
    cases = [rows(V, s) for V in (3, 4, 5) for s in range(8)]
    cases += [([Fraction(x) for x in p], [Fraction(x) for x in q]) for p, q in EDGE]
    for p, q in cases:
        for m in (1, 2, 3, 4):
            assert node_output_law(global_resolution_plan, q, p, m, "iid") == p
            alpha, _ = optimal_acceptance(p, q, m)
            acc = node_acceptance(global_resolution_plan, q, p, m, "iid")
            assert 0 <= alpha - acc <= 1e-9, (p, q, m, float(alpha - acc))


def test_global_resolution_m1_is_token_verification():
    for s in range(6):
        p, q = rows(4, s)
        acc = node_acceptance(global_resolution_plan, q, p, 1, "iid")
        assert abs(acc - sum(min(a, b) for a, b in zip(p, q))) <= 1e-12


def test_outer_targets_sum_to_the_outer_demand():
    """Theorem 6.2's telescoping targets: each in [0, p(v)], summing to 1 - q(H*)^m."""
    for s in range(10):
        p, q = rows(5, s)
        for m in (2, 3):
            _, H = optimal_acceptance(p, q, m)
            out = outer_targets(p, q, m, H)
            assert sum(out.values()) == 1 - sum(q[x] for x in H) ** m
            assert all(0 <= v <= p[x] for x, v in out.items())


@pytest.mark.parametrize("K", [2, 3, 4])
def test_global_resolution_attains_the_direct_lp_at_L1(K):
    toy = one_token(["1/3", "2/3"], ["2/3", "1/3"])
    for inst in (toy, random_instance(3, 1, 1, denominator=7), random_instance(4, 1, 6,
                                                                               denominator=5)):
        res = analyze_multipath(inst, MULTI_PATH["global-resolution"], K)
        opt = lp.direct_lp(inst, K, exact=True).optimum
        assert res.tv_to_target == 0
        assert 0 <= opt - res.block_efficiency <= 1e-9


def test_global_resolution_prefix_rows_L2_lossless_and_below_the_lp():
    inst = random_instance(3, 2, 7, denominator=9)
    for K in (2, 3):
        rep = check_lossless_multipath(MULTI_PATH["global-resolution"], inst, K)
        assert rep.lossless and rep.tv == 0
        be = analyze_multipath(inst, MULTI_PATH["global-resolution"], K).block_efficiency
        assert be <= lp.direct_lp(inst, K, exact=True).optimum


def test_truncated_setting_reports_its_distance():
    """The paper's truncated setting (sets outside the truncation left out of the programs, no
    repair) is not lossless; the engine reports the distance, within the paper's Lemma 6.6
    bound of 15 tau in L1, while the default rule on the same instance is lossless."""
    inst = random_instance(8, 1, 3, alpha=0.3)
    for tau, K in ((0.05, 2), (0.2, 3)):
        l1 = 2 * analyze_multipath(inst, truncated_global_resolution(tau), K).tv_to_target
        assert 1e-3 < l1 <= 15 * tau
    exact = analyze_multipath(inst, MULTI_PATH["global-resolution"], 3)
    assert exact.tv_to_target <= 1e-12
    with pytest.raises(Exception, match="truncation"):
        truncated_global_resolution(2)


def _unrepaired(q, p, m, scheme):
    """Planted bug: the softmax weights change (acceptances halved) after the rejection law was
    formed from the rows, so the residual no longer covers what the rows leave of p."""
    plan = global_resolution_plan(q, p, m, scheme)
    accept = {D: {y: a / 2 for y, a in acc.items()} for D, acc in plan.accept.items()}
    reject = {D: max(Fraction(0), 1 - sum(acc.values())) for D, acc in accept.items()}
    return NodePlan(accept, reject, plan.correction, plan.stats, by_set=True)


def _spec(plan, name):
    rule = plan_rule(plan, "iid", name)
    return VerifierSpec(name, lambda d, q, p: node_recursive_law(d, q, p, rule), paths=None,
                        drafting="iid", lossless=False)


def test_planted_bugs_are_caught():
    inst = random_instance(3, 2, 4, denominator=8)
    for plan in (_unrepaired, _khisti_against_q):
        rep = check_lossless_multipath(_spec(plan, plan.__name__), inst, 2)
        assert not rep.lossless and rep.tv > 0 and rep.offending is not None, plan.__name__


# ----------------------------------------------------------------------------- Khisti


def _khisti_against_q(q, p, m, scheme):
    """Planted bug: the selected token (here the smallest drafted id) is verified against q
    instead of its induced law q_I. (Selecting uniformly among the distinct tokens of two
    i.i.d. drafts would induce q itself, and the bug would be harmless.)"""
    good = khisti_plan(q, p, m, scheme)
    accept, reject = {}, {}
    for S in good.accept:
        y = min(S)
        accept[S] = {y: min(Fraction(1), p[y] / q[y])}
        reject[S] = 1 - accept[S][y]
    res = [max(p[y] - q[y], Fraction(0)) for y in range(len(p))]
    tot = sum(res)
    return NodePlan(accept, reject, [v / tot for v in res] if tot else list(p))


def test_khisti_canonical_architecture_attains_the_optimum_exactly():
    """Theorem 1: selection then single-draft verification loses nothing, with the optimal
    selection; the selected token's survival probability is alpha* too."""
    cases = [rows(V, s) for V in (3, 4) for s in range(8)]
    cases += [([Fraction(x) for x in p], [Fraction(x) for x in q]) for p, q in EDGE]
    for p, q in cases:
        for m in (1, 2, 3):
            alpha, _ = optimal_acceptance(p, q, m)
            assert node_output_law(khisti_plan, q, p, m, "iid") == p
            assert node_acceptance(khisti_plan, q, p, m, "iid") == alpha
            assert khisti_plan(q, p, m, "iid").stats["selected_acceptance"] == alpha


def test_khisti_lossless_on_prefix_rows():
    inst = random_instance(2, 2, 9, denominator=9)
    for K in (2, 3):
        rep = check_lossless_multipath(MULTI_PATH["khisti"], inst, K)
        assert rep.lossless and rep.tv == 0
    toy = one_token(["1/3", "2/3"], ["2/3", "1/3"])
    assert analyze_multipath(toy, MULTI_PATH["khisti"], 3).block_efficiency == 2


# ----------------------------------------------------------------------------- L = 1 toolbox


def test_khisti_two_draft_closed_form_and_full_acceptance_condition():
    for V in (2, 3, 4):
        for s in range(10):
            p, q = rows(V, s, denominator=6)
            alpha, _ = optimal_acceptance(p, q, 2)
            assert two_identical_drafts_acceptance(p, q) == alpha
            for K in (2, 3):
                ok, S = full_acceptance_possible(p, q, K)
                assert ok == (optimal_acceptance(p, q, K)[0] == 1), (p, q, K)
                if not ok:
                    assert sum(p[a] for a in S) < sum(q[a] for a in S) ** K
    # Khisti et al.'s Figure 2 setting: uniform draft on 3 tokens, K = 2: alpha* = 1 iff every
    # p(y) is in [1/9, 5/9]
    u = [Fraction(1, 3)] * 3
    assert full_acceptance_possible([Fraction(1, 3), Fraction(1, 9), Fraction(5, 9)], u, 2)[0]
    assert not full_acceptance_possible([Fraction(1, 3), Fraction(0), Fraction(2, 3)], u, 2)[0]
    assert optimal_acceptance([Fraction(1, 3), Fraction(0), Fraction(2, 3)], u, 2)[0] == \
        Fraction(8, 9)


@pytest.mark.parametrize("drafting", ["iid", "norep"])
def test_subset_formula_equals_the_direct_lp(drafting):
    for V, s in ((3, 0), (3, 5), (4, 2)):
        inst = random_instance(V, 1, s, denominator=8)
        p, q = list(inst.target.level(0)[0]), list(inst.draft.level(0)[0])
        for K in (2, 3):
            alpha, _ = optimal_acceptance(p, q, K, drafting)
            assert 1 + alpha == lp.direct_lp(inst, K, exact=True, drafting=drafting).optimum


def test_truncation_tolerance_bounds_and_its_tie():
    """tau must lie in (0, 1) (0 ran the unrepaired rule, 1 too); at a tie q(H*)^m - q(T_in)^m
    = tau the paper's <= stops adding inner tokens: q = (1/2, 1/4, 1/8, 1/8), p = (1/16, 1/16,
    7/16, 7/16), K = 2, H* = {0, 1}, tau = 0.75^2 - 0.5^2 = 0.3125 keeps T_in = {0}, and the
    law is 1/16 from the target (with < : T_in = {0, 1}, TV 5e-10)."""
    for bad in (0, 0.0, 1, 1.0, -0.1, float("nan")):
        with pytest.raises(Exception, match="truncation"):
            truncated_global_resolution(bad)
    inst = instance_from_dict({"vocab_size": 4, "block_length": 1,
                               "target": ["1/16", "1/16", "7/16", "7/16"],
                               "draft": ["1/2", "1/4", "1/8", "1/8"]}, exact=True)
    res = analyze_multipath(inst, truncated_global_resolution(0.3125), 2, exact=True)
    assert abs(float(res.tv_to_target) - 1 / 16) < 1e-9
    assert abs(float(res.block_efficiency) - 1.5625) < 1e-9


def test_truncation_outer_tie_keeps_the_paper_inequality():
    """The outer truncation stops adding tokens once 1 - q(H* + T)^m <= tau (the paper's <=):
    q = (1/2, 1/8, 1/8, 1/4), p = (1/8, 3/8, 1/8, 3/8), K = 2 and tau = 1 - (5/8)^2 = 39/64
    (exact in binary) is a tie at q(H* + T) = 5/8. At the tie the rule must act as just above
    it and not as just below it (with < the tie reads as below it: TV 1/16 instead of 1/32)."""
    inst = instance_from_dict({"vocab_size": 4, "block_length": 1,
                               "target": ["1/8", "3/8", "1/8", "3/8"],
                               "draft": ["1/2", "1/8", "1/8", "1/4"]}, exact=True)

    def tv(tau):
        return analyze_multipath(inst, truncated_global_resolution(tau), 2,
                                 exact=True).tv_to_target

    tie = 1 - (5 / 8) ** 2
    assert tie == 39 / 64
    above, below = tv(tie + 1e-9), tv(tie - 1e-9)
    assert above != below
    assert tv(tie) == above == Fraction(1, 32)
