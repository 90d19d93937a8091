"""Defect classes of the conformance kit, the relaxed rules, trees, the KL frontier and the claims
ledger that the suite once let through: each test below kills one planted mutant of
scripts/mutation.py (its number is in the test's docstring) by an exact value, a bound or a
planted bug caught.

Statistical tests state their false-alarm rate and their power in their docstrings; every other
test is deterministic (exact values, or float values that are exact in binary).
"""

from __future__ import annotations

import importlib
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from spectheory import testing as T
from spectheory.testing import check_sampler, make_sampler, reference_coin_sampler

ALPHA = 1e-3


# ----------------------------------------------------------------------------- sizes and powers


@pytest.mark.parametrize("alpha", [1e-3, 0.05])
def test_detection_power_without_a_bias_is_the_instance_tests_size(alpha):
    """Mutant 108. With law == target the non-centrality is 0, so the power of one instance's
    test is its size: check_step runs it at alpha / 2 (Bonferroni split between the global and
    the per-instance test), so exactly alpha / 2, never alpha. Target rows with ties and a
    pooled bin (cells of expected count below 5 at 1,000 samples)."""
    target = np.array([0.25, 0.25, 0.4, 0.096, 0.002, 0.002])
    got = T.step.detection_power(target, target, 1_000, alpha)
    assert got == pytest.approx(alpha / 2, rel=1e-9)
    # and the power grows with the bias, from that size on
    law = np.array([0.3, 0.2, 0.4, 0.096, 0.002, 0.002])
    assert alpha / 2 < T.step.detection_power(law, target, 1_000, alpha) < 1


def test_detection_power_of_a_bias_matches_the_exact_power_of_the_checks_rule():
    """Mutant 108. One instance of two cells, target (1/2, 1/2), a step whose law is
    (0.55, 0.45), n = 2,000 samples: check_step rejects when the statistic (X - n/2)^2 / (n/4)
    (X the count of the first cell, Binomial(n, 0.55)) exceeds chi2.isf(alpha / 2, 1) (global
    and per-instance test coincide, each at alpha / 2). Its exact power, summed over the
    binomial, is 0.8441 at alpha = 1e-3; the non-central approximation stated by
    detection_power (0.8392) must lie within 0.01 of it, while the exact power at level alpha
    (0.8831) is 0.039 away and its approximation about as far."""
    from scipy.stats import binom

    n, alpha = 2_000, 1e-3
    x = np.arange(n + 1)
    stat = (x - n / 2) ** 2 / (n / 4)
    pmf = binom.pmf(x, n, 0.55)

    def exact(level):
        return float(pmf[stat > chi2.isf(level, 1)].sum())

    got = T.step.detection_power(np.array([0.55, 0.45]), np.array([0.5, 0.5]), n, alpha)
    assert abs(got - exact(alpha / 2)) < 0.01
    assert exact(alpha) - exact(alpha / 2) > 0.03


def test_replica_power_on_one_biased_row_of_many():
    """Mutant 109. Eight rows, one of them biased (non-centrality 30 on 3 dof): the per-row test
    of that row at alpha / (2 m) carries the power, 1 - F_ncx2(chi2.isf(alpha / 16, 3); 3, 30)
    times the other seven rows' (1 - alpha / 16), against the global test's at alpha / 2 over
    24 dof; the larger is the figure."""
    from scipy.stats import ncx2

    m, alpha = 8, 1e-3
    cs = np.zeros(m)
    cs[3] = 30 / 1_000
    got = T.sharp.replica_power(np.full(m, 1_000), cs, np.zeros(m), np.full(m, 3), alpha)
    row = float(ncx2.cdf(chi2.isf(alpha / (2 * m), 3), 3, 30.0))
    per_rows = 1 - row * (1 - alpha / (2 * m)) ** (m - 1)
    glob = float(ncx2.sf(chi2.isf(alpha / 2, 3 * m), 3 * m, 30.0))
    assert got == pytest.approx(max(per_rows, glob), rel=1e-9)
    assert per_rows > glob  # the per-row test decides here


# ----------------------------------------------------------------------------- chi-square


