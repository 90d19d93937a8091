"""Gap of each multi-path verifier to the multi-path optimum

For each multi-path verifier of figure 4 and each K, the gap 100 (opt - E[tau+1]) / opt in %, where
opt is the direct LP optimum over all valid K-path verifiers under the verifier's own drafting
scheme ([`direct_lp`][spectheory.lp.direct.direct_lp], i.i.d. or without replacement) where it was
solved, else the compact i.i.d. relaxation ([`multipath_lp`][spectheory.lp.multipath.multipath_lp],
an upper bound, so the gap is then overstated). Mean over the instances of figure 4 (Dirichlet(1),
V = 3, L = 2, exact float64). A gap of 0 at K = 1 is the single-path optimality of block
verification.

Numbers (``figures.json``, key ``fig5_multipath_gap``): the mean gap per verifier and K (None
where no optimum exists for the verifier's scheme); the rows behind it are figure 4's.

Full run, mean gap at K = 4: gbv 12.7%, specinfer 9.5%, specinfer-norep 5.9%, spectr 6.9%,
traversal 3.5%, traversal-iid 9.2%, traversal-tree 7.6%, hu 2.7%, hu-norep 5.9%, khisti 2.7%,
global-resolution 3.3%, spechub n/a, block-first 19.8%, token-first 22.4%.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from _common import footnote, multipath_data, pyplot, run_script, save, verifier_style

STEM = "fig5_multipath_gap"


def optimum(row: dict, drafting: str = "iid"):
    """The tightest optimum under ``drafting``: the direct LP where solved, else (i.i.d. drafting
    only) the compact node-budget relaxation, an upper bound."""
    if drafting in ("norep", "hub"):
        return row.get(f"direct_lp_{drafting}")
    return row["direct_lp"] if row["direct_lp"] is not None else row["multipath_lp"]


def gaps(data: dict) -> dict:
    """Mean gap in % per verifier and K."""
    out = {}
    for name in data["verifiers"]:
        per_K = []
        for K in data["Ks"]:
            vals = []
            for r in data["rows"]:
                opt, be = optimum(r, data["drafting"][name]), r["be"].get(name)
                if r["K"] == K and opt is not None and be is not None:
                    vals.append(100 * (opt - be) / opt)
            per_K.append(float(np.mean(vals)) if vals else None)
        out[name] = per_K
    return out


def plot(data: dict, gap: dict):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    Ks = data["Ks"]
    names = data["verifiers"]
    w = 0.8 / max(len(names), 1)
    missing = []
    for j, name in enumerate(names):
        g = np.array([np.nan if v is None else v for v in gap[name]])
        if np.all(np.isnan(g)):
            missing.append(f"{name} (no optimum for its drafting scheme)")
            continue  # nothing drawn, so not in the legend
        s = verifier_style(name)
        x = np.arange(len(Ks)) + (j - (len(names) - 1) / 2) * w
        ax.bar(x, g, w, color=s.color, label=name)
        # the verifier's marker on top of its bars, as in figure 4
        ax.plot(x, g, ls="none", marker=s.marker, color=s.color, ms=4, mec="black", mew=0.4)
    footnote(fig, list(data["notes"]) + missing)
    ax.set_xticks(np.arange(len(Ks)))
    ax.set_xticklabels([f"K = {K}" + ("" if K <= data["direct_max_K"] else "\n(vs relaxation)")
                        for K in Ks])
    ax.set_ylabel("gap to optimum (%)  = 100 (opt - E[tau+1]) / opt")
    ax.set_title(f"Gap of each multi-path verifier to the optimum under its drafting scheme\n"
                 f"(direct LP for K <= {data['direct_max_K']}, i.i.d. relaxation above); "
                 f"V = {data['V']}, L = {data['L']}, mean over {data['seeds']} instances",
                 fontsize=9.5)
    ax.axhline(0, color="k", lw=0.8)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return fig


def headline(numbers: dict) -> str:
    """The run's result in one sentence (the module docstring quotes the committed full run)."""
    K = numbers["Ks"][-1]
    return (f"Full run, mean gap at K = {K}: "
            + ", ".join(f"{n} " + ("n/a" if g[-1] is None else f"{g[-1]:.1f}%")
                        for n, g in numbers["gap_pct"].items()) + ".")

def main(out: Path, quick: bool = False) -> dict:
    """Write ``out/fig5_multipath_gap.{png,pdf}``; return the gaps plotted."""
    data = multipath_data(quick)
    gap = gaps(data)
    save(plot(data, gap), out, STEM, quick=quick)
    return {"Ks": data["Ks"], "direct_max_K": data["direct_max_K"],
            "drafting": data["drafting"], "gap_pct": gap}


if __name__ == "__main__":
    run_script(main)
