"""The lossy frontier: the largest E[tau + 1] of any verifier whose output law is within a
divergence budget of the target.

A verifier acts as verifiers do: from the K drafted paths omega (drawn from q under a drafting
scheme) it keeps a drafted prefix y^i (0 <= i <= L) and emits one more token a, any token; the
target continues from there. Its law is the table z(omega, b) >= 0, b = (y^i, a), with
sum_b z(omega, b) = P(omega) (the variables of the direct LP,
[`spectheory.lp.direct`][spectheory.lp.direct]). The emitted block has law
E(b) = sum_omega z(omega, b), and the output compared over L + 1 tokens is

    A(y) = sum_{b prefix of y} E(b) p(y_{|b|+1..L+1} | b)        (y in V^{L+1}),

"output block, then target completion" (Sun et al., arXiv 2403.10444, section 2). The frontier at
a budget delta is

    maximise  sum_b |b| E(b)  ( = E[tau + 1] )   over z >= 0 with the outcome sums above, and
    TV budget:  t_y >= A(y) - p(y),  t_y >= p(y) - A(y),  sum_y t_y <= 2 delta   (linear; t >= 0
                auxiliary, TV = (1/2) sum |A - p|), or
    KL budget:  sum_y A(y) log(A(y) / p(y)) <= delta                 (convex: KL(output || target)).

At delta = 0 the TV problem is the direct LP: its optimum is block verification's E[tau + 1] for
K = 1 (Sun et al.; Thomas & Pal, arXiv 2602.16961), checked exactly in rationals. A rule that
chooses the whole L + 1 block freely (output any Z^{L+1} jointly with the draft, accepted count =
the common prefix of Z and X, capped at L) is not a verifier: at delta = 0 its optimum is the
full-knowledge coupling bound ([`free_block_lp`][spectheory.lp.frontier.free_block_lp];
[`spectheory.lp.coupling`][spectheory.lp.coupling]), above block verification.

Routes. TV: the LP in [`SparseLP`][spectheory.lp.sparse.SparseLP] form, HiGHS with a closed float
certificate, or exactly for a rational delta (rounded HiGHS primal and dual points verified in
Fractions, [`solve_exact_via_highs`][spectheory.lp.sparse.solve_exact_via_highs]). KL: cvxpy
(exponential cone, Clarabel); its point is re-evaluated (outcome sums, KL of its own output law)
and an upper bound is computed without it: the LP with the KL budget replaced by its tangent cut
at that point (KL is convex, so the cut relaxes the budget), HiGHS with a float certificate. The
reported duality gap is that bound minus the point's value (about 1e-7 on the toy instances; over
`GAP_TOL` relative, the answer is refused).

Independent bounds ([`checked`][spectheory.lp.trust.checked]) before any answer is returned:

* upper: L + 1; the coupling bound plus the budget, 1 + sum_{j=1}^{L} min(1, c_j + delta) with
  c_j = sum_{|s| = j} min(C(s), p(s)) and C(s) the probability that s is drafted: the rule keeps
  s only if it was drafted, and the output starts with s with probability at most p(s) plus its
  share of the TV budget (marginals of a law within TV delta are within delta). For KL, Pinsker
  (TV <= sqrt(KL / 2)) gives the same bound at sqrt(delta / 2) and the TV frontier there, which
  is solved too when ``pinsker=True``;
* lower: block verification's E[tau + 1] (delta-independent, lossless); the mixture of block
  verification with "accept every draft" (value L + 1, TV t_all), v_0 + (L + 1 - v_0)
  min(1, delta / t_all) (the frontier is concave in delta); every registered relaxed rule whose
  exact divergence is within the budget (``rules``).
"""

from __future__ import annotations

import math
import numbers
import re
import time
from fractions import Fraction

import numpy as np

from spectheory.bounds import shown
from spectheory.engine.plan import MAX_PATHS
from spectheory.inputs.instances import Instance
from spectheory.runtime import limits
from spectheory.runtime.errors import SizeLimitError, SpectheoryError

from .direct import DRAFTING, build_direct_outcomes, draft_outcomes
from .node_budget import _tables
from ._guards import check_common, check_limit, check_paths
from .result import LPError, LPResult
from .sparse import (BYTES_PER_NONZERO, SparseLP, Timer, check_lp_size, concat_blocks, lp_limit,
                     solve_exact_via_highs)
from .trust import Bound, checked, greedy_value, iid_coverage, outcome_coverage
from spectheory.runtime.limits import shown as _repr_cut

