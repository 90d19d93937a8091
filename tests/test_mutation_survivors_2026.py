"""Defects a hidden mutation pass of the newest modules found the suite letting through
(2026-12-02): each test pins the value or the refusal the mutant changed (scripts/mutation.py,
mutants 541 on; docs/mutation.md). By module: the sampling parameters' edges (temperature at
the greedy bound, T = 1/32 exactly, unnormalised rows, a -inf logit bias in exact mode); the
grammar laws' chained bound (its value, against a sum written here from two laws), phi checked
exactly for rationals; an engine grammar's longest-match literals and empty eos; the seeded
checks' keyed noise (the SplitMix64 formula written out), their mixed schedule, companion rows
and emission caps and the first mismatch they name; adaptive stopping rules at their upper
bounds and rules that read the target; the adaptive LP's ``deterministic`` flag; the
transformers and MLX-LM argument maps; user messages cut and on one line, JSON keys all
checked, flags that take None only where stated."""

from __future__ import annotations

import itertools
import sys
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest
import torch

import spectheory as st
from spectheory.runtime.errors import SpectheoryError

sys.path.insert(0, str(Path(__file__).parent))
import independent_claims as ind  # noqa: E402


# ----------------------------------------------------------------------------- processing


def test_temperature_at_the_greedy_bound_still_samples():
    from spectheory.inputs.processing import GREEDY_BELOW, SamplingParams

    sp = SamplingParams(temperature=GREEDY_BELOW)
    assert not sp.greedy and SamplingParams(temperature=GREEDY_BELOW / 2).greedy
    out = st.process_rows(np.array([0.5, 0.5]), {"temperature": GREEDY_BELOW})
    assert out.tolist() == [0.5, 0.5]  # a tie stays a tie (greedy would give [1, 0])


def test_the_largest_exact_power_is_accepted():
    from spectheory.inputs.processing import MAX_EXACT_POWER, SamplingParams

    assert SamplingParams(temperature=F(1, MAX_EXACT_POWER)).exact_power() == MAX_EXACT_POWER
    with pytest.raises(SpectheoryError, match="not rational in exact mode"):
        SamplingParams(temperature=F(1, MAX_EXACT_POWER + 1)).exact_power()


@pytest.mark.parametrize("backend", [np.array, torch.tensor])
def test_rows_within_tolerance_come_back_normalised(backend):
    rows = backend([[0.5 + 4e-6, 0.5], [0.25, 0.75 - 3e-6]])
    for params in (None, {"temperature": 1}):
        out = st.process_rows(rows, params)
        sums = np.asarray(out.sum(-1), dtype=np.float64)
        assert np.abs(sums - 1).max() < 1e-15, sums


def test_a_minus_inf_logit_bias_is_a_mask_in_exact_mode():
    from spectheory.inputs.processing import parse_sampling

    sp = parse_sampling("logit_bias=0:-inf")
    assert not sp.on_logits
    out = st.process_rows(np.array([F(1, 2), F(1, 4), F(1, 4)], dtype=object), sp)
    assert list(out) == [0, F(1, 2), F(1, 2)] and all(isinstance(v, (F, int)) for v in out)


# ----------------------------------------------------------------------------- grammar laws


def _independent_chain_bound(r_law: dict, star: dict, V: int, N: int):
    """sum over depths d < N of E_{s ~ mu*}[TV(r(.|s), mu*(.|s))], from the two laws over whole
    sequences: prefix masses by summing, conditionals by dividing."""
    def mass(law, s):
        return sum(v for x, v in law.items() if x[:len(s)] == s)

    total = F(0)
    for d in range(N):
        for s in itertools.product(range(V), repeat=d):
            ms = mass(star, s)
            if ms == 0:
                continue
            mr = mass(r_law, s)
            assert mr > 0  # the estimate reaches every prefix mu* reaches
            tv = sum(abs(mass(r_law, s + (a,)) / mr - mass(star, s + (a,)) / ms)
                     for a in range(V)) / 2
            total += ms * tv
    return total


