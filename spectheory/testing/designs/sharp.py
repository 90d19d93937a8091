"""Sharp tests for slow kernels: draft rows chosen from the bug kit's exact laws, so that a law-mode
check of a few thousand samples catches every replica a sampling check can see.

A sampler that costs 15-110 ms a row (a Triton kernel under ``TRITON_INTERPRET=1``) gets a few
thousand samples in minutes; spread over the default instances' 32 draft rows, 3,000 samples
detect only a total-variation bias of 0.085. Real bugs are often smaller overall but large on
particular rows: a row where the draft's target probability is 0, where p and q tie, where the
rows change with the prefix, where V = 2 or 3 leaves few cells to share the samples. This
module picks those rows before any sampling, from exact laws only.

**Noncentrality.** In ``law`` mode
([`check_sampler`][spectheory.testing.checks.sampler.check_sampler]) each draft row b gets n_b
samples of (k, tau, Y), compared with the reference law P_b by a pooled Pearson chi-square (cells of
expected count below 5 pooled, as
[`row_chi_square`][spectheory.testing.statistics.stats.row_chi_square]). A replica whose law on that
row is P'_b moves the statistic to a non-central chi-square with noncentrality (Cohen 1988, ch. 7)

    lambda_b = n_b c_b,   c_b = sum_bins (P'_bin - P_bin)^2 / P_bin,

c_b computed on the bins the check forms at n_b samples. Mass z_b that the replica puts on cells
of reference probability 0 is caught by a single sample (the check's p-value is then 0): with
probability 1 - (1 - z_b)^{n_b}; c_b is then taken on the replica's law given no such sample.
The family (one global test at alpha/2, one per row at alpha/(2m)) then has power about

    1 - (1 - P_zero) (1 - max(P[ncx2(D, sum lambda_b) > chi2.isf(alpha/2, D)],
                              1 - prod_b P[ncx2(d_b, lambda_b) <= chi2.isf(alpha/(2m), d_b)])),

with D = sum_b d_b ([`replica_power`][spectheory.testing.designs.sharp.replica_power]; the larger of
two tests stands for the family, which rejects when either does). The non-central chi-square is a
local approximation: a replica far from the reference (all of a row's mass in one bin makes the
statistic a constant) can be caught far more often than it says, so every design also states
the power found by simulating the check's statistic from each replica's exact law
([`simulated_power`][spectheory.testing.designs.sharp.simulated_power]; no sampler is called).

**Design.** From a candidate pool of draft rows (random prefix-dependent rows with V = 2..4,
L = 1..3, zeros, exact ties p = q, target probability 0 at the draft, draft probabilities that
underflow in float16; plus the bug kit's own rows;
[`candidate_pool`][spectheory.testing.designs.sharp.candidate_pool]) the weights w_b (sum 1) of the
linear program

    maximise t  subject to  sum_b w_b e_{r,b} >= t  for every replica r,   w >= 0,

with e_{r,b} = c_{r,b} + kappa z_{r,b} (kappa converts a zero-cell mass into the noncentrality
of equal power, ``ZERO_CELL_WEIGHT``), maximise the weakest replica's noncentrality per sample.
A greedy rounding turns them into m copies of rows (``check_sampler`` splits samples evenly over
the rows it is given, so a row given twice gets twice the samples): each copy goes to the
candidate that most raises the least served replica. For m = 1 .. `MAX_ROWS` (the pooling
recomputed at n = budget / m), the m with the largest least predicted power is kept
([`sharp_design`][spectheory.testing.designs.sharp.sharp_design]); one more constraint asks that any
bias of TV `GENERIC_TV` (least-favourable spread over every row's bins) be caught too, so that
the few rows keep testing more than the replicas. Only exact laws enter: the design is fixed
before sampling and is the same for every sampler, so a correct sampler still fails with
probability at most ``alpha``.

**Replica families.** A family is a list of [`Replica`][spectheory.testing.designs.sharp.Replica]
(or of ``(name, law)`` pairs), each with its exact law on draft rows;
[`kit_replicas`][spectheory.testing.designs.sharp.kit_replicas] gathers the bug kit's: the law-kind
formula mutants, the sampler-kind replicas with an exact law (vLLM #47386's shared noise), and
the planted bugs of the engine ports (`spectheory.testing.mutants.replica_laws`), and the
bonus-path bugs ([`bonus_replicas`][spectheory.testing.designs.sharp.bonus_replicas]: after L
acceptances Y drawn from p_{L-1} or from the correction row of position L-1 instead of p_L).
Replicas a
sampling check cannot see are listed with the mode that catches them (SGLang #35771's coin of
exactly 0, probability 2^-24 a draw: coins mode). The allocation itself,
[`allocate`][spectheory.testing.designs.sharp.allocate], takes only cell probabilities (reference
and replicas, one row per candidate test row) and applies to any check built from rows of cells
and a Bonferroni chi-square family.

**The bonus token.** Every design must also catch any change of TV `GENERIC_BONUS_TV` (0.15) in
the bonus token's law given tau = L, so its rows reach tau = L often (the pool's ``bonus`` rows:
acceptance at least about 0.8 at every draft, p_L putting 0 on p_{L-1}'s likeliest token).
Measured on the kit designs at budget 3,000, alpha = 1e-3: every replica, the two bonus-path
ones included, has predicted and law-simulated power 1.000; the bonus bug left out of the
designs (Y from q_{L-1}) too; empirically each fails 10 of 10 seeds (``tests/test_sharp_bonus.py``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import linprog
from ..statistics._chisq import chi2, ncx2
from ..statistics.stats import MAX_NONCENTRALITY, MAX_ROW_DOF, MAX_ROW_SAMPLES

from ...runtime._lazy import torch
from ...runtime.errors import (InputError, OptionError, SpectheoryError, UserCodeError, as_list,
                               call_user, check_flag)
from ..checks.report import MIN_EXPECTED, POWER, DraftRows
from ..statistics import _args
from ...runtime.limits import shown as _repr_cut

__all__ = ["Replica", "ReplicaPower", "SharpDesign", "Allocation", "allocate", "binned_divergence",
           "candidate_pool", "kit_replicas", "replica_power", "sharp_design", "sharp_rows",
           "ZERO_CELL_WEIGHT", "DEFAULT_POOL", "MAX_ROWS", "GENERIC_TV", "GENERIC",
           "GENERIC_BONUS_TV", "GENERIC_BONUS",
           # the design's limits: sizes past them are refused in one line before any work
           "MAX_POOL", "MAX_POOL_VOCAB", "MAX_POOL_LENGTH", "MAX_POOL_PATHS", "MAX_SIM_REPS",
           "MAX_BUDGET", "MAX_ALLOC_ROWS"]

#: Candidate draft rows drawn for the pool (besides the bug kit's own rows).
DEFAULT_POOL = 1500
#: Most copies of rows a design hands the check.
MAX_ROWS = 48
#: Most random rows `candidate_pool` draws: its Python loop takes about 0.3 ms a row (6 s at the
#: limit, 13 times the default `DEFAULT_POOL`), and every row enters each replica's law and the
#: design's linear program; a larger pool is a typing slip that would run for hours.
MAX_POOL = 20_000
#: Largest vocabulary V of a pool row: the pool's point is small V (2..4), where few cells share
#: the samples; 64 keeps the pool's rows ([L+1, V] floats each) within about 0.1 GB at the limits.
MAX_POOL_VOCAB = 64
#: Longest draft L of a pool row (the kit's rows have L = 1..3; the cells grow as (L+1) V).
MAX_POOL_LENGTH = 8
#: Most paths K of a multi-path pool: every K-tuple of an instance's V^L draft paths is
#: enumerated before sampling 256 of them, (V^L)^K tuples (6,561 at K = 4 on V = 3, L = 2;
#: 3.5e9 at K = 10).
MAX_POOL_PATHS = 4
#: Most simulated checks of `simulated_power`: each draws a multinomial count vector a row
#: ([reps, cells] int64, 0.13 GB a row of 16 cells at the limit); 10^6 puts the Monte Carlo error
#: below 5e-4, far past what a design needs (the default 4,000: about 0.005).
MAX_SIM_REPS = 10**6
#: A design also detects any bias of this total variation (least-favourable spread over every
#: row's bins) with 90% power, so that its few rows keep testing more than the replicas: the
#: default instances detect 0.085 at 3,000 samples (token and block).
GENERIC_TV = 0.08
#: The name of that constraint in an allocation's powers.
GENERIC = "any bias (TV >= GENERIC_TV, least favourable)"
#: A design also detects, with 90% power, any change of TV at least this much in the bonus
#: token's law given tau = L (Y drawn from another row than p_L), whatever the row: on a row b
#: with P_b(tau = L) = s_b such a change has chi-square divergence at least 4 delta^2 s_b
#: (Cauchy-Schwarz over the bonus cells), so the design must give the rows that reach the bonus
#: token samples n_b s_b enough for it. Without it the rows may never reach tau = L, and a
#: bonus drawn from p_{L-1} (TV 0.24 on a V = 3, L = 2 instance) goes unseen.
GENERIC_BONUS_TV = 0.15
#: The name of that constraint in an allocation's powers.
GENERIC_BONUS = "any bonus-row bias (TV >= GENERIC_BONUS_TV given tau = L)"
#: Largest ``budget`` (samples) a design is built for: `allocate`'s counts stay exact int64 and
#: float64 values far below it, and a check of 10^12 samples is past any sampler's time (the
#: largest run `spectheory.testing.statistics.budget.size_run` chooses, ``MAX_AUTO_SAMPLES``).
MAX_BUDGET = 10**12
#: Largest ``max_rows`` of `allocate` and `sharp_design`: one linear program and one greedy
#: rounding of m steps for each m = 1..max_rows, so the work grows as max_rows^2 (9 s at 1,024
#: on a pool of two rows and two replicas); 21 times the default `MAX_ROWS`.
MAX_ALLOC_ROWS = 1024
#: A reference or replica row given to `allocate` (a law's cell probabilities) sums to 1 within
#: this: the kit's replica laws are off by up to 5e-9 (float error of the buggy formulas on the
#: pool's 1e-8 draft probabilities), past `spectheory.law.ROW_SUM_TOL`.
CELL_SUM_TOL = 1e-6


@dataclass(frozen=True)
class Replica:
    """One bug whose exact law on draft rows is known.

    ``law(drafts [B, L], q [B, L, V], p [B, L+1, V]) -> Law`` (single path);
    ``sampler`` a canonical sampler that runs the bug (for simulations; optional);
    ``verifier`` the rule the buggy code claims to run (the check's reference); ``visible``
    False (with ``caught_by``) for a bug a sampling check cannot see."""

    name: str
    law: Callable | None
    sampler: Callable | None = None
    verifier: str = "token"
    source: str = ""
    visible: bool = True
    caught_by: str = "law mode on the sharp rows"
    law_key: str | None = None  # replicas sharing one law (several ports of one bug)


@dataclass
class ReplicaPower:
    """A replica's predicted power on a design: ``power`` (the non-central chi-square power of
    the module docstring, a local approximation), ``noncentrality`` sum_b n_b c_b,
    ``zero_mass`` the expected number of samples on reference-impossible cells (sum_b n_b z_b),
    ``tv`` the sample-weighted total variation of the replica's cell law to the reference on
    the design's rows; ``simulated`` the power found by simulating the check's statistic from
    the replica's exact law ([`simulated_power`][spectheory.testing.designs.sharp.simulated_power];
    None when not computed)."""

    name: str
    power: float
    noncentrality: float
    zero_mass: float
    tv: float
    simulated: float | None = None


# ----------------------------------------------------------------------------- arguments


def _count(name: str, value, least: int = 1, most: int | None = None) -> int:
    """``value`` as an int in ``least..most``, or one line naming the argument (a bool, a float,
    a string, NaN or inf is refused, not rounded)."""
    return _args.integer(name, value, least, most)


def _budget(budget) -> int:
    """``budget`` as an int >= 1 (`_count`'s line below 1), refused above `MAX_BUDGET` in one
    `SizeLimitError` line."""
    return _args.count("budget", budget, 1, MAX_BUDGET)


def _level(alpha) -> float:
    """``alpha`` as a float strictly between 0 and 1, or one line (a bool, a string, NaN or inf
    is refused)."""
    return _args.level("alpha", alpha)


def _lengths(pairs) -> None:
    """Arrays of one length, or one line naming the first that differs: ``pairs`` (name, [m])."""
    (n0, a0), *rest = pairs
    for nm, a in rest:
        if len(a) != len(a0):
            raise InputError(f"{n0} has {len(a0)} rows and {nm} {len(a)}; one entry a row in each")


def _finite(name: str, arr: np.ndarray, lo: float = 0.0, hi: float = math.inf) -> None:
    """Every entry of ``arr`` finite and in [lo, hi], or one line naming the first that is not."""
    ok = np.isfinite(arr) & (arr >= lo) & (arr <= hi)
    if not ok.all():
        raise InputError(f"{name} has an entry {float(arr[~ok][0])!r}; each must be finite and "
                         f"in [{lo:g}, {hi:g}]")


def _tv_or_none(name: str, value) -> float | None:
    """None, or a total variation in (0, 1] (a bool, a string, NaN, 0 or a negative refused in
    one line: a negative TV would otherwise square to a positive requirement)."""
    if value is None:
        return None
    kind = "" if isinstance(value, (int, float, np.integer, np.floating)) and \
        not isinstance(value, (bool, np.bool_)) else f", not {type(value).__name__}"
    try:
        return _args.real(name, value, 0.0, 1.0, hi_open=False)
    except OptionError:
        raise OptionError(f"{name} = {_args.show(value)} must be None or a number in (0, 1]"
                          f"{kind}") from None


def _cell_groups(name: str, value, like: list | None = None) -> list[np.ndarray]:
    """A list of G arrays [R_g, C_g] of cell probabilities (``like``: the reference's arrays,
    whose number and shapes these must have), as float64; one `InputError` line naming the first
    group or row at fault. A row with a NaN is a row without a law (kept as is); every other row
    is finite, non-negative and sums to 1 within `CELL_SUM_TOL`."""
    if isinstance(value, np.ndarray) and value.ndim != 3 or \
            not isinstance(value, (list, tuple, np.ndarray)):
        raise InputError(f"{name} = {_args.show(value)} must be a list of arrays [rows, cells], "
                         f"one per group of candidate rows")
    if like is None and len(value) == 0:
        raise InputError(f"{name} is empty; give one array [rows, cells] per group of candidate "
                         f"rows")
    if like is not None and len(value) != len(like):
        raise InputError(f"{name} has {len(value)} groups and ref {len(like)}; one array "
                         f"[rows, cells] per group")
    out = []
    for g, a in enumerate(value):
        here = f"{name}[{g}]"
        a = _args.numbers(here, a, 2)
        if like is not None and a.shape != like[g].shape:
            raise InputError(f"{here} has shape {list(a.shape)} and ref[{g}] "
                             f"{list(like[g].shape)}; the same candidate rows and cells")
        if a.shape[0] and not a.shape[1]:
            raise InputError(f"{here} has rows of no cells; a law has at least one cell")
        live = ~np.isnan(a).any(-1)
        rows = a[live]
        ok = np.isfinite(rows) & (rows >= 0)
        if not ok.all():
            j = int(np.flatnonzero(~ok.all(-1))[0])  # the first bad row among the live ones
            i = int(np.flatnonzero(live)[j])
            raise InputError(f"{here} row {i} has an entry {float(rows[j][~ok[j]][0])!r}; cell "
                             f"probabilities are finite and >= 0 (a row with a NaN: no law "
                             f"there)")
        sums = rows.sum(-1)
        off = np.abs(sums - 1.0) > CELL_SUM_TOL
        if off.any():
            i = int(np.flatnonzero(live)[np.flatnonzero(off)[0]])
            raise InputError(f"{here} row {i} sums to {float(a[i].sum())!r}, not 1 (tolerance "
                             f"{CELL_SUM_TOL:g})")
        out.append(a)
    return out


def _reach_groups(bonus, ref: list) -> list[np.ndarray]:
    """``bonus``: G arrays [R_g] of probabilities P(tau = L), finite and in [0, 1] (within
    `CELL_SUM_TOL` above: sums of a law's cells), one per row of ``ref``; else one `InputError`
    line."""
    if isinstance(bonus, np.ndarray) and bonus.ndim != 2 or \
            not isinstance(bonus, (list, tuple, np.ndarray)):
        raise InputError(f"bonus = {_args.show(bonus)} must be a list of arrays [rows] (each "
                         f"row's P(tau = L)), one per group")
    if len(bonus) != len(ref):
        raise InputError(f"bonus has {len(bonus)} groups and ref {len(ref)}; one array [rows] "
                         f"per group")
    out = []
    for g, b in enumerate(bonus):
        b = _args.numbers(f"bonus[{g}]", b, 1)
        if len(b) != ref[g].shape[0]:
            raise InputError(f"bonus[{g}] has {len(b)} entries and ref[{g}] {ref[g].shape[0]} "
                             f"rows; one P(tau = L) per row")
        ok = np.isfinite(b) & (b >= 0) & (b <= 1.0 + CELL_SUM_TOL)  # float sums of a law
        if not ok.all():
            raise InputError(f"bonus[{g}] has an entry {float(b[~ok][0])!r}; each is a "
                             f"probability P(tau = L) in [0, 1]")
        out.append(b)
    return out


# ----------------------------------------------------------------------------- statistics


def binned_divergence(ref: np.ndarray, bug: np.ndarray, n: int,
                      min_expected: float = MIN_EXPECTED):
    """Per row: (chi-square divergence c on the check's bins at ``n`` samples, zero-cell mass z,
    degrees of freedom d) of ``bug`` [R, C] against ``ref`` [R, C] (each row a law over the
    cells).

    The bins are those of [`row_chi_square`][spectheory.testing.statistics.stats.row_chi_square] at
    expected counts n ref: cells with n ref >= ``min_expected`` kept, the other cells of positive
    probability pooled, the pooled bin merged into the smallest kept cell when its own expected
    count is below ``min_expected``; cells of probability 0 excluded (their mass is z). c is taken
    on the replica's law given no sample on those cells (bug / (1 - z) on the rest). Refused in
    one line: ``ref`` and ``bug`` not arrays [R, C] of numbers of one shape, a row (without a
    NaN: a row with one is no law, its values meaningless) with a negative or infinite entry, a
    ``ref`` row of no mass, ``n`` not an integer in 0..2^53."""
    cells, n, min_expected = _checked_cells(ref, bug, n, min_expected)
    return _binned(cells, n, min_expected)


def _checked_cells(ref, bug, n, min_expected):
    """`binned_divergence`'s arguments checked (its refusals, in its order) and the part of its
    statistic that does not depend on ``n``: (cells, n, min_expected), cells = (ref normalised,
    its zero cells, the zero-cell mass z, the replica's law given no zero cell)."""
    ref = _args.numbers("ref", ref, 2)
    bug = _args.numbers("bug", bug, 2)
    if ref.shape != bug.shape:
        raise InputError(f"ref has shape {list(ref.shape)} and bug {list(bug.shape)}; both are "
                         f"[rows, cells] of the same rows")
    n = _args.count("n", n, 0, MAX_ROW_SAMPLES)
    min_expected = _args.real("min_expected", min_expected, 0.0)
    for name, arr in (("ref", ref), ("bug", bug)):
        live = ~np.isnan(arr).any(-1)  # a row with a NaN: no law there (allocate masks it)
        ok = np.isfinite(arr[live]) & (arr[live] >= 0)
        if not ok.all():
            j = int(np.flatnonzero(~ok.all(-1))[0])
            raise InputError(f"{name} row {int(np.flatnonzero(live)[j])} has an entry "
                             f"{float(arr[live][j][~ok[j]][0])!r}; cell probabilities are "
                             f"finite and >= 0")
        if name == "ref" and (arr[live].sum(-1) <= 0).any():
            i = int(np.flatnonzero(live)[np.flatnonzero(arr[live].sum(-1) <= 0)[0]])
            raise InputError(f"ref row {i} has no positive entry; a law has mass")
    ref = ref / ref.sum(-1, keepdims=True)
    zero = ref <= 0
    z = np.where(zero, bug, 0.0).sum(-1).clip(0.0, 1.0)
    live = np.where(zero, 0.0, bug)
    tot = live.sum(-1, keepdims=True)
    cond = np.where(tot > 0, live / np.where(tot > 0, tot, 1.0), 0.0)
    return (ref, zero, z, cond), n, min_expected


def _binned(cells, n: int, min_expected: float):
    """`binned_divergence` at ``n`` samples from `_checked_cells`' cells."""
    ref, zero, z, cond = cells
    big = (n * ref >= min_expected) & ~zero
    safe = np.where(ref > 0, ref, 1.0)
    terms = np.where(big, (cond - ref) ** 2 / safe, 0.0)
    c = terms.sum(-1)
    r_pool = 1.0 - np.where(big, ref, 0.0).sum(-1)
    b_pool = 1.0 - np.where(big, cond, 0.0).sum(-1)
    nbig = big.sum(-1)
    has_pool = r_pool * n > 1e-9 * max(n, 1)
    merge = has_pool & (r_pool * n < min_expected) & (nbig > 0)
    apart = has_pool & ~merge
    # merge: the pooled bin joins the kept cell of smallest probability
    j = np.argmin(np.where(big, ref, np.inf), axis=-1)
    rows = np.arange(ref.shape[0])
    rj, bj = ref[rows, j], cond[rows, j]
    merged = ((bj + b_pool) - (rj + r_pool)) ** 2 / np.where(rj + r_pool > 0, rj + r_pool, 1.0)
    own = np.where(rj > 0, (bj - rj) ** 2 / np.where(rj > 0, rj, 1.0), 0.0)
    c = np.where(merge, c - own + merged, c)
    c = np.where(apart, c + (b_pool - r_pool) ** 2 / np.where(r_pool > 0, r_pool, 1.0), c)
    d = nbig + apart.astype(int) - 1
    c = np.where(d >= 1, c, 0.0)
    return np.clip(c, 0.0, None), z, np.clip(d, 0, None)


def replica_power(ns: Sequence[int], cs: Sequence[float], zs: Sequence[float],
                  dofs: Sequence[int], alpha: float) -> float:
    """Predicted power of the Bonferroni chi-square family of m = len(ns) rows against a replica
    with per-row divergences ``cs``, zero-cell masses ``zs`` (rows with ``ns`` samples and
    ``dofs`` degrees of freedom): 1 - (1 - P_zero)(1 - P_chi), P_chi the larger of the global
    and the per-row tests' non-central chi-square powers (module docstring). Refused in one
    line: the four not one-dimensional of one length, counts or divergences negative or not
    finite, counts over 2^53, zero-cell masses outside [0, 1], degrees of freedom not integers
    in 0..`MAX_ROW_DOF` (non-centralities n c over `MAX_NONCENTRALITY` are taken at it)."""
    alpha = _level(alpha)
    ns = _args.numbers("ns", ns)
    cs = _args.numbers("cs", cs)
    zs = _args.numbers("zs", zs)
    raw = _args.numbers("dofs", dofs)
    _lengths([("ns", ns), ("cs", cs), ("zs", zs), ("dofs", raw)])
    _finite("ns", ns, 0.0, MAX_ROW_SAMPLES)
    _finite("cs", cs)
    _finite("zs", zs, 0.0, 1.0)
    _finite("dofs", raw, 0.0, MAX_ROW_DOF)
    if (raw != np.round(raw)).any():
        raise InputError(f"dofs has an entry {float(raw[raw != np.round(raw)][0])!r}; degrees "
                         f"of freedom are integers")
    dofs = raw.astype(np.int64)
    m = len(ns)
    if m == 0:
        return 0.0
    zs = np.clip(zs, 0.0, 1.0)
    if np.any((zs >= 1.0) & (ns > 0)):
        p_zero = 1.0
    else:
        p_zero = -math.expm1(float(np.sum(ns * np.log1p(-zs))))
    keep = dofs > 0
    p_chi = 0.0
    if keep.any():
        # non-centralities capped where scipy's tail turns NaN (its value there is 1.0 exactly)
        lam = np.minimum(ns[keep] * cs[keep], MAX_NONCENTRALITY)
        d = dofs[keep]
        D = int(d.sum())
        p_global = float(ncx2.sf(chi2.isf(alpha / 2, D), D, min(float(lam.sum()),
                                                                MAX_NONCENTRALITY)))
        crit = chi2.isf(alpha / (2 * m), d)
        miss = float(np.prod(ncx2.cdf(crit, d, lam)))
        p_chi = max(p_global, 1.0 - miss)
    return 1.0 - (1.0 - p_zero) * (1.0 - p_chi)


def _lambda90(alpha: float, dof: int = 3) -> float:
    """Noncentrality at which one chi-square test of ``dof`` degrees of freedom at level alpha/2
    has power `POWER`."""
    crit = chi2.isf(alpha / 2, dof)
    lo, hi = 0.0, 1.0
    while ncx2.sf(crit, dof, hi) < POWER:
        hi *= 2
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ncx2.sf(crit, dof, mid) < POWER else (lo, mid)
    return hi


#: kappa: a zero-cell mass z a sample is worth a noncentrality of kappa z a sample in the linear
#: program (n z = ln 10 samples on impossible cells catch with probability 0.9, as a
#: noncentrality of lambda_90 does): kappa = lambda_90 / ln 10, computed per alpha.
ZERO_CELL_WEIGHT = "lambda_90(alpha, 3 dof) / ln 10"


# ----------------------------------------------------------------------------- allocation


@dataclass
class Allocation:
    """Copies of candidate rows and their powers: ``copies`` [R] int (a row given c times gets c
    shares of the samples), ``n`` samples a copy, ``powers`` name -> predicted power,
    ``weights`` the linear program's w, ``least`` the weakest replica's noncentrality a sample."""

    copies: np.ndarray
    n: int
    powers: dict
    weights: np.ndarray
    least: float
    dofs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))


def _max_min_weights(E: np.ndarray) -> tuple[np.ndarray, float]:
    """w >= 0, sum w = 1 maximising min_r (E w)_r; E [Q, R]."""
    Q, R = E.shape
    A = E / max(float(E.max()), 1e-300)  # one common scale, for the solver's conditioning
    c = np.zeros(R + 1)
    c[-1] = -1.0
    A_ub = np.hstack([-A, np.ones((Q, 1))])
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(Q), A_eq=np.hstack([np.ones((1, R)), [[0.0]]]),
                  b_eq=[1.0], bounds=[(0, None)] * R + [(None, None)], method="highs")
    if res.status != 0:
        raise SpectheoryError(f"the design's linear program failed: {res.message}")
    w = np.clip(res.x[:R], 0.0, None)
    w /= w.sum()
    return w, float((E @ w).min())


