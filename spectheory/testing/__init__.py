"""spectheory.testing: conformance checks for other people's verifiers and samplers.

Every public check, helper and preset is importable from here, ``from spectheory.testing import
check_sampler`` (names are imported on first use, so ``import spectheory.testing`` stays cheap).
The kit is laid out by role:

* [`checks`][spectheory.testing.checks], one module per mode:
  [`assert_lossless`][spectheory.testing.checks.lossless.assert_lossless] /
  [`check_lossless_battery`][spectheory.testing.checks.lossless.check_lossless_battery] (a
  verifier's exact law on a battery of instances built to expose known bug classes);
  [`check_sampler`][spectheory.testing.checks.sampler.check_sampler] /
  [`assert_sampler`][spectheory.testing.checks.sampler.assert_sampler] (a sampler,
  ``sampler(drafts [B, L], q [B, L, V], p [B, L+1, V], generator) -> (accepted [B], token [B])``,
  against the exact law in ``law``, ``lossless``, ``coins`` or ``coins-tau`` mode) and
  [`check_proposal`][spectheory.testing.checks.sampler.check_proposal] (does a draft sampler
  sample from the q it hands the verifier);
  [`check_tree_sampler`][spectheory.testing.checks.tree.check_tree_sampler] (EAGLE, SGLang,
  SpecInfer trees; [`tree_engine_sampler`][spectheory.testing.checks.tree_ports.tree_engine_sampler]
  wraps an engine's tree kernel); [`check_step`][spectheory.testing.checks.step.check_step] (a
  whole draft-and-verify step against the processed target law);
  [`check_seed_replay`][spectheory.testing.checks.seeds.check_seed_replay] /
  [`check_batch_invariance`][spectheory.testing.checks.seeds.check_batch_invariance];
  [`check_hf_generate`][spectheory.testing.checks.hf_generate.check_hf_generate] /
  [`check_mlx_generate`][spectheory.testing.checks.mlx_generate.check_mlx_generate] (real
  engines, unmodified); [`export_vectors`][spectheory.testing.checks.vectors.export_vectors]
  (language-neutral test vectors); hypothesis strategies
  ([`spectheory.testing.checks.strategies`][spectheory.testing.checks.strategies]);
* [`engines`][spectheory.testing.engines]: engines' call layouts and coin conventions as data,
  with [`engine_sampler`][spectheory.testing.engines.layouts.engine_sampler] /
  [`engine_coin_sampler`][spectheory.testing.engines.layouts.engine_coin_sampler] and the
  presets for vLLM V1, vLLM MRV2, SGLang and transformers; the adapters of engines' samplers
  to the canonical signature; ports of engines' steps;
* [`statistics`][spectheory.testing.statistics]: the checks' chi-square family, its power and
  a check sized to a time budget;
* [`designs`][spectheory.testing.designs]:
  [`sharp_rows`][spectheory.testing.designs.sharp.sharp_rows] /
  [`kit_design`][spectheory.testing.designs.sharp.kit_design], the few draft rows that catch the bug
  kit's replicas within a small budget;
* [`mutants`][spectheory.testing.mutants], the bug kit: faithful replicas of lossiness bugs
  found in engines (imported as a module, not flattened here);
* the kit's front-ends: ``spectheory check-sampler`` (``sampler_cli``), ``spectheory check-step``
  ([`step_cli`][spectheory.testing.step_cli]), ``spectheory vectors`` (``vectors_cli``) and the
  pytest plugin ([`pytest_plugin`][spectheory.testing.pytest_plugin]).

The namespace holds every name of the ``__all__`` of the modules in `_ROOMS`. A name that two of
them define as different objects is left in its modules (`_AMBIGUOUS` says which), except
``default_instances``, the sampler check's. The modules' paths from before the kit was laid out
by role that the documentation named (``spectheory.testing.sampler``,
``spectheory.testing.layouts``, ...) still import, as the same modules
([`spectheory._moved`][spectheory._moved]).
"""

from __future__ import annotations

import importlib

from .. import _moved

