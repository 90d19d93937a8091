"""Where GBV wins and where it loses against block verification, as a sweep.

Instances: vocabulary V, a target with i.i.d. standard-normal logits at every prefix (softmax rows,
context-dependent tables up to depth L) and a draft whose logits are the target's plus Gaussian
noise of scale sigma (larger sigma = worse draft); instance ``seed`` draws its own logits, so the
same instance serves every K. For every instance, K in 1..4 and L in 1..6 the sweep computes
exactly (float64) E[tau+1] of block verification (one path) and of GBV with K i.i.d. paths (the
exact engine's analytic route: block verification against the skewed draft q^G, checked against
the joint enumeration in the tests), and the report gives per (K, L, sigma) the fraction of
instances where GBV beats block verification (by more than 1e-12), where it loses, and the mean
relative gain E_GBV / E_block - 1.

The grid runs on `spectheory.sweep` (one cached job per instance and verifier; the table, with
a reproducing command per row, in ``OUT/results.csv``), locally or on Ray:

```
.venv/bin/python benchmarks/gbv_sweep.py                      # docs/results.md (V=4, 20 seeds)
.venv/bin/python benchmarks/gbv_sweep.py --instances 5        # quicker
.venv/bin/python benchmarks/gbv_sweep.py --executor ray       # the same table on Ray
```
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict

import numpy as np

from spectheory.inputs.instances import Instance
from spectheory.inputs.models import TableModel
from spectheory.sweep import load_config, run_sweep


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def noisy(vocab_size: int, block_length: int, seed: int, sigma: float) -> Instance:
    """Target: N(0,1) logits at every prefix up to depth L; draft: the same plus N(0, sigma^2)
    (the sweep's instance family ``gbv_sweep:noisy``)."""
    V, L = vocab_size, block_length
    rng = np.random.default_rng([seed, V, L])
    tgt, drf = [], []
    for d in range(L + 1):
        z = rng.standard_normal((V**d, V))
        tgt.append(_softmax(z))
        if d < L:
            drf.append(_softmax(z + sigma * rng.standard_normal((V**d, V))))
    return Instance(V, L, TableModel(V, tuple(tgt)), TableModel(V, tuple(drf)))


def config(V: int, instances: int, sigmas, max_paths: int, max_block: int) -> str:
    return f"""
[sweep]
name = "gbv-vs-block"

[[instances]]
family = "gbv_sweep:noisy"
vocab = {V}
block = {list(range(1, max_block + 1))}
seeds = {list(range(instances))}
sigma = {[float(s) for s in sigmas]}

[[verifiers]]
name = "block"

[[verifiers]]
name = "gbv"
paths = {list(range(1, max_paths + 1))}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=4)
    ap.add_argument("--instances", type=int, default=20, help="instances (seeds) per (L, sigma)")
    ap.add_argument("--sigmas", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--max-paths", type=int, default=4)
    ap.add_argument("--max-block", type=int, default=6)
    ap.add_argument("--out", default="out/gbv_sweep",
                    help="the sweep's folder (table and cache)")
    ap.add_argument("--executor", choices=("local", "ray"), default="local")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    t0 = time.time()
    cfg = load_config(config(args.vocab, args.instances, args.sigmas, args.max_paths,
                             args.max_block))
    rows = run_sweep(cfg, args.out, executor=args.executor, workers=args.workers,
                     progress=sys.stderr.isatty(), log=lambda s: print(s, file=sys.stderr))
    bad = [r for r in rows if r["status"] != "ok"]
    if bad:
        sys.exit(f"{len(bad)} jobs failed, e.g. {bad[0]['error']} ({bad[0]['command']})")
    block = {}
    for r in rows:
        if r["name"] == "block":
            block[(r["block"], r["seed"], r["knobs"])] = r["block_efficiency"]
    gains = defaultdict(list)  # (K, L, sigma) -> relative gains
    for r in rows:
        if r["name"] == "gbv":
            sigma = json.loads(r["knobs"])["sigma"]
            blk = block[(r["block"], r["seed"], r["knobs"])]
            gains[(r["paths"], r["block"], sigma)].append(r["block_efficiency"] / blk - 1)
    Ks, Ls = range(1, args.max_paths + 1), range(1, args.max_block + 1)
    print(f"GBV vs block verification: V = {args.vocab}, {args.instances} instances per "
          f"(L, sigma), target logits N(0,1), draft logits + N(0, sigma^2); exact float64; "
          f"{len(rows)} jobs, {time.time() - t0:.0f} s ({args.executor})")
    print("cell: % instances GBV wins / % it loses / mean gain of E[tau+1] (%)\n")
    print("| K | L | " + " | ".join(f"sigma = {s:g}" for s in args.sigmas) + " |")
    print("|" + "---|" * (2 + len(args.sigmas)))
    for K in Ks:
        for L in Ls:
            cells = []
            for s in args.sigmas:
                g = np.array(gains[(K, L, float(s))])
                cells.append(f"{100 * np.mean(g > 1e-12):.0f} / {100 * np.mean(g < -1e-12):.0f}"
                             f" / {100 * g.mean():+.2f}")
            print(f"| {K} | {L} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
