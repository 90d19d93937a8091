"""Sampling parameters at the kit and the exact engine, found by an outside probe (about 650
hostile strings, grammar files and objects; the laws it recomputed all agreed):

- ``check_sampler`` under a stateful parameter refused a history the processed target never
  reaches (its masks leave no token there), where ``exact`` and ``check`` keep such a row as
  given and compute the law;
- ``logit_bias=1:0`` (an additive bias of zero: no step at all) refused in exact mode as a step
  on logits;
- ``stop_token_ids=b"12"`` read as the tokens 49 and 50;
- a draft-side token outside the vocabulary not named as the draft's.
"""

from __future__ import annotations

import pytest
import torch

import spectheory as st
from spectheory.inputs.processing import SamplingError, process_rows, process_rows_along
from spectheory.runtime.errors import SpectheoryError
from spectheory.testing import check_sampler, make_sampler

NOREP = "no_repeat_ngram_size=1"


@pytest.fixture(scope="module")
def inst():
    """V = 3, L = 2: p(2 | 1) = 0, so the history (1, 2) is never reached; no_repeat_ngram_size
    = 1 bans 1 and 2 after it and leaves p(.|1, 2)'s mass, all on those, nowhere."""
    inst = st.random_instance(3, 2, 1, denominator=12)
    assert inst.target.conditional([1])[2] == 0
    return inst


def test_a_history_the_processed_target_never_reaches_does_not_stop_the_kit(inst):
    token = make_sampler("token")

    def processed(drafts, q, p, generator):  # the engine processes its rows along the draft
        return token(drafts, q, process_rows_along(p.to(torch.float64), drafts, NOREP),
                     generator)

    def raw(drafts, q, p, generator):  # planted: the parameters never applied
        return token(drafts, q, p.to(torch.float64), generator)

    # the case arises: processed position by position, the row after (1, 2) is refused
    with pytest.raises(SpectheoryError, match="no token of positive probability"):
        process_rows(inst.target.conditional([1, 2])[None].astype(float), NOREP,
                     history=torch.tensor([[1, 2]]))
    rep = check_sampler(processed, "token", instances=[inst], samples=4000, seed=3,
                        sampling=NOREP)
    assert rep.passed, str(rep)
    assert not check_sampler(raw, "token", instances=[inst], samples=4000, seed=3,
                             sampling=NOREP).passed
    # the law it is checked against is the exact engine's under the same parameters
    assert st.analyze(inst, "token", sampling=NOREP).block_efficiency > 1


@pytest.mark.parametrize("bias", ["1:0", "1:-0", "0:0;2:0"])
def test_an_additive_bias_of_zero_is_no_step_in_exact_mode(inst, bias):
    got = st.analyze(inst, "token", exact=True, sampling=f"logit_bias={bias}")
    assert got.block_efficiency == st.analyze(inst, "token", exact=True).block_efficiency
    with pytest.raises(SpectheoryError, match="additive logit_bias acts on logits"):
        st.analyze(inst, "token", exact=True, sampling="logit_bias=1:0.5")


@pytest.mark.parametrize("ids", [b"12", bytearray(b"1"), {"1": 2}])
def test_stop_token_ids_as_bytes_or_a_mapping_are_refused(ids):
    with pytest.raises(SamplingError, match="stop_token_ids = .* is not a list of token ids"):
        st.SamplingParams(min_tokens=2, stop_token_ids=ids)


def test_a_draft_side_token_outside_the_vocabulary_is_named_as_the_drafts(inst):
    with pytest.raises(SpectheoryError, match=r"^draft sampling: logit_bias token 5 is outside "
                                              r"the vocabulary 0\.\.2$"):
        st.analyze(inst, "token", draft_sampling="logit_bias=5:-inf")
    with pytest.raises(SpectheoryError, match=r"^logit_bias token 5 is outside"):
        st.analyze(inst, "token", sampling="logit_bias=5:-inf")
