"""Start-up: torch (and scipy.stats) are imported only where they are used.

Importing torch takes about 1 s, several times the rest of the command line's start-up; the core
modules bind it through :mod:`spectheory.runtime._lazy` and import it on first use. These tests run fresh
interpreters (the test process itself has torch loaded) and check which modules end up in
``sys.modules`` -- a property, not a timing; the times are in ``benchmarks/bench_startup.py``.
"""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import spectheory

ROOT = Path(__file__).resolve().parents[1]

#: Modules that use torch on import by design (samplers and bug ports written against tensors).
TORCH_ON_IMPORT = ("spectheory.testing.engines.adapters", "spectheory.testing.engines.layouts",
                   "spectheory.testing.mutants", "spectheory.testing.engines.ports",
                   "spectheory.testing.engines.engine_sampling")


def _python(code: str, env: dict | None = None) -> str:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    for var in ("SPECTHEORY_THREADS", "OMP_NUM_THREADS"):
        if env is None or var not in env:
            full.pop(var, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_core_modules_do_not_import_torch():
    names = [m.name for m in pkgutil.walk_packages(spectheory.__path__, "spectheory.")
             if not m.name.startswith(TORCH_ON_IMPORT)]
    names += ["spectheory.lp", "spectheory.lp.cli", "spectheory.lp.report", "spectheory.toy_models", "spectheory.toy_models.cli", "spectheory.cli"]
    code = ("import importlib, json, sys\nfirst = {'torch': None, 'scipy.stats': None}\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "    for heavy in first:\n"
            "        if first[heavy] is None and heavy in sys.modules:\n"
            "            first[heavy] = name\n"
            "print(json.dumps(first))")
    # else: the first module that loaded it. scipy.stats (about 0.75 s) too: the sampler and
    # step checks compute their chi-square tails with scipy.special (statistics._chisq)
    assert json.loads(_python(code)) == {"torch": None, "scipy.stats": None}
    assert len(names) > 40


def test_parser_and_light_commands_do_not_import_torch(tmp_path):
    inst = tmp_path / "inst.json"
    code = ("import contextlib, io, json, sys\n"
            "from spectheory.cli import build_parser, main\n"
            "build_parser()\nseen = ['torch' in sys.modules]\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            "    seen.append(main(['instance', 'random', '--vocab', '3', '--block', '2']))\n"
            f"open({str(inst)!r}, 'w').write(out.getvalue())\n"
            "seen.append('torch' in sys.modules)\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    seen.append(main(['lp', {str(inst)!r}, '--json']))\n"
            "seen.append('torch' in sys.modules)\n"
            "seen.append('numba' in sys.modules)\n"
            "print(json.dumps(seen))")
    assert json.loads(_python(code)) == [False, 0, False, 0, False, False]
    assert json.loads(inst.read_text())["vocab_size"] == 3


def test_threads_apply_when_torch_is_imported_later(tmp_path):
    """``--threads 3`` before torch is loaded: the command, which loads torch (the float law of a
    verifier without numpy float support, ``typical``), runs with 3
    threads (more than torch's default on a 2-core machine), and an in-process call leaves torch
    as it would have started (its own default) when it returns."""
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps({"vocab_size": 2, "block_length": 2, "target": ["1/3", "2/3"],
                                "draft": ["2/3", "1/3"]}))
    code = ("import contextlib, io, json, sys\n"
            "import spectheory.cli.commands as c\n"
            "seen, original = [], c.cmd_exact\n"
            "def spy(args):\n"
            "    rc = original(args)\n"
            "    seen.append(sys.modules['torch'].get_num_threads())\n"
            "    return rc\n"
            "c.cmd_exact = spy\n"
            "from spectheory.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main(['--threads', '3', 'exact', {str(inst)!r}, '--verifier', 'typical'])\n"
            "import torch\n"
            "print(json.dumps([rc, seen, torch.get_num_threads()]))")
    rc, seen, after = json.loads(_python(code))
    default = json.loads(_python("import torch; print(torch.get_num_threads())"))
    assert (rc, seen, after) == (0, [3], default)


