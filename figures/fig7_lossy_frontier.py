"""Distortion against block efficiency: lossless verifiers and the lossy rules engines ship

Each point is one acceptance rule on random Dirichlet instances with prefix-dependent rows
(V = 4, L = 4, alpha = 0.5 and 1, seeds 0..3 in the full run), computed exactly by the sequence-
tree engine: x = total variation between "output block, then target sampling" and the target law
over L + 1 tokens, y = block efficiency E[tau + 1], both averaged over the instances. The lossless
verifiers (token, block, strict sampled verification) sit at zero distortion; the lossy rules trace
how much block efficiency they buy with how much distortion: token verification with lenience
l in (0, 1] (Leviathan et al., ICML 2023), a probability threshold theta, Medusa's typical
acceptance with epsilon = 0.09 and a range of delta (Cai et al., arXiv 2401.10774), and greedy
matching. Block verification is the most efficient lossless point (it is optimal among valid
single-path verifiers); the lossy rules beat it only by accepting a non-zero TV.

The grid runs on the sweep engine ([`spectheory.sweep`][spectheory.sweep]): one job per instance
and rule, the parameterised rules by their sweep names (``lenient(0.8)``, ``threshold(0.3)``,
``typical(0.09, 0.3)``); this script averages the table's rows and plots them.

Numbers (``figures.json``, key ``fig7_lossy_frontier``): for every rule, its family, parameter,
mean TV and mean block efficiency.

Full run: block verification reaches 2.032 at TV 0 (token 1.886, strict 1.299); lenience l = 0.8
reaches 2.076 at TV 0.079, greedy matching 1.187 at TV 0.434.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from _common import by_key, pyplot, run_grid, run_script, save, verifier_style

LOSSLESS = ("token", "block", "strict")


def rules(quick: bool):
    """name -> (family, parameter, verifier name in the sweep)."""
    lens = (1, 0.8, 0.6, 0.4, 0.2) if not quick else (1, 0.5, 0.2)
    thetas = (0.5, 0.3, 0.2, 0.1, 0.05, 0.0) if not quick else (0.3, 0.1, 0.0)
    deltas = (0.6, 0.3, 0.15, 0.05) if not quick else (0.3, 0.05)
    out = {v: (v, None, v) for v in LOSSLESS}
    out.update({f"lenient l={lam}": ("lenient", lam, f"lenient({lam!r})") for lam in lens})
    out.update({f"threshold {t}": ("threshold", t, f"threshold({t!r})") for t in thetas})
    out.update({f"typical delta={d}": ("typical", d, f"typical(0.09, {d!r})") for d in deltas})
    out["greedy"] = ("greedy", None, "greedy")
    return out


def grid(V: int, L: int, seeds, alphas, quick: bool) -> dict:
    """The sweep: random prefix-dependent instances (every alpha and seed) and every rule."""
    return {"sweep": {"name": "fig7-lossy-frontier"},
            "instances": [{"family": "random", "vocab": V, "block": L, "seeds": list(seeds),
                           "alpha": list(alphas)}],
            "verifiers": [{"name": [v for _, _, v in rules(quick).values()]}]}


def compute(quick: bool = False) -> dict:
    V, L = (3, 3) if quick else (4, 4)
    seeds = range(2) if quick else range(4)
    alphas = (0.5, 1.0)
    rows = by_key([dict(r, alpha=json.loads(r["knobs"])["alpha"])
                   for r in run_grid(grid(V, L, seeds, alphas, quick))], "alpha", "seed", "name")
    table = {}
    for name, (family, param, v) in rules(quick).items():
        res = [rows[a, s, v] for a in alphas for s in seeds]
        table[name] = {"family": family, "parameter": param,
                       "tv": float(np.mean([r["tv_to_target"] for r in res])),
                       "block_efficiency": float(np.mean([r["block_efficiency"] for r in res]))}
    return {"V": V, "L": L, "alphas": list(alphas), "seeds": list(seeds), "points": table}


def draw(data: dict, out: Path, quick: bool = False) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    pts = data["points"]
    for family in ("lenient", "threshold", "typical", "greedy"):
        rows = [r for r in pts.values() if r["family"] == family]
        if not rows:
            continue
        rows.sort(key=lambda r: r["tv"])
        s = verifier_style(family)
        ax.plot([r["tv"] for r in rows], [r["block_efficiency"] for r in rows], ms=4,
                label=family, **s._replace(linestyle=s.linestyle if len(rows) > 1 else "none"
                                           ).kwargs())  # one point: no line in the legend
    for name in LOSSLESS:
        r = pts[name]
        s = verifier_style(name)
        ax.plot([r["tv"]], [r["block_efficiency"]], ls="none", marker=s.marker, color=s.color,
                mec="black", ms=8, label=f"{name} (lossless)")
    ax.set_xlabel("total variation from the target law (L + 1 tokens)")
    ax.set_ylabel("block efficiency E[tau + 1]")
    ax.set_title(f"Distortion vs efficiency, V = {data['V']}, L = {data['L']} "
                 f"(mean over {len(data['seeds']) * len(data['alphas'])} instances)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    save(fig, out, "fig7_lossy_frontier", quick=quick)


def headline(data: dict) -> str:
    """The run's result in one sentence (the module docstring quotes the committed full run)."""
    pts = data["points"]
    first_lenient = min((r for r in pts.values() if r["family"] == "lenient" and r["tv"] > 1e-9),
                        key=lambda r: r["tv"])
    return (f"Full run: block verification reaches {pts['block']['block_efficiency']:.3f} at "
            f"TV 0 (token {pts['token']['block_efficiency']:.3f}, strict "
            f"{pts['strict']['block_efficiency']:.3f}); lenience l = {first_lenient['parameter']} "
            f"reaches {first_lenient['block_efficiency']:.3f} at TV {first_lenient['tv']:.3f}, "
            f"greedy matching {pts['greedy']['block_efficiency']:.3f} at TV "
            f"{pts['greedy']['tv']:.3f}.")


def main(out: Path, quick: bool = False) -> dict:
    """Compute the points, write ``out/fig7_lossy_frontier.{png,pdf}``, return the numbers."""
    data = compute(quick)
    draw(data, Path(out), quick)
    return data


if __name__ == "__main__":
    run_script(main)
