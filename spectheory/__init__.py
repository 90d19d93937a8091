"""spectheory: exact theory, LPs and verifiers for speculative decoding.

Core objects are plain arrays and pure functions:

* [`spectheory.inputs`][spectheory.inputs]: conditional tables
  ([`models`][spectheory.inputs.models]), instances and their JSON format
  ([`instances`][spectheory.inputs.instances]), random instances, processed targets;
* [`spectheory.verifiers`][spectheory.verifiers]: one batched implementation per verifier, returning
  a [`Law`][spectheory.law.Law];
* [`spectheory.registry`][spectheory.registry]: the one verifier protocol for 1 and K paths
  ([`VerifierSpec`][spectheory.registry.VerifierSpec], names, ``module:function``, entry points);
* [`spectheory.engine`][spectheory.engine]: the exact law of a verifier's output over the sequence
  tree, in float64 or exact rationals, for 1 or K paths and draft trees, and the losslessness
  checker, in pipeline order (plan, route, law, output law and verdict);
* [`spectheory.sampling`][spectheory.sampling]: one generic sampling step on top of a law;
* [`spectheory.cli`][spectheory.cli]: the command line;
* [`spectheory.runtime`][spectheory.runtime]: errors, limits, the array backend and the process:
  [`set_threads`][spectheory.runtime.threads.set_threads]: torch's CPU threads (default 1 on
  machines with at most 2 cores, or ``SPECTHEORY_THREADS``; see
  [`spectheory.runtime.threads`][spectheory.runtime.threads]);
  [`keep_freed_memory`][spectheory.runtime.allocator.keep_freed_memory]: let the C allocator reuse
  freed memory (large temporaries then do not page-fault; the command line does this; see
  [`spectheory.runtime.allocator`][spectheory.runtime.allocator]).

The modules' old flat paths (``spectheory.engine.analysis``, ``spectheory.engine.drafttrees``, ...) still import
([`spectheory._moved`][spectheory._moved]).
"""

import os as _os

from . import _moved
from .runtime.errors import (InputError, InstanceError, OptionError, SizeLimitError,
                             SpectheoryError, TimeLimitError, TooFewSamplesError,
                             UserCodeError)

_moved.install()

#: Public names and the submodule each lives in. They are imported on first use (PEP 562), so
#: ``import spectheory`` and the command line start without loading torch; an interrupt during
#: start-up then reaches the command line's handler (exit 130, one line) instead of a traceback.
_LAZY = {
    "LosslessReport": "engine.lossless", "analyze": "engine.analysis",
    "check_lossless": "engine.lossless", "multi_iteration_law": "engine.analysis",
    "Instance": "inputs.instances", "instance_from_dict": "inputs.instances",
    "instance_to_dict": "inputs.instances", "load_instance": "inputs.instances",
    "Law": "law", "LawError": "law",
    "TableModel": "inputs.models", "context_independent": "inputs.models",
    "random_instance": "inputs.random_instances",
    "VerifierSpec": "registry", "get_verifier": "registry", "plan": "registry",
    "register": "registry", "registered": "registry", "verifier": "registry",
    "sample_output": "sampling",
    "SINGLE_PATH": "verifiers", "block_verification": "verifiers",
    "token_verification": "verifiers",
    "set_threads": "runtime.threads", "default_threads": "runtime.threads",
    "keep_freed_memory": "runtime.allocator",
    "SamplingParams": "inputs.processing", "parse_sampling": "inputs.processing",
    "process_rows": "inputs.processing",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None and f"{__name__}.{name}" in _moved.MOVED:  # an old module path
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if module is None:
        raise AttributeError(f"module 'spectheory' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

if _os.environ.get("SPECTHEORY_THREADS", "").strip():  # an explicit setting applies on import
    from .runtime.threads import set_threads as _set_threads

    try:
        _set_threads()
    except SpectheoryError:  # reported by the command line / the next set_threads() call
        pass

__all__ = [
    "Instance",
    "InstanceError",
    "Law",
    "LawError",
    "LosslessReport",
    "SINGLE_PATH",
    "SizeLimitError",
    "SpectheoryError",
    "InputError",
    "OptionError",
    "TimeLimitError",
    "TooFewSamplesError",
    "UserCodeError",
    "VerifierSpec",
    "get_verifier",
    "plan",
    "register",
    "registered",
    "sample_output",
    "set_threads",
    "keep_freed_memory",
    "default_threads",
    "verifier",
    "TableModel",
    "analyze",
    "block_verification",
    "check_lossless",
    "context_independent",
    "instance_from_dict",
    "instance_to_dict",
    "load_instance",
    "multi_iteration_law",
    "random_instance",
    "token_verification",
    "SamplingParams",
    "parse_sampling",
    "process_rows",
]
