"""Statistical checks of the real-model harness on tiny local models (no downloads):
the large-sample G-test (lossless verifiers pass, the lossy control is caught), the cross-check
against transformers' ``_speculative_sampling`` with identical draws, and the run summaries."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from spectheory.gpu_validation.atomic import write_json  # noqa: E402
from spectheory.gpu_validation.compare import config_key  # noqa: E402
from spectheory.gpu_validation.decoding import (SpeculativeDecoder, resolve_verifier,  # noqa: E402
                                                verifier_registry)
from spectheory.gpu_validation.experiments.crosscheck import compare_one, crosscheck_proposals  # noqa: E402
from spectheory.gpu_validation.experiments.lossless import lossless_test  # noqa: E402
from spectheory.gpu_validation.experiments.run import run_prompt  # noqa: E402
from spectheory.gpu_validation.experiments.summarize import markdown, summary  # noqa: E402
from spectheory.gpu_validation.stats import gtest  # noqa: E402
from spectheory.gpu_validation.tiny import tiny_qwen2  # noqa: E402

V = 4


@pytest.fixture(scope="module")
def dec():
    return SpeculativeDecoder(tiny_qwen2(V, seed=10, scale=3.0), tiny_qwen2(V, seed=11, scale=3.0))


def test_gtest_exact_fit_and_support():
    probs = {0: 0.5, 1: 0.3}  # remainder 0.2
    r = gtest(Counter({0: 500, 1: 300, 2: 120, 3: 80}), probs, 1000)
    assert r["G"] == pytest.approx(0.0, abs=1e-9) and r["p_value"] == pytest.approx(1.0)
    assert r["bins"] == 3 and r["dof"] == 2
    r = gtest(Counter({0: 1000}), {0: 1.0}, 1000)
    assert r["p_value"] == pytest.approx(1.0)
    r = gtest(Counter({0: 990, 5: 10}), {0: 1.0}, 1000)  # outside the support
    assert r["p_value"] == 0.0
    r = gtest(Counter({0: 600, 1: 250, 2: 150}), probs, 1000)
    assert r["p_value"] < 1e-3  # a clear misfit is detected


def test_gtest_williams_correction():
    """k equal bins: q = 1 + (k + 1) / (6 n) exactly (Williams 1976). 200 bins of expected count
    5 over 400 multinomial draws: uncorrected G averages about 199 + 200/30 (a third of its
    standard deviation high; measured 206.9); G / q averages within 2.5 (2.4 standard errors of
    the mean) of the 199 degrees of freedom (measured 200.2)."""
    k, n = 200, 1000
    probs = {i: 1.0 / k for i in range(k)}
    rng = np.random.default_rng(0)
    G, Gq = [], []
    for _ in range(400):
        counts = rng.multinomial(n, np.full(k, 1.0 / k))
        r = gtest(Counter({i: int(c) for i, c in enumerate(counts)}), probs, n)
        assert r["williams_q"] == pytest.approx(1 + (k + 1) / (6 * n), rel=1e-12)
        G.append(r["G"])
        Gq.append(r["G"] / r["williams_q"])
    assert np.mean(G) > 199 + 4 and abs(np.mean(Gq) - 199) < 2.5


def _first_row(dec, prompt):
    """The target's row after ``prompt`` (temperature 1), from a fresh forward."""
    with torch.no_grad():
        logits = dec.target.model(torch.tensor([prompt])).logits[0, -1]
    return torch.softmax(logits.double(), -1).numpy()


