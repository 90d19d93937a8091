"""The multi-draft frontier: every multi-draft verifier against the optimum, K = 1..8 paths

E[tau + 1] against the number of draft paths K at block length L = 1 (top row) and L = 3 (bottom
row), for every registered lossless multi-draft verifier under the drafting scheme it is designed
for: K i.i.d. paths (left column: specinfer, spectr, traversal-iid, gbv, hu, khisti,
global-resolution) and K paths whose first tokens are drawn without replacement (right column:
specinfer-norep, traversal, hu-norep). Thick grey: the ceiling, the best valid K-path verifier under
that drafting scheme. At L = 1 it is Hu et al.'s exact optimum 1 + alpha*(p, q, K)
([`optimal_acceptance`][spectheory.bounds.optimal_acceptance], equal to the direct LP at L = 1). At
L = 3 it is the best selection rule ([`selection_lp`][spectheory.lp.selection.selection_lp], equal
to the direct K-path LP, proved in docs/selection-optimum.md) up to K = 3 (i.i.d.) and K = 4
(without replacement); beyond, for i.i.d. drafts only, the compact relaxation
[`multipath_lp`][spectheory.lp.multipath.multipath_lp] (dashed: an upper bound, not attained in
general). Large pentagons: spechub at K = 1, 2 on its own ``hub`` drafts (the draft's top token and one
companion), with the best valid verifier of those drafts
([`direct_lp`][spectheory.lp.direct.direct_lp], ``drafting="hub"``, open grey circles); hub drafts
are not i.i.d., so these may lie above the i.i.d. ceiling.

On these instances, at L = 1 the optimal-transport rules (hu, khisti, global-resolution; hu-norep
without replacement) sit on the ceiling, spechub on its hub optimum, traversal-iid on specinfer and
traversal on specinfer-norep (they coincide at L = 1), and GBV rises to K = 3 and then falls, below
specinfer from K = 5 on. At L = 3 no verifier reaches the K-path optimum for K >= 2: the node-wise
transport rules (hu and khisti, within 6e-4 of each other, and on average a little below them
global-resolution) come closest; GBV is next at K = 2 but falls from there, below specinfer, spectr
and traversal-iid from K = 3 on; without replacement traversal beats specinfer-norep and hu-norep.

Instances: the logit-noise toy family (target rows Dirichlet(0.5), draft logits = target logits plus
Gaussian noise of scale sigma = 1, [`spectheory.toy_models`][spectheory.toy_models]),
prefix-dependent rows, mean over seeds 0..3; V = 8 at L = 1 (so that drafting without replacement is
meaningful up to K = 8) and V = 3 at L = 3 (the affordable size; without replacement the scheme then
draws all 3 first tokens from K = 3 on, so those curves are flat beyond). Every point is exact
(float64): specinfer, and at L = 3 every node-rule verifier, on the draft-tree engine with shape (K,
1, ..., 1) ([`analyze_tree`][spectheory.engine.analysis.analyze_tree]); hu, khisti, global-resolution,
specinfer-norep and hu-norep at L = 1, and spectr, traversal and traversal-iid throughout, on the
joint enumeration of the K paths; gbv on its analytic route. Points that would cost more than a few
seconds per instance are left out, not extrapolated: at L = 1 spectr and traversal-iid stop at K =
6, the verifiers without replacement at K = 7, hu and khisti at K = 6 (their per-node transport
plans refuse more than 2,500 outcomes from K = 7 on); at L = 3 spectr, traversal-iid and traversal
stop at K = 4 and hu, khisti and global-resolution at K = 7 (the selection LP has C(V^L + K - 1, K)
K variables: 110,000 at K = 4, 90 s). A full run takes about 3 minutes on 2 cores, ``--quick`` (one
seed, K <= 4) about 5 s.

The grid runs on the sweep engine ([`spectheory.sweep`][spectheory.sweep]) as one sweep: one
instance table per L, each method restricted to its L with its own K values, the draft-tree points
as tree jobs (``shape`` (K, 1, ..., 1)), the ceilings as the sweep's ``multidraft-l1``,
``selection``, ``multipath`` and ``direct`` optima; this script reads the table into curves and
plots them.

Numbers (``figures.json``, key ``fig10_multidraft_frontier``): per panel, each verifier's and
ceiling's K values, mean E[tau + 1] and per-seed values, the route and seconds (the sweep jobs'
time, summed), the ceilings' kind, and the largest amount by which a verifier's mean exceeds its
exact ceiling (rounding only).

Full run: at L = 1 the optimum reaches 1.9756 at K = 8 with i.i.d. drafts (2.0000 without
replacement); hu gives 1.9587 at K = 6 (optimum 1.9587), specinfer 1.8847 at K = 8, and gbv peaks
at 1.8485 (K = 3) and falls to 1.6641 at K = 8. At L = 3, K = 3 the i.i.d. optimum is 3.5718: hu
3.4845, gbv 3.1878, specinfer 3.2345; without replacement the optimum is 3.6313 (K = 4), traversal
3.4848, hu-norep 3.3862. No verifier exceeds its optimum by more than 2.2e-15.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from _common import FAMILY_BASE, KNOB, pyplot, run_grid, run_script, save, verifier_style
from spectheory.registry import verifier_names

STEM = "fig10_multidraft_frontier"
FAMILY, KNOB_VALUE = "logit-noise", 1.0

#: Verifiers per column, each under its own drafting scheme.
IID = ("specinfer", "spectr", "traversal-iid", "gbv", "hu", "khisti", "global-resolution")
NOREP = ("specinfer-norep", "traversal", "hu-norep")
#: Verifiers with a node rule: on the draft-tree engine (shape (K, 1, ..., 1)) at L > 1, and
#: specinfer at L = 1 too; the others are cheaper on the joint enumeration at L = 1.
NODE_RULE = {"specinfer", "hu", "khisti", "global-resolution", "specinfer-norep", "hu-norep"}

#: The grid: vocabulary per L, seeds, and the largest K each verifier / ceiling is computed for
#: (chosen so that one point costs at most a few seconds on one core).
GRID = {
    False: {
        "seeds": (0, 1, 2, 3), "Ks": tuple(range(1, 9)),
        "V": {1: 8, 3: 3},
        "max_K": {
            1: {"specinfer": 8, "spectr": 6, "traversal-iid": 6, "gbv": 8, "hu": 6, "khisti": 6,
                "global-resolution": 8, "specinfer-norep": 7, "traversal": 7, "hu-norep": 7,
                "ceiling-iid": 8, "ceiling-norep": 8},
            3: {"specinfer": 8, "spectr": 4, "traversal-iid": 4, "gbv": 8, "hu": 7, "khisti": 7,
                "global-resolution": 7, "specinfer-norep": 8, "traversal": 4, "hu-norep": 8,
                "ceiling-iid": 3, "ceiling-norep": 4, "relaxation": 8},
        },
    },
    True: {
        "seeds": (0,), "Ks": (1, 2, 3, 4),
        "V": {1: 8, 3: 3},
        "max_K": {
            1: {"specinfer": 4, "spectr": 4, "traversal-iid": 4, "gbv": 4, "hu": 4, "khisti": 4,
                "global-resolution": 4, "specinfer-norep": 4, "traversal": 4, "hu-norep": 4,
                "ceiling-iid": 4, "ceiling-norep": 4},
            3: {"specinfer": 3, "spectr": 3, "traversal-iid": 3, "gbv": 4, "hu": 3, "khisti": 3,
                "global-resolution": 3, "specinfer-norep": 3, "traversal": 3, "hu-norep": 3,
                "ceiling-iid": 2, "ceiling-norep": 2, "relaxation": 4},
        },
    },
}


# ----------------------------------------------------------------------------- numbers


def _route(name: str, L: int) -> str:
    """How a verifier's E[tau + 1] is computed: GBV on its analytic route, node rules on the
    draft tree (K, 1, ..., 1) where that is cheaper, the others on the joint enumeration."""
    if name == "gbv":
        return "gbv analytic"
    if name in NODE_RULE and (L > 1 or name == "specinfer"):
        return "draft tree (K, 1, ..., 1)"
    return "joint enumeration"


def _Ks(g: dict, L: int, key: str) -> list[int]:
    return [K for K in g["Ks"] if K <= g["max_K"][L][key]]


def _chain(K: int, L: int) -> str:
    return ",".join([str(K)] + ["1"] * (L - 1))


def grid(g: dict) -> dict:
    """The sweep: one instance table per L (its own V), each method restricted to its L
    (``block``) with the K values of ``g["max_K"]``: the verifiers by their route (`_route`;
    the draft-tree ones by ``shape``), the ceilings (the L = 1 closed form ``multidraft-l1`` or
    the ``selection`` LP; the ``multipath`` relaxation at L > 1), and SpecHub with the direct LP
    of hub drafts where SpecHub is registered."""
    instances = [{"family": f"toy:{FAMILY}", "vocab": g["V"][L], "block": L,
                  "seeds": list(g["seeds"]), **FAMILY_BASE[FAMILY], KNOB[FAMILY]: KNOB_VALUE}
                 for L in (1, 3)]
    verifiers, optima = [], []
    for L in (1, 3):
        for drafting, names in (("iid", IID), ("norep", NOREP)):
            for name in names:
                Ks = _Ks(g, L, name)
                if not Ks:
                    continue
                route = _route(name, L)
                if route == "gbv analytic":
                    verifiers.append({"name": name, "paths": Ks, "block": L})
                elif route.startswith("draft tree"):
                    verifiers.append({"name": name, "drafting": drafting,
                                      "shape": [_chain(K, L) for K in Ks]})
                else:
                    verifiers.append({"name": name, "paths": Ks, "drafting": drafting,
                                      "block": L})
            Ks = _Ks(g, L, f"ceiling-{drafting}")
            if Ks:
                optima.append({"problem": "multidraft-l1" if L == 1 else "selection",
                               "paths": Ks, "drafting": drafting, "block": L})
        Ks = _Ks(g, L, "relaxation") if L > 1 else []
        if Ks:
            optima.append({"problem": "multipath", "paths": Ks, "block": L})
    if "spechub" in verifier_names():
        Ks = [K for K in (1, 2) if K in g["Ks"]]
        verifiers.append({"name": "spechub", "paths": Ks, "drafting": "hub"})
        optima.append({"problem": "direct", "paths": Ks, "drafting": "hub"})
    return {"sweep": {"name": "fig10-multidraft-frontier"}, "instances": instances,
            "verifiers": verifiers, "optima": optima}


def _curve(rows: list[dict], seeds, route: str | None) -> dict:
    """A curve from its sweep rows: per K, the mean over the seeds and the per-seed values;
    ``seconds``: the jobs' time, summed."""
    by = {(r["paths"], r["seed"]): r for r in rows}
    Ks = sorted({K for K, _ in by})
    per_seed = [[by[K, s]["block_efficiency"] for s in seeds] for K in Ks]
    return {"K": Ks, "mean": [float(np.mean(v)) for v in per_seed],
            "per_seed": [[float(x) for x in v] for v in per_seed],
            "route": route if Ks else None,
            "seconds": round(sum(r["seconds"] for r in rows), 2)}


