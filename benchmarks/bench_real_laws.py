"""Verifier laws at the real-model shape, as ratios to reading p and q once.

B = 64 drafted blocks, L = 8, Qwen vocabulary V = 151,936, float32, CPU, one torch thread. Rows
are softmax(3 N(0, 1)) logits (the root row shared by all K paths, as in a real draft tree).

* token and block verification: the full law (stop table and every correction row), and the
  stop-probabilities-only route [`stop_probabilities`][spectheory.engine.nodes.stop_probabilities] (what a
  paired E[tau] comparison needs);
* GBV with K = 4 i.i.d. paths (selection by O(V) rank counting at the contested nodes, one sort of
  packed keys per q^G row unless x below(a) is under half an ulp of A, block verification against
  q^G);
* SpecInfer with K = 4 i.i.d. paths (recursive rejection sampling on the token tree; the residual
  chain built up to each node's number of candidates).

The multi-path laws are called as the engine and the real-model loop call them,
``get_verifier(name, multi_path=True).law(drafts, q, p)``. The floor is the time to read the p and
q of the case once (``Tensor.sum`` over each), measured in the same process right before every
timed call; each ratio is the median over ``--repeat`` runs of time / floor (the single-path
cases interleaved within a run, then the K-path ones). Usage:

```bash
python benchmarks/bench_real_laws.py [--repeat 5] [--out benchmarks/results/real_laws.json]
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


def timed(fn):
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    del out
    return dt


def gbv_rows_sorted(drafts, q, p) -> list[int]:
    """[q^G rows that needed a sort, all q^G rows] in one GBV law (an untimed, counted call)."""
    import importlib

    gbv_module = importlib.import_module("spectheory.verifiers.gbv")  # the module, not gbv()
    screen = getattr(gbv_module, "_negligible_below", None)
    if screen is None:  # an implementation that sorts every row
        return [None, None]
    counts = [0, 0]

    def counted(*args):
        skip = screen(*args)
        counts[0] += not skip
        counts[1] += 1
        return skip

    gbv_module._negligible_below = counted
    try:
        gbv_module.gbv(drafts, q, p)
    finally:
        gbv_module._negligible_below = screen
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=64)
    ap.add_argument("--L", type=int, default=8)
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--K", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/real_laws.json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    from spectheory.engine.nodes import stop_probabilities
    from spectheory.registry import get_verifier
    from spectheory.verifiers import block_verification, token_verification

    Bn, L, V, K = a.B, a.L, a.V, a.K
    ratios, times, floors, nbytes = {}, {}, {}, {}

    def measure(cases, floor, input_bytes):
        """The cases of one input shape, interleaved within each repeat."""
        for name in cases:
            ratios[name], times[name], floors[name] = [], [], []
            nbytes[name] = input_bytes
        for _ in range(a.repeat):
            for name, fn in cases.items():
                f = timed(floor)
                t = timed(fn)
                floors[name].append(f)
                ratios[name].append(t / f)
                times[name].append(t)

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
        return gbv_rows_sorted(xk, qk, pk)

    gen = torch.Generator().manual_seed(0)
    single_path(gen)  # its p and q are freed before the K-path ones are drawn
    sorted_rows, all_rows = k_paths(gen)
    res = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, {cpu_name()}, "
                      f"torch {torch.__version__}, numpy {np.__version__}, 1 thread",
           "command": "python benchmarks/bench_real_laws.py " + " ".join(sys.argv[1:]),
           "date": datetime.date.today().isoformat(),
           "shape": {"B": Bn, "L": L, "V": V, "K": K, "dtype": "float32"}, "cases": {}}
    for name in ratios:
        res["cases"][name] = {"median_seconds": statistics.median(times[name]),
                              "median_ratio_to_floor": statistics.median(ratios[name]),
                              "ratios": ratios[name],
                              "floor_median_seconds": statistics.median(floors[name]),
                              "input_bytes": nbytes[name]}
    res["cases"][f"gbv K={K}"]["q^G rows sorted"] = f"{sorted_rows} of {all_rows}"
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    for name, c in res["cases"].items():
        print(f"{name:18s} {c['median_seconds'] * 1e3:8.0f} ms  {c['median_ratio_to_floor']:5.1f}x "
              f"the read floor ({c['floor_median_seconds'] * 1e3:.0f} ms for "
              f"{c['input_bytes'] / 1e9:.2f} GB)")
    print(f"gbv: q^G rows sorted {sorted_rows} of {all_rows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