#: The greedy rounding counts a replica as served once its noncentrality reaches this multiple
#: of lambda_90 (one test, 3 degrees of freedom, level alpha/2), then serves the others.
TARGET_MARGIN = 2.0


def _greedy_copies(E: np.ndarray, w: np.ndarray, n: int, m: int, target: float) -> np.ndarray:
    """m copies of rows, added one at a time, each the candidate that most raises the least
    served replica (noncentrality n sum_b k_b E_rb, capped at ``target``; ties: the mean capped
    share, then the least uncapped share). Candidates: the linear program's support and each
    replica's three best rows. Rounding w itself would drop the rows of small weight that
    serve one replica alone."""
    Q, R = E.shape
    cand = set(np.flatnonzero(w > 1e-9).tolist())
    for r in range(Q):
        cand.update(np.argsort(-E[r], kind="stable")[:3].tolist())
    cand = np.array(sorted(cand))
    k = np.zeros(R, dtype=int)
    lam = np.zeros(Q)
    gain = n * E[:, cand]  # [Q, candidates]
    for _ in range(m):
        new = lam[:, None] + gain
        share = new / target
        capped = np.minimum(share, 1.0)
        score = capped.min(0) + 1e-3 * capped.mean(0) + 1e-6 * share.min(0)
        j = int(np.argmax(score))
        k[cand[j]] += 1
        lam = new[:, j]
    return k


