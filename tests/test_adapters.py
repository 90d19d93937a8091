"""Adapters from engines' sampler layouts to the canonical signature
(spectheory.testing.engines.adapters).

Each adapter passes check_sampler in law mode for its verifier (family-wise false-alarm rate
alpha = 1e-3, fixed seeds; the reports state the TV bias detected with 90% power at the sample
size, about 0.03 at 20,000 samples on the default instances) and, where it takes uniforms, coins
mode against spectheory's coin reference (identical decisions). Ports built around a mutant
fail. The ports run on the CPU; the engines' CUDA/Triton kernels are not run here.
"""

from __future__ import annotations

import functools
import inspect

import pytest
import torch

from spectheory.testing.engines import adapters as A
from spectheory.testing.checks.sampler import DraftRows, check_sampler, default_instances


def _rows(seed, B=6, L=3, V=5):
    g = torch.Generator().manual_seed(seed)
    q = torch.rand(B, L, V, generator=g, dtype=torch.float64) + 0.02
    p = torch.rand(B, L + 1, V, generator=g, dtype=torch.float64) + 0.02
    q, p = q / q.sum(-1, keepdim=True), p / p.sum(-1, keepdim=True)
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(B, L)
    return d, q, p


# ----------------------------------------------------------------------------- Hugging Face


def test_hf_routine_has_the_signature_the_adapter_calls():
    utils = pytest.importorskip("transformers.generation.utils")
    params = list(inspect.signature(utils._speculative_sampling).parameters)
    assert params[:4] == ["candidate_input_ids", "candidate_logits", "candidate_length",
                          "new_logits"]


def test_hf_real_routine_passes_law_mode_and_leaves_global_rng_alone():
    pytest.importorskip("transformers")
    rep = check_sampler(A.hf_sampler, "token", samples=6_000, seed=1)
    assert rep.passed, str(rep)
    torch.manual_seed(11)
    a = torch.rand(3)
    torch.manual_seed(11)
    d, q, p = _rows(0)
    A.hf_sampler(d, q, p, torch.Generator().manual_seed(0))
    assert torch.equal(torch.rand(3), a)
    # same generator seed, same outputs
    o1 = A.hf_sampler(d, q, p, torch.Generator().manual_seed(3))
    o2 = A.hf_sampler(d, q, p, torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(o1, o2))


def test_hf_real_routine_through_the_transformers_layout():
    """The TRANSFORMERS preset calls the real ``_speculative_sampling`` with no adapter (float32
    logits on both sides, one sequence a call, the global generator seeded inside fork_rng); its
    DIVERSE ensemble weight (lossy by design) is the negative control."""
    utils = pytest.importorskip("transformers.generation.utils")
    from spectheory.testing.engines.layouts import TRANSFORMERS, engine_sampler

    rep = check_sampler(engine_sampler(utils._speculative_sampling, TRANSFORMERS), "token",
                        samples=2_000)
    assert rep.passed, str(rep)
    lossy = functools.partial(utils._speculative_sampling, assistant_ensemble_weight=0.5)
    assert not check_sampler(engine_sampler(lossy, TRANSFORMERS), "token", samples=1_000).passed


# ----------------------------------------------------------------------------- vLLM V1


def test_vllm_v1_layout_ragged_requests_placeholders_and_ngram_mode():
    # request 0: 2 drafts, request 1: 3 drafts, request 2: 1 draft; V = 3
    ids = torch.tensor([0, 1, 2, 2, 0, 1])
    cu = torch.tensor([2, 5, 6])
    q = torch.full((6, 3), 1 / 3, dtype=torch.float64)
    p = torch.tensor([[1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]],
                     dtype=torch.float64)
    u = torch.full((6,), 0.5, dtype=torch.float64)
    rec = torch.tensor([7, 7, 8, 8, 8, 9])  # marks which recovered token was used
    out = A.vllm_rejection_sample(ids, cu, 3, q, p, torch.tensor([4, 5, 6]), u, rec)
    # r0: both accepted (p/q = 3 >= 0.5) + bonus; r1: 2 rejected at once (p = 0);
    # r2: accepted + bonus; unused slots hold the placeholder
    assert out.tolist() == [[0, 1, 4, -1], [8, -1, -1, -1], [1, 6, -1, -1]]
    # n-gram mode: no draft probs, draft probability 1
    out = A.vllm_rejection_sample(ids, cu, 3, None, p, torch.tensor([4, 5, 6]), u, rec)
    assert out.tolist()[0] == [0, 1, 4, -1]
    assert A.canonical_from_padded(torch.tensor([[0, 1, 4, -1], [8, -1, -1, -1]]))[0].tolist() \
        == [2, 0]


