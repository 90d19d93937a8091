"""The pool of large output buffers (spectheory.runtime.buffers): a buffer is reused only once
nothing references it, laws are the same with and without it, and its size limit holds."""

from __future__ import annotations

import importlib

import pytest
import torch

from spectheory.runtime import buffers
from spectheory.runtime.errors import SpectheoryError
from spectheory.verifiers import block_verification, gbv, specinfer

buffers_module = importlib.import_module("spectheory.runtime.buffers")


@pytest.fixture
def small_pool(monkeypatch):
    """Pool requests from 1 KiB on (so that test-size laws use it), capacity 64 MiB."""
    monkeypatch.setattr(buffers_module, "MIN_BYTES", 1024)
    monkeypatch.setattr(buffers_module, "_capacity", 64 << 20)
    monkeypatch.setattr(buffers_module, "_pool", [])
    yield
    buffers.release()


def test_reused_only_when_free(small_pool):
    a = buffers.empty((4, 1000), torch.float32)
    a.fill_(7.0)
    ptr = a.data_ptr()
    b = buffers.empty((4, 1000), torch.float32)  # a is alive: a new buffer
    assert b.data_ptr() != ptr and bool((a == 7).all())
    view = a[1:]  # a view keeps the buffer in use
    del a
    c = buffers.empty((4, 1000), torch.float32)
    assert c.data_ptr() not in (ptr, b.data_ptr())
    arr = view.numpy()  # so does a numpy array made from a view
    del view
    d = buffers.empty((4, 1000), torch.float32)
    assert d.data_ptr() != ptr
    del arr, d
    e = buffers.empty((4, 1000), torch.float32)  # now free: the oldest free one, a's
    assert e.data_ptr() == ptr
    held, free = buffers.pooled_bytes()
    assert held >= 3 * 16000
    del b, c, e
    assert buffers.release() >= 3 * 16000
    assert buffers.pooled_bytes() == (0, 0)


def test_a_free_buffer_is_taken_again(small_pool):
    a = buffers.empty((3, 2000), torch.float64)
    ptr = a.data_ptr()
    del a
    assert buffers.empty((3, 2000), torch.float64).data_ptr() == ptr
    assert buffers.empty((2, 2000), torch.float64).data_ptr() == ptr  # fits, < 2x the size
    assert buffers.empty((1, 2000), torch.float64).data_ptr() != ptr  # a third: not taken


def test_capacity_bounds_the_pool(small_pool, monkeypatch):
    monkeypatch.setattr(buffers_module, "_capacity", 100_000)
    keep = [buffers.empty((10_000,), torch.float32) for _ in range(4)]  # 40 kB each
    held, _ = buffers.pooled_bytes()
    assert held <= 100_000  # the third and fourth are plain allocations
    del keep
    big = buffers.empty((20_000,), torch.float32)  # 80 kB: the free ones are dropped for it
    assert buffers.pooled_bytes()[0] <= 100_000 and big.numel() == 20_000


@pytest.mark.parametrize("text,value", [("0", 0), ("512M", 512 << 20), ("4g", 4 << 30),
                                        ("1000", 1000)])
def test_capacity_from_the_environment(monkeypatch, text, value):
    monkeypatch.setattr(buffers_module, "_capacity", None)
    monkeypatch.setenv(buffers.ENV_VAR, text)
    assert buffers.capacity() == value
    monkeypatch.setattr(buffers_module, "_capacity", None)


@pytest.mark.parametrize("text", ["lots", "-1", "1.5G", "١٢"])
def test_a_bad_capacity_is_refused_in_one_line(monkeypatch, text):
    monkeypatch.setattr(buffers_module, "_capacity", None)
    monkeypatch.setenv(buffers.ENV_VAR, text)
    with pytest.raises(SpectheoryError, match=f"^{buffers.ENV_VAR}={text!r} is not a size"):
        buffers.capacity()
    monkeypatch.setattr(buffers_module, "_capacity", None)


def _batch(seed, K=3, Bn=5, L=3, V=700):
    gen = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(Bn, K, L + 1, V, generator=gen) * 3, -1)
    q = torch.softmax(torch.randn(Bn, K, L, V, generator=gen) * 3, -1)
    p[:, :, 0], q[:, :, 0] = p[:, :1, 0], q[:, :1, 0]
    x = torch.multinomial(q.reshape(-1, V), 1, generator=gen).view(Bn, K, L)
    return x, q, p


def test_laws_are_the_same_from_pooled_buffers(small_pool, monkeypatch):
    """Each law twice in a row from reused (dirty) buffers, against the same law with the pool
    off: bit for bit; and a law that is kept is not overwritten by the next one."""
    x, q, p = _batch(1)
    x2, q2, p2 = _batch(2)
    laws = {"block": lambda x, q, p: block_verification(x[:, 0], q[:, 0], p[:, 0]),
            "gbv": gbv, "specinfer": specinfer}
    monkeypatch.setattr(buffers_module, "_capacity", 0)
    plain = {n: f(x, q, p) for n, f in laws.items()}
    monkeypatch.setattr(buffers_module, "_capacity", 64 << 20)
    for name, f in laws.items():
        kept = f(x, q, p)
        snapshot = kept.correction.clone()
        other = f(x2, q2, p2)  # a second law while the first is alive
        assert torch.equal(kept.correction, snapshot), name
        assert other.correction.data_ptr() != kept.correction.data_ptr(), name
        ptr = other.correction.data_ptr()
        del other
        again = f(x, q, p)  # into the freed (dirty) buffer of the second law
        assert again.correction.data_ptr() == ptr, name
        assert torch.equal(again.correction, plain[name].correction), name
        assert torch.equal(again.stop, plain[name].stop), name


def test_a_bad_capacity_is_one_line_and_exit_2_from_the_command_line(tmp_path, monkeypatch,
                                                                    capsys):
    import json

    import spectheory as st
    from cli_helpers import run
    from spectheory.inputs.instances import instance_to_dict

    path = tmp_path / "inst.json"
    path.write_text(json.dumps(instance_to_dict(st.random_instance(3, 2, 1))))
    monkeypatch.setattr(buffers_module, "_capacity", None)
    monkeypatch.setenv(buffers.ENV_VAR, "lots")
    code, out, err = run(["exact", str(path), "--verifier", "specinfer", "--paths", "2"], capsys)
    monkeypatch.setattr(buffers_module, "_capacity", None)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"spectheory: error: {buffers.ENV_VAR}='lots' is not a size in bytes (e.g. 0, 512M, 4G)"]
