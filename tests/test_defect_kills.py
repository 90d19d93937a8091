"""Tests aimed at defects a one-line change can plant and the rest of the suite would miss.

Each section names the defect it catches (the mutants of `scripts/mutation.py`, results in
docs/mutation.md):

* the float checker's verdict `TV <= tol` at its boundaries (tol = 0: p = q must stay lossless),
  the tolerance's range, TV = half the L1 distance on every route, the per-draft route split
  into many chunks;
* law validation on both sides of 1, for stop rows and correction rows, float and exact, with
  negative entries (also tiny ones), NaN and infinities, and the index it names; the K-path
  engine's fast screen refusing what validation refuses;
* node-weight validation of the per-node route (weights in [0, 1], exact and float);
* the chi-square statistics of the sampler checks: degrees of freedom, the size of the test
  (exact null distributions by enumeration of all multinomial outcomes), the Bonferroni family
  and the stated power (simulated, fixed seeds);
* the exact LP certificate check refusing an infeasible dual point with equal objectives.

Statistical assertions use fixed seeds (deterministic); each states the probability that a
correct implementation would fail it under a fresh seed.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy.stats import chi2, ncx2

from spectheory.runtime import backend as B
from spectheory.runtime.errors import SpectheoryError
from spectheory.engine.lossless import (MAX_LOSSLESS_TOL, check_lossless, check_tolerance,
                                        lossless_report)
from spectheory.engine.analysis import analyze
from spectheory.law import ROW_SUM_TOL, LawError, validate_law
from spectheory.engine.nodes import NodeForm, node_verifier, validate_nodes
from spectheory.inputs.random_instances import random_instance
from spectheory.registry import VerifierSpec, get_verifier
from spectheory.testing.statistics import stats
from spectheory.testing.checks.battery import make_instance
from spectheory.verifiers.common import drafted_ratio

F = Fraction


# ----------------------------------------------------------------------------- checker verdict


def test_float_verdict_at_tolerance_zero_is_lossless_for_p_equal_q():
    """Dyadic rows with p = q at every node (prefix-dependent): token and block verification
    accept every draft, every float product is exact, TV = 0.0 exactly, and the verdict at
    tol = 0 is lossless (TV <= tol, not TV < tol)."""
    inst = make_instance("equal", V=3, L=3, seed=1, denominator=8).to_float()
    for name in ("token", "block"):
        rep = check_lossless(name, inst, tol=0.0)
        assert rep.tv == 0.0 and rep.tolerance == 0.0
        assert rep.lossless, rep


def test_float_verdict_boundaries():
    """lossless iff TV <= tol: TV equal to the tolerance is lossless; with the tolerance one ulp
    below the TV it is lossy and names the first sequence whose difference exceeds it; at tol = 0
    the smallest positive TV is lossy."""
    tgt = torch.tensor([0.25, 0.25, 0.25, 0.25], dtype=torch.float64)
    assert lossless_report(tgt.clone(), tgt, 0.0, 2, 2, False, 0.0).lossless
    tol = 2.0**-40  # binary: the differences below are exactly tol
    out = tgt.clone()
    out[1] += tol
    out[3] -= tol
    assert lossless_report(out, tgt, tol, 2, 2, False, tol).lossless
    below = math.nextafter(tol, 0.0)
    rep = lossless_report(out, tgt, tol, 2, 2, False, below)
    assert not rep.lossless and rep.offending == (0, 1) and rep.max_difference == tol
    rep = lossless_report(out, tgt, 5e-324, 2, 2, False, 0.0)  # smallest positive TV at tol 0
    assert not rep.lossless and rep.offending == (0, 1)


def test_checker_tolerance_range():
    """The float tolerance is a finite number in [0, 1e-3]: the bounds pass, just beyond them
    (and 0.5, where a coin-flip law would be called lossless) is refused."""
    assert check_tolerance(0.0) == 0.0 and check_tolerance(MAX_LOSSLESS_TOL) == MAX_LOSSLESS_TOL
    assert MAX_LOSSLESS_TOL == 1e-3
    for bad in (math.nextafter(1e-3, 1.0), 0.5, -1e-300, float("inf"), float("nan")):
        with pytest.raises(SpectheoryError, match="tolerance"):
            check_tolerance(bad)
    inst = make_instance("equal", V=2, L=2, seed=0, denominator=8).to_float()
    with pytest.raises(SpectheoryError, match="tolerance"):
        check_lossless("block", inst, tol=0.5)


def test_exact_verdict_is_exact_equality():
    tgt = np.array([F(1, 4)] * 4, dtype=object)
    out = tgt.copy()
    assert lossless_report(out, tgt, F(0), 2, 2, True).lossless
    out[2] += F(1, 10**30)
    out[3] -= F(1, 10**30)
    rep = lossless_report(out, tgt, F(1, 10**30), 2, 2, True)
    assert not rep.lossless and rep.offending == (1, 0) and rep.tolerance == 0.0


def _token_with_target_correction(state, px, qx, q, p):
    """LOSSY node rule: token verification's acceptance min(1, p/q), but the target row p as the
    correction after a rejection (instead of the residual)."""
    a = B.ones_like(p[:, 0]) if px is None else B.minimum(drafted_ratio(px, qx), 1)
    return None, a, p


LOSSY_NODE = node_verifier(NodeForm(_token_with_target_correction, "forward",
                                    "token acceptance, target-row correction"), "lossy-node")


@pytest.mark.parametrize("exact", [True, False])
def test_tv_is_half_the_l1_distance_on_every_route(exact):
    """TV = (1/2) sum |output - target| on the per-node route (which accumulates it without the
    laws) and on the per-draft route, for a lossy node-form verifier; both routes agree."""
    inst = random_instance(3, 3, 5, denominator=12)
    inst = inst if exact else inst.to_float()
    node = analyze(inst, LOSSY_NODE, route="node")
    draft = analyze(inst, LOSSY_NODE, route="per-draft")
    assert node.route == "node" and draft.route == "per-draft"
    for res in (node, draft):
        half_l1 = sum(abs(a - b) for a, b in zip(res.output_law.tolist(),
                                                  res.target_law.tolist())) / 2
        if exact:
            assert res.tv_to_target == half_l1 > 0
        else:
            assert abs(res.tv_to_target - half_l1) < 1e-15 and half_l1 > 0.01
    if exact:
        assert node.tv_to_target == draft.tv_to_target
        assert node.tau_pmf == draft.tau_pmf
    assert not check_lossless(LOSSY_NODE, inst).lossless


def test_per_draft_route_in_many_chunks_equals_the_node_route(monkeypatch):
    """The per-draft route split into many chunks per context (a tiny chunk size) accumulates
    the tau pmf and the emitted law over the chunks: equal to the per-node route to 1e-15."""
    import spectheory.engine.perdraft as exact_mod

    inst = random_instance(3, 3, 2)
    ref = analyze(inst, "block", route="node")
    monkeypatch.setattr(exact_mod, "CHUNK_ELEMENTS", 8)  # one draft (4 x 3 entries) per chunk
    res = analyze(inst, "block", route="per-draft")
    assert res.route == "per-draft"
    assert max(abs(a - b) for a, b in zip(res.tau_pmf, ref.tau_pmf)) < 1e-15
    assert float(np.abs(res.output_law - ref.output_law).max()) < 1e-15
    assert res.tv_to_target < 1e-15


# ----------------------------------------------------------------------------- law validation

B_, K_, L_, V_ = 2, 2, 2, 3


def _law(exact: bool, torch_arrays: bool = False):
    """A valid K = 2 law: stop [2, 2, 3], correction [2, 2, 3, 3]; entries are multiples of 1/8
    (exact in binary), Fractions in exact mode."""
    stop = [[[1, 1, 0], [2, 3, 1]], [[0, 0, 4], [1, 2, 1]]]  # eighths, each batch row sums to 8
    corr = [[[[1, 3, 4], [8, 0, 0], [2, 2, 4]], [[4, 4, 0], [0, 0, 8], [1, 1, 6]]],
            [[[3, 3, 2], [0, 8, 0], [5, 1, 2]], [[2, 2, 4], [6, 1, 1], [0, 4, 4]]]]
    if exact:
        conv = np.vectorize(lambda v: F(v, 8), otypes=[object])
        return conv(np.array(stop)), conv(np.array(corr))
    s, c = np.array(stop, dtype=np.float64) / 8, np.array(corr, dtype=np.float64) / 8
    if torch_arrays:
        return torch.from_numpy(s), torch.from_numpy(c)
    return s, c


def _validate(law, exact):
    return validate_law(law, B_, K_, L_, V_, exact, name="planted")


@pytest.mark.parametrize("exact,torch_arrays", [(True, False), (False, False), (False, True)])
def test_valid_law_passes(exact, torch_arrays):
    stop, corr = _law(exact, torch_arrays)
    out = _validate((stop, corr), exact)
    assert out.stop is stop and out.correction is corr


#: The entry perturbed in each table (its row: batch row 1 of stop; correction row (0, 1, 2)).
SITES = {"stop": (1, 1, 2), "correction": (0, 1, 2, 1)}


def _perturbed(exact, what, delta, torch_arrays=False):
    stop, corr = _law(exact, torch_arrays)
    arr = stop if what == "stop" else corr
    ix = SITES[what]
    arr[ix] = arr[ix] + delta
    return stop, corr


@pytest.mark.parametrize("what", ["stop", "correction"])
@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("torch_arrays", [False, True])
def test_float_row_sums_both_ways(what, sign, torch_arrays):
    """A stop table or correction row summing to 1 + 1.5 tol or 1 - 1.5 tol is refused, naming
    the row; 1 +- tol/2 passes (the tolerance is |sum - 1| <= tol, on both sides)."""
    kind = "stop-sum" if what == "stop" else "correction-sum"
    with pytest.raises(LawError) as e:
        _validate(_perturbed(False, what, sign * 1.5 * ROW_SUM_TOL, torch_arrays), False)
    ix = SITES[what]
    assert e.value.kind == kind
    assert e.value.where == ((ix[0],) if what == "stop" else ix[:3])
    assert abs(e.value.value - (1 + sign * 1.5 * ROW_SUM_TOL)) < ROW_SUM_TOL / 4
    _validate(_perturbed(False, what, sign * ROW_SUM_TOL / 2, torch_arrays), False)


@pytest.mark.parametrize("what", ["stop", "correction"])
@pytest.mark.parametrize("sign", [1, -1])
def test_exact_row_sums_both_ways(what, sign):
    """Exact mode: any deviation from 1, above or below, however small, is refused."""
    kind = "stop-sum" if what == "stop" else "correction-sum"
    delta = sign * F(1, 10**40)
    with pytest.raises(LawError) as e:
        _validate(_perturbed(True, what, delta), True)
    ix = SITES[what]
    assert e.value.kind == kind
    assert e.value.where == ((ix[0],) if what == "stop" else ix[:3])
    assert e.value.value == 1 + delta


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("what", ["stop", "correction"])
def test_negative_entry_with_unit_sum_is_refused(exact, what):
    """A negative entry is refused even when its row still sums to 1 (mass moved to another
    entry), and the message names the entry."""
    stop, corr = _law(exact)
    one_eighth = F(1, 8) if exact else 0.125
    if what == "stop":  # batch row 1: (0, 0, 4/8 | 1/8, 2/8, 1/8) -> (0, -1/8, 5/8 | ...)
        ix, other = (1, 0, 1), (1, 0, 2)
        arr = stop
    else:  # correction row (0, 1, 0) = (4, 4, 0)/8 -> (5, 4, -1)/8
        ix, other = (0, 1, 0, 2), (0, 1, 0, 0)
        arr = corr
    arr[ix] = arr[ix] - one_eighth
    arr[other] = arr[other] + one_eighth
    with pytest.raises(LawError) as e:
        _validate((stop, corr), exact)
    assert e.value.kind == "negative" and e.value.where == ix
    assert e.value.value == -one_eighth


@pytest.mark.parametrize("what", ["stop", "correction"])
def test_float_tiny_negative_entry_is_refused(what):
    """Negative means below 0, not below -tol: -1e-15 (well inside the row-sum tolerance) is
    refused."""
    stop, corr = _law(False)
    ix = (0, 0, 2) if what == "stop" else (0, 0, 1, 1)
    assert (stop if what == "stop" else corr)[ix] == 0
    (stop if what == "stop" else corr)[ix] = -1e-15
    with pytest.raises(LawError) as e:
        _validate((stop, corr), False)
    assert e.value.kind == "negative" and e.value.where == ix


@pytest.mark.parametrize("bad,kind", [(float("nan"), "nan"), (float("inf"), "inf"),
                                      (-float("inf"), "inf")])
@pytest.mark.parametrize("what", ["stop", "correction"])
@pytest.mark.parametrize("torch_arrays", [False, True])
def test_float_nan_and_inf_are_refused(bad, kind, what, torch_arrays):
    stop, corr = _law(False, torch_arrays)
    ix = (0, 1, 1) if what == "stop" else (1, 0, 2, 1)
    (stop if what == "stop" else corr)[ix] = bad
    with pytest.raises(LawError) as e:
        _validate((stop, corr), False)
    assert e.value.kind == kind and e.value.where == ix


@pytest.mark.parametrize("what", ["stop", "correction"])
def test_float_entry_in_exact_law_is_refused(what):
    stop, corr = _law(True)
    arr = stop if what == "stop" else corr
    ix = (0, 0, 0) if what == "stop" else (0, 0, 0, 0)
    arr[ix] = float(arr[ix])  # same value, wrong type
    with pytest.raises(LawError) as e:
        _validate((stop, corr), True)
    assert e.value.kind == "not-exact" and e.value.where == ix


@pytest.mark.parametrize("exact", [True, False])
def test_wrong_shapes_are_refused(exact):
    stop, corr = _law(exact)
    for law in ((stop[:, :1], corr), (stop, corr[..., :2]), (stop[0], corr)):
        with pytest.raises(LawError) as e:
            _validate(law, exact)
        assert e.value.kind == "shape"


def test_correction_rows_where_tau_has_probability_zero_are_checked():
    """Correction rows are validated at every (k, tau), also where P(tau = i) = 0."""
    stop, corr = _law(True)
    assert stop[1, 0, 0] == 0
    corr[1, 0, 0] = np.array([F(1, 2), F(1, 2), F(1, 2)], dtype=object)
    with pytest.raises(LawError) as e:
        _validate((stop, corr), True)
    assert e.value.kind == "correction-sum" and e.value.where == (1, 0, 0)


def _short_rows(scale):
    """SpecInfer's K-path law (float) with one correction row per chunk scaled by ``scale``."""
    def law(drafts, q, p):
        stop, corr = get_verifier("specinfer").law(drafts, q, p)
        corr = corr.clone()
        corr[0, 1, 1] *= scale
        return stop, corr
    return VerifierSpec("short-rows", law, paths=None, drafting="iid", exact=False)


