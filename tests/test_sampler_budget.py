"""Sizing sampler checks: the power computation of `spectheory.testing.statistics.budget`, budgeted
runs (``samples="auto"``, ``budget_s``, ``--budget``) and the guards on ``samples``.

Statistical assertions use fixed seeds (deterministic); next to each is the probability that it
would fail under a fresh seed if the stated property holds exactly. The budget test times a
sampler that sleeps 1 ms a row, so that its cost, and not the machine's load, sets the run's
length.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from spectheory.runtime.errors import SizeLimitError, SpectheoryError, TimeLimitError
from spectheory.testing.statistics import budget as B
from spectheory.testing.statistics import stats
from spectheory.testing.checks.sampler import (DraftRows, check_sampler, make_sampler,
                                               reference_coin_sampler)
from cli_helpers import run


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def coin_sampler(sleep_per_row: float = 0.0):
    """The coin reference fed with uniforms from the generator (a correct block sampler whose
    cost is linear in the rows), sleeping ``sleep_per_row`` seconds a row."""
    ref = reference_coin_sampler("block")

    def sampler(drafts, q, p, generator):
        n, L = drafts.shape
        if sleep_per_row:
            time.sleep(sleep_per_row * n)
        u = torch.rand(n, L + 1, generator=generator, dtype=torch.float64)
        u[:, :L] = 1 - u[:, :L]
        return ref(drafts, q, p, u)

    return sampler


# ----------------------------------------------------------------------------- power


def test_chi_square_functions_are_scipy_stats_bit_for_bit():
    """``statistics._chisq`` calls scipy.special's kernels directly inside the support and
    scipy.stats elsewhere: the same values (bits, sign of zero, NaN), types and shapes as
    scipy.stats.chi2 / ncx2 on scalars and arrays, interior points and every edge (x = 0, inf,
    NaN; q = 0, 1; df, nc = 0, negative, inf; nc near zero), and the same exception where Boost
    overflows."""
    import itertools

    from scipy import stats as S

    from spectheory.testing.statistics._chisq import chi2, ncx2

    def outcome(f, *args):
        try:
            out = f(*args)
        except ArithmeticError as exc:
            return ("raised", type(exc).__name__, str(exc))
        a = np.asarray(out)
        return (type(out), a.shape, a.dtype, a.tobytes())

    xs = [0.0, -0.0, -1.0, 1e-300, 0.5, 3.7, 12.0, 1e5, np.inf, np.nan, 7, np.float32(2.1)]
    dfs = [1, 3, 30, 0, -1, 2.5, np.inf, np.int32(4), np.float32(3.0)]
    ncs = [0.0, 1e-8, 4.0, 1e3, -1.0, np.inf]
    qs = [0.0, 1.0, 1e-300, 2.5e-4, 0.5, 1.5, np.nan]
    cases = [(chi2.sf, S.chi2.sf, a) for a in itertools.product(xs, dfs)]
    cases += [(chi2.isf, S.chi2.isf, a) for a in itertools.product(qs, dfs)]
    cases += [(f, g, a) for a in itertools.product(xs, dfs, ncs)
              for f, g in ((ncx2.sf, S.ncx2.sf), (ncx2.cdf, S.ncx2.cdf))]
    rng = np.random.default_rng(0)
    for _ in range(200):  # arrays as the power computations pass them (and broadcast ones)
        k = int(rng.integers(1, 6))
        x, d = rng.exponential(10.0, k), rng.integers(1, 60, k)
        lam, q = 4.0 * rng.integers(1, 5000, k) * rng.random(k) ** 2, rng.random(k) * 1e-3
        cases += [(chi2.sf, S.chi2.sf, (x, d)), (chi2.isf, S.chi2.isf, (q, d)),
                  (ncx2.sf, S.ncx2.sf, (x, d, lam)), (ncx2.cdf, S.ncx2.cdf, (x, d, lam)),
                  (ncx2.sf, S.ncx2.sf, (float(x[0]), int(d[0]), lam))]
        x0 = np.where(rng.random(k) < 0.5, 0.0, x)  # zeros among positive statistics
        x0[0] = 0.0
        cases += [(chi2.sf, S.chi2.sf, (x0, d)), (chi2.sf, S.chi2.sf, (-x0, d))]
    assert len(cases) > 1000
    for f, g, args in cases:
        assert outcome(f, *args) == outcome(g, *args), (f, args)


def test_power_matches_the_after_run_statement():
    """budget.family_power / detectable_tv are the bound stats states after a run."""
    tests = [stats.RowTest(0.0, d, 1.0, n, -1, 0.0, 0.0, 0) for d, n in
             [(9, 1000), (3, 400), (0, 50), (15, 2500)]]
    ns, dofs = [t.n for t in tests], [t.dof for t in tests]
    for delta in (0.01, 0.05, 0.2):
        assert B.family_power(delta, ns, dofs, 1e-3) == pytest.approx(
            stats.family_power(delta, tests, 1e-3), rel=1e-12)
    d = B.detectable_tv(ns, dofs, 1e-3)
    assert d == stats.min_detectable_tv(tests, 1e-3)
    assert B.family_power(d, ns, dofs, 1e-3) == pytest.approx(0.9, abs=1e-4)
    # four times the samples in every row (the same bins): half the detectable bias
    assert B.detectable_tv([4 * n for n in ns], dofs, 1e-3) / d == pytest.approx(0.5, rel=1e-4)
    assert B.detectable_tv([10], [0], 0.01) == math.inf


def test_coin_detectable_rate():
    for n in (1, 50, 10_000):
        r = B.coin_detectable_rate(n)
        assert 1 - (1 - r) ** n == pytest.approx(0.9, rel=1e-9)
    assert B.coin_detectable_rate(10_000) == pytest.approx(math.log(10) / 10_000, rel=1e-3)


def test_planned_tv_is_the_reported_one_in_law_and_lossless_modes():
    """The planned statement uses the run's pooling, so it equals the report's exactly."""
    from spectheory.testing.checks.sampler import _ROW_LAWS

    s = make_sampler("block")
    for mode, n in (("law", 3_000), ("lossless", 5_000)):
        laws = []
        token = _ROW_LAWS.set(laws)
        try:
            rep = check_sampler(s, "block", mode=mode, samples=n, seed=2)
        finally:
            _ROW_LAWS.reset(token)
        assert len(laws) == rep.rows
        assert B.planned_tv(laws, n, 1e-3) == rep.min_detectable_tv
        assert B.samples_for_tv(laws, rep.min_detectable_tv, 1e-3) <= n * 1.02


def _rows(k=6, V=6, seed=3):
    """k rows of V cells, every cell >= 0.05: at 400 samples a row nothing is pooled, so the
    test's bins are the cells and a planted bias on them has exactly the stated size."""
    rng = np.random.default_rng(seed)
    return list(0.7 * rng.dirichlet(np.ones(V) * 5, size=k) + 0.3 / V)


