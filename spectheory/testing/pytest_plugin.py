"""The pytest plugin: an engine's own test suite checks its sampler in one test.

Installed with spectheory (entry point ``pytest11``: no ``conftest.py`` line is needed), it adds
to every pytest run

* the fixture ``spectheory_kit``, whose methods run the kit's checks and fail the test with the
  report's text (the report is returned when the check passes, and recorded in the test's
  ``user_properties`` as JSON, so ``--junitxml`` keeps the p-value, the samples and the detectable bias);
* the options ``--spectheory-budget SECONDS`` (size every sampler check of the run by time:
  ``samples="auto"`` with ``budget_s``, pilots first, the detectable bias stated before the run),
  ``--spectheory-samples N`` (a fixed sample count instead), ``--spectheory-alpha A`` (the
  family-wise false-alarm rate of each check) and ``--spectheory-seed S``.

```python
# tests/test_rejection_sampler.py of an engine
from my_engine.sampler import rejection_sample          # the engine's own function
from spectheory.testing import VLLM_V1, engine_sampler


def test_rejection_sampler_is_token_verification(spectheory_kit):
    spectheory_kit.sampler(engine_sampler(rejection_sample, VLLM_V1), "token")
```

```bash
pytest tests/test_rejection_sampler.py --spectheory-budget 60    # about a minute for the check
```

Without an option each check runs with the fixture's defaults (``samples`` = 20,000, alpha =
1e-3, seed 0): a fixed seed gives a fixed verdict, so the test is deterministic. An explicit
``samples`` or ``budget_s`` in a call wins over the options. ``--spectheory-budget`` sizes the
sampler and tree checks by time; the proposal and whole-step checks take no budget and keep
their sample count. A check the kit refuses (too few samples for any degree of freedom, a
budget too small for its pilots, user code that raised) raises the kit's one-line error
(``OptionError``, ``TooFewSamplesError``, ...), which a test may expect with ``pytest.raises``
and pytest otherwise reports as the test's failure: the error names the refusal, never a
verdict on the code under test. The plugin is loaded by
its entry point: naming it again (``-p spectheory.testing.pytest_plugin`` or a
``pytest_plugins`` line) makes pytest refuse the second registration. The plugin imports nothing heavy
until a check runs, so it costs nothing in runs that do not use it.
"""

from __future__ import annotations

import json

#: Samples of a sampler check when neither the call nor the command line says.
DEFAULT_SAMPLES = 20_000
#: Family-wise false-alarm rate of a check when the command line does not say.
DEFAULT_ALPHA = 1e-3


def _positive_float(text: str) -> float:
    import argparse

    from ..runtime.errors import SpectheoryError
    from ..runtime.limits import parse_float
    from .statistics.budget import check_budget

    try:  # ASCII digits (float() also reads other scripts' digits), at most check_budget's week
        return check_budget(parse_float(text, "--spectheory-budget"), "--spectheory-budget")
    except SpectheoryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text: str) -> int:
    import argparse

    from ..runtime.errors import SpectheoryError
    from ..runtime.limits import parse_count

    from .checks.sizing import MAX_SECONDS, _refuse_time

    try:  # the limit of check-sampler's --samples (a day at the check's least cost a sample)
        samples = parse_count(text, "--spectheory-samples")
        _refuse_time(samples, MAX_SECONDS, f"--spectheory-samples {samples:,}",
                     "use fewer samples, or --spectheory-budget SECONDS to size the checks")
        return samples
    except SpectheoryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _alpha(text: str) -> float:
    import argparse

    from ..runtime.errors import SpectheoryError
    from ..runtime.limits import parse_float

    try:
        value = parse_float(text, "--spectheory-alpha")
    except SpectheoryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must lie in (0, 1)")
    return value


def _seed(text: str) -> int:
    import argparse

    from ..runtime.limits import ascii_int

    value = ascii_int(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer in ASCII digits")
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"{text!r} must lie in 0 .. 2^63 - 1")
    return value


