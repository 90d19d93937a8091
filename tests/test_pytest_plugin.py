"""The pytest plugin (entry point ``pytest11``): an engine's suite checks its sampler in one test.

Each test writes a small test file that uses the fixture ``spectheory_kit`` and runs pytest on it
in a fresh process (``pytester.runpytest``), so the plugin is loaded from the installed
entry point exactly as in an engine's own suite: a correct sampler passes, a planted bug fails with
the kit's report in the failure text, the options size the checks, and bad option values are
refused by pytest's usage error.
"""

import json

import pytest
# imported here, before the inner sessions: pytester restores sys.modules after each inline run,
# and torch cannot be imported twice in one process
import torch  # noqa: F401

import spectheory.testing.checks.sampler  # noqa: F401

pytest_plugins = ["pytester"]

SAMPLERS = '''
import torch

from spectheory.testing.checks.sampler import make_sampler

correct = make_sampler("token")


def off_by_one(drafts, q, p, generator):
    """Token verification reading p(.|X^i) for the acceptance of X_i (the off-by-one target row
    class of TensorRT-LLM #15098): lossy on prefix-dependent rows."""
    return correct(drafts, q, torch.cat([p[:, 1:], p[:, -1:]], dim=1), generator)
'''


def _write(pytester, body: str):
    pytester.makepyfile(samplers=SAMPLERS)
    pytester.makepyfile(test_engine=body)


def test_the_entry_point_names_the_plugin_module():
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="pytest11") if ep.name == "spectheory"]
    assert [ep.value for ep in eps] == ["spectheory.testing.pytest_plugin"]


