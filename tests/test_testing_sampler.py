"""The sampler conformance checks of :mod:`spectheory.testing.checks.sampler`.

Statistical verdicts use fixed seeds, so each assertion is deterministic; the false-alarm rate
stated next to each one is the probability that it would fail for a correct sampler under a
fresh seed. Power is checked by simulation against planted biases, and negative controls (the
product-of-uniforms verifier as a sampler, an off-by-one target row, token verification posing
as block verification, a sampler that mixes up batch rows, greedy drafts with a soft q) must be
caught.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import torch

from spectheory.runtime.errors import SpectheoryError, UserCodeError
from spectheory.inputs.random_instances import random_instance
from spectheory.registry import get_verifier
from spectheory.testing.statistics import stats
from spectheory.testing.checks.sampler import (
    MIN_EXPECTED, DraftRows, assert_proposal, assert_sampler, check_proposal, check_sampler,
    make_sampler, reference_coin_sampler)
from spectheory.verifiers.token import token_verification
from cli_helpers import run

ALPHA = 1e-3  # family-wise false-alarm rate of every check below that a correct sampler passes


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Small tensors: one torch thread is faster (and steadier on a busy machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ----------------------------------------------------------------------------- helpers


def off_by_one_token_sampler(drafts, q, p, generator):
    """Token verification reading p(.|X^i) instead of p(.|X^{i-1}) for X_i (the off-by-one
    target row): invisible on context-independent rows."""
    L = drafts.shape[1]
    shifted = torch.cat([p[:, 1:L + 1], p[:, L:]], dim=1)
    stop, corr = token_verification(drafts, q, shifted)
    from spectheory.sampling import sample_law
    return sample_law((stop, corr), generator)


def row_mixing_sampler(drafts, q, p, generator):
    """Verifies every row of a batch with the rows of the first one (a batch-offset bug)."""
    n = drafts.shape[0]
    return make_sampler("block")(drafts[:1].expand(n, -1).clone(), q[:1].expand(n, -1, -1).clone(),
                                 p[:1].expand(n, -1, -1).clone(), generator)


def coin_law_sampler(convention):
    """The coin-driven reference fed with fresh uniforms: a canonical sampler."""
    ref = reference_coin_sampler(convention)

    def sampler(drafts, q, p, generator):
        n, L = drafts.shape
        u = torch.rand(n, L + 1, generator=generator, dtype=torch.float64)
        u[:, :L] = 1 - u[:, :L]
        return ref(drafts, q, p, u)

    return sampler


# ---------------------------------------------------------------------------- correct samplers


@pytest.mark.parametrize("name", ["token", "block"])
def test_own_single_path_samplers_pass_law_mode(name):
    rep = assert_sampler(make_sampler(name), name, samples=20_000, seed=1)  # false alarm <= 1e-3
    assert rep.passed and rep.mode == "law" and rep.samples == 20_000 and rep.rows == 32
    assert 0 < rep.min_detectable_tv < 0.05
    assert rep.worst_cell is not None and rep.worst_cell.expected > 0


def test_gbv_two_paths_passes_law_and_lossless_modes():
    s = make_sampler("gbv", paths=2)
    assert_sampler(s, "gbv", paths=2, samples=10_000, seed=2)  # false alarm <= 1e-3
    rep = assert_sampler(s, "gbv", paths=2, samples=10_000, seed=2, mode="lossless")
    assert "K = 2" in rep.verifier


@pytest.mark.parametrize("name", ["token", "block"])
def test_coin_references_follow_the_verifiers_law(name):
    """Driven by uniform coins, the coin-level reference has exactly the verifier's law."""
    assert_sampler(coin_law_sampler(name), name, samples=20_000, seed=3)  # false alarm <= 1e-3


def test_block_sampler_passes_lossless_mode():
    assert_sampler(make_sampler("block"), "block", mode="lossless", samples=20_000, seed=4)


def test_lossless_mode_counts_every_chunk():
    """Outputs are counted call by call: in calls of 700 rows, 5,000 samples still pass (a check
    that kept only the last call's counts would see 100 of them)."""
    calls = []
    s = make_sampler("block")

    def counted(*a):
        calls.append(a[0].shape[0])
        return s(*a)

    rep = assert_sampler(counted, "block", mode="lossless", samples=5_000, max_batch=700)
    assert rep.passed and len(calls) == 8 and sum(calls) == 5_000  # false alarm <= 1e-3


