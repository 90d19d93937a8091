"""The exact engine's float route on numpy float64 (no torch) against the same route on torch and
against exact rationals.

Verifiers that declare ``numpy_float`` (token, block, GBV) run their per-node and per-draft routes
of one path, and GBV its analytic route of K paths, on numpy float64 arrays on the CPU
([`float_backend`][spectheory.engine.plan.float_backend]). The
elementwise operations are the same IEEE operations as on torch and only sums may add in another
order, so the two backends agree to within a few ulps; both agree with the exact rational law to
rounding. The backend ops themselves give torch's values on NaN, inf and zero denominators, without
warnings. A planted bug in a backend op is caught by the comparison.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
import torch

from spectheory.runtime import backend as B
from spectheory.runtime.errors import SpectheoryError
from spectheory.engine.analysis import analyze, multi_iteration_law
from spectheory.engine.lossless import check_lossless, lossless_report
from spectheory.engine.nodes import NodeForm, node_verifier, validate_nodes
from spectheory.engine.plan import NUMPY_MAX_SEQUENCES, float_backend
from spectheory.law import LawError
from spectheory.registry import get_verifier, plan, registered
from spectheory.inputs.random_instances import random_instance
from spectheory.verifiers.block import block_node
from spectheory.verifiers.token import token_node
from strategies import KINDS, make_instance

EPS = float(np.finfo(np.float64).eps)
#: numpy vs torch: a few ulps of 1 (every law entry and pmf value is in [0, 1])
ULPS = 8 * EPS
#: float vs exact rationals: rounding accumulated over L + 1 levels
ROUNDING = 1e-13

NUMPY_VERIFIERS = sorted(n for n, s in registered().items() if s.numpy_float)


#: The routes (and numbers of paths) each declared verifier is compared on: its own routes (the
#: other single-path verifiers have the per-draft route only).
ROUTES_OF = {"token": [("node", 1), ("per-draft", 1)], "block": [("node", 1), ("per-draft", 1)],
             "gbv": [("analytic", 1), ("analytic", 2), ("analytic", 3), ("per-draft", 1)]}
CASES = [(name, route, K) for name in NUMPY_VERIFIERS
         for route, K in ROUTES_OF.get(name, [("per-draft", 1)])]
#: Single-path verifiers whose float laws use torch-only operations (exp, log, sqrt of tensors).
TORCH_ONLY = ["cactus", "entropy-threshold", "entropy-verify", "typical", "typical-medusa",
              "typical-medusa-fast", "uniform-product"]


def test_the_declared_verifiers():
    """Every verifier that declares numpy float support is compared below; a new declaration
    enters the comparison by the parametrisation (this list says which run today): every
    single-path verifier but those whose float laws need torch, and GBV."""
    single = sorted(n for n, s in registered().items() if s.single_path)
    assert NUMPY_VERIFIERS == sorted(set(single) - set(TORCH_ONLY) | {"gbv"})
    assert len(NUMPY_VERIFIERS) == 22
    assert not any(s.numpy_float for n, s in registered().items() if n not in NUMPY_VERIFIERS)


def _instances():
    """Prefix-dependent instances: continuous rows, and rows on a grid of 1/6 with ties, zeros,
    p = q, one-hot and context-independent rows (every kind of the battery)."""
    out = [("dirichlet-0.5", random_instance(3, 3, 7, alpha=0.5)),
           ("dirichlet-0.2-V4", random_instance(4, 3, 8, alpha=0.2)),
           ("long-V2", random_instance(2, 5, 9, alpha=0.3))]
    out += [(f"{kind}/6", make_instance(kind, V=3, L=3, seed=11, denominator=6))
            for kind in KINDS]
    return out


INSTANCES = _instances()


def _close(a, b, tol, what):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, what
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    assert err <= tol, f"{what}: differs by {err:.3g} > {tol:.3g}"


def _compare(x, y, tol, laws=True):
    """Two analyses of the same law: pmf, E[tau], TV and both laws within ``tol``."""
    _close(x.tau_pmf, y.tau_pmf, tol, "tau pmf")
    _close([x.expected_accepted], [y.expected_accepted], 4 * tol, "E[tau]")
    _close([x.tv_to_target], [y.tv_to_target], 4 * tol, "TV")
    if laws:
        _close(x.output_law, y.output_law, tol, "output law")
        _close(x.target_law, y.target_law, tol, "target law")


@pytest.mark.parametrize("name,route,K", CASES)
@pytest.mark.parametrize("label,inst", INSTANCES, ids=[n for n, _ in INSTANCES])
def test_numpy_equals_torch_and_exact(name, route, K, label, inst):
    kw = {"paths": K} if name == "gbv" else {}
    fast = analyze(inst, name, exact=False, route=route, **kw)
    ref = analyze(inst, name, exact=False, route=route, backend="torch", **kw)
    assert (fast.backend, ref.backend, fast.route, ref.route) == ("numpy", "torch", route, route)
    _compare(fast, ref, ULPS)
    spec = get_verifier(name)
    if inst.exact and spec.exact:  # rows on a grid: the exact law of the same instance
        ex = analyze(inst, name, exact=True, route=route, **kw)
        _compare(fast, ex, ROUNDING)
        if spec.lossless:
            assert ex.tv_to_target == 0 and fast.tv_to_target <= ROUNDING


@pytest.mark.parametrize("name", NUMPY_VERIFIERS)
def test_one_result_type_per_mode_on_every_backend(name):
    inst = make_instance("sparse", V=3, L=2, seed=4, denominator=6)
    runs = [analyze(inst, name, exact=False), analyze(inst, name, exact=False, backend="torch"),
            analyze(inst, "specinfer", exact=False, paths=2)]  # a route that computes on torch
    assert [r.backend for r in runs] == ["numpy", "torch", "torch"]
    for r in runs:
        for law in (r.output_law, r.target_law):
            assert type(law) is np.ndarray and law.dtype == np.float64 and law.shape == (27,)
        assert all(type(v) is float for v in r.tau_pmf)
        assert type(r.tv_to_target) is float and type(r.expected_accepted) is float
    ex = analyze(inst, name, exact=True)
    assert ex.backend == "numpy" and ex.output_law.dtype == object
    assert all(isinstance(v, Fraction) for v in ex.output_law)
    for backend in ("auto", "torch"):
        gen, tgt, tv = multi_iteration_law(inst, name, 4, exact=False, backend=backend)
        assert type(gen) is np.ndarray and gen.dtype == np.float64 and gen.shape == (81,)
        assert type(tgt) is np.ndarray and type(tv) is float
    assert analyze(inst, name, exact=False, laws=False).output_law is None


@pytest.mark.parametrize("name,route,K", CASES)
def test_multi_iteration_and_checker_agree_across_backends(name, route, K):
    inst = random_instance(3, 2, 5, alpha=0.4)
    kw = {"paths": K} if name == "gbv" else {}
    a = multi_iteration_law(inst, name, 4, route=route, **kw)
    b = multi_iteration_law(inst, name, 4, route=route, backend="torch", **kw)
    _close(a[0], b[0], ULPS, "generated law")
    _close(a[1], b[1], ULPS, "target law")
    _close([a[2]], [b[2]], 4 * ULPS, "TV")
    for n_tokens in (None, 4):
        x = check_lossless(name, inst, n_tokens=n_tokens, route=route, **kw)
        y = check_lossless(name, inst, n_tokens=n_tokens, route=route, backend="torch", **kw)
        assert x.lossless == y.lossless == get_verifier(name).lossless
        assert x.offending == y.offending
        assert abs(x.max_difference - y.max_difference) <= 4 * ULPS


def test_lossless_report_reads_either_backend_alike():
    """The report of a lossy law names the same sequence from numpy arrays and torch tensors."""
    out = np.array([0.25, 0.25, 0.3, 0.2])
    tgt = np.array([0.25, 0.25, 0.25, 0.25])
    a = lossless_report(out, tgt, 0.05, 2, 2, False)
    b = lossless_report(torch.from_numpy(out), torch.from_numpy(tgt), 0.05, 2, 2, False)
    assert not a.lossless and a.offending == b.offending == (1, 0)
    assert a.output_probability == b.output_probability == 0.3
    assert a.max_difference == b.max_difference == pytest.approx(0.05, abs=1e-15)


# ----------------------------------------------------------------------------- which backend


def test_backend_is_decided_by_declarations():
    block, gbv = plan("block"), plan("gbv", 2)
    assert float_backend(block, "node") == "numpy"
    assert float_backend(block, "per-draft") == "numpy"
    assert float_backend(block, "node", backend="torch") == "torch"
    assert float_backend(block, "node", device="cuda:0") == "torch"  # no CUDA needed to decide
    assert float_backend(gbv, "analytic") == "numpy"  # K paths, on the analytic route only
    assert float_backend(gbv, "enumerate") == "torch"
    assert float_backend(plan("specinfer", 2), "tree") == "torch"
    assert float_backend(plan("typical"), "per-draft") == "torch"  # no declaration
    assert float_backend(block, "node", exact=True) == "numpy"  # Fractions
    for how, route, kw, words in [
            (gbv, "enumerate", {}, "'enumerate' route with 2 path"),
            (plan("typical"), "per-draft", {}, "does not declare numpy float"),
            (block, "node", {"device": "cuda"}, "not the CPU")]:
        with pytest.raises(SpectheoryError, match=words):
            float_backend(how, route, backend="numpy", **kw)
    big = NUMPY_MAX_SEQUENCES + 1  # large analyses pay for torch's import once
    assert float_backend(block, "node", sequences=NUMPY_MAX_SEQUENCES) == "numpy"
    assert float_backend(block, "node", sequences=big) == "torch"
    assert float_backend(block, "node", backend="numpy", sequences=big) == "numpy"
    with pytest.raises(SpectheoryError, match="unknown backend 'jax'"):
        float_backend(block, "node", backend="jax")
    with pytest.raises(SpectheoryError, match="exact rationals"):
        float_backend(block, "node", backend="torch", exact=True)


def test_the_split_executor_computes_floats_on_torch():
    inst = random_instance(3, 2, 1, alpha=0.5)
    split = analyze(inst, "block", executor="local", split_depth=1)
    assert split.backend == "torch" and split.output_law.dtype == np.float64
    _compare(split, analyze(inst, "block"), ULPS)
    with pytest.raises(SpectheoryError, match="computes floats on torch"):
        analyze(inst, "block", executor="local", backend="numpy")
    ex = make_instance("sparse", V=3, L=2, seed=4, denominator=6)
    assert analyze(ex, "block", executor="local").backend == "numpy"  # Fractions
    with pytest.raises(SpectheoryError, match="exact rationals"):
        analyze(ex, "block", executor="local", backend="torch")


def test_the_size_rule_reaches_the_engine(monkeypatch):
    import spectheory.engine.plan as plan_module

    inst = random_instance(3, 2, 1, alpha=0.5)  # 27 sequences; 3 iterations: 9 x 27
    monkeypatch.setattr(plan_module, "NUMPY_MAX_SEQUENCES", 26)
    assert analyze(inst, "block").backend == "torch"
    assert analyze(inst, "block", backend="numpy").backend == "numpy"
    monkeypatch.setattr(plan_module, "NUMPY_MAX_SEQUENCES", 27)
    assert analyze(inst, "block").backend == "numpy"
    calls = []
    real = plan_module.float_backend
    monkeypatch.setattr("spectheory.engine.analysis.float_backend",
                        lambda *a, **k: calls.append(a[5]) or real(*a, **k))
    multi_iteration_law(inst, "block", 3)
    assert calls == [9 * 27]


def test_user_verifiers_keep_torch():
    """A function given as module:function receives torch tensors in float mode (as documented),
    also when it carries a spec that declares numpy floats; so does a bare callable."""
    spec = get_verifier("numpy_float_user:declared")
    assert spec.node is not None and not spec.numpy_float
    inst = random_instance(3, 2, 1, alpha=0.5)
    res = analyze(inst, "numpy_float_user:spy")
    assert res.backend == "torch" and res.route == "per-draft"
    import numpy_float_user

    assert numpy_float_user.SEEN and all(numpy_float_user.SEEN)  # every call got tensors
    assert analyze(inst, "numpy_float_user:declared").backend == "torch"
    block = get_verifier("block").function
    assert analyze(inst, lambda d, q, p: block(d, q, p)).backend == "torch"
    with pytest.raises(SpectheoryError, match="does not declare numpy float"):
        analyze(inst, "numpy_float_user:declared", backend="numpy")


# ----------------------------------------------------------------------------- backend ops


SPECIAL = np.array([0.0, -0.0, 1.0, 0.5, np.inf, -np.inf, np.nan, 1e-310, 1e308])


def _same(a, b, ulps=0):
    """Equal arrays (within ``ulps`` units of the last place), NaN and inf in the same places (the
    torch side read as numpy)."""
    b = b.numpy() if isinstance(b, torch.Tensor) else b
    if ulps:
        np.testing.assert_allclose(np.asarray(a), b, rtol=ulps * EPS, atol=1e-300)
    else:
        np.testing.assert_array_equal(np.asarray(a), b)


def test_backend_ops_on_special_values_are_torchs_without_warnings():
    num, den = np.meshgrid(SPECIAL, SPECIAL)
    num, den = num.reshape(-1), den.reshape(-1)
    tn, td = torch.from_numpy(num), torch.from_numpy(den)
    with np.errstate(all="ignore"):
        diff = num - den
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail here
        _same(B.safe_div(num, den, 7.0), B.safe_div(tn, td, torch.full_like(td, 7.0)))
        _same(B.minimum(num, 1), B.minimum(tn, 1))
        _same(B.maximum(num, den), B.maximum(tn, td))
        _same(B.positive_part(diff), B.positive_part(tn - td))
        _same(B.where(den == 0, num, den), B.where(td == 0, tn, td))
        grid = np.stack([num, den], axis=1)
        tg = torch.from_numpy(grid)
        _same(B.sum(grid, axis=1), B.sum(tg, axis=1))
        _same(B.cumprod(grid, axis=1), B.cumprod(tg, axis=1))
        _same(B.cumsum(grid, axis=1), B.cumsum(tg, axis=1))
        _same(B.abs(num), B.abs(tn))
        _same(B.sum(np.zeros((0, 3)), axis=0), B.sum(torch.zeros((0, 3), dtype=torch.float64),
                                                    axis=0))
        for descending in (False, True):  # NaN ranks as the largest value, ties stay in order
            _same(B.argsort(grid.T, descending=descending),
                  B.argsort(tg.T, descending=descending))


def test_numpy_sums_along_any_axis_are_accurate():
    """A sum along an axis that is not the last one adds pairwise, as along the last one (a
    running sum over 32,768 terms was 16 ulps off): within an ulp of math.fsum, as torch's, and
    the per-draft laws of V^L = 1,296 and 1,024 drafts stay within 8 ulps of torch's."""
    import math

    x = np.random.default_rng(0).random((32768, 3))
    exact = np.array([math.fsum(x[:, j]) for j in range(3)])
    for got in (B.sum(x, axis=0), B.sum(x.reshape(4, 8192, 3), axis=1).sum(axis=0),
                B.sum(x, axis=-2, keepdims=True)[0]):
        assert np.all(np.abs(got - exact) <= 2 * np.spacing(exact))
    assert B.sum(x.reshape(4, 8192, 3), axis=1, keepdims=True).shape == (4, 1, 3)
    for inst in (make_instance("context_independent", V=6, L=4, seed=24),
                 random_instance(2, 10, 3, alpha=0.5)):
        for name in ("greedy", "strict", "block"):
            fast = analyze(inst, name, exact=False, route="per-draft")
            ref = analyze(inst, name, exact=False, route="per-draft", backend="torch")
            assert (fast.backend, ref.backend) == ("numpy", "torch")
            _compare(fast, ref, ULPS)


