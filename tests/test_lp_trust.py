"""LP answers are right or refused: sweeps over the number of paths K (where badly scaled
multinomial weights once made HiGHS call feasible LPs infeasible), the independent bounds every
answer is checked against (`spectheory.lp.trust`), the float certificate of every HiGHS / cvxpy
point, and clean one-line refusals (planted wrong values, a failing solver, cvxpy missing)."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import sys
from fractions import Fraction

import numpy as np
import pytest

import spectheory as st
from cli_helpers import run as run_cli
from spectheory.cli import main
from spectheory.bounds import full_acceptance_possible, optimal_acceptance
from spectheory.runtime.errors import MissingExtraError, SpectheoryError
from spectheory.inputs.instances import instance_from_dict, load_instance
from spectheory.lp import LPError, coupling_lp, direct_lp, multipath_lp, node_budget_lp
from spectheory.lp import sparse
from spectheory.lp.direct import build_direct_outcomes, draft_outcomes
from spectheory.lp.node_budget import _tables
from spectheory.lp.selection import selection_lp
from spectheory.lp.tree import tree_lp
from spectheory.lp.trust import UntrustedLPError

#: Prefix-dependent rows with ties (p = q at the root, equal entries) and zeros (the draft never
#: drafts "1,1", so full acceptance is impossible at every K).
TIES = {"vocab_size": 2, "block_length": 2,
        "target": {"": ["1/2", "1/2"], "0": ["1/3", "2/3"], "1": ["1/2", "1/2"],
                   "0,0": ["1", "0"], "0,1": ["1/4", "3/4"], "1,0": ["1/2", "1/2"],
                   "1,1": ["0", "1"]},
        "draft": {"": ["1/2", "1/2"], "0": ["2/3", "1/3"], "1": ["1", "0"]}}
TOL = 1e-6


@pytest.fixture(scope="module")
def v2_file(tmp_path_factory):
    """`spectheory instance random --vocab 2 --block 2 --seed 1`: at K = 9..20 paths HiGHS once
    reported this direct LP failed or infeasible."""
    path = tmp_path_factory.mktemp("lp_trust") / "v2.json"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["instance", "random", "--vocab", "2", "--block", "2", "--seed", "1"]) == 0
    path.write_text(out.getvalue())
    return str(path)


def path_level(inst):
    """(p, q) over the V^L sequences: the target's and the draft's laws of the first L tokens."""
    p_levels, Q = _tables(inst, inst.exact)
    p = np.ones(1, dtype=object if inst.exact else np.float64)
    for j in range(inst.block_length):
        p = (p[:, None] * p_levels[j]).reshape(-1)
    return list(p), list(Q[inst.block_length])


def inside(inst, K: int, drafting: str, T: set):
    """P(every drafted path lies in T): q(T)^K for i.i.d. paths; without replacement, the
    ordered draws of min(K, m) distinct first tokens f (m of positive probability), each path
    continued from q, so a product of q(T_f | f)."""
    p, q = path_level(inst)
    if drafting == "iid":
        return sum(q[x] for x in T) ** K
    V, L = inst.vocab_size, inst.block_length
    root = [sum(q[x] for x in range(V**L) if x // V ** (L - 1) == f) for f in range(V)]
    within = [sum(q[x] for x in T if x // V ** (L - 1) == f) / root[f] if root[f] else 0
              for f in range(V)]
    support = [f for f in range(V) if root[f]]
    total = 0
    for firsts in itertools.permutations(support, min(K, len(support))):
        w, used = 1, 0
        for f in firsts:
            w, used = w * root[f] / (1 - used) * within[f], used + root[f]
        total += w
    return total


def full_acceptance(inst, K: int, drafting: str = "iid") -> bool:
    """Every block can be accepted in full iff some drafted path can be chosen with the target's
    law of L tokens (the bonus token then follows p): by Strassen's theorem (Hall's, for these
    finite sets), iff p(T) >= P(every drafted path in T) for every set T of length-L sequences;
    for i.i.d. paths that is `full_acceptance_possible` on the path-level laws."""
    p, q = path_level(inst)
    if drafting == "iid":
        return full_acceptance_possible(p, q, K)[0]
    N = len(p)
    return all(sum(p[x] for x in T) >= inside(inst, K, drafting, set(T)) - 1e-12
               for r in range(1, N + 1) for T in itertools.combinations(range(N), r))


def assert_sweep(inst, Ks, solve, drafting="iid", expect_all=True):
    """Every answer lies in [block verification, L + 1] (equal to L + 1 exactly where full
    acceptance is possible, clearly below where it is not) and is nondecreasing in K; a refusal
    is a one-line LPError that never calls the LP infeasible."""
    L = inst.block_length
    block = float(st.analyze(inst, "block").block_efficiency)
    values = {}
    for K in Ks:
        try:
            res = solve(inst, K)
        except LPError as exc:
            assert "\n" not in str(exc) and "numerical failure" in str(exc), str(exc)
            assert not expect_all, (K, str(exc))
            continue
        opt = float(res.optimum)
        assert block - TOL <= opt <= L + 1 + TOL, (K, opt)
        if full_acceptance(inst, K, drafting):
            assert opt == pytest.approx(L + 1, abs=TOL), K
        else:
            assert opt < L + 1 - 1e-4, (K, opt)
        bounds = res.details["bounds"]
        assert bounds["lower"].value - TOL <= opt <= bounds["upper"].value + TOL
        values[K] = opt
    ks = sorted(values)
    assert all(values[a] <= values[b] + TOL for a, b in zip(ks, ks[1:])), values
    return values


def test_direct_sweep_v2_every_K_to_20(v2_file):
    inst = load_instance(v2_file)
    vals = assert_sweep(inst, range(1, 21), lambda i, K: direct_lp(i, K))
    assert all(vals[K] == pytest.approx(3.0, abs=TOL) for K in range(8, 21))
    assert vals[1] == pytest.approx(float(st.analyze(inst, "block").block_efficiency), abs=1e-7)


def test_selection_and_norep_sweeps_v2(v2_file):
    inst = load_instance(v2_file)
    sel = assert_sweep(inst, range(1, 21), lambda i, K: selection_lp(i, K))
    assert_sweep(inst, range(1, 21), lambda i, K: direct_lp(i, K, drafting="norep"), "norep")
    for K in (2, 5, 13):  # the selection class is inside the direct LP's
        assert sel[K] <= direct_lp(inst, K).optimum + TOL


def test_sweeps_on_prefix_dependent_rows_with_ties():
    exact = instance_from_dict(TIES, exact=True)
    inst = exact.to_float()
    assert not any(full_acceptance(inst, K) for K in (1, 20))  # q never drafts "1,1"
    d = assert_sweep(inst, range(1, 21), lambda i, K: direct_lp(i, K))
    s = assert_sweep(inst, range(1, 21), lambda i, K: selection_lp(i, K))
    assert_sweep(inst, range(1, 21), lambda i, K: direct_lp(i, K, drafting="norep"), "norep")
    # exactly, where cheap: 31/12 (block verification), then 49/18, then the coverage limit 11/4
    ex = [direct_lp(exact, K, exact=True).optimum for K in range(1, 6)]
    assert ex == [Fraction(31, 12), Fraction(49, 18)] + [Fraction(11, 4)] * 3
    assert ex[0] == st.analyze(exact, "block").block_efficiency
    for K, v in enumerate(ex, 1):
        assert float(v) == pytest.approx(d[K], abs=1e-7) and s[K] <= float(v) + TOL


@pytest.mark.parametrize("inst", [st.random_instance(3, 2, 0),
                                  st.random_instance(3, 2, 4, denominator=4)],
                         ids=["seed0", "ties-denominator-4"])
def test_three_token_sweeps_to_K6(inst):
    d = assert_sweep(inst, range(1, 7), lambda i, K: direct_lp(i, K))
    s = assert_sweep(inst, range(1, 7), lambda i, K: selection_lp(i, K))
    assert_sweep(inst, range(1, 7), lambda i, K: direct_lp(i, K, drafting="norep"), "norep")
    assert all(s[K] <= d[K] + TOL for K in d)


def test_one_token_blocks_equal_the_closed_form():
    """L = 1: the direct LP is Hu et al.'s alpha* (`optimal_acceptance`, i.i.d. and without
    replacement), exactly 2 where `full_acceptance_possible` says so."""
    inst = st.random_instance(3, 1, 7, denominator=6)
    p, q = list(inst.target.level(0)[0]), list(inst.draft.level(0)[0])
    for K in range(1, 7):
        for drafting in ("iid", "norep"):
            alpha, _ = optimal_acceptance(p, q, K, drafting)
            assert direct_lp(inst.to_float(), K, drafting=drafting).optimum == \
                pytest.approx(1 + float(alpha), abs=1e-7)
        assert (direct_lp(inst.to_float(), K).optimum > 2 - 1e-7) == \
            full_acceptance_possible(p, q, K)[0]


def test_cli_prints_three_for_K_8_to_20(capsys, v2_file):
    for K in range(8, 21):
        code, out, err = run_cli(["lp", v2_file, "--problem", "direct", "--paths", str(K),
                                  "--json"], capsys)
        assert code == 0, err
        assert json.loads(out)["optimum"] == pytest.approx(3.0, abs=TOL)
    code, out, _ = run_cli(["lp", v2_file, "--problem", "direct", "--paths", "9"], capsys)
    assert code == 0 and "optimum E[tau+1] = 3.0000000000" in out and "dual bound" in out


def test_presolve_failure_falls_back_and_is_certified(v2_file):
    """The unmerged multiset LP at K = 10 (weights q(x)^10 down to 5e-16 in one row): whatever
    HiGHS' presolve makes of it, the answer is the optimum 3, with a closed certificate."""
    inst = load_instance(v2_file)
    p_levels, Q = _tables(inst, False)
    combos, prob = draft_outcomes(Q, 2, 2, 10, "iid", False, merge=False)
    assert len(combos) == 286
    lp, _ = build_direct_outcomes(inst, combos, prob, False, p_levels)
    _, opt, _, _ = lp.solve()
    assert opt == pytest.approx(3.0, abs=TOL)
    cert = lp.last_certificate
    assert cert["residual"] <= sparse.PRIMAL_TOL and abs(cert["gap"]) <= sparse.GAP_TOL * 3


