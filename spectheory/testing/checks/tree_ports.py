"""CPU ports of two engines' tree samplers, in their own layouts, and the presets that map the kit's
drafted trees onto them.

* [`tree_speculative_sampling_target_only`][spectheory.testing.checks.tree_ports.tree_speculative_sampling_target_only]:
  SGLang's tree kernel, ported line by line from ``sgl-kernel/csrc/speculative/speculative_sampling.cuh``
  (``TreeSpeculativeSamplingTargetOnly``, SGLang repository; the Python entry point
  ``sgl_kernel.tree_speculative_sampling_target_only``). The kernel is CUDA-only; the port runs one
  CUDA block's loop for every batch row at once (torch masks instead of a block per row), with the
  same reads, writes and comparisons in the inputs' dtype.
* [`evaluate_posterior`][spectheory.testing.checks.tree_ports.evaluate_posterior]: EAGLE's reference
  verification (``eagle/model/utils.py``, ``evaluate_posterior``, SafeAILab/EAGLE), both branches.

Presets ([`TreeLayout`][spectheory.testing.checks.tree_ports.TreeLayout]) say how a drafted tree in
the kit's canonical layout ([`spectheory.testing.checks.tree`][spectheory.testing.checks.tree])
becomes the engine's arguments and how its outputs read back;
[`tree_engine_sampler`][spectheory.testing.checks.tree_ports.tree_engine_sampler] wraps an engine
function (the real one when importable, or a port) into a canonical tree sampler:

```python
from spectheory.testing import check_tree_sampler
from spectheory.testing import SGLANG_TREE, tree_engine_sampler
from spectheory.testing import tree_speculative_sampling_target_only as kernel
# on a GPU machine: from sgl_kernel import tree_speculative_sampling_target_only as kernel
print(check_tree_sampler(tree_engine_sampler(kernel, SGLANG_TREE), "sglang-tree",
                         tree=[[0], [1], [0, 0], [0, 1], [1, 0]], samples=6000))
```

Planted bugs (`SGLANG_TREE_BUGS`, `EAGLE_POSTERIOR_BUGS`): each port with one
line changed, for the tests that show the tree mode catches them
([`sglang_tree_bug`][spectheory.testing.checks.tree_ports.sglang_tree_bug],
[`eagle_posterior_bug`][spectheory.testing.checks.tree_ports.eagle_posterior_bug]).
"""

from __future__ import annotations

import dataclasses
import inspect
import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from ...engine.drafttrees import tree_shape
from ...runtime import backend as B
from ...runtime._lazy import torch
from ...runtime.errors import OptionError
from ...verifiers.specinfer import _row_at
from ...runtime.limits import shown as _repr_cut

#: One-line bugs planted in the SGLang port (name -> what changes).
SGLANG_TREE_BUGS = {
    "running-sum": "prob_acc = p(child) instead of prob_acc += p(child): the siblings' running "
                   "sum is not accumulated",
    "residual": "the draft row is not written at a rejected sibling's token, so the final draw "
                "keeps the rejected tokens (residual not updated)",
    "parent-row": "cur_prob_offset is not moved to the accepted child: its children are tested "
                  "against, and Y drawn from, the parent's row",
    "threshold": "threshold_acc = 0.5 left on whatever the caller passes",
}
#: One-line bugs planted in the EAGLE port (name -> what changes).
EAGLE_POSTERIOR_BUGS = {
    "running-sum": "gtp[x] = 0 without gtp / gtp.sum(): later siblings are tested against the "
                   "unconditioned target (the mass of the rejected siblings is not accounted)",
    "residual": "gtp[x] = 0 dropped: the residual is not updated after a rejected sibling",
    "parent-row": "the bonus row read at accept_length - 2: the parent's row for a child",
    "threshold": "qx = 0.5 instead of 1.0: accept with min(1, p / 0.5), a threshold below 1",
}


# ----------------------------------------------------------------------------- SGLang