#: Registered lossy rules whose exact (E[tau + 1], divergence) points bound the frontier below.
RULES = ("greedy", "additive", "multiplicative", "top-m", "trtllm-relaxed", "sglang-threshold",
         "threshold", "lenient", "cactus", "entropy-threshold", "typical")
#: Size guard of the rules' exact analyses (sequences of the engine).
RULE_MAX_SEQUENCES = 20_000
#: Float slack of a KL budget check on a solver's point.
KL_TOL = 1e-7
#: Largest relative gap between a KL solve's point and its tangent-cut upper bound.
GAP_TOL = 1e-5
#: Weight of the target mixed into the tangent point (keeps every log finite).
TANGENT_MIX = 1e-9


def _tangent_bound(base: SparseLP, M, target, A0, delta: float) -> float:
    """An upper bound on the KL frontier: KL(. || p) is convex, so KL(A) <= delta implies
    KL(A1) + g.(A - A1) <= delta for A1 = (1 - eps) A0 + eps p and g = log(A1 / p) + 1 (its
    gradient); the LP with this one cut in place of the KL budget (HiGHS, float certificate)
    has an optimum at or above the frontier's. Entries where p = 0 must stay 0 (rows A = 0)."""
    keep = target > 0
    A1 = (1 - TANGENT_MIX) * A0 + TANGENT_MIX * target
    g = np.zeros(len(target))
    g[keep] = np.log(A1[keep] / target[keep]) + 1.0
    kl1 = float(np.sum(A1[keep] * np.log(A1[keep] / target[keep])))
    rhs = delta - kl1 + float(g[keep] @ A1[keep])
    row = np.asarray(M.T @ g).reshape(-1)  # g.(M x)
    nz = np.nonzero(row)[0]
    ub = (np.zeros(len(nz), dtype=np.int64), nz, row[nz], np.array([rhs]))
    eq = base.eq
    if (~keep).any():
        Mz = M[np.nonzero(~keep)[0]].tocoo()
        r0, c0, v0, b0 = eq
        eq = concat_blocks([(r0, c0, v0, b0), (Mz.row, Mz.col, Mz.data, np.zeros(Mz.shape[0]))],
                           False)
    lp = SparseLP(base.n, np.asarray(base.c, dtype=np.float64), ub, eq)
    lp.col_scale = base.col_scale
    _, opt, _, _ = lp.solve()
    return float(opt)


#: Longest divergence budget accepted as text (a decimal number or a fraction p/q).
MAX_BUDGET_CHARS = 64
#: Largest decimal exponent of a budget written in scientific notation: ``1e-400`` is an exact
#: fraction with a 401-digit denominator, while ``1e999999999`` would be a billion digits
#: (Python's Fraction builds that integer before anything else could refuse it).
MAX_BUDGET_EXPONENT = 400
#: Largest numerator or denominator of a budget given as a number, in bits: 1333 bits hold
#: 10^401, the denominator of the smallest budget typed as text (``1e-400``); a float's
#: denominator is at most 2^1074. A longer Fraction (1/10^5000) would make the exact certificate
#: fail in HiGHS' float rounding, and could not even be printed (int-to-str limit).
MAX_BUDGET_BITS = 1333
_BUDGET_TEXT = re.compile(r"\+?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?|[0-9]+/[0-9]+)")


def _budget_text(text: str, name: str) -> Fraction:
    """A budget typed as text: a nonnegative decimal (``0.05``, ``5e-2``) or fraction (``1/20``),
    as an exact Fraction; its length and exponent are checked before the Fraction is built."""
    s = text.strip()
    if len(s) > MAX_BUDGET_CHARS:
        raise LPError(f"{name} budget {text[:20]!r}... is {len(s)} characters long: write a "
                      f"number or a fraction p/q of at most {MAX_BUDGET_CHARS} characters")
    m = _BUDGET_TEXT.fullmatch(s)
    if m is None:
        if s.startswith("-") and _BUDGET_TEXT.fullmatch(s[1:]):
            if re.fullmatch(r"[0-9]+/0+", s[1:]):  # -0/0, -1/0: the zero is the fault
                raise LPError(f"{name} budget {text!r} divides by zero; not a finite number")
            if re.fullmatch(r"[0.]*0[0.]*(?:[eE][+-]?[0-9]+)?|0+/0*[1-9][0-9]*", s[1:]):
                return Fraction(0)  # -0, -0.0, -0/5: zero (as the number -0.0 is read)
            raise LPError(f"{name} budget {text!r} must be a finite number >= 0")
        raise LPError(f"{name} budget {text!r} is not a finite number: write a nonnegative "
                      "decimal (0.05, 5e-2) or a fraction (1/20)")
    if m.group(1) is not None and abs(int(m.group(1))) > MAX_BUDGET_EXPONENT:
        raise LPError(f"{name} budget {text!r}: exponent out of range "
                      f"-{MAX_BUDGET_EXPONENT}..{MAX_BUDGET_EXPONENT}")
    try:
        return Fraction(s)
    except ZeroDivisionError:
        raise LPError(f"{name} budget {text!r} divides by zero; not a finite number") from None


