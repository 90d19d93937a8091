"""One way to reach Ray for the executors that use it (`spectheory.sweep`,
`spectheory.engine.split`, ``spectheory validate run``).

A cluster ``address`` is probed first ([`probe_address`][spectheory.runtime.raycluster.probe_address]:
a TCP connection within `CONNECT_SECONDS`), so that an address where nothing listens is refused
in one line naming it instead of Ray retrying for minutes.

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


#: Seconds to wait for a TCP connection to a Ray address before refusing it: Ray itself retries
#: an address nobody listens on for minutes.
CONNECT_SECONDS = 3.0
#: Addresses Ray resolves itself (a running cluster found through its files, or a new one).
_SPECIAL = ("auto", "local")


def split_address(address: str, what: str = "--address") -> tuple[str, int]:
    """``(host, port)`` of a Ray address ``host:port``, ``ray://host:port`` or ``[ipv6]:port``;
    else [`OptionError`][spectheory.runtime.errors.OptionError] in one line."""
    text = str(address).strip()
    rest = text.split("://", 1)[1] if "://" in text else text
    host, sep, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not (port.isascii() and port.isdigit()) or len(port) > 5 \
            or not 1 <= int(port) <= 65535:
        raise OptionError(f"{what} {address!r} is not a Ray address host:port (e.g. "
                          "127.0.0.1:6379 or ray://head:10001), 'auto' or 'local'")
    return host, int(port)


def probe_address(address: str, what: str = "--address",
                  seconds: float = CONNECT_SECONDS) -> None:
    """Refuse, in one line naming ``address``, a Ray address where nothing accepts a TCP
    connection within ``seconds`` (``auto`` and ``local`` are left to Ray)."""
    import socket

    if str(address).strip() in _SPECIAL:
        return
    host, port = split_address(address, what)
    try:
        with socket.create_connection((host, port), timeout=seconds):
            pass
    except socket.timeout:
        raise OptionError(f"{what} {address!r}: no answer from {host}:{port} within "
                          f"{seconds:g} s; is the Ray cluster running there (ray start "
                          "--head)? Leave --address out for a local cluster") from None
    except OSError as exc:
        raise OptionError(f"{what} {address!r}: cannot connect to {host}:{port} "
                          f"({exc.strerror or exc}); is the Ray cluster running there (ray "
                          "start --head)? Leave --address out for a local cluster") from None


@contextmanager
def ray_session(workers: int, address: str | None = None, object_store_bytes: int = 0,
                what: str = "executor 'ray'"):
    """The ``ray`` module, initialised for the block: the session already running, else the
    cluster at ``address``, else a local cluster with ``workers`` CPUs and an object store of at
    least ``object_store_bytes`` (no dashboard, workers' logs kept off the terminal)."""
    if address:
        probe_address(address, f"{what}: --address")
    try:
        import ray
    except ImportError:
        raise OptionError(f"{what} needs Ray: pip install 'spectheory[ray]'") from None
    started = False
    if not ray.is_initialized():
        kwargs = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if address:
            try:
                ray.init(address=address, **kwargs)
            except (ConnectionError, TimeoutError, RuntimeError) as exc:
                detail = " ".join(str(exc).split())[:200]
                raise OptionError(f"{what}: --address {address!r}: Ray could not join a "
                                  f"cluster there ({detail})") from exc
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
