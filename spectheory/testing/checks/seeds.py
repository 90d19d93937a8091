"""Seeds and batches: seed replay, RNG accounting and batch invariance of whole steps.

A law test cannot see how an engine spends its randomness; a seeded request can. Engines promise
three things about per-request seeds, and each has been broken:

* **Seed replay** (pegainfer PR #589): a seeded sample-match step (accept drafts while the
  target's own sample at that position equals them, the target sampled with noise keyed by the
  request seed and the position) emits the seeded plain (non-speculative) stream token for token,
  whatever was drafted. [`check_seed_replay`][spectheory.testing.checks.seeds.check_seed_replay]
  runs the step and the plain stream from the same seeds and compares the tokens.
* **RNG accounting**: rows with zero drafts or an early rejection must not shift other rows' or
  later steps' draws. vllm-ascend #13608: a request with zero drafts still advanced its
  per-request generator (a vocabulary-sized draw discarded by ``torch.where``), so its later
  tokens left its seeded stream. Any engine's step with zero drafts is a plain decoding step:
  ``check_seed_replay(..., schedule="none")`` holds every engine to its own plain stream, and the
  ``"mixed"`` schedule varies the drafts per row and step.
* **Batch invariance** (vLLM PR #52522, RFC #54506): a row's tokens under its seed do not depend
  on the other rows of the batch or their order. TensorRT-LLM PR #17599: the request seed was
  ignored on the one-model path and the output depended on how many steps the engine had taken.
  [`check_batch_invariance`][spectheory.testing.checks.seeds.check_batch_invariance] runs every row
  alone, then all rows batched, in reverse order, and beside rows that draft nothing, and
  compares each row's tokens.

These checks are exact: a seeded step is a deterministic function of its seeds, so one differing
token is a defect (no false alarm). They take the step signature of `check_step`
([`StepRequest`][spectheory.testing.checks.step.StepRequest]) with two more fields: ``seeds [B]``
(each row's request seed) and ``num_drafts [B]`` (how many tokens row b may draft this step; 0: a
plain decoding step). An engine that keeps per-request state across calls (generators keyed by seed)
is passed as a factory, a callable taking no argument that returns a fresh step: it is called once
per run.

The kit's reference noise is [`keyed_uniform`][spectheory.testing.checks.seeds.keyed_uniform] (a
SplitMix64 hash of seed, position and stream, as Philox-keyed kernels do), its plain stream
[`keyed_plain_step`][spectheory.testing.checks.seeds.keyed_plain_step] (inverse CDF of the processed
target row at the keyed uniform), and
[`sample_match_step`][spectheory.testing.checks.seeds.sample_match_step] a correct seeded
sample-match step with the same noise. Replicas:
[`GlobalSeedEngine`][spectheory.testing.checks.seeds.GlobalSeedEngine] (TensorRT-LLM PR #17599) and
[`ZeroDraftAdvanceEngine`][spectheory.testing.checks.seeds.ZeroDraftAdvanceEngine]
(vllm-ascend #13608).
"""

from __future__ import annotations

import inspect
import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ...inputs.processing import parse_sampling
from ...sampling import inverse_cdf as sample_inverse_cdf
from ...runtime._lazy import torch
from ...runtime.errors import OptionError, TimeLimitError, UserCodeError, check_flag, is_integer
from .calls import _caller_bound, _instance_list
from .report import guarded
from .step import (MAX_SECONDS, PLACEHOLDER, StepRequest, TableLM, _emitted,
                   default_step_instances, processed, processed_along)
from ...runtime.limits import shown as _repr_cut

#: Streams of the kit's keyed noise.
DRAFT, TARGET = 1, 2
#: Companion rows in the batch-invariance check are other requests: their seeds are the rows'
#: seeds XOR this bit.
COMPANION = 1 << 61
#: Most rows (instances x seeds) and tokens of one seeded check.
MAX_ROWS = 4096
MAX_TOKENS = 64
#: Most rows handed to the step calls of one batch-invariance check, an upper bound counted
#: before it runs (instances x (n^2 + 3n) x tokens: beside companions every call holds all n
#: rows): 256 seeds x 64 tokens, or 1,024 x 8. 4,096 seeds were 10^9 rows, hours of step calls.
#: (Seed replay stays within 2 x `MAX_ROWS` x `MAX_TOKENS`.)
MAX_ROW_STEPS = 2**24
SCHEDULES = ("full", "none", "mixed")

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


