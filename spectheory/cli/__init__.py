"""The ``spectheory`` command line.

Each sub-command lives in a module with a ``register(subparsers)`` function that adds its parser
and sets ``func``; the modules are listed in `COMMAND_MODULES`. Every refusal is one line
on stderr with exit code 2 and no traceback, and nothing is written to stdout before the result
is complete:

* a bad option or argument (argparse's message, on one line, with a pointer to ``--help``);
* a bad environment variable ([`spectheory.runtime.limits`][spectheory.runtime.limits]), checked before the command
  runs;
* errors that the toolkit raises ([`SpectheoryError`][spectheory.runtime.errors.SpectheoryError]), text that
  cannot be decoded, running out of memory, a time limit reached (``--time-limit``);
* user code (``module:function`` verifiers and samplers) that fails to import, raises, returns
  something that is not a law, or calls ``sys.exit`` with any code: a ``SystemExit`` during a
  command never becomes its exit code ([`import_user`][spectheory.runtime.errors.import_user],
  [`call_user`][spectheory.runtime.errors.call_user]);
* an output that cannot be written (a full device, an unwritable path): one line, and nothing
  half-written; a reader that goes away (``spectheory ... | head``) ends quietly with exit 0.

``--debug`` (before or after the command name) prints the full traceback, the user code's
included, before the one line.

An interrupt (Ctrl-C, SIGINT) at any point after start-up, while parsers are built and modules
imported included, ends with one line and exit code 130; an interrupt raised inside user code
too.

``--threads N`` (1 <= N <= min(4 x cores, 256)) sets torch's CPU threads for every command, before
it runs; it may be given before or after the command name (an in-process ``main([...])`` restores
the caller's setting when it returns: torch's thread count, or ``OMP_NUM_THREADS`` if torch was not
loaded). Without it the default of [`spectheory.runtime.threads`][spectheory.runtime.threads] applies
(``SPECTHEORY_THREADS``, else 1 thread on machines with at most 2 cores). Torch is imported only by
commands that compute with it: ``--help``, ``instance`` and ``lp`` start in a fraction of a second.
A command imports only the module that defines it (`COMMANDS`, `build_parser`), and ``--help``
none of them, so neither pays for the others' imports.
Every command also lets the C allocator keep freed memory for reuse
([`spectheory.runtime.allocator`][spectheory.runtime.allocator]; ``SPECTHEORY_MALLOC=default`` turns that off).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys

from .. import __version__
from ..runtime.errors import OptionError, SpectheoryError, UserCodeError
from ..runtime.limits import shown as _repr_cut

#: Modules that contribute sub-commands (each has ``register(subparsers)``).
COMMAND_MODULES = [
    "spectheory.cli.commands",
    "spectheory.cli.report",
    "spectheory.cli.audit",
    "spectheory.cli.trees",
    "spectheory.cli.hetero",
    "spectheory.testing.sampler_cli",
    "spectheory.testing.step_cli",
    "spectheory.testing.vectors_cli",
    "spectheory.cli.figures",
    "spectheory.sweep.cli",
    "spectheory.toy_models.cli",
    "spectheory.gpu_validation.cli",
    "spectheory.lp.cli",
    "spectheory.lp.claims",
]

#: The sub-commands of each module of `COMMAND_MODULES`, in order, with their one-line help.
#: ``spectheory --help`` lists them from here and a command imports only its own module
#: (`build_parser` with ``argv``), so that start-up does not pay for every command's imports;
#: ``tests/test_startup.py`` checks the table against what the modules register.
COMMANDS = {
    "spectheory.cli.commands": {
        "instance": "make instances",
        "exact": "exact law of a verifier on an instance",
        "check": "exact losslessness verdict (exit 1 when lossy)",
        "verifiers": "list the registered verifiers and their metadata"},
    "spectheory.cli.report": {
        "report": "the main job: a short exact report on built-in defaults, ending in a verdict "
                  "(exit 1 if any check fails)"},
    "spectheory.cli.audit": {
        "audit": "a verifier's law in bfloat16/float16/float32 vs float64 on "
                 "real-vocabulary-sized rows"},
    "spectheory.cli.trees": {"tree": "exact analysis of a verifier on a drafted token tree"},
    "spectheory.cli.hetero": {
        "hetero": "exact law of SLEM, SLRS or TLI (draft and target with different tokenizers)"},
    "spectheory.testing.sampler_cli": {
        "check-sampler": "check a sampler (module:function) against the exact law (exit 1 when "
                         "it fails)"},
    "spectheory.testing.step_cli": {
        "check-step": "check a whole draft-and-verify step (module:function) against the target "
                      "law (exit 1 when it fails)"},
    "spectheory.testing.vectors_cli": {
        "vectors": "language-neutral test vectors (exact laws as JSON)"},
    "spectheory.cli.figures": {
        "figures": "run the figure gallery (figures/figN_*.py): PNG + PDF and figures.json"},
    "spectheory.sweep.cli": {
        "sweep": "run a grid of exact analyses and LP optima (TOML file) as cached jobs"},
    "spectheory.toy_models.cli": {
        "toy": "a toy-family instance as JSON (--list: families and knobs)"},
    "spectheory.gpu_validation.cli": {
        "models": "fetch and locate the pinned real models and data sets",
        "validate": "real-model validation of the verifiers"},
    "spectheory.lp.cli": {
        "lp": "optimality LPs: node-budget, direct, coupling, multipath, selection, frontier"},
    "spectheory.lp.claims": {
        "claims": "recompute every checkable published claim (the claims ledger)"},
}


class UsageError(Exception):
    """A command-line usage error (argparse's message), printed as one line with exit code 2."""

    def __init__(self, prog: str, message: str):
        super().__init__(message)
        self.prog = prog


def _ascii_int(text: str) -> int:
    from ..runtime.limits import ascii_int

    value = ascii_int(text)
    if value is None:
        raise ValueError(text)
    return value


def _ascii_float(text: str) -> float:
    from ..runtime.errors import OptionError
    from ..runtime.limits import parse_float

    try:
        return parse_float(text)
    except OptionError:
        raise ValueError(text) from None


_ascii_int.__name__, _ascii_float.__name__ = "int", "float"  # argparse: "invalid int value"


class _StoreOnce(argparse._StoreAction):
    """argparse's ``store`` for an option given once: a second ``--sampling temperature=0
    --sampling top_k=2`` replaced the first silently; it is a usage error naming the option.
    (An option still holding its default object has not been given yet.)"""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string is not None and getattr(namespace, self.dest, self.default) is not \
                self.default:
            parser.error(f"{'/'.join(self.option_strings)} given twice; give it once")
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """argparse with usage errors raised as `UsageError` (one line, exit code 2) instead
    of a usage block and ``sys.exit``. Options declared ``type=int`` or ``type=float`` read
    ASCII numbers only (`runtime.limits.ascii_int`, `parse_float`): Python's ``int()`` and
    ``float()`` also read other scripts' digits and ``1_0``. An option that takes a value is
    given once (`_StoreOnce`). Sub-command parsers are of this class too, so the rules hold for
    every command."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("type", int, _ascii_int)
        self.register("type", float, _ascii_float)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def error(self, message: str):
        raise UsageError(self.prog, message)

    def _get_values(self, action, arg_strings):
        # ``--alpha=--``: argparse (3.11, 3.12) drops the '--' as the end of the options and
        # hands the option an empty list, skipping its type and choices (a TypeError from the
        # command, or "unknown mode []"); no option here takes '--' as its value
        if action.option_strings and action.nargs != 0 and arg_strings == ["--"]:
            raise argparse.ArgumentError(action, "expected a value, got '--'")
        return super()._get_values(action, arg_strings)

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(ns, "_command_prog"):  # the innermost command left words
            setattr(ns, "_command_prog", self.prog)  # (copied up into the caller's namespace)
        return ns, extras

    def parse_args(self, args=None, namespace=None):
        """As argparse's, with words no option takes blamed on the command that read the line
        (``spectheory check: error: unrecognized arguments ... (see spectheory check --help)``;
        argparse named the top-level parser)."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            raise UsageError(getattr(ns, "_command_prog", self.prog),
                             f"unrecognized arguments: {' '.join(extras)}")
        return ns


