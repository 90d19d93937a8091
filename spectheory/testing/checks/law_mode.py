"""``mode="law"`` of the sampler check: for fixed draft rows, each repeated, the empirical law of
(tau, Y) per draft row against the named verifier's exact conditional law (Pearson chi-square,
cells of expected count below `MIN_EXPECTED` pooled per row, Bonferroni over one global and one
per-row test; `spectheory.testing.statistics.stats`).
"""

from __future__ import annotations

import numpy as np

from ...runtime._lazy import torch

from ...law import LawError, _real_dtype, dtype_tolerance, law_form
from ...runtime.errors import SpectheoryError, TooFewSamplesError
from ..statistics import stats
from .calls import (_cells, _chunk, _collect_law, _failed, _reference_law, _report, _row_counts,
                    _split, _tokens)
from .report import MIN_EXPECTED
from .rows import _fixed_rows


def _law_mode(sampler, how, instances, samples, alpha, seed, draft_rows, max_batch, proc=None):
    spec, K = how.spec, how.paths
    g = torch.Generator().manual_seed(seed)
    all_rows = [_fixed_rows(inst, K, how.drafting, draft_rows, g) for inst in instances]
    n_rows = sum(r.drafts.shape[0] for r in all_rows)
    per_row = _split(samples, n_rows)
    if min(per_row) < 1:
        raise TooFewSamplesError(f"samples = {samples} is fewer than the {n_rows} draft rows", n_rows)
    tests, laws = [], []
    worst = None  # (|z|, Cell)
    impossible = None
    offset = 0
    sg = torch.Generator().manual_seed(seed + 1)
    seen = []  # each draft row's observed counts, for the hint on a failure
    undefined = 0  # draft rows where the verifier's law is not finite (NaN: no law stated there)
    for inst_i, rows in enumerate(all_rows):
        d, q, p = rows
        Bn, _, L = d.shape
        V = q.shape[-1]
        counts = per_row[offset:offset + Bn]
        offset += Bn
        law = _reference_law(spec, d, q, p if proc is None else proc(p, d),  # processed rows
                             what=f"verifier {spec.name}'s law")
        _real_dtype(law_form(law, Bn, K, L, V, f"verifier {spec.name}"),  # its fault, not
                    f"verifier {spec.name}")  # the sampler's; NaN rows stand for no law
        # the rows' and the law's own rounding: given rows sum to 1 within 1e-6 (float32 rows,
        # `DRAFT_ROW_TOL`), a law in float32 within 4 V eps, over (L+1) positions
        mass_tol = (L + 1) * max(1e-6, dtype_tolerance(law.stop, V),
                                 dtype_tolerance(law.correction, V))
        stop = torch.as_tensor(law.stop, dtype=torch.float64)
        corr = torch.as_tensor(law.correction, dtype=torch.float64)
        counted = _row_counts(sampler, rows, counts, sg, _chunk(K, L, V, max_batch, sampler))
        for b, obs, note in counted:
            if note:
                return _failed("law", samples, alpha, spec.name, note, n_rows)
            probs = (stop[b].unsqueeze(-1) * corr[b]).reshape(-1).numpy()
            if not np.isfinite(probs).all():  # a replica's law may state none on a row (NaN
                undefined += 1  # where its engine has no output): said in the report, untested
                continue
            if (probs < 0).any():  # the verifier's fault, named as such (not "probs has ...")
                raise LawError("negative", f"verifier {spec.name}'s law has a negative "
                               f"probability {float(probs.min())!r} at draft row {b} of "
                               f"instance {inst_i}: not a law", (inst_i, b), float(probs.min()))
            # a function handed over in Python is not checked as a module:function's is: stop
            # rows summing to 1.3 failed a correct sampler
            total = float(probs.sum())
            if abs(total - 1) > mass_tol:
                raise LawError("stop-sum", f"verifier {spec.name}'s law at draft row {b} of "
                               f"instance {inst_i} has total probability {total!r}, not 1 "
                               f"(tolerance {mass_tol:g}): not a law", (inst_i, b), total)
            _collect_law(probs)
            t = stats.row_chi_square(obs, probs, counts[b], MIN_EXPECTED)
            tests.append(t)
            laws.append(probs)
            seen.append((obs, counts[b]))

            def label(c, b=b):
                draft = (_tokens(d[b, 0]) if K == 1 else [list(_tokens(x)) for x in d[b]])
                where = f"instance {inst_i}, draft row {b} (draft {draft})"
                if c < 0:
                    return f"{where}: pooled cells (expected < {MIN_EXPECTED:g} each)"
                kk, rest = divmod(int(c), (L + 1) * V)
                tt, yy = divmod(rest, V)
                return f"{where}: {'' if K == 1 else f'path {kk}, '}tau = {tt}, Y = {yy}"

            impossible, worst = _cells(t, probs, obs, label, "probability 0", impossible, worst)
    if not tests:
        raise SpectheoryError(f"verifier {spec.name}'s law is not finite on any of the {n_rows} "
                              f"draft rows: nothing to test")
    rep = _report("law", tests, samples, alpha, spec.name, worst, impossible, laws)
    if undefined:
        rep.notes.append(f"{undefined} of {n_rows} draft rows not tested: the verifier's law is "
                         f"not finite there (NaN: it states no law on those rows)")
    if not rep.passed and not rep.needs_samples:
        rep.notes.extend(_hints(how, all_rows, seen, proc, alpha))
    return rep


