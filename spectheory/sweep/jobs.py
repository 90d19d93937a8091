"""One sweep job: build the instance, compute the verifier's exact law or the LP optimum, and
return the row's outputs. Runs inside a child process (`spectheory.sweep.runner`)."""

from __future__ import annotations

import importlib
import json
import shlex
from pathlib import Path

from ..runtime.errors import OptionError
from .config import _CONTRAST, TRUNCATE, resolve_verifier  # noqa: F401 - re-exported
from . import families
from .families import _call_family, _cells
from .guard import describe_error  # noqa: F401 - re-exported

#: The outputs of a row (inputs are `Job.inputs`), in table order. ``value``: a measure row's
#: value (`spectheory.sweep.config.MEASURES`).
OUTPUTS = ("status", "block_efficiency", "expected_accepted", "tv_to_target", "tau_pmf", "value",
           "value_exact", "method", "error", "notes", "seconds", "peak_rss_mb")

#: The instances built for ``truncate_from`` in this process, least recently used first, and the
#: most table entries they may hold together (2^24 float64 numbers: 128 MB).
_BUILT: dict = {}
_BUILT_CELLS = 1 << 24


def _deep_build(family: str, vocab: int, built: int, seed: int, knobs: dict, exact: bool):
    """The instance a ``truncate_from`` job truncates, built once per process for all its block
    lengths (a batch's jobs share it; the jobs never modify an instance)."""
    key = (family, vocab, built, seed, tuple(sorted(knobs.items())), exact)
    inst = _BUILT.pop(key, None)
    if inst is None:
        inst = build_instance(family, vocab, built, seed, knobs, exact)
    _BUILT[key] = inst  # the most recently used last
    total = sum(_cells(i) for i in _BUILT.values())
    while total > _BUILT_CELLS and len(_BUILT) > 1:
        total -= _cells(_BUILT.pop(next(iter(_BUILT))))
    return inst


def build_instance(family: str, vocab: int, block: int, seed: int, knobs: dict, exact: bool):
    """The instance of a job. ``random``: `spectheory.random_instance` (knobs alpha,
    context_independent, denominator); ``toy:NAME``: `spectheory.toy_models.make_instance`;
    ``module:function``: a user's ``f(vocab_size=, block_length=, seed=, **knobs)``. With the
    knob ``truncate_from = N`` the family builds block length N and the instance keeps its first
    ``block`` levels (the same models at every block length; the build is made once per process,
    `_deep_build`)."""
    if TRUNCATE in knobs:
        from dataclasses import replace

        knobs = dict(knobs)
        built = knobs.pop(TRUNCATE)
        inst = _deep_build(family, vocab, built, seed, knobs, exact)
        return replace(inst, block_length=int(block))
    if family == "random":
        from ..inputs.random_instances import random_instance

        allowed = {"alpha", "context_independent", "denominator"}
        unknown = set(knobs) - allowed
        if unknown:
            raise OptionError(f"family random has no knob {sorted(unknown)[0]!r}; knobs: "
                              f"{', '.join(sorted(allowed))}")
        if exact and "denominator" not in knobs:
            knobs = {**knobs, "denominator": 1000}
        return random_instance(vocab, block, seed, **knobs)
    if family.startswith("toy:"):
        # the toy families are an outer sub-package: loaded by name, never imported by the core
        toy = importlib.import_module("spectheory.toy_models")
        name = family[4:]
        if name not in toy.FAMILIES:
            raise OptionError(f"unknown toy family {name!r}; choose from "
                              f"{', '.join(sorted(toy.FAMILIES))}")
        import inspect

        params = inspect.signature(toy.FAMILIES[name].make).parameters
        if exact and "denominator" not in knobs and "denominator" in params:
            knobs = {**knobs, "denominator": 1000}  # exact rows, as for "random"
        if "vocab_size" in params:
            knobs = {**knobs, "vocab_size": vocab}
        elif vocab != 2:  # two-token: refused when the file is read
            raise OptionError(f"toy family {name!r} has vocabulary 2, not {vocab}")
        return toy.make_instance(name, block_length=block, seed=seed, **knobs)
    if ":" in family:
        inst = families.PREBUILT.get((family, vocab, block, seed,
                                      families.knob_key(knobs.items())))
        if inst is not None:  # called when the file was read (`call_family`), not again
            return inst
        return _call_family(family, vocab, block, seed, knobs)
    raise OptionError(f"unknown family {family!r}: use \"random\", \"toy:NAME\" or "
                      "module:function")


