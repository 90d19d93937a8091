"""Benchmark of the exact engine.

* Headline: block verification exact analysis with V = 8, L = 7 (2,097,152 drafts, table models),
  target <= 10 s and <= 4 GiB on a 2-core machine.
* Sweep over (V, L): drafts per second.
* Ratio against a straightforward per-draft Python loop (the definitions evaluated draft by draft
  with Python floats) on a small case.

Each case runs in a fresh subprocess so that its peak resident memory is its own. Usage::

    python benchmarks/bench_exact.py [--quick] [--out benchmarks/results/bench_exact.json]
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
import json, resource, sys, time, torch
from spectheory.random_instances import random_instance
from spectheory.exact import analyze
from spectheory.verifiers import SINGLE_PATH
V, L, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
inst = random_instance(V, L, 0)
t = time.perf_counter()
r = analyze(inst, SINGLE_PATH[name], name)
dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"V": V, "L": L, "verifier": name, "drafts": V**L, "seconds": dt,
                  "drafts_per_s": V**L / dt, "peak_rss_gib": rss,
                  "block_efficiency": float(r.block_efficiency), "tv": float(r.tv_to_target),
                  "threads": torch.get_num_threads()}))
"""


def run_case(V: int, L: int, name: str = "block") -> dict:
    out = subprocess.run([sys.executable, "-c", CASE, str(V), str(L), name], check=True,
                         capture_output=True, text=True)
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
    ap.add_argument("--quick", action="store_true", help="headline case and a short sweep only")
    ap.add_argument("--out", default="benchmarks/results/bench_exact.json")
    args = ap.parse_args()
    from tqdm import tqdm

    from spectheory.exact import analyze
    from spectheory.random_instances import random_instance
    from spectheory.verifiers import block_verification

    results = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                          f"{platform.python_implementation()} {platform.python_version()}",
               "command": "python benchmarks/bench_exact.py" + (" --quick" if args.quick else "")}
    print("headline: block verification, V = 8, L = 7 ...", file=sys.stderr)
    results["headline"] = run_case(8, 7, "block")
    results["headline_token"] = run_case(8, 7, "token")
    sweep = [(2, 10), (2, 16), (4, 6), (4, 9), (8, 5), (16, 4), (16, 5)]
    if args.quick:
        sweep = [(2, 10), (4, 6), (8, 5)]
    results["sweep"] = [run_case(V, L) for V, L in tqdm(sweep, desc="sweep", file=sys.stderr)]
    inst = random_instance(4, 8, 0)
    e_loop, t_loop = per_draft_loop(inst)
    t = time.perf_counter()
    r = analyze(inst, block_verification)
    t_engine = time.perf_counter() - t
    assert abs(e_loop - float(r.expected_accepted)) < 1e-12, (e_loop, r.expected_accepted)
    results["vs_loop"] = {"V": 4, "L": 8, "drafts": 4**8, "loop_seconds": t_loop,
                          "engine_seconds": t_engine, "speedup": t_loop / t_engine,
                          "note": "engine also computes the full output law and TV; the loop "
                                  "computes E[tau] only"}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=1)
    h = results["headline"]
    print(f"V=8 L=7 block: {h['seconds']:.2f} s, {h['drafts_per_s']:.3g} drafts/s, "
          f"peak {h['peak_rss_gib']:.2f} GiB (token: {results['headline_token']['seconds']:.2f} s)")
    print(f"{'V':>3} {'L':>3} {'drafts':>10} {'s':>7} {'drafts/s':>10} {'GiB':>6}")
    for c in results["sweep"]:
        print(f"{c['V']:>3} {c['L']:>3} {c['drafts']:>10} {c['seconds']:>7.3f} "
              f"{c['drafts_per_s']:>10.3g} {c['peak_rss_gib']:>6.2f}")
    v = results["vs_loop"]
    print(f"per-draft Python loop, V=4 L=8: {v['loop_seconds']:.2f} s vs engine "
          f"{v['engine_seconds']:.3f} s: {v['speedup']:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