def test_the_chained_bound_is_the_sum_it_states():
    from spectheory.inputs import grammar_laws as G

    inst = st.random_instance(3, 1, 5, denominator=12)
    g = G.dyck1()
    N = 2
    m = ind.Model(__import__("spectheory.inputs.instances", fromlist=["x"])
                  .instance_to_dict(inst))
    status = ind.dyck_status(1, 2)
    star = ind.star_law(m, status, N)
    seqs = list(itertools.product(range(3), repeat=N))
    for k in range(N + 1):
        phi = G.lookahead_validity(inst, g, N, k)
        r = dict(zip(seqs, G.doob_law(inst, phi, N)))
        bound = G.chain_tv_bound(inst, g, N, phi)
        assert bound == _independent_chain_bound(r, star, 3, N) and 0 <= bound <= 1, k
    assert G.chain_tv_bound(inst, g, N, G.lookahead_validity(inst, g, N, 0)) > 0


def test_exact_phi_values_outside_the_unit_interval_are_refused():
    from spectheory.inputs import grammar_laws as G

    inst = st.random_instance(3, 1, 5, denominator=12)
    phi = [np.array([F(1)], dtype=object), np.array([F(1)] * 3, dtype=object),
           np.array([F(1)] * 9, dtype=object)]
    phi[1][0] = F(1) + F(1, 10 ** 12)
    with pytest.raises(SpectheoryError, match="phi values are probabilities in \\[0, 1\\]"):
        G.doob_law(inst, phi, 2)


# ----------------------------------------------------------------------------- grammar engines


def test_engine_literals_are_tokenized_longest_match_and_eos_may_be_empty():
    pytest.importorskip("llguidance")
    from spectheory.inputs.grammar_engines import llguidance_grammar

    tokens = ["a", "ab", "b", "c", "<e>"]
    g = llguidance_grammar(tokens, 4, lark='start: "abab"')
    first = g.allowed(g.run(np.zeros((1, 0), dtype=np.int64)))[0]
    assert first.tolist() == [False, True, False, False, False]  # "ab", the longest match
    empty = llguidance_grammar(["a", "b", ""], 2, regex="a+b")
    assert empty.allowed(empty.run(np.zeros((1, 0), dtype=np.int64)))[0].tolist()[0]


# ----------------------------------------------------------------------------- seeds


def _splitmix64(x: int) -> int:
    m = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


def test_keyed_uniforms_follow_the_documented_formula():
    from spectheory.testing.checks.seeds import keyed_uniform

    seeds = [0, 1, 12345, 2**63 - 1]
    for pos, stream in ((0, 1), (5, 2), (1000, 7)):
        got = keyed_uniform(np.array(seeds), pos, stream).tolist()
        want = [(_splitmix64((_splitmix64(s) + pos * 2**20 + stream) & ((1 << 64) - 1)) >> 11)
                * 2.0 ** -53 for s in seeds]
        assert got == want
    a = keyed_uniform(np.arange(8), 3, 1)  # DRAFT at n + 1 is not TARGET at n
    b = keyed_uniform(np.arange(8), 2, 2)
    assert not torch.equal(a, b)


def test_the_mixed_schedule_drafts_every_count():
    from spectheory.testing.checks.seeds import _schedule

    L = 3
    counts = set()
    for step in range(4):
        counts |= set(_schedule("mixed", list(range(64)), step, L).tolist())
    assert counts == set(range(L + 1))


def test_companions_draft_nothing_and_emissions_are_capped_by_the_kits_counts():
    from spectheory.testing.checks.seeds import (check_batch_invariance, check_seed_replay,
                                                 sample_match_step)
    from spectheory.runtime.errors import UserCodeError

    seen = []

    def watching(request):
        seen.append(request.num_drafts.tolist())
        return sample_match_step(request)

    rep = check_batch_invariance(watching, seeds=range(4), tokens=4)
    assert rep.passed
    assert any(0 in nd and max(nd) > 0 for nd in seen)  # rows beside others that draft none

    def two_tokens(request):  # drafts + 2 tokens where none were allowed
        out = sample_match_step(request)
        out[:, 1] = out[:, 0]
        return out

    with pytest.raises(UserCodeError, match="emitted 2 tokens for a row allowed 0 drafts"):
        check_seed_replay(two_tokens, seeds=range(2), tokens=4, schedule="none")

    def lowers_its_cap(request):  # zeroes num_drafts in place, then emits L + 1 tokens
        out = sample_match_step(request)
        request.num_drafts.zero_()
        return out

    rep = check_seed_replay(lowers_its_cap, seeds=range(2), tokens=4)
    assert rep.passed  # the kit checked the emission against its own counts


