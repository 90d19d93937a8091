"""Matrix-free optimality certificate of block verification for the node-budget LP: closed-form
primal and backward dual, checked row by row in float64 and exactly in rationals; agrees with
the exact sparse-LP certificate and HiGHS; planted errors are caught."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from spectheory.lp import certificate as C
from spectheory.lp import node_budget_lp
from spectheory.lp.certificate import certify_node_budget
from spectheory.engine.analysis import analyze
from spectheory.inputs.instances import Instance
from spectheory.inputs.models import TableModel
from spectheory.inputs.random_instances import random_instance
from spectheory.cli.report import toy_instance
from strategies import KINDS, make_instance


def test_toy_vector():
    c = certify_node_budget(toy_instance(exact=True))
    assert c.certified and c.primal_objective == c.dual_objective == Fraction(20, 9)


@pytest.mark.parametrize("kind", KINDS)
def test_exact_certificate_matches_sparse_lp_and_block(kind):
    inst = make_instance(kind, V=3, L=3, seed=5, denominator=6)  # prefix-dependent, zeros, ties
    c = certify_node_budget(inst)
    assert c.certified and c.exact
    assert c.objective_gap == 0 and c.max_equality_residual == 0 and c.min_dual_slack >= 0
    assert c.primal_objective == node_budget_lp(inst, exact=True).optimum
    assert c.primal_objective == analyze(inst, "block").block_efficiency


@pytest.mark.parametrize("V,L,seed", [(2, 6, 0), (3, 4, 1), (4, 3, 2)])
def test_float_certificate_matches_highs_and_block(V, L, seed):
    inst = random_instance(V, L, seed, alpha=0.5)
    c = certify_node_budget(inst)
    assert c.certified and not c.exact
    assert c.objective_gap <= 1e-12 and c.max_equality_residual <= 1e-12
    assert abs(c.primal_objective - node_budget_lp(inst).optimum) <= 1e-7  # HiGHS tolerance
    assert abs(c.primal_objective - float(analyze(inst, "block").block_efficiency)) <= 1e-12


def test_chunked_levels_give_the_same_result(monkeypatch):
    inst = random_instance(3, 4, 3)
    whole = certify_node_budget(inst)
    monkeypatch.setattr(C, "CHUNK_ROWS", 6)  # two parents per chunk
    part = certify_node_budget(inst)
    assert part.certified
    assert abs(part.primal_objective - whole.primal_objective) <= 1e-14
    assert abs(part.dual_objective - whole.dual_objective) <= 1e-14


def test_planted_errors_are_caught(monkeypatch):
    """A primal that is not feasible (a budget exceeded) and a dual that is not feasible (a
    negative multiplier / violated dual row) are refused."""
    inst = random_instance(3, 3, 4, denominator=20)
    real_min = np.minimum

    def loose(a, b):  # M*(s) = p(s_last|s^-) M*(s^-): ignores the draft budget Q(s)
        return np.asarray(b)

    monkeypatch.setattr(C.np, "minimum", loose)
    bad = certify_node_budget(inst)
    monkeypatch.setattr(C.np, "minimum", real_min)
    assert not bad.certified and bad.max_budget_violation > 0

    real_where = np.where

    def shifted(cond, a, b):  # every dual multiplier halved: a dual row is violated
        out = real_where(cond, a, b)
        return out * Fraction(1, 2) if out.dtype == object else out / 2

    monkeypatch.setattr(C.np, "where", shifted)
    bad = certify_node_budget(inst)
    monkeypatch.setattr(C.np, "where", real_where)
    assert not bad.certified and bad.min_dual_slack < 0


def test_context_independent_rows():
    tbl = lambda rows: TableModel(3, (np.asarray(rows, dtype=np.float64),))  # noqa: E731
    inst = Instance(3, 5, tbl([[0.2, 0.5, 0.3]]), tbl([[0.5, 0.25, 0.25]]))
    c = certify_node_budget(inst)
    assert c.certified
    assert abs(c.primal_objective - float(analyze(inst, "block").block_efficiency)) <= 1e-12


def test_node_budget_lp_certificate_route():
    inst = random_instance(3, 3, 6, denominator=12)
    ex = node_budget_lp(inst, exact=True, solver="certificate")
    assert ex.solver == "certificate" and ex.optimum == node_budget_lp(inst, exact=True).optimum
    fl = node_budget_lp(inst.to_float(), solver="certificate")
    assert abs(fl.optimum - float(ex.optimum)) <= 1e-12 and fl.variables == 3 + 9 + 27 + 81
