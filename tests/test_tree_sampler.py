"""Tree mode of the conformance kit (spectheory.testing.checks.tree), the ports of SGLang's tree
kernel and EAGLE's evaluate_posterior (spectheory.testing.checks.tree_ports), and SGLang's tree rule
as a verifier (spectheory.verifiers.sglang_tree)."""

from __future__ import annotations

import dataclasses
import functools
import re
from fractions import Fraction as F

import numpy as np
import pytest
import torch

from cli_helpers import run
from spectheory.engine.analysis import analyze_tree
from spectheory.engine.drafttrees import tree_shape
from spectheory.engine.output import target_law
from spectheory.inputs.instances import Instance
from spectheory.inputs.models import TableModel
from spectheory.inputs.random_instances import random_instance
from spectheory.registry import get_verifier
from spectheory.runtime.errors import OptionError, SpectheoryError, UserCodeError
from spectheory.testing.statistics import stats
from spectheory.testing.checks.tree import (check_tree_sampler,
                                            conditional_tree_law, default_tree_instances, draft_trees,
                                            emitted_groups, tied_instance, tree_output_law)
from spectheory.testing.checks.tree_ports import (EAGLE_POSTERIOR, EAGLE_POSTERIOR_BUGS, SGLANG_TREE,
                                                  SGLANG_TREE_BUGS, eagle_posterior_bug,
                                                  evaluate_posterior, planted_bug_law, planted_bug_tv,
                                                  sglang_tree_bug,
                                                  tree_engine_sampler,
                                                  tree_speculative_sampling_target_only)
from spectheory.verifiers.sglang_tree import SGLANG_TREE as SGLANG_RULE
from spectheory.verifiers.sglang_tree import sglang_tree_verifier

#: An EAGLE choices list (tree_choices): leaves at depths 1 and 2.
CHOICES = [[0], [1], [0, 0], [0, 1], [1, 0]]
#: Small top-k trees on which the planted bugs are large.
TREES = [(2, 1), CHOICES]
#: A prefix-dependent rational instance with ties (rows in quarters, tied root rows), V = 3,
#: L = 2: the third default instance of the choices tree, exact.
TIES = tied_instance(3, 2)
#: Another prefix-dependent rational instance (twelfths).
TWELFTHS = random_instance(3, 2, 1, denominator=12)


def sglang(fn=tree_speculative_sampling_target_only, **options):
    return tree_engine_sampler(fn, SGLANG_TREE, **options)


def eagle(fn=evaluate_posterior):
    return tree_engine_sampler(fn, EAGLE_POSTERIOR)


def two_token(p0, q0) -> Instance:
    """V = 2, L = 1: target row (p0, 1 - p0) and draft row (q0, 1 - q0) at the root."""
    P0 = np.array([[F(p0), 1 - F(p0)]], dtype=object)
    P1 = np.array([[F(1, 2), F(1, 2)]] * 2, dtype=object)
    Q0 = np.array([[F(q0), 1 - F(q0)]], dtype=object)
    return Instance(2, 1, TableModel(2, (P0, P1)), TableModel(2, (Q0,)))


def output_tv(law, inst, D):
    tl = [np.ascontiguousarray(inst.to_exact().target.level(d)) for d in range(D + 1)]
    tgt = target_law(tl, D + 1)[0]
    return sum(abs(a - b) for a, b in zip(law, tgt)) / 2


# ----------------------------------------------------------------------------- the reference law


@pytest.mark.parametrize("verifier, drafting, tree", [
    ("specinfer", "iid", (2, 1)), ("specinfer", "iid", (1, 2)),
    ("specinfer-norep", "norep", (2, 2)), ("specinfer-norep", "iid", (2, 1)),
    ("topk", "topk", CHOICES), ("topk", "iid", {"parents": [0, 1, 0]}),
    ("topk", "norep", (2, 1)), ("sglang-tree", "topk", CHOICES),
    ("sglang-tree", "iid", (2, 1)), ("sglang-tree", "iid", {"parents": [0, 1, 0, 1]}),
    ("sglang-tree", "norep", (2, 1)), ("specinfer", "norep", (2, 1))])
def test_conditional_laws_average_to_the_exact_engine(verifier, drafting, tree):
    """The tree mode's reference: the conditional law given each drafted tree, weighted by the
    drafting law, is analyze_tree's output law, in exact rationals (prefix-dependent rows)."""
    inst = TWELFTHS
    mine = tree_output_law(verifier, inst, tree, drafting)
    res = analyze_tree(inst, verifier, tree, drafting=drafting, exact=True)
    assert list(mine) == list(np.asarray(res.output_law).reshape(-1))