def _sglang_kernel(predicts, accept_index, accept_token_num, candidates, retrive_index,
                   retrive_next_token, retrive_next_sibling, uniform_samples,
                   uniform_samples_for_final_sampling, target_probs, draft_probs,
                   threshold_single=1.0, threshold_acc=1.0, deterministic=True, bug=None):
    del deterministic  # the CUDA reduction order; one order on the CPU
    if bug == "threshold":
        threshold_acc = 0.5
    bs, ndt = candidates.shape
    d = target_probs.shape[-1]
    nspec = accept_index.shape[1]
    dtype = target_probs.dtype
    threshold_acc = max(float(threshold_acc), 1e-9)  # the host side's capped_threshold_acc
    ar = torch.arange(bs, device=candidates.device)
    prob_acc = torch.zeros(bs, dtype=dtype, device=candidates.device)
    cur_row = torch.zeros(bs, dtype=torch.long, device=candidates.device)  # cur_prob_offset / d
    coin = uniform_samples[:, 0].clone()
    last = retrive_index[:, 0].long().clone()  # last_accepted_retrieve_idx
    accept_index[:, 0] = last.to(accept_index.dtype)
    num_acc = torch.zeros(bs, dtype=torch.long, device=candidates.device)
    cur_index = torch.zeros(bs, dtype=torch.long, device=candidates.device)
    active = torch.ones(bs, dtype=torch.bool, device=candidates.device)
    for _ in range(1, nspec):
        cur_index = torch.where(active, retrive_next_token[ar, cur_index].long(), cur_index)
        searching = active & (cur_index != -1)
        while bool(searching.any()):
            ci = cur_index.clamp(min=0)
            draft_index = retrive_index[ar, ci].long()
            token = candidates[ar, ci].long()
            tp = target_probs[ar, cur_row, token]
            if bug == "running-sum":
                prob_acc = torch.where(searching, tp, prob_acc)
            else:
                prob_acc = torch.where(searching, prob_acc + tp, prob_acc)
            acc = searching & ((coin <= prob_acc / threshold_acc) | (tp >= threshold_single))
            rej = searching & ~acc
            # accept token
            prob_acc = torch.where(acc, torch.zeros_like(prob_acc), prob_acc)
            if bug != "parent-row":
                cur_row = torch.where(acc, ci, cur_row)
            coin = torch.where(acc, uniform_samples[ar, ci], coin)
            predicts[last[acc]] = token[acc].to(predicts.dtype)
            num_acc = num_acc + acc.long()
            accept_index[ar[acc], num_acc[acc]] = draft_index[acc].to(accept_index.dtype)
            last = torch.where(acc, draft_index, last)
            # reject: draft_probs[cur_prob_offset + token] = target_probs[...]
            if bug != "residual":
                b, r, t = ar[rej], cur_row[rej], token[rej]
                draft_probs[b, r, t] = target_probs[b, r, t]
            cur_index = torch.where(rej, retrive_next_sibling[ar, ci].long(), cur_index)
            searching = rej & (cur_index != -1)
        active = active & (cur_index != -1)  # if (cur_index == -1) break;
    accept_token_num[:] = num_acc.to(accept_token_num.dtype)
    # the final draw, with a different coin, from relu(target - draft) at the current row
    coin = uniform_samples_for_final_sampling
    q_row = target_probs[ar, cur_row]
    p_row = draft_probs[ar, cur_row]
    p_row = torch.where((num_acc != nspec - 1).unsqueeze(1), p_row, torch.zeros_like(p_row))
    relu = torch.clamp(q_row - p_row, min=0)
    u = coin * relu.sum(dim=1)
    cdf = relu.cumsum(dim=1)
    valid = relu > 0
    hit = valid & (cdf > u.unsqueeze(1))
    idx = torch.arange(d, device=candidates.device).expand(bs, d)
    first = torch.where(hit, idx, torch.full_like(idx, d)).min(dim=1).values
    last_valid = torch.where(valid, idx, torch.full_like(idx, -1)).max(dim=1).values
    sampled = torch.where(first == d, torch.where(last_valid == -1, torch.full_like(first, d - 1),
                                                  last_valid), first)
    predicts[last] = sampled.to(predicts.dtype)


def tree_speculative_sampling_target_only(predicts, accept_index, accept_token_num, candidates,
                                          retrive_index, retrive_next_token,
                                          retrive_next_sibling, uniform_samples,
                                          uniform_samples_for_final_sampling, target_probs,
                                          draft_probs, threshold_single=1.0, threshold_acc=1.0,
                                          deterministic=True) -> None:
    """SGLang's ``tree_speculative_sampling_target_only`` on the CPU (module doc), writing its
    outputs in place as the kernel does.

    Shapes (bs batch rows, n = num_draft_tokens tree nodes with node 0 the root, d the
    vocabulary, s = num_speculative_tokens = tree depth + 1):
    ``predicts [bs * n]`` int32 (out: the accepted tokens at their parents' retrieve index and
    the final token at the last accepted one), ``accept_index [bs, s]`` int32 (out: the
    retrieve indices of the root and the accepted nodes), ``accept_token_num [bs]`` int32 (out:
    tau), ``candidates [bs, n]`` (token of each node), ``retrive_index [bs, n]`` (a node's
    index into ``predicts``), ``retrive_next_token [bs, n]`` (first child, -1 none),
    ``retrive_next_sibling [bs, n]`` (next sibling, -1 none), ``uniform_samples [bs, n]`` (the
    coin used at each node), ``uniform_samples_for_final_sampling [bs]``, ``target_probs
    [bs, n, d]`` (target row after each node), ``draft_probs [bs, n, d]`` (zeros from the
    callers; the kernel writes the target probability of each rejected token into it).

    The rule: sglang_tree's module doc ([`spectheory.verifiers.sglang_tree`][spectheory.verifiers.sglang_tree]).
    The final draw is the inverse CDF of relu(target - draft) at the current node with
    ``u = coin * sum``: the first token whose running sum exceeds u among tokens of positive
    mass, else the last such token, else d - 1 (flashinfer's ``DeviceSamplingFromProb`` and the
    kernel's fallback). At the deepest level (tau = s - 1) the draft row is not read.
    """
    _sglang_kernel(predicts, accept_index, accept_token_num, candidates, retrive_index,
                   retrive_next_token, retrive_next_sibling, uniform_samples,
                   uniform_samples_for_final_sampling, target_probs, draft_probs,
                   threshold_single, threshold_acc, deterministic)


