"""Engines' rejection samplers described as data: call layouts and coin conventions.

A serving engine's rejection sampler takes the quantities of the canonical signature
(`spectheory.testing.checks.sampler`: ``drafts [B, L]``, ``q [B, L, V]``, ``p [B, L+1, V]``,
randomness) in its own arrangement: flattened drafts with cumulative counts, a root column, input
ids shifted by one, logits instead of probabilities, the bonus row included or sampled outside,
outputs padded with -1, counted, or written into buffers, randomness as one generator, per-request
generators, int64 seeds or explicit coins. A [`Layout`][spectheory.testing.engines.layouts.Layout]
says which, argument by argument, and

```python
from spectheory.testing import check_sampler
from spectheory.testing import VLLM_V1, engine_coin_sampler, engine_sampler
from vllm.v1.sample.rejection_sampler import rejection_sample      # the engine's own function

check_sampler(engine_sampler(rejection_sample, VLLM_V1), "token", samples=4_000)
check_sampler(engine_coin_sampler(rejection_sample, VLLM_V1), "token", mode="coins-tau")
```

builds the canonical sampler from it, with no hand-written adapter. A
[`CoinConvention`][spectheory.testing.engines.layouts.CoinConvention] says how the engine's coins
are drawn and compared (range, ends, dtype, comparison, log space); a coin-driven sampler carries it
as its ``coin_convention`` attribute and ``check_sampler`` maps its own pinned coins onto the
engine's range (smallest onto smallest, largest onto largest), so the engine's decision equals the
reference decision wherever the engine's comparison is lossless, including at thresholds 0 and 1.

Presets (the facts are those of the engines' published code: vLLM V1
``vllm/v1/sample/rejection_sampler.py``, vLLM Model Runner V2
``vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py``, SGLang's
``chain_speculative_sampling_triton``, Hugging Face transformers' ``_speculative_sampling``):
`VLLM_V1`,
`VLLM_MRV2`,
`SGLANG_CHAIN`,
`TRANSFORMERS` (and
`PRESETS` by name). Each is tested on a port written in the
engine's layout (`spectheory.testing.engines.adapters`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import torch

from ...runtime.errors import OptionError, UserCodeError, call_user, seed_forked
from .adapters import check_coin_range
from .engine_sampling import WRAPPER_RULE, engine_globals, engine_processing

__all__ = [
    "CoinConvention", "Layout", "EngineOutputError", "ROLES",
    "KIT_COINS", "VLLM_V1_COINS", "VLLM_MRV2_COINS", "SGLANG_COINS", "TRANSFORMERS_COINS",
    "TRTLLM_COINS", "LLAMA_CPP_COINS", "COIN_CONVENTIONS",
    "VLLM_V1", "VLLM_MRV2", "SGLANG_CHAIN", "TRANSFORMERS", "TRTLLM", "LLAMA_CPP", "PRESETS",
    "engine_sampler", "engine_coin_sampler", "get_layout", "describe", "pinned_torch_coins",
]

#: The kit's smallest position coin (``spectheory.testing.checks.sampler.TINY_COIN``): its coins are
#: ``1 - torch.rand`` in float64, the grid k 2^-53, k = 1..2^53.
KIT_TINY_COIN = 2.0**-53

_COMPARE = ("<", "<=", ">", ">=")
_DTYPES = ("float32", "float64")


class EngineOutputError(UserCodeError):
    """The engine's output does not read as a rejection sampler's block under its layout (the
    emitted tokens before the last are not the drafts, padding in the middle, a count outside
    0..L); the message names the engine function, the request and what it returned."""


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def _next(x: float, toward: float, dtype: str) -> float:
    t = torch.tensor(x, dtype=_dtype(dtype))
    return float(torch.nextafter(t, torch.tensor(toward, dtype=_dtype(dtype))))


# ============================================================================ coin conventions


@dataclass(frozen=True)
class CoinConvention:
    """How an engine draws and compares its acceptance coins.

    The engine accepts draft i when ``coin OP threshold`` holds (``coin_first=True``, e.g.
    SGLang's ``coin * q < p``, i.e. u < p/q) or ``threshold OP coin`` (``coin_first=False``, e.g.
    vLLM V1's ``p/q >= u``), with the threshold p/q (token verification; h_i for block
    verification) and, with ``log_space=True``, both sides in logs (vLLM MRV2's
    ``log p > log u + log q``). The coins are values of ``dtype`` in the range from ``low`` to
    ``high`` (ends open or closed); ``step`` is the spacing of the coins' grid where it is
    coarser than the dtype's (``torch.rand``'s float64 grid 2^-53), so the smallest coin of an
    open low end is ``low + step``. ``token_coin`` says whether the engine draws its correction and
    bonus token by inverse CDF at an explicit coin (first index whose cumulative sum exceeds
    coin x total, as ``spectheory.sampling.inverse_cdf``); when it does not (an exponential race,
    Gumbel-max, ``torch.multinomial``), only the accepted count can be compared coin by coin
    (``check_sampler(..., mode="coins-tau")``).

    The kit's own convention (`KIT_COINS`): position
    coins u in (0, 1] on the grid k 2^-53, accept when u <= t.
    [`from_kit`][spectheory.testing.engines.layouts.CoinConvention.from_kit] maps u onto the
    engine's range monotonically, the kit's smallest coin onto the engine's smallest and 1 onto the
    engine's largest, so that:

    * a threshold of 0 (a draft of target probability 0) is rejected by the engine exactly when
      its comparison is strict or its smallest coin is positive; a non-strict comparison with
      coins that can be 0 accepts it (SGLang #35771; vLLM V1's ``p/q >= u`` with u in [0, 1));
    * a threshold of 1 (p >= q) is accepted by the engine exactly when its comparison is
      non-strict or its largest coin is below 1;
    * elsewhere the engine's coin is within about one float32 step (6e-8) of u, inside the kit's
      tolerance ``tol``.
    """

    name: str
    low: float = 0.0
    high: float = 1.0
    low_closed: bool = True
    high_closed: bool = False
    dtype: str = "float64"
    compare: str = "<="
    coin_first: bool = True
    log_space: bool = False
    token_coin: bool = False
    step: float | None = None

    def __post_init__(self):
        if self.compare not in _COMPARE:
            raise OptionError(f"coin convention {self.name!r}: compare = {self.compare!r}; "
                              f"choose from {', '.join(_COMPARE)}")
        if (self.compare in ("<", "<=")) != self.coin_first:
            side = "coin OP threshold" if self.coin_first else "threshold OP coin"
            raise OptionError(f"coin convention {self.name!r}: {side} with OP = "
                              f"{self.compare!r} accepts when the coin exceeds the threshold "
                              f"(probability 1 - t), not a rejection test; use "
                              f"{'<, <=' if self.coin_first else '>, >='}")
        if self.dtype not in _DTYPES:
            raise OptionError(f"coin convention {self.name!r}: dtype = {self.dtype!r}; choose "
                              f"from {', '.join(_DTYPES)}")
        if not (isinstance(self.low, (int, float)) and isinstance(self.high, (int, float))
                and 0.0 <= self.low < self.high <= 1.0):
            raise OptionError(f"coin convention {self.name!r}: the range [{self.low}, "
                              f"{self.high}] must satisfy 0 <= low < high <= 1")
        if self.step is not None and not (0 < self.step < self.high - self.low):
            raise OptionError(f"coin convention {self.name!r}: step = {self.step!r} must lie "
                              f"in (0, high - low)")
        if self.smallest > self.largest:
            raise OptionError(f"coin convention {self.name!r}: no {self.dtype} value lies in "
                              f"its range")

    @property
    def strict(self) -> bool:
        """Whether the comparison is strict (a coin equal to the threshold rejects)."""
        return self.compare in ("<", ">")

    @property
    def smallest(self) -> float:
        """The smallest coin the engine can draw."""
        lo = float(torch.tensor(self.low, dtype=torch.float64).to(_dtype(self.dtype)))
        if lo < self.low:
            lo = _next(lo, 2.0, self.dtype)
        if not self.low_closed and lo == self.low:
            lo = self.low + self.step if self.step is not None else _next(lo, 2.0, self.dtype)
        return lo

    @property
    def largest(self) -> float:
        """The largest coin the engine can draw."""
        hi = float(torch.tensor(self.high, dtype=torch.float64).to(_dtype(self.dtype)))
        if hi > self.high:
            hi = _next(hi, -1.0, self.dtype)
        if not self.high_closed and hi == self.high:
            hi = self.high - self.step if self.step is not None else _next(hi, -1.0, self.dtype)
        return hi

    @property
    def test(self) -> str:
        """The acceptance test as text, e.g. ``p/q >= u`` or ``log u < log p - log q``."""
        t = "log p - log q" if self.log_space else "p/q"
        u = "log u" if self.log_space else "u"
        return f"{u} {self.compare} {t}" if self.coin_first else f"{t} {self.compare} {u}"

    @property
    def range_text(self) -> str:
        """The coins' range as text, e.g. ``[0, 1) float64``."""
        return (f"{'[' if self.low_closed else '('}{self.low:g}, {self.high:g}"
                f"{']' if self.high_closed else ')'} {self.dtype}")

    def __str__(self) -> str:
        return f"{self.name}: accept when {self.test}, u in {self.range_text}"

    def from_kit(self, u) -> torch.Tensor:
        """The engine's coins for the kit's position coins ``u`` in (0, 1] (a tensor of
        ``dtype``): the affine map of [2^-53, 1] onto [smallest, largest], rounded to ``dtype``
        and clamped, the two ends mapped exactly."""
        u = torch.as_tensor(u, dtype=torch.float64)
        lo, hi = self.smallest, self.largest
        c = lo + (u - KIT_TINY_COIN) * ((hi - lo) / (1.0 - KIT_TINY_COIN))
        c = torch.where(u >= 1.0, torch.full_like(c, hi), c)
        c = torch.where(u <= KIT_TINY_COIN, torch.full_like(c, lo), c)
        return c.to(_dtype(self.dtype)).clamp(lo, hi)

    def token_from_kit(self, u) -> torch.Tensor:
        """The engine's token coins for the kit's token coins ``u`` in [0, 1): ``u`` rounded
        down to ``dtype`` (so that 1 - 2^-53 becomes the largest coin below 1, never 1)."""
        u = torch.as_tensor(u, dtype=torch.float64)
        dt = _dtype(self.dtype)
        c = u.to(dt)
        c = torch.where(c.to(torch.float64) > u, torch.nextafter(c, torch.zeros_like(c)), c)
        return c.clamp(0.0, _next(1.0, 0.0, self.dtype))

    def engine_threshold(self, px: float, qx: float) -> float:
        """The threshold the engine compares its coin with for a draft of target probability
        ``px`` and draft probability ``qx``, computed in ``dtype``: p/q, or log p - log q in log
        space (the value a report shows next to the engine's coin)."""
        dt = _dtype(self.dtype)
        p, q = torch.tensor(px, dtype=dt), torch.tensor(qx, dtype=dt)
        if self.log_space:
            return float(torch.log(p) - torch.log(q))
        return float(p / q) if float(q) > 0 else float("inf")

    def engine_coin(self, c: float) -> float:
        """The coin as the engine compares it: ``c``, or log c in log space."""
        c = torch.tensor(c, dtype=_dtype(self.dtype))
        return float(torch.log(c)) if self.log_space else float(c)

    def explain(self, threshold: float, coin: float) -> str:
        """One line: the engine's test with its two sides (as `engine_threshold` and
        `engine_coin` give them) and its decision, e.g. ``p/q >= u with p/q = 0 and u = 0
        (float64): accept``."""
        t = "log p - log q" if self.log_space else "p/q"
        u = "log u" if self.log_space else "u"
        verdict = "accept" if self.accepts(threshold, coin) else "reject"
        return (f"{self.test} with {t} = {threshold!r} and {u} = {coin!r} ({self.dtype}): "
                f"{verdict}")

    def accepts(self, threshold: float, coin: float) -> bool:
        """The engine's decision for an engine-side threshold and coin (both as the engine
        compares them)."""
        a, b = (coin, threshold) if self.coin_first else (threshold, coin)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[self.compare]


#: The kit's own convention: position coins u in (0, 1] (``1 - torch.rand``, float64), accept
#: when u <= t; token coins by inverse CDF.
KIT_COINS = CoinConvention("spectheory", 0.0, 1.0, False, True, "float64", "<=", True, False,
                           token_coin=True, step=2.0**-53)
#: vLLM V1 (``rejection_random_sample_kernel``): ``target_prob / draft_prob >= uniform_prob`` with
#: float64 ``torch.rand`` coins in [0, 1): a coin of exactly 0 accepts a draft of target
#: probability 0. Recovered tokens by an exponential race (no token coin).
VLLM_V1_COINS = CoinConvention("vllm-v1", 0.0, 1.0, True, False, "float64", ">=", False, False,
                               token_coin=False, step=2.0**-53)
#: vLLM Model Runner V2 (``_rejection_kernel``): ``log p > log u + log q`` in float32 with
#: ``tl_rand(seed, pos, includes_zero=False)`` coins in [2^-31, 1); the correction by Gumbel-max.
VLLM_MRV2_COINS = CoinConvention("vllm-mrv2", 2.0**-31, 1.0, True, False, "float32", ">", False,
                                 True, token_coin=False)
#: SGLang's chain kernel: ``coin * q < p`` with float32 coins in [0, 1), the final token by
#: inverse CDF at ``uniform_samples_for_final_sampling``.
SGLANG_COINS = CoinConvention("sglang-chain", 0.0, 1.0, True, False, "float32", "<", True, False,
                              token_coin=True)
#: Hugging Face transformers' ``_speculative_sampling``: ``r <= p/q`` with ``torch.rand_like``
#: coins in [0, 1) (float32 logits), the next token by ``torch.multinomial``.
TRANSFORMERS_COINS = CoinConvention("transformers", 0.0, 1.0, True, False, "float32", "<=", True,
                                    False, token_coin=False)
#: TensorRT-LLM's PyTorch flow (``get_rejected_indices``): rejected when ``torch.rand(...,
#: generator=g) > min(1, p/q)``, i.e. accepted when u <= p/q, float32 coins in [0, 1); the
#: correction by ``torch.multinomial``.
TRTLLM_COINS = CoinConvention("trtllm", 0.0, 1.0, True, False, "float32", "<=", True, False,
                              token_coin=False)
#: llama.cpp (examples/speculative/speculative.cpp): ``r <= p_tgt / p_dft`` with r a double of
#: [0, 1) stored in a float, which can round up to 1.0f: float32 coins in [0, 1]; the next token
#: by ``std::discrete_distribution``.
LLAMA_CPP_COINS = CoinConvention("llama.cpp", 0.0, 1.0, True, True, "float32", "<=", True, False,
                                 token_coin=False)
#: Coin conventions by name.
COIN_CONVENTIONS = {c.name: c for c in (KIT_COINS, VLLM_V1_COINS, VLLM_MRV2_COINS, SGLANG_COINS,
                                        TRANSFORMERS_COINS, TRTLLM_COINS, LLAMA_CPP_COINS)}


# ============================================================================ layouts

#: What a layout can hand the engine: role -> meaning (B requests, L drafts each, V tokens).
ROLES = {
    "drafts": "draft token ids in the layout's `drafts` form",
    "counts": "cumulative counts over the flat draft axis (`counts` form)",
    "num_drafts": "drafts per request, a list of B ints",
    "max_len": "L, the most drafts of a request (int)",
    "draft": "draft rows q, [B, L, V] or flat [B L, V] (`draft_rows`), probabilities or logits",
    "target": "target rows p, padded or flat (`target_rows`), with or without the bonus row",
    "bonus": "bonus token ids [B, 1], drawn by the caller from p(.|X^L)",
    "coins": "position coins on the engine's grid (`coin_shape` form)",
    "token_coins": "the final (correction or bonus) token's coins [B]",
    "generator": "one torch.Generator",
    "generators": "a dict request -> torch.Generator",
    "seeds": "int64 seeds [B]",
    "pos": "int64 position of every target row, flat [B (L+1)] (or [B L] without the bonus row)",
    "temperature": "ones [B] float32",
    "idx_mapping": "request -> state index, arange(B) int32",
    "expanded_idx_mapping": "state index of every target row, flat",
    "expanded_local_pos": "step of every target row inside its request, flat",
    "out_tokens": "flat token buffer [B (L+1)] the engine writes into (-1 filled)",
    "out_index": "[B, L+1] buffer of indices into out_tokens, -1 filled",
    "out_count": "[B] buffer of accepted counts",
    "retrive_index": "[B, L+1] indices into out_tokens: arange(B (L+1))",
    "retrive_next_token": "[B, L+1] next node of a chain (i + 1, -1 at the end)",
    "retrive_next_sibling": "[B, L+1] next sibling (-1: a chain has none)",
}

_CHOICES = {
    "drafts": ("padded", "flat", "root", "shifted"),
    "counts": (None, "end", "start"),
    "target_rows": ("padded", "flat"),
    "draft_rows": ("padded", "flat"),
    "target_inputs": ("probs", "logits"),
    "draft_inputs": ("probs", "logits"),
    "dtype": _DTYPES,
    "index_dtype": ("int32", "int64"),
    "output": ("padded", "counted", "buffers", "tokens"),
    "randomness": ("generator", "generators", "seeds", "coins", "global"),
    "coin_shape": ("flat", "rows", "padded"),
    "coin_source": (None, "torch.rand", "torch.rand_like"),
    "processing": (None, "vllm-v1", "vllm-mrv2", "sglang", "transformers", "trtllm",
                   "llama.cpp"),
}


@dataclass(frozen=True)
class Layout:
    """How an engine's rejection sampler is called and how its output reads.

    Attributes
    ----------
    name : str
    args : tuple of (role, argument name)
        Which engine argument receives which quantity (`ROLES`);
        a dotted name ``"sampling_metadata.generators"`` is an attribute of an object the layout
        builds (a ``types.SimpleNamespace``) and passes as ``sampling_metadata``.
    drafts : {"padded", "flat", "root", "shifted"}
        ``[B, L]``; flat ``[B L]`` (vLLM V1 ``draft_token_ids``); ``[B, L+1]`` with a root column
        first (SGLang ``candidates``); flat ``[B (L+1)]`` of input ids shifted by one, the
        first of each request the last accepted token (vLLM MRV2 ``draft_sampled``). The root
        token is 0.
    counts : {None, "end", "start"}
        Cumulative counts over the flat axis: end indices ``[B]`` with no leading 0 (vLLM V1
        ``cu_num_draft_tokens``) or start indices ``[B+1]`` (vLLM MRV2 ``cu_num_logits``).
    target_rows, draft_rows : {"padded", "flat"}
        Rows per request ``[B, n, V]`` or flattened ``[B n, V]``.
    target_bonus : bool
        The target rows include the bonus position (L+1 rows a request); when not, the caller
        draws the bonus token from p(.|X^L) and hands it as role ``bonus`` (vLLM V1).
    target_inputs, draft_inputs : {"probs", "logits"}
        Probabilities, or logits log p (-inf at a zero) that the engine turns into probabilities
        with a softmax in ``dtype``. When either side is logits, the probabilities handed on the
        other side are the same softmax of the log rows in ``dtype``, so that p and q are
        rounded alike (p = q stays p = q, a zero stays 0).
    dtype, index_dtype : str
        Float dtype of the rows (and the softmax) and integer dtype of ids, counts and buffers.
    output : {"padded", "counted", "buffers", "tokens"}
        ``[B, L+1]`` tokens padded with -1 (vLLM V1); ``(sampled [B, L+1], num_sampled [B])``,
        tau = num_sampled - 1 (vLLM MRV2); written into the buffers of roles ``out_tokens``,
        ``out_index``, ``out_count``: tau = out_count[b], Y = out_tokens[out_index[b, tau]]
        (SGLang); ``(valid_tokens [1, tau+1], n_matches)`` of one sequence (transformers).
    randomness : {"generator", "generators", "seeds", "coins", "global"}
        One ``torch.Generator``; a dict of per-request generators; int64 seeds [B] (coins drawn
        inside the engine from the seed and position); explicit coins (role ``coins``, and
        ``token_coins`` when the engine takes them); torch's global generator (seeded inside
        ``torch.random.fork_rng`` so the caller's state is left alone). Every engine call runs
        inside ``fork_rng`` with the global generator seeded from the check's generator.
    coin_shape : {"flat", "rows", "padded"}
        Explicit coins: one per draft, flat ``[B L]``; one per target row, flat ``[B (L+1)]``;
        ``[B, L+1]`` (the last column unused by a chain).
    coin_hook : str, optional
        A module-level function of the engine's module that returns its coins (vLLM V1's
        ``generate_uniform_probs``): coin-driven samplers replace it for the call, so the coins
        are pinned without editing the engine.
    per_row : bool
        The engine verifies one sequence a call (transformers); the layout loops over rows.
    constants : tuple of (argument name, value)
        Fixed arguments (dotted names as in ``args``).
    coins : CoinConvention, optional
        The engine's coin convention (default of
        [`engine_coin_sampler`][spectheory.testing.engines.layouts.engine_coin_sampler]).
    coin_source : {None, "torch.rand", "torch.rand_like"}
        The torch function the engine draws its acceptance coins with, from torch's global
        generator or a generator it is handed (transformers' ``torch.rand_like``, TensorRT-LLM's
        ``torch.rand(..., generator=...)``): coin-driven samplers replace it for the call
        ([`pinned_torch_coins`][spectheory.testing.engines.layouts.pinned_torch_coins]), so the
        coins are pinned without editing the engine.
    processing : str, optional
        The engine's own sampling-parameter path
        ([`spectheory.testing.engines.engine_sampling`][spectheory.testing.engines.engine_sampling]), used when a
        sampler is built with ``sampling=``.
    """

    name: str
    args: tuple
    drafts: str = "padded"
    counts: str | None = None
    target_rows: str = "padded"
    target_bonus: bool = True
    draft_rows: str = "padded"
    target_inputs: str = "probs"
    draft_inputs: str = "probs"
    dtype: str = "float32"
    index_dtype: str = "int32"
    output: str = "padded"
    randomness: str = "generator"
    coin_shape: str = "flat"
    coin_hook: str | None = None
    per_row: bool = False
    constants: tuple = ()
    coins: CoinConvention | None = None
    coin_source: str | None = None
    processing: str | None = None

    def __post_init__(self):
        where = f"layout {self.name!r}"
        for attr, choices in _CHOICES.items():
            if getattr(self, attr) not in choices:
                raise OptionError(f"{where}: {attr} = {getattr(self, attr)!r}; choose from "
                                  f"{', '.join(str(c) for c in choices)}")
        object.__setattr__(self, "args", tuple((str(r), str(n)) for r, n in self.args))
        object.__setattr__(self, "constants", tuple((str(k), v) for k, v in self.constants))
        roles = [r for r, _ in self.args]
        unknown = sorted(set(roles) - set(ROLES))
        if unknown:
            raise OptionError(f"{where}: unknown role {unknown[0]!r}; roles are "
                              f"{', '.join(ROLES)}")
        names = [n for _, n in self.args] + [k for k, _ in self.constants]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise OptionError(f"{where}: argument {dup[0]!r} is given twice")
        need = ["drafts", "target"]
        if self.drafts in ("flat", "shifted") or self.target_rows == "flat" \
                or self.draft_rows == "flat":
            if self.counts is None:
                raise OptionError(f"{where}: flat drafts or rows need counts ('end' or "
                                  f"'start') to say where each request starts")
            need.append("counts")
        if not self.target_bonus:
            need.append("bonus")
        if self.output == "buffers":
            need += ["out_tokens", "out_index", "out_count"]
        if self.randomness in ("generator", "generators", "seeds", "coins"):
            need.append(self.randomness)
        if self.randomness == "coins" and self.coins is None:
            raise OptionError(f"{where}: explicit coins need a coin convention (coins=...)")
        if self.output == "tokens" and not self.per_row:
            raise OptionError(f"{where}: output 'tokens' (valid_tokens, n_matches) is one "
                              f"sequence a call: set per_row=True")
        if self.per_row and (self.output != "tokens" or self.drafts != "padded"
                             or self.counts is not None or "flat" in (self.target_rows,
                                                                      self.draft_rows)):
            raise OptionError(f"{where}: per_row layouts take padded drafts and rows (no "
                              f"counts) and return (valid_tokens, n_matches)")
        missing = [r for r in need if r not in roles]
        if missing:
            raise OptionError(f"{where}: role {missing[0]!r} has no argument (args must name "
                              f"one)")

    @property
    def roles(self) -> dict:
        """role -> engine argument name."""
        return dict(self.args)

    def with_constants(self, **values) -> "Layout":
        """A copy with these fixed arguments added or replaced, e.g.
        ``VLLM_MRV2.with_constants(use_block_verification=True)``."""
        merged = dict(self.constants)
        merged.update(values)
        return dataclasses.replace(self, constants=tuple(merged.items()))

    def replace(self, **changes) -> "Layout":
        """A copy with these fields changed (``dataclasses.replace``); an unknown field is
        refused in one line naming it and the valid ones."""
        fields = [f.name for f in dataclasses.fields(self)]
        unknown = [k for k in changes if k not in fields]
        if unknown:
            raise OptionError(f"layout {self.name!r}: unknown field {unknown[0]!r} in "
                              f"replace(); fields are {', '.join(fields)}")
        try:
            return dataclasses.replace(self, **changes)
        except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong shape
            raise OptionError(f"layout {self.name!r}: replace("
                              f"{', '.join(f'{k}=...' for k in changes)}) does not make a "
                              f"layout ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
                              ) from None


# ----------------------------------------------------------------------------- presets

#: vLLM V1 ``rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len,
#: cu_num_draft_tokens, draft_probs, target_logits, bonus_token_ids, sampling_metadata)``: flat
#: drafts with end-index counts, draft probabilities and target logits (float32 softmax) at the
#: draft positions only, the bonus token drawn by the caller, per-request generators in
#: ``sampling_metadata.generators``, output int32 [B, L+1] padded with -1. Coins: float64 in
#: [0, 1) from ``generate_uniform_probs`` (the coin hook), ``p/q >= u``.
VLLM_V1 = Layout(
    "vllm-v1",
    args=(("drafts", "draft_token_ids"), ("num_drafts", "num_draft_tokens"),
          ("max_len", "max_spec_len"), ("counts", "cu_num_draft_tokens"),
          ("draft", "draft_probs"), ("target", "target_logits"), ("bonus", "bonus_token_ids"),
          ("generators", "sampling_metadata.generators"),
          ("temperature", "sampling_metadata.temperature")),
    constants=(("sampling_metadata.all_greedy", False), ("sampling_metadata.all_random", True),
               ("sampling_metadata.top_k", None), ("sampling_metadata.top_p", None)),
    drafts="flat", counts="end", target_rows="flat", target_bonus=False, draft_rows="flat",
    target_inputs="logits", draft_inputs="probs", dtype="float32", output="padded",
    randomness="generators", coin_shape="flat", coin_hook="generate_uniform_probs",
    coins=VLLM_V1_COINS, processing="vllm-v1")

#: vLLM Model Runner V2 ``rejection_sample(target_logits, draft_logits, draft_sampled,
#: cu_num_logits, pos, idx_mapping, expanded_idx_mapping, expanded_local_pos, temperature, seed,
#: num_speculative_steps, ..., use_block_verification)`` -> ``(sampled, num_sampled)``: target
#: logits flat with the bonus row, start-index counts ``[B+1]``, draft logits ``[B, L, V]``,
#: input ids shifted by one, int64 seeds (coins drawn inside the kernel: no coin-level check;
#: law and lossless modes). ``VLLM_MRV2.with_constants(use_block_verification=True)`` for block
#: verification.
VLLM_MRV2 = Layout(
    "vllm-mrv2",
    args=(("target", "target_logits"), ("draft", "draft_logits"), ("drafts", "draft_sampled"),
          ("counts", "cu_num_logits"), ("pos", "pos"), ("idx_mapping", "idx_mapping"),
          ("expanded_idx_mapping", "expanded_idx_mapping"),
          ("expanded_local_pos", "expanded_local_pos"), ("temperature", "temperature"),
          ("seeds", "seed"), ("max_len", "num_speculative_steps")),
    constants=(("use_block_verification", False),),
    drafts="shifted", counts="start", target_rows="flat", target_bonus=True,
    draft_rows="padded", target_inputs="logits", draft_inputs="logits", dtype="float32",
    index_dtype="int64", output="counted", randomness="seeds", coins=VLLM_MRV2_COINS,
    processing="vllm-mrv2")

#: SGLang ``chain_speculative_sampling_triton(predicts, accept_index, accept_token_num,
#: candidates, retrive_index, retrive_next_token, retrive_next_sibling, uniform_samples,
#: uniform_samples_for_final_sampling, target_probs, draft_probs, threshold_single,
#: threshold_acc, deterministic)``: candidates ``[B, L+1]`` with a root column, probabilities
#: (float32), explicit coins ``[B, L+1]`` and final coins ``[B]``, outputs written into buffers
#: through ``retrive_index``.
SGLANG_CHAIN = Layout(
    "sglang-chain",
    args=(("out_tokens", "predicts"), ("out_index", "accept_index"),
          ("out_count", "accept_token_num"), ("drafts", "candidates"),
          ("retrive_index", "retrive_index"), ("retrive_next_token", "retrive_next_token"),
          ("retrive_next_sibling", "retrive_next_sibling"), ("coins", "uniform_samples"),
          ("token_coins", "uniform_samples_for_final_sampling"), ("target", "target_probs"),
          ("draft", "draft_probs")),
    constants=(("threshold_single", 1.0), ("threshold_acc", 1.0), ("deterministic", True)),
    drafts="root", target_rows="padded", target_bonus=True, draft_rows="padded",
    target_inputs="probs", draft_inputs="probs", dtype="float32", index_dtype="int32",
    output="buffers", randomness="coins", coin_shape="padded", coins=SGLANG_COINS,
    processing="sglang")

#: Hugging Face transformers ``_speculative_sampling(candidate_input_ids, candidate_logits,
#: candidate_length, new_logits)`` -> ``(valid_tokens, n_matches)``: one sequence a call, logits
#: on both sides (float32 softmax), torch's global generator; its acceptance coins come from
#: ``torch.rand_like``, which coin-driven samplers replace for the call (coins-tau).
TRANSFORMERS = Layout(
    "transformers",
    args=(("drafts", "candidate_input_ids"), ("draft", "candidate_logits"),
          ("max_len", "candidate_length"), ("target", "new_logits")),
    drafts="padded", target_rows="padded", target_bonus=True, draft_rows="padded",
    target_inputs="logits", draft_inputs="logits", dtype="float32", index_dtype="int64",
    output="tokens", randomness="global", per_row=True, coins=TRANSFORMERS_COINS,
    coin_source="torch.rand_like", processing="transformers")

#: TensorRT-LLM's PyTorch-flow rejection step of one request
#: (`spectheory.testing.engines.ports.trtllm.process_draft_tokens_rejection_sampling(draft_probs,
#: target_probs, generator, draft_tokens, bonus_token)`, written from
#: ``TorchSampler._process_draft_tokens_rejection_sampling``): processed probabilities (float32)
#: at the draft positions, the bonus token drawn by the ordinary sampler (the caller), the
#: sampler's ``torch.Generator``; coins from ``torch.rand(..., generator=...)``.
TRTLLM = Layout(
    "trtllm",
    args=(("draft", "draft_probs"), ("target", "target_probs"), ("generator", "generator"),
          ("drafts", "draft_tokens"), ("bonus", "bonus_token")),
    drafts="padded", target_rows="padded", target_bonus=False, draft_rows="padded",
    target_inputs="probs", draft_inputs="probs", dtype="float32", index_dtype="int64",
    output="tokens", randomness="generator", per_row=True, coins=TRTLLM_COINS,
    coin_source="torch.rand", processing="trtllm")

#: llama.cpp's stochastic verification of one sequence
#: (`spectheory.testing.engines.ports.llamacpp.verify(target_probs, draft_probs, draft_tokens,
#: rng)`, written from examples/speculative/speculative.cpp): the target's processed rows at the
#: draft positions and the one after, the draft's processed rows, one random engine (a
#: ``torch.Generator`` in the port); coins from ``torch.rand``.
LLAMA_CPP = Layout(
    "llama.cpp",
    args=(("target", "target_probs"), ("draft", "draft_probs"), ("drafts", "draft_tokens"),
          ("generator", "rng")),
    drafts="padded", target_rows="padded", target_bonus=True, draft_rows="padded",
    target_inputs="probs", draft_inputs="probs", dtype="float32", index_dtype="int64",
    output="tokens", randomness="generator", per_row=True, coins=LLAMA_CPP_COINS,
    coin_source="torch.rand", processing="llama.cpp")

#: The presets by name.
PRESETS = {lay.name: lay for lay in (VLLM_V1, VLLM_MRV2, SGLANG_CHAIN, TRANSFORMERS, TRTLLM,
                                     LLAMA_CPP)}


def get_layout(layout) -> Layout:
    """A [`Layout`][spectheory.testing.engines.layouts.Layout], or a preset by name (``"vllm-v1"``,
    ``"vllm-mrv2"``, ``"sglang-chain"``, ``"transformers"``, ``"trtllm"``, ``"llama.cpp"``; case
    and ``_``/``-``/``.`` ignored)."""
    if isinstance(layout, Layout):
        return layout
    if isinstance(layout, str):
        key = layout.lower().replace("_", "-").replace(".", "-")
        names = {k.replace(".", "-"): v for k, v in PRESETS.items()}
        if key in names:
            return names[key]
        raise OptionError(f"unknown layout {layout!r}; presets are {', '.join(PRESETS)}")
    raise OptionError(f"a layout must be a Layout or a preset name, not "
                      f"{type(layout).__name__}")


# ============================================================================ building calls


def _fn_name(fn) -> str:
    base = getattr(fn, "func", fn)  # functools.partial
    name = getattr(base, "__qualname__", None) or getattr(base, "__name__", None) or repr(base)
    module = getattr(base, "__module__", None)
    return f"{module}:{name}" if module and module not in ("builtins", "__main__") else name


def _seed(generator) -> int:
    return int(torch.randint(0, 2**62, (1,), generator=generator))


def _rows(layout: Layout, q, p):
    """(draft rows, target rows) as the engine is handed them, padded [B, n, V]."""
    dt = _dtype(layout.dtype)
    logits = "logits" in (layout.target_inputs, layout.draft_inputs)

    def conv(x, kind):
        x64 = x.to(torch.float64)
        if not logits:
            return x64.to(dt)
        lg = torch.log(x64).to(dt)
        return lg if kind == "logits" else torch.softmax(lg, dim=-1)

    return conv(q, layout.draft_inputs), conv(p, layout.target_inputs)


class _Node(dict):
    """An object the layout builds from dotted argument names."""


def _set(kwargs: dict, name: str, value) -> None:
    parts = name.split(".")
    obj = kwargs
    for part in parts[:-1]:
        if not isinstance(obj.get(part), _Node):
            obj[part] = _Node()
        obj = obj[part]
    obj[parts[-1]] = value


def _namespaces(d: dict) -> dict:
    return {k: SimpleNamespace(**_namespaces(v)) if isinstance(v, _Node) else v
            for k, v in d.items()}


def _coins_layout(layout: Layout, coins, extra, B: int, L: int):
    """Position coins [B, L] in the layout's ``coin_shape`` (``extra`` [B]: the unused last
    column or bonus-row coin)."""
    if layout.coin_shape == "flat":
        return coins.reshape(-1).contiguous()
    full = torch.cat([coins, extra.unsqueeze(1)], dim=1)
    return full.contiguous() if layout.coin_shape == "padded" else full.reshape(-1).contiguous()


def _build(layout: Layout, drafts, q, p, generator, coins=None, token_coins=None, device=None):
    """The engine's keyword arguments for canonical inputs (and the buffers it writes).
    ``device``: every tensor built on the CPU (the randomness drawn from ``generator`` as there)
    is then moved to it, and per-request generators are made on it."""
    B, L = drafts.shape
    V = q.shape[-1]
    it = _dtype(layout.index_dtype)
    dev = drafts.device
    qd, pt = _rows(layout, q, p)
    kw: dict = {}
    role = layout.roles
    root = torch.zeros(B, 1, dtype=torch.long, device=dev)
    d = drafts.to(torch.long)
    if layout.drafts == "padded":
        ids = d
    elif layout.drafts == "flat":
        ids = d.reshape(-1)
    elif layout.drafts == "root":
        ids = torch.cat([root, d], dim=1)
    else:
        ids = torch.cat([root, d], dim=1).reshape(-1)
    values = {"drafts": ids.to(it).contiguous(), "num_drafts": [L] * B, "max_len": L}
    per = L + 1 if layout.drafts == "shifted" else L
    if layout.counts == "end":
        values["counts"] = (torch.arange(1, B + 1, device=dev) * per).to(it)
    elif layout.counts == "start":
        values["counts"] = (torch.arange(0, B + 1, device=dev) * per).to(it)
    rows_t = pt if layout.target_bonus else pt[:, :L]
    n_t = rows_t.shape[1]
    values["target"] = (rows_t.reshape(B * n_t, V) if layout.target_rows == "flat"
                        else rows_t).contiguous()
    values["draft"] = (qd.reshape(B * L, V) if layout.draft_rows == "flat" else qd).contiguous()
    if "bonus" in role:
        if token_coins is not None:
            from ...sampling import inverse_cdf
            bonus = inverse_cdf(p[:, L].to(torch.float64), token_coins.to(torch.float64))
        else:
            bonus = torch.multinomial(p[:, L].to(torch.float64), 1, generator=generator)[:, 0]
        values["bonus"] = bonus.to(it).reshape(B, 1)
    values["temperature"] = torch.ones(B, dtype=torch.float32, device=dev)
    values["idx_mapping"] = torch.arange(B, dtype=torch.int32, device=dev)
    values["expanded_idx_mapping"] = torch.repeat_interleave(
        torch.arange(B, dtype=torch.int32, device=dev), n_t)
    values["expanded_local_pos"] = torch.arange(n_t, dtype=torch.int32, device=dev).repeat(B)
    values["pos"] = values["expanded_local_pos"].to(torch.int64)
    if "generator" in role:
        values["generator"] = generator
    if "generators" in role:
        seeds = torch.randint(0, 2**62, (B,), generator=generator).tolist()
        values["generators"] = {b: torch.Generator(device=device or dev).manual_seed(s)
                                for b, s in enumerate(seeds)}
    if "seeds" in role:
        values["seeds"] = torch.randint(0, 2**62, (B,), generator=generator, device=dev)
    conv = layout.coins
    if conv is not None and ("coins" in role or (layout.coin_hook and coins is not None)):
        if coins is None:  # law mode: coins uniform on the engine's range
            u = 1.0 - torch.rand(B, L, generator=generator, dtype=torch.float64)
            coins = conv.from_kit(u)
        coins = coins.to(_dtype(conv.dtype))
        extra = conv.from_kit(1.0 - torch.rand(B, generator=generator, dtype=torch.float64))
        values["coins"] = _coins_layout(layout, coins, extra.to(coins.dtype), B, L)
        if token_coins is None:
            token_coins = torch.rand(B, generator=generator, dtype=torch.float64)
        values["token_coins"] = conv.token_from_kit(token_coins).contiguous()
    S = L + 1
    values["out_tokens"] = torch.full((B * S,), -1, dtype=it, device=dev)
    values["out_index"] = torch.full((B, S), -1, dtype=it, device=dev)
    values["out_count"] = torch.zeros(B, dtype=it, device=dev)
    values["retrive_index"] = torch.arange(B * S, dtype=it, device=dev).reshape(B, S)
    nxt = torch.arange(1, S + 1, dtype=it, device=dev).repeat(B, 1)
    nxt[:, -1] = -1
    values["retrive_next_token"] = nxt
    values["retrive_next_sibling"] = torch.full((B, S), -1, dtype=it, device=dev)
    if device is not None:
        values.update((k, v.to(device)) for k, v in values.items()
                      if isinstance(v, torch.Tensor))
    for r, name in layout.args:
        if r == "coins" and layout.coin_hook and layout.randomness != "coins":
            continue  # handed through the hook
        if r not in values:
            continue
        _set(kw, name, values[r])
    for name, value in layout.constants:
        _set(kw, name, value)
    return kw, values


def _row_kwargs(kw: dict, B: int) -> Callable:
    """Request b's part of the batched keyword arguments ``kw``, as a function of b
    (``per_row`` layouts, padded forms; objects built from dotted names become
    ``SimpleNamespace``): a tensor whose first dimension is B gives its row view ``t[b:b + 1]``
    (all B views made by one ``t.split(1)``), a list of B items the fresh list ``[x[b]]``, a
    dict keyed 0..B-1 the fresh dict ``{0: x[b]}``; any other value is handed as it is."""

    def plan(obj):
        if isinstance(obj, _Node):
            items = [(k, plan(v)) for k, v in obj.items()]
            return lambda b: SimpleNamespace(**{k: f(b) for k, f in items})
        if isinstance(obj, torch.Tensor) and obj.dim() >= 1 and obj.shape[0] == B:
            return obj.split(1).__getitem__
        if isinstance(obj, list) and len(obj) == B:
            return lambda b: [obj[b]]
        if isinstance(obj, dict) and set(obj) == set(range(B)):
            return lambda b: {0: obj[b]}
        return lambda b: obj

    top = [(k, plan(v)) for k, v in kw.items()]
    return lambda b: {k: f(b) for k, f in top}


def _bad(fn, layout, what: str) -> EngineOutputError:
    return EngineOutputError(f"engine function {_fn_name(fn)} (layout {layout.name}): {what}")


def _as_long(x, fn, layout, what):
    from ...runtime.errors import whole_ids

    try:
        t = torch.as_tensor(x).cpu()
    except Exception as exc:  # noqa: BLE001 - the engine returned something unusable
        raise _bad(fn, layout, f"{what} is {type(x).__name__}, not a tensor of token ids: "
                               f"{exc}") from None
    if t.is_complex() or t.dtype == torch.bool:
        raise _bad(fn, layout, f"{what} is of dtype {t.dtype}, not token ids")
    t, note = whole_ids(t, what)  # 2.5 was truncated to 2 (and the check could PASS)
    if note:
        raise _bad(fn, layout, note)
    return t


def _read(fn, layout: Layout, out, values, drafts):
    """(tau [B], Y [B]) from the engine's output; checks that the emitted tokens before Y are
    the drafts."""
    B, L = drafts.shape
    d = drafts.to(torch.long).cpu()
    if layout.output == "padded":
        o = out[0] if isinstance(out, (tuple, list)) else out
        o = _as_long(o, fn, layout, "the output")
        if o.dim() != 2 or o.shape[0] != B or o.shape[1] < L + 1:
            raise _bad(fn, layout, f"returned output of shape {list(o.shape)}, not [{B}, "
                                   f">= {L + 1}] padded with -1")
        emitted = (o != -1).sum(1)
        tau = emitted - 1
        tokens = o.gather(1, tau.clamp(0, o.shape[1] - 1).unsqueeze(1)).squeeze(1)
        gaps = (o[:, :L + 1] == -1) & (torch.arange(L + 1).unsqueeze(0) < emitted.unsqueeze(1))
        if gaps.any():
            b = int(gaps.any(1).nonzero()[0])
            raise _bad(fn, layout, f"request {b}: output {o[b].tolist()} has a -1 before its "
                                   f"last token")
        accepted = o[:, :L]
    elif layout.output == "counted":
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise _bad(fn, layout, "did not return (sampled, num_sampled)")
        o = _as_long(out[0], fn, layout, "sampled")
        num = _as_long(out[1], fn, layout, "num_sampled").reshape(-1)
        if o.dim() != 2 or o.shape[0] != B or o.shape[1] < L + 1 or num.shape[0] != B:
            raise _bad(fn, layout, f"returned sampled {list(o.shape)} and num_sampled "
                                   f"{list(num.shape)} for {B} requests of {L} drafts")
        tau = num - 1
        tokens = o.gather(1, tau.clamp(0, o.shape[1] - 1).unsqueeze(1)).squeeze(1)
        accepted = o[:, :L]
    elif layout.output == "buffers":
        count = values["out_count"].to(torch.long).cpu()
        index = values["out_index"].to(torch.long).cpu()
        flat = values["out_tokens"].to(torch.long).cpu()
        tau = count
        at = index.gather(1, tau.clamp(0, L).unsqueeze(1)).squeeze(1)
        if ((at < 0) | (at >= flat.shape[0])).any():
            b = int(((at < 0) | (at >= flat.shape[0])).nonzero()[0])
            raise _bad(fn, layout, f"request {b}: accepted count {int(tau[b])} but index "
                                   f"buffer {index[b].tolist()}")
        tokens = flat[at]
        accepted = flat[index[:, :L].clamp(0, flat.shape[0] - 1)]
        accepted = torch.where(index[:, :L] >= 0, accepted, torch.full_like(accepted, -1))
    else:  # tokens: (valid_tokens [1, tau+1], n_matches) per row, stacked by the caller
        tau, tokens, accepted = out
    valid = (tau >= 0) & (tau <= L)
    before = torch.arange(L).unsqueeze(0) < tau.unsqueeze(1)
    wrong = (before & (accepted != d)).any(1) & valid
    if wrong.any():
        b = int(wrong.nonzero()[0])
        k = int(tau[b])
        raise _bad(fn, layout, f"request {b}: emitted {accepted[b, :k].tolist()} before its last "
                               f"token where the drafts are {d[b, :k].tolist()}")
    return tau, torch.where(valid, tokens, torch.full_like(tokens, -1))


def _hooked(fn, hook: str | None, coins):
    """Context: the engine's module-level coin function ``hook`` returns ``coins``. The module is
    found through ``fn``'s wrapper chain (`engine_globals`)."""
    import contextlib

    @contextlib.contextmanager
    def ctx():
        if hook is None or coins is None:
            yield
            return
        g = engine_globals(fn, hook)
        if g is None:
            raise OptionError(f"layout coin hook {hook!r} is not a module-level name of "
                              f"{_fn_name(fn)} nor of a function it wraps; {WRAPPER_RULE}")
        saved = g[hook]
        g[hook] = lambda *args, **kwargs: coins.clone()
        try:
            yield
        finally:
            g[hook] = saved

    return ctx()


class _CoinFeed:
    """The pinned coins of one engine call, handed out in order to its ``torch.rand`` /
    ``torch.rand_like`` calls, as many a call as the call asks for (an engine may draw all its
    coins at once, transformers and TensorRT-LLM, or one a position until it rejects, llama.cpp);
    see `pinned_torch_coins`."""

    def __init__(self, fn, layout, coins):
        self.fn, self.layout = fn, layout
        self.coins = torch.as_tensor(coins).reshape(-1)
        self.used = 0

    def take(self, shape, dtype, device):
        n = 1
        for s in shape:
            n *= int(s)
        if self.used + n > self.coins.numel():
            raise _bad(self.fn, self.layout, f"drew {self.used + n} uniforms through "
                                             f"{self.layout.coin_source} where the layout pins "
                                             f"{self.coins.numel()} (one per draft)")
        c = self.coins[self.used:self.used + n]
        self.used += n
        return c.reshape(tuple(int(s) for s in shape)).to(
            dtype=dtype or torch.get_default_dtype(), device=device or c.device).clone()


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        return tuple(size[0])
    return tuple(size)


def pinned_torch_coins(feed: "_CoinFeed"):
    """Context: ``torch.rand`` and ``torch.rand_like`` return the next pinned coins of ``feed``
    (shape and dtype as the call asks; an engine that draws another number of uniforms than one
    per draft gets a one-line `EngineOutputError`). Both are restored on exit, also when the
    engine raises. For engines that draw their acceptance coins from torch's global generator
    (transformers' ``torch.rand_like``) or from a generator they are handed (TensorRT-LLM's
    ``torch.rand(..., generator=g)``) and look the function up on the ``torch`` module at call
    time; a name imported into the engine's module (``from torch import rand``) is not reached.
    The replacement is process-wide while the call runs: do not draw from ``torch.rand`` in other
    threads meanwhile.
    """
    import contextlib

    @contextlib.contextmanager
    def ctx():
        saved = torch.rand, torch.rand_like

        def rand(*size, generator=None, dtype=None, device=None, **kwargs):
            del generator, kwargs
            return feed.take(_shape(size), dtype, device)

        def rand_like(t, *, dtype=None, device=None, **kwargs):
            del kwargs
            return feed.take(t.shape, dtype or t.dtype, device or t.device)

        torch.rand, torch.rand_like = rand, rand_like
        try:
            yield
        finally:
            torch.rand, torch.rand_like = saved

    return ctx()


def _engine_coins(layout: Layout, coins, B: int, L: int):
    """The position coins [B, L] (already on the engine's grid, as the coin-driven sampler is
    handed them) in the convention's dtype."""
    return torch.as_tensor(coins).to(_dtype(layout.coins.dtype)).reshape(B, L)


def _call(fn, layout: Layout, drafts, q, p, generator, coins=None, token_coins=None, proc=None,
          device=None):
    what = f"engine function {_fn_name(fn)}"
    source = layout.coin_source if coins is not None else None
    if layout.per_row:
        B, L = drafts.shape
        taus, ys, acc = [], [], []
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # one short sequence a call: thread start-up dominates
        try:
            kw_all, values = _build(layout, drafts, q, p, generator, coins, token_coins)
            call_fn = fn
            if proc is not None:
                call_fn = proc.apply(fn, layout, kw_all, values, drafts, p, generator)
            eng = _engine_coins(layout, coins, B, L) if source else None
            row_kw = _row_kwargs(kw_all, B) if B else None
            with torch.random.fork_rng(devices=[]):
                seed_forked(_seed(generator))
                for b in range(B):
                    kw = row_kw(b)
                    if source and L:
                        feed = _CoinFeed(fn, layout, eng[b])
                        with pinned_torch_coins(feed):
                            out = call_user(call_fn, what=what, **kw)
                        _consumed(feed, fn, layout, proc)
                    else:
                        out = call_user(call_fn, what=what, **kw)
                    if not isinstance(out, (tuple, list)) or len(out) != 2:
                        raise _bad(fn, layout, "did not return (valid_tokens, n_matches)")
                    valid = _as_long(out[0], fn, layout, "valid_tokens").reshape(-1)
                    n = int(torch.as_tensor(out[1]))
                    if valid.shape[0] != n + 1:
                        raise _bad(fn, layout, f"row {b}: {valid.shape[0]} valid tokens for "
                                               f"n_matches = {n}")
                    vl = valid.tolist()
                    taus.append(n)
                    ys.append(vl[-1] if vl else int(valid[-1]))  # empty: torch's IndexError
                    m = min(n, L)  # the accepted drafts, -1 after them (a list a row: one
                    acc.append(vl[:m] + [-1] * (L - m))  # tensor at the end)
        finally:
            torch.set_num_threads(threads)
        out = (torch.tensor(taus), torch.tensor(ys),
               torch.tensor(acc, dtype=torch.long).reshape(B, L) if acc else torch.stack([]))
        return _read(fn, layout, out, None, drafts)
    kw, values = _build(layout, drafts, q, p, generator, coins, token_coins, device)
    call_fn = fn
    if proc is not None:
        call_fn = proc.apply(fn, layout, kw, values, drafts, p, generator)
    kw = _namespaces(kw)
    hook_coins = values.get("coins") if (layout.coin_hook and coins is not None) else None
    feed = None
    if source:
        B, L = drafts.shape
        feed = _CoinFeed(fn, layout, _engine_coins(layout, coins, B, L))
    # torch's global generators (the CPU's, and the device's where one is used) seeded from the
    # kit's generator and restored afterwards
    forked = [] if device is None or torch.device(device).type != "cuda" else [device]
    with _hooked(fn, layout.coin_hook, hook_coins), torch.random.fork_rng(devices=forked):
        seed_forked(_seed(generator), device if forked else None)
        if feed is not None:
            with pinned_torch_coins(feed):
                out = call_user(call_fn, what=what, **kw)
            _consumed(feed, fn, layout, proc)
        else:
            out = call_user(call_fn, what=what, **kw)
    return _read(fn, layout, out, values, drafts)


def _consumed(feed: _CoinFeed, fn, layout: Layout, proc) -> None:
    """A coin-driven call whose engine never drew its pinned coins is refused: its decisions
    would come from somewhere else (a greedy path draws none, and is exempt)."""
    if feed.used == 0 and not (proc is not None and proc.greedy):
        raise _bad(fn, layout, f"never called {layout.coin_source}: its acceptance coins are "
                               f"not the pinned ones (does it import the function under "
                               f"another name?)")


def _check(drafts, q, p):
    """The canonical inputs of a wrapped engine function, refused in one line when a direct
    call hands it what no check does: not tensors, shapes that do not fit, drafts that are not
    ids in 0..V-1 (whole-valued floats are read as ids, as every mode of the kit reads them),
    q or p rows with a NaN, an infinity or a negative entry (the engine would answer from them,
    or fail inside the kit's own bonus draw)."""
    from ...runtime.errors import whole_ids

    for name, t in (("drafts", drafts), ("q", q), ("p", p)):
        if not isinstance(t, torch.Tensor):
            raise OptionError(f"canonical inputs are tensors drafts [B, L], q [B, L, V], "
                              f"p [B, L+1, V]; {name} is a {type(t).__name__}")
    if drafts.dim() != 2 or q.dim() != 3 or p.dim() != 3 or q.shape[:2] != drafts.shape \
            or p.shape[0] != drafts.shape[0] or p.shape[1] != drafts.shape[1] + 1 \
            or p.shape[2] != q.shape[2]:
        raise OptionError(f"canonical inputs are drafts [B, L], q [B, L, V], p [B, L+1, V]; "
                          f"got {list(drafts.shape)}, {list(q.shape)}, {list(p.shape)}")
    if drafts.is_complex() or drafts.dtype == torch.bool:
        raise OptionError(f"drafts are {drafts.dtype}; draft tokens are integer ids")
    ids, note = whole_ids(drafts.cpu(), "drafted token")
    if note:
        raise OptionError(note)
    V = int(q.shape[2])
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= V):
        b, i = (int(x) for x in torch.nonzero((ids < 0) | (ids >= V))[0])
        raise OptionError(f"the drafted token {int(ids[b, i])} (row {b}, position {i}) is "
                          f"outside 0..{V - 1}")
    for name, t in (("q", q), ("p", p)):
        if not t.is_floating_point():
            raise OptionError(f"{name} is {t.dtype}; canonical rows are float probabilities")
        bad = ~(torch.isfinite(t) & (t >= 0)).all(-1)  # a NaN fails both
        if bool(bad.any()):
            b, i = (int(x) for x in torch.nonzero(bad)[0])
            row = t[b, i]
            why = ("a non-finite entry" if not bool(torch.isfinite(row).all())
                   else "a negative entry")
            raise OptionError(f"the {name} row of batch row {b}, position {i} has {why}; "
                              f"canonical rows are probabilities (an engine sampler takes "
                              f"probabilities: check it with inputs='probs')")


