"""Benchmark: exact multi-path analysis, joint enumeration (``route="enumerate"``) and GBV's
default analytic route (block verification against q^G per tree node).

Case of record: exact GBV analysis for V = 4, L = 4, K = 3 (4^12 = 16.7 M joint draft
outcomes). Prints wall time, outcomes per second and peak resident memory for each enumeration,
and for GBV the time of the default analytic route, its speed-up and its difference to the
enumeration.

    .venv/bin/python benchmarks/bench_multipath.py            # one torch thread (default)
    .venv/bin/python benchmarks/bench_multipath.py --quick    # small cases only
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import torch

from spectheory.multipath import analyze_gbv_fast, analyze_multipath, outcome_count
from spectheory.random_instances import random_instance
from spectheory.registry import get_verifier


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run(V: int, L: int, K: int, name: str, seed: int = 0, symmetric: bool | None = None) -> None:
    inst = random_instance(V, L, seed)
    verifier = get_verifier(name, multi_path=True)  # a registered name or module:function
    sym = (verifier.order_invariant and verifier.drafting in ("iid", "any")) \
        if symmetric is None else symmetric
    t0, c0 = time.perf_counter(), time.process_time()
    res = analyze_multipath(inst, verifier, K, name=name, progress=sys.stderr.isatty(),
                            symmetric=sym, route="enumerate")
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = V ** (L * K)
    visited = outcome_count(V, L, K, sym)
    how = f"({visited:,} sorted tuples visited)" if sym else "(all ordered outcomes visited)"
    line = (f"{name:10s} V={V} L={L} K={K}: {n:>11,} joint outcomes {how} in {dt:7.2f} s "
            f"(CPU {cpu:.2f} s) = "
            f"{n / dt / 1e6:6.2f} M joint outcomes/s, {visited / dt / 1e6:6.3f} M visited/s; "
            f"E[tau+1] = {res.block_efficiency:.6f}, "
            f"TV = {res.tv_to_target:.1e}, peak RSS {peak_rss_gib():.2f} GiB")
    if verifier.name == "gbv":
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            fast = analyze_multipath(inst, verifier, K)  # the default: analytic route
            times.append(time.perf_counter() - t0)
        assert fast.route == "analytic" and fast.tau_pmf == analyze_gbv_fast(inst, K).tau_pmf
        ft = sorted(times)[2]
        line += (f"; default analytic route {ft * 1e3:.1f} ms ({dt / ft:.0f}x faster), "
                 f"differs by {abs(fast.block_efficiency - res.block_efficiency):.1e}")
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small cases only")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--ordered", action="store_true",
                    help="also time GBV enumerating every ordered outcome (no symmetry reduction)")
    ap.add_argument("--verifier", action="append", default=[], metavar="NAME",
                    help="also time this K-path verifier (a name or module:function) on "
                         "V = 4, L = 3, K = 3; repeatable")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    cases = [(3, 2, 3, "gbv", None), (4, 2, 3, "gbv", None), (4, 3, 3, "gbv", None),
             (4, 3, 3, "gbv", False)]
    if not args.quick:
        cases += [(4, 3, 3, "specinfer", None), (4, 3, 3, "spectr", None), (4, 4, 3, "gbv", None)]
        if args.ordered:
            cases += [(4, 4, 3, "gbv", False)]
    cases += [(4, 3, 3, v, None) for v in args.verifier]
    for V, L, K, name, sym in cases:
        run(V, L, K, name, symmetric=sym)


if __name__ == "__main__":
    main()