def test_sglang_rule_walks_into_the_accepted_child_not_the_merged_node():
    """Under i.i.d. children two siblings may carry one token: SGLang's kernel moves into the
    accepted child's own subtree, SpecInfer's token tree merges them. The two readings differ,
    and the conditional walk and the node route agree on each."""
    merged = dataclasses.replace(SGLANG_RULE, name="sglang-merged", rule_merges_repeats=True)
    laws = []
    for spec in (SGLANG_RULE, merged):
        mine = tree_output_law(spec, TWELFTHS, (2, 1), "iid")
        res = analyze_tree(TWELFTHS, spec, (2, 1), drafting="iid", exact=True)
        assert list(mine) == list(np.asarray(res.output_law).reshape(-1))
        laws.append(list(mine))
    a, b = laws  # the conditional walk's laws of the two readings, as checked above
    assert a != b


def test_conditional_law_groups_equal_token_paths():
    tree = tree_shape((2, 1))
    paths, group = emitted_groups(tree, [1, 0, 1, 2])  # both root children drew token 1
    assert paths == [(), (1,), (1, 0), (1, 2)]
    assert group == [0, 1, 2, 1, 3]
    q = torch.full((5, 3), 1 / 3, dtype=torch.float64)
    p = torch.tensor([[0.2, 0.5, 0.3]] * 5, dtype=torch.float64)
    paths, law = conditional_tree_law("specinfer", tree, [1, 0, 1, 2], q, p)
    assert abs(float(law.sum()) - 1) < 1e-12


# ----------------------------------------------------------------------------- drafting claims


def test_sglang_rule_exact_on_distinct_siblings_lossy_on_iid_and_specinfer_the_reverse():
    """Independent derivation (V = 2, L = 1, two children): with p = (a, 1 - a), a <= 1/2, two
    i.i.d. children both draw token 0 w.p. q0^2 and are then accepted w.p. min(1, 2a); both draw
    1 w.p. q1^2 and then Y = 0 never. So P(Y = 0) = a + q0^2 a - q1^2 a and TV = a |q0 - q1|:
    1/6 at a = 1/2, q = (2/3, 1/3). Distinct children (topk, norep): TV 0."""
    inst = two_token(F(1, 2), F(2, 3))
    assert analyze_tree(inst, "sglang-tree", (2,), drafting="iid", exact=True).tv_to_target \
        == F(1, 6)
    for a, q0 in ((F(1, 3), F(3, 4)), (F(1, 5), F(1, 10))):
        res = analyze_tree(two_token(a, q0), "sglang-tree", (2,), drafting="iid", exact=True)
        assert res.tv_to_target == a * abs(2 * q0 - 1)
    for drafting in ("topk", "norep"):
        assert analyze_tree(inst, "sglang-tree", (2,), drafting=drafting,
                            exact=True).tv_to_target == 0
        assert analyze_tree(TWELFTHS, "sglang-tree", (2, 2), drafting=drafting,
                            exact=True).tv_to_target == 0
    assert analyze_tree(TWELFTHS, "sglang-tree", (2, 2), drafting="iid",
                        exact=True).tv_to_target > 0
    # SpecInfer: exact under i.i.d. children, lossy on distinct ones (docs/trees.md: 1/144)
    assert analyze_tree(TWELFTHS, "specinfer", (2, 2), drafting="iid",
                        exact=True).tv_to_target == 0
    assert analyze_tree(TWELFTHS, "specinfer", (2, 2), drafting="norep",
                        exact=True).tv_to_target == F(1, 144)


@pytest.mark.parametrize("name", ["specinfer", "specinfer-norep", "topk", "sglang-tree"])
def test_registry_declares_the_drafting_each_rule_is_exact_under(name):
    spec = get_verifier(name, multi_path=True)
    assert spec.tree_drafting, name
    for drafting in spec.tree_drafting:
        # an uneven tree where the rule has the node route (sglang-tree under norep has the
        # enumerate route only, which refuses uneven trees)
        uneven = [] if (name, drafting) == ("sglang-tree", "norep") else [{"parents": [0, 1, 0]}]
        for tree in [(2, 1), (1, 2)] + uneven:
            res = analyze_tree(TWELFTHS, spec, tree, drafting=drafting, exact=True)
            assert res.tv_to_target == 0, (name, drafting, tree)


def test_relaxed_thresholds_are_lossy_and_refused_out_of_range():
    for ts, ta in ((1, F(1, 2)), (F(1, 3), 1), (F(1, 2), F(3, 4))):
        spec = sglang_tree_verifier(ts, ta)
        assert not spec.lossless and spec.tree_drafting == ()
        assert analyze_tree(TIES, spec, CHOICES, drafting="topk", exact=True).tv_to_target > 0
    assert sglang_tree_verifier(1, 1).lossless
    for bad in (0, 1.5, -1, "1", True):
        with pytest.raises(SpectheoryError, match="threshold"):
            sglang_tree_verifier(bad, 1)


