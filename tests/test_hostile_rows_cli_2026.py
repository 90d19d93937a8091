"""Bad input on the Python API and the command line, each now refused in one line naming it, or
computed right:

* instances handed to the seeded, real-engine and tree checks are checked as the engines check
  them (a non-normalised or NaN row gave a PASS, or a tree sampler's FAIL); a huge block length
  is refused before any V^L is formed;
* float rows accepted within 1e-6 of summing to 1 (float32 rows) are divided by their sums: the
  law of a lossless rule on them was LOSSY by their rounding, or refused as no distribution;
* heterogeneous-vocabulary instances built in Python are checked, their sizes bounded and a
  user's block function guarded (its exceptions, exits and non-laws were raw errors or verdicts);
* a user verifier's law of complex or bfloat16 numbers, or of the wrong form in a sampler check,
  is a `LawError` naming the verifier;
* the command line: a wide i.i.d. tree root, ``toy`` sizes and digits, blank ``--sampling``,
  ``--tree-drafting`` without a tree, a user module's import-time print under ``--json``, and a
  SIGTERM while user code runs (it was blamed on the user code, in a second line).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from fractions import Fraction

import numpy as np
import pytest
import torch

import spectheory as st
import spectheory.testing as T
from cli_helpers import refused, run, write
from spectheory.cli.report import toy_instance
from spectheory.inputs.hetero_pairs import hetero_pair
from spectheory.inputs.instances import Instance, instance_to_dict
from spectheory.inputs.models import TableModel
from spectheory.law import Law, LawError
from spectheory.lp.frontier import frontier_lp
from spectheory.runtime.errors import InputError, InstanceError, SpectheoryError, UserCodeError
from spectheory.verifiers import hetero as H


def _instance(target, draft, L=2, dtype=np.float64):
    t, d = np.asarray([target], dtype=dtype), np.asarray([draft], dtype=dtype)
    return Instance(t.shape[1], L, TableModel(t.shape[1], (t,)), TableModel(d.shape[1], (d,)))


# ----------------------------------------------------------------------------- instances


def test_a_huge_block_length_is_refused_before_any_power_is_formed():
    g = toy_instance(exact=False)
    start = time.perf_counter()
    for name in ("token", "block"):
        with pytest.raises(InstanceError, match=r"block_length = 1,000,000,000,000 is out of range"):
            st.analyze(Instance(2, 10**12, g.target, g.draft), name)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("check", ["seed_replay", "batch_invariance"])
def test_seed_checks_refuse_rows_that_are_no_distribution(check):
    fn = getattr(T, f"check_{check}")
    with pytest.raises(InstanceError, match=r"sums to 0\.59999"):
        fn(T.sample_match_step, instances=[_instance([0.3, 0.3], [0.5, 0.5])])
    with pytest.raises(InstanceError, match=r"non-finite entry \(nan\)"):
        fn(T.sample_match_step, instances=[_instance([np.nan, 1.0], [0.5, 0.5])])


def test_real_engine_checks_refuse_rows_that_are_no_distribution():
    pytest.importorskip("transformers")
    with pytest.raises(InstanceError, match=r"sums to 0\.59999"):
        T.check_hf_generate(samples=300, instances=[_instance([0.3, 0.3], [0.5, 0.5])])
    with pytest.raises(InstanceError, match=r"sums to 0\.59999"):
        T.check_mlx_generate(samples=300, instances=[_instance([0.3, 0.3], [0.5, 0.5])])


@pytest.mark.parametrize("mode", ["law", "lossless"])
def test_a_tree_check_refuses_the_instance_instead_of_failing_the_sampler(mode):
    sampler = T.tree_engine_sampler(T.tree_speculative_sampling_target_only, "sglang-tree")
    with pytest.raises(InstanceError, match=r"sums to 0\.59999"):
        T.check_tree_sampler(sampler, "sglang-tree", samples=3000, mode=mode,
                             instances=[_instance([0.3, 0.3], [0.5, 0.5])])


def test_float32_rows_stand_for_their_normalised_distribution():
    """1/3 and 2/3 in float32 sum to 1 + 3e-8 in float64: the rows are accepted (within 1e-6)
    and divided by their sums, so lossless rules are lossless on them (not LOSSY by 2.9e-8, nor
    refused as a correction row off 1); the caller's arrays are left as they were."""
    t = np.array([[1 / 3, 2 / 3]], dtype=np.float32).astype(np.float64)
    d = np.array([[0.3, 0.7]], dtype=np.float32).astype(np.float64)
    given = t.copy()
    inst = Instance(2, 2, TableModel(2, (t,)), TableModel(2, (d,)))
    rep = st.check_lossless("token", inst)
    assert rep.lossless and rep.tv < 1e-12
    assert st.check_lossless("gbv", inst, paths=2).lossless
    assert np.array_equal(t, given)  # the caller's array
    assert abs(inst.target.tables[0].sum() - 1) < 1e-15  # the instance's rows
    i32 = _instance([1 / 3, 2 / 3], [0.5, 0.5], dtype=np.float32)
    assert st.check_lossless("block", i32).lossless
    ex = _instance([Fraction(1, 3), Fraction(2, 3)], [Fraction(1, 2)] * 2, dtype=object)
    assert abs(st.analyze(i32, "block").block_efficiency
               - float(st.analyze(ex, "block").block_efficiency)) < 1e-6
    # a row within float64 rounding of 1 is kept as it is (bit for bit)
    exact_row = np.array([[0.1, 0.2, 0.7]])
    keep = Instance(3, 1, TableModel(3, (exact_row,)), TableModel(3, (exact_row.copy(),)))
    st.analyze(keep, "token")
    assert keep.target.tables[0] is exact_row


