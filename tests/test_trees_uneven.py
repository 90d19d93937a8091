"""Draft trees whose leaves sit at different depths (EAGLE-2 dynamic trees, Medusa sparse trees,
SpecInfer token trees): every shape form, the node route against an independent brute force in
exact rationals (tau pmf, output law, block efficiency), losslessness of the three node rules
under their drafting schemes on prefix-dependent instances, a planted leaf bug caught, the
top-k closed form E[tau] = sum over drafted nodes of p(node's prefix), and the enumerate route's
refusal."""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import pytest
from graphs import StandIn
from strategies import make_instance

from spectheory.engine import drafttrees as trees
from spectheory.runtime.errors import SpectheoryError
from spectheory.inputs.random_instances import random_instance
from spectheory.engine.seqtree import levels
from spectheory.engine.analysis import analyze_tree
from spectheory.engine.lossless import check_tree_lossless
from spectheory.engine.drafttrees import (node_route_work, shape_from_choices, shape_from_parents,
                                          tree_block_law_enumerate, tree_shape)

warnings.simplefilter("ignore")

#: Uneven shapes as parent lists (node i's parent is entry i - 1; 0 is the root).
UNEVEN = {
    "deep-first": [0, 1, 0],           # root: [a -> a1, b]; leaves at depths 2, 1
    "leaf-first": [0, 0, 2],           # root: [a, b -> b1]; a leaf precedes a deeper sibling
    "three-deep": [0, 1, 2, 1, 0],     # leaves at depths 3, 2, 1
    "chain-and-leaf": [0, 1, 2, 0],    # a chain of 3 beside a leaf at depth 1
    "wide": [0, 0, 0, 1, 1, 2],        # root: 3 children with 2, 1, 0 children
}
HOME = [("specinfer", "iid"), ("specinfer-norep", "norep"), ("topk", "topk")]


def rational(seed, V=3, L=3):
    return random_instance(V, L, seed, denominator=12)


# ----------------------------------------------------------------------------- brute force


def drafted(inst, shape, drafting, u=0, prefix=()):
    """Every drafted token assignment of u's subtree with its probability: a list of
    (children, prob), children a tuple of (token, children-of-that-node) pairs in order. norep
    drafts min(b, m) children (m = positive tokens of q); surplus children are not drafted."""
    kids = shape.children[u]
    if not kids:
        return [((), Fraction(1))]
    q = list(inst.draft.conditional(prefix))
    V = len(q)
    if drafting == "iid":
        heads = [(t, math.prod((q[x] for x in t), start=Fraction(1)))
                 for t in itertools.product(range(V), repeat=len(kids))]
    elif drafting == "norep":
        positive = [x for x in range(V) if q[x] > 0]
        heads = []
        for t in itertools.permutations(positive, min(len(kids), len(positive))):
            w, used = Fraction(1), Fraction(0)
            for x in t:
                w *= q[x] / (1 - used)
                used += q[x]
            heads.append((t, w))
    else:
        heads = [(tuple(sorted(range(V), key=lambda x: (-q[x], x))[:len(kids)]), Fraction(1))]
    out = []
    for toks, w in heads:
        if w == 0:
            continue
        subs = [drafted(inst, shape, drafting, c, prefix + (x,)) for c, x in zip(kids, toks)]
        for combo in itertools.product(*subs):
            out.append((tuple((x, ch) for x, (ch, _) in zip(toks, combo)),
                        w * math.prod((pw for _, pw in combo), start=Fraction(1))))
    return out


def _normalise(r, fallback):
    s = sum(r)
    return [x / s for x in r] if s > 0 else list(fallback)


