"""spectheory.testing: conformance checks for other people's verifiers and samplers.

Importable from any test suite:

* [`assert_lossless`][spectheory.testing.lossless.assert_lossless] /
  [`check_lossless_battery`][spectheory.testing.lossless.check_lossless_battery]: the exact law of a
  verifier on a battery of instances built to expose known bug classes
  ([`spectheory.testing.battery`][spectheory.testing.battery]);
* [`check_sampler`][spectheory.testing.sampler.check_sampler] /
  [`assert_sampler`][spectheory.testing.sampler.assert_sampler]: a sampler (canonical signature
  ``sampler(drafts [B, L], q [B, L, V], p [B, L+1, V], generator) -> (accepted [B], token [B])``)
  against the exact law, in ``law``, ``lossless``, ``coins`` or ``coins-tau`` mode;
  [`check_proposal`][spectheory.testing.sampler.check_proposal]: does a draft sampler sample from
  the q it hands the verifier;
* [`check_tree_sampler`][spectheory.testing.tree.check_tree_sampler] /
  [`assert_tree_sampler`][spectheory.testing.tree.assert_tree_sampler]: a tree sampler (EAGLE,
  SGLang, SpecInfer trees) against the exact conditional law of its node rule, or losslessly;
  [`tree_engine_sampler`][spectheory.testing.tree_ports.tree_engine_sampler] wraps an engine's
  tree kernel;
* [`check_step`][spectheory.testing.step.check_step] /
  [`assert_step`][spectheory.testing.step.assert_step]: a whole draft-and-verify step against the
  (processed) target law, under stateless and stateful sampling parameters;
* [`check_seed_replay`][spectheory.testing.seeds.check_seed_replay] /
  [`check_batch_invariance`][spectheory.testing.seeds.check_batch_invariance]: seeded steps
  replay the seeded plain stream, spend their randomness per request and position, and do not
  depend on the other rows of a batch;
* [`sharp_rows`][spectheory.testing.sharp.sharp_rows] /
  [`kit_design`][spectheory.testing.sharp.kit_design]: the few draft rows that catch the bug
  kit's replicas within a small budget;
* [`spectheory.testing.mutants`][spectheory.testing.mutants]: faithful replicas of lossiness bugs
  found in engines;
* [`spectheory.testing.adapters`][spectheory.testing.adapters]: engines' sampler layouts to the
  canonical signature;
* [`spectheory.testing.layouts`][spectheory.testing.layouts]: engines' call layouts and coin
  conventions as data, and [`engine_sampler`][spectheory.testing.layouts.engine_sampler] /
  [`engine_coin_sampler`][spectheory.testing.layouts.engine_coin_sampler] that build the
  canonical sampler from them (presets for vLLM V1, vLLM MRV2, SGLang, transformers);
* [`spectheory.testing.strategies`][spectheory.testing.strategies]: hypothesis strategies for
  instances;
* [`spectheory.testing.vectors`][spectheory.testing.vectors]: language-neutral test vectors.

Names are imported lazily, so ``import spectheory.testing`` stays cheap.
"""

from __future__ import annotations

import importlib

#: public name -> submodule that defines it
_EXPORTS = {
    # the exact battery of a verifier's formula
    "assert_lossless": "lossless",
    "check_lossless_battery": "lossless",
    "default_battery": "battery",
    "BatteryInstance": "battery",
    "make_instance": "battery",
    # samplers (law, lossless, coins, coins-tau) and proposals
    "check_sampler": "sampler",
    "assert_sampler": "sampler",
    "check_proposal": "sampler",
    "assert_proposal": "sampler",
    "make_sampler": "sampler",
    "reference_coin_sampler": "sampler",
    "default_instances": "sampler",
    "default_proposal_rows": "sampler",
    "SamplerReport": "report",
    "DraftRows": "report",
    # tree samplers
    "check_tree_sampler": "tree",
    "assert_tree_sampler": "tree",
    "TreeSamplerReport": "tree",
    "default_tree_instances": "tree",
    "tree_engine_sampler": "tree_ports",
    # whole steps
    "check_step": "step",
    "assert_step": "step",
    "StepRequest": "step",
    "StepReport": "step",
    "vllm_v1_step": "step",
    "sglang_step": "step",
    "transformers_step": "step",
    "processed": "step",
    "processed_along": "step",
    # real engines run unmodified
    "check_hf_generate": "hf_generate",
    # seeds and batches
    "check_seed_replay": "seeds",
    "check_batch_invariance": "seeds",
    "sample_match_step": "seeds",
    "keyed_plain_step": "seeds",
    "SeedReport": "seeds",
    # sharp designs for slow kernels
    "sharp_rows": "sharp",
    "sharp_design": "sharp",
    "kit_design": "sharp",
    # test vectors
    "export_vectors": "vectors",
    "check_vectors": "vectors",
    "build_vector": "vectors",
    # engines' layouts
    "engine_sampler": "layouts",
    "engine_coin_sampler": "layouts",
}

#: Submodules reachable as attributes (``spectheory.testing.tree``) without an import line.
_SUBMODULES = ("adapters", "battery", "budget", "layouts", "lossless", "mutants", "report",
               "sampler", "seeds", "sharp", "stats", "step", "strategies", "tree",
               "tree_ports", "vectors", "hf_generate", "engine_ports")

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
        return getattr(module, name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | set(_SUBMODULES))
