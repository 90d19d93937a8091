"""Test vectors: export, re-check, tampering caught, bad input refused, atomic writes."""

from __future__ import annotations

import json
import os
from fractions import Fraction

import pytest
from cli_helpers import run
from reference_rational import block_law, cond

from spectheory.runtime.errors import SpectheoryError
from spectheory.inputs.random_instances import random_instance
from spectheory.cli.report import TOY, toy_instance
from spectheory.inputs.instances import instance_from_dict, instance_to_dict
from spectheory.testing.checks.vectors import SCHEMA, build_vector, check_vectors, export_vectors

#: A prefix-dependent exact instance, V = 3, L = 2.
PD = instance_to_dict(random_instance(3, 2, seed=4, denominator=12))
#: p/q = 3/2 for tokens 1 and 2: the mismatched-tie GBV control is lossy here with two paths.
TIES = {"vocab_size": 3, "block_length": 2, "target": ["1/4", "3/8", "3/8"],
        "draft": ["1/2", "1/4", "1/4"]}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    base = tmp_path_factory.mktemp("vec")
    src = base / "pd.json"
    src.write_text(json.dumps(PD))
    toy = base / "toy.json"
    toy.write_text(json.dumps(TOY))
    ties = base / "ties.json"
    ties.write_text(json.dumps(TIES))
    out = base / "out"
    names = export_vectors(out, ["block", "gbv", "gbv-mismatched-ties"], [str(src), str(toy), str(ties)],
                           paths=2)
    return out, names


def _load(out, name):
    return json.loads((out / name).read_text())


def _inverse_cdf(probs, u):
    acc = Fraction(0)
    for k, p in enumerate(probs):
        acc += p
        if Fraction(u) < acc:
            return k
    raise AssertionError("u beyond the CDF")


def test_round_trip_and_contents(exported, capsys):
    out, names = exported
    assert sorted(names) == sorted(os.listdir(out)) and len(names) == 9
    assert check_vectors(out) == []
    code, stdout, _ = run(["vectors", "check", str(out)], capsys)
    assert code == 0 and "all 9 vector files match" in stdout
    for name in names:
        v = _load(out, name)
        assert v["schema"] == SCHEMA
        K, L, V = v["paths"], v["block_length"], v["vocab_size"]
        F = [Fraction(x) for x in v["tau_pmf"]]
        probs = [Fraction(d["probability"]) for d in v["drafts"]]
        assert sum(probs) == 1
        # tau pmf = sum over joint drafts of P(drafts) sum_k P(k, tau | drafts)
        agg = [sum(p * sum(Fraction(d["stop"][k][i]) for k in range(K))
                   for p, d in zip(probs, v["drafts"])) for i in range(L + 1)]
        assert agg == F
        assert Fraction(v["expected_accepted"]) == sum(i * f for i, f in enumerate(F))
        out_law = [Fraction(x) for x in v["output_law"]]
        tgt = [Fraction(x) for x in v["target_law"]]
        assert Fraction(v["tv_to_target"]) == sum(abs(a - b) for a, b in zip(out_law, tgt)) / 2
        if v["lossless"]:
            assert Fraction(v["tv_to_target"]) == 0 and out_law == tgt
        assert len(v["sequences"]) == V ** (L + 1)
        # fixed-uniform decisions: exact inverse CDF of the stop row, then of the correction row
        assert len(v["decisions"]) == 2 * len(v["drafts"])
        for dec in v["decisions"]:
            d = v["drafts"][dec["draft"]]
            flat = [Fraction(x) for row in d["stop"] for x in row]
            j = _inverse_cdf(flat, dec["uniforms"][0])
            assert (dec["path"], dec["tau"]) == divmod(j, L + 1)
            row = [Fraction(x) for x in d["correction"][dec["path"]][dec["tau"]]]
            assert dec["token"] == _inverse_cdf(row, dec["uniforms"][1])
    # the lossy control is lossy where two tokens tie (TV 193/1456, pinned in
    # tests/test_checker_soundness.py), and without ties equals GBV
    bad = _load(out, "gbv-mismatched-ties--K2--ties.json")
    assert Fraction(bad["tv_to_target"]) == Fraction(193, 1456) and bad["lossless"] is False
    assert _load(out, "gbv-mismatched-ties--K2--pd.json")["output_law"] == \
        _load(out, "gbv--K2--pd.json")["output_law"]