def pytest_addoption(parser):
    group = parser.getgroup("spectheory", "spectheory conformance checks (fixture spectheory_kit)")
    group.addoption("--spectheory-budget", type=_positive_float, default=None, metavar="SECONDS",
                    help="size every sampler check of the run to about SECONDS (pilot checks "
                         "first; the detectable bias is stated before the run)")
    group.addoption("--spectheory-samples", type=_positive_int, default=None, metavar="N",
                    help=f"samples of every sampler check (default {DEFAULT_SAMPLES:,}; not with "
                         f"--spectheory-budget)")
    group.addoption("--spectheory-alpha", type=_alpha, default=None, metavar="A",
                    help=f"family-wise false-alarm rate of each check (default {DEFAULT_ALPHA:g})")
    group.addoption("--spectheory-seed", type=_seed, default=None, metavar="S",
                    help="seed of every check (default 0: a fixed verdict)")


#: The plugin's options (each taken once on a command line).
OPTIONS = ("--spectheory-budget", "--spectheory-samples", "--spectheory-alpha",
           "--spectheory-seed")


def pytest_configure(config):
    import pytest

    import os
    import shlex

    args = [str(a) for a in getattr(config.invocation_params, "args", ())]
    try:  # the options pytest adds before the command line's: a second value there was taken
        added = [str(a) for a in config.getini("addopts")]
        added += shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    except (ValueError, TypeError):  # pytest refuses what it cannot split itself
        added = []
    args = added + args
    for opt in OPTIONS:  # argparse keeps the last of two silently; the CLI refuses a second
        if sum(a == opt or a.startswith(opt + "=") for a in args) > 1:
            raise pytest.UsageError(f"{opt} given twice; give it once")
    if config.getoption("--spectheory-budget", None) is not None and \
            config.getoption("--spectheory-samples", None) is not None:
        raise pytest.UsageError("--spectheory-budget and --spectheory-samples both size the "
                                "checks: give one")


def pytest_report_header(config):
    budget = config.getoption("--spectheory-budget", None)
    samples = config.getoption("--spectheory-samples", None)
    if budget is None and samples is None:
        return None
    size = f"budget {budget:g} s a check" if budget is not None else f"{samples:,} samples a check"
    return f"spectheory: sampler checks sized by {size}"


