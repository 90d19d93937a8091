"""A sweep's TOML file, checked strictly, and its expansion into jobs.

```toml
[sweep]
name = "example"
exact = false            # rationals (needs rational instances: random with denominator)
time_limit = 60          # seconds per job
memory_limit_mb = 2048   # resident memory per job (0: no limit)
batch = 1                # about this many jobs per child process (local executor)

[[instances]]            # one table per family; every list is a grid axis
family = "random"        # spectheory.random_instance; "toy:NAME" a spectheory.toy_models
vocab = [2, 3]           # family; "module:function" a user's f(vocab_size, block_length,
block = [2]              # seed, **knobs) -> Instance
seeds = [0, 1]
alpha = [1.0]            # any other key is a knob of the family

[[verifiers]]
name = ["token", "block"]

[[verifiers]]
name = ["gbv"]
paths = [2, 3]
drafting = ["iid"]       # optional: the verifier's own scheme by default
sampling = ["", "temperature=0", "top_k=2"]   # optional: processed targets ("" none), and
                                              # draft_sampling for the draft rows

[[optima]]               # LP optima (spectheory.lp): "direct" (any K), "node-budget" (K = 1),
                         # "multipath" (the compact K-path relaxation for i.i.d. drafts)
problem = "direct"
paths = [1, 2, 3]
```

Every value may be a scalar or a list; lists are crossed. Unknown keys are refused with the
nearest valid key; sizes are bounded before anything runs.

Beyond that grid, for curves that follow the same models or grids that are not full crosses:

* ``truncate_from = N`` in an ``[[instances]]`` table builds each instance once with block length
  N and keeps its first L levels for every ``block`` L (the same draft and target at every L,
  as in the figures that plot against L);
* ``block = [...]`` in a ``[[verifiers]]``, ``[[optima]]`` or ``[[measures]]`` table runs its
  methods only on the instances of those block lengths;
* ``shape = ["2,2,1"]`` (branching factors) in a ``[[verifiers]]`` table analyses the verifier
  on that draft tree (`spectheory.engine.analysis.analyze_tree`), and ``problem = "tree"`` solves the
  tree's LP (`spectheory.lp.tree_lp`); a shape's depth is its block length, so these jobs run on
  the instances whose ``block`` equals it, and their ``paths`` is the tree's number of leaves;
* verifier names ``lenient(l)``, ``threshold(theta)`` and ``typical(epsilon, delta)`` are the
  parameterised lossy contrasts of `spectheory.verifiers.contrasts`, and ``additive(eps)``,
  ``multiplicative(lam)``, ``top-m(m)``, ``entropy-threshold(beta)``, ``trtllm-relaxed(k, delta)``,
  ``sglang-threshold(ts, ta)`` and ``cactus(delta)`` the relaxed rules of
  `spectheory.verifiers.relaxed`;
* optima ``coupling`` (the full-knowledge coupling bound, K = 1), ``selection`` (the best
  "select a path, then block-verify" rule, `spectheory.lp.selection_lp`) and ``multidraft-l1``
  (the exact L = 1 optimum 1 + alpha*(p, q, K) of Hu et al., arXiv 2502.18779, under i.i.d. or
  without-replacement drafts, `spectheory.bounds.optimal_acceptance`);
* ``[[measures]]`` with ``name = ["tv", "kl"]``: the mean per-step divergence of draft and target
  along the draft's paths (`spectheory.toy_models.mean_divergence`), in the ``value`` column.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..runtime.errors import OptionError
from ..runtime.limits import shown as _repr_cut

try:  # Python 3.11+
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore[no-redef]

#: Largest grid a sweep expands to (each job is a child process).
MAX_JOBS = 100_000
#: Bounds of the sizes a sweep may ask for (the jobs' own limits apply on top).
MAX_VOCAB, MAX_BLOCK, MAX_PATHS = 10_000, 64, 64
SWEEP_KEYS = ("name", "exact", "time_limit", "memory_limit_mb", "batch")
#: Most jobs one child process runs one after the other (``batch``).
MAX_BATCH = 10_000
INSTANCE_KEYS = ("family", "vocab", "block", "seeds")
#: Instance key kept among the knobs (and in the ``knobs`` column), never passed to a family:
#: build with this block length, then keep the first ``block`` levels.
TRUNCATE = "truncate_from"
VERIFIER_KEYS = ("name", "paths", "drafting", "route", "sampling", "draft_sampling", "shape",
                 "block")
OPTIMUM_KEYS = ("problem", "paths", "drafting", "sampling", "draft_sampling", "shape", "block")
MEASURE_KEYS = ("name", "block")
PROBLEMS = ("direct", "node-budget", "multipath", "coupling", "selection", "tree",
            "multidraft-l1")
#: Per-instance measures (`spectheory.toy_models.mean_divergence`): a ``[[measures]]`` row.
MEASURES = ("tv", "kl")
TOP_KEYS = ("sweep", "instances", "verifiers", "optima", "measures")


def _check_shapes(data: dict) -> None:
    """``[sweep]`` one table, the others arrays of tables (``[[instances]]``): another TOML type
    was walked key by key or letter by letter (``[verifiers] name = 'token'`` read as a table
    whose key is 'n'), or raised deep in the reader."""
    if "sweep" in data and not isinstance(data["sweep"], dict):
        raise OptionError(f"sweep must be one table, [sweep], not "
                          f"{_toml_type(data['sweep'])}")
    for key in TOP_KEYS[1:]:
        if key in data and not (isinstance(data[key], list)
                                and all(isinstance(t, dict) for t in data[key])):
            raise OptionError(f"{key} must be an array of tables, [[{key}]] (one per entry), "
                              f"not {_toml_type(data[key])}")


def _toml_type(value) -> str:
    """The TOML type of a value with its article ("a table", "an array of values")."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array of " + ("values" if not all(isinstance(v, dict) for v in value)
                                 else "tables")
    return {str: "a string", bool: "a boolean", int: "an integer", float: "a float"}.get(
        type(value), f"a {type(value).__name__}")
#: The name of a sweep whose file gives none (``[sweep] name``).
DEFAULT_NAME = "sweep"


