"""``spectheory sweep plot OUT``: the standard views of a sweep's table.

Left: mean E[tau + 1] over the sweep's instances against the chosen axis (K, L or V), one line
per verifier (and drafting scheme), LP optima dashed. Right: the mean gap to the direct LP's
optimum on the same instances (only jobs whose instance has that optimum at the same K). Each
verifier is drawn in its style of the palette map
([`spectheory.sweep.palette`][spectheory.sweep.palette]), the one the figure gallery uses.
Failed jobs are left out and counted in the title.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from ..runtime.errors import OptionError
from .palette import Style, optimum_style, verifier_style


#: Columns the plot reads, and the count columns among them (positive whole numbers).
_NEEDED = ("family", "vocab", "block", "seed", "knobs", "kind", "name", "paths", "drafting",
           "exact", "status", "block_efficiency")
_COUNTS = ("vocab", "block", "paths")


def _rows(out: Path) -> list[dict]:
    """The table's rows, checked as far as the plot reads them: an edited or foreign table is
    refused in one line naming the row and column (a non-number raised a traceback, and a
    negative or NaN E[tau+1] was drawn)."""
    import math

    path = out / "results.csv"
    if path.exists() and not path.is_file():  # a FIFO would block the read, a folder fail it
        raise OptionError(f"cannot read {path}: it is not a regular file; run the sweep first")
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            columns = reader.fieldnames or []
    except OSError as exc:
        raise OptionError(f"cannot read {path}: {exc.strerror or exc}; run the sweep first") \
            from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise OptionError(f"{path}: not a sweep table ({type(exc).__name__}: "
                          f"{str(exc)[:80]})") from None
    missing = [c for c in _NEEDED if c not in columns]
    if missing:
        raise OptionError(f"{path}: no column {missing[0]!r}; not a sweep table (was it "
                          "edited?)")
    for i, r in enumerate(rows, start=2):  # line numbers of the file, the header being 1
        if any(r.get(c) is None for c in _NEEDED):
            raise OptionError(f"{path} line {i}: fewer fields than columns")
        if r["status"] != "ok" or r["kind"] == "measure":
            continue
        for c in _COUNTS:
            v = r[c]
            if not (v.isascii() and v.isdigit() and len(v) <= 9 and int(v) >= 1):
                raise OptionError(f"{path} line {i}: {c} = {v[:40]!r} is not a positive "
                                  "whole number")
        try:
            be = float(r["block_efficiency"])
        except ValueError:
            be = math.nan
        L = int(r["block"])
        if not (math.isfinite(be) and 1 - 1e-9 <= be <= L + 1 + 1e-9):
            raise OptionError(f"{path} line {i}: block_efficiency = "
                              f"{r['block_efficiency'][:40]!r} is not an E[tau + 1] of block "
                              f"{L} (a number in [1, {L + 1}])")
    return rows


#: The columns that identify a job (rows equal on all of them are one job listed twice).
_JOB_INPUTS = ("family", "vocab", "block", "seed", "knobs", "kind", "name", "paths", "drafting",
               "route", "exact", "sampling", "draft_sampling", "shape")


def _instance(r: dict) -> tuple:
    return (r["family"], r["vocab"], r["block"], r["seed"], r["knobs"], r["exact"],
            r.get("sampling", ""), r.get("draft_sampling", ""))


def _label(r: dict) -> str:
    return ((f"{r['name']} LP" if r["kind"] == "optimum" else r["name"])
            + (f" tree {r['shape']}" if r.get("shape") else "")
            + (f" ({r['drafting']})" if r["drafting"] and r["drafting"] != "iid" else "")
            + (f" [{r['sampling']}]" if r.get("sampling") else ""))


def _plotted(rows: list[dict]) -> list[dict]:
    """The successful rows with an E[tau+1] (a measure has none), each job once."""
    seen, out = set(), []
    for r in rows:
        if r["status"] != "ok" or r["kind"] == "measure":
            continue
        key = tuple(r.get(c, "") for c in _JOB_INPUTS)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def series(rows: list[dict], x: str = "paths"):
    """``{label: {x: mean E[tau+1]}}`` and ``{label: {x: mean gap to the direct optimum}}``.

    Rows that did not end ``ok`` are left out, and a job listed twice (equal inputs) counts
    once, so a mean is never weighted by duplicates."""
    rows = _plotted(rows)
    values = defaultdict(lambda: defaultdict(list))
    optimum = {}
    for r in rows:
        if r["kind"] == "optimum" and r["name"] == "direct":
            optimum[_instance(r) + (r["paths"], r["drafting"] or "iid")] = \
                float(r["block_efficiency"])
    gaps = defaultdict(lambda: defaultdict(list))
    for r in rows:
        label = _label(r)
        be = float(r["block_efficiency"])
        values[label][int(r[x])].append(be)
        opt = optimum.get(_instance(r) + (r["paths"], r["drafting"] or "iid"))
        if r["kind"] == "verifier" and opt is not None and not r.get("shape"):  # K paths
            gaps[label][int(r[x])].append(opt - be)
    mean = lambda d: {k: sum(v) / len(v) for k, v in sorted(d.items())}  # noqa: E731
    return ({k: mean(v) for k, v in values.items()}, {k: mean(v) for k, v in gaps.items()})


def series_styles(rows: list[dict]) -> dict[str, Style]:
    """The style of every series of `series`, from the palette map
    ([`spectheory.sweep.palette`][spectheory.sweep.palette]): a verifier's colour and marker
    (the same in both panels and in the gallery), an optimum's black or grey style. Where
    one verifier has several series (tree shapes, drafting schemes, sampling), they keep its
    colour and marker and take different line styles, the first the verifier's own."""
    styles: dict[str, Style] = {}
    variants: dict[str, list[str]] = defaultdict(list)
    for r in _plotted(rows):
        label = _label(r)
        if label in styles:
            continue
        if r["kind"] == "optimum":
            styles[label] = optimum_style(r["name"], r["drafting"])
            continue
        base = verifier_style(r["name"])
        n = len(variants[r["name"]])
        variants[r["name"]].append(label)
        others = [ls for ls in ("-", "--", ":", "-.") if ls != base.linestyle]
        styles[label] = base if n == 0 else base._replace(
            linestyle=others[(n - 1) % len(others)])
    return styles


