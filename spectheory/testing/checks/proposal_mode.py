"""``check_proposal``'s test: does a draft sampler sample from the q it reports? Per input row,
repeated, the token counts against the mean reported q (pooled chi-square, Bonferroni over one
global and one per-row test).
"""

from __future__ import annotations

import math

import numpy as np
from ...runtime._lazy import torch

from ...runtime.errors import SpectheoryError, TooFewSamplesError
from ...inputs.instances import PYTHON_ROW_TOL, Instance, bad_float_row
from ...engine.sampling import sample_drafts
from ...engine.seqtree import levels
from ..statistics import stats
from .calls import (MAX_CALL_FLOATS, RAMP_FIRST_ROWS, _as_index, _cells, _dense, _failed, _report,
                    _split, unreadable)
from .report import MIN_EXPECTED
from .rows import DRAFT_ROW_TOL, DRAFT_ROW_TOL_LOW, default_instances
from ...runtime.limits import shown as _repr_cut


def _proposal_rows(instances, rows: int, generator) -> list[torch.Tensor]:
    out = []
    for inst in instances:
        if isinstance(inst, Instance):
            inst = inst.to_float()
            V, L = inst.vocab_size, inst.block_length
            ql = levels(inst.draft, 0, L, False)
            d = sample_drafts(inst, 1, rows, "iid", generator)[:, 0]
            depth = torch.arange(rows) % L
            node = torch.zeros(rows, dtype=torch.long)
            picked = torch.empty(rows, V, dtype=torch.float64)
            for j in range(L):
                sel = depth == j
                picked[sel] = ql[j][node[sel]]
                node = node * V + d[:, j]
            out.append(picked)
        else:
            try:
                x = torch.as_tensor(inst, dtype=torch.float64)
            except (TypeError, ValueError, RuntimeError, OverflowError):
                raise SpectheoryError(f"proposal rows: {type(inst).__name__} {_repr_cut(inst, 40)} is "
                                      "neither an Instance nor a tensor [R, V] of numbers; the "
                                      "draft sampler was not called") from None
            if x.dim() != 2 or x.shape[0] < 1 or x.shape[1] < 1:
                raise SpectheoryError(f"proposal rows must be a tensor [R, V] with R, V >= 1, "
                                      f"not of shape {list(x.shape)}")
            found = bad_float_row(x.detach().cpu().numpy())  # the instance check's test
            if found is not None:  # the caller's rows, not the sampler's fault
                raise SpectheoryError(f"proposal rows: row {found[0]} of the rows given is not "
                                      f"a distribution (finite, non-negative, summing to 1 "
                                      f"within {PYTHON_ROW_TOL:g}); the draft sampler was not "
                                      f"called")
            out.append(x)
    return out


def default_proposal_rows() -> list:
    """Default rows for [`check_proposal`][spectheory.testing.checks.sampler.check_proposal]: draft
    rows of [`default_instances`][spectheory.testing.checks.sampler.default_instances] and four
    Dirichlet(1) rows over V = 100 (so that top-50 filtering drops mass)."""
    rng = np.random.default_rng(100)
    wide = torch.as_tensor(rng.dirichlet(np.ones(100), size=4))
    return default_instances() + [wide]



