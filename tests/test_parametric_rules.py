"""Parametric rules take their parameters in the name (``--verifier 'additive(1/4)'``, the API,
sweep files), read exactly; every parametric rule refuses NaN, inf, negative, out-of-range, text
and a wrong number of parameters in one line naming the rule, the parameter and its range, built
from a name or in Python."""

from __future__ import annotations

import json
import math
from fractions import Fraction as F

import numpy as np
import pytest

import spectheory as st
from spectheory.inputs.instances import instance_from_dict, instance_to_dict
from spectheory.runtime.errors import OptionError
from spectheory.verifiers import contrasts as C
from spectheory.verifiers import relaxed as R
from spectheory.verifiers import cascades as K
from spectheory.verifiers import ears as E
from spectheory.verifiers import entropy_verify as EV
from spectheory.verifiers import static_ensemble as S
from spectheory.verifiers.params import FAMILIES, _families, parse_name

from cli_helpers import run, write

#: rule -> (factory, good parameters, one bad value per parameter position that is in range for
#: none of them, the parameter names)
RULES = {
    "additive": (R.additive_acceptance, ("1/4",), ("eps",)),
    "multiplicative": (R.multiplicative_acceptance, ("1/2",), ("lam",)),
    "top-m": (R.top_m_acceptance, ("2",), ("m",)),
    "entropy-threshold": (R.entropy_threshold_acceptance, ("0.5",), ("beta",)),
    "trtllm-relaxed": (R.trtllm_relaxed_acceptance, ("2", "1/10"), ("k", "delta")),
    "sglang-threshold": (R.sglang_threshold_acceptance, ("1/2", "1/3"),
                         ("threshold_single", "threshold_acc")),
    "cactus": (R.cactus_acceptance, ("0.3",), ("delta",)),
    "threshold": (C.threshold_verification, ("3/10",), ("theta",)),
    "lenient": (C.lenient_verification, ("1/2",), ("lenience",)),
    "typical": (C.typical_acceptance, ("0.09", "0.3"), ("epsilon", "delta")),
    "static-ensemble": (S.static_ensemble, ("1/3",), ("w",)),
    "static-ensemble-greedy": (S.static_ensemble_greedy, ("1/3",), ("w",)),
    "typical-medusa": (C.typical_medusa, ("0.09", "0.3"), ("epsilon", "delta")),
    "typical-medusa-fast": (lambda e, d: C.typical_medusa(e, d, fast=True), ("0.09", "0.3"),
                            ("epsilon", "delta")),
    "cascade-opt": (K.cascade_opt, ("1/4",), ("alpha",)),
    "cascade-token-v1": (K.cascade_token_v1, ("1/4",), ("alpha",)),
    "cascade-token-v2": (K.cascade_token_v2, ("1/4",), ("alpha",)),
    "cascade-token-v3": (K.cascade_token_v3, ("1/4",), ("alpha",)),
    "entropy-verify": (EV.entropy_verify, ("0.95", "0.4"),
                       ("posterior_threshold", "posterior_alpha")),
    "ears": (E.ears, ("3/10",), ("tolerance",)),
}
#: Values no parameter of any rule accepts.
BAD_TEXT = ("nan", "inf", "-inf", "-1", "x", "1/0", "")
BAD_PY = (math.nan, math.inf, -math.inf, -1, F(-1, 3), "1/4", "x", True, None, [1], 1e9)


def instance():
    """Prefix-dependent rows with ties (sixths)."""
    return st.random_instance(3, 2, 1, alpha=0.5, denominator=6)


def test_every_family_is_covered():
    assert set(RULES) == set(FAMILIES) == set(_families())


@pytest.mark.parametrize("rule", sorted(RULES))
def test_a_name_builds_the_rule_as_the_factory_does(rule):
    make, good, _ = RULES[rule]
    spec = parse_name(f"{rule}({', '.join(good)})")
    want = make(*[F(g) if "." not in g else float(g) for g in good]) if rule in (
        "entropy-threshold", "cactus", "typical", "typical-medusa", "typical-medusa-fast",
        "entropy-verify") else make(*[
            int(g) if g.isdigit() else F(g) for g in good])
    inst = instance() if spec.exact else instance().to_float()
    a, b = st.analyze(inst, spec), st.analyze(inst, want)
    assert list(a.output_law) == list(b.output_law) and a.block_efficiency == b.block_efficiency
    # also through the registry, the API and with spaces
    spaced = f" {rule} ( {' , '.join(good)} ) "
    assert st.analyze(inst, spaced).block_efficiency == a.block_efficiency


