"""Check a rejection sampler (yours, or an engine's through an adapter) against the exact law.

The canonical sampler signature (torch tensors):

```text
sampler(drafts [B, L] int64, q [B, L, V], p [B, L+1, V], generator)
    -> (accepted [B] int64, token [B] int64)
```

``q[b, i] = q(.|X^i)`` (i = 0..L-1) and ``p[b, i] = p(.|X^i)`` (i = 0..L) are the draft and target
rows along the drafted path, ``accepted`` is tau (0 <= tau <= L) and ``token`` the correction or
bonus token Y; the output block is (X_1..X_tau, Y). A K-path sampler (``paths=K``) takes
``drafts [B, K, L]``, ``q [B, K, L, V]``, ``p [B, K, L+1, V]`` and returns ``(path [B],
accepted [B], token [B])``. A coin-driven sampler (``mode="coins"``) takes explicit uniforms
instead of a generator: ``sampler(drafts, q, p, uniforms [B, L+1]) -> (accepted, token)`` under a
declared convention (`CONVENTIONS`).

Three checks ([`check_sampler`][spectheory.testing.sampler.check_sampler]):

* ``mode="law"``: for fixed drafts (B draft rows drawn from the instance's draft model, each
  repeated), the empirical law of (tau, Y) per draft row is compared with the named verifier's
  exact conditional law P(tau = i, Y = y | X) = stop[i] correction[i, y] (Pearson chi-square,
  cells of expected count < 5 pooled per row). The family of tests (one over all rows, one per
  row) is Bonferroni-corrected, so the false-alarm probability of a correct sampler is at most
  ``alpha``.
* ``mode="lossless"``: drafts drawn by the kit from the instance's draft model; the output block
  followed by a target completion to length L+1 is compared with the target law p(y_1..y_{L+1})
  (Chen et al. 2023; Leviathan et al. 2023): works for any valid verifier, named or not.
* ``mode="coins"``: decisions compared one by one with spectheory's coin-driven reference
  ([`reference_coin_sampler`][spectheory.testing.sampler.reference_coin_sampler]) on the same
  uniforms; the first mismatch is reported with its inputs.
* ``mode="coins-tau"``: the accepted count tau compared with the reference's on the same
  position coins, whatever noise the sampler draws its correction token with (an exponential
  race, Gumbel-max: vLLM); Y is only required to lie in the support of the reference's correction
  row (its law is checked in ``law`` mode).

A coin-driven sampler may declare its engine's coin convention as its attribute
``coin_convention`` (a [`CoinConvention`][spectheory.testing.layouts.CoinConvention]); the kit
then hands it its coins mapped onto the engine's range and dtype (the pinned ends onto the
engine's ends), so that the engine's comparison is tested as the engine runs it.

[`check_proposal`][spectheory.testing.sampler.check_proposal] checks the drafting side: does a draft
sampler sample from the q it hands the verifier (greedy drafts with a soft q, top-k-filtered drafts
with the raw q)?

Every report states the smallest total-variation bias the test detects with 90% power at its
sample size (`SamplerReport.min_detectable_tv`), from the non-central chi-square law of the
statistic under the least-favourable bias of that total variation. ``samples="auto"`` with
``budget_s`` sizes a run by time from pilot checks and states that bias before the run
(`spectheory.testing.budget`); a sample count past ``max_seconds`` or ``max_memory_bytes`` is
refused before anything is allocated, and outputs are counted call by call, so memory does not
grow with ``samples``.

The sampler is user code: every call of it (and of a draft sampler, and of a user verifier's law)
goes through `spectheory.runtime.errors.call_user`, so an exception or ``sys.exit`` (any code, 0
included) in it raises one `UserCodeError` line naming the function; unusable return values
(wrong shapes, dtypes, NaN, values out of range) fail the report with one note naming the
function and what it returned.
"""

from __future__ import annotations

import contextvars
import math
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np
from ..runtime._lazy import torch

from ..runtime.errors import SpectheoryError, TimeLimitError, call_user
from ..inputs.instances import Instance
from ..engine.joint import draft_rows as _rows_along
from ..engine.sampling import sample_drafts
from ..inputs.random_instances import random_instance
from ..registry import plan
from ..sampling import inverse_cdf, sample_output
from ..engine.seqtree import levels, path_probabilities
from ..verifiers.block import block_weights
from ..verifiers.common import drafted_probs, residual_corrections, residuals
from . import stats
from .report import (MIN_EXPECTED, POWER, Cell, CoinMismatch, DraftRows, SamplerReport,  # noqa: F401 (re-exported)
                     _finite, _guarded, _name_of)

#: Sampler check modes.
MODES = ("law", "lossless", "coins", "coins-tau")
#: Coin conventions of [`reference_coin_sampler`][spectheory.testing.sampler.reference_coin_sampler]
#: (see its docstring).
CONVENTIONS = ("token", "block")
#: Default bound on the floats of the inputs of one sampler call (rows x K (2L+1) V).
MAX_CALL_FLOATS = 2**25
#: Largest number of output sequences V^(L+1) that ``mode="lossless"`` enumerates.
MAX_LOSSLESS_CELLS = 2**22
#: Smallest positive position coin used in the pinned rows of ``mode="coins"``.
TINY_COIN = 2.0**-53
#: Most samples handed to one call of a ``repeat_aware`` sampler (its outputs are counted, and
#: dropped, call by call, so the check's memory does not grow with ``samples``).
COUNT_CHUNK = 2**18
#: Most memory (bytes) a check may plan to hold by default (``max_memory_bytes``; half of the
#: machine's memory when that is less): count tables, laws, rows and one call's inputs and
#: outputs; a larger plan is refused before anything is allocated.
MAX_MEMORY_BYTES = 8 * 2**30
#: Longest run (seconds) a check may plan (``max_seconds``): refused before the first call when
#: ``samples`` times the check's own least cost a sample exceeds it, and stopped when the rate
#: measured on the first calls projects past it.
MAX_SECONDS = 24 * 3600.0
#: Least cost of the check's own work a sample (drawing nothing: gathering, counting, testing),
#: seconds: 2e-8, a quarter of the lowest measured with a sampler that returns zeros (8e-8 to
#: 2e-7 in law mode, 9e-7 to 2e-6 in lossless mode at 10^6 samples, one torch thread;
#: ``python benchmarks/bench_sampler_budget.py``), so that the up-front time estimate stays a
#: lower bound on faster machines.
MIN_SECONDS_PER_SAMPLE = 2e-8
#: Bytes a sample of one call holds while it is counted (path, accepted, token, row index, cell
#: and the uniforms of spectheory's own sampler, int64 / float64).
BYTES_PER_SAMPLE = 64
#: Seconds of calls after which the measured rate is projected onto ``samples``.
PROJECT_AFTER_S = 2.0
#: Budgeted runs hand the sampler at most this many rows a call, or the pilots' largest call.
BUDGET_MIN_BATCH = 2**16


# ----------------------------------------------------------------------------- samplers


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


def _is_repeat(x: torch.Tensor) -> bool:
    return x.shape[0] > 1 and x.stride(0) == 0


def make_sampler(verifier: Any = "block", paths: int | None = None) -> Callable:
    """spectheory's own sampler for any verifier, in the canonical signature.

    The law comes from ``get_verifier(verifier).law`` and the draw from
    [`sample_output`][spectheory.sampling.sample_output] (inverse CDF, two uniforms per row). With
    ``paths`` K > 1 the returned sampler takes the K-path form and returns
    ``(path, accepted, token)``. When all of drafts, q and p are one row repeated by a stride-0 view
    (``x[:1].expand(n, ...)``, as [`check_sampler`][spectheory.testing.sampler.check_sampler] hands
    them over at large vocabularies), or a small batch repeats rows, the law of each distinct input
    is computed once; the draws are the same. The sampler carries ``repeat_aware = True``, so
    [`check_sampler`][spectheory.testing.sampler.check_sampler] hands it each draft row's repeats in
    one call.
    """
    how = plan(verifier, paths)
    spec, K = how.spec, how.paths

    def sampler(drafts, q, p, generator=None):
        if K == 1:
            d3, q3, p3 = drafts.unsqueeze(1), q.unsqueeze(1), p.unsqueeze(1)
        else:
            d3, q3, p3 = drafts, q, p
        n = d3.shape[0]
        if _is_repeat(drafts) and _is_repeat(q) and _is_repeat(p):
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
                uniq, inv = torch.unique(flat, dim=0, return_inverse=True)
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


