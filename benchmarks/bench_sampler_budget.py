"""Benchmark: what a sampler check costs a sample, and what a time budget buys.

For spectheory's reference sampler (``make_sampler("block")``) and for a sampler that returns
zeros at once (the check's own work: gathering inputs, counting, testing), ``check_sampler`` is
timed at 10^3 ... 10^6 samples (best of ``--repeats``) on the default instances (4
prefix-dependent instances, 32 draft rows) in ``law`` and ``lossless`` modes, with one torch
thread. The cost t(N) = fixed + N per_sample is fitted through the two largest sizes; from it,
the sample count that fits budgets of 1, 10, 60 and 600 s (the last ones extrapolated) and the
total-variation bias each count detects with 90% power at alpha = 1e-3
(`spectheory.testing.statistics.budget.planned_tv`, the value the report will state).

Budgeted runs (``samples="auto"``) are timed at 1 and 10 s for the reference sampler, to see the
whole call against its budget.

For slow samplers (a kernel run under the Triton interpreter costs about 10 to 115 ms a row),
the same power function gives the detectable bias of the sample count a budget allows at a fixed
cost a row (computed, not measured: the check's own cost is negligible beside it).

Run: ``python benchmarks/bench_sampler_budget.py [--out benchmarks/results]``
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import sys
import time

import torch

from spectheory.testing.statistics import budget as B
from spectheory.testing.checks.sampler import (_ROW_LAWS, MIN_SECONDS_PER_SAMPLE, check_sampler,
                                               default_instances, make_sampler)

from _machine import cpu_name

SIZES = (1_000, 10_000, 100_000, 1_000_000)
BUDGETS = (1, 10, 60, 600)
ALPHA = 1e-3
#: Seconds a row of a Triton-interpreted kernel (the range seen: 10 to 115 ms).
SLOW_ROWS = (0.010, 0.115)


def zeros(drafts, q, p, generator):
    """Returns at once: the check's own cost."""
    z = torch.zeros(drafts.shape[0], dtype=torch.long)
    return z, z


def timed(fn, repeats: int):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def row_laws(mode: str, inst) -> list:
    laws: list = []
    token = _ROW_LAWS.set(laws)
    try:
        check_sampler(make_sampler("block"), "block", inst, mode=mode, samples=10_000)
    finally:
        _ROW_LAWS.reset(token)
    return laws


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="folder for sampler_budget.json / .txt")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    inst = default_instances()
    check_sampler(make_sampler("block"), "block", inst, samples=1_000)  # warm-up
    res = {"benchmark": "check_sampler cost a sample and detectable TV per budget",
           "command": "python benchmarks/bench_sampler_budget.py " + " ".join(
               argv if argv is not None else sys.argv[1:]),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": {"uname_m": platform.machine(), "nproc": os.cpu_count(), "cpu": cpu_name(),
                       "python": platform.python_version(), "torch": torch.__version__,
                       "torch_threads": torch.get_num_threads()},
           "timing": f"best of {a.repeats}", "alpha": ALPHA, "power": B.POWER, "modes": {}}
    lines = [f"check_sampler cost and detectable TV per budget (default instances, 32 draft "
             f"rows; alpha = {ALPHA:g}, power 90%; torch 1 thread; best of {a.repeats})"]
    for mode in ("law", "lossless"):
        laws = row_laws(mode, inst)
        out = {"seconds": {}, "zeros_seconds": {}}
        for n in SIZES:
            out["seconds"][n], _ = timed(lambda: check_sampler(make_sampler("block"), "block",
                                                               inst, mode=mode, samples=n),
                                         a.repeats)
            out["zeros_seconds"][n], _ = timed(lambda: check_sampler(zeros, "block", inst,
                                                                     mode=mode, samples=n),
                                               a.repeats)
        fixed, per = B.fit_cost([(n, out["seconds"][n]) for n in SIZES[-2:]])
        kfixed, kper = B.fit_cost([(n, out["zeros_seconds"][n]) for n in SIZES[-2:]])
        out.update(fixed_s=fixed, per_sample_s=per, check_fixed_s=kfixed, check_per_sample_s=kper)
        out["budgets"] = {}
        for b in BUDGETS:
            n = int((b - fixed) / per)
            out["budgets"][b] = {"samples": n, "extrapolated": n > SIZES[-1],
                                 "detectable_tv": B.planned_tv(laws, n, ALPHA)}
        res["modes"][mode] = out
        lines.append(f"\n{mode} mode ({len(laws)} rows):")
        lines.append("  samples     reference sampler    zeros (the check's own work)")
        for n in SIZES:
            t = out["seconds"][n]
            lines.append(f"  {n:>9,}   {t:8.3f} s ({t / n * 1e6:6.2f}"
                         f" us/sample)   {out['zeros_seconds'][n]:8.3f} s "
                         f"({out['zeros_seconds'][n] / n * 1e6:6.2f} us/sample)")
        lines.append(f"  fit (two largest): {fixed:.3f} s + {per * 1e6:.2f} us a sample; the "
                     f"check alone {kfixed:.3f} s + {kper * 1e6:.2f} us a sample")
        for b in BUDGETS:
            x = out["budgets"][b]
            lines.append(f"  budget {b:>4} s: {x['samples']:>12,} samples "
                         f"{'(extrapolated) ' if x['extrapolated'] else ''}-> detects TV >= "
                         f"{x['detectable_tv']:.4f}")
    # budgeted runs, whole call against the budget
    res["auto"] = {}
    lines.append("\nbudgeted runs (samples='auto'), law mode, reference sampler:")
    for b in (1, 10):
        with contextlib.redirect_stderr(io.StringIO()):
            t = time.perf_counter()
            rep = check_sampler(make_sampler("block"), "block", inst, samples="auto", budget_s=b)
            took = time.perf_counter() - t
        res["auto"][b] = {"seconds": took, "samples": rep.samples,
                          "detectable_tv": rep.min_detectable_tv, "plan": rep.budget.to_json()}
        lines.append(f"  budget {b:>3} s: took {took:6.2f} s ({took / b:.0%}), {rep.samples:,} "
                     f"samples, detects TV >= {rep.min_detectable_tv:.4f}")
    # slow samplers: computed from the power function
    laws = row_laws("law", inst)
    res["slow_rows"] = {}
    lines.append("\nslow samplers (computed: samples = budget / cost a row, law mode):")
    for cost in SLOW_ROWS:
        res["slow_rows"][cost] = {}
        for b in (60, 600, 3600):
            n = int(b / cost)
            tv = B.planned_tv(laws, n, ALPHA) if n >= len(laws) else float("inf")
            res["slow_rows"][cost][b] = {"samples": n, "detectable_tv": tv}
            lines.append(f"  {cost * 1e3:5.0f} ms a row, {b:>5} s: {n:>7,} samples -> detects TV "
                         f">= {tv:.3f}")
        n = 100_000
        lines.append(f"  {cost * 1e3:5.0f} ms a row: 100,000 samples take "
                     f"{n * cost / 60:.0f} min")
    lines.append(f"\nthe check's least cost a sample assumed by the samples guard: "
                 f"{MIN_SECONDS_PER_SAMPLE:g} s (measured above with the zeros sampler)")
    lines.append(f"machine {res['machine']}\ndate {res['date']}\ncommand {res['command']}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "sampler_budget.json"), "w") as f:
            json.dump(res, f, indent=2)
        with open(os.path.join(a.out, "sampler_budget.txt"), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
