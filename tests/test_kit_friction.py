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
# imported before pytester's inline sessions, which restore sys.modules after each run (torch and
# the verifier registry cannot be imported twice in one process)
import torch  # noqa: F401

import spectheory.testing.checks.sampler  # noqa: F401
import spectheory.testing.checks.step  # noqa: F401
import spectheory.testing.checks.tree  # noqa: F401
import spectheory.testing.checks.tree_ports  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- public namespace


def test_every_check_is_exported_from_spectheory_testing():
    """Every check_* / assert_* of the kit's modules, and the names the conformance page uses,
    import from spectheory.testing itself and are the objects their modules define."""
    import spectheory.testing as kit

    modules = ["checks.sampler", "checks.lossless", "checks.tree", "checks.step", "checks.vectors"]
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
            "heavy = [m for m in ('torch', 'scipy', 'spectheory.testing.checks.step', "
            "'spectheory.testing.checks.tree') if m in sys.modules]\n"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ----------------------------------------------------------------------------- refusals


TREE_SAMPLERS = '''
from spectheory.testing.checks.tree_ports import SGLANG_TREE, tree_engine_sampler
from spectheory.testing.checks.tree_ports import tree_speculative_sampling_target_only

good = tree_engine_sampler(tree_speculative_sampling_target_only, SGLANG_TREE)
'''


def _sglang_tree_sampler():
    from spectheory.testing.checks.tree_ports import SGLANG_TREE, tree_engine_sampler
    from spectheory.testing.checks.tree_ports import tree_speculative_sampling_target_only as kernel

    return tree_engine_sampler(kernel, SGLANG_TREE)


@pytest.mark.parametrize("mode, samples", [("law", 6), ("law", 29), ("lossless", 12)])
def test_too_few_tree_samples_are_refused_like_check_step(mode, samples):
    """A tree check with too few samples for any degree of freedom is refused in one line
    (OptionError, as check_step refuses), stating the count a test needs, and the sampler is
    never called; at the stated first-test count the check runs a real test."""
    from spectheory.runtime.errors import OptionError
    from spectheory.testing import check_step, check_tree_sampler

    calls = []

    def sampler(*args):
        calls.append(1)
        return _sglang_tree_sampler()(*args)

    with pytest.raises(OptionError) as info:
        check_tree_sampler(sampler, "sglang-tree", (2, 1), samples=samples, mode=mode)
    msg = str(info.value)
    assert "\n" not in msg and "nothing would be tested" in msg and not calls
    first = int(re.search(r"a first test ([\d,]+)", msg).group(1).replace(",", ""))
    rep = check_tree_sampler(sampler, "sglang-tree", (2, 1), samples=first, mode=mode)
    assert rep.dof >= 1 and calls
    with pytest.raises(OptionError):  # the step check refuses the same way
        check_step(lambda request: None, samples=2)