#: Largest position of the keyed noise: ``position * 2^20 + stream`` must stay one 64-bit key
#: (2^44 and 0 gave the same uniforms).
MAX_POSITION = 2**44 - 1
#: Most uniforms one `keyed_uniform` call makes (a billion-row broadcast seeds array ran on).
MAX_KEYED = 2**26


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def keyed_uniform(seeds, positions, stream: int):
    """Uniforms in [0, 1) ``[B]`` float64, a function of (seed, position, stream) only: the top
    53 bits of SplitMix64(SplitMix64(seed) + position * 2^20 + stream). ``seeds [B]`` int64,
    ``positions`` an int or ``[B]`` in 0..2^44-1 (`MAX_POSITION`: the key stays 64 bits),
    ``stream`` an int in 0..2^20-1 (a wider one would overlap the next position's streams), at
    most `MAX_KEYED` seeds; one `OptionError` line for anything else (a negative or fractional
    seed was wrapped or truncated silently)."""
    from ...runtime.errors import OptionError, is_integer

    if not is_integer(stream) or not 0 <= int(stream) < 1 << 20:
        raise OptionError(f"stream = {_repr_cut(stream, 40)} must be an integer in 0..{(1 << 20) - 1}")
    arrays = []
    for name, value in (("seeds", seeds), ("positions", positions)):
        if torch.is_tensor(value) and value.device.type == "meta":
            raise OptionError(f"{name} on the meta device hold no values")
        try:
            arr = (value.detach().cpu().numpy() if torch.is_tensor(value)
                   else np.asarray(value))
        except (TypeError, ValueError) as exc:  # ragged lists
            raise OptionError(f"{name} must be integers in 0..2^63-1 ({exc})"[:200]) from None
        if arr.size == 0 and arr.dtype.kind not in "iu" and arr.dtype != object:
            arr = arr.astype(np.int64)  # [] reads as float64: no values to refuse
        top = 2**63 - 1 if name == "seeds" else MAX_POSITION
        if arr.dtype == object or arr.dtype.kind not in "iu" or \
                (arr.size and (int(arr.min()) < 0 or int(arr.max()) > top)):
            span = "2^63-1" if name == "seeds" else "2^44-1"
            raise OptionError(f"{name} must be integers in 0..{span}, not "
                              f"{arr.dtype if arr.dtype.kind not in 'iu' else 'out of range'}"
                              + (" (position * 2^20 + stream is one 64-bit key)"
                                 if name == "positions" else ""))
        if arr.size > MAX_KEYED:
            raise OptionError(f"{name}: {arr.size:,} values, over the limit of {MAX_KEYED:,} "
                              "uniforms a call")
        arrays.append(arr)
    s = np.asarray(arrays[0], dtype=np.int64).astype(np.uint64)  # any strides
    if s.ndim != 1 or np.ndim(arrays[1]) not in (0, 1) or (
            np.ndim(arrays[1]) == 1 and len(arrays[1]) != len(s)):
        raise OptionError(f"seeds [B] and positions (an int or [B]) do not fit: shapes "
                          f"{list(s.shape)} and {list(np.shape(arrays[1]))}")
    pos = np.broadcast_to(np.asarray(arrays[1], dtype=np.int64), s.shape).astype(np.uint64)
    with np.errstate(over="ignore"):
        x = _splitmix64(_splitmix64(s) + pos * np.uint64(1 << 20) + np.uint64(stream))
    return torch.as_tensor((x >> np.uint64(11)).astype(np.float64) * 2.0**-53)


