"""Benchmark: ``check_sampler`` in law mode at a real-model shape.

V = 50,000, B = 64 fixed draft rows, L = 8, 10^5 samples, spectheory's block sampler
(``make_sampler("block")``), torch with one thread. Rows: prefix-dependent (every draft row and
position has its own target and draft row), drawn as softmax(2 * N(0, 1)) logits in float64, with
each draft token drawn from its q row.

Floors measured in the same process:

* ``read``: one pass over p and q (their sum), the least any check must do;
* ``reference``: drawing the same samples with the reference sampler alone (the law of each draft
  row once, then 10^5 inverse-CDF draws), i.e. the sampler's share of the check.

A second timing hands the same sampler over without its ``repeat_aware`` attribute, so the check
calls it on chunks of at most 2^25 input floats (39 repeats of a draft row at this shape), as it
does for any third-party sampler; that sampler still computes the law once per call.

Run: ``PYTHONPATH=. python benchmarks/bench_check_sampler.py [--out benchmarks/results]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import torch

from spectheory.testing.checks.sampler import DraftRows, check_sampler, make_sampler

from _machine import cpu_name


def rows(V: int, B: int, L: int, seed: int) -> DraftRows:
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(2 * torch.randn(B, L + 1, V, generator=g, dtype=torch.float64), -1)
    q = torch.softmax(2 * torch.randn(B, L, V, generator=g, dtype=torch.float64), -1)
    q = 0.5 * q + 0.5 * p[:, :L]  # a draft that resembles the target (acceptance ~ 0.6)
    drafts = torch.multinomial(q.reshape(B * L, V), 1, generator=g).reshape(B, L)
    return DraftRows(drafts, q, p)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=50_000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=8)
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="folder for check_sampler.json / .txt")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    V, B, L, N = a.vocab, a.batch, a.length, a.samples
    inst = rows(V, B, L, 0)
    sampler = make_sampler("block")

    def timed(fn):
        best = float("inf")
        out = None
        for _ in range(a.repeats):
            t = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - t)
        return best, out

    t_read, _ = timed(lambda: float(inst.q.sum() + inst.p.sum()))
    per = [N // B + (1 if b < N % B else 0) for b in range(B)]

    def reference():
        g = torch.Generator().manual_seed(1)
        for b in range(B):
            sampler(inst.drafts[b:b + 1].expand(per[b], -1), inst.q[b:b + 1].expand(per[b], -1, -1),
                    inst.p[b:b + 1].expand(per[b], -1, -1), g)

    t_ref, _ = timed(reference)
    t_check, rep = timed(lambda: check_sampler(sampler, "block", [inst], samples=N))

    def plain(d, q, p, g):  # the same sampler without repeat_aware: chunks of 2^25 input floats
        return sampler(d, q, p, g)

    t_plain, _ = timed(lambda: check_sampler(plain, "block", [inst], samples=N))
    res = {
        "benchmark": "check_sampler law mode",
        "command": "PYTHONPATH=. python benchmarks/bench_check_sampler.py " + " ".join(
            argv if argv is not None else sys.argv[1:]),
        "shape": {"V": V, "B": B, "L": L, "samples": N},
        "seconds": {"check_sampler": t_check, "check_sampler_chunked": t_plain,
                    "floor_read_p_q": t_read,
                    "floor_reference_sampler": t_ref},
        "ratio": {"check_over_reference": t_check / t_ref, "check_over_read": t_check / t_read},
        "target_seconds": 60,
        "report": rep.to_json(),
        "machine": {"uname_m": platform.machine(), "nproc": os.cpu_count(),
                    "cpu": cpu_name(), "python": platform.python_version(),
                    "torch": torch.__version__, "torch_threads": torch.get_num_threads()},
        "timing": f"best of {a.repeats}",
    }
    text = (f"check_sampler law mode, V = {V:,}, B = {B}, L = {L}, {N:,} samples, torch 1 thread\n"
            f"  check_sampler           {t_check:8.2f} s   (target < 60 s)\n"
            f"  same, sampler not repeat_aware (chunks of 2^25 input floats) {t_plain:8.2f} s\n"
            f"  floor: reference draws  {t_ref:8.2f} s   ratio {t_check / t_ref:6.2f}\n"
            f"  floor: read p and q     {t_read:8.3f} s   ratio {t_check / t_read:6.1f}\n"
            f"  verdict {'PASS' if rep.passed else 'FAIL'}, p-value {rep.p_value:.3g}, "
            f"detects TV >= {rep.min_detectable_tv:.3g} per draft row (90% power)\n"
            f"  machine {res['machine']}\n  command {res['command']}\n")
    print(text, end="")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "check_sampler.json"), "w") as f:
            json.dump(res, f, indent=2)
        with open(os.path.join(a.out, "check_sampler.txt"), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
