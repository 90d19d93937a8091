"""Hugging Face transformers' assisted generation, unmodified, checked over several steps.

[`check_step`][spectheory.testing.checks.step.check_step] runs a step built like an engine's;
[`check_hf_generate`][spectheory.testing.checks.hf_generate.check_hf_generate] runs the library's
own loop: ``target.generate(bos, assistant_model=draft, do_sample=True,
max_new_tokens=N, **kwargs)`` (``GenerationMixin._assisted_decoding``: the candidate generator
drafts with the assistant's own ``generate``, the target scores the candidates in one forward pass,
``_speculative_sampling`` (Leviathan et al. 2023, algorithm 1; Chen et al. 2023) accepts or
corrects, the caches are cropped, and the loop goes on until N tokens or an end-of-sequence token).
The first N generated tokens are compared, by a pooled chi-square
(`spectheory.testing.statistics.stats`), with the exact law of the target processed as the request
asks (`spectheory.testing.checks.step.target_sequence_law` with ``order="transformers"``).
Losslessness of every step makes the generated sequence follow that law whatever the drafts, the
draft lengths (``num_assistant_tokens``, its ``heuristic`` schedule, the assistant's confidence
threshold) or where the steps fall.

**The models.** [`hf_models`][spectheory.testing.checks.hf_generate.hf_models] dresses an instance's
table models as ``transformers.PreTrainedModel`` s (`TablePreTrainedModel`, built on first use so
that this module imports without transformers):

* vocabulary V + 1: the extra id V is the prompt (a BOS token of probability 0 in every row);
  ``generate`` is handed the prompt ``[[V]]``, and the row after it is the instance's root;
* ``forward(input_ids, past_key_values)`` returns ``logits [B, T, V+1]``, row t the next-token
  logits after the tokens so far (beyond the table's depth its order-D Markov extension), -inf
  in column V;
* the cache is the library's own ``DynamicCache``: each forward pass appends its token ids to
  layer 0 as keys (float, exact for ids below 2^24) and reads the whole history back, so the
  library's cache cropping after a rejection is exercised as with a real model.

**The logits** are the kit's logits (`spectheory.inputs.stateful.kit_logits`: log p shifted per
row so that both signs occur, which exercises both branches of ``repetition_penalty``), rounded
once to float32. transformers casts every row to float32 before its logits processors, so
float32 is what it reads either way; the law is computed from the SAME float32 logits: the
reference instance ([`hf_models`][spectheory.testing.checks.hf_generate.hf_models]' third value) has
rows softmax(float64(logits)), whose kit logits are the float32 logits again (float32 rounding
is symmetric, so the per-row shift stays 0). The only difference left between the library and
the law is the library's own float32 arithmetic (about 1e-7 relative).

**End of sequence.** ``generate`` stops at ``eos_token_id``: the first N tokens are then compared
truncated at the first stop token. Cells are sequences of N tokens with every token after the
first stop token replaced by it; the exact N-token law is merged onto the same cells.

**Statistics.** One chi-square per instance, Bonferroni over one global and one per-instance
test (`spectheory.testing.statistics.stats.family`): a correct library fails with probability at
most ``alpha``; the report states the smallest total-variation bias detected with 90% power.
`spectheory.testing.checks.step.detection_power` gives the power against a known law (a planted
bug's).

``generate`` runs one sequence at a time (assisted generation refuses a batch of more than one),
so the cost is per sample: about 17 ms for N = 4 tokens on an idle CPU core (measured in
``benchmarks/results/hf_generate.md``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ...inputs.instances import Instance
from ...inputs.models import TableModel
from ...runtime._lazy import torch
from ...runtime.errors import OptionError, SizeLimitError, SpectheoryError, is_integer, seed_forked
from ...runtime.errors import check_whole as _whole
from ..statistics import stats
from .calls import _cells, _run_arguments, _summary, point_mass_figure
from .report import MIN_EXPECTED, SamplerReport
from .step import _Pace
from ...runtime.limits import shown as _repr_cut

#: Most sequences V^N one comparison enumerates.
MAX_CELLS = 2**20
#: Most generated tokens compared (N).
MAX_TOKENS = 32
#: Most samples of one check.
MAX_SAMPLES = 10**8
#: Most tokens of the vocabulary (the prompt id V must be exact as a float32 cache key).
MAX_VOCAB = 2**20
#: What `generate` keyword arguments the law models, and how (the rest is refused).
LAW_KEYS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty",
            "no_repeat_ngram_size", "min_new_tokens", "eos_token_id")
#: Keyword arguments set on the assistant's generation config (the draft length and when to stop
#: drafting); the law does not depend on them when every step is lossless.
ASSISTANT_KEYS = ("num_assistant_tokens", "num_assistant_tokens_schedule",
                  "assistant_confidence_threshold")
#: Set by the check itself.
OWN_KEYS = ("do_sample", "max_new_tokens", "max_length", "assistant_model", "input_ids",
            "inputs", "generation_config")
#: transformers' default top-k (``GenerationConfig``), applied whenever ``do_sample`` is set.
HF_DEFAULT_TOP_K = 50
#: Most tokens the assistant may draft a step (transformers reads num_assistant_tokens as a count
#: of new tokens for the assistant's generate; the check's laws cover any count up to this).
MAX_ASSISTANT_TOKENS = 64

#: transformers' schedules of the number of assistant tokens (``GenerationConfig``).
ASSISTANT_SCHEDULES = ("constant", "heuristic", "heuristic_transient")
#: The check's assistant settings unless given: L = 2 drafts a step, fixed.
DEFAULT_ASSISTANT = {"num_assistant_tokens": 2, "num_assistant_tokens_schedule": "constant",
                     "assistant_confidence_threshold": 0.0}


def _kit_logits(probs):
    """The kit's logits of float64 probability rows (`spectheory.inputs.stateful.kit_logits`)."""
    from ...inputs.stateful import kit_logits

    return kit_logits(probs)