def inverse_cdf(rows, u):
    """Tokens ``[B]``: the first index whose running sum of ``rows [B, V]`` exceeds ``u [B]``
    times the row's sum (`spectheory.sampling.inverse_cdf`, SGLang's convention too). Rows of
    finite non-negative weights with a positive sum, one uniform in [0, 1) per row."""
    if not (torch.is_tensor(rows) and torch.is_tensor(u)) or rows.dim() != 2 or u.dim() != 1 \
            or rows.shape[0] != u.shape[0] or rows.shape[1] < 1:
        raise OptionError(f"inverse_cdf takes rows [B, V] (V >= 1) and uniforms [B] as tensors, "
                          f"got {list(getattr(rows, 'shape', []))} and "
                          f"{list(getattr(u, 'shape', []))}")
    r64 = rows.to(torch.float64)
    if bool((~torch.isfinite(r64)).any() | (r64 < 0).any() | (r64.sum(-1) <= 0).any()):
        raise OptionError("inverse_cdf: a row is not finite non-negative weights with a "
                          "positive sum")
    u64 = u.to(torch.float64)
    if bool((~((u64 >= 0) & (u64 < 1))).any()):  # NaN fails both
        bad = float(u64[~((u64 >= 0) & (u64 < 1))][0])
        raise OptionError(f"inverse_cdf: a uniform is {bad!r}; uniforms lie in [0, 1)")
    return sample_inverse_cdf(r64, u64)


def _uniforms(request, n: int, j: int, stream: int, B: int):
    if request.seeds is not None:
        return keyed_uniform(request.seeds, n + j, stream)
    return torch.rand(B, generator=request.generator, dtype=torch.float64)


def _draft_counts(request, B: int, L: int):
    if request.num_drafts is None:
        return torch.full((B,), L, dtype=torch.long)
    return torch.as_tensor(request.num_drafts, dtype=torch.long)


def keyed_plain_step(request: StepRequest):
    """Plain decoding with the kit's keyed noise: one token per row, the inverse CDF of the
    processed target row after the context at ``keyed_uniform(seed, position, TARGET)``, the
    position being the number of tokens emitted so far."""
    ctx = request.context
    B, n = ctx.shape
    row = processed(request.target(ctx)[:, -1], request.sampling, request.inputs, history=ctx)
    out = torch.full((B, request.num_draft + 1), PLACEHOLDER, dtype=torch.long)
    out[:, 0] = inverse_cdf(row, _uniforms(request, n, 0, TARGET, B))
    return out


def sample_match_step(request: StepRequest):
    """A correct seeded sample-match step (pegainfer PR #589; mlxcel PR #992 shows its law is
    the target's). Drafts: inverse CDF of the processed draft rows at the keyed DRAFT uniforms.
    Verification: the target's own token at each position j, inverse CDF of the processed target
    row at ``keyed_uniform(seed, n + j, TARGET)``; the drafts are accepted while they equal it,
    and the target's token at the first mismatch (or after the row's ``num_drafts``) ends the
    step. So every emitted token is the plain stream's token at its position. Without
    ``seeds`` the uniforms come from ``request.generator`` (a lossless step for `check_step`)."""
    ctx = request.context
    B, n = ctx.shape
    L = request.num_draft
    k = _draft_counts(request, B, L)
    drafts = torch.empty(B, 0, dtype=torch.long)
    for j in range(L):
        seq = torch.cat([ctx, drafts], dim=1)
        q = processed(request.draft(seq)[:, -1], request.draft_sampling, request.inputs,
                      history=seq)
        x = inverse_cdf(q, _uniforms(request, n, j, DRAFT, B))
        drafts = torch.cat([drafts, x.unsqueeze(1)], dim=1)
    seq = torch.cat([ctx, drafts], dim=1)
    p = processed_along(request.target(seq), seq, request.sampling, request.inputs)[:, n:]
    t = torch.stack([inverse_cdf(p[:, j], _uniforms(request, n, j, TARGET, B))
                     for j in range(L + 1)], dim=1)
    match = (t[:, :L] == drafts) & (torch.arange(L).unsqueeze(0) < k.unsqueeze(1))
    tau = torch.where(match.all(dim=1), k, torch.argmin(match.to(torch.int8), dim=1))
    tau = torch.minimum(tau, k)
    # each row's target tokens up to position tau, PLACEHOLDER after (one op for all rows)
    emitted = torch.arange(L + 1).unsqueeze(0) <= tau.unsqueeze(1)
    return torch.where(emitted, t, torch.full_like(t, PLACEHOLDER))


