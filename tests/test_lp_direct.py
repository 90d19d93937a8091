"""Direct LP over all valid (K-path) verifiers: K = 1 equals the node-budget LP (block
verification is optimal even for verifiers that read off-path probabilities), and the K-path
optimum bounds every multi-path verifier."""

from fractions import Fraction

import pytest

from spectheory.lp import direct_lp, multipath_lp, node_budget_lp
from spectheory.runtime.errors import SizeLimitError
from spectheory.engine.analysis import analyze_multipath
from spectheory.inputs.random_instances import random_instance
from spectheory.cli.report import toy_instance
from spectheory.verifiers import MULTI_PATH


def test_toy_direct_single_path_is_20_9_exactly():
    res = direct_lp(toy_instance(), paths=1, exact=True)
    assert res.optimum == Fraction(20, 9)
    assert res.solver == "exact-certificate"
    assert direct_lp(toy_instance(), 1, exact=True, solver="sympy").optimum == Fraction(20, 9)


def test_toy_two_paths_exact():
    # two i.i.d. paths strictly beat one on the paper's example
    res = direct_lp(toy_instance(), paths=2, exact=True)
    assert res.optimum == Fraction(212, 81)
    assert res.optimum > Fraction(20, 9)


@pytest.mark.parametrize("V,L,seed", [(2, 3, 0), (3, 2, 1), (3, 3, 2), (4, 2, 3), (2, 4, 4)])
def test_single_path_direct_equals_node_budget(V, L, seed):
    inst = random_instance(V, L, seed, alpha=0.8)
    assert direct_lp(inst, 1).optimum == pytest.approx(node_budget_lp(inst).optimum, abs=1e-7)


@pytest.mark.parametrize("V,L,den,seed", [(3, 2, 12, 0), (2, 3, 8, 1), (3, 3, 6, 2)])
def test_single_path_direct_equals_node_budget_exactly(V, L, den, seed):
    inst = random_instance(V, L, seed, denominator=den)
    assert direct_lp(inst, 1, exact=True).optimum == node_budget_lp(inst, exact=True).optimum


@pytest.mark.parametrize("V,L,seed", [(3, 2, 0), (2, 3, 1), (3, 2, 2)])
def test_compact_relaxation_bounds_direct_and_more_paths_help(V, L, seed):
    inst = random_instance(V, L, seed)
    prev = 0.0
    for K in (1, 2, 3):
        d = direct_lp(inst, K).optimum
        c = multipath_lp(inst, K).optimum
        assert c >= d - 1e-7
        assert d >= prev - 1e-9  # a (K+1)-path verifier may ignore a path
        prev = d
        if K == 1:
            assert c == pytest.approx(d, abs=1e-7)


def test_compact_relaxation_gap_is_strict_on_a_known_instance():
    # V = 3, L = 2, seed 2, K = 2: the relaxation exceeds the true K-path optimum by ~0.025
    inst = random_instance(3, 2, 2)
    gap = multipath_lp(inst, 2).optimum - direct_lp(inst, 2).optimum
    assert gap > 1e-3


@pytest.mark.parametrize("drafting", ["iid", "norep"])
def test_direct_optimum_bounds_every_multipath_verifier(drafting):
    inst = random_instance(3, 2, 0)
    for K in (2, 3):
        bound = direct_lp(inst, K, drafting=drafting).optimum
        checked = 0
        for name, v in MULTI_PATH.items():
            if getattr(v, "drafting", "any") not in (drafting, "any"):
                continue
            val = float(analyze_multipath(inst, v, K, drafting=drafting).block_efficiency)
            assert val <= bound + 1e-9, (name, K, val, bound)
            checked += 1
        assert checked >= 3


def test_direct_exact_two_paths_matches_float():
    inst = random_instance(3, 2, 5, denominator=12)
    ex = direct_lp(inst, 2, exact=True)
    fl = direct_lp(inst.to_float(), 2)
    assert float(ex.optimum) == pytest.approx(fl.optimum, abs=1e-9)
    assert ex.details["outcomes"] <= ex.details["ordered_outcomes"]


def test_direct_size_guard():
    inst = random_instance(4, 4, 0, context_independent=True)
    with pytest.raises(SizeLimitError, match="direct LP with K = 3"):
        direct_lp(inst, 3)


def test_exact_two_path_optimum_bounds_verifiers_on_the_toy_example():
    # exact rationals: GBV attains the i.i.d. 2-path optimum 212/81 on the paper's example;
    # without-replacement drafting reaches 26/9
    inst = toy_instance()
    for drafting, optimum in (("iid", Fraction(212, 81)), ("norep", Fraction(26, 9))):
        bound = direct_lp(inst, 2, exact=True, drafting=drafting).optimum
        assert bound == optimum
        for name, v in MULTI_PATH.items():
            if getattr(v, "drafting", "any") in (drafting, "any"):
                assert analyze_multipath(inst, v, 2, drafting=drafting).block_efficiency <= bound
    assert analyze_multipath(inst, MULTI_PATH["gbv"], 2).block_efficiency == Fraction(212, 81)


def test_hub_drafting():
    """SpecHub's drafting (the hub a = argmax q and one companion, K <= 2): its outcome law sums
    to 1 exactly, K = 1 is plain drafting (the same optimum as i.i.d.), a second path helps, every
    verifier lossless under hub drafting stays below the optimum, and K = 3 is refused."""
    from spectheory.lp.direct import draft_outcomes
    from spectheory.lp.node_budget import _tables
    from spectheory.lp.result import LPError

    inst = random_instance(3, 2, 6, denominator=8)
    _, Q = _tables(inst, True)
    for K in (1, 2):
        combos, prob = draft_outcomes(Q, 3, 2, K, "hub", True)
        assert sum(prob) == 1 and (combos.shape[1] == K)
    one = direct_lp(inst, 1, exact=True, drafting="hub").optimum
    assert one == direct_lp(inst, 1, exact=True).optimum
    two = direct_lp(inst, 2, exact=True, drafting="hub").optimum
    assert two > one
    for name, v in MULTI_PATH.items():
        if getattr(v, "drafting", "any") in ("hub", "any"):
            assert analyze_multipath(inst, v, 2, drafting="hub").block_efficiency <= two, name
    with pytest.raises(LPError, match="at most 2 paths") as err:
        direct_lp(inst, 3, drafting="hub")
    assert "\n" not in str(err.value)
