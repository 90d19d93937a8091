"""spectheory: exact theory, LPs and verifiers for speculative decoding.

Core objects are plain arrays and pure functions:

* [`spectheory.models`][spectheory.models] / [`spectheory.instances`][spectheory.instances]:
  conditional tables and the JSON format;
* [`spectheory.verifiers`][spectheory.verifiers]: one batched implementation per verifier, returning
  a [`Law`][spectheory.law.Law];
* [`spectheory.registry`][spectheory.registry]: the one verifier protocol for 1 and K paths
  ([`VerifierSpec`][spectheory.registry.VerifierSpec], names, ``module:function``, entry points);
* [`spectheory.exact`][spectheory.exact]: the exact law of a verifier's output over the sequence
  tree, in float64 or exact rationals, for 1 or K paths, and the losslessness checker;
* [`spectheory.sampling`][spectheory.sampling]: one generic sampling step on top of a law;
* [`set_threads`][spectheory.threads.set_threads]: torch's CPU threads (default 1 on machines with
  at most 2 cores, or ``SPECTHEORY_THREADS``; see [`spectheory.threads`][spectheory.threads]);
  [`keep_freed_memory`][spectheory.allocator.keep_freed_memory]: let the C allocator reuse freed
  memory (large temporaries then do not page-fault; the command line does this; see
  [`spectheory.allocator`][spectheory.allocator]).
"""

import os as _os

from .errors import InstanceError, SizeLimitError, SpectheoryError

#: Public names and the submodule each lives in. They are imported on first use (PEP 562), so
#: ``import spectheory`` and the command line start without loading torch; an interrupt during
#: start-up then reaches the command line's handler (exit 130, one line) instead of a traceback.
_LAZY = {
    "LosslessReport": "exact", "analyze": "exact", "check_lossless": "exact",
    "multi_iteration_law": "exact",
    "Instance": "instances", "instance_from_dict": "instances", "instance_to_dict": "instances",
    "load_instance": "instances",
    "Law": "law", "LawError": "law",
    "TableModel": "models", "context_independent": "models",
    "random_instance": "random_instances",
    "VerifierSpec": "registry", "get_verifier": "registry", "plan": "registry",
    "register": "registry", "registered": "registry", "verifier": "registry",
    "sample_output": "sampling",
    "SINGLE_PATH": "verifiers", "block_verification": "verifiers",
    "token_verification": "verifiers",
    "set_threads": "threads", "default_threads": "threads",
    "keep_freed_memory": "allocator",
    "SamplingParams": "processing", "parse_sampling": "processing",
    "process_rows": "processing",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
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
    from .threads import set_threads as _set_threads

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