# ----------------------------------------------------------------------------- the ports pass


@pytest.mark.parametrize("tree", TREES, ids=["2,1", "choices"])
def test_sglang_port_passes_law_mode_on_topk_trees(tree):
    rep = check_tree_sampler(sglang(), tree=tree, samples=6000, seed=1)
    assert rep.passed, rep
    assert rep.verifier == "sglang-tree" and rep.drafting == "topk" and rep.dof > 0
    assert rep.min_detectable_tv < 0.08


@pytest.mark.parametrize("tree", TREES, ids=["2,1", "choices"])
def test_eagle_port_passes_law_mode_on_topk_trees(tree):
    rep = check_tree_sampler(eagle(), tree=tree, samples=2000, seed=2)
    assert rep.passed, rep
    assert rep.verifier == "topk" and rep.drafting == "topk"


def test_ports_pass_lossless_mode_under_their_drafting():
    assert check_tree_sampler(sglang(), tree=CHOICES, samples=6000, mode="lossless").passed
    assert check_tree_sampler(eagle(), tree=(2, 1), samples=2000, mode="lossless").passed


def test_visiting_siblings_in_another_order_is_not_a_bug():
    """At thresholds 1 the law does not depend on the order the siblings are tried in."""

    def reversed_siblings(predicts, accept_index, accept_token_num, candidates, retrive_index,
                          retrive_next_token, retrive_next_sibling, uniform_samples,
                          uniform_samples_for_final_sampling, target_probs, draft_probs,
                          threshold_single=1.0, threshold_acc=1.0, deterministic=True):
        # the tree links as lists (one conversion, not one tensor read a node)
        first, after = retrive_next_token.tolist(), retrive_next_sibling.tolist()
        nt, ns = [row[:] for row in first], [row[:] for row in after]
        for b in range(len(first)):
            for u in range(len(first[b])):
                kids, c = [], first[b][u]
                while c != -1:
                    kids.append(c)
                    c = after[b][c]
                if kids:
                    kids.reverse()
                    nt[b][u] = kids[0]
                    for x, y in zip(kids, kids[1:] + [-1]):
                        ns[b][x] = y
        nt, ns = retrive_next_token.new_tensor(nt), retrive_next_sibling.new_tensor(ns)
        tree_speculative_sampling_target_only(predicts, accept_index, accept_token_num,
                                              candidates, retrive_index, nt, ns,
                                              uniform_samples,
                                              uniform_samples_for_final_sampling, target_probs,
                                              draft_probs, threshold_single, threshold_acc,
                                              deterministic)

    assert check_tree_sampler(sglang(reversed_siblings), tree=CHOICES, samples=3000).passed

    def reversed_paths(logits, candidates, processor, rand):
        best, tau, sample_p = evaluate_posterior(logits.flip(0), candidates.flip(0), processor,
                                                 rand)
        return candidates.shape[0] - 1 - best, tau, sample_p

    assert check_tree_sampler(eagle(reversed_paths), tree=CHOICES, samples=2000).passed


# ----------------------------------------------------------------------------- planted bugs


@pytest.mark.parametrize("bug", list(SGLANG_TREE_BUGS))
@pytest.mark.parametrize("tree", TREES, ids=["2,1", "choices"])
def test_planted_bugs_in_the_sglang_port_are_caught(bug, tree):
    rep = check_tree_sampler(sglang(sglang_tree_bug(bug)), tree=tree, samples=3000)
    assert not rep.passed, (bug, str(rep))
    assert rep.p_value < 1e-6


@pytest.mark.parametrize("bug", list(EAGLE_POSTERIOR_BUGS))
@pytest.mark.parametrize("tree", TREES, ids=["2,1", "choices"])
def test_planted_bugs_in_the_eagle_port_are_caught(bug, tree):
    rep = check_tree_sampler(eagle(eagle_posterior_bug(bug)), tree=tree, samples=1000)
    assert not rep.passed, (bug, str(rep))
    assert rep.p_value < 1e-6


def test_a_relaxed_deployment_passes_against_its_own_law_only():
    relaxed = sglang(threshold_acc=0.5)
    assert check_tree_sampler(relaxed, tree=CHOICES, samples=4000).passed  # claims (1, 1/2)
    assert not check_tree_sampler(relaxed, "sglang-tree", tree=CHOICES, samples=4000).passed
    bug = sglang(sglang_tree_bug("threshold"))
    assert check_tree_sampler(bug, sglang_tree_verifier(1, 0.5), tree=CHOICES,
                              samples=4000).passed