@pytest.mark.parametrize("rule", sorted(RULES))
def test_bad_parameters_are_refused_in_one_line_on_the_command_line(rule, tmp_path, capsys):
    make, good, names = RULES[rule]
    path = write(tmp_path, instance_to_dict(instance().to_float()))
    for pos, name in enumerate(names):
        for bad in BAD_TEXT:
            args = list(good)
            args[pos] = bad
            text = f"{rule}({', '.join(args)})"
            code, out, err = run(["exact", path, "--verifier", text, "--json"], capsys)
            assert code == 2 and out == "", text
            line = err.strip()
            assert "\n" not in line and "Traceback" not in line, line
            assert rule in line and name in line, line
            if bad in ("nan", "inf", "-inf", "-1"):
                assert " must be " in line and ("in [" in line or "in (" in line), line
    # a wrong number of parameters
    for count in (0, len(names) + 1):
        text = f"{rule}({', '.join(['1'] * count)})"
        code, out, err = run(["exact", path, "--verifier", text], capsys)
        assert code == 2 and out == "" and f"takes {len(names)} parameter" in err, err


@pytest.mark.parametrize("rule", sorted(RULES))
def test_bad_parameters_are_refused_in_python_naming_rule_and_parameter(rule):
    make, good, names = RULES[rule]
    values = [int(g) if g.isdigit() else F(g) for g in good]
    for pos, name in enumerate(names):
        for bad in BAD_PY:
            args = list(values)
            args[pos] = bad
            with pytest.raises(OptionError) as info:
                make(*args)
            text = str(info.value)
            assert text.startswith(f"{rule}: {name} ") and " must be " in text, text


def test_trtllm_relaxed_with_nan_gives_no_number():
    """It printed E[tau + 1] before: NaN compared false with every bound."""
    with pytest.raises(OptionError, match=r"trtllm-relaxed: delta nan must be in \[0, 1\]"):
        R.trtllm_relaxed_acceptance(2, float("nan"))
    with pytest.raises(OptionError, match="trtllm-relaxed: k"):
        R.trtllm_relaxed_acceptance(2.0, F(1, 10))
    with pytest.raises(OptionError, match="trtllm-relaxed: delta"):
        st.analyze(instance(), "trtllm-relaxed(2, nan)")


def test_numpy_scalars_are_numbers():
    assert R.top_m_acceptance(np.int64(2)).name == "top-m(2)"
    assert R.additive_acceptance(np.float64(0.25)).name == "additive(0.25)"
    with pytest.raises(OptionError):
        R.additive_acceptance(np.float64("nan"))


def test_decimals_are_read_exactly():
    """0.3 in a name is 3/10, not the float 0.29999...: p = (1/2, 1/5, 3/10) at the root, the
    token of probability 1/5 sits exactly at max p - 3/10."""
    inst = instance_from_dict({"vocab_size": 3, "block_length": 1,
                               "target": ["1/2", "1/5", "3/10"], "draft": ["0", "1", "0"]},
                              exact=True)
    named = st.analyze(inst, "additive(0.3)")
    assert named.verifier == "additive(3/10)" and named.tau_pmf[1] == 1
    assert st.analyze(inst, R.additive_acceptance(F(3, 10))).tau_pmf[1] == 1
    # the float 0.3 (below 3/10) rejects it: the exact reading matters
    assert st.analyze(inst, R.additive_acceptance(0.3)).tau_pmf[1] == 0
    assert parse_name("threshold(2.5e-1)").name == "threshold(1/4)"


