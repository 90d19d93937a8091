"""Block efficiency vs draft tree size for the tree shapes engines use

Exact block efficiency E[tau+1] ([`analyze_tree`][spectheory.engine.analysis.analyze_tree], float64, node
route) of tree verifiers against the number of drafted nodes, for chains (1,...,1), thin trees
(2,1,...,1) and EAGLE/Medusa-style static trees (2,2), (2,2,1), (2,2,2), (3,2,1), (4,2,1,1), on
prefix-dependent Dirichlet(1) instances
([`random_instance`][spectheory.inputs.random_instances.random_instance], V = 8, tables to depth 4; the
block length is the tree's depth), mean over 5 seeds. Verifiers: SpecInfer's recursive rejection
sampling with i.i.d. children (Miao et al., ASPLOS 2024), without replacement with children drawn
without replacement (Jeon et al., arXiv 2402.14160), and the top-k rule on deterministic top-k
children (q replaced by point masses, [`spectheory.verifiers.topk`][spectheory.verifiers.topk]); for
comparison K i.i.d. paths of the tree's depth with about the same number of drafted nodes, verified
by SpecInfer and by GBV (Thomas & Pal, arXiv 2602.16961). Black marks: the direct LP optimum for the
tree ([`tree_lp`][spectheory.lp.tree.tree_lp]) under top-k drafting (every shape) and under i.i.d.
drafting (where the joint draft outcomes stay small). Colour and marker name the verifier (one
palette for every figure), hollow markers the K i.i.d. paths, the line style the shape family
(chains, root branching, static trees).

The grid runs on the sweep engine ([`spectheory.sweep`][spectheory.sweep]): the instances built
once at depth 4 and truncated to each tree's depth (``truncate_from``), one job per instance and
tree verifier, tree LP or GBV path count (tree jobs by their ``shape``, which runs them on the
instances of the tree's depth); this script averages the table's rows and plots them.

Numbers (``figures.json``, key ``fig9_tree_shapes``): one row per shape with its drafted nodes,
depth, K, every series' mean E[tau+1] and the LP optima.

On these instances the deterministic top-k tree accepts least (its children are q's modes,
accepted with probability p(c) each), and the top-k rule equals the direct LP optimum for top-k
drafting on every shape; children without replacement beat i.i.d. children on every branching
shape; K i.i.d. paths of about the same node count verified by SpecInfer match or beat the i.i.d.
SpecInfer tree, and GBV on those paths beats every tree series.

Full run, mean E[tau+1] on the largest tree (4,2,1,1) with 28 drafted nodes: specinfer (iid)
2.433, specinfer-norep (norep) 2.610, topk rule (topk) 1.629, 7 i.i.d. paths specinfer 2.500,
7 i.i.d. paths GBV 2.626; direct LP optimum under top-k drafting 1.629.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from _common import (by_key, footnote, optimum_style, pyplot, run_grid, run_script, save,
                     verifier_style)

STEM = "fig9_tree_shapes"
SHAPES = [(1,), (1, 1), (1, 1, 1), (1, 1, 1, 1), (2, 1), (2, 1, 1), (2, 1, 1, 1), (2, 2),
          (2, 2, 1), (2, 2, 2), (3, 2, 1), (4, 2, 1, 1)]
QUICK_SHAPES = [(1,), (1, 1), (2, 1), (2, 2, 1)]
TREE_SERIES = [("specinfer", "iid"), ("specinfer-norep", "norep"), ("topk", "topk")]
#: Largest number of joint i.i.d. draft outcomes for which the i.i.d. tree LP is solved.
MAX_LP_OUTCOMES = 4096


def _label(shape) -> str:
    return "(" + ",".join(map(str, shape)) + ")"


def _sizes(shape) -> tuple[int, int, int, int]:
    """Depth D, drafted nodes E, paths (leaves) and the number K of i.i.d. paths of depth D with
    about E drafted nodes."""
    from spectheory.engine.drafttrees import tree_shape

    tree = tree_shape(shape)
    D, E = tree.height, tree.n_drafted
    return D, E, tree.paths, max(1, round(E / D))


def _text(shape) -> str:
    return ",".join(map(str, shape))


def grid(V: int, seeds: int, shapes) -> dict:
    """The sweep: random prefix-dependent instances built at depth 4 and truncated to each
    tree's depth; the tree verifiers and the tree LPs on every shape, SpecInfer on the K-path
    tree (K, 1, ..., 1) and GBV with K paths at the shape's depth."""
    sizes = {shape: _sizes(shape) for shape in shapes}
    depths = sorted({D for D, _, _, _ in sizes.values()})
    verifiers = [{"name": v, "drafting": d, "shape": [_text(s) for s in shapes]}
                 for v, d in TREE_SERIES]
    verifiers.append({"name": "specinfer", "drafting": "iid",
                      "shape": [_text((K,) + (1,) * (D - 1)) for D, _, _, K in sizes.values()]})
    for depth in depths:
        verifiers.append({"name": "gbv", "block": depth,
                          "paths": sorted({K for D, _, _, K in sizes.values() if D == depth})})
    optima = [{"problem": "tree", "drafting": "topk", "shape": [_text(s) for s in shapes]}]
    small = [_text(s) for s, (_, E, _, _) in sizes.items() if V**E <= MAX_LP_OUTCOMES]
    if small:
        optima.append({"problem": "tree", "drafting": "iid", "shape": small})
    return {"sweep": {"name": "fig9-tree-shapes"},
            "instances": [{"family": "random", "vocab": V, "block": depths,
                           "seeds": list(range(seeds)), "truncate_from": 4}],
            "verifiers": verifiers, "optima": optima}