def _require_transformers():
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise OptionError("transformers is not installed: pip install 'spectheory[models]'") \
            from None
    return transformers


def transformers_version() -> str:
    """The installed transformers version (one-line `OptionError` when it is absent)."""
    return _require_transformers().__version__


# ----------------------------------------------------------------------------- models


@functools.lru_cache(maxsize=None)
def _classes():
    """``(TableLMConfig, TablePreTrainedModel)``, defined on first use (transformers imported)."""
    _require_transformers()
    from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
    from transformers.cache_utils import DynamicCache
    from transformers.modeling_outputs import CausalLMOutputWithPast

    class TableLMConfig(PretrainedConfig):
        """A table model's configuration: ``vocab_size`` = V + 1 (the prompt id V), one cache
        layer."""

        model_type = "spectheory_table"

        def __init__(self, vocab_size: int = 3, num_hidden_layers: int = 1, **kwargs):
            self.vocab_size = vocab_size
            self.num_hidden_layers = num_hidden_layers
            super().__init__(**kwargs)

    class TablePreTrainedModel(PreTrainedModel, GenerationMixin):
        """A table model as a transformers causal language model (see
        `spectheory.testing.checks.hf_generate`). ``logit_tables[k]`` ``[V^k, V+1]`` float32: the
        logits after every prefix of length k (column V, the prompt id, -inf). ``shift=1`` plants a
        bug: each position returns the row of the position before it (the root row stays first)."""

        config_class = TableLMConfig
        base_model_prefix = "table"
        main_input_name = "input_ids"
        _supports_cache_class = True
        _no_split_modules: list = []

        def __init__(self, config, logit_tables=(), name: str = "model", shift: int = 0):
            super().__init__(config)
            self._anchor = torch.nn.Parameter(torch.zeros(1), requires_grad=False)  # device, dtype
            # one float32 array of every table (numpy: `_rows` gathers a few rows a call, which
            # numpy indexing does in a fraction of the time of torch's); logit_tables[k] are
            # torch views of its rows of depth k
            self._stacked, self._starts = _stack_tables(logit_tables)
            whole = torch.from_numpy(self._stacked)
            self.logit_tables = [whole[a:b] for a, b in zip(self._starts, self._starts[1:])]
            self.V = int(config.vocab_size) - 1
            self.depth = len(self.logit_tables) - 1
            self.name, self.shift = name, int(shift)
            self.calls = 0
            self.post_init()

        def _init_weights(self, module):  # nothing to initialise
            pass

        def get_input_embeddings(self):
            return None

        def forward(self, input_ids=None, past_key_values=None, attention_mask=None,
                    position_ids=None, use_cache=None, return_dict=None, logits_to_keep=0,
                    **kwargs):
            ids = torch.as_tensor(input_ids)
            if ids.dim() != 2:
                raise SpectheoryError(f"the {self.name} model takes input_ids [B, T], got shape "
                                      f"{list(ids.shape)}")
            self.calls += 1
            if past_key_values is None and use_cache is not False:
                past_key_values = DynamicCache()
            if past_key_values is not None:
                start = int(past_key_values.get_seq_length())
                keys = ids.to(torch.float32)[:, None, :, None]
                full, _ = past_key_values.update(keys, keys, 0)
                full = full[:, 0, :, 0].to(torch.long)
            else:
                start, full = 0, ids.to(torch.long)
            logits = self._rows(full, start, ids.shape[1])
            return CausalLMOutputWithPast(logits=logits, past_key_values=past_key_values)

        def _rows(self, full, start: int, T: int):
            """Logits [B, T, V+1] at positions start..start+T-1 of ``full [B, S]`` (position 0 the
            prompt id V): row t is the table row after full[:, 1:t+1]."""
            V = self.V
            _, S = full.shape
            seqs = full.tolist()  # a few tokens: read in Python ints, not one tensor op a token
            if S < 1 or any(seq[0] != V for seq in seqs):
                raise SpectheoryError(f"the {self.name} model reads the prompt [[{V}]] (the BOS "
                                      f"id V = {V}) first")
            if S > 1 and any(not 0 <= x < V for seq in seqs for x in seq[1:]):
                raise SpectheoryError(f"the {self.name} model was handed a token outside "
                                      f"0..{V - 1} after the prompt")
            return torch.from_numpy(_table_rows(self._stacked, self._starts, seqs, start, T, V,
                                                self.shift))

    # generate reads the signatures of forward and prepare_inputs_for_generation
    # (inspect.signature) some 17 times a sequence, and Python rebuilds a bound method's signature
    # on every read: these two hand out plain functions calling the same methods, their signatures
    # computed once
    TablePreTrainedModel.forward = _Signed(TablePreTrainedModel.forward)
    TablePreTrainedModel.prepare_inputs_for_generation = _Signed(
        GenerationMixin.prepare_inputs_for_generation)
    return TableLMConfig, TablePreTrainedModel