def walk(inst, rule, cands, prefix, mass, out, leaf_row="own", memo=None):
    """The verifier's walk on one drafted tree, written from the papers' definitions:
    SpecInfer (Miao et al., ASPLOS 2024) tries every child in turn (repeats included) and merges
    the children that carry the accepted token; RRS without replacement (Jeon et al., arXiv
    2402.14160) also drops each rejected token from q; the top-k rule accepts c_j with
    probability p'(c_j) and removes it on rejection; both skip a token already tried (equal-token
    children are one node). ``leaf_row="parent"`` plants a bug: at a
    childless node the bonus token comes from the parent's row. ``memo`` (a dict) keeps the walk
    below each (candidates, prefix) at mass 1: drafted trees that share a subtree reuse it, the
    same exact sums (mass times a rational law)."""
    p = list(inst.target.conditional(prefix))
    if not cands:
        row = p if leaf_row == "own" or not prefix else list(inst.target.conditional(prefix[:-1]))
        for y, py in enumerate(row):
            out[prefix + (y,)] = out.get(prefix + (y,), 0) + mass * py
        return
    q = list(inst.draft.conditional(prefix))
    r, qc, survive, tried = p, q, Fraction(1), set()
    for t, _ in cands:
        if rule != "specinfer":  # rules without replacement skip a repeated token
            if t in tried:
                continue
            tried.add(t)
        if rule == "topk":
            a = r[t]
        else:
            a = min(Fraction(1), r[t] / qc[t])
        if a:
            merged = tuple(c for x, ch in cands if x == t for c in ch)
            if memo is None:
                walk(inst, rule, merged, prefix + (t,), mass * survive * a, out, leaf_row)
            else:
                _add(out, mass * survive * a,
                     _walk_law(inst, rule, merged, prefix + (t,), leaf_row, memo))
        survive *= 1 - a
        if rule == "topk":
            r = _normalise([0 if x == t else v for x, v in enumerate(r)], r)
        else:
            r = _normalise([max(a_ - b_, 0) for a_, b_ in zip(r, qc)], r)
            if rule == "specinfer-norep":
                qc = _normalise([0 if x == t else v for x, v in enumerate(qc)], [0] * len(qc))
    for y, ry in enumerate(r):
        out[prefix + (y,)] = out.get(prefix + (y,), 0) + mass * survive * ry


def _walk_law(inst, rule, cands, prefix, leaf_row, memo):
    """The blocks emitted by `walk` below (cands, prefix) at mass 1, computed once per memo."""
    key = (cands, prefix)
    law = memo.get(key)
    if law is None:
        law = memo[key] = {}
        walk(inst, rule, cands, prefix, Fraction(1), law, leaf_row, memo)
    return law


def _add(out, mass, law):
    for block, w in law.items():
        out[block] = out.get(block, 0) + mass * w


def brute(inst, rule, shape, drafting, leaf_row="own"):
    """(tau pmf, law of the emitted block extended by the target to D + 1 tokens)."""
    D, V = shape.height, inst.vocab_size
    blocks: dict = {}
    memo: dict = {}
    for children, w in drafted(inst, shape, drafting):
        walk(inst, rule, children, (), w, blocks, leaf_row, memo)
    pmf = [Fraction(0)] * (D + 1)
    law = [Fraction(0)] * V ** (D + 1)
    for block, m in blocks.items():
        pmf[len(block) - 1] += m
        tails = itertools.product(range(V), repeat=D + 1 - len(block))
        for tail in tails:
            seq, w = block, m
            for x in tail:
                w *= inst.target.conditional(seq)[x]
                seq = seq + (x,)
            law[sum(x * V ** (D - i) for i, x in enumerate(seq))] += w
    return pmf, law


def target(inst, D):
    V = inst.vocab_size
    law = []
    for seq in itertools.product(range(V), repeat=D + 1):
        law.append(math.prod((inst.target.conditional(seq[:i])[x] for i, x in enumerate(seq)),
                             start=Fraction(1)))
    return law


# ----------------------------------------------------------------------------- shapes


def test_every_form_gives_the_same_uneven_tree():
    t = shape_from_parents([0, 1, 2, 1, 0])
    assert (t.height, t.paths, t.n_drafted, t.uniform) == (3, 3, 5, False)
    assert t.leaf_depths == (3, 2, 1) and t.branching() is None
    assert t.leaf_nodes.tolist() == [[1, 2, 3], [1, 4, -1], [5, -1, -1]]
    assert tree_shape({"parents": [0, 1, 2, 1, 0]}) == t == tree_shape({"parents": "0,1,2,1,0"})
    assert tree_shape([[0], [1], [0, 0], [0, 1], [0, 0, 0]]) == t
    assert tree_shape({"choices": [[0, 0, 0], [1], [0, 1], [0], [0, 0]]}) == t  # any order
    g = StandIn([("r", "a"), ("r", "b"), ("a", "a1"), ("a", "a2"), ("a1", "a11")])
    assert tree_shape(g) == t
    assert t.describe() == "parents 0,1,2,1,0" and tree_shape({"parents": t.parents}) == t
    # parent lists need not be in pre-order: children keep the order of their ids
    assert shape_from_parents([0, 3, 1]) == tree_shape((1, 1, 1))
    assert tree_shape({"branching": [2, 1]}) == tree_shape((2, 1))


