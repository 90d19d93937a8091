"""The conformance kit's one public namespace and its rooms: every public check, helper and preset
imports from ``spectheory.testing`` as the object its module defines; the old module paths that
the documentation named import as the very modules they moved to; the internal ones are gone."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import spectheory.testing as T
from spectheory import _moved

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "spectheory" / "testing"

#: The rooms, and the modules each holds (a file moved between rooms fails here first).
ROOMS = {
    "checks": {"sampler", "law_mode", "lossless_mode", "coins_mode", "proposal_mode",
               "own_sampler", "sizing", "calls", "rows", "report", "lossless", "battery",
               "strategies", "tree", "tree_ports", "step", "seeds", "hf_generate",
               "mlx_generate", "vectors"},
    "engines": {"layouts", "adapters", "engine_sampling", "ports"},
    "statistics": {"stats", "budget", "_chisq", "_args"},
    "designs": {"sharp"},
}
#: Paths of the flat kit that only the kit and its tests imported: dropped, not kept.
DROPPED = ("calls", "coins_mode", "law_mode", "lossless", "lossless_mode", "own_sampler",
           "proposal_mode", "report", "rows", "sizing")


def test_the_rooms_hold_their_modules_and_the_top_only_front_ends():
    for room, modules in ROOMS.items():
        found = {p.stem for p in (KIT / room).glob("*.py") if p.stem != "__init__"} | \
                {p.name for p in (KIT / room).iterdir() if (p / "__init__.py").exists()}
        assert found == modules, room
    top = {p.stem for p in KIT.glob("*.py")}
    assert top == {"__init__", "pytest_plugin", "sampler_cli", "step_cli", "vectors_cli"}


@pytest.mark.parametrize("module", sorted(T._ROOMS))
def test_every_public_name_of_a_room_is_in_the_namespace(module):
    """Each name of the module's ``__all__`` is the module's own object in the namespace, or a
    name two modules define differently (left to them, and said so)."""
    mod = importlib.import_module(f"spectheory.testing.{module}")
    for name in mod.__all__:
        obj = getattr(mod, name)
        if isinstance(obj, type(sys)):
            continue  # a submodule: reached through its room
        if name in T._AMBIGUOUS:
            assert module in T._AMBIGUOUS[name], name
            continue
        assert name in T.__all__, (module, name)
        if name == "default_instances" and module != "checks.sampler":
            continue
        assert getattr(T, name) is obj, (module, name)


def test_every_name_in_the_namespace_imports():
    for name in T.__all__:
        value = getattr(T, name)
        module = importlib.import_module(f"spectheory.testing.{T._EXPORTS[name]}")
        assert value is getattr(module, name), name
        assert name in module.__all__, name
    assert set(T.__all__) <= set(dir(T))


def test_ambiguous_names_are_refused_with_their_homes():
    for name, homes in T._AMBIGUOUS.items():
        objs = [getattr(importlib.import_module(f"spectheory.testing.{m}"), name) for m in homes]
        assert any(o is not objs[0] for o in objs[1:]), name  # really two different objects
        assert name not in T.__all__
        with pytest.raises(AttributeError, match=homes[0]):
            getattr(T, name)


def test_the_checks_and_presets_users_call_are_there():
    from spectheory.testing import (SGLANG_TREE, VLLM_V1, assert_lossless, check_sampler,
                                    check_step, check_tree_sampler, engine_sampler, kit_design,
                                    row_chi_square, sglang_step, vllm_sampler)
    from spectheory.testing.checks.sampler import check_sampler as direct
    assert check_sampler is direct and VLLM_V1.name == "vllm-v1"
    assert all(callable(f) for f in (assert_lossless, check_step, check_tree_sampler,
                                     engine_sampler, kit_design, row_chi_square, sglang_step,
                                     vllm_sampler))
    assert SGLANG_TREE.name == "sglang-tree"


KEPT = sorted(old for old in _moved.MOVED if old.startswith("spectheory.testing."))


@pytest.mark.parametrize("old", KEPT)
def test_kept_old_path_is_the_moved_module(old):
    module = importlib.import_module(old)
    new = _moved.MOVED[old]
    assert module is importlib.import_module(new) and module.__name__ == new
    parent, _, last = old.rpartition(".")
    assert getattr(importlib.import_module(parent), last) is module


def test_kept_old_paths_are_the_documented_ones():
    """The old paths kept are those README.md and docs/ named (the module map of the flat kit);
    each documented one resolves, and the rest are gone."""
    kept = {old.removeprefix("spectheory.testing.") for old in KEPT}
    assert kept == {"adapters", "battery", "budget", "engine_ports", "engine_ports.llamacpp",
                    "engine_ports.mistralrs", "engine_ports.tgi", "engine_ports.trtllm",
                    "engine_sampling", "hf_generate", "layouts", "mlx_generate", "sampler",
                    "seeds", "sharp", "stats", "step", "strategies", "tree", "tree_ports",
                    "vectors"}
    assert not kept & set(DROPPED)


@pytest.mark.parametrize("old", DROPPED)
def test_dropped_internal_path_is_gone(old):
    assert f"spectheory.testing.{old}" not in _moved.MOVED
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"spectheory.testing.{old}")
    with pytest.raises(AttributeError):
        getattr(T, old)


def test_an_old_package_child_is_one_module_in_a_fresh_interpreter():
    """The child of an old package name is the moved module, not a second copy loaded from the
    moved folder (the old-path finder runs before the path finder)."""
    code = ("import sys\n"
            "import spectheory.testing.engine_ports.tgi as old\n"
            "import spectheory.testing.engines.ports.tgi as new\n"
            "from spectheory.testing.sampler import check_sampler\n"
            "from spectheory.testing import check_sampler as flat\n"
            "assert old is new and check_sampler is flat\n"
            "copies = {id(m) for m in list(sys.modules.values())\n"
            "          if getattr(m, '__file__', None) == new.__file__}\n"
            "print(len(copies), old.__name__)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["1", "spectheory.testing.engines.ports.tgi"]


def test_the_pytest_plugin_entry_point_names_its_module():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'spectheory = "spectheory.testing.pytest_plugin"' in text
    importlib.import_module("spectheory.testing.pytest_plugin")
