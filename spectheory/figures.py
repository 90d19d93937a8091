"""``spectheory figures [--out DIR] [--quick]``: the theory figures, from fixed seeds.

Every number plotted is exact (the sequence-tree engine :func:`spectheory.exact.analyze`, the LPs
of :mod:`lp`, the multi-path engine of :mod:`spectheory.multipath`) on toy instances from
:mod:`toy_models`; nothing is sampled. The command writes, into ``--out``:

* ``fig1_accepted_vs_L``   E[tau] vs block length L: token, block, node-budget LP optimum and the
  full-knowledge coupling bound, median and 10-90% band over random instances;
* ``fig2_gain_vs_divergence``   relative block-efficiency gain of block over token verification
  vs the mean per-step TV(p, q) along the draft's paths, one curve per L, one panel per family;
* ``fig3_tau_pmf``   the law of tau for token vs block verification on two instances;
* ``fig4_multipath_vs_K``   multi-path block efficiency vs the number of drafted paths K, for GBV
  and the baselines, with the multi-path LP optimum;
* ``fig5_multipath_gap``   each multi-path verifier's gap to that optimum;
* ``fig6_paper_comparison``   our exact gains at L = 4, 6, 8 vs the published table of Sun et al.
  (arXiv 2403.10444), on toy families matched to the paper's token block efficiency 3.41 at L = 8;

each as PNG and PDF, plus ``figures.json`` (every plotted number) and ``INDEX.md`` (what each
figure shows, its parameters, and the run's time). ``--quick`` runs the same code on smaller
grids (seconds on 2 cores); ``--threads`` sets torch's CPU threads (default 1, which is fastest
for the engine's many small float64 operations). Optional pieces (LPs, multi-path verifiers) that are not
installed are reported in the figure ("... not available") instead of failing.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from .errors import SpectheoryError
from .exact import analyze
from .instances import Instance
from .verifiers import block_verification, token_verification

#: The published numbers (Sun et al., PaLM-2 S target / XXS draft, average of 8 datasets).
PAPER = {
    "source": "Sun et al., Block Verification Accelerates Speculative Decoding, arXiv 2403.10444",
    "models": "PaLM-2 S target, PaLM-2 XXS draft, average over 8 datasets",
    "gain_pct": {4: 3.5, 6: 6.2, 8: 8.3},
    "token_be_L8": 3.41,
    "block_be_L8": 3.70,
}

FIGURES = [
    ("fig1_accepted_vs_L", "Expected accepted tokens vs block length"),
    ("fig2_gain_vs_divergence", "Gain of block over token verification vs draft/target divergence"),
    ("fig3_tau_pmf", "Distribution of accepted tokens: token vs block verification"),
    ("fig4_multipath_vs_K", "Multi-path block efficiency vs number of draft paths"),
    ("fig5_multipath_gap", "Gap of each multi-path verifier to the multi-path optimum"),
    ("fig6_paper_comparison", "Our exact gains vs the published table (Sun et al.)"),
]
FORMATS = ("png", "pdf")


@dataclass(frozen=True)
class Config:
    """Grid sizes of one run (``FULL`` or ``QUICK``)."""

    name: str
    fig1_V: int
    fig1_Ls: tuple
    fig1_seeds: int
    fig1_lp_max_L: int
    fig2_V: int
    fig2_Ls: tuple
    fig2_seeds: int
    fig2_knobs: dict = field(default_factory=dict)
    fig3_L: int = 6
    fig4_V: int = 3
    fig4_L: int = 2
    fig4_Ks: tuple = (1, 2, 3)
    fig4_seeds: int = 3
    fig4_direct_max_K: int = 2
    fig6_V: int = 4
    fig6_seeds: int = 4
    fig6_families: tuple = ("logit-noise", "mixture", "temperature")


FULL = Config(
    name="full",
    fig1_V=4, fig1_Ls=tuple(range(1, 9)), fig1_seeds=16, fig1_lp_max_L=6,
    fig2_V=4, fig2_Ls=(2, 4, 6, 8), fig2_seeds=3,
    fig2_knobs={
        "dirichlet": (0.1, 0.2, 0.4, 0.7, 1.0, 2.0, 4.0, 10.0),
        "logit-noise": (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0),
        "mixture": (0.05, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9, 1.0),
        "ngram": (1, 2, 3),
    },
    fig3_L=6,
    fig4_V=3, fig4_L=2, fig4_Ks=(1, 2, 3, 4), fig4_seeds=6, fig4_direct_max_K=4,
    fig6_V=4, fig6_seeds=4,
)

QUICK = Config(
    name="quick",
    fig1_V=3, fig1_Ls=(1, 2, 3, 4), fig1_seeds=3, fig1_lp_max_L=3,
    fig2_V=3, fig2_Ls=(2, 4), fig2_seeds=1,
    fig2_knobs={
        "dirichlet": (0.2, 1.0, 5.0),
        "logit-noise": (0.25, 1.0, 3.0),
        "mixture": (0.1, 0.5, 1.0),
        "ngram": (1, 2, 3),
    },
    fig3_L=4,
    fig4_V=2, fig4_L=2, fig4_Ks=(1, 2, 3), fig4_seeds=1, fig4_direct_max_K=2,
    fig6_V=3, fig6_seeds=1,
)

#: Family parameters shared by the figures (the knob is varied on top of these).
FAMILY_BASE = {
    "dirichlet": {},
    "logit-noise": {"alpha": 0.5},
    "mixture": {"alpha": 0.3},
    "temperature": {"alpha": 0.5},
    "ngram": {"order": 4, "vocab_size": 5, "draft_fraction": 0.1},
}
KNOB = {"dirichlet": "alpha", "logit-noise": "sigma", "mixture": "eps", "temperature": "temperature",
        "ngram": "draft_order"}


# ----------------------------------------------------------------------------- optional pieces


def optional(module: str, attr: str):
    """``module.attr`` if it can be imported, else None (LPs and multi-path land separately)."""
    try:
        return getattr(importlib.import_module(module), attr, None)
    except ImportError:
        return None


#: Where each LP lives if the :mod:`lp` package does not re-export it.
LP_MODULES = {"node_budget_lp": "lp.node_budget", "coupling_bound": "lp.coupling",
              "direct_lp": "lp.direct", "multipath_lp": "lp.multipath"}


def _lp(name: str):
    return optional("lp", name) or optional(LP_MODULES[name], name)


# ----------------------------------------------------------------------------- helpers


def truncate(inst: Instance, L: int) -> Instance:
    """The same models with block length L (tables deeper than L are simply not used)."""
    return replace(inst, block_length=int(L))


def make_family(family: str, V: int, L: int, seed: int, knob_value) -> Instance:
    from toy_models import make_instance

    params = dict(FAMILY_BASE.get(family, {}))
    params.setdefault("vocab_size", V)
    params.update(block_length=L, seed=seed)
    params[KNOB[family]] = knob_value
    return make_instance(family, **params)


def single_path(inst: Instance) -> dict:
    """Exact token and block results on one instance (float64)."""
    tok = analyze(inst, token_verification, "token")
    blk = analyze(inst, block_verification, "block")
    return {
        "token_E_tau": float(tok.expected_accepted), "block_E_tau": float(blk.expected_accepted),
        "token_pmf": [float(v) for v in tok.tau_pmf], "block_pmf": [float(v) for v in blk.tau_pmf],
        "max_tv_to_target": max(float(tok.tv_to_target), float(blk.tv_to_target)),
    }


def coupling_bound_E_tau(inst: Instance) -> tuple[float, str]:
    """Full-knowledge coupling bound on E[tau] (:func:`lp.coupling_bound`, in E[tau+1] units)."""
    fn = _lp("coupling_bound")
    if fn is None:
        raise SpectheoryError("lp.coupling_bound is not available")
    res = fn(inst)
    return float(res.optimum) - 1.0, getattr(res, "solver", "")


class Progress:
    """One tqdm bar on stderr over the whole run (silent when disabled)."""

    def __init__(self, total: int, enabled: bool):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="figures", unit="step", file=sys.stderr,
                            dynamic_ncols=True)

    def step(self, what: str = "", n: int = 1) -> None:
        if self.bar is not None:
            if what:
                self.bar.set_postfix_str(what, refresh=False)
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def work_units(cfg: Config) -> int:
    n1 = cfg.fig1_seeds * len(FIG1_PANELS)
    n2 = sum(len(v) for k, v in cfg.fig2_knobs.items()) * cfg.fig2_seeds
    n4 = cfg.fig4_seeds * len(cfg.fig4_Ks)
    n6 = len(cfg.fig6_families) * cfg.fig6_seeds
    return n1 + n2 + 1 + n4 + n6


# ----------------------------------------------------------------------------- fig 1


FIG1_PANELS = [("dirichlet", {"alpha": 1.0}), ("logit-noise", {"sigma": 1.0})]


def compute_fig1(cfg: Config, progress: Progress) -> dict:
    node_lp = _lp("node_budget_lp")
    have_coupling = _lp("coupling_bound") is not None
    Lmax = max(cfg.fig1_Ls)
    panels = []
    for family, knob in FIG1_PANELS:
        rows = {k: [] for k in ("token", "block", "lp", "coupling")}
        for seed in range(cfg.fig1_seeds):
            base = make_family(family, cfg.fig1_V, Lmax, seed, knob[KNOB[family]])
            tok, blk, lpv, cpl = [], [], [], []
            for L in cfg.fig1_Ls:
                inst = truncate(base, L)
                r = single_path(inst)
                tok.append(r["token_E_tau"])
                blk.append(r["block_E_tau"])
                lpv.append(float(node_lp(inst).optimum) - 1.0
                           if node_lp is not None and L <= cfg.fig1_lp_max_L else None)
                cpl.append(coupling_bound_E_tau(inst)[0] if have_coupling else None)
            for k, v in zip(("token", "block", "lp", "coupling"), (tok, blk, lpv, cpl)):
                rows[k].append(v)
            progress.step(f"fig1 {family} seed {seed}")
        panels.append({"family": family, "params": {**FAMILY_BASE.get(family, {}), **knob},
                       "values": rows})
    return {"V": cfg.fig1_V, "Ls": list(cfg.fig1_Ls), "seeds": cfg.fig1_seeds,
            "lp_max_L": cfg.fig1_lp_max_L, "lp_available": node_lp is not None,
            "coupling_available": have_coupling, "panels": panels}


def _band(values):
    """Median and 10/90% quantiles over instances (rows) per L (columns), ignoring None."""
    arr = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)
    if np.all(np.isnan(arr)):
        return None
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return (np.nanmedian(arr, 0), np.nanquantile(arr, 0.1, 0), np.nanquantile(arr, 0.9, 0))


def plot_fig1(plt, data: dict):
    fig, axes = plt.subplots(1, len(data["panels"]), figsize=(11, 4.6), sharey=True)
    Ls = np.array(data["Ls"])
    titles = {"dirichlet": "independent random draft and target\n(Dirichlet rows, alpha = {alpha})",
              "logit-noise": "draft = noisy target\n(logit noise sigma = {sigma}, target alpha = {alpha})"}
    for ax, panel in zip(np.atleast_1d(axes), data["panels"]):
        vals = panel["values"]
        style = [("coupling", "coupling bound (full knowledge, not reachable)", "tab:gray", "--", None),
                 ("block", "block verification", "tab:blue", "-", "o"),
                 ("token", "token verification", "tab:orange", "-", "s")]
        for key, label, color, ls, marker in style:
            b = _band(vals[key])
            if b is None:
                ax.plot([], [], color=color, ls=ls, label=f"{label}: not available")
                continue
            med, lo, hi = b
            ax.plot(Ls, med, color=color, ls=ls, marker=marker, ms=4, label=label)
            ax.fill_between(Ls, lo, hi, color=color, alpha=0.15, lw=0)
        b = _band(vals["lp"])
        if b is None:
            ax.plot([], [], "kx", label="node-budget LP optimum: not available")
        else:
            ax.plot(Ls, b[0], "kx", ms=9, mew=1.5,
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


# ----------------------------------------------------------------------------- fig 2


def compute_fig2(cfg: Config, progress: Progress) -> dict:
    from toy_models import mean_divergence

    Lmax = max(cfg.fig2_Ls)
    panels = []
    for family, knobs in cfg.fig2_knobs.items():
        points = []
        for k in knobs:
            for seed in range(cfg.fig2_seeds):
                base = make_family(family, cfg.fig2_V, Lmax, seed, k)
                for L in cfg.fig2_Ls:
                    inst = truncate(base, L)
                    r = single_path(inst)
                    points.append({
                        "knob": k, "seed": seed, "L": L,
                        "tv": mean_divergence(inst, "tv"), "kl": mean_divergence(inst, "kl"),
                        "token_be": r["token_E_tau"] + 1, "block_be": r["block_E_tau"] + 1,
                    })
                progress.step(f"fig2 {family} {KNOB[family]}={k}")
        V = FAMILY_BASE.get(family, {}).get("vocab_size", cfg.fig2_V)
        panels.append({"family": family, "knob": KNOB[family], "V": V,
                       "params": FAMILY_BASE.get(family, {}), "points": points})
    return {"Ls": list(cfg.fig2_Ls), "seeds": cfg.fig2_seeds, "panels": panels}


FAMILY_TITLES = {
    "dirichlet": "Dirichlet rows (knob alpha)",
    "logit-noise": "noisy target logits (knob sigma)",
    "mixture": "q = (1-eps) p + eps uniform (knob eps)",
    "temperature": "draft at temperature T (knob T)",
    "ngram": "character n-grams of a real text\n(4-gram target; knob: draft order 1-3,\ndraft fitted on 10% of the text)",
}


def plot_fig2(plt, data: dict):
    n = len(data["panels"])
    fig, axes = plt.subplots(1, n, figsize=(4.1 * n, 4.4), sharey=True)
    colors = plt.cm.viridis(np.linspace(0.0, 0.85, len(data["Ls"])))
    for ax, panel in zip(np.atleast_1d(axes), data["panels"]):
        for color, L in zip(colors, data["Ls"]):
            pts = [p for p in panel["points"] if p["L"] == L]
            knobs = sorted({p["knob"] for p in pts})
            xs, ys = [], []
            for k in knobs:
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


# ----------------------------------------------------------------------------- fig 3


def compute_fig3(cfg: Config, progress: Progress) -> dict:
    from toy_models import mean_divergence, ngram_instance, two_token

    out = []
    toy = two_token()
    tok = analyze(toy, token_verification, "token")
    blk = analyze(toy, block_verification, "block")
    out.append({"name": "the paper's two-token example: p = (1/3, 2/3), q = (2/3, 1/3), L = 2",
                "exact": True, "token_pmf": [str(v) for v in tok.tau_pmf],
                "block_pmf": [str(v) for v in blk.tau_pmf],
                "token_E_tau": str(tok.expected_accepted),
                "block_E_tau": str(blk.expected_accepted)})
    params = {"vocab_size": 5, "block_length": cfg.fig3_L, "order": 4, "draft_order": 2,
              "draft_fraction": 0.1, "seed": 0}
    inst = ngram_instance(**params)
    r = single_path(inst)
    out.append({"name": (f"real text: character 4-gram target vs bigram draft\n(draft "
                         f"estimated on 10% of the text), V = 5, L = {cfg.fig3_L}"),
                "exact": False, "params": params, "tv": mean_divergence(inst),
                "token_pmf": r["token_pmf"], "block_pmf": r["block_pmf"],
                "token_E_tau": r["token_E_tau"], "block_E_tau": r["block_E_tau"]})
    progress.step("fig3")
    return {"panels": out}


def plot_fig3(plt, data: dict):
    from fractions import Fraction

    fig, axes = plt.subplots(1, len(data["panels"]), figsize=(11, 4.3))
    for ax, panel in zip(np.atleast_1d(axes), data["panels"]):
        conv = (lambda v: float(Fraction(v))) if panel["exact"] else float
        tok = np.array([conv(v) for v in panel["token_pmf"]])
        blk = np.array([conv(v) for v in panel["block_pmf"]])
        i = np.arange(len(tok))
        w = 0.4
        e_tok, e_blk = conv(panel["token_E_tau"]), conv(panel["block_E_tau"])
        lab_t = f"token: E[tau] = {panel['token_E_tau']}" if panel["exact"] else f"token: E[tau] = {e_tok:.3f}"
        lab_b = f"block: E[tau] = {panel['block_E_tau']}" if panel["exact"] else f"block: E[tau] = {e_blk:.3f}"
        ax.bar(i - w / 2, tok, w, color="tab:orange", label=lab_t)
        ax.bar(i + w / 2, blk, w, color="tab:blue", label=lab_b)
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


# ----------------------------------------------------------------------------- fig 4 / 5


def compute_fig4(cfg: Config, progress: Progress) -> dict:
    verifiers = optional("spectheory.verifiers", "MULTI_PATH")
    analyze_mp = optional("spectheory.multipath", "analyze_multipath")
    mp_lp, direct = _lp("multipath_lp"), _lp("direct_lp")
    notes = []
    if not verifiers or analyze_mp is None:
        notes.append("multi-path verifiers not available (spectheory.verifiers.MULTI_PATH / "
                     "spectheory.multipath.analyze_multipath missing)")
        verifiers = {}
    if mp_lp is None:
        notes.append("multi-path LP (lp.multipath_lp) not available")
    if direct is None:
        notes.append("direct LP (lp.direct_lp) not available")
    drafting = {name: ("norep" if getattr(v, "drafting", "iid") == "norep" else "iid")
                for name, v in verifiers.items()}
    rows = []
    for seed in range(cfg.fig4_seeds):
        inst = make_family("dirichlet", cfg.fig4_V, cfg.fig4_L, seed, 1.0)
        for K in cfg.fig4_Ks:
            row = {"seed": seed, "K": K, "be": {}}
            for name, v in verifiers.items():
                try:
                    row["be"][name] = float(analyze_mp(inst, v, K, drafting=drafting[name])
                                            .block_efficiency)
                except SpectheoryError as exc:
                    row["be"][name] = None
                    notes.append(f"{name}, K = {K}: {exc}")
            row["multipath_lp"] = float(mp_lp(inst, paths=K).optimum) if mp_lp else None
            small = direct is not None and K <= cfg.fig4_direct_max_K
            row["direct_lp"] = float(direct(inst, paths=K).optimum) if small else None
            row["direct_lp_norep"] = None
            if small and "norep" in drafting.values():
                try:
                    row["direct_lp_norep"] = float(direct(inst, paths=K, drafting="norep").optimum)
                except SpectheoryError as exc:
                    notes.append(f"no LP optimum for drafting without replacement "
                                 f"(lp.direct_lp: {exc})")
            rows.append(row)
            progress.step(f"fig4 seed {seed} K={K}")
    return {"V": cfg.fig4_V, "L": cfg.fig4_L, "Ks": list(cfg.fig4_Ks), "seeds": cfg.fig4_seeds,
            "direct_max_K": cfg.fig4_direct_max_K, "verifiers": list(verifiers),
            "drafting": drafting, "rows": rows, "notes": sorted(set(notes))}


def _mean_by_K(data: dict, key):
    out = []
    for K in data["Ks"]:
        vals = [key(r) for r in data["rows"] if r["K"] == K]
        vals = [v for v in vals if v is not None]
        out.append(np.mean(vals) if vals else np.nan)
    return np.array(out)


def _optimum(row, drafting: str = "iid"):
    """The tightest available optimum under ``drafting``: the direct LP where solved, else (i.i.d.
    drafting only) the compact node-budget relaxation, an upper bound."""
    if drafting == "norep":
        return row.get("direct_lp_norep")
    return row["direct_lp"] if row["direct_lp"] is not None else row["multipath_lp"]


def _no_data(ax, notes):
    ax.text(0.5, 0.5, "\n".join(notes) or "no data", ha="center", va="center",
            transform=ax.transAxes, fontsize=9, wrap=True, color="tab:red")


def _footnote(fig, notes):
    """Notes on missing pieces, in small print under the axes."""
    if notes:
        fig.text(0.01, 0.005, "Not available: " + "; ".join(notes), fontsize=6.5,
                 color="tab:red", ha="left", va="bottom", wrap=True)


def plot_fig4(plt, data: dict):
    fig, ax = plt.subplots(figsize=(10.5, 4.8))
    Ks = np.array(data["Ks"])
    markers = "osD^v<>p*h"
    for j, name in enumerate(data["verifiers"]):
        norep = data.get("drafting", {}).get(name) == "norep"
        ax.plot(Ks, _mean_by_K(data, lambda r, n=name: r["be"].get(n)), marker=markers[j % 10],
                ms=5, ls="--" if norep else "-",
                label=name + (" (drafts without replacement)" if norep else ""))
    mp = _mean_by_K(data, lambda r: r["multipath_lp"])
    if not np.all(np.isnan(mp)):
        ax.plot(Ks, mp, color="k", ls=":", lw=1.5,
                label="multi-path LP relaxation (upper bound, i.i.d. drafts)")
    dl = _mean_by_K(data, lambda r: r["direct_lp"])
    if not np.all(np.isnan(dl)):
        ax.plot(Ks, dl, "kx", ms=10, mew=2, label="direct LP optimum (i.i.d. drafts)")
    dn = _mean_by_K(data, lambda r: r.get("direct_lp_norep"))
    if not np.all(np.isnan(dn)):
        ax.plot(Ks, dn, "k+", ms=11, mew=2, label="direct LP optimum (drafts without replacement)")
    if not data["verifiers"]:
        _no_data(ax, data["notes"])
    else:
        _footnote(fig, data["notes"])
    ax.set_xticks(Ks)
    ax.set_xlabel("K = number of draft paths")
    ax.set_ylabel("block efficiency E[tau + 1] (tokens per target call)")
    ax.set_title(f"Multi-path verification, Dirichlet(1) instances, V = {data['V']}, "
                 f"L = {data['L']} (mean over {data['seeds']} instance(s))", fontsize=10)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_fig5(plt, data: dict):
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    Ks = data["Ks"]
    names = data["verifiers"]
    w = 0.8 / max(len(names), 1)
    any_bar = False
    for j, name in enumerate(names):
        gaps = []
        for K in Ks:
            vals = []
            for r in data["rows"]:
                opt = _optimum(r, data.get("drafting", {}).get(name, "iid"))
                be = r["be"].get(name)
                if r["K"] == K and opt is not None and be is not None:
                    vals.append(100 * (opt - be) / opt)
            gaps.append(np.mean(vals) if vals else np.nan)
        has = not np.all(np.isnan(gaps))
        any_bar |= has
        ax.bar(np.arange(len(Ks)) + (j - (len(names) - 1) / 2) * w, gaps, w,
               label=name if has else f"{name}: no optimum for its drafting scheme")
    if not any_bar:
        _no_data(ax, data["notes"] or ["no optimum available"])
    else:
        _footnote(fig, data["notes"])
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
    if names:
        ax.legend(fontsize=8)
    return fig


# ----------------------------------------------------------------------------- fig 6


#: Knob search ranges for matching the token block efficiency (token BE decreases along them).
MATCH_RANGE = {"logit-noise": (0.0, 20.0, False), "mixture": (0.0, 1.0, False),
               "temperature": (1.0, 200.0, True)}


def match_token_be(family: str, V: int, L: int, seed: int, target: float,
                   xtol: float = 1e-6):
    """Knob value at which token verification's E[tau+1] equals ``target`` (Brent's method on
    the exact value), or None when the family's range does not reach it."""
    from scipy.optimize import brentq

    lo, hi, log = MATCH_RANGE[family]

    def f(x):
        k = float(np.exp(x)) if log else x
        inst = make_family(family, V, L, seed, k)
        return float(analyze(inst, token_verification).block_efficiency) - target

    a, b = (np.log(lo), np.log(hi)) if log else (lo, hi)
    fa, fb = f(a), f(b)
    if fa < 0 or fb > 0:
        return None
    x = brentq(f, a, b, xtol=xtol, rtol=1e-10)
    return float(np.exp(x)) if log else float(x)