def _select(rows: list[dict], L: int, kind: str, name: str, drafting: str | None = None):
    return [r for r in rows if r["block"] == L and r["kind"] == kind and r["name"] == name
            and (drafting is None or r["drafting"] == drafting)]


def panel(rows: list[dict], L: int, drafting: str, g: dict, names: tuple[str, ...]) -> dict:
    """One panel (L, drafting scheme) from the sweep's rows."""
    curves = {}
    for name in names:
        route = _route(name, L)
        mine = _select(rows, L, "verifier", name,
                       None if route == "gbv analytic" else drafting)
        curves[name] = _curve(mine, g["seeds"], route)
    ceilings = {}
    problem = "multidraft-l1" if L == 1 else "selection"
    opt = _curve(_select(rows, L, "optimum", problem, drafting), g["seeds"], None)
    kind = ({"multidraft-l1": "exact L = 1 optimum",
             "selection": "best selection rule LP"}[problem] if opt["K"] else None)
    ceilings["optimum"] = {**opt, "kind": kind, "upper_bound_only": False}
    if L > 1 and drafting == "iid":
        ceilings["relaxation"] = {**_curve(_select(rows, L, "optimum", "multipath"),
                                           g["seeds"], None),
                                  "kind": "multi-path LP relaxation", "upper_bound_only": True}
    return {"L": L, "V": g["V"][L], "drafting": drafting, "curves": curves,
            "ceilings": ceilings}