def test_block_laws_equal_the_naive_reference(exported):
    """Each draft's exported law equals the naive rational reference (tests/reference_rational)."""
    out, _ = exported
    for name in ("block--K1--pd.json", "block--K1--toy.json"):
        v = _load(out, name)
        inst = instance_from_dict(v["instance"], exact=True)
        L = inst.block_length
        for d in v["drafts"]:
            x = tuple(d["paths"][0])
            q_rows = [cond(inst.draft, x[:i]) for i in range(L)]
            p_rows = [cond(inst.target, x[:i]) for i in range(L + 1)]
            stop, corr = block_law(x, q_rows, p_rows)
            assert [Fraction(s) for s in d["stop"][0]] == stop
            assert [[Fraction(c) for c in row] for row in d["correction"][0]] == corr
            assert Fraction(d["probability"]) == \
                q_rows[0][x[0]] * q_rows[1][x[1]]


def test_two_token_block_vector():
    """Block verification on p = (1/3, 2/3), q = (2/3, 1/3), L = 2 (Sun et al., arXiv
    2403.10444): E[tau] = 11/9; the draft (0, 0) stops at tau = 0 with probability 3/4."""
    v = build_vector("block", toy_instance(), "two-token")
    assert v["expected_accepted"] == "11/9"
    first = v["drafts"][0]
    assert first["paths"] == [[0, 0]] and first["probability"] == "4/9"
    assert first["stop"] == [["3/4", "0", "1/4"]]
    assert first["correction"][0][0] == ["0", "1"]  # normalise(max(p - q, 0)) = token 1


@pytest.mark.parametrize("field,edit", [
    ("drafts[0].stop[0][0]", lambda v: v["drafts"][0]["stop"][0].__setitem__(0, "1/7")),
    ("tau_pmf[1]", lambda v: v["tau_pmf"].__setitem__(1, "1/2")),
    ("output_law[3]", lambda v: v["output_law"].__setitem__(3, "0")),
    ("decisions[1].token", lambda v: v["decisions"][1].__setitem__(
        "token", 1 - v["decisions"][1]["token"])),
    ("drafts[2].correction[0][1][0]",
     lambda v: v["drafts"][2]["correction"][0][1].__setitem__(0, "2/3")),
    ("tv_to_target", lambda v: v.__setitem__("tv_to_target", "1/100")),
])
def test_tampered_file_is_caught(exported, tmp_path, capsys, field, edit):
    out, names = exported
    copy = tmp_path / "copy"
    copy.mkdir()
    for n in names:
        (copy / n).write_text((out / n).read_text())
    v = _load(copy, "block--K1--pd.json")
    edit(v)
    (copy / "block--K1--pd.json").write_text(json.dumps(v))
    code, stdout, _ = run(["vectors", "check", str(copy)], capsys)
    assert code == 1
    assert stdout.strip().startswith("MISMATCH block--K1--pd.json: field " + field)
    assert stdout.count("MISMATCH") == 1
    # an equal rational written another way is not a mismatch
    v = _load(out, "block--K1--pd.json")
    v["tau_pmf"][0] = "{0}/{1}".format(*(lambda f: (2 * f.numerator, 2 * f.denominator))(
        Fraction(v["tau_pmf"][0])))
    (copy / "block--K1--pd.json").write_text(json.dumps(v))
    assert check_vectors(copy) == []