#: module (under spectheory.testing) -> the public names it gives the namespace
_ROOMS = {
    "checks.sampler": (
        "CONVENTIONS", "Cell", "CoinMismatch", "DraftRows", "MODES", "SamplerReport",
        "assert_proposal", "assert_sampler", "check_proposal", "check_sampler",
        "default_instances", "default_proposal_rows", "make_sampler",
        "reference_coin_sampler"),
    "checks.lossless": ("assert_lossless", "check_lossless_battery"),
    "checks.battery": (
        "BatteryInstance", "KINDS", "MAX_JOINT_DRAFTS", "default_battery", "make_instance"),
    "checks.strategies": ("instances",),
    "checks.tree": (
        "DEFAULT_SAMPLES", "DraftedTrees", "MAX_CALL_FLOATS", "MAX_DRAFT_OUTCOMES",
        "MAX_LAW_CELLS", "MAX_SAMPLES", "MAX_LOSSLESS_CELLS", "MAX_TREE_NODES",
        "TREE_MODES", "TreeSamplerReport", "assert_tree_sampler", "check_tree_sampler",
        "conditional_tree_law", "default_tree_instances", "draft_trees", "emitted_groups",
        "tied_instance", "tree_output_law"),
    "checks.tree_ports": (
        "EAGLE_POSTERIOR", "EAGLE_POSTERIOR_BUGS", "SGLANG_TREE", "SGLANG_TREE_BUGS",
        "TREE_LAYOUTS", "TreeLayout", "eagle_posterior_bug", "evaluate_posterior",
        "planted_bug_law", "planted_bug_tv", "sglang_tree_bug", "tree_engine_sampler",
        "tree_speculative_sampling_target_only"),
    "checks.step": (
        "INPUTS", "MAX_MODEL_FLOATS", "MAX_SECONDS", "MAX_STEPS", "MAX_STEP_CELLS",
        "PLACEHOLDER", "StepReport", "StepRequest", "TableLM", "assert_step", "check_step",
        "default_step_instances", "detection_power", "processed", "processed_along",
        "rows_as_probs", "sample_steps", "sglang_step", "target_sequence_law",
        "transformers_step", "vllm_v1_step"),
    "checks.seeds": (
        "DRAFT", "GlobalSeedEngine", "MAX_ROW_STEPS", "SCHEDULES", "SeedReport", "TARGET",
        "ZeroDraftAdvanceEngine", "check_batch_invariance", "check_seed_replay",
        "inverse_cdf", "keyed_plain_step", "keyed_uniform", "sample_match_step"),
    "checks.hf_generate": (
        "ASSISTANT_KEYS", "DEFAULT_ASSISTANT", "HANDED", "HFGenerateReport", "LAW_KEYS",
        "MAX_CELLS", "assisted_law", "check_hf_generate", "generate_law", "hf_models",
        "planted_raw_draft_logits", "shifted_law_instance", "stop_cells",
        "transformers_version"),
    "checks.mlx_generate": (
        "DEFAULTS", "LOOP_KEYS", "MLXGenerateReport", "PROCESSOR_KEYS",
        "REPETITION_CONTEXT", "SAMPLER_KEYS", "check_mlx_generate", "mlx_models",
        "mlx_versions", "planted_stale_cache"),
    "checks.vectors": (
        "BOUNDARY_MARGIN", "DEFAULT_DECISIONS", "MAX_VECTOR_DRAFTS", "SCHEMA",
        "build_vector", "check_file", "check_vectors", "default_verifiers", "export_vectors"),
    "engines.layouts": (
        "CoinConvention", "Layout", "EngineOutputError", "ROLES", "KIT_COINS",
        "VLLM_V1_COINS", "VLLM_MRV2_COINS", "SGLANG_COINS", "TRANSFORMERS_COINS",
        "TRTLLM_COINS", "LLAMA_CPP_COINS", "COIN_CONVENTIONS", "VLLM_V1", "VLLM_MRV2",
        "SGLANG_CHAIN", "TRANSFORMERS", "TRTLLM", "LLAMA_CPP", "PRESETS", "engine_sampler",
        "engine_coin_sampler", "get_layout", "describe", "pinned_torch_coins"),
    "engines.adapters": (
        "PORT_BUGS", "PLACEHOLDER_TOKEN_ID", "FLOAT64_COIN_STEP", "MRV2_COIN_MIN", "MRV2_COIN_MAX",
        "hf_sampler", "vllm_rejection_sample", "vllm_sample_recovered_tokens",
        "vllm_sampler", "vllm_coin_sampler", "vllm_mrv2_rejection_sample",
        "vllm_mrv2_sampler", "vllm_mrv2_coin_sampler", "sglang_chain_sample",
        "sglang_sampler", "sglang_coin_sampler", "flatten_drafts", "canonical_from_padded",
        "VLLM_GREEDY_TEMPERATURE", "vllm_v1_rejection_sample",
        "vllm_mrv2_engine_rejection_sample", "counter_uniforms",
        "sglang_chain_speculative_sampling", "hf_speculative_sampling", "hf_greedy_match",
        "GREEDY_TEMPERATURE", "apply_sampling_constraints", "apply_top_k_top_p",
        "expand_batch_to_tokens", "generate_uniform_probs"),
    "engines.engine_sampling": (
        "EngineProcessing", "engine_processing", "engine_globals", "WRAPPER_RULE",
        "sglang_renorm", "transformers_processors", "boundary_ties", "DROPPED"),
    "statistics.stats": (
        "FamilyTest", "RowTest", "family", "is_point_mass", "min_detectable_tv",
        "point_mass_tv", "row_chi_square", "samples_for_a_test"),
    "statistics.budget": (
        "BREAK_SHARE", "BudgetPlan", "KIT_SHARE", "MAX_AUTO_SAMPLES", "PILOT_RERUN_FACTOR",
        "PILOT_SECOND_SHARE", "PILOT_SHARE", "POWER", "TARGET_SHARE", "check_budget",
        "coin_detectable_rate", "detectable_tv", "fit_cost", "planned_tv", "row_dof",
        "samples_for_tv", "size_run", "split"),
    "designs.sharp": (
        "Replica", "ReplicaPower", "SharpDesign", "Allocation", "allocate",
        "binned_divergence", "candidate_pool", "kit_replicas", "replica_power",
        "sharp_design", "sharp_rows", "ZERO_CELL_WEIGHT", "DEFAULT_POOL", "GENERIC_TV",
        "GENERIC", "GENERIC_BONUS_TV", "GENERIC_BONUS", "kit_design", "predicted_power",
        "simulated_power", "BONUS_BUGS", "KIT_BONUS_BUGS", "bonus_law", "bonus_sampler",
        "bonus_replicas", "MAX_POOL", "MAX_POOL_VOCAB", "MAX_POOL_LENGTH", "MAX_POOL_PATHS",
        "MAX_SIM_REPS", "MAX_BUDGET", "MAX_ALLOC_ROWS"),

}

