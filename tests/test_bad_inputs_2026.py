"""Bad inputs found by an outside tester, each refused in one line before any work.

Classes (one test group each):

1. divergence budgets of the frontier LP (``--tv``/``--kl`` and ``frontier_lp``): beyond the float
   range (``1e400``), NaN, infinities, negatives, ``1/0``, a billion-digit exponent, a positive
   budget that rounds to 0;
2. the ``SPECTHEORY_NUMBA`` switch set to anything but its accepted values;
3. the frontier LP's size: counted from V, L, K before it is built, refused over the default cap
   (or the user's ``--max-sequences``) and over the machine's memory, noted with stage progress
   on stderr when accepted but slow;
4. heterogeneous-vocabulary instances whose scheme enumeration is over its work limit;
5. drafted tokens out of range, negative, NaN or drawn over another vocabulary reaching GBV's
   compiled route through the Python API;
6. trees nested or chained far deeper than any analysable tree (``--tree``, ``--parents``,
   ``--choices``, ``tree_shape``).

Command-line cases run ``spectheory ARGS`` in-process: exit code 2, one line on stderr, no
traceback, nothing on stdout.
"""

from __future__ import annotations

import importlib
import json
import time
from fractions import Fraction

import numpy as np
import pytest
import torch

import spectheory as st
from cli_helpers import refused, run, write
from spectheory.inputs.instances import instance_to_dict
from spectheory.lp import frontier as fr
from spectheory.lp.result import LPError
from spectheory.runtime import limits
from spectheory.runtime.errors import InputError, OptionError, SizeLimitError, SpectheoryError

gbv_module = importlib.import_module("spectheory.verifiers.gbv")


@pytest.fixture
def small(tmp_path):
    """A prefix-dependent V = 3, L = 2 instance (exact rows) and its file."""
    inst = st.random_instance(3, 2, 0, alpha=0.5, denominator=12)
    return inst, write(tmp_path, instance_to_dict(inst))


# ----------------------------------------------------------------------------- 1. budgets

BAD_BUDGETS = [("1e400", "too large"), ("nan", "not a finite number"),
               ("inf", "not a finite number"), ("-1", ">= 0"), ("1/0", "divides by zero"),
               ("-0/0", "divides by zero"), ("-3/0", "divides by zero"),
               ("1e999999999", "exponent out of range"), ("0x10", "not a finite number"),
               ("1" * 65, "characters long")]


@pytest.mark.parametrize("opt", ["--tv", "--kl"])
@pytest.mark.parametrize("text,word", BAD_BUDGETS)
def test_cli_budget_refused(small, capsys, opt, text, word):
    _, path = small
    t0 = time.monotonic()
    refused(*run(["lp", path, "--problem", "frontier", opt, text], capsys), opt, word)
    assert time.monotonic() - t0 < 5  # a billion-digit exponent is refused, not built


@pytest.mark.parametrize("opt", ["--tv", "--kl"])
def test_cli_budget_below_float_range(small, capsys, opt):
    """1e-400 is a valid exact TV budget but rounds to 0 in float: refused there, not solved as
    0 and printed as if it were 1e-400."""
    _, path = small
    refused(*run(["lp", path, "--problem", "frontier", opt, "1e-400"], capsys),
            "below the float range", "1e-400")


def test_python_budgets():
    inst = st.random_instance(3, 2, 0, alpha=0.5, denominator=12)
    for bad in (10**400, Fraction(10**400, 3), "1e400", "1e999999999", float("nan"),
                np.float64("inf"), -Fraction(1, 3), np.bool_(True), [0.1]):
        with pytest.raises(LPError, match="budget"):
            fr.frontier_lp(inst, tv=bad, rules=())
    with pytest.raises(LPError, match="below the float range"):
        fr.frontier_lp(inst, kl=Fraction(1, 10**400), rules=())
    # the accepted forms are read exactly
    assert fr._budget("5e-2", "TV", True) == fr._budget("1/20", "TV", True) == Fraction(1, 20)
    assert fr._budget(np.int64(0), "TV", False) == 0.0
    assert fr._budget(Fraction(1, 20), "TV", False) == 0.05


