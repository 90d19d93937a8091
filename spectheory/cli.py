"""The ``spectheory`` command line.

Each sub-command lives in a module with a ``register(subparsers)`` function that adds its parser
and sets ``func``; the modules are listed in :data:`COMMAND_MODULES`. Errors that the toolkit
raises (:class:`spectheory.errors.SpectheoryError`) are printed as one line on stderr with exit
code 2 and no traceback; nothing is written to stdout before the result is complete.

``--threads N`` (N >= 1) sets torch's CPU threads for every command, before it runs; it may be
given before or after the command name (an in-process ``main([...])`` restores the caller's
setting when it returns). Without it the default of :mod:`spectheory.threads`
applies (``SPECTHEORY_THREADS``, else 1 thread on machines with at most 2 cores). Every command
also lets the C allocator keep freed memory for reuse (:mod:`spectheory.allocator`;
``SPECTHEORY_MALLOC=default`` turns that off).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import SpectheoryError
from .allocator import apply_default as apply_allocator_default
from .threads import get_threads, parse_threads, set_threads

#: Modules that contribute sub-commands (each has ``register(subparsers)``).
COMMAND_MODULES = [
    "spectheory.commands",
    "spectheory.figures",
    "toy_models.cli",
    "gpu_validation.cli",
    "lp.cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spectheory",
        description="Exact theory, LPs and verifiers for speculative decoding.",
    )
    parser.add_argument("--threads", dest="global_threads", metavar="N", default=None,
                        help="torch CPU threads for any command (an integer >= 1; default: "
                             "$SPECTHEORY_THREADS, else 1 on machines with at most 2 cores, "
                             "else half the cores, at most 8)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    apply_allocator_default()  # large temporaries reuse freed memory (spectheory.allocator)
    before = get_threads()
    try:
        threads = getattr(args, "global_threads", None)
        set_threads(None if threads is None else parse_threads(threads, "--threads"))
        return int(args.func(args) or 0)
    except SpectheoryError as exc:
        print(f"spectheory: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("spectheory: error: out of memory; use a smaller instance or lower "
              "--max-sequences", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("spectheory: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:  # an in-process call leaves the caller's setting as it found it
        if get_threads() != before:
            set_threads(before)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
