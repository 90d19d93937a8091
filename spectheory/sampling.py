"""One generic sampling step on top of a verifier's law.

Given ``Law(stop [B, L+1], correction [B, L+1, V])``, draw tau_b ~ stop[b] and then
Y_b ~ correction[b, tau_b]. Works on any torch device and dtype; the randomness comes from an
optional ``torch.Generator`` (or explicit uniforms, for replaying the draws of another
implementation) and uses inverse-CDF sampling so the same uniforms give the same draws.
"""

from __future__ import annotations

import torch

from .law import Law


def inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Index k with CDF(k-1) <= u < CDF(k) along the last axis; probs [B, n], u [B]."""
    cdf = torch.cumsum(probs, dim=-1)
    k = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).squeeze(-1)
    return k.clamp(max=probs.shape[-1] - 1)


def sample_law(law: Law, generator: torch.Generator | None = None,
               uniforms: torch.Tensor | None = None):
    """Draw (tau [B], Y [B]) from a batched law. ``uniforms`` [B, 2] replaces the generator."""
    stop, corr = law.stop, law.correction
    Bsz = stop.shape[0]
    if uniforms is None:
        uniforms = torch.rand(Bsz, 2, generator=generator, dtype=torch.float64,
                              device=stop.device)
    tau = inverse_cdf(stop.to(torch.float64), uniforms[:, 0].to(torch.float64))
    rows = corr[torch.arange(Bsz, device=corr.device), tau]
    y = inverse_cdf(rows.to(torch.float64), uniforms[:, 1].to(torch.float64))
    return tau, y


def output_block(drafts: torch.Tensor, tau: torch.Tensor, y: torch.Tensor) -> list[tuple]:
    """The emitted blocks (X_1..X_tau, Y) as tuples of token ids."""
    d = drafts.tolist()
    return [tuple(d[b][: int(tau[b])]) + (int(y[b]),) for b in range(len(d))]


def sample_multi_law(law, generator: torch.Generator | None = None,
                     uniforms: torch.Tensor | None = None):
    """Draw (path k [B], tau [B], Y [B]) from a batched :class:`spectheory.law.MultiLaw`.

    The same generic step as :func:`sample_law`: (k, tau) jointly from ``stop`` flattened over
    (K, L+1), then Y from the chosen correction row.
    """
    stop, corr = law.stop, law.correction
    Bsz, K, L1 = stop.shape
    flat = Law(stop.reshape(Bsz, K * L1), corr.reshape(Bsz, K * L1, corr.shape[-1]))
    j, y = sample_law(flat, generator, uniforms)
    return j // L1, j % L1, y
