"""Engines' rejection-sampler layouts, adapted to the canonical sampler signature.

spectheory's sampler checks (:func:`spectheory.testing.check_sampler`) call a sampler as

    sampler(drafts [B, L] int64, q [B, L, V], p [B, L+1, V], generator) -> (accepted [B], token [B])

or, for coin-driven checks, ``sampler(drafts, q, p, uniforms [B, L+1])`` with position coins in
(0, 1] and the token's coin in [0, 1) (:func:`spectheory.testing.sampler.reference_coin_sampler`).
Serving engines lay their inputs out differently. This module holds

* an adapter for the real Hugging Face routine (:func:`hf_sampler`, calling
  ``transformers.generation.utils._speculative_sampling``; transformers is an optional import);
* pure-torch ports, written from the engines' published code, of

  - vLLM V1's standard rejection sampler (:func:`vllm_rejection_sample`: flattened drafts with
    ``cu_num_draft_tokens``, per-token float64 uniforms, recovered tokens by an exponential race,
    a bonus token per request, outputs padded with the placeholder id -1),
  - vLLM Model Runner V2's ``rejection_sample`` (:func:`vllm_mrv2_rejection_sample`: target rows
    for every draft position plus the bonus position, flattened with ``cu_num_logits``; draft rows
    per request and step; the standard rule or ``rejection_sample_method="block"``; float32
    log-space; coins in (0, 1]; correction by Gumbel-max),
  - SGLang's chain sampling (:func:`sglang_chain_sample`: caller-passed uniforms [B, L+1] and one
    more for the final token, accept on coin <= h, correction by inverse CDF);

* canonical wrappers around each (``*_sampler`` with a generator, ``*_coin_sampler`` with
  uniforms).

The ports are ordinary torch code run on the CPU: they reproduce the engines' conventions (layout,
coin ranges, comparisons, float32 arithmetic where the kernels use it), not their CUDA/Triton
kernels, which are not run here.
"""

from __future__ import annotations

import math

import torch

from ..sampling import inverse_cdf

__all__ = [
    "PLACEHOLDER_TOKEN_ID", "FLOAT64_COIN_STEP", "MRV2_COIN_MIN", "MRV2_COIN_MAX",
    "hf_sampler",
    "vllm_rejection_sample", "vllm_sample_recovered_tokens", "vllm_sampler", "vllm_coin_sampler",
    "vllm_mrv2_rejection_sample", "vllm_mrv2_sampler", "vllm_mrv2_coin_sampler",
    "sglang_chain_sample", "sglang_sampler", "sglang_coin_sampler",
    "flatten_drafts", "canonical_from_padded",
]

#: vLLM's id for unused output slots (``PLACEHOLDER_TOKEN_ID``,
#: vllm/v1/sample/rejection_sampler.py).
PLACEHOLDER_TOKEN_ID = -1


def _check_canonical(drafts, q, p):
    if drafts.dim() != 2 or q.dim() != 3 or p.dim() != 3:
        raise ValueError(f"canonical inputs are drafts [B, L], q [B, L, V], p [B, L+1, V]; got "
                         f"{tuple(drafts.shape)}, {tuple(q.shape)}, {tuple(p.shape)}")
    Bsz, L = drafts.shape
    if q.shape[:2] != (Bsz, L) or p.shape[:2] != (Bsz, L + 1) or q.shape[2] != p.shape[2]:
        raise ValueError(f"shapes do not match: drafts {tuple(drafts.shape)}, q {tuple(q.shape)},"
                         f" p {tuple(p.shape)}")
    return Bsz, L, q.shape[2]


def _log(x: torch.Tensor) -> torch.Tensor:
    """log of probabilities, -inf at 0 (logits an engine would hold)."""
    return torch.log(x)


def canonical_from_padded(output_token_ids: torch.Tensor):
    """(accepted [B], token [B]) from padded outputs [B, L+1] (placeholder -1 after the last
    emitted token): tau = emitted - 1 and Y = the last emitted token."""
    emitted = (output_token_ids != PLACEHOLDER_TOKEN_ID).sum(dim=1)
    tau = emitted - 1
    token = output_token_ids.gather(1, tau.clamp(min=0).unsqueeze(1)).squeeze(1)
    return tau, token


