"""Hostile and careless inputs that must be refused in one line (exit code 2) or bounded.

Each case asserts what a user sees: the exit code, one line on stderr naming the problem, and
no result. The classes: time limits whose backstop alarm lands where Python swallows exceptions
(a garbage-collector callback, a finaliser), Ray addresses nobody listens on, rows that do not
sum to 1 given to the sampling processors, sweep files with duplicate axis values, values a job
would fail on, or a size no sweep file has, forged or corrupted sweep cache entries, numbers
that overflow, nesting that would exhaust the stack, options that would do nothing, and error
messages that would echo a huge input.
"""

from __future__ import annotations

import gc
import sys
import json
import time

import pytest

import spectheory as st
from cli_helpers import TOY, refused, run, write
from spectheory.inputs.random_instances import random_instance
from spectheory.runtime import limits
from spectheory.runtime.errors import TimeLimitError


# ----------------------------------------------------------------------------- time limits


def _spin_without_checks(seconds: float) -> None:
    """A long step that never calls check_time and allocates (so collections run)."""
    end = time.monotonic() + seconds
    kept = []
    while time.monotonic() < end:
        kept.append([[] for _ in range(200)])  # kept container objects: collections run often
        if len(kept) > 500:
            kept = []


def test_alarm_inside_a_gc_callback_is_not_lost():
    """A backstop alarm that fires while another garbage-collector callback runs (before ours in
    ``gc.callbacks``) used to raise inside it: Python printed "Exception ignored" and the run
    went on past its limit. Now it is deferred and raised just after the collection."""
    fired = []

    def slow_callback(phase, info):
        if phase == "start" and not fired and limits.remaining() is not None \
                and limits.remaining() < 0.4:
            fired.append(1)
            time.sleep(0.7)  # the backstop (limit + 0.5 s) fires in here

    gc.callbacks.insert(0, slow_callback)
    try:
        start = time.monotonic()
        with pytest.raises(TimeLimitError, match="time limit of 0.2 s"):
            with limits.running(0.2):
                _spin_without_checks(8.0)
        assert fired, "the collector never ran during the step"
        assert time.monotonic() - start < 3.0
    finally:
        gc.callbacks.remove(slow_callback)


def test_a_deferred_alarm_retries_as_the_collection_ends():
    """A backstop deferred inside a collection is re-armed when the collection ends: a retry timed
    only from the deferral could land at the next collection's start again and again in a loop
    that allocates fast (the test above took 4-7 s in about one run of six before)."""
    import signal

    start = time.monotonic()
    with pytest.raises(TimeLimitError):
        with limits.running(30):
            limits._pending[0] = True  # as if the backstop had been deferred in a collection
            limits._collection_stops("stop", {})
            assert signal.getitimer(signal.ITIMER_REAL)[0] <= limits.RETRY_AFTER_COLLECTION
            # the alarm fires RETRY_AFTER_COLLECTION after the collection, into a Python loop
            # (not time.sleep: the kernel may deliver SIGALRM to another thread of the process,
            # and a sleeping main thread then runs the handler only once the sleep is over; a
            # running one runs it at its next instruction, as a computation under a limit does)
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                pass
    assert time.monotonic() - start < 5  # (the timer above says when: a machine pause can
    # delay the loop, not the alarm's time)
    assert not limits._pending[0]
    # controls: nothing pending, or another handler's alarm (a kit watchdog): no re-arm
    with limits.running(30):
        limits._collection_stops("stop", {})
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 29
        old = signal.signal(signal.SIGALRM, lambda *a: None)
        try:
            limits._pending[0] = True
            limits._collection_stops("stop", {})
            assert signal.getitimer(signal.ITIMER_REAL)[0] > 29
        finally:
            limits._pending[0] = False
            signal.signal(signal.SIGALRM, old)


class _SlowFinaliser:
    def __del__(self):
        time.sleep(0.3)


def test_alarm_inside_a_finaliser_is_not_lost():
    """The same for an alarm that lands in a ``__del__`` run by reference counting: the
    backstop (0.6 s) fires during the second finaliser's 0.3 s sleep (0.31-0.61 s), where a
    raise would be printed as "Exception ignored" and lost."""
    start = time.monotonic()
    with pytest.raises(TimeLimitError):
        with limits.running(0.1):
            end = time.monotonic() + 8.0
            while time.monotonic() < end:
                _SlowFinaliser()  # dropped at once: __del__ runs
                pause = time.monotonic() + 0.01
                while time.monotonic() < pause:
                    pass
    assert time.monotonic() - start < 3.0


def test_alarm_during_an_import_waits_for_the_module(tmp_path, monkeypatch):
    """An alarm that fires while a module is imported is deferred until the import has finished:
    raising inside it would leave a half-initialised module in ``sys.modules`` (torch's, for
    one), broken for every later use in the process."""
    import sys

    (tmp_path / "slow_import_mod.py").write_text(
        "import time\nend = time.monotonic() + 1.0\nwhile time.monotonic() < end:\n"
        "    [[] for _ in range(50)]\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("slow_import_mod", None)
    try:
        with pytest.raises(TimeLimitError):
            with limits.running(0.05):  # the backstop fires at 0.55 s, inside the import
                import slow_import_mod  # noqa: F401
                _spin_without_checks(8.0)
        assert sys.modules["slow_import_mod"].DONE is True
    finally:
        sys.modules.pop("slow_import_mod", None)


def test_nested_limit_keeps_the_outer_backstop():
    """An inner running() with a sooner limit restores the outer limit's alarm on exit."""
    start = time.monotonic()
    with pytest.raises(TimeLimitError, match="time limit of 0.3 s"):
        with limits.running(0.3):
            with limits.running(0.05):
                pass
            _spin_without_checks(8.0)
    assert time.monotonic() - start < 3.0


@pytest.fixture(scope="module")
def v50l3(tmp_path_factory):
    """A V = 50, L = 3 instance made with ``spectheory instance random`` (one row per level: the
    file is small, the hu verifier's 2-path law on it takes minutes). Torch is loaded first, so
    the clock measures the analysis (an alarm is deferred until an import has finished)."""
    import contextlib
    import io

    import torch  # noqa: F401

    from spectheory.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["instance", "random", "--vocab", "50", "--block", "3",
                     "--context-independent"]) == 0
    path = tmp_path_factory.mktemp("v50l3") / "v50L3.json"
    path.write_text(buf.getvalue())
    return str(path)