def test_row_chi_square_normalises_float_laws():
    """Mutant 111. Expected counts are n probs / sum(probs): a law handed with a common factor
    (unnormalised float rows) gives the same test. Exact values: 30 and 70 of 100 against
    (0.3, 0.7) scaled by 3 is a statistic of 0 and p-value 1; 40 and 60 is
    (10^2 / 30 + 10^2 / 70) = 100/21 with 1 dof."""
    probs = np.array([0.3, 0.7])
    for scale in (1.0, 3.0, 0.5):
        t = T.stats.row_chi_square(np.array([30, 70]), probs * scale, 100)
        assert t.statistic == pytest.approx(0.0, abs=1e-12) and t.dof == 1
        assert t.p_value == pytest.approx(1.0)
        t = T.stats.row_chi_square(np.array([40, 60]), probs * scale, 100)
        assert t.statistic == pytest.approx(100 / 21, rel=1e-12)
        assert t.p_value == pytest.approx(float(chi2.sf(100 / 21, 1)), rel=1e-12)
    # a float law summing to 1 - 1e-3 (a float32 row, say) is the same law renormalised
    p = np.array([0.2, 0.2, 0.3, 0.299])
    obs = np.array([210, 190, 300, 300])
    a = T.stats.row_chi_square(obs, p, 1_000)
    b = T.stats.row_chi_square(obs, p / p.sum(), 1_000)
    assert a.statistic == pytest.approx(b.statistic, rel=1e-12)


# ----------------------------------------------------------------------------- batches


def neighbours_bonus_sampler(drafts, q, p, generator):
    """Planted bug: a batch-offset error in the bonus token. Block verification, except that
    after all L drafts are accepted Y is drawn from the batch's previous row's p_L (row i - 1,
    cyclically). On rows without zeros every output stays possible: only the law at tau = L
    moves."""
    tau, y = make_sampler("block")(drafts, q, p, generator)
    L = drafts.shape[1]
    other = torch.multinomial(torch.roll(p[:, L], 1, 0), 1, generator=generator)[:, 0]
    return tau, torch.where(tau == L, other, y)


def test_law_mode_interleaves_rows_so_a_batch_offset_is_caught():
    """Mutant 112. A sampler that draws each batch row's bonus token from its neighbour's row is
    wrong on every row whose neighbour is another draft row. The kit hands the draft rows
    interleaved (shuffled), so neighbours differ almost always and the check fails; handed in
    blocks of one draft row each, only the block edges (15 among 20,000 samples) would differ.
    The instances are prefix-dependent float rows without zeros, so the bug's outputs are all
    possible (no single sample fails the check whatever the order). Control: the correct
    sampler passes with the same seed (false-alarm rate alpha = 1e-3 under a fresh seed); the
    planted bug's p-value is below 1e-12 here, so a fresh seed would not save it either."""
    from spectheory.inputs.random_instances import random_instance

    insts = [random_instance(3, 2, 5), random_instance(3, 3, 6)]
    for inst in insts:  # no zeros: every output of the planted bug stays possible
        for table in inst.target.tables:
            assert (np.asarray(table, dtype=float) > 0).all()
    rep = check_sampler(neighbours_bonus_sampler, "block", insts, samples=20_000, seed=0)
    assert not rep.passed and rep.p_value < 1e-12, str(rep)
    assert not any("fell on" in n for n in rep.notes), str(rep)
    assert check_sampler(make_sampler("block"), "block", insts, samples=20_000, seed=0).passed


def test_point_mass_figure_comes_from_the_row_with_the_fewest_samples():
    """Mutants 113 and 127. Greedy rows (every row a point mass): the detection figure is
    1 - 0.1^(1/n) for the smallest row count n. 3,201 samples over the 32 default draft rows
    give one row 101 samples and the others 100: the figure is that of 100 (the guarantee must
    hold for every row), not 101."""
    from spectheory.inputs.processing import parse_sampling, process_rows

    sp = parse_sampling("temperature=0")
    tok = make_sampler("token")

    def greedy(drafts, q, p, generator):
        return tok(drafts, q, process_rows(p, sp), generator)

    rep = check_sampler(greedy, "token", samples=3_201, sampling="temperature=0")
    assert rep.passed and rep.dof == 0
    assert rep.min_detectable_tv == pytest.approx(1 - 0.1 ** (1 / 100), rel=1e-12)
    assert rep.min_detectable_tv > 1 - 0.1 ** (1 / 101)
    # mutant 127: the budget's plan states the same figure before the run
    point = [np.array([0.0, 1.0, 0.0])] * 32
    assert T.budget.planned_tv(point, 3_201, ALPHA) == rep.min_detectable_tv


