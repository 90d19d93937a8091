"""A sweep's TOML file, checked strictly, and its expansion into jobs.

```toml
[sweep]
name = "example"
exact = false            # rationals (needs rational instances: random with denominator)
time_limit = 60          # seconds per job
memory_limit_mb = 2048   # resident memory per job

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
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..runtime.errors import OptionError

try:  # Python 3.11+
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore[no-redef]

#: Largest grid a sweep expands to (each job is a child process).
MAX_JOBS = 100_000
#: Bounds of the sizes a sweep may ask for (the jobs' own limits apply on top).
MAX_VOCAB, MAX_BLOCK, MAX_PATHS = 10_000, 64, 64
SWEEP_KEYS = ("name", "exact", "time_limit", "memory_limit_mb")
INSTANCE_KEYS = ("family", "vocab", "block", "seeds")
VERIFIER_KEYS = ("name", "paths", "drafting", "route", "sampling", "draft_sampling")
OPTIMUM_KEYS = ("problem", "paths", "drafting", "sampling", "draft_sampling")
PROBLEMS = ("direct", "node-budget", "multipath")
TOP_KEYS = ("sweep", "instances", "verifiers", "optima")


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


def _check_knobs(family: str, knobs: list, where: str) -> None:
    """Knobs a built-in family does not take are refused when the file is read (with the
    nearest one); a ``module:function`` family's knobs are the user's."""
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
    else:
        return
    for k in knobs:
        if k not in allowed:
            near = difflib.get_close_matches(k, list(allowed) + list(INSTANCE_KEYS), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise OptionError(f"unknown key {k!r} in {where} (family {family} takes "
                              f"{', '.join(allowed) or 'no knobs'}){hint}")


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


def _ints(value, where: str, lo: int, hi: int) -> list[int]:
    out = []
    for v in _listed(value, where):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise OptionError(f"{where} must be integers in [{lo}, {hi}]; got {v!r}")
        out.append(v)
    return out


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

    def inputs(self) -> dict:
        """The inputs that determine the result (limits excluded), as plain JSON values."""
        return {"family": self.family, "vocab": self.vocab, "block": self.block,
                "seed": self.seed, "knobs": json.dumps(dict(self.knobs), sort_keys=True),
                "kind": self.kind, "name": self.name, "paths": self.paths,
                "drafting": self.drafting or "", "route": self.route or "",
                "exact": self.exact, "sampling": self.sampling,
                "draft_sampling": self.draft_sampling}

    def key(self) -> str:
        """Content hash of the inputs and the spectheory version: the cache key."""
        from .. import __version__

        inputs = self.inputs()
        for k in ("sampling", "draft_sampling"):  # keys of earlier tables stay valid
            if not inputs[k]:
                del inputs[k]
        text = json.dumps({"v": __version__, **inputs}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class SweepConfig:
    """A parsed sweep file (`load_config`); `expand` lists its jobs."""

    name: str = "sweep"
    exact: bool = False
    time_limit: float = 600.0
    memory_limit_mb: int = 4096
    instances: list = field(default_factory=list)
    verifiers: list = field(default_factory=list)
    optima: list = field(default_factory=list)
    source: str = ""


def load_config(text_or_path) -> SweepConfig:
    """Parse a sweep from TOML text or a path; a malformed file raises
    `spectheory.runtime.errors.OptionError` naming the key."""
    text = text_or_path
    source = "<text>"
    if isinstance(text_or_path, Path) or ("\n" not in str(text_or_path)
                                          and str(text_or_path).endswith(".toml")):
        path = Path(text_or_path)
        source = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise OptionError(f"cannot read sweep file {path}: {exc.strerror or exc}") from None
    try:
        data = _toml.loads(text)
    except _toml.TOMLDecodeError as exc:
        raise OptionError(f"sweep file {source} is not valid TOML: {exc}") from None
    _refuse_unknown(data, TOP_KEYS, "the sweep file")
    head = data.get("sweep", {})
    _refuse_unknown(head, SWEEP_KEYS, "[sweep]")
    cfg = SweepConfig(source=source)
    cfg.name = str(head.get("name", "sweep"))
    if not isinstance(head.get("exact", False), bool):
        raise OptionError("[sweep] exact must be true or false")
    cfg.exact = head.get("exact", False)
    limit = head.get("time_limit", cfg.time_limit)
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 < limit <= 604800:
        raise OptionError(f"[sweep] time_limit must be seconds in (0, 604800]; got {limit!r}")
    cfg.time_limit = float(limit)
    cfg.memory_limit_mb = _ints(head.get("memory_limit_mb", cfg.memory_limit_mb),
                                "[sweep] memory_limit_mb", 64, 1 << 20)[0]
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
            _check_knobs(family, sorted(knobs), where)
        cfg.instances.append({
            "family": families,
            "vocab": _ints(table["vocab"], f"{where} vocab", 2, MAX_VOCAB),
            "block": _ints(table["block"], f"{where} block", 1, MAX_BLOCK),
            "seeds": _ints(table.get("seeds", 0), f"{where} seeds", 0, 2 ** 63 - 1),
            "knobs": knobs,
        })
    for i, table in enumerate(data.get("verifiers", [])):
        where = f"[[verifiers]] #{i + 1}"
        _refuse_unknown(table, VERIFIER_KEYS, where)
        if "name" not in table:
            raise OptionError(f"{where} needs a name")
        cfg.verifiers.append({
            "name": _strings(table["name"], f"{where} name"),
            "paths": _ints(table.get("paths", 1), f"{where} paths", 1, MAX_PATHS),
            "drafting": _strings(table["drafting"], f"{where} drafting")
            if "drafting" in table else [None],
            "route": _strings(table["route"], f"{where} route") if "route" in table else [None],
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
        cfg.optima.append({
            "problem": problems,
            "paths": _ints(table.get("paths", 1), f"{where} paths", 1, MAX_PATHS),
            "drafting": _strings(table.get("drafting", "iid"), f"{where} drafting"),
            "sampling": _samplings(table.get("sampling", ""), f"{where} sampling"),
            "draft_sampling": _samplings(table.get("draft_sampling", ""),
                                         f"{where} draft_sampling"),
        })
    if not cfg.instances:
        raise OptionError("the sweep has no [[instances]] table")
    if not cfg.verifiers and not cfg.optima:
        raise OptionError("the sweep has no [[verifiers]] or [[optima]] table")
    n = count_jobs(cfg)
    if n > MAX_JOBS:
        raise OptionError(f"the sweep expands to {n:,} jobs, more than {MAX_JOBS:,}; "
                          "split it into several sweeps")
    return cfg


def _instances(cfg: SweepConfig):
    for table in cfg.instances:
        names = sorted(table["knobs"])
        for family, V, L, seed, *values in itertools.product(
                table["family"], table["vocab"], table["block"], table["seeds"],
                *(table["knobs"][k] for k in names)):
            yield family, V, L, seed, tuple(zip(names, values))


def _methods(cfg: SweepConfig):
    seen = set()
    for method in _all_methods(cfg):
        if method not in seen:  # a method listed twice is one job
            seen.add(method)
            yield method


def _all_methods(cfg: SweepConfig):
    for table in cfg.verifiers:
        for name, K, drafting, route, sp, dp in itertools.product(
                table["name"], table["paths"], table["drafting"], table["route"],
                table["sampling"], table["draft_sampling"]):
            yield "verifier", name, K, drafting, route, sp, dp
    for table in cfg.optima:
        for problem, K, drafting, sp, dp in itertools.product(
                table["problem"], table["paths"], table["drafting"], table["sampling"],
                table["draft_sampling"]):
            if problem == "node-budget":
                if K != 1:
                    continue  # the node-budget LP is the single-path problem
                drafting = None
            if problem == "multipath":
                drafting = None  # a relaxation for i.i.d. drafts
            yield "optimum", problem, K, drafting, None, sp, dp


def count_jobs(cfg: SweepConfig) -> int:
    n_inst = 0
    for table in cfg.instances:
        m = len(table["family"]) * len(table["vocab"]) * len(table["block"]) * len(table["seeds"])
        for values in table["knobs"].values():
            m *= len(values)
        n_inst += m
    return n_inst * sum(1 for _ in _methods(cfg))


def expand(cfg: SweepConfig) -> list[Job]:
    """The sweep's jobs, in grid order (instances outer, methods inner)."""
    methods = list(_methods(cfg))
    return [Job(family, V, L, seed, knobs, kind, name, K, drafting, route, cfg.exact,
                cfg.time_limit, cfg.memory_limit_mb, sp, dp)
            for family, V, L, seed, knobs in _instances(cfg)
            for kind, name, K, drafting, route, sp, dp in methods]


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