def _show(value) -> str:
    """A budget as typed, shortened: a Fraction with long terms as 'about 1e-400' (never
    raises: terms past the int-to-str limit are measured by their bit length)."""
    if isinstance(value, Fraction):
        if max(abs(value.numerator), value.denominator).bit_length() > 4 * MAX_BUDGET_BITS:
            return shown(value)
        text = str(value)
        if len(text) <= 40:
            return text
        if value == 0:
            return "0"
        digits = len(str(abs(value.numerator))) - len(str(value.denominator))
        return f"about 1e{digits:+d}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _budget(value, name: str, exact: bool):
    """A divergence budget: a finite number >= 0 (a Fraction, int, float or numpy number, or text
    as for `_budget_text`), as a Fraction when ``exact`` else a float. Refused in one line
    ([`LPError`][spectheory.lp.result.LPError]): NaN, infinities, negatives, values beyond the
    float range (even exact routes round through HiGHS) and, in float, positive values that round
    to 0. A TV budget above 1 is read as 1 (TV is at most 1: the same problem; 1e308 overflowed
    the LP's rows to infinity)."""
    if isinstance(value, (bool, np.bool_)):
        raise LPError(f"{name} budget {_show(value)} must be a number")
    if isinstance(value, str):
        v = _budget_text(value, name)
    elif isinstance(value, numbers.Rational):
        v = Fraction(int(value.numerator), int(value.denominator))
    elif isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise LPError(f"{name} budget {_show(value)} must be a finite number >= 0")
        v = Fraction(f)
    else:
        raise LPError(f"{name} budget {_show(value)} must be a number")
    if max(abs(v.numerator), v.denominator).bit_length() > MAX_BUDGET_BITS:
        raise LPError(f"{name} budget {_show(value)} has a numerator or denominator over "
                      f"{MAX_BUDGET_BITS} bits (about 401 digits; the smallest budget is about "
                      "1e-400): round it, e.g. Fraction(...).limit_denominator(10**12)")
    if v < 0:
        raise LPError(f"{name} budget {_show(value)} must be a finite number >= 0")
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise LPError(f"{name} budget {_show(value)} is too large: the largest accepted is about "
                      "1.8e308" + (" (a TV budget of 1 already allows every output law)"
                                   if name == "TV" else ""))
    if name == "TV" and v > 1:
        v, f = Fraction(1), 1.0
    if exact:
        return v
    if f == 0 and v != 0:
        raise LPError(f"{name} budget {_show(value)} is below the float range (it would round to "
                      "0); use 0" + (", or an exact rational budget (--exact)" if name == "TV"
                                     else " or a budget of at least 1e-300"))
    return f


def _target_law(p_levels, L: int, exact: bool):
    one = Fraction(1) if exact else 1.0
    t = np.array([one], dtype=object if exact else np.float64)
    for d in range(L + 1):
        t = (t[:, None] * p_levels[d]).reshape(-1)
    return t


#: Default cap on the frontier LP's variables (float and exact routes): a TV solve of this size
#: took under a minute in benchmarks (see `FRONTIER_SECONDS`); ``limit`` (``--max-sequences``)
#: replaces it, the environment's LP variable limit (``SPECTHEORY_MAX_LP_VARIABLES``, exact:
#: ``SPECTHEORY_MAX_EXACT_LP_VARIABLES``) lowers it.
FRONTIER_MAX_VARIABLES = 60_000
#: Timed reference solve of the TV frontier (HiGHS, float, one thread, the rules' bounds
#: included): (variables, seconds, exponent); the estimate is seconds * (n / variables) **
#: exponent. Measured: V, L = 5, 4 (22,655 variables) 5.4 s, 4, 5 (34,132) 16 s, 6, 4
#: (55,986) 36 s, 7, 4 (120,449) over 2 min; the exponent 2 leans long between them.
FRONTIER_SECONDS = (55_986, 36.0, 2.0)


