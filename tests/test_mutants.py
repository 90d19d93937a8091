"""The kit of real bugs (spectheory.testing.mutants): every replica is caught by its stated check.

Law mutants are checked against exact values derived independently (by hand in the comments, or
by the naive rational reference in tests/reference_rational.py with the buggy rule written out
again), against the numbers published with the bug reports, and against controls where the bug
must be invisible (context-independent rows, K = 2 traversal, float32 skew). Sampler checks run
at the family-wise false-alarm rate alpha = 1e-3 of check_sampler / check_proposal with fixed
seeds, and each states its power against the mutant's bias (min_detectable_tv below the bias).
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from spectheory import analyze, check_lossless, instance_from_dict, random_instance
from spectheory.registry import VerifierSpec
from spectheory.testing.mutants import (CLAIMS, KINDS, MUTANTS, VERDICTS, coins, draft_q,
                                        formulas, gbv_reference, proposals, two_token_example)
from spectheory.testing.checks.sampler import DraftRows, check_proposal, check_sampler

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
    if MUTANTS[name].kind == "proposal":  # the fixed engine (the drafts' law handed) passes
        assert c.control.lossless and not c.proposal.passed
    if MUTANTS[name].kind == "acceptance":  # lossless exactly, and accepts less than the fix
        assert c.tv == 0 and c.control.tv_to_target == 0
        assert c.accepted < c.accepted_fixed
        assert MUTANTS[name].function.lossless


@pytest.mark.parametrize("name", list(CLAIMS))
def test_every_claim_check_gives_its_recorded_verdict(name):
    claim = CLAIMS[name]
    assert claim.verdict in VERDICTS and claim.project and claim.issue and claim.statement
    r = claim.check()
    assert r.verdict == claim.verdict, (name, r.summary)
    assert r.summary and r.numbers


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
        assert not c.proposal.passed and c.control.lossless  # the fixed engine passes
        assert c.proposal.min_detectable_tv < 0.0103 or name != "deepspec-31-bf16-vs-f32"


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
    from spectheory.testing.checks.sampler import reference_coin_sampler
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


# ----------------------------------------------------------------------------- told about q


def _accepted_without_q(inst):
    """E[tau] of verifying drafts sampled from the instance's q as if q were one-hot, written
    out: sum over i of P(X_1..X_i all accepted) = sum_{x^i} prod_j q(x_j|x^{j-1}) p(x_j|x^{j-1})."""
    V, L = inst.vocab_size, inst.block_length
    tq, tp = inst.draft.to_exact(), inst.target.to_exact()
    total = Fraction(0)
    for i in range(1, L + 1):
        for x in itertools.product(range(V), repeat=i):
            w = Fraction(1)
            for j in range(i):
                w *= tq.conditional(x[:j])[x[j]] * tp.conditional(x[:j])[x[j]]
            total += w
    return total


def _argmax(row):
    return max(range(len(row)), key=lambda t: (row[t], -t))  # ties to the lowest id


def _greedy_chain(inst):
    """The argmax chain of the draft model and its target probabilities p(x_i | x^{i-1})."""
    x, ps = (), []
    for _ in range(inst.block_length):
        t = _argmax(list(inst.draft.to_exact().conditional(x)))
        ps.append(inst.target.to_exact().conditional(x)[t])
        x += (t,)
    return x, ps


def test_draft_probs_none_is_lossless_and_accepts_sum_q_p():
    inst = random_instance(3, 3, 0, denominator=60)
    a = analyze(inst, draft_q.VLLM_DRAFT_PROBS_NONE)
    n = analyze(inst, "ngram")  # the n-gram rule it falls back to, registered independently
    assert a.tau_pmf == n.tau_pmf and (a.output_law == n.output_law).all()
    assert a.tv_to_target == 0 and a.expected_accepted == _accepted_without_q(inst)
    c = MUTANTS["vllm-40149-draft-probs-none"].catch()
    assert c.accepted == Fraction(845606161, 1555200000) == a.expected_accepted
    assert c.accepted_fixed == Fraction(64237, 54000) == analyze(inst, "token").expected_accepted
    # no loss where every row has q p = min(p, q): a greedy target, or point-mass drafts
    g = dict(sampling="temperature=0")
    assert analyze(inst, draft_q.VLLM_DRAFT_PROBS_NONE, **g).expected_accepted == \
        analyze(inst, "token", **g).expected_accepted
    chain = draft_q.greedy_chain_instance(inst)
    assert analyze(chain, draft_q.VLLM_DRAFT_PROBS_NONE).expected_accepted == \
        analyze(chain, "token").expected_accepted


def test_zero_draft_probs_reproduces_the_sglang_numbers():
    ex = draft_q.sglang_example()  # the #10308 example
    # sampled drafts without q: sum q p = 0.42 + 0.04 + 0.005 + 0.005; with q: sum min(p, q)
    assert analyze(ex, draft_q.SGLANG_ZERO_DRAFT_PROBS).expected_accepted == Fraction(47, 100)
    assert analyze(ex, "token").expected_accepted == Fraction(9, 10)
    greedy = analyze(draft_q.greedy_chain_instance(ex), draft_q.SGLANG_ZERO_DRAFT_PROBS)
    assert greedy.expected_accepted == Fraction(3, 5) and greedy.tv_to_target == 0  # p(argmax q)
    # a prefix-dependent chain: E[tau] = sum_i p(x^i) along the draft's argmax chain, lossless
    inst = random_instance(3, 3, 1, denominator=60)
    x, ps = _greedy_chain(inst)
    res = analyze(draft_q.greedy_chain_instance(inst), draft_q.SGLANG_ZERO_DRAFT_PROBS)
    assert res.expected_accepted == ps[0] + ps[0] * ps[1] + ps[0] * ps[1] * ps[2]
    assert res.tv_to_target == 0
    a, b = analyze(inst, draft_q.SGLANG_ZERO_DRAFT_PROBS), analyze(inst, "ngram")
    assert a.tau_pmf == b.tau_pmf and (a.output_law == b.output_law).all()
    c = MUTANTS["sglang-9877-zero-draft-probs"].catch()
    assert (c.accepted, c.accepted_fixed) == (Fraction(3, 5), Fraction(9, 10))


def test_eagle_posterior_is_the_topk_rule_and_lossless():
    from spectheory.engine.analysis import analyze_tree

    inst = random_instance(3, 2, 0, denominator=60)
    for shape in ("1,1", "2,1", "2,2"):
        a = analyze_tree(inst, draft_q.EAGLE_Q_ONE, shape, drafting="topk")
        b = analyze_tree(inst, "topk", shape, drafting="topk")
        assert a.tv_to_target == 0 and a.tau_pmf == b.tau_pmf
        assert (a.output_law == b.output_law).all()
    # any proposer: children drawn i.i.d. from q (repeats included) are verified losslessly too
    other = random_instance(3, 2, 1, denominator=12)
    assert analyze_tree(other, draft_q.EAGLE_Q_ONE, "2,1", drafting="iid").tv_to_target == 0


def test_eagle_329_requested_rule_on_top_k_drafts_is_lossy():
    inst = random_instance(3, 2, 0, denominator=60)
    (x1, x2), (p1, p2) = _greedy_chain(inst)
    q = inst.draft.to_exact()
    # here both drafted ratios p/q are >= 1, so the chain is always accepted and the output is
    # (x1, x2, Y ~ p(.|x1 x2)): TV = 1 - p(x1) p(x2|x1)
    assert p1 >= q.conditional(())[x1] and p2 >= q.conditional((x1,))[x2]
    c = MUTANTS["eagle-329-requested-q-on-topk"].catch()
    assert c.tv == 1 - p1 * p2 == Fraction(11, 18)
    assert c.control.lossless  # EAGLE's own qx = 1 rule on the (2, 1) top-k tree
    assert not c.proposal.passed and c.proposal.min_detectable_tv < 0.2
    assert CLAIMS["eagle-329-not-lossless"].check().verdict == "refuted"


def test_fp16_underflow_accept_exact_tv_and_controls():
    u = draft_q.underflow_instance()
    rep = check_lossless(draft_q.MLXCEL_FP16_UNDERFLOW, u)
    # root: token 2 (q = 1e-8, 0 in float16) is emitted with q(2) instead of p(2) = 1e-9;
    # after token 0 (reached with 1/2): q(2|0) = 2e-8 (0 in float16) against p(2|0) = 0
    assert rep.tv == Fraction(9, 10**9) + Fraction(1, 2) * Fraction(2, 10**8)
    assert rep.offending[0] == 0
    for dtype in (torch.float32, torch.bfloat16):  # 8 exponent bits: nothing underflows
        spec = VerifierSpec("x", functools.partial(draft_q.fp16_underflow_accept, dtype=dtype))
        assert check_lossless(spec, u).lossless
    assert check_lossless(draft_q.MLXCEL_FLOAT32_CONTROL, u).tv == 0
    # the float16 boundary: 2^-25 rounds to 0 (ties to even), 2^-25 (1 + 2^-20) does not
    x = torch.tensor([2.0**-25, 2.0**-25 * (1 + 2.0**-20), 1e-8, 6e-8], dtype=torch.float64)
    assert draft_q.fp16_underflowed(x).tolist() == [True, False, True, False]
    exact = np.array([Fraction(1, 10**8), Fraction(1, 2)], dtype=object)
    assert draft_q.fp16_underflowed(exact).tolist() == [True, False]
    # float64 on 198 tail tokens (q = 2e-8, p = 2e-9): TV = 198 (2e-8 - 2e-9)
    tail = check_lossless(draft_q.MLXCEL_FP16_UNDERFLOW, draft_q.underflow_tail_instance())
    assert not tail.lossless and tail.tv == pytest.approx(198 * 1.8e-8, rel=1e-6)


def _topk_row(row, k):
    """Top-k as the engines' threshold masks: keep the tokens with fewer than k strictly larger."""
    kept = [v if sum(w > v for w in row) < k else Fraction(0) for v in row]
    return [v / sum(kept) for v in kept]