# ----------------------------------------------------------------------------- hetero


def _replaced(which, row_fix):
    inst = hetero_pair().to_float()
    tabs = [x.copy() for x in getattr(inst, which).tables]
    row_fix(tabs[0])
    model = getattr(inst, which)
    return dataclasses.replace(inst, **{which: TableModel(model.vocab_size, tuple(tabs))})


def test_hetero_instances_built_in_python_are_checked():
    def negative(t):
        t[0, 0] += 1.0
        t[0, 1] -= 1.0

    with pytest.raises(InstanceError, match=r"negative entry"):
        H.check_hetero_lossless(_replaced("target", negative), "slem")
    with pytest.raises(InstanceError, match=r"non-finite entry"):
        H.check_hetero_lossless(_replaced("target", lambda t: t.__setitem__((0, 0), np.nan)),
                                "tli")
    small = dataclasses.replace(hetero_pair(), target=st.context_independent(
        [Fraction(1, 2), Fraction(1, 2)]))
    with pytest.raises(InstanceError, match=r"the target has vocab_size 2, its tokenizer has 3"):
        H.check_hetero_lossless(small, "tli")
    with pytest.raises(InstanceError, match=r"n_tokens = 1000000 is out of range"):
        H.target_law(hetero_pair(), 10**6)
    start = time.perf_counter()
    with pytest.raises(InstanceError, match=r"n_tokens = 50 is out of range"):
        H.emitted_law(hetero_pair(), "tli", n_tokens=50)
    assert time.perf_counter() - start < 5
    for c in [(999,), (-1,), "ab", (0.5,)]:
        with pytest.raises(InputError, match=r"the context c = .* must be a tuple of target"):
            H.first_token_acceptance(hetero_pair(), c=c)
        with pytest.raises(InputError, match=r"the context c = "):
            H.acceptance(hetero_pair(), "tli", c=c)
    # control: the built-in schemes are lossless on the pair
    assert H.check_hetero_lossless(hetero_pair(), "tli").lossless


def _raises(inst, c):
    raise KeyError("x")


