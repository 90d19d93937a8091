"""Benchmark of the exact engine: the per-node route against the float64 read floor and against
the per-draft route.

* Headline: block verification, V = 8, L = 7 (2,097,152 drafts), full analysis (tau pmf,
  output law over V^(L+1) sequences, TV to the target), as a ratio to the *read floor*: the time
  to read every float64 input table (target depths 0..L, draft depths 0..L-1) once, measured in
  the same process (``Tensor.sum`` over each table). Also the per-draft route (``route=
  "per-draft"``) on the same instance, and token verification.
* The headline runs as the command line does
  ([`keep_freed_memory`][spectheory.runtime.allocator.keep_freed_memory]: freed memory reused, so the
  engine's large temporaries do not page-fault) and with glibc's default allocator settings
  (``*_default_allocator``).
* Memory: V = 16, L = 6 (tau pmf and TV, ``laws=False``: the output law alone would be 2 GiB) and
  V = 4, L = 12 (full analysis), with glibc's default allocator settings and with
  ``keep_freed_memory`` (which keeps freed blocks for reuse and so raises the peak), peak resident
  memory of the process (instance included; the instance tables are built row block by row block,
  the same Dirichlet(1) rows as [`random_instance`][spectheory.inputs.random_instances.random_instance]).
  ``peak_rss_gib`` is the peak over the node-route calls (one result alive at a time), taken
  before the per-draft route runs (its peak, with the node result still held for the comparison,
  is ``peak_rss_gib_with_per_draft``); ``rss_gib_after_instance`` is the resident memory once the
  input tables are built.
* Token and block verification at depths L-1 and L and the output law's last step run on the
  compiled kernels of ``spectheory.engine._nodes_cpu`` (numba; the same values bit for bit as
  the torch route, from ``COMPILED_MIN_NODES`` nodes on, which V = 8, L = 7 reaches);
  ``headline*_torch_route`` is the same case with ``SPECTHEORY_NUMBA=0`` (torch throughout).
* A straightforward per-draft Python loop on a small case (E[tau] only).
* With the laws asked for, the *law write floor* (``law_write_floor_s``, ``law_write_floor_ratio``
  to the read floor): one ``torch.mul`` that reads the depth-L target table and writes a table
  of the output law's size (V^(L+1) entries), what writing the output law costs at the least in
  one plain pass; ``ratio_besides_law_write`` is the analysis' time less that, over the read
  floor (measured after the peak memory is taken: the pass holds one more table).

Torch runs with one thread; each case runs in a fresh subprocess (its peak memory is its own);
times are medians over ``--repeat`` runs (the first call, which also grows the heap and loads
the compiled kernels, is reported apart), with the least ratio over the runs (``min_ratio``)
and the same ratios in CPU time (``cpu_ratio_to_floor``, ``cpu_min_ratio``: analysis CPU time
over floor CPU time, which other work on the machine inflates less than wall time). The load
average is recorded before and after each case and the whole run. Usage:

```bash
python benchmarks/bench_exact.py [--repeat 5] [--out benchmarks/results/bench_exact.json]
```
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time

CASE = r"""
import json, os, resource, statistics, sys, time
import numpy as np, torch
torch.set_num_threads(1)
from spectheory.engine.analysis import analyze
from spectheory.inputs.instances import Instance
from spectheory.inputs.random_instances import dirichlet_model, random_instance
from spectheory.engine.seqtree import levels
from spectheory.runtime.limits import SWITCH_OFF

V, L, name, mode, repeat = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
per_draft = len(sys.argv) > 6 and sys.argv[6] == "per-draft"
allocator = len(sys.argv) > 7 and sys.argv[7] == "keep"
if allocator:  # what the spectheory command line does before every command
    from spectheory.runtime.allocator import keep_freed_memory
    keep_freed_memory()


if V ** (L + 1) <= 2**26:
    inst = random_instance(V, L, 0)
