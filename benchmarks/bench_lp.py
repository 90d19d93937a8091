"""Benchmarks of the LP toolkit. Each case runs in its own subprocess, so the reported
peak memory (max RSS) is that case's alone, and a case over the time limit is killed.

    .venv/bin/python benchmarks/bench_lp.py            # full run (a few CPU minutes)
    .venv/bin/python benchmarks/bench_lp.py --quick    # small sizes only

Cases:
* node-budget LP (single path), reduced form (variables M(s), 1 <= |s| <= L) and full form
  (variables D(s), 1 <= |s| <= L+1), each through HiGHS directly and through cvxpy, on random
  Dirichlet table instances; the optimum is checked against the closed-form greedy optimum;
* direct K-path LP, float (HiGHS) and exact (rounded HiGHS primal/dual verified as a rational
  certificate);
* compact K-path relaxation (cutting planes with exact separation).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASE_CODE = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from spectheory.inputs.random_instances import random_instance
from spectheory import lp
kind, V, L, K, solver, form = {args!r}
inst = random_instance(V, L, 0)
t = time.perf_counter()
extra = {{}}
if kind == "node-budget":
    r = lp.node_budget_lp(inst, solver=solver, form=form)
    ref = lp.node_budget_lp(inst, solver="closed-form").optimum
    extra["error_vs_closed_form"] = abs(r.optimum - ref)
elif kind == "direct":
    if solver == "exact":
        from spectheory.inputs.random_instances import random_instance as ri
        inst = ri(V, L, 0, denominator=12)
        r = lp.direct_lp(inst, K, exact=True)
    else:
        r = lp.direct_lp(inst, K, solver=solver)
    extra["outcomes"] = r.details["outcomes"]
    extra["ordered_outcomes"] = r.details["ordered_outcomes"]
elif kind == "multipath":
    r = lp.multipath_lp(inst, K, solver=solver)
    extra.update(r.details)
out = r.to_json()
out["optimum"] = str(out["optimum"])
out.update(extra)
out["wall_s"] = time.perf_counter() - t
out["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def run_case(kind, V, L, K=1, solver="highs", form="reduced", timeout=120):
    code = CASE_CODE.format(root=ROOT, args=(kind, V, L, K, solver, form))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"kind": kind, "V": V, "L": L, "K": K, "solver": solver, "form": form,
                "result": f"timeout > {timeout} s"}
    base = {"kind": kind, "V": V, "L": L, "K": K, "solver": solver, "form": form,
            "process_s": round(time.perf_counter() - t0, 2)}
    if proc.returncode != 0:
        base["result"] = "error: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
        return base
    base.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return base


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--timeout", type=float, default=100)
    ap.add_argument("--only", default=None, help="node-budget, direct or multipath")
    args = ap.parse_args()
    cases = []
    if args.quick:
        cases += [("node-budget", 4, 6, 1, s, f) for f in ("reduced", "full")
                  for s in ("highs", "cvxpy")]
        cases += [("direct", 3, 2, 2, "highs", "-"), ("direct", 3, 2, 2, "exact", "-"),
                  ("multipath", 4, 4, 2, "highs", "-")]
    else:
        cases += [("node-budget", 4, L, 1, s, "reduced") for L in (9, 10)
                  for s in ("highs", "cvxpy")]
        cases += [("node-budget", 4, 7, 1, s, "full") for s in ("highs", "cvxpy")]
        cases += [("node-budget", 4, 8, 1, "highs", "full")]
        cases += [("direct", 3, 3, 2, "highs", "-"), ("direct", 3, 3, 2, "exact", "-"),
                  ("direct", 3, 3, 3, "highs", "-"), ("direct", 2, 4, 3, "highs", "-"),
                  ("direct", 4, 2, 3, "highs", "-")]
        cases += [("multipath", 4, 5, 3, "highs", "-"), ("multipath", 3, 8, 2, "highs", "-")]
    if args.only:
        cases = [c for c in cases if c[0] == args.only]
    print(f"# machine: {os.cpu_count()} CPUs visible, python {sys.version.split()[0]}",
          file=sys.stderr)
    rows = []
    for kind, V, L, K, solver, form in cases:
        res = run_case(kind, V, L, K, solver, form, args.timeout)
        rows.append(res)
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
