"""Bad input to the conformance kit's checks and their commands, each refused in one line (or, for
output a sampler or step returns, a FAIL note naming it), never a traceback or a silent run:

* a sampler or step returning tensors on the ``meta`` device (a shape without values);
* a check's ``seed`` that is not an integer in 0..2^63-1 (a string failed deep in torch, -3 and
  1.5 were taken as other seeds);
* counts and integers on the command line: a negative ``--samples``, a non-ASCII digit, an
  integer of 36 digits (each named as what it is, with the command's own range), and an exact
  instance row off from 1 by less than float's range;
* the tree check's default instances of a deep tree (refused with the remedy the command has:
  ``--instance``, not ``--max-sequences``);
* a step or sampler that never returns (``--time-limit`` on ``check-step`` and
  ``check-sampler``), and a long step check (its time estimated on a first small call);
* user code printing to standard output (sent to standard error: ``--json`` stays one object).
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch

from cli_helpers import refused, run, write
from spectheory.inputs.random_instances import MAX_SEED
from spectheory.runtime.errors import OptionError, SizeLimitError
from spectheory.testing import vllm_v1_step
from spectheory.testing.checks import calls, step as step_mod
from spectheory.testing.checks.sampler import check_proposal, check_sampler, make_sampler
from spectheory.testing.checks.step import check_step, sample_steps
from spectheory.testing.checks.tree import check_tree_sampler, default_tree_instances


MODULE = '''
import time
import torch
from spectheory.testing import vllm_v1_step
from spectheory.testing.checks.sampler import make_sampler

_token = make_sampler("token")

def meta_step(req):
    return vllm_v1_step(req).to("meta")

def meta_sampler(drafts, q, p, generator):
    accepted, token = _token(drafts, q, p, generator)
    return accepted.to("meta"), token

def hanging_step(req):
    while True:
        time.sleep(0.05)

def hanging_sampler(drafts, q, p, generator):
    while True:
        time.sleep(0.05)

def chatty_sampler(drafts, q, p, generator):
    print("chatty sampler was called")
    return _token(drafts, q, p, generator)

def chatty_step(req):
    print("chatty step was called")
    return vllm_v1_step(req)
'''


@pytest.fixture
def kit_module(user_modules):
    import importlib
    import sys

    user_modules(kitbad=MODULE)
    sys.modules.pop("kitbad", None)
    return importlib.import_module("kitbad")


# ----------------------------------------------------------------------------- meta tensors


def test_meta_device_outputs_are_a_fail_note_not_a_traceback(kit_module, capsys):
    rep = check_step(kit_module.meta_step, samples=500)
    assert not rep.passed
    assert rep.notes == ["kitbad:meta_step returned emitted tokens on the meta device (a "
                         "shape without values)"]
    rep = check_sampler(kit_module.meta_sampler, "token", samples=2000)
    assert not rep.passed
    assert "returned accepted on the meta device" in rep.notes[0], rep.notes
    code, out, err = run(["check-step", "kitbad:meta_step", "--samples", "500"], capsys)
    assert code == 1 and "meta device" in out and "Traceback" not in err + out


def test_readable_names_the_device():
    t, note = calls.readable(torch.zeros(3, device="meta"), "token")
    assert t is None and note == "token on the meta device (a shape without values)"
    t, note = calls.readable(torch.arange(3), "token")  # control: a CPU tensor is read as is
    assert note is None and t.tolist() == [0, 1, 2]


# ----------------------------------------------------------------------------- seeds


@pytest.mark.parametrize("seed", ["x", -3, 1.5, True, MAX_SEED + 1, None])
def test_check_seeds_are_integers_in_range(seed):
    message = r"seed = .* must be an integer in 0\.\.9,223,372,036,854,775,807"
    sampler = make_sampler("token")
    for call in (lambda: check_step(vllm_v1_step, samples=500, seed=seed),
                 lambda: sample_steps(vllm_v1_step, step_mod.default_step_instances()[0], 10,
                                      seed=seed),
                 lambda: check_sampler(sampler, "token", samples=2000, seed=seed),
                 lambda: check_proposal(lambda q, g: (q.argmax(-1), q), samples=100, seed=seed),
                 lambda: check_tree_sampler(sampler, "sglang-tree", (2, 1), samples=100,
                                            seed=seed)):
        with pytest.raises(OptionError, match=message):
            call()


def test_seed_bounds_are_inclusive():
    assert calls.kit_seed(0) == 0 and calls.kit_seed(MAX_SEED) == MAX_SEED
    assert calls.kit_seed(np.int64(7)) == 7 and type(calls.kit_seed(np.int64(7))) is int
    # the largest seed runs: the step's second generator takes seed + 1 = 2^63, in torch's range
    counts = sample_steps(vllm_v1_step, step_mod.default_step_instances()[0], 50, seed=MAX_SEED)
    assert counts.sum() == 50


# ----------------------------------------------------------------------------- command line


@pytest.mark.parametrize("args, words", [
    (["--samples", "-5"], ["--samples -5 is out of range 1..1e+09"]),
    (["--samples", "1e15"], ["--samples 1,000,000,000,000,000 is out of range 1..1e+09"]),
    (["--samples", "abc"], ["is not an integer", "(accepted: 1..1e+09)"]),
    (["--seed", "\u0663"], ["--seed = '\u0663' is not an integer"]),
    (["--steps", "1e3"], ["--steps = '1e3' is not an integer (accepted: 1..32)"]),
])
def test_check_step_counts_named_with_their_range(capsys, args, words):
    refused(*run(["check-step", "spectheory.testing:vllm_v1_step", *args], capsys), *words)


@pytest.mark.parametrize("value, words", [
    ("1" + "0" * 35, ["--denominator", "(36 digits) is out of range 1..1,000,000,000"]),
    ("\u0663", ["--denominator", "is not an integer"]),
])
def test_integer_options_say_what_is_wrong(capsys, value, words):
    refused(*run(["instance", "random", "--vocab", "3", "--block", "2", "--denominator", value],
                 capsys), *words)


def test_exact_row_off_by_less_than_float_range_names_the_difference(tmp_path, capsys):
    inst = {"vocab_size": 2, "block_length": 1,
            "target": {"": ["1", "1e-400"], "0": ["1/2", "1/2"], "1": ["1/2", "1/2"]},
            "draft": {"": ["1/2", "1/2"]}}
    path = write(tmp_path, inst)
    code, out, err = run(["exact", path, "--verifier", "token", "--exact"], capsys)
    refused(code, out, err, "sums to 1 + 1e-400, off from 1 by 1e-400")
    inst["target"][""] = ["1", "1/3"]  # a short total is shown as the fraction it is
    code, out, err = run(["exact", write(tmp_path, inst), "--verifier", "token", "--exact"],
                         capsys)
    refused(code, out, err, "sums to 4/3, off from 1 by 0.333")


def test_deep_tree_default_instances_refused_with_the_commands_remedy(capsys):
    deep = "1," * 32 + "1"  # a chain of depth 33
    with pytest.raises(SizeLimitError, match=r"default instances of a tree of depth 33.*"
                                             r"give instances of your own \(--instance FILE\)$"):
        default_tree_instances(deep)
    parents = ",".join(str(p) for p in [0] + list(range(1, 33)))
    code, out, err = run(["check-sampler", "spectheory.testing:tree_speculative_sampling_target_"
                          "only", "--parents", parents, "--tree-layout", "sglang-tree",
                          "--verifier", "sglang-tree", "--samples", "3000"], capsys)
    refused(code, out, err, "--instance FILE")
    assert "--max-sequences" not in err
    # a wide tree (999 children of the root): its tied instance is drawn in exact quarters, so
    # the exact limit counts; it was refused by random_instance, naming --max-sequences, which
    # check-sampler does not have
    code, out, err = run(["check-sampler", "spectheory.testing:tree_speculative_sampling_target_"
                          "only", "--tree", "999", "--tree-layout", "sglang-tree", "--verifier",
                          "sglang-tree", "--samples", "3000"], capsys)
    refused(code, out, err, "the default instances of a tree of depth 1: V^(D+1) = 999^2",
            "use a narrower or shallower tree, or give instances of your own (--instance FILE)")
    assert "--max-sequences" not in err
    assert len(default_tree_instances((2, 1))) == 3  # control: a small tree's instances


# ----------------------------------------------------------------------------- time


@pytest.mark.parametrize("args,who", [
    (["check-step", "kitbad:hanging_step", "--samples", "1000"], "step kitbad:hanging_step"),
    (["check-sampler", "kitbad:hanging_sampler", "--verifier", "token", "--samples", "2000"],
     "sampler kitbad:hanging_sampler"),
])
def test_time_limit_stops_user_code_that_never_returns(kit_module, capsys, args, who):
    """The limit names the user call it stopped (it said only "use a smaller instance")."""
    t = time.perf_counter()
    code, out, err = run([*args, "--time-limit", "1.5"], capsys)  # (0.3 s: a pause of the
    # machine before the first user call let the limit stop the check's own work)
    refused(code, out, err, "time limit of 1.5 s reached", f"while {who} was running",
            f"raise --time-limit or look at {who}")
    assert time.perf_counter() - t < 10


def test_a_time_limit_in_python_names_the_call_it_stops():
    """``limits.running(seconds)`` in Python (no notes): the limit names the user call it
    stopped, and the calls that returned are no longer named."""
    from spectheory.runtime import limits
    from spectheory.runtime.errors import TimeLimitError, call_user

    def spins():
        while True:
            time.sleep(0.02)

    with pytest.raises(TimeLimitError, match=r"while my spinner was running; stopped with no "
                                             r"result: raise --time-limit or look at my spinner"):
        with limits.running(0.3):
            call_user(lambda: 1, what="a quick call")
            call_user(spins, what="my spinner")
    with pytest.raises(TimeLimitError) as exc:
        with limits.running(0.2):
            call_user(lambda: 1, what="a quick call")
            while True:
                limits.check_time()
                time.sleep(0.02)
    assert "while" not in str(exc.value) and "use a smaller instance" in str(exc.value)


def test_a_long_step_check_is_measured_on_a_small_first_call(monkeypatch, capsys):
    """With more samples than one call takes, the first call has `PILOT_ROWS` rows and the run's
    estimate is noted from it (here any estimate is noted: NOTE_SECONDS = 0)."""
    from spectheory.runtime import limits

    monkeypatch.setattr(step_mod, "STEP_CHUNK", 4096)
    monkeypatch.setattr(step_mod, "PILOT_ROWS", 256)
    monkeypatch.setattr(limits, "NOTE_SECONDS", 0.0)
    rows = []

    def recording(req):
        rows.append(req.context.shape[0])
        return vllm_v1_step(req)

    inst = step_mod.default_step_instances()[0]
    with limits.running(None, notes=True):
        rep = check_step(recording, [inst], samples=9000)
    assert rep.passed
    assert rows[0] == 256 and max(rows) <= 4096 and sum(rows) >= 9000
    err = capsys.readouterr().err
    assert err.count("spectheory: note: check_step: 9,000 samples, estimated") == 1, err
    assert "measured on the first 256" in err


def test_a_short_step_check_is_unchanged_by_the_pilot():
    """At most `STEP_CHUNK` samples an instance: the calls are as before (the same draws)."""
    rows = []

    def recording(req):
        rows.append(req.context.shape[0])
        return vllm_v1_step(req)

    inst = step_mod.default_step_instances()[0]
    check_step(recording, [inst], samples=3000)
    assert rows[0] == 3000


# ----------------------------------------------------------------------------- standard output


def test_user_prints_go_to_stderr_and_json_stays_one_object(kit_module, capsys):
    for args in (["check-sampler", "kitbad:chatty_sampler", "--verifier", "token", "--samples",
                  "2000", "--json"],
                 ["check-step", "kitbad:chatty_step", "--samples", "1000", "--json"]):
        code, out, err = run(args, capsys)
        assert code == 0, err
        assert json.loads(out)["passed"] is True
        assert "chatty" in err and "was called" not in out
    check_sampler(kit_module.chatty_sampler, "token", samples=2000)
    captured = capsys.readouterr()
    assert captured.out == "" and "chatty sampler was called" in captured.err


def test_a_long_user_call_is_noted_once_without_a_time_limit(kit_module, monkeypatch, capsys):
    """On the command line without --time-limit, a user call running past USER_CALL_NOTE_S is
    noted once on stderr (naming it and --time-limit); under a time limit nothing is noted."""
    from spectheory.runtime import limits

    monkeypatch.setattr(limits, "USER_CALL_NOTE_S", 0.2)
    calls = []

    pause = [None]  # the first call returns once it has been noted (the watcher sleeps up to
    # 1 s when an earlier test started it under the 30 s default; 0.05 s once it has woken
    # under 0.2 s), giving up after 10 s

    first, notes, say = [], [], limits.note

    def note(message):  # which call each note is for (the watcher notes the outermost)
        notes.append(limits._running_calls[0] if limits._running_calls else None)
        say(message)

    monkeypatch.setattr(limits, "note", note)

    def slow_then_fine(drafts, q, p, generator):
        calls.append(1)
        if len(calls) == 1 and pause[0] is None:
            first.append(limits._running_calls[0])
            give_up = time.monotonic() + 10
            while not limits._running_calls[0][2] and time.monotonic() < give_up:
                time.sleep(0.01)
            time.sleep(0.3)  # noted: still running, where a watcher that noted it again would
        elif len(calls) == 1:
            time.sleep(pause[0])
        return make_sampler("token")(drafts, q, p, generator)

    with limits.running(None, notes=True):
        rep = check_sampler(slow_then_fine, "token", samples=2000)
    assert rep.passed
    err = capsys.readouterr().err
    # the slow call noted once, and no call twice (a pause of the machine may make another
    # call long enough to be noted too, once)
    assert sum(call is first[0] for call in notes) == 1, err
    assert len({id(call) for call in notes}) == len(notes), err
    assert "has run 0.2 s in one call without returning" in err and "slow_then_fine" in err
    assert "--time-limit SECONDS stops the command" in err
    calls.clear()
    pause[0] = 0.6  # the watcher now wakes every 0.05 s: a note would come after 0.25 s
    with limits.running(60, notes=True):  # bounded: no note
        check_sampler(slow_then_fine, "token", samples=2000)
    assert "has run" not in capsys.readouterr().err


# ----------------------------------------------------------------------------- vector files


def test_a_vector_file_imports_no_module_it_names(tmp_path, capsys, user_modules):
    """`vectors check` on a file whose verifier is module:function imports nothing (a downloaded
    file could name any module): one line, unless --allow-import; then the user's own verifier's
    vectors check as before."""
    import sys

    from spectheory.testing import check_vectors, export_vectors

    user_modules(vecmod="from spectheory.verifiers.block import block_verification as blk\n"
                        "def mine(drafts, q, p):\n    return blk(drafts, q, p)\n"
                        "import sys\nsys.modules[__name__].IMPORTED = True\n")
    out = tmp_path / "v"
    export_vectors(out, ["vecmod:mine"], paths=1, decisions=1)
    sys.modules.pop("vecmod", None)
    code, stdout, err = run(["vectors", "check", str(out)], capsys)
    refused(code, stdout, err, "is user code (module:function)", "--allow-import")
    assert "vecmod" not in sys.modules  # nothing was imported
    assert check_vectors(out, allow_import=True) == []  # control: opted in, it checks
    code, stdout, err = run(["vectors", "check", "--allow-import", str(out)], capsys)
    assert code == 0 and "match a fresh computation" in stdout


def test_kit_fixture_refuses_unknown_arguments_in_one_line():
    from spectheory.runtime.errors import OptionError
    from spectheory.testing.pytest_plugin import Kit

    kit = Kit()
    with pytest.raises(OptionError, match=r"^spectheory_kit\.sampler: got an unexpected keyword "
                                          r"argument 'nonsense'$"):
        kit.sampler(make_sampler("token"), "token", nonsense=3)
    with pytest.raises(OptionError, match=r"^spectheory_kit\.lossless: got an unexpected "
                                          r"keyword argument 'bogus'$"):
        kit.lossless("block", bogus=1)
    assert len(kit.lossless("block")) > 0  # control: the check runs


# ----------------------------------------------------------------------------- given draft rows


def _given_rows(V=3, L=2, B=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.softmax(torch.randn(B, L, V, generator=g, dtype=torch.float64) * 2, -1)
    p = torch.softmax(torch.randn(B, L + 1, V, generator=g, dtype=torch.float64) * 2, -1)
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).view(B, L)
    return d, q.to(dtype), p.to(dtype)


@pytest.mark.parametrize("spoil, words", [
    (lambda d, q, p: (d, q, p * 0.5), "the p row of row 0, path 0, position 0 sums to 0.5"),
    (lambda d, q, p: (d, q, p * 0.9), "the p row of row 0, path 0, position 0 sums to 0.9"),
    (lambda d, q, p: (d, q.index_put((torch.tensor(1), torch.tensor(1), torch.tensor(0)),
                                     torch.tensor(float("nan"), dtype=torch.float64)), p),
     "the q row of row 1, path 0, position 1 has a non-finite entry"),
    (lambda d, q, p: (d, q, p.index_put((torch.tensor(2), torch.tensor(2), torch.tensor(0)),
                                        torch.tensor(-0.25, dtype=torch.float64))),
     "the p row of row 2, path 0, position 2 has a negative entry"),
    (lambda d, q, p: (d.index_put((torch.tensor(3), torch.tensor(0)), torch.tensor(7)), q, p),
     "the drafted token 7 (row 3, path 0, position 0) is outside 0..2"),
    (lambda d, q, p: (d.double(), q, p), "drafts are torch.float64")])
def test_given_draft_rows_that_are_not_a_samplers_input_are_refused(spoil, words):
    """Rows handed as ``DraftRows`` that are not distributions (a target row summing to 0.5)
    were taken as they were: the check computed a "law" from them and reported a correct
    sampler as failing (p-value 0, the set-up mistake named as a verifier). They are the
    input's fault: one line naming the row. The valid neighbour passes."""
    from spectheory.runtime.errors import SpectheoryError
    from spectheory.testing import DraftRows

    d, q, p = _given_rows()
    with pytest.raises(SpectheoryError) as info:
        check_sampler(make_sampler("token"), "token", instances=[DraftRows(*spoil(d, q, p))],
                      samples=4000, seed=0)
    assert words in str(info.value) and "\n" not in str(info.value)
    assert check_sampler(make_sampler("token"), "token", instances=[DraftRows(d, q, p)],
                         samples=4000, seed=0).passed


def test_given_bfloat16_rows_keep_their_rounding():
    """Rows of a softmax rounded to bfloat16 sum to 1 only within its rounding (2.7e-4 here):
    they are taken (the tolerance for rows given below float32 is 1e-3, 1e-6 above)."""
    from spectheory.testing import DraftRows

    d, q, p = _given_rows(V=5_000, B=2, dtype=torch.bfloat16)
    off = float((p.double().sum(-1) - 1).abs().max())
    assert 1e-6 < off < 1e-3
    rep = check_sampler(make_sampler("token"), "token", instances=[DraftRows(d, q, p)],
                        samples=2000, seed=0)
    assert rep.passed, str(rep)
