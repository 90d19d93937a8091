"""Tree mode of the conformance kit: check a tree sampler (EAGLE, SGLang, SpecInfer trees) against
the exact law.

The canonical tree-sampler signature (torch tensors):

```text
tree_sampler(tokens [B, N] int64, parents tuple of N ints, q [B, N+1, V], p [B, N+1, V],
             generator) -> (node [B] int64, token [B] int64)
```

The tree shape has N drafted nodes, numbered 1..N in depth-first pre-order as
[`tree_shape`][spectheory.engine.drafttrees.tree_shape] numbers them (node 0 is the root, the
context); ``parents[i - 1]`` is the parent of node i (``TreeShape.parents``; children of a node in
increasing id order are its siblings in order). ``tokens[b, i - 1]`` is the token drafted at node
i; ``q[b, u]`` and ``p[b, u]`` are the draft and target rows after the path to node u (node 0: the
root's rows; at a node without children ``q`` is not used for drafting). The sampler returns the
deepest accepted node (0: none accepted) and the extra token Y (the correction or bonus token):
tau is the depth of ``node`` and the emitted sequence is the tokens on the path to ``node``
followed by Y.

Two checks ([`check_tree_sampler`][spectheory.testing.checks.tree.check_tree_sampler]):

* ``mode="law"``: fixed drafted trees, drawn from the instance's draft model under the drafting
  scheme (``iid``, ``norep``, ``topk``; [`spectheory.engine.drafttrees`][spectheory.engine.drafttrees])
  with prefix-dependent rows, each repeated, every call a shuffled mix of the drafted trees of
  all instances of one vocabulary size (exact counts per tree; a sampler that mixes up the rows
  of a batch fails); the empirical law of the emitted sequence per drafted
  tree is compared with the verifier's exact *conditional* law given that tree
  ([`conditional_tree_law`][spectheory.testing.checks.tree.conditional_tree_law], from the
  verifier's node rule: ``specinfer``, ``specinfer-norep``, ``topk``, ``sglang-tree``). Pearson
  chi-square per tree with cells of expected count below 5 pooled, one global test and one per tree,
  Bonferroni: a correct sampler fails with probability at most ``alpha``
  ([`spectheory.testing.statistics.stats`][spectheory.testing.statistics.stats]).
* ``mode="lossless"``: a fresh tree drafted by the kit for every sample; the emitted sequence is
  completed by the target to length D + 1 (D the tree's depth) and compared with the target law
  over V^(D+1) sequences. Needs no verifier: any valid rule passes, any lossy one fails with
  power stated by the report.

Cells are emitted sequences, not node ids: under ``iid`` drafting two siblings may carry the same
token, and a rule that merges them (SpecInfer's token tree) may report either node for the same
output. Which drafting a check runs under matters: SGLang's rule is exact on distinct siblings and
lossy on i.i.d. ones, SpecInfer's the reverse ([`spectheory.verifiers.sglang_tree`][spectheory.verifiers.sglang_tree]);
the default is the first scheme the verifier declares (`VerifierSpec.tree_drafting`), and every
report names the tree and the drafting it checked.

The sampler is user code: every call goes through
`guarded` (`spectheory.testing.checks.report`) (an exception or ``sys.exit`` in it is one
``UserCodeError`` line), and unusable outputs (not two integer vectors of length B, a node outside
0..N, a token outside 0..V-1) fail the report with one note. Sizes (cells, floats per call,
V^(D+1) sequences, drafted-tree enumerations) are guarded before anything is allocated. Bad
input is refused in one line (`OptionError`) before the sampler is called: too few samples for
any degree of freedom to be tested (the line states the count a test needs; as
[`check_step`][spectheory.testing.checks.step.check_step] and ``check-sampler`` refuse it), and an
instance built in Python whose tables hold NaN, inf or a negative entry (naming the table).
Engine layouts (SGLang's tree kernel, EAGLE's ``evaluate_posterior``) are in
[`spectheory.testing.checks.tree_ports`][spectheory.testing.checks.tree_ports].
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ...engine.drafttrees import TREE_DRAFTING, TreeShape, default_drafting, topk_tokens, tree_shape
from ...engine.seqtree import path_probabilities
from ...inputs.instances import Instance
from ...inputs.random_instances import random_instance
from ...registry import VerifierSpec, get_verifier
from ...runtime._lazy import torch
from ...runtime.errors import (guarded_check, InstanceError, OptionError, TooFewSamplesError, as_list, call_user, check_generator,
                               is_integer)
from ...runtime.limits import check_memory
from ...runtime.sizes import check_size
from ..statistics import stats
from ..statistics._args import level
from .calls import (RAMP_FIRST_ROWS, _an_instance, _budget_bound, _caller_bound, _cells,
                    _dense, _needs_text, _sequence_label, _summary, kit_seed, readable, unreadable,
                    whole_ids)
from .report import MIN_EXPECTED, POWER, SamplerReport, guarded
from .sizing import MAX_SECONDS, _refuse_time
from .step import _Pace
from ...runtime.limits import shown as _repr_cut

#: Modes of [`check_tree_sampler`][spectheory.testing.checks.tree.check_tree_sampler].
TREE_MODES = ("law", "lossless")
#: Samples of a check when neither ``samples`` nor ``budget_s`` is given.
DEFAULT_SAMPLES = 20_000
#: Most drafted nodes of a checked tree.
MAX_TREE_NODES = 4096
#: Most floats of the inputs of one sampler call (samples x (2 (N+1) V + N)).
MAX_CALL_FLOATS = 2**24
#: Most count cells of a law-mode check (drafted trees x emitted sequences per tree).
MAX_LAW_CELLS = 2**24
#: Most output sequences V^(D+1) that ``mode="lossless"`` compares.
MAX_LOSSLESS_CELLS = 2**22
#: Most samples of one check (memory does not grow with them: outputs are counted call by call).
MAX_SAMPLES = 10**10
#: Most drafted trees per instance in law mode: each tree's exact conditional law is computed
#: before the first call (about 1 ms a tree), so 10^5 trees ran for minutes unannounced.
MAX_DRAFT_ROWS = 10_000
#: Most drafted trees the exact average over the drafting law enumerates.
MAX_DRAFT_OUTCOMES = 2**16


class DraftedTrees(NamedTuple):
    """R drafted trees of one shape, in the canonical layout: ``tokens [R, N]`` int64 (the token of
    node 1..N), ``q [R, N+1, V]`` and ``p [R, N+1, V]`` float64 (rows after the path to each node,
    node 0 the root)."""

    tokens: Any
    q: Any
    p: Any


# ----------------------------------------------------------------------------- drafting


def _levels_for(instance: Instance, depth: int):
    """Draft and target tables [V^d, V] for d = 0..depth (float64 torch); beyond the instance's
    own depth, its models' Markov extension (`spectheory.inputs.models`)."""
    inst = instance.to_float()
    ql = [inst.draft.torch_level(d) for d in range(depth + 1)]
    pl = [inst.target.torch_level(d) for d in range(depth + 1)]
    return ql, pl