def _observed(sampler, tree, inst, paths, n: int, seed: int = 5) -> np.ndarray:
    """Counts of the sampler's emitted sequences (node group, Y) on ``n`` copies of the top-k
    tree of ``inst``, whose token paths must be ``paths``."""
    d = draft_trees(inst.to_float(), tree, "topk", n, torch.Generator().manual_seed(seed))
    node, y = sampler(d.tokens, tuple(tree.parents), d.q, d.p,
                      torch.Generator().manual_seed(seed + 1))
    got_paths, group = emitted_groups(tree, d.tokens[0].tolist())
    assert got_paths == paths
    V = inst.vocab_size
    return np.bincount((torch.tensor(group)[node] * V + y).numpy(), minlength=len(paths) * V)


def _law_fits(obs, law, n: int) -> float:
    """p-value of the counts ``obs`` (`_observed`) against the conditional law ``law [G, V]``."""
    probs = np.array([float(x) for x in np.asarray(law).reshape(-1)])
    return stats.row_chi_square(obs, probs, n).p_value


@pytest.mark.parametrize("engine, bug", [("sglang", b) for b in SGLANG_TREE_BUGS]
                         + [("eagle", b) for b in EAGLE_POSTERIOR_BUGS])
def test_bug_models_match_the_bugged_ports_and_have_positive_tv(engine, bug):
    """Each planted bug's exact model (written from the rule with the bug, not from the port)
    fits its bugged port, does not fit the correct rule, and has a positive exact TV: the
    numbers docs/tree-samplers.md states. One run of the port (fixed seeds) is compared with
    both laws."""
    tree = tree_shape(CHOICES)
    inst = TIES.to_float()
    d = draft_trees(inst, tree, "topk", 1, torch.Generator())
    tokens = d.tokens[0].tolist()
    paths, law = planted_bug_law(engine, bug, tree, tokens, d.q[0], d.p[0])
    assert abs(float(law.sum()) - 1) < 1e-12
    fn = sglang_tree_bug(bug) if engine == "sglang" else eagle_posterior_bug(bug)
    sampler = sglang(fn) if engine == "sglang" else eagle(fn)
    n = 3000 if engine == "sglang" else 1500
    obs = _observed(sampler, tree, inst, paths, n)
    assert _law_fits(obs, law, n) > 1e-3
    _, right = conditional_tree_law("sglang-tree" if engine == "sglang" else "topk", tree,
                                    tokens, d.q[0], d.p[0])
    assert _law_fits(obs, right, n) < 1e-6
    tv = planted_bug_tv(engine, bug, TIES, CHOICES)
    assert isinstance(tv, F) and 0 < tv < 1


# ----------------------------------------------------------------------------- drafting matters


def test_sglang_rule_fails_when_children_are_drawn_iid():
    """Lossless mode under i.i.d. children: the kit drafts the trees, the SGLang port fails (TV
    1/6 on this instance, above); under distinct children it passes. In law mode under i.i.d.
    drafting it matches its own (non-merging) law and not the top-k rule's."""
    inst = [two_token(F(1, 2), F(2, 3)).to_float()]
    rep = check_tree_sampler(sglang(), tree=(2,), drafting="iid", instances=inst,
                             samples=3000, mode="lossless")
    assert not rep.passed and rep.drafting == "iid"
    assert any("declared lossless under topk, norep" in n for n in rep.notes)
    assert check_tree_sampler(sglang(), tree=(2,), drafting="norep", instances=inst,
                              samples=3000, mode="lossless").passed
    assert check_tree_sampler(sglang(), tree=(2, 1), drafting="iid", samples=6000).passed
    assert not check_tree_sampler(sglang(), "topk", tree=(2, 1), drafting="iid",
                                  samples=6000).passed


def test_specinfer_reference_sampler_passes_under_iid():
    """A SpecInfer tree sampler written from the rule (merging equal-token siblings) passes law
    and lossless modes under i.i.d. drafting."""

    def specinfer_tree(tokens, parents, q, p, generator):
        tree = tree_shape({"parents": list(parents)})
        Bn = tokens.shape[0]
        node = torch.zeros(Bn, dtype=torch.long)
        token = torch.zeros(Bn, dtype=torch.long)
        u_all = torch.rand((Bn, tree.n_nodes + 1), generator=generator, dtype=torch.float64)
        for b in range(Bn):
            members, k = [0], 0
            while True:
                cands = [c for u in members for c in tree.children[u]]
                row = p[b, members[0]].clone()
                qrow = q[b, members[0]]
                nxt = None
                for c in cands:
                    x = int(tokens[b, c - 1])
                    if u_all[b, k] * qrow[x] <= row[x]:
                        nxt = [m for m in cands if int(tokens[b, m - 1]) == x]
                        k += 1
                        break
                    k += 1
                    res = torch.clamp(row - qrow, min=0)
                    row = res / res.sum() if res.sum() > 0 else row
                if nxt is None:
                    node[b] = members[0]
                    token[b] = int(torch.multinomial(row, 1, generator=generator))
                    break
                members = nxt
        return node, token

    assert check_tree_sampler(specinfer_tree, "specinfer", tree=(2, 1), samples=3000).passed
    assert check_tree_sampler(specinfer_tree, "specinfer", tree=(2, 1), samples=3000,
                              mode="lossless").passed