def compute(V: int, seeds: int, shapes) -> dict:
    table = by_key(run_grid(grid(V, seeds, shapes)), "seed", "block", "kind", "name", "drafting",
                   "shape", "paths")
    rows, notes = [], []
    for shape in shapes:
        D, E, paths, K = _sizes(shape)
        tree, chain = _text(shape), _text((K,) + (1,) * (D - 1))
        row = {"shape": _label(shape), "drafted_nodes": E, "depth": D, "paths": paths,
               "iid_paths_K": K, "iid_paths_nodes": K * D, "be": {}, "lp_topk": [],
               "lp_iid": []}
        series: dict = {}
        for seed in range(seeds):
            def at(kind, name, drafting, shape, K, seed=seed, D=D):
                return table[seed, D, kind, name, drafting, shape, K]["block_efficiency"]

            for v, d in TREE_SERIES:
                series.setdefault(f"{v} ({d})", []).append(at("verifier", v, d, tree, paths))
            series.setdefault("K i.i.d. paths, specinfer", []).append(
                at("verifier", "specinfer", "iid", chain, K))
            series.setdefault("K i.i.d. paths, GBV", []).append(at("verifier", "gbv", "", "", K))
            row["lp_topk"].append(at("optimum", "tree", "topk", tree, paths))
            if V**E <= MAX_LP_OUTCOMES:
                row["lp_iid"].append(at("optimum", "tree", "iid", tree, paths))
        row["be"] = {k: float(np.mean(v)) for k, v in series.items()}
        row["lp_topk"] = float(np.mean(row["lp_topk"]))
        row["lp_iid"] = float(np.mean(row["lp_iid"])) if row["lp_iid"] else None
        rows.append(row)
    notes.append(f"i.i.d. tree LP only where V^E <= {MAX_LP_OUTCOMES} joint outcomes")
    return {"V": V, "seeds": seeds, "rows": rows, "series": list(rows[0]["be"]),
            "notes": notes}


def _family(shape: str) -> str:
    b = [int(x) for x in shape.strip("()").split(",")]
    if all(x == 1 for x in b):
        return "chains"
    if all(x == 1 for x in b[1:]):
        return "root branching"
    return "static trees"


#: The verifier of each series (its colour and marker come from the palette map).
SERIES_VERIFIER = {"specinfer (iid)": "specinfer", "specinfer-norep (norep)": "specinfer-norep",
                   "topk (topk)": "topk", "K i.i.d. paths, specinfer": "specinfer",
                   "K i.i.d. paths, GBV": "gbv"}
