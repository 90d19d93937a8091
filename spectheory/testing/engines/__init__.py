"""Engines as the kit meets them: their call layouts and coin conventions as data, the presets
that adapt their samplers to the canonical signature, their own sampling paths, and ports of the
steps that are not Python or not importable here.

* [`layouts`][spectheory.testing.engines.layouts]:
  [`Layout`][spectheory.testing.engines.layouts.Layout] and
  [`CoinConvention`][spectheory.testing.engines.layouts.CoinConvention], the presets of vLLM V1,
  vLLM MRV2, SGLang and transformers, and
  [`engine_sampler`][spectheory.testing.engines.layouts.engine_sampler] /
  [`engine_coin_sampler`][spectheory.testing.engines.layouts.engine_coin_sampler];
* [`adapters`][spectheory.testing.engines.adapters]: engines' rejection samplers in their own
  layouts, ported, and adapted to the canonical signature (with their planted bugs);
* [`engine_sampling`][spectheory.testing.engines.engine_sampling]: sampling parameters through an
  engine's own processing path;
* [`ports`][spectheory.testing.engines.ports]: TensorRT-LLM, llama.cpp, TGI and mistral.rs.

Nothing here imports a check: the checks build on the engines.
"""
