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
    "spectheory.testing.sampler_cli",
    "spectheory.testing.vectors_cli",
    "spectheory.figures",
    "toy_models.cli",
    "gpu_validation.cli",
    "lp.cli",
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _fail(message: str) -> int:
    print(f"spectheory: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except UsageError as exc:
            print(f"{exc.prog}: error: {' '.join(str(exc).split())} (see {exc.prog} --help)",
                  file=sys.stderr)
            return 2
        from .limits import check_environment, running

        check_environment()
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
