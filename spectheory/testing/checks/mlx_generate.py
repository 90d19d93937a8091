"""MLX-LM's speculative decoding, unmodified, checked over several steps on MLX's CPU backend.

[`check_mlx_generate`][spectheory.testing.checks.mlx_generate.check_mlx_generate] runs the library's
own loop, ``mlx_lm.generate.speculative_generate_step(prompt, target, draft, num_draft_tokens=L,
max_tokens=N, sampler=make_sampler(...), logits_processors=make_logits_processors(...))``: the
draft proposes L tokens with its own sampler, the target scores them in one forward pass and
samples a token at every position with the same sampler, the drafts are accepted while they
equal the target's samples (verification by sample match: each accepted token IS the target's
sample, so the loop is lossless whatever the draft), the first mismatch yields the target's
token, and both caches are trimmed (``trim_prompt_cache``). The first N generated tokens are
compared, by a pooled chi-square (`spectheory.testing.statistics.stats`), with the exact law of the
target processed as the sampler asks (`spectheory.testing.checks.step.target_sequence_law`).

**The models.** [`mlx_models`][spectheory.testing.checks.mlx_generate.mlx_models] dresses an
instance's table models as ``mlx.nn.Module`` s (`TableMLXModel`, built on first use so that this
module imports without MLX), exactly as
[`hf_models`][spectheory.testing.checks.hf_generate.hf_models] dresses them for transformers:

* vocabulary V + 1: the extra id V is the prompt (probability 0 in every row); the loop is handed
  the prompt ``[V]``, and the row after it is the instance's root;
* ``model(x [1, T], cache)`` returns ``logits [1, T, V+1]`` float32, row t the next-token logits
  after the tokens so far (beyond the table's depth its order-D Markov extension), -inf in
  column V;
* the cache is the library's own ``KVCache`` (one layer, from ``make_prompt_cache``): each call
  appends its token ids as keys (float32, exact below 2^24) and reads the whole history back,
  so the library's cache trimming after a mismatch is exercised as with a real model.

The logits are the kit's float32 logits, and the law is computed on the instance whose rows are
their float64 softmax (`spectheory.testing.checks.hf_generate`): what is left between the library
and the law is MLX's own float32 arithmetic.

**The sampler's order.** ``make_sampler`` applies top-p, then min-p, then top-k to the
log-probabilities at temperature 1 and divides by the temperature last; neither of the kit's
orders (temperature first) is that. The check therefore maps onto ``order="transformers"`` only
the settings where the orders agree, and refuses the rest in one line: a temperature other
than 0 or 1 with any filter (the filters would be measured on different rows), and top-k with
top-p (MLX measures top-p on the whole row, transformers after top-k). Top-p with min-p (the
same order in both) and top-k with min-p (min-p's bar, a fraction of the largest probability,
is the same before and after top-k) are exact. ``repetition_penalty`` is a logits processor
applied to the model's logits before the sampler, over the last ``repetition_context_size`` =
20 tokens (the prompt id V among them: its -inf logit stays -inf), so the law models it for
N <= 20.

**Ties.** MLX's top-k keeps exactly k tokens (``argpartition``), the kit keeps every token tied
at the k-th value: on rows with such ties the check fails by convention, not by a loss (the
default instance has none).

**End of sequence.** ``speculative_generate_step`` has no stop token (``stream_generate`` stops
on the tokenizer's, outside the loop): N tokens are always generated.

**Statistics.** One chi-square per instance, Bonferroni over one global and one per-instance
test (`spectheory.testing.statistics.stats.family`): a correct library fails with probability at
most ``alpha``; the report states the smallest total-variation bias detected with 90% power and the
fraction of tokens the target accepted from the draft (0 would leave the speculative path
untested). MLX's global generator is seeded with ``mx.random.seed(seed)``; MLX offers no way to
read its state back, so the caller's is not restored.

The loop runs one sequence at a time: about 3-6 ms a sample for N = 4 tokens on an idle CPU core
(``benchmarks/results/mlx_generate.md``).
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ...inputs.instances import Instance
from ...runtime.errors import OptionError, SizeLimitError, SpectheoryError, TimeLimitError
from .calls import _run_arguments
from .hf_generate import (MAX_CELLS, _count_arguments, _enough_cells, _family, _guard_cells,
                          _plain, _rounded, _stack_tables, _table_rows, _whole, default_instances,
                          generate_law, shifted_law_instance)
from .report import SamplerReport
from .step import _Pace
from ...runtime.limits import shown as _repr_cut

#: Most generated tokens compared (N).
MAX_TOKENS = 32
#: Most samples of one check.
MAX_SAMPLES = 10**8
#: Most tokens of the vocabulary (the prompt id V must be exact as a float32 cache key).
MAX_VOCAB = 2**20
#: ``make_sampler`` arguments the law models (the rest is refused).
SAMPLER_KEYS = ("temp", "top_p", "min_p", "top_k")
#: ``make_logits_processors`` arguments the law models.
PROCESSOR_KEYS = ("repetition_penalty",)
#: ``speculative_generate_step`` arguments the law does not depend on (every step lossless).
LOOP_KEYS = ("num_draft_tokens",)
#: MLX-LM's repetition-penalty window (``repetition_context_size``'s default).
REPETITION_CONTEXT = 20
#: The check's settings unless given: sampling at temperature 1 (``make_sampler``'s default,
#: temperature 0, is greedy), 2 drafts a step.
DEFAULTS = {"temp": 1.0, "num_draft_tokens": 2}


def _require_mlx():
    try:
        import mlx.core  # noqa: F401
        import mlx_lm
        import mlx_lm.generate  # noqa: F401
    except ImportError:
        raise OptionError("mlx-lm is not installed: pip install 'spectheory[mlx]' (Linux x86-64; "
                          "on macOS pip install mlx mlx-lm)") from None
    return mlx_lm


def mlx_versions() -> str:
    """``"mlx-lm X, mlx Y"`` (one-line `OptionError` when MLX-LM is absent)."""
    mlx_lm = _require_mlx()
    import mlx.core as mx

    return f"mlx-lm {mlx_lm.__version__}, mlx {mx.__version__}"


# ----------------------------------------------------------------------------- models


@functools.lru_cache(maxsize=None)
def _model_class():
    """``TableMLXModel``, defined on first use (MLX imported)."""
    _require_mlx()
    import mlx.core as mx
    import mlx.nn as nn

    class TableMLXModel(nn.Module):
        """A table model as an MLX-LM causal language model (see
        `spectheory.testing.checks.mlx_generate`). ``logit_tables[k]`` ``[V^k, V+1]`` float32: the
        logits after every prefix of length k (column V, the prompt id, -inf). ``shift=1`` plants
        a bug: each position returns the row of the position before it (the root row stays
        first)."""

        def __init__(self, logit_tables=(), name: str = "model", shift: int = 0):
            super().__init__()
            stacked, starts = _stack_tables(logit_tables)
            # plain numpy, not MLX parameters: every table in one array (`_table_rows`)
            object.__setattr__(self, "_stacked", stacked)
            object.__setattr__(self, "_starts", starts)
            self.layers = [None]  # one cache layer (make_prompt_cache reads len(model.layers))
            object.__setattr__(self, "V", int(stacked.shape[1]) - 1)
            object.__setattr__(self, "depth", len(starts) - 2)
            object.__setattr__(self, "name", name)
            object.__setattr__(self, "shift", int(shift))
            object.__setattr__(self, "calls", 0)

        def __call__(self, x, cache=None):
            if cache is not None and isinstance(x, mx.array) and x.ndim == 2 \
                    and mx.issubdtype(x.dtype, mx.integer):
                # the library's integer tokens: the keys are cast in MLX and the tokens and the
                # cache's history come back in one evaluation (each one costs some 40 us)
                object.__setattr__(self, "calls", self.calls + 1)
                start = int(cache[0].offset)
                keys = x.astype(mx.float32)[:, None, :, None]  # [B, 1, T, 1]
                full, _ = cache[0].update_and_fetch(keys, keys)
                mx.eval(x, full)
                T = x.shape[1]
                full = np.array(full)[:, 0, :, 0].astype(np.int64)
                return mx.array(self._rows(full, start, T))
            ids = np.array(x).astype(np.int64)
            if ids.ndim != 2:
                raise SpectheoryError(f"the {self.name} model takes tokens [B, T], got shape "
                                      f"{list(ids.shape)}")
            object.__setattr__(self, "calls", self.calls + 1)
            if cache is not None:
                start = int(cache[0].offset)
                keys = mx.array(ids.astype(np.float32))[:, None, :, None]  # [B, 1, T, 1]
                full, _ = cache[0].update_and_fetch(keys, keys)
                full = np.array(full)[:, 0, :, 0].astype(np.int64)
            else:
                start, full = 0, ids
            return mx.array(self._rows(full, start, ids.shape[1]))

        def _rows(self, full, start: int, T: int):
            """Logits [B, T, V+1] at positions start..start+T-1 of ``full [B, S]`` (position 0
            the prompt id V): row t is the table row after full[:, 1:t+1]."""
            V = self.V
            _, S = full.shape
            seqs = full.tolist()  # a few tokens: read in Python ints, not one array op a token
            if S < 1 or any(seq[0] != V for seq in seqs):
                raise SpectheoryError(f"the {self.name} model reads the prompt [{V}] (the id "
                                      f"V = {V}) first")
            if S > 1 and any(not 0 <= x < V for seq in seqs for x in seq[1:]):
                raise SpectheoryError(f"the {self.name} model was handed a token outside "
                                      f"0..{V - 1} after the prompt")
            return _table_rows(self._stacked, self._starts, seqs, start, T, V, self.shift)

    return TableMLXModel


def __getattr__(name):  # the class, once MLX is importable
    if name == "TableMLXModel":
        return _model_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def mlx_models(instance: Instance, *, shift: int = 0):
    """The instance's target and draft as MLX models, and the instance the law is computed on.

    Returns ``(target, draft, law_instance)``: two `TableMLXModel` (vocabulary V + 1, the prompt
    id V; float32 kit logits, see `spectheory.testing.checks.mlx_generate`), and the instance whose
    rows are the float64 softmax of exactly those float32 logits. ``shift=1`` plants a bug in the
    target: each position returns the row of the position before (the target reads one token
    late)."""
    if not isinstance(instance, Instance):
        raise OptionError(f"an instance must be a spectheory Instance, not "
                          f"{type(instance).__name__}")
    V = instance.vocab_size
    if V + 1 > MAX_VOCAB:
        raise SizeLimitError(f"vocabulary V = {V:,} is over the limit of {MAX_VOCAB - 1:,} here")
    if isinstance(shift, bool) or shift not in (0, 1):
        raise OptionError(f"shift = {shift!r} must be 0 or 1")
    Model = _model_class()
    made, law_models = [], []
    for which, m, s in (("target", instance.target, shift), ("draft", instance.draft, 0)):
        logit_tables, law_model = _rounded(m)
        made.append(Model(logit_tables, which, s))
        law_models.append(law_model)
    law = Instance(V, instance.block_length, law_models[0], law_models[1])
    return made[0], made[1], law


# ----------------------------------------------------------------------------- the law


def _number(key, value, lo, hi, lo_open=False, hi_open=False):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)) or value < lo or value > hi \
            or (lo_open and value == lo) or (hi_open and value == hi):
        rng = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        raise OptionError(f"{key} = {value!r} must be a number in {rng}")
    return float(value)


def sampling_of(kwargs: Mapping | None, vocab_size: int, tokens: int = 1):
    """The `SamplingParams` (``order="transformers"``) that MLX-LM's ``make_sampler`` and
    ``make_logits_processors`` arguments apply, or None for plain sampling at temperature 1.
    Refuses, in one line, an argument the law does not model and a combination whose order MLX
    applies differently (see `spectheory.testing.checks.mlx_generate`)."""
    from ...inputs.processing import GREEDY_BELOW, SamplingParams

    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise OptionError(f"kwargs must be a mapping of keyword arguments or None, not "
                          f"{type(kwargs).__name__}")
    vocab_size = _whole("vocab_size", vocab_size, 1, 2**31)
    kw = dict(DEFAULTS)
    kw.update(dict(kwargs or {}))
    for key in kw:
        if key not in SAMPLER_KEYS + PROCESSOR_KEYS + LOOP_KEYS:
            raise OptionError(f"argument {key!r} is not modelled by the kit's law (modelled: "
                              f"{', '.join(SAMPLER_KEYS + PROCESSOR_KEYS + LOOP_KEYS)})")
    temp = _number("temp", kw["temp"], 0, 1e6)
    if 0 < temp < GREEDY_BELOW:  # the kit's law reads it as greedy, MLX samples at it
        raise OptionError(f"temp = {temp:g} is below {GREEDY_BELOW:g}, which the kit's law "
                          "reads as greedy (vLLM's rule) while MLX samples at it; give temp = 0 "
                          f"for greedy decoding or one >= {GREEDY_BELOW:g}")
    params: dict = {"order": "transformers"}
    if temp != 1:
        params["temperature"] = temp
    filters = []
    top_p = kw.get("top_p")
    if top_p is not None and _number("top_p", top_p, 0, 1) not in (0, 1):
        params["top_p"] = float(top_p)  # make_sampler applies top-p only for 0 < top_p < 1
        filters.append("top_p")
    min_p = kw.get("min_p")
    if min_p is not None and _number("min_p", min_p, 0, 1) != 0:
        params["min_p"] = float(min_p)
        filters.append("min_p")
    top_k = kw.get("top_k")
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0:
            raise OptionError(f"top_k = {top_k!r} must be a non-negative integer")
        if top_k > vocab_size:  # MLX reads it as a 32-bit partition index (2^63: std::bad_cast)
            raise OptionError(f"top_k = {_repr_cut(top_k, 40)} is over the vocabulary of {vocab_size} "
                              f"tokens; top_k = 0 keeps every token")
        if top_k > 0:
            params["top_k"] = int(top_k)
            filters.append("top_k")
    if filters and temp not in (0, 1):
        raise OptionError(f"temp = {temp:g} with {', '.join(filters)}: MLX applies top-p, min-p "
                          f"and top-k at temperature 1 and the temperature last, the kit's "
                          f"orders the temperature first; check them one at a time")
    if "top_p" in filters and "top_k" in filters:
        raise OptionError("top_p with top_k: MLX measures top-p on the whole row, the kit's "
                          "orders after top-k; check them one at a time")
    rp = kw.get("repetition_penalty")
    if rp is not None:
        # MLX penalises float32 logits: a penalty past 1e+-6 overflows them (1e-39 made every
        # logit infinite, and the check blamed the model for a token outside the vocabulary)
        rp = _number("repetition_penalty", rp, 1e-6, 1e6)
        if int(tokens) > REPETITION_CONTEXT:
            raise OptionError(f"tokens = {tokens} with repetition_penalty: MLX-LM penalises the "
                              f"last {REPETITION_CONTEXT} tokens only, the law the whole history;"
                              f" use at most {REPETITION_CONTEXT} tokens")
        if rp != 1:
            params["repetition_penalty"] = rp
    L = kw["num_draft_tokens"]
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or not 0 <= L <= MAX_TOKENS:
        raise OptionError(f"num_draft_tokens = {L!r} must be an integer in 0..{MAX_TOKENS}")
    try:
        sp = SamplingParams(**params)
    except TypeError as exc:
        missing = [k for k in params if k in str(exc)]
        raise OptionError(f"the kit's sampling parameters do not model "
                          f"{', '.join(missing) or 'these arguments'} yet") from None
    if sp.identity and "repetition_penalty" not in params:
        return None
    return sp


# ----------------------------------------------------------------------------- running


def generate_counts(target, draft, samples: int, tokens: int, seed: int = 0,
                    kwargs: Mapping | None = None, pace=None):
    """Counts ``[V^N]`` of the first N = ``tokens`` tokens of ``samples`` runs of
    ``speculative_generate_step(mx.array([V]), target, draft, num_draft_tokens=L, max_tokens=N,
    sampler=make_sampler(...), logits_processors=make_logits_processors(...))`` (cell: base-V
    index, first token most significant), and how many of the tokens came from the draft.
    MLX's global generator is seeded with ``seed``. Raises `SpectheoryError` in one line when the
    library raises, yields other than N tokens, or a token outside 0..V-1."""
    _require_mlx()
    import mlx.core as mx
    from mlx_lm.generate import speculative_generate_step
    from mlx_lm.sample_utils import make_logits_processors, make_sampler

    V, samples, N, seed = _count_arguments(target, samples, tokens, seed, MAX_SAMPLES,
                                           MAX_TOKENS)
    _guard_cells(V, N)
    sampling_of(kwargs, V, N)  # its refusals: a key the law does not model, a bad number
    kw = dict(DEFAULTS)
    kw.update(dict(kwargs or {}))
    # numpy scalars as Python numbers: MLX's compiled sampler refuses them ("Function arguments
    # must be trees of arrays"), after the kit's checks had taken them
    skw = {k: _plain(kw[k]) for k in SAMPLER_KEYS if kw.get(k) is not None}
    pkw = {k: _plain(kw[k]) for k in PROCESSOR_KEYS if kw.get(k) is not None}
    counts = np.zeros(V ** N, dtype=np.int64)
    weights = V ** np.arange(N - 1, -1, -1)
    drafted = 0
    mx.random.seed(int(seed) % 2**32)
    try:
        sampler = make_sampler(**skw)
        procs = make_logits_processors(**pkw) if pkw else None
        for _ in range(int(samples)):
            seq = []
            for tok, _lp, from_draft in speculative_generate_step(
                    mx.array([V], dtype=mx.uint32), target, draft,
                    num_draft_tokens=int(kw["num_draft_tokens"]), max_tokens=N, sampler=sampler,
                    logits_processors=procs):
                seq.append(int(tok))
                drafted += bool(from_draft)
            if len(seq) != N:
                raise SpectheoryError(f"speculative_generate_step yielded {len(seq)} tokens "
                                      f"{seq} for max_tokens = {N}")
            if any(not 0 <= x < V for x in seq):
                raise SpectheoryError(f"speculative_generate_step yielded a token outside "
                                      f"0..{V - 1}: {seq}")
            counts[int(np.dot(seq, weights))] += 1
            if pace is not None:
                pace(1)
    except (SpectheoryError, TimeLimitError):
        raise
    except Exception as exc:  # noqa: BLE001 - the library refusing its arguments
        first = (str(exc).strip().splitlines() or [""])[0]
        raise SpectheoryError(f"MLX-LM raised {type(exc).__name__}: {first}") from None
    return counts, drafted


@dataclass
class MLXGenerateReport(SamplerReport):
    """Result of [`check_mlx_generate`][spectheory.testing.checks.mlx_generate.check_mlx_generate]:
    a [`SamplerReport`][spectheory.testing.checks.report.SamplerReport] (``mode="step"``, ``rows``
    the instances) with ``tokens`` (N), the sampler and loop arguments, the library ``version``,
    ``drafted`` (the fraction of generated tokens accepted from the draft) and the measured
    ``seconds_per_sample``."""

    tokens: int = 0
    kwargs: dict = field(default_factory=dict)
    version: str = ""
    drafted: float = float("nan")
    seconds_per_sample: float = float("nan")

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        lines = [f"check_mlx_generate ({self.version} speculative_generate_step, the first "
                 f"{self.tokens} tokens): {'PASS' if self.passed else 'FAIL'}",
                 f"  {args}"]
        if not (self.dof == 0 and self.worst_cell is None and self.notes
                and not math.isfinite(self.min_detectable_tv)):
            lines += self._test_lines("instance(s)", "instance", finite_only=True)
        if math.isfinite(self.drafted):
            lines.append(f"  {self.drafted:.1%} of the tokens accepted from the draft")
        if math.isfinite(self.seconds_per_sample):
            lines.append(f"  {self.seconds_per_sample * 1e3:.1f} ms per sequence")
        lines.extend(f"  {n}" for n in self.notes)
        return "\n".join(lines)

    def to_json(self) -> dict:
        out = super().to_json()
        fin = (lambda x: float(x) if math.isfinite(x) else None)
        out.update({"tokens": int(self.tokens), "kwargs": dict(self.kwargs),
                    "version": self.version, "drafted": fin(self.drafted),
                    "seconds_per_sample": fin(self.seconds_per_sample)})
        return out


def check_mlx_generate(instances: Sequence | Instance | None = None, samples: int = 3_000,
                       kwargs: Mapping | None = None, tokens: int = 4, seed: int = 0,
                       alpha: float = 1e-3, *, shift: int = 0,
                       max_seconds: float | None = 3600.0) -> MLXGenerateReport:
    """Check MLX-LM's ``speculative_generate_step``, unmodified, against the exact law of the
    first ``tokens`` generated tokens; see `spectheory.testing.checks.mlx_generate`.

    Parameters
    ----------
    instances : Instance, list of Instance, or None
        Default [`default_instances`][spectheory.testing.checks.hf_generate.default_instances]
        (``random_instance(3, 2, 21)``: prefix-dependent target rows).
    samples : int
        Sequences generated, split evenly over the instances.
    kwargs : mapping, optional
        ``make_sampler`` arguments (`SAMPLER_KEYS`: temp, top_p, min_p, top_k),
        ``make_logits_processors``' ``repetition_penalty`` and the loop's ``num_draft_tokens``
        (defaults `DEFAULTS`: temp 1, 2 drafts a step). Anything else, and the combinations
        MLX orders differently from the kit, are refused in one line.
    tokens : int
        N, the generated tokens compared (``max_tokens``); N > L + 1 spans several steps.
    seed : int
        Seeds MLX's global generator (``mx.random.seed``; instance i gets seed + i).
    alpha : float in (0, 1)
        Family-wise false-alarm rate.
    shift : {0, 1}
        1 plants a bug: the target reads one token late.
    max_seconds : float or None
        Stop with a `TimeLimitError` once the measured rate projects the run past it.
    """
    version = mlx_versions()
    insts, per, alpha = _run_arguments(samples, alpha, tokens, seed, max_seconds, instances,
                                       default_instances, MAX_SAMPLES, MAX_TOKENS)
    for inst in insts:
        _guard_cells(inst.vocab_size, int(tokens))
    if kwargs is not None and not isinstance(kwargs, Mapping):  # dict([1, 2]) is a TypeError
        raise OptionError(f"kwargs must be a mapping of keyword arguments or None, not "
                          f"{type(kwargs).__name__}")
    kw = dict(DEFAULTS)
    kw.update(dict(kwargs or {}))
    N = int(tokens)
    built, laws, sp = [], [], None
    for inst in insts:  # every law before the first call
        sp = sampling_of(kw, inst.vocab_size, N)
        target, draft, law_inst = mlx_models(inst, shift=shift)
        built.append((target, draft))
        laws.append(generate_law(law_inst, N, sp))
    _enough_cells(samples, laws, per)
    pacer = _Pace(int(samples), max_seconds, "check_mlx_generate", "a sequence", after=20,
                  measured=False)
    pace = pacer.add

    observed, drafted = [], 0
    for inst_i, ((target, draft), n) in enumerate(zip(built, per)):
        obs, d = generate_counts(target, draft, n, N, seed + inst_i, kw, pace)
        observed.append(obs)
        drafted += d
    spent = time.perf_counter() - pacer.start
    tests, fam, cell, mdt, notes = _family(observed, laws, per, [t.V for t, _ in built], N,
                                           alpha)
    if sp is not None:
        notes.append(f"law against the target processed by {sp}")
    if shift:
        notes.append("planted bug: the target reads one token late (shift=1)")
    return MLXGenerateReport(fam.p_value > alpha, fam.p_value, "step", int(samples), alpha, cell,
                             mdt, "target", fam.statistic, fam.dof, len(tests), notes=notes,
                             tokens=N, kwargs=kw, version=version,
                             drafted=drafted / (N * int(samples)),
                             seconds_per_sample=spent / max(1, int(samples)))


__all__ = ["DEFAULTS", "LOOP_KEYS", "MAX_CELLS", "MAX_TOKENS", "MLXGenerateReport",
           "PROCESSOR_KEYS", "REPETITION_CONTEXT", "SAMPLER_KEYS", "check_mlx_generate",
           "generate_counts", "mlx_models", "mlx_versions", "planted_stale_cache",
           "sampling_of", "shifted_law_instance"]


@contextlib.contextmanager
def planted_stale_cache():
    """Plant a bug in the installed library for the duration of the block: after a mismatch the
    loop trims one token fewer than it should from each cache (``trim_prompt_cache(cache, n)``
    trims ``max(n - 1, 0)``), so the target keeps a rejected draft token in its history (the
    class of an off-by-one in a cache rewind). ``mlx_lm.generate.trim_prompt_cache`` is replaced
    and restored after the block."""
    import importlib

    _require_mlx()
    G = importlib.import_module("mlx_lm.generate")  # the package's `generate` is a function

    original = G.trim_prompt_cache

    def stale(cache, num_tokens):
        return original(cache, max(int(num_tokens) - 1, 0))

    G.trim_prompt_cache = stale
    try:
        yield
    finally:
        G.trim_prompt_cache = original