@pytest.mark.parametrize("scale", [0.99, 1.01, 1 - 4 * ROW_SUM_TOL])
def test_multipath_engine_refuses_correction_rows_off_one_on_both_sides(scale):
    """The joint enumeration's fast screen passes only laws that validate_law accepts: a
    correction row summing to 0.99, 1.01 or 1 - 4e-9 (K = 2 paths, float) is a LawError naming
    the row (batch row 0, path 1, tau = 1)."""
    inst = random_instance(2, 2, 3)
    with pytest.raises(LawError) as e:
        analyze(inst, _short_rows(scale), paths=2, route="enumerate")
    assert e.value.kind == "correction-sum" and e.value.where == (0, 1, 1)


# ----------------------------------------------------------------------------- node weights


def _nodes(exact: bool):
    """Weights [4] in [0, 1] (0 and 1 included) and correction rows [4, 3]."""
    w = [F(0), F(1, 3), F(1), F(2, 3)]
    c = [[F(1, 2), F(1, 2), F(0)], [F(1)] + [F(0)] * 2, [F(1, 3)] * 3, [F(0), F(1, 4), F(3, 4)]]
    if exact:
        return np.array(w, dtype=object), np.array(c, dtype=object)
    return (torch.tensor([float(v) for v in w], dtype=torch.float64),
            torch.tensor([[float(v) for v in r] for r in c], dtype=torch.float64))


