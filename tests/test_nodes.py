"""Per-node route of the exact engine vs the per-draft route, for node-form verifiers (token,
block, and verifiers declared from a node form): equal to 1e-14 in float64 and exactly in
rationals, on prefix-dependent and degenerate instances; node quantities validated."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from spectheory.runtime import backend as Bk
from spectheory.runtime.errors import SpectheoryError
from spectheory.engine.analysis import analyze, multi_iteration_law
from spectheory.engine.lossless import check_lossless
from spectheory.engine.plan import resolve_route
from spectheory.law import LawError
from spectheory.engine.nodes import NodeForm, law_from_nodes, node_verifier
from spectheory.inputs.random_instances import random_instance
from spectheory.registry import get_verifier, plan, verifier
from spectheory.cli.report import toy_instance
from spectheory.verifiers import block_verification, token_verification
from spectheory.verifiers.block import BLOCK_NODE
from spectheory.verifiers.token import TOKEN_NODE
from strategies import KINDS, make_instance

TOL = 1e-14


def _laws_equal(a, b, exact):
    if exact:
        assert a.tau_pmf == b.tau_pmf
        assert a.tv_to_target == b.tv_to_target
        assert (np.asarray(a.output_law) == np.asarray(b.output_law)).all()
        assert (np.asarray(a.target_law) == np.asarray(b.target_law)).all()
        return
    assert max(abs(x - y) for x, y in zip(a.tau_pmf, b.tau_pmf)) <= TOL
    assert abs(a.expected_accepted - b.expected_accepted) <= 10 * TOL
    assert abs(a.tv_to_target - b.tv_to_target) <= TOL
    assert float(np.abs(a.output_law - b.output_law).max()) <= TOL
    assert float(np.abs(a.target_law - b.target_law).max()) <= TOL


def _both(inst, name, **kw):
    node = analyze(inst, name, route="node", **kw)
    draft = analyze(inst, name, route="per-draft", **kw)
    assert node.route == "node" and draft.route == "per-draft"
    return node, draft


@pytest.mark.parametrize("name", ["token", "block"])
@pytest.mark.parametrize("V,L,alpha,seed", [(2, 1, 1.0, 0), (2, 5, 0.3, 1), (3, 3, 1.0, 2),
                                            (4, 3, 0.1, 3), (5, 2, 4.0, 4), (3, 4, 0.5, 5)])
def test_routes_agree_float_prefix_dependent(name, V, L, alpha, seed):
    inst = random_instance(V, L, seed, alpha=alpha)  # prefix-dependent rows
    _laws_equal(*_both(inst, name), exact=False)


@pytest.mark.parametrize("name", ["token", "block"])
@pytest.mark.parametrize("kind", KINDS)
def test_routes_agree_exact_degenerate(name, kind):
    """Exactly equal in rationals, also with zeros, p = q, one-hot rows and context-independent
    rows."""
    inst = make_instance(kind, V=3, L=3, seed=11, denominator=6)
    node, draft = _both(inst, name)
    _laws_equal(node, draft, exact=True)
    assert node.tv_to_target == 0  # token and block are lossless


@pytest.mark.parametrize("name", ["token", "block"])
@pytest.mark.parametrize("kind", KINDS)
def test_routes_agree_float_degenerate(name, kind):
    inst = make_instance(kind, V=3, L=3, seed=12)
    _laws_equal(*_both(inst, name), exact=False)


def test_toy_vector_on_node_route():
    inst = toy_instance(exact=True)
    assert analyze(inst, "token").route == "node"
    assert analyze(inst, "token").expected_accepted == Fraction(10, 9)
    assert analyze(inst, "block").expected_accepted == Fraction(11, 9)
    assert analyze(inst, "block").tau_pmf == [Fraction(1, 3), Fraction(1, 9), Fraction(5, 9)]


@pytest.mark.parametrize("name", ["token", "block"])
def test_tv_without_laws(name):
    inst = random_instance(3, 4, 7, alpha=0.5)
    full = analyze(inst, name)
    lean = analyze(inst, name, laws=False)
    assert lean.output_law is None and lean.target_law is None
    assert lean.tau_pmf == full.tau_pmf
    assert abs(lean.tv_to_target - full.tv_to_target) <= TOL
    ex = random_instance(3, 3, 8, denominator=12)
    assert analyze(ex, name, laws=False).tv_to_target == 0


@pytest.mark.parametrize("name", ["token", "block"])
def test_multi_iteration_and_checker_routes(name):
    inst = random_instance(2, 2, 3, alpha=0.5, denominator=10)
    a = multi_iteration_law(inst, name, 4, route="node")
    b = multi_iteration_law(inst, name, 4, route="per-draft")
    assert (a[0] == b[0]).all() and a[2] == b[2] == 0
    for route in ("node", "per-draft"):
        assert check_lossless(name, inst, route=route).lossless


def test_per_draft_law_is_derived_from_the_node_rule():
    """The registered law functions are the node rules along each draft."""
    inst = random_instance(3, 3, 9, alpha=0.5)
    from spectheory.engine.seqtree import levels, sequence_tokens

    ql, pl = levels(inst.draft, 0, 3, False), levels(inst.target, 0, 4, False)
    f = torch.arange(27)
    drafts = sequence_tokens(f, 3, 3)
    q = torch.stack([ql[j][f // 3 ** (3 - j)] for j in range(3)], 1)
    p = torch.stack([pl[j][f // 3 ** (3 - j)] for j in range(4)], 1)
    for fn, form in ((block_verification, BLOCK_NODE), (token_verification, TOKEN_NODE)):
        a, b = fn(drafts, q, p), law_from_nodes(form, drafts, q, p)
        assert torch.equal(a.stop, b.stop) and torch.equal(a.correction, b.correction)
        assert get_verifier(fn.__name__.split("_")[0]).node is form


# ----------------------------------------------------------------------------- user node forms


def _bonus_uniform_step(state, px, qx, q, p):
    """Token verification whose bonus token is uniform (lossy; correction at L is not p)."""
    a = Bk.ones_like(p[:, 0]) if px is None else Bk.minimum(Bk.safe_div(px, qx, Bk.scalar(px, 1)), 1)
    if q is None:
        V = p.shape[1]
        return None, a, Bk.full(p.shape, Fraction(1, V) if Bk.is_exact(p) else 1 / V, p)
    res = Bk.positive_part(p - q)
    return None, a, Bk.safe_div(res, Bk.sum(res, axis=-1, keepdims=True), p)


BONUS_UNIFORM = NodeForm(_bonus_uniform_step, "forward", "token, uniform bonus token")


@pytest.mark.parametrize("exact", [False, True])
def test_user_node_form_generic_last_level(exact):
    spec = node_verifier(BONUS_UNIFORM, "bonus-uniform", lossless=False)
    assert spec.routes() == ["node", "per-draft"]
    inst = random_instance(3, 2, 4, alpha=0.3, denominator=20 if exact else None)
    node, draft = _both(inst, spec)
    _laws_equal(node, draft, exact)
    assert node.tv_to_target > 0.01
    lean = analyze(inst, spec, laws=False)
    assert lean.tv_to_target == node.tv_to_target if exact else \
        abs(lean.tv_to_target - node.tv_to_target) <= TOL
    rep = check_lossless(spec, inst)
    assert not rep.lossless and rep.offending is not None


def test_decorator_declares_node_form():
    @verifier(node=BLOCK_NODE, name="my-block")
    def my_block(drafts, q, p):
        return law_from_nodes(BLOCK_NODE, drafts, q, p)

    spec = my_block.spectheory_spec
    assert spec.node is BLOCK_NODE and spec.node_form == BLOCK_NODE.formula
    inst = random_instance(3, 3, 2)
    assert analyze(inst, my_block).route == "node"
    # the same rule on the same backend (a decorated function does not declare numpy floats)
    assert analyze(inst, my_block).backend == "torch"
    assert analyze(inst, my_block).tau_pmf == analyze(inst, "block", backend="torch").tau_pmf


def test_route_choice_and_errors():
    assert resolve_route(plan("block")) == "node"
    assert resolve_route(plan("block"), "per-draft") == "per-draft"
    assert resolve_route(plan("uniform-product")) == "per-draft"
    with pytest.raises(SpectheoryError, match="not available"):
        resolve_route(plan("uniform-product"), "node")
    with pytest.raises(SpectheoryError, match="unknown route"):
        resolve_route(plan("block"), "fast")
    with pytest.raises(SpectheoryError, match="not available"):
        resolve_route(plan("specinfer", paths=2), "node")


# ----------------------------------------------------------------------------- validation


def _bad(kind):
    def step(state, px, qx, q, p):
        s, w, c = BLOCK_NODE.step(state, px, qx, q, p)
        if q is None or state is None:
            return s, w, c
        if kind == "nan":
            c = c.clone()
            c[0, 0] = float("nan")
        elif kind == "negative":
            c = c.clone()
            c[0, 0] -= 2.0
            c[0, 1] += 2.0
        elif kind == "weight":
            w = w + 1.5
        elif kind == "sum":
            c = c * 0.5
        return s, w, c

    return node_verifier(NodeForm(step, "backward", kind), f"bad-{kind}", lossless=False)


@pytest.mark.parametrize("kind,law_kind", [("nan", "nan"), ("negative", "negative"),
                                           ("weight", "stop-sum"), ("sum", "correction-sum")])
def test_bad_node_quantities_raise(kind, law_kind):
    inst = random_instance(3, 3, 1)
    with pytest.raises(LawError) as err:
        analyze(inst, _bad(kind))
    assert err.value.kind == law_kind
    with pytest.raises(LawError):  # the per-draft route refuses the same verifier
        analyze(inst, _bad(kind), route="per-draft")


def test_root_weight_must_be_one():
    def step(state, px, qx, q, p):
        s, w, c = TOKEN_NODE.step(state, px, qx, q, p)
        return s, (w * 0.5 if px is None else w), c

    with pytest.raises(LawError) as err:
        analyze(random_instance(2, 2, 0), node_verifier(NodeForm(step, "forward"), "half"))
    assert err.value.kind == "stop-sum"
