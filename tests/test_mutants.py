"""The kit of real bugs (spectheory.testing.mutants): every replica is caught by its stated check.

Law mutants are checked against exact values derived independently (by hand in the comments, or
by the naive rational reference in tests/reference_rational.py with the buggy rule written out
again), against the numbers published with the bug reports, and against controls where the bug
must be invisible (context-independent rows, K = 2 traversal, float32 skew). Sampler checks run
at the family-wise false-alarm rate alpha = 1e-3 of check_sampler / check_proposal with fixed
seeds, and each states its power against the mutant's bias (min_detectable_tv below the bias).
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

from spectheory import analyze, check_lossless, instance_from_dict, random_instance
from spectheory.registry import VerifierSpec
from spectheory.testing.mutants import (KINDS, MUTANTS, coins, formulas, gbv_reference,
                                        proposals, two_token_example)
from spectheory.testing.sampler import DraftRows, check_proposal, check_sampler

from reference_rational import reference_analysis


def _tv(a: dict, b: dict):
    keys = set(a) | set(b)
    return sum(abs(a.get(k, 0) - b.get(k, 0)) for k in keys) / 2


# ----------------------------------------------------------------------------- the table


def test_table_has_every_replicated_bug_with_its_citation():
    assert len(MUTANTS) >= 10
    for name, m in MUTANTS.items():
        assert m.name == name and m.kind in KINDS and m.project and m.issue and m.description
        assert m.caught_by and callable(m.catch)
        fn = m.function.function if isinstance(m.function, VerifierSpec) else m.function
        doc = (fn.__doc__ or "") + (getattr(m.function, "paper", "") or "")
        number = m.issue.split()[0].lstrip("#") if m.issue[0] in "#P" else ""
        if m.issue.startswith("PR"):
            number = m.issue.split()[1]
        if number:  # the docstring (or the spec's paper) cites the issue
            assert number in doc, name
        if m.kind == "law":
            assert isinstance(m.function, VerifierSpec) and not m.function.lossless
    assert {m.kind for m in MUTANTS.values()} == set(KINDS)


@pytest.mark.parametrize("name", list(MUTANTS))
def test_every_mutant_is_caught(name):
    c = MUTANTS[name].catch()
    assert c.caught, name
    if MUTANTS[name].kind in ("law", "proposal"):
        assert c.tv > 0 and c.offending is not None
        assert c.output_probability != c.target_probability


# ----------------------------------------------------------------------------- formula errors


def _softmax_residual_rule(x, q_rows, p_rows):
    """Token verification with correction softmax(max(p - q, 0)) (HF #28508), written out."""
    L = len(x)
    stop, corr, reach = [], [], 1.0
    for i in range(L):
        p, q = [float(v) for v in p_rows[i]], [float(v) for v in q_rows[i]]
        a = min(1.0, p[x[i]] / q[x[i]])
        stop.append(reach * (1 - a))
        e = [math.exp(max(pi - qi, 0.0)) for pi, qi in zip(p, q)]
        corr.append([v / sum(e) for v in e])
        reach *= a
    return stop + [reach], corr + [[float(v) for v in p_rows[L]]]


def test_softmax_residual_matches_the_rule_written_out_and_the_published_tv():
    inst = two_token_example()
    _, out, target = reference_analysis(inst, _softmax_residual_rule)
    expected = float(_tv(out, target))
    rep = check_lossless(formulas.SOFTMAX_RESIDUAL, two_token_example(exact=False))
    assert not rep.lossless and rep.tv == pytest.approx(expected, abs=1e-12)
    assert round(float(rep.tv), 3) == 0.139  # HF #28508 on the two-token example
    assert rep.offending == (0, 0, 0)
    # a correct softmax-free residual on the same rows is lossless: the softmax is the bug
    assert check_lossless("token", two_token_example(exact=False)).lossless


def _product_of_two_uniforms_law(x, q_rows, p_rows):
    """L = 2 closed forms for "last accepted position with a running product of uniforms":
    P(U1 U2 <= t) = t - t ln t, and P(U1 <= a, U1 U2 > b) = (a - b) - b ln(a / b) for a > b."""
    pi, w = [], 1.0
    for i in range(2):
        w = min(1.0, w * float(p_rows[i][x[i]]) / float(q_rows[i][x[i]]))
        pi.append(w)
    a, b = pi
    p2 = b - b * math.log(b) if b > 0 else 0.0
    p1 = ((a - b) - b * math.log(a / b) if b > 0 else a) if a > b else 0.0
    corr = []
    for i in range(2):
        res = [max(float(pv) - float(qv), 0.0) for pv, qv in zip(p_rows[i], q_rows[i])]
        corr.append([r / sum(res) for r in res] if sum(res) > 0 else [float(v) for v in p_rows[i]])
    return [1 - p1 - p2, p1, p2], corr + [[float(v) for v in p_rows[2]]]


def test_uniform_product_matches_closed_forms_and_the_published_tv():
    inst = two_token_example()
    _, out, target = reference_analysis(inst, _product_of_two_uniforms_law)
    rep = check_lossless(formulas.LAST_ACCEPTED_UNIFORM_PRODUCT, two_token_example(exact=False))
    assert rep.tv == pytest.approx(float(_tv(out, target)), abs=1e-12)
    assert round(float(rep.tv), 2) == 0.20 and rep.offending == (0, 0, 0)  # vllm-ascend #3794
    # a different variant from spectheory's forward-scan control (TV 0.165)
    assert check_lossless("uniform-product", two_token_example(exact=False)).tv != pytest.approx(
        rep.tv, abs=1e-3)


def test_uniform_product_law_agrees_with_simulation_at_l3():
    """The Poisson-process law for L = 3 against 200,000 simulated runs of the rule (the standard
    error of each probability is below 1.2e-3; 5 standard errors allowed)."""
    g = torch.Generator().manual_seed(3)
    B, L, V = 3, 3, 3
    q = torch.rand(B, L, V, generator=g, dtype=torch.float64) + 0.05
    p = torch.rand(B, L + 1, V, generator=g, dtype=torch.float64) + 0.05
    q, p = q / q.sum(-1, keepdim=True), p / p.sum(-1, keepdim=True)
    d = torch.tensor([[0, 1, 2], [2, 2, 0], [1, 0, 1]])
    law = formulas.last_accepted_uniform_product(d, q, p)
    px = p[:, :L].gather(-1, d.unsqueeze(-1))[..., 0]
    qx = q.gather(-1, d.unsqueeze(-1))[..., 0]
    pis, w = [], torch.ones(B, dtype=torch.float64)
    for i in range(L):
        w = torch.clamp(w * px[:, i] / qx[:, i], max=1.0)
        pis.append(w)
    N = 200_000
    U = torch.rand(N, B, L, generator=g, dtype=torch.float64).cumprod(-1)
    ok = torch.stack(pis, 1).unsqueeze(0) >= U
    tau = (ok * torch.arange(1, L + 1)).max(-1).values
    emp = torch.stack([(tau == i).double().mean(0) for i in range(L + 1)], 1)
    assert (emp - law.stop).abs().max() < 5 * 1.2e-3


def _block_wrong_row_rule(x, q_rows, p_rows):
    """Block verification with S'_i = sum max(w_i p(.|X^{i-1}) - q(.|X^{i-1}), 0) (PR 40819)."""
    L = len(x)
    w = [Fraction(1)]
    for i in range(L):
        r = p_rows[i][x[i]] / q_rows[i][x[i]] if q_rows[i][x[i]] else Fraction(1)
        w.append(min(Fraction(1), w[-1] * r))  # (a draft of probability 0 carries no mass)
    h, corr = [Fraction(1)], []
    for i in range(L):
        res = [max(w[i] * a - b, Fraction(0)) for a, b in zip(p_rows[i], q_rows[i])]
        corr.append([r / sum(res) for r in res] if sum(res) else list(p_rows[i]))
        if i >= 1:
            wrong = [max(w[i] * a - b, Fraction(0)) for a, b in zip(p_rows[i - 1], q_rows[i - 1])]
            S, den = sum(wrong), sum(wrong) + 1 - w[i]
            h.append(S / den if den else Fraction(1))
    h.append(w[L])
    corr.append(list(p_rows[L]))
    stop = []
    for i in range(L + 1):
        v = h[i]
        for j in range(i + 1, L + 1):
            v *= 1 - h[j]
        stop.append(v)
    return stop, corr


def test_block_wrong_row_exact_on_prefix_dependent_rows_invisible_on_independent_ones():
    inst = random_instance(3, 3, 0, denominator=60)
    _, out, target = reference_analysis(inst, _block_wrong_row_rule)
    rep = check_lossless(formulas.BLOCK_WRONG_ROW, inst)
    assert rep.exact and not rep.lossless and rep.tv == _tv(out, target)
    flat = check_lossless(formulas.BLOCK_WRONG_ROW,
                          random_instance(3, 3, 0, denominator=60, context_independent=True))
    assert flat.lossless and flat.tv == 0  # exactly: rows at i - 1 and i coincide
    # the published numbers: V = 3, L = 3 random instance, TV 0.118, first sequence (0,1,1,0)
    pub = check_lossless(formulas.BLOCK_WRONG_ROW, random_instance(3, 3, 0))
    assert round(float(pub.tv), 3) == 0.118 and pub.offending == (0, 1, 1, 0)


def _off_by_one_rule(x, q_rows, p_rows):
    """Token verification accepting X_i with min(1, p(X_i|X^i) / q(X_i|X^{i-1}))."""
    L = len(x)
    stop, corr, reach = [], [], Fraction(1)
    for i in range(L):
        q_x = q_rows[i][x[i]]
        a = min(Fraction(1), p_rows[i + 1][x[i]] / q_x) if q_x else Fraction(1)
        stop.append(reach * (1 - a))
        res = [max(a_ - b_, Fraction(0)) for a_, b_ in zip(p_rows[i], q_rows[i])]
        corr.append([r / sum(res) for r in res] if sum(res) else list(p_rows[i]))
        reach *= a
    return stop + [reach], corr + [list(p_rows[L])]


def test_off_by_one_row_exact_and_invisible_without_context():
    inst = random_instance(2, 2, 0, denominator=60)
    _, out, target = reference_analysis(inst, _off_by_one_rule)
    rep = check_lossless(formulas.TOKEN_OFF_BY_ONE, inst)
    assert rep.exact and rep.tv == _tv(out, target) and rep.tv > Fraction(1, 10)
    for seed in range(3):
        flat = random_instance(3, 3, seed, denominator=60, context_independent=True)
        assert check_lossless(formulas.TOKEN_OFF_BY_ONE, flat).tv == 0
        # float rows: only rounding remains (the ~1e-17 of the published report)
        assert check_lossless(formulas.TOKEN_OFF_BY_ONE, flat.to_float()).tv < 1e-15


# ----------------------------------------------------------------------------- GBV reference code


def test_gbv_tie_rule_one_sixth_and_ordered_enumeration():
    """p = q = (1/2, 1/2), K = 2, L = 1. Selection: path 1's token, uniform. q^G ranks token 1
    first: q^G = (F(0)^2, 1 - F(0)^2) = (1/4, 3/4). X = 0 accepted (ratio 2); X = 1 accepted with
    2/3, else Y = 0 (residual (1/4, 0)). P(Y_1 = 0) = 1/2 + 1/6 = 2/3 against 1/2, so the output
    pair (0, 0) has 1/3 against 1/4 and the TV is 1/6."""
    inst = instance_from_dict({"vocab_size": 2, "block_length": 1, "target": ["1/2", "1/2"],
                               "draft": ["1/2", "1/2"]}, exact=True)
    rep = check_lossless(gbv_reference.GBV_TIE_RULE, inst, paths=2)
    assert rep.tv == Fraction(1, 6) and rep.offending == (0, 0)
    assert rep.output_probability == Fraction(1, 3) and rep.target_probability == Fraction(1, 4)
    # the law depends on the order of the paths: sorted tuples would give another (wrong) answer
    ordered = analyze(inst, gbv_reference.GBV_TIE_RULE, paths=2, symmetric=False)
    assert ordered.tv_to_target == Fraction(1, 6)
    # the published second example: p = (1/4, 3/8, 3/8), q = (1/2, 1/4, 1/4), K = 2, L = 2
    three = MUTANTS["gbv-ref-tie-rule"].catch().control
    assert round(float(three.tv), 3) == 0.066
    # spectheory's GBV (one tie rule for both) is exactly lossless on both
    assert check_lossless("gbv", inst, paths=2).lossless


def test_gbv_capped_ranking_lossy_without_any_exact_tie():
    c = MUTANTS["gbv-ref-capped-ranking"].catch()
    assert c.caught and 0.03 <= float(c.tv) <= 0.07  # the published range on V = 3 examples
    assert c.control.lossless  # the uncapped tie replica: no p/q tie here, so exact


def test_gbv_fp16_skew_bounded_by_the_fallback_event_and_only_in_float16():
    from spectheory.testing.mutants import fp16_instance

    inst = fp16_instance()
    rep = check_lossless(gbv_reference.GBV_FP16_SKEW, inst, paths=3)
    # the fallback happens only where all 3 paths start with token 1: probability (1/500)^3
    assert not rep.lossless and 0 < rep.tv <= Fraction(1, 500) ** 3
    for dtype in (torch.float32, torch.bfloat16):
        spec = VerifierSpec("x", lambda d, q, p, dt=dtype: gbv_reference.gbv_fp16_skew(d, q, p, dt),
                            paths=None)
        assert check_lossless(spec, inst, paths=3).lossless


def test_traversal_first_leaf_from_three_paths_and_post_order_control():
    inst = two_token_example()
    assert check_lossless(gbv_reference.TRAVERSAL_FIRST_LEAF, inst, paths=2).lossless
    rep = check_lossless(gbv_reference.TRAVERSAL_FIRST_LEAF, inst, paths=3)
    assert round(float(rep.tv), 3) == 0.004  # the published 4e-3
    # the same code in post-order is spectheory's traversal-tree, exactly
    for K, i in ((3, inst), (3, random_instance(3, 2, 1, denominator=12))):
        a = analyze(i, gbv_reference.TRAVERSAL_POST_ORDER, paths=K, symmetric=False)
        b = analyze(i, "traversal-tree", paths=K, symmetric=False)
        assert a.tv_to_target == 0 and (a.output_law == b.output_law).all()
        assert a.expected_accepted == b.expected_accepted


def test_first_leaf_order_differs_from_post_order_exactly_from_k3():
    # paths (0, 0), (1, 0), (0, 1): nodes root, 0, 1, 00, 10, 01
    parent = [-1, 0, 0, 1, 2, 1]
    assert gbv_reference.post_order(parent) == [3, 5, 1, 4, 2, 0]
    assert gbv_reference.first_leaf_order(parent) == [3, 4, 2, 5, 1, 0]
    two = [-1, 0, 0, 1, 2]  # K = 2: the orders agree
    assert gbv_reference.post_order(two) == gbv_reference.first_leaf_order(two)


# ----------------------------------------------------------------------------- proposals


def test_greedy_draft_soft_q_gives_three_quarters():
    inst, soft = proposals.greedy_instance()
    res = analyze(inst, proposals.reported_q_verifier(soft))
    first = res.output_law.reshape(2, 2).sum(axis=1)
    assert list(first) == [Fraction(3, 4), Fraction(1, 4)]  # target (3/5, 2/5)
    # handing the verifier the law the drafts really follow (one-hot) is lossless
    assert check_lossless(proposals.reported_q_verifier(inst.draft), inst).lossless
    rep = check_proposal(proposals.greedy_draft_sampler,
                         instances=[torch.tensor([[0.8, 0.2], [0.6, 0.4]], dtype=torch.float64)],
                         samples=2_000)
    assert not rep.passed


def test_topk_and_bf16_controls_pass_when_the_reported_q_is_the_sampling_law():
    inst, raw = proposals.topk_instance()
    assert not check_lossless(proposals.reported_q_verifier(raw), inst).lossless
    assert check_lossless(proposals.reported_q_verifier(inst.draft), inst).lossless
    inst, raw = proposals.bf16_instance()
    assert check_lossless(proposals.reported_q_verifier(raw), inst).tv > 1e-4
    assert check_lossless(proposals.reported_q_verifier(inst.draft), inst).lossless
    # a draft sampler that reports what it samples from passes check_proposal (alpha = 1e-3)
    honest = lambda rows, g=None: (torch.multinomial(proposals.bf16_probs(rows), 1,  # noqa: E731
                                                     generator=g)[:, 0], proposals.bf16_probs(rows))
    rows = torch.softmax(torch.tensor([[0.0, -0.1065, -0.298, -0.522]], dtype=torch.float64), -1)
    assert check_proposal(honest, instances=[rows], samples=50_000).passed


def test_proposal_checks_have_power_against_the_mutants():
    for name in ("hf-47932-raw-vs-topk-q", "deepspec-31-bf16-vs-f32"):
        c = MUTANTS[name].catch()
        assert not c.control.passed
        assert c.control.min_detectable_tv < 0.0103 or name != "deepspec-31-bf16-vs-f32"


# ----------------------------------------------------------------------------- coin level


def test_zero_coin_caught_only_by_pinned_coins():
    c = MUTANTS["sglang-35771-zero-coin"].catch()
    assert c.caught and c.report.mismatch is not None
    mm = c.report.mismatch
    assert mm.got[0] > mm.expected[0]  # it accepted the draft the reference rejects
    assert mm.p[0][mm.drafts[0]] == 0.0  # ... whose target probability is 0
    assert coins.check_zero_coin(coins.zero_coin_coin_sampler) is not None
    # drawn at random its coins are never 0: law mode at 20,000 samples cannot see it
    rows = DraftRows(*(x.repeat(16, *([1] * (x.dim() - 1))) for x in coins.zero_probability_rows()))
    assert check_sampler(coins.zero_coin_sampler, "token", instances=[rows], samples=20_000).passed
    # the reference coin sampler itself rejects a zero-probability draft on the smallest coin
    from spectheory.testing.sampler import reference_coin_sampler
    assert coins.check_zero_coin(reference_coin_sampler("token")) is None


def test_shared_noise_caught_in_law_mode_and_fresh_noise_passes():
    d, q, p = coins.shared_noise_rows()
    rows = DraftRows(d.repeat(64, 1), q.repeat(64, 1, 1), p.repeat(64, 1, 1))
    bad = check_sampler(coins.shared_noise_sampler, "token", instances=[rows], samples=20_000)
    good = check_sampler(coins.independent_noise_sampler, "token", instances=[rows],
                         samples=20_000)
    assert not bad.passed and good.passed
    # power: the bias on these rows (TV 0.056 by a 400,000-draw simulation) exceeds the bias
    # the check detects with 90% power at this size
    assert bad.min_detectable_tv < 0.056


def test_posterior_gumbel_is_gumbel_after_marginalising_the_draft():
    """Drawing X ~ q and then G from its posterior given X must give i.i.d. standard Gumbel
    noise: mean Euler's gamma, variance pi^2 / 6 in every coordinate (60,000 draws; standard
    errors 0.005 and 0.02)."""
    g = torch.Generator().manual_seed(5)
    q = torch.tensor([0.6, 0.3, 0.09, 0.01], dtype=torch.float64)
    N = 60_000
    x = torch.multinomial(q, N, replacement=True, generator=g)
    G = coins.posterior_gumbel(torch.log(q).expand(N, 4), x, g)
    assert (torch.argmax(torch.log(q) + G, dim=-1) == x).all()
    assert (G.mean(0) - 0.5772156649).abs().max() < 0.03
    assert (G.var(0) - math.pi**2 / 6).abs().max() < 0.1


def test_cli_check_names_a_mutant_lossy(tmp_path, capsys):
    from cli_helpers import TOY, run, write

    path = write(tmp_path, TOY)
    code, out, _ = run(["check", path, "--exact", "--paths", "3", "--verifier",
                        "spectheory.testing.mutants.gbv_reference:TRAVERSAL_FIRST_LEAF"], capsys)
    assert code == 1 and "LOSSY" in out and "82/2187 vs target probability 1/27" in out
    code, out, _ = run(["check", path, "--exact", "--paths", "3", "--verifier",
                        "spectheory.testing.mutants.gbv_reference:TRAVERSAL_POST_ORDER"], capsys)
    assert code == 0 and "lossless exactly" in out
