"""Per-draft route (one path): the verifier evaluated once on every draft of the sequence tree.

For an instance (draft q, target p, block length L) and a verifier with law
(P(tau = i | X), correction_i(. | X)), the route evaluates the verifier once on the batch of all
V**L drafts below each context (in chunks; float64 numpy or torch, or numpy Fractions in exact
mode) and forms

* the pmf of tau:        P(tau = i) = sum_X q(X) P(tau = i | X);
* the emitted block law: E_{i+1}(y^{i+1}) = sum_{X : X^i = y^i} q(X) P(tau = i | X)
  correction_i(y_{i+1} | X), the probability that the verifier outputs exactly the block y^{i+1}.

Both are held in a [`BlockLaw`][spectheory.engine.perdraft.BlockLaw], the one result of every
route (per-node, per-draft, joint-outcome, draft-tree), from which the output law follows
([`spectheory.engine.output`][spectheory.engine.output]). Validity: Sun et al.
(arXiv 2403.10444), section 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from ..runtime._lazy import torch

from ..runtime import backend as Bk
from ..law import validate_law
from ..registry import get_verifier
from .seqtree import path_probabilities, sequence_tokens

#: Elements of one [B, L+1, V] array per chunk in float mode (keeps the working set ~1 GiB).
CHUNK_ELEMENTS = 2**22


@dataclass
class BlockLaw:
    """Exact output-block law below C contexts.

    ``tau_pmf`` [C, L+1]; ``emitted[j]`` [C * V**j] for j = 1..L+1 (index 0 unused): probability
    that the verifier's output block is exactly y^j (j = tau + 1 tokens), per context.
    """

    tau_pmf: Any
    emitted: list


def _segment_sum(x, seg: int, chunk: int):
    """Sum consecutive groups of ``seg`` rows of x [chunk, ...]; either seg | chunk or chunk | seg."""
    if seg <= chunk:
        return Bk.sum(x.reshape((chunk // seg, seg) + tuple(x.shape[1:])), axis=1)
    return Bk.sum(x, axis=0, keepdims=True)


def _chunk_size(n_contexts: int, V: int, L: int, exact: bool) -> int:
    total = n_contexts * V**L
    if exact:
        return total
    per_draft = (L + 1) * V
    if V**L * per_draft <= CHUNK_ELEMENTS:
        # the largest divisor of n_contexts that fits (no divisor exceeds n_contexts: starting
        # there, not at millions for small V^L, keeps the search to a few steps)
        k = max(1, min(n_contexts, CHUNK_ELEMENTS // (V**L * per_draft)))
        while n_contexts % k:
            k -= 1
        return k * V**L
    c = L
    while c > 0 and V**c * per_draft > CHUNK_ELEMENTS:
        c -= 1
    return V**c


def block_output_law(verifier, q_levels, p_levels, V: int, L: int,
                     progress: Callable[[int], None] | None = None) -> BlockLaw:
    """Per-draft route (one path): evaluate ``verifier`` on every draft below C contexts and
    aggregate its law.

    ``q_levels[d]`` [C*V**d, V] for d = 0..L-1 and ``p_levels[d]`` for d = 0..L are the draft and
    target conditionals below each context (see [`levels`][spectheory.engine.seqtree.levels]).
    """
    spec = get_verifier(verifier)
    exact = Bk.is_exact(p_levels[0])
    C = p_levels[0].shape[0]
    like = p_levels[0]
    roots = Bk.full((C,), 1, like)
    qpath = path_probabilities(q_levels, roots)[L]  # q(X | context), [C*V**L]
    total = C * V**L
    chunk = _chunk_size(C, V, L, exact)
    tau_pmf = Bk.full((C, L + 1), 0, like)
    emitted = [None] + [Bk.full((C * V**i, V), 0, like) for i in range(L + 1)]
    for f0 in range(0, total, chunk):
        if Bk.is_torch(like):
            f = torch.arange(f0, f0 + chunk, device=like.device)
        else:
            f = np.arange(f0, f0 + chunk, dtype=np.int64)
        drafts = sequence_tokens(f, L, V)
        q = Bk.stack([q_levels[j][f // V ** (L - j)] for j in range(L)], axis=1)
        p = Bk.stack([p_levels[j][f // V ** (L - j)] for j in range(L + 1)], axis=1)
        law = validate_law(spec.law(Bk.expand_dims(drafts, 1), Bk.expand_dims(q, 1),
                                    Bk.expand_dims(p, 1)),
                           drafts.shape[0], 1, L, V, exact, Bk.expand_dims(drafts, 1), name=spec.name)
        stop, correction = law.stop[:, 0], law.correction[:, 0]
        weight = qpath[f0:f0 + chunk]
        wstop = Bk.mul(Bk.expand_dims(weight, 1), stop)  # [B, L+1]
        seg = V**L
        part = _segment_sum(wstop, seg, chunk)
        r0 = f0 // seg
        tau_pmf[r0:r0 + part.shape[0]] += part
        for i in range(L + 1):
            seg = V ** (L - i)
            contrib = Bk.mul(Bk.expand_dims(wstop[:, i], 1), correction[:, i, :])
            part = _segment_sum(contrib, seg, chunk)
            r0 = f0 // seg
            emitted[i + 1][r0:r0 + part.shape[0]] += part
        if progress is not None:
            progress(chunk)
    return BlockLaw(tau_pmf, [None] + [e.reshape(-1) for e in emitted[1:]])


__all__ = ["BlockLaw", "CHUNK_ELEMENTS", "block_output_law"]