def compute_fig6(cfg: Config, progress: Progress) -> dict:
    from toy_models import mean_divergence

    Lm = 8
    results = []
    for family in cfg.fig6_families:
        for seed in range(cfg.fig6_seeds):
            k = match_token_be(family, cfg.fig6_V, Lm, seed, PAPER["token_be_L8"])
            progress.step(f"fig6 {family} seed {seed}")
            if k is None:
                results.append({"family": family, "seed": seed, "knob": None})
                continue
            base = make_family(family, cfg.fig6_V, Lm, seed, k)
            per_L = {}
            for L in sorted(PAPER["gain_pct"]):
                r = single_path(truncate(base, L))
                tb, bb = r["token_E_tau"] + 1, r["block_E_tau"] + 1
                per_L[L] = {"token_be": tb, "block_be": bb, "gain_pct": 100 * (bb / tb - 1)}
            results.append({"family": family, "seed": seed, "knob": k, "knob_name": KNOB[family],
                            "tv_L8": mean_divergence(base), "per_L": per_L})
    return {"V": cfg.fig6_V, "seeds": cfg.fig6_seeds, "paper": PAPER, "results": results}


def plot_fig6(plt, data: dict):
    fig, ax = plt.subplots(figsize=(9, 5))
    Ls = sorted(PAPER["gain_pct"])
    fams = list(dict.fromkeys(r["family"] for r in data["results"]))
    groups = ["paper"] + fams
    w = 0.8 / len(groups)
    x = np.arange(len(Ls))
    ax.bar(x - 0.4 + w / 2, [PAPER["gain_pct"][L] for L in Ls], w, color="0.35", hatch="//",
           edgecolor="white", label="published: PaLM-2 S / XXS (Sun et al.)")
    for j, fam in enumerate(fams, start=1):
        res = [r for r in data["results"] if r["family"] == fam and r["knob"] is not None]
        if not res:
            continue
        g = np.array([[r["per_L"][L]["gain_pct"] for L in Ls] for r in res])
        tb = np.array([[r["per_L"][L]["token_be"] for L in Ls] for r in res])
        mean = g.mean(0)
        err = np.vstack([mean - g.min(0), g.max(0) - mean])
        ax.bar(x - 0.4 + w / 2 + j * w, mean, w, yerr=err, capsize=3,
               label=f"toy {fam}, V = {data['V']} ({len(res)} instance(s))")
        for xi, top, t in zip(x - 0.4 + w / 2 + j * w, g.max(0), tb.mean(0)):
            ax.text(xi, top + 0.15, f"{t:.2f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x)
    ax.set_xticklabels([f"L = {L}" for L in Ls])
    ax.set_ylabel("block-efficiency gain of block over token verification (%)")
    ax.set_title("Our exact gains vs the published table. Toy draft/target pairs are tuned so that "
                 "token verification's\nE[tau+1] at L = 8 equals the paper's 3.41; numbers on "
                 "bars: toy token E[tau+1] at that L (error bars: min-max)", fontsize=9.5)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper left")
    return fig


# ----------------------------------------------------------------------------- driver


COMPUTE = {
    "fig1_accepted_vs_L": compute_fig1,
    "fig2_gain_vs_divergence": compute_fig2,
    "fig3_tau_pmf": compute_fig3,
    "fig4_multipath_vs_K": compute_fig4,
    "fig6_paper_comparison": compute_fig6,
}
PLOT = {
    "fig1_accepted_vs_L": ("fig1_accepted_vs_L", plot_fig1),
    "fig2_gain_vs_divergence": ("fig2_gain_vs_divergence", plot_fig2),
    "fig3_tau_pmf": ("fig3_tau_pmf", plot_fig3),
    "fig4_multipath_vs_K": ("fig4_multipath_vs_K", plot_fig4),
    "fig5_multipath_gap": ("fig4_multipath_vs_K", plot_fig5),
    "fig6_paper_comparison": ("fig6_paper_comparison", plot_fig6),
}


def expected_files(out: Path | str) -> list[Path]:
    """Every file a run writes into ``out``."""
    out = Path(out)
    files = [out / f"{name}.{ext}" for name, _ in FIGURES for ext in FORMATS]
    return files + [out / "figures.json", out / "INDEX.md"]


def compute_all(cfg: Config, progress: bool = True) -> dict:
    bar = Progress(work_units(cfg), progress)
    data = {}
    try:
        for name, fn in COMPUTE.items():
            t0 = time.time()
            data[name] = fn(cfg, bar)
            data[name]["seconds"] = time.time() - t0
    finally:
        bar.close()
    return data


def render(data: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 130, "font.size": 9,
                         "pdf.fonttype": 42})
    for name, _ in FIGURES:
        key, fn = PLOT[name]
        fig = fn(plt, data[key])
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        for ext in FORMATS:
            fig.savefig(out / f"{name}.{ext}", metadata=_metadata(ext))
        plt.close(fig)


