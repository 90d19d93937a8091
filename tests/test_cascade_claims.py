"""The speculative-cascade rows of the claims ledger (arXiv 2405.19261), recomputed by
tests/independent_claims.py: its own cascade rules (exact rationals) and its own lossy frontier
LP with an exact certificate."""

from __future__ import annotations

import sys
from fractions import Fraction as F
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import independent_claims as ind  # noqa: E402

from spectheory.inputs.instances import instance_to_dict  # noqa: E402
from spectheory.lp import claims  # noqa: E402
from spectheory.lp.claims import cascades as C  # noqa: E402


def test_cascade_rows_recomputed_independently():
    rows = {r.claim.id: r for r in claims.run_claims("cascade")}
    assert set(rows) == {"cascade-opt-on-frontier", "cascade-opt-off-frontier-over-blocks",
                         "cascade-token-rules-off-frontier"}
    assert all(r.matches for r in rows.values())
    kinds = {"cascade-opt-on-frontier": ("opt", 1), "cascade-opt-off-frontier-over-blocks":
             ("opt", 2), "cascade-token-rules-off-frontier": ("v1", 1)}
    for rid, (kind, L) in kinds.items():
        gaps = []
        for V, seed in (C.L1 if L == 1 else C.L2):
            m = ind.Model(instance_to_dict(C.instance(V, L, seed)))
            for a in C.ALPHAS:
                law, E = ind.cascade(m, kind, a)
                tv = ind.tv(law, m)
                front = ind.frontier_lp(m, tv)
                assert E <= front
                gaps.append(front - E)
                assert f"alpha = {C.f(a)}: E {C.f(E)} at TV {C.f(tv)}, frontier {C.f(front)}" \
                    in rows[rid].finding.ours
        if rid == "cascade-opt-on-frontier":
            assert all(g == 0 for g in gaps)
        else:
            assert any(g > 0 for g in gaps)


def test_opt_defers_on_the_one_token_instances():
    """The one-token row is not the trivial case where OPT always keeps the draft."""
    deferred = False
    for V, seed in C.L1:
        m = ind.Model(instance_to_dict(C.instance(V, 1, seed)))
        deferred |= any(ind.cascade(m, "opt", a)[1] < 2 for a in C.ALPHAS)
    assert deferred