@pytest.mark.parametrize("exact", [True, False])
def test_node_weights_in_unit_interval_pass(exact):
    w, c = _nodes(exact)
    validate_nodes(w, c, 1, exact)


@pytest.mark.parametrize("delta,kind", [(F(1, 10**30), "stop-sum"), (F(1, 2), "stop-sum")])
def test_exact_node_weight_above_one_is_refused(delta, kind):
    w, c = _nodes(True)
    w[2] = 1 + delta
    with pytest.raises(LawError) as e:
        validate_nodes(w, c, 2, True, offset=10)
    assert e.value.kind == kind and e.value.where == (12,) and e.value.value == 1 + delta


def test_exact_node_weight_below_zero_is_refused():
    w, c = _nodes(True)
    w[0] = F(-1, 10**30)
    with pytest.raises(LawError) as e:
        validate_nodes(w, c, 0, True)
    assert e.value.kind == "negative" and e.value.where == (0,)


def test_exact_node_correction_rows_both_ways():
    for delta in (F(1, 10**30), -F(1, 10**30)):
        w, c = _nodes(True)
        c[3, 1] += delta
        with pytest.raises(LawError) as e:
            validate_nodes(w, c, 1, True)
        assert e.value.kind == "correction-sum" and e.value.where == (3,)


