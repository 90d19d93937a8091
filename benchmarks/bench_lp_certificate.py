"""Optimality of block verification certified at scale without an LP solver.

For each size, a random prefix-dependent instance (Dirichlet(1) rows, built row block by row block)
and [`certify_node_budget`][spectheory.lp.certificate.certify_node_budget]: the closed-form primal
and the backward dual of the node-budget LP (sum_{j=1}^{L+1} V^j variables), every primal and dual
row checked in float64 (tolerance 1e-12) and the objectives compared. Each size runs in a fresh
subprocess: seconds of the certificate (instance building excluded, reported apart) and the peak
resident memory of the process (instance included). Target: within 60 s and 8 GiB. Usage:

```bash
python benchmarks/bench_lp_certificate.py [--sizes 8x8,16x6] [--out ...json]
```
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys

CASE = r"""
import json, resource, sys, time
import numpy as np, torch
torch.set_num_threads(1)
from spectheory.inputs.instances import Instance
from spectheory.lp.certificate import certify_node_budget
from spectheory.inputs.random_instances import dirichlet_model
V, L = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)


t = time.perf_counter()
inst = Instance(V, L, dirichlet_model(rng, V, L, 1.0), dirichlet_model(rng, V, L - 1, 1.0))
build = time.perf_counter() - t
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
c = certify_node_budget(inst)
out = c.to_json()
out.update({"instance_seconds": build, "peak_rss_gib_instance": rss0,
            "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20})
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4x10,8x7,8x8,16x6")
    ap.add_argument("--out", default="benchmarks/results/lp_certificate.json")
    a = ap.parse_args()
    res = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                      f"{platform.python_implementation()} {platform.python_version()}",
           "command": "python benchmarks/bench_lp_certificate.py --sizes " + a.sizes,
           "cases": []}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    for size in a.sizes.split(","):
        V, L = size.split("x")
        p = subprocess.run([sys.executable, "-c", CASE, V, L], capture_output=True, text=True,
                           env=env)
        if p.returncode:
            print(f"V={V} L={L}: failed: {p.stderr.strip().splitlines()[-1:]}", flush=True)
            res["cases"].append({"V": int(V), "L": int(L), "failed": p.stderr[-500:]})
            continue
        c = json.loads(p.stdout.strip().splitlines()[-1])
        res["cases"].append(c)
        print(f"V={V} L={L}: {c['variables']:,} variables, certified={c['certified']}, "
              f"{c['seconds']:.1f} s (instance {c['instance_seconds']:.1f} s), peak "
              f"{c['peak_rss_gib']:.2f} GiB; E[tau+1] = {float(c['primal_objective']):.12f}, "
              f"gap {float(c['objective_gap']):.1e}, max primal residual "
              f"{float(c['max_equality_residual']):.1e}, min dual slack "
              f"{float(c['min_dual_slack']):.1e}", flush=True)
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
