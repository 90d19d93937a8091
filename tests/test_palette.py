"""One style per verifier: the palette map (`spectheory.sweep.palette`) gives every registered
verifier its own (colour, marker) pair, and every figure of the gallery and ``sweep plot`` draw
each verifier in that style (checked on the drawn matplotlib artists of each figure's plotting
function fed small hand-made numbers), with legends that list only what is drawn and integer K
ticks."""

from __future__ import annotations

import csv
import re
from fractions import Fraction

import pytest

from spectheory.cli import figures
from spectheory.registry import verifier_names
from spectheory.sweep import palette
from spectheory.sweep.palette import (LINESTYLE, OPTIMUM_STYLE, VERIFIER_STYLE, optimum_style,
                                      verifier_style)
from spectheory.verifiers import BUILTIN, MULTI_PATH

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

GALLERY = figures.gallery_folder()


def pair(s) -> tuple[str, str]:
    return to_hex(s.color), s.marker


def problems(styles: dict) -> list[str]:
    """What is wrong with a palette map: a colour matplotlib cannot draw, or two names sharing a
    (colour, marker) pair."""
    out, seen = [], {}
    for name, s in styles.items():
        try:
            key = pair(s)
        except ValueError:
            out.append(f"{name}: colour {s.color!r}")
            continue
        if key in seen:
            out.append(f"{name} and {seen[key]} share {key}")
        seen[key] = name
    return out


# ----------------------------------------------------------------------------- the map


def test_every_registered_verifier_has_its_own_colour_and_marker():
    names = set(verifier_names()) | {"topk"}
    assert names <= set(VERIFIER_STYLE)
    assert problems(VERIFIER_STYLE) == []
    assert problems(OPTIMUM_STYLE) == []
    # an optimum never looks like a verifier
    assert not {pair(s) for s in OPTIMUM_STYLE.values()} & {pair(s) for s in VERIFIER_STYLE.values()}
    assert {to_hex(s.color) for s in OPTIMUM_STYLE.values()} <= {
        to_hex(c) for c in ("black", "dimgray", "tab:gray")}


def test_the_checker_catches_a_shared_pair_and_a_bad_colour():
    planted = dict(VERIFIER_STYLE, specinfer=VERIFIER_STYLE["spechub"])
    assert problems(planted) == ["spechub and specinfer share ('#fa8072', 'p')"]
    assert problems({"x": palette.Style("not-a-colour", "o", "-")}) == [
        "x: colour 'not-a-colour'"]
    # the same colour written two ways is the same colour
    assert problems({"a": palette.Style("tab:blue", "o", "-"),
                     "b": palette.Style("#1f77b4", "o", "-")})


def test_multi_path_verifiers_each_have_a_colour_of_their_own():
    """Figures 4, 5 and 10 draw them together; figure 5 draws bars (colour only)."""
    colours = [to_hex(VERIFIER_STYLE[n].color) for n in MULTI_PATH]
    assert len(set(colours)) == len(colours)


def test_line_style_says_the_drafting_scheme():
    for spec in BUILTIN:
        want = LINESTYLE["lossy"] if not spec.lossless else LINESTYLE[spec.drafting]
        assert VERIFIER_STYLE[spec.name].linestyle == want, spec.name


def test_unknown_names_get_a_stable_grey_style():
    a, b = verifier_style("mymod:my_rule"), verifier_style("mymod:my_rule")
    assert a == b and a.color in ("dimgray", "darkgray", "slategray", "rosybrown", "darkkhaki")
    assert verifier_style("gbv") == VERIFIER_STYLE["gbv"]
    assert optimum_style("direct", "norep") == OPTIMUM_STYLE["direct norep"]
    assert optimum_style("direct", "iid") == optimum_style("direct", "") == OPTIMUM_STYLE["direct"]


# ----------------------------------------------------------------------------- the figures


def line_style_of(line: Line2D):
    ls = line.get_linestyle()
    return {"-": "-", "--": "--", ":": ":", "-.": "-.", "None": "None", "": "None",
            " ": "None"}.get(ls, ls)