def command_name(argv: list[str]) -> str | None:
    """The sub-command named on the command line ``argv`` (the first word that is not an option
    or the value of ``--threads``), or None when there is none (``--help``, ``--version``)."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--threads":
            skip = True
        elif word == "--":
            return None
        elif not word.startswith("-"):
            return word
    return None


#: The command line `main` is parsing, while it builds its parser (`build_parser`'s default).
_parsing: list[str] | None = None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser.

    Without ``argv``: every module of `COMMAND_MODULES` registers its sub-commands (the full
    parser). With ``argv``, the command line about to be parsed: only the module of the
    command it names is imported; the others are listed by name and help (`COMMANDS`), enough
    for ``spectheory --help`` and for argparse's choice of command, so that start-up costs
    only what that command imports. A command missing from `COMMANDS` builds the full
    parser. `main` passes its command line (as the default of ``argv`` while it builds)."""
    modules = COMMAND_MODULES
    argv = _parsing if argv is None else argv
    if argv is not None:
        name = command_name(list(argv))
        owner = [m for m, names in COMMANDS.items() if name in names]
        modules = owner if owner else ([] if name is None else COMMAND_MODULES)
    parser = Parser(
        prog="spectheory",
        description="Exact theory, LPs and verifiers for speculative decoding.",
    )
    parser.add_argument("--version", action="version", version=f"spectheory {__version__}")
    parser.add_argument("--threads", dest="global_threads", metavar="N", default=None,
                        help="torch CPU threads for any command (an integer >= 1; default: "
                             "$SPECTHEORY_THREADS, else 1 on machines with at most 2 cores, "
                             "else half the cores, at most 8)")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, print the full traceback (of user code included) "
                             "before the one-line message")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    listed = set()
    for module in COMMAND_MODULES:
        if module in modules:
            importlib.import_module(module).register(sub)
        else:  # listed only: never parsed, as the command line names another command
            for name, text in COMMANDS.get(module, {}).items():
                sub.add_parser(name, help=text, add_help=False)
                listed.add(name)
    _accept_threads(sub, skip=listed)
    return parser