def test_reference_sampler_draws_as_if_row_by_row():
    """Above 256 rows a call, the reference sampler evaluates the law of each distinct input
    once, in slices of 2^20 input floats (100,000 rows here: 3 slices); its draws are those of
    the law evaluated on every row."""
    from spectheory.sampling import sample_output
    from spectheory.testing.checks.sampler import _fixed_rows

    d, q, p = _fixed_rows(random_instance(4, 3, 12), 1, "iid", 8, torch.Generator().manual_seed(0))
    idx = torch.arange(100_000) % 8
    dd, qq, pp = d[idx, 0], q[idx, 0], p[idx, 0]
    tau, y = make_sampler("block")(dd, qq, pp, torch.Generator().manual_seed(3))
    law = get_verifier("block").law(dd[:, None], qq[:, None], pp[:, None])
    _, tau_ref, y_ref = sample_output(law, torch.Generator().manual_seed(3))
    assert torch.equal(tau, tau_ref) and torch.equal(y, y_ref)


def test_large_vocabulary_rows_chunked_views():
    """DraftRows at V = 2000 are handed over as stride-0 views in chunks; the verdict holds."""
    g = torch.Generator().manual_seed(0)
    B, L, V = 4, 3, 2000
    p = torch.softmax(2 * torch.randn(B, L + 1, V, generator=g, dtype=torch.float64), -1)
    q = torch.softmax(2 * torch.randn(B, L, V, generator=g, dtype=torch.float64), -1)
    q = 0.5 * q + 0.5 * p[:, :L]
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(B, L)
    calls = []
    s = make_sampler("block")

    def counted(*a):
        calls.append(a[0].shape[0])
        return s(*a)

    rep = check_sampler(counted, "block", [DraftRows(d, q, p)], samples=8_000, max_batch=500)
    assert rep.passed and max(calls) == 500 and sum(calls) == 8_000  # false alarm <= 1e-3
    bad = check_sampler(make_sampler("token"), "block", [DraftRows(d, q, p)], samples=8_000)
    assert not bad.passed


# ----------------------------------------------------------------------------- negative controls


def test_uniform_product_control_is_caught_in_law_and_lossless_modes():
    s = make_sampler("uniform-product")
    rep = check_sampler(s, "block", samples=20_000)
    assert not rep.passed and rep.p_value < 1e-6
    rep = check_sampler(s, "block", mode="lossless", samples=20_000)
    assert not rep.passed and rep.p_value < 1e-6
    with pytest.raises(AssertionError, match="FAIL"):
        assert_sampler(s, "block", samples=20_000)


def test_off_by_one_target_row_is_caught_only_on_prefix_dependent_rows():
    flat = [random_instance(3, 3, 5, context_independent=True)]
    assert check_sampler(off_by_one_token_sampler, "token", flat, samples=20_000).passed
    rep = check_sampler(off_by_one_token_sampler, "token", samples=20_000)
    assert not rep.passed and rep.p_value < 1e-6
    rep = check_sampler(off_by_one_token_sampler, "token", mode="lossless", samples=20_000)
    assert not rep.passed


def test_token_posing_as_block_names_an_impossible_cell():
    rep = check_sampler(make_sampler("token"), "block", samples=20_000)
    assert not rep.passed and rep.p_value == 0.0
    assert rep.worst_cell.expected == 0.0 and "probability 0" in rep.worst_cell.label
    assert "tau =" in rep.worst_cell.label and "draft" in rep.worst_cell.label


def test_gbv_tie_rule_mismatch_is_caught_on_the_tie_instance():
    """Selection and q^G ranking breaking p/q ties differently (lossy) shows only where ratios
    tie: the default instance whose draft equals the target at every other node."""
    s = make_sampler("gbv-mismatched-ties", paths=2)
    rep = check_sampler(s, "gbv", paths=2, samples=20_000)
    assert not rep.passed and rep.worst_cell.label.startswith("instance 3")
    assert not check_sampler(s, "gbv", paths=2, samples=20_000, mode="lossless").passed


def test_a_sampler_mixing_batch_rows_is_caught():
    rep = check_sampler(row_mixing_sampler, "block", samples=20_000)
    assert not rep.passed


