"""Node-budget LP (Thomas & Pal): its optimum is block verification's E[tau+1], exactly."""

from fractions import Fraction

import numpy as np
import pytest

from spectheory.lp import LPError, LPResult, coupling_bound, coupling_lp, node_budget_lp
from spectheory.lp.node_budget import build_node_budget, certificate
from spectheory.runtime.errors import SizeLimitError
from spectheory.engine.analysis import analyze
from spectheory.inputs.random_instances import random_instance
from spectheory.cli.report import toy_instance
from spectheory.verifiers import block_verification, token_verification

TOY_BLOCK = Fraction(20, 9)  # 1 + 11/9 (Sun et al.'s example)


def test_toy_exact_certificate_is_20_9():
    res = node_budget_lp(toy_instance(), exact=True)
    assert res.optimum == TOY_BLOCK and isinstance(res.optimum, Fraction)
    assert res.solver == "exact-certificate" and res.status == "optimal"
    assert res.variables == 2 + 4 + 8  # D(s) for 1 <= |s| <= L+1


def test_toy_sympy_and_float_routes_agree():
    assert node_budget_lp(toy_instance(), exact=True, solver="sympy").optimum == TOY_BLOCK
    inst = toy_instance(exact=False)
    for kw in ({"solver": "highs"}, {"solver": "cvxpy"}, {"solver": "highs", "form": "full"},
               {"solver": "cvxpy", "form": "full"}, {"solver": "closed-form"}):
        assert node_budget_lp(inst, **kw).optimum == pytest.approx(20 / 9, abs=1e-9), kw


@pytest.mark.parametrize("V,L,alpha,ci,seed", [
    (2, 4, 1.0, False, 0), (3, 3, 0.5, False, 1), (3, 4, 2.0, False, 2), (4, 3, 1.0, False, 3),
    (5, 2, 0.3, False, 4), (4, 5, 1.0, True, 5), (2, 8, 0.7, True, 6), (6, 2, 5.0, False, 7),
])
def test_float_optimum_equals_block_verification(V, L, alpha, ci, seed):
    inst = random_instance(V, L, seed, alpha=alpha, context_independent=ci)
    block = float(analyze(inst, block_verification).block_efficiency)
    token = float(analyze(inst, token_verification).block_efficiency)
    reduced = node_budget_lp(inst)
    full = node_budget_lp(inst, form="full")
    assert reduced.optimum == pytest.approx(block, abs=1e-7)
    assert full.optimum == pytest.approx(block, abs=1e-7)
    assert token <= reduced.optimum + 1e-9
    # the coupling bound is an upper bound on every verifier
    assert reduced.optimum <= coupling_bound(inst).optimum + 1e-9


@pytest.mark.parametrize("V,L,den,seed", [(2, 3, 6, 0), (3, 2, 12, 1), (3, 3, 24, 2),
                                          (4, 2, 4, 3), (2, 5, 10, 4)])
def test_exact_optimum_equals_block_verification(V, L, den, seed):
    # small denominators give exact zeros in the rows (q(s) = 0 or p(a|s) = 0 corners)
    inst = random_instance(V, L, seed, alpha=0.7, denominator=den)
    res = node_budget_lp(inst, exact=True)
    assert res.optimum == analyze(inst, block_verification).block_efficiency
    assert res.optimum >= analyze(inst, token_verification).block_efficiency


def test_certificate_check_rejects_a_wrong_dual_and_a_wrong_primal():
    inst = toy_instance()
    lp, tables = build_node_budget(inst, exact=True)
    x, y, lam = certificate(tables, 2, 2)
    assert lp.check_certificate(x, y, lam) == TOY_BLOCK
    bad_lam = lam.copy()
    bad_lam[np.flatnonzero(bad_lam)[0]] -= Fraction(1, 7)
    with pytest.raises(LPError):
        lp.check_certificate(x, y, bad_lam)
    bad_x = x.copy()
    bad_x[-1] += Fraction(1, 100)
    with pytest.raises(LPError):
        lp.check_certificate(bad_x, y, lam)


def test_coupling_bound_is_21_9_and_attained_by_the_coupling_lp():
    assert coupling_bound(toy_instance(), exact=True).optimum == Fraction(21, 9)
    assert coupling_lp(toy_instance(), exact=True).optimum == Fraction(21, 9)
    for seed in range(3):
        inst = random_instance(3, 2, seed)
        assert coupling_lp(inst).optimum == pytest.approx(coupling_bound(inst).optimum, abs=1e-8)


def test_result_json_has_exactly_the_documented_keys():
    res = node_budget_lp(toy_instance(), exact=True)
    js = res.to_json()
    assert list(js) == ["problem", "paths", "optimum", "solver", "status", "variables",
                        "constraints", "seconds"]
    assert js["optimum"] == "20/9" and js["problem"] == "node-budget" and js["paths"] == 1
    assert isinstance(node_budget_lp(toy_instance(exact=False)).to_json()["optimum"], float)
    assert isinstance(res, LPResult)


def test_size_guards_refuse_before_building():
    inst = random_instance(4, 3, 0, context_independent=True)
    with pytest.raises(SizeLimitError, match="exceed"):
        node_budget_lp(inst, limit=50)
    big = random_instance(8, 12, 0, context_independent=True)
    with pytest.raises(SizeLimitError, match="LP variables"):
        node_budget_lp(big, exact=True)
    with pytest.raises(SizeLimitError):
        node_budget_lp(big)


def test_unknown_solver_is_a_clear_error():
    with pytest.raises(LPError, match="unknown LP solver"):
        node_budget_lp(toy_instance(exact=False), solver="glpk")


def _tiny_lp(b_ub, c):
    from spectheory.lp.sparse import SparseLP

    z = np.zeros(0, dtype=np.int64)
    return SparseLP(1, np.array(c, dtype=float),
                    (np.array([0]), np.array([0]), np.array([1.0]), np.array(b_ub, dtype=float)),
                    (z, z, np.zeros(0), np.zeros(0)))


@pytest.mark.parametrize("solver", ["highs", "cvxpy"])
def test_infeasible_and_unbounded_solves_raise(solver):
    with pytest.raises(LPError, match="infeasible"):
        _tiny_lp([-1.0], [1.0]).solve(solver)  # x <= -1, x >= 0
    unbounded = _tiny_lp([1.0], [1.0])
    unbounded.ub = (np.array([0]), np.array([0]), np.array([-1.0]), np.array([1.0]))  # -x <= 1
    with pytest.raises(LPError, match="unbounded"):
        unbounded.solve(solver)
