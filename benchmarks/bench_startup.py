"""Start-up time of the command line, against the interpreter's own start-up.

``python benchmarks/bench_startup.py [--repeat 9] [--out benchmarks/results/startup.json]`` runs
each command in a fresh process ``repeat`` times (interleaved, so that background load hits every
command alike) and reports the median wall-clock time, and its ratio to the floor measured in the
same run: a Python interpreter that starts and exits (``python -c pass``, with the same
site-packages). ``import torch`` is timed the same way for reference: a command that needs
torch cannot start faster than that. The target is under 1 s for ``spectheory --help``,
``spectheory instance random ...`` and ``spectheory lp`` on a small instance.

Another checkout's code is timed with the same protocol through ``PYTHONPATH`` (the console
script puts it before the installed package), e.g. the implementation before torch was imported
lazily:

```bash
git worktree add /tmp/before b6af064
PYTHONPATH=/tmp/before python benchmarks/bench_startup.py --label b6af064 \
    --out benchmarks/results/startup_b6af064.json
```
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_SECONDS = 1.0


def spectheory_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m spectheory``."""
    script = os.path.join(os.path.dirname(sys.executable), "spectheory")
    if os.path.exists(script):
        return [script]
    found = shutil.which("spectheory")
    return [found] if found else [sys.executable, "-m", "spectheory"]


def timed(argv: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                         cwd=ROOT)
    dt = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {out.stderr.decode()[-500:]}")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--label", default="this checkout", help="which code is timed (recorded)")
    args = ap.parse_args()
    env = {**os.environ, "SPECTHEORY_THREADS": "1"}
    cli = spectheory_command()
    with tempfile.TemporaryDirectory() as tmp:
        inst = os.path.join(tmp, "instance.json")
        with open(inst, "w") as fh:
            subprocess.run(cli + ["instance", "random", "--vocab", "3", "--block", "3"],
                           stdout=fh, check=True, env=env)
        cases = {
            "floor: python -c pass": [sys.executable, "-c", "pass"],
            "reference: python -c 'import torch'": [sys.executable, "-c", "import torch"],
            "spectheory --help": cli + ["--help"],
            "spectheory instance random --vocab 3 --block 3": cli + [
                "instance", "random", "--vocab", "3", "--block", "3"],
            "spectheory lp INSTANCE (node-budget, V = 3, L = 3)": cli + ["lp", inst],
            "spectheory exact INSTANCE (uses torch)": cli + ["exact", inst],
        }
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.repeat):
            for name, argv in cases.items():
                times[name].append(timed(argv, env))
    floor = statistics.median(times["floor: python -c pass"])
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        target = name.startswith(("spectheory --help", "spectheory instance", "spectheory lp"))
        rows.append({"command": name, "median_seconds": round(med, 4),
                     "min_seconds": round(min(ts), 4), "x_floor": round(med / floor, 2),
                     "target_seconds": TARGET_SECONDS if target else None,
                     "met": (med < TARGET_SECONDS) if target else None})
        mark = "" if not target else ("  (< 1 s: yes)" if med < TARGET_SECONDS else
                                      "  (< 1 s: NO)")
        print(f"{name:52s} {med:7.3f} s  {med / floor:5.1f}x floor{mark}", flush=True)
    result = {
        "command": f"python benchmarks/bench_startup.py --repeat {args.repeat}",
        "code": args.label,
        "pythonpath": os.environ.get("PYTHONPATH", ""),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                   f"{platform.python_version()}",
        "threads": "SPECTHEORY_THREADS=1",
        "floor": "python -c pass (median)",
        "rows": rows,
    }
    if args.out:
        tmp_out = args.out + ".tmp"
        with open(tmp_out, "w") as fh:
            json.dump(result, fh, indent=1)
        os.replace(tmp_out, args.out)
    return 0 if all(r["met"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
