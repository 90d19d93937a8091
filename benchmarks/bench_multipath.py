"""Benchmark: exact multi-path analysis, joint enumeration (``route="enumerate"``) and GBV's
default analytic route (block verification against q^G per tree node).

Case of record: exact GBV analysis for V = 4, L = 4, K = 3 (4^12 = 16.7 M joint draft
outcomes). Prints wall time, outcomes per second and peak resident memory for each enumeration,
and for GBV the time of the default analytic route, its speed-up and its difference to the
enumeration.

    .venv/bin/python benchmarks/bench_multipath.py            # one torch thread (default)
    .venv/bin/python benchmarks/bench_multipath.py --quick    # small cases only
    .venv/bin/python benchmarks/bench_multipath.py --table    # every K-path verifier, see below

``--table``: the enumeration route (``route="enumerate"``) of every built-in K-path verifier but
GBV on ``random_instance(4, 3, 0)`` with K = 3 (262,144 joint outcomes), each under its own
drafting scheme (``traversal`` and ``specinfer-norep``: ``norep``; the others ``iid``), best CPU
time of 3 runs, and as a ratio to the *input floor* measured in the same process: the time to
gather the rows q [n, K, L, V] and p [n, K, L+1, V] of all joint outcomes (what every verifier
must be handed), best of 3. The table also runs against an older checkout (``PYTHONPATH=<that
checkout>``, whose API lacks the registry), so that implementations compare under one protocol.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import torch

from spectheory.engine.analysis import analyze_gbv_fast, analyze_multipath
from spectheory.engine.joint import outcome_count
from spectheory.inputs.random_instances import random_instance

try:
    from spectheory.registry import get_verifier
except ImportError:  # an older checkout (``--table`` only)
    get_verifier = None


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run(V: int, L: int, K: int, name: str, seed: int = 0, symmetric: bool | None = None) -> None:
    inst = random_instance(V, L, seed)
    verifier = get_verifier(name, multi_path=True)  # a registered name or module:function
    sym = (verifier.order_invariant and verifier.drafting in ("iid", "any")) \
        if symmetric is None else symmetric
    t0, c0 = time.perf_counter(), time.process_time()
    res = analyze_multipath(inst, verifier, K, name=name, progress=sys.stderr.isatty(),
                            symmetric=sym, route="enumerate")
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = V ** (L * K)
    visited = outcome_count(V, L, K, sym)
    how = f"({visited:,} sorted tuples visited)" if sym else "(all ordered outcomes visited)"
    line = (f"{name:10s} V={V} L={L} K={K}: {n:>11,} joint outcomes {how} in {dt:7.2f} s "
            f"(CPU {cpu:.2f} s) = "
            f"{n / dt / 1e6:6.2f} M joint outcomes/s, {visited / dt / 1e6:6.3f} M visited/s; "
            f"E[tau+1] = {res.block_efficiency:.6f}, "
            f"TV = {res.tv_to_target:.1e}, peak RSS {peak_rss_gib():.2f} GiB")
    if verifier.name == "gbv":
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            fast = analyze_multipath(inst, verifier, K)  # the default: analytic route
            times.append(time.perf_counter() - t0)
        assert fast.route == "analytic" and fast.tau_pmf == analyze_gbv_fast(inst, K).tau_pmf
        ft = sorted(times)[2]
        line += (f"; default analytic route {ft * 1e3:.1f} ms ({dt / ft:.0f}x faster), "
                 f"differs by {abs(fast.block_efficiency - res.block_efficiency):.1e}")
    print(line, flush=True)


TABLE_VERIFIERS = ("specinfer", "specinfer-norep", "spectr", "traversal", "traversal-iid",
                   "block-first", "token-first")


def _table_runner(inst, K: int):
    """name -> (drafting, run()) for the enumeration route, on either API (registry or the
    earlier ``MULTI_PATH`` dict of functions with a ``drafting`` attribute)."""
    import inspect

    from spectheory import analyze

    if "paths" not in inspect.signature(analyze).parameters:  # the API before the registry
        import spectheory.verifiers as old

        def runner(name):
            fn = old.MULTI_PATH[name]
            drafting = getattr(fn, "drafting", "iid")
            drafting = "iid" if drafting == "any" else drafting
            return drafting, lambda: analyze_multipath(inst, fn, K, drafting=drafting)
        return runner

    def runner(name):
        drafting = get_verifier(name).default_drafting
        return drafting, lambda: analyze(inst, name, paths=K, drafting=drafting,
                                         route="enumerate")
    return runner


def input_floor(inst, K: int, chunk_elements: int = 2**18) -> float:
    """CPU seconds to gather q and p rows of all V**(L K) joint outcomes (chunks of
    ``chunk_elements`` entries of one [n, K, L+1, V] array, as the engine)."""
    V, L = inst.vocab_size, inst.block_length
    s = torch.arange(V**L)
    qt = torch.stack([inst.draft.torch_level(i)[s // V ** (L - i)] for i in range(L)], 1)
    pt = torch.stack([inst.target.torch_level(i)[s // V ** (L - i)] for i in range(L + 1)], 1)
    shifts = (V**L) ** torch.arange(K - 1, -1, -1).reshape(1, K)
    chunk = max(1, chunk_elements // (K * (L + 1) * V))
    c0 = time.process_time()
    for f0 in range(0, V ** (L * K), chunk):
        f = torch.arange(f0, min(f0 + chunk, V ** (L * K)))
        seq = (f.reshape(-1, 1) // shifts % V**L).reshape(-1)
        qt.index_select(0, seq), pt.index_select(0, seq)
    return time.process_time() - c0


def table(names, K: int = 3, reps: int = 3) -> None:
    inst = random_instance(4, 3, 0)
    floor = min(input_floor(inst, K) for _ in range(reps))
    print(f"random_instance(4, 3, 0), K = {K}: {4 ** (3 * K):,} joint outcomes; input floor "
          f"{floor:.3f} s CPU (best of {reps})")
    runner = _table_runner(inst, K)
    print(f"{'verifier':16s} {'drafting':8s} {'CPU s':>7s} {'x floor':>8s}  E[tau+1]")
    for name in names:
        drafting, run = runner(name)
        best = float("inf")
        for _ in range(reps):
            c0 = time.process_time()
            res = run()
            best = min(best, time.process_time() - c0)
        print(f"{name:16s} {drafting:8s} {best:7.3f} {best / floor:8.2f}  "
              f"{float(res.block_efficiency):.12f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small cases only")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--ordered", action="store_true",
                    help="also time GBV enumerating every ordered outcome (no symmetry reduction)")
    ap.add_argument("--verifier", action="append", default=[], metavar="NAME",
                    help="also time this K-path verifier (a name or module:function) on "
                         "V = 4, L = 3, K = 3; repeatable")
    ap.add_argument("--table", action="store_true",
                    help="only the per-verifier enumeration table (module doc); runs against "
                         "older checkouts too")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if args.table:
        table(TABLE_VERIFIERS + tuple(args.verifier))
        return
    cases = [(3, 2, 3, "gbv", None), (4, 2, 3, "gbv", None), (4, 3, 3, "gbv", None),
             (4, 3, 3, "gbv", False)]
    if not args.quick:
        cases += [(4, 3, 3, "specinfer", None), (4, 3, 3, "spectr", None), (4, 4, 3, "gbv", None)]
        if args.ordered:
            cases += [(4, 4, 3, "gbv", False)]
    cases += [(4, 3, 3, v, None) for v in args.verifier]
    for V, L, K, name, sym in cases:
        run(V, L, K, name, symmetric=sym)


if __name__ == "__main__":
    main()
