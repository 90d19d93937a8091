"""The lossy frontier LP (spectheory.lp.frontier): exact at delta = 0 (block verification), the
free-block contrast (coupling bound), monotone, at or above every relaxed rule's exact point, the
KL program's gap and Pinsker bound, and corrupted optima refused by the independent bounds."""

from __future__ import annotations

from fractions import Fraction

import pytest

import spectheory as st
from spectheory.engine.analysis import analyze
from spectheory.lp import coupling_bound, direct_lp
from spectheory.lp.frontier import free_block_lp, frontier_lp
from spectheory.lp.result import LPError
from spectheory.lp.sparse import SparseLP
from spectheory.lp.trust import UntrustedLPError, _tables, greedy_value
from spectheory.verifiers.relaxed import divergences


def instances():
    return [st.random_instance(3, 2, seed, alpha=0.5, denominator=12) for seed in range(2)]


def block_value(inst):
    p, Q = _tables(inst, True)
    return greedy_value(p, Q, inst.block_length)


def test_delta_zero_is_block_verification_exactly():
    for inst in instances():
        res = frontier_lp(inst, tv=0, exact=True, rules=())
        assert res.optimum == block_value(inst) == analyze(inst, "block").block_efficiency
        assert res.details["certificate"] in ("rounded", "sympy-primal")


def test_free_block_rule_is_not_a_verifier():
    """Choosing the whole L + 1 block jointly with the draft reaches the coupling bound at
    delta = 0, strictly above block verification on V = 3, L = 2."""
    inst = instances()[0]
    free = free_block_lp(inst, exact=True)
    assert free.optimum == coupling_bound(inst, exact=True).optimum
    assert free.optimum > block_value(inst)
    assert frontier_lp(inst, tv=0, exact=True, rules=()).optimum < free.optimum


def test_monotone_and_reaches_L_plus_1():
    inst = instances()[1]
    vals = [float(frontier_lp(inst, tv=d, rules=()).optimum) for d in (0, 0.02, 0.1, 0.3, 1)]
    assert all(a <= b + 1e-9 for a, b in zip(vals, vals[1:]))
    assert vals[0] < vals[1]
    assert abs(vals[-1] - (inst.block_length + 1)) < 1e-9


def test_at_or_above_every_relaxed_rule_tv():
    inst = instances()[0]
    for name in ("greedy", "additive", "multiplicative", "top-m", "trtllm-relaxed",
                 "sglang-threshold", "threshold", "lenient"):
        res = analyze(inst, name)
        front = frontier_lp(inst, tv=res.tv_to_target, exact=True, rules=())
        assert front.optimum >= res.block_efficiency, name


def test_kl_frontier_gap_pinsker_and_rules():
    inst = instances()[0]
    low = frontier_lp(inst, kl=0.01, rules=())
    high = frontier_lp(inst, kl=0.1)  # with the rules as lower bounds
    assert high.optimum >= low.optimum >= float(block_value(inst)) - 1e-9
    for res in (low, high):
        assert 0 <= res.details["duality_gap"] < 1e-5
        assert res.details["kl_of_point"] <= res.details["budget"][1] + 1e-7
        assert any("Pinsker" in b.source for b in res.details["bounds"]["checked"])
    c = analyze(inst.to_float(), "cactus")
    d = divergences(c)
    assert frontier_lp(inst, kl=d["kl_output_target"] + 1e-9, rules=()).optimum >= \
        c.block_efficiency - 1e-6


def test_two_paths_at_zero_is_the_direct_optimum():
    inst = st.random_instance(2, 2, 0, alpha=0.5, denominator=12)
    res = frontier_lp(inst, tv=0, paths=2, exact=True, rules=())
    assert res.optimum == direct_lp(inst, 2, exact=True).optimum
    assert res.optimum >= block_value(inst)


