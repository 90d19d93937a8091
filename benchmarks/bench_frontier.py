"""Sizes and times of the lossy frontier LP (`spectheory.lp.frontier`).

For each (V, L, K): a random prefix-dependent instance (`spectheory.random_instance`, alpha = 0.5,
seed 0, rows rounded to 1/12), the TV frontier at delta = 1/20 in float (HiGHS, float certificate)
and exactly (rational certificate, the smaller sizes), and the KL frontier at delta = 0.05 (cvxpy
with the tangent-cut gap), each with the relaxed rules' lower bounds off (``rules=()``) so the
time is the solve and its certificate. One torch thread. Usage:

```bash
python benchmarks/bench_frontier.py [--out benchmarks/results/frontier.json]
```
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from fractions import Fraction
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _machine import cpu_name  # noqa: E402

SIZES = [(3, 2, 1, True), (3, 3, 1, True), (4, 3, 1, False), (2, 6, 1, False), (3, 2, 2, True),
         (2, 3, 3, False), (4, 4, 1, False), (5, 4, 1, False)]


def main(argv=None) -> None:
    import spectheory as st
    from spectheory.lp.frontier import frontier_lp

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for V, L, K, exact in SIZES:
        inst = st.random_instance(V, L, 0, alpha=0.5, denominator=12)
        row = {"V": V, "L": L, "K": K}
        t = time.perf_counter()
        r = frontier_lp(inst, tv=0.05, paths=K, rules=())
        row.update(tv_float=float(r.optimum), tv_float_s=time.perf_counter() - t,
                   variables=r.variables, constraints=r.constraints)
        if exact:
            t = time.perf_counter()
            r = frontier_lp(inst, tv=Fraction(1, 20), paths=K, exact=True, rules=())
            row.update(tv_exact=str(r.optimum), tv_exact_s=time.perf_counter() - t)
        t = time.perf_counter()
        r = frontier_lp(inst, kl=0.05, paths=K, rules=(), pinsker=False)
        row.update(kl=float(r.optimum), kl_s=time.perf_counter() - t,
                   kl_gap=r.details["duality_gap"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = {"cpu": cpu_name(), "torch_threads": 1, "rows": rows}
    if args.out is not None:
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