def needs_torch(job) -> bool:
    """Whether ``job`` may compute on torch; False only where it surely does not.

    Exact jobs compute on numpy arrays of Fractions (the LPs with numpy and scipy), and a
    measure on the toy family's numpy tables. A float LP is taken to need torch (it checks its
    optimum against verifiers' float laws, some on torch). A float verifier job without a draft
    tree runs on numpy exactly when [`float_backend`][spectheory.engine.plan.float_backend]
    picks numpy for its planned route (`analyze`'s own planning: `plan`, `resolve_route`) on
    its V^(L+1) sequences; a draft-tree job in float mode is taken to need torch. Where the
    instance is not built by the random or a toy family (a user's ``module:function`` may load
    torch), where rows are processed (``sampling``), where a knob may change the vocabulary, or
    where the planning raises, the answer is True: torch is then imported as before. A wrong
    False would only cost time (each child would import torch itself); results never depend
    on it."""
    if not (job.family == "random" or job.family.startswith("toy:")) or job.sampling \
            or job.draft_sampling or any(k == "vocab_size" for k, _ in job.knobs):
        return True
    if job.kind == "measure":
        return False
    if job.exact:
        return False
    if job.kind == "optimum":  # a float LP checks its optimum against verifiers' float laws
        return True
    if job.shape:
        return True
    try:
        from ..engine.plan import float_backend, resolve_route
        from ..registry import plan

        how = plan(resolve_verifier(job.name), job.paths, job.drafting)
        # `analyze` may trade the tree route for the enumeration (`_cheaper`); both compute
        # floats on torch, so the resolved route decides
        route = resolve_route(how, job.route or "auto", None)
        return float_backend(how, route, "cpu", "auto", False,
                             job.vocab ** (job.block + 1)) != "numpy"
    except Exception:  # noqa: BLE001 - the job itself reports a bad name or size
        return True


def warm_up(jobs) -> None:
    """Import what the jobs need once in the parent, so that forked children start warm; torch
    (about 1 s to import) only when some job may compute on it (`needs_torch`)."""
    import numpy.random  # noqa: F401 - the instance families draw with it

    from ..engine import analysis  # noqa: F401
    from ..runtime import threads  # noqa: F401 - the child sets its threads
    from ..runtime._lazy import torch
    from ..registry import get_verifier

    jobs = list(jobs)
    if any(needs_torch(job) for job in jobs):
        torch.zeros(1)  # loads torch

    for job in jobs:
        if job.kind == "verifier":
            try:
                get_verifier(resolve_verifier(job.name), multi_path=job.paths > 1)
                if job.shape:
                    importlib.import_module("spectheory.engine.drafttrees")
            except Exception:  # noqa: BLE001 - the job itself reports a bad name
                pass
        elif job.kind == "measure":
            importlib.import_module("spectheory.toy_models")
        else:
            importlib.import_module("spectheory.lp")
            importlib.import_module("scipy.optimize")  # HiGHS, loaded on the first solve
        if job.family.startswith("toy:"):
            importlib.import_module("spectheory.toy_models")


def _encode(value, exact: bool):
    return str(value) if exact else float(value)


def compute(job) -> dict:
    """The outputs of ``job`` (without status, timing and memory, which the runner adds)."""
    knobs = dict(job.knobs)
    inst = build_instance(job.family, job.vocab, job.block, job.seed, knobs, job.exact)
    if job.kind == "measure":
        toy = importlib.import_module("spectheory.toy_models")  # loaded by name, as the families
        return {"block_efficiency": "", "expected_accepted": "", "tv_to_target": "",
                "tau_pmf": "", "value": toy.mean_divergence(inst, job.name), "value_exact": "",
                "method": f"mean {job.name} divergence along the draft's paths"}
    if job.kind == "verifier" and job.shape:
        from ..engine.analysis import analyze_tree

        res = analyze_tree(inst, resolve_verifier(job.name), job.shape, job.drafting,
                           exact=job.exact, route=job.route or "auto")
        return {"block_efficiency": float(res.block_efficiency),
                "expected_accepted": float(res.expected_accepted),
                "tv_to_target": float(res.tv_to_target),
                "tau_pmf": json.dumps([_encode(v, job.exact) for v in res.tau_pmf]),
                "value": "", "value_exact": str(res.block_efficiency) if job.exact else "",
                "method": f"draft tree ({job.shape}), {res.extra['drafting']} drafting, "
                          f"{res.extra['route']} route"}
    if job.kind == "verifier":
        from ..engine.analysis import analyze

        res = analyze(inst, resolve_verifier(job.name), exact=job.exact, paths=job.paths,
                      drafting=job.drafting, route=job.route or "auto", laws=False,
                      sampling=job.sampling or None, draft_sampling=job.draft_sampling or None)
        out = {"block_efficiency": float(res.block_efficiency),
               "expected_accepted": float(res.expected_accepted),
               "tv_to_target": float(res.tv_to_target),
               "tau_pmf": json.dumps([_encode(v, job.exact) for v in res.tau_pmf]),
               "value": "", "value_exact": str(res.block_efficiency) if job.exact else "",
               "method": f"exact engine, {res.route} route"}
        return out
    if job.sampling or job.draft_sampling:  # the LP of the processed instance
        from ..inputs.processing import process_instance

        inst = process_instance(inst, job.sampling or None, job.draft_sampling or None,
                                job.exact)
    lp = importlib.import_module("spectheory.lp")  # outer sub-package, loaded by name
    if job.name == "direct":
        res = lp.direct_lp(inst, job.paths, exact=job.exact, drafting=job.drafting or "iid")
    elif job.name == "multipath":
        if job.exact:
            raise OptionError("the multipath LP relaxation is solved in float64 only")
        res = lp.multipath_lp(inst, paths=job.paths)
    elif job.name == "selection":
        res = lp.selection_lp(inst, job.paths, exact=job.exact, drafting=job.drafting or "iid")
    elif job.name == "tree":
        res = lp.tree_lp(inst, job.shape, job.drafting or "iid", exact=job.exact)
    elif job.name == "coupling":
        res = lp.coupling_bound(inst, exact=job.exact)
    elif job.name == "multidraft-l1":
        return _multidraft_l1(inst, job)
    else:
        res = lp.node_budget_lp(inst, exact=job.exact)
    what = {"coupling": "coupling bound (closed form)"}.get(job.name, f"{job.name} LP")
    return {"block_efficiency": float(res.optimum), "expected_accepted": float(res.optimum) - 1,
            "tv_to_target": "", "tau_pmf": "", "value": "",
            "value_exact": str(res.optimum) if job.exact else "",
            "method": what + (" (exact certificate)" if job.exact and job.name != "coupling"
                              else "")}


