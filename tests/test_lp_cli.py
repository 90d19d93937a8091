"""``spectheory lp``: JSON keys, exact optima on the test vector, one-line errors (exit 2)."""

import json

import pytest

from cli_helpers import TOY, run as run_cli


@pytest.fixture
def toy(tmp_path):
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(TOY))
    return str(path)


def run(capsys, *argv):
    return run_cli(argv, capsys)


@pytest.mark.parametrize("problem,extra,optimum", [
    ("node-budget", [], "20/9"),
    ("coupling", [], "7/3"),  # 21/9
    ("direct", [], "20/9"),
    ("direct", ["--paths", "2"], "212/81"),
])
def test_exact_json(capsys, toy, problem, extra, optimum):
    code, out, err = run(capsys, "lp", toy, "--problem", problem, "--exact", "--json", *extra)
    assert code == 0, err
    js = json.loads(out)
    assert set(js) == {"problem", "paths", "optimum", "solver", "status", "variables",
                       "constraints", "seconds"}
    assert js["optimum"] == optimum and js["problem"] == problem and js["status"] == "optimal"


def test_float_multipath_text_and_json(capsys, toy):
    code, out, _ = run(capsys, "lp", toy, "--problem", "multipath", "--paths", "2", "--json")
    assert code == 0
    assert json.loads(out)["optimum"] == pytest.approx(212 / 81, abs=1e-9)
    code, out, _ = run(capsys, "lp", toy)
    assert code == 0 and "2.2222222222" in out


@pytest.mark.parametrize("argv,needle", [
    (["--problem", "coupling", "--paths", "2"], "single-path"),
    (["--problem", "multipath", "--exact"], "--exact is not available"),
    (["--max-sequences", "3"], "LP variables exceed"),
])
def test_bad_requests_are_one_line_errors(capsys, toy, argv, needle):
    code, out, err = run(capsys, "lp", toy, *argv)
    assert code == 2 and out == ""
    assert needle in err and err.count("\n") == 1


def test_bad_instance_files(capsys, tmp_path):
    code, out, err = run(capsys, "lp", str(tmp_path / "missing.json"))
    assert code == 2 and out == "" and "cannot read instance" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"vocab_size": 2, "block_length": 2, "target": ["1/3", "1/3"], '
                   '"draft": ["2/3", "1/3"]}')
    code, out, err = run(capsys, "lp", str(bad), "--exact")
    assert code == 2 and out == "" and "sums to" in err