def allocate(ref: Sequence[np.ndarray], laws: dict, budget: int, alpha: float = 1e-3,
             max_rows: int = MAX_ROWS, min_expected: float = MIN_EXPECTED,
             generic_tv: float | None = None, bonus: Sequence[np.ndarray] | None = None,
             bonus_tv: float | None = None) -> Allocation:
    """Max-min allocation of ``budget`` samples over candidate test rows.

    ``ref`` a list of G groups of reference cell probabilities [R_g, C_g] (rows of one group
    share their cells, e.g. one (V, L) shape); ``laws`` name -> list of G arrays [R_g, C_g] of
    each replica's cell probabilities on the same rows (NaN rows: the replica has no law there,
    the row is not used). Candidate rows are indexed group after group. Returns the
    [`Allocation`][spectheory.testing.designs.sharp.Allocation] whose least predicted power over the
    replicas is largest among m = 1..``max_rows`` copies of n = budget // m samples (the check
    splits the budget evenly; the first budget mod m copies get one more sample, ignored here).
    With ``generic_tv`` delta, one more constraint: any bias of total variation delta on every
    row's bins (least-favourable spread: noncentrality 4 n delta^2 on each row with a degree of
    freedom, `spectheory.testing.statistics.budget`) is caught too, so that the rows keep testing
    more than the replicas (reported under the name `GENERIC`). With ``bonus`` (G arrays [R_g], each
    row's probability of reaching the bonus token, P(tau = L)) and ``bonus_tv`` delta_B, one
    more: any change of TV delta_B in the bonus token's law given tau = L (divergence
    4 delta_B^2 P(tau = L) on rows with a degree of freedom; `GENERIC_BONUS`). Replicas whose exact law equals the
    reference on every candidate row cannot be caught by any allocation and raise; drop them
    first.

    Refused in one line before any work: ``budget`` not an integer in 1..`MAX_BUDGET`,
    ``max_rows`` not one in 1..`MAX_ALLOC_ROWS`, ``alpha`` outside (0, 1), ``generic_tv`` or
    ``bonus_tv`` neither None nor a number in (0, 1], ``bonus_tv`` without ``bonus``; ``ref`` not
    a non-empty list of arrays [R_g, C_g], ``laws`` not a dict of lists of arrays of the same
    shapes, a row without a NaN that is not finite, non-negative and summing to 1 within
    `CELL_SUM_TOL`; ``bonus`` not G arrays [R_g] of values in [0, 1]."""
    budget = _budget(budget)
    alpha = _level(alpha)
    max_rows = _count("max_rows", max_rows, 1, MAX_ALLOC_ROWS)
    min_expected = _args.real("min_expected", min_expected, 0.0)
    generic_tv = _tv_or_none("generic_tv", generic_tv)
    bonus_tv = _tv_or_none("bonus_tv", bonus_tv)
    if bonus_tv is not None and bonus is None:
        raise OptionError(f"bonus_tv = {_args.show(bonus_tv)} needs bonus (each row's "
                          f"P(tau = L)); give both or neither")
    ref = _cell_groups("ref", ref)
    if not isinstance(laws, Mapping):
        raise InputError(f"laws = {_args.show(laws)} must be a dict: name -> list of arrays "
                         f"[rows, cells], one per group, not {type(laws).__name__}")
    laws = {nm: _cell_groups(f"laws[{_args.show(nm)}]", a, ref) for nm, a in laws.items()}
    if bonus is not None:
        bonus = _reach_groups(bonus, ref)
    names = list(laws)
    if not names:
        raise SpectheoryError("no replicas to design against")
    G = len(ref)
    bad = np.concatenate([np.isnan(r).any(-1) for r in ref])
    for nm in names:
        bad |= np.concatenate([np.isnan(a).any(-1) for a in laws[nm]])
    use_bonus = bonus is not None and bonus_tv is not None
    reach = np.concatenate(bonus) if use_bonus else None
    every = names + ([GENERIC] if generic_tv is not None else []) + \
        ([GENERIC_BONUS] if use_bonus else [])
    kappa = _lambda90(alpha) / math.log(10)
    target = TARGET_MARGIN * _lambda90(alpha)
    best = None
    tried = set()
    # per group, every replica's rows under one another [N R_g, C_g] against the reference rows
    # repeated N times: binned_divergence works row by row, so one call a group and m gives
    # each replica's (c, z) of its own call, and d (the reference's bins) once
    N = len(names)
    sizes = [len(np.asarray(r)) for r in ref]
    stacked = [np.concatenate([np.nan_to_num(np.asarray(laws[nm][g], dtype=np.float64), nan=0.0)
                               for nm in names]) for g in range(G)]
    repeated = [np.tile(np.asarray(ref[g], dtype=np.float64), (N, 1)) for g in range(G)]
    cells = None  # per group, the part of binned_divergence that does not depend on n
    for m in range(1, max_rows + 1):
        n = budget // m
        if n < 1:
            break
        if cells is None:  # checked as binned_divergence checks its arguments, once
            cells = [_checked_cells(repeated[g], stacked[g], n, min_expected)[0]
                     for g in range(G)]
        n = _args.count("n", n, 0, MAX_ROW_SAMPLES)
        per_group = [_binned(cells[g], n, min_expected) for g in range(G)]
        C = np.array([np.concatenate([c[i * R:(i + 1) * R] for (c, _, _), R
                                      in zip(per_group, sizes)]) for i in range(N)])
        Z = np.array([np.concatenate([z[i * R:(i + 1) * R] for (_, z, _), R
                                      in zip(per_group, sizes)]) for i in range(N)])
        D = np.concatenate([d[:R] for (_, _, d), R in zip(per_group, sizes)])
        if generic_tv is not None:
            C = np.vstack([C, np.where(D >= 1, 4.0 * generic_tv ** 2, 0.0)[None]])
            Z = np.vstack([Z, np.zeros((1, Z.shape[1]))])
        if use_bonus:
            C = np.vstack([C, np.where(D >= 1, 4.0 * bonus_tv ** 2 * reach, 0.0)[None]])
            Z = np.vstack([Z, np.zeros((1, Z.shape[1]))])
        C[:, bad], Z[:, bad] = 0.0, 0.0
        E = C + kappa * Z
        if (E.max(axis=1) <= 0).any():
            dead = [nm for nm, e in zip(every, E) if e.max() <= 0]
            if m == 1:
                raise SpectheoryError(f"no candidate row separates {', '.join(dead)} from the "
                                      f"reference law")
            continue
        w, least = _max_min_weights(E)
        k = _greedy_copies(E, w, n, m, target)
        key = tuple(k)
        if key in tried or k.sum() == 0:
            continue
        tried.add(key)
        idx = np.repeat(np.arange(len(k)), k)
        powers = {nm: replica_power(np.full(len(idx), n), C[r, idx], Z[r, idx], D[idx], alpha)
                  for r, nm in enumerate(every)}
        score = min(powers.values())
        if best is None or score > best[0] + 1e-12:
            best = (score, Allocation(k, n, powers, w, least, D[idx]))
    if best is None:
        raise SpectheoryError(f"budget = {budget} is too small for a design")
    return best[1]