class _Signed:
    """A method whose signature `inspect.signature` reads without rebuilding it: on an instance,
    ``obj.name`` is a plain function calling ``function(obj, ...)`` with the bound method's
    signature stored (``__signature__``, returned as it is), where a bound method's signature is
    rebuilt, its first parameter dropped, on every read. On the class it is the function itself."""

    def __init__(self, function):
        self.function = function
        sig = inspect.signature(function)
        self.signature = sig.replace(parameters=tuple(sig.parameters.values())[1:])

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self.function
        function = self.function

        def call(*args, **kwargs):
            return function(obj, *args, **kwargs)

        call.__signature__ = self.signature
        call.__name__ = call.__qualname__ = function.__name__
        call.__doc__ = function.__doc__
        return call


def _stack_tables(logit_tables):
    """``(stacked, starts)``: the float32 logit tables ``[V^k, V+1]`` (k = 0..D) as one
    C-contiguous array, table k its rows ``starts[k]:starts[k + 1]``; `_table_rows` reads every
    row a call asks for from it in one indexing."""
    tables = [np.asarray(t, dtype=np.float32) for t in logit_tables]
    starts = [0]
    for t in tables:
        starts.append(starts[-1] + t.shape[0])
    return np.ascontiguousarray(np.concatenate(tables)), tuple(starts)


def _table_rows(stacked, starts, seqs, start: int, T: int, V: int, shift: int = 0):
    """Logits ``[B, T, V+1]`` float32 (a new array) at positions start..start+T-1 of the
    sequences ``seqs`` (Python lists, position 0 the prompt id V; `_stack_tables` gives
    ``stacked`` and ``starts``). Position start+i reads t = max(start + i - shift, 0) tokens after
    the prompt; its row is, in the table of depth k = min(t, D), the context of the last k of
    them read as a base-V number (beyond the depth, the order-D Markov extension). The transformers
    and MLX table models share it."""
    D = len(starts) - 2
    idx = []
    for seq in seqs:
        for i in range(T):
            t = max(start + i - shift, 0)
            k = min(t, D)
            n = 0
            for j in range(t + 1 - k, t + 1):  # seq[j]: the j-th token after the prompt
                n = n * V + seq[j]
            idx.append(starts[k] + n)
    return stacked[idx].reshape(len(seqs), T, V + 1)


