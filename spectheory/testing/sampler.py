"""Check a rejection sampler (yours, or an engine's through an adapter) against the exact law.

The canonical sampler signature (torch tensors)::

    sampler(drafts [B, L] int64, q [B, L, V], p [B, L+1, V], generator)
        -> (accepted [B] int64, token [B] int64)

``q[b, i] = q(.|X^i)`` (i = 0..L-1) and ``p[b, i] = p(.|X^i)`` (i = 0..L) are the draft and target
rows along the drafted path, ``accepted`` is tau (0 <= tau <= L) and ``token`` the correction or
bonus token Y; the output block is (X_1..X_tau, Y). A K-path sampler (``paths=K``) takes
``drafts [B, K, L]``, ``q [B, K, L, V]``, ``p [B, K, L+1, V]`` and returns ``(path [B],
accepted [B], token [B])``. A coin-driven sampler (``mode="coins"``) takes explicit uniforms
instead of a generator: ``sampler(drafts, q, p, uniforms [B, L+1]) -> (accepted, token)`` under a
declared convention (:data:`CONVENTIONS`).

Three checks (:func:`check_sampler`):

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
  (:func:`reference_coin_sampler`) on the same uniforms; the first mismatch is reported with its
  inputs.

:func:`check_proposal` checks the drafting side: does a draft sampler sample from the q it hands
the verifier (greedy drafts with a soft q, top-k-filtered drafts with the raw q)?

Every report states the smallest total-variation bias the test detects with 90% power at its
sample size (:attr:`SamplerReport.min_detectable_tv`), from the non-central chi-square law of the
statistic under the least-favourable bias of that total variation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np
from .._lazy import torch

from ..errors import SpectheoryError
from ..instances import Instance
from ..multipath import draft_rows as _rows_along
from ..multipath import sample_drafts
from ..random_instances import random_instance
from ..registry import plan
from ..sampling import inverse_cdf, sample_output
from ..tree import levels, path_probabilities
from ..verifiers.block import block_weights
from ..verifiers.common import drafted_probs, residual_corrections, residuals
from . import stats

#: Sampler check modes.
MODES = ("law", "lossless", "coins")
#: Coin conventions of :func:`reference_coin_sampler` (see its docstring).
CONVENTIONS = ("token", "block")
#: Power at which :attr:`SamplerReport.min_detectable_tv` is stated.
POWER = 0.9
#: Cells with an expected count below this are pooled (per draft row) before the chi-square.
MIN_EXPECTED = 5.0
#: Default bound on the floats of the inputs of one sampler call (rows x K (2L+1) V).
MAX_CALL_FLOATS = 2**25
#: Largest number of output sequences V^(L+1) that ``mode="lossless"`` enumerates.
MAX_LOSSLESS_CELLS = 2**22
#: Smallest positive position coin used in the pinned rows of ``mode="coins"``.
TINY_COIN = 2.0**-53


class DraftRows(NamedTuple):
    """Fixed drafts with the rows along them, for ``mode="law"`` at any vocabulary size.

    ``drafts [B, L]`` (or ``[B, K, L]``), ``q [B, L, V]`` (``[B, K, L, V]``), ``p [B, L+1, V]``
    (``[B, K, L+1, V]``), torch tensors. Pass a list of these as ``instances`` when the rows do
    not come from a table instance (e.g. V = 50,000).
    """

    drafts: torch.Tensor
    q: torch.Tensor
    p: torch.Tensor


class Cell(NamedTuple):
    """One cell (or pooled bin) of a test: a label, the observed and the expected count."""

    label: str
    observed: float
    expected: float


class CoinMismatch(NamedTuple):
    """The first decision of a coin-driven sampler that differs from the reference."""

    row: int
    drafts: list
    q: list
    p: list
    uniforms: list
    expected: tuple  # (tau, Y) of the reference
    got: tuple  # (tau, Y) of the sampler


@dataclass
class SamplerReport:
    """Result of :func:`check_sampler` / :func:`check_proposal`.

    Attributes
    ----------
    passed : bool
        ``p_value > alpha`` (coins mode: no mismatch).
    p_value : float
        Family-wise (Bonferroni-adjusted) p-value; 0.0 when an impossible outcome was observed,
        a coin decision differs or the sampler returned something invalid.
    mode : str
        ``"law"``, ``"lossless"``, ``"coins"`` or ``"proposal"``.
    samples : int
        Sampler outputs drawn (coins mode: rows compared).
    alpha : float
        Family-wise false-alarm rate of the check.
    worst_cell : Cell or None
        The cell with the largest standardised residual |O - E| / sqrt(E) (an impossible cell,
        expected 0, when one was observed).
    min_detectable_tv : float
        Smallest total-variation bias of every row's law (draft row, instance or proposal row; on
        the test's cells after pooling) detected with 90% power at this sample size and
        ``alpha`` (:func:`spectheory.testing.stats.min_detectable_tv`); 0.0 in coins mode
        (every differing decision is seen).
    verifier : str
        Name of the reference verifier or convention.
    statistic, dof : float, int
        Chi-square statistic and degrees of freedom of the global test.
    rows : int
        Rows tested: draft rows (law, coins), instances (lossless), proposal rows.
    mismatch : CoinMismatch or None
        Coins mode: the first differing decision.
    ambiguous : int
        Coins mode: rows skipped because a uniform lay within ``tol`` of a threshold.
    notes : list of str
        Further findings (impossible outcomes, invalid outputs).
    """

    passed: bool
    p_value: float
    mode: str
    samples: int
    alpha: float
    worst_cell: Cell | None
    min_detectable_tv: float
    verifier: str = ""
    statistic: float = 0.0
    dof: int = 0
    rows: int = 0
    mismatch: CoinMismatch | None = None
    ambiguous: int = 0
    notes: list = field(default_factory=list)

    def __str__(self) -> str:
        what = "check_proposal" if self.mode == "proposal" else "check_sampler"
        ref = (f"convention {self.verifier}" if self.mode == "coins"
               else f"verifier {self.verifier}" if self.mode != "proposal" else "reported q")
        lines = [f"{what} ({self.mode} mode, {ref}): {'PASS' if self.passed else 'FAIL'}"]
        unit = {"law": "draft rows", "coins": "draft rows", "lossless": "instances",
                "proposal": "proposal rows"}[self.mode]
        if self.mode == "coins":
            lines.append(f"  {self.samples:,} rows of coins compared with the reference, "
                         f"{self.ambiguous:,} skipped (a uniform within tolerance of its "
                         f"threshold)")
            m = self.mismatch
            if m is not None:
                lines.append(f"  first mismatch at row {m.row}: drafts {m.drafts}, uniforms "
                             f"{m.uniforms}")
                lines.append(f"    reference (tau, Y) = {m.expected}, sampler (tau, Y) = "
                             f"{m.got}")
                lines.append(f"    q rows {m.q}")
                lines.append(f"    p rows {m.p}")
        elif self.dof == 0 and self.worst_cell is None and self.notes:
            pass  # no test was run: the notes say why
        else:
            lines.append(f"  p-value {self.p_value:.3g} (family-wise false-alarm rate alpha = "
                         f"{self.alpha:g}; {self.rows} {unit}, {self.samples:,} samples)")
            lines.append(f"  global chi-square {self.statistic:.1f} on {self.dof} degrees of "
                         f"freedom")
            if self.worst_cell is not None:
                c = self.worst_cell
                lines.append(f"  worst cell: {c.label}: observed {c.observed:g}, expected "
                             f"{c.expected:.1f}")
            lines.append(f"  detects a total-variation bias >= {self.min_detectable_tv:.3g} "
                         f"in every row's law with {POWER:.0%} power")
        lines.extend(f"  {n}" for n in self.notes)
        return "\n".join(lines)

    def to_json(self) -> dict:
        """The report as JSON-ready values."""
        out = {"passed": bool(self.passed), "p_value": float(self.p_value), "mode": self.mode,
               "samples": int(self.samples), "alpha": float(self.alpha),
               "worst_cell": self.worst_cell._asdict() if self.worst_cell else None,
               "min_detectable_tv": _finite(self.min_detectable_tv), "power": POWER,
               "verifier": self.verifier, "statistic": float(self.statistic),
               "dof": int(self.dof), "rows": int(self.rows),
               "mismatch": self.mismatch._asdict() if self.mismatch else None,
               "ambiguous": int(self.ambiguous), "notes": list(self.notes)}
        return out


def _finite(x: float):
    return float(x) if math.isfinite(x) else None


# ----------------------------------------------------------------------------- samplers


def _one_law_draw(law, n: int, u: torch.Tensor):
    """(k, tau, Y) [n] from one law (batch 1) with uniforms [n, 2]; the same arithmetic as
    :func:`spectheory.sampling.sample_output` on n copies of the law, at the cost of one row."""
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
    :func:`spectheory.sampling.sample_output` (inverse CDF, two uniforms per row). With ``paths``
    K > 1 the returned sampler takes the K-path form and returns ``(path, accepted, token)``.
    When all of drafts, q and p are one row repeated by a stride-0 view (``x[:1].expand(n, ...)``,
    as :func:`check_sampler` hands them over at large vocabularies), or a small batch repeats
    rows, the law of each distinct input is computed once; the draws are the same. The sampler
    carries ``repeat_aware = True``, so :func:`check_sampler` hands it each draft row's repeats in
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
        elif n > 256 and n * (q3[0].numel() + p3[0].numel()) <= 2**23:
            # repeated rows (as in a check): the law of each distinct input once
            flat = torch.cat([d3.reshape(n, -1).to(q3.dtype), q3.reshape(n, -1),
                              p3.reshape(n, -1)], dim=1)
            uniq, inv = torch.unique(flat, dim=0, return_inverse=True)
            first = torch.zeros(len(uniq), dtype=torch.long, device=inv.device)
            first.scatter_(0, inv, torch.arange(n, device=inv.device))
            law = spec.law(d3[first], q3[first], p3[first])
            stop = torch.as_tensor(law.stop)[inv]
            corr = torch.as_tensor(law.correction)[inv]
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


def _coin_decide(convention: str, drafts, q, p, uniforms, tol: float = 0.0):
    """Reference decisions (tau, Y) and a mask of rows whose decision is ambiguous (a uniform
    within ``tol`` of its threshold; a threshold of exactly 0 is never ambiguous)."""
    if convention not in CONVENTIONS:
        raise SpectheoryError(f"unknown coin convention {convention!r}; choose from "
                              f"{', '.join(CONVENTIONS)}")
    Bsz, L = drafts.shape
    u = uniforms.to(torch.float64)
    thr, corr = _coin_thresholds(convention, drafts, q.to(torch.float64), p.to(torch.float64))
    ok = u[:, :L] <= thr
    # thresholds of exactly 0 (p(X_i) = 0) or 1 (p >= q) are exact in any float arithmetic
    near = ((u[:, :L] - thr).abs() <= tol) & (thr != 0) & (thr != 1)
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
    ambiguous |= (near_lo | near_hi) & (tol > 0)
    return tau, y, ambiguous


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

    then Y = :func:`spectheory.sampling.inverse_cdf` of the correction row (p(.|X^L) at tau = L)
    at u_{L+1}: the first index whose cumulative sum exceeds u_{L+1} times the row's total.
    With coins uniform on their ranges, the law of (tau, Y) is exactly the verifier's law.
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
    from ..models import TableModel

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
    from ..models import TableModel

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


def _outputs(out, K: int, n: int, L: int, V: int):
    """Validate a sampler's return value; (k, tau, y) long tensors [n] or a note."""
    want = 2 if K == 1 else 3
    if not isinstance(out, (tuple, list)) or len(out) != want:
        return None, (f"the sampler returned {type(out).__name__}"
                      f"{' of length ' + str(len(out)) if isinstance(out, (tuple, list)) else ''}"
                      f", not a tuple of {want} tensors "
                      f"({'accepted, token' if K == 1 else 'path, accepted, token'})")
    parts = [torch.as_tensor(x).reshape(-1).to(torch.long).cpu() for x in out]
    if any(x.shape[0] != n for x in parts):
        return None, (f"the sampler returned outputs of lengths {[x.shape[0] for x in parts]}"
                      f" for a batch of {n}")
    if K == 1:
        parts = [torch.zeros(n, dtype=torch.long)] + parts
    k, tau, y = parts
    for name, x, hi in (("path", k, K - 1), ("accepted", tau, L), ("token", y, V - 1)):
        bad = (x < 0) | (x > hi)
        if bad.any():
            i = int(bad.nonzero()[0])
            return None, f"the sampler returned {name} = {int(x[i])} outside 0..{hi} (row {i})"
    return (k, tau, y), None