def _exits(inst, c):
    sys.exit(0)


@pytest.mark.parametrize("block, words", [
    (_raises, "raised KeyError"),
    (_exits, "called sys.exit(0)"),
    (lambda inst, c: [((0,), 1)], "returned list"),
    (lambda inst, c: {(7,): Fraction(1)}, "a block is a non-empty tuple of target ids in 0..2"),
    (lambda inst, c: {(): Fraction(1)}, "a block is a non-empty tuple"),
    (lambda inst, c: {(0,): Fraction(3, 2), (1,): Fraction(-1, 2)}, "must be an exact "
                                                                     "probability"),
    (lambda inst, c: {(0,): 0.5, (1,): 0.5}, "must be an exact probability"),
    (lambda inst, c: {(0,): Fraction(1, 2), (1,): Fraction(1, 3)}, "summing to 0.8333"),
])
def test_a_users_block_function_is_guarded(block, words):
    with pytest.raises(UserCodeError) as info:
        H.check_hetero_lossless(hetero_pair(), block)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_a_users_block_function_that_is_right_passes():
    assert H.check_hetero_lossless(hetero_pair(), lambda inst, c: H.tli_block(inst, c)).lossless


# ----------------------------------------------------------------------------- laws


def _block_law_as(convert):
    def verifier(d, q, p):
        law = st.block_verification(d, q, p)
        return Law(convert(law.stop), convert(law.correction))
    return verifier


def test_a_law_of_complex_or_bfloat16_numbers_is_a_law_error():
    g = toy_instance(exact=False)
    with pytest.raises(LawError, match=r"complex128 stop; a law holds real probabilities"):
        st.analyze(g, _block_law_as(lambda t: t.to(torch.complex128)))
    # bfloat16 rows are held to bfloat16's rounding (4 V eps, at most 1e-2, as a user's
    # verifier's own check holds them), and a verdict at 1e-12 is then refused as within it
    with pytest.raises(SpectheoryError, match=r"within the rounding of the verifier's bfloat16 "
                                              r"law"):
        st.check_lossless(_block_law_as(lambda t: t.bfloat16()), g)


def test_a_sampler_check_refuses_a_verifier_law_of_the_wrong_form():
    token = T.make_sampler("token")
    with pytest.raises(LawError, match=r"returned stop of shape \[\], expected \[8, 1, 4\]"):
        T.check_sampler(token, lambda d, q, p: (torch.tensor(1.0), torch.tensor(2.0)),
                        samples=3000)
    with pytest.raises(LawError, match=r"returned stop of shape \[8, 1, 3\]"):
        T.check_sampler(token, lambda d, q, p: (d, q), samples=3000)


def test_given_draft_rows_of_fractions_or_of_no_rows():
    token = T.make_sampler("token")
    half = np.full((1, 2, 2), Fraction(1, 2), dtype=object)
    rep = T.check_sampler(token, "token", samples=3000, instances=[T.DraftRows(
        np.array([[0, 1]]), half, np.full((1, 3, 2), Fraction(1, 2), dtype=object))])
    assert rep.passed
    with pytest.raises(SpectheoryError, match=r"no rows to check"):
        T.check_sampler(token, "token", samples=3000, instances=[T.DraftRows(
            torch.zeros((0, 2), dtype=torch.long), torch.zeros((0, 2, 2), dtype=torch.float64),
            torch.zeros((0, 3, 2), dtype=torch.float64))])