def _coin_thresholds(convention: str, drafts, q, p):
    """Per-position thresholds [B, L] (accept position i when u_i <= t_i) and correction rows
    [B, L+1, V] of a convention."""
    L = drafts.shape[-1]
    if convention == "token":
        px, qx = drafted_probs(drafts, q, p)
        ratio = torch.where(qx > 0, px / torch.where(qx > 0, qx, torch.ones_like(qx)),
                            torch.ones_like(px))
        thr = torch.clamp(ratio, max=1.0)
        corr = residual_corrections(residuals(torch.ones_like(thr), q, p), p)
        return thr, corr
    w = block_weights(drafts, q, p)
    res = residuals(w[:, :L], q, p)
    S = res.sum(-1)
    den = S + (1 - w[:, :L])
    h_mid = torch.where(den > 0, S / torch.where(den > 0, den, torch.ones_like(den)),
                        torch.ones_like(S))
    thr = torch.cat([h_mid[:, 1:], w[:, L:]], dim=1)  # h_1..h_L
    corr = residual_corrections(res, p, S.unsqueeze(-1))
    return thr, corr


def _coin_decide(convention: str, drafts, q, p, uniforms, tol: float = 0.0, token: bool = True):
    """Reference decisions (tau, Y) and a mask of rows whose decision is ambiguous (a uniform
    within ``tol`` of its threshold; a threshold of exactly 0 is never ambiguous, nor one of
    exactly 1 unless the token rule's unclamped ratio p/q, 1 included, lies within ``tol`` of
    u). With
    ``token=False`` only the positions' decisions count (the token coin's ties are ignored)."""
    if convention not in CONVENTIONS:
        raise SpectheoryError(f"unknown coin convention {convention!r}; choose from "
                              f"{', '.join(CONVENTIONS)}")
    Bsz, L = drafts.shape
    u = uniforms.to(torch.float64)
    thr, corr = _coin_thresholds(convention, drafts, q.to(torch.float64), p.to(torch.float64))
    ok = u[:, :L] <= thr
    # thresholds of exactly 0 (p(X_i) = 0) or 1 (p >= q) are exact in any float arithmetic
    near = ((u[:, :L] - thr).abs() <= tol) & (thr != 0) & (thr != 1)
    if convention == "token":  # p/q at or just above 1 may round to just below 1 in an engine
        # that recomputes p and q (a float32 softmax of each side's logits): p(X) = q(X) exactly
        # in the kit's rows is no longer exactly 1 there
        px, qx = drafted_probs(drafts, q.to(torch.float64), p.to(torch.float64))
        raw = px / torch.where(qx > 0, qx, torch.ones_like(qx))
        near |= (thr == 1) & (qx > 0) & ((u[:, :L] - raw).abs() <= tol)
    pos = torch.arange(1, L + 1, device=drafts.device)
    if convention == "token":
        tau = torch.cumprod(ok.to(torch.long), dim=1).sum(dim=1)
        relevant = pos.unsqueeze(0) <= (tau + 1).unsqueeze(1)
    else:
        tau = torch.where(ok, pos.unsqueeze(0), torch.zeros_like(pos).unsqueeze(0)).max(1).values
        relevant = torch.ones_like(ok)
    ambiguous = (near & relevant).any(dim=1)
    rows = corr[torch.arange(Bsz, device=drafts.device), tau]
    y = inverse_cdf(rows, u[:, L])
    cdf = torch.cumsum(rows, dim=-1)
    t = u[:, L] * cdf[:, -1]
    hi = cdf.gather(1, y.unsqueeze(1)).squeeze(1)
    lo = torch.where(y > 0, cdf.gather(1, (y - 1).clamp(min=0).unsqueeze(1)).squeeze(1),
                     torch.zeros_like(t))
    # only interior boundaries are ties: below the first and above the last token of positive
    # mass lie tokens of probability zero, which no correct sampler returns
    near_lo = (t - lo <= tol * cdf[:, -1]) & (lo > 0)
    near_hi = (hi - t <= tol * cdf[:, -1]) & (hi < cdf[:, -1])
    ambiguous |= (near_lo | near_hi) & (tol > 0) & token
    return tau, y, ambiguous


def _coin_support(convention: str, drafts, q, p, tau, y, tol: float):
    """Rows whose token ``y`` has probability 0 in the reference's correction row at ``tau``
    (coins-tau mode): p(y|X^tau) = 0, or the residual w_tau p(y) - q(y) below -tol times the
    row's largest target probability while the residual has mass (w = 1 for the token rule;
    at tau = L, or a residual of mass 0, the row is p(.|X^tau))."""
    Bsz, L = drafts.shape
    q, p = q.to(torch.float64), p.to(torch.float64)
    b = torch.arange(Bsz, device=drafts.device)
    tau = tau.clamp(0, L)
    y = y.clamp(0, q.shape[-1] - 1)
    w = (torch.ones(Bsz, L + 1, dtype=torch.float64, device=drafts.device)
         if convention == "token" else block_weights(drafts, q, p))
    tq = tau.clamp(max=max(L - 1, 0))
    wt = w[b, tau].unsqueeze(-1)
    row = wt * p[b, tau] - q[b, tq]
    has_mass = (row.clamp(min=0).sum(-1) > 0) & (tau < L)
    pre = row[b, y]
    scale = p[b, tau].max(-1).values
    return (p[b, tau, y] == 0) | (has_mass & (pre < -tol * scale))


def reference_coin_sampler(convention: str = "block") -> Callable:
    """spectheory's coin-driven reference ``f(drafts [B, L], q, p, uniforms [B, L+1]) ->
    (accepted, token)``.

    Conventions (``uniforms[:, i-1]`` is position i's coin, in (0, 1]; ``uniforms[:, L]`` the
    token's coin, in [0, 1)):

    * ``"token"`` (Leviathan et al., ICML 2023): accept X_i while
      u_i <= min(1, p(X_i|X^{i-1}) / q(X_i|X^{i-1})) (ratio 1 where q(X_i) = 0); tau is the
      number of positions accepted before the first rejection; correction row
      normalise(max(p(.|X^tau) - q(.|X^tau), 0));
    * ``"block"`` (Sun et al., arXiv 2403.10444): w_i = min(1, w_{i-1} p/q), S_i = sum_x
      max(w_i p(x|X^i) - q(x|X^i), 0), h_i = S_i / (S_i + 1 - w_i) (1 where the denominator is
      0), h_L = w_L; tau = the last i in 1..L with u_i <= h_i (0 if none); correction row
      normalise(max(w_tau p(.|X^tau) - q(.|X^tau), 0));

    then Y = [`inverse_cdf`][spectheory.sampling.inverse_cdf] of the correction row (p(.|X^L) at
    tau = L) at u_{L+1}: the first index whose cumulative sum exceeds u_{L+1} times the row's
    total. With coins uniform on their ranges, the law of (tau, Y) is exactly the verifier's law.
    """
    if convention not in CONVENTIONS:
        raise SpectheoryError(f"unknown coin convention {convention!r}; choose from "
                              f"{', '.join(CONVENTIONS)}")

    def coin_sampler(drafts, q, p, uniforms):
        tau, y, _ = _coin_decide(convention, drafts, q, p, uniforms)
        return tau, y

    coin_sampler.__name__ = f"reference_{convention}_coin_sampler"
    return coin_sampler


# ----------------------------------------------------------------------------- instances


def _zeroed_instance(V: int, L: int, seed: int) -> Instance:
    """Prefix-dependent Dirichlet tables with about 40% of the entries zeroed (never a whole row),
    so each model has zeros where the other has mass."""
    from ..inputs.models import TableModel

    rng = np.random.default_rng(seed)

    def tables(depth):
        out = []
        for d in range(depth + 1):
            rows = rng.dirichlet(np.ones(V), size=V**d)
            mask = rng.random(rows.shape) < 0.4
            mask[np.arange(len(rows)), rng.integers(0, V, len(rows))] = False
            rows = np.where(mask, 0.0, rows)
            out.append(rows / rows.sum(axis=1, keepdims=True))
        return TableModel(V, tuple(out))

    target = tables(L)
    return Instance(V, L, target, tables(L - 1))


