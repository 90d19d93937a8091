"""Ports of engines' rejection steps that are not Python or not importable here, written from
their released sources in the engines' own call layouts, for the layout presets
(`spectheory.testing.engines.layouts`):

* [`trtllm`][spectheory.testing.engines.ports.trtllm]: TensorRT-LLM's PyTorch-flow rejection
  sampling (``TorchSampler``'s ``_process_draft_tokens_rejection_sampling``);
* [`llamacpp`][spectheory.testing.engines.ports.llamacpp]: llama.cpp's stochastic speculative
  verification (examples/speculative/speculative.cpp);
* [`tgi`][spectheory.testing.engines.ports.tgi]: Text Generation Inference's whole speculative
  step (``HeterogeneousNextTokenChooser`` with speculated ids: sample-match, its processors fed
  the committed ids at every position), in `check_step`'s signature;
* [`mistralrs`][spectheory.testing.engines.ports.mistralrs]: mistral.rs's speculative step
  (``sample_target_sequence_speculative``: the argmax at any temperature before PR #2424,
  penalties from the committed tokens), in `check_step`'s signature.

Each takes ``bug=`` (one of `PORT_BUGS`) to plant a bug for negative controls.
"""

from . import llamacpp, mistralrs, tgi, trtllm
# The planted bugs of these ports are those of the Python engines' adapters, one tuple: the
# acceptance of X_i read from the target row one position late; the correction drawn from the
# target row instead of the residual; the residual built from the next position's rows; the
# acceptance comparison reversed.
from ..adapters import PORT_BUGS

__all__ = ["trtllm", "llamacpp", "mistralrs", "tgi", "PORT_BUGS"]