def sglang_tree_bug(name: str) -> Callable:
    """The SGLang port with the planted bug ``name`` (`SGLANG_TREE_BUGS`), same signature."""
    if name not in SGLANG_TREE_BUGS:
        raise OptionError(f"unknown planted bug {name!r}; choose from "
                          f"{', '.join(SGLANG_TREE_BUGS)}")

    def kernel(predicts, accept_index, accept_token_num, candidates, retrive_index,
               retrive_next_token, retrive_next_sibling, uniform_samples,
               uniform_samples_for_final_sampling, target_probs, draft_probs,
               threshold_single=1.0, threshold_acc=1.0, deterministic=True):
        _sglang_kernel(predicts, accept_index, accept_token_num, candidates, retrive_index,
                       retrive_next_token, retrive_next_sibling, uniform_samples,
                       uniform_samples_for_final_sampling, target_probs, draft_probs,
                       threshold_single, threshold_acc, deterministic, bug=name)

    kernel.__name__ = kernel.__qualname__ = f"sglang_tree_{name.replace('-', '_')}"
    return kernel


# ----------------------------------------------------------------------------- EAGLE


def _evaluate_posterior(logits, candidates, logits_processor, rand, bug=None):
    import torch  # the module itself, not the lazy stand-in: read ~5 times a call, per sample

    if logits_processor is None:  # greedy
        posterior_mask = (candidates[:, 1:].to(logits.device)
                          == torch.argmax(logits[:, :-1], dim=-1)).int()
        candidates_accept_length = torch.cumprod(posterior_mask, dim=1).sum(dim=1)
        accept_length = candidates_accept_length.max()
        if accept_length == 0:
            best_candidate = torch.tensor(0, dtype=torch.long, device=candidates.device)
        else:
            best_candidate = torch.argmax(candidates_accept_length).to(torch.long)
        return best_candidate, accept_length, logits[best_candidate, accept_length]
    qx = 0.5 if bug == "threshold" else 1.0
    # the token ids read once as Python lists: EAGLE's comparisons of ids (is_eq, the first
    # matching path, x.item(), the candidate set) are integer comparisons, the same on lists as
    # on the tensor; its arithmetic on gtp stays in torch, in the logits' dtype (a coin r is
    # compared with gtp(x) / qx there, rounded to that dtype as torch rounds it)
    rows = candidates.tolist()
    accept_length = 1
    accept_cand = rows[0][:1]
    best_candidate = 0
    adjustflag = False
    gtp = None
    for i in range(1, len(rows[0])):
        if i != accept_length:
            break
        adjustflag = False
        is_eq = [row[:accept_length] == accept_cand for row in rows]
        fi = is_eq.index(True)
        gt_logits = logits[fi, i - 1][None]
        gt_logits = logits_processor(None, gt_logits)[0]
        gtp = torch.softmax(gt_logits, dim=0)
        candidates_set = []
        for j in range(len(rows)):
            if is_eq[j]:
                xi = rows[j][i]
                if xi in candidates_set or xi == -1:
                    continue
                candidates_set.append(xi)
                r = rand()
                px = gtp[xi]
                acp = px / qx
                if r <= acp:
                    accept_cand = accept_cand + [xi]
                    accept_length += 1
                    best_candidate = j
                    break
                else:
                    if bug != "residual":
                        gtp[xi] = 0
                    if bug != "running-sum":
                        gtp = gtp / gtp.sum()
                    adjustflag = True
    if adjustflag and accept_length != candidates.shape[1]:
        sample_p = gtp
    else:
        row = accept_length - 1
        if bug == "parent-row" and accept_length >= 2:
            row = accept_length - 2
        gt_logits = logits[best_candidate, row][None]
        gt_logits = logits_processor(None, gt_logits)[0]
        sample_p = torch.softmax(gt_logits, dim=0)
    return torch.tensor(best_candidate), accept_length - 1, sample_p