def test_invalid_outputs_fail_with_a_note():
    def too_far(drafts, q, p, g):
        return torch.full((drafts.shape[0],), drafts.shape[1] + 1), torch.zeros(drafts.shape[0])

    rep = check_sampler(too_far, "block", samples=1000)
    assert not rep.passed and "accepted = 4 outside 0..3" in str(rep)

    def one_output(drafts, q, p, g):
        return torch.zeros(drafts.shape[0])

    assert "not a tuple of 2" in str(check_sampler(one_output, "block", samples=1000))


# ----------------------------------------------------------------------------- user code


def raises_value_error(d, q, p, g):
    raise ValueError("boom")


def exits_0(d, q, p, g):
    sys.exit(0)


def exits_3(d, q, p, g):
    raise SystemExit(3)


@pytest.mark.parametrize("mode", ["law", "lossless", "coins"])
@pytest.mark.parametrize("fn,msg", [(raises_value_error, "raised ValueError: boom"),
                                    (exits_0, "called sys.exit(0)"),
                                    (exits_3, "called sys.exit(3)")])
def test_a_sampler_that_raises_or_exits_is_one_user_code_error(mode, fn, msg):
    """Exit code 0 from inside a sampler must not end a check as a pass."""
    with pytest.raises(UserCodeError) as exc:
        check_sampler(fn, "block", mode=mode, samples=1000)
    text = str(exc.value)
    assert "\n" not in text and text.startswith("sampler ") and fn.__name__ in text
    assert msg in text


def test_user_code_errors_in_budgeted_runs_proposals_and_verifiers():
    with pytest.raises(UserCodeError, match="exits_0 called sys.exit"):
        assert_sampler(exits_0, "block", samples="auto", budget_s=5)

    def draft_exits(rows, g):
        sys.exit(0)

    with pytest.raises(UserCodeError, match=r"^draft sampler .*draft_exits called sys.exit\(0\)"):
        check_proposal(draft_exits, samples=1000)

    def law_raises(drafts, q, p):
        raise RuntimeError("no law")

    with pytest.raises(UserCodeError,
                       match="verifier 'law_raises' raised RuntimeError: no law"):
        check_sampler(make_sampler("block"), law_raises, samples=1000)


def _returning(accepted, token):
    """A sampler returning ``accepted(n, L)``, ``token(n)`` for a batch of n."""
    def odd_sampler(d, q, p, g):
        n, L = d.shape
        return accepted(n, L), token(n)
    return odd_sampler


@pytest.mark.parametrize("accepted,token,msg", [
    (lambda n, L: torch.full((n,), float("nan")), lambda n: torch.zeros(n, dtype=torch.long),
     "returned accepted = nan (dtype torch.float32) at row 0"),
    (lambda n, L: torch.zeros(n, dtype=torch.long), lambda n: torch.full((n,), 0.5),
     "returned token = 0.5 (dtype torch.float32), not an integer, at row 0"),
    (lambda n, L: torch.zeros(n, dtype=torch.bool), lambda n: torch.zeros(n, dtype=torch.long),
     "returned accepted of dtype torch.bool, not an integer tensor"),
    (lambda n, L: torch.zeros(n + 1, dtype=torch.long), lambda n: torch.zeros(n, dtype=torch.long),
     "returned accepted [{n1}], token [{n}] for a batch of {n}"),
    (lambda n, L: "all of them", lambda n: torch.zeros(n, dtype=torch.long),
     "returned accepted of type str, not a tensor"),
    (lambda n, L: torch.full((n,), -1), lambda n: torch.zeros(n, dtype=torch.long),
     "returned accepted = -1 outside 0..3 (row 0)"),
])
def test_unusable_outputs_fail_with_one_note_naming_the_sampler(accepted, token, msg):
    """Float outputs with whole values are read as integers; NaN, fractions, bools, wrong
    lengths and non-tensors fail the check (exit 1 on the command line), with one note naming the
    function and what it returned."""
    rep = check_sampler(_returning(accepted, token), "block", instances=[random_instance(3, 3, 0)],
                        samples=1000, draft_rows=4)
    n = 1000 // 4 if "batch of" not in msg else 1000
    assert not rep.passed and rep.p_value == 0.0 and len(rep.notes) == 1
    note = rep.notes[0]
    assert note.startswith("sampler ") and "odd_sampler returned" in note
    assert msg.format(n=n, n1=n + 1) in note, note
    whole = _returning(lambda n, L: torch.zeros(n, dtype=torch.float64),
                       lambda n: torch.zeros(n, dtype=torch.float32))
    rep = check_sampler(whole, "block", samples=1000)  # read as integers: a statistical verdict
    assert rep.dof > 0 and rep.worst_cell is not None


