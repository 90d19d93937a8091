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

Three checks ([`check_sampler`][spectheory.testing.checks.sampler.check_sampler]):

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
  ([`reference_coin_sampler`][spectheory.testing.checks.sampler.reference_coin_sampler]) on the same
  uniforms; the first mismatch is reported with its inputs.
* ``mode="coins-tau"``: the accepted count tau compared with the reference's on the same
  position coins, whatever noise the sampler draws its correction token with (an exponential
  race, Gumbel-max: vLLM); Y is only required to lie in the support of the reference's correction
  row (its law is checked in ``law`` mode).

A coin-driven sampler may declare its engine's coin convention as its attribute
``coin_convention`` (a [`CoinConvention`][spectheory.testing.engines.layouts.CoinConvention]); the
kit then hands it its coins mapped onto the engine's range and dtype (the pinned ends onto the
engine's ends), so that the engine's comparison is tested as the engine runs it.

[`check_proposal`][spectheory.testing.checks.sampler.check_proposal] checks the drafting side: does
a draft sampler sample from the q it hands the verifier (greedy drafts with a soft q, top-k-filtered
drafts with the raw q)?

Every report states the smallest total-variation bias the test detects with 90% power at its
sample size (`SamplerReport.min_detectable_tv`), from the non-central chi-square law of the
statistic under the least-favourable bias of that total variation. ``samples="auto"`` with
``budget_s`` sizes a run by time from pilot checks and states that bias before the run
(`spectheory.testing.statistics.budget`); a sample count past ``max_seconds`` or
``max_memory_bytes`` is refused before anything is allocated, and outputs are counted call by call,
so memory does not grow with ``samples``.

Layout: this module holds the orchestration (argument checks, the budgeted run, the dispatch to a
mode); each mode lives in its own module (`spectheory.testing.checks.law_mode`,
`spectheory.testing.checks.lossless_mode`, `spectheory.testing.checks.coins_mode`,
`spectheory.testing.checks.proposal_mode`) on shared lower modules
(`spectheory.testing.checks.calls`: calling and counting, pacing, context variables;
`spectheory.testing.checks.rows`: instances and draft rows; `spectheory.testing.checks.sizing`: time
and memory refusals; `spectheory.testing.checks.own_sampler`). Every name of those modules that this
module held before stays importable from it.

