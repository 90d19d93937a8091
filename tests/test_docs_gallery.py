"""The documentation's gallery hook: figures from scripts' docstrings, from committed images with
an INDEX.md, or from images alone, in figure order; never runs a script."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")

HOOK = Path(__file__).resolve().parent.parent / "docs" / "hooks" / "gallery.py"


@pytest.fixture(scope="module")
def gallery():
    spec = importlib.util.spec_from_file_location("gallery_hook", HOOK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_scripts_give_title_description_and_source(gallery, tmp_path):
    (tmp_path / "fig10_late.py").write_text('"""Late figure.\n\nShows *ten*."""\n')
    (tmp_path / "fig2_gain.py").write_text(
        '"""Gain of block over token.\n\nE[tau+1] ratio, L = 2..8.\n"""\n'
        'raise SystemExit("a script must never be run by the docs build")\n')
    (tmp_path / "fig2_gain.png").write_bytes(b"\x89PNG")
    (tmp_path / "notes.py").write_text('"""not a figure"""')
    figs = gallery.collect(tmp_path)
    assert [f.stem for f in figs] == ["fig2_gain", "fig10_late"]  # numeric, not lexical order
    two, ten = figs
    assert (two.title, two.description) == ("Gain of block over token", "E[tau+1] ratio, L = 2..8.")
    assert two.image.name == "fig2_gain.png" and ten.image is None
    page = gallery.render(figs)
    assert page.index("## 2. Gain of block over token") < page.index("## 10. Late figure")
    assert "![Gain of block over token](gallery/fig2_gain.png)" in page
    assert "No image yet: `figures/fig10_late.png`" in page
    assert '??? example "Source: figures/fig2_gain.py"' in page
    assert '    raise SystemExit("a script must never be run by the docs build")' in page


def test_images_without_scripts_use_index_or_file_name(gallery, tmp_path):
    (tmp_path / "fig1_accepted_vs_L.png").write_bytes(b"\x89PNG")
    (tmp_path / "fig3_tau_pmf.png").write_bytes(b"\x89PNG")
    (tmp_path / "INDEX.md").write_text(
        "# Theory figures\n\nPreamble.\n\n## fig1_accepted_vs_L: accepted tokens vs L\n\n"
        "E[tau] against L.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Other section\n\nignored\n")
    figs = gallery.collect(tmp_path)
    assert [(f.number, f.title) for f in figs] == [(1, "accepted tokens vs L"), (3, "tau pmf")]
    assert figs[0].description == "E[tau] against L.\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    assert figs[1].description == "" and figs[1].script is None
    assert "Source:" not in gallery.render(figs)


def test_no_figures_folder(gallery, tmp_path):
    assert gallery.collect(tmp_path / "missing") == []
    assert "No figures" in gallery.render([])