class GlobalSeedEngine:
    """Replica of TensorRT-LLM PR #17599: on the one-model speculative path the request seed was
    ignored; the noise came from the engine's own generator, seeded once and advanced by every
    step, so a request's output depended on how many steps the engine had taken (and on the other
    rows). Otherwise `sample_match_step`'s rule: its law is the target's (check_step passes it),
    but it does not replay the seeded stream and is not batch invariant."""

    def __init__(self, engine_seed: int = 0):
        self.generator = torch.Generator().manual_seed(engine_seed)

    def __call__(self, request: StepRequest):
        req = StepRequest(request.context, request.draft, request.target, request.num_draft,
                          request.sampling, request.draft_sampling, request.inputs,
                          self.generator, request.seed, None, request.num_drafts)
        return sample_match_step(req)

    def plain(self, request: StepRequest):
        return keyed_plain_step(request)


class ZeroDraftAdvanceEngine:
    """An engine with per-request generators (``torch.Generator`` seeded by the request's seed,
    drawn from in order, as vLLM's ``generators`` dict): plain decoding draws one uniform per
    token, the speculative step one uniform per drafted token and per target token it verifies
    against (sample-match). ``zero_draft_bug=True`` plants vllm-ascend #13608: a row with zero
    drafts still draws a vocabulary-sized vector from its generator (discarded by
    ``torch.where``) before its token, so its later tokens leave its seeded stream."""

    def __init__(self, zero_draft_bug: bool = True):
        self.bug = check_flag(zero_draft_bug, "zero_draft_bug")  # 'no' is truthy: refused
        self.gens: dict[int, torch.Generator] = {}

    def _gen(self, seed: int) -> torch.Generator:
        if seed not in self.gens:
            self.gens[seed] = torch.Generator().manual_seed(seed % 2**63)
        return self.gens[seed]

    def _u(self, seeds, B: int):
        return torch.stack([torch.rand((), generator=self._gen(int(s)), dtype=torch.float64)
                            for s in seeds.tolist()]) if B else torch.empty(0)

    def plain(self, request: StepRequest):
        ctx = request.context
        B = ctx.shape[0]
        row = processed(request.target(ctx)[:, -1], request.sampling, request.inputs,
                        history=ctx)
        out = torch.full((B, request.num_draft + 1), PLACEHOLDER, dtype=torch.long)
        out[:, 0] = inverse_cdf(row, self._u(request.seeds, B))
        return out

    def __call__(self, request: StepRequest):
        ctx = request.context
        B, n = ctx.shape
        L = request.num_draft
        k = _draft_counts(request, B, L)
        out = torch.full((B, L + 1), PLACEHOLDER, dtype=torch.long)
        V = None
        for b in range(B):
            s = int(request.seeds[b])
            row_ctx = ctx[b:b + 1]
            if int(k[b]) == 0:
                if self.bug:  # the discarded vocabulary-sized draw
                    V = V or request.target(row_ctx).shape[-1]
                    torch.rand(V, generator=self._gen(s), dtype=torch.float64)
                row = processed(request.target(row_ctx)[:, -1], request.sampling,
                                request.inputs, history=row_ctx)
                out[b, 0] = inverse_cdf(row, self._u(request.seeds[b:b + 1], 1))[0]
                continue
            # sample-match, consuming the row's generator position by position
            emitted = []
            seq = row_ctx
            for j in range(int(k[b]) + 1):
                p = processed(request.target(seq)[:, -1], request.sampling, request.inputs,
                              history=seq)
                t = int(inverse_cdf(p, self._u(request.seeds[b:b + 1], 1))[0])
                emitted.append(t)
                if j == int(k[b]):
                    break
                q = processed(request.draft(seq)[:, -1], request.draft_sampling,
                              request.inputs, history=seq)
                x = int(inverse_cdf(q, torch.rand(1, dtype=torch.float64,
                                                  generator=request.generator))[0])
                if x != t:
                    break
                seq = torch.cat([seq, torch.tensor([[t]])], dim=1)
            out[b, :len(emitted)] = torch.tensor(emitted)
        return out


# ----------------------------------------------------------------------------- the checks


