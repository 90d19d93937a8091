"""Processed targets (greedy, temperature, top-k, top-p, min-p) and drafts without a q.

* `spectheory.inputs.processing.process_rows` against a plain-Python brute force written from the
  definitions, in rationals, on rows with ties (top-k ties kept, the top-p boundary, greedy ties
  to the lowest id, min-p's inclusive threshold), for both orders of operations;
* exact laws under processed targets (token, block, GBV and SpecInfer with K = 2) against a
  brute-force sequence-tree computation in rationals on the processed, prefix-dependent instance;
* the sampler kit under sampling parameters: correct greedy and top-k samplers pass, samplers
  that verify against the raw target fail (also from the command line); a verifier that uses the
  raw target is caught by the exact check;
* the n-gram verifier (q = 1 at the drafted token): its law from the formula, lossless.
"""

from __future__ import annotations

import itertools
import json
import random
from fractions import Fraction as F

import numpy as np
import pytest
import torch

import spectheory as st
from cli_helpers import run, write
from previous_laws import gbv as previous_gbv
from previous_multipath_laws import specinfer as previous_specinfer
from reference_rational import block_law, reference_analysis, token_law
from spectheory.runtime import backend as B
from spectheory.runtime.errors import SpectheoryError
from spectheory.inputs.instances import Instance, instance_to_dict
from spectheory.inputs.models import TableModel
from spectheory.inputs.processing import (SamplingError, SamplingParams, parse_sampling,
                                          process_instance, process_rows)
from spectheory.testing import assert_lossless, assert_sampler, check_sampler, make_sampler
from spectheory.verifiers.token import token_verification

# ----------------------------------------------------------------------------- brute force


def _exact_param(v):
    return v if isinstance(v, F) else F(repr(float(v)))


def _normalised(p):
    tot = sum(p)
    return [x / tot for x in p]


def bf_process(row, sp: SamplingParams):
    """The processed row, literally from the definitions: renormalise after every step, walk
    the descending order for top-p; plain Python on Fractions."""
    p = _normalised([F(x) for x in row])
    V = len(p)
    if sp.temperature < F(1, 100000):
        best = max(p)
        i = p.index(best)  # the lowest id among the maxima
        return [F(int(j == i)) for j in range(V)]
    n = 1 / _exact_param(sp.temperature)
    assert n.denominator == 1
    p = _normalised([x ** int(n) for x in p])
    keep = [True] * V

    def renorm():
        return _normalised([x if k else F(0) for x, k in zip(p, keep)])

    def min_p():
        cur = renorm()
        thr = _exact_param(sp.min_p) * max(cur)
        return [k and cur[j] >= thr for j, k in enumerate(keep)]

    def top_k():
        if sp.top_k is None or sp.top_k >= V:
            return keep
        kth = sorted(renorm(), reverse=True)[sp.top_k - 1]
        return [k and renorm()[j] >= kth for j, k in enumerate(keep)]

    def top_p():
        cur = renorm()
        order = sorted((j for j in range(V) if keep[j]), key=lambda j: (-cur[j], j))
        acc, chosen = F(0), []
        for j in order:
            chosen.append(j)
            acc += cur[j]
            if acc >= _exact_param(sp.top_p):
                break
        last = cur[chosen[-1]]
        return [k and (j in chosen or cur[j] == last) for j, k in enumerate(keep)]

    steps = ([min_p, top_k, top_p] if sp.order == "vllm" else [top_k, top_p, min_p])
    for step in steps:
        keep = step()
    return renorm()


def _random_rows(rng, n, V, top=4):
    rows = []
    while len(rows) < n:
        a = [rng.randint(0, top) for _ in range(V)]
        if sum(a):
            rows.append([F(x, sum(a)) for x in a])
    return rows


PARAMS = [SamplingParams(temperature=t, top_k=k, top_p=pp, min_p=m, order=o)
          for t in (1, 0.5) for k in (None, 2) for pp in (1, F(1, 2), 0.6, 0.9)
          for m in (0, 0.25, F(1, 2)) for o in ("vllm", "transformers")] + [
    SamplingParams(temperature=0), SamplingParams(temperature=0, top_k=3, top_p=0.5),
    SamplingParams(top_k=1), SamplingParams(top_k=3, top_p=0.25, min_p=0.25)]