def _least_favourable(p, delta):
    """Raise one side of a balanced split of the cells and lower the other, each in proportion
    to p: total variation delta, non-centrality close to the bound 4 n delta^2."""
    a = np.zeros(len(p), bool)
    ma = mb = 0.0
    for j in np.argsort(-p):
        if ma <= mb:
            a[j], ma = True, ma + p[j]
        else:
            mb += p[j]
    if p[a].sum() > 0.5:
        a = ~a
    m = p[a].sum()
    return np.where(a, p * (1 + delta / m), p * (1 - delta / (1 - m)))


def _one_cell(p, delta):
    """The whole bias on the most likely cell (the others lowered in proportion)."""
    j = int(np.argmax(p))
    out = p * (1 - delta / (1 - p[j]))
    out[j] = p[j] + delta
    return out


def _alarms(rows, n, move, delta, alpha, runs=400, seed=0):
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(runs):
        tests = [stats.row_chi_square(rng.multinomial(n, move(p, delta) if delta else p), p, n)
                 for p in rows]
        hits += stats.family(tests).p_value < alpha
    return hits


def test_planned_tv_by_simulation():
    """Rows of the planned size, 400 simulated checks each: a bias of the planned TV in every
    row, spread least-favourably, is caught in >= 345 (probability < 1e-3 of fewer at power 0.9;
    357 here), the same bias on one cell in >= 345 (it has a larger non-centrality), half of it
    far less often; with no bias the alarm rate at alpha = 0.1 is at most 60 of 400
    (probability < 1e-3 of more at rate 0.1)."""
    rows, N, alpha = _rows(), 2_400, 0.05
    n = N // len(rows)
    delta = B.planned_tv(rows, N, alpha)
    assert 0.03 < delta < 0.1
    assert all(B.row_dof(p, n) == len(p) - 1 for p in rows)  # nothing pooled
    assert abs(0.5 * np.abs(_least_favourable(rows[0], delta) - rows[0]).sum() - delta) < 1e-12
    assert _alarms(rows, n, _least_favourable, delta, alpha) >= 345
    assert _alarms(rows, n, _one_cell, delta, alpha) >= 345
    assert _alarms(rows, n, _least_favourable, delta / 2, alpha) < 0.5 * 400
    assert _alarms(rows, n, None, 0.0, 0.1) <= 60


