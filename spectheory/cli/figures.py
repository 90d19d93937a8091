"""``spectheory figures [--quick] [--out DIR] [--only figN ...]``: run the figure gallery.

The figures are scripts in the ``figures/`` folder of the source checkout, one per figure,
``figN_<name>.py``, each with a docstring (title, what it shows, the numbers behind it) and a
function ``main(out, quick=False) -> dict`` that writes ``out/<stem>.png`` and ``out/<stem>.pdf``
and returns the numbers it plotted. The scripts are not part of the installed package, so this
command runs from a checkout only (elsewhere: one line and exit code 2).

The run writes the images and ``figures.json`` (``meta``: command, machine, mode and seconds;
one key per figure with its numbers, mode and seconds) and nothing else. Writes are atomic: every
file is made in a temporary folder next to ``--out`` and moved into place only when all are
complete, so a failing or interrupted run leaves the previous output as it was. ``--only``
re-runs some figures and updates their entries of an existing ``figures.json``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import signal
import sys
import time
from pathlib import Path

from ..runtime.errors import SpectheoryError
from ..runtime.partial import partial_folder, release

#: A figure script's file name: ``figN_<name>.py``.
SCRIPT = re.compile(r"^(fig(\d+))_\w+\.py$")
NUMBERS = "figures.json"


def gallery_folder() -> Path:
    """The figure scripts: the package ``spectheory.gallery`` (the repository's ``figures/``
    folder, installed under that name), found through the import system so that a wheel, an
    editable install and a source checkout all resolve it."""
    import importlib.util

    here = Path(__file__).resolve().parent
    candidates = [here / "gallery", here.parent / "figures"]
    try:
        spec = importlib.util.find_spec("spectheory.gallery")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        candidates = [Path(p) for p in spec.submodule_search_locations] + candidates
    for folder in candidates:
        if scripts(folder):
            return folder
    raise SpectheoryError(
        f"the figure scripts (figN_<name>.py) are not installed: neither the package "
        f"spectheory.gallery nor {here.parent / 'figures'} holds them; reinstall spectheory")


#: Where ``spectheory figures`` writes without ``--out`` (relative to the current folder).
DEFAULT_OUT = Path("out") / "figures"


def default_out(folder: Path | None = None) -> Path:
    """Where ``spectheory figures`` writes without ``--out``: ``out/figures`` in the current
    folder, wherever the scripts live, so a run never overwrites the committed ``figures/``
    folder of a checkout (pass ``--out figures`` to refresh those on purpose) nor writes into
    an installed package. ``folder`` (the gallery) is accepted for callers and ignored."""
    return DEFAULT_OUT


def scripts(folder: Path) -> dict[str, Path]:
    """``{stem: path}`` of the figure scripts in ``folder``, in figure order."""
    if not folder.is_dir():
        return {}
    found = [(int(m.group(2)), p) for p in folder.iterdir()
             if (m := SCRIPT.match(p.name)) and p.is_file()]
    return {p.stem: p for _, p in sorted(found)}


def select(available: dict[str, Path], only: list[str] | None) -> dict[str, Path]:
    """The scripts named by ``--only`` (``fig3`` or ``fig3_tau_pmf``), all when None."""
    if not only:
        return dict(available)
    short = {SCRIPT.match(p.name).group(1): stem for stem, p in available.items()}
    chosen = {}
    for name in only:
        stem = short.get(name, name)
        if stem not in available:
            raise SpectheoryError(f"unknown figure {name!r}; choose from {', '.join(short)}")
        chosen[stem] = available[stem]
    return {s: p for s, p in available.items() if s in chosen}


def load(path: Path):
    """Import a figure script as a module (its folder is put on ``sys.path`` for ``_common``)."""
    folder = str(path.parent)
    common = sys.modules.get("_common")
    if common is not None and Path(getattr(common, "__file__", "")).parent != path.parent:
        del sys.modules["_common"]  # a helper module of another gallery folder
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(f"spectheory_gallery_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    if not callable(getattr(module, "main", None)):
        raise SpectheoryError(f"figure script {path.name} has no main(out, quick) function")
    return module


def title(path: Path) -> str:
    """First line of a script's docstring."""
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else path.stem


