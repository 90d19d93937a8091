"""Draft trees: shapes, the two exact routes agreeing exactly, lossless verdicts per verifier and
drafting scheme in exact rationals on prefix-dependent and degenerate instances, planted bugs
caught, K paths as the tree (K, 1, ..., 1)."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
from graphs import StandIn
from strategies import make_instance

from spectheory.runtime.errors import SizeLimitError, SpectheoryError
from spectheory.engine.analysis import analyze
from spectheory.inputs.random_instances import random_instance
from spectheory.cli.report import toy_instance
from spectheory.engine.seqtree import levels
from spectheory.engine.drafttrees import (TreeShape, choose_route, node_route_work, topk_tokens,
                                          tree_block_law_nodes, tree_shape, tree_verifier)
from spectheory.engine.analysis import analyze_tree
from spectheory.engine.lossless import check_tree_lossless

warnings.simplefilter("ignore")  # DraftingWarning: wrong schemes are analysed on purpose


def rational(seed=1, V=3, L=2):
    return random_instance(V, L, seed, denominator=12)


def _same(a, b):
    assert a.tau_pmf == b.tau_pmf
    assert all(x == y for x, y in zip(a.output_law, b.output_law))


# ----------------------------------------------------------------------------- shapes


def test_branching_shape_counts():
    t = tree_shape((3, 2, 1))
    assert (t.paths, t.n_drafted, t.height) == (6, 3 + 6 + 6, 3)
    assert t.branching() == (3, 2, 1) and tree_shape("3,2,1") == t
    # leaf paths in depth-first order share their prefixes
    nodes = t.leaf_nodes
    assert nodes.shape == (6, 3) and (nodes[0, 0] == nodes[1, 0]) and nodes[1, 0] != nodes[2, 0]


def test_graph_stand_in_equals_branching():
    g = StandIn([("r", "a"), ("r", "b"), ("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2")])
    assert tree_shape(g) == tree_shape((2, 2))
    irregular = tree_shape(StandIn([("r", "a"), ("r", "b"), ("a", "a1"), ("a", "a2"),
                                    ("b", "b1")]))
    assert irregular.branching() is None and irregular.paths == 3 and irregular.n_drafted == 5


def test_networkx_graph_if_importable():
    nx = pytest.importorskip("networkx")
    g = nx.DiGraph([(0, 1), (0, 2), (0, 3), (1, 4), (2, 5), (3, 6)])
    assert tree_shape(g) == tree_shape((3, 1))


@pytest.mark.parametrize("bad", ["3,x", "", (0, 2), (2, -1), (True,), 3.5])
def test_bad_shapes_one_line(bad):
    with pytest.raises(SpectheoryError) as e:
        tree_shape(bad)
    assert "\n" not in str(e.value)


def test_bad_graphs():
    uneven = tree_shape(StandIn([("r", "a"), ("r", "b"), ("a", "c")]))
    assert not uneven.uniform and uneven.leaf_depths == (2, 1) and uneven.height == 2
    with pytest.raises(SpectheoryError, match="not a rooted tree"):
        tree_shape(StandIn([("r", "a"), ("r", "b"), ("a", "c"), ("b", "c")]))
    with pytest.raises(SpectheoryError, match="not a rooted tree"):
        tree_shape(StandIn([("a", "b"), ("b", "a")]))


def test_topk_ties_to_smaller_id():
    row = [Fraction(1, 4), Fraction(1, 4), Fraction(1, 2), Fraction(0)]
    assert topk_tokens(row, 3) == [2, 0, 1]


# ----------------------------------------------------------------------------- routes


@pytest.mark.parametrize("shape", [(2, 1), (2, 2), (3, 1), (1, 3)])
@pytest.mark.parametrize("verifier,drafting", [("specinfer-norep", "norep"),
                                               ("specinfer-norep", "iid"), ("topk", "topk"),
                                               ("topk", "iid")])
def test_node_route_equals_enumeration_exactly(shape, verifier, drafting):
    for inst in (rational(0), rational(1), make_instance("sparse", 3, 2, 5, denominator=6)):
        a = analyze_tree(inst, verifier, shape, drafting, route="enumerate")
        b = analyze_tree(inst, verifier, shape, drafting, route="nodes")
        assert a.extra["route"] == "enumerate" and b.extra["route"] == "nodes"
        _same(a, b)


@pytest.mark.parametrize("shape", [(2, 1), (3, 1), (2, 2)])
@pytest.mark.parametrize("verifier,drafting", [("specinfer-norep", "norep"),
                                               ("specinfer", "iid")])
def test_float_enumeration_equals_exact(shape, verifier, drafting):
    """The enumeration weighs outcomes in float64 arrays on a float instance and in integers over
    one denominator on an exact one (two computations of the same product of q's, renormalised
    over the unused tokens under norep): on prefix-dependent rational instances with ties and
    zeros (read as floats for the float route) the laws agree to 1e-12."""
    for inst in (rational(0), rational(1), make_instance("sparse", 3, 2, 5, denominator=6)):
        ex = analyze_tree(inst, verifier, shape, drafting, exact=True, route="enumerate")
        fl = analyze_tree(inst, verifier, shape, drafting, exact=False, route="enumerate")
        assert max(abs(float(a) - float(b)) for a, b in zip(ex.tau_pmf, fl.tau_pmf)) <= 1e-12
        assert max(abs(float(a) - float(b))
                   for a, b in zip(ex.output_law, fl.output_law)) <= 1e-12


@pytest.mark.parametrize("K", [2, 3])
def test_specinfer_node_route_equals_enumeration_on_k_paths(K):
    for inst in (rational(0), rational(1), make_instance("sparse", 3, 2, 5, denominator=6)):
        _same(analyze_tree(inst, "specinfer", (K, 1), "iid", route="enumerate"),
              analyze_tree(inst, "specinfer", (K, 1), "iid", route="nodes"))


def test_specinfer_on_flattened_leaf_paths_is_lossy():
    """A child with two leaves below it appears twice in the leaf paths; SpecInfer with
    replacement then counts it as two trials at its parent: lossy, while SpecInfer on the tree
    (node route, one trial per child) is lossless."""
    inst = rational(0)
    flat = check_tree_lossless("specinfer", inst, (1, 2), "iid", route="enumerate")
    assert not flat.lossless and flat.tv == Fraction(1, 12)
    assert check_tree_lossless("specinfer", inst, (1, 2), "iid", route="nodes").lossless
    assert check_tree_lossless("specinfer", inst, (2, 2), "iid").lossless


def test_norep_surplus_children_both_routes():
    """q(.|root) with one positive token and three children: the surplus children repeat the
    first (fewer children); both routes agree and specinfer-norep stays lossless."""
    inst = make_instance("onehot_draft", 3, 2, 0, denominator=6)
    a = analyze_tree(inst, "specinfer-norep", (3, 1), "norep", route="enumerate")
    b = analyze_tree(inst, "specinfer-norep", (3, 1), "norep", route="nodes")
    _same(a, b)
    assert a.tv_to_target == 0


@pytest.mark.parametrize("K,verifier", [(2, "specinfer"), (3, "specinfer"),
                                       (2, "specinfer-norep"), (3, "specinfer-norep"),
                                       (2, "traversal-tree"), (2, "block-first"), (2, "spectr"),
                                       (2, "gbv")])
def test_k_paths_are_the_tree_k_1(K, verifier):
    """K paths (root branching only) reproduce the K-path engine exactly, both schemes."""
    inst = rational(2)
    for drafting in ("iid", "norep"):
        if verifier == "gbv" and drafting == "norep":
            continue
        _same(analyze_tree(inst, verifier, (K, 1), drafting, route="enumerate"),
              analyze(inst, verifier, paths=K, drafting=drafting))


def test_chain_is_block_and_token_verification():
    inst = rational(3, L=3)
    _same(analyze_tree(inst, "block-first", (1, 1, 1)), analyze(inst, "block"))
    _same(analyze_tree(inst, "specinfer", (1, 1, 1)), analyze(inst, "token"))


# ----------------------------------------------------------------------------- verdicts

LOSSLESS = [("specinfer", "iid"), ("specinfer-norep", "norep"), ("specinfer-norep", "iid"),
            ("topk", "topk"),
            ("topk", "iid"), ("topk", "norep"), ("traversal-tree", "iid"),
            ("traversal-tree", "norep"), ("block-first", "iid"), ("block-first", "norep"),
            ("block-first", "topk")]


@pytest.mark.parametrize("verifier,drafting", LOSSLESS)
def test_lossless_exactly(verifier, drafting):
    insts = [rational(1), toy_instance(True)] + [
        make_instance(k, 3, 2, 7, denominator=6) for k in ("sparse", "onehot_draft",
                                                            "onehot_target")]
    for inst in insts:
        for shape in ((2, 2), (3, 1)):
            if drafting == "topk" and max(shape) > inst.vocab_size:
                continue
            rep = check_tree_lossless(verifier, inst, shape, drafting)
            assert rep.lossless and rep.tv == 0 and rep.exact, (verifier, drafting, shape)


def test_planted_bugs_caught():
    inst = rational(1)
    # recursive rejection sampling WITH replacement run on children drawn without replacement
    rep = check_tree_lossless("specinfer", inst, (2, 2), "norep")
    assert not rep.lossless and rep.tv == Fraction(1, 144)
    # a rule that reads q handed the raw q on deterministic top-k children
    for v in ("specinfer-norep", "block-first"):
        rep = check_tree_lossless(v, inst, (2, 2), "topk", rows="raw")
        assert not rep.lossless and rep.tv > 0 and rep.offending is not None
    # traversal on the merged tree is not designed for deterministic children
    assert not check_tree_lossless("traversal-tree", inst, (2, 2), "topk").lossless


def test_topk_rule_ignores_q():
    """The top-k rule never reads q: raw and point-mass rows give the same law."""
    inst = rational(5)
    _same(analyze_tree(inst, "topk", (2, 2), "topk", route="enumerate", rows="raw"),
          analyze_tree(inst, "topk", (2, 2), "topk", route="enumerate", rows="point"))


def test_more_children_never_hurt_specinfer():
    """A bigger tree accepts at least as much: on a chain prefix of the same depth."""
    inst = rational(6, L=3)
    chain = analyze_tree(inst, "specinfer", (1, 1, 1)).block_efficiency
    tree = analyze_tree(inst, "specinfer", (2, 1, 1)).block_efficiency
    assert tree > chain


@pytest.mark.parametrize("shape", [(2, 2), (3, 1, 1), (1, 2, 2)])
def test_specinfer_subset_step_equals_tuple_enumeration_exactly(shape):
    """SpecInfer's node step over subsets of later children (no candidate tuples) against the
    generic step over all V**n tuples, merged nodes included."""
    inst = random_instance(3, 3, 1, denominator=12)
    L = len(shape)
    ql, pl = levels(inst.draft, 0, L, True), levels(inst.target, 0, L + 1, True)
    a = tree_block_law_nodes("specinfer", shape, ql, pl, 3, "iid", fast=True)
    b = tree_block_law_nodes("specinfer", shape, ql, pl, 3, "iid", fast=False)
    assert list(a.tau_pmf[0]) == list(b.tau_pmf[0])
    for x, y in zip(a.emitted[1:], b.emitted[1:]):
        assert list(x) == list(y)


def test_node_route_reaches_larger_trees_float():
    inst = random_instance(6, 4, 3)
    for v, d in (("specinfer", "iid"), ("specinfer-norep", "norep"), ("topk", "topk")):
        res = analyze_tree(inst, v, (4, 2, 1, 1), d)
        assert res.extra["route"] == "nodes" and res.tv_to_target <= 1e-12
        assert abs(sum(res.tau_pmf) - 1) <= 1e-12
        assert 1 <= res.block_efficiency <= 5


# ----------------------------------------------------------------------------- guards


def test_size_guard_and_bad_input():
    inst = random_instance(4, 3, 0)
    with pytest.raises(SizeLimitError):
        analyze_tree(inst, "traversal-tree", (3, 2, 1), "iid", max_sequences=10_000)
    assert node_route_work((3, 2, 1), 4, "iid") < 4 ** 15
    assert node_route_work((3, 2, 1), 4, "iid", "specinfer") < node_route_work((3, 2, 1), 4, "iid")
    with pytest.raises(SpectheoryError, match="drafting"):
        analyze_tree(inst, "specinfer", (2, 1), "beam")
    with pytest.raises(SpectheoryError, match="route"):
        analyze_tree(inst, "specinfer", (2, 1), route="fast")
    with pytest.raises(SpectheoryError, match="node rule"):
        analyze_tree(inst, "block-first", (2, 1), route="nodes")
    with pytest.raises(SpectheoryError, match="at most V"):
        analyze_tree(inst, "topk", (5, 1), "topk")
    assert choose_route(tree_verifier("specinfer"), "norep") == "enumerate"
    assert choose_route(tree_verifier("specinfer-norep"), "norep") == "nodes"


def test_tree_shape_dataclass_rejects_garbage():
    with pytest.raises(SpectheoryError):
        TreeShape(((1,), (0,)))
    with pytest.raises(SpectheoryError):
        TreeShape(((),))
    assert isinstance(tree_shape((2,)).leaf_nodes, np.ndarray)


def test_an_undirected_graph_is_refused_not_read_as_branching_factors():
    """``networkx.Graph([(5, 7)])`` has no direction: iterating it gave its node labels, and a
    check passed on "tree 5,7" (branching factors 5 and 7), a tree nobody described."""
    nx = pytest.importorskip("networkx")
    from spectheory.engine.drafttrees import tree_shape
    from spectheory.runtime.errors import SpectheoryError

    for g in (nx.Graph([(5, 7)]), nx.Graph([(0, 1), (1, 2)])):
        with pytest.raises(SpectheoryError, match=r"^the tree graph is a Graph, which has no "
                                                  r"direction .*networkx\.DiGraph"):
            tree_shape(g)
    assert tree_shape(nx.DiGraph([(0, 1), (1, 2), (0, 3)])).n_drafted == 3
