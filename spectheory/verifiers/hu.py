"""The optimal-transport rule of multi-draft speculative sampling (Hu et al., "Towards Optimal
Multi-draft Speculative Decoding", arXiv 2502.18779, ICLR 2025), computed exactly at each node.

At a node with target row p and m candidate tokens S drawn from q (i.i.d. for ``hu``, without
replacement for ``hu-norep``), the best single-step verifier is an optimal transport plan between
the law of S and p that keeps as much mass as possible on the diagonal {y in S}. Hu et al.
characterise its value through the dual (for i.i.d. drafts)

    alpha*(p, q, m) = min_{H subset of vocab} [ p(H) + 1 - q(H)^m ]

([`multidraft_acceptance`][spectheory.bounds.multidraft_acceptance]) but do not give a rule, so
spectheory computes the plan itself: it is a bipartite maximum flow from the outcomes S (supply
P(S)) to the tokens y (capacity p(y)) along the edges y in S, whose minimum cut is the formula above
(the cut that removes the sinks H and every outcome not inside H). The flow is found exactly, in
rationals, by a greedy fill followed by augmenting paths (breadth first, so Edmonds-Karp), and

    pi(y | S) = f(S, y) / P(S)  for y in S,
    P(reject | S) = (P(S) - sum_y f(S, y)) / P(S),   Y | reject ~ normalise(p - sum_S f(S, .)),

is lossless (the unmatched supply is spread over the unmatched demand) and accepts with
probability alpha*. Many plans attain alpha*; this one is the flow the greedy fill (outcomes in
lexicographic order, each filling its tokens in increasing id) and the augmentations reach, a
deterministic choice of spectheory's, not the paper's. At L > 1 the rule runs at every node of the
token tree of the K paths (as SpecInfer's), with m the number of paths through the node; it is
then optimal node by node, not over blocks (the direct K-path LP bounds it).

The plan enumerates C(V+m-1, m) multisets (``iid``) or C(V, m) sets (``norep``) at each node, so
``hu`` is for the exact engine's vocabularies (refused beyond
`spectheory.verifiers.coupling.MAX_OUTCOMES` outcomes); ``global-resolution`` attains the
same optimum at real vocabularies.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction

from ..registry import VerifierSpec
from .coupling import NodePlan, integer_row, outcomes, plan_rule, unmatched_correction
from .specinfer import node_recursive_law


def max_transport(law: dict, p) -> tuple[dict, Fraction]:
    """A maximum flow from outcomes S (supply ``law[S]``) to tokens y (capacity p[y]) along
    y in S, exactly: ``({S: {y: flow}}, total flow)``.

    Supplies and capacities are scaled to integers over their least common denominator (the
    flow only adds, subtracts and compares them), so each step is an integer operation; the
    flows are read back as Fractions, the same values and the same augmenting paths as in
    rationals."""
    scaled = integer_transport(law, p)
    if scaled is None:
        return _max_transport(law, [Fraction(v) for v in p])
    flow, supply, d = scaled
    total = Fraction(sum(sum(fs.values()) for fs in flow.values()), d)
    return {S: {y: Fraction(f, d) for y, f in fs.items()} for S, fs in flow.items()}, total


def integer_transport(law: dict, p):
    """`max_transport` in integers: ``(flow {S: {y: integer}}, supply {S: integer}, d)`` with
    every flow and P(S) the integer over d, or None when a supply is not an int or a Fraction."""
    caps = [Fraction(v) for v in p]
    ints = integer_row(list(law.values()) + caps)
    if ints is None:
        return None
    n, d = ints
    supply = dict(zip(law, n))
    flow, _ = _max_transport(supply, n[len(law):], total=False)
    return flow, supply, d


def _visit_outcomes(outcomes, tokens, cap, from_S, queue):
    """Visit each outcome in turn (breadth first, `_max_transport`): each of its distinct tokens
    not yet reached is reached from it; returns the first one with capacity left (the end of an
    augmenting path), else None with the reached tokens queued."""
    for S in outcomes:
        for y in tokens[S]:
            if y not in from_S:
                from_S[y] = S
                if cap[y] > 0:
                    return y
                queue.append((False, y))
    return None


def _max_transport(law: dict, caps: list, total: bool = True) -> tuple[dict, Fraction | None]:
    """`max_transport` on supplies ``law`` and capacities ``caps``, all Fractions or all
    integers (the arithmetic stays in their type); the total flow is None with ``total=False``
    (a caller that reads the flows only).

    Greedy fill in outcome order, then augmenting paths S0 -> y1 -> S1 -> ... -> y_n (cap > 0)
    found breadth first: the queue starts with every outcome with supply left, in ``law``'s
    order; an outcome visits its distinct tokens in order and the search ends at the first
    unvisited token with capacity; a token visits the outcomes holding it that carry flow to
    it (reverse edges), in ``law``'s order."""
    supply = dict(law)
    cap = dict(enumerate(caps))
    flow: dict = {S: {} for S in law}
    tokens = {S: tuple(dict.fromkeys(S)) for S in law}  # each outcome's distinct tokens
    holders: dict = {y: [] for y in cap}  # outcomes containing y
    for S, ys in tokens.items():
        for y in ys:
            holders[y].append(S)
    for S, ys in tokens.items():  # greedy fill
        fs = flow[S]
        for y in ys:
            push = min(supply[S], cap[y])
            if push > 0:
                fs[y] = fs.get(y, 0) + push
                supply[S] -= push
                cap[y] -= push
    live = dict.fromkeys(S for S in law if supply[S] > 0)  # the starts, in law's order
    while True:
        # parents: token -> the outcome it was reached from; outcome -> the token it was reached
        # from (the starts, every outcome in live, have none and are not in from_y)
        from_S: dict = {}
        from_y: dict = {}
        queue: deque = deque()  # after the starts: (is an outcome, node)
        end = _visit_outcomes(live, tokens, cap, from_S, queue)
        while queue and end is None:
            is_S, node = queue.popleft()
            if is_S:
                end = _visit_outcomes((node,), tokens, cap, from_S, queue)
            else:
                for S in holders[node]:
                    if S not in live and S not in from_y and flow[S].get(node, 0) > 0:
                        from_y[S] = node
                        queue.append((True, S))
        if end is None:
            break
        path = [end]  # y_n, S_{n-1}, y_{n-1}, ..., S0
        while True:
            S = from_S[path[-1]]
            path.append(S)
            if S in live:
                break
            y = from_y[S]
            path.append(y)
        path.reverse()  # S0, y1, S1, y2, ..., y_n
        push = min(supply[path[0]], cap[end])
        for i in range(2, len(path), 2):  # reverse edges y_i <- S_i carry flow to give back
            push = min(push, flow[path[i]][path[i - 1]])
        for i in range(0, len(path) - 1, 2):  # forward edges S_i -> y_{i+1}
            fs = flow[path[i]]
            fs[path[i + 1]] = fs.get(path[i + 1], 0) + push
        for i in range(1, len(path) - 1, 2):  # reverse edges y_i <- S_i
            flow[path[i + 1]][path[i]] -= push
        supply[path[0]] -= push
        cap[end] -= push
        if not supply[path[0]] > 0:
            del live[path[0]]
    if not total:
        return flow, None
    return flow, sum((sum(f.values(), Fraction(0)) for f in flow.values()), Fraction(0))