# ----------------------------------------------------------------------------- candidate rows


def _row(rng, V: int, kind: str, x: int, q_row=None):
    """One distribution over V on a grid of 1/20 (ties between rows come from the grid)."""
    w = rng.dirichlet(np.full(V, 0.7))
    w = np.maximum(np.round(w * 20), 0)
    if kind == "zeros":
        drop = rng.random(V) < 0.4
        drop[x] = False
        w = np.where(drop, 0.0, w)
    if w.sum() == 0 or w[x] == 0 and kind != "p0":
        w[x] += 1
    return w / w.sum()


def _sizes(name: str, values, most: int) -> tuple[int, ...]:
    """A non-empty sequence of integers in 1..``most`` (the vocabularies or the draft lengths of
    a pool), or one line naming the argument."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or len(values) == 0:
        raise InputError(f"{name} = {_args.show(values)} must be a non-empty sequence of "
                         f"integers in 1..{most}")
    if len(values) > most:
        raise InputError(f"{name} has {len(values)} entries; at most {most} (each in 1..{most})")
    return tuple(_count(f"{name}[{i}]", v, 1, most) for i, v in enumerate(values))


def candidate_pool(size: int = DEFAULT_POOL, seed: int = 0, vocab=(2, 3, 4),
                   lengths=(1, 2, 3), paths: int = 1) -> list[DraftRows]:
    """Candidate draft rows (single path), grouped by (V, L): ``size`` random rows plus the bug
    kit's own rows (`spectheory.testing.mutants.coins`: the zero-probability and shared-noise
    rows). Every row is prefix-dependent (each position's q and p drawn afresh) and has
    q(X_i) > 0 at each draft. Kinds, in turn: grid rows (probabilities on a 1/20 grid, so p/q
    ties occur); rows with about 40% zeros in p or q; an exact tie p(X_i) = q(X_i); target
    probability 0 at a draft; a draft probability of 1e-8 (below float16's 2^-25, which it
    underflows to 0) with target probability 0 or 5e-9. Deterministic in ``seed``; built from no
    sampler. With ``paths`` K > 1: K-path rows (``drafts [B, K, L]``) of small instances, every
    K-tuple of paths (``size``, ``vocab`` and ``lengths`` unused; see `_multipath_pool`).
    Bounds, refused before anything is drawn: ``size`` <= `MAX_POOL`, each V in
    1..`MAX_POOL_VOCAB`, each L in 1..`MAX_POOL_LENGTH`, ``paths`` in 1..`MAX_POOL_PATHS`;
    ``seed`` an integer >= 0."""
    from ..mutants import coins

    size = _count("size", size, 0, MAX_POOL)
    seed = _count("seed", seed, 0)
    paths = _count("paths", paths, 1, MAX_POOL_PATHS)
    vocab = _sizes("vocab", vocab, MAX_POOL_VOCAB)
    lengths = _sizes("lengths", lengths, MAX_POOL_LENGTH)
    if paths > 1:
        return _multipath_pool(int(paths), seed)
    rng = np.random.default_rng(seed)
    kinds = ("grid", "zeros", "tie", "p0", "tiny", "bonus")
    groups: dict = {}
    for i in range(size):
        V = int(vocab[i % len(vocab)])
        L = int(lengths[(i // len(vocab)) % len(lengths)])
        kind = kinds[(i // (len(vocab) * len(lengths))) % len(kinds)]
        d = rng.integers(0, V, size=L)
        q = np.zeros((L, V))
        p = np.zeros((L + 1, V))
        for j in range(L):
            x = int(d[j])
            q[j] = _row(rng, V, "zeros" if kind == "zeros" and rng.random() < 0.5 else "grid", x)
            p[j] = _row(rng, V, "zeros" if kind == "zeros" else "grid", x)
            at = rng.integers(0, L)  # the special position
            if kind == "tie" and j == at:
                rest = p[j].copy()
                rest[x] = 0
                s = rest.sum()
                p[j] = rest * (1 - q[j, x]) / s if s > 0 else q[j]
                p[j, x] = q[j, x]
            elif kind == "p0" and j == at and V > 1:
                p[j, x] = 0.0
                if p[j].sum() == 0:
                    p[j, (x + 1) % V] = 1.0
                p[j] /= p[j].sum()
            elif kind == "tiny" and j == at and V > 1:
                q[j] *= (1 - 1e-8) / (1 - q[j, x]) if q[j, x] < 1 else 0
                if q[j].sum() == 0:
                    q[j, (x + 1) % V] = 1.0 - 1e-8
                q[j, x] = 1e-8
                if p[j].sum() - p[j, x] <= 0:
                    p[j, (x + 1) % V] = 1.0
                p[j] *= (1 - 5e-9) / (p[j].sum() - p[j, x])
                p[j, x] = 0.0 if rng.random() < 0.5 else 5e-9
            if kind == "bonus":  # acceptance at least about 0.8 at every draft
                keep = max(p[j, x], min(1.0, 0.8 * q[j, x]))
                rest = p[j].copy()
                rest[x] = 0.0
                s = rest.sum()
                p[j] = rest * (1 - keep) / s if s > 0 else np.eye(V)[x]
                p[j, x] = keep if s > 0 else 1.0
        p[L] = _row(rng, V, "grid", int(rng.integers(0, V)))
        if kind == "bonus":  # the bonus row far from p_{L-1}: 0 on its likeliest token,
            # most mass on its least likely one
            lo, hi = int(np.argmin(p[L - 1])), int(np.argmax(p[L - 1]))
            w = p[L].copy()
            w[hi] = 0.0
            w = 0.3 * w / w.sum() if w.sum() > 0 else np.zeros(V)
            w[lo] += 1.0 - w.sum()
            p[L] = w
        groups.setdefault((V, L), []).append((d, q, p))
    out = []
    for (V, L), rows in sorted(groups.items()):
        d = torch.as_tensor(np.array([r[0] for r in rows]), dtype=torch.long)
        q = torch.as_tensor(np.array([r[1] for r in rows]), dtype=torch.float64)
        p = torch.as_tensor(np.array([r[2] for r in rows]), dtype=torch.float64)
        out.append(DraftRows(d, q, p))
    for d, q, p in (coins.zero_probability_rows(), coins.zero_probability_rows(1, 3),
                    coins.shared_noise_rows()):
        out.append(DraftRows(d, q.to(torch.float64), p.to(torch.float64)))
    return out


# ----------------------------------------------------------------------------- replicas


def _port_sampler(port: str, bug: str):
    from ..engines import adapters as A
    from ..engines import layouts as Lm

    if port == "vllm-v1":
        return Lm.engine_sampler(functools.partial(A.vllm_v1_rejection_sample, bug=bug),
                                 Lm.VLLM_V1)
    if port == "sglang":
        return Lm.engine_sampler(functools.partial(A.sglang_chain_speculative_sampling, bug=bug),
                                 Lm.SGLANG_CHAIN)
    if port == "transformers":
        return Lm.engine_sampler(functools.partial(A.hf_speculative_sampling, bug=bug),
                                 Lm.TRANSFORMERS)
    if port == "vllm-mrv2":
        return A.vllm_mrv2_sampler("standard", bug=bug)
    if port == "vllm-mrv2-block":
        return A.vllm_mrv2_sampler("block", bug=bug)
    raise ValueError(port)


#: Token-rule ports and the variant of each planted bug (`spectheory.testing.mutants.replica_laws`).
_TOKEN_PORTS = {
    "vllm-v1": {"target-row": "clamped", "residual-row": "clamped", "coin-compare": "reversed"},
    "sglang": {"target-row": "next", "residual-row": "next", "coin-compare": None},
    "transformers": {"target-row": "next", "residual-row": "next", "coin-compare": "reversed"},
    "vllm-mrv2": {"target-row": "next", "residual-row": "next", "coin-compare": "reversed"},
}


def _spec_law(spec):
    return spec.function


def kit_replicas(verifier: str = "token", ports: bool = True, paths: int = 1) -> list[Replica]:
    """The bug kit's replicas a single-path check against ``verifier`` ("token" or "block")
    meets, each with its exact law and a sampler that runs it: the law-kind formula mutants
    (through [`make_sampler`][spectheory.testing.checks.sampler.make_sampler]), vLLM #47386's shared
    noise and SGLang #35771's zero coin (sampler kind; the latter invisible to sampling, caught
    in coins mode), and with ``ports`` the planted bugs
    (`spectheory.testing.engines.adapters.PORT_BUGS`) of the engine ports through their presets
    (SGLang's flipped strictness: coins mode), and the bonus-path replicas of `KIT_BONUS_BUGS`.
    Replicas of one bug in several ports share a ``law_key``. Multi-path (``paths`` K): the GBV
    reference code's replicas against ``"gbv"`` (tie rule and capped ranking at K >= 2, the
    float16 skew at K = 3, where its normaliser underflows) and its traversal visiting the
    first leaf against ``"traversal-tree"`` (K = 3), through ``make_sampler(..., paths=K)``."""
    from ..mutants import MUTANTS, coins
    from ..mutants import replica_laws as RL
    from ..checks.sampler import make_sampler

    paths = _count("paths", paths, 1)
    ports = check_flag(ports, "ports")
    out: list[Replica] = []
    if paths > 1:
        keys = {"gbv": ("gbv-ref-tie-rule", "gbv-ref-capped-ranking")
                + (("gbv-ref-fp16-skew",) if paths == 3 else ()),
                "traversal-tree": ("gbv-ref-traversal-first-leaf",) if paths == 3 else ()}
        if not keys.get(verifier):
            raise SpectheoryError(f"kit_replicas has no {paths}-path replicas of {verifier!r}: "
                                  f"gbv with K = 2 or 3, traversal-tree with K = 3")
        for key in keys[verifier]:
            m = MUTANTS[key]
            out.append(Replica(key, _spec_law(m.function), make_sampler(m.function, paths),
                               verifier, source=f"{m.project} {m.issue}"))
        return out
    if verifier == "token":
        for key in ("trtllm-15098-off-by-one", "hf-28508-softmax-residual",
                    "mlxcel-992-fp16-underflow-accept"):
            m = MUTANTS[key]
            out.append(Replica(key, _spec_law(m.function), make_sampler(m.function), "token",
                               source=f"{m.project} {m.issue}",
                               law_key="target-row-next" if "off-by-one" in key else key))
        out.append(Replica("vllm-47386-shared-noise", RL.shared_noise_law,
                           coins.shared_noise_sampler, "token", source="vLLM #47386"))
        out.append(Replica("sglang-35771-zero-coin", None, coins.zero_coin_sampler, "token",
                           source="SGLang #35771", visible=False,
                           caught_by="coins mode (pinned coin 0); a coin of exactly 0 has "
                                     "probability 2^-53 (float64) or 2^-24 (float32) a draw"))
        if ports:
            from ..engines.adapters import PORT_BUGS

            for port, variants in _TOKEN_PORTS.items():
                for bug in PORT_BUGS:
                    v = variants.get(bug)
                    name = f"{port}-port-{bug}"
                    if bug == "coin-compare" and v is None:
                        out.append(Replica(name, None, _port_sampler(port, bug), "token",
                                           source=f"{port} port, planted", visible=False,
                                           caught_by="coins-tau mode (pinned coin 0): the "
                                                     "strict comparison made non-strict differs "
                                                     "only on a coin of exactly 0"))
                        continue
                    law = functools.partial(RL.token_port_law, bug=bug, variant=v)
                    out.append(Replica(name, law, _port_sampler(port, bug), "token",
                                       source=f"{port} port, planted",
                                       law_key=f"{bug}-{v}" if v else bug))
        return out + bonus_replicas("token", KIT_BONUS_BUGS)
    if verifier == "block":
        for key in ("vllm-ascend-3794-uniform-product", "vllm-40819-block-wrong-row"):
            m = MUTANTS[key]
            out.append(Replica(key, _spec_law(m.function), make_sampler(m.function), "block",
                               source=f"{m.project} {m.issue}",
                               law_key="wrong-row" if "wrong-row" in key else key))
        if ports:
            for bug in RL.BLOCK_PORT_BUGS:
                out.append(Replica(f"vllm-mrv2-block-port-{bug}",
                                   functools.partial(RL.block_port_law, bug=bug),
                                   _port_sampler("vllm-mrv2-block", bug), "block",
                                   source="vllm-mrv2 port, planted", law_key=bug))
        return out + bonus_replicas("block", KIT_BONUS_BUGS)
    raise SpectheoryError(f"kit_replicas covers single-path token and block samplers, and gbv "
                          f"and traversal-tree with paths = 2 or 3, not {verifier!r}")


def _as_replicas(replicas, verifier: str) -> list[Replica]:
    out = []
    if isinstance(replicas, (str, bytes, Replica)) or not hasattr(replicas, "__iter__"):
        raise SpectheoryError(f"replicas must be a list of Replica or (name, law) pairs, not "
                              f"{type(replicas).__name__}")
    if isinstance(replicas, tuple) and len(replicas) == 2 and isinstance(replicas[0], str) \
            and callable(replicas[1]):
        raise SpectheoryError(f"replicas = ({replicas[0]!r}, law) is one (name, law) pair; give "
                              f"a list of them: [({replicas[0]!r}, law)]")
    for i, r in enumerate(replicas):
        if isinstance(r, Replica):
            if r.law is not None and not callable(r.law):
                raise SpectheoryError(f"replica {r.name!r}: its law is not callable (a "
                                      f"{type(r.law).__name__}); give law(drafts, q, p) -> Law "
                                      f"or None")
            out.append(r)
        elif isinstance(r, tuple) and len(r) == 2:
            if callable(r[0]) and not callable(r[1]):
                raise SpectheoryError(f"replicas[{i}] is a (law, name) pair; give (name, law)")
            if not callable(r[1]):
                raise SpectheoryError(f"replica {str(r[0])!r}: its law is not callable (a "
                                      f"{type(r[1]).__name__}); give (name, law) with "
                                      f"law(drafts, q, p) -> Law")
            out.append(Replica(str(r[0]), r[1], None, verifier))
        elif isinstance(r, (tuple, list)):
            raise SpectheoryError(f"replicas[{i}] is a {type(r).__name__} of {len(r)} item"
                                  f"{'s' * (len(r) != 1)}; a replica is a Replica or a "
                                  f"(name, law) tuple")
        else:
            raise SpectheoryError(f"replicas[{i}] = {_args.show(r)}: a replica must be a Replica "
                                  f"or a (name, law) pair, not {type(r).__name__}")
    return out


#: A row of q or p given to `predicted_power` or `simulated_power` sums to 1 within this (the
#: tolerance `spectheory.testing.checks.rows.bad_row` holds instances built in Python to).
ROW_TOL = 1e-6


def _design_rows(rows, paths, name: str = "rows") -> tuple[list[DraftRows], int]:
    """``rows``: a non-empty list of (drafts, q, p) triples, all single-path (drafts [B, L],
    q [B, L, V], p [B, L+1, V]) or all with one path axis K (drafts [B, K, L], q [B, K, L, V],
    p [B, K, L+1, V]), drafts integer tokens in 0..V-1, q and p rows finite, non-negative and
    summing to 1 within `ROW_TOL`; ``paths`` None or the rows' K. Returns the rows (drafts int64,
    q and p float64) and K, or one `InputError` line naming the first row at fault."""
    if isinstance(rows, (str, bytes, DraftRows)) or not isinstance(rows, (list, tuple)):
        raise InputError(f"{name} = {_args.show(rows)} must be a list of DraftRows (drafts, q, "
                         f"p), not {type(rows).__name__}")
    out, K = [], None
    for i, r in enumerate(rows):
        if not isinstance(r, (tuple, list)) or len(r) != 3:
            extra = f" of {len(r)} items" if isinstance(r, (tuple, list)) else ""
            raise InputError(f"{name}[{i}] = {_args.show(r)} is not a (drafts, q, p) triple: a "
                             f"{type(r).__name__}{extra}")
        ts = []
        for nm, x in zip(("drafts", "q", "p"), r):
            if isinstance(x, (str, bytes)):
                raise InputError(f"{name}[{i}] {nm} = {_args.show(x)} is not a tensor of numbers")
            try:
                ts.append(torch.as_tensor(x))
            except Exception:  # noqa: BLE001 - anything torch cannot read
                raise InputError(f"{name}[{i}] {nm} = {_args.show(x)} is not a tensor of "
                                 f"numbers") from None
        d, q, p = ts
        k = 1 if d.dim() == 2 else int(d.shape[1]) if d.dim() == 3 else 0
        lead = list(d.shape[:-1])
        L = int(d.shape[-1]) if d.dim() else 0
        V = int(p.shape[-1]) if p.dim() else 0
        if not k or L < 1 or V < 1 or list(q.shape) != lead + [L, V] or \
                list(p.shape) != lead + [L + 1, V]:
            raise InputError(f"{name}[{i}]: drafts {list(d.shape)}, q {list(q.shape)} and p "
                             f"{list(p.shape)} do not fit drafts [B, L], q [B, L, V], "
                             f"p [B, L+1, V] (or with a path axis K after B) with L >= 1")
        if d.shape[0] == 0:
            raise InputError(f"{name}[{i}] has no draft rows (drafts {list(d.shape)}); each group "
                             "of rows has at least one")
        if d.is_floating_point() or d.is_complex() or d.dtype == torch.bool:
            raise InputError(f"{name}[{i}] drafts are {d.dtype}; draft tokens are integers")
        for nm, t in (("q", q), ("p", p)):
            if t.is_complex() or t.dtype == torch.bool:
                raise InputError(f"{name}[{i}] {nm} is {t.dtype}; rows of real probabilities")
        if d.numel() and (int(d.min()) < 0 or int(d.max()) >= V):
            raise InputError(f"{name}[{i}] has a draft token outside 0..{V - 1}")
        q, p = q.to(torch.float64), p.to(torch.float64)
        for nm, t in (("q", q), ("p", p)):
            if not bool(torch.isfinite(t).all()) or bool((t < 0).any()):
                raise InputError(f"{name}[{i}] {nm} has a negative or non-finite entry")
            sums = t.sum(-1).flatten()
            if t.numel() and float((sums - 1.0).abs().max()) > ROW_TOL:
                worst = float(sums[int((sums - 1.0).abs().argmax())])
                raise InputError(f"{name}[{i}] {nm} has a row summing to {worst!r}, not 1 "
                                 f"(tolerance {ROW_TOL:g})")
        if K is not None and k != K:
            raise InputError(f"{name}[{i}] has {k} path{'s' * (k != 1)} and {name}[0] {K}; one "
                             f"path count K for all rows")
        K = k
        out.append(DraftRows(d.to(torch.long), q, p))
    if paths is not None:
        paths = _count("paths", paths)
        if K is not None and paths != K:
            raise OptionError(f"paths = {paths} but the {name} carry {K} path{'s' * (K != 1)} "
                              f"(drafts [B, L] for one, [B, K, L] for K)")
    return out, (K or 1)


def _cells(law, K1: bool) -> np.ndarray:
    """Cell probabilities [B, K (L+1) V] of a law (the order of ``check_sampler``'s cells)."""
    stop = torch.as_tensor(law.stop, dtype=torch.float64)
    corr = torch.as_tensor(law.correction, dtype=torch.float64)
    if K1 and stop.dim() == 2:
        stop, corr = stop.unsqueeze(1), corr.unsqueeze(1)
    cells = stop.unsqueeze(-1) * corr
    return cells.reshape(cells.shape[0], -1).numpy()


def _laws_on(pool, fn, name: str = "replica") -> list[np.ndarray]:
    """Each group's cell probabilities under ``fn`` (a single-path law function on rows
    ``drafts [B, L]``, or a K-path one on ``drafts [B, K, L]``); NaN rows: no law there."""
    return [_rep_cells(fn, d, q, p, name) for d, q, p in pool]


def _ref_cells(how, d, q, p) -> np.ndarray:
    """The reference's cell probabilities [B, K (L+1) V] on rows of either form."""
    q, p = q.to(torch.float64), p.to(torch.float64)
    if d.dim() == 2:
        d, q, p = d.unsqueeze(1), q.unsqueeze(1), p.unsqueeze(1)
    return _cells(how.spec.law(d, q, p), False)


def _rep_cells(fn, d, q, p, name: str = "replica") -> np.ndarray:
    """A replica's cell probabilities on rows of either form (a single-path law function gets
    ``drafts [B, L]``). The law is user code: it is handed copies of the rows (a law that wrote
    into its inputs changed the caller's pool and every later design on it), and one that
    raises or returns something that is not a law of these rows (a cell that is negative or not
    finite, a row that does not sum to 1; a row with a NaN states no law there) is a one-line
    `UserCodeError` naming the replica."""
    d = d.clone()
    q, p = q.to(torch.float64, copy=True), p.to(torch.float64, copy=True)
    K = 1 if d.dim() == 2 else int(d.shape[1])
    if d.dim() == 3 and d.shape[1] == 1:
        d, q, p = d[:, 0], q[:, 0], p[:, 0]
    what = f"the law of replica {name!r}"
    law = call_user(fn, d, q, p, what=what)
    B, L, V = int(d.shape[0]), int(d.shape[-1]), int(p.shape[-1])
    try:
        cells = _cells(law, True)
    except Exception as exc:  # noqa: BLE001 - anything a user's law returns
        raise UserCodeError(f"{what} returned {type(law).__name__}, not a Law (stop [B, L+1], "
                            f"correction [B, L+1, V]): {type(exc).__name__}") from exc
    if cells.shape != (B, K * (L + 1) * V):
        raise UserCodeError(f"{what} returned a law of {cells.shape[1] if cells.ndim == 2 else '?'}"
                            f" cells a row on {B} rows of {K * (L + 1) * V} cells (K = {K}, "
                            f"L = {L}, V = {V})")
    for part in ("stop", "correction"):  # inf times a zero cell is a NaN: a row of "no law"
        if bool(torch.isinf(torch.as_tensor(getattr(law, part), dtype=torch.float64)).any()):
            raise UserCodeError(f"{what} returned a law whose {part} has an infinite entry")
    try:
        _cell_groups(what, [cells])
    except InputError as exc:
        raise UserCodeError(str(exc).replace(f"{what}[0] ", f"{what} returned a law whose ", 1)) \
            from None
    return cells


def _reach_bonus(cells: np.ndarray, d, tv: float | None) -> np.ndarray:
    """P(tau = L) [B] of each row from its cell probabilities [B, K (L+1) V] (drafts ``d`` [B, L]
    or [B, K, L]), counting only the paths whose bonus law (Y given tau = L) has mass at least
    ``tv`` off its most probable token: only there can a bias of TV ``tv`` that keeps Y inside
    the bonus law's support (a temperature, a row read from a neighbouring position with the
    same support) show. On a point-mass bonus law every bug of the bonus row that moves mass
    off the point is caught by one sample, but one that reweights the support is invisible."""
    L = int(d.shape[-1])
    K = 1 if d.dim() == 2 else int(d.shape[1])
    B = cells.shape[0]
    V = cells.shape[1] // (K * (L + 1))
    last = np.nan_to_num(cells.reshape(B, K, L + 1, V)[:, :, L], nan=0.0)  # [B, K, V]
    mass = last.sum(-1)
    off = 1.0 - last.max(-1) / np.where(mass > 0, mass, 1.0)
    ok = (mass > 0) & (off >= (0.0 if tv is None else tv) - 1e-12)
    return np.where(ok, mass, 0.0).sum(-1)


def _multipath_pool(paths: int, seed: int, per_instance: int = 256) -> list[DraftRows]:
    """K-path candidate rows: every K-tuple of draft paths of positive i.i.d. draft probability
    (at most ``per_instance`` a instance, drawn without replacement), rows along each path from
    the instance's tables (so paths that share a prefix share its rows), on the bug kit's
    instances (p = q = (1/2, 1/2); the two-token example; p/q ties; capped ties; the float16
    instance) and random prefix-dependent instances with V = 2, 3, L = 1, 2 on a grid of 1/4
    and 1/12 (ties) and with zeros."""
    import itertools

    from ...engine.joint import draft_rows
    from ...engine.seqtree import levels
    from ...inputs.random_instances import random_instance
    from .. import mutants as M

    rng = np.random.default_rng(seed)
    insts = [M.pq_half_instance(), M.two_token_example(), M.gbv_three_token_instance(),
             M.capped_tie_instance(), M.fp16_instance()]
    for i, (V, L) in enumerate(((2, 1), (3, 1), (2, 2), (3, 2))):
        for den in (4, 12):
            insts.append(random_instance(V, L, 100 * seed + 10 * i + den, denominator=den))
        insts.append(random_instance(V, L, 100 * seed + 10 * i + 1, denominator=12,
                                     alpha=0.3))
    groups: dict = {}
    for inst in insts:
        inst = inst.to_float()
        V, L = inst.vocab_size, inst.block_length
        ql = levels(inst.draft, 0, L, False)
        pl = levels(inst.target, 0, L + 1, False)
        seqs = list(itertools.product(range(V), repeat=L))
        tuples = np.array(list(itertools.product(range(len(seqs)), repeat=paths)))
        if len(tuples) > per_instance:
            tuples = tuples[np.sort(rng.choice(len(tuples), per_instance, replace=False))]
        d = torch.as_tensor(np.array([[seqs[i] for i in t] for t in tuples]), dtype=torch.long)
        q, p = draft_rows(ql, pl, d, L, V)
        live = (q.gather(-1, d.unsqueeze(-1))[..., 0] > 0).all(-1).all(-1)
        if live.any():
            groups.setdefault((V, L), []).append(DraftRows(d[live], q[live], p[live]))
    return [DraftRows(*(torch.cat([g[j] for g in gs]) for j in range(3)))
            for _, gs in sorted(groups.items())]


# ----------------------------------------------------------------------------- designs


@dataclass
class SharpDesign:
    """A sharp design: ``rows`` (a list of
    [`DraftRows`][spectheory.testing.checks.report.DraftRows], one per (V, L) shape; pass as
    ``instances`` to [`check_sampler`][spectheory.testing.checks.sampler.check_sampler] with
    ``samples = budget``), ``predicted`` (name ->
    [`ReplicaPower`][spectheory.testing.designs.sharp.ReplicaPower]), ``detectable_tv`` (the
    smallest total-variation bias, spread least favourably over every row's bins, detected with 90%
    power at ``alpha``: the figure the check's report states), ``invisible`` (name -> the mode that
    catches a replica no sampling check sees), the number of row copies and samples a copy, and
    ``generic_tv``, the bias of any direction the design was also required to catch
    (``detectable_tv`` is at most that when the design met it); ``bonus_tv`` the change of the bonus
    token's law given tau = L it was required to catch, ``bonus_power`` its predicted power,
    ``bonus_samples`` the expected number of samples that reach the bonus token (sum_b n_b P_b(tau =
    L))."""

    verifier: str
    budget: int
    alpha: float
    rows: list
    predicted: dict
    detectable_tv: float
    invisible: dict
    copies: int
    samples_per_row: int
    replicas: list = field(default_factory=list)
    generic_tv: float | None = None
    generic_power: float | None = None
    paths: int = 1
    bonus_tv: float | None = None
    bonus_power: float | None = None
    bonus_samples: float = 0.0

    @property
    def least_power(self) -> float:
        """The weakest visible replica's predicted power."""
        return min(r.power for r in self.predicted.values())

    def table(self) -> str:
        """One line per replica: predicted power, noncentrality, TV on the rows."""
        lines = [f"sharp design for {self.verifier}"
                 f"{'' if self.paths == 1 else f' (K = {self.paths})'}: {self.copies} row copies x "
                 f"{self.samples_per_row} samples (budget {self.budget:,}), alpha = "
                 f"{self.alpha:g}; detects TV >= {self.detectable_tv:.4f} with 90% power"]
        for r in sorted(self.predicted.values(), key=lambda r: r.power):
            sim = "" if r.simulated is None else f" (from the law: {r.simulated:.4f})"
            lines.append(f"  {r.name:44s} power {r.power:.4f}{sim}  lambda "
                         f"{r.noncentrality:9.2f}  zero-cell samples {r.zero_mass:7.2f}  "
                         f"TV {r.tv:.4f}")
        if self.generic_tv is not None:
            lines.append(f"  {'any bias of TV ' + format(self.generic_tv, 'g'):44s} power "
                         f"{self.generic_power:.4f}  (least-favourable spread over every row)")
        if self.bonus_tv is not None:
            lines.append(f"  {'any bonus-row bias of TV ' + format(self.bonus_tv, 'g'):44s} "
                         f"power {self.bonus_power:.4f}  (given tau = L; "
                         f"{self.bonus_samples:.0f} samples reach the bonus token)")
        for nm, how in self.invisible.items():
            lines.append(f"  {nm:44s} not visible to sampling: {how}")
        return "\n".join(lines)


def sharp_design(replicas: Sequence | None = None, verifier: str = "token", budget: int = 3000,
                 alpha: float = 1e-3, pool: Sequence[DraftRows] | None = None,
                 max_rows: int = MAX_ROWS, generic_tv: float | None = GENERIC_TV,
                 paths: int | None = None,
                 bonus_tv: float | None = GENERIC_BONUS_TV) -> SharpDesign:
    """Choose draft rows (and their copies) that maximise the weakest replica's detection power at
    ``budget`` samples (module docstring).

    ``replicas``: a list of [`Replica`][spectheory.testing.designs.sharp.Replica] or ``(name, law)``
    pairs (default: [`kit_replicas`][spectheory.testing.designs.sharp.kit_replicas] of
    ``verifier``); ``pool``: candidate DraftRows (default
    [`candidate_pool`][spectheory.testing.designs.sharp.candidate_pool]); ``paths`` K for a K-path
    verifier (the rows then carry a path axis; check with ``paths=K``); ``generic_tv`` and
    ``bonus_tv`` the bias of any direction, and the change of the bonus token's law given
    tau = L, the rows must also catch with 90% power (`GENERIC_TV`, `GENERIC_BONUS_TV`; None:
    not required). Only the reference's and the replicas' exact laws are read: the same
    arguments give the same rows, whatever sampler is checked on them."""
    from ...registry import plan

    budget = _budget(budget)
    alpha = _level(alpha)
    max_rows = _count("max_rows", max_rows, 1, MAX_ALLOC_ROWS)
    generic_tv = _tv_or_none("generic_tv", generic_tv)
    bonus_tv = _tv_or_none("bonus_tv", bonus_tv)
    how = plan(verifier, paths)
    K = how.paths
    if K == 1 and not how.spec.single_path:
        raise SpectheoryError(f"{how.spec.name!r} is a multi-path verifier: pass paths = K")
    reps = _as_replicas(kit_replicas(verifier, paths=K) if replicas is None else replicas,
                        verifier)
    if pool is not None and (isinstance(pool, (str, bytes, DraftRows))
                             or not hasattr(pool, "__iter__")):
        raise InputError(f"pool must be a list of DraftRows, not {type(pool).__name__}")
    pool = list(candidate_pool(paths=K) if pool is None else pool)
    if not pool:
        raise InputError("pool is empty; give candidate DraftRows (or None: candidate_pool())")
    pool, k_pool = _design_rows(pool, None, "pool")
    if k_pool != K:
        raise InputError(f"the pool's rows carry {k_pool} path{'s' * (k_pool != 1)}; the design "
                         f"is for K = {K} (paths)")
    visible = [r for r in reps if r.visible and r.law is not None]
    invisible = {r.name: r.caught_by for r in reps if not (r.visible and r.law is not None)}
    if not visible:
        raise SpectheoryError("no replica with an exact law to design against")
    ref = [_ref_cells(how, d, q, p) for d, q, p in pool]
    by_key: dict = {}
    for r in visible:
        by_key.setdefault(r.law_key or r.name, r)
    laws = {key: _laws_on(pool, r.law, r.name) for key, r in by_key.items()}
    reach = [_reach_bonus(cells, d, bonus_tv) for cells, (d, _, _) in zip(ref, pool)]
    alloc = allocate(ref, laws, int(budget), alpha, max_rows, generic_tv=generic_tv,
                     bonus=reach, bonus_tv=bonus_tv)
    # the chosen rows, grouped by shape, copies repeated
    sizes = [r.shape[0] for r in ref]
    starts = np.cumsum([0] + sizes)
    rows, dof_list, tvs, reach_rows = [], [], {k: [] for k in laws}, []
    C_all, Z_all = {k: [] for k in laws}, {k: [] for k in laws}
    for g, (d, q, p) in enumerate(pool):
        k = alloc.copies[starts[g]:starts[g + 1]]
        if k.sum() == 0:
            continue
        idx = torch.as_tensor(np.repeat(np.arange(len(k)), k), dtype=torch.long)
        rows.append(DraftRows(d[idx], q[idx], p[idx]))
        ii = idx.numpy()
        reach_rows.append(reach[g][ii])
        for key in laws:
            c, z, dd = binned_divergence(ref[g][ii], laws[key][g][ii], alloc.n)
            C_all[key].append(c)
            Z_all[key].append(z)
            tvs[key].append(0.5 * np.abs(laws[key][g][ii] - ref[g][ii]).sum(-1))
        dof_list.append(dd)
    from ..statistics.budget import detectable_tv, family_power, split

    total = sum(r.drafts.shape[0] for r in rows)
    ns = split(int(budget), total)
    dofs = np.concatenate(dof_list)
    predicted = {}
    for r in visible:
        key = r.law_key or r.name
        c, z = np.concatenate(C_all[key]), np.concatenate(Z_all[key])
        tv = np.concatenate(tvs[key])
        predicted[r.name] = ReplicaPower(
            r.name, replica_power(ns, c, z, dofs, alpha), float(np.dot(ns, c)),
            float(np.dot(ns, z)), float(np.dot(ns, tv) / np.sum(ns)),
            simulated_power(rows, r, verifier, int(budget), alpha, paths=K))
    reach_rows = np.concatenate(reach_rows)
    bonus_power = None if bonus_tv is None else replica_power(
        ns, np.where(dofs >= 1, 4.0 * bonus_tv ** 2 * reach_rows, 0.0), np.zeros(len(ns)), dofs,
        alpha)
    return SharpDesign(verifier, int(budget), float(alpha), rows, predicted,
                       detectable_tv(ns, dofs, alpha), invisible, total, int(budget) // total,
                       reps, generic_tv,
                       None if generic_tv is None else family_power(generic_tv, ns, dofs, alpha),
                       K, bonus_tv, bonus_power, float(np.dot(ns, reach_rows)))


def sharp_rows(mode: str = "law", verifier: str = "token", budget: int = 3000,
               alpha: float = 1e-3, replicas: Sequence | None = None,
               paths: int | None = None) -> list[DraftRows]:
    """The rows of [`sharp_design`][spectheory.testing.designs.sharp.sharp_design], for
    ``check_sampler(sampler, verifier, instances=sharp_rows(...), samples=budget,
    alpha=alpha)``. Only ``mode="law"`` takes fixed draft rows (coins modes compare decisions one
    by one and need no design; lossless mode draws its own drafts). Against the bug kit
    (``replicas=None``) the design is computed once per process
    ([`kit_design`][spectheory.testing.designs.sharp.kit_design])."""
    if mode != "law":
        raise SpectheoryError(f"sharp rows serve mode 'law' (fixed draft rows), not {mode!r}")
    budget, alpha = _count("budget", budget), _level(alpha)
    if replicas is None:
        return kit_design(verifier, budget, alpha, 1 if paths is None else paths).rows
    return sharp_design(replicas, verifier, budget, alpha, paths=paths).rows


@functools.lru_cache(maxsize=8)
def _cached(verifier: str, budget: int, alpha: float, paths: int) -> SharpDesign:
    return sharp_design(None, verifier, budget, alpha, paths=paths)


def kit_design(verifier: str = "token", budget: int = 3000, alpha: float = 1e-3,
               paths: int = 1) -> SharpDesign:
    """[`sharp_design`][spectheory.testing.designs.sharp.sharp_design] against the bug kit's
    replicas with the default pool, computed once per process (each call gets its own copy of the
    rows, so a sampler that writes into its inputs cannot change a later design)."""
    import dataclasses

    if not isinstance(verifier, str):  # a name (the design is cached by it)
        raise OptionError(f"kit_design: verifier = {_repr_cut(verifier, 40)} must be a registered "
                          "verifier's name")
    budget, alpha, paths = _count("budget", budget), _level(alpha), _count("paths", paths)
    d = _cached(verifier, budget, alpha, paths)
    return dataclasses.replace(d, rows=[DraftRows(*(x.clone() for x in r)) for r in d.rows])


__all__ += ["kit_design"]


def predicted_power(rows: Sequence[DraftRows], replicas: Sequence, verifier: str = "token",
                    samples: int = 3000, alpha: float = 1e-3, paths: int | None = None) -> dict:
    """Predicted power (name -> [`ReplicaPower`][spectheory.testing.designs.sharp.ReplicaPower]) of
    ``check_sampler(sampler, verifier, instances=rows, samples=samples, alpha=alpha)`` against
    each replica (a [`Replica`][spectheory.testing.designs.sharp.Replica] or ``(name, law)`` pair)
    on given draft rows (a path axis for ``paths`` K > 1), with the check's even split of the
    samples. Raises on a replica that has no law on one of the rows (a NaN row)."""
    from ...registry import plan
    from ..statistics.budget import split

    samples, alpha = _count("samples", samples, 1, MAX_BUDGET), _level(alpha)
    rows, _ = _design_rows(rows, paths)
    how = plan(verifier, paths)
    replicas = _as_replicas(replicas, verifier)
    total = sum(r.drafts.shape[0] for r in rows)
    if total < 1:
        raise SpectheoryError("no draft rows to predict the power on")
    if samples < total:
        raise SpectheoryError(f"samples = {samples} is fewer than the {total} draft rows "
                              f"(check_sampler gives every row at least one sample)")
    ns = np.array(split(samples, total))
    ref = [_ref_cells(how, d, q, p) for d, q, p in rows]
    out = {}
    for r in replicas:
        if r.law is None:
            continue
        cs, zs, ds, tvs = [], [], [], []
        start = 0
        for g, (d, q, p) in enumerate(rows):
            law = _rep_cells(r.law, d, q, p, r.name)
            if np.isnan(law).any():
                raise SpectheoryError(f"replica {r.name} has no law on a row of group {g}")
            B = d.shape[0]
            n_g = ns[start:start + B]
            for b in range(B):  # pooling at each row's own sample count
                c, z, dd = binned_divergence(ref[g][b:b + 1], law[b:b + 1], int(n_g[b]))
                cs.append(c[0])
                zs.append(z[0])
                ds.append(dd[0])
            tvs.append(0.5 * np.abs(law - ref[g]).sum(-1))
            start += B
        cs, zs, ds, tv = np.array(cs), np.array(zs), np.array(ds), np.concatenate(tvs)
        out[r.name] = ReplicaPower(r.name, replica_power(ns, cs, zs, ds, alpha),
                                   float(np.dot(ns, cs)), float(np.dot(ns, zs)),
                                   float(np.dot(ns, tv) / ns.sum()))
    return out


__all__ += ["predicted_power"]


def _bins(ref_row: np.ndarray, n: int, min_expected: float = MIN_EXPECTED):
    """The check's bins of one row at ``n`` samples: (bin index of each cell [C], -1 for cells of
    probability 0; number of bins), as
    [`row_chi_square`][spectheory.testing.statistics.stats.row_chi_square] forms them."""
    ref = np.asarray(ref_row, dtype=np.float64)
    zero = ref <= 0
    e = n * ref / ref.sum()
    big = np.flatnonzero((e >= min_expected) & ~zero)
    rest = np.flatnonzero((e < min_expected) & ~zero)
    out = np.full(ref.shape[0], -1, dtype=np.int64)
    out[big] = np.arange(len(big))
    pooled_e = n - e[big].sum()
    nb = len(big)
    if pooled_e > 1e-9 * max(n, 1) and len(rest):
        if pooled_e < min_expected and nb:
            out[rest] = int(np.argmin(e[big]))
        else:
            out[rest] = nb
            nb += 1
    return out, nb


def simulated_power(rows: Sequence[DraftRows], replica, verifier: str = "token",
                    samples: int = 3000, alpha: float = 1e-3, reps: int = 4000,
                    seed: int = 0, min_expected: float = MIN_EXPECTED,
                    paths: int | None = None) -> float:
    """Power of ``check_sampler(..., instances=rows, samples=samples, alpha=alpha)`` against one
    replica, by simulating the check's statistic from the replica's exact law (multinomial counts
    per row, ``reps`` times; no sampler is called): the family decision of
    [`family`][spectheory.testing.statistics.stats.family] on the bins of
    [`row_chi_square`][spectheory.testing.statistics.stats.row_chi_square], with a sample on a cell
    of reference probability 0 failing the check. Unlike the non-central chi-square prediction
    (a local approximation) it holds for far alternatives too, e.g. a replica that puts all of a
    row's mass in one bin (its statistic is then a constant); Monte Carlo error about
    sqrt(P(1-P)/reps)."""
    from ...registry import plan
    from ..statistics.budget import split

    samples, alpha = _count("samples", samples, 1, MAX_BUDGET), _level(alpha)
    reps = _count("reps", reps, 1, MAX_SIM_REPS)
    seed = _count("seed", seed, 0)
    min_expected = _args.real("min_expected", min_expected, 0.0)
    rows, _ = _design_rows(rows, paths)
    how = plan(verifier, paths)
    rep_ = _as_replicas([replica], verifier)[0]
    if rep_.law is None:
        raise SpectheoryError(f"replica {rep_.name} has no exact law to simulate from")
    rng = np.random.default_rng(seed)
    total = sum(int(r[0].shape[0]) for r in rows)
    if total < 1:
        raise SpectheoryError("no draft rows to simulate the check on")
    if samples < total:
        raise SpectheoryError(f"samples = {samples} is fewer than the {total} draft rows "
                              f"(check_sampler gives every row at least one sample)")
    ns = split(samples, total)
    stats_rows, dofs, caught = [], [], np.zeros(reps, dtype=bool)
    k = 0
    for d, q, p in rows:
        ref = _ref_cells(how, d, q, p)
        bug = _rep_cells(rep_.law, d, q, p, rep_.name)
        if np.isnan(bug).any():
            raise SpectheoryError(f"replica {rep_.name} has no law on one of the rows")
        for b in range(d.shape[0]):
            n = ns[k]
            k += 1
            P = ref[b] / ref[b].sum()
            Q = np.clip(bug[b], 0.0, None)
            counts = rng.multinomial(n, Q / Q.sum(), size=reps)  # [reps, C]
            where, nb = _bins(P, n, min_expected)
            caught |= (counts[:, where < 0] > 0).any(1) if (where < 0).any() else False
            dof = nb - 1
            dofs.append(max(dof, 0))
            if dof < 1:
                stats_rows.append(np.zeros(reps))
                continue
            O = np.zeros((reps, nb))
            E = np.zeros(nb)
            for c in np.flatnonzero(where >= 0):
                O[:, where[c]] += counts[:, c]
                E[where[c]] += n * P[c]
            stats_rows.append(((O - E) ** 2 / E).sum(1))
    X = np.array(stats_rows)  # [m, reps]
    dofs = np.array(dofs)
    m = len(dofs)
    keep = dofs > 0
    if keep.any():
        p_rows = np.ones_like(X)
        p_rows[keep] = chi2.sf(X[keep], dofs[keep][:, None])
        p_global = chi2.sf(X.sum(0), int(dofs.sum()))
        fam = np.minimum(1.0, np.minimum(2 * p_global, 2 * m * p_rows.min(0)))
        caught |= fam <= alpha
    return float(caught.mean())


__all__ += ["simulated_power"]


# ----------------------------------------------------------------------------- bonus path

#: Bonus-path bugs: after L acceptances the bonus token Y must be drawn from p_L = p(.|X^L), the
#: target row after the whole draft; each of these draws it from another row. Name -> the row.
BONUS_BUGS = {
    "bonus-previous-row": "p_{L-1}, the target row of the last draft (the bonus row's index one "
                          "position early)",
    "bonus-last-correction": "the correction row of position L-1 (the last rejection's residual "
                             "buffer reused for the bonus)",
    "bonus-draft-row": "q_{L-1}, the draft row of the last position (the draft's probability "
                       "tensor read for the target's)",
}


def _bonus_row(bug: str, verifier: str, drafts, q, p):
    """The row [B, V] a bonus-path bug draws Y from after L acceptances (`BONUS_BUGS`)."""
    from ...registry import plan

    L = drafts.shape[-1]
    if bug == "bonus-previous-row":
        return p[:, L - 1]
    if bug == "bonus-last-correction":
        law = plan(verifier, None).spec.function(drafts, q, p)
        return torch.as_tensor(law.correction, dtype=torch.float64)[:, L - 1]
    if bug == "bonus-draft-row":
        return q[:, L - 1]
    raise SpectheoryError(f"unknown bonus-path bug {bug!r}; choose from {', '.join(BONUS_BUGS)}")


def _draft_rows(drafts, q, p):
    """``drafts [B, L]`` int64, ``q [B, L, V]`` and ``p [B, L+1, V]`` float64 tensors (single
    path), or one `InputError` line naming the first argument of another shape or kind."""
    out = []
    for name, x, ndim in (("drafts", drafts, 2), ("q", q, 3), ("p", p, 3)):
        if isinstance(x, (str, bytes)):
            raise InputError(f"{name} = {_args.show(x)} is not a tensor of numbers")
        try:
            t = torch.as_tensor(x)
        except Exception:  # noqa: BLE001 - anything torch cannot read
            raise InputError(f"{name} = {_args.show(x)} is not a tensor of numbers") from None
        if t.dim() != ndim:
            raise InputError(f"{name} has shape {list(t.shape)}; expected {ndim} dimensions "
                             f"(drafts [B, L], q [B, L, V], p [B, L+1, V])")
        out.append(t)
    d, q, p = out
    if d.is_floating_point() or d.is_complex() or d.dtype == torch.bool:
        raise InputError(f"drafts are {d.dtype}; draft tokens are integers")
    if q.is_complex() or p.is_complex() or q.dtype == torch.bool or p.dtype == torch.bool:
        raise InputError("q and p are rows of real probabilities")
    B, L = d.shape
    V = int(p.shape[-1])
    if L < 1 or V < 1 or tuple(q.shape) != (B, L, V) or tuple(p.shape) != (B, L + 1, V):
        raise InputError(f"drafts {list(d.shape)}, q {list(q.shape)} and p {list(p.shape)} do "
                         f"not fit drafts [B, L], q [B, L, V], p [B, L+1, V] with L >= 1")
    if d.numel() and (int(d.min()) < 0 or int(d.max()) >= V):
        raise InputError(f"a draft token lies outside 0..{V - 1}")
    q, p = q.to(torch.float64), p.to(torch.float64)
    for name, t in (("q", q), ("p", p)):
        if not bool(torch.isfinite(t).all()) or bool((t < 0).any()):
            raise InputError(f"{name} has a negative or non-finite entry")
    return d.to(torch.long), q, p


def bonus_law(drafts, q, p, *, bug: str = "bonus-previous-row", verifier: str = "token"):
    """Exact law of ``verifier`` (single path, "token" or "block") whose bonus token is drawn from
    the wrong row (`BONUS_BUGS`): the verifier's law ``(stop, correction)`` with the row at
    tau = L replaced, correction[:, L] = the bug's row (stop unchanged: the acceptance path is
    correct). Shapes: drafts [B, L], q [B, L, V], p [B, L+1, V]. The correction row of position
    L-1 is a distribution on every row (token and block fall back to p when a residual has mass
    0), so the law is defined everywhere. Rows of other shapes, drafts that are not integer
    tokens in 0..V-1, q or p with a negative or non-finite entry, or an unknown ``bug`` are
    refused in one line before the verifier runs."""
    from ...law import Law
    from ...registry import plan

    if not isinstance(bug, str) or bug not in BONUS_BUGS:
        raise InputError(f"unknown bonus-path bug {_args.show(bug)}; choose from "
                         f"{', '.join(BONUS_BUGS)}")
    drafts, q, p = _draft_rows(drafts, q, p)
    law = plan(verifier, None).spec.function(drafts, q, p)
    stop = torch.as_tensor(law.stop, dtype=torch.float64)
    corr = torch.as_tensor(law.correction, dtype=torch.float64).clone()
    L = drafts.shape[-1]
    row = _bonus_row(bug, verifier, drafts, q, p)
    corr[:, L] = row / row.sum(-1, keepdim=True)
    return Law(stop, corr)


def bonus_sampler(bug: str = "bonus-previous-row", verifier: str = "token") -> Callable:
    """A sampler (canonical signature) with a bonus-path bug: spectheory's own sampler of
    ``verifier`` decides tau and the correction token; on rows with tau = L the token is redrawn
    with ``torch.multinomial`` from the bug's row (`BONUS_BUGS`) instead of p_L, as an engine
    that indexes its bonus row wrongly would. Its law is
    [`bonus_law`][spectheory.testing.designs.sharp.bonus_law]."""
    from ..checks.sampler import make_sampler

    if not isinstance(bug, str) or bug not in BONUS_BUGS:
        raise SpectheoryError(f"unknown bonus-path bug {bug!r}; choose from "
                              f"{', '.join(BONUS_BUGS)}")
    base = make_sampler(verifier)

    def sampler(drafts, q, p, generator=None):
        tau, y = base(drafts, q, p, generator)
        L = drafts.shape[-1]
        row = _bonus_row(bug, verifier, drafts, q.to(torch.float64), p.to(torch.float64))
        draw = torch.multinomial(row, 1, generator=generator)[:, 0]
        return tau, torch.where(tau == L, draw, y)

    sampler.__name__ = f"{verifier}_{bug.replace('-', '_')}_sampler"
    return sampler


#: The bonus-path bugs the kit's token and block designs are built against; the third,
#: ``bonus-draft-row``, is left out of them on purpose and serves as an unseen bug (the
#: ``GENERIC_BONUS_TV`` constraint, not the design's knowledge of it, catches it).
KIT_BONUS_BUGS = ("bonus-previous-row", "bonus-last-correction")


def bonus_replicas(verifier: str = "token", bugs: Sequence[str] | None = None
                   ) -> list[Replica]:
    """The bonus-path replicas of ``verifier`` ("token" or "block"), one per bug of ``bugs``
    (default every `BONUS_BUGS` entry), each with its exact law
    ([`bonus_law`][spectheory.testing.designs.sharp.bonus_law]) and a sampler
    ([`bonus_sampler`][spectheory.testing.designs.sharp.bonus_sampler])."""
    if verifier not in ("token", "block"):
        raise SpectheoryError(f"bonus_replicas covers the single-path token and block "
                              f"samplers, not {verifier!r}")
    bugs = (tuple(BONUS_BUGS) if bugs is None
            else tuple(as_list(bugs, "bugs", "bug names", lone=(str,))))
    for bug in bugs:
        if not isinstance(bug, str) or bug not in BONUS_BUGS:
            raise SpectheoryError(f"unknown bonus-path bug {bug!r}; choose from "
                                  f"{', '.join(BONUS_BUGS)}")
    return [Replica(f"{verifier}-{bug}", functools.partial(bonus_law, bug=bug, verifier=verifier),
                    bonus_sampler(bug, verifier), verifier, source="planted: " + BONUS_BUGS[bug])
            for bug in bugs]


__all__ += ["BONUS_BUGS", "KIT_BONUS_BUGS", "bonus_law", "bonus_sampler", "bonus_replicas"]