def frontier_size(V: int, L: int, K: int = 1) -> tuple[int, int, int]:
    """Upper bounds (variables, constraints, nonzeros) of the TV frontier LP, from V, L and K
    alone (before anything is enumerated): the direct LP's variables (outcome-block masses and the
    emitted-block law, [`direct_size`][spectheory.lp.direct.direct_size]) plus one budget
    variable t_y per y in V^(L+1); rows: one per draft outcome (at most C(V^L + K - 1, K)) and
    per block, two per y and the budget row."""
    from .direct import direct_size

    N = V ** (L + 1)
    n, nnz = direct_size(V, L, K)
    outcomes = math.comb(V**L + K - 1, K)
    blocks = sum(V**j for j in range(1, L + 2))
    return n + N, outcomes + blocks + 2 * N + 1, nnz + 3 * N


def estimate_frontier_seconds(variables: int) -> float:
    """Rough time of a TV frontier solve with this many variables (`FRONTIER_SECONDS`)."""
    ref, seconds, power = FRONTIER_SECONDS
    if variables > 10**30:
        return math.inf
    return seconds * (variables / ref) ** power


_check_limit = check_limit


def check_frontier_size(V: int, L: int, K: int, limit: int | None, exact: bool,
                        what: str = "frontier LP", solves: int = 1) -> float:
    """Refuse a frontier LP over its variable cap (`FRONTIER_MAX_VARIABLES`, or ``limit``, the
    user's cap) or over the machine's memory, before anything is built, in one line naming V, L,
    K, the sizes, the estimated time (of ``solves`` solves of that size) and how to lower them;
    an accepted size estimated over `spectheory.runtime.limits.NOTE_SECONDS` is noted on stderr.
    Returns the estimated seconds."""
    limit = _check_limit(limit)
    mode = "exact" if exact else "float"
    n, m, nnz = frontier_size(V, L, K)
    est = solves * estimate_frontier_seconds(n)
    if limit is None:
        cap, whose = min(FRONTIER_MAX_VARIABLES, lp_limit(mode)), "default"
    else:
        cap, whose = limit, "--max-sequences"
    sizes = (f"{what} with V = {V}, L = {L}, K = {K}: {limits.human_count(n)} variables and "
             f"{limits.human_count(m)} constraints (V^(L+1) = {limits.human_count(V ** (L + 1))} "
             "outputs)")
    if n > cap:
        raise SizeLimitError(
            f"{sizes} exceed the {whose} cap of {cap:,} variables (estimated "
            f"{limits.human_seconds(est)}); use a smaller vocabulary or block length "
            "(the variables grow like L V^(L+1)) or fewer paths, or accept the size with "
            "--max-sequences N (Python: limit=N)")
    limits.check_memory(nnz * BYTES_PER_NONZERO, sizes,
                        "use a smaller vocabulary, block length or number of paths")
    if est > limits.NOTE_SECONDS:
        limits.note(f"{sizes}: estimated {limits.human_seconds(est)}")
    return est


class _Stages:
    """Progress of a long frontier solve on stderr: one note per stage, with the time so far
    against the estimate (only when the estimate is over `spectheory.runtime.limits.NOTE_SECONDS`;
    notes are shown by the command line, not under ``--time-limit``)."""

    def __init__(self, est: float, what: str):
        self.on = est > limits.NOTE_SECONDS
        self.est, self.what, self.t0 = est, what, time.monotonic()

    def __call__(self, stage: str) -> None:
        if self.on:
            limits.note(f"{self.what}: {stage} ({limits.human_seconds(time.monotonic() - self.t0)}"
                        f" so far, estimated {limits.human_seconds(self.est)} in all)")


def build_frontier(instance: Instance, paths: int = 1, drafting: str = "iid", exact: bool = False,
                   limit: int | None = None):
    """(lp, validity, info): the direct LP's variables and outcome rows as a
    [`SparseLP`][spectheory.lp.sparse.SparseLP] without its validity rows, and those rows
    (rows, cols, vals) of the map x -> A (the output law over V^{L+1}). Sizes are checked first
    ([`check_frontier_size`][spectheory.lp.frontier.check_frontier_size])."""
    K = _paths(paths)
    check_frontier_size(instance.vocab_size, instance.block_length, K, limit, exact)
    return _build(instance, K, drafting, exact)


def _paths(paths) -> int:
    """K in 1..`spectheory.engine.plan.MAX_PATHS` (the direct LP's outcomes, which it builds on)."""
    return check_paths(paths, MAX_PATHS)