def test_networkx_uneven_graph_if_importable():
    nx = pytest.importorskip("networkx")
    g = nx.DiGraph([(0, 1), (0, 2), (1, 3)])
    assert tree_shape(g) == shape_from_parents([0, 1, 0])


def test_regular_trees_keep_branching_and_uneven_do_not():
    assert tree_shape((3, 2, 1)).uniform and tree_shape((3, 2, 1)).describe() == "3,2,1"
    # the root's children have 1 and 0 children: not the branching (2, 1)
    t = shape_from_parents([0, 1, 0])
    assert t.branching() is None and t.describe() == "parents 0,1,0"
    # all leaves at depth 2 but irregular: a parent list, still uniform
    irregular = shape_from_parents([0, 0, 1, 1, 2])
    assert irregular.uniform and irregular.branching() is None


@pytest.mark.parametrize("bad,needle", [
    ([[0], [2]], "ranks 0..b-1"), ([[0, 0]], "without its parent"), ([[0], [0]], "twice"),
    ([[]], "empty entry"), ([[0], [-1]], "negative"), ([[0], ["a"]], "integers"),
    ({"parents": [2, 1]}, "not connected"), ({"parents": [0, 1, 9]}, "node ids 0..3"),
    ({"parents": [1]}, "not the node itself"), ({"parents": "0,x"}, "comma-separated"),
    ({"parents": []}, "at least one"), ({"x": [1]}, "exactly one key"),
    ({"parents": [0.5]}, "integers"), ({"branching": [[1]]}, "positive integers"),
])
def test_bad_uneven_forms_one_line(bad, needle):
    with pytest.raises(SpectheoryError, match=needle) as e:
        tree_shape(bad)
    assert "\n" not in str(e.value)


def test_size_limit_on_parent_lists():
    with pytest.raises(SpectheoryError, match="at most 100,000"):
        shape_from_parents([0] * 100_001)


# ----------------------------------------------------------------------------- exact laws


@pytest.mark.parametrize("name", sorted(UNEVEN))
@pytest.mark.parametrize("rule,drafting", HOME)
def test_node_route_equals_brute_force_and_is_lossless(name, rule, drafting):
    shape = shape_from_parents(UNEVEN[name])
    for seed in (1, 2):
        inst = rational(seed)
        res = analyze_tree(inst, rule, shape, drafting)
        assert res.extra["route"] == "nodes" and res.block_length == shape.height
        pmf, law = brute(inst, rule, shape, drafting)
        assert res.tau_pmf == pmf, (name, rule, seed)
        assert list(res.output_law) == law
        assert res.block_efficiency == 1 + sum(i * v for i, v in enumerate(pmf))
        assert law == target(inst, shape.height)  # lossless, checked without the engine
        rep = check_tree_lossless(rule, inst, shape, drafting)
        assert rep.lossless and rep.tv == 0 and rep.exact


def test_random_uneven_trees_against_brute_force():
    """Random parent lists (node i's parent uniform among 0..i-1; fixed seeds), each rule under
    its own scheme, on a fresh prefix-dependent instance: equal laws, lossless."""
    import numpy as np

    rng = np.random.default_rng(20240611)
    seen_uneven = 0
    for trial in range(8):
        E = int(rng.integers(3, 6))
        parents = [int(rng.integers(0, i)) for i in range(1, E + 1)]
        shape = shape_from_parents(parents)
        seen_uneven += not shape.uniform
        inst = rational(10 + trial, V=4)
        for rule, drafting in HOME:
            res = analyze_tree(inst, rule, shape, drafting)
            pmf, law = brute(inst, rule, shape, drafting)
            assert res.tau_pmf == pmf and list(res.output_law) == law, (parents, rule)
            assert law == target(inst, shape.height)
    assert seen_uneven >= 5


@pytest.mark.parametrize("rule,drafting", [("topk", "iid"), ("topk", "norep"),
                                           ("specinfer-norep", "iid")])
def test_rules_off_their_home_scheme_on_uneven_trees(rule, drafting):
    """The top-k rule samples Y ~ p(.|u) and descends when Y was drafted, so it is lossless
    under every scheme; RRS without replacement on i.i.d. children (repeats skipped) is lossless
    on every instance tested. Both against the brute force, exactly."""
    for name in ("leaf-first", "three-deep", "wide"):
        shape = shape_from_parents(UNEVEN[name])
        inst = rational(2)
        res = analyze_tree(inst, rule, shape, drafting)
        pmf, law = brute(inst, rule, shape, drafting)
        assert res.tau_pmf == pmf and list(res.output_law) == law
        assert law == target(inst, shape.height)


