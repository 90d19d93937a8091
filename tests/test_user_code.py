"""User code named on the command line (``--verifier module:function``, ``check-sampler
module:function``) is first-class input: whatever it does, the command ends with exactly one line
on stderr and exit code 2 (an interrupt: 130), never a traceback, never the exit code the user
code asked for.

One loader (`spectheory.runtime.errors.import_user`) serves every command; a user verifier is called
through `spectheory.runtime.errors.call_user` and every law it returns is checked by
`spectheory.law.validate_law` (`spectheory.registry.UserVerifier`), so a NaN law is "not a law"
in every command, `check-sampler` included. Each refusal has a control: the same command on a
well-behaved module gives the built-in verifier's exact values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from cli_helpers import TOY, run, write
from spectheory.runtime.errors import InputError, SpectheoryError, UserCodeError, import_user
from spectheory.law import LawError
from spectheory.registry import check_user_law, get_verifier

MODULES = {
    # raises while it is imported
    "uc_raises": "x = 1 / 0\ndef f(d, q, p):\n    pass\n",
    # a syntax error
    "uc_syntax": "def f(:\n    pass\n",
    # exits while it is imported, with a failing and with a passing code
    "uc_exit3": "import sys\nsys.exit(3)\n",
    "uc_exit0": "import sys\nsys.exit(0)\n",
    # imports a module that does not exist
    "uc_missing_dep": "import uc_no_such_dependency\n",
    # a module __getattr__ that raises
    "uc_getattr": "def __getattr__(name):\n    raise RuntimeError('no ' + name)\n",
    "uc_verifiers": '''
import numpy as np
import torch
from spectheory.testing.checks.sampler import make_sampler
from spectheory.verifiers.block import block_verification


def good(drafts, q, p):
    """Block verification, as a user's own function."""
    return block_verification(drafts, q, p)


def nan_law(drafts, q, p):
    stop, corr = block_verification(drafts, q, p)
    stop = stop.clone()
    stop[:, 0] = float("nan")
    return stop, corr


def short_law(drafts, q, p):
    stop, corr = block_verification(drafts, q, p)
    return stop[:, :-1], corr


def bool_law(drafts, q, p):
    stop, corr = block_verification(drafts, q, p)
    return stop > 0, corr


def none_law(drafts, q, p):
    return None


def raises(drafts, q, p):
    raise ZeroDivisionError("planted")


def exits0(drafts, q, p):
    raise SystemExit(0)


def interrupted(drafts, q, p):
    raise KeyboardInterrupt


def signalled(drafts, q, p):
    import os
    import signal
    import time

    os.kill(os.getpid(), signal.SIGINT)  # a real interrupt, delivered while the verifier runs
    time.sleep(5)