else:
    rng = np.random.default_rng(0)
    inst = Instance(V, L, dirichlet_model(rng, V, L, 1.0), dirichlet_model(rng, V, L - 1, 1.0))
ql, pl = levels(inst.draft, 0, L, False), levels(inst.target, 0, L + 1, False)
rss_instance = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
nbytes = sum(t.numel() * 8 for t in ql + pl)
laws = mode == "full"


def read_floor():
    t, c = time.perf_counter(), time.process_time()
    s = 0.0
    for x in ql + pl:
        s += float(x.sum())
    cpu_floors.append(time.process_time() - c)
    return time.perf_counter() - t


def resident_gib():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**30


rss_resident = resident_gib()


def run(route):
    t, c = time.perf_counter(), time.process_time()
    r = analyze(inst, name, route=route, laws=laws, max_sequences=V ** (L + 1))
    if route == "auto":
        cpu_times.append(time.process_time() - c)
    return time.perf_counter() - t, r


floors, times, cpu_floors, cpu_times = [], [], [], []
load_before = os.getloadavg()
r = None
for _ in range(repeat):
    floors.append(read_floor())
    r = None  # one analysis alive at a time: the peak is that of a single call
    dt, r = run("auto")
    times.append(dt)
peak_node = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
floor, node = statistics.median(floors), statistics.median(times)
warm = statistics.median(times[1:]) if len(times) > 1 else times[0]
out = {"V": V, "L": L, "verifier": name, "drafts": V**L, "laws": laws, "route": r.route,
       "keep_freed_memory": allocator,
       "input_bytes": nbytes, "read_floor_s": floor, "read_floor_gb_s": nbytes / floor / 1e9,
       "seconds": node, "ratio_to_floor": node / floor, "times": times, "floors": floors,
       "first_call_seconds": times[0], "first_call_ratio": times[0] / floors[0],
       "warm_seconds": warm, "warm_ratio_to_floor": warm / statistics.median(floors[1:] or floors),
       "cpu_ratio_to_floor": statistics.median(cpu_times) / statistics.median(cpu_floors),
       "cpu_min_ratio": min(a / b for a, b in zip(cpu_times, cpu_floors)),
       "min_ratio": min(a / b for a, b in zip(times, floors)),
       "compiled_kernels": os.environ.get("SPECTHEORY_NUMBA", "") not in SWITCH_OFF,
       "load_average_before": load_before, "load_average_after": os.getloadavg(),
       "block_efficiency": float(r.block_efficiency), "tv": float(r.tv_to_target),
       "threads": torch.get_num_threads(), "peak_rss_gib_instance": rss_instance,
       "rss_gib_after_instance": rss_resident, "peak_rss_gib": peak_node}