def test_greedy_step_figure_comes_from_the_instance_with_the_fewest_samples():
    """Mutant 128. check_step under greedy decoding (every instance's law one sequence):
    2,001 samples over the two default instances give 1,001 and 1,000; the figure stated is
    1 - 0.1^(1/1000), that of the instance with fewer samples."""
    rep = T.check_step(T.vllm_v1_step, samples=2_001, sampling="temperature=0",
                       draft_sampling="temperature=0")
    assert rep.passed and rep.dof == 0
    assert rep.min_detectable_tv == pytest.approx(1 - 0.1 ** (1 / 1_000), rel=1e-12)
    assert any("n >= 1,000" in n for n in rep.notes)


# ----------------------------------------------------------------------------- pytest plugin


def _kit(**options):
    return importlib.import_module("spectheory.testing.pytest_plugin").Kit(**options)


def test_plugin_options_never_override_a_calls_explicit_seed_alpha_or_samples():
    """Mutants 114, 115, 116. The fixture's options (--spectheory-samples/-alpha/-seed) fill
    only what a call leaves out: a call with explicit samples, alpha and seed gives the very
    report check_sampler gives with those arguments (same statistic, bit for bit), whatever
    the options; the options' seed would give another statistic (asserted, so the comparison
    has teeth). The fixture raises when a check fails: the correct sampler passes at seeds 1
    and 7 (fixed; a fresh seed would fail with probability alpha = 0.002)."""
    s = make_sampler("token")
    direct = check_sampler(s, "token", samples=3_000, alpha=0.002, seed=1)
    other_seed = check_sampler(s, "token", samples=3_000, alpha=0.002, seed=7)
    assert other_seed.statistic != direct.statistic
    for options in ({"samples": 5_000, "alpha": 0.01, "seed": 7},
                    {"budget_s": 30.0, "alpha": 0.01, "seed": 7}):
        kit = _kit(**options)
        rep = kit.sampler(s, "token", samples=3_000, alpha=0.002, seed=1)
        assert (rep.samples, rep.alpha) == (3_000, 0.002), options
        assert rep.statistic == direct.statistic and rep.dof == direct.dof, options
        # given by position, the same
        rep = kit.sampler(s, "token", None, 3_000, 0.002, "law", 1)
        assert (rep.samples, rep.alpha, rep.statistic) == (3_000, 0.002, direct.statistic)
    # and what a call leaves out comes from the options
    rep = _kit(samples=3_000, alpha=0.002, seed=7).sampler(s, "token")
    assert (rep.samples, rep.alpha, rep.statistic) == (3_000, 0.002, other_seed.statistic)


# ----------------------------------------------------------------------------- engine processing


def test_sglang_top_p_pivot_where_the_cumulative_sum_equals_one_minus_top_p():
    """Mutant 117. SGLang's top_p_renorm_prob sorts ascending and takes as pivot the first
    index whose cumulative sum reaches 1 - top_p (searchsorted, right=False). Dyadic float32
    rows make every sum exact: (1/8, 3/8, 1/2) at top_p = 7/8 has cumulative sums
    (1/8, 1/2, 1), the first equal to 1 - top_p, so the pivot is 1/8 and every token stays
    (the row unchanged); at top_p = 1/2 the pivot is 3/8 (the sum 1/2 equals 1 - top_p
    there), keeping (0, 3/7, 4/7)."""
    renorm = importlib.import_module("spectheory.testing.engines.engine_sampling").sglang_renorm
    row = torch.tensor([[0.125, 0.375, 0.5], [0.375, 0.5, 0.125]], dtype=torch.float32)
    out = renorm(row, None, 0.875)
    assert torch.equal(out, row)
    out = renorm(row, None, 0.5)
    want = torch.tensor([[0.0, 3 / 7, 4 / 7], [3 / 7, 4 / 7, 0.0]], dtype=torch.float32)
    assert torch.allclose(out, want, rtol=0, atol=1e-7)
    assert float(out[0, 0]) == 0.0 and float(out[1, 2]) == 0.0


# ----------------------------------------------------------------------------- coins mode


