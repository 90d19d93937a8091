"""The exact engine on an accelerator against the same law on the CPU.

For each case (a random prefix-dependent instance, Dirichlet(1) rows, and a verifier) the full
analysis (tau pmf, E[tau], output law over V^(L+1) sequences, TV to the target) runs in float64
on the CPU with one torch thread and on ``--device`` (the per-node route, chunked as the engine
chunks for that device; multi-path verifiers take the joint-outcome route), and the two laws are
compared entry by entry. Reported per case: the largest absolute difference of the tau pmf, of
the output law and of TV, the CPU time (median of ``--repeat``), the device's first call (which
includes kernel loading) and its median time after that, and the device's peak memory.

A difference above ``--tol`` (default 1e-12; both sides are float64 sums of the same products
in different orders) fails the run (exit 1).

```bash
python benchmarks/bench_engine_device.py --device cuda --out benchmarks/results/engine_cuda.json
```
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

#: (vocabulary, block length, verifier, paths): single-path cases at the engine's headline sizes
#: and two multi-path ones.
CASES = [(8, 7, "block", None), (8, 7, "token", None), (16, 5, "block", None),
         (4, 12, "block", None), (4, 5, "gbv", 2), (4, 5, "specinfer", 2)]


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def run(inst, verifier, paths, device):
    import spectheory as st

    sync(device)
    t0 = time.perf_counter()
    res = st.analyze(inst, verifier, exact=False, device=device, paths=paths,
                     backend="torch")  # the CPU baseline on torch too
    sync(device)
    return time.perf_counter() - t0, res


def as_cpu(x):
    return x.detach().to("cpu", torch.float64) if torch.is_tensor(x) else torch.as_tensor(
        x, dtype=torch.float64)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-12)
    ap.add_argument("--out", default=None, help="JSON output")
    a = ap.parse_args(argv)
    from spectheory.inputs.random_instances import random_instance

    torch.set_num_threads(1)
    dev = torch.device(a.device)
    rows, ok = [], True
    for V, L, verifier, paths in CASES:
        inst = random_instance(V, L, seed=V * 100 + L)
        cpu_times = []
        for _ in range(a.repeat):
            t, ref = run(inst, verifier, paths, "cpu")
            cpu_times.append(t)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        first, res = run(inst, verifier, paths, a.device)
        dev_times = [run(inst, verifier, paths, a.device)[0] for _ in range(a.repeat)]
        d_tau = max(abs(float(x) - float(y)) for x, y in zip(ref.tau_pmf, res.tau_pmf))
        d_law = float((as_cpu(ref.output_law) - as_cpu(res.output_law)).abs().max())
        d_tv = abs(float(ref.tv_to_target) - float(res.tv_to_target))
        row = {"V": V, "L": L, "verifier": verifier, "paths": paths, "route": res.route,
               "E_tau_plus_1": float(ref.block_efficiency), "max_abs_diff_tau_pmf": d_tau,
               "max_abs_diff_output_law": d_law, "abs_diff_tv": d_tv,
               "cpu_s": statistics.median(cpu_times), "device_first_s": first,
               "device_s": statistics.median(dev_times)}
        if dev.type == "cuda":
            row["device_peak_gib"] = torch.cuda.max_memory_allocated(dev) / 2 ** 30
        row["ok"] = max(d_tau, d_law, d_tv) <= a.tol
        ok &= row["ok"]
        rows.append(row)
        print(f"V={V} L={L} {verifier}{'' if paths is None else f' K={paths}'}\t"
              f"cpu {row['cpu_s']:.3f}s\t{a.device} {row['device_s']:.3f}s "
              f"(first {first:.2f}s)\tmax|diff| tau {d_tau:.1e} law {d_law:.1e} "
              f"tv {d_tv:.1e}\t{'ok' if row['ok'] else 'DIFFERENT'}", flush=True)
    machine = {"cpu": cpu_name(), "python": platform.python_version(),
               "torch": torch.__version__, "cpu_threads": 1}
    if dev.type == "cuda":
        machine.update(gpu=torch.cuda.get_device_name(dev), cuda=torch.version.cuda)
    doc = {"machine": machine, "device": a.device, "tol": a.tol,
           "date": datetime.date.today().isoformat(),
           "command": "python benchmarks/bench_engine_device.py " + " ".join(
               sys.argv[1:] if argv is None else argv),
           "ok": ok, "cases": rows}
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