def test_whole_valued_float_ids_are_read_as_integers_in_tree_and_step_modes():
    """Chain mode reads floating outputs with whole values as integers (docs/conformance.md);
    tree mode FAILed a correct sampler returning float64 ids ("not integers", exit 1) and
    check_step refused float tokens. A fractional or NaN id is still the sampler's failure."""
    from spectheory.testing.checks.step import _emitted
    from spectheory.testing.checks.tree import _outputs

    (node, tok), note = _outputs((torch.tensor([0.0, 2.0]), torch.tensor([1.0, 0.0])), 2, 3, 3,
                                 "s")
    assert note is None and node.dtype == tok.dtype == torch.long
    assert node.tolist() == [0, 2] and tok.tolist() == [1, 0]
    for bad, words in ((torch.tensor([0.5, 1.0]), "node = 0.5 (dtype torch.float32), not an "
                                                  "integer, at row 0"),
                       (torch.tensor([0.0, float("nan")]), "node = nan")):
        res, note = _outputs((bad, torch.tensor([1, 0])), 2, 3, 3, "s")
        assert res is None and words in note, note
    res, note = _emitted(torch.tensor([[1.0, 2.0, -1.0], [0.0, -1.0, -1.0]]), 2, 2, 3, "step")
    assert note is None and res[0].dtype == torch.long
    assert res[0][0].tolist()[:2] == [1, 2] and res[1].tolist() == [2, 1]
    res, note = _emitted(torch.tensor([[1.5, 2.0, -1.0], [0.0, -1.0, -1.0]]), 2, 2, 3, "step")
    assert res is None and "1.5" in note and "not an integer" in note
    for big in (1e30, 1e19):  # past int64, and between 2^63 and 2^64 (wrapped to -2^63)
        res, note = _outputs((torch.tensor([0.0, big], dtype=torch.float64),
                              torch.tensor([1, 0])), 2, 3, 3, "s")
        assert res is None and f"node = {big:g} (dtype torch.float64) at row 1, not an id" \
            in note, note
    res, note = _emitted(torch.tensor([[1, 2, -1], [0, -1, -1]], dtype=torch.uint8), 2, 2, 3,
                         "step")
    assert res is None and "cannot hold the -1 padding" in note  # unsigned still named


def test_false_alarm_rate_is_at_most_alpha():
    """20 runs of the correct port at alpha = 0.1 on different seeds: at most 6 false alarms
    (expected at most 2; P(X >= 7) < 0.003 for Binomial(20, 0.1))."""
    fails = sum(not check_tree_sampler(sglang(), tree=(2, 1), samples=1500, alpha=0.1,
                                       seed=100 + s).passed for s in range(20))
    assert fails <= 6


# ----------------------------------------------------------------------------- bad input


def test_bad_inputs_are_one_line_refusals():
    ok = sglang()
    with pytest.raises(OptionError, match="mode"):
        check_tree_sampler(ok, tree=(2, 1), mode="coins")
    with pytest.raises(OptionError, match="drafting"):
        check_tree_sampler(ok, tree=(2, 1), drafting="beam")
    with pytest.raises(OptionError, match="no node rule"):
        check_tree_sampler(ok, "gbv", tree=(2, 1))
    with pytest.raises(OptionError, match="at most V = 3"):
        check_tree_sampler(ok, tree=(4,), instances=[random_instance(3, 1, 0)])
    sparse = two_token(F(1, 2), F(1)).to_float()
    with pytest.raises(OptionError, match="positive tokens"):
        check_tree_sampler(ok, tree=(2,), drafting="norep", instances=[sparse])
    with pytest.raises(OptionError, match="fewer than"):
        check_tree_sampler(ok, tree=(2, 1), samples=2, drafting="iid")
    for bad in (0, -1, 2.5, True, 10**11):
        with pytest.raises(OptionError, match="samples"):
            check_tree_sampler(ok, tree=(2, 1), samples=bad)
    with pytest.raises(SpectheoryError, match="choices list"):
        check_tree_sampler(ok, tree=[[0], [2]])