# ----------------------------------------------------------------------------- processing


def test_documented_tie_rules_exactly():
    half = np.array([F(1, 2), F(1, 4), F(1, 4), F(0)], dtype=object)
    # top-k keeps every token tied with the k-th largest
    assert list(process_rows(half, "top_k=2")) == [F(1, 2), F(1, 4), F(1, 4), 0]
    assert list(process_rows(half, "top_k=1")) == [1, 0, 0, 0]
    # top-p: the first token's mass 1/2 reaches top_p = 1/2, so the prefix ends there
    assert list(process_rows(half, "top_p=0.5")) == [1, 0, 0, 0]
    # just above: the tied pair at the boundary is kept together
    assert list(process_rows(half, "top_p=0.6")) == [F(1, 2), F(1, 4), F(1, 4), 0]
    # min-p's threshold is inclusive: 1/4 >= (1/2) (1/2)
    assert list(process_rows(half, "min_p=0.5")) == [F(1, 2), F(1, 4), F(1, 4), 0]
    assert list(process_rows(half, "min_p=0.51")) == [1, 0, 0, 0]
    # greedy: ties to the lowest token id, zeros never win
    tie = np.array([F(0), F(1, 3), F(1, 3), F(1, 3)], dtype=object)
    assert list(process_rows(tie, "temperature=0")) == [0, 1, 0, 0]
    assert list(process_rows(tie.astype(float), "temperature=0")) == [0, 1, 0, 0]
    assert list(process_rows(torch.tensor(tie.astype(float)), "temperature=0")) == [0, 1, 0, 0]
    # temperature 1/2 is exact: p^2 renormalised
    assert list(process_rows(half, "temperature=0.5")) == [F(2, 3), F(1, 6), F(1, 6), 0]


def test_orders_differ_where_documented():
    p = np.array([F(4, 10), F(3, 10), F(2, 10), F(1, 10)], dtype=object)
    # vLLM: min-p keeps {.4, .3, .2} (mass 9/10), then top-p 3/4 of 9/10 drops .2
    vllm = process_rows(p, "min_p=0.5,top_p=0.75")
    assert list(vllm) == [F(4, 7), F(3, 7), 0, 0]
    # transformers: top-p on the full row keeps .2 (mass above it 7/10 < 3/4), min-p keeps it
    hf = process_rows(p, "min_p=0.5,top_p=0.75,order=transformers")
    assert list(hf) == [F(4, 9), F(3, 9), F(2, 9), 0]
    assert list(hf) == bf_process(list(p), parse_sampling("min_p=0.5,top_p=0.75,"
                                                           "order=transformers"))


def test_process_rows_equals_brute_force_on_tied_rows():
    rng = random.Random(0)
    rows = _random_rows(rng, 24, 5) + _random_rows(rng, 12, 3, top=2) + [[F(1)], [F(1, 2)] * 2]
    checked = 0
    for V in sorted({len(r) for r in rows}):
        block = [r for r in rows if len(r) == V]
        arr = B.to_exact(np.array(block, dtype=object))
        for sp in PARAMS:
            got = process_rows(arr, sp)
            for r, g in zip(block, got):
                assert list(g) == bf_process(r, sp), (r, str(sp))
                checked += 1
    assert checked == len(rows) * len(PARAMS)