# ----------------------------------------------------------------------------- 2. SPECTHEORY_NUMBA


@pytest.mark.parametrize("value", ["garbage", "2", "yes please", "-1"])
def test_numba_switch_garbage_refused(monkeypatch, capsys, value):
    monkeypatch.setenv("SPECTHEORY_NUMBA", value)
    refused(*run(["verifiers"], capsys), "SPECTHEORY_NUMBA", "0, off", "1, on")
    with pytest.raises(OptionError, match="SPECTHEORY_NUMBA"):
        gbv_module._kernels_for(torch.zeros(1, gbv_module.KERNEL_MIN_VOCAB))


@pytest.mark.parametrize("value,on", [("0", False), ("off", False), (" FALSE ", False),
                                      ("no", False), ("1", True), ("on", True), ("", True),
                                      ("Yes", True)])
def test_numba_switch_values(monkeypatch, value, on):
    monkeypatch.setenv("SPECTHEORY_NUMBA", value)
    assert limits.env_switch("SPECTHEORY_NUMBA") is on
    if not on:  # off: the torch route, whatever the size
        assert gbv_module._kernels_for(torch.zeros(1, gbv_module.KERNEL_MIN_VOCAB)) is None
    monkeypatch.delenv("SPECTHEORY_NUMBA")
    assert limits.env_switch("SPECTHEORY_NUMBA") is True


# ----------------------------------------------------------------------------- 3. frontier size


@pytest.mark.parametrize("V,L", [(3, 2), (2, 3), (4, 1)])
def test_frontier_size_counts_the_lp(V, L):
    """The counts made before building are the LP's sizes (K = 1, every path drafted)."""
    inst = st.random_instance(V, L, 1, alpha=0.5)
    res = fr.frontier_lp(inst, tv=0.1, rules=())
    n, m, _ = fr.frontier_size(V, L, 1)
    assert (res.variables, res.constraints) == (n, m)
    res2 = fr.frontier_lp(inst, tv=0.1, paths=2, rules=())
    n2, m2, _ = fr.frontier_size(V, L, 2)
    assert res2.variables <= n2 and res2.constraints <= m2


@pytest.mark.parametrize("V,L,opt", [(8, 5, ["--tv", "0.1"]), (8, 5, ["--kl", "0.1"]),
                                     (12, 4, ["--tv", "0.1"]), (12, 4, ["--kl", "0.1"]),
                                     (7, 4, ["--tv", "1/10", "--exact"])])
def test_cli_frontier_over_the_cap(tmp_path, capsys, V, L, opt):
    inst = st.random_instance(V, L, 1, alpha=0.5, denominator=8 if "--exact" in opt else None)
    path = write(tmp_path, instance_to_dict(inst))
    n, m, _ = fr.frontier_size(V, L, 1)
    t0 = time.monotonic()
    refused(*run(["lp", path, "--problem", "frontier", *opt], capsys),
            f"V = {V}, L = {L}", f"{n:,} variables", f"{m:,} constraints",
            f"default cap of {fr.FRONTIER_MAX_VARIABLES:,}", "--max-sequences")
    assert time.monotonic() - t0 < 20


