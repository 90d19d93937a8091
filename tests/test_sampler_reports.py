"""What a sampler check tells its user: hints computed from the counts, refusals where nothing
was tested, one detection figure in text and JSON, declared attributes through wrappers, the
wrong kind of sampler, every failing instance of a coins check, user code that exits or never
returns, and options that would do nothing.

Statistical verdicts use fixed seeds (deterministic); each check a correct sampler passes runs at
family-wise false-alarm rate ``ALPHA``. Every refusal or hint has a planted case it must give and a
control it must not.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from spectheory.runtime.errors import OptionError, SpectheoryError, TimeLimitError, UserCodeError
from spectheory.testing.statistics import budget as B
from spectheory.testing.statistics import stats
from spectheory.testing.checks.calls import _report
from spectheory.testing.engines.layouts import SGLANG_COINS, TRANSFORMERS_COINS
from spectheory.testing.checks.report import declared
from spectheory.testing.checks.sampler import (DraftRows, check_sampler, make_sampler,
                                               reference_coin_sampler)
from cli_helpers import run

ALPHA = 1e-3


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def off_by_one_token_sampler(drafts, q, p, generator):
    """Token verification reading p(.|X^i) for X_i (the off-by-one target row): fits neither
    rule's law."""
    L = drafts.shape[1]
    shifted = torch.cat([p[:, 1:L + 1], p[:, L:]], dim=1)
    return make_sampler("token")(drafts, q, shifted, generator)


# ----------------------------------------------------------------------------- hints


def test_the_rule_hint_is_given_when_the_other_rule_fits():
    """A token sampler checked as block: the counts fit token verification's exact law, so the
    report says so; and the reverse."""
    rep = check_sampler(make_sampler("token"), "block", samples=20_000)
    assert not rep.passed
    text = str(rep)
    assert "checked against verifier 'block': a token sampler needs --verifier token" in text
    assert "fit the exact law of verifier 'token'" in text
    rep = check_sampler(make_sampler("block"), "token", samples=20_000)
    assert not rep.passed and "a block sampler needs --verifier block" in str(rep)


def test_a_law_with_no_degree_of_freedom_is_not_said_to_fit():
    """300 samples: the block check fails on outcomes of probability 0, while the token law's
    cells all pool into one bin. A family with no degree of freedom tests nothing, so the token
    law is not claimed to fit (its p-value of 1 would say nothing), nor to misfit: a p-value of
    0 said "the samples fit none of the laws a set-up mistake would give" of the token law the
    sampler follows (at 5,000 samples it fits); the report says it could not be tested. No
    detection figure is printed as "bias >= inf"."""
    rep = check_sampler(make_sampler("token"), "block", samples=300)
    assert not rep.passed and rep.needs_samples == 0 and rep.worst_cell.expected == 0.0
    text = str(rep)
    assert "needs --verifier" not in text and "fit none" not in text and "inf" not in text
    assert "too few samples to test the exact law of verifier 'token' (no degree of freedom)" \
        in text and "no bias figure: no degree of freedom was tested at 300 samples" in text


def test_a_check_with_no_degree_of_freedom_under_sampling_is_not_called_greedy(tmp_path):
    """Under top_k=2 the rows are not point masses; a sampler whose output is unusable (or too
    few samples with an impossible outcome) left no degree of freedom, and the report said
    "each row's law sits in one bin, as under greedy decoding" with a detection figure of a
    point mass. The note belongs to point masses only (temperature=0 keeps it: the control)."""
    def wrong_length(drafts, q, p, generator):
        return torch.zeros(drafts.shape[0], dtype=torch.long)

    rep = check_sampler(wrong_length, "token", samples=5000, sampling="top_k=2")
    assert not rep.passed and "greedy decoding" not in str(rep), str(rep)
    rep = check_sampler(make_sampler("token"), "block", samples=300, sampling="top_p=0.5")
    assert not rep.passed and "greedy decoding" not in str(rep), str(rep)
    from spectheory.inputs.processing import process_rows

    def greedy_token(drafts, q, p, generator):  # the kit's sampler on the processed rows
        L = drafts.shape[1]
        rows = torch.stack([process_rows(p[:, i], "temperature=0") for i in range(L + 1)], 1)
        return make_sampler("token")(drafts, q, rows, generator)

    rep = check_sampler(greedy_token, "token", samples=2000, sampling="temperature=0")
    assert rep.passed and "as under greedy decoding" in str(rep), str(rep)