def test_planted_bug_raw_q_on_topk_children_is_caught():
    """RRS without replacement reads q; on deterministic top-k children the draft law is a
    point mass, so handing it the raw q (rows='raw') is lossy on an uneven tree too."""
    shape = shape_from_parents(UNEVEN["three-deep"])
    inst = rational(1)
    rep = check_tree_lossless("specinfer-norep", inst, shape, "topk", route="nodes", rows="raw")
    assert not rep.lossless and rep.tv > 0
    res = analyze_tree(inst, "specinfer-norep", shape, "topk", route="nodes", rows="raw")
    pmf, law = brute(inst, "specinfer-norep", shape, "topk")
    assert res.tau_pmf == pmf and list(res.output_law) == law
    assert law != target(inst, shape.height)


def test_tau_is_bounded_by_the_leaf_depth():
    """A tree whose only depth-3 node sits below the first child, beside two leaves at depth 1:
    the walk reaches tau = 3 only along that path (route = brute force for the three rules), and
    under the top-k rule with probability exactly p(x1 x2 x3) of the top-1 chain."""
    inst = rational(2)
    shape = shape_from_parents([0, 1, 2, 0, 0])  # root: [a -> a1 -> a11, b, c]
    for rule, drafting in HOME:
        res = analyze_tree(inst, rule, shape, drafting)
        pmf, law = brute(inst, rule, shape, drafting)
        assert res.tau_pmf == pmf and sum(pmf) == 1
    # topk: tau = 3 iff the walk accepts the chain of top-1 tokens, each with probability p
    res = analyze_tree(inst, "topk", shape, "topk")
    x = []
    for _ in range(3):
        q = list(inst.draft.conditional(tuple(x)))
        x.append(max(range(3), key=lambda t: (q[t], -t)))
    p3 = math.prod((inst.target.conditional(tuple(x[:i]))[x[i]] for i in range(3)),
                   start=Fraction(1))
    assert res.tau_pmf[3] == p3 and p3 > 0


@pytest.mark.parametrize("name", ["three-deep", "wide"])
def test_specinfer_fast_step_equals_tuple_step_on_uneven_trees(name):
    shape = shape_from_parents(UNEVEN[name])
    inst = rational(3)
    D = shape.height
    ql, pl = levels(inst.draft, 0, D, True), levels(inst.target, 0, D + 1, True)
    a = trees.tree_block_law_nodes("specinfer", shape, ql, pl, 3, "iid", fast=True)
    b = trees.tree_block_law_nodes("specinfer", shape, ql, pl, 3, "iid", fast=False)
    assert list(a.tau_pmf[0]) == list(b.tau_pmf[0])
    assert all(list(x) == list(y) for x, y in zip(a.emitted[1:], b.emitted[1:]))


def test_topk_closed_form_on_a_medusa_style_tree():
    """Under the top-k rule every drafted node is reached with the target probability of its
    prefix, so E[tau] = sum over drafted nodes v of p(v) (the top-k tokens of q at each node)."""
    choices = [[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0], [0, 0, 1], [0, 1, 0]]
    shape = tree_shape(choices)
    for seed in (1, 5, 7):
        inst = random_instance(4, 3, seed, denominator=12)
        res = analyze_tree(inst, "topk", shape, "topk")
        total = Fraction(0)
        for c in choices:
            prefix = []
            for r in c:
                q = list(inst.draft.conditional(tuple(prefix)))
                prefix.append(sorted(range(4), key=lambda x: (-q[x], x))[r])
            total += math.prod((inst.target.conditional(tuple(prefix[:i]))[prefix[i]]
                                for i in range(len(prefix))), start=Fraction(1))
        assert res.expected_accepted == total and res.tv_to_target == 0


def test_norep_surplus_children_are_not_drafted():
    """q(.|u) with fewer positive tokens than u has children: the surplus children (and their
    subtrees, whatever their shape) are not drafted; route and brute force agree, lossless."""
    inst = make_instance("onehot_draft", 3, 3, 0, denominator=6)
    for parents in ([0, 0, 2], [0, 1, 0, 3]):
        shape = shape_from_parents(parents)
        res = analyze_tree(inst, "specinfer-norep", shape, "norep")
        pmf, law = brute(inst, "specinfer-norep", shape, "norep")
        assert res.tau_pmf == pmf and list(res.output_law) == law and res.tv_to_target == 0


