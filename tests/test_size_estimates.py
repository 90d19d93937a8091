"""The time an analysis is estimated at, before it runs, follows the route that will run it: a
float analysis on the per-node route (token and block verification) at that route's rate, the
per-draft and K-path routes at theirs. A context-independent L = 25 instance over V = 2 was
estimated at 5.6 min at the per-draft rate and ran in 18.5 s on the per-node route."""

from __future__ import annotations

import pytest

import spectheory as st
from spectheory.runtime import limits
from spectheory.runtime.sizes import check_size


def _notes(monkeypatch):
    seen = []
    monkeypatch.setattr(limits, "note", lambda text, *a, **k: seen.append(text))
    return seen


def test_the_node_rate_is_used_for_the_node_route_only(monkeypatch):
    seen = _notes(monkeypatch)
    n = 2**26
    check_size(n, "x", limit=2**27, node=True)
    check_size(n, "y", limit=2**27)
    node, draft = seen
    assert f"at about {limits.NODE_SEQUENCES_PER_SECOND:.2g}/s" in node
    assert f"at about {limits.FLOAT_SEQUENCES_PER_SECOND:.2g}/s" in draft
    assert limits.estimate_seconds(n, node=True) == n / limits.NODE_SEQUENCES_PER_SECOND
    # exact mode and joint outcomes keep their own rates whatever the flag
    assert limits.estimate_seconds(n, exact=True, node=True) == \
        n / limits.EXACT_SEQUENCES_PER_SECOND
    assert limits.estimate_seconds(n, outcomes=True, node=True) == \
        n / limits.OUTCOMES_PER_SECOND


@pytest.mark.parametrize("verifier,route,rate", [
    ("token", "node", "NODE_SEQUENCES_PER_SECOND"),
    ("token", "per-draft", "FLOAT_SEQUENCES_PER_SECOND"),
])
def test_analyze_estimates_at_its_routes_rate(monkeypatch, verifier, route, rate):
    """The estimate is made before the analysis; the rates are shrunk so that a small instance
    is estimated past the note's threshold."""
    seen = _notes(monkeypatch)
    monkeypatch.setattr(limits, "NOTE_SECONDS", 0.0)
    inst = st.random_instance(2, 3, seed=0)
    st.analyze(inst, verifier, route=route)
    per = getattr(limits, rate)
    assert any(f"at about {per:.2g}/s" in s for s in seen), seen
