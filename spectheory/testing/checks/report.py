"""What every sampler check returns, and how it calls user code.

The report types shared by every mode of the conformance kit (`spectheory.testing.checks.sampler`'s
law, lossless and coin modes, the tree and whole-step checks):
[`SamplerReport`][spectheory.testing.checks.report.SamplerReport] with its
[`Cell`][spectheory.testing.checks.report.Cell] and
[`CoinMismatch`][spectheory.testing.checks.report.CoinMismatch], the fixed-draft input
[`DraftRows`][spectheory.testing.checks.report.DraftRows], and the guard through which every call of
a user's sampler goes (`guarded`: an exception or ``sys.exit`` in user code becomes one
`UserCodeError` line naming the function).
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple  # noqa: F401

from ...runtime._lazy import torch
from ...runtime.errors import call_user

#: Power at which `SamplerReport.min_detectable_tv` is stated.
POWER = 0.9
#: Cells with an expected count below this are pooled (per draft row) before the chi-square.
MIN_EXPECTED = 5.0
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
#: Most samples a chain-mode check runs within `MAX_SECONDS` at `MIN_SECONDS_PER_SAMPLE`
#: (4.32 * 10^12): the command line's ``--samples`` limit, and the limit a too-few-samples
#: refusal weighs its advice against.
SAMPLE_LIMIT = int(MAX_SECONDS / MIN_SECONDS_PER_SAMPLE)


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
    """The first decision of a coin-driven sampler that differs from the reference.

    ``differs`` says what: ``"tau"``, ``"Y"``, ``"tau and Y"`` or ``"Y outside the support"``
    (coins-tau mode: a token of reference probability 0 at the agreed tau). For a tau mismatch,
    ``position`` is the first position (1-based) whose decision differs (token rule; the block
    rule: the last position one of them accepted), ``threshold`` the reference's threshold there
    and, when the sampler declares a coin convention, ``engine_test`` its acceptance test,
    ``engine_threshold`` and ``engine_coin`` the two sides the engine compares (in its dtype,
    in logs for a log-space test). ``uniforms`` are the kit's coins; ``engine_uniforms`` the
    coins the sampler was handed (``None``: the same)."""

    row: int
    drafts: list
    q: list
    p: list
    uniforms: list
    expected: tuple  # (tau, Y) of the reference
    got: tuple  # (tau, Y) of the sampler
    differs: str = ""
    position: int | None = None
    threshold: float | None = None
    engine_test: str = ""
    engine_threshold: float | None = None
    engine_coin: float | None = None
    engine_uniforms: list | None = None


class InstanceMismatches(NamedTuple):
    """Coins modes: the differing decisions of one instance: ``count`` of its ``rows`` compared,
    and the first of them."""

    instance: int
    count: int
    rows: int
    first: CoinMismatch


@dataclass
class SamplerReport:
    """Result of [`check_sampler`][spectheory.testing.checks.sampler.check_sampler] /
    [`check_proposal`][spectheory.testing.checks.sampler.check_proposal].

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
        the test's cells after pooling) detected with 90% power at this sample size and ``alpha``
        ([`min_detectable_tv`][spectheory.testing.statistics.stats.min_detectable_tv]); where every
        row's law is a point mass (greedy decoding), 1 - 0.1^(1/n) at n samples a row (any sample
        off the point fails the check); NaN in coins modes, which state a rate of differing
        decisions instead ([`detection`][spectheory.testing.checks.report.SamplerReport.detection]).
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
    budget : spectheory.testing.statistics.budget.BudgetPlan or None
        ``samples="auto"``: how the run was sized within ``budget_s`` (pilot checks, cost per
        sample, the sample count chosen and the bias it detects, stated before the run).
    needs_samples : int
        When no degree of freedom was tested (too few samples for any row to have two bins of
        expected count 5): the samples a test of every row needs; the report then fails.
    instance_mismatches : list of InstanceMismatches
        Coins modes: every instance with a differing decision, its count and its first mismatch.
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
    budget: Any = None
    needs_samples: int = 0
    instance_mismatches: list = field(default_factory=list)

    def detection(self) -> tuple[str, float]:
        """The one detection figure of the report, as ``(measure, value)`` at `POWER`: in coins
        modes ``("decision rate", r)``, the smallest share r of rows whose decision (coins-tau:
        accepted count) differs from the reference that n compared rows catch with 90% power,
        r = 1 - 0.1^(1/n); otherwise ``("total variation", min_detectable_tv)``. The text and
        the JSON state this same number (JSON ``null`` for infinity)."""
        if self.mode in ("coins", "coins-tau"):
            n = int(self.samples) - int(self.ambiguous)
            return "decision rate", (-math.expm1(math.log1p(-POWER) / n) if n >= 1
                                     else float("inf"))
        return "total variation", float(self.min_detectable_tv)

    def __str__(self) -> str:
        what = "check_proposal" if self.mode == "proposal" else "check_sampler"
        ref = (f"convention {self.verifier}" if self.mode in ("coins", "coins-tau")
               else f"verifier {self.verifier}" if self.mode != "proposal" else "reported q")
        lines = [f"{what} ({self.mode} mode, {ref}): {'PASS' if self.passed else 'FAIL'}"]
        unit = {"law": "draft rows", "coins": "draft rows", "coins-tau": "draft rows",
                "lossless": "instances", "proposal": "proposal rows"}[self.mode]
        if self.mode in ("coins", "coins-tau"):
            what_c = "accepted counts" if self.mode == "coins-tau" else "rows of coins"
            lines.append(f"  {self.samples:,} {what_c} compared with the reference, "
                         f"{self.ambiguous:,} skipped (a uniform within tolerance of its "
                         f"threshold)")
            rate = self.detection()[1]
            lines.append(f"  detects {'accepted counts' if self.mode == 'coins-tau' else 'decisions'}"
                         f" that differ from the reference on a share >= {rate:.3g} of rows "
                         f"with {POWER:.0%} power (1 - {1 - POWER:.1f}^(1/n), n = "
                         f"{self.samples - self.ambiguous:,} rows compared)")
            for im in self.instance_mismatches:
                lines.append(f"  instance {im.instance}: {im.count:,} of {im.rows:,} rows differ "
                             f"(first at row {im.first.row}: reference (tau, Y) = "
                             f"{im.first.expected}, sampler {im.first.got})")
            m = self.mismatch
            if m is not None:
                lines.append(f"  first mismatch at row {m.row}"
                             f"{' (' + m.differs + ')' if m.differs else ''}: drafts "
                             f"{m.drafts}, uniforms {m.uniforms}")
                lines.append(f"    reference (tau, Y) = {m.expected}, sampler (tau, Y) = "
                             f"{m.got}")
                if m.position is not None:
                    lines.append(f"    position {m.position}: reference accepts when u <= "
                                 f"{m.threshold:.9g}")
                if m.engine_test:
                    lines.append(f"    engine side: {m.engine_test}")
                if m.engine_uniforms is not None:
                    lines.append(f"    coins handed to the engine {m.engine_uniforms}")
                lines.append(f"    q rows {m.q}")
                lines.append(f"    p rows {m.p}")
        elif self.dof == 0 and self.worst_cell is None and self.notes and \
                not math.isfinite(self.min_detectable_tv):
            pass  # no test was run: the notes say why
        else:
            lines += self._test_lines(unit, "instance" if self.mode == "lossless" else "row")
        lines.extend(f"  {n}" for n in self.notes)
        if self.budget is not None:
            lines.append(f"  sized by budget_s: {self.budget.summary()}")
        return "\n".join(lines)

    def _test_lines(self, unit: str, law: str, finite_only: bool = False) -> list[str]:
        """The lines of the chi-square family every sampling mode reports: the family-wise
        p-value over ``rows`` (``unit``), the global statistic, the worst cell and the bias
        detected in every ``law``'s law (left out when it is not finite and ``finite_only``)."""
        lines = [f"  p-value {self.p_value:.3g} (family-wise false-alarm rate alpha = "
                 f"{self.alpha:g}; {self.rows} {unit}, {self.samples:,} samples)",
                 f"  global chi-square {self.statistic:.1f} on {self.dof} degrees of freedom"]
        if self.worst_cell is not None:
            c = self.worst_cell
            lines.append(f"  worst cell: {c.label}: observed {c.observed:g}, expected "
                         f"{c.expected:.1f}")
        if math.isfinite(self.min_detectable_tv):
            lines.append(f"  detects a total-variation bias >= {self.min_detectable_tv:.3g} "
                         f"in every {law}'s law with {POWER:.0%} power")
        elif not finite_only and self.dof == 0:  # the verdict rests on impossible samples
            lines.append(f"  no bias figure: no degree of freedom was tested at "
                         f"{self.samples:,} samples (a sample of an outcome of probability "
                         f"zero fails the check at any count)")
        elif not finite_only:
            lines.append(f"  detects no bias in every {law}'s law with {POWER:.0%} power at "
                         f"{self.samples:,} samples (a total-variation bias of 1 falls short)")
        return lines

    def to_json(self) -> dict:
        """The report as JSON-ready values."""
        measure, value = self.detection()
        out = {"passed": bool(self.passed), "p_value": _finite(self.p_value), "mode": self.mode,
               "samples": int(self.samples), "alpha": float(self.alpha),
               "worst_cell": self.worst_cell._asdict() if self.worst_cell else None,
               "min_detectable_tv": _finite(self.min_detectable_tv), "power": POWER,
               "verifier": self.verifier, "statistic": float(self.statistic),
               "dof": int(self.dof), "rows": int(self.rows),
               "mismatch": self.mismatch._asdict() if self.mismatch else None,
               "ambiguous": int(self.ambiguous), "notes": list(self.notes),
               "detects": {"measure": measure, "value": _finite(value), "power": POWER},
               "needs_samples": int(self.needs_samples),
               "instance_mismatches": [
                   {"instance": im.instance, "count": im.count, "rows": im.rows,
                    "first": im.first._asdict()} for im in self.instance_mismatches]}
        if self.budget is not None:
            out["budget"] = self.budget.to_json()
        return out


