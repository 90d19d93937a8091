"""Node-budget LP under a drafting policy: the best single-path verifier when the draft may stop
early (Thomas & Pal, arXiv 2602.16961, Thm 3.3, with the draft's path probability replaced by
the probability that the stopped draft covers the prefix).

With the continuation kernel K(a|s) of a stopping rule
([`spectheory.engine.adaptive`][spectheory.engine.adaptive]), the drafted block covers the prefix
s (it has length >= |s| and starts with s) with probability

    q_stop(s) = prod_{i < |s|} K(s_{i+1} | s^i)           ( = q(s) prod_{i<|s|} (1 - h(s^i))
                                                             for a stop rule ).

A verifier can accept s only if the draft covers it, so every valid verifier on the stopped
draft gives a feasible point of

    maximise   sum_{1 <= |s| <= L+1} D(s)                      ( = E[tau + 1] )
    subject to D(s, a) = p(a|s) M(s),  M(empty) = 1            (target matching)
               M(s) <= q_stop(s),  M(s) <= D(s),  D >= 0       (1 <= |s| <= L),

the node-budget LP of [`spectheory.lp.node_budget`][spectheory.lp.node_budget] with the cap
q(s) -> q_stop(s). It is built by that module's builder on the stopped draft as a sub-stochastic
table (rows K(.|s), whose path products are q_stop), so the LP, its closed-form optimum
M*(s) = min(q_stop(s), p(s_last|s^-) M*(s^-)) and its exact dual certificate are the same code.

**Who attains it.** The stopped draft is a fixed-length draft on the vocabulary V+1 with a stop
token ⊥ of target probability 0 (draft rows (K(.|s), 1 - sum K)), and this LP is that instance's
node-budget LP (prefixes through ⊥ have D = 0); by Thm 3.3 block verification against that draft
(``aware=True`` in [`analyze_adaptive`][spectheory.engine.adaptive.analyze_adaptive]) attains the
optimum, under every rule. Block verification run on the drafted prefix with the instance's rows,
what engines do, is the same verifier when the rule is a deterministic stop rule: along a drafted
path h = 0, so q' = q and the weights agree; at the stopping prefix h = 1, so q' = 0 on V, the
residual is w_n p and h_n = w_n / (w_n + 1 - w_n) = w_n with correction p, exactly the
fixed-length last step. For a randomised rule (0 < h < 1) the two differ and the plain form can
fall strictly below the optimum ([`adaptive_optimality`][spectheory.lp.adaptive.adaptive_optimality]
reports the gap exactly).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from spectheory.engine.adaptive import (analyze_adaptive, continuation_levels, parse_rule,
                                        stop_masses)
from spectheory.inputs.instances import Instance
from spectheory.inputs.models import TableModel

from .node_budget import build_node_budget, certificate, greedy_budgets
from ._guards import FLOAT_SOLVERS, check_common, check_flag, check_instance
from .result import LPError, LPResult
from .sparse import Timer
from .trust import Bound, checked


def stopped_instance(instance: Instance, rule, exact: bool | None = None) -> Instance:
    """The instance with its draft replaced by the stopped draft: a table model of the
    sub-stochastic rows K(.|s) (depths 0..L-1), whose path probabilities are q_stop(s). Only for
    the node-budget builders (rows do not sum to 1)."""
    check_instance(instance, "stopped_instance")
    rule = parse_rule(rule)
    exact = instance.exact if exact is None else check_flag(exact, "exact")
    inst = instance.to_exact() if exact else instance.to_float()
    K, _ = continuation_levels(inst, rule, exact)
    return Instance(inst.vocab_size, inst.block_length, inst.target,
                    TableModel(inst.vocab_size, tuple(K)))


def adaptive_node_budget_lp(instance: Instance, rule, exact: bool = False,
                            solver: str | None = None, limit: int | None = None) -> LPResult:
    """Optimum E[tau + 1] of the node-budget LP with the cap M(s) <= q_stop(s) (module
    docstring).

    Exact mode builds the full LP in rationals and returns the optimum only after checking the
    closed-form primal and the constructed dual exactly
    ([`SparseLP.check_certificate`][spectheory.lp.sparse.SparseLP.check_certificate]); float
    mode solves it (``solver`` "highs" default, "cvxpy") with a float certificate, or returns
    the closed form (``solver="closed-form"``). The optimum is then checked against independent
    bounds: at most L + 1 and at most 1 + E[N] (a verifier accepts only drafted tokens), at
    least the exact E[tau + 1] of stop-aware block verification from the exact engine (a
    lossless verifier on the stopped draft, so a feasible point; its losslessness is checked
    first), and at most the closed form's value M* (in exact mode, equal to it)."""
    timer = Timer()
    exact = check_common(instance, "adaptive_node_budget_lp", exact, limit, solver,
                         FLOAT_SOLVERS + ("closed-form",), ("exact-certificate",))
    rule = parse_rule(rule)
    V, L = instance.vocab_size, instance.block_length
    surrogate = stopped_instance(instance, rule, exact)
    lp, tables = build_node_budget(surrogate, exact, limit)
    p_levels, Q, _ = tables
    M, _ = greedy_budgets(p_levels, Q, L)
    closed = (Fraction(1) if exact else 1.0) + sum((m.sum() for m in M[1:]),
                                                    Fraction(0) if exact else 0.0)
    info = {"nonzeros": lp.nonzeros, "form": "full", "rule": rule.name}
    if exact:
        if solver not in (None, "exact-certificate"):
            raise LPError(f"solver {solver!r} is not an exact route here; use "
                          "exact-certificate")
        opt = lp.check_certificate(*certificate(tables, L, V))
        name = "exact-certificate"
        status = "optimal"
    elif solver == "closed-form":
        opt, name, status = float(closed), "closed-form", "optimal"
    else:
        _, opt, status, name = lp.solve(solver)
        info["float_certificate"] = lp.last_certificate
    res = LPResult("adaptive-node-budget", 1, opt, name, status, lp.n, lp.constraints,
                   timer.seconds, info)
    aware = analyze_adaptive(instance, "block", rule, exact=exact, aware=True)
    if not aware.lossless:
        raise LPError(f"stop-aware block verification is lossy under {rule.name} (TV "
                      f"{aware.tv_to_target}); its value is no lower bound")
    one = Fraction(1) if exact else 1.0
    bounds = [Bound("upper", one * (L + 1), "L + 1"),
              Bound("upper", 1 + aware.expected_drafted, "1 + E[N drafted]"),
              Bound("upper", closed, "the closed form M*(s) = min(q_stop(s), p M*(s^-))"),
              Bound("lower", aware.block_efficiency,
                    "stop-aware block verification's exact E[tau+1]")]
    if exact:
        bounds.append(Bound("lower", closed, "the closed form (exact: the optimum)"))
    return checked(res, bounds)