def __getattr__(name):  # the classes, once transformers is importable
    if name in ("TableLMConfig", "TablePreTrainedModel"):
        return dict(zip(("TableLMConfig", "TablePreTrainedModel"), _classes()))[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _rounded(model: TableModel):
    """(float32 logit tables [V^k, V+1], the table model of their float64 softmax)."""
    V = model.vocab_size
    logit_tables, prob_tables = [], []
    for t in model.to_float().tables:
        lg32 = np.asarray(_kit_logits(np.asarray(t, dtype=np.float64)), dtype=np.float32)
        lg = lg32.astype(np.float64)
        top = lg.max(axis=-1, keepdims=True)
        w = np.exp(lg - top)
        prob_tables.append(w / w.sum(axis=-1, keepdims=True))
        logit_tables.append(np.concatenate([lg32, np.full((lg32.shape[0], 1), -np.inf,
                                                          dtype=np.float32)], axis=-1))
    return logit_tables, TableModel(V, tuple(prob_tables))


def hf_models(instance: Instance, *, shift: int = 0):
    """The instance's target and draft as transformers models, and the instance the law is
    computed on.

    Returns ``(target, draft, law_instance)``: two `TablePreTrainedModel` (vocabulary V + 1, the
    prompt id V; float32 kit logits, see `spectheory.testing.checks.hf_generate`), and the instance
    whose rows are the float64 softmax of exactly those float32 logits. ``shift=1`` plants a bug in
    the target: each position returns the row of the position before (the target reads one token
    late)."""
    if not isinstance(instance, Instance):
        raise OptionError(f"an instance must be a spectheory Instance, not "
                          f"{type(instance).__name__}")
    V = instance.vocab_size
    if V + 1 > MAX_VOCAB:
        raise SizeLimitError(f"vocabulary V = {V:,} is over the limit of {MAX_VOCAB - 1:,} here")
    if shift not in (0, 1):
        raise OptionError(f"shift = {shift!r} must be 0 or 1")
    Config, Model = _classes()
    from transformers import GenerationConfig

    made = []
    law_models = []
    for which, m, s in (("target", instance.target, shift), ("draft", instance.draft, 0)):
        logit_tables, law_model = _rounded(m)
        cfg = Config(vocab_size=V + 1, bos_token_id=V, pad_token_id=V, eos_token_id=None)
        model = Model(cfg, logit_tables, which, s)
        model.generation_config = GenerationConfig(bos_token_id=V, pad_token_id=V,
                                                   eos_token_id=None)
        model.eval()
        made.append(model)
        law_models.append(law_model)
    law = Instance(V, instance.block_length, law_models[0], law_models[1])
    return made[0], made[1], law


# ----------------------------------------------------------------------------- the law


def sampling_of(generate_kwargs: Mapping | None, vocab_size: int):
    """The `SamplingParams` (``order="transformers"``) of ``generate`` keyword arguments, or
    None for none; and the stop token (``eos_token_id``) or None. Refuses, in one line, a key the
    law does not model and a stop token outside 0..V-1."""
    from ...inputs.processing import GREEDY_BELOW, MAX_COUNT, SamplingParams

    if generate_kwargs is not None and not isinstance(generate_kwargs, Mapping):
        raise OptionError(f"generate_kwargs must be a mapping of keyword arguments or None, not "
                          f"{type(generate_kwargs).__name__}")
    vocab_size = _whole("vocab_size", vocab_size, 1, 2**31)
    kw = dict(generate_kwargs or {})
    for key in kw:
        if key in OWN_KEYS:
            raise OptionError(f"generate argument {key!r} is set by the check itself")
        if key not in LAW_KEYS and key not in ASSISTANT_KEYS:
            raise OptionError(f"generate argument {key!r} is not modelled by the kit's law "
                              f"(modelled: {', '.join(LAW_KEYS + ASSISTANT_KEYS)})")
    eos = kw.get("eos_token_id")
    if eos is not None:
        if isinstance(eos, bool) or not isinstance(eos, (int, np.integer)) or \
                not 0 <= int(eos) < vocab_size:
            raise OptionError(f"eos_token_id = {eos!r} must be one token id in "
                              f"0..{vocab_size - 1} (a token of the table models)")
        eos = int(eos)
    mnt = kw.get("min_new_tokens")
    if mnt is not None:
        if isinstance(mnt, bool) or not isinstance(mnt, (int, np.integer)) or \
                not 0 <= mnt <= MAX_COUNT:
            raise OptionError(f"min_new_tokens = {_repr_cut(mnt, 40)} must be an integer in "
                              f"0..{MAX_COUNT:,}")
        if mnt and eos is None:  # it masks the stop token: with none, it would do nothing
            raise OptionError(f"min_new_tokens = {int(mnt)} acts only with eos_token_id (the "
                              "token it holds back); give eos_token_id too")
    params: dict[str, Any] = {"order": "transformers"}
    for key in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                "no_repeat_ngram_size"):
        value = kw.get(key)
        if value is None:
            continue
        whole = key in ("top_k", "no_repeat_ngram_size")  # transformers takes numbers, and
        if isinstance(value, bool) or not isinstance(  # reads text or a bool otherwise
                value, (int, np.integer) if whole else (int, float, np.integer, np.floating)):
            raise OptionError(f"generate argument {key} = {_repr_cut(value, 40)} must be "
                              f"{'an integer' if whole else 'a number'} (transformers takes "
                              f"{'integers' if whole else 'numbers'} there)")
        params[key] = value
    temperature = params.get("temperature")
    if temperature is not None and 0 < float(temperature) < GREEDY_BELOW:
        raise OptionError(f"temperature = {float(temperature):g} is below {GREEDY_BELOW:g}, "
                          "which the kit's law reads as greedy (vLLM's rule) while transformers "
                          "samples at it (and overflows float32 logits far below it); give a "
                          f"temperature >= {GREEDY_BELOW:g}")
    if "top_k" not in params and vocab_size + 1 > HF_DEFAULT_TOP_K:
        params["top_k"] = HF_DEFAULT_TOP_K
    if kw.get("min_new_tokens") and eos is not None:  # without a stop token it changes nothing
        params["min_tokens"] = kw["min_new_tokens"]
        params["stop_token_ids"] = [eos]
    try:
        sp = SamplingParams(**params)
    except TypeError as exc:
        missing = [k for k in params if k in str(exc)]
        raise OptionError(f"the kit's sampling parameters do not model "
                          f"{', '.join(missing) or 'these arguments'} yet") from None
    stateful = [k for k in ("repetition_penalty", "no_repeat_ngram_size", "min_tokens")
                if k in params]
    if sp.identity and not stateful:
        sp = None
    return sp, eos


def _plain(value):
    """A numpy scalar as the Python number it holds (other values as they are)."""
    return value.item() if isinstance(value, (np.integer, np.floating)) else value


def _guard_cells(V: int, N: int) -> None:
    from .step import _cells_text, cells_over

    if cells_over(V, N, MAX_CELLS, "the check"):
        raise SizeLimitError(f"the check enumerates V^N = {_cells_text(V, N)} sequences, over "
                             f"the limit of {MAX_CELLS:,}")


def _count_arguments(target, samples, tokens, seed, max_samples: int, max_tokens: int):
    """The arguments every ``generate_counts`` takes, checked before anything runs: a table
    model of `hf_models` / `mlx_models` (its ``V``), samples, tokens and a seed."""
    V = getattr(target, "V", None)
    if not is_integer(V) or V < 1:
        raise OptionError(f"target = {type(target).__name__} is not a table model of the kit "
                          "(build the pair with hf_models / mlx_models)")
    return (int(V), _whole("samples", samples, 0, max_samples),
            _whole("tokens", tokens, 1, max_tokens), _whole("seed", seed, 0, 2**63 - 1))


def _stop_token(stop, V: int) -> int | None:
    """A stop token: None, or a token id in 0..V-1 (an integer, not a bool), else one line."""
    if stop is not None and (not is_integer(stop) or not 0 <= stop < V):
        raise OptionError(f"stop = {_repr_cut(stop, 40)} must be a token id in 0..{V - 1} or None")
    return None if stop is None else int(stop)


