"""Sampling K draft paths under a drafting scheme, and a verifier's output on them.

The Monte Carlo counterpart of the joint-outcome law
([`spectheory.engine.joint`][spectheory.engine.joint]): draft outcomes drawn under ``iid``,
``norep`` or ``hub`` drafting (the schemes of [`spectheory.registry.DRAFTING`][spectheory.registry]),
and one generic sampling step ([`sample_output`][spectheory.sampling.sample_output]) on the
verifier's law at those drafts.
"""

from __future__ import annotations

from ..runtime._lazy import torch

from ..inputs.instances import Instance, check_instance
from ..runtime.errors import SpectheoryError, check_generator, is_integer
from ..runtime.limits import check_memory
from ..registry import hub_tokens
from .joint import _check_args, draft_rows
from .seqtree import levels
from ..runtime.limits import shown as _repr_cut


def sample_drafts(instance: Instance, paths: int, n: int, drafting: str = "iid",
                  generator: torch.Generator | None = None, device="cpu"):
    """n joint draft outcomes [n, K, L] (torch long) under a drafting scheme (float models)."""
    check_instance(instance)
    _check_args(paths, drafting)
    V, L, K = instance.vocab_size, instance.block_length, paths
    if not is_integer(n) or n < 1:
        raise SpectheoryError(f"n = {_repr_cut(n, 40)} draft outcomes must be a positive integer")
    n = int(n)
    check_generator(generator)
    # the outcomes [n, K, L] (int64), the tokens used [n, V] and the rows drawn from [n, V]
    check_memory(n * (8 * K * L + 9 * V), f"sampling n = {n:,} draft outcomes",
                 "sample fewer outcomes at a time")
    q_levels = levels(instance.draft, 0, L, False, device)
    out = torch.zeros(n, K, L, dtype=torch.long, device=device)
    root = q_levels[0][0]
    used = torch.zeros(n, V, dtype=torch.bool, device=device)
    m = int((root > 0).sum())
    for k in range(K):
        if (drafting == "norep" and k >= m) or (drafting == "hub" and k >= 1 and m == 1):
            out[:, k] = out[:, 0]
            continue
        row = root.expand(n, V)
        if drafting == "norep":
            row = torch.where(used, torch.zeros_like(row), row)
        if drafting == "hub" and k == 1:  # the companion of a drafted hub, else the hub
            a = hub_tokens(root)
            row = torch.where(torch.arange(V, device=device) == a, torch.zeros_like(row), row)
        x = torch.multinomial(row, 1, generator=generator)[:, 0]
        if drafting == "hub" and k == 1:
            x = torch.where(out[:, 0, 0] == a, x, a)
        used[torch.arange(n, device=device), x] = True
        node = x
        out[:, k, 0] = x
        for d in range(1, L):
            y = torch.multinomial(q_levels[d][node], 1, generator=generator)[:, 0]
            out[:, k, d] = y
            node = node * V + y
    return out


def sample_outputs(instance: Instance, verifier, paths: int, n: int,
                   drafting: str | None = None, generator: torch.Generator | None = None):
    """Run the verifier on n sampled draft outcomes: returns (drafts, path k, tau, Y) tensors."""
    from ..registry import plan
    from ..sampling import sample_output

    how = plan(verifier, paths, drafting)
    paths, drafting = how.paths, how.drafting

    V, L = instance.vocab_size, instance.block_length
    drafts = sample_drafts(instance, paths, n, drafting, generator)
    q_levels = levels(instance.draft, 0, L, False)
    p_levels = levels(instance.target, 0, L + 1, False)
    # the law at a draft outcome is a function of the outcome (its rows are the instance's):
    # evaluated once per distinct outcome (at most V^(K L)), then read back per sample
    distinct, back = drafts, torch.arange(n)
    if n > 0:
        distinct, back = torch.unique(drafts.reshape(n, paths * L), dim=0, return_inverse=True)
        distinct = distinct.reshape(-1, paths, L)
    q, p = draft_rows(q_levels, p_levels, distinct, L, V)
    stop, corr = how.spec.law(distinct, q, p)
    k, tau, y = sample_output((stop[back], corr[back]), generator)
    return drafts, k, tau, y


__all__ = ["sample_drafts", "sample_outputs"]
