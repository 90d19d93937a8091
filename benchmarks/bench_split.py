"""The exact engine split into subtree tasks: wall time, per-task cost and memory against one
process, locally and on a local Ray cluster.

For each (V, L, d): the single-process per-node route (``laws=False``: tau pmf and TV) in a child
process (its time and peak RSS), then the split analysis with the ``local`` executor (worker
processes) and with ``ray`` (a 2-CPU local Ray cluster), each in a child process; the tau pmf
and TV must equal the single-process ones to 1e-12 (float64) or the benchmark stops. Per-task
cost is measured by running one subtree's two phases alone.

```
.venv/bin/python benchmarks/bench_split.py                    # benchmarks/results/split.json
.venv/bin/python benchmarks/bench_split.py --sizes 8,5,1 --no-ray
```
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import date
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
import torch
torch.set_num_threads(1)
import spectheory as st
from spectheory.inputs.random_instances import random_instance
V, L, d, mode, workers = json.loads(sys.argv[1])
inst = random_instance(V, L, 0)
if mode == "ray":
    import ray
    store = max(80 * 2**20, 2 * 8 * (V ** (L + 1) + V ** L))  # the tables, with room
    ray.init(num_cpus=workers, object_store_memory=store, include_dashboard=False,
             log_to_driver=False, configure_logging=False)
t = time.perf_counter()
if mode == "one":
    res = st.analyze(inst, "block", laws=False)
elif mode == "task":
    from spectheory import split as S
    from spectheory.registry import get_verifier
    from spectheory.engine.seqtree import levels
    spec = get_verifier("block")
    q, p = levels(inst.draft, 0, d, False), levels(inst.target, 0, d, False)
    starts = S._upper(spec, q, p, V, d)[0]
    payload = (inst, spec, d, False, starts)
    t = time.perf_counter()
    S._phase1(payload, 0)
    S._phase2(payload, 0, 0.0, float(p[0].new_ones(1)[0]), False)
    print(json.dumps({"seconds": time.perf_counter() - t,
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    sys.exit(0)
else:
    res = st.analyze(inst, "block", laws=False, executor=mode, split_depth=d, workers=workers)
sec = time.perf_counter() - t
print(json.dumps({"seconds": sec, "tau": [float(v) for v in res.tau_pmf],
                  "tv": float(res.tv_to_target),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(V, L, d, mode, workers):
    # the instance's tables (V^(L+1) target entries) may exceed the default enumeration limit;
    # the benchmark raises it for its own children only
    env = {**os.environ, "SPECTHEORY_MAX_SEQUENCES": str(max(2**26, 2 * V ** (L + 1)))}
    res = subprocess.run([sys.executable, "-c", CHILD, json.dumps([V, L, d, mode, workers])],
                         capture_output=True, text=True, timeout=3600, env=env)
    if res.returncode != 0:
        sys.exit(f"{mode} V={V} L={L} d={d} failed: {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,5,1;16,6,1;16,6,2",
                    help="V,L,d triples separated by ';'")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/split.json")
    args = ap.parse_args()
    rows = []
    for triple in args.sizes.split(";"):
        V, L, d = (int(x) for x in triple.split(","))
        one = child(V, L, d, "one", 1)
        task = child(V, L, d, "task", 1)
        row = {"V": V, "L": L, "split_depth": d, "tasks": V ** d,
               "sequences": V ** (L + 1), "one_process": one, "one_task": task}
        for mode in ("local",) + (() if args.no_ray else ("ray",)):
            got = child(V, L, d, mode, args.workers)
            if max(abs(a - b) for a, b in zip(got["tau"], one["tau"])) > 1e-12 or \
                    abs(got["tv"] - one["tv"]) > 1e-12:
                sys.exit(f"{mode} V={V} L={L} d={d}: the split law differs from one process")
            row[mode] = got
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    meta = {"command": " ".join([sys.executable.split("/")[-1]] + sys.argv),
            "date": date.today().isoformat(), "machine": platform.machine(),
            "cores": os.cpu_count(), "python": platform.python_version(),
            "workers": args.workers, "threads": 1,
            "note": "block verification, random prefix-dependent instance (seed 0), float64, "
                    "laws=False; seconds are wall time inside each child process (Ray: after "
                    "ray.init, so including the workers' first imports); SPECTHEORY_MAX_SEQUENCES "
                    "raised to 2 V^(L+1) in the children"}
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