def shifted_coin_sampler(convention: str, shift: float):
    """A sampler equal to the reference except that it compares u - shift with the acceptance
    thresholds (u / 2 where that is smaller, so a coin stays positive): it decides differently
    from the reference only where a threshold lies within ``shift`` below the coin, the way
    an engine's own float rounding moves its thresholds."""
    ref = reference_coin_sampler(convention)

    def sampler(drafts, q, p, uniforms):
        u = uniforms.clone()
        L = drafts.shape[1]
        u[:, :L] = torch.maximum(u[:, :L] - shift, u[:, :L] / 2)
        return ref(drafts, q, p, u)

    return sampler


@pytest.mark.parametrize("convention", ["token", "block"])
def test_coins_mode_skips_a_near_threshold_coin_at_the_deciding_position(convention):
    """Mutant 118. Coins mode compares decisions on the same uniforms and skips a row whose
    coin lies within ``tol`` of a threshold it decides; under the token rule the positions up
    to tau + 1 decide (tau + 1 is the rejected one). A sampler whose thresholds are moved by
    up to 0.01 passes at tol = 0.02 (every differing row is within tol at a deciding
    position) and fails at tol = 0 (a planted bug caught: about one row in a hundred differs).
    Deterministic: coins mode has no false alarms."""
    s = shifted_coin_sampler(convention, 0.01)
    rep = check_sampler(s, convention, samples=4_000, mode="coins", tol=0.02)
    assert rep.passed, str(rep)
    assert rep.ambiguous > 0
    assert not check_sampler(s, convention, samples=4_000, mode="coins", tol=0.0).passed


# ----------------------------------------------------------------------------- other vocabularies


def _table(rows, V):
    from spectheory.inputs.models import TableModel

    return TableModel(V, (np.array([[Fraction(x) for x in rows]], dtype=object),))


def _draft_beyond_the_target():
    """Target vocabulary [a, b] with p = (1/3, 2/3); draft vocabulary [a, b, ab] with
    q = (1/2, 1/4, 1/4): the draft's "ab" is no target token, so the intersection {a, b} holds
    3/4 of the draft's mass and TLI's q on it is (2/3, 1/3). Context-independent rows; p and
    q tie nowhere, so every min below is decided by one side."""
    from spectheory.inputs.tokenizers import HeteroInstance, make_tokenizer

    return HeteroInstance("ab", make_tokenizer(["a", "b"], "ab"),
                          make_tokenizer(["a", "b", "ab"], "ab"), _table(["1/3", "2/3"], 2),
                          _table(["1/2", "1/4", "1/4"], 3), 1, 2)


def test_tli_first_token_acceptance_renormalises_q_on_the_intersection():
    """Mutant 119. TLI accepts the first token with probability sum_{t in I} min(p(t), q'(t)),
    q' = q restricted to the intersection and renormalised: min(1/3, 2/3) + min(2/3, 1/3)
    = 2/3 (without renormalising: 1/3 + 1/4 = 7/12). Cross-check with TLI's exact block law
    (draft_length 1): the blocks of two target tokens are the accepted first tokens."""
    from spectheory.verifiers.hetero import first_token_acceptance, tli_block

    inst = _draft_beyond_the_target()
    assert first_token_acceptance(inst)["tli"] == Fraction(2, 3)
    block = tli_block(inst, ())
    assert sum(block.values()) == 1
    assert sum(w for b, w in block.items() if len(b) == 2) == Fraction(2, 3)


def test_first_token_settled_needs_a_proper_extension():
    """Mutant 120. The first token of encode(text + x) is the same for every continuation x
    unless a vocabulary string extends text properly (is longer and starts with it); a string
    equal to text does not. Vocabulary [a, b, ab, ba, bab]: "a" is unsettled ("ab"), "b"
    unsettled ("ba"), "ab" settled (nothing longer starts with it), "bab" settled (itself
    only), "ba" unsettled ("bab"). Checked by longest-match encoding of every continuation of
    up to three characters."""
    import itertools

    from spectheory.inputs.tokenizers import make_tokenizer

    tok = make_tokenizer(["a", "b", "ab", "ba", "bab"], "ab")
    want = {"a": False, "b": False, "ab": True, "ba": False, "bab": True, "aa": True}
    for text, settled in want.items():
        assert tok.first_token_settled(text) is settled, text
        firsts = {tok.encode(text + "".join(x))[0]
                  for n in range(4) for x in itertools.product("ab", repeat=n)}
        # a settled text's first token never changes with what follows
        assert (len(firsts) == 1) >= settled, text


