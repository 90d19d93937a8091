"""SGLang's target-only tree rule (``tree_speculative_sampling_target_only``), with its thresholds.

Source: ``sgl-kernel/csrc/speculative/speculative_sampling.cuh`` in the SGLang repository
(``TreeSpeculativeSamplingTargetOnly``; the Python entry point is
``sgl_kernel.tree_speculative_sampling_target_only``). Its callers pass draft probabilities of
zero (EAGLE drafts deterministic top-k trees, so there is no draft law to divide by). At the
current node u, with one coin U ~ Uniform[0, 1) per node and the children c_1, c_2, ... tried in
sibling order, the kernel keeps the running sum S_j = p(t_1|u) + ... + p(t_j|u) of the target
over the siblings tried, and

    accept c_j  when  U <= S_j / threshold_acc  or  p(t_j|u) >= threshold_single

(the first such j; the walk moves into c_j's subtree with a fresh coin). When every child is
rejected, the kernel has written p(t_j|u) into the draft row at each rejected token, so its final
draw, from relu(p - draft) with a second coin, is Y ~ p(.|u) restricted to the tokens not tried
(renormalised). At a node without children Y ~ p(.|u).

Exact law at one node (this module's rule). With c_j = min(1, S_j / threshold_acc), which does not
decrease in j, child j is accepted with probability c_j - c_{j-1} (c_0 = 0) until the first j with
p(t_j|u) >= threshold_single, which takes all the remaining mass 1 - c_{j-1}; the walk stops with
the rest, 1 - c_b, and Y from the restricted row. If that row has no mass left (possible only
when rejection keeps mass the tried tokens fill, threshold_acc > 1), the kernel falls back to the
last token id V - 1, and so does the rule.

Drafting. At thresholds 1, for *distinct* sibling tokens this is inverse-CDF sampling of
Y ~ p(.|u) with the drafted tokens listed first: child c_j is reached with probability p(t_j|u)
and otherwise Y comes from p restricted to the other tokens, so the rule is lossless under
``topk`` (EAGLE's trees and choice lists) and ``norep`` drafting, whatever q is, and the order of
the siblings does not change the law. Children drawn i.i.d. may repeat a token x, and then the
running sum counts p(x|u) twice: with p(.|u) = (1/2, 1/2), q(.|u) = (2/3, 1/3) and two i.i.d.
children (V = 2, L = 1) the output law is (2/3, 1/3), TV 1/6 to the target (tests, exact). SpecInfer
is the reverse: lossless under i.i.d. children, lossy on distinct ones
([`spectheory.verifiers.specinfer`][spectheory.verifiers.specinfer]). The registry declares it
(`VerifierSpec.tree_drafting`: ``topk``, ``norep``), and the walk never merges equal-token
siblings (`VerifierSpec.rule_merges_repeats` False): accepting c_j moves into c_j's subtree only,
as the kernel does.

Thresholds below 1 (SGLang's ``--speculative-accept-threshold-single`` /
``--speculative-accept-threshold-acc``) accept more, and are lossy:
[`sglang_tree_verifier`][spectheory.verifiers.sglang_tree.sglang_tree_verifier] gives the rule with
its thresholds as a verifier with an exact law, so a relaxed deployment is checked against its
own law and [`analyze_tree`][spectheory.engine.analysis.analyze_tree] states its exact TV to the
target.

The K-path law function runs the rule on the token tree of K drafted paths
([`node_recursive_law`][spectheory.verifiers.specinfer.node_recursive_law]), where paths through one
node repeat its child's token, so there a repeated token is skipped (the same child): right for
distinct siblings (``topk``, ``norep``, the enumerate route of
[`analyze_tree`][spectheory.engine.analysis.analyze_tree]). Under i.i.d. children the siblings
themselves may repeat a token, which the leaf paths cannot show; ``analyze_tree`` then takes the
node route (its default for this rule), which hands the rule every sibling and follows each
child's own subtree.
"""

from __future__ import annotations

from fractions import Fraction

from ..registry import VerifierSpec
from ..runtime import backend as B
from ..runtime.errors import SpectheoryError
from ..law import MultiLaw
from .specinfer import _row_at, node_recursive_law

#: Name of the rule at thresholds 1 in the registry.
NAME = "sglang-tree"


def _threshold(x, what: str):
    if isinstance(x, bool) or not isinstance(x, (int, float, Fraction)):
        raise SpectheoryError(f"{what} = {x!r} must be a number in (0, 1]")
    if not 0 < x <= 1:
        raise SpectheoryError(f"{what} = {x!r} must lie in (0, 1] (SGLang's relaxations accept "
                              f"more below 1; 1 is the exact rule)")
    return Fraction(x) if isinstance(x, (int, Fraction)) else x