def spechub_markers(rows: list[dict], L: int, g: dict) -> dict | None:
    """SpecHub (K <= 2, on its own ``hub`` drafts) and the best valid verifier of those drafts
    ([`direct_lp`][spectheory.lp.direct.direct_lp] with ``drafting="hub"``), where SpecHub is
    registered; else None."""
    if "spechub" not in verifier_names():
        return None
    hub = _curve(_select(rows, L, "verifier", "spechub", "hub"), g["seeds"],
                 "joint enumeration (hub drafting)")
    best = _curve(_select(rows, L, "optimum", "direct", "hub"), g["seeds"], None)
    return {"spechub": hub, "optimum": {**best, "kind": "direct LP, hub drafting",
                                        "upper_bound_only": False}}


def compute(quick: bool = False) -> dict:
    g = GRID[bool(quick)]
    rows = run_grid(grid(g))
    panels = []
    for L in (1, 3):  # each verifier under its own drafting scheme: no DraftingWarning
        iid = panel(rows, L, "iid", g, IID)
        hub = spechub_markers(rows, L, g)
        if hub is not None:
            iid["spechub"] = hub
        panels.append(iid)
        panels.append(panel(rows, L, "norep", g, NOREP))
    for p in panels:  # the largest amount by which a verifier exceeds its exact ceiling
        opt = p["ceilings"]["optimum"]
        worst = -np.inf
        for name, c in p["curves"].items():
            for K, m in zip(c["K"], c["mean"]):
                if K in opt["K"]:
                    worst = max(worst, m - opt["mean"][opt["K"].index(K)])
        p["max_verifier_minus_optimum"] = float(worst)
    return {"family": FAMILY, "knob": {"sigma": KNOB_VALUE}, "seeds": list(g["seeds"]),
            "Ks": list(g["Ks"]), "V": {str(L): V for L, V in g["V"].items()}, "panels": panels}