def test_merged_outcomes_keep_the_law(v2_file):
    inst = load_instance(v2_file)
    _, Q = _tables(inst, False)
    combos, prob = draft_outcomes(Q, 2, 2, 20, "iid", False)
    assert len(combos) == 15 and prob.sum() == pytest.approx(1.0, abs=1e-14)
    raw, rprob = draft_outcomes(Q, 2, 2, 20, "iid", False, merge=False)
    for key, w in zip(combos.tolist(), prob):  # P(distinct paths = S), summed over multisets
        members = [r for r, row in zip(rprob, raw.tolist()) if set(row) == set(key)]
        assert w == pytest.approx(sum(members), rel=1e-12)


# ---------------------------------------------------------------- planted bugs


def _shift_solve(monkeypatch, delta, calls=None):
    """Plant a solver that reports its optimum shifted by ``delta`` (on the first ``calls``
    solves only, when given)."""
    real = sparse.SparseLP.solve
    count = itertools.count()

    def wrong(self, solver=None, certify=True):
        x, opt, status, name = real(self, solver, certify)
        return x, (opt + delta if calls is None or next(count) < calls else opt), status, name

    monkeypatch.setattr(sparse.SparseLP, "solve", wrong)


@pytest.mark.parametrize("problem", ["node-budget", "direct", "selection", "tree", "multipath",
                                     "coupling"])
