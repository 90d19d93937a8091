"""Compact multi-path relaxation, its separation routine, and Hu et al.'s L = 1 closed form."""

import itertools
from fractions import Fraction

import numpy as np
import pytest

from spectheory.lp import direct_lp, multidraft_acceptance_L1, multipath_lp, optimal_multidraft_L1
from spectheory.lp.multipath import coverage, separate
from spectheory.runtime.errors import InstanceError
from spectheory.inputs.random_instances import random_instance
from spectheory.cli.report import toy_instance


def brute_force_L1(p, q, K):
    V = len(p)
    return min(sum(p[a] for a in H) + 1 - sum(q[a] for a in H) ** K
               for r in range(V + 1) for H in itertools.combinations(range(V), r))


@pytest.mark.parametrize("seed", range(6))
def test_closed_form_threshold_scan_equals_all_subsets(seed):
    inst = random_instance(6, 1, seed, alpha=0.6, denominator=30)
    p, q = list(inst.target.level(0)[0]), list(inst.draft.level(0)[0])
    for K in (1, 2, 3, 5):
        alpha, H = multidraft_acceptance_L1(p, q, K)
        assert alpha == brute_force_L1(p, q, K)
        assert alpha == sum(p[a] for a in H) + 1 - sum(q[a] for a in H) ** K
    # K = 1 is 1 - TV(p, q): token verification's acceptance
    assert multidraft_acceptance_L1(p, q, 1)[0] == sum(min(a, b) for a, b in zip(p, q))


@pytest.mark.parametrize("V,seed", [(3, 0), (4, 1), (5, 2)])
def test_L1_closed_form_equals_compact_and_direct_lp(V, seed):
    inst = random_instance(V, 1, seed)
    for K in (2, 3):
        closed = optimal_multidraft_L1(inst, K).optimum
        assert multipath_lp(inst, K).optimum == pytest.approx(closed, abs=1e-8)
        assert direct_lp(inst, K).optimum == pytest.approx(closed, abs=1e-8)


def test_L1_closed_form_exact_equals_exact_direct_lp():
    inst = random_instance(3, 1, 3, denominator=12)
    assert optimal_multidraft_L1(inst, 2, exact=True).optimum == direct_lp(inst, 2,
                                                                           exact=True).optimum


def test_closed_form_refuses_longer_blocks():
    with pytest.raises(InstanceError, match="block length 1"):
        optimal_multidraft_L1(toy_instance(exact=False), 2)


@pytest.mark.parametrize("seed", range(20))
def test_separation_finds_the_most_violated_set(seed):
    """Brute force over all 2^7 - 1 sets against the sorted threshold scan."""
    rng = np.random.default_rng(seed)
    n = 7
    q = rng.dirichlet(np.ones(n))
    M = np.minimum(q, rng.uniform(0, 1, n) * q) * rng.uniform(0.5, 3.0)
    M = np.minimum(M, coverage(q, 3))  # singletons hold, as in the LP
    K = 3
    best = max(M[list(S)].sum() - coverage(q[list(S)].sum(), K)
               for r in range(1, n + 1) for S in itertools.combinations(range(n), r))
    found = separate(M, q, K, tol=-1.0, max_sets=n)
    top = max(v for _, v in found)
    # the threshold argument covers all sets including the empty one (violation 0), so the
    # scan is exact whenever some set is violated, and then it returns the worst one
    assert max(top, 0.0) == pytest.approx(max(best, 0.0), abs=1e-12)
    if best > 1e-12:
        worst = separate(M, q, K)[0]
        assert worst[1] == pytest.approx(best, abs=1e-12)


def test_toy_multipath_single_path_is_block_value():
    assert multipath_lp(toy_instance(exact=False), 1).optimum == pytest.approx(20 / 9, abs=1e-9)
    assert coverage(Fraction(1, 3), 2) == Fraction(5, 9)