def test_unusable_outputs_fail_with_a_note_and_raising_samplers_are_user_errors():
    def short(tokens, parents, q, p, g):
        return torch.zeros(tokens.shape[0] - 1, dtype=torch.long), torch.zeros(1)

    def far(tokens, parents, q, p, g):
        return torch.full((tokens.shape[0],), tokens.shape[1] + 1), torch.zeros(tokens.shape[0])

    def floats(tokens, parents, q, p, g):  # whole-valued floats are ids; 0.5 is none
        return torch.full((tokens.shape[0],), 0.5), torch.zeros(tokens.shape[0])

    for fn, what in ((short, "shape"), (far, "outside"), (floats, "not an integer")):
        rep = check_tree_sampler(fn, tree=(2, 1), samples=300)
        assert not rep.passed and what in rep.notes[0], rep.notes

    def boom(*a):
        raise RuntimeError("kernel not built")

    with pytest.raises(UserCodeError, match="kernel not built"):
        check_tree_sampler(boom, tree=(2, 1), samples=300)


def test_report_names_tree_and_drafting_in_text_and_json():
    rep = check_tree_sampler(sglang(), tree=CHOICES, samples=3000)
    text, js = str(rep), rep.to_json()
    assert "tree parents 0,1,1,0,4, topk drafting" in text and "PASS" in text
    assert js["tree"] == "parents 0,1,1,0,4" and js["drafting"] == "topk"
    assert js["mode"] == "tree-law" and js["min_detectable_tv"] == pytest.approx(
        rep.min_detectable_tv)


def test_default_instances_are_prefix_dependent_with_ties():
    insts = default_tree_instances(CHOICES)
    for inst in insts:
        rows = np.asarray(inst.target.level(1), dtype=float)
        assert not np.allclose(rows, rows[0])  # a different conditional after every prefix
    q = np.asarray(insts[2].draft.level(0), dtype=float)[0]
    assert len(set(q.tolist())) < len(q)  # a tie in the root's draft row
    d = draft_trees(insts[2], (2,), "topk", 1, torch.Generator())
    assert d.tokens.tolist() == [[0, 1]]  # top-2 of (1/2, 1/4, 1/4): the tie to token 1


# ----------------------------------------------------------------------------- command line


SAMPLERS = """
from spectheory.testing.checks.tree_ports import (SGLANG_TREE, sglang_tree_bug, tree_engine_sampler,
                                                  tree_speculative_sampling_target_only)
good = tree_engine_sampler(tree_speculative_sampling_target_only, SGLANG_TREE)
bad = tree_engine_sampler(sglang_tree_bug("running-sum"), SGLANG_TREE)
kernel = tree_speculative_sampling_target_only
"""


def test_cli_tree_mode(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_trees.py").write_text(SAMPLERS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, _ = run(["check-sampler", "my_trees:good", "--tree", "[[0],[1],[0,0]]",
                        "--samples", "3000"], capsys)
    assert code == 0 and "PASS" in out and "topk drafting" in out
    code, out, _ = run(["check-sampler", "my_trees:bad", "--tree", "2,1", "--samples", "3000"],
                       capsys)
    assert code == 1 and "FAIL" in out
    code, out, _ = run(["check-sampler", "my_trees:kernel", "--tree-layout", "sglang-tree",
                        "--parents", "0,1,0", "--tree-drafting", "iid", "--mode", "lossless",
                        "--samples", "3000", "--json"], capsys)
    assert code == 1 and '"drafting": "iid"' in out
    for args, msg in ((["--tree", "2,1", "--mode", "coins"], "modes law, lossless"),
                      (["--tree", "2,1", "--parents", "0"], "not both"),
                      (["--tree", "[[0],[2]]"], "ranks 0..b-1"),
                      (["--tree", "[[0]"], "is not JSON (a list of lists of child ranks"),
                      (["--tree", "2,1", "--paths", "2"], "--paths"),
                      (["--tree", "2,1", "--verifier", "gbv"], "no node rule"),
                      (["--tree", "2,1", "--samples", "0"], "samples")):
        code, out, err = run(["check-sampler", "my_trees:good"] + args, capsys)
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, (args, err)


def test_docs_page_example_runs_as_printed():
    from pathlib import Path

    from test_docs_examples import python_blocks, run_block

    page = Path(__file__).resolve().parent.parent / "docs" / "tree-samplers.md"
    (code,) = python_blocks(page)
    assert run_block(code) == 4


def test_real_sglang_kernel_through_the_preset_when_available():
    """On a GPU machine with sgl_kernel installed, the released CUDA kernel runs through the same
    preset and must pass as the port does (skipped elsewhere: the kernel is CUDA-only)."""
    if not torch.cuda.is_available():
        pytest.skip("SGLang's tree kernel is CUDA-only")
    kernel = pytest.importorskip("sgl_kernel").tree_speculative_sampling_target_only
    sampler = tree_engine_sampler(kernel, SGLANG_TREE, device="cuda")
    assert check_tree_sampler(sampler, tree=CHOICES, samples=6000).passed
    assert not check_tree_sampler(sampler, tree=(2,), drafting="iid", samples=3000,
                                  instances=[two_token(F(1, 2), F(2, 3)).to_float()],
                                  mode="lossless").passed