def _metadata(ext: str) -> dict:
    # fixed metadata: reruns give byte-stable PDFs/PNGs (no creation date)
    if ext == "pdf":
        return {"CreationDate": None, "Creator": "spectheory figures"}
    return {"Software": "spectheory figures"}


def run(out: str | os.PathLike, quick: bool = False, progress: bool = True) -> dict:
    """Compute every figure's data, write PNG + PDF, figures.json and INDEX.md into ``out``."""
    cfg = QUICK if quick else FULL
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpectheoryError(f"cannot create output folder {str(out)!r}: "
                              f"{exc.strerror or exc}") from None
    t0 = time.time()
    data = compute_all(cfg, progress)
    render(data, out)
    seconds = time.time() - t0
    meta = {"mode": cfg.name, "seconds": seconds, "config": _jsonable(asdict(cfg)),
            "machine": machine(), "command": f"spectheory figures{' --quick' if quick else ''} "
                                              f"--out {out}"}
    payload = {"meta": meta, **_jsonable(data)}
    (out / "figures.json").write_text(json.dumps(payload, indent=1) + "\n")
    (out / "INDEX.md").write_text(index_markdown(payload))
    return payload


def machine() -> str:
    return (f"{platform.machine()} {platform.system()}, {os.cpu_count()} cores "
            f"(torch threads: {_torch_threads()}), Python {platform.python_version()}")


