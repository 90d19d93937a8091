"""Exact law of a verifier's output, by enumerating the whole sequence tree.

For an instance (draft q, target p, block length L) and a single-path verifier with law
(P(tau = i | X), correction_i(. | X)), the engine evaluates the verifier once on the batch of all
V**L drafts (in chunks, float64 torch, or numpy Fractions in exact mode) and forms

* the pmf of tau:        P(tau = i) = sum_X q(X) P(tau = i | X);
* the emitted block law: E_{i+1}(y^{i+1}) = sum_{X : X^i = y^i} q(X) P(tau = i | X)
  correction_i(y_{i+1} | X), the probability that the verifier outputs exactly the block y^{i+1};
* the output law over V**(L+1) of "output block, then target sampling up to length L+1":
  A_1 = E_1,  A_{j+1}(y^{j+1}) = A_j(y^j) p(y_{j+1} | y^j) + E_{j+1}(y^{j+1});
* its total variation distance to the target law p(y^{L+1}) (zero iff the verifier is valid).

Applied iteration after iteration from every context, the same block law gives the exact law of
the first N generated tokens (:func:`multi_iteration_law`), which shows that composition is
lossless. Validity: Sun et al. (arXiv 2403.10444), section 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import torch

from . import backend as Bk
from .instances import Instance
from .law import Verifier
from .models import prefix_from_index
from .tree import check_size, levels, path_probabilities, sequence_tokens

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
        k = max(1, CHUNK_ELEMENTS // (V**L * per_draft))
        while n_contexts % k:
            k -= 1
        return k * V**L
    c = L
    while c > 0 and V**c * per_draft > CHUNK_ELEMENTS:
        c -= 1
    return V**c


def block_output_law(verifier: Verifier, q_levels, p_levels, V: int, L: int,
                     progress: Callable[[int], None] | None = None) -> BlockLaw:
    """Evaluate ``verifier`` on every draft below C contexts and aggregate its law.

    ``q_levels[d]`` [C*V**d, V] for d = 0..L-1 and ``p_levels[d]`` for d = 0..L are the draft and
    target conditionals below each context (see :func:`spectheory.tree.levels`).
    """
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
        if exact:
            f = np.arange(f0, f0 + chunk, dtype=np.int64)
        else:
            f = torch.arange(f0, f0 + chunk, device=like.device)
        drafts = sequence_tokens(f, L, V)
        q = Bk.stack([q_levels[j][f // V ** (L - j)] for j in range(L)], axis=1)
        p = Bk.stack([p_levels[j][f // V ** (L - j)] for j in range(L + 1)], axis=1)
        law = verifier(drafts, q, p)
        weight = qpath[f0:f0 + chunk]
        wstop = Bk.expand_dims(weight, 1) * law.stop  # [B, L+1]
        seg = V**L
        part = _segment_sum(wstop, seg, chunk)
        r0 = f0 // seg
        tau_pmf[r0:r0 + part.shape[0]] += part
        for i in range(L + 1):
            seg = V ** (L - i)
            contrib = Bk.expand_dims(wstop[:, i], 1) * law.correction[:, i, :]
            part = _segment_sum(contrib, seg, chunk)
            r0 = f0 // seg
            emitted[i + 1][r0:r0 + part.shape[0]] += part
        if progress is not None:
            progress(chunk)
    return BlockLaw(tau_pmf, [None] + [e.reshape(-1) for e in emitted[1:]])


def output_law(block: BlockLaw, p_levels, V: int, L: int):
    """Law [C, V**(L+1)] of the output block followed by target sampling up to length L+1."""
    C = p_levels[0].shape[0]
    A = block.emitted[1].reshape(C, V)
    for j in range(1, L + 1):
        cond = p_levels[j].reshape(C, V**j, V)
        A = (Bk.expand_dims(A, 2) * cond).reshape(C, V ** (j + 1)) + block.emitted[j + 1].reshape(
            C, V ** (j + 1))
    return A


def target_law(p_levels, upto: int):
    """Target law [C, V**upto] below each of C contexts (``p_levels`` from depth 0)."""
    C = p_levels[0].shape[0]
    roots = Bk.full((C,), 1, p_levels[0])
    return path_probabilities(p_levels[:upto], roots)[upto].reshape(C, -1)


def total_variation(a, b):
    """Half the L1 distance along the last axis."""
    return Bk.sum(Bk.abs(a - b), axis=-1) / 2


# ----------------------------------------------------------------------------- results


def _to_py(x):
    if isinstance(x, torch.Tensor):
        return x.item()
    if isinstance(x, Fraction):
        return x
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return x


@dataclass
class ExactAnalysis:
    """Exact analysis of one verifier on one instance (floats, or Fractions in exact mode)."""

    verifier: str
    vocab_size: int
    block_length: int
    exact: bool
    tau_pmf: list
    expected_accepted: Any
    block_efficiency: Any
    tv_to_target: Any
    output_law: Any = field(repr=False)
    target_law: Any = field(repr=False)
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        enc = (lambda v: str(v)) if self.exact else (lambda v: float(v))
        out = {
            "verifier": self.verifier,
            "vocab_size": self.vocab_size,
            "block_length": self.block_length,
            "expected_accepted": enc(self.expected_accepted),
            "block_efficiency": enc(self.block_efficiency),
            "tau_pmf": [enc(v) for v in self.tau_pmf],
            "tv_to_target": enc(self.tv_to_target),
        }
        out.update(self.extra)
        return out


def _progress_bar(total: int, enabled: bool, desc: str):
    if not enabled:
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="draft", unit_scale=True, leave=False)
    return bar.update, bar.close


def analyze(instance: Instance, verifier: Verifier, name: str | None = None,
            exact: bool | None = None, max_sequences: int | None = None,
            progress: bool = False, device="cpu") -> ExactAnalysis:
    """Exact tau pmf, E[tau], E[tau+1] and TV(output law, target law) of ``verifier``.

    ``exact=None`` follows the instance (exact iff its entries are Fractions). Float mode uses
    float64 torch on ``device``; exact mode uses numpy object arrays of Fractions.
    """
    V, L = instance.vocab_size, instance.block_length
    exact = instance.exact if exact is None else exact
    check_size(V ** (L + 1), "exact analysis", exact, max_sequences, f"V^(L+1) = {V}^{L + 1}")
    q_levels = levels(instance.draft, 0, L, exact, device)
    p_levels = levels(instance.target, 0, L + 1, exact, device)
    update, close = _progress_bar(V**L, progress, name or "exact")
    try:
        block = block_output_law(verifier, q_levels, p_levels, V, L, update)
    finally:
        close()
    out = output_law(block, p_levels, V, L)[0]
    tgt = target_law(p_levels, L + 1)[0]
    pmf = [_to_py(v) for v in block.tau_pmf[0]]
    zero = Fraction(0) if exact else 0.0
    e_tau = sum((i * v for i, v in enumerate(pmf)), zero)
    return ExactAnalysis(
        verifier=name or getattr(verifier, "__name__", "verifier"),
        vocab_size=V,
        block_length=L,
        exact=exact,
        tau_pmf=pmf,
        expected_accepted=e_tau,
        block_efficiency=e_tau + 1,
        tv_to_target=_to_py(total_variation(out, tgt)),
        output_law=out,
        target_law=tgt,
    )


def multi_iteration_law(instance: Instance, verifier: Verifier, n_tokens: int,
                        exact: bool | None = None, max_sequences: int | None = None,
                        device="cpu"):
    """Exact law of the first ``n_tokens`` generated tokens when the verifier runs iteration after
    iteration (each iteration drafts L tokens from the current context, verifies, appends the
    tau + 1 output tokens). Returns (generated law [V**N], target law [V**N], TV).

    Contexts deeper than the instance's tables use the models' order-D Markov extension
    (:class:`spectheory.models.TableModel`).
    """
    V, L = instance.vocab_size, instance.block_length
    N = int(n_tokens)
    if N < 1:
        raise ValueError("n_tokens must be >= 1")
    exact = instance.exact if exact is None else exact
    check_size(V ** (N - 1) * V ** (L + 1), "multi-iteration law", exact, max_sequences,
               f"V^(N-1) contexts x V^(L+1) = {V}^{N - 1 + L + 1}")
    p_top = levels(instance.target, 0, 1, exact, device)[0]
    like = p_top
    start = [Bk.full((V**n,), 0, like) for n in range(N)]
    start[0] = Bk.full((1,), 1, like)
    final = Bk.full((V**N,), 0, like)
    for n in range(N):
        q_levels = levels(instance.draft, n, L, exact, device)
        p_levels = levels(instance.target, n, L + 1, exact, device)
        block = block_output_law(verifier, q_levels, p_levels, V, L)
        C = V**n
        mass = start[n].reshape(C, 1)
        for j in range(1, L + 2):
            e = block.emitted[j].reshape(C, V**j) * mass
            if n + j < N:
                start[n + j] = start[n + j] + e.reshape(-1)
            else:
                keep = N - n
                final = final + Bk.sum(e.reshape(C, V**keep, V ** (j - keep)), axis=2).reshape(-1)
    tgt = target_law(levels(instance.target, 0, N, exact, device), N)[0]
    return final, tgt, _to_py(total_variation(final, tgt))


# ----------------------------------------------------------------------------- checker


@dataclass
class LosslessReport:
    """Verdict of :func:`check_lossless`. ``offending`` is the first output sequence (in
    lexicographic order) whose probability differs from the target's, with both probabilities."""

    lossless: bool
    tv: Any
    n_tokens: int
    exact: bool
    tolerance: float
    offending: tuple | None = None
    output_probability: Any = None
    target_probability: Any = None

    def __str__(self) -> str:
        if self.lossless:
            how = "exactly" if self.exact else f"within {self.tolerance:g}"
            return f"lossless {how} over {self.n_tokens} tokens (TV = {self.tv})"
        return (f"LOSSY over {self.n_tokens} tokens: TV = {float(self.tv):.6g}; first offending "
                f"sequence {self.offending}: output probability {self.output_probability} vs "
                f"target probability {self.target_probability}")