# ----------------------------------------------------------------------------- budgeted runs


class FakeCheck:
    """A check on a simulated clock: 50 ms fixed, ``sampler_s`` a sample inside the sampler (plus
    2 ms a call), ``kit_s`` a sample of the check's own work; past ``switch`` samples the sampler
    costs ``after_s`` a sample."""

    def __init__(self, sampler_s=1e-3, kit_s=1e-4, switch=None, after_s=None, pauses=(),
                 own_pauses=()):
        self.now, self.sampler_s, self.kit_s = 0.0, sampler_s, kit_s
        self.switch, self.after_s = switch, after_s
        self.pauses, self.calls = dict(pauses), 0  # {run call (1, 2, ...): seconds the machine
        # pauses inside the sampler in that call}
        self.own_pauses = dict(own_pauses)  # ... in the check's own work in that call

    def clock(self):
        return self.now

    def inside(self, n):
        rate = self.after_s if self.switch and n > self.switch else self.sampler_s
        return 0.002 + rate * n

    def cost(self, n):
        return 0.05 + self.kit_s * n + self.inside(n)

    def run(self, n):
        self.calls += 1
        pause = self.pauses.get(self.calls, 0.0)
        self.now += self.cost(n) + pause + self.own_pauses.get(self.calls, 0.0)
        return "report", self.inside(n) + pause

    def kit(self, n):
        t = 0.05 + self.kit_s * n
        self.now += t
        return t


def test_size_run_on_a_simulated_clock():
    """Linear costs: the pilots stay within a quarter of the budget, the rates are recovered
    (the sampler's from its time inside the calls, the check's from the instant-sampler pilots)
    and the whole call lands at 95% of the budget."""
    f = FakeCheck()
    out = B.size_run(f.run, 100.0, 32, kit=f.kit, clock=f.clock)
    n = out["samples"]
    assert out["sampler_s"] == pytest.approx(1e-3) and out["kit_s"] == pytest.approx(1e-4)
    assert sum(t for _, t in out["pilot"]) + sum(t for _, t in out["kit_pilot"]) <= 25
    assert f.now + f.cost(n) == pytest.approx(95.0, rel=1e-3)
    assert f.now + f.cost(n + 1) > 95.0
    # past the switch the sampler is 10 times cheaper: one pilot there sets the rate
    f = FakeCheck(switch=5_000, after_s=1e-4)
    out = B.size_run(f.run, 100.0, 32, kit=f.kit, clock=f.clock, breaks=[4_000, 5_001])
    assert out["pilot"][-1][0] == 5_001 and out["samples"] > 5_001
    assert f.now + f.cost(out["samples"]) == pytest.approx(95.0, rel=2e-3)
    # unaffordable: the count stops below the switch
    f = FakeCheck(switch=5_000, after_s=1e-4)
    out = B.size_run(f.run, 8.0, 32, kit=f.kit, clock=f.clock, breaks=[4_000, 5_001])
    assert out["samples"] == 4_000 and f.now + f.cost(4_000) < 8.0
    # a definitive failure stops the pilots; a budget below the smallest check is refused
    f = FakeCheck()
    out = B.size_run(f.run, 100.0, 32, kit=f.kit, clock=f.clock, done=lambda r: True)
    assert out["samples"] is None and len(out["pilot"]) == 1
    f = FakeCheck()
    with pytest.raises(SpectheoryError, match="budget_s = 0.1 s is too small"):
        B.size_run(f.run, 0.1, 32, kit=f.kit, clock=f.clock)


@pytest.mark.parametrize("pauses, own", [({1: 0.3}, {}), ({2: 0.3}, {}), ({3: 0.3}, {}),
                                         ({3: 1.0}, {}), ({1: 0.3, 3: 0.3}, {}), ({}, {3: 0.5})])