@pytest.mark.parametrize("limit", ["0.001", "0.3"])
def test_exact_time_limit_holds_with_a_slow_gc_callback(v50l3, capsys, limit):
    """``exact v50L3.json --verifier hu --paths 2 --time-limit T`` stops near T even when the
    collector's callbacks are slow (the alarm may land in them): exit 2, one line, no result."""
    slow = []

    def slow_callback(phase, info):
        if phase == "start" and len(slow) < 3:
            slow.append(1)
            time.sleep(0.2)

    gc.callbacks.insert(0, slow_callback)
    try:
        start = time.monotonic()
        code, out, err = run(["exact", v50l3, "--verifier", "hu", "--paths", "2",
                              "--time-limit", limit], capsys)
        took = time.monotonic() - start
    finally:
        gc.callbacks.remove(slow_callback)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"time limit of {float(limit):g} s reached" in err
    assert took < float(limit) + 5.0


# ----------------------------------------------------------------------------- processing rows


@pytest.mark.parametrize("rows", [
    pytest.param(lambda: __import__("numpy").array([3.0, 1.0]), id="numpy-[3,1]"),
    pytest.param(lambda: __import__("torch").tensor([[0.5, 0.5], [0.5, 0.6]]), id="torch-row-1"),
    pytest.param(lambda: __import__("numpy").array(
        [__import__("fractions").Fraction(1, 2), __import__("fractions").Fraction(1, 3)],
        dtype=object), id="exact-5/6"),
])
def test_process_rows_refuses_rows_off_one(rows):
    """``process_rows([3, 1], "top_p=0.9")`` used to renormalise silently; a row off 1 beyond
    ROW_SUM_TOL is refused in one line naming the row and its sum."""
    from spectheory.inputs.processing import SamplingError, process_rows

    with pytest.raises(SamplingError, match=r"probability row \d sums to .*not 1 within 1e-05"):
        process_rows(rows(), "top_p=0.9")


def test_keep_mask_and_process_instance_refuse_rows_off_one():
    import numpy as np

    from spectheory.inputs.processing import (ROW_SUM_TOL, SamplingError, keep_mask,
                                              parse_sampling, process_rows)

    with pytest.raises(SamplingError, match="row 1 sums to 2"):
        keep_mask(np.array([[0.5, 0.5], [1.0, 1.0]]), parse_sampling("top_p=0.9"))
    with pytest.raises(SamplingError, match="not 1 within 1e-05"):  # just past the tolerance
        process_rows(np.array([0.75, 0.25]) * (1 + 2 * ROW_SUM_TOL), "top_k=1")
    # within the tolerance: divided by the sum, the normalised row's answer
    near = np.array([0.75, 0.25]) * (1 + ROW_SUM_TOL / 2)
    assert np.allclose(process_rows(near, "top_p=0.9"), [0.75, 0.25], atol=1e-15)
    assert process_rows(np.array([0.75, 0.25]), "top_p=0.7").tolist() == [1.0, 0.0]


# ----------------------------------------------------------------------------- long messages


def _long_fraction_instance(tmp_path):
    big = "1/" + "3" * 10_000
    return write(tmp_path, {"vocab_size": 2, "block_length": 1, "target": {"": [big, "1/2"]},
                            "draft": {"": ["1/2", "1/2"]}})