def _check_drafting_fits(instance: Instance, tree: TreeShape, drafting: str) -> None:
    """Refuse, in one line, an instance on which the scheme cannot draft the tree: ``topk`` with
    more children than tokens, ``norep`` with a node whose draft rows have fewer positive tokens
    than it has children (the scheme would draft fewer children: a different tree)."""
    V = instance.vocab_size
    depth = tree.depth
    width: dict = {}
    for u, kids in enumerate(tree.children):
        if kids:
            width[depth[u]] = max(width.get(depth[u], 0), len(kids))
    if drafting == "topk" and max(width.values()) > V:
        raise OptionError(f"top-k drafting of tree {tree.describe()} needs at most V = {V} "
                          f"children per node, not {max(width.values())}")
    if drafting == "norep":
        inst = instance.to_float()
        for d, b in sorted(width.items()):
            rows = np.asarray(inst.draft.level(d), dtype=np.float64)
            least = int((rows > 0).sum(axis=1).min())
            if least < b:
                raise OptionError(f"norep drafting of tree {tree.describe()}: a draft row at "
                                  f"depth {d} has {least} positive tokens for {b} children "
                                  f"(the scheme would draft fewer children); use an instance "
                                  f"with fuller draft rows or another scheme")


def _check_tables(instance: Instance, i: int) -> None:
    """Refuse, in one line naming the table and the prefix, an instance built in Python that is
    not one the engines compute with (`check_instance`: sizes, rows that are distributions) or
    whose float tables hold a non-finite or negative entry (files are checked when read): its
    drafted rows and exact laws would be NaN or no law, and neither is a reference for a
    verdict on the sampler."""
    from ...inputs.instances import check_instance
    from .rows import bad_row

    check_instance(instance, where=f"tree-mode instance {i}")  # sizes, rows summing to 1
    found = bad_row(instance)  # also tables changed in place after that check
    if found is not None:
        which, d, prefix, row = found
        value = row[~np.isfinite(row) | (row < 0)][0]
        raise OptionError(f"tree-mode instance {i}: the {which} table at depth {d} has "
                          f"{value} in the row after prefix {prefix}; every probability "
                          f"must be finite and non-negative")


def draft_trees(instance: Instance, tree, drafting: str, rows: int, generator) -> DraftedTrees:
    """``rows`` trees of shape ``tree`` drafted from the instance's draft model under ``drafting``
    (``iid``: a node's children i.i.d. from q(.|u); ``norep``: sequentially without replacement;
    ``topk``: the most probable tokens, ties to the smaller id), with the rows along them
    (`DraftedTrees`)."""
    tree = tree_shape(tree)
    if not isinstance(drafting, str) or drafting not in TREE_DRAFTING:
        raise OptionError(f"unknown tree drafting scheme {drafting!r}; choose from "
                          f"{', '.join(TREE_DRAFTING)}")
    _an_instance(instance, "draft_trees")
    check_generator(generator, "draft_trees: ")
    V = instance.vocab_size
    n = tree.n_nodes
    if not is_integer(rows) or rows < 1:
        raise OptionError(f"draft_trees: rows = {_repr_cut(rows, 40)} must be an integer >= 1")
    # tokens and parents [rows, n] (int64), and the q and p rows along them [rows, n, V]
    check_memory(int(rows) * n * (16 + 16 * V), f"draft_trees: {int(rows):,} trees of {n} nodes",
                 "draft fewer trees at a time")
    ql, pl = _levels_for(instance, tree.height)
    tok = torch.zeros((rows, n), dtype=torch.long)
    pidx = torch.zeros((rows, n), dtype=torch.long)
    depth = tree.depth
    for u in tree.preorder():
        kids = tree.children[u]
        if not kids:
            continue
        qrows = ql[depth[u]][pidx[:, u]]  # [R, V]
        b = len(kids)
        if drafting == "topk":
            draw = torch.sort(qrows, dim=1, descending=True, stable=True).indices[:, :b]
        else:
            draw = torch.multinomial(qrows, b, replacement=drafting == "iid",
                                     generator=generator)
        for j, c in enumerate(kids):
            tok[:, c] = draw[:, j]
            pidx[:, c] = pidx[:, u] * V + draw[:, j]
    q = torch.stack([ql[depth[u]][pidx[:, u]] for u in range(n)], dim=1)
    p = torch.stack([pl[depth[u]][pidx[:, u]] for u in range(n)], dim=1)
    return DraftedTrees(tok[:, 1:].contiguous(), q, p)


# ----------------------------------------------------------------------------- reference law


#: The end of a refusal by one of the tree check's own size limits, which no option raises.
_FIXED_LIMIT = "use a smaller tree, vocabulary or instance (the tree check's limit is fixed)"


def _tree_rule(verifier) -> VerifierSpec:
    spec = get_verifier(verifier, multi_path=True)
    if spec.rule is None:
        raise OptionError(f"verifier {spec.name!r} has no node rule, so the tree mode has no "
                          f"conditional law for it; node-rule verifiers: specinfer, "
                          f"specinfer-norep, topk, sglang-tree (mode 'lossless' needs none)")
    return spec


def _token_paths(tree: TreeShape, tokens: Sequence[int]) -> list:
    """The token path (tuple) to every node 0..N."""
    path = [()] * tree.n_nodes
    for u in tree.preorder():
        for c in tree.children[u]:
            path[c] = path[u] + (int(tokens[c - 1]),)
    return path


def _is_token_id(t) -> bool:
    """An integer >= 0: a Python or numpy integer, or a 0-d integer tensor (bools are not)."""
    if torch.is_tensor(t):
        return t.dim() == 0 and not (t.is_floating_point() or t.is_complex()
                                     or t.dtype == torch.bool) and int(t) >= 0
    return isinstance(t, (int, np.integer)) and not isinstance(t, (bool, np.bool_)) and t >= 0


def emitted_groups(tree: TreeShape, tokens: Sequence[int]) -> tuple:
    """The distinct token paths of the nodes of one drafted tree, in node order of first
    appearance, and the group [N+1] of every node: the emitted sequence (path to ``node``, Y) is
    cell ``group[node] * V + Y`` of the tree's law. ``tokens`` holds one token id (an integer
    >= 0) per non-root node; else refused in one line."""
    n = tree.n_nodes - 1
    try:
        ids = [t for t in tokens]
    except TypeError:
        raise OptionError(f"emitted_groups: tokens = {_repr_cut(tokens, 40)} is not a sequence of token "
                          f"ids") from None
    if len(ids) != n or not all(_is_token_id(t) for t in ids):
        raise OptionError(f"emitted_groups: tokens must be {n} token ids (integers >= 0), one a "
                          f"non-root node of the tree, not {_repr_cut(ids, 60)}")
    paths = _token_paths(tree, tokens)
    index: dict = {}
    group = []
    for pth in paths:
        group.append(index.setdefault(pth, len(index)))
    return list(index), group