def _build(instance: Instance, K: int, drafting: str, exact: bool):
    V, L = instance.vocab_size, instance.block_length
    p_levels, Q = _tables(instance, exact)
    combos, prob = draft_outcomes(Q, V, L, K, drafting, exact)
    lp, info = build_direct_outcomes(instance, combos, prob, exact, p_levels)
    r, c, v, b = lp.eq
    cut = lp.m_eq - V ** (L + 1)  # the validity rows come last
    keep = np.asarray(r) < cut
    validity = (np.asarray(r)[~keep] - cut, np.asarray(c)[~keep], np.asarray(v)[~keep])
    base = SparseLP(lp.n, lp.c, lp.ub, (np.asarray(r)[keep], np.asarray(c)[keep],
                                        np.asarray(v)[keep], np.asarray(b)[:cut]))
    n_z = info["z_variables"]
    scale = np.ones(lp.n)
    scale[:n_z] = np.asarray(lp.col_scale, dtype=np.float64)[:n_z]  # z <= P(omega); E, t <= 1
    base.col_scale = scale
    info.update({"combos": combos, "prob": prob, "p_levels": p_levels, "Q": Q,
                 "drafting": drafting})
    return base, validity, info


def _tv_lp(base: SparseLP, validity, target, delta, exact: bool) -> SparseLP:
    """The TV-budget LP: variables (x, t), t_y >= |A(y) - p(y)|, sum t <= 2 delta."""
    N = len(target)
    n = base.n + N
    one = Fraction(1) if exact else 1.0
    dt = object if exact else np.float64
    r, c, v = validity
    ty = base.n + np.arange(N)
    ones = np.full(N, one, dtype=dt)
    up = (np.concatenate([r, np.arange(N)]), np.concatenate([c, ty]),
          np.concatenate([np.asarray(v, dtype=dt), -ones]), np.asarray(target, dtype=dt))
    down = (np.concatenate([r, np.arange(N)]), np.concatenate([c, ty]),
            np.concatenate([-np.asarray(v, dtype=dt), -ones]), -np.asarray(target, dtype=dt))
    budget = (np.zeros(N, dtype=np.int64), ty, ones, np.array([2 * delta * one], dtype=dt))
    cvec = np.concatenate([np.asarray(base.c, dtype=dt), np.zeros(N, dtype=dt) * one])
    lp = SparseLP(n, cvec, concat_blocks([up, down, budget], exact), base.eq)
    lp.col_scale = np.concatenate([base.col_scale, np.ones(N)])
    return lp


def _bounds(instance, info, exact: bool, tv_budget, rules, skipped, kl=None) -> list:
    V, L = instance.vocab_size, instance.block_length
    p_levels, Q = info["p_levels"], info["Q"]
    one = Fraction(1) if exact else 1.0
    K = info["combos"].shape[1]
    if K == 1:
        C = iid_coverage(Q, 1)
    else:
        C = outcome_coverage(info["combos"], info["prob"], V, L)
    P = [np.array([one], dtype=object if exact else np.float64)]
    for d in range(L):
        P.append((P[-1][:, None] * p_levels[d]).reshape(-1))
    up = one
    for j in range(1, L + 1):
        up = up + min(one, np.minimum(C[j], P[j]).sum() + tv_budget)
    bounds = [Bound("upper", one * (L + 1), "L + 1"),
              Bound("upper", up, "coupling bound plus the TV budget" +
                    (" (Pinsker: sqrt(KL / 2))" if kl is not None else ""))]
    v0 = greedy_value(p_levels, Q, L)
    bounds.append(Bound("lower", v0, "block verification's E[tau+1], closed form"))
    # accept every draft of path 1: output X^L then Y ~ p(.|X^L)
    tgt = _target_law(p_levels, L, exact)
    acc = (Q[L][:, None] * p_levels[L]).reshape(-1)
    t_all = sum(abs(a - t) for a, t in zip(acc, tgt)) / 2
    if kl is None:
        if t_all == 0 or tv_budget >= t_all:
            mix = one * (L + 1)
        else:
            mix = v0 + (L + 1 - v0) * (tv_budget / t_all)
        bounds.append(Bound("lower", mix if exact else float(mix),
                            "mixture of block verification and accept-every-draft"))
    if rules and K == 1:
        bounds += _rule_bounds(instance, tv_budget if kl is None else None, kl, rules, skipped)
    return bounds


def _rules(rules) -> tuple:
    """``rules``: a list of registered rule names (empty for none); a string would be read
    letter by letter, a name that is not registered was only noted among the skipped bounds."""
    from spectheory.registry import registered

    if rules is None or isinstance(rules, (str, bytes)) or not isinstance(
            rules, (list, tuple, set, frozenset)):
        raise LPError(f"rules = {_repr_cut(rules, 40)} must be a list of registered rule names (e.g. "
                      f"[{RULES[0]!r}]; [] for none)")
    known = registered()
    for name in rules:
        if not isinstance(name, str) or name not in known:
            raise LPError(f"rules: {_repr_cut(name, 40)} is not a registered rule")
    return tuple(rules)


