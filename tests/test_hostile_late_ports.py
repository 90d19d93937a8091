"""Bad inputs found by a late outside probe, each refused by name where before they gave a raw
error from deep inside or a silent wrong answer:

* vLLM V1's ``apply_top_k_top_p`` port with top-k 0 (an index past the row: a RuntimeError from
  ``gather``), top-p above 1 or NaN (nothing masked, a silent pass-through), a float k, or a k or
  p of the wrong length (broadcast over every row);
* a negative frontier budget over a zero denominator (``--tv -0/0``), refused as a negative
  number where the division by zero is the fault."""

from __future__ import annotations

import pytest
import torch

from spectheory.runtime.errors import OptionError
from spectheory.testing.engines.adapters import apply_top_k_top_p


LOGITS = torch.tensor([[0.0, 1.0, 1.0, 2.0], [3.0, 0.5, 0.5, -1.0]])


@pytest.mark.parametrize("k,p,words", [
    (torch.tensor([0, 2]), None, "top_k = 0 is out of range: k >= 1"),
    (torch.tensor([2.0, 1.0]), None, "k must hold integers, not torch.float32"),
    (torch.tensor([2]), None, "k must be a tensor [n] = [2]"),
    (None, torch.tensor([0.5]), "p must be a tensor [n] = [2]"),
    (None, torch.tensor([1.5, 0.5]), "top_p = 1.5 is out of range: 0 < p <= 1"),
    (None, torch.tensor([0.5, 0.0]), "top_p = 0.0 is out of range"),
    (None, torch.tensor([float("nan"), 0.5]), "top_p = nan is out of range"),
    (None, torch.tensor([1, 1]), "p must hold floats in (0, 1], not torch.int64"),
])
def test_the_vllm_top_k_top_p_port_refuses_what_the_engine_never_holds(k, p, words):
    with pytest.raises(OptionError) as exc:
        apply_top_k_top_p(LOGITS, k, p)
    assert words in str(exc.value), str(exc.value)


def test_the_vllm_top_k_top_p_port_refuses_logits_that_are_not_a_float_matrix():
    for bad, words in ((LOGITS[0], "[n, V], not torch.float32 [4]"),
                       (LOGITS.long(), "not torch.int64 [2, 4]"),
                       (LOGITS.tolist(), "not list")):
        with pytest.raises(OptionError, match="logits must be a float tensor") as exc:
            apply_top_k_top_p(bad, torch.tensor([1, 1]), None)
        assert words in str(exc.value), str(exc.value)


def test_the_vllm_top_k_top_p_port_keeps_its_law_on_valid_input():
    """The control: top-k keeps ties at the k-th value, k past V keeps every token (the
    engine's clamp), top-p keeps the smallest head whose mass exceeds p, p = 1 keeps all."""
    out = apply_top_k_top_p(LOGITS, torch.tensor([2, 9]), None)
    assert torch.isinf(out[0]).tolist() == [True, False, False, False]  # 1.0 ties at k = 2
    assert torch.equal(out[1], LOGITS[1])
    out = apply_top_k_top_p(LOGITS, None, torch.tensor([1.0, 0.5]))
    assert torch.equal(out[0], LOGITS[0])
    assert torch.isinf(out[1]).tolist() == [False, True, True, True]  # 3.0 holds 0.85 > 0.5