def evaluate_posterior(logits, candidates, logits_processor, rand: Callable = random.random):
    """EAGLE's ``evaluate_posterior`` (``eagle/model/utils.py``, SafeAILab/EAGLE), ported with its
    control flow; one sequence.

    ``logits [K, L+1, V]``: the target logits along each of the K leaf paths (row i: after the
    path's first i + 1 tokens); ``candidates [K, L+1]`` int64: the root token then the path's
    drafted tokens, -1 past a shorter path's leaf; ``logits_processor``: ``None`` for greedy, else
    a callable ``(input_ids, scores) -> scores`` (temperature, top-k, top-p). ``rand``: the coin
    source (EAGLE calls ``random.random()``). Returns ``(best_candidate, accept_length,
    sample_p)``: the leaf path chosen, tau, and the law the caller draws the next token from
    (``torch.multinomial(sample_p, 1)``). The sampling branch is the top-k rule: at the current
    node the distinct children are tried in path order, child x accepted with probability
    gtp(x), and on rejection gtp(x) = 0 and gtp is renormalised; Y ~ gtp after a rejection, else
    the target row at the accepted node."""
    return _evaluate_posterior(logits, candidates, logits_processor, rand)


def eagle_posterior_bug(name: str) -> Callable:
    """The EAGLE port with the planted bug ``name`` (`EAGLE_POSTERIOR_BUGS`), same signature."""
    if name not in EAGLE_POSTERIOR_BUGS:
        raise OptionError(f"unknown planted bug {name!r}; choose from "
                          f"{', '.join(EAGLE_POSTERIOR_BUGS)}")

    def posterior(logits, candidates, logits_processor, rand=random.random):
        return _evaluate_posterior(logits, candidates, logits_processor, rand, bug=name)

    posterior.__name__ = posterior.__qualname__ = f"eagle_posterior_{name.replace('-', '_')}"
    return posterior


# ----------------------------------------------------------------------------- bug models


def _running_max_rule(member, tok, q_rows, p_rows):
    """SGLang without the running sum: accept c_j when U <= p(t_j), so with c_j = max_{i<=j}
    p(t_i) child j is accepted w.p. c_j - c_{j-1}; Y as the kernel (the tried tokens removed)."""
    K, V = tok.shape[1], p_rows.shape[-1]
    zero = B.zeros_like(p_rows[..., 0])
    survive, cprev, tried, acc = B.ones_like(zero), zero, B.zeros_like(p_rows), []
    for j in range(K):
        t, active = tok[:, j], member[:, :, j] == 1
        c = B.where(active, B.maximum(cprev, _row_at(p_rows, t)), cprev)
        a = B.where(active, B.minimum(c - cprev, survive), zero)
        acc.append(a)
        survive, cprev = survive - a, c
        oh = B.one_hot(B.broadcast_to(B.expand_dims(t, 1), active.shape), V, p_rows)
        tried = B.maximum(tried, B.where(B.expand_dims(active, -1), oh, B.zeros_like(tried)))
    kept = p_rows * (1 - tried)
    return B.stack(acc, axis=2), survive, B.safe_div(kept, B.sum(kept, axis=-1, keepdims=True),
                                                     p_rows)


def _full_residual_rule(member, tok, q_rows, p_rows):
    """SGLang whose final draw keeps the rejected tokens: Y ~ p(.|u) after rejections."""
    from ...verifiers.sglang_tree import SGLANG_TREE as rule_spec

    a, none, _ = rule_spec.rule(member, tok, q_rows, p_rows)
    return a, none, p_rows


def _eagle_rule(mode: str):
    """EAGLE's loop with gtp not renormalised (``running-sum``: child j accepted w.p. p(t_j)
    given it is reached), not updated (``residual``: the same, and Y ~ p), or accepted with
    min(1, gtp / 0.5) (``threshold``)."""

    def rule(member, tok, q_rows, p_rows):
        K, V = tok.shape[1], p_rows.shape[-1]
        zero = B.zeros_like(p_rows[..., 0])
        survive, g, acc = B.ones_like(zero), p_rows, []
        for j in range(K):
            t, active = tok[:, j], member[:, :, j] == 1
            a = B.minimum(2 * _row_at(g, t), 1) if mode == "threshold" else _row_at(g, t)
            a = B.where(active, survive * a, zero)
            acc.append(a)
            survive = survive - a
            if mode == "residual":
                continue
            oh = B.one_hot(B.broadcast_to(B.expand_dims(t, 1), active.shape), V, p_rows)
            kept = g * (1 - oh)
            if mode != "running-sum":
                kept = B.safe_div(kept, B.sum(kept, axis=-1, keepdims=True), g)
            g = B.where(B.expand_dims(active, -1), kept, g)
        corr = B.safe_div(g, B.sum(g, axis=-1, keepdims=True), p_rows)
        return B.stack(acc, axis=2), survive, corr

    return rule