def flatten_drafts(drafts: torch.Tensor):
    """vLLM's flattened layout of a [B, L] draft block: ``draft_token_ids [B L]`` and
    ``cu_num_draft_tokens [B]`` (cumulative counts, the end index of each request)."""
    Bsz, L = drafts.shape
    cu = torch.arange(1, Bsz + 1, device=drafts.device) * L
    return drafts.reshape(-1), cu


# ============================================================================ Hugging Face


def hf_sampler(drafts, q, p, generator=None):
    """Hugging Face transformers' ``_speculative_sampling`` in the canonical signature.

    The real routine (``transformers.generation.utils._speculative_sampling(candidate_input_ids
    [1, n + L], candidate_logits [1, L, V], candidate_length, new_logits [1, L+1, V]) ->
    (valid_tokens [1, tau + 1], n_matches)``; token verification: accept while r_i <= p_i/q_i with
    r_i = ``torch.rand_like``, residual clamp(p - q, min=0) normalised, ``torch.multinomial``) works
    on one sequence and draws from torch's global generator. This adapter calls it once per row
    with log-probabilities as logits (its softmax returns the rows), and seeds the global
    generator once per call from ``generator`` inside ``torch.random.fork_rng`` so the caller's
    stream and the global state are both left alone. The per-row calls run with one intra-op
    thread (restored afterwards): on tensors this small, thread start-up dominates otherwise.
    """
    from transformers.generation.utils import _speculative_sampling  # optional dependency

    Bsz, L, V = _check_canonical(drafts, q, p)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    lq, lp = _log(q.to(torch.float64)), _log(p.to(torch.float64))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tau, token = _hf_rows(_speculative_sampling, drafts, lq, lp, L, seed)
    finally:
        torch.set_num_threads(threads)
    return tau.to(drafts.device), token.to(drafts.device)


def _hf_rows(routine, drafts, lq, lp, L, seed):
    Bsz = drafts.shape[0]
    tau = torch.empty(Bsz, dtype=torch.long)
    token = torch.empty(Bsz, dtype=torch.long)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # the rows then draw from one seeded global stream
        for b in range(Bsz):
            valid, n = routine(drafts[b:b + 1].cpu(), lq[b:b + 1].cpu(), L, lp[b:b + 1].cpu())
            tau[b] = int(n)
            token[b] = int(valid[0, -1])
    return tau, token


# ============================================================================ vLLM V1


def vllm_sample_recovered_tokens(draft_token_ids, cu_num_draft_tokens, draft_probs, target_probs,
                                 generator=None, noise=None):
    """vLLM V1 ``sample_recovered_tokens``: for every draft position a recovered token
    argmax(max(p - q, 0) / E) with E ~ Exp(1) per vocabulary entry (an exponential race, the
    same law as sampling the normalised residual); ``draft_probs=None`` (n-gram drafts, q a point
    mass) zeroes the draft token instead. ``noise`` [num_tokens, V] replaces the exponentials."""
    n, V = target_probs.shape
    if draft_probs is None:
        prob = target_probs.clone()
        prob[torch.arange(n), draft_token_ids] = 0
    else:
        prob = (target_probs - draft_probs).clamp(min=0)
    if noise is None:
        noise = torch.empty(n, V, dtype=torch.float64, device=target_probs.device).exponential_(
            generator=generator)
    return torch.argmax(prob.to(torch.float64) / noise, dim=-1)