def _accept_threads(sub, skip=frozenset()) -> None:
    """Add ``--threads`` and ``--debug`` to every (nested) sub-command that has none, so that
    they are also accepted after the command name; not to the commands in ``skip`` (listed
    only, never parsed: about a fifth of the time of building a parser)."""
    for name, cmd in sub.choices.items():
        if name in skip:
            continue
        if "--threads" not in cmd._option_string_actions:
            cmd.add_argument("--threads", dest="global_threads", metavar="N",
                             default=argparse.SUPPRESS,
                             help="torch CPU threads (an integer >= 1; see spectheory --help)")
        if "--debug" not in cmd._option_string_actions:
            cmd.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="on an error, print the full traceback before the one line")
        for action in cmd._actions:
            if isinstance(action, argparse._SubParsersAction):
                _accept_threads(action)


#: Longest error line printed: a longer message keeps its first `CLIP_HEAD` and last `CLIP_TAIL`
#: characters (the problem, and the advice that usually ends it) and says how many were cut, so
#: that an error never echoes a whole input (an option repeated thousands of times, a huge name).
MAX_ERROR_CHARS = 600
CLIP_HEAD, CLIP_TAIL = 440, 120


def clip_message(message: str) -> str:
    """``message`` on one line (whitespace runs made one space), at most `MAX_ERROR_CHARS`
    characters plus the note of how many were cut."""
    text = " ".join(str(message).split())
    if len(text) <= MAX_ERROR_CHARS:
        return text
    cut = len(text) - CLIP_HEAD - CLIP_TAIL
    return f"{text[:CLIP_HEAD]} [... {cut:,} characters cut ...] {text[-CLIP_TAIL:]}"


def _clear_progress_bars() -> None:
    """Close the progress bars still open when a command fails, clearing their lines, so that
    the error starts its own line and is the last one (a bar left open was drawn before it on the
    same line, and again after it when closed at exit)."""
    std = sys.modules.get("tqdm.std")
    if std is None:
        return
    closed = False
    for bar in list(getattr(std.tqdm, "_instances", ())):
        try:
            bar.leave = False
            bar.close()
            closed = True
        except Exception:  # noqa: BLE001 - a bar that cannot close is left as it is
            pass
    if closed and not sys.stderr.isatty():  # a log keeps the bar's text: end its line
        sys.stderr.write("\n")


def _fail(message: str, debug: BaseException | None = None) -> int:
    """Print ``spectheory: error: MESSAGE`` on one line (after the full traceback of ``debug``,
    chained causes included, under ``--debug``); returns exit code 2."""
    try:
        _clear_progress_bars()
        if debug is not None:
            import traceback

            traceback.print_exception(type(debug), debug, debug.__traceback__, file=sys.stderr)
        print(f"spectheory: error: {clip_message(message)}", file=sys.stderr)
        sys.stderr.flush()
    except OSError:  # standard error is a full device or closed: the exit code still says 2
        pass         # (an escaping error would end the command with 1, a LOSSY verdict's code)
    return 2


