"""TGI's speculative step (a port of HeterogeneousNextTokenChooser with speculated ids): lossless
without penalties or grammars, as its suite tests it; its processors fed the committed ids at
every position fail under a repetition penalty or a grammar; the fix passes. alpha = 1e-3 for
every check_step below (a correct step fails with probability <= 1e-3)."""

from __future__ import annotations

import functools

import pytest

import spectheory as st

from spectheory.inputs.processing import SamplingParams
from spectheory.inputs.stateful import TokenAutomaton
from spectheory.runtime.errors import OptionError, UserCodeError
from spectheory.testing.engines.ports.tgi import tgi_step
from spectheory.testing.checks.step import check_step

released = functools.partial(tgi_step, fixed=False)
fixed = functools.partial(tgi_step, fixed=True)
# state 0 allows tokens 0 and 1; after 0 only 2; after 1 or 2 anything (back to 0 after 2)
GRAMMAR = TokenAutomaton([[1, 2, None], [None, None, 3], [0, 0, 0], [0, 0, 0]])


@pytest.mark.parametrize("sampling", [None, "temperature=0.8,top_k=2"])
def test_lossless_without_state(sampling):
    rep = check_step(released, samples=4000, steps=2, sampling=sampling)
    assert rep.passed, rep


@pytest.mark.parametrize("sampling", ["repetition_penalty=1.6",
                                      SamplingParams(grammar=GRAMMAR, temperature=0.8)])
def test_committed_ids_at_every_position_fail_and_the_fix_passes(sampling):
    insts = [st.random_instance(3, 2, 21), st.random_instance(3, 2, 23, alpha=0.5)]
    bad = check_step(released, insts, samples=4000, steps=2, sampling=sampling)
    assert not bad.passed, bad
    ok = check_step(fixed, insts, samples=4000, steps=2, sampling=sampling)
    assert ok.passed, ok


def test_parameters_tgi_lacks_are_refused():
    with pytest.raises((OptionError, UserCodeError), match="TGI port has no frequency_penalty"):
        check_step(released, samples=100, sampling="frequency_penalty=0.5")
    from spectheory.testing.engines.ports.tgi import _check
    from spectheory.inputs.processing import parse_sampling

    with pytest.raises(OptionError, match="min_p"):
        _check(parse_sampling("min_p=0.1"))
