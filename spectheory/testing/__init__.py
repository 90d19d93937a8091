"""spectheory.testing: conformance checks for other people's verifiers and samplers.

Importable from any test suite:

* :func:`assert_lossless` / :func:`check_lossless_battery`: the exact law of a verifier on a
  battery of instances built to expose known bug classes (:mod:`spectheory.testing.battery`);
* :func:`check_sampler` / :func:`assert_sampler`: a sampler (canonical signature
  ``sampler(drafts [B, L], q [B, L, V], p [B, L+1, V], generator) -> (accepted [B], token [B])``)
  against the exact law, in ``law``, ``lossless`` or ``coins`` mode;
  :func:`check_proposal`: does a draft sampler sample from the q it hands the verifier;
* :mod:`spectheory.testing.mutants`: faithful replicas of lossiness bugs found in engines;
* :mod:`spectheory.testing.adapters`: engines' sampler layouts to the canonical signature;
* :mod:`spectheory.testing.strategies`: hypothesis strategies for instances;
* :mod:`spectheory.testing.vectors`: language-neutral test vectors.

Names are imported lazily, so ``import spectheory.testing`` stays cheap.
"""

from __future__ import annotations

import importlib

#: public name -> submodule that defines it
_EXPORTS = {
    "assert_lossless": "lossless",
    "check_lossless_battery": "lossless",
    "default_battery": "battery",
    "BatteryInstance": "battery",
    "make_instance": "battery",
    "check_sampler": "sampler",
    "assert_sampler": "sampler",
    "check_proposal": "sampler",
    "assert_proposal": "sampler",
    "make_sampler": "sampler",
    "SamplerReport": "sampler",
    "export_vectors": "vectors",
    "check_vectors": "vectors",
    "build_vector": "vectors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
        return getattr(module, name)
    if name in ("mutants", "adapters", "strategies", "battery", "lossless", "sampler", "vectors"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