def machine() -> str:
    """The machine line of ``figures.json``'s meta. Torch's thread count as it stands, or the
    count torch will start with where no figure loaded it (nothing is imported for this)."""
    from ..runtime.threads import snapshot

    threads = snapshot()[1]
    return (f"{platform.machine()} {platform.system()}, {os.cpu_count()} cores "
            f"(torch threads: {'default' if threads is None else threads}), "
            f"Python {platform.python_version()}")


def jsonable(obj):
    """``obj`` with numpy scalars made Python numbers, tuples lists, keys strings and non-finite
    floats None."""
    import math

    import numpy as np

    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def run(out: str | os.PathLike, quick: bool = False, only: list[str] | None = None,
        folder: Path | None = None, log=None, command: str | None = None) -> dict:
    """Run the figure scripts into ``out`` atomically and return the ``figures.json`` payload.

    Every script writes into a temporary folder beside ``out``; ``figures.json`` (merged into
    the existing one when ``only`` is given) is written there too, and the files are moved into
    ``out`` only after all succeeded. On any error or interrupt ``out`` is left untouched and the
    temporary folder removed.

    Parameters
    ----------
    out : path
        Output folder (created at the end if missing).
    quick : bool
        Small grids (each script's ``quick`` mode).
    only : list of str, optional
        Figures to run (``fig3`` or ``fig3_tau_pmf``); default all.
    folder : path, optional
        The gallery folder; default `gallery_folder`.
    log : callable, optional
        Called with one progress line per figure.
    command : str, optional
        The command recorded in ``meta``.

    Returns
    -------
    dict
        ``{"meta": {...}, stem: {"title", "mode", "seconds", **numbers}, ...}`` as written to
        ``figures.json``.

    Raises
    ------
    SpectheoryError
        No gallery, an unknown figure, an empty output path or one that cannot be a folder, or
        a script that did not write its two files. Errors raised by a script propagate
        unchanged.
    """
    check_out(out)
    folder = gallery_folder() if folder is None else Path(folder)
    chosen = select(scripts(folder), only)
    if not chosen:
        raise SpectheoryError(f"no figure scripts (figN_<name>.py) in {folder}")
    if command is None:
        command = ("spectheory figures" + (" --quick" if quick else "")
                   + (" --only " + " ".join(only) if only else "") + f" --out {out}")
    out = Path(out).absolute()
    # the temporary folder goes into the nearest existing folder on the way to ``out`` (same
    # file system, so the final moves are renames; nothing is created there before success)
    base = out.parent
    while not base.exists() and base != base.parent:
        base = base.parent
    _check_destinations(out, list(chosen))  # before any figure is drawn
    try:
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(20, "not a folder")
        tmp = partial_folder(f".{out.name}.partial-", base)
    except OSError as exc:
        raise SpectheoryError(f"cannot create output folder {str(out)!r}: "
                              f"{exc.strerror or exc}") from None
    mode = "quick" if quick else "full"
    try:
        t0 = time.time()
        payload = {}
        old = out / NUMBERS
        if only and old.is_file():
            try:
                payload = json.loads(old.read_text())
            except (OSError, ValueError, RecursionError):  # not a record: written afresh
                payload = {}
            # e.g. a list: the record of these figures replaces it; in an object, an entry
            # that is not a figure's record (an object) goes, the others' records stay
            payload = ({k: v for k, v in payload.items() if isinstance(v, dict)}
                       if isinstance(payload, dict) else {})
        entries = {}
        for stem, path in chosen.items():
            if log:
                log(f"[figures] {stem} ...")
            t1 = time.time()
            numbers = load(path).main(tmp, quick=quick)
            for ext in ("png", "pdf"):
                if not (tmp / f"{stem}.{ext}").is_file():
                    raise SpectheoryError(f"figure script {path.name} did not write {stem}.{ext}")
            entries[stem] = {"title": title(path), "mode": mode,
                             "seconds": round(time.time() - t1, 2), **jsonable(numbers)}
        payload["meta"] = {"command": command, "mode": mode,
                           "seconds": round(time.time() - t0, 2), "machine": machine()}
        payload.update(entries)
        order = ["meta"] + list(scripts(folder))
        payload = {k: payload[k] for k in sorted(payload, key=lambda k: (
            order.index(k) if k in order else len(order), k))}
        (tmp / NUMBERS).write_text(json.dumps(payload, indent=1) + "\n")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpectheoryError(f"cannot create output folder {str(out)!r}: "
                                  f"{exc.strerror or exc}") from None
        _commit(tmp, out)
    finally:
        release(tmp)
    return payload


