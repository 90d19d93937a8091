"""Multi-path block efficiency vs number of draft paths

Block efficiency E[tau+1] of each lossless multi-path verifier in `spectheory.verifiers.MULTI_PATH`
(GBV of Thomas & Pal, arXiv 2602.16961; SpecInfer, SpecTr, traversal verification, and block / token
verification on the first path as baselines) with K = 1..4 draft paths, mean over 6 Dirichlet(1)
instances with V = 3, L = 2, each exact in float64 over all V^(LK) joint drafts. Each verifier runs
under the drafting scheme it is lossless for: K i.i.d. paths (solid), distinct first tokens,
"without replacement" (dashed), or SpecHub's hub drafting (dash-dotted; K <= 2). Black marks: the
direct LP optimum over all valid K-path verifiers under each scheme
([`direct_lp`][spectheory.lp.direct.direct_lp]); dotted: the compact node-budget multi-path
relaxation for i.i.d. drafts ([`multipath_lp`][spectheory.lp.multipath.multipath_lp], an upper
bound).

Numbers (``figures.json``, key ``fig4_multipath_vs_K``): one row per instance and K with every
verifier's E[tau+1], the direct LP optima (i.i.d. and without replacement) and the relaxation.

Full run, mean E[tau+1] at K = 4: gbv 2.228, specinfer 2.332, specinfer-norep 2.563, spectr 2.399,
traversal 2.628, traversal-iid 2.338, traversal-tree 2.380, hu 2.506, hu-norep 2.563, khisti 2.505,
global-resolution 2.489, spechub n/a, block-first 2.075, token-first 2.010; direct LP optimum 2.575
(i.i.d.), 2.724 (without replacement).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from _common import (footnote, mean_by_K, multipath_data, optimum_style, pyplot, run_script,
                     save, verifier_style)

STEM = "fig4_multipath_vs_K"


def plot(data: dict):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10.5, 4.8))
    Ks = np.array(data["Ks"])
    note = {"norep": " (drafts without replacement)", "hub": " (hub drafting)"}
    for name in data["verifiers"]:
        y = mean_by_K(data, lambda r, n=name: r["be"].get(n))
        if np.all(np.isnan(y)):
            continue  # nothing to draw (listed in the footnote)
        ax.plot(Ks, y, ms=5, label=name + note.get(data["drafting"][name], ""),
                **verifier_style(name).kwargs())
    s = optimum_style("multipath")
    ax.plot(Ks, mean_by_K(data, lambda r: r["multipath_lp"]), color=s.color, ls=s.linestyle,
            lw=1.5, label="multi-path LP relaxation (upper bound, i.i.d. drafts)")
    for key, drafting, what in (("direct_lp", "iid", "i.i.d. drafts"),
                                ("direct_lp_norep", "norep", "drafts without replacement"),
                                ("direct_lp_hub", "hub", "hub drafting, K <= 2")):
        y = mean_by_K(data, lambda r, key=key: r.get(key))
        if not np.all(np.isnan(y)):
            s = optimum_style("direct", drafting)
            ax.plot(Ks, y, ls="none", color=s.color, marker=s.marker, ms=10, mew=2,
                    label=f"direct LP optimum ({what})")
    footnote(fig, data["notes"])
    ax.set_xticks(Ks)
    ax.set_xlabel("K = number of draft paths")
    ax.set_ylabel("block efficiency E[tau + 1] (tokens per target call)")
    ax.set_title(f"Multi-path verification, Dirichlet(1) instances, V = {data['V']}, "
                 f"L = {data['L']} (mean over {data['seeds']} instance(s))", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def headline(data: dict) -> str:
    """The run's result in one sentence (the module docstring quotes the committed full run)."""
    K = data["Ks"][-1]

    def last(key) -> str:
        v = mean_by_K(data, key)[-1]
        return "n/a" if np.isnan(v) else f"{v:.3f}"

    be = {n: last(lambda r, n=n: r["be"][n]) for n in data["verifiers"]}
    return (f"Full run, mean E[tau+1] at K = {K}: " + ", ".join(f"{n} {v}" for n, v in be.items())
            + f"; direct LP optimum {last(lambda r: r['direct_lp'])} (i.i.d.), "
            f"{last(lambda r: r['direct_lp_norep'])} (without replacement).")


def main(out: Path, quick: bool = False) -> dict:
    """Write ``out/fig4_multipath_vs_K.{png,pdf}``; return the numbers plotted."""
    data = multipath_data(quick)
    save(plot(data), out, STEM, quick=quick)
    return data


if __name__ == "__main__":
    run_script(main)