def test_too_few_tree_samples_exit_2_on_the_command_line(tmp_path, monkeypatch, capsys):
    from cli_helpers import run

    # a module name of its own: tests/test_tree_sampler.py imports another my_trees.py in the
    # same process, and a cached module of the same name would stand in for it
    (tmp_path / "friction_trees.py").write_text(TREE_SAMPLERS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for extra in ([], ["--mode", "lossless"]):
        code, out, err = run(["check-sampler", "friction_trees:good", "--tree", "2,1", "--samples",
                              "8"] + extra, capsys)
        assert code == 2 and not out and len(err.strip().splitlines()) == 1, err
        assert "nothing would be tested" in err and "Traceback" not in err


@pytest.mark.parametrize("which, depth, value", [("target", 1, float("nan")),
                                                 ("draft", 0, float("inf")),
                                                 ("target", 2, -0.25)])
def test_a_tree_instance_with_a_bad_table_is_refused_naming_it(which, depth, value):
    from spectheory.inputs.random_instances import random_instance
    from spectheory.runtime.errors import OptionError
    from spectheory.testing import check_tree_sampler

    inst = random_instance(3, 2, 11)
    getattr(inst, which).tables[depth][-1, 1] = value
    for mode in ("law", "lossless"):
        with pytest.raises(OptionError) as info:
            check_tree_sampler(_sglang_tree_sampler(), "sglang-tree", (2, 1),
                               instances=[inst], samples=3000, mode=mode)
        msg = str(info.value)
        assert f"the {which} table at depth {depth}" in msg and "\n" not in msg


# ----------------------------------------------------------------------------- tree presets


def test_the_sglang_tree_preset_calls_by_position_or_refuses():
    """A wrapper with the kernel's parameters (or functools.wraps) gets every argument, draft_probs
    included, in the kernel's order; a ``*rest`` wrapper, which the preset cannot tell apart
    from the release without draft_probs, is refused in one line instead of silently losing it."""
    import functools

    from spectheory.runtime.errors import OptionError
    from spectheory.testing import check_tree_sampler
    from spectheory.testing.checks.tree_ports import SGLANG_TREE, tree_engine_sampler
    from spectheory.testing.checks.tree_ports import tree_speculative_sampling_target_only as kernel

    seen = []

    def positional(predicts, accept_index, accept_token_num, candidates, retrive_index,
                   retrive_next_token, retrive_next_sibling, uniform_samples, final,
                   target_probs, draft_probs, threshold_single, threshold_acc, deterministic):
        seen.append((draft_probs.shape == target_probs.shape, threshold_single, deterministic))
        return kernel(predicts, accept_index, accept_token_num, candidates, retrive_index,
                      retrive_next_token, retrive_next_sibling, uniform_samples, final,
                      target_probs, draft_probs, threshold_single, threshold_acc, deterministic)

    @functools.wraps(kernel)
    def wrapped(*rest):
        seen.append(len(rest))
        return kernel(*rest)

    for fn in (positional, wrapped):
        rep = check_tree_sampler(tree_engine_sampler(fn, SGLANG_TREE), "sglang-tree", (2, 1),
                                 samples=3000)
        assert rep.passed
    assert seen[0] == (True, 1.0, True) and 14 in seen

    def rest_only(*rest):
        return kernel(*rest)

    def too_short(predicts, accept_index, *rest, **kw):
        return kernel(predicts, accept_index, *rest, **kw)

    for fn in (rest_only, too_short):
        with pytest.raises(OptionError) as info:
            tree_engine_sampler(fn, SGLANG_TREE)
        msg = str(info.value)
        assert "\n" not in msg and fn.__name__ in msg and "functools.wraps" in msg


# ----------------------------------------------------------------------------- pytest plugin

PLUGIN_TESTS = '''
import json

import pytest

from spectheory.testing.checks.sampler import make_sampler
from spectheory.testing.checks.step import sglang_step
from spectheory.testing.checks.tree_ports import SGLANG_TREE, tree_engine_sampler
from spectheory.testing.checks.tree_ports import tree_speculative_sampling_target_only as kernel

good_tree = tree_engine_sampler(kernel, SGLANG_TREE)


def keep(name, report):
    with open(name, "w") as f:
        json.dump({"samples": report.samples, "alpha": report.alpha,
                   "budget": report.budget is not None}, f)


def test_tree_defaults(spectheory_kit):
    # check_tree_sampler's defaults: the sampler's own verifier and drafting, tree (2, 1)
    keep("tree_defaults.json", spectheory_kit.tree(good_tree))


def test_positional_wins(spectheory_kit):
    keep("sampler_pos.json", spectheory_kit.sampler(make_sampler("token"), "token", None, 3000,
                                                    0.002))
    keep("tree_pos.json", spectheory_kit.tree(good_tree, "sglang-tree", (2, 1), "topk", None,
                                              3000, 0.002))
    keep("step_pos.json", spectheory_kit.step(sglang_step, None, 3000, 0.002))


def test_too_few(spectheory_kit):
    from spectheory.runtime.errors import OptionError

    with pytest.raises(OptionError):
        spectheory_kit.sampler(make_sampler("token"), "token", samples=40)
'''


def _plugin_run(pytester, *options):
    import json as _json

    pytester.makepyfile(test_engine=PLUGIN_TESTS)
    for _ in range(3):  # (under --spectheory-budget a pause of the machine that takes most of
        # the budget leaves a check too small, as it should: tried again; a defect fails thrice)
        result = pytester.runpytest(*options, "-p", "no:cacheprovider")
        if result.parseoutcomes().get("passed") == 3:
            break
    result.assert_outcomes(passed=3)
    return {p.stem: _json.loads(p.read_text()) for p in pytester.path.glob("*.json")}


pytest_plugins = ["pytester"]


def test_plugin_methods_take_the_checks_defaults_and_calls_win(pytester):
    """kit.tree(sampler) runs with check_tree_sampler's defaults; arguments given by position
    win over --spectheory-samples and --spectheory-alpha; too few samples is a refusal."""
    got = _plugin_run(pytester, "--spectheory-samples", "4000", "--spectheory-alpha", "0.01")
    assert got["tree_defaults"] == {"samples": 4000, "alpha": 0.01, "budget": False}
    for name in ("sampler_pos", "tree_pos", "step_pos"):
        assert got[name] == {"samples": 3000, "alpha": 0.002, "budget": False}, name


def test_plugin_budget_sizes_tree_checks(pytester):
    got = _plugin_run(pytester, "--spectheory-budget", "2")
    assert got["tree_defaults"]["budget"] and got["tree_defaults"]["samples"] > 0
    for name in ("sampler_pos", "tree_pos", "step_pos"):  # explicit samples: no budget
        assert got[name] == {"samples": 3000, "alpha": 0.002, "budget": False}, name


# ----------------------------------------------------------------------------- names in reports


def kit_step(engine):
    """A test helper that wraps the engine's step in a closure (the pattern that made reports
    name the helper's closure instead of the engine)."""
    def step(request):
        return engine(request)

    return step


def kit_tree(kernel_sampler):
    def sampler(tokens, parents, q, p, generator):
        return kernel_sampler(tokens, parents, q, p, generator)

    return sampler


def my_engine_step(request):
    from spectheory.testing.checks.step import sglang_step

    return sglang_step(request)


def broken_step(request):
    return "not tokens"


def test_reports_name_the_users_function_through_the_fixture(spectheory_kit):
    """Through the plugin's fixture, a report names the user's function that a helper's closure
    or a functools.partial calls, not the closure; a failure note names it too."""
    import functools

    from spectheory.testing.checks.step import sglang_step

    rep = spectheory_kit.step(kit_step(my_engine_step), samples=3000)
    assert rep.step.startswith("test_kit_friction:my_engine_step (through")
    rep = spectheory_kit.step(functools.partial(sglang_step, reuse_coin=False), samples=3000)
    assert rep.step.startswith("spectheory.testing.checks.step:sglang_step")
    rep = spectheory_kit.tree(kit_tree(_sglang_tree_sampler()), samples=3000)
    assert "sglang-tree:tree_speculative_sampling_target_only" in rep.sampler
    assert rep.sampler in str(rep) and rep.to_json()["sampler"] == rep.sampler
    with pytest.raises(AssertionError) as info:
        spectheory_kit.step(kit_step(broken_step), samples=3000)
    assert "test_kit_friction:broken_step" in str(info.value)


# ----------------------------------------------------------------------------- help and docs


def test_check_sampler_help_states_both_default_sample_counts(capsys):
    from spectheory.cli import build_parser
    from spectheory.testing.checks.tree import DEFAULT_SAMPLES

    with pytest.raises(SystemExit):
        build_parser().parse_args(["check-sampler", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default 100000" in text and f"{DEFAULT_SAMPLES} in tree mode" in text


def test_tree_docs_say_which_examples_fail_on_purpose():
    page = (ROOT / "docs" / "tree-samplers.md").read_text()
    assert "FAILs on purpose" in page and "meant to FAIL (exit 1)" in page
