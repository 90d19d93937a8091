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

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

import torch

from ..errors import SpectheoryError

#: Sampler check modes.
MODES = ("law", "lossless", "coins")
#: Coin conventions of :func:`reference_coin_sampler` (see its docstring).
CONVENTIONS = ("token", "block")
#: Power at which :attr:`SamplerReport.min_detectable_tv` is stated.
POWER = 0.9
#: Cells with an expected count below this are pooled (per draft row) before the chi-square.
MIN_EXPECTED = 5.0


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
        Family-wise (Bonferroni-adjusted) p-value; 0.0 when an impossible outcome was observed
        or a coin decision differs.
    mode : str
        ``"law"``, ``"lossless"``, ``"coins"`` or ``"proposal"``.
    samples : int
        Sampler outputs drawn (coins mode: rows compared).
    alpha : float
        Family-wise false-alarm rate of the check.
    worst_cell : Cell or None
        The cell with the largest standardised residual |O - E| / sqrt(E).
    min_detectable_tv : float
        Smallest total-variation bias (per draft row, on the test's cells after pooling) detected
        with 90% power at this sample size and ``alpha`` (0.0 in coins mode: every mismatch is
        seen).
    verifier : str
        Name of the reference verifier (or proposal).
    statistic, dof : float, int
        Chi-square statistic and degrees of freedom of the global test.
    rows : int
        Draft rows (law / coins mode) or proposal rows tested.
    mismatch : CoinMismatch or None
        Coins mode: the first differing decision.
    ambiguous : int
        Coins mode: decisions skipped because a uniform lay within ``tol`` of a threshold.
    notes : list of str
        Further findings (impossible outcomes, shape errors).
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
        raise NotImplementedError

    def to_json(self) -> dict:
        """The report as JSON-ready values."""
        raise NotImplementedError


def make_sampler(verifier: Any = "block", paths: int | None = None) -> Callable:
    """spectheory's own sampler for any verifier, in the canonical signature.

    The law comes from ``get_verifier(verifier).law`` and the draw from
    :func:`spectheory.sampling.sample_output`. With ``paths`` K > 1 the returned sampler takes the
    K-path form and returns ``(path, accepted, token)``.
    """
    raise NotImplementedError


def reference_coin_sampler(convention: str = "block") -> Callable:
    """spectheory's coin-driven reference ``f(drafts [B, L], q, p, uniforms [B, L+1]) ->
    (accepted, token)``.

    Conventions (``uniforms[:, i-1]`` is position i's coin, in (0, 1]; ``uniforms[:, L]`` the
    token's coin, in [0, 1)):

    * ``"token"``: accept X_i while u_i <= min(1, p(X_i|X^{i-1}) / q(X_i|X^{i-1})); tau is the
      number of positions accepted before the first rejection;
    * ``"block"``: h_i as in block verification (Sun et al., arXiv 2403.10444), tau = the last
      i in 1..L with u_i <= h_i (0 if none);

    then Y = :func:`spectheory.sampling.inverse_cdf` of the correction row (normalised
    max(w_tau p - q, 0), or p(.|X^L) at tau = L) at u_{L+1}.
    """
    raise NotImplementedError


def default_instances(mode: str = "law") -> list:
    """The default instances: prefix-dependent random tables with V >= 3, L >= 3 (plus one
    with zeros where the other model has mass)."""
    raise NotImplementedError


def check_sampler(sampler: Callable, verifier: Any = "block", instances: Sequence | None = None,
                  samples: int = 100_000, alpha: float = 1e-3, mode: str = "law", seed: int = 0,
                  *, paths: int | None = None, draft_rows: int = 8, convention: str | None = None,
                  tol: float = 1e-6, max_batch: int | None = None) -> SamplerReport:
    """Check ``sampler`` against the exact law; see the module docstring for the modes.

    Parameters
    ----------
    sampler : callable
        Canonical signature (``mode="coins"``: the coin-driven signature).
    verifier : name, ``"module:function"``, spec or callable
        The law the sampler claims to implement (``law`` and ``coins`` modes); ``lossless``
        mode only uses it for its number of paths and drafting scheme.
    instances : list of Instance or DraftRows, optional
        Default :func:`default_instances`.
    samples : int
        Total sampler outputs (split evenly over instances and draft rows).
    alpha : float in (0, 1)
        Family-wise false-alarm rate.
    mode : {"law", "lossless", "coins"}
    seed : int
        Seeds the drafts and the generator handed to the sampler.
    paths : int, optional
        K for K-path samplers (default the verifier's own: 1 for single-path verifiers).
    draft_rows : int
        Fixed draft rows per table instance (``law`` and ``coins`` modes).
    convention : {"token", "block"}, optional
        Coins mode: the coin convention (default the verifier's name when it is one).
    tol : float
        Coins mode: a decision whose uniform lies within ``tol`` of its threshold is skipped.
    max_batch : int, optional
        Most rows handed to one sampler call (default: about 2^25 floats of inputs).
    """
    raise NotImplementedError


def assert_sampler(sampler: Callable, verifier: Any = "block", **kwargs) -> SamplerReport:
    """:func:`check_sampler`, raising ``AssertionError`` with the report's text on failure."""
    raise NotImplementedError


def check_proposal(draft_sampler: Callable, instances: Sequence | None = None,
                   samples: int = 100_000, alpha: float = 1e-3, seed: int = 0, *,
                   rows: int = 8) -> SamplerReport:
    """Does ``draft_sampler`` sample from the q it reports?

    ``draft_sampler(q_rows [B, V], generator) -> (tokens [B] int64, q_reported [B, V])``: given
    the draft model's distributions (rows of the instances' draft tables, or a tensor [R, V] of
    rows), it draws one token per row (after whatever processing it does: temperature, top-k,
    greedy) and returns the distribution it will hand the verifier. The token counts per input row
    are compared with the reported q (chi-square, Bonferroni over rows, family-wise ``alpha``).
    Catches greedy drafts handed a soft q and top-k-filtered drafts handed the raw q.
    """
    raise NotImplementedError


def assert_proposal(draft_sampler: Callable, **kwargs) -> SamplerReport:
    """:func:`check_proposal`, raising ``AssertionError`` with the report's text on failure."""
    raise NotImplementedError


__all__ = ["CONVENTIONS", "Cell", "CoinMismatch", "DraftRows", "MODES", "SamplerReport",
           "assert_proposal", "assert_sampler", "check_proposal", "check_sampler",
           "default_instances", "make_sampler", "reference_coin_sampler"]