def test_a_pause_in_a_pilot_does_not_shrink_the_plan(pauses, own):
    """A pause of the machine inside a pilot of milliseconds made the sampler's rate, and so the
    plan, many times too pessimistic (a budgeted check of a correct sampler too small to test,
    or refused as too small, on a loaded machine). The first pilot, and one whose rate jumps,
    runs twice and the faster run counts: the plan is that of the machine without the pause."""
    quiet = FakeCheck()
    want = B.size_run(quiet.run, 3.0, 32, kit=quiet.kit, clock=quiet.clock)
    f = FakeCheck(pauses=pauses, own_pauses=own)
    out = B.size_run(f.run, 3.0, 32, kit=f.kit, clock=f.clock)
    assert out["sampler_s"] == pytest.approx(want["sampler_s"], rel=1e-9) == \
        pytest.approx(1e-3, rel=0.1)
    assert out["samples"] > 0.4 * want["samples"] and want["samples"] > 2_000  # (the pauses'
    # time is spent)
    assert f.now + f.cost(out["samples"]) == pytest.approx(0.95 * 3.0, rel=1e-3)
    # the first pilot runs twice anyway (32, 32, 128 samples); the second's rate jumped
    assert [n for n, _ in want["pilot"]] == [32, 32, 128]
    assert [n for n, _ in out["pilot"]] == [32, 32, 128] + [128] * (3 in pauses or 3 in own)


@pytest.mark.parametrize("budget, check", [
    (1.2, dict(sampler_s=1e-2, kit_s=5e-5)),  # a slow sampler: room for the smallest check
    (10.0, dict(sampler_s=1e-4, switch=128, after_s=1e-2)),  # its rate jumps 100x for real
])
def test_a_pilots_rerun_leaves_room_for_the_run(budget, check):
    """A rerun priced below its cost (twice a guess from the previous pilot) took the room the
    smallest check needed, and a rate that really jumped ran its long pilot twice, past the
    budget: a budget that sufficed was refused as too small. A rerun is priced at the run's
    own time, and the pilots of the check's own work and the smallest check must fit after it."""
    f = FakeCheck(**check)
    out = B.size_run(f.run, budget, 32, kit=f.kit, clock=f.clock)
    assert out["samples"] >= 32
    assert f.now + f.cost(out["samples"]) <= 0.95 * budget * (1 + 1e-3)


def test_budget_run_stays_within_20_percent_and_states_its_size_first(monkeypatch):
    """A sampler that sleeps 1 ms a row under a 3 s budget: the whole call takes 2.4 - 3.6 s; the
    plan line is on stderr before the run's first call; the verdict is that of the same check
    at the chosen sample count (its draws do not depend on the sleep). A pause of the machine
    in the run makes it late whatever the plan, so the timing is tried up to three times: a
    planner off by more than 20% misses it every time."""
    import io

    slow = coin_sampler(1e-3)
    times = []
    for _ in range(3):
        err = io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        seen = []

        def sampler(d, q, p, g):
            seen.append(("check_sampler: budget" in err.getvalue(), d.shape[0]))
            return slow(d, q, p, g)

        t = time.perf_counter()
        try:
            rep = check_sampler(sampler, "block", samples="auto", budget_s=3.0, seed=5)
        except SpectheoryError as e:  # a pause that took the budget: "too small"
            times.append(str(e))
            continue
        times.append((time.perf_counter() - t, rep.budget.sampler_s, rep.samples))
        if 0.8 * 3.0 <= times[-1][0] <= 1.2 * 3.0 and 0.9e-3 < times[-1][1] < 1.5e-3 and \
                rep.samples > 1_000:
            break
    else:
        pytest.fail(f"three budgeted runs of 3 s: (seconds, sampler seconds a sample, samples) "
                    f"{times}")
    plan = rep.budget
    assert rep.samples == plan.samples
    assert plan.detectable_tv == rep.min_detectable_tv
    line = err.getvalue().strip()
    assert line.count("\n") == 0 and f"running {plan.samples:,} samples" in line
    assert f">= {rep.min_detectable_tv:.3g} in every row's law with 90% power" in line
    assert not seen[0][0] and seen[-1][0]  # pilots before the line, the run after it
    assert sum(m for said, m in seen if said) == plan.samples
    assert max(m for said, m in seen if said) <= plan.max_batch == 2**16
    same = check_sampler(coin_sampler(), "block", samples=plan.samples, seed=5,
                         max_batch=plan.max_batch)
    assert (same.p_value, same.statistic) == (rep.p_value, rep.statistic)
    assert "sized by budget_s" in str(rep) and rep.to_json()["budget"]["samples"] == plan.samples


