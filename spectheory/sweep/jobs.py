"""One sweep job: build the instance, compute the verifier's exact law or the LP optimum, and
return the row's outputs. Runs inside a child process (`spectheory.sweep.runner`)."""

from __future__ import annotations

import importlib
import json
import shlex
from pathlib import Path

from ..runtime.errors import OptionError, SpectheoryError

#: The outputs of a row (inputs are `Job.inputs`), in table order.
OUTPUTS = ("status", "block_efficiency", "expected_accepted", "tv_to_target", "tau_pmf",
           "value_exact", "method", "error", "notes", "seconds", "peak_rss_mb")


def build_instance(family: str, vocab: int, block: int, seed: int, knobs: dict, exact: bool):
    """The instance of a job. ``random``: `spectheory.random_instance` (knobs alpha,
    context_independent, denominator); ``toy:NAME``: `spectheory.toy_models.make_instance`;
    ``module:function``: a user's ``f(vocab_size=, block_length=, seed=, **knobs)``."""
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
        return toy.make_instance(name, vocab_size=vocab, block_length=block, seed=seed, **knobs)
    if ":" in family:
        from ..runtime.errors import call_user, import_user

        fn = import_user(family, "instance family")
        if not callable(fn):
            raise OptionError(f"family {family!r} is {type(fn).__name__}, not a function")
        inst = call_user(fn, vocab_size=vocab, block_length=block, seed=seed, what=family,
                         **knobs)
        from ..inputs.instances import Instance

        if not isinstance(inst, Instance):
            raise OptionError(f"family {family!r} returned {type(inst).__name__}, not an "
                              "Instance")
        return inst
    raise OptionError(f"unknown family {family!r}: use \"random\", \"toy:NAME\" or "
                      "module:function")


def warm_up(jobs) -> None:
    """Import what the jobs need once in the parent, so that forked children start warm."""
    from ..engine import analysis  # noqa: F401
    from ..runtime._lazy import torch
    from ..registry import get_verifier

    torch.zeros(1)  # loads torch

    for job in jobs:
        if job.kind == "verifier":
            try:
                get_verifier(job.name, multi_path=job.paths > 1)
            except Exception:  # noqa: BLE001 - the job itself reports a bad name
                pass
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
    if job.kind == "verifier":
        from ..engine.analysis import analyze

        res = analyze(inst, job.name, exact=job.exact, paths=job.paths,
                      drafting=job.drafting, route=job.route or "auto", laws=False,
                      sampling=job.sampling or None, draft_sampling=job.draft_sampling or None)
        out = {"block_efficiency": float(res.block_efficiency),
               "expected_accepted": float(res.expected_accepted),
               "tv_to_target": float(res.tv_to_target),
               "tau_pmf": json.dumps([_encode(v, job.exact) for v in res.tau_pmf]),
               "value_exact": str(res.block_efficiency) if job.exact else "",
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
    else:
        res = lp.node_budget_lp(inst, exact=job.exact)
    return {"block_efficiency": float(res.optimum), "expected_accepted": float(res.optimum) - 1,
            "tv_to_target": "", "tau_pmf": "",
            "value_exact": str(res.optimum) if job.exact else "",
            "method": f"{job.name} LP" + (" (exact certificate)" if job.exact else "")}


def command(job, config_path: str | None = None) -> str:
    """A shell command that reproduces the row: the CLI chain for the built-in random family,
    else ``spectheory sweep CONFIG --only KEY``."""
    knobs = dict(job.knobs)
    if job.family == "random" and set(knobs) <= {"alpha", "context_independent", "denominator"}:
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


def describe_error(exc: BaseException) -> str:
    """One line for a failed job."""
    if isinstance(exc, SpectheoryError):
        return " ".join(str(exc).split())
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
