"""The old flat module paths still import, as the very modules they moved to."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import spectheory
from spectheory import _moved, registry

ROOT = Path(__file__).resolve().parents[1]

#: The public names (``__all__``) of the modules that were split, before the split.
OLD_PUBLIC = {
    "spectheory.exact": [
        "BlockLaw", "MAX_LOSSLESS_TOL", "ROUTES", "node_output_law", "node_route_law",
        "resolve_route", "block_law", "check_tolerance", "ExactAnalysis", "LosslessReport",
        "analysis_summary", "analyze", "block_output_law", "check_lossless", "lossless_report",
        "multi_iteration_law", "output_law", "target_law", "total_variation"],
    "spectheory.multipath": [
        "DRAFTING", "analyze_gbv_fast", "analyze_multipath", "check_lossless_multipath",
        "draft_rows", "draft_weight", "gbv_skewed_draft", "multipath_block_law", "outcome_count",
        "sorted_tuples", "sample_drafts", "sample_outputs", "use_symmetry"],
    "spectheory.trees": [
        "HOME_DRAFTING", "MAX_TREE_NODES", "node_rule", "ROUTES", "TREE_DRAFTING", "TreeShape",
        "analyze_tree", "check_tree_lossless", "choose_route", "default_drafting",
        "enumerate_count", "node_route_work", "refuse_uneven", "shape_from_choices",
        "shape_from_parents", "topk_tokens", "tree_block_law", "tree_block_law_enumerate",
        "tree_block_law_nodes", "tree_shape", "tree_verifier"],
    "spectheory.tree": ["check_size", "levels", "max_sequences", "path_probabilities",
                        "sequence_tokens", "human_bytes", "DEFAULT_MAX_SEQUENCES"],
}


#: Installed package -> its folder in the repository (pyproject.toml's package-dir).
SOURCE_DIRS = {"spectheory.lp": "lp"}


def source_path(name: str) -> Path:
    """The file or folder of module ``name`` in this checkout, without its suffix."""
    for package, folder in SOURCE_DIRS.items():
        if name.startswith(package + "."):
            return ROOT / folder / name[len(package) + 1:].replace(".", "/")
    return ROOT / name.replace(".", "/")


@pytest.mark.parametrize("old, new", sorted(_moved.MOVED.items()))
def test_old_name_is_the_new_module(old, new):
    """Same module object under both names; no file is left at the old path."""
    module = importlib.import_module(old)
    assert module is importlib.import_module(new) and sys.modules[old] is module
    assert module.__name__ == new and module.__spec__.name == new
    stale = source_path(old)
    assert not stale.with_suffix(".py").exists() and not stale.is_dir(), stale
    assert source_path(new).with_suffix(".py").exists() or source_path(new).is_dir(), new
    parent, _, last = old.rpartition(".")
    assert getattr(importlib.import_module(parent), last) is module


@pytest.mark.parametrize("old", sorted(OLD_PUBLIC))
def test_split_modules_keep_their_public_names(old):
    module = importlib.import_module(old)
    for name in OLD_PUBLIC[old]:
        home = _moved.LEFT.get(old, {}).get(name, _moved.MOVED[old])
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name


def test_names_that_left_are_where_the_table_says():
    for old, names in _moved.LEFT.items():
        for name, home in names.items():
            assert name in vars(importlib.import_module(home)), (old, name, home)


def test_routes_of_the_old_paths_are_their_own():
    """Both old modules had a ``ROUTES``: each keeps its own."""
    import spectheory.exact as exact
    import spectheory.trees as trees

    assert exact.ROUTES == ("auto", "node", "per-draft", "tree", "enumerate", "analytic")
    assert trees.ROUTES == ("auto", "enumerate", "nodes")


def test_old_paths_import_in_a_fresh_interpreter():
    code = ("from spectheory.exact import analyze, check_lossless\n"
            "from spectheory.trees import analyze_tree\n"
            "from spectheory.errors import SpectheoryError\n"
            "import spectheory.engine.analysis as a\n"
            "from spectheory.report import toy_instance\n"
            "assert analyze is a.analyze\n"
            "print(analyze(toy_instance(exact=True), 'block').block_efficiency)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() != ""


def test_monkeypatching_an_old_path_reaches_the_engine(monkeypatch):
    """Patching through the old name patches the module that runs."""
    import spectheory.engine.seqtree as seqtree
    import spectheory.tree as tree

    monkeypatch.setattr(tree, "sequence_tokens", None)
    assert seqtree.sequence_tokens is None


def test_registry_finds_topk_without_listing_it():
    """``topk`` (the draft-tree rule) is found by name, as before, but not listed."""
    assert registry.get_verifier("topk").name == "topk"
    assert "topk" not in registry.registered()
    assert {"token", "block", "gbv"} <= set(registry.registered())