def test_the_first_mismatch_is_the_first_position():
    from spectheory.testing.checks.seeds import ZeroDraftAdvanceEngine, check_seed_replay

    def factory():
        engine = ZeroDraftAdvanceEngine()
        return engine

    rep = check_seed_replay(factory, plain=lambda: ZeroDraftAdvanceEngine().plain,
                            schedule="mixed", tokens=8)
    assert not rep.passed
    f = rep.first
    diff = [i for i, (a, b) in enumerate(zip(f["reference"], f["got"])) if a != b]
    assert f["position"] == diff[0]


# ----------------------------------------------------------------------------- adaptive


@pytest.mark.parametrize("name", ["coin(1)", "draft-confidence(1)", "draft-prob(1)",
                                  "coin(0)"])
def test_rules_take_their_upper_bound(name):
    from spectheory.engine.adaptive import parse_rule

    assert parse_rule(name).name.startswith(name.split("(")[0])


def test_a_function_rule_reads_the_target_rows():
    from spectheory.engine.adaptive import analyze_adaptive

    inst = st.random_instance(3, 2, 0)
    seen = []

    def rule(prefix, q_rows, p_rows):
        seen.append(p_rows.shape)
        return 0 if p_rows[-1].max() > 0.5 else F(1, 2)

    res = analyze_adaptive(inst, "block", rule, aware=True)
    assert res.lossless and seen and all(s[1] == 3 for s in seen)


def test_the_adaptive_lps_deterministic_flag():
    from spectheory.engine.adaptive import StoppingRule
    from spectheory.inputs.instances import instance_from_dict
    from spectheory.lp.adaptive import adaptive_optimality

    inst = instance_from_dict({"vocab_size": 2, "block_length": 2,
                               "target": ["1/2", "1/2"], "draft": ["1", "0"]}, exact=True)

    def unreachable_coin(prefix, q_rows, p_rows):  # randomised only after token 1: never drafted
        return F(1, 2) if prefix == (1,) else 0

    res = adaptive_optimality(inst, StoppingRule("u", unreachable_coin, reads_target=True))
    assert res.stopping_time and res.deterministic
    drop = adaptive_optimality(inst, StoppingRule("d", lambda s, q, p: [0, 0], kind="drop"))
    assert not drop.stopping_time and not drop.deterministic


def test_flags_that_take_no_none_refuse_it():
    from spectheory.engine.adaptive import analyze_adaptive

    with pytest.raises(SpectheoryError, match="aware = None must be True or False"):
        analyze_adaptive(st.random_instance(2, 2, 0), "block", "coin(1/2)", aware=None)


# ----------------------------------------------------------------------------- engines


def test_transformers_min_new_tokens_maps_to_the_kits_min_tokens():
    from spectheory.testing.checks.hf_generate import sampling_of

    sp, eos = sampling_of({"min_new_tokens": 2, "eos_token_id": 0}, 4)
    assert sp.min_tokens == 2 and tuple(sp.stop_token_ids) == (0,) and eos == 0


def test_mlx_arguments_map_to_the_kits_parameters():
    from spectheory.testing.checks.mlx_generate import REPETITION_CONTEXT, sampling_of

    assert sampling_of({"top_p": 0.0}, 3) is None  # MLX applies top-p only in (0, 1)
    assert sampling_of({"top_k": 1}, 3).top_k == 1
    sp = sampling_of({"repetition_penalty": 1.5}, 3, tokens=REPETITION_CONTEXT)
    assert sp.repetition_penalty == 1.5
    with pytest.raises(SpectheoryError, match="penalises the last 20 tokens only"):
        sampling_of({"repetition_penalty": 1.5}, 3, tokens=REPETITION_CONTEXT + 1)