def sglang_tree_rule(member, tok, q_rows, p_rows, threshold_single=1, threshold_acc=1,
                     skip_repeats: bool = False):
    """SGLang's tree rule at one node (module doc), in the node-rule signature of
    [`node_recursive_law`][spectheory.verifiers.specinfer.node_recursive_law]:
    ``member [B, Kr, K] int``, ``tok [B, K]``, ``q_rows`` (not read), ``p_rows [B, Kr, V]`` ->
    ``accept [B, Kr, K]``, ``none [B, Kr]``, ``correction [B, Kr, V]``. Every candidate is a
    trial, repeated tokens included (the kernel adds their target probability again), unless
    ``skip_repeats``: in the K-path form a node's child appears once per leaf path through it,
    so there a repeated token is the same child and is skipped."""
    del q_rows  # target-only: the kernel's callers pass zero draft probabilities
    if B.is_exact(p_rows):
        threshold_single, threshold_acc = Fraction(threshold_single), Fraction(threshold_acc)
    else:
        threshold_single, threshold_acc = float(threshold_single), float(threshold_acc)
    K = tok.shape[1]
    V = p_rows.shape[-1]
    zero = B.zeros_like(p_rows[..., 0])
    survive = B.ones_like(zero)  # P(no child accepted yet)
    csum = zero  # S_j over the active candidates tried
    cprev = zero  # c_{j-1} = min(1, S_{j-1} / threshold_acc)
    tried = B.zeros_like(p_rows)
    accepts = []
    for j in range(K):
        t = tok[:, j]
        active = member[:, :, j] == 1
        if skip_repeats:
            active = active & (_row_at(tried, t) == 0)
        px = _row_at(p_rows, t)
        csum = csum + B.where(active, px, zero)
        c = B.minimum(csum / threshold_acc, 1)
        single = active & (px >= threshold_single)
        a = B.where(single, survive, B.minimum(B.positive_part(c - cprev), survive))
        a = B.where(active, a, zero)
        accepts.append(a)
        survive = survive - a
        cprev = B.where(active, c, cprev)
        onehot = B.one_hot(B.broadcast_to(B.expand_dims(t, 1), active.shape), V, p_rows)
        tried = B.maximum(tried, B.where(B.expand_dims(active, -1), onehot,
                                         B.zeros_like(tried)))
    kept = p_rows * (1 - tried)
    last = B.one_hot(B.full(tuple(p_rows.shape[:-1]), V - 1, tok), V, p_rows)
    corr = B.safe_div(kept, B.sum(kept, axis=-1, keepdims=True), last)
    return B.stack(accepts, axis=2), survive, corr


def sglang_tree_verifier(threshold_single=1, threshold_acc=1) -> VerifierSpec:
    """SGLang's tree rule with thresholds in (0, 1] as a
    [`VerifierSpec`][spectheory.registry.VerifierSpec] (module doc): ``sglang-tree`` at 1 and 1
    (lossless under ``topk`` and ``norep`` drafting), ``sglang-tree(ts=..., ta=...)`` otherwise,
    marked lossy. Pass it to [`analyze_tree`][spectheory.engine.analysis.analyze_tree] for its
    exact law and TV, or as the ``verifier`` of
    [`check_tree_sampler`][spectheory.testing.checks.tree.check_tree_sampler]."""
    ts = _threshold(threshold_single, "threshold_single")
    ta = _threshold(threshold_acc, "threshold_acc")
    exact_rule = ts == 1 and ta == 1
    name = NAME if exact_rule else f"{NAME}(ts={float(ts):g}, ta={float(ta):g})"

    def rule(member, tok, q_rows, p_rows):
        return sglang_tree_rule(member, tok, q_rows, p_rows, ts, ta)

    rule.__name__ = rule.__qualname__ = "sglang_tree_rule"
    rule.ignores_q = True  # target-only: the node route may run it on top-k trees

    def path_rule(member, tok, q_rows, p_rows):
        return sglang_tree_rule(member, tok, q_rows, p_rows, ts, ta, skip_repeats=True)

    def law(drafts, q, p) -> MultiLaw:
        return node_recursive_law(drafts, q, p, path_rule)

    law.__name__ = law.__qualname__ = "sglang_tree"
    law.__doc__ = "SGLang's target-only tree rule on the token tree of K paths (module doc)."
    return VerifierSpec(
        name, law, paths=None, drafting="norep", lossless=exact_rule,
        node_form="try children in sibling order; accept c_j when U <= S_j / threshold_acc or "
                  "p(c_j) >= threshold_single (S_j the target summed over the children tried); "
                  "all rejected: Y ~ p without the tried tokens",
        paper="SGLang sgl-kernel speculative_sampling.cuh, TreeSpeculativeSamplingTargetOnly "
              "(target-only, EAGLE trees)",
        summary="SGLang's tree kernel rule (lossless for distinct siblings: topk, norep)"
                if exact_rule else "SGLang's tree rule with relaxed thresholds (lossy)",
        rule=rule, rule_merges_repeats=False,
        tree_drafting=("topk", "norep") if exact_rule else ())


SGLANG_TREE = sglang_tree_verifier()

__all__ = ["NAME", "SGLANG_TREE", "sglang_tree_rule", "sglang_tree_verifier"]
