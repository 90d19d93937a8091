"""Optimality certificate of block verification for the node-budget LP, without an LP solver.

The node-budget LP of [`spectheory.lp.node_budget`][spectheory.lp.node_budget] (Thomas & Pal, arXiv
2602.16961, Thm 3.3) has one variable D(s) per sequence s with 1 <= |s| <= L+1 (sum_j V^j variables:
153 M for V = 8, L = 8). With M(s) = sum_a D(s, a) it reads

    maximise   sum_s D(s)
    subject to D(a) = p(a)                                   (depth 0)
               D(s, a) - p(a|s) M(s) = 0                     (1 <= |s| <= L, every a)
               M(s) <= Q(s)            [alpha(s) >= 0]       (Q: the draft's path probability)
               M(s) - D(s) <= 0        [beta(s) >= 0]        (1 <= |s| <= L)
               D >= 0.

Primal: the closed form M*(s) = min(Q(s), p(s_last|s^-) M*(s^-)), D*(s, a) = p(a|s) M*(s)
(block verification's own quantities). Dual, built backwards: beta = 0 at depth L+1,
g(s) = 1 + sum_a p(a|s) beta(s, a), alpha(s) = g(s) and beta(s) = 0 where M*(s) = Q(s), else
alpha(s) = 0 and beta(s) = g(s); y(s, a) = 1 + beta(s, a) on the equality rows. The dual
constraint of D(t), t = (s, a), is

    y(t) - [|s| >= 1] sum_b p(b|s) y(s, b) + [|s| >= 1] (alpha(s) + beta(s)) - [|t| <= L] beta(t) >= 1

and the dual objective is sum_a p(a) y(a) + sum_s Q(s) alpha(s).

[`certify_node_budget`][spectheory.lp.certificate.certify_node_budget] evaluates every primal row,
every dual row and both objectives level by level (never forming the constraint matrix, the deepest
level in row chunks), in float64 or exactly in rationals, and reports the largest violations. Float
tolerances (all quantities are probabilities or sums of at most L+2 of them, each computed with O(V)
roundings):

* primal rows:  |D(s, a) - p(a|s) M(s)| <= ``tol`` and M - Q, M - D <= ``tol`` (default 1e-12);
* dual rows:    slack >= -``tol`` (1e-12) and alpha, beta >= 0;
* objectives:   |primal - dual| <= ``tol`` * max(1, |primal|).

Exact mode (numpy arrays of Fractions) requires every violation to be exactly zero: the pair is
then a proof that the optimum of the LP, E[tau + 1] of block verification, is optimal among all
valid single-path verifiers.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np

from spectheory.inputs.instances import Instance
from spectheory.bounds import shown
from spectheory.runtime.sizes import check_size

from ._guards import check_flag, check_instance, check_table_memory
from .result import LPError

#: Rows of the deepest levels processed at once (bounds the working memory).
CHUNK_ROWS = 2**21
#: Default float tolerance of every check (see the module docstring).
DEFAULT_TOL = 1e-12


@dataclass
class Certificate:
    """Result of [`certify_node_budget`][spectheory.lp.certificate.certify_node_budget]."""

    certified: bool
    exact: bool
    vocab_size: int
    block_length: int
    variables: int
    primal_objective: object
    dual_objective: object
    objective_gap: object
    max_equality_residual: object
    max_budget_violation: object
    max_monotone_violation: object
    min_dual_slack: object
    min_multiplier: object
    tolerance: float
    seconds: float

    def to_json(self) -> dict:
        enc = (lambda v: str(v)) if self.exact else (lambda v: float(v) if v is not None else None)
        out = asdict(self)
        for k, v in out.items():
            if isinstance(v, (Fraction, np.floating, float)):
                out[k] = enc(v)
        return out

    def summary(self) -> str:
        verdict = "CERTIFIED optimal" if self.certified else "NOT certified"
        how = "exactly (rationals)" if self.exact else f"in float64 within {self.tolerance:g}"
        return (f"node-budget LP V={self.vocab_size} L={self.block_length} "
                f"({self.variables:,} variables): {verdict} {how}; primal = dual = "
                f"{float(self.primal_objective):.15g} (gap {float(self.objective_gap):.2g}); "
                f"max primal residual {float(self.max_equality_residual):.2g}, min dual slack "
                f"{float(self.min_dual_slack):.2g}; {self.seconds:.2f} s")


def _tables(instance: Instance, exact: bool):
    check_table_memory(instance, exact, "certify_node_budget")
    inst = instance.to_exact() if exact else instance.to_float()
    V, L = instance.vocab_size, instance.block_length
    p_levels = [np.ascontiguousarray(inst.target.level(j)) for j in range(L + 1)]
    q_levels = [np.ascontiguousarray(inst.draft.level(j)) for j in range(L)]
    return p_levels, q_levels


def certify_node_budget(instance: Instance, exact: bool | None = None,
                        tol: float = DEFAULT_TOL) -> Certificate:
    """Build the closed-form primal and the backward dual of the node-budget LP and check both
    (feasibility of every row, equal objectives); see the module docstring.

    Parameters
    ----------
    instance : Instance
        Draft, target, block length L (tables up to depth L).
    exact : bool, optional
        Rationals (every check exact) or float64; default: as the instance.
    tol : float
        Float tolerance of every check (ignored in exact mode).
    """
    t0 = time.perf_counter()
    check_instance(instance, "certify_node_budget")
    exact = instance.exact if exact is None else check_flag(exact, "exact")
    if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, (int, float, np.floating,
                                                                  np.integer)) \
            or not 0 <= float(tol) < 1:
        raise LPError(f"tol = {shown(tol)} must be a number in [0, 1)")
    tol = float(tol)
    V, L = instance.vocab_size, instance.block_length
    check_size(V ** (L + 1), "certify_node_budget", exact, formula=f"V^(L+1) = {V}^{L + 1}")
    p_levels, q_levels = _tables(instance, exact)
    zero = Fraction(0) if exact else 0.0
    one = Fraction(1) if exact else 1.0
    # forward: Q (draft path probabilities) and M* per depth 0..L
    Q = [np.array([one], dtype=object if exact else np.float64)]
    M = [Q[0].copy()]
    for j in range(1, L + 1):
        Q.append((Q[j - 1][:, None] * q_levels[j - 1]).reshape(-1))
        reach = (M[j - 1][:, None] * p_levels[j - 1]).reshape(-1)
        M.append(np.minimum(Q[j], reach))
        del reach
    # backward: g, alpha, beta per depth L..1 (beta at L+1 is 0)
    alpha, beta = [None] * (L + 1), [None] * (L + 2)
    beta_next = None  # beta at depth j+1, None = zeros
    for j in range(L, 0, -1):
        g = (np.ones(V**j, dtype=object) * one if exact else np.ones(V**j)) if beta_next is None \
            else 1 + (p_levels[j] * beta_next.reshape(V**j, V)).sum(axis=1)
        tight = M[j] == Q[j]
        alpha[j] = np.where(tight, g, zero)
        beta[j] = np.where(tight, zero, g)
        if exact:
            alpha[j], beta[j] = alpha[j].astype(object), beta[j].astype(object)
        beta_next = beta[j]
    # checks, level by level: variables D at depth j = 1..L+1 are children of depth j-1 nodes
    worst = {"eq": zero, "budget": None, "mono": None, "slack": None, "mult": None}
    primal = zero
    dual = zero

    def upd(key, value, fn):
        worst[key] = value if worst[key] is None else fn(worst[key], value)

    for j in range(1, L + 2):
        n_par = V ** (j - 1)
        step = n_par if exact else max(1, CHUNK_ROWS // V)
        for r0 in range(0, n_par, step):
            r1 = min(n_par, r0 + step)
            P = p_levels[j - 1][r0:r1]  # p(.|s) for parents s
            D = M[j - 1][r0:r1, None] * P  # D*(s, a) = p(a|s) M*(s)
            primal = primal + D.sum()
            if j == 1:
                # depth-0 rows D(a) = p(a)
                res = np.abs(D.reshape(-1) - P.reshape(-1))
                upd("eq", res.max(), max)
            else:
                Ms = D.sum(axis=1)  # M(s) as the LP defines it: the sum of the children
                res = np.abs(D - P * Ms[:, None]).max()
                upd("eq", res, max)
                upd("budget", (Ms - Q[j - 1][r0:r1]).max(), max)
                D_par = ((M[j - 2][r0 // V:(r1 - 1) // V + 1, None] * p_levels[j - 2][
                    r0 // V:(r1 - 1) // V + 1]).reshape(-1))[r0 - (r0 // V) * V:
                                                             r0 - (r0 // V) * V + (r1 - r0)]
                upd("mono", (Ms - D_par).max(), max)
            # dual rows of the variables D(t), t = (s, a): y(t) = 1 + beta(t)
            if j <= L:
                bt = beta[j][r0 * V:r1 * V].reshape(r1 - r0, V)
                y = 1 + bt
            else:
                bt = None
                y = np.ones((r1 - r0, V), dtype=object) * one if exact else np.ones((r1 - r0, V))
            slack = y - 1
            if j >= 2:
                s_ab = alpha[j - 1][r0:r1] + beta[j - 1][r0:r1]
                slack = slack - (P * y).sum(axis=1)[:, None] + s_ab[:, None]
            if bt is not None:
                slack = slack - bt
            upd("slack", slack.min(), min)
            if j == 1:
                dual = dual + (P.reshape(-1) * y.reshape(-1)).sum()
            if j <= L:
                a_j = alpha[j][r0 * V:r1 * V]
                dual = dual + (Q[j][r0 * V:r1 * V] * a_j).sum()
                upd("mult", min(a_j.min(), beta[j][r0 * V:r1 * V].min()), min)
            del D, y, slack
    gap = abs(primal - dual)
    budget = worst["budget"] if worst["budget"] is not None else zero
    mono = worst["mono"] if worst["mono"] is not None else zero
    mult = worst["mult"] if worst["mult"] is not None else zero
    if exact:
        ok = (worst["eq"] == 0 and budget <= 0 and mono <= 0 and worst["slack"] >= 0
              and mult >= 0 and gap == 0)
    else:
        ok = bool(worst["eq"] <= tol and budget <= tol and mono <= tol
                  and worst["slack"] >= -tol and mult >= 0 and gap <= tol * max(1.0, abs(primal)))
    n_vars = sum(V**j for j in range(1, L + 2))
    return Certificate(bool(ok), exact, V, L, n_vars, primal, dual, gap, worst["eq"], budget,
                       mono, worst["slack"], mult, 0.0 if exact else tol,
                       time.perf_counter() - t0)


__all__ = ["CHUNK_ROWS", "Certificate", "DEFAULT_TOL", "certify_node_budget"]
