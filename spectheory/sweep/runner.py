"""Running a sweep: guarded jobs, the executors, the cache and the table.

Every job runs in a child process forked for it (`run_guarded`): the parent watches the child's
clock and resident memory (``/proc/PID/status``) and kills it past the job's limits; an
exception, a limit or a crash of the child becomes the row's ``status`` (``failed``, ``timeout``,
``memory``, ``crashed``) and ``error``, never the sweep's end. The memory limit applies to the
job's own pages (private resident memory), not to those it shares with the parent; the
``peak_rss_mb`` column is the child's peak resident set as the kernel counts it (shared pages
included); ``memory_limit_mb = 0`` sets no memory limit (and reads no memory). The ``local``
executor keeps
``workers`` such children running at once; the ``ray`` executor sends each job to a Ray task
that runs the same guard on its node. A finished job is written to ``OUT/cache/KEY.json`` at
once (atomically), so a killed sweep resumes where it stopped.

With ``batch = N`` (``[sweep]``; the ``local`` executor) a child runs about N jobs one after the
other (`_Guarded`; dealt round-robin, so that the costly parts of a grid spread over the
children), for grids of many small jobs where forking a process per job would cost more than
the jobs: each job's row, limits and cache entry are as above (the clock
and the memory limit apply to the job the child is running; its private memory then includes
what the batch's earlier jobs left, and ``peak_rss_mb`` is the batch's peak so far), and when a
job is stopped or kills the child, the jobs after it run again in a new child.

An output folder belongs to one sweep, identified by its name (``[sweep] name``; ``sweep`` when
the file gives none): the first run records it in ``OUT/sweep.json``, and a run of a sweep with
another name into that folder is refused before anything is written
([`check_out_folder`][spectheory.sweep.runner.check_out_folder]), since it would replace the
table. Resuming a killed sweep, running it again and extending its grid keep the name and so
the folder. A folder with a table but no record (written before records were kept) is taken as
this sweep's when the table is empty or one of its rows is a job of this grid.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import time
from pathlib import Path

from ..runtime.errors import OptionError, SpectheoryError
from ..runtime.partial import kept
from .config import DEFAULT_NAME, Job, SweepConfig, expand
from .guard import _Guarded, _wait, run_batches
from .jobs import OUTPUTS, command, compute, describe_error, warm_up
from ..runtime.limits import shown as _repr_cut

#: The table's columns: the cache key, the inputs, the outputs, the reproducing command.
INPUT_COLUMNS = ("family", "vocab", "block", "seed", "knobs", "kind", "name", "paths", "drafting",
                 "route", "exact", "sampling", "draft_sampling", "shape")
OUTPUT_COLUMNS = OUTPUTS
COLUMNS = ("job",) + INPUT_COLUMNS + OUTPUTS + ("command",)
#: Columns that measure the run rather than the result (differ between runs and executors).
RUN_COLUMNS = ("seconds", "peak_rss_mb")
EXECUTORS = ("local", "ray")


def _outputs(job: Job) -> dict:  # pragma: no cover - runs in the forked child
    """The outputs of one job in this (child) process: its values, or its status and error;
    the warnings it raised as notes; its time and the process's peak resident memory."""
    import resource
    import warnings

    start = time.perf_counter()
    caught = warnings.catch_warnings(record=True)
    seen = caught.__enter__()
    warnings.simplefilter("always")
    try:
        out = dict(compute(job), status="ok", error="")
    except SpectheoryError as exc:
        out = {"status": "failed", "error": describe_error(exc)}
    except SystemExit as exc:
        out = {"status": "failed", "error": f"user code called sys.exit({exc.code!r})"}
    except MemoryError:
        out = {"status": "memory", "error": "out of memory (MemoryError)"}
    except Exception as exc:  # noqa: BLE001 - a failing job is a row
        out = {"status": "failed", "error": describe_error(exc)}
    caught.__exit__(None, None, None)
    notes = []
    for w in seen:  # e.g. a verifier analysed under a drafting scheme it is not designed for
        text = " ".join(str(w.message).split())
        if text not in notes:
            notes.append(text)
    out["notes"] = "; ".join(notes)
    out["seconds"] = round(time.perf_counter() - start, 4)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def run_guarded(job: Job) -> dict:
    """Run one job in a child process under its limits; its outputs (always a dict)."""
    g = _Guarded([job], _outputs)
    while True:
        results, _ = g.poll()
        if results:
            return results[0][1]
        _wait([g])


