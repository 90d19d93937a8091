"""Block vs token verification time at the real-model shapes.

One drafted path (B = 1), Qwen vocabulary V = 151,936, L in {4, 8}, float32 and float64, CPU.
The two verifiers are timed interleaved, 201 times each, and the median of the last 181 is
reported, because single calls take about a millisecond and isolated timings can swing by 2x.
Usage: ``python benchmarks/bench_token_vs_block.py``.
"""

from __future__ import annotations

import time

import torch

from spectheory.verifiers import block_verification, token_verification


def main() -> None:
    torch.manual_seed(0)
    V = 151936
    for dtype in (torch.float32, torch.float64):
        for L in (4, 8):
            p = torch.softmax(torch.randn(1, L + 1, V, dtype=dtype), -1)
            q = torch.softmax(torch.randn(1, L, V, dtype=dtype), -1)
            d = torch.multinomial(q.reshape(-1, V).double(), 1).reshape(1, L)
            times = {"token": [], "block": []}
            for _ in range(201):
                for name, fn in (("token", token_verification), ("block", block_verification)):
                    t = time.perf_counter()
                    fn(d, q, p)
                    times[name].append(time.perf_counter() - t)
            med = {k: sorted(v[20:])[len(v[20:]) // 2] * 1e3 for k, v in times.items()}
            print(f"{str(dtype):14s} L={L}: token {med['token']:.2f} ms, block {med['block']:.2f} ms,"
                  f" ratio {med['block'] / med['token']:.2f}")


if __name__ == "__main__":
    main()