def test_small_api_arguments():
    law = Law(torch.tensor([[0.5, 0.5]], dtype=torch.float64),
              torch.full((1, 2, 2), 0.5, dtype=torch.float64))
    with pytest.raises(InputError, match=r"generator = 42 must be a torch.Generator"):
        st.sample_output(law, generator=42)
    from spectheory.verifiers import relaxed

    with pytest.raises(InputError, match=r"divergences take an ExactAnalysis"):
        relaxed.divergences(None)
    with pytest.raises(InputError, match=r"the target is a str, not a Tokenizer"):
        H.vllm_vocab_mapping("x", "y")
    g = toy_instance(exact=False)
    with pytest.raises(SpectheoryError, match=r"unknown drafting scheme 'bogus'"):
        frontier_lp(g, tv=0.1, paths=2, drafting="bogus")
    with pytest.raises(SpectheoryError, match=r"pinsker = 'no' must be True or False"):
        frontier_lp(g, kl=0.1, pinsker="no")


# ----------------------------------------------------------------------------- command line


def test_a_wide_iid_root_on_the_float_route(tmp_path, capsys):
    """A root of 70 i.i.d. children: subset counts C(69, r) exceed int64; the float route
    computed them as torch integers (OverflowError). The float law is the exact one."""
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 5, denominator=60)))
    code, out, err = run(["tree", path, "--tree", "70", "--json"], capsys)
    assert code == 0, err
    code, exact_out, err = run(["tree", path, "--tree", "70", "--exact", "--json"], capsys)
    assert code == 0, err
    f, e = json.loads(out), json.loads(exact_out)
    assert abs(f["block_efficiency"] - float(Fraction(e["block_efficiency"]))) < 1e-12


@pytest.mark.parametrize("args, words", [
    (["dirichlet", "block_length=30000"], "block_length = 30,000 is out of range (1..64)"),
    (["dirichlet", "block_length=1000000"], "block_length = 1,000,000 is out of range"),
    (["two-token", "q0=\u0661"], "is not a number or fraction in ASCII digits"),
    (["mixture", "eps=\u0660.\u0665"], "is not a number or fraction in ASCII digits"),
    (["dirichlet", "vocab_size=1_0"], "vocab_size must be an integer, got '1_0'"),
])
def test_toy_sizes_and_digits(args, words, capsys):
    start = time.perf_counter()
    refused(*run(["toy", *args], capsys), words)
    assert time.perf_counter() - start < 5


def test_toy_knobs_as_text_are_read_as_instance_entries():
    """Fraction("1e999999999") builds a billion-digit integer (it did not return in 20 s); the
    knobs given as text now share the instance files' reader, which bounds the exponent."""
    from toy_models.families import mixture, two_token

    start = time.perf_counter()
    with pytest.raises(InstanceError, match=r"^q0 = '1e999999999' has a decimal exponent beyond"):
        two_token(q0="1e999999999")
    with pytest.raises(InstanceError, match=r"^eps = 'nan' is not finite$"):
        mixture(eps="nan")
    assert time.perf_counter() - start < 5
    assert list(two_token(q0="1/4").draft.tables[0][0]) == [Fraction(1, 4), Fraction(3, 4)]


def test_toy_controls(capsys):
    code, out, _ = run(["toy", "two-token", "q0=1/4"], capsys)
    assert code == 0 and json.loads(out)["draft"] == ["1/4", "3/4"]
    code, out, _ = run(["toy", "mixture", "eps=0.5"], capsys)
    assert code == 0


def test_blank_sampling_and_tree_options_without_a_tree(tmp_path, capsys):
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 5)))
    for flag in ("--sampling", "--draft-sampling"):
        for blank in ("", "   "):
            refused(*run(["exact", path, "--verifier", "token", f"{flag}={blank}"], capsys),
                    f"argument {flag}: an empty value")
    code, _, err = run(["exact", path, "--verifier", "token", "--sampling=none"], capsys)
    assert code == 0, err
    for flag, value in (("--tree-drafting", "norep"), ("--tree-layout", "sglang-tree")):
        refused(*run(["check-sampler", "spectheory.testing:vllm_sampler", "--verifier", "token",
                      flag, value, "--samples", "1000"], capsys),
                f"{flag} applies to the tree mode: give --tree or --parents")