def test_every_route_refuses_a_value_above_L_plus_1(monkeypatch, problem):
    inst = st.random_instance(2, 2, 3)
    solve = {"node-budget": lambda: node_budget_lp(inst),
             "direct": lambda: direct_lp(inst, 2), "selection": lambda: selection_lp(inst, 2),
             "tree": lambda: tree_lp(inst, (2, 1), "iid"),
             "multipath": lambda: multipath_lp(inst, 2), "coupling": lambda: coupling_lp(inst)}
    assert float(solve[problem]().optimum) <= 3.0
    _shift_solve(monkeypatch, 1.5)
    with pytest.raises(UntrustedLPError, match="above the upper bound") as err:
        solve[problem]()
    assert "\n" not in str(err.value)


def test_exact_route_refuses_a_wrong_certificate(monkeypatch):
    import spectheory.lp.direct as D

    inst = st.random_instance(2, 2, 3, denominator=8)
    monkeypatch.setattr(D, "solve_exact_via_highs", lambda lp: (Fraction(1, 2), "rounded"))
    with pytest.raises(UntrustedLPError, match="below the lower bound"):
        direct_lp(inst, 2, exact=True)


def test_value_below_the_K_minus_1_optimum_is_refused(monkeypatch, v2_file):
    """At K = 10 the optimum is 3 (= L + 1); a solver 0.005 short stays above block verification
    and SpecInfer, and only the comparison with K - 1 = 9 paths catches it."""
    inst = load_instance(v2_file)
    _shift_solve(monkeypatch, -0.005, calls=1)
    with pytest.raises(UntrustedLPError, match="K - 1 = 9 paths") as err:
        direct_lp(inst, 10)
    assert "below the lower bound 3" in str(err.value)