# ----------------------------------------------------------------------------- mixed batches


def _declaring_as(sampler, base):
    """``sampler`` with the rule and drafting ``base`` declares (a wrapper keeps them)."""
    for attr in ("spectheory_tree_verifier", "spectheory_tree_drafting"):
        if hasattr(base, attr):
            setattr(sampler, attr, getattr(base, attr))
    return sampler


def _mixing(base, how):
    """A sampler that mixes up the rows of its batch: ``roll`` returns row i - 1's outputs as row
    i's; ``row0`` verifies every row against row 0's target rows."""

    def sampler(tokens, parents, q, p, generator):
        if how == "row0":
            return base(tokens, parents, q, p[:1].expand_as(p).clone(), generator)
        node, y = base(tokens, parents, q, p, generator)
        return torch.as_tensor(node).roll(1), torch.as_tensor(y).roll(1)

    return _declaring_as(sampler, base)


@pytest.mark.parametrize("engine", ["sglang", "eagle"])
def test_a_sampler_that_mixes_up_the_rows_of_a_batch_fails(engine):
    """Each call gets the drafted trees of every instance of one vocabulary size, shuffled
    (exact counts per tree): SGLang's kernel under its norep drafting (6 trees an instance) and
    EAGLE's evaluate_posterior under top-k (one tree an instance, mixed across the two V = 3
    default instances). Rolling the outputs by one row, or reading row 0's target rows for
    every row, fails at 1,000 samples in each of 3 seeds (p-values below 1e-60 at 1,000, where
    the check's alpha is 1e-3); the correct port passes all 3 (alpha = 1e-3 a check, at most
    0.003 for the 3)."""
    base = sglang() if engine == "sglang" else eagle()
    for seed in range(3):
        rep = check_tree_sampler(base, tree=CHOICES, samples=1000, seed=seed)
        assert rep.passed, str(rep)
        assert not any("mixes up the rows" in n for n in rep.notes)
        for how in ("roll", "row0"):
            bad = check_tree_sampler(_mixing(base, how), tree=CHOICES, samples=1000, seed=seed)
            assert not bad.passed and bad.p_value < 1e-30, (how, seed, str(bad))


def test_one_tree_per_vocabulary_size_says_mixing_is_untested():
    """Top-k drafting on one instance drafts one tree: each call's rows are that tree repeated,
    so a row-mixing sampler cannot be told from a correct one, and the report says so."""
    inst = random_instance(3, 2, 11)
    base = eagle()
    rep = check_tree_sampler(_mixing(base, "roll"), tree=CHOICES, instances=[inst],
                             samples=2000, seed=0)
    assert rep.passed and any("mixes up the rows of a batch goes untested" in n
                              for n in rep.notes), str(rep)


# ----------------------------------------------------------------------------- run time


def _timed_sampler(calls, seconds):
    """SGLang's port, recording each call's number of trees and taking ``seconds`` a call."""
    import time

    inner = sglang()

    def sampler(tokens, parents, q, p, generator):
        calls.append(tokens.shape[0])
        time.sleep(seconds)
        return inner(tokens, parents, q, p, generator)

    return _declaring_as(sampler, inner)


@pytest.mark.parametrize("mode", ["law", "lossless"])
def test_a_long_tree_run_is_projected_on_its_first_small_call(mode):
    """10^9 samples of a sampler at 0.05 s a call: the first call gets `RAMP_FIRST_ROWS` trees
    (not the 2^24-float chunk, a day of such calls), and the rate it measures projects the run
    past ``max_seconds``: a `TimeLimitError` after that one call. Before, the tree mode had no
    projection and ran for days."""
    from spectheory.runtime.errors import TimeLimitError
    from spectheory.testing.checks.calls import RAMP_FIRST_ROWS

    from spectheory.runtime import limits

    calls = []
    with pytest.raises(TimeLimitError, match=r"samples = 1,000,000,000 would take about .* over "
                                             r"max_seconds = 600; lower samples"):
        with limits.running(20):  # a backstop (another message) if the projection is missing
            check_tree_sampler(_timed_sampler(calls, 0.05), tree=CHOICES, samples=10**9,
                               mode=mode, max_seconds=600)
    assert calls == [RAMP_FIRST_ROWS]


def test_tree_max_seconds_is_checked_and_bounds_the_least_cost():
    for bad in (0, -1, float("nan"), "60", True):
        with pytest.raises(SpectheoryError, match="max_seconds = .* must be a positive number"):
            check_tree_sampler(sglang(), tree=CHOICES, samples=100, max_seconds=bad)
    calls = []
    with pytest.raises(SpectheoryError, match=r"samples = 10,000,000,000 would take at least"):
        check_tree_sampler(_timed_sampler(calls, 0), tree=CHOICES, samples=10**10,
                           max_seconds=10)
    assert calls == []  # refused before any call