# ----------------------------------------------------------------------------- errors


def test_user_messages_are_cut_and_on_one_line():
    from spectheory.runtime.errors import MAX_QUOTED, UserCodeError, call_user

    def long(*a):
        raise ValueError("x" * 10_000)

    def lines(*a):
        raise ValueError("first\nsecond")

    with pytest.raises(UserCodeError) as err:
        call_user(long, what="mine")
    assert len(str(err.value)) < MAX_QUOTED + 100 and str(err.value).endswith("...")
    with pytest.raises(UserCodeError) as err:
        call_user(lines, what="mine")
    assert "\n" not in str(err.value) and "first second" in str(err.value)


def test_every_json_key_is_checked_not_only_the_first():
    from spectheory.inputs.instances import instance_from_dict

    with pytest.raises(SpectheoryError, match="unknown key 'tagret'; did you mean 'target'"):
        instance_from_dict({"vocab_size": 2, "tagret": [0.5, 0.5], "block_length": 1,
                            "target": [0.5, 0.5], "draft": [0.5, 0.5]})


# ----------------------------------------------------------------------------- second pass
# (mutants of lp/frontier.py, verifiers/relaxed.py, verifiers/hetero.py, checks/tree.py)


def test_the_frontiers_mixture_bound_is_the_stated_mixture():
    """The lower bound mixing block verification (v0) with accept-every-draft at TV t_all:
    v0 + (L + 1 - v0) delta / t_all, t_all = sum over drafted prefixes |Q - P| / 2 (the same
    target row follows both), written here from the tables."""
    from spectheory.lp.frontier import frontier_lp

    inst = st.random_instance(3, 2, 1, denominator=12)
    L, V = inst.block_length, inst.vocab_size
    Q = P = None
    t_all = F(0)
    for x in itertools.product(range(V), repeat=L):
        q = p = F(1)
        for d in range(L):
            q *= inst.draft.conditional(x[:d])[x[d]]
            p *= inst.target.conditional(x[:d])[x[d]]
        t_all += abs(q - p) / 2
    v0 = st.analyze(inst, "block").block_efficiency
    res = frontier_lp(inst, tv=t_all / 2, exact=True, rules=())
    (mix,) = [b for b in res.details["bounds"]["checked"] if b.source.startswith("mixture")]
    assert mix.value == v0 + (L + 1 - v0) / 2 and v0 <= mix.value <= res.optimum


def test_a_budget_exponent_below_the_range_is_refused():
    from spectheory.lp.frontier import frontier_lp
    from spectheory.lp.result import LPError

    with pytest.raises(LPError, match="exponent out of range"):
        frontier_lp(st.random_instance(2, 2, 0), tv="1e-401")


def test_relaxed_rules_at_their_edges():
    from spectheory.verifiers.relaxed import cactus_acceptance, kl_divergence, top_m_acceptance

    inst = st.random_instance(3, 2, 0)
    assert st.analyze(inst, top_m_acceptance(3)).block_efficiency == 3  # m >= V: every token
    assert cactus_acceptance(0).lossless and not cactus_acceptance(F(1, 10)).lossless
    kl, err = kl_divergence([0.5, 0.5], [0.25, 0.75])
    assert err >= 2 * 2.0 ** -52 * max(1.0, abs(kl))  # n terms' rounding, at least one ulp each


def _slrs_instance():
    from spectheory.inputs.tokenizers import HeteroInstance, make_tokenizer
    from spectheory.inputs.models import TableModel

    def ci(row, V):
        return TableModel(V, (np.array([[F(x) for x in row]], dtype=object),))

    return HeteroInstance("ab", make_tokenizer(["a", "b"], "ab"),
                          make_tokenizer(["a", "b", "ab"], "ab"), ci(["3/4", "1/4"], 2),
                          ci(["1/4", "1/4", "1/2"], 3), 1, 2)


def test_slrs_reads_the_first_target_token_of_the_drafts_text():
    from spectheory.verifiers.hetero import first_token_acceptance, slrs_psi

    inst = _slrs_instance()  # the draft's "ab" starts with target token a
    assert slrs_psi(inst, ()) == {0: F(3, 4), 1: F(1, 4)}
    assert first_token_acceptance(inst)["slrs"] == 1