def _finite(x: float):
    return float(x) if math.isfinite(x) else None


def _plain_name(fn) -> str:
    if isinstance(fn, functools.partial):
        return f"partial({_plain_name(fn.func)})"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:  # a callable object: its class
        name = type(fn).__qualname__
    module = getattr(fn, "__module__", None)
    return f"{module}:{name}" if module and module not in ("builtins", "__main__") else str(name)


def _user_function(fn, most: int = 8):
    """The user's function that ``fn`` calls, when ``fn`` is a wrapper: a
    ``functools.partial``'s ``func``, or a closure made inside another function (``<locals>``
    in its name, e.g. a test helper's ``def step(request): return engine(request)``) that holds
    exactly one callable; followed at most ``most`` deep. None when ``fn`` is the user's
    function itself."""
    inner = None
    for _ in range(most):
        if isinstance(fn, functools.partial):
            nxt = fn.func
        elif "<locals>" in (getattr(fn, "__qualname__", "") or "") and \
                getattr(fn, "__closure__", None):
            held = []
            for cell in fn.__closure__:
                try:
                    v = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                if callable(v) and not isinstance(v, type):
                    held.append(v)
            if len(held) != 1:
                break
            nxt = held[0]
        else:
            break
        inner = fn = nxt
    return inner


def _name_of(fn) -> str:
    """The name a report gives a user's function: ``module:qualname``; for a wrapper (a partial,
    a closure around one callable) the function it calls, then the wrapper
    (``mod:my_step (through mod:helper.<locals>.step)``)."""
    inner = _user_function(fn)
    if inner is None:
        return _plain_name(fn)
    via = "functools.partial" if isinstance(fn, functools.partial) else _plain_name(fn)
    return f"{_plain_name(inner)} (through {via})"


