"""Engines' rejection-sampler layouts, adapted to the canonical sampler signature.

spectheory's sampler checks ([`check_sampler`][spectheory.testing.checks.sampler.check_sampler])
call a sampler as

    sampler(drafts [B, L] int64, q [B, L, V], p [B, L+1, V], generator) -> (accepted [B], token [B])

or, for coin-driven checks, ``sampler(drafts, q, p, uniforms [B, L+1])`` with position coins in (0,
1] and the token's coin in [0, 1)
([`reference_coin_sampler`][spectheory.testing.checks.sampler.reference_coin_sampler]). Serving
engines lay their inputs out differently. This module holds

* an adapter for the real Hugging Face routine
  ([`hf_sampler`][spectheory.testing.engines.adapters.hf_sampler], calling
  ``transformers.generation.utils._speculative_sampling``; transformers is an optional import);
* pure-torch ports, written from the engines' published code, of

  - vLLM V1's standard rejection sampler
    ([`vllm_rejection_sample`][spectheory.testing.engines.adapters.vllm_rejection_sample]: flattened
    drafts with ``cu_num_draft_tokens``, per-token float64 uniforms, recovered tokens by an
    exponential race, a bonus token per request, outputs padded with the placeholder id -1),
  - vLLM Model Runner V2's ``rejection_sample``
    ([`vllm_mrv2_rejection_sample`][spectheory.testing.engines.adapters.vllm_mrv2_rejection_sample]:
    target rows for every draft position plus the bonus position, flattened with ``cu_num_logits``;
    draft rows per request and step; the standard rule or ``rejection_sample_method="block"``;
    float32 log-space; coins in (0, 1]; correction by Gumbel-max),
  - SGLang's chain sampling
    ([`sglang_chain_sample`][spectheory.testing.engines.adapters.sglang_chain_sample]: caller-passed
    uniforms [B, L+1] and one more for the final token, accept on coin <= h, correction by inverse
    CDF);

* canonical wrappers around each (``*_sampler`` with a generator, ``*_coin_sampler`` with
  uniforms);
* ports that take exactly the arguments of the engines' entry points
  (`vllm_v1_rejection_sample`, `vllm_mrv2_engine_rejection_sample`,
  `sglang_chain_speculative_sampling`, `hf_speculative_sampling`, below), which pass
  through the presets of `spectheory.testing.engines.layouts` with no hand-written adapter, each
  with planted bugs (``bug=``, `PORT_BUGS`) for negative controls.

The ports are ordinary torch code run on the CPU: they reproduce the engines' conventions (layout,
coin ranges, comparisons, float32 arithmetic where the kernels use it), not their CUDA/Triton
kernels, which are not run here.
"""

from __future__ import annotations

import functools
import math

import torch

from ...runtime.errors import seed_forked
from ...sampling import inverse_cdf
from ...runtime.limits import shown as _repr_cut

__all__ = [
    "PLACEHOLDER_TOKEN_ID", "FLOAT64_COIN_STEP", "MRV2_COIN_MIN", "MRV2_COIN_MAX",
    "hf_sampler",
    "vllm_rejection_sample", "vllm_sample_recovered_tokens", "vllm_sampler", "vllm_coin_sampler",
    "vllm_mrv2_rejection_sample", "vllm_mrv2_sampler", "vllm_mrv2_coin_sampler",
    "sglang_chain_sample", "sglang_sampler", "sglang_coin_sampler",
    "flatten_drafts", "canonical_from_padded",
    "PORT_BUGS", "VLLM_GREEDY_TEMPERATURE", "vllm_v1_rejection_sample",
    "vllm_mrv2_engine_rejection_sample", "counter_uniforms", "sglang_chain_speculative_sampling",
    "hf_speculative_sampling", "hf_greedy_match", "GREEDY_TEMPERATURE",
    "apply_sampling_constraints", "apply_top_k_top_p", "expand_batch_to_tokens",
    "generate_uniform_probs",
]

#: Planted bugs of the engine-layout ports (``bug=``): acceptance of X_i from p(.|X^i) instead
#: of p(.|X^{i-1}); the correction drawn from the target row instead of the residual; the
#: residual built from the rows one position later; the acceptance comparison flipped (a strict
#: comparison made non-strict where that matters, else reversed).
PORT_BUGS = ("target-row", "correction-from-p", "residual-row", "coin-compare")
#: The planted bugs of vLLM MRV2's port: `PORT_BUGS` and "wrong-row" (S_i read at i - 1).
MRV2_BUGS = (*PORT_BUGS, "wrong-row")

#: vLLM's id for unused output slots (``PLACEHOLDER_TOKEN_ID``,
#: vllm/v1/sample/rejection_sampler.py).
PLACEHOLDER_TOKEN_ID = -1


def _check_canonical(drafts, q, p, generator=None):
    """The adapters' canonical inputs: torch tensors drafts [B, L], q [B, L, V], p [B, L+1, V]
    and a ``torch.Generator`` or None, else an
    [`InputError`][spectheory.runtime.errors.InputError] (a ``ValueError``) in one line."""
    from ...runtime.errors import InputError, check_generator

    if not all(isinstance(x, torch.Tensor) for x in (drafts, q, p)):
        raise InputError(f"canonical inputs are torch tensors drafts [B, L], q [B, L, V], "
                         f"p [B, L+1, V]; got {type(drafts).__name__}, {type(q).__name__}, "
                         f"{type(p).__name__}")
    check_generator(generator)
    if drafts.dim() != 2 or q.dim() != 3 or p.dim() != 3:
        raise InputError(f"canonical inputs are drafts [B, L], q [B, L, V], p [B, L+1, V]; got "
                         f"{tuple(drafts.shape)}, {tuple(q.shape)}, {tuple(p.shape)}")
    Bsz, L = drafts.shape
    if q.shape[:2] != (Bsz, L) or p.shape[:2] != (Bsz, L + 1) or q.shape[2] != p.shape[2]:
        raise InputError(f"shapes do not match: drafts {tuple(drafts.shape)}, q {tuple(q.shape)},"
                         f" p {tuple(p.shape)}")
    return Bsz, L, q.shape[2]


def _check_factory(name: str, method, methods: tuple, dtype=None, bug=None,
                   bugs: tuple = ()) -> None:
    """The arguments of a sampler factory, checked when the sampler is built (an unknown method,
    bug or dtype was a ValueError at the first call, which the kit then blamed on the sampler as
    user code): [`OptionError`][spectheory.runtime.errors.OptionError] naming it."""
    from ...runtime.errors import OptionError

    if method not in methods:
        raise OptionError(f"{name}: unknown method {_repr_cut(method, 40)}; choose {' or '.join(methods)}")
    if dtype is not None and dtype not in (torch.float32, torch.float64):
        raise OptionError(f"{name}: dtype = {_repr_cut(dtype, 40)} must be torch.float32 or "
                          "torch.float64")
    if bug is not None and bug not in bugs:
        raise OptionError(f"{name}: unknown bug {_repr_cut(bug, 40)}; choose from {', '.join(bugs)}")