@pytest.mark.parametrize("value,kind", [(1 + 2 * ROW_SUM_TOL, "stop-sum"), (-1e-300, "negative"),
                                        (float("nan"), "nan"), (float("inf"), "inf")])
def test_float_node_weight_refused(value, kind):
    w, c = _nodes(False)
    w[3] = value
    with pytest.raises(LawError) as e:
        validate_nodes(w, c, 1, False)
    assert e.value.kind == kind and e.value.where[0] == 3


def test_float_node_weight_within_tolerance_passes():
    w, c = _nodes(False)
    w[2] = 1 + ROW_SUM_TOL / 2
    validate_nodes(w, c, 1, False)


@pytest.mark.parametrize("delta", [2 * ROW_SUM_TOL, -2 * ROW_SUM_TOL])
def test_float_node_correction_rows_both_ways(delta):
    w, c = _nodes(False)
    c[1, 0] += delta
    with pytest.raises(LawError) as e:
        validate_nodes(w, c, 1, False)
    assert e.value.kind == "correction-sum" and e.value.where == (1,)


def _over_one_step(state, px, qx, q, p):
    """Forward scan passing every node below the root with probability 5/4 (not a law)."""
    w = np.array([F(1) if px is None else F(5, 4)] * p.shape[0], dtype=object)
    return None, w, p