def _defaults():
    """The child's SIGTERM and SIGINT at their defaults, as a terminal gives them: a test run in
    the background of a non-interactive shell has SIGINT ignored, which would pass on to the
    command, and Python installs no Ctrl-C handler for a signal ignored at start-up."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cli(args, cwd, **kw):
    env = dict(os.environ, PYTHONPATH=str(cwd) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "spectheory", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_defaults, start_new_session=True, **kw)


_NOISY = ('import os, threading, time\nprint("IMPORT TIME PRINT")\n\n'
          "def _spam():\n    while True:\n        print('THREAD PRINT', flush=True)\n"
          "        os.write(1, b'RAW WRITE\\n')\n        time.sleep(0.002)\n\n"
          "threading.Thread(target=_spam, daemon=True).start()\n")


@pytest.mark.parametrize("command", [
    ["check-sampler", "noisy:f", "--verifier", "token", "--samples", "2000", "--json"],
    ["exact", "toy.json", "--verifier", "noisy:f", "--json"]])
def test_user_code_printing_keeps_json_clean(tmp_path, command):
    """Under --json standard output carries one JSON object: what a user module prints at
    import, and what a thread it starts prints or writes to descriptor 1 with os.write while
    the command runs and after, goes to standard error (before, the thread's lines came out on
    standard output around the JSON)."""
    sampler = "from spectheory.testing import vllm_sampler as f\n"
    law = "from spectheory.verifiers import block_verification as f\n"
    (tmp_path / "noisy.py").write_text(_NOISY + (sampler if command[0] != "exact" else law))
    (tmp_path / "toy.json").write_text(json.dumps(instance_to_dict(st.random_instance(2, 2, 0))))
    proc = _cli(command, tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert len(out.splitlines()) == 1, out[:500]
    result = json.loads(out)
    if command[0] == "exact":
        assert result["verifier"] == "noisy:f" and result["tv_to_target"] < 1e-12
    else:
        assert result["passed"] is True
    assert "IMPORT TIME PRINT" in err and "THREAD PRINT" in err and "RAW WRITE" in err


def test_sigterm_while_a_sampler_runs_is_a_termination_not_its_exit(tmp_path):
    """The SIGTERM handler ends the process with os._exit(143), which `call_user` replaces while
    user code runs: it was reported as the sampler calling os._exit(143) (exit 2, two lines)."""
    entered = tmp_path / "entered"
    (tmp_path / "slow.py").write_text("import pathlib, time\n\ndef hang(drafts, q, p, generator):\n"
                                      f"    pathlib.Path({str(entered)!r}).touch()\n"
                                      "    while True:\n        time.sleep(0.05)\n")
    proc = _cli(["check-sampler", "slow:hang", "--verifier", "token", "--samples", "1000"],
                tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not entered.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)  # start-up, until the sampler is running
        assert entered.exists(), proc.poll()
        time.sleep(0.2)  # inside the sampler's loop
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, err
    assert err.strip().splitlines() == [
        "spectheory: terminated (SIGTERM); nothing half-written was left"], err


def test_an_async_sampler_fails_without_python_warnings(tmp_path):
    (tmp_path / "asyncs.py").write_text("async def f(drafts, q, p, generator):\n"
                                        "    return None\n")
    proc = _cli(["check-sampler", "asyncs:f", "--verifier", "token", "--samples", "1000"],
                tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "returned coroutine" in out, (out, err)
    assert "never awaited" not in err and "RuntimeWarning" not in err, err


def test_a_proposal_check_projects_its_run_time(monkeypatch):
    """check_proposal ran 10^12 samples for days; the rate measured on its first calls now stops
    it as check_sampler is stopped (a slow drafter: the projection comes within seconds; here
    after 0.5 s of calls instead of the default `PROJECT_AFTER_S`, the same projection). Its
    first call was of 11 million rows (three hours at 1 ms a row before the rate was known);
    the calls of a run that needs more than one a row now grow from 4,096 rows."""
    from spectheory.runtime.errors import TimeLimitError
    from spectheory.testing.checks import calls

    monkeypatch.setattr(calls, "PROJECT_AFTER_S", 0.5)
    sizes = []

    def drafter(q, generator):  # slow, and cheap on the CPU (the pace reads time)
        sizes.append(q.shape[0])
        if q.shape[0] > 16384:  # an unramped first call: fail now, not after minutes of sleep
            raise RuntimeError(f"handed {q.shape[0]:,} rows before the rate was measured")
        time.sleep(q.shape[0] * 2.5e-5)
        return q.argmax(-1), q

    start = time.perf_counter()
    with pytest.raises(TimeLimitError, match=r"samples = 1,000,000,000,000 would take about"):
        T.check_proposal(drafter, samples=10**12)
    assert time.perf_counter() - start < 30 and sizes[:2] == [4096, 16384]
    # a run of one call a row is called as before: each row's share in one call
    sizes.clear()

    def fair(q, generator):
        sizes.append(q.shape[0])
        return torch.multinomial(q, 1, generator=generator)[:, 0], q

    assert T.check_proposal(fair, samples=200_000).passed  # 36 rows, 5,556 samples each
    assert sum(sizes) == 200_000 and max(sizes) - min(sizes) <= 1 and max(sizes) > 4096


def test_a_float_row_off_1_in_rationals_says_by_how_much():
    """The float of the rational sum printed as 1 ("sums to 1 ..., not exactly 1")."""
    from spectheory.lp.certificate import certify_node_budget

    with pytest.raises(InstanceError, match=r"row \d+ at depth \d+ sums to 1 [-+] \d\.\d+e-1\d "
                                            r"after converting"):
        certify_node_budget(st.random_instance(3, 2, 0), exact=True)


def test_a_large_run_of_a_slow_sampler_is_stopped_within_seconds(monkeypatch):
    """samples = 10^12: the first call handed a slow sampler 1.6 million rows (160 s at 0.1 ms a
    row; 27 min at 1 ms) before the rate was known. The first calls of a large run now grow from
    4,096 rows, so the projection stops it after two small calls (25 us a row here, projected
    after 0.3 s of calls instead of the default `PROJECT_AFTER_S`: the two calls take 0.5 s)."""
    from spectheory.runtime.errors import TimeLimitError
    from spectheory.testing.checks import calls

    monkeypatch.setattr(calls, "PROJECT_AFTER_S", 0.3)
    token = T.make_sampler("token")
    sizes = []

    def slow(d, q, p, generator):
        sizes.append(d.shape[0])
        time.sleep(d.shape[0] * 2.5e-5)
        return token(d, q, p, generator)

    start = time.perf_counter()
    with pytest.raises(TimeLimitError, match=r"samples = 1,000,000,000,000 would take about"):
        T.check_sampler(slow, "token", samples=10**12)
    assert time.perf_counter() - start < 20 and sizes[:2] == [4096, 16384]


@pytest.mark.parametrize("sig, code, last", [
    (signal.SIGTERM, 143, "spectheory: terminated (SIGTERM); nothing half-written was left"),
    (signal.SIGINT, 130, "spectheory: interrupted")])
def test_a_signal_during_the_highs_solve_ends_the_command_at_once(tmp_path, sig, code, last):
    """HiGHS ran in the main thread, where no Python signal handler runs until the solve ends:
    SIGTERM and Ctrl-C waited for a solve estimated at 28 minutes (only --time-limit stopped
    it). The solve now runs on a worker thread while the main thread handles signals."""
    path = write(tmp_path, instance_to_dict(st.random_instance(6, 5, 0)))
    proc = _cli(["lp", path, "--problem", "frontier", "--tv", "0.1", "--max-sequences",
                 "1000000000000"], tmp_path)
    lines = []
    try:
        for line in proc.stderr:  # the notes, up to the solve's
            lines.append(line)
            if "solving the TV LP with HiGHS" in line:
                break
        assert lines and "solving the TV LP with HiGHS" in lines[-1], lines
        time.sleep(1.0)  # inside the solve
        start = time.perf_counter()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        waited = time.perf_counter() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == code, err
    assert err.strip().splitlines() == [last] and waited < 5, (err, waited)


def test_a_user_thread_that_prints_while_steps_run(tmp_path):
    """Standard output goes to standard error while a user module is imported (and while user
    code is called), and is put back after; CPython's print holds sys.stdout as a borrowed
    reference while it writes, so a thread the module started printed through the freed
    stand-in: a segmentation fault (exit 139) or a traceback ("'TableModel' object has no
    attribute 'write'") in two runs out of two. The stand-ins are now kept alive."""
    (tmp_path / "chatty.py").write_text(
        "import threading, time\n\ndef _spam():\n    while True:\n"
        "        print('THREAD PRINT', flush=True)\n        time.sleep(0.005)\n\n"
        "threading.Thread(target=_spam, daemon=True).start()\n"
        "from spectheory.testing import vllm_v1_step as f\n")
    proc = _cli(["check-step", "chatty:f", "--samples", "1000"], tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert "Traceback" not in err and "Error" not in err.replace("THREAD PRINT", ""), err[-2000:]


def test_a_root_too_wide_for_float_counts_is_refused(tmp_path, capsys):
    """2,000 children of one node ('0,0,00,...' reads 00 as 0): C(1999, r) passes the float
    range (OverflowError traceback); refused in one line, the exact route named."""
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 5, denominator=60)))
    code, out, err = run(["tree", path, "--parents", ",".join(["0"] * 2000)], capsys)
    lines = err.strip().splitlines()  # the size estimate's note, then the refusal
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert lines[-1].startswith("spectheory: error: ") and \
        "pass 2^1000, beyond float64; use --exact" in lines[-1], err
    assert all(ln.startswith("spectheory: note: ") for ln in lines[:-1]), err


