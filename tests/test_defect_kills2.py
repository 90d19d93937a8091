"""Tests aimed at one-line defects that a wrong number would carry to a user silently.

Each test names the defect it kills (a one-line change of the code it tests):

* the exact node-budget certificate accepting a primal-dual pair whose objectives differ
  (``gap == 0`` dropped from the verdict, `spectheory.lp.certificate`);
* the sweep's per-process instance cache keyed without ``exact`` (a float instance handed to an
  exact job, `spectheory.sweep.jobs._deep_build`);
* ``--retry-failed`` inverted (cached failures rerun without it, or kept with it);
* the LP trust report naming the loosest lower bound (or upper) as the tightest
  (`spectheory.lp.trust.checked`);
* the tie rule of the minimising set of `spectheory.bounds.optimal_acceptance` (the last
  minimiser instead of the first), which changes Global Resolution's H* and with it its exact
  acceptance;
* the tie rule of SpecHub's hub in the coverage bound (`spectheory.lp.trust.hub_coverage`: the
  largest id instead of the smallest);
* Khisti's leftover selection mass split over the multiset S instead of its distinct tokens
  (the selection weights then sum to less than 1 while the output law stays p).

Every instance here has prefix-dependent rows and ties; every value is exact.
"""

from __future__ import annotations

import csv
import textwrap
from fractions import Fraction as F

import numpy as np
import pytest

import spectheory as st
from cli_helpers import run, write
from spectheory.inputs.instances import instance_from_dict

#: V = 3, L = 2, prefix-dependent, with ties in the draft's root row (2/5, 2/5, 1/5) and in
#: rows below it.
TIES3 = {"vocab_size": 3, "block_length": 2,
         "target": {"": ["1/3", "1/3", "1/3"], "0": ["1/2", "1/4", "1/4"],
                    "1": ["1/5", "2/5", "2/5"], "2": ["1", "0", "0"],
                    **{f"{a},{b}": (["1/3", "1/3", "1/3"] if (a + b) % 2 else ["1/2", "0", "1/2"])
                       for a in range(3) for b in range(3)}},
         "draft": {"": ["2/5", "2/5", "1/5"], "0": ["1/4", "1/4", "1/2"],
                   "1": ["1/3", "1/3", "1/3"], "2": ["0", "1/2", "1/2"]}}


# ----------------------------------------------------------------------------- LP certificate


class _ShiftedWhere:
    """numpy, except that ``where`` adds ``shift``: the certificate's dual multipliers alpha and
    beta (its two ``np.where`` calls) are all raised by ``shift``. The raised point is still
    dual feasible (every dual row gains slack), so only the objective gap can refuse it."""

    def __init__(self, shift):
        self.shift = shift

    def __getattr__(self, name):
        return getattr(np, name)

    def where(self, cond, a, b):
        return np.where(cond, a, b) + self.shift


@pytest.mark.parametrize("exact", [True, False])
def test_certificate_refuses_a_feasible_pair_with_a_duality_gap(monkeypatch, exact):
    """Kills: the certificate's verdict without ``gap == 0`` (exact) / ``gap <= tol`` (float)."""
    from spectheory.lp import certificate

    inst = instance_from_dict(TIES3, exact=True)
    honest = certificate.certify_node_budget(inst, exact=exact)
    assert honest.certified and honest.objective_gap == 0 or \
        (not exact and honest.certified and honest.objective_gap <= 1e-12)
    monkeypatch.setattr(certificate, "np", _ShiftedWhere(F(1, 1000) if exact else 1e-3))
    cert = certificate.certify_node_budget(inst, exact=exact)
    # every row holds (the pair is feasible; in float64 within rounding) ...
    slack = 0 if exact else 1e-15
    assert cert.max_equality_residual <= slack and cert.max_budget_violation <= slack
    assert cert.max_monotone_violation <= slack and cert.min_dual_slack >= -slack
    assert cert.min_multiplier > 0
    # ... the objectives differ, and the gap alone refuses it
    assert cert.objective_gap > 0.0005
    assert cert.certified is False
    assert "NOT certified" in cert.summary()


# ----------------------------------------------------------------------------- sweep jobs


