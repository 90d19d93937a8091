"""The enumeration speed-ups change no law and keep the checker sound.

* SpecInfer (both schemes), SpecTr and traversal (both schemes) give the laws of their previous
  implementations (tests/previous_multipath_laws.py) on every joint outcome of prefix-dependent
  instances: exactly in rationals, to 1e-14 in float; with the search for repeated inputs on
  (batches of thousands of outcomes) and on batches whose rows come from two different
  contexts under the same drafts (where grouping by drafted tokens is wrong and must be refused).
* ``on_distinct`` refuses a grouping that the rows refute and otherwise equals the row-wise call.
* ``paths_read``: the first-path baselines' marginal enumeration equals the full one exactly in
  rationals; a false declaration is refused; a bad value is refused.
* The engine's cheap law test lets no bad law through: NaN, infinite and negative entries in
  one chunk still raise :class:`LawError` with their kind.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import previous_multipath_laws as prev
from spectheory import analyze, random_instance
from spectheory.runtime.errors import SpectheoryError
from spectheory.law import Law, LawError
from spectheory.engine.joint import path_tables
from spectheory.registry import VerifierSpec, get_verifier
from spectheory.engine.seqtree import levels
from spectheory.verifiers.specinfer import specinfer as specinfer_law
from spectheory.verifiers.multipath_baselines import block_first, token_first

# modules by path: the package exports functions of the same names
common = importlib.import_module("spectheory.verifiers.common")

PAIRS = {
    "specinfer": prev.specinfer,
    "specinfer-norep": prev.specinfer_norep,
    "spectr": prev.spectr,
    "traversal": prev.traversal,
    "traversal-iid": prev.traversal_iid,
}


def joint_inputs(inst, K: int, exact: bool, n_max: int | None = None):
    """drafts [n, K, L], q, p of every ordered joint outcome (the first n_max) below the root."""
    V, L = inst.vocab_size, inst.block_length
    tok, q, p, _ = path_tables(levels(inst.draft, 0, L, exact),
                               levels(inst.target, 0, L + 1, exact), L, V)
    f = np.arange(V ** (L * K))[:n_max]
    seq = np.stack([f // (V**L) ** (K - 1 - k) % V**L for k in range(K)], axis=1)
    if not exact:
        seq = torch.as_tensor(seq)
    return tok[seq], q[seq], p[seq]


def max_diff(a: Law, b: Law) -> float:
    if isinstance(a.stop, np.ndarray):
        return max(float(np.max(np.abs(np.asarray(x - y, dtype=object))))
                   for x, y in zip(a, b))
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_float_laws_equal_previous_on_all_joint_outcomes(name):
    inst = random_instance(3, 2, 7)  # prefix-dependent rows; 729 outcomes: repeats are searched
    d, q, p = joint_inputs(inst, 3, exact=False)
    assert d.shape[0] * 3 >= common.DISTINCT_MIN_ROWS
    new = get_verifier(name).law(d, q, p)
    old = PAIRS[name](d, q, p)
    assert max_diff(new, old) <= 1e-14


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_exact_laws_equal_previous(name, monkeypatch):
    # every row searched for repeats, as in float mode on large batches
    monkeypatch.setattr(common, "DISTINCT_MIN_ROWS", 1)
    inst = random_instance(2, 2, 3, denominator=6)
    d, q, p = joint_inputs(inst, 3, exact=True)
    new = get_verifier(name).law(d, q, p)
    old = PAIRS[name](d, q, p)
    assert new.stop.dtype == object
    assert max_diff(new, old) == 0


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_two_contexts_under_the_same_drafts_are_not_merged(name):
    """Rows of two instances interleaved under identical drafts: a key of drafted tokens groups
    rows whose q, p differ, the exact check refutes it, and the law is still the row-wise one."""
    a, b = random_instance(3, 2, 11), random_instance(3, 2, 12)
    da, qa, pa = joint_inputs(a, 3, exact=False)
    _, qb, pb = joint_inputs(b, 3, exact=False)
    odd = (torch.arange(da.shape[0]) % 2 == 1).reshape(-1, 1, 1, 1)
    q, p = torch.where(odd, qb, qa), torch.where(odd, pb, pa)
    new = get_verifier(name).law(da, q, p)
    old = PAIRS[name](da, q, p)
    assert max_diff(new, old) <= 1e-14
    # and the two contexts really give different laws on equal drafts
    assert max_diff(PAIRS[name](da, qa, pa), PAIRS[name](da, qb, pb)) > 1e-3


def test_on_distinct_refuses_a_refuted_grouping_and_matches_rowwise():
    gen = torch.Generator().manual_seed(0)
    rows = torch.rand(8, 3, generator=gen, dtype=torch.float64)
    x = rows[torch.arange(1024) % 8]  # 1024 rows, 8 distinct
    key = torch.arange(1024) % 8

    def fn(r):
        return (r.sum(dim=1), r * 2)

    out = common.on_distinct(fn, key, (x,))
    assert out is not None
    assert torch.equal(out[0], x.sum(dim=1)) and torch.equal(out[1], x * 2)
    y = x.clone()
    y[700, 1] += 1e-15  # one row differs from its group by rounding
    assert common.on_distinct(fn, key, (y,)) is None
    y[700, 1] = float("nan")
    assert common.on_distinct(fn, key, (y,)) is None
    assert common.on_distinct(fn, torch.arange(1024), (x,)) is None  # all distinct: no gain
    assert common.on_distinct(fn, key[:100], (x[:100],)) is None  # too few rows


@pytest.mark.parametrize("function", [block_first, token_first])
@pytest.mark.parametrize("drafting", ["iid", "norep"])
def test_paths_read_marginal_equals_full_enumeration_exactly(function, drafting):
    inst = random_instance(2, 2, 5, denominator=5)
    name = function.__name__.replace("_", "-")
    assert get_verifier(name).paths_read == 1
    marginal = analyze(inst, name, paths=3, drafting=drafting, route="enumerate")
    full = analyze(inst, VerifierSpec("undeclared", function, paths=None), paths=3,
                   drafting=drafting, route="enumerate")
    assert marginal.tau_pmf == full.tau_pmf
    assert list(marginal.output_law) == list(full.output_law)
    assert marginal.tv_to_target == 0


def test_paths_read_float_matches_full_enumeration():
    inst = random_instance(3, 2, 9)
    marginal = analyze(inst, "block-first", paths=3, route="enumerate")
    full = analyze(inst, VerifierSpec("undeclared", block_first, paths=None), paths=3,
                   route="enumerate")
    assert np.max(np.abs(np.asarray(marginal.tau_pmf) - np.asarray(full.tau_pmf))) <= 1e-14


def test_a_false_paths_read_declaration_is_refused():
    inst = random_instance(3, 2, 1)
    liar = VerifierSpec("liar", specinfer_law, paths=None, drafting="iid", paths_read=1)
    with pytest.raises(SpectheoryError, match="paths_read=1"):
        analyze(inst, liar, paths=3, route="enumerate")


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_paths_read_must_be_a_positive_integer(bad):
    with pytest.raises(SpectheoryError, match="paths_read"):
        VerifierSpec("x", block_first, paths=None, paths_read=bad)


@pytest.mark.parametrize("kind, value", [("nan", float("nan")), ("inf", float("inf")),
                                         ("negative", -0.25)])
def test_the_cheap_law_test_lets_no_bad_entry_through(kind, value):
    """One bad entry in one row of one chunk (stop and correction sums kept at 1 where the
    value allows it) is refused with its kind, as by the full validation."""
    calls = [0]

    def corrupt(drafts, q, p):
        stop, corr = specinfer_law(drafts, q, p)
        calls[0] += 1
        if calls[0] == 2:
            corr = corr.clone()
            row = corr[3, 1, 1]  # a view
            if kind == "negative":  # the row still sums to 1
                moved = float(row[0]) - value
                row[0] = value
                row[1] += moved
            else:
                row[0] = value
        return Law(stop, corr)

    spec = VerifierSpec("corrupt", corrupt, paths=None, drafting="iid", exact=False)
    inst = random_instance(4, 3, 0)
    with pytest.raises(LawError) as err:
        analyze(inst, spec, paths=3, route="enumerate")  # 48 chunks; the second is bad
    assert err.value.kind == kind


def naive_tau_pmf(inst, name: str, K: int, exact: bool):
    """P(tau = i) from the previous law on every joint outcome, weighted by its probability
    (a plain loop-free sum, no grouping)."""
    from spectheory.engine.joint import _norep_weight
    from spectheory.engine.seqtree import path_probabilities

    V, L = inst.vocab_size, inst.block_length
    ql = levels(inst.draft, 0, L, exact)
    d, q, p = joint_inputs(inst, K, exact)
    law = PAIRS[name](d, q, p)
    f = np.arange(V ** (L * K))
    seq = np.stack([f // (V**L) ** (K - 1 - k) % V**L for k in range(K)], axis=1)
    if not exact:
        seq = torch.as_tensor(seq)
    one = ql[0][0][:1] * 0 + 1
    qpath = path_probabilities(ql, one)[L]
    if get_verifier(name).default_drafting == "iid":
        w = qpath[seq[:, 0]]
        for k in range(1, K):
            w = w * qpath[seq[:, k]]
    else:
        tail = path_probabilities(ql[1:], ql[0][0] * 0 + 1)[L - 1]
        w = _norep_weight(seq, ql[0][0], tail, L, V)
    per = law.stop.sum(axis=1) if exact else law.stop.sum(dim=1)
    return (w.reshape(-1, 1) * per).sum(axis=0) if exact else (w.reshape(-1, 1) * per).sum(dim=0)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_engine_tau_pmf_equals_previous_laws_summed_exactly(name, monkeypatch):
    """The engine (repeats searched on every row, rows trusted as prefix rows) against the
    previous laws summed over all outcomes, in rationals."""
    monkeypatch.setattr(common, "DISTINCT_MIN_ROWS", 1)
    inst = random_instance(2, 2, 4, denominator=7)
    res = analyze(inst, name, paths=3, route="enumerate")
    assert list(res.tau_pmf) == list(naive_tau_pmf(inst, name, 3, exact=True))


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_engine_tau_pmf_equals_previous_laws_summed_float(name):
    inst = random_instance(3, 2, 8)
    res = analyze(inst, name, paths=3, route="enumerate")
    ref = naive_tau_pmf(inst, name, 3, exact=False)
    assert np.max(np.abs(np.asarray(res.tau_pmf, dtype=float) - ref.numpy())) <= 1e-14


def test_prefix_rows_are_trusted_only_for_the_engines_own_arrays():
    d, q, p = joint_inputs(random_instance(3, 2, 2), 2, exact=False)
    assert not common.engine_rows(d, q, p)
    with common.rows_follow_prefixes(d, q, p):
        assert common.engine_rows(d, q, p)
        assert not common.engine_rows(d, q.clone(), p)  # equal values, another array
    assert not common.engine_rows(d, q, p)  # reset on exit


@pytest.mark.parametrize("name", ["specinfer", "traversal-iid"])
def test_a_wrapper_changing_the_rows_inside_the_engine_is_still_compared(name, monkeypatch):
    """A K-path verifier that hands the built-in one rows that are not functions of the drafted
    prefix (odd outcomes read another instance's rows), inside the engine: the rows are not the
    engine's, so every grouping is compared, and the law is the previous implementation's.
    Every batch is searched for repeated rows (``DISTINCT_MIN_ROWS`` = 1), as large ones are."""
    monkeypatch.setattr(common, "DISTINCT_MIN_ROWS", 1)
    other = random_instance(3, 3, 1)
    _, q_other, p_other = joint_inputs(other, 3, exact=False, n_max=None)
    worst = [0.0]
    offset = [0]

    def mixed(drafts, q, p):
        n = drafts.shape[0]
        odd = (torch.arange(n) % 2 == 1).reshape(-1, 1, 1, 1)
        q2 = torch.where(odd, q_other[offset[0]:offset[0] + n], q)
        p2 = torch.where(odd, p_other[offset[0]:offset[0] + n], p)
        offset[0] += n
        law = get_verifier(name).law(drafts, q2, p2)
        worst[0] = max(worst[0], max_diff(law, PAIRS[name](drafts, q2, p2)))
        return law

    spec = VerifierSpec("mixed", mixed, paths=None, drafting="iid", exact=False)
    analyze(random_instance(3, 3, 0), spec, paths=3, route="enumerate")
    assert offset[0] == 3 ** 9
    assert worst[0] <= 1e-14


def test_the_decorator_declares_paths_read():
    """A user's first-path verifier declared with ``@verifier(paths_read=1)`` takes the
    marginal enumeration and gives the built-in baseline's law exactly; declared falsely on a
    rule that reads every path, it is refused."""
    from spectheory.registry import verifier

    @verifier(paths=None, paths_read=1)
    def my_first(drafts, q, p):
        return block_first(drafts, q, p)

    @verifier(paths=None, paths_read=1)
    def my_liar(drafts, q, p):
        return specinfer_law(drafts, q, p)

    inst = random_instance(2, 2, 5, denominator=5)
    mine = analyze(inst, my_first, paths=3, route="enumerate")
    assert my_first.spectheory_spec.paths_read == 1
    assert mine.tau_pmf == analyze(inst, "block-first", paths=3, route="enumerate").tau_pmf
    with pytest.raises(SpectheoryError, match="paths_read=1"):
        analyze(random_instance(3, 2, 1), my_liar, paths=3, route="enumerate")
