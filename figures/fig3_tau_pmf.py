"""Distribution of accepted tokens: token vs block verification

The exact law of tau, the number of accepted draft tokens, under token verification and block
verification (Sun et al., arXiv 2403.10444) on two instances. Left, in exact rationals, the
paper's two-token example p = (1/3, 2/3), q = (2/3, 1/3), L = 2: token verification has
P(tau) = (1/3, 2/9, 4/9) and E[tau] = 10/9, block verification (1/3, 1/9, 5/9) and E[tau] = 11/9,
the values the paper reports. Right, in float64, a character 4-gram target against a bigram
draft fitted on 10% of a public-domain text (V = 5, L = 6). In both, block verification moves
probability from short accepts to accepting the whole block.

The n-gram panel runs on the sweep engine ([`spectheory.sweep`][spectheory.sweep]): one job each
for token verification, block verification and the mean TV of the ``toy:ngram`` instance. The
paper's example is left out of the sweep: it is a single worked example in exact rationals (the
fractions the paper prints), not a grid, and a sweep's arithmetic is one for all its jobs; it is
computed here directly with [`analyze`][spectheory.engine.analysis.analyze].

Numbers (``figures.json``, key ``fig3_tau_pmf``): per panel, both tau laws and E[tau] (fractions
as strings in the exact panel) and, for the n-gram panel, its parameters and mean TV(p, q).

Full run: on the n-gram pair (mean TV 0.091) E[tau] is 4.752 for token and 4.954 for block
verification.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np

from _common import by_key, pyplot, run_grid, run_script, save, verifier_style

STEM = "fig3_tau_pmf"
GRID = {False: {"L": 6}, True: {"L": 4}}


def grid(params: dict) -> dict:
    """The sweep of the n-gram panel: one ``toy:ngram`` instance, token and block verification
    and its mean TV."""
    knobs = {k: v for k, v in params.items()
             if k not in ("vocab_size", "block_length", "seed")}
    return {"sweep": {"name": "fig3-tau-pmf"},
            "instances": [{"family": "toy:ngram", "vocab": params["vocab_size"],
                           "block": params["block_length"], "seeds": params["seed"], **knobs}],
            "verifiers": [{"name": ["token", "block"]}], "measures": [{"name": "tv"}]}


def compute(L: int) -> dict:
    from spectheory.engine.analysis import analyze
    from spectheory.verifiers import block_verification, token_verification
    from spectheory.toy_models import two_token

    toy = two_token()
    tok = analyze(toy, token_verification, "token")
    blk = analyze(toy, block_verification, "block")
    panels = [{"name": "the paper's two-token example: p = (1/3, 2/3), q = (2/3, 1/3), L = 2",
               "exact": True, "token_pmf": [str(v) for v in tok.tau_pmf],
               "block_pmf": [str(v) for v in blk.tau_pmf],
               "token_E_tau": str(tok.expected_accepted),
               "block_E_tau": str(blk.expected_accepted)}]
    params = {"vocab_size": 5, "block_length": L, "order": 4, "draft_order": 2,
              "draft_fraction": 0.1, "seed": 0}
    rows = {name: r for (name,), r in by_key(run_grid(grid(params)), "name").items()}
    tok, blk = rows["token"], rows["block"]
    panels.append({"name": (f"real text: character 4-gram target vs bigram draft\n(draft "
                            f"estimated on 10% of the text), V = 5, L = {L}"),
                   "exact": False, "params": params, "tv": rows["tv"]["value"],
                   "token_pmf": json.loads(tok["tau_pmf"]),
                   "block_pmf": json.loads(blk["tau_pmf"]),
                   "token_E_tau": tok["expected_accepted"],
                   "block_E_tau": blk["expected_accepted"]})
    return {"panels": panels}


def plot(data: dict):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(data["panels"]), figsize=(11, 4.3))
    for ax, panel in zip(np.atleast_1d(axes), data["panels"]):
        conv = (lambda v: float(Fraction(v))) if panel["exact"] else float
        tok = np.array([conv(v) for v in panel["token_pmf"]])
        blk = np.array([conv(v) for v in panel["block_pmf"]])
        i = np.arange(len(tok))
        w = 0.4
        if panel["exact"]:
            lab_t = f"token: E[tau] = {panel['token_E_tau']}"
            lab_b = f"block: E[tau] = {panel['block_E_tau']}"
        else:
            lab_t = f"token: E[tau] = {conv(panel['token_E_tau']):.3f}"
            lab_b = f"block: E[tau] = {conv(panel['block_E_tau']):.3f}"
        ax.bar(i - w / 2, tok, w, color=verifier_style("token").color, label=lab_t)
        ax.bar(i + w / 2, blk, w, color=verifier_style("block").color, label=lab_b)
        if panel["exact"]:
            for x, t, b in zip(i, panel["token_pmf"], panel["block_pmf"]):
                ax.text(x - w / 2, conv(t), t, ha="center", va="bottom", fontsize=8)
                ax.text(x + w / 2, conv(b), b, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(i)
        ax.set_xlabel("tau = number of accepted draft tokens")
        ax.set_ylabel("probability P(tau)")
        ax.set_title(panel["name"], fontsize=9.5)
        ax.legend(fontsize=8.5)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle("Exact distribution of accepted tokens: block verification moves mass from "
                 "early stops to longer accepts", fontsize=11)
    return fig


def headline(data: dict) -> str:
    """The run's result in one sentence (the module docstring quotes the committed full run)."""
    p = data["panels"][1]
    return (f"Full run: on the n-gram pair (mean TV {p['tv']:.3f}) E[tau] is "
            f"{p['token_E_tau']:.3f} for token and {p['block_E_tau']:.3f} for block "
            f"verification.")

def main(out: Path, quick: bool = False) -> dict:
    """Write ``out/fig3_tau_pmf.{png,pdf}``; return the numbers plotted."""
    data = compute(**GRID[quick])
    save(plot(data), out, STEM, quick=quick)
    return data


if __name__ == "__main__":
    run_script(main)
