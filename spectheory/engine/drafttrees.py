"""Draft trees: shapes, drafting schemes, and the exact law of a verifier on a drafted tree.

A **tree shape** is the rooted tree of drafted positions
([`tree_shape`][spectheory.engine.drafttrees.tree_shape]). It is given as branching factors per depth,
``(b_1, ..., b_D)`` (the root has b_1 children, each depth-1 node b_2, ...; K = prod b_d
root-to-leaf paths); as a directed graph (any object with ``nodes`` and ``successors``, such as a
``networkx.DiGraph``; children in ``successors`` order); as a Medusa / EAGLE choices list of
child-rank paths (``[[0], [1], [0, 0]]``, Cai et al., arXiv 2401.10774; Li et al., arXiv
2401.15077); or as a parent list ``{"parents": [0, 0, 1]}`` (the parent of drafted node 1, 2, ...; 0
is the root). Leaves may sit at different depths, as in EAGLE-2's dynamic trees (Li et al., arXiv
2406.16858), Medusa's sparse trees and SpecInfer's token trees (Miao et al., ASPLOS 2024). The block
length D is the deepest leaf's depth (an instance's tables beyond its own depth use the model's
order-D Markov extension); a walk that stops at a node u (a leaf, or a node whose children were all
rejected) emits |u| + 1 tokens, so tau = |u| is at most the depth of the leaves below u.

A **drafting scheme** says how the b children of a node u get their tokens from q(.|u):

* ``iid``: b i.i.d. draws from q(.|u) (repeats allowed; SpecInfer, Miao et al., ASPLOS 2024);
* ``norep``: b draws without replacement, each from q(.|u) renormalised to the unused tokens (Jeon
  et al., arXiv 2402.14160); when q(.|u) has only m < b positive tokens the surplus children are not
  drafted (fewer children). The node route and the LP ([`spectheory.lp.tree`][spectheory.lp.tree])
  drop them with their subtrees; the enumerate route represents them as copies of the first child
  with its whole subtree (the same drafted nodes) and refuses a surplus child whose subtree differs
  in shape;
* ``topk``: deterministic, the b most probable tokens of q(.|u), ties to the smaller id (EAGLE, Li
  et al., arXiv 2401.15077; Medusa, Cai et al., arXiv 2401.10774). The draft law is a point mass, so
  a verifier must not be handed q: under ``topk`` every verifier gets, on path k at depth i, q
  replaced by the point mass on path k's own next token (the law of that path, which is what makes
  ``block-first`` exact), and the node rule ``topk``
  ([`spectheory.verifiers.topk`][spectheory.verifiers.topk]) ignores q (it is RRS without
  replacement with q replaced by point masses in candidate order). ``rows="raw"`` hands the raw q
  instead (a planted bug).

**Representation to verifiers.** The tree is handed to the existing K-path verifiers as its K leaf
paths ``drafts [B, K, D]`` in leaf (depth-first) order; paths through one node share its prefix and
carry identical rows there, so the K-path protocol of [`spectheory.law`][spectheory.law] applies
unchanged (a K-path verifier merges equal prefixes into one token-tree node, as SpecInfer does).
That protocol gives every path the same length, so it holds trees whose leaves are all at depth D
only: padding a shorter path would hand the verifier tokens that were never drafted, which it may
accept (a different law). On an uneven tree the enumerate route therefore refuses
([`refuse_uneven`][spectheory.engine.drafttrees.refuse_uneven]) and the node route runs the node-recursive
rules.

**Exact routes.**

* ``enumerate`` ([`tree_block_law_enumerate`][spectheory.engine.drafttrees.tree_block_law_enumerate]): every
  joint outcome of the E edge tokens (V**E outcomes, or the one outcome of ``topk``), in chunks,
  float64 torch or exact Fractions; any K-path verifier. Outcome probabilities: iid prod_e q(t_e |
  parent prefix); norep the sequential without-replacement product per node; topk 1 on the top-k
  outcome.
* ``nodes`` ([`tree_block_law_nodes`][spectheory.engine.drafttrees.tree_block_law_nodes]): node-recursive
  verifiers (the walk accepts one child of the current node or stops: ``specinfer``,
  ``specinfer-norep``, ``topk``). The children's tokens at a node are drawn independently of
  everything below, and each child's subtree is an independent copy, so with R(u, s) the probability
  that the walk reaches prefix u with subtree shape s,

      P(tau = |u|, Y = y) += R(u, s) sum_{t} P(t | u) none(t) corr_t(y),
      R(u c, s') += R(u, s) sum_{t} P(t | u) sum_{j : t_j = c} accept_j(t),

  over candidate tuples t of the root of s (V**b of them), where s' is the merge of the subtrees of
  the children with token c (their children concatenated in path order: equal tokens are one
  token-tree node, as in [`node_recursive_law`][spectheory.verifiers.specinfer.node_recursive_law];
  a leaf merged with a deeper sibling is that sibling). At a childless node (s = (), at any depth)
  the walk stops: P(tau = |u|, Y = y) += R(u, ()) p(y | u), the bonus token from the target row at u
  itself, which keeps every lossless node rule lossless on uneven trees. The work is sum_d V**d x
  (tuples at depth d): exponential in the branching factor, not in the tree size. Under ``norep``
  only the first child with a token is kept (surplus copies are skipped by the rules of this route
  that skip repeated tokens; the route refuses other rules under ``norep``).

**Leaf paths are not the whole tree.** The leaf-path form shows a node's child once per leaf
below it, so it cannot tell one child with two leaves from two children that drew the same token.
Verifiers that skip repeated tokens at a node (``specinfer-norep``, ``topk``) and those that merge
equal prefixes into one node (``traversal-tree``) see the tree either way; SpecInfer with
replacement counts every path as a trial (a repeat after a rejection is rejected surely but still
updates the residual), so on a tree whose branching node has a child with several leaves below it
the enumerate route computes "SpecInfer on the flattened leaf paths", which is lossy (TV 1/12 on
the tree (1, 2) of ``random_instance(3, 2, 0, denominator=12)``; a test), while the node route
runs SpecInfer on the tree (one trial per child), which is lossless. The two coincide on K paths
(the tree (K, 1, ..., 1)), where the tests cross-check them; ``analyze_tree`` takes the node
route for ``specinfer`` by default.

Both routes give a [`BlockLaw`][spectheory.engine.perdraft.BlockLaw]; the output law, its TV to the target and
the lossless verdict are those of [`spectheory.engine.analysis`][spectheory.engine.analysis]. The tests check the two
routes agree exactly (rationals) on small trees for ``specinfer-norep`` and ``topk`` (every scheme)
and for ``specinfer`` on K paths; SpecInfer's subset step against its V**n-tuple step on any tree;
and, on uneven trees, the node route against a brute-force walk over every drafted token assignment
(tau pmf and output law equal in rationals; lossless for ``specinfer`` / iid, ``specinfer-norep`` /
norep and ``topk`` / topk on prefix-dependent instances; a correction taken from the parent's row at
a childless node caught).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from ..runtime._lazy import torch

from ..runtime import backend as Bk
from ..runtime import limits
from ..runtime.errors import SizeLimitError, SpectheoryError, call_user
from ..runtime.sizes import check_size
from ..inputs.instances import Instance
from ..law import validate_law
from ..registry import TREE_DRAFTING, VerifierSpec, get_verifier, registered
from .joint import draft_rows
from .perdraft import BlockLaw
from .seqtree import levels, sequence_tokens

#: Drafting schemes of a tree (module doc): `spectheory.registry.TREE_DRAFTING`, which specs'
#: ``tree_drafting`` is checked against.
#: Exact routes of [`analyze_tree`][spectheory.engine.analysis.analyze_tree].
ROUTES = ("auto", "enumerate", "nodes")
#: Joint outcomes per chunk in exact mode; elements of one [n, K, D+1, V] array in float mode.
EXACT_CHUNK = 1024
CHUNK_ELEMENTS = 2**18


# ----------------------------------------------------------------------------- shapes


#: Largest number of drafted nodes a shape may have (any form).
MAX_TREE_NODES = 100_000
#: Deepest tree a shape may have (any form), checked before any recursion over its levels: the
#: analysis enumerates V^(D+1) >= 2^(D+1) sequences, over every size limit (at most 10^15) from
#: D = 50 on, so a deeper tree could never be analysed.
MAX_TREE_DEPTH = 64


@dataclass(frozen=True)
class TreeShape:
    """A rooted tree of drafted positions, nodes numbered in depth-first pre-order (root 0).

    ``children[u]`` are the child node ids of u in order; ``parent[u]`` (-1 for the root),
    ``depth[u]``; ``leaves`` in depth-first order (K of them) and ``leaf_depths`` their depths;
    ``leaf_nodes[k]`` the node ids on leaf path k at depths 1..D, padded with -1 past the leaf on
    an uneven tree. ``height`` D is the deepest leaf's depth (the block length); ``uniform`` says
    whether every leaf is at depth D. ``sig(u)`` is the shape of u's subtree as nested tuples.
    """

    children: tuple

    def __post_init__(self):
        if not self.children or not isinstance(self.children, tuple):
            raise SpectheoryError("a tree shape needs at least a root")
        n = len(self.children)
        seen = [False] * n
        for kids in self.children:
            for c in kids:
                if not 0 < c < n or seen[c]:
                    raise SpectheoryError("a tree shape's child lists must name every non-root "
                                          "node exactly once")
                seen[c] = True
        if not self.children[0]:
            raise SpectheoryError("a tree shape needs at least one drafted node")
        order = [0]
        for u in order:
            order.extend(self.children[u])
        if len(order) != n:
            raise SpectheoryError("a tree shape must be connected")

    @property
    def n_nodes(self) -> int:
        """Nodes including the root."""
        return len(self.children)

    @property
    def n_drafted(self) -> int:
        """Drafted tokens (edges) E = nodes - 1."""
        return len(self.children) - 1

    @property
    def parent(self) -> tuple:
        par = [-1] * self.n_nodes
        for u, kids in enumerate(self.children):
            for c in kids:
                par[c] = u
        return tuple(par)

    @property
    def depth(self) -> tuple:
        d = [0] * self.n_nodes
        for u in self.preorder():
            for c in self.children[u]:
                d[c] = d[u] + 1
        return tuple(d)

    @property
    def height(self) -> int:
        """Depth D of the deepest leaf (the block length)."""
        return max(self.depth)

    def preorder(self) -> list:
        out, stack = [], [0]
        while stack:
            u = stack.pop()
            out.append(u)
            stack.extend(reversed(self.children[u]))
        return out

    @property
    def leaves(self) -> tuple:
        return tuple(u for u in self.preorder() if not self.children[u])

    @property
    def leaf_depths(self) -> tuple:
        """Depth of each leaf, in leaf order."""
        depth = self.depth
        return tuple(depth[u] for u in self.leaves)

    @property
    def uniform(self) -> bool:
        """Whether every leaf is at the same depth D (the K leaf paths all have length D)."""
        return len(set(self.leaf_depths)) == 1

    @property
    def paths(self) -> int:
        """K, the number of root-to-leaf paths."""
        return len(self.leaves)

    @property
    def leaf_nodes(self) -> np.ndarray:
        """[K, D] node ids along each leaf path (depths 1..D; -1 past a shallower leaf)."""
        par, D = self.parent, self.height
        rows = []
        for leaf in self.leaves:
            path, u = [], leaf
            while u != 0:
                path.append(u)
                u = par[u]
            rows.append(path[::-1] + [-1] * (D - len(path)))
        return np.array(rows, dtype=np.int64)

    @property
    def parents(self) -> tuple:
        """The parent list (parent of drafted node 1, 2, ..., E; the root is 0), the form
        [`tree_shape`][spectheory.engine.drafttrees.tree_shape] reads as ``{"parents": [...]}`` and
        ``spectheory tree --parents``."""
        return self.parent[1:]

    def sig(self, u: int = 0) -> tuple:
        return tuple(self.sig(c) for c in self.children[u])

    def branching(self) -> tuple | None:
        """(b_1, ..., b_D) if every node at each depth below D has the same number of children
        (so every leaf is at depth D), else None."""
        depth, D = self.depth, self.height
        by_depth: dict = {}
        for u, kids in enumerate(self.children):
            if depth[u] < D:
                by_depth.setdefault(depth[u], set()).add(len(kids))
        if any(len(v) != 1 or 0 in v for v in by_depth.values()):
            return None
        return tuple(next(iter(by_depth[d])) for d in range(D))

    def describe(self) -> str:
        """Branching factors ("3,2,1") for a regular tree, else its parent list
        ("parents 0,0,1"; up to 40 drafted nodes) or its size."""
        b = self.branching()
        if b:
            return ",".join(map(str, b))
        if self.n_drafted <= 40:
            return "parents " + ",".join(map(str, self.parents))
        depths = self.leaf_depths
        return f"{self.n_drafted}-node tree (leaves at depths {min(depths)}-{max(depths)})"


def _from_sig(sig: tuple) -> TreeShape:
    children: list = []

    def build(s):
        u = len(children)
        children.append(None)
        children[u] = tuple(build(c) for c in s)
        return u

    build(sig)
    return TreeShape(tuple(children))


def _branching_sig(b: tuple) -> tuple:
    sig: tuple = ()
    for k in reversed(b):
        sig = (sig,) * k
    return sig


def tree_shape(shape) -> TreeShape:
    """A [`TreeShape`][spectheory.engine.drafttrees.TreeShape] from any of these forms.

    * branching factors: a sequence of positive ints or a string ``"3,2,1"`` (every leaf at
      depth D = its length);
    * a directed graph with ``nodes`` and ``successors`` (e.g. ``networkx.DiGraph``; children in
      ``successors`` order);
    * a choices list, the tree format of Medusa (``medusa_choices``, Cai et al., arXiv
      2401.10774) and EAGLE (``tree_choices``, Li et al., arXiv 2401.15077): a sequence of
      sequences of child ranks, one per drafted node, e.g. ``[[0], [1], [0, 0]]`` (the root's
      children of rank 0 and 1, and the rank-0 child of the first); see
      [`shape_from_choices`][spectheory.engine.drafttrees.shape_from_choices];
    * ``{"parents": [...]}``: the parent of drafted node 1, 2, ..., E (the root is 0), e.g.
      ``{"parents": [0, 0, 1]}`` ([`shape_from_parents`][spectheory.engine.drafttrees.shape_from_parents]), or
      ``{"choices": [...]}``, ``{"branching": [...]}``;
    * a TreeShape.

    Leaves may be at different depths (except in the branching form); the block length is the
    deepest leaf's depth.
    """
    if isinstance(shape, TreeShape):
        return shape
    if isinstance(shape, dict):
        if len(shape) != 1 or next(iter(shape)) not in ("parents", "choices", "branching"):
            raise SpectheoryError(f"a tree given as a mapping needs exactly one key of parents, "
                                  f"choices, branching; got {sorted(map(str, shape))}")
        key, value = next(iter(shape.items()))
        if key == "parents":
            return shape_from_parents(value)
        if key == "choices":
            return shape_from_choices(value)
        if isinstance(value, (str, *_BYTES)) or not hasattr(value, "__iter__") or any(
                isinstance(x, (list, tuple)) for x in value):
            raise SpectheoryError("branching factors must be a list of positive integers")
        return tree_shape(tuple(value))
    if isinstance(shape, (set, frozenset)):  # no order: {2, 1} iterates as 1, 2
        raise SpectheoryError("a tree's branching factors are ordered by depth: give a list or a "
                              "tuple, not a set")
    if isinstance(shape, _BYTES):
        raise SpectheoryError(f"a tree is branching factors, a choices list, "
                              f"{{'parents': [...]}} or a graph, not {type(shape).__name__}")
    if isinstance(shape, str):
        text = shape
        if text.count(",") >= MAX_TREE_DEPTH:  # before any list is made from it
            raise SpectheoryError(f"tree {text[:40]!r}... has {text.count(',') + 1:,} branching "
                                  f"factors: at most {MAX_TREE_DEPTH} (the tree's depth)")
        shape = tuple(_decimal_ints(text, "tree", "positive integers (branching factors per "
                                                  "depth, e.g. 3,2,1)"))
    if not isinstance(shape, (list, tuple, np.ndarray)) and _is_graph(shape):
        return _from_graph(shape)
    if not isinstance(shape, (list, tuple, np.ndarray)) and _is_undirected_graph(shape):
        raise SpectheoryError(f"the tree graph is a {type(shape).__name__}, which has no "
                              "direction (its nodes were read as branching factors); give a "
                              "directed graph (networkx.DiGraph) whose edges go from parent to "
                              "child")
    try:
        b = tuple(shape)
    except TypeError:
        raise SpectheoryError(f"a tree shape must be branching factors, a choices list, "
                              f"{{'parents': [...]}} or a graph, not "
                              f"{type(shape).__name__}") from None
    if b and all(isinstance(x, (list, tuple, np.ndarray)) for x in b):
        return shape_from_choices(b)
    if not b or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1
                    for x in b):
        raise SpectheoryError(f"tree {','.join(map(str, b)) or '(empty)'}: branching factors "
                              f"must be positive integers, at least one")
    if len(b) > MAX_TREE_DEPTH:  # the shape is built by recursion over its levels
        raise SpectheoryError(f"tree of {len(b):,} branching factors is {len(b):,} levels deep; "
                              f"at most {MAX_TREE_DEPTH}")
    size = sum(math.prod(b[:d + 1]) for d in range(len(b)))
    if size > MAX_TREE_NODES:
        label = limits.shown(",".join(str(int(x)) if x < 10 ** 18 else limits.human_count(x)
                                      for x in b), 60)  # as typed: 1000,1000, not 1,000,1,000
        raise SpectheoryError(f"tree {label} has {limits.human_count(size)} drafted nodes; at "
                              f"most {MAX_TREE_NODES:,}")
    return _from_sig(_branching_sig(tuple(int(x) for x in b)))


def choices_text(text: str, option: str) -> list:
    """A choices list typed on a command line (``option``, e.g. ``--choices``), parsed as JSON
    once its nesting is known to be at most two levels (a list of lists of child ranks): deeper
    text is refused before the parser recurses (a RecursionError at about 1,000 levels)."""
    import json

    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > 2:
                raise SpectheoryError(f"{option} is nested deeper than a list of lists of child "
                                      "ranks, e.g. [[0],[1],[0,0]]")
        elif ch in "]}":
            depth -= 1
    try:
        choices = json.loads(text)
    except (ValueError, RecursionError):
        raise SpectheoryError(f"{option} {text[:60]!r} is not JSON (a list of lists of child "
                              "ranks, e.g. [[0],[1],[0,0]])") from None
    if not isinstance(choices, list):
        raise SpectheoryError(f"{option} must be a JSON list of lists of child ranks, e.g. "
                              "[[0],[1],[0,0]]")
    return choices


#: Byte strings: never read as a tree (iterating b"2,1" gives the character codes 50, 44, 49).
_BYTES = (bytes, bytearray, memoryview)
#: Most digits of one number in a tree string (a node id or a branching factor is far smaller;
#: refused before a huge integer is made).
_MAX_DIGITS = 30


def _decimal_ints(text: str, what: str, expected: str) -> list:
    """Comma-separated decimal integers in ASCII digits with an optional sign (spaces around
    each allowed). ``int`` alone would also take underscores ("2_0" = 20), other scripts'
    digits ("\u0662" = 2) and inner spaces, each a silent misreading of a typo."""
    out = []
    for piece in text.split(","):
        p = piece.strip(" \t")
        digits = p[1:] if p[:1] in "+-" else p
        if not (digits.isascii() and digits.isdigit()):
            shown = text if len(text) <= 60 else text[:57] + "..."
            raise SpectheoryError(f"{what} {shown!r} must be comma-separated {expected}, in "
                                  f"ASCII digits: {piece[:20]!r} is not one")
        if len(digits.lstrip("0")) > _MAX_DIGITS:
            raise SpectheoryError(f"{what} {text[:20]!r}...: a number of {len(digits):,} digits; "
                                  f"at most {_MAX_DIGITS}")
        out.append(int(p))
    return out


def _is_graph(obj) -> bool:
    """Whether ``obj`` has ``successors`` and ``nodes`` (a user object's attributes are user
    code: what they raise is a UserCodeError naming them)."""
    return call_user(lambda: hasattr(obj, "successors") and hasattr(obj, "nodes"),
                     what=f"the tree graph's {type(obj).__name__} attributes")


def _int_list(values, what: str) -> list:
    if isinstance(values, _BYTES):
        raise SpectheoryError(f"{what} must be a list of integers, not {type(values).__name__}")
    if isinstance(values, str):
        values = _decimal_ints(values, what, "integers")
    try:
        out = list(values)
    except TypeError:
        raise SpectheoryError(f"{what} must be a list of integers, not "
                              f"{type(values).__name__}") from None
    if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in out):
        raise SpectheoryError(f"{what} must hold integers only")
    return [int(x) for x in out]


def shape_from_parents(parents) -> TreeShape:
    """The tree whose drafted node i (1..E) has parent ``parents[i - 1]`` (0 is the root; a list
    or a string ``"0,0,1"``). Children keep the order of their ids. The parent-index form of
    SpecInfer / EAGLE-2 token trees (Miao et al., ASPLOS 2024; Li et al., arXiv 2406.16858),
    numbered from 1 with the root as 0."""
    par = _int_list(parents, "a parent list")
    E = len(par)
    if E == 0:
        raise SpectheoryError("a parent list needs at least one drafted node")
    if E > MAX_TREE_NODES:
        raise SpectheoryError(f"the parent list has {E:,} drafted nodes; at most "
                              f"{MAX_TREE_NODES:,}")
    for i, u in enumerate(par, start=1):
        if not 0 <= u <= E or u == i:
            raise SpectheoryError(f"parent list: node {i} has parent {u}; parents are node ids "
                                  f"0..{E} (0 the root), not the node itself")
    kids: dict = {u: [] for u in range(E + 1)}
    for i, u in enumerate(par, start=1):
        kids[u].append(i)
    return _from_adjacency(list(range(E + 1)), kids, "the parent list")


def shape_from_choices(choices) -> TreeShape:
    """The tree of a Medusa / EAGLE choices list: each entry is a drafted node, given by the
    child ranks along its path from the root (``[0, 1]``: the rank-1 child of the root's rank-0
    child). Every entry's parent path must be listed, no entry twice, and a node's children must
    be ranks 0..b-1 (under ``topk`` drafting the child of rank r is the (r+1)-th most probable
    token, so a gap would be a different tree)."""
    try:
        paths = [tuple(_int_list(c, "a choices entry")) for c in choices]
    except TypeError:
        raise SpectheoryError("a choices list must be a list of lists of child ranks") from None
    if not paths:
        raise SpectheoryError("a choices list needs at least one drafted node")
    if len(paths) > MAX_TREE_NODES:
        raise SpectheoryError(f"the choices list has {len(paths):,} drafted nodes; at most "
                              f"{MAX_TREE_NODES:,}")
    deepest = max(len(c) for c in paths)
    if deepest > MAX_TREE_DEPTH:
        raise SpectheoryError(f"choices list: an entry of {deepest:,} child ranks is a node "
                              f"{deepest:,} levels deep; at most {MAX_TREE_DEPTH}")
    listed = set()
    for c in paths:
        if not c:
            raise SpectheoryError("choices list: an empty entry (the root is implicit)")
        if any(r < 0 for r in c):
            raise SpectheoryError(f"choices list: entry {list(c)} has a negative rank")
        if c in listed:
            raise SpectheoryError(f"choices list: entry {list(c)} is listed twice")
        listed.add(c)
    kids: dict = {(): []}
    for c in sorted(listed, key=lambda c: (len(c), c)):
        if c[:-1] not in kids:
            raise SpectheoryError(f"choices list: entry {list(c)} is listed without its parent "
                                  f"{list(c[:-1])}")
        kids[c[:-1]].append(c)
        kids[c] = []
    for u, cs in kids.items():
        ranks = [c[-1] for c in cs]
        if ranks != list(range(len(ranks))):
            # the first gap: ranks are sorted and distinct, so it lies within the first
            # len(ranks) + 1 (a rank of 10^18 built a set of 10^18 integers)
            missing = min(set(range(len(ranks) + 1)) - set(ranks))
            raise SpectheoryError(f"choices list: {list(u) + [max(ranks)]} is listed without "
                                  f"{list(u) + [missing]}; a node's children must be ranks "
                                  f"0..b-1")
    return _from_adjacency(list(kids), kids, "the choices list")


def _is_undirected_graph(obj) -> bool:
    """Whether ``obj`` is a graph without ``successors`` (``networkx.Graph``: ``nodes``,
    ``edges`` and ``adj``), whose iteration would yield its node labels."""
    return call_user(lambda: all(hasattr(obj, a) for a in ("nodes", "edges", "adj")),
                     what=f"the tree object {type(obj).__name__}")


def _from_graph(g) -> TreeShape:
    name = type(g).__name__
    nodes = call_user(lambda: list(g.nodes), what=f"the tree graph's {name}.nodes")
    if not nodes:
        raise SpectheoryError("the tree graph has no nodes")
    if len(nodes) - 1 > MAX_TREE_NODES:  # before a successor list per node is asked for
        raise SpectheoryError(f"the tree graph has {len(nodes) - 1:,} drafted nodes; at most "
                              f"{MAX_TREE_NODES:,}")

    def build():  # the node objects' __hash__, __eq__ and __repr__ are user code too
        kids = {u: call_user(lambda u=u: list(g.successors(u)),
                             what=f"the tree graph's {name}.successors") for u in nodes}
        return _from_adjacency(nodes, kids, "the tree graph")

    return call_user(build, what=f"the tree graph's {name} nodes (their hash, == or repr)")


def _from_adjacency(nodes: list, kids: dict, what: str) -> TreeShape:
    """Pre-order numbered TreeShape from node keys and their ordered child lists."""
    if len(nodes) - 1 > MAX_TREE_NODES:
        raise SpectheoryError(f"{what} has {len(nodes) - 1:,} drafted nodes; at most "
                              f"{MAX_TREE_NODES:,}")
    indeg = {u: 0 for u in nodes}
    for u in nodes:
        for c in kids[u]:
            if c not in indeg:
                raise SpectheoryError(f"{what} has an edge to {c!r}, not a node")
            indeg[c] += 1
    roots = [u for u in nodes if indeg[u] == 0]
    if len(roots) != 1 or any(v > 1 for v in indeg.values()):
        raise SpectheoryError(f"{what} is not a rooted tree ({len(roots)} nodes without a "
                              f"parent, {sum(v > 1 for v in indeg.values())} with several)")
    ids: dict = {}
    children: list = []
    stack = [roots[0]]
    order = []
    while stack:  # pre-order numbering
        u = stack.pop()
        if u in ids:
            raise SpectheoryError(f"{what} has a cycle")
        ids[u] = len(order)
        order.append(u)
        stack.extend(reversed(kids[u]))
    if len(order) != len(nodes):
        raise SpectheoryError(f"{what} is not connected (or has a cycle)")
    depth = {order[0]: 0}
    for u in order:  # pre-order: a parent comes before its children
        children.append(tuple(ids[c] for c in kids[u]))
        for c in kids[u]:
            depth[c] = depth[u] + 1
            if depth[c] > MAX_TREE_DEPTH:
                raise SpectheoryError(f"{what} has a node {depth[c]} levels deep (node "
                                      f"{ids[c]}); at most {MAX_TREE_DEPTH}")
    return TreeShape(tuple(children))


# ----------------------------------------------------------------------------- verifiers


def tree_verifier(verifier) -> VerifierSpec:
    """The K-path spec of a verifier name (``topk`` included) or object."""
    return get_verifier(verifier, multi_path=True)


def node_rule(spec: VerifierSpec):
    """(rule, skips repeated tokens) of a node-recursive verifier (its declared
    `VerifierSpec.rule`), or None."""
    return None if spec.rule is None else (spec.rule, spec.rule_skips_repeats)


def node_rule_names() -> list:
    """The registered verifiers that declare a node rule (and ``topk``)."""
    return [n for n, s in registered().items() if s.rule is not None] + ["topk"]
#: The drafting scheme under which each tree verifier is designed to run.
HOME_DRAFTING = {"specinfer": "iid", "specinfer-norep": "norep", "topk": "topk",
                 "traversal-tree": "iid", "block-first": "iid"}


def default_drafting(spec: VerifierSpec) -> str:
    """`HOME_DRAFTING`, else the first scheme the verifier declares
    (`VerifierSpec.tree_drafting`), else its K-path default."""
    if spec.name in HOME_DRAFTING:
        return HOME_DRAFTING[spec.name]
    return spec.tree_drafting[0] if spec.tree_drafting else spec.default_drafting


def _check_drafting(drafting, spec: VerifierSpec | None = None):
    """``drafting`` is a tree scheme; a scheme the user did not give (``spec``'s K-path
    default, e.g. spechub's "hub") is named as the verifier's, not as an unknown one."""
    if drafting not in TREE_DRAFTING:
        if spec is not None and drafting == default_drafting(spec):
            raise SpectheoryError(f"verifier {spec.name!r} drafts its paths by {drafting!r}, "
                                  f"which has no tree form; give a tree drafting scheme "
                                  f"({', '.join(TREE_DRAFTING)}: --drafting)")
        raise SpectheoryError(f"unknown tree drafting scheme {drafting!r}; choose from "
                              f"{', '.join(TREE_DRAFTING)}")


def topk_tokens(row, b: int) -> list:
    """The b most probable tokens of a row (ties to the smaller id)."""
    V = len(row)
    if b > V:
        raise SpectheoryError(f"top-k drafting needs at most V = {V} children per node, got {b}")
    vals = [row[x] if isinstance(row[x], Fraction) else float(row[x]) for x in range(V)]
    return sorted(range(V), key=lambda x: (-vals[x], x))[:b]


# ----------------------------------------------------------------------------- enumerate route


def refuse_uneven(spec: VerifierSpec, shape: TreeShape) -> None:
    """Refuse the enumerate route on a tree whose leaves are at different depths.

    K-path verifiers take the leaf paths as ``drafts [B, K, L]``, one length for all. A shorter
    path cannot be padded soundly: the padded positions would be drafted tokens the verifier may
    accept (tau past the leaf, with the padding's rows in the acceptance ratios), a different
    law and a different tree. Node-recursive rules need no padding: at a childless node the walk
    stops and the bonus token is drawn from p(.|u) (the node route)."""
    if not shape.uniform:
        depths = sorted(set(shape.leaf_depths))
        raise SpectheoryError(
            f"tree {shape.describe()} has leaves at depths {','.join(map(str, depths))}: the "
            f"enumerate route hands {spec.name!r} leaf paths of one length [B, K, D], and "
            f"padding the shorter ones would let it accept tokens that were never drafted; "
            f"uneven trees take the node route (route='nodes'): specinfer under iid, "
            f"specinfer-norep under iid or norep, topk under any drafting")


def enumerate_count(shape, V: int, drafting: str) -> int:
    """Joint outcomes the enumerate route visits: V**E (1 under ``topk``)."""
    return 1 if drafting == "topk" else V ** tree_shape(shape).n_drafted


def _topk_outcome(shape: TreeShape, q_levels, V: int):
    tok = [0] * shape.n_nodes
    pidx = [0] * shape.n_nodes
    for u in shape.preorder():
        kids = shape.children[u]
        if not kids:
            continue
        row = q_levels[shape.depth[u]][pidx[u]]
        for c, x in zip(kids, topk_tokens(row, len(kids))):
            tok[c] = x
            pidx[c] = pidx[u] * V + x
    return np.array([tok[1:]], dtype=np.int64)


def _outcome_weight(shape: TreeShape, tok, q_levels, V: int, drafting: str, like,
                    drop: bool = False, ints=None):
    """Probability of joint outcomes tok [n, N] (token of node u in column u; column 0 unused)
    and the prefix index of every node [n, N].

    Under ``norep`` a surplus child (q has fewer positive tokens than its parent has children)
    is not drafted. By default it stands as a copy of the first child with its whole subtree
    (the same drafted nodes; refused when the shapes differ), the form K-path verifiers can be
    handed. With ``drop`` it is dropped with its subtree whatever its shape (the node route's
    law): it takes the first child's token and token 0 below, counted once, and the result has
    a third element, the mask [n] per node of the dropped nodes."""
    if Bk.is_exact(like):
        ints = _integer_levels(q_levels) if ints is None else ints
        if ints is not None:
            return _outcome_weight_exact(shape, tok, ints, V, drafting, drop)
    n, N = tok.shape
    pidx = [None] * N
    pidx[0] = tok[:, 0] * 0
    weight = Bk.full((n,), 1, like)
    depth = shape.depth
    no = Bk.to_int(tok[:, 0] == tok[:, 0]) == 0  # all False
    copy = [no] * N  # node lies in a surplus child's subtree (its tokens are forced)
    for u in shape.preorder():
        kids = shape.children[u]
        if not kids:
            continue
        rows = q_levels[depth[u]][pidx[u]]  # [n, V]
        factor = Bk.full((n,), 1, like)
        if drafting == "iid":
            for c in kids:
                factor = factor * Bk.take_along(rows, tok[:, c].reshape(n, 1), axis=1)[:, 0]
        else:
            m = Bk.sum(Bk.to_int(rows > 0), axis=1)
            used = Bk.zeros_like(rows)
            first = kids[0]
            for j, c in enumerate(kids):
                x = tok[:, c]
                onehot = Bk.one_hot(x, V, rows)
                left = Bk.sum(rows * (1 - used), axis=-1)
                fresh = 1 - Bk.sum(used * onehot, axis=-1)
                prob = Bk.take_along(rows, x.reshape(n, 1), axis=1)[:, 0] * fresh
                w_new = Bk.safe_div(prob, left, Bk.scalar(left, 0))
                if j == 0:
                    factor = factor * w_new
                else:
                    surplus, same = _surplus_child(shape, tok, first, c, j, m, drop, no)
                    w_sur = Bk.where(same, Bk.ones_like(weight), Bk.zeros_like(weight))
                    factor = factor * Bk.where(surplus, w_sur, w_new)
                    copy[c] = surplus
                used = Bk.maximum(used, onehot)
        weight = weight * Bk.where(copy[u], Bk.ones_like(factor), factor)
        for c in kids:
            pidx[c] = pidx[u] * V + tok[:, c]
            copy[c] = copy[c] | copy[u]
    return (weight, pidx, copy) if drop else (weight, pidx)


def _integer_levels(q_levels):
    """`_integer_level` of every level, or None when one is not rational (computed once per
    law: the enumeration reads the levels chunk after chunk)."""
    ints = [_integer_level(level) for level in q_levels]
    return ints if all(x is not None for x in ints) else None


def _integer_level(level):
    """An exact level of rows [P, V] as (integer numerators [P, V] (object), d) with the rows
    = numerators / d, or None when an entry is not an int or a Fraction."""
    flat = level.reshape(-1).tolist()
    d = 1
    for v in flat:
        if not isinstance(v, (int, Fraction)):
            return None
        d = math.lcm(d, v.denominator)
    num = np.empty(len(flat), dtype=object)
    num[:] = [v.numerator * (d // v.denominator) for v in flat]
    return num.reshape(level.shape), d


def _outcome_weight_exact(shape: TreeShape, tok, ints, V: int, drafting: str, drop: bool):
    """`_outcome_weight` in rationals on the levels as integers (``ints``: (numerators, d) per
    level): each outcome's numerator and denominator are integer products, one Fraction an
    outcome at the end (the same values, without a Fraction per factor). Under ``norep`` the
    factor q(x) / (1 - q(used)) is n(x) / (d - n(used)) (d cancels), 0 where nothing is left."""
    n, N = tok.shape
    pidx = [None] * N
    pidx[0] = tok[:, 0] * 0
    num = np.ones(n, dtype=object)
    den = np.ones(n, dtype=object)
    depth = shape.depth
    rows_at = np.arange(n)
    no = np.zeros(n, dtype=bool)
    copy = [no] * N
    for u in shape.preorder():
        kids = shape.children[u]
        if not kids:
            continue
        level, d = ints[depth[u]]
        rows = level[pidx[u]]  # [n, V] integer numerators
        fnum = np.ones(n, dtype=object)
        fden = np.ones(n, dtype=object)
        if drafting == "iid":
            for c in kids:
                fnum = fnum * rows[rows_at, tok[:, c]]
                fden = fden * d
        else:
            m = (rows > 0).astype(np.int64).sum(axis=1)
            used = np.zeros(rows.shape, dtype=bool)
            first = kids[0]
            for j, c in enumerate(kids):
                x = tok[:, c]
                left = np.where(used, 0, rows).sum(axis=1)  # d (1 - q(used)) as an integer
                fresh = ~used[rows_at, x]
                prob = np.where(fresh, rows[rows_at, x], 0)
                gone = left == 0  # safe_div's fallback: the factor is 0
                w_num = np.where(gone, 0, prob)
                w_den = np.where(gone, 1, left)
                if j == 0:
                    fnum, fden = fnum * w_num, fden * w_den
                else:
                    surplus, same = _surplus_child(shape, tok, first, c, j, m, drop, no)
                    fnum = fnum * np.where(surplus, np.where(same, 1, 0), w_num)
                    fden = fden * np.where(surplus, 1, w_den)
                    copy[c] = surplus
                used[rows_at, x] = True
        num = np.where(copy[u], num, num * fnum)
        den = np.where(copy[u], den, den * fden)
        for c in kids:
            pidx[c] = pidx[u] * V + tok[:, c]
            copy[c] = copy[c] | copy[u]
    weight = np.empty(n, dtype=object)
    weight[:] = [Fraction(a, b) for a, b in zip(num.tolist(), den.tolist())]
    return (weight, pidx, copy) if drop else (weight, pidx)


def _surplus_child(shape: TreeShape, tok, first: int, c: int, j: int, m, drop: bool, no):
    """Under norep, child c, the j-th of its parent (first child ``first``): outcomes [n] in
    which it is a surplus child (q has at most j positive tokens, ``m`` [n]: it repeats the first
    child), and those in which its subtree's tokens are the ones a surplus child carries
    (`_zero_below` with ``drop``, else `_same_subtree`; ``no``, all False, where the shapes
    differ). A surplus child whose subtree differs in shape from the first child's is refused."""
    same = _zero_below(shape, tok, first, c) if drop else _same_subtree(shape, tok, first, c)
    surplus = m <= j
    if bool(surplus.any()) and same is None:
        raise SpectheoryError(
            "norep drafting: q has fewer positive tokens than a node has children, and the "
            "surplus child's subtree differs in shape from the first child's (it cannot repeat "
            "it)")
    return surplus, (no if same is None else same)


def _zero_below(shape: TreeShape, tok, a: int, b: int):
    """Outcomes [n] bool in which node b carries node a's token and every node below b token 0
    (the one outcome that stands for a dropped surplus child)."""
    eq = tok[:, a] == tok[:, b]
    stack = list(shape.children[b])
    while stack:
        u = stack.pop()
        eq = eq & (tok[:, u] == 0)
        stack.extend(shape.children[u])
    return eq


def _same_subtree(shape: TreeShape, tok, a: int, b: int):
    """Outcomes [n] bool in which the subtree of b repeats the subtree of a (None when the
    shapes differ)."""
    if shape.sig(a) != shape.sig(b):
        return None
    eq = tok[:, a] == tok[:, b]
    for ca, cb in zip(shape.children[a], shape.children[b]):
        eq = eq & _same_subtree(shape, tok, ca, cb)
    return eq


def tree_block_law_enumerate(verifier, shape, q_levels, p_levels, V: int,
                             drafting: str = "iid", rows: str = "auto",
                             progress=None) -> BlockLaw:
    """Exact block law (one context) of any K-path verifier on a drafted tree, by enumerating
    the joint outcomes of its edge tokens (module doc). ``rows``: "auto" (point masses under
    ``topk``, q otherwise), "raw" (always q) or "point"."""
    spec = tree_verifier(verifier)
    shape = tree_shape(shape)
    _check_drafting(drafting, spec)
    refuse_uneven(spec, shape)
    exact = Bk.is_exact(p_levels[0])
    like = p_levels[0]
    L, K, N = shape.height, shape.paths, shape.n_nodes
    leaf_nodes = shape.leaf_nodes  # [K, L]
    point = rows == "point" or (rows == "auto" and drafting == "topk")
    if drafting == "topk":
        chunks = [_topk_outcome(shape, q_levels, V)]
        total = 1
    else:
        total = V ** (N - 1)
        chunk = EXACT_CHUNK if exact else max(1, CHUNK_ELEMENTS // (K * (L + 1) * V))
        chunks = None
    tau_pmf = Bk.full((1, L + 1), 0, like)
    emitted = [Bk.full((V**i, V), 0, like) for i in range(L + 1)]
    ints = _integer_levels(q_levels) if exact and drafting != "topk" else None
    f0 = 0
    while f0 < total:
        if chunks is not None:
            edge = chunks[0]
            n = 1
        else:
            n = min(chunk, total - f0)
            f = np.arange(f0, f0 + n, dtype=np.int64)
            edge = sequence_tokens(f, N - 1, V) if N > 1 else np.zeros((n, 0), np.int64)
        f0 += n
        tok = np.concatenate([np.zeros((n, 1), np.int64), np.asarray(edge)], axis=1)
        if not exact:
            tok = torch.as_tensor(tok, device=like.device)
        if drafting == "topk":
            weight = Bk.full((1,), 1, like)
        else:
            weight, _ = _outcome_weight(shape, tok, q_levels, V, drafting, like, ints=ints)
        keep = weight != 0
        if not bool(keep.all()):
            tok, weight = tok[keep], weight[keep]
            n = int(tok.shape[0])
            if n == 0:
                if progress is not None:
                    progress(int(keep.shape[0]))
                continue
        drafts = tok[:, leaf_nodes.reshape(-1)].reshape(n, K, L)
        q, p = draft_rows(q_levels, p_levels, drafts, L, V)
        if point:
            q = Bk.one_hot(drafts, V, q)
        law = validate_law(spec.law(drafts, q, p), n, K, L, V, exact, drafts, name=spec.name)
        wstop = Bk.mul(Bk.expand_dims(Bk.expand_dims(weight, 1), 2), law.stop)  # [n, K, L+1]
        tau_pmf[0] = tau_pmf[0] + Bk.sum(Bk.sum(wstop, axis=1), axis=0)
        node = Bk.zeros_like(drafts[:, :, 0])
        for i in range(L + 1):
            Bk.index_add_weighted(emitted[i], node.reshape(-1), wstop[:, :, i].reshape(-1),
                                  law.correction[:, :, i, :].reshape(n * K, V))
            if i < L:
                node = node * V + drafts[:, :, i]
        if progress is not None:
            progress(int(keep.shape[0]))
    return BlockLaw(tau_pmf, [None] + [e.reshape(-1) for e in emitted])


# ----------------------------------------------------------------------------- node route


def _merge(sigs) -> tuple:
    out: tuple = ()
    for s in sigs:
        out = out + s
    return out


def _candidate_tuples(rows, b: int, V: int, drafting: str):
    """Candidate tuples at a batch of nodes with draft rows [P, V]: tokens [P, T, b] and their
    probabilities [P, T] (iid and norep enumerate V**b tuples; topk has one)."""
    P = rows.shape[0]
    if drafting == "topk":
        tok = np.array([[topk_tokens(rows[i], b)] for i in range(P)], dtype=np.int64)
        prob = Bk.full((P, 1), 1, rows)
        return tok, prob
    T = np.array(list(itertools.product(range(V), repeat=b)), dtype=np.int64)  # [T, b]
    nT = T.shape[0]
    if drafting == "iid":
        prob = Bk.full((P, nT), 1, rows)
        for j in range(b):
            prob = prob * rows[:, T[:, j]]
        return np.broadcast_to(T, (P, nT, b)), prob
    # norep: sequential without replacement; surplus children (j >= m) repeat child 1
    m = Bk.sum(Bk.to_int(rows > 0), axis=1)  # [P]
    prob = Bk.full((P, nT), 1, rows)
    used = Bk.full((P, nT), 0, rows)  # q mass of the tokens used so far
    unused = np.ones((nT, V), dtype=bool)  # the tokens not used so far, per tuple
    exact = Bk.is_exact(rows)
    for j in range(b):
        x = T[:, j]
        fresh = np.ones(nT, dtype=bool)
        for i in range(j):
            fresh &= T[:, i] != x
        qx = rows[:, x]  # [P, T]
        # 1 - q(used) as the mass of the unused tokens (1 - 0.999999999999 lost 4 digits)
        left = 1 - used if exact or j == 0 else _mass_of(rows, unused)
        w_new = Bk.safe_div(qx, left, Bk.scalar(qx, 0))
        w_new = Bk.where(_like_mask(fresh, rows), w_new, Bk.zeros_like(w_new))
        rep = _like_mask(x == T[:, 0], rows)
        w_sur = Bk.where(rep, Bk.ones_like(w_new), Bk.zeros_like(w_new))
        surplus = Bk.expand_dims(m <= j, 1)
        prob = prob * Bk.where(surplus, w_sur, w_new)
        used = used + Bk.where(surplus, Bk.zeros_like(qx), qx)
        unused[np.arange(nT), x] = False
    return np.broadcast_to(T, (P, nT, b)), prob


def _mass_of(rows, keep: np.ndarray):
    """``rows [P, V]`` summed over the tokens ``keep [T, V]`` marks, [P, T] (float rows)."""
    if Bk.is_torch(rows):
        return rows @ torch.as_tensor(keep.T, dtype=rows.dtype, device=rows.device)
    return rows @ keep.T.astype(rows.dtype)


def _like_mask(mask: np.ndarray, like):
    if Bk.is_torch(like):
        return torch.as_tensor(mask, device=like.device).reshape(1, -1)
    return mask.reshape(1, -1)


#: `node_route_work` stops counting past 2^256 pairs (a count that large is refused whatever
#: the limit; a deep iid tree's subset sums made the exact count take 15 s).
WORK_CAP_BITS = 256


def node_route_work(shape, V: int, drafting: str, verifier=None) -> int:
    """Upper bound on the (prefix, candidate tuple) pairs the node route evaluates: at depth d,
    V**d prefixes times V**w tuples for every width w a (merged) node there can have (under
    ``iid`` equal siblings merge, so w ranges over sums of the child counts at that depth); for
    SpecInfer under ``iid`` (`_specinfer_iid_step`) V * w * 2**w per prefix instead
    (V * w * (w + 1) when the subtrees at the next depth all have the same shape)."""
    fast = verifier is not None and tree_verifier(verifier).name == "specinfer"
    shape = tree_shape(shape)
    depth = shape.depth
    log_v = math.log2(max(V, 2))
    total = 0
    for d in range(shape.height):
        counts = [len(shape.children[u]) for u in range(shape.n_nodes) if depth[u] == d]
        if drafting == "topk":
            total += V**d * len(counts)
            continue
        if drafting == "iid":  # the subset sums of the child counts, as the bits of one int
            bits = 1
            for c in counts:
                bits |= bits << c
            widths = [w for w in range(1, bits.bit_length()) if bits >> w & 1]
        else:
            widths = sorted(set(counts))
        if fast and drafting == "iid":
            regular = len({shape.sig(v) for v in range(shape.n_nodes) if depth[v] == d + 1}) == 1
            if (d + 1) * log_v + (2 * math.log2(widths[-1] + 1) if regular else widths[-1]) + \
                    math.log2(widths[-1]) > WORK_CAP_BITS:
                return 1 << WORK_CAP_BITS  # far past any limit: the exact bound is not needed
            total += V ** (d + 1) * sum(w * ((w + 1) if regular else 2**w) for w in widths)
        else:
            if (d + widths[-1]) * log_v + math.log2(len(widths)) > WORK_CAP_BITS:
                return 1 << WORK_CAP_BITS
            total += V**d * sum(V**w for w in widths)
    return min(total, 1 << WORK_CAP_BITS)


def _groups(sig: tuple, tuples: np.ndarray, drafting: str, merges: bool = True) -> dict:
    """For candidate tuples [T, b] at a node of shape ``sig``: child shape -> sorted flat indices
    t*b + j of the candidates whose acceptance moves the walk to a child of that shape (equal
    tokens are one child: under ``iid`` their subtrees merge, under ``norep`` the first copy
    stands for the surplus ones). ``merges`` False (`VerifierSpec.rule_merges_repeats`): every
    candidate leads to its own child's subtree, equal tokens or not."""
    T, b = tuples.shape
    out: dict = {}
    for t in range(T):
        row = tuples[t].tolist()
        if not merges:
            for j in range(b):
                out.setdefault(sig[j], []).append(t * b + j)
            continue
        where: dict = {}
        for j, x in enumerate(row):
            where.setdefault(x, []).append(j)
        for js in where.values():
            child = _merge(sig[j] for j in js) if drafting == "iid" else sig[js[0]]
            out.setdefault(child, []).extend(t * b + j for j in js)
    return {k: np.array(sorted(v), dtype=np.int64) for k, v in out.items()}


def _weight(count: int, like):
    """A subset count as a factor of arrays like ``like``: the integer itself for exact (object)
    arrays, a float for float arrays (a binomial coefficient of a root with 67 or more children
    exceeds int64, which torch cannot convert)."""
    if isinstance(like, np.ndarray) and like.dtype == object:
        return count
    if count.bit_length() > 1000:  # past float64's range (about 1.8e308)
        raise SizeLimitError("a node of the tree has so many i.i.d. children that their subset "
                             "counts C(n, r) pass 2^1000, beyond float64; use --exact "
                             "(exact=True), or at most 1,000 children a node")
    return float(count)


#: Elements of the node rule's largest array [P * T_chunk, b, V] per evaluation (float mode).
NODE_CHUNK_ELEMENTS = 2**20


def _specinfer_iid_step(sig, R, idx, qrows, prows, V: int, d: int, tau_pmf, emitted, nxt,
                        like) -> None:
    """SpecInfer (recursive rejection sampling, i.i.d. children) at the nodes ``idx`` of shape
    ``sig``, without enumerating candidate tuples.

    With candidates x_1..x_n i.i.d. q the residual after j - 1 rejections is deterministic,
    p_{j+1} = normalise(max(p_j - q, 0)), so trial j accepts token x with probability
    a_j(x) = min(q(x), p_j(x)) after surviving with prod_{i<j} (1 - sum_x a_i(x)); all rejected:
    Y ~ p_{n+1}. A token rejected at trial i has p_{i+1}(x) = 0 and is never accepted later, so
    when x is accepted at trial j no earlier candidate is x, and each later candidate is x
    independently with probability q(x): the merged child is child j plus a subset S of the later
    children, with probability q(x)^|S| (1 - q(x))^(n - j - |S|). Work: 2^n subsets per node
    shape instead of V^n tuples."""
    n = len(sig)
    pcur = prows
    survive = Bk.full((len(idx),), 1, like)
    zero = Bk.zeros_like(qrows)
    child = (Bk.expand_dims(idx, 1) * V + Bk.expand_dims(Bk.arange(V, idx), 0)).reshape(-1)
    powers: dict = {}  # q^r and (1 - q)^r, each computed once
    others = Bk.others_mass(qrows)  # 1 - q(x), without the cancellation near q(x) = 1

    def power(r: int, rest: bool):
        if (r, rest) not in powers:
            powers[r, rest] = (others ** r) if rest else qrows**r
        return powers[r, rest]

    for j in range(n):
        acc = Bk.minimum(qrows, pcur)  # [P, V]
        acc = Bk.where(qrows > 0, acc, zero)
        # Bk.mul: in rationals a zero or unit factor gives the other Fraction without a product
        reach_j = Bk.mul(Bk.expand_dims(Bk.mul(R, survive), 1), acc)
        later = list(range(j + 1, n))
        by_sig: dict = {}
        if len({sig[i] for i in later}) <= 1:  # equal later subtrees: count subsets by size
            for r in range(len(later) + 1):
                key = _merge([sig[j]] + [sig[i] for i in later[:r]])
                by_sig.setdefault(key, {})[r] = math.comb(len(later), r)
        else:
            for r in range(len(later) + 1):
                for S in itertools.combinations(later, r):
                    key = _merge([sig[j]] + [sig[i] for i in S])
                    by_sig.setdefault(key, {}).setdefault(r, 0)
                    by_sig[key][r] += 1
        m = len(later)
        for key, sizes in by_sig.items():
            factor = zero
            for r, count in sizes.items():
                factor = factor + Bk.mul(_weight(count, zero) * power(r, False),
                                         power(m - r, True))
            if key not in nxt:
                nxt[key] = Bk.full((V ** (d + 1),), 0, like)
            Bk.index_add_rows(nxt[key], child, Bk.mul(reach_j, factor).reshape(-1))
        survive = Bk.mul(survive, Bk.sum(qrows - acc, axis=1))  # 1 - sum acc, summed
        res = Bk.positive_part(pcur - qrows)
        pcur = Bk.safe_div(res, Bk.sum(res, axis=1, keepdims=True), pcur)
    wn = Bk.mul(R, survive)
    tau_pmf[0, d] = tau_pmf[0, d] + Bk.sum(wn, axis=0)
    Bk.index_add_rows(emitted[d], idx, Bk.mul(Bk.expand_dims(wn, 1), pcur))


def _leaf_step(R, idx, d: int, p_levels, V: int, tau_pmf, emitted) -> None:
    """The walk reached the childless nodes ``idx`` at depth d with mass R: nothing is left to
    verify, so tau = d and the bonus token is drawn from the target row p(.|u) at u itself (the
    last step of every lossless rule; at any depth, so leaves may sit at different depths)."""
    tau_pmf[0, d] = tau_pmf[0, d] + Bk.sum(R, axis=0)
    Bk.index_add_rows(emitted[d], idx, Bk.expand_dims(R, 1) * p_levels[d][idx])


def tree_block_law_nodes(verifier, shape, q_levels, p_levels, V: int,
                         drafting: str = "iid", fast: bool = True) -> BlockLaw:
    """Exact block law (one context) of a node-recursive verifier on a drafted tree, node by
    node (module doc). ``fast``: SpecInfer under i.i.d. drafting uses
    `_specinfer_iid_step` (2^n subsets per node instead of V^n candidate tuples)."""
    spec = tree_verifier(verifier)
    if node_rule(spec) is None:
        raise SpectheoryError(f"verifier {spec.name!r} has no node rule for the node route; "
                              f"node-recursive verifiers: {', '.join(node_rule_names())} (use "
                              f"the enumerate route)")
    rule, skips = node_rule(spec)
    if drafting == "norep" and not skips:
        raise SpectheoryError(f"the node route runs {spec.name!r} under norep drafting only "
                              f"via the enumerate route (its rule does not skip repeated "
                              f"tokens)")
    shape = tree_shape(shape)
    _check_drafting(drafting, spec)
    like = p_levels[0]
    exact = Bk.is_exact(like)
    L = shape.height
    tau_pmf = Bk.full((1, L + 1), 0, like)
    emitted = [Bk.full((V**i, V), 0, like) for i in range(L + 1)]
    states = {shape.sig(0): Bk.full((1,), 1, like)}  # sig -> reach mass over V**d prefixes
    group_cache: dict = {}
    for d in range(L + 1):
        nxt: dict = {}
        for sig, reach in states.items():
            limits.check_time(" (tree node route)")
            if exact:
                idx = np.flatnonzero(np.array([v != 0 for v in reach], dtype=bool))
            else:
                idx = torch.nonzero(reach).reshape(-1)
            if len(idx) == 0:
                continue
            R = reach[idx]
            if not sig:  # a childless node: stop with Y ~ p(.|u)
                _leaf_step(R, idx, d, p_levels, V, tau_pmf, emitted)
                continue
            b = len(sig)
            qrows, prows = q_levels[d][idx], p_levels[d][idx]
            if fast and spec.name == "specinfer" and drafting == "iid":
                _specinfer_iid_step(sig, R, idx, qrows, prows, V, d, tau_pmf, emitted, nxt, like)
                continue
            tok, prob = _candidate_tuples(qrows, b, V, drafting)
            P, T = prob.shape
            w = Bk.expand_dims(R, 1) * prob  # [P, T]
            if drafting != "topk":
                key = (sig, b)
                if key not in group_cache:
                    group_cache[key] = _groups(sig, np.ascontiguousarray(tok[0]), drafting,
                                               spec.rule_merges_repeats)
                groups = group_cache[key]
            tc = T if exact else max(1, NODE_CHUNK_ELEMENTS // (P * b * max(b, V)))
            for t0 in range(0, T, tc):
                t1 = min(T, t0 + tc)
                n = t1 - t0
                tk = np.array(tok[:, t0:t1], copy=True).reshape(P * n, b)
                tk = Bk.as_index(tk, like)
                qb = Bk.broadcast_to(Bk.expand_dims(Bk.expand_dims(qrows, 1), 2), (P, n, b, V))
                pb = Bk.broadcast_to(Bk.expand_dims(Bk.expand_dims(prows, 1), 2), (P, n, b, V))
                member = Bk.to_int(Bk.full((P * n, b, b), 1, like) == 1)
                accept, none, corr = rule(member, tk, qb.reshape(P * n, b, V),
                                          pb.reshape(P * n, b, V))
                wc = w[:, t0:t1]
                wn = wc * none[:, 0].reshape(P, n)
                tau_pmf[0, d] = tau_pmf[0, d] + Bk.sum(Bk.sum(wn, axis=1), axis=0)
                Bk.index_add_rows(emitted[d], idx, Bk.sum(
                    Bk.expand_dims(wn, 2) * corr[:, 0, :].reshape(P, n, V), axis=1))
                wa = (Bk.expand_dims(wc, 2) * accept[:, 0, :].reshape(P, n, b)).reshape(
                    P, n * b)
                child_tok = tk.reshape(P, n * b)
                if drafting == "topk":  # distinct tokens: no merges
                    items = [(sig[j], np.arange(j, n * b, b)) for j in range(b)]
                else:
                    items = []
                    for child_sig, flat in groups.items():
                        lo, hi = np.searchsorted(flat, [t0 * b, t1 * b])
                        if hi > lo:
                            items.append((child_sig, flat[lo:hi] - t0 * b))
                for child_sig, sel in items:
                    sel_i = Bk.as_index(sel, like)
                    if child_sig not in nxt:
                        nxt[child_sig] = Bk.full((V ** (d + 1),), 0, like)
                    child = Bk.expand_dims(idx, 1) * V + child_tok[:, sel_i]
                    Bk.index_add_rows(nxt[child_sig], child.reshape(-1),
                                      wa[:, sel_i].reshape(-1))
        states = nxt
    return BlockLaw(tau_pmf, [None] + [e.reshape(-1) for e in emitted])


# ----------------------------------------------------------------------------- API


def _instance_levels(instance: Instance, L: int, exact: bool, device="cpu"):
    return (levels(instance.draft, 0, L, exact, device),
            levels(instance.target, 0, L + 1, exact, device))


def choose_route(spec: VerifierSpec, drafting: str, route: str = "auto",
                 rows: str = "auto") -> str:
    """"enumerate" or "nodes": "auto" takes the node route for node-recursive verifiers (under
    ``norep`` only for rules that skip repeated tokens; under ``topk`` only for rules that do not
    read q, the ``topk`` rule and rules marked ``ignores_q`` (SGLang's target-only rule), since
    the node route hands the rules the raw q), the enumerate route otherwise."""
    if route not in ROUTES:
        raise SpectheoryError(f"unknown route {route!r}; choose from {', '.join(ROUTES)}")
    point = rows == "point" or (rows == "auto" and drafting == "topk")
    blind = spec.name == "topk" or getattr(spec.rule, "ignores_q", False)
    if route == "nodes" and point and not blind:
        raise SpectheoryError("the node route hands node rules the raw q; point-mass rows "
                              "(the topk default) need the enumerate route, or pass rows='raw'")
    if route != "auto":
        return route
    if node_rule(spec) is not None and (drafting != "norep" or spec.rule_skips_repeats) and \
            (not point or blind):
        return "nodes"
    return "enumerate"


def tree_block_law(verifier, shape, q_levels, p_levels, V: int, drafting: str = "iid",
                   route: str = "auto", rows: str = "auto") -> BlockLaw:
    """The block law (one context) by the chosen route
    ([`choose_route`][spectheory.engine.drafttrees.choose_route])."""
    spec = tree_verifier(verifier)
    if choose_route(spec, drafting, route, rows) == "nodes":
        return tree_block_law_nodes(spec, shape, q_levels, p_levels, V, drafting)
    return tree_block_law_enumerate(spec, shape, q_levels, p_levels, V, drafting, rows,
                                    progress=limits.tick)


def _guard(spec, shape: TreeShape, V: int, drafting: str, route: str, exact: bool,
           max_sequences) -> None:
    L = shape.height
    if exact and not spec.exact:
        raise SpectheoryError(f"verifier {spec.name!r} has a float law only (no exact "
                              f"rational mode)")
    checks = [(V ** (L + 1), "tree analysis", f"V^(D+1) = {V}^{L + 1}")]
    if route == "nodes":
        checks.append((node_route_work(shape, V, drafting, spec),
                       f"tree {shape.describe()} (node route)",
                       "sum over nodes of V^depth x candidate tuples"))
    elif drafting != "topk":
        checks.append((V ** shape.n_drafted, f"tree {shape.describe()} (enumerate route)",
                       f"V^E = {V}^{shape.n_drafted} joint draft outcomes"))
    from ..runtime.sizes import max_sequences as default_limit

    limit = max_sequences if isinstance(max_sequences, int) and not \
        isinstance(max_sequences, bool) else default_limit(exact)
    # a refusal before any note: the first size's estimate was noted on stderr, and then the
    # second size refused
    for count, what, formula in sorted(checks, key=lambda c: c[0] <= limit):
        check_size(count, what, exact, max_sequences, formula)


__all__ = [
    "HOME_DRAFTING", "MAX_TREE_DEPTH", "MAX_TREE_NODES", "node_rule", "ROUTES", "TREE_DRAFTING", "TreeShape",
    "choose_route", "default_drafting", "enumerate_count",
    "node_route_work", "refuse_uneven", "shape_from_choices", "shape_from_parents",
    "topk_tokens", "tree_block_law", "tree_block_law_enumerate", "tree_block_law_nodes",
    "tree_shape", "tree_verifier",
]