def test_env_threads_on_import_do_not_load_torch():
    code = ("import json, os, sys\nimport spectheory\n"
            "loaded = 'torch' in sys.modules\nimport torch\n"
            "print(json.dumps([loaded, torch.get_num_threads()]))")
    assert json.loads(_python(code, {"SPECTHEORY_THREADS": "3"})) == [False, 3]


@pytest.mark.parametrize("module", ["spectheory.verifiers", "spectheory.engine.drafttrees", "lp"])
def test_lazy_torch_still_computes(module):
    """Modules imported without torch compute as before once used (torch loaded on demand)."""
    code = ("import sys\nimport spectheory\n"
            f"import {module}\n"
            "from spectheory import analyze, random_instance\n"
            "r = analyze(random_instance(3, 2, 0, denominator=12), 'block', exact=True)\n"
            "print(r.expected_accepted, 'torch' in sys.modules)")
    value, loaded = _python(code).split()
    assert loaded == "False"  # the exact route is numpy Fractions only
    from spectheory import analyze, random_instance

    assert value == str(analyze(random_instance(3, 2, 0, denominator=12), "block",
                                exact=True).expected_accepted)


# ----------------------------------------------------------------------------- the parser


def test_command_table_matches_what_the_modules_register():
    """`COMMANDS` (names and help, which ``--help`` lists without importing the modules) is what
    each module of `COMMAND_MODULES` registers, in the same order."""
    import argparse
    import importlib

    from spectheory.cli import COMMAND_MODULES, COMMANDS, Parser

    assert list(COMMANDS) == COMMAND_MODULES
    for module in COMMAND_MODULES:
        sub = Parser(prog="x").add_subparsers(dest="command", parser_class=Parser)
        importlib.import_module(module).register(sub)
        assert {a.dest: a.help for a in sub._choices_actions} == COMMANDS[module], module
        assert isinstance(sub, argparse._SubParsersAction)


def test_lazy_parser_gives_the_full_help_and_parses_each_command_alike():
    from spectheory.cli import COMMANDS, build_parser, command_name

    assert build_parser(["--help"]).format_help() == build_parser().format_help()
    assert command_name(["--threads", "exact", "tree", "x"]) == "tree"
    assert command_name(["--debug", "--", "exact"]) is None
    full = _choices(build_parser())
    for names in COMMANDS.values():
        for name in names:  # the command's own parser, as the full parser has it
            assert _choices(build_parser([name]))[name].format_help() == \
                full[name].format_help(), name


def _choices(parser) -> dict:
    import argparse

    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_help_and_an_exact_rational_analysis_import_only_what_they_use(tmp_path):
    """``spectheory --help`` imports neither numpy nor the engine; ``spectheory exact --exact``
    on a V = 3, L = 2 instance runs on numpy Fractions without torch, the LPs or the sweep; the
    gallery's figure 3 (the paper's example in exact rationals) is drawn without torch, its
    ``--threads`` kept for torch's import and written in figures.json as the count in force."""
    from spectheory.inputs.instances import instance_to_dict
    from spectheory.inputs.random_instances import random_instance

    inst = tmp_path / "v3l2.json"
    inst.write_text(json.dumps(instance_to_dict(random_instance(3, 2, 0, denominator=12))))
    code = ("import contextlib, io, json, sys\n"
            "from spectheory.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n"
            "        main(['--help'])\n"
            "    except SystemExit:\n"
            "        pass\n"
            "help = sorted(m for m in ('numpy', 'torch', 'spectheory.engine') if m in sys.modules)\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            f"    rc = main(['exact', {str(inst)!r}, '--exact', '--json'])\n"
            "used = sorted(m for m in ('torch', 'scipy', 'spectheory.lp', 'spectheory.sweep')\n"
            "              if m in sys.modules)\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    fig = main(['figures', '--quick', '--only', 'fig3', '--threads', '2', '--out', "
            f"{str(tmp_path / 'fig')!r}, '--no-progress'])\n"
            "from spectheory.runtime.threads import snapshot\n"
            "used.append([fig, 'torch' in sys.modules, snapshot()])\n"
            "print(json.dumps([help, rc, used, json.loads(out.getvalue())['expected_accepted']]))")
    help_mods, rc, used, value = json.loads(_python(code))
    # after the figure: no torch, and the pending thread setting put back (none was pending)
    assert (help_mods, rc, used) == ([], 0, [[0, False, ["pending", None]]])
    meta = json.loads((tmp_path / "fig" / "figures.json").read_text())["meta"]
    assert "(torch threads: 2)" in meta["machine"]
    from spectheory import analyze, random_instance

    assert value == str(analyze(random_instance(3, 2, 0, denominator=12), "block",
                                exact=True).expected_accepted)


