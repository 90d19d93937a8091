"""``spectheory sweep CONFIG [--out OUT] [--executor local|ray] ...``, ``spectheory sweep
--example`` and ``spectheory sweep plot OUT``."""

from __future__ import annotations

import sys
from pathlib import Path

from ..runtime.errors import OptionError


#: Options of a run, and of ``sweep plot``: each refused where it would do nothing.
RUN_OPTIONS = ("out", "executor", "address", "workers", "only", "retry_failed", "no_cache",
               "no_progress")
PLOT_OPTIONS = ("figure", "x")


def _given(args, names) -> list[str]:
    return ["--" + n.replace("_", "-") for n in names if getattr(args, n) not in (None, False)]


def _refuse_given(args, names, to: str) -> None:
    """One line naming the options of ``names`` given here, where they do nothing."""
    given = _given(args, names)
    if given:
        raise OptionError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to {to}")


def cmd_sweep(args) -> int:
    if args.example:
        extra = _given(args, RUN_OPTIONS + PLOT_OPTIONS) + list(args.target)
        if extra:
            raise OptionError(f"--example prints the example file and reads nothing else; drop "
                              f"{', '.join(extra)}")
        sys.stdout.write(_example())
        return 0
    if not args.target:
        raise OptionError("give a sweep file (spectheory sweep --example > sweep.toml), or "
                          "'plot OUT'")
    if args.target[0] == "plot":
        if len(args.target) != 2:
            raise OptionError("usage: spectheory sweep plot OUT [--figure FILE] [--x AXIS]")
        _refuse_given(args, RUN_OPTIONS, "a run, not to 'sweep plot OUT'")
        from .plot import plot_sweep

        written = plot_sweep(args.target[1], figure=args.figure, x=args.x or "paths")
        sys.stdout.write(f"wrote {written}\n")
        return 0
    if len(args.target) != 1:
        raise OptionError(f"one sweep file expected; got {len(args.target)} arguments")
    _refuse_given(args, PLOT_OPTIONS, "'sweep plot OUT', not to a run")
    args.out = "sweep-out" if args.out is None else args.out
    args.executor = args.executor or "local"
    from ..engine.split import check_executor_options

    workers = None
    if args.workers is not None:
        try:
            workers = int(args.workers)
        except ValueError:
            raise OptionError(f"--workers {args.workers!r} is not an integer") from None
    check_executor_options(args.executor, workers=workers, address=args.address, flags=True)
    from .config import load_config
    from .runner import check_out_path, run_sweep

    check_out_path(args.out)  # before the file is read (its families may build instances)
    cfg = load_config(Path(args.target[0]))
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    rows = run_sweep(cfg, args.out, executor=args.executor, workers=workers,
                     address=args.address, only=args.only, retry_failed=args.retry_failed,
                     use_cache=not args.no_cache, progress=not args.no_progress
                     and sys.stderr.isatty(), log=log)
    if args.only:  # a reproduction: the rows themselves, one JSON object a line
        import json

        for row in rows:
            sys.stdout.write(json.dumps(row) + "\n")
        return _failures(rows)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    from ..runtime.files import shown_path

    sys.stdout.write(f"{len(rows)} row{'s' if len(rows) != 1 else ''} ({summary}) in "
                     f"{shown_path(f'{args.out}/results.csv')}\n")
    return _failures(rows)


#: Exit code of a sweep that ran but some of whose jobs did not finish ok (the table is written;
#: 2 is kept for a refused input).
FAILED_JOBS_EXIT = 1


def _failures(rows: list[dict]) -> int:
    """0 when every row is ok; else one line on stderr saying how many jobs did not finish ok,
    by status, and the first one's error, and `FAILED_JOBS_EXIT`."""
    bad = [r for r in rows if r.get("status") != "ok"]
    if not bad:
        return 0
    by: dict[str, int] = {}
    for r in bad:
        by[r["status"]] = by.get(r["status"], 0) + 1
    first = " ".join(str(bad[0].get("error", "")).split())
    if len(first) > 300:
        first = first[:297] + "..."
    print(f"spectheory: sweep: {len(bad)} of {len(rows)} jobs did not finish ok "
          f"({', '.join(f'{n} {s}' for s, n in sorted(by.items()))}); first, job "
          f"{bad[0].get('job', '?')}: {first or 'no error recorded'}", file=sys.stderr)
    return FAILED_JOBS_EXIT


def _example() -> str:
    from .config import example_config

    return example_config()


def register(sub) -> None:
    p = sub.add_parser(
        "sweep", help="run a grid of exact analyses and LP optima (TOML file) as cached jobs",
        description="Run a sweep: instance families x seeds x V x L x verifiers x K (and LP "
                    "optima), each job in its own process with time and memory limits, cached "
                    "by content hash under OUT/cache; the table goes to OUT/results.csv (and "
                    "results.parquet with pyarrow). 'spectheory sweep --example' prints a small "
                    "sweep file; 'spectheory sweep plot OUT' draws the standard views.")
    p.add_argument("target", nargs="*", metavar="CONFIG | plot OUT",
                   help="the sweep's TOML file, or 'plot' and a sweep's output folder")
    p.add_argument("--example", action="store_true", help="print an example sweep file")
    p.add_argument("--out", default=None, help="output folder (default: sweep-out)")
    p.add_argument("--executor", choices=("local", "ray"), default=None,
                   help="local: child processes on this machine (default); ray: one Ray task "
                        "per job (pip install 'spectheory[ray]')")
    p.add_argument("--address", default=None,
                   help="Ray cluster address (default: start a local Ray cluster for the run)")
    p.add_argument("--workers", default=None,
                   help="jobs at once, at most 4 x the cores (default: the cores, at most 8; "
                        "with --address the Ray cluster's CPUs decide)")
    p.add_argument("--only", nargs="+", default=None, metavar="KEY",
                   help="reproduce these jobs (the 'job' column; some rows' command uses this): "
                        "computed afresh and printed as JSON lines; the table is left as it is")
    p.add_argument("--retry-failed", action="store_true",
                   help="run cached failures (timeouts, errors) again")
    p.add_argument("--no-cache", action="store_true", help="run every job, cached or not")
    p.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    p.add_argument("--figure", default=None, help="plot: the image file (default OUT/sweep.png)")
    p.add_argument("--x", default=None, choices=("paths", "block", "vocab"),
                   help="plot: the horizontal axis (default paths)")
    p.set_defaults(func=cmd_sweep)