@pytest.mark.parametrize("make", [
    pytest.param(lambda tmp: ["exact", TOY_PATH(tmp), "--sampling",
                              ",".join(["temperature=0.5"] * 15_000)], id="sampling-x15000"),
    pytest.param(lambda tmp: ["lp", TOY_PATH(tmp), "--problem", "x" * 120_000],
                 id="choice-120k"),
    pytest.param(lambda tmp: ["exact", TOY_PATH(tmp), "--verifier", "x" * 120_000],
                 id="verifier-120k"),
    pytest.param(lambda tmp: ["claims", "--only", "x" * 120_000], id="claims-only-120k"),
    pytest.param(lambda tmp: ["exact", _long_fraction_instance(tmp), "--exact"],
                 id="fraction-10000-digits"),
    pytest.param(lambda tmp: ["exact", TOY_PATH(tmp), "--bogus" + "x" * 50_000],
                 id="unknown-option-50k"),
])
def test_error_lines_are_cut_to_a_readable_length(tmp_path, capsys, make):
    """An error that would echo a huge input is cut at the CLI's one printer: exit 2, one line of
    at most MAX_ERROR_CHARS (plus the prefix and the help pointer), its start kept, the number
    of characters cut stated."""
    from spectheory.cli import MAX_ERROR_CHARS

    code, out, err = run(make(tmp_path), capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("spectheory")
    assert len(err) <= MAX_ERROR_CHARS + 120
    assert "error: " in err


def TOY_PATH(tmp):  # noqa: N802 - used inside the case table
    return write(tmp, TOY, "toy.json")


def test_clip_message_keeps_start_and_end_and_counts():
    from spectheory.cli import CLIP_HEAD, CLIP_TAIL, MAX_ERROR_CHARS, clip_message

    text = "start " + "x" * 10_000 + " end"
    cut = clip_message(text)
    assert cut.startswith("start x") and cut.endswith("x end")
    assert f"[... {len(text) - CLIP_HEAD - CLIP_TAIL:,} characters cut ...]" in cut
    assert clip_message("short  message\nline") == "short message line"
    assert clip_message("y" * MAX_ERROR_CHARS) == "y" * MAX_ERROR_CHARS
    cut = clip_message("z" * (MAX_ERROR_CHARS + 1))
    assert len(cut) < MAX_ERROR_CHARS + 40 and "characters cut" in cut


# ----------------------------------------------------------------------------- Ray addresses


def _closed_port() -> int:
    """A local TCP port nobody listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_probe_address_refuses_a_closed_port_and_accepts_a_listening_one():
    import socket

    from spectheory.runtime.errors import OptionError
    from spectheory.runtime.raycluster import probe_address, split_address

    port = _closed_port()
    with pytest.raises(OptionError, match=f"'127.0.0.1:{port}': cannot connect"):
        probe_address(f"127.0.0.1:{port}")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        probe_address(f"127.0.0.1:{server.getsockname()[1]}")  # no error
        probe_address(f"ray://127.0.0.1:{server.getsockname()[1]}")
    probe_address("auto")  # left to Ray
    assert split_address("[::1]:6379") == ("::1", 6379)
    for bad in ("nonsense", "host:", "host:0", "host:70000", ":80"):
        with pytest.raises(OptionError, match="is not a Ray address"):
            split_address(bad)


@pytest.mark.parametrize("command", ["exact", "sweep"])
def test_ray_address_nobody_listens_on_is_one_line_naming_it(tmp_path, capsys, command):
    """``--executor ray --address 127.0.0.1:PORT`` with nothing there: refused within seconds
    in one line naming the address given (Ray retried for minutes), no output folder."""
    pytest.importorskip("ray")
    address = f"127.0.0.1:{_closed_port()}"
    if command == "exact":
        args = ["exact", write(tmp_path, TOY), "--executor", "ray", "--address", address]
    else:
        from spectheory.sweep import example_config

        args = ["sweep", write(tmp_path, example_config(), "s.toml"), "--out",
                str(tmp_path / "out"), "--executor", "ray", "--address", address]
    start = time.monotonic()
    code, out, err = run(args, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"'{address}': cannot connect to {address}" in err and "sys.exit" not in err
    assert time.monotonic() - start < 30
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- options


@pytest.mark.parametrize("extra, message", [
    (["--split-depth", "1"], "--split-depth 1 does nothing without --executor"),
    (["--workers", "3"], "--workers 3 does nothing without --executor"),
    (["--executor", "local", "--address", "127.0.0.1:1"],
     "--address '127.0.0.1:1' is for --executor ray"),
    (["--address", "127.0.0.1:1"], "--address '127.0.0.1:1' is for --executor ray"),
])
def test_exact_options_that_would_do_nothing_are_refused(tmp_path, capsys, extra, message):
    code, out, err = run(["exact", write(tmp_path, TOY)] + extra, capsys)
    assert (code, out, err.count("\n")) == (2, "", 1) and message in err


@pytest.mark.parametrize("kwargs, message", [
    ({"split_depth": 1}, "split_depth=1 does nothing without executor='local' or 'ray'"),
    ({"split_depth": 2}, "split_depth=2 does nothing without executor='local' or 'ray'"),
    ({"workers": 3}, "workers=3 does nothing without executor='local' or 'ray'"),
    ({"address": "127.0.0.1:1"}, "address='127.0.0.1:1' is for executor='ray' (the Ray "
                                 "cluster to use); with executor=None it would do nothing"),
    ({"executor": "local", "address": "127.0.0.1:1"},
     "address='127.0.0.1:1' is for executor='ray' (the Ray cluster to use); with "
     "executor='local' it would do nothing"),
])
def test_analyze_options_that_would_do_nothing_are_refused(kwargs, message):
    """The API refuses what the command line refuses (one rule,
    `spectheory.engine.split.check_executor_options`): split_depth, workers without an
    executor, an address without the Ray executor, before any work."""
    from spectheory.runtime.errors import OptionError

    with pytest.raises(OptionError) as exc:
        st.analyze(random_instance(2, 2, 0), "block", **kwargs)
    assert str(exc.value) == message + (
        f" (it sets how the split route runs); add executor or drop {next(iter(kwargs))}"
        if "does nothing" in message else "")


def test_analyze_executor_options_that_do_something_are_taken(tmp_path, capsys):
    """The same options with the executor they need run, and give the single-process value
    (the default split depth is 1, from the API and from the command line)."""
    inst = random_instance(3, 2, 0, denominator=10)
    one = st.analyze(inst, "block", exact=True, laws=False)
    for kwargs in ({"executor": "local"}, {"executor": "local", "workers": 1},
                   {"executor": "local", "workers": 1, "split_depth": 1}):
        res = st.analyze(inst, "block", exact=True, laws=False, **kwargs)
        assert res.tau_pmf == one.tau_pmf and res.route == "node, split at depth 1 (local)"
    from spectheory.inputs.instances import instance_to_dict

    path = write(tmp_path, instance_to_dict(inst))
    code, out, err = run(["exact", path, "--verifier", "block", "--exact", "--executor",
                          "local", "--workers", "1", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["block_efficiency"] == str(one.block_efficiency)


def test_sweep_address_with_the_local_executor_is_refused(tmp_path, capsys):
    from spectheory.sweep import example_config

    code, out, err = run(["sweep", write(tmp_path, example_config(), "s.toml"), "--out",
                          str(tmp_path / "out"), "--address", "127.0.0.1:1"], capsys)
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert "--address '127.0.0.1:1' is for --executor ray" in err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- sweep files

SWEEP_HEAD = '[sweep]\ntime_limit = 30\n'
RANDOM = '[[instances]]\nfamily = "random"\nvocab = [2]\nblock = [1]\n'
TOKEN = '[[verifiers]]\nname = ["token"]\n'


@pytest.mark.parametrize("text, message", [
    (RANDOM + "alpha = nan\n" + TOKEN, "alpha = nan is out of range"),
    (RANDOM + "alpha = -1.0\n" + TOKEN, "alpha = -1.0 is out of range"),
    (RANDOM + "alpha = inf\n" + TOKEN, "alpha = inf is out of range"),
    (RANDOM + '[[verifiers]]\nname = ["bogusver"]\n', "unknown verifier 'bogusver'"),
    (RANDOM + '[[verifiers]]\nname = ["gbv"]\npaths = [2]\ndrafting = ["bogus"]\n',
     "unknown drafting scheme 'bogus'"),
    (RANDOM.replace('"random"', '"nosuchmodule_xyz:fam"') + TOKEN,
     "no module named 'nosuchmodule_xyz'"),
    (RANDOM + TOKEN + 'sampling = ["temperature=0.7"]\n',
     "sampling 'temperature=0.7' under [sweep] exact = true: temperature = 0.7 is not rational"),
    # a penalty was refused for "a temperature T other than 0 or 1/n", none being given
    (RANDOM + TOKEN + 'sampling = ["repetition_penalty=1.2"]\n',
     "exact = true: repetition_penalty acts on logits"),
    (RANDOM + '[[verifiers]]\nname = ["specinfer"]\nshape = ["2,2,2"]\n',
     "shape '2,2,2' has depth 3"),
    (RANDOM.replace("[2]", "[3, 3, 3]", 1) + TOKEN, "vocab lists 3 more than once"),
    (RANDOM + "alpha = [1.0, 1]\n" + TOKEN, "alpha lists 1 more than once (as 1.0)"),
    (RANDOM + "seeds = [0, 1, 0]\n" + TOKEN, "seeds lists 0 more than once"),
    (RANDOM.replace('"random"', '["random", "random"]') + TOKEN, "family lists 'random' more"),
    (RANDOM + '[[verifiers]]\nname = ["token"]\nblock = [4]\n', "block [4] matches no instance"),
    (RANDOM + '[[verifiers]]\nname = ["block"]\npaths = [2]\n', "single-path"),
    (RANDOM + '[[verifiers]]\nname = ["block"]\nroute = ["nodes"]\n',  # a tree route, on a chain
     "[[verifiers]] #1 route 'nodes' is not one of auto, node, per-draft, tree, enumerate, "
     "analytic; did you mean 'node'?"),
    (RANDOM + '[[verifiers]]\nname = ["specinfer"]\nshape = ["2,1"]\nroute = ["node"]\n',
     "route 'node' is not one of auto, enumerate, nodes"),
    (RANDOM + '[[optima]]\nproblem = ["multipath"]\npaths = [2]\n',
     "multipath LP relaxation is solved in float64 only"),
])
def test_sweep_refused_when_the_file_is_read(tmp_path, capsys, text, message):
    """Values every job would fail on are refused before any job runs: exit 2, one line naming
    the table, no output folder (each of these used to exit 0 with every row failed, or to
    compute one job several times)."""
    head = SWEEP_HEAD + ("exact = true\n" if "temperature=0.7" in text or "penalty" in text
                         or "multipath" in text else "")
    code, out, err = run(["sweep", write(tmp_path, head + text, "s.toml"), "--out",
                          str(tmp_path / "out")], capsys)
    assert (code, out, err.count("\n")) == (2, "", 1), err
    assert message in err
    assert not (tmp_path / "out").exists()


def test_sweep_whose_jobs_fail_exits_nonzero_and_says_how_many(tmp_path, capsys, monkeypatch):
    """A verifier that fails on one instance (only known when its job runs): the table is
    written, the exit code is 1 and one line says how many jobs failed and why."""
    (tmp_path / "oneseedver.py").write_text(
        "from spectheory.verifiers.token import token_verification\n"
        "def law(drafts, q, p):\n"
        f"    if float(q[0, 0, 0]) == {float(random_instance(2, 1, 1).draft.level(0)[0, 0])!r}:\n"
        "        return 42\n"
        "    return token_verification(drafts, q, p)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    text = SWEEP_HEAD + RANDOM + "seeds = [0, 1]\n" + TOKEN.replace('"token"', '"oneseedver:law"')
    code, out, err = run(["sweep", write(tmp_path, text, "s.toml"), "--out",
                          str(tmp_path / "out"), "--no-progress", "--workers", "2"], capsys)
    assert code == 1 and "2 rows (1 failed, 1 ok)" in out
    last = err.strip().splitlines()[-1]
    assert last.startswith("spectheory: sweep: 1 of 2 jobs did not finish ok (1 failed)")
    assert "verifier 'oneseedver:law' returned int" in last, last
    assert (tmp_path / "out" / "results.csv").is_file()


#: A family for every way a call can go wrong, by its knob ``how``.
FAMILIES = """
import os, sys, time
from spectheory.inputs.random_instances import random_instance

def fam(vocab_size, block_length, seed, how="ok"):
    if how == "int" and seed == 1:
        return 42
    if how == "none":
        return None
    if how == "raise":
        raise RuntimeError("boom")
    if how == "exit0":
        sys.exit(0)
    if how == "osexit":
        os._exit(0)
    if how == "die":
        os.kill(os.getpid(), 9)
    if how == "hang":
        time.sleep(60)
    if how == "hog":
        blocks = [bytearray(50 * 2**20) for _ in range(12)]
        time.sleep(60)
    if how == "bigger":
        return random_instance(vocab_size + 1, block_length, seed)
    if how == "nan":
        inst = random_instance(vocab_size, block_length, seed).to_float()
        inst.target.tables[0][0, 0] = float("nan")
        return inst
    return random_instance(vocab_size, block_length, seed)

not_a_function = 3
"""


@pytest.mark.parametrize("how, message", [
    ("int", "family famcases:fam(vocab_size=2, block_length=1, seed=1, how='int') returned "
            "int 42, not an Instance"),
    ("none", "how='none') returned NoneType None, not an Instance"),
    ("raise", "how='raise') raised RuntimeError: boom"),
    ("exit0", "how='exit0') called sys.exit(0); user code must return"),
    ("osexit", "how='osexit') called os._exit(0); user code must return"),
    ("die", "how='die') ended its process (exit code -9) before returning"),
    ("hang", "how='hang') did not return within the sweep's time_limit of 1 s"),
    ("hog", "how='hog') went over the sweep's memory_limit_mb of 200 MB"),
    ("bigger", "returned an Instance with vocab_size=3, block_length=1, not the sizes asked"),
    ("nan", "how='nan') returned an Instance the engines cannot compute with: "),
])
def test_sweep_family_is_called_when_the_file_is_read(tmp_path, capsys, monkeypatch, how,
                                                      message):
    """A ``module:function`` family is called for every parameter point before any job runs
    (in guarded child processes, under the sweep's limits): one that returns no Instance of
    the sizes asked for, raises, exits or crashes, or passes a limit is refused in one line
    naming the table, the family and its arguments: exit 2, no output folder."""
    (tmp_path / "famcases.py").write_text(FAMILIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    limit = 1 if how == "hang" else 3  # a hang waits the whole limit; the rest need start-up
    text = (f'[sweep]\ntime_limit = {limit}\nmemory_limit_mb = 200\n'
            + RANDOM.replace('"random"', '"famcases:fam"') + f"seeds = [0, 1]\nhow = {how!r}\n"
            + TOKEN)
    start = time.monotonic()
    code, out, err = run(["sweep", write(tmp_path, text, "s.toml"), "--out",
                          str(tmp_path / "out"), "--no-progress"], capsys)
    assert (code, out, err.count("\n")) == (2, "", 1), err
    assert err.startswith("spectheory: error: [[instances]] #1: family famcases:fam(") \
        and message in err, err
    assert not (tmp_path / "out").exists()
    assert time.monotonic() - start < 20


def test_sweep_family_that_is_no_function_is_refused_when_the_file_is_read(tmp_path,
                                                                          monkeypatch):
    from spectheory.runtime.errors import OptionError
    from spectheory.sweep import load_config

    (tmp_path / "famcases.py").write_text(FAMILIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(OptionError, match=r"^\[\[instances\]\] #1: family "
                                          r"'famcases:not_a_function' is int, not a function$"):
        load_config(RANDOM.replace('"random"', '"famcases:not_a_function"') + TOKEN)


def test_sweep_family_is_called_once_per_point_and_its_instances_serve_the_jobs(
        tmp_path, monkeypatch):
    """Each distinct argument set is one call, made when the file is read; the jobs (several
    verifiers, block lengths cut from one ``truncate_from`` build, a rerun of the same config)
    use those instances and never call the family again, and their values are the
    instances' own."""
    from dataclasses import replace

    from spectheory.sweep import load_config, run_sweep

    calls = tmp_path / "calls.log"
    (tmp_path / "countfam.py").write_text(
        "from spectheory.inputs.random_instances import random_instance\n"
        "def fam(vocab_size, block_length, seed, alpha=1.0):\n"
        f"    with open({str(calls)!r}, 'a') as fh:\n"
        "        fh.write(f'{vocab_size},{block_length},{seed},{alpha}\\n')\n"
        "    return random_instance(vocab_size, block_length, seed, alpha=alpha)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    text = ('[[instances]]\nfamily = "countfam:fam"\nvocab = [2, 3]\nblock = [1, 2]\n'
            'seeds = [0, 1]\ntruncate_from = 2\n'
            '[[instances]]\nfamily = "countfam:fam"\nvocab = 2\nblock = 2\nseeds = 0\n'
            'alpha = [0.5, 1.0]\n'
            '[[verifiers]]\nname = ["token", "block"]\n')
    cfg = load_config(text)
    lines = calls.read_text().split()
    # 2 V x 2 seeds built once at L = 2 for both blocks; alpha 1.0 is the family's default
    # but a knob given is another argument set (2 calls)
    assert sorted(lines) == sorted(["2,2,0,1.0", "2,2,1,1.0", "3,2,0,1.0", "3,2,1,1.0",
                                    "2,2,0,0.5", "2,2,0,1.0"])
    rows = run_sweep(cfg, tmp_path / "out", workers=2)
    assert len(rows) == 20 and all(r["status"] == "ok" for r in rows)
    assert calls.read_text().split() == lines  # no job called the family
    for r in rows:
        alpha = json.loads(r["knobs"]).get("alpha", 1.0)
        built = random_instance(r["vocab"], 2, r["seed"], alpha=alpha)
        want = st.analyze(replace(built, block_length=r["block"]), r["name"])
        assert r["block_efficiency"] == float(want.block_efficiency)
    rows2 = run_sweep(load_config(text), tmp_path / "out2", workers=2, use_cache=False)
    assert [r["block_efficiency"] for r in rows2] == [r["block_efficiency"] for r in rows]
    assert len(calls.read_text().split()) == 2 * len(lines)  # the second read's calls only


def test_sweep_file_size_is_bounded(tmp_path, capsys):
    """``sweep /dev/zero`` read 7 GB; a device is read at most 16 MiB, a regular file over
    16 MiB is refused before it is read."""
    from spectheory.sweep.config import MAX_FILE_BYTES

    big = tmp_path / "big.toml"
    with open(big, "wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)  # sparse: no 16 MiB written
    code, out, err = run(["sweep", str(big)], capsys)
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert f"is {MAX_FILE_BYTES + 1:,} bytes, over the 16 MiB" in err
    import os

    if os.path.exists("/dev/zero"):
        code, out, err = run(["sweep", "/dev/zero"], capsys)
        assert (code, out, err.count("\n")) == (2, "", 1)
        assert "holds more than 16 MiB" in err
    code, out, err = run(["sweep", str(tmp_path)], capsys)
    assert code == 2 and "it is a folder" in err


# ----------------------------------------------------------------------------- sweep cache


def _one_job_sweep(tmp_path):
    return write(tmp_path, SWEEP_HEAD + RANDOM + TOKEN, "s.toml")


def _forge(entry, how):
    if how == "status-only":
        entry["outputs"] = {"status": "ok"}
    elif how == "nan":
        entry["outputs"]["block_efficiency"] = float("nan")
    elif how == "other-inputs":
        entry["inputs"]["seed"] = 7
        entry["outputs"]["block_efficiency"] = 42.0
    elif how == "outputs-list":
        entry["outputs"] = [1, 2]
    elif how == "outputs-string":
        entry["outputs"] = "ok"
    elif how == "value-not-numeric":
        entry["outputs"]["block_efficiency"] = "fast"
    elif how == "nested-value":
        entry["outputs"]["expected_accepted"] = {"x": [1]}
    elif how == "pmf-off":
        entry["outputs"]["tau_pmf"] = "[0.5, 0.2]"
    elif how == "unknown-status":
        entry["outputs"]["status"] = "great"
    elif how == "failed-without-error":
        entry["outputs"].update(status="failed", error="")
    elif how == "value-edited":  # a finite number edited by hand: E[tau+1] = 99 at L = 1
        entry["outputs"]["block_efficiency"] = 99.0
    elif how == "values-edited-together":  # E[tau] and E[tau+1] edited, tau_pmf left
        entry["outputs"].update(block_efficiency=1.5, expected_accepted=0.5)
    elif how == "pmf-negative":
        entry["outputs"]["tau_pmf"] = "[1.5, -0.5]"
    elif how == "tv-over-one":
        entry["outputs"]["tv_to_target"] = 1.5
    elif how == "consistent-past-L":  # E[tau+1] = 99 at L = 1 with a tau law that agrees
        entry["outputs"].update(block_efficiency=99.0, expected_accepted=98.0,
                                tau_pmf=json.dumps([0.0] * 98 + [1.0]))
    elif how == "pmf-too-long":  # a law of tau over 0..2 at L = 1, its mean and E[tau+1] kept
        entry["outputs"].update(block_efficiency=2.0, expected_accepted=1.0,
                                tau_pmf="[0.5, 0.0, 0.5]")
    elif how == "negative-seconds":
        entry["outputs"]["seconds"] = -1.0
    elif how == "pmf-billion-digits":  # Fraction("1e999999999") builds a billion-digit integer
        entry["outputs"]["tau_pmf"] = '["1e999999999", "0"]'
    return json.dumps(entry, allow_nan=True)


CORRUPTIONS = ["status-only", "nan", "other-inputs", "outputs-list", "outputs-string",
               "value-not-numeric", "nested-value", "pmf-off", "unknown-status",
               "failed-without-error", "deep-nesting", "not-json", "value-edited",
               "values-edited-together", "pmf-negative", "tv-over-one", "consistent-past-L",
               "pmf-too-long", "negative-seconds", "pmf-billion-digits"]


def test_invalid_cache_entries_are_recomputed_never_used(tmp_path, capsys):
    """Each corrupted or forged cache entry is named as invalid and the job computed again: the
    row is the true value, never the entry's (no traceback, no ok row without a value)."""
    cfg = _one_job_sweep(tmp_path)
    out = tmp_path / "out"
    code, _, _ = run(["sweep", cfg, "--out", str(out), "--no-progress"], capsys)
    assert code == 0
    (path,) = (out / "cache").glob("*.json")
    good = json.loads(path.read_text())
    true = good["outputs"]["block_efficiency"]
    for how in CORRUPTIONS:
        if how == "deep-nesting":
            path.write_text('{"inputs": ' + "[" * 100_000 + "]" * 100_000 + "}")
        elif how == "not-json":
            path.write_text("{not json")
        else:
            path.write_text(_forge(json.loads(json.dumps(good)), how))
        code, stdout, err = run(["sweep", cfg, "--out", str(out), "--no-progress"], capsys)
        assert code == 0, (how, err)
        assert "cache entry" in err and "is not valid" in err and "computing it again" in err, how
        assert "Traceback" not in err
        row = (out / "results.csv").read_text().splitlines()
        assert len(row) == 2 and "42.0" not in row[1], how
        import csv

        (r,) = list(csv.DictReader(open(out / "results.csv")))
        assert r["status"] == "ok" and float(r["block_efficiency"]) == true, how
        assert json.loads(path.read_text()) ["outputs"]["block_efficiency"] == true


def _block_efficiencies(out):
    import csv

    return [(r["job"], float(r["block_efficiency"])) for r in csv.DictReader(open(out / "results.csv"))]


def test_an_edited_grammar_or_user_family_is_a_new_job_not_a_cached_one(tmp_path, capsys,
                                                                        monkeypatch):
    """The job key hashed the text "grammar=g.json" and "famx:fam", not what they name: after
    the grammar file or the family's module was edited, the old row was served from the cache
    (1.5158 where a fresh folder gave 2.4340, under the same key)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "g.json").write_text(json.dumps({"tokens": ["(", ")", "<eos>"], "eos": 2,
                                                 "regex": r"(\(\))*"}))
    (tmp_path / "famx_edit.py").write_text(
        "import spectheory as st\nSHIFT = 0\n\ndef fam(vocab_size, block_length, seed):\n"
        "    return st.random_instance(vocab_size, block_length, seed + SHIFT)\n")
    body = ('[sweep]\ntime_limit = 30\n[[instances]]\nfamily = "FAMILY"\nvocab = [3]\n'
            'block = [2]\n[[verifiers]]\nname = ["token"]\nSAMPLING\n')
    for family, sampling, edit in [
            ("random", 'sampling = ["grammar=g.json"]',
             lambda: (tmp_path / "g.json").write_text('{"transitions": [[0, 0, 0]]}')),
            ("famx_edit:fam", "",
             lambda: (tmp_path / "famx_edit.py").write_text(
                 (tmp_path / "famx_edit.py").read_text().replace("SHIFT = 0", "SHIFT = 17")))]:
        # (a new length: an edit within the same second as the first run would otherwise find
        # the first run's bytecode valid, as Python checks the source's mtime and size)
        cfg = write(tmp_path, body.replace("FAMILY", family).replace("SAMPLING", sampling),
                    "e.toml")
        out = tmp_path / f"out-{family.replace(':', '-')}"
        code, _, err = run(["sweep", cfg, "--out", str(out), "--no-progress"], capsys)
        assert code == 0, err
        ((key, before),) = _block_efficiencies(out)
        edit()
        code, _, err = run(["sweep", cfg, "--out", str(out), "--no-progress"], capsys)
        assert code == 0 and "0 cached" in err, err
        ((key2, after),) = _block_efficiencies(out)
        fresh = tmp_path / f"fresh-{family.replace(':', '-')}"
        assert run(["sweep", cfg, "--out", str(fresh), "--no-progress"], capsys)[0] == 0
        assert _block_efficiencies(fresh) == [(key2, after)]
        assert key2 != key and abs(after - before) > 1e-3, (family, before, after)
    # a grammar that fits no vocabulary of the table: refused when the file is read
    cfg = write(tmp_path, body.replace("FAMILY", "random").replace("[3]", "[2]")
                .replace("SAMPLING", 'sampling = ["grammar=g.json"]'), "v.toml")
    (tmp_path / "g.json").write_text('{"tokens": ["(", ")", "<eos>"], "eos": 2, "regex": "a*"}')
    refused(*run(["sweep", cfg, "--out", str(tmp_path / "v")], capsys),
            "the grammar has 3 tokens, and no instance it runs on has V = 3")
    assert not (tmp_path / "v").exists()


def test_sweep_plot_refuses_an_edited_table_naming_the_line(tmp_path, capsys):
    """An edited results.csv gave tracebacks (a non-number, paths 1e308, a missing column,
    non-UTF-8 bytes) or was drawn (a negative or NaN E[tau+1], paths -1)."""
    import csv

    cfg = _one_job_sweep(tmp_path)
    out = tmp_path / "out"
    assert run(["sweep", cfg, "--out", str(out), "--no-progress"], capsys)[0] == 0
    table = out / "results.csv"
    good = table.read_text()
    assert run(["sweep", "plot", str(out), "--figure", str(tmp_path / "ok.png")],
               capsys)[0] == 0
    rows = list(csv.DictReader(open(table)))
    cases = [("block_efficiency", "abc", "line 2: block_efficiency = 'abc' is not an E[tau + 1]"),
             ("block_efficiency", "-5", "block_efficiency = '-5' is not an E[tau + 1] of block 1"),
             ("block_efficiency", "nan", "'nan' is not an E[tau + 1]"),
             ("block_efficiency", "2.5", "'2.5' is not an E[tau + 1] of block 1 (a number in "
                                         "[1, 2])"),
             ("paths", "1e308", "paths = '1e308' is not a positive whole number"),
             ("paths", "-1", "paths = '-1' is not a positive whole number"),
             ("status", None, "no column 'status'")]
    for column, value, words in cases:
        edited = [dict(r) for r in rows]
        fields = list(rows[0])
        if value is None:
            fields.remove(column)
            for r in edited:
                r.pop(column)
        else:
            edited[0][column] = value
        with open(table, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=fields)
            w.writeheader()
            w.writerows(edited)
        figure = tmp_path / "f.png"
        refused(*run(["sweep", "plot", str(out), "--figure", str(figure)], capsys), words)
        assert not figure.exists()
    table.write_bytes(bytes(range(128, 256)))
    refused(*run(["sweep", "plot", str(out)], capsys), "not a sweep table (UnicodeDecodeError")
    table.write_text(good)


def test_a_cache_entry_or_cache_that_is_no_file_is_refused_before_any_job(tmp_path, capsys):
    """A cache entry that is a folder (or a broken link) was found only when the job's result was
    written, after its work; a cache that is a file was named as the output folder."""
    cfg = _one_job_sweep(tmp_path)
    out = tmp_path / "out"
    code, _, _ = run(["sweep", cfg, "--out", str(out), "--no-progress"], capsys)
    assert code == 0
    (path,) = (out / "cache").glob("*.json")
    table = (out / "results.csv").read_text()
    for make in ("folder", "broken-link"):
        path.unlink() if path.is_file() or path.is_symlink() else path.rmdir()
        path.mkdir() if make == "folder" else path.symlink_to(tmp_path / "nowhere")
        code, stdout, err = run(["sweep", cfg, "--out", str(out), "--no-progress"], capsys)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"cache entry {path} is not a file" in err and "remove it" in err, err
        assert "jobs," not in err  # refused before the run was announced
        assert (out / "results.csv").read_text() == table
    other = tmp_path / "out2"
    other.mkdir()
    (other / "cache").write_text("not a folder")
    code, stdout, err = run(["sweep", cfg, "--out", str(other), "--no-progress"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"its cache ({other / 'cache'}) is not a folder" in err, err
    assert sorted(p.name for p in other.iterdir()) == ["cache"]


def test_check_cache_entry_accepts_what_the_runner_writes(tmp_path):
    """The schema is not stricter than the rows the runner writes (ok, exact, failed)."""
    from spectheory.sweep.config import expand, load_config
    from spectheory.sweep.runner import check_cache_entry, run_sweep

    text = ('[sweep]\nexact = true\n[[instances]]\nfamily = "random"\nvocab = [2]\n'
            'block = [1]\ndenominator = 12\n[[verifiers]]\nname = ["block", "lenient(0.5)"]\n'
            '[[optima]]\nproblem = ["direct"]\n[[measures]]\nname = ["tv"]\n')
    cfg = load_config(text)
    run_sweep(cfg, tmp_path / "out", workers=1)
    for job in expand(cfg):
        entry = json.loads((tmp_path / "out" / "cache" / f"{job.key()}.json").read_text())
        assert check_cache_entry(entry, job)["status"] == "ok"
        assert check_cache_entry(entry, job) == entry["outputs"]


# ----------------------------------------------------------------------------- numbers, nesting


def test_instance_entry_1e999_is_one_line(tmp_path, capsys):
    inst = {"vocab_size": 2, "block_length": 1, "target": {"": ["1e999", "0.5"],
                                                           "0": [0.5, 0.5], "1": [0.5, 0.5]},
            "draft": {"": [0.5, 0.5]}}
    for extra in ([], ["--exact"]):
        code, out, err = run(["exact", write(tmp_path, inst)] + extra, capsys)
        assert (code, out, err.count("\n")) == (2, "", 1)
        assert "entry '1e999' is over 1 (not a probability)" in err
    inst["target"][""] = ["1e-99999999", "1"]
    code, out, err = run(["exact", write(tmp_path, inst), "--exact"], capsys)
    assert code == 2 and "decimal exponent beyond +-1000" in err


@pytest.mark.parametrize("deep", ["[" * 50_000 + "]" * 50_000, "[[[0]]]", '[{"a": [0]}]'])
def test_tree_choices_nested_deeper_than_two_is_one_line(tmp_path, capsys, deep):
    code, out, err = run(["tree", write(tmp_path, TOY), "--choices", deep], capsys)
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert "nested deeper than a list of lists" in err


def test_a_method_listed_twice_is_one_job():
    """Method axes are not refused for repeats: a verifier, K or shape listed twice is one job
    (the figures build shape lists where two trees share their K-path chain)."""
    from spectheory.sweep.config import count_jobs, expand, load_config

    cfg = load_config(RANDOM + '[[verifiers]]\nname = ["token", "block", "token"]\n'
                               '[[verifiers]]\nname = ["specinfer"]\nshape = ["2", "2"]\n')
    jobs = expand(cfg)
    assert count_jobs(cfg) == len(jobs) == 3 == len({j.key() for j in jobs})


def test_ray_sigterm_exit_is_a_termination_not_user_code(tmp_path, capsys, monkeypatch):
    """Ray's SIGTERM handler calls ``sys.exit(15)``: a command killed while Ray connects ends as
    a termination (exit 143, one line), not as "user code called sys.exit(15)"."""
    import importlib.util

    folder = tmp_path / "site" / "ray"
    folder.mkdir(parents=True)
    (folder / "fake_worker.py").write_text(
        "import sys\n\ndef sigterm_handler(signum, frame):\n    sys.exit(signum)\n")
    spec = importlib.util.spec_from_file_location("fake_ray_worker", folder / "fake_worker.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from spectheory.cli import commands

    monkeypatch.setattr(commands, "instance_from_text",
                        lambda *a, **k: mod.sigterm_handler(15, None))
    code, out, err = run(["exact", write(tmp_path, TOY)], capsys)
    assert (code, out) == (143, "") and err == (
        "spectheory: terminated by SIGTERM (while Ray was running; nothing was written)\n")
    # an exit elsewhere is still user code's, a handler of the same name outside Ray's too
    monkeypatch.setattr(commands, "instance_from_text", lambda *a, **k: sys.exit(15))
    code, out, err = run(["exact", write(tmp_path, TOY)], capsys)
    assert code == 2 and "user code called sys.exit(15)" in err
    other = tmp_path / "site" / "mine"
    other.mkdir()
    (other / "handler.py").write_text((folder / "fake_worker.py").read_text())
    spec = importlib.util.spec_from_file_location("not_ray_handler", other / "handler.py")
    mine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mine)
    monkeypatch.setattr(commands, "instance_from_text", lambda *a, **k: mine.sigterm_handler(15, 0))
    code, out, err = run(["exact", write(tmp_path, TOY)], capsys)
    assert code == 2 and "user code called sys.exit(15)" in err


def test_a_cached_optimum_past_l_plus_one_is_recomputed(tmp_path, capsys):
    """An LP optimum row has no law of tau to contradict it: E[tau+1] = 99 at L = 1, edited
    together with E[tau] = 98, was taken from the cache and plotted."""
    import csv

    cfg = write(tmp_path, SWEEP_HEAD + RANDOM + '[[optima]]\nproblem = ["node-budget"]\n',
                "s.toml")
    out = tmp_path / "out"
    assert run(["sweep", cfg, "--out", str(out), "--no-progress"], capsys)[0] == 0
    (path,) = (out / "cache").glob("*.json")
    entry = json.loads(path.read_text())
    true = entry["outputs"]["block_efficiency"]
    entry["outputs"].update(block_efficiency=99.0, expected_accepted=98.0, value=99.0)
    path.write_text(json.dumps(entry))
    code, _, err = run(["sweep", cfg, "--out", str(out), "--no-progress"], capsys)
    assert code == 0 and "is above L + 1 = 2" in err, err
    (r,) = list(csv.DictReader(open(out / "results.csv")))
    assert float(r["block_efficiency"]) == true <= 2