def test_instance_cache_of_a_process_keeps_exact_and_float_apart():
    """Kills: `_deep_build`'s key without ``exact``. A float job and then an exact job on the
    same truncated family in one process: the exact row is the exact value of the exact
    instance (denominator 1000), not the float instance's rounding."""
    from spectheory.sweep import jobs
    from spectheory.sweep.config import Job

    jobs._BUILT.clear()
    knobs = (("truncate_from", 2),)

    def job(exact):
        return Job("random", 3, 1, 5, knobs, "verifier", "block", 1, None, None, exact,
                   60.0, 0)

    float_row = jobs.compute(job(False))
    exact_row = jobs.compute(job(True))
    deep = st.random_instance(3, 2, 5, denominator=1000)
    from dataclasses import replace

    want = st.analyze(replace(deep, block_length=1), "block", exact=True).block_efficiency
    assert F(exact_row["value_exact"]) == want
    assert float_row["value_exact"] == ""
    assert F(exact_row["value_exact"]).denominator <= 1000**3
    jobs._BUILT.clear()


def test_retry_failed_reruns_cached_failures_only(tmp_path, capsys, monkeypatch):
    """Kills: ``--retry-failed`` inverted. A verifier that fails until a file exists: without
    the option the cached failure is kept (not run again), with it the failure is run again and
    the ok row is never rerun."""
    flag, runs = tmp_path / "ready", tmp_path / "runs.log"
    (tmp_path / "flakyver.py").write_text(textwrap.dedent(f"""
        import os
        from spectheory.verifiers.token import token_verification

        def law(drafts, q, p, name):
            with open({str(runs)!r}, "a") as fh:
                fh.write(f"{{name}}\\n")
            if name == "flaky" and not os.path.exists({str(flag)!r}):
                raise RuntimeError("not ready")
            return token_verification(drafts, q, p)

        def steady(drafts, q, p):
            return law(drafts, q, p, "steady")

        def flaky(drafts, q, p):
            return law(drafts, q, p, "flaky")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = write(tmp_path, '[[instances]]\nfamily = "random"\nvocab = 2\nblock = 1\n'
                          '[[verifiers]]\nname = ["flakyver:steady", "flakyver:flaky"]\n',
                "s.toml")
    out = str(tmp_path / "out")

    def sweep(*extra):
        code, stdout, _ = run(["sweep", cfg, "--out", out, "--no-progress", "--workers", "1",
                               *extra], capsys)
        rows = {r["name"]: r["status"] for r in csv.DictReader(open(f"{out}/results.csv"))}
        return code, rows

    def ran():  # the jobs that called their law (once or more each)
        return sorted(set(runs.read_text().split())), runs.read_text().count("flaky")

    both = {"flakyver:steady": "ok", "flakyver:flaky": "failed"}
    assert sweep() == (1, both)
    flaky_runs = ran()[1]
    assert ran() == (["flaky", "steady"], flaky_runs) and flaky_runs >= 1
    flag.write_text("")
    steady_lines = runs.read_text().count("steady")
    assert sweep() == (1, both)  # cached failure kept
    assert runs.read_text().count("flaky") == flaky_runs  # nothing ran again
    assert sweep("--retry-failed") == (0, {"flakyver:steady": "ok", "flakyver:flaky": "ok"})
    assert runs.read_text().count("flaky") > flaky_runs  # the failure ran again
    assert runs.read_text().count("steady") == steady_lines  # the ok row did not


# ----------------------------------------------------------------------------- LP trust


def test_trust_report_names_the_tightest_bounds():
    """Kills: the tightest lower bound taken as the smallest (or the upper as the largest)."""
    from spectheory.lp.result import LPResult
    from spectheory.lp.trust import Bound, checked

    bounds = [Bound("lower", F(12, 10), "a"), Bound("upper", F(3), "L + 1"),
              Bound("lower", F(15, 10), "tightest lower"), Bound("upper", F(26, 10), "tight"),
              Bound("lower", F(14, 10), "c")]
    res = checked(LPResult("direct", 2, F(2), "exact", "optimal", 1, 1, 0.0), bounds)
    assert res.details["bounds"]["lower"].source == "tightest lower"
    assert res.details["bounds"]["upper"].value == F(26, 10)
    # and on a solved LP, whose lower bounds differ (block verification < SpecInfer)
    from spectheory.lp import direct_lp

    r = direct_lp(st.random_instance(3, 2, 4, denominator=12), 2, exact=True)
    lows = [b.value for b in r.details["bounds"]["checked"] if b.side == "lower"]
    ups = [b.value for b in r.details["bounds"]["checked"] if b.side == "upper"]
    assert len(set(map(float, lows))) >= 2
    assert r.details["bounds"]["lower"].value == max(lows)
    assert r.details["bounds"]["upper"].value == min(ups)


# ----------------------------------------------------------------------------- tie rules


def test_optimal_acceptance_returns_the_first_minimising_set():
    """Kills: ``val <= best`` in either scheme's search (the last minimiser). For p = q uniform
    on 3 tokens and K = 2, psi ties at H = {} and H = all tokens; H* = {}."""
    from spectheory.bounds import optimal_acceptance

    u = [F(1, 3)] * 3
    assert optimal_acceptance(u, u, 2, "iid") == (1, ())
    assert optimal_acceptance(u, u, 2, "norep") == (1, ())
    # p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4), K = 1: the threshold sets {1} and {1, 2} tie
    p, q = [F(1, 2), F(1, 4), F(1, 4)], [F(1, 4), F(1, 2), F(1, 4)]
    assert optimal_acceptance(p, q, 1, "iid") == (F(3, 4), (1,))


def test_global_resolution_is_exactly_lossless_with_full_acceptance_on_a_tie():
    """The tie rule is what the user sees in Global Resolution: with H* = {} every draft set is
    outer and accepted, so the acceptance is exactly 1 (with H* = all tokens the Newton
    solution leaves an optimiser error of about 1e-13 and the acceptance is below 1)."""
    from spectheory.verifiers.global_resolution import global_resolution_plan

    u = [F(1, 3)] * 3
    plan = global_resolution_plan(u, u, 2, "iid")
    assert plan.stats["H"] == () and plan.stats["acceptance"] == 1
    assert all(r == 0 for r in plan.reject.values())


def test_hub_coverage_takes_the_smallest_id_among_tied_hubs():
    """Kills: the hub as the largest id among ties. Root draft row (2/5, 2/5, 1/5): the hub is
    token 0, drafted surely; token 1 with probability (2/5)/(3/5) = 2/3; the closed form equals
    the coverage of the enumerated hub drafts, and so does the bound the LP is checked against."""
    from spectheory.lp.direct import draft_outcomes
    from spectheory.lp.node_budget import _tables
    from spectheory.lp.trust import greedy_value, hub_coverage, outcome_coverage, paths_bounds

    inst = instance_from_dict(TIES3, exact=True)
    _, Q = _tables(inst, True)
    C = hub_coverage(Q, 2, 3)
    assert list(C[1]) == [1, F(2, 3), F(1, 3)]
    ref = outcome_coverage(*draft_outcomes(Q, 3, 2, 2, "hub", True), 3, 2)
    for j in (1, 2):
        assert list(C[j]) == list(ref[j])
    p_levels = [np.asarray(inst.target.level(j)) for j in range(3)]
    (cover,) = [b for b in paths_bounds(inst, 2, "hub", True, "direct", [])
                if b.source.startswith("coverage bound")]
    assert cover.value == greedy_value(p_levels, ref, 2)


# ----------------------------------------------------------------------------- Khisti


def test_khisti_selection_weights_sum_to_one_over_distinct_tokens():
    """Kills: the leftover supply of an outcome split over the multiset S instead of its
    distinct tokens. q = (3/4, 1/4), p = (1/4, 3/4), m = 2: the outcome (0, 0) (probability
    9/16) can send only 1/4 to token 0, so 5/16 is left over and must go to its one distinct
    token: beta_0((0, 0)) = 1 (not 13/18). The law of the selected token sums to 1."""
    from spectheory.verifiers.khisti import khisti_plan

    q, p = [F(3, 4), F(1, 4)], [F(1, 4), F(3, 4)]
    plan = khisti_plan(q, p, 2, "iid")
    beta = plan.stats["selection"]
    assert beta[(0, 0)] == {0: 1}
    for S, weights in beta.items():
        assert sum(weights.values()) == 1 and all(w >= 0 for w in weights.values()), S
        assert set(weights) == set(S)
    assert sum(plan.stats["q_selected"]) == 1
    # three candidates, a tie in q and an outcome (1, 1, 2) with a repeated token
    q3, p3 = [F(1, 5), F(2, 5), F(2, 5)], [F(3, 5), F(1, 5), F(1, 5)]
    plan3 = khisti_plan(q3, p3, 3, "iid")
    for S, weights in plan3.stats["selection"].items():
        assert sum(weights.values()) == 1, S
    assert sum(plan3.stats["q_selected"]) == 1
