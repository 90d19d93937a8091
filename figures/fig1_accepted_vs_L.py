"""Expected accepted tokens vs block length

E[tau], the expected number of accepted draft tokens per target call, against the block length
L = 1..8 for token verification (standard speculative sampling), block verification (Sun et al.,
arXiv 2403.10444), the optimum of the node-budget LP (Thomas & Pal, arXiv 2602.16961; it equals
block verification's E[tau], solved for L <= 6) and the full-knowledge coupling bound
sum_i sum_{x^i} min(q(x^i), p(x^i)) (an upper bound no verifier reaches). Line = median, band =
10-90% over 16 random instances with V = 4; each instance is built once for the largest L and
truncated, so the curves follow the same models. Left: independent Dirichlet(1) draft and target
rows; right: draft = target logits plus N(0, 1) noise of scale 1 (target rows Dirichlet(0.5)).

The grid runs on the sweep engine ([`spectheory.sweep`][spectheory.sweep]): one job per instance,
L and quantity (token, block, node-budget LP, coupling bound), the instances built by the sweep's
toy families with ``truncate_from`` = the largest L; this script only reads the table and plots it.

Numbers (``figures.json``, key ``fig1_accepted_vs_L``): for each panel, E[tau] of token and block
verification, the LP optimum minus 1 and the coupling bound minus 1, per instance (rows) and L
(columns), all exact in float64 (full sequence-tree enumeration, no sampling).

Full run, median E[tau] at L = 8: token 1.18, block 1.49, bound 1.88 (Dirichlet); token 2.98, block
3.76, bound 4.35 (logit noise).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from _common import (FAMILY_BASE, band, by_key, optimum_style, pyplot, run_grid, run_script,
                     save, verifier_style)

STEM = "fig1_accepted_vs_L"
GRID = {False: {"V": 4, "Ls": tuple(range(1, 9)), "seeds": 16, "lp_max_L": 6},
        True: {"V": 3, "Ls": (1, 2, 3, 4), "seeds": 3, "lp_max_L": 3}}
PANELS = [("dirichlet", {"alpha": 1.0}), ("logit-noise", {"sigma": 1.0})]


def grid(V: int, Ls, seeds: int, lp_max_L: int) -> dict:
    """The sweep: both panels' families (each instance built for the largest L and truncated),
    token and block verification, the coupling bound, and the node-budget LP up to
    ``lp_max_L``."""
    optima = [{"problem": "coupling"}]
    solved = [L for L in Ls if L <= lp_max_L]
    if solved:
        optima.append({"problem": "node-budget", "block": solved})
    return {"sweep": {"name": "fig1-accepted-vs-L"},
            "instances": [{"family": f"toy:{family}", "vocab": V, "block": list(Ls),
                           "seeds": list(range(seeds)), "truncate_from": max(Ls),
                           **FAMILY_BASE.get(family, {}), **knob} for family, knob in PANELS],
            "verifiers": [{"name": ["token", "block"]}],
            "optima": optima}


def compute(V: int, Ls, seeds: int, lp_max_L: int) -> dict:
    rows = by_key(run_grid(grid(V, Ls, seeds, lp_max_L)), "family", "seed", "block", "name")
    panels = []
    for family, knob in PANELS:
        values = {k: [] for k in ("token", "block", "lp", "coupling")}
        for seed in range(seeds):
            at = {(name, L): r for (f, s, L, name), r in rows.items()
                  if f == f"toy:{family}" and s == seed}
            values["token"].append([at["token", L]["expected_accepted"] for L in Ls])
            values["block"].append([at["block", L]["expected_accepted"] for L in Ls])
            values["lp"].append([at["node-budget", L]["block_efficiency"] - 1.0
                                 if L <= lp_max_L else None for L in Ls])
            values["coupling"].append([at["coupling", L]["block_efficiency"] - 1.0 for L in Ls])
        panels.append({"family": family, "params": {**FAMILY_BASE.get(family, {}), **knob},
                       "values": values})
    return {"V": V, "Ls": list(Ls), "seeds": seeds, "lp_max_L": lp_max_L, "panels": panels}


def plot(data: dict):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(data["panels"]), figsize=(11, 4.6), sharey=True)
    Ls = np.array(data["Ls"])
    titles = {"dirichlet": "independent random draft and target\n"
                           "(Dirichlet rows, alpha = {alpha})",
              "logit-noise": "draft = noisy target\n"
                             "(logit noise sigma = {sigma}, target alpha = {alpha})"}
    for ax, panel in zip(np.atleast_1d(axes), data["panels"]):
        vals = panel["values"]
        style = [("coupling", "coupling bound (full knowledge, not reachable)",
                  optimum_style("coupling")),
                 ("block", "block verification", verifier_style("block")),
                 ("token", "token verification", verifier_style("token"))]
        for key, label, s in style:
            med, lo, hi = band(vals[key])
            ax.plot(Ls, med, ms=4, label=label, **s.kwargs())
            ax.fill_between(Ls, lo, hi, color=s.color, alpha=0.15, lw=0)
        b = band(vals["lp"])
        s = optimum_style("node-budget")
        ax.plot(Ls, b[0], ls="none", marker=s.marker, color=s.color, ms=9, mew=1.5,
                label=f"node-budget LP optimum (solved, L <= {data['lp_max_L']})")
        ax.plot(Ls, Ls, color="k", lw=0.6, ls=":", label="L (every draft token accepted)")
        ax.set_title(titles[panel["family"]].format(**panel["params"]), fontsize=10)
        ax.set_xlabel("block length L (draft tokens per target call)")
        ax.set_xticks(Ls)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("expected accepted draft tokens E[tau]")
    np.atleast_1d(axes)[0].legend(fontsize=8, loc="upper left")
    top = max(max(v for row in p["values"]["block"] for v in row) for p in data["panels"])
    for ax in np.atleast_1d(axes):
        ax.set_ylim(0, max(top * 1.6, 1.0))
    fig.suptitle(f"Expected accepted tokens vs block length (V = {data['V']}; median over "
                 f"{data['seeds']} random instances, band = 10-90%)", fontsize=11)
    return fig


def headline(data: dict) -> str:
    """The run's result in one sentence (the module docstring quotes the committed full run)."""
    import numpy as np

    L = data["Ls"][-1]
    names = {"dirichlet": "Dirichlet", "logit-noise": "logit noise"}
    parts = []
    for p in data["panels"]:
        med = {k: float(np.median([row[-1] for row in p["values"][k]]))
               for k in ("token", "block", "coupling")}
        parts.append(f"token {med['token']:.2f}, block {med['block']:.2f}, bound "
                     f"{med['coupling']:.2f} ({names[p['family']]})")
    return f"Full run, median E[tau] at L = {L}: " + "; ".join(parts) + "."

def main(out: Path, quick: bool = False) -> dict:
    """Write ``out/fig1_accepted_vs_L.{png,pdf}``; return the numbers plotted."""
    data = compute(**GRID[quick])
    save(plot(data), out, STEM, quick=quick)
    return data


if __name__ == "__main__":
    run_script(main)
