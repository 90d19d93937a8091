"""`spectheory.runtime.kept.Kept`, the bounded memo behind the toolkit's kept results (reference
laws, exact vector laws, power-curve bisections, llama.cpp candidate lists, the LP bounds' float
analyses): the oldest entry goes first, a key kept again is not a new entry, the bound holds,
None is refused (it means "not kept"), and every call site uses one; `digest`, the key of the
kept results computed from arrays: the same bytes of the same dtype and shape give the same
digest, any change of value, dtype, shape or order another, and what it does not read gives None."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from spectheory.runtime.kept import Kept, digest


def test_the_oldest_entry_is_dropped_first_and_the_bound_holds():
    kept = Kept(3)
    for k in "abc":
        assert kept.keep(k, k.upper()) == k.upper()
    assert len(kept) == 3 and kept.get("a") == "A"
    kept.keep("a", "A2")  # kept again: replaced in place, nothing dropped
    assert len(kept) == 3 and kept.get("a") == "A2" and kept.get("b") == "B"
    kept.keep("d", "D")  # full: "a" is still the oldest insertion
    assert "a" not in kept and [kept.get(k) for k in "bcd"] == ["B", "C", "D"]
    for i in range(100):
        kept.keep(i, i)
        assert len(kept) <= 3
    assert [kept.get(i) for i in (97, 98, 99)] == [97, 98, 99] and kept.get(96) is None
    kept.clear()
    assert len(kept) == 0 and kept.get(99) is None


def test_none_and_empty_bounds_are_refused():
    with pytest.raises(ValueError, match="does not store None"):
        Kept(2).keep("k", None)
    for size in (0, -1):
        with pytest.raises(ValueError, match="at least one value"):
            Kept(size)


def test_every_kept_result_of_the_toolkit_is_a_bounded_memo():
    from spectheory.lp import trust
    from spectheory.testing.checks import calls, vectors
    from spectheory.testing.engines.ports import llamacpp
    from spectheory.testing.statistics import stats

    memos = {calls._LAW_CACHE: calls.LAW_CACHE_SIZE, vectors._EXACT_CACHE: vectors.EXACT_CACHE_SIZE,
             stats._MDT_CACHE: stats.MDT_CACHE_SIZE, llamacpp._CANDIDATES: 4096,
             trust._ANALYSES: 1024}
    for memo, size in memos.items():
        assert isinstance(memo, Kept) and memo.size == size


def test_digest_reads_dtype_shape_bytes_and_order():
    a = np.array([[0.25, 0.75], [0.5, 0.5]])
    t = torch.tensor(a)
    base = digest(a, 3, "block")
    assert len(base) == 32 and digest(a.copy(), 3, "block") == base
    assert digest(np.asfortranarray(a), 3, "block") == base  # C order whatever the layout
    changed = [digest(a.reshape(4), 3, "block"),  # same bytes, another shape
               digest(a.astype(np.float32), 3, "block"),  # another dtype
               digest(a.T, 3, "block"),  # another order of the values
               digest(a + np.array([[0, 1e-16], [0, 0]]) * 4, 3, "block"),  # one ulp-scale change
               digest(a, 3.0, "block"),  # 3.0 is not 3
               digest(a, 3, "token"), digest(3, a, "block"), digest(a, 3),
               digest(t, 3, "block")]  # a tensor is not the array of its values
    assert len({base, *changed}) == len(changed) + 1 and None not in changed
    # tensors: a stride-0 view reads as its values, bfloat16 as raw bytes
    row = torch.tensor([0.125, 0.875])
    assert digest(row.expand(3, 2)) == digest(row.repeat(3, 1))
    b = torch.tensor([0.5, 0.25], dtype=torch.bfloat16)
    assert digest(b) == digest(b.clone()) != digest(b.to(torch.float16))
    assert digest(torch.tensor(True)) != digest(torch.tensor(1, dtype=torch.uint8))


def test_digest_is_none_for_what_it_does_not_read():
    grad = torch.ones(2, requires_grad=True)
    for part in (grad, torch.ones(2, dtype=torch.complex64), torch.ones(2).to_sparse(),
                 np.array([Fraction(1, 2)], dtype=object), np.array(["a"]), [0.5, 0.5],
                 Fraction(1, 2), (1, 2)):
        assert digest(np.zeros(2), part) is None, part
    assert digest(grad.detach()) is not None


def test_the_kept_laws_and_analyses_are_keyed_by_digest():
    """The sampler checks' reference laws and the LP bounds' float analyses key on `digest`: a
    row changed in place is another key, the same rows the same key."""
    from spectheory.inputs.random_instances import random_instance
    from spectheory.lp import trust
    from spectheory.registry import get_verifier
    from spectheory.testing.checks import calls

    inst = random_instance(3, 2, 5).to_float()
    assert trust._rows_digest(inst) == trust._rows_digest(random_instance(3, 2, 5).to_float())
    assert trust._rows_digest(inst) != trust._rows_digest(random_instance(3, 2, 6).to_float())
    spec = get_verifier("token")
    V = 3
    d = torch.tensor([[[0, 1]]])  # [B, K, L] = [1, 1, 2]
    q = torch.full((1, 1, 2, V), 1 / 3, dtype=torch.float64)
    p = torch.softmax(torch.arange(3 * V, dtype=torch.float64).reshape(1, 1, 3, V), -1)
    calls._LAW_CACHE.clear()
    first = calls._reference_law(spec, d, q, p, "law")
    assert len(calls._LAW_CACHE) == 1 and (spec, digest(d, q, p)) in calls._LAW_CACHE
    again = calls._reference_law(spec, d, q, p.clone(), "law")
    assert len(calls._LAW_CACHE) == 1 and all(torch.equal(x, y) for x, y in zip(first, again))
    p[0, 0, 0] = p[0, 0, 0].flip(0)  # the same values in another order: another law
    other = calls._reference_law(spec, d, q, p, "law")
    assert len(calls._LAW_CACHE) == 2 and not torch.equal(other[1], first[1])
    calls._LAW_CACHE.clear()
