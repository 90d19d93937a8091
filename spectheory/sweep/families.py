"""The ``module:function`` instance families of a sweep, called when the sweep file is read.

[`check_calls`][spectheory.sweep.families.check_calls] calls a user's family for each of the
sweep's parameter points (`spectheory.sweep.config.family_calls`) in guarded child processes
(`spectheory.sweep.guard`), under the sweep's time and memory limits, before any job runs: a
call that raises, exits, crashes, passes a limit or returns anything but an ``Instance`` of the
sizes asked for refuses the sweep in one line. The instances built go to the jobs
(`PREBUILT`), which do not call the family again.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass

from ..runtime.errors import OptionError, SpectheoryError
from .guard import describe_error, run_batches


def _cells(inst) -> int:
    """The table entries of an instance's two models."""
    return sum(int(t.size) for m in (inst.target, inst.draft) for t in getattr(m, "tables", ()))


#: The instances of the ``module:function`` families built when the sweep file was read
#: (`check_calls`), by ``(family, vocab, block, seed, knobs)``: the runner installs those of the
#: sweep it runs (`spectheory.sweep.runner.run_sweep`), so that the jobs forked from it use them
#: instead of calling the family again.
PREBUILT: dict = {}
#: Most table entries the instances kept from the read-time calls may hold together (2^24
#: float64 numbers: 128 MB); an instance beyond it is built again by its jobs.
PREBUILT_CELLS = 1 << 24


def knob_key(items) -> tuple:
    """Knobs as a key: sorted ``(name, type, value)`` (``1`` and ``1.0`` are two calls)."""
    return tuple((k, type(v).__name__, v) for k, v in sorted(items))


def _call_family(family: str, vocab: int, block: int, seed: int, knobs: dict):
    """A ``module:function`` family's instance: the call guarded (one line for an exception or
    an exit), the result an `Instance` of the vocabulary and block length asked for."""
    from ..inputs.instances import Instance
    from ..runtime.errors import UserCodeError, call_user, import_user

    fn = import_user(family, "instance family")
    if not callable(fn):
        raise OptionError(f"family {family!r} is {type(fn).__name__}, not a function")
    what = f"family {describe_call(family, vocab, block, seed, knobs)}"
    inst = call_user(fn, vocab_size=vocab, block_length=block, seed=seed, what=what, **knobs)
    if not isinstance(inst, Instance):
        raise UserCodeError(f"{what} returned {_short_type(inst)}, not an Instance")
    if (inst.vocab_size, inst.block_length) != (vocab, block):
        raise UserCodeError(f"{what} returned an Instance with vocab_size={inst.vocab_size!r}, "
                            f"block_length={inst.block_length!r}, not the sizes asked for (the "
                            "row would be labelled with the wrong sizes)")
    from ..inputs.instances import check_instance
    from ..runtime.errors import InstanceError

    # rows that are no distribution fail every job of the table: refused when read, checked
    # afresh (an instance the package made is marked checked, and a family may have changed
    # its tables since)
    object.__setattr__(inst, "_checked", False)
    try:
        return check_instance(inst, what)
    except InstanceError as exc:
        raise UserCodeError(f"{what} returned an Instance the engines cannot compute with: "
                            f"{exc}") from exc


def _short_type(obj) -> str:
    text = type(obj).__name__
    if obj is None or isinstance(obj, (int, float, str, bool)):
        shown = repr(obj)
        text += f" {shown[:40]}{'...' if len(shown) > 40 else ''}"
    return text


def describe_call(family: str, vocab: int, block: int, seed: int, knobs) -> str:
    """``module:function(vocab_size=V, block_length=L, seed=s, knob=value, ...)``, each value
    cut at 40 characters."""
    def short(v) -> str:
        text = repr(v)
        return text if len(text) <= 40 else text[:37] + "..."

    items = knobs.items() if isinstance(knobs, dict) else knobs
    args = [f"vocab_size={vocab}", f"block_length={block}", f"seed={seed}"] + \
        [f"{k}={short(v)}" for k, v in sorted(items)]
    return f"{family}({', '.join(args)})"