def _multidraft_l1(inst, job) -> dict:
    """1 + alpha*(p, q, K), the best valid K-path verifier at L = 1 (Hu et al., arXiv
    2502.18779), under i.i.d. drafts or drafts without replacement."""
    from ..bounds import optimal_acceptance
    from ..runtime.errors import InstanceError

    if inst.block_length != 1:
        raise InstanceError(f"the multidraft-l1 optimum is for block length 1; got "
                            f"L = {inst.block_length}")
    p, q = list(inst.target.level(0)[0]), list(inst.draft.level(0)[0])
    alpha = optimal_acceptance(p, q, job.paths, job.drafting or "iid")[0]
    opt = 1 + alpha if job.exact else 1.0 + float(alpha)
    return {"block_efficiency": float(opt), "expected_accepted": float(opt) - 1,
            "tv_to_target": "", "tau_pmf": "", "value": "",
            "value_exact": str(opt) if job.exact else "",
            "method": "multidraft-l1 closed form (Hu et al.)"}


def command(job, config_path: str | None = None) -> str:
    """A shell command that reproduces the row: the CLI chain for the built-in random family,
    else ``spectheory sweep CONFIG --only KEY``."""
    knobs = dict(job.knobs)
    cli = ((job.kind == "verifier" and not job.shape and _plain_name(job.name))
           or (job.kind == "optimum" and job.name in ("direct", "node-budget", "multipath")))
    if cli and job.family == "random" and \
            set(knobs) <= {"alpha", "context_independent", "denominator"}:
        if job.exact and "denominator" not in knobs:
            knobs["denominator"] = 1000
        make = ["spectheory", "instance", "random", "--vocab", str(job.vocab), "--block",
                str(job.block), "--seed", str(job.seed)]
        if "alpha" in knobs:
            make += ["--alpha", repr(float(knobs["alpha"]))]
        if knobs.get("context_independent"):
            make += ["--context-independent"]
        if "denominator" in knobs:
            make += ["--denominator", str(knobs["denominator"])]
        if job.kind == "verifier":
            run = ["spectheory", "exact", "inst.json", "--verifier", job.name, "--paths",
                   str(job.paths)]
            if job.drafting:
                run += ["--drafting", job.drafting]
            if job.sampling:
                run += ["--sampling", job.sampling]
            if job.draft_sampling:
                run += ["--draft-sampling", job.draft_sampling]
        elif job.sampling or job.draft_sampling:  # the lp command takes no sampling options
            where = shlex.quote(str(Path(config_path).resolve())) if config_path else "CONFIG"
            return f"spectheory sweep {where} --only {job.key()}"
        else:
            run = ["spectheory", "lp", "inst.json", "--problem", job.name]
            if job.name == "direct":
                run += ["--paths", str(job.paths), "--drafting", job.drafting or "iid"]
            elif job.name == "multipath":
                run += ["--paths", str(job.paths)]
        if job.exact:
            run += ["--exact"]
        return f"{shlex.join(make)} > inst.json && {shlex.join(run)}"
    where = shlex.quote(str(Path(config_path).resolve())) if config_path else "CONFIG"
    return f"spectheory sweep {where} --only {job.key()}"


def _plain_name(name: str) -> bool:
    """Whether a verifier name is one the ``spectheory exact`` command takes as it is (not a
    parameterised contrast)."""
    return _CONTRAST.match(name.replace(" ", "")) is None
