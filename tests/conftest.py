import os
import sys

import pytest
from hypothesis import settings

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


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster (2 CPUs, a small object store) for every Ray test of the run: the
    executors join a running cluster instead of starting their own."""
    pytest.importorskip("ray")
    from spectheory.runtime.raycluster import ray_session

    with ray_session(2) as ray:
        yield ray
