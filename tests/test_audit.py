"""Numerics audit: low-precision laws against float64 on the same rounded rows, the formula step
that loses most, and the skewed-law underflow of GBV in float16."""

from __future__ import annotations

import pytest
import torch

from spectheory.cli.audit import audit, audit_rows, log1p_check
from spectheory.runtime.errors import SpectheoryError

from cli_helpers import run

V = 3000  # real-vocabulary shape is the default (151,936); tests use a smaller one


def test_rows_are_distributions_with_distinct_first_tokens():
    for kind in ("flat", "peaked", "tiny-q"):
        d, q, p = audit_rows(kind, V, 3, 2, 4, seed=1)
        assert torch.allclose(q.sum(-1), torch.ones(1, dtype=torch.float64))
        assert torch.allclose(p.sum(-1), torch.ones(1, dtype=torch.float64))
        assert (d[:, 0, 0] != d[:, 1, 0]).all()  # paths never share a prefix
        drafted = q.gather(-1, d.unsqueeze(-1))
        assert (drafted > 0).all()
    _, q, _ = audit_rows("tiny-q", V, 2, 1, 3)
    assert float(q.min()) < 1e-25


@pytest.mark.parametrize("verifier,paths", [("block", 1), ("token", 1), ("gbv", 2)])
def test_float64_is_exact_and_precision_orders_the_errors(verifier, paths):
    res = {r.dtype: r for r in audit(verifier, "peaked", V, 3, paths, 5,
                                     ("bfloat16", "float32", "float64"))}
    assert res["float64"].stop_error == 0 and res["float64"].output_tv == 0
    assert res["float32"].output_tv < 1e-5
    assert res["bfloat16"].output_tv > 10 * res["float32"].output_tv
    for r in res.values():
        assert r.nan == r.inf == r.negative == 0
        assert r.worst_step in r.steps
        assert r.steps[r.worst_step] == max(r.steps.values())


def test_gbv_skew_underflow_to_the_q_fallback_is_flagged():
    """Three paths through the lowest-ranked first token (p/q = 0.01), of draft probability
    1e-4: below it A = 0 and x = 1e-4, so the skew denominator (A + x)^2 + (A + x) A + A^2 =
    1e-8 is zero in float16 (smallest subnormal 6e-8), where GBV falls back to q."""
    q0 = torch.tensor([0.5, 1e-4, 0.25, 0.25 - 1e-4], dtype=torch.float64)
    p0 = torch.tensor([0.5, 1e-6, 0.25, 0.25 - 1e-6], dtype=torch.float64)
    row = torch.full((4,), 0.25, dtype=torch.float64)
    drafts = torch.tensor([[[1, 0], [1, 0], [1, 0]]])
    q = torch.stack([q0, row]).expand(1, 3, 2, 4).clone()
    p = torch.stack([p0, row, row]).expand(1, 3, 3, 4).clone()
    res = {r.dtype: r for r in audit("gbv", paths=3, dtypes=("float16", "float32"),
                                     rows=(drafts, q, p))}
    assert res["float16"].skew_fallbacks >= 1
    assert "fallback" in "; ".join(res["float16"].flags())
    assert res["float32"].skew_fallbacks == 0


def test_log1p_and_log_forms_on_tiny_ratios():
    res = log1p_check("tiny-q", V, 3, 4, seed=0)
    assert res["log1p"] < 1e-5 and res["log"] < 1e-5


def test_command_line(capsys):
    code, out, err = run(["audit", "--vocab", "500", "--batch", "2", "--block", "3",
                          "--rows", "peaked", "--dtypes", "float32,float64"], capsys)
    assert code == 0 and "float32" in out and "float64" in out
    for bad in (["--dtypes", "float8"], ["--rows", "spiky"],
                ["--verifier", "block", "--paths", "2"],
                ["--vocab", "151936", "--batch", "2000"]):
        code, out, err = run(["audit", "--vocab", "500", "--block", "2", *bad], capsys)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, bad


def test_api_refuses_bad_arguments():
    with pytest.raises(SpectheoryError, match="single-path"):
        audit("block", paths=2, vocab_size=100)
    with pytest.raises(SpectheoryError, match="row kind"):
        audit_rows("spiky", 10, 1, 1, 1)


def test_prefix_row_noise_is_measured():
    """Noise of 4e-7 between the copies of a shared prefix's row moves the law of the emitted
    block by about that much on rows without near-ties, even where GBV's choice between two
    identical drafted paths flips (a path-probability change of 1 that the output cannot see);
    the check also runs on given rows."""
    from spectheory.cli.audit import prefix_noise_check

    for name in ("gbv", "specinfer", "traversal-iid"):
        res = prefix_noise_check(name, 3, V, 3, 4)
        assert 0 < res["output_tv"] < 1e-5, name
        assert 0 <= res["path_probability_change"] <= 1 + 1e-12, name
    d, q, p = audit_rows("peaked", V, 2, 2, 3, seed=3)
    res = prefix_noise_check("gbv", rows=(d, q, p))
    assert res["paths"] == 2 and 0 < res["output_tv"] < 1e-5
