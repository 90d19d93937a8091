"""Randomness and coin-level errors: samplers whose *law* formula is right but whose coins are not.

These need a sampler-level test
([`check_sampler`][spectheory.testing.checks.sampler.check_sampler]): the verifier's law is token
verification (Leviathan et al., ICML 2023), and the bug is in how the random numbers are drawn or
compared.

* [`zero_coin_sampler`][spectheory.testing.mutants.coins.zero_coin_sampler] /
  [`zero_coin_coin_sampler`][spectheory.testing.mutants.coins.zero_coin_coin_sampler]
  (SGLang #35771, fixed by #35798): acceptance ``coin <= p/q`` with coins in [0, 1): a coin
  of exactly 0 accepts a draft whose target probability is 0. The chance of a 0 coin is
  2^-24 (float32) or 2^-53 (float64) per draw, so no sampling test sees it; pinned coins do
  ([`check_zero_coin`][spectheory.testing.mutants.coins.check_zero_coin]).
* [`shared_noise_sampler`][spectheory.testing.mutants.coins.shared_noise_sampler] (vLLM #47386,
  fixed by #54282): the draft's Gumbel noise and the recovery noise came from the same Philox
  offset, so the correction token is an argmax over the *same* noise that made the draft win, which
  under-weights draft-favoured tokens. Caught in ``law`` mode.
"""

from __future__ import annotations

import torch

from ...sampling import inverse_cdf

__all__ = ["zero_coin_sampler", "zero_coin_coin_sampler", "hf_zero_coin_coin_sampler",
           "shared_noise_sampler",
           "independent_noise_sampler",
           "zero_probability_rows", "shared_noise_rows", "check_zero_coin", "COIN_STEP",
           "posterior_gumbel"]


def _token_rows(drafts, q, p):
    """Acceptance thresholds a_i = min(1, p(X_i)/q(X_i)) [B, L] (q = 0: 0) and residual rows."""
    L = drafts.shape[-1]
    idx = drafts.unsqueeze(-1)
    px = p[:, :L].gather(-1, idx)[..., 0]
    qx = q.gather(-1, idx)[..., 0]
    a = torch.where(qx > 0, px / torch.where(qx > 0, qx, torch.ones_like(qx)),
                    torch.zeros_like(px)).clamp(max=1.0)
    res = (p[:, :L] - q).clamp(min=0.0)
    return a, res


def _chain(drafts, q, p, coins, token_coin):
    """Token verification driven by ``coins`` [B, L] (accept on coin <= a) and an inverse-CDF
    correction at ``token_coin`` [B]; returns (accepted, token)."""
    Bsz, L = drafts.shape
    a, res = _token_rows(drafts, q, p)
    ok = coins <= a
    tau = torch.cumprod(ok.long(), dim=1).sum(1)  # positions accepted before the first failure
    rows = torch.cat([res, p[:, L:]], dim=1)[torch.arange(Bsz), tau]  # [B, V]
    rows = torch.where(rows.sum(-1, keepdim=True) > 0, rows,
                       p[torch.arange(Bsz), tau])  # residual of mass 0: p (probability 0)
    return tau, inverse_cdf(rows.to(torch.float64), token_coin.to(torch.float64))


#: Grid step of float64 uniforms (torch.rand draws k 2^-53, k in [0, 2^53)).
COIN_STEP = 2.0**-53


def zero_coin_coin_sampler(drafts, q, p, uniforms):
    """SGLang #35771, coin-driven in spectheory's convention (position coins u in (0, 1]).

    The engine's coins lie in [0, 1) (``torch.rand``); the kit's u in (0, 1] maps to the same grid
    point of that range, coin = u - 2^-53 (so the smallest kit coin 2^-53 is the engine's coin
    0). Acceptance ``coin <= min(1, p/q)``, Y by inverse CDF at u_{L+1}. Away from a coin of 0 the
    decisions equal the reference's (they differ only when u lies within 2^-53 of a threshold).
    """
    L = drafts.shape[-1]
    coins = (uniforms[:, :L].to(torch.float64) - COIN_STEP).clamp(min=0.0)
    return _chain(drafts, q, p, coins, uniforms[:, L])


