"""CPU threads: the default rule, SPECTHEORY_THREADS, spectheory.set_threads and the global
--threads option of the command line (before or after any command)."""

import pytest
import torch

import spectheory
from spectheory.cli import build_parser, main
from spectheory.runtime.errors import SpectheoryError
from spectheory.runtime.threads import ENV_VAR, default_threads, parse_threads


@pytest.fixture(autouse=True)
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_default_rule(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert [default_threads(c) for c in (1, 2, 3, 4, 8, 16, 64)] == [1, 1, 1, 2, 4, 8, 8]
    monkeypatch.setenv(ENV_VAR, "3")
    assert default_threads(2) == 3
    monkeypatch.setenv(ENV_VAR, "0")
    with pytest.raises(SpectheoryError, match="at least 1"):
        default_threads()


@pytest.mark.parametrize("bad", [0, -1, "x", "1.5", True])
def test_parse_rejects(bad):
    with pytest.raises(SpectheoryError):
        parse_threads(bad)


def test_api_set_threads(monkeypatch):
    assert spectheory.set_threads(1) == 1 and torch.get_num_threads() == 1
    assert spectheory.set_threads(2) == 2 and torch.get_num_threads() == 2
    monkeypatch.setenv(ENV_VAR, "1")
    assert spectheory.set_threads() == 1 and torch.get_num_threads() == 1
    with pytest.raises(SpectheoryError):
        spectheory.set_threads(0)


def test_every_command_accepts_threads():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert len(sub.choices) >= 5
    seen = 0

    def walk(action):
        nonlocal seen
        for name, cmd in action.choices.items():
            assert "--threads" in cmd._option_string_actions, name
            seen += 1
            for a in cmd._actions:
                if a.__class__.__name__ == "_SubParsersAction":
                    walk(a)

    walk(sub)
    assert seen > len(sub.choices)  # nested commands (instance random, ...) included


def _record_threads(monkeypatch):
    """Record torch's thread count seen by the command itself."""
    import spectheory.cli.commands as commands

    seen = []
    original = commands.cmd_verifiers

    def spy(args):
        seen.append(torch.get_num_threads())
        return original(args)

    monkeypatch.setattr(commands, "cmd_verifiers", spy)
    return seen


@pytest.mark.parametrize("where", ["before", "after"])
def test_cli_threads_applied(where, capsys, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    seen = _record_threads(monkeypatch)
    torch.set_num_threads(1)
    argv = ["--threads", "2", "verifiers"] if where == "before" else ["verifiers", "--threads", "2"]
    assert main(argv) == 0
    assert seen == [2]
    assert "block" in capsys.readouterr().out
    assert torch.get_num_threads() == 1  # the caller's setting is restored


def test_cli_env_default(capsys, monkeypatch):
    seen = _record_threads(monkeypatch)
    monkeypatch.setenv(ENV_VAR, "2")
    torch.set_num_threads(1)
    assert main(["verifiers"]) == 0
    monkeypatch.delenv(ENV_VAR)
    torch.set_num_threads(3)
    assert main(["verifiers"]) == 0
    assert seen == [2, default_threads()]


@pytest.mark.parametrize("argv,msg", [(["--threads", "0", "verifiers"], "--threads 0 must be"),
                                      (["verifiers", "--threads", "two"], "not an integer")])
def test_cli_bad_threads_exit_2(argv, msg, capsys):
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert msg in out.err and len(out.err.strip().splitlines()) == 1


def test_cli_bad_env_exit_2(capsys, monkeypatch):
    monkeypatch.setenv(ENV_VAR, "-3")
    assert main(["verifiers"]) == 2
    assert "SPECTHEORY_THREADS" in capsys.readouterr().err


def test_allocator_setting(monkeypatch):
    from spectheory.runtime.allocator import (ENV_VAR as MALLOC_ENV, apply_default,
                                              keep_freed_memory)

    import platform

    if platform.libc_ver()[0] == "glibc":
        assert keep_freed_memory() is True
    monkeypatch.setenv(MALLOC_ENV, "default")
    assert apply_default() is False  # the command line leaves the allocator alone


def test_thread_count_is_bounded(monkeypatch, capsys):
    """At most min(4 x cores, 256) threads: torch's pool crashed the process (exit 139) when
    asked for 100000. The bound applies to --threads, SPECTHEORY_THREADS and set_threads alike,
    before torch sees the value; the caller's setting is left as it was."""
    from spectheory.runtime.threads import MAX_THREADS, max_threads

    assert [max_threads(c) for c in (1, 2, 3, 16, 64, 65, 512)] == [4, 8, 12, 64, 256, 256, 256]
    limit = max_threads()
    assert parse_threads(limit) == limit and parse_threads(str(limit)) == limit
    for bad in (limit + 1, 100_000, "9" * 40, MAX_THREADS + 1):
        with pytest.raises(SpectheoryError, match="over the limit of"):
            parse_threads(bad)
    torch.set_num_threads(1)
    with pytest.raises(SpectheoryError, match="over the limit"):
        spectheory.set_threads(100_000)
    assert torch.get_num_threads() == 1
    monkeypatch.setenv(ENV_VAR, "100000")
    with pytest.raises(SpectheoryError, match=ENV_VAR):
        default_threads()
    monkeypatch.delenv(ENV_VAR)
    for argv in (["--threads", "100000", "verifiers"], ["verifiers", "--threads", "100000"]):
        assert main(argv) == 2
        out = capsys.readouterr()
        assert out.out == "" and out.err.count("\n") == 1
        assert f"--threads 100,000 is over the limit of {limit} threads" in out.err
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_variable_counts_as_unset(monkeypatch, blank):
    """SPECTHEORY_THREADS= (as a shell leaves it after `export SPECTHEORY_THREADS=`) is the
    default rule, not an error that would stop every command."""
    monkeypatch.setenv(ENV_VAR, blank)
    assert [default_threads(c) for c in (2, 4, 16)] == [1, 2, 8]
