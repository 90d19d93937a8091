"""Bad arguments of `spectheory.bounds` and the LP entry points are refused in one line (the
project's error classes, naming the argument and its value) before any work; the nearest valid
input keeps its value, checked against a hand computation."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
import torch

import spectheory.lp as lp
from spectheory.bounds import (MAX_SUBSET_STEPS, full_acceptance_possible, multidraft_acceptance,
                               norep_steps, optimal_acceptance, shown)
from spectheory.cli.report import toy_instance
from spectheory.lp.frontier import frontier_lp
from spectheory.runtime.errors import InstanceError, OptionError, SizeLimitError

# two tokens, p = (1/3, 2/3), q = (2/3, 1/3): alpha*(K) = min over H of p(H) + 1 - q(H)^K, by hand
# H = {} -> 1 - 0 = 1; H = {1} (p/q = 2) -> 2/3 + 1 - 1/9; H = {0} (p/q = 1/2) -> 1/3 + 1 - (2/3)^K
P, Q = [F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)]


def hand(K):
    return min(F(1), F(2, 3) + 1 - F(1, 9) ** K, F(1, 3) + 1 - F(2, 3) ** K, F(1))


def one_line(exc) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


# ------------------------------------------------------------------ spectheory.bounds

@pytest.mark.parametrize("paths,word", [(2.9, "float"), ("2", "str"), (True, "bool"),
                                        (-1, "-1"), (0, "0")])
def test_paths_must_be_a_positive_integer(paths, word):
    with pytest.raises(OptionError) as exc:
        optimal_acceptance(P, Q, paths)
    assert one_line(exc).startswith("paths = ") and word in str(exc.value)
    with pytest.raises(OptionError):
        multidraft_acceptance(torch.tensor([.5, .5]), torch.tensor([.5, .5]), paths)


def test_paths_control_int_and_numpy_integer_give_the_hand_value():
    for K in (1, 2, 3):
        assert optimal_acceptance(P, Q, K)[0] == hand(K)
        assert optimal_acceptance(P, Q, np.int64(K))[0] == hand(K)
    assert hand(2) == F(8, 9)  # H = {0}: 1/3 + 1 - 4/9


@pytest.mark.parametrize("p,q,err,part", [
    ([0.5, 0.6], [0.5, 0.5], InstanceError, "p sums to 1.1"),
    ([0.5, 0.5], [0.3, 0.3, 0.4], InstanceError, "p has 2 entries and q has 3"),
    ([float("nan"), 1.0], [.5, .5], InstanceError, "p[0] = nan is not finite"),
    ("ab", [.5, .5], InstanceError, "p = 'ab' must be a list"),
    ([], [], InstanceError, "p is empty"),
    ([-0.5, 1.5], [.5, .5], InstanceError, "p[0] = -0.5 is negative"),
    ([.5, .5], [True, False], InstanceError, "q[0] = True is not a number"),
    ([F(1, 2), F(1, 3)], [.5, .5], InstanceError, "must sum to exactly 1"),
])
def test_rows_must_be_distributions(p, q, err, part):
    with pytest.raises(err) as exc:
        lp.multidraft_acceptance_L1(p, q, 2)
    assert part in one_line(exc)


def test_rows_control_exact_and_float_rows_within_the_instance_tolerance():
    assert lp.multidraft_acceptance_L1(P, Q, 2) == (F(8, 9), (0,))
    near = [1 / 3 + 5e-10, 2 / 3]  # off by 5e-10 < 1e-9 (spectheory.inputs.instances.DEFAULT_TOL)
    assert lp.multidraft_acceptance_L1(near, [2 / 3, 1 / 3], 2)[0] == pytest.approx(8 / 9)
    with pytest.raises(InstanceError, match="not 1 within 1e-09"):
        lp.multidraft_acceptance_L1([1 / 3 + 5e-9, 2 / 3], [2 / 3, 1 / 3], 2)


def test_a_huge_fraction_is_described_not_printed():
    tiny = F(1, 10**5000)  # str() of its denominator raises (int-to-str limit)
    with pytest.raises(InstanceError) as exc:
        optimal_acceptance([F(1, 2), F(1, 2) + tiny], [F(1, 2)] * 2, 2)
    text = one_line(exc)
    assert "5001-digit denominator" in text and len(text) < 200
    assert shown(tiny) == "a fraction with a 1-digit numerator and a 5001-digit denominator"


def test_norep_search_is_bounded_before_it_starts():
    with pytest.raises(SizeLimitError) as exc:
        optimal_acceptance([1 / 40] * 40, [1 / 40] * 40, 2, "norep")
    assert "2^40" in one_line(exc) and "MAX_SUBSET_STEPS" in str(exc.value)
    u12 = [F(1, 12)] * 12
    assert norep_steps(u12, 4) > MAX_SUBSET_STEPS
    with pytest.raises(SizeLimitError, match=f"{norep_steps(u12, 4):,} steps"):
        optimal_acceptance(u12, u12, 4, "norep")
    with pytest.raises(SizeLimitError, match="2\\^40"):
        full_acceptance_possible([1 / 40] * 40, [1 / 40] * 40, 2)


def test_norep_control_two_tokens_by_hand():
    # without replacement, K = 2 draws from q = (2/3, 1/3) take both tokens: D(all in H) = 1 only
    # for H = {0, 1}; alpha* = min(1 [H = {}], 1/3 + 1, 2/3 + 1, 1 + 1 - 1) = 1
    assert optimal_acceptance(P, Q, 2, "norep") == (F(1), ())
    assert norep_steps(Q, 2) <= MAX_SUBSET_STEPS
    assert optimal_acceptance(P, Q, 1, "norep")[0] == hand(1) == F(2, 3)
    with pytest.raises(OptionError, match="drafting = 'nrep' is unknown"):
        optimal_acceptance(P, Q, 2, "nrep")


def test_norep_steps_count_the_recursion():
    """norep_steps against a count of the loop turns of draws_inside, instrumented."""
    import itertools

    q = [F(1, 2), F(0), F(1, 4), F(1, 4)]
    support = [x for x in range(4) if q[x] != 0]
    turns = 0

    def rec(taken, k, H):
        nonlocal turns
        if k == 0:
            return
        for x in support:
            turns += 1
            if x in H and x not in taken:
                rec(taken + (x,), k - 1, H)

    for K in (1, 2, 5):
        turns = 0
        for r in range(5):
            for H in itertools.combinations(range(4), r):
                rec((), min(K, 3), set(H))
        nodes_turns = turns
        # norep_steps counts every node (also the leaves) times |support|, plus one per set
        assert norep_steps(q, K) >= nodes_turns + 16


@pytest.mark.parametrize("p,q,part", [
    (torch.tensor([.5, .5], dtype=torch.float64), torch.tensor([.2, .3, .5]), "shape [2]"),
    (torch.tensor([-0.5, 1.5]), torch.tensor([.5, .5]), "p[0] = -0.5 is negative"),
    (torch.tensor([float("nan"), 1.]), torch.tensor([.5, .5]), "p[0] = nan is not finite"),
    (torch.tensor([[.5, .5], [.4, .5]]), torch.tensor([[.5, .5]] * 2), "p[1] sums to 0.9"),
    ([.5, .5], torch.tensor([.5, .5]), "must be a torch tensor"),
    (torch.tensor([0, 1]), torch.tensor([0, 1]), "floating-point"),
])
def test_batched_rows_are_checked(p, q, part):
    with pytest.raises(InstanceError) as exc:
        multidraft_acceptance(p, q, 2)
    assert part in one_line(exc)


def test_batched_control_float32_softmax_rows_and_the_hand_value():
    p = torch.tensor([1 / 3, 2 / 3], dtype=torch.float64)
    q = torch.tensor([2 / 3, 1 / 3], dtype=torch.float64)
    assert float(multidraft_acceptance(p, q, 2)) == pytest.approx(8 / 9, abs=1e-15)
    g = torch.Generator().manual_seed(0)
    rows = torch.softmax(torch.randn(2, 50_000, generator=g), -1)  # float32, sums off by ~1e-7
    assert multidraft_acceptance(rows, rows, 1).tolist() == pytest.approx([1.0, 1.0], abs=1e-6)


def test_optimal_multidraft_L1_paths():
    from spectheory.inputs.instances import Instance

    toy = toy_instance(exact=True)  # context-independent rows p = (1/3, 2/3), q = (2/3, 1/3)
    one = Instance(toy.vocab_size, 1, toy.target, toy.draft)
    with pytest.raises(lp.LPError, match=r"^paths = -2 must be a positive integer$"):
        lp.optimal_multidraft_L1(one, paths=-2, exact=True)
    with pytest.raises(lp.LPError, match=r"^paths = 2.0 must be a positive integer"):
        lp.optimal_multidraft_L1(one, paths=2.0, exact=True)
    assert lp.optimal_multidraft_L1(one, paths=np.int64(2), exact=True).optimum == 1 + hand(2)


# ------------------------------------------------------------------ LP API guards

def test_not_an_instance():
    with pytest.raises(InstanceError) as exc:
        lp.node_budget_lp({"vocab_size": 2})
    assert "instance = {'vocab_size': 2} is not an Instance" in one_line(exc)


def test_limit_zero_is_refused_not_divided_by():
    inst = toy_instance(exact=True)
    for call in (lambda: lp.node_budget_lp(inst, exact=True, limit=0),
                 lambda: lp.coupling_bound(inst, True, limit=0)):
        with pytest.raises(SizeLimitError, match=r"^limit = 0 must be a whole number"):
            call()
    assert lp.coupling_bound(inst, True, limit=10**6).optimum == \
        lp.coupling_bound(inst, True).optimum


def test_solver_paths_and_exact_are_checked():
    inst = toy_instance(exact=True)
    with pytest.raises(lp.LPError, match="unknown LP solver 'bogus' for an exact solve"):
        lp.direct_lp(inst, 2, exact=True, solver="bogus")
    with pytest.raises(lp.LPError, match="'highs' for an exact solve .a float route"):
        lp.direct_lp(inst, 2, exact=True, solver="highs")
    with pytest.raises(lp.LPError, match="^paths = True must be a positive integer"):
        lp.direct_lp(inst, True)
    with pytest.raises(lp.LPError, match="^exact = 'no' must be True or False$"):
        lp.direct_lp(inst, 2, exact="no")
    # controls: the exact optimum 212/81 (its own certificate), by every accepted spelling of K = 2
    assert lp.direct_lp(inst, 2, exact=True).optimum == F(212, 81)
    assert lp.direct_lp(inst, np.int64(2), exact=True, solver="exact-certificate").optimum == \
        F(212, 81)


def test_frontier_huge_budget_is_refused_in_one_line():
    inst = toy_instance(exact=True)
    with pytest.raises(lp.LPError) as exc:
        frontier_lp(inst, tv=F(1, 10**5000), exact=True)
    assert "5001-digit denominator" in one_line(exc) and "over 1333 bits" in str(exc.value)
    # control: the smallest budget typed as text, 1e-400, still solves (and 0 is block
    # verification's optimum plus an exact sliver)
    small = frontier_lp(inst, tv=F(1, 10**400), exact=True).optimum
    zero = frontier_lp(inst, tv=0, exact=True).optimum
    assert zero < small < zero + F(1, 10**399)


# ------------------------------------------------------------------ the lp command

def test_lp_command_refuses_solver_with_exact(tmp_path, capsys):
    import json

    from spectheory.cli import main
    from spectheory.inputs.instances import instance_to_dict

    path = tmp_path / "toy.json"
    path.write_text(json.dumps(instance_to_dict(toy_instance())))
    code = main(["lp", str(path), "--problem", "node-budget", "--solver", "cvxpy", "--exact"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "--solver cvxpy picks a float route" in err and "sympy" not in err
    assert main(["lp", str(path), "--problem", "node-budget", "--exact"]) == 0
    assert "20/9" in capsys.readouterr().out  # the toy instance's block verification, E[tau+1]