def test_vllm_v1_port_passes_law_mode():
    assert check_sampler(A.vllm_sampler, "token", samples=20_000).passed


def test_vllm_v1_coins_agree_and_a_zero_coin_accepts_a_zero_probability_draft():
    """The kernel's p/q >= u on its float64 coins in [0, 1): identical decisions to the reference
    on instances whose pinned rows have no zero-probability draft; on the instance with zeros the
    kit's smallest coin (the engine's coin 0) accepts a draft of target probability 0, the class
    of SGLang #35771 (probability 2^-53 per draw)."""
    insts = default_instances("coins")
    zeros = [any((t == 0).any() for t in i.target.tables + i.draft.tables) for i in insts]
    assert any(zeros) and not all(zeros)
    clean = [i for i, z in zip(insts, zeros) if not z]
    assert check_sampler(A.vllm_coin_sampler, "token", instances=clean, samples=3_000,
                         mode="coins").passed
    rep = check_sampler(A.vllm_coin_sampler, "token",
                        instances=[i for i, z in zip(insts, zeros) if z], samples=1_000,
                        mode="coins")
    mm = rep.mismatch
    assert not rep.passed and mm.got[0] > mm.expected[0]
    assert mm.p[mm.expected[0]][mm.drafts[mm.expected[0]]] == 0.0
    assert mm.uniforms[mm.expected[0]] == A.FLOAT64_COIN_STEP


# ----------------------------------------------------------------------------- vLLM MRV2


@pytest.mark.parametrize("method,verifier", [("standard", "token"), ("block", "block")])
def test_vllm_mrv2_port_passes_law_and_coins(method, verifier):
    assert check_sampler(A.vllm_mrv2_sampler(method), verifier, samples=20_000).passed
    assert check_sampler(A.vllm_mrv2_coin_sampler(method), verifier, samples=3_000,
                         mode="coins").passed


def test_vllm_mrv2_port_with_the_wrong_row_fails_law_and_coins():
    bad = check_sampler(A.vllm_mrv2_sampler("block", bug="wrong-row"), "block", samples=20_000)
    assert not bad.passed
    assert not check_sampler(A.vllm_mrv2_coin_sampler("block", bug="wrong-row"), "block",
                             samples=3_000, mode="coins").passed


def test_vllm_mrv2_ragged_requests_equal_one_request_at_a_time():
    """Requests of 3, 1 and 2 drafts in one flattened call give the same decisions as each
    request alone (same coins), and unused slots hold the placeholder."""
    d, q, p = _rows(4, B=3, L=3, V=5)
    lens = [3, 1, 2]
    tl, dl, ds, cu, u, tu = [], torch.zeros(3, 3, 5, dtype=torch.float64), [], [0], [], []
    g = torch.Generator().manual_seed(9)
    coins = torch.rand(3, 4, generator=g, dtype=torch.float64).clamp(min=1e-3)
    for b, n in enumerate(lens):
        tl.append(torch.log(torch.cat([p[b, :n], p[b, n:n + 1]])))
        dl[b, :n] = torch.log(q[b, :n])
        ds.append(torch.cat([torch.zeros(1, dtype=torch.long), d[b, :n]]))
        cu.append(cu[-1] + n + 1)
        u.append(torch.cat([coins[b, :n], torch.ones(1, dtype=torch.float64)]))
    tok_u = coins[:, 3]
    sampled, num = A.vllm_mrv2_rejection_sample(
        torch.cat(tl), dl, torch.cat(ds), torch.tensor(cu), torch.cat(u), 3, method="block",
        token_uniforms=tok_u, dtype=torch.float64)
    for b, n in enumerate(lens):
        one, k = A.vllm_mrv2_rejection_sample(
            tl[b], dl[b:b + 1], ds[b], torch.tensor([0, n + 1]), u[b], n, method="block",
            token_uniforms=tok_u[b:b + 1], dtype=torch.float64)
        assert int(num[b]) == int(k[0])
        assert sampled[b, :int(k[0])].tolist() == one[0, :int(k[0])].tolist()
        assert (sampled[b, int(k[0]):] == A.PLACEHOLDER_TOKEN_ID).all()