@dataclass
class AdaptiveOptimality:
    """Block verification under a stopping rule against the LP optimum.

    ``optimum``: the LP's E[tau + 1]; ``block``: block verification on the drafted prefix (the
    instance's rows, what engines run); ``aware``: block verification against the stopped
    draft; ``token``: token verification on the drafted prefix; ``gap`` = optimum - block;
    ``optimal``: block verification is lossless and gap == 0 (exact) or within 1e-9 (float);
    ``deterministic``: every reached prefix had h in {0, 1} (a stop rule)."""

    rule: str
    stopping_time: bool
    deterministic: bool
    optimum: Any
    block: Any
    aware: Any
    token: Any
    block_lossless: bool
    token_lossless: bool
    gap: Any
    optimal: bool
    certificate: str

    def summary(self) -> str:
        f = (lambda v: f"{v} (= {float(v):.6f})") if isinstance(self.optimum, Fraction) else \
            (lambda v: f"{float(v):.6f}")
        kind = ("deterministic stop rule" if self.deterministic else "randomised stop rule") \
            if self.stopping_time else "drop rule (not a stopping time)"
        return (f"{self.rule} [{kind}]: LP optimum {f(self.optimum)} ({self.certificate}); "
                f"block {f(self.block)} ({'lossless' if self.block_lossless else 'LOSSY'}), "
                f"stop-aware block {f(self.aware)}, token {f(self.token)} "
                f"({'lossless' if self.token_lossless else 'LOSSY'}); block "
                + ("optimal" if self.optimal else "lossy: no optimality claim"
                   if not self.block_lossless else f"below the optimum by {self.gap}"))


def _deterministic(instance: Instance, rule, exact: bool) -> bool:
    """Whether the rule's stop probability is 0 or 1 at every prefix the draft reaches."""
    L = instance.block_length
    K, H = continuation_levels(instance, rule, exact)
    reach, _ = stop_masses(K, H, L, exact)
    for d in range(L):
        for r, s in zip(reach[d], H[d]):
            if r != 0 and s not in (0, 1):
                return False
    return True


def adaptive_optimality(instance: Instance, rule, exact: bool | None = None,
                        solver: str | None = None) -> AdaptiveOptimality:
    """The LP optimum under ``rule`` and the exact E[tau + 1] of block verification (plain and
    stop-aware) and token verification on the drafted prefix (module docstring)."""
    check_instance(instance, "adaptive_optimality")
    rule = parse_rule(rule)
    exact = instance.exact if exact is None else check_flag(exact, "exact")
    lp = adaptive_node_budget_lp(instance, rule, exact, solver)
    blk = analyze_adaptive(instance, "block", rule, exact=exact)
    aware = analyze_adaptive(instance, "block", rule, exact=exact, aware=True)
    tok = analyze_adaptive(instance, "token", rule, exact=exact)
    gap = lp.optimum - blk.block_efficiency
    optimal = blk.lossless and (gap == 0 if exact else abs(float(gap)) <= 1e-9)
    det = rule.stopping_time and _deterministic(instance, rule, exact)
    return AdaptiveOptimality(rule.name, rule.stopping_time, det, lp.optimum,
                              blk.block_efficiency, aware.block_efficiency, tok.block_efficiency,
                              blk.lossless, tok.lossless, gap, optimal, lp.solver)


__all__ = ["AdaptiveOptimality", "adaptive_node_budget_lp", "adaptive_optimality",
           "stopped_instance"]