# ----------------------------------------------------------------------------- relaxed rules


def test_kl_divergences_of_a_rule_go_from_the_output_to_the_target():
    """Mutant 122. ``divergences`` reports KL(output || target) = sum_o o log(o / t) and the
    reverse one under its own key; on a lossy rule's exact laws the two differ, so each is
    recomputed here from the laws by that definition (and they must differ by more than
    their error bounds)."""
    import spectheory as st
    from spectheory.cli.report import toy_instance
    from spectheory.verifiers import relaxed as R

    def kl(a, b):  # sum a log(a / b), inf where a > 0 = b
        if ((a > 0) & (b == 0)).any():
            return math.inf
        return float(sum(x * math.log(x / y) for x, y in zip(a, b) if x > 0))

    inst = toy_instance(exact=True)  # p = (1/3, 2/3), q = (2/3, 1/3), L = 2: no zeros
    for spec in (R.additive_acceptance(Fraction(1, 4)),  # output misses some targets: one inf
                 R.sglang_threshold_acceptance(Fraction(1, 2), Fraction(1, 2))):
        res = st.analyze(inst, spec, laws=True)
        o = np.array([float(x) for x in np.asarray(res.output_law).reshape(-1)])
        t = np.array([float(x) for x in np.asarray(res.target_law).reshape(-1)])
        assert res.tv_to_target > 0
        fwd, rev = kl(o, t), kl(t, o)
        assert math.isfinite(fwd) and not abs(fwd - rev) < 1e-6, spec.name
        d = R.divergences(res)
        assert d["kl_output_target"] == pytest.approx(fwd, rel=1e-9, abs=1e-15), spec.name
        assert d["kl_target_output"] == pytest.approx(rev, rel=1e-9, abs=1e-15), spec.name


def test_sglang_tree_accepts_a_child_whose_probability_equals_threshold_single():
    """Mutant 123. SGLang's kernel accepts c_j outright when p(t_j | u) >= threshold_single
    (speculative_sampling.cuh). Exact rows p = (1/4, 1/2, 1/4), children tokens 0 then 1,
    threshold_single = 1/2, threshold_acc = 1: child 0 takes c_1 = 1/4, child 1 (p = 1/2, at
    the threshold) all that is left, 3/4, and nothing is left to reject; were the comparison
    strict, child 1 would take only c_2 - c_1 = 1/2 and 1/4 would go to rejection."""
    from spectheory.verifiers.sglang_tree import sglang_tree_rule

    member = np.ones((1, 1, 2), dtype=np.int64)
    tok = np.array([[0, 1]])
    p = np.array([[[Fraction(1, 4), Fraction(1, 2), Fraction(1, 4)]]], dtype=object)
    acc, none, _ = sglang_tree_rule(member, tok, None, p, Fraction(1, 2), 1)
    assert acc.tolist() == [[[Fraction(1, 4), Fraction(3, 4)]]] and none.tolist() == [[0]]
    # float rows, the same numbers (binary fractions)
    acc, none, _ = sglang_tree_rule(torch.ones(1, 1, 2, dtype=torch.long), torch.tensor([[0, 1]]),
                                    None, torch.tensor([[[0.25, 0.5, 0.25]]],
                                                       dtype=torch.float64), 0.5, 1)
    assert acc.tolist() == [[[0.25, 0.75]]] and none.tolist() == [[0.0]]
    # just below the threshold the running sum decides: c_2 - c_1 = 1/2
    acc, none, _ = sglang_tree_rule(member, tok, None, p, Fraction(1, 2) + Fraction(1, 100), 1)
    assert acc.tolist() == [[[Fraction(1, 4), Fraction(1, 2)]]]
    assert none.tolist() == [[Fraction(1, 4)]]


# ----------------------------------------------------------------------------- KL frontier


