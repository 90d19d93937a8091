"""The per-node route builds its deepest level (and the output law's last two levels) a chunk of
parents at a time to bound its memory: the law does not depend on the chunking. Checked exactly
in rationals and to 1e-15 in float64 on prefix-dependent instances, for forward and backward
scans, with the target row or another correction at depth L; errors name the node among all
nodes of the depth."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spectheory.runtime import backend as Bk
from spectheory.engine import output as exact_mod
from spectheory.engine import nodes as nodes_mod
from spectheory.engine.analysis import analyze
from spectheory.law import LawError
from spectheory.engine.nodes import NodeForm, node_block_law, node_verifier
from spectheory.inputs.random_instances import random_instance
from spectheory.engine.seqtree import levels
from spectheory.verifiers.block import BLOCK_NODE
from spectheory.verifiers.token import TOKEN_NODE

#: (nodes of depth L per chunk of the node route, rows of depth L per chunk of the output law);
#: V = 3, L = 4: 27 parents, 81 nodes at depth L; 12 // 3 = 4 parents per chunk leaves a ragged
#: last chunk
CHUNKINGS = [(3, 3), (6, 12), (12, 6), (2, 1)]


def _uniform_bonus(form: NodeForm, name: str):
    """The form with a uniform correction at depth L (so the correction there is not p)."""

    def step(state, px, qx, q, p):
        s, w, c = form.step(state, px, qx, q, p)
        if q is None:
            V = p.shape[1]
            c = Bk.full(p.shape, 1, p) / V
        return s, w, c

    return node_verifier(NodeForm(step, form.scan, name), name, lossless=False)


VERIFIERS = {"token": "token", "block": "block",
             "token-uniform-bonus": _uniform_bonus(TOKEN_NODE, "token-uniform-bonus"),
             "block-uniform-bonus": _uniform_bonus(BLOCK_NODE, "block-uniform-bonus")}


def _chunked(monkeypatch, nodes: int, rows: int):
    monkeypatch.setattr(nodes_mod, "LAST_LEVEL_CHUNK_NODES", nodes)
    monkeypatch.setattr(exact_mod, "TV_CHUNK_ROWS", rows)


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_chunked_route_equals_whole_levels_exactly(name, monkeypatch):
    inst = random_instance(3, 4, 21, alpha=0.5, denominator=12)  # prefix-dependent rationals
    v = VERIFIERS[name]
    whole = analyze(inst, v)
    assert whole.route == "node"
    lossless = name in ("token", "block")
    assert (whole.tv_to_target == 0) == lossless
    for nodes, rows in CHUNKINGS:
        with monkeypatch.context() as m:
            _chunked(m, nodes, rows)
            part = analyze(inst, v)
            lean = analyze(inst, v, laws=False)
        assert part.tau_pmf == whole.tau_pmf
        assert part.tv_to_target == whole.tv_to_target == lean.tv_to_target
        assert (np.asarray(part.output_law) == np.asarray(whole.output_law)).all()
        assert (np.asarray(part.target_law) == np.asarray(whole.target_law)).all()


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_chunked_node_quantities_equal_in_rationals(name, monkeypatch):
    """Stop masses and corrections of every node, not only their sums."""
    inst = random_instance(3, 4, 22, alpha=0.3, denominator=10)
    spec = VERIFIERS[name]
    form = (TOKEN_NODE if name == "token" else BLOCK_NODE if name == "block" else spec.node)
    ql, pl = levels(inst.draft, 0, 4, True), levels(inst.target, 0, 5, True)
    whole = node_block_law(form, ql, pl, 3, 4)
    with monkeypatch.context() as m:
        _chunked(m, 3, 3)
        part = node_block_law(form, ql, pl, 3, 4)
    assert part.corr_is_target == whole.corr_is_target
    for a, b in zip(part.stop_mass, whole.stop_mass):
        assert (a == b).all()
    for a, b in zip(part.correction, whole.correction):
        assert (np.asarray(a) == np.asarray(b)).all()


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_chunked_route_equals_whole_levels_float(name, monkeypatch):
    inst = random_instance(5, 4, 23, alpha=0.5)  # prefix-dependent float64
    v = VERIFIERS[name]
    whole = analyze(inst, v)
    with monkeypatch.context() as m:
        _chunked(m, 10, 15)  # 2 and 3 parents per chunk of 125
        part = analyze(inst, v)
    assert max(abs(a - b) for a, b in zip(part.tau_pmf, whole.tau_pmf)) <= 1e-15
    assert abs(part.tv_to_target - whole.tv_to_target) <= 1e-15
    assert float(np.abs(part.output_law - whole.output_law).max()) <= 1e-15
    assert float(np.abs(part.target_law - whole.target_law).max()) <= 1e-15


def test_chunks_returning_target_copies_equal_token(monkeypatch):
    """A step that returns the target rows at depth L on some chunks and an equal copy on
    others gives token verification's law (the copied and the referenced rows are put
    together in order)."""
    calls = []

    def step(state, px, qx, q, p):
        s, w, c = TOKEN_NODE.step(state, px, qx, q, p)
        if q is None:
            calls.append(1)
            if len(calls) % 2 == 0:
                c = p.copy() if isinstance(p, np.ndarray) else p.clone()
        return s, w, c

    spec = node_verifier(NodeForm(step, "forward", "token, copies"), "token-copies")
    inst = random_instance(3, 3, 24, alpha=0.5, denominator=8)
    with monkeypatch.context() as m:
        _chunked(m, 3, 3)
        calls.clear()
        got = analyze(inst, spec)
        assert len(calls) == 9  # one call per parent of depth L
    want = analyze(inst, "token")
    assert got.tau_pmf == want.tau_pmf and got.tv_to_target == want.tv_to_target == 0
    assert (np.asarray(got.output_law) == np.asarray(want.output_law)).all()


def test_error_names_the_node_among_the_whole_depth(monkeypatch):
    inst = random_instance(3, 3, 25)
    target = levels(inst.target, 0, 4, False)[3]
    bad = 17  # a node of depth 3 (of 27), in the middle of a chunk of 2 parents (6 nodes)
    key = float(target[bad, 0])

    def step(state, px, qx, q, p):
        s, w, c = BLOCK_NODE.step(state, px, qx, q, p)
        if q is None:
            w = torch.where(p[:, 0] == key, torch.full_like(w, 1.5), w)
        return s, w, c

    spec = node_verifier(NodeForm(step, "backward", "bad at one node"), "bad-node", lossless=False)
    for nodes in (2 * 3, nodes_mod.LAST_LEVEL_CHUNK_NODES):
        with monkeypatch.context() as m:
            m.setattr(nodes_mod, "LAST_LEVEL_CHUNK_NODES", nodes)
            with pytest.raises(LawError) as err:
                analyze(inst, spec)
        assert err.value.kind == "stop-sum" and err.value.where == (bad,)
        assert f"node {bad} " in str(err.value)