def test_float_and_torch_agree_with_exact_and_logits_with_probs():
    rng = np.random.default_rng(1)
    rows = rng.dirichlet(np.ones(6), size=20)  # no ties: float and exact thresholds agree
    exact_rows = B.to_exact(np.vectorize(F, otypes=[object])(rows))
    for sp in PARAMS[::5]:
        want = np.array(process_rows(exact_rows, sp), dtype=float)
        got = process_rows(rows, sp)
        assert isinstance(got, np.ndarray) and got.dtype == np.float64
        assert np.abs(got - want).max() <= 1e-12, str(sp)
        t = process_rows(torch.tensor(rows), sp)
        assert torch.is_tensor(t) and np.abs(t.numpy() - want).max() <= 1e-12
        lg = process_rows(torch.log(torch.tensor(rows)), sp, inputs="logits")
        assert np.abs(lg.numpy() - want).max() <= 1e-12
    # a temperature with no rational power: float p^(1/T), against numpy directly
    T = 0.7
    ref = rows ** (1 / T)
    ref /= ref.sum(1, keepdims=True)
    assert np.abs(process_rows(rows, {"temperature": T}) - ref).max() <= 1e-12
    # zeros stay zero, also as -inf logits
    z = np.array([[0.5, 0.0, 0.5]])
    assert process_rows(z, "temperature=0.3")[0, 1] == 0
    assert process_rows(torch.log(torch.tensor(z)), "temperature=0.3",
                        inputs="logits")[0, 1] == 0


def test_batched_shapes_and_no_processing():
    x = torch.rand(2, 3, 5, dtype=torch.float64)
    x = x / x.sum(-1, keepdim=True)  # distributions (rows off 1 are refused)
    out = process_rows(x, "top_k=2")
    assert out.shape == (2, 3, 5) and torch.allclose(out.sum(-1), torch.ones(2, 3,
                                                                              dtype=torch.float64))
    assert (out > 0).sum(-1).eq(2).all()
    assert torch.allclose(process_rows(x, None), x / x.sum(-1, keepdim=True))


def test_parse_sampling_forms_and_round_trip():
    sp = parse_sampling("temperature=0.7,top_k=20,top_p=0.9,min_p=0.05")
    assert (sp.temperature, sp.top_k, sp.top_p, sp.min_p) == (0.7, 20, 0.9, 0.05)
    assert parse_sampling(str(sp)) == sp
    assert parse_sampling({"top_k": 2, "top_p": "9/10"}).top_p == F(9, 10)
    assert parse_sampling(sp) is sp and parse_sampling(None) is None
    assert parse_sampling("none") is None and parse_sampling("greedy").greedy
    assert parse_sampling("top_k=0").top_k is None and parse_sampling("top_k=-1").identity
    assert str(parse_sampling("top_p=1,order=transformers")) == "order=transformers"
    assert parse_sampling("temperature=0.000001").greedy  # below vLLM's 1e-5
    assert {"SamplingParams", "parse_sampling", "process_rows"} <= set(st.__all__)
    assert st.SamplingParams is SamplingParams