def test_kl_frontiers_pinsker_bound_is_the_tv_frontier_at_sqrt_kl_over_two():
    """Mutant 124. Pinsker: TV <= sqrt(KL / 2), so every verifier within KL budget 0.02 is
    within TV 0.1 and the TV frontier at 0.1 bounds the KL frontier above; the bound stated is
    that LP's optimum at that radius (sqrt(2 KL) = 0.2 is the L1 distance's radius, a looser
    and misnamed bound)."""
    pytest.importorskip("cvxpy")
    import spectheory as st
    from spectheory.lp.frontier import frontier_lp

    inst = st.random_instance(2, 2, 1, denominator=12)
    res = frontier_lp(inst, kl=0.02, rules=())
    pins = [b for b in res.details["bounds"]["checked"] if b.source.startswith("TV frontier")]
    assert len(pins) == 1 and pins[0].side == "upper"
    assert "sqrt(KL / 2) = 0.1 " in pins[0].source + " "
    tv = frontier_lp(inst, tv=0.1, rules=())
    wider = frontier_lp(inst, tv=0.2, rules=())
    assert wider.optimum > tv.optimum + 1e-6  # the radius shows in the bound
    assert float(pins[0].value) == pytest.approx(float(tv.optimum), rel=1e-9)
    assert res.optimum <= float(pins[0].value) + 1e-6


def test_kl_frontier_budget_is_kl_of_the_output_to_the_target():
    """Mutant 129. The KL frontier maximises E[tau + 1] over verifiers with
    KL(output || target) <= budget: a rule whose exact output law has that divergence within
    the budget lies at or below the optimum. The additive rule (a_i = min(1, p/q + 1/4)) on
    the toy instance puts no mass on some sequences of positive target probability: its
    KL(output || target) is finite, the reverse infinite, so a program that constrained the
    reverse divergence could not reach it."""
    pytest.importorskip("cvxpy")
    import spectheory as st
    from spectheory.cli.report import toy_instance
    from spectheory.lp.frontier import frontier_lp
    from spectheory.verifiers import relaxed as R

    inst = toy_instance(exact=True)
    rule = st.analyze(inst, R.additive_acceptance(Fraction(1, 4)), laws=True)
    d = R.divergences(rule)
    assert math.isfinite(d["kl_output_target"]) and d["kl_target_output"] == math.inf
    budget = d["kl_output_target"] + d["kl_output_target_err"] + 1e-9
    res = frontier_lp(inst, kl=budget, rules=())
    assert res.optimum >= float(rule.block_efficiency) - 1e-6
    assert res.details["kl_of_point"] <= budget + 1e-7


# ----------------------------------------------------------------------------- claims ledger


def test_claims_only_matches_sources_and_ids_case_insensitively():
    """Mutants 125 and 130. ``spectheory claims --only TEXT`` selects the claims whose id or source
    contains TEXT, ignoring case: every claim of a source is selected by the source's text
    (in upper case too), and an id's text selects that claim."""
    from spectheory.lp import claims

    rows = claims.ledger()
    for source in sorted({c.source for c in rows}):
        want = {c.id for c in rows if c.source == source}
        for text in (source, source.upper()):
            got = {c.id for c in claims.select(text)}
            assert want <= got, text
            assert all(text.lower() in c.id.lower() or text.lower() in c.source.lower()
                       for c in claims.select(text)), text
    for c in rows:  # mutant 130: an id in upper case still selects its claim
        assert c.id in {x.id for x in claims.select(c.id.upper())}


def test_claim_hypotheses_bound_the_block_length_both_ways():
    """Mutant 126. A row's hypotheses list the block lengths its source states: a computation
    at any other L (above the largest as well as below the smallest) lies outside them, and
    check_row refuses a finding whose facts do."""
    import dataclasses

    from spectheory.lp import claims
    from spectheory.lp.claims.common import Fact, Finding, Hypotheses

    hyp = Hypotheses(("iid",), K=(2,), L=(2, 3))
    assert hyp.admits(Fact("iid", 2, 2, True, True)) is None
    assert hyp.admits(Fact("iid", 2, 3, True, True)) is None
    for L in (1, 4, 7):
        why = hyp.admits(Fact("iid", 2, L, True, True))
        assert why is not None and f"L = {L}" in why, L
    row = dataclasses.replace(claims.ledger()[0], hypotheses=hyp, kind="theorem")
    ok = Finding("1", "confirmed", "toy", (Fact("iid", 2, 3, True, True),))
    claims.check_row(row, ok)
    with pytest.raises(AssertionError, match="outside the row's hypotheses"):
        claims.check_row(row, Finding("1", "confirmed", "toy", (Fact("iid", 2, 4, True, True),)))