def hf_zero_coin_coin_sampler(drafts, q, p, uniforms):
    """Hugging Face transformers' ``_speculative_sampling`` (transformers/generation/utils.py,
    5.x), the same class as SGLang #35771: ``r_i = torch.rand_like(probability_ratio)``, float32
    coins in [0, 1), and ``is_accepted = r_i <= probability_ratio``, so a coin of exactly 0
    (2^-24 a draw) accepts a draft whose target probability is 0. Coin-driven, declaring the
    engine's convention (``coin_convention`` =
    ``TRANSFORMERS_COINS`` of `spectheory.testing.engines.layouts`): ``check_sampler``
    hands it the kit's coins mapped onto float32 [0, 1), the smallest onto 0. Y by inverse CDF at
    ``uniforms[:, L]`` (the library draws it with ``torch.multinomial``: ``mode="coins-tau"``).
    Found by ``check_sampler(engine_coin_sampler(_speculative_sampling, TRANSFORMERS), "token",
    mode="coins-tau")`` on the default instances, with the coins pinned through
    ``torch.rand_like``."""
    L = drafts.shape[-1]
    return _chain(drafts, q, p, uniforms[:, :L].to(torch.float64), uniforms[:, L])


def _declare_transformers_coins():
    from ..engines.layouts import TRANSFORMERS_COINS

    hf_zero_coin_coin_sampler.coin_convention = TRANSFORMERS_COINS


_declare_transformers_coins()


def zero_coin_sampler(drafts, q, p, generator=None):
    """SGLang #35771 in the canonical signature: coins ``torch.rand`` in [0, 1) (a coin of
    exactly 0 is possible), acceptance ``coin <= min(1, p/q)``."""
    Bsz, L = drafts.shape
    u = torch.rand(Bsz, L + 1, generator=generator, dtype=torch.float64, device=p.device)
    return _chain(drafts, q, p, u[:, :L], u[:, L])


def posterior_gumbel(logq: torch.Tensor, winner: torch.Tensor, generator=None) -> torch.Tensor:
    """Gumbel noise G [B, V] drawn given that argmax(logq + G) = ``winner`` [B] (top-down
    construction of Maddison, Tarlow & Minka, A* sampling, NeurIPS 2014): the maximum
    M ~ Gumbel(logsumexp(logq)) is the winner's score, every other score is a Gumbel(logq_j)
    truncated below M. Tokens with q = 0 get unconstrained standard Gumbel noise."""
    Bsz, V = logq.shape

    def gumbel(shape):
        u = torch.rand(shape, generator=generator, dtype=torch.float64, device=logq.device)
        return -torch.log(-torch.log(u.clamp(min=1e-300)))

    lse = torch.logsumexp(logq, dim=-1, keepdim=True)
    M = lse + gumbel((Bsz, 1))
    free = gumbel((Bsz, V))
    finite = torch.isfinite(logq)
    safe_logq = torch.where(finite, logq, torch.zeros_like(logq))
    score = safe_logq + free
    trunc = -torch.logaddexp(-M, -score)  # Gumbel(logq_j) truncated below M
    G = torch.where(finite, trunc - safe_logq, free)
    win = torch.zeros(Bsz, V, dtype=torch.bool, device=logq.device)
    win[torch.arange(Bsz), winner] = True
    return torch.where(win, M - safe_logq, G)


def _gumbel_recovery(drafts, q, p, generator, shared: bool):
    Bsz, L = drafts.shape
    a, res = _token_rows(drafts, q, p)
    u = torch.rand(Bsz, L, generator=generator, dtype=torch.float64, device=p.device)
    tau = torch.cumprod((u <= a).long(), dim=1).sum(1)
    rows_b = torch.arange(Bsz, device=p.device)
    pos = tau.clamp(max=L - 1)
    if shared:  # the noise that made the draft win, drawn from its posterior
        logq = torch.log(q[rows_b, pos].to(torch.float64))
        G = posterior_gumbel(logq, drafts[rows_b, pos], generator)
    else:
        g = torch.rand(Bsz, q.shape[-1], generator=generator, dtype=torch.float64,
                       device=p.device)
        G = -torch.log(-torch.log(g.clamp(min=1e-300)))
    res_tau = res[rows_b, pos].to(torch.float64)
    rec = torch.argmax(torch.where(res_tau > 0, torch.log(res_tau.clamp(min=1e-300)) + G,
                                   torch.full_like(G, -torch.inf)), dim=-1)
    rec = torch.where(res_tau.sum(-1) > 0, rec, torch.multinomial(
        p[rows_b, pos].to(torch.float64), 1, generator=generator)[:, 0])
    bonus = torch.multinomial(p[:, L].to(torch.float64), 1, generator=generator)[:, 0]
    return tau, torch.where(tau == L, bonus, rec)