def _rule_bounds(instance, tv, kl, rules, skipped) -> list:
    """[Bound] below from each registered rule whose exact divergence is within the budget."""
    import warnings

    from spectheory.engine.analysis import analyze
    from spectheory.verifiers.relaxed import divergences

    out = []
    for name in rules:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inst = instance if name not in ("cactus", "entropy-threshold", "typical") \
                    else instance.to_float()
                res = analyze(inst, name, max_sequences=RULE_MAX_SEQUENCES)
        except SpectheoryError as exc:
            skipped.append(f"{name}: {exc}")
            continue
        d = divergences(res)
        if tv is not None:
            if (d["tv"] if isinstance(d["tv"], Fraction) and isinstance(tv, Fraction)
                    else float(d["tv"]) + 1e-12) <= tv:
                out.append(Bound("lower", res.block_efficiency if res.exact and isinstance(
                    tv, Fraction) else float(res.block_efficiency),
                    f"{name}: exact TV {float(d['tv']):.6g} within the budget"))
        elif d["kl_output_target"] + d["kl_output_target_err"] <= kl:
            out.append(Bound("lower", float(res.block_efficiency),
                             f"{name}: KL {d['kl_output_target']:.6g} within the budget"))
    return out


def frontier_lp(instance: Instance, tv=None, kl=None, paths: int = 1, drafting: str = "iid",
                exact: bool = False, solver: str | None = None, limit: int | None = None,
                rules=RULES, pinsker: bool = True) -> LPResult:
    """The largest E[tau + 1] of any verifier whose output law is within ``tv`` (total variation)
    or ``kl`` (KL(output || target)) of the target (module docstring). Exactly one budget.

    ``exact`` (TV only): a rational budget, an exact optimum verified in Fractions. ``rules``:
    registered rules whose exact points bound the optimum below (K = 1). ``pinsker`` (KL): also
    solve the TV frontier at sqrt(kl / 2) as an upper bound. The result's ``details`` hold the
    budget, the certificate (TV) or the duality gap and the re-evaluated KL of the primal point
    (KL), and the bounds checked.
    """
    exact = check_common(instance, "frontier_lp", exact, limit, solver,
                         exacts=("exact-certificate",))
    if (tv is None) == (kl is None):
        raise LPError("give exactly one budget: tv=... or kl=...")
    if kl is not None and exact:
        raise LPError("the KL frontier is a convex program solved in float (cvxpy); drop "
                      "exact=True (--exact)")
    if kl is not None and solver not in (None, "cvxpy"):
        raise LPError(f"the KL frontier is a convex program that cvxpy solves; solver "
                      f"{_repr_cut(solver, 40)} cannot (leave the solver out, or choose cvxpy)")
    K = _paths(paths)
    if not isinstance(drafting, str) or drafting not in DRAFTING:  # else read as norep
        raise LPError(f"unknown drafting scheme {_repr_cut(drafting, 40)}; choose from "
                      f"{', '.join(DRAFTING)}")
    if not isinstance(pinsker, (bool, np.bool_)):
        raise LPError(f"pinsker = {_repr_cut(pinsker, 40)} must be True or False")
    rules = _rules(rules)
    delta = _budget(tv, "TV", exact) if tv is not None else _budget(kl, "KL", False)
    V, L = instance.vocab_size, instance.block_length
    what = "TV frontier LP" if kl is None else "KL frontier program"
    # KL: the convex program, then the TV frontier at sqrt(KL / 2) (Pinsker)
    est = check_frontier_size(V, L, K, limit, exact, what, 2 if kl is not None and pinsker else 1)
    stages = _Stages(est, what)
    if tv is not None:
        return _frontier_tv(instance, delta, K, drafting, exact, solver, rules, stages)
    if delta == 0:
        # KL(A || p) = 0 iff A = p iff TV = 0: the TV LP at 0 (the convex program at a budget of
        # 0 has no interior, and its solver's gap was refused)
        res = _frontier_tv(instance, 0.0, K, drafting, False, None, rules, stages)
        res.details["budget"] = ("kl", 0.0)
        return res
    timer = Timer()
    stages("building")
    base, validity, info = _build(instance, K, drafting, False)
    target = np.asarray(_target_law(info["p_levels"], L, False), dtype=np.float64)
    stages("solving with cvxpy (Clarabel)")
    opt, details = _solve_kl(base, validity, target, delta)
    res = LPResult("frontier", K, opt, "cvxpy", "optimal", base.n, base.m_eq + 1,
                   timer.seconds, details)
    skipped = []
    tvb = math.sqrt(delta / 2)
    stages("independent bounds")
    bounds = _bounds(instance, info, False, tvb, rules, skipped, kl=delta)
    if pinsker:
        stages(f"the TV frontier at sqrt(KL / 2) = {tvb:.6g} (Pinsker's upper bound)")
        tvres = _frontier_tv(instance, tvb, K, drafting, False, None, (), stages)
        bounds.append(Bound("upper", float(tvres.optimum),
                            f"TV frontier at sqrt(KL / 2) = {tvb:.6g} (Pinsker)"))
    return checked(res, bounds, skipped)


