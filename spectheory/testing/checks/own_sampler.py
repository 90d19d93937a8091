"""spectheory's own sampler for any registered verifier, in the canonical signature
([`make_sampler`][spectheory.testing.checks.own_sampler.make_sampler]): the reference a check of the
kit itself runs, and the sampler the benchmarks time.
"""

from __future__ import annotations

from typing import Any, Callable

from ...runtime._lazy import torch

from ...registry import plan
from ...runtime.errors import InputError, SpectheoryError, check_arrays
from ...sampling import sample_output
from .rows import DRAFT_ROW_TOL, _as_law, _check_draft_rows


def _one_law_draw(law, n: int, u: torch.Tensor):
    """(k, tau, Y) [n] from one law (batch 1) with uniforms [n, 2]; the same arithmetic as
    [`sample_output`][spectheory.sampling.sample_output] on n copies of the law, at the cost of one
    row."""
    stop, corr = law
    K, L1 = stop.shape[1], stop.shape[2]
    V = corr.shape[-1]
    cdf = torch.cumsum(stop.reshape(1, K * L1).to(torch.float64), dim=-1)
    j = torch.searchsorted(cdf.expand(n, -1).contiguous(),
                           (u[:, 0] * cdf[0, -1]).unsqueeze(-1), right=True).squeeze(-1)
    j = j.clamp(max=K * L1 - 1)
    rows = corr.reshape(K * L1, V).to(torch.float64)
    y = torch.empty(n, dtype=torch.long, device=u.device)
    for jj in torch.unique(j).tolist():
        sel = j == jj
        c = torch.cumsum(rows[jj], dim=-1)
        y[sel] = torch.searchsorted(c, u[sel, 1] * c[-1], right=True).clamp(max=V - 1)
    return j // L1, j % L1, y


def _unique_rows(flat: torch.Tensor):
    """``torch.unique(flat, dim=0, return_inverse=True)`` for ``flat [m, w]``, the same distinct
    rows and inverse, faster where rows repeat: on the CPU, with every entry finite and no -0.0
    (where two rows are equal exactly when their bytes are), the rows are grouped by their bytes
    (one numpy sort of m keys) and torch.unique orders the groups' first rows, so that the
    sorting by rows runs on the distinct rows only. Anything else goes to torch.unique."""
    if flat.device.type != "cpu" or flat.dim() != 2 or flat.shape[1] == 0 \
            or not flat.dtype.is_floating_point or not bool(torch.isfinite(flat).all()) \
            or bool(((flat == 0) & torch.signbit(flat)).any()):
        return torch.unique(flat, dim=0, return_inverse=True)
    import numpy as np

    a = flat.contiguous().numpy()
    keys = a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).ravel()
    _, first, group = np.unique(keys, return_index=True, return_inverse=True)
    uniq, order = torch.unique(flat[torch.as_tensor(first)], dim=0, return_inverse=True)
    return uniq, order[torch.as_tensor(group.reshape(-1))]


def _is_repeat(x: torch.Tensor) -> bool:
    return x.shape[0] > 1 and x.stride(0) == 0


def _tensors(drafts, q, p, name: str):
    """The arguments as tensors (a numpy array or a list is read as one), or one line."""
    out = []
    for what, x in (("drafts", drafts), ("q", q), ("p", p)):
        if not isinstance(x, torch.Tensor):
            try:
                x = torch.as_tensor(x)
            except (TypeError, ValueError, RuntimeError):
                raise InputError(f"spectheory's {name} sampler: {what} must be a tensor (the "
                                 f"canonical signature), not {type(x).__name__}") from None
        out.append(x)
    return out