@unreadable
def _proposal_outputs(out, m: int, V: int, who: str):
    """((tokens [m], q_reported [m, V] float64 on the CPU, q as returned), None) from a draft
    sampler's return value, or (None, note)."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        return None, f"{who} returned {type(out).__name__}, not (tokens [B], q_reported [B, V])"
    tokens, q = out
    t, note = _as_index(tokens, "tokens")
    if note is None:
        try:
            given = torch.as_tensor(q)
        except Exception:  # noqa: BLE001 - anything that is not array-like
            given, note = None, f"q_reported of type {type(q).__name__}, not an array"
        if given is not None:
            note = _dense(given, "q_reported")
            if note is None and given.device.type == "meta":
                note = "q_reported on the meta device (a shape without values)"
            if note is None:
                qr = given.to(torch.float64).cpu()
    if note:
        return None, f"{who} returned {note}"
    if t.shape[0] != m or tuple(qr.shape) != (m, V):
        return None, (f"{who} returned tokens {list(t.shape)} and q {list(qr.shape)} for a "
                      f"batch of {m} rows of V = {V}")
    if ((t < 0) | (t >= V)).any():
        return None, f"{who} returned a token outside 0..{V - 1}"
    return (t, qr, given), None


def _proposal_mode(draft_sampler, sets: list, samples: int, alpha: float, seed: int,
                   pace=None):
    """The test of [`check_proposal`][spectheory.testing.checks.sampler.check_proposal] on the rows
    ``sets`` (tensors [R, V]) with a guarded ``draft_sampler``."""
    who = draft_sampler._spectheory_label
    R = sum(x.shape[0] for x in sets)
    per = _split(samples, R)
    if min(per) < 1:
        raise TooFewSamplesError(f"samples = {samples} is fewer than the {R} proposal rows", R)
    tests, worst, impossible, laws = [], None, None, []
    r = 0
    sg = torch.Generator().manual_seed(seed + 1)
    # a run whose rows take more than one call each starts with calls of RAMP_FIRST_ROWS rows,
    # growing fourfold a call: the pace measures a slow drafter on small calls (a first call of
    # 11 million rows, at 1 ms a row, took three hours before the rate was known). Runs of one
    # call a row are called as before (the same draws for a seed).
    widths = [x.shape[1] for x in sets for _ in range(x.shape[0])]  # V of each row, in order
    ramp = RAMP_FIRST_ROWS if any(n > max(1, MAX_CALL_FLOATS // V)
                                  for n, V in zip(per, widths)) else math.inf
    for set_i, qs in enumerate(sets):
        V = qs.shape[1]
        for j in range(qs.shape[0]):
            n = per[r]
            r += 1
            obs, rep = np.zeros(V, dtype=np.int64), torch.zeros(V, dtype=torch.float64)
            chunk = max(1, MAX_CALL_FLOATS // V)
            s = 0
            while s < n:  # as `calls._row_counts` ramps a sampler's calls
                m = min(chunk, n - s, ramp)
                s += m
                ramp *= 4
                out = draft_sampler(qs[j:j + 1].expand(m, V).clone(), sg)
                if pace is not None:  # stops a run the measured rate projects past max_seconds
                    pace.add(m)
                res, note = _proposal_outputs(out, m, V, who=who)
                if note:
                    return _failed("proposal", samples, alpha, "proposal", note, R)
                t, qr, given = res
                # a q reported in float16 / bfloat16 is a rounded distribution: its sum is off 1
                # by up to a few 1e-4, as given draft rows may be (`DRAFT_ROW_TOL`); the
                # chi-square reads the mean of the reported rows divided by its sum
                tol = DRAFT_ROW_TOL.get(str(given.dtype), DRAFT_ROW_TOL_LOW)
                bad = ~torch.isfinite(qr).all(1) | (qr < 0).any(1) | \
                    ((qr.sum(1) - 1).abs() > tol)
                if bad.any():
                    return _failed("proposal", samples, alpha, "proposal",
                                   f"{who} reported a q for row {j} (set {set_i}) that is not "
                                   f"a distribution (negative, NaN or not summing to 1 within "
                                   f"{tol:g} in {str(given.dtype).replace('torch.', '')})", R)
                obs += np.bincount(t.numpy(), minlength=V)
                rep += qr.sum(0)
            probs = (rep / n).numpy()
            test = stats.row_chi_square(obs, probs, n, MIN_EXPECTED)
            tests.append(test)
            laws.append(probs)

            def label(c, set_i=set_i, j=j):
                where = f"row set {set_i}, row {j}"
                return f"{where}: pooled tokens" if c < 0 else f"{where}: token {int(c)}"

            impossible, worst = _cells(test, probs, obs, label, "reported probability 0",
                                       impossible, worst)
    return _report("proposal", tests, samples, alpha, "proposal", worst, impossible, laws)