def _chunk(K: int, L: int, V: int, max_batch: int | None, sampler=None) -> int:
    if max_batch is None and getattr(sampler, "repeat_aware", False):
        return 2**62
    if max_batch is not None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise SpectheoryError(f"max_batch = {max_batch!r} must be a positive integer")
        return max_batch
    return max(1, MAX_CALL_FLOATS // (K * (2 * L + 1) * V))


def _run_repeated(sampler, rows: DraftRows, counts: list[int], generator, chunk: int):
    """Call the sampler on each draft row repeated counts[b] times, at most ``chunk`` rows a
    call. Inputs of at most :data:`MAX_CALL_FLOATS` floats in all are gathered into batches of
    interleaved draft rows; larger ones are handed over one draft row at a time as read-only
    stride-0 views. Returns (row index, k, tau, y) tensors or a note."""
    d, q, p = rows
    Bn, K, L = d.shape
    V = q.shape[-1]
    single = K == 1
    total = sum(counts)
    row_ids, ks, taus, ys = [], [], [], []

    def call(dd, qq, pp, ids):
        if single:
            out = sampler(dd[:, 0], qq[:, 0], pp[:, 0], generator)
        else:
            out = sampler(dd, qq, pp, generator)
        res, note = _outputs(out, K, dd.shape[0], L, V)
        if note:
            return note
        row_ids.append(ids)
        ks.append(res[0])
        taus.append(res[1])
        ys.append(res[2])
        return None

    if total * K * (2 * L + 1) * V <= MAX_CALL_FLOATS:
        # draft rows interleaved, so that a sampler mixing up rows of a batch is seen
        ids = torch.repeat_interleave(torch.arange(Bn), torch.as_tensor(counts))
        ids = ids[torch.randperm(len(ids), generator=generator)]
        for s in range(0, total, chunk):
            part = ids[s:s + chunk]
            note = call(d[part], q[part], p[part], part)
            if note:
                return None, note
    else:
        for b in range(Bn):
            left = counts[b]
            while left > 0:
                m = min(left, chunk)
                note = call(d[b:b + 1].expand(m, -1, -1), q[b:b + 1].expand(m, -1, -1, -1),
                            p[b:b + 1].expand(m, -1, -1, -1), torch.full((m,), b))
                if note:
                    return None, note
                left -= m
    return (torch.cat(row_ids), torch.cat(ks), torch.cat(taus), torch.cat(ys)), None


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _failed(mode, samples, alpha, name, note, rows=0) -> SamplerReport:
    return SamplerReport(False, 0.0, mode, samples, alpha, None, float("nan"), name, rows=rows,
                         notes=[note])


def _tokens(x) -> tuple:
    return tuple(int(t) for t in x)


# ----------------------------------------------------------------------------- law mode


def _law_mode(sampler, how, instances, samples, alpha, seed, draft_rows, max_batch):
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
        law = spec.law(d, q, p)
        stop = torch.as_tensor(law.stop, dtype=torch.float64)
        corr = torch.as_tensor(law.correction, dtype=torch.float64)
        got, note = _run_repeated(sampler, rows, counts, sg, _chunk(K, L, V, max_batch, sampler))
        if note:
            return _failed("law", samples, alpha, spec.name, note, n_rows)
        rid, k, tau, y = got
        C = K * (L + 1) * V
        cell = ((k * (L + 1) + tau) * V + y).numpy()
        rid = rid.numpy()
        dense = Bn * C <= 2**24
        if dense:
            table = np.bincount(rid * C + cell, minlength=Bn * C).reshape(Bn, C)
        else:
            order = np.argsort(rid, kind="stable")
            rid, cell = rid[order], cell[order]
            bounds = np.searchsorted(rid, np.arange(Bn + 1))
        for b in range(Bn):
            obs = table[b] if dense else np.bincount(cell[bounds[b]:bounds[b + 1]], minlength=C)
            probs = (stop[b].unsqueeze(-1) * corr[b]).reshape(-1).numpy()
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


def _lossless_mode(sampler, how, instances, samples, alpha, seed, max_batch):
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
        pl = levels(inst.target, 0, L + 1, False)
        chunk = _chunk(K, L, V, max_batch)
        seqs = []
        done = 0
        while done < n:
            m = min(chunk, n - done)
            d = sample_drafts(inst, K, m, how.drafting, g)
            q, p = _rows_along(ql, pl, d, L, V)
            dd = d.clone()  # the kit reads the drafts after the call
            out = sampler(dd[:, 0], q[:, 0], p[:, 0], sg) if K == 1 else sampler(dd, q, p, sg)
            res, note = _outputs(out, K, m, L, V)
            if note:
                return _failed("lossless", samples, alpha, spec.name, note, len(insts))
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
            seqs.append(node)
            done += m
        flat = torch.cat(seqs).numpy()
        obs = np.bincount(flat, minlength=V ** (L + 1))
        probs = path_probabilities(pl[: L + 1], torch.ones(1, dtype=torch.float64))[L + 1]
        probs = probs.numpy()
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


def _coins_mode(sampler, convention, instances, samples, alpha, seed, tol, max_batch):
    g = torch.Generator().manual_seed(seed)
    per = _split(samples, len(instances))
    checked = ambiguous = 0
    for inst_i, (inst, n) in enumerate(zip(instances, per)):
        if n < 1:
            continue
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
        for r, (pos, tok) in enumerate(pins[: max(0, Bn // 8)]):
            u[r, :L] = pos
            u[r, L] = tok
        chunk = max(1, MAX_CALL_FLOATS // ((2 * L + 1) * V)) if max_batch is None else max_batch
        for s in range(0, Bn, chunk):
            sl = slice(s, min(Bn, s + chunk))
            out = sampler(d[sl].clone(), q[sl].clone(), p[sl].clone(), u[sl].clone())
            res, note = _outputs(out, 1, sl.stop - sl.start, L, V)
            if note:
                return _failed("coins", samples, alpha, convention, note, checked)
            _, tau, y = res
            rt, ry, amb = _coin_decide(convention, d[sl], q[sl], p[sl], u[sl], tol)
            bad = ((tau != rt) | (y != ry)) & ~amb
            ambiguous += int(amb.sum())
            if bad.any():
                i = int(bad.nonzero()[0])
                b = s + i
                mm = CoinMismatch(b, list(_tokens(d[b])), _round_rows(q[b], V),
                                  _round_rows(p[b], V), [float(v) for v in u[b]],
                                  (int(rt[i]), int(ry[i])), (int(tau[i]), int(y[i])))
                checked += i + 1
                rep = SamplerReport(False, 0.0, "coins", checked, alpha, None, 0.0, convention,
                                    rows=checked, mismatch=mm, ambiguous=ambiguous)
                rep.notes.append(f"instance {inst_i}: the sampler's decision differs from the "
                                 f"reference on the same uniforms")
                return rep
            checked += sl.stop - sl.start
    return SamplerReport(True, 1.0, "coins", checked, alpha, None, 0.0, convention,
                         rows=checked, ambiguous=ambiguous)


# ----------------------------------------------------------------------------- public checks


def check_sampler(sampler: Callable, verifier: Any = "block", instances: Sequence | None = None,
                  samples: int = 100_000, alpha: float = 1e-3, mode: str = "law", seed: int = 0,
                  *, paths: int | None = None, draft_rows: int = 8, convention: str | None = None,
                  tol: float = 1e-6, max_batch: int | None = None) -> SamplerReport:
    """Check ``sampler`` against the exact law; see the module docstring for the modes.

    Parameters
    ----------
    sampler : callable
        Canonical signature ``sampler(drafts, q, p, generator)`` (``mode="coins"``: the
        coin-driven signature ``sampler(drafts, q, p, uniforms)``).
    verifier : name, ``"module:function"``, spec or callable
        The law the sampler claims to implement (``law`` mode); ``lossless`` mode only uses
        its number of paths and drafting scheme; ``coins`` mode its name as the default
        convention.
    instances : list of Instance or DraftRows, optional
        Default :func:`default_instances` (prefix-dependent rows, zeros, V >= 3, L >= 3).
    samples : int
        Total sampler outputs, split evenly over instances and draft rows (coins mode: rows of
        coins compared).
    alpha : float in (0, 1)
        Family-wise false-alarm rate: a correct sampler fails with probability at most
        ``alpha`` (Bonferroni over one global and one per-row chi-square).
    mode : {"law", "lossless", "coins"}
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
        Most rows handed to one sampler call. Default: a batch of mixed draft rows when its
        inputs hold at most 2^25 floats; otherwise each draft row's repeats as stride-0 views
        (``x[b:b+1].expand(n, ...)``), at most 2^25 floats of inputs a call, or all of them in one
        call for a sampler with the attribute ``repeat_aware = True`` (one that computes the law
        of repeated inputs once, as :func:`make_sampler`'s does).

    Returns
    -------
    SamplerReport
    """
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
    if mode == "coins":
        if convention is None:
            convention = verifier if isinstance(verifier, str) else None
        if convention not in CONVENTIONS:
            raise SpectheoryError(f"coins mode needs a coin convention ({', '.join(CONVENTIONS)}); "
                                  f"got {convention!r}")
        if paths not in (None, 1):
            raise SpectheoryError("coins mode compares single-path samplers (paths = 1)")
        return _coins_mode(sampler, convention, instances, samples, alpha, seed, tol, max_batch)
    how = plan(verifier, paths)
    if mode == "law":
        return _law_mode(sampler, how, instances, samples, alpha, seed, draft_rows, max_batch)
    return _lossless_mode(sampler, how, instances, samples, alpha, seed, max_batch)


def assert_sampler(sampler: Callable, verifier: Any = "block", **kwargs) -> SamplerReport:
    """:func:`check_sampler`, raising ``AssertionError`` with the report's text on failure;
    returns the report when it passes."""
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
    """Default rows for :func:`check_proposal`: draft rows of :func:`default_instances` and four
    Dirichlet(1) rows over V = 100 (so that top-50 filtering drops mass)."""
    rng = np.random.default_rng(100)
    wide = torch.as_tensor(rng.dirichlet(np.ones(100), size=4))
    return default_instances() + [wide]


def check_proposal(draft_sampler: Callable, instances: Sequence | None = None,
                   samples: int = 100_000, alpha: float = 1e-3, seed: int = 0, *,
                   rows: int = 8) -> SamplerReport:
    """Does ``draft_sampler`` sample from the q it reports?

    ``draft_sampler(q_rows [B, V], generator) -> (tokens [B] int64, q_reported [B, V])``: given
    the draft model's distributions (rows of the instances' draft tables at sampled prefixes, or
    tensors [R, V] of rows), it draws one token per row (after whatever processing it does:
    temperature, top-k, greedy) and returns the distribution it will hand the verifier. For each
    input row, repeated, the token counts are compared with the mean reported q (pooled
    chi-square, Bonferroni over one global and one per-row test: family-wise false-alarm rate
    ``alpha``). Catches greedy drafts handed a soft q (Hugging Face transformers #30778) and
    top-k-filtered drafts handed the raw q (#47932). Default rows: :func:`default_proposal_rows`.
    """
    _check_args(samples, alpha)
    if not callable(draft_sampler):
        raise SpectheoryError(f"the draft sampler is {type(draft_sampler).__name__}, "
                              f"not a function")
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise SpectheoryError(f"rows = {rows!r} must be a positive integer")
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
            toks, rep = [], torch.zeros(V, dtype=torch.float64)
            chunk = max(1, MAX_CALL_FLOATS // V)
            for s in range(0, n, chunk):
                m = min(chunk, n - s)
                out = draft_sampler(qs[j:j + 1].expand(m, V).clone(), sg)
                if not isinstance(out, (tuple, list)) or len(out) != 2:
                    return _failed("proposal", samples, alpha, "proposal",
                                   "the draft sampler must return (tokens [B], q_reported [B, V])",
                                   R)
                t = torch.as_tensor(out[0]).reshape(-1).to(torch.long)
                qr = torch.as_tensor(out[1]).to(torch.float64)
                if t.shape[0] != m or tuple(qr.shape) != (m, V):
                    return _failed("proposal", samples, alpha, "proposal",
                                   f"the draft sampler returned tokens {list(t.shape)} and q "
                                   f"{list(qr.shape)} for a batch of {m} rows of V = {V}", R)
                if ((t < 0) | (t >= V)).any():
                    return _failed("proposal", samples, alpha, "proposal",
                                   f"the draft sampler returned a token outside 0..{V - 1}", R)
                bad = ~torch.isfinite(qr).all(1) | (qr < 0).any(1) | \
                    ((qr.sum(1) - 1).abs() > 1e-6)
                if bad.any():
                    return _failed("proposal", samples, alpha, "proposal",
                                   f"the reported q of row {j} (set {set_i}) is not a "
                                   f"distribution (negative, NaN or not summing to 1)", R)
                toks.append(t)
                rep += qr.sum(0)
            obs = np.bincount(torch.cat(toks).numpy(), minlength=V)
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
    """:func:`check_proposal`, raising ``AssertionError`` with the report's text on failure;
    returns the report when it passes."""
    report = check_proposal(draft_sampler, **kwargs)
    if not report.passed:
        raise AssertionError(str(report))
    return report


__all__ = ["CONVENTIONS", "Cell", "CoinMismatch", "DraftRows", "MODES", "SamplerReport",
           "assert_proposal", "assert_sampler", "check_proposal", "check_sampler",
           "default_instances", "default_proposal_rows", "make_sampler",
           "reference_coin_sampler"]
