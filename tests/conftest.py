import os
import sys

import pytest
from hypothesis import settings

sys.path.insert(0, os.path.dirname(__file__))

# Deterministic property tests in CI: the same examples on every run.
settings.register_profile("spectheory", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("spectheory")


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster (2 CPUs, a small object store) for every Ray test of the run: the
    executors join a running cluster instead of starting their own."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, object_store_memory=80 * 1024 ** 2, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    yield ray
    if started:
        ray.shutdown()
