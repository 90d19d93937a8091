"""Node rules given as a coupling: the multi-draft optimal-transport line in the node-rule form.

At a node u of the token tree the m drafted paths through u propose m candidate tokens S (a
multiset under ``iid`` drafting, a set under ``norep``) drawn from q(.|u). A *single-step
multi-draft verifier* is a conditional law pi(y | S) of the output token with

    sum_S P(S) pi(y | S) = p(y | u)      for every token y          (losslessness at u),

and it accepts when y is in S (the walk moves to child y, whose paths continue) and otherwise stops
at u with y as the correction. The optimal-transport papers (Hu et al., arXiv 2502.18779; Khisti et
al., arXiv 2410.18234; SpecHub, arXiv 2411.05289; Thomas & Pal's Global Resolution, arXiv
2511.15898) each give such a pi for one node; [`plan_rule`][spectheory.verifiers.coupling.plan_rule]
turns one into the node-rule signature of
[`node_recursive_law`][spectheory.verifiers.specinfer.node_recursive_law], so the same rule runs on
the token tree of K paths (any L), on draft trees, in the exact engine (float64 and rationals), in
the sampler and in the real-model loop.

A plan is computed once per node input (the rows q, p and the number of candidates m) by a
function ``make_plan(q, p, m, scheme) -> NodePlan`` over Python scalars (Fractions in exact
mode; floats are converted to the Fractions they are, so the plan is exact for the rows it is
given and rounded once, when the outputs are written back). The rejection law is one row per
node: every plan here rejects into the normalised unmatched part of p, which is what makes the
coupling lossless whatever the rejection probabilities of the individual outcomes are.

Outcome laws ([`outcomes`][spectheory.verifiers.coupling.outcomes]): under ``iid`` the m candidates
are i.i.d. q, a multiset S of probability m! / prod(mult!) prod q(x); under ``norep`` they are
min(m, |supp q|) distinct tokens drawn one after another without replacement (Jeon et al., arXiv
2402.14160), a set T of probability sum over orders of prod q(x_j) / (1 - q(x_1) - ... -
q(x_{j-1})), computed by a recursion over subsets.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable
from fractions import Fraction
from math import comb, factorial, lcm

import numpy as np

from ..runtime import backend as B
from ..runtime.errors import InputError, SizeLimitError

#: Most candidate outcomes (multisets or sets) a plan enumerates at one node: a maximum-flow
#: plan in rationals over 2,500 multisets takes about 0.1 s (V = 50, m = 2), over 20,000 minutes.
MAX_OUTCOMES = 2_500
#: Most distinct node inputs whose plans are kept between calls.
PLAN_CACHE = 4096


def outcome_count(support: int, m: int, scheme: str) -> int:
    """Number of candidate outcomes a plan enumerates at a node with ``support`` tokens of
    positive draft probability and m candidates: multisets (``iid``) or sets (``norep``)."""
    if scheme == "iid":
        return comb(support + m - 1, m)
    return comb(support, min(m, support))


def set_count(support: int, m: int, scheme: str = "iid") -> int:
    """Number of sets of at most m distinct drafted tokens (plans keyed by the set)."""
    return sum(comb(support, s) for s in range(1, min(m, support) + 1))


def check_outcomes(support: int, m: int, scheme: str, name: str, count=outcome_count) -> None:
    n = count(support, m, scheme)
    if n > MAX_OUTCOMES:
        what = "multisets" if count is outcome_count and scheme == "iid" else "sets"
        raise SizeLimitError(
            f"verifier {name!r} enumerates the candidate outcomes at each node: {support} "
            f"drafted tokens and {m} candidates give {n} {what}, above the limit of "
            f"{MAX_OUTCOMES}; use fewer paths or a draft restricted to its top tokens")


def integer_row(row):
    """``(n, d)`` with row[x] = n[x] / d exactly (d the least common denominator), or None
    when an entry is not an int or a Fraction: exact sums and powers of the row are then
    integer sums and powers, one Fraction built per result instead of one per operation (the
    same canonical value)."""
    d = 1
    for v in row:
        if not isinstance(v, (int, Fraction)):
            return None
        d = lcm(d, v.denominator)
    return [v.numerator * (d // v.denominator) for v in row], d


def outcomes(q, m: int, scheme: str) -> dict:
    """{S: P(S)} for the m candidates at a node (module doc); S a sorted tuple of tokens, only
    outcomes of positive probability."""
    support = [x for x in range(len(q)) if q[x] > 0]
    if m == 0 or not support:
        return {(): Fraction(1)}
    ints = integer_row(q) if scheme == "iid" else None
    if ints is not None:  # m! / prod(mult!) prod n(x) over d^m, in integers
        n, d = ints
        fact, dm = factorial(m), d**m
        out = {}
        for S in itertools.combinations_with_replacement(support, m):
            coef = fact
            num = 1
            for x, grp in itertools.groupby(S):
                c = len(list(grp))
                coef //= factorial(c)
                num *= n[x] ** c
            out[S] = Fraction(coef * num, dm)
        return out
    if scheme == "iid":
        out = {}
        fact = factorial(m)
        for S in itertools.combinations_with_replacement(support, m):
            coef = fact
            prob = Fraction(1)
            for x, grp in itertools.groupby(S):
                n = len(list(grp))
                coef //= factorial(n)
                prob *= q[x] ** n
            out[S] = coef * prob
        return out
    m = min(m, len(support))
    # P(the first |T| draws are the set T): recursion over subsets, by size
    level = {(): Fraction(1)}
    for _ in range(m):
        nxt: dict = {}
        for T, prob in level.items():
            left = sum((q[x] for x in support if x not in T), Fraction(0))
            for x in support:
                if x in T:
                    continue
                U = tuple(sorted(T + (x,)))
                nxt[U] = nxt.get(U, Fraction(0)) + prob * q[x] / left
        level = nxt
    return level


@dataclass
class NodePlan:
    """A single-step coupling at one node: ``accept[S][y]`` = P(Y = y | S) for y in S,
    ``reject[S]`` = P(Y not in S | S), and the rejection law ``correction``: a row over the
    vocabulary, the same for every S, or a function S -> row (evaluated for the outcomes
    looked up only). ``by_set``: the keys S are the sets
    of distinct candidate tokens (the rule reads only which tokens were drafted), else sorted
    multisets under ``iid``. ``stats`` holds what the plan knows of itself (its acceptance
    probability, for one). ``accept`` and ``reject`` are dicts or `LazyOutcomes` (the same
    read-only mapping, each entry computed when first looked up)."""

    accept: dict
    reject: dict
    correction: list | Callable
    stats: dict = field(default_factory=dict)
    by_set: bool = False

    def key(self, cands: list, scheme: str) -> tuple:
        if self.by_set or scheme == "norep":
            return tuple(sorted(set(cands)))
        return tuple(sorted(cands))

    def correction_for(self, S: tuple) -> list:
        if callable(self.correction):
            return self.correction(S)
        return self.correction


class LazyOutcomes(Mapping):
    """A read-only mapping {S: make(S)} over the keys of ``keys`` (a dict: its order and its
    membership test), each value computed on its first lookup and kept. A plan's rule reads
    the entries of the outcomes that were drafted only, a few of the thousands a plan
    enumerates; iterating, ``len`` and ``==`` behave as on the dict of every entry (which
    iterating builds), and each entry is the value ``make`` gives, whenever it is asked for."""

    __slots__ = ("_keys", "_make", "_done")

    def __init__(self, keys: dict, make: Callable):
        self._keys, self._make, self._done = keys, make, {}

    def __getitem__(self, S):
        try:
            return self._done[S]
        except KeyError:
            if S not in self._keys:
                raise
        value = self._done[S] = self._make(S)
        return value

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)

    def __contains__(self, S):
        return S in self._keys

    def __repr__(self):
        return repr(dict(self.items()))


def lazy_pair(keys: dict, make: Callable) -> tuple:
    """Two `LazyOutcomes` over ``keys`` sharing one evaluation of ``make(S) -> (first,
    second)`` per key: a plan's ``accept`` and ``reject``, which share their intermediate
    values."""
    both = LazyOutcomes(keys, make)
    return (LazyOutcomes(keys, lambda S: both[S][0]),
            LazyOutcomes(keys, lambda S: both[S][1]))


def exact_sum(values) -> Fraction:
    """The sum of Fractions (or ints) in pairs, then pairs of pairs: the same exact value as a
    running sum, faster when the denominators differ (the partial sums stay small longer)."""
    xs = [Fraction(0)] + list(values)
    if not all(isinstance(x, (int, Fraction)) for x in xs):  # floats: a running sum, as sum()
        return sum(xs[1:], Fraction(0))
    while len(xs) > 1:
        xs = [xs[i] + xs[i + 1] if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
    return xs[0]


def unmatched_correction(p, accepted) -> tuple[list, Fraction]:
    """The rejection law normalise(p - a) of a plan whose acceptance mass per token is ``a``
    (a dict), and its mass 1 - sum a; the target row itself where that mass is zero."""
    d = [p[y] - accepted.get(y, 0) for y in range(len(p))]
    total = exact_sum(d)
    if total <= 0:
        return list(p), Fraction(0)
    return [v / total for v in d], total


def _as_fraction(v) -> Fraction:
    """A row entry as the Fraction its float is; a NaN or an infinity (no Fraction: a raw
    ValueError or OverflowError before) is refused in one line."""
    if isinstance(v, Fraction):
        return v
    x = float(v)
    if not math.isfinite(x):
        raise InputError(f"a row holds {x}: the optimal-transport rules read the rows as exact "
                         "rationals, and probabilities are finite")
    return Fraction(x)


def _normalised(row) -> list:
    """A row as Fractions (floats exactly as they are), divided by its sum: the plan is then
    exactly lossless for the row the float stands for, up to the rounding of its output."""
    vals = [_as_fraction(v) for v in row]
    total = sum(vals, Fraction(0))
    return vals if total in (0, 1) else [v / total for v in vals]


def _rows(x):
    """A backend array as nested Python lists (Fractions stay Fractions)."""
    if B.is_torch(x):
        return x.detach().cpu().tolist()
    return np.asarray(x).tolist()


def _like(values, like):
    if B.is_torch(like):
        from ..runtime._lazy import torch
        return torch.tensor(values, dtype=like.dtype, device=like.device)
    return np.array(values, dtype=object if B.is_exact(like) else like.dtype)


def plan_rule(make_plan, scheme: str, name: str, count=outcome_count):
    """The node rule (signature of
    [`node_recursive_law`][spectheory.verifiers.specinfer.node_recursive_law]) of the coupling
    ``make_plan(q, p, m, scheme) -> NodePlan`` (module doc).

    Candidates are the member paths' tokens; under ``norep`` a repeated token (a surplus path
    of the scheme) is skipped, so m counts distinct tokens. The acceptance of token y is put on
    the first candidate carrying y. Plans are cached per (q, p, m). ``count(support, m,
    scheme)`` is the number of outcomes the plan enumerates, refused above
    `MAX_OUTCOMES` before any work."""
    cache: dict = {}

    def plan_for(qrow, prow, m):
        key = (tuple(qrow), tuple(prow), m)
        plan = cache.get(key)
        if plan is None:
            q, p = _normalised(qrow), _normalised(prow)
            support = sum(1 for v in q if v > 0)
            check_outcomes(support, m, scheme, name, count)
            plan = make_plan(q, p, m, scheme)
            if len(cache) >= PLAN_CACHE:
                cache.clear()
            cache[key] = plan
        return plan

    def rule(member, tok, q_rows, p_rows):
        Bsz, Kr, K = (int(s) for s in member.shape)
        exact = B.is_exact(q_rows)
        mem, toks = _rows(member), _rows(tok)
        qs, ps = _rows(q_rows), _rows(p_rows)
        conv = (lambda v: v) if exact else float
        accept = [[[0] * K for _ in range(Kr)] for _ in range(Bsz)]
        none = [[0] * Kr for _ in range(Bsz)]
        corr = [[None] * Kr for _ in range(Bsz)]
        for b in range(Bsz):
            for k in range(Kr):
                first = {}
                cands = []
                for j in range(K):
                    if mem[b][k][j]:
                        t = int(toks[b][j])
                        if t not in first:
                            first[t] = j
                        elif scheme == "norep":
                            continue
                        cands.append(t)
                plan = plan_for(qs[b][k], ps[b][k], len(cands))
                S = plan.key(cands, scheme)
                acc = plan.accept.get(S)
                if acc is None:  # an outcome of probability zero: reject into p itself
                    none[b][k] = conv(Fraction(1))
                    corr[b][k] = [conv(_as_fraction(v)) for v in ps[b][k]]
                    continue
                for t, a in acc.items():
                    accept[b][k][first[t]] = conv(a)
                none[b][k] = conv(plan.reject[S])
                corr[b][k] = [conv(v) for v in plan.correction_for(S)]
        zero = B.scalar(q_rows, 0)
        accept = [[[zero if a == 0 else a for a in row] for row in rows] for rows in accept]
        return _like(accept, q_rows), _like(none, q_rows), _like(corr, q_rows)

    rule.plan_for = plan_for
    return rule


def node_acceptance(make_plan, q, p, m: int, scheme: str) -> Fraction:
    """P(Y in S) of a plan at one node: sum_S P(S) sum_{y in S} pi(y | S), exactly."""
    q, p = _normalised(q), _normalised(p)
    plan = make_plan(q, p, m, scheme)
    total = Fraction(0)
    for S, P in outcomes(q, m, scheme).items():
        total += P * sum(plan.accept[plan.key(list(S), scheme)].values(), Fraction(0))
    return total


def node_output_law(make_plan, q, p, m: int, scheme: str) -> list:
    """The law of the output token at one node, sum_S P(S) pi(. | S), exactly: equal to p for a
    lossless plan (tests and the claims ledger read it)."""
    q, p = _normalised(q), _normalised(p)
    plan = make_plan(q, p, m, scheme)
    out = [Fraction(0)] * len(p)
    for S, P in outcomes(q, m, scheme).items():
        key = plan.key(list(S), scheme)
        for y, a in plan.accept[key].items():
            out[y] += P * a
        row = plan.correction_for(key)
        for y in range(len(p)):
            out[y] += P * plan.reject[key] * row[y]
    return out


def set_law(q, m: int) -> dict:
    """{D: P(the set of distinct tokens among m i.i.d. draws from q is D)}, by inclusion and
    exclusion over subsets: P(D) = sum_{B subset of D} (-1)^(|D|-|B|) q(B)^m (sets of at most m
    tokens of positive probability)."""
    support = [x for x in range(len(q)) if q[x] > 0]
    if m == 0 or not support:
        return {(): Fraction(1)}
    out = {}
    ints = integer_row(q)
    if ints is not None:  # the same sums over n / d: integers, q(B)^m computed once per B
        n, d = ints
        dm = d**m
        power: dict = {}
        for r in range(1, min(m, len(support)) + 1):
            for D in itertools.combinations(support, r):
                total = 0
                for s in range(r + 1):
                    for sub in itertools.combinations(D, s):
                        val = power.get(sub)
                        if val is None:
                            val = power[sub] = sum(n[x] for x in sub) ** m
                        total += -val if (r - s) % 2 else val
                if total > 0:
                    out[D] = Fraction(total, dm)
        return out
    for r in range(1, min(m, len(support)) + 1):
        for D in itertools.combinations(support, r):
            total = Fraction(0)
            for s in range(r + 1):
                for sub in itertools.combinations(D, s):
                    total += (-1) ** (r - s) * sum((q[x] for x in sub), Fraction(0)) ** m
            if total > 0:
                out[D] = total
    return out


__all__ = ["NodePlan", "LazyOutcomes", "lazy_pair", "outcomes", "set_law", "plan_rule",
           "node_acceptance", "node_output_law", "unmatched_correction", "outcome_count",
           "set_count", "MAX_OUTCOMES"]
