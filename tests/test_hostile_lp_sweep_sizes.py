"""Bad input on the LPs' sizes and paths, the sweep's tables and the exact engine's device, each
refused in one line naming it before any work (no traceback, no number, nothing written):

* an LP whose variable count is past the float range (V = 100,000, L = 64: ~10^320 variables)
  is refused with its size in powers of ten; the guard itself used to raise OverflowError while
  formatting the ratio to its limit;
* the K-path LPs (direct, selection, frontier) take K in 1..20, as the K-path engine and
  ``--paths``: at K = 21 the K! orderings of a joint outcome overflow int64 (OverflowError
  from numpy before); the relaxation and the closed form take any K up to 2^63 - 1, past it
  one line (OverflowError from the float power before);
* a sweep table that every job would fail on is refused when the file is read: a verifier or
  a direct / selection optimum with more than 20 paths, a float-only toy family under
  ``exact = true``, two-token (V = 2) on another vocabulary; two-token runs (every job of it
  failed on a ``vocab_size`` it does not take), and a toy family with a denominator knob is
  exact under ``exact = true`` as ``random`` is;
* ``analyze(..., device=...)`` in exact mode refuses a device other than the CPU (a name that
  is no device at all was ignored and a number returned).
"""

from __future__ import annotations

import json
import textwrap
from fractions import Fraction

import pytest

import spectheory as st
from cli_helpers import refused, run, write
from spectheory import lp
from spectheory.engine.analysis import multi_iteration_law
from spectheory.lp.frontier import frontier_lp
from spectheory.lp.result import LPError
from spectheory.lp.sparse import check_lp_size
from spectheory.runtime.errors import OptionError, SizeLimitError, SpectheoryError
from spectheory.sweep import load_config, run_sweep


def _huge(tmp_path):
    V = 100_000
    q = [0.0] * V
    q[0] = q[1] = 0.5
    return write(tmp_path, {"vocab_size": V, "block_length": 64, "target": [1.0 / V] * V,
                            "draft": q}, "big.json")


@pytest.mark.parametrize("args, words", [
    (("--problem", "coupling"), ("coupling bound", "~10^320 LP variables", "(~10^313x;")),
    (("--problem", "selection", "--paths", "2"), ("selection-rule LP", "~10^640 LP variables")),
    (("--problem", "direct", "--paths", "2", "--exact"), ("direct LP", "exact limit")),
])
def test_an_lp_past_the_float_range_is_refused_with_its_size(tmp_path, capsys, args, words):
    path = _huge(tmp_path)
    refused(*run(["lp", path, *args], capsys), *words)


def test_the_lp_size_guard_names_any_size():
    with pytest.raises(SizeLimitError) as exc:
        check_lp_size(10**400, 3 * 10**400, "an LP", 1000)
    text = str(exc.value)
    assert "~10^400 LP variables exceed the float limit of 1,000 by ~10^399 (~10^397x; " \
           "~10^400 nonzeros" in text and "\n" not in text
    with pytest.raises(SizeLimitError, match=r"2,500 LP variables .* by 1,500 \(2\.5x; "):
        check_lp_size(2500, 10, "an LP", 1000)  # small sizes as before, digits and ratio
    # the sympy fallback's limit is the environment's: --max-sequences was advised and does not
    # raise it (the direct LP's exact fallback at V = 3, L = 2, K = 3)
    with pytest.raises(SizeLimitError) as exc:
        check_lp_size(2217, 4476, "sympy rational LP", mode="sympy")
    assert "raise the limit with the environment variable SPECTHEORY_MAX_SYMPY_LP_VARIABLES" \
        in str(exc.value) and "raise the limit with --max-sequences" not in str(exc.value)
    with pytest.raises(SizeLimitError, match="raise the limit with --max-sequences$"):
        check_lp_size(2500, 10, "an LP", 1000, mode="exact")


@pytest.fixture(scope="module")
def tiny():
    return st.random_instance(2, 1, 0, denominator=12).to_exact()