def assert_drawn_as(line: Line2D, s, what: str, check_ls: bool = True) -> None:
    assert to_hex(line.get_color()) == to_hex(s.color), what
    assert line.get_marker() == s.marker, what
    if check_ls and line_style_of(line) != "None":
        assert line_style_of(line) == s.linestyle, what


def drawn_lines(fig) -> list[Line2D]:
    return [ln for ax in fig.axes for ln in ax.get_lines() if len(ln.get_xdata())]


def assert_legend_lists_only_what_is_drawn(fig) -> None:
    """Every legend entry stands for something drawn: a line or bar with data under that
    label, or a style proxy whose colour and marker (or line style, for a line-style entry) a
    drawn line has."""
    drawn = drawn_lines(fig)
    drawn_labels = {ln.get_label() for ln in drawn}
    drawn_labels |= {p.get_label() for ax in fig.axes for c in ax.containers
                     for p in [c] if len(c)}
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None:
            continue
        for text, handle in zip(leg.get_texts(), leg.legend_handles):
            label = text.get_text()
            if label in drawn_labels:
                continue
            assert isinstance(handle, Line2D), label
            if label.startswith("line style: "):
                assert any(line_style_of(ln) == line_style_of(handle) and len(ln.get_xdata()) > 1
                           for ln in drawn), label
            else:
                assert any(to_hex(ln.get_color()) == to_hex(handle.get_color())
                           and ln.get_marker() == handle.get_marker() for ln in drawn), label


@pytest.fixture
def captured(monkeypatch):
    """Load a gallery script with its ``save`` replaced by one that keeps the figure."""
    kept = []

    def load(stem):
        module = figures.load(figures.scripts(GALLERY)[stem])
        monkeypatch.setattr(module, "save", lambda fig, out, stem, quick=False: kept.append(fig))
        return module

    yield load, kept
    import matplotlib.pyplot as plt

    plt.close("all")


def multipath_data():
    names = list(MULTI_PATH)
    drafting = {n: s.default_drafting for n, s in MULTI_PATH.items()}
    rows = []
    for K in (1, 2, 3):
        be = {n: 2.0 + 0.01 * j + 0.1 * K for j, n in enumerate(names)}
        be["spechub"] = None if K > 2 else be["spechub"]
        be["traversal-tree"] = None  # planted: nothing to draw, so not in the legend
        rows.append({"seed": 0, "K": K, "be": be, "multipath_lp": 3.0, "direct_lp": 2.9,
                     "direct_lp_norep": 2.95 if K <= 2 else None,
                     "direct_lp_hub": 2.97 if K <= 2 else None})
    return {"V": 2, "L": 2, "Ks": [1, 2, 3], "seeds": 1, "direct_max_K": 2, "verifiers": names,
            "drafting": drafting, "rows": rows, "notes": []}


def test_fig4_draws_each_verifier_in_its_style(captured):
    load, _ = captured
    fig = load("fig4_multipath_vs_K").plot(multipath_data())
    by_label = {ln.get_label().split(" (")[0]: ln for ln in drawn_lines(fig)}
    for name in MULTI_PATH:
        if name == "traversal-tree":
            assert name not in by_label  # all None: not drawn, not listed
            continue
        assert_drawn_as(by_label[name], verifier_style(name), name)
    full = {ln.get_label(): ln for ln in drawn_lines(fig)}
    for what, drafting in (("i.i.d. drafts", "iid"), ("drafts without replacement", "norep"),
                           ("hub drafting, K <= 2", "hub")):
        assert_drawn_as(full[f"direct LP optimum ({what})"], optimum_style("direct", drafting),
                        what, check_ls=False)
    assert_legend_lists_only_what_is_drawn(fig)
    assert [t for t in fig.axes[0].get_xticks()] == [1, 2, 3]


