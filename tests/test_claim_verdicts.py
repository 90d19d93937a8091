"""The ledger's verdict rules at their edges: each claim check reads its numbers through one
function (``be``, ``point``, ``gap_values``, ``_frontier``), replaced here by numbers at the edge
the claim states (a tie, a threshold, a fall at the first K), so the rule that turns them into a
verdict is tested where the shipped instances never put it. The shipped rows themselves are
recomputed in tests/test_claims.py and tests/test_claims_independent.py."""

from __future__ import annotations

from fractions import Fraction

import spectheory as st
from spectheory.lp.claims import block_gbv, diversed, fvo_spec, khisti, relaxed, spectr_gbv
from spectheory.lp.claims.common import toy


def test_fvo_spec_gap_is_reproduced_from_the_papers_value_up(monkeypatch):
    """'up to 0.996': a largest gap of 0.9965 reproduces it, 0.995 does not."""
    for value, verdict in ((Fraction(9965, 10000), "reproduced"),
                           (Fraction(996, 1000), "reproduced"),
                           (Fraction(995, 1000), "not reproduced")):
        monkeypatch.setattr(fvo_spec, "gap_values", lambda v=value: [("x", v)])
        assert fvo_spec.c_gap().verdict == verdict


def test_free_block_must_be_strictly_above_block_verification(monkeypatch):
    """On an L = 1 instance the free block's optimum equals block verification's (both the
    coupling bound): 'free block > block verification' is then refuted, not confirmed."""
    from spectheory.lp.coupling import coupling_bound
    from spectheory.lp.frontier import free_block_lp, frontier_lp
    from spectheory.lp.trust import _tables, greedy_value

    inst = toy(1)
    p, Q = _tables(inst, True)
    block = greedy_value(p, Q, 1)
    assert free_block_lp(inst, exact=True).optimum == block
    monkeypatch.setattr(relaxed, "_frontier", lambda: (inst, block, frontier_lp, free_block_lp,
                                                        coupling_bound))
    assert relaxed.c_free_block().verdict == "refuted"


def test_gbv_falling_already_at_two_paths_is_not_monotone(monkeypatch):
    for vals, verdict, fall in (({1: 2, 2: 1, 3: 3, 4: 4, 5: 5, 6: 6}, "not reproduced",
                                 "falls from K = 1 to K = 2"),
                                ({1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 4}, "not reproduced",
                                 "falls from K = 5 to K = 6"),
                                ({1: 1, 2: 2, 3: 2, 4: 4, 5: 5, 6: 6}, "reproduced", None)):
        monkeypatch.setattr(block_gbv, "be", lambda t, name, K=1, v=vals: v[K])
        got = block_gbv.c_gbv_monotone()
        assert got.verdict == verdict
        assert (fall in got.ours) if fall else ("falls" not in got.ours)


def test_pareto_below_the_frontier_reads_only_weights_above_zero(monkeypatch):
    """Every weight w > 0 strictly below the frontier refutes Pareto optimality; w = 0 (the
    lossless end, on the frontier at TV 0) is not one of them."""
    monkeypatch.setattr(diversed, "frontier", lambda inst, tv: Fraction(3))
    monkeypatch.setattr(diversed, "point", lambda inst, w: (
        Fraction(2) if w == 0 else Fraction(3), Fraction(0), None))
    assert diversed.c_pareto_blocks().verdict == "refuted"


def test_static_ensemble_first_acceptance_is_p_tau_at_least_one():
    """point's third value is P(the first draft accepted) = P(tau >= 1), not P(tau = 1): they
    differ from L = 2 (2/3 against 25/144 here)."""
    inst = diversed.instance(3, 2, 1)
    E, tv, first = diversed.point(inst, Fraction(1, 2))
    from spectheory.verifiers.static_ensemble import static_ensemble

    res = st.analyze(inst, static_ensemble(Fraction(1, 2)), exact=True)
    assert first == sum(res.tau_pmf[1:]) == Fraction(2, 3)
    assert first != res.tau_pmf[1]


def test_khisti_ordering_holds_at_ties(monkeypatch):
    """IS >= SpecTr >= SpecInfer is an ordering with ties allowed (equal values reproduce it)."""
    monkeypatch.setattr(khisti, "be", lambda inst, name, K=1: 2.0)
    assert khisti.c_khisti_ordering().verdict == "reproduced"
    order = {"khisti": 2.0, "spectr": 2.1, "specinfer": 1.9}
    monkeypatch.setattr(khisti, "be", lambda inst, name, K=1: order[name])
    assert khisti.c_khisti_ordering().verdict == "not reproduced"


def test_spectr_gbv_grows_with_ties_allowed(monkeypatch):
    """'E[tau] does not decrease from K = 1 to 2': equal values confirm it, a fall refutes it."""
    monkeypatch.setattr(spectr_gbv, "be", lambda inst, name, K=1: 2)
    assert spectr_gbv.c_spectr_gbv_grows().verdict == "confirmed"
    monkeypatch.setattr(spectr_gbv, "be", lambda inst, name, K=1: 3 - K / 10)
    assert spectr_gbv.c_spectr_gbv_grows().verdict == "refuted"