#: The label of the guarded user function running now (None: the kit's own code), for a
#: watchdog's message, and (second entry) the `time.perf_counter` at which that call began.
RUNNING: list = [None, 0.0]


def _guarded(fn, role: str = "sampler"):
    """``fn`` with every call made through `spectheory.runtime.errors.call_user`: an exception or a
    ``SystemExit`` (any code) in it becomes one `UserCodeError` line naming ``role`` and the
    function. Attributes (``repeat_aware``, ``coin_convention``) are kept."""
    if getattr(fn, "_spectheory_guarded", False):
        return fn
    label = f"{role} {_name_of(fn)}"
    clock = [0.0]  # seconds spent inside fn (budgeted runs time the sampler apart from the check)
    rows = [0]  # the largest batch handed over

    def guarded(*args, **kwargs):
        if args and hasattr(args[0], "shape") and len(args[0].shape):
            rows[0] = max(rows[0], int(args[0].shape[0]))
        t = time.perf_counter()
        outer = RUNNING[:2]
        RUNNING[:2] = [label, t]
        try:
            return call_user(fn, *args, what=label, **kwargs)
        finally:
            RUNNING[:2] = outer
            clock[0] += time.perf_counter() - t

    try:
        functools.update_wrapper(guarded, fn)
    except (AttributeError, TypeError):  # a callable object without the usual attributes
        pass
    guarded._spectheory_guarded = True
    guarded._spectheory_label = label
    guarded._spectheory_clock = clock
    guarded._spectheory_rows = rows
    return guarded


def wrapped_chain(fn, most: int = 64) -> list:
    """``fn`` and the functions it wraps, outermost first: each ``__wrapped__``
    (``functools.wraps``, `guarded`) and each ``functools.partial``'s ``func``, at most ``most``
    deep (a cycle stops the walk)."""
    out, seen = [], set()
    while fn is not None and id(fn) not in seen and len(out) < most:
        seen.add(id(fn))
        out.append(fn)
        nxt = getattr(fn, "__wrapped__", None)
        if nxt is None and isinstance(fn, functools.partial):
            nxt = fn.func
        fn = nxt
    return out


def declared(fn, name: str, default=None):
    """The attribute ``name`` (``repeat_aware``, ``coin_convention``) that ``fn`` declares, or
    else the first function it wraps that declares it (`wrapped_chain`): a wrapper made with
    ``functools.wraps`` or ``functools.partial`` keeps what the function it wraps declares. A
    value ``None`` counts as not declared."""
    for f in wrapped_chain(fn):
        value = getattr(f, name, None)
        if value is not None:
            return value
    return default


guarded = _guarded
name_of = _name_of