def test_fig5_bars_take_the_verifier_colour(captured):
    load, _ = captured
    module = load("fig5_multipath_gap")
    data = multipath_data()
    fig = module.plot(data, module.gaps(data))
    ax = fig.axes[0]
    labels = [c.get_label() for c in ax.containers]
    assert "traversal-tree" not in " ".join(labels)  # no optimum drawn: left out of the legend
    for c in ax.containers:
        name = c.get_label()
        assert all(to_hex(p.get_facecolor()) == to_hex(verifier_style(name).color)
                   for p in c.patches if isinstance(p, Rectangle)), name
    for ln in [ln for ln in drawn_lines(fig) if ln.get_marker() not in (None, "None", "")]:
        # the verifier's marker on top of its bars
        name = [n for n in MULTI_PATH if to_hex(VERIFIER_STYLE[n].color) ==
                to_hex(ln.get_color())]
        assert len(name) == 1 and ln.get_marker() == VERIFIER_STYLE[name[0]].marker
    assert_legend_lists_only_what_is_drawn(fig)


def test_fig9_series_take_the_verifier_style_and_list_only_drawn_line_styles(captured):
    load, _ = captured
    module = load("fig9_tree_shapes")
    shapes = [("(1)", 1, 1), ("(1,1)", 2, 2), ("(2,1)", 3, 4), ("(2,2,1)", 7, 9)]
    series = list(module.SERIES_VERIFIER)
    rows = [{"shape": s, "drafted_nodes": e, "iid_paths_nodes": k, "lp_topk": 1.1,
             "lp_iid": None, "be": {n: 1.5 + 0.1 * j + 0.01 * e for j, n in enumerate(series)}}
            for s, e, k in shapes]
    fig = module.plot({"V": 4, "seeds": 1, "rows": rows, "series": series, "notes": []})
    lines = drawn_lines(fig)
    for name, verifier in module.SERIES_VERIFIER.items():
        ys = {r["be"][name] for r in rows}
        mine = [ln for ln in lines if set(ln.get_ydata()) <= ys]
        assert mine, name
        for ln in mine:
            assert_drawn_as(ln, verifier_style(verifier), name, check_ls=False)
    leg = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    # only chains have two points here: root branching and static trees draw no line
    assert [t for t in leg if t.startswith("line style")] == ["line style: chains"]
    assert "direct LP optimum, i.i.d. drafting" not in leg  # none solved, none drawn
    assert_legend_lists_only_what_is_drawn(fig)