def test_a_correct_sampler_passes_and_a_planted_bug_fails(pytester):
    _write(pytester, '''
from samplers import correct, off_by_one


def test_correct(spectheory_kit):
    report = spectheory_kit.sampler(correct, "token")
    assert report.passed and report.samples == 5_000


def test_planted_bug(spectheory_kit):
    spectheory_kit.sampler(off_by_one, "token")
''')
    result = pytester.runpytest("--spectheory-samples", "5000", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*spectheory: sampler checks sized by 5,000 samples a check*"])
    # the failure text is the kit's report, naming the mode, the verdict and the worst cell
    result.stdout.fnmatch_lines(["*check_sampler (law mode, verifier token): FAIL*"])


def test_a_refused_check_is_the_kits_error_never_a_verdict(pytester):
    """--spectheory-samples 40: the check is refused with the kit's error (the test fails with
    it, as docs/conformance.md says), never with a FAIL report on the sampler."""
    _write(pytester, '''
from samplers import correct


def test_correct(spectheory_kit):
    spectheory_kit.sampler(correct, "token")
''')
    result = pytester.runpytest("--spectheory-samples", "40", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TooFewSamplesError: samples = 40*"])
    assert "check_sampler (law mode" not in result.stdout.str()  # no report, no verdict


def test_the_report_is_recorded_in_junit_xml(pytester):
    _write(pytester, '''
from samplers import correct


def test_correct(spectheory_kit):
    spectheory_kit.sampler(correct, "token", samples=3_000)
''')
    result = pytester.runpytest("--junitxml=out.xml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    xml = (pytester.path / "out.xml").read_text()
    assert 'name="spectheory"' in xml
    # the explicit samples= of the call wins over the fixture's default
    assert "&quot;samples&quot;: 3000" in xml and "&quot;passed&quot;: true" in xml


def test_budget_sizes_the_check(pytester):
    _write(pytester, '''
import json

from samplers import correct


def test_budgeted(spectheory_kit):
    report = spectheory_kit.sampler(correct, "token")
    assert report.budget is not None
    with open("plan.json", "w") as f:
        json.dump({"budget_s": report.budget.budget_s, "samples": report.samples}, f)
''')
    for _ in range(3):  # (a pause of the machine that takes most of the budget leaves the
        # check too small, as it should: tried again; a defect fails three times)
        result = pytester.runpytest("--spectheory-budget", "2", "-p", "no:cacheprovider")
        if result.parseoutcomes().get("passed") == 1:
            break
    result.assert_outcomes(passed=1)
    plan = json.loads((pytester.path / "plan.json").read_text())
    assert plan["budget_s"] == 2.0 and plan["samples"] > 0


@pytest.mark.parametrize("args, message", [
    (["--spectheory-budget", "-1"], "must be a number of seconds in (0, 604800]"),
    (["--spectheory-budget", "nan"], "must be a number of seconds in (0, 604800]"),
    (["--spectheory-budget", "1e20"], "must be a number of seconds in (0, 604800]"),
    (["--spectheory-budget", "\u0661"], "is not a number in ASCII digits"),
    (["--spectheory-alpha", "1.5"], "must lie in (0, 1)"),
    (["--spectheory-alpha", "\u0660.\u0661"], "is not a number in ASCII digits"),
    (["--spectheory-seed", "\u0661"], "is not an integer in ASCII digits"),
    (["--spectheory-seed", "+-3"], "is not an integer in ASCII digits"),
    (["--spectheory-samples", "0"], "--spectheory-samples"),
    (["--spectheory-samples", "1e15"], "would take at least"),  # check-sampler's day limit
    (["--spectheory-budget", "5", "--spectheory-samples", "100"], "give one"),
    # argparse kept the last of two silently; spectheory's own command line refuses a second
    (["--spectheory-samples", "100", "--spectheory-samples=200"],
     "--spectheory-samples given twice"),
    (["--spectheory-seed", "1", "--spectheory-seed", "1"], "--spectheory-seed given twice"),
])
def test_bad_option_values_are_usage_errors(pytester, args, message):
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest(*args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert message in err and "Traceback" not in err


def test_an_option_given_in_pytest_addopts_and_on_the_line_is_refused(pytester, monkeypatch):
    """PYTEST_ADDOPTS='--spectheory-samples 2000' with --spectheory-samples 3000 on the line ran
    with 3000 (the second value won, unsaid), where two on the line are refused."""
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    monkeypatch.setenv("PYTEST_ADDOPTS", "--spectheory-samples 2000")
    result = pytester.runpytest("--spectheory-samples", "3000", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--spectheory-samples given twice" in result.stderr.str()
    assert pytester.runpytest("-p", "no:cacheprovider").ret == 0  # once, from the variable


def test_this_suite_uses_the_fixture(spectheory_kit):
    """The plugin in this suite's own run: the kit's block sampler through the fixture (law mode,
    fixed seed), and the lossless battery of block verification."""
    from spectheory.testing.checks.sampler import make_sampler

    report = spectheory_kit.sampler(make_sampler("block"), "block", samples=4_000)
    assert report.passed and report.mode == "law" and report.samples == 4_000
    assert all(r.lossless for r in spectheory_kit.lossless("block"))
    with pytest.raises(AssertionError, match="FAIL"):
        spectheory_kit.sampler(make_sampler("token"), "block", samples=20_000)


def test_a_whole_step_through_the_fixture(spectheory_kit):
    """check_step through the fixture: a correct SGLang-like step passes, the replica of
    SGLang #7207 (the final token drawn with the last acceptance coin) fails on its instance."""
    from spectheory.testing.mutants import steps
    from spectheory.testing.checks.step import sglang_step

    assert spectheory_kit.step(sglang_step, samples=4_000).passed
    with pytest.raises(AssertionError, match="FAIL"):
        spectheory_kit.step(steps.reused_coin_step, instances=[steps.reused_coin_instance()],
                            samples=4_000)


def test_a_tree_sampler_through_the_fixture(spectheory_kit):
    """check_tree_sampler through the fixture: the CPU port of SGLang's tree kernel passes on a
    top-k tree; with the siblings' running sum not accumulated (a planted bug) it fails."""
    from spectheory.testing.checks.tree_ports import SGLANG_TREE, sglang_tree_bug, tree_engine_sampler
    from spectheory.testing.checks.tree_ports import tree_speculative_sampling_target_only as kernel

    tree = [[0], [1], [0, 0], [0, 1], [1, 0]]
    assert spectheory_kit.tree(tree_engine_sampler(kernel, SGLANG_TREE), "sglang-tree", tree,
                               "topk", samples=3_000).passed
    with pytest.raises(AssertionError, match="FAIL"):
        spectheory_kit.tree(tree_engine_sampler(sglang_tree_bug("running-sum"), SGLANG_TREE),
                            "sglang-tree", tree, "topk", samples=3_000)
