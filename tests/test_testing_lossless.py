"""spectheory.testing: assert_lossless / check_lossless_battery and the default battery.

The battery must catch planted bugs that a context-independent instance cannot see, and every
built-in lossless verifier must pass it under its own drafting scheme."""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

import planted_bugs as pb
from spectheory import check_lossless, random_instance
from spectheory.runtime.errors import SpectheoryError
from spectheory.registry import registered
from spectheory.cli.report import toy_instance
from spectheory.testing import (BatteryInstance, assert_lossless, check_lossless_battery,
                                default_battery)

#: Context-independent instances, where rows read at the wrong position go unnoticed.
CI = [("two-token", toy_instance()),
      ("ci V3 L3", random_instance(3, 3, 5, context_independent=True, denominator=12))]


def _by_name(battery):
    return {b.name: b.instance for b in battery}


# ----------------------------------------------------------------------------- the battery


def test_battery_covers_the_bug_classes():
    bat = default_battery()
    inst = _by_name(bat)
    assert len(inst) == len(bat) == 8
    assert all(i.exact for i in inst.values())
    assert any(i.vocab_size >= 3 and i.block_length >= 3 for i in inst.values())
    # prefix-dependent: rows differ between prefixes of one depth, in both models
    pd = inst["prefix-dependent"]
    for model, depth in ((pd.target, 3), (pd.draft, 2)):
        for d in range(1, depth + 1):  # rounded to 1/12, at most two rows coincide by chance
            rows = model.level(d)
            assert len({tuple(r) for r in rows}) >= len(rows) - 2
    # zeros: at every node each model has a zero where the other has mass
    z = inst["zeros"]
    for d in range(z.block_length):
        p, q = z.target.level(d), z.draft.level(d)
        assert np.all(((p == 0) & (q > 0)).any(axis=1))
        assert np.all(((q == 0) & (p > 0)).any(axis=1))
    # p = q at some nodes, not all
    e = inst["p=q-some-nodes"]
    same = [bool((e.target.level(d)[n] == e.draft.level(d)[n]).all())
            for d in range(e.block_length) for n in range(e.vocab_size**d)]
    assert any(same) and not all(same)
    # one-hot rows
    for name, model in (("one-hot-target", inst["one-hot-target"].target),
                        ("one-hot-draft", inst["one-hot-draft"].draft)):
        for t in model.tables:
            assert np.all((t == 1).sum(axis=1) == 1), name
    # ties: two tokens with the same ratio p/q
    t = inst["ties"]
    ratios = t.target.level(0)[0] / t.draft.level(0)[0]
    assert len(set(ratios)) < len(ratios)
    # K-path batteries are smaller: at most 1024 joint draft outcomes
    for K in (2, 3):
        for b in default_battery(K):
            assert b.instance.vocab_size ** (b.instance.block_length * K) <= 1024
    floats = default_battery(exact=False)
    assert not any(b.instance.exact for b in floats)
    assert "prefix-dependent" in str(bat[1]) and "V = 3, L = 3" in str(bat[1])


# ----------------------------------------------------------------------------- planted bugs


@pytest.mark.parametrize("bug", [pb.off_by_one_token, pb.block_residual_mass_previous_rows])
def test_position_bugs_caught_by_battery_invisible_on_context_independent_rows(bug):
    for name, inst in CI:
        assert check_lossless(bug, inst).lossless, name
    assert_lossless(bug, CI)  # passes there
    with pytest.raises(AssertionError) as info:
        assert_lossless(bug)
    msg = str(info.value)
    assert "LOSSY on instance 'prefix-dependent' (V = 3, L = 3)" in msg
    reps = check_lossless_battery(bug)
    first = next(r for r in reps if not r.lossless)
    assert first.instance == "prefix-dependent"
    # the message names the offending sequence and both exact probabilities
    assert f"first offending output sequence {first.offending}" in msg
    assert (f"output probability {first.output_probability} vs target probability "
            f"{first.target_probability}") in msg
    assert isinstance(first.tv, Fraction) and first.tv > 0
    n_bad = sum(not r.lossless for r in reps)
    assert f"fails on {n_bad} of 8 instances" in msg


