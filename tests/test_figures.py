"""The figure gallery: `spectheory figures --quick` writes every promised file and nothing else,
the numbers it plots hold up, and a failing or interrupted run leaves the previous output intact."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import signal
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from spectheory.cli import figures
from spectheory.cli import main
from spectheory.runtime.errors import SpectheoryError

GALLERY = figures.gallery_folder()
STEMS = ["fig1_accepted_vs_L", "fig2_gain_vs_divergence", "fig3_tau_pmf", "fig4_multipath_vs_K",
         "fig5_multipath_gap", "fig6_paper_comparison", "fig7_lossy_frontier",
         "fig8_selection_optimum", "fig9_tree_shapes", "fig10_multidraft_frontier",
         "fig11_relaxed_frontier", "fig12_constrained_decoding"]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures")
    rc = main(["figures", "--quick", "--out", str(out), "--no-progress"])
    assert rc == 0
    return out, json.loads((out / "figures.json").read_text())


def test_gallery_scripts_have_title_docstring_and_main():
    assert list(figures.scripts(GALLERY)) == STEMS
    for stem, path in figures.scripts(GALLERY).items():
        doc = ast.get_docstring(ast.parse(path.read_text()))
        title, _, body = doc.partition("\n")
        assert title and not title.endswith(".") and len(body.split()) > 40, stem
        assert "figures.json" in body, stem  # says where the numbers behind it are
        params = list(inspect.signature(figures.load(path).main).parameters.values())
        assert [p.name for p in params] == ["out", "quick"] and params[1].default is False


def test_docstrings_quote_the_committed_full_run():
    """Each script's docstring ends with its headline, recomputed here from the committed
    figures.json, so the gallery text cannot drift from the committed numbers."""
    committed = json.loads((GALLERY / "figures.json").read_text())
    for stem, path in figures.scripts(GALLERY).items():
        assert committed[stem]["mode"] == "full", stem
        doc = " ".join(ast.get_docstring(ast.parse(path.read_text())).split())
        assert doc.endswith(figures.load(path).headline(committed[stem])), stem


def test_quick_mode_writes_every_promised_file_and_nothing_else(quick_run):
    out, payload = quick_run
    assert sorted(out.iterdir()) == sorted(figures.expected_files(out, STEMS))
    for stem in STEMS:
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / f"{stem}.pdf").read_bytes()[:5] == b"%PDF-"
        assert payload[stem]["mode"] == "quick"
        assert payload[stem]["title"] == figures.title(GALLERY / f"{stem}.py")
        assert figures.load(GALLERY / f"{stem}.py").headline(payload[stem])
    assert list(payload) == ["meta"] + STEMS and payload["meta"]["mode"] == "quick"
    assert not list(out.parent.glob(f".{out.name}.partial-*"))  # temporary folder removed


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
                assert (v["lp"][i][j] is None) == (L > f1["lp_max_L"])
                if v["lp"][i][j] is not None:
                    assert v["lp"][i][j] == pytest.approx(blk, abs=1e-7)
                assert v["coupling"][i][j] >= blk - 1e-9
            if f1["Ls"][0] == 1:  # L = 1: block verification is token verification
                assert v["token"][i][0] == pytest.approx(v["block"][i][0], abs=1e-12)


def test_fig2_gain_non_negative(quick_run):
    _, payload = quick_run
    f2 = payload["fig2_gain_vs_divergence"]
    for panel in f2["panels"]:
        for pt in panel["points"]:
            assert pt["block_be"] >= pt["token_be"] - 1e-12
            assert 0 <= pt["tv"] <= 1
    best = f2["largest_gain"]
    assert best["gain_pct"] == pytest.approx(
        max(100 * (pt["block_be"] / pt["token_be"] - 1) for p in f2["panels"] for pt in p["points"]))


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
    assert matched and f6["summary"]["matched"] == len(matched)
    for r in matched:
        assert r["per_L"]["8"]["token_be"] == pytest.approx(f6["paper"]["token_be_L8"], abs=1e-4)
        gains = [r["per_L"][str(L)]["gain_pct"] for L in (4, 6, 8)]
        assert all(g >= -1e-9 for g in gains)


def test_fig4_multipath_below_optimum_and_fig5_gaps(quick_run):
    _, payload = quick_run
    f4, f5 = payload["fig4_multipath_vs_K"], payload["fig5_multipath_gap"]
    for row in f4["rows"]:
        for name, be in row["be"].items():
            if be is None:  # K beyond what the verifier's scheme defines (hub: K <= 2)
                continue
            assert 1 <= be <= f4["L"] + 1 + 1e-9
            if f4["drafting"][name] in ("norep", "hub"):
                bound = row[f"direct_lp_{f4['drafting'][name]}"]
                if bound is not None:
                    assert be <= bound + 1e-6, (name, row)
                continue
            if row["direct_lp"] is not None:
                assert be <= row["direct_lp"] + 1e-6, (name, row)
            assert be <= row["multipath_lp"] + 1e-6, (name, row)
        if row["direct_lp"] is not None:
            assert row["direct_lp"] <= row["multipath_lp"] + 1e-6
    assert set(f5["gap_pct"]) == set(f4["verifiers"])
    for name, gaps in f5["gap_pct"].items():
        assert all(g is None or g >= -1e-4 for g in gaps), name
    # K = 1: block verification is the single-path optimum, and GBV reduces to it
    for name in ("gbv", "block-first"):
        assert f5["gap_pct"][name][0] == pytest.approx(0, abs=1e-4), name


def test_match_token_be_hits_target_or_says_unreachable():
    from spectheory.engine.analysis import analyze
    from spectheory.verifiers import token_verification

    fig6 = figures.load(GALLERY / "fig6_paper_comparison.py")
    common = sys.modules["_common"]  # the gallery's helpers, loaded with the script
    k = fig6.match_token_be("mixture", 3, 3, seed=0, target=3.0)
    assert k is not None and 0 < k < 1
    inst = common.make_family("mixture", 3, 3, 0, k)
    assert float(analyze(inst, token_verification).block_efficiency) == pytest.approx(3.0, abs=1e-5)
    assert fig6.match_token_be("mixture", 3, 3, seed=0, target=4.5) is None


def test_only_updates_its_entries(quick_run, tmp_path, capsys):
    out, payload = quick_run
    for f in out.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    before = {f.name: f.read_bytes() for f in tmp_path.iterdir()}
    assert main(["figures", "--quick", "--only", "fig3", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    after = json.loads((tmp_path / "figures.json").read_text())
    assert list(after) == list(payload)
    for stem in STEMS:
        if stem != "fig3_tau_pmf":
            assert after[stem] == payload[stem]
            assert (tmp_path / f"{stem}.png").read_bytes() == before[f"{stem}.png"]
    assert after["fig3_tau_pmf"]["panels"] == payload["fig3_tau_pmf"]["panels"]
    assert after["meta"]["command"].endswith("--only fig3 --out " + str(tmp_path))
    capsys.readouterr()
    assert main(["figures", "--only", "fig99", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown figure 'fig99'" in err and err.count("\n") == 1


# ----------------------------------------------------------------------------- atomic output


GOOD = '''"""A figure that works\n\nbody"""\nfrom pathlib import Path\n
def main(out, quick=False):
    for ext in ("png", "pdf"):
        (Path(out) / ("{stem}." + ext)).write_text("new")
    return {{"value": 2}}
'''
BAD = '''"""A figure that fails half-way\n\nbody"""\nimport os, signal\nfrom pathlib import Path\n
def main(out, quick=False):
    (Path(out) / "{stem}.png").write_text("new")
    {failure}
'''


def fake_gallery(tmp_path: Path, failure: str) -> Path:
    folder = tmp_path / "gallery"
    folder.mkdir()
    (folder / "fig1_good.py").write_text(GOOD.format(stem="fig1_good"))
    (folder / "fig2_bad.py").write_text(BAD.format(stem="fig2_bad", failure=failure))
    return folder


def previous_output(tmp_path: Path) -> tuple[Path, dict]:
    out = tmp_path / "out"
    out.mkdir()
    for name in ("fig1_good.png", "fig1_good.pdf", "fig2_bad.png", "fig2_bad.pdf"):
        (out / name).write_text("old")
    (out / "figures.json").write_text('{"meta": {"mode": "full"}}\n')
    return out, {f.name: f.read_bytes() for f in out.iterdir()}


def test_failing_run_leaves_previous_output_intact(tmp_path):
    folder = fake_gallery(tmp_path, 'raise RuntimeError("plot failed")')
    out, before = previous_output(tmp_path)
    with pytest.raises(RuntimeError, match="plot failed"):
        figures.run(out, folder=folder)
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gallery", "out"]  # no partial folder


def test_interrupted_run_exits_130_and_leaves_previous_output_intact(tmp_path, monkeypatch,
                                                                     capsys):
    folder = fake_gallery(tmp_path, "os.kill(os.getpid(), signal.SIGINT)")
    out, before = previous_output(tmp_path)
    monkeypatch.setattr(figures, "gallery_folder", lambda: folder)
    # Python's own SIGINT handler, as in an interactive run (a job started in the background of
    # a shell inherits SIGINT ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        rc = main(["figures", "--out", str(out), "--no-progress"])
    finally:
        signal.signal(signal.SIGINT, previous)
    captured = capsys.readouterr()
    assert rc == 130 and captured.out == "" and captured.err == "spectheory: interrupted\n"
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gallery", "out"]


def test_script_that_writes_nothing_is_an_error_and_writes_nothing(tmp_path):
    folder = fake_gallery(tmp_path, "return {}")
    out, before = previous_output(tmp_path)
    with pytest.raises(SpectheoryError, match="did not write fig2_bad.pdf"):
        figures.run(out, folder=folder)
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before


@pytest.mark.parametrize("blocked", ["figures.json", "fig1_good.png"])
def test_a_folder_where_an_output_file_goes_is_refused_before_drawing(tmp_path, blocked):
    """A folder at out/figures.json (or at an image's name) failed the final moves after the
    other files were moved into out, naming the temporary source."""
    folder = tmp_path / "gallery"
    folder.mkdir()
    (folder / "fig1_good.py").write_text(GOOD.format(stem="fig1_good"))
    out = tmp_path / "out"
    (out / blocked).mkdir(parents=True)
    with pytest.raises(SpectheoryError, match=f"{out / blocked} is a folder; the run writes a "
                                              "file there"):
        figures.run(out, folder=folder)
    assert [p.name for p in out.iterdir()] == [blocked]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gallery", "out"]
    calls = []
    monkey = figures._refuse_blocked
    try:  # a folder that appears while the figures are drawn: nothing is moved
        figures._refuse_blocked = lambda paths: calls.append(1) or (
            monkey(paths) if len(calls) > 1 else None)
        with pytest.raises(SpectheoryError, match="is a folder"):
            figures.run(out, folder=folder)
    finally:
        figures._refuse_blocked = monkey
    assert [p.name for p in out.iterdir()] == [blocked] and len(calls) == 2


def test_failing_run_into_a_new_folder_creates_nothing(tmp_path):
    folder = fake_gallery(tmp_path, 'raise RuntimeError("plot failed")')
    with pytest.raises(RuntimeError, match="plot failed"):
        figures.run(tmp_path / "new" / "deeper" / "out", folder=folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gallery"]


def test_complete_run_replaces_the_output(tmp_path):
    folder = tmp_path / "gallery"
    folder.mkdir()
    (folder / "fig1_good.py").write_text(GOOD.format(stem="fig1_good"))
    out, _ = previous_output(tmp_path)
    payload = figures.run(out, folder=folder)
    assert (out / "fig1_good.png").read_text() == "new"
    assert payload["fig1_good"]["value"] == 2 and payload["fig1_good"]["title"] == "A figure that works"
    assert json.loads((out / "figures.json").read_text()) == payload


# ----------------------------------------------------------------------------- errors


def test_no_gallery_folder_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(figures, "__file__", str(tmp_path / "site-packages" / "spectheory" /
                                                 "figures.py"))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    rc = main(["figures", "--quick", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("spectheory: error: the figure scripts")
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()


def test_bad_output_folder_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc = main(["figures", "--quick", "--out", str(blocker / "sub"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("spectheory: error: cannot create output folder")
    assert err.count("\n") == 1
    with pytest.raises(SpectheoryError):
        figures.run(blocker, quick=True)


def test_threads_option_checked_and_restored(tmp_path, capsys):
    import torch

    before = torch.get_num_threads()
    assert main(["figures", "--quick", "--threads", "0", "--out", str(tmp_path)]) == 2
    assert "--threads 0 must be at least 1" in capsys.readouterr().err
    assert torch.get_num_threads() == before


def test_a_script_runs_on_its_own(tmp_path):
    """`python figures/fig3_tau_pmf.py --quick --out DIR`: its two files and its numbers."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(GALLERY.parent), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, str(GALLERY / "fig3_tau_pmf.py"), "--quick", "--out",
                          str(tmp_path)], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["panels"][0]["block_E_tau"] == "11/9"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig3_tau_pmf.pdf", "fig3_tau_pmf.png"]