def test_engine_refuses_an_exact_node_weight_above_one():
    """The per-node route validates node weights before use: a weight of 5/4 gives a LawError,
    not a law with negative stop masses."""
    spec = node_verifier(NodeForm(_over_one_step, "forward", "passes w.p. 5/4"), "over-one")
    inst = random_instance(2, 2, 0, denominator=6)
    with pytest.raises(LawError) as e:
        analyze(inst, spec)
    assert e.value.kind == "stop-sum" and e.value.value == F(5, 4)


# ----------------------------------------------------------------------------- chi-square


def _outcomes(n: int, k: int):
    """Every multinomial outcome of n draws over k cells (stars and bars)."""
    for bars in itertools.combinations(range(n + k - 1), k - 1):
        edges = (-1,) + bars + (n + k - 1,)
        yield [edges[i + 1] - edges[i] - 1 for i in range(k)]


def _exact_null(P, n: int):
    """Exact null law of `row_chi_square` on n draws from P: (probability, RowTest) per outcome."""
    logp = np.log(np.asarray(P, dtype=np.float64))
    out = []
    for o in _outcomes(n, len(P)):
        lp = math.lgamma(n + 1) - sum(math.lgamma(x + 1) for x in o) + float(np.dot(o, logp))
        out.append((math.exp(lp), stats.row_chi_square(np.array(o), np.asarray(P), n)))
    return out