def conditional_tree_law(verifier, tree, tokens: Sequence[int], q_rows, p_rows) -> tuple:
    """The exact law of the emitted sequence given one drafted tree, from the verifier's node rule.

    ``tokens`` [N] (node 1..N), ``q_rows``, ``p_rows`` [N+1, V] (torch float64, or numpy arrays
    of Fractions for exact rationals). Returns ``(paths, law)``: the distinct token paths of the
    nodes ([`emitted_groups`][spectheory.testing.checks.tree.emitted_groups]) and ``law [G, V]``,
    the probability that the walk stops at a node with that path and emits Y.

    The walk: at the current node, the rule (`VerifierSpec.rule`, the signature of
    [`node_recursive_law`][spectheory.verifiers.specinfer.node_recursive_law]) is handed the
    children's tokens in sibling order and the rows at the node (the raw draft row: the node
    route's convention), and gives each child's acceptance probability, the probability that
    all are rejected and Y's law then; at a node without children Y ~ p(.|u). Under
    `VerifierSpec.rule_merges_repeats` (SpecInfer's token tree) children with the same token
    are one node whose children are the concatenation of theirs, as in the draft-tree engine's
    node route; otherwise (SGLang's kernel) the walk moves into the accepted child's own
    subtree. Averaged over the drafting law this is
    [`analyze_tree`][spectheory.engine.analysis.analyze_tree]'s law (tests, exact).
    """
    spec = _tree_rule(verifier)
    tree = tree_shape(tree)
    exact = not torch.is_tensor(p_rows)
    V = p_rows.shape[-1]
    paths, group = emitted_groups(tree, tokens)
    if exact:
        law = np.empty((len(paths), V), dtype=object)
        law.fill(Fraction(0))
    else:
        law = torch.zeros((len(paths), V), dtype=p_rows.dtype)
    kids = tree.children
    tok = [None] + [int(t) for t in tokens]
    stack: list = [((0,), Fraction(1) if exact else 1.0)]
    while stack:
        members, reach = stack.pop()
        u0 = members[0]
        cands = [c for u in members for c in kids[u]]
        if not cands:
            law[group[u0]] = law[group[u0]] + reach * p_rows[u0]
            continue
        b = len(cands)
        if exact:
            member = np.ones((1, 1, b), dtype=np.int64)
            tk = np.array([[tok[c] for c in cands]], dtype=np.int64)
            qr, pr = q_rows[u0][None, None], p_rows[u0][None, None]
        else:
            member = torch.ones((1, 1, b), dtype=torch.long)
            tk = torch.tensor([[tok[c] for c in cands]], dtype=torch.long)
            qr, pr = q_rows[u0].reshape(1, 1, V), p_rows[u0].reshape(1, 1, V)
        accept, none, corr = call_user(spec.rule, member, tk, qr, pr,
                                       what=f"verifier {spec.name}'s node rule")
        acc = [accept[0, 0, j] for j in range(b)]
        law[group[u0]] = law[group[u0]] + reach * none[0, 0] * corr[0, 0]
        if spec.rule_merges_repeats:
            children: dict = {}
            for j, c in enumerate(cands):
                children.setdefault(tok[c], []).append(j)
            moves = [(tuple(cands[j] for j in js), sum(acc[j] for j in js)) for js in
                     children.values()]
        else:
            moves = [((c,), acc[j]) for j, c in enumerate(cands)]
        for child, mass in moves:
            mass = mass if exact else float(mass)
            if mass != 0:
                stack.append((child, reach * mass))
    return paths, law


def _draft_outcomes(instance: Instance, tree: TreeShape, drafting: str):
    """Every drafted tree with its probability under the scheme (exact Fractions): yields
    (tokens [N], probability)."""
    inst = instance.to_exact()
    V = inst.vocab_size
    depth = tree.depth
    order = [u for u in tree.preorder() if tree.children[u]]

    def rec(k, tok, pidx, prob):
        if k == len(order):
            yield tok[1:], prob
            return
        u = order[k]
        kids = tree.children[u]
        row = inst.draft.level(depth[u])[pidx[u]]
        if drafting == "topk":
            choices = [(tuple(topk_tokens(row, len(kids))), Fraction(1))]
        else:
            choices = []
            for t in itertools.product(range(V), repeat=len(kids)):
                w = Fraction(1)
                if drafting == "iid":
                    for x in t:
                        w *= row[x]
                else:
                    if len(set(t)) < len(t):
                        continue
                    used = Fraction(0)
                    for x in t:
                        w *= row[x] / (1 - used) if used < 1 else 0
                        used += row[x]
                if w != 0:
                    choices.append((t, w))
        for t, w in choices:
            tok2, pidx2 = list(tok), list(pidx)
            for c, x in zip(kids, t):
                tok2[c] = x
                pidx2[c] = pidx[u] * V + x
            yield from rec(k + 1, tok2, pidx2, prob * w)

    yield from rec(0, [0] * tree.n_nodes, [0] * tree.n_nodes, Fraction(1))


def tree_output_law(verifier, instance: Instance, tree, drafting: str | None = None):
    """The law [V^(D+1)] (exact Fractions) of the emitted sequence completed by the target to
    length D + 1, averaged over every drafted tree of the scheme: the conditional laws
    ([`conditional_tree_law`][spectheory.testing.checks.tree.conditional_tree_law]) weighted by the
    drafting law. It equals [`analyze_tree`][spectheory.engine.analysis.analyze_tree]'s
    ``output_law`` (tests), which is what ties the tree mode's reference to the exact engine.
    Enumerates V^E drafted trees (``iid``), fewer under ``norep``, one under ``topk``; guarded
    (`MAX_DRAFT_OUTCOMES`)."""
    spec = _tree_rule(verifier)
    tree = tree_shape(tree)
    drafting = default_drafting(spec) if drafting is None else drafting
    V, D = instance.vocab_size, tree.height
    if drafting != "topk":
        check_size(V ** tree.n_drafted, f"drafted trees of {tree.describe()}", True,
                   MAX_DRAFT_OUTCOMES, f"V^E = {V}^{tree.n_drafted}", remedy=_FIXED_LIMIT)
    check_size(V ** (D + 1), "tree output law", True, MAX_LOSSLESS_CELLS,
               f"V^(D+1) = {V}^{D + 1}", remedy=_FIXED_LIMIT)
    inst = instance.to_exact()
    tl = [np.ascontiguousarray(inst.target.level(d)) for d in range(D + 1)]
    ql = [np.ascontiguousarray(inst.draft.level(d)) for d in range(D + 1)]
    out = np.empty(V ** (D + 1), dtype=object)
    out.fill(Fraction(0))
    for tokens, w in _draft_outcomes(inst, tree, drafting):
        pidx = [0] * tree.n_nodes
        for u in tree.preorder():
            for c in tree.children[u]:
                pidx[c] = pidx[u] * V + tokens[c - 1]
        qr = np.array([ql[tree.depth[u]][pidx[u]] for u in range(tree.n_nodes)], dtype=object)
        pr = np.array([tl[tree.depth[u]][pidx[u]] for u in range(tree.n_nodes)], dtype=object)
        paths, law = conditional_tree_law(spec, tree, tokens, qr, pr)
        for g, pth in enumerate(paths):
            for y in range(V):
                m = w * law[g, y]
                if m == 0:
                    continue
                _spread(out, tuple(pth) + (y,), m, tl, V, D)
    return out


