"""Closed-form optimal acceptance of one drafted token: batched for real-vocabulary rows, and
exact (Fractions) for the L = 1 optimal-transport toolbox.

With K i.i.d. drafts of one token from q and the target p, the largest probability that a valid
verifier accepts one of the drafts (Hu et al., "Towards Optimal Multi-draft Speculative
Decoding", arXiv 2502.18779) is

    alpha*(p, q, K) = min_H [ p(H) + 1 - q(H)^K ],

the minimum over sets H of tokens, attained by a lower threshold set of the ratio p/q (the k
tokens of smallest p/q, tokens with q = 0 last), so one sort of the vocabulary and two prefix sums
give it for every row at once. K = 1 gives sum_x min(p(x), q(x)), token verification's
acceptance. In the real-model loop it is the per-step optimum beside each verifier's probability
of accepting at least one token, P(tau >= 1) (the first-token acceptance).
"""

from __future__ import annotations

import itertools
import math
import numbers
from fractions import Fraction

import numpy as np

from .inputs.instances import DEFAULT_TOL as ROW_SUM_TOL
from .inputs.processing import ROW_SUM_TOL as REAL_ROW_SUM_TOL
from .runtime._lazy import is_tensor, torch
from .runtime.errors import InstanceError, OptionError, SizeLimitError, is_integer
from .runtime.limits import shown

#: Most steps a search over all 2^V sets of tokens may take (`optimal_acceptance` with
#: ``drafting="norep"``: every set plus the recursion of `draws_inside` inside it;
#: `full_acceptance_possible` and `two_identical_drafts_acceptance`: V 2^V). Why 10^7: the
#: norep search runs about 1.2e6 steps/s in Fractions (measured: V = 12, K = 4 is 4.7e7 steps,
#: 37 s) and some 25 times faster in float, so the limit keeps an exact search under ~10 s; every
#: use in the tests, claims, figures and docs has V <= 5 (below 10^4 steps).
MAX_SUBSET_STEPS = 10**7
#: Largest K for exact (Fraction) rows: q(H)^K is computed exactly, and its numerator and
#: denominator grow K-fold (every use is K <= 64, the sweep's cap).
MAX_EXACT_PATHS = 1024
#: Largest K at all: the float closed forms raise q(H) to the K-th power as an int64 (numpy) or
#: a double (Python floats), and a Python int past this overflows both.
MAX_ANY_PATHS = 2**63 - 1
DRAFTING = ("iid", "norep")


def check_paths(paths, what: str = "paths") -> int:
    """K as a Python int: a Python or numpy integer in 1..`MAX_ANY_PATHS` (bools, floats and
    strings refused, never rounded: 2.9 is not 2), else
    [`OptionError`][spectheory.runtime.errors.OptionError]."""
    if not is_integer(paths):
        raise OptionError(f"{what} = {shown(paths)} must be a positive integer, not a "
                          f"{type(paths).__name__}")
    if paths < 1:
        raise OptionError(f"{what} = {shown(paths)} must be a positive integer")
    if paths > MAX_ANY_PATHS:
        from .runtime.limits import human_count

        raise OptionError(f"{what} = {human_count(paths)} is past 2^63 - 1, the most paths the "
                          "closed forms compute with")
    return int(paths)


