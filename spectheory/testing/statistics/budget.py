"""Sizing a sampler check: the power of its chi-square family at a planned sample size, the
smallest total-variation bias that size detects, and the sample size that a time budget allows.

[`check_sampler`][spectheory.testing.checks.sampler.check_sampler] runs, per row b of the test (a
draft row in ``law`` mode, an instance in ``lossless`` mode), Pearson's statistic X_b^2 on the
row's bins (cells with an expected count below 5 pooled, as in
`spectheory.testing.statistics.stats`) with n_b samples and d_b degrees of freedom, in a Bonferroni
family: the global sum at level alpha/2 and each of the m rows at level alpha/(2m), so a correct
sampler fails with probability at most alpha.

**Power model: non-central chi-square, the bias spread adversarially.** Under a bias that moves
row b's binned law from P to P' with total variation delta = TV(P, P'), X_b^2 is approximately
non-central chi-square with d_b degrees of freedom and non-centrality (Cohen 1988, ch. 7)

    lambda_b = n_b chi^2(P', P) = n_b sum_c (P'_c - P_c)^2 / P_c  >=  4 n_b delta^2,

by Cauchy-Schwarz (sum_c |P'_c - P_c| = 2 delta). The bound is the least-favourable spread of
the bias (it raises half of the mass and lowers the other half, each in proportion to P); any
other spread of the same total variation, a bias concentrated on one worst cell c included
(lambda = n delta^2 (1/P_c + 1/(1 - P_c))), has a larger non-centrality and is detected with
at least the stated power. With lambda_b = 4 n_b delta^2,

    power(delta) >= max( P[ncx2(sum_b d_b, sum_b lambda_b) > chi2.isf(alpha/2, sum_b d_b)],
                         1 - prod_b P[ncx2(d_b, lambda_b) <= chi2.isf(alpha/(2m), d_b)] ),

the larger of the global test's power and that of the independent per-row tests
([`family_power`][spectheory.testing.statistics.budget.family_power]); the detectable total
variation ([`detectable_tv`][spectheory.testing.statistics.budget.detectable_tv]) is the smallest
delta at which this reaches ``power`` (0.9). It is the bound that
`spectheory.testing.statistics.stats.min_detectable_tv` states after a run, here computed before
one, from the rows' exact laws and the planned sample counts
([`planned_tv`][spectheory.testing.statistics.budget.planned_tv]): the pooling, hence d_b, is that
of the run, so the planned value equals the report's ``min_detectable_tv``. The G-test (likelihood
ratio) has the same non-central chi-square limit (2 n KL(P', P) = n chi^2(P', P) to second order),
so the same bound sizes it.

``coins`` mode compares decisions one by one; a sampler whose decision differs from the reference
on a fraction r of rows is caught in N rows with probability 1 - (1 - r)^N
([`coin_detectable_rate`][spectheory.testing.statistics.budget.coin_detectable_rate]).

**Budgets.** [`size_run`][spectheory.testing.statistics.budget.size_run] times pilot checks of 32,
128, 512, ... samples (the same check, the same rows) until they have used about a tenth of the
budget, measuring the sampler's seconds a sample inside its calls (the first pilot, and one
whose rate jumps, runs twice and the faster run counts: a pause of the machine only adds
time); times the check's own work with an instant sampler (fixed part, and seconds a sample
for gathering, counting and testing); and picks the largest N whose predicted cost
t(N) = fixed + N (sampler + check) fits what is left of the budget.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ...runtime.errors import InputError, OptionError, SizeLimitError, SpectheoryError
from . import _args
from .stats import (MAX_ROW_DOF, MAX_ROW_SAMPLES, _power_curve, _smallest_detectable,
                    is_point_mass, point_mass_tv)

#: Power at which detectable biases are stated.
POWER = 0.9
#: Cells with an expected count below this are pooled (as in ``check_sampler``).
MIN_EXPECTED = 5.0
#: Smallest pilot (samples), raised to the check's minimum (one sample per row).
PILOT_START = 32
#: Each pilot is this many times the previous one.
PILOT_GROWTH = 4
#: The pilots stop before their total would pass this share of the budget.
PILOT_SHARE = 0.1
#: A second pilot runs while the two stay within this share (two pilots separate the sampler's
#: cost a call from its cost a sample).
PILOT_SECOND_SHARE = 0.25
#: A pilot whose sampler time a sample is over this many times the previous pilot's (the
#: first pilot always; see `size_run` for the check's own time, and when a rerun fits) is run
#: once more, and the faster of the two kept: a pause of the machine (load, a collection) only
#: adds time, and one pause in a pilot of milliseconds would make the rate, and so the plan,
#: many times too pessimistic.
PILOT_RERUN_FACTOR = 2.0
#: The pilots with an instant sampler (the check's own cost a sample) stop before this share.
KIT_SHARE = 0.1
#: A pilot past a change in how the inputs are handed over runs if it fits this share.
BREAK_SHARE = 0.5
#: The whole run (pilots included) is aimed at this share of the budget.
TARGET_SHARE = 0.95
#: Most samples a budgeted run chooses.
MAX_AUTO_SAMPLES = 10**12
#: Most rows `split` spreads samples over: it builds a Python list of that many counts (10^7:
#: about 0.4 GB and a second), far more rows than a check holds (each row carries its drafts
#: and exact laws), so a larger count is a typing slip that would otherwise exhaust memory.
MAX_SPLIT_PARTS = 10**7


def split(total: int, parts: int) -> list[int]:
    """``total`` samples split over ``parts`` rows as ``check_sampler`` splits them (the first
    ``total mod parts`` rows get one more). ``total`` an integer >= 0, ``parts`` one in
    1..`MAX_SPLIT_PARTS`."""
    total = _args.integer("total", total, 0)
    parts = _args.integer("parts", parts, 1, MAX_SPLIT_PARTS)
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def family_power(delta: float, ns: Sequence[int], dofs: Sequence[int], alpha: float) -> float:
    """Lower bound on the power of the Bonferroni chi-square family against a total-variation bias
    ``delta`` in every row (rows with ``ns[b]`` samples and ``dofs[b]`` degrees of freedom; a row
    with 0 degrees of freedom has no test but counts in m), for the least-favourable spread of the
    bias: non-centrality 4 n_b delta^2 per row (see the module docstring). ``ns`` finite counts
    >= 0 and ``dofs`` integers >= 0 of one length, ``delta`` in [0, 1], ``alpha`` in (0, 1)."""
    delta = _args.real("delta", delta, 0.0, 1.0, lo_open=False, hi_open=False)
    alpha = _args.level("alpha", alpha)
    ns, dofs = _rows_of(ns, dofs)
    return _power_curve(ns, dofs, alpha)(delta)


def _rows_of(ns, dofs) -> tuple[np.ndarray, np.ndarray]:
    """``ns`` [m] float64 (finite, in [0, 2^53]) and ``dofs`` [m] int64 (integers in
    0..`MAX_ROW_DOF`), or one line."""
    ns = _args.numbers("ns", ns)
    raw = _args.numbers("dofs", dofs)
    if len(ns) != len(raw):
        raise InputError(f"ns has {len(ns)} rows and dofs {len(raw)}; one count and one "
                               f"degree of freedom a row")
    if not np.isfinite(ns).all() or (ns < 0).any() or (ns > MAX_ROW_SAMPLES).any():
        bad = ns[~(np.isfinite(ns) & (ns >= 0) & (ns <= MAX_ROW_SAMPLES))][0]
        raise InputError(f"ns has an entry {float(bad)!r}; sample counts are finite and in "
                         f"[0, 2^53]")
    if not np.isfinite(raw).all() or (raw < 0).any() or (raw != np.round(raw)).any() or \
            (raw > MAX_ROW_DOF).any():
        bad = raw[~(np.isfinite(raw) & (raw >= 0) & (raw == np.round(raw))
                    & (raw <= MAX_ROW_DOF))][0]
        raise InputError(f"dofs has an entry {float(bad)!r}; degrees of freedom are "
                         f"integers in 0..{MAX_ROW_DOF:,}")
    return ns, raw.astype(np.int64)


def detectable_tv(ns: Sequence[int], dofs: Sequence[int], alpha: float,
                  power: float = POWER) -> float:
    """Smallest total-variation bias (in every row's binned law, least-favourable spread) that the
    family detects with probability ``power`` at family-wise level ``alpha``: bisection on
    [`family_power`][spectheory.testing.statistics.budget.family_power] to a relative precision of
    1e-5 (``inf`` when no row has a test or even delta = 1 falls short)."""
    alpha, power = _check_level(alpha, power)
    ns, dofs = _rows_of(ns, dofs)
    if not any(int(d) > 0 for d in dofs):
        return float("inf")
    return _smallest_detectable(_power_curve(ns, dofs, alpha), power)


def row_dof(probs, n: int, min_expected: float = MIN_EXPECTED) -> int:
    """Degrees of freedom of one row's pooled chi-square at ``n`` samples: the pooling of
    `spectheory.testing.statistics.stats.row_chi_square`, run on the expected counts themselves.
    ``probs`` a row of cell probabilities (finite, >= 0, a positive sum: divided by it, as float
    laws are), ``n`` an integer in 0..2^53 (counts exact in float64)."""
    probs = _args.prob_row("probs", probs, None)
    n = _args.count("n", n, 0, MAX_ROW_SAMPLES)
    min_expected = _args.real("min_expected", min_expected, 0.0)
    return _row_dof(probs, n, min_expected)


def _row_dof(probs: np.ndarray, n: int, min_expected: float) -> int:
    from .stats import row_chi_square

    tot = probs.sum()
    expected = n * np.clip(probs, 0, None) / tot if tot > 0 else np.zeros_like(probs)
    return row_chi_square(expected, probs, n, min_expected).dof


def planned_tv(row_probs: Sequence, samples: int, alpha: float, power: float = POWER,
               min_expected: float = MIN_EXPECTED) -> float:
    """The ``min_detectable_tv`` that ``check_sampler`` will report for ``samples`` samples split
    evenly over rows whose exact cell probabilities are ``row_probs`` (one vector per row, in the
    check's order). Where every row's law is a point mass, the bias that a sample off the point
    catches: [`point_mass_tv`][spectheory.testing.statistics.stats.point_mass_tv] of the fewest
    samples a row. ``row_probs`` one or more rows of cell probabilities (finite, >= 0, a positive
    sum: divided by it, as float laws are), at most `MAX_SPLIT_PARTS`; ``samples`` an integer
    from the number of rows to 2^53."""
    row_probs, samples, alpha, power, min_expected = _plan_args(row_probs, samples, alpha,
                                                                power, min_expected)
    return _planned_tv(row_probs, samples, alpha, power, min_expected)


def _plan_args(row_probs, samples, alpha, power, min_expected):
    alpha, power = _check_level(alpha, power)
    min_expected = _args.real("min_expected", min_expected, 0.0)
    if not isinstance(row_probs, (list, tuple, np.ndarray)):
        raise InputError(f"row_probs = {_args.show(row_probs)} is not a list of "
                         f"probability rows but a {type(row_probs).__name__}")
    if len(row_probs) == 0:
        raise InputError("row_probs is empty; give one probability row for each row of the check")
    if len(row_probs) > MAX_SPLIT_PARTS:
        raise SizeLimitError(f"row_probs has {len(row_probs):,} rows, more than "
                                   f"MAX_SPLIT_PARTS = {MAX_SPLIT_PARTS:,}")
    rows = [_args.prob_row(f"row_probs[{i}]", p, None) for i, p in enumerate(row_probs)]
    samples = _args.count("samples", samples, 1, MAX_ROW_SAMPLES)
    if samples < len(rows):
        raise OptionError(f"samples = {samples} is fewer than the {len(rows)} rows "
                          f"(check_sampler gives every row at least one sample)")
    return rows, samples, alpha, power, min_expected


def _planned_tv(row_probs: list, samples: int, alpha: float, power: float,
                min_expected: float) -> float:
    ns = split(samples, len(row_probs))
    dofs = [_row_dof(p, n, min_expected) for p, n in zip(row_probs, ns)]
    if row_probs and not any(dofs) and all(is_point_mass(p) for p in row_probs):
        return point_mass_tv(min(ns), power)  # every row a point mass (greedy): as reported
    return detectable_tv(ns, dofs, alpha, power)


def samples_for_tv(row_probs: Sequence, tv: float, alpha: float, power: float = POWER,
                   min_expected: float = MIN_EXPECTED, max_samples: int = MAX_AUTO_SAMPLES) -> int:
    """Smallest sample count (to about 1%) at which
    [`planned_tv`][spectheory.testing.statistics.budget.planned_tv] is at most ``tv``: doubling,
    then bisection (the pooling changes with n, so the detectable bias falls as 1/sqrt(n) only
    roughly). Raises `SpectheoryError` when ``max_samples`` do not suffice."""
    tv = _args.real("tv", tv, 0.0, 1.0, hi_open=False)
    row_probs, _, alpha, power, min_expected = _plan_args(
        row_probs, len(row_probs) if isinstance(row_probs, (list, tuple, np.ndarray)) else 1,
        alpha, power, min_expected)
    max_samples = _args.count("max_samples", max_samples, 1, MAX_ROW_SAMPLES)
    planned_tv = _planned_tv
    lo = len(row_probs)
    if planned_tv(row_probs, lo, alpha, power, min_expected) <= tv:
        return lo
    hi = lo
    while planned_tv(row_probs, hi, alpha, power, min_expected) > tv:
        lo, hi = hi, hi * 2
        if hi > max_samples:
            raise SpectheoryError(f"no sample count up to {max_samples:,} detects a total-"
                                  f"variation bias of {tv:g}")
    while hi - lo > max(1, hi // 100):
        mid = (lo + hi) // 2
        if planned_tv(row_probs, mid, alpha, power, min_expected) <= tv:
            hi = mid
        else:
            lo = mid
    return hi


def coin_detectable_rate(rows: int, power: float = POWER) -> float:
    """``coins`` mode: the smallest rate r of differing decisions that ``rows`` rows of coins
    catch with probability ``power``, 1 - (1 - power)^(1/rows) (about 2.3 / rows at 90%); ``inf``
    for no row. ``rows`` an integer in 0..2^53, ``power`` in (0, 1)."""
    rows = _args.count("rows", rows, 0, MAX_ROW_SAMPLES)
    power = _args.level("power", power)
    if rows < 1:
        return float("inf")
    return -math.expm1(math.log1p(-power) / rows)


def _check_level(alpha, power) -> tuple[float, float]:
    return _args.level("alpha", alpha), _args.level("power", power)


# ----------------------------------------------------------------------------- budgets


def fit_cost(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """``(fixed_s, per_sample_s)`` of t(N) = fixed + N per_sample through the last two pilot
    points ``(samples, seconds)``; one point (or a non-increasing pair, or two points of one
    size): no fixed part. Each point an integer in 1..2^53 and a finite number of seconds
    >= 0."""
    if not isinstance(points, (list, tuple)) or len(points) == 0:
        raise InputError(f"points = {_args.show(points)} must be a non-empty list of "
                               f"(samples, seconds) pairs")
    for i, pt in enumerate(points):
        if not isinstance(pt, (tuple, list)) or len(pt) != 2:
            raise InputError(f"points[{i}] = {_args.show(pt)} is not a (samples, seconds) pair")
        _args.count(f"points[{i}] samples", pt[0], 1, MAX_ROW_SAMPLES)
        _args.real(f"points[{i}] seconds", pt[1], 0.0, lo_open=False)
    n2, t2 = points[-1]
    if len(points) >= 2 and points[-2][0] != n2:
        n1, t1 = points[-2]
        per = (t2 - t1) / (n2 - n1)
        if per > 0:
            return max(0.0, t2 - per * n2), per
    return 0.0, t2 / n2


@dataclass
class BudgetPlan:
    """How a budgeted check was sized (``SamplerReport.budget``).

    Attributes
    ----------
    budget_s : float
        The budget (seconds, the whole call: pilots, the run and its statistics).
    samples : int
        The sample count chosen (or the pilot's, when a pilot found a definitive failure).
    predicted_s : float
        Predicted seconds of the whole call (pilots included).
    pilot : list of (int, float)
        Pilot checks with the sampler: (samples, seconds).
    kit_pilot : list of (int, float)
        Pilot checks with an instant sampler (the check's own cost): (samples, seconds).
    fixed_s : float
        The check's fixed seconds (rows, exact laws, statistics).
    sampler_s, kit_s : float
        Seconds a sample: inside the sampler's calls, and the check's own work.
    alpha, power : float
        The family-wise false-alarm rate and the power of the statement below.
    detectable_tv : float or None
        ``law`` / ``lossless`` modes: the total-variation bias detected with ``power`` at this
        size (equal to the report's ``min_detectable_tv``).
    detectable_rate : float or None
        ``coins`` modes: the rate of differing decisions caught with ``power``.
    max_batch : int or None
        The most rows the run hands the sampler in one call: 2^16 or the pilots' largest call,
        so that the cost a sample measured there holds at any size (the report's verdict is that
        of ``check_sampler(samples=samples, max_batch=max_batch)`` with the same arguments).
    law : str
        Whose law the bias is stated in: ``"row"`` (a draft row, a tree's instance row),
        ``"instance"`` (lossless mode: an instance's output law).
    """

    budget_s: float
    samples: int
    predicted_s: float
    pilot: list = field(default_factory=list)
    kit_pilot: list = field(default_factory=list)
    fixed_s: float = 0.0
    sampler_s: float = 0.0
    kit_s: float = 0.0
    alpha: float = 1e-3
    power: float = POWER
    detectable_tv: float | None = None
    detectable_rate: float | None = None
    max_batch: int | None = None
    law: str = "row"

    def summary(self) -> str:
        """One line: the size chosen, its predicted cost and what it will detect."""
        pilot_s = sum(t for _, t in self.pilot) + sum(t for _, t in self.kit_pilot)
        sizes = ", ".join(f"{n:,}" for n, _ in self.pilot)
        head = (f"budget {_secs(self.budget_s)}: pilot checks ({sizes} samples) took "
                f"{_secs(pilot_s)}; the sampler takes {_secs(self.sampler_s)} a sample, the "
                f"check {_secs(self.kit_s)} a sample + {_secs(self.fixed_s)}; running "
                f"{self.samples:,} samples"
                f"{'' if self.max_batch is None else f' in calls of at most {self.max_batch:,}'}"
                f" (about {_secs(self.predicted_s)} in all)")
        if self.detectable_rate is None and self.detectable_tv is None:
            return head
        if self.detectable_rate is not None:
            return (head + f": catches a sampler whose decisions differ on a fraction >= "
                           f"{self.detectable_rate:.3g} of rows with {self.power:.0%} power")
        return (head + f": detects a total-variation bias >= {self.detectable_tv:.3g} in every "
                       f"{self.law}'s law with {self.power:.0%} power at family-wise false-alarm "
                       f"rate {self.alpha:g}")

    def to_json(self) -> dict:
        def num(x):
            return None if x is None or not math.isfinite(x) else float(x)

        return {"budget_s": float(self.budget_s), "samples": int(self.samples),
                "predicted_s": float(self.predicted_s),
                "pilot": [[int(n), float(t)] for n, t in self.pilot],
                "kit_pilot": [[int(n), float(t)] for n, t in self.kit_pilot],
                "fixed_s": float(self.fixed_s), "sampler_s": float(self.sampler_s),
                "kit_s": float(self.kit_s), "alpha": float(self.alpha),
                "power": float(self.power), "detectable_tv": num(self.detectable_tv),
                "detectable_rate": num(self.detectable_rate),
                "max_batch": None if self.max_batch is None else int(self.max_batch)}


def _secs(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.3g} us"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    from ...runtime.limits import human_seconds

    return human_seconds(s)


def check_budget(budget_s, name: str = "budget_s", most: float = 7 * 24 * 3600.0) -> float:
    """A budget in seconds: a finite number in (0, ``most``], else `SpectheoryError` (``most``
    itself a finite number > 0)."""
    most = _args.real("most", most, 0.0)
    if isinstance(budget_s, bool) or \
            not isinstance(budget_s, (int, float, np.integer, np.floating)) or \
            not math.isfinite(budget_s) or not 0 < budget_s <= most:
        raise SpectheoryError(f"{name} = {budget_s!r} must be a number of seconds in "
                              f"(0, {most:g}]")
    return float(budget_s)


def size_run(run: Callable[[int], tuple], budget_s: float, minimum: int, *,
             kit: Callable[[int], float] | None = None, breaks: Sequence[int] = (),
             start: float | None = None,
             done: Callable[[Any], bool] | None = None,
             clock: Callable[[], float] = time.perf_counter) -> dict:
    """Pilot checks, then the largest sample count whose predicted cost fits the budget.

    The cost of a check of N samples is modelled as t(N) = fixed + N (sampler + kit): the
    sampler's own seconds a sample and the check's (gathering inputs, counting, completing
    outputs, coin decisions), plus a fixed part (rows, exact laws, the statistics of every row).

    * ``run(n) -> (result, seconds spent inside the sampler)`` runs the check with the user's
      sampler: pilots of ``max(minimum, 32)``, then 4 times as many, ... samples while their total
      stays within `PILOT_SHARE` of the budget (the next pilot's predicted cost decides); the
      sampler's cost a sample is its time inside the calls of the last pilot, divided by ``n``
      (timing inside the calls keeps the check's own time, and its noise, out of it). The
      first pilot, and one whose sampler time a sample is over `PILOT_RERUN_FACTOR` times the
      previous pilot's (or whose own time, outside the sampler, is over `PILOT_RERUN_FACTOR`
      times `PILOT_GROWTH` times the previous pilot's, at least 1 ms) runs twice, if a rerun as
      long as this run, then the instant-sampler pilots and the smallest check (priced at the
      better of this pilot's and the previous pilot's rates), still fit `TARGET_SHARE` of the
      budget; the faster run is kept (a pause of the machine only adds time), or the rerun if
      it found a failure no correct sampler produces. ``pilot`` lists both runs.
      ``done(result)`` true ends the pilots at once (a failure no correct sampler produces:
      nothing to size).
    * ``kit(n) -> seconds`` runs the same check with an instant sampler: from the largest pilot's
      size, 4 times as many samples each time until the kit's time has doubled (its cost a
      sample then dominates the fixed part and the fit is not lost in timing noise), the
      predicted run size is covered, or `KIT_SHARE` of the budget is spent. ``fixed`` and
      ``kit`` a sample come from the last two of these. Without ``kit``, the kit's time is fitted
      from the pilots (their total minus their time inside the sampler).

    * ``breaks``: sample counts at which the check starts handing the sampler its inputs another
      way (``law`` mode: one draft row at a time as stride-0 views instead of mixed batches), so
      that the cost a sample may change. When the chosen count passes the first and no pilot
      did, one more pilot runs at the last (if its cost, predicted with the current rate, fits
      `BREAK_SHARE` of the budget) and sets the rate; otherwise the count stops at the first.

    ``start`` is when the budget began (default: now). Returns a dict: ``samples`` (chosen so
    that elapsed + fixed + samples (sampler + kit) is `TARGET_SHARE` of the budget; ``None`` when
    ``done`` stopped the pilots), ``fixed_s``, ``per_sample_s`` (sampler + kit), ``sampler_s``,
    ``kit_s`` (seconds a sample), ``pilot`` [(samples, seconds)], ``kit_pilot`` [(samples,
    seconds)], ``result`` (the last kept pilot's). Raises `SpectheoryError` when not even
    ``minimum`` samples fit. Refused in one line: ``budget_s`` as `check_budget` refuses it,
    ``minimum`` not an integer in 1..`MAX_AUTO_SAMPLES`, ``run`` (or ``kit``, ``done``,
    ``clock``) not callable, ``breaks`` not integers >= 1, ``run(n)`` returning anything but a
    pair whose second item is a finite number of seconds >= 0. The pilots stop growing at
    `MAX_AUTO_SAMPLES` samples.
    """
    budget_s = check_budget(budget_s)
    minimum = _args.count("minimum", minimum, 1, MAX_AUTO_SAMPLES)
    for nm, fn in (("run", run), ("kit", kit), ("done", done), ("clock", clock)):
        if not callable(fn) and not (fn is None and nm in ("kit", "done")):
            raise InputError(f"{nm} = {_args.show(fn)} is not callable")
    if not isinstance(breaks, (list, tuple)):
        raise InputError(f"breaks = {_args.show(breaks)} must be a list of sample counts")
    breaks = [_args.integer(f"breaks[{i}]", b, 1) for i, b in enumerate(breaks)]
    if start is not None:
        start = _args.real("start", start)
    run_ = run

    def run(n):
        out = run_(n)
        if not isinstance(out, tuple) or len(out) != 2:
            raise InputError(f"run({n}) returned {_args.show(out)}; expected (result, seconds "
                             f"inside the sampler)")
        _args.real(f"run({n}) seconds inside the sampler", out[1], 0.0, lo_open=False)
        return out

    start = clock() if start is None else start
    n = max(int(minimum), PILOT_START)
    pilot: list[tuple[int, float]] = []
    inside_points: list[tuple[int, float]] = []
    kit_points: list[tuple[int, float]] = []

    def timed(n):
        t0 = clock()
        result, inside = run(n)
        total = clock() - t0
        pilot.append((n, total))
        return result, inside, total

    while True:
        result, inside, total = timed(n)
        prev = inside_points[-1] if inside_points else None
        own, rate = max(0.0, total - inside), inside / n
        jumped = prev is None or rate * prev[0] > PILOT_RERUN_FACTOR * prev[1] or \
            own > PILOT_RERUN_FACTOR * PILOT_GROWTH * max(kit_points[-1][1], 1e-3)
        if prev is not None:  # what the pilot would cost without a pause: at most the last
            own = min(own, PILOT_GROWTH * kit_points[-1][1])  # one's own time grown, and its
            rate = min(rate, prev[1] / prev[0])  # rate
        # the rerun is priced at this run's whole time (a rate that really jumped costs that
        # again), and after it the check's pilots and the smallest check must still fit
        rest = own * (3 if kit is not None else 1) + rate * minimum
        if not (done is not None and done(result)) and jumped and \
                (clock() - start) + total + rest <= TARGET_SHARE * budget_s:
            again = timed(n)  # (listed in the pilots too: the plan line shows both)
            if (done is not None and done(again[0])) or again[2] < total:
                result, inside, total = again
        inside_points.append((n, inside))
        kit_points.append((n, max(0.0, total - inside)))
        # the sampler's seconds a sample: the slope of its time over the last two pilots (its
        # cost a call cancels), else its time a sample in the one pilot (an upper bound)
        _, sampler_s = fit_cost(inside_points)
        if done is not None and done(result):
            return {"samples": None, "fixed_s": kit_points[-1][1], "per_sample_s": sampler_s,
                    "sampler_s": sampler_s, "kit_s": 0.0, "pilot": pilot, "kit_pilot": [],
                    "result": result}
        nxt = n * PILOT_GROWTH
        share = PILOT_SECOND_SHARE if len(inside_points) == 1 else PILOT_SHARE
        if (clock() - start) + kit_points[-1][1] + sampler_s * nxt > share * budget_s or \
                nxt > MAX_AUTO_SAMPLES:
            break
        n = nxt

    def choose(fixed, kit_s):
        left = TARGET_SHARE * budget_s - (clock() - start) - fixed
        per = sampler_s + kit_s
        return int(min(MAX_AUTO_SAMPLES, math.floor(left / per))) if per > 0 else \
            MAX_AUTO_SAMPLES

    kit_points = kit_points[-1:]  # the check's own time in the largest pilot
    fixed, kit_s = kit_points[0][1], 0.0
    if kit is not None:
        kit_start = clock()
        m = n
        while True:
            nxt = m * PILOT_GROWTH
            guess = fixed + kit_s * nxt if len(kit_points) > 1 else kit_points[-1][1] * 2
            if kit_points[-1][1] >= 2 * kit_points[0][1] or m >= choose(fixed, kit_s) or \
                    (clock() - kit_start) + guess > KIT_SHARE * budget_s:
                break
            m = nxt
            kit_points.append((m, kit(m)))
            fixed, kit_s = fit_cost(kit_points)
    samples = choose(fixed, kit_s)
    per = sampler_s + kit_s
    if samples < minimum:
        need = (clock() - start) + fixed + per * minimum
        raise SpectheoryError(
            f"budget_s = {budget_s:g} s is too small: {_secs(clock() - start)} had passed when "
            f"the pilot checks ended, which measured {_secs(per)} a sample + {_secs(fixed)} "
            f"fixed, so even the smallest check ({minimum:,} samples, one a row) needs about "
            f"{_secs(need)} in all; raise the budget or check fewer rows")
    if breaks and samples > min(breaks) and n <= min(breaks):
        # the run would hand the sampler its inputs another way than the pilots did: time that
        # way at the size where every row has switched, if the current (pessimistic) cost of
        # it fits BREAK_SHARE of the budget; else stay below the switch
        hi = max(breaks)
        if (clock() - start) + fixed + per * hi <= BREAK_SHARE * budget_s:
            t0 = clock()
            result, inside = run(hi)
            total = clock() - t0
            pilot.append((hi, total))
            if done is not None and done(result):
                return {"samples": None, "fixed_s": fixed, "per_sample_s": per,
                        "sampler_s": sampler_s, "kit_s": kit_s, "pilot": pilot,
                        "kit_pilot": kit_points[1:], "result": result}
            sampler_s = inside / hi
            per = max(total - fixed, 0.0) / hi
            kit_s = max(0.0, per - sampler_s)
            samples = max(hi, choose(fixed, kit_s))
            if (clock() - start) + fixed + per * samples > budget_s:
                samples = max(minimum, min(breaks))
        else:
            samples = min(breaks)
    return {"samples": samples, "fixed_s": fixed, "per_sample_s": per, "sampler_s": sampler_s,
            "kit_s": kit_s, "pilot": pilot, "kit_pilot": kit_points[1:], "result": result}


__all__ = ["BREAK_SHARE", "BudgetPlan", "KIT_SHARE", "MAX_AUTO_SAMPLES", "PILOT_RERUN_FACTOR",
           "PILOT_SECOND_SHARE", "PILOT_SHARE", "POWER", "TARGET_SHARE",
           "check_budget", "coin_detectable_rate", "detectable_tv", "family_power", "fit_cost",
           "planned_tv", "row_dof", "samples_for_tv", "size_run", "split"]
