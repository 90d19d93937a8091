"""Run the recipes of docs/engine-recipes.md as written against released engine code: vLLM V1
and MRV2 (Triton kernels under ``TRITON_INTERPRET=1``), SGLang's chain kernel (same), and the
installed transformers, each under the five sampling settings, plus transformers' coins-tau check.

The vLLM loader is the page's ``vllm_cpu.py`` code block, extracted from the page and imported
unchanged, so the page's code is what runs. Prepare the sources as the page's section 1 says
(``pip download --no-deps vllm==0.33.0 sglang==0.5.23``, unzip into one folder, ``pip install
triton``), then:

```bash
OMP_NUM_THREADS=1 python benchmarks/bench_engine_recipes.py --src /tmp/engine-src \\
    --out benchmarks/results/engine_recipes.txt
```

Each line: engine, setting, verdict, p-value, samples, the detectable total variation, seconds
and milliseconds per row (wall time, the kit's own work included).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

from _machine import cpu_name  # noqa: E402

SETTINGS = ["temperature=0", "temperature=0.7", "top_k=2", "top_p=0.8", "min_p=0.1"]
PAGE = Path(__file__).resolve().parents[1] / "docs" / "engine-recipes.md"


def page_block(start: str) -> str:
    """The page's ```python block whose first line starts with ``start``."""
    for block in re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S):
        if block.startswith(start):
            return block
    raise SystemExit(f"no python block starting with {start!r} in {PAGE}")


def five(label, make, samples, log):
    from spectheory.testing import check_sampler

    for s in SETTINGS:  # the page's loop
        t = time.time()
        rep = check_sampler(make(s), "token", sampling=s, samples=samples)
        dt = time.time() - t
        log(f"{label:22s} {s:16s} {'PASS' if rep.passed else 'FAIL'}  p={rep.p_value:.3g}  "
            f"samples={rep.samples}  detects TV>={rep.min_detectable_tv:.3g}  {dt:.0f} s "
            f"({1000 * dt / max(rep.samples, 1):.0f} ms/row)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True, help="folder holding the unpacked vllm/ and sglang/")
    ap.add_argument("--out", default=None, help="append the results to this file")
    ap.add_argument("--samples", type=int, default=1_500, help="samples per kernel check")
    ap.add_argument("--hf-samples", type=int, default=4_000)
    ap.add_argument("--only", default="transformers,sglang,vllm-v1,vllm-mrv2")
    args = ap.parse_args(argv)
    only = args.only.split(",")
    lines = []

    def log(text):
        print(text, flush=True)
        lines.append(text)

    import torch
    import triton

    log(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {cpu_name()}, "
        f"{os.cpu_count()} cores visible, {platform.python_version()}, torch {torch.__version__}, "
        f"triton {triton.__version__}, TRITON_INTERPRET=1, OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS')}")
    log(f"# command: python benchmarks/bench_engine_recipes.py {' '.join(argv or sys.argv[1:])}")
    from spectheory.testing import check_sampler
    from spectheory.testing.engines.layouts import (SGLANG_CHAIN, TRANSFORMERS, VLLM_MRV2, VLLM_V1,
                                                    engine_coin_sampler, engine_sampler)

    if "transformers" in only:
        import transformers
        from transformers.generation.utils import _speculative_sampling

        log(f"# transformers {transformers.__version__} (installed)")
        five("transformers", lambda s: engine_sampler(_speculative_sampling, TRANSFORMERS,
                                                      sampling=s), args.hf_samples, log)
        t = time.time()
        rep = check_sampler(engine_coin_sampler(_speculative_sampling, TRANSFORMERS), "token",
                            mode="coins-tau")
        log(f"transformers coins-tau, default instances and samples: "
            f"{'PASS' if rep.passed else 'FAIL'} in {time.time() - t:.0f} s")
        for line in str(rep).splitlines():
            log("    " + line)
    if "sglang" in only:
        spec = importlib.util.spec_from_file_location(
            "reject_sampling", f"{args.src}/sglang/kernels/ops/speculative/reject_sampling.py")
        rs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(rs)
        fn = rs.chain_speculative_sampling_triton
        five("sglang chain", lambda s: engine_sampler(fn, SGLANG_CHAIN, sampling=s),
             args.samples, log)
    if "vllm-v1" in only or "vllm-mrv2" in only:
        tmp = Path(tempfile.mkdtemp())
        code = page_block("# vllm_cpu.py").replace('SRC = "engine-src"', f'SRC = {args.src!r}')
        (tmp / "vllm_cpu.py").write_text(code)
        sys.path.insert(0, str(tmp))
        vllm_cpu = importlib.import_module("vllm_cpu")
        if "vllm-v1" in only:
            five("vllm v1", lambda s: engine_sampler(vllm_cpu.v1.rejection_sample, VLLM_V1,
                                                     sampling=s), args.samples, log)
        if "vllm-mrv2" in only:
            five("vllm mrv2", lambda s: engine_sampler(vllm_cpu.mrv2.rejection_sample,
                                                       VLLM_MRV2, sampling=s), args.samples,
                 log)
    log(f"# done {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