def make_sampler(verifier: Any = "block", paths: int | None = None) -> Callable:
    """spectheory's own sampler for any verifier, in the canonical signature.

    The law comes from ``get_verifier(verifier).law`` and the draw from
    [`sample_output`][spectheory.sampling.sample_output] (inverse CDF, two uniforms per row). With
    ``paths`` K > 1 the returned sampler takes the K-path form and returns
    ``(path, accepted, token)``. When all of drafts, q and p are one row repeated by a stride-0 view
    (``x[:1].expand(n, ...)``, as [`check_sampler`][spectheory.testing.checks.sampler.check_sampler]
    hands them over at large vocabularies), or a small batch repeats rows, the law of each distinct
    input is computed once; the draws are the same. The sampler carries ``repeat_aware = True``, so
    [`check_sampler`][spectheory.testing.checks.sampler.check_sampler] hands it each draft row's
    repeats in one call. Its inputs are checked as a check's draft rows are: tensors of the
    canonical shapes, drafted ids in the vocabulary, rows that are distributions (float16 and
    bfloat16 rows within `DRAFT_ROW_TOL_LOW` of summing to 1, then read in float64 divided by
    their sums); else one line (`InputError`, `SpectheoryError`), which a sampler of yours that
    calls it reports as its own.
    """
    how = plan(verifier, paths)
    spec, K = how.spec, how.paths

    def sampler(drafts, q, p, generator=None):
        drafts, q, p = _tensors(drafts, q, p, spec.name)
        check_arrays(drafts, q, p, f"spectheory's {spec.name} sampler", paths=K > 1)
        if K == 1:
            d3, q3, p3 = drafts.unsqueeze(1), q.unsqueeze(1), p.unsqueeze(1)
        else:
            d3, q3, p3 = drafts, q, p
        n = d3.shape[0]
        repeat = _is_repeat(drafts) and _is_repeat(q) and _is_repeat(p)
        m = 1 if repeat else n  # a row repeated by a stride-0 view is checked once
        try:
            _check_draft_rows(d3[:m], q3[:m], p3[:m])
        except SpectheoryError as exc:
            if "the p row" not in str(exc):
                raise
            # the kit's sampler takes probabilities; a check run with inputs="logits" hands the
            # sampler the target's logits (negative entries, sums off 1)
            raise type(exc)(f"{exc} (make_sampler's samplers take probabilities: a check with "
                            f"inputs='logits' hands the sampler logits)") from None
        if str(q3.dtype) not in DRAFT_ROW_TOL or str(p3.dtype) not in DRAFT_ROW_TOL:
            q3, p3 = _as_law(q3), _as_law(p3)  # float16 rows: in float64, the law they round
        if repeat:
            law = spec.law(d3[:1], q3[:1], p3[:1])
            u = torch.rand(n, 2, generator=generator, dtype=torch.float64, device=q.device)
            k, tau, y = _one_law_draw(law, n, u)
        elif n > 256:
            # repeated rows (as in a check): the law of each distinct input once, in slices of
            # at most 2^23 input floats (so that the cost a row does not change with the batch)
            step = max(1, 2**20 // (q3[0].numel() + p3[0].numel()))
            stops, corrs = [], []
            for s0 in range(0, n, step):
                dd, qq, pp = d3[s0:s0 + step], q3[s0:s0 + step], p3[s0:s0 + step]
                m = dd.shape[0]
                flat = torch.cat([dd.reshape(m, -1).to(qq.dtype), qq.reshape(m, -1),
                                  pp.reshape(m, -1)], dim=1)
                uniq, inv = _unique_rows(flat)
                first = torch.zeros(len(uniq), dtype=torch.long, device=inv.device)
                first.scatter_(0, inv, torch.arange(m, device=inv.device))
                law = spec.law(dd[first], qq[first], pp[first])
                stops.append(torch.as_tensor(law.stop)[inv])
                corrs.append(torch.as_tensor(law.correction)[inv])
            stop = stops[0] if len(stops) == 1 else torch.cat(stops)
            corr = corrs[0] if len(corrs) == 1 else torch.cat(corrs)
            k, tau, y = sample_output((stop, corr), generator)
        else:
            k, tau, y = sample_output(spec.law(d3, q3, p3), generator)
        return (tau, y) if K == 1 else (k, tau, y)

    sampler.repeat_aware = True
    sampler.__name__ = f"spectheory_{spec.name}_sampler"
    sampler.__doc__ = f"spectheory's sampler of {spec.name} ({K} path{'s' if K > 1 else ''})."
    return sampler

