"""Text Generation Inference's speculative step, ported to torch from its released sources.

Source (huggingface/text-generation-inference, commit 01e61bf0a4ae6d1f9bef99d91ec9df50d0e01cb8):
``server/text_generation_server/utils/tokens.py``, ``HeterogeneousNextTokenChooser.__call__``
with ``speculated_ids`` (Medusa or n-gram drafts), and the processors of
``utils/logits_process.py``. For the S = L + 1 positions of a verified block, position j's
scores go through, in this order:

1. ``repetition_processor(input_ids, scores)`` (transformers' rule: a seen token's negative
   score multiplied by the penalty, a non-negative one divided),
2. ``frequency_processor(input_ids, scores)``,
3. ``grammar_processor(scores, self.fsm_grammar_states)`` (the FSM's allowed tokens),
4. the warpers: temperature, top-k, top-p (typical-p),
5. ``self.choice(scores)``: per request, ``Sampling``: ``probs / Exp(1)`` argmax from the
   request's ``torch.Generator`` (an exponential race), or ``Greedy``: argmax;

then the drafts are accepted while ``next_ids[j] == speculated_ids[j]`` (sample-match: the first
token is always kept). The processors receive the **same** ``input_ids`` and the same
``fsm_grammar_states`` for every position j: the committed tokens, not the committed tokens and
the drafts before position j. That is a seam bug under any penalty or grammar (the target row at
position j is penalised and masked as if the drafts before it had not been emitted); without them
the step is lossless (sample-match, mlxcel PR #992), which is how the engines' suites test it.

[`tgi_step`][spectheory.testing.engines.ports.tgi.tgi_step] is the step as released
(``fixed=False``) or with the history of position j extended by the drafts before it
(``fixed=True``), in `check_step`'s signature. Drafts are the draft model's greedy tokens, as
Medusa heads' ``Greedy()(speculative_scores)``. TGI's frequency penalty divides the token counts
by the input length (``HeterogeneousFrequencyPenaltyLogitsProcessor``), which vLLM's and
OpenAI's ``frequency_penalty`` do not; TGI has no presence penalty, logit bias, min-p, min-tokens
or no-repeat n-grams. The port refuses those parameters in one line rather than check a rule
TGI does not have.
"""

from __future__ import annotations


from ....inputs.processing import SamplingParams, parse_sampling, process_rows
from ....runtime._lazy import torch
from ....runtime.errors import OptionError
from ....runtime.limits import shown as _repr_cut

SOURCE = ("huggingface/text-generation-inference@01e61bf0a4ae6d1f9bef99d91ec9df50d0e01cb8: "
          "server/text_generation_server/utils/tokens.py, HeterogeneousNextTokenChooser")

__all__ = ["SOURCE", "tgi_step"]


def _check(sp: SamplingParams | None) -> None:
    if sp is None:
        return
    unsupported = [name for name, on in (
        ("frequency_penalty (TGI divides counts by the input length)", sp.frequency_penalty),
        ("presence_penalty", sp.presence_penalty), ("logit_bias", sp.logit_bias),
        ("min_p", sp.min_p), ("min_tokens", sp.min_tokens),
        ("no_repeat_ngram_size", sp.no_repeat_ngram_size)) if on]
    if unsupported:
        raise OptionError(f"the TGI port has no {', '.join(unsupported)}: TGI's chooser applies "
                          f"repetition_penalty, a grammar, temperature, top_k and top_p")


def _scores(rows, inputs):
    """The model's scores as logits (the kit's logits in probability mode)."""
    from ....inputs.stateful import kit_logits

    if inputs == "logits":
        return rows.to(torch.float64)
    return kit_logits(rows.to(torch.float64))


def tgi_step(request, *, fixed: bool = False):
    """TGI's speculative step (see `spectheory.testing.engines.ports.tgi`): greedy drafts from the
    draft model, the S = L + 1 target positions processed with the committed ``input_ids`` and
    FSM state (``fixed=True``: with the drafts before each position), sampled by exponential
    races from ``request.generator``, drafts accepted while the samples match."""
    if not isinstance(fixed, bool):  # 'no' would be truthy and check the fixed step
        raise OptionError(f"fixed = {_repr_cut(fixed, 40)} must be True or False")
    sp = parse_sampling(request.sampling)
    _check(sp)
    ctx = request.context
    B, n = ctx.shape
    L = request.num_draft
    drafts = torch.empty(B, 0, dtype=torch.long)
    for _ in range(L):  # Medusa-style greedy drafts
        seq = torch.cat([ctx, drafts], dim=1)
        drafts = torch.cat([drafts, _scores(request.draft(seq)[:, -1], request.inputs)
                            .argmax(-1, keepdim=True)], dim=1)
    seq = torch.cat([ctx, drafts], dim=1)
    scores = _scores(request.target(seq)[:, n:], request.inputs)  # [B, S, V]
    stateful = SamplingParams(repetition_penalty=sp.repetition_penalty,
                              grammar=sp.grammar) if sp is not None else None
    warpers = None
    if sp is not None:
        warpers = SamplingParams(temperature=sp.temperature, top_k=sp.top_k, top_p=sp.top_p,
                                 order="transformers")
    next_ids = torch.empty(B, L + 1, dtype=torch.long)
    for j in range(L + 1):
        s = scores[:, j]
        if stateful is not None and stateful.stateful:
            history = seq[:, :n + j] if fixed else ctx  # as released: input_ids, every j
            probs = process_rows(s, stateful, "logits", history=history)
        else:
            probs = torch.softmax(s, dim=-1)
        if warpers is not None and not warpers.identity:
            probs = process_rows(probs, warpers)
        if warpers is not None and warpers.greedy:
            next_ids[:, j] = probs.argmax(-1)
        else:
            e = torch.empty_like(probs).exponential_(1, generator=request.generator)
            next_ids[:, j] = (probs / e).argmax(-1)
    match = next_ids[:, :L] == drafts
    accepted = torch.where(match.all(1), torch.full((B,), L),
                           torch.argmin(match.to(torch.int8), dim=1))
    out = torch.full((B, L + 1), -1, dtype=torch.long)
    for b in range(B):
        k = int(accepted[b]) + 1
        out[b, :k] = next_ids[b, :k]
    return out
