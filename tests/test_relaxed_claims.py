"""Published divergence bounds of relaxed rules against exact divergences
(spectheory.lp.claims.relaxed_checks): Cactus's KL budget refuted where the exact divergence exceeds it,
holding elsewhere; a planted false certificate caught; the derived greedy radius equal to a
convex solver's minimum."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import spectheory as st
from spectheory.lp.claims import relaxed_checks as C
from spectheory.verifiers.relaxed import cactus_acceptance


def test_ledger_rows_verdicts():
    rows = C.ledger_rows()
    assert all(r.instance and r.error >= 0 for r in rows)
    h_a, h_b, out_a, out_b, g1, g2 = rows
    # exact two-block KL at p(x) = 1/2, delta = 1/10
    hx = 0.5 + math.sqrt(0.2 * 0.25)
    expect = hx * math.log(2 * hx) + (1 - hx) * math.log(2 * (1 - hx))
    assert h_a.refuted and abs(h_a.exact - expect) < 1e-15 and h_a.exact > 0.1
    assert not h_b.refuted and h_b.exact < 0.1
    assert out_a.refuted and not out_b.refuted
    assert not g1.refuted and not g2.refuted


def test_second_order_step_is_the_taylor_term():
    """(h - p)^2 / (2 p (1 - p)) = delta exactly where the clamp does not bind, and the exact KL
    approaches delta as delta -> 0 (the claim is right to second order only)."""
    for px in (0.1, 0.3, 0.5):
        for delta in (1e-6, 1e-3):
            hx = C.cactus_h(px, delta)
            assert abs((hx - px) ** 2 / (2 * px * (1 - px)) - delta) < 1e-12
        assert abs(C._kl_two_block(C.cactus_h(px, 1e-6), px) / 1e-6 - 1) < 1e-2


def test_output_law_matches_the_rule_registered_in_the_engine():
    inst = st.instance_from_dict({"vocab_size": 3, "block_length": 1,
                                  "target": ["1/2", "1/4", "1/4"],
                                  "draft": ["1/4", "1/2", "1/4"]})
    res = st.analyze(inst, cactus_acceptance(0.1))
    # L = 1: the law over 2 tokens, marginal of the first = the emitted token's law
    first = np.asarray(res.output_law, dtype=np.float64).reshape(3, 3).sum(1)
    out = C.cactus_output_law([0.5, 0.25, 0.25], [0.25, 0.5, 0.25], 0.1)
    assert np.max(np.abs(first - out)) < 1e-12


def test_planted_false_certificate_is_refuted_and_true_one_holds():
    inst = st.instance_from_dict({"vocab_size": 2, "block_length": 1, "target": ["1/10", "9/10"],
                                  "draft": ["1", "0"]})
    v = C.cactus_h_claim(inst, 0.1)
    assert not v.refuted
    # a certificate stating half the true divergence is below the exact value: refuted
    planted = C.Verdict(v.claim, "planted", v.instance, v.exact / 2, v.exact, v.error,
                        v.exact > v.exact / 2 + v.error)
    assert planted.refuted
    # a wrong closed form for the greedy radius (the chi-square step) is caught by the solver
    p = [0.5, 0.3, 0.2]
    wrong = (math.sqrt(0.5) - math.sqrt(0.3)) ** 2  # first-order, not -log(1 - .)
    assert abs(wrong - C.check_greedy_radius(p, 0, "rp").exact) > 1e-6


@pytest.mark.parametrize("direction", ["rp", "pr"])
def test_greedy_radius_on_prefix_rows(direction):
    inst = st.random_instance(3, 2, 1, alpha=0.5, denominator=12)
    for j in range(2):
        for row in np.asarray(inst.to_float().target.level(j))[:2]:
            x = int(np.argmax(row))
            if sorted(row)[-1] == sorted(row)[-2]:
                assert C.greedy_rejection_radius(row, x, direction) == 0
                continue
            assert not C.check_greedy_radius(row, x, direction).refuted


def test_frontier_rows_hold():
    rows = C.frontier_rows()
    assert len(rows) == 2 and all(r["holds"] for r in rows)
    assert rows[1]["value"] > rows[0]["value"]