@pytest.mark.parametrize("text, words", [
    ("topk=2", ["'topk'", "did you mean 'top_k'"]),
    ("tempreture=0", ["did you mean 'temperature'"]),
    ("temperature=-0.5", ["temperature", ">= 0"]),
    ("top_p=0", ["top_p", "(0, 1]"]),
    ("top_p=1.5", ["top_p", "(0, 1]"]),
    ("min_p=2", ["min_p", "[0, 1]"]),
    ("top_k=2.5", ["top_k", "integer"]),
    ("top_k=-3", ["top_k", "0 or -1"]),
    ("top_p=nan", ["top_p", "not finite"]),
    ("order=sglang", ["order", "vllm, transformers"]),
    ("temperature", ["key=value"]),
    ("top_k=2,top_k=3", ["twice"]),
])
def test_bad_parameters_one_line(text, words):
    with pytest.raises(SamplingError) as err:
        parse_sampling(text)
    msg = str(err.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_bad_rows_and_exact_refusals_one_line():
    cases = [
        (np.array([[0.5, np.nan]]), "probs", "NaN"),
        (np.array([[0.5, -0.1, 0.6]]), "probs", "non-negative"),
        (np.array([[0.0, 0.0]]), "probs", "no probability mass"),
        (np.array([[0.0, np.inf]]), "logits", "+inf"),
        (np.array([[-np.inf, -np.inf]]), "logits", "all -inf"),
        (np.array([F(1, 2), F(1, 2)], dtype=object), "logits", "exact rational mode"),
        (np.array([F(1, 2), 0.5], dtype=object), "probs", "Fractions or integers"),
    ]
    for rows, inputs, words in cases:
        with pytest.raises(SamplingError) as err:
            process_rows(rows, "top_k=1", inputs=inputs)
        assert words in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(SamplingError, match=r"temperature = 0.7 is not rational in exact mode"):
        process_rows(np.array([F(1, 2), F(1, 2)], dtype=object), "temperature=0.7")
    inst = st.random_instance(3, 2, 1, denominator=6)
    with pytest.raises(SpectheoryError, match="^sampling: temperature = 0.7 is not rational"):
        st.analyze(inst, "block", sampling="temperature=0.7")
    # float mode takes it; a rational power is exact
    assert st.analyze(inst, "block", exact=False, sampling="temperature=0.7").tv_to_target < 1e-15
    assert st.analyze(inst, "block", sampling="temperature=0.25").tv_to_target == 0


# ----------------------------------------------------------------------------- exact laws


def bf_instance(inst: Instance, sampling=None, draft_sampling=None) -> Instance:
    """The processed instance, row by row through the brute force."""
    def model(m, sp):
        if sp is None:
            return m
        return TableModel(m.vocab_size, tuple(B.to_exact(np.array([bf_process(list(r), sp)
                                                                     for r in t], dtype=object))
                                              for t in m.tables))
    sp, dp = parse_sampling(sampling), parse_sampling(draft_sampling)
    return Instance(inst.vocab_size, inst.block_length, model(inst.target, sp),
                    model(inst.draft, dp))


def _rows(model, prefix, V):
    return [list(model.conditional(prefix[:i])) for i in range(len(prefix) + 1)]


def bf_k_path_law(inst: Instance, law_fn, K: int = 2):
    """Output law (dict sequence -> probability) of a K-path verifier under i.i.d. drafting:
    every ordered tuple of K drafted paths, its probability, the verifier's law on it, the
    output block completed by target sampling; plain loops over Fractions."""
    V, L = inst.vocab_size, inst.block_length
    tq, tp = inst.draft, inst.target
    paths = list(itertools.product(range(V), repeat=L))
    out = {}

    def extend(seq, mass):
        if len(seq) == L + 1:
            out[seq] = out.get(seq, F(0)) + mass
            return
        row = tp.conditional(seq)
        for y in range(V):
            if row[y]:
                extend(seq + (y,), mass * row[y])

    def q_of(x):
        m = F(1)
        for i in range(L):
            m *= tq.conditional(x[:i])[x[i]]
        return m

    for combo in itertools.product(paths, repeat=K):
        w = F(1)
        for x in combo:
            w *= q_of(x)
        if w == 0:
            continue
        d = np.array([list(combo)], dtype=np.int64)  # [1, K, L]
        q = B.to_exact(np.array([[_rows(tq, x, V)[:L] for x in combo]], dtype=object))
        p = B.to_exact(np.array([[_rows(tp, x, V) for x in combo]], dtype=object))
        stop, corr = law_fn(d, q, p)
        for k, x in enumerate(combo):
            for i in range(L + 1):
                for y in range(V):
                    m = w * stop[0, k, i] * corr[0, k, i, y]
                    if m:
                        extend(tuple(x[:i]) + (y,), m)
    return out


def _as_dict(law, V, n):
    return {s: v for s, v in zip(itertools.product(range(V), repeat=n), law) if v}


SAMPLINGS = ["temperature=0", "top_k=2", "top_p=0.5", "min_p=0.5",
             "temperature=0.5,top_k=2,top_p=0.9,min_p=0.2",
             "top_p=2/3,min_p=0.4,order=transformers"]


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("name, law_fn", [("token", token_law), ("block", block_law)])
def test_single_path_laws_under_processed_targets(sampling, name, law_fn):
    inst = st.random_instance(3, 2, 5, denominator=6)  # prefix-dependent rows with ties
    res = st.analyze(inst, name, sampling=sampling)
    ref = bf_instance(inst, sampling)
    pmf, out, target = reference_analysis(ref, law_fn)
    assert list(res.tau_pmf) == pmf
    assert _as_dict(res.output_law, 3, 3) == out == target
    assert _as_dict(res.target_law, 3, 3) == target
    assert res.tv_to_target == 0 and res.extra["sampling"] == str(parse_sampling(sampling))
    if sampling == "temperature=0":  # greedy: the target law is one sequence
        assert list(target.values()) == [1]


@pytest.mark.parametrize("sampling, draft_sampling", [("temperature=0", None),
                                                      ("top_k=2,min_p=0.3", "top_k=2")])
@pytest.mark.parametrize("name, law_fn", [("gbv", previous_gbv),
                                          ("specinfer", previous_specinfer)])
def test_two_path_laws_under_processed_targets(sampling, draft_sampling, name, law_fn):
    inst = st.random_instance(3, 2, 7, denominator=4)
    res = st.analyze(inst, name, paths=2, sampling=sampling, draft_sampling=draft_sampling)
    ref = bf_k_path_law(bf_instance(inst, sampling, draft_sampling), law_fn, K=2)
    assert _as_dict(res.output_law, 3, 3) == ref
    assert _as_dict(res.target_law, 3, 3) == ref  # lossless against the processed target
    assert res.tv_to_target == 0 and res.extra["paths"] == 2


def test_processed_instance_and_multi_iteration():
    inst = st.random_instance(3, 2, 3, denominator=6)
    proc = process_instance(inst, "top_k=1", "temperature=0.5")
    assert proc.target.tables[1].shape == (3, 3) and proc.exact
    for d in range(3):
        for r in range(3**d):
            assert list(proc.target.tables[d][r]) == bf_process(list(inst.target.tables[d][r]),
                                                                  parse_sampling("top_k=1"))
    assert process_instance(inst) is inst and process_instance(inst, "temperature=1") is inst
    rep = st.check_lossless("block", inst, n_tokens=4, sampling="top_k=2", draft_sampling="top_k=2")
    assert rep.lossless and rep.tv == 0 and rep.n_tokens == 4
    gen, tgt, tv = st.multi_iteration_law(inst, "token", 4, sampling="temperature=0")
    assert tv == 0 and sorted(v for v in tgt if v) == [1]  # greedy: one 4-token sequence


def test_battery_under_sampling():
    reps = assert_lossless("block", sampling="temperature=0")
    assert all(r.exact and r.tv == 0 for r in reps)
    reps = assert_lossless("token", sampling="temperature=0.7,top_p=0.9")  # float mode
    assert all(not r.exact and r.tv <= 1e-12 for r in reps)


# ----------------------------------------------------------------------------- planted bug


def raw_target_verifier(raw: Instance):
    """A verifier that reads the target rows of the RAW instance along its drafts (ignoring the
    rows it is handed): an engine that verifies against the unprocessed target."""

    def verify(drafts, q, p):
        L = drafts.shape[1]
        rows = [[list(raw.target.conditional(tuple(int(t) for t in x[:i])))
                 for i in range(L + 1)] for x in drafts]
        return token_verification(drafts, q, B.to_exact(np.array(rows, dtype=object)))

    verify.__name__ = "raw_target_token"
    return verify


def test_planted_raw_target_verifier_is_caught():
    inst = st.random_instance(3, 2, 5, denominator=6)
    bad = raw_target_verifier(inst)
    assert st.check_lossless(bad, inst).lossless  # it is token verification on raw rows
    for sampling in ("top_k=2", "temperature=0"):
        rep = st.check_lossless(bad, inst, sampling=sampling)
        assert not rep.lossless and rep.tv > 0 and rep.offending is not None
        assert rep.output_probability != rep.target_probability


# ----------------------------------------------------------------------------- samplers

TOKEN = make_sampler("token")


def greedy_token_sampler(drafts, q, p, generator):
    """vLLM's greedy rule: token verification against the argmax point mass."""
    return TOKEN(drafts, q, process_rows(p, "temperature=0"), generator)


def top2_token_sampler(drafts, q, p, generator):
    return TOKEN(drafts, q, process_rows(p, "top_k=2"), generator)


def greedy_logits_sampler(drafts, q, logits, generator):
    assert logits.dtype == torch.float32
    return TOKEN(drafts, q, process_rows(logits, "temperature=0", inputs="logits"), generator)


def raw_target_sampler(drafts, q, p, generator):
    """Verifies against the raw rows it is handed: wrong under any processing."""
    return TOKEN(drafts, q, p, generator)


def _law_tv(rows, sampling):
    """Per draft row TV between the token law against the raw and the processed target."""
    d, q, p = rows
    a = token_verification(d, q, p)
    b = token_verification(d, q, process_rows(p, sampling))
    ja = a.stop.unsqueeze(-1) * a.correction
    jb = b.stop.unsqueeze(-1) * b.correction
    return 0.5 * (ja - jb).abs().flatten(1).sum(1)


# alpha = 1e-3 family-wise: a correct sampler fails with probability at most 1e-3; seeds fixed.
@pytest.mark.parametrize("mode", ["law", "lossless"])
@pytest.mark.parametrize("sampler, sampling", [(greedy_token_sampler, "temperature=0"),
                                               (top2_token_sampler, "top_k=2")])
def test_correct_samplers_pass_raw_samplers_fail(mode, sampler, sampling):
    rep = assert_sampler(sampler, "token", samples=6_000, mode=mode, sampling=sampling)
    assert any("processed by" in n for n in rep.notes)
    bad = check_sampler(raw_target_sampler, "token", samples=6_000, mode=mode,
                        sampling=sampling)
    assert not bad.passed and bad.p_value == 0.0
    with pytest.raises(AssertionError, match="FAIL"):
        assert_sampler(raw_target_sampler, "token", samples=2_000, mode=mode, sampling=sampling)


@pytest.mark.parametrize("mode", ["law", "lossless"])
def test_logits_inputs(mode):
    rep = check_sampler(greedy_logits_sampler, "token", samples=3_000, sampling="temperature=0",
                        inputs="logits", mode=mode)
    assert rep.passed and any("float32 logits" in n for n in rep.notes)


def test_power_against_the_raw_target_sampler():
    """The bias of the raw-target sampler exceeds the check's stated 90%-power threshold on
    every default draft row, so its failure is not luck."""
    from spectheory.testing.checks.sampler import _fixed_rows, default_instances

    rep = check_sampler(top2_token_sampler, "token", samples=6_000, sampling="top_k=2")
    assert 0 < rep.min_detectable_tv < 0.2
    g = torch.Generator().manual_seed(0)
    tvs = torch.cat([_law_tv([x[:, 0] for x in _fixed_rows(inst, 1, "iid", 8, g)], "top_k=2")
                     for inst in default_instances()])
    assert float(tvs.max()) > rep.min_detectable_tv
    greedy = check_sampler(greedy_token_sampler, "token", samples=3_000,
                           sampling="temperature=0")
    assert greedy.dof == 0 and any("1 - (1 - t)^n" in n for n in greedy.notes)


def test_coins_mode_under_greedy():
    from spectheory.testing.checks.sampler import reference_coin_sampler

    ref = reference_coin_sampler("token")

    def greedy_coins(d, q, p, u):
        return ref(d, q, process_rows(p, "temperature=0"), u)

    assert check_sampler(greedy_coins, "token", samples=2_000, mode="coins",
                         sampling="temperature=0").passed
    assert not check_sampler(ref, "token", samples=2_000, mode="coins",
                             sampling="temperature=0").passed


def test_draft_sampling_hands_the_processed_q():
    seen = []

    def spy(drafts, q, p, generator):
        seen.append(((q > 0).sum(-1) <= 1).all().item())
        return TOKEN(drafts, q, p, generator)

    rep = check_sampler(spy, "token", samples=4_000, draft_sampling="temperature=0")
    assert all(seen) and rep.passed  # q handed as the greedy point masses drafts came from


SAMPLERS = '''
from spectheory.inputs.processing import process_rows
from spectheory.testing import make_sampler
token = make_sampler("token")
def greedy(d, q, p, g):
    return token(d, q, process_rows(p, "temperature=0"), g)
def raw(d, q, p, g):
    return token(d, q, p, g)
'''


def test_cli(tmp_path, user_modules, capsys):
    user_modules(h5_samplers=SAMPLERS)
    base = ["check-sampler", "--verifier", "token", "--samples", "4000", "--sampling",
            "temperature=0"]
    code, out, _ = run(base[:1] + ["h5_samplers:greedy"] + base[1:], capsys)
    assert code == 0 and "PASS" in out
    code, out, _ = run(base[:1] + ["h5_samplers:raw"] + base[1:], capsys)
    assert code == 1 and "FAIL" in out and "probability zero" in out
    code, out, err = run(base[:1] + ["h5_samplers:raw"] + base[1:-1] + ["temprature=0"], capsys)
    assert code == 2 and "did you mean 'temperature'" in err and err.count("\n") == 1
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 5, denominator=6)))
    code, out, _ = run(["exact", path, "--exact", "--sampling", "temperature=0", "--json"],
                       capsys)
    obj = json.loads(out)
    assert code == 0 and obj["sampling"] == "temperature=0" and obj["tv_to_target"] == "0"
    code, out, _ = run(["check", path, "--exact", "--verifier", "token", "--sampling", "top_k=2",
                        "--draft-sampling", "top_k=1", "--json"], capsys)
    obj = json.loads(out)
    assert code == 0 and obj["lossless"] and obj["draft_sampling"] == "top_k=1"
    code, _, err = run(["check", path, "--exact", "--sampling", "temperature=0.7"], capsys)
    assert code == 2 and "not rational" in err and err.count("\n") == 1


