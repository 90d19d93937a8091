"""float64 at its ends: draft probabilities within 1e-12 of 1 (1 - q(x) cancels) and subnormal
draft entries (p / q overflows). Lossless verifiers must stay lossless and LP optima within
their bounds; each case below gave a wrong number or a wrong verdict before."""

from __future__ import annotations

import pytest

from spectheory.engine.analysis import analyze
from spectheory.engine.lossless import check_lossless
from spectheory.inputs.instances import instance_from_dict
from spectheory.inputs.random_instances import random_instance


def _flat(V, L, target, draft, exact=False):
    """An instance whose every target row is ``target`` and every draft row ``draft``."""
    import itertools

    t = {",".join(map(str, s)): target for d in range(L + 1)
         for s in itertools.product(range(V), repeat=d)}
    q = {",".join(map(str, s)): draft for d in range(L)
         for s in itertools.product(range(V), repeat=d)}
    return instance_from_dict({"vocab_size": V, "block_length": L, "target": t, "draft": q},
                              exact=exact)


@pytest.mark.parametrize("tiny", [1e-12, 1e-17, 1e-300])
@pytest.mark.parametrize("verifier", ["specinfer-norep", "hu-norep", "spechub"])
def test_norep_and_hub_weights_near_one(tiny, verifier):
    """The second draft's probability q(y) / (1 - q(x)) with q(x) = 1 - 1e-12: 1 - q(x) kept 4
    digits (TV 1.1e-5, an output probability 1.0000221, E[tau+1] = 2.000022 > L + 1, LOSSY);
    at 1e-17 it was 0 (TV 0.5)."""
    inst = _flat(2, 1, [1.0, 0.0], [tiny, 1.0 - tiny])
    res = analyze(inst, verifier, paths=2)
    assert res.tv_to_target < 1e-15 and res.block_efficiency <= 2 + 1e-15
    assert check_lossless(verifier, inst, paths=2).lossless


@pytest.mark.parametrize("verifier", ["specinfer-norep", "hu-norep", "spechub"])
def test_norep_and_hub_under_a_low_draft_temperature(verifier):
    """The same cancellation on an ordinary instance with the draft at temperature 0.02 (TV 0.5
    at 0.02, 6e-4 at 0.05, LOSSY)."""
    inst = random_instance(3, 2, 1)
    for t in ("0.1", "0.02"):
        rep = check_lossless(verifier, inst, paths=2, draft_sampling=f"temperature={t}")
        assert rep.lossless and rep.tv < 1e-12, (t, rep.tv)


def test_lp_bounds_and_optima_under_hub_drafting_near_one():
    """The hub coverage bound used 1 - q(a) (1.9007 for 2 with q(a) = 1 - 1e-16), and the
    selection LP's optimum 2 was refused as above it; SpecHub reached 2 exactly."""
    from fractions import Fraction as F

    from spectheory import lp

    near = ["9999999999999999/10000000000000000", "1/10000000000000000", "0"]
    draft = ["1/10000000000000000", "9999999999999999/10000000000000000", "0"]
    inst = _flat(3, 2, near, draft, exact=True)
    exact = analyze(inst, "spechub", exact=True, paths=2).block_efficiency
    assert exact == F(10000000000000001, 5000000000000000)  # 2 + 2e-16
    assert abs(lp.selection_lp(inst.to_float(), 2, drafting="hub").optimum - 2) < 1e-9
    for drafting in ("norep", "hub"):
        assert abs(lp.direct_lp(inst.to_float(), 2, drafting=drafting).optimum - 2) < 1e-9


@pytest.mark.parametrize("verifier,paths", [("block", 1), ("gbv", 2), ("traversal", 2),
                                            ("traversal-iid", 1), ("hsd", 1), ("token", 1)])
def test_subnormal_draft_entries_keep_every_law_finite(verifier, paths):
    """Draft rows (3e-315, 1): p / q = 1 / 3e-315 overflowed to inf, a weight that had
    underflowed to 0 times inf was NaN, and block verification was "NOT A LAW (nan)", exit 1."""
    inst = _flat(2, 3, [1.0, 3e-315], [3e-315, 1.0])
    rep = check_lossless(verifier, inst, paths=paths)
    assert rep.lossless and rep.tv < 1e-300
    mixed = _flat(3, 2, [3e-315, 0.6, 0.4], [0.3, 3e-315, 0.7])
    assert check_lossless(verifier, mixed, paths=paths).lossless
    # a zero in the draft rows: the ratio's screen fails and the patched division runs
    zeros = _flat(3, 3, [1.0, 3e-315, 0.0], [3e-315, 1.0, 0.0])
    assert check_lossless(verifier, zeros, paths=paths).lossless