def test_a_parametric_rule_spelled_another_way_is_the_same_verifier(tmp_path, capsys):
    """A file naming additive(0.25) where a fresh computation names additive(1/4) was a
    MISMATCH on the field verifier (exit 1): the name is read as the rule it spells, and the
    numbers are still compared (a changed tau_pmf entry stays a mismatch)."""
    out = tmp_path / "out"
    src = tmp_path / "pd.json"
    src.write_text(json.dumps(PD))
    (name,) = [n for n in export_vectors(out, ["additive(1/4)"], [str(src)])]
    v = _load(out, name)
    for spelled in ("additive(0.25)", "additive( 1/4 )", "additive(2/8)"):
        v["verifier"] = spelled
        (out / name).write_text(json.dumps(v))
        assert check_vectors(out) == [], spelled
    v["tau_pmf"][1] = "1/3" if v["tau_pmf"][1] != "1/3" else "1/5"
    (out / name).write_text(json.dumps(v))
    assert [m[:2] for m in check_vectors(out)] == [(name, "tau_pmf[1]")]


def test_cli_export(tmp_path, capsys):
    out = tmp_path / "v"
    code, stdout, err = run(["vectors", "export", str(out), "--verifier", "token",
                             "--instances", "battery", "--decisions", "1"], capsys)
    assert code == 0 and "wrote 8 vector files" in stdout
    v = _load(out, "token--K1--prefix-dependent.json")
    assert len(v["decisions"]) == len(v["drafts"]) == 27
    assert v["instance"]["block_length"] == 3
    # the same command writes the same bytes (fixed seed)
    out2 = tmp_path / "v2"
    run(["vectors", "export", str(out2), "--verifier", "token", "--decisions", "1"], capsys)
    assert (out / "token--K1--zeros.json").read_text() == (out2 / "token--K1--zeros.json") \
        .read_text()


def test_export_is_atomic(tmp_path, capsys):
    out = tmp_path / "v"
    # the second verifier returns a float (NaN) inside an exact law: nothing may be left behind
    code, stdout, err = run(["vectors", "export", str(out), "--verifier", "block",
                             "--verifier", "planted_bugs:nan_law"], capsys)
    assert code == 2 and stdout == ""
    assert "not a Fraction" in err  # the NaN is a float inside an exact law
    assert len(err.strip().splitlines()) == 1
    assert not out.exists() and os.listdir(tmp_path) == []
    # an existing empty directory is fine and gets filled
    out.mkdir()
    export_vectors(out, ["block"], [("toy", toy_instance())])
    assert os.listdir(out) == ["block--K1--toy.json"]


@pytest.mark.parametrize("args,message", [
    (["export", "{d}/exists", "--verifier", "block"], "not an empty directory"),
    (["export", "{d}/new", "--verifier", "uniform-product"], "float law only"),
    (["export", "{d}/new", "--verifier", "no-such"], "unknown verifier"),
    (["export", "{d}/new", "--verifier", "block", "--instances", "{d}/missing.json"],
     "cannot read instance"),
    (["export", "{d}/nodir/new", "--verifier", "block"], "no such directory"),
    (["export", "{d}/exists/x.txt/new", "--verifier", "block"], "x.txt': a file, not a directory"),
    # a newline in the path is shown as written (the path quoted), not as a space
    (["export", "{d}/a\nb/new", "--verifier", "block"], "a\\nb': no such directory"),
    (["check", "{d}/missing"], "not a directory"),
    (["check", "{d}/empty"], "no vector files"),
    (["check", "{d}/badjson"], "unreadable JSON"),
    (["check", "{d}/badschema"], "schema"),
    (["check", "{d}/badverifier"], "unknown verifier"),
    (["check", "{d}/baduniform"], "uniforms must be two numbers"),
])
def test_bad_input_one_line_exit_2(tmp_path, capsys, args, message):
    d = tmp_path
    (d / "exists").mkdir()
    (d / "exists" / "x.txt").write_text("x")
    (d / "empty").mkdir()
    for sub in ("badjson", "badschema", "badverifier", "baduniform"):
        (d / sub).mkdir()
    (d / "badjson" / "a.json").write_text("{not json")
    good = build_vector("block", toy_instance(), "t")
    (d / "badschema" / "a.json").write_text(json.dumps({**good, "schema": "other/9"}))
    (d / "badverifier" / "a.json").write_text(json.dumps({**good, "verifier": "no-such"}))
    bad_u = json.loads(json.dumps(good))
    bad_u["decisions"][0]["uniforms"] = [1.5, 0.2]
    (d / "baduniform" / "a.json").write_text(json.dumps(bad_u))
    code, stdout, err = run(["vectors"] + [a.format(d=d) for a in args], capsys)
    assert code == 2 and stdout == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not (d / "new").exists()
    assert [p for p in os.listdir(d) if p.startswith(".")] == []