#: public names that two modules define as different objects: left in those modules
_AMBIGUOUS = {
    "MAX_ROWS": ("checks.seeds", "designs.sharp"),
    "MAX_TOKENS": ("checks.seeds", "checks.hf_generate", "checks.mlx_generate"),
    "family_power": ("statistics.stats", "statistics.budget"),
    "generate_counts": ("checks.hf_generate", "checks.mlx_generate"),
    "sampling_of": ("checks.hf_generate", "checks.mlx_generate"),
}

#: public name -> the module that defines it
_EXPORTS = {name: module for module, names in _ROOMS.items() for name in names}

#: The rooms and front-ends, reachable as attributes (``spectheory.testing.checks``) without an
#: import line; the old module paths of `spectheory._moved` too (``spectheory.testing.step``).
_SUBMODULES = ("checks", "designs", "engines", "mutants", "statistics", "pytest_plugin",
               "sampler_cli", "step_cli", "vectors_cli")
_OLD = tuple(old.rsplit(".", 1)[1] for old in _moved.MOVED
             if old.rsplit(".", 1)[0] == __name__)

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
        return getattr(module, name)
    if name in _SUBMODULES or name in _OLD:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _AMBIGUOUS:
        homes = " and ".join(f"{__name__}.{m}" for m in _AMBIGUOUS[name])
        raise AttributeError(f"module {__name__!r} leaves {name!r} to its modules, which "
                             f"define it differently: import it from {homes}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | set(_SUBMODULES) | set(_OLD))