@pytest.mark.parametrize("call", [
    lambda i: lp.direct_lp(i, paths=21),
    lambda i: lp.direct_lp(i, paths=21, exact=True),
    lambda i: lp.direct_lp(i, paths=21, drafting="norep"),
    lambda i: lp.selection_lp(i, paths=21),
    lambda i: lp.selection_lp(i, paths=21, exact=True),
    lambda i: frontier_lp(i, tv=0.1, paths=21),
], ids=["direct", "direct-exact", "direct-norep", "selection", "selection-exact", "frontier"])
def test_k_path_lps_take_at_most_twenty_paths(tiny, call):
    with pytest.raises(LPError, match=r"^paths = 21 is out of range 1\.\.20 for the K-path LPs "
                                      r"\(.*int64\)$"):
        call(tiny)


def test_a_k_past_int64_is_named_by_the_lps_own_range(tiny):
    """10^20 paths were told "past 2^63 - 1, the most paths the closed forms compute with", not
    the K-path LPs' range of 1..20."""
    for call in (lp.direct_lp, lp.selection_lp):
        with pytest.raises(LPError, match=r"^paths = ~10\^20 is out of range 1\.\.20 for the "
                                          r"K-path LPs "):
            call(tiny, paths=10**20)


def test_twenty_paths_are_still_solved(tiny):
    res = lp.direct_lp(tiny, paths=20, monotone=False)  # V = 2, L = 1: 21 multisets
    q, p = tiny.draft.level(0)[0], tiny.target.level(0)[0]
    # at L = 1 the optimum over K i.i.d. drafts is 1 + min over token sets H of
    # p(H) + 1 - q(H)^K (Hu et al.'s closed form), here by brute force over the four sets
    best = min(sum((p[a] for a in H), Fraction(0)) + 1 - sum((q[a] for a in H), Fraction(0))
               ** 20 for H in ((), (0,), (1,), (0, 1)))
    assert res.optimum == pytest.approx(1 + float(best), abs=1e-9)


@pytest.mark.parametrize("call", [
    lambda: lp.multipath_lp(st.random_instance(3, 2, 0, denominator=12).to_exact(),
                            paths=10**400),
    lambda: lp.optimal_multidraft_L1(st.random_instance(3, 1, 0, denominator=12).to_exact(),
                                     paths=10**400),
], ids=["multipath", "multidraft-l1"])
def test_the_relaxations_refuse_a_k_past_int64(call):
    with pytest.raises(LPError, match=r"^paths = ~10\^400 is past 2\^63 - 1"):
        call()


def test_the_relaxation_takes_the_largest_k():
    inst = st.random_instance(3, 1, 0, denominator=12)
    q, p = inst.draft.level(0)[0], inst.target.level(0)[0]
    assert q[1] == 0 < p[1]  # a token the drafts never propose
    big = lp.optimal_multidraft_L1(inst, paths=2**63 - 1).optimum
    # with that many i.i.d. drafts every token of positive q is drafted: acceptance is the mass
    # of p on supp(q) (here 5/12: token 1 is never drafted)
    assert float(big) == pytest.approx(1 + float(sum(p[a] for a in range(3) if q[a] > 0)))


SWEEP = """
[sweep]
name = "t"
exact = {exact}
time_limit = 30
memory_limit_mb = 1024
[[instances]]
family = "{family}"
vocab = [{vocab}]
block = [2]
seeds = [0]
{knobs}
"""


def _sweep(tables, exact="false", family="random", vocab=2, knobs=""):
    return textwrap.dedent(SWEEP.format(exact=exact, family=family, vocab=vocab, knobs=knobs)) \
        + textwrap.dedent(tables)


@pytest.mark.parametrize("tables, words", [
    ('[[verifiers]]\nname = ["gbv"]\npaths = [2, 21]\n',
     ("[[verifiers]] #1: verifier 'gbv' with paths = 21", "1..20", "every job would fail")),
    ('[[optima]]\nproblem = "direct"\npaths = [21]\n',
     ("[[optima]] #1: problem 'direct' takes paths 1..20", "paths 21 would fail in every job")),
    ('[[optima]]\nproblem = ["multipath", "selection"]\npaths = [64]\n',
     ("problem 'selection' takes paths 1..20",)),
])
def test_a_sweep_asking_for_more_paths_than_the_engine_takes_is_refused(tmp_path, capsys,
                                                                         tables, words):
    path = write(tmp_path, _sweep(tables), "s.toml")
    refused(*run(["sweep", path, "--out", str(tmp_path / "out")], capsys), *words)
    assert not (tmp_path / "out").exists()