def _check_coins(uniforms, Bsz: int, L: int, where: str) -> None:
    """A coin sampler's ``uniforms``: a float tensor [B, L+1] of numbers in [0, 1], else an
    [`InputError`][spectheory.runtime.errors.InputError] naming ``where`` (a [2, 1] tensor was an
    IndexError from inside; NaN or 5.0 coins gave decisions)."""
    from ...runtime.errors import InputError

    if not isinstance(uniforms, torch.Tensor) or tuple(uniforms.shape) != (Bsz, L + 1) \
            or not uniforms.dtype.is_floating_point:
        got = (f"{uniforms.dtype} {list(uniforms.shape)}" if isinstance(uniforms, torch.Tensor)
               else type(uniforms).__name__)
        raise InputError(f"{where} takes uniforms [B, L+1] = [{Bsz}, {L + 1}] of floats, got "
                         f"{got}")
    check_coin_range(uniforms, where)


def check_coin_range(uniforms, where: str) -> None:
    """Coins ``uniforms`` (a tensor) in [0, 1], else an
    [`OptionError`][spectheory.runtime.errors.OptionError] (an ``InputError``) naming ``where``
    and the first coin outside: the one range check of the kit's coin samplers and of
    `engine_coin_sampler`."""
    from ...runtime.errors import OptionError

    inside = (uniforms >= 0) & (uniforms <= 1)  # a NaN fails both
    if not bool(inside.all()):
        raise OptionError(f"{where}: uniforms must lie in [0, 1], got "
                          f"{float(uniforms[~inside][0])!r}")


def _log(x: torch.Tensor) -> torch.Tensor:
    """log of probabilities, -inf at 0 (logits an engine would hold)."""
    return torch.log(x)


def canonical_from_padded(output_token_ids: torch.Tensor):
    """(accepted [B], token [B]) from padded outputs [B, L+1] (placeholder -1 after the last
    emitted token): tau = emitted - 1 and Y = the last emitted token. Refused in one line: not
    an integer tensor [B, L+1], a row with no emitted token, or a placeholder before an emitted
    one (a hole: the emitted tokens are a prefix of each row)."""
    from ...runtime.errors import InputError

    x = output_token_ids
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] < 1 or \
            x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise InputError(f"canonical_from_padded: output_token_ids must be an integer tensor "
                         f"[B, L+1], not {type(x).__name__}{list(getattr(x, 'shape', []))}"
                         f"{' of ' + str(x.dtype) if isinstance(x, torch.Tensor) else ''}")
    kept = x != PLACEHOLDER_TOKEN_ID
    if x.shape[0] and bool((~kept.any(1)).any()):
        raise InputError(f"canonical_from_padded: row {int((~kept.any(1)).nonzero()[0])} emitted "
                         f"no token (placeholders only)")
    holes = kept[:, 1:] & ~kept[:, :-1]
    if bool(holes.any()):
        raise InputError(f"canonical_from_padded: row {int(holes.any(1).nonzero()[0])} has a "
                         f"placeholder before an emitted token: {x[int(holes.any(1).nonzero()[0])].tolist()}")
    emitted = kept.sum(dim=1)
    tau = emitted - 1
    token = output_token_ids.gather(1, tau.clamp(min=0).unsqueeze(1)).squeeze(1)
    return tau, token