def test_bad_arguments():
    with pytest.raises(SpectheoryError, match="decisions"):
        build_vector("block", toy_instance(), decisions=-1)
    big = random_instance(4, 4, 0, denominator=4)
    with pytest.raises(SpectheoryError, match="joint drafts"):
        build_vector("gbv", big, paths=2)


@pytest.mark.parametrize("edit,words", [
    (lambda d: d.pop("output_law"), "missing field 'output_law'; a vector file has every field"),
    (lambda d: [d.pop("tau_pmf"), d.pop("sequences")], "missing field 'tau_pmf' (and 1 more)"),
    (lambda d: d["drafts"][0].pop("stop"), "drafts[0] is missing field 'stop'"),
    (lambda d: d.update(verifier="nonexist"), "unknown verifier 'nonexist'"),
    (lambda d: d.update(drafting="zzz"), "drafting"),
    (lambda d: d["instance"].update(vocab_size=10**9), "vocab_size"),
    # a field of the wrong JSON type was a MISMATCH verdict (exit 1) against the fresh value
    (lambda d: d.update(drafting=None), "field 'drafting' = null is not a string"),
    (lambda d: d.update(lossless="yes"), "field 'lossless' = \"yes\" is not true or false"),
    (lambda d: d.update(paths=True), "field 'paths' = true is not an integer"),
    (lambda d: d.update(tau_pmf={}), "field 'tau_pmf' = dict is not a list"),
    # ... and so was an element of the wrong type, whose value agreed (0.0 for "0")
    (lambda d: d["output_law"].__setitem__(0, 0.0),
     "field output_law[0] = 0.0 is not a fraction string"),
    (lambda d: d["tau_pmf"].__setitem__(0, [d["tau_pmf"][0]]),
     "field tau_pmf[0] = list is not a fraction string"),
    # ... and so was a list longer or shorter than the file's own instance gives (L + 1 or
    # V^(L+1) entries): the file contradicts itself
    (lambda d: d["tau_pmf"].append("0"), "field 'tau_pmf' has 4 entries where the file's "
                                         "instance (V = 3, L = 2) has L + 1 = 3"),
    (lambda d: d["output_law"].pop(), "field 'output_law' has 26 entries where the file's "
                                      "instance (V = 3, L = 2) has V^(L+1) = 27"),
    (lambda d: d["target_law"].pop(), "field 'target_law' has 26 entries"),
    (lambda d: d["sequences"].append([0, 0, 0]), "field 'sequences' has 28 entries"),
])
def test_a_malformed_vector_file_is_refused_naming_it(tmp_path, capsys, edit, words):
    """A file without output_law was a MISMATCH verdict (exit 1), and an unknown verifier, a
    drafting scheme or an instance at fault were refused without naming the file."""
    out = tmp_path / "vx"
    export_vectors(out, verifiers=["token"])
    name = sorted(out.glob("*.json"))[0]
    data = json.loads(name.read_text())
    edit(data)
    name.write_text(json.dumps(data))
    code, stdout, err = run(["vectors", "check", str(out)], capsys)
    assert code == 2 and stdout == "" and err.count("\n") == 1, err
    assert f"{name.name}: " in err and words in err, err