def _label(fn, layout, proc) -> str:
    name = f"{layout.name}:{_fn_name(fn)}"
    if proc is None:
        return name
    extra = f" [{proc.params}"
    if proc.dropped:
        extra += f"; {', '.join(proc.dropped)} not applied by the engine's speculative path"
    if proc.greedy and layout.processing == "transformers":
        extra += "; greedy: transformers' inline argmax match, ported"
    if layout.processing in ("vllm-mrv2", "trtllm", "llama.cpp"):
        extra += "; target rows processed by the kit as the engine's sampler would"
    return name + extra + "]"


def _check_constants(fn: Callable, layout) -> None:
    """Refuse in one line a constant of ``layout`` (its top-level name) that ``fn`` does not take:
    `Layout.with_constants` adds any name (an engine's optional argument), and one the function
    has no parameter for would fail every call. A function with ``**kwargs`` takes any name,
    and one whose signature cannot be read (a builtin) is not checked."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin or a C function: nothing to read
        return
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    for name, _ in layout.constants:
        top = name.split(".")[0]
        if top not in params:
            raise OptionError(f"layout {layout.name!r}: constant {top!r} is not an argument of "
                              f"{getattr(fn, '__name__', 'the engine function')} (it takes "
                              f"{', '.join(params) or 'none'})")


def _device_option(device, layout: Layout, proc):
    """``device`` of `engine_sampler` as a torch.device, or None; refused in one line where it
    is not a device torch knows, where the layout calls the engine row by row (a port's Python
    loop: nothing to gain on a GPU) or together with ``sampling`` (whose processing paths run
    on the CPU)."""
    if device is None:
        return None
    if isinstance(device, bool) or not isinstance(device, (str, torch.device)):
        raise OptionError(f"device must be a device name such as 'cuda' or 'cuda:1', not "
                          f"{type(device).__name__}")
    try:
        dev = torch.device(device)
        torch.empty(0, device=dev)
    except (RuntimeError, ValueError, AssertionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OptionError(f"device {device!r} cannot be used here: {first}") from None
    if dev.type == "meta":
        raise OptionError("device 'meta' holds no values: the engine's outputs could not be "
                          "read")
    if layout.per_row:
        raise OptionError(f"layout {layout.name!r} calls the engine one request at a time; "
                          "device= is for batched engine functions")
    if proc is not None:
        raise OptionError("device= runs the engine function on the rows as given; with "
                          "sampling= the engine's processing path runs on the CPU: leave one out")
    return dev


def engine_sampler(fn: Callable, layout, sampling=None, device=None) -> Callable:
    """The canonical sampler ``sampler(drafts [B, L], q [B, L, V], p [B, L+1, V], generator) ->
    (accepted [B], token [B])`` of the engine function ``fn`` called as ``layout`` says.

    Every call hands ``fn`` the rows in the layout's form (logits log p in ``layout.dtype``, the
    other side through the same softmax), draws the layout's randomness from ``generator``
    (per-request generators and seeds from it; explicit coins uniform on the engine's range;
    torch's global generator seeded inside ``torch.random.fork_rng``), reads tau and Y from its
    output and checks that the tokens emitted before Y are the drafts
    ([`EngineOutputError`][spectheory.testing.engines.layouts.EngineOutputError] otherwise). An
    exception in ``fn`` becomes a one-line ``UserCodeError`` naming it.

    ``sampling`` (as [`check_sampler`][spectheory.testing.checks.sampler.check_sampler] accepts it:
    ``"temperature=0"``, ``"top_k=2"``, a mapping, a ``SamplingParams``) runs the engine's own
    processing path on the raw target rows before the call
    ([`spectheory.testing.engines.engine_sampling`][spectheory.testing.engines.engine_sampling]);
    pass the same ``sampling`` to ``check_sampler``, whose reference law is the processed target.

    ``device`` (``"cuda"``, ...): the engine function runs there (a released Triton or CUDA
    kernel compiled for the GPU, not under the interpreter). Every argument is built on the CPU
    as without it, the randomness drawn from ``generator`` there, then moved to the device
    (per-request generators are made on it, torch's global generators of that device are seeded
    and restored as the CPU's); the outputs are read back on the CPU. Batched layouts only, and
    without ``sampling``.

    ```python
    sampler = engine_sampler(vllm_v1_rejection_sample, VLLM_V1)   # a port, or the engine's own
    check_sampler(sampler, "token", samples=4_000)
    s = engine_sampler(vllm_v1_rejection_sample, VLLM_V1, sampling="top_k=2")
    check_sampler(s, "token", sampling="top_k=2", samples=4_000)
    ```
    """
    layout = get_layout(layout)
    if not callable(fn):
        raise OptionError(f"the engine function is {type(fn).__name__}, not a function")
    _check_constants(fn, layout)
    proc = engine_processing(layout, sampling)
    dev = _device_option(device, layout, proc)

    def sampler(drafts, q, p, generator=None):
        _check(drafts, q, p)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise OptionError(f"law sampler {sampler.__name__} takes a torch.Generator, got "
                              f"{type(generator).__name__}: for mode='coins' or 'coins-tau' "
                              f"build a coin-driven sampler with engine_coin_sampler")
        return _call(fn, layout, drafts, q, p, generator, proc=proc, device=dev)

    sampler.layout = layout
    sampler.sampling = None if proc is None else proc.params
    sampler.__name__ = _label(fn, layout, proc)
    sampler.__qualname__ = sampler.__name__
    return sampler


def engine_coin_sampler(fn: Callable, layout, convention: CoinConvention | None = None,
                        sampling=None) -> Callable:
    """A coin-driven sampler ``sampler(drafts, q, p, uniforms [B, L+1]) -> (accepted, token)``
    of ``fn`` under ``layout``, for ``check_sampler(..., mode="coins")`` and ``"coins-tau"``.

    The sampler carries ``coin_convention`` (``convention``, default ``layout.coins``):
    ``check_sampler`` then hands it ``uniforms[:, :L]`` already mapped onto the engine's coins
    (`CoinConvention.from_kit`) and, where the convention has a token coin,
    ``uniforms[:, L]`` rounded into its dtype. The coins reach the engine as its explicit coin
    arguments (``randomness="coins"``), through its coin hook (vLLM V1's
    ``generate_uniform_probs`` is replaced for the call) or through the torch function it draws
    them with (``coin_source``: transformers' ``torch.rand_like``, TensorRT-LLM's
    ``torch.rand``, replaced for the call by
    [`pinned_torch_coins`][spectheory.testing.engines.layouts.pinned_torch_coins]). The engine's
    other randomness (recovered tokens, the bonus token drawn by the caller when the convention has
    no token coin) comes from a generator seeded from ``uniforms[:, L]``, so equal inputs give
    equal outputs. ``sampling`` as in
    [`engine_sampler`][spectheory.testing.engines.layouts.engine_sampler].

    A layout whose coins are drawn inside the engine from seeds (vLLM MRV2's Triton kernel) has
    no coins to pin: refused in one line (check it in law and lossless modes).
    """
    layout = get_layout(layout)
    conv = layout.coins if convention is None else convention
    if not isinstance(conv, CoinConvention):
        raise OptionError(f"layout {layout.name!r}: a coin-driven sampler needs a "
                          f"CoinConvention, got {type(conv).__name__}")
    if layout.randomness != "coins" and layout.coin_hook is None and layout.coin_source is None:
        raise OptionError(f"layout {layout.name!r} draws its coins inside the engine "
                          f"({layout.randomness}): no coins to pin; check it in law and "
                          f"lossless modes")
    if not callable(fn):
        raise OptionError(f"the engine function is {type(fn).__name__}, not a function")
    if getattr(fn, "coin_convention", None) is not None and hasattr(fn, "layout"):
        raise OptionError(f"{_fn_name(fn)} is already a coin-driven sampler; hand "
                          f"engine_coin_sampler the engine function itself")
    proc = engine_processing(layout, sampling)
    if conv is not layout.coins:
        layout = layout.replace(coins=conv)

    def sampler(drafts, q, p, uniforms):
        _check(drafts, q, p)
        L = drafts.shape[1]
        if not isinstance(uniforms, torch.Tensor) or uniforms.dim() != 2 \
                or uniforms.shape[0] != drafts.shape[0] or uniforms.shape[1] != L + 1:
            got = (list(uniforms.shape) if isinstance(uniforms, torch.Tensor)
                   else type(uniforms).__name__)
            raise OptionError(f"coin sampler {sampler.__name__} takes uniforms [B, L+1] = "
                              f"[{drafts.shape[0]}, {L + 1}], got {got}: check it with "
                              f"mode='coins' or 'coins-tau', or build a law sampler with "
                              f"engine_sampler")
        u = uniforms.to(torch.float64)
        check_coin_range(u, f"coin sampler {sampler.__name__}")
        digest = hashlib.blake2b(u[:, L].contiguous().numpy().tobytes(), digest_size=8).digest()
        g = torch.Generator().manual_seed(int.from_bytes(digest, "little") >> 2)
        token = u[:, L] if conv.token_coin else None
        return _call(fn, layout, drafts, q, p, g, coins=u[:, :L], token_coins=token, proc=proc)

    sampler.layout = layout
    sampler.coin_convention = conv
    sampler.sampling = None if proc is None else proc.params
    sampler.__name__ = _label(fn, layout, proc) + " (coins)"
    sampler.__qualname__ = sampler.__name__
    return sampler


def describe(layout) -> str:
    """A layout as text: its arguments by role and its choices (for reports and docs)."""
    lay = get_layout(layout)
    lines = [f"layout {lay.name}"]
    for r, n in lay.args:
        lines.append(f"  {n:<36} {r}: {ROLES[r]}")
    for k, v in lay.constants:
        lines.append(f"  {k:<36} = {v!r}")
    opts = ", ".join(f"{f}={getattr(lay, f)!r}" for f in _CHOICES)
    lines.append(f"  {opts}, per_row={lay.per_row}, coin_hook={lay.coin_hook!r}")
    if lay.coins is not None:
        lines.append(f"  coins {lay.coins}")
    return "\n".join(lines)