def test_large_sample_gtest_passes_lossless_and_catches_lossy(dec):
    """Family-wise false-alarm rate 1e-3 (Bonferroni over the 6 tests of the two lossless
    verifiers); the seed is fixed, so the outcome is deterministic. Power against the lossy
    control: at 12,000 samples its pair test's p-value was below 1e-75 on seeds 0, 1 and 2
    (1e-200 at 30,000), and the lossless verifiers' Rao-Blackwellised first-token TV at most
    0.0042 against the bound 0.01."""
    res = lossless_test(dec, [1, 2, 3], ["token", "block", "uniform-product"], n=12000, K=1, L=2,
                        alpha=1e-3, chunk=3000, generator=torch.Generator().manual_seed(0))
    v = res["verifiers"]
    assert not v["token"]["rejected"] and not v["block"]["rejected"]
    assert v["uniform-product"]["rejected"]
    assert all(x["ok"] for x in v.values())
    # the Rao-Blackwellised pair test: lossless pass, the lossy control is caught
    assert v["block"]["rb_pair"]["p_value"] > 1e-3 / 6
    assert v["token"]["rb_pair"]["p_value"] > 1e-3 / 6
    assert v["uniform-product"]["rb_pair"]["p_value"] < 1e-10
    assert v["block"]["first_token"]["bins"] >= 3 and v["block"]["pair"]["bins"] >= 6
    # Rao-Blackwellised first-token law: unbiased for lossless verifiers (small TV), and the
    # figure is the total variation (half the L1 distance) of its estimate to the target's row
    assert v["block"]["rb_tv_first"] < 0.01
    p0 = _first_row(dec, [1, 2, 3])
    for name in ("token", "block"):
        est = np.array(v[name]["rb_first"])
        assert est.sum() == pytest.approx(1.0, abs=1e-9)
        assert v[name]["rb_tv_first"] == pytest.approx(0.5 * np.abs(est - p0).sum(), rel=1e-9)


def test_gtest_multipath(dec):
    """GBV with K = 2 passes both G-tests at 2,000 samples (family-wise false-alarm rate 1e-3,
    level 1e-3/3 a test): at this size they detect a total-variation bias >= 0.060 in the
    first-token law (3 degrees of freedom) and >= 0.074 in the pair law (15) with 90% power
    (`spectheory.testing.statistics.budget.detectable_tv`). The 20,000-sample run (0.019 / 0.023) is
    ``benchmarks/bench_large_sample_gtest.py``; chunks of 500 iterations keep the drafted
    batches small (memory grows with the square of a chunk's paths)."""
    if "gbv" not in verifier_registry():
        pytest.skip("multi-path verifiers not available")
    from spectheory.testing.statistics.budget import detectable_tv

    res = lossless_test(dec, [2, 1], ["gbv"], n=2000, K=2, L=2, alpha=1e-3, chunk=500,
                        generator=torch.Generator().manual_seed(1))
    v = res["verifiers"]["gbv"]
    assert not v["rejected"] and res["level_per_test"] == pytest.approx(1e-3 / 3)
    # the K-path estimate: each row a law (checked inside), its mean's TV as reported
    p0 = _first_row(dec, [2, 1])
    est = np.array(v["rb_first"])
    assert est.sum() == pytest.approx(1.0, abs=1e-9)
    assert v["rb_tv_first"] == pytest.approx(0.5 * np.abs(est - p0).sum(), rel=1e-9)
    level = res["level_per_test"]
    for test, tv in (("first_token", 0.060), ("pair", 0.074)):
        # a single test at level l is the one-row family at 2 l (its global and row tests agree)
        assert detectable_tv([2000], [v[test]["dof"]], 2 * level) == pytest.approx(tv, abs=5e-4)


def test_crosscheck_with_transformers_speculative_sampling(dec):
    props = []
    g = torch.Generator().manual_seed(0)
    for prompt in ([0], [1, 2], [3, 3, 1]):
        dec.start(prompt)
        props.append(dec.propose(40, 3, g))
    res = crosscheck_proposals(props, seed=7)
    assert res["trials"] == 120
    assert res["accept_count_match"] == res["trials"]
    assert res["token_match"] == res["trials"]
    assert res["max_row_diff"] < 1e-12
    assert len(res["accepted_hist"]) >= 3  # rejections at several depths were compared


def test_crosscheck_detects_a_different_rule():
    """Sanity of the comparison itself: a draft with p/q < 1 everywhere must be rejected by both
    at the same place for the same uniforms, and a changed seed changes the draws."""
    q = torch.tensor([[0.9, 0.1], [0.9, 0.1]], dtype=torch.float64)
    p = torch.tensor([[0.1, 0.9], [0.1, 0.9], [0.5, 0.5]], dtype=torch.float64)
    c = compare_one(torch.tensor([0, 0]), q, p, seed=3)
    assert c["n_hf"] == c["n_ours"] and c["y_hf"] == c["y_ours"]
    assert c["n_ours"] <= 1