# ----------------------------------------------------------------------------- SGLang


@pytest.mark.parametrize("method", ["token", "block"])
def test_sglang_port_passes_law_and_identical_coins(method):
    assert check_sampler(A.sglang_sampler(method), method, samples=20_000).passed
    assert check_sampler(A.sglang_coin_sampler(method), method, samples=3_000,
                         mode="coins").passed


def test_sglang_layout_and_a_convention_mismatch_is_caught():
    d, q, p = _rows(2, B=4, L=3, V=4)
    u = torch.tensor([[1e-9, 1e-9, 1e-9, 0.3]] * 4, dtype=torch.float64)  # every coin passes
    out, acc = A.sglang_chain_sample(q, d, u, p, torch.full((4,), 0.5, dtype=torch.float64))
    ratio = (p[:, :3].gather(-1, d.unsqueeze(-1)) / q.gather(-1, d.unsqueeze(-1)))[..., 0]
    assert (ratio > 1e-9).all()
    assert acc.tolist() == [3] * 4 and out[:, :3].tolist() == d.tolist()
    # coins of 1 accept exactly the drafts with p >= q, up to the first one with p < q
    u1 = torch.tensor([[1.0, 1.0, 1.0, 0.3]] * 4, dtype=torch.float64)
    out, acc = A.sglang_chain_sample(q, d, u1, p, torch.full((4,), 0.5, dtype=torch.float64))
    assert acc.tolist() == torch.cumprod((ratio >= 1).long(), dim=1).sum(1).tolist()
    assert (out.gather(1, acc.unsqueeze(1)) >= 0).all()  # the final token
    after = torch.arange(4).unsqueeze(0) > acc.unsqueeze(1)
    assert (out[after] == A.PLACEHOLDER_TOKEN_ID).all()
    # the token port checked against the block reference: caught at once
    assert not check_sampler(A.sglang_coin_sampler("token"), "block", samples=3_000,
                             mode="coins").passed


def test_adapters_refuse_bad_shapes():
    d, q, p = _rows(0)
    with pytest.raises(ValueError, match="shapes do not match"):
        A.vllm_sampler(d, q, p[:, :-1])
    with pytest.raises(ValueError, match="unknown method"):
        A.sglang_chain_sample(q, d, torch.ones(6, 4), p, torch.zeros(6), "tree")


def test_draft_rows_instances_reach_any_vocabulary():
    """A V = 2,000 row set (no table instance): the MRV2 block port passes law mode."""
    g = torch.Generator().manual_seed(0)
    V, L = 2_000, 2
    q = torch.softmax(torch.randn(1, L, V, generator=g, dtype=torch.float64) * 2, -1)
    p = torch.softmax(torch.randn(1, L + 1, V, generator=g, dtype=torch.float64) * 2, -1)
    d = torch.multinomial(q[0], 1, generator=g).T
    rows = DraftRows(d.repeat(8, 1), q.repeat(8, 1, 1), p.repeat(8, 1, 1))
    assert check_sampler(A.vllm_mrv2_sampler("block"), "block", instances=[rows],
                         samples=8_000).passed


# ----------------------------------------------------------------------------- engines' own layouts


def _v1_meta(B, generators, temperature=None, all_greedy=False):
    from types import SimpleNamespace

    temp = torch.ones(B) if temperature is None else torch.tensor(temperature)
    return SimpleNamespace(all_greedy=all_greedy, all_random=not all_greedy and bool(
        (temp != A.VLLM_GREEDY_TEMPERATURE).all()), temperature=temp, generators=generators,
        top_k=None, top_p=None)


