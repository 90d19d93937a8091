"""Engine layouts and coin conventions as data (spectheory.testing.engines.layouts).

Each preset is exercised on a port written in that engine's own call layout
(spectheory.testing.engines.adapters): the port passes through its preset with no hand-written
adapter (law mode, and coins / coins-tau mode where the engine takes coins), and every planted bug
of PORT_BUGS is caught. Law-mode checks run at family-wise false-alarm rate alpha = 1e-3 with fixed
seeds (a fixed verdict); at 4,000 samples on the default instances they detect a TV bias of about
0.07 with 90% power, and the planted bugs are far larger (TV 0.1-0.3 per row, with outcomes of
probability 0), so each is caught at p-value 0 already at 1,000 samples (0 for seeds 0-4). Coin-level checks are exact comparisons: no false alarm, no power
statement needed. The real transformers routine goes through its preset in tests/test_adapters.py.
"""

from __future__ import annotations

import functools

import pytest
import torch

from spectheory.runtime.errors import OptionError, SpectheoryError, UserCodeError
from spectheory.testing.engines import adapters as A
from spectheory.testing.engines import layouts as Lm
from spectheory.testing.checks.sampler import (TINY_COIN, check_sampler, default_instances,
                                               reference_coin_sampler)

INSTANCES = default_instances()
ZEROS = INSTANCES[2]  # the target has zeros where the draft has mass
CLEAN = [INSTANCES[0], INSTANCES[1], INSTANCES[3]]
NO_TIES = INSTANCES[:3]  # no node where p = q exactly (a rejection there is a 0/0 residual)

PORTS = {  # port, preset, takes coins
    "vllm-v1": (A.vllm_v1_rejection_sample, Lm.VLLM_V1, True),
    "vllm-mrv2": (A.vllm_mrv2_engine_rejection_sample, Lm.VLLM_MRV2, False),
    "sglang-chain": (A.sglang_chain_speculative_sampling, Lm.SGLANG_CHAIN, True),
    "transformers": (A.hf_speculative_sampling, Lm.TRANSFORMERS, False),
}


def _rows(seed, B=5, L=3, V=4):
    g = torch.Generator().manual_seed(seed)
    q = torch.rand(B, L, V, generator=g, dtype=torch.float64) + 0.05
    p = torch.rand(B, L + 1, V, generator=g, dtype=torch.float64) + 0.05
    q, p = q / q.sum(-1, keepdim=True), p / p.sum(-1, keepdim=True)
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(B, L)
    return d, q, p


# ----------------------------------------------------------------------------- coin conventions


@pytest.mark.parametrize("conv,smallest,largest", [
    (Lm.KIT_COINS, 2.0**-53, 1.0),
    (Lm.VLLM_V1_COINS, 0.0, 1.0 - 2.0**-53),
    (Lm.VLLM_MRV2_COINS, 2.0**-31, 1.0 - 2.0**-24),
    (Lm.SGLANG_COINS, 0.0, 1.0 - 2.0**-24),
    (Lm.TRANSFORMERS_COINS, 0.0, 1.0 - 2.0**-24),
])
def test_convention_ranges_and_the_pinned_ends_map_exactly(conv, smallest, largest):
    assert (conv.smallest, conv.largest) == (smallest, largest)
    c = conv.from_kit(torch.tensor([TINY_COIN, 1.0], dtype=torch.float64))
    assert c.dtype == getattr(torch, conv.dtype)
    assert c.tolist() == [smallest, largest]
    # token coins round down into the dtype: the kit's largest token coin never becomes 1
    t = conv.token_from_kit(torch.tensor([0.0, 1.0 - 2.0**-53, 0.3], dtype=torch.float64))
    assert t[0] == 0 and float(t[1]) < 1.0 and float(t[2]) <= 0.3
    assert float(t[2]) > 0.3 - 2.0**-23