def shared_noise_sampler(drafts, q, p, generator=None):
    """vLLM #47386 in the canonical signature: token verification whose correction at position i is
    argmax(log max(p - q, 0) + G_i), with G_i the Gumbel noise that drew the draft X_i = argmax(log
    q + G_i) (one noise stream for drafting and recovery). Given the drafts, G_i is drawn from its
    posterior ([`posterior_gumbel`][spectheory.testing.mutants.coins.posterior_gumbel]), which
    reproduces the joint law of the engine's draft and correction exactly. Acceptance uses its own
    uniforms."""
    return _gumbel_recovery(drafts, q, p, generator, shared=True)


def independent_noise_sampler(drafts, q, p, generator=None):
    """The control of
    [`shared_noise_sampler`][spectheory.testing.mutants.coins.shared_noise_sampler]: the same code
    with fresh Gumbel noise for the recovery (the fix of #54282). A correct token-verification
    sampler."""
    return _gumbel_recovery(drafts, q, p, generator, shared=False)


def zero_probability_rows(L: int = 2, V: int = 3):
    """Draft rows where the first draft has target probability 0 (q(X_1) > 0 = p(X_1)):
    ``(drafts [1, L], q [1, L, V], p [1, L+1, V])``, float64, prefix-dependent."""
    drafts = torch.zeros(1, L, dtype=torch.long)
    q = torch.full((1, L, V), 1.0 / V, dtype=torch.float64)
    p = torch.full((1, L + 1, V), 1.0 / V, dtype=torch.float64)
    p[0, 0] = torch.tensor([0.0] + [1.0 / (V - 1)] * (V - 1), dtype=torch.float64)
    if L > 1:
        p[0, 1] = torch.linspace(1.0, 2.0, V, dtype=torch.float64) / torch.linspace(
            1.0, 2.0, V, dtype=torch.float64).sum()
    return drafts, q, p


def shared_noise_rows():
    """Fixed draft rows on which the shared-noise bias is large: V = 4, L = 2, the draft token
    0 carries most of q, p puts little there, and the residual spreads over tokens whose draft
    mass differs (prefix-dependent second row). ``(drafts [1, 2], q [1, 2, 4], p [1, 3, 4])``."""
    drafts = torch.tensor([[0, 1]])
    q = torch.tensor([[[0.70, 0.25, 0.04, 0.01], [0.10, 0.60, 0.20, 0.10]]], dtype=torch.float64)
    p = torch.tensor([[[0.10, 0.30, 0.30, 0.30], [0.40, 0.20, 0.20, 0.20],
                       [0.25, 0.25, 0.25, 0.25]]], dtype=torch.float64)
    return drafts, q, p


def check_zero_coin(coin_sampler, L: int = 2, V: int = 3):
    """Pinned coins: drive a coin-driven sampler (``f(drafts, q, p, uniforms [B, L+1])``) with every
    position coin at the smallest value 2^-53 of spectheory's range (0, 1] on
    [`zero_probability_rows`][spectheory.testing.mutants.coins.zero_probability_rows], where the
    first draft has target probability 0. A correct sampler never accepts it (on spectheory's
    smallest coin the reference accepts iff the threshold is positive). The kit's ``mode="coins"``
    pins the same coin on its first rows. Returns ``None`` when it is rejected, else
    ``(accepted, token, uniforms)``."""
    drafts, q, p = zero_probability_rows(L, V)
    u = torch.full((1, L + 1), COIN_STEP, dtype=torch.float64)  # the engine's coin 0
    u[:, L] = 0.5
    tau, y = coin_sampler(drafts, q, p, u)
    if int(tau[0]) == 0:
        return None
    return int(tau[0]), int(y[0]), u[0].tolist()