def _torch_threads():
    import torch

    return torch.get_num_threads()


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


# ----------------------------------------------------------------------------- index


def index_markdown(payload: dict) -> str:
    meta = payload["meta"]
    f1, f2, f3 = (payload[k] for k in ("fig1_accepted_vs_L", "fig2_gain_vs_divergence",
                                       "fig3_tau_pmf"))
    f4, f6 = payload["fig4_multipath_vs_K"], payload["fig6_paper_comparison"]
    lines = [
        "# Theory figures",
        "",
        f"Generated by `{meta['command']}` ({meta['mode']} run) in **{meta['seconds']:.1f} s** on "
        f"{meta['machine']}. Every number is exact (full sequence-tree enumeration in float64, "
        "or LP optimum), from fixed seeds; all plotted numbers are in `figures.json`. "
        "E[tau] = expected accepted draft tokens; block efficiency E[tau+1] = tokens produced "
        "per target call. Each figure is a PNG and a vector PDF.",
        "",
    ]
    # fig 1
    lines += [
        "## fig1_accepted_vs_L: expected accepted tokens vs block length",
        "",
        f"E[tau] against L = {f1['Ls'][0]}..{f1['Ls'][-1]} for token verification (standard "
        "speculative sampling), block verification (Sun et al., arXiv 2403.10444), the optimum of "
        "the node-budget LP (Thomas & Pal, arXiv 2602.16961; it equals block verification, "
        "solved for small L only) and the full-knowledge coupling bound sum_i sum_{x^i} "
        "min(q(x^i), p(x^i)) (no verifier reaches it). Line = median, band = 10-90% over "
        f"{f1['seeds']} random instances with V = {f1['V']}; each instance is built once for the "
        "largest L and truncated, so the curves follow the same models. Left: independent "
        "Dirichlet(1) draft and target rows; right: draft = target logits plus N(0,1) noise of "
        "scale 1.",
        "",
    ]
    if not f1["lp_available"]:
        lines += ["*The node-budget LP (`lp.node_budget_lp`) was not available in this run.*", ""]
    if not f1["coupling_available"]:
        lines += ["*The coupling bound (`lp.coupling_bound`) was not available in this run.*", ""]
    tab = ["| panel | L | token E[tau] | block E[tau] | LP - 1 | coupling bound |",
           "|---|---|---|---|---|---|"]
    for p in f1["panels"]:
        for j, L in enumerate(f1["Ls"]):
            def med(key):
                vals = [row[j] for row in p["values"][key] if row[j] is not None]
                return f"{np.median(vals):.4f}" if vals else "n/a"
            tab.append(f"| {p['family']} | {L} | {med('token')} | {med('block')} | {med('lp')} | "
                       f"{med('coupling')} |")
    lines += ["Medians:", ""] + tab + [""]
    # fig 2
    lines += [
        "## fig2_gain_vs_divergence: gain of block over token verification vs divergence",
        "",
        "Relative block-efficiency gain E[tau+1]_block / E[tau+1]_token - 1 (in %) against the "
        "mean per-step total variation TV(p(.|s), q(.|s)) along the draft's own paths "
        "(`toy_models.divergence`), one curve per L, one panel per toy family, each point the "
        f"mean over {f2['seeds']} seed(s) at one knob value. The gain is zero at TV = 0 (draft = "
        "target) and when the two models share nothing, and grows with L.",
        "",
        "| family | knob values | V |",
        "|---|---|---|",
    ]
    for p in f2["panels"]:
        knobs = sorted({pt["knob"] for pt in p["points"]})
        lines.append(f"| {p['family']} ({p['knob']}) | {', '.join(str(k) for k in knobs)} | "
                     f"{p['V']} |")
    best_fam, best = max(((p["family"], pt) for p in f2["panels"] for pt in p["points"]),
                         key=lambda fp: fp[1]["block_be"] / fp[1]["token_be"])
    lines += ["", f"Largest gain on a single instance of this grid: "
              f"{100 * (best['block_be'] / best['token_be'] - 1):.2f}% ({best_fam}, "
              f"{KNOB[best_fam]} = {best['knob']}, seed {best['seed']}, L = {best['L']}, "
              f"TV = {best['tv']:.3f}).", ""]
    # fig 3
    lines += ["## fig3_tau_pmf: distribution of tau, token vs block", ""]
    for p in f3["panels"]:
        lines.append(f"* {' '.join(p['name'].split())}: E[tau] token = {_fmt(p['token_E_tau'])}, "
                     f"block = {_fmt(p['block_E_tau'])}; pmf token = ({', '.join(_fmt(v) for v in p['token_pmf'])}), "
                     f"block = ({', '.join(_fmt(v) for v in p['block_pmf'])}).")
    lines += ["", "The left panel is exact in rationals (the paper's test vector: E[tau] = 10/9 "
              "and 11/9); the right one is float64. In both, block verification takes "
              "probability from short accepts and puts it on accepting the whole block.", ""]
    # fig 4/5
    lines += [
        "## fig4_multipath_vs_K: multi-path block efficiency vs K",
        "",
        f"Block efficiency E[tau+1] of each multi-path verifier (GBV of Thomas & Pal and the "
        f"baselines in `spectheory.verifiers.MULTI_PATH`) with K draft paths, on "
        f"{f4['seeds']} Dirichlet(1) instances with V = {f4['V']}, L = {f4['L']} (mean). Each "
        f"verifier runs under the drafting scheme it is lossless for: K i.i.d. paths, or (dashed, "
        f"'without replacement') distinct first tokens. Black marks: the direct LP optimum over "
        f"all valid K-path verifiers under each scheme (solved for K <= {f4['direct_max_K']}); "
        f"dotted: the compact node-budget multi-path relaxation for i.i.d. drafts (an upper "
        f"bound).",
        "",
        "## fig5_multipath_gap: gap to optimal per multi-path verifier",
        "",
        "100 (opt - E[tau+1]) / opt per verifier and K, where opt is the direct LP optimum under "
        "the verifier's drafting scheme where solved, else the i.i.d. relaxation (an upper bound, "
        "so the gap is then overstated). Mean over the instances of fig4.",
        "",
    ]
    if f4["notes"]:
        lines += ["Not available in this run: " + "; ".join(f4["notes"]) + ".", ""]
    if f4["verifiers"]:
        head = ("| K | " + " | ".join(f4["verifiers"])
                + " | direct LP (i.i.d.) | direct LP (without replacement) | relaxation (i.i.d.) |")
        lines += ["Mean E[tau+1]:", "", head, "|" + "---|" * (len(f4["verifiers"]) + 4)]
        for K in f4["Ks"]:
            rows = [r for r in f4["rows"] if r["K"] == K]
            cells = [_mean_str([r["be"].get(n) for r in rows]) for n in f4["verifiers"]]
            cells += [_mean_str([r["direct_lp"] for r in rows]),
                      _mean_str([r.get("direct_lp_norep") for r in rows]),
                      _mean_str([r["multipath_lp"] for r in rows])]
            lines.append(f"| {K} | " + " | ".join(cells) + " |")
        lines.append("")
    # fig 6
    lines += [
        "## fig6_paper_comparison: our exact gains vs the published table",
        "",
        f"Published ({PAPER['source']}; {PAPER['models']}): block efficiency gain of block over "
        "token verification +3.5% at L = 4, +6.2% at L = 6, +8.3% at L = 8 (token 3.41 -> block "
        "3.70 at L = 8).",
        "",
        "**What we matched, and what we did not.** Toy instances are not PaLM-2: the vocabulary "
        f"is V = {f6['V']} and the conditionals are synthetic. For each toy family and seed we "
        "tune the family's divergence knob (Brent's method on the exact value) so that token "
        "verification's block efficiency at L = 8 equals the paper's 3.41, then compute the "
        "exact gains at L = 4, 6, 8 with the same models. Only that one number is matched; the "
        "paper's token efficiencies at L = 4 and 6 are not in our source, so the L = 4, 6 "
        "comparison is of shape, not a fit.",
        "",
        "| family | seed | knob | mean TV | token BE L=8 | block BE L=8 | gain L=4 | gain L=6 | "
        "gain L=8 |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| paper (PaLM-2) | - | - | - | {PAPER['token_be_L8']:.2f} | {PAPER['block_be_L8']:.2f} | "
        f"+{PAPER['gain_pct'][4]}% | +{PAPER['gain_pct'][6]}% | +{PAPER['gain_pct'][8]}% |",
    ]
    for r in f6["results"]:
        if r["knob"] is None:
            lines.append(f"| {r['family']} | {r['seed']} | not reachable | | | | | | |")
            continue
        pl = r["per_L"]
        lines.append(
            f"| {r['family']} | {r['seed']} | {r['knob_name']} = {r['knob']:.4g} | "
            f"{r['tv_L8']:.3f} | {pl['8']['token_be']:.4f} | {pl['8']['block_be']:.4f} | "
            f"{pl['4']['gain_pct']:+.2f}% | {pl['6']['gain_pct']:+.2f}% | "
            f"{pl['8']['gain_pct']:+.2f}% |")
    lines += [""] + paper_summary(f6) + [""]
    return "\n".join(lines)