def test_drafted_trees_are_bounded_before_any_is_drafted(monkeypatch):
    """``draft_rows = 10^5`` drafted every tree and computed its exact law (minutes) before it
    refused 300 samples as fewer than the trees; 10^7 took 11 GB first. The trees per instance
    are bounded (`MAX_DRAFT_ROWS`) and the samples are compared with them before drafting."""
    from spectheory.testing.checks import tree as tree_mod

    drafted = []
    real = tree_mod.draft_trees
    monkeypatch.setattr(tree_mod, "draft_trees",
                        lambda *a, **k: drafted.append(a[3]) or real(*a, **k))
    s = tree_engine_sampler(tree_speculative_sampling_target_only, SGLANG_TREE)
    for rows in (tree_mod.MAX_DRAFT_ROWS + 1, 10**7):
        with pytest.raises(OptionError, match=rf"draft_rows = {rows:,} is over the limit of "
                                              rf"{tree_mod.MAX_DRAFT_ROWS:,}"):
            check_tree_sampler(s, drafting="iid", draft_rows=rows, samples=300)
    with pytest.raises(OptionError, match="samples = 299 is fewer than the 300 drafted trees"):
        check_tree_sampler(s, drafting="iid", draft_rows=100, samples=299)  # 3 instances
    assert drafted == []
    rep = check_tree_sampler(s, drafting="iid", draft_rows=2, samples=6_000)
    assert rep.passed and drafted == [2, 2, 2]


@pytest.mark.parametrize("layout,options,words", [
    ("eagle-posterior", {"threshold_acc": 0.5},
     "tree layout eagle-posterior takes no option 'threshold_acc' (its options: "
     "logits_processor, dtype)"),
    ("sglang-tree", {"device": "bogus"}, "device = 'bogus' is not a device torch can use here"),
    ("sglang-tree", {"dtype": "float32"}, "dtype = 'float32' must be a torch floating dtype"),
    ("sglang-tree", {"threshold_acc": float("nan")}, "threshold_acc = nan must be a number in"),
    ("eagle-posterior", {"logits_processor": 3}, "logits_processor = 3 must be callable"),
])
def test_layout_options_are_checked_when_the_sampler_is_built(layout, options, words):
    """An option the layout does not take, or a device torch cannot use, was only found at the
    first call and reported as the engine function raising (a UserCodeError blaming it)."""
    fn = evaluate_posterior if layout == "eagle-posterior" else \
        tree_speculative_sampling_target_only
    with pytest.raises(OptionError, match=re.escape(words)):
        tree_engine_sampler(fn, layout, **options)
    assert _fine_options_pass(layout)


@functools.lru_cache(maxsize=2)
def _fine_options_pass(layout: str) -> bool:
    """Whether the layout's port, built with options it takes, passes 3,000 samples (seed 0).
    Computed once a layout: the options and the check depend on the layout alone, and the check
    is deterministic in its arguments (the ports draw only from the check's generator)."""
    fn = evaluate_posterior if layout == "eagle-posterior" else \
        tree_speculative_sampling_target_only
    fine = {"dtype": torch.float64} if layout == "eagle-posterior" else \
        {"device": "cpu", "dtype": torch.float64, "threshold_acc": 0.5}
    return check_tree_sampler(tree_engine_sampler(fn, layout, **fine), samples=3000).passed


def test_sglang_tree_kernel_accepts_at_a_coin_equal_to_the_ratio():
    """The kernel's test is coin <= p / threshold_acc: a child of target probability 0 is
    accepted at coin 0 (a strict < rejected it). Root -> one child (token 1), root row (1, 0)."""
    import torch

    from spectheory.testing.checks.tree_ports import tree_speculative_sampling_target_only

    i32 = torch.int32
    predicts = torch.full((2,), -1, dtype=i32)
    accept_index = torch.full((1, 2), -1, dtype=i32)
    accept_num = torch.zeros(1, dtype=i32)
    candidates = torch.tensor([[0, 1]], dtype=i32)
    retrive_index = torch.tensor([[0, 1]], dtype=i32)
    next_token = torch.tensor([[1, -1]], dtype=i32)
    next_sibling = torch.tensor([[-1, -1]], dtype=i32)
    target = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]], dtype=torch.float32)
    draft = torch.zeros_like(target)
    tree_speculative_sampling_target_only(predicts, accept_index, accept_num, candidates,
                                          retrive_index, next_token, next_sibling,
                                          torch.tensor([[0.0, 0.5]]), torch.tensor([0.5]),
                                          target, draft)
    assert int(accept_num[0]) == 1 and int(predicts[0]) == 1