def _spread(out, seq: tuple, mass, tl, V: int, D: int) -> None:
    """Add ``mass`` on the sequence ``seq`` completed by the target to length D + 1 (``tl[d]``
    the target table at depth d, [V^d, V])."""
    base = 0
    for x in seq:
        base = base * V + x
    k = len(seq)
    cur = np.array([mass], dtype=object)
    for d in range(k, D + 1):  # the rows below the prefix, level by level
        cur = (cur[:, None] * tl[d][base * V ** (d - k):(base + 1) * V ** (d - k)]).reshape(-1)
    lo = base * V ** (D + 1 - k)
    out[lo:lo + len(cur)] += cur


# ----------------------------------------------------------------------------- report


@dataclass
class TreeSamplerReport(SamplerReport):
    """A [`SamplerReport`][spectheory.testing.checks.report.SamplerReport] of the tree mode
    (``mode`` ``"tree-law"`` or ``"tree-lossless"``), with the tree checked and its drafting
    scheme."""

    tree: str = ""
    drafting: str = ""
    sampler: str = ""

    def __str__(self) -> str:
        ok = "PASS" if self.passed else "FAIL"
        ref = f"verifier {self.verifier}" if self.mode == "tree-law" else "target law"
        lines = [f"check_tree_sampler ({self.mode[5:]} mode, {ref}): {ok}",
                 f"  {'sampler ' + self.sampler + ', ' if self.sampler else ''}tree "
                 f"{self.tree}, {self.drafting} drafting"]
        unit = "drafted trees" if self.mode == "tree-law" else "instances"
        if not (self.dof == 0 and self.worst_cell is None and self.notes):
            lines += self._test_lines(unit, "tree" if self.mode == "tree-law" else "instance")
        lines.extend(f"  {n}" for n in self.notes)
        if self.budget is not None:
            lines.append(f"  sized by budget_s: {self.budget.summary()}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        out = super().to_json()
        out["tree"] = self.tree
        out["drafting"] = self.drafting
        out["sampler"] = self.sampler
        return out


def _tree_report(mode, tests, samples, alpha, name, worst, impossible, tree, drafting,
                 notes, least: int = 0) -> TreeSamplerReport:
    fam, cell, mdt, zero_notes = _summary(tests, alpha, worst, impossible)
    notes = list(notes) + zero_notes
    if fam.dof == 0:
        # too few samples are refused before the sampler runs (_refuse_few): what is left is
        # every row's law a point mass, judged by samples off the point
        mdt = stats.point_mass_tv(least, POWER)
        notes.append(f"every law sits on one outcome: the check fails on any sample of an "
                     f"outcome of probability zero, so a bias of total variation t is caught "
                     f"with probability 1 - (1 - t)^n, n >= {least:,}")
        return TreeSamplerReport(impossible is None, 0.0 if impossible else 1.0, mode, samples,
                                 alpha, cell, mdt, name, fam.statistic, 0, len(tests),
                                 notes=notes, tree=tree, drafting=drafting)
    return TreeSamplerReport(fam.p_value > alpha, fam.p_value, mode, samples, alpha, cell, mdt,
                             name, fam.statistic, fam.dof, len(tests), notes=notes, tree=tree,
                             drafting=drafting)


def _failed(mode, samples, alpha, name, note, tree, drafting, rows=0) -> TreeSamplerReport:
    return TreeSamplerReport(False, 0.0, mode, samples, alpha, None, float("nan"), name,
                             rows=rows, notes=[note], tree=tree, drafting=drafting)


# ----------------------------------------------------------------------------- calling


@unreadable
def _outputs(out, m: int, n_nodes: int, V: int, who: str):
    """(node [m], token [m]) long tensors from a sampler's return value, or (None, note)."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:  # a generator of two unpacked too,
        # where the chain modes refuse it
        return None, (f"{who} returned {type(out).__name__}"
                      f"{' of length ' + str(len(out)) if isinstance(out, (tuple, list)) else ''}"
                      f", not (node [B], token [B])")
    node, y = out
    res = []
    for what, x, hi in (("node", node, n_nodes), ("token", y, V)):
        try:
            t = torch.as_tensor(x)
        except (TypeError, ValueError, RuntimeError):
            return None, f"{who} returned a {type(x).__name__} as {what}, not a tensor"
        note = _dense(t, f"{who} returned {what}")
        if note:
            return None, note
        if t.shape != (m,):
            return None, (f"{who} returned {what} of shape {list(t.shape)} for {m} drafted "
                          f"trees; expected [{m}]")
        if t.dtype.is_complex or t.dtype == torch.bool:
            return None, f"{who} returned {what} of dtype {t.dtype}, not integers"
        t, note = readable(t, f"{who} returned {what}")  # the meta device: no values to read
        if note:
            return None, note
        t, note = whole_ids(t, f"{who} returned {what}")  # 2.0 is token 2, as in chain mode
        if note:
            return None, note
        if m and (int(t.min()) < 0 or int(t.max()) >= hi):
            bad = int(t[(t < 0) | (t >= hi)][0])
            return None, (f"{who} returned {what} {bad}, outside 0..{hi - 1}")
        res.append(t)
    return tuple(res), None


def _chunk(n_nodes: int, V: int, max_batch: int | None) -> int:
    per = 2 * n_nodes * V + n_nodes
    c = max(1, MAX_CALL_FLOATS // per)
    return c if max_batch is None else max(1, min(c, max_batch))


def _ramp(total: int, chunk: int) -> int:
    """The first call's size: a run of more than one call starts at `RAMP_FIRST_ROWS` trees
    and grows fourfold a call up to ``chunk``, so that a slow sampler's rate is measured (and a
    run past ``max_seconds`` stopped) before one full call of it ends; a run of one call keeps
    its one call (and its random draws)."""
    return chunk if total <= chunk else min(chunk, RAMP_FIRST_ROWS)


def _split(total: int, parts: int) -> list:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def tied_instance(V: int, D: int, seed: int = 13) -> Instance:
    """``random_instance(V, D, seed, denominator=4)`` (exact rows in quarters, prefix-dependent)
    whose root rows are tied: draft (1/2, 1/4, 1/4, 0, ...), so top-k drafting breaks a tie by
    token id, and target (1/4, 1/4, 1/2, 0, ...)."""
    from ...inputs.models import TableModel

    if not is_integer(V) or V < 3:
        raise OptionError(f"a tied instance needs an integer V >= 3, not {_repr_cut(V, 40)}")
    try:  # D and seed: random_instance's ranges
        base = random_instance(V, D, seed, denominator=4)
    except InstanceError as exc:
        raise OptionError(f"tied_instance: {exc}") from None

    def root(row, model):
        tables = [np.array(t, copy=True) for t in model.tables]
        tables[0] = np.array([[Fraction(x) for x in row] + [Fraction(0)] * (V - 3)],
                             dtype=object)
        return TableModel(V, tuple(tables))

    return Instance(V, D, root((Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)), base.target),
                    root((Fraction(1, 2), Fraction(1, 4), Fraction(1, 4)), base.draft))


def default_tree_instances(tree) -> list:
    """Default instances for a tree of depth D whose widest node has b children, all with
    prefix-dependent rows: ``random_instance(max(3, b), D, 11)``, ``random_instance(max(4, b),
    D, 12, alpha=0.5)`` (peaked rows) and
    [`tied_instance`][spectheory.testing.checks.tree.tied_instance] ``(max(3, b), D)`` (rows in
    quarters, tied root rows: top-k ties broken by token id), in float64."""
    tree = tree_shape(tree)
    b = max(len(k) for k in tree.children)
    D = tree.height
    V = max(4, b)  # the largest of the three; its deepest target table has V^(D+1) rows' entries
    # exact: the tied instance is drawn in exact quarters, under the exact limit
    check_size(V ** (D + 1), f"the default instances of a tree of depth {D}", True, None,
               f"V^(D+1) = {V}^{D + 1}",
               remedy="use a narrower or shallower tree, or give instances of your own "
                      "(--instance FILE)")
    return [random_instance(max(3, b), D, 11), random_instance(max(4, b), D, 12, alpha=0.5),
            tied_instance(max(3, b), D).to_float()]


# ----------------------------------------------------------------------------- modes


def _law_setup(spec, tree, drafting, instances, seed, draft_rows) -> list:
    """The drafted trees of every instance and each tree's exact conditional law, before any
    sampler call: a list of ``(drafted, laws, groups, paths)`` per instance (``laws[r]``
    [G_r, V], ``groups[r]`` [N+1] the cell group of each node, ``paths[r]`` the token paths)."""
    rows = 1 if drafting == "topk" else draft_rows  # top-k trees are deterministic
    V_max = max(inst.vocab_size for inst in instances)
    check_size(len(instances) * rows * tree.n_nodes * V_max, "tree law-mode count cells", False,
               MAX_LAW_CELLS, "drafted trees x (N+1) x V", remedy=_FIXED_LIMIT)  # before drafting
    g = torch.Generator().manual_seed(seed)
    drafted = [draft_trees(inst, tree, drafting, rows, g) for inst in instances]
    out = []
    for d in drafted:
        laws, groups, paths_of = [], [], []
        for r in range(d.tokens.shape[0]):
            paths, law = conditional_tree_law(spec, tree, d.tokens[r].tolist(), d.q[r], d.p[r])
            _, group = emitted_groups(tree, d.tokens[r].tolist())
            laws.append(law)
            groups.append(group)
            paths_of.append(paths)
        out.append((d, laws, groups, paths_of))
    return out


def _cell_probs(law, G: int, V: int) -> np.ndarray:
    probs = np.zeros(G * V)
    probs[:law.shape[0] * V] = law.reshape(-1).numpy()
    return probs


def _first_test(row_laws: list, unit: str) -> int | None:
    """The fewest samples (split evenly over the rows ``row_laws``, each a cell-probability
    vector) at which the family has a degree of freedom; None when every row's law is a point
    mass (no count gives one: a sample off the point fails the check instead)."""
    need = [stats.samples_for_a_test(pr, MIN_EXPECTED) for pr in row_laws]
    need = [x for x in need if x is not None]
    return None if not need else min(need) * len(row_laws)


def _refuse_few(samples: int, row_laws: list, counts: list, unit: str) -> None:
    """One line (`TooFewSamplesError`, an `OptionError`) when ``counts`` samples leave no row (``unit``) two bins of
    expected count `MIN_EXPECTED`: such a run tests nothing, so it is bad input, not a verdict
    (as in [`check_step`][spectheory.testing.checks.step.check_step] and on the command line of
    ``check-sampler``). Rows whose law is a point mass have no degree of freedom at any count
    and are judged by samples off the point instead."""
    need = [stats.samples_for_a_test(pr, MIN_EXPECTED) for pr in row_laws]
    if all(x is None for x in need):
        return
    if any(x is not None and n >= x for x, n in zip(need, counts)):
        return
    per = max(x for x in need if x is not None)
    first = _first_test(row_laws, unit)
    from ...runtime.errors import TooFewSamplesError

    raise TooFewSamplesError(f"samples = {samples:,} over {len(row_laws)} {unit} leave none of "
                             f"them two bins of expected count >= {MIN_EXPECTED:g}, so nothing "
                             f"would be tested; "
                             + _needs_text(per, len(row_laws), first, MAX_SAMPLES, "one"),
                             per * len(row_laws))


def _law_mode(sampler, spec, tree, drafting, instances, samples, alpha, seed, draft_rows,
              max_batch, notes, setup=None, pace=None):
    setup = _law_setup(spec, tree, drafting, instances, seed, draft_rows) if setup is None \
        else setup
    n_rows = sum(len(s[1]) for s in setup)
    per_row = _split(samples, n_rows)
    if min(per_row) < 1:
        raise TooFewSamplesError(f"samples = {samples} is fewer than the {n_rows} drafted trees", n_rows)
    G = tree.n_nodes
    row_laws = [_cell_probs(law, G, d.q.shape[-1]) for d, laws, _, _ in setup for law in laws]
    _refuse_few(samples, row_laws, per_row, "drafted trees")
    sg = torch.Generator().manual_seed(seed + 1)
    who = getattr(sampler, "_spectheory_label", "the tree sampler")
    parents = tuple(tree.parents)
    name = spec.name
    tests, worst, impossible = [], None, None
    N = tree.n_drafted
    obs_of, note = _mixed_counts(sampler, setup, per_row, parents, G, N, max_batch, seed, sg, who,
                                 pace)
    if note:
        return _failed("tree-law", samples, alpha, name, note, tree.describe(), drafting, n_rows)
    sizes = {}
    for d, _, _, _ in setup:
        sizes[d.q.shape[-1]] = sizes.get(d.q.shape[-1], 0) + d.tokens.shape[0]
    if max(sizes.values()) < 2:
        notes = list(notes) + ["every vocabulary size has one drafted tree, so each call's rows are one "
                     "tree repeated and a sampler that mixes up the rows of a batch goes "
                     "untested; give two instances of one vocabulary size (or iid/norep "
                     "drafting) to test it"]
    offset = 0
    for inst_i, (d, laws, groups, paths_of) in enumerate(setup):
        R = d.tokens.shape[0]
        V = d.q.shape[-1]
        counts = per_row[offset:offset + R]
        offset += R
        obs = obs_of[inst_i]
        for r in range(R):
            probs = _cell_probs(laws[r], G, V)
            o = obs[r * G * V:(r + 1) * G * V]
            t = stats.row_chi_square(o, probs, counts[r], MIN_EXPECTED)
            tests.append(t)

            def label(c, r=r, paths=paths_of[r], toks=d.tokens[r].tolist()):
                where = f"instance {inst_i}, drafted tree {r} (tokens {toks})"
                if c < 0:
                    return f"{where}: pooled cells (expected < {MIN_EXPECTED:g} each)"
                gg, yy = divmod(int(c), V)  # gg < len(paths): other groups have no mass
                return f"{where}: path {list(paths[gg])}, tau = {len(paths[gg])}, Y = {yy}"

            impossible, worst = _cells(t, probs, o, label, "probability 0", impossible, worst)
    return _tree_report("tree-law", tests, samples, alpha, name, worst, impossible,
                        tree.describe(), drafting, notes, min(per_row))


def _mixed_counts(sampler, setup, per_row, parents, G, N, max_batch, seed, sg, who, pace=None):
    """Call the sampler on every drafted tree its exact number of times (``per_row``, in setup
    order), the trees of all instances of one vocabulary size V mixed: each call gets a random
    draw (without replacement) from the trees' remaining counts, shuffled, so the rows of a
    batch are different trees in random order, as in an engine's batch. A sampler that mixes up
    the rows of a batch (row 0's target rows for every row, outputs rolled by one) then emits
    one tree's law under another's label and fails; a correct sampler's outputs are still
    independent draws from each tree's own law, with the same count per tree, so the statistics
    (and the false-alarm rate) are those of one tree a call. The mixing has its own stream,
    keyed by ``seed``. Returns (per instance the counts [R G V] of (tree, node group, Y), None)
    or (None, a note on unusable outputs)."""
    rng = np.random.default_rng([int(seed), 0x6D6978])
    start, by_v = 0, {}
    for i, (d, _, _, _) in enumerate(setup):
        R = d.tokens.shape[0]
        by_v.setdefault(d.q.shape[-1], []).append((i, start, R))
        start += R
    obs_of = [None] * len(setup)
    for V, members in sorted(by_v.items()):
        tok = torch.cat([setup[i][0].tokens for i, _, _ in members])
        q = torch.cat([setup[i][0].q for i, _, _ in members])
        p = torch.cat([setup[i][0].p for i, _, _ in members])
        grp = torch.cat([torch.tensor(setup[i][2], dtype=torch.long) for i, _, _ in members])
        left = np.concatenate([per_row[s0:s0 + R] for _, s0, R in members]).astype(np.int64)
        T = len(left)
        obs = np.zeros(T * G * V, dtype=np.int64)
        chunk = _chunk(G, V, max_batch)
        ramp = _ramp(int(left.sum()), chunk)
        while left.sum() > 0:
            total = int(left.sum())
            m = min(chunk, total, ramp)
            ramp *= 4
            take = left.copy() if m == total else rng.multivariate_hypergeometric(left, m)
            left -= take
            labels = np.repeat(np.arange(T), take)
            rng.shuffle(labels)
            rows = torch.as_tensor(labels, dtype=torch.long)
            out = sampler(tok[rows], parents, q[rows], p[rows], sg)
            res, note = _outputs(out, m, N + 1, V, who=who)
            if note:
                return None, note
            node, y = res
            cell = rows * (G * V) + grp[rows, node] * V + y
            obs += np.bincount(cell.numpy(), minlength=T * G * V)
            if pace is not None:
                pace.add(m)
        at = 0
        for i, _, R in members:
            obs_of[i] = obs[at * G * V:(at + R) * G * V]
            at += R
    return obs_of, None


def _ancestors(tree: TreeShape):
    """[N+1, D] node ids on the path to each node at depths 1..D (0 past the node's depth)."""
    D = tree.height
    anc = np.zeros((tree.n_nodes, max(D, 1)), dtype=np.int64)
    par, depth = tree.parent, tree.depth
    for u in range(1, tree.n_nodes):
        v = u
        while v != 0:
            anc[u, depth[v] - 1] = v
            v = par[v]
    return torch.as_tensor(anc), torch.tensor(depth, dtype=torch.long)


def _lossless_mode(sampler, name, tree, drafting, instances, samples, alpha, seed, max_batch,
                   notes, pace=None):
    D = tree.height
    for inst in instances:
        V = inst.vocab_size
        if V ** (D + 1) > MAX_LOSSLESS_CELLS:
            raise OptionError(f"tree mode 'lossless' compares V^(D+1) = {V}^{D + 1} = "
                              f"{V ** (D + 1):,} sequences, over the limit of "
                              f"{MAX_LOSSLESS_CELLS:,}; use mode 'law' or a smaller instance")
    per = _split(samples, len(instances))
    if min(per) < 1:
        raise TooFewSamplesError(f"samples = {samples} is fewer than the {len(instances)} instances", len(instances))
    targets = [_lossless_target(inst, D) for inst in instances]
    _refuse_few(samples, targets, per, "instances")
    g = torch.Generator().manual_seed(seed)
    sg = torch.Generator().manual_seed(seed + 1)
    who = getattr(sampler, "_spectheory_label", "the tree sampler")
    parents = tuple(tree.parents)
    anc, depth = _ancestors(tree)
    N = tree.n_drafted
    tests, worst, impossible = [], None, None
    for inst_i, (inst, n) in enumerate(zip(instances, per)):
        V = inst.vocab_size
        _, pl = _levels_for(inst, D)
        chunk = _chunk(tree.n_nodes, V, max_batch)
        obs = np.zeros(V ** (D + 1), dtype=np.int64)
        done = 0
        ramp = _ramp(n, chunk)
        while done < n:
            m = min(chunk, n - done, ramp)
            ramp *= 4
            d = draft_trees(inst, tree, drafting, m, g)
            out = sampler(d.tokens.clone(), parents, d.q.clone(), d.p.clone(), sg)
            res, note = _outputs(out, m, N + 1, V, who=who)
            if note:
                return _failed("tree-lossless", samples, alpha, name, note, tree.describe(),
                               drafting, len(instances))
            node, y = res
            full = torch.cat([torch.zeros(m, 1, dtype=torch.long), d.tokens], dim=1)
            tau = depth[node]
            path = full.gather(1, anc[node])  # [m, D] tokens on the path (past tau: root's 0)
            pref = torch.zeros(m, dtype=torch.long)
            for j in range(D + 1):
                drawn = torch.multinomial(pl[j][pref], 1, generator=g)[:, 0]
                tok = torch.where(j < tau, path[:, min(j, D - 1)],
                                  torch.where(j == tau, y, drawn))
                pref = pref * V + tok
            obs += np.bincount(pref.numpy(), minlength=V ** (D + 1))
            done += m
            if pace is not None:
                pace.add(m)
        probs = targets[inst_i]
        t = stats.row_chi_square(obs, probs, n, MIN_EXPECTED)
        tests.append(t)

        impossible, worst = _cells(t, probs, obs, _sequence_label(inst_i, V, D),
                                   "target probability 0", impossible, worst)
    return _tree_report("tree-lossless", tests, samples, alpha, name, worst, impossible,
                        tree.describe(), drafting, notes, min(per))


def _lossless_target(inst: Instance, D: int) -> np.ndarray:
    """The target's law of D + 1 tokens [V^(D+1)] (float64)."""
    _, pl = _levels_for(inst, D)
    return path_probabilities(pl[:D + 1], torch.ones(1, dtype=torch.float64))[D + 1].numpy()


# ----------------------------------------------------------------------------- API


@guarded_check
def check_tree_sampler(sampler: Callable, verifier: Any = None, tree: Any = (2, 1),
                       drafting: str | None = None, instances: Sequence | None = None,
                       samples: int | str | None = None, alpha: float = 1e-3,
                       mode: str = "law", seed: int = 0, draft_rows: int = 6,
                       max_batch: int | None = None,
                       budget_s: float | None = None,
                       max_seconds: float | None = MAX_SECONDS) -> TreeSamplerReport:
    """Check a tree sampler (the module's canonical signature) against the exact law.

    Parameters
    ----------
    sampler : callable
        ``sampler(tokens [B, N], parents, q [B, N+1, V], p [B, N+1, V], generator) ->
        (node [B], token [B])`` (module doc); an engine through
        [`tree_engine_sampler`][spectheory.testing.checks.tree_ports.tree_engine_sampler].
    verifier : str or VerifierSpec, optional
        The rule the sampler claims (default: the sampler's ``spectheory_tree_verifier``, set by
        [`tree_engine_sampler`][spectheory.testing.checks.tree_ports.tree_engine_sampler], else
        ``topk``), one with a node rule: ``topk`` (EAGLE's
        ``evaluate_posterior``), ``sglang-tree`` (SGLang's kernel;
        [`sglang_tree_verifier`][spectheory.verifiers.sglang_tree.sglang_tree_verifier] with
        thresholds), ``specinfer``, ``specinfer-norep``. In ``lossless`` mode it only picks the
        default drafting.
    tree : any form of [`tree_shape`][spectheory.engine.drafttrees.tree_shape]
        Branching factors (``"2,1"``), a choices list (``[[0], [1], [0, 0]]``), ``{"parents":
        [...]}``.
    drafting : {"iid", "norep", "topk"}, optional
        How the kit drafts the trees; default the sampler's ``spectheory_tree_drafting``, else
        the first scheme the verifier declares (`VerifierSpec.tree_drafting`: the one its
        engine uses).
    instances : list of Instance, optional
        Default [`default_tree_instances`][spectheory.testing.checks.tree.default_tree_instances].
    samples : int or "auto"
        Sampler outputs drawn in all (split evenly over drafted trees / instances); default
        `DEFAULT_SAMPLES` (20,000), or ``"auto"`` when ``budget_s`` is given.
    alpha : float
        Family-wise false-alarm rate.
    mode : {"law", "lossless"}
        Module doc.
    draft_rows : int
        Drafted trees per instance in law mode (one under ``topk``: the tree is deterministic),
        at most `MAX_DRAFT_ROWS`; ``samples`` must be at least the drafted trees in all.
    max_batch : int, optional
        Most drafted trees handed to one call.
    budget_s : float, optional
        Size the run by time (``samples="auto"``): pilot checks of 32, 128, ... samples on the
        same trees time the sampler, then the largest sample count whose predicted cost fills
        95% of the budget runs ([`size_run`][spectheory.testing.statistics.budget.size_run], as
        ``check_sampler`` sizes its runs); the plan, with the bias it detects, goes to stderr
        before the run and into ``report.budget``. Its verdict is that of
        ``check_tree_sampler(..., samples=report.budget.samples)``.
    max_seconds : float or None
        Refuse a run that takes longer, as ``check_sampler`` does: before the first call when
        the check's own least cost a sample already exceeds it, and with a `TimeLimitError`
        once the rate of the calls so far projects past it (a run of more than one call starts
        with a call of `RAMP_FIRST_ROWS` trees, growing fourfold). Below the default, one call
        still running twice ``max_seconds`` plus 1 s after it began is stopped too (a call that
        never returns). ``None``: no limit. Default one day.

    Returns
    -------
    TreeSamplerReport
        A [`SamplerReport`][spectheory.testing.checks.report.SamplerReport] naming the tree and the
        drafting checked; a note when the drafting is not one the verifier is declared lossless
        under.
    """
    if mode not in TREE_MODES:
        raise OptionError(f"unknown tree mode {mode!r}; choose from {', '.join(TREE_MODES)}")
    seed = kit_seed(seed)
    import time

    if budget_s is not None:
        torch.zeros(0)  # the lazy import of torch is the process's, not the check's
    start = time.perf_counter()  # a budget covers the rest of the call
    if samples is None:
        samples = "auto" if budget_s is not None else DEFAULT_SAMPLES
    if samples == "auto":
        if budget_s is None:
            raise OptionError("samples = 'auto' needs budget_s, the seconds the whole check "
                              "may take")
        from ..statistics.budget import check_budget

        budget_s = check_budget(budget_s)
    elif budget_s is not None:
        raise OptionError(f"samples = {samples!r} and budget_s = {budget_s!r} both size the "
                          f"run: give one (samples='auto' with budget_s)")
    elif isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or \
            samples < 1:
        raise OptionError(f"samples = {samples!r} must be a positive integer")
    elif samples > MAX_SAMPLES:
        raise OptionError(f"samples = {samples:,} is over the tree mode's limit of "
                          f"{MAX_SAMPLES:,} (at least a day of calls at 10^5 samples a second)")
    _refuse_time(1 if samples == "auto" else int(samples), max_seconds)
    alpha = level("alpha", alpha)
    if isinstance(draft_rows, bool) or not isinstance(draft_rows, int) or draft_rows < 1:
        raise OptionError(f"draft_rows = {draft_rows!r} must be a positive integer")
    if draft_rows > MAX_DRAFT_ROWS:
        raise OptionError(f"draft_rows = {draft_rows:,} is over the limit of {MAX_DRAFT_ROWS:,} "
                          "drafted trees per instance (each tree's exact law is computed before "
                          "the first call)")
    if max_batch is not None and (isinstance(max_batch, bool) or not isinstance(max_batch, int)
                                  or max_batch < 1):
        raise OptionError(f"max_batch = {max_batch!r} must be a positive integer")
    if not callable(sampler):
        raise OptionError(f"the tree sampler must be callable, not {type(sampler).__name__}")
    shape = tree_shape(tree)
    if shape.n_drafted > MAX_TREE_NODES:
        raise OptionError(f"tree {shape.describe()} has {shape.n_drafted:,} drafted nodes; the "
                          f"tree mode checks at most {MAX_TREE_NODES:,}")
    if verifier is None:
        verifier = getattr(sampler, "spectheory_tree_verifier", None) or "topk"
    spec = _tree_rule(verifier) if mode == "law" else get_verifier(verifier, multi_path=True)
    if drafting is None:
        drafting = getattr(sampler, "spectheory_tree_drafting", None) or default_drafting(spec)
    if drafting not in TREE_DRAFTING:
        raise OptionError(f"unknown tree drafting scheme {drafting!r}; choose from "
                          f"{', '.join(TREE_DRAFTING)}")
    instances = (default_tree_instances(shape) if instances is None
                 else as_list(instances, "instances", "spectheory Instances", lone=(Instance,)))
    insts = []
    for inst in instances:
        if not isinstance(inst, Instance):
            raise OptionError(f"a tree-mode instance must be a spectheory Instance, not "
                              f"{type(inst).__name__}")
        _check_tables(inst, len(insts))
        _check_drafting_fits(inst, shape, drafting)
        insts.append(inst)
    if not insts:
        raise OptionError("no instances to check on")
    notes = []
    declared = spec.tree_drafting
    if declared and drafting not in declared:
        notes.append(f"{spec.name} is declared lossless under {', '.join(declared)} drafting, "
                     f"not {drafting}" + (" (law mode checks its own law)" if mode == "law"
                                          else ""))
    fn = guarded(sampler, "tree sampler")
    who = fn._spectheory_label.removeprefix("tree sampler ")
    if mode == "law":
        trees = len(insts) * (1 if drafting == "topk" else draft_rows)
        if samples != "auto" and samples < trees:  # before any tree is drafted
            raise TooFewSamplesError(f"samples = {samples} is fewer than the {trees} drafted trees", trees)
        setup = _law_setup(spec, shape, drafting, insts, seed, draft_rows)
        rows = [_cell_probs(law, shape.n_nodes, d.q.shape[-1]) for d, laws, _, _ in setup
                for law in laws]

        def run(n):
            rep = _law_mode(fn, spec, shape, drafting, insts, n, alpha, seed, draft_rows,
                            max_batch, notes, setup, _Pace(n, max_seconds, "check_tree_sampler"))
            rep.sampler = who
            return rep
    else:
        rows = None

        def run(n):
            rep = _lossless_mode(fn, spec.name, shape, drafting, insts, n, alpha, seed,
                                 max_batch, notes, _Pace(n, max_seconds, "check_tree_sampler"))
            rep.sampler = who
            return rep
    # a call that never returns, pilots' too: the sooner of the budget's and max_seconds' bounds
    if samples == "auto" and (max_seconds is None or max_seconds >= budget_s):
        bound = _budget_bound(budget_s)
    else:
        bound = _caller_bound(max_seconds, MAX_SECONDS)
    with bound:
        if samples != "auto":
            return run(int(samples))
        if rows is None:
            rows = [_lossless_target(inst, shape.height) for inst in insts]
        return _budgeted(fn, run, rows, budget_s, alpha, start)


def _budgeted(fn, run, rows: list, budget_s: float, alpha: float, start: float
              ) -> TreeSamplerReport:
    """``samples="auto"``: pilot checks, the plan on stderr, the run
    ([`size_run`][spectheory.testing.statistics.budget.size_run]; ``rows`` the cell probabilities of
    the check's rows, for the smallest count that tests a degree of freedom and the planned
    detectable bias)."""
    import sys
    import time

    from ..statistics import budget as B

    clock = fn._spectheory_clock
    minimum = _first_test(rows, "rows") or len(rows)
    first = run(minimum)  # warm-up (imports, first calls): its time counts in the budget, not
    # in the fits; a failure no correct sampler produces ends the call here
    if not first.passed and first.p_value == 0.0:
        first.notes.append(f"found by a first check of {first.samples:,} samples: no correct "
                           f"sampler fails this way, so the budgeted run was not started")
        first.budget = B.BudgetPlan(budget_s, first.samples, time.perf_counter() - start,
                                    [(first.samples, time.perf_counter() - start)], [], 0.0,
                                    0.0, 0.0, alpha)
        return first

    def timed(n):
        inside = clock[0]
        return run(n), clock[0] - inside

    sized = B.size_run(timed, budget_s, minimum, start=start,
                       done=lambda rep: not rep.passed and rep.p_value == 0.0)
    n = sized["samples"]
    if n is None:  # a pilot found a failure no correct sampler produces
        last = sized["result"]
        last.notes.append(f"found by a pilot check of {last.samples:,} samples: no correct "
                          f"sampler fails this way, so the budgeted run was not started")
        last.budget = B.BudgetPlan(budget_s, last.samples, time.perf_counter() - start,
                                   sized["pilot"], [], sized["fixed_s"], sized["sampler_s"], 0.0,
                                   alpha)
        return last
    predicted = (time.perf_counter() - start) + sized["fixed_s"] + sized["per_sample_s"] * n
    plan_ = B.BudgetPlan(budget_s, n, predicted, sized["pilot"], sized["kit_pilot"],
                         sized["fixed_s"], sized["sampler_s"], sized["kit_s"], alpha, POWER,
                         B.planned_tv(rows, n, alpha, POWER, MIN_EXPECTED))
    sys.stderr.write(f"check_tree_sampler: {plan_.summary()}\n")
    sys.stderr.flush()
    report = run(n)
    report.budget = plan_
    return report


def assert_tree_sampler(sampler: Callable, verifier: Any = None, **kwargs
                        ) -> TreeSamplerReport:
    """[`check_tree_sampler`][spectheory.testing.checks.tree.check_tree_sampler], raising
    ``AssertionError`` with the report when it fails (for test suites)."""
    rep = check_tree_sampler(sampler, verifier, **kwargs)
    if not rep.passed:
        raise AssertionError(str(rep))
    return rep


__all__ = ["DEFAULT_SAMPLES", "DraftedTrees", "MAX_CALL_FLOATS", "MAX_DRAFT_OUTCOMES", "MAX_LAW_CELLS", "MAX_SAMPLES",
           "MAX_LOSSLESS_CELLS", "MAX_TREE_NODES", "TREE_MODES", "TreeSamplerReport",
           "assert_tree_sampler", "check_tree_sampler", "conditional_tree_law",
           "default_tree_instances", "draft_trees", "emitted_groups", "tied_instance",
           "tree_output_law"]
