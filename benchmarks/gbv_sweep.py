"""Where GBV wins and where it loses against block verification.

Instances: vocabulary V, a target with i.i.d. standard-normal logits at every prefix (softmax
rows, context-dependent tables up to depth L) and a draft whose logits are the target's plus
Gaussian noise of scale sigma (larger sigma = worse draft). For every instance, K in 1..4 and L
in 1..6 we compute exactly (float64) E[tau+1] of block verification (one path) and of GBV with K
i.i.d. paths (via the skewed draft q^G, :func:`spectheory.multipath.analyze_gbv_fast`, which the
tests check against the joint enumeration), and report per (K, L, sigma) the fraction of instances
where GBV beats block verification (by more than 1e-12), where it loses, and the mean relative
gain E_GBV / E_block - 1.

    .venv/bin/python benchmarks/gbv_sweep.py                 # docs/results.md (V=4, 20 instances)
    .venv/bin/python benchmarks/gbv_sweep.py --instances 5   # quicker
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from spectheory.exact import analyze
from spectheory.instances import Instance
from spectheory.models import TableModel
from spectheory.multipath import analyze_gbv_fast
from spectheory.verifiers import block_verification


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def noisy_instance(rng: np.random.Generator, V: int, L: int, sigma: float) -> Instance:
    """Target: N(0,1) logits at every prefix up to depth L; draft: the same plus N(0, sigma^2)."""
    tgt, drf = [], []
    for d in range(L + 1):
        z = rng.standard_normal((V**d, V))
        tgt.append(softmax(z))
        if d < L:
            drf.append(softmax(z + sigma * rng.standard_normal((V**d, V))))
    return Instance(V, L, TableModel(V, tuple(tgt)), TableModel(V, tuple(drf)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=4)
    ap.add_argument("--instances", type=int, default=20, help="instances per (L, sigma)")
    ap.add_argument("--sigmas", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--max-paths", type=int, default=4)
    ap.add_argument("--max-block", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from tqdm import tqdm

    V, Ks, Ls = args.vocab, range(1, args.max_paths + 1), range(1, args.max_block + 1)
    rng = np.random.default_rng(args.seed)
    t0 = time.time()
    gains = {}  # (K, L, sigma) -> list of relative gains
    bar = tqdm(total=len(Ls) * len(args.sigmas) * args.instances, desc="gbv sweep",
               unit="inst", file=sys.stderr)
    for L in Ls:
        for s in args.sigmas:
            for _ in range(args.instances):
                inst = noisy_instance(rng, V, L, s)
                blk = float(analyze(inst, block_verification).block_efficiency)
                for K in Ks:
                    g = float(analyze_gbv_fast(inst, K).block_efficiency)
                    gains.setdefault((K, L, s), []).append(g / blk - 1)
                bar.update(1)
    bar.close()
    print(f"GBV vs block verification: V = {V}, {args.instances} instances per (L, sigma), "
          f"target logits N(0,1), draft logits + N(0, sigma^2); exact float64; "
          f"{time.time() - t0:.0f} s")
    print("cell: % instances GBV wins / % it loses / mean gain of E[tau+1] (%)\n")
    head = "| K | L | " + " | ".join(f"sigma = {s:g}" for s in args.sigmas) + " |"
    print(head)
    print("|" + "---|" * (2 + len(args.sigmas)))
    for K in Ks:
        for L in Ls:
            cells = []
            for s in args.sigmas:
                g = np.array(gains[(K, L, s)])
                cells.append(f"{100 * np.mean(g > 1e-12):.0f} / {100 * np.mean(g < -1e-12):.0f}"
                             f" / {100 * g.mean():+.2f}")
            print(f"| {K} | {L} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
