"""`spectheory figures --quick` writes every promised file, and the numbers it plots hold up."""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction

import pytest

from spectheory import figures
from spectheory.cli import main
from spectheory.errors import SpectheoryError


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures")
    rc = main(["figures", "--quick", "--out", str(out), "--no-progress"])
    assert rc == 0
    return out, json.loads((out / "figures.json").read_text())


def test_quick_mode_writes_every_promised_file(quick_run):
    out, payload = quick_run
    files = figures.expected_files(out)
    assert len(files) == 2 * len(figures.FIGURES) + 2
    for f in files:
        assert f.is_file() and f.stat().st_size > 0, f
    for name, _ in figures.FIGURES:
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"
    index = (out / "INDEX.md").read_text()
    for name, _ in figures.FIGURES:
        assert f"## {name}" in index
    assert payload["meta"]["mode"] == "quick"
    assert f"{payload['meta']['seconds']:.1f} s" in index


def test_fig1_orderings(quick_run):
    """block >= token on every instance and L; LP optimum = block; coupling bound >= block."""
    _, payload = quick_run
    f1 = payload["fig1_accepted_vs_L"]
    for panel in f1["panels"]:
        v = panel["values"]
        for i in range(f1["seeds"]):
            for j, L in enumerate(f1["Ls"]):
                tok, blk = v["token"][i][j], v["block"][i][j]
                assert tok <= blk + 1e-12 and blk <= L + 1e-12
                if v["lp"][i][j] is not None:
                    assert v["lp"][i][j] == pytest.approx(blk, abs=1e-7)
                if v["coupling"][i][j] is not None:
                    assert v["coupling"][i][j] >= blk - 1e-9
            if f1["Ls"][0] == 1:  # L = 1: block verification is token verification
                assert v["token"][i][0] == pytest.approx(v["block"][i][0], abs=1e-12)


def test_fig2_gain_non_negative(quick_run):
    _, payload = quick_run
    for panel in payload["fig2_gain_vs_divergence"]["panels"]:
        for pt in panel["points"]:
            assert pt["block_be"] >= pt["token_be"] - 1e-12
            assert 0 <= pt["tv"] <= 1


def test_fig3_paper_example_exact(quick_run):
    _, payload = quick_run
    toy = payload["fig3_tau_pmf"]["panels"][0]
    assert Fraction(toy["token_E_tau"]) == Fraction(10, 9)
    assert Fraction(toy["block_E_tau"]) == Fraction(11, 9)
    assert sum(Fraction(v) for v in toy["block_pmf"]) == 1


def test_fig6_matches_the_paper_token_efficiency(quick_run):
    _, payload = quick_run
    f6 = payload["fig6_paper_comparison"]
    matched = [r for r in f6["results"] if r["knob"] is not None]
    assert matched
    for r in matched:
        assert r["per_L"]["8"]["token_be"] == pytest.approx(figures.PAPER["token_be_L8"], abs=1e-4)
        gains = [r["per_L"][str(L)]["gain_pct"] for L in (4, 6, 8)]
        assert all(g >= -1e-9 for g in gains)


def test_fig4_multipath_below_optimum(quick_run):
    _, payload = quick_run
    f4 = payload["fig4_multipath_vs_K"]
    for row in f4["rows"]:
        for name, be in row["be"].items():
            if be is None:
                continue
            assert 1 <= be <= f4["L"] + 1 + 1e-9
            if f4["drafting"][name] == "norep":
                if row["direct_lp_norep"] is not None:
                    assert be <= row["direct_lp_norep"] + 1e-6, (name, row)
                continue
            if row["direct_lp"] is not None:
                assert be <= row["direct_lp"] + 1e-6, (name, row)
            if row["multipath_lp"] is not None:
                assert be <= row["multipath_lp"] + 1e-6, (name, row)
        if row["direct_lp"] is not None and row["multipath_lp"] is not None:
            assert row["direct_lp"] <= row["multipath_lp"] + 1e-6


def test_match_token_be_hits_target_or_says_unreachable():
    from spectheory.exact import analyze
    from spectheory.verifiers import token_verification

    k = figures.match_token_be("mixture", 3, 3, seed=0, target=3.0)
    assert k is not None and 0 < k < 1
    inst = figures.make_family("mixture", 3, 3, 0, k)
    assert float(analyze(inst, token_verification).block_efficiency) == pytest.approx(3.0, abs=1e-5)
    assert figures.match_token_be("mixture", 3, 3, seed=0, target=4.5) is None


def test_missing_lp_and_multipath_are_reported_not_fatal(monkeypatch, tmp_path):
    monkeypatch.setattr(figures, "optional", lambda module, attr: None)
    cfg = replace(figures.QUICK, fig4_Ks=(1,), fig4_seeds=1)
    bar = figures.Progress(1, False)
    f4 = figures.compute_fig4(cfg, bar)
    assert f4["verifiers"] == [] and any("not available" in n for n in f4["notes"])
    f1 = figures.compute_fig1(replace(cfg, fig1_Ls=(1, 2), fig1_seeds=1), bar)
    assert not f1["lp_available"] and not f1["coupling_available"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for fn, data in ((figures.plot_fig4, f4), (figures.plot_fig5, f4), (figures.plot_fig1, f1)):
        fig = fn(plt, data)
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        labels = [h.get_label() for ax in fig.axes for h in ax.get_lines()]
        assert any("not available" in t for t in texts + labels)
        plt.close(fig)


def test_bad_output_folder_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc = main(["figures", "--quick", "--out", str(blocker / "sub"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("spectheory: error: cannot create output folder")
    assert err.count("\n") == 1
    with pytest.raises(SpectheoryError):
        figures.run(blocker / "sub", quick=True, progress=False)


def test_threads_option_checked_and_restored(tmp_path, capsys):
    import torch

    before = torch.get_num_threads()
    assert main(["figures", "--quick", "--threads", "0", "--out", str(tmp_path)]) == 2
    assert "--threads 0 must be at least 1" in capsys.readouterr().err
    assert torch.get_num_threads() == before