def test_float_mode_matches_exact():
    shape = shape_from_parents(UNEVEN["three-deep"])
    inst = rational(6)
    for rule, drafting in HOME:
        e = analyze_tree(inst, rule, shape, drafting)
        f = analyze_tree(inst.to_float(), rule, shape, drafting)
        assert abs(f.block_efficiency - float(e.block_efficiency)) < 1e-12
        assert f.tv_to_target < 1e-12


def test_planted_bug_leaf_takes_parent_row_is_caught(monkeypatch):
    """A correction at a childless node taken from its parent's row p(.|parent) instead of
    p(.|u): lossy, and exactly the brute force with the same mistake."""
    def parent_row_leaf(R, idx, d, p_levels, V, tau_pmf, emitted):
        tau_pmf[0, d] = tau_pmf[0, d] + sum(R)
        rows = p_levels[d - 1][idx // V]
        trees.Bk.index_add_rows(emitted[d], idx, trees.Bk.expand_dims(R, 1) * rows)

    shape = shape_from_parents(UNEVEN["three-deep"])
    inst = rational(1)
    good = analyze_tree(inst, "specinfer", shape, "iid")
    monkeypatch.setattr(trees, "_leaf_step", parent_row_leaf)
    for rule, drafting in HOME:
        rep = check_tree_lossless(rule, inst, shape, drafting)
        assert not rep.lossless and rep.tv > 0 and rep.offending is not None
        res = analyze_tree(inst, rule, shape, drafting)
        pmf, law = brute(inst, rule, shape, drafting, leaf_row="parent")
        assert res.tau_pmf == pmf and list(res.output_law) == law
        assert law != brute(inst, rule, shape, drafting)[1]
    bad = analyze_tree(inst, "specinfer", shape, "iid")
    assert bad.tau_pmf == good.tau_pmf and bad.output_law.tolist() != good.output_law.tolist()


def test_planted_bug_without_merging_is_caught():
    """SpecInfer's brute force without merging equal-token children (only the accepted child's
    subtree is kept) differs from the node route on a tree where a leaf precedes a deeper
    sibling: the comparison has the power to see a merge bug."""
    shape = shape_from_parents(UNEVEN["leaf-first"])
    inst = rational(2)
    res = analyze_tree(inst, "specinfer", shape, "iid")
    blocks: dict = {}
    for children, w in drafted(inst, shape, "iid"):
        walk_first_only(inst, children, (), w, blocks)
    pmf = [Fraction(0)] * (shape.height + 1)
    for block, m in blocks.items():
        pmf[len(block) - 1] += m
    assert sum(pmf) == 1 and pmf != res.tau_pmf


def walk_first_only(inst, cands, prefix, mass, out):
    p = list(inst.target.conditional(prefix))
    if not cands:
        for y, py in enumerate(p):
            out[prefix + (y,)] = out.get(prefix + (y,), 0) + mass * py
        return
    q = list(inst.draft.conditional(prefix))
    r, survive = p, Fraction(1)
    for t, ch in cands:
        a = min(Fraction(1), r[t] / q[t])
        if a:
            walk_first_only(inst, ch, prefix + (t,), mass * survive * a, out)
        survive *= 1 - a
        r = _normalise([max(a_ - b_, 0) for a_, b_ in zip(r, q)], r)
    for y, ry in enumerate(r):
        out[prefix + (y,)] = out.get(prefix + (y,), 0) + mass * survive * ry


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("verifier,route", [("traversal-tree", "auto"), ("block-first", "auto"),
                                            ("specinfer", "enumerate"), ("gbv", "auto")])
def test_enumerate_route_refuses_uneven_trees(verifier, route):
    shape = shape_from_parents(UNEVEN["deep-first"])
    with pytest.raises(SpectheoryError, match="node route") as e:
        analyze_tree(rational(1), verifier, shape, "iid", route=route)
    assert "depths 1,2" in str(e.value) and "\n" not in str(e.value)
    inst = rational(1)
    ql, pl = levels(inst.draft, 0, 2, True), levels(inst.target, 0, 3, True)
    with pytest.raises(SpectheoryError, match="padding"):
        tree_block_law_enumerate(verifier, shape, ql, pl, 3, "iid")


def test_node_route_work_counts_uneven_trees():
    shape = shape_from_parents(UNEVEN["wide"])
    assert 0 < node_route_work(shape, 3, "topk") <= node_route_work(shape, 3, "iid")
    with pytest.raises(SpectheoryError, match="exceed"):
        analyze_tree(random_instance(8, 3, 0), "specinfer-norep", shape, "norep",
                     max_sequences=100)


# ----------------------------------------------------------------------------- the tree LP


def test_lp_topk_optimum_is_the_sum_of_target_prefix_probabilities():
    """Drafting top-k is deterministic, so any valid verifier passes through a drafted node v
    with probability at most p(v) (its output starts with v with probability p(v)): the optimum
    E[tau + 1] is 1 + sum_v p(v), which the top-k rule attains, on an uneven tree too."""
    from spectheory.lp.tree import tree_lp

    choices = [[0], [1], [0, 0], [0, 1], [0, 0, 0]]
    for seed in (1, 2):
        inst = random_instance(3, 3, seed, denominator=12)
        total = Fraction(1)
        for c in choices:
            prefix = []
            for r in c:
                q = list(inst.draft.conditional(tuple(prefix)))
                prefix.append(sorted(range(3), key=lambda x: (-q[x], x))[r])
            total += math.prod((inst.target.conditional(tuple(prefix[:i]))[prefix[i]]
                                for i in range(len(prefix))), start=Fraction(1))
        opt = tree_lp(inst, choices, "topk", exact=True)
        assert opt.optimum == total == analyze_tree(inst, "topk", choices).block_efficiency


@pytest.mark.parametrize("drafting", ["iid", "norep"])
def test_lp_uneven_tree_between_its_subtree_and_supertree(drafting):
    """Adding a drafted node (last among its siblings) leaves the other nodes' joint law as it
    was, and a verifier may ignore the new node, so the optimum cannot drop: chain (1, 1) <=
    uneven [a -> a1, b] <= (2, 1). Strict on this instance: the short leaf b is worth something
    and a padded b -> b1 would be worth more (padding changes the answer). The node rule of the
    scheme stays below the uneven optimum."""
    from spectheory.lp.tree import tree_lp

    inst = random_instance(3, 2, 1, denominator=12)
    uneven = {"parents": [0, 1, 0]}
    lo = tree_lp(inst, (1, 1), drafting, exact=True).optimum
    mid = tree_lp(inst, uneven, drafting, exact=True)
    hi = tree_lp(inst, (2, 1), drafting, exact=True).optimum
    assert mid.details["certificate"] in ("rounded", "sympy")
    assert lo < mid.optimum < hi
    rule = {"iid": "specinfer", "norep": "specinfer-norep"}[drafting]
    assert analyze_tree(inst, rule, uneven, drafting).block_efficiency < mid.optimum


def test_lp_outcomes_of_an_uneven_tree():
    from spectheory.lp.tree import tree_outcomes

    inst = random_instance(3, 2, 3, denominator=12)
    for d in ("iid", "norep", "topk"):
        combos, lengths, prob = tree_outcomes(inst, {"parents": [0, 1, 0]}, d, exact=True,
                                              with_lengths=True)
        assert sum(prob) == 1 and set(lengths.reshape(-1).tolist()) <= {1, 2}
    with pytest.raises(SpectheoryError, match="with_lengths"):
        tree_outcomes(inst, {"parents": [0, 1, 0]}, "iid")


def test_lp_drops_norep_surplus_children_like_the_node_route():
    """q(.|root) with one positive token: the root's second child is not drafted, whatever its
    subtree, so the LP equals the LP of the tree without it (a chain), and the node route's
    specinfer-norep equals specinfer-norep on that chain."""
    from spectheory.lp.tree import tree_lp

    inst = make_instance("onehot_draft", 3, 2, 0, denominator=6)
    assert list(inst.draft.conditional(())).count(0) == 2
    for parents, pruned in (([0, 0, 2], (1,)), ([0, 1, 0], (1, 1)), ([0, 1, 0, 3], (1, 1))):
        opt = tree_lp(inst, {"parents": parents}, "norep", exact=True).optimum
        assert opt == tree_lp(inst, pruned, "norep", exact=True).optimum
        assert analyze_tree(inst, "specinfer-norep", {"parents": parents}, "norep"
                            ).block_efficiency == analyze_tree(inst, "specinfer-norep", pruned,
                                                               "norep").block_efficiency