def _raw_q_reference_tv(raw, k):
    """Drafts from top-k(q), token verification with the raw q, target top-k(p): the TV to the
    processed target's law, enumerated with the rule of reference_rational.token_law."""
    from reference_rational import token_law

    V, L = raw.vocab_size, raw.block_length
    tq, tp = raw.draft.to_exact(), raw.target.to_exact()
    P = lambda pre: _topk_row(list(tp.conditional(pre)), k)  # noqa: E731
    out, target = {}, {}

    def extend(acc, seq, mass):
        if len(seq) == L + 1:
            acc[seq] = acc.get(seq, Fraction(0)) + mass
            return
        for y, v in enumerate(P(seq)):
            if v:
                extend(acc, seq + (y,), mass * v)

    extend(target, (), Fraction(1))
    for x in itertools.product(range(V), repeat=L):
        w = Fraction(1)
        for i in range(L):
            w *= _topk_row(list(tq.conditional(x[:i])), k)[x[i]]
        if w == 0:
            continue
        stop, corr = token_law(x, [list(tq.conditional(x[:i])) for i in range(L)],
                               [P(x[:i]) for i in range(L + 1)])
        for i in range(L + 1):
            for y in range(V):
                if w * stop[i] * corr[i][y]:
                    extend(out, x[:i] + (y,), w * stop[i] * corr[i][y])
    return _tv(out, target)