@pytest.mark.parametrize("shift", [0.05, -0.05])
def test_corrupted_optimum_is_refused(monkeypatch, shift):
    """A solver answer moved up or down is caught by the coupling-plus-budget bound or the block
    verification bound before it is returned."""
    solve = SparseLP.solve

    def bad(self, solver=None, certify=True):
        x, opt, status, name = solve(self, solver, certify)
        return x, opt + shift, status, name

    monkeypatch.setattr(SparseLP, "solve", bad)
    with pytest.raises(UntrustedLPError):
        frontier_lp(instances()[0], tv=0, rules=())


def test_bad_budgets_are_refused():
    inst = instances()[0]
    with pytest.raises(LPError):
        frontier_lp(inst)
    with pytest.raises(LPError):
        frontier_lp(inst, tv=0.1, kl=0.1)
    with pytest.raises(LPError):
        frontier_lp(inst, tv=-0.1)
    with pytest.raises(LPError):
        frontier_lp(inst, kl=0.1, exact=True)
    for bad in (float("inf"), float("nan"), "x", True):
        with pytest.raises(LPError):
            frontier_lp(inst, tv=bad, exact=True)
    assert frontier_lp(inst, tv=Fraction(1, 50), exact=True, rules=()).exact


def test_cli_route(tmp_path, capsys):
    import json

    from cli_helpers import run, write
    from spectheory.inputs.instances import instance_to_dict

    inst = st.random_instance(3, 2, 0, alpha=0.5, denominator=12)
    path = write(tmp_path, instance_to_dict(inst))
    code, out, err = run(["lp", path, "--problem", "frontier", "--tv", "1/20", "--exact",
                          "--json"], capsys)
    assert code == 0, err
    got = Fraction(json.loads(out)["optimum"])
    assert got == frontier_lp(inst, tv=Fraction(1, 20), exact=True, rules=()).optimum
    for bad in (["--problem", "frontier"], ["--problem", "direct", "--kl", "0.1"]):
        code, out, err = run(["lp", path] + bad, capsys)
        assert code == 2 and "Traceback" not in err and err.count("\n") == 1


def test_committed_figure_numbers_hold():
    """figures.json (fig11): every rule's exact point is at or below the TV frontier at its own
    TV (the frontier was solved there), the frontier is monotone and starts at block
    verification's value."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parents[1] / "figures" / "figures.json").read_text())
    fig = data["fig11_relaxed_frontier"]
    for panel in fig["panels"].values():
        front = {round(f["tv"], 12): f["block_efficiency"] for f in panel["frontier_tv"]}
        vals = [front[t] for t in sorted(front)]
        assert all(a <= b + 1e-9 for a, b in zip(vals, vals[1:]))
        for p in panel["rules"]:
            assert p["block_efficiency"] <= front[round(p["tv"], 12)] + 1e-6, p
        assert max(vals) <= fig["L"] + 1 + 1e-9


def test_kl_point_with_mass_off_the_target_is_refused():
    """Output mass on a sequence of target probability 0 makes KL(A || target) infinite: past the
    rows' tolerance the point is refused even though its KL over the target's support is small
    (the finite terms alone would be 0 here)."""
    import numpy as np

    from spectheory.lp.frontier import _check_kl_point

    target = np.array([0.5, 0.5, 0.0])
    assert _check_kl_point(np.array([0.5, 0.5, 0.0]), target, 0.0, 0.1) == 0.0
    assert _check_kl_point(np.array([0.5, 0.5, 1e-9]), target, 0.0, 0.1) == 0.0  # rounding
    with pytest.raises(LPError, match="never produces"):
        _check_kl_point(np.array([0.49, 0.49, 0.02]), target, 0.0, 0.1)
    with pytest.raises(LPError, match="not feasible"):  # over the budget on the support
        _check_kl_point(np.array([0.9, 0.1, 0.0]), target, 0.0, 0.1)
    with pytest.raises(LPError, match="not feasible"):  # rows off
        _check_kl_point(np.array([0.5, 0.5, 0.0]), target, 1e-3, 0.1)