# ----------------------------------------------------------------------------- coins mode


@pytest.mark.parametrize("name", ["token", "block"])
def test_coin_reference_agrees_with_itself(name):
    rep = check_sampler(reference_coin_sampler(name), name, mode="coins", samples=20_000)
    assert rep.passed and rep.samples == 20_000 and rep.ambiguous < 20


def test_coin_mismatch_reports_its_inputs():
    rep = check_sampler(reference_coin_sampler("token"), "block", mode="coins", samples=5_000)
    assert not rep.passed and rep.mismatch is not None
    m = rep.mismatch
    assert len(m.drafts) == 3 and len(m.uniforms) == 4 and len(m.p) == 4 and len(m.q) == 3
    assert m.expected != m.got
    # the reported inputs reproduce the decision
    d = torch.tensor([m.drafts])
    q = torch.tensor([m.q], dtype=torch.float64)
    p = torch.tensor([m.p], dtype=torch.float64)
    u = torch.tensor([m.uniforms], dtype=torch.float64)
    tau, y = reference_coin_sampler("block")(d, q, p, u)
    assert (int(tau), int(y)) == m.expected
    assert "first mismatch" in str(rep)


def test_pinned_coins_catch_a_strict_inequality():
    """Accepting on u < h instead of u <= h differs only on coins equal to a threshold: the
    pinned coins u = 1 against thresholds of exactly 1 show it."""
    def strict(drafts, q, p, u):
        u = u.clone()
        L = drafts.shape[1]
        u[:, :L] = torch.where(u[:, :L] == 1.0, torch.nextafter(u[:, :L], u.new_tensor(2.0)),
                               u[:, :L])
        return reference_coin_sampler("token")(drafts, q, p, u)

    rep = check_sampler(strict, "token", mode="coins", samples=2_000)
    assert not rep.passed and rep.mismatch.uniforms[0] == 1.0
    lawful = check_sampler(lambda d, q, p, g: strict(d, q, p, _uniforms(d, g)), "token",
                           samples=20_000)
    assert lawful.passed  # the law cannot see it (false alarm <= 1e-3)


def test_pinned_coins_catch_a_zero_coin_accepting_a_zero_probability_draft():
    """Coins in [0, 1) with acceptance coin <= p/q (the engine's coin = u - 2^-53 on the kit's
    grid) accept a draft of target probability 0 when the coin is 0: the pinned coin 2^-53 on the
    instance with zeros shows it; fresh uniform coins almost never do."""
    ref = reference_coin_sampler("token")

    def zero_coin(drafts, q, p, u):
        u = u.clone()
        L = drafts.shape[1]
        u[:, :L] = (u[:, :L] - 2.0**-53).clamp(min=0)
        tau, y = ref(drafts, q, p, torch.where(u == 0, torch.zeros_like(u), u))
        return tau, y

    rep = check_sampler(zero_coin, "token", mode="coins", samples=2_000)
    assert not rep.passed and rep.mismatch.uniforms[0] == 2.0**-53
    assert rep.mismatch.got[0] > rep.mismatch.expected[0]  # it accepted further


def _uniforms(d, g):
    n, L = d.shape
    u = torch.rand(n, L + 1, generator=g, dtype=torch.float64)
    u[:, :L] = 1 - u[:, :L]
    return u


# ----------------------------------------------------------------------------- statistics


def _planted(delta, n_per_row, mode="least"):
    """A block sampler whose law is moved by TV ``delta`` in every draft row: ``least`` splits
    the (pooled) bins into two sides of balanced mass, raises one and lowers the other in
    proportion to their mass (the least-favourable direction of the chi-square when the sides
    hold half of the mass each); ``accept`` moves delta of P(tau) from the
    most to the least likely value of tau."""
    spec = get_verifier("block")

    def sampler(drafts, q, p, generator):  # one instance: equal drafts have equal rows
        _, inv = torch.unique(drafts, dim=0, return_inverse=True)
        first = torch.zeros(int(inv.max()) + 1, dtype=torch.long).scatter_(
            0, inv, torch.arange(len(inv)))
        law = spec.law(drafts[first, None], q[first, None], p[first, None])
        P = (law.stop[:, 0, :, None] * law.correction[:, 0]).reshape(len(first), -1)
        moved = torch.stack([_move(row, delta, n_per_row, mode, drafts.shape[1] + 1)
                             for row in P])
        cells = torch.multinomial(moved[inv], 1, generator=generator)[:, 0]
        V = q.shape[-1]
        return cells // V, cells % V

    return sampler