def _equal_at_some_nodes(V: int, L: int, seed: int) -> Instance:
    """Prefix-dependent random tables where the draft copies the target at every other node
    (root included): every token ties in p/q there, as multi-draft selection rules must handle."""
    from ..inputs.models import TableModel

    base = random_instance(V, L, seed)
    draft = []
    for d in range(L):
        q = base.draft.level(d).copy()
        q[0::2] = base.target.level(d)[0::2]
        draft.append(q)
    return Instance(V, L, base.target, TableModel(V, tuple(draft)))


def default_instances(mode: str = "law") -> list:
    """The default instances, all with prefix-dependent rows (a different conditional after
    every prefix) and V >= 3, L >= 3: ``random_instance(3, 3, 11)``, ``random_instance(4, 3, 12,
    alpha=0.5)``, a V = 4, L = 3 instance with about 40% zeros in both models (so each model has
    zeros where the other has mass), and a V = 3, L = 3 instance whose draft equals the target at
    every other node (ties in p/q)."""
    del mode  # the same set serves every mode
    return [random_instance(3, 3, 11), random_instance(4, 3, 12, alpha=0.5),
            _zeroed_instance(4, 3, 13), _equal_at_some_nodes(3, 3, 14)]


def _check_args(samples, alpha, mode=None, tol=None):
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise SpectheoryError(f"samples = {samples!r} must be a positive integer")
    if not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise SpectheoryError(f"alpha = {alpha!r} must lie strictly between 0 and 1")
    if mode is not None and mode not in MODES:
        raise SpectheoryError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if tol is not None and not (isinstance(tol, (int, float)) and 0 <= tol < 1):
        raise SpectheoryError(f"tol = {tol!r} must lie in [0, 1)")


def _fixed_rows(inst, K: int, drafting: str, rows: int, generator) -> DraftRows:
    """DraftRows in K-path form from an Instance (rows drafted from its draft model) or given."""
    if isinstance(inst, DraftRows) or (isinstance(inst, tuple) and len(inst) == 3):
        d, q, p = (torch.as_tensor(x) for x in inst)
        if d.dim() == 2:
            d, q, p = d.unsqueeze(1), q.unsqueeze(1), p.unsqueeze(1)
        if d.dim() != 3 or q.dim() != 4 or p.dim() != 4 or q.shape[:3] != d.shape or \
                p.shape[:2] != d.shape[:2] or p.shape[2] != d.shape[2] + 1 or \
                p.shape[3] != q.shape[3]:
            raise SpectheoryError(f"draft rows of shapes drafts {list(d.shape)}, q "
                                  f"{list(q.shape)}, p {list(p.shape)} do not fit drafts [B, L], "
                                  f"q [B, L, V], p [B, L+1, V] (or with a path axis K)")
        if d.shape[1] != K:
            raise SpectheoryError(f"draft rows have {d.shape[1]} paths; the check is for {K}")
        return DraftRows(d.to(torch.long), q.to(torch.float64), p.to(torch.float64))
    if not isinstance(inst, Instance):
        raise SpectheoryError(f"an instance must be a spectheory Instance or DraftRows, not "
                              f"{type(inst).__name__}")
    inst = inst.to_float()
    V, L = inst.vocab_size, inst.block_length
    d = sample_drafts(inst, K, rows, drafting, generator)
    ql = levels(inst.draft, 0, L, False)
    pl = levels(inst.target, 0, L + 1, False)
    q, p = _rows_along(ql, pl, d, L, V)
    return DraftRows(d, q, p)


# ----------------------------------------------------------------------------- calling


#: What a check is calling, for its notes ("sampler module:function").
_WHO = contextvars.ContextVar("spectheory_sampler_who", default="the sampler")
#: The running check's `_Pace` (None outside a check).
_PACE = contextvars.ContextVar("spectheory_sampler_pace", default=None)
#: A list while a budgeted check plans: each row's cell probabilities, in the check's order.
_ROW_LAWS = contextvars.ContextVar("spectheory_sampler_row_laws", default=None)


def _collect_law(probs) -> None:
    laws = _ROW_LAWS.get()
    if laws is not None:
        laws.append(np.asarray(probs, dtype=np.float64))


class _Pace:
    """Samples counted against time in one check: honours a `spectheory.runtime.limits.running` time
    limit, and once the calls have run `PROJECT_AFTER_S` seconds, stops the check with a
    `TimeLimitError` when the rate measured after the first call projects the whole run past
    ``max_seconds``."""

    def __init__(self, samples: int, max_seconds: float | None):
        self.samples, self.max_seconds = int(samples), max_seconds
        self.start = time.perf_counter()
        self.done = 0
        self.first = None  # (time, samples done) after the first call: warm-up excluded

    def add(self, m: int) -> None:
        from ..runtime.limits import check_time, human_seconds

        check_time("check_sampler")
        self.done += int(m)
        now = time.perf_counter()
        if self.first is None:
            self.first = (now, self.done)
            return
        t0, d0 = self.first
        if self.max_seconds is None or now - self.start < PROJECT_AFTER_S or self.done <= d0:
            return
        rate = (now - t0) / (self.done - d0)
        total = (now - self.start) + rate * max(0, self.samples - self.done)
        if total > self.max_seconds:
            raise TimeLimitError(
                f"samples = {self.samples:,} would take about {human_seconds(total)} "
                f"({rate:.3g} s a sample, measured on the first {self.done:,}), over "
                f"max_seconds = {self.max_seconds:g}; lower samples, raise max_seconds, or let "
                f"samples='auto' with budget_s size the run")


def _pace_add(m: int) -> None:
    pace = _PACE.get()
    if pace is not None:
        pace.add(m)


def _as_index(x, name: str):
    """A sampler's output as a flat int64 tensor, or a note on what it is instead."""
    try:
        t = torch.as_tensor(x)
    except Exception:  # noqa: BLE001 - anything that is not array-like
        return None, f"{name} of type {type(x).__name__}, not a tensor"
    if t.dtype == torch.bool or t.is_complex():
        return None, f"{name} of dtype {t.dtype}, not an integer tensor"
    if t.dim() > 1:  # [B] expected: [1, B] or [B, 1] is a layout mistake, not a batch of B
        return None, f"{name} of shape {list(t.shape)}, not a vector [B]"
    t = t.reshape(-1).cpu()
    if t.is_floating_point():
        bad = ~torch.isfinite(t)
        if bad.any():
            i = int(bad.nonzero()[0])
            return None, f"{name} = {float(t[i])} (dtype {t.dtype}) at row {i}"
        frac = t != torch.round(t)
        if frac.any():
            i = int(frac.nonzero()[0])
            return None, f"{name} = {float(t[i])} (dtype {t.dtype}), not an integer, at row {i}"
    return t.to(torch.long), None


def _outputs(out, K: int, n: int, L: int, V: int):
    """Validate a sampler's return value; (k, tau, y) long tensors [n] or a note naming the
    function and what it returned."""
    who = _WHO.get()
    want = 2 if K == 1 else 3
    names = ("accepted", "token") if K == 1 else ("path", "accepted", "token")
    if not isinstance(out, (tuple, list)) or len(out) != want:
        return None, (f"{who} returned {type(out).__name__}"
                      f"{' of length ' + str(len(out)) if isinstance(out, (tuple, list)) else ''}"
                      f", not a tuple of {want} tensors ({', '.join(names)})")
    parts = []
    for name, x in zip(names, out):
        t, note = _as_index(x, name)
        if note:
            return None, f"{who} returned {note}"
        parts.append(t)
    if any(x.shape[0] != n for x in parts):
        shapes = ", ".join(f"{name} {list(torch.as_tensor(x).shape)}"
                           for name, x in zip(names, out))
        return None, f"{who} returned {shapes} for a batch of {n}"
    if K == 1:
        parts = [torch.zeros(n, dtype=torch.long)] + parts
    k, tau, y = parts
    for name, x, hi in (("path", k, K - 1), ("accepted", tau, L), ("token", y, V - 1)):
        bad = (x < 0) | (x > hi)
        if bad.any():
            i = int(bad.nonzero()[0])
            return None, f"{who} returned {name} = {int(x[i])} outside 0..{hi} (row {i})"
    return (k, tau, y), None