def _check_destinations(out: Path, stems) -> None:
    """Refuse, naming it, a place in ``out`` where a file of the run must go but cannot (a
    folder there: the move failed after the other files were moved, naming the temporary
    source)."""
    _refuse_blocked(expected_files(out, stems))


def _refuse_blocked(paths) -> None:
    for path in paths:
        if path.is_dir() or (path.exists() and not path.is_file()):
            raise SpectheoryError(f"{path} is {'a folder' if path.is_dir() else 'not a file'}; "
                                  "the run writes a file there: remove it or choose another "
                                  "--out")


def _commit(tmp: Path, out: Path) -> None:
    """Move every file of ``tmp`` into ``out`` (``os.replace``, same file system), with SIGINT
    held off until all are moved; the destinations are checked again first (nothing is moved
    when one of them cannot take its file)."""
    _refuse_blocked([out / f.name for f in tmp.iterdir()])
    pending = []
    previous = None
    try:
        previous = signal.signal(signal.SIGINT, lambda *_: pending.append(1))
    except ValueError:  # not the main thread: no handler to swap
        pass
    try:
        for f in sorted(tmp.iterdir()):
            os.replace(f, out / f.name)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if pending:
        raise KeyboardInterrupt


def expected_files(out: Path | str, stems) -> list[Path]:
    """The files a run writes into ``out`` for the figures ``stems``."""
    out = Path(out)
    return [out / f"{s}.{ext}" for s in stems for ext in ("png", "pdf")] + [out / NUMBERS]


# ----------------------------------------------------------------------------- CLI


def check_out(out) -> None:
    """Refuse an empty output path (``--out ''``): it would write into the current folder (the
    ``figures`` command's and each figure script's check)."""
    if isinstance(out, str) and out.strip() == "":
        raise SpectheoryError(f"--out {out!r} is empty: give the figures' output folder "
                              "(e.g. --out out/figures)")


def cmd_figures(args) -> int:
    check_out(args.out)  # before anything is written
    from ..runtime.threads import parse_threads, restore, set_threads, snapshot

    threads = parse_threads(args.threads, "--threads")  # bounded: torch crashes on huge counts
    folder = gallery_folder()
    out = Path(args.out) if args.out is not None else default_out()
    log = None if args.no_progress else (lambda s: print(s, file=sys.stderr, flush=True))
    before = snapshot()
    # many small float64 ops: one thread is fastest here. Torch is not imported for this: the
    # count applies when a figure first loads it (figure 3's exact rationals never do)
    set_threads(threads)
    try:
        command = ("spectheory figures" + (" --quick" if args.quick else "")
                   + (" --only " + " ".join(args.only) if args.only else "")
                   + (f" --out {args.out}" if args.out is not None else ""))
        payload = run(out, quick=args.quick, only=args.only, folder=folder, log=log,
                      command=command)
    finally:
        restore(before)
    meta = payload["meta"]
    written = expected_files(out, select(scripts(folder), args.only))
    from ..runtime.files import shown_path

    sys.stdout.write(f"wrote {len(written)} file{'s' if len(written) != 1 else ''} to "
                     f"{shown_path(out)} ({meta['mode']} run, "
                     f"{meta['seconds']:.1f} s)\n")
    return 0


def register(sub) -> None:
    p = sub.add_parser("figures", help="run the figure gallery (figures/figN_*.py): PNG + PDF "
                                       "and figures.json")
    p.add_argument("--out", default=None,
                   help="output folder (default: out/figures in the current folder; --out "
                        "figures in a checkout refreshes the committed images)")
    p.add_argument("--quick", action="store_true",
                   help="small grids (seconds); same figures and files")
    p.add_argument("--only", nargs="+", metavar="FIG", default=None,
                   help="run only these figures (fig3 or fig3_tau_pmf); their entries of an "
                        "existing figures.json are updated")
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: the engine's many small array operations "
                        "run fastest on one thread)")
    p.set_defaults(func=cmd_figures)
