"""Sampling a multi-path verifier's law on sampled drafts agrees with the exact law.

For each verifier, N = 10000 draft outcomes are drawn under its drafting scheme with a fixed seed,
the verifier's law is evaluated on them and (path, tau, Y) sampled by the generic sampler; the
counts of the emitted blocks (X_k^tau, Y) are compared with the exact emitted-block law by a
chi-square test (categories with expected count < 5 pooled). The test fails when p < 1e-4: with a
correct implementation a false alarm has probability 1e-4 per verifier (the seed is fixed, so the
outcome is deterministic).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from spectheory.engine.joint import multipath_block_law
from spectheory.engine.sampling import sample_drafts, sample_outputs
from spectheory.inputs.random_instances import random_instance
from spectheory.engine.seqtree import levels
from spectheory.verifiers import MULTI_PATH

N = 10_000
ALPHA = 1e-4


def chi_square_p(observed: np.ndarray, expected: np.ndarray) -> float:
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    assert obs[~keep].sum() == 0, "a block of probability zero was sampled"
    obs, exp = obs[keep], exp[keep]
    stat = ((obs - exp) ** 2 / exp).sum()
    return float(chi2.sf(stat, len(obs) - 1))


@pytest.mark.parametrize("name,drafting", [("gbv", "iid"), ("specinfer", "iid"),
                                           ("spectr", "iid"), ("traversal", "norep"),
                                           ("specinfer-norep", "norep")])
def test_sampled_blocks_match_exact_law(name, drafting):
    V, L, K = 3, 2, 2
    inst = random_instance(V, L, 21, alpha=0.8)
    verifier = MULTI_PATH[name]
    q_levels = levels(inst.draft, 0, L, False)
    p_levels = levels(inst.target, 0, L + 1, False)
    law = multipath_block_law(verifier, q_levels, p_levels, V, L, K, drafting)
    expected = np.concatenate([law.emitted[j].numpy() for j in range(1, L + 2)]) * N
    offsets = np.cumsum([0] + [V**j for j in range(1, L + 2)])
    g = torch.Generator().manual_seed(1234)
    drafts, k, tau, y = sample_outputs(inst, verifier, K, N, drafting, g)
    path = drafts[torch.arange(N), k]  # [N, L]
    index = torch.zeros(N, dtype=torch.long)
    for i in range(L):
        index = torch.where(tau > i, index * V + path[:, i], index)
    index = index * V + y
    flat = torch.as_tensor(offsets)[tau] + index
    observed = np.bincount(flat.numpy(), minlength=offsets[-1]).astype(float)
    assert chi_square_p(observed, expected) > ALPHA


def test_norep_drafts_have_distinct_first_tokens():
    inst = random_instance(4, 2, 3)
    d = sample_drafts(inst, 3, 2000, "norep", torch.Generator().manual_seed(0))
    first = d[:, :, 0]
    assert (first[:, 0] != first[:, 1]).all() and (first[:, 1] != first[:, 2]).all()
    assert (first[:, 0] != first[:, 2]).all()


@pytest.mark.parametrize("returned", [None, 3.0, (1, 2, 3)])
def test_a_single_path_verifier_returning_no_law_is_named_in_one_line(returned):
    """`sample_outputs` (and every caller of `VerifierSpec.law`) names a single-path verifier
    that returns something other than (stop, correction), as for a multi-path one; it was a bare
    TypeError from the unpacking."""
    from spectheory.law import LawError

    def broken(drafts, q, p):
        return returned

    with pytest.raises(LawError, match="broken returned .*, not a law"):
        sample_outputs(random_instance(3, 2, seed=1), broken, 1, 10)