def hu_plan(q, p, m: int, scheme: str) -> NodePlan:
    """The optimal transport plan at one node (module doc)."""
    law = outcomes(q, m, scheme)
    scaled = integer_transport(law, p)
    if scaled is not None:  # f / P = F / P_int over the common denominator: one Fraction each
        flow, supply, d = scaled
        acc_int: dict = {}
        accept, reject = {}, {}
        for S, P in supply.items():
            accept[S] = {y: Fraction(f, P) for y, f in flow[S].items() if f > 0}
            reject[S] = Fraction(P - sum(flow[S].values()), P)
            for y, f in flow[S].items():
                acc_int[y] = acc_int.get(y, 0) + f
        accepted = {y: Fraction(f, d) for y, f in acc_int.items()}
        correction, _ = unmatched_correction(p, accepted)
        total = Fraction(sum(acc_int.values()), d)
        return NodePlan(accept, reject, correction, {"acceptance": total})
    flow, total = max_transport(law, p)
    accepted: dict = {}
    accept, reject = {}, {}
    for S, P in law.items():
        accept[S] = {y: f / P for y, f in flow[S].items() if f > 0}
        reject[S] = 1 - sum(accept[S].values(), Fraction(0))
        for y, f in flow[S].items():
            accepted[y] = accepted.get(y, 0) + f
    correction, _ = unmatched_correction(p, accepted)
    return NodePlan(accept, reject, correction, {"acceptance": total})


hu_rule = plan_rule(hu_plan, "iid", "hu")
hu_norep_rule = plan_rule(hu_plan, "norep", "hu-norep")


def hu(drafts, q, p):
    """The exact optimal-transport rule of Hu et al. at every node, i.i.d. drafting."""
    return node_recursive_law(drafts, q, p, hu_rule)


def hu_norep(drafts, q, p):
    """The exact optimal-transport rule at every node, drafting without replacement."""
    return node_recursive_law(drafts, q, p, hu_norep_rule)


HU = VerifierSpec(
    "hu", hu, paths=None, drafting="iid", order_invariant=True,
    node_form="maximum-flow optimal transport from the candidate multiset to p; "
              "reject into normalise(p - accepted)",
    paper="Hu et al., Towards Optimal Multi-draft Speculative Decoding, arXiv 2502.18779",
    summary="optimal transport at each node, computed exactly (i.i.d. drafting)", rule=hu_rule)
HU_NOREP = VerifierSpec(
    "hu-norep", hu_norep, paths=None, drafting="norep",
    node_form="as hu, for candidate sets drawn without replacement",
    paper="Hu et al., Towards Optimal Multi-draft Speculative Decoding, arXiv 2502.18779",
    summary="optimal transport at each node, computed exactly (drafting without replacement)",
    rule=hu_norep_rule, rule_skips_repeats=True)