def check_rows(p, q, sums: bool = True) -> tuple[list, list]:
    """``(list(p), list(q))`` if both are distributions over one vocabulary, else
    [`InstanceError`][spectheory.runtime.errors.InstanceError] in one line: sequences of the same
    length >= 1 of real numbers (Fractions, ints, floats, numpy numbers; not bools or text),
    finite, non-negative, summing to 1 (a row of Fractions and integers exactly; a row with a
    float within ``ROW_SUM_TOL``, the instance row tolerance
    `spectheory.inputs.instances.DEFAULT_TOL`). ``sums=False`` skips the sums only (rows read
    as given, as Global Resolution's node plan may pass a target row that is not normalised)."""
    rows = []
    for name, row in (("p", p), ("q", q)):
        if isinstance(row, (str, bytes, dict, set, frozenset)) or is_tensor(row) \
                or not hasattr(row, "__len__") or not hasattr(row, "__getitem__") \
                or getattr(row, "ndim", 1) != 1:
            raise InstanceError(f"{name} = {shown(row)} must be a list of probabilities (a "
                                f"sequence of numbers), not a {type(row).__name__}")
        rows.append(list(row))
    for name, vals in zip("pq", rows):
        if not vals:
            raise InstanceError(f"{name} is empty: a row needs at least one token")
    if len(rows[0]) != len(rows[1]):
        raise InstanceError(f"p has {len(rows[0])} entries and q has {len(rows[1])}: both rows "
                            "must be over one vocabulary")
    for name, vals in zip("pq", rows):
        exact = True  # a row of Fractions and integers only
        for a, v in enumerate(vals):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
                raise InstanceError(f"{name}[{a}] = {shown(v)} is not a number (a "
                                    f"{type(v).__name__})")
            if not isinstance(v, numbers.Rational):
                exact = False
                if not math.isfinite(v):
                    raise InstanceError(f"{name}[{a}] = {shown(v)} is not finite")
            if v < 0:
                raise InstanceError(f"{name}[{a}] = {shown(v)} is negative (not a probability)")
            if v > 1 + (0 if exact else ROW_SUM_TOL):
                raise InstanceError(f"{name}[{a}] = {shown(v)} is over 1 (not a probability)")
        if not sums:
            continue
        if exact:
            total = sum(vals, Fraction(0))
            if total != 1:
                raise InstanceError(f"{name} sums to {shown(total)}, not 1: a row of fractions "
                                    "must sum to exactly 1")
        else:
            total = math.fsum(float(v) for v in vals)
            if abs(total - 1.0) > ROW_SUM_TOL:
                raise InstanceError(f"{name} sums to {total!r}, not 1 within {ROW_SUM_TOL:g}")
    return rows[0], rows[1]


def _check_subsets(V: int, steps, what: str) -> None:
    """Refuse a search over all 2^V sets whose step count ``steps(V)`` exceeds
    `MAX_SUBSET_STEPS`, before it starts (2^V alone over the limit is refused without computing
    the count)."""
    count = None if V > MAX_SUBSET_STEPS.bit_length() else steps()
    if count is None or count > MAX_SUBSET_STEPS:
        size = f"{count:,} steps" if count is not None else f"over 2^{V} steps"
        raise SizeLimitError(f"{what}: a search over all 2^{V} sets of V = {V} tokens takes "
                             f"{size}, over the limit of {MAX_SUBSET_STEPS:,} "
                             "(spectheory.bounds.MAX_SUBSET_STEPS); use a smaller vocabulary"
                             + (" or drafting='iid' (V + 1 sets)" if "norep" in what else ""))


def norep_steps(q, K: int) -> int:
    """Steps of the ``norep`` search of `optimal_acceptance` (a loop turn of `draws_inside`'s
    recursion, summed over all 2^V sets H, plus one per set): with s tokens in the support of q
    and m = min(K, s) draws, a set holding h of them recurses through sum_(k <= min(m, h))
    h! / (h - k)! ordered draws, each looping over the s support tokens."""
    V = len(q)
    s = sum(1 for x in q if x != 0)
    m = min(K, s)
    nodes = 0
    for h in range(s + 1):
        per, fall = 0, 1
        for k in range(min(m, h) + 1):
            per += fall
            fall *= h - k
        nodes += math.comb(s, h) * per
    return (nodes << (V - s)) * max(s, 1) + (1 << V)


def multidraft_acceptance(p: torch.Tensor, q: torch.Tensor, paths: int) -> torch.Tensor:
    """alpha*(p, q, K) for rows ``p``, ``q`` [..., V] (module doc); returns [...] in the dtype of
    ``p`` (computed in float64).

    Refused in one line before any work: ``paths`` not a positive integer
    ([`OptionError`][spectheory.runtime.errors.OptionError]); ``p`` or ``q`` not floating-point
    tensors of one shape on one device, with a NaN, infinite or negative entry or a row that does
    not sum to 1 within `spectheory.inputs.processing.ROW_SUM_TOL` (summed in float64; the row
    tolerance of real-model rows: a float32 softmax over 151,936 tokens is within about 1e-6)
    ([`InstanceError`][spectheory.runtime.errors.InstanceError])."""
    paths = check_paths(paths)
    for name, row in (("p", p), ("q", q)):
        if not is_tensor(row):
            raise InstanceError(f"{name} = {shown(row)} must be a torch tensor of rows [..., V], "
                                f"not a {type(row).__name__}")
        if not row.dtype.is_floating_point:
            raise InstanceError(f"{name} has dtype {row.dtype}: rows of probabilities must be "
                                "a floating-point tensor")
    if p.dim() == 0 or tuple(p.shape) != tuple(q.shape) or p.shape[-1] == 0:
        raise InstanceError(f"p has shape {list(p.shape)} and q {list(q.shape)}: both must be "
                            "rows [..., V] of one shape, V >= 1")
    if p.device != q.device:
        raise InstanceError(f"p is on {p.device} and q on {q.device}: both must be on one device")
    p64, q64 = p.double(), q.double()
    _check_tensor_rows(p64, q64)
    ratio = torch.where(q64 > 0, p64 / torch.where(q64 > 0, q64, torch.ones_like(q64)),
                        torch.full_like(q64, float("inf")))
    order = torch.argsort(ratio, dim=-1, stable=True)
    zero = torch.zeros_like(p64[..., :1])
    P = torch.cat([zero, p64.gather(-1, order).cumsum(-1)], dim=-1)
    Q = torch.cat([zero, q64.gather(-1, order).cumsum(-1)], dim=-1).clamp(max=1.0)
    return (P + 1 - Q**paths).amin(-1).clamp(0.0, 1.0).to(p.dtype)