def _move(row, delta, n, mode, L1):
    P = row.numpy().copy()
    V = len(P) // L1
    if mode == "accept":
        pt = P.reshape(L1, V).sum(1)
        hi, lo = int(np.argmax(pt)), int(np.argmin(pt))
        d = min(delta, pt[hi])
        out = P.reshape(L1, V).copy()
        out[hi] *= 1 - d / pt[hi]
        out[lo] = out[lo] + d * (out[lo] / pt[lo] if pt[lo] > 0 else np.full(V, 1 / V))
        return torch.as_tensor(out.reshape(-1))
    e = n * P
    small = (e < MIN_EXPECTED) & (P > 0)
    unit = np.arange(len(P))
    if small.any():
        unit[small] = -1
        if e[small].sum() < MIN_EXPECTED:
            big = np.flatnonzero(~small & (P > 0))
            unit[big[np.argmin(e[big])]] = -1
    keys = list(dict.fromkeys(unit[P > 0].tolist()))
    mass = {k: P[unit == k].sum() for k in keys}
    side, m_a, m_b = {}, 0.0, 0.0
    for k in sorted(keys, key=lambda k: -mass[k]):  # balanced split of the bins
        side[k] = m_a <= m_b
        m_a, m_b = (m_a + mass[k], m_b) if side[k] else (m_a, m_b + mass[k])
    a = np.array([side.get(k, False) for k in unit]) & (P > 0)
    if P[a].sum() > 0.5:  # lower the heavier side, raise the lighter one
        a = ~a & (P > 0)
    m_a = P[a].sum()
    out = np.where(a, P * (1 + delta / m_a), P * (1 - delta / (1 - m_a)))
    return torch.as_tensor(out)


def _row_laws(inst, rows, seed):
    """The exact (tau, Y) laws [rows, (L+1) V] of the draft rows that check_sampler draws."""
    from spectheory.testing.checks.sampler import _fixed_rows
    d, q, p = _fixed_rows(inst, 1, "iid", rows, torch.Generator().manual_seed(seed))
    law = get_verifier("block").law(d, q, p)
    return (law.stop[:, 0, :, None] * law.correction[:, 0]).reshape(rows, -1)


def test_stated_power_by_simulating_the_statistic():
    """The family's power at the stated min_detectable_tv, simulated on multinomial counts: a
    least-favourable bias of that TV is caught in >= 90% of 400 runs (fewer than 345 catches has
    probability < 1e-3 at true power 0.9), half of it in far fewer, and with no bias the alarm
    rate is at most alpha (more than 60 alarms at alpha = 0.1 has probability < 1e-3)."""
    inst = random_instance(3, 3, 7)
    rows, n, runs, alpha = 4, 1500, 400, 0.05
    laws = _row_laws(inst, rows, 0)
    rng = np.random.default_rng(0)

    def rejects(delta, a=alpha):
        moved = [(_move(P, delta, n, "least", 4) if delta else P).numpy() for P in laws]
        counts = [rng.multinomial(n, m / m.sum()) for m in moved]
        tests = [stats.row_chi_square(c, P.numpy(), n) for c, P in zip(counts, laws)]
        return stats.family(tests).p_value < a, tests

    _, tests = rejects(0.0)
    delta = stats.min_detectable_tv(tests, alpha)
    assert 0.01 < delta < 0.2
    assert sum(rejects(delta)[0] for _ in range(runs)) >= 345
    assert sum(rejects(delta / 2)[0] for _ in range(runs)) < 0.6 * runs
    assert sum(rejects(0.0, 0.1)[0] for _ in range(runs)) <= 60