def vllm_rejection_sample(draft_token_ids, cu_num_draft_tokens, max_spec_len: int, draft_probs,
                          target_probs, bonus_token_ids, uniform_probs, recovered_token_ids):
    """Port of vLLM V1's random-sampling rejection kernel (``rejection_random_sample_kernel`` in
    vllm/v1/sample/rejection_sampler.py), written from its published code.

    Layout: ``draft_token_ids [N]`` flattened over requests, ``cu_num_draft_tokens [B]``
    cumulative counts (request b owns [cu[b-1], cu[b])), ``draft_probs [N, V]`` or ``None``
    (n-gram drafts: draft probability 1), ``target_probs [N, V]`` at the draft positions,
    ``bonus_token_ids [B]`` (sampled from the bonus position by the ordinary sampler),
    ``uniform_probs [N]`` float64 in [0, 1), ``recovered_token_ids [N]``
    (:func:`vllm_sample_recovered_tokens`). Request b accepts its i-th draft while
    ``draft_prob > 0 and target_prob / draft_prob >= uniform_prob``; the first rejection writes the
    recovered token and stops; if nothing is rejected the bonus token follows. Returns
    ``output_token_ids [B, max_spec_len + 1]``, unused slots holding :data:`PLACEHOLDER_TOKEN_ID`.
    """
    Bsz = cu_num_draft_tokens.shape[0]
    out = torch.full((Bsz, max_spec_len + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.long,
                     device=draft_token_ids.device)
    rows = torch.arange(draft_token_ids.shape[0], device=draft_token_ids.device)
    if draft_probs is None:
        dprob = torch.ones(rows.shape[0], dtype=target_probs.dtype, device=target_probs.device)
    else:
        dprob = draft_probs[rows, draft_token_ids]
    tprob = target_probs[rows, draft_token_ids]
    safe = torch.where(dprob > 0, dprob, torch.ones_like(dprob))
    accepted = (dprob > 0) & (tprob / safe >= uniform_probs.to(tprob.dtype))
    start = 0
    for b in range(Bsz):  # the kernel runs one program per request
        end = int(cu_num_draft_tokens[b])
        rejected = False
        for pos in range(end - start):
            t = start + pos
            if accepted[t]:
                out[b, pos] = draft_token_ids[t]
            else:
                out[b, pos] = recovered_token_ids[t]
                rejected = True
                break
        if not rejected:
            out[b, end - start] = bonus_token_ids[b]
        start = end
    return out


def _vllm_canonical(drafts, q, p, uniforms_pos, recovered, bonus):
    Bsz, L, V = _check_canonical(drafts, q, p)
    ids, cu = flatten_drafts(drafts)
    out = vllm_rejection_sample(ids, cu, L, q.reshape(Bsz * L, V), p[:, :L].reshape(Bsz * L, V),
                                bonus, uniforms_pos.reshape(-1), recovered)
    return canonical_from_padded(out)


def vllm_sampler(drafts, q, p, generator=None):
    """vLLM V1's standard rejection sampler in the canonical signature: float64 uniforms in
    [0, 1), recovered tokens by the exponential race, the bonus token by multinomial from
    p(.|X^L), all from ``generator``."""
    Bsz, L, V = _check_canonical(drafts, q, p)
    u = torch.rand(Bsz, L, generator=generator, dtype=torch.float64, device=p.device)
    ids, cu = flatten_drafts(drafts)
    rec = vllm_sample_recovered_tokens(ids, cu, q.reshape(Bsz * L, V),
                                       p[:, :L].reshape(Bsz * L, V), generator)
    bonus = torch.multinomial(p[:, L].to(torch.float64), 1, generator=generator)[:, 0]
    return _vllm_canonical(drafts, q, p, u, rec, bonus)


#: Grid step of float64 uniforms (``torch.rand`` draws k 2^-53, k in [0, 2^53)).
FLOAT64_COIN_STEP = 2.0**-53
#: Smallest coin of vLLM MRV2's ``tl_rand32(..., includes_zero=False)`` (``tl.rand`` in [0, 1)
#: clamped below at 2^-31) and its largest (the largest float32 below 1).
MRV2_COIN_MIN, MRV2_COIN_MAX = 2.0**-31, 1.0 - 2.0**-24


def vllm_coin_sampler(drafts, q, p, uniforms):
    """vLLM V1's rejection kernel driven by spectheory's coins.

    The kernel's ``uniform_probs`` are float64 ``torch.rand`` draws in [0, 1); spectheory's
    position coins u lie in (0, 1] on the same grid, so u maps to the engine's coin u - 2^-53
    (the kit's smallest coin is the engine's coin 0). Acceptance is the kernel's
    ``draft_prob > 0 and target_prob / draft_prob >= uniform_prob``. The recovered and bonus
    tokens are drawn by inverse CDF at ``uniforms[:, L]`` (vLLM draws them from separate noise;
    only the acceptance coins are the kernel's own). Note that with an engine coin of exactly 0
    the comparison accepts a draft whose target probability is 0 (the class of SGLang #35771;
    probability 2^-53 per draw).
    """
    Bsz, L, V = _check_canonical(drafts, q, p)
    res = (p[:, :L] - q).clamp(min=0).to(torch.float64)
    res = torch.where(res.sum(-1, keepdim=True) > 0, res, p[:, :L].to(torch.float64))
    u_tok = uniforms[:, L].to(torch.float64)
    rec = inverse_cdf(res.reshape(Bsz * L, V), u_tok.repeat_interleave(L))
    bonus = inverse_cdf(p[:, L].to(torch.float64), u_tok)
    coins = (uniforms[:, :L].to(torch.float64) - FLOAT64_COIN_STEP).clamp(min=0.0)
    return _vllm_canonical(drafts, q, p, coins, rec, bonus)


# ============================================================================ vLLM Model Runner V2


def _mrv2_logprobs(logits):
    return logits - torch.logsumexp(logits, dim=-1, keepdim=True)


def vllm_mrv2_rejection_sample(target_logits, draft_logits, draft_sampled, cu_num_logits,
                               uniforms, num_speculative_steps: int, *, method: str = "standard",
                               generator=None, token_uniforms=None, dtype=torch.float32,
                               bug: str | None = None):
    """Port of vLLM Model Runner V2's ``rejection_sample`` (vllm/v1/worker/gpu/spec_decode/
    rejection_sampler_utils.py), written from its published code.

    Layout: ``target_logits [num_logits, V]``, request b owning rows [cu[b], cu[b+1]) of
    ``cu_num_logits [B+1]``: one per draft step plus the bonus position; ``draft_logits
    [B, num_speculative_steps, V]``; ``draft_sampled [num_logits]`` the input ids, so the i-th
    draft of request b is ``draft_sampled[cu[b] + i + 1]``; ``uniforms [num_logits]`` the coin
    of each position, in (0, 1] (the kernel's ``tl_rand32(seed, pos, includes_zero=False)``).

    * ``method="standard"``: accept while ``log p(X_i) > log u_i + log q(X_i)``, stop at the
      first failure;
    * ``method="block"`` (``rejection_sample_method="block"``; Sun et al., arXiv 2403.10444):
      log w_i = min(log w_{i-1} + log p(X_i) - log q(X_i), 0) in float32; for i < n the residual
      mass S_i = sum_x max(w_i p(x|X^i) - q(x|X^i), 0) from the next position's rows,
      h_i = S_i / (S_i + 1 - w_i) where that denominator is > 0, else 1; h_n = w_n; tau = the
      last i with u_i <= h_i.

    Correction at tau < n: Gumbel-max over the residual logits log(w_tau p) + log1p(-q / (w_tau
    p)) (w = 1 for ``standard``; -inf where q >= w p), at tau = n over the bonus row's logits;
    noise from ``generator`` (or inverse CDF at ``token_uniforms`` [B], for coin comparisons).
    Arithmetic in ``dtype`` (float32 as in the kernels). ``bug="wrong-row"`` reads S_i from the
    rows at position i - 1 (the pure-torch reference of vLLM PR 40819), for negative controls.

    Returns ``(sampled [B, num_speculative_steps + 1], num_sampled [B])``: the accepted drafts and
    the correction/bonus token, unused slots holding :data:`PLACEHOLDER_TOKEN_ID`.
    """
    if method not in ("standard", "block"):
        raise ValueError(f"unknown method {method!r}; choose standard or block")
    S = int(num_speculative_steps)
    Bsz = cu_num_logits.shape[0] - 1
    V = target_logits.shape[-1]
    dev = target_logits.device
    # the kernel runs one program per request; the port runs all requests at once, padded to S
    start = cu_num_logits[:-1].long()
    n = cu_num_logits[1:].long() - start - 1  # drafts per request
    steps = torch.arange(S + 1, device=dev)
    valid = steps.unsqueeze(0) < n.unsqueeze(1)  # [B, S+1]: draft positions
    rows_t = torch.minimum(start.unsqueeze(1) + steps, (start + n).unsqueeze(1))  # [B, S+1]
    t_lp = _mrv2_logprobs(target_logits.to(dtype))[rows_t]  # [B, S+1, V]
    d_lp = _mrv2_logprobs(draft_logits[:, :S].to(dtype))  # [B, S, V]
    x_idx = torch.minimum(start.unsqueeze(1) + steps[:S] + 1, (start + n).unsqueeze(1))
    x = torch.where(valid[:, :S], draft_sampled[x_idx].long(), torch.zeros_like(x_idx))
    u = uniforms[torch.minimum(start.unsqueeze(1) + steps[:S], (start + n).unsqueeze(1))].to(dtype)
    lpx = t_lp[:, :S].gather(-1, x.unsqueeze(-1))[..., 0]
    lqx = d_lp.gather(-1, x.unsqueeze(-1))[..., 0]
    cum = []  # log w_{i+1} after draft i (float32 running minimum with 0, as in the kernel)
    log_w = torch.zeros(Bsz, dtype=dtype, device=dev)
    for i in range(S):
        log_w = torch.where(valid[:, i], torch.clamp(log_w + (lpx[:, i] - lqx[:, i]), max=0.0),
                            log_w)
        cum.append(log_w)
    cum = torch.stack(cum, dim=1) if S else torch.zeros(Bsz, 0, dtype=dtype, device=dev)
    pos1 = steps[1:S + 1].unsqueeze(0)  # 1..S
    if method == "block":
        w = torch.exp(cum)  # [B, S]
        if S > 1:  # residual mass from the next position's rows (the previous one's if buggy)
            sel = slice(0, S - 1) if bug == "wrong-row" else slice(1, S)
            mass = torch.clamp(w[:, :S - 1].unsqueeze(-1) * torch.exp(t_lp[:, sel])
                               - torch.exp(d_lp[:, sel]), min=0).sum(-1)
            denom = mass + 1.0 - w[:, :S - 1]
            h_mid = torch.where(denom > 0, mass / torch.where(denom > 0, denom,
                                                                 torch.ones_like(denom)),
                                torch.ones_like(mass))
            h = torch.cat([h_mid, w[:, S - 1:]], dim=1)
        else:
            h = w
        last = steps[:S].unsqueeze(0) == (n - 1).unsqueeze(1)  # the last draft: h_n = w_n
        h = torch.where(last, w, h)
        ok = (u <= h) & valid[:, :S]
        tau = torch.where(ok, pos1, torch.zeros_like(pos1)).max(1).values
    else:
        ok = (lpx > torch.log(u) + lqx) & valid[:, :S]
        tau = torch.cumprod(ok.long(), dim=1).sum(1)
    b = torch.arange(Bsz, device=dev)
    at = tau.clamp(max=max(S - 1, 0))
    tlp = t_lp[b, tau]
    if method == "block":
        prev = cum[b, (tau - 1).clamp(min=0)] if S else torch.zeros(Bsz, dtype=dtype)
        tlp = tlp + torch.where(tau > 0, prev, torch.zeros_like(prev)).unsqueeze(-1)
    ratio = torch.exp(d_lp[b, at] - tlp) if S else torch.ones_like(tlp)
    residual = torch.where(ratio < 1.0, tlp + torch.log1p(-ratio), torch.full_like(tlp, -math.inf))
    logits = torch.where((tau == n).unsqueeze(-1), t_lp[b, tau], residual).to(torch.float64)
    if token_uniforms is not None:
        probs = torch.exp(logits - torch.logsumexp(logits, dim=-1, keepdim=True))
        y = inverse_cdf(probs, token_uniforms.to(torch.float64))
    else:
        g = torch.rand(Bsz, V, generator=generator, dtype=torch.float64, device=dev)
        y = torch.argmax(logits - torch.log(-torch.log(g.clamp(min=1e-300))), dim=-1)
    sampled = torch.where(steps.unsqueeze(0) < tau.unsqueeze(1),
                          torch.cat([x, torch.zeros(Bsz, 1, dtype=torch.long, device=dev)], 1),
                          torch.full((Bsz, S + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.long,
                                     device=dev))
    sampled[b, tau] = y
    return sampled, tau + 1


def _mrv2_layout(drafts, q, p):
    """Canonical rows -> MRV2 layout (every request with L drafts)."""
    Bsz, L, V = _check_canonical(drafts, q, p)
    target_logits = _log(p).reshape(Bsz * (L + 1), V)
    draft_sampled = torch.cat([torch.zeros(Bsz, 1, dtype=torch.long, device=drafts.device),
                               drafts.long()], dim=1).reshape(-1)
    cu = torch.arange(Bsz + 1, device=drafts.device) * (L + 1)
    return target_logits, _log(q), draft_sampled, cu, L


def vllm_mrv2_sampler(method: str = "block", dtype=torch.float32, bug: str | None = None):
    """A canonical sampler ``f(drafts, q, p, generator)`` running :func:`vllm_mrv2_rejection_sample`
    (float32 coins in [2^-31, 1) as the kernel's, Gumbel noise from ``generator``)."""

    def sampler(drafts, q, p, generator=None):
        tl_, dl, ds, cu, L = _mrv2_layout(drafts, q, p)
        u = torch.rand(tl_.shape[0], generator=generator, dtype=torch.float64).to(
            torch.float32).clamp(min=MRV2_COIN_MIN)  # tl_rand32(..., includes_zero=False)
        sampled, num = vllm_mrv2_rejection_sample(tl_, dl, ds, cu, u, L, method=method,
                                                  generator=generator, dtype=dtype, bug=bug)
        tau = num - 1
        return tau, sampled.gather(1, tau.unsqueeze(1)).squeeze(1)

    sampler.__name__ = f"vllm_mrv2_{method}_sampler" + (f"_{bug}" if bug else "")
    return sampler


def vllm_mrv2_coin_sampler(method: str = "block", dtype=torch.float64, bug: str | None = None):
    """A coin-driven sampler ``f(drafts, q, p, uniforms [B, L+1])`` running
    :func:`vllm_mrv2_rejection_sample` with position coins ``uniforms[:, :L]`` and the correction
    drawn by inverse CDF at ``uniforms[:, L]`` in place of the Gumbel-max (the coins then mean
    what spectheory's reference coins mean). The kernel's coins lie in [2^-31, 1 - 2^-24]
    (``tl_rand32`` with ``includes_zero=False``); spectheory's u in (0, 1] are clamped into that
    range. float64 by default, so that decisions at the thresholds are not moved by float32
    rounding."""

    def sampler(drafts, q, p, uniforms):
        tl_, dl, ds, cu, L = _mrv2_layout(drafts, q, p)
        Bsz = drafts.shape[0]
        coins = uniforms[:, :L].to(torch.float64).clamp(MRV2_COIN_MIN, MRV2_COIN_MAX)
        u = torch.cat([coins, torch.ones(Bsz, 1, dtype=torch.float64)], dim=1)
        sampled, num = vllm_mrv2_rejection_sample(tl_, dl, ds, cu, u.reshape(-1), L,
                                                  method=method, token_uniforms=uniforms[:, L],
                                                  dtype=dtype, bug=bug)
        tau = num - 1
        return tau, sampled.gather(1, tau.unsqueeze(1)).squeeze(1)

    sampler.__name__ = f"vllm_mrv2_{method}_coin_sampler" + (f"_{bug}" if bug else "")
    return sampler


# ============================================================================ SGLang


def sglang_chain_sample(draft_probs, draft_token_ids, uniform_samples, target_probs,
                        final_uniform, method: str = "token"):
    """Port of SGLang's chain speculative sampling (the FlashInfer-style
    ``chain_speculative_sampling`` layout, with the block rule of SGLang PR 36516), written from
    the published code.

    Layout: ``draft_probs [B, L, V]``, ``draft_token_ids [B, L]``, ``uniform_samples [B, L+1]``
    (coin i for draft i; the last column is not used by the chain), ``target_probs [B, L+1, V]``,
    ``final_uniform [B]`` the coin of the final (correction or bonus) token. ``method="token"``:
    accept draft i while coin_i <= min(1, p/q); ``"block"``: h_i of block verification (Sun et
    al., arXiv 2403.10444), tau = the last i with coin_i <= h_i. The final token is the first
    index whose cumulative sum exceeds final_uniform times the total of the correction row
    (normalised max(w_tau p - q, 0), w = 1 for token; p(.|X^L) after L acceptances).

    Returns ``(output_token_ids [B, L+1] padded with -1, accept_num [B])``.
    """
    Bsz, L, V = draft_probs.shape
    x = draft_token_ids.long().unsqueeze(-1)
    px = target_probs[:, :L].gather(-1, x)[..., 0]
    qx = draft_probs.gather(-1, x)[..., 0]
    ratio = torch.where(qx > 0, px / torch.where(qx > 0, qx, torch.ones_like(qx)),
                        torch.ones_like(px))
    coins = uniform_samples[:, :L].to(px.dtype)
    if method == "token":
        w = torch.ones(Bsz, L + 1, dtype=px.dtype)
        tau = torch.cumprod((coins <= ratio.clamp(max=1.0)).long(), dim=1).sum(1)
    elif method == "block":
        ws = [torch.ones(Bsz, dtype=px.dtype)]
        for i in range(L):
            ws.append(torch.clamp(ws[-1] * ratio[:, i], max=1.0))
        w = torch.stack(ws, dim=1)  # [B, L+1]
        S = (w[:, :L].unsqueeze(-1) * target_probs[:, :L] - draft_probs).clamp(min=0).sum(-1)
        den = S + (1 - w[:, :L])
        h = torch.where(den > 0, S / torch.where(den > 0, den, torch.ones_like(den)),
                        torch.ones_like(S))
        h = torch.cat([h[:, 1:], w[:, L:]], dim=1)  # h_1..h_L
        pos = torch.arange(1, L + 1)
        tau = torch.where(coins <= h, pos, torch.zeros_like(pos)).max(1).values
    else:
        raise ValueError(f"unknown method {method!r}; choose token or block")
    b = torch.arange(Bsz)
    wt = w[b, tau].unsqueeze(-1)
    res_rows = torch.cat([(w[:, :L].unsqueeze(-1) * target_probs[:, :L] - draft_probs)
                          .clamp(min=0), target_probs[:, L:]], dim=1)
    row = res_rows[b, tau]
    row = torch.where(row.sum(-1, keepdim=True) > 0, row, target_probs[b, tau])
    del wt
    y = inverse_cdf(row.to(torch.float64), final_uniform.to(torch.float64))
    out = torch.full((Bsz, L + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.long)
    keep = torch.arange(L + 1).unsqueeze(0) < tau.unsqueeze(1)
    out[:, :L] = torch.where(keep[:, :L], draft_token_ids.long(), out[:, :L])
    out[b, tau] = y
    return out, tau


def sglang_coin_sampler(method: str = "token"):
    """Coin-driven canonical sampler around :func:`sglang_chain_sample`: ``uniforms[:, :L]`` are
    the chain's coins and ``uniforms[:, L]`` its final uniform (spectheory's convention is
    SGLang's, so identical coins give identical decisions)."""

    def sampler(drafts, q, p, uniforms):
        Bsz, L, V = _check_canonical(drafts, q, p)
        coins = torch.cat([uniforms[:, :L], torch.ones(Bsz, 1, dtype=uniforms.dtype)], dim=1)
        out, tau = sglang_chain_sample(q, drafts, coins, p, uniforms[:, L], method)
        return tau, out.gather(1, tau.unsqueeze(1)).squeeze(1)

    sampler.__name__ = f"sglang_{method}_coin_sampler"
    return sampler


def sglang_sampler(method: str = "token"):
    """Canonical sampler around :func:`sglang_chain_sample` with coins 1 - torch.rand in (0, 1]
    and the final uniform torch.rand in [0, 1), from ``generator``."""
    coin = sglang_coin_sampler(method)

    def sampler(drafts, q, p, generator=None):
        Bsz, L = drafts.shape
        u = torch.rand(Bsz, L + 1, generator=generator, dtype=torch.float64)
        u[:, :L] = 1.0 - u[:, :L]
        return coin(drafts, q, p, u)

    sampler.__name__ = f"sglang_{method}_sampler"
    return sampler