def test_fig10_fig7_fig1_fig3_fig8_use_the_palette(captured, tmp_path):
    load, kept = captured
    names = ["specinfer", "gbv", "hu", "specinfer-norep", "traversal"]
    panels = []
    for L, d in ((1, "iid"), (1, "norep"), (3, "iid"), (3, "norep")):
        curves = {n: {"K": [1, 2], "mean": [1.5, 1.6 + 0.01 * j]} for j, n in enumerate(names)
                  if (n.endswith("norep") or n == "traversal") == (d == "norep")}
        panels.append({"L": L, "V": 3, "drafting": d, "curves": curves,
                       "ceilings": {"optimum": {"kind": "exact L = 1 optimum", "K": [1, 2],
                                                "mean": [1.6, 1.8]}},
                       "spechub": {"optimum": {"K": [1, 2], "mean": [1.5, 1.9]},
                                   "spechub": {"K": [1, 2], "mean": [1.5, 1.85]}}
                       if d == "iid" else None})
    load("fig10_multidraft_frontier").draw(
        {"family": "logit-noise", "knob": {"sigma": 1.0}, "seeds": [0], "Ks": [1, 2],
         "panels": panels}, tmp_path)
    pts = {"token": {"family": "token", "tv": 0.0, "block_efficiency": 1.6},
           "block": {"family": "block", "tv": 0.0, "block_efficiency": 1.7},
           "strict": {"family": "strict", "tv": 0.0, "block_efficiency": 1.3},
           "a": {"family": "lenient", "tv": 0.1, "block_efficiency": 1.8},
           "b": {"family": "lenient", "tv": 0.2, "block_efficiency": 1.9},
           "c": {"family": "greedy", "tv": 0.3, "block_efficiency": 1.2}}
    load("fig7_lossy_frontier").draw({"V": 3, "L": 2, "seeds": [0], "alphas": [1.0],
                                      "points": pts}, tmp_path)
    vals = {"token": [[1.0, 1.5]], "block": [[1.1, 1.7]], "lp": [[1.2, 1.8]],
            "coupling": [[1.3, 1.9]]}
    kept.append(load("fig1_accepted_vs_L").plot(
        {"V": 3, "Ls": [1, 2], "seeds": 1, "lp_max_L": 2,
         "panels": [{"family": "dirichlet", "params": {"alpha": 1.0}, "values": vals}]}))
    kept.append(load("fig3_tau_pmf").plot(
        {"panels": [{"name": "two-token example", "exact": True, "token_pmf": ["1/2", "1/2"],
                     "block_pmf": ["1/3", "2/3"], "token_E_tau": "1/2",
                     "block_E_tau": "2/3"}]}))
    left = {"K": [1, 2], "gbv": ["1/2", "2/3"], "selection": ["1/2", "3/4"],
            "hu_optimum": ["1/2", "3/4"]}
    right = {"K": [1, 2], "seeds": [0], "gbv": [1.5, 1.6], "selection": [1.5, 1.7],
             "direct": [1.5, 1.7]}
    load("fig8_selection_optimum").draw({"two_token_L1": left, "random_V3_L2": right}, tmp_path)
    assert len(kept) == 5
    seen = set()
    for fig in kept:
        for ln in drawn_lines(fig):
            word = re.split(r"[ :,(]", ln.get_label())[0].lower()
            if word in VERIFIER_STYLE:
                one_point = len(ln.get_xdata()) == 1
                assert_drawn_as(ln, verifier_style(word), ln.get_label(),
                                check_ls=not one_point)
                seen.add(word)
        for ax in fig.axes:
            for c in ax.containers:  # fig3's bars
                word = c.get_label().split(":")[0]
                assert to_hex(c.patches[0].get_facecolor()) == to_hex(
                    verifier_style(word).color), word
                seen.add(word)
        assert_legend_lists_only_what_is_drawn(fig)
    assert {"gbv", "specinfer", "hu", "specinfer-norep", "traversal", "spechub", "token",
            "block", "strict", "lenient", "greedy"} <= seen
    # a single point draws no line, so its legend entry shows none (fig7's greedy)
    greedy = [ln for ln in drawn_lines(kept[1]) if ln.get_label() == "greedy"]
    assert line_style_of(greedy[0]) == "None"
    assert Fraction(left["gbv"][1]) == Fraction(2, 3)


def test_fig11_draws_each_relaxed_rule_in_its_style(captured, tmp_path):
    """Figure 11 (relaxed rules against the lossy frontier): every rule in its palette style,
    the frontier black, the legend only what is drawn."""
    load, kept = captured
    fams = ["additive", "multiplicative", "top-m", "trtllm-relaxed", "sglang-threshold", "cactus",
            "entropy-threshold", "typical", "greedy"]
    rules = [{"family": f, "parameter": k, "block_efficiency": 1.5 + 0.01 * j + 0.1 * k,
              "tv": 0.05 * (k + 1), "kl": None if f == "greedy" else 0.01 * (k + 1)}
             for j, f in enumerate(fams) for k in range(2)]
    panel = {"family": "dirichlet", "knob": 0.5, "rules": rules,
             "frontier_tv": [{"tv": 0.0, "block_efficiency": 1.6},
                             {"tv": 1.0, "block_efficiency": 3.0}],
             "frontier_kl": [{"kl": 0.0, "block_efficiency": 1.6},
                             {"kl": 5.0, "block_efficiency": 3.0}]}
    load("fig11_relaxed_frontier").draw({"V": 3, "L": 2, "panels": {"dirichlet": panel}},
                                        tmp_path)
    [fig] = kept
    seen = set()
    for ln in drawn_lines(fig):
        label = ln.get_label()
        if label in VERIFIER_STYLE:
            assert_drawn_as(ln, verifier_style(label), label)
            seen.add(label)
        else:
            assert label.startswith("frontier") and to_hex(ln.get_color()) == to_hex("black")
    assert seen == set(fams)
    assert_legend_lists_only_what_is_drawn(fig)


