"""What the code under test does in threads it starts, and verdicts on low-precision output:

* a thread a sampler started that calls ``os._exit(0)`` while the check runs ended the process
  with exit 0 and no output (the guard covered the calling thread during a call only): the
  thread ends and the check is refused in one line naming it, on the command line (exit 2) and
  in Python (`UserCodeError`, the caller's process alive);
* a thread that raises put Python's traceback on standard error beside the verdict: one line,
  exit 2;
* a non-daemon thread left running kept the command alive for ever after its verdict: the
  command ends with its verdict's exit code and one note naming the thread;
* ``check-sampler --tree --verifier block`` ran the tree check's default rule (topk) and passed:
  block has no node rule, refused as in Python;
* `check_proposal` failed a correct draft step that reports q in float16 (a sum off 1 by a few
  1e-4 against a fixed 1e-6): the tolerance of the reported dtype, as for given draft rows; a
  planted sampler that draws from another law than it reports still fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from cli_helpers import refused, run
from spectheory.runtime.errors import UserCodeError
from spectheory.testing import check_proposal, check_sampler

THREADS = textwrap.dedent("""
    import os, threading, time
    from spectheory.testing import make_sampler

    _ref = make_sampler("token")
    _started = []

    def exits_in_a_thread(drafts, q, p, generator):
        if not _started:
            _started.append(threading.Thread(target=lambda: os._exit(0), name="quitter"))
            _started[0].start()
            _started[0].join()
        return _ref(drafts, q, p, generator)

    def raises_in_a_thread(drafts, q, p, generator):
        if not _started:
            def boom():
                raise ValueError("thread boom")
            _started.append(threading.Thread(target=boom, name="boomer"))
            _started[0].start()
            _started[0].join()
        return _ref(drafts, q, p, generator)

    def leaves_a_thread(drafts, q, p, generator):
        if not _started:
            _started.append(threading.Thread(target=lambda: time.sleep(10**6), name="sleeper"))
            _started[0].start()
        return _ref(drafts, q, p, generator)
""")


@pytest.fixture
def threads_module(user_modules, request):
    """The module above under a name of this test's own (a module imported by an earlier test
    would keep its threads' state)."""
    import re

    name = "threadsmod_" + re.sub(r"\W", "_", request.node.name)
    return user_modules(**{name: THREADS})


@pytest.mark.parametrize("fn, words", [
    ("exits_in_a_thread", ("thread 'quitter' called os._exit(0) while the check ran",)),
    ("raises_in_a_thread", ("thread 'boomer' raised ValueError: thread boom",)),
])
def test_a_thread_that_exits_or_raises_refuses_the_check(threads_module, capsys, fn, words):
    refused(*run(["check-sampler", f"{threads_module}:{fn}", "--verifier", "token",
                  "--samples", "2000"], capsys), *words)


@pytest.mark.parametrize("fn, why", [
    ("exits_in_a_thread", "thread 'quitter' called os._exit"),
    ("raises_in_a_thread", "thread 'boomer' raised ValueError"),
])
def test_in_python_the_check_raises_and_the_caller_lives_on(threads_module, fn, why):
    import importlib

    mod = importlib.import_module(threads_module)
    with pytest.raises(UserCodeError, match=why):
        check_sampler(getattr(mod, fn), "token", samples=2000)
    assert os.getpid()  # still here: the thread's os._exit did not end this process