def test_fig9_tree_verifiers_below_their_lp_optima(quick_run):
    """Every tree verifier is at most the direct LP optimum of its drafting scheme; the top-k
    rule is the top-k optimum; chains of SpecInfer and of K = 1 paths coincide."""
    _, payload = quick_run
    rows = payload["fig9_tree_shapes"]["rows"]
    for r in rows:
        assert r["be"]["topk (topk)"] <= r["lp_topk"] + 1e-9
        if r["lp_iid"] is not None:
            assert r["be"]["specinfer (iid)"] <= r["lp_iid"] + 1e-9
            if r["paths"] == r["iid_paths_K"]:  # the tree is (K, 1, ..., 1): K i.i.d. paths
                assert r["be"]["K i.i.d. paths, GBV"] <= r["lp_iid"] + 1e-9
        if r["paths"] == 1:
            assert r["be"]["specinfer (iid)"] == r["be"]["K i.i.d. paths, specinfer"]


def test_fig10_verifiers_below_their_ceilings(quick_run):
    """The frontier figure: no verifier above the optimum of its drafting scheme (or the
    relaxation where it is used), per seed; the exact transport rule on the L = 1 optimum."""
    _, payload = quick_run
    for p in payload["fig10_multidraft_frontier"]["panels"]:
        bounds = [p["ceilings"]["optimum"]] + ([p["ceilings"]["relaxation"]]
                                               if "relaxation" in p["ceilings"] else [])
        for name, c in p["curves"].items():
            for K, vals in zip(c["K"], c["per_seed"]):
                for b in bounds:
                    if K in b["K"]:
                        top = b["per_seed"][b["K"].index(K)]
                        assert all(v <= t + 1e-7 for v, t in zip(vals, top)), (p["L"], name, K)
        if p["L"] == 1 and p["drafting"] == "iid":
            hu, opt = p["curves"]["hu"], p["ceilings"]["optimum"]
            for K, m in zip(hu["K"], hu["mean"]):
                assert m == pytest.approx(opt["mean"][opt["K"].index(K)], abs=1e-9)


