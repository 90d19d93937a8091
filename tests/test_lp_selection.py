"""The selection-rule LP: the best "select a path, then block-verify it against its induced law"
K-path verifier, between GBV and the direct LP over all valid verifiers."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import spectheory as st
from spectheory.lp import LPError, direct_lp, node_budget_lp, optimal_multidraft_L1
from spectheory.lp.selection import build_selection, selection_lp, selection_size
from spectheory.inputs.instances import Instance
from spectheory.inputs.models import TableModel
from spectheory.cli.report import toy_instance

TWO_TOKEN_L1 = {"vocab_size": 2, "block_length": 1, "target": ["1/3", "2/3"],
                "draft": ["2/3", "1/3"]}


def test_one_path_is_block_verification_exactly():
    for inst in (toy_instance(), st.random_instance(3, 2, 1, denominator=12)):
        opt = selection_lp(inst, 1, exact=True).optimum
        assert opt == st.analyze(inst, "block").block_efficiency
        assert opt == node_budget_lp(inst, exact=True).optimum


def test_two_token_example_exact():
    toy = toy_instance()
    assert selection_lp(toy, 2, exact=True).optimum == Fraction(212, 81)  # GBV attains it
    three = selection_lp(toy, 3, exact=True).optimum
    assert three == direct_lp(toy, 3, exact=True).optimum == Fraction(2080, 729)
    assert three > st.analyze(toy, "gbv", paths=3).block_efficiency  # 2018/729


def test_gbv_not_monotone_while_the_best_rule_is_the_L1_optimum():
    one = st.instance_from_dict(TWO_TOKEN_L1, exact=True)
    gbv = [st.analyze(one, "gbv", paths=K).expected_accepted for K in range(1, 7)]
    assert gbv == [Fraction(2, 3), Fraction(8, 9), Fraction(26, 27), Fraction(70, 81),
                   Fraction(194, 243), Fraction(550, 729)]
    # acceptance = min(p(1), q^G(1)) + min(p(0), q^G(0)) with q^G(1) = 1 - (2/3)^K
    for K, g in zip(range(1, 7), gbv):
        qg = 1 - Fraction(2, 3) ** K
        assert g == min(Fraction(2, 3), qg) + min(Fraction(1, 3), 1 - qg)
    for K in range(1, 7):
        assert selection_lp(one, K, exact=True).optimum == \
            optimal_multidraft_L1(one, K, exact=True).optimum


@pytest.mark.parametrize("seed", range(4))
def test_between_gbv_and_the_direct_lp_on_prefix_dependent_rows(seed):
    inst = st.random_instance(3, 2, seed, alpha=0.7)
    prev = 0.0
    for K in (1, 2, 3):
        sel = selection_lp(inst, K).optimum
        assert float(st.analyze(inst, "gbv", paths=K).block_efficiency) <= sel + 1e-9
        assert sel <= direct_lp(inst, K).optimum + 1e-7
        assert sel >= prev - 1e-9  # a K + 1 rule can ignore one path
        prev = sel


def _model_from_path_law(Q: np.ndarray, V: int, L: int) -> TableModel:
    """Autoregressive tables of a law over V^L (uniform rows below prefixes of mass 0)."""
    tables, mass = [], Q.copy()
    sums = [None] * (L + 1)
    sums[L] = mass
    for j in range(L - 1, -1, -1):
        sums[j] = sums[j + 1].reshape(-1, V).sum(1)
    for j in range(L):
        rows = sums[j + 1].reshape(V**j, V)
        tot = rows.sum(1, keepdims=True)
        tables.append(np.where(tot > 0, rows / np.where(tot > 0, tot, 1), 1.0 / V))
    return TableModel(V, tuple(tables))


@pytest.mark.parametrize("seed", [0, 2])
def test_the_optimal_induced_law_is_realised_by_block_verification(seed):
    """Block verification of a draft whose law is the LP's optimal Q attains the optimum."""
    inst = st.random_instance(3, 2, seed, alpha=0.7)
    res = selection_lp(inst, 2)
    Q = np.maximum(res.details["induced_law"], 0)
    assert Q.sum() == pytest.approx(1.0, abs=1e-9)
    realised = Instance(3, 2, inst.target.to_float(), _model_from_path_law(Q / Q.sum(), 3, 2))
    assert float(st.analyze(realised, "block").block_efficiency) == pytest.approx(
        res.optimum, abs=1e-6)


def test_without_replacement_drafting_and_bad_arguments():
    inst = st.random_instance(3, 2, 0, alpha=0.7)
    norep = selection_lp(inst, 2, drafting="norep").optimum
    assert norep >= float(st.analyze(inst, "block").block_efficiency) - 1e-9
    assert norep <= direct_lp(inst, 2, drafting="norep").optimum + 1e-7
    with pytest.raises(LPError, match="positive integer"):
        selection_lp(inst, 0)
    with pytest.raises(LPError, match="drafting"):
        selection_lp(inst, 2, drafting="bogus")


@pytest.mark.parametrize("V,L,K", [(2, 2, 2), (2, 2, 3), (3, 1, 4), (2, 3, 2)])
def test_one_selection_variable_per_distinct_path_and_size_bounds_that_hold(V, L, K):
    """The LP has one variable s(omega, x) per outcome omega (the multisets of K paths merged by
    their set of distinct paths) and per path x in it (duplicates of a path are one choice),
    then the M(s) nodes; `selection_size` bounds
    the variables and the nonzeros from above before any enumeration (the size guard reads
    it)."""
    from itertools import combinations_with_replacement
    from math import comb

    inst = st.random_instance(V, L, seed=V + L + K)  # prefix-dependent rows, no zero entry
    lp, info = build_selection(inst, K)
    n = V**L  # outcomes merged by their SET of drafted paths: every set of 1..K paths
    distinct = sum(len(set(c)) for c in {frozenset(c) for c in
                                         combinations_with_replacement(range(n), K)})
    assert distinct == sum(comb(n, k) * k for k in range(1, min(K, n) + 1))
    nodes = sum(V**j for j in range(1, L + 1))
    assert info["selection_variables"] == distinct
    assert lp.n == distinct + nodes
    n_est, nnz_est = selection_size(V, L, K)
    assert n_est == comb(V**L + K - 1, K) * K + nodes >= lp.n
    # every s variable sits in its outcome's equality and in L rows "M(s) <= Q(s)", each node
    # M(s) in its own row, a root node in "M(a) <= p(a)", a deeper one in two chain rows
    assert lp.nonzeros == (L + 1) * distinct + 3 * nodes - V <= nnz_est


def test_the_monotone_bound_is_gated_by_the_size_of_the_K_minus_1_lp():
    """At V = 5, L = 1, K = 15 the LP with K - 1 = 14 paths (42,845 variables) is under the
    50,000-variable gate of the bound by monotonicity in K, though the K-path LP is over it
    (58,145): the bound is computed, not skipped."""
    assert selection_size(5, 1, 14)[0] <= 50_000 < selection_size(5, 1, 15)[0]
    r = selection_lp(st.random_instance(5, 1, 0, denominator=8), 15)
    bounds = r.details["bounds"]
    assert bounds["skipped"] == []
    assert any("K - 1 = 14 paths" in b.source for b in bounds["checked"])