def test_a_thread_left_running_does_not_hold_the_command(tmp_path):
    (tmp_path / "threadsmod.py").write_text(THREADS)
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                                   ""))
    done = subprocess.run([sys.executable, "-m", "spectheory", "check-sampler",
                           "threadsmod:leaves_a_thread", "--verifier", "token", "--samples",
                           "2000"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr  # the verdict's code (a correct sampler)
    assert "check_sampler (law mode, verifier token): PASS" in done.stdout
    assert done.stderr.strip() == ("spectheory: note: 1 thread(s) started during the command "
                                   "are still running ('sleeper'); the command ends without "
                                   "waiting for them")


def test_an_explicit_block_verifier_is_refused_in_tree_mode(user_modules, capsys):
    name = user_modules(treesmod=textwrap.dedent("""
        from spectheory.testing import (SGLANG_TREE, tree_engine_sampler,
                                        tree_speculative_sampling_target_only)
        good = tree_engine_sampler(tree_speculative_sampling_target_only, SGLANG_TREE)
    """))
    refused(*run(["check-sampler", f"{name}:good", "--tree", "2,1", "--verifier", "block",
                  "--samples", "2000"], capsys), "verifier 'block' has no node rule")
    code, out, err = run(["check-sampler", f"{name}:good", "--tree", "2,1", "--samples", "2000"],
                         capsys)
    assert code == 0 and ": PASS" in out, out + err  # the sampler's declared rule


def _q_half(q, generator):
    t = torch.multinomial(q, 1, generator=generator)[:, 0]
    return t, q.half()


def _q_half_sharpened(q, generator):  # planted: draws from q^2, reports q
    w = q ** 2
    t = torch.multinomial(w / w.sum(1, keepdim=True), 1, generator=generator)[:, 0]
    return t, q.half()


def _q_meta(q, generator):
    return torch.multinomial(q, 1, generator=generator)[:, 0], q.to("meta")


def test_a_proposal_reported_in_float16_is_read_as_the_law_it_rounds():
    assert abs(float(torch.tensor([1 / 3] * 3).half().double().sum()) - 1) > 1e-6  # off 1
    assert check_proposal(_q_half, samples=20_000).passed
    bad = check_proposal(_q_half_sharpened, samples=20_000)
    assert not bad.passed and bad.p_value < 1e-6
    meta = check_proposal(_q_meta, samples=2_000)
    assert not meta.passed and any("q_reported on the meta device" in n for n in meta.notes)


# ----------------------------------------------------------------------------- the reference
# sampler's inputs, and calls that never return under max_seconds


def _rows(dtype=torch.float64, B=4, L=2, V=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.softmax(torch.randn(B, L, V, generator=g, dtype=torch.float64), -1)
    p = torch.softmax(torch.randn(B, L + 1, V, generator=g, dtype=torch.float64), -1)
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(B, L)
    return d, q.to(dtype), p.to(dtype)


@pytest.mark.parametrize("change, why", [
    (lambda d, q, p: (d, q * 3, p), "the q row of row 0, path 0, position 0 sums to 3"),
    (lambda d, q, p: (d, q * float("nan"), p), "has a non-finite entry"),
    (lambda d, q, p: (d + 5, q, p), "a drafted token lies outside 0..4"),
    (lambda d, q, p: ("x", q, p), "drafts must be a tensor"),
], ids=["sum", "nan", "ids", "text"])
def test_the_reference_sampler_refuses_rows_that_are_not_laws(change, why):
    from spectheory.runtime.errors import InputError
    from spectheory.testing import make_sampler

    sampler = make_sampler("block")
    with pytest.raises(InputError, match=why):
        sampler(*change(*_rows()), torch.Generator().manual_seed(1))
    d, q, p = _rows()
    tau, y = sampler(d.tolist(), q.tolist(), p.tolist(), torch.Generator().manual_seed(1))
    assert tau.shape == y.shape == (4,)  # lists are read as tensors


def test_a_users_sampler_that_hands_the_reference_a_bad_row_is_named(user_modules, capsys):
    name = user_modules(nanq=textwrap.dedent("""
        from spectheory.testing import make_sampler
        _ref = make_sampler("token")
        def sampler(drafts, q, p, generator):
            return _ref(drafts, q * float("nan"), p, generator)
    """))
    refused(*run(["check-sampler", f"{name}:sampler", "--verifier", "token", "--samples", "2000"],
                 capsys), f"sampler {name}:sampler raised InputError: draft rows: the q row")


def test_rows_given_in_float16_are_the_laws_they_round_for_the_reference_too():
    from spectheory.testing import DraftRows, make_sampler

    d, q, p = _rows(torch.float16)
    assert float((q.double().sum(-1) - 1).abs().max()) > 1e-6  # off 1 in float64
    rows = [DraftRows(d, q, p)]
    assert check_sampler(make_sampler("block"), "block", instances=rows, samples=20_000).passed
    planted = check_sampler(make_sampler("token"), "block", instances=rows, samples=20_000)
    assert not planted.passed and planted.p_value < 1e-6


@pytest.mark.parametrize("which", ["step", "proposal"])
def test_max_seconds_stops_a_call_that_never_returns(which):
    import time

    from spectheory.runtime.errors import TimeLimitError
    from spectheory.testing import check_step

    def hangs(*args, **kwargs):
        time.sleep(60)

    start = time.monotonic()
    with pytest.raises(TimeLimitError, match=r"hangs did not return: the call was stopped "
                                             r"after .* past 2 times max_seconds = 0\.2 plus 1 s"):
        if which == "step":
            check_step(hangs, samples=3000, max_seconds=0.2)
        else:
            check_proposal(hangs, samples=3000, max_seconds=0.2)
    assert time.monotonic() - start < 10  # (the call would sleep 60 s)


def test_check_proposal_validates_max_seconds():
    from spectheory.runtime.errors import OptionError

    for bad in (float("nan"), -1, 0, "1", True):
        with pytest.raises(OptionError, match="max_seconds = .* must be a positive number"):
            check_proposal(_q_half, samples=2000, max_seconds=bad)


def test_a_sampler_that_defeats_the_time_limit_is_ended_past_it(tmp_path):
    """--time-limit stops the work from the main thread (a check between steps, then SIGALRM);
    a sampler that catches every exception in a loop held the command until something outside
    killed it. A watcher thread ends the command 2 s (plus a tenth of the limit) past it."""
    import time

    (tmp_path / "defiant.py").write_text(textwrap.dedent("""
        import time
        def sampler(drafts, q, p, generator):
            while True:
                try:
                    while True:
                        time.sleep(0.05)
                except BaseException:
                    pass
    """))
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                                   ""))
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "spectheory", "check-sampler",
                           "defiant:sampler", "--verifier", "token", "--samples", "2000",
                           "--time-limit", "4"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    took = time.monotonic() - start
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.startswith("spectheory: error: time limit of 4 s reached and the code "
                                  "under test did not stop when asked") \
        and done.stderr.count("\n") == 1, done.stderr
    assert took < 30, took  # 6.4 s past the start of the work, a process start before it
    # (the limit covers the start-up of the work too: 4 s leaves the sampler time to be reached
    # on a loaded machine; 2 s did not always, and the plain time limit ended it first)


def test_the_first_calls_of_a_check_are_small_so_its_pace_is_read_seconds_in():
    """The kit's calls over interleaved draft rows were all of the full chunk (up to 25,000 rows),
    so a slow sampler's pace, and its estimate or refusal, came only after two full calls (half a
    minute at 0.5 ms a row); they grow from 4,096 rows now, as for large rows."""
    from spectheory.testing import make_sampler
    from spectheory.testing.checks.calls import RAMP_FIRST_ROWS

    ref, sizes = make_sampler("token"), []

    def counting(drafts, q, p, generator):
        sizes.append(int(drafts.shape[0]))
        return ref(drafts, q, p, generator)

    assert check_sampler(counting, "token", samples=100_000).passed
    assert sizes[0] == RAMP_FIRST_ROWS < max(sizes), sizes  # then up to the full chunk
    assert sum(sizes) >= 100_000


def test_a_step_that_emits_empty_rows_is_told_so():
    """Rows of no token (an empty list reads as float32) were reported as "float32 tokens, not
    integers"."""
    from spectheory.testing import check_step

    def empty(request):
        return [[] for _ in range(request.context.shape[0])]

    rep = check_step(empty, samples=2000)
    assert not rep.passed
    assert any("returned a row of 0 tokens; a step emits 1.." in n for n in rep.notes), rep.notes


def test_a_layout_constant_the_engine_function_does_not_take_is_refused_when_bound():
    from spectheory.runtime.errors import OptionError
    from spectheory.testing import SGLANG_CHAIN, engine_sampler
    from spectheory.testing import sglang_chain_speculative_sampling as fn

    with pytest.raises(OptionError, match=r"^layout 'sglang-chain': constant 'bogus_flag' is not "
                                          r"an argument of sglang_chain_speculative_sampling"):
        engine_sampler(fn, SGLANG_CHAIN.with_constants(bogus_flag=True))
    engine_sampler(fn, SGLANG_CHAIN.with_constants(threshold_acc=0.5))  # one it takes

    def takes_any(**kwargs):
        return fn(**kwargs)

    engine_sampler(takes_any, SGLANG_CHAIN.with_constants(bogus_flag=True))  # **kwargs: any