def _sglang_parent_row_law(tree, tokens, p_rows):
    """SGLang with cur_prob_offset never moved (thresholds 1): every node is tested against the
    root's row p0 with a fresh coin, each rejection writes p0 at the token into the root's draft
    row (kept for the rest of the walk), and Y comes from p0 without the tokens written there (p0
    itself at the deepest level, where the kernel reads no draft row; the last token when nothing
    is left). Returns {(path, y): probability} (Fractions or floats as the rows)."""
    p0 = [p_rows[0][y] for y in range(p_rows.shape[-1])]
    V, D = len(p0), tree.height
    one = p0[0] * 0 + 1
    out: dict = {}

    def restrict(removed):
        kept = [0 * one if y in removed else p0[y] for y in range(V)]
        s = sum(kept)
        return [k / s for k in kept] if s else [one * (y == V - 1) for y in range(V)]

    def emit(path, mass, row):
        for y in range(V):
            out[(path, y)] = out.get((path, y), 0 * one) + mass * row[y]

    def walk(u, path, mass, removed, depth):
        kids = tree.children[u]
        if not kids:
            emit(path, mass, p0 if depth == D else restrict(removed))
            return
        rem, s, cprev = set(removed), 0 * one, 0 * one
        for c in kids:
            t = int(tokens[c - 1])
            s = s + p0[t]
            cj = min(one, s)
            if cj > cprev:
                walk(c, path + (t,), mass * (cj - cprev), frozenset(rem), depth + 1)
            cprev = cj
            rem.add(t)
        emit(path, mass * (1 - cprev), restrict(rem))

    walk(0, (), one, frozenset(), 0)
    return out


def planted_bug_law(engine: str, bug: str, tree, tokens, q_rows, p_rows) -> tuple:
    """The exact law of the emitted sequence of a planted bug (``engine`` ``"sglang"`` or
    ``"eagle"``, ``bug`` in `SGLANG_TREE_BUGS` / `EAGLE_POSTERIOR_BUGS`, thresholds 1 otherwise)
    given one drafted tree: ``(paths, law [G, V])`` as
    [`conditional_tree_law`][spectheory.testing.checks.tree.conditional_tree_law] (``tokens [N]``,
    ``q_rows``, ``p_rows [N+1, V]``, torch float64 or numpy Fractions). A model written from the
    rule with the bug, not from the port: the tests check each against its bugged port, and
    [`planted_bug_tv`][spectheory.testing.checks.tree_ports.planted_bug_tv] states its TV."""
    from ...verifiers.sglang_tree import SGLANG_TREE as rule_spec
    from ...verifiers.sglang_tree import sglang_tree_verifier
    from ...verifiers.topk import TOPK
    from .tree import conditional_tree_law, emitted_groups

    bugs = {"sglang": SGLANG_TREE_BUGS, "eagle": EAGLE_POSTERIOR_BUGS}
    if engine not in bugs or bug not in bugs[engine]:
        raise OptionError(f"unknown planted bug {engine}/{bug}; choose from "
                          + ", ".join(f"{e}/{b}" for e, names in bugs.items() for b in names))
    tree = tree_shape(tree)
    if engine == "sglang" and bug == "parent-row":
        law = _sglang_parent_row_law(tree, tokens, p_rows)
        paths, _ = emitted_groups(tree, tokens)
        V = p_rows.shape[-1]
        exact = not torch.is_tensor(p_rows)
        rows = [[law.get((pth, y), 0) for y in range(V)] for pth in paths]
        if exact:
            import numpy as np

            arr = np.empty((len(paths), V), dtype=object)
            for g, row in enumerate(rows):
                arr[g] = [x if x != 0 else type(p_rows[0][0])(0) for x in row]
            return paths, arr
        return paths, torch.tensor([[float(x) for x in row] for row in rows],
                                   dtype=p_rows.dtype)
    if engine == "eagle" and bug == "parent-row":  # the bonus token at a leaf: parent's row
        rows = p_rows.clone() if torch.is_tensor(p_rows) else p_rows.copy()
        for u in range(1, tree.n_nodes):
            if not tree.children[u]:
                rows[u] = p_rows[tree.parent[u]]
        return conditional_tree_law(TOPK, tree, tokens, q_rows, rows)
    if engine == "sglang":
        spec = (sglang_tree_verifier(1, Fraction(1, 2)) if bug == "threshold" else
                dataclasses.replace(rule_spec, name=f"sglang {bug} bug", tree_drafting=(),
                                    rule=_running_max_rule if bug == "running-sum"
                                    else _full_residual_rule))
    else:
        spec = dataclasses.replace(TOPK, name=f"eagle {bug} bug", rule=_eagle_rule(bug),
                                   tree_drafting=())
    return conditional_tree_law(spec, tree, tokens, q_rows, p_rows)