def flatten_drafts(drafts: torch.Tensor):
    """vLLM's flattened layout of a [B, L] draft block: ``draft_token_ids [B L]`` and
    ``cu_num_draft_tokens [B]`` (cumulative counts, the end index of each request)."""
    if not isinstance(drafts, torch.Tensor) or drafts.dim() != 2 or \
            drafts.dtype.is_floating_point or drafts.dtype.is_complex or drafts.dtype == torch.bool:
        from ...runtime.errors import InputError

        raise InputError(f"flatten_drafts: drafts must be an integer torch tensor [B, L], not "
                         f"{type(drafts).__name__}{list(getattr(drafts, 'shape', []))}"
                         f"{' of ' + str(drafts.dtype) if isinstance(drafts, torch.Tensor) else ''}")
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

    Bsz, L, V = _check_canonical(drafts, q, p, generator)
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
        seed_forked(seed)  # the rows then draw from one seeded global stream
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

    Layout: ``draft_token_ids [N]`` flattened over requests, ``cu_num_draft_tokens [B]`` cumulative
    counts (request b owns [cu[b-1], cu[b])), ``draft_probs [N, V]`` or ``None`` (n-gram drafts:
    draft probability 1), ``target_probs [N, V]`` at the draft positions, ``bonus_token_ids [B]``
    (sampled from the bonus position by the ordinary sampler), ``uniform_probs [N]`` float64 in [0,
    1), ``recovered_token_ids [N]``
    ([`vllm_sample_recovered_tokens`][spectheory.testing.engines.adapters.vllm_sample_recovered_tokens]).
    Request b accepts its i-th draft while
    ``draft_prob > 0 and target_prob / draft_prob >= uniform_prob``; the first rejection writes the
    recovered token and stops; if nothing is rejected the bonus token follows. Returns
    ``output_token_ids [B, max_spec_len + 1]``, unused slots holding `PLACEHOLDER_TOKEN_ID`.
    """
    Bsz = cu_num_draft_tokens.shape[0]
    rows = torch.arange(draft_token_ids.shape[0], device=draft_token_ids.device)
    if draft_probs is None:
        dprob = torch.ones(rows.shape[0], dtype=target_probs.dtype, device=target_probs.device)
    else:
        dprob = draft_probs[rows, draft_token_ids]
    tprob = target_probs[rows, draft_token_ids]
    safe = torch.where(dprob > 0, dprob, torch.ones_like(dprob))
    accepted = (dprob > 0) & (tprob / safe >= uniform_probs.to(tprob.dtype))
    # the requests' loop reads Python lists (one conversion each, not one tensor element a step)
    accepted, cu = accepted.tolist(), cu_num_draft_tokens.tolist()
    ids, recovered = draft_token_ids.tolist(), recovered_token_ids.tolist()
    bonus = bonus_token_ids.tolist()
    out = [[PLACEHOLDER_TOKEN_ID] * (max_spec_len + 1) for _ in range(Bsz)]
    start = 0
    for b in range(Bsz):  # the kernel runs one program per request
        end = int(cu[b])
        rejected = False
        for pos in range(end - start):
            t = start + pos
            if accepted[t]:
                out[b][pos] = ids[t]
            else:
                out[b][pos] = recovered[t]
                rejected = True
                break
        if not rejected:
            out[b][end - start] = bonus[b]
        start = end
    return torch.tensor(out, dtype=torch.long, device=draft_token_ids.device).reshape(
        Bsz, max_spec_len + 1)


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
    Bsz, L, V = _check_canonical(drafts, q, p, generator)
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
    _check_coins(uniforms, Bsz, L, "vllm_coin_sampler")
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
                               bug: str | None = None, noise=None):
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
    Arithmetic in ``dtype`` (float32 as in the kernels). ``noise(rows) -> uniforms [B, V]`` in
    (0, 1), given the flat target row of each request's correction, replaces ``generator`` for
    the Gumbel noise (counter-based noise, as the kernel's). Planted bugs, for negative controls
    (``bug``): ``"wrong-row"`` reads S_i from the rows at position i - 1 (the pure-torch
    reference of vLLM PR 40819); ``"target-row"`` accepts X_i with p(.|X^i) instead of
    p(.|X^{i-1}); ``"correction-from-p"`` draws the correction from the target row instead of
    the residual; ``"residual-row"`` builds the residual from the rows one position later;
    ``"coin-compare"`` flips the acceptance comparison.

    Returns ``(sampled [B, num_speculative_steps + 1], num_sampled [B])``: the accepted drafts and
    the correction/bonus token, unused slots holding `PLACEHOLDER_TOKEN_ID`.
    """
    if method not in ("standard", "block"):
        raise ValueError(f"unknown method {method!r}; choose standard or block")
    if bug is not None and bug not in MRV2_BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose from {', '.join(PORT_BUGS)}, wrong-row")
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
    acc_rows = t_lp[:, 1:S + 1] if bug == "target-row" else t_lp[:, :S]
    lpx = acc_rows.gather(-1, x.unsqueeze(-1))[..., 0]
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
        ok = ((u > h) if bug == "coin-compare" else (u <= h)) & valid[:, :S]
        tau = torch.where(ok, pos1, torch.zeros_like(pos1)).max(1).values
    else:
        ok = ((lpx < torch.log(u) + lqx) if bug == "coin-compare"
              else (lpx > torch.log(u) + lqx)) & valid[:, :S]
        tau = torch.cumprod(ok.long(), dim=1).sum(1)
    b = torch.arange(Bsz, device=dev)
    at = tau.clamp(max=max(S - 1, 0))
    tlp = t_lp[b, tau]
    if bug == "residual-row":  # the rows one position later (clamped to the request's own)
        at = torch.minimum(tau + 1, (n - 1).clamp(min=0)).clamp(max=max(S - 1, 0))
        tlp = t_lp[b, torch.minimum(tau + 1, n)]
    if method == "block":
        prev = cum[b, (tau - 1).clamp(min=0)] if S else torch.zeros(Bsz, dtype=dtype)
        tlp = tlp + torch.where(tau > 0, prev, torch.zeros_like(prev)).unsqueeze(-1)
    ratio = torch.exp(d_lp[b, at] - tlp) if S else torch.ones_like(tlp)
    residual = torch.where(ratio < 1.0, tlp + torch.log1p(-ratio), torch.full_like(tlp, -math.inf))
    bonus = (tau == n) | torch.tensor(bug == "correction-from-p", device=dev)
    logits = torch.where(bonus.unsqueeze(-1), t_lp[b, tau], residual).to(torch.float64)
    if token_uniforms is not None:
        probs = torch.exp(logits - torch.logsumexp(logits, dim=-1, keepdim=True))
        y = inverse_cdf(probs, token_uniforms.to(torch.float64))
    else:
        g = (noise(start + tau) if noise is not None else
             torch.rand(Bsz, V, generator=generator, dtype=torch.float64, device=dev))
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
    """A canonical sampler ``f(drafts, q, p, generator)`` running
    [`vllm_mrv2_rejection_sample`][spectheory.testing.engines.adapters.vllm_mrv2_rejection_sample]
    (float32 coins in [2^-31, 1) as the kernel's, Gumbel noise from ``generator``)."""
    _check_factory("vllm_mrv2_sampler", method, ("standard", "block"), dtype, bug,
                   MRV2_BUGS)

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
    [`vllm_mrv2_rejection_sample`][spectheory.testing.engines.adapters.vllm_mrv2_rejection_sample]
    with position coins ``uniforms[:, :L]`` and the correction drawn by inverse CDF at ``uniforms[:,
    L]`` in place of the Gumbel-max (the coins then mean what spectheory's reference coins mean).
    The kernel's coins lie in [2^-31, 1 - 2^-24] (``tl_rand32`` with ``includes_zero=False``);
    spectheory's u in (0, 1] are clamped into that range. float64 by default, so that decisions at
    the thresholds are not moved by float32 rounding."""
    _check_factory("vllm_mrv2_coin_sampler", method, ("standard", "block"), dtype, bug,
                   MRV2_BUGS)

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
    """Coin-driven canonical sampler around
    [`sglang_chain_sample`][spectheory.testing.engines.adapters.sglang_chain_sample]: ``uniforms[:,
    :L]`` are the chain's coins and ``uniforms[:, L]`` its final uniform (spectheory's convention is
    SGLang's, so identical coins give identical decisions)."""
    _check_factory("sglang_coin_sampler", method, ("token", "block"))

    def sampler(drafts, q, p, uniforms):
        Bsz, L, V = _check_canonical(drafts, q, p)
        _check_coins(uniforms, Bsz, L, sampler.__name__)
        coins = torch.cat([uniforms[:, :L], torch.ones(Bsz, 1, dtype=uniforms.dtype)], dim=1)
        out, tau = sglang_chain_sample(q, drafts, coins, p, uniforms[:, L], method)
        return tau, out.gather(1, tau.unsqueeze(1)).squeeze(1)

    sampler.__name__ = f"sglang_{method}_coin_sampler"
    return sampler


def sglang_sampler(method: str = "token"):
    """Canonical sampler around
    [`sglang_chain_sample`][spectheory.testing.engines.adapters.sglang_chain_sample] with coins 1 -
    torch.rand in (0, 1] and the final uniform torch.rand in [0, 1), from ``generator``."""
    coin = sglang_coin_sampler(method)

    def sampler(drafts, q, p, generator=None):
        Bsz, L = drafts.shape
        u = torch.rand(Bsz, L + 1, generator=generator, dtype=torch.float64)
        u[:, :L] = 1.0 - u[:, :L]
        return coin(drafts, q, p, u)

    sampler.__name__ = f"sglang_{method}_sampler"
    return sampler


# ============================================================================ engines' own layouts
#
# The functions below take exactly the arguments of the engines' entry points (the layouts of
# spectheory.testing.engines.layouts: VLLM_V1, VLLM_MRV2, SGLANG_CHAIN, TRANSFORMERS), so that each
# passes through its preset with no adapter; ``bug=`` plants one of PORT_BUGS for negative controls.


def _port_bug(bug):
    if bug is not None and bug not in PORT_BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose from {', '.join(PORT_BUGS)}")


#: vLLM V1's temperature of a greedy request (``GREEDY_TEMPERATURE`` of
#: vllm/v1/sample/rejection_sampler.py: 0 in vllm 0.33.0, -1 in earlier releases).
GREEDY_TEMPERATURE = 0.0
VLLM_GREEDY_TEMPERATURE = GREEDY_TEMPERATURE


def expand_batch_to_tokens(x, cu_num_tokens, num_tokens: int, replace_from=0, replace_to=0):
    """vLLM V1's ``expand_batch_to_tokens`` (vllm/v1/sample/rejection_sampler.py), ported: the
    per-request values ``x [B]`` repeated over each request's tokens (``cu_num_tokens [B]``
    cumulative end indices), ``replace_from`` replaced by ``replace_to`` -> ``[num_tokens]``."""
    from ...runtime.errors import OptionError

    if not (isinstance(x, torch.Tensor) and isinstance(cu_num_tokens, torch.Tensor)
            and x.dim() == 1 and cu_num_tokens.shape == x.shape):
        raise OptionError("expand_batch_to_tokens: x and cu_num_tokens must be tensors [B] of "
                          "one length (a value and a cumulative token count per request)")
    if cu_num_tokens.dtype.is_floating_point or cu_num_tokens.dtype.is_complex \
            or cu_num_tokens.dtype == torch.bool:
        raise OptionError(f"expand_batch_to_tokens: cu_num_tokens must hold integers, not "
                          f"{cu_num_tokens.dtype}")
    end = cu_num_tokens.to(torch.long)
    counts = end - torch.cat([end.new_zeros(1), end[:-1]])
    if counts.numel() and int(counts.min()) < 0:  # (torch: "repeats can not be negative")
        raise OptionError("expand_batch_to_tokens: cu_num_tokens must not decrease (cumulative "
                          f"end indices), got {cu_num_tokens.tolist()[:8]}")
    total = int(end[-1]) if end.numel() else 0
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens != total:
        raise OptionError(f"expand_batch_to_tokens: num_tokens = {_repr_cut(num_tokens, 40)} is not the "
                          f"last cumulative count, {total}")  # (a bare AssertionError)
    out = torch.repeat_interleave(x, counts)
    return torch.where(out == replace_from, torch.full_like(out, replace_to), out)


def _check_top_k_top_p(logits, k, p) -> None:
    """The port's inputs as vLLM's metadata holds them: ``logits [n, V]`` floats; ``k [n]``
    integers >= 1 (a request without top-k holds V; past V keeps every token, as the engine's
    clamp does); ``p [n]`` in (0, 1] (``SamplingParams`` refuses the rest). vLLM indexes past
    the row at k = 0 and masks nothing at p > 1 or NaN; the port refuses them by name."""
    from ...runtime.errors import OptionError

    if not (isinstance(logits, torch.Tensor) and logits.dim() == 2
            and logits.dtype.is_floating_point):
        raise OptionError("apply_top_k_top_p: logits must be a float tensor [n, V], not "
                          + (f"{logits.dtype} {list(logits.shape)}"
                             if isinstance(logits, torch.Tensor) else type(logits).__name__))
    n = logits.shape[0]
    for name, t in (("k", k), ("p", p)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor) or t.shape != (n,):
            shape = list(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise OptionError(f"apply_top_k_top_p: {name} must be a tensor [n] = [{n}] (one "
                              f"value per row of logits) or None, not {shape}")
    if k is not None:
        if k.dtype.is_floating_point or k.dtype.is_complex or k.dtype == torch.bool:
            raise OptionError(f"apply_top_k_top_p: k must hold integers, not {k.dtype}")
        if n and int(k.min()) < 1:
            raise OptionError(f"apply_top_k_top_p: top_k = {int(k.min())} is out of range: "
                              "k >= 1 (a request without top-k holds the vocabulary size)")
    if p is not None:
        if not p.dtype.is_floating_point:
            raise OptionError(f"apply_top_k_top_p: p must hold floats in (0, 1], not {p.dtype}")
        bad = ~((p > 0) & (p <= 1))
        if bool(bad.any()):
            raise OptionError(f"apply_top_k_top_p: top_p = {float(p[bad][0])} is out of range: "
                              "0 < p <= 1")


def apply_top_k_top_p(logits, k, p):
    """vLLM V1's ``apply_top_k_top_p_pytorch`` (vllm/v1/sample/ops/topk_topp_sampler.py),
    ported: sort ascending; top-k masks every logit below the k-th largest (ties kept); top-p
    masks the sorted positions whose cumulative softmax is <= 1 - p (the last one always kept);
    ``logits [n, V]``, ``k``, ``p`` ``[n]`` or None. The tie order at a top-p boundary is
    ``torch.sort``'s."""
    _check_top_k_top_p(logits, k, p)
    if k is None and p is None:
        return logits
    srt, idx = logits.sort(dim=-1, descending=False)
    if k is not None:
        kth = srt.gather(1, (srt.size(1) - k.to(torch.long)).clamp(min=0).unsqueeze(1))
        srt = srt.masked_fill(srt < kth, -float("inf"))
    if p is not None:
        cum = torch.cumsum(srt.softmax(dim=-1), dim=-1)
        mask = cum <= 1 - p.unsqueeze(1)
        mask[:, -1] = False
        srt = srt.masked_fill(mask, -float("inf"))
    return logits.scatter(-1, idx, srt)


def apply_sampling_constraints(logits, cu_num_draft_tokens, sampling_metadata):
    """vLLM V1's ``apply_sampling_constraints`` (vllm/v1/sample/rejection_sampler.py), ported:
    greedy batches (``all_greedy``) unchanged; otherwise ``logits [N, V]`` divided by each
    request's temperature (a greedy request's ``GREEDY_TEMPERATURE`` read as 1), then top-k and
    top-p ([`apply_top_k_top_p`][spectheory.testing.engines.adapters.apply_top_k_top_p]) with the
    per-request ``top_k`` / ``top_p`` tensors expanded to tokens. Min-p is not applied (vLLM
    applies none under speculative decoding)."""
    meta = sampling_metadata
    if meta.all_greedy:
        return logits
    n = logits.shape[0]
    temp = expand_batch_to_tokens(torch.as_tensor(meta.temperature, dtype=logits.dtype),
                                  cu_num_draft_tokens, n, GREEDY_TEMPERATURE, 1)
    logits = logits / temp.unsqueeze(-1)
    k = None if meta.top_k is None else expand_batch_to_tokens(meta.top_k, cu_num_draft_tokens, n)
    p = None if meta.top_p is None else expand_batch_to_tokens(meta.top_p, cu_num_draft_tokens, n)
    return apply_top_k_top_p(logits, k, p)


def generate_uniform_probs(num_tokens, num_draft_tokens, generators, device=None):
    """vLLM V1's acceptance coins (``generate_uniform_probs`` in
    vllm/v1/sample/rejection_sampler.py), ported: float64 ``torch.rand`` in [0, 1) per draft
    token from the global generator, the slice of a request with its own generator redrawn
    from it (requests without drafts draw nothing). It keeps vLLM's name at module level so that
    the coin hook of `VLLM_V1` replaces it in the port as
    in the engine."""
    from ...runtime.errors import OptionError, is_integer
    from ...runtime.limits import check_memory

    if not is_integer(num_tokens) or num_tokens < 0:
        raise OptionError(f"generate_uniform_probs: num_tokens = {_repr_cut(num_tokens, 40)} must be an "
                          "integer >= 0")
    check_memory(8 * int(num_tokens), f"generate_uniform_probs: num_tokens = {num_tokens:,}")
    u = torch.rand(int(num_tokens), dtype=torch.float64, device=device)
    start = 0
    for b, n in enumerate(num_draft_tokens):
        if n == 0:
            continue
        g = generators.get(b)
        if g is not None:
            u[start:start + n].uniform_(generator=g)
        start += n
    return u


def vllm_v1_rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len,
                             cu_num_draft_tokens, draft_probs, target_logits, bonus_token_ids,
                             sampling_metadata, *, bug: str | None = None):
    """Port of vLLM V1's ``rejection_sample`` with its arguments (vllm/v1/sample/
    rejection_sampler.py; layout `VLLM_V1`).

    ``draft_token_ids [N]`` all requests' drafts, ``num_draft_tokens`` (list), ``max_spec_len``,
    ``cu_num_draft_tokens [B]`` cumulative end indices, ``draft_probs [N, V]`` or ``None`` (n-gram
    drafts: draft probability 1, the draft token zeroed in the recovery row),
    ``target_logits [N, V]`` at the draft positions, already processed by
    [`apply_sampling_constraints`][spectheory.testing.engines.adapters.apply_sampling_constraints]
    as the engine's ``RejectionSampler.forward`` does (a float32 softmax turns them into
    probabilities), ``bonus_token_ids [B, 1]``, ``sampling_metadata`` with
    ``all_greedy``, ``all_random``, ``temperature [B]`` (``VLLM_GREEDY_TEMPERATURE`` marks a greedy
    request) and ``generators`` (request -> ``torch.Generator``). Acceptance of a random request's
    draft: ``draft_prob > 0 and target_prob / draft_prob >= u`` with u from
    [`generate_uniform_probs`][spectheory.testing.engines.adapters.generate_uniform_probs]; the
    first rejection emits the recovered token argmax(max(p - q, 0) / E), E ~ Exp(1) float32, one
    noise row per request (from its generator when it has one); without a rejection the bonus token
    follows. A greedy request accepts while the draft is the target's argmax and emits the argmax at
    the first mismatch. Returns int32 ``[B, max_spec_len + 1]`` padded with -1.
    """
    _port_bug(bug)
    meta = sampling_metadata
    B = len(num_draft_tokens)
    N, V = target_logits.shape
    dev = target_logits.device
    counts = torch.as_tensor(list(num_draft_tokens), dtype=torch.long, device=dev)
    req = torch.repeat_interleave(torch.arange(B, device=dev), counts)
    end = cu_num_draft_tokens.to(torch.long)
    start = end - counts
    flat = torch.arange(N, device=dev)
    pos = flat - start[req]
    temp = torch.as_tensor(meta.temperature, dtype=torch.float32, device=dev).reshape(-1)
    greedy = (torch.ones(B, dtype=torch.bool, device=dev) if meta.all_greedy
              else temp == VLLM_GREEDY_TEMPERATURE)
    if meta.all_greedy:
        target_probs = target_logits.to(torch.float32)
    else:
        target_probs = torch.softmax(target_logits.to(torch.float32), -1)
    ids = draft_token_ids.to(torch.long)
    nxt = torch.minimum(flat + 1, end[req] - 1)  # the next row of the same request
    arow = nxt if bug == "target-row" else flat
    tprob = target_probs[arow, ids]
    dprob = (torch.ones_like(tprob) if draft_probs is None
             else draft_probs.to(torch.float32)[flat, ids])
    accepted = torch.zeros(N, dtype=torch.bool, device=dev)
    recovered = torch.zeros(N, dtype=torch.long, device=dev)
    if not meta.all_greedy:
        uniform = generate_uniform_probs(N, num_draft_tokens, meta.generators, dev)
        ratio = (tprob / torch.where(dprob > 0, dprob, torch.ones_like(dprob))).to(torch.float64)
        accepted = (dprob > 0) & ((ratio <= uniform) if bug == "coin-compare"
                                  else (ratio >= uniform))
        expo = torch.empty(B, V, dtype=torch.float32, device=dev).exponential_()
        for b, g in meta.generators.items():
            if num_draft_tokens[b] > 0:
                expo[b].exponential_(generator=g)
        rrow = nxt if bug == "residual-row" else flat
        if bug == "correction-from-p":
            prob = target_probs[rrow]
        elif draft_probs is None:
            prob = target_probs[rrow].clone()
            prob[flat, ids[rrow]] = 0
        else:
            prob = (target_probs[rrow] - draft_probs.to(torch.float32)[rrow]).clamp(min=0)
        recovered = torch.argmax(prob / expo[req], dim=-1)
    argmax = target_probs.argmax(-1)
    g_tok = greedy[req]
    accepted = torch.where(g_tok, ids == argmax, accepted)
    recovered = torch.where(g_tok, argmax, recovered)
    big = int(max_spec_len) + 1
    first = torch.full((B,), big, dtype=torch.long, device=dev)
    first = first.scatter_reduce(0, req, torch.where(accepted, torch.full_like(pos, big), pos),
                                 "amin")
    first = torch.minimum(first, counts)
    out = torch.full((B, big), PLACEHOLDER_TOKEN_ID, dtype=torch.int32, device=dev)
    keep = pos < first[req]
    out[req[keep], pos[keep]] = ids[keep].to(torch.int32)
    rejected = first < counts
    rb = rejected.nonzero().reshape(-1)
    out[rb, first[rb]] = recovered[start[rb] + first[rb]].to(torch.int32)
    ab = (~rejected).nonzero().reshape(-1)
    out[ab, counts[ab]] = bonus_token_ids.reshape(-1)[ab].to(torch.int32)
    return out


_SPLITMIX = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
#: Domains of the MRV2 port's counter-based noise (acceptance coins, Gumbel noise).
_ACCEPT_DOMAIN, _GUMBEL_DOMAIN = 0x63D83595, 0xB8F1A2C7


def counter_uniforms(seeds, positions, domain: int, columns: int | None = None):
    """Counter-based uniforms k 2^-24 (k in [0, 2^24), float64) from a splitmix64 hash of
    (seed, position, domain[, column]): the port's stand-in for a kernel's ``tl.rand(seed,
    offset)`` (vLLM MRV2 draws its coins and Gumbel noise from the request's seed and the
    token's position). ``seeds`` and ``positions`` [n] int64; ``columns`` adds a last axis."""
    import numpy as np

    from ...runtime.errors import OptionError, is_integer
    from ...runtime.limits import check_memory

    if columns is not None and (not is_integer(columns) or columns < 0):
        raise OptionError(f"counter_uniforms: columns = {_repr_cut(columns, 40)} must be an integer >= 0 "
                          "or None")
    if isinstance(domain, bool) or not is_integer(domain) or not 0 <= domain < 2**64:
        raise OptionError(f"counter_uniforms: domain = {_repr_cut(domain, 40)} must be an integer in "
                          "[0, 2^64) (the hash's stream number)")
    ids = {}
    for name, v in (("seeds", seeds), ("positions", positions)):
        try:
            t = torch.as_tensor(v)
        except Exception:  # noqa: BLE001 - text, ragged lists, objects
            t = None
        if t is None or t.dim() != 1 or t.dtype.is_floating_point or t.dtype.is_complex \
                or t.dtype == torch.bool:  # a float seed 1.7 was read as 1
            raise OptionError(f"counter_uniforms: {name} must be integers [n] (int64), not "
                              + (f"{t.dtype} of shape {list(t.shape)}" if t is not None
                                 else type(v).__name__))
        ids[name] = t
    seeds, positions = ids["seeds"], ids["positions"]
    if seeds.shape != positions.shape:
        raise OptionError(f"counter_uniforms: seeds [{seeds.shape[0]}] and positions "
                          f"[{positions.shape[0]}] must be one per token")
    n = int(seeds.numel())
    # the hash's uint64 temporaries, about four of [n, columns] at once
    check_memory(32 * n * (1 if columns is None else int(columns)),
                 f"counter_uniforms: {n:,} rows x {columns} columns")
    c0, c1, c2 = (np.uint64(c) for c in _SPLITMIX)
    s = torch.as_tensor(seeds).cpu().numpy().astype(np.uint64)
    p = torch.as_tensor(positions).cpu().numpy().astype(np.uint64)
    x = (s * c0) ^ (p * c1) ^ np.uint64(domain)
    if columns is not None:
        x = x[:, None] ^ (np.arange(columns, dtype=np.uint64) * c2)[None, :]
    z = x + c0
    z = (z ^ (z >> np.uint64(30))) * c1
    z = (z ^ (z >> np.uint64(27))) * c2
    z = z ^ (z >> np.uint64(31))
    return torch.from_numpy((z >> np.uint64(40)).astype(np.float64) / 2.0**24)


def vllm_mrv2_engine_rejection_sample(target_logits, draft_logits, draft_sampled, cu_num_logits,
                                      pos, idx_mapping, expanded_idx_mapping, expanded_local_pos,
                                      temperature, seed, num_speculative_steps,
                                      synthetic_conditional_rates=None, use_fp64: bool = False,
                                      use_block_verification: bool = False, *,
                                      bug: str | None = None):
    """Port of vLLM Model Runner V2's ``rejection_sample`` with its arguments
    (vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py; layout
    `VLLM_MRV2`) -> ``(sampled [B, S+1],
    num_sampled [B])``.

    Rows as in
    [`vllm_mrv2_rejection_sample`][spectheory.testing.engines.adapters.vllm_mrv2_rejection_sample];
    ``draft_logits [max_num_reqs, S, V]`` read at ``idx_mapping``; the coin of each target row is
    drawn inside from its request's seed and its position ``pos``
    ([`counter_uniforms`][spectheory.testing.engines.adapters.counter_uniforms], float32, clamped
    below at 2^-31: the range [2^-31, 1) of ``tl_rand(..., includes_zero=False)``), and so is the
    Gumbel noise of the correction. ``temperature [max_num_reqs]`` as the kernel reads it: the
    target logits arrive processed (the engine's ``Sampler.apply_sampling_params`` applied
    temperature, min-p, top-k and top-p), the draft logits are stored before temperature and divided
    by the request's temperature; a temperature of 0 is a greedy request, which accepts while the
    draft is the argmax of its target row and emits that row's argmax (at the first mismatch, or at
    the bonus row). Synthetic acceptance rates are not covered; ``use_fp64`` is accepted (the port's
    Gumbel noise is float64 anyway). ``use_block_verification`` selects the block rule.
    """
    _port_bug(bug)
    if synthetic_conditional_rates is not None:
        raise ValueError("the port does not cover synthetic acceptance rates")
    del use_fp64
    temp = torch.as_tensor(temperature, dtype=torch.float32)[idx_mapping.to(torch.long)]
    greedy = temp == 0
    scale = torch.where(greedy, torch.ones_like(temp), temp).to(draft_logits.dtype)
    draft_logits = draft_logits.clone()
    draft_logits[idx_mapping.to(torch.long)] = (draft_logits[idx_mapping.to(torch.long)]
                                                / scale.view(-1, 1, 1))
    rows_seed = seed[expanded_idx_mapping.to(torch.long)]
    coins = counter_uniforms(rows_seed, pos, _ACCEPT_DOMAIN).to(torch.float32).clamp(
        min=MRV2_COIN_MIN)
    V = target_logits.shape[-1]

    def noise(rows):
        return counter_uniforms(rows_seed[rows], pos[rows], _GUMBEL_DOMAIN, V)

    sampled, num = vllm_mrv2_rejection_sample(
        target_logits, draft_logits[idx_mapping.to(torch.long)], draft_sampled, cu_num_logits,
        coins, num_speculative_steps, method="block" if use_block_verification else "standard",
        dtype=torch.float32, bug=bug, noise=noise)
    if greedy.any():
        sampled, num = sampled.clone(), num.clone()
        start = cu_num_logits[:-1].long()
        for b in greedy.nonzero().reshape(-1).tolist():
            n_b = int(cu_num_logits[b + 1] - start[b]) - 1
            am = target_logits[start[b]:start[b] + n_b + 1].argmax(-1)
            x = draft_sampled[start[b] + 1:start[b] + n_b + 1].long()
            k = int((x == am[:n_b]).long().cumprod(0).sum())
            sampled[b] = PLACEHOLDER_TOKEN_ID
            sampled[b, :k] = x[:k]
            sampled[b, k] = am[k]
            num[b] = k + 1
    return sampled, num


def sglang_chain_speculative_sampling(predicts, accept_index, accept_token_num, candidates,
                                      retrive_index, retrive_next_token, retrive_next_sibling,
                                      uniform_samples, uniform_samples_for_final_sampling,
                                      target_probs, draft_probs, threshold_single=1.0,
                                      threshold_acc=1.0, deterministic=True, *,
                                      bug: str | None = None):
    """Port of SGLang's ``chain_speculative_sampling_triton`` with its arguments (layout
    `SGLANG_CHAIN`); returns nothing, writes its
    buffers.

    ``candidates [B, L+1]`` (a root column, then the drafts), ``retrive_index [B, L+1]`` (global
    ids into ``predicts``), ``uniform_samples [B, L+1]`` (coin of draft i in column i - 1),
    ``uniform_samples_for_final_sampling [B]``, ``target_probs [B, L+1, V]``, ``draft_probs
    [B, L, V]``. Draft i is accepted while ``coin * q(X_i) < p(X_i)`` (in the rows' dtype); each
    accepted draft is written to ``predicts`` at the previous node's global id and
    ``accept_index[b, i]`` gets node i's id; ``accept_token_num[b]`` = tau. The final token: the
    first index whose cumulative sum exceeds coin x total of max(p - q, 0) (of p after L
    acceptances, or when the residual has no mass), 0 if none, written at node tau's id. The
    thresholds and the deterministic flag are accepted and not used, as in the Triton kernel.
    """
    _port_bug(bug)
    del threshold_single, threshold_acc, deterministic, retrive_next_token, retrive_next_sibling
    B, S = candidates.shape
    L = S - 1
    dev = target_probs.device
    b = torch.arange(B, device=dev)
    x = candidates[:, 1:].to(torch.long)
    if L:
        steps = torch.arange(L, device=dev)
        prow = steps + 1 if bug == "target-row" else steps
        px = target_probs[:, prow].gather(-1, x.unsqueeze(-1))[..., 0]
        qx = draft_probs.gather(-1, x.unsqueeze(-1))[..., 0]
        coin = uniform_samples[:, :L].to(px.dtype)
        ok = (coin * qx <= px) if bug == "coin-compare" else (coin * qx < px)
        tau = torch.cumprod(ok.to(torch.long), dim=1).sum(1)
    else:
        tau = torch.zeros(B, dtype=torch.long, device=dev)
    ridx = retrive_index.to(torch.long)
    upto = torch.arange(S, device=dev).unsqueeze(0) <= tau.unsqueeze(1)
    accept_index.copy_(torch.where(upto, retrive_index.to(accept_index.dtype), accept_index))
    wrote = torch.arange(L, device=dev).unsqueeze(0) < tau.unsqueeze(1)
    predicts[ridx[:, :L][wrote]] = x[wrote].to(predicts.dtype)
    accept_token_num.copy_(tau.to(accept_token_num.dtype))
    all_acc = tau == L
    row = torch.where(all_acc, tau, tau + 1) if bug == "residual-row" else tau
    pv = target_probs[b, row]
    if L:
        qv = draft_probs[b, row.clamp(max=L - 1)]
        res = (pv - qv).clamp(min=0)
    else:
        res = pv
    use_p = all_acc.unsqueeze(-1) | (bug == "correction-from-p")
    val = torch.where(use_p, pv, res)
    norm = val.sum(-1)
    fallback = ~all_acc & ~((norm > 0) & torch.isfinite(norm))
    val = torch.where(fallback.unsqueeze(-1), pv, val)
    target_u = uniform_samples_for_final_sampling.to(val.dtype) * val.sum(-1)
    hit = torch.cumsum(val, dim=-1) > target_u.unsqueeze(-1)
    token = torch.where(hit.any(-1), hit.to(torch.int32).argmax(-1).to(torch.long),
                        torch.zeros_like(tau))
    predicts[ridx[b, tau]] = token.to(predicts.dtype)


def hf_greedy_match(candidate_input_ids, candidate_logits, candidate_length, new_logits,
                    assistant_ensemble_weight=None):
    """Port of transformers' greedy assisted decoding (``do_sample=False``), which
    ``_assisted_decoding`` (transformers/generation/utils.py, 5.x) runs inline instead of
    ``_speculative_sampling``: ``selected_tokens = new_logits.argmax(-1)``, ``n_matches`` = the
    drafts equal to it before the first mismatch, ``valid_tokens = selected_tokens[:, :n + 1]``.
    Same arguments and return as ``_speculative_sampling`` (``candidate_logits`` unused)."""
    del candidate_logits, assistant_ensemble_weight
    L = int(candidate_length)
    drafts = candidate_input_ids[:, candidate_input_ids.shape[1] - L:]
    selected = new_logits.argmax(dim=-1)
    n = ((~(drafts == selected[:, :-1])).cumsum(dim=-1) < 1).sum()
    return selected[:, : int(n) + 1], n


def hf_speculative_sampling(candidate_input_ids, candidate_logits, candidate_length, new_logits,
                            assistant_ensemble_weight=None, *, bug: str | None = None):
    """Port of Hugging Face transformers' ``_speculative_sampling`` with its arguments
    (transformers/generation/utils.py, 5.x; layout
    `TRANSFORMERS`) -> ``(valid_tokens [1, n + 1],
    n_matches)``.

    One sequence: the last ``candidate_length`` ids of ``candidate_input_ids [1, n + L]`` are
    the drafts; q and p are the softmax of ``candidate_logits [1, L, V]`` and ``new_logits
    [1, L+1, V]``; draft i is kept while ``r_i <= p_i / q_i`` with r = ``torch.rand_like``
    (global generator); the next token is ``torch.multinomial`` of normalise(max(p - q, 0)) at
    the first rejection, of p after L matches. ``assistant_ensemble_weight`` w (DIVERSE) accepts
    on r <= 1 - w + w p/q: lossy by design, a negative control.
    """
    _port_bug(bug)
    L = int(candidate_length)
    drafts = candidate_input_ids[0, candidate_input_ids.shape[1] - L:].to(torch.long)
    q = candidate_logits.softmax(dim=-1)[0]
    p = new_logits.softmax(dim=-1)[0]
    steps = torch.arange(L)
    p_i = p[steps + 1 if bug == "target-row" else steps, drafts]
    ratio = p_i / q[steps, drafts]
    if assistant_ensemble_weight is not None:
        w = assistant_ensemble_weight
        ratio = 1.0 - w + w * ratio
    r = torch.rand_like(ratio)
    kept = ((r >= ratio) if bug == "coin-compare" else (r <= ratio)).tolist()
    n = kept.index(False) if False in kept else L  # the drafts kept before the first rejection
    if n < L and bug != "correction-from-p":
        k = min(n + 1, L - 1) if bug == "residual-row" else n
        res = (p[n + 1 if bug == "residual-row" else n] - q[k]).clamp(min=0)
        total = res.sum()
        if assistant_ensemble_weight is not None and total <= torch.finfo(res.dtype).tiny:
            res = p[n]
        else:
            res = res / total
    else:
        res = p[n]
    token = torch.multinomial(res, 1)
    valid = torch.cat([drafts[:n], token.to(drafts.dtype)]).unsqueeze(0)
    return valid, torch.tensor(n)


@functools.lru_cache(maxsize=1)
def _float64_draws_are_elementwise() -> bool:
    """Whether torch's CPU generator gives each float64 element of ``uniform_`` and of
    ``exponential_`` from one draw of its own, in order: then a run of calls that draw n_1, n_2,
    ... values sees the same stream as one call drawing their sum, and which of the two
    transforms a value went through depends only on its place in the stream. Checked once per
    process on a private generator (an interleaving of both calls against two single calls,
    small ones and one of 2^17 values, past the sizes at which a library may switch to a
    vectorised routine)."""
    sizes = [(3, 5), (1, 2), (4, 17), (2, 64)] * 8 + [(1 << 16, 1 << 16), (1, 3)]
    g = torch.Generator().manual_seed(20240607)
    parts = []
    for nu, ne in sizes:
        parts.append(torch.rand(nu, generator=g, dtype=torch.float64))
        parts.append(torch.empty(ne, dtype=torch.float64).exponential_(generator=g))
    end = g.get_state()
    total = sum(nu + ne for nu, ne in sizes)
    g.manual_seed(20240607)
    u = torch.rand(total, generator=g, dtype=torch.float64)
    g.manual_seed(20240607)
    e = torch.empty(total, dtype=torch.float64).exponential_(generator=g)
    at = 0
    for i, (nu, ne) in enumerate(sizes):
        if not (torch.equal(parts[2 * i], u[at:at + nu])
                and torch.equal(parts[2 * i + 1], e[at + nu:at + nu + ne])):
            return False
        at += nu + ne
    return torch.equal(end, g.get_state())


def hf_speculative_sampling_rows(candidate_input_ids, candidate_logits, candidate_length,
                                 new_logits, *, pad: int = -1):
    """[`hf_speculative_sampling`][spectheory.testing.engines.adapters.hf_speculative_sampling]
    run on each sequence of a batch in turn, as transformers runs it, computed for the whole
    batch at once -> ``(tokens [B, L+1], n_matches [B])``; sequence b's ``valid_tokens`` are
    ``tokens[b, :n_matches[b] + 1]``, the rest is ``pad``.

    The sequences' calls draw from torch's global generator, in turn, L uniforms
    (``torch.rand_like`` of the ratios) and then V exponentials (``torch.multinomial`` of one
    sample is ``argmax(res / E)`` with ``E = empty_like(res).exponential_()``, its Gumbel-max
    form). Both counts are fixed, so the stream splits into B blocks of L + V values known before
    any sequence is verified: with float64 CPU rows and a generator that draws float64 values
    element by element (`_float64_draws_are_elementwise`) the uniforms and exponentials are
    read from two draws of the whole stream from the same state; otherwise the port itself runs,
    sequence by sequence. The arithmetic is the port's, elementwise on the same
    values (so bit-identical), and the global generator ends where the B calls leave it. A
    batch whose residual the port's ``torch.multinomial`` would refuse (nan, inf, negative or
    zero mass) is rerun through the port from the same generator state, so the error is the
    port's at the same sequence."""
    B = candidate_input_ids.shape[0]
    L = int(candidate_length)
    if B == 0:
        return (torch.empty(0, L + 1, dtype=torch.long), torch.empty(0, dtype=torch.long))
    start = torch.get_rng_state()
    drafts = candidate_input_ids[:, candidate_input_ids.shape[1] - L:].to(torch.long)
    q = candidate_logits.softmax(dim=-1)
    p = new_logits.softmax(dim=-1)
    V = p.shape[-1]
    if q.dtype == p.dtype == torch.float64 and p.device.type == q.device.type == "cpu" \
            and _float64_draws_are_elementwise():
        u = torch.rand(B, L + V, dtype=torch.float64)
        torch.set_rng_state(start)
        e = torch.empty(B, L + V, dtype=torch.float64).exponential_()
        r, e = u[:, :L], e[:, L:]
        ar = torch.arange(B)
        ratio = p[:, :L].gather(-1, drafts.unsqueeze(-1))[..., 0] / q.gather(
            -1, drafts.unsqueeze(-1))[..., 0]
        n = torch.cumprod((r <= ratio).to(torch.long), dim=1).sum(1)
        pn = p[ar, n]
        if L:
            resid = (pn - q[ar, n.clamp(max=L - 1)]).clamp(min=0)
            res = torch.where((n < L).unsqueeze(1), resid / resid.sum(-1, keepdim=True), pn)
        else:
            res = pn
        valid = ((res.amax(-1) < math.inf) & (res.amin(-1) >= 0) & (res.sum(-1) != 0)).all()
        if bool(valid):
            token = torch.argmax(res / e, dim=-1)
            pos = torch.arange(L + 1)
            tokens = torch.cat([drafts, torch.full((B, 1), pad, dtype=torch.long)], dim=1)
            tokens = torch.where(pos < n.unsqueeze(1), tokens, pad)
            tokens[ar, n] = token
            return tokens, n
        torch.set_rng_state(start)
    tokens = torch.full((B, L + 1), pad, dtype=torch.long)
    n = torch.empty(B, dtype=torch.long)
    for b in range(B):
        valid, nb = hf_speculative_sampling(candidate_input_ids[b:b + 1], candidate_logits[b:b + 1],
                                            L, new_logits[b:b + 1])
        tokens[b, :valid.shape[1]] = valid[0]
        n[b] = nb
    return tokens, n