def _frontier_tv(instance: Instance, delta, K: int, drafting: str, exact: bool, solver, rules,
                 stages) -> LPResult:
    """The TV frontier at budget ``delta`` (checked: a Fraction when exact, else a float), sizes
    checked by the caller."""
    timer = Timer()
    stages("building the TV LP")
    base, validity, info = _build(instance, K, drafting, exact)
    target = _target_law(info["p_levels"], instance.block_length, exact)
    lp = _tv_lp(base, validity, target, delta, exact)
    stages("solving the TV LP with HiGHS" + (" and certifying it in rationals" if exact else ""))
    if exact:
        opt, how = solve_exact_via_highs(lp)
        solver_name, details = "exact-certificate", {"certificate": how}
    else:
        _, opt, _, solver_name = lp.solve(solver)
        details = {"float_certificate": lp.last_certificate}
    details.update({"budget": ("tv", delta)})
    res = LPResult("frontier", K, opt, solver_name, "optimal", lp.n, lp.constraints,
                   timer.seconds, details)
    skipped: list = []
    stages("independent bounds")
    return checked(res, _bounds(instance, info, exact, delta, rules, skipped), skipped)


def _solve_kl(base: SparseLP, validity, target, delta: float):
    """cvxpy solve of the KL frontier; (optimum, details) or LPError."""
    try:
        import cvxpy as cp
    except ImportError:
        from spectheory.runtime.errors import MissingExtraError

        raise MissingExtraError("the KL frontier needs cvxpy: pip install 'spectheory[cvxpy]'") \
            from None
    import scipy.sparse as sp

    n = base.n
    r, c, v, b = base.eq
    A_eq = sp.csr_matrix((np.asarray(v, dtype=np.float64), (r, c)), shape=(base.m_eq, n))
    M = sp.csr_matrix((np.asarray(validity[2], dtype=np.float64), (validity[0], validity[1])),
                      shape=(len(target), n))
    cvec = np.asarray(base.c, dtype=np.float64)
    x = cp.Variable(n, nonneg=True)
    out = M @ x
    keep = target > 0
    cons = [A_eq @ x == np.asarray(b, dtype=np.float64),
            cp.sum(cp.rel_entr(out[np.nonzero(keep)[0]], target[keep])) <= delta]
    if (~keep).any():  # no output mass where the target has none (KL finite)
        cons.append(out[np.nonzero(~keep)[0]] == 0)
    prob = cp.Problem(cp.Maximize(cvec @ x), cons)
    import warnings

    try:  # an inaccurate status is not trusted as such: the point is re-checked below
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            limits.interruptible(prob.solve, solver=cp.CLARABEL, tol_gap_abs=1e-11,
                                 tol_gap_rel=1e-11, tol_feas=1e-11)  # signals handled
    except cp.error.SolverError as exc:
        raise LPError(f"KL frontier: cvxpy/Clarabel failed ({exc})") from None
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or x.value is None:
        raise LPError(f"KL frontier: cvxpy status {prob.status}; refused")
    xv = np.maximum(np.asarray(x.value), 0.0)
    resid = float(np.max(np.abs(A_eq @ xv - np.asarray(b, dtype=np.float64))))
    A = M @ xv
    kl_point = _check_kl_point(A, target, resid, delta)
    primal = float(cvec @ xv)
    upper = _tangent_bound(base, M, target, A, delta)
    gap = upper - primal
    if gap < -1e-6 or gap > GAP_TOL * max(1.0, abs(primal)):
        raise LPError(f"KL frontier: the gap between the solver's point {primal:.10g} and the "
                      f"tangent-cut upper bound {upper:.10g} is {gap:.3g}; refused")
    value = primal
    return value, {"budget": ("kl", delta), "duality_gap": gap, "upper_bound": upper,
                   "kl_of_point": kl_point, "outcome_residual": resid}


