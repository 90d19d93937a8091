"""The truth table of the stateful seam replicas (`spectheory.testing.mutants.stateful_steps`).

For every replica on `stateful_instance()` (V = 3, L = 2, prefix-dependent rows): the exact TV
of its law of the first s + L tokens to the processed target's for s = 1 and s = 2 (the
enumeration of `stateful_step_law`), the samples at which `check_step` (one instance,
alpha = 1e-3) has power >= 0.9 and >= 0.99 against that law (`detection_power`), the verdicts of
`check_step` with steps = 1 and steps = 2 at the stated samples (seed 0), and the empirical
catch rate at the 0.9-power samples over a few seeds. Also SGLang PR #33643's effective
frequency penalty on `toy_repeat_instance()`.

    OMP_NUM_THREADS=1 python benchmarks/stateful_replicas.py [--seeds 5] [--no-mc] [--out PATH]

``--no-mc`` sizes n90 by the non-central approximation only (minutes instead of about an hour)
and leaves the Monte Carlo columns empty.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import torch

from spectheory.testing.mutants import stateful_steps as ss
from spectheory.testing.checks.step import check_step, detection_power, target_sequence_law

ALPHA = 1e-3


def samples_for(law, target, power: float, mc: bool = True) -> int | None:
    """Smallest sample count (to 1%) with power >= ``power``: Monte Carlo of the check's own
    statistic (``mc``) or the non-central approximation of `detection_power`; None past 10^7."""
    def pw(n):
        if mc:
            return ss.check_step_power(law, target, n, ALPHA, trials=2000, seed=n)
        return detection_power(law, target, n, ALPHA)

    hi = 8
    while pw(hi) < power:
        hi *= 2
        if hi > 10**7:
            return None
    lo = hi // 2
    while hi - lo > max(1, hi // 100):
        mid = (lo + hi) // 2
        if pw(mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5, help="seeds for the empirical catch rate")
    ap.add_argument("--out", default="benchmarks/results/stateful_replicas.md")
    ap.add_argument("--no-mc", action="store_true",
                    help="size n90 by detection_power only (no Monte Carlo power)")
    args = ap.parse_args(argv)
    if not 1 <= args.seeds <= 100:
        print("--seeds must be in 1..100", file=sys.stderr)
        return 2
    inst = ss.stateful_instance()
    lines = ["# Stateful seam replicas: exact TVs, power and verdicts", "",
             "Produced by `OMP_NUM_THREADS=1 python benchmarks/stateful_replicas.py"
             + (" --no-mc" if args.no_mc else "") + f" --seeds {args.seeds}` on "
             + f"{platform.machine()}, {os.cpu_count()} cores, Python "
             + f"{platform.python_version()}, torch {torch.__version__} ("
             + time.strftime("%Y-%m-%d", time.gmtime()) + "). Instance "
             "`stateful_instance()` (V = 3, L = 2, `random_instance(3, 2, 2, denominator=12)`), "
             "one instance per check, alpha = 1e-3. TV_s: exact total variation of the "
             "replica's law of the first s + 2 tokens to the processed target's. n90 / n99: "
             "samples at which `check_step` (steps = 2) has power >= 0.9 / 0.99 against the "
             "exact law, by Monte Carlo of the check's own statistic (`check_step_power`, "
             "2,000 trials); n90 (approx.): the non-central chi-square approximation "
             "`detection_power`. Verdicts at the stated samples (`Replica.samples`, "
             "seed 0); caught: failed `check_step` (steps = 2) at n90 (with --no-mc: the "
             "approximate n90) over seeds 0.."
             f"{args.seeds - 1}.", "",
             "| replica | parameters | TV_1 | TV_2 | n90 (approx.) | n90 | n99 | stated | "
             "steps=1 | steps=2 | caught at n90 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    t0 = time.perf_counter()
    for name, rep in ss.REPLICAS.items():
        sp = rep.sampling()
        tvs, laws = [], {}
        for s in (1, 2):
            law = ss.stateful_step_law(rep.rule, inst, s, sp)
            tgt = target_sequence_law(inst, s + inst.block_length, sp)
            laws[s] = (law, tgt)
            tvs.append(ss.tv(law, tgt))
        a90 = samples_for(*laws[2], 0.9, mc=False)
        n90 = a90 if args.no_mc else samples_for(*laws[2], 0.9)
        n99 = None if args.no_mc else samples_for(*laws[2], 0.99)
        verdict = {}
        for s in (1, 2):
            r = check_step(ss.replica_step(rep.rule), instances=[inst], samples=rep.samples,
                           steps=s, sampling=sp, alpha=ALPHA, seed=0)
            verdict[s] = "passes" if r.passed else "fails"
        caught = sum(not check_step(ss.replica_step(rep.rule), instances=[inst],
                                    samples=max(n90, 100), steps=2, sampling=sp, alpha=ALPHA,
                                    seed=k).passed for k in range(args.seeds))
        lines.append(f"| {name} ({rep.project} {rep.thread}) | {sp} | {tvs[0]:.6f} | "
                     f"{tvs[1]:.6f} | {a90:,} | {'-' if args.no_mc else f'{n90:,}'} | "
                     f"{'-' if n99 is None else f'{n99:,}'} | {rep.samples:,} | "
                     f"{verdict[1]} | "
                     f"{verdict[2]} | {caught}/{args.seeds} |")
        print(lines[-1], flush=True)
    lines += ["", "## SGLang PR #33643: the effective frequency penalty", "",
              "Instance `toy_repeat_instance()` (draft = target), nominal frequency_penalty 1. "
              "Effective penalty f': the frequency penalty with which a correct engine's law of "
              "the first s + 2 tokens has the buggy law's expected number of repeats (positions "
              "whose token occurred earlier), by bisection to 1e-10.", "",
              "| steps s | repeats (buggy, f = 1) | repeats (correct, f = 1) | f' | f' / f | "
              "tokens per step (first step) |", "|---|---|---|---|---|---|"]
    for s in (2, 3, 4):
        r = ss.effective_frequency_penalty(1.0, steps=s)
        lines.append(f"| {s} | {r['repeats_buggy']:.6f} | {r['repeats_nominal']:.6f} | "
                     f"{r['effective']:.6f} | {r['ratio']:.4f} | {r['tokens_per_step']:.4f} |")
        print(lines[-1], flush=True)
    lines += ["", f"Total time {time.perf_counter() - t0:.0f} s."]
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
