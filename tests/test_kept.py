"""`spectheory.runtime.kept.Kept`, the bounded memo behind the toolkit's kept results (reference
laws, exact vector laws, power-curve bisections, llama.cpp candidate lists, the LP bounds' float
analyses): the oldest entry goes first, a key kept again is not a new entry, the bound holds,
None is refused (it means "not kept"), and every call site uses one."""

from __future__ import annotations

import pytest

from spectheory.runtime.kept import Kept


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