# ----------------------------------------------------------------------------- n-gram drafts


def test_ngram_law_is_the_formula_and_lossless():
    inst = st.random_instance(3, 2, 9, denominator=6)
    res = st.analyze(inst, "ngram")
    V, L = 3, 2

    def ngram_law(x, q_rows, p_rows):  # token verification against q = 1{x_i}
        return token_law(x, [[F(int(a == x[i])) for a in range(V)] for i in range(L)], p_rows)

    pmf, out, target = reference_analysis(inst, ngram_law)
    assert list(res.tau_pmf) == pmf and _as_dict(res.output_law, V, L + 1) == out == target
    # P(tau >= i) = E_q[p(X^i)]: acceptance is the target probability of the drafted prefix
    e_tau = sum(F(1) * qx * px for i in (1, 2) for x in itertools.product(range(V), repeat=i)
                for qx, px in [(_path(inst.draft, x), _path(inst.target, x))])
    assert res.expected_accepted == e_tau
    assert all(r.lossless and r.tv == 0 for r in assert_lossless("ngram"))
    assert st.check_lossless("ngram", inst, sampling="top_k=2", draft_sampling="temperature=0",
                             n_tokens=4).lossless


def _path(model, x):
    m = F(1)
    for i, t in enumerate(x):
        m *= model.conditional(x[:i])[t]
    return m


