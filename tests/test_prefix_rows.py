"""One row per distinct prefix in the real-model loop: float noise between batch rows of the same
prefix must not change which path GBV selects, nor any verifier's law."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

import spectheory as st  # noqa: E402
from spectheory.gpu_validation.decoding import SamplingConfig, SpeculativeDecoder, share_prefix_rows  # noqa: E402
from spectheory.gpu_validation.tiny import tiny_qwen2  # noqa: E402


def _noisy_tie():
    """K = 2 paths through the same first token 0; at node (0,) the second tokens 1 and 2 have
    equal p/q. Path 1 reaches the node through its own batch row, which carries noise of
    relative size 4e-7 (the float32 batch noise seen between rows of one forward)."""
    V = 3
    root_q = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    root_p = torch.tensor([0.6, 0.2, 0.2], dtype=torch.float64)
    node_q = torch.tensor([0.2, 0.4, 0.4], dtype=torch.float64)
    node_p = torch.tensor([0.1, 0.45, 0.45], dtype=torch.float64)  # tokens 1, 2 tie: 1.125
    leaf = torch.full((V,), 1 / V, dtype=torch.float64)
    drafts = torch.tensor([[0, 2], [0, 1]])
    q = torch.stack([torch.stack([root_q, node_q])] * 2)  # [K, L, V]
    p = torch.stack([torch.stack([root_p, node_p, leaf])] * 2)  # [K, L+1, V]
    noisy_q, noisy_p = q.clone(), p.clone()
    noisy_p[1, 1] = node_p * torch.tensor([1.0, 1 - 4e-7, 1.0], dtype=torch.float64)
    noisy_p[1, 1] /= noisy_p[1, 1].sum()
    return drafts, (q, p), (noisy_q, noisy_p)


def _gbv(drafts, q, p):
    return st.registered()["gbv"].law(drafts[None], q[None], p[None])


def test_noise_changes_the_selection_and_sharing_restores_the_exact_law():
    drafts, clean, noisy = _noisy_tie()
    exact = _gbv(drafts, *clean)
    raw = _gbv(drafts, *noisy)
    sel = lambda law: int(law.stop[0].sum(-1).argmax())  # noqa: E731
    assert sel(exact) == 1  # the tie goes to the smaller token id, on path 1
    assert sel(raw) != sel(exact)  # path 1 ranks its token 1 from its noisy row: below 2
    shared = share_prefix_rows(drafts, *noisy)
    fixed = _gbv(drafts, *shared)
    assert sel(fixed) == sel(exact)
    assert torch.equal(fixed.stop, exact.stop) and torch.equal(fixed.correction, exact.correction)
    for name in ("specinfer", "traversal-iid", "spectr"):
        law = st.registered()[name].law
        a = law(drafts[None], *(x[None] for x in shared))
        b = law(drafts[None], *(x[None] for x in clean))
        assert torch.equal(a.stop, b.stop), name


def test_the_loop_gives_every_prefix_one_row():
    torch.manual_seed(0)
    dec = SpeculativeDecoder(tiny_qwen2(5, seed=1, dtype=torch.float32),
                             tiny_qwen2(5, seed=2, dtype=torch.float32), SamplingConfig(),
                             torch.float32)
    dec.start([1, 2, 3])
    g = torch.Generator().manual_seed(0)
    shared = 0
    for _ in range(5):
        prop = dec.propose(6, 3, g)
        X = prop.drafts
        for i in range(prop.L + 1):
            for a in range(prop.K):
                for b in range(prop.K):
                    if torch.equal(X[a, :i], X[b, :i]):
                        shared += a != b
                        assert torch.equal(prop.p[a, i], prop.p[b, i])
                        if i < prop.L:
                            assert torch.equal(prop.q[a, i], prop.q[b, i])
        dec.commit(prop, 0, 0, int(X[0, 0]))
    assert shared > 0  # the check ran on shared prefixes
