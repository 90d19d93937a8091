"""Bugs at the seam between drafting and verifying: whole-step replicas with their exact laws.

Each replica is a step in the signature of [`check_step`][spectheory.testing.checks.step.check_step]
(``step(request) -> emitted [B, L+1]``), written from the public thread of the bug, with

* its two halves in the forms the other checks take: a draft sampler for
  [`check_proposal`][spectheory.testing.checks.sampler.check_proposal] and a sampler for
  [`check_sampler`][spectheory.testing.checks.sampler.check_sampler] (what those checks can see of
  the step), and
* its exact output law on an instance, under the declared noise coupling
  ([`exact_step_law`][spectheory.testing.mutants.steps.exact_step_law]): exact rationals.

Replicas:

* vLLM #47386 (fixed by #54282), [`shared_noise_step`][spectheory.testing.mutants.steps.shared_noise_step]:
  Model Runner V2 keyed the draft's Gumbel noise, the acceptance uniform and the recovery noise by
  the same Philox offset. Declared coupling here: the draft X = argmax q(x)/E_x and the recovery
  token argmax r(y)/E_y read the SAME exponentials E (an exponential race is the Gumbel-max trick
  with G = -log E), the acceptance coin is independent (in MRV2's ``gumbel_block_argmax`` the
  noise is Philox-hashed from the key ``tl.randint(seed, pos)`` at the vocabulary offsets and
  the acceptance uniform ``tl.rand(seed, pos)`` is that key's float conversion, which the hashed
  noise does not reveal). Exact law: with E i.i.d. Exp(1),
  P(X = x, Y = y) for x != y is the integral over rho = E_y/E_x >= q_y/q_x of
  d rho / (1 + rho + sum_j max(q_j/q_x, rho r_j/r_y))^2 (integrate E_x out), piecewise
  rational: exact. A rejected draft has r_x = 0, so with V = 2 the recovery token is forced
  and the bias vanishes; it needs V >= 3.
* SGLang PR #7207 ("use a different coin for the final sampling"),
  [`reused_coin_step`][spectheory.testing.mutants.steps.reused_coin_step]: the final token drawn
  by inverse CDF at the coin of the last acceptance test (the rejected position's coin, which is
  conditioned to lie above the threshold; after L acceptances position L's, conditioned below
  it). Exact law: the measure of [c_{y-1}, c_y) within (a, 1] (or (0, a]).
* Hugging Face transformers #47932 (fix proposed in PR #47961),
  [`raw_q_step`][spectheory.testing.mutants.steps.raw_q_step]: drafts sampled from the
  processed draft rows, the raw rows handed to ``_speculative_sampling`` as q.
* DeepSpec #31 (fixed by PR #30), [`bf16_draft_step`][spectheory.testing.mutants.steps.bf16_draft_step]:
  drafts sampled from the softmax of bfloat16 logits (the draft's log-probabilities shifted to
  the level `LOGIT_LEVEL` of raw LM-head logits, where bfloat16's step is 1/16), the ratio computed
  from the float32-or-better q. Its exact law is that of the float64 probabilities the replica
  draws from (converted exactly to rationals and normalised, as ``torch.multinomial`` does).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable

import numpy as np
import torch

from ...inputs.instances import Instance, instance_from_dict
from ...inputs.processing import parse_sampling, process_rows
from ...runtime.errors import InputError, OptionError, SizeLimitError, seed_forked
from ...runtime.limits import shown
from ..checks.step import (StepRequest, _draft_rows, _sglang_chain_inputs, _streams,
                           _target_rows, sglang_step, transformers_step)

__all__ = ["LOGIT_LEVEL", "REPLICAS", "bf16_draft_probs", "bf16_draft_step", "exact_step_law",
           "raw_q_step", "reused_coin_step", "shared_noise_step", "shared_gumbel_joint",
           "shared_noise_instance", "reused_coin_instance", "raw_q_instance", "bf16_instance",
           "draft_half", "sampler_half"]

#: Level of the draft logits in the bfloat16 replica: logits log q + LOGIT_LEVEL (a softmax does
#: not see the shift; bfloat16 rounding does: its step is 1/16 on [8, 16)).
LOGIT_LEVEL = 16.0


# ----------------------------------------------------------------------------- replicas


def shared_noise_step(request: StepRequest):
    """vLLM #47386: [`vllm_v1_step`][spectheory.testing.checks.step.vllm_v1_step] with the recovery
    token at position i drawn as argmax r(y)/E_y from the exponentials E that drew the draft
    X_i = argmax q(x)/E_x (one noise vector for drafting and recovery; the acceptance coins and
    the bonus token keep their own streams)."""
    from ..engines.adapters import flatten_drafts, vllm_rejection_sample, vllm_sample_recovered_tokens

    Bsz, L = request.context.shape[0], request.num_draft
    g_draft, g_coin, g_bonus = _streams(request, 3)
    drafts = torch.empty(Bsz, 0, dtype=torch.long)
    qs, noise = [], []
    for _ in range(L):
        q = _draft_rows(request, drafts)
        e = torch.empty_like(q).exponential_(generator=g_draft)
        x = torch.argmax(q / e, dim=-1)
        qs.append(q)
        noise.append(e)
        drafts = torch.cat([drafts, x.unsqueeze(1)], dim=1)
    q = torch.stack(qs, dim=1)
    p = _target_rows(request, drafts)
    V = q.shape[-1]
    ids, cu = flatten_drafts(drafts)
    u = torch.rand(Bsz * L, generator=g_coin, dtype=torch.float64)
    rec = vllm_sample_recovered_tokens(ids, cu, q.reshape(-1, V), p[:, :L].reshape(-1, V),
                                       noise=torch.stack(noise, dim=1).reshape(-1, V))
    bonus = torch.multinomial(p[:, L], 1, generator=g_bonus)[:, 0]
    return vllm_rejection_sample(ids, cu, L, q.reshape(-1, V), p[:, :L].reshape(-1, V), bonus, u,
                                 rec)


def reused_coin_step(request: StepRequest):
    """SGLang #7207: [`sglang_step`][spectheory.testing.checks.step.sglang_step] whose final token
    is drawn at the coin of the last acceptance test instead of its own coin."""
    return sglang_step(request, reuse_coin=True)


def raw_q_step(request: StepRequest):
    """Hugging Face transformers #47932:
    [`transformers_step`][spectheory.testing.checks.step.transformers_step] drafting from the rows
    processed by the drafting parameters but handing the raw rows as q."""
    return transformers_step(request, hand_raw_q=True)


def bf16_draft_probs(q: torch.Tensor, level: float = LOGIT_LEVEL) -> torch.Tensor:
    """The law the DeepSpec #31 replica drafts from: float64 softmax of the bfloat16-rounded
    logits log q + ``level`` (zeros stay zero)."""
    q = torch.as_tensor(q).to(torch.float64)  # numpy rows too
    if not (isinstance(level, (int, float)) and not isinstance(level, bool)
            and np.isfinite(level)):
        raise InputError(f"bf16_draft_probs: level = {shown(level)} must be a finite number")
    if q.dim() == 0 or not torch.isfinite(q).all() or (q < 0).any() \
            or not (q > 0).any(dim=-1).all():
        raise InputError("bf16_draft_probs takes rows of probabilities: finite, >= 0, each "
                         "with a positive entry (a NaN entry was read as 0, a zero row gave NaN)")
    logits = torch.where(q > 0, torch.log(q.clamp(min=1e-300)) + level,
                         torch.full_like(q, -torch.inf))
    rounded = logits.to(torch.bfloat16).to(torch.float64)
    return torch.softmax(rounded, dim=-1)


def bf16_draft_step(request: StepRequest):
    """DeepSpec #31: drafts by ``torch.multinomial`` of
    [`bf16_draft_probs`][spectheory.testing.mutants.steps.bf16_draft_probs] of the (processed)
    draft rows; verification by token verification (the port of SGLang's chain sampler with
    separate coins) with the full-precision rows as q."""
    from ..engines.adapters import sglang_chain_sample

    q, drafts, coins, p, final = _sglang_chain_inputs(request, bf16_draft_probs)
    out, _ = sglang_chain_sample(q, drafts, coins, p, final)
    return out


# ----------------------------------------------------------------------------- the halves


def draft_half(name: str, draft_sampling=None) -> Callable:
    """The replica's drafting as a draft sampler for
    [`check_proposal`][spectheory.testing.checks.sampler.check_proposal]:
    ``(q_rows [B, V], generator) -> (tokens [B], q_reported [B, V])``."""
    dp = parse_sampling(draft_sampling)

    def proc(q):
        return q if dp is None else process_rows(q.to(torch.float64), dp)

    if name in ("vllm-47386", "sglang-7207"):
        def sampler(q_rows, generator=None):
            q = proc(q_rows)
            if name == "vllm-47386":
                e = torch.empty_like(q).exponential_(generator=generator)
                return torch.argmax(q / e, dim=-1), q
            return torch.multinomial(q, 1, generator=generator)[:, 0], q
    elif name == "hf-47932":
        def sampler(q_rows, generator=None):
            return torch.multinomial(proc(q_rows), 1, generator=generator)[:, 0], q_rows
    elif name == "deepspec-31":
        def sampler(q_rows, generator=None):
            q = proc(q_rows)
            return torch.multinomial(bf16_draft_probs(q), 1, generator=generator)[:, 0], q
    else:
        raise OptionError(f"draft_half: unknown replica {shown(name)}; choose from vllm-47386, sglang-7207, hf-47932, deepspec-31")
    sampler.__name__ = f"{name.replace('-', '_')}_draft_half"
    return sampler


def sampler_half(name: str) -> Callable:
    """The replica's verification as a canonical sampler ``(drafts, q, p, generator) ->
    (accepted, token)`` for [`check_sampler`][spectheory.testing.checks.sampler.check_sampler],
    which draws the drafts itself: the noise that drew them is not there to be shared (vLLM #47386's
    recovery draws fresh exponentials), and the q handed over is the one the kit drew from
    (transformers #47932, DeepSpec #31). SGLang #7207's coin re-use lies inside the
    verification, so its half keeps it."""
    from ..engines.adapters import (canonical_from_padded, flatten_drafts, sglang_chain_sample,
                                    vllm_rejection_sample, vllm_sample_recovered_tokens)

    def vllm(drafts, q, p, generator=None):
        Bsz, L = drafts.shape
        V = q.shape[-1]
        ids, cu = flatten_drafts(drafts)
        u = torch.rand(Bsz * L, generator=generator, dtype=torch.float64)
        rec = vllm_sample_recovered_tokens(ids, cu, q.reshape(-1, V), p[:, :L].reshape(-1, V),
                                           generator)
        bonus = torch.multinomial(p[:, L], 1, generator=generator)[:, 0]
        out = vllm_rejection_sample(ids, cu, L, q.reshape(-1, V), p[:, :L].reshape(-1, V),
                                    bonus, u, rec)
        return canonical_from_padded(out)

    def sglang(drafts, q, p, generator=None, reuse=False):
        Bsz, L = drafts.shape
        coins = 1.0 - torch.rand(Bsz, L + 1, generator=generator, dtype=torch.float64)
        final = torch.rand(Bsz, generator=generator, dtype=torch.float64)
        if reuse:
            _, tau = sglang_chain_sample(q, drafts, coins, p, final)
            final = coins[torch.arange(Bsz), tau.clamp(max=L - 1)]
        out, tau = sglang_chain_sample(q, drafts, coins, p, final)
        return tau, out.gather(1, tau.unsqueeze(1)).squeeze(1)

    def hf(drafts, q, p, generator=None):
        from ..engines.adapters import hf_speculative_sampling_rows

        Bsz, L = drafts.shape
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        lq, lp = torch.log(q.to(torch.float64)), torch.log(p.to(torch.float64))
        with torch.random.fork_rng(devices=[]):
            seed_forked(seed)
            # the port on each sequence in turn, from one seeded global stream
            out, tau = hf_speculative_sampling_rows(drafts, lq, L, lp)
        return tau, out.gather(1, tau.unsqueeze(1)).squeeze(1)

    table = {"vllm-47386": vllm, "sglang-7207": lambda d, q, p, g=None: sglang(d, q, p, g, True),
             "hf-47932": hf, "deepspec-31": lambda d, q, p, g=None: sglang(d, q, p, g, False)}
    if not isinstance(name, str) or name not in table:  # a dict: unhashable; else a KeyError
        raise OptionError(f"sampler_half: unknown replica {shown(name)}; choose from "
                          f"{', '.join(table)}")
    fn = table[name]
    fn.__name__ = f"{name.replace('-', '_')}_sampler_half"
    return fn


# ----------------------------------------------------------------------------- exact laws


def _f(x) -> Fraction:
    return x if isinstance(x, Fraction) else Fraction(x)


def shared_gumbel_joint(q, r, x: int, y: int) -> Fraction:
    """P(argmax_j q_j / E_j = x, argmax_j r_j / E_j = y) for x != y, E_j i.i.d. Exp(1), with
    r_x = 0 (the residual at a draft that can be rejected), exactly.

    With s = E_x and rho = E_y / E_x: the draft condition is E_j >= (q_j / q_x) s for all j,
    the recovery condition E_j >= (r_j / r_y) rho s for every j with r_j > 0; integrating the
    E_j (j != x, y) and then s gives the integral over rho >= q_y / q_x of
    1 / (1 + rho + sum_j max(alpha_j, beta_j rho))^2, alpha_j = q_j / q_x, beta_j = r_j / r_y;
    on each piece between the breakpoints alpha_j / beta_j the denominator is (A + B rho)^2 and
    the integral is (1/B) (1/(A + B lo) - 1/(A + B hi))."""
    try:
        q = [_f(v) for v in q]
        r = [_f(v) for v in r]
    except (TypeError, ValueError, ZeroDivisionError):  # "abc": Fraction's own message
        raise InputError("shared_gumbel_joint takes q and r as lists of numbers") from None
    V = len(q)
    if len(r) != V or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool)
                              and 0 <= t < V for t in (x, y)):
        raise InputError(f"shared_gumbel_joint needs q and r of one length V and tokens x, y in "
                         f"0..V-1 (got {len(q)} and {len(r)} entries, x = {shown(x)}, "
                         f"y = {shown(y)})")
    if x == y or q[x] == 0 or r[y] == 0 or r[x] != 0:
        raise InputError("shared_gumbel_joint needs x != y, q_x > 0, r_y > 0 and r_x = 0")
    if q[y] == 0:  # y never beats x in the draft race... but the recovery may still pick it
        lo = Fraction(0)
    else:
        lo = q[y] / q[x]
    others = [j for j in range(V) if j not in (x, y)]
    alpha = {j: q[j] / q[x] for j in others}
    beta = {j: r[j] / r[y] for j in others}
    cuts = sorted({alpha[j] / beta[j] for j in others if beta[j] > 0 and alpha[j] / beta[j] > lo})
    pts = [lo] + cuts + [None]
    total = Fraction(0)
    for a0, a1 in zip(pts[:-1], pts[1:]):
        mid = a0 + 1 if a1 is None else (a0 + a1) / 2
        A, B = Fraction(1), Fraction(1)
        for j in others:
            if beta[j] * mid > alpha[j]:
                B += beta[j]
            else:
                A += alpha[j]
        hi = Fraction(0) if a1 is None else 1 / (A + B * a1)
        total += (1 / (A + B * a0) - hi) / B
    return total


def _cdf_measure(row, lo: Fraction, hi: Fraction) -> list:
    """Measure of {u in (lo, hi]: inverse CDF of ``row`` at u is y} for every y (the first index
    whose normalised cumulative sum exceeds u)."""
    tot = sum(row)
    out, c0 = [], Fraction(0)
    for v in row:
        c1 = c0 + v / tot
        out.append(max(Fraction(0), min(hi, c1) - max(lo, c0)))
        c0 = c1
    return out


def _rows(model, h, V, params=None):
    row = np.array([_f(v) for v in model.conditional(h)], dtype=object)
    if params is not None:
        row = process_rows(row.reshape(1, V), params)[0]
    return [_f(v) for v in row]


def exact_step_law(name: str, instance: Instance, sampling=None, draft_sampling=None):
    """Exact law of one step of replica ``name`` ("vllm-47386", "sglang-7207", "hf-47932",
    "deepspec-31", or "correct": token verification with the q drafted from) on ``instance``:
    the emitted block completed by the target processed by ``sampling`` to L+1 tokens.

    Returns ``(law, target, tv)``: two lists of `Fraction` over the V^(L+1) sequences (flat
    index: base V, first token most significant) and their total variation. Rows are the
    instance's exact rows processed in rationals (`spectheory.inputs.processing`); DeepSpec #31's
    draft law is the replica's float64 probabilities taken as exact."""
    if not isinstance(name, str) or name not in ("vllm-47386", "sglang-7207", "hf-47932",
                                                 "deepspec-31", "correct"):
        raise OptionError(f"exact_step_law: unknown replica {shown(name)}; choose from "
                          f"vllm-47386, sglang-7207, hf-47932, deepspec-31, correct")
    inst = instance.to_exact()
    V, L = inst.vocab_size, inst.block_length
    sp, dp = parse_sampling(sampling), parse_sampling(draft_sampling)
    if V ** (L + 1) > 2**16:
        raise SizeLimitError("exact_step_law enumerates V^(L+1) <= 2^16 sequences")

    def p_row(h):
        return _rows(inst.target, h, V, sp)

    def drafted(h):  # (actual draft law, reported q)
        q = _rows(inst.draft, h, V, dp)
        if name == "hf-47932":
            return q, _rows(inst.draft, h, V)
        if name == "deepspec-31":
            qt = bf16_draft_probs(torch.tensor([float(v) for v in q], dtype=torch.float64))
            qt = [Fraction(float(v)) for v in qt]
            return [v / sum(qt) for v in qt], q  # torch.multinomial normalises
        return q, q

    blocks: dict = {}

    def add(block, mass):
        if mass:
            blocks[block] = blocks.get(block, Fraction(0)) + mass

    def walk(h, i, mass):
        qt, qr = drafted(h)
        p = p_row(h)
        acc = [min(Fraction(1), p[x] / qr[x]) if qr[x] > 0 else Fraction(0) for x in range(V)]
        r = [max(p[y] - qr[y], Fraction(0)) for y in range(V)]
        R = sum(r)
        for x in range(V):
            w = qt[x]
            if w == 0:
                continue
            if acc[x] > 0:
                if i + 1 < L:
                    walk(h + (x,), i + 1, mass * w * acc[x])
                else:
                    pb = p_row(h + (x,))
                    if name == "sglang-7207":
                        bonus = _cdf_measure(pb, Fraction(0), acc[x])
                    else:
                        bonus = [acc[x] * v for v in pb]
                    for z in range(V):
                        add(h + (x, z), mass * w * bonus[z])
            if acc[x] < 1:
                if R == 0:
                    raise ValueError("a draft is rejected while the residual has no mass")
                if name == "vllm-47386":
                    joint = [shared_gumbel_joint(qt, r, x, y) / w if r[y] > 0 else Fraction(0)
                             for y in range(V)]
                    rej = [(1 - acc[x]) * j for j in joint]
                elif name == "sglang-7207":
                    rej = _cdf_measure(r, acc[x], Fraction(1))
                else:
                    rej = [(1 - acc[x]) * v / R for v in r]
                for y in range(V):
                    add(h + (y,), mass * w * rej[y])

    walk((), 0, Fraction(1))
    law = [Fraction(0)] * V ** (L + 1)
    target = [Fraction(0)] * V ** (L + 1)

    def complete(h, mass, into):
        if len(h) == L + 1:
            idx = 0
            for t in h:
                idx = idx * V + t
            into[idx] += mass
            return
        for z, v in enumerate(p_row(h)):
            if v:
                complete(h + (z,), mass * v, into)

    for block, mass in blocks.items():
        complete(block, mass, law)
    complete((), Fraction(1), target)
    if sum(law) != 1:
        raise AssertionError(f"the exact law of {name} sums to {sum(law)}")
    tv = sum(abs(a - b) for a, b in zip(law, target)) / 2
    return law, target, tv


# ----------------------------------------------------------------------------- instances


def _inst(V, L, target, draft) -> Instance:
    return instance_from_dict({"vocab_size": V, "block_length": L, "target": target,
                               "draft": draft}, exact=True)


def shared_noise_instance() -> Instance:
    """V = 3, L = 1: p = (1/10, 2/5, 1/2), q = (1/2, 1/6, 1/3) at the root; prefix-dependent
    target rows after the first token (a three-way tie after token 1). TV 1/26 under the shared
    noise (the first token carries all of it)."""
    return _inst(3, 1, {"": ["1/10", "2/5", "1/2"], "0": ["1/2", "1/4", "1/4"],
                        "1": ["1/3", "1/3", "1/3"], "2": ["1/5", "3/5", "1/5"]},
                 ["1/2", "1/6", "1/3"])


def reused_coin_instance() -> Instance:
    """V = 3, L = 1: p = (1/10, 1/2, 2/5), q = (3/5, 1/5, 1/5) at the root (token 0
    over-drafted: rejected on coins in (1/6, 1], whose inverse CDF of the residual (0, 3/4, 1/4)
    picks token 2 more than a quarter of the time), prefix-dependent target rows after it."""
    return _inst(3, 1, {"": ["1/10", "1/2", "2/5"], "0": ["1/4", "1/4", "1/2"],
                        "1": ["1/3", "1/3", "1/3"], "2": ["3/5", "1/5", "1/5"]},
                 ["3/5", "1/5", "1/5"])


def raw_q_instance() -> Instance:
    """V = 2, L = 1: p = (1/2, 1/2), q = (2/3, 1/3) at the root, prefix-dependent target rows
    after it. With drafts from the top-1 processed q (token 0) and the raw q handed, token 0 is
    emitted with probability min(1, (1/2) / (2/3)) = 3/4: TV 1/4."""
    return _inst(2, 1, {"": ["1/2", "1/2"], "0": ["1/4", "3/4"], "1": ["2/3", "1/3"]},
                 ["2/3", "1/3"])


def bf16_instance() -> Instance:
    """V = 2, L = 1: p = (5/8, 3/8), q = (2/3, 1/3) at the root: log q + 16 rounds in bfloat16
    (step 1/16 on [8, 16)) to logits whose softmax puts 0.0125 more on token 0 (the largest
    shift over q = (k/N, 1 - k/N), N <= 40), which the target under-weights; prefix-dependent
    target rows after it."""
    return _inst(2, 1, {"": ["5/8", "3/8"], "0": ["1/3", "2/3"], "1": ["3/4", "1/4"]},
                 ["2/3", "1/3"])


#: name -> (step, instance, sampling, draft_sampling) of the bug kit's whole-step replicas.
REPLICAS = {
    "vllm-47386": (shared_noise_step, shared_noise_instance, None, None),
    "sglang-7207": (reused_coin_step, reused_coin_instance, None, None),
    "hf-47932": (raw_q_step, raw_q_instance, None, "top_k=1"),
    "deepspec-31": (bf16_draft_step, bf16_instance, None, None),
}