@pytest.mark.parametrize("step", [token_node, block_node])
def test_node_steps_on_special_values_are_torchs(step):
    """Both node rules on nodes with zero, tiny, infinite and NaN drafted probabilities give the
    same weights and corrections on numpy and torch (to an ulp or two: torch forms block
    verification's residual mass as -sum(q - w p) with fused multiply-adds), NaN and inf in the
    same places, with no warning."""
    rng = np.random.default_rng(3)
    n, V = len(SPECIAL) ** 2, 3
    px, qx = (a.reshape(-1) for a in np.meshgrid(SPECIAL, SPECIAL))
    state = rng.random(n)
    q = rng.dirichlet(np.ones(V), n)
    p = rng.dirichlet(np.ones(V), n)
    p[:7] = q[:7]  # ties: zero residual rows
    p[7:12] = np.nan
    t = {k: torch.from_numpy(v.copy()) for k, v in dict(state=state, px=px, qx=qx, q=q, p=p).items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for qrow, trow in ((q, t["q"]), (None, None)):
            got = step(state, px, qx, qrow, p)
            want = step(t["state"], t["px"], t["qx"], trow, t["p"])
            for a, b in zip(got, want):
                if a is None:
                    assert b is None
                    continue
                _same(a, b, ulps=4)


@pytest.mark.parametrize("kind,weight,corr", [  # two offending entries: the first is named
    ("nan", [0.5, np.nan, np.nan], [[0.5, 0.5], [1.0, 0.0], [1.0, 0.0]]),
    ("inf", [0.5, np.inf, np.inf], [[0.5, 0.5], [1.0, 0.0], [1.0, 0.0]]),
    ("negative", [0.5, 0.2, 0.2], [[0.5, 0.5], [1.5, -0.5], [-0.5, 1.5]]),
    ("stop-sum", [0.5, 1.5, 1.5], [[0.5, 0.5], [1.0, 0.0], [1.0, 0.0]]),
    ("correction-sum", [0.5, 1.0, 1.0], [[0.5, 0.5], [0.7, 0.0], [0.0, 0.7]]),
])
def test_node_validation_refuses_alike_on_both_backends(kind, weight, corr):
    msgs = []
    for conv in (np.array, lambda x: torch.tensor(x, dtype=torch.float64)):
        with pytest.raises(LawError) as err:
            validate_nodes(conv(weight), conv(corr), 2, False, "v", offset=4)
        assert err.value.kind == kind
        msgs.append((str(err.value), err.value.where))
    assert msgs[0] == msgs[1]
    assert msgs[0][1][0] == 5  # node 1 of the chunk, offset 4
    validate_nodes(np.array([0.5, 1.0]), np.array([[0.5, 0.5], [1.0, 0.0]]), 2, False)


def test_a_nan_node_rule_is_refused_on_the_numpy_route():
    """A declared numpy node form whose weights are 0/0 gets no law on the numpy route either,
    and numpy's division warns no more than torch's would (the engine's own errstate)."""
    def bad(state, px, qx, q, p):
        w = B.ones_like(p[:, 0]) if px is None else (px - px) / (qx - qx)  # 0/0 = NaN
        return None, w, p

    spec = node_verifier(NodeForm(bad, "forward"), "nan-rule", numpy_float=True)
    inst = random_instance(3, 2, 1, alpha=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(LawError, match="NaN node weight at depth 1") as err:
            analyze(inst, spec)
    assert err.value.kind == "nan"


# ----------------------------------------------------------------------------- planted bugs


@pytest.mark.parametrize("bug", ["safe_div-fallback", "minimum-scaled", "sum-float32",
                                 "cumprod-as-cumsum", "argsort-descending-reversed"])
def test_a_planted_backend_bug_is_caught(monkeypatch, bug):
    """A wrong numpy float branch of a backend op (the torch and exact branches intact) makes the
    numpy route differ from the torch route, or refuse a law: the comparison fails."""
    real = {k: getattr(B, k) for k in ("safe_div", "minimum", "sum", "cumprod", "argsort")}

    def numpy_only(name, wrong):
        def op(*args, **kw):
            a = args[0]
            if isinstance(a, np.ndarray) and a.dtype == np.float64:
                return wrong(*args, **kw)
            return real[name](*args, **kw)
        monkeypatch.setattr(B, name, op)

    if bug == "safe_div-fallback":  # zeros where the denominator is 0, not the fallback
        numpy_only("safe_div", lambda n, d, f: real["safe_div"](n, d, 0.0))
    elif bug == "minimum-scaled":  # off by 1e-9 relative
        numpy_only("minimum", lambda a, b: real["minimum"](a, b) * (1 - 2**-30))
    elif bug == "sum-float32":  # summed in single precision
        numpy_only("sum", lambda a, axis, keepdims=False:
                   real["sum"](a.astype(np.float32), axis, keepdims).astype(np.float64))
    elif bug == "cumprod-as-cumsum":
        numpy_only("cumprod", lambda a, axis: B.cumsum(a, axis))
    else:  # descending as an ascending sort read backwards: equal keys come out reversed
        numpy_only("argsort", lambda a, axis=-1, descending=False:
                   np.flip(np.argsort(a, axis=axis, kind="stable"), axis) if descending
                   else real["argsort"](a, axis, descending))
    # the scan of stop tables (per-draft); GBV's rank order (its analytic route, K = 2)
    name, route, kw = {"cumprod-as-cumsum": ("block", "per-draft", {}),
                       "argsort-descending-reversed": ("gbv", "analytic", {"paths": 2})}.get(
                           bug, ("block", "node", {}))
    caught = 0
    for _, inst in INSTANCES:
        fast = ref = None
        try:
            fast = analyze(inst, name, exact=False, route=route, **kw)
            ref = analyze(inst, name, exact=False, route=route, backend="torch", **kw)
            _compare(fast, ref, ULPS)
        except (AssertionError, LawError):
            caught += 1
            assert ref is None or ref.backend == "torch"
    assert caught > 0


# ----------------------------------------------------------------------------- command line


def test_the_backend_option_of_exact_and_check(tmp_path, capsys):
    """``--backend`` reaches the engine: ``exact --json`` says what computed the law (numpy by
    default on a small instance, torch when asked, the same numbers within a few ulps); ``check``
    gives the same verdict on both; numpy where it cannot run, torch in exact mode and an
    unknown name are refused in one line with exit 2."""
    import json

    from cli_helpers import run, write
    from spectheory.inputs.instances import instance_to_dict

    inst = write(tmp_path, instance_to_dict(random_instance(3, 2, 6, alpha=0.4)))
    objs = {}
    for backend in ("auto", "numpy", "torch"):
        code, out, err = run(["exact", inst, "--verifier", "hsd", "--backend", backend,
                              "--json"], capsys)
        assert code == 0 and err == ""
        objs[backend] = json.loads(out)
    assert [objs[b]["backend"] for b in ("auto", "numpy", "torch")] == ["numpy", "numpy", "torch"]
    _close(objs["numpy"]["tau_pmf"], objs["torch"]["tau_pmf"], ULPS, "tau pmf")
    for backend in ("numpy", "torch"):
        code, out, _ = run(["check", inst, "--verifier", "strict", "--tokens", "4", "--backend",
                            backend, "--json"], capsys)
        assert code == 0 and json.loads(out)["lossless"] is True
    grid = write(tmp_path, instance_to_dict(random_instance(3, 2, 6, denominator=12)), "g.json")
    for path, argv, words in [
            (inst, ["--verifier", "typical", "--backend", "numpy"],
             "backend 'numpy' cannot run here: verifier 'typical' does not declare"),
            (grid, ["--exact", "--backend", "torch"], "drop --exact"),
            (inst, ["--backend", "jax"], "invalid choice: 'jax'")]:
        for command in ("exact", "check"):
            code, out, err = run([command, path] + argv, capsys)
            assert code == 2 and out == "" and words in err, command
            assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_an_instance_with_a_non_finite_row_is_refused(value):
    """An Instance built in Python (files are checked when read) whose tables hold NaN or inf is
    refused before any analysis, on both backends and every entry point, naming the prefix: its
    every number would otherwise be NaN."""
    from spectheory.inputs.instances import Instance
    from spectheory.inputs.models import TableModel

    inst = random_instance(3, 2, 0)
    tables = [t.copy() for t in inst.draft.tables]
    tables[1][2, 1] = value  # after the prefix (2,)
    bad = Instance(3, 2, inst.target, TableModel(3, tuple(tables)))
    words = rf"draft: the row after prefix \(2,\) has a non-finite entry \({value}\)"
    for call in (lambda: analyze(bad, "greedy"), lambda: analyze(bad, "greedy", backend="torch"),
                 lambda: analyze(bad, "gbv", paths=2), lambda: check_lossless("block", bad),
                 lambda: multi_iteration_law(bad, "token", 4)):
        with pytest.raises(SpectheoryError, match=words):
            call()