# ----------------------------------------------------------------------------- executors


def _local(jobs: list[Job], workers: int, done, batch: int = 1) -> None:
    """The jobs on ``workers`` children at once, each with about ``batch`` jobs
    (`spectheory.sweep.guard.run_batches`), the parent warmed up first."""
    warm_up(jobs)
    run_batches(jobs, workers, done, batch, _outputs)


def _ray_task(job: Job) -> dict:  # runs on a Ray worker
    from .jobs import warm_up

    warm_up([job])
    return run_guarded(job)


def _ray(jobs: list[Job], workers: int, address: str | None, done) -> None:
    from ..runtime.raycluster import ray_session

    with ray_session(workers, address, what="--executor ray") as ray:
        task = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
        refs = {task.remote(job): job for job in jobs}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                job = refs.pop(ref)
                try:
                    out = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a lost task is a row
                    out = {"status": "crashed", "error": f"Ray task failed: "
                                                         f"{describe_error(exc)[:300]}",
                           "seconds": "", "peak_rss_mb": ""}
                done(job, out)


# ----------------------------------------------------------------------------- cache, table


def _write_atomic(path: Path, data: bytes) -> None:
    from ..runtime.files import write_bytes

    write_bytes(path, data)


#: Statuses a row may have.
STATUSES = ("ok", "failed", "timeout", "memory", "crashed")
#: Largest cache entry read (bytes); an entry is one row, well under a kilobyte or two.
MAX_CACHE_BYTES = 1 << 20
#: Outputs that an ok row of each kind holds as finite numbers.
_NUMBERS = {"verifier": ("block_efficiency", "expected_accepted", "tv_to_target"),
            "optimum": ("block_efficiency", "expected_accepted"),
            "measure": ("value",)}


class CacheEntryError(ValueError):
    """A cache entry that does not match the schema or the job (the reason is the message)."""


def _finite(value, key: str) -> float:
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        raise CacheEntryError(f"{key} is {value!r}, not a finite number")
    return float(value)