# ----------------------------------------------------------------------------- drawing


def draw(data: dict, out: Path, quick: bool = False) -> None:
    plt = pyplot()
    fig = plt.figure(figsize=(11, 9.4))
    gs = fig.add_gridspec(3, 2, height_ratios=(1, 1, 0.22))
    axes = np.empty((2, 2), dtype=object)
    for i in range(2):
        for j in range(2):
            axes[i, j] = fig.add_subplot(gs[i, j], sharex=axes[0, 0] if i or j else None)
    for p in data["panels"]:
        ax = axes[0 if p["L"] == 1 else 1, 0 if p["drafting"] == "iid" else 1]
        opt = p["ceilings"]["optimum"]
        label = {"exact L = 1 optimum": "optimum (L = 1): 1 + alpha*(p, q, K), Hu et al.",
                 "best selection rule LP": "optimum (L = 3): best selection rule = direct LP"
                 }[opt["kind"]]
        ax.plot(opt["K"], opt["mean"], color="0.55", lw=6, alpha=0.55, solid_capstyle="round",
                label=label, zorder=1)
        relax = p["ceilings"].get("relaxation")
        if relax:  # from the last exact K on (the two meet there)
            start = opt["K"][-1] if opt["K"] else 1
            ks = [k for k in relax["K"] if k >= start]
            ms = [m for k, m in zip(relax["K"], relax["mean"]) if k >= start]
            ax.plot(ks, ms, color="0.55", lw=4, ls=(0, (2, 1.5)), alpha=0.55, zorder=1,
                    label="upper bound (L = 3): multi-path LP relaxation")
        for name, c in p["curves"].items():
            ax.plot(c["K"], c["mean"], ms=5, lw=1.4, label=name, zorder=3,
                    **verifier_style(name).kwargs())
        hub = p.get("spechub")
        if hub:
            ax.plot(hub["optimum"]["K"], hub["optimum"]["mean"], ls="none", marker="o", ms=12,
                    mfc="none", mec="0.45", mew=2, zorder=4,
                    label="optimum under hub drafting (direct LP)")
            s = verifier_style("spechub")
            ax.plot(hub["spechub"]["K"], hub["spechub"]["mean"], ls="none", marker=s.marker,
                    ms=9, color=s.color, mec="black", zorder=5,
                    label="spechub (its own hub drafting, K <= 2)")
        scheme = "i.i.d. drafts" if p["drafting"] == "iid" else "drafts without replacement"
        ax.set_title(f"L = {p['L']}, V = {p['V']}, {scheme}", fontsize=10)
        ax.set_xticks(data["Ks"])
        ax.grid(alpha=0.3)
        if p["L"] == 3:
            ax.set_xlabel("K = number of draft paths")
        if p["drafting"] == "iid":
            ax.set_ylabel("block efficiency E[tau + 1]")
    for row in axes:  # one y scale per row, so the two drafting schemes compare directly
        lo = min(a.get_ylim()[0] for a in row)
        hi = max(a.get_ylim()[1] for a in row)
        for a in row:
            a.set_ylim(lo, hi)
    seen = {}  # one legend for the four panels, under them
    for ax in axes.ravel():
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    order = sorted(seen, key=lambda lab: (not lab.startswith(("optimum", "upper")), False))
    leg = fig.add_subplot(gs[2, :])
    leg.axis("off")
    leg.legend([seen[k] for k in order], order, fontsize=8, ncol=4, loc="upper center",
               frameon=False)
    fig.suptitle(f"Multi-draft verifiers against the optimum: {data['family']} toy family "
                 f"(sigma = {data['knob']['sigma']:g}), mean over {len(data['seeds'])} "
                 f"seed(s)", fontsize=11)
    save(fig, out, STEM, quick=quick)


