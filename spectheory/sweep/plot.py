"""``spectheory sweep plot OUT``: the standard views of a sweep's table.

Left: mean E[tau + 1] over the sweep's instances against the chosen axis (K, L or V), one line
per verifier (and drafting scheme), LP optima dashed. Right: the mean gap to the direct LP's
optimum on the same instances (only jobs whose instance has that optimum at the same K).
Failed jobs are left out and counted in the title.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from ..runtime.errors import OptionError


def _rows(out: Path) -> list[dict]:
    path = out / "results.csv"
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))
    except OSError as exc:
        raise OptionError(f"cannot read {path}: {exc.strerror or exc}; run the sweep first") \
            from None


def series(rows: list[dict], x: str = "paths"):
    """``{label: {x: mean E[tau+1]}}`` and ``{label: {x: mean gap to the direct optimum}}``."""
    values = defaultdict(lambda: defaultdict(list))
    optimum = {}
    for r in rows:
        if r["status"] != "ok":
            continue
        inst = (r["family"], r["vocab"], r["block"], r["seed"], r["knobs"], r["exact"],
                r.get("sampling", ""), r.get("draft_sampling", ""))
        if r["kind"] == "optimum" and r["name"] == "direct":
            optimum[inst + (r["paths"], r["drafting"] or "iid")] = float(r["block_efficiency"])
    gaps = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["status"] != "ok" or r["kind"] == "measure":  # a measure has no E[tau+1]
            continue
        label = (f"{r['name']} LP" if r["kind"] == "optimum" else r["name"]) + \
            (f" tree {r['shape']}" if r.get("shape") else "") + \
            (f" ({r['drafting']})" if r["drafting"] and r["drafting"] != "iid" else "") + \
            (f" [{r['sampling']}]" if r.get("sampling") else "")
        be = float(r["block_efficiency"])
        values[label][int(r[x])].append(be)
        inst = (r["family"], r["vocab"], r["block"], r["seed"], r["knobs"], r["exact"],
                r.get("sampling", ""), r.get("draft_sampling", ""))
        opt = optimum.get(inst + (r["paths"], r["drafting"] or "iid"))
        if r["kind"] == "verifier" and opt is not None and not r.get("shape"):  # K paths
            gaps[label][int(r[x])].append(opt - be)
    mean = lambda d: {k: sum(v) / len(v) for k, v in sorted(d.items())}  # noqa: E731
    return ({k: mean(v) for k, v in values.items()}, {k: mean(v) for k, v in gaps.items()})


def plot_sweep(out, figure: str | None = None, x: str = "paths") -> Path:
    """Draw the standard views of the sweep in ``out``; returns the image path."""
    out = Path(out)
    rows = _rows(out)
    if x not in ("paths", "block", "vocab"):
        raise OptionError(f"--x {x!r}: choose paths, block or vocab")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise OptionError("plotting needs matplotlib: pip install 'spectheory[figures]'") \
            from None
    eff, gaps = series(rows, x)
    if not eff:
        raise OptionError(f"{out}/results.csv has no successful rows to plot")
    failed = sum(r["status"] != "ok" for r in rows)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for label, d in sorted(eff.items()):
        a.plot(list(d), list(d.values()), "--" if label.endswith(("LP", "LP)")) or " LP" in label
               else "-", marker="o", label=label)
    a.set_xlabel({"paths": "K (paths)", "block": "L", "vocab": "V"}[x])
    a.set_ylabel("mean E[tau + 1]")
    a.legend(fontsize=8)
    for label, d in sorted(gaps.items()):
        b.plot(list(d), list(d.values()), marker="o", label=label)
    b.set_xlabel(a.get_xlabel())
    b.set_ylabel("mean gap to the direct LP optimum")
    if gaps:
        b.legend(fontsize=8)
    fig.suptitle(f"{len(rows)} jobs" + (f", {failed} failed (left out)" if failed else ""))
    fig.tight_layout()
    path = Path(figure) if figure else out / "sweep.png"
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise OptionError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return path
