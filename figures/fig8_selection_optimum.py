"""GBV, the best selection rule, and the best multi-path verifier, against the number of paths K

Left: the two-token example with one token (p = (1/3, 2/3), q = (2/3, 1/3), L = 1), acceptance
probability against K = 1..6, exactly in rationals. GBV (Thomas & Pal, arXiv 2602.16961) is not
monotone in K: 2/3, 8/9, 26/27, 70/81, 194/243, 550/729, falling back towards 2/3. The reason is
its selection: it always takes the drafted token of largest p/q, so the selected token's law
q^G(1) = 1 - (2/3)^K overshoots p(1) = 2/3 from K = 3 on, and the acceptance min(p(1), q^G(1)) +
min(p(0), q^G(0)) = 2/3 + (2/3)^K decays. The best "select a path, then block-verify it against
its induced law" rule ([`selection_lp`][spectheory.lp.selection.selection_lp]) reaches Hu et al.'s
L = 1 optimum (arXiv 2502.18779), 1 from K = 3 on. Right: random Dirichlet instances with
prefix-dependent rows (V = 3, L = 2, alpha = 0.7, mean over seeds), E[tau + 1] against K: GBV, the
best selection rule, and the direct LP over all valid K-path verifiers
([`direct_lp`][spectheory.lp.direct.direct_lp]). On every instance drawn here the best selection
rule reaches the direct LP's optimum (to solver precision), while GBV falls short and can drop as
K grows.

The right panel's grid runs on the sweep engine ([`spectheory.sweep`][spectheory.sweep]): one job
per instance and K for GBV, the selection LP and the direct LP. The left panel stays in this script:
it is one instance in exact rationals, a closed-form curve (2/3 + (2/3)^K and its optima), not a
grid, and a sweep's arithmetic is one for all its jobs.

Numbers (``figures.json``, key ``fig8_selection_optimum``): the exact acceptances of the left panel
(fractions as strings) and the mean block efficiencies of the right panel with the largest
difference between the direct LP and the best selection rule.

Full run: GBV's acceptance for K = 1..6 is 2/3, 8/9, 26/27, 70/81, 194/243, 550/729; at K = 3 the
random instances give GBV 1.9572, the best selection rule 1.9870 and the direct LP 1.9870 (largest
difference between the last two 2.1e-09).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

import spectheory as st
from _common import by_key, optimum_style, pyplot, run_grid, run_script, save, verifier_style
from spectheory.lp import optimal_multidraft_L1
from spectheory.lp.selection import selection_lp

TWO_TOKEN_L1 = {"vocab_size": 2, "block_length": 1, "target": ["1/3", "2/3"],
                "draft": ["2/3", "1/3"]}


def grid(seeds, Ks) -> dict:
    """The right panel's sweep: random instances V = 3, L = 2, alpha = 0.7; GBV, the best
    selection rule and the direct LP for each K."""
    return {"sweep": {"name": "fig8-selection-optimum"},
            "instances": [{"family": "random", "vocab": 3, "block": 2, "seeds": list(seeds),
                           "alpha": 0.7}],
            "verifiers": [{"name": "gbv", "paths": list(Ks)}],
            "optima": [{"problem": ["selection", "direct"], "paths": list(Ks)}]}


def compute(quick: bool = False) -> dict:
    one = st.instance_from_dict(TWO_TOKEN_L1, exact=True)
    Ks = list(range(1, 7))
    left = {"K": Ks,
            "gbv": [str(st.analyze(one, "gbv", paths=K).expected_accepted) for K in Ks],
            "selection": [str(selection_lp(one, K, exact=True).optimum - 1) for K in Ks],
            "hu_optimum": [str(optimal_multidraft_L1(one, K, exact=True).optimum - 1)
                           for K in Ks]}
    seeds = range(2) if quick else range(6)
    Kr = [1, 2, 3]
    table = by_key(run_grid(grid(seeds, Kr)), "seed", "name", "paths")
    rows = {name: [[table[seed, name, K]["block_efficiency"] for K in Kr] for seed in seeds]
            for name in ("gbv", "selection", "direct")}
    right = {"K": Kr, "seeds": list(seeds),
             **{k: np.mean(v, axis=0).tolist() for k, v in rows.items()},
             "max_direct_minus_selection": float(np.max(np.array(rows["direct"])
                                                        - np.array(rows["selection"])))}
    return {"two_token_L1": left, "random_V3_L2": right}


def draw(data: dict, out: Path, quick: bool = False) -> None:
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    left = data["two_token_L1"]
    for key, s, label in (("gbv", verifier_style("gbv"), "GBV"),
                          ("selection", optimum_style("selection"), "best selection rule"),
                          ("hu_optimum", optimum_style("multidraft-l1"),
                           "L = 1 optimum (Hu et al.)")):
        a.plot(left["K"], [float(Fraction(v)) for v in left[key]], label=label, **s.kwargs())
    a.set_xticks(left["K"])
    a.set_xlabel("paths K")
    a.set_ylabel("acceptance probability")
    a.set_title("two-token example, L = 1 (exact)")
    a.legend(fontsize=8)
    a.grid(alpha=0.3)
    right = data["random_V3_L2"]
    for key, s, label in (("gbv", verifier_style("gbv"), "GBV"),
                          ("selection", optimum_style("selection"), "best selection rule"),
                          ("direct", optimum_style("direct"), "direct LP (all valid verifiers)")):
        b.plot(right["K"], right[key], label=label, **s.kwargs())
    b.set_xticks(right["K"])
    b.set_xlabel("paths K")
    b.set_ylabel("block efficiency E[tau + 1]")
    b.set_title(f"V = 3, L = 2, mean over {len(right['seeds'])} instances")
    b.legend(fontsize=8)
    b.grid(alpha=0.3)
    save(fig, out, "fig8_selection_optimum", quick=quick)


def headline(data: dict) -> str:
    """The run's result in one sentence (the module docstring quotes the committed full run)."""
    left, right = data["two_token_L1"], data["random_V3_L2"]
    return (f"Full run: GBV's acceptance for K = 1..6 is {', '.join(left['gbv'])}; at K = "
            f"{right['K'][-1]} the random instances give GBV {right['gbv'][-1]:.4f}, the best "
            f"selection rule {right['selection'][-1]:.4f} and the direct LP "
            f"{right['direct'][-1]:.4f} (largest difference between the last two "
            f"{right['max_direct_minus_selection']:.1e}).")


def main(out: Path, quick: bool = False) -> dict:
    """Compute the numbers, write ``out/fig8_selection_optimum.{png,pdf}``, return the numbers."""
    data = compute(quick)
    draw(data, Path(out), quick)
    return data


if __name__ == "__main__":
    run_script(main)
