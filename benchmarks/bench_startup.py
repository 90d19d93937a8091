"""Start-up time of the command line, against the interpreter's own start-up.

``python benchmarks/bench_startup.py [--repeat 15] [--out benchmarks/results/startup.json]`` runs
each command in a fresh process ``repeat`` times (interleaved, so that background load hits every
command alike) and reports the minimum and the median wall-clock time, the minimum CPU time
(user + system, which background load inflates much less than wall time), and the ratio of the
minimum to the floor measured in the same run: a Python interpreter that starts and exits
(``python -c pass``, with the same site-packages). ``import torch`` is timed the same way for
reference: a command that needs torch cannot start faster than that. Each command also records
whether it imported torch (one extra run under ``python -X importtime``) and the machine's load
average before and after.

Targets (wall clock, minimum over the runs; on an idle machine the median comes close to it):
``spectheory --help`` under 0.3 s; ``spectheory exact`` on a V = 3, L = 2 instance in exact
rationals (``--exact``, which runs on numpy Fractions) and on its default float64 route (which
runs on numpy float64 on the CPU for the verifiers that declare it) under 0.6 s each, neither
importing torch; ``spectheory check`` on the same instance (float64) under 0.6 s, and GBV's
analytic route with K = 3 paths (float64, also on numpy);
``spectheory instance`` and ``spectheory lp`` on a small instance under 1 s.

The commands run as an installed package runs them: with their bytecode cached (a private
``PYTHONPYCACHEPREFIX``, filled by one warm-up run of each command; ``PYTHONDONTWRITEBYTECODE``
is cleared for them), not recompiling every module on each start.

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

from _machine import cpu_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_SECONDS = 1.0


def spectheory_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m spectheory``."""
    script = os.path.join(os.path.dirname(sys.executable), "spectheory")
    if os.path.exists(script):
        return [script]
    found = shutil.which("spectheory")
    return [found] if found else [sys.executable, "-m", "spectheory"]


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    """Wall-clock and CPU (user + system) seconds of one run of ``argv``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            cwd=ROOT)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {err.decode()[-500:]}")
    return dt, usage.ru_utime + usage.ru_stime


def imports_torch(argv: list[str], env: dict) -> bool:
    """Whether ``argv`` (a ``python -c`` line or a ``spectheory`` command) imports torch: the
    same code run under a wrapper that reports ``"torch" in sys.modules`` at exit."""
    if argv[:2] == [sys.executable, "-c"]:
        code = argv[2] + "\nimport sys\nprint('torch' in sys.modules)"
    else:
        words = argv[1:] if argv[0] != sys.executable else argv[3:]
        code = ("import contextlib, io, sys\nfrom spectheory.cli import main\n"
                "with contextlib.redirect_stdout(io.StringIO()):\n"
                "    try:\n"
                f"        main({words!r})\n"
                "    except SystemExit:\n"
                "        pass\n"
                "print('torch' in sys.modules)")
    # not in ROOT: ``python -c`` puts its directory before PYTHONPATH, which would check this
    # checkout's code instead of the code timed through PYTHONPATH
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tempfile.gettempdir(), env=env)
    return out.stdout.strip().splitlines()[-1] == "True"


#: Wall-clock targets (seconds, on the minimum of the runs) by command.
TARGETS = {"spectheory --help": 0.3,
           "spectheory exact INSTANCE --exact (V = 3, L = 2)": 0.6,
           "spectheory exact INSTANCE (float64 route, V = 3, L = 2)": 0.6,
           "spectheory check INSTANCE (float64 route, V = 3, L = 2)": 0.6,
           "spectheory exact INSTANCE --verifier gbv --paths 3 (float64 analytic route, V = 3, "
           "L = 2)": 0.6,
           "spectheory instance random --vocab 3 --block 3": TARGET_SECONDS,
           "spectheory lp INSTANCE (node-budget, V = 3, L = 3)": TARGET_SECONDS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--label", default="this checkout", help="which code is timed (recorded)")
    args = ap.parse_args()
    cli = spectheory_command()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "SPECTHEORY_THREADS": "1", "PYTHONPYCACHEPREFIX": tmp}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        inst = os.path.join(tmp, "instance.json")
        with open(inst, "w") as fh:
            subprocess.run(cli + ["instance", "random", "--vocab", "3", "--block", "3"],
                           stdout=fh, check=True, env=env)
        small = os.path.join(tmp, "v3l2.json")
        with open(small, "w") as fh:
            subprocess.run(cli + ["instance", "random", "--vocab", "3", "--block", "2",
                                  "--denominator", "12"], stdout=fh, check=True, env=env)
        cases = {
            "floor: python -c pass": [sys.executable, "-c", "pass"],
            "reference: python -c 'import torch'": [sys.executable, "-c", "import torch"],
            "spectheory --help": cli + ["--help"],
            "spectheory instance random --vocab 3 --block 3": cli + [
                "instance", "random", "--vocab", "3", "--block", "3"],
            "spectheory lp INSTANCE (node-budget, V = 3, L = 3)": cli + ["lp", inst],
            "spectheory exact INSTANCE --exact (V = 3, L = 2)": cli + ["exact", small, "--exact"],
            "spectheory exact INSTANCE (float64 route, V = 3, L = 2)": cli + ["exact", small],
            "spectheory check INSTANCE (float64 route, V = 3, L = 2)": cli + ["check", small],
            "spectheory exact INSTANCE --verifier gbv --paths 3 (float64 analytic route, V = 3, "
            "L = 2)": cli + ["exact", small, "--verifier", "gbv", "--paths", "3"],
        }
        torch_used = {name: imports_torch(argv, env) for name, argv in cases.items()}  # warm-up
        load_before = os.getloadavg()
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        for _ in range(args.repeat):
            for name, argv in cases.items():
                times[name].append(timed(argv, env))
        load_after = os.getloadavg()
    floor = min(w for w, _ in times["floor: python -c pass"])
    rows = []
    for name, ts in times.items():
        walls = [w for w, _ in ts]
        cpus = [c for _, c in ts]
        best, med = min(walls), statistics.median(walls)
        target = TARGETS.get(name)
        rows.append({"command": name, "min_seconds": round(best, 4),
                     "median_seconds": round(med, 4), "min_cpu_seconds": round(min(cpus), 4),
                     "x_floor": round(best / floor, 2), "imports_torch": torch_used[name],
                     "target_seconds": target,
                     "met": (best < target) if target is not None else None})
        mark = "" if target is None else (f"  (< {target} s: " + (
            "yes)" if best < target else "NO)"))
        print(f"{name:56s} min {best:6.3f} s  median {med:6.3f} s  cpu {min(cpus):6.3f} s  "
              f"{best / floor:5.1f}x floor  torch: {'yes' if torch_used[name] else 'no'}{mark}",
              flush=True)
    print(f"load average (1, 5, 15 min): before {load_before}, after {load_after}")
    result = {
        "command": f"python benchmarks/bench_startup.py --repeat {args.repeat}",
        "code": args.label,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "pythonpath": os.environ.get("PYTHONPATH", ""),
        "machine": f"{cpu_name()}, {platform.machine()}, {os.cpu_count()} cores, Python "
                   f"{platform.python_version()}",
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "threads": "SPECTHEORY_THREADS=1",
        "bytecode": "cached (PYTHONPYCACHEPREFIX, warmed by one run of each command)",
        "floor": "python -c pass (minimum)",
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