def test_hetero_reports_half_the_l1_distance_and_refuse_contexts_past_v():
    from spectheory.runtime.errors import InputError, UserCodeError
    from spectheory.verifiers.hetero import (acceptance, check_hetero_lossless, emitted_law,
                                             target_law, tli_block)

    inst = _slrs_instance()

    def f(i, c):
        return tli_block(i, c, residual_over="intersection")

    def always_a(i, c):  # lossy: token a every time
        return {(0,): F(1)}

    for g in (f, always_a):
        rep = check_hetero_lossless(inst, g)
        out, tgt = emitted_law(inst, g), target_law(inst)
        half = sum(abs(out.get(k, 0) - tgt.get(k, 0)) for k in set(out) | set(tgt)) / 2
        assert rep.tv == half <= 1
    assert rep.tv > 0
    with pytest.raises(InputError, match="the context c = \\(2,\\) must be a tuple of target "
                                         "token ids in 0..1"):
        acceptance(inst, "slem", (2,))
    flt = _slrs_instance()
    flt = type(flt)(flt.alphabet, flt.target_tokenizer, flt.draft_tokenizer,
                    flt.target.to_float(), flt.draft.to_float(), 1, 2)

    def off(i, c):
        return {(0,): 0.75, (1,): 0.25 + 1e-9}

    with pytest.raises(UserCodeError, match="summing to"):
        emitted_law(flt, off)


def test_tree_checks_refuse_alpha_one_and_size_their_default_instances():
    from spectheory.runtime.errors import OptionError, SizeLimitError
    from spectheory.testing.checks.tree import check_tree_sampler, default_tree_instances

    with pytest.raises(OptionError):
        check_tree_sampler(lambda *a: None, alpha=1)
    # 3^11 <= the exact limit < 4^11: the largest default instance has V = 4
    with pytest.raises(SizeLimitError, match="the default instances of a tree of depth 10"):
        default_tree_instances((1,) * 10)


def test_the_kl_frontier_refuses_a_solver_point_it_cannot_trust(monkeypatch):
    """The KL program's two guards against a misbehaving solver: a tangent-cut bound below the
    solver's point (a negative gap), and a point over the KL budget."""
    import math
    import types

    import spectheory.lp.frontier as fr
    from spectheory.lp.result import LPError

    inst = st.random_instance(2, 2, 0)
    assert fr.frontier_lp(inst, kl=0.01, rules=()).optimum > 1
    monkeypatch.setattr(fr, "_tangent_bound", lambda *a: -1.0)
    with pytest.raises(LPError, match="tangent-cut upper bound -1 is .*; refused"):
        fr.frontier_lp(inst, kl=0.01, rules=(), pinsker=False)
    monkeypatch.undo()
    fake = types.SimpleNamespace(**{k: getattr(math, k) for k in dir(math)
                                    if not k.startswith("_")})
    fake.log = lambda x: 10.0  # every output mass reads as 10 nats over its target's
    monkeypatch.setattr(fr, "math", fake)
    with pytest.raises(LPError, match="the solver's point is not feasible"):
        fr.frontier_lp(inst, kl=0.01, rules=(), pinsker=False)


# ----------------------------------------------------------------------------- hidden pass 3:
# verifiers without mutants before (SpecHub, the contrasts, the route of K = 1)


def _one(spec_or_fn, p, q, x):
    """The law of a single-path rule at L = 1 on the draft (x,), rows p [2, V] (root, after x)
    and q [V], float64 torch."""
    fn = getattr(spec_or_fn, "function", spec_or_fn)
    drafts = torch.tensor([[x]])
    return fn(drafts, torch.tensor([q], dtype=torch.float64).unsqueeze(0),
              torch.tensor(p, dtype=torch.float64).unsqueeze(0))


