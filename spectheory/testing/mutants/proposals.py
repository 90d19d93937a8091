"""Proposal mismatches: the verifier is right, but the q handed to it is not the sampling law.

In each bug below the drafts are sampled from one distribution (the *actual* draft law) while the
verifier is handed another (the *reported* q). Two ways to catch it:

* [`check_proposal`][spectheory.testing.checks.sampler.check_proposal] on the draft sampler alone
  (``draft_sampler(q_rows, generator) -> (tokens, q_reported)``): the token counts do not follow the
  reported q;
* the exact law of the composed system: an instance whose draft model is the *actual* sampling law,
  analysed with a verifier that looks up the *reported* rows
  ([`reported_q_verifier`][spectheory.testing.mutants.proposals.reported_q_verifier]).
  [`check_lossless`][spectheory.engine.lossless.check_lossless] then gives the exact TV and the first
  offending sequence.

Replicas: greedy drafting handed the soft q (Hugging Face transformers #30778 -> #32867, reverted
by #33534), top-k-filtered drafts handed the raw q (Hugging Face transformers #47932), drafts
sampled from bfloat16 logits with the rejection computed from float32 probabilities (DeepSpec #31).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

from ...runtime import backend as B
from ...inputs.instances import Instance
from ...inputs.models import TableModel
from ...registry import VerifierSpec, get_verifier

__all__ = [
    "greedy_draft_sampler", "topk_draft_sampler", "bf16_draft_sampler", "reported_q_verifier",
    "greedy_model", "topk_model", "bf16_model", "greedy_instance", "topk_instance",
    "bf16_instance", "bf16_probs", "topk_filter", "LOGIT_LEVEL",
]


# ----------------------------------------------------------------------------- draft samplers


def greedy_draft_sampler(q_rows: torch.Tensor, generator=None):
    """Hugging Face transformers #32867: the assistant drafts greedily (argmax of q) but hands the
    verifier its soft distribution q. Returns (tokens [B], q_reported [B, V])."""
    return torch.argmax(q_rows, dim=-1), q_rows


def topk_filter(q_rows, k: int):
    """Rows restricted to their k most likely tokens and renormalised (ties: lower id first)."""
    order = torch.sort(q_rows, dim=-1, descending=True, stable=True).indices[..., :k]
    kept = torch.zeros_like(q_rows).scatter(-1, order, q_rows.gather(-1, order))
    return kept / kept.sum(-1, keepdim=True)


def topk_draft_sampler(k: int = 50):
    """Hugging Face transformers #47932: drafts are sampled from the top-k-filtered
    distribution (default top_k = 50) while the verifier is handed the raw q."""

    def sampler(q_rows: torch.Tensor, generator=None):
        filt = topk_filter(q_rows, min(k, q_rows.shape[-1]))
        return torch.multinomial(filt, 1, generator=generator)[:, 0], q_rows

    sampler.__name__ = f"topk{k}_draft_sampler"
    sampler.__doc__ = topk_draft_sampler.__doc__
    return sampler


#: Level of the raw logits in [`bf16_probs`][spectheory.testing.mutants.proposals.bf16_probs]:
#: logits log q + LOGIT_LEVEL. A softmax does not see the shift, bfloat16 rounding does (its step is
#: 2^-7 of the magnitude: 0.125 in [16, 32)).
LOGIT_LEVEL = 16.0


def bf16_probs(q_rows, level: float = LOGIT_LEVEL):
    """softmax of the bfloat16-rounded logits log q + ``level``, in float64: the law drafts
    sampled from bfloat16 logits follow. ``level`` stands for the size of raw LM-head logits
    (0 gives log-probabilities, whose rounding moves q by about 1e-3)."""
    logits = (torch.log(q_rows.to(torch.float64)) + level).to(torch.bfloat16).to(torch.float64)
    return torch.softmax(logits, dim=-1)


def bf16_draft_sampler(q_rows: torch.Tensor, generator=None):
    """DeepSpec #31: drafts sampled from bfloat16 logits, the rejection computed with float32
    probabilities (the reported q is the float32 softmax, here the row itself)."""
    return torch.multinomial(bf16_probs(q_rows), 1, generator=generator)[:, 0], q_rows


# ----------------------------------------------------------------------------- composed law


def _prefix_rows(model: TableModel, drafts, like, L: int):
    """Rows of ``model`` along every drafted prefix: [B, L, V] in the backend of ``like``."""
    exact = B.is_exact(like)
    m = model.to_exact() if exact else model.to_float()
    V = m.vocab_size
    d = np.asarray(drafts.cpu() if isinstance(drafts, torch.Tensor) else drafts, dtype=np.int64)
    rows = []
    n = np.zeros(d.shape[0], dtype=np.int64)
    for i in range(L):
        rows.append(np.asarray(m.level(i))[n])
        n = n * V + d[:, i]
    out = np.stack(rows, axis=1)
    if exact:
        return B.to_exact(out)
    return torch.as_tensor(out, dtype=like.dtype, device=like.device)


def reported_q_verifier(reported: TableModel, verifier="token", name: str | None = None
                        ) -> VerifierSpec:
    """A single-path law function that runs ``verifier`` with the rows of ``reported`` in place of
    the rows it is given. Analysed on an instance whose draft model is the law the drafts are
    really sampled from, its exact output law is that of the buggy system (drafts from one law,
    verifier told another). Drafts are read as starting at the root context.
    """
    spec = get_verifier(verifier)

    def law(drafts, q, p):
        return spec.function(drafts, _prefix_rows(reported, drafts, q, drafts.shape[-1]), p)

    return VerifierSpec(name or f"{spec.name}-with-reported-q", law, paths=1, lossless=False,
                        exact=spec.exact,
                        summary=f"LOSSY: {spec.name} handed a q other than the drafts' law")


def _map_model(model: TableModel, fn) -> TableModel:
    return TableModel(model.vocab_size, tuple(fn(t) for t in model.tables))


def greedy_model(model: TableModel) -> TableModel:
    """One-hot argmax rows (lowest id on ties), exact when ``model`` is."""
    def fn(t):
        arg = np.argmax(np.asarray(t, dtype=np.float64), axis=1)
        eye = np.eye(t.shape[1], dtype=np.int64)[arg]
        return B.to_exact(eye) if t.dtype == object else eye.astype(np.float64)
    return _map_model(model, fn)


def topk_model(model: TableModel, k: int) -> TableModel:
    """Rows restricted to their k most likely tokens and renormalised (exact when ``model`` is)."""
    def fn(t):
        order = np.argsort(-np.asarray(t, dtype=np.float64), axis=1, kind="stable")[:, :k]
        mask = np.zeros(t.shape, dtype=bool)
        np.put_along_axis(mask, order, True, axis=1)
        kept = np.where(mask, t, Fraction(0) if t.dtype == object else 0.0)
        if t.dtype == object:
            kept = kept.astype(object)
        return kept / kept.sum(axis=1, keepdims=True)
    return _map_model(model, fn)


def bf16_model(model: TableModel, level: float = LOGIT_LEVEL) -> TableModel:
    """Rows softmax(bfloat16(log q + level)) in float64 (what bfloat16 drafting samples from)."""
    return _map_model(model.to_float(),
                      lambda t: bf16_probs(torch.as_tensor(t), level).numpy())


def greedy_instance() -> tuple[Instance, TableModel]:
    """The two-token example of #32867: target p = (3/5, 2/5), soft draft q = (4/5, 1/5), L = 1.
    Returns (instance with the greedy draft law, the soft model the verifier is handed); the
    first token's output law is (3/4, 1/4)."""
    from ...inputs.instances import instance_from_dict

    soft = {"vocab_size": 2, "block_length": 1, "target": ["3/5", "2/5"], "draft": ["4/5", "1/5"]}
    inst = instance_from_dict(soft, exact=True)
    return Instance(2, 1, inst.target, greedy_model(inst.draft)), inst.draft


def topk_instance(seed: int = 0, V: int = 4, L: int = 2, k: int = 2
                  ) -> tuple[Instance, TableModel]:
    """A random prefix-dependent instance (exact, denominator 60) whose drafts follow the top-k
    filtered draft model; returns (instance, the raw draft model handed to the verifier)."""
    from ...inputs.random_instances import random_instance

    raw = random_instance(V, L, seed, denominator=60)
    return Instance(V, L, raw.target, topk_model(raw.draft, k)), raw.draft


def bf16_instance(seed: int = 0, V: int = 8, L: int = 2, alpha: float = 1.0,
                  level: float = LOGIT_LEVEL) -> tuple[Instance, TableModel]:
    """A random float instance whose drafts follow softmax(bfloat16(log q + level)); returns
    (instance, the float draft model q handed to the verifier)."""
    from ...inputs.random_instances import random_instance

    raw = random_instance(V, L, seed, alpha=alpha)
    return Instance(V, L, raw.target, bf16_model(raw.draft, level)), raw.draft