@dataclass
class SeedReport:
    """Result of a seeded check: ``passed`` when every compared token agrees; ``compared``
    tokens over ``rows`` seeded rows; ``mismatches`` rows whose tokens differ somewhere, and the
    first of them in ``first`` (instance, seed, position, the reference's and the step's
    tokens)."""

    check: str
    passed: bool
    rows: int
    compared: int
    mismatches: int = 0
    first: dict | None = None
    notes: list = field(default_factory=list)
    step: str = ""

    def __str__(self) -> str:
        lines = [f"{self.check}: {'PASS' if self.passed else 'FAIL'} ({self.compared:,} tokens "
                 f"of {self.rows} seeded rows compared; a seeded step is deterministic, so one "
                 f"differing token is a defect)", f"  step {self.step}"]
        if self.first:
            f = self.first
            lines.append(f"  {self.mismatches} row(s) differ; first: instance {f['instance']}, "
                         f"seed {f['seed']}, token {f['position']}: {f['reference_label']} "
                         f"{f['reference']}, step {f['got']}")
        lines += [f"  {n}" for n in self.notes]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"check": self.check, "passed": self.passed, "rows": self.rows,
                "compared": self.compared, "mismatches": self.mismatches, "first": self.first,
                "notes": list(self.notes), "step": self.step}