#: Line style by tree family (here the line style tells the shapes apart; the colour and marker
#: tell the verifier, as in every figure).
FAMILY_STYLE = {"chains": ":", "root branching": "--", "static trees": "-"}


def plot(data: dict):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10.5, 4.8))
    from matplotlib.lines import Line2D

    drawn_families = set()
    handles = []  # legend: each series by its colour and marker (its line style is the family)
    for name in data["series"]:
        paths = name.startswith("K i.i.d.")
        s = verifier_style(SERIES_VERIFIER[name])
        mfc = "white" if paths else s.color
        handles.append(Line2D([], [], ls="none", marker=s.marker, ms=5, color=s.color, mfc=mfc,
                              label=name))
        for fam, ls in FAMILY_STYLE.items():
            rows = [r for r in data["rows"] if _family(r["shape"]) == fam]
            if not rows:
                continue
            xs = [r["iid_paths_nodes"] if paths else r["drafted_nodes"] for r in rows]
            ys = [r["be"][name] for r in rows]
            order = np.argsort(xs, kind="stable")
            if len(rows) > 1:
                drawn_families.add(fam)
            # K i.i.d. paths: the verifier's marker hollow, to tell them from its tree
            ax.plot(np.array(xs)[order], np.array(ys)[order], marker=s.marker, ms=5, ls=ls,
                    color=s.color, alpha=0.85, mfc=mfc)
    for r in data["rows"]:
        ax.annotate(r["shape"], (r["drafted_nodes"], r["be"]["specinfer-norep (norep)"]),
                    fontsize=6.5, xytext=(3, 4), textcoords="offset points")
    s = optimum_style("tree", "topk")
    handles += ax.plot([r["drafted_nodes"] for r in data["rows"]],
                       [r["lp_topk"] for r in data["rows"]], ls="none", marker=s.marker,
                       color=s.color, ms=7, label="direct LP optimum, top-k drafting")
    lp = [(r["drafted_nodes"], r["lp_iid"]) for r in data["rows"] if r["lp_iid"] is not None]
    if lp:
        s = optimum_style("tree")
        handles += ax.plot(*zip(*lp), ls="none", marker=s.marker, color=s.color, ms=7,
                           label="direct LP optimum, i.i.d. drafting")
    for fam, ls in FAMILY_STYLE.items():  # only the line styles some series draws
        if fam in drawn_families:
            handles.append(Line2D([], [], color="0.4", ls=ls, label=f"line style: {fam}"))
    footnote(fig, data["notes"])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("drafted nodes (tree size; for K paths: K x depth)")
    ax.set_ylabel("block efficiency E[tau + 1] (tokens per target call)")
    ax.set_title(f"Draft trees on Dirichlet(1) prefix-dependent instances, V = {data['V']} "
                 f"(mean over {data['seeds']} seed(s))", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def headline(data: dict) -> str:
    """The run's result in one sentence (the module docstring quotes the committed full run)."""
    r = max(data["rows"], key=lambda r: r["drafted_nodes"])
    be = r["be"]
    K = r["iid_paths_K"]
    return (f"Full run, mean E[tau+1] on the largest tree {r['shape']} with "
            f"{r['drafted_nodes']} drafted nodes: specinfer (iid) {be['specinfer (iid)']:.3f}, "
            f"specinfer-norep (norep) {be['specinfer-norep (norep)']:.3f}, topk rule (topk) "
            f"{be['topk (topk)']:.3f}, {K} i.i.d. paths specinfer "
            f"{be['K i.i.d. paths, specinfer']:.3f}, {K} i.i.d. paths GBV "
            f"{be['K i.i.d. paths, GBV']:.3f}; direct LP optimum under top-k drafting "
            f"{r['lp_topk']:.3f}.")


def main(out: Path, quick: bool = False) -> dict:
    """Write ``out/fig9_tree_shapes.{png,pdf}``; return the numbers plotted."""
    data = compute(4, 1, QUICK_SHAPES) if quick else compute(8, 5, SHAPES)
    save(plot(data), out, STEM, quick=quick)
    return data


if __name__ == "__main__":
    run_script(main)
