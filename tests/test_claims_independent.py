"""Second implementations behind the claims ledger (`spectheory.lp.claims`): every refutation and
every optimality confirmation is recomputed here from the papers alone (`independent_claims`:
own sequence-tree enumeration in Fractions, own LP with an exact certificate, importing nothing
from spectheory's engine, verifiers, bounds or LPs) and must agree exactly with the ledger's
numbers; a verdict whose two implementations disagree fails here."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

import independent_claims as ind
from spectheory.inputs.instances import instance_to_dict
from spectheory.inputs.random_instances import random_instance
from spectheory.lp import claims


def rnd(V, L, seed, d=8):
    return ind.Model(instance_to_dict(random_instance(V, L, seed, denominator=d)))


def ledger_row(claim_id):
    [row] = claims.run_claims(claim_id)
    assert row.matches, (row.claim.id, row.finding.verdict, row.claim.recorded)
    return row


def test_spectr_gbv_bound_in_the_papers_letters():
    a, b = rnd(2, 2, 2, 10), rnd(2, 2, 10, 6)
    ea, oa = ind.full_blocks_expression(a, 2), ind.direct_lp(a, 2) - 1
    eb, ob = ind.full_blocks_expression(b, 2), ind.direct_lp(b, 2) - 1
    cb = ind.k_draft_coupling_bound(b, 2)
    # read in the paper's letters the expression is below what a valid verifier reaches ...
    assert (ea, oa) == (F(1547, 1000), F(79, 50)) and oa > ea
    # ... and with the letters swapped (the ledger's former reading) it was above it
    assert ind.full_blocks_expression(a, 2, weight="draft") == F(1209, 700) > oa
    # the second instance: above every one-iteration lossless verifier, below the coupling bound
    assert (eb, ob, cb) == (F(359, 270), F(215, 162), F(115, 81)) and ob < eb <= cb
    row = ledger_row("spectr-gbv-bound")
    assert row.finding.verdict == "refuted"
    for v in (ea, oa, eb, ob, cb):
        assert str(v) in row.finding.ours


def test_gbv_monotone_is_an_observation_not_reproduced_at_L1():
    p, q = [F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)]
    vals = [ind.gbv_L1(p, q, K) for K in range(1, 7)]
    assert vals[:4] == [F(5, 3), F(17, 9), F(53, 27), F(151, 81)]
    assert vals[3] < vals[2]
    row = ledger_row("gbv-monotone-K")
    assert row.finding.verdict == "not reproduced"
    assert ", ".join(map(str, vals)) in row.finding.ours