def test_no_rule_hint_for_a_sampler_that_fits_neither_rule():
    """Planted: the off-by-one row fails the token check, and fits the block law no better, so
    no --verifier hint; the note names both p-values instead."""
    rep = check_sampler(off_by_one_token_sampler, "token", samples=20_000)
    assert not rep.passed
    text = str(rep)
    assert "needs --verifier" not in text
    assert "fit none of the laws a set-up mistake would give" in text and "'block'" in text


def test_a_sampling_setup_error_gets_the_processing_hint_not_the_rule_hint():
    """A token sampler that ignores top_k = 2 (it samples from the raw target it is handed): the
    counts fit the raw law of the same rule, so the hint is about the processing."""
    rep = check_sampler(make_sampler("token"), "token", samples=20_000, sampling="top_k=2")
    assert not rep.passed
    text = str(rep)
    assert "needs --verifier" not in text
    assert "does not apply them" in text and "against the raw target rows" in text
    # control: a sampler that applies top_k = 2 passes, with no hint at all
    from spectheory.inputs.processing import process_rows, parse_sampling

    sp = parse_sampling("top_k=2")
    tok = make_sampler("token")

    def top2(drafts, q, p, generator):
        return tok(drafts, q, process_rows(p, sp), generator)

    ok = check_sampler(top2, "token", samples=20_000, sampling="top_k=2")
    assert ok.passed and "hint" not in str(ok) and "needs --verifier" not in str(ok)


# ----------------------------------------------------------------------------- no test, no pass


def test_samples_for_a_test_is_exact():
    """The fewest samples at which a row has a degree of freedom, checked one below."""
    for probs, want in (([0.9, 0.1], 50), ([0.5, 0.3, 0.2], 10), ([0.25] * 4, 20),
                        ([0.6, 0.0, 0.4], 13)):
        n = stats.samples_for_a_test(probs)
        assert n == want
        P = np.array(probs)
        assert stats.row_chi_square(P * n, P, n).dof >= 1
        assert stats.row_chi_square(P * (n - 1), P, n - 1).dof == 0
    assert stats.samples_for_a_test([0.0, 1.0, 0.0]) is None


def test_too_few_samples_is_refused_not_passed():
    """300 samples over 32 draft rows: no row has two bins of expected count 5. The report fails,
    says so, and states the samples a test of every row needs; at that count every row that is
    not a point mass is tested, and a correct sampler passes."""
    from spectheory.testing.checks.sampler import _ROW_LAWS

    from spectheory.runtime.errors import OptionError, TooFewSamplesError

    s = make_sampler("block")
    with pytest.raises(TooFewSamplesError) as exc:  # a refusal (an OptionError), never a FAIL
        check_sampler(s, "block", samples=300)
    assert isinstance(exc.value, OptionError) and "\n" not in str(exc.value)
    needs = exc.value.needs_samples
    assert needs > 300 and "no degree of freedom was tested" in str(exc.value)
    assert f"{needs:,} samples" in str(exc.value)
    laws = []
    token = _ROW_LAWS.set(laws)
    try:
        full = check_sampler(s, "block", samples=needs)
    finally:
        _ROW_LAWS.reset(token)
    per = needs // len(laws)
    assert per * len(laws) == needs
    need = [stats.samples_for_a_test(p) for p in laws]
    assert per == max(x for x in need if x is not None)
    assert full.passed and full.dof > 0 and full.needs_samples == 0
    assert all(stats.row_chi_square(p / p.sum() * per, p, per).dof >= 1
               for p, x in zip(laws, need) if x is not None)


