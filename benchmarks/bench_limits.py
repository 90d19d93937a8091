"""Throughput of the exact engine, for the time estimates of the size guard.

``python benchmarks/bench_limits.py [--out benchmarks/results/bench_limits.json]`` times
[`analyze`][spectheory.engine.analysis.analyze] on random table instances (torch with one thread) and reports
sequences per second (output-law leaves V^(L+1), one path, float64 and exact rationals) and joint
draft outcomes per second (K paths). The constants in [`spectheory.runtime.limits`][spectheory.runtime.limits]
(``FLOAT_SEQUENCES_PER_SECOND``, ``EXACT_SEQUENCES_PER_SECOND``, ``OUTCOMES_PER_SECOND``) are the
lowest rates measured here, rounded down, so estimates lean long.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from spectheory import analyze, random_instance  # noqa: E402
from spectheory.runtime.limits import (EXACT_SEQUENCES_PER_SECOND, FLOAT_SEQUENCES_PER_SECOND,
                                       OUTCOMES_PER_SECOND)
from spectheory.engine.joint import outcome_count, use_symmetry  # noqa: E402
from spectheory.registry import plan  # noqa: E402

#: (V, L, K, exact, verifier)
CASES = [
    (8, 6, 1, False, "block"), (16, 5, 1, False, "block"), (4, 9, 1, False, "block"),
    (16, 5, 1, False, "token"),
    (4, 6, 1, True, "block"), (3, 9, 1, True, "block"),
    (3, 5, 2, False, "specinfer"), (3, 4, 3, False, "gbv"), (4, 4, 2, False, "gbv"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for V, L, K, exact, name in CASES:
        inst = random_instance(V, L, 0, denominator=24 if exact else None)
        how = plan(name, K, None)
        units = outcome_count(V, L, K, use_symmetry(how, None)) if K > 1 else V ** (L + 1)
        t0 = time.perf_counter()
        analyze(inst, name, exact=exact, paths=K)
        dt = time.perf_counter() - t0
        row = {"V": V, "L": L, "K": K, "exact": exact, "verifier": name,
               "unit": "outcomes" if K > 1 else "sequences", "count": units,
               "seconds": round(dt, 3), "per_second": units / dt}
        rows.append(row)
        print(f"V={V} L={L} K={K} {'exact' if exact else 'float'} {name}: {units:,} "
              f"{row['unit']} in {dt:.3f} s = {units / dt:.3g}/s", flush=True)
    out = {
        "command": "python benchmarks/bench_limits.py",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                   f"{platform.python_version()}, torch {torch.__version__} (1 thread)",
        "constants": {"FLOAT_SEQUENCES_PER_SECOND": FLOAT_SEQUENCES_PER_SECOND,  # in use
                      "EXACT_SEQUENCES_PER_SECOND": EXACT_SEQUENCES_PER_SECOND,
                      "OUTCOMES_PER_SECOND": OUTCOMES_PER_SECOND},
        "results": rows,
    }
    if args.out:
        with open(args.out + ".tmp", "w") as fh:
            json.dump(out, fh, indent=1)
        os.replace(args.out + ".tmp", args.out)


if __name__ == "__main__":
    main()
