"""Verifier laws at the real-model shape, as ratios to reading p and q once.

B = 64 drafted blocks, L = 8, Qwen vocabulary V = 151,936, float32, CPU, one torch thread. Rows
are softmax(3 N(0, 1)) logits (the root row shared by all K paths, as in a real draft tree).

* token and block verification: the full law (stop table and every correction row), and the
  stop-probabilities-only route [`stop_probabilities`][spectheory.engine.nodes.stop_probabilities] (what a
  paired E[tau] comparison needs);
* GBV with K = 4 paths (selection by O(V) rank counting, one sort of packed keys per selected
  row, block verification against q^G).

The floor is the time to read p and q once (``Tensor.sum`` over each), measured in the same
process right before every timed call; each ratio is the median over ``--repeat`` runs of
time / floor. Usage:

```bash
python benchmarks/bench_real_laws.py [--repeat 5] [--out benchmarks/results/real_laws.json]
```
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch


def rows(gen, *shape):
    return torch.softmax(torch.randn(*shape, generator=gen) * 3, -1)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    del out
    return dt


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
    from spectheory.verifiers import block_verification, gbv, token_verification

    gen = torch.Generator().manual_seed(0)
    Bn, L, V, K = a.B, a.L, a.V, a.K
    p1, q1 = rows(gen, Bn, L + 1, V), rows(gen, Bn, L, V)
    x1 = torch.multinomial(q1.reshape(-1, V), 1, generator=gen).view(Bn, L)

    def floor1():
        return float(p1.sum()) + float(q1.sum())

    single = {"token": lambda: token_verification(x1, q1, p1),
              "block": lambda: block_verification(x1, q1, p1),
              "token stop only": lambda: stop_probabilities("token", x1, q1, p1),
              "block stop only": lambda: stop_probabilities("block", x1, q1, p1)}
    res = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.processor() or ''}"
                      f" torch {torch.__version__}, 1 thread",
           "command": "python benchmarks/bench_real_laws.py " + " ".join(sys.argv[1:]),
           "shape": {"B": Bn, "L": L, "V": V, "dtype": "float32"}, "cases": {}}
    ratios = {k: [] for k in single}
    times = {k: [] for k in single}
    floors = []
    for _ in range(a.repeat):
        for name, fn in single.items():
            f = timed(floor1)
            t = timed(fn)
            floors.append(f)
            ratios[name].append(t / f)
            times[name].append(t)
    for name in single:
        res["cases"][name] = {"median_seconds": statistics.median(times[name]),
                              "median_ratio_to_floor": statistics.median(ratios[name]),
                              "floor_median_seconds": statistics.median(floors),
                              "input_bytes": (p1.numel() + q1.numel()) * 4}
    del p1, q1
    pk = rows(gen, Bn, K, L + 1, V)
    qk = rows(gen, Bn, K, L, V)
    pk[:, :, 0] = pk[:, :1, 0]
    qk[:, :, 0] = qk[:, :1, 0]
    xk = torch.multinomial(qk.reshape(-1, V), 1, generator=gen).view(Bn, K, L)

    def floor_k():
        return float(pk.sum()) + float(qk.sum())

    gt, gr, gf = [], [], []
    for _ in range(max(1, a.repeat // 2 + 1)):
        f = timed(floor_k)
        t = timed(lambda: gbv(xk, qk, pk))
        gt.append(t)
        gr.append(t / f)
        gf.append(f)
    res["cases"][f"gbv K={K}"] = {"median_seconds": statistics.median(gt),
                                  "median_ratio_to_floor": statistics.median(gr),
                                  "floor_median_seconds": statistics.median(gf),
                                  "input_bytes": (pk.numel() + qk.numel()) * 4}
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    for name, c in res["cases"].items():
        print(f"{name:18s} {c['median_seconds'] * 1e3:8.0f} ms  {c['median_ratio_to_floor']:5.1f}x "
              f"the read floor ({c['floor_median_seconds'] * 1e3:.0f} ms for "
              f"{c['input_bytes'] / 1e9:.2f} GB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
