"""The README's command-line quickstart runs as printed.

The shell blocks of "Quickstart: command line" and "Bring your own verifier or sampler" run line
by line, in that order, in an empty folder, with ``mymodule.py`` written from the README's own
Python block. Each line's exit code is the one its comment states (``# exit 1: ...``; no
statement: 0), and the key numbers printed are the ones the Python API computes on the same
instance file.

The first line runs through the installed ``spectheory`` command (the virtual environment's
``bin`` first on ``PATH``). The others run in processes forked, one per line, from one
interpreter that has loaded the installed command's entry point (the ``console_scripts`` entry
``spectheory``, the function the command calls) and imported torch: each line still runs in a
process of its own (its own memory, exit code, stdout and stderr; ``sys.path`` as the installed
command has it, so ``mymodule`` imports the way it does there), without importing torch again
for each of the seventeen lines (about 1 s of CPU each).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

import spectheory as st
from spectheory.inputs.instances import load_instance

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SECTIONS = ("## Quickstart: command line", "## Bring your own verifier or sampler",
            "## The state around the sampler")


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else len(text)]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def commands(text: str) -> list[tuple[str, int, str]]:
    """(command, expected exit code, comment) for every line of the sections' shell blocks."""
    out = []
    for heading in SECTIONS:
        for block in blocks(section(text, heading), "bash"):
            for line in block.splitlines():
                if not line.strip():
                    continue
                command, _, comment = line.partition("  #")
                m = re.match(r"\s*exit (\d+)\b", comment)
                out.append((command.strip(), int(m.group(1)) if m else 0, comment.strip()))
    return out


def module_source(text: str) -> str:
    """The README's ``# mymodule.py`` Python block."""
    found = [b for b in blocks(section(text, SECTIONS[1]), "python")
             if b.startswith("# mymodule.py\n")]
    assert len(found) == 1, "the README shows mymodule.py once"
    return found[0]


def test_readme_commands_parse():
    """The extraction itself: the lines and exit codes the quickstart states (no subprocess)."""
    cmds = commands(README.read_text(encoding="utf-8"))
    assert all(c.startswith("spectheory ") and "[" not in c for c, _, _ in cmds), \
        "every quickstart line is a runnable command (no [optional] placeholders)"
    assert [c for c, code, _ in cmds if code == 1] == [
        "spectheory check inst.json --verifier uniform-product",
        "spectheory check-sampler mymodule:mysampler",
        "spectheory check-step spectheory.testing.mutants.steps:reused_coin_step --samples 4000"]
    assert "def mysampler(drafts, q, p, generator):" in module_source(README.read_text())


def find(results: dict, prefix: str) -> str:
    matches = [out for cmd, out in results.items() if cmd.startswith(prefix)]
    assert len(matches) == 1, f"one quickstart line starts with {prefix!r}"
    return matches[0]


def number(out: str, label: str) -> str:
    m = re.search(re.escape(label) + r" = ([0-9./e+-]+)", out)
    assert m, f"{label!r} not printed in: {out}"
    return m.group(1)