def planted_bug_tv(engine: str, bug: str, instance, tree) -> Fraction:
    """Exact TV between the target law and the output law of a planted bug on the top-k tree of
    ``instance`` (the emitted sequence completed by the target to length D + 1; top-k drafting
    is deterministic, so this is one drafted tree)."""
    import numpy as np

    from ...engine.output import target_law
    from .tree import _draft_outcomes, _spread

    tree = tree_shape(tree)
    inst = instance.to_exact()
    V, D = inst.vocab_size, tree.height
    (tokens, _), = _draft_outcomes(inst, tree, "topk")
    pidx = [0] * tree.n_nodes
    for u in tree.preorder():
        for c in tree.children[u]:
            pidx[c] = pidx[u] * V + tokens[c - 1]
    rows = {name: np.array([model.level(tree.depth[u])[pidx[u]] for u in range(tree.n_nodes)],
                           dtype=object) for name, model in (("q", inst.draft),
                                                             ("p", inst.target))}
    paths, law = planted_bug_law(engine, bug, tree, list(tokens), rows["q"], rows["p"])
    tl = [np.ascontiguousarray(inst.target.level(d)) for d in range(D + 1)]
    out = np.empty(V ** (D + 1), dtype=object)
    out.fill(Fraction(0))
    for g, pth in enumerate(paths):
        for y in range(V):
            if law[g, y] != 0:
                _spread(out, tuple(pth) + (y,), law[g, y], tl, V, D)
    tgt = target_law(tl, D + 1)[0]
    return sum((abs(a - b) for a, b in zip(out, tgt)), Fraction(0)) / 2


# ----------------------------------------------------------------------------- layouts


def _tree_links(tree):
    """First child and next sibling of every node 0..N (-1: none)."""
    n = tree.n_nodes
    first, nxt = [-1] * n, [-1] * n
    for u, kids in enumerate(tree.children):
        if kids:
            first[u] = kids[0]
        for a, b in zip(kids, kids[1:]):
            nxt[a] = b
    return first, nxt


def _shape_of(parents):
    return tree_shape({"parents": list(parents)})


#: SGLang's tree kernel's parameters, in order, from ``predicts`` up to ``target_probs`` (then
#: ``draft_probs`` in releases that take it, then ``threshold_single``, ``threshold_acc``,
#: ``deterministic``).
_SGLANG_TREE_PARAMS = ("predicts", "accept_index", "accept_token_num", "candidates",
                       "retrive_index", "retrive_next_token", "retrive_next_sibling",
                       "uniform_samples", "uniform_samples_for_final_sampling", "target_probs")


def _sglang_takes_draft(fn) -> bool:
    """Whether the SGLang tree kernel ``fn`` takes ``draft_probs`` (older releases) or not, from
    its signature (followed through ``functools.wraps``): 14 positional parameters with it, 13
    without. A signature that does not say (``*args``, too few parameters, none readable) is
    refused in one line: calling it either way could silently shift every argument after
    ``target_probs``."""
    from .report import name_of

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise OptionError(f"the SGLang tree preset cannot read the signature of "
                          f"{name_of(fn)}, so it cannot tell whether it takes draft_probs; "
                          f"wrap the kernel with functools.wraps(kernel)") from None
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params) or len(positional) < 13:
        raise OptionError(f"the SGLang tree preset calls {name_of(fn)}{sig} by position with "
                          f"the kernel's 13 or 14 arguments (predicts .. target_probs, "
                          f"draft_probs in older releases, threshold_single, threshold_acc, "
                          f"deterministic), and this signature does not say which; give the "
                          f"wrapper the kernel's parameters or functools.wraps(kernel)")
    return "draft_probs" in sig.parameters or len(positional) >= 14


def _sglang_call(fn, tokens, parents, q, p, generator, threshold_single=1.0, threshold_acc=1.0,
                 device="cpu", dtype=None):
    tree = _shape_of(parents)
    B, N = tokens.shape
    n = N + 1
    dtype = torch.float32 if dtype is None else dtype
    first, nxt = _tree_links(tree)
    dev = torch.device(device)
    candidates = torch.cat([torch.zeros(B, 1, dtype=torch.long), tokens], dim=1).to(dev)
    retrive_index = (torch.arange(B).unsqueeze(1) * n + torch.arange(n)).to(dev)
    retrive_next_token = torch.tensor(first, dtype=torch.long).expand(B, n).contiguous().to(dev)
    retrive_next_sibling = torch.tensor(nxt, dtype=torch.long).expand(B, n).contiguous().to(dev)
    uniform_samples = torch.rand((B, n), generator=generator, dtype=torch.float64).to(dtype).to(dev)
    final = torch.rand((B,), generator=generator, dtype=torch.float64).to(dtype).to(dev)
    target_probs = p.to(dtype).to(dev).contiguous()
    draft_probs = torch.zeros_like(target_probs)
    nspec = tree.height + 1
    predicts = torch.zeros(B * n, dtype=torch.int32, device=dev)
    accept_index = torch.full((B, nspec), -1, dtype=torch.int32, device=dev)
    accept_token_num = torch.zeros(B, dtype=torch.int32, device=dev)
    args = [predicts, accept_index, accept_token_num, candidates, retrive_index,
            retrive_next_token, retrive_next_sibling, uniform_samples, final, target_probs]
    if _sglang_takes_draft(fn):  # releases before draft_probs was dropped from the Python API
        args.append(draft_probs)
    # every argument by position, as the kernel's signature orders them: a wrapper that
    # forwards *args reaches the kernel with the same arguments
    fn(*args, threshold_single, threshold_acc, True)
    tau = accept_token_num.long().cpu()
    last = accept_index.long().cpu()[torch.arange(B), tau]
    node = last - torch.arange(B) * n
    token = predicts.long().cpu()[last]
    return node, token


