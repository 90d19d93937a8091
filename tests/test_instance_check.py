"""An `Instance` built in Python is checked at the entry of every engine and LP
(`spectheory.inputs.instances.check_instance`), as a file's instance is when it is read.

Without the check, such an instance reached the engines as given: a target row summing to 3 gave
a total variation of 4.0 and E[tau+1] = 3, a draft row summing to 2 was quietly normalised and
the verdict was "lossless", and an LP reported an optimum of 3.0. Each kind of bad instance is
refused here in one line naming the model, the depth and the prefix, at every entry point; valid
instances built in Python (prefix-dependent rows, ties, zeros, float rows off 1 by 1e-7, exact
rows) give the same numbers as the same instance read from its JSON."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

import spectheory as st
from spectheory import lp
from spectheory.engine import analysis, lossless, sampling
from spectheory.inputs import instances as instances_mod
from spectheory.inputs.instances import Instance, instance_from_dict, instance_to_dict
from spectheory.inputs.models import TableModel, context_independent as ci
from spectheory.runtime.errors import InstanceError
from spectheory.testing.checks.lossless import check_lossless_battery
from spectheory.toy_models import divergence


def _raw(row):
    """A context-independent model of ``row`` as given (``context_independent`` refuses a row
    that is no distribution when the model is made; these are for the instance check)."""
    return TableModel(len(row), (np.array([row], dtype=np.float64),))


def _tables(seed, V=3, L=2, exact=False):
    """Prefix-dependent rows on a grid of 1/4: ties and zeros."""
    rng = np.random.default_rng(seed)

    def table(d):
        rows = rng.multinomial(4, np.ones(V) / V, size=V**d) / 4
        return np.vectorize(lambda v: F(v).limit_denominator(4), otypes=[object])(rows) \
            if exact else rows
    return TableModel(V, tuple(table(d) for d in range(L + 1))), \
        TableModel(V, tuple(table(d) for d in range(L)))


def _with(model, d, row, values):
    tables = [t.copy() for t in model.tables]
    tables[d][row] = values
    return TableModel(model.vocab_size, tuple(tables))


#: (what is wrong, instance, words the refusal must hold)
def _bad_cases():
    p, q = _tables(1)
    pe, qe = _tables(1, exact=True)
    return [
        ("target row sums to 3", Instance(3, 2, _raw([1., 1, 1]), ci([.2, .3, .5])),
         ["target", "prefix ()", "sums to 3"]),
        ("draft row sums to 2", Instance(3, 2, ci([.2, .3, .5]), _raw([2., 0, 0])),
         ["draft", "sums to 2"]),
        ("prefix-dependent row off", Instance(3, 2, _with(p, 2, 5, [.5, .5, .5]), q),
         ["target", "prefix (1, 2)", "sums to 1.5"]),
        ("negative entry", Instance(3, 2, p, _with(q, 1, 2, [-.25, .75, .5])),
         ["draft", "prefix (2,)", "negative"]),
        ("nan", Instance(3, 2, _with(p, 1, 0, [np.nan, .5, .5]), q),
         ["target", "prefix (0,)", "non-finite", "nan"]),
        ("inf", Instance(3, 2, p, _with(q, 0, 0, [np.inf, 0, 0])), ["draft", "non-finite"]),
        ("exact row off", Instance(3, 2, _with(pe, 1, 1, [F(1), F(1), F(0)]), qe),
         ["target", "prefix (1,)", "sums to 2", "not exactly 1"]),
        ("exact row short", Instance(3, 2, pe, _with(qe, 1, 2, [F(1, 4)] * 3)),
         ["draft", "prefix (2,)", "sums to 3/4"]),
        ("exact negative", Instance(3, 2, pe, _with(qe, 0, 0, [F(1, 2), F(-1, 2), F(1)])),
         ["draft", "-1/2", "not a probability"]),
        ("float in an exact table",
         Instance(3, 2, _with(pe, 0, 0, np.array([F(1, 2), 0.25, F(1, 4)], dtype=object)), qe),
         ["target", "0.25", "float"]),
        ("exact and float mixed", Instance(3, 2, pe, q), ["float", "exact"]),
        ("vocabulary lies", Instance(4, 2, ci([.2, .3, .5]), ci([.2, .3, .5])),
         ["vocab_size 3", "instance 4"]),
        ("table of the wrong shape",
         Instance(3, 2, TableModel(3, (p.tables[0], p.tables[2])), q), ["depth 1", "[3, 3]"]),
        ("not an array", Instance(3, 2, TableModel(3, ([[.2, .3, .5]],)), q),
         ["depth 0", "list", "numpy"]),
        ("block length 0", Instance(3, 0, p, q), ["block_length = 0", "1..64"]),
        ("block length a string", Instance(3, "2", p, q), ["block_length", "'2'", "integer"]),
        ("vocabulary a bool", Instance(True, 2, p, q), ["vocab_size", "integer"]),
        ("target None", Instance(3, 2, None, q), ["target", "NoneType", "TableModel"]),
    ]


BAD = _bad_cases()

ENTRY_POINTS = {
    "analyze": lambda i: st.analyze(i, "token"),
    "check_lossless": lambda i: st.check_lossless("token", i),
    "check_tree_lossless": lambda i: lossless.check_tree_lossless("specinfer", i, (2, 1)),
    "analyze_multipath": lambda i: analysis.analyze_multipath(i, "specinfer", 2),
    "multi_iteration_law": lambda i: st.multi_iteration_law(i, "block", 2),
    "node_budget_lp": lambda i: lp.node_budget_lp(i),
    "coupling_bound": lambda i: lp.coupling_bound(i),
    "sample_drafts": lambda i: sampling.sample_drafts(i, 2, 5),
    "instance_to_dict": instance_to_dict,
    "check_lossless_battery": lambda i: check_lossless_battery("token", [i]),
    "mean_acceptance": divergence.mean_acceptance,
}


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_instance_refused_in_one_line_naming_the_problem(case):
    _, inst, words = case
    with pytest.raises(InstanceError) as err:
        instances_mod.check_instance(inst)
    msg = str(err.value)
    assert "\n" not in msg and len(msg) < 300
    for w in words:
        assert w in msg, (w, msg)
    assert not getattr(inst, "_checked", False)  # a refusal is not remembered as a pass


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_refuses_what_gave_wrong_numbers(entry):
    """The instances that gave TV = 4.0, a "lossless" verdict on a draft row summing to 2, an
    LP optimum of 3.0 and an acceptance rate of -0.95 are refused at every entry point, with the
    same line as the check."""
    for _, inst, words in BAD[:3]:
        for given in (inst, inst.to_float()):  # a conversion does not make it checked
            with pytest.raises(InstanceError) as err:
                ENTRY_POINTS[entry](given)
            assert all(w in str(err.value) for w in words), str(err.value)


@pytest.mark.parametrize("exact", [False, True])
def test_valid_python_instances_give_the_file_numbers(exact):
    """Prefix-dependent rows with ties and zeros, built in Python, pass and give exactly the
    numbers of the same instance read from its JSON (which normalises float rows)."""
    p, q = _tables(7, exact=exact)
    inst = Instance(3, 2, p, q)
    read = instance_from_dict(instance_to_dict(inst), exact=exact)
    for v in ("token", "block"):
        a, b = st.analyze(inst, v), st.analyze(read, v)
        assert a.tau_pmf == b.tau_pmf and a.tv_to_target == b.tv_to_target
    assert inst._checked


def test_float_rows_within_the_tolerance_pass_and_beyond_it_are_refused():
    """Float64 rows made from float32 ones (off 1 by about 1e-7) pass; off by 2e-6 they do
    not."""
    p, q = _tables(3)
    row = np.array([0.2, 0.3, 0.5]) * (1 + 1e-7)
    instances_mod.check_instance(Instance(3, 2, _with(p, 1, 1, row), q))
    row = np.array([0.2, 0.3, 0.5]) * (1 + 2e-6)
    with pytest.raises(InstanceError, match="not 1 within 1e-06"):
        instances_mod.check_instance(Instance(3, 2, _with(p, 1, 1, row), q))


def test_the_check_reads_an_instance_once(monkeypatch):
    """The check is remembered on the instance: the rows are read at the first entry only; an
    instance read from a file, and one from `random_instance`, are never read again."""
    reads = []
    real = instances_mod._bad_row
    monkeypatch.setattr(instances_mod, "_bad_row", lambda *a: reads.append(1) or real(*a))
    p, q = _tables(2)
    inst = Instance(3, 2, p, q)
    st.analyze(inst, "token")
    first = len(reads)
    assert first == len(p.tables) + len(q.tables)
    st.analyze(inst, "block")
    lp.node_budget_lp(inst)
    assert len(reads) == first
    for made in (st.random_instance(3, 2, 0), instance_from_dict(instance_to_dict(inst)),
                 st.random_instance(3, 2, 0, denominator=12).to_float()):
        st.analyze(made, "token")
    assert len(reads) == first


def test_kl_to_a_draft_of_zero_is_infinite_and_unreached_rows_weigh_nothing():
    """KL(p || q) is +inf where q = 0 < p; a row the draft never reaches (mass 0) adds 0, not
    0 x inf = nan."""
    inst = Instance(3, 2, ci([1., 0, 0]), ci([0., 1, 0]))
    got = divergence.per_position_divergence(inst, "kl")
    assert np.isinf(got).all()
    row, half = np.array([.25, .25, .5]), np.array([0., .5, .5])
    q = TableModel(3, (half[None], np.stack([[0., 1, 0], row, row])))  # prefix (0,) never drafted
    p = TableModel(3, (half[None], np.stack([[1., 0, 0], row, row]), np.tile(row, (9, 1))))
    got = divergence.per_position_divergence(Instance(3, 2, p, q), "kl")
    assert got.tolist() == [0.0, 0.0]  # the unreached row's KL is inf
