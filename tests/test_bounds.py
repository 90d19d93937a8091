"""The batched L = 1 multi-draft optimum against the exact closed form, the LPs and the verifiers."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import torch

import spectheory as st
from spectheory.lp import direct_lp
from spectheory.lp.multipath import multidraft_acceptance_L1
from spectheory.bounds import multidraft_acceptance


def test_equals_the_exact_closed_form_and_brute_force_over_sets():
    rng = np.random.default_rng(0)
    for _ in range(30):
        V = int(rng.integers(2, 6))
        p = rng.dirichlet(np.full(V, 0.5))
        q = rng.dirichlet(np.full(V, 0.5))
        q[rng.random(V) < 0.2] = 0.0  # tokens the draft never proposes
        q = q / q.sum() if q.sum() > 0 else np.full(V, 1 / V)
        for K in (1, 2, 3, 5):
            got = float(multidraft_acceptance(torch.tensor(p), torch.tensor(q), K))
            ref = float(multidraft_acceptance_L1(list(p), list(q), K)[0])
            brute = min(p[list(H)].sum() + 1 - q[list(H)].sum() ** K
                        for r in range(V + 1) for H in itertools.combinations(range(V), r))
            assert got == pytest.approx(ref, abs=1e-12) and got == pytest.approx(brute, abs=1e-12)


def test_one_draft_is_token_acceptance_and_batched_shapes():
    g = torch.Generator().manual_seed(1)
    p = torch.softmax(torch.randn(3, 4, 1000, generator=g, dtype=torch.float64), -1)
    q = torch.softmax(torch.randn(3, 4, 1000, generator=g, dtype=torch.float64), -1)
    a1 = multidraft_acceptance(p, q, 1)
    assert a1.shape == (3, 4)
    assert torch.allclose(a1, torch.minimum(p, q).sum(-1), atol=1e-12)
    a2, a4 = multidraft_acceptance(p, q, 2), multidraft_acceptance(p, q, 4)
    assert (a2 >= a1 - 1e-12).all() and (a4 >= a2 - 1e-12).all()  # more drafts never hurt


def test_bounds_the_verifiers_and_equals_the_direct_lp_at_L1():
    inst = st.random_instance(4, 1, 3, alpha=0.5)
    p = torch.tensor(inst.target.to_float().level(0)[0])
    q = torch.tensor(inst.draft.to_float().level(0)[0])
    for K in (2, 3):
        best = float(multidraft_acceptance(p, q, K))
        assert best == pytest.approx(direct_lp(inst, K).optimum - 1, abs=1e-7)
        for name in ("gbv", "specinfer", "spectr", "traversal-iid"):
            acc = float(st.analyze(inst, name, paths=K).expected_accepted)
            assert acc <= best + 1e-12


def test_two_token_example():
    p = torch.tensor([1 / 3, 2 / 3], dtype=torch.float64)
    q = torch.tensor([2 / 3, 1 / 3], dtype=torch.float64)
    vals = [float(multidraft_acceptance(p, q, K)) for K in (1, 2, 3)]
    assert vals == pytest.approx([float(Fraction(2, 3)), float(Fraction(8, 9)), 1.0], abs=1e-12)
    with pytest.raises(ValueError):
        multidraft_acceptance(p, q, 0)