def test_the_relaxation_still_takes_sixty_four_paths():
    cfg = load_config(_sweep('[[optima]]\nproblem = "multipath"\npaths = [64]\n'))
    assert cfg.optima[0]["paths"] == [64]


@pytest.mark.parametrize("family, knobs, vocab, words", [
    ("toy:logit-noise", "sigma = 1.0", 3, ("family 'toy:logit-noise' under [sweep] exact = true: "
                                           "its rows are floats",)),
    ("toy:temperature", "", 3, ("its rows are floats",)),
    ("toy:two-token", "exact = false", 2, ("exact = false, and every job would refuse",)),
])
def test_a_float_toy_family_under_exact_is_refused_when_read(family, knobs, vocab, words):
    with pytest.raises(OptionError) as exc:
        load_config(_sweep('[[verifiers]]\nname = ["block"]\n', "true", family, vocab, knobs))
    assert all(w in str(exc.value) for w in words), str(exc.value)


def test_two_token_takes_vocabulary_two_only():
    with pytest.raises(OptionError, match=r"toy:two-token has vocabulary 2 .* not \[3\]"):
        load_config(_sweep('[[verifiers]]\nname = ["block"]\n', family="toy:two-token", vocab=3))


@pytest.mark.parametrize("exact", [True, False])
def test_two_token_and_a_denominator_family_run_in_a_sweep(tmp_path, exact):
    text = _sweep('[[verifiers]]\nname = ["block", "token"]\n', str(exact).lower(),
                  "toy:two-token")
    rows = run_sweep(load_config(text), tmp_path / "a", workers=1)
    got = {r["name"]: r for r in rows}
    assert [r["status"] for r in rows] == ["ok", "ok"]
    # Sun et al.'s two-token example at L = 2: E[tau] = 11/9 (block), 10/9 (token)
    if exact:
        assert got["block"]["value_exact"] == "20/9"
        assert json.loads(got["token"]["tau_pmf"])[0] == "1/3"  # 1 - sum min(p, q)
    assert got["block"]["block_efficiency"] == pytest.approx(20 / 9)
    assert got["token"]["block_efficiency"] == pytest.approx(19 / 9)
    # a toy family with a denominator knob: exact rows of denominator 1000, as random's default
    text = _sweep('[[verifiers]]\nname = ["block"]\n', "true", "toy:mixture", 3, "eps = 0.25")
    rows = run_sweep(load_config(text), tmp_path / "b", workers=1)
    assert rows[0]["status"] == "ok", rows[0]["error"]
    from spectheory.toy_models import mixture

    want = st.analyze(mixture(3, 2, 0, eps=0.25, denominator=1000), "block").block_efficiency
    assert Fraction(rows[0]["value_exact"]) == want


@pytest.mark.parametrize("device", ["banana", "cuda", "cuda:0", "meta"])
def test_an_exact_analysis_refuses_a_device_other_than_the_cpu(device):
    inst = st.random_instance(3, 2, 0, denominator=12)
    with pytest.raises(SpectheoryError, match=rf"^device '{device}' is for float analyses on "
                                              "torch; exact rationals compute on numpy"):
        st.analyze(inst, "token", device=device)
    with pytest.raises(SpectheoryError, match="is for float analyses on torch"):
        multi_iteration_law(inst, "token", 2, device=device)


def test_an_exact_analysis_on_the_cpu_by_any_name():
    import torch

    inst = st.random_instance(3, 2, 0, denominator=12)
    want = st.analyze(inst, "token").block_efficiency
    assert want == Fraction(43, 18)
    for device in ("cpu", "cpu:0", torch.device("cpu")):
        assert st.analyze(inst, "token", device=device).block_efficiency == want
