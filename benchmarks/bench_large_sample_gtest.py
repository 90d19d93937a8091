"""Benchmark: the real-model harness's large-sample G-tests on tiny local models (no downloads).

The multi-path run that the test suite keeps at 2,000 samples (``tests/test_gpu_validation_stats.py
::test_gtest_multipath``): GBV with K = 2 paths, L = 2, at the context [2, 1] of two tiny Qwen2
models (V = 4, seeds 10 and 11, scale 3), ``--samples`` iterations (default 20,000) in chunks of
``--chunk`` iterations, family-wise false-alarm rate 1e-3 over the G-tests of the lossless
verifier (level 1e-3/3 a test). Records the wall time, the peak resident memory (``ru_maxrss``
of this process), the tests' statistics, and the total-variation bias each test detects with
90% power at its level (`spectheory.testing.statistics.budget.detectable_tv`: non-central
chi-square, the bias spread least favourably; the G-test has the Pearson statistic's limit).

A drafted batch of a chunk compares every pair of its chunk x K paths to share the rows of
common prefixes (``spectheory.gpu_validation.decoding.share_prefix_rows``), so memory grows
with the square of the chunk: chunks of 10,000 iterations (20,000 paths) peaked at about 15 GB.

Run: ``python benchmarks/bench_large_sample_gtest.py [--samples 20000] [--chunk 1000]
[--out benchmarks/results]``
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import sys
import time

import torch


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--chunk", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None, help="folder for large_sample_gtest.json")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    from spectheory.gpu_validation.decoding import SpeculativeDecoder
    from spectheory.gpu_validation.experiments.lossless import lossless_test
    from spectheory.gpu_validation.tiny import tiny_qwen2
    from spectheory.testing.statistics.budget import detectable_tv

    dec = SpeculativeDecoder(tiny_qwen2(4, seed=10, scale=3.0), tiny_qwen2(4, seed=11, scale=3.0))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    res = lossless_test(dec, [2, 1], ["gbv"], n=a.samples, K=2, L=2, alpha=1e-3, chunk=a.chunk,
                        generator=torch.Generator().manual_seed(a.seed))
    took = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    v = res["verifiers"]["gbv"]
    level = res["level_per_test"]
    power = {k: detectable_tv([a.samples], [v[k]["dof"]], 2 * level)
             for k in ("first_token", "pair")}
    out = {"benchmark": "large-sample G-tests, GBV K = 2, tiny models",
           "command": "python benchmarks/bench_large_sample_gtest.py " + " ".join(
               argv if argv is not None else sys.argv[1:]),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": {"uname_m": platform.machine(), "nproc": os.cpu_count(),
                       "python": platform.python_version(), "torch": torch.__version__,
                       "torch_threads": torch.get_num_threads()},
           "samples": a.samples, "chunk": a.chunk, "seconds": took,
           "peak_rss_mib": peak / 1024, "rss_before_mib": before / 1024,
           "rejected": v["rejected"], "first_token": v["first_token"], "pair": v["pair"],
           "level_per_test": level, "detectable_tv_90": power}
    print(f"GBV K = 2, {a.samples:,} samples in chunks of {a.chunk:,}: {took:.1f} s, peak RSS "
          f"{peak / 1024:.0f} MiB (before the test {before / 1024:.0f} MiB)")
    print(f"  first token: G = {v['first_token']['G']:.2f} on {v['first_token']['dof']} dof, "
          f"p = {v['first_token']['p_value']:.3g}; detects TV >= {power['first_token']:.4f}")
    print(f"  pair:        G = {v['pair']['G']:.2f} on {v['pair']['dof']} dof, "
          f"p = {v['pair']['p_value']:.3g}; detects TV >= {power['pair']:.4f}")
    print(f"  {'REJECTED' if v['rejected'] else 'passes'} at level {level:.3g} a test "
          f"(family-wise 1e-3)")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "large_sample_gtest.json"), "w") as f:
            json.dump(out, f, indent=2)
    return 0 if not v["rejected"] else 1


if __name__ == "__main__":
    sys.exit(main())
