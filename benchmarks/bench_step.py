"""Benchmark: ``check_step`` on the correct engine steps and on the bug kit's seam replicas.

For each correct step (vLLM V1, SGLang, transformers built on the ports of
`spectheory.testing.engines.adapters`): the time of one check on the default step instances and the
bias it detects, then the verdicts over ``--seeds`` seeds (false alarms, expected at most alpha =
1e-3 each). For each replica of `spectheory.testing.mutants.steps`: its exact TV, the power
``detection_power`` states at the bug kit's sample count, and the catch rate measured over the
same seeds.

Run: ``PYTHONPATH=. python benchmarks/bench_step.py [--seeds 20] [--out benchmarks/results]``
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import numpy as np
import torch

from spectheory.testing.mutants import steps as S
from spectheory.testing.checks.step import (check_step, detection_power, sglang_step,
                                            transformers_step, vllm_v1_step)

from _machine import cpu_name

SAMPLES = {"vllm-47386": 10_000, "sglang-7207": 2_000, "hf-47932": 2_000, "deepspec-31": 120_000}
CORRECT = [("vllm_v1_step", vllm_v1_step, 20_000), ("sglang_step", sglang_step, 20_000),
           ("transformers_step", transformers_step, 4_000)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = {"correct": {}, "replicas": {}}
    lines = [f"check_step, alpha = 1e-3, {args.seeds} seeds, torch 1 thread"]
    for name, step, n in CORRECT:
        t = time.perf_counter()
        rep = check_step(step, samples=n, seed=0)
        dt = time.perf_counter() - t
        fails = sum(not check_step(step, samples=n, seed=s).passed for s in range(1, args.seeds))
        out["correct"][name] = {"samples": n, "seconds": dt, "detects_tv": rep.min_detectable_tv,
                                "false_alarms": fails, "runs": args.seeds - 1}
        lines.append(f"  {name:<18} {n:>7,} samples {dt:6.2f} s  detects TV >= "
                     f"{rep.min_detectable_tv:.3g}  false alarms {fails}/{args.seeds - 1}")
    for name, (step, inst, sp, dp) in S.REPLICAS.items():
        law, target, tv = S.exact_step_law(name, inst(), sp, dp)
        n = SAMPLES[name]
        power = detection_power(np.array([float(x) for x in law]),
                                np.array([float(x) for x in target]), n)
        t = time.perf_counter()
        caught = sum(not check_step(step, instances=[inst()], samples=n, seed=s, sampling=sp,
                                    draft_sampling=dp).passed for s in range(args.seeds))
        dt = (time.perf_counter() - t) / args.seeds
        out["replicas"][name] = {"exact_tv": str(tv), "tv": float(tv), "samples": n,
                                 "stated_power": power, "caught": caught, "runs": args.seeds,
                                 "seconds_per_check": dt}
        lines.append(f"  {name:<12} TV {str(tv)[:24]:<24} ({float(tv):.4g}) {n:>7,} samples  "
                     f"power {power:.4f}  caught {caught}/{args.seeds}  {dt:.2f} s a check")
    machine = {"uname_m": platform.machine(), "nproc": os.cpu_count(), "cpu": cpu_name(),
               "python": platform.python_version(), "torch": torch.__version__,
               "torch_threads": torch.get_num_threads()}
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    cmd = "PYTHONPATH=. python benchmarks/bench_step.py " + " ".join(sys.argv[1:])
    lines += [f"  machine {machine}", f"  date {date}", f"  command {cmd}"]
    out.update({"machine": machine, "date": date, "command": cmd})
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(os.path.join(args.out, "check_step.json"), "w") as f:
            json.dump(out, f, indent=1)
        with open(os.path.join(args.out, "check_step.txt"), "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