def test_ngram_equals_token_on_deterministic_drafts():
    """With point-mass draft rows (a deterministic drafter) the n-gram verifier is token
    verification exactly; with soft rows it accepts less, never more than the drafted prefix's
    target probability."""
    inst = st.random_instance(3, 2, 11, denominator=6)
    det = process_instance(inst, None, "temperature=0")
    assert st.analyze(det, "ngram").tau_pmf == st.analyze(det, "token").tau_pmf
    assert st.analyze(inst, "ngram").block_efficiency < st.analyze(inst, "token").block_efficiency


def test_ngram_planted_bug_correcting_from_p_is_caught():
    """Planted bug: the n-gram rule with its correction drawn from p itself (the rejected token
    not removed). Acceptance is unchanged, the output law is not: the exact check flags it on a
    prefix-dependent instance, and the real rule on the same instance is lossless."""
    import spectheory.verifiers.ngram as ngram_module

    def corrected_from_p(drafts, q, p):
        law = ngram_module.ngram_verification(drafts, q, p)
        L = drafts.shape[-1]
        return law._replace(correction=p[..., : L + 1, :])

    inst = st.random_instance(3, 2, 9, denominator=6)
    assert st.check_lossless("ngram", inst, exact=True).lossless
    bad = st.check_lossless(corrected_from_p, inst, exact=True)
    assert not bad.lossless and bad.tv > 0


