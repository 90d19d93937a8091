"""Steps written here from scratch against the step signature with vLLM's penalty semantics
(`apply_penalties`: a seen token's positive logit divided by r, a non-positive one multiplied;
then logit -= f * count + a * [count > 0]), applied to the logits the kit hands: a correct step
passes check_step over two steps; steps whose penalties are blind to the drafts, missing on the
target, or count the last token twice fail. alpha = 1e-3 (a correct step fails with probability
at most 1e-3); the samples give 90% power against a TV bias of about 0.05 (the report says)."""

from __future__ import annotations

import pytest
import torch

from spectheory.testing.checks.step import check_step

PARAMS = "repetition_penalty=1.7,frequency_penalty=0.6,presence_penalty=0.3"
R, F, A = 1.7, 0.6, 0.3


def penalise(logits, history):
    """vLLM's apply_penalties on one row per batch entry: logits [B, V], history [B, n]."""
    B, V = logits.shape
    x = logits.to(torch.float64).clone()
    counts = torch.zeros(B, V, dtype=torch.float64)
    if history.shape[1]:
        counts.scatter_add_(1, history, torch.ones_like(history, dtype=torch.float64))
    seen = counts > 0
    x = torch.where(seen & (x > 0), x / R, torch.where(seen, x * R, x))
    return x - F * counts - A * seen


def make_step(bug=None):
    def step(request):
        assert request.inputs == "logits"  # the kit hands logits when penalties are set
        ctx = request.context
        B, n = ctx.shape
        L = request.num_draft
        drafts = torch.empty(B, 0, dtype=torch.long)
        qs = []
        g = request.generator
        for _ in range(L):
            seq = torch.cat([ctx, drafts], 1)
            q = torch.softmax(penalise(request.draft(seq)[:, -1], seq), -1)
            x = torch.multinomial(q, 1, generator=g)[:, 0]
            qs.append(q)
            drafts = torch.cat([drafts, x[:, None]], 1)
        seq = torch.cat([ctx, drafts], 1)
        logits = request.target(seq)[:, n:]
        ps = []
        for j in range(L + 1):
            hist = seq[:, :n + j]
            if bug == "blind-to-drafts":
                hist = ctx
            elif bug == "last-twice" and hist.shape[1]:
                hist = torch.cat([hist, hist[:, -1:]], 1)
            row = logits[:, j].to(torch.float64)
            ps.append(torch.softmax(row if bug == "missing-on-target" else penalise(row, hist),
                                    -1))
        out = torch.full((B, L + 1), -1, dtype=torch.long)
        b = torch.arange(B)
        tau = torch.full((B,), L)
        for i in range(L):
            u = torch.rand(B, generator=g, dtype=torch.float64)
            x = drafts[:, i]
            rej = (u * qs[i][b, x] >= ps[i][b, x]) & (tau == L)
            tau[rej] = i
        # every row's next token in one draw: the target row after L acceptances, else the
        # residual max(p - q, 0) at the first rejection (each row normalised, drawn on its own)
        p_t = torch.stack(ps, 1)[b, tau]
        q_t = torch.stack(qs + [torch.zeros_like(ps[L])], 1)[b, tau]
        rows = torch.where((tau == L)[:, None], p_t, (p_t - q_t).clamp(min=0))
        y = torch.multinomial(rows / rows.sum(-1, keepdim=True), 1, generator=g)[:, 0]
        out[:, :L] = torch.where(torch.arange(L)[None, :] < tau[:, None], drafts, out[:, :L])
        out[b, tau] = y
        return out

    return step


def test_correct_penalised_step_passes():
    rep = check_step(make_step(), samples=6000, steps=2, sampling=PARAMS)
    assert rep.passed, rep


@pytest.mark.parametrize("bug", ["blind-to-drafts", "missing-on-target", "last-twice"])
def test_penalty_bugs_fail(bug):
    rep = check_step(make_step(bug), samples=6000, steps=2, sampling=PARAMS)
    assert not rep.passed, rep


@pytest.mark.parametrize("name", ["vllm_v1_step", "sglang_step"])
def test_the_kits_correct_steps_pass_under_penalties(name):
    """The kit's own correct steps process each position with its history too."""
    from spectheory.testing.checks import step as steps

    rep = check_step(getattr(steps, name), samples=6000, steps=2, sampling=PARAMS)
    assert rep.passed, rep


def test_an_instance_with_a_nan_table_is_refused_naming_it():
    """The input is at fault, not the samples nor the step: one line naming the row."""
    import numpy as np

    import spectheory as st
    from spectheory.runtime.errors import OptionError
    from spectheory.testing.checks.step import sglang_step

    bad = st.random_instance(3, 2, 0)
    bad.target.tables[1][2, 1] = np.nan
    with pytest.raises(OptionError, match=r"instance 0: the target row after prefix \(2,\) is "
                                          r"not a distribution") as exc:
        check_step(sglang_step, [bad], samples=6000)
    assert "\n" not in str(exc.value)