def test_kit_convention_is_the_identity():
    u = 1.0 - torch.rand(1000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert torch.equal(Lm.KIT_COINS.from_kit(u), u)


def _engine_accepts(conv, c, t):
    """The engine's decisions [n, m] for coins c [n] (its dtype) and thresholds t [m] (float64),
    both sides in the engine's dtype (in logs for a log-space test)."""
    dt = getattr(torch, conv.dtype)
    tt, cc = t.to(dt).unsqueeze(0), c.to(dt).unsqueeze(1)
    if conv.log_space:
        tt, cc = torch.log(tt), torch.log(cc)
    a, b = (cc, tt) if conv.coin_first else (tt, cc)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[conv.compare]


@pytest.mark.parametrize("name", sorted(Lm.COIN_CONVENTIONS))
def test_engine_decisions_equal_the_kits_away_from_the_documented_flaws(name):
    """For every preset convention: on the mapped coins, the engine's comparison (in its dtype,
    in logs where it compares logs) equals the kit's u <= t for all thresholds except those within
    1e-6 of u; at t = 0 and t = 1 exactly as the convention's ends and strictness imply."""
    conv = Lm.COIN_CONVENTIONS[name]
    g = torch.Generator().manual_seed(1)
    u = 1.0 - torch.rand(2000, generator=g, dtype=torch.float64)
    u = torch.cat([u, torch.tensor([TINY_COIN, 1.0], dtype=torch.float64)])
    t = torch.cat([torch.rand(1000, generator=g, dtype=torch.float64),
                   torch.tensor([0.0, 1.0], dtype=torch.float64)])
    c = conv.from_kit(u)
    kit = u.unsqueeze(1) <= t.unsqueeze(0)
    eng = _engine_accepts(conv, c, t)
    tie = ((u.unsqueeze(1) - t.unsqueeze(0)).abs() <= 1e-6) & (t != 0) & (t != 1)
    bad = [(float(u[i]), float(t[j])) for i, j in ((kit != eng) & ~tie).nonzero().tolist()]
    coin_zero_accepts_zero = conv.smallest == 0.0 and not conv.strict
    assert bad == ([(TINY_COIN, 0.0)] if coin_zero_accepts_zero else []), (name, bad[:5])
    # the convention's own scalar methods say the same at the ends
    assert conv.accepts(conv.engine_threshold(0.0, 1.0), conv.engine_coin(conv.smallest)) \
        == coin_zero_accepts_zero
    assert conv.accepts(conv.engine_threshold(1.0, 1.0), conv.engine_coin(conv.largest))


def test_a_strict_test_with_a_coin_of_one_rejects_a_threshold_of_one():
    conv = Lm.CoinConvention("strict-closed", 0.0, 1.0, True, True, "float32", "<", True)
    c = float(conv.from_kit(torch.tensor([1.0], dtype=torch.float64))[0])
    assert c == 1.0 and not conv.accepts(1.0, c)  # p = q rejected: lossy
    assert Lm.SGLANG_COINS.accepts(1.0, Lm.SGLANG_COINS.largest)  # open at 1: accepted


def test_conventions_refuse_nonsense_in_one_line():
    with pytest.raises(OptionError, match="exceeds the threshold"):
        Lm.CoinConvention("x", compare=">", coin_first=True)
    with pytest.raises(OptionError, match="compare"):
        Lm.CoinConvention("x", compare="=")
    with pytest.raises(OptionError, match="low < high"):
        Lm.CoinConvention("x", low=0.5, high=0.5)
    with pytest.raises(OptionError, match="dtype"):
        Lm.CoinConvention("x", dtype="float16")
    assert Lm.VLLM_V1_COINS.test == "p/q >= u"
    assert Lm.VLLM_MRV2_COINS.test == "log p - log q > log u"
    assert Lm.SGLANG_COINS.test == "u < p/q"
    assert str(Lm.VLLM_V1_COINS) == "vllm-v1: accept when p/q >= u, u in [0, 1) float64"


# ----------------------------------------------------------------------------- layouts


def test_presets_by_name_and_layout_validation():
    assert set(Lm.PRESETS) == {"vllm-v1", "vllm-mrv2", "sglang-chain", "transformers", "trtllm",
                               "llama.cpp"}
    assert Lm.get_layout("VLLM_V1") is Lm.VLLM_V1
    with pytest.raises(OptionError, match="unknown layout 'vllm'"):
        Lm.get_layout("vllm")
    with pytest.raises(OptionError, match="unknown role 'logits'"):
        Lm.Layout("x", args=(("drafts", "a"), ("logits", "b")))
    with pytest.raises(OptionError, match="need counts"):
        Lm.Layout("x", args=(("drafts", "a"), ("target", "b"), ("generator", "g")),
                  drafts="flat")
    with pytest.raises(OptionError, match="role 'bonus' has no argument"):
        Lm.Layout("x", args=(("drafts", "a"), ("target", "b"), ("generator", "g")),
                  target_bonus=False)
    with pytest.raises(OptionError, match="given twice"):
        Lm.Layout("x", args=(("drafts", "a"), ("target", "a"), ("generator", "g")))
    with pytest.raises(OptionError, match="output = 'list'"):
        Lm.VLLM_V1.replace(output="list")
    blk = Lm.VLLM_MRV2.with_constants(use_block_verification=True)
    assert dict(blk.constants)["use_block_verification"] is True
    assert dict(Lm.VLLM_MRV2.constants)["use_block_verification"] is False
    assert "cu_num_draft_tokens" in Lm.describe("vllm-v1")


def _handed(port, layout, d, q, p) -> dict:
    """The keyword arguments ``layout`` hands ``port`` for the canonical rows (d, q, p)."""
    seen = {}

    def spy(**kw):
        seen.update(kw)
        return port(**kw)

    Lm.engine_sampler(spy, layout)(d, q, p, torch.Generator().manual_seed(0))
    return seen


def test_v1_layout_hands_the_engine_its_arguments():
    """What the VLLM_V1 preset builds: flat ids and rows, end-index counts, float32 logits with
    -inf at zeros, draft probabilities through the same float32 softmax, per-request generators
    inside sampling_metadata."""
    d, q, p = _rows(0, B=3, L=2, V=4)
    p[0, 0, 3] = 0.0
    p[0, 0] /= p[0, 0].sum()
    seen = _handed(A.vllm_v1_rejection_sample, Lm.VLLM_V1, d, q, p)
    assert seen["draft_token_ids"].tolist() == d.reshape(-1).tolist()
    assert seen["draft_token_ids"].dtype == torch.int32
    assert seen["cu_num_draft_tokens"].tolist() == [2, 4, 6]
    assert seen["num_draft_tokens"] == [2, 2, 2] and seen["max_spec_len"] == 2
    assert seen["target_logits"].shape == (6, 4) and seen["target_logits"].dtype == torch.float32
    assert seen["target_logits"][0, 3] == -float("inf")
    expect_q = torch.softmax(torch.log(q).to(torch.float32), -1).reshape(6, 4)
    assert torch.equal(seen["draft_probs"], expect_q)
    assert seen["bonus_token_ids"].shape == (3, 1)
    meta = seen["sampling_metadata"]
    assert set(meta.generators) == {0, 1, 2} and meta.all_random and not meta.all_greedy
    assert meta.temperature.tolist() == [1.0, 1.0, 1.0]


def test_mrv2_layout_hands_shifted_ids_start_counts_and_logits_on_both_sides():
    """What the VLLM_MRV2 preset builds: input ids shifted by one (the root 0, then the drafts)
    flat, start-index counts over the L + 1 rows a request has, target and draft logits in
    float32 with -inf at a zero."""
    d, q, p = _rows(1, B=3, L=2, V=4)
    q[1, 1, 2] = 0.0
    q[1, 1] /= q[1, 1].sum()
    seen = _handed(A.vllm_mrv2_engine_rejection_sample, Lm.VLLM_MRV2, d, q, p)
    ids = torch.cat([torch.zeros(3, 1, dtype=torch.long), d], dim=1).reshape(-1)
    assert seen["draft_sampled"].tolist() == ids.tolist()
    assert seen["cu_num_logits"].tolist() == [0, 3, 6, 9]
    assert seen["target_logits"].shape == (9, 4)
    assert torch.equal(seen["target_logits"], torch.log(p).to(torch.float32).reshape(9, 4))
    assert torch.equal(seen["draft_logits"], torch.log(q).to(torch.float32))
    assert seen["draft_logits"][1, 1, 2] == -float("inf")


@pytest.mark.parametrize("counts,flat,shifted", [("end", [2, 4], [3, 6]),
                                                  ("start", [0, 2, 4], [0, 3, 6])])
def test_a_custom_layout_counts_the_rows_of_its_draft_ids(counts, flat, shifted):
    """Counts follow the ids handed: L per request for flat drafts, L + 1 for shifted ones (the
    root first), whether the counts are end or start indices."""
    seen = {}

    def spy(**kw):
        seen.update(kw)
        raise RuntimeError("only the arguments are looked at")

    d, q, p = _rows(2, B=2, L=2, V=4)
    base = Lm.VLLM_V1.replace(counts=counts)
    for lay, expect in ((base, flat), (base.replace(drafts="shifted"), shifted)):
        seen.clear()
        with pytest.raises(UserCodeError):
            Lm.engine_sampler(spy, lay)(d, q, p, torch.Generator().manual_seed(0))
        assert seen["cu_num_draft_tokens"].tolist() == expect


def test_logits_on_one_side_hand_the_other_side_the_same_softmax():
    """A layout with logits on the draft side only hands the target's probabilities as the
    float32 softmax of their logs (rounded as the draft's are), and the draft's rows as logits;
    probabilities on both sides are handed as they are, in the layout's dtype."""
    d, q, p = _rows(3, B=2, L=2, V=4)
    lay = Lm.TRTLLM.replace(draft_inputs="logits")
    qd, pt = Lm._rows(lay, q, p)
    assert torch.equal(qd, torch.log(q).to(torch.float32))
    assert torch.equal(pt, torch.softmax(torch.log(p).to(torch.float32), -1))
    qd, pt = Lm._rows(Lm.TRTLLM, q, p)
    assert torch.equal(qd, q.to(torch.float32)) and torch.equal(pt, p.to(torch.float32))
    qd, pt = Lm._rows(Lm.TRTLLM.replace(target_inputs="logits"), q, p)
    assert torch.equal(pt, torch.log(p).to(torch.float32))
    assert torch.equal(qd, torch.softmax(torch.log(q).to(torch.float32), -1))


def test_equal_rows_stay_equal_through_the_engines_softmax():
    """A node where p = q exactly (threshold 1) keeps p/q = 1 on the engine side: both sides go
    through the same float32 softmax. Handing float64 q against float32 softmax(log p) breaks
    the tie at some rows, which is the false alarm this rule prevents."""
    g = torch.Generator().manual_seed(3)
    rows = torch.softmax(torch.randn(200, 5, generator=g, dtype=torch.float64) * 3, -1)
    q_eng, p_logits = Lm._rows(Lm.VLLM_V1, rows.unsqueeze(1), rows.unsqueeze(1))
    assert torch.equal(q_eng, torch.softmax(p_logits, -1))  # what the engine computes for p
    naive = rows.to(torch.float32) != torch.softmax(torch.log(rows).to(torch.float32), -1)
    assert naive.any()


def test_buffers_and_root_column_of_sglang():
    seen = {}

    def spy(**kw):
        seen.update(kw)
        A.sglang_chain_speculative_sampling(**kw)

    d, q, p = _rows(2, B=2, L=3, V=4)
    tau, y = Lm.engine_sampler(spy, Lm.SGLANG_CHAIN)(d, q, p, torch.Generator().manual_seed(1))
    assert seen["candidates"][:, 1:].tolist() == d.tolist()
    assert seen["retrive_index"].tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert seen["uniform_samples"].shape == (2, 4)
    assert seen["uniform_samples"].dtype == torch.float32
    assert tau.tolist() == seen["accept_token_num"].tolist()
    for b in range(2):
        idx = seen["accept_index"][b]
        k = int(tau[b]) + 1
        assert idx[:k].tolist() == seen["retrive_index"][b, :k].tolist()
        assert (idx[int(tau[b]) + 1:] == -1).all()
        assert int(seen["predicts"][idx[int(tau[b])]]) == int(y[b])


def test_engine_sampler_is_deterministic_and_leaves_the_global_rng_alone():
    d, q, p = _rows(4)
    for fn, lay, _ in PORTS.values():
        s = Lm.engine_sampler(fn, lay)
        torch.manual_seed(7)
        before = torch.rand(3)
        torch.manual_seed(7)
        a = s(d, q, p, torch.Generator().manual_seed(5))
        assert torch.equal(torch.rand(3), before), lay.name
        b = s(d, q, p, torch.Generator().manual_seed(5))
        assert all(torch.equal(x, y) for x, y in zip(a, b)), lay.name


def test_an_engine_that_raises_or_writes_wrong_tokens_is_one_line():
    d, q, p = _rows(5)

    def raises(**kw):
        raise RuntimeError("kernel\nlaunch failed")

    with pytest.raises(UserCodeError, match="raises raised RuntimeError: kernel launch failed"):
        Lm.engine_sampler(raises, Lm.VLLM_V1)(d, q, p, torch.Generator())

    def scrambles(**kw):
        out = A.vllm_v1_rejection_sample(**kw)
        out[:, 0] = torch.where(out[:, 1] >= 0, (out[:, 0] + 1) % 4, out[:, 0])
        return out

    with pytest.raises(Lm.EngineOutputError, match=r"request \d+: emitted \[.*\] before its last "
                                                   r"token where the drafts are"):
        Lm.engine_sampler(scrambles, Lm.VLLM_V1)(d, q, p, torch.Generator().manual_seed(0))

    def gap(**kw):
        out = A.vllm_v1_rejection_sample(**kw)
        out[:, 0] = -1
        return out

    with pytest.raises(Lm.EngineOutputError, match="has a -1 before its last token"):
        Lm.engine_sampler(gap, Lm.VLLM_V1)(d, q, p, torch.Generator().manual_seed(0))

    def halves(**kw):  # fractional ids were truncated (2.5 read as 2) and the check passed
        out = A.vllm_v1_rejection_sample(**kw).to(torch.float64)
        out[out >= 0] += 0.5
        return out

    with pytest.raises(Lm.EngineOutputError, match=r"the output = \d\.5 \(dtype torch.float64\), "
                                                   "not an integer"):
        Lm.engine_sampler(halves, Lm.VLLM_V1)(d, q, p, torch.Generator().manual_seed(0))

    def whole(**kw):  # whole-valued floats are ids, as in every mode
        return A.vllm_v1_rejection_sample(**kw).to(torch.float64)

    got = Lm.engine_sampler(whole, Lm.VLLM_V1)(d, q, p, torch.Generator().manual_seed(0))
    want = Lm.engine_sampler(A.vllm_v1_rejection_sample, Lm.VLLM_V1)(
        d, q, p, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(got, want))


def test_coin_samplers_are_refused_where_the_engine_draws_its_own_coins():
    with pytest.raises(OptionError, match="draws its coins inside the engine"):
        Lm.engine_coin_sampler(A.vllm_mrv2_engine_rejection_sample, Lm.VLLM_MRV2)
    with pytest.raises(OptionError, match="draws its coins inside the engine"):
        Lm.engine_coin_sampler(A.hf_speculative_sampling,
                               Lm.TRANSFORMERS.replace(coin_source=None))
    v1 = Lm.engine_coin_sampler(A.vllm_v1_rejection_sample, Lm.VLLM_V1)
    with pytest.raises(SpectheoryError, match="use mode 'coins-tau'"):
        check_sampler(v1, "token", samples=100, mode="coins")


def test_the_coin_hook_is_restored_after_the_call_even_when_the_engine_raises():
    original = A.generate_uniform_probs
    v1 = Lm.engine_coin_sampler(A.vllm_v1_rejection_sample, Lm.VLLM_V1)
    d, q, p = _rows(6)
    u = torch.full((5, 4), 0.5, dtype=torch.float64)
    v1(d, q, p, u)
    assert A.generate_uniform_probs is original
    broken = Lm.engine_coin_sampler(functools.partial(A.vllm_v1_rejection_sample, bug="nope"),
                                    Lm.VLLM_V1)
    with pytest.raises(UserCodeError, match="unknown bug"):
        broken(d, q, p, u)
    assert A.generate_uniform_probs is original


# ----------------------------------------------------------------------------- the ports pass


@pytest.mark.parametrize("name", sorted(PORTS))
def test_port_passes_law_mode_through_its_preset(name):
    fn, lay, _ = PORTS[name]
    rep = check_sampler(Lm.engine_sampler(fn, lay), "token", samples=4_000)
    assert rep.passed, str(rep)
    assert rep.min_detectable_tv < 0.08


def test_mrv2_block_verification_through_its_preset():
    lay = Lm.VLLM_MRV2.with_constants(use_block_verification=True)
    rep = check_sampler(Lm.engine_sampler(A.vllm_mrv2_engine_rejection_sample, lay), "block",
                        samples=4_000)
    assert rep.passed, str(rep)


def test_sglang_port_passes_coins_and_coins_tau_with_its_own_convention():
    s = Lm.engine_coin_sampler(A.sglang_chain_speculative_sampling, Lm.SGLANG_CHAIN)
    assert s.coin_convention is Lm.SGLANG_COINS
    for mode in ("coins", "coins-tau"):
        rep = check_sampler(s, "token", samples=3_000, mode=mode)
        assert rep.passed and rep.samples == 3_000, str(rep)


def test_v1_port_passes_coins_tau_and_its_coin_of_zero_is_reported_with_the_engine_side():
    """vLLM V1 compares p/q >= u with u in [0, 1): identical accepted counts on instances without
    zero-probability drafts; on the instance with zeros the kit's smallest coin, mapped to the
    engine's coin 0, accepts a draft of target probability 0 (the class of SGLang #35771;
    probability 2^-53 per draw), and the report shows both sides of the engine's comparison."""
    s = Lm.engine_coin_sampler(A.vllm_v1_rejection_sample, Lm.VLLM_V1)
    rep = check_sampler(s, "token", instances=CLEAN, samples=3_000, mode="coins-tau")
    assert rep.passed, str(rep)
    rep = check_sampler(s, "token", instances=[ZEROS], samples=1_000, mode="coins-tau")
    m = rep.mismatch
    assert not rep.passed and m.differs == "tau" and m.got[0] > m.expected[0]
    assert m.threshold == 0.0 and m.engine_threshold == 0.0 and m.engine_coin == 0.0
    assert m.uniforms[m.position - 1] == TINY_COIN and m.engine_uniforms[m.position - 1] == 0.0
    text = str(rep)
    assert "(tau)" in text and "engine side: p/q >= u with p/q = 0.0 and u = 0.0 (float64): " \
                              "accept" in text


# ----------------------------------------------------------------------------- planted bugs


@pytest.mark.parametrize("name", sorted(PORTS))
@pytest.mark.parametrize("bug", A.PORT_BUGS)
def test_planted_bug_is_caught_through_the_preset(name, bug):
    """Every planted bug of every port is caught: in coins-tau mode where the engine takes coins
    (exact), else in law mode (p-value below 1e-6 at 1,000 samples)."""
    fn, lay, coins = PORTS[name]
    f = functools.partial(fn, bug=bug)
    if coins:
        rep = check_sampler(Lm.engine_coin_sampler(f, lay), "token", samples=2_000,
                            mode="coins-tau")
        assert not rep.passed
        want = "Y outside the support" if bug in ("correction-from-p", "residual-row") else "tau"
        assert rep.mismatch.differs == want
    else:
        insts = NO_TIES if name == "transformers" else None
        rep = check_sampler(Lm.engine_sampler(f, lay), "token", instances=insts, samples=1_000)
        assert not rep.passed and rep.p_value < 1e-6


def test_a_strictness_flip_passes_law_mode_and_only_pinned_coins_catch_it():
    """SGLang's ``coin * q < p`` made ``<=`` (SGLang #35771's class): its law differs from the
    right one only on coins of exactly 0 (probability 2^-24 per draw), so law mode passes; the
    coins-tau check maps the kit's smallest coin onto the engine's 0 and catches it on the
    instance whose target has zeros."""
    f = functools.partial(A.sglang_chain_speculative_sampling, bug="coin-compare")
    assert check_sampler(Lm.engine_sampler(f, Lm.SGLANG_CHAIN), "token", samples=4_000).passed
    rep = check_sampler(Lm.engine_coin_sampler(f, Lm.SGLANG_CHAIN), "token", instances=[ZEROS],
                        samples=1_000, mode="coins-tau")
    m = rep.mismatch
    assert not rep.passed and m.engine_coin == 0.0 and m.engine_threshold == 0.0
    assert "u <= p/q" not in m.engine_test and m.engine_test.endswith("reject")
    # the engine-side line states the convention the layout declares (strict), so the sampler's
    # acceptance contradicts its own declared test: that is the finding


# ----------------------------------------------------------------------------- coins-tau mode


def test_coins_tau_ignores_the_token_noise_but_not_an_impossible_token():
    ref = reference_coin_sampler("token")
    g = torch.Generator().manual_seed(0)

    def own_noise(d, q, p, u):  # right tau, Y drawn from the right row with other noise
        u = u.clone()
        u[:, -1] = torch.rand(u.shape[0], generator=g, dtype=torch.float64)
        return ref(d, q, p, u)

    assert not check_sampler(own_noise, "token", samples=2_000, mode="coins").passed
    assert check_sampler(own_noise, "token", samples=2_000, mode="coins-tau").passed

    def from_p(d, q, p, u):  # right tau, Y from p: a token where p <= q is impossible
        tau, _ = ref(d, q, p, u)
        rows = p[torch.arange(d.shape[0]), tau]
        return tau, torch.multinomial(rows, 1, generator=g)[:, 0]

    rep = check_sampler(from_p, "token", samples=2_000, mode="coins-tau")
    assert not rep.passed and rep.mismatch.differs == "Y outside the support"
    assert "a token of reference probability 0" in str(rep)


def test_coins_tau_accepts_the_existing_kit_coin_samplers():
    assert check_sampler(A.vllm_mrv2_coin_sampler("block"), "block", samples=2_000,
                         mode="coins-tau").passed
    assert check_sampler(A.sglang_coin_sampler("token"), "token", samples=2_000,
                         mode="coins-tau").passed
    rep = check_sampler(A.vllm_mrv2_coin_sampler("block", bug="wrong-row"), "block",
                        samples=2_000, mode="coins-tau")
    assert not rep.passed and rep.mismatch.differs == "tau"
    assert rep.mismatch.position is not None and 0 <= rep.mismatch.threshold <= 1


def test_coins_tau_passes_an_engine_that_recomputes_rows_where_p_equals_q():
    """p(X) = q(X) exactly in the kit's rows is a threshold of 1, but an engine that takes logits
    and applies a float32 softmax to each side sees p/q = 1 - 6e-8: the pinned coin next to 1
    must count as a tie, not as the engine's mistake (vLLM V1's preset, a correct port)."""
    from spectheory.testing.checks.sampler import DraftRows

    q = torch.tensor([0.06258256243943126, 0.37656233918197546, 0.3146185910729118,
                      0.24623650730568145], dtype=torch.float64)
    rest = torch.tensor([0.29475363459732123, 0.1874941181143704, 0.4551696848488771],
                        dtype=torch.float64)
    p = torch.cat([q[:1], rest / rest.sum() * (1 - q[0])])
    assert p[0] == q[0]
    sq, sp = (torch.softmax(torch.log(x).float(), -1) for x in (q, p))
    assert sp[0] < sq[0]  # the engine's ratio is below 1
    rows = DraftRows(torch.zeros(1, 1, dtype=torch.long), q.view(1, 1, 4),
                     torch.stack([p, torch.full((4,), 0.25, dtype=torch.float64)]).view(1, 2, 4))
    sampler = Lm.engine_coin_sampler(A.vllm_v1_rejection_sample, Lm.VLLM_V1)
    report = check_sampler(sampler, "token", instances=[rows], samples=64, mode="coins-tau")
    assert report.passed, str(report)


def test_replace_with_a_field_of_the_wrong_shape_is_one_line():
    """TRTLLM.replace(args=5) ended in a TypeError from inside the dataclass."""
    from spectheory.runtime.errors import OptionError
    from spectheory.testing import TRTLLM

    for field in ("args", "constants"):
        with pytest.raises(OptionError, match=f"layout 'trtllm': replace\\({field}=...\\) does "
                                              f"not make a layout"):
            TRTLLM.replace(**{field: 5})


def test_coin_conventions_and_counter_noise_at_their_edges():
    """A kit coin exactly representable in the engine's dtype stays as it is (0.5 was moved down
    one float32 step by a >= that belongs to values rounded up); a layout drawing its randomness
    from coins must name a coins argument; the counter-based acceptance coins and the Gumbel
    noise of the MRV2 port are separate streams (without the domain word the acceptance coin was
    Gumbel column 0, and P(Y = 0 | tau = 0) 0.62 where 1/2 is right)."""
    import numpy as np

    from spectheory.runtime.errors import OptionError
    from spectheory.testing.engines import adapters as A
    from spectheory.testing.engines.layouts import SGLANG_COINS, Layout

    for u in (0.5, 0.25, 0.0):
        assert float(SGLANG_COINS.token_from_kit(torch.tensor([u]))[0]) == u
    assert float(SGLANG_COINS.token_from_kit(torch.tensor([1 - 2 ** -53]))[0]) < 1
    with pytest.raises(OptionError, match="coins"):
        Layout("x", args=(("drafts", "d"), ("target", "t")), randomness="coins",
               coins=SGLANG_COINS)
    seeds = torch.arange(64, dtype=torch.long)
    pos = torch.zeros(64, dtype=torch.long)
    acc = A.counter_uniforms(seeds, pos, A._ACCEPT_DOMAIN)
    gum = A.counter_uniforms(seeds, pos, A._GUMBEL_DOMAIN, 3)[:, 0]
    assert not np.allclose(acc.numpy(), gum.numpy())


def test_a_greedy_preset_needs_no_coin_and_a_zero_draft_probability_has_an_infinite_ratio():
    """transformers' greedy path (an argmax match, no torch.rand_like) run under sampling=
    "temperature=0" through the coin sampler is not refused as "never called torch.rand_like";
    the ratio shown for q = 0 is inf, and the engine's >= accepts with it (NaN read as reject)."""
    from spectheory.testing import TRANSFORMERS, hf_speculative_sampling
    from spectheory.testing.engines.layouts import VLLM_V1_COINS, engine_coin_sampler

    f = engine_coin_sampler(hf_speculative_sampling, TRANSFORMERS, sampling="temperature=0")
    tau, y = f(torch.tensor([[0]]), torch.tensor([[[0.6, 0.4]]], dtype=torch.float64),
               torch.tensor([[[0.7, 0.3], [0.2, 0.8]]], dtype=torch.float64),
               torch.tensor([[0.5, 0.5]], dtype=torch.float64))
    assert (int(tau[0]), int(y[0])) == (1, 1)  # argmax 0 matches the draft, then argmax 1
    t = VLLM_V1_COINS.engine_threshold(0.0, 0.0)
    assert t == float("inf") and VLLM_V1_COINS.explain(t, 0.0).endswith("accept")