@dataclass(frozen=True)
class FamilyCall:
    """One call of a ``module:function`` family, made when the sweep file is read
    (`check_calls`) in a guarded child process under the sweep's
    limits: ``block`` is the block length asked of the family (``truncate_from`` where the
    table gives it), ``knobs`` its sorted ``(name, value)`` pairs without ``truncate_from``."""

    family: str
    vocab: int
    block: int
    seed: int
    knobs: tuple
    time_limit: float
    memory_limit_mb: int
    where: str

    def key(self) -> tuple:
        """The `PREBUILT` key of the instance."""
        return (self.family, self.vocab, self.block, self.seed, knob_key(self.knobs))

    def describe(self) -> str:
        return describe_call(self.family, self.vocab, self.block, self.seed, self.knobs)


def call_family(call: FamilyCall) -> dict:  # pragma: no cover - runs in the forked child
    """The outcome of one read-time family call: ``{"status": "ok", "instance": PICKLE}`` (None
    when the instance is over `PREBUILT_CELLS` or cannot be pickled: its jobs build it again),
    else ``{"status": "failed", "error": ONE LINE}``."""
    try:
        inst = _call_family(call.family, call.vocab, call.block, call.seed, dict(call.knobs))
    except SpectheoryError as exc:
        return {"status": "failed", "error": describe_error(exc)}
    except MemoryError:
        return {"status": "memory", "error": "out of memory (MemoryError)"}
    except Exception as exc:  # noqa: BLE001 - import_user and the checks raise one-line errors
        return {"status": "failed", "error": describe_error(exc)}
    try:
        # pickled here: an object that cannot travel (or whose class the parent cannot load)
        # stays here, and its jobs build it again
        sent = pickle.dumps(inst) if _cells(inst) <= PREBUILT_CELLS else None
    except Exception:  # noqa: BLE001 - the tables of a user's Instance may be anything
        sent = None
    return {"status": "ok", "instance": sent}


def _family_failure(call, out: dict) -> str:
    """What a read-time family call that did not return an instance did, in words."""
    import re

    error = " ".join(str(out.get("error", "")).split())
    status = out["status"]
    if status == "failed":  # the call's own line (call_user's names the call) or the import's
        return error if error.startswith("family ") else f"family {call.family!r}: {error}"
    if status == "timeout":
        did = f"did not return within the sweep's time_limit of {call.time_limit:g} s"
    elif status == "memory":
        did = f"went over the sweep's memory_limit_mb of {call.memory_limit_mb} MB"
    else:
        code = re.search(r"exit code (-?[0-9]+)", error)
        did = "ended its process" + (f" (exit code {code.group(1)})" if code else "") \
            + " before returning"
    return f"family {call.describe()} {did}"


def check_calls(calls: list, workers: int | None = None) -> dict:
    """Make the family ``calls`` ([`FamilyCall`][spectheory.sweep.families.FamilyCall]s, one per
    parameter point: `spectheory.sweep.config.family_calls`) in guarded child processes
    (``workers`` at once, default the cores, at most 8), each under its time and memory limits,
    before any job runs; refuse the sweep with one
    [`OptionError`][spectheory.runtime.errors.OptionError] line naming the table, the family, its
    arguments and what it did when a call raises, exits (``sys.exit``, ``os._exit``), crashes,
    passes a limit, or returns something that is not an ``Instance`` of the sizes asked for
    (the first such call to end; the others are stopped).

    Returns the instances by [`FamilyCall.key`][spectheory.sweep.families.FamilyCall.key] (up to
    `PREBUILT_CELLS` table entries in all), for the jobs (`PREBUILT`)."""
    prebuilt: dict = {}
    if not calls:
        return prebuilt
    if workers is None:
        workers = max(1, min(os.cpu_count() or 1, 8))
    workers = min(workers, len(calls))
    kept = [0]

    def done(call, out: dict) -> None:
        if out["status"] != "ok":
            raise OptionError(f"{call.where}: {_family_failure(call, out)}")
        if out.get("instance") is None:
            return
        try:
            inst = pickle.loads(out["instance"])
            cells = _cells(inst)
        except Exception:  # noqa: BLE001 - the jobs build it again
            return
        if kept[0] + cells <= PREBUILT_CELLS:
            kept[0] += cells
            prebuilt[call.key()] = inst

    run_batches(calls, workers, done, -(-len(calls) // workers), call_family)
    return prebuilt
