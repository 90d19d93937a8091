"""Closed-form optimal acceptance of one drafted token, batched for real-vocabulary rows.

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

from ._lazy import torch


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


__all__ = ["multidraft_acceptance"]