def test_cli_max_sequences_is_the_users_cap(small, capsys):
    _, path = small
    n = fr.frontier_size(3, 2, 1)[0]
    refused(*run(["lp", path, "--problem", "frontier", "--tv", "0.1", "--max-sequences",
                  str(n - 1)], capsys), f"--max-sequences cap of {n - 1:,}")
    code, out, err = run(["lp", path, "--problem", "frontier", "--tv", "0.1",
                          "--max-sequences", str(n), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["variables"] <= n  # an upper bound: paths with q = 0 drop out
    for bad in ("0", "-5", "1e400", "10**12", "2.5"):
        refused(*run(["lp", path, "--problem", "frontier", "--tv", "0.1", "--max-sequences",
                      bad], capsys), "--max-sequences")


def test_huge_cap_refused_on_memory_before_allocating(tmp_path, capsys, monkeypatch):
    """--max-sequences 10^12 lets V = 16, L = 5 (1.4e8 variables) past the cap; the memory it
    needs (about 50 GiB) is refused before anything is built."""
    monkeypatch.setattr(limits, "physical_memory", lambda: 8 * 2**30)
    inst = st.random_instance(16, 5, 1, context_independent=True)
    path = write(tmp_path, instance_to_dict(inst))
    t0 = time.monotonic()
    refused(*run(["lp", path, "--problem", "frontier", "--tv", "0.1", "--max-sequences",
                  str(10**12)], capsys), "of memory", "135,336,208 variables")
    assert time.monotonic() - t0 < 10


def test_python_limit_checked():
    inst = st.random_instance(3, 2, 0, alpha=0.5)
    for bad in (0, -1, True, 1.5, "100", 10**16):
        with pytest.raises(SizeLimitError, match="limit"):
            fr.frontier_lp(inst, tv=0.1, limit=bad, rules=())
    with pytest.raises(SizeLimitError, match="cap of 100 "):
        fr.build_frontier(inst, limit=100)


def test_slow_frontier_shows_its_estimate_and_stages(small, capsys, monkeypatch):
    """An accepted size estimated over NOTE_SECONDS is announced with its estimate, then each
    stage with the time so far (the reference time is raised so a small LP counts as slow); the
    answer is the same."""
    inst, path = small
    code, out, _ = run(["lp", path, "--problem", "frontier", "--tv", "1/20", "--json"], capsys)
    quick = json.loads(out)["optimum"]
    monkeypatch.setattr(fr, "FRONTIER_SECONDS", (100, 1000.0, 2.0))
    code, out, err = run(["lp", path, "--problem", "frontier", "--tv", "1/20", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["optimum"] == quick
    notes = [line for line in err.splitlines() if line.startswith("spectheory: note:")]
    assert "estimated" in notes[0] and "147 variables" in notes[0]
    assert any("solving the TV LP" in n and "so far" in n for n in notes)
    code, out, err = run(["lp", path, "--problem", "frontier", "--kl", "0.01", "--json"], capsys)
    assert code == 0, err
    assert "Pinsker" in err and "cvxpy" in err


# ----------------------------------------------------------------------------- 5. GBV inputs


def _batch(V=40, Bn=3, K=3, L=3, seed=0):
    """Prefix-dependent rows (each path and position its own), a shared root in block 0 (the
    root-sort branch), tied ratios at tokens 0..4."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.rand(Bn, K, L, V, generator=gen, dtype=torch.float64) + 0.01
    p = torch.rand(Bn, K, L + 1, V, generator=gen, dtype=torch.float64) + 0.01
    q[..., :5], p[..., :5] = 0.02, 0.04
    q, p = q / q.sum(-1, keepdim=True), p / p.sum(-1, keepdim=True)
    q[0, :, 0], p[0, :, 0] = q[0, :1, 0], p[0, :1, 0]
    x = torch.randint(0, V, (Bn, K, L), generator=gen)
    return x, q.float(), p.float()


@pytest.fixture
def kernels_route(monkeypatch):
    """GBV's CPU rows through the compiled kernels (the threshold lowered to 1; blocks ranked one
    at a time, so that a shared root is sorted by the kernels), every kernel call counted."""
    pytest.importorskip("numba")
    monkeypatch.delenv(gbv_module.KERNEL_ENV, raising=False)
    monkeypatch.setattr(gbv_module, "KERNEL_MIN_VOCAB", 1)
    monkeypatch.setattr(gbv_module, "RANK_CHUNK_ELEMENTS", 1)  # one block at a time: root sorts
    kernels = gbv_module._kernels_for(torch.zeros(1, 1))
    assert kernels is not None
    calls = []

    class Spy:
        def __getattr__(self, name):
            fn = getattr(kernels, name)
            return lambda *a, **k: (calls.append(name), fn(*a, **k))[1]

    monkeypatch.setattr(gbv_module, "_kernels_for", lambda rows, other=None: Spy())
    return calls


def _bad_drafts(x, V):
    out = []
    for where, value in (((0, 0, 0), V), ((1, 2, 1), -1), ((2, 1, 2), V + 7), ((0, 1, 0), -V)):
        d = x.clone()
        d[where] = value
        out.append((d, str(value)))
    other = torch.randint(V, V + 20, x.shape, generator=torch.Generator().manual_seed(1))
    out.append((other, None))  # drawn over a vocabulary of V + 20 tokens
    return out


GBV_CALLS = {  # name -> (call, whether good input reaches the compiled kernels)
    "gbv": (lambda x, q, p: gbv_module.gbv(x, q, p), True),
    "gbv_mismatched_ties": (lambda x, q, p: gbv_module.gbv_mismatched_ties(x, q, p), True),
    "best_path": (lambda x, q, p: gbv_module.best_path(x, q, p, "low", {}), True),
    "drafted_rank": (lambda x, q, p: gbv_module.drafted_rank(x, q, p), False),
}


@pytest.mark.parametrize("fn", sorted(GBV_CALLS))
def test_gbv_tokens_out_of_range_refused_before_the_kernels(kernels_route, fn):
    x, q, p = _batch()
    V = q.shape[-1]
    f, uses_kernels = GBV_CALLS[fn]
    f(x, q, p)  # good input: the route runs (the kernels where it uses them)
    assert bool(kernels_route) == uses_kernels
    for d, found in _bad_drafts(x, V):
        kernels_route.clear()
        with pytest.raises(InputError, match=rf"draft tokens must lie in 0\.\.{V - 1} "
                                             rf"\(V = {V}\); found {found or ''}") as e:
            f(d, q, p)
        assert "\n" not in str(e.value) and kernels_route == []
    for d in (x.double() + 0.5, torch.full(x.shape, float("nan"))):
        with pytest.raises(InputError, match="whole numbers"):
            f(d, q, p)
    with pytest.raises(InputError, match="one vocabulary; got 41 and 40$"):
        f(x, q, torch.cat([p, p[..., :1]], -1))
    for qq, pp in ((q[:, :, :2], p), (q, p[:, :, :3]), (q[:, :2], p), (q[:1], p)):
        with pytest.raises(InputError, match="shapes do not line up"):
            f(x, qq, pp)
    with pytest.raises(InputError, match="3 dimensions"):
        f(x[0], q, p)
    assert kernels_route == []


def test_gbv_negative_token_is_not_read_from_the_end():
    """Before the check, best_path indexed a row with -1 (the last token) and returned a path."""
    x, q, p = _batch()
    d = x.clone()
    d[0, :, 0] = -1
    with pytest.raises(InputError, match="found -1"):
        gbv_module.best_path(d, q, p)


def test_gbv_row_functions_check_shapes():
    _, q, p = _batch()
    for fn in (gbv_module.rank_and_below, gbv_module.below_mass):
        with pytest.raises(InputError, match=r"one shape \[\.\.\., V\]"):
            fn(q, p[:, :, :3, :-1])


# ----------------------------------------------------------------------------- 6. trees

DEEP = 50_000


def test_tree_shape_depth_bounded_before_recursion():
    from spectheory.engine.drafttrees import MAX_TREE_DEPTH, tree_shape

    assert tree_shape(",".join(["1"] * MAX_TREE_DEPTH)).height == MAX_TREE_DEPTH
    chain = {"parents": list(range(MAX_TREE_DEPTH))}
    assert tree_shape(chain).height == MAX_TREE_DEPTH
    for shape in (",".join(["1"] * (MAX_TREE_DEPTH + 1)), ",".join(["1"] * DEEP),
                  (1,) * DEEP, {"parents": list(range(DEEP))},
                  {"choices": [[0] * k for k in range(1, MAX_TREE_DEPTH + 2)]}):
        with pytest.raises(SpectheoryError, match=f"at most {MAX_TREE_DEPTH}"):
            tree_shape(shape)


@pytest.mark.parametrize("opt,value,word", [
    ("--tree", ",".join(["1"] * DEEP), "at most 64"),
    ("--tree", "[" * DEEP + "0" + "]" * DEEP, "comma-separated positive integers"),
    ("--parents", ",".join(str(i) for i in range(DEEP)), "at most 64"),
    ("--parents", "[" * DEEP + "0" + "]" * DEEP, "comma-separated integers"),
    ("--choices", "[" * DEEP + "0" + "]" * DEEP, "nested deeper"),
    ("--choices", json.dumps([[0] * k for k in range(1, 300)]), "at most 64"),
])
def test_cli_deep_trees_refused(small, capsys, opt, value, word):
    _, path = small
    code, out, err = run(["tree", path, opt, value], capsys)
    refused(code, out, err, word)
    assert len(err) < 400


def test_deep_tree_message_does_not_echo_it_all(small, capsys):
    _, path = small
    code, out, err = run(["tree", path, "--tree", "x" * DEEP], capsys)
    refused(code, out, err, "comma-separated")
    assert len(err) < 300


def _grad_case(name):
    from spectheory.registry import get_verifier

    spec = get_verifier(name)
    K = 1 if spec.single_path else 2  # SpecHub defines two paths
    g = torch.Generator().manual_seed(5)
    q = torch.softmax(torch.randn(2, K, 3, 12, generator=g) * 2, -1)
    p = torch.softmax(torch.randn(2, K, 4, 12, generator=g) * 2, -1)
    q[:, :, 0], p[:, :, 0] = q[:, :1, 0], p[:, :1, 0]  # one root per block
    x = torch.multinomial(q.reshape(-1, 12), 1, generator=g).view(2, K, 3)
    return spec, x, q, p


def _registered():
    from spectheory.registry import registered

    return registered()


@pytest.mark.parametrize("name", _registered())
def test_rows_that_require_grad_give_the_law_of_their_values(name):
    """Every registered verifier, given rows that require grad (a model's outputs before
    ``.detach()``), returns the law of their values, bit for bit, as a table of values (no
    gradient; ``.numpy()`` works), not a torch traceback (several laws write into preallocated
    outputs, which autograd refuses): through its spec, and the laws of the node forms, GBV and
    SpecInfer called directly."""
    spec, x, q, p = _grad_case(name)
    want = spec.law(x, q, p)
    gq, gp = q.clone().requires_grad_(), p.clone().requires_grad_()
    got = spec.law(x, gq, gp)
    assert not got.stop.requires_grad and not got.correction.requires_grad
    assert np.array_equal(got.stop.numpy(), want.stop.numpy())
    assert np.array_equal(got.correction.numpy(), want.correction.numpy())
    one = (lambda t: t[:, 0]) if spec.single_path else (lambda t: t)
    for law, values in ((spec(one(x), one(gq), one(gp)), True),
                        (spec.function(one(x), one(gq), one(gp)),
                         spec.function.__name__ in IN_PLACE_LAWS)):
        stop, corr = law
        assert torch.equal(stop.detach(), one(want.stop))
        assert torch.equal(corr.detach(), one(want.correction))
        if values:
            assert not stop.requires_grad and not corr.requires_grad


#: Laws that write into preallocated outputs: they read rows that require grad as values even
#: when called directly, below their spec.
IN_PLACE_LAWS = ("token_verification", "block_verification", "gbv", "gbv_mismatched_ties",
                 "specinfer")


def _refusal_or_tables(data, exact, tol):
    """The refusal's message, or the parsed tables (their entries' types and values)."""
    from spectheory.inputs.instances import instance_from_dict

    try:
        inst = instance_from_dict(data, exact=exact, tol=tol)
    except InputError as exc:
        return str(exc)
    return [[(type(v), v) for v in np.asarray(model.level(d), dtype=object).ravel()]
            for model in (inst.draft, inst.target) for d in range(inst.block_length)]


@pytest.mark.parametrize("exact", [False, True])
def test_whole_levels_are_read_as_row_by_row(monkeypatch, exact):
    """Complete levels of canonical keys are checked a level at a time (numpy for float rows,
    integers over a common denominator for exact ones); every instance, and every refusal with
    its first bad row named, is what the row-by-row reading gives: sums off by more or less
    than the tolerance (and at it), negative entries, entries over 1, non-finite and
    non-numeric entries, two bad rows (the first named), a row too short."""
    from spectheory.inputs import instances as I

    base = instance_to_dict(st.random_instance(3, 3, 2, alpha=0.5,
                                               denominator=12 if exact else None))
    tol = 1e-6
    deep = "1,2,0"

    def bad(row, value, key=deep, model="target", also=None):
        data = json.loads(json.dumps(base))
        data[model][key][row] = value
        if also:  # a second bad row, earlier in the table order
            data[model][also][row] = value
        return data

    r = base["target"][deep]
    cases = [base]
    if exact:
        cases += [bad(0, "1/13"), bad(1, "-1/12"), bad(2, "13/12"), bad(0, "x"), bad(0, 0.5),
                  bad(0, "1/13", also="0,0"), bad(0, "2/12", model="draft", key="2")]
    else:
        cases += [bad(0, r[0] + 3 * tol), bad(0, r[0] + tol / 2), bad(0, r[0] + tol),
                  bad(0, r[0] - tol * (1 + 1e-9)), bad(1, -1e-3), bad(2, 1.5), bad(0, "nan"),
                  bad(0, float("inf")), bad(0, True), bad(0, r[0] + 1e-3, also="0,0")]
    short = json.loads(json.dumps(base))
    short["draft"]["0,1"] = short["draft"]["0,1"][:2]
    cases.append(short)
    fast = [_refusal_or_tables(c, exact, tol) for c in cases]
    monkeypatch.setattr(I, "_complete_keys", lambda *a: None)  # the row-by-row reading
    slow = [_refusal_or_tables(c, exact, tol) for c in cases]
    assert fast == slow
    accepted = [i for i, f in enumerate(fast) if not isinstance(f, str)]
    assert accepted == ([0] if exact else [0, 2, 3])  # within the tolerance, and at it
    assert "'0,0'" in fast[-3 if exact else -2]  # the first bad row in order is named
    assert "too short" in fast[-1] or "entries" in fast[-1]


def test_a_context_independent_instance_too_large_to_expand_is_refused_before_any_level():
    """check_sampler on random_instance(1000, 4, context_independent=True) built the draft
    levels 0-2 as tables (8 GB, 5-20 s) before level 3 (7.28 TiB) was refused; their sum is
    checked first. check_proposal drew 10^7 rows per instance (29 s, 2.7 GB) before refusing
    3,000 samples as too few for them."""
    import resource

    import torch

    import spectheory as st
    from spectheory.runtime.errors import SizeLimitError, SpectheoryError
    from spectheory.testing import check_proposal, check_sampler, make_sampler

    big = st.random_instance(1000, 4, 0, context_independent=True)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    with pytest.raises(SizeLimitError, match=r"levels 1\.\.3 of a depth-0 model as tables"):
        check_sampler(make_sampler("token"), "token", instances=[big], samples=2000)
    with pytest.raises(SpectheoryError, match="fewer than the 40,000,000 proposal rows drawn"):
        check_proposal(lambda q, g: (torch.multinomial(q, 1, generator=g)[:, 0], q),
                       rows=10**7, samples=3000)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500 * 1024  # KiB
    assert time.monotonic() - start < 10
    small = st.random_instance(50, 2, 0, context_independent=True)  # control: levels it can hold
    assert check_sampler(make_sampler("token"), "token", instances=[small], samples=4000).passed