def _identity_processor(input_ids, scores):
    del input_ids
    return scores


def _eagle_call(fn, tokens, parents, q, p, generator, logits_processor=_identity_processor,
                dtype=None):
    tree = _shape_of(parents)
    B, N = tokens.shape
    dtype = torch.float32 if dtype is None else dtype
    leaf_nodes = torch.as_tensor(tree.leaf_nodes)  # [K, D], -1 past a shorter leaf
    K = leaf_nodes.shape[0]
    cols = torch.cat([torch.zeros(K, 1, dtype=torch.long), leaf_nodes], dim=1)  # [K, D+1]
    pad = cols < 0
    rows_at = torch.where(pad, torch.full_like(cols, N), cols)  # EAGLE's -1 index: the last node
    logp = torch.log(p.to(dtype))  # logits whose softmax is p (the processor is the identity)
    full = torch.cat([torch.zeros(B, 1, dtype=torch.long), tokens], dim=1)  # token of node 0..N

    torch_rand, f64, multinomial = torch.rand, torch.float64, torch.multinomial  # read once,
    # not through the lazy stand-in at every coin and sample

    def rand():
        return float(torch_rand((), generator=generator, dtype=f64))

    cands = torch.where(pad, torch.full_like(cols, -1), full[:, cols.clamp(min=0)])  # [B, K, D+1]
    logits_all = logp[:, rows_at]  # [B, K, D+1, V]: each call gets its own rows
    leaf_list = leaf_nodes.tolist()
    node, token = [], []
    for b in range(B):
        best, acc_len, sample_p = fn(logits_all[b], cands[b], logits_processor, rand)
        best, tau = int(best), int(acc_len)
        node.append(0 if tau == 0 else leaf_list[best][tau - 1])
        token.append(int(multinomial(sample_p.to(f64), 1, generator=generator)))
    return (torch.tensor(node, dtype=torch.long).reshape(B),
            torch.tensor(token, dtype=torch.long).reshape(B))


@dataclass(frozen=True)
class TreeLayout:
    """How an engine's tree sampler is called from the kit's canonical tree layout.

    ``call(fn, tokens, parents, q, p, generator, **options) -> (node, token)`` builds the
    engine's arguments from one batch of drafted trees, calls ``fn`` (the engine's function or a
    port with its signature) and reads its outputs back; ``verifier`` and ``drafting`` are the
    rule it claims and the tree drafting its engine uses (what
    [`check_tree_sampler`][spectheory.testing.checks.tree.check_tree_sampler] checks by default);
    ``source`` cites the engine file; ``mapping`` says how the layout maps, in words."""

    name: str
    call: Callable
    verifier: str
    drafting: str
    source: str
    mapping: str


SGLANG_TREE = TreeLayout(
    "sglang-tree", _sglang_call, "sglang-tree", "topk",
    "sgl-kernel/csrc/speculative/speculative_sampling.cuh (TreeSpeculativeSamplingTargetOnly), "
    "sgl_kernel.tree_speculative_sampling_target_only",
    "num_draft_tokens = N + 1 nodes, node i of the kit is node i of the engine (0 the root, "
    "candidates[:, 0] = 0 unread); retrive_index[b, i] = b (N+1) + i; retrive_next_token / "
    "retrive_next_sibling from the parent list (children in id order); uniform_samples "
    "[B, N+1] and uniform_samples_for_final_sampling [B] drawn from the generator; "
    "target_probs = p in float32 (the engine's dtype), draft_probs zeros (target-only callers; "
    "passed only to releases whose Python API takes it); num_speculative_tokens = depth + 1 "
    "(accept_index's width, filled with -1 as SGLang does). Read back: tau = "
    "accept_token_num, node = accept_index[b, tau] - b (N+1), Y = predicts[accept_index[b, "
    "tau]]. Options: threshold_single, threshold_acc, device ('cuda' for the real kernel), "
    "dtype.")