class Kit:
    """The fixture ``spectheory_kit``: the kit's checks as assertions, sized by the command line.

    Every method raises ``AssertionError`` with the report's text when the check fails, returns
    the report when it passes, and records the report's JSON in the test's ``user_properties``
    under ``"spectheory"``.
    """

    def __init__(self, budget_s=None, samples=None, alpha=None, seed=None, record=None):
        self.budget_s = budget_s
        self.samples = samples
        self.alpha = DEFAULT_ALPHA if alpha is None else alpha
        self.seed = 0 if seed is None else seed
        self._record = record
        self.reports = []

    def _call(self, check, what: str, args: tuple, kwargs: dict, default_samples=None):
        """``check(*args, **kwargs)`` with the command line's options filling only what the call
        leaves out: the arguments are bound to ``check``'s own signature first (so an argument
        given by position counts as given, and every default is the function's own), then
        ``alpha``, ``seed`` and the size (``--spectheory-budget`` where the check takes
        ``budget_s``, else ``--spectheory-samples``, else ``default_samples`` or the check's
        default) are set where the call gave none."""
        import inspect

        sig = inspect.signature(check)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            from ..runtime.errors import OptionError

            raise OptionError(f"spectheory_kit.{what}: {exc}") from None
        given = bound.arguments
        params = sig.parameters
        if "alpha" in params and "alpha" not in given:
            given["alpha"] = self.alpha
        if "seed" in params and "seed" not in given:
            given["seed"] = self.seed
        if "samples" in params:
            budgeted = "budget_s" in params
            if given.get("samples") == "auto" and budgeted and "budget_s" not in given and \
                    self.budget_s is not None:
                given["budget_s"] = self.budget_s
            elif "samples" not in given and "budget_s" not in given:
                if self.budget_s is not None and budgeted:
                    given.update(samples="auto", budget_s=self.budget_s)
                elif self.samples is not None:
                    given["samples"] = self.samples
                elif default_samples is not None:
                    given["samples"] = default_samples
        return self._keep(check(*bound.args, **bound.kwargs), what)

    def _keep(self, report, what: str):
        self.reports.append(report)
        if self._record is not None:
            to_json = getattr(report, "to_json", None)
            self._record.append(("spectheory", json.dumps(
                {"check": what, **(to_json() if to_json else {})})))
        if getattr(report, "needs_samples", 0):  # nothing was tested: bad input, not a verdict
            from ..runtime.errors import OptionError

            raise OptionError(next((n for n in report.notes if n.startswith("no degree")),
                                   "too few samples for a test"))
        if not report.passed:
            raise AssertionError(str(report))
        return report

    def sampler(self, sampler, *args, **kwargs):
        """[`check_sampler`][spectheory.testing.checks.sampler.check_sampler] (every argument, mode
        and default of it), sized by the command line unless ``samples`` or ``budget_s`` is
        given."""
        from .checks.sampler import check_sampler

        return self._call(check_sampler, "sampler", (sampler,) + args, kwargs, DEFAULT_SAMPLES)

    def proposal(self, draft_sampler, *args, **kwargs):
        """[`check_proposal`][spectheory.testing.checks.sampler.check_proposal]: does the draft
        sampler sample from the q it reports? (``samples`` from the command line; it takes no
        budget.)"""
        from .checks.sampler import check_proposal

        return self._call(check_proposal, "proposal", (draft_sampler,) + args, kwargs,
                          DEFAULT_SAMPLES)

    def tree(self, sampler, *args, **kwargs):
        """[`check_tree_sampler`][spectheory.testing.checks.tree.check_tree_sampler] with its
        defaults (``verifier``, ``tree``, ``drafting``, ...): a tree sampler against the verifier's
        exact conditional law, sized by the command line (``--spectheory-budget`` too) unless
        ``samples`` or ``budget_s`` is given."""
        from .checks.tree import check_tree_sampler

        return self._call(check_tree_sampler, "tree", (sampler,) + args, kwargs)

    def step(self, step, *args, **kwargs):
        """[`check_step`][spectheory.testing.checks.step.check_step]: a whole draft-and-verify step
        against the (processed) target law, with its defaults. ``samples`` from the command line
        (the check takes no budget: ``--spectheory-budget`` leaves its default count)."""
        from .checks.step import check_step

        return self._call(check_step, "step", (step,) + args, kwargs)

    def lossless(self, verifier, instances=None, **kwargs):
        """[`assert_lossless`][spectheory.testing.checks.lossless.assert_lossless]: the exact law of
        a verifier on the battery (no sampling; the options do not apply). Returns the reports."""
        import inspect

        from ..runtime.errors import OptionError
        from .checks.lossless import assert_lossless

        try:
            inspect.signature(assert_lossless).bind(verifier, instances, **kwargs)
        except TypeError as exc:
            raise OptionError(f"spectheory_kit.lossless: {exc}") from None
        reports = assert_lossless(verifier, instances, **kwargs)
        self.reports.extend(reports)
        if self._record is not None:
            self._record.append(("spectheory", json.dumps(
                {"check": "lossless", "instances": len(reports), "lossless": True})))
        return reports


def _fixture():
    import pytest

    @pytest.fixture
    def spectheory_kit(request):
        """spectheory's conformance checks as assertions
        ([`Kit`][spectheory.testing.pytest_plugin.Kit]), sized by ``--spectheory-budget`` /
        ``--spectheory-samples``."""
        opt = request.config.getoption
        return Kit(budget_s=opt("--spectheory-budget", None),
                   samples=opt("--spectheory-samples", None),
                   alpha=opt("--spectheory-alpha", None), seed=opt("--spectheory-seed", None),
                   record=request.node.user_properties)

    return spectheory_kit


spectheory_kit = _fixture()