def check_lossless(verifier: Verifier, instance: Instance, exact: bool | None = None,
                   tol: float = 1e-12, n_tokens: int | None = None,
                   max_sequences: int | None = None) -> LosslessReport:
    """Exact verdict on whether ``verifier`` (any function with the law signature) is lossless.

    Compares the law of the output block followed by target sampling (``n_tokens`` = L+1, the
    default) or of the first ``n_tokens`` tokens over repeated iterations with the target law.
    In exact mode the verdict is exact (equality of rationals); in float mode a sequence offends
    when the probabilities differ by more than ``tol``.
    """
    exact = instance.exact if exact is None else exact
    V, L = instance.vocab_size, instance.block_length
    if n_tokens is None or n_tokens == L + 1:
        res = analyze(instance, verifier, exact=exact, max_sequences=max_sequences)
        out, tgt, tv, N = res.output_law, res.target_law, res.tv_to_target, L + 1
    else:
        out, tgt, tv = multi_iteration_law(instance, verifier, n_tokens, exact, max_sequences)
        N = n_tokens
    return lossless_report(out, tgt, tv, N, V, exact, tol)


def lossless_report(out, tgt, tv, n_tokens: int, vocab_size: int, exact: bool,
                    tol: float = 1e-12) -> LosslessReport:
    """Verdict from an output law and the target law over V**n_tokens sequences (shared by
    :func:`check_lossless` and the multi-path checker)."""
    N, V = n_tokens, vocab_size
    diff = Bk.abs(out - tgt)
    if exact:
        bad = np.flatnonzero(diff != 0)
    else:
        bad = torch.nonzero(diff > tol).reshape(-1).cpu().numpy()
    if len(bad) == 0:
        return LosslessReport(True, tv, N, exact, 0.0 if exact else tol)
    k = int(bad[0])
    return LosslessReport(False, tv, N, exact, 0.0 if exact else tol,
                          offending=prefix_from_index(k, N, V),
                          output_probability=_to_py(out[k]), target_probability=_to_py(tgt[k]))


def analysis_summary(res: ExactAnalysis) -> str:
    fmt = (lambda v: f"{v} (= {float(v):.6f})") if res.exact else (lambda v: f"{float(v):.6f}")
    return (f"{res.verifier}: E[tau] = {fmt(res.expected_accepted)}, block efficiency "
            f"E[tau+1] = {fmt(res.block_efficiency)}, TV to target = "
            f"{res.tv_to_target if res.exact else format(float(res.tv_to_target), '.3g')}")


__all__ = [
    "BlockLaw",
    "ExactAnalysis",
    "LosslessReport",
    "analysis_summary",
    "analyze",
    "block_output_law",
    "check_lossless",
    "lossless_report",
    "multi_iteration_law",
    "output_law",
    "target_law",
    "total_variation",
]