#: The forking interpreter: loads the installed command's entry point and torch, then reads one
#: JSON request per line ({"argv", "stdout", "stderr"}), forks, runs the entry point in the child
#: with its stdout and stderr on the named files, and answers the child's exit status.
FORKER = r"""
import json, os, sys
from importlib.metadata import entry_points
sys.path[0] = os.path.dirname(sys.argv[1])  # as for the installed script: its own folder first
main = entry_points(group="console_scripts")["spectheory"].load()
import torch  # noqa: F401 - what most lines import; loaded once, before any fork
print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            for fd, name in ((1, req["stdout"]), (2, req["stderr"])):
                os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
            sys.argv = [sys.argv[1]] + req["argv"]
            try:
                code = main()
            except SystemExit as stop:
                code = stop.code
            code = code if isinstance(code, int) else (0 if code is None else 1)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


class Forker:
    """Runs README lines (``spectheory ARGS [> FILE]``) in processes forked from `FORKER`."""

    def __init__(self, cwd: Path, env: dict):
        self.cwd = cwd
        script = Path(sys.executable).parent / "spectheory"
        assert script.exists(), "the spectheory command is installed beside the interpreter"
        self.proc = subprocess.Popen([sys.executable, "-c", FORKER, str(script)], cwd=cwd,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    def run(self, command: str) -> tuple[int, str, str]:
        words = shlex.split(command)
        assert words[0] == "spectheory", command
        out = self.cwd / ".stdout"
        if len(words) > 2 and words[-2] == ">":  # the one redirection the README uses
            out, words = self.cwd / words[-1], words[:-2]
        assert not {"|", ">", "<", "&&", ";"} & set(words), f"a plain command line: {command}"
        err = self.cwd / ".stderr"
        request = {"argv": words[1:], "stdout": str(out), "stderr": str(err)}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        code = int(self.proc.stdout.readline())
        return code, out.read_text(), err.read_text()

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


@pytest.mark.slow
def test_readme_quickstart_runs_as_written(tmp_path):
    text = README.read_text(encoding="utf-8")
    (tmp_path / "mymodule.py").write_text(module_source(text), encoding="utf-8")
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep
               + os.environ.get("PATH", ""))
    env.pop("PYTHONPATH", None)
    results = {}
    lines = commands(text)
    forker = Forker(tmp_path, env)
    try:
        for i, (command, code, comment) in enumerate(lines):
            if i == 0:  # the installed command itself
                proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                                      capture_output=True, text=True, timeout=120)
                got = (proc.returncode, proc.stdout, proc.stderr)
            else:
                got = forker.run(command)
            assert got[0] == code, (command,) + got
            if code in (0, 1):
                assert "Traceback" not in got[2], (command, got[2])
            results[command] = got[1]
    finally:
        forker.close()

    inst = load_instance(str(tmp_path / "inst.json"), exact=True)  # rational, or refused here
    assert "block" in find(results, "spectheory verifiers").split()

    # exact rationals, the value the README's comment states and the Python API computes
    out = find(results, "spectheory exact inst.json --verifier block --exact")
    comments = {c: m for c, _, m in commands(text)}
    stated = re.search(r"E\[tau\+1\] = (\d+/\d+)",
                       comments["spectheory exact inst.json --verifier block --exact"]).group(1)
    block = st.analyze(inst, "block").block_efficiency
    assert Fraction(number(out, "E[tau+1]")) == block == Fraction(stated)

    gbv = st.analyze(inst.to_float(), "gbv", paths=3, drafting="iid").block_efficiency
    out = find(results, "spectheory exact inst.json --verifier gbv")
    assert abs(float(number(out, "E[tau+1]")) - gbv) < 1e-6

    out = find(results, "spectheory check inst.json --verifier uniform-product")
    assert "LOSSY" in out and "first offending sequence" in out

    # the direct LP bounds every valid 2-path verifier, GBV with 2 i.i.d. paths among them
    out = find(results, "spectheory lp inst.json --problem direct --paths 2")
    gbv2 = st.analyze(inst.to_float(), "gbv", paths=2, drafting="iid").block_efficiency
    assert float(number(out, "optimum E[tau+1]")) >= float(gbv2) - 1e-9

    out = find(results, "spectheory exact inst.json --verifier global-resolution")
    assert float(number(out, "TV to target")) < 1e-12
    assert "all as recorded" in find(results, "spectheory claims")

    assert "lossless" in find(results, "spectheory check inst.json --verifier mymodule:")
    assert "verifier token): PASS" in find(results, "spectheory check-sampler mymodule:mysampler "
                                                    "--verifier token")
    # the default verifier is block: the token sampler fails, and the report says why
    failed = results["spectheory check-sampler mymodule:mysampler"]
    assert "verifier block): FAIL" in failed
    assert "checked against verifier 'block': a token sampler needs --verifier token" in failed
