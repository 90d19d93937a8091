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


def test_large_sample_gtest_passes_lossless_and_catches_lossy(dec):
    """Family-wise false-alarm rate 1e-3 (Bonferroni over the 6 tests of the two lossless
    verifiers); the seed is fixed, so the outcome is deterministic."""
    res = lossless_test(dec, [1, 2, 3], ["token", "block", "uniform-product"], n=30000, K=1, L=2,
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
    # Rao-Blackwellised first-token law: unbiased for lossless verifiers (small TV)
    assert v["block"]["rb_tv_first"] < 0.01


def test_gtest_multipath(dec):
    """GBV with K = 2 passes both G-tests at 2,000 samples (family-wise false-alarm rate 1e-3,
    level 1e-3/3 a test): at this size they detect a total-variation bias >= 0.060 in the
    first-token law (3 degrees of freedom) and >= 0.074 in the pair law (15) with 90% power
    (`spectheory.testing.budget.detectable_tv`). The 20,000-sample run (0.019 / 0.023) is
    ``benchmarks/bench_large_sample_gtest.py``; chunks of 500 iterations keep the drafted
    batches small (memory grows with the square of a chunk's paths)."""
    if "gbv" not in verifier_registry():
        pytest.skip("multi-path verifiers not available")
    from spectheory.testing.budget import detectable_tv

    res = lossless_test(dec, [2, 1], ["gbv"], n=2000, K=2, L=2, alpha=1e-3, chunk=500,
                        generator=torch.Generator().manual_seed(1))
    v = res["verifiers"]["gbv"]
    assert not v["rejected"] and res["level_per_test"] == pytest.approx(1e-3 / 3)
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