def test_run_prompts_summary_and_markdown(dec, tmp_path):
    reg = verifier_registry()
    names = [n for n in ("token", "block", "gbv") if n in reg]
    verifiers = {n: reg[n] for n in names}
    cfg = {"K": 2, "Ls": [2, 3], "advance": "block", "max_new_tokens": 12}
    out = tmp_path / "run"
    write_json(out / "run.json", {**cfg, "datasets": "tiny", "temperature": 1.0,
                                  "verifiers": names})
    write_json(out / "costs.json", {"context_tokens": 3, "reps": 1, "target_1tok": 0.1,
                                    "draft_1tok": {"K1": 0.01, "K2": 0.012},
                                    "target_Ltok": {f"K{k}/L{l}": 0.12 for k in (1, 2)
                                                    for l in (2, 3)}})
    for i, prompt in enumerate(([1, 2], [0, 3, 1], [2])):
        res = run_prompt(dec, prompt, verifiers, resolve_verifier(cfg["advance"]), cfg["K"],
                         cfg["Ls"], cfg["max_new_tokens"], torch.Generator().manual_seed(i))
        assert len(res["new_tokens"]) >= 12
        for st in res["steps"]:
            assert st["stop_dev"] < 1e-12
            for k, e in st["e_tau"].items():
                L = int(k.rsplit("L", 1)[1])
                assert 0 <= e <= L + 1e-12
            # conditional first-token acceptances are probabilities; the per-step optimum grows
            # with the number of drafts (it bounds the *expected* acceptance, not each step's)
            assert all(-1e-12 <= a <= 1 + 1e-12 for a in st["accept1"].values())
            assert st["opt_L1"]["K1"] <= st["opt_L1"]["K2"] + 1e-12
        res.update({"dataset": "tiny", "index": i, "id": str(i)})
        write_json(out / "prompts" / f"tiny-{i}.json", res)
    s = summary(out, n_boot=200)
    steps = [st for f in sorted((out / "prompts").glob("*.json"))
             for st in json.loads(f.read_text())["steps"]]
    k = config_key("block", 1, 3)
    assert s["configs"][k]["be"] == pytest.approx(np.mean([st["e_tau"][k] + 1 for st in steps]))
    assert s["configs"][k]["lo"] <= s["configs"][k]["be"] <= s["configs"][k]["hi"]
    assert sum(s["histograms"][k]) == len(steps)
    gain = s["gains"]["block/token L3"][0]
    tk = config_key("token", 1, 3)
    assert gain == pytest.approx(sum(st["e_tau"][k] + 1 for st in steps)
                                 / sum(st["e_tau"][tk] + 1 for st in steps))
    assert "speedup_model" in s["cost_model"][k]
    text = markdown(s)
    assert "| block |" in text and "Cost MODEL" in text
    ft = s["first_token"][config_key("gbv", 2, 3)]
    assert ft["gap"] == pytest.approx(ft["optimum"] - ft["acceptance"])
    assert ft["optimum"] == pytest.approx(np.mean([st["opt_L1"]["K2"] for st in steps]))
    assert "First-token acceptance" in text


def test_summarize_cli(tmp_path, capsys):
    from spectheory.cli import main

    rc = main(["validate", "summarize", str(tmp_path / "nothing")])
    assert rc == 2 and "no run" in capsys.readouterr().err


# --- the Rao-Blackwellised pair test on a synthetic two-token instance (no model) -------------