def test_budget_in_coins_mode_states_the_mismatch_rate():
    for _ in range(3):  # (a pause of the machine as long as the budget: "too small", once)
        try:
            rep = check_sampler(reference_coin_sampler("block"), "block", mode="coins",
                                samples="auto", budget_s=1.0)
            break
        except SpectheoryError as e:
            assert "is too small" in str(e), str(e)
    else:
        pytest.fail("three budgeted coins checks of 1 s were refused as too small")
    assert rep.passed and rep.budget.detectable_tv is None
    assert rep.budget.detectable_rate == B.coin_detectable_rate(rep.samples)


def test_a_pilot_failure_no_correct_sampler_produces_ends_the_run():
    """Token verification checked as block verification puts samples on outcomes of probability
    0 (no false alarm possible): the first pilot reports it and the run is not started."""
    calls = []
    token = make_sampler("token")

    def sampler(*a):
        calls.append(a[0].shape[0])
        return token(*a)

    rep = check_sampler(sampler, "block", samples="auto", budget_s=60)
    assert not rep.passed and rep.p_value == 0.0 and rep.worst_cell.expected == 0.0
    assert sum(calls) == 32 and "found by a pilot check of 32 samples" in str(rep)


@pytest.mark.parametrize("kw,msg", [
    ({"samples": "auto"}, "needs budget_s"),
    ({"budget_s": 5}, "only with samples='auto'"),
    ({"samples": "auto", "budget_s": -1}, "budget_s"),
    ({"samples": "auto", "budget_s": float("nan")}, "budget_s"),
    ({"samples": "auto", "budget_s": 100, "max_seconds": 10}, "over max_seconds"),
    ({"samples": "many"}, "samples"),
    ({"samples": "auto", "budget_s": 1e-4}, "too small"),
])
def test_bad_budgets_are_refused(kw, msg):
    with pytest.raises(SpectheoryError, match=msg) as exc:
        check_sampler(make_sampler("block"), "block", **kw)
    assert "\n" not in str(exc.value)


# ----------------------------------------------------------------------------- guards


def _counting(sampler):
    calls = []

    def counted(*a):
        calls.append(a[0].shape[0])
        return sampler(*a)

    return counted, calls


def test_absurd_sample_counts_are_refused_before_anything_runs():
    s, calls = _counting(make_sampler("block"))
    t = time.perf_counter()
    with pytest.raises(SizeLimitError, match=r"samples = 10,000,000,000,000 would take at least"
                                             r" 55.6 h") as exc:
        check_sampler(s, "block", samples=10**13)
    assert calls == [] and time.perf_counter() - t < 5 and "\n" not in str(exc.value)
    with pytest.raises(SizeLimitError, match=r"samples = 1,000: the check would hold about "
                                             r"0\.\d+ GiB"):
        check_sampler(s, "block", samples=1_000, max_memory_bytes=10**5)
    big = DraftRows(torch.zeros(64, 8, dtype=torch.long),  # 64 rows of V = 10^6: no copy
                    torch.zeros(64, 8, 1).expand(64, 8, 10**6),
                    torch.zeros(64, 9, 1).expand(64, 9, 10**6))
    with pytest.raises(SizeLimitError, match=r"count tables of 64 draft rows of up to "
                                             r"9,000,000 cells"):
        check_sampler(s, "block", [big], samples=1_000, max_memory_bytes=2**33)
    assert calls == []
    with pytest.raises(SizeLimitError, match="samples = 100,000 would take at least"):
        check_sampler(s, "block", samples=100_000, max_seconds=1e-3)


def test_a_run_that_projects_past_max_seconds_is_stopped(monkeypatch):
    """Measured on the first calls (after 0.5 s of them here, `PROJECT_AFTER_S` by default), 2 ms
    a row projects 200,000 samples to 400 s, over max_seconds = 20: a TimeLimitError naming
    samples and the estimate."""
    from spectheory.testing.checks import calls as calls_module

    monkeypatch.setattr(calls_module, "PROJECT_AFTER_S", 0.5)
    s, calls = _counting(coin_sampler(2e-3))
    with pytest.raises(TimeLimitError, match=r"samples = 200,000 would take about") as exc:
        check_sampler(s, "block", samples=200_000, max_seconds=20, max_batch=256)
    assert sum(calls) < 2_000 and "\n" not in str(exc.value)