def _refuse_unknown(table: dict, allowed, where: str, free: bool = False) -> None:
    if free:
        return
    for key in table:
        if key not in allowed:
            near = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; valid keys: {', '.join(allowed)}"
            raise OptionError(f"unknown key {key!r} in {where}{hint}")


#: The knobs of the built-in random family (`spectheory.random_instance`).
RANDOM_KNOBS = ("alpha", "context_independent", "denominator")


def _check_knobs(family: str, knobs: dict, where: str) -> None:
    """Knobs a built-in family does not take are refused when the file is read (with the
    nearest one), and so are a toy family's knob values that are NaN or infinite (no toy knob
    takes one: each job would fail); a ``module:function`` family's knobs are the user's."""
    import inspect

    if family == "random":
        allowed = RANDOM_KNOBS
    elif family.startswith("toy:"):
        import importlib

        toy = importlib.import_module("spectheory.toy_models")  # loaded by name, not imported
        name = family[4:]
        if name not in toy.FAMILIES:
            near = difflib.get_close_matches(name, list(toy.FAMILIES), n=1)
            raise OptionError(f"{where}: unknown toy family {name!r}"
                              + (f"; did you mean 'toy:{near[0]}'?" if near else
                                 f"; choose from {', '.join(sorted(toy.FAMILIES))}"))
        params = inspect.signature(toy.FAMILIES[name].make).parameters
        allowed = tuple(k for k in params if k not in ("vocab_size", "block_length", "seed"))
        for k, vals in knobs.items():
            for v in vals:
                if isinstance(v, float) and not math.isfinite(v):
                    raise OptionError(f"{where} {k} = {v} is not a finite number (every knob "
                                      f"of {family} is one; each job would fail)")
    else:
        return
    for k in sorted(knobs):
        if k not in allowed and k != TRUNCATE:
            near = difflib.get_close_matches(k, list(allowed) + list(INSTANCE_KEYS), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise OptionError(f"unknown key {k!r} in {where} (family {family} takes "
                              f"{', '.join(allowed) or 'no knobs'}){hint}")


#: Parametric rules by name (`spectheory.verifiers.params`): ``lenient(0.8)``,
#: ``threshold(3/10)``, ``typical(0.09, 0.3)``, ``additive(1/4)``, ``static-ensemble(1/3)``, ...
_CONTRAST = re.compile(r"^(lenient|threshold|typical|additive|multiplicative|top-m|"
                       r"entropy-threshold|trtllm-relaxed|sglang-threshold|cactus|"
                       r"static-ensemble|static-ensemble-greedy)\(([^()]*)\)$")


def resolve_verifier(name: str):
    """A verifier name as `spectheory.engine.analysis.analyze` takes it: the spec of a parametric
    rule (``lenient(l)``, ``threshold(theta)``, ``typical(epsilon, delta)``, ``additive(eps)``,
    ``multiplicative(lam)``, ``top-m(m)``, ``entropy-threshold(beta)``,
    ``trtllm-relaxed(k, delta)``, ``sglang-threshold(ts, ta)``, ``cactus(delta)``,
    ``static-ensemble(w)``, ``static-ensemble-greedy(w)``; the numbers read exactly by
    [`parse_name`][spectheory.verifiers.params.parse_name], refused in one
    [`OptionError`][spectheory.runtime.errors.OptionError] line naming the rule, the parameter
    and its range), else the name itself."""
    from ..registry import registered
    from ..verifiers.params import parse_name

    registered()  # loads the built-in verifiers, which register the parametric rules
    spec = parse_name(name) if isinstance(name, str) else None
    return name if spec is None else spec


def _samplings(value, where: str) -> list[str]:
    """Sampling parameters (`spectheory.inputs.processing.parse_sampling`'s string form), checked now
    and kept in their canonical string ("" for none)."""
    from ..inputs.processing import parse_sampling

    out = []
    for v in _listed(value, where):
        if not isinstance(v, str):
            raise OptionError(f"{where} must be strings such as \"temperature=0,top_k=2\"; "
                              f"got {v!r}")
        sp = parse_sampling(v) if v else None
        out.append("" if sp is None or sp.identity else str(sp))
    return out


def _listed(value, where: str) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise OptionError(f"{where} is an empty list")
    return values


def _no_duplicates(values: list, where: str) -> None:
    """Refuse an instance axis that lists a value twice (``vocab = [3, 3, 3]`` would compute one
    job three times, and a plot's mean over the rows would weight it thrice). A method listed
    twice (a name, K, shape) is one job already (`_methods`), so method axes are not checked."""
    seen: dict = {}  # (kind, value) -> the first value: one look-up per value (not a scan)
    for v in values:
        kind = "bool" if isinstance(v, bool) else "str" if isinstance(v, str) else "other"
        try:
            key = (kind, v)
            hash(key)
        except TypeError:  # a list or table: compared by its text
            key = (kind, "unhashable", repr(v))
        if key not in seen:
            seen[key] = v
            continue
        w = seen[key]
        raise OptionError(f"{where} lists {v!r} more than once"
                          + (f" (as {w!r})" if repr(v) != repr(w) else "")
                          + "; each value of an axis is one column of the grid")


def _ints(value, where: str, lo: int, hi: int) -> list[int]:
    out = []
    for v in _listed(value, where):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise OptionError(f"{where} must be integers in [{lo}, {hi}]; got {v!r}")
        out.append(v)
    return out


def _shapes(value, where: str) -> list[str]:
    """Tree shapes as branching factors ("2,2,1"), in their canonical string."""
    out = []
    for v in _listed(value, where):
        parts = v.replace(" ", "").split(",") if isinstance(v, str) else []
        if not parts or not all(p.isascii() and p.isdigit() and len(p) <= 30 and int(p) >= 1
                                for p in parts) \
                or len(parts) > MAX_BLOCK:
            raise OptionError(f"{where} must be branching factors such as \"2,2,1\"; got {v!r}")
        out.append(",".join(str(int(p)) for p in parts))
    return out


def shape_depth(shape: str) -> int:
    """The depth (block length) of a tree shape ``"2,2,1"``."""
    return len(shape.split(","))


def shape_paths(shape: str) -> int:
    """The number of leaves (root-to-leaf paths) of a tree shape ``"2,2,1"``."""
    n = 1
    for b in shape.split(","):
        n *= int(b)
    return n


def _strings(value, where: str) -> list[str]:
    out = []
    for v in _listed(value, where):
        if not isinstance(v, str) or not v:
            raise OptionError(f"{where} must be non-empty strings; got {v!r}")
        out.append(v)
    return out


@dataclass(frozen=True)
class Job:
    """One row of a sweep: an instance (family, V, L, seed, knobs) and either a verifier
    (``kind="verifier"``: name, K, drafting, route) or an LP optimum (``kind="optimum"``:
    problem, K, drafting), with the sweep's arithmetic and limits."""

    family: str
    vocab: int
    block: int
    seed: int
    knobs: tuple  # sorted (name, value) pairs
    kind: str
    name: str
    paths: int
    drafting: str | None
    route: str | None
    exact: bool
    time_limit: float
    memory_limit_mb: int
    sampling: str = ""  # target rows processed (spectheory.inputs.processing), "" for none
    draft_sampling: str = ""
    shape: str = ""  # a draft tree's branching factors ("2,2,1"), "" for K paths

    def inputs(self) -> dict:
        """The inputs that determine the result (limits excluded), as plain JSON values."""
        return {"family": self.family, "vocab": self.vocab, "block": self.block,
                "seed": self.seed, "knobs": json.dumps(dict(self.knobs), sort_keys=True),
                "kind": self.kind, "name": self.name, "paths": self.paths,
                "drafting": self.drafting or "", "route": self.route or "",
                "exact": self.exact, "sampling": self.sampling,
                "draft_sampling": self.draft_sampling, "shape": self.shape}

    def key(self) -> str:
        """Content hash of the inputs and the spectheory version: the cache key."""
        from .. import __version__

        inputs = self.inputs()
        for k in ("sampling", "draft_sampling", "shape"):  # keys of earlier tables stay valid
            if not inputs[k]:
                del inputs[k]
        sources = self.sources()
        if sources:  # a grammar file or a user module edited: another key, never a stale row
            inputs["sources"] = sources
        text = json.dumps({"v": __version__, **inputs}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


    def sources(self) -> dict:
        """Digests of what the job's inputs name by reference: the content of a grammar file of
        its sampling parameters, and the source file of a ``module:function`` family or
        verifier (a module that one imports is not followed: after editing it, run with
        ``--no-cache``)."""
        out = {}
        for key in ("sampling", "draft_sampling"):
            text = getattr(self, key)
            if "grammar=" in text:
                out[key] = _grammar_digest(text)
        for what, name in (("family", self.family), ("name", self.name)):
            module = name.partition(":")[0]
            if ":" in name and all(part.isidentifier() for part in module.split(".")):
                digest = _module_digest(module)
                if digest:
                    out[what] = digest
        return out


#: Digests by (what, file, its modification time and size): a file edited between two runs of
#: one process (a notebook, a test) is read again.
_DIGESTS: dict = {}


def _file_digest(path: str, read) -> str | None:
    import os

    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return None
    key = (path, st.st_mtime_ns, st.st_size, read.__name__)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(read(path)).hexdigest()[:16]
    return _DIGESTS[key]


def _grammar_digest(text: str) -> str:
    """The grammar of the sampling parameters ``text``, by content (its automaton as JSON)."""
    from ..inputs.processing import parse_sampling

    path = _GRAMMAR_PATHS.get(text)
    if path is None:
        sp = parse_sampling(text)
        path = _GRAMMAR_PATHS[text] = getattr(sp.grammar, "path", "")

    def grammar_json(p, text=text) -> bytes:
        sp = parse_sampling(text)
        return json.dumps(sp.grammar.to_dict(), sort_keys=True).encode()

    return _file_digest(path, grammar_json) or "unreadable"


_GRAMMAR_PATHS: dict = {}


def _module_digest(module: str) -> str | None:
    """The source file of ``module``, by content (None: a module without one; the job then
    reports what importing it does)."""
    import importlib.util
    import os
    import sys

    def source(p) -> bytes:
        with open(p, "rb") as fh:
            return fh.read()

    here = os.getcwd()
    added = here not in sys.path
    if added:  # where import_user looks too
        sys.path.append(here)
    try:
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec is not None else None
    except Exception:  # noqa: BLE001 - a parent package that raises: the job reports it
        origin = None
    finally:
        if added:
            sys.path.remove(here)
    if not origin or not os.path.isfile(origin):
        return None
    return _file_digest(origin, source)


@dataclass
class SweepConfig:
    """A parsed sweep file (`load_config`); `expand` lists its jobs."""

    name: str = DEFAULT_NAME
    exact: bool = False
    time_limit: float = 600.0
    memory_limit_mb: int = 4096
    batch: int = 1
    instances: list = field(default_factory=list)
    verifiers: list = field(default_factory=list)
    optima: list = field(default_factory=list)
    measures: list = field(default_factory=list)
    source: str = ""
    #: The instances of its ``module:function`` families, built when the file was read
    #: (`spectheory.sweep.families.check_calls`), for its jobs.
    prebuilt: dict = field(default_factory=dict, repr=False, compare=False)


#: Largest sweep file read, in bytes: a sweep file is a few tables (the largest grid,
#: `MAX_JOBS` jobs, takes a few kilobytes to write).
MAX_FILE_BYTES = 16 * 2**20


def _read_bounded(path: Path) -> str:
    """The text of a sweep file, refused before it is read when it is a regular file over
    `MAX_FILE_BYTES`, and read at most that far from anything else (a pipe, a device such as
    ``/dev/zero``)."""
    import os
    import stat

    try:
        from ..runtime.files import open_input

        with open_input(path) as fh:  # a FIFO with no writer reads as empty, not a hang
            st = os.fstat(fh.fileno())
            if stat.S_ISDIR(st.st_mode):
                raise OptionError(f"cannot read sweep file {path}: it is a folder")
            if stat.S_ISREG(st.st_mode) and st.st_size > MAX_FILE_BYTES:
                raise OptionError(f"sweep file {path} is {st.st_size:,} bytes, over the "
                                  f"{MAX_FILE_BYTES // 2**20} MiB a sweep file may have; is it "
                                  "the right file?")
            data = fh.read(MAX_FILE_BYTES + 1)
    except IsADirectoryError:
        raise OptionError(f"cannot read sweep file {path}: it is a folder") from None
    except OSError as exc:
        raise OptionError(f"cannot read sweep file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise OptionError(f"sweep file {path} holds more than {MAX_FILE_BYTES // 2**20} MiB "
                          "(it is not a regular file, and no sweep file is that long); is it "
                          "the right file?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OptionError(f"sweep file {path} is not UTF-8 text (byte {exc.start}); save it "
                          "as UTF-8 TOML") from None


def _routes(table: dict, shapes: list, where: str) -> list:
    """A verifier table's ``route`` list ([None]: the default), each one of the routes of its
    engine (a tree shape's, `spectheory.engine.drafttrees.ROUTES`, else the chain engine's,
    `spectheory.engine.plan.ROUTES`): an unknown route fails every job of the table, so it is
    refused when the file is read."""
    if "route" not in table:
        return [None]
    routes = _strings(table["route"], f"{where} route")
    if shapes != [""]:
        from ..engine.drafttrees import ROUTES as known
    else:
        from ..engine.plan import ROUTES as known
    for r in routes:
        if r not in known:
            near = difflib.get_close_matches(r, known, n=1)
            raise OptionError(f"{where} route {r!r} is not one of {', '.join(known)}"
                              + (f"; did you mean {near[0]!r}?" if near else ""))
    return routes


def load_config(text_or_path) -> SweepConfig:
    """Parse a sweep from TOML text or a path; a malformed file raises
    `spectheory.runtime.errors.OptionError` naming the key."""
    import os

    if not isinstance(text_or_path, (str, os.PathLike)):  # None, bytes, a dict: tomllib's own
        raise OptionError(f"load_config takes TOML text or a path, not "  # errors, unnamed
                          f"{type(text_or_path).__name__}")
    text = text_or_path
    source = "<text>"
    if isinstance(text_or_path, os.PathLike) or ("\n" not in text_or_path and (
            text_or_path.endswith(".toml") or os.path.lexists(text_or_path))):
        path = Path(text_or_path)  # a folder given as a path was read as TOML text
        source = str(path)
        text = _read_bounded(path)
    # a byte-order mark, as an editor on Windows writes it (an instance file's JSON reader
    # skips it; TOML called it an invalid statement at line 1)
    text = text.removeprefix("\ufeff")
    try:
        data = _toml.loads(text)
    except _toml.TOMLDecodeError as exc:
        raise OptionError(f"sweep file {source} is not valid TOML: {exc}") from None
    except RecursionError:
        raise OptionError(f"sweep file {source}: arrays or tables nested too deeply") from None
    _refuse_unknown(data, TOP_KEYS, "the sweep file")
    _check_shapes(data)
    head = data.get("sweep", {})
    _refuse_unknown(head, SWEEP_KEYS, "[sweep]")
    cfg = SweepConfig(source=source)
    name = head.get("name", DEFAULT_NAME)  # a label (messages, the output's record)
    if not isinstance(name, str) or not name.strip() or len(name) > 200 or \
            not name.isprintable():
        raise OptionError(f"[sweep] name = {_repr_cut(name, 60)} must be a non-empty printable string of "
                          "at most 200 characters")
    cfg.name = name
    if not isinstance(head.get("exact", False), bool):
        raise OptionError("[sweep] exact must be true or false")
    cfg.exact = head.get("exact", False)
    limit = head.get("time_limit", cfg.time_limit)
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 < limit <= 604800:
        raise OptionError(f"[sweep] time_limit must be seconds in (0, 604800]; got {limit!r}")
    cfg.time_limit = float(limit)
    memory = head.get("memory_limit_mb", cfg.memory_limit_mb)
    cfg.memory_limit_mb = 0 if memory == 0 and not isinstance(memory, bool) else \
        _ints(memory, "[sweep] memory_limit_mb (0 for none)", 64, 1 << 20)[0]
    cfg.batch = _ints(head.get("batch", cfg.batch), "[sweep] batch", 1, MAX_BATCH)[0]
    for i, table in enumerate(data.get("instances", [])):
        where = f"[[instances]] #{i + 1}"
        if "family" not in table:
            raise OptionError(f"{where} needs a family (\"random\", \"toy:NAME\" or module:function)")
        for key in ("vocab", "block"):
            if key not in table:
                raise OptionError(f"{where} needs {key}")
        _refuse_unknown(table, INSTANCE_KEYS, where, free=True)
        knobs = {k: _listed(v, f"{where} {k}") for k, v in table.items() if k not in INSTANCE_KEYS}
        for k, values in knobs.items():
            for v in values:
                if not isinstance(v, (int, float, str, bool)):
                    raise OptionError(f"{where} knob {k} must be numbers or strings; got {v!r}")
        families = _strings(table["family"], f"{where} family")
        for family in families:
            _check_knobs(family, knobs, where)
        blocks = _ints(table["block"], f"{where} block", 1, MAX_BLOCK)
        if TRUNCATE in knobs:
            knobs[TRUNCATE] = _ints(knobs[TRUNCATE], f"{where} {TRUNCATE}", max(blocks),
                                    MAX_BLOCK)
        entry = {
            "family": families,
            "vocab": _ints(table["vocab"], f"{where} vocab", 2, MAX_VOCAB),
            "block": blocks,
            "seeds": _ints(table.get("seeds", 0), f"{where} seeds", 0, 2 ** 63 - 1),
            "knobs": knobs,
        }
        for axis in ("family", "vocab", "block", "seeds"):
            _no_duplicates(entry[axis], f"{where} {axis}")
        for k, values in knobs.items():
            _no_duplicates(values, f"{where} {k}")
        cfg.instances.append(entry)
    for i, table in enumerate(data.get("verifiers", [])):
        where = f"[[verifiers]] #{i + 1}"
        _refuse_unknown(table, VERIFIER_KEYS, where)
        if "name" not in table:
            raise OptionError(f"{where} needs a name")
        shapes = _tree_keys(table, where)
        cfg.verifiers.append({
            "name": _strings(table["name"], f"{where} name"),
            "paths": _ints(table.get("paths", 1), f"{where} paths", 1, MAX_PATHS),
            "shape": shapes,
            "block": _blocks(table, where),
            "drafting": _strings(table["drafting"], f"{where} drafting")
            if "drafting" in table else [None],
            "route": _routes(table, shapes, where),
            "sampling": _samplings(table.get("sampling", ""), f"{where} sampling"),
            "draft_sampling": _samplings(table.get("draft_sampling", ""),
                                         f"{where} draft_sampling"),
        })
    for i, table in enumerate(data.get("optima", [])):
        where = f"[[optima]] #{i + 1}"
        _refuse_unknown(table, OPTIMUM_KEYS, where)
        problems = _strings(table.get("problem", "direct"), f"{where} problem")
        for p in problems:
            if p not in PROBLEMS:
                near = difflib.get_close_matches(p, PROBLEMS, n=1)
                raise OptionError(f"{where} problem {p!r} is not one of {', '.join(PROBLEMS)}"
                                  + (f"; did you mean {near[0]!r}?" if near else ""))
        shapes = _tree_keys(table, where)
        if (shapes != [""]) != (problems == ["tree"]):
            raise OptionError(f"{where}: problem \"tree\" needs a shape, and a shape is for "
                              "problem \"tree\" alone (one [[optima]] table for it)")
        cfg.optima.append({
            "problem": problems,
            "paths": _ints(table.get("paths", 1), f"{where} paths", 1, MAX_PATHS),
            "shape": shapes,
            "block": _blocks(table, where),
            "drafting": _strings(table.get("drafting", "iid"), f"{where} drafting"),
            "sampling": _samplings(table.get("sampling", ""), f"{where} sampling"),
            "draft_sampling": _samplings(table.get("draft_sampling", ""),
                                         f"{where} draft_sampling"),
        })
    for i, table in enumerate(data.get("measures", [])):
        where = f"[[measures]] #{i + 1}"
        _refuse_unknown(table, MEASURE_KEYS, where)
        if "name" not in table:
            raise OptionError(f"{where} needs a name ({' or '.join(MEASURES)})")
        names = _strings(table["name"], f"{where} name")
        for n in names:
            if n not in MEASURES:
                near = difflib.get_close_matches(n, MEASURES, n=1)
                raise OptionError(f"{where} name {n!r} is not one of {', '.join(MEASURES)}"
                                  + (f"; did you mean {near[0]!r}?" if near else ""))
        cfg.measures.append({"name": names, "block": _blocks(table, where)})
    if not cfg.instances:
        raise OptionError("the sweep has no [[instances]] table")
    if not cfg.verifiers and not cfg.optima and not cfg.measures:
        raise OptionError("the sweep has no [[verifiers]], [[optima]] or [[measures]] table")
    n = count_jobs(cfg)
    if n > MAX_JOBS:
        raise OptionError(f"the sweep expands to {n:,} jobs, more than {MAX_JOBS:,}; "
                          "split it into several sweeps")
    check_methods(cfg)
    return cfg


# ----------------------------------------------------------------------------- read-time checks
#
# Every value a job would fail on whatever the instance is refused when the file is read, in one
# line naming the table, so that a sweep never runs a grid of jobs that all fail the same way.


def _module_found(module: str) -> bool:
    """Whether ``module`` can be imported (on ``sys.path`` or in the working folder, where
    [`import_user`][spectheory.runtime.errors.import_user] looks), without running it: only its
    parent packages are imported."""
    import importlib.util
    import os
    import sys

    try:
        if importlib.util.find_spec(module) is not None:
            return True
    except (ImportError, ValueError):
        return False
    except Exception:  # noqa: BLE001 - a parent package that raises: the job reports it
        return True
    here = os.getcwd()
    if here in sys.path:
        return False
    sys.path.append(here)
    try:
        return importlib.util.find_spec(module) is not None
    except Exception:  # noqa: BLE001
        return False
    finally:
        sys.path.remove(here)


def _check_user_name(text: str, where: str, what: str) -> None:
    """A ``module:function`` name: well formed, and its module found."""
    module, _, attr = text.partition(":")
    if not module or not attr or not all(p.isidentifier() for p in module.split(".")) \
            or not all(p.isidentifier() for p in attr.split(".")):
        raise OptionError(f"{where}: {what} {text!r} is not of the form module:function")
    if not _module_found(module):
        raise OptionError(f"{where}: {what} {text!r}: no module named {module!r} in the working "
                          "folder or on sys.path")


def _check_random_sizes(table: dict, where: str) -> None:
    """Refuse a random-family table every instance of which is over the size limit of
    `spectheory.random_instance` (its V^(L+1) target table; each job failed on it, and the
    folder was written with the failed rows). A table with some instance within the limit runs:
    the others are failed rows, as any job that fails."""
    from ..runtime.errors import SizeLimitError
    from ..runtime.sizes import check_size

    knobs = table["knobs"]
    first = None
    for V, L, independent, denominator in itertools.product(
            table["vocab"], table["block"], knobs.get("context_independent", [False]),
            knobs.get("denominator", [None])):
        if independent:  # one row for every prefix: no V^(L+1) table
            return
        try:
            check_size(V ** (L + 1), "random table instance", exact=bool(denominator),
                       formula=f"V^(L+1) = {V}^{L + 1}")
            return
        except SizeLimitError as exc:
            first = first or exc
    if first is not None:
        raise OptionError(f"{where}: every instance of the table is over the size limit, so each "
                          f"job would fail: {first}")


def _check_family(family: str, knobs: dict, where: str) -> None:
    from ..inputs.random_instances import MAX_DENOMINATOR, check_alpha

    if family == "random":
        for a in knobs.get("alpha", []):
            try:
                check_alpha(a, f"{where} alpha")
            except ValueError as exc:
                raise OptionError(str(exc)) from None
        for d in knobs.get("denominator", []):
            if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= MAX_DENOMINATOR:
                raise OptionError(f"{where} denominator must be integers in "
                                  f"[1, {MAX_DENOMINATOR:.0e}]; got {d!r}")
        for c in knobs.get("context_independent", []):
            if not isinstance(c, bool):
                raise OptionError(f"{where} context_independent must be true or false; "
                                  f"got {c!r}")
    elif family.startswith("toy:"):
        return
    elif ":" in family:
        _check_user_name(family, where, "family")
    else:
        raise OptionError(f"{where}: unknown family {family!r}: use \"random\", \"toy:NAME\" "
                          "or module:function")


def _check_toy(family: str, table: dict, exact: bool, where: str) -> None:
    """A toy family without a vocabulary size (two-token: V = 2) takes vocab = [2] only; under
    ``exact = true`` it must build exact rows: one with a ``denominator`` (rows rounded to
    multiples of 1/denominator; 1000 when the table gives none, as for ``random``) or
    two-token (exact unless ``exact = false``). The others' rows are floats (a softmax of
    logits, a power of probabilities, counts of a text), which every job would refuse as not
    summing to 1 in rationals."""
    import importlib
    import inspect

    toy = importlib.import_module("spectheory.toy_models")  # loaded by name, not imported
    params = inspect.signature(toy.FAMILIES[family[4:]].make).parameters
    if "vocab_size" not in params and set(table["vocab"]) != {2}:
        raise OptionError(f"{where}: {family} has vocabulary 2 (it takes no vocab_size); give "
                          f"vocab = [2], not {sorted(table['vocab'])}")
    knobs = table["knobs"]
    _try_toy_knobs(toy.FAMILIES[family[4:]].make, params, family, table, where)
    if not exact or "denominator" in params:
        return
    if "exact" in params and False not in knobs.get("exact", [True]):
        return
    why = "exact = false" if "exact" in params else "its rows are floats"
    raise OptionError(f"{where}: family {family!r} under [sweep] exact = true: {why}, and every "
                      "job would refuse its rows as not summing to 1 in rationals; set [sweep] "
                      "exact = false, or use a family with a denominator knob (random, "
                      "toy:dirichlet, toy:mixture) or toy:two-token")


#: Knob combinations of a toy table built on reading (each on a small instance); past it,
#: each knob value with the other knobs at their first values.
TOY_KNOB_TRIES = 64


def _try_toy_knobs(make, params, family: str, table: dict, where: str) -> None:
    """Build the toy family on a small instance (its smallest vocabulary, at most 16 tokens, one
    draft) for the table's knob values, so that a value the family refuses (a text ``sigma``,
    ``eps = 2``, ``denominator = 0``: checked by the family before it builds anything, and not
    on the vocabulary) is refused in one line when the file is read instead of failing every
    job. Every combination up to `TOY_KNOB_TRIES` (ngram's ``draft_order`` is checked against
    its ``order``), else each value with the other knobs at their first."""
    import itertools

    from ..runtime.errors import SpectheoryError

    knobs = {k: v for k, v in table["knobs"].items() if k != TRUNCATE}
    size = {}
    if "vocab_size" in params:
        size["vocab_size"] = min(min(table["vocab"]), 16)
    if "block_length" in params:
        size["block_length"] = 1
    names = sorted(knobs)
    combos = list(itertools.islice(itertools.product(*(knobs[k] for k in names)),
                                   TOY_KNOB_TRIES + 1))
    if len(combos) > TOY_KNOB_TRIES:
        first = {k: knobs[k][0] for k in names}
        combos = [tuple({**first, k: v}[n] for n in names) for k in names for v in knobs[k]]
    for combo in combos:
        given = dict(zip(names, combo))
        try:
            make(**size, **given)
        except (SpectheoryError, ValueError, TypeError, ArithmeticError) as exc:
            shown = ", ".join(f"{k} = {_repr_cut(v, 40)}" for k, v in given.items())
            raise OptionError(f"{where}: {family} refuses {shown}: {exc} (each job would "
                              "fail)") from None


def _check_verifier(name: str, paths: int, drafting, shape: str, where: str,
                    exact: bool = False) -> None:
    import warnings

    from ..registry import _REGISTRY, plan, registered
    from ..runtime.errors import SpectheoryError
    resolved = resolve_verifier(name)  # a parameterised contrast's numbers (OptionError)
    table = registered()  # loads the registry (and installed packages' verifiers)
    if isinstance(resolved, str) and resolved not in _REGISTRY:
        if ":" in resolved:
            _check_user_name(resolved, where, "verifier")
            return  # its kind (single- or K-path) is known once it is imported, in the job
        near = difflib.get_close_matches(resolved, list(table), n=1)
        raise OptionError(f"{where}: unknown verifier {name!r}"
                          + (f"; did you mean {near[0]!r}?" if near else
                             f"; choose from {', '.join(table)} or give module:function"))
    spec = resolved if not isinstance(resolved, str) else _REGISTRY[resolved]  # unlisted too
    if exact and not spec.exact:  # every job refused it as the engine does
        raise OptionError(f"{where}: verifier {name!r} has a float law only (no exact rational "
                          "mode), and [sweep] exact = true: every job would fail; set exact = "
                          "false or list it in a sweep of its own")
    if shape:
        from ..engine.drafttrees import TREE_DRAFTING

        if drafting is not None and drafting not in TREE_DRAFTING:
            raise OptionError(f"{where}: unknown tree drafting scheme {drafting!r}; choose from "
                              f"{', '.join(TREE_DRAFTING)}")
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a scheme the verifier is not designed for: a note
            plan(resolved, paths, drafting)
    except SpectheoryError as exc:
        raise OptionError(f"{where}: {' '.join(str(exc).split())}") from None
    from ..engine.plan import MAX_PATHS as ENGINE_PATHS

    if paths > ENGINE_PATHS:
        raise OptionError(f"{where}: verifier {name!r} with paths = {paths}: the K-path engine "
                          f"takes 1..{ENGINE_PATHS} (it counts the K! orderings of a joint "
                          "outcome in int64); every job would fail")


def _check_optimum(problem: str, drafting, shape: str, exact: bool, where: str) -> None:
    from ..registry import DRAFTING

    if shape:
        from ..engine.drafttrees import TREE_DRAFTING

        schemes = TREE_DRAFTING
    elif problem == "multidraft-l1":
        schemes = ("iid", "norep")
    else:
        schemes = DRAFTING
    if drafting is not None and drafting not in schemes:
        raise OptionError(f"{where}: drafting scheme {drafting!r} is not one of "
                          f"{', '.join(schemes)} for problem {problem!r}")
    if exact and problem == "multipath":
        raise OptionError(f"{where}: the multipath LP relaxation is solved in float64 only; "
                          "set [sweep] exact = false or use problem \"direct\"")


#: The optima whose LP enumerates joint outcomes of K paths: K in 1..the engine's MAX_PATHS (the
#: K! orderings counted in int64), as the verifiers; the relaxation and the closed form take K
#: up to the sweep's `MAX_PATHS`.
K_PATH_PROBLEMS = ("direct", "selection")


def _check_optimum_paths(problem: str, paths: list, where: str) -> None:
    from ..engine.plan import MAX_PATHS as ENGINE_PATHS

    if problem in K_PATH_PROBLEMS and max(paths) > ENGINE_PATHS:
        raise OptionError(f"{where}: problem {problem!r} takes paths 1..{ENGINE_PATHS} (its LP "
                          f"counts the K! orderings of a joint outcome in int64); paths "
                          f"{max(paths)} would fail in every job (\"multipath\" and "
                          f"\"multidraft-l1\" take up to {MAX_PATHS})")


def _check_exact_sampling(table: dict, where: str) -> None:
    from ..inputs.processing import SamplingError, parse_sampling

    for key in ("sampling", "draft_sampling"):
        for text in table.get(key, [""]):
            sp = parse_sampling(text) if text else None
            try:  # the reason is the parameters' own: a temperature, or a penalty on logits
                if sp is not None:
                    sp.exact_power()
            except SamplingError as exc:
                raise OptionError(f"{where} {key} {text!r} under [sweep] exact = true: "
                                  f"{exc}".replace("use float mode (exact=False, no --exact)",
                                                   "use exact = false")) from None


def _check_sampling_tokens(table: dict, cfg: SweepConfig, runs_on: set, where: str) -> None:
    """A stop token or logit_bias token of a table's sampling at or past every vocabulary it
    runs on: every job of the table would fail on it."""
    from ..inputs.processing import parse_sampling

    vocabs = {V for t in cfg.instances if set(t["block"]) & runs_on for V in t["vocab"]}
    vocab = max(vocabs)
    for key in ("sampling", "draft_sampling"):
        for text in table.get(key, [""]):
            sp = parse_sampling(text) if text else None
            if sp is None:
                continue
            size = getattr(sp.grammar, "vocab_size", None)
            if size is not None and size not in vocabs:  # a grammar fits one vocabulary
                raise OptionError(f"{where} {key} {text!r}: the grammar has {size} tokens, and "
                                  f"no instance it runs on has V = {size} (vocabularies: "
                                  f"{sorted(vocabs)}): every job would fail")
            ids = [*sp.stop_token_ids, *(t for t, _, _ in sp.logit_bias)]
            if ids and max(ids) >= vocab:
                raise OptionError(f"{where} {key} {text!r} names token {max(ids)}, outside "
                                  f"every vocabulary it runs on (at most 0..{vocab - 1}): "
                                  "every job would fail")


def check_methods(cfg: SweepConfig) -> None:
    """Refuse, when the file is read, what every job of a table would fail on: a random family's
    knob out of range (alpha NaN, negative or infinite), an unknown family, a
    ``module:function`` whose module is not found, an unknown verifier or drafting scheme, a
    verifier that cannot run on the paths asked for, an inexact temperature under
    ``exact = true``, the multipath relaxation in exact mode, and a method table that matches
    no instance (a tree shape deeper than every block, a ``block`` restriction no instance has),
    or a sweep with no job; then a ``module:function`` family that, called for the sweep's
    parameter points (`spectheory.sweep.families.check_calls`, in guarded child processes),
    raises, exits, crashes, passes a limit or returns no ``Instance`` of the sizes asked for."""
    blocks = {L for t in cfg.instances for L in t["block"]}
    for i, table in enumerate(cfg.instances):
        for family in table["family"]:
            _check_family(family, table["knobs"], f"[[instances]] #{i + 1}")
            if family == "random":
                _check_random_sizes(table, f"[[instances]] #{i + 1}")
            if family.startswith("toy:"):
                _check_toy(family, table, cfg.exact, f"[[instances]] #{i + 1}")
    tables = [("verifiers", t) for t in cfg.verifiers] + [("optima", t) for t in cfg.optima] \
        + [("measures", t) for t in cfg.measures]
    count = {"verifiers": 0, "optima": 0, "measures": 0}
    for kind, table in tables:
        count[kind] += 1
        where = f"[[{kind}]] #{count[kind]}"
        runs_on = blocks if table["block"] is None else blocks & table["block"]
        if not runs_on:
            raise OptionError(f"{where}: block {sorted(table['block'])} matches no instance "
                              f"(the instances' blocks are {sorted(blocks)})")
        for shape in table.get("shape", [""]):
            if shape and shape_depth(shape) not in runs_on:
                raise OptionError(f"{where}: shape {shape!r} has depth {shape_depth(shape)} "
                                  f"(a tree's depth is its block length), but no instance has "
                                  f"block {shape_depth(shape)} (blocks: {sorted(runs_on)})")
        if cfg.exact and kind != "measures":
            _check_exact_sampling(table, where)
        if kind != "measures":
            _check_sampling_tokens(table, cfg, runs_on, where)
        if kind == "verifiers":
            for name, K, drafting, shape in itertools.product(
                    table["name"], table["paths"], table["drafting"], table["shape"]):
                _check_verifier(name, shape_paths(shape) if shape else K, drafting, shape,
                                where, cfg.exact)
        elif kind == "optima":
            for problem, drafting, shape in itertools.product(
                    table["problem"], table["drafting"], table["shape"]):
                _check_optimum(problem, drafting, shape, cfg.exact, where)
                _check_optimum_paths(problem, table["paths"], where)
                if problem == "multidraft-l1" and runs_on != {1}:
                    raise OptionError(f"{where}: problem \"multidraft-l1\" is the optimum at "
                                      "block length 1; restrict it with block = [1] (the "
                                      f"instances' blocks are {sorted(runs_on)})")
    if count_jobs(cfg) == 0:
        raise OptionError("the sweep expands to no job")
    from .families import check_calls  # the families' calls, last: they run user code

    cfg.prebuilt = check_calls(family_calls(cfg))


def family_calls(cfg: SweepConfig) -> list:
    """The distinct calls of the ``module:function`` families the sweep's jobs make
    ([`FamilyCall`][spectheory.sweep.families.FamilyCall]), in grid order: one per instance point
    (``truncate_from``: one per point built, for all its block lengths)."""
    from .families import FamilyCall, knob_key

    calls, seen = [], set()
    for i, table in enumerate(cfg.instances):
        one = SweepConfig(instances=[table])
        for family, V, L, seed, knobs in _instances(one):
            if family == "random" or family.startswith("toy:"):
                continue
            built = dict(knobs).get(TRUNCATE, L)
            rest = tuple((k, v) for k, v in knobs if k != TRUNCATE)
            key = (family, V, built, seed, knob_key(rest))
            if key not in seen:
                seen.add(key)
                calls.append(FamilyCall(family, V, built, seed, rest, cfg.time_limit,
                                        cfg.memory_limit_mb, f"[[instances]] #{i + 1}"))
    return calls


def _tree_keys(table: dict, where: str) -> list[str]:
    """A method table's tree shapes ([""]: K paths); a shape takes no ``paths`` (its leaves are
    its paths) and no sampling (the tree engine takes none)."""
    if "shape" not in table:
        return [""]
    for key in ("paths", "sampling", "draft_sampling"):
        if key in table:
            raise OptionError(f"{where}: {key} does not go with shape (a tree's paths are its "
                              "leaves; the tree engine takes no sampling parameters)")
    return _shapes(table["shape"], f"{where} shape")


def _blocks(table: dict, where: str):
    """The block lengths a method table is restricted to (None: every instance)."""
    if "block" not in table:
        return None
    return frozenset(_ints(table["block"], f"{where} block", 1, MAX_BLOCK))


def _instances(cfg: SweepConfig):
    for table in cfg.instances:
        names = sorted(table["knobs"])
        for family, V, L, seed, *values in itertools.product(
                table["family"], table["vocab"], table["block"], table["seeds"],
                *(table["knobs"][k] for k in names)):
            yield family, V, L, seed, tuple(zip(names, values))


def _methods(cfg: SweepConfig, block: int):
    """The distinct methods that run on an instance of block length ``block``, in table order
    (a method listed twice is one job)."""
    seen = set()
    for method, blocks in _all_methods(cfg):
        shape = method[-1]
        if blocks is not None and block not in blocks:
            continue
        if shape and shape_depth(shape) != block:
            continue  # a tree's depth is its block length
        if method not in seen:
            seen.add(method)
            yield method


def _all_methods(cfg: SweepConfig):
    for table in cfg.verifiers:
        for name, K, drafting, route, sp, dp, shape in itertools.product(
                table["name"], table["paths"], table["drafting"], table["route"],
                table["sampling"], table["draft_sampling"], table["shape"]):
            if shape:
                K = shape_paths(shape)
            yield ("verifier", name, K, drafting, route, sp, dp, shape), table["block"]
    for table in cfg.optima:
        for problem, K, drafting, sp, dp, shape in itertools.product(
                table["problem"], table["paths"], table["drafting"], table["sampling"],
                table["draft_sampling"], table["shape"]):
            if problem in ("node-budget", "coupling"):
                if K != 1:
                    continue  # single-path problems
                drafting = None
            if problem == "multipath":
                drafting = None  # a relaxation for i.i.d. drafts
            if shape:
                K = shape_paths(shape)
            yield ("optimum", problem, K, drafting, None, sp, dp, shape), table["block"]
    for table in cfg.measures:
        for name in table["name"]:
            yield ("measure", name, 1, None, None, "", "", ""), table["block"]


def count_jobs(cfg: SweepConfig) -> int:
    n = 0
    for table in cfg.instances:
        m = len(table["family"]) * len(table["vocab"]) * len(table["seeds"])
        for values in table["knobs"].values():
            m *= len(values)
        n += m * sum(sum(1 for _ in _methods(cfg, L)) for L in table["block"])
    return n


def expand(cfg: SweepConfig) -> list[Job]:
    """The sweep's jobs, in grid order (instances outer, methods inner)."""
    per_block: dict[int, list] = {}
    jobs = []
    for family, V, L, seed, knobs in _instances(cfg):
        if L not in per_block:
            per_block[L] = list(_methods(cfg, L))
        jobs += [Job(family, V, L, seed, knobs, kind, name, K, drafting, route, cfg.exact,
                     cfg.time_limit, cfg.memory_limit_mb, sp, dp, shape)
                 for kind, name, K, drafting, route, sp, dp, shape in per_block[L]]
    return jobs


def example_config() -> str:
    """A small sweep (12 jobs, a few seconds): token, block and GBV against the direct LP's
    optimum on random prefix-dependent instances."""
    return '''# spectheory sweep example: spectheory sweep example.toml --out sweep-out
[sweep]
name = "example"
exact = false
time_limit = 120          # seconds per job
memory_limit_mb = 2048    # resident memory per job

[[instances]]
family = "random"         # spectheory.random_instance (prefix-dependent Dirichlet rows)
vocab = [2, 3]
block = [2]
seeds = [0]
alpha = [1.0]

[[verifiers]]
name = ["token", "block"]

[[verifiers]]
name = ["gbv"]
paths = [2]

[[optima]]
problem = "direct"        # the best any valid K-path verifier can do
paths = [1, 2]

[[optima]]
problem = "node-budget"
paths = [1]
'''
