"""Verifier laws at the real-model shape, as ratios to reading p and q once.

B = 64 drafted blocks, L = 8, Qwen vocabulary V = 151,936, float32, CPU, one torch thread. Rows
are softmax(3 N(0, 1)) logits (the root row shared by all K paths, as in a real draft tree).

* token and block verification: the full law (stop table and every correction row), and the
  stop-probabilities-only route [`stop_probabilities`][spectheory.engine.nodes.stop_probabilities] (what a
  paired E[tau] comparison needs);
* GBV with K = 4 i.i.d. paths (selection read off the root row's sort, O(V) rank counting at
  other contested nodes, one rank order per q^G row unless x below(a) is under half an ulp of A,
  block verification against q^G, batched over the positions of a path); the rank orders and the
  q^G rows that need them come from the compiled kernels of ``spectheory.verifiers._gbv_cpu``
  (numba), or with ``--no-kernels`` from torch operations (a stable sort of ratio bit patterns);
* the correction rows of token, block (GBV's block step included) and SpecInfer's residual chain
  come from the compiled kernels of ``spectheory.verifiers._rows_cpu`` (one read of p and q, one
  non-temporal write, torch's arithmetic reproduced), or with ``--no-kernels`` from torch
  operations;
* SpecInfer with K = 4 i.i.d. paths (recursive rejection sampling on the token tree; the residual
  chain built up to each node's number of candidates).

The multi-path laws are called as the engine and the real-model loop call them,
``get_verifier(name, multi_path=True).law(drafts, q, p)``.

The floor is the time to read the p and q of the case once (``Tensor.sum`` over each), measured
so that it cannot come out slow:

* warmed: the inputs are read before anything is timed, and every floor is the fastest of
  ``--reads`` consecutive reads;
* checked against the machine's read bandwidth, measured in the same process before and after
  the laws as the fastest of at least 10 sums of a separate 1 GiB buffer (which fits no cache),
  the larger of the two: the floor's bandwidth (input bytes / floor) is recorded beside it and
  their ratio must be at least 0.7, else the run says the floor is suspect;
* floor and law interleaved in one process: each pair is a floor measured right before one call
  of the law, ``--pairs`` pairs per case (at least 9), the cases of one input shape interleaved
  pair by pair.

Each case reports the minimum and the median over the pairs of law / floor, the minimum law
time against the minimum floor, the spread of the ratios (max / min over the pairs, and the
interquartile range), and the share of wall time the process got on a CPU during the law calls
(CPU time / wall time: near 1 on an idle machine, lower when other work takes the cores), with
the same ratios in CPU time (law CPU / floor CPU), which contention inflates less. The machine's
load average is recorded before and after.

The laws write their outputs (350 MB per single-path case, 1.4 GB for SpecInfer's K paths) into
buffers of [`spectheory.runtime.buffers`][spectheory.runtime.buffers], as every caller's laws do:
the first call at a shape pays the page faults of fresh memory (recorded per case as
``first_pair_law_seconds``), later calls reuse the freed buffer. ``--no-pool`` turns the pool off
(every call faults its output in), to measure that cost. Usage:

```bash
python benchmarks/bench_real_laws.py [--pairs 9] [--reads 5] [--runs 2] [--no-pool] \
    [--no-kernels] [--out benchmarks/results/real_laws.json]
```
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch

from _machine import cpu_name


def rows(gen, *shape):
    return torch.softmax(torch.randn(*shape, generator=gen) * 3, -1)


def timed(fn) -> tuple[float, float]:
    """(wall, CPU) seconds of one call of ``fn``."""
    c, t = time.process_time(), time.perf_counter()
    out = fn()
    dt, dc = time.perf_counter() - t, time.process_time() - c
    del out
    return dt, dc


def fastest(fn, reads: int) -> tuple[float, float]:
    """The fastest of ``reads`` calls of ``fn``: (wall, CPU) seconds of the fastest wall time."""
    return min(timed(fn) for _ in range(reads))


def machine_read_bandwidth(reads: int) -> float:
    """Bytes per second of the fastest single-thread ``Tensor.sum`` over a 1 GiB float32 buffer
    (allocated and written as the inputs are, so its pages exist), read ``max(reads, 10)``
    times."""
    buf = torch.rand(2**28, generator=torch.Generator().manual_seed(1))
    float(buf.sum())
    best = fastest(lambda: float(buf.sum()), max(reads, 10))[0]
    return buf.numel() * 4 / best


def quartiles(xs: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def gbv_rows_sorted(drafts, q, p) -> list[int]:
    """[q^G rows whose mass below every token was computed from a rank order (a sort, or the
    root's sort shared with the selection), all q^G rows] in one GBV law (an untimed, counted
    call, on either route: torch operations, or the compiled kernels, whose per-path call
    returns the last position sorted and the positions that passed the screen); the others
    passed the screen that makes the sort unnecessary."""
    import importlib

    gbv_module = importlib.import_module("spectheory.verifiers.gbv")  # the module, not gbv()
    compiled = gbv_module._kernels_for(q) is not None
    name = "_compiled_positions" if compiled else "_below_from_order"
    fn = getattr(gbv_module, name, None)
    if fn is None:  # another implementation
        return [None, None]
    counts = [0, drafts.shape[0] * drafts.shape[2]]

    def counted(*args, **kw):
        out = fn(*args, **kw)
        if compiled:
            last, skipped = out
            counts[0] += int((~skipped[:last + 1]).sum())
        else:
            q_rows = args[0]
            counts[0] += int(q_rows.numel() // q_rows.shape[-1])
        return out

    setattr(gbv_module, name, counted)
    try:
        gbv_module.gbv(drafts, q, p)
    finally:
        setattr(gbv_module, name, fn)
    return counts


def gbv_route(q) -> str:
    """Which route GBV's CPU rows take here (the compiled kernels, or torch operations)."""
    import importlib

    gbv_module = importlib.import_module("spectheory.verifiers.gbv")
    if gbv_module._kernels_for(q) is None:
        return "torch operations"
    import numba

    return f"compiled kernels (numba {numba.__version__})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=64)
    ap.add_argument("--L", type=int, default=8)
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--K", type=int, default=4)
    ap.add_argument("--pairs", type=int, default=9, help="floor/law pairs per case (>= 9)")
    ap.add_argument("--reads", type=int, default=5, help="reads per floor (its fastest counts)")
    ap.add_argument("--runs", type=int, default=1,
                    help="repeat the whole protocol (fresh inputs of the same seed) in this "
                         "process, to state the spread between runs")
    ap.add_argument("--no-pool", action="store_true",
                    help="allocate every law output afresh (spectheory.runtime.buffers off)")
    ap.add_argument("--no-kernels", action="store_true",
                    help="every row through torch operations (SPECTHEORY_NUMBA=0): GBV's rank "
                         "orders and q^G rows and the correction rows, not the compiled kernels")
    ap.add_argument("--out", default="benchmarks/results/real_laws.json")
    a = ap.parse_args()
    if a.pairs < 9 or a.reads < 1 or a.runs < 1:
        ap.error("--pairs must be at least 9, --reads and --runs at least 1")
    torch.set_num_threads(1)
    if a.no_pool:
        os.environ["SPECTHEORY_BUFFER_POOL"] = "0"
    if a.no_kernels:
        os.environ["SPECTHEORY_NUMBA"] = "0"
    from spectheory.runtime import buffers
    from spectheory.engine.nodes import stop_probabilities
    from spectheory.registry import get_verifier
    from spectheory.verifiers import block_verification, token_verification

    Bn, L, V, K = a.B, a.L, a.V, a.K
    load_before = os.getloadavg()
    bandwidth = machine_read_bandwidth(a.reads)
    #: per run, per case: (floor wall, law wall, law CPU, floor CPU) of each pair
    runs: list[dict[str, list[tuple[float, float, float, float]]]] = []
    nbytes: dict[str, int] = {}
    routes: list[str] = []

    def measure(cases, floor, input_bytes):
        """The cases of one input shape, interleaved pair by pair, after a warming read."""
        floor()
        pairs = runs[-1]
        for name in cases:
            pairs[name] = []
            nbytes[name] = input_bytes
        for _ in range(a.pairs):
            for name, fn in cases.items():
                f, fc = fastest(floor, a.reads)
                t, c = timed(fn)
                pairs[name].append((f, t, c, fc))

    def single_path(gen):
        p1, q1 = rows(gen, Bn, L + 1, V), rows(gen, Bn, L, V)
        x1 = torch.multinomial(q1.reshape(-1, V), 1, generator=gen).view(Bn, L)
        measure({"token": lambda: token_verification(x1, q1, p1),
                 "block": lambda: block_verification(x1, q1, p1),
                 "token stop only": lambda: stop_probabilities("token", x1, q1, p1),
                 "block stop only": lambda: stop_probabilities("block", x1, q1, p1)},
                lambda: float(p1.sum()) + float(q1.sum()), (p1.numel() + q1.numel()) * 4)

    def k_paths(gen):
        pk = rows(gen, Bn, K, L + 1, V)
        qk = rows(gen, Bn, K, L, V)
        pk[:, :, 0] = pk[:, :1, 0]
        qk[:, :, 0] = qk[:, :1, 0]
        xk = torch.multinomial(qk.reshape(-1, V), 1, generator=gen).view(Bn, K, L)
        gbv_law = get_verifier("gbv", multi_path=True).law
        specinfer_law = get_verifier("specinfer", multi_path=True).law
        measure({f"gbv K={K}": lambda: gbv_law(xk, qk, pk),
                 f"specinfer K={K}": lambda: specinfer_law(xk, qk, pk)},
                lambda: float(pk.sum()) + float(qk.sum()), (pk.numel() + qk.numel()) * 4)
        routes.append(gbv_route(qk))
        return gbv_rows_sorted(xk, qk, pk)

    for _ in range(a.runs):
        runs.append({})
        gen = torch.Generator().manual_seed(0)
        single_path(gen)  # its p and q are freed before the K-path ones are drawn
        sorted_rows, all_rows = k_paths(gen)
    bandwidth = max(bandwidth, machine_read_bandwidth(a.reads))  # again, once the laws ran
    load_after = os.getloadavg()
    res = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, {cpu_name()}, "
                      f"torch {torch.__version__}, numpy {np.__version__}, 1 thread",
           "command": "python benchmarks/bench_real_laws.py " + " ".join(sys.argv[1:]),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "load_average_before": [round(x, 2) for x in load_before],
           "load_average_after": [round(x, 2) for x in load_after],
           "machine_read_GBps": round(bandwidth / 1e9, 2),
           "shape": {"B": Bn, "L": L, "V": V, "K": K, "dtype": "float32"},
           "protocol": f"{a.pairs} floor/law pairs per case, interleaved; each floor the "
                       f"fastest of {a.reads} reads; {a.runs} run(s) of the whole protocol",
           "buffer_pool": ("off" if buffers.capacity() == 0 else
                           f"on, capacity {buffers.capacity() / 2**30:.1f} GiB"),
           "cases": {}}
    suspect = []
    for name in runs[0]:
        ps = [pair for run in runs for pair in run[name]]
        per_run = [statistics.median(t / f for f, t, _, _ in run[name]) for run in runs]
        floors = [f for f, _, _, _ in ps]
        laws = [t for _, t, _, _ in ps]
        ratios = [t / f for f, t, _, _ in ps]
        cpu_ratios = [c / fc for _, _, c, fc in ps if fc > 0]
        lo, hi = quartiles(ratios)
        floor_bw = nbytes[name] / min(floors)
        if floor_bw < 0.7 * bandwidth:
            suspect.append(name)
        res["cases"][name] = {
            "min_ratio": round(min(ratios), 3), "median_ratio": round(statistics.median(ratios), 3),
            "min_law_over_min_floor": round(min(laws) / min(floors), 3),
            "ratio_spread_max_over_min": round(max(ratios) / min(ratios), 3),
            "ratio_interquartile": [round(lo, 3), round(hi, 3)],
            "law_min_seconds": round(min(laws), 4),
            "law_median_seconds": round(statistics.median(laws), 4),
            "floor_min_seconds": round(min(floors), 4),
            "floor_median_seconds": round(statistics.median(floors), 4),
            "floor_GBps": round(floor_bw / 1e9, 2),
            "floor_bandwidth_vs_machine": round(floor_bw / bandwidth, 3),
            "law_cpu_share": round(sum(c for _, _, c, _ in ps) / sum(laws), 3),
            "cpu_min_ratio": round(min(cpu_ratios), 3) if cpu_ratios else None,
            "cpu_median_ratio": round(statistics.median(cpu_ratios), 3) if cpu_ratios else None,
            "per_run_min_ratio": [round(min(t / f for f, t, _, _ in run[name]), 3)
                                  for run in runs],
            "per_run_median_ratio": [round(m, 3) for m in per_run],
            "spread_between_runs_of_the_median": round(max(per_run) / min(per_run), 3),
            "input_bytes": nbytes[name],
            "first_pair_law_seconds": round(runs[0][name][0][1], 4),
            "pairs_floor_law_seconds": [[round(f, 5), round(t, 5)] for f, t, _, _ in ps]}
    res["cases"][f"gbv K={K}"]["q^G rows sorted"] = f"{sorted_rows} of {all_rows}"
    res["cases"][f"gbv K={K}"]["route"] = routes[0]
    res["floor_suspect"] = suspect
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    print(f"machine read bandwidth {bandwidth / 1e9:.2f} GB/s (1 thread); load average before "
          f"{res['load_average_before']}, after {res['load_average_after']}")
    for name, c in res["cases"].items():
        print(f"{name:18s} law {c['law_min_seconds'] * 1e3:7.0f} ms min "
              f"{c['law_median_seconds'] * 1e3:7.0f} ms median; ratio min {c['min_ratio']:5.2f}x "
              f"median {c['median_ratio']:5.2f}x (IQR {c['ratio_interquartile'][0]:.2f}-"
              f"{c['ratio_interquartile'][1]:.2f}, max/min {c['ratio_spread_max_over_min']:.2f}); "
              f"floor {c['floor_min_seconds'] * 1e3:.0f} ms for {c['input_bytes'] / 1e9:.2f} GB "
              f"= {c['floor_GBps']:.1f} GB/s ({c['floor_bandwidth_vs_machine']:.2f} of the "
              f"machine's); CPU share {c['law_cpu_share']:.2f}, CPU-time ratio min "
              f"{c['cpu_min_ratio']}x median {c['cpu_median_ratio']}x; median per run "
              f"{c['per_run_median_ratio']}")
    print(f"gbv: q^G rows sorted {sorted_rows} of {all_rows}; route: {routes[0]}")
    if suspect:
        print(f"floor suspect (under 0.7 of the machine's read bandwidth): {', '.join(suspect)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