# ----------------------------------------------------------------------------- small friction


def test_default_output_is_out_figures_never_the_committed_folder(tmp_path, monkeypatch, capsys):
    """Without ``--out`` the gallery goes to ``out/figures`` of the current folder, even when run
    from the checkout whose ``figures/`` holds the committed images."""
    assert figures.default_out(GALLERY) == Path("out") / "figures"
    monkeypatch.chdir(GALLERY.parent)
    seen = []
    monkeypatch.setattr(figures, "run", lambda out, **kw: seen.append(Path(out)) or
                        {"meta": {"mode": "quick", "seconds": 0.0}})
    assert main(["figures", "--quick", "--only", "fig3", "--no-progress"]) == 0
    assert seen == [Path("out") / "figures"]
    assert "wrote 3 files to out/figures" in capsys.readouterr().out


def test_tree_help_is_plain_text(capsys):
    with pytest.raises(SystemExit):
        main(["tree", "--help"])
    text = capsys.readouterr().out
    assert "The spectheory tree command: exact analysis" in text
    assert "``" not in text and ":func:" not in text


def test_vectors_export_and_check_show_progress_on_a_terminal(tmp_path, monkeypatch, capsys):
    from spectheory.inputs.random_instances import random_instance
    from spectheory.testing.checks.vectors import check_vectors, export_vectors

    inst = random_instance(2, 1, seed=0, denominator=4)
    names = export_vectors(tmp_path / "v", ["block", "token"], [inst], paths=1, decisions=0,
                           progress=True)
    err = capsys.readouterr().err
    assert len(names) == 2 and "vectors export" in err and "/2" in err
    assert check_vectors(tmp_path / "v", progress=True) == []
    err = capsys.readouterr().err
    assert "vectors check" in err and "/2" in err
    # the command line: a bar on a terminal, none with --no-progress or into a log
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert main(["vectors", "check", str(tmp_path / "v")]) == 0
    assert "vectors check" in capsys.readouterr().err
    assert main(["vectors", "check", str(tmp_path / "v"), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert main(["vectors", "check", str(tmp_path / "v")]) == 0
    assert capsys.readouterr().err == ""


def test_a_script_refuses_an_output_folder_it_cannot_make(tmp_path):
    """A file or /proc/x as a script's --out was a traceback (exit 1); an empty --out wrote the
    figure into the current folder. Each is one line, exit 2, nothing written."""
    import subprocess
    import sys

    afile = tmp_path / "afile"
    afile.write_text("")
    script = GALLERY / "fig3_tau_pmf.py"
    for out, words in ((str(afile), f"cannot create output folder '{afile}': not a folder"),
                       ("/proc/x", "cannot create output folder '/proc/x'"),
                       ("", "--out '' is empty")):
        r = subprocess.run([sys.executable, str(script), "--out", out, "--quick"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1 and words in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def _pdf_fonts(path) -> set[str]:
    """The font subtypes and embedded font-file kinds a PDF names (matplotlib writes its font
    dictionaries outside compressed streams)."""
    import re

    data = Path(path).read_bytes()
    return {m.decode() for m in re.findall(rb"/Subtype\s*/(Type3|CIDFontType2|TrueType)|"
                                           rb"/(FontFile2)", data) for m in m if m}


def test_full_run_pdfs_embed_truetype_and_quick_drafts_type3(quick_run, tmp_path):
    """A full run's PDF embeds TrueType fonts (Type 42: searchable, accepted by journals); a
    quick run's PDF is a draft with Type 3 fonts (no TrueType subsetting: faster). The committed
    gallery is a full run."""
    figures.load(GALLERY / "fig3_tau_pmf.py")  # imports the gallery's helper module
    common = sys.modules["_common"]
    plt = common.pyplot()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 2], label="E[tau+1]")
    ax.legend()
    full = tmp_path / "full"
    full.mkdir()
    common.save(fig, full, "f")
    assert _pdf_fonts(full / "f.pdf") >= {"CIDFontType2", "FontFile2"}
    assert "Type3" not in _pdf_fonts(full / "f.pdf")
    for stem in STEMS:
        kinds = _pdf_fonts(GALLERY / f"{stem}.pdf")
        assert "FontFile2" in kinds and "Type3" not in kinds, stem
        kinds = _pdf_fonts(quick_run[0] / f"{stem}.pdf")
        assert "Type3" in kinds and "FontFile2" not in kinds, stem
