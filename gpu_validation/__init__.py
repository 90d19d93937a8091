"""Real-model validation of speculative-decoding verifiers.

Library (typed arguments; nothing reads command-line options):

* `fetch` — pinned models and data sets: download, assemble, sha256-check, cache;
* `hf_models` — `ModelSpec`, loading GGUF files or folders, vocabulary
  checks, early-exit drafts;
* `data` — HumanEval and ShareGPT prompts, `parse_datasets`;
* `decoding` — the speculative decoding loop over Hugging Face models
  (propose -> law -> sample -> commit, `step`), KV-cache roll-back, verifiers
  through [`spectheory.registry`][spectheory.registry];
* `compare` — paired comparison of verifiers on one drafted batch;
* [`stats`][spectheory.testing.statistics.stats] — G-test, Rao-Scott test, Rao-Blackwellised pair
  vectors;
* `forward_costs` — measured per-forward costs;
* [`checks`][spectheory.toy_models.checks], `atomic` — input checks (one-line errors) and atomic
  result files;
* `tiny` — tiny random Qwen2 models and GGUF files (test fixtures).

Experiments (a typed configuration and a function each): `experiments`. Command line
(``spectheory models ...``, ``spectheory validate ...``): `cli`.
"""