if per_draft:
    pd = [run("per-draft") for _ in range(max(1, repeat // 2))]
    dt = statistics.median([x[0] for x in pd])
    r2 = pd[0][1]
    out.update({"per_draft_seconds": dt, "speedup_vs_per_draft": dt / node,
                "max_abs_diff_tau_pmf": max(abs(a - b) for a, b in zip(r.tau_pmf, r2.tau_pmf)),
                "abs_diff_tv": abs(float(r.tv_to_target) - float(r2.tv_to_target))})
    if laws:
        out["max_abs_diff_output_law"] = float(np.abs(r.output_law - r2.output_law).max())
if per_draft:  # the per-draft route's own arrays (and the node result kept for the diffs)
    out["peak_rss_gib_with_per_draft"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
if laws:  # one torch pass reading the depth-L target table and writing a V^(L+1) table
    r = None
    rows_L = pl[-1]
    scale = torch.rand(rows_L.shape[0], dtype=rows_L.dtype, generator=torch.Generator().manual_seed(0))
    law_buffer = torch.empty_like(rows_L)
    writes = []
    for _ in range(repeat + 1):
        t = time.perf_counter()
        torch.mul(rows_L, scale.unsqueeze(1), out=law_buffer)
        writes.append(time.perf_counter() - t)
    write = statistics.median(writes[1:])
    out.update({"law_write_floor_s": write, "law_write_floor_ratio": write / floor,
                "ratio_besides_law_write": (node - write) / floor})
print(json.dumps(out))
"""


def run_case(V: int, L: int, name: str = "block", mode: str = "full", repeat: int = 5,
             per_draft: bool = False, keep: bool = True, kernels: bool = True) -> dict:
    args = [sys.executable, "-c", CASE, str(V), str(L), name, mode, str(repeat),
            "per-draft" if per_draft else "-", "keep" if keep else "default"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    env.pop("SPECTHEORY_NUMBA", None)
    if not kernels:  # the torch route throughout
        env["SPECTHEORY_NUMBA"] = "0"
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def per_draft_loop(inst) -> tuple[float, float]:
    """Straightforward block verification, one draft at a time, Python floats. Returns
    (E[tau], seconds)."""
    V, L = inst.vocab_size, inst.block_length
    q_model, p_model = inst.draft, inst.target
    t = time.perf_counter()
    e_tau = 0.0
    for x in itertools.product(range(V), repeat=L):
        q_rows = [list(q_model.conditional(x[:i])) for i in range(L)]
        p_rows = [list(p_model.conditional(x[:i])) for i in range(L + 1)]
        px = 1.0
        for i in range(L):
            px *= q_rows[i][x[i]]
        w = [1.0]
        for i in range(L):
            r = p_rows[i][x[i]] / q_rows[i][x[i]] if q_rows[i][x[i]] > 0 else 1.0
            w.append(min(1.0, w[-1] * r))
        h = [1.0]
        for i in range(1, L):
            S = sum(max(w[i] * a - b, 0.0) for a, b in zip(p_rows[i], q_rows[i]))
            den = S + 1 - w[i]
            h.append(S / den if den > 0 else 1.0)
        h.append(w[L])
        for i in range(L + 1):
            pr = h[i]
            for j in range(i + 1, L + 1):
                pr *= 1 - h[j]
            e_tau += px * pr * i
    return e_tau, time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per case (medians)")
    ap.add_argument("--out", default="benchmarks/results/bench_exact.json")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from spectheory.engine.analysis import analyze
    from spectheory.inputs.random_instances import random_instance

    results = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                          f"{platform.python_implementation()} {platform.python_version()}, "
                          f"torch {torch.__version__}, 1 thread",
               "command": f"python benchmarks/bench_exact.py --repeat {args.repeat}",
               "load_average_before": os.getloadavg()}
    print("V = 8, L = 7 block: node route vs read floor and per-draft route ...", file=sys.stderr)
    results["headline"] = run_case(8, 7, "block", "full", args.repeat, per_draft=True)
    results["headline_token"] = run_case(8, 7, "token", "full", args.repeat, per_draft=True)
    results["headline_torch_route"] = run_case(8, 7, "block", "full", args.repeat, kernels=False)
    results["headline_token_torch_route"] = run_case(8, 7, "token", "full", args.repeat,
                                                     kernels=False)
    results["headline_default_allocator"] = run_case(8, 7, "block", "full", args.repeat, keep=False)
    results["headline_token_default_allocator"] = run_case(8, 7, "token", "full", args.repeat,
                                                           keep=False)
    print("memory cases ...", file=sys.stderr)
    results["memory"] = [run_case(16, 6, "block", "tv", max(1, args.repeat // 2), keep=False),
                         run_case(4, 12, "block", "full", max(1, args.repeat // 2), keep=False),
                         run_case(16, 6, "block", "tv", max(1, args.repeat // 2)),
                         run_case(4, 12, "block", "full", max(1, args.repeat // 2))]
    results["sweep"] = [run_case(V, L, "block", "full", args.repeat)
                        for V, L in [(2, 16), (4, 9), (16, 5)]]
    inst = random_instance(4, 8, 0)
    e_loop, t_loop = per_draft_loop(inst)
    t = time.perf_counter()
    r = analyze(inst, "block")
    t_engine = time.perf_counter() - t
    assert abs(e_loop - float(r.expected_accepted)) < 1e-12, (e_loop, r.expected_accepted)
    results["vs_loop"] = {"V": 4, "L": 8, "drafts": 4**8, "loop_seconds": t_loop,
                          "engine_seconds": t_engine, "speedup": t_loop / t_engine,
                          "note": "engine also computes the full output law and TV; the loop "
                                  "computes E[tau] only"}
    results["load_average_after"] = os.getloadavg()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=1)
    for key in ("headline", "headline_token"):
        h = results[key]
        print(f"V=8 L=7 {h['verifier']}: node route {h['seconds'] * 1e3:.0f} ms = "
              f"{h['ratio_to_floor']:.1f}x the read floor (least {h['min_ratio']:.1f}x; CPU "
              f"time {h['cpu_ratio_to_floor']:.1f}x, least {h['cpu_min_ratio']:.1f}x; first call "
              f"{h['first_call_ratio']:.1f}x, later calls {h['warm_ratio_to_floor']:.1f}x) "
              f"({h['read_floor_s'] * 1e3:.1f} ms, "
              f"{h['read_floor_gb_s']:.1f} GB/s); per-draft route {h['per_draft_seconds']:.2f} s "
              f"({h['speedup_vs_per_draft']:.0f}x slower); |diff| tau pmf "
              f"{h['max_abs_diff_tau_pmf']:.1e}, output law {h['max_abs_diff_output_law']:.1e}; "
              f"peak {h['peak_rss_gib']:.2f} GiB (inputs resident {h['rss_gib_after_instance']:.2f}"
              f" GiB; with the per-draft route {h['peak_rss_gib_with_per_draft']:.2f} GiB); "
              f"writing the law alone {h['law_write_floor_ratio']:.1f}x the read floor, the rest "
              f"{h['ratio_besides_law_write']:.1f}x")
    print(f"{'V':>3} {'L':>3} {'laws':>5} {'keep':>5} {'s':>8} {'x floor':>8} {'GiB':>6} "
          f"{'inputs':>6}")
    for c in results["memory"] + results["sweep"]:
        print(f"{c['V']:>3} {c['L']:>3} {str(c['laws']):>5} {str(c['keep_freed_memory']):>5} "
              f"{c['seconds']:>8.3f} {c['ratio_to_floor']:>8.1f} {c['peak_rss_gib']:>6.2f} "
              f"{c['rss_gib_after_instance']:>6.2f}")
    for key in ("headline_torch_route", "headline_token_torch_route"):
        h = results[key]
        print(f"V=8 L=7 {h['verifier']}, torch route (SPECTHEORY_NUMBA=0): "
              f"{h['seconds'] * 1e3:.0f} ms = {h['ratio_to_floor']:.1f}x the read floor "
              f"(CPU time {h['cpu_ratio_to_floor']:.1f}x)")
    for key in ("headline_default_allocator", "headline_token_default_allocator"):
        h = results[key]
        print(f"V=8 L=7 {h['verifier']}, default allocator: {h['seconds'] * 1e3:.0f} ms = "
              f"{h['ratio_to_floor']:.1f}x the read floor (first call "
              f"{h['first_call_ratio']:.1f}x, later calls {h['warm_ratio_to_floor']:.1f}x)")
    print(f"load average {results['load_average_before']} before, "
          f"{results['load_average_after']} after")
    v = results["vs_loop"]
    print(f"per-draft Python loop, V=4 L=8: {v['loop_seconds']:.2f} s vs engine "
          f"{v['engine_seconds']:.3f} s: {v['speedup']:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