def _synthetic_pairs(V, seed, sigma=2.0):
    """Every draft (x1, x2) of a random two-token instance with prefix dependence (log-normal
    rows, so many drafts are rare): drafts [V*V, 2], q [V*V, 2, V], p [V*V, 3, V], the draft
    probability q(x1) q(x2|x1) of each, and the target pair law p(y1) p(y2|y1) [V, V]."""
    g = torch.Generator().manual_seed(seed)

    def rows(*shape):
        x = torch.exp(sigma * torch.randn(*shape, V, generator=g, dtype=torch.float64))
        return x / x.sum(-1, keepdim=True)

    q0, p0, q1, p1, p2 = rows(), rows(), rows(V), rows(V), rows(V)
    X = torch.cartesian_prod(torch.arange(V), torch.arange(V))
    q = torch.stack([q0.expand(V * V, V), q1[X[:, 0]]], 1)
    p = torch.stack([p0.expand(V * V, V), p1[X[:, 0]], p2[X[:, 1]]], 1)
    return X, q, p, q0[X[:, 0]] * q1[X[:, 0], X[:, 1]], p0[:, None] * p1


def _rb_rows(name, X, q, p, pair, y1, y2):
    from spectheory.law import Law
    from spectheory.gpu_validation.stats import rb_pair_rows

    law = resolve_verifier(name, allow_lossy=True).law(X[:, None], q[:, None], p[:, None])
    return rb_pair_rows(X, Law(law.stop[:, 0], law.correction[:, 0]), y1, y2,
                        pair[y1, y2] / pair.sum(1)[y1])


def test_rb_pair_rows_exact_mean():
    """Over every draft weighted by q(x1) q(x2|x1), the Rao-Blackwellised rows average to the
    target pair law on every bin for token and block verification (to rounding); the lossy
    control is off by more than 1e-3."""
    X, q, p, w, pair = _synthetic_pairs(6, seed=3)
    y1, y2 = torch.nonzero(pair >= 0).T  # all 36 bins
    for name in ("token", "block"):
        mean = w @ _rb_rows(name, X, q, p, pair, y1, y2)
        assert float((mean - pair[y1, y2]).abs().max()) < 1e-15
    mean = w @ _rb_rows("uniform-product", X, q, p, pair, y1, y2)
    assert float((mean - pair[y1, y2]).abs().max()) > 1e-3


def test_weighted_chisq_sf_exact_laws():
    """Against closed forms: equal weights (the chi-square law) and two pairs of unequal weights
    (a sum of two exponentials, P = (a e^{-x/a} - b e^{-x/b}) / (a - b) for means a, b); the
    saddlepoint errs by at most +12% and never below, from p = 1e-2 to 1e-12."""
    from scipy.stats import chi2

    from spectheory.gpu_validation.stats import weighted_chisq_sf

    for k in (1, 2, 5, 50, 2000):
        for pv in (1e-2, 1e-4, 1e-8, 1e-12):
            r = weighted_chisq_sf(0.3 * chi2.isf(pv, k), np.full(k, 0.3)) / pv
            assert 1.0 <= r < 1.12
    a, b = 2 * 3.0, 2 * 0.5  # weights (3, 3, 0.5, 0.5)
    for x in (30.0, 60.0, 120.0):
        exact = (a * np.exp(-x / a) - b * np.exp(-x / b)) / (a - b)
        r = weighted_chisq_sf(x, [3.0, 3.0, 0.5, 0.5, 0.0, -1e-18]) / exact
        assert 1.0 <= r < 1.12
    assert weighted_chisq_sf(0.0, [1.0]) == 1.0 and weighted_chisq_sf(1.0, []) == 0.0
    assert weighted_chisq_sf(1e9, [1.0, 0.5]) == 0.0


