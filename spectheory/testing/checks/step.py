"""Whole draft-and-verify steps: check the seam between drafting and verifying.

[`check_sampler`][spectheory.testing.checks.sampler.check_sampler] draws the drafts itself and hands
them to the verifier; [`check_proposal`][spectheory.testing.checks.sampler.check_proposal] checks
the drafting alone. A bug that couples the two (the draft's noise re-used by the recovery draw, vLLM
#47386; a q handed over that the drafts were not drawn from, Hugging Face transformers #47932;
drafts drawn in another precision than the ratio is computed in, DeepSpec #31) passes both.
[`check_step`][spectheory.testing.checks.step.check_step] runs the engine's whole step: the engine
drafts its L tokens itself, from the kit's draft model, with its own randomness, verifies them
against the kit's target model, and returns what it emits. The kit compares the emitted sequences'
law with the target law, processed by the request's sampling parameters
(`spectheory.inputs.processing`), enumerated exactly.

The step signature (torch tensors):

```text
step(request: StepRequest) -> emitted [B, L+1] int64
```

``request`` ([`StepRequest`][spectheory.testing.checks.step.StepRequest]) carries

* ``context [B, n]`` int64: the tokens emitted so far after the instance's root (n = 0 on the
  first step; the same n for every row of one call);
* ``draft`` and ``target``: the kit's models as callables
  ``model(tokens [N, m] int64) -> rows [N, m+1, V]``, as a causal language model's forward pass
  returns its logits: row j is the next-token law after the first j tokens (row 0: after the
  root). Rows are float64 probabilities (``inputs="probs"``) or float32 logits log p, -inf for a
  zero (``inputs="logits"``); always the RAW model rows: the step processes them itself;
* ``num_draft`` L, ``sampling`` (the request's
  [`SamplingParams`][spectheory.inputs.processing.SamplingParams] or None: raw rows) and
  ``draft_sampling`` (the parameters the engine drafts with, or None);
* ``generator`` (a seeded ``torch.Generator``) and ``seed`` (a fresh integer per call, for
  engines that key their noise by seed and position, as Philox kernels do).

``emitted[b]`` holds the k >= 1 tokens the step emits for row b (the accepted drafts, then the
correction or bonus token: 1 <= k <= L+1) followed by -1 (vLLM's placeholder id) in the unused
slots. A list (not a tuple) of B one-dimensional integer tensors of lengths 1..L+1 is accepted
as well.

Two comparisons:

* ``steps=1``: one step from the root; the emitted block, completed by the (processed) target to
  length L+1, against the target's law of L+1 tokens (as ``check_sampler(mode="lossless")`` does:
  Chen et al. 2023, Leviathan et al. 2023). For any lossless step the completed block has exactly
  the target law;
* ``steps=s > 1``: s consecutive steps, each handed the tokens emitted so far as its context; the
  first N = s + L tokens (truncated, or completed by the target when fewer were emitted) against
  the target's N-token law. Losslessness of every step makes every prefix of the generated
  sequence target-distributed, so a correct step passes; bugs whose effect depends on the context
  (rows after a rejection, a context-keyed noise stream) are exposed here.

Statistics (`spectheory.testing.statistics.stats`): per instance a pooled Pearson chi-square over
the V^N sequences, Bonferroni over one global and one per-instance test, so a correct step fails
with probability at most ``alpha``; the report states the smallest total-variation bias detected
with 90% power. [`detection_power`][spectheory.testing.checks.step.detection_power] gives the power
of the same family against a given exact law (for sizing a run against a known bug).

The step is user code: every call goes through `spectheory.testing.checks.report.guarded` (an
exception or ``sys.exit`` in it is one `UserCodeError` line naming it); unusable return values fail
the report with a note. Sizes are checked before anything is allocated: the V^N cells of the
comparison (`MAX_STEP_CELLS`) and each model call's rows (`MAX_MODEL_FLOATS`).

Correct steps built like the engines', for tests and as templates for wrapping a real engine:
[`vllm_v1_step`][spectheory.testing.checks.step.vllm_v1_step],
[`sglang_step`][spectheory.testing.checks.step.sglang_step],
[`transformers_step`][spectheory.testing.checks.step.transformers_step].
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ...inputs.instances import Instance, check_instance
from ...inputs.processing import (SamplingError, check_history, check_model_rows,
                                   parse_sampling, process_instance, process_rows,
                                   process_rows_along)
from ...inputs.stateful import GrammarError, check_vocabulary, kit_logits
from ...inputs.random_instances import random_instance
from ...engine.seqtree import levels, path_probabilities
from ...runtime._lazy import torch
from ...runtime.errors import (guarded_check, OptionError, SizeLimitError, SpectheoryError, TimeLimitError,
                              TooFewSamplesError,
                              as_list, check_flag, is_integer, seed_forked)
from ..statistics import stats
from ..statistics._args import level
from .calls import (_an_instance, _caller_bound, _cells, _summary, kit_seed, point_mass_figure,
                    readable, whole_ids)
from .report import MIN_EXPECTED, POWER, SamplerReport, guarded
from ...runtime.limits import shown as _repr_cut

#: Most sequences V^N one comparison enumerates (N = steps + L tokens).
MAX_STEP_CELLS = 2**20
#: Most floats one model call returns (N rows x (m+1) positions x V); a larger call is refused
#: before it is allocated.
MAX_MODEL_FLOATS = 2**25
#: Most rows handed to one step call.
STEP_CHUNK = 2**16
#: Rows of a check's first step call when an instance gets more than `STEP_CHUNK` samples: the
#: time of the whole run is projected from it (a refusal past ``max_seconds``, or a note of the
#: estimate) within seconds, not after a first call of 2^16 rows (minutes for a slow step).
PILOT_ROWS = 2**11
#: Most consecutive steps.
MAX_STEPS = 32
#: Most samples of one check.
MAX_SAMPLES = 10**9
#: Longest run a check may plan by default (``max_seconds``), seconds.
MAX_SECONDS = 24 * 3600.0

#: What the models return.
INPUTS = ("probs", "logits")
#: Placeholder for unused output slots (vLLM's ``PLACEHOLDER_TOKEN_ID``).
PLACEHOLDER = -1


def _check_inputs(inputs) -> None:
    """``inputs`` is one of `INPUTS`, else one line."""
    if not isinstance(inputs, str) or inputs not in INPUTS:
        raise OptionError(f"inputs = {_repr_cut(inputs, 40)} is not one of {', '.join(INPUTS)}")


# ----------------------------------------------------------------------------- models


class TableLM:
    """A table model (`spectheory.inputs.models.TableModel`) as a causal language model:
    ``lm(tokens [N, m] int64) -> rows [N, m+1, V]``, row j the next-token law after the first j
    tokens (beyond the table's depth, its order-D Markov extension). ``inputs="probs"``: float64
    probabilities; ``"logits"``: float32 log-probabilities (-inf for a zero). Calls are counted
    (``calls``, ``rows``); a call whose output would exceed `MAX_MODEL_FLOATS` floats, or tokens
    outside 0..V-1, raise one-line errors before anything is allocated."""

    def __init__(self, model, name: str, inputs: str = "probs"):
        from ...inputs.models import TableModel

        _check_inputs(inputs)
        if not isinstance(model, TableModel):  # (an int was an AttributeError on to_float)
            raise SpectheoryError(f"TableLM takes a TableModel (an instance's target or draft), "
                                  f"not {type(model).__name__}")
        if not isinstance(name, str):
            raise SpectheoryError(f"TableLM's name must be text, not {type(name).__name__}")
        self.model = model.to_float()
        self.name, self.inputs = name, inputs
        self.V, self.depth = model.vocab_size, model.depth
        self.tables = [torch.as_tensor(np.ascontiguousarray(t), dtype=torch.float64)
                       for t in self.model.tables]
        self.calls = 0
        self.rows = 0

    def __call__(self, tokens):
        try:
            t = torch.as_tensor(tokens)
        except Exception:  # noqa: BLE001 - strings, ragged lists, objects
            raise SpectheoryError(f"the {self.name} model takes tokens [N, m] int64, got "
                                  f"{type(tokens).__name__}") from None
        if t.dim() == 1:
            t = t.unsqueeze(0)
        if t.dim() != 2 or t.is_floating_point() or t.is_complex() or t.dtype == torch.bool \
                or t.is_meta:
            raise SpectheoryError(f"the {self.name} model takes tokens [N, m] int64, got "
                                  f"{t.dtype} of shape {list(t.shape)}"
                                  f"{' on the meta device' * t.is_meta}")
        N, m = t.shape
        V = self.V
        if N * (m + 1) * V > MAX_MODEL_FLOATS:
            raise SizeLimitError(f"a {self.name} model call of {N:,} x {m + 1} rows of V = {V} "
                                 f"is over the limit of {MAX_MODEL_FLOATS:,} floats")
        t = t.to(torch.long).cpu()
        if N and m and (int(t.min()) < 0 or int(t.max()) >= V):
            raise SpectheoryError(f"the {self.name} model was handed a token outside "
                                  f"0..{V - 1}")
        self.calls += 1
        self.rows += N
        out = torch.empty(N, m + 1, V, dtype=torch.float64)
        D = self.depth
        for j in range(min(D, m + 1)):  # positions with fewer than D tokens before them
            idx = torch.zeros(N, dtype=torch.long)
            for tok in range(j):
                idx = idx * V + t[:, tok]
            out[:, j] = self.tables[j][idx]
        if m + 1 > D:  # the others read the D tokens before them: all positions in one gather
            idx = torch.zeros(N, m + 1 - D, dtype=torch.long)  # (a loop over positions took
            for i in range(D):  # about 50 s for a call of 10^6 tokens)
                idx = idx * V + t[:, i:i + m + 1 - D]
            out[:, D:] = self.tables[D][idx]
        if self.inputs == "logits":
            return kit_logits(out).to(torch.float32)
        return out


@dataclass
class StepRequest:
    """What a step is handed (see `spectheory.testing.checks.step`).

    Attributes
    ----------
    context : torch.Tensor
        ``[B, n]`` int64, the tokens emitted so far after the root (n = 0 on the first step).
    draft, target : callable
        ``model(tokens [N, m]) -> rows [N, m+1, V]`` (raw rows: probabilities or logits).
    num_draft : int
        L, the number of tokens to draft.
    sampling, draft_sampling : SamplingParams or None
        The request's parameters (the target law is processed by them) and those the engine
        drafts with.
    inputs : {"probs", "logits"}
        What the models return. The stateful parameters of ``sampling`` (penalties,
        min_tokens, masks) read each row's history, ``context`` then the drafts before the
        row's position; penalties act on logits, which the kit hands by default when they are
        set (the kit's logits, float32): apply them to the logits as handed
        (`processed_along` does all of it).
    generator : torch.Generator
        Seeded by the kit; the step's randomness.
    seed : int
        A fresh 62-bit integer per call, drawn from the kit's seed.
    seeds : torch.Tensor or None
        ``[B]`` int64, each row's request seed (the seeded checks of
        `spectheory.testing.checks.seeds`; None elsewhere). An engine that promises seeded
        reproducibility draws row b's noise from ``seeds[b]`` and the position only.
    num_drafts : torch.Tensor or None
        ``[B]`` int64, how many of the L tokens row b may draft this step (0: a plain decoding
        step for that row); None: L for every row.
    """

    context: Any
    draft: Callable
    target: Callable
    num_draft: int
    sampling: Any = None
    draft_sampling: Any = None
    inputs: str = "probs"
    generator: Any = None
    seed: int = 0
    seeds: Any = None
    num_drafts: Any = None

    def __post_init__(self):
        """A request built by hand (to call a step directly) is checked as the kit builds its
        own: ``context`` an integer tensor [B, n], callable models, ``num_draft`` an integer in
        1..`MAX_BLOCK` (an instance's block length), ``inputs`` one of `INPUTS`, ``seeds`` and
        ``num_drafts`` None or integer tensors [B] (``num_drafts`` in 0..num_draft); else one
        line, before a step fails inside on what the kit never hands it."""
        from ...inputs.instances import MAX_BLOCK
        from ...runtime.errors import is_integer

        c = self.context
        if not isinstance(c, torch.Tensor) or c.dim() != 2 or c.is_floating_point() \
                or c.is_complex() or c.dtype == torch.bool:
            got = (f"{c.dtype} of shape {list(c.shape)}" if isinstance(c, torch.Tensor)
                   else type(c).__name__)
            raise OptionError(f"StepRequest: context must be an integer tensor [B, n] (the "
                              f"tokens after the root), not {got}")
        for name in ("draft", "target"):
            if not callable(getattr(self, name)):
                raise OptionError(f"StepRequest: {name} must be a model (tokens [N, m] -> rows "
                                  f"[N, m+1, V]), not {type(getattr(self, name)).__name__}")
        if not is_integer(self.num_draft) or not 1 <= int(self.num_draft) <= MAX_BLOCK:
            raise OptionError(f"StepRequest: num_draft = {_repr_cut(self.num_draft, 40)} must be an "
                              f"integer in 1..{MAX_BLOCK}")
        _check_inputs(self.inputs)
        B, L = c.shape[0], int(self.num_draft)
        for name, lo, hi in (("seeds", None, None), ("num_drafts", 0, L)):
            v = getattr(self, name)
            if v is None:
                continue
            if not isinstance(v, torch.Tensor) or tuple(v.shape) != (B,) \
                    or v.is_floating_point() or v.is_complex() or v.dtype == torch.bool:
                got = (f"{v.dtype} of shape {list(v.shape)}" if isinstance(v, torch.Tensor)
                       else type(v).__name__)
                raise OptionError(f"StepRequest: {name} must be an integer tensor [B] = [{B}] "
                                  f"(one per row of the context) or None, not {got}")
            if lo is not None and B and not (lo <= int(v.min()) and int(v.max()) <= hi):
                raise OptionError(f"StepRequest: num_drafts must lie in 0..num_draft = 0..{L}, "
                                  f"got {v.tolist()[:8]}")


def _model_rows(rows, what: str = "rows"):
    """``rows`` [..., V] as a real float tensor (array-likes read by ``torch.as_tensor``), else
    one line naming what it is."""
    if not isinstance(rows, torch.Tensor):
        try:
            rows = torch.as_tensor(rows)
        except Exception:  # noqa: BLE001 - anything that is not array-like
            raise SamplingError(f"{what} must be a tensor [..., V] of model rows, not "
                                f"{type(rows).__name__}") from None
    if rows.is_complex() or rows.dtype == torch.bool or rows.dim() == 0 or rows.is_meta:
        raise SamplingError(f"{what} must be real model rows [..., V], not {rows.dtype} of "
                            f"shape {list(rows.shape)}{' on the meta device' * rows.is_meta}")
    return rows


def _token_ids(tokens):
    """A list of token ids ``[B, m]`` as the tensor it spells, or one line naming what it is."""
    try:
        t = torch.as_tensor(tokens)
    except Exception:  # noqa: BLE001 - strings, ragged lists, objects
        raise SamplingError(f"tokens must be token ids [B, m], not {type(tokens).__name__}"
                            ) from None
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise SamplingError(f"tokens must be integer token ids [B, m], not {t.dtype}")
    return t


def rows_as_probs(rows, inputs: str):
    """Model rows as float64 probabilities (a float32 softmax of logits, as engines compute it,
    then float64). ``inputs`` is "probs" or "logits"; anything else is refused (a misspelt
    "logit" returned the logits as probabilities), as are rows that are neither
    (`spectheory.inputs.processing.check_model_rows`: a NaN, +inf or an all -inf row of
    logits; a negative or infinite entry or a zero row of probabilities)."""
    _check_inputs(inputs)
    rows = _model_rows(rows)
    check_model_rows(rows, inputs)
    if inputs == "logits":
        return torch.softmax(rows.to(torch.float32), dim=-1).to(torch.float64)
    return rows.to(torch.float64)


def processed(rows, params, inputs: str = "probs", history=None):
    """The rows a step drafts from / verifies against: `process_rows` of the probabilities
    (``params`` None: the rows as they are), float64 ``[..., V]``. ``history [..., n]``: the
    tokens each row follows since the instance's root (the step's context, then the drafts
    before the row's position), which the stateful parameters read
    (`spectheory.inputs.stateful`); with ``inputs="logits"`` they act on the handed logits."""
    _check_inputs(inputs)
    rows = _model_rows(rows)
    params = parse_sampling(params)
    if params is not None and params.stateful:
        if inputs == "logits":
            return process_rows(rows.to(torch.float64), params, "logits", history=history)
        return process_rows(rows.to(torch.float64), params, history=history)
    if params is None:
        probs = rows_as_probs(rows, inputs)
        if history is not None:  # checked as process_rows checks a history it is given (one
            check_history(history, probs.shape)  # per row, ids in 0..V-1)
        return probs
    # with parameters, process_rows checks the probabilities itself (the logits are checked
    # by rows_as_probs before their softmax), and the history when one is given
    probs = rows_as_probs(rows, inputs) if inputs == "logits" else rows.to(torch.float64)
    return process_rows(probs, params, history=history)


def processed_along(rows, tokens, params, inputs: str = "probs"):
    """Processed rows ``[B, m+1, V]`` along ``tokens [B, m]`` (what a model call on ``tokens``
    returns): row j follows ``tokens[:, :j]``."""
    _check_inputs(inputs)
    rows = _model_rows(rows)
    params = parse_sampling(params)
    if params is None or not params.stateful:
        return processed(rows, params, inputs)
    # `processed` of each position with its own history, all positions in one pass
    if not hasattr(tokens, "shape"):
        tokens = _token_ids(tokens)  # a list of ids: read as the tensor it spells
    return process_rows_along(rows.to(torch.float64), tokens, params,
                              "logits" if inputs == "logits" else "probs")


# ----------------------------------------------------------------------------- the check


@dataclass
class StepReport(SamplerReport):
    """Result of [`check_step`][spectheory.testing.checks.step.check_step]: a
    [`SamplerReport`][spectheory.testing.checks.report.SamplerReport] (``mode="step"``, ``rows`` the
    instances) with ``steps`` (consecutive steps per sample), ``tokens`` (N = steps + L per
    instance, the length of the compared sequences) and ``step`` (the step's name)."""

    steps: int = 1
    tokens: list = None
    step: str = ""

    def __str__(self) -> str:
        how = ("one step, the emitted block completed by the target to L+1 tokens"
               if self.steps == 1 else f"{self.steps} consecutive steps, the first "
               f"{self.steps} + L tokens")
        lines = [f"check_step ({how}): {'PASS' if self.passed else 'FAIL'}"]
        if self.dof == 0 and self.worst_cell is None and self.notes:
            pass
        else:
            lines.append(f"  step {self.step}")
            lines += self._test_lines("instance(s)", "instance", finite_only=True)
        lines.extend(f"  {n}" for n in self.notes)
        return "\n".join(lines)

    def to_json(self) -> dict:
        out = super().to_json()
        out.update({"steps": int(self.steps), "tokens": [int(t) for t in self.tokens or []],
                    "step": self.step})
        return out


def default_step_instances() -> list:
    """Small prefix-dependent instances (a different conditional after every prefix), so that
    ``steps`` up to 3 stay within `MAX_STEP_CELLS`: ``random_instance(3, 2, 21)`` and
    ``random_instance(2, 3, 22, alpha=0.5)``."""
    return [random_instance(3, 2, 21), random_instance(2, 3, 22, alpha=0.5)]


def resolve_inputs(inputs, sampling) -> str:
    """What the model callables return: ``inputs`` as given, or by default float32 logits when
    the request's parameters act on logits (penalties, added biases: the step applies them to
    the logits it is handed, as engines do, and the law is the same logits' law) and float64
    probabilities otherwise."""
    if inputs is not None:
        return inputs
    sp = parse_sampling(sampling)
    return "logits" if sp is not None and sp.on_logits else "probs"


def _check_args(samples, alpha, steps, inputs) -> float:
    """Refuse bad common arguments in one line; returns ``alpha`` as a float."""
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or \
            not 1 <= samples <= MAX_SAMPLES:
        raise OptionError(f"samples = {samples!r} must be an integer in 1..{MAX_SAMPLES:,}")
    alpha = level("alpha", alpha)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or \
            not 1 <= steps <= MAX_STEPS:
        raise OptionError(f"steps = {steps!r} must be an integer in 1..{MAX_STEPS}")
    _check_inputs(inputs)
    return alpha


def _emitted(out, b: int, L: int, V: int, who: str):
    """The step's output as (tokens [b, L+1] with -1 padding, counts [b]), or a note; an output
    that raises when read (a sparse, nested or quantized tensor, a list whose ``len`` raises) is
    a note too, not a traceback from inside the kit."""
    try:
        return _emitted_tokens(out, b, L, V, who)
    except (KeyboardInterrupt, TimeLimitError):
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the step's object does when read
        return None, (f"{who} returned a {type(out).__name__} that cannot be read as emitted "
                      f"tokens ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})")


def _emitted_tokens(out, b: int, L: int, V: int, who: str):
    if isinstance(out, list) and len(out) == b and all(
            hasattr(x, "shape") or isinstance(x, (list, tuple)) for x in out):
        rows = []
        for x in out:
            try:
                t = torch.as_tensor(x).reshape(-1)
            except Exception:  # noqa: BLE001 - anything not array-like
                return None, f"{who} returned a row that is not a tensor of tokens"
            if t.numel() == 0:  # (an empty list reads as float32: name the count, not a dtype)
                return None, f"{who} returned a row of 0 tokens; a step emits 1..{L + 1}"
            if t.is_complex() or t.dtype == torch.bool:
                return None, f"{who} returned {t.dtype} tokens, not integers"
            t, note = readable(t, "a row of emitted tokens")
            if not note:
                t, note = whole_ids(t, "a row of emitted tokens")  # 2.0 is token 2
            if note:
                return None, f"{who} returned {note}"
            if not 1 <= t.numel() <= L + 1:
                return None, (f"{who} returned a row of {t.numel()} tokens; a step emits 1.."
                              f"{L + 1}")
            rows.append(torch.cat([t.to(torch.long), torch.full((L + 1 - t.numel(),),
                                                                PLACEHOLDER)]))
        out = torch.stack(rows) if rows else torch.empty(0, L + 1, dtype=torch.long)
    try:
        t = torch.as_tensor(out)
    except Exception:  # noqa: BLE001
        return None, f"{who} returned {type(out).__name__}, not emitted tokens [B, L+1]"
    if t.dtype == torch.bool or t.is_complex():
        return None, f"{who} returned {t.dtype} tokens, not integers"
    if tuple(t.shape) != (b, L + 1):
        return None, (f"{who} returned emitted tokens of shape {list(t.shape)} for {b} rows "
                      f"and L = {L}; expected [{b}, {L + 1}] padded with -1")
    unsigned = t.dtype in (torch.uint8, getattr(torch, "uint16", None),
                           getattr(torch, "uint32", None), getattr(torch, "uint64", None))
    t, note = readable(t, "emitted tokens")
    if not note:
        t, note = whole_ids(t, "emitted tokens")  # 2.0 is token 2, as in chain mode
    if note:
        return None, f"{who} returned {note}"
    valid = t >= 0
    if ((t < PLACEHOLDER) | (t >= V)).any():
        return None, (f"{who} returned a token outside 0..{V - 1} (and -1 for unused slots)"
                      + (f"; its {out.dtype if hasattr(out, 'dtype') else 'unsigned'} tokens "
                         "cannot hold the -1 padding (it wraps around): return a signed "
                         "integer dtype" if unsigned else ""))
    count = valid.sum(1)
    prefix = torch.cumprod(valid.to(torch.long), dim=1).sum(1)
    if (count != prefix).any():
        return None, f"{who} returned a -1 before an emitted token (tokens must come first)"
    if (count < 1).any():
        return None, f"{who} emitted no token for some row (a step emits at least one)"
    return (t, count), None


def _failed(samples, alpha, who, note, rows, steps, tokens: list) -> StepReport:
    return StepReport(False, 0.0, "step", samples, alpha, None, float("nan"), "target",
                      rows=rows, notes=[note], steps=steps, tokens=tokens, step=who)


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def target_sequence_law(instance: Instance, tokens: int, sampling=None) -> np.ndarray:
    """The (processed) target's law of the first ``tokens`` tokens, float64 ``[V^tokens]``
    (flat index: base-V number of the sequence, first token most significant)."""
    _an_instance(instance, "target_sequence_law")
    V = instance.vocab_size
    _guard_cells(V, tokens)
    inst = process_instance(instance.to_float(), sampling, None, exact=False)
    pl = levels(inst.target, 0, tokens, False)
    return path_probabilities(pl, torch.ones(1, dtype=torch.float64))[tokens].numpy()


def _check_tables(instance: Instance, i: int) -> None:
    """Refuse, in one line naming the instance, the table and the prefix, an instance built in
    Python whose float rows hold a non-finite or negative entry or do not sum to 1 (files are
    checked when read): its law would be NaN or not a law, and the fault is the input's, not
    the samples' or the step's."""
    from .rows import bad_row

    found = bad_row(instance, sums=True)
    if found is not None:
        which, _, prefix, row = found
        raise OptionError(f"instance {i}: the {which} row after prefix {prefix} is not a "
                          f"distribution ({np.array2string(row, precision=4)}); every row "
                          f"must be finite, non-negative and sum to 1")


def cells_over(V: int, N, limit: int, what: str) -> bool:
    """Whether the V^N sequences of N tokens are over ``limit``, decided without making V^N
    when N alone says so (V^N for N = 10^15 is one big-integer power that never returns); N not
    an integer >= 1: an [`OptionError`][spectheory.runtime.errors.OptionError] naming ``what``."""
    if not is_integer(N) or N < 1:
        raise OptionError(f"{what}: N = {_repr_cut(N, 40)} tokens must be an integer >= 1")
    return N * math.log2(max(V, 2)) > math.log2(limit) + 1 or V ** N > limit


def _cells_text(V: int, N: int) -> str:
    return f"{V}^{N} = {V ** N:,}" if N * math.log2(max(V, 2)) < 128 else f"{V}^{N}"


def _reachable_rows_defined(inst, steps: int, L: int, sp, i: int) -> None:
    """Refuse, before the first call, parameters that leave no token after a history the steps
    reach: the last step's context has up to c = min(N - 1, (steps - 1)(L + 1)) emitted tokens
    (N = steps + L), and it reads the processed target rows after c + L tokens at most, past the
    N - 1 the law over N tokens reads when steps > 1. Every target-reachable history of up to
    c + L tokens is checked. Only masks can empty a row (stateful parameters); skipped where
    V^(c+L+1) is past `MAX_STEP_CELLS` (the step then meets the row itself)."""
    N = steps + L
    depth = min(N - 1, (steps - 1) * (L + 1)) + L + 1  # the law over `depth` tokens reads them
    if sp is None or not sp.stateful or depth <= N or \
            cells_over(inst.vocab_size, depth, MAX_STEP_CELLS, ""):
        return
    try:
        target_sequence_law(inst, depth, sp)
    except GrammarError as exc:
        raise GrammarError(f"instance {i}: {exc}: a step reads the target's row there (a context "
                           f"of up to {depth - L - 1} tokens and L = {L} drafts after it), so "
                           f"the sampling parameters leave no law to verify with; the instance "
                           f"and parameters are at fault, not the step") from None


def _guard_cells(V: int, N: int) -> None:
    if cells_over(V, N, MAX_STEP_CELLS, "check_step"):
        raise SizeLimitError(f"check_step enumerates V^N = {_cells_text(V, N)} sequences "
                             f"(N = steps + L tokens), over the limit of {MAX_STEP_CELLS:,}; use "
                             f"fewer steps or a smaller instance")


class _Pace:
    """Samples against time: honours a `spectheory.runtime.limits` time limit after every call,
    and once a call has been timed stops with a `TimeLimitError` when the rate measured so far
    projects the whole run past ``max_seconds``."""

    def __init__(self, total: int, max_seconds: float | None, what: str = "check_step",
                 unit: str = "a sample", after: int = 1, measured: bool = True):
        self.total, self.max_seconds = int(total), max_seconds
        self.what, self.unit, self.after, self.measured = what, unit, int(after), measured
        self.start = time.perf_counter()
        self.done = 0
        self.noted = False

    def add(self, m: int) -> None:
        from ...runtime.limits import NOTE_SECONDS, check_time, human_seconds, note

        check_time(f" in {self.what}", "fewer samples")
        self.done += int(m)
        if self.done < max(self.after, 1):
            return
        spent = time.perf_counter() - self.start
        projected = spent / self.done * self.total
        if not self.noted and projected > NOTE_SECONDS and (self.max_seconds is None or
                                                            projected <= self.max_seconds):
            self.noted = True  # once, on the first measurement
            note(f"{self.what}: {self.total:,} samples, estimated {human_seconds(projected)} "
                 f"({spent / self.done:.3g} s {self.unit}, measured on the first "
                 f"{self.done:,}); --time-limit SECONDS bounds it")
        if self.max_seconds is None:
            return
        if projected > self.max_seconds:
            on = f", measured on the first {self.done:,}" if self.measured else ""
            raise TimeLimitError(
                f"samples = {self.total:,} would take about {human_seconds(projected)} "
                f"({spent / self.done:.3g} s {self.unit}{on}), "
                f"over max_seconds = {self.max_seconds:g}; lower samples or raise max_seconds")


def _run_instance(step, who, inst, n, L, steps, sp, dp, inputs, g, sg, pace=None):
    """Counts [V^N] of the first N tokens over ``n`` samples, or a note."""
    V = inst.vocab_size
    N = steps + L
    draft_lm = TableLM(inst.draft, "draft", inputs)
    target_lm = TableLM(inst.target, "target", inputs)
    proc_target = process_instance(inst, sp, None, exact=False).target
    obs = np.zeros(V ** N, dtype=np.int64)
    done = 0
    while done < n:
        m = min(STEP_CHUNK, n - done)
        if pace is not None and pace.done == 0 and n > STEP_CHUNK:
            m = PILOT_ROWS  # a first call measured before 2^16 rows: the run's time projected
        seq = torch.full((m, N + L + 1), PLACEHOLDER, dtype=torch.long)
        count = torch.zeros(m, dtype=torch.long)
        for _ in range(steps):
            for c in torch.unique(count[count < N]).tolist():
                sel = torch.nonzero(count == c).squeeze(1)
                ctx = seq[sel, :c].clone()
                seed = int(torch.randint(0, 2**62, (1,), generator=sg))
                req = StepRequest(ctx, draft_lm, target_lm, L, sp, dp, inputs, sg, seed)
                out = step(req)
                res, note = _emitted(out, len(sel), L, V, who)
                if note:
                    return None, note
                toks, k = res
                for j in range(L + 1):
                    put = j < k
                    rows = sel[put]
                    seq[rows, c + j] = toks[put, j]
                count[sel] += k
        # complete by the processed target
        need = count < N
        if need.any():
            rows = torch.nonzero(need).squeeze(1)
            for j in range(N):
                miss = rows[count[rows] <= j]
                if not len(miss):
                    continue
                cond = _rows_after(proc_target, seq[miss, :j], V)
                seq[miss, j] = torch.multinomial(cond, 1, generator=g)[:, 0]
                count[miss] = j + 1
        idx = torch.zeros(m, dtype=torch.long)
        for j in range(N):
            idx = idx * V + seq[:, j]
        obs += np.bincount(idx.numpy(), minlength=V ** N)
        done += m
        if pace is not None:
            pace.add(m)
    return obs, None


def _rows_after(model, prefix, V):
    """Conditionals [b, V] of a TableModel after each row of ``prefix [b, j]`` (a processed
    model's level j holds the rows processed with their histories)."""
    b, j = prefix.shape
    D = j if getattr(model, "params", None) is not None else model.depth
    k = min(j, D)
    idx = torch.zeros(b, dtype=torch.long)
    for t in range(j - k, j):
        idx = idx * V + prefix[:, t]
    return torch.as_tensor(np.ascontiguousarray(model.level(k)), dtype=torch.float64)[idx]


def _label(inst_i, c, V, N):
    if c < 0:
        return f"instance {inst_i}: pooled sequences (expected < {MIN_EXPECTED:g} each)"
    toks = [(int(c) // V ** (N - 1 - j)) % V for j in range(N)]
    return f"instance {inst_i}: sequence {tuple(toks)}"


@guarded_check
def check_step(step: Callable, instances: Sequence | None = None, samples: int = 20_000,
               alpha: float = 1e-3, seed: int = 0, *, steps: int = 1, sampling=None,
               draft_sampling=None, inputs: str | None = None,
               num_draft: int | None = None,
               max_seconds: float | None = MAX_SECONDS) -> StepReport:
    """Check a whole draft-and-verify ``step`` against the (processed) target law; see
    `spectheory.testing.checks.step`.

    Parameters
    ----------
    step : callable
        ``step(request: StepRequest) -> emitted [B, L+1] int64`` (-1 padded).
    instances : list of Instance, optional
        Default [`default_step_instances`][spectheory.testing.checks.step.default_step_instances]
        (prefix-dependent rows).
    samples : int
        Sequences generated, split evenly over the instances.
    alpha : float in (0, 1)
        Family-wise false-alarm rate (Bonferroni over one global and one per-instance
        chi-square).
    seed : int
        Seeds the generator handed to the step and the kit's target completions.
    steps : int
        1: one step, its block completed by the target to L+1 tokens; s > 1: s consecutive
        steps, the first s + L tokens compared.
    sampling, draft_sampling : optional
        The request's sampling parameters (the law is the target processed by them) and the
        engine's drafting parameters, handed to the step (anything
        [`parse_sampling`][spectheory.inputs.processing.parse_sampling] accepts).
    inputs : {"probs", "logits"}, optional
        What the model callables return (raw rows either way). Default: ``"logits"`` (the
        kit's logits, `spectheory.inputs.stateful.kit_logits`, float32) when ``sampling``
        has a penalty or an added bias, which act on logits, and ``"probs"`` otherwise. The
        law is computed from the float64 rows; a greedy step handed float32 logits may break a
        near-tie (two probabilities within float32's resolution) otherwise than the law does.
    num_draft : int, optional
        L handed to the step (default: the instance's block length).
    max_seconds : float or None
        Stop with a `TimeLimitError` once the rate measured on the calls so far projects the run
        past it (default one day; None: no limit). A run under ``--time-limit`` stops there.

    Returns
    -------
    StepReport
    """
    inputs = resolve_inputs(inputs, sampling)
    alpha = _check_args(samples, alpha, steps, inputs)
    seed = kit_seed(seed)
    if not callable(step):
        raise OptionError(f"the step is {type(step).__name__}, not a function")
    sp, dp = parse_sampling(sampling), parse_sampling(draft_sampling)
    insts = (default_step_instances() if instances is None
             else as_list(instances, "instances", "spectheory Instances", lone=(Instance,)))
    if not insts:
        raise OptionError("no instances to check the step on")
    for i, inst in enumerate(insts):
        if not isinstance(inst, Instance):
            raise OptionError(f"an instance must be a spectheory Instance, not "
                              f"{type(inst).__name__}")
        _check_tables(inst, i)
        for which, params in (("sampling", sp), ("draft_sampling", dp)):
            if params is not None:  # a draft token outside V was blamed on the step
                try:
                    check_vocabulary(params, inst.vocab_size)
                except OptionError as exc:
                    raise OptionError(f"{which}: {exc} (instance {i})") from None
    _check_num_draft(num_draft)
    Ls = [int(num_draft) if num_draft is not None else inst.block_length for inst in insts]
    for inst, L in zip(insts, Ls):  # every size before the first call
        _guard_cells(inst.vocab_size, steps + L)
    per = _split(int(samples), len(insts))
    if min(per) < 1:
        raise TooFewSamplesError(f"samples = {samples} is fewer than the {len(insts)} instances", len(insts))
    insts = [inst.to_float() for inst in insts]  # once: the law, the draft's and the runs
    laws = []
    for i, (inst, L) in enumerate(zip(insts, Ls)):
        try:
            laws.append(target_sequence_law(inst, steps + L, sp))
        except GrammarError as exc:  # the line names the instance, as the other refusals do
            raise GrammarError(f"instance {i}: {exc}") from None
        _reachable_rows_defined(inst, steps, L, sp, i)
        if dp is not None:  # a draft with no law was blamed on the step's first call
            try:
                process_instance(inst, None, dp, exact=False)
            except GrammarError as exc:
                raise GrammarError(f"instance {i}: {exc}: the draft_sampling parameters leave "
                                   f"no law to draft from; the instance and parameters are at "
                                   f"fault, not the step") from None
    point = [bool(probs.max() >= 1 - 1e-12) for probs in laws]
    for inst_i, (probs, n) in enumerate(zip(laws, per)):
        if not point[inst_i] and stats.row_chi_square(probs * n, probs, n, MIN_EXPECTED).dof < 1:
            from ...runtime.errors import TooFewSamplesError

            need = stats.samples_for_a_test(probs, MIN_EXPECTED)
            total = None if need is None else need * len(insts)
            if total is not None and total > MAX_SAMPLES:  # advice that --samples refuses
                raise TooFewSamplesError(
                    f"instance {inst_i} cannot be tested by sampling: its law is within "
                    f"{1 - float(probs.max()):.2g} of one sequence, and two cells of expected "
                    f"count >= {MIN_EXPECTED:g} need at least {total:,} samples, over the "
                    f"limit of {MAX_SAMPLES:,}", total)
            raise TooFewSamplesError(
                f"samples = {samples:,} leave instance {inst_i} with fewer than two cells of "
                f"expected count >= {MIN_EXPECTED:g}: nothing would be tested; use more samples"
                + ("" if total is None else f" (at least {total:,})"), total or 0)
    step = guarded(step, "step")
    who = step._spectheory_label.removeprefix("step ")
    g = torch.Generator().manual_seed(int(seed))
    sg = torch.Generator().manual_seed(int(seed) + 1)
    if max_seconds is not None and not (isinstance(max_seconds, (int, float)) and
                                        not isinstance(max_seconds, bool) and max_seconds > 0):
        raise OptionError(f"max_seconds = {max_seconds!r} must be a positive number or None")
    pace = _Pace(samples, max_seconds)
    tests, worst, impossible = [], None, None
    for inst_i, (inst, L, n) in enumerate(zip(insts, Ls, per)):
        V, N = inst.vocab_size, steps + L
        with _caller_bound(max_seconds, MAX_SECONDS):  # a step call that never returns
            obs, note = _run_instance(step, who, inst, n, L, steps, sp, dp, inputs, g, sg, pace)
        if note:
            return _failed(samples, alpha, who, note, len(insts), steps,
                           [steps + L for L in Ls])
        probs = laws[inst_i]
        t = stats.row_chi_square(obs, probs, n, MIN_EXPECTED)
        tests.append(t)
        impossible, worst = _cells(t, probs, obs, lambda c, i=inst_i: _label(i, c, V, N),
                                   "target probability 0", impossible, worst)
    fam, cell, mdt, notes = _summary(tests, alpha, worst, impossible,
                                     "sequences of target probability zero")
    if all(point):  # every law a point mass (greedy): any bias puts mass on a zero sequence
        mdt, note = point_mass_figure(min(per))
        notes.append(note)
    if sp is not None and not sp.identity:
        notes.append(f"law against the target processed by {sp}; the step was handed the raw "
                     f"rows")
    if dp is not None and not dp.identity:
        notes.append(f"the step was asked to draft with {dp}")
    if inputs == "logits":
        notes.append("model rows handed as float32 logits (the kit's: log p shifted per row so "
                      "that both signs occur)")
    return StepReport(fam.p_value > alpha, fam.p_value, "step", int(samples), alpha, cell, mdt,
                      "target", fam.statistic, fam.dof, len(tests), notes=notes, steps=steps,
                      tokens=[steps + L for L in Ls], step=who)


def _check_num_draft(num_draft) -> None:
    """``num_draft`` (the request's L): None (the instance's L) or an integer in 1..64."""
    if num_draft is not None and (isinstance(num_draft, (bool, np.bool_)) or
                                  not isinstance(num_draft, (int, np.integer)) or
                                  not 1 <= num_draft <= 64):
        raise OptionError(f"num_draft = {_repr_cut(num_draft, 40)} must be an integer in 1..64")


def sample_steps(step: Callable, instance: Instance, samples: int, seed: int = 0, *,
                 steps: int = 1, sampling=None, draft_sampling=None, inputs: str | None = None,
                 num_draft: int | None = None) -> np.ndarray:
    """Counts ``[V^N]`` of the first N = steps + L tokens of ``samples`` runs of ``step`` on
    ``instance`` (completed by the processed target as in
    [`check_step`][spectheory.testing.checks.step.check_step], the same seeds): for comparing a step
    with a law other than the target's (a bug's exact law). Raises `UserCodeError` when the step
    returns something unusable."""
    from ...runtime.errors import UserCodeError

    inputs = resolve_inputs(inputs, sampling)
    _check_args(samples, 0.5, steps, inputs)
    seed = kit_seed(seed)
    _check_num_draft(num_draft)
    check_instance(instance)
    L = instance.block_length if num_draft is None else int(num_draft)
    _guard_cells(instance.vocab_size, steps + L)
    step = guarded(step, "step")
    who = step._spectheory_label.removeprefix("step ")
    g = torch.Generator().manual_seed(int(seed))
    sg = torch.Generator().manual_seed(int(seed) + 1)
    obs, note = _run_instance(step, who, instance.to_float(), int(samples), L, steps,
                              parse_sampling(sampling), parse_sampling(draft_sampling), inputs,
                              g, sg)
    if note:
        raise UserCodeError(note)
    return obs


def assert_step(step: Callable, **kwargs) -> StepReport:
    """[`check_step`][spectheory.testing.checks.step.check_step], raising ``AssertionError`` with
    the report's text on failure; returns the report when it passes."""
    report = check_step(step, **kwargs)
    if not report.passed:
        raise AssertionError(str(report))
    return report


def detection_power(law, target, samples: int, alpha: float = 1e-3,
                    min_expected: float = MIN_EXPECTED) -> float:
    """Power of one instance's test in [`check_step`][spectheory.testing.checks.step.check_step]
    (one instance: the family is its global and per-instance test, both at alpha/2) against a
    step whose sequences follow ``law`` while the reference is ``target`` (both ``[V^N]``):
    the target's cells with expected count below ``min_expected`` pooled as the check pools
    them, the statistic's law approximated by the non-central chi-square with non-centrality
    samples * chi^2(law, target) on the pooled cells (Cohen 1988, ch. 7). A sequence of target
    probability zero with positive ``law`` fails the check whenever it is seen: the power is
    then at least 1 - (1 - mass)^samples. Refused in one line, before any work: ``samples``
    not an integer in 1..`MAX_SAMPLES`, ``alpha`` not strictly between 0 and 1, ``law`` or
    ``target`` not a finite non-negative row summing to 1 (`spectheory.law.ROW_SUM_TOL`), or
    rows of different lengths."""
    from ..statistics import _args
    from ..statistics._chisq import chi2, ncx2

    samples = _args.integer("samples", samples, 1, MAX_SAMPLES)
    alpha = _args.level("alpha", alpha)
    min_expected = _args.real("min_expected", min_expected, 0.0)
    P = _args.prob_row("target", target)
    Q = _args.prob_row("law", law)
    if P.shape != Q.shape:
        raise OptionError(f"law has {Q.shape[0]} cells and target {P.shape[0]}; both are laws "
                          f"on the same V^N sequences")
    zero = P <= 0
    bad_mass = float(Q[zero].sum())
    big = (samples * P >= min_expected) & ~zero
    p_bins = list(P[big])
    q_bins = list(Q[big])
    rest_p = float(P[~big & ~zero].sum())
    rest_q = float(Q[~big & ~zero].sum())
    if rest_p * samples > 1e-9:
        if rest_p * samples < min_expected and p_bins:
            j = int(np.argmin(p_bins))
            p_bins[j] += rest_p
            q_bins[j] += rest_q
        else:
            p_bins.append(rest_p)
            q_bins.append(rest_q)
    p_bins, q_bins = np.array(p_bins), np.array(q_bins)
    dof = len(p_bins) - 1
    hit = 1.0 - (1.0 - bad_mass) ** samples
    if dof < 1:
        return hit
    lam = samples * float(((q_bins - p_bins) ** 2 / p_bins).sum())
    crit = chi2.isf(alpha / 2, dof)
    return max(hit, float(ncx2.sf(crit, dof, lam)))


# ----------------------------------------------------------------------------- correct steps


def _draft_rows(request, tokens):
    """Processed draft rows [B, V] after context + tokens (one model call; the stateful
    parameters read context + tokens)."""
    seq = torch.cat([request.context, tokens], dim=1)
    rows = request.draft(seq)[:, -1]
    return processed(rows, request.draft_sampling, request.inputs, history=seq)


def _target_rows(request, drafts):
    """Processed target rows [B, L+1, V] along context + drafts (one model call; row j reads
    the history context + drafts[:j])."""
    seq = torch.cat([request.context, drafts], dim=1)
    n = request.context.shape[1]
    rows = request.target(seq)
    return processed_along(rows, seq, request.sampling, request.inputs)[:, n:]


def _streams(request, k: int):
    """k disjoint generators keyed by the request's seed (as engines salt Philox offsets)."""
    return [torch.Generator().manual_seed((int(request.seed) + 0x9E3779B97F4A7C15 * (i + 1))
                                          % 2**63) for i in range(k)]


def vllm_v1_step(request: StepRequest):
    """A correct step built like vLLM V1 with probabilistic drafting.

    Drafting: each draft token is the winner of an exponential race over the processed draft
    row, argmax q(x) / E_x with E ~ Exp(1) (the Gumbel-max trick in vLLM's form), from the draft
    stream. Verification: the port
    [`vllm_rejection_sample`][spectheory.testing.engines.adapters.vllm_rejection_sample] of V1's
    rejection kernel with float64 acceptance uniforms from a second stream, recovered tokens by
    [`vllm_sample_recovered_tokens`][spectheory.testing.engines.adapters.vllm_sample_recovered_tokens]
    with exponentials from a third, and the bonus token sampled from the processed target row
    from a fourth (disjoint streams: the fix of vLLM #47386 / #54282)."""
    from ..engines.adapters import flatten_drafts, vllm_rejection_sample, vllm_sample_recovered_tokens

    ctx = request.context
    Bsz, L = ctx.shape[0], request.num_draft
    g_draft, g_coin, g_rec, g_bonus = _streams(request, 4)
    drafts = torch.empty(Bsz, 0, dtype=torch.long)
    qs = []
    for _ in range(L):
        q = _draft_rows(request, drafts)  # [B, V]
        e = torch.empty_like(q).exponential_(generator=g_draft)
        x = torch.argmax(q / e, dim=-1)
        qs.append(q)
        drafts = torch.cat([drafts, x.unsqueeze(1)], dim=1)
    q = torch.stack(qs, dim=1)  # [B, L, V]
    p = _target_rows(request, drafts)  # [B, L+1, V]
    V = q.shape[-1]
    ids, cu = flatten_drafts(drafts)
    u = torch.rand(Bsz * L, generator=g_coin, dtype=torch.float64)
    rec = vllm_sample_recovered_tokens(ids, cu, q.reshape(-1, V), p[:, :L].reshape(-1, V), g_rec)
    bonus = torch.multinomial(p[:, L], 1, generator=g_bonus)[:, 0]
    return vllm_rejection_sample(ids, cu, L, q.reshape(-1, V), p[:, :L].reshape(-1, V), bonus, u,
                                 rec)


def sglang_step(request: StepRequest, *, reuse_coin: bool = False):
    """A correct step built like SGLang's chain (EAGLE chain drafts verified by
    ``chain_speculative_sampling``).

    Drafting: ``torch.multinomial`` of the processed draft rows from the draft stream.
    Verification: the port
    [`sglang_chain_sample`][spectheory.testing.engines.adapters.sglang_chain_sample] with the
    acceptance coins ``uniform_samples [B, L+1]`` in (0, 1] (1 - ``torch.rand``) and a separate coin
    for the final (correction or bonus) token, as SGLang PR #7207 made it (``reuse_coin=True``
    plants the bug it fixed: see `spectheory.testing.mutants.steps`)."""
    from ..engines.adapters import sglang_chain_sample

    reuse_coin = check_flag(reuse_coin, "reuse_coin")  # 'no' would plant the bug
    Bsz, L = request.context.shape[0], request.num_draft
    q, drafts, coins, p, final = _sglang_chain_inputs(request)
    if reuse_coin:
        # the coin of the last acceptance test: the rejected position's, or position L's
        tau0 = _sglang_tau(q, drafts, coins, p)
        final = coins[torch.arange(Bsz), tau0.clamp(max=L - 1)]
    out, _ = sglang_chain_sample(q, drafts, coins, p, final)
    return out


def _sglang_chain_inputs(request: StepRequest, drafting_law=None):
    """The inputs of SGLang's chain sampler for a step: ``(q [B, L, V], drafts [B, L],
    coins [B, L+1], p [B, L+1, V], final [B])``. The drafts are drawn by ``torch.multinomial``
    from the draft stream, of the processed draft rows (or of ``drafting_law(rows)``: a replica
    drafting from another law, q still the processed rows), the acceptance coins in (0, 1] and
    the final token's coin from their own streams."""
    Bsz, L = request.context.shape[0], request.num_draft
    g_draft, g_coin, g_final = _streams(request, 3)
    drafts = torch.empty(Bsz, 0, dtype=torch.long)
    qs = []
    for _ in range(L):
        q = _draft_rows(request, drafts)
        law = q if drafting_law is None else drafting_law(q)
        x = torch.multinomial(law, 1, generator=g_draft)[:, 0]
        qs.append(q)
        drafts = torch.cat([drafts, x.unsqueeze(1)], dim=1)
    q = torch.stack(qs, dim=1)
    p = _target_rows(request, drafts)
    coins = 1.0 - torch.rand(Bsz, L + 1, generator=g_coin, dtype=torch.float64)
    final = torch.rand(Bsz, generator=g_final, dtype=torch.float64)
    return q, drafts, coins, p, final


def _sglang_tau(q, drafts, coins, p):
    from ..engines.adapters import sglang_chain_sample

    _, tau = sglang_chain_sample(q, drafts, coins, p, torch.zeros(drafts.shape[0],
                                                                 dtype=torch.float64))
    return tau


def transformers_step(request: StepRequest, *, hand_raw_q: bool = False):
    """A correct step built like Hugging Face transformers' assisted generation with
    ``do_sample=True``.

    Drafting: the draft model's rows processed by the drafting parameters (the logits processors)
    and sampled by ``torch.multinomial``; the candidate logits handed to the verifier are the
    log of the SAME processed rows (PR #47961). Verification: the port
    [`hf_speculative_sampling`][spectheory.testing.engines.adapters.hf_speculative_sampling] of
    ``_speculative_sampling``, one sequence at a time as transformers runs it (computed for the
    batch at once by ``hf_speculative_sampling_rows``, with the same draws and tokens), with the
    target's rows processed by the request's parameters; torch's global generator is seeded from
    the request inside ``torch.random.fork_rng`` (the caller's state is left alone).
    ``hand_raw_q=True`` plants #47932 (the raw draft rows handed as q)."""
    from ..engines.adapters import hf_speculative_sampling_rows

    hand_raw_q = check_flag(hand_raw_q, "hand_raw_q")  # 'no' would plant the bug
    ctx = request.context
    Bsz, L = ctx.shape[0], request.num_draft
    (g_draft,) = _streams(request, 1)
    drafts = torch.empty(Bsz, 0, dtype=torch.long)
    qs, raw = [], []
    for _ in range(L):
        seq = torch.cat([ctx, drafts], dim=1)
        rows = request.draft(seq)[:, -1]
        q = processed(rows, request.draft_sampling, request.inputs, history=seq)
        x = torch.multinomial(q, 1, generator=g_draft)[:, 0]
        qs.append(q)
        raw.append(rows_as_probs(rows, request.inputs))
        drafts = torch.cat([drafts, x.unsqueeze(1)], dim=1)
    q = torch.stack(raw if hand_raw_q else qs, dim=1)
    p = _target_rows(request, drafts)
    lq = torch.log(q)
    lp = torch.log(p)
    cands = torch.cat([ctx, drafts], dim=1)
    with torch.random.fork_rng(devices=[]):
        seed_forked(int(request.seed) % 2**63)
        # the port on each sequence in turn, from one seeded global stream
        out, _ = hf_speculative_sampling_rows(cands, lq, L, lp, pad=PLACEHOLDER)
    return out


__all__ = ["INPUTS", "MAX_MODEL_FLOATS", "MAX_SECONDS", "MAX_STEPS", "MAX_STEP_CELLS", "PLACEHOLDER",
           "StepReport", "StepRequest", "TableLM", "assert_step", "check_step",
           "default_step_instances", "detection_power", "processed", "processed_along",
           "rows_as_probs", "sample_steps", "sglang_step", "target_sequence_law", "transformers_step", "vllm_v1_step"]