def test_small_times_are_written_with_their_digits():
    """A time under 0.1 s read "0.0 s": a refusal said 1,000,000 samples would take at least
    0.0 s, over max_seconds = 0.001 (0.0 s)."""
    from spectheory.runtime.limits import human_seconds

    assert [human_seconds(x) for x in (0, 0.001, 0.02, 0.0999, 0.45, 12)] == \
        ["0 s", "0.001 s", "0.02 s", "0.1 s", "0.5 s", "12 s"]
    with pytest.raises(SizeLimitError) as exc:
        check_sampler(make_sampler("token"), "token", samples=1_000_000, max_seconds=0.001)
    assert "would take at least 0.02 s" in str(exc.value)
    assert "over max_seconds = 0.001 (0.001 s)" in str(exc.value)


def test_memory_does_not_grow_with_samples(tmp_path):
    """Counting is call by call: 2,000,000 samples of 4 draft rows at V = 2,000 (one draft row
    at a time, 2^16 a call) peak within 32 MiB of 100,000 (keeping every output until the end
    took about 76 bytes a sample: 139 MiB more at 2,000,000)."""
    script = tmp_path / "peak.py"
    script.write_text('''
import json, resource, sys, torch
torch.set_num_threads(1)
from spectheory.testing.checks.sampler import DraftRows, check_sampler, make_sampler
g = torch.Generator().manual_seed(0)
B, L, V = 4, 3, 2000
p = torch.softmax(2 * torch.randn(B, L + 1, V, generator=g, dtype=torch.float64), -1)
q = torch.softmax(2 * torch.randn(B, L, V, generator=g, dtype=torch.float64), -1)
d = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(B, L)
s = make_sampler("block")
out = []
for n in (100_000, 2_000_000):
    rep = check_sampler(s, "block", [DraftRows(d, q, p)], samples=n, max_batch=2**16)
    out.append((rep.passed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
print(json.dumps(out))
''')
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    (ok1, small), (ok2, large) = json.loads(res.stdout.strip())
    assert ok1 and ok2  # false alarm <= 1e-3 each
    assert large - small < 32 * 1024, (small, large)  # ru_maxrss in KiB


# ----------------------------------------------------------------------------- command line

SAMPLERS = '''
import sys, time, torch
from spectheory.testing.checks.sampler import make_sampler, reference_coin_sampler
block = make_sampler("block")
ref = reference_coin_sampler("block")
def slow(d, q, p, g):
    time.sleep(2e-4 * d.shape[0])
    n, L = d.shape
    u = torch.rand(n, L + 1, generator=g, dtype=torch.float64)
    u[:, :L] = 1 - u[:, :L]
    return ref(d, q, p, u)
'''


@pytest.fixture
def sampler_module(user_modules):
    return user_modules(budget_samplers=SAMPLERS)


def _budgeted_cli(args, capsys):
    """A budgeted command, run up to three times until it exits 0: a pause of the machine that
    takes most of a budget of a second or two makes the plan too small to test (exit 1) or the
    budget too small (exit 2), as it should; a planner that is wrong is wrong every time."""
    said = []
    for _ in range(3):
        code, out, err = run(args, capsys)
        if code == 0:
            return code, out, err
        said.append(err.strip().splitlines()[-1:])
    pytest.fail(f"{' '.join(args)}: exit {code} three times: {said}")


def test_cli_budget(sampler_module, capsys):
    code, out, err = _budgeted_cli(["check-sampler", "budget_samplers:slow", "--budget", "1.5",
                                    "--json"], capsys)
    obj = json.loads(out)
    assert code == 0 and obj["passed"] and obj["budget"]["samples"] == obj["samples"]
    assert err.startswith("check_sampler: budget 1.5 s") and err.count("\n") == 1
    assert f"running {obj['samples']:,} samples" in err
    code, out, err = _budgeted_cli(["check-sampler", "budget_samplers:block", "--samples",
                                    "auto", "--budget", "1"], capsys)
    assert code == 0 and "sized by budget_s" in out, err


@pytest.mark.parametrize("args,msg", [
    (["--samples", "auto"], "--samples auto needs --budget"),
    (["--samples", "1000", "--budget", "5"], "give one"),
    (["--budget", "0"], "--budget"),
    (["--budget", "soon"], "--budget"),
    (["--budget", "inf"], "--budget"),
    (["--samples", "10000000000000"], "--samples"),
])
def test_cli_bad_budget_is_one_line_exit_2(sampler_module, capsys, args, msg):
    code, out, err = run(["check-sampler", "budget_samplers:block", *args], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and msg in err