def headline(data: dict) -> str:
    """The run's result in one sentence (the module docstring quotes the committed full run)."""
    P = {(p["L"], p["drafting"]): p for p in data["panels"]}

    def at(p, key, K=None, ceiling=False):
        c = p["ceilings"][key] if ceiling else p["curves"][key]
        K = c["K"][-1] if K is None else K
        return K, c["mean"][c["K"].index(K)]

    i1, n1, i3, n3 = P[1, "iid"], P[1, "norep"], P[3, "iid"], P[3, "norep"]
    K1, o1 = at(i1, "optimum", ceiling=True)
    _, on1 = at(n1, "optimum", ceiling=True)
    gbv = i1["curves"]["gbv"]
    kg = gbv["K"][int(np.argmax(gbv["mean"]))]
    Kh, hu1 = at(i1, "hu")
    _, oh1 = at(i1, "optimum", Kh, ceiling=True)
    _, si1 = at(i1, "specinfer", K1)
    K3, o3 = at(i3, "optimum", ceiling=True)
    _, hu3 = at(i3, "hu", K3)
    _, si3 = at(i3, "specinfer", K3)
    _, gb3 = at(i3, "gbv", K3)
    Kn3, on3 = at(n3, "optimum", ceiling=True)
    _, tr3 = at(n3, "traversal", min(Kn3, n3["curves"]["traversal"]["K"][-1]))
    _, hn3 = at(n3, "hu-norep", Kn3)
    excess = max(p["max_verifier_minus_optimum"] for p in data["panels"])
    return (f"Full run: at L = 1 the optimum reaches {o1:.4f} at K = {K1} with i.i.d. drafts "
            f"({on1:.4f} without replacement); hu gives {hu1:.4f} at K = {Kh} (optimum "
            f"{oh1:.4f}), specinfer {si1:.4f} at K = {K1}, and gbv peaks at "
            f"{max(gbv['mean']):.4f} (K = {kg}) and falls to {gbv['mean'][-1]:.4f} at K = "
            f"{gbv['K'][-1]}. At L = 3, K = {K3} the i.i.d. optimum is {o3:.4f}: hu {hu3:.4f}, "
            f"gbv {gb3:.4f}, specinfer {si3:.4f}; without replacement the optimum is {on3:.4f} "
            f"(K = {Kn3}), traversal {tr3:.4f}, hu-norep {hn3:.4f}. No verifier exceeds its "
            f"optimum by more than {max(excess, 0.0):.1e}.")


def main(out: Path, quick: bool = False) -> dict:
    """Compute the numbers, write ``out/fig10_multidraft_frontier.{png,pdf}``, return them."""
    data = compute(quick)
    draw(data, Path(out), quick)
    return data


if __name__ == "__main__":
    run_script(main)
