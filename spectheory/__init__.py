"""spectheory: exact theory, LPs and verifiers for speculative decoding.

Core objects are plain arrays and pure functions:

* :mod:`spectheory.models` / :mod:`spectheory.instances`: conditional tables and the JSON format;
* :mod:`spectheory.verifiers`: one batched implementation per verifier, returning a
  :class:`spectheory.law.Law`;
* :mod:`spectheory.registry`: the one verifier protocol for 1 and K paths (:class:`VerifierSpec`,
  names, ``module:function``, entry points);
* :mod:`spectheory.exact`: the exact law of a verifier's output over the sequence tree, in float64
  or exact rationals, for 1 or K paths, and the losslessness checker;
* :mod:`spectheory.sampling`: one generic sampling step on top of a law;
* :func:`set_threads`: torch's CPU threads (default 1 on machines with at most 2 cores, or
  ``SPECTHEORY_THREADS``; see :mod:`spectheory.threads`); :func:`keep_freed_memory`: let the
  C allocator reuse freed memory (large temporaries then do not page-fault; the command line
  does this; see :mod:`spectheory.allocator`).
"""

import os as _os

from .errors import InstanceError, SizeLimitError, SpectheoryError
from .exact import LosslessReport, analyze, check_lossless, multi_iteration_law
from .instances import Instance, instance_from_dict, instance_to_dict, load_instance
from .law import Law, LawError
from .models import TableModel, context_independent
from .random_instances import random_instance
from .registry import VerifierSpec, get_verifier, plan, register, registered, verifier
from .sampling import sample_output
from .allocator import keep_freed_memory
from .threads import default_threads, set_threads
from .verifiers import SINGLE_PATH, block_verification, token_verification

__version__ = "0.1.0"

if _os.environ.get("SPECTHEORY_THREADS", "").strip():  # an explicit setting applies on import
    try:
        set_threads()
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
]
