"""Compile the package's numba kernels into their on-disk cache (``__pycache__`` beside each
module), so that later processes load them instead of compiling them.

numba compiles a kernel on its first call in a process and, with ``cache=True``, writes the result
for the next process. Without a warm cache every process that first takes a compiled route pays
the compilation (about 30 s of CPU for all of them on the 2-core machine, 5-6 s of it for the
first GBV law of a dtype), and parallel test workers pay it each.
`scripts/test.sh` runs this while the documentation builds. It calls the kernels the way the
package does, on small inputs with the size thresholds lowered, so each signature the routes use
is compiled: token and block verification's last levels and the output law's last step
(`spectheory.engine._nodes_cpu`), GBV's rank orders, q^G rows and per-path calls for float32 and
float64 rows, with a shared root and without (`spectheory.verifiers._gbv_cpu`), and the float32
correction rows of token, block and SpecInfer (`spectheory.verifiers._rows_cpu`). Exits 0
without doing anything where numba cannot be loaded
(the torch routes give the same values); any other failure is an error.

    .venv/bin/python scripts/warm_kernels.py
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    t = time.perf_counter()
    import importlib

    import torch

    from spectheory.engine import nodes
    from spectheory.verifiers import block_verification, compiled_rows
    from spectheory.engine.analysis import analyze
    from spectheory.inputs.random_instances import random_instance

    gbv_module = importlib.import_module("spectheory.verifiers.gbv")  # the module, not gbv()
    if nodes._kernel_module() is None:
        print(f"warm_kernels: numba not usable ({nodes._KERNELS_UNAVAILABLE[0]}); nothing to do")
        return 0
    nodes.COMPILED_MIN_NODES = 0
    gbv_module.KERNEL_MIN_VOCAB = 1
    compiled_rows.ROWS_MIN_VOCAB = 8
    for name in ("token", "block"):
        analyze(random_instance(4, 3, 0), name, exact=False, backend="torch", laws=True)
    gbv_module.RANK_CHUNK_ELEMENTS = 1  # one block at a time: a shared root is sorted too
    gen = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        B, K, L, V = 2, 3, 2, 64
        p = torch.softmax(torch.randn(B, K, L + 1, V, generator=gen, dtype=torch.float64) * 3,
                          -1).to(dtype)
        q = torch.softmax(torch.randn(B, K, L, V, generator=gen, dtype=torch.float64) * 3,
                          -1).to(dtype)
        p[:, :, 0] = p[:, :1, 0]
        q[:, :, 0] = q[:, :1, 0]
        x = torch.multinomial(q.reshape(-1, V).double(), 1, generator=gen).view(B, K, L)
        gbv_module.gbv(x, q, p)
        # and a root whose rows differ (no shared root row: the per-path call sorts it itself)
        gbv_module.gbv(x, torch.cat([q[:, :1], q[:, 1:].flip(-1)], dim=1), p)
        if dtype == torch.float32:  # token's kernel and both of block's (one or two roundings)
            block_verification(x[:, 0], q[:, 0], p[:, 0])
            mod = compiled_rows._module()
            w = torch.full((B,), 0.5)
            for kind in (mod.TOKEN, mod.BLOCK_FUSED, mod.BLOCK):
                compiled_rows._run(mod, kind, None if kind == mod.TOKEN else w, p[:, 0, 0],
                                   q[:, 0, 0], torch.empty(B, V))
            compiled_rows.compiled_totals(w, p[:, 0, 0], q[:, 0, 0])  # block's sums alone
    print(f"warm_kernels: compiled kernels cached in {time.perf_counter() - t:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