def test_lps_on_subnormal_probabilities():
    """Row equilibration divided a row by its largest entry, 3e-315: b / 3e-315 overflowed and
    scipy raised "b_ub must not contain values inf" (a traceback from `spectheory lp`); the
    direct LP's norep weights had NaN. Block verification is optimal at K = 1."""
    from spectheory import lp

    inst = _flat(3, 2, [3e-315, 0.6, 0.4], [0.3, 3e-315, 0.7])
    block = analyze(inst, "block").block_efficiency
    assert abs(lp.node_budget_lp(inst).optimum - block) < 1e-9
    assert lp.multipath_lp(inst, 2).optimum >= block - 1e-9
    assert lp.direct_lp(inst, 2, drafting="norep").optimum >= block - 1e-9


def test_a_k_equals_v_norep_draw_with_a_5e_324_entry():
    """K = 3 paths without replacement over V = 3 tokens, one of probability 5e-324: every
    outcome holds it, and q(x) x tail / left underflowed to 0 before the division, so the law
    was all zeros (E[tau+1] = 1, TV 0.5, exit 0 from `exact`). Exact value: 2.5 (with 1e-85)."""
    from spectheory import lp
    from spectheory.lp.result import LPError

    inst = _flat(3, 2, [0.5, 0.5, 0.0], [5e-324, 0.5, 0.5])
    for verifier in ("traversal", "specinfer-norep"):
        res = analyze(inst, verifier, paths=3, drafting="norep")
        assert abs(res.block_efficiency - 2.5) < 1e-12 and res.tv_to_target < 1e-12
    with pytest.raises(LPError, match="outcomes' probabilities sum to 0, not 1"):
        lp.direct_lp(inst, 3, drafting="norep")  # the path probabilities themselves underflow


@pytest.mark.parametrize("tiny", [3e-315, 1e-320])
def test_traversal_tree_ratio_at_a_subnormal_draft_entry(tiny):
    """traversal-tree's top-down p_alpha update divided by a subnormal M_s entry: inf, and
    0 x inf NaN ("NOT A LAW", exit 1)."""
    inst = _flat(3, 2, [0.5, 0.5, 0.0], [tiny, 0.5, 0.5 - tiny])
    for K in (2, 3):
        assert check_lossless("traversal-tree", inst, paths=K).lossless


@pytest.mark.parametrize("scheme", ["slrs", "tli"])
def test_heterogeneous_rejection_where_the_residual_is_rounding_noise(scheme):
    """A draft row (1, 1e-17, 0): the rejected mass 1 - sum min(p, q) is rounding noise while
    the residual's total is exactly 0, and reject x r / z was 0/0 (TV nan, LOSSY)."""
    import itertools
    import json

    from spectheory.inputs.tokenizers import hetero_from_dict
    from spectheory.verifiers.hetero import check_hetero_lossless

    def rows(row):
        return {",".join(map(str, s)): row for d in range(3)
                for s in itertools.product(range(3), repeat=d)}

    data = {"alphabet": "ab", "target_vocab": ["a", "b", "ab"], "draft_vocab": ["a", "b", "ba"],
            "draft_length": 2, "n_tokens": 3, "target": rows([1.0, 0.0, 0.0]),
            "draft": rows([1.0, 1e-17, 0.0])}
    inst = hetero_from_dict(json.loads(json.dumps(data)))
    rep = check_hetero_lossless(inst, scheme)
    assert rep.lossless, rep


def test_the_kl_frontier_refusal_on_a_subnormal_target_is_one_line(capsys):
    """The KL point check divided numpy floats by a subnormal target entry: two overflow
    RuntimeWarnings on stderr before the refusal line."""
    import warnings

    from spectheory.lp.frontier import frontier_lp
    from spectheory.lp.result import LPError

    inst = _flat(3, 2, [3e-315, 0.5, 0.5], [0.3, 0.3, 0.4])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow warning would be raised here
        try:
            res = frontier_lp(inst, kl=0.1)
        except LPError:
            return
    assert res.optimum >= analyze(inst, "block").block_efficiency - 1e-9


def test_check_step_says_when_no_sample_count_within_its_limit_can_test_an_instance():
    """An instance within 3e-12 of one sequence: the refusal advised 10,000,000,000,020 samples,
    which --samples (at most 10^9) refuses in turn."""
    from spectheory.runtime.errors import TooFewSamplesError
    from spectheory.testing import check_step, vllm_v1_step

    inst = _flat(2, 1, [1 - 1e-12, 1e-12], [1 - 1e-12, 1e-12])
    with pytest.raises(TooFewSamplesError, match="cannot be tested by sampling: its law is "
                                                 "within .* of one sequence.*over the limit of "
                                                 "1,000,000,000"):
        check_step(vllm_v1_step, instances=[inst], samples=4000)


