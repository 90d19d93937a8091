"""Grammar-constrained decoding: local masks against FVO-Spec's Phi-reweighted target

Speculative decoding under a grammar (Nie et al., arXiv 2605.07698). The target prefers opening
brackets: after the prefix s it draws the opening token(s) with probability b, the closing ones
with 9/10 - b and the stop token with 1/10 (context-independent rows, a uniform draft), over one
block of L = 3 drafted tokens (N = L + 1 = 4 tokens). Rows: Dyck-1 (tokens ( ) stop, any depth)
and Dyck-2 (( ) [ ] stop, depth at most 2; b and 9/10 - b split evenly between the two kinds).
Left: the exact TV to the grammar-conditional law mu* (valid = balanced and stopped within N
tokens) of what each rule samples: token and block verification with target and draft masked
by the grammar at each prefix (filled markers; both sample the locally masked law mu_proj, so
their TVs coincide), the same verifiers against the target reweighted by the exact future
validity Phi (hollow markers: FVO-Spec, TV 0), and against a one-token lookahead estimate of Phi
(grey). Right: the block efficiency E[tau + 1] of the same four runs. Everything is computed by
the exact engine (`spectheory.analyze`) and `spectheory.inputs.grammar_laws`, in float64.

Each verifier is drawn in its one style of the palette (`spectheory.sweep.palette`); FVO-Spec's
runs are the same verifiers against another target, hollow.

Numbers (``figures.json``, key ``fig12_constrained_decoding``): per grammar and b, the TVs and
E[tau + 1] of every run.

Full run: on Dyck-1, TV(mu_proj, mu*) rises from 0.6250 at b = 0.3 to 0.8895 at b = 0.85
(FVO-Spec 0); at b = 0.85 block verification's E[tau + 1] is 2.2397 under local masks and 2.0195
against FVO-Spec's target.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from _common import pyplot, run_script, save, verifier_style

#: The stop token's probability; b is the opening tokens' share of the rest.
STOP = Fraction(1, 10)
L = 3
BIASES = (0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85)
GRAMMARS = ("dyck1", "dyck2")


def instance(grammar: str, b: float):
    from spectheory.inputs.instances import instance_from_dict

    b = Fraction(str(b))
    close = 1 - STOP - b
    if grammar == "dyck1":
        row = [b, close, STOP]
    else:
        row = [b / 2, close / 2, b / 2, close / 2, STOP]
    V = len(row)
    return instance_from_dict({"vocab_size": V, "block_length": L,
                               "target": [str(x) for x in row],
                               "draft": [f"1/{V}"] * V}, exact=True).to_float()


def point(grammar: str, b: float) -> dict:
    import spectheory as st
    from spectheory.inputs import grammar_laws as G
    from spectheory.inputs.processing import SamplingParams

    g = G.dyck1() if grammar == "dyck1" else G.dyck2(2)
    inst = instance(grammar, b)
    N = L + 1
    sp = SamplingParams(grammar=g)
    star = G.grammar_conditional_law(inst, g, N)
    targets = {"local": None,
               "fvo": G.grammar_conditional_instance(inst, g, N),
               "lookahead1": G.doob_instance(inst, G.lookahead_validity(inst, g, N, 1), N)}
    out = {"b": b, "tv_proj_star": float(G.masking_tv(inst, g, N))}
    for key, tgt in targets.items():
        for v in ("token", "block"):
            if tgt is None:
                res = st.analyze(inst, v, sampling=sp, draft_sampling=sp)
            else:
                res = st.analyze(tgt, v, draft_sampling=sp)
            out[f"{key}_{v}_tv"] = float(G.total_variation(res.output_law, star))
            out[f"{key}_{v}_be"] = float(res.block_efficiency)
    return out


def compute(quick: bool = False) -> dict:
    biases = BIASES[::3] + (BIASES[-1],) if quick else BIASES
    return {"L": L, "stop": str(STOP), "biases": list(biases),
            "panels": {g: [point(g, b) for b in biases] for g in GRAMMARS}}


LABELS = {"local": "{v}, local masks", "fvo": "{v}, FVO-Spec (exact Phi)",
          "lookahead1": "{v}, one-token lookahead Phi"}


def _style(v: str, key: str) -> dict:
    kw = verifier_style(v).kwargs()
    if key == "fvo":
        kw["markerfacecolor"] = "none"
    if key == "lookahead1":  # the same verifier against an estimate: its marker, in grey
        kw.update(color="dimgray", markerfacecolor="none")
    return kw


def draw(data: dict, out: Path, quick: bool = False) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(len(data["panels"]), 2, figsize=(10.4, 3.6 * len(data["panels"])),
                             squeeze=False)
    for row, (grammar, pts) in enumerate(data["panels"].items()):
        bs = [p["b"] for p in pts]
        for col, what in enumerate(("tv", "be")):
            ax = axes[row][col]
            for key in LABELS:
                for v in ("token", "block"):
                    ax.plot(bs, [p[f"{key}_{v}_{what}"] for p in pts], **_style(v, key),
                            ms=4, lw=1, label=LABELS[key].format(v=v))
            ax.set_xlabel("b = P(opening token)")
            ax.set_ylabel("TV to mu*" if what == "tv" else "E[tau + 1]")
            name = "Dyck-1" if grammar == "dyck1" else "Dyck-2 (depth 2)"
            ax.set_title(f"{name}, L = {data['L']}, stop {data['stop']}, uniform draft")
            ax.grid(alpha=0.3)
    axes[0][1].legend(fontsize=6.5, loc="best")
    save(fig, out, "fig12_constrained_decoding", quick=quick)


def headline(data: dict) -> str:
    """The run's result in one sentence (the module docstring quotes the committed full run)."""
    pts = data["panels"]["dyck1"]
    lo, hi = pts[0], pts[-1]
    fvo = max(max(p["fvo_token_tv"], p["fvo_block_tv"]) for q in data["panels"].values()
              for p in q)
    return (f"Full run: on Dyck-1, TV(mu_proj, mu*) rises from {lo['tv_proj_star']:.4f} at b = "
            f"{lo['b']:g} to {hi['tv_proj_star']:.4f} at b = {hi['b']:g} (FVO-Spec "
            f"{'0' if fvo < 1e-12 else f'{fvo:.2g}'}); at b = {hi['b']:g} block verification's "
            f"E[tau + 1] is {hi['local_block_be']:.4f} under local masks and "
            f"{hi['fvo_block_be']:.4f} against FVO-Spec's target.")


def main(out: Path, quick: bool = False) -> dict:
    """Compute the points, write ``out/fig12_constrained_decoding.{png,pdf}``, return the
    numbers."""
    data = compute(quick)
    draw(data, Path(out), quick)
    return data


if __name__ == "__main__":
    run_script(main)
