"""The losslessness checker is sound: no verdict from a bad law or a bad tolerance, float verdicts
consistent with their own TV, small planted biases flagged, known non-zero TVs pinned and
re-derived independently, the number of tokens checked reported back, and ``alpha`` of
``random_instance`` effective."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from cli_helpers import TOY, run, write
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_rational import reference_analysis, token_law

import planted_bugs as pb
from spectheory import check_lossless, instance_from_dict, random_instance
from spectheory.runtime.errors import SpectheoryError
from spectheory.engine.analysis import analyze
from spectheory.law import LawError
from spectheory.cli.report import toy_instance
from spectheory.testing import assert_lossless, check_lossless_battery
from spectheory.testing.checks.battery import default_battery
from spectheory.verifiers import block_verification

# ----------------------------------------------------------------------------- bad laws

#: The draft whose law gets corrupted (single path: its lexicographic index is 1*3 + 0 = 3).
DRAFT = (1, 0)
V3L2 = random_instance(3, 2, seed=21, denominator=12)  # prefix-dependent, exact


def _copy(law):
    stop, corr = law
    if isinstance(stop, torch.Tensor):
        return stop.clone(), corr.clone()
    return stop.copy(), corr.copy()


def _corrupt(kind, stop, corr, rows):
    """Corrupt the law on the batch rows ``rows`` (path axis present: [B, K, L+1(, V)])."""
    exact = isinstance(stop, np.ndarray)
    for b in rows:
        if kind == "nan":
            stop[b, 0, 1] = float("nan")
        elif kind == "inf":
            corr[b, 0, 0, 1] = float("inf")
        elif kind == "negative":  # row sums kept: -1/10 at y = 0, the difference moved to y = 2
            old = corr[b, 0, 1, 0]
            corr[b, 0, 1, 0] = -Fraction(1, 10) if exact else -0.1
            corr[b, 0, 1, 2] += old + (Fraction(1, 10) if exact else 0.1)
        elif kind == "stop-sum":
            stop[b, 0, 2] += Fraction(1, 1000) if exact else 1e-6
        elif kind == "correction-sum":
            corr[b, 0, 2] = corr[b, 0, 2] * (Fraction(101, 100) if exact else 1.01)
        elif kind == "not-exact":
            stop[b, 0, 0] = float(stop[b, 0, 0])
    if kind == "shape":
        corr = corr[..., :-1]
    return stop, corr


def _rows_of(drafts):
    d = drafts.tolist() if isinstance(drafts, torch.Tensor) else np.asarray(drafts).tolist()
    return [b for b, paths in enumerate(d) if tuple(paths[0]) == DRAFT]


def corrupted(kind, paths):
    """A verifier whose law is block verification (K = 1) or SpecInfer (K paths) except for one
    defect of class ``kind`` on every draft whose first path is DRAFT."""
    if paths == 1:
        def f(drafts, q, p):
            stop, corr = _copy(block_verification(drafts, q, p))
            exp = (lambda a: a[:, None]) if isinstance(stop, np.ndarray) else \
                (lambda a: a.unsqueeze(1))
            s, c = _corrupt(kind, exp(stop), exp(corr), _rows_of(exp(drafts)))
            return s[:, 0], c[:, 0]
    else:
        def f(drafts, q, p):
            stop, corr = _copy(pb.specinfer_multi(drafts, q, p))
            return _corrupt(kind, stop, corr, _rows_of(drafts))
    return f


FLOAT_KINDS = ["nan", "inf", "negative", "stop-sum", "correction-sum", "shape"]
EXACT_KINDS = ["negative", "stop-sum", "correction-sum", "shape", "not-exact"]
#: (kind, expected index (b, k, tau[, y]) after the batch row, value check)
WHERE = {"nan": ((0, 1), lambda v: math.isnan(v)), "inf": ((0, 0, 1), lambda v: v == math.inf),
         "negative": ((0, 1, 0), lambda v: float(v) == -0.1),
         "correction-sum": ((0, 2), lambda v: abs(float(v) - 1.01) < 1e-12),
         "stop-sum": ((), None), "not-exact": ((0, 0), lambda v: isinstance(v, float)),
         "shape": (None, None)}


@pytest.mark.parametrize("paths", [1, 2])
@pytest.mark.parametrize("exact,kind", [(False, k) for k in FLOAT_KINDS]
                         + [(True, k) for k in EXACT_KINDS])
def test_bad_law_is_a_named_law_error(paths, exact, kind):
    f = corrupted(kind, paths)
    with pytest.raises(LawError) as info:
        check_lossless(f, V3L2, exact=exact, paths=paths)
    err = info.value
    assert err.kind == kind
    tail, ok = WHERE[kind]
    msg = str(err)
    if kind == "shape":
        assert "shape" in msg and "[B, K, L+1, V]" in msg
        return
    if kind == "stop-sum":
        assert "sum to" in msg and err.where is not None
    else:
        assert tuple(err.where[1:]) == tail, err.where
        assert ok(err.value), err.value
        assert f"tau={tail[1]}" in msg  # the message names the position
    assert f"draft {DRAFT}" in msg  # the message names the draft (its first path) ...
    if kind in ("nan", "inf", "negative"):
        assert str(err.value) in msg  # ... and the value
    if paths == 1:  # the per-draft route: batch row = lexicographic index of the draft
        assert err.where[0] == DRAFT[0] * 3 + DRAFT[1]


@pytest.mark.parametrize("kind", FLOAT_KINDS)
def test_battery_reports_bad_law_without_verdict(kind):
    reps = check_lossless_battery(corrupted(kind, 1), [V3L2], exact=False)
    assert not reps[0].lossless and reps[0].tv is None and reps[0].law_error.kind == kind
    assert str(reps[0]).startswith(f"NOT A LAW ({kind})")
    with pytest.raises(AssertionError, match=rf"NOT A LAW \({kind}\) on instance 'instance 0'"):
        assert_lossless(corrupted(kind, 1), [V3L2], exact=False)


@pytest.mark.parametrize("tol", [float("nan"), -1e-12, float("inf"), 1e-2, "x", None])
def test_bad_tolerance_is_refused(tol):
    inst = toy_instance(exact=False)
    with pytest.raises(SpectheoryError):
        check_lossless("block", inst, tol=tol)
    with pytest.raises(SpectheoryError):
        check_lossless("gbv", inst, tol=tol, paths=2)
    with pytest.raises(SpectheoryError):
        check_lossless_battery("block", [inst], tol=tol)
    with pytest.raises(SpectheoryError):  # also where exact mode would not use it
        check_lossless("block", toy_instance(exact=True), tol=tol)


@pytest.mark.parametrize("tol", ["nan", "-1e-12", "inf", "0.5"])
def test_cli_bad_tolerance_exit_2(tmp_path, capsys, tol):
    code, out, err = run(["check", write(tmp_path, TOY), f"--lossless-tol={tol}"], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--lossless-tol" in err


def test_cli_nan_law_module_function_exit_1(tmp_path, capsys):
    code, out, err = run(["check", write(tmp_path, TOY), "--verifier", "planted_bugs:nan_law"],
                         capsys)
    assert code == 1
    assert "NOT A LAW (nan)" in out and "tau=1" in out and "nan" in out
    code, out, _ = run(["check", write(tmp_path, TOY), "--verifier", "planted_bugs:nan_law",
                        "--json"], capsys)
    import json

    obj = json.loads(out)
    assert code == 1 and obj["lossless"] is False and obj["law_error"]["kind"] == "nan"


# ----------------------------------------------------------------------------- float verdicts


@settings(max_examples=60)
@given(V=st.integers(2, 4), L=st.integers(1, 3), seed=st.integers(0, 10**6),
       alpha=st.sampled_from([0.2, 1.0, 5.0]), log_eps=st.floats(-14, -7),
       log_tol=st.floats(-14, -8))
def test_float_verdict_never_contradicts_its_tv(V, L, seed, alpha, log_eps, log_tol):
    inst = random_instance(V, L, seed, alpha=alpha)
    tol = 10**log_tol
    rep = check_lossless(pb.biased_block(10**log_eps), inst, tol=tol)
    assert rep.lossless == (rep.tv <= tol)
    if rep.lossless:
        assert f"within {tol:g}" in str(rep)
    else:
        assert str(rep).startswith("LOSSY") and rep.offending is not None
        assert rep.output_probability != rep.target_probability


def seventy_two():
    """72 float instances: V 2..4, L 1..3, prefix-dependent rows, alpha in {0.3, 1, 3, 10},
    two seeds each."""
    for V, L, alpha, s in itertools.product((2, 3, 4), (1, 2, 3), (0.3, 1.0, 3.0, 10.0), (0, 1)):
        yield random_instance(V, L, seed=100 * V + 10 * L + s, alpha=alpha)


def test_planted_acceptance_bias_is_flagged():
    """1e-9 of stop mass moved on every draft is flagged on all 72 instances; a 1e-11 bias is
    flagged exactly where its TV exceeds the default tolerance 1e-12 (on these instances its TV
    is at least 1.8e-12, so that is all 72)."""
    instances = list(seventy_two())
    assert len(instances) == 72
    flagged = {}
    for eps in (1e-9, 1e-11):
        reps = [check_lossless(pb.biased_block(eps), inst) for inst in instances]
        for r in reps:
            assert r.lossless == (r.tv <= 1e-12)
        flagged[eps] = sum(not r.lossless for r in reps)
        # the planted move changes the output law by at most 2 eps in total variation
        assert all(r.tv <= eps for r in reps)
    assert flagged[1e-9] == 72
    assert flagged[1e-11] == 72
    # unbiased block verification passes all 72 at the same tolerance
    assert all(check_lossless("block", inst).lossless for inst in instances)


# ----------------------------------------------------------------------------- pinned values


def _uniform_product_naive(p, q, L):
    """Exact law of the running product of uniforms on context-independent rows, by a naive loop
    over drafts and the closed forms P(U_1 <= c_1) = c_1 and, for c_2 <= c_1,
    P(U_1 <= c_1, U_1 U_2 <= c_2) = int_0^{c_1} min(1, c_2/u) du = c_2 (1 + ln(c_1/c_2))."""
    assert L == 2
    V = len(p)
    out = {}
    for x in itertools.product(range(V), repeat=L):
        a = [min(1.0, p[t] / q[t]) for t in x]
        c = [1.0, a[0], a[0] * a[1]]
        surv = [1.0, c[1], c[2] * (1 - math.log(a[1])) if a[1] > 0 else 0.0]
        stop = [surv[0] - surv[1], surv[1] - surv[2], surv[2]]
        px = q[x[0]] * q[x[1]]
        for i in range(L + 1):
            if i < L:
                res = [max(c[i] * p[y] - q[y], 0.0) for y in range(V)]
                s = sum(res)
                corr = [r / s for r in res] if s > 0 else list(p)
            else:
                corr = list(p)
            for y in range(V):
                m = px * stop[i] * corr[y]
                seq = x[:i] + (y,)
                for tail in itertools.product(range(V), repeat=L + 1 - len(seq)):
                    mm = m
                    for t in tail:
                        mm *= p[t]
                    out[seq + tail] = out.get(seq + tail, 0.0) + mm
    return out


def test_uniform_product_pinned_and_rederived():
    rep = check_lossless("uniform-product", toy_instance(exact=False))
    assert not rep.lossless
    assert rep.tv == pytest.approx(0.165398, abs=1e-6)
    assert rep.offending == (0, 0, 0)
    assert rep.output_probability == pytest.approx(0.06649746, abs=1e-8)
    assert rep.target_probability == pytest.approx(1 / 27, abs=1e-15)
    # independent: closed form, naive loop
    p, q = [1 / 3, 2 / 3], [2 / 3, 1 / 3]
    naive = _uniform_product_naive(p, q, 2)
    target = {s: math.prod(p[t] for t in s) for s in naive}
    tv = sum(abs(naive[s] - target[s]) for s in naive) / 2
    assert tv == pytest.approx(rep.tv, abs=1e-12)
    assert naive[(0, 0, 0)] == pytest.approx(rep.output_probability, abs=1e-12)


def test_uniform_product_monte_carlo():
    """The rule run with explicit uniforms (4e5 blocks, seed 0) against the exact law: every
    output-sequence frequency within 5 standard errors (family-wise false-alarm rate < 1e-5 over
    8 cells) and the empirical TV within 0.01 of 0.165398 (its bias and spread are about 2e-3)."""
    rng = np.random.default_rng(0)
    n = 400_000
    p, q = np.array([1 / 3, 2 / 3]), np.array([2 / 3, 1 / 3])
    x = (rng.random((n, 2)) >= q[0]).astype(int)  # X_i ~ q
    u = rng.random((n, 2))
    a = np.minimum(1.0, p[x] / q[x])
    c1, c2 = a[:, 0], a[:, 0] * a[:, 1]
    tau = np.where(u[:, 0] > c1, 0, np.where(u[:, 0] * u[:, 1] > c2, 1, 2))
    # corrections: tau = 0: normalise(max(p - q, 0)) = token 1; tau = 1: normalise(max(c1 p - q,
    # 0)) (all-zero residual falls back to p); tau = 2: bonus ~ p
    res1 = np.maximum(c1[:, None] * p[None] - q[None], 0.0)
    s1 = res1.sum(1)
    corr1 = np.where(s1[:, None] > 0, res1 / np.where(s1 > 0, s1, 1)[:, None], p[None])
    y = np.where(tau == 0, 1,
                 np.where(tau == 1, (rng.random(n) >= corr1[:, 0]).astype(int),
                          (rng.random(n) >= p[0]).astype(int)))
    seq = np.zeros((n, 3), dtype=int)
    for b_tau in range(3):
        m = tau == b_tau
        seq[m, :b_tau] = x[m, :b_tau]
        seq[m, b_tau] = y[m]
        for j in range(b_tau + 1, 3):
            seq[m, j] = (rng.random(m.sum()) >= p[0]).astype(int)
    idx = seq[:, 0] * 4 + seq[:, 1] * 2 + seq[:, 2]
    freq = np.bincount(idx, minlength=8) / n
    exact = analyze(toy_instance(exact=False), "uniform-product").output_law
    se = np.sqrt(exact * (1 - exact) / n)
    assert np.all(np.abs(freq - exact) <= 5 * se)
    target = np.array([math.prod(p[int(b)] for b in format(k, "03b")) for k in range(8)])
    assert abs(np.abs(freq - target).sum() / 2 - 0.165398) < 0.01


def _off_by_one_reference(x, q_rows, p_rows):
    return token_law(x, q_rows, p_rows[1:] + p_rows[-1:])


def test_exact_tvs_of_lossy_verifiers_pinned():
    """Exact TVs, re-derived by the naive rational reference (plain loops over drafts): a checker
    that halves the TV, or reports another offending sequence, fails here."""
    inst = default_battery()[1].instance  # prefix-dependent, V = 3, L = 3, exact
    rep = check_lossless(pb.off_by_one_token, inst)
    _, out, target = reference_analysis(inst, _off_by_one_reference)
    tv = sum(abs(out.get(s, 0) - target.get(s, 0)) for s in set(out) | set(target)) / 2
    assert isinstance(rep.tv, Fraction) and rep.tv == tv and tv > 0
    first = min(s for s in set(out) | set(target) if out.get(s, 0) != target.get(s, 0))
    assert rep.offending == first
    assert rep.output_probability == out.get(first, 0)
    assert rep.target_probability == target.get(first, 0)
    # on context-independent rows the same bug is invisible
    assert check_lossless(pb.off_by_one_token, toy_instance()).tv == 0

    # gbv-mismatched-ties, K = 2, L = 2, p = (1/4, 3/8, 3/8), q = (1/2, 1/4, 1/4)
    tie = instance_from_dict({"vocab_size": 3, "block_length": 2,
                              "target": ["1/4", "3/8", "3/8"], "draft": ["1/2", "1/4", "1/4"]},
                             exact=True)
    rep = check_lossless("gbv-mismatched-ties", tie, paths=2)
    assert rep.tv == Fraction(193, 1456)
    assert rep.offending == (0, 1, 0)
    assert (rep.output_probability, rep.target_probability) == (Fraction(15, 896),
                                                                  Fraction(3, 128))
    res = analyze(tie, "gbv-mismatched-ties", paths=2)
    p = [Fraction(1, 4), Fraction(3, 8), Fraction(3, 8)]
    naive_target = [math.prod((p[t] for t in s), start=Fraction(1))
                    for s in itertools.product(range(3), repeat=3)]
    assert list(res.target_law) == naive_target
    assert sum(abs(a - b) for a, b in zip(res.output_law, naive_target)) / 2 == rep.tv


# ----------------------------------------------------------------------------- tokens checked

#: Target p(0|c) >= 1/2 at the root only; prefix-dependent rows below.
SWITCH = {"vocab_size": 2, "block_length": 2,
          "target": {"": ["2/3", "1/3"], "0": ["1/4", "3/4"], "1": ["1/3", "2/3"],
                     "0,0": ["1/6", "5/6"], "0,1": ["2/5", "3/5"], "1,0": ["1/8", "7/8"],
                     "1,1": ["3/7", "4/7"]},
          "draft": {"": ["1/2", "1/2"], "0": ["3/4", "1/4"], "1": ["1/5", "4/5"]}}


def test_n_tokens_is_reported_and_honoured():
    inst = instance_from_dict(SWITCH, exact=True)
    one = check_lossless(pb.context_switch, inst)
    assert one.lossless and one.n_tokens == 3
    # lossless over the first block, lossy once later blocks start from other contexts
    for n in (4, 5):
        rep = check_lossless(pb.context_switch, inst, n_tokens=n)
        assert rep.n_tokens == n and not rep.lossless and len(rep.offending) == n
    with pytest.raises(AssertionError, match="over 4 tokens"):
        assert_lossless(pb.context_switch, [inst], n_tokens=4)
    assert check_lossless("block", inst, n_tokens=5).lossless
    # for a lossy verifier the multi-token TV is another number than the one-block TV
    big = default_battery()[1].instance
    a = check_lossless(pb.off_by_one_token, big)
    b = check_lossless(pb.off_by_one_token, big, n_tokens=5)
    assert (a.n_tokens, b.n_tokens) == (4, 5) and a.tv != b.tv and b.tv > 0
    reps = check_lossless_battery("block", [inst], n_tokens=5)
    assert reps[0].n_tokens == 5 and reps[0].lossless


# ----------------------------------------------------------------------------- alpha


def _mean_entropy(inst):
    rows = np.concatenate([inst.target.level(d) for d in range(inst.block_length + 1)]
                          + [inst.draft.level(d) for d in range(inst.block_length)])
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(rows > 0, rows * np.log(rows), 0.0).sum(1)
    return h.mean()


def test_alpha_changes_the_instances():
    for seed in range(3):
        a = random_instance(3, 2, seed, alpha=0.1)
        b = random_instance(3, 2, seed, alpha=10.0)
        assert not np.allclose(a.target.level(1), b.target.level(1))
        assert not np.allclose(a.draft.level(0), b.draft.level(0))
    # smaller alpha: more peaked rows (mean entropy over 5 seeds, ln 3 = 1.0986 at most)
    h = [np.mean([_mean_entropy(random_instance(3, 2, s, alpha=al)) for s in range(5)])
         for al in (0.1, 1.0, 10.0)]
    assert h[0] < 0.5 < h[1] < 0.95 < h[2] < math.log(3)
    # and so acceptance: block efficiency grows with alpha on these seeds
    eff = [np.mean([float(analyze(random_instance(3, 2, s, alpha=al), "block").block_efficiency)
                    for s in range(5)]) for al in (0.1, 1.0, 10.0)]
    assert eff[0] < eff[1] < eff[2]
