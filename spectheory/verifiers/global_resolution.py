"""Global Resolution (Thomas & Pal, "Global Resolution: Optimal Multi-Draft Speculative Sampling
via Convex Minimization", arXiv 2511.15898, ICLR 2026): the optimal transport for K i.i.d.
drafts through a convex program in at most V variables.

At a node with target row p, draft row q and m i.i.d. candidates S (set D of distinct tokens):

1. **Subset selection.** H* = the lower threshold set of p/q minimising psi(H) = p(H) - q(H)^m
   ([`optimal_acceptance`][spectheory.bounds.optimal_acceptance]); alpha* = 1 + psi(H*).
2. **Split** (complementary slackness). A draft set D with tokens outside H* is always accepted,
   with one of its tokens A = D minus H*; a set inside H* accepts one of its tokens or rejects,
   and every token of H* receives exactly p of mass from the inner sets.
3. **Outer targets** (the polymatroid greedy): list V minus H* as v_1..v_k, H_i = H* with
   v_i..v_k added, g(B) = min over T containing B of psi(T) (a threshold prefix of the other
   tokens), and p_out(v_i) = p(v_i) + g(H_{i+1}) - g(H_i): what each outer token receives from
   the outer sets.
4. **Two convex programs** (log-sum-exp minus linear):

       Phi(a)   = sum_A P(D minus H* = A) log sum_{j in A} e^{a_j}       - sum_v p_out(v) a_v,
       Theta(b) = sum_D P(D) log(1 + sum_{j in D} e^{b_j})   (D in H*)  - sum_i p(i) b_i,

   whose stationary points make the rule below match the targets; grouped by the set A or D, as
   the i.i.d. law depends on the set only, so the sums run over sets of at most m tokens.
5. **Rule.** Outer set: output a in A with probability e^{a_a} / sum_{j in A} e^{a_j}. Inner set:
   output d in D with probability e^{b_d} / (1 + sum_{j in D} e^{b_j}), else reject into the
   unmatched part of p (tokens outside H*).

spectheory minimises Phi and Theta by Newton's method with a backtracking line search (the
paper uses L-BFGS-B) to a gradient below 1e-13. The paper's plan is then lossless only up to the
optimiser's error. spectheory adds an exact **repair**, its own choice, not the paper's: the rows
of the plan, sum_D P(D) pi(y | D), are computed exactly (the weights e^{a} read as the rationals
they are), any row above p(y) is scaled down to p(y), and the rejection law is the normalised
remainder p - rows. Any feasible partial plan completed this way has output law exactly p, so
``global-resolution`` is lossless exactly (in rationals; in float64 up to rounding) and its
acceptance is alpha* up to the optimiser's error (tested below 1e-9).

The paper's **truncated setting**
([`global_resolution_plan`][spectheory.verifiers.global_resolution.global_resolution_plan] with
``truncation=tau``) keeps only the smallest sets of outer tokens T (by q, decreasing) with 1 -
q(H* + T)^m <= tau and of inner tokens with q(H*)^m - q(T_in)^m <= tau: the programs leave out
every draft set with a token outside them, and the repair is skipped. The paper does not say how
such a set is then handled; spectheory gives it the softmax over its kept tokens (uniform over A
if none is kept). The law is then not exactly p, and the exact engine reports its distance
([`truncated_global_resolution`][spectheory.verifiers.global_resolution.truncated_global_resolution]).

At L > 1 the rule runs at every node of the token tree of the K paths, as the paper's appendix
does inside SpecTr's multi-path framework, with m the number of paths through the node. The
plan reads the sets of at most m drafted tokens, sum_{s <= m} C(V, s) of them, so the vocabulary
it handles is far larger than ``hu``'s multisets at small m, but not a real one at m >= 3.
Partial Resolution (the same authors' NeurIPS 2025 paper) shares steps 1-2; its own rule is not
implemented here.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..bounds import optimal_acceptance, ratio_order
from ..runtime.errors import SpectheoryError
from ..registry import VerifierSpec
from .coupling import (NodePlan, exact_sum, integer_row, lazy_pair, plan_rule, set_count,
                       set_law, unmatched_correction)
from .specinfer import node_recursive_law

#: Newton stops below this gradient (l1 norm) or after `MAX_NEWTON` steps.
GRAD_TOL = 1e-13
MAX_NEWTON = 200
#: Softmax parameters are kept in [-BOUND, BOUND] (a minimiser at infinity is approached there).
BOUND = 60.0


def _g(p, q, m: int, B: set, order: list):
    """g(B) = min over T containing B of p(T) - q(T)^m: T = B plus a prefix of the other tokens in
    p/q order (``order``, [`ratio_order`][spectheory.bounds.ratio_order]; the same threshold
    argument as for H*)."""
    pT = sum((p[x] for x in B), Fraction(0))
    qT = sum((q[x] for x in B), Fraction(0))
    best = pT - qT**m
    for x in order:
        if x in B:
            continue
        pT, qT = pT + p[x], qT + q[x]
        best = min(best, pT - qT**m)
    return best


def outer_targets(p, q, m: int, H) -> dict:
    """p_out(v) for the tokens v outside H* (module doc, step 3), exactly."""
    Hs = set(H)
    order = ratio_order(p, q)
    outs = [x for x in order if x not in Hs]
    g = _g
    ip, iq = integer_row(p), integer_row(q)
    if ip is not None and iq is not None:  # Fraction rows: the same minima in integers
        def g(p, q, m, B, order):
            return _g_integers(ip, iq, m, B, order)
    gs = [g(p, q, m, Hs | set(outs[i:]), order) for i in range(len(outs) + 1)]
    return {v: p[v] + gs[i + 1] - gs[i] for i, v in enumerate(outs)}


def _g_integers(ip, iq, m: int, B: set, order: list) -> Fraction:
    """`_g` for rows given as integers over one denominator each (``integer_row``): with
    p = a / dp and q = b / dq, p(T) - q(T)^m = (a(T) dq^m - b(T)^m dp) / (dp dq^m), so the minimum
    is taken over the integer numerators and one Fraction is built (the same value)."""
    (a, dp), (b, dq) = ip, iq
    scale = dq**m
    aT = sum(a[x] for x in B)
    bT = sum(b[x] for x in B)
    best = aT * scale - bT**m * dp
    for x in order:
        if x in B:
            continue
        aT, bT = aT + a[x], bT + b[x]
        best = min(best, aT * scale - bT**m * dp)
    return Fraction(best, dp * scale)


def _minimise(groups, target: np.ndarray, slack: bool) -> np.ndarray:
    """argmin_x sum_g w_g log(s + sum_{j in g} e^{x_j}) - target . x by Newton's method
    (s = 1 with ``slack``, else 0); ``groups`` = [(indices, weight)], vectorised over groups
    (indices padded with a variable fixed at -inf)."""
    n = len(target)
    x = np.zeros(n)
    if n == 0 or not groups:
        return x
    width = max(len(idx) for idx, _ in groups)
    idx = np.full((len(groups), width), n, dtype=np.int64)
    for g, (ix, _) in enumerate(groups):
        idx[g, :len(ix)] = ix
    w = np.array([wt for _, wt in groups])

    def parts(x, hess=True):
        Z = np.append(x, -np.inf)[idx]  # [G, width]
        top = Z.max(axis=1)
        if slack:
            top = np.maximum(top, 0.0)
        e = np.exp(Z - top[:, None])
        tot = e.sum(axis=1) + (np.exp(-top) if slack else 0.0)
        val = float(w @ (top + np.log(tot))) - float(target @ x)
        if not hess:  # the line search reads the value only
            return val, None, None
        s = e / tot[:, None]
        ws = w[:, None] * s
        grad = np.bincount(idx.ravel(), ws.ravel(), minlength=n + 1)[:n] - target
        # H = diag(grad + target) - sum_g w_g s_g s_g^T: the diagonal, then every pair (a, b)
        # of positions in a group, added in one bincount over the flat (n + 1)^2 entries in
        # that order (the same running sums as setting the diagonal and adding pair by pair)
        cells = [np.arange(n) * (n + 2)]
        terms = [grad + target]
        for a in range(width):
            for b in range(width):
                cells.append(idx[:, a] * (n + 1) + idx[:, b])
                terms.append(-ws[:, a] * s[:, b])
        H = np.bincount(np.concatenate(cells), np.concatenate(terms),
                        minlength=(n + 1) ** 2).reshape(n + 1, n + 1)
        return val, grad, H[:n, :n]

    val, grad, H = parts(x)
    for _ in range(MAX_NEWTON):
        if np.abs(grad).sum() < GRAD_TOL:
            break
        step = np.linalg.lstsq(H + 1e-15 * np.eye(n), -grad, rcond=None)[0]
        if not np.all(np.isfinite(step)) or float(grad @ step) >= 0:
            step = -grad
        t = 1.0
        while t > 1e-12:
            xn = np.clip(x + t * step, -BOUND, BOUND)
            vn = parts(xn, hess=False)[0]
            if vn <= val + 1e-4 * t * float(grad @ step) or vn < val:
                break
            t *= 0.5
        else:
            break
        x = xn
        val, grad, H = parts(x)
    return x


def _solve(law: dict, members, target: dict, slack: bool) -> dict:
    """Softmax weights e^{x_j} (as exact rationals) of the tokens in ``target`` with positive
    target; ``members(D)`` gives the tokens of set D that enter its softmax (None: D is not in
    this program)."""
    active = [v for v, t in target.items() if t > 0]
    pos = {v: i for i, v in enumerate(active)}
    weights: dict = {}
    for D, P in law.items():
        A = members(D)
        if A is None:
            continue
        idx = tuple(pos[v] for v in A if v in pos)
        if idx:
            weights[idx] = weights.get(idx, 0.0) + float(P)
    groups = [(np.array(idx), w) for idx, w in weights.items()]
    x = _minimise(groups, np.array([float(target[v]) for v in active]), slack)
    return {v: Fraction(math.exp(float(x[pos[v]]))) for v in active}


def global_resolution_plan(q, p, m: int, scheme: str, truncation: float = 0.0,
                           repair: bool = True) -> NodePlan:
    """Global Resolution's plan at one node (module doc); ``truncation`` > 0 is the paper's
    truncated setting (then the repair is off unless asked for)."""
    if scheme != "iid":
        raise SpectheoryError("global-resolution is derived for i.i.d. drafts; the paper "
                              "leaves drafting without replacement open (use hu-norep)")
    V = len(p)
    alpha, H = optimal_acceptance(p, q, m, "iid", sums=False)  # rows read as given
    Hs = set(H)
    law = set_law(q, m)
    pout = outer_targets(p, q, m, H)
    keep_out = set(pout)
    keep_in = set(H)
    if truncation > 0:
        keep_out, keep_in = _truncation_sets(p, q, m, H, pout, truncation)
    kept = keep_out | keep_in

    def outer_set(D):  # the programs leave out the sets with a token outside the truncation
        if all(v in Hs for v in D) or any(v not in kept for v in D):
            return None
        return [v for v in D if v not in Hs]

    def inner_set(D):
        return list(D) if all(v in Hs and v in keep_in for v in D) else None

    out_w = _solve(law, outer_set, {v: t for v, t in pout.items() if v in keep_out and
                                    q[v] > 0}, slack=False)
    in_w = _solve(law, inner_set, {v: p[v] for v in H if v in keep_in and q[v] > 0},
                  slack=True)
    # the weights as integers over one denominator c: w / sum(w) = W / sum(W) and
    # w / (1 + sum(w)) = W / (c + sum(W)), the same Fractions with one division each
    W_out, _ = integer_row([out_w.get(v, Fraction(0)) for v in range(V)])
    W_in, c_in = integer_row([in_w.get(v, Fraction(0)) for v in range(V)])
    W = [W_in[v] if v in Hs else W_out[v] for v in range(V)]

    def softmax(D):
        """(tokens, tot): pi(v | D) = W[v] / tot for v in tokens, or 1 / len(tokens) each when
        tot = 0 (an outer set none of whose tokens has weight)."""
        A = [v for v in D if v not in Hs]
        if A:
            return A, sum(W_out[v] for v in A)
        return list(D), c_in + sum(W_in[v] for v in D)

    # rows[y] = sum_D P(D) pi(y | D) = W[y] sum_D P(D) / tot_D over the sets D whose softmax
    # gives y weight, and sum_D P(D) / |A| for a token of weight 0 (only the weightless outer
    # sets give it mass): one Fraction per set instead of one product per (set, token), the
    # same exact values, summed in pairs
    exact = all(isinstance(P, (int, Fraction)) for P in law.values())
    terms: list = [[] for _ in range(V)]
    plain = {}  # 1 - sum pi(. | D) before the repair: 0 for an outer set, c / tot an inner one
    for D, P in law.items():
        A = [v for v in D if v not in Hs]
        if A:
            tot = sum(W_out[v] for v in A)
            plain[D] = Fraction(0)
        else:
            A = D
            tot = c_in + sum(W_in[v] for v in D)
            plain[D] = Fraction(c_in, tot)
        if not exact:  # rows read as floats: one product P(D) pi(y | D) per term, as summed
            for v in A:
                terms[v].append(P * (Fraction(W[v], tot) if tot > 0 else Fraction(1, len(A))))
        elif tot > 0:
            share = P / tot
            for v in A:
                if W[v]:
                    terms[v].append(share)
        else:
            share = P / len(A)
            for v in A:
                terms[v].append(share)
    rows = [exact_sum(t) * W[y] if exact and W[y] else exact_sum(t) for y, t in enumerate(terms)]
    cut = [False] * V
    scale = None
    if repair:
        scale = [min(Fraction(1), p[y] / rows[y]) if rows[y] > 0 else Fraction(1)
                 for y in range(V)]
        cut = [sc != 1 for sc in scale]  # a scaled row becomes p(y) exactly
        rows = [p[y] if cut[y] else rows[y] for y in range(V)]

    def outcome(D):
        """accept[D] and reject[D] (the repaired softmax and its rejection), computed for the
        sets looked up only (`lazy_pair`)."""
        A, tot = softmax(D)
        pi = ({v: Fraction(W[v], tot) for v in A} if tot > 0 else
              {v: Fraction(1, len(A)) for v in A})
        if scale is not None:
            pi = {v: a * scale[v] if cut[v] else a for v, a in pi.items()}
        return pi, (1 - sum(pi.values(), Fraction(0)) if any(cut[v] for v in pi) else plain[D])

    accept, reject = lazy_pair(law, outcome)
    acceptance = None
    if repair:
        correction, mass = unmatched_correction(p, dict(enumerate(rows)))
        if exact_sum(p) == 1:  # sum(rows) = sum(p) - sum(p - rows)
            acceptance = 1 - mass
    else:  # the paper's plan as it is: the positive remainder of p, normalised
        rem = [max(p[y] - rows[y], Fraction(0)) for y in range(V)]
        tot = sum(rem, Fraction(0))
        correction = [v / tot for v in rem] if tot > 0 else list(p)
    if acceptance is None:
        acceptance = exact_sum(rows)
    return NodePlan(accept, reject, correction, {"acceptance": acceptance, "alpha": alpha,
                                                 "H": H}, by_set=True)


def _truncation_sets(p, q, m: int, H, pout: dict, tau: float):
    """The paper's truncation (module doc): the fewest outer tokens, by q decreasing, with
    1 - q(H + T)^m <= tau, and inner tokens with q(H)^m - q(T_in)^m <= tau."""
    qH = sum((q[x] for x in H), Fraction(0))
    keep_out, mass = set(), qH
    for v in sorted(pout, key=lambda v: (-q[v], v)):
        if 1 - float(mass) ** m <= tau:
            break
        keep_out.add(v)
        mass += q[v]
    keep_in, mass = set(), Fraction(0)
    for v in sorted(H, key=lambda v: (-q[v], v)):
        if float(qH) ** m - float(mass) ** m <= tau:
            break
        keep_in.add(v)
        mass += q[v]
    return keep_out, keep_in


gr_rule = plan_rule(global_resolution_plan, "iid", "global-resolution", set_count)


def global_resolution(drafts, q, p):
    """Global Resolution at every node of the token tree (module doc), i.i.d. drafting."""
    return node_recursive_law(drafts, q, p, gr_rule)


def truncated_global_resolution(truncation: float = 1e-3) -> VerifierSpec:
    """Global Resolution in the paper's truncated setting (module doc), with tolerance tau =
    ``truncation``, as a verifier spec: not exactly lossless; the exact engine and
    [`check_lossless`][spectheory.engine.lossless.check_lossless] report its distance to the target law."""
    if not (isinstance(truncation, (int, float)) and 0 < truncation < 1):
        raise SpectheoryError(f"truncation = {truncation!r} must be a number in (0, 1)")

    def plan(q, p, m, scheme):
        return global_resolution_plan(q, p, m, scheme, truncation=float(truncation),
                                      repair=False)

    rule = plan_rule(plan, "iid", "global-resolution-truncated", set_count)
    return VerifierSpec(
        f"global-resolution-truncated({truncation:g})",
        lambda drafts, q, p: node_recursive_law(drafts, q, p, rule), paths=None,
        drafting="iid", lossless=False, order_invariant=True, rule=rule,
        paper="Thomas & Pal, Global Resolution, arXiv 2511.15898 (truncated setting)",
        summary=f"Global Resolution with truncation tau = {truncation:g}, no repair")


GLOBAL_RESOLUTION = VerifierSpec(
    "global-resolution", global_resolution, paths=None, drafting="iid", order_invariant=True,
    node_form="H* by subset selection; outer sets: softmax over their tokens outside H*; inner "
              "sets: softmax with a rejection slack; weights from two convex programs; rows "
              "repaired to at most p exactly",
    paper="Thomas & Pal, Global Resolution, arXiv 2511.15898",
    summary="optimal transport through a convex program in at most V variables (i.i.d.)",
    rule=gr_rule)
