"""Gain of block over token verification vs draft/target divergence

The relative block-efficiency gain E[tau+1]_block / E[tau+1]_token - 1 (in %) of block verification
(Sun et al., arXiv 2403.10444) over token verification, against the mean per-step total variation
TV(p(.|s), q(.|s)) along the draft's own paths
([`mean_divergence`][spectheory.toy_models.divergence.mean_divergence]), one curve per block length
L = 2, 4, 6, 8, one panel per toy family: Dirichlet rows (knob alpha), noisy target logits (sigma),
q = (1 - eps) p + eps uniform (eps), and character n-grams of a public-domain text (4-gram target,
draft of order 1-3 fitted on 10% of the text, V = 5). Each point is the mean over 3 seeds at one
knob value (V = 4 except the n-grams). The gain is zero when the draft equals the target (TV = 0)
and when the two share nothing, and grows with L.

The grid runs on the sweep engine ([`spectheory.sweep`][spectheory.sweep]): one job per instance
(family, knob value, seed, L; built for the largest L and truncated) and quantity (token, block,
mean TV, mean KL); this script only reads the table and plots it.

Numbers (``figures.json``, key ``fig2_gain_vs_divergence``): per family, one point per knob value,
seed and L with the mean TV and KL divergence and both block efficiencies, exact in float64.

Full run: the largest gain on one instance is +31.0% (dirichlet, alpha = 4.0, seed 2, L = 8, TV =
0.265).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from _common import FAMILY_BASE, KNOB, by_key, pyplot, run_grid, run_script, save

STEM = "fig2_gain_vs_divergence"
GRID = {
    False: {"V": 4, "Ls": (2, 4, 6, 8), "seeds": 3, "knobs": {
        "dirichlet": (0.1, 0.2, 0.4, 0.7, 1.0, 2.0, 4.0, 10.0),
        "logit-noise": (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0),
        "mixture": (0.05, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9, 1.0),
        "ngram": (1, 2, 3)}},
    True: {"V": 3, "Ls": (2, 4), "seeds": 1, "knobs": {
        "dirichlet": (0.2, 1.0, 5.0),
        "logit-noise": (0.25, 1.0, 3.0),
        "mixture": (0.1, 0.5, 1.0),
        "ngram": (1, 2, 3)}},
}
FAMILY_TITLES = {
    "dirichlet": "Dirichlet rows (knob alpha)",
    "logit-noise": "noisy target logits (knob sigma)",
    "mixture": "q = (1-eps) p + eps uniform (knob eps)",
    "temperature": "draft at temperature T (knob T)",
    "ngram": "character n-grams of a real text\n(4-gram target; knob: draft order 1-3,\n"
             "draft fitted on 10% of the text)",
}


def grid(V: int, Ls, seeds: int, knobs: dict) -> dict:
    """The sweep: one instance table per family (its `FAMILY_BASE` parameters, its knob's
    values; the n-gram family has its own V), each instance built for the largest L and
    truncated; token and block verification and the mean TV and KL divergence."""
    instances = []
    for family, values in knobs.items():
        base = dict(FAMILY_BASE.get(family, {}))
        instances.append({"family": f"toy:{family}", "vocab": base.pop("vocab_size", V),
                          "block": list(Ls), "seeds": list(range(seeds)),
                          "truncate_from": max(Ls), **base, KNOB[family]: list(values)})
    return {"sweep": {"name": "fig2-gain-vs-divergence"}, "instances": instances,
            "verifiers": [{"name": ["token", "block"]}], "measures": [{"name": ["tv", "kl"]}]}


def compute(V: int, Ls, seeds: int, knobs: dict) -> dict:
    table = run_grid(grid(V, Ls, seeds, knobs))
    rows = by_key([dict(r, knob=json.loads(r["knobs"])[KNOB[r["family"][4:]]]) for r in table],
                  "family", "knob", "seed", "block", "name")
    panels = []
    for family, values in knobs.items():
        points = []
        for k in values:
            for seed in range(seeds):
                for L in Ls:
                    at = {n: rows[f"toy:{family}", k, seed, L, n]
                          for n in ("token", "block", "tv", "kl")}
                    points.append({
                        "knob": k, "seed": seed, "L": L,
                        "tv": at["tv"]["value"], "kl": at["kl"]["value"],
                        "token_be": at["token"]["expected_accepted"] + 1,
                        "block_be": at["block"]["expected_accepted"] + 1,
                    })
        panels.append({"family": family, "knob": KNOB[family],
                       "V": FAMILY_BASE.get(family, {}).get("vocab_size", V),
                       "params": FAMILY_BASE.get(family, {}), "points": points})
    best_family, best = max(((p["family"], pt) for p in panels for pt in p["points"]),
                            key=lambda fp: fp[1]["block_be"] / fp[1]["token_be"])
    return {"Ls": list(Ls), "seeds": seeds, "panels": panels,
            "largest_gain": {"family": best_family, **best,
                             "gain_pct": 100 * (best["block_be"] / best["token_be"] - 1)}}


def plot(data: dict):
    plt = pyplot()
    n = len(data["panels"])
    fig, axes = plt.subplots(1, n, figsize=(4.1 * n, 4.4), sharey=True)
    colors = plt.cm.viridis(np.linspace(0.0, 0.85, len(data["Ls"])))
    for ax, panel in zip(np.atleast_1d(axes), data["panels"]):
        for color, L in zip(colors, data["Ls"]):
            pts = [p for p in panel["points"] if p["L"] == L]
            xs, ys = [], []
            for k in sorted({p["knob"] for p in pts}):
                sel = [p for p in pts if p["knob"] == k]
                xs.append(np.mean([p["tv"] for p in sel]))
                ys.append(100 * np.mean([p["block_be"] / p["token_be"] - 1 for p in sel]))
            order = np.argsort(xs)
            ax.plot(np.array(xs)[order], np.array(ys)[order], marker="o", ms=4, color=color,
                    label=f"L = {L}")
        ax.set_title(f"{FAMILY_TITLES[panel['family']]}, V = {panel['V']}", fontsize=10)
        ax.set_xlabel("mean per-step TV(p, q) along draft paths")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("block-efficiency gain of block over token (%)")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.suptitle("Relative gain E[tau+1]_block / E[tau+1]_token - 1 vs draft/target divergence "
                 f"(mean over {data['seeds']} seed(s) per knob value)", fontsize=11)
    return fig


def headline(data: dict) -> str:
    """The run's result in one sentence (the module docstring quotes the committed full run)."""
    b = data["largest_gain"]
    return (f"Full run: the largest gain on one instance is {b['gain_pct']:+.1f}% ({b['family']}, "
            f"{KNOB[b['family']]} = {b['knob']}, seed {b['seed']}, L = {b['L']}, "
            f"TV = {b['tv']:.3f}).")

def main(out: Path, quick: bool = False) -> dict:
    """Write ``out/fig2_gain_vs_divergence.{png,pdf}``; return the numbers plotted."""
    data = compute(**GRID[quick])
    save(plot(data), out, STEM, quick=quick)
    return data


if __name__ == "__main__":
    run_script(main)