def check_cache_entry(entry, job: Job) -> dict:
    """The outputs of a cache entry ``{"inputs": ..., "outputs": ...}`` once checked against the
    schema and against ``job``; else [`CacheEntryError`][spectheory.sweep.runner.CacheEntryError]
    naming the first problem.

    * ``inputs`` must equal the job's own [`Job.inputs`][spectheory.sweep.config.Job.inputs] (an entry
      copied or forged from another job is not this job's result);
    * ``outputs`` is an object whose keys are among `OUTPUTS`, whose values are strings or
      numbers (no lists, objects, NaN or infinities), with ``status`` one of `STATUSES` and
      ``error`` a string (non-empty unless ok);
    * an ok row holds its kind's results as finite numbers (`_NUMBERS`), ``tau_pmf`` of a
      verifier row a JSON list of numbers summing to 1, and ``value_exact`` of an exact row a
      fraction equal to ``block_efficiency`` (to float rounding).
    """
    import math

    from ..inputs.instances import plain_fraction

    if not isinstance(entry, dict) or set(entry) != {"inputs", "outputs"}:
        raise CacheEntryError("not an object with exactly the keys 'inputs' and 'outputs'")
    if entry["inputs"] != job.inputs():
        raise CacheEntryError("its stored inputs are not this job's")
    out = entry["outputs"]
    if not isinstance(out, dict):
        raise CacheEntryError(f"outputs is {type(out).__name__}, not an object")
    for key, value in out.items():
        if key not in OUTPUTS:
            raise CacheEntryError(f"unknown output {str(key)[:40]!r}")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise CacheEntryError(f"{key} is {type(value).__name__}, not a string or a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise CacheEntryError(f"{key} is {value!r}")
    status = out.get("status")
    if status not in STATUSES:
        raise CacheEntryError(f"status {str(status)[:40]!r} is not one of {', '.join(STATUSES)}")
    if not isinstance(out.get("error"), str):
        raise CacheEntryError("error is missing")
    if status != "ok":
        if not out["error"].strip():
            raise CacheEntryError(f"a {status} row without its error")
        return out
    for key in _NUMBERS[job.kind]:
        _finite(out.get(key), key)
    for key in ("seconds", "peak_rss_mb"):
        if isinstance(out.get(key), (int, float)) and out[key] < 0:
            raise CacheEntryError(f"{key} {out[key]!r} is negative")
    depth = len(job.shape.split(",")) if job.shape else job.block  # tau lies in 0..depth
    if job.kind in ("verifier", "optimum"):  # E[tau+1] = E[tau] + 1 >= 1: a row edited by hand
        be, ea = out["block_efficiency"], out["expected_accepted"]
        if ea < 0 or abs(be - (ea + 1)) > 1e-9 * max(1.0, abs(be)):
            raise CacheEntryError(f"block_efficiency {be!r} is not expected_accepted {ea!r} + 1 "
                                  "with expected_accepted >= 0")
        if be > (depth + 1) * (1 + 1e-9):  # a consistent pair forged past the block's length
            raise CacheEntryError(f"block_efficiency {be!r} is above L + 1 = {depth + 1}")
    if job.kind == "verifier":
        try:
            pmf = json.loads(out.get("tau_pmf", ""))
            if not isinstance(pmf, list) or not pmf:
                raise ValueError
            vals = [float(plain_fraction(v)) if isinstance(v, str) else _finite(v, "tau_pmf")
                    for v in pmf]
            mass = math.fsum(vals)
        except (ValueError, TypeError, ZeroDivisionError, RecursionError, CacheEntryError):
            raise CacheEntryError("tau_pmf is not a list of numbers") from None
        if abs(mass - 1) > 1e-6 or min(vals) < 0:
            raise CacheEntryError(f"tau_pmf sums to {mass:g} or has a negative entry; a law of "
                                  "tau sums to 1")
        if len(vals) != depth + 1:
            raise CacheEntryError(f"tau_pmf has {len(vals)} entries; tau lies in 0..{depth}")
        mean = math.fsum(i * v for i, v in enumerate(vals))
        if abs(mean - out["expected_accepted"]) > 1e-6 * max(1.0, mean):
            raise CacheEntryError(f"expected_accepted {out['expected_accepted']!r} is not the "
                                  f"mean of tau_pmf ({mean:.9g})")
        if not 0 <= out["tv_to_target"] <= 1:
            raise CacheEntryError(f"tv_to_target {out['tv_to_target']!r} is not in [0, 1]")
    if job.exact and job.kind != "measure":
        try:
            exact = plain_fraction(out.get("value_exact", ""))
        except (ValueError, TypeError, ZeroDivisionError):
            raise CacheEntryError("value_exact of an exact row is not a fraction") from None
        be = out["block_efficiency"]
        if abs(float(exact) - be) > 1e-9 * max(1.0, abs(be)):
            raise CacheEntryError("value_exact differs from block_efficiency")
    return out


def read_cache_entry(path: Path, job: Job) -> tuple[dict | None, str]:
    """``(outputs, "")`` of the cache entry at ``path`` for ``job`` when it is valid
    ([`check_cache_entry`][spectheory.sweep.runner.check_cache_entry]), else ``(None, reason)``:
    the job is then computed again, never taken from the entry."""
    try:
        if path.stat().st_size > MAX_CACHE_BYTES:
            return None, f"over {MAX_CACHE_BYTES:,} bytes"
        entry = json.loads(path.read_text(encoding="utf-8"))
        return check_cache_entry(entry, job), ""
    except CacheEntryError as exc:
        return None, str(exc)
    except RecursionError:
        return None, "nested too deeply"
    except (OSError, UnicodeError, ValueError) as exc:
        return None, f"unreadable: {type(exc).__name__}"


def _row(job: Job, outputs: dict, config_path: str | None) -> dict:
    row = {"job": job.key(), **job.inputs()}
    for col in OUTPUTS:
        row[col] = outputs.get(col, "")
    row["command"] = command(job, config_path)
    return row


def write_table(rows: list[dict], out: Path) -> list[Path]:
    """``out/results.csv`` and, with pyarrow, ``out/results.parquet``; the paths written."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k, "")) for k in COLUMNS})
    written = [out / "results.csv"]
    _write_atomic(written[0], buf.getvalue().encode())
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return written
    floats = {"block_efficiency", "expected_accepted", "tv_to_target", "value", "seconds",
              "peak_rss_mb"}
    ints = {"vocab", "block", "seed", "paths"}
    columns = {}
    for k in COLUMNS:
        values = [row.get(k, "") for row in rows]
        if k in floats:
            columns[k] = pa.array([None if v in ("", None) else float(v) for v in values],
                                  pa.float64())
        elif k in ints:
            columns[k] = pa.array([int(v) for v in values], pa.int64())
        elif k == "exact":
            columns[k] = pa.array([bool(v) for v in values], pa.bool_())
        else:
            columns[k] = pa.array(["" if v is None else str(v) for v in values], pa.string())
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), sink)
    written.append(out / "results.parquet")
    _write_atomic(written[1], sink.getvalue().to_pybytes())
    return written


#: The file of an output folder that records which sweep it holds.
RECORD = "sweep.json"
#: Largest record or table read to decide whose a folder is (bytes).
MAX_RECORD_BYTES = 1 << 16


def _clip(text, n: int = 60) -> str:
    text = str(text)
    return repr(text if len(text) <= n else text[:n - 3] + "...")


def check_out_path(out) -> None:
    """Refuse an empty output path (``--out ''``): it would write into the current folder."""
    if isinstance(out, str) and out.strip() == "":
        raise OptionError(f"--out {out!r} is empty: give the sweep's output folder "
                          "(e.g. --out sweep-out)")


def _table_inputs(path: Path) -> list[tuple] | None:
    """The input columns of every row of a sweep table (``results.csv``), as strings; None when
    the file is not a sweep table (no ``job`` column or a missing input column)."""
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None:
            return []
        if "job" not in reader.fieldnames or not set(INPUT_COLUMNS) <= set(reader.fieldnames):
            return None
        return [tuple(row.get(k) or "" for k in INPUT_COLUMNS) for row in reader]


def _job_inputs(job: Job) -> tuple:
    inputs = job.inputs()
    return tuple("" if inputs[k] is None else str(inputs[k]) for k in INPUT_COLUMNS)


def check_out_folder(out: Path, cfg: SweepConfig, jobs: list[Job]) -> None:
    """Refuse to run the sweep ``cfg`` into a folder that holds the results of a different sweep
    (an [`OptionError`][spectheory.runtime.errors.OptionError] naming it); reads only.

    The same sweep is the one of the same name, except for unnamed sweeps (`DEFAULT_NAME`)
    read from different files, which are the same only as a folder without record is below: ``OUT/sweep.json`` (`RECORD`) names the sweep
    that wrote the folder, and a resumed, repeated or extended run of a sweep keeps its name
    (its cache entries are keyed by their own inputs, so a grid that grew reuses them). A
    folder without that record but with a ``results.csv`` is taken as this sweep's when the
    table has no rows or at least one row whose inputs are a job of ``jobs``; a table of other
    jobs only, or a ``results.csv`` that is no sweep table, is refused. A folder with neither
    (new, or only a cache left by a killed run) is free."""
    from ..runtime.files import output_path

    for name in (RECORD, "results.csv", "results.parquet"):  # written at the end: a FIFO or a
        output_path(out / name, "--out")  # device there blocks its reader or is replaced
    record = out / RECORD
    try:
        size = record.stat().st_size
    except (FileNotFoundError, NotADirectoryError):
        size = None
    except OSError as exc:
        raise OptionError(f"cannot read {record}: {exc.strerror or exc}") from None
    if size is not None:
        try:
            if size > MAX_RECORD_BYTES:
                raise ValueError
            held = json.loads(record.read_text(encoding="utf-8"))
            if not isinstance(held, dict) or not isinstance(held.get("name"), str):
                raise ValueError
        except (OSError, UnicodeError, ValueError, RecursionError):
            raise OptionError(f"--out {out}: {record.name} there is not a sweep record; remove "
                              "it or choose another --out") from None
        if held["name"] != cfg.name:
            source = held.get("source")
            raise OptionError(
                f"--out {out} holds the results of sweep {_clip(held['name'])}"
                + (f" (from {source if len(source) <= 120 else '...' + source[-117:]})" if isinstance(source, str) and source else "")
                + f", not of sweep {_clip(cfg.name)}: choose another --out (a sweep's folder "
                  "is its own; the same name resumes it)")
        source = held.get("source")
        if not (cfg.name == DEFAULT_NAME and isinstance(source, str) and source
                and _source_path(cfg) is not None and source != cfg.source):
            return
        # two unnamed sweeps (both the default name) from different files: the same sweep only
        # if the folder's table holds one of this sweep's jobs (as for a folder without record)
    table = out / "results.csv"
    if not table.is_file():
        return
    try:
        rows = _table_inputs(table)
    except (OSError, UnicodeError, csv.Error) as exc:
        raise OptionError(f"--out {out}: cannot read its results.csv ({type(exc).__name__}); "
                          "choose another --out") from None
    if rows is None:
        raise OptionError(f"--out {out} holds a results.csv that is not a sweep table: choose "
                          "another --out")
    if rows and not set(rows) & {_job_inputs(j) for j in jobs}:
        unnamed = cfg.name == DEFAULT_NAME and record.is_file()
        which = "this one" if unnamed else f"sweep {_clip(cfg.name)}"
        none = (f"the one row of its results.csv is not a job of {which}" if len(rows) == 1
                else f"none of the {len(rows):,} rows of its results.csv is a job of {which}")
        if unnamed:
            raise OptionError(f"--out {out} holds the results of another unnamed sweep ({none}): "
                              "choose another --out, or name the sweeps ([sweep] name = ...)")
        raise OptionError(f"--out {out} holds the results of another sweep ({none}): choose "
                          "another --out")


def _source_path(cfg: SweepConfig) -> str | None:
    """The file the sweep was read from, or None for one given as text."""
    return cfg.source if cfg.source not in ("", "<text>") else None


def _write_record(out: Path, cfg: SweepConfig) -> None:
    """Record in ``out`` that it holds the sweep ``cfg`` (`RECORD`)."""
    if (out / RECORD).is_file():
        return
    payload = {"name": cfg.name, "source": _source_path(cfg) or ""}
    _write_atomic(out / RECORD, json.dumps(payload, sort_keys=True).encode())


def run_sweep(cfg: SweepConfig, out, executor: str = "local", workers: int | None = None,
              address: str | None = None, only: list[str] | None = None,
              retry_failed: bool = False, use_cache: bool = True, progress: bool = False,
              log=None) -> list[dict]:
    """Run the sweep ``cfg`` into the folder ``out`` and return its rows (grid order).

    Jobs whose result is in ``out/cache`` are not run again (``use_cache=False`` runs all;
    ``retry_failed`` re-runs cached failures). ``only``: job keys to reproduce (the command of
    a row): those jobs run afresh on this machine and their rows are returned; the folder's table
    and cache are left as they are. ``executor``: ``"local"`` (``workers`` child processes, default: the
    cores, at most 8) or ``"ray"`` (``address`` of a cluster, else a local one).

    ``out`` must not be empty, and must not hold the results of a sweep of another name
    ([`check_out_folder`][spectheory.sweep.runner.check_out_folder]); both are refused before
    anything is written.
    """
    _check_run_arguments(cfg, only, retry_failed, use_cache, progress, log)
    check_out_path(out)
    if executor not in EXECUTORS:
        raise OptionError(f"unknown executor {executor!r}; choose from {', '.join(EXECUTORS)}")
    from ..engine.split import check_executor_options

    check_executor_options(executor, workers=workers, address=address)
    if workers is None:
        workers = max(1, min(os.cpu_count() or 1, 8))
    if executor == "ray" and address:  # before any folder is made or job is listed
        from ..runtime.raycluster import probe_address

        probe_address(address, "--executor ray: --address")
    from . import families

    saved, families.PREBUILT = families.PREBUILT, cfg.prebuilt  # inherited by the forked jobs
    try:
        return _run_sweep(cfg, out, executor, workers, address, only, retry_failed, use_cache,
                          progress, log)
    finally:
        families.PREBUILT = saved


def _check_run_arguments(cfg, only, retry_failed, use_cache, progress, log) -> None:
    """`run_sweep`'s arguments, before any folder is made: a ``log`` that is not callable failed
    after ``out/cache`` and ``sweep.json`` were written; TOML text for ``cfg``, a string for
    ``only`` (read letter by letter: "job 'a' is not in this sweep"), or a flag that is not a
    bool failed inside, or was taken."""
    if not isinstance(cfg, SweepConfig):
        raise OptionError(f"run_sweep takes a SweepConfig (load_config(text or path)), not "
                          f"{type(cfg).__name__}")
    if only is not None and not (isinstance(only, (list, tuple, set, frozenset))
                                 and all(isinstance(k, str) for k in only)):
        raise OptionError(f"run_sweep: only takes a list of job keys (strings), not "
                          f"{type(only).__name__}")
    for name, flag in (("retry_failed", retry_failed), ("use_cache", use_cache),
                       ("progress", progress)):
        if not isinstance(flag, bool):
            raise OptionError(f"run_sweep: {name} must be True or False, not {_repr_cut(flag, 40)}")
    if log is not None and not callable(log):
        raise OptionError(f"run_sweep: log takes a function of one line of text (or None), "
                          f"not {type(log).__name__}")
    try:
        expand(cfg)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise OptionError(f"run_sweep: the SweepConfig's tables are not those load_config makes "
                          f"({type(exc).__name__}: {exc}); build it with load_config") from None


def _run_sweep(cfg: SweepConfig, out, executor: str, workers: int, address: str | None,
               only: list[str] | None, retry_failed: bool, use_cache: bool, progress: bool,
               log) -> list[dict]:
    jobs = expand(cfg)
    if only:  # a reproduction: the named jobs computed afresh, the table and cache untouched
        keys = {j.key() for j in jobs}
        missing = [k for k in only if k not in keys]
        if missing:
            raise OptionError(f"job {missing[0]!r} is not in this sweep")
        jobs = [j for j in jobs if j.key() in set(only)]
        results: dict[str, dict] = {}
        if log is not None:
            log(f"sweep {cfg.name}: reproducing {len(jobs)} job(s) afresh (the table in {out} "
                "is left as it is)")
        _local(jobs, min(workers, len(jobs)), lambda job, o: results.__setitem__(job.key(), o))
        config_path = _source_path(cfg)
        return [_row(job, results[job.key()], config_path) for job in jobs]
    out = Path(out)
    check_out_folder(out, cfg, jobs)  # before any folder or file is made
    cache = out / "cache"
    if out.is_dir() and (cache.exists() or cache.is_symlink()) and not cache.is_dir():
        raise OptionError(f"--out {out}: its cache ({cache}) is not a folder; remove it or "
                          "choose another --out")
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OptionError(f"cannot create output folder {out}: {exc.strerror or exc}") from None
    odd = next((p for p in (cache / f"{job.key()}.json" for job in jobs)
                if (p.exists() or p.is_symlink()) and not p.is_file()), None)
    if odd is not None:  # found before any job runs: its result could not be written there
        raise OptionError(f"cache entry {odd} is not a file (a folder, a broken link or a "
                          "device): remove it, and the same command computes that job")
    _write_record(out, cfg)
    results: dict[str, dict] = {}
    todo = []
    invalid = []
    for job in jobs:
        path = cache / f"{job.key()}.json"
        if use_cache and path.is_file():
            cached, why = read_cache_entry(path, job)
            if cached is None:
                invalid.append((job.key(), why))  # never used: computed again
            elif cached["status"] == "ok" or not retry_failed:
                results[job.key()] = cached
                continue
        todo.append(job)
    if log is not None:
        for key, why in invalid[:3]:
            log(f"sweep {cfg.name}: cache entry {key} is not valid ({why}); computing it again")
        if len(invalid) > 3:
            log(f"sweep {cfg.name}: {len(invalid) - 3} more invalid cache entries; computing "
                "them again")
        log(f"sweep {cfg.name}: {len(jobs)} jobs, {len(jobs) - len(todo)} cached, "
            f"{len(todo)} to run on {executor} ({workers} worker{'s' if workers != 1 else ''})")
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), file=sys.stderr, unit="job", desc=cfg.name)

    def done(job: Job, outputs: dict) -> None:
        results[job.key()] = outputs
        payload = {"inputs": job.inputs(), "outputs": outputs}
        _write_atomic(cache / f"{job.key()}.json", json.dumps(payload, sort_keys=True).encode())
        if bar is not None:
            bar.update(1)

    try:
        with kept(cache, f"the finished jobs stay in {cache}, and the same command resumes "
                         "from them"):
            if todo:
                if executor == "local":
                    _local(todo, workers, done, cfg.batch)
                else:
                    _ray(todo, workers, address, done)
    finally:
        if bar is not None:
            bar.close()
    config_path = _source_path(cfg)
    rows = [_row(job, results[job.key()], config_path) for job in jobs if job.key() in results]
    write_table(rows, out)
    return rows