def test_cli_refuses_a_planted_wrong_value(monkeypatch, capsys, v2_file):
    _shift_solve(monkeypatch, 0.25)
    code, out, err = run_cli(["lp", v2_file, "--problem", "direct", "--paths", "12"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "above the upper bound 3" in err and "L + 1" in err


def test_uncertified_points_are_refused(monkeypatch):
    """HiGHS' points nudged off the optimum (x 1.01): the float certificate fails on every
    attempt and the solve is refused, naming why."""
    import scipy.optimize

    real = scipy.optimize.linprog

    def nudged(*args, **kwargs):
        res = real(*args, **kwargs)
        if res.x is not None:
            res.x = res.x * 1.01
        return res

    monkeypatch.setattr(scipy.optimize, "linprog", nudged)
    with pytest.raises(LPError, match="no trustworthy optimum") as err:
        direct_lp(st.random_instance(2, 2, 3), 2)
    assert str(err.value).count("not certified") == len(sparse.HIGHS_ATTEMPTS)


def test_a_solver_that_calls_the_lp_infeasible_is_a_clean_refusal(monkeypatch, capsys, v2_file):
    import scipy.optimize

    real = scipy.optimize.linprog

    def infeasible(*args, **kwargs):
        res = real(*args, **kwargs)
        res.status, res.x, res.message = 2, None, "The problem is infeasible."
        return res

    monkeypatch.setattr(scipy.optimize, "linprog", infeasible)
    code, out, err = run_cli(["lp", v2_file, "--problem", "direct", "--paths", "9"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "numerical failure" in err and "not an infeasible problem" in err
    assert not err.startswith("spectheory: error: HiGHS: the LP is infeasible")


def test_cvxpy_missing_is_one_line(monkeypatch, capsys, v2_file):
    monkeypatch.setitem(sys.modules, "cvxpy", None)  # import cvxpy raises ImportError
    with pytest.raises(MissingExtraError, match=r"spectheory\[cvxpy\]"):
        direct_lp(load_instance(v2_file), 2, solver="cvxpy")
    assert issubclass(MissingExtraError, SpectheoryError)
    code, out, err = run_cli(["lp", v2_file, "--problem", "direct", "--paths", "10", "--solver",
                              "cvxpy"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "install spectheory[cvxpy]" in err


def test_cvxpy_failures_are_one_line(monkeypatch, capsys, v2_file):
    cp = pytest.importorskip("cvxpy")

    def broken(self, *args, **kwargs):
        raise ValueError("Cannot unpack invalid solution: Solution(status=UNKNOWN,\n ...)")

    monkeypatch.setattr(cp.Problem, "solve", broken)
    code, out, err = run_cli(["lp", v2_file, "--problem", "direct", "--paths", "10", "--solver",
                              "cvxpy"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "Cannot unpack invalid solution" in err and "numerical failure" in err


def test_cvxpy_route_is_certified_and_quiet(capfd, v2_file):
    pytest.importorskip("cvxpy")
    code, out, err = run_cli(["lp", v2_file, "--problem", "direct", "--paths", "10", "--solver",
                              "cvxpy", "--json"], capfd)
    assert code == 0, err
    js = json.loads(out)  # nothing but the JSON on stdout (no solver banner)
    assert js["optimum"] == pytest.approx(3.0, abs=TOL) and js["solver"].startswith("cvxpy")


def test_coverage_closed_forms_equal_the_outcome_laws():
    """C(s) = P(s is drafted) of the coverage bound, from its closed forms (i.i.d., without
    replacement, hub) and from the direct LP's enumerated outcomes, agree exactly (rows with
    zeros and ties included)."""
    from spectheory.lp.trust import hub_coverage, iid_coverage, norep_coverage, outcome_coverage

    for inst in (st.random_instance(3, 2, 5, denominator=4), instance_from_dict(TIES, True)):
        V, L = inst.vocab_size, inst.block_length
        _, Q = _tables(inst, True)
        for drafting, Ks, closed in (("iid", (1, 2, 3), iid_coverage),
                                     ("norep", (1, 2, 3, 4), norep_coverage),
                                     ("hub", (1, 2), hub_coverage)):
            for K in Ks:
                C = closed(Q, K) if drafting == "iid" else closed(Q, K, V)
                ref = outcome_coverage(*draft_outcomes(Q, V, L, K, drafting, True), V, L)
                for j in range(1, L + 1):
                    assert list(C[j]) == list(ref[j]), (drafting, K, j)


def test_exact_certificates_with_twenty_paths():
    """Exact rationals at K = 20, where outcome rows carry weights near 1e-30: the rounded float
    duals of those rows are repaired to their least feasible value (`repair_duals`), and the
    certificate verifies L + 1 exactly (full acceptance is possible here)."""
    inst = st.random_instance(2, 2, 1, denominator=1000)
    assert full_acceptance(inst, 20)
    assert direct_lp(inst, 20, exact=True).optimum == 3
    assert selection_lp(inst, 20, exact=True).optimum == 3


def test_tables_and_nonzeros_past_the_machine_are_refused_before_reading(monkeypatch):
    """Sizes under the variable limit can still be past the machine: V = 1000, L = 2 is 10^6
    reduced node-budget variables but 8 GB of target levels (read whole, then out of memory after
    45 s). The tables and the LP's nonzeros are weighed against the machine's memory first (here a
    machine of 64 MiB: V = 60, L = 2 needs 3.5 MB of tables, 7 MB with the copy)."""
    import numpy as np

    import spectheory as st
    from spectheory.lp import coupling_bound, node_budget_lp
    from spectheory.lp._guards import TABLE_ENTRY_BYTES
    from spectheory.runtime import limits
    from spectheory.runtime.errors import SizeLimitError

    V, L = 60, 2
    row = (np.arange(1, V + 1) / (V * (V + 1) / 2)).tolist()
    inst = st.instance_from_dict({"vocab_size": V, "block_length": L, "target": row,
                                  "draft": row[::-1]})
    entries = (1 + V + V * V) * (V + 1)
    need = entries * TABLE_ENTRY_BYTES[False]
    read = []
    monkeypatch.setattr(type(inst.target), "level",
                        lambda self, j, _f=type(inst.target).level: read.append(j) or _f(self, j))
    monkeypatch.setattr(limits, "physical_memory", lambda: 2 * need - 1)
    for solve in (node_budget_lp, coupling_bound):
        with pytest.raises(SizeLimitError, match=f"reading the instance's tables \\(V = 60, L = 2: "
                                                 f"{entries:,} entries\\)"):
            solve(inst)
    assert read == []  # refused before a level was read
    monkeypatch.setattr(limits, "physical_memory", lambda: 2 * need)
    assert node_budget_lp(inst).optimum >= 1 and read  # fits: solved
    from spectheory.lp.sparse import BYTES_PER_NONZERO, check_lp_size

    check_lp_size(1000, need // BYTES_PER_NONZERO, "an LP")  # the LP itself: by its nonzeros
    with pytest.raises(SizeLimitError, match="an LP: 1,000 LP variables and .* nonzeros needs"):
        check_lp_size(1000, need // BYTES_PER_NONZERO + 1, "an LP")