def test_raw_q_against_the_processed_target_exact_tv_and_inflation():
    from spectheory.inputs.processing import process_rows

    raw = random_instance(4, 2, 0, denominator=60)
    top2 = dict(sampling="top_k=2", draft_sampling="top_k=2")  # the kit's setting of the mutant
    rep = check_lossless(proposals.reported_q_verifier(raw.draft), raw, **top2)
    assert rep.tv == _raw_q_reference_tv(raw, 2) == Fraction(27525, 161483)
    assert check_lossless("token", raw, **top2).tv == 0  # the processed q handed (the fix)
    assert draft_q.processed_drafting(raw, "top_k=2", handed="raw").tv_to_target == rep.tv
    # on a kept token the ratio p'/q is p'/q' inflated by 1/Z, Z the raw mass top-k keeps
    q = raw.draft.to_exact().conditional(())
    p1 = process_rows(raw.target.to_exact().conditional(())[None, :], "top_k=2")[0]
    q1 = process_rows(q[None, :], "top_k=2")[0]
    Z = sum(v for v, w in zip(q, q1) if w)
    for x in range(4):
        if q1[x]:
            assert p1[x] / q[x] == (p1[x] / q1[x]) / Z and Z < 1


def test_drafting_inside_the_request_set_keeps_the_processed_law_with_the_processed_q():
    insts = [(f"seed {s}", random_instance(4, 2, s, denominator=60)) for s in (0, 1)]
    checks = draft_q.check_draft_in_request_set(insts, ["top_k=2", "top_p=0.8"])
    assert all(c.tv_processed == 0 for c in checks)  # the claim, exactly
    assert all(c.tv_raw_handed > 0 for c in checks)  # the raw q handed: #47932's bug
    # one row, by hand: the target's top-1 is token 0, the draft's token 1; drafting inside the
    # request's top-1 always drafts 1 (E[tau] = 0), drafting from q accepts q(0) = 1/4
    row = instance_from_dict({"vocab_size": 3, "block_length": 1,
                              "target": ["1/2", "1/3", "1/6"], "draft": ["1/4", "1/2", "1/4"]},
                             exact=True)
    (c,) = draft_q.check_draft_in_request_set([("row", row)], ["top_k=1"])
    assert (c.accepted_pr, c.accepted_main, c.tv_processed) == (0, Fraction(1, 4), 0)
    # where the draft's top token is the target's, drafting inside the set accepts it surely
    agree = instance_from_dict({"vocab_size": 3, "block_length": 1,
                                "target": ["1/2", "1/3", "1/6"],
                                "draft": ["1/3", "1/4", "5/12"]}, exact=True)
    (c,) = draft_q.check_draft_in_request_set([("agree", agree)], ["top_k=2"])
    # target top-2 (3/5, 2/5, 0); draft top-2 (4/9, 0, 5/9): sum min = 4/9; from q: 1/3 + 1/4
    assert (c.accepted_pr, c.accepted_main) == (Fraction(4, 9), Fraction(7, 12))