def test_float_exact_and_check_on_a_small_instance_do_not_import_torch(tmp_path):
    """The default float64 route of ``spectheory exact`` and ``spectheory check`` (token and block,
    per-node route, one and several iterations; GBV's analytic route with K = 3 paths) computes
    on numpy: torch is never imported, and
    the numbers are the torch route's to within a few ulps. A verifier without numpy float
    support (``typical``: its float law needs torch) still loads torch."""
    from spectheory.inputs.instances import instance_to_dict
    from spectheory.inputs.random_instances import random_instance

    inst = tmp_path / "v3l2.json"
    inst.write_text(json.dumps(instance_to_dict(random_instance(3, 2, 1))))
    runs = [["exact", str(inst)], ["check", str(inst)], ["exact", str(inst), "--verifier", "token"],
            ["check", str(inst), "--verifier", "token", "--tokens", "4"],
            ["exact", str(inst), "--verifier", "gbv", "--paths", "3"]]
    code = ("import contextlib, io, json, sys\n"
            "from spectheory.cli import main\n"
            "res = []\n"
            f"for argv in {runs!r}:\n"
            "    out = io.StringIO()\n"
            "    with contextlib.redirect_stdout(out):\n"
            "        rc = main(argv + ['--json'])\n"
            "    res.append([rc, json.loads(out.getvalue())])\n"
            "torch_after_float = 'torch' in sys.modules\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    main(['exact', {str(inst)!r}, '--verifier', 'typical'])\n"
            "print(json.dumps([res, torch_after_float, 'torch' in sys.modules]))")
    res, torch_after_float, torch_after_typical = json.loads(_python(code))
    assert (torch_after_float, torch_after_typical) == (False, True)
    from spectheory import analyze, check_lossless, load_instance

    instance = load_instance(str(inst))
    for (rc, obj), argv in zip(res, runs):
        assert rc == 0, argv
        name = "token" if "token" in argv else "gbv" if "gbv" in argv else "block"
        if argv[0] == "exact":
            ref = analyze(instance, name, backend="torch", **({"paths": 3} if name == "gbv"
                                                             else {}))
            assert ref.backend == "torch"
            assert obj["tau_pmf"] == pytest.approx(ref.tau_pmf, rel=0, abs=1e-15)
            assert obj["expected_accepted"] == pytest.approx(ref.expected_accepted, abs=1e-15)
            assert obj["tv_to_target"] <= 1e-15
        else:
            n = 4 if "--tokens" in argv else None
            ref = check_lossless(name, instance, n_tokens=n, backend="torch")
            assert obj["lossless"] is True and ref.lossless
            assert obj["tokens"] == ref.n_tokens
            assert obj["max_difference"] == pytest.approx(ref.max_difference, abs=1e-15)


def test_a_passing_step_check_computes_its_tails_without_scipy_stats(monkeypatch, capsys):
    """``spectheory check-step`` (the README's SGLang step, 1,000 samples) stays inside the
    support of ``statistics._chisq``: its sample-size test (a row against itself, statistic 0)
    and its tails never reach scipy.stats (about 0.4 s of a fresh process's start-up)."""
    from spectheory.cli import main
    from spectheory.testing.statistics import _chisq

    def refuse():
        raise AssertionError("scipy.stats reached")

    monkeypatch.setattr(_chisq, "_stats", refuse)
    rc = main(["check-step", "spectheory.testing:sglang_step", "--samples", "1000"])
    out = capsys.readouterr().out
    assert rc == 0 and "PASS" in out, out