def _check_tensor_rows(p64, q64) -> None:
    """Rows [..., V] (float64 copies) finite, non-negative and summing to 1 within
    `spectheory.inputs.processing.ROW_SUM_TOL` (`multidraft_acceptance`)."""
    tol = REAL_ROW_SUM_TOL
    for name, row in (("p", p64), ("q", q64)):
        if row.numel() == 0:
            continue
        bad = ~torch.isfinite(row)
        if bool(bad.any()):
            where = tuple(int(i) for i in bad.nonzero()[0])
            raise InstanceError(f"{name}{list(where)} = {float(row[where])!r} is not finite")
        if bool((row < 0).any()):
            where = tuple(int(i) for i in (row < 0).nonzero()[0])
            raise InstanceError(f"{name}{list(where)} = {float(row[where])!r} is negative (not a "
                                "probability)")
        off = (row.sum(-1) - 1).abs()
        if float(off.max()) > tol:
            where = tuple(int(i) for i in (off == off.max()).nonzero()[0])
            total = float(row.sum(-1)[where]) if where else float(row.sum(-1))
            raise InstanceError(f"{name}{list(where) if where else ''} sums to {total!r}, not 1 "
                                f"within {tol:g}")


def ratio_order(p, q) -> list:
    """Tokens sorted by p/q increasing, tokens with q = 0 last (ties by token id)."""
    key = [(p[a] / q[a] if q[a] != 0 else None) for a in range(len(p))]
    return sorted(range(len(p)), key=lambda a: (key[a] is None, key[a] if key[a] is not None
                                                 else 0, a))


def optimal_acceptance(p, q, paths: int, drafting: str = "iid", *, sums: bool = True):
    """alpha*(p, q, K) = min_H [p(H) + 1 - D(all K drafts in H)] and a minimising H (a sorted
    tuple), exactly for Fraction rows (floats give floats).

    Tie rule: of several minimising sets, the first one met is returned, i.e. the smallest
    (``iid``: the shortest threshold prefix of `ratio_order`; ``norep``: the first subset by
    size, then lexicographically). Global Resolution's H* is this set, so the rule fixes its
    plan (for p = q = uniform on 3 tokens and K = 2, H* is the empty set, not all tokens).

    ``iid``: D(all in H) = q(H)^K, and the minimum is over the V + 1 lower threshold sets of p/q
    (module doc; Hu et al., arXiv 2502.18779, Eq. 8; for K = 2 Khisti et al.'s Theorem 3, arXiv
    2410.18234). ``norep`` (drafts without replacement, Hu et al.): D(all in H) is the chance that
    min(K, |supp q|) sequential draws without replacement all land in H, and the minimum is taken
    over every subset of the vocabulary (2^V sets; small V only).

    Refused in one line before any work: ``paths`` not a positive integer (at most
    `MAX_EXACT_PATHS` for exact rows) or an unknown ``drafting``
    ([`OptionError`][spectheory.runtime.errors.OptionError]); rows that are not distributions over
    one vocabulary ([`check_rows`][spectheory.bounds.check_rows]; ``sums=False`` reads rows that
    do not sum to 1 as given,
    [`InstanceError`][spectheory.runtime.errors.InstanceError]); a ``norep`` search over
    `MAX_SUBSET_STEPS` ([`norep_steps`][spectheory.bounds.norep_steps],
    [`SizeLimitError`][spectheory.runtime.errors.SizeLimitError])."""
    K = check_paths(paths)
    if not isinstance(drafting, str) or drafting not in DRAFTING:
        raise OptionError(f"drafting = {shown(drafting)} is unknown; choose iid or norep")
    p, q = check_rows(p, q, sums)
    _check_exact_paths(p, q, K)
    V = len(p)
    zero = p[0] * 0
    one = zero + 1
    best, best_H = None, ()
    if drafting == "iid":
        order = ratio_order(p, q)
        pH, qH = zero, zero
        for k in range(V + 1):
            if k:
                pH, qH = pH + p[order[k - 1]], qH + q[order[k - 1]]
            # a float running sum may end a rounding above 1: (1 + 2e-16)^(10^16) is e^2, and
            # the "probability" -7.2 (exact rows sum to 1 exactly)
            val = pH + 1 - min(qH, one) ** K
            if best is None or val < best:
                best, best_H = val, tuple(sorted(order[:k]))
        return best, best_H
    _check_subsets(V, lambda: norep_steps(q, K), "optimal_acceptance(drafting='norep')")
    for r in range(V + 1):
        for H in itertools.combinations(range(V), r):
            val = sum((p[a] for a in H), zero) + 1 - draws_inside(q, K, set(H))
            if best is None or val < best:
                best, best_H = val, H
    return best, best_H


