"""One way to reach Ray for the executors that use it (`spectheory.sweep`, `spectheory.engine.split`).

[`ray_session`][spectheory.runtime.raycluster.ray_session] joins the running Ray session, or the cluster
at ``address``, or starts a local cluster of ``workers`` CPUs for the duration of the ``with``
block (and shuts down only what it started). Ray is the ``[ray]`` extra: without it, one line
naming the extra.
"""

from __future__ import annotations

from contextlib import contextmanager

from .errors import OptionError

#: Object store of a local cluster when the caller needs no more (bytes): Ray's minimum is
#: about 75 MiB, and the executors send small objects unless they say otherwise.
MIN_OBJECT_STORE = 80 * 2**20


@contextmanager
def ray_session(workers: int, address: str | None = None, object_store_bytes: int = 0,
                what: str = "executor 'ray'"):
    """The ``ray`` module, initialised for the block: the session already running, else the
    cluster at ``address``, else a local cluster with ``workers`` CPUs and an object store of at
    least ``object_store_bytes`` (no dashboard, workers' logs kept off the terminal)."""
    try:
        import ray
    except ImportError:
        raise OptionError(f"{what} needs Ray: pip install 'spectheory[ray]'") from None
    started = False
    if not ray.is_initialized():
        kwargs = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=workers, object_store_memory=max(MIN_OBJECT_STORE,
                                                               int(object_store_bytes)), **kwargs)
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()