def test_rao_scott_calibrated_where_hotelling_fails():
    """400 lossless runs of the Rao-Blackwellised pair test (token verification, 52 bins with
    expected count >= 5, n = 20,000, each run's drafts a multinomial draw over all 64 drafts, 14
    of them with n q < 1): the Rao-Scott test rejects at about its level; Hotelling's T^2 with
    the sample covariance (pseudo-inverse over eigenvalues above 1e-10 of the largest) rejects
    every run at level 0.01, its largest terms in the directions of drafts that never occurred.
    A planted total-variation bias of 0.01 is caught in > 85% of runs, where a G-test of as many
    sampled pairs catches it in < 20% (measured: 93% and 13%)."""
    n, runs = 20000, 400
    X, q, p, w, pair = _synthetic_pairs(8, seed=0)
    y1, y2 = torch.nonzero(pair * n >= 5).T
    e = pair[y1, y2]
    F = _rb_rows("token", X, q, p, pair, y1, y2)
    assert len(e) == 52 and int((w * n < 1).sum()) == 14
    h = len(e) // 2  # planted bias: move 0.01 of mass from the first half of the bins
    biased = e + 0.01 * torch.cat([-e[:h] / e[:h].sum(), e[h:] / e[h:].sum()])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 52 x 52 matrices: threads only add overhead
    try:
        p_rs, p_hot, p_bias = _runs(F, e, biased, w, n, runs, np.random.default_rng(0))
    finally:
        torch.set_num_threads(threads)
    # Binomial(400, 0.01) and (400, 0.05): these bounds hold with probability > 0.999
    assert (p_rs < 0.01).sum() <= 12 and 7 <= (p_rs < 0.05).sum() <= 36
    assert (p_hot < 0.01).sum() == runs
    assert (p_bias < 0.01).mean() > 0.85


def _runs(F, e, biased, w, n, runs, rng):
    """p-values over ``runs`` multinomial draws of the drafts' counts: the Rao-Scott test of the
    mean against e and against the biased vector, and Hotelling's T^2 against e with the sample
    covariance."""
    from scipy.stats import chi2

    from spectheory.gpu_validation.stats import rao_scott_test

    p_rs, p_hot, p_bias = [], [], []
    for _ in range(runs):
        c = torch.from_numpy(rng.multinomial(n, w.numpy()).astype(np.float64))
        for target, out in ((e, p_rs), (biased, p_bias)):
            G = F - target
            out.append(rao_scott_test(c @ G, G.T @ (c[:, None] * G), n, target)["p_value"])
        mean = c @ F / n
        S = (F.T @ (c[:, None] * F) - n * torch.outer(mean, mean)) / (n - 1)
        ev, U = torch.linalg.eigh(S)
        keep = ev > ev.max() * 1e-10
        T2 = float(n * ((U.T @ (mean - e))[keep] ** 2 / ev[keep]).sum())
        p_hot.append(chi2.sf(T2, int(keep.sum())))
    return np.array(p_rs), np.array(p_hot), np.array(p_bias)


def test_rao_scott_edge_cases():
    from spectheory.runtime.errors import SpectheoryError
    from spectheory.gpu_validation.stats import rao_scott_test

    empty = rao_scott_test(torch.zeros(0), torch.zeros(0, 0), 10, torch.zeros(0))
    assert empty["p_value"] == 1.0 and empty["bins"] == 0
    e = torch.tensor([0.25, 0.5], dtype=torch.float64)
    # every vector equal to e (nothing varies): p = 1; every vector off by 0.1: p = 0
    assert rao_scott_test(torch.zeros(2), torch.zeros(2, 2), 100, e)["p_value"] == 1.0
    off = torch.tensor([0.1, 0.0], dtype=torch.float64)
    r = rao_scott_test(100 * off, 100 * torch.outer(off, off), 100, e)
    assert r["p_value"] == 0.0 and r["tv_bins"] == pytest.approx(0.05)
    with pytest.raises(SpectheoryError, match="positive"):
        rao_scott_test(torch.zeros(2), torch.zeros(2, 2), 100, torch.tensor([0.5, 0.0]))
    with pytest.raises(SpectheoryError, match="at least 2"):
        rao_scott_test(torch.zeros(2), torch.zeros(2, 2), 1, e)


def test_williams_q_leaves_the_remainder_bin_out():
    """Bins 0 and 1 kept (expected 500 and 499), a remainder of expected count 1: q = 1 + (n/500
    + n/499 - 1) / (6 n dof), the remainder excluded as the docstring says (with it q = 1.0836,
    p 0.3216 instead of 0.2926)."""
    n = 1000
    r = gtest(Counter({0: 520, 1: 478, 2: 2}), {0: 0.5, 1: 0.499}, n)
    assert r["bins"] == 3 and r["dof"] == 2
    assert r["williams_q"] == pytest.approx(1 + (n / 500 + n / 499 - 1) / (6 * n * 2), rel=1e-12)