def test_kl_divergence_reads_laws_only():
    from spectheory.verifiers import relaxed

    for a, words in [({(0,): 0.5}, "must be a 1-D array of probabilities, not dict"),
                     ([-0.5, 1.5], "a holds -0.5"), ([float("nan"), 1.0], "a holds nan"),
                     (["1/2", "1/2"], "a holds '1/2'")]:
        with pytest.raises(InputError, match=re.escape(words)):
            relaxed.kl_divergence(a, [0.5, 0.5])
    with pytest.raises(InputError, match=r"the laws have 2 and 3 entries"):
        relaxed.kl_divergence([0.5, 0.5], [0.2, 0.3, 0.5])
    value, _ = relaxed.kl_divergence(torch.tensor([0.5, 0.5]), np.array([0.25, 0.75]))
    assert value == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3), abs=1e-15)


def test_the_kit_models_rows_are_the_tables_rows_at_every_position():
    """TableLM gathers the rows of all positions past the table's depth at once (a loop over
    positions took about 50 s for a step that called the model on 10^6 tokens); each row is the
    table's row after the D tokens before it (prefix-dependent tables), or after all of them
    below depth D."""
    from spectheory.testing.checks.step import TableLM

    g = torch.Generator().manual_seed(0)
    for V, L, flat in [(3, 3, False), (4, 2, False), (3, 4, True), (2, 5, False)]:
        model = st.random_instance(V, L, 1, context_independent=flat).target
        lm = TableLM(model, "target")
        for N, m in [(1, 0), (3, 1), (5, L - 1), (4, L), (2, L + 5), (7, 20)]:
            t = torch.randint(0, V, (N, m), generator=g)
            rows = lm(t)
            for n in range(N):
                for j in range(m + 1):
                    want = model.conditional(t[n, :j].tolist())
                    assert np.array_equal(rows[n, j].numpy(), want), (V, L, N, m, n, j)