@pytest.mark.parametrize("extreme", ["near-one", "subnormal"])
def test_prefix_dependent_rows_at_the_ends_and_a_planted_bug_still_caught(extreme):
    """The same classes on prefix-dependent rows (a random instance whose root draft row is
    replaced): every lossless rule stays lossless under each drafting, and a lossy rule
    (lenience 1/2, LOSSY wherever p < q / 2 somewhere) is still caught on these rows."""
    import numpy as np

    from spectheory.inputs.instances import Instance
    from spectheory.inputs.models import TableModel

    base = random_instance(3, 2, 7)
    root = np.array([[1 - 1e-12, 5e-13, 5e-13]] if extreme == "near-one"
                    else [[3e-315, 0.45, 0.55 - 3e-315]])
    draft = TableModel(3, [root] + list(base.draft.tables[1:]))
    inst = Instance(3, 2, base.target, draft)
    assert not base.target.context_independent
    for verifier, paths, drafting in [("block", 1, None), ("hsd", 1, None),
                                      ("specinfer-norep", 2, "norep"), ("hu-norep", 2, "norep"),
                                      ("spechub", 2, "hub"), ("gbv", 2, None),
                                      ("traversal-tree", 2, None)]:
        kw = {"paths": paths} | ({"drafting": drafting} if drafting else {})
        rep = check_lossless(verifier, inst, **kw)
        assert rep.lossless and rep.tv < 1e-12, (verifier, rep.tv)
    assert not check_lossless("lenient(1/2)", inst).lossless  # a planted bug, still caught


@pytest.mark.parametrize("mode", ["law", "lossless"])
def test_chain_and_tree_checks_never_advise_a_sample_count_over_their_own_limit(mode):
    """Rows within 1e-13 of a point mass: a first test needs more samples than the mode runs
    (4.32e12 in chain mode, 10^10 in tree mode); the refusal says no count within the limit
    tests them instead of advising 4e14. Within reach (1e-11 / 1e-9) the advice stands."""
    from spectheory.runtime.errors import TooFewSamplesError
    import spectheory.testing as T
    from spectheory.testing.checks.report import SAMPLE_LIMIT
    from spectheory.testing.checks.tree import MAX_SAMPLES as TREE_LIMIT

    tree = T.tree_engine_sampler(T.tree_speculative_sampling_target_only, "sglang-tree")
    runs = {"chain": (lambda inst: T.check_sampler(T.make_sampler("block"), "block", [inst],
                                                   samples=1000, mode=mode), SAMPLE_LIMIT, 1e-11),
            "tree": (lambda inst: T.check_tree_sampler(tree, "sglang-tree", samples=1000,
                                                       mode=mode, instances=[inst]),
                     TREE_LIMIT, 1e-9)}
    for run, limit, reach in runs.values():
        with pytest.raises(TooFewSamplesError, match=f"no sample count within the limit of "
                                                     f"{limit:,} tests any") as exc:
            run(_flat(2, 2, [1 - 1e-13, 1e-13], [1 - 1e-13, 1e-13]))
        assert exc.value.needs_samples > limit
        with pytest.raises(TooFewSamplesError, match="a first test") as exc:
            run(_flat(2, 2, [1 - reach, reach], [1 - reach, reach]))
        assert "limit" not in str(exc.value) and exc.value.needs_samples <= limit


def test_a_first_test_within_reach_and_every_row_out_of_it_are_told_apart():
    """An ordinary instance beside one within 1e-13 (chain) or 3e-10 (tree) of a point mass, 4
    samples: a first test needs 80, a test of every instance more than the mode runs."""
    from spectheory.runtime.errors import TooFewSamplesError
    import spectheory.testing as T
    from spectheory.testing.checks.report import SAMPLE_LIMIT
    from spectheory.testing.checks.tree import MAX_SAMPLES as TREE_LIMIT

    fair = _flat(2, 2, [0.5, 0.5], [0.5, 0.5])
    tree = T.tree_engine_sampler(T.tree_speculative_sampling_target_only, "sglang-tree")
    runs = [(lambda i: T.check_sampler(T.make_sampler("block"), "block", [fair, i], samples=4,
                                       mode="lossless"), SAMPLE_LIMIT, 1e-13),
            (lambda i: T.check_tree_sampler(tree, "sglang-tree", samples=4, mode="lossless",
                                            instances=[fair, i]), TREE_LIMIT, 3e-10)]
    for run, limit, eps in runs:
        with pytest.raises(TooFewSamplesError, match=f"a first test needs at least 80 samples; a "
                                                     f"test of every .* over the limit of "
                                                     f"{limit:,}") as exc:
            run(_flat(2, 2, [1 - eps, eps], [1 - eps, eps]))
        assert exc.value.needs_samples > limit