The sampler is user code: every call of it (and of a draft sampler, and of a user verifier's law)
goes through `spectheory.runtime.errors.call_user`, so an exception or ``sys.exit`` (any code, 0
included) in it raises one `UserCodeError` line naming the function; unusable return values
(wrong shapes, dtypes, NaN, values out of range) fail the report with one note naming the
function and what it returned.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np
from ...runtime._lazy import torch

from ...runtime.errors import guarded_check, OptionError, SpectheoryError, as_list
from ...registry import plan
from ..statistics import stats  # noqa: F401 (re-exported)
from ..statistics._args import level
from .report import (MIN_EXPECTED, POWER, Cell, CoinMismatch, DraftRows, SamplerReport,  # noqa: F401 (re-exported)
                     _finite, _guarded, _name_of, declared)
# The modes and the pieces they share, one module each; every name is importable from here too.
from .calls import (COUNT_CHUNK, _budget_bound, _caller_bound, kit_seed, MAX_CALL_FLOATS, PROJECT_AFTER_S, _PACE, _ROW_LAWS,  # noqa: F401
                    WATCHDOG_FACTOR, WATCHDOG_SLACK_S, _WHO, _Pace, _watchdog, _as_index, _cells, _chunk, _collect_law, _failed, _outputs,
                    _pace_add, _report, _row_counts, _split, _tokens)
from .rows import (_dims, _equal_at_some_nodes, _fixed_rows, _zeroed_instance,  # noqa: F401
                   default_instances)
from .own_sampler import _is_repeat, _one_law_draw, make_sampler  # noqa: F401
from .coins_mode import (CONVENTIONS, TINY_COIN, _coin_blocks, _coin_decide,  # noqa: F401
                         _coin_mismatch, _coin_support, _coin_thresholds, _coins_mode,
                         _engine_convention, _refuse_kind, _round_rows,
                         reference_coin_sampler)
from .law_mode import _law_mode  # noqa: F401
from .lossless_mode import MAX_LOSSLESS_CELLS, _lossless_mode  # noqa: F401
from .proposal_mode import _proposal_mode, _proposal_rows, default_proposal_rows  # noqa: F401
from .sizing import (BYTES_PER_SAMPLE, MAX_MEMORY_BYTES, MAX_SECONDS,  # noqa: F401
                     MIN_SECONDS_PER_SAMPLE, _min_samples, _planned_bytes, _refuse_size,
                     _refuse_time)
# names this module imported before the split, importable from it as they were
import contextvars  # noqa: F401,E402
import math  # noqa: F401,E402
from ...runtime.errors import TimeLimitError, call_user  # noqa: F401,E402
from ...inputs.instances import Instance  # noqa: F401,E402
from ...engine.joint import draft_rows as _rows_along  # noqa: F401,E402
from ...engine.sampling import sample_drafts  # noqa: F401,E402
from ...inputs.random_instances import random_instance  # noqa: F401,E402
from ...sampling import inverse_cdf, sample_output  # noqa: F401,E402
from ...engine.seqtree import levels, path_probabilities  # noqa: F401,E402
from ...verifiers.block import block_weights  # noqa: F401,E402
from ...verifiers.common import drafted_probs, residual_corrections, residuals  # noqa: F401,E402


from .rows import MODES  # noqa: E402 (the sampler check's modes)
from ...runtime.limits import shown as _repr_cut

#: Budgeted runs hand the sampler at most this many rows a call, or the pilots' largest call.
BUDGET_MIN_BATCH = 2**16


def _check_args(samples, alpha, mode=None, tol=None) -> float:
    """Refuse bad common arguments in one line; returns ``alpha`` as a float."""
    from ...runtime.limits import MAX_LIMIT, shown

    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or \
            not 1 <= samples <= MAX_LIMIT:  # 10^400 overflowed the float of its least time
        raise SpectheoryError(f"samples = {shown(samples)} must be a positive integer of at "
                              f"most {MAX_LIMIT:.0e}")
    alpha = level("alpha", alpha)  # numpy floats too; a string, None, a tensor: its type named
    if mode is not None and mode not in MODES:
        raise SpectheoryError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if tol is not None and not (isinstance(tol, (int, float)) and 0 <= tol < 1):
        raise SpectheoryError(f"tol = {tol!r} must lie in [0, 1)")
    return alpha


def _refuse_unused(mode: str, convention) -> None:
    """Refuse an argument that does nothing in ``mode``: a coin ``convention`` outside the coins
    modes (the law and lossless modes hand the sampler a generator, not coins)."""
    if convention is not None and mode not in ("coins", "coins-tau"):
        raise OptionError(f"convention = {convention!r} applies to the coins modes only; mode "
                          f"{mode!r} checks the law of --verifier (verifier=) and would ignore it")


def _definitive(rep: SamplerReport) -> bool:
    """A failure that no correct sampler can produce: invalid outputs, a coin decision that
    differs, a sample on an outcome of probability 0."""
    if rep.passed or rep.needs_samples:  # too few samples for a test: not a finding
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

    instant.repeat_aware = bool(declared(call["sampler"], "repeat_aware", False))
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
    (`spectheory.testing.statistics.budget.size_run`)."""
    from ..statistics import budget as B

    start = time.perf_counter()
    if call["budget_s"] is None:
        raise SpectheoryError("samples='auto' needs budget_s, the seconds the whole check may take")
    budget_s = B.check_budget(call["budget_s"])
    with _budget_bound(budget_s):
        return _budgeted_run(call, start, budget_s)


def _budgeted_run(call: dict, start: float, budget_s: float) -> SamplerReport:
    """The budgeted check inside its watchdog."""
    from ..statistics import budget as B

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

    from .calls import UNTESTED_REPORTS

    def run(n: int, collect: bool = True):
        laws.clear()
        token = _ROW_LAWS.set(laws if collect else None)
        untested = UNTESTED_REPORTS.set(True)  # pilots may be too small to test: read, not refused
        inside = clock[0]
        sampler._spectheory_rows[0] = 0
        try:
            return check_sampler(**dict(call, samples=n)), clock[0] - inside
        finally:
            UNTESTED_REPORTS.reset(untested)
            _ROW_LAWS.reset(token)

    instant = _instant_sampler(call)

    def kit(n: int) -> float:
        t = time.perf_counter()
        untested = UNTESTED_REPORTS.set(True)
        try:
            check_sampler(**dict(call, sampler=instant, samples=n))
        finally:
            UNTESTED_REPORTS.reset(untested)
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
                         rate, call["max_batch"], "instance" if mode == "lossless" else "row")
    sys.stderr.write(f"check_sampler: {plan_.summary()}\n")
    sys.stderr.flush()
    report, _ = run(n, collect=False)
    report.budget = plan_
    return report


@guarded_check
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
        Default [`default_instances`][spectheory.testing.checks.sampler.default_instances]
        (prefix-dependent rows, zeros, V >= 3, L >= 3).
    samples : int or "auto"
        Total sampler outputs, split evenly over instances and draft rows (coins mode: rows of
        coins compared). ``"auto"`` (with ``budget_s``): the largest count whose run fits the
        budget, measured by pilot checks on the same rows (`spectheory.testing.statistics.budget`).
    alpha : float in (0, 1)
        Family-wise false-alarm rate: a correct sampler fails with probability at most
        ``alpha`` (Bonferroni over one global and one per-row chi-square).
    mode : {"law", "lossless", "coins", "coins-tau"}
        ``"coins-tau"`` compares the accepted counts only (and that Y is possible), for samplers
        that draw their correction token with their own noise; a sampler's ``coin_convention``
        attribute maps the kit's coins onto its engine's (`spectheory.testing.engines.layouts`).
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
        repeated inputs once, as [`make_sampler`][spectheory.testing.checks.sampler.make_sampler]'s
        does).
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
        sample, statistics included (the first pilot, and one whose rate jumps, runs twice and
        the faster run counts: a pause of the machine only adds time); the run then takes the
        largest sample count whose predicted cost fits (for a sampler whose cost is
        proportional to its rows, a run stays within about 20% of the budget once the budget
        leaves room for two pilots; see the sampler check's documentation for samplers whose
        cost a row depends on the batch). Before the run, one line on stderr states the count
        and the total-variation bias it detects with 90% power at ``alpha`` (coins modes: the
        rate of differing decisions caught); the report carries it as ``budget``. The run hands the
        sampler at most `BUDGET_MIN_BATCH` (2^16) rows a call, or the pilots' largest call, so
        that the pilots' cost a sample holds; its verdict is that of
        ``check_sampler(samples=report.budget.samples, max_batch=report.budget.max_batch)`` with
        the same arguments.
    max_seconds : float or None
        Refuse ``samples`` whose run takes longer: before the first call when even the check's
        own least cost a sample (`MIN_SECONDS_PER_SAMPLE`) exceeds it, and with a
        `TimeLimitError` once the rate measured on the first calls projects past it. Below the
        default, one call still running twice ``max_seconds`` plus 1 s after it began is
        stopped too (a call that never returns). ``None``: no limit. Default one day.
    max_memory_bytes : int, optional
        Refuse, before anything is allocated, a check whose planned memory (rows, exact laws and
        count tables, and one call's inputs and outputs; counting is done call by call, so this
        does not grow with ``samples``) exceeds it. Default: `MAX_MEMORY_BYTES` (8 GiB) or half
        of the machine's memory, whichever is less.

    Returns
    -------
    SamplerReport
        Its detection figure (`SamplerReport.detection`) is stated in text and JSON alike. A
        failing ``law`` report notes which law the counts do fit (the other coin rule's, or the
        raw target's under ``sampling``), computed from the counts.

    Raises
    ------
    TooFewSamplesError
        Too few samples for any degree of freedom to be tested: one line saying how many a test
        of every row needs (``needs_samples``); the command line exits 2. It is never a FAIL.
    UserCodeError
        The sampler (or the verifier's law function) raised or called ``sys.exit`` or
        ``os._exit`` (any code): one line naming the function. A sampler that returns something unusable (a wrong shape
        or dtype, NaN, a value out of range) does not raise: the report fails with a note
        naming the function and what it returned.
    SpectheoryError
        Bad arguments (``convention`` outside the coins modes; a sampler of the wrong kind for the
        mode; a coin-driven wrapper that hides the ``coin_convention`` of what it wraps);
        ``SizeLimitError`` for a planned run over ``max_seconds`` or ``max_memory_bytes``;
        ``TimeLimitError`` for one that projects past ``max_seconds``, for a sampler call
        that has run `WATCHDOG_FACTOR` times the budget plus `WATCHDOG_SLACK_S` in a
        budgeted run (``budget_s``), and for one call that has run `WATCHDOG_FACTOR` times a
        ``max_seconds`` below the default plus `WATCHDOG_SLACK_S` (a watchdog in the main
        thread).
    """
    seed = kit_seed(seed)
    call = dict(locals())  # the arguments, for a budgeted run's pilot and main checks
    if isinstance(samples, str) and samples == "auto":
        return _budgeted(call)
    if budget_s is not None:
        raise SpectheoryError(f"budget_s = {budget_s!r} sizes a run only with samples='auto' "
                              f"(got samples = {samples!r})")
    alpha = _check_args(samples, alpha, mode, tol)
    _refuse_unused(mode, convention)
    if isinstance(draft_rows, bool) or not isinstance(draft_rows, int) or draft_rows < 1:
        raise SpectheoryError(f"draft_rows = {draft_rows!r} must be a positive integer")
    if not callable(sampler):
        raise SpectheoryError(f"the sampler is {type(sampler).__name__}, not a function")
    if instances is None:
        instances = default_instances(mode)
    instances = as_list(instances, "instances", "spectheory Instances or DraftRows")
    if not instances:
        raise SpectheoryError("no instances to check the sampler on")
    _refuse_size(samples, mode, instances, verifier, paths, draft_rows, max_seconds,
                 max_memory_bytes)
    sampler = _guarded(sampler, "sampler")  # every call through call_user
    _WHO.set(sampler._spectheory_label)
    _PACE.set(_Pace(samples, max_seconds))
    with _caller_bound(max_seconds, MAX_SECONDS):
        proc = None  # the target rows the law is computed against, from the rows handed over
        if sampling is not None or draft_sampling is not None or inputs != "probs":
            from ...inputs.processing import note_sampling, sampler_setup

            sampler, instances, proc = sampler_setup(sampler, instances, sampling,
                                                     draft_sampling, inputs)
            return note_sampling(_run_mode(sampler, verifier, instances, samples, alpha, mode,
                                           seed, paths, draft_rows, convention, tol, max_batch,
                                           proc),
                                 sampling, draft_sampling, inputs)
        return _run_mode(sampler, verifier, instances, samples, alpha, mode, seed, paths,
                         draft_rows, convention, tol, max_batch, proc)


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
        _refuse_kind(sampler, mode)  # a law sampler in a coins mode: one line
        return _coins_mode(sampler, convention, instances, samples, alpha, seed, tol, max_batch,
                           proc, mode)
    how = plan(verifier, paths)
    _refuse_kind(sampler, mode)  # a coin-driven sampler in law or lossless mode: one line
    if mode == "law":
        return _law_mode(sampler, how, instances, samples, alpha, seed, draft_rows, max_batch,
                         proc)
    return _lossless_mode(sampler, how, instances, samples, alpha, seed, max_batch, proc)


def assert_sampler(sampler: Callable, verifier: Any = "block", **kwargs) -> SamplerReport:
    """[`check_sampler`][spectheory.testing.checks.sampler.check_sampler], raising
    ``AssertionError`` with the report's text on failure; returns the report when it passes. Takes
    every argument of ``check_sampler``, ``samples="auto"`` with ``budget_s`` included
    (``assert_sampler(sampler, "block", samples="auto", budget_s=600)`` sizes the check to about ten
    minutes)."""
    report = check_sampler(sampler, verifier, **kwargs)
    if not report.passed:
        raise AssertionError(str(report))
    return report


@guarded_check
def check_proposal(draft_sampler: Callable, instances: Sequence | None = None,
                   samples: int = 100_000, alpha: float = 1e-3, seed: int = 0, *,
                   rows: int = 8, max_seconds: float | None = MAX_SECONDS) -> SamplerReport:
    """Does ``draft_sampler`` sample from the q it reports?

    ``draft_sampler(q_rows [B, V], generator) -> (tokens [B] int64, q_reported [B, V])``: given the
    draft model's distributions (rows of the instances' draft tables at sampled prefixes, or tensors
    [R, V] of rows), it draws one token per row (after whatever processing it does: temperature,
    top-k, greedy) and returns the distribution it will hand the verifier. For each input row,
    repeated, the token counts are compared with the mean reported q (pooled chi-square, Bonferroni
    over one global and one per-row test: family-wise false-alarm rate ``alpha``). Catches greedy
    drafts handed a soft q (Hugging Face transformers #30778) and top-k-filtered drafts handed the
    raw q (#47932). Default rows:
    [`default_proposal_rows`][spectheory.testing.checks.sampler.default_proposal_rows].

    ``max_seconds`` (default a day) bounds the run as in `check_sampler`: a run the measured rate
    projects past it is stopped, and under a ``max_seconds`` below the default one call of the
    draft sampler still running twice ``max_seconds`` plus 1 s after it began is stopped
    (`TimeLimitError`, one line naming it).
    """
    alpha = _check_args(samples, alpha)
    if max_seconds is not None and (isinstance(max_seconds, bool) or
                                    not isinstance(max_seconds, (int, float)) or
                                    not max_seconds > 0):
        raise OptionError(f"max_seconds = {_repr_cut(max_seconds, 40)} must be a positive number or None")
    seed = kit_seed(seed)
    if not callable(draft_sampler):
        raise SpectheoryError(f"the draft sampler is {type(draft_sampler).__name__}, "
                              f"not a function")
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise SpectheoryError(f"rows = {rows!r} must be a positive integer")
    _refuse_time(samples, MAX_SECONDS if max_seconds is None else min(max_seconds, MAX_SECONDS),
                 remedy="lower samples or raise max_seconds")
    draft_sampler = _guarded(draft_sampler, "draft sampler")
    g = torch.Generator().manual_seed(seed)
    if instances is None:
        given = default_proposal_rows()
    else:
        given = as_list(instances, "instances", "spectheory Instances or rows [R, V]")
        if not given:
            raise OptionError("instances is empty: give at least one Instance or rows [R, V] "
                              "(None: the default rows)")
    from ...inputs.instances import Instance

    drawn = rows * sum(isinstance(x, Instance) for x in given)
    if drawn > samples:  # refused before the rows are drawn (10^7 rows: 29 s, 2.7 GB first)
        from ...runtime.errors import TooFewSamplesError

        raise TooFewSamplesError(f"samples = {samples:,} is fewer than the {drawn:,} proposal "
                                 f"rows drawn from the instances ({rows:,} each): lower rows or "
                                 f"raise samples", drawn)
    sets = _proposal_rows(given, rows, g)
    from ...runtime.limits import human_seconds
    from .calls import _Pace

    from .calls import _caller_bound

    if max_seconds is None or max_seconds >= MAX_SECONDS:  # the check's own bound
        pace = _Pace(samples, MAX_SECONDS, "lower samples",
                     f"check_proposal's bound of {human_seconds(MAX_SECONDS)}", "check_proposal")
    else:
        pace = _Pace(samples, max_seconds, "lower samples or raise max_seconds",
                     what="check_proposal")
    with _caller_bound(max_seconds, MAX_SECONDS):
        return _proposal_mode(draft_sampler, sets, samples, alpha, seed, pace)


def assert_proposal(draft_sampler: Callable, **kwargs) -> SamplerReport:
    """[`check_proposal`][spectheory.testing.checks.sampler.check_proposal], raising
    ``AssertionError`` with the report's text on failure; returns the report when it passes."""
    report = check_proposal(draft_sampler, **kwargs)
    if not report.passed:
        raise AssertionError(str(report))
    return report



__all__ = ["CONVENTIONS", "Cell", "CoinMismatch", "DraftRows", "MODES", "SamplerReport",
           "assert_proposal", "assert_sampler", "check_proposal", "check_sampler",
           "default_instances", "default_proposal_rows", "make_sampler",
           "reference_coin_sampler"]