def test_degrees_of_freedom_count_the_bins():
    """dof = bins - 1: cells of expected count >= 5, plus the pooled bin of the small cells
    (appended when its expected count is >= 5, else merged into the smallest cell); cells of
    probability zero are excluded."""
    def dof(P, n):
        return stats.row_chi_square(np.asarray(P) * n, np.asarray(P), n).dof

    assert dof([0.2, 0.3, 0.5], 60) == 2                       # 3 bins
    assert dof([0.1, 0.2, 0.3, 0.4], 100) == 3                 # 4 bins
    assert dof([0.4, 0.4, 0.12, 0.08], 25) == 2                # 10, 10, pooled 3 + 2 = 5
    assert dof([0.5, 0.4, 0.06, 0.04], 25) == 1                # pooled 2.5 merged: 2 bins
    assert dof([0.5, 0.5, 0.0], 100) == 1                      # zero cell excluded
    assert dof([0.98, 0.01, 0.01], 100) == 0                   # one bin: no test
    t = stats.row_chi_square(np.array([30, 30, 40]), np.array([0.2, 0.3, 0.5]), 100)
    assert t.statistic == pytest.approx((30 - 20) ** 2 / 20 + 0 + (40 - 50) ** 2 / 50)
    assert t.p_value == pytest.approx(chi2.sf(t.statistic, 2), rel=1e-12)


#: (cells, samples, dof): a plain table, a table with a pooled bin appended, one with the pooled
#: bin merged into the smallest cell; exact sizes of the nominal 5% test 0.048, 0.058, 0.043.
EXACT_NULLS = [((0.2, 0.3, 0.5), 60, 2), ((0.4, 0.4, 0.12, 0.08), 25, 2),
               ((0.5, 0.4, 0.06, 0.04), 25, 1)]


@pytest.mark.parametrize("P,n,dof", EXACT_NULLS)
def test_size_of_the_row_test_from_the_exact_null(P, n, dof):
    """Exact size P(p-value <= alpha) under the null, from all multinomial outcomes (no
    sampling: no false alarms), within 20% of alpha at alpha = 0.1 and 0.05. Referred to a
    chi-square with one degree of freedom more, a statistic with 1 or 2 dof has size 0.014 or
    0.020 at alpha = 0.05 (0.032 or 0.044 at 0.1); with one less (2 dof), 0.147 (0.259): an
    off-by-one dof fails here."""
    null = _exact_null(P, n)
    assert abs(sum(w for w, _ in null) - 1) < 1e-12
    assert {t.dof for _, t in null} == {dof}
    for alpha in (0.1, 0.05):
        size = sum(w for w, t in null if t.p_value <= alpha)
        assert abs(size - alpha) <= 0.2 * alpha, (alpha, size)
        for wrong in (dof - 1, dof + 1):
            if wrong >= 1:
                assert abs(chi2.sf(chi2.isf(alpha, wrong), dof) - alpha) > 0.4 * alpha


