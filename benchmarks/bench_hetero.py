"""Exact heterogeneous-vocabulary laws (SLEM, SLRS, TLI, vLLM #38174's TLI) on the toy pairs:
acceptance (target tokens and characters per target forward, forwards per ``n_tokens`` target
tokens), the verdict, and the time of one exact check (rationals) as ``n_tokens`` and
``draft_length`` grow, one thread.

Usage: ``python benchmarks/bench_hetero.py [--out benchmarks/results/hetero.json]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

from _machine import cpu_name

from spectheory.inputs.hetero_pairs import hetero_pair
from spectheory.lp.claims.hetero_checks import CLAIM_INSTANCES
from spectheory.verifiers.hetero import check_hetero_lossless

SCHEMES = ("slem", "slrs", "tli", "vllm-tli")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    a = ap.parse_args(argv)
    table = {}
    for pair, seed in CLAIM_INSTANCES:
        n = 3
        inst = hetero_pair(pair, seed, draft_length=2, n_tokens=n)
        for s in SCHEMES:
            rep = check_hetero_lossless(inst, s, exact=True)
            key = f"{pair} seed {seed} n_tokens {n}: {s}"
            table[key] = {"lossless": rep.lossless, "tv": str(rep.tv),
                          "tokens_per_forward": str(rep.tokens_per_forward),
                          "chars_per_forward": str(rep.chars_per_forward),
                          "forwards": str(rep.forwards)}
            print(f"{key:45s} lossless={rep.lossless} tokens/forward "
                  f"{float(rep.tokens_per_forward):.4f} chars/forward "
                  f"{float(rep.chars_per_forward):.4f} forwards {float(rep.forwards):.4f}")
    timing = {}
    for L, n in ((2, 3), (2, 4), (3, 4), (2, 5), (3, 5)):
        inst = hetero_pair("three-letters", 3, draft_length=L, n_tokens=n)
        for s in SCHEMES:
            t = time.perf_counter()
            rep = check_hetero_lossless(inst, s, exact=True)
            dt = time.perf_counter() - t
            timing[f"three-letters draft_length {L} n_tokens {n}: {s}"] = {
                "seconds": round(dt, 3), "lossless": rep.lossless}
            print(f"three-letters L={L} n_tokens={n} {s:9s} {dt:7.3f} s lossless={rep.lossless}")
    if a.out:
        entry = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": "python benchmarks/bench_hetero.py " + " ".join(
                argv if argv is not None else sys.argv[1:]),
            "machine": {"uname_m": platform.machine(), "nproc": os.cpu_count(),
                        "cpu": cpu_name(), "python": platform.python_version()},
            "threads": "one (pure Python rationals)",
            "acceptance": table, "timing": timing,
        }
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(entry, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