def test_a_drafting_scheme_for_single_path_verifiers_only_is_refused(tmp_path, capsys):
    """``vectors export --verifier token --drafting hub`` wrote the default files (drafting iid):
    the scheme applies to multi-path verifiers, and here there was none."""
    code, out, err = run(["vectors", "export", str(tmp_path / "v"), "--verifier", "token",
                          "--drafting", "hub"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "drafting = 'hub' applies to multi-path verifiers; token is single-path" in err
    assert not (tmp_path / "v").exists()
    names = export_vectors(tmp_path / "w", ["token", "gbv"], paths=2, drafting="iid")
    assert any("token" in str(n) for n in names) and any("gbv" in str(n) for n in names)


def test_a_verifier_under_another_drafting_scheme_is_noted_once(tmp_path, capsys):
    """The DraftingWarning was printed by Python with its source line, three times for gbv
    under norep; it is one note line."""
    code, out, err = run(["vectors", "export", str(tmp_path / "v"), "--verifier", "token",
                          "--verifier", "gbv", "--drafting", "norep", "--no-progress"], capsys)
    assert code == 0 and out.startswith("wrote "), err
    assert err == ("spectheory: note: gbv is designed for iid drafting; analysing it under "
                   "norep drafting\n"), err


@pytest.mark.parametrize("pair,words", [
    pytest.param(("x", 0.5), r"uniforms\[0\]\[0\] = \('x', 0\.5\): each uniform must be a real "
                 r"number in \[0, 1\)", id="text"),
    pytest.param((0.1, 0.2, 0.3), r"uniforms\[0\]\[0\] = \(0\.1, 0\.2, 0\.3\) is not a pair "
                 r"\(u0, u1\)", id="three"),
    pytest.param((float("nan"), 0.5), r"must be a real number in \[0, 1\)", id="nan"),
    pytest.param((0.1, 1.0), r"must be a real number in \[0, 1\)", id="one"),
])
def test_build_vector_names_the_uniform_it_cannot_read(pair, words):
    """A pair of text or of three numbers in build_vector(uniforms=...) raised a bare ValueError
    ("could not convert string to float: 'x'", "too many values to unpack"); Fractions and torch
    numbers are read as before (the controls)."""
    from fractions import Fraction

    import torch

    import spectheory as st
    from spectheory.runtime.errors import SpectheoryError
    from spectheory.testing import build_vector

    inst = st.random_instance(3, 2, 1, denominator=60)
    n = len(build_vector("token", inst)["drafts"])
    with pytest.raises(SpectheoryError, match=words):
        build_vector("token", inst, uniforms=[[pair]] * n)
    for good in ([(0.1, 0.2)], [(Fraction(1, 4), Fraction(1, 2))],
                 torch.tensor([[0.25, 0.5]], dtype=torch.float64)):
        assert len(build_vector("token", inst, uniforms=[good] * n)["decisions"]) == n


@pytest.mark.parametrize("field,value,words", [
    ("drafting", "hub", "drafting 'hub' applies to multi-path verifiers; block is single-path "
                        "(`vectors export` writes 'iid')"),
    ("block_length", -1, "field 'block_length' = -1 where the file's instance has 2"),
    ("vocab_size", 10**12, "field 'vocab_size' = 1000000000000 where the file's instance has 3"),
])
def test_a_file_that_contradicts_its_verifier_or_instance_is_refused(exported, tmp_path, capsys,
                                                                      field, value, words):
    """A single-path vector file claiming the hub scheme matched a fresh computation (exit 0);
    a top-level block length of -1 was a MISMATCH verdict (exit 1) on a file that contradicts
    its own instance."""
    out, _ = exported
    copy = tmp_path / "copy"
    copy.mkdir()
    v = _load(out, "block--K1--pd.json")
    v[field] = value
    (copy / "block--K1--pd.json").write_text(json.dumps(v))
    code, stdout, err = run(["vectors", "check", str(copy)], capsys)
    assert code == 2 and stdout == "" and err.count("\n") == 1 and words in err, err


def test_more_decisions_than_export_writes_are_refused_before_they_are_checked(exported,
                                                                              tmp_path, capsys):
    """A file of a million decision pairs was checked one by one (33 s)."""
    out, _ = exported
    copy = tmp_path / "copy"
    copy.mkdir()
    v = _load(out, "block--K1--pd.json")
    n = len(v["drafts"])
    one = v["decisions"][0]
    v["decisions"] = [one] * (100 * n + 1)
    (copy / "block--K1--pd.json").write_text(json.dumps(v))
    code, stdout, err = run(["vectors", "check", str(copy)], capsys)
    assert code == 2 and stdout == "" and err.count("\n") == 1, err
    assert f"{100 * n + 1:,} decisions, over the {100 * n:,} that `vectors export` writes" in err