sampler = make_sampler("block")
pi = 3.14
''',
}


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """A working folder holding the user modules of MODULES (on sys.path, as with python -m);
    the modules it imported are forgotten afterwards."""
    for name, text in MODULES.items():
        (tmp_path / f"{name}.py").write_text(text)
    write(tmp_path, TOY, "toy.json")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("uc_"):
            del sys.modules[name]


def refused(args, capsys, *words):
    """Run the command line in-process: exit 2, exactly one stderr line naming ``words``, no
    traceback, nothing on stdout."""
    code, out, err = run(args, capsys)
    assert code == 2, (code, err)
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("spectheory: error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in err, err
    return err


# ----------------------------------------------------------------------------- loading


LOAD_CASES = [
    ("uc_raises:f", ["cannot import module 'uc_raises'", "ZeroDivisionError"]),
    ("uc_syntax:f", ["cannot import module 'uc_syntax'", "SyntaxError", "uc_syntax.py, line 1"]),
    ("uc_exit3:f", ["module 'uc_exit3'", "sys.exit(3)"]),
    ("uc_exit0:f", ["module 'uc_exit0'", "sys.exit(0)"]),
    ("uc_missing_dep:f", ["uc_missing_dep", "ModuleNotFoundError", "uc_no_such_dependency"]),
    ("uc_getattr:f", ["looking up 'f'", "RuntimeError: no f"]),
    ("uc_no_such_module:f", ["no module named 'uc_no_such_module'"]),
    ("uc_verifiers:nothing", ["has no attribute 'nothing'"]),
    ("../uc_verifiers:good", ["file path", "'../uc_verifiers'"]),
    ("uc_verifiers.py:good", ["file path"]),
    ("/abs/uc_verifiers:good", ["file path"]),
    (".uc_verifiers:good", ["file path"]),
    ("uc-verifiers:good", ["not a module name"]),
    ("uc_verifiers:good()", ["not an attribute name"]),
]


@pytest.mark.parametrize("spec,words", LOAD_CASES, ids=[c[0] for c in LOAD_CASES])
def test_a_bad_verifier_module_is_one_line(spec, words, user_dir, capsys):
    refused(["exact", "toy.json", "--verifier", spec], capsys, *words)


@pytest.mark.parametrize("command", [
    ["exact", "toy.json"], ["check", "toy.json"], ["tree", "toy.json", "--tree", "2"],
    ["vectors", "export", "out"], ["check-sampler", "uc_verifiers:sampler", "--samples", "100"],
])
@pytest.mark.parametrize("spec", ["uc_raises:f", "uc_exit0:f", "../x:f"])
def test_one_loader_behind_every_command(command, spec, user_dir, capsys):
    refused(command + ["--verifier", spec], capsys, repr(spec))
    assert not (user_dir / "out").exists()


@pytest.mark.parametrize("spec,words", [
    ("uc_raises:f", ["for sampler 'uc_raises:f'", "ZeroDivisionError"]),
    ("uc_syntax:f", ["SyntaxError"]),
    ("uc_exit0:f", ["sys.exit(0)"]),
    ("uc_exit3:f", ["sys.exit(3)"]),
    ("../uc_verifiers:sampler", ["file path"]),
    ("uc_verifiers:pi", ["float, not a function"]),
])
def test_a_bad_sampler_module_is_one_line(spec, words, user_dir, capsys):
    refused(["check-sampler", spec, "--samples", "100"], capsys, *words)


def test_python_api_raises_one_exception_type(user_dir):
    """The loader's refusals are SpectheoryErrors and ValueErrors; the failure of the user's code
    is chained for --debug."""
    with pytest.raises(UserCodeError) as exc:
        get_verifier("uc_exit0:f")
    assert isinstance(exc.value, SpectheoryError) and isinstance(exc.value, ValueError)
    assert isinstance(exc.value.__cause__, SystemExit)
    with pytest.raises(UserCodeError) as exc:
        import_user("uc_raises:f", "verifier")
    assert isinstance(exc.value.__cause__, ZeroDivisionError)
    with pytest.raises(InputError, match="file path"):
        import_user("../uc_raises:f", "verifier")
    with pytest.raises(InputError, match="module:function"):
        import_user("uc_raises", "verifier")


def test_a_module_is_found_in_the_working_folder_without_sys_path(user_dir, monkeypatch):
    """A console script does not put the working folder on sys.path; the loader looks there."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(user_dir))])
    assert import_user("uc_verifiers:good", "verifier").__name__ == "good"


# ----------------------------------------------------------------------------- calling


@pytest.mark.parametrize("name,words", [
    ("nan_law", ["not a law", "verifier 'uc_verifiers:nan_law'", "NaN probability"]),
    ("short_law", ["not a law", "stop of shape [", "[B, L+1]"]),
    ("bool_law", ["not a law", "bool stop"]),
    ("none_law", ["not a law", "returned NoneType"]),
    ("raises", ["verifier 'uc_verifiers:raises' raised ZeroDivisionError: planted"]),
    ("exits0", ["verifier 'uc_verifiers:exits0' called sys.exit(0)"]),
])
def test_what_a_user_verifier_does_is_named_in_one_line(name, words, user_dir, capsys):
    refused(["exact", "toy.json", "--verifier", f"uc_verifiers:{name}"], capsys, *words)


def test_a_nan_law_in_check_sampler_is_not_a_law_not_a_failing_sampler(user_dir, capsys):
    """Without the law check of user verifiers, the sampler check compared a correct sampler
    with a NaN law and passed it (exit 0, p-value 1)."""
    err = refused(["check-sampler", "uc_verifiers:sampler", "--verifier", "uc_verifiers:nan_law",
                   "--samples", "2000"], capsys, "not a law", "'uc_verifiers:nan_law'", "NaN")
    assert "sampler" not in err.split("not a law")[1]
    # control: the same sampler against the same law without the NaN passes
    code, out, err = run(["check-sampler", "uc_verifiers:sampler", "--verifier",
                          "uc_verifiers:good", "--samples", "2000"], capsys)
    assert (code, err) == (0, "") and "PASS" in out


def test_check_reports_a_user_non_law_as_its_verdict(user_dir, capsys):
    """``check`` keeps its own verdict for a verifier that returns no law (exit 1, NOT A LAW)."""
    code, out, err = run(["check", "toy.json", "--verifier", "uc_verifiers:nan_law", "--json"],
                         capsys)
    assert code == 1 and err == ""
    obj = json.loads(out)
    assert obj["lossless"] is False and obj["law_error"]["kind"] == "nan"


def test_a_well_behaved_user_verifier_gives_the_builtin_values(user_dir, capsys):
    """Control for every refusal above: the law check passes a correct user law and changes no
    value (the paper's two-token example, exact rationals: E[tau] = 11/9)."""
    code, out, err = run(["exact", "toy.json", "--exact", "--json", "--verifier",
                          "uc_verifiers:good"], capsys)
    assert (code, err) == (0, "")
    mine = json.loads(out)
    code, out, _ = run(["exact", "toy.json", "--exact", "--json", "--verifier", "block"], capsys)
    builtin = json.loads(out)
    assert mine["expected_accepted"] == builtin["expected_accepted"] == "11/9"
    assert mine["tau_pmf"] == builtin["tau_pmf"]
    code, out, err = run(["check", "toy.json", "--verifier", "uc_verifiers:good"], capsys)
    assert code == 0 and "lossless" in out


def test_law_check_tolerance_follows_the_dtype():
    """A float32 law is checked within float32 rounding (4 V eps); a float64 law within
    ROW_SUM_TOL, so a correction row off by 1e-6 is refused in float64 only."""
    from spectheory.verifiers.block import block_verification

    g = torch.Generator().manual_seed(0)
    B, L, V = 5, 3, 4
    drafts = torch.randint(0, V, (B, L), generator=g)
    q = torch.rand(B, L, V, generator=g, dtype=torch.float64)
    p = torch.rand(B, L + 1, V, generator=g, dtype=torch.float64)
    q, p = q / q.sum(-1, keepdim=True), p / p.sum(-1, keepdim=True)
    stop, corr = block_verification(drafts, q, p)
    check_user_law((stop, corr), drafts, q, "v", True)
    check_user_law((stop.float(), corr.float()), drafts, q.float(), "v", True)
    off = corr.clone()
    off[1, 2, 0] += 1e-6
    check_user_law((stop.float(), off.float()), drafts, q.float(), "v", True)
    with pytest.raises(LawError, match="correction row"):
        check_user_law((stop, off), drafts, q, "v", True)
    # numpy Fractions (exact mode) are checked exactly
    from fractions import Fraction

    ex = np.array([[Fraction(1, 2), Fraction(1, 2)]], dtype=object)
    d1 = np.zeros((1, 1), dtype=np.int64)
    q1 = np.array([[[Fraction(1, 2), Fraction(1, 2)]]], dtype=object)
    corr1 = np.array([[[Fraction(1, 3), Fraction(2, 3)]] * 2], dtype=object)
    check_user_law((ex, corr1), d1, q1, "v", True)
    with pytest.raises(LawError, match="not a Fraction"):
        check_user_law((ex.astype(float).astype(object), corr1), d1, q1, "v", True)


def test_an_interrupt_in_user_code_exits_130(user_dir, capsys):
    """A SIGINT while user code runs ends the command as an interrupt (exit code 130); a
    KeyboardInterrupt the user code raises with no SIGINT received is that code's failure, one
    line naming it with exit code 2 (it was reported as an interrupt nobody made)."""
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("this process has its own SIGINT handler: interrupts are not counted")
    code, out, err = run(["exact", "toy.json", "--verifier", "uc_verifiers:signalled"], capsys)
    assert (code, out, err) == (130, "", "spectheory: interrupted\n")
    code, out, err = run(["exact", "toy.json", "--verifier", "uc_verifiers:interrupted"], capsys)
    assert (code, out) == (2, "") and err == (
        "spectheory: error: verifier 'uc_verifiers:interrupted' raised KeyboardInterrupt with no "
        "interrupt received; user code must return, not raise an interrupt\n")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_a_keyboard_interrupt_outside_the_command_line_stays_an_interrupt():
    """In Python (no command line counting SIGINTs) call_user cannot tell who raised it: a
    KeyboardInterrupt passes through, as an interrupt must."""
    from spectheory.runtime.errors import call_user

    def raises_it():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        call_user(raises_it)


def test_system_exit_during_any_command_is_one_line_exit_2(monkeypatch, capsys):
    """The command line's safety net: a SystemExit raised while a command runs (from user code
    the command calls without `call_user`) never becomes the exit code, 0 included."""
    import spectheory.cli.commands as commands

    def exits(args):
        raise SystemExit(0)

    monkeypatch.setattr(commands, "cmd_verifiers", exits)
    refused(["verifiers"], capsys, "sys.exit(0)", "--debug")


# ----------------------------------------------------------------------------- --debug


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_prints_the_user_traceback_then_the_line(where, user_dir, capsys):
    args = ["exact", "toy.json", "--verifier", "uc_raises:f"]
    args = ["--debug", *args] if where == "before" else [*args, "--debug"]
    code, out, err = run(args, capsys)
    assert code == 2 and out == ""
    assert "Traceback" in err and "uc_raises.py" in err and "x = 1 / 0" in err
    last = err.rstrip("\n").split("\n")[-1]
    assert last.startswith("spectheory: error: cannot import module 'uc_raises'")


# ----------------------------------------------------------------------------- exit codes


def _spectheory(args, cwd):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.run([sys.executable, "-m", "spectheory", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("spec", ["uc_exit0:f", "uc_exit3:f"])
def test_user_exit_codes_never_reach_the_process(spec, user_dir):
    """The process's own exit code: 2, not the 0 or 3 the user code asked for (an exit while the
    verifier runs is `test_what_a_user_verifier_does_is_named_in_one_line`: `main` returns 2,
    which ``python -m spectheory`` exits with)."""
    res = _spectheory(["exact", "toy.json", "--verifier", spec], user_dir)
    assert res.returncode == 2, res
    assert res.stdout == "" and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "sys.exit(" in res.stderr


def test_any_base_exception_from_user_code_is_one_line():
    """GeneratorExit, asyncio.CancelledError or a test runner's outcome exceptions derive from
    BaseException, not Exception: they are still the user code's failure, one line."""
    from spectheory.runtime.errors import UserCodeError, call_user

    class Outcome(BaseException):
        pass

    for exc in (GeneratorExit(), Outcome("stop here")):
        def f(exc=exc):
            raise exc

        with pytest.raises(UserCodeError, match="raised"):
            call_user(f, what="sampler f")
    with pytest.raises(KeyboardInterrupt):  # an interrupt stays an interrupt
        call_user(lambda: (_ for _ in ()).throw(KeyboardInterrupt()))


def test_a_non_law_is_still_a_value_error():
    from spectheory.law import LawError

    assert isinstance(LawError("nan", "m"), ValueError)


def test_logits_handed_for_repeated_rows_stay_one_row():
    """With inputs='logits', rows repeated as an expanded view are converted once and handed as
    a view (a copy per call grew with the rows: 2.7 GB at V = 200 and 2^18 rows)."""
    import torch

    from spectheory.inputs.processing import handed_rows

    p = torch.softmax(torch.randn(1, 3, 50, dtype=torch.float64), -1).expand(4096, 3, 50)
    out = handed_rows(p, "logits")
    assert out.shape == p.shape and out.stride(0) == 0 and out.dtype == torch.float32
    assert torch.equal(out[7], torch.log(p[0]).float())
