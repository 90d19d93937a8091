import os
import sys
from collections import Counter

# One compute thread per test process, set before numpy or torch is first imported here. Each
# xdist worker is one process per core already; torch's default of a thread per core on top of
# that makes two-core machines oversubscribed, and its spinning threads on the suite's small
# arrays cost CPU, not time saved (6 transformers-like step checks of tests/test_step.py: 13.6 s
# with torch's default on 2 cores, 4.0 s with one thread). Subprocesses inherit it; a test of
# thread settings sets its own environment. An explicit setting in the environment wins.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# argparse asks gettext for a translation of each of its messages while a parser is built, and
# gettext searches the file system for a catalogue of the locale's language each time (none is
# installed: the messages stay English). The tests build a parser for each of thousands of
# in-process command lines; with the language "C" the search ends at once (the parser in 0.8
# instead of 1.6 ms). Only message catalogues read LANGUAGE: encodings and the C locale do not.
os.environ.setdefault("LANGUAGE", "C")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))

# Deterministic property tests in CI: the same examples on every run.
settings.register_profile("spectheory", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("spectheory")


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    """Write user code as importable modules: ``user_modules(name=text, ...)`` writes
    ``tmp_path/name.py`` for each, makes ``tmp_path`` the working directory and the first
    entry of ``sys.path`` (as a user running ``spectheory ... module:function`` there), and
    returns the first name."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(**modules):
        for name, text in modules.items():
            (tmp_path / f"{name}.py").write_text(text)
        return next(iter(modules))

    return write


class _RayCluster:
    """The one local Ray cluster of the run (2 CPUs, a small object store), started by the first
    Ray test and stopped after the last: its idle raylet and workers take about 4% of a core
    (1.2 s of CPU in 30 s, measured with psutil), which the rest of the suite gets back."""

    session = None  # the open ``ray_session`` context manager, or None

    @classmethod
    def start(cls):
        if cls.session is None:
            from spectheory.runtime.raycluster import ray_session

            session = ray_session(2)
            ray = session.__enter__()
            cls.session = (session, ray)
        return cls.session[1]

    @classmethod
    def stop(cls):
        if cls.session is not None:
            session, cls.session = cls.session[0], None
            session.__exit__(None, None, None)


@pytest.fixture
def ray_cluster():
    """The run's local Ray cluster: the executors join it instead of starting their own. The
    Ray tests run one after another (`pytest_collection_modifyitems`, `RAY_PREFIX`), and the
    cluster stops after the last of them (`pytest_runtest_teardown`)."""
    pytest.importorskip("ray")
    return _RayCluster.start()


def _uses_ray(item) -> bool:
    return item is not None and "ray_cluster" in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Stop the Ray cluster once the next test does not use it (or there is none)."""
    if _uses_ray(item) and not _uses_ray(nextitem):
        _RayCluster.stop()


def pytest_sessionfinish(session):
    _RayCluster.stop()  # a run stopped part-way through the Ray tests


#: The name every test of the ``ray_cluster`` fixture starts with: under pytest-xdist they run on
#: one worker, so the run starts one local Ray cluster (an object store, a raylet and Python
#: workers) and not one per worker. The scheduler below groups by this name because the
#: controller of an xdist run sees node ids only; xdist's own ``--dist loadgroup`` grouping by
#: marker does not take with pytest 9.2 (pytest-dev/pytest-xdist#1386).
RAY_PREFIX = "test_ray_"


def pytest_collection_finish(session):
    """Freeze the objects that exist once the tests are collected (modules, torch, transformers,
    numba, the collected items): the garbage collector's full collections, thousands of them in
    a run (the exact tests allocate millions of Fractions), no longer scan them. They live to
    the end of the run anyway; what the tests allocate is collected as before. About a tenth of
    the CPU of the exact-heavy test files (test_multipath, test_trees, test_stateful_steps:
    32.4 -> 29.1 s in one process, 5.2 -> 3.1 s in collections).

    The youngest generation is collected every 50,000 net allocations instead of 700: the
    Fractions of the exact tests hold no cycles, and each young collection also walks the
    survivors (test_multipath, test_trees, test_stateful_steps in one process: 34.0 -> 32.6 s
    of CPU, the same peak)."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


#: Test files that run in one work unit with another (the key with its value).
#:
#: - `tests/test_sharp_bonus.py` with `tests/test_sharp.py`: both build a per-process cache that
#:   costs seconds (`spectheory.testing.kit_design("token", 3000, 1e-3)`, 2.3 - 3.2 s of CPU).
#: - `WAITS`, the files whose tests mostly wait (time limits, run-time projections of slow
#:   samplers, signals sent after a start-up, memory watches): about 25 s of their 50 s are
#:   off the CPU. As separate units they often ran at the same time on both workers, and both
#:   cores idled together (about 10 core-seconds of a run, read from /proc/stat beside the
#:   tests' timeline); as one unit they wait on one worker while the other computes.
WAITS = "tests/(waits)"
SHARED_UNITS = {"tests/test_sharp_bonus.py": "tests/test_sharp.py",
                **dict.fromkeys(("tests/test_hostile_rows_cli_2026.py",
                                 "tests/test_sampler_budget.py", "tests/test_hostile_kit_2026.py",
                                 "tests/test_sampler_reports.py", "tests/test_sweep_grids.py"),
                                WAITS)}


def _module(nodeid: str) -> str:
    """The work unit of a node id: its test file (``tests/test_x.py::test_y[z]`` ->
    ``tests/test_x.py``), or the unit it shares (`SHARED_UNITS`)."""
    path = nodeid.partition("::")[0]
    return SHARED_UNITS.get(path, path)


def pytest_collection_modifyitems(config, items):
    """A test of the shared Ray cluster must be named ``test_ray_*`` (see ``RAY_PREFIX``); the
    Ray tests run first and one after another, so that one cluster serves them all (under
    pytest-xdist they are one group, on one worker). Then come the modules of `LONG_MODULES`,
    then the rest by their number of tests, most first; each module's tests keep their order."""
    for item in items:
        if _uses_ray(item) and not item.name.startswith(RAY_PREFIX):
            raise pytest.UsageError(f"{item.nodeid} uses the ray_cluster fixture: name it "
                                    f"{RAY_PREFIX}... so that it runs on the cluster's xdist "
                                    "worker (tests/conftest.py)")
    sizes = Counter(_module(item.nodeid) for item in items)
    rank = {module: i for i, module in enumerate(LONG_MODULES)}

    def order(item):
        module = _module(item.nodeid)
        return (not _uses_ray(item), rank.get(module, len(rank)), -sizes[module], module)

    items.sort(key=order)  # stable: the tests of a module keep their order


#: The work units that took 5 s or more in one run (tests/ on 2 cores), longest first: they are
#: handed out first (after the Ray tests), so that the run ends on short modules and neither
#: worker waits long for the other (a 6 s module of two tests handed out last kept one core
#: idle for its 6 s). `WAITS` comes right after the figure gallery, so that its waits overlap
#: the computing modules on the other worker. A scheduling hint only: a stale name costs
#: balance, never a result.
LONG_MODULES = (
    "tests/test_figures.py", WAITS, "tests/test_sharp.py", "tests/test_multipath.py",
    "tests/test_gpu_validation_run.py", "tests/test_sweep.py", "tests/test_claims_independent.py",
    "tests/test_mlx_generate.py", "tests/test_presets_sampling.py", "tests/test_tree_sampler.py",
    "tests/test_hf_generate.py", "tests/test_stateful_steps.py", "tests/test_trees.py",
    "tests/test_startup.py", "tests/test_lp_trust.py", "tests/test_hostile_inputs.py",
    "tests/test_bad_inputs.py", "tests/test_readme_quickstart.py", "tests/test_vectors.py",
    "tests/test_claims.py", "tests/test_report.py", "tests/test_seeds.py",
    "tests/test_packaging.py", "tests/test_bad_inputs_late.py", "tests/test_numpy_float.py",
)


def _ray_scheduler():
    from xdist.scheduler import LoadGroupScheduling

    class RayGroupScheduling(LoadGroupScheduling):
        """``--dist loadgroup`` with one work unit per test module (the ``test_ray_*`` tests
        together in one more unit), handed out in the order of the collection (see
        `pytest_collection_modifyitems`: the Ray unit, `LONG_MODULES`, then the rest by their
        number of tests, most first).

        A module runs whole on one worker: its module-scoped fixtures and caches (a figure
        gallery, the claims ledger, tiny Hugging Face models, sharp designs, exact laws) are
        built once, not once on each worker, and the controller tracks one unit per module
        instead of one per test (xdist's rescheduling counts the pending tests of every unit a
        worker ever got, after each test). Against one unit per test, three pairs of runs in
        turn on 2 cores: about 9 % less time and CPU, within the machine's drift of each single
        pair (benchmarks/results/suite_time.md)."""

        def _split_scope(self, nodeid):
            if nodeid.rpartition("::")[2].startswith(RAY_PREFIX):
                return "ray"
            return _module(nodeid)

    return RayGroupScheduling


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown without pytest-xdist
def pytest_xdist_make_scheduler(config, log):
    """The scheduler of ``--dist loadgroup`` runs (scripts/test.sh): `_ray_scheduler`'s, which
    hands out the units in the order of the collection (xdist's reordering by size is off)."""
    if config.getvalue("dist") == "loadgroup":
        config.option.loadscopereorder = False
        return _ray_scheduler()(config, log)
    return None
