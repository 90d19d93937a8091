"""Bad input through the Python API, found by outside-style probing (2026-12-02): each was a
silent wrong answer (a verdict, a bound or a law computed from input that is not what it
claims), a deep internal exception, or unbounded work. Each is now refused in one line naming
the problem, or computed right.

1. Tables: a masked array (the check summed the unmasked entries, the engines read them all: a
   LOSSY verdict for block verification) and long-double tables (the torch routes raised).
2. The LP helpers outside the LP entry points: the node-budget certificate (a negative
   E[tau+1] "CERTIFIED"; tol and size unchecked), tree outcomes, the trust bounds (a misspelt
   side or a NaN bound let any optimum through), the adaptive helpers.
3. Declarations the engine relies on: ``order_invariant`` (the sorted enumeration on a rule that
   reads the paths' order: a LOSSY verdict for a lossless rule); a VerifierSpec built in Python
   around user code (raised bare); a drop rule's dict (read by its keys) or endless iterator.
4. Arrays: torch complex / bool rows (the imaginary part dropped), meta tensors, K = 0 paths,
   numpy drafts with torch rows, the seeded kit's uniforms (strided seeds refused, shapes
   unchecked), ``process_rows_along`` tokens of the wrong shape, table indices, ``output_block``.
5. Values: unsigned-integer laws (TV 128), a Doob transform of an all-zero phi, 5,000-digit
   rule parameters and 1e308 printed in 309 digits, ``n_tokens`` arrays, text rows, flags.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch

import spectheory as st
from spectheory.inputs.instances import Instance
from spectheory.inputs.models import TableModel, context_independent
from spectheory.registry import VerifierSpec, get_verifier, register
from spectheory.runtime.errors import SpectheoryError, UserCodeError


def two(target, draft) -> Instance:
    def table(x):
        return x if isinstance(x, np.ndarray) else np.asarray(x)  # a masked array stays one

    return Instance(2, 2, TableModel(2, (table(target),)), TableModel(2, (table(draft),)))


HALF = [[0.5, 0.5]]


# ----------------------------------------------------------------------------- 1. tables


def test_masked_and_long_double_tables_are_refused():
    masked = two(np.ma.array([[0.5, 1.0]], mask=[[True, False]]), HALF)
    with pytest.raises(SpectheoryError, match="target's table at depth 0 is a masked array"):
        st.check_lossless("block", masked)
    longd = two(np.array(HALF, dtype=np.longdouble), HALF)
    with pytest.raises(SpectheoryError, match="holds float128; give float64"):
        st.analyze(longd, "block")
    assert st.check_lossless("block", two(np.ma.getdata(masked.target.tables[0]) / 1.5,
                                          HALF)).lossless  # the plain array is read


# ----------------------------------------------------------------------------- 2. LP helpers


def test_the_certificate_checks_instance_tolerance_and_size():
    from spectheory.lp.certificate import certify_node_budget

    with pytest.raises(SpectheoryError, match="negative entry"):
        certify_node_budget(two(HALF, [[1.5, -0.5]]))
    inst = st.random_instance(3, 2, 0)
    for tol in (-1, float("nan"), "x", None, True):
        with pytest.raises(SpectheoryError, match="tol = .* must be a number in \\[0, 1\\)"):
            certify_node_budget(inst, tol=tol)
    with pytest.raises(SpectheoryError, match="exact = 'yes' must be True or False"):
        certify_node_budget(inst, exact="yes")
    huge = Instance(100, 6, context_independent([0.01] * 100), context_independent([0.01] * 100))
    with pytest.raises(SpectheoryError, match="V\\^\\(L\\+1\\) = 100\\^7"):
        certify_node_budget(huge)
    cert = certify_node_budget(inst)
    assert cert.certified and abs(cert.primal_objective
                                  - st.analyze(inst, "block").block_efficiency) < 1e-12


def test_tree_outcomes_and_trust_bounds_check_their_inputs():
    from spectheory.lp.adaptive import adaptive_optimality, stopped_instance
    from spectheory.lp.result import LPResult
    from spectheory.lp.tree import tree_outcomes
    from spectheory.lp.trust import Bound, checked, iid_coverage, paths_bounds, single_path_bounds

    bad = two(HALF, [[1.5, -0.5]])
    good = st.random_instance(3, 2, 0)
    for call in (lambda: tree_outcomes(bad, "2"), lambda: single_path_bounds(bad, False)):
        with pytest.raises(SpectheoryError, match="negative entry"):
            call()
    for call in (lambda: tree_outcomes(None, "2"), lambda: stopped_instance(None, "x"),
                 lambda: adaptive_optimality(None, "x")):
        with pytest.raises(SpectheoryError, match="instance = None is not an Instance"):
            call()
    with pytest.raises(SpectheoryError, match="with_lengths = 'no' must be True or False"):
        tree_outcomes(good, "2", with_lengths="no")
    with pytest.raises(SpectheoryError, match="Bound side = 'UPPER' must be 'lower' or 'upper'"):
        Bound("UPPER", 3.0, "L + 1")
    for value in (float("nan"), float("inf"), "3", None):
        with pytest.raises(SpectheoryError, match="is not a finite number"):
            Bound("upper", value, "x")
    with pytest.raises(SpectheoryError, match="drafting = 'IID'"):
        paths_bounds(good, 2, "IID", False, "direct", [])
    with pytest.raises(SpectheoryError, match="paths = -3"):
        iid_coverage([np.ones(1)], -3)
    res = LPResult("node-budget", 1, 5.0, "highs", "optimal", 1, 1, 0.0)
    with pytest.raises(SpectheoryError, match="above the upper bound 3"):
        checked(res, [Bound("upper", 3.0, "L + 1")])
    res = LPResult("node-budget", 1, "5", "highs", "optimal", 1, 1, 0.0)
    with pytest.raises(SpectheoryError, match="not a finite number"):
        checked(res, [Bound("upper", 3.0, "L + 1")])
    assert len(tree_outcomes(good, "2")) == 2


# ----------------------------------------------------------------------------- 3. declarations


def test_a_false_order_invariant_declaration_is_refused_not_computed():
    """block-first reads path 1 first: declared order-invariant, the sorted enumeration gave
    LOSSY (TV 0.158) for a lossless rule; the declaration is checked on a sample first."""
    inst = st.random_instance(3, 2, 0)
    truthful = get_verifier("block-first")
    false = dataclasses.replace(truthful, name="oi", order_invariant=True, paths_read=None)
    assert st.check_lossless(truthful, inst, paths=2).lossless
    with pytest.raises(SpectheoryError, match="declares order_invariant=True, but its law over "
                                              "emitted sequences changes with the order"):
        st.check_lossless(false, inst, paths=2)
    exact = st.random_instance(3, 2, 0, denominator=60)
    with pytest.raises(SpectheoryError, match="order_invariant"):
        st.analyze(exact, false, paths=3)
    for name in ("gbv", "khisti", "hu", "global-resolution"):  # the declared ones, unrefused
        assert get_verifier(name).order_invariant
        assert st.check_lossless(name, exact, paths=3).lossless, name


@pytest.mark.parametrize("fn, words", [
    (lambda d, q, p: 1 / 0, "verifier 'x' raised ZeroDivisionError"),
    (lambda d, q, p: sys.exit(4), "verifier 'x' called sys.exit(4)"),
])
def test_a_spec_built_around_user_code_is_guarded(fn, words):
    inst = st.random_instance(2, 2, 0)
    with pytest.raises(UserCodeError, match=words.replace("(", "\\(").replace(")", "\\)")):
        st.analyze(inst, VerifierSpec("x", fn))
    assert get_verifier("block").function.__module__.startswith("spectheory.")  # called bare


def test_a_user_analytic_route_must_return_a_block_law():
    from spectheory.engine.analysis import _analytic
    from spectheory.registry import Plan

    spec = dataclasses.replace(get_verifier("gbv"), name="mine", analytic=lambda *a: None)
    with pytest.raises(UserCodeError, match="analytic route returned a NoneType, not a BlockLaw"):
        _analytic(Plan(spec, 2, "iid"), None, None, 2, 2)


@pytest.mark.parametrize("value, words", [
    ({0: 0.1, 1: 0.2}, "returned {0: 0.1, 1: 0.2}; a drop rule returns 2 probabilities"),
    (itertools.repeat(0.1), "returned more than 2 values"),
    ([0.1, 0.2, 0.3], "returned more than 2 values"),
    ({0.1, 0.2}, "a drop rule returns 2 probabilities"),
])
def test_a_drop_rule_returns_a_sequence_of_v_values(value, words):
    from spectheory.engine.adaptive import StoppingRule, analyze_adaptive

    inst = st.random_instance(2, 2, 0)
    with pytest.raises(UserCodeError, match=words.replace("(", "\\(").replace("{", "\\{")):
        analyze_adaptive(inst, "block", StoppingRule("d", lambda s, q, p: value, kind="drop"))
    ok = analyze_adaptive(inst, "block", StoppingRule("d", lambda s, q, p: [0.1, 0.2],
                                                      kind="drop"), aware=True)
    assert ok.lossless and 0 < ok.expected_drafted < 2


def test_register_and_spec_fields_are_checked():
    with pytest.raises(SpectheoryError, match="register takes a VerifierSpec, not str"):
        register("block")
    with pytest.raises(SpectheoryError, match="replace_existing = 'no' must be True or False"):
        register(VerifierSpec("block", lambda d, q, p: None), replace_existing="no")
    assert get_verifier("block").function.__module__.startswith("spectheory.")
    for bad in ("iid", ("bogus",)):
        with pytest.raises(SpectheoryError, match="tree_drafting = .* must be a tuple"):
            VerifierSpec("x", lambda d, q, p: None, tree_drafting=bad)


def test_the_registry_knows_the_draft_tree_schemes():
    """VerifierSpec checks tree_drafting against the schemes the draft-tree engine drafts with
    (one tuple, the engine's taken from the registry)."""
    from spectheory.engine.drafttrees import TREE_DRAFTING

    for t in TREE_DRAFTING:
        VerifierSpec("x", lambda d, q, p: None, tree_drafting=(t,))
    with pytest.raises(SpectheoryError):
        VerifierSpec("x", lambda d, q, p: None, tree_drafting=("none",))


# ----------------------------------------------------------------------------- 4. arrays


@pytest.mark.parametrize("rows, words", [
    (torch.tensor([0.9 + 0j, 0.1 - 5j]), "real numbers, not torch.complex64"),
    (torch.tensor([True, False]), "real numbers, not torch.bool"),
])
def test_process_rows_refuses_complex_and_bool_tensors(rows, words):
    with pytest.raises(SpectheoryError, match=words):
        st.process_rows(rows, None)


def test_law_inputs_on_meta_of_no_paths_or_of_mixed_kinds_are_refused():
    m = "meta"
    cases = [("block", (torch.zeros(1, 2, dtype=torch.long, device=m),
                        torch.full((1, 2, 2), 0.5, device=m), torch.full((1, 3, 2), 0.5, device=m)),
              "meta device"),
             ("specinfer", (torch.zeros(1, 0, 2, dtype=torch.long),
                            torch.zeros(1, 0, 2, 2, dtype=torch.float64),
                            torch.zeros(1, 0, 3, 2, dtype=torch.float64)), "K = 0 paths"),
             ("specinfer", (np.zeros((1, 2, 2), dtype=np.int64),
                            torch.full((1, 2, 2, 2), 0.5, dtype=torch.float64),
                            torch.full((1, 2, 3, 2), 0.5, dtype=torch.float64)), "not a mix")]
    for name, args, words in cases:
        with pytest.raises(SpectheoryError, match=words):
            get_verifier(name).law(*args)
    with pytest.raises(SpectheoryError, match="device 'meta' holds shapes and no values"):
        st.analyze(st.random_instance(2, 2, 0), "block", device="meta")


def test_keyed_uniforms_take_any_strides_and_check_shapes():
    from spectheory.testing.checks.seeds import keyed_uniform

    seeds = np.arange(10)[::-2]
    assert torch.equal(keyed_uniform(seeds, 0, 1), keyed_uniform(seeds.copy(), 0, 1))
    for args, words in (((np.arange(3), np.arange(2), 1), "do not fit"),
                        (([[1, 2], [3]], 0, 1), "seeds must be integers"),
                        ((np.arange(3).reshape(3, 1), 0, 1), "do not fit"),
                        ((torch.arange(3, device="meta"), 0, 1), "meta device")):
        with pytest.raises(SpectheoryError, match=words):
            keyed_uniform(*args)


def test_rows_along_tables_and_output_blocks_check_their_indices():
    from spectheory.inputs.processing import process_rows_along
    from spectheory.sampling import output_block

    rows = torch.full((2, 3, 4), 0.25, dtype=torch.float64)
    for tokens in (torch.zeros(2, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long)):
        with pytest.raises(SpectheoryError, match="rows \\[B, m\\+1, V\\] and tokens \\[B, m\\]"):
            process_rows_along(rows, tokens, {"repetition_penalty": 1.5})
    # a list of the right shape was told "got shapes [2, 3, 4] and None": its type is named
    for args, named in (((rows, [[0, 1], [1, 0]]), "tokens as an array (numpy or torch), not "
                                                    "list"),
                        ((rows.tolist(), torch.zeros(2, 2, dtype=torch.long)),
                         "rows as an array (numpy or torch), not list")):
        with pytest.raises(SpectheoryError) as exc:
            process_rows_along(*args, {"repetition_penalty": 1.5})
        assert str(exc.value) == f"process_rows_along takes {named}", exc.value
    model = st.random_instance(2, 2, 0).target
    for prefix in ([-1], [1.7], [5], [True]):
        with pytest.raises(SpectheoryError, match="is not a token id in 0..1"):
            model.conditional(prefix)
    with pytest.raises(SpectheoryError, match="level d = -1 must be a whole number"):
        model.level(-1)
    with pytest.raises(SpectheoryError, match="needs about .* of memory"):
        model.level(60)
    assert np.array_equal(model.conditional([1, 0, 1, 1]), model.level(2)[0b11])
    d = torch.tensor([[1, 2, 3]])
    for tau, words in ((torch.tensor([-1]), "tau holds -1"), (torch.tensor([4]), "tau holds 4"),
                       (torch.tensor([1, 2]), "disagree on B")):
        with pytest.raises(SpectheoryError, match=words):
            output_block(d, tau, torch.tensor([0]))
    assert output_block(d, torch.tensor([2]), torch.tensor([9])) == [(1, 2, 9)]


# ----------------------------------------------------------------------------- 5. values


def test_total_variation_of_unsigned_laws_and_the_doob_root():
    from spectheory.inputs import grammar_laws as g

    assert g.total_variation(np.array([1, 0], np.uint8), np.array([0, 1], np.uint8)) == 1
    assert g.total_variation(np.array([1, 0]), np.array([0.5, 0.5])) == 0.5
    inst = st.random_instance(2, 1, 0)
    zeros = [np.zeros(2 ** d) for d in range(3)]
    for call in (lambda: g.doob_law(inst, zeros, 2), lambda: g.doob_instance(inst, zeros, 2)):
        with pytest.raises(SpectheoryError, match="phi is 0 on every token of positive target "
                                                  "probability after the empty prefix"):
            call()


def test_rule_parameters_print_short_and_long_exact_ones_are_refused():
    from spectheory.verifiers.ears import ears

    with pytest.raises(SpectheoryError, match="5001-digit denominator is longer than an exact "
                                              "parameter may be"):
        ears(Fraction(1, 10 ** 5000))
    with pytest.raises(SpectheoryError) as err:
        get_verifier("cascade-opt(1e308)")
    assert len(str(err.value)) < 200
    assert ears(Fraction(1, 10 ** 50)).name.startswith("ears(1/1000")


def test_n_tokens_and_text_rows_are_checked():
    inst = st.random_instance(2, 2, 0)
    for n in (np.array([3, 3]), 3.0, 0, Fraction(3), True):
        with pytest.raises(SpectheoryError, match="n_tokens = .* must be a whole number >= 1"):
            st.check_lossless("block", inst, n_tokens=n)
    assert st.check_lossless("block", inst, n_tokens=np.int64(4)).lossless
    for row in (["0.5", "0.5"], [True, False], np.array(["a", "b"])):
        with pytest.raises(SpectheoryError, match="not text or booleans"):
            context_independent(row)


# ----------------------------------------------------------------------------- 6. the seeded kit


def test_companion_seeds_cannot_be_other_rows_seeds():
    """check_batch_invariance gives the rows beside a batch the seed s XOR 2^61: seeds 1 and
    1 + 2^61 made a companion another row's request, and a correct engine FAILed."""
    from spectheory.testing import ZeroDraftAdvanceEngine, check_batch_invariance

    with pytest.raises(SpectheoryError, match="differ only in bit 61"):
        check_batch_invariance(lambda: ZeroDraftAdvanceEngine(zero_draft_bug=False),
                               seeds=[1, 1 + 2 ** 61], tokens=4)


def test_seeded_checks_read_the_tables_they_replay():
    from spectheory.testing.checks.seeds import (check_batch_invariance, check_seed_replay,
                                                 sample_match_step)

    bad = st.random_instance(3, 2, 21)
    bad.target.tables[0][0, 0] = float("nan")  # after the instance was checked
    for check in (check_seed_replay, check_batch_invariance):
        with pytest.raises(SpectheoryError, match="instance 0: the target row after prefix"):
            check(sample_match_step, instances=[bad], seeds=[1, 2], tokens=3)


def test_step_outputs_that_cannot_be_read_are_notes_not_tracebacks():
    from spectheory.testing import check_step
    from spectheory.testing.checks.seeds import sample_match_step

    class Broken(list):
        def __len__(self):
            raise RuntimeError("no length")

    for change, words in ((lambda out: out.to_sparse(), "a Tensor that cannot be read"),
                          (lambda out: Broken(out.tolist()), "a Broken that cannot be read"),
                          (lambda out: out.to(torch.uint8), "cannot hold the -1 padding")):
        rep = check_step(lambda r, c=change: c(sample_match_step(r)), samples=200)
        assert not rep.passed and words in str(rep), str(rep)


def test_draft_sampling_is_checked_against_the_instance_first():
    from spectheory.testing import check_step
    from spectheory.testing.checks.seeds import sample_match_step

    with pytest.raises(SpectheoryError, match="draft_sampling: stop token 7 is outside the "
                                              "vocabulary 0..2 \\(instance 0\\)"):
        check_step(sample_match_step, draft_sampling="min_tokens=1,stop_token_ids=7", samples=100)


def test_inverse_cdf_and_keyed_uniform_bounds():
    from spectheory.testing.checks.seeds import (MAX_POSITION, check_seed_replay, inverse_cdf,
                                                 keyed_uniform, sample_match_step)

    for rows, u in ((torch.rand(2, 3), torch.rand(5)), (torch.rand(3), torch.rand(1)),
                    (torch.zeros(2, 0), torch.rand(2))):
        with pytest.raises(SpectheoryError, match="inverse_cdf takes rows"):
            inverse_cdf(rows, u)
    with pytest.raises(SpectheoryError, match="not finite non-negative weights"):
        inverse_cdf(torch.tensor([[float("nan"), 1.0]]), torch.rand(1))
    assert inverse_cdf(torch.tensor([[0.0, 1.0, 0.0]]), torch.tensor([0.5])).tolist() == [1]
    with pytest.raises(SpectheoryError, match="positions must be integers in 0..2\\^44-1"):
        keyed_uniform([5], MAX_POSITION + 1, 2)  # 2^44 gave the uniforms of position 0
    with pytest.raises(SpectheoryError, match="over the limit of"):
        keyed_uniform(np.broadcast_to(np.int64(1), (10 ** 9,)), 0, 1)
    assert keyed_uniform([], 0, 1).shape == (0,)
    with pytest.raises(SpectheoryError, match="seeds on the meta device"):
        check_seed_replay(sample_match_step, seeds=torch.empty(2, dtype=torch.long,
                                                                device="meta"))


def test_the_stateful_replicas_helpers_check_their_arguments():
    from spectheory.testing.mutants import stateful_steps as ss

    inst = ss.stateful_instance()
    cases = [(lambda: ss.replica_step("bogus"), "unknown stateful rule 'bogus'"),
             (lambda: ss.stateful_step_law("bogus", inst, 1), "unknown stateful rule"),
             (lambda: ss.stateful_step_law(5, inst, 1), "unknown stateful rule 5"),
             (lambda: ss.stateful_step_law("sglang-33643", None, 1), "not NoneType"),
             (lambda: ss.stateful_step_law("sglang-33643", inst, 0), "steps = 0"),
             (lambda: ss.stateful_step_law("sglang-33643", inst, 10 ** 15), "steps = "),
             (lambda: ss.stateful_step_law("sglang-33643", inst, 1, num_draft=1.5),
              "num_draft = 1.5"),
             (lambda: ss.schedule_gap("sglang-33643", inst, 1, -5), "samples = -5"),
             (lambda: ss.check_step_power([0.5, 0.5], [0.5, 0.5], 10, trials=10 ** 12),
              "trials = "),
             (lambda: ss.check_step_power([-1, 2], [0.5, 0.5], 10), "must be laws"),
             (lambda: ss.tv([1, 0], [1, 0, 0]), "laws of shapes"),
             (lambda: ss.after_token_grammar(end=5), "end = 5"),
             (lambda: ss.no_repeat_grammar(V=10 ** 6), "V = 1000000"),
             (lambda: ss.draft_half("bogus"), "no half of this replica")]
    for call, words in cases:
        with pytest.raises(SpectheoryError, match=words.replace("(", "\\(")):
            call()
    law = ss.stateful_step_law("sglang-33643", inst, 1)
    assert abs(law.sum() - 1) < 1e-12
