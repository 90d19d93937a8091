"""The ``spectheory`` command line.

Each sub-command lives in a module with a ``register(subparsers)`` function that adds its parser
and sets ``func``; the modules are listed in :data:`COMMAND_MODULES`. Errors that the toolkit
raises (:class:`spectheory.errors.SpectheoryError`) are printed as one line on stderr with exit
code 2 and no traceback; nothing is written to stdout before the result is complete.
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
    "spectheory.audit",
    "spectheory.testing.sampler_cli",
    "spectheory.testing.vectors_cli",
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
    parser.add_argument("--version", action="version", version=f"spectheory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
