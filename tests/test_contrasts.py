"""Strict and lossy acceptance rules: exact laws, the lossless ones checked lossless, the lossy ones
flagged with their distortion, on prefix-dependent rows."""

from __future__ import annotations

from fractions import Fraction

import pytest

import spectheory as st
from spectheory.cli.report import toy_instance
from spectheory.verifiers.contrasts import (lenient_verification, threshold_verification,
                                            typical_acceptance)

LOSSY = ("greedy", "threshold", "lenient", "typical")


def exact_instances():
    yield toy_instance(exact=True)
    for seed in range(3):  # prefix-dependent rows, exact zeros from the rounding to 1/12
        yield st.random_instance(3, 3, seed, alpha=0.5, denominator=12)


def test_registered_as_lossy_except_strict():
    reg = st.registered()
    assert reg["strict"].lossless and reg["strict"].single_path
    assert all(not reg[n].lossless for n in LOSSY)
    assert not reg["typical"].exact  # exp/log: float law only


def test_strict_is_lossless_exactly_and_accepts_sum_q_p():
    for inst in exact_instances():
        rep = st.check_lossless("strict", inst, n_tokens=inst.block_length + 2)
        assert rep.lossless and rep.tv == 0
        strict = st.analyze(inst, "strict").expected_accepted
        assert strict <= st.analyze(inst, "token").expected_accepted
    # L = 1: E[tau] = sum_x q(x) p(x) exactly (4/9 on the two-token example)
    one = st.instance_from_dict({"vocab_size": 2, "block_length": 1, "target": ["1/3", "2/3"],
                                 "draft": ["2/3", "1/3"]}, exact=True)
    assert st.analyze(one, "strict").expected_accepted == Fraction(4, 9)
    # two positions: E[tau] = 4/9 + (4/9)^2 on the context-independent toy
    assert st.analyze(toy_instance(), "strict").expected_accepted == Fraction(52, 81)


@pytest.mark.parametrize("name", ["greedy", "threshold", "lenient"])
def test_lossy_rules_are_flagged_exactly(name):
    for inst in exact_instances():
        rep = st.check_lossless(name, inst)
        assert not rep.lossless and rep.tv > 0 and rep.offending is not None
        assert rep.output_probability != rep.target_probability


def test_typical_acceptance_flagged_in_float():
    for seed in range(3):
        rep = st.check_lossless("typical", st.random_instance(3, 3, seed, alpha=0.5))
        assert not rep.lossless and rep.tv > 1e-3


@pytest.mark.parametrize("lenience", [1e-300, 1e-320, 5e-324])
def test_a_lenience_whose_product_underflows_still_rejects_what_the_target_never_emits(lenience):
    """l q(x) underflows to 0 in float64 for l = 5e-324 (q(x) = 1/2): the division's fallback
    accepted every draft, target zeros included (E[tau+1] 2, TV 1/2 where every l > 0 gives 1.5
    and 0). The float law equals the exact law at l = 10^-250 (no underflow; the law moves by
    O(l) below it), on a zero of the target and on prefix-dependent random rows."""
    zero = st.instance_from_dict({"vocab_size": 2, "block_length": 1,
                                  "target": {"": [1.0, 0.0], "0": [0.5, 0.5], "1": [0.5, 0.5]},
                                  "draft": {"": [0.5, 0.5]}})
    rows = st.random_instance(3, 2, 5, denominator=12)
    for inst in (zero, rows):
        fl = st.analyze(inst.to_float(), lenient_verification(lenience))
        ex = st.analyze(inst, lenient_verification(Fraction(1, 10**250)), exact=True)
        assert [float(x) for x in fl.tau_pmf] == pytest.approx([float(x) for x in ex.tau_pmf],
                                                               abs=1e-12)
        assert float(fl.tv_to_target) == pytest.approx(float(ex.tv_to_target), abs=1e-12)
    assert float(st.analyze(zero, lenient_verification(lenience)).tv_to_target) == 0


def test_limits_of_the_parameters():
    for inst in exact_instances():
        tok = st.analyze(inst, "token")
        # lenience 1 is token verification, exactly; smaller lenience accepts more
        assert st.analyze(inst, lenient_verification(1)).tau_pmf == tok.tau_pmf
        e = [st.analyze(inst, lenient_verification(Fraction(k, 4))).expected_accepted
             for k in (4, 3, 2, 1)]
        assert e == sorted(e)
        # threshold 1 on rows with no probability 1 never accepts: tau = 0 and Y ~ p, which is
        # lossless (a threshold above 1 is refused: thresholds are probabilities)
        never = st.analyze(inst, threshold_verification(1))
        if all((t < 1).all() for t in inst.target.tables):
            assert never.expected_accepted == 0 and never.tv_to_target == 0
        with pytest.raises(ValueError, match=r"theta 3/2 must be in \[0, 1\]"):
            threshold_verification(Fraction(3, 2))
        # threshold 0 accepts every draft: the output law is q^L then p, E[tau] = L
        always = st.analyze(inst, threshold_verification(0))
        assert always.expected_accepted == inst.block_length


def test_greedy_is_lossless_only_for_one_hot_targets():
    onehot = st.instance_from_dict({"vocab_size": 3, "block_length": 2,
                                    "target": {"": [0, 1, 0], "0": [1, 0, 0], "1": [0, 0, 1],
                                               "2": [0, 1, 0], "0,0": [0, 0, 1],
                                               "0,1": [1, 0, 0], "0,2": [0, 1, 0],
                                               "1,0": [1, 0, 0], "1,1": [0, 1, 0],
                                               "1,2": [0, 0, 1], "2,0": [0, 1, 0],
                                               "2,1": [1, 0, 0], "2,2": [0, 0, 1]},
                                    "draft": ["1/2", "1/4", "1/4"]}, exact=True)
    assert st.check_lossless("greedy", onehot).lossless
    assert st.analyze(onehot, "greedy").tau_pmf == st.analyze(onehot, "token").tau_pmf


def test_typical_with_zero_epsilon_accepts_every_supported_draft():
    inst = st.random_instance(3, 2, 0)  # full-support rows: every draft accepted
    assert float(st.analyze(inst, typical_acceptance(0.0, 0.3)).expected_accepted) == \
        pytest.approx(2.0, abs=1e-12)


def test_greedy_sends_a_tie_at_the_maximum_to_the_lowest_id():
    """p = (1/3, 1/12, 1/3, 1/4): tokens 0 and 2 tie at the maximum; only token 0 counts as the
    argmax, so a draft of 2 (probability 7/12) is rejected and tau = 1 with probability q(0) =
    1/12 (accepting every tied maximum would give 2/3)."""
    from fractions import Fraction as F

    import spectheory as st

    inst = st.instance_from_dict({"vocab_size": 4, "block_length": 1,
                                  "target": ["1/3", "1/12", "1/3", "1/4"],
                                  "draft": ["1/12", "1/12", "7/12", "1/4"]}, exact=True)
    assert list(st.analyze(inst, "greedy", exact=True).tau_pmf) == [F(11, 12), F(1, 12)]