def test_vllm_v1_port_ragged_requests_equal_one_request_at_a_time():
    """Requests of 3, 1 and 2 drafts (and one of none) in one flattened call emit what each
    request emits alone with the same generator, padded with -1; greedy requests
    (temperature GREEDY_TEMPERATURE, 0 in vllm 0.33.0) accept while the draft is the target's
    argmax."""
    d, q, p = _rows(7, B=4, L=3, V=5)
    lens = [3, 1, 0, 2]
    ids = torch.cat([d[b, :n] for b, n in enumerate(lens)]).to(torch.int32)
    qs = torch.cat([q[b, :n] for b, n in enumerate(lens)]).float()
    lg = torch.cat([torch.log(p[b, :n]) for b, n in enumerate(lens)]).float()
    cu = torch.tensor([3, 4, 4, 6], dtype=torch.int32)
    bonus = torch.tensor([[4], [3], [2], [1]], dtype=torch.int32)

    def gens():
        return {b: torch.Generator().manual_seed(100 + b) for b in range(4)}

    out = A.vllm_v1_rejection_sample(ids, lens, 3, cu, qs, lg, bonus, _v1_meta(4, gens()))
    start = 0
    for b, n in enumerate(lens):
        g = gens()
        one = A.vllm_v1_rejection_sample(ids[start:start + n], [n], 3,
                                         torch.tensor([n], dtype=torch.int32),
                                         qs[start:start + n], lg[start:start + n],
                                         bonus[b:b + 1], _v1_meta(1, {0: g[b]}))
        assert out[b].tolist() == one[0].tolist()
        emitted = int((out[b] != -1).sum())
        assert 1 <= emitted <= n + 1 and (out[b, emitted:] == -1).all()
        start += n
    assert out[2].tolist() == [2, -1, -1, -1]  # no drafts: the bonus token alone
    # a request of no drafts draws nothing from its generator (vLLM's expo draws skip it): its
    # next draw is its seed's first (drawing there is vllm-ascend #13608's bug class)
    g = gens()
    A.vllm_v1_rejection_sample(ids, lens, 3, cu, qs, lg, bonus, _v1_meta(4, g))
    assert float(torch.rand((), generator=g[2])) == \
        float(torch.rand((), generator=torch.Generator().manual_seed(102)))
    greedy = A.vllm_v1_rejection_sample(ids, lens, 3, cu, qs, lg, bonus,
                                        _v1_meta(4, {}, [A.GREEDY_TEMPERATURE] * 4))
    am = lg.argmax(-1)
    start = 0
    for b, n in enumerate(lens):
        match = (ids[start:start + n].long() == am[start:start + n]).long().cumprod(0)
        k = int(match.sum())
        want = ids[start:start + k].tolist() + ([int(am[start + k])] if k < n else
                                                [int(bonus[b])])
        assert greedy[b, :k + 1].tolist() == want
        start += n


def test_ports_refuse_an_unknown_planted_bug():
    with pytest.raises(ValueError, match="unknown bug 'x'"):
        A.hf_speculative_sampling(torch.zeros(1, 2, dtype=torch.long), torch.zeros(1, 2, 3), 2,
                                  torch.zeros(1, 3, 3), bug="x")


