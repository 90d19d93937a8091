"""Friction found when an engine engineer used the conformance kit, each held by a test: the
public namespace, the pytest plugin's defaults and options, the engine presets' calls, refusals
instead of verdicts on input that tests nothing, the names in reports, the sharp designs' reach
and speed, and the tree mode's batch handling."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- public namespace


def test_every_check_is_exported_from_spectheory_testing():
    """Every check_* / assert_* of the kit's modules, and the names the conformance page uses,
    import from spectheory.testing itself and are the objects their modules define."""
    import spectheory.testing as kit

    modules = ["sampler", "lossless", "tree", "step", "vectors"]
    wanted = {"reference_coin_sampler", "DraftRows", "make_sampler", "tree_engine_sampler",
              "sharp_rows", "kit_design", "engine_sampler", "engine_coin_sampler"}
    for m in modules:
        mod = importlib.import_module(f"spectheory.testing.{m}")
        wanted |= {n for n in mod.__all__ if n.startswith(("check_", "assert_"))
                   and n != "check_file"}
    assert {"check_step", "check_tree_sampler", "assert_step", "assert_tree_sampler",
            "check_sampler", "check_proposal", "assert_lossless"} <= wanted
    missing = sorted(wanted - set(kit.__all__))
    assert not missing, missing
    for name in kit.__all__:
        obj = getattr(kit, name)
        home = importlib.import_module(f"spectheory.testing.{kit._EXPORTS[name]}")
        assert obj is getattr(home, name)
    assert set(kit.__all__) <= set(dir(kit))


def test_the_names_the_docs_import_from_the_kit_exist():
    """Every ``from spectheory.testing import ...`` line and every backquoted call of the
    conformance page's API list resolves on spectheory.testing."""
    import spectheory.testing as kit

    text = "".join((ROOT / "docs" / f).read_text() for f in
                   ("conformance.md", "tree-samplers.md", "whole-steps.md", "engine-recipes.md"))
    names = set()
    for line in re.findall(r"from spectheory\.testing import ([^\n]+)", text):
        names |= {n.strip(" ()") for n in line.split(",") if n.strip(" ()")}
    assert {"assert_proposal", "assert_sampler", "check_sampler"} <= names
    conf = (ROOT / "docs" / "conformance.md").read_text()
    api = conf[conf.index("## API"):]
    names |= set(re.findall(r"`([a-z_]+)\(", api)) | {"DraftRows"}
    names -= {"str"}
    missing = sorted(n for n in names if not hasattr(kit, n))
    assert not missing, missing


def test_import_spectheory_testing_stays_cheap():
    code = ("import sys, spectheory.testing as t\n"
            "heavy = [m for m in ('torch', 'scipy', 'spectheory.testing.step', "
            "'spectheory.testing.tree') if m in sys.modules]\n"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