def _fail_usage(exc) -> int:
    """A usage error's line (`_fail`'s rules), exit code 2."""
    try:
        print(f"{exc.prog}: error: {clip_message(exc)} (see {exc.prog} --help)",
              file=sys.stderr)
        sys.stderr.flush()
    except OSError:
        pass
    return 2


def _verifier_names(args) -> None:
    """``--verifier`` as the commands print it: stripped of the spaces around it (as
    [`get_verifier`][spectheory.registry.get_verifier] reads it), and refused in one line when it
    holds a character that cannot be printed on one line (a newline, a tab: a report's first
    line broke in two)."""
    names = getattr(args, "verifier", None)
    if names is None:
        return
    one = isinstance(names, str)
    names = [names] if one else list(names)
    for i, name in enumerate(names):
        if isinstance(name, str):
            name = name.strip()
            if not name.isprintable():
                raise OptionError(f"--verifier {_repr_cut(name, 60)} holds a control character (a "
                                  "newline, a tab); give the name on one line")
            names[i] = name
    args.verifier = names[0] if one else names


def _run(args) -> int:
    """Run the parsed command. A ``SystemExit`` raised while it runs can only come from user code
    (the toolkit's commands return their exit code): it becomes a one-line
    [`UserCodeError`][spectheory.runtime.errors.UserCodeError] (exit code 2), never the exit code it asked
    for, so that no check ends with exit 0 because the code under test exited."""
    from ..runtime.limits import running

    _verifier_names(args)
    try:
        if not hasattr(args, "time_limit"):
            return int(args.func(args) or 0)
        # long-running commands: --time-limit, progress bars and time estimates on a terminal
        with running(args.time_limit, progress=sys.stderr.isatty()  # a command's own
                     and not getattr(args, "no_progress", False), notes=True), \
                _hard_stop(args.time_limit):
            return int(args.func(args) or 0)
    except SystemExit as exc:
        signum = _ray_signal_exit(exc)
        if signum is not None:  # the command was terminated, not ended by user code
            import signal

            name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ \
                else f"signal {signum}"
            print(f"spectheory: terminated by {name} (while Ray was running; nothing was "
                  "written)", file=sys.stderr)
            return 128 + signum
        raise UserCodeError(f"user code called sys.exit({exc.code!r}) during the command; user "
                            "code must return, not exit (--debug shows where)") from exc


#: Seconds past ``--time-limit`` (plus `HARD_STOP_SHARE` of it) after which a command that did
#: not stop is ended from a watcher thread: the limit stops the work from the main thread (a
#: check between steps, then a ``SIGALRM`` 0.5 s later), which code under test can defeat (a
#: loop that catches every exception, a sampler that ignores ``SIGALRM``).
HARD_STOP_S = 2.0
HARD_STOP_SHARE = 0.1


@contextlib.contextmanager
def _hard_stop(time_limit):
    """End the process (exit 2, one line, the folders being written removed as on SIGTERM) when
    the block runs `HARD_STOP_S` plus `HARD_STOP_SHARE` of the limit past ``time_limit``
    seconds: the limit's promise holds even when the code under test does not let it stop the
    work. Only in the process's main thread, and only for the command line (an application's
    own call of ``main`` keeps its process)."""
    import threading
    import time

    from ..runtime.limits import check_time_limit

    limit = check_time_limit(time_limit)
    if limit is None or threading.current_thread() is not threading.main_thread() \
            or not _COMMAND_LINE[0]:
        yield
        return
    done = threading.Event()
    start = time.monotonic()
    after = limit + HARD_STOP_S + HARD_STOP_SHARE * limit

    def watch():
        if done.wait(after):
            return
        _end_now(f"spectheory: error: time limit of {limit:g} s reached and the code under test "
                 f"did not stop when asked (it caught the interruption, or ignored SIGALRM); "
                 f"the command ended after {time.monotonic() - start:.1f} s with no result", 2)

    threading.Thread(target=watch, name="spectheory-hard-stop", daemon=True).start()
    try:
        yield
    finally:
        done.set()


#: Whether `main` runs as the command itself (``argv`` None): only then may it end the process.
_COMMAND_LINE = [False]