def _factory(fn, what: str) -> Callable[[], Callable]:
    """A callable with no parameter but keyword-only ones with defaults (``make()``,
    ``functools.partial(make, seed=3)``) is a factory (called once per run); anything else
    callable is the step itself: one that can take the request positionally, even with a
    default (``step(request=None)`` was called as a factory, with no argument), or that needs a
    keyword (``step(*, request)``: called with the request, it says what it lacks)."""
    if not callable(fn):
        raise OptionError(f"the {what} is {type(fn).__name__}, not a function")
    try:
        zero = all(p.kind == p.KEYWORD_ONLY and p.default is not inspect.Parameter.empty
                   for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        zero = False
    if zero:
        def make():
            made = guarded(fn, f"{what} factory")()
            if not callable(made):
                raise UserCodeError(f"the {what} factory returned {type(made).__name__}, not a "
                                    f"step")
            return guarded(made, what)
        return make
    g = guarded(fn, what)
    return lambda: g


def _label(step) -> str:
    return getattr(step, "_spectheory_label", "step").removeprefix("step ")


def _check_common(instances, seeds, tokens, schedule):
    from .step import _check_tables

    insts = _instance_list(instances, default_step_instances, "no instances to check on")
    for i, inst in enumerate(insts):  # rows changed in place after the instance was checked
        _check_tables(inst, i)  # (a NaN row replayed as PASS: both streams read the same NaN)
    if isinstance(seeds, (str, bytes, dict)):
        raise OptionError(f"seeds must be a list of integers, not {type(seeds).__name__}")
    if not isinstance(seeds, (Sequence, np.ndarray, torch.Tensor)):
        try:  # an iterator: at most one row over the limit is read
            seeds = list(itertools.islice(seeds, MAX_ROWS + 1))
        except TypeError:
            raise OptionError(f"seeds must be a list of integers, not "
                              f"{type(seeds).__name__}") from None
    if isinstance(seeds, torch.Tensor) and seeds.device.type == "meta":
        raise OptionError("seeds on the meta device hold no values")
    if isinstance(seeds, (np.ndarray, torch.Tensor)) and seeds.ndim != 1:  # 0-d: no len()
        raise OptionError(f"seeds must be a list of integers (a 1-d array), not an array of "
                          f"shape {list(seeds.shape)}")
    if len(seeds) * len(insts) > MAX_ROWS:  # before a list of them is built
        raise OptionError(f"{len(insts)} instances x {len(seeds):,} seeds, over the limit of "
                          f"{MAX_ROWS:,} rows")
    out = []
    for s in seeds:
        if isinstance(s, torch.Tensor) and s.numel() == 1:
            s = s.item()
        if not is_integer(s):
            raise OptionError(f"seeds must be a list of integers; got {_repr_cut(s, 40)} "
                              f"({type(s).__name__})")  # 1.5, inf, '7' are typos, not seeds
        out.append(int(s))
    seeds = out
    if not seeds or any(not 0 <= s < 2**62 for s in seeds):
        raise OptionError("seeds must be a non-empty list of integers in 0..2^62-1")
    if len(set(seeds)) != len(seeds):
        raise OptionError("seeds must be distinct (one request per seed)")
    if len(insts) * len(seeds) > MAX_ROWS:
        raise OptionError(f"{len(insts)} instances x {len(seeds)} seeds = "
                          f"{len(insts) * len(seeds):,} rows, over the limit of {MAX_ROWS:,}")
    if isinstance(tokens, bool) or not isinstance(tokens, (int, np.integer)) or \
            not 1 <= tokens <= MAX_TOKENS:
        raise OptionError(f"tokens = {tokens!r} must be an integer in 1..{MAX_TOKENS}")
    if not isinstance(schedule, str) or schedule not in SCHEDULES:
        raise OptionError(f"schedule = {schedule!r} is not one of {', '.join(SCHEDULES)}")
    return [inst.to_float() for inst in insts], seeds


def _schedule(schedule: str, seeds, step_i: int, L: int):
    if schedule == "full":
        return torch.full((len(seeds),), L, dtype=torch.long)
    if schedule == "none":
        return torch.zeros(len(seeds), dtype=torch.long)
    # mixed: a fixed pseudo-random count in 0..L per (seed, step), the same in every run
    u = keyed_uniform(torch.tensor(seeds), step_i, 7)
    return (u * (L + 1)).to(torch.long).clamp(max=L)


class _Clock:
    """The time of one seeded check: the run's time limit (`spectheory.runtime.limits`) and
    ``max_seconds`` since the check began, checked after every step call."""

    def __init__(self, max_seconds, what: str):
        if max_seconds is not None and not (
                isinstance(max_seconds, (int, float)) and not isinstance(max_seconds, bool)
                and max_seconds > 0):  # NaN is not > 0
            raise OptionError(f"max_seconds = {_repr_cut(max_seconds, 40)} must be a positive number or "
                              "None")
        self.max_seconds, self.what = max_seconds, what
        self.start = time.perf_counter()

    def __call__(self) -> None:
        from ...runtime.limits import check_time

        check_time(f" in {self.what}", "fewer seeds or tokens")
        spent = time.perf_counter() - self.start
        if self.max_seconds is not None and spent > self.max_seconds:
            raise TimeLimitError(f"{self.what}: stopped after {spent:.3g} s, past max_seconds = "
                                 f"{self.max_seconds:g}; lower seeds or tokens, or raise "
                                 "max_seconds")


def _check_work(what: str, row_steps: int) -> None:
    if row_steps > MAX_ROW_STEPS:
        raise OptionError(f"{what}: up to {row_steps:,} rows handed to the step calls, over the "
                          f"limit of {MAX_ROW_STEPS:,}; lower seeds or tokens")


def _run(step, inst, seeds: list, order: list, tokens: int, sp, dp, inputs, schedule: str,
         zero_others: bool = False, who: str = "step", clock=None):
    """Tokens [len(seeds), tokens] of the seeded rows, batched in ``order`` (a list of index
    lists: each inner list is batched together), grouped by context length within a batch."""
    V, L = inst.vocab_size, inst.block_length
    draft_lm = TableLM(inst.draft, "draft", inputs)
    target_lm = TableLM(inst.target, "target", inputs)
    seq = torch.full((len(seeds), tokens + L + 1), PLACEHOLDER, dtype=torch.long)
    count = torch.zeros(len(seeds), dtype=torch.long)
    all_seeds = torch.tensor(seeds, dtype=torch.long)
    g = torch.Generator().manual_seed(12345)
    step_i = 0
    while bool((count < tokens).any()):
        nd_all = _schedule(schedule, seeds, step_i, L)
        for batch in order:
            batch = [i for i in batch if count[i] < tokens or zero_others]
            live = [i for i in batch if count[i] < tokens]
            if not live:
                continue
            for c in sorted({int(count[i]) for i in live}):
                sel = [i for i in live if int(count[i]) == c]
                if zero_others:  # companions that draft nothing, from the same contexts
                    comp = [i for i in range(len(seeds)) if i not in sel and int(count[i]) == c]
                else:
                    comp = []
                rows = sel + comp
                idx = torch.tensor(rows, dtype=torch.long)
                nd = nd_all[idx].clone()
                nd[len(sel):] = 0
                row_seeds = all_seeds[idx].clone()
                row_seeds[len(sel):] ^= COMPANION  # other requests, from the same contexts
                # the step gets copies: one that changes num_drafts in place cannot raise the
                # cap on what it emits, checked below against the kit's own counts
                req = StepRequest(seq[idx, :c].clone(), draft_lm, target_lm, L, sp, dp, inputs,
                                  g, int(step_i), row_seeds.clone(), nd.clone())
                out = step(req)
                if clock is not None:
                    clock()
                res, note = _emitted(out, len(rows), L, V, who)
                if note:
                    raise UserCodeError(note)
                toks, k = res
                for r, i in enumerate(sel):
                    kk = int(k[r])
                    if kk > int(nd[r]) + 1:
                        raise UserCodeError(f"{who} emitted {kk} tokens for a row allowed "
                                            f"{int(nd[r])} drafts (at most drafts + 1)")
                    seq[i, c:c + kk] = toks[r, :kk]
                    count[i] += kk
        step_i += 1
        if step_i > 4 * tokens + 8:
            raise UserCodeError(f"{who} did not emit {tokens} tokens in {step_i} steps")
    return seq[:, :tokens]


def _compare(ref, got, inst_i, seeds, first, ref_label):
    diff = (ref != got)
    rows = torch.nonzero(diff.any(dim=1)).squeeze(1).tolist()
    if rows and first is None:
        r = rows[0]
        pos = int(torch.nonzero(diff[r])[0, 0])
        first = {"instance": inst_i, "seed": int(seeds[r]), "position": pos,
                 "reference": ref[r].tolist(), "got": got[r].tolist(),
                 "reference_label": ref_label}
    return len(rows), first


def check_seed_replay(step, plain=None, instances: Sequence | None = None,
                      seeds: Sequence[int] = tuple(range(16)), tokens: int = 8, *,
                      schedule: str = "full", sampling=None, draft_sampling=None,
                      inputs: str = "probs",
                      max_seconds: float | None = MAX_SECONDS) -> SeedReport:
    """Check that a seeded ``step`` emits, for every seed, the tokens of the seeded ``plain``
    stream (see `spectheory.testing.checks.seeds`).

    Parameters
    ----------
    step : callable or factory
        The step (`check_step`'s signature; it reads ``request.seeds`` and
        ``request.num_drafts``), or a zero-argument factory returning a fresh one per run.
    plain : callable or factory, optional
        The engine's plain decoding step (the same signature; it emits one token per row).
        Default: the kit's [`keyed_plain_step`][spectheory.testing.checks.seeds.keyed_plain_step],
        the stream that [`sample_match_step`][spectheory.testing.checks.seeds.sample_match_step]
        replays.
    instances : list of Instance, optional
        Default `default_step_instances()` (prefix-dependent rows).
    seeds : list of int
        One seeded row per seed and instance.
    tokens : int
        Tokens compared per row.
    schedule : {"full", "none", "mixed"}
        Drafts per row and step: L; 0 (every step a plain decoding step: RNG accounting of rows
        without drafts, which every engine owes); a pseudo-random count in 0..L per seed and
        step. "full" and "mixed" hold the step to the plain stream token for token, which a
        sample-match engine with position-keyed noise promises (a rejection-sampling engine
        does not).
    sampling, draft_sampling, inputs
        As for `check_step`.
    max_seconds : float or None
        Stop with a `TimeLimitError` once the check has run this long (checked after every
        step call; a call that never returns is stopped too). Default one day; None: no limit.
        Before it runs, a batch-invariance check that would hand its step calls more than
        `MAX_ROW_STEPS` rows is refused.

    Returns
    -------
    SeedReport
    """
    insts, seeds = _check_common(instances, seeds, tokens, schedule)
    clock = _Clock(max_seconds, "check_seed_replay")
    sp, dp = parse_sampling(sampling), parse_sampling(draft_sampling)
    make_step = _factory(step, "step")
    make_plain = _factory(keyed_plain_step if plain is None else plain, "plain step")
    who = _label(make_step())
    order_all = [list(range(len(seeds)))]
    mismatches, first, compared = 0, None, 0
    for inst_i, inst in enumerate(insts):
        with _caller_bound(max_seconds, MAX_SECONDS):  # a step call that never returns
            ref = _run(make_plain(), inst, seeds, order_all, tokens, sp, dp, inputs, "none",
                       who="plain step", clock=clock)
            got = _run(make_step(), inst, seeds, order_all, tokens, sp, dp, inputs, schedule,
                       who=who, clock=clock)
        n, first = _compare(ref, got, inst_i, seeds, first, "plain stream")
        mismatches += n
        compared += ref.numel()
    notes = [f"schedule {schedule!r}: " + {
        "full": "every row drafts L tokens every step",
        "none": "no row drafts (each step a plain decoding step): RNG accounting of rows "
                "without drafts",
        "mixed": "each row drafts a pseudo-random 0..L tokens per step"}[schedule]]
    return SeedReport("check_seed_replay", mismatches == 0, len(insts) * len(seeds), compared,
                      mismatches, first, notes, step=who)


def check_batch_invariance(step, instances: Sequence | None = None,
                           seeds: Sequence[int] = tuple(range(8)), tokens: int = 8, *,
                           schedule: str = "full", sampling=None, draft_sampling=None,
                           inputs: str = "probs",
                           max_seconds: float | None = MAX_SECONDS) -> SeedReport:
    """Check that each seeded row's tokens do not depend on the other rows of its batch: every
    row run alone is the reference; then all rows batched, in reverse order, and (schedule
    permitting) beside companion rows that draft nothing in the same call (vLLM PR #52522 /
    RFC #54506; TensorRT-LLM PR #17599). Parameters as for
    [`check_seed_replay`][spectheory.testing.checks.seeds.check_seed_replay]."""
    insts, seeds = _check_common(instances, seeds, tokens, schedule)
    if len(seeds) < 2:
        raise OptionError("batch invariance needs at least two seeds (rows to batch together)")
    clash = sorted(set(seeds) & {s ^ COMPANION for s in seeds})
    if clash:  # a companion row would be another seeded row's request: a false FAIL
        raise OptionError(f"seeds {min(clash)} and {min(clash) ^ COMPANION} differ only in bit "
                          f"61, which the companion rows flip (seed XOR 2^61): give seeds that "
                          "do not (e.g. all below 2^61)")
    n = len(seeds)
    _check_work("check_batch_invariance", len(insts) * (n * n + 3 * n) * tokens)
    clock = _Clock(max_seconds, "check_batch_invariance")
    sp, dp = parse_sampling(sampling), parse_sampling(draft_sampling)
    make_step = _factory(step, "step")
    who = _label(make_step())
    runs = [("batched", [list(range(n))], False),
            ("batched in reverse order", [list(range(n))[::-1]], False),
            ("beside rows that draft nothing", [[i] for i in range(n)], True)]
    mismatches, first, compared = 0, None, 0
    notes = []
    for inst_i, inst in enumerate(insts):
        with _caller_bound(max_seconds, MAX_SECONDS):  # a step call that never returns
            ref = _run(make_step(), inst, seeds, [[i] for i in range(n)], tokens, sp, dp,
                       inputs, schedule, who=who, clock=clock)
        for label, order, zero in runs:
            with _caller_bound(max_seconds, MAX_SECONDS):
                got = _run(make_step(), inst, seeds, order, tokens, sp, dp, inputs, schedule,
                           zero_others=zero, who=who, clock=clock)
            m, f = _compare(ref, got, inst_i, seeds, None, "alone")
            if m and first is None:
                first = dict(f, run=label)
                notes.append(f"first difference when {label}")
            mismatches += m
            compared += ref.numel()
    return SeedReport("check_batch_invariance", mismatches == 0, len(insts) * n, compared,
                      mismatches, first, notes, step=who)


__all__ = ["DRAFT", "GlobalSeedEngine", "MAX_ROWS", "MAX_ROW_STEPS", "MAX_TOKENS", "SCHEDULES", "SeedReport",
           "TARGET", "ZeroDraftAdvanceEngine", "check_batch_invariance", "check_seed_replay",
           "inverse_cdf", "keyed_plain_step", "keyed_uniform", "sample_match_step"]
