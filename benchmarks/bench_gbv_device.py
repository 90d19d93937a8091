"""GBV's law on a GPU: the device route's ways of sorting against each other, against an earlier
implementation of the law (optional), against block verification and the read floor, and its
values against the CPU's.

Rows as ``bench_verify_overhead.py`` makes them (V = 151,936, softmax(3 N(0, 1)) rows, every path
and position its own row, the root shared by the K paths; drafts drawn from q). For each case
(B, K, L) the script times, median of ``--reps`` after one warm-up, each call synchronised:

* ``read``: one read of p and q (their sums), the floor of any law that reads its rows;
* ``block``: block verification's law of path 0 (K = 1, the same rows);
* ``gbv[flat]``, ``gbv[rows]``, ``gbv[float]``: GBV's law with ``DEVICE_SORT`` set to each way;
* ``gbv[previous]`` (``--previous FILE``: a copy of ``spectheory/verifiers/gbv.py`` from an
  earlier commit, loaded as a module of the package), the same law as that code computes it.

and checks, on the first blocks (``--check-blocks``): the device law against the CPU's (float
rounding: the sums in rank order run in another order), the three sorts against each other (bit
for bit: the same order), the previous law against the new one, and batch invariance (each of
those blocks' law computed alone against its rows in the whole batch, bit for bit).

    python benchmarks/bench_gbv_device.py --device cuda --B 1,64,256 --L 4,8 --K 2,4 \\
        --previous old_gbv.py --out gbv_device.json
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import json
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_verify_overhead import free_device, rows, time_call  # noqa: E402

from spectheory.gpu_validation.atomic import write_json  # noqa: E402
from spectheory.registry import get_verifier  # noqa: E402

G = importlib.import_module("spectheory.verifiers.gbv")
SORTS = ("flat", "rows", "float")


def load_previous(path: str):
    spec = importlib.util.spec_from_file_location("spectheory.verifiers._gbv_previous", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gbv_with(sort: str):
    def law(x, q, p):
        old = G.DEVICE_SORT
        G.DEVICE_SORT = sort
        try:
            return G.gbv(x, q, p)
        finally:
            G.DEVICE_SORT = old
    return law


def diff(a, b) -> float:
    return max(float((a.stop.double().cpu() - b.stop.double().cpu()).abs().max()),
               float((a.correction.double().cpu() - b.correction.double().cpu()).abs().max()))


def same(a, b) -> bool:
    return torch.equal(a.stop.cpu(), b.stop.cpu()) and torch.equal(a.correction.cpu(),
                                                                    b.correction.cpu())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--V", type=int, default=151936)
    ap.add_argument("--B", default="1,64,256")
    ap.add_argument("--K", default="2,4")
    ap.add_argument("--L", default="4,8")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--previous", default=None, help="an earlier gbv.py to time beside")
    ap.add_argument("--check-blocks", type=int, default=4)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    prev = load_previous(a.previous) if a.previous else None
    block = get_verifier("block")
    gen = torch.Generator(device=a.device).manual_seed(0)
    dev = torch.device(a.device)
    out = {"benchmark": "GBV law on a device", "date": datetime.datetime.now(
        datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/bench_gbv_device.py " + " ".join(argv or sys.argv[1:]),
        "machine": {"python": platform.python_version(), "torch": torch.__version__,
                    "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
                    "cuda": torch.version.cuda},
        "V": a.V, "device_chunk_elements": G.DEVICE_CHUNK_ELEMENTS, "cases": []}
    for dname in a.dtype.split(","):
        dtype = getattr(torch, dname)
        for B in map(int, a.B.split(",")):
            for L in map(int, a.L.split(",")):
                for K in map(int, a.K.split(",")):
                    case = {"dtype": dname, "B": B, "K": K, "L": L, "seconds": {}, "checks": {}}
                    try:
                        q = rows(B, K, L, a.V, dtype, a.device, gen)
                        p = rows(B, K, L + 1, a.V, dtype, a.device, gen)
                        x = torch.multinomial(q.reshape(-1, a.V).float(), 1, generator=gen)
                        x = x.view(B, K, L)
                        laws = {"read": lambda: (q.sum(), p.sum()),
                                "block": lambda: block.law(x[:, :1], q[:, :1], p[:, :1])}
                        for s in SORTS:
                            laws[f"gbv[{s}]"] = (lambda s=s: gbv_with(s)(x, q, p))
                        if prev is not None:
                            laws["gbv[previous]"] = lambda: prev.gbv(x, q, p)
                        results = {}
                        for name, fn in laws.items():
                            results[name] = fn()  # warm-up, and the law compared below
                            case["seconds"][name] = time_call(fn, a.reps, a.device)
                        read = case["seconds"]["read"]
                        case["ratio_to_read"] = {k: v / read for k, v in case["seconds"].items()}
                        case["gbv_over_block"] = (case["seconds"]["gbv[flat]"]
                                                  / case["seconds"]["block"])
                        ch = case["checks"]
                        ch["sorts_bit_equal"] = all(same(results["gbv[flat]"], results[f"gbv[{s}]"])
                                                    for s in SORTS)
                        if prev is not None:
                            ch["previous_max_abs_diff"] = diff(results["gbv[flat]"],
                                                               results["gbv[previous]"])
                            ch["previous_bit_equal"] = same(results["gbv[flat]"],
                                                            results["gbv[previous]"])
                        n = min(B, a.check_blocks)
                        cpu = G.gbv(x[:n].cpu(), q[:n].cpu(), p[:n].cpu())
                        ch["cpu_blocks"] = n
                        whole = results["gbv[flat]"]
                        head = type(whole)(whole.stop[:n], whole.correction[:n])
                        ch["cpu_max_abs_diff"] = diff(head, cpu)
                        ch["cpu_bit_equal"] = same(head, cpu)
                        alone_equal = 0
                        for b in range(n):
                            one = G.gbv(x[b:b + 1], q[b:b + 1], p[b:b + 1])
                            alone_equal += int(
                                torch.equal(one.stop[0].cpu(), whole.stop[b].cpu())
                                and torch.equal(one.correction[0].cpu(), whole.correction[b].cpu()))
                        ch["alone_bit_equal_blocks"] = alone_equal
                        if dev.type == "cuda":
                            case["peak_gib"] = torch.cuda.max_memory_allocated(dev) / 2**30
                            torch.cuda.reset_peak_memory_stats(dev)
                    except torch.OutOfMemoryError:
                        case["error"] = "out of memory"
                    finally:
                        q = p = x = results = laws = None
                        free_device(a.device)
                    print(json.dumps(case), flush=True)
                    out["cases"].append(case)
    if a.out:
        write_json(a.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