def test_spechub_is_lossless_where_the_draft_overshoots_a_token_the_target_keeps():
    """S_ia, the draft's excess over the target outside the hub, counted the hub too (a TV of
    1/25 from SpecHub on p = (2/5, 3/5, 0), q = (1/2, 3/10, 1/5), K = 2): no test had
    q(a) > p(a) with p(a') > 0. SpecHub is lossless: the exact TV is 0."""
    from spectheory.engine.lossless import check_lossless_multipath
    from spectheory.inputs.instances import instance_from_dict
    from spectheory.verifiers.spechub import SPECHUB

    inst = instance_from_dict({"vocab_size": 3, "block_length": 1, "target": ["2/5", "3/5", "0"],
                               "draft": ["1/2", "3/10", "1/5"]}, exact=True)
    rep = check_lossless_multipath(SPECHUB, inst, 2, "hub")
    assert rep.lossless and rep.tv == 0


def test_lenient_rejection_row_is_p_minus_l_q():
    """r = normalise((p - l q)^+) (Leviathan et al., lenience): the residual without l left the
    law of tau and the TV unchanged on the test instances, only the row moved."""
    p, q, lam = [F(1, 10), F(1, 2), F(2, 5)], [F(4, 5), F(1, 10), F(1, 10)], F(1, 2)
    res = [max(a - lam * b, 0) for a, b in zip(p, q)]
    want = [float(r / sum(res)) for r in res]  # (0, 9/16, 7/16)
    from spectheory.verifiers.contrasts import lenient_verification

    law = _one(lenient_verification(lam), [[float(v) for v in p]] * 2, [float(v) for v in q], 0)
    assert torch.allclose(law.correction[0, 0], torch.tensor(want, dtype=torch.float64),
                          atol=1e-15)
    assert abs(float(law.stop[0, 0]) - (1 - float(p[0] / (lam * q[0])))) < 1e-15


@pytest.mark.parametrize("medusa", [False, True])
def test_typical_threshold_at_high_entropy_and_at_epsilon(medusa):
    """Typical acceptance accepts X iff p(X) > min(eps, delta e^-H): the entropy's sign (a bar of
    0.09 for 0.0821 at H = 1.296 nats, above what the tests reached), Medusa's
    log(p + 1e-5) (1e-3 moved the bar), and the strict > at p(X) = eps exactly (>= accepted
    the token; Medusa's kept row p >= t dropped it with >)."""
    import math

    from spectheory.verifiers.contrasts import medusa_entropy, typical_acceptance, typical_medusa

    spec = typical_medusa() if medusa else typical_acceptance()
    row = [0.085, 0.305, 0.305, 0.305]
    if medusa:
        H = -sum(v * math.log(v + 1e-5) for v in row)
        assert abs(float(medusa_entropy(torch.tensor(row, dtype=torch.float64))) - H) < 1e-12
    else:
        H = -sum(v * math.log(v) for v in row)
    bar = min(0.09, 0.3 * math.exp(-H))
    assert 0.08 < bar < 0.085  # the token at 0.085 is above the bar only with the right H
    law = _one(spec, [row, row], [0.25] * 4, 0)
    assert float(law.stop[0, 0]) == 0.0 and float(law.stop[0, 1]) == 1.0  # accepted
    edge = [0.09, 0.91]  # H = 0.30 nats: delta e^-H = 0.22, the bar is eps = 0.09 exactly
    law = _one(spec, [edge, edge], [0.5, 0.5], 0)
    assert float(law.stop[0, 0]) == 1.0  # p(X) = eps is not > eps: rejected
    want = [0.09, 0.91]  # Y from p (typical), or from p on {p >= t} (Medusa): both kept
    assert torch.allclose(law.correction[0, 0], torch.tensor(want, dtype=torch.float64),
                          atol=1e-15)


def test_symmetric_at_one_path_keeps_the_node_route():
    """symmetric=True at K = 1 (no joint outcomes to fold) switched the analysis to the
    enumerating route: the same numbers, on the slower route."""
    from spectheory.engine.analysis import analyze
    from spectheory.inputs.random_instances import random_instance

    inst = random_instance(3, 2, seed=0, denominator=20)
    plain = analyze(inst, "block", exact=True)
    for sym in (True, False):
        res = analyze(inst, "block", exact=True, symmetric=sym)
        assert res.route == plain.route == "node" and res.tau_pmf == plain.tau_pmf