def _chunk(K: int, L: int, V: int, max_batch: int | None, sampler=None) -> int:
    if max_batch is None and getattr(sampler, "repeat_aware", False):
        return COUNT_CHUNK
    if max_batch is not None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise SpectheoryError(f"max_batch = {max_batch!r} must be a positive integer")
        return max_batch
    return max(1, MAX_CALL_FLOATS // (K * (2 * L + 1) * V))


def _row_counts(sampler, rows: DraftRows, counts: list[int], generator, chunk: int):
    """Call the sampler on each draft row repeated counts[b] times, at most ``chunk`` rows a
    call, and yield ``(b, observed counts of the cells (k, tau, Y) [K (L+1) V], None)`` for
    b = 0, 1, ... in order, or ``(b, None, note)`` once the sampler returns something invalid.

    Inputs of at most `MAX_CALL_FLOATS` floats in all are gathered into batches of interleaved
    draft rows (so that a sampler mixing up the rows of a batch is seen); larger ones are handed
    over one draft row at a time as read-only stride-0 views, and each call's outputs are counted
    and dropped, so memory does not grow with the counts."""
    d, q, p = rows
    Bn, K, L = d.shape
    V = q.shape[-1]
    C = K * (L + 1) * V
    total = sum(counts)

    def call(dd, qq, pp):
        m = dd.shape[0]
        if K == 1:
            out = sampler(dd[:, 0], qq[:, 0], pp[:, 0], generator)
        else:
            out = sampler(dd, qq, pp, generator)
        res, note = _outputs(out, K, m, L, V)
        if note:
            return None, note
        _pace_add(m)
        k, tau, y = res
        return ((k * (L + 1) + tau) * V + y).numpy(), None

    if total * K * (2 * L + 1) * V <= MAX_CALL_FLOATS:
        # draft rows interleaved, so that a sampler mixing up rows of a batch is seen
        ids = torch.repeat_interleave(torch.arange(Bn), torch.as_tensor(counts))
        ids = ids[torch.randperm(len(ids), generator=generator)]
        rid_parts, cell_parts = [], []
        for s in range(0, total, chunk):
            part = ids[s:s + chunk]
            cells, note = call(d[part], q[part], p[part])
            if note:
                yield 0, None, note
                return
            rid_parts.append(part.numpy())
            cell_parts.append(cells)
        rid, cell = np.concatenate(rid_parts), np.concatenate(cell_parts)
        if Bn * C <= 2**24:
            table = np.bincount(rid * C + cell, minlength=Bn * C).reshape(Bn, C)
            for b in range(Bn):
                yield b, table[b], None
        else:
            order = np.argsort(rid, kind="stable")
            rid, cell = rid[order], cell[order]
            bounds = np.searchsorted(rid, np.arange(Bn + 1))
            for b in range(Bn):
                yield b, np.bincount(cell[bounds[b]:bounds[b + 1]], minlength=C), None
        return
    for b in range(Bn):
        obs = np.zeros(C, dtype=np.int64)
        left = counts[b]
        while left > 0:
            m = min(left, chunk)
            cells, note = call(d[b:b + 1].expand(m, -1, -1), q[b:b + 1].expand(m, -1, -1, -1),
                               p[b:b + 1].expand(m, -1, -1, -1))
            if note:
                yield b, None, note
                return
            obs += np.bincount(cells, minlength=C)
            left -= m
        yield b, obs, None


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _failed(mode, samples, alpha, name, note, rows=0) -> SamplerReport:
    return SamplerReport(False, 0.0, mode, samples, alpha, None, float("nan"), name, rows=rows,
                         notes=[note])


def _tokens(x) -> tuple:
    return tuple(int(t) for t in x)


# ----------------------------------------------------------------------------- law mode


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


def _cells(test, probs, obs, label, zero: str, impossible, worst):
    """Update the report's two cells with one test: the first sample on an outcome of
    probability 0 (kept once found), and the cell with the largest standardised deviation
    ``(z, Cell)``; ``label(c)`` names cell ``c`` (negative: the pooled bin)."""
    if test.impossible and impossible is None:
        c = int(np.flatnonzero((probs <= 0) & (obs > 0))[0])
        impossible = Cell(label(c) + f" ({zero})", float(obs[c]), 0.0)
    if test.dof > 0:
        z = abs(test.worst_observed - test.worst_expected) / math.sqrt(test.worst_expected)
        if worst is None or z > worst[0]:
            worst = (z, Cell(label(test.worst), test.worst_observed, test.worst_expected))
    return impossible, worst


def _report(mode, tests, samples, alpha, name, worst, impossible) -> SamplerReport:
    fam = stats.family(tests)
    notes = []
    cell = worst[1] if worst else None
    if impossible is not None:
        cell = impossible
        notes.append(f"{fam.impossible} sample(s) fell on outcomes of probability zero")
    mdt = stats.min_detectable_tv(tests, alpha, POWER)
    return SamplerReport(fam.p_value > alpha, fam.p_value, mode, samples, alpha, cell, mdt,
                         name, fam.statistic, fam.dof, len(tests), notes=notes)


# ----------------------------------------------------------------------------- lossless mode


def _lossless_mode(sampler, how, instances, samples, alpha, seed, max_batch, proc=None):
    spec, K = how.spec, how.paths
    insts = []
    for inst in instances:
        if not isinstance(inst, Instance):
            raise SpectheoryError("mode 'lossless' needs table instances (it completes the "
                                  "output with the target); DraftRows only serve mode 'law'")
        V, L = inst.vocab_size, inst.block_length
        if V ** (L + 1) > MAX_LOSSLESS_CELLS:
            raise SpectheoryError(f"mode 'lossless' enumerates V^(L+1) = {V}^{L + 1} = "
                                  f"{V ** (L + 1):,} sequences, over the limit of "
                                  f"{MAX_LOSSLESS_CELLS:,}; use mode 'law' or a smaller instance")
        insts.append(inst.to_float())
    per = _split(samples, len(insts))
    if min(per) < 1:
        raise SpectheoryError(f"samples = {samples} is fewer than the {len(insts)} instances")
    g = torch.Generator().manual_seed(seed)
    sg = torch.Generator().manual_seed(seed + 1)
    tests, worst, impossible = [], None, None
    for inst_i, (inst, n) in enumerate(zip(insts, per)):
        V, L = inst.vocab_size, inst.block_length
        ql = levels(inst.draft, 0, L, False)
        raw = levels(inst.target, 0, L + 1, False)  # handed to the sampler
        pl = raw if proc is None else [proc(x) for x in raw]  # the target law it must meet
        chunk = _chunk(K, L, V, max_batch)
        obs = np.zeros(V ** (L + 1), dtype=np.int64)  # counted call by call
        done = 0
        while done < n:
            m = min(chunk, n - done)
            d = sample_drafts(inst, K, m, how.drafting, g)
            q, p = _rows_along(ql, raw, d, L, V)
            dd = d.clone()  # the kit reads the drafts after the call
            out = sampler(dd[:, 0], q[:, 0], p[:, 0], sg) if K == 1 else sampler(dd, q, p, sg)
            res, note = _outputs(out, K, m, L, V)
            if note:
                return _failed("lossless", samples, alpha, spec.name, note, len(insts))
            _pace_add(m)
            k, tau, y = res
            path = d[torch.arange(m), k]  # [m, L]
            node = torch.zeros(m, dtype=torch.long)
            seq = torch.zeros(m, L + 1, dtype=torch.long)
            for j in range(L + 1):
                drawn = torch.multinomial(pl[j][node], 1, generator=g)[:, 0]
                tok = torch.where(j < tau, path[:, min(j, L - 1)],
                                  torch.where(j == tau, y, drawn))
                seq[:, j] = tok
                node = node * V + tok
            obs += np.bincount(node.numpy(), minlength=V ** (L + 1))
            done += m
        probs = path_probabilities(pl[: L + 1], torch.ones(1, dtype=torch.float64))[L + 1]
        probs = probs.numpy()
        _collect_law(probs)
        t = stats.row_chi_square(obs, probs, n, MIN_EXPECTED)
        tests.append(t)

        def label(c, inst_i=inst_i, V=V, L=L):
            if c < 0:
                return f"instance {inst_i}: pooled sequences (expected < {MIN_EXPECTED:g} each)"
            toks = [(int(c) // V ** (L - j)) % V for j in range(L + 1)]
            return f"instance {inst_i}: output sequence {tuple(toks)}"

        impossible, worst = _cells(t, probs, obs, label, "target probability 0", impossible,
                                   worst)
    name = spec.name if K == 1 else f"{spec.name} (K = {K}, {how.drafting} drafting)"
    return _report("lossless", tests, samples, alpha, name, worst, impossible)


# ----------------------------------------------------------------------------- coins mode


def _round_rows(x: torch.Tensor, V: int):
    if V > 16:
        return f"[{list(x.shape)} rows, V = {V}]"
    return [[round(float(v), 6) for v in row] for row in x]


def _coin_blocks(instances, per):
    """``(instance index, instance, rows, first)`` in blocks of at most `MAX_CALL_FLOATS` input
    floats (at least 32 rows), so that the rows of coins drawn at once do not grow with
    ``samples``; ``first`` marks an instance's first block (its pinned rows)."""
    for inst_i, (inst, n) in enumerate(zip(instances, per)):
        if isinstance(inst, Instance):
            L, V = inst.block_length, inst.vocab_size
        else:
            d, q = inst[0], inst[1]
            L, V = int(d.shape[-1]), int(q.shape[-1])
        block = max(32, MAX_CALL_FLOATS // ((2 * L + 1) * V))  # the calls' chunk
        for s in range(0, n, block):
            yield inst_i, inst, min(block, n - s), s == 0


def _coins_mode(sampler, convention, instances, samples, alpha, seed, tol, max_batch,
                proc=None, mode="coins"):
    conv = _engine_convention(sampler, mode)
    name = convention if conv is None else f"{convention}, engine coins {conv.name}"
    g = torch.Generator().manual_seed(seed)
    per = _split(samples, len(instances))
    checked = ambiguous = 0
    for inst_i, inst, n, first in _coin_blocks(instances, per):
        rows = _fixed_rows(inst, 1, "iid", n, g)
        if not isinstance(inst, Instance):  # given rows, cycled to n rows of fresh coins
            rows = DraftRows(*(x[torch.arange(n) % x.shape[0]] for x in rows))
        d, q, p = (x[:, 0] for x in rows)
        Bn, L = d.shape
        V = q.shape[-1]
        u = torch.empty(Bn, L + 1, dtype=torch.float64)
        u[:, :L] = 1.0 - torch.rand(Bn, L, generator=g, dtype=torch.float64)  # (0, 1]
        u[:, L] = torch.rand(Bn, generator=g, dtype=torch.float64)  # [0, 1)
        # pinned rows: the ends of the coins' ranges
        pins = [(1.0, 0.0), (TINY_COIN, 1.0 - 2.0**-53), (1.0, 1.0 - 2.0**-53),
                (TINY_COIN, 0.0)]
        for r, (pos, tok) in enumerate(pins[: max(0, Bn // 8) if first else 0]):
            u[r, :L] = pos
            u[r, L] = tok
        ue = u  # the coins the sampler is handed: on its engine's grid when it declares one
        if conv is not None:
            ue = u.clone()
            ue[:, :L] = conv.from_kit(u[:, :L]).to(torch.float64)
            if conv.token_coin:
                ue[:, L] = conv.token_from_kit(u[:, L]).to(torch.float64)
        chunk = max(1, MAX_CALL_FLOATS // ((2 * L + 1) * V)) if max_batch is None else max_batch
        for s in range(0, Bn, chunk):
            sl = slice(s, min(Bn, s + chunk))
            out = sampler(d[sl].clone(), q[sl].clone(), p[sl].clone(), ue[sl].clone())
            res, note = _outputs(out, 1, sl.stop - sl.start, L, V)
            if note:
                return _failed(mode, samples, alpha, name, note, checked)
            _pace_add(sl.stop - sl.start)
            _, tau, y = res
            pt = p[sl] if proc is None else proc(p[sl])
            rt, ry, amb = _coin_decide(convention, d[sl], q[sl], pt, u[sl], tol,
                                       token=mode == "coins")
            tau_bad = tau != rt
            if mode == "coins":
                y_bad = y != ry
            else:  # coins-tau: Y only has to be possible
                y_bad = ~tau_bad & _coin_support(convention, d[sl], q[sl], pt, tau, y, tol)
            bad = (tau_bad | y_bad) & ~amb
            ambiguous += int(amb.sum())
            if bad.any():
                i = int(bad.nonzero()[0])
                b = s + i
                mm = _coin_mismatch(convention, conv, mode, b, d[b], q[b], pt[i], u[b], ue[b],
                                    (int(rt[i]), int(ry[i])), (int(tau[i]), int(y[i])),
                                    bool(tau_bad[i]), bool(y_bad[i]), V)
                checked += i + 1
                rep = SamplerReport(False, 0.0, mode, checked, alpha, None, 0.0, name,
                                    rows=checked, mismatch=mm, ambiguous=ambiguous)
                rep.notes.append(f"instance {inst_i}: the sampler's "
                                 f"{'accepted count' if mm.differs == 'tau' else 'decision'} "
                                 f"differs from the reference on the same uniforms"
                                 if mm.differs != "Y outside the support" else
                                 f"instance {inst_i}: the sampler returned a token of "
                                 f"reference probability 0 at the accepted count both agree on")
                return rep
            checked += sl.stop - sl.start
    return SamplerReport(True, 1.0, mode, checked, alpha, None, 0.0, name,
                         rows=checked, ambiguous=ambiguous)


def _engine_convention(sampler, mode):
    """The sampler's declared ``coin_convention`` (None: the kit's own coins)."""
    conv = getattr(sampler, "coin_convention", None)
    if conv is None:
        return None
    from .layouts import CoinConvention

    if not isinstance(conv, CoinConvention):
        raise SpectheoryError(f"the sampler's coin_convention is {type(conv).__name__}, not a "
                              f"spectheory.testing.layouts.CoinConvention")
    if mode == "coins" and not conv.token_coin:
        raise SpectheoryError(f"the sampler's coin convention {conv.name!r} draws the correction "
                              f"token with its own noise (no token coin): use mode 'coins-tau'")
    return conv


def _coin_mismatch(convention, conv, mode, b, d, q, p, u, ue, expected, got, tau_bad, y_bad, V):
    """The report's [`CoinMismatch`][spectheory.testing.report.CoinMismatch] of row ``b``: what
    differs and, for the accepted count, the position that decides it on both sides."""
    if mode == "coins-tau":
        differs = "tau" if tau_bad else "Y outside the support"
    else:
        differs = "tau and Y" if tau_bad and y_bad else "tau" if tau_bad else "Y"
    L = d.shape[0]
    extra = {}
    if tau_bad:
        rt, st = expected[0], got[0]
        pos = min(rt, st) + 1 if convention == "token" else max(rt, st)
        pos = min(max(pos, 1), L)
        thr, _ = _coin_thresholds(convention, d.unsqueeze(0), q.unsqueeze(0).to(torch.float64),
                                  p.unsqueeze(0).to(torch.float64))
        extra.update(position=pos, threshold=float(thr[0, pos - 1]))
        if conv is not None:
            x = int(d[pos - 1])
            eng = (conv.engine_threshold(float(p[pos - 1, x]), float(q[pos - 1, x]))
                   if convention == "token" else conv.engine_threshold(float(thr[0, pos - 1]), 1.0))
            coin = conv.engine_coin(float(ue[pos - 1]))
            extra.update(engine_test=conv.explain(eng, coin), engine_threshold=eng,
                         engine_coin=coin)
    return CoinMismatch(b, list(_tokens(d)), _round_rows(q, V), _round_rows(p, V),
                        [float(v) for v in u], expected, got, differs=differs,
                        engine_uniforms=None if conv is None else [float(v) for v in ue],
                        **extra)


# ----------------------------------------------------------------------------- sizes and budgets


def _dims(inst) -> tuple[int | None, int, int]:
    """(rows or None for a table instance, L, V) of an instance or DraftRows, without
    building anything."""
    if isinstance(inst, Instance):
        return None, inst.block_length, inst.vocab_size
    try:
        d, q = inst[0], inst[1]
        return int(d.shape[0]), int(d.shape[-1]), int(q.shape[-1])
    except (TypeError, IndexError, AttributeError):
        raise SpectheoryError(f"an instance must be a spectheory Instance or DraftRows, not "
                              f"{type(inst).__name__}") from None


def _min_samples(mode: str, instances, draft_rows: int) -> int:
    """The fewest samples a check accepts: one per draft row (law), one per instance
    (lossless), one (coins modes)."""
    if mode == "law":
        return sum(draft_rows if rows is None else rows
                   for rows, _, _ in (_dims(i) for i in instances))
    return len(instances) if mode == "lossless" else 1


def _refuse_time(samples: int, max_seconds: float | None, what: str | None = None,
                 remedy: str = "lower samples, or let samples='auto' with budget_s size the "
                               "run") -> None:
    """Refuse, before any call, a count whose least cost (`MIN_SECONDS_PER_SAMPLE` a sample,
    the check's own work) exceeds ``max_seconds``; ``what`` names the count in the message
    (default ``samples = N``; the command line says ``--samples N``)."""
    if max_seconds is None:
        return
    if isinstance(max_seconds, bool) or not isinstance(max_seconds, (int, float)) or \
            not max_seconds > 0:
        raise SpectheoryError(f"max_seconds = {max_seconds!r} must be a positive number of "
                              f"seconds or None")
    least = samples * MIN_SECONDS_PER_SAMPLE
    if least > max_seconds:
        from ..runtime.errors import SizeLimitError
        from ..runtime.limits import human_seconds

        raise SizeLimitError(
            f"{what or f'samples = {samples:,}'} would take at least {human_seconds(least)} (the "
            f"check's own work costs at least {MIN_SECONDS_PER_SAMPLE:g} s a sample; the "
            f"sampler's time comes on top), over max_seconds = {max_seconds:g} "
            f"({human_seconds(max_seconds)}); {remedy}")


def _planned_bytes(samples: int, mode: str, instances, K: int, draft_rows: int) -> tuple:
    """(bytes, what) a check plans to hold: law mode the rows (float64), the exact law and a
    count table per draft row; lossless mode the target law and counts over V^(L+1) sequences;
    every mode one call's inputs (at most `MAX_CALL_FLOATS` floats, copied once) and the
    samples counted at once (`BYTES_PER_SAMPLE` each; counting is call by call, so this is
    bounded whatever ``samples``)."""
    fixed = held = call = 0
    rows_total, cells = 0, 0
    for inst in instances:
        rows, L, V = _dims(inst)
        per_sample_floats = K * (2 * L + 1) * V
        if mode == "law":
            R = draft_rows if rows is None else rows
            C = K * (L + 1) * V
            fixed += 8 * R * (per_sample_floats + K * (L + 1) * (V + 1) + C)
            rows_total, cells = rows_total + R, max(cells, C)
        elif mode == "lossless" and V ** (L + 1) <= MAX_LOSSLESS_CELLS:
            fixed += 8 * 3 * V ** (L + 1)
        at_once = min(samples, max(COUNT_CHUNK, MAX_CALL_FLOATS // per_sample_floats))
        held = max(held, at_once)
        call = max(call, 2 * 8 * min(MAX_CALL_FLOATS, at_once * per_sample_floats))
    total = fixed + call + held * BYTES_PER_SAMPLE
    what = (f"rows, exact laws and count tables of {rows_total:,} draft rows of up to "
            f"{cells:,} cells, " if mode == "law" else
            "the target laws and counts, " if mode == "lossless" else "")
    what += (f"one call's inputs and {held:,} samples counted at once ({BYTES_PER_SAMPLE} bytes "
             f"each)")
    return total, what


def _refuse_size(samples, mode, instances, verifier, paths, draft_rows, max_seconds,
                 max_memory_bytes) -> None:
    """Refuse, before anything is allocated or called, a check planned past ``max_seconds`` or
    ``max_memory_bytes`` (one `SizeLimitError` line naming ``samples`` and the estimate)."""
    _refuse_time(samples, max_seconds)
    if max_memory_bytes is None:
        from ..runtime.limits import MEMORY_SHARE, physical_memory

        total = physical_memory()
        max_memory_bytes = MAX_MEMORY_BYTES if total is None else \
            min(MAX_MEMORY_BYTES, int(MEMORY_SHARE * total))
    if isinstance(max_memory_bytes, bool) or not isinstance(max_memory_bytes, (int, float)) or \
            not max_memory_bytes > 0:
        raise SpectheoryError(f"max_memory_bytes = {max_memory_bytes!r} must be a positive "
                              f"number")
    K = 1 if mode in ("coins", "coins-tau") else plan(verifier, paths).paths
    need, what = _planned_bytes(samples, mode, instances, K, draft_rows)
    if need > max_memory_bytes:
        from ..runtime.errors import SizeLimitError

        raise SizeLimitError(
            f"samples = {samples:,}: the check would hold about {need / 2**30:.3g} GiB ({what}), "
            f"over max_memory_bytes = {max_memory_bytes / 2**30:.3g} GiB; check fewer draft rows "
            f"or a smaller vocabulary")


def _definitive(rep: SamplerReport) -> bool:
    """A failure that no correct sampler can produce: invalid outputs, a coin decision that
    differs, a sample on an outcome of probability 0."""
    if rep.passed:
        return False
    return (rep.mismatch is not None or (rep.worst_cell is None and rep.dof == 0)
            or (rep.worst_cell is not None and rep.worst_cell.expected == 0.0))


def _instant_sampler(call: dict):
    """A sampler that costs nothing, for timing the check's own work: zeros (a K-path form when
    the drafts have a path axis), or in coins modes the reference's decisions (so that the check
    runs to the end). Keeps the user sampler's ``repeat_aware``, so the calls are chunked alike."""
    mode = call["mode"]
    if mode in ("coins", "coins-tau"):
        conv = call["convention"] or (call["verifier"] if isinstance(call["verifier"], str)
                                      else None)
        return reference_coin_sampler(conv if conv in CONVENTIONS else "block")

    def instant(drafts, q, p, extra=None):
        z = torch.zeros(drafts.shape[0], dtype=torch.long)
        return (z, z) if drafts.dim() == 2 else (z, z, z)

    instant.repeat_aware = bool(getattr(call["sampler"], "repeat_aware", False))
    return instant


def _interleave_breaks(call: dict, instances, rows: int) -> list[int]:
    """``law`` mode: the sample counts at which each instance's draft rows stop being handed
    over in mixed batches (`_row_counts`: at most `MAX_CALL_FLOATS` input floats in all) and go
    one draft row at a time."""
    if call["mode"] != "law":
        return []
    K = plan(call["verifier"], call["paths"]).paths
    out = []
    for inst in instances:
        r, L, V = _dims(inst)
        r = call["draft_rows"] if r is None else r
        out.append(MAX_CALL_FLOATS * rows // (r * K * (2 * L + 1) * V) + 1)
    return out


def _budgeted(call: dict) -> SamplerReport:
    """``check_sampler(samples="auto", budget_s=...)``: pilot checks, the plan on stderr, the run
    (`spectheory.testing.budget.size_run`)."""
    from . import budget as B

    start = time.perf_counter()
    if call["budget_s"] is None:
        raise SpectheoryError("samples='auto' needs budget_s, the seconds the whole check may take")
    budget_s = B.check_budget(call["budget_s"])
    max_seconds = call["max_seconds"]
    if max_seconds is not None and isinstance(max_seconds, (int, float)) and \
            budget_s > max_seconds:
        raise SpectheoryError(f"budget_s = {budget_s:g} is over max_seconds = {max_seconds:g}")
    mode = call["mode"]
    _check_args(1, call["alpha"], mode, call["tol"])
    if not callable(call["sampler"]):
        raise SpectheoryError(f"the sampler is {type(call['sampler']).__name__}, not a function")
    draft_rows = call["draft_rows"]
    if isinstance(draft_rows, bool) or not isinstance(draft_rows, int) or draft_rows < 1:
        raise SpectheoryError(f"draft_rows = {draft_rows!r} must be a positive integer")
    instances = list(default_instances(mode) if call["instances"] is None else call["instances"])
    if not instances:
        raise SpectheoryError("no instances to check the sampler on")
    sampler = _guarded(call["sampler"], "sampler")
    clock = sampler._spectheory_clock
    call = dict(call, sampler=sampler, instances=instances, budget_s=None)
    laws: list = []

    def run(n: int, collect: bool = True):
        laws.clear()
        token = _ROW_LAWS.set(laws if collect else None)
        inside = clock[0]
        sampler._spectheory_rows[0] = 0
        try:
            return check_sampler(**dict(call, samples=n)), clock[0] - inside
        finally:
            _ROW_LAWS.reset(token)

    instant = _instant_sampler(call)

    def kit(n: int) -> float:
        t = time.perf_counter()
        check_sampler(**dict(call, sampler=instant, samples=n))
        return time.perf_counter() - t

    minimum = _min_samples(mode, instances, draft_rows)
    kit(minimum)  # warm-up (imports, first calls); its time counts in the budget, not the fits
    sized = B.size_run(run, budget_s, minimum, kit=kit, start=start, done=_definitive,
                       breaks=_interleave_breaks(call, instances, minimum))
    n, alpha = sized["samples"], call["alpha"]
    if n is None:  # a pilot found a failure that no correct sampler produces
        last = sized["result"]
        last.notes.append(f"found by a pilot check of {last.samples:,} samples: no correct "
                          f"sampler fails this way, so the budgeted run was not started")
        last.budget = B.BudgetPlan(budget_s, last.samples, time.perf_counter() - start,
                                   sized["pilot"], [], sized["fixed_s"], sized["sampler_s"], 0.0,
                                   alpha)
        return last
    if mode in ("coins", "coins-tau"):
        tv, rate = None, B.coin_detectable_rate(n)
    else:
        tv, rate = B.planned_tv(laws, n, alpha, POWER, MIN_EXPECTED), None
    if call["max_batch"] is None:  # calls near the pilots' size, so that their rate a sample
        # holds at any N (at least 2^16 rows, so that a cost a call stays negligible)
        call["max_batch"] = max(BUDGET_MIN_BATCH, sampler._spectheory_rows[0])
    predicted = (time.perf_counter() - start) + sized["fixed_s"] + sized["per_sample_s"] * n
    plan_ = B.BudgetPlan(budget_s, n, predicted, sized["pilot"], sized["kit_pilot"],
                         sized["fixed_s"], sized["sampler_s"], sized["kit_s"], alpha, POWER, tv,
                         rate, call["max_batch"])
    sys.stderr.write(f"check_sampler: {plan_.summary()}\n")
    sys.stderr.flush()
    report, _ = run(n, collect=False)
    report.budget = plan_
    return report


# ----------------------------------------------------------------------------- public checks


def check_sampler(sampler: Callable, verifier: Any = "block", instances: Sequence | None = None,
                  samples: int | str = 100_000, alpha: float = 1e-3, mode: str = "law",
                  seed: int = 0,
                  *, paths: int | None = None, draft_rows: int = 8, convention: str | None = None,
                  tol: float = 1e-6, max_batch: int | None = None, sampling=None,
                  draft_sampling=None, inputs: str = "probs", budget_s: float | None = None,
                  max_seconds: float | None = MAX_SECONDS,
                  max_memory_bytes: int | None = None) -> SamplerReport:
    """Check ``sampler`` against the exact law; see the module docstring for the modes.

    Parameters
    ----------
    sampler : callable
        Canonical signature ``sampler(drafts, q, p, generator)`` (``mode="coins"`` and
        ``"coins-tau"``: the coin-driven signature ``sampler(drafts, q, p, uniforms)``).
    verifier : name, ``"module:function"``, spec or callable
        The law the sampler claims to implement (``law`` mode); ``lossless`` mode only uses
        its number of paths and drafting scheme; ``coins`` mode its name as the default
        convention.
    instances : list of Instance or DraftRows, optional
        Default [`default_instances`][spectheory.testing.sampler.default_instances]
        (prefix-dependent rows, zeros, V >= 3, L >= 3).
    samples : int or "auto"
        Total sampler outputs, split evenly over instances and draft rows (coins mode: rows of
        coins compared). ``"auto"`` (with ``budget_s``): the largest count whose run fits the
        budget, measured by pilot checks on the same rows (`spectheory.testing.budget`).
    alpha : float in (0, 1)
        Family-wise false-alarm rate: a correct sampler fails with probability at most
        ``alpha`` (Bonferroni over one global and one per-row chi-square).
    mode : {"law", "lossless", "coins", "coins-tau"}
        ``"coins-tau"`` compares the accepted counts only (and that Y is possible), for samplers
        that draw their correction token with their own noise; a sampler's ``coin_convention``
        attribute maps the kit's coins onto its engine's (`spectheory.testing.layouts`).
    seed : int
        Seeds the drafts and the generator handed to the sampler (fixed seed: a fixed verdict).
    paths : int, optional
        K for K-path samplers (default 1).
    draft_rows : int
        Fixed draft rows per table instance (``law`` mode).
    convention : {"token", "block"}, optional
        Coins mode: the coin convention (default the verifier's name when it is one).
    tol : float
        Coins mode: a row whose uniform lies within ``tol`` of a threshold it decides is
        skipped (float32 samplers round thresholds by ~1e-7; a float32 cumulative sum over V
        tokens may be off by up to about V 2^-24, so raise ``tol`` for float32 samplers at
        large V).
    max_batch : int, optional
        Most rows handed to one sampler call. Default: a batch of mixed draft rows when its inputs
        hold at most 2^25 floats; otherwise each draft row's repeats as stride-0 views
        (``x[b:b+1].expand(n, ...)``), at most 2^25 floats of inputs a call, or all of them in one
        call for a sampler with the attribute ``repeat_aware = True`` (one that computes the law of
        repeated inputs once, as [`make_sampler`][spectheory.testing.sampler.make_sampler]'s does).
    sampling, draft_sampling : optional
        Sampling parameters of the request (`spectheory.inputs.processing.parse_sampling`, e.g.
        ``"temperature=0"`` or ``"top_k=20,top_p=0.9"``). The sampler is handed the RAW target
        rows and must process them itself, as an engine does; the exact law (every mode) is the
        verifier's against the target rows processed by ``sampling``. Drafts are sampled from
        the draft rows processed by ``draft_sampling`` (default: raw), which the sampler is
        handed as q.
    inputs : {"probs", "logits"}
        How the target rows are handed: probabilities (float64), or float32 logits log p (-inf
        for a zero) that the sampler turns into probabilities with its own float32 softmax; the
        law is then computed from those float32 logits (`spectheory.inputs.processing.sampler_setup`).
    budget_s : float, optional
        With ``samples="auto"``: seconds for the whole call. Pilot checks of 32, 128, 512, ...
        samples (the same rows, the same seed) take about a tenth of it and measure the cost per
        sample, statistics included; the run then takes the largest sample count whose predicted
        cost fits (for a sampler whose cost is proportional to its rows, a run stays within
        about 20% of the budget once the budget leaves room for two pilots; see the sampler
        check's documentation for samplers whose cost a row depends on the batch). Before the
        run, one line on stderr states the count and the
        total-variation bias it detects with 90% power at ``alpha`` (coins modes: the rate of
        differing decisions caught); the report carries it as ``budget``. The run hands the
        sampler at most `BUDGET_MIN_BATCH` (2^16) rows a call, or the pilots' largest call, so
        that the pilots' cost a sample holds; its verdict is that of
        ``check_sampler(samples=report.budget.samples, max_batch=report.budget.max_batch)`` with
        the same arguments.
    max_seconds : float or None
        Refuse ``samples`` whose run takes longer: before the first call when even the check's
        own least cost a sample (`MIN_SECONDS_PER_SAMPLE`) exceeds it, and with a
        `TimeLimitError` once the rate measured on the first calls projects past it. ``None``:
        no limit. Default one day.
    max_memory_bytes : int, optional
        Refuse, before anything is allocated, a check whose planned memory (rows, exact laws and
        count tables, and one call's inputs and outputs; counting is done call by call, so this
        does not grow with ``samples``) exceeds it. Default: `MAX_MEMORY_BYTES` (8 GiB) or half
        of the machine's memory, whichever is less.

    Returns
    -------
    SamplerReport

    Raises
    ------
    UserCodeError
        The sampler (or the verifier's law function) raised or called ``sys.exit`` (any code):
        one line naming the function. A sampler that returns something unusable (a wrong shape
        or dtype, NaN, a value out of range) does not raise: the report fails with a note
        naming the function and what it returned.
    SpectheoryError
        Bad arguments; ``SizeLimitError`` for a planned run over ``max_seconds`` or
        ``max_memory_bytes``; ``TimeLimitError`` for one that projects past ``max_seconds``.
    """
    call = dict(locals())  # the arguments, for a budgeted run's pilot and main checks
    if isinstance(samples, str) and samples == "auto":
        return _budgeted(call)
    if budget_s is not None:
        raise SpectheoryError(f"budget_s = {budget_s!r} sizes a run only with samples='auto' "
                              f"(got samples = {samples!r})")
    _check_args(samples, alpha, mode, tol)
    if isinstance(draft_rows, bool) or not isinstance(draft_rows, int) or draft_rows < 1:
        raise SpectheoryError(f"draft_rows = {draft_rows!r} must be a positive integer")
    if not callable(sampler):
        raise SpectheoryError(f"the sampler is {type(sampler).__name__}, not a function")
    if instances is None:
        instances = default_instances(mode)
    instances = list(instances)
    if not instances:
        raise SpectheoryError("no instances to check the sampler on")
    _refuse_size(samples, mode, instances, verifier, paths, draft_rows, max_seconds,
                 max_memory_bytes)
    sampler = _guarded(sampler, "sampler")  # every call through call_user
    _WHO.set(sampler._spectheory_label)
    _PACE.set(_Pace(samples, max_seconds))
    proc = None  # the target rows the law is computed against, from the rows handed over
    if sampling is not None or draft_sampling is not None or inputs != "probs":
        from ..inputs.processing import note_sampling, sampler_setup

        sampler, instances, proc = sampler_setup(sampler, instances, sampling, draft_sampling,
                                                 inputs)
        return note_sampling(_run_mode(sampler, verifier, instances, samples, alpha, mode, seed,
                                       paths, draft_rows, convention, tol, max_batch, proc),
                             sampling, draft_sampling, inputs)
    return _run_mode(sampler, verifier, instances, samples, alpha, mode, seed, paths, draft_rows,
                     convention, tol, max_batch, proc)


def _run_mode(sampler, verifier, instances, samples, alpha, mode, seed, paths, draft_rows,
              convention, tol, max_batch, proc):
    if mode in ("coins", "coins-tau"):
        if convention is None:
            convention = verifier if isinstance(verifier, str) else None
        if convention not in CONVENTIONS:
            raise SpectheoryError(f"{mode} mode needs a coin convention "
                                  f"({', '.join(CONVENTIONS)}); got {convention!r}")
        if paths not in (None, 1):
            raise SpectheoryError(f"{mode} mode compares single-path samplers (paths = 1)")
        return _coins_mode(sampler, convention, instances, samples, alpha, seed, tol, max_batch,
                           proc, mode)
    how = plan(verifier, paths)
    if mode == "law":
        return _law_mode(sampler, how, instances, samples, alpha, seed, draft_rows, max_batch,
                         proc)
    return _lossless_mode(sampler, how, instances, samples, alpha, seed, max_batch, proc)


def assert_sampler(sampler: Callable, verifier: Any = "block", **kwargs) -> SamplerReport:
    """[`check_sampler`][spectheory.testing.sampler.check_sampler], raising ``AssertionError`` with
    the report's text on failure; returns the report when it passes. Takes every argument of
    ``check_sampler``, ``samples="auto"`` with ``budget_s`` included (``assert_sampler(sampler,
    "block", samples="auto", budget_s=600)`` sizes the check to about ten minutes)."""
    report = check_sampler(sampler, verifier, **kwargs)
    if not report.passed:
        raise AssertionError(str(report))
    return report


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
            x = torch.as_tensor(inst, dtype=torch.float64)
            if x.dim() != 2:
                raise SpectheoryError(f"proposal rows must be a tensor [R, V], not of shape "
                                      f"{list(x.shape)}")
            out.append(x)
    return out


def default_proposal_rows() -> list:
    """Default rows for [`check_proposal`][spectheory.testing.sampler.check_proposal]: draft rows of
    [`default_instances`][spectheory.testing.sampler.default_instances] and four Dirichlet(1) rows
    over V = 100 (so that top-50 filtering drops mass)."""
    rng = np.random.default_rng(100)
    wide = torch.as_tensor(rng.dirichlet(np.ones(100), size=4))
    return default_instances() + [wide]


def check_proposal(draft_sampler: Callable, instances: Sequence | None = None,
                   samples: int = 100_000, alpha: float = 1e-3, seed: int = 0, *,
                   rows: int = 8) -> SamplerReport:
    """Does ``draft_sampler`` sample from the q it reports?

    ``draft_sampler(q_rows [B, V], generator) -> (tokens [B] int64, q_reported [B, V])``: given the
    draft model's distributions (rows of the instances' draft tables at sampled prefixes, or tensors
    [R, V] of rows), it draws one token per row (after whatever processing it does: temperature,
    top-k, greedy) and returns the distribution it will hand the verifier. For each input row,
    repeated, the token counts are compared with the mean reported q (pooled chi-square, Bonferroni
    over one global and one per-row test: family-wise false-alarm rate ``alpha``). Catches greedy
    drafts handed a soft q (Hugging Face transformers #30778) and top-k-filtered drafts handed the
    raw q (#47932). Default rows:
    [`default_proposal_rows`][spectheory.testing.sampler.default_proposal_rows].
    """
    _check_args(samples, alpha)
    if not callable(draft_sampler):
        raise SpectheoryError(f"the draft sampler is {type(draft_sampler).__name__}, "
                              f"not a function")
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise SpectheoryError(f"rows = {rows!r} must be a positive integer")
    _refuse_time(samples, MAX_SECONDS)
    draft_sampler = _guarded(draft_sampler, "draft sampler")
    who = draft_sampler._spectheory_label
    g = torch.Generator().manual_seed(seed)
    sets = _proposal_rows(default_proposal_rows() if instances is None else list(instances),
                          rows, g)
    R = sum(x.shape[0] for x in sets)
    per = _split(samples, R)
    if min(per) < 1:
        raise SpectheoryError(f"samples = {samples} is fewer than the {R} proposal rows")
    tests, worst, impossible, notes = [], None, None, []
    r = 0
    sg = torch.Generator().manual_seed(seed + 1)
    for set_i, qs in enumerate(sets):
        V = qs.shape[1]
        for j in range(qs.shape[0]):
            n = per[r]
            r += 1
            obs, rep = np.zeros(V, dtype=np.int64), torch.zeros(V, dtype=torch.float64)
            chunk = max(1, MAX_CALL_FLOATS // V)
            for s in range(0, n, chunk):
                m = min(chunk, n - s)
                out = draft_sampler(qs[j:j + 1].expand(m, V).clone(), sg)
                if not isinstance(out, (tuple, list)) or len(out) != 2:
                    return _failed("proposal", samples, alpha, "proposal",
                                   f"{who} returned {type(out).__name__}, not (tokens [B], "
                                   f"q_reported [B, V])", R)
                t, note = _as_index(out[0], "tokens")
                if note is None:
                    try:
                        qr = torch.as_tensor(out[1]).to(torch.float64).cpu()
                    except Exception:  # noqa: BLE001 - anything that is not array-like
                        note = f"q_reported of type {type(out[1]).__name__}, not a tensor"
                if note:
                    return _failed("proposal", samples, alpha, "proposal", f"{who} returned {note}",
                                   R)
                if t.shape[0] != m or tuple(qr.shape) != (m, V):
                    return _failed("proposal", samples, alpha, "proposal",
                                   f"{who} returned tokens {list(t.shape)} and q "
                                   f"{list(qr.shape)} for a batch of {m} rows of V = {V}", R)
                if ((t < 0) | (t >= V)).any():
                    return _failed("proposal", samples, alpha, "proposal",
                                   f"{who} returned a token outside 0..{V - 1}", R)
                bad = ~torch.isfinite(qr).all(1) | (qr < 0).any(1) | \
                    ((qr.sum(1) - 1).abs() > 1e-6)
                if bad.any():
                    return _failed("proposal", samples, alpha, "proposal",
                                   f"{who} reported a q for row {j} (set {set_i}) that is not "
                                   f"a distribution (negative, NaN or not summing to 1)", R)
                obs += np.bincount(t.numpy(), minlength=V)
                rep += qr.sum(0)
            probs = (rep / n).numpy()
            test = stats.row_chi_square(obs, probs, n, MIN_EXPECTED)
            tests.append(test)

            def label(c, set_i=set_i, j=j):
                where = f"row set {set_i}, row {j}"
                return f"{where}: pooled tokens" if c < 0 else f"{where}: token {int(c)}"

            impossible, worst = _cells(test, probs, obs, label, "reported probability 0",
                                       impossible, worst)
    return _report("proposal", tests, samples, alpha, "proposal", worst, impossible)


def assert_proposal(draft_sampler: Callable, **kwargs) -> SamplerReport:
    """[`check_proposal`][spectheory.testing.sampler.check_proposal], raising ``AssertionError``
    with the report's text on failure; returns the report when it passes."""
    report = check_proposal(draft_sampler, **kwargs)
    if not report.passed:
        raise AssertionError(str(report))
    return report


__all__ = ["CONVENTIONS", "Cell", "CoinMismatch", "DraftRows", "MODES", "SamplerReport",
           "assert_proposal", "assert_sampler", "check_proposal", "check_sampler",
           "default_instances", "default_proposal_rows", "make_sampler",
           "reference_coin_sampler"]
