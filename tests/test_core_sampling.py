"""The generic sampler agrees with the exact law.

Statistical test: chi-square goodness of fit of sampled output blocks (X^tau, Y) against the
exact emitted-block law, at false-alarm rate alpha = 1e-4 per test, with fixed seeds (so the
outcome is deterministic; with a correct sampler a failure would happen with probability 1e-4).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from spectheory.engine.perdraft import block_output_law
from spectheory.sampling import inverse_cdf, output_block, sample_law
from spectheory.engine.seqtree import levels, path_conditionals, sample_paths
from spectheory.verifiers import block_verification, token_verification
from spectheory.inputs.models import prefix_from_index
from strategies import make_instance

ALPHA = 1e-4


def _sample_blocks(inst, verifier, n, seed):
    g = torch.Generator().manual_seed(seed)
    L = inst.block_length
    ql = levels(inst.draft, 0, L, exact=False)
    pl = levels(inst.target, 0, L + 1, exact=False)
    drafts = sample_paths(ql, n, generator=g)
    q = path_conditionals(ql, drafts, L)
    p = path_conditionals(pl, drafts, L + 1)
    tau, y = sample_law(verifier(drafts, q, p), generator=g)
    return output_block(drafts, tau, y), ql, pl


@pytest.mark.parametrize("verifier", [token_verification, block_verification])
@pytest.mark.parametrize("kind,seed", [("dirichlet", 3), ("sparse", 4)])
def test_sampled_blocks_follow_exact_law(verifier, kind, seed):
    inst = make_instance(kind, V=3, L=3, seed=seed)
    V, L, n = 3, 3, 100_000
    blocks, ql, pl = _sample_blocks(inst, verifier, n, seed)
    law = block_output_law(verifier, ql, pl, V, L)
    expected, observed = [], []
    counts = {}
    for b in blocks:
        counts[b] = counts.get(b, 0) + 1
    for j in range(1, L + 2):
        e = law.emitted[j].numpy()
        for k in range(V**j):
            expected.append(e[k])
            observed.append(counts.pop(prefix_from_index(k, j, V), 0))
    assert not counts, f"sampled blocks outside the law's support: {list(counts)[:3]}"
    expected = np.array(expected)
    observed = np.array(observed)
    keep = expected > 0
    assert observed[~keep].sum() == 0
    # pool cells with small expectation into one bin (chi-square validity)
    exp_n = expected[keep] * n
    obs = observed[keep]
    small = exp_n < 5
    exp_b = np.append(exp_n[~small], exp_n[small].sum())
    obs_b = np.append(obs[~small], obs[small].sum())
    if exp_b[-1] == 0:
        exp_b, obs_b = exp_b[:-1], obs_b[:-1]
    pvalue = stats.chisquare(obs_b, exp_b * obs_b.sum() / exp_b.sum()).pvalue
    assert pvalue > ALPHA


def test_sampler_catches_a_wrong_law():
    """Power check: the same test rejects when samples come from token but the law is block."""
    inst = make_instance("dirichlet", V=3, L=3, seed=3)
    V, L, n = 3, 3, 100_000
    blocks, ql, pl = _sample_blocks(inst, token_verification, n, 3)
    law = block_output_law(block_verification, ql, pl, V, L)
    lengths = np.bincount([len(b) for b in blocks], minlength=L + 2)[1:]
    exp_len = np.array([float(law.emitted[j].sum()) for j in range(1, L + 2)]) * n
    assert stats.chisquare(lengths, exp_len).pvalue < ALPHA


def test_inverse_cdf_with_fixed_uniforms_is_deterministic():
    probs = torch.tensor([[0.2, 0.0, 0.8], [0.0, 1.0, 0.0]], dtype=torch.float64)
    u = torch.tensor([0.19, 0.5], dtype=torch.float64)
    assert inverse_cdf(probs, u).tolist() == [0, 1]
    assert inverse_cdf(probs, torch.tensor([0.2, 0.0], dtype=torch.float64)).tolist() == [2, 1]
