"""Real-model validation of speculative-decoding verifiers.

Library (typed arguments; nothing reads command-line options):

* :mod:`.fetch` — pinned models and data sets: download, assemble, sha256-check, cache;
* :mod:`.hf_models` — :class:`~.hf_models.ModelSpec`, loading GGUF files or folders, vocabulary
  checks, early-exit drafts;
* :mod:`.data` — HumanEval and ShareGPT prompts, :func:`~.data.parse_datasets`;
* :mod:`.decoding` — the speculative decoding loop over Hugging Face models
  (propose -> law -> sample -> commit, :func:`~.decoding.step`), KV-cache roll-back, verifiers
  through :mod:`spectheory.registry`;
* :mod:`.compare` — paired comparison of verifiers on one drafted batch;
* :mod:`.stats` — G-test, Hotelling T^2, Rao-Blackwellised pair vectors;
* :mod:`.forward_costs` — measured per-forward costs;
* :mod:`.checks`, :mod:`.atomic` — input checks (one-line errors) and atomic result files;
* :mod:`.tiny` — tiny random Qwen2 models and GGUF files (test fixtures).

Experiments (a typed configuration and a function each): :mod:`.experiments`. Command line
(``spectheory models ...``, ``spectheory validate ...``): :mod:`.cli`.
"""
