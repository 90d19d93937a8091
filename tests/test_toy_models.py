"""Toy families: valid instances over their parameter ranges, the knob's meaning, clear errors."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from spectheory import toy_models as T
from spectheory.runtime.errors import InstanceError
from spectheory.engine.analysis import analyze
from spectheory.inputs.instances import instance_from_dict, instance_to_dict
from spectheory.inputs.random_instances import random_instance
from spectheory.cli.report import toy_instance
from spectheory.verifiers import block_verification, token_verification
from spectheory.toy_models.ngram import DEFAULT_TEXT, load_text, ngram_tables, tokenize


def assert_valid(inst, V, L):
    """Shapes [V**d, V], non-negative rows summing to 1, enough depth for the engine."""
    assert inst.vocab_size == V and inst.block_length == L
    for model, need in ((inst.target, L), (inst.draft, L - 1)):
        for d, table in enumerate(model.tables):
            assert table.shape == (V**d, V)
            if model.exact:
                assert all(sum(row) == 1 for row in table)
                assert all(v >= 0 for v in table.reshape(-1))
            else:
                assert np.all(np.isfinite(table)) and np.all(table >= 0)
                np.testing.assert_allclose(table.sum(axis=1), 1.0, atol=1e-12)
        for d in range(need + 1):  # the Markov extension covers depths beyond the tables
            assert model.level(d).shape == (V**d, V)


GRID = [
    ("dirichlet", dict(alpha=a, context_independent=ci)) for a in (0.05, 1.0, 50.0)
    for ci in (False, True)
] + [
    ("logit-noise", dict(sigma=s, alpha=a)) for s in (0.0, 0.3, 5.0) for a in (0.1, 2.0)
] + [
    ("temperature", dict(temperature=t)) for t in (0.05, 1.0, 20.0)
] + [
    ("mixture", dict(eps=e, context_independent=ci)) for e in (0.0, 0.5, 1.0) for ci in (False, True)
] + [
    ("markov", dict(lam=lam, alpha=a)) for lam in (0.0, 0.4, 1.0) for a in (0.2, 3.0)
]


@pytest.mark.parametrize("family,params", GRID)
@pytest.mark.parametrize("V,L", [(2, 1), (3, 3), (5, 2)])
def test_families_valid_over_ranges(family, params, V, L):
    inst = T.make_instance(family, vocab_size=V, block_length=L, seed=V + L, **params)
    assert_valid(inst, V, L)


@pytest.mark.parametrize("V,L,order,draft_order,frac", [
    (2, 1, 1, 1, 1.0), (5, 3, 4, 1, 1.0), (6, 2, 3, 2, 0.1), (4, 4, 2, 2, 0.02),
])
def test_ngram_valid(V, L, order, draft_order, frac):
    inst = T.make_instance("ngram", vocab_size=V, block_length=L, seed=3, order=order,
                           draft_order=draft_order, draft_fraction=frac)
    assert_valid(inst, V, L)
    assert inst.target.depth == order - 1 and inst.draft.depth == draft_order - 1


def test_exact_families():
    inst = T.mixture(3, 3, seed=1, eps="1/4", denominator=12)
    assert inst.exact
    assert_valid(inst, 3, 3)
    # q = 3/4 p + 1/12 exactly
    assert inst.draft.tables[1][2][0] == Fraction(3, 4) * inst.target.tables[1][2][0] + Fraction(1, 12)
    inst = T.dirichlet(3, 2, seed=4, denominator=10)
    assert inst.exact
    assert_valid(inst, 3, 2)


def test_two_token_is_the_paper_example():
    inst = T.two_token()
    ref = toy_instance()
    assert inst.exact
    assert list(inst.target.tables[0][0]) == list(ref.target.tables[0][0])
    assert list(inst.draft.tables[0][0]) == list(ref.draft.tables[0][0])
    assert analyze(inst, token_verification).expected_accepted == Fraction(10, 9)
    assert analyze(inst, block_verification).expected_accepted == Fraction(11, 9)
    # knob: q0 = p0 makes the draft exact, so every token is accepted
    same = T.two_token(block_length=3, q0="1/3")
    assert analyze(same, token_verification).expected_accepted == 3
    assert T.mean_divergence(inst) == pytest.approx(1 / 3)


def test_dirichlet_wraps_random_instances():
    a = T.dirichlet(4, 3, seed=7, alpha=0.5)
    b = random_instance(4, 3, 7, alpha=0.5)
    for ma, mb in ((a.target, b.target), (a.draft, b.draft)):
        assert len(ma.tables) == len(mb.tables)
        for ta, tb in zip(ma.tables, mb.tables):
            np.testing.assert_array_equal(ta, tb)


@pytest.mark.parametrize("family,knob,value", [
    ("logit-noise", "sigma", 0.0), ("temperature", "temperature", 1.0), ("mixture", "eps", 0.0),
    ("markov", "lam", 0.0),
])
def test_knob_at_zero_divergence_gives_the_target(family, knob, value):
    inst = T.make_instance(family, vocab_size=3, block_length=3, seed=5, **{knob: value})
    for d in range(3):
        np.testing.assert_allclose(inst.draft.level(d), inst.target.level(d), atol=1e-12)
    assert T.mean_divergence(inst) == pytest.approx(0.0, abs=1e-12)
    # draft = target: token and block verification accept all L tokens
    for v in (token_verification, block_verification):
        assert float(analyze(inst, v).expected_accepted) == pytest.approx(3.0, abs=1e-9)


def test_mixture_tv_is_linear_in_eps():
    """Context independent: TV(p, (1-eps) p + eps u) = eps TV(p, u) exactly."""
    full = T.mean_divergence(T.mixture(5, 2, seed=2, eps=1.0, context_independent=True))
    for eps in (0.1, 0.35, 0.8):
        inst = T.mixture(5, 2, seed=2, eps=eps, context_independent=True)
        assert T.mean_divergence(inst) == pytest.approx(eps * full, rel=1e-12)


@pytest.mark.parametrize("family,knob,values", [
    ("logit-noise", "sigma", (0.0, 0.3, 1.0, 3.0)),
    ("mixture", "eps", (0.0, 0.3, 0.6, 1.0)),
    ("markov", "lam", (0.0, 0.3, 0.6, 1.0)),
    ("temperature", "temperature", (1.0, 1.5, 3.0, 10.0)),
])
def test_knob_increases_divergence_and_lowers_acceptance(family, knob, values):
    """Averaged over seeds, moving the knob away from 'same' raises TV and lowers E[tau]."""
    tv, be = [], []
    for v in values:
        insts = [T.make_instance(family, vocab_size=3, block_length=3, seed=s, **{knob: v})
                 for s in range(4)]
        tv.append(np.mean([T.mean_divergence(i) for i in insts]))
        be.append(np.mean([float(analyze(i, token_verification).block_efficiency)
                           for i in insts]))
    assert all(np.diff(tv) > 0) and all(np.diff(be) < 0)


def test_kl_divergence_matches_definition():
    inst = T.two_token(exact=False)
    p, q = np.array([1 / 3, 2 / 3]), np.array([2 / 3, 1 / 3])
    assert T.mean_divergence(inst, "kl") == pytest.approx(float(np.sum(p * np.log(p / q))))
    with pytest.raises(ValueError):
        T.mean_divergence(inst, "hellinger")


def test_ngram_estimates_from_the_text():
    text = load_text()
    assert "devil" in text and "  " not in text and text == text.lower()
    V = 6
    ids, symbols = tokenize(text, V)
    counts = Counter(text)
    top = sorted(counts, key=lambda c: (-counts[c], c))[: V - 1]
    assert symbols == top + ["<other>"]
    # unigram row = (count + k) / (n + k V), counted independently
    k = 0.5
    model = ngram_tables(ids, V, 2, k)
    expect = [(counts[c] + k) / (len(text) + k * V) for c in top]
    expect.append((len(text) - sum(counts[c] for c in top) + k) / (len(text) + k * V))
    np.testing.assert_allclose(model.tables[0][0], expect, rtol=1e-12)
    # bigram row after ' ' by direct counting
    after_space = Counter(b for a, b in zip(text, text[1:]) if a == " ")
    n_space = sum(after_space.values())
    row = model.tables[1][0]
    assert row[1] == pytest.approx((after_space[top[1]] + k) / (n_space + k * V))


def test_ngram_draft_order_is_a_divergence_knob():
    # contexts shorter than draft_order - 1 use the same estimates, so L must exceed it
    tv = [T.mean_divergence(T.ngram_instance(6, 5, order=4, draft_order=d)) for d in (1, 2, 3, 4)]
    assert tv[0] > tv[1] > tv[2] > tv[3] == 0.0


def test_ngram_seed_selects_draft_slice():
    a = T.ngram_instance(4, 2, seed=0, draft_fraction=0.05)
    b = T.ngram_instance(4, 2, seed=1, draft_fraction=0.05)
    c = T.ngram_instance(4, 2, seed=0, draft_fraction=0.05)
    assert not np.allclose(a.draft.tables[1], b.draft.tables[1])
    np.testing.assert_array_equal(a.draft.tables[1], c.draft.tables[1])


def test_source_of_text_is_named():
    source = (DEFAULT_TEXT.parent / "SOURCE.md").read_text()
    assert "Devil's Dictionary" in source and "public domain" in source
    assert DEFAULT_TEXT.stat().st_size > 20_000


def test_json_round_trip_keeps_the_law():
    inst = T.markov(3, 3, seed=2, lam=0.5)
    back = instance_from_dict(instance_to_dict(inst))
    a = analyze(inst, block_verification)
    b = analyze(back, block_verification)
    assert float(a.block_efficiency) == pytest.approx(float(b.block_efficiency), abs=1e-12)


@pytest.mark.parametrize("family,params,words", [
    ("dirichlet", dict(alpha=0.0), "alpha"),
    ("dirichlet", dict(alpha=-1.0), "alpha"),
    ("dirichlet", dict(vocab_size=1), "vocab_size"),
    ("dirichlet", dict(block_length=0), "block_length"),
    ("dirichlet", dict(vocab_size=2.5), "vocab_size"),
    ("dirichlet", dict(seed=-1), "seed"),
    ("dirichlet", dict(denominator=0), "denominator"),
    ("dirichlet", dict(vocab_size=16, block_length=8), "limit"),
    ("logit-noise", dict(sigma=-0.1), "sigma"),
    ("logit-noise", dict(sigma=float("nan")), "sigma"),
    ("logit-noise", dict(sigma="big"), "sigma"),
    ("temperature", dict(temperature=0.0), "temperature"),
    ("temperature", dict(temperature=float("inf")), "temperature"),
    ("mixture", dict(eps=1.5), "eps"),
    ("mixture", dict(eps=-0.1), "eps"),
    ("mixture", dict(eps="x"), "eps"),
    ("markov", dict(lam=2), "lam"),
    ("markov", dict(alpha=0), "alpha"),
    ("ngram", dict(order=0), "order"),
    ("ngram", dict(order=3, draft_order=4), "draft_order"),
    ("ngram", dict(draft_fraction=0.0), "draft_fraction"),
    ("ngram", dict(smoothing=0.0), "smoothing"),
    ("ngram", dict(vocab_size=500), "vocab_size"),
    ("ngram", dict(vocab_size=40, order=6), "limit"),
    ("ngram", dict(text_path="/nonexistent/text.txt"), "cannot read"),
    ("two-token", dict(q0="7/5"), "q0"),
    ("two-token", dict(p0=-1), "p0"),
    ("two-token", dict(block_length=0), "block_length"),
    ("dirichlet", dict(nonsense=1), "nonsense"),
    ("no-such-family", {}, "unknown toy family"),
])
def test_out_of_range_parameters_raise_clear_errors(family, params, words):
    with pytest.raises(InstanceError) as err:
        T.make_instance(family, **params)
    msg = str(err.value)
    assert words in msg and "\n" not in msg


def test_every_family_names_its_knob():
    for name, fam in T.FAMILIES.items():
        assert fam.knob and fam.knob_range and fam.description
        inst = T.make_instance(name)  # defaults are valid
        assert inst.block_length >= 1


def test_toy_command_writes_a_loadable_instance(tmp_path, capsys):
    from spectheory.cli import main

    assert main(["toy", "mixture", "vocab_size=3", "block_length=2", "seed=1", "eps=1/4",
                 "denominator=12"]) == 0
    path = tmp_path / "inst.json"
    path.write_text(capsys.readouterr().out)
    assert main(["exact", str(path), "--exact", "--verifier", "block", "--json"]) == 0
    import json

    res = json.loads(capsys.readouterr().out)
    direct = analyze(T.mixture(3, 2, seed=1, eps="1/4", denominator=12), block_verification)
    assert Fraction(res["expected_accepted"]) == direct.expected_accepted


def test_toy_command_lists_knobs_and_rejects_bad_input(capsys):
    from spectheory.cli import main

    assert main(["toy", "--list"]) == 0
    out = capsys.readouterr().out
    for name, fam in T.FAMILIES.items():
        assert name in out and fam.knob in out
    assert main(["toy", "mixture", "eps=2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spectheory: error: eps = 2") and err.count("\n") == 1
    assert main(["toy", "mixture", "eps"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err


def test_toy_list_with_a_family_gives_its_parameters_and_defaults(capsys):
    """``toy --list FAMILY`` lists that family's parameters with their defaults (it printed the
    table of all families, the name ignored); parameters with --list and an unknown family are
    refused in one line."""
    import inspect

    from spectheory.cli import main

    assert main(["toy", "--list", "ngram"]) == 0
    out = capsys.readouterr().out
    params = inspect.signature(T.FAMILIES["ngram"].make).parameters
    assert "dirichlet" not in out and out.startswith("ngram: ")
    for name, par in params.items():
        assert f"{name:<20} {par.default}" in out.splitlines()
    for argv, word in ((["toy", "--list", "nope"], "unknown toy family 'nope'"),
                       (["toy", "--list", "mixture", "eps=1"], "NAME=VALUE")):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and word in captured.err and captured.err.count("\n") == 1


def test_dirichlet_knob_range_as_listed_is_the_range_enforced():
    """toy --list said alpha in (0, inf) while random_instance refuses alpha < 0.001: the listed
    range is the one checked, at both ends."""
    from spectheory.runtime.errors import InstanceError
    from spectheory.toy_models.families import FAMILIES, dirichlet

    assert FAMILIES["dirichlet"].knob_range == "[0.001, 1e6]"
    for ok in (1e-3, 1e6):
        dirichlet(3, 1, alpha=ok)
    for bad in (1e-300, 0.000999, 1.000001e6):
        with pytest.raises(InstanceError, match=r"alpha = .* out of range \[0.001, 1e\+06\]"):
            dirichlet(3, 1, alpha=bad)
