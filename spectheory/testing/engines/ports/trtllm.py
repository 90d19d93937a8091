"""TensorRT-LLM's PyTorch-flow rejection sampling, ported to torch from its released sources.

Sources (NVIDIA/TensorRT-LLM): ``tensorrt_llm/_torch/pyexecutor/sampling_utils.py``
(``get_rejected_indices``, ``sample_rejected``) and ``tensorrt_llm/_torch/pyexecutor/sampler.py``
(``TorchSampler``'s ``_process_draft_tokens_rejection_sampling``, which calls them for a request
whose strategy is not greedy and which has draft logits). One request a call:

* the engine's names swap the paper's: ``p`` there is the **draft** probability of each drafted
  token and ``q`` the target's; ``accept_probs = minimum(1, q / p)``;
* a position is rejected when ``torch.rand(accept_probs.shape, generator=generator) >
  accept_probs``: accepted when u <= min(1, p_target / p_draft) with float32 u in [0, 1), so a coin
  of exactly 0 accepts a draft of target probability 0 (the class of SGLang #35771; 2^-24 a draw);
* the first rejected index is the accepted count n; at a rejection the next token is
  ``torch.multinomial(where(target - draft > 0, target - draft, 0), 1, generator)`` of row n
  (unnormalised: multinomial normalises); with no rejection the token the ordinary sampler drew at
  the position after the drafts (``add_token(..., step=num_accepted)``) follows.

The port returns what the request receives, ``(tokens [1, n + 1], n)``, instead of writing it into
the request. Stop criteria (end of sequence, maximum length) are not part of the rule and are left
out.
"""

from __future__ import annotations

import torch

from ..adapters import PORT_BUGS
from ....runtime.limits import shown as _repr_cut

__all__ = ["get_rejected_indices", "sample_rejected", "process_draft_tokens_rejection_sampling"]

_BUGS = PORT_BUGS


def _rows(x, name: str = "rows") -> torch.Tensor:
    """One request's rows [n, V] (a leading axis of 1, as the layout hands rows, is dropped);
    anything that is not float rows is refused in one line."""
    from ....runtime.errors import OptionError

    try:
        x = torch.as_tensor(x)
    except Exception:  # noqa: BLE001 - None, strings, ragged lists
        raise OptionError(f"TensorRT-LLM port: {name} must be float probability rows [n, V], "
                          f"not {type(x).__name__}") from None
    if x.dim() == 0 or not x.is_floating_point():
        raise OptionError(f"TensorRT-LLM port: {name} must be float probability rows [n, V], "
                          f"not {x.dtype} of shape {list(x.shape)}")
    return x.reshape(-1, x.shape[-1])


def _check_bug(bug) -> None:
    """A planted bug is one of `_BUGS` or None; a misspelt name ran the correct rule."""
    if bug is not None and bug not in _BUGS:
        from ....runtime.errors import OptionError

        raise OptionError(f"unknown bug {_repr_cut(bug, 40)}; choose from {', '.join(_BUGS)}")


def get_rejected_indices(draft_probs, target_probs, generator, draft_tokens, *, bug=None):
    """The rejected positions [k, 1] of one request (``get_rejected_indices``):
    ``draft_probs [L, V]``, ``target_probs [L(+1), V]``, ``draft_tokens`` (list of L ids or a
    tensor); u = ``torch.rand(L, generator=generator)``; rejected where u > min(1, target /
    draft) (``bug="coin-compare"``: where u < it; ``bug="target-row"``: the target read one row
    late)."""
    _check_bug(bug)
    d, t = _rows(draft_probs, "draft_probs"), _rows(target_probs, "target_probs")
    n = d.size(0)
    toks = torch.as_tensor(draft_tokens).reshape(-1)[:n].to(torch.long)
    idx = torch.arange(n)
    p = d[idx, toks]
    rows = (idx + 1).clamp(max=t.size(0) - 1) if bug == "target-row" else idx
    q = t[rows, toks]
    accept = torch.minimum(torch.ones((), dtype=q.dtype), q / p)
    u = torch.rand(accept.shape, generator=generator, device=accept.device)
    return ((u < accept) if bug == "coin-compare" else (u > accept)).nonzero()


def sample_rejected(draft_probs, target_probs, generator, num_accepted: int, *, bug=None) -> int:
    """The token after ``num_accepted`` accepted drafts (``sample_rejected``): multinomial of
    max(target - draft, 0) at row ``num_accepted`` (``bug="correction-from-p"``: of the target
    row; ``"residual-row"``: of the next row's difference)."""
    _check_bug(bug)
    d, t = _rows(draft_probs, "draft_probs"), _rows(target_probs, "target_probs")
    k = num_accepted
    if bug == "residual-row":
        k = min(k + 1, d.size(0) - 1)
    new = t[num_accepted] if bug == "correction-from-p" else t[k] - d[k]
    new = torch.where(new > 0, new, 0.0)
    return int(torch.multinomial(new, num_samples=1, generator=generator).squeeze(-1))


def process_draft_tokens_rejection_sampling(draft_probs, target_probs, generator, draft_tokens,
                                            bonus_token, *, bug: str | None = None):
    """One request's rejection step (``_process_draft_tokens_rejection_sampling``):
    ``draft_probs [L, V]`` (the draft's processed probabilities), ``target_probs [L, V]`` (the
    target's at the draft positions), ``generator`` (the sampler's ``torch.Generator``),
    ``draft_tokens`` (L ids), ``bonus_token`` (the ordinary sampler's token at the position after
    the drafts) -> ``(tokens [1, n + 1], n)``."""
    _check_bug(bug)
    toks = torch.as_tensor(draft_tokens).reshape(-1).to(torch.long)
    rejected = get_rejected_indices(draft_probs, target_probs, generator, toks, bug=bug)
    if rejected.numel() == 0:
        n = toks.numel()
        last = int(torch.as_tensor(bonus_token).reshape(-1)[0])
    else:
        n = int(rejected[0].item())
        last = sample_rejected(draft_probs, target_probs, generator, n, bug=bug)
    out = torch.cat([toks[:n], torch.tensor([last], dtype=torch.long)])
    return out.unsqueeze(0), n
