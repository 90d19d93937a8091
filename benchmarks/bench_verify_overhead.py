"""Verification cost per speculative-decoding step at the Qwen vocabulary (V = 151,936).

Times one law evaluation plus one sample (what one iteration of the loop does) for token and
block verification (single path) and the multi-path verifiers, batched over B independent steps,
on rows shaped like real model conditionals (softmax of scaled Gaussian logits, tree-consistent:
the root row is shared by all K paths), and reports each as a share of a target forward.

The target-forward time comes from a validation run's costs.json (``--costs``, measured with the
real 1.5B target on the same machine: batch K, L+1 tokens) or ``--target-seconds``.

    python benchmarks/bench_verify_overhead.py --costs benchmarks/results/qwen-coder-cpu/costs.json
    python benchmarks/bench_verify_overhead.py --device cuda --B 1,64,256 --L 4,8,16   # on a GPU

Performance target: block within 1.2x of token, and under 5% of the target forward.

Verifiers are names or ``module:function`` (``--single``, ``--multi``), resolved through
[`get_verifier`][spectheory.registry.get_verifier]; each is timed through the one protocol
(``spec.law`` in the K-path form, then [`sample_output`][spectheory.sampling.sample_output]).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import cpu_name  # noqa: E402

from spectheory.gpu_validation.atomic import write_json  # noqa: E402
from spectheory.registry import get_verifier  # noqa: E402
from spectheory.sampling import sample_output  # noqa: E402


def rows(B, K, n, V, dtype, device, gen, scale=3.0):
    x = torch.randn(B, K, n, V, generator=gen, dtype=torch.float32, device=device) * scale
    p = torch.softmax(x, -1).to(dtype)
    del x
    p[:, :, 0] = p[:, :1, 0]  # the root conditional is the same for every path
    return p


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def free_device(device):
    """Release what an out-of-memory case left cached, so that the next case starts clean."""
    import gc

    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def time_call(fn, reps, device):
    ts = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--B", default="1")
    ap.add_argument("--K", default="1,2,4")
    ap.add_argument("--L", default="4,8")
    ap.add_argument("--dtype", default="float64,float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--single", default="token,block",
                    help="single-path verifiers (names or module:function), timed at K = 1")
    ap.add_argument("--multi", default="gbv,specinfer,traversal-iid,spectr",
                    help="K-path verifiers (names or module:function), timed at K > 1")
    ap.add_argument("--costs", help="costs.json of a validation run (target forward times)")
    ap.add_argument("--target-seconds", type=float, help="target forward time, if no costs.json")
    ap.add_argument("--out", default=None, help="JSON output")
    a = ap.parse_args(argv)
    costs = json.loads(Path(a.costs).read_text()) if a.costs else None
    gen = torch.Generator(device=a.device).manual_seed(0)
    gen_sample = torch.Generator(device=a.device).manual_seed(1)
    single = {n: get_verifier(n) for n in a.single.split(",") if n}
    multi = {n: get_verifier(n, multi_path=True) for n in a.multi.split(",") if n}
    results = []
    for dname in a.dtype.split(","):
        dtype = getattr(torch, dname)
        for B in map(int, a.B.split(",")):
            for L in map(int, a.L.split(",")):
                for K in map(int, a.K.split(",")):
                    names = single if K == 1 else multi
                    try:
                        q = rows(B, K, L, a.V, dtype, a.device, gen)
                        p = rows(B, K, L + 1, a.V, dtype, a.device, gen)
                        X = torch.multinomial(q.reshape(-1, a.V).float(), 1, generator=gen)
                        X = X.view(B, K, L)
                    except torch.OutOfMemoryError:
                        q = p = X = None
                        free_device(a.device)
                        for name in names:
                            print(f"{dname}\tB={B}\tK={K}\tL={L}\t{name}\tout of memory "
                                  f"(inputs)", flush=True)
                            results.append({"verifier": name, "dtype": dname, "B": B, "K": K,
                                            "L": L, "seconds": None, "error": "out of memory"})
                        continue
                    for name, spec in names.items():
                        def step(spec=spec):
                            law = spec.law(X[:, :1], q[:, :1], p[:, :1]) if spec.single_path \
                                else spec.law(X, q, p)
                            return sample_output(law, gen_sample)
                        try:
                            step()  # warm-up
                            sec = time_call(step, a.reps, a.device)
                        except torch.OutOfMemoryError:
                            free_device(a.device)
                            print(f"{dname}\tB={B}\tK={K}\tL={L}\t{name}\tout of memory",
                                  flush=True)
                            results.append({"verifier": name, "dtype": dname, "B": B, "K": K,
                                            "L": L, "seconds": None, "error": "out of memory"})
                            continue
                        tgt = a.target_seconds
                        if costs:
                            tgt = costs["target_Ltok"].get(f"K{K}/L{L}", tgt)
                        r = {"verifier": name, "dtype": dname, "B": B, "K": K, "L": L,
                             "seconds": sec, "target_forward_s": tgt,
                             "input_bytes": (q.numel() + p.numel()) * q.element_size(),
                             "share": (sec / tgt) if tgt else None}
                        results.append(r)
                        share = f"{100 * r['share']:.1f}%" if r["share"] else "-"
                        print(f"{dname}\tB={B}\tK={K}\tL={L}\t{name}\t{sec * 1e3:.1f} ms\t"
                              f"{share} of target forward", flush=True)
    for dname in a.dtype.split(","):
        for L in map(int, a.L.split(",")):
            for B in map(int, a.B.split(",")):
                tk = [r for r in results if r["verifier"] == "token" and r["L"] == L
                      and r["dtype"] == dname and r["B"] == B]
                bk = [r for r in results if r["verifier"] == "block" and r["L"] == L
                      and r["dtype"] == dname and r["B"] == B]
                if tk and bk and tk[0]["seconds"] and bk[0]["seconds"]:
                    print(f"{dname} B={B} L={L}: block/token time ratio "
                          f"{bk[0]['seconds'] / tk[0]['seconds']:.2f}")
    machine = {"cpu": cpu_name(), "python": platform.python_version(), "torch": torch.__version__}
    if torch.device(a.device).type == "cuda":
        machine.update(gpu=torch.cuda.get_device_name(a.device), cuda=torch.version.cuda)
    doc = {"device": a.device, "V": a.V, "torch_threads": torch.get_num_threads(),
           "machine": machine, "date": datetime.date.today().isoformat(),
           "command": "python benchmarks/bench_verify_overhead.py " + " ".join(
               sys.argv[1:] if argv is None else argv),
           "costs": a.costs, "results": results}
    if a.out:
        write_json(a.out, doc)
    return 0


if __name__ == "__main__":
    from spectheory.runtime.errors import SpectheoryError

    try:
        sys.exit(main())
    except SpectheoryError as exc:
        print(f"bench_verify_overhead: error: {exc}", file=sys.stderr)
        sys.exit(2)
