"""Traversal on the merged token tree (``traversal-tree``) against a deliberately naive
per-outcome Fraction implementation of the same node rule."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from spectheory.law import MultiLaw
from spectheory.engine.analysis import analyze_multipath
from spectheory.engine.lossless import check_lossless_multipath
from spectheory.inputs.random_instances import random_instance
from spectheory.cli.report import toy_instance
from spectheory.verifiers import MULTI_PATH, block_verification
from spectheory.engine.analysis import analyze


def _norm(v):
    s = sum(v)
    return [x / s for x in v] if s != 0 else None


def _one(drafts, q, p, without_replacement=True):
    """Post-order walk over the merged tree of one outcome, Python lists of Fractions."""
    K, L = drafts.shape
    V = q.shape[-1]
    kids, info = {(): []}, {}
    for k in range(K):
        for i in range(L + 1):
            pre = tuple(int(t) for t in drafts[k, :i])
            if pre not in info:
                info[pre] = (list(p[k, i]), list(q[k, i]) if i < L else None, k, i)
                kids.setdefault(pre, [])
                if i:
                    kids[pre[:-1]].append(pre)
    Mb = {u: r[0] for u, r in info.items()}
    Ms = {u: r[1] for u, r in info.items()}
    pa, gone = {(): Fraction(1)}, set()

    def recompute(u):
        for c in kids[u]:
            if c in gone:
                continue
            b, s = Mb[u][c[-1]], Ms[u][c[-1]]
            pa[c] = min(Fraction(1), pa[u] * (b / s if s else Fraction(1)))
            recompute(c)

    recompute(())
    post = []

    def visit(u):
        for c in kids[u]:
            visit(c)
        post.append(u)

    visit(())
    stop = np.full((K, L + 1), Fraction(0), dtype=object)
    corr = np.empty((K, L + 1, V), dtype=object)
    for k in range(K):
        for i in range(L + 1):
            corr[k, i] = list(p[k, i])
    alive = Fraction(1)
    for v in post:
        k, i = info[v][2], info[v][3]
        stop[k, i] += alive * pa[v]
        corr[k, i] = Mb[v]
        alive *= 1 - pa[v]
        if v == ():
            break
        u, x = v[:-1], v[-1]
        w = pa[u]
        res = [max(w * b - s, Fraction(0)) for b, s in zip(Mb[u], Ms[u])]
        S = sum(res)
        Mb[u] = _norm(res) or Mb[u]
        if without_replacement:
            ms = list(Ms[u])
            ms[x] = Fraction(0)
            Ms[u] = _norm(ms) or Ms[u]
        pa[u] = S / (S + 1 - w) if S + 1 - w != 0 else Fraction(1)
        gone.add(v)
        recompute(u)
    return stop, corr


def naive_traversal_tree(drafts, q, p, without_replacement=True):
    Bsz, K, L = drafts.shape
    V = q.shape[-1]
    stop = np.empty((Bsz, K, L + 1), dtype=object)
    corr = np.empty((Bsz, K, L + 1, V), dtype=object)
    for b in range(Bsz):
        stop[b], corr[b] = _one(drafts[b], q[b], p[b], without_replacement)
    return MultiLaw(stop, corr)


INSTANCES = [toy_instance(), random_instance(3, 2, 0, denominator=12),
             random_instance(3, 2, 2, alpha=0.4, denominator=8),
             random_instance(2, 3, 7, denominator=10)]


@pytest.mark.parametrize("K", [2, 3])
@pytest.mark.parametrize("drafting", ["iid", "norep"])
def test_batched_equals_naive_and_lossless(K, drafting):
    fast = MULTI_PATH["traversal-tree"]
    for inst in INSTANCES:
        a = analyze_multipath(inst, fast, K, drafting)
        b = analyze_multipath(inst, naive_traversal_tree, K, drafting)
        assert a.tau_pmf == b.tau_pmf
        assert all(x == y for x, y in zip(a.output_law, b.output_law))
        assert a.tv_to_target == 0


def test_norep_equals_traversal_and_k1_is_block():
    for inst in INSTANCES:
        for K in (2, 3):
            a = analyze_multipath(inst, MULTI_PATH["traversal-tree"], K, "norep")
            b = analyze_multipath(inst, MULTI_PATH["traversal"], K, "norep")
            assert a.tau_pmf == b.tau_pmf
        one = analyze_multipath(inst, MULTI_PATH["traversal-tree"], 1)
        assert one.tau_pmf == analyze(inst, block_verification).tau_pmf


def test_with_replacement_siblings_on_the_merged_tree_are_lossy():
    """Why traversal-tree updates siblings without replacement: the same walk with the sibling
    draft rows left unchanged is lossy under i.i.d. drafting (negative control)."""
    inst = random_instance(3, 2, 0, denominator=12)
    rep = check_lossless_multipath(
        lambda d, q, p: naive_traversal_tree(d, q, p, without_replacement=False), inst, 2, "iid")
    assert not rep.lossless and rep.offending is not None
    assert rep.output_probability != rep.target_probability


def _traversal_module():
    import sys

    import spectheory.verifiers.traversal  # noqa: F401 - the name is also the function's

    return sys.modules["spectheory.verifiers.traversal"]


@pytest.mark.parametrize("K", [2, 3])
def test_digit_by_digit_post_order_equals_the_packed_key(K, monkeypatch):
    """Past (K + 1)^(L + 1) = 2^62 the post-order is sorted one digit at a time (the packed
    int64 key overflowed: K = 15, L = 15 raised OverflowError); forced on small trees, that
    route gives the naive walk's law exactly, merged prefixes and ties included."""
    monkeypatch.setattr(_traversal_module(), "_PACKED_KEY_MAX", 0)
    fast = MULTI_PATH["traversal-tree"]
    for inst in INSTANCES:
        a = analyze_multipath(inst, fast, K, "iid")
        b = analyze_multipath(inst, naive_traversal_tree, K, "iid")
        assert a.tau_pmf == b.tau_pmf
        assert all(x == y for x, y in zip(a.output_law, b.output_law))


def test_a_tree_past_the_packed_key_has_the_naive_walks_law():
    """K = 3 paths of L = 31 drafts over V = 2 ((K + 1)^(L + 1) = 2^64, past int64 as K = 15,
    L = 15 is): the law of the naive walk, on paths that share prefixes to different depths
    (torch and numpy)."""
    import torch

    K, L, V = 3, 31, 2
    rng = np.random.default_rng(3)
    drafts = rng.integers(0, V, (1, K, L))
    drafts[:, 1, :20] = drafts[:, 0, :20]  # a prefix of depth 20 shared
    drafts[:, 2, :5] = drafts[:, 0, :5]  # and one of depth 5
    q = rng.dirichlet(np.ones(V), (1, K, L))
    p = rng.dirichlet(np.ones(V), (1, K, L + 1))
    want = naive_traversal_tree(drafts, q, p)
    fast = MULTI_PATH["traversal-tree"]
    for got in (fast(drafts, q, p), fast(*(torch.from_numpy(a) for a in (drafts, q, p)))):
        stop, corr = (np.asarray(x, dtype=float) for x in got)
        assert np.allclose(stop, np.asarray(want[0], dtype=float), rtol=0, atol=1e-12)
        assert np.allclose(corr, np.asarray(want[1], dtype=float), rtol=0, atol=1e-12)
        assert abs(stop.sum() - 1) < 1e-12  # a stop law
