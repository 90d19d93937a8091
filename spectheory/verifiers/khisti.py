"""Importance-weighted selection followed by single-draft verification: the canonical
architecture of Khisti et al. ("Multi-Draft Speculative Sampling: Canonical Architectures and
Theoretical Limits", arXiv 2410.18234, ICLR 2025).

Theorem 1 of the paper: every multi-draft verifier can be replaced, without losing acceptance,
by two steps. With m candidates S at a node (i.i.d. from q),

1. **select** one candidate Z = y in S with probability beta_y(S) (sum over y in S of beta = 1);
   the selected token then has the law q_I(y) = sum_S P(S) beta_y(S);
2. **verify** Z by single-draft speculative sampling against q_I: accept with probability
   a(Z) = min(1, p(Z) / q_I(Z)); on rejection draw Y from r = normalise((p - q_I)^+).

So P(Y = y | S) = beta_y(S) a(y) + (1 - sum_z beta_z(S) a(z)) r(y), lossless for any beta, and
the acceptance sum_y min(p(y), q_I(y)) is the optimum alpha* for the best beta. A residual draw
that lands on a drafted token continues along it (the paper's rule at L > 1: keep the drafts that
match the output), so it counts as an acceptance.

The paper poses the choice of beta as an LP (truncated in its experiments, with a multi-stage
heuristic for K > 2). spectheory uses the exact optimum of that LP for every m, read off the maximum
flow of [`spectheory.verifiers.hu`][spectheory.verifiers.hu]: beta_y(S) = f(S, y) / P(S), and an
outcome's unmatched supply is split evenly over its distinct tokens (any split is optimal: such an
outcome holds only tokens whose target mass is already covered). This choice is spectheory's; the
paper's truncated LP and its K > 2 tournament are not implemented. The law differs from ``hu``'s
outcome by outcome but accepts with the same probability alpha*.

Drafting: i.i.d. (the paper's "identical drafts"). At L > 1 the rule runs at every node of the
token tree of the K paths with m the number of paths through the node.
"""

from __future__ import annotations

from fractions import Fraction
from math import factorial

from ..registry import VerifierSpec
from .coupling import LazyOutcomes, NodePlan, lazy_pair, outcomes, plan_rule
from .hu import integer_transport, max_transport
from .specinfer import node_recursive_law


def khisti_plan(q, p, m: int, scheme: str) -> NodePlan:
    """Optimal importance-weighted selection, then single-draft verification (module doc).

    ``stats``: ``selection`` (outcome S, a sorted multiset -> {token y in S: beta_y(S)}, the
    selection weights, summing to 1 over the distinct tokens of S), ``q_selected`` (the law
    q_I of the selected token) and ``selected_acceptance`` (sum_y min(p(y), q_I(y)))."""
    law = outcomes(q, m, scheme)
    V = len(p)
    beta = {}
    scaled = integer_transport(law, p)
    if scaled is not None:
        # over the transport's denominator d, with n = len(toks) and F = n f + (P - sum f):
        # beta = F / (n P) and P beta = F / (n d), summed over n! d to stay in integers
        flow, supply, d = scaled
        unit = factorial(max(m, 1))
        sel = [0] * V
        weights = {}  # S -> (F, n P): beta_y(S) = F[y] / (n P), built when S is looked up
        for S, P in supply.items():
            toks = list(dict.fromkeys(S))
            n = len(toks)
            left = P - sum(flow[S].values())
            F = {y: n * flow[S].get(y, 0) + left for y in toks}
            weights[S] = (F, n * P)
            for y in toks:
                sel[y] += F[y] * (unit // n)
        q_sel = [Fraction(v, unit * d) for v in sel]
        beta = LazyOutcomes(weights, lambda S: {y: Fraction(f, weights[S][1])
                                                 for y, f in weights[S][0].items()})
    else:
        flow, _ = max_transport(law, p)
        q_sel = [Fraction(0)] * V
        for S, P in law.items():
            toks = list(dict.fromkeys(S))
            left = (P - sum(flow[S].values(), Fraction(0))) / len(toks)
            beta[S] = {y: (flow[S].get(y, 0) + left) / P for y in toks}
            for y, b in beta[S].items():
                q_sel[y] += P * b
    a = [min(Fraction(1), p[y] / q_sel[y]) if q_sel[y] > 0 else Fraction(0) for y in range(V)]
    res = [max(p[y] - q_sel[y], Fraction(0)) for y in range(V)]
    tot = sum(res, Fraction(0))
    r = [v / tot for v in res] if tot > 0 else list(p)

    def outcome(S):
        """accept[S] and reject[S], computed for the outcomes looked up only (`lazy_pair`)."""
        kept = sum((b * a[y] for y, b in beta[S].items()), Fraction(0))
        miss = 1 - kept
        return ({y: b * a[y] + miss * r[y] for y, b in beta[S].items()},
                miss * (1 - sum((r[y] for y in beta[S]), Fraction(0))))

    accept, reject = lazy_pair(law, outcome)

    def correction(S):
        """r outside the drafted tokens of S, renormalised (r itself if it has no mass there)."""
        inside = sum((r[y] for y in set(S)), Fraction(0))
        if inside == 1:
            return list(r)
        return [Fraction(0) if y in S else r[y] / (1 - inside) for y in range(V)]

    selected = sum((min(p[y], q_sel[y]) for y in range(V)), Fraction(0))
    return NodePlan(accept, reject, correction, {"selected_acceptance": selected,
                                                 "q_selected": q_sel, "selection": beta})


khisti_rule = plan_rule(khisti_plan, "iid", "khisti")


def khisti(drafts, q, p):
    """Optimal importance-weighted selection then single-draft verification at every node."""
    return node_recursive_law(drafts, q, p, khisti_rule)


KHISTI = VerifierSpec(
    "khisti", khisti, paths=None, drafting="iid", order_invariant=True,
    node_form="select Z in S w.p. beta_Z(S) (optimal, from the transport flow); accept Z w.p. "
              "min(1, p/q_I); else Y ~ normalise((p - q_I)^+)",
    paper="Khisti et al., Multi-Draft Speculative Sampling: Canonical Architectures and "
          "Theoretical Limits, arXiv 2410.18234",
    summary="importance-weighted selection then single-draft verification (i.i.d.)",
    rule=khisti_rule)
