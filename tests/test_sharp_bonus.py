"""Sharp designs and the bonus token, and the argument checks of spectheory.testing.designs.sharp.

The bonus-path replicas (`sharp.BONUS_BUGS`: after L acceptances Y drawn from p_{L-1}, from the
correction row of position L-1, or from q_{L-1}, instead of p_L) are caught by the kit's token
and block designs at 3,000 samples, alpha = 1e-3, with predicted (non-central chi-square) and
law-simulated power >= 0.9 each, and empirically in 10 of 10 seeds (asserted >= 9 of 10; a
replica of power 0.9 passes that with probability 0.74, of power 0.999 with 1 - 4.5e-5);
``bonus-draft-row`` is left out of the designs and caught all the same. Correct samplers pass 10
seeds of each design (family-wise false-alarm rate 1e-3 a check, at most 0.01 for the 10).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from spectheory.registry import VerifierSpec
from spectheory.runtime.errors import SpectheoryError, UserCodeError
from spectheory.testing.designs import sharp
from spectheory.testing.checks.sampler import DraftRows, check_sampler, make_sampler
from spectheory.testing.checks.step import detection_power
from spectheory.verifiers.block import block_verification
from spectheory.verifiers.token import token_verification

F64 = torch.float64
BUDGET, ALPHA = 3000, 1e-3
SEEDS = range(10)


def _spec(name, law):
    return VerifierSpec(name, law, paths=1, lossless=False, exact=False)


def _row(drafts, q, p) -> DraftRows:
    return DraftRows(torch.tensor([drafts]), torch.tensor([q], dtype=F64),
                     torch.tensor([p], dtype=F64))


#: V = 3, L = 2, prefix-dependent rows, a tie p(X_1) = q(X_1) = 0.4 at the first draft and
#: p(X_2) = 0.4 > q(X_2) = 0.2 at the second: token verification accepts both (tau = L with
#: probability 1), and the bonus row p_2 = (0.1, 0.1, 0.8) is at TV 0.4 from p_1 =
#: (0.4, 0.2, 0.4).
ROW = _row([1, 2], [[0.3, 0.4, 0.3], [0.5, 0.3, 0.2]],
           [[0.2, 0.4, 0.4], [0.4, 0.2, 0.4], [0.1, 0.1, 0.8]])


@pytest.fixture(scope="module", params=["token", "block"])
def design(request):
    return sharp.kit_design(request.param, BUDGET, ALPHA)


# ----------------------------------------------------------------------------- the laws


def test_bonus_laws_change_only_the_bonus_row():
    """On ROW (token: a_1 = min(1, 0.4/0.4) = 1, a_2 = min(1, 0.4/0.2) = 1, so tau = 2 with
    probability 1), each bug's law keeps the stop law and the correction rows 0..L-1 of the
    reference and puts its own row at tau = L: p_{L-1} = (0.4, 0.2, 0.4), q_{L-1} =
    (0.5, 0.3, 0.2), the correction row of position 1 (token: the residual of p_1 - q_1 =
    (-0.1, -0.1, 0.2), i.e. (0, 0, 1))."""
    ref = token_verification(*ROW)
    assert torch.allclose(torch.as_tensor(ref.stop), torch.tensor([[0.0, 0.0, 1.0]], dtype=F64))
    rows = {"bonus-previous-row": [0.4, 0.2, 0.4], "bonus-draft-row": [0.5, 0.3, 0.2],
            "bonus-last-correction": [0.0, 0.0, 1.0]}
    assert set(rows) == set(sharp.BONUS_BUGS)
    for bug, want in rows.items():
        law = sharp.bonus_law(*ROW, bug=bug, verifier="token")
        assert torch.equal(torch.as_tensor(law.stop), torch.as_tensor(ref.stop))
        assert torch.allclose(law.correction[:, :2], torch.as_tensor(ref.correction)[:, :2])
        assert torch.allclose(law.correction[0, 2], torch.tensor(want, dtype=F64))
    # the brief's example size: the bonus from p_{L-1} moves TV 0.4 of the emitted law here
    bad = sharp._cells(sharp.bonus_law(*ROW, bug="bonus-previous-row"), True)
    good = sharp._cells(ref, True)
    assert 0.5 * np.abs(bad - good).sum() == pytest.approx(0.4)
    blk = block_verification(*ROW)
    law = sharp.bonus_law(*ROW, bug="bonus-last-correction", verifier="block")
    assert torch.allclose(law.correction[:, 2], torch.as_tensor(blk.correction)[:, 1])


def test_bonus_samplers_have_their_stated_laws(design):
    """Each bonus sampler passes law mode against its own exact law (20,000 samples on the
    design's rows and ROW) and fails against the verifier it claims."""
    verifier = design.verifier
    rows = list(design.rows) + [ROW]
    for r in sharp.bonus_replicas(verifier):
        assert check_sampler(r.sampler, _spec(r.name, r.law), instances=rows, samples=20_000,
                             seed=1).passed, r.name
        assert not check_sampler(r.sampler, verifier, instances=[ROW], samples=3000,
                                 seed=1).passed, r.name


# ----------------------------------------------------------------------------- the designs


def test_the_designs_reach_the_bonus_token(design):
    """Some rows of the design reach tau = L with substantial probability and there p_L is far
    from p_{L-1}: P(tau = L) and the TV between the two rows are read from the reference law
    (token_verification / block_verification), not from the design."""
    ref = token_verification if design.verifier == "token" else block_verification
    from spectheory.testing.statistics.budget import split

    ns = np.array(split(BUDGET, design.copies))
    reach, far = [], []
    for d, q, p in design.rows:
        L = d.shape[-1]
        s = torch.as_tensor(ref(d, q, p).stop)[:, L].numpy()
        tv = 0.5 * (p[:, L] - p[:, L - 1]).abs().sum(-1).numpy()
        reach.append(s)
        far.append(tv)
    reach, far = np.concatenate(reach), np.concatenate(far)
    at_bonus = ns * reach
    assert at_bonus.sum() >= 500  # samples that reach the bonus token
    assert at_bonus[far >= 0.3].sum() >= 300  # ... on rows where p_L is far from p_{L-1}
    assert 300 <= design.bonus_samples <= at_bonus.sum() + 1e-9
    assert design.bonus_power >= 0.9 and design.bonus_tv == sharp.GENERIC_BONUS_TV


def test_every_replica_of_the_design_is_caught_with_power_0_9(design):
    """Predicted (non-central chi-square, `replica_power`) and law-simulated power >= 0.9 for
    every visible replica of the kit, the bonus-path ones included, and for the bonus replica
    the design was not built against (``bonus-draft-row``)."""
    names = {r.name for r in design.replicas}
    for bug in sharp.KIT_BONUS_BUGS:
        assert f"{design.verifier}-{bug}" in names
    assert f"{design.verifier}-bonus-draft-row" not in names
    for r in design.predicted.values():
        assert r.power >= 0.9 and r.simulated >= 0.9, r
    unseen = sharp.bonus_replicas(design.verifier, ["bonus-draft-row"])[0]
    pw = sharp.predicted_power(design.rows, [unseen], design.verifier, BUDGET, ALPHA)
    assert pw[unseen.name].power >= 0.9
    assert sharp.simulated_power(design.rows, unseen, design.verifier, BUDGET, ALPHA) >= 0.9


def test_replicas_are_caught_over_ten_seeds_and_correct_samplers_pass(design):
    """Every law of the kit's replicas (one sampler a law: the ports that share a planted bug
    share its law, and the transformers port, one sequence a call, is left to
    tests/test_sharp.py), and the unseen bonus bug, fails law mode on the design's rows at 3,000
    samples in at least 9 of 10 seeds; spectheory's sampler passes all 10 (alpha = 1e-3)."""
    v = design.verifier
    by_law: dict = {}
    for r in design.replicas:
        if r.visible and r.sampler is not None and not r.name.startswith("transformers"):
            by_law.setdefault(r.law_key or r.name, r)
    reps = list(by_law.values()) + sharp.bonus_replicas(v, ["bonus-draft-row"])
    assert {f"{v}-{b}" for b in sharp.BONUS_BUGS} <= {r.name for r in reps}
    for r in reps:
        caught = sum(not check_sampler(r.sampler, v, instances=design.rows, samples=BUDGET,
                                       alpha=ALPHA, seed=s).passed for s in SEEDS)
        assert caught >= 9, (r.name, caught)
    ok = make_sampler(v)
    assert all(check_sampler(ok, v, instances=design.rows, samples=BUDGET, alpha=ALPHA,
                             seed=s).passed for s in SEEDS)


# ----------------------------------------------------------------------------- Bonferroni


def test_replica_power_at_no_effect_is_the_family_size_at_the_global_level():
    """With no effect the predicted power is the family's false-alarm rate: the global test at
    alpha/2 (chi2's own size) and m per-row tests at alpha/(2m), whose union is at most
    alpha/2 (1 - (1 - alpha/(2m))^m <= alpha/2). Without the split (global at alpha) or without
    the per-row Bonferroni factor (rows at alpha/2: about m alpha/2), it would exceed alpha/2."""
    for m in (1, 2, 5, 40):
        for alpha in (1e-3, 0.05):
            pw = sharp.replica_power(np.full(m, 100), np.zeros(m), np.zeros(m),
                                     np.full(m, 3), alpha)
            assert pw == pytest.approx(alpha / 2, rel=1e-9), (m, alpha, pw)


def test_replica_power_per_row_level_matches_the_checks_decision():
    """One row of effect among m = 12 (the others the reference law): the per-row test at
    alpha/(2m) carries the power. The prediction agrees with the simulation of the check's
    decision from the exact law (within 0.05); predicted at the per-row level alpha/2 instead,
    it would be about 0.3 higher."""
    half = _accept_half_law
    a = _row([0], [[0.5, 0.5]], [[0.3, 0.7], [0.6, 0.4]])
    b = _row([1], [[0.5, 0.5]], [[0.8, 0.2], [0.5, 0.5]])
    rows = [DraftRows(*(torch.cat([a[j]] + [b[j]] * 11) for j in range(3)))]
    n = 12 * 500
    pred = sharp.predicted_power(rows, [("half", half)], "token", n, ALPHA)["half"]
    sim = sharp.simulated_power(rows, ("half", half), "token", n, ALPHA, reps=4000)
    assert 0.4 < sim < 0.75  # 0.566 at seed 0
    assert abs(pred.power - sim) < 0.05, (pred.power, sim)


def _accept_half_law(drafts, q, p):
    """Token verification, but acceptance 1/2 on rows whose first target row is (0.3, 0.7)."""
    from spectheory.verifiers.common import residual_corrections, residuals
    from spectheory.verifiers.contrasts import chain_law

    ref = token_verification(drafts, q, p)
    L = drafts.shape[-1]
    a = torch.full(drafts.shape, 0.5, dtype=F64)
    corr = residual_corrections(residuals(torch.ones_like(a), q, p), p)
    half = chain_law(a, corr[:, :L], p[:, L])
    on = torch.isclose(p[:, 0, 0], torch.tensor(0.3, dtype=F64))
    stop = torch.where(on[:, None], torch.as_tensor(half.stop), torch.as_tensor(ref.stop))
    corr = torch.where(on[:, None, None], torch.as_tensor(half.correction),
                       torch.as_tensor(ref.correction))
    from spectheory.law import Law

    return Law(stop, corr)


def test_detection_power_at_no_effect_is_the_instance_test_size():
    """check_step's one-instance family: the global and the per-instance test, each at alpha/2.
    With law = target the power is the size of one chi-square test at alpha/2 (the two tests
    coincide for one instance); dropping the split would give alpha."""
    rng = np.random.default_rng(0)
    for alpha in (1e-3, 0.05):
        target = rng.dirichlet(np.ones(9))
        assert detection_power(target, target, 500, alpha) == pytest.approx(alpha / 2,
                                                                            rel=1e-9)
    # and against a bias: the non-central chi-square at the alpha/2 critical value
    P = np.array([0.25, 0.25, 0.5])
    Q = np.array([0.3, 0.2, 0.5])
    lam = 400 * (0.05 ** 2 / 0.25 * 2)
    from scipy.stats import ncx2

    assert detection_power(Q, P, 400, 1e-3) == pytest.approx(
        ncx2.sf(chi2.isf(5e-4, 2), 2, lam), rel=1e-9)


# ----------------------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def small_pool():
    return sharp.candidate_pool(size=45, seed=3)


@pytest.mark.parametrize("bad", ["3000", float("nan"), float("inf"), -5, 0, 2.5, True, None])
def test_bad_budget_is_refused_in_one_line(bad):
    for call in (lambda: sharp.kit_design("token", bad, ALPHA),
                 lambda: sharp.sharp_rows("law", "token", bad, ALPHA),
                 lambda: sharp.sharp_design([("x", token_verification)], "token", bad, ALPHA),
                 lambda: sharp.allocate([np.array([[0.5, 0.5]])],
                                        {"x": [np.array([[0.6, 0.4]])]}, bad, ALPHA)):
        with pytest.raises(SpectheoryError, match="budget = .* must be an integer >= 1") as e:
            call()
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("bad", ["0.001", float("nan"), float("inf"), -0.1, 0, 1, True, None])
def test_bad_alpha_is_refused_in_one_line(bad):
    rows = [ROW]
    for call in (lambda: sharp.kit_design("token", BUDGET, bad),
                 lambda: sharp.sharp_rows("law", "token", BUDGET, bad),
                 lambda: sharp.replica_power([10], [0.1], [0.0], [2], bad),
                 lambda: sharp.predicted_power(rows, [("x", token_verification)], "token", 100,
                                               bad),
                 lambda: sharp.simulated_power(rows, ("x", token_verification), "token", 100,
                                               bad)):
        with pytest.raises(SpectheoryError, match="alpha = .* strictly between 0 and 1") as e:
            call()
        assert "\n" not in str(e.value)


def test_powers_for_no_samples_are_refused_not_nan():
    law = functools.partial(sharp.bonus_law, bug="bonus-previous-row")
    for n in (0, -3, float("nan"), "10"):
        with pytest.raises(SpectheoryError, match="samples = "):
            sharp.predicted_power([ROW], [("b", law)], "token", n, ALPHA)
        with pytest.raises(SpectheoryError, match="samples = "):
            sharp.simulated_power([ROW], ("b", law), "token", n, ALPHA)
    two = [DraftRows(*(torch.cat([x, x]) for x in ROW))]
    with pytest.raises(SpectheoryError, match="fewer than the 2 draft rows"):
        sharp.predicted_power(two, [("b", law)], "token", 1, ALPHA)
    pw = sharp.predicted_power(two, [("b", law)], "token", 2, ALPHA)["b"]
    assert all(math.isfinite(x) for x in (pw.power, pw.tv, pw.noncentrality))


def test_replica_laws_are_user_code(small_pool):
    """A law that raises, or returns something that is not a law, is one UserCodeError line
    naming the replica; a law that is not callable is refused as such."""
    def boom(drafts, q, p):
        raise RuntimeError("kaboom")

    for call in (lambda: sharp.sharp_design([("my-bug", boom)], "token", 600, pool=small_pool),
                 lambda: sharp.predicted_power([ROW], [("my-bug", boom)], "token", 100),
                 lambda: sharp.simulated_power([ROW], ("my-bug", boom), "token", 100)):
        with pytest.raises(UserCodeError, match="replica 'my-bug'.*raised RuntimeError: "
                                                "kaboom") as e:
            call()
        assert "\n" not in str(e.value)
    with pytest.raises(UserCodeError, match="replica 'none'.* returned NoneType, not a Law"):
        sharp.sharp_design([("none", lambda d, q, p: None)], "token", 600, pool=small_pool)
    short = lambda d, q, p: token_verification(d[:, :1], q[:, :1], p[:, :2])  # noqa: E731
    with pytest.raises(UserCodeError, match="replica 'short'.* cells a row"):
        sharp.predicted_power([ROW], [("short", short)], "token", 100)
    for bad in (42, "law", None):
        with pytest.raises(SpectheoryError, match="replica 'x': its law is not callable"):
            sharp.sharp_design([("x", bad)], "token", 600, pool=small_pool)
    with pytest.raises(SpectheoryError, match="its law is not callable"):
        sharp.sharp_design([sharp.Replica("y", 3.0)], "token", 600, pool=small_pool)
    with pytest.raises(SpectheoryError, match="not str"):
        sharp.sharp_design("my-bug", "token", 600, pool=small_pool)
    with pytest.raises(SpectheoryError, match="unknown bonus-path bug"):
        sharp.bonus_replicas("token", ["bonus-elsewhere"])
