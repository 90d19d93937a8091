"""Direct LP for a draft tree: the chain is the node-budget optimum, K paths the K-path direct
LP, and every tree verifier is at most the optimum of its drafting scheme (exact certificates)."""

from __future__ import annotations

import warnings

import pytest
from strategies import make_instance

from spectheory.lp.direct import direct_lp
from spectheory.lp.node_budget import node_budget_lp
from spectheory.lp.tree import tree_lp, tree_outcomes
from spectheory.runtime.errors import SizeLimitError
from spectheory.inputs.random_instances import random_instance
from spectheory.engine.analysis import analyze_tree

warnings.simplefilter("ignore")


def inst(seed=1):
    return random_instance(3, 2, seed, denominator=12)


def test_chain_is_the_node_budget_optimum():
    for x in (inst(1), make_instance("sparse", 3, 2, 4, denominator=6)):
        assert tree_lp(x, (1, 1), exact=True).optimum == node_budget_lp(x, exact=True).optimum


@pytest.mark.parametrize("drafting", ["iid", "norep"])
def test_root_branching_is_the_k_path_direct_lp(drafting):
    x = inst(2)
    assert tree_lp(x, (2, 1), drafting, exact=True).optimum == \
        direct_lp(x, 2, exact=True, drafting=drafting).optimum


def test_outcome_probabilities_sum_to_one():
    for d in ("iid", "norep", "topk"):
        _, prob = tree_outcomes(inst(3), (2, 2), d, exact=True)
        assert sum(prob) == 1


@pytest.mark.parametrize("shape", [(2, 2), (3, 1)])
def test_tree_verifiers_below_the_optimum(shape):
    x = inst(1)
    native = {"iid": ["specinfer", "traversal-tree", "block-first"],
              "norep": ["specinfer-norep", "traversal-tree"], "topk": ["topk", "block-first"]}
    for drafting, names in native.items():
        opt = tree_lp(x, shape, drafting, exact=True)
        assert opt.details["certificate"] in ("rounded", "sympy")
        bes = {v: analyze_tree(x, v, shape, drafting).block_efficiency for v in names}
        for v, be in bes.items():
            assert be <= opt.optimum, (v, drafting)
        if drafting != "topk":  # strictly below on this instance for the random schemes
            assert bes[names[0]] < opt.optimum


def test_float_solve_agrees_and_size_guard():
    x = inst(1)
    exact = tree_lp(x, (2, 1), "iid", exact=True).optimum
    assert abs(tree_lp(x.to_float(), (2, 1), "iid").optimum - float(exact)) < 1e-7
    with pytest.raises(SizeLimitError):
        tree_lp(random_instance(4, 3, 0), (3, 2, 1), "iid")