def test_stated_power_and_false_alarm_rate_end_to_end():
    """check_sampler itself, 40 runs each: a planted least-favourable bias of the stated TV is
    caught at least 31 times (probability 0.016 of fewer at true power 0.9); the correct
    sampler at alpha = 0.1 raises at most 10 alarms (probability 0.003 of more)."""
    inst = [random_instance(3, 3, 7)]
    rows, samples, runs = 4, 3_000, 40
    kw = dict(instances=inst, samples=samples, draft_rows=rows)
    base = check_sampler(make_sampler("block"), "block", alpha=0.05, **kw)
    delta = base.min_detectable_tv
    caught = sum(not check_sampler(_planted(delta, samples // rows), "block", alpha=0.05,
                                   seed=s, **kw).passed for s in range(runs))
    assert caught >= 31
    alarms = sum(not check_sampler(make_sampler("block"), "block", alpha=0.1, seed=s,
                                   **kw).passed for s in range(runs))
    assert alarms <= 10


def test_planted_acceptance_bias_is_caught_at_the_default_size():
    """A sampler whose law of tau is off by TV = min_detectable_tv (at the default 10^5 samples
    and alpha = 1e-3) is caught."""
    base = check_sampler(make_sampler("block"), "block", samples=100_000)
    assert base.passed and base.min_detectable_tv < 0.02
    rep = check_sampler(_planted(base.min_detectable_tv, 100_000 // 32, "accept"), "block",
                        samples=100_000, seed=9)
    assert not rep.passed


def test_min_detectable_tv_matches_the_noncentral_chi_square():
    t = stats.RowTest(0.0, 9, 1.0, 1000, -1, 0.0, 0.0, 0)
    d = stats.min_detectable_tv([t], 0.01)
    assert abs(stats.family_power(d, [t], 0.01) - 0.9) < 1e-4
    # more samples: smaller detectable bias, as 1/sqrt(n)
    t4 = t._replace(n=4000)
    assert abs(stats.min_detectable_tv([t4], 0.01) / d - 0.5) < 1e-4


# ----------------------------------------------------------------------------- proposals


def honest(rows, g):
    return torch.multinomial(rows, 1, generator=g)[:, 0], rows


def greedy_with_soft_q(rows, g):
    return rows.argmax(-1), rows


def top_k(k, report_processed):
    def draft(rows, g):
        kth = rows.topk(min(k, rows.shape[1]), dim=-1).values[:, -1:]
        proc = torch.where(rows >= kth, rows, torch.zeros_like(rows))
        proc = proc / proc.sum(-1, keepdim=True)
        return torch.multinomial(proc, 1, generator=g)[:, 0], proc if report_processed else rows
    return draft


def test_proposal_check():
    assert assert_proposal(honest, samples=40_000).passed  # false alarm <= 1e-3
    assert check_proposal(top_k(50, True), samples=40_000).passed  # false alarm <= 1e-3
    rep = check_proposal(greedy_with_soft_q, samples=40_000)
    assert not rep.passed and rep.p_value < 1e-6
    rep = check_proposal(top_k(50, False), samples=40_000)
    assert not rep.passed and "row set 4" in rep.worst_cell.label  # the V = 100 rows
    with pytest.raises(AssertionError, match="check_proposal"):
        assert_proposal(greedy_with_soft_q, samples=4_000)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("kw,msg", [({"samples": 0}, "samples"), ({"alpha": 0}, "alpha"),
                                    ({"alpha": 1.5}, "alpha"), ({"mode": "x"}, "mode"),
                                    ({"mode": "coins", "convention": "gbv"}, "convention"),
                                    ({"samples": 5}, "fewer than")])
def test_bad_arguments_are_refused(kw, msg):
    with pytest.raises(SpectheoryError, match=msg):
        check_sampler(make_sampler("block"), "block", **kw)


def test_lossless_mode_refuses_huge_enumerations():
    with pytest.raises(SpectheoryError, match="V\\^\\(L\\+1\\)"):
        check_sampler(make_sampler("block"), "block", [random_instance(30, 4, 0,
                      context_independent=True)], mode="lossless")


# ----------------------------------------------------------------------------- command line

SAMPLERS = '''
from spectheory.testing.checks.sampler import make_sampler, reference_coin_sampler
block = make_sampler("block")
token = make_sampler("token")
coins = reference_coin_sampler("block")
def broken(d, q, p, g):
    raise ValueError("boom")
def exits(d, q, p, g):
    import sys
    sys.exit(0)
'''


@pytest.fixture
def sampler_module(user_modules):
    return user_modules(my_samplers=SAMPLERS,
                        exits_on_import="import sys\nsys.exit(0)\ndef f(*a):\n    pass\n")


def test_cli_pass_fail_and_json(sampler_module, capsys):
    code, out, err = run(["check-sampler", "my_samplers:block", "--samples", "20000"], capsys)
    assert code == 0 and "PASS" in out and err == ""
    code, out, _ = run(["check-sampler", "my_samplers:token", "--samples", "20000"], capsys)
    assert code == 1 and "FAIL" in out and "worst cell" in out
    code, out, _ = run(["check-sampler", "my_samplers:token", "--verifier", "token", "--json",
                        "--samples", "20000", "--alpha", "0.01", "--seed", "3"], capsys)
    obj = json.loads(out)
    assert code == 0 and obj["passed"] and obj["alpha"] == 0.01 and obj["samples"] == 20000
    code, out, _ = run(["check-sampler", "my_samplers:coins", "--mode", "coins", "--samples",
                        "5000"], capsys)
    assert code == 0 and "coins mode" in out
    code, out, _ = run(["check-sampler", "my_samplers:coins", "--mode", "coins", "--convention",
                        "token", "--samples", "5000"], capsys)
    assert code == 1 and "first mismatch" in out
    code, out, _ = run(["check-sampler", "my_samplers:block", "--mode", "lossless",
                        "--verifier", "spectheory.verifiers.block:block_verification",
                        "--samples", "20000"], capsys)
    assert code == 0


@pytest.mark.parametrize("args,msg", [
    (["no_such_module:f"], "cannot import module"),
    (["my_samplers:nothing"], "no attribute"),
    (["my_samplers"], "module:function"),
    (["my_samplers:block", "--samples", "0"], "--samples"),
    (["my_samplers:block", "--samples", "many"], "not an integer"),
    (["my_samplers:block", "--alpha", "1.5"], "--alpha"),
    (["my_samplers:block", "--alpha", "nan"], "--alpha"),
    (["my_samplers:block", "--verifier", "nope"], "unknown verifier"),
    (["my_samplers:broken"], "sampler my_samplers:broken raised ValueError: boom"),
    (["my_samplers:exits"], "sampler my_samplers:exits called sys.exit(0)"),
    (["exits_on_import:f"], "sys.exit"),
    (["my_samplers:block", "--instance", "missing.json"], "missing.json"),
])
def test_cli_bad_input_is_one_line_exit_2(sampler_module, capsys, args, msg):
    code, out, err = run(["check-sampler", *args], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and msg in err and "Traceback" not in err


def test_outputs_of_two_dimensions_are_a_layout_mistake():
    """accepted [1, B] or token [B, 1] has the right number of entries but not the layout the
    kit asked for: a failing report naming the shape, not a silent reshape."""
    base = make_sampler("block")

    def transposed(drafts, q, p, generator=None):
        tau, y = base(drafts, q, p, generator)
        return tau.reshape(1, -1), y

    report = check_sampler(transposed, "block", samples=2000)
    assert not report.passed and "accepted of shape [1," in str(report)


def test_unique_rows_is_torch_unique():
    """The repeat-aware sampler's grouping of its input rows (``own_sampler._unique_rows``,
    rows grouped by their bytes first) returns torch.unique(dim=0)'s distinct rows and inverse:
    on rows with ties across and within rows, float32 and float64, non-contiguous batches, and
    rows holding -0.0 (equal to 0.0 with other bytes), NaN or inf, which torch.unique groups."""
    from spectheory.testing.checks.own_sampler import _unique_rows

    g = torch.Generator().manual_seed(1)
    for trial in range(60):
        m, w, k = (int(torch.randint(1, hi, (1,), generator=g)) for hi in (600, 20, 30))
        dt = torch.float32 if trial % 3 == 0 else torch.float64
        base = torch.floor(torch.rand(k, w, generator=g, dtype=dt) * 4) / 4
        if trial % 5 == 0:
            base[0, 0] = -0.0
        if trial % 7 == 0:
            base[-1, -1] = float("nan")
        if trial % 11 == 0:
            base[0] = float("inf")
        flat = base[torch.randint(0, k, (m,), generator=g)]
        if trial % 4 == 0:
            flat = flat.t().contiguous().t()
        want, want_inv = torch.unique(flat, dim=0, return_inverse=True)
        got, got_inv = _unique_rows(flat)
        assert torch.equal(got_inv, want_inv), trial
        assert got.dtype == want.dtype and got.shape == want.shape, trial
        assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(want)), trial
        assert torch.equal(torch.signbit(got), torch.signbit(want)), trial