def test_family_combines_rows_by_bonferroni():
    """Adjusted p-value min(1, 2 p_global, 2 m min_b p_b), the global test over the summed
    statistics and degrees of freedom; an impossible outcome gives 0 and names its row."""
    rows = [stats.RowTest(6.0, 3, chi2.sf(6.0, 3), 100, 0, 0.0, 0.0, 0),
            stats.RowTest(1.0, 2, chi2.sf(1.0, 2), 100, 0, 0.0, 0.0, 0),
            stats.RowTest(9.0, 1, chi2.sf(9.0, 1), 100, 0, 0.0, 0.0, 0)]
    fam = stats.family(rows)
    assert fam.dof == 6 and fam.statistic == 16.0 and fam.worst_row == 2
    assert fam.p_value == pytest.approx(min(1.0, 2 * chi2.sf(16.0, 6), 6 * chi2.sf(9.0, 1)),
                                        rel=1e-12)
    rows[1] = rows[1]._replace(impossible=1)
    fam = stats.family(rows)
    assert fam.p_value == 0.0 and fam.worst_row == 1


def test_family_false_alarm_rate_simulated():
    """Three rows under the null, 2,000 families at alpha = 0.1 (seed 0): the alarm rate is at
    most alpha (Bonferroni: the global test at alpha / 2, the rows at alpha / 6) and close to
    what the two tests give together (0.067, from 20,000 families). A correct implementation
    fails the bounds [0.045, 0.09] with probability below 1e-3 (binomial tails at 2,000 runs);
    without the split of alpha the rate is about 0.13."""
    rng = np.random.default_rng(0)
    P = [np.array(r) for r in ((0.2, 0.3, 0.5), (0.1, 0.2, 0.3, 0.4), (0.25, 0.25, 0.5))]
    n, runs, alpha = 200, 2000, 0.1
    alarms = 0
    for _ in range(runs):
        tests = [stats.row_chi_square(rng.multinomial(n, r), r, n) for r in P]
        alarms += stats.family(tests).p_value < alpha
    assert 0.045 * runs <= alarms <= 0.09 * runs, alarms


def test_stated_power_matches_simulation():
    """One row whose bias moves exactly half of the mass (the least-favourable direction, where
    the stated non-centrality 4 n delta^2 is attained): at delta = min_detectable_tv the stated
    power is 0.9 and 2,000 simulated runs (seed 1) reject 0.87-0.93 of the time (0.903 from
    30,000 runs; a correct implementation fails this with probability about 1e-5, binomial sd
    0.0066); at delta / 2 the stated power 0.267 (0.262 from 30,000 runs) is matched within 0.04
    (failure probability below 1e-3). Off by one degree of freedom the rejection rate at delta
    moves to 0.84 or 0.95."""
    P = np.array([0.2, 0.3, 0.1, 0.4])
    half = np.array([True, True, False, False])  # mass exactly 1/2
    n, alpha, runs = 500, 0.05, 2000
    rng = np.random.default_rng(1)
    t = stats.row_chi_square(rng.multinomial(n, P), P, n)
    assert t.dof == 3
    delta = stats.min_detectable_tv([t], alpha)
    assert stats.family_power(delta, [t], alpha) == pytest.approx(0.9, abs=1e-4)
    lam = 4 * n * delta**2
    assert stats.family_power(delta, [t], alpha) == pytest.approx(
        ncx2.sf(chi2.isf(alpha / 2, 3), 3, lam), rel=1e-9)
    for d, tol in ((delta, 0.03), (delta / 2, 0.04)):
        moved = np.where(half, P * (1 + 2 * d), P * (1 - 2 * d))
        counts = rng.multinomial(n, moved, size=runs)
        rate = np.mean([stats.family([stats.row_chi_square(c, P, n)]).p_value < alpha
                        for c in counts])
        assert abs(rate - stats.family_power(d, [t], alpha)) <= tol, (d, rate)


