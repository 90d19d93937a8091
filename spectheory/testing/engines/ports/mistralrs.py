"""mistral.rs's speculative step, ported to torch from its released sources.

Source (EricLBuehler/mistral.rs): ``mistralrs-core/src/pipeline/sampling.rs``,
``sample_target_sequence_speculative``, and ``mistralrs-core/src/pipeline/speculative.rs``. The
draft model proposes its tokens; the target's logits for the L + 1 positions are split into
chunks and each chunk goes through ``sample_sequence(chunk, seq, ..., sample_speculative=true)``
**without modifying the sequence**, so every position's penalties read the committed tokens
only; then the drafts are accepted while they equal the target's tokens (sample-match).

Before mistral.rs PR #2424, ``sample_speculative=true`` made the sampler return the argmax of
the row after its top-k / top-p / min-p filters (``Sampler::sample_speculative_top_kp_min_p``)
at any temperature: the speculative path emitted the greedy chain of the processed target for a
request that asked for sampling. PR #2424 refuses to speculate when the request is not greedy
(one real draw from the first position, every draft rejected).

[`mistralrs_step`][spectheory.testing.engines.ports.mistralrs.mistralrs_step] is the step
``version="released"`` (argmax at any temperature, penalties from the committed tokens),
``"pr2424"`` (non-greedy: a plain draw; greedy: the argmax chain, penalties as released) or
``"fixed"`` (PR #2424, and each position's history extended by the drafts before it). Drafts are
the draft model's argmax (its own speculative sampling path). The penalties follow
`spectheory.inputs.stateful` (vLLM's semantics) on the committed tokens: a reading of where
mistral.rs takes its penalty context, not a port of its penalty formulas.
"""

from __future__ import annotations

from ....inputs.processing import parse_sampling, process_rows
from ....runtime._lazy import torch
from ....runtime.errors import OptionError

VERSIONS = ("released", "pr2424", "fixed")
SOURCE = ("EricLBuehler/mistral.rs: mistralrs-core/src/pipeline/sampling.rs, "
          "sample_target_sequence_speculative (before and after PR #2424)")

__all__ = ["SOURCE", "VERSIONS", "mistralrs_step"]


def _rows(request, seq, n: int, history_of):
    """Processed target rows [B, L+1, V] after context + drafts, row j with ``history_of(j)``."""
    from ....inputs.stateful import kit_logits

    sp = parse_sampling(request.sampling)
    raw = request.target(seq)[:, n:]
    logits = raw.to(torch.float64) if request.inputs == "logits" else \
        kit_logits(raw.to(torch.float64))
    out = []
    for j in range(raw.shape[1]):
        out.append(process_rows(logits[:, j], sp, "logits", history=history_of(j)))
    return torch.stack(out, dim=1)


def mistralrs_step(request, *, version: str = "released"):
    """mistral.rs's speculative step (see `spectheory.testing.engines.ports.mistralrs`)."""
    if version not in VERSIONS:
        raise OptionError(f"version = {version!r} is not one of {', '.join(VERSIONS)}")
    sp = parse_sampling(request.sampling)
    ctx = request.context
    B, n = ctx.shape
    L = request.num_draft
    greedy = sp is not None and sp.greedy
    if version != "released" and not greedy:  # PR #2424: no speculation for a sampled request
        p = _rows(request, ctx, n, lambda j: ctx)[:, 0]
        out = torch.full((B, L + 1), -1, dtype=torch.long)
        out[:, 0] = torch.multinomial(p, 1, generator=request.generator)[:, 0]
        return out
    drafts = torch.empty(B, 0, dtype=torch.long)
    for _ in range(L):
        seq = torch.cat([ctx, drafts], dim=1)
        drafts = torch.cat([drafts, request.draft(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
    seq = torch.cat([ctx, drafts], dim=1)
    if version == "fixed":
        p = _rows(request, seq, n, lambda j: seq[:, :n + j])
    else:  # the sequence is not modified: every position's penalties read the committed ids
        p = _rows(request, seq, n, lambda j: ctx)
    # sample_speculative=true: the argmax of the filtered row, at any temperature
    t = p.argmax(-1)  # [B, L+1]; the lowest id among tied maxima
    match = t[:, :L] == drafts
    tau = torch.where(match.all(1), torch.full((B,), L), torch.argmin(match.to(torch.int8), 1))
    out = torch.full((B, L + 1), -1, dtype=torch.long)
    for b in range(B):
        out[b, :int(tau[b]) + 1] = t[b, :int(tau[b]) + 1]
    return out