def test_sglang_threshold_is_lossless_only_when_both_thresholds_are_one():
    """ts = ta = 1 is strict verification (a_i = p(X_i)); with one threshold below 1 the rule
    is lossy, and the declaration says so."""
    assert R.sglang_threshold_acceptance(1, 1).lossless
    assert R.sglang_threshold_acceptance(1.0, F(1)).lossless
    assert st.analyze(instance(), "sglang-threshold(1, 1)").tv_to_target == 0
    # with two tokens "p without X_i" is the other token and (1, ta) happens to be lossless:
    # three tokens, a target row with an entry in [99/100, 1) and one of 1/2
    third = ["1/3", "1/3", "1/3"]
    insts = [instance_from_dict({"vocab_size": 3, "block_length": 1, "target": p,
                                 "draft": third}, exact=True)
             for p in (["1/2", "1/4", "1/4"], ["99/100", "1/200", "1/200"])]
    for inst in insts:
        assert st.analyze(inst, "sglang-threshold(1, 1)").tv_to_target == 0
    for ts, ta in ((1, F(1, 2)), (F(1, 2), 1), (F(99, 100), 1), (1, F(99, 100))):
        spec = R.sglang_threshold_acceptance(ts, ta)
        assert not spec.lossless and spec.summary.startswith("LOSSY"), (ts, ta)
        assert any(st.analyze(inst, spec).tv_to_target > 0 for inst in insts), (ts, ta)
        assert not all(st.check_lossless(spec, inst).lossless for inst in insts)


def test_cli_runs_parametric_names_exactly(tmp_path, capsys):
    inst = instance()
    path = write(tmp_path, instance_to_dict(inst))
    code, out, err = run(["exact", path, "--verifier", "trtllm-relaxed(2, 1/10)", "--exact",
                          "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    want = st.analyze(inst, R.trtllm_relaxed_acceptance(2, F(1, 10)))
    assert got["verifier"] == "trtllm-relaxed(2, 1/10)"
    assert F(got["block_efficiency"]) == want.block_efficiency
    assert F(got["tv_to_target"]) == want.tv_to_target


def test_sweep_files_take_parametric_names(tmp_path):
    from spectheory.sweep import load_config, run_sweep

    head = ('[[instances]]\nfamily = "random"\nvocab = 2\nblock = 1\ndenominator = 6\n'
            '[[verifiers]]\nname = ')
    rows = run_sweep(load_config(head + '["static-ensemble(1/3)", "additive(1/4)"]\n'),
                     tmp_path / "out", workers=1)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for bad, what in (('["static-ensemble(nan)"]', "static-ensemble: w"),
                      ('["additive(1, 2)"]', "takes 1 parameter"),
                      ('["top-m(0)"]', "top-m: m 0 must be")):
        with pytest.raises(OptionError, match=what):
            load_config(head + bad + "\n")


@pytest.mark.parametrize("rule", sorted(RULES))
def test_range_ends_are_as_listed(rule):
    """Each parameter's listed range, end by end: a closed end is accepted, an open end and a
    step past either end refused."""
    make, good, _ = RULES[rule]
    _, params = _families()[rule]
    values = [int(g) if g.isdigit() else F(g) for g in good]
    for pos, prm in enumerate(params):
        step = 1 if prm.integer else F(1, 100)
        for v, ok in ((prm.lo, not prm.lo_open), (prm.hi, not prm.hi_open),
                      (prm.lo - step, False), (prm.hi + step, False)):
            args = list(values)
            args[pos] = v
            if ok:
                make(*args)
            else:
                with pytest.raises(OptionError, match=f"{rule}: {prm.name} "):
                    make(*args)


def test_a_name_with_too_many_parameters_is_named_in_a_short_line():
    """The count refusal repeated the whole name: 100,000 parameters made a 200 KB line."""
    with pytest.raises(OptionError) as exc:
        parse_name("additive(" + ",".join(["1"] * 100_000) + ")")
    assert str(exc.value).endswith("...: additive(eps) takes 1 parameter, got 100000")
    assert len(str(exc.value)) < 200
    with pytest.raises(OptionError) as exc:
        parse_name("additive(1,2)")
    assert str(exc.value) == "verifier 'additive(1,2)': additive(eps) takes 1 parameter, got 2"
