"""One generic sampling step on top of a verifier's law.

Given a law ([`spectheory.law`][spectheory.law]; the K-path form ``stop [B, K, L+1]``,
``correction [B, K, L+1, V]``, or the single-path form without the path axis), draw the path and tau
jointly, (k_b, tau_b) ~ stop[b], and then Y_b ~ correction[b, k_b, tau_b]
([`sample_output`][spectheory.sampling.sample_output]). Works on any torch device and dtype; the
randomness comes from an optional ``torch.Generator`` (or explicit uniforms, for replaying the draws
of another implementation) and uses inverse-CDF sampling, so the same uniforms give the same draws.
"""

from __future__ import annotations

from .runtime._lazy import torch

from .law import Law, LawError
from .runtime.errors import SpectheoryError, check_generator
from .runtime.limits import shown as _repr_cut


def inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Index k with CDF(k-1) <= u < CDF(k) along the last axis; probs [B, n], u [B]. A primitive:
    nothing is checked (a NaN or out-of-range u gives some index); `sample_output` checks its law
    and uniforms before it calls this, and the kit's
    [`inverse_cdf`][spectheory.testing.checks.seeds.inverse_cdf] checks both."""
    cdf = torch.cumsum(probs, dim=-1)
    k = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).squeeze(-1)
    return k.clamp(max=probs.shape[-1] - 1)


def sample_output(law: Law, generator: torch.Generator | None = None,
                  uniforms: torch.Tensor | None = None):
    """Draw (path k [B], tau [B], Y [B]) from a batched law of either form.

    (k, tau) are drawn jointly from ``stop`` flattened over (K, L+1) with the uniform
    ``uniforms[:, 0]``, then Y from the chosen correction row with ``uniforms[:, 1]``
    (``uniforms`` [B, 2] replaces the generator). For the single-path form k is 0.

    What is read is checked first: a law of the wrong form (torch tensors ``stop [B, L+1]``,
    ``correction [B, L+1, V]``, or with a path axis), uniforms that are not [B, 2] numbers in
    [0, 1), and a stop row or a chosen correction row that is not a distribution (a non-finite
    or negative entry, a sum off 1 by more than `sampling_tolerance`) raise
    [`LawError`][spectheory.law.LawError] in one line: a sample is never drawn from a table that
    is not a law (the draw scales by the row's total, which would hide such a row).
    """
    check_generator(generator, "sample_output: ")
    try:
        stop, corr = law
    except (TypeError, ValueError):
        raise LawError("shape", f"a law is (stop, correction), not {type(law).__name__}") \
            from None
    if not (isinstance(stop, torch.Tensor) and isinstance(corr, torch.Tensor)):
        raise LawError("shape", f"a law to sample from is torch tensors, not "
                       f"{type(stop).__name__}, {type(corr).__name__}")
    if stop.dim() == 2:
        stop, corr = stop.unsqueeze(1), corr.unsqueeze(1)
    if stop.dim() != 3 or corr.dim() != 4 or tuple(corr.shape[:3]) != tuple(stop.shape) \
            or not stop.is_floating_point() or not corr.is_floating_point():
        raise LawError("shape", f"stop {list(stop.shape)} ({stop.dtype}) and correction "
                       f"{list(corr.shape)} ({corr.dtype}) do not fit stop [B, (K,) L+1], "
                       "correction [B, (K,) L+1, V] of float probabilities")
    Bsz, K, L1 = stop.shape
    if uniforms is None:
        uniforms = torch.rand(Bsz, 2, generator=generator, dtype=torch.float64,
                              device=stop.device)
    elif not (isinstance(uniforms, torch.Tensor) and tuple(uniforms.shape) == (Bsz, 2)
              and uniforms.is_floating_point()
              and bool(((uniforms >= 0) & (uniforms < 1)).all())):
        raise LawError("shape", f"uniforms must be a float tensor [B, 2] = [{Bsz}, 2] of "
                       f"numbers in [0, 1), got {_described(uniforms)}")
    flat = stop.reshape(Bsz, K * L1).to(torch.float64)
    _check_rows(flat, stop.dtype, "stop")
    j = inverse_cdf(flat, uniforms[:, 0].to(torch.float64))
    rows = corr.reshape(Bsz, K * L1, corr.shape[-1])[torch.arange(Bsz, device=corr.device), j]
    rows = rows.to(torch.float64)
    _check_rows(rows, corr.dtype, "correction")
    y = inverse_cdf(rows, uniforms[:, 1].to(torch.float64))
    return j // L1, j % L1, y


def sampling_tolerance(n: int, dtype) -> float:
    """How far from 1 a row of ``n`` entries of ``dtype`` may sum when sampled from: 4 n eps of
    its dtype (a row normalised in float32 over 151,936 tokens is off by up to about 1e-3), at
    least 1e-6 and at most 1e-2."""
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 1e-16
    return min(max(4 * n * eps, 1e-6), 1e-2)


def _check_rows(rows, dtype, what: str) -> None:
    """Refuse rows [B, n] (float64 copies of rows of ``dtype``) that are not distributions."""
    tol = sampling_tolerance(rows.shape[-1], dtype)
    sums = rows.sum(dim=-1)
    ok = torch.isfinite(sums) & (rows.amin(dim=-1) >= 0) & ((sums - 1).abs() <= tol)
    if bool(ok.all()):
        return
    b = int(torch.nonzero(~ok)[0, 0])
    row = rows[b]
    if not bool(torch.isfinite(row).all()):
        kind, why = "nan", "has a non-finite entry"
    elif bool((row < 0).any()):
        kind, why = "negative", f"has a negative entry ({float(row[row < 0][0]):.6g})"
    else:
        kind, why = f"{'stop' if what == 'stop' else 'correction'}-sum", \
            f"sums to {float(sums[b]):.9g}, not 1 within {tol:g}"
    raise LawError(kind, f"cannot sample: the {what} row of batch row {b} {why}; a law's rows "
                   "must be distributions", (b,))


def _described(x) -> str:
    shape = getattr(x, "shape", None)
    return f"{type(x).__name__} {list(shape)}" if shape is not None else type(x).__name__


def sample_law(law: Law, generator: torch.Generator | None = None,
               uniforms: torch.Tensor | None = None):
    """(tau [B], Y [B]) from a single-path law: [`sample_output`][spectheory.sampling.sample_output]
    without the path."""
    _, tau, y = sample_output(law, generator, uniforms)
    return tau, y


#: The K-path name of [`sample_output`][spectheory.sampling.sample_output].
sample_multi_law = sample_output


def output_block(drafts: torch.Tensor, tau: torch.Tensor, y: torch.Tensor) -> list[tuple]:
    """The emitted blocks (X_1..X_tau, Y) as tuples of token ids.

    drafts: [B, L] token ids; tau: [B] accepted counts in 0..L; y: [B] the last tokens."""
    d, t, last = drafts.tolist(), tau.tolist(), y.tolist()  # Python ints: no tensor indexing
    if not (isinstance(d, list) and isinstance(t, list) and isinstance(last, list)
            and len(d) == len(t) == len(last)):
        raise SpectheoryError(f"output_block: drafts [B, L], tau [B] and y [B] disagree on B "
                              f"(shapes {list(drafts.shape)}, {list(tau.shape)}, "
                              f"{list(y.shape)})")
    L = len(d[0]) if d else 0
    for k in t:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= L:
            raise SpectheoryError(f"output_block: tau holds {_repr_cut(k, 40)}, not an accepted count in "
                                  f"0..L = 0..{L}")
    return [tuple(row[: int(k)]) + (int(c),) for row, k, c in zip(d, t, last)]