def test_stated_power_of_rows_of_unequal_size():
    """Two rows (dof 1 with n = 400; dof 30 with n = 310): the per-row tests at alpha / (2 m)
    carry the family's power here (the global test, diluted over 31 dof, has 0.69). The stated
    power equals the formula max(global, 1 - prod_b (1 - power_b)) with the per-row critical
    values at alpha / (2 m), and it is a lower bound: 2,000 simulated families (seed 2) at
    delta = min_detectable_tv reject at least 0.885 of the time (expected 0.93; a correct
    implementation fails with probability below 1e-9). Critical values at alpha / 2 would state
    0.94 at this delta, and the smaller delta they report is caught only 0.87 of the time."""
    alpha, nA, nB = 0.05, 400, 310
    PA, PB = np.array([0.5, 0.5]), np.full(31, 1 / 31)
    rng = np.random.default_rng(2)
    tests = [stats.row_chi_square(rng.multinomial(nA, PA), PA, nA),
             stats.row_chi_square(rng.multinomial(nB, PB), PB, nB)]
    assert [t.dof for t in tests] == [1, 30]
    delta = stats.min_detectable_tv(tests, alpha)
    lam = np.array([4 * nA * delta**2, 4 * nB * delta**2])
    dofs = np.array([1, 30])
    glob = ncx2.sf(chi2.isf(alpha / 2, 31), 31, lam.sum())
    rows = 1 - np.prod(1 - ncx2.sf(chi2.isf(alpha / 4, dofs), dofs, lam))
    assert glob < 0.7 < rows
    assert stats.family_power(delta, tests, alpha) == pytest.approx(max(glob, rows), rel=1e-9)
    assert stats.family_power(delta, tests, alpha) == pytest.approx(0.9, abs=1e-4)
    half = np.arange(31) < 15  # least favourable on row A; close to it on row B
    mB = PB[half].sum()
    runs, caught = 2000, 0
    for _ in range(runs):
        a = rng.multinomial(nA, [0.5 + delta, 0.5 - delta])
        b = rng.multinomial(nB, np.where(half, PB * (1 + delta / mB), PB * (1 - delta / (1 - mB))))
        fam = stats.family([stats.row_chi_square(a, PA, nA), stats.row_chi_square(b, PB, nB)])
        caught += fam.p_value < alpha
    assert caught >= 0.885 * runs, caught


# ----------------------------------------------------------------------------- LP certificates


def _tiny_lp():
    """maximise x1 + (3/2) x2 s.t. x1 + x2 <= 1, x1 <= 1, x >= 0 (optimum 3/2 at x = (0, 1))."""
    from spectheory.lp.sparse import SparseLP, concat_blocks

    one = F(1)
    ub = concat_blocks([(np.array([0, 0, 1]), np.array([0, 1, 0]),
                         np.array([one, one, one], dtype=object),
                         np.array([one, one], dtype=object))], True)
    empty = concat_blocks([], True)
    return SparseLP(2, np.array([one, F(3, 2)], dtype=object), ub, empty)


def test_exact_certificate_refuses_a_dual_point_that_is_infeasible():
    """The optimal pair (x = (0, 1), lambda = (3/2, 0)) is accepted with optimum 3/2. The
    non-optimal x = (1, 0) with lambda = (1, 0) has equal objectives (1 = 1), but lambda misses
    the dual row of x2 (lambda_1 >= 3/2) by 1/2: refused, so 1 is never certified."""
    from spectheory.lp import LPError

    lp = _tiny_lp()
    empty = np.zeros(0, dtype=object)
    assert lp.check_certificate([F(0), F(1)], empty, [F(3, 2), F(0)]) == F(3, 2)
    with pytest.raises(LPError, match="dual constraint"):
        lp.check_certificate([F(1), F(0)], empty, [F(1), F(0)])
    with pytest.raises(LPError, match="negative"):
        lp.check_certificate([F(0), F(1)], empty, [F(2), F(-1, 2)])
    with pytest.raises(LPError, match="inequality row"):
        lp.check_certificate([F(1), F(1, 2)], empty, [F(3, 2), F(0)])