# ----------------------------------------------------------------------------- sweep plot


def write_results(path, rows):
    from spectheory.sweep.runner import COLUMNS

    with open(path / "results.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in COLUMNS})


def sweep_rows():
    base = {"family": "random", "vocab": 3, "block": 2, "knobs": "{}", "exact": "False",
            "route": "auto", "status": "ok"}
    rows = []
    for seed, shift in ((0, 0.0), (1, 0.2)):
        for K in (1, 2, 3):
            rows.append({**base, "seed": seed, "kind": "optimum", "name": "direct", "paths": K,
                         "block_efficiency": 2.5 + 0.1 * K + shift})
            rows.append({**base, "seed": seed, "kind": "verifier", "name": "gbv", "paths": K,
                         "drafting": "iid", "block_efficiency": 2.4 + 0.05 * K + shift})
        rows.append({**base, "seed": seed, "kind": "verifier", "name": "token", "paths": 1,
                     "block_efficiency": 2.3 + shift})
    rows.append(dict(rows[-1]))  # the same job listed twice: counted once
    rows.append({**base, "seed": 2, "kind": "verifier", "name": "gbv", "paths": 2,
                 "status": "error", "block_efficiency": ""})
    return rows


def test_sweep_plot_one_style_per_verifier_integer_ticks_and_a_title(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from spectheory.sweep import plot

    write_results(tmp_path, sweep_rows())
    kept = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    path = plot.plot_sweep(tmp_path)
    assert path == tmp_path / "sweep.png" and path.stat().st_size > 10_000
    fig = kept[0]
    a, b = fig.axes[:2]
    for ax in (a, b):
        gbv = [ln for ln in ax.get_lines() if ln.get_label() == "gbv"]
        assert len(gbv) == 1
        assert_drawn_as(gbv[0], verifier_style("gbv"), "gbv")  # same in both panels
        assert list(ax.get_xticks()) == [1, 2, 3]  # integer K ticks, no 1.5
    direct = [ln for ln in a.get_lines() if ln.get_label() == "direct LP"][0]
    assert_drawn_as(direct, optimum_style("direct"), "direct LP")
    token = [ln for ln in a.get_lines() if ln.get_label() == "token"][0]
    assert list(token.get_ydata()) == [pytest.approx(2.4)]  # (2.3 + 2.5) / 2, duplicate once
    title = fig._suptitle.get_text()
    assert title.startswith("Mean E[tau + 1] against K over 2 instance(s): random; V = 3; L = 2")
    assert "1 of 16 jobs failed (left out)" in title
    assert_legend_lists_only_what_is_drawn(fig)
    plt.close("all")


def test_sweep_plot_variants_of_one_verifier_keep_its_colour_and_marker():
    from spectheory.sweep.plot import series_styles

    base = {"family": "random", "vocab": 3, "block": 2, "knobs": "{}", "exact": "False",
            "status": "ok", "seed": 0, "kind": "verifier", "name": "specinfer", "paths": 2,
            "drafting": "", "block_efficiency": 2.0}
    styles = series_styles([{**base, "drafting": "iid"}, {**base, "shape": "2,1"},
                            {**base, "shape": "3,1"}])
    assert list(styles) == ["specinfer", "specinfer tree 2,1", "specinfer tree 3,1"]
    assert {pair(s) for s in styles.values()} == {pair(VERIFIER_STYLE["specinfer"])}
    assert len({s.linestyle for s in styles.values()}) == 3
