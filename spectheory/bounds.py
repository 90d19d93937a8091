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

from .runtime._lazy import torch


def multidraft_acceptance(p: torch.Tensor, q: torch.Tensor, paths: int) -> torch.Tensor:
    """alpha*(p, q, K) for rows ``p``, ``q`` [..., V] (module doc); returns [...] in the dtype of
    ``p`` (computed in float64)."""
    if isinstance(paths, bool) or not isinstance(paths, int) or paths < 1:
        raise ValueError(f"paths = {paths!r} must be a positive integer")
    p64, q64 = p.double(), q.double()
    ratio = torch.where(q64 > 0, p64 / torch.where(q64 > 0, q64, torch.ones_like(q64)),
                        torch.full_like(q64, float("inf")))
    order = torch.argsort(ratio, dim=-1, stable=True)
    zero = torch.zeros_like(p64[..., :1])
    P = torch.cat([zero, p64.gather(-1, order).cumsum(-1)], dim=-1)
    Q = torch.cat([zero, q64.gather(-1, order).cumsum(-1)], dim=-1).clamp(max=1.0)
    return (P + 1 - Q**paths).amin(-1).clamp(0.0, 1.0).to(p.dtype)


def ratio_order(p, q) -> list:
    """Tokens sorted by p/q increasing, tokens with q = 0 last (ties by token id)."""
    key = [(p[a] / q[a] if q[a] != 0 else None) for a in range(len(p))]
    return sorted(range(len(p)), key=lambda a: (key[a] is None, key[a] if key[a] is not None
                                                 else 0, a))


def optimal_acceptance(p, q, paths: int, drafting: str = "iid"):
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
    over every subset of the vocabulary (2^V sets; small V only)."""
    p, q, K = list(p), list(q), int(paths)
    V = len(p)
    zero = p[0] * 0
    best, best_H = None, ()
    if drafting == "iid":
        order = ratio_order(p, q)
        pH, qH = zero, zero
        for k in range(V + 1):
            if k:
                pH, qH = pH + p[order[k - 1]], qH + q[order[k - 1]]
            val = pH + 1 - qH**K
            if best is None or val < best:
                best, best_H = val, tuple(sorted(order[:k]))
        return best, best_H
    if drafting != "norep":
        raise ValueError(f"unknown drafting scheme {drafting!r}")
    for r in range(V + 1):
        for H in itertools.combinations(range(V), r):
            val = sum((p[a] for a in H), zero) + 1 - draws_inside(q, K, set(H))
            if best is None or val < best:
                best, best_H = val, H
    return best, best_H


def draws_inside(q, K: int, H: set):
    """P(min(K, |supp q|) draws from q without replacement all land in H)."""
    support = [x for x in range(len(q)) if q[x] != 0]
    m = min(K, len(support))

    def rec(taken: tuple, left, k):
        if k == 0:
            return left * 0 + 1
        total = left * 0
        for x in support:
            if x in H and x not in taken:
                total += q[x] / left * rec(taken + (x,), left - q[x], k - 1)
        return total

    return rec((), sum(q[x] for x in support), m)


def full_acceptance_possible(p, q, paths: int) -> tuple[bool, tuple | None]:
    """Whether K i.i.d. drafts can be accepted with probability 1: p(S) >= q(S)^K for every set
    S of tokens (Khisti et al., arXiv 2410.18234, Theorem 2 for K = 2; their Remark 2 for any K,
    which follows from the subset formula). Checked over all 2^V sets (exact for Fractions).
    Returns (verdict, a violating set or None)."""
    V = len(p)
    for r in range(1, V + 1):
        for S in itertools.combinations(range(V), r):
            if sum(p[a] for a in S) < sum(q[a] for a in S) ** int(paths):
                return False, S
    return True, None


def two_identical_drafts_acceptance(p, q):
    """Khisti et al.'s closed form for K = 2 identical (i.i.d.) drafts (arXiv 2410.18234, Theorem
    3): min over all 2^V sets S of p(S) + q(S^c)^2 + 2 q(S) q(S^c); brute force, a check independent
    of the threshold-set search of [`optimal_acceptance`][spectheory.bounds.optimal_acceptance]."""
    V = len(p)
    best = None
    for r in range(V + 1):
        for S in itertools.combinations(range(V), r):
            qS = sum((q[a] for a in S), q[0] * 0)
            val = sum((p[a] for a in S), p[0] * 0) + (1 - qS) ** 2 + 2 * qS * (1 - qS)
            best = val if best is None or val < best else best
    return best


__all__ = ["multidraft_acceptance", "optimal_acceptance", "draws_inside",
           "full_acceptance_possible", "two_identical_drafts_acceptance", "ratio_order"]