def paper_summary(f6: dict) -> list[str]:
    """Mean toy gains per L next to the paper's, and the toy instance closest to the paper."""
    ok = [r for r in f6["results"] if r["knob"] is not None]
    if not ok:
        return ["No toy instance reached the paper's token block efficiency."]
    Ls = sorted(PAPER["gain_pct"])
    mean = {L: np.mean([r["per_L"][str(L)]["gain_pct"] for r in ok]) for L in Ls}

    def dist(r):
        return sum((r["per_L"][str(L)]["gain_pct"] - PAPER["gain_pct"][L]) ** 2 for L in Ls)

    best = min(ok, key=dist)
    cmp = ", ".join(f"L = {L}: {mean[L]:+.1f}% vs +{PAPER['gain_pct'][L]}%" for L in Ls)
    near = ", ".join(f"{best['per_L'][str(L)]['gain_pct']:+.1f}%" for L in Ls)
    above = [mean[L] > PAPER["gain_pct"][L] for L in Ls]
    how = "more" if all(above) else ("less" if not any(above) else "about as much")
    return [f"Mean over the {len(ok)} matched toy instances: {cmp} (toy vs paper). At the same "
            f"token efficiency our small-vocabulary toys gain {how} from block verification "
            f"{'as' if how == 'about as much' else 'than'} PaLM-2 did, on average, and the spread between instances is large: the gain depends "
            "on how the mismatch is spread over the sequence tree, not only on the acceptance "
            f"rate. Closest instance to the published row: {best['family']} seed {best['seed']} "
            f"({near} at L = 4, 6, 8)."]