def _end_now(line: str, code: int) -> None:
    """End the process at once: remove the folders being written, end the worker processes,
    flush standard output, print ``line`` and exit with ``code`` (``os._exit``)."""
    import multiprocessing

    from ..runtime.errors import real_exit
    from ..runtime.partial import kept_clauses, remove_held

    remove_held()
    # a signal may arrive while multiprocessing is still being imported (the module partly
    # initialised, without active_children yet): no worker has been started from it then, and
    # ending the process must not fail on it
    children = getattr(multiprocessing, "active_children", None)
    try:
        for child in (children() if children is not None else ()):
            child.terminate()
    except Exception:  # noqa: BLE001 - a worker table being built: exit all the same
        pass
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - a closed or full stdout: the line below still goes
        pass
    print("; ".join([line, *kept_clauses()]), file=sys.stderr, flush=True)
    real_exit(code)


def _ray_signal_exit(exc: SystemExit) -> int | None:
    """The signal number when ``exc`` was raised by the handler Ray installs for SIGTERM while it
    connects or runs (``sigterm_handler`` in Ray's sources: ``sys.exit(signum)``), else None."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or not isinstance(exc.code, int) or isinstance(exc.code, bool):
        return None
    code = tb.tb_frame.f_code
    where = code.co_filename.replace("\\", "/")
    if code.co_name == "sigterm_handler" and "/ray/" in where and 0 < exc.code < 65:
        return exc.code
    return None


#: errno values of a write that failed for want of space or a working device.
_WRITE_ERRORS = {errno.ENOSPC, errno.EFBIG, errno.EIO, getattr(errno, "EDQUOT", errno.ENOSPC)}


def _os_message(exc: OSError) -> str:
    """One line for an operating-system error that reached the command line."""
    reason = exc.strerror or str(exc)
    if exc.filename is not None:
        return f"{reason}: {str(exc.filename)!r}"
    if exc.errno in _WRITE_ERRORS:
        return f"cannot write the output ({reason}); nothing more was written"
    return reason


def _digit_limit_message(exc: ValueError) -> str | None:
    """One line for Python's limit on integer text (``sys.get_int_max_str_digits``, 4,300
    digits) reached while reading a number (a TOML integer, a knob) or printing an exact
    result; None for any other ValueError (a traceback: a defect)."""
    import re

    text = str(exc)
    if not text.startswith("Exceeds the limit ("):
        return None
    limit = f"{sys.get_int_max_str_digits():,}"
    read = re.search(r"value has (\d+) digits", text)
    if read:
        return (f"a number in the input has {int(read.group(1)):,} digits, over Python's limit "
                f"of {limit} digits for reading an integer")
    return (f"an exact result holds an integer of more than {limit} digits, over Python's limit "
            f"for printing one; use floats (drop --exact) or a smaller instance")


def _message(exc: SpectheoryError) -> str:
    from ..law import LawError

    if isinstance(exc, LawError):  # a verifier returned something else than a law
        return f"not a law: {exc}"
    return str(exc)


def _on_sigterm():
    """While the command runs, SIGTERM removes the folders the command is writing into
    ([`spectheory.runtime.partial`][spectheory.runtime.partial]; its default action ends the
    process at once, leaving them behind), ends the worker processes it started, says so in one
    line and exits with 143; the previous handler is put back after. Only where SIGTERM has its
    default action (an application that calls ``main`` with its own handler keeps it). Returns
    the function that puts it back."""
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    pid = os.getpid()
    # SIGHUP too (a closed terminal, a dropped ssh session): exit 129, as its default action
    names = {signal.SIGTERM: ("SIGTERM", 143), signal.SIGHUP: ("SIGHUP", 129)}
    ours = [s for s in names if signal.getsignal(s) is signal.SIG_DFL]

    def handler(signum, frame):
        if os.getpid() != pid:  # a worker forked meanwhile: the default action, as before
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        name, code = names[signum]
        # os._exit, also while a sampler or step runs (call_user guards it)
        _end_now(f"spectheory: terminated ({name}); nothing half-written was left", code)

    for s in ours:
        signal.signal(s, handler)

    def restore():
        for s in ours:
            if signal.getsignal(s) is handler:
                signal.signal(s, signal.SIG_DFL)
    return restore


def _end_without_user_threads(started: set, code: int) -> None:
    """End the process now, with ``code``, when threads the command started (user code's: a
    sampler's worker, a model's) are still running and not daemons: Python would wait for them
    at exit, for ever for a thread that never returns, after the verdict was printed. One note
    on standard error names them."""
    from ..runtime.errors import left_threads, real_exit

    left = left_threads(started)
    if not left:
        return
    names = ", ".join(repr(t.name) for t in left[:3]) + (", ..." if len(left) > 3 else "")
    try:
        print(f"spectheory: note: {len(left)} thread(s) started during the command are still "
              f"running ({names}); the command ends without waiting for them", file=sys.stderr)
    except (OSError, ValueError):  # standard error is a closed pipe (``2>&1 | head``) too
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream: nothing more can be said there
            pass
    real_exit(code)


def main(argv: list[str] | None = None) -> int:
    """The command line: ``spectheory ARGS`` (``argv`` None: ``sys.argv``), returning its exit
    code. Run as the command (``argv`` None), it ends with that code even when threads that
    user code started are still running (`_end_without_user_threads`), whichever way it ends:
    a verdict, an error, or a reader that went away (``| head``), where Python waited for them
    at exit, for ever for a thread that never returns."""
    started: list = []
    code = _main(argv, started)
    if argv is None and started:
        _end_without_user_threads(started[0], code)
    return code


def _main(argv: list[str] | None, started: list) -> int:
    if sys.stderr is None:  # started with standard error closed (2>&-): its lines are dropped
        sys.stderr = open(os.devnull, "w")
    if sys.stdout is None:  # started with standard output closed (>&-): no result can be shown
        print("spectheory: error: standard output is closed; start the command with an open "
              "standard output (e.g. > FILE)", file=sys.stderr)
        return 2
    before = None
    _COMMAND_LINE[0] = argv is None
    debug = "--debug" in (sys.argv[1:] if argv is None else list(argv))
    restore_term = _on_sigterm()
    try:
        global _parsing
        _parsing = sys.argv[1:] if argv is None else list(argv)
        try:
            parser = build_parser()
        finally:
            _parsing = None
        try:
            words = sys.argv[1:] if argv is None else list(argv)
            words = words[:words.index("--")] if "--" in words else words
            if sum(w == "--threads" or str(w).startswith("--threads=") for w in words) > 1:
                # before and after the command name: the command's value replaced the other
                # unread (argparse parses a sub-command into a namespace of its own)
                raise UsageError(parser.prog, "--threads given twice; give it once")
            args = parser.parse_args(argv)
        except UsageError as exc:
            return _fail_usage(exc)
        debug = bool(getattr(args, "debug", False))
        from ..runtime.allocator import apply_default as apply_allocator_default
        from ..runtime.limits import check_environment
        from ..runtime.threads import parse_threads, set_threads, snapshot

        check_environment()
        threads = getattr(args, "global_threads", None)
        threads = None if threads is None else parse_threads(threads, "--threads")
        apply_allocator_default()  # large temporaries reuse freed memory (spectheory.runtime.allocator)
        before = snapshot()
        set_threads(threads)  # torch's own setting if loaded, else the one it will start with
        import threading

        from ..runtime.errors import counting_interrupts, guard_threads, json_stdout

        started.append(set(threading.enumerate()))
        with json_stdout(bool(getattr(args, "json", False) and getattr(args, "json_result", False)),
                         keep=argv is None), guard_threads(debug), counting_interrupts():
            code = _run(args)
        sys.stdout.flush()  # a full device or a closed pipe is reported here, not at exit
        return code
    except SpectheoryError as exc:
        return _fail(_message(exc), exc if debug else None)
    except ValueError as exc:
        limit = _digit_limit_message(exc)
        if limit is None:
            raise
        return _fail(limit, exc if debug else None)
    except UnicodeError as exc:  # text read from a file or standard input that is not UTF-8
        return _fail(f"cannot decode input as UTF-8 ({exc.reason}); save it as UTF-8 text",
                     exc if debug else None)
    except MemoryError as exc:
        return _fail("out of memory; use a smaller instance or lower --max-sequences",
                     exc if debug else None)
    except KeyboardInterrupt:
        try:
            print("spectheory: interrupted", file=sys.stderr)
        except OSError:
            pass
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): quiet, as for any filter
        return 0
    except OSError as exc:  # a full device, an unwritable or unreadable path
        return _fail(_os_message(exc), exc if debug else None)
    finally:  # an in-process call leaves the caller's thread setting as it found it
        restore_term()
        if before is not None:
            from ..runtime.threads import restore

            restore(before)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
