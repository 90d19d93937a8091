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
import json
import time

import pytest

from cli_helpers import TOY, run, write
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


class _SlowFinaliser:
    def __del__(self):
        time.sleep(0.05)


def test_alarm_inside_a_finaliser_is_not_lost():
    """The same for an alarm that lands in a ``__del__`` run by reference counting."""
    start = time.monotonic()
    with pytest.raises(TimeLimitError):
        with limits.running(0.1):
            end = time.monotonic() + 8.0
            while time.monotonic() < end:
                _SlowFinaliser()  # dropped at once: __del__ runs, half of the time is in it
                pause = time.monotonic() + 0.05
                while time.monotonic() < pause:
                    pass
    assert time.monotonic() - start < 3.0


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
    file is small, the hu verifier's 2-path law on it takes minutes)."""
    import contextlib
    import io

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
    from spectheory.cli import CLIP_HEAD, CLIP_TAIL, clip_message

    text = "start " + "x" * 10_000 + " end"
    cut = clip_message(text)
    assert cut.startswith("start x") and cut.endswith("x end")
    assert f"[... {len(text) - CLIP_HEAD - CLIP_TAIL:,} characters cut ...]" in cut
    assert clip_message("short  message\nline") == "short message line"