def stop_cells(V: int, N: int, stop: int | None):
    """Cell of each of the V^N sequences ``[V^N]`` int64 (base-V index, first token most
    significant) once every token after the first ``stop`` token is replaced by it (the
    identity when ``stop`` is None)."""
    V, N = _whole("V", V, 1, 2**31), _whole("N", N, 1, MAX_TOKENS)
    stop = _stop_token(stop, V)
    _guard_cells(V, N)
    idx = np.arange(V ** N, dtype=np.int64)
    if stop is None:
        return idx
    digits = (idx[:, None] // V ** np.arange(N - 1, -1, -1)) % V  # [V^N, N]
    seen = np.cumsum(digits == stop, axis=1)
    after = np.zeros_like(seen, dtype=bool)
    after[:, 1:] = seen[:, :-1] > 0
    digits = np.where(after, stop, digits)
    return digits @ (V ** np.arange(N - 1, -1, -1))


def generate_law(law_instance: Instance, N: int, sampling=None, stop: int | None = None):
    """The exact law ``[V^N]`` of the first N generated tokens: the N-token law of the processed
    target (`spectheory.testing.checks.step.target_sequence_law`), merged onto the cells of
    `stop_cells` when a stop token ends generation."""
    from .calls import _an_instance
    from .step import target_sequence_law

    _an_instance(law_instance, "generate_law")
    V = law_instance.vocab_size
    law = np.asarray(target_sequence_law(law_instance, N, sampling), dtype=np.float64)
    if stop is None:
        return law
    return np.bincount(stop_cells(V, N, stop), weights=law, minlength=V ** N)


# ----------------------------------------------------------------------------- running


@contextlib.contextmanager
def _quiet():
    """transformers' warnings off for the run (each ``generate`` call repeats some)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def generate_counts(target, draft, samples: int, tokens: int, seed: int = 0,
                    generate_kwargs: Mapping | None = None, assistant: Mapping | None = None,
                    stop: int | None = None, pace=None) -> np.ndarray:
    """Counts ``[V^N]`` of the first N = ``tokens`` tokens of ``samples`` runs of
    ``target.generate(bos, assistant_model=draft, do_sample=True, max_new_tokens=N, **kwargs)``
    (cells of `stop_cells`). torch's global generator is seeded with ``seed`` inside
    ``torch.random.fork_rng`` (the caller's state is left alone); ``assistant`` sets the
    assistant's generation config (`ASSISTANT_KEYS`). Raises `SpectheoryError` in one line when
    ``generate`` raises, returns fewer tokens without a stop token, or a token outside 0..V-1."""
    V, samples, N, seed = _count_arguments(target, samples, tokens, seed, MAX_SAMPLES,
                                           MAX_TOKENS)
    _guard_cells(V, N)
    for name, value in (("generate_kwargs", generate_kwargs), ("assistant", assistant)):
        if value is not None and not isinstance(value, Mapping):
            raise OptionError(f"{name} must be a mapping of keyword arguments or None, not "
                              f"{type(value).__name__}")
    kw = {k: _plain(v) for k, v in dict(generate_kwargs or {}).items()
          if k not in ASSISTANT_KEYS}
    sampling_of(kw, V)  # its refusals: a key the law does not model, a number that is text
    stop = _stop_token(stop, V)
    unknown = [k for k in dict(assistant or {}) if k not in ASSISTANT_KEYS]
    if unknown:
        raise OptionError(f"assistant setting {unknown[0]!r} is not one of "
                          f"{', '.join(ASSISTANT_KEYS)}")
    config = draft.generation_config
    missing = object()
    saved = {key: getattr(config, key, missing) for key in dict(assistant or {})}
    try:  # the assistant's settings for these calls only: put back after them
        for key, value in dict(assistant or {}).items():
            setattr(config, key, value)
        return _counts(target, draft, samples, N, V, seed, kw, stop, pace)
    finally:
        for key, value in saved.items():
            if value is missing:
                delattr(config, key)
            else:
                setattr(config, key, value)


def _counts(target, draft, samples, N, V, seed, kw, stop, pace) -> np.ndarray:
    bos = torch.tensor([[V]], dtype=torch.long)
    counts = np.zeros(V ** N, dtype=np.int64)
    weights = V ** np.arange(N - 1, -1, -1)
    with torch.random.fork_rng(devices=[]), _quiet(), torch.no_grad():
        seed_forked(int(seed) % 2**63)
        for _ in range(int(samples)):
            try:
                out = target.generate(bos, assistant_model=draft, do_sample=True,
                                      max_new_tokens=N, **kw)
            except SpectheoryError:
                raise
            except Exception as exc:  # noqa: BLE001 - the library refusing its arguments
                first = (str(exc).strip().splitlines() or [""])[0]
                raise SpectheoryError(f"transformers' generate raised {type(exc).__name__}: "
                                      f"{first}") from None
            seq = out[0, 1:].tolist()
            if len(seq) > N or (len(seq) < N and (stop is None or not seq or seq[-1] != stop)):
                raise SpectheoryError(f"generate returned {len(seq)} new tokens {seq} for "
                                      f"max_new_tokens = {N}"
                                      + ("" if stop is None else f" and eos_token_id = {stop}"))
            if any(not 0 <= x < V for x in seq):
                raise SpectheoryError(f"generate returned a token outside 0..{V - 1}: {seq}")
            seq = seq + [stop] * (N - len(seq))
            counts[int(np.dot(seq, weights))] += 1
            if pace is not None:
                pace(1)
    return counts


@dataclass
class HFGenerateReport(SamplerReport):
    """Result of [`check_hf_generate`][spectheory.testing.checks.hf_generate.check_hf_generate]: a
    [`SamplerReport`][spectheory.testing.checks.report.SamplerReport] (``mode="step"``, ``rows`` the
    instances) with ``tokens`` (N), the ``generate`` keyword arguments, the assistant's settings,
    the library ``version`` and the measured ``seconds_per_sample``."""

    tokens: int = 0
    generate_kwargs: dict = field(default_factory=dict)
    assistant: dict = field(default_factory=dict)
    version: str = ""
    seconds_per_sample: float = float("nan")

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.generate_kwargs.items()) or "no processing"
        lines = [f"check_hf_generate (transformers {self.version} assisted generation, the first "
                 f"{self.tokens} tokens): {'PASS' if self.passed else 'FAIL'}",
                 f"  generate({args}); assistant "
                 + ", ".join(f"{k}={v!r}" for k, v in self.assistant.items())]
        if not (self.dof == 0 and self.worst_cell is None and self.notes
                and not math.isfinite(self.min_detectable_tv)):
            lines += self._test_lines("instance(s)", "instance", finite_only=True)
        if math.isfinite(self.seconds_per_sample):
            lines.append(f"  {self.seconds_per_sample * 1e3:.1f} ms per generate call")
        lines.extend(f"  {n}" for n in self.notes)
        return "\n".join(lines)

    def to_json(self) -> dict:
        out = super().to_json()
        out.update({"tokens": int(self.tokens), "generate_kwargs": dict(self.generate_kwargs),
                    "assistant": dict(self.assistant), "version": self.version,
                    "seconds_per_sample": (float(self.seconds_per_sample)
                                           if math.isfinite(self.seconds_per_sample) else None)})
        return out


def _label(inst_i: int, c: int, V: int, N: int) -> str:
    if c < 0:
        return f"instance {inst_i}: pooled sequences (expected < {MIN_EXPECTED:g} each)"
    toks = [(int(c) // V ** (N - 1 - j)) % V for j in range(N)]
    return f"instance {inst_i}: sequence {tuple(toks)}"


def _enough_cells(samples: int, laws, per) -> None:
    """Refuse, before any generate call, a split that leaves an instance whose law is not one
    sequence with fewer than two cells of expected count >= `MIN_EXPECTED`."""
    for inst_i, (law, n) in enumerate(zip(laws, per)):
        if law.max() < 1 - 1e-12 and stats.row_chi_square(law * n, law, n, MIN_EXPECTED).dof < 1:
            raise OptionError(f"samples = {samples:,} leave instance {inst_i} with fewer than two "
                              f"cells of expected count >= {MIN_EXPECTED:g}: use more samples")


def _family(observed, laws, per, vocab, N: int, alpha: float):
    """The counts of the generated sequences ``observed[i]`` [V_i^N] of each instance against
    its exact law ``laws[i]`` (one chi-square an instance, Bonferroni-combined): returns (tests,
    family, worst cell, min detectable TV, notes), the impossible and worst cells labelled with
    their instance and sequence."""
    tests, worst, impossible = [], None, None
    for inst_i, (obs, law, n, V) in enumerate(zip(observed, laws, per, vocab)):
        t = stats.row_chi_square(obs, law, n, MIN_EXPECTED)
        tests.append(t)
        impossible, worst = _cells(t, law, obs, lambda c, i=inst_i, V=V: _label(i, c, V, N),
                                   "target probability 0", impossible, worst)
    fam, cell, mdt, notes = _summary(tests, alpha, worst, impossible,
                                     "sequences of target probability zero")
    if all(float(np.max(law)) >= 1 - 1e-12 for law in laws):  # greedy: judged off the point
        mdt, note = point_mass_figure(min(per))
        notes.append(note)
    return tests, fam, cell, mdt, notes


def default_instances() -> list:
    """Prefix-dependent instances for the check: ``random_instance(3, 2, 21)`` (V = 3, target
    rows after every prefix of length <= 2), the first of
    [`default_step_instances`][spectheory.testing.checks.step.default_step_instances]."""
    from ...inputs.random_instances import random_instance

    return [random_instance(3, 2, 21)]


def check_hf_generate(instances: Sequence | Instance | None = None, samples: int = 3_000,
                      generate_kwargs: Mapping | None = None, tokens: int = 4, seed: int = 0,
                      alpha: float = 1e-3, *, assistant: Mapping | None = None, shift: int = 0,
                      max_seconds: float | None = 3600.0) -> HFGenerateReport:
    """Check transformers' assisted generation (``do_sample=True``), unmodified, against the
    exact law of the first ``tokens`` generated tokens; see `spectheory.testing.checks.hf_generate`.

    Parameters
    ----------
    instances : Instance, list of Instance, or None
        Default [`default_instances`][spectheory.testing.checks.hf_generate.default_instances].
    samples : int
        ``generate`` calls, split evenly over the instances (one sequence a call).
    generate_kwargs : mapping, optional
        Passed to ``generate``: the processing the law models (`LAW_KEYS`: temperature, top_k,
        top_p, min_p, repetition_penalty, no_repeat_ngram_size, min_new_tokens, eos_token_id),
        and the assistant's settings (`ASSISTANT_KEYS`, set on the draft's generation config).
        Anything else is refused in one line.
    tokens : int
        N, the generated tokens compared (``max_new_tokens``); N > L + 1 spans several steps.
    seed : int
        Seeds torch's global generator (inside ``fork_rng``).
    alpha : float in (0, 1)
        Family-wise false-alarm rate.
    assistant : mapping, optional
        The assistant's settings (default `DEFAULT_ASSISTANT`: 2 drafts a step, constant, no
        confidence threshold); ``generate_kwargs`` entries of `ASSISTANT_KEYS` override them.
    shift : {0, 1}
        1 plants a bug: the target reads one token late.
    max_seconds : float or None
        Stop with a `TimeLimitError` once the measured rate projects the run past it.
    """
    transformers = _require_transformers()
    insts, per, alpha = _run_arguments(samples, alpha, tokens, seed, max_seconds, instances,
                                       default_instances, MAX_SAMPLES, MAX_TOKENS)
    if isinstance(shift, bool) or shift not in (0, 1):
        raise OptionError(f"shift = {_repr_cut(shift, 40)} must be 0 or 1")
    for name, value in (("generate_kwargs", generate_kwargs), ("assistant", assistant)):
        if value is not None and not isinstance(value, Mapping):
            raise OptionError(f"{name} must be a mapping of keyword arguments or None, not "
                              f"{type(value).__name__}")
    for inst in insts:
        _guard_cells(inst.vocab_size, int(tokens))
    # a numpy scalar as the Python number it holds: transformers' checks read np.int64(2) as "not
    # a strictly positive integer, but is 2"
    kw = {k: _plain(v) for k, v in dict(generate_kwargs or {}).items()}
    ast = dict(DEFAULT_ASSISTANT)
    ast.update({k: _plain(v) for k, v in dict(assistant or {}).items()})
    for key in list(kw):
        if key in ASSISTANT_KEYS:
            ast[key] = kw.pop(key)
    for key in ast:
        if key not in ASSISTANT_KEYS:
            raise OptionError(f"assistant setting {key!r} is not one of "
                              f"{', '.join(ASSISTANT_KEYS)}")
    schedule = ast["num_assistant_tokens_schedule"]
    if not isinstance(schedule, str) or schedule not in ASSISTANT_SCHEDULES:
        raise OptionError(f"num_assistant_tokens_schedule = {_repr_cut(schedule, 40)} must be one of "
                          f"{', '.join(ASSISTANT_SCHEDULES)} (transformers' schedules)")
    threshold = ast["assistant_confidence_threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.integer,
                                                                np.floating)) \
            or not 0 <= float(threshold) < 1:
        raise OptionError(f"assistant_confidence_threshold = {_repr_cut(threshold, 40)} must be a number "
                          "in [0, 1) (0: drafts are not cut by confidence)")
    n_ast = ast["num_assistant_tokens"]  # else the library names max_new_tokens (what it sets)
    if isinstance(n_ast, bool) or not isinstance(n_ast, (int, np.integer)) or \
            not 1 <= n_ast <= MAX_ASSISTANT_TOKENS:
        raise OptionError(f"num_assistant_tokens = {_repr_cut(n_ast, 40)} must be an integer in "
                          f"1..{MAX_ASSISTANT_TOKENS}")
    N = int(tokens)
    built, laws, sp = [], [], None
    for inst in insts:  # every law before the first call
        sp, stop = sampling_of(kw, inst.vocab_size)
        target, draft, law_inst = hf_models(inst, shift=shift)
        law = generate_law(law_inst, N, sp, stop)
        built.append((target, draft, stop))
        laws.append(law)
    _enough_cells(samples, laws, per)
    pacer = _Pace(int(samples), max_seconds, "check_hf_generate", "a generate call", after=20,
                  measured=False)
    pace = pacer.add

    observed = [generate_counts(target, draft, n, N, seed + inst_i, dict(kw), ast, stop, pace)
                for inst_i, ((target, draft, stop), n) in enumerate(zip(built, per))]
    spent = time.perf_counter() - pacer.start
    tests, fam, cell, mdt, notes = _family(observed, laws, per, [t.V for t, _, _ in built], N,
                                           alpha)
    if sp is not None:
        notes.append(f"law against the target processed by {sp}")
    if any(stop is not None for _, _, stop in built):
        notes.append(f"sequences truncated at the first eos_token_id = "
                     f"{built[0][2]} (later tokens read as it), the law merged alike")
    if shift:
        notes.append("planted bug: the target reads one token late (shift=1)")
    return HFGenerateReport(fam.p_value > alpha, fam.p_value, "step", int(samples), alpha, cell,
                            mdt, "target", fam.statistic, fam.dof, len(tests), notes=notes,
                            tokens=N, generate_kwargs=kw, assistant=ast,
                            version=transformers.__version__,
                            seconds_per_sample=spent / max(1, int(samples)))


@contextlib.contextmanager
def planted_raw_draft_logits():
    """Plant a bug in the installed library for the duration of the block: the assistant hands
    the verifier its RAW logits as the candidate logits while it sampled its drafts from the
    processed ones (the class of Hugging Face transformers #47932). The library's
    ``AssistedCandidateGenerator._generate_candidates`` is replaced by a copy that returns
    ``torch.stack(assistant_output.logits, dim=1)`` instead of the scores, and restored after
    the block. Lossless with no processing (raw = processed); lossy under a temperature."""
    from transformers.generation import candidate_generator as cg

    original = cg.AssistedCandidateGenerator._generate_candidates

    def raw_logits(self, generation_args):
        self.generation_config.output_logits = True
        out = self.assistant_model.generate(**generation_args, **self.assistant_kwargs)
        self.assistant_kwargs["past_key_values"] = out.past_key_values
        return out.sequences, torch.stack(out.logits, dim=1)

    cg.AssistedCandidateGenerator._generate_candidates = raw_logits
    try:
        yield
    finally:
        cg.AssistedCandidateGenerator._generate_candidates = original


HANDED = ("processed", "raw")


def assisted_law(law_instance: Instance, tokens: int, num_draft: int = 2, sampling=None,
                 handed: str = "processed"):
    """Exact law ``[V^N]`` of the first N tokens of transformers' assisted-generation loop
    (``do_sample=True``, the constant schedule, no confidence threshold, no stop token),
    enumerated step by step: from g tokens, the assistant drafts k = min(L, N - g - 1) tokens
    from its processed rows q (k = 0: the target samples alone); draft x_i is accepted with
    probability min(1, p(x_i) / q_v(x_i)); at the first rejection the token is drawn from
    max(p - q_v, 0) renormalised, and after k acceptances from p (Leviathan et al. 2023,
    algorithm 1, as ``_speculative_sampling`` computes it). p and q are the target's and the
    draft's rows processed by ``sampling`` with their history (the assistant runs the target's
    logits processors); q_v, the rows the verifier is handed, is q (``handed="processed"``: the
    law is the target's) or the raw draft rows (``"raw"``: the law of
    `planted_raw_draft_logits`)."""
    from ...inputs.processing import parse_sampling, process_instance

    from .calls import _an_instance

    if handed not in HANDED:
        raise OptionError(f"handed = {handed!r} is not one of {', '.join(HANDED)}")
    _an_instance(law_instance, "assisted_law")
    for name, value in (("tokens", tokens), ("num_draft", num_draft)):
        if not is_integer(value) or value < 1:
            raise OptionError(f"assisted_law: {name} = {_repr_cut(value, 40)} must be an integer >= 1")
    inst = law_instance.to_float()
    V, N, L = inst.vocab_size, int(tokens), int(num_draft)
    _guard_cells(V, N)
    sp = parse_sampling(sampling)
    proc = process_instance(inst, sp, sp, exact=False)
    P, Q = proc.target, proc.draft
    QV = Q if handed == "processed" else inst.draft
    law = np.zeros(V ** N, dtype=np.float64)

    def emit(seq, mass):
        law[int(np.dot(seq, V ** np.arange(N - 1, -1, -1)))] += mass

    def step(prefix, mass):
        g = len(prefix)
        if g == N:
            emit(prefix, mass)
            return
        k = min(L, N - g - 1)

        def walk(d, m):  # drafts d drafted and accepted with probability m
            p = np.asarray(P.conditional(prefix + d), dtype=np.float64)
            if len(d) == k:
                for y in np.flatnonzero(p > 0):
                    step(prefix + d + (int(y),), m * p[y])
                return
            q = np.asarray(Q.conditional(prefix + d), dtype=np.float64)
            qv = np.asarray(QV.conditional(prefix + d), dtype=np.float64)
            res = np.maximum(p - qv, 0.0)
            tot = res.sum()
            for x in np.flatnonzero(q > 0):
                a = min(1.0, p[x] / qv[x])
                if a > 0:
                    walk(d + (int(x),), m * q[x] * a)
                if a < 1:
                    for y in np.flatnonzero(res > 0):
                        step(prefix + d + (int(y),), m * q[x] * (1 - a) * res[y] / tot)

        walk((), mass)

    step((), 1.0)
    return law


def shifted_law_instance(law_instance: Instance) -> Instance:
    """The instance whose target reads one token late (the law ``shift=1`` follows: assisted
    generation is lossless for whatever target it runs): target row after x_1..x_t is the row
    after x_1..x_{t-1} (the root row after the root), tables to depth D + 1."""
    from .calls import _an_instance

    _an_instance(law_instance, "shifted_law_instance")
    inst = law_instance.to_float()
    V = inst.vocab_size
    tables = inst.target.tables
    new = [tables[0]]
    for k in range(1, len(tables) + 1):
        new.append(np.repeat(np.asarray(tables[k - 1]), V, axis=0))
    return Instance(V, inst.block_length, TableModel(V, tuple(new)), inst.draft)


__all__ = ["ASSISTANT_KEYS", "DEFAULT_ASSISTANT", "HANDED", "HFGenerateReport", "LAW_KEYS",
           "MAX_CELLS", "MAX_TOKENS", "assisted_law", "check_hf_generate", "default_instances",
           "generate_counts", "generate_law", "hf_models", "planted_raw_draft_logits",
           "sampling_of", "shifted_law_instance", "stop_cells", "transformers_version"]
