"""Helpers shared by the figure scripts of this folder (``figN_<name>.py``).

Toy instances by family and knob ([`spectheory.toy_models`][spectheory.toy_models]), running a
figure's grid on the sweep engine ([`spectheory.sweep`][spectheory.sweep], `run_grid`: one job per
instance and verifier, LP or measure, in child processes, as one table), the multi-path table that
figures 4 and 5 both plot (computed once per process), the published numbers of Sun et al. that
figure 6 compares with, and saving a matplotlib figure as PNG and PDF with fixed metadata
(byte-stable reruns).

Every verifier is drawn in one colour, marker and line style in every figure (and in
``spectheory sweep plot``): the scripts take them from the one palette map,
[`spectheory.sweep.palette`][spectheory.sweep.palette] (`verifier_style`, `optimum_style`,
re-exported here), never from matplotlib's colour cycle.

Each script's ``main(out, quick=False)`` writes ``out/<stem>.png`` and ``out/<stem>.pdf`` and
returns the numbers behind the figure; ``spectheory figures`` runs them all. A script also runs
on its own: ``python figures/fig3_tau_pmf.py [--quick] [--out DIR]`` (with ``spectheory``
importable) writes its two files and prints its numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np

from spectheory.runtime.errors import SpectheoryError
from spectheory.cli.figures import check_out, jsonable
from spectheory.inputs.instances import Instance
from spectheory.registry import DRAFTING_MAX_PATHS
from spectheory.sweep.palette import Style, optimum_style, verifier_style  # noqa: F401
from spectheory.verifiers import MULTI_PATH

#: The published numbers (Sun et al., PaLM-2 S target / XXS draft, average of 8 datasets).
PAPER = {
    "source": "Sun et al., Block Verification Accelerates Speculative Decoding, arXiv 2403.10444",
    "models": "PaLM-2 S target, PaLM-2 XXS draft, average over 8 datasets",
    "gain_pct": {4: 3.5, 6: 6.2, 8: 8.3},
    "token_be_L8": 3.41,
    "block_be_L8": 3.70,
}

#: Family parameters shared by the figures (the knob is varied on top of these).
FAMILY_BASE = {
    "dirichlet": {},
    "logit-noise": {"alpha": 0.5},
    "mixture": {"alpha": 0.3},
    "temperature": {"alpha": 0.5},
    "ngram": {"order": 4, "vocab_size": 5, "draft_fraction": 0.1},
}
#: The divergence knob of each family (see `spectheory.toy_models.FAMILIES`).
KNOB = {"dirichlet": "alpha", "logit-noise": "sigma", "mixture": "eps",
        "temperature": "temperature", "ngram": "draft_order"}
FORMATS = ("png", "pdf")


# ----------------------------------------------------------------------------- instances


def make_family(family: str, V: int, L: int, seed: int, knob_value) -> Instance:
    """A toy instance of ``family`` (`FAMILY_BASE` parameters) with its knob at
    ``knob_value``."""
    from spectheory.toy_models import make_instance

    params = dict(FAMILY_BASE.get(family, {}))
    params.setdefault("vocab_size", V)
    params.update(block_length=L, seed=seed)
    params[KNOB[family]] = knob_value
    return make_instance(family, **params)


# ----------------------------------------------------------------------------- sweeps


#: Per-job limits of the figures' sweeps: a generous clock, so that a full run is never cut
#: short, and no memory limit (reading a child's memory costs more than most of these jobs).
GRID_LIMITS = {"time_limit": 7200, "memory_limit_mb": 0}
_TABLES = ("instances", "verifiers", "optima", "measures")


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise SpectheoryError(f"a sweep value must be finite; got {v!r}")
        return repr(v)  # the shortest text that reads back as the same float
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise SpectheoryError(f"a sweep value must be a number, a string or a list; got {v!r}")


def sweep_toml(config: dict) -> str:
    """The TOML text of a sweep given as a dict: ``"sweep"`` a table, ``"instances"``,
    ``"verifiers"``, ``"optima"`` and ``"measures"`` lists of tables (the keys of
    `spectheory.sweep.config`). Floats are written as their ``repr``, which reads back as the
    same float, so the jobs see exactly the values of the dict."""
    lines = []
    if config.get("sweep"):
        lines.append("[sweep]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in config["sweep"].items()]
    for name in _TABLES:
        for table in config.get(name, []):
            lines.append(f"[[{name}]]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    unknown = set(config) - {"sweep", *_TABLES}
    if unknown:
        raise SpectheoryError(f"unknown sweep table {sorted(unknown)[0]!r}")
    return "\n".join(lines) + "\n"


def describe_row(r: dict) -> str:
    """A sweep row's method and instance in a few words."""
    what = r["name"] + (f" tree ({r['shape']})" if r.get("shape") else
                        f", K = {r['paths']}" if r["kind"] != "measure" else "")
    if r["drafting"]:
        what += f", {r['drafting']} drafting"
    knobs = ", ".join(f"{k} = {v}" for k, v in json.loads(r["knobs"]).items())
    return (f"{what} on {r['family']} (V = {r['vocab']}, L = {r['block']}, seed {r['seed']}"
            + (f", {knobs}" if knobs else "") + ")")