def _check_exact_paths(p, q, K: int) -> None:
    if K > MAX_EXACT_PATHS and all(isinstance(v, numbers.Rational) for v in p + q):
        raise OptionError(f"paths = {K} is over {MAX_EXACT_PATHS} (spectheory.bounds."
                          "MAX_EXACT_PATHS) for exact rows: q(H)^K would be computed exactly; "
                          "use float rows")


def draws_inside(q, K: int, H: set):
    """P(min(K, |supp q|) draws from q without replacement all land in H)."""
    support = [x for x in range(len(q)) if q[x] != 0]
    m = min(K, len(support))

    def rec(taken: tuple, k):
        left = sum(q[x] for x in support if x not in taken)  # not left - q[x]: 1 - 0.999... lost
        if k == 0:                                            # digits (1e-4 at q = 1 - 1e-12)
            return left * 0 + 1
        total = left * 0
        for x in support:
            if x in H and x not in taken:
                total += q[x] / left * rec(taken + (x,), k - 1)
        return total

    return rec((), m)


def full_acceptance_possible(p, q, paths: int) -> tuple[bool, tuple | None]:
    """Whether K i.i.d. drafts can be accepted with probability 1: p(S) >= q(S)^K for every set
    S of tokens (Khisti et al., arXiv 2410.18234, Theorem 2 for K = 2; their Remark 2 for any K,
    which follows from the subset formula). Checked over all 2^V sets (exact for Fractions).
    Returns (verdict, a violating set or None). Refused as `optimal_acceptance` refuses (the
    search: V 2^V steps at most `MAX_SUBSET_STEPS`)."""
    K = check_paths(paths)
    p, q = check_rows(p, q)
    _check_exact_paths(p, q, K)
    V = len(p)
    _check_subsets(V, lambda: V << V, "full_acceptance_possible")
    for r in range(1, V + 1):
        for S in itertools.combinations(range(V), r):
            if sum(p[a] for a in S) < sum(q[a] for a in S) ** K:
                return False, S
    return True, None


def two_identical_drafts_acceptance(p, q):
    """Khisti et al.'s closed form for K = 2 identical (i.i.d.) drafts (arXiv 2410.18234, Theorem
    3): min over all 2^V sets S of p(S) + q(S^c)^2 + 2 q(S) q(S^c); brute force, a check independent
    of the threshold-set search of [`optimal_acceptance`][spectheory.bounds.optimal_acceptance].
    Refused as `full_acceptance_possible` refuses."""
    p, q = check_rows(p, q)
    V = len(p)
    _check_subsets(V, lambda: V << V, "two_identical_drafts_acceptance")
    best = None
    for r in range(V + 1):
        for S in itertools.combinations(range(V), r):
            qS = sum((q[a] for a in S), q[0] * 0)
            val = sum((p[a] for a in S), p[0] * 0) + (1 - qS) ** 2 + 2 * qS * (1 - qS)
            best = val if best is None or val < best else best
    return best


__all__ = ["DRAFTING", "MAX_EXACT_PATHS", "MAX_SUBSET_STEPS", "check_paths", "check_rows",
           "multidraft_acceptance", "norep_steps", "optimal_acceptance", "draws_inside",
           "full_acceptance_possible", "shown", "two_identical_drafts_acceptance", "ratio_order"]
