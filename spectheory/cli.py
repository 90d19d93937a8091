"""The ``spectheory`` command line.

Each sub-command lives in a module with a ``register(subparsers)`` function that adds its parser
and sets ``func``; the modules are listed in :data:`COMMAND_MODULES`. Every refusal is one line
on stderr with exit code 2 and no traceback, and nothing is written to stdout before the result
is complete:

* a bad option or argument (argparse's message, on one line, with a pointer to ``--help``);
* a bad environment variable (:mod:`spectheory.limits`), checked before the command runs;
* errors that the toolkit raises (:class:`spectheory.errors.SpectheoryError`), text that cannot
  be decoded, running out of memory, a time limit reached (``--time-limit``).

An interrupt (Ctrl-C, SIGINT) at any point after start-up, while parsers are built and modules
imported included, ends with one line and exit code 130.

``--threads N`` (N >= 1) sets torch's CPU threads for every command, before it runs; it may be
given before or after the command name (an in-process ``main([...])`` restores the caller's
setting when it returns: torch's thread count, or ``OMP_NUM_THREADS`` if torch was not loaded).
Without it the default of :mod:`spectheory.threads` applies (``SPECTHEORY_THREADS``, else 1
thread on machines with at most 2 cores). Torch is imported only by commands that compute with
it: ``--help``, ``instance`` and ``lp`` start in a fraction of a second. Every command also lets
the C allocator keep freed memory for reuse (:mod:`spectheory.allocator`;
``SPECTHEORY_MALLOC=default`` turns that off).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import SpectheoryError

#: Modules that contribute sub-commands (each has ``register(subparsers)``).
COMMAND_MODULES = [
    "spectheory.commands",
    "spectheory.report",
    "spectheory.audit",
    "spectheory.trees_cli",
    "spectheory.testing.sampler_cli",
    "spectheory.testing.vectors_cli",
    "spectheory.figures",
    "spectheory.sweep.cli",
    "spectheory.toy_models.cli",
    "spectheory.gpu_validation.cli",
    "spectheory.lp.cli",
    "spectheory.lp.claims",
]


class UsageError(Exception):
    """A command-line usage error (argparse's message), printed as one line with exit code 2."""

    def __init__(self, prog: str, message: str):
        super().__init__(message)
        self.prog = prog


class Parser(argparse.ArgumentParser):
    """argparse with usage errors raised as :class:`UsageError` (one line, exit code 2) instead
    of a usage block and ``sys.exit``."""

    def error(self, message: str):
        raise UsageError(self.prog, message)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="spectheory",
        description="Exact theory, LPs and verifiers for speculative decoding.",
    )
    parser.add_argument("--version", action="version", version=f"spectheory {__version__}")
    parser.add_argument("--threads", dest="global_threads", metavar="N", default=None,
                        help="torch CPU threads for any command (an integer >= 1; default: "
                             "$SPECTHEORY_THREADS, else 1 on machines with at most 2 cores, "
                             "else half the cores, at most 8)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    _accept_threads(sub)
    return parser


def _accept_threads(sub) -> None:
    """Add ``--threads`` to every (nested) sub-command that has none, so that it is also
    accepted after the command name."""
    for cmd in sub.choices.values():
        if "--threads" not in cmd._option_string_actions:
            cmd.add_argument("--threads", dest="global_threads", metavar="N",
                             default=argparse.SUPPRESS,
                             help="torch CPU threads (an integer >= 1; see spectheory --help)")
        for action in cmd._actions:
            if isinstance(action, argparse._SubParsersAction):
                _accept_threads(action)


def _fail(message: str) -> int:
    print(f"spectheory: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    before = None
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except UsageError as exc:
            print(f"{exc.prog}: error: {' '.join(str(exc).split())} (see {exc.prog} --help)",
                  file=sys.stderr)
            return 2
        from .allocator import apply_default as apply_allocator_default
        from .limits import check_environment, running
        from .threads import parse_threads, set_threads, snapshot

        check_environment()
        threads = getattr(args, "global_threads", None)
        threads = None if threads is None else parse_threads(threads, "--threads")
        apply_allocator_default()  # large temporaries reuse freed memory (spectheory.allocator)
        before = snapshot()
        set_threads(threads)  # torch's own setting if loaded, else the one it will start with
        if not hasattr(args, "time_limit"):
            return int(args.func(args) or 0)
        # long-running commands: --time-limit, progress bars and time estimates on a terminal
        with running(args.time_limit, progress=sys.stderr.isatty(), notes=True):
            return int(args.func(args) or 0)
    except SpectheoryError as exc:
        return _fail(exc)
    except UnicodeError as exc:  # text read from a file or standard input that is not UTF-8
        return _fail(f"cannot decode input as UTF-8 ({exc.reason}); save it as UTF-8 text")
    except MemoryError:
        return _fail("out of memory; use a smaller instance or lower --max-sequences")
    except KeyboardInterrupt:
        print("spectheory: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:  # an in-process call leaves the caller's thread setting as it found it
        if before is not None:
            from .threads import restore

            restore(before)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
