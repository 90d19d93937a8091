"""spectheory: exact theory, LPs and verifiers for speculative decoding.

Core objects are plain arrays and pure functions:

* :mod:`spectheory.models` / :mod:`spectheory.instances`: conditional tables and the JSON format;
* :mod:`spectheory.verifiers`: one batched implementation per verifier, returning a
  :class:`spectheory.law.Law`;
* :mod:`spectheory.exact`: the exact law of a verifier's output over the sequence tree, in float64
  or exact rationals, and the losslessness checker;
* :mod:`spectheory.sampling`: one generic sampling step on top of a law.
"""

from .errors import InstanceError, SizeLimitError, SpectheoryError
from .exact import analyze, check_lossless, multi_iteration_law
from .instances import Instance, instance_from_dict, instance_to_dict, load_instance
from .law import Law
from .models import TableModel, context_independent
from .random_instances import random_instance
from .verifiers import SINGLE_PATH, block_verification, token_verification

__version__ = "0.1.0"

__all__ = [
    "Instance",
    "InstanceError",
    "Law",
    "SINGLE_PATH",
    "SizeLimitError",
    "SpectheoryError",
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