EAGLE_POSTERIOR = TreeLayout(
    "eagle-posterior", _eagle_call, "topk", "topk",
    "eagle/model/utils.py (evaluate_posterior), SafeAILab/EAGLE",
    "one call per drafted tree (EAGLE verifies one sequence): the K leaf paths in depth-first "
    "order are the candidates [K, D+1] (the root token 0, then the path's tokens, -1 past a "
    "shorter leaf), logits [K, D+1, V] = log p along each path (past a shorter leaf the last "
    "node's row, as EAGLE's index -1 reads), logits_processor the identity (temperature 1), "
    "the coins random.random() drawn from the generator. Read back: node = the tau-th node of "
    "leaf path best_candidate (0 when tau = 0), Y = torch.multinomial(sample_p, 1) from the "
    "generator, as EAGLE's update_inference_inputs draws it.")
#: The presets by name.
TREE_LAYOUTS = {lay.name: lay for lay in (SGLANG_TREE, EAGLE_POSTERIOR)}


def _check_layout_options(layout: TreeLayout, options: dict) -> None:
    """The layout's options, checked when the sampler is built (an option the layout does not
    take, or a device or dtype torch cannot use, failed at the first call and was reported as the
    engine function's error)."""
    import inspect

    params = list(inspect.signature(layout.call).parameters)[6:]  # after fn, tokens, ..., generator
    for key, value in options.items():
        if key not in params:
            raise OptionError(f"tree layout {layout.name} takes no option {key!r} (its options: "
                              f"{', '.join(params)})")
        if key == "device":
            try:
                dev = torch.device(value)
                torch.empty(0, device=dev)
            except (RuntimeError, TypeError, ValueError, AssertionError) as exc:
                first = (str(exc).strip().splitlines() or [""])[0][:120]
                raise OptionError(f"device = {_repr_cut(value, 40)} is not a device torch can use here "
                                  f"({first})") from None
        elif key == "dtype" and value is not None and not (
                isinstance(value, torch.dtype) and value.is_floating_point):
            raise OptionError(f"dtype = {_repr_cut(value, 40)} must be a torch floating dtype (or None)")
        elif key in ("threshold_single", "threshold_acc") and (
                isinstance(value, bool) or not isinstance(value, (int, float))
                or not 0 <= float(value) <= 1):
            raise OptionError(f"{key} = {_repr_cut(value, 40)} must be a number in [0, 1]")
        elif key == "logits_processor" and not callable(value):
            raise OptionError(f"logits_processor = {_repr_cut(value, 40)} must be callable")


def tree_engine_sampler(fn: Callable, layout: TreeLayout | str, **options) -> Callable:
    """A canonical tree sampler ([`spectheory.testing.checks.tree`][spectheory.testing.checks.tree])
    that calls the engine function ``fn`` through ``layout`` (a
    [`TreeLayout`][spectheory.testing.checks.tree_ports.TreeLayout] or its name). ``options`` go to
    the layout (SGLang: ``threshold_single``, ``threshold_acc``, ``device``, ``dtype``). The sampler
    carries ``spectheory_tree_verifier`` and ``spectheory_tree_drafting``, the rule and drafting it
    claims."""
    if isinstance(layout, str):
        if layout not in TREE_LAYOUTS:
            raise OptionError(f"unknown tree layout {layout!r}; choose from "
                              f"{', '.join(TREE_LAYOUTS)}")
        layout = TREE_LAYOUTS[layout]
    if not callable(fn):
        raise OptionError(f"the engine function must be callable, not {type(fn).__name__}")
    if layout is SGLANG_TREE:
        _sglang_takes_draft(fn)  # a signature the preset cannot call is refused here, in one line
    _check_layout_options(layout, options)

    def sampler(tokens, parents, q, p, generator):
        return layout.call(fn, tokens, parents, q, p, generator, **options)

    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "engine"))
    sampler.__name__ = sampler.__qualname__ = f"{layout.name}:{name}"
    sampler.__module__ = getattr(fn, "__module__", __name__)
    sampler.spectheory_tree_verifier = layout.verifier
    ts, ta = options.get("threshold_single", 1.0), options.get("threshold_acc", 1.0)
    if layout is SGLANG_TREE and (ts != 1 or ta != 1):  # a relaxed deployment claims its own law
        from ...verifiers.sglang_tree import sglang_tree_verifier

        sampler.spectheory_tree_verifier = sglang_tree_verifier(ts, ta)
    sampler.spectheory_tree_drafting = layout.drafting
    return sampler


__all__ = ["EAGLE_POSTERIOR", "EAGLE_POSTERIOR_BUGS", "SGLANG_TREE", "SGLANG_TREE_BUGS",
           "TREE_LAYOUTS", "TreeLayout", "eagle_posterior_bug", "evaluate_posterior",
           "planted_bug_law", "planted_bug_tv", "sglang_tree_bug", "tree_engine_sampler",
           "tree_speculative_sampling_target_only"]
