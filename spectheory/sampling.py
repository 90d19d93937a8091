"""One generic sampling step on top of a verifier's law.

Given a law ([`spectheory.law`][spectheory.law]; the K-path form ``stop [B, K, L+1]``,
``correction [B, K, L+1, V]``, or the single-path form without the path axis), draw the path and tau
jointly, (k_b, tau_b) ~ stop[b], and then Y_b ~ correction[b, k_b, tau_b]
([`sample_output`][spectheory.sampling.sample_output]). Works on any torch device and dtype; the
randomness comes from an optional ``torch.Generator`` (or explicit uniforms, for replaying the draws
of another implementation) and uses inverse-CDF sampling, so the same uniforms give the same draws.
"""

from __future__ import annotations

from .runtime._lazy import torch

from .law import Law


def inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Index k with CDF(k-1) <= u < CDF(k) along the last axis; probs [B, n], u [B]."""
    cdf = torch.cumsum(probs, dim=-1)
    k = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).squeeze(-1)
    return k.clamp(max=probs.shape[-1] - 1)


def sample_output(law: Law, generator: torch.Generator | None = None,
                  uniforms: torch.Tensor | None = None):
    """Draw (path k [B], tau [B], Y [B]) from a batched law of either form.

    (k, tau) are drawn jointly from ``stop`` flattened over (K, L+1) with the uniform
    ``uniforms[:, 0]``, then Y from the chosen correction row with ``uniforms[:, 1]``
    (``uniforms`` [B, 2] replaces the generator). For the single-path form k is 0.
    """
    stop, corr = law
    if stop.dim() == 2:
        stop, corr = stop.unsqueeze(1), corr.unsqueeze(1)
    Bsz, K, L1 = stop.shape
    if uniforms is None:
        uniforms = torch.rand(Bsz, 2, generator=generator, dtype=torch.float64,
                              device=stop.device)
    j = inverse_cdf(stop.reshape(Bsz, K * L1).to(torch.float64),
                    uniforms[:, 0].to(torch.float64))
    rows = corr.reshape(Bsz, K * L1, corr.shape[-1])[torch.arange(Bsz, device=corr.device), j]
    y = inverse_cdf(rows.to(torch.float64), uniforms[:, 1].to(torch.float64))
    return j // L1, j % L1, y


def sample_law(law: Law, generator: torch.Generator | None = None,
               uniforms: torch.Tensor | None = None):
    """(tau [B], Y [B]) from a single-path law: [`sample_output`][spectheory.sampling.sample_output]
    without the path."""
    _, tau, y = sample_output(law, generator, uniforms)
    return tau, y


#: The K-path name of [`sample_output`][spectheory.sampling.sample_output].
sample_multi_law = sample_output


def output_block(drafts: torch.Tensor, tau: torch.Tensor, y: torch.Tensor) -> list[tuple]:
    """The emitted blocks (X_1..X_tau, Y) as tuples of token ids (drafts [B, L])."""
    d = drafts.tolist()
    return [tuple(d[b][: int(tau[b])]) + (int(y[b]),) for b in range(len(d))]