def _check_kl_point(A, target, resid: float, delta: float) -> float:
    """The KL of the solver's outcome law ``A`` (shape [n_sequences]) to ``target`` (same shape),
    refusing a point that is not feasible: rows off by more than 1e-6, mass above 1e-6 where the
    target has none (KL infinite: beyond the rows' tolerance it is no rounding of a feasible
    point), or a KL over the budget."""
    pairs = list(zip(np.asarray(A, dtype=np.float64).tolist(),
                     np.asarray(target, dtype=np.float64).tolist()))
    outside = sum(a for a, t in pairs if t <= 0 < a)
    if outside > 1e-6:
        raise LPError(f"KL frontier: the solver's point puts mass {outside:.2g} on sequences the "
                      f"target never produces (KL infinite against the budget {delta:.6g}); "
                      f"refused")
    # Python floats: a / t at a subnormal t is inf without numpy's overflow warning on stderr
    kl_point = float(sum(a * math.log(a / t) for a, t in pairs if a > 0 and t > 0))
    if resid > 1e-6 or kl_point > delta + KL_TOL:
        raise LPError(f"KL frontier: the solver's point is not feasible (outcome rows off by "
                      f"{resid:.2g}, KL {kl_point:.6g} against the budget {delta:.6g}); refused")
    return kl_point


def free_block_lp(instance: Instance, tv=0, exact: bool = False) -> LPResult:
    """The rule that chooses the whole L + 1 block freely (not a verifier): a joint law
    w(x, z) >= 0 of the draft x in V^L and the output z in V^{L+1} with sum_z w(x, z) = q(x) and
    the law of z within ``tv`` of the target, accepted count = the common prefix of z and x
    (capped at L). At tv = 0 its optimum is the coupling bound
    ([`coupling_bound`][spectheory.lp.coupling.coupling_bound]), above every verifier's."""
    timer = Timer()
    exact = check_common(instance, "free_block_lp", exact)
    V, L = instance.vocab_size, instance.block_length
    delta = _budget(tv, "TV", exact)
    nx, nz = V**L, V ** (L + 1)
    check_lp_size(nx * nz + nz, 3 * nx * nz, "free-block LP", None, "exact" if exact else "float",
                  "V^L x V^(L+1) joint variables")
    p_levels, Q = _tables(instance, exact)
    target = _target_law(p_levels, L, exact)
    one = Fraction(1) if exact else 1.0
    dt = object if exact else np.float64
    xs, zs = np.divmod(np.arange(nx * nz), nz)
    xd = np.array([[(x // V ** (L - 1 - i)) % V for i in range(L)] for x in range(nx)])
    zd = np.array([[(z // V ** (L - i)) % V for i in range(L)] for z in range(nz)])
    same = np.cumprod(xd[xs] == zd[zs], axis=1).sum(axis=1)  # common prefix length, <= L
    n = nx * nz + nz
    c = np.zeros(n, dtype=dt) * one
    c[:nx * nz] = np.array([one * (int(k) + 1) for k in same], dtype=dt)
    eq = (xs, np.arange(nx * nz), np.full(nx * nz, one, dtype=dt), np.asarray(Q[L], dtype=dt))
    ty = nx * nz + np.arange(nz)
    ones_w = np.full(nx * nz, one, dtype=dt)
    ones_t = np.full(nz, one, dtype=dt)
    up = (np.concatenate([zs, np.arange(nz)]), np.concatenate([np.arange(nx * nz), ty]),
          np.concatenate([ones_w, -ones_t]), np.asarray(target, dtype=dt))
    down = (np.concatenate([zs, np.arange(nz)]), np.concatenate([np.arange(nx * nz), ty]),
            np.concatenate([-ones_w, -ones_t]), -np.asarray(target, dtype=dt))
    budget = (np.zeros(nz, dtype=np.int64), ty, ones_t, np.array([2 * delta * one], dtype=dt))
    lp = SparseLP(n, c, concat_blocks([up, down, budget], exact), concat_blocks([eq], exact))
    if exact:
        opt, how = solve_exact_via_highs(lp)
        name = "exact-certificate"
    else:
        _, opt, _, name = lp.solve()
    res = LPResult("free-block", 1, opt, name, "optimal", lp.n, lp.constraints, timer.seconds,
                   {"budget": ("tv", delta)})
    return checked(res, [Bound("upper", one * (L + 1), "L + 1")])


__all__ = ["FRONTIER_MAX_VARIABLES", "RULES", "build_frontier", "check_frontier_size",
           "estimate_frontier_seconds", "free_block_lp", "frontier_lp", "frontier_size"]