def _port_row_by_row(cands, lq, L, lp, pad=-1):
    """The port on each sequence in turn, as transformers runs it (the reference of the batch
    function)."""
    B = cands.shape[0]
    tokens = torch.full((B, L + 1), pad, dtype=torch.long)
    n = torch.empty(B, dtype=torch.long)
    for b in range(B):
        valid, nb = A.hf_speculative_sampling(cands[b:b + 1], lq[b:b + 1], L, lp[b:b + 1])
        tokens[b, :valid.shape[1]] = valid[0]
        n[b] = nb
    return tokens, n


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_batch_port_draws_and_decides_as_the_port_sequence_by_sequence(dtype):
    """``hf_speculative_sampling_rows`` reads each sequence's uniforms and exponentials from
    the places in the global stream where the port, called sequence by sequence, draws them:
    the same tokens, n_matches and final generator state, with ties, zero rows, p = q rows and
    L = 0; a residual the port refuses raises the port's error (float32 takes the port)."""
    g = torch.Generator().manual_seed(3)
    for B, L, V in [(1, 0, 3), (5, 1, 2), (7, 3, 4), (16, 2, 50), (3, 4, 1000)]:
        ctx = torch.randint(0, V, (B, 2), generator=g)
        drafts = torch.randint(1, V, (B, L), generator=g)  # tokens the draft can propose
        q = torch.rand(B, L + 1, V, generator=g, dtype=torch.float64)
        q[:, :, 0] = 0  # a token the draft never proposes
        p = torch.rand(B, L + 1, V, generator=g, dtype=torch.float64)
        p[0] = q[0]  # a sequence whose target is its draft
        q, p = (q / q.sum(-1, keepdim=True)).to(dtype), (p / p.sum(-1, keepdim=True)).to(dtype)
        cands, lq, lp = torch.cat([ctx, drafts], 1), torch.log(q), torch.log(p)
        torch.manual_seed(11)
        want = _port_row_by_row(cands, lq, L, lp)
        end = torch.get_rng_state()
        torch.manual_seed(11)
        got = A.hf_speculative_sampling_rows(cands, lq, L, lp)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), (B, L, V)
        assert torch.equal(torch.get_rng_state(), end)
    bad = torch.log(torch.tensor([[[0.5, 0.5], [0.5, 0.5]]], dtype=torch.float64))
    nan = bad.clone()
    nan[0, 1, 0] = float("nan")
    for rows in (bad, nan):
        torch.manual_seed(0)
        try:
            _port_row_by_row(torch.zeros(1, 2, dtype=torch.long), rows, 1, nan)
        except RuntimeError as exc:
            want = str(exc)
        torch.manual_seed(0)
        with pytest.raises(RuntimeError) as exc:
            A.hf_speculative_sampling_rows(torch.zeros(1, 2, dtype=torch.long), rows, 1, nan)
        assert str(exc.value) == want


def test_mrv2_standard_rule_is_strict_at_equality():
    """MRV2's kernel accepts when log p > log u + log q (strictly): p/q = 1/2 at a coin of 1/2 is
    rejected (tau 0)."""
    import torch

    from spectheory.testing.engines.adapters import vllm_mrv2_coin_sampler

    d = torch.tensor([[0]])
    q = torch.tensor([[[1.0, 0.0]]], dtype=torch.float64)
    p = torch.tensor([[[0.5, 0.5], [0.0, 1.0]]], dtype=torch.float64)
    tau, _ = vllm_mrv2_coin_sampler("standard")(d, q, p, torch.tensor([[0.5, 0.1]],
                                                                        dtype=torch.float64))
    assert int(tau[0]) == 0
    tau, _ = vllm_mrv2_coin_sampler("standard")(d, q, p, torch.tensor([[0.49, 0.1]],
                                                                        dtype=torch.float64))
    assert int(tau[0]) == 1


def test_mrv2_block_rule_reads_each_requests_own_last_position():
    """Requests with different draft counts (1 and 2): request 0's last drafted position is its
    first, where h = w = p/q = 1/2, so its coin 0.3 accepts (tau 1, then the bonus token at
    0.9 on (1/2, 1/2): 1); reading h at position n instead of n - 1 used the residual formula
    there and rejected."""
    import torch

    from spectheory.testing.engines.adapters import vllm_mrv2_rejection_sample

    t = torch.log(torch.full((5, 2), 0.5, dtype=torch.float64))
    d = torch.log(torch.tensor([[[1.0, 1e-300], [0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]]],
                               dtype=torch.float64))
    sampled, num = vllm_mrv2_rejection_sample(
        t, d, torch.tensor([0, 0, 0, 1, 1]), torch.tensor([0, 2, 5]),
        torch.tensor([.3, 1, .3, .3, 1], dtype=torch.float64), 2, method="block",
        dtype=torch.float64, token_uniforms=torch.tensor([.9, .9], dtype=torch.float64))
    assert sampled.tolist() == [[0, 1, -1], [1, 1, 1]] and num.tolist() == [2, 3]