def _describe(rows: list[dict], axis: str) -> str:
    """What the plot shows, in a title: the families, sizes and instance count."""
    rows = _plotted(rows)
    inst = {_instance(r) for r in rows}
    fams = sorted({r["family"] for r in rows})
    parts = [", ".join(fams)]
    for col, sym in (("vocab", "V"), ("block", "L")):
        vals = sorted({int(r[col]) for r in rows})
        if col != axis and vals:
            parts.append(f"{sym} = " + ", ".join(map(str, vals)))
    return (f"Mean E[tau + 1] against {_AXIS_NAME[axis]} over {len(inst)} instance(s): "
            + "; ".join(parts))


_AXIS_NAME = {"paths": "K", "block": "L", "vocab": "V"}
_AXIS_LABEL = {"paths": "K (draft paths)", "block": "L (block length)", "vocab": "V (vocabulary)"}


#: Image formats `plot_sweep` writes (by the file name's ending).
FIGURE_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg")


def plot_sweep(out, figure: str | None = None, x: str = "paths") -> Path:
    """Draw the standard views of the sweep in ``out``; returns the image path.

    Left: mean E[tau+1] per series against ``x``; right: the mean gap to the direct LP optimum.
    A verifier has one colour and marker in both panels (`series_styles`); the x axis has
    integer ticks (K, L and V are counts); the title says what is plotted and how many jobs
    failed and were left out."""
    out = Path(out)
    rows = _rows(out)
    if x not in ("paths", "block", "vocab"):
        raise OptionError(f"--x {x!r}: choose paths, block or vocab")
    if figure is not None:  # checked before drawing: a folder, or a format matplotlib lacks
        if Path(figure).is_dir():
            raise OptionError(f"--figure {figure}: is a folder; name the image file, such as "
                              f"{Path(figure) / 'sweep.png'}")
        from ..runtime.files import output_path

        output_path(figure, "--figure")  # a device or FIFO, before anything is drawn
        if Path(figure).suffix.lower().lstrip(".") not in FIGURE_FORMATS:
            raise OptionError(f"--figure {figure}: the file name must end in one of "
                              f"{', '.join('.' + f for f in FIGURE_FORMATS)}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise OptionError("plotting needs matplotlib: pip install 'spectheory[figures]'") \
            from None
    eff, gaps = series(rows, x)
    if not eff:
        raise OptionError(f"{out}/results.csv has no successful rows to plot")
    styles = series_styles(rows)
    failed = sum(r["status"] != "ok" for r in rows)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.4))
    xs = sorted({k for d in eff.values() for k in d})
    for label, d in sorted(eff.items()):
        a.plot(list(d), list(d.values()), label=label, ms=5, **styles[label].kwargs())
    a.set_ylabel("mean E[tau + 1]")
    a.set_title("block efficiency (LP optima in black and grey)", fontsize=10)
    a.legend(fontsize=8)
    for label, d in sorted(gaps.items()):
        b.plot(list(d), list(d.values()), label=label, ms=5, **styles[label].kwargs())
    b.set_ylabel("mean gap to the direct LP optimum")
    b.set_title("gap to the direct LP optimum, same instance and K" if gaps else
                "gap to the direct LP optimum: no direct optimum in this sweep", fontsize=10)
    if gaps:
        b.legend(fontsize=8)
    for ax in (a, b):
        ax.set_xlabel(_AXIS_LABEL[x])
        if len(xs) <= 12:
            ax.set_xticks(xs)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    title = _describe(rows, x)
    if failed:
        title += f"\n{failed} of {len(rows)} jobs failed (left out)"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(figure) if figure else out / "sweep.png"
    from ..runtime.files import atomic_file

    try:  # whole or not at all: a temporary file renamed into place
        with atomic_file(path, "the figure") as tmp:
            fig.savefig(tmp, dpi=120, format=path.suffix.lower().lstrip(".") or "png")
    except OSError as exc:
        raise OptionError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return path
