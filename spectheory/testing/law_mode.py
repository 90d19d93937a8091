"""``mode="law"`` of the sampler check: for fixed draft rows, each repeated, the empirical law of
(tau, Y) per draft row against the named verifier's exact conditional law (Pearson chi-square,
cells of expected count below `MIN_EXPECTED` pooled per row, Bonferroni over one global and one
per-row test; `spectheory.testing.stats`).
"""

from __future__ import annotations

from ..runtime._lazy import torch

from ..runtime.errors import SpectheoryError, call_user
from . import stats
from .calls import _cells, _chunk, _collect_law, _failed, _report, _row_counts, _split, _tokens
from .report import MIN_EXPECTED
from .rows import _fixed_rows


def _law_mode(sampler, how, instances, samples, alpha, seed, draft_rows, max_batch, proc=None):
    spec, K = how.spec, how.paths
    g = torch.Generator().manual_seed(seed)
    all_rows = [_fixed_rows(inst, K, how.drafting, draft_rows, g) for inst in instances]
    n_rows = sum(r.drafts.shape[0] for r in all_rows)
    per_row = _split(samples, n_rows)
    if min(per_row) < 1:
        raise SpectheoryError(f"samples = {samples} is fewer than the {n_rows} draft rows")
    tests = []
    worst = None  # (|z|, Cell)
    impossible = None
    offset = 0
    sg = torch.Generator().manual_seed(seed + 1)
    for inst_i, rows in enumerate(all_rows):
        d, q, p = rows
        Bn, _, L = d.shape
        V = q.shape[-1]
        counts = per_row[offset:offset + Bn]
        offset += Bn
        law = call_user(spec.law, d, q, p if proc is None else proc(p),  # proc: processed rows
                        what=f"verifier {spec.name}'s law")
        stop = torch.as_tensor(law.stop, dtype=torch.float64)
        corr = torch.as_tensor(law.correction, dtype=torch.float64)
        counted = _row_counts(sampler, rows, counts, sg, _chunk(K, L, V, max_batch, sampler))
        for b, obs, note in counted:
            if note:
                return _failed("law", samples, alpha, spec.name, note, n_rows)
            probs = (stop[b].unsqueeze(-1) * corr[b]).reshape(-1).numpy()
            _collect_law(probs)
            t = stats.row_chi_square(obs, probs, counts[b], MIN_EXPECTED)
            tests.append(t)

            def label(c, b=b):
                draft = (_tokens(d[b, 0]) if K == 1 else [list(_tokens(x)) for x in d[b]])
                where = f"instance {inst_i}, draft row {b} (draft {draft})"
                if c < 0:
                    return f"{where}: pooled cells (expected < {MIN_EXPECTED:g} each)"
                kk, rest = divmod(int(c), (L + 1) * V)
                tt, yy = divmod(rest, V)
                return f"{where}: {'' if K == 1 else f'path {kk}, '}tau = {tt}, Y = {yy}"

            impossible, worst = _cells(t, probs, obs, label, "probability 0", impossible, worst)
    return _report("law", tests, samples, alpha, spec.name, worst, impossible)