def _fits(spec, all_rows, seen, rows_of) -> float | None:
    """The family p-value of the counts ``seen`` against ``spec``'s law on the rows
    ``rows_of(p)`` of every instance (0 when a count falls on an outcome of probability 0);
    None when that law leaves no degree of freedom at these counts and no count falls on an
    outcome of probability 0 (nothing was tested: a p-value of 0 would call a law that fits a
    misfit)."""
    tests, i = [], 0
    for d, q, p in all_rows:
        law = _reference_law(spec, d, q, rows_of(p, d), what=f"verifier {spec.name}'s law")
        stop = torch.as_tensor(law.stop, dtype=torch.float64)
        corr = torch.as_tensor(law.correction, dtype=torch.float64)
        for b in range(d.shape[0]):
            obs, n = seen[i]
            i += 1
            probs = (stop[b].unsqueeze(-1) * corr[b]).reshape(-1).numpy()
            tests.append(stats.row_chi_square(obs, probs, n, MIN_EXPECTED))
    fam = stats.family(tests)
    if fam.dof > 0 or fam.impossible:
        return fam.p_value
    return None


def _hints(how, all_rows, seen, proc, alpha) -> list[str]:
    """What a failed law check's counts do fit, computed rather than guessed: the other coin
    rule's exact law (token vs block: a sampler checked against the wrong rule) and, when the
    law is computed against processed target rows (``sampling``), the same verifier's law
    against the raw rows the sampler was handed (it does not apply the sampling parameters). A
    hint is given only for a law whose family p-value exceeds ``alpha``; when candidates exist
    and none fits, a note says so."""
    spec, K = how.spec, how.paths
    cands = []  # (label, spec, rows_of, hint)
    other = None
    if K == 1 and spec.name in ("token", "block"):
        from ...registry import plan

        other = plan("block" if spec.name == "token" else "token", None).spec
    processed = (lambda p, d: p) if proc is None else proc
    if other is not None:
        cands.append((f"the exact law of verifier {other.name!r}", other, processed,
                      f"checked against verifier {spec.name!r}: a {other.name} sampler needs "
                      f"--verifier {other.name} (verifier={other.name!r} in Python)"))
    raw_differs = proc is not None and any(
        float((proc(p, d).to(torch.float64) - p.to(torch.float64)).abs().max()) > 1e-9
        for d, _, p in all_rows)
    if raw_differs:
        cands.append((f"the law of verifier {spec.name!r} against the raw target rows", spec,
                      lambda p, d: p,
                      "the sampler's law is that of the raw target rows it was handed, not of the "
                      "rows processed by the sampling parameters: it does not apply them as "
                      "--sampling (sampling= in Python) says"))
        if other is not None:
            cands.append((f"the law of verifier {other.name!r} against the raw target rows", other,
                          lambda p, d: p,
                          f"a {other.name} sampler that does not apply the sampling parameters: "
                          f"--verifier {other.name}, and the processing as --sampling says"))
    out, tried, untested = [], [], []
    for label, sp, rows_of, hint in cands:
        pv = _fits(sp, all_rows, seen, rows_of)
        if pv is None:
            untested.append(label)
            continue
        tried.append(f"{label} (p-value {pv:.3g})")
        if pv > alpha:
            out.append(f"{hint}; the samples fit {label} (p-value {pv:.3g} > alpha)")
    if tried and not out:
        out.append("the samples fit none of the laws a set-up mistake would give: "
                   + "; ".join(tried))
    if untested and not out:
        out.append(f"too few samples to test {'; '.join(untested)} (no degree of freedom): "
                   f"more samples tell whether the sampler follows "
                   f"{'it' if len(untested) == 1 else 'one of them'}")
    return out