@pytest.mark.parametrize("params", [
    "repetition_penalty=1.3", "frequency_penalty=0.5,presence_penalty=0.2",
    "no_repeat_ngram_size=2", "min_tokens=2,stop_token_ids=0",
    "repetition_penalty=1.5,temperature=0.7,top_k=2", "no_repeat_ngram_size=2,top_p=0.8",
    "min_tokens=1,stop_token_ids=1,repetition_penalty=2.0,min_p=0.2"])
@pytest.mark.parametrize("inputs", ["probs", "logits"])
def test_rows_along_a_sequence_are_each_positions_own(params, inputs):
    """process_rows_along processes row j with the history tokens[:, :j] (its masks and
    counts); all positions in one pass equal the per-position definition bit for bit, with
    repeated tokens, ties and a zero row; a history token outside the vocabulary is refused
    with the per-position message."""
    from spectheory.inputs.processing import process_rows, process_rows_along

    g = torch.Generator().manual_seed(7)
    B, P, V = 5, 4, 3
    rows = torch.rand(B, P, V, generator=g, dtype=torch.float64)
    rows[0, 1] = rows[0, 1, :1]  # ties
    if inputs == "probs":
        rows = rows / rows.sum(-1, keepdim=True)
        rows[1, 2] = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
    else:
        rows = torch.log(rows)
    tokens = torch.randint(0, V, (B, P - 1), generator=g)
    tokens[2] = 1  # one token repeated
    want = torch.stack([process_rows(rows[:, j], params, inputs, history=tokens[:, :j])
                        for j in range(P)], 1)
    got = process_rows_along(rows, tokens, params, inputs)
    assert got.dtype == want.dtype and torch.equal(got, want)
    tokens[3, 1] = V
    with pytest.raises(st.SpectheoryError) as one:
        torch.stack([process_rows(rows[:, j], params, inputs, history=tokens[:, :j])
                     for j in range(P)], 1)
    with pytest.raises(st.SpectheoryError) as along:
        process_rows_along(rows, tokens, params, inputs)
    assert str(along.value) == str(one.value)


