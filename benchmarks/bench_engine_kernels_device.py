"""Released engine kernels compiled for a GPU, checked by the kit at large sample sizes.

The kernels of docs/engine-recipes.md (SGLang's ``chain_speculative_sampling_triton``, vLLM V1's
``rejection_sample`` and Model Runner V2's ``rejection_sample``, loaded from the unpacked wheels
as that page does, with its ``vllm_cpu.py`` block), here compiled by Triton for the device rather
than run under the interpreter: ``engine_sampler(fn, preset, device="cuda")``. Each runs
``check_sampler`` in law mode on the default instances at ``--samples`` samples (10^7: a bias far
below what the interpreter's few thousand samples can see; vLLM V1 at ``--v1-samples``, since its
preset gives every request a generator of its own and the engine draws request by request in
Python), family-wise false-alarm rate
``--alpha``, and one negative control that must fail: SGLang's kernel with its block rule
checked against the token rule (both lossless, with different laws of tau).

    python benchmarks/bench_engine_kernels_device.py --src engine-src --device cuda \\
        --samples 10000000 --out engine_kernels_cuda.json
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ["TRITON_INTERPRET"] = os.environ.get("TRITON_INTERPRET", "0")  # compiled by default
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_engine_recipes import page_block  # noqa: E402


def load_sglang(src: str):
    spec = importlib.util.spec_from_file_location(
        "reject_sampling", f"{src}/sglang/kernels/ops/speculative/reject_sampling.py")
    rs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rs)
    return rs.chain_speculative_sampling_triton


def load_vllm(src: str):
    tmp = Path(tempfile.mkdtemp())
    code = page_block("# vllm_cpu.py").replace('SRC = "engine-src"', f'SRC = {src!r}')
    (tmp / "vllm_cpu.py").write_text(code)
    sys.path.insert(0, str(tmp))
    return importlib.import_module("vllm_cpu")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True, help="folder holding the unpacked vllm/ and sglang/")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--samples", type=int, default=10**7)
    ap.add_argument("--v1-samples", type=int, default=10**6,
                    help="samples of vLLM V1's check (its preset hands every request its own "
                         "torch.Generator, which the engine loops over in Python)")
    ap.add_argument("--alpha", type=float, default=1e-3)
    ap.add_argument("--only", default="sglang,vllm-v1,vllm-mrv2,control")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    import torch
    import triton

    from spectheory.testing import check_sampler
    from spectheory.testing.engines.layouts import (SGLANG_CHAIN, VLLM_MRV2, VLLM_V1,
                                                    engine_sampler)

    torch.set_num_threads(1)
    only = a.only.split(",")
    dev = torch.device(a.device)
    out = {"benchmark": "released engine kernels on a device, law mode",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": "python benchmarks/bench_engine_kernels_device.py "
                      + " ".join(argv or sys.argv[1:]),
           "machine": {"python": platform.python_version(), "torch": torch.__version__,
                       "triton": triton.__version__,
                       "TRITON_INTERPRET": os.environ["TRITON_INTERPRET"],
                       "device": (torch.cuda.get_device_name(dev) if dev.type == "cuda"
                                  else "cpu")},
           "samples": a.samples, "alpha": a.alpha, "checks": []}
    jobs = []
    if "sglang" in only or "control" in only:
        fn = load_sglang(a.src)
        block = SGLANG_CHAIN.with_constants(block_verification=True)
        if "sglang" in only:
            jobs += [("sglang chain, token rule", fn, SGLANG_CHAIN, "token", True),
                     ("sglang chain, block rule", fn, block, "block", True)]
        if "control" in only:
            jobs.append(("control: sglang block rule checked as token", fn, block, "token",
                         False))
    if "vllm-v1" in only or "vllm-mrv2" in only:
        vllm = load_vllm(a.src)
        if "vllm-mrv2" in only:
            fn = vllm.mrv2.rejection_sample
            jobs += [("vllm mrv2, standard rule", fn, VLLM_MRV2, "token", True),
                     ("vllm mrv2, block rule",
                      fn, VLLM_MRV2.with_constants(use_block_verification=True), "block", True)]
        if "vllm-v1" in only:
            jobs.append(("vllm v1", vllm.v1.rejection_sample, VLLM_V1, "token", True))
    for label, fn, layout, rule, lossless in jobs:
        row = {"check": label, "rule": rule, "expect_pass": lossless}
        t = time.perf_counter()
        try:
            n = a.v1_samples if layout.name == VLLM_V1.name else a.samples
            rep = check_sampler(engine_sampler(fn, layout, device=dev), rule, samples=n,
                                alpha=a.alpha)
            row.update(passed=bool(rep.passed), p_value=float(rep.p_value),
                       samples=int(rep.samples), min_detectable_tv=float(rep.min_detectable_tv),
                       as_expected=bool(rep.passed) == lossless)
        except Exception as exc:  # noqa: BLE001 - recorded, the next check runs
            row["error"] = f"{type(exc).__name__}: {exc}"
            row["traceback"] = traceback.format_exc()[-3000:]
        row["seconds"] = time.perf_counter() - t
        print(json.dumps({k: v for k, v in row.items() if k != "traceback"}), flush=True)
        out["checks"].append(row)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0 if all(r.get("as_expected") for r in out["checks"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
