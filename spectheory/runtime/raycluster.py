"""One way to reach Ray for the executors that use it (`spectheory.sweep`,
`spectheory.engine.split`, ``spectheory validate run``).

[`ray_session`][spectheory.runtime.raycluster.ray_session] joins the running Ray session, or the cluster
at ``address``, or starts a local cluster of ``workers`` CPUs for the duration of the ``with``
block (and shuts down only what it started); [`ray_actors`][spectheory.runtime.raycluster.ray_actors]
starts one actor per GPU (or CPU) on it, refusing in one line a request the cluster cannot hold
([`check_ray_resources`][spectheory.runtime.raycluster.check_ray_resources]). Ray is the ``[ray]`` extra: without it, one line
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


def check_ray_resources(ray, count: int, gpu: bool = False,
                        what: str = "executor 'ray'") -> None:
    """Refuse in one line a request for ``count`` actors of one GPU (``gpu``) or one CPU each on a
    cluster that has fewer: Ray would wait for them forever."""
    kind = "GPU" if gpu else "CPU"
    have = int(ray.cluster_resources().get(kind, 0))
    if count > have:
        raise OptionError(f"{what}: {count} worker(s) need one {kind} each; the Ray cluster "
                          f"has {have}")


def ray_actors(ray, cls, args_list, gpu: bool = False, what: str = "executor 'ray'") -> list:
    """One actor of ``cls`` per entry of ``args_list`` (its constructor's arguments), each holding
    one GPU (``gpu``: Ray then sets the actor's ``CUDA_VISIBLE_DEVICES`` to that GPU, which the
    actor sees as ``cuda``) or one CPU, after `check_ray_resources`."""
    check_ray_resources(ray, len(args_list), gpu, what)
    options = {"num_gpus": 1} if gpu else {"num_cpus": 1}
    remote = ray.remote(max_restarts=0, **options)(cls)
    return [remote.remote(*args) for args in args_list]
