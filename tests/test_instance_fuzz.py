"""Property-based fuzzing of the instance parser.

Whatever it is given (random JSON values, structural mutations of valid prefix-dependent
instances, byte-level corruptions of their JSON text), the parser either refuses cleanly, with a
:class:`spectheory.runtime.errors.SpectheoryError` (a ``ValueError``) whose message is one line, or
returns an instance that is analysed correctly: every row is a distribution, the instance
round-trips through JSON unchanged, and block verification (lossless; Sun et al., arXiv
2403.10444) has a tau pmf summing to 1 and total variation ~0 to the target. Any other exception
fails the test. Examples are bounded (derandomised profile of tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectheory.runtime.errors import SpectheoryError
from spectheory.engine.analysis import analyze
from spectheory.inputs.instances import instance_from_dict, instance_to_dict, load_instance
from spectheory.inputs.random_instances import random_instance

FAST = settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])

json_scalars = (st.none() | st.booleans() | st.integers(-3, 5)
                | st.integers(min_value=-(10**30), max_value=10**30)
                | st.floats(allow_nan=True, allow_infinity=True)
                | st.sampled_from(["", "0", "1", "1/3", "2/3", "0.5", "nan", "inf", "-1",
                                   "00", "0,1", " 0", "1/0", "abc"])
                | st.text(max_size=6))
json_values = st.recursive(
    json_scalars,
    lambda children: (st.lists(children, max_size=5)
                      | st.dictionaries(st.sampled_from(["", "0", "1", "00", "0,1", "1,0", " 1",
                                                         "vocab_size", "block_length", "target",
                                                         "draft", "x"]) | st.text(max_size=4),
                                        children, max_size=5)),
    max_leaves=20)


def valid_base(V: int, L: int, seed: int, ci: bool) -> dict:
    return instance_to_dict(random_instance(V, L, seed, context_independent=ci))


def assert_analysed_correctly(inst) -> None:
    for model in (inst.target, inst.draft):
        for table in model.tables:
            t = np.asarray(table, dtype=np.float64)
            assert np.isfinite(t).all() and (t >= 0).all()
            np.testing.assert_allclose(t.sum(axis=1), 1.0, atol=1e-9)
    again = instance_from_dict(json.loads(json.dumps(instance_to_dict(inst))))
    for a, b in zip(inst.target.tables + inst.draft.tables, again.target.tables
                    + again.draft.tables):
        np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                                   atol=1e-15)
    try:
        res = analyze(inst, "block", max_sequences=4096)
    except SpectheoryError as exc:  # a valid instance too big to enumerate here
        assert "exceed" in str(exc)
        return
    assert abs(sum(float(v) for v in res.tau_pmf) - 1) < 1e-9
    assert float(res.tv_to_target) < 1e-9


def parse_or_refuse(make) -> None:
    """Call ``make()``; a refusal must be a one-line SpectheoryError, a success a valid
    instance."""
    try:
        inst = make()
    except SpectheoryError as exc:
        assert isinstance(exc, ValueError)
        msg = str(exc)
        assert msg and "\n" not in msg, msg
        return
    assert_analysed_correctly(inst)


@FAST
@given(json_values)
def test_random_json_values_are_refused_or_valid(value):
    parse_or_refuse(lambda: instance_from_dict(value))


def _mutate(data: dict, draw) -> dict:
    data = json.loads(json.dumps(data))
    kind = draw(st.sampled_from(["drop-key", "set-top", "rename-prefix", "drop-prefix",
                                 "add-prefix", "set-row", "set-entry", "perturb-entry",
                                 "truncate-row", "swap-models"]))
    name = draw(st.sampled_from(["target", "draft"]))
    model = data[name]
    if kind == "drop-key":
        data.pop(draw(st.sampled_from(sorted(data))))
    elif kind == "set-top":
        data[draw(st.sampled_from(sorted(data)))] = draw(json_values)
    elif kind == "swap-models":
        data["target"], data["draft"] = data["draft"], data["target"]
    elif isinstance(model, dict) and kind in ("rename-prefix", "drop-prefix", "add-prefix"):
        key = draw(st.sampled_from(sorted(model)))
        if kind == "rename-prefix":
            new = draw(st.sampled_from(["0" + key, " " + key, key + ",", key.replace(",", ", "),
                                        key + ",0", "+" + key, key + " "]))
            model[new] = model.pop(key)
        elif kind == "drop-prefix":
            model.pop(key)
        else:
            model[(key + "," if key else "") + str(draw(st.integers(0, 3)))] = \
                draw(st.sampled_from([model[key], [0.5, 0.5], [1.0] + [0.0] * 5]))
    else:
        rows = list(model.values()) if isinstance(model, dict) else [model]
        row = draw(st.sampled_from(rows))
        if kind == "set-row" or not row:
            row[:] = draw(st.lists(json_scalars, max_size=5))
        elif kind == "truncate-row":
            del row[-1]
        else:
            i = draw(st.integers(0, len(row) - 1))
            if kind == "set-entry":
                row[i] = draw(json_scalars)
            else:
                row[i] = float(row[i]) + draw(st.sampled_from([1e-12, 1e-6, -1e-6, 0.5, -2.0]))
    return data


@FAST
@given(st.integers(2, 3), st.integers(1, 2), st.integers(0, 5), st.booleans(), st.data())
def test_mutated_valid_instances_are_refused_or_valid(V, L, seed, ci, data):
    base = valid_base(V, L, seed, ci)
    mutated = _mutate(base, data.draw)
    parse_or_refuse(lambda: instance_from_dict(mutated))


@FAST
@given(st.integers(2, 3), st.integers(1, 2), st.integers(0, 3), st.data())
def test_corrupted_json_text_is_refused_or_valid(V, L, seed, data):
    raw = bytearray(json.dumps(valid_base(V, L, seed, False)).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "delete", "insert", "duplicate-key"]))
        i = data.draw(st.integers(0, len(raw) - 1))
        if op == "flip":
            raw[i] = data.draw(st.integers(0, 255))
        elif op == "delete":
            del raw[i]
        elif op == "insert":
            raw[i:i] = data.draw(st.sampled_from([b"0", b",", b'"', b"0,", b"\xff", b" ",
                                                  b"NaN", b"1e999", b"-"]))
        else:  # repeat the first prefix entry of the target object
            text = raw.decode("utf-8", "replace")
            start = text.find('"target": {') + len('"target": {')
            end = text.find("]", start) + 1
            if start > len('"target": {') and end > start:
                entry = text[start:end]
                raw = bytearray((text[:end] + ", " + entry + text[end:]).encode())
    fd, path = tempfile.mkstemp(suffix=".json")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(bytes(raw))
        parse_or_refuse(lambda: load_instance(path))
    finally:
        os.unlink(path)


def test_the_fuzzers_reach_both_outcomes():
    """Negative and positive controls: an unmodified instance is accepted, the two silent
    misreadings the fuzzers target (a leading-zero key, a duplicate key) are refused."""
    base = valid_base(2, 2, 0, False)
    parse_or_refuse(lambda: instance_from_dict(base))
    assert_analysed_correctly(instance_from_dict(base))
    bad = dict(base, target={**base["target"], "00": base["target"]["0"]})
    try:
        instance_from_dict(bad)
    except SpectheoryError as exc:
        assert "canonical" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("a leading-zero key was accepted")
    text = json.dumps(base).replace('"0,0":', '"0,1": [0.5, 0.5], "0,0":', 1)
    fd, path = tempfile.mkstemp(suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        try:
            load_instance(path)
        except SpectheoryError as exc:
            assert "twice" in str(exc)
        else:  # pragma: no cover
            raise AssertionError("a duplicate key was accepted")
    finally:
        os.unlink(path)