def test_ngram_law_reads_no_q_so_none_is_accepted():
    """The n-gram rule has no draft model (vLLM calls its rejection sampler with
    ``draft_probs=None`` for n-gram drafts): q = None gives the same law as any q, and a q of
    the wrong form is not looked at; p's form is still checked."""
    from spectheory.runtime.errors import InputError
    from spectheory.verifiers.ngram import ngram_verification

    drafts = torch.tensor([[1, 0]])
    p = torch.tensor([[[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]]], dtype=torch.float64)
    q = torch.full((1, 2, 2), 0.5, dtype=torch.float64)
    ref, got = ngram_verification(drafts, q, p), ngram_verification(drafts, None, p)
    assert torch.equal(ref.stop, got.stop) and torch.equal(ref.correction, got.correction)
    assert torch.allclose(got.stop, torch.tensor([[0.2, 0.8 * 0.4, 0.8 * 0.6]],
                                                 dtype=torch.float64))
    with pytest.raises(InputError, match="do not fit") as exc:
        ngram_verification(drafts, None, p[:, :2])
    # the message names the arrays that were given and read: no q derived from p's shape
    assert str(exc.value) == ("verifier law: drafts [1, 2] and p [1, 2, 2] do not fit drafts "
                              "[B, L], p [B, L+1, V] (q is not read)")
    with pytest.raises(InputError, match=r"drafts and p must be arrays .* got Tensor, list "
                                         r"\(q is not read\)"):
        ngram_verification(drafts, None, p.tolist())
    with pytest.raises(InputError, match="rows of 0 tokens"):
        ngram_verification(drafts, None, p[..., :0])
    # two drafts over one batch row of p: refused, not one row's law broadcast over both
    with pytest.raises(InputError, match=r"drafts \[2, 2\] and p \[1, 3, 2\] do not fit"):
        ngram_verification(torch.tensor([[1, 0], [0, 0]]), None, p)