def run_grid(config: dict) -> list[dict]:
    """Run a figure's grid on the sweep engine and return its rows (grid order).

    ``config`` is the sweep as a dict (`sweep_toml`); it runs through
    [`run_sweep`][spectheory.sweep.run_sweep] with the default local executor and its default
    workers, in a fresh temporary folder (nothing is reused between runs; in memory, under
    ``/dev/shm``, where there is one), under `GRID_LIMITS`. Unless the config sets ``batch``,
    each worker's child process runs its share of the jobs (dealt round-robin) one after the
    other: the figures' jobs mostly take milliseconds, less than forking a process. A job that
    did not end ``ok`` is never dropped: the figure stops with `SpectheoryError` naming every
    such row and its error."""
    import os

    from spectheory.runtime.partial import partial_folder, release
    from spectheory.sweep import load_config, run_sweep
    from spectheory.sweep.config import count_jobs

    config = {**config, "sweep": {**GRID_LIMITS, **config.get("sweep", {})}}
    name = config["sweep"].get("name", "figure")
    if "batch" not in config["sweep"]:
        workers = max(1, min(os.cpu_count() or 1, 8))  # run_sweep's default
        jobs = count_jobs(load_config(sweep_toml(config)))
        config["sweep"]["batch"] = max(1, -(-jobs // workers))
    shm = Path("/dev/shm")
    # held while it is written: the command line's SIGTERM handler removes it too (it ends the
    # process at once, without this block's cleanup)
    folder = partial_folder(f"spectheory-fig-{name}-",
                            shm if shm.is_dir() and os.access(shm, os.W_OK) else None)
    try:
        rows = run_sweep(load_config(sweep_toml(config)), folder)
    finally:
        release(folder)
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        raise SpectheoryError(
            f"{len(failed)} of {len(rows)} jobs of the {name} sweep did not finish: "
            + "; ".join(f"{describe_row(r)}: {r['status']}: {r['error']}" for r in failed))
    return rows


def by_key(rows: list[dict], *columns) -> dict:
    """The rows indexed by the values of ``columns`` (a tuple key; one row per key)."""
    out = {}
    for r in rows:
        key = tuple(r[c] for c in columns)
        if key in out:
            raise SpectheoryError(f"two rows of the sweep share {dict(zip(columns, key))}")
        out[key] = r
    return out


# ----------------------------------------------------------------------------- multi-path


#: Grid of figures 4 and 5 (full run / quick run).
MULTIPATH_GRID = {
    False: {"V": 3, "L": 2, "Ks": (1, 2, 3, 4), "seeds": 6, "direct_max_K": 4},
    True: {"V": 2, "L": 2, "Ks": (1, 2, 3), "seeds": 1, "direct_max_K": 2},
}


@lru_cache(maxsize=2)
def _multipath_data(quick: bool) -> str:
    """The grid as a sweep (`spectheory.sweep`): one job per instance and verifier or LP, run
    on worker processes and collected into rows per (instance, K)."""
    import os

    from spectheory.runtime.partial import partial_folder, release
    from spectheory.sweep import load_config, run_sweep
    from spectheory.sweep.config import count_jobs

    g = MULTIPATH_GRID[quick]
    verifiers = dict(MULTI_PATH)
    drafting = {name: v.default_drafting for name, v in verifiers.items()}
    Ks = list(g["Ks"])
    small = [K for K in Ks if K <= g["direct_max_K"]]
    text = f"""
[sweep]
name = "multipath-vs-K"
[[instances]]
family = "toy:dirichlet"
vocab = {g["V"]}
block = {g["L"]}
seeds = {list(range(g["seeds"]))}
alpha = 1.0
"""
    for name in verifiers:
        allowed = [K for K in Ks if K <= DRAFTING_MAX_PATHS.get(drafting[name], K)]
        text += (f'[[verifiers]]\nname = "{name}"\npaths = {allowed}\n'
                 f'drafting = "{drafting[name]}"\n')
    text += f'[[optima]]\nproblem = "multipath"\npaths = {Ks}\n'
    schemes = ["iid"] + [d for d in ("norep", "hub") if d in drafting.values()]
    for scheme in schemes:
        paths = [K for K in small if K <= DRAFTING_MAX_PATHS.get(scheme, K)]
        text += f'[[optima]]\nproblem = "direct"\npaths = {paths}\ndrafting = "{scheme}"\n'
    workers = min(2, os.cpu_count() or 1)
    # as `run_grid`: no memory limit to read, one batch of jobs per worker
    batch = -(-count_jobs(load_config(text)) // workers)
    text = text.replace('name = "multipath-vs-K"\n',
                        f'name = "multipath-vs-K"\nmemory_limit_mb = 0\nbatch = {batch}\n')
    folder = partial_folder("spectheory-fig-multipath-", None)  # as `run_grid`'s folder
    try:
        table = run_sweep(load_config(text), folder, workers=workers)
    finally:
        release(folder)
    rows, notes, by_key = [], [], {}
    for seed in range(g["seeds"]):
        for K in Ks:
            row = {"seed": seed, "K": K, "be": {name: None for name in verifiers},
                   "multipath_lp": None, "direct_lp": None, "direct_lp_norep": None,
                   "direct_lp_hub": None}
            rows.append(row)
            by_key[seed, K] = row
    column = {"iid": "direct_lp", "norep": "direct_lp_norep", "hub": "direct_lp_hub"}
    for r in table:
        row = by_key[r["seed"], r["paths"]]
        if r["status"] != "ok":
            notes.append(f"{r['name']}, K = {r['paths']}: {r['error']}")
            continue
        value = float(r["block_efficiency"])
        if r["kind"] == "verifier":
            row["be"][r["name"]] = value
        elif r["name"] == "multipath":
            row["multipath_lp"] = value
        else:
            row[column[r["drafting"]]] = value
    if any(row["multipath_lp"] is None for row in rows):
        raise SpectheoryError("the multi-path LP relaxation failed: " + "; ".join(notes))
    data = {"V": g["V"], "L": g["L"], "Ks": Ks, "seeds": g["seeds"],
            "direct_max_K": g["direct_max_K"], "verifiers": list(verifiers),
            "drafting": drafting, "rows": rows, "notes": sorted(set(notes))}
    return json.dumps(data)


def multipath_data(quick: bool = False) -> dict:
    """E[tau+1] of every multi-path verifier (`spectheory.verifiers.MULTI_PATH`, each under the
    drafting scheme it is lossless for) and the LP optima
    ([`direct_lp`][spectheory.lp.direct.direct_lp] for i.i.d. and without-replacement drafts where
    small enough, [`multipath_lp`][spectheory.lp.multipath.multipath_lp] relaxation) per instance
    and K, on Dirichlet(1) instances. Computed once per process (figures 4 and 5)."""
    return json.loads(_multipath_data(bool(quick)))


def mean_by_K(data: dict, key) -> np.ndarray:
    """Mean over instances of ``key(row)`` per K (NaN where no value)."""
    out = []
    for K in data["Ks"]:
        vals = [key(r) for r in data["rows"] if r["K"] == K]
        vals = [v for v in vals if v is not None]
        out.append(np.mean(vals) if vals else np.nan)
    return np.array(out)


# ----------------------------------------------------------------------------- plotting


def band(values):
    """Median and 10/90% quantiles over instances (rows) per column, ignoring None."""
    arr = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)
    if np.all(np.isnan(arr)):
        return None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return (np.nanmedian(arr, 0), np.nanquantile(arr, 0.1, 0), np.nanquantile(arr, 0.9, 0))


def pyplot():
    """matplotlib.pyplot on the Agg backend with the gallery's style."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 130, "font.size": 9,
                         "pdf.fonttype": 42})  # `save` sets the PDF font type per run
    return plt


def footnote(fig, notes) -> None:
    """Notes on pieces that could not be computed, in small print under the axes."""
    if notes:
        fig.text(0.01, 0.005, "Not available: " + "; ".join(notes), fontsize=6.5,
                 color="tab:red", ha="left", va="bottom", wrap=True)


def save(fig, out: Path, stem: str, quick: bool = False) -> list[Path]:
    """Write ``out/<stem>.png`` and ``out/<stem>.pdf`` (fixed metadata, no creation date) and
    close the figure.

    The full run's PDF embeds its fonts as TrueType (``pdf.fonttype`` 42: text a journal's
    checker and a reader's search both accept); a ``quick`` run's PDF is a draft and embeds Type 3
    fonts, which matplotlib writes without subsetting the TrueType file (about 0.3 s of CPU less a
    figure, half the PDF's writing time)."""
    import matplotlib
    import matplotlib.pyplot as plt

    fig.tight_layout(rect=(0, 0.03, 1, 1))
    # tight_layout leaves a placeholder layout engine on the figure, and savefig draws a figure
    # that has one an extra time (rendering disabled) before the real draw; the layout is final
    # here, so the engine goes (whatever the rc's autolayout) and each file is drawn once
    with matplotlib.rc_context({"figure.autolayout": False,
                                "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)
    paths = []
    for ext in FORMATS:
        meta = ({"CreationDate": None, "Creator": "spectheory figures"} if ext == "pdf"
                else {"Software": "spectheory figures"})
        path = Path(out) / f"{stem}.{ext}"
        with matplotlib.rc_context({"pdf.fonttype": 3 if quick else 42}):
            fig.savefig(path, metadata=meta)
        paths.append(path)
    plt.close(fig)
    return paths


def run_script(main, argv=None) -> None:
    """Command line of a single figure script: ``[--quick] [--out DIR]``; prints the numbers."""
    p = argparse.ArgumentParser(description=(main.__module__ or "figure"))
    p.add_argument("--quick", action="store_true", help="small grids")
    p.add_argument("--out", default=".", help="output folder (default: .)")
    args = p.parse_args(argv)
    try:  # as `spectheory figures` refuses them: one line, exit 2 (a file or /proc/x as the
        # folder was a traceback, and an empty --out wrote into the current folder)
        check_out(args.out)
        out = Path(args.out)
        try:
            if out.exists() and not out.is_dir():
                raise NotADirectoryError(20, "not a folder")
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpectheoryError(f"cannot create output folder {args.out!r}: "
                                  f"{exc.strerror or exc}") from None
        numbers = main(out, quick=args.quick)
    except SpectheoryError as exc:
        sys.stderr.write(f"{p.prog}: error: {exc}\n")
        raise SystemExit(2) from None
    sys.stdout.write(json.dumps(jsonable(numbers), indent=1) + "\n")