def test_softmax_residual_caught_in_float_mode():
    reps = check_lossless_battery(pb.softmax_residual)
    assert all(not r.exact for r in reps)  # a float-only verifier runs the battery in float64
    assert all(not r.lossless for r in reps)
    assert float(reps[0].tv) == pytest.approx(0.139, abs=1e-3)  # two-token example
    with pytest.raises(AssertionError, match=r"TV = 0\.13914\d* > tolerance 1e-12"):
        assert_lossless(pb.softmax_residual)
    with pytest.raises(SpectheoryError, match="float law only"):
        assert_lossless(pb.softmax_residual, exact=True)


def test_mismatched_ties_caught_for_two_paths():
    with pytest.raises(AssertionError) as info:
        assert_lossless("gbv-mismatched-ties", paths=2)
    msg = str(info.value)
    assert "gbv-mismatched-ties (K = 2, iid drafting) is LOSSY" in msg
    failing = msg.split("instances: ")[1].split(", ")
    assert "ties" in failing and "p=q-some-nodes" in failing
    assert_lossless("gbv-mismatched-ties", paths=1)  # nothing to select with one path


def test_uniform_product_caught_and_message_numbers_match_report():
    reps = check_lossless_battery("uniform-product")
    with pytest.raises(AssertionError) as info:
        assert_lossless("uniform-product")
    r = reps[0]
    assert r.instance == "two-token" and r.offending == (0, 0, 0)
    m = re.search(r"output probability (\S+) vs target probability (\S+?)[;]", str(info.value))
    assert float(m.group(1)) == r.output_probability
    assert float(m.group(2)) == r.target_probability


# ----------------------------------------------------------------------------- built-ins pass


@pytest.mark.parametrize("name", [n for n, s in registered(lossless=True).items()
                                  if s.single_path])
def test_single_path_builtins_pass_their_battery(name):
    reps = assert_lossless(name)
    assert len(reps) == 8 and all(r.lossless and r.exact and r.tv == 0 for r in reps)
    assert [r.instance for r in reps] == [b.name for b in default_battery()]
    assert all(r.n_tokens == r_b.instance.block_length + 1
               for r, r_b in zip(reps, default_battery()))


@pytest.mark.parametrize("name", [n for n, s in registered(lossless=True).items()
                                  if not s.single_path])
def test_multi_path_builtins_pass_their_battery(name):
    spec = registered()[name]
    reps = assert_lossless(name, paths=2)
    assert all(r.lossless and r.tv == 0 for r in reps)
    assert all(r.paths == 2 and r.drafting == spec.default_drafting for r in reps)


@pytest.mark.parametrize("name", ["gbv", "traversal"])
def test_three_paths(name):
    assert all(r.lossless for r in assert_lossless(name, paths=3))


# ----------------------------------------------------------------------------- arguments


def test_instances_argument_forms():
    inst = toy_instance()
    named = assert_lossless("block", {"toy": inst})
    assert named[0].instance == "toy"
    assert assert_lossless("block", inst)[0].instance == "instance 0"
    assert assert_lossless("block", BatteryInstance("x", inst, ""))[0].instance == "x"
    assert assert_lossless("block", [("y", inst)])[0].instance == "y"
    floats = assert_lossless("block", exact=False)
    assert all(not r.exact and r.tolerance == 1e-12 for r in floats)
    with pytest.raises(SpectheoryError, match="not a spectheory Instance"):
        assert_lossless("block", [42])
    with pytest.raises(SpectheoryError, match="no instances"):
        assert_lossless("block", [])
    with pytest.raises(SpectheoryError, match="paths"):
        default_battery(0)
    with pytest.raises(SpectheoryError, match="unknown verifier"):
        assert_lossless("no-such-verifier")


def test_hypothesis_only_in_strategies():
    import subprocess
    import sys

    code = ("import sys, spectheory.testing as t; t.assert_lossless; t.default_battery; "
            "t.export_vectors; assert 'hypothesis' not in sys.modules; "
            "from spectheory.testing.checks.strategies import instances, KINDS, make_instance; "
            "assert 'hypothesis' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_sequence_cells_are_named_by_their_tokens():
    """A lossless check's cell c is the output sequence c in base V, first token most
    significant (the label the report prints for its worst cell); c < 0 is the pooled cell."""
    from spectheory.testing.checks.calls import _sequence_label

    label = _sequence_label(2, 3, 2)  # instance 2, V = 3, sequences of L + 1 = 3 tokens
    assert label(0 * 9 + 1 * 3 + 2) == "instance 2: output sequence (0, 1, 2)"
    assert label(2 * 9 + 0 * 3 + 1) == "instance 2: output sequence (2, 0, 1)"
    assert label(-1) == "instance 2: pooled sequences (expected < 5 each)"