def _fmt(v) -> str:
    return v if isinstance(v, str) else f"{float(v):.4f}"


def _mean_str(vals) -> str:
    vals = [v for v in vals if v is not None]
    return f"{np.mean(vals):.4f}" if vals else "n/a"


# ----------------------------------------------------------------------------- CLI


def cmd_figures(args) -> int:
    import torch

    if args.threads < 1:
        raise SpectheoryError(f"--threads {args.threads} must be at least 1")
    before = torch.get_num_threads()
    torch.set_num_threads(args.threads)  # many small float64 ops: one thread is fastest here
    try:
        payload = run(args.out, quick=args.quick, progress=not args.no_progress)
    finally:
        torch.set_num_threads(before)
    meta = payload["meta"]
    files = expected_files(args.out)
    sys.stdout.write(f"wrote {len(files)} files to {args.out} ({meta['mode']} run, "
                     f"{meta['seconds']:.1f} s); see {Path(args.out) / 'INDEX.md'}\n")
    return 0


def register(sub) -> None:
    p = sub.add_parser("figures", help="regenerate the theory figures (PNG + PDF + INDEX.md)")
    p.add_argument("--out", default="figures", help="output folder (default: figures)")
    p.add_argument("--quick", action="store_true",
                   help="small grids (under a minute on 2 cores); same figures and files")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: the engine's many small array operations "
                        "run about 3x faster on one thread than on two on a 2-core machine)")
    p.set_defaults(func=cmd_figures)