def test_weighted_chisq_lower_tail_and_the_satterthwaite_window():
    """Below the mean the saddlepoint is negative (r = sign(s) sqrt(...)): P(3 Z1^2 + 0.5 Z2^2 >
    0.3) = 0.884 (a 2-d integral computed here; the Satterthwaite fallback gives 0.838). Within
    1e-3 standard deviations of the mean the fallback is used, and only there: x = 90 for weights
    (100, 1) is 0.09 standard deviations below, a saddlepoint value (0.3464; Satterthwaite
    0.3471)."""
    from scipy import integrate
    from scipy.stats import chi2

    from spectheory.gpu_validation.stats import weighted_chisq_sf

    def inside(z1):
        rest = (0.3 - 3 * z1 * z1) / 0.5
        return 0.0 if rest <= 0 else chi2.cdf(rest, 1) * np.exp(-z1 * z1 / 2) / np.sqrt(2 * np.pi)

    below = integrate.quad(inside, -1, 1, points=[-np.sqrt(0.1), np.sqrt(0.1)], limit=200)[0]
    exact = 1 - below
    got = weighted_chisq_sf(0.3, [3.0, 0.5])
    assert abs(got - exact) < 0.01 and abs(got - 0.88402) < 1e-4
    mu, sd = 101.0, float(np.sqrt(2 * (100 ** 2 + 1)))
    sat = float(chi2.sf(90 * 2 * mu / sd ** 2, 2 * mu * mu / sd ** 2))
    got = weighted_chisq_sf(90.0, [100.0, 1.0])
    assert abs(got - 0.346433) < 1e-5 and abs(got - sat) > 5e-4
    assert weighted_chisq_sf(mu + 1e-4 * sd, [100.0, 1.0]) == pytest.approx(
        float(chi2.sf((mu + 1e-4 * sd) * 2 * mu / sd ** 2, 2 * mu * mu / sd ** 2)), rel=1e-12)


def test_rao_scott_sample_covariance_and_effective_dof():
    """The covariance is the sample covariance (divided by n - 1) and dof = (sum lambda)^2 / sum
    lambda^2, written out here: indicator rows (1,0),(0,1),(1,0),(1,0) against e = (1/2, 1/2) give
    design effect 0.5 and p 0.3173; eye(3) rows 0,1,2,0,1,2,0,0 against (0.4, 0.3, 0.3) dof
    1.9756."""
    from spectheory.gpu_validation.stats import rao_scott_test

    def run(rows, e):
        X = torch.tensor(rows, dtype=torch.float64)
        e = torch.tensor(e, dtype=torch.float64)
        dev = X - e
        return rao_scott_test(dev.sum(0), dev.T @ dev, len(rows), e), X, e

    res, X, e = run([[1, 0], [0, 1], [1, 0], [1, 0]], [0.5, 0.5])
    S = np.cov(X.numpy(), rowvar=False, ddof=1)
    lam = np.clip(np.linalg.eigvalsh(S / np.sqrt(np.outer(e, e))), 0, None)
    assert res["design_effect"] == pytest.approx(lam.sum() / 2, rel=1e-12) == pytest.approx(0.5)
    assert res["p_value"] == pytest.approx(0.31731, abs=1e-5)
    res, X, e = run(np.eye(3)[[0, 1, 2, 0, 1, 2, 0, 0]].tolist(), [0.4, 0.3, 0.3])
    S = np.cov(X.numpy(), rowvar=False, ddof=1)
    lam = np.clip(np.linalg.eigvalsh(S / np.sqrt(np.outer(e, e))), 0, None)
    assert res["dof"] == pytest.approx(lam.sum() ** 2 / (lam ** 2).sum(), rel=1e-12)
    assert res["dof"] == pytest.approx(1.9756, abs=1e-4)


def test_the_pair_bin_limit_itself_is_accepted():
    from spectheory.gpu_validation.stats import MAX_PAIR_BINS, check_pair_bins
    from spectheory.runtime.errors import SpectheoryError

    check_pair_bins(MAX_PAIR_BINS)
    with pytest.raises(SpectheoryError, match="at most 20000"):
        check_pair_bins(MAX_PAIR_BINS + 1)
