"""The bug kit's replica helpers (`spectheory.testing.mutants.steps`), public, refuse bad
arguments in one line naming them: an unknown replica name was a bare KeyError (a dict an
"unhashable" TypeError), a short or non-numeric row an IndexError or Fraction's own
ValueError, and ``bf16_draft_probs`` read a NaN entry as 0 and gave NaN for a zero row."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

import spectheory as st
from spectheory.runtime.errors import SpectheoryError
from spectheory.testing.mutants.steps import (bf16_draft_probs, draft_half, exact_step_law,
                                              sampler_half, shared_gumbel_joint)

NAN = float("nan")


@pytest.mark.parametrize("call,words", [
    (lambda: draft_half("nope"), "draft_half: unknown replica 'nope'; choose from"),
    (lambda: sampler_half("nope"), "sampler_half: unknown replica 'nope'"),
    (lambda: sampler_half({}), "sampler_half: unknown replica {}"),
    (lambda: exact_step_law("nope", st.random_instance(3, 1, 0, denominator=12)),
     "exact_step_law: unknown replica 'nope'"),
    (lambda: shared_gumbel_joint([.5, .5], [.5], 0, 1), "of one length V"),
    (lambda: shared_gumbel_joint([.5, .5, 0], [0, .5, .5], 0, 5), "y = 5"),
    (lambda: shared_gumbel_joint("abc", [0, .5, .5], 0, 1), "lists of numbers"),
    (lambda: shared_gumbel_joint([.5, .25, .25], [0, .5, .5], 0, 0), "x != y"),
    (lambda: bf16_draft_probs(torch.tensor([[NAN, 1.]])), "rows of probabilities"),
    (lambda: bf16_draft_probs(torch.tensor([[0., 0.]])), "rows of probabilities"),
    (lambda: bf16_draft_probs(torch.tensor([[.5, .5]]), level=float("inf")), "level = inf"),
], ids=["draft", "sampler", "sampler-dict", "exact", "short", "token", "text", "same", "nan",
        "zero", "level"])
def test_replica_helpers_refuse_bad_arguments_in_one_line(call, words):
    with pytest.raises(SpectheoryError) as info:
        call()
    assert words in str(info.value) and "\n" not in str(info.value)


def test_replica_helpers_still_compute():
    assert torch.allclose(bf16_draft_probs(np.array([[.5, .5]])),
                          torch.tensor([[.5, .5]], dtype=torch.float64))
    assert isinstance(shared_gumbel_joint([.5, .25, .25], [0, .5, .5], 0, 1), Fraction)
    assert callable(draft_half("vllm-47386")) and callable(sampler_half("sglang-7207"))