def test_greedy_rows_pass_with_the_point_mass_figure_in_text_and_json():
    """Every row a point mass (temperature 0): no degree of freedom, yet a real test (any sample
    off the point fails); the figure 1 - 0.1^(1/n) is the same number in text and JSON, and the
    budget's plan states it too."""
    from spectheory.inputs.processing import parse_sampling, process_rows

    sp = parse_sampling("temperature=0")
    tok = make_sampler("token")

    def greedy(drafts, q, p, generator):
        return tok(drafts, q, process_rows(p, sp), generator)

    rep = check_sampler(greedy, "token", samples=3_200, sampling="temperature=0")
    assert rep.passed and rep.dof == 0
    n = 3_200 // 32
    assert rep.min_detectable_tv == pytest.approx(1 - 0.1 ** (1 / n), rel=1e-12)
    js = rep.to_json()
    assert js["min_detectable_tv"] == js["detects"]["value"] == rep.min_detectable_tv
    assert f">= {rep.min_detectable_tv:.3g} in every row's law" in str(rep)
    point = [np.array([0.0, 1.0, 0.0])] * 32
    assert B.planned_tv(point, 3_200, ALPHA) == rep.min_detectable_tv


def test_cli_refuses_too_few_samples_with_exit_2(sampler_module, capsys):
    code, out, err = run(["check-sampler", "report_samplers:block", "--samples", "300"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "--samples 300: no degree of freedom was tested" in err and "needs at least" in err


# ----------------------------------------------------------------------------- detection figure


def test_coins_reports_state_a_decision_rate_not_a_tv():
    rep = check_sampler(reference_coin_sampler("token"), "token", mode="coins-tau",
                        samples=2_000)
    assert rep.passed
    measure, value = rep.detection()
    n = rep.samples - rep.ambiguous
    assert measure == "decision rate" and value == pytest.approx(1 - 0.1 ** (1 / n), rel=1e-12)
    js = rep.to_json()
    assert js["min_detectable_tv"] is None  # not "TV 0.0"
    assert js["detects"] == {"measure": "decision rate", "value": value, "power": 0.9}
    assert f">= {value:.3g} of rows" in str(rep)
    law = check_sampler(make_sampler("token"), "token", samples=20_000)
    assert law.to_json()["detects"]["value"] == law.min_detectable_tv
    assert f">= {law.min_detectable_tv:.3g}" in str(law)


# ----------------------------------------------------------------------------- wrappers


def _engine_coin_sampler():
    """SGLang's chain kernel (the CPU port) through its preset, declaring SGLang's coins."""
    from spectheory.testing.engines import adapters as A
    from spectheory.testing.engines import layouts as Lm

    s = Lm.engine_coin_sampler(A.sglang_chain_speculative_sampling, Lm.SGLANG_CHAIN)
    assert s.coin_convention is SGLANG_COINS
    return s


def test_wrapped_coin_samplers_keep_their_convention():
    inner = _engine_coin_sampler()

    @functools.wraps(inner)
    def wrapped(drafts, q, p, uniforms):
        return inner(drafts, q, p, uniforms)

    del wrapped.coin_convention  # as if set on the inner function after wrapping
    assert declared(wrapped, "coin_convention") is SGLANG_COINS
    part = functools.partial(inner)
    for s in (wrapped, part):
        for mode in ("coins", "coins-tau"):
            rep = check_sampler(s, "token", mode=mode, samples=1_000)
            assert rep.passed and "engine coins sglang-chain" in rep.verifier, str(rep)
    rows = functools.partial(make_sampler("block"))
    assert declared(rows, "repeat_aware") is True


def test_a_wrapper_hiding_a_convention_is_refused():
    inner = _engine_coin_sampler()

    def hides(drafts, q, p, uniforms):  # no functools.wraps, no declaration
        return inner(drafts, q, p, uniforms)

    with pytest.raises(SpectheoryError, match="declares none itself") as e:
        check_sampler(hides, "token", mode="coins-tau", samples=100)
    assert "\n" not in str(e.value) and "sglang-chain" in str(e.value)

    @functools.wraps(inner)
    def other(drafts, q, p, uniforms):
        return inner(drafts, q, p, uniforms)

    other.coin_convention = TRANSFORMERS_COINS
    with pytest.raises(SpectheoryError, match="declares coin_convention 'transformers' but wraps"):
        check_sampler(other, "token", mode="coins-tau", samples=100)
    # control: a wrapper of a sampler with no convention runs on the kit's coins
    ref = reference_coin_sampler("token")

    def plain(drafts, q, p, uniforms):
        return ref(drafts, q, p, uniforms)

    assert check_sampler(plain, "token", mode="coins", samples=500).passed


# ----------------------------------------------------------------------------- wrong kind


def test_a_law_sampler_in_coins_tau_is_refused_in_one_line():
    with pytest.raises(SpectheoryError, match="a law sampler") as e:
        check_sampler(make_sampler("token"), "token", mode="coins-tau", samples=100)
    assert "\n" not in str(e.value) and "mode 'law'" in str(e.value)
    tok = make_sampler("token")

    def law_sampler(d, q, p, rng_state):  # a name the signature check does not know
        return tok(d, q, p, rng_state)

    with pytest.raises(SpectheoryError, match="as a torch generator") as e:
        check_sampler(law_sampler, "token", mode="coins-tau", samples=100)
    assert not isinstance(e.value, UserCodeError) or "randint" not in str(e.value)
    with pytest.raises(SpectheoryError, match="a coin-driven sampler"):
        check_sampler(reference_coin_sampler("token"), "token", mode="law", samples=100)
    with pytest.raises(SpectheoryError, match="a coin-driven sampler"):  # through the wrapper
        check_sampler(reference_coin_sampler("token"), "token", mode="law", samples=100,  # that
                      sampling="top_k=2")  # hands it raw rows under sampling parameters


# ----------------------------------------------------------------------------- every instance


def test_coins_tau_compares_every_instance_and_reports_each_failing_one():
    """Planted: a sampler that accepts one position too many at V = 4 only (instances 1 and 2
    of the defaults). Every row is compared, and exactly those instances are reported, each
    with its count and its first mismatch; a sampler wrong everywhere has all four."""
    ref = reference_coin_sampler("token")
    changed = [0]

    def wrong_at_v4(drafts, q, p, uniforms):
        tau, y = ref(drafts, q, p, uniforms)
        if q.shape[-1] == 4:
            moved = tau < drafts.shape[1]
            changed[0] += int(moved.sum())
            tau = torch.where(moved, tau + 1, tau)
        return tau, y

    rep = check_sampler(wrong_at_v4, "token", mode="coins-tau", samples=4_000)
    assert not rep.passed and rep.samples == 4_000
    assert [im.instance for im in rep.instance_mismatches] == [1, 2]
    for im in rep.instance_mismatches:
        assert 0 < im.count <= im.rows == 1_000 and im.first.differs == "tau"
        assert im.first.got[0] == im.first.expected[0] + 1
    assert rep.mismatch == rep.instance_mismatches[0].first
    # every changed row is counted, less those skipped as ambiguous (a coin within tol)
    counted = sum(im.count for im in rep.instance_mismatches)
    assert changed[0] - rep.ambiguous <= counted <= changed[0] and counted > 100
    text = str(rep)
    assert "instance 1:" in text and "instance 2:" in text and "instance 0:" not in text
    js = rep.to_json()
    assert [m["instance"] for m in js["instance_mismatches"]] == [1, 2]
    everywhere = check_sampler(ref, "block", mode="coins-tau", samples=4_000)
    assert [im.instance for im in everywhere.instance_mismatches] == [0, 1, 2, 3]


# ----------------------------------------------------------------------------- user code


SAMPLERS = '''
import os, time
from spectheory.testing.checks.sampler import make_sampler
block = make_sampler("block")
def quits(d, q, p, g):
    os._exit(0)
def hangs(d, q, p, g):
    while True:
        time.sleep(0.02)
'''


@pytest.fixture
def sampler_module(user_modules):
    return user_modules(report_samplers=SAMPLERS)


def test_a_sampler_calling_os_exit_is_refused(sampler_module, capsys):
    import os

    real = os._exit
    code, out, err = run(["check-sampler", "report_samplers:quits", "--samples", "1000"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "report_samplers:quits called os._exit(0)" in err
    assert os._exit is real  # put back after the call


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_child_forked_by_the_sampler_still_exits():
    """os._exit is refused in the checking process only: a child the sampler forks exits with
    its own code, and the check goes on."""
    import os

    block = make_sampler("block")
    codes = []

    def forks(drafts, q, p, generator):
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        return block(drafts, q, p, generator)

    rep = check_sampler(forks, "block", samples=2_000, max_batch=1_000)
    assert rep.passed and codes and set(codes) == {7}


def test_a_sampler_that_never_returns_is_stopped_under_a_budget(sampler_module, capsys):
    import time

    t = time.perf_counter()
    code, out, err = run(["check-sampler", "report_samplers:hangs", "--budget", "0.2"], capsys)
    took = time.perf_counter() - t
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "sampler report_samplers:hangs did not return: the call was stopped after" in err
    assert "0.2 s plus 1 s (1.4 s)" in err
    assert took < 2 * 0.2 + 1 + 10  # the watchdog's 2 s, and start-up on a busy machine
    from spectheory.testing.checks.sampler import check_sampler as cs
    import report_samplers

    with pytest.raises(TimeLimitError, match="did not return"):
        cs(report_samplers.hangs, "token", samples="auto", budget_s=0.1)


def test_options_that_do_nothing_are_refused(sampler_module, capsys):
    code, out, err = run(["check-sampler", "report_samplers:block", "--mode", "law", "--convention",
                          "block"], capsys)
    assert code == 2 and out == "" and "--convention block applies to --mode coins" in err
    with pytest.raises(OptionError, match="coins modes only"):
        check_sampler(make_sampler("block"), "block", mode="lossless", convention="block",
                      samples=1000)


# ----------------------------------------------------------------------------- defect classes


def test_the_pooled_bin_does_not_count_impossible_samples():
    """Cells of expected 50, 46, 2, 2 and one of probability 0 holding 5 samples: the two small
    cells pool (4 < 5) into the smallest large one, whose observed count is 100 - 5 - 90 + 40 = 45
    (the impossible samples stay out), so X^2 = (45 - 50)^2 / 50 = 0.5 on 1 degree of freedom;
    the report shows that statistic and the 5 impossible samples."""
    probs = np.array([0.5, 0.46, 0.02, 0.02, 0.0])
    obs = np.array([50, 40, 3, 2, 5])
    t = stats.row_chi_square(obs, probs, 100)
    assert t.dof == 1 and t.impossible == 5
    assert t.statistic == pytest.approx(0.5, abs=1e-12)
    assert (t.worst_observed, t.worst_expected) == (45.0, 50.0)
    rep = _report("law", [t], 100, ALPHA, "token", None, None, [probs])
    assert rep.statistic == pytest.approx(0.5, abs=1e-12) and "global chi-square 0.5" in str(rep)


def test_the_budget_counts_the_rows_as_check_sampler_does():
    """Rows whose law is a point mass have no test but count in the Bonferroni m of the
    per-row tests (alpha / 2m), in the check and in its plan alike: the planned detectable
    bias equals the reported one on rows where half are point masses."""
    from spectheory.testing.checks.sampler import _ROW_LAWS

    g = torch.Generator().manual_seed(5)
    V, L, R = 3, 1, 8
    with torch.random.fork_rng(devices=[]):  # Dirichlet draws from the global generator: seeded
        torch.manual_seed(5)  # here, else the rows hung on the tests run before in the process
        q = torch.distributions.Dirichlet(torch.ones(V)).sample((R, L)).to(torch.float64)
        p = torch.distributions.Dirichlet(torch.ones(V)).sample((R, L + 1)).to(torch.float64)
    d = torch.randint(0, V, (R, L), generator=g)
    one_hot = torch.nn.functional.one_hot(d[:, 0], V).to(torch.float64)
    p[: R // 2, 0] = one_hot[: R // 2]  # the drafted token certain: accepted with probability 1
    p[: R // 2, 1] = torch.nn.functional.one_hot((d[: R // 2, 0] + 1) % V, V).to(torch.float64)
    q[: R // 2, 0] = one_hot[: R // 2]
    rows = DraftRows(d, q, p)
    laws = []
    token = _ROW_LAWS.set(laws)
    try:
        rep = check_sampler(make_sampler("token"), "token", [rows], samples=4_000)
    finally:
        _ROW_LAWS.reset(token)
    assert rep.passed and len(laws) == R
    assert sum(stats.is_point_mass(x) for x in laws) == R // 2
    ns = B.split(4_000, R)
    dofs = [B.row_dof(x, n) for x, n in zip(laws, ns)]
    assert dofs.count(0) == R // 2
    planned = B.planned_tv(laws, 4_000, ALPHA)
    assert planned == rep.min_detectable_tv
    # where the per-row tests decide (a wide row beside a two-cell row and six point masses),
    # the plan's figure is the report's, with m = 8 rows in alpha / 2m, not the 2 tested
    wide = [np.full(200, 1 / 200), np.array([0.5, 0.5])] + [np.array([0.0, 1.0, 0.0])] * 6
    ns = B.split(16_000, 8)
    tests = [stats.row_chi_square(x * n, x, n) for x, n in zip(wide, ns)]
    assert [t.dof for t in tests] == [199, 1] + [0] * 6
    planned = B.planned_tv(wide, 16_000, ALPHA)
    assert planned == stats.min_detectable_tv(tests, ALPHA)
    assert B.detectable_tv(ns[:2], [199, 1], ALPHA) < 0.95 * planned  # m = 2 would claim more


def test_lossless_and_proposal_checks_refuse_too_few_samples_too():
    from spectheory.runtime.errors import TooFewSamplesError

    with pytest.raises(TooFewSamplesError) as exc:
        check_sampler(make_sampler("block"), "block", mode="lossless", samples=40)
    assert exc.value.needs_samples > 40 and "4 instances" in str(exc.value)
    from spectheory.testing.checks.sampler import check_proposal

    def honest(q_rows, generator):
        return torch.multinomial(q_rows, 1, generator=generator)[:, 0], q_rows

    with pytest.raises(TooFewSamplesError) as exc:
        check_proposal(honest, samples=60)
    assert exc.value.needs_samples > 60 and "proposal rows" in str(exc.value)
    assert check_proposal(honest, samples=exc.value.needs_samples).passed


# ----------------------------------------------------------------------------- layout


#: Every name spectheory.testing.checks.sampler defined or re-exported when it held every mode;
#: tests, benchmarks and docs import private ones among them.
SAMPLER_NAMES = [
    'BUDGET_MIN_BATCH', 'BYTES_PER_SAMPLE', 'CONVENTIONS', 'COUNT_CHUNK', 'Cell', 'CoinMismatch',
    'DraftRows', 'MAX_CALL_FLOATS', 'MAX_LOSSLESS_CELLS', 'MAX_MEMORY_BYTES', 'MAX_SECONDS',
    'MIN_EXPECTED', 'MIN_SECONDS_PER_SAMPLE', 'MODES', 'POWER', 'PROJECT_AFTER_S', 'SamplerReport',
    'TINY_COIN', '_PACE', '_Pace', '_ROW_LAWS', '_WHO', '_as_index', '_budgeted', '_cells',
    '_check_args', '_chunk', '_coin_blocks', '_coin_decide', '_coin_mismatch', '_coin_support',
    '_coin_thresholds', '_coins_mode', '_collect_law', '_definitive', '_dims', '_engine_convention',
    '_equal_at_some_nodes', '_failed', '_finite', '_fixed_rows', '_guarded', '_instant_sampler',
    '_interleave_breaks', '_is_repeat', '_law_mode', '_lossless_mode', '_min_samples', '_name_of',
    '_one_law_draw', '_outputs', '_pace_add', '_planned_bytes', '_proposal_rows', '_refuse_size',
    '_refuse_time', '_report', '_round_rows', '_row_counts', '_run_mode', '_split', '_tokens',
    '_zeroed_instance', 'assert_proposal', 'assert_sampler', 'check_proposal', 'check_sampler',
    'default_instances', 'default_proposal_rows', 'make_sampler', 'reference_coin_sampler']


def test_every_name_of_the_sampler_module_stays_importable_from_it():
    """The modes live in their own modules; the names stay where users found them, and the
    context variables are the very objects the modes read (setting one from the old place
    works)."""
    import importlib

    S = importlib.import_module("spectheory.testing.checks.sampler")
    from spectheory.testing.checks import calls, coins_mode, law_mode, lossless_mode, rows

    assert [n for n in SAMPLER_NAMES if not hasattr(S, n)] == []
    assert S._ROW_LAWS is calls._ROW_LAWS and S._WHO is calls._WHO and S._PACE is calls._PACE
    assert S._law_mode is law_mode._law_mode and S._coins_mode is coins_mode._coins_mode
    assert S._lossless_mode is lossless_mode._lossless_mode
    assert S.default_instances is rows.default_instances


def test_lossless_mode_states_its_bias_in_each_instances_law():
    """Lossless mode tests the instances' output laws, not draft rows: its report and its budget
    line said "in every row's law"."""
    rep = check_sampler(make_sampler("block"), "block", mode="lossless", samples=2_000, seed=1)
    assert rep.passed
    text = str(rep)
    assert f">= {rep.min_detectable_tv:.3g} in every instance's law" in text
    assert "row's law" not in text
    law = check_sampler(make_sampler("block"), "block", samples=2_000, seed=1)
    assert "in every row's law" in str(law)
    plan = B.BudgetPlan(10.0, 5_000, 9.0, [(32, 0.1)], [], 0.1, 1e-3, 1e-6, 1e-3, 0.9, 0.05,
                        None, 2**16, "instance")
    assert "in every instance's law with 90% power" in plan.summary()
    assert "in every row's law" in B.BudgetPlan(10.0, 5_000, 9.0, detectable_tv=0.05).summary()


def test_a_verifier_law_that_writes_into_its_rows_does_not_change_the_samplers_rows():
    """A user's verifier law was handed the very tensors the sampler got next: a law that
    flipped p in place after computing token verification's law made the correct token sampler
    FAIL (p-value 0, "observed 385, expected 0"). The law gets copies; a law that computes on
    the rows it altered is a different law, and the check says so (the control)."""
    import spectheory as st

    def writes_after(d, q, p):
        law = st.token_verification(d, q, p)
        p.copy_(p.flip(-1))
        return law

    def writes_before(d, q, p):
        p.copy_(p.flip(-1))
        return st.token_verification(d, q, p)

    assert check_sampler(make_sampler("token"), writes_after, samples=20_000).passed
    assert not check_sampler(make_sampler("token"), writes_before, samples=20_000).passed


def test_a_verifier_law_with_a_negative_entry_is_named_not_a_law():
    """A user's verifier law with an entry of -1e-18 was refused as "probs has an entry -1e-18"
    (the chi-square's own argument name); the verifier is named and the law called no law."""
    import spectheory as st
    from spectheory.law import LawError

    def slightly_negative(d, q, p):
        stop, corr = st.token_verification(d, q, p)
        stop = stop.clone()
        stop[:, -1] -= 1e-18
        stop[:, 0] += 1e-18
        return stop, corr

    with pytest.raises(LawError, match=r"^verifier slightly_negative's law has a negative "
                                       r"probability .* at draft row \d+ of instance \d+: not a "
                                       r"law$"):
        check_sampler(make_sampler("token"), slightly_negative, samples=20_000)


def test_a_check_with_a_degree_of_freedom_and_no_detectable_bias_says_so():
    """19 samples at alpha = 1e-15 test one degree of freedom, and no bias up to a TV of 1 is
    caught with 90% power: the report said "no degree of freedom was tested"."""
    import spectheory as st

    rep = check_sampler(make_sampler("token"), "token", instances=[st.random_instance(2, 1, 3)],
                        samples=19, alpha=1e-15, draft_rows=1)
    text = str(rep)
    assert rep.dof >= 1 and "no degree of freedom" not in text, text
    assert "detects no bias in every row's law with 90% power at 19 samples" in text, text


def test_a_list_of_ids_past_int64_is_named_as_such():
    """A sampler returning Python lists passes (engines return lists), and one returning
    [2**70] * B was told its output is "of type list, not a tensor of integer ids"."""
    def huge(drafts, q, p, generator):
        accepted, _ = make_sampler("token")(drafts, q, p, generator)
        return accepted.tolist(), [2**70] * drafts.shape[0]

    def listed(drafts, q, p, generator):  # control: lists of ids are read
        accepted, token = make_sampler("token")(drafts, q, p, generator)
        return accepted.tolist(), token.tolist()

    rep = check_sampler(huge, "token", samples=2000)
    assert not rep.passed and "token, a list of" in str(rep) and "out of the range of token ids" \
        in str(rep) and "not a tensor" not in str(rep), str(rep)
    assert check_sampler(listed, "token", samples=20_000).passed


def test_the_kits_sampler_handed_logits_says_it_takes_probabilities():
    """check_sampler(make_sampler(...), inputs="logits") was refused as "draft rows: the p row
    ... has a negative entry", with no word that the kit's sampler takes probabilities."""
    with pytest.raises(SpectheoryError, match=r"has a negative entry; every row must be a "
                                              r"distribution \(make_sampler's samplers take "
                                              r"probabilities: a check with inputs='logits'"):
        check_sampler(make_sampler("token"), "token", inputs="logits", mode="lossless",
                      samples=4000)
