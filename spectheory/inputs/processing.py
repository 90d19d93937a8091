"""Sampling parameters (temperature, top-k, top-p, min-p) and the processed rows engines verify
against.

Serving engines do not verify drafts against the model's raw conditional p(.|prefix) but against
the distribution the request samples from: after temperature, top-k, top-p and min-p, or the
point mass at the argmax when the temperature is 0 (greedy decoding, the most common production
setting). Speculative decoding is lossless for such a request when its output has the law of the
*processed* target. This module holds the one implementation of that processing, in float64
(numpy or torch, any device) and in exact rationals (numpy arrays of `Fraction`):

* [`SamplingParams`][spectheory.inputs.processing.SamplingParams]: a frozen record of the parameters;
* [`parse_sampling`][spectheory.inputs.processing.parse_sampling]: None, a mapping, a `SamplingParams`
  or the string form `"temperature=0.7,top_k=20,top_p=0.9,min_p=0.05"`;
* [`process_rows`][spectheory.inputs.processing.process_rows]: the processed distribution along the last
  axis of a `[..., V]` array of probabilities (or of logits, `inputs="logits"`);
* [`process_instance`][spectheory.inputs.processing.process_instance]: an instance whose target rows
  (and, optionally, draft rows) are processed, which is what
  `spectheory.analyze(..., sampling=...)` and `spectheory.check_lossless(..., sampling=...)`
  analyse.

Semantics (vLLM V1's sampler, `vllm/v1/sample/sampler.py` and `ops/topk_topp_sampler.py`, is the
reference; the order of operations is vLLM's):

1. **Greedy.** A temperature below `GREEDY_BELOW` = 1e-5 (vLLM's `_SAMPLING_EPS`; 0 in
   particular) gives the point mass at the argmax of the row, ties to the lowest token id
   (`torch.argmax` returns the first maximal index). Top-k, top-p and min-p never remove the
   argmax, so they do not change a greedy row.
2. **Temperature** T > 0: p^(1/T) renormalised, the same as softmax(logits / T); zeros stay zero.
3. **Min-p** (`min_p` m): keep the tokens with p(x) >= m max_y p(y) (vLLM's
   `MinPLogitsProcessor` masks `p < m max p`, after temperature).
4. **Top-k** (`top_k` k): keep every token whose probability is >= the k-th largest, i.e. with
   fewer than k tokens strictly more probable (ties at the k-th value are all kept, as the
   engines' threshold masks `logits < kth_value` do).
5. **Top-p** (`top_p` P): on the survivors of steps 3-4, renormalised, keep the smallest prefix
   in descending probability whose mass reaches P: token x is kept when the mass of the
   survivors strictly more probable than x is < P. Tie rule at the boundary: tokens of equal
   probability are kept or dropped together (every token tied with the last token of the prefix
   is kept), so the result is a function of the row alone. vLLM and Hugging Face transformers
   sort ascending with `torch.sort` and drop positions whose ascending cumulative sum is
   <= 1 - P; among equal probabilities the position depends on the sort's order (stable for short
   rows, unspecified for long ones), so when a tie straddles the boundary they keep only some of
   the tied tokens. Both rules agree whenever no tie straddles the boundary (always, for rows
   that are not constructed with exact ties).

Then the kept probabilities are renormalised. Steps 3 and 4 commute (both keep every token above
a threshold); where top-p sits matters:

| engine | order |
|---|---|
| vLLM V1 (`order="vllm"`, the default) | temperature, min-p, top-k, top-p (top-p measured after min-p and top-k) |
| Hugging Face transformers (`order="transformers"`) | temperature, top-k, top-p (measured after top-k), min-p |
| SGLang (torch fallback `top_k_top_p_min_p_sampling_from_probs_torch`) | one sort; top-k by rank (exactly k tokens), top-p on the full row, min-p; not offered here |

Stateful parameters (`repetition_penalty`, `presence_penalty`, `frequency_penalty`,
`min_tokens` with `stop_token_ids`, `logit_bias`, `no_repeat_ngram_size`, `grammar`) read the
history each row follows, the tokens since the instance's root: they run first, on the kit's
logits, in `spectheory.inputs.stateful` (its docstring states the logits, the order and what is
exact); `process_rows(..., history=...)` takes the histories and `process_instance` processes
every row of a table with its own prefix (a
[`ProcessedModel`][spectheory.inputs.processing.ProcessedModel]).

Exactness: top-k, top-p, min-p and temperatures 0 and 1 are rational operations, computed
exactly on `Fraction` rows (a `float` parameter is read through its shortest decimal text, so
`top_p=0.9` is 9/10). A temperature T with 1/T an integer n (0.5, 0.25, 0.1, ...) is exact too
(p^n); any other temperature makes p^(1/T) irrational and is refused in exact mode.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping

import numpy as np

from ..runtime import backend as B
from ..runtime._lazy import is_tensor, torch
from ..runtime.errors import OptionError, SpectheoryError
from ..runtime.limits import shown
from .models import TableModel, all_prefixes, prefix_index
from ..runtime.limits import shown as _repr_cut

#: Temperatures below this are greedy (vLLM's `_SAMPLING_EPS`).
GREEDY_BELOW = 1e-5
#: Largest n = 1/T computed exactly (p^n) in exact rational mode.
MAX_EXACT_POWER = 32
#: Orders of operations (see the module docstring).
ORDERS = ("vllm", "transformers")
#: What `process_rows` reads along the last axis.
INPUTS = ("probs", "logits")
#: The stateless parameters (a function of the row alone).
STATELESS_KEYS = ("temperature", "top_k", "top_p", "min_p", "order")
#: The stateful parameters (a function of the row and its history:
#: `spectheory.inputs.stateful`), vLLM's names and transformers' `no_repeat_ngram_size`.
STATEFUL_KEYS = ("repetition_penalty", "presence_penalty", "frequency_penalty", "min_tokens",
                 "stop_token_ids", "logit_bias", "no_repeat_ngram_size", "grammar")
#: The parameters, in the order of the string form.
KEYS = STATELESS_KEYS + STATEFUL_KEYS
#: Largest distance of a probability row's sum from 1 that the processing accepts (then the row
#: is divided by its sum, exactly for Fraction rows): float32 rows normalised by a softmax over
#: 151,936 tokens sum to 1 within about 1e-6. A row further off is refused, never
#: silently renormalised: it is not a distribution, and top-p / min-p thresholds read on it would
#: mean something else than the caller thinks.
ROW_SUM_TOL = 1e-5
#: Largest penalty, bias or count accepted (a larger one is a typo, and would overflow logits).
MAX_PENALTY = 1e6
MAX_COUNT = 10**6
#: The largest top-k: int64's (what ``torch.topk`` takes; a k past the vocabulary keeps every
#: token, and engines such as vLLM store min(k, V)).
MAX_TOP_K = 2**63 - 1
#: Accepted values, for the one-line errors.
RANGES = {
    "temperature": "a finite number >= 0 (below 1e-5: greedy)",
    "top_k": "an integer in 1..2^63-1 (past the vocabulary: every token), or 0 or -1 for no "
             "top-k",
    "top_p": "a number in (0, 1] (1: no top-p)",
    "min_p": "a number in [0, 1] (0: no min-p)",
    "order": "one of " + ", ".join(ORDERS),
    "repetition_penalty": f"a number in (0, {MAX_PENALTY:g}] (1: none)",
    "presence_penalty": f"a number in [-{MAX_PENALTY:g}, {MAX_PENALTY:g}] (0: none)",
    "frequency_penalty": f"a number in [-{MAX_PENALTY:g}, {MAX_PENALTY:g}] (0: none)",
    "min_tokens": f"an integer in 0..{MAX_COUNT:,} (with stop_token_ids)",
    "stop_token_ids": "token ids >= 0 (string form: 3 or 3;5)",
    "logit_bias": "token:bias pairs, bias a finite number, -inf, or *f for a probability "
                  "factor f > 0 (string form: 0:-inf;2:1.5;1:*1/2)",
    "no_repeat_ngram_size": f"an integer in 0..{MAX_COUNT:,} (0: none)",
    "grammar": "a TokenAutomaton, its JSON object, or a path to a JSON grammar file",
}
#: The largest finite float64, as an exact rational.
_FLOAT_MAX = Fraction(np.finfo(np.float64).max)


class SamplingError(OptionError):
    """A sampling parameter, or a row handed to the processing, is outside its accepted range."""


def _short(value) -> str:
    """``repr(value)`` cut to 60 characters (a number over Python's digit limit named by its
    size: `spectheory.runtime.limits.shown`)."""
    return shown(value, 60)


def _bad(key: str, value, why: str = "is out of range") -> SamplingError:
    return SamplingError(f"sampling parameter {key} = {_short(value)} {why}: {key} is "
                         f"{RANGES[key]}")


def _untensor(value):
    """A torch number (a 0-d real tensor with values) as its Python number, as numpy scalars
    are taken; anything else unchanged (refused by the caller's own check)."""
    if is_tensor(value) and value.dim() == 0 and not value.is_meta and \
            not value.dtype.is_complex and value.dtype != torch.bool:
        return value.item()
    return value


def _number(key: str, value) -> Any:
    """A float or Fraction from a number or a numeric string ("0.9", "9/10")."""
    value = _untensor(value)
    if isinstance(value, bool):
        raise _bad(key, value, "is not a number")
    if isinstance(value, str):
        text = value.strip()
        if not text.isascii() or "_" in text:  # float() and Fraction() read "\u0663" and "1_0"
            raise _bad(key, value, "is not a number in ASCII digits")
        try:
            value = Fraction(text) if "/" in text else float(text)
        except (ValueError, ZeroDivisionError):
            raise _bad(key, value, "is not a number") from None
        if isinstance(value, float) and math.isinf(value) and "inf" not in text.lower():
            raise _bad(key, text, ("is below the lowest" if value < 0 else "is above the largest")
                       + " float (about " + ("-" if value < 0 else "") + "1.8e308)")
        if value == 0 and re.search(r"[1-9]", text.lower().split("e")[0]):
            raise _bad(key, text, "is below the smallest float (it would be read as 0)")
    if isinstance(value, Fraction):
        if max(value.numerator.bit_length(), value.denominator.bit_length()) > 1024:
            raise _bad(key, value, "has over 300 digits")  # exact rows would grow without end
        return value
    if isinstance(value, (int, np.integer)):
        return float(value) if abs(int(value)) < 2**53 else Fraction(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise _bad(key, value, "is not finite")
        return float(value)
    raise _bad(key, value, "is not a number")


def _exact(value) -> Fraction:
    """A parameter as an exact rational: floats through their shortest decimal text."""
    return value if isinstance(value, Fraction) else Fraction(repr(float(value)))


def _text(value) -> str:
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters of a request: what the target (or draft) rows are processed by.

    Numbers may be given as floats, ints, Fractions or numeric strings (``"9/10"``); ``str()``
    gives the string form that [`parse_sampling`][spectheory.inputs.processing.parse_sampling] reads
    back.

    The stateful parameters (penalties to grammar) act on the row's history, the tokens
    emitted since the instance's root (drafts before the row's position included), on the
    kit's logits; the order of operations and their exactness are in
    `spectheory.inputs.stateful`.

    Parameters
    ----------
    temperature : float or Fraction
        >= 0; below `GREEDY_BELOW` (1e-5) greedy (the point mass at the argmax, ties to the
        lowest token id); otherwise p^(1/T) renormalised. Default 1.
    top_k : int or None
        Keep the tokens with fewer than k tokens strictly more probable (ties kept). None, 0 or
        -1: no top-k.
    top_p : float or Fraction
        In (0, 1]: keep the smallest prefix, by descending probability, whose mass reaches
        top_p, with the tokens tied at its boundary (1: no top-p).
    min_p : float or Fraction
        In [0, 1]: keep the tokens with p >= min_p * max p (0: no min-p).
    order : {"vllm", "transformers"}
        vLLM V1: temperature, min-p, top-k, top-p; transformers: temperature, top-k, top-p,
        min-p (see `spectheory.inputs.processing`).
    repetition_penalty : float
        > 0 (1: none). A token in the history: a positive logit is divided by it, a
        non-positive one multiplied (vLLM, transformers).
    presence_penalty, frequency_penalty : float
        logit -= presence * [count > 0] + frequency * count, count the token's occurrences in
        the history (vLLM, OpenAI).
    min_tokens : int
        While fewer tokens than this are in the history, the `stop_token_ids` are masked.
    stop_token_ids : tuple of int
        The instance's stop tokens (needed with ``min_tokens``).
    logit_bias : mapping token -> bias
        Added to the logit (-inf bans the token); a bias written ``"*f"`` (string) multiplies
        the token's probability by f > 0 instead (exact for rational f).
    no_repeat_ngram_size : int
        transformers' ``no_repeat_ngram_size`` (0: none).
    grammar : TokenAutomaton, dict or path
        A token automaton whose mask at the state the history reaches restricts the row
        (`spectheory.inputs.stateful.TokenAutomaton`).

    """

    temperature: Any = 1.0
    top_k: int | None = None
    top_p: Any = 1.0
    min_p: Any = 0.0
    order: str = "vllm"
    repetition_penalty: Any = 1.0
    presence_penalty: Any = 0.0
    frequency_penalty: Any = 0.0
    min_tokens: int = 0
    stop_token_ids: Any = ()
    logit_bias: Any = ()
    no_repeat_ngram_size: int = 0
    grammar: Any = None

    def __post_init__(self):
        t = _number("temperature", self.temperature)
        if t < 0:
            raise _bad("temperature", self.temperature)
        if isinstance(t, Fraction) and t > _FLOAT_MAX:  # float mode divides by float(T); exact
            # mode needs T = 1/n: no such temperature is usable in either
            raise _bad("temperature", self.temperature,
                       f"is beyond the float range (over {float(_FLOAT_MAX):.5g})")
        k = _untensor(self.top_k)
        if k is not None:
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
                if isinstance(k, (float, np.floating)) and float(k).is_integer():
                    k = int(k)
                else:
                    raise _bad("top_k", k, "is not an integer")
            k = int(k)
            if not -1 <= k <= MAX_TOP_K:  # int64's range (torch.topk's; vLLM holds min(k, V))
                raise _bad("top_k", k)
            k = None if k in (0, -1) else k
        top_p = _number("top_p", self.top_p)
        if not 0 < top_p <= 1:
            raise _bad("top_p", self.top_p)
        min_p = _number("min_p", self.min_p)
        if not 0 <= min_p <= 1:
            raise _bad("min_p", self.min_p)
        if self.order not in ORDERS:
            raise _bad("order", self.order, "is not an order of operations")
        for name, value in (("temperature", t), ("top_k", k), ("top_p", top_p),
                            ("min_p", min_p)):
            object.__setattr__(self, name, value)
        rep = _number("repetition_penalty", self.repetition_penalty)
        if not 0 < rep <= MAX_PENALTY:
            raise _bad("repetition_penalty", self.repetition_penalty)
        pres = _number("presence_penalty", self.presence_penalty)
        freq = _number("frequency_penalty", self.frequency_penalty)
        for key, v in (("presence_penalty", pres), ("frequency_penalty", freq)):
            if abs(v) > MAX_PENALTY:
                raise _bad(key, v, f"is beyond +-{MAX_PENALTY:g}")
        mt = _count("min_tokens", self.min_tokens)
        nr = _count("no_repeat_ngram_size", self.no_repeat_ngram_size)
        stops = _token_ids(self.stop_token_ids)
        if mt and not stops:
            raise SamplingError(f"min_tokens = {mt} needs stop_token_ids (the tokens it "
                                f"masks), e.g. \"min_tokens=2,stop_token_ids=0\"")
        if stops and not mt:  # the rows' law models no end of generation: they would do nothing
            raise SamplingError(f"stop_token_ids = {';'.join(map(str, stops))} act here only "
                                f"with min_tokens (masked until that many tokens): give "
                                f"min_tokens too, e.g. \"min_tokens=2,stop_token_ids="
                                f"{stops[0]}\", or drop them")
        bias = _logit_bias(self.logit_bias)
        from .grammar_engines import as_grammar

        grammar = as_grammar(self.grammar)
        for name, value in (("repetition_penalty", rep), ("presence_penalty", pres),
                            ("frequency_penalty", freq), ("min_tokens", mt),
                            ("no_repeat_ngram_size", nr), ("stop_token_ids", stops),
                            ("logit_bias", bias), ("grammar", grammar)):
            object.__setattr__(self, name, value)

    @property
    def greedy(self) -> bool:
        """Temperature below `GREEDY_BELOW`: the point mass at the argmax."""
        return self.temperature < GREEDY_BELOW

    @property
    def identity(self) -> bool:
        """No processing at all (temperature 1, no top-k, top-p 1, min-p 0, nothing
        stateful)."""
        return (self.temperature == 1 and self.top_k is None and self.top_p == 1
                and self.min_p == 0 and not self.stateful)

    @property
    def stateful_names(self) -> tuple:
        """The parameters set here that read the row's history (penalties, masks, bias), in
        `STATEFUL_KEYS`' order; ``stop_token_ids`` acts only through ``min_tokens``."""
        on = (self.repetition_penalty != 1, self.presence_penalty != 0,
              self.frequency_penalty != 0, bool(self.min_tokens), False, bool(self.logit_bias),
              bool(self.no_repeat_ngram_size), self.grammar is not None)
        return tuple(k for k, flag in zip(STATEFUL_KEYS, on) if flag)

    @property
    def stateful(self) -> bool:
        """Some parameter reads the row's history (penalties, masks, bias)."""
        return bool(self.stateful_names)

    @property
    def on_logits(self) -> bool:
        """Some stateful step acts on logits (penalties, additive biases): float64 only."""
        return bool(self.repetition_penalty != 1 or self.presence_penalty != 0
                    or self.frequency_penalty != 0
                    or any(not f and v not in (-math.inf, 0) for _, v, f in self.logit_bias))

    def stateless(self) -> "SamplingParams":
        """The same temperature, top-k, top-p, min-p and order without the stateful part
        (built once per parameters object: `process_rows` asks for it on every call)."""
        cached = self.__dict__.get("_stateless")
        if cached is None:
            cached = SamplingParams(self.temperature, self.top_k, self.top_p, self.min_p,
                                    self.order)
            object.__setattr__(self, "_stateless", cached)  # not a field: eq, hash, repr
        return cached  # and dataclasses.replace ignore it

    def exact_power(self) -> int | None:
        """n with temperature = 1/n (1 for temperature 1), None when greedy; raises
        `SamplingError` in one line when p^(1/T) is not rational (exact mode refuses it)."""
        if self.on_logits:
            raise SamplingError(
                f"{self._logit_part()} {'act' if ' and ' in self._logit_part() else 'acts'} on "
                f"logits, not rational in exact mode (exp of "
                f"a penalised log p); use float mode (exact=False, no --exact), or give biases "
                f"as probability factors (logit_bias=2:*1/2)")
        if self.greedy:
            return None
        inv = 1 / _exact(self.temperature)
        if inv.denominator != 1 or not 1 <= inv <= MAX_EXACT_POWER:
            raise SamplingError(
                f"temperature = {_text(self.temperature)} is not rational in exact mode: "
                f"p^(1/T) is exact only for T = 1/n with n an integer in 1..{MAX_EXACT_POWER} "
                f"(1, 0.5, 0.25, 0.2, ...) or T = 0; use float mode (exact=False, no --exact)")
        return int(inv)

    def _logit_part(self) -> str:
        names = [k for k, on in (("repetition_penalty", self.repetition_penalty != 1),
                                 ("presence_penalty", self.presence_penalty != 0),
                                 ("frequency_penalty", self.frequency_penalty != 0),
                                 ("additive logit_bias",
                                  any(not f and v not in (-math.inf, 0) for _, v, f in self.logit_bias)))
                 if on]
        return " and ".join(names)

    def to_dict(self) -> dict:
        """JSON-ready values (Fractions as strings); the stateful keys only when set."""
        enc = (lambda v: str(v) if isinstance(v, Fraction) else v)
        out = {"temperature": enc(self.temperature), "top_k": self.top_k,
               "top_p": enc(self.top_p), "min_p": enc(self.min_p), "order": self.order}
        if self.repetition_penalty != 1:
            out["repetition_penalty"] = enc(self.repetition_penalty)
        if self.presence_penalty != 0:
            out["presence_penalty"] = enc(self.presence_penalty)
        if self.frequency_penalty != 0:
            out["frequency_penalty"] = enc(self.frequency_penalty)
        if self.min_tokens:
            out["min_tokens"] = self.min_tokens
        if self.stop_token_ids:
            out["stop_token_ids"] = list(self.stop_token_ids)
        if self.logit_bias:
            out["logit_bias"] = {str(t): _bias_text(v, f) for t, v, f in self.logit_bias}
        if self.no_repeat_ngram_size:
            out["no_repeat_ngram_size"] = self.no_repeat_ngram_size
        if self.grammar is not None:
            out["grammar"] = self.grammar.to_dict()
        return out

    def __str__(self) -> str:
        parts = []
        if self.temperature != 1:
            parts.append(f"temperature={_text(self.temperature)}")
        if self.top_k is not None:
            parts.append(f"top_k={self.top_k}")
        if self.top_p != 1:
            parts.append(f"top_p={_text(self.top_p)}")
        if self.min_p != 0:
            parts.append(f"min_p={_text(self.min_p)}")
        if self.order != "vllm":
            parts.append(f"order={self.order}")
        for key in ("repetition_penalty", "presence_penalty", "frequency_penalty"):
            v = getattr(self, key)
            if v != (1 if key == "repetition_penalty" else 0):
                parts.append(f"{key}={_text(v)}")
        if self.min_tokens:
            parts.append(f"min_tokens={self.min_tokens}")
        if self.stop_token_ids:
            parts.append("stop_token_ids=" + ";".join(str(t) for t in self.stop_token_ids))
        if self.logit_bias:
            parts.append("logit_bias=" + ";".join(f"{t}:{_bias_text(v, f)}"
                                                  for t, v, f in self.logit_bias))
        if self.no_repeat_ngram_size:
            parts.append(f"no_repeat_ngram_size={self.no_repeat_ngram_size}")
        if self.grammar is not None:
            parts.append(f"grammar={getattr(self.grammar, 'path', self.grammar.name)}")
        return ",".join(parts) or "temperature=1"


#: A decimal literal in ASCII (int() and float() also read '\u0663' as 3 and '1_0' as 10)
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?")


def _whole_text(key: str, text: str) -> int:
    """The integer a count's text names: digits, or a decimal literal of whole value ("2.0",
    "1e3"), as a mapping's 2.0 is taken; anything else, a fraction ("2.5", and
    "2.0000000000000001", which a float would round to 2) included, is not an integer. A
    literal of 10^19 or more is out of range before a huge integer is made."""
    if not _DECIMAL.fullmatch(text):
        raise _bad(key, text, "is not an integer")
    import decimal

    try:
        d = decimal.Decimal(text)
        whole = d == d.to_integral_value()
    except decimal.InvalidOperation:  # an exponent past Decimal's own range
        raise _bad(key, text) from None
    if not whole:
        raise _bad(key, text, "is not an integer")
    if d.adjusted() >= 19:  # 10^19 and past: beyond int64 (and every count's range)
        raise _bad(key, text)
    return int(d)


def _count(key: str, value) -> int:
    value = _untensor(value)
    if isinstance(value, str):
        value = _whole_text(key, value.strip())
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise _bad(key, value, "is not an integer")
    if not 0 <= int(value) <= MAX_COUNT:
        raise _bad(key, value)
    return int(value)


def _token_id(key: str, value) -> int:
    value = _untensor(value)  # a torch id as numpy's is taken
    if isinstance(value, str):
        text = value.strip()
        if not (text.isascii() and text.isdigit()):  # int() refuses '\u00b2', which isdigit
            raise _bad(key, value, "is not a token id")
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
            not 0 <= int(value) < 2**31:
        raise _bad(key, value, "is not a token id")
    return int(value)


def _token_ids(value) -> tuple:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [v for v in value.replace(";", " ").split()]
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = [value]
    elif is_tensor(value) and value.dim() == 0:  # one id as a 0-d tensor, as one int
        value = [value]
    if isinstance(value, (Mapping, bytes, bytearray)):  # iterating would read a mapping's
        # keys, or the bytes' character codes (b"12" as tokens 49 and 50), as the token ids
        raise _bad("stop_token_ids", value, "is not a list of token ids")
    try:
        items = list(itertools.islice(value, MAX_COUNT + 1))
    except TypeError:
        raise _bad("stop_token_ids", value, "is not a list of token ids") from None
    if len(items) > MAX_COUNT:
        raise _bad("stop_token_ids", f"{MAX_COUNT:,}+ ids", "is too long")
    return tuple(sorted({_token_id("stop_token_ids", v) for v in items}))


def _bias_value(token: int, value):
    """(value, is_factor) of one logit_bias entry."""
    value = _untensor(value)  # a torch -inf is the ban as numpy's is
    is_factor = isinstance(value, str) and value.strip().startswith("*")
    if is_factor:
        value = value.strip()[1:]
    if is_factor and isinstance(value, str) and value.strip().lower().lstrip("+-") in (
            "inf", "infinity"):
        raise _bad("logit_bias", f"{token}:*{value}", "has a factor outside (0, 1e6]")
    if isinstance(value, str) and value.strip().lower() in ("-inf", "-infinity"):
        return -math.inf, False
    if isinstance(value, (float, np.floating)) and value == -math.inf:
        return -math.inf, False
    v = _number("logit_bias", value)
    if is_factor:
        if not 0 < v <= MAX_PENALTY:
            raise _bad("logit_bias", f"{token}:*{value}", "has a factor outside (0, 1e6]")
    elif abs(v) > MAX_PENALTY:
        raise _bad("logit_bias", f"{token}:{value}", f"is beyond +-{MAX_PENALTY:g}")
    return v, is_factor


def _logit_bias(value) -> tuple:
    """Sorted ((token, value, is_factor), ...) from a mapping, pairs or the string form."""
    if value is None or (isinstance(value, (tuple, list, dict)) and not value):
        return ()
    if isinstance(value, str):
        pairs = []
        for part in value.split(";"):
            tok, colon, val = part.partition(":")
            if not colon:
                raise _bad("logit_bias", part.strip(), "is not token:bias")
            pairs.append((tok, val))
    elif isinstance(value, Mapping):
        pairs = list(value.items())
    else:
        try:
            items = list(value)
        except TypeError:
            raise _bad("logit_bias", value, "is not a mapping of token to bias") from None
        if not all(isinstance(x, (tuple, list, np.ndarray)) for x in items):  # not "01" as (0, 1)
            raise _bad("logit_bias", value, "is not a mapping of token to bias (pairs (token, "
                       "bias) or triples (token, bias, is_factor))")
        pairs = [tuple(x) for x in items]
        if any(len(x) not in (2, 3) for x in pairs) or len({len(x) for x in pairs}) > 1:
            raise _bad("logit_bias", value, "is not a mapping of token to bias")
        if all(len(x) == 3 for x in pairs):  # the stored form
            for t, v, f in pairs:
                if not isinstance(f, (bool, np.bool_)):
                    raise _bad("logit_bias", (t, v, f), "has an is_factor flag that is not True "
                               "or False")
            pairs = [(t, f"*{v}" if f else v) for t, v, f in pairs]
    out = {}
    for tok, val in pairs:
        t = _token_id("logit_bias", tok)
        if t in out:
            raise _bad("logit_bias", value, f"gives token {t} twice")
        out[t] = _bias_value(t, val)
    return tuple((t, v, f) for t, (v, f) in sorted(out.items()))


def _bias_text(v, is_factor: bool) -> str:
    if v == -math.inf:
        return "-inf"
    return ("*" if is_factor else "") + _text(v)


#: Most digits of one number in the string form of sampling parameters, read before Python's
#: own limit of 4,300 (a number past 1,024 bits is refused by its parameter's range anyway).
MAX_DIGITS = 1000


def _check_key(key) -> str:
    if isinstance(key, str) and key not in KEYS and key.strip().lower() in KEYS:
        raise SamplingError(f"unknown sampling parameter {key!r}; keys are lower case: "
                            f"{key.strip().lower()!r}")
    if not isinstance(key, str) or key not in KEYS:
        near = difflib.get_close_matches(str(key), KEYS, n=1, cutoff=0.0)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise SamplingError(f"unknown sampling parameter {key!r}{hint} (keys: "
                            f"{', '.join(KEYS)})")
    return key


def _value(key: str, text: str):
    text = text.strip()
    if not text:  # "stop_token_ids=" set nothing, silently
        raise _bad(key, text, "has no value (key=value)")
    if key in ("order", "stop_token_ids", "logit_bias", "grammar"):
        return text
    if key in ("min_tokens", "no_repeat_ngram_size"):
        return _count(key, text)
    if key == "top_k":
        return _whole_text("top_k", text)
    return _number(key, text)


def parse_sampling(x) -> SamplingParams | None:
    """Sampling parameters from None, a mapping, a `SamplingParams` or a string.

    The string form is comma-separated ``key=value`` pairs,
    ``"temperature=0.7,top_k=20,top_p=0.9,min_p=0.05"`` (keys ``temperature``, ``top_k``,
    ``top_p``, ``min_p``, ``order``; values numbers or fractions such as ``9/10``); ``"greedy"``
    is ``temperature=0``; ``""`` and ``"none"`` mean no processing (None). A mapping takes the
    same keys. Returns None for None (no processing), else a `SamplingParams`.

    Raises `SamplingError` (a `SpectheoryError`) in one line naming the key, the nearest valid
    key for an unknown one, and the accepted range for a bad value.

    ```python
    from spectheory.inputs.processing import parse_sampling

    parse_sampling("temperature=0")                    # SamplingParams(temperature=0.0, ...)
    parse_sampling({"top_k": 2, "top_p": "9/10"}).top_p  # Fraction(9, 10)
    ```
    """
    if x is None or isinstance(x, SamplingParams):
        return x
    if isinstance(x, str):
        text = x.strip()
        if text.lower() in ("", "none"):
            return None
        if text.lower() == "greedy":
            return SamplingParams(temperature=0)
        values = {}
        for part in text.split(","):
            key, eq, val = part.partition("=")
            key = key.strip()
            if not eq:
                raise SamplingError(f"sampling parameter {part.strip()!r} is not key=value "
                                    f"(e.g. \"temperature=0.7,top_k=20\"; keys: "
                                    f"{', '.join(KEYS)})")
            _check_key(key)
            if key in values:
                raise SamplingError(f"sampling parameter {key} is given twice in {text!r}")
            long = re.search(r"\d{%d,}" % (MAX_DIGITS + 1), val)
            if long:  # int() of over 4,300 digits raised Python's own ValueError, unnamed
                raise _bad(key, val, f"has a number of {len(long.group()):,} digits (at most "
                                     f"{MAX_DIGITS})")
            values[key] = _value(key, val)
        return SamplingParams(**values)
    if isinstance(x, Mapping):
        for key in x:
            _check_key(key)
        return SamplingParams(**dict(x))
    raise SamplingError(f"sampling parameters must be None, a mapping, a SamplingParams or a "
                        f"string such as \"temperature=0.7,top_k=20\", not {type(x).__name__}")


# ----------------------------------------------------------------------------- rows


def _cummax(a):
    if B.is_torch(a):
        return torch.cummax(a, dim=-1).values
    return np.maximum.accumulate(a, axis=-1)


def _true(shape, like):
    """A writable boolean array of True in the backend of ``like``."""
    if B.is_torch(like):
        return torch.ones(shape, dtype=torch.bool, device=like.device)
    return np.ones(shape, dtype=bool)


def _param(value, like):
    return _exact(value) if B.is_exact(like) else float(value)


def keep_mask(x, params: SamplingParams):
    """Which tokens top-k, top-p and min-p keep, for rows x [N, V] of probabilities summing to 1
    (a boolean array like x; temperature is applied before, greedy is not handled here).

    With s the row sorted in descending order, ``rank(x)`` the number of tokens strictly more
    probable than x and ``greater(x)`` their mass: top-k keeps rank < k, min-p keeps
    p >= min_p max p, top-p keeps greater < top_p * (mass of the survivors of the earlier
    steps). Every rule compares against a threshold, so the mask is exact on Fraction rows and
    does not depend on how a sort orders equal probabilities.

    Rows that do not sum to 1 (within `ROW_SUM_TOL`) are refused with a
    `SamplingError`: the top-p threshold is a share of the row's mass only on a distribution."""
    if not isinstance(params, SamplingParams):
        raise SamplingError(f"params must be SamplingParams (parse_sampling), not "
                            f"{type(params).__name__}")
    _check_sums(x)
    return _keep_mask(x, params)


def _keep_mask(x, sp: SamplingParams):
    """`keep_mask` of rows x [N, V] that sum to 1 by construction (`process_rows` hands the
    rows it normalised itself: the check in `keep_mask` would read them a second time)."""
    order = B.argsort(x, axis=-1, descending=True)
    s = B.take_along(x, order, axis=-1)
    N, V = s.shape
    before = B.cumsum(s, axis=-1) - s  # mass of the earlier sorted positions
    pos = B.broadcast_to(B.expand_dims(B.arange(V, s), 0), (N, V))
    start = _true((N, V), s)  # first sorted position of each run of equal probabilities
    if V > 1:
        start[:, 1:] = s[:, 1:] != s[:, :-1]
    rank = _cummax(B.where(start, pos, pos * 0))  # = the start of the token's run
    greater = B.take_along(before, rank, axis=-1)
    keep = _true((N, V), s)
    if sp.top_k is not None:
        keep = keep & (rank < sp.top_k)
    minp = None if sp.min_p == 0 else s >= s[:, :1] * _param(sp.min_p, x)
    if sp.order == "vllm" and minp is not None:
        keep = keep & minp
    if sp.top_p != 1:
        mass = B.sum(B.where(keep, s, B.zeros_like(s)), axis=-1, keepdims=True)
        keep = keep & (greater < mass * _param(sp.top_p, x))
    if sp.order == "transformers" and minp is not None:
        keep = keep & minp
    return B.unsort(keep, order)


def _check_sums(x, total=None) -> None:
    """Refuse a row of x [N, V] (probabilities, float or Fraction) whose sum is not 1 within
    `ROW_SUM_TOL` (Fraction rows converted from floats sum to 1 within rounding, not exactly).
    ``total`` [N, 1]: the row sums when the caller has them already (``B.sum(x, -1, True)``)."""
    if len(x.shape) != 2:
        raise SamplingError(f"rows must have shape [N, V], not {list(x.shape)}")
    if total is None:
        total = B.sum(x, axis=-1, keepdims=True)
    off = abs(total - 1) > (Fraction(ROW_SUM_TOL) if B.is_exact(x) else ROW_SUM_TOL)
    if bool(off.any()):
        r = _first(off, 1)[0]
        raise SamplingError(f"probability row {r} sums to {float(total[r, 0]):.17g}, not 1 "
                            f"within {ROW_SUM_TOL:g}: rows must be distributions (normalise "
                            f"them first)")


def _as_array(rows):
    if is_tensor(rows) or isinstance(rows, np.ndarray):
        return rows
    try:
        flat = list(np.asarray(rows, dtype=object).reshape(-1))
    except (TypeError, ValueError) as exc:
        raise SamplingError(f"rows must be an array of numbers, not {type(rows).__name__} "
                            f"({exc})") from None
    for v in flat:  # numpy would read "0.5" and True as the numbers 0.5 and 1
        if isinstance(v, (str, bytes, bool, np.bool_)):
            raise SamplingError(f"rows must be an array of numbers; they hold {_repr_cut(v, 40)}, a "
                                f"{type(v).__name__}")
    if any(isinstance(v, Fraction) for v in flat):
        return B.to_exact(np.asarray(rows, dtype=object))
    try:
        return np.asarray(rows, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SamplingError(f"rows must be an array of numbers ({exc})") from None


def _np(a):
    return a.detach().cpu().numpy() if is_tensor(a) else np.asarray(a)


def _first(bad, V: int) -> tuple[int, int]:
    n = int(np.flatnonzero(_np(bad).reshape(-1))[0])
    return n // V, n % V


def _check_values(x, inputs: str) -> None:
    """The value checks of float rows ``x [N, V]`` (torch or numpy, any float dtype) that
    `_validate` and `check_model_rows` share: no NaN; logits with no +inf and no row all -inf;
    probabilities finite and non-negative."""
    V = x.shape[-1]
    nan = torch.isnan(x) if B.is_torch(x) else np.isnan(x)
    if bool(nan.any()):
        r, t = _first(nan, V)
        raise SamplingError(f"{inputs} rows hold a NaN at row {r}, token {t}")
    if inputs == "logits":
        if bool((x == math.inf).any()):
            r, t = _first(x == math.inf, V)
            raise SamplingError(f"logits rows hold +inf at row {r}, token {t}")
        top = x.max(-1).values if B.is_torch(x) else x.max(axis=-1)
        if bool((top == -math.inf).any()):
            raise SamplingError(f"logits row {_first(top == -math.inf, 1)[0]} is all -inf "
                                f"(no token has probability)")
        return
    bad = (x < 0) | (x == math.inf)
    if bool(bad.any()):
        r, t = _first(bad, V)
        raise SamplingError(f"probability rows must be finite and non-negative; row {r}, "
                            f"token {t} is {float(x[r, t])}")


def _validate(x, inputs: str, exact: bool):
    """x [N, V] (float64 torch/numpy, or Python numbers in an object array), checked;
    probabilities are normalised (exact: as Fractions), logits returned as they are."""
    N, V = x.shape
    if exact:
        ok = np.vectorize(lambda v: isinstance(v, (Fraction, int, np.integer))
                          and not isinstance(v, bool), otypes=[bool])(x)
        if not ok.all():
            r, t = _first(~ok, V)
            raise SamplingError(f"exact rows hold Fractions or integers; row {r}, token {t} "
                                f"is {x[r, t]!r}")
        x = B.to_exact(x)
        if (x < 0).any():
            r, t = _first(x < 0, V)
            raise SamplingError(f"probability rows must be non-negative; row {r}, token {t} "
                                f"is {x[r, t]}")
        total = B.sum(x, axis=-1, keepdims=True)
        if (total == 0).any():
            raise SamplingError(f"row {_first(total == 0, 1)[0]} has no probability mass "
                                f"(all zeros)")
        _check_sums(x, total)
        return x / total
    _check_values(x, inputs)
    if inputs == "logits":
        return x
    total = B.sum(x, axis=-1, keepdims=True)
    if bool((total == 0).any()):
        raise SamplingError(f"row {_first(total == 0, 1)[0]} has no probability mass "
                            f"(all zeros)")
    _check_sums(x, total)
    return x / total


def check_model_rows(rows, inputs: str = "probs") -> None:
    """Refuse in one line ([`SamplingError`][spectheory.inputs.processing.SamplingError]) model
    rows ``[..., V]`` (float torch or numpy) that cannot be what ``inputs`` says: logits with a
    NaN or +inf, or a row all -inf; probabilities with a NaN, an infinite or a negative entry,
    or a row of zeros. Sums are not checked (rows of a float16 softmax over a large vocabulary
    sum to 1 within a few 1e-4; `process_rows` divides by them), and nothing is copied: one
    pass or two over the rows in their own dtype."""
    if inputs not in INPUTS:
        raise SamplingError(f"inputs = {_repr_cut(inputs, 40)} is not one of {', '.join(INPUTS)}")
    torch_rows = B.is_torch(rows)
    if not (torch_rows or isinstance(rows, np.ndarray)):  # (a list was an AttributeError)
        raise SamplingError(f"rows must be a torch tensor or a numpy array [..., V] of floats, "
                            f"not {type(rows).__name__}")
    if not (rows.is_floating_point() if torch_rows else rows.dtype.kind == "f"):
        raise SamplingError(f"rows must hold floats, not {rows.dtype}")  # bool, complex, ints
    if torch_rows and rows.is_meta:
        raise SamplingError("rows are meta tensors, which hold no values to check")
    shape = tuple(rows.shape)
    if not shape or shape[-1] == 0:
        raise SamplingError(f"rows [..., V] need a vocabulary axis; got shape {list(shape)}")
    x = rows.reshape(-1, shape[-1])
    _check_values(x, inputs)
    if inputs == "logits":
        return
    empty = ~(x > 0).any(-1) if B.is_torch(x) else ~(x > 0).any(axis=-1)
    if bool(empty.any()):
        raise SamplingError(f"row {_first(empty, 1)[0]} has no probability mass (all zeros)")


def process_rows_along(rows, tokens, params, inputs: str = "probs"):
    """`process_rows` of every position of ``rows [B, m+1, V]`` along ``tokens [B, m]``: row j
    follows the history ``tokens[:, :j]``. Equal to
    ``torch.stack([process_rows(rows[:, j], params, inputs, history=tokens[:, :j]) for j in
    range(m + 1)], dim=1)`` (``np.stack`` for numpy rows), the definition it falls back to,
    except that a row whose masks leave no token at a history the processed rows reach with
    probability zero (a token of processed probability 0 before it) is kept as given, as in
    the processed tables of `process_instance`, instead of refused.

    The histories enter only through the stateful masks and token counts
    (`spectheory.inputs.stateful.mask`, `counts`), computed for each position from its own
    history (the counts as running sums of the tokens); every other step acts on each row
    alone (elementwise, or along its last axis), so float64 torch rows of all positions are
    processed in one pass. Rows or histories that are refused are processed position by
    position, so that the message names the same first row."""
    sp = parse_sampling(params)
    rs, ts = getattr(rows, "shape", None), getattr(tokens, "shape", None)
    for name, value, shape in (("rows", rows, rs), ("tokens", tokens, ts)):
        if shape is None:  # a list has no shape: the message named shape None, not the type
            raise SamplingError(f"process_rows_along takes {name} as an array (numpy or "
                                f"torch), not {type(value).__name__}")
    if len(rs) != 3 or len(ts) != 2 \
            or tuple(ts) != (rs[0], rs[1] - 1):
        raise SamplingError(f"process_rows_along takes rows [B, m+1, V] and tokens [B, m] "
                            f"(arrays), got shapes {list(rs)} and {list(ts)}")
    if (sp is not None and sp.stateful and inputs in INPUTS and is_tensor(rows)
            and rows.is_floating_point() and rows.device.type == "cpu" and rows.dim() == 3
            and (is_tensor(tokens) or isinstance(tokens, np.ndarray)) and len(tokens.shape) == 2
            and tuple(tokens.shape) == (rows.shape[0], rows.shape[1] - 1) and rows.numel()
            and (_np(tokens).size == 0 or _np(tokens).dtype.kind in "iu")):
        try:
            return _rows_along(rows, _np(tokens).astype(np.int64), sp, inputs)
        except SpectheoryError:
            pass
    stack = torch.stack if is_tensor(rows) else np.stack
    out, reached = [], np.ones(rs[0], dtype=bool)
    for j in range(rs[1]):  # a history after a token the processed row gives probability 0
        row = process_rows(rows[:, j], sp, inputs, history=tokens[:, :j],  # is not reached:
                           _spare=None if reached.all() else ~reached)  # see _process_level
        out.append(row)
        if j + 1 < rs[1] and sp is not None and sp.stateful:
            try:
                picked = np.asarray(_np(row))[np.arange(rs[0]), np.asarray(_np(tokens))[:, j]]
                reached = reached & (picked > 0).astype(bool)
            except (IndexError, TypeError, ValueError):  # refused by the next row's history
                pass
    return stack(out, 1)


def _rows_along(rows, tokens: np.ndarray, sp: SamplingParams, inputs: str):
    """`process_rows_along` of float torch rows [B, P, V] on the CPU and int64 tokens
    [B, P - 1], stateful ``sp``: the steps of `process_rows` on the B * P rows at once."""
    from . import stateful

    Bn, P, V = rows.shape
    stateful.check_vocabulary(sp, V)
    if tokens.size and (tokens.min() < 0 or tokens.max() >= V):
        raise SamplingError("a token outside the vocabulary")  # refused position by position
    flat = _validate(rows.reshape(-1, V).to(torch.float64), inputs, False)  # row b P + j
    masks = [stateful.mask(sp, tokens[:, :j], V) for j in range(P)]
    allowed = None
    if any(m is not None for m in masks):
        allowed = np.stack([np.ones((Bn, V), dtype=bool) if m is None else m for m in masks],
                           axis=1).reshape(-1, V)
    c = None
    if stateful._penalised(sp):
        c = np.zeros((Bn, P, V), dtype=np.int64)
        if P > 1:
            seen = np.zeros((Bn, P - 1, V), dtype=np.int64)
            np.put_along_axis(seen, tokens[:, :, None], 1, axis=-1)
            c[:, 1:] = np.cumsum(seen, axis=1)
        c = c.reshape(-1, V)
    lg = flat if inputs == "logits" else stateful._kit_logits(flat)
    flat = stateful._after_history(lg, sp, allowed, c, None)
    sp = sp.stateless()
    if sp.identity:
        return _float_temperature(flat, 1.0, "logits").reshape(Bn, P, V)
    return _stateless_steps(flat, sp, "logits", False, None).reshape(Bn, P, V)


def _float_temperature(x, T: float, inputs: str):
    """Probabilities proportional to p^(1/T) (or softmax(logits / T)), in float64."""
    if B.is_torch(x):
        lg = x if inputs == "logits" else torch.log(x)
        top = lg.max(-1, keepdim=True).values
        w = torch.exp((lg - top) / T)
    else:
        with np.errstate(divide="ignore"):
            lg = x if inputs == "logits" else np.log(x)
        top = lg.max(axis=-1, keepdims=True)
        with np.errstate(over="ignore"):  # lg - top <= 0: an overflow is -inf, exp of it 0, the
            w = np.exp((lg - top) / T)    # exact value's float64 (huge user logits)
    return w / B.sum(w, axis=-1, keepdims=True)


def _history_array(history) -> np.ndarray:
    """A history given as a list (of lists) of token ids, as int64 numpy; one line for
    anything else (a string is not an id, and 1.5 must not be truncated to token 1)."""
    try:
        a = np.asarray(history)
    except (TypeError, ValueError):
        raise SamplingError(f"history must be an array [..., n] of token ids, not "
                            f"{_short(history)}") from None
    if a.size and a.dtype.kind not in "iu":
        raise SamplingError(f"history must hold token ids (integers), not "
                            f"{_short(history)}")
    return a.astype(np.int64)


def check_history(history, shape) -> None:
    """Refuse in one line ([`OptionError`][spectheory.runtime.errors.OptionError]: a
    [`SamplingError`][spectheory.inputs.processing.SamplingError] for its shape) a
    ``history [..., n]`` that is not one history of token ids in 0..V-1 for each row of rows of
    ``shape [..., V]``: what `process_rows` checks of a history it is handed, without the rows."""
    _row_histories(history, tuple(shape), ids=True)


def _row_histories(history, shape: tuple, ids: bool):
    """``history [..., n]`` as ``[N, n]`` for rows of ``shape [..., V]`` (N rows), its shape
    checked; with ``ids``, its token ids too (`spectheory.inputs.stateful._np_history`)."""
    if not (is_tensor(history) or isinstance(history, np.ndarray)):
        history = _history_array(history)
    if len(history.shape) == 0:
        raise SamplingError("history must be an array [..., n] of token ids")
    if tuple(history.shape[:-1]) != shape[:-1]:
        raise SamplingError(f"history of shape {list(history.shape)} does not match "
                            f"rows of shape {list(shape)} (it must be [..., n])")
    N = math.prod(shape[:-1])
    h = history.reshape(N, history.shape[-1])
    if ids:
        from .stateful import _np_history

        _np_history(h, N, shape[-1])
    return h


def process_rows(rows, params, inputs: str = "probs", history=None, *, _spare=None):
    """The processed distribution along the last axis of ``rows`` [..., V].

    Parameters
    ----------
    rows : array [..., V]
        Probabilities (non-negative, each row summing to 1 within `ROW_SUM_TOL`, then divided
        by its sum), as a numpy array or torch tensor of floats, or a
        numpy object array of `Fraction` (exact mode); with ``inputs="logits"``, float logits (-inf for a token of probability zero),
        turned into probabilities by a float64 softmax.
    params :
        Anything [`parse_sampling`][spectheory.inputs.processing.parse_sampling] accepts; None is no
        processing (rows are only normalised).
    inputs : {"probs", "logits"}
    history : int array [..., n], optional
        The tokens each row follows (emitted since the instance's root, drafts before its
        position included), for the stateful parameters (`spectheory.inputs.stateful`); None:
        the empty history. Checked whenever it is given (token ids in 0..V-1, one history per
        row), whether or not a parameter reads it. Probability rows are turned into the kit's logits
        (`spectheory.inputs.stateful.kit_logits`) when a penalty or an additive bias needs
        logits.

    Returns
    -------
    array [..., V]
        The processed probabilities (see the module docstring for the order of operations and
        the tie rules): float64 numpy or torch (on the input's device), or exact Fractions for
        exact rows. Greedy rows are exact 0/1 point masses.

    Raises `SamplingError` in one line for NaN, negative or all-zero rows, probability rows
    that do not sum to 1 (``process_rows(np.array([3., 1.]), "top_p=0.9")``), logits in exact
    mode, and a temperature whose power is not rational in exact mode.

    ```python
    import numpy as np
    from spectheory.inputs.processing import process_rows

    p = np.array([0.5, 0.25, 0.25, 0.0])
    process_rows(p, "top_k=1")        # [1, 0, 0, 0]
    process_rows(p, "top_k=2")        # [0.5, 0.25, 0.25, 0]: the tie at the 2nd value is kept
    process_rows(p, "top_p=0.6")      # [0.5, 0.25, 0.25, 0]: the tied tokens at the boundary
                                      # go together (vLLM keeps one of them, by sort order)
    process_rows(p, "top_p=0.5")      # [1, 0, 0, 0]: the first token's mass reaches 0.5
    process_rows(p, "temperature=0")  # [1, 0, 0, 0]
    ```
    """
    sp = parse_sampling(params)
    if inputs not in INPUTS:
        raise SamplingError(f"inputs = {inputs!r} is not one of {', '.join(INPUTS)}")
    x = _as_array(rows)
    exact = B.is_exact(x)
    if exact and inputs == "logits":
        raise SamplingError("logits are floats: exact rational mode takes probabilities "
                            "(inputs='probs')")
    if len(x.shape) == 0 or x.shape[-1] == 0:
        raise SamplingError(f"rows must have a last axis of V >= 1 tokens, not shape "
                            f"{list(x.shape)}")
    shape = tuple(x.shape)
    V = shape[-1]
    if sp is not None:
        from .stateful import check_vocabulary

        check_vocabulary(sp, V)
    if exact:
        flat = x.reshape(-1, V)
    elif B.is_torch(x):
        if x.device.type == "meta":
            raise SamplingError("rows on the meta device have a shape and no values; hand "
                                "rows on the CPU or a GPU")
        if x.is_complex() or x.dtype == torch.bool:  # as numpy's: .to() drops the imaginary
            raise SamplingError(f"rows must hold real numbers, not {x.dtype}")  # part silently
        if not (x.is_floating_point()):
            x = x.to(torch.float64)
        flat = x.reshape(-1, V).to(torch.float64)
    else:
        if x.dtype.kind not in "fiu":
            raise SamplingError(f"rows must hold numbers, not {x.dtype}")
        flat = np.asarray(x, dtype=np.float64).reshape(-1, V)
    power = None
    if flat.shape[0] and exact and sp is not None:
        power = sp.exact_power()  # refuses an irrational temperature before any work
    if flat.shape[0]:
        flat = _validate(flat, inputs, exact)
    # checked whether or not a parameter reads it: a history of strings or of tokens past V is
    # the caller's mistake either way (the stateful steps check its ids as they read it)
    h = None if history is None else _row_histories(history, shape,
                                                    ids=sp is None or not sp.stateful)
    if flat.shape[0] == 0:  # no rows (a history given with them was checked above)
        return flat.reshape(shape)
    if sp is not None and sp.stateful:
        from . import stateful

        if exact:  # rows and parameters checked above
            flat = stateful._apply_exact(flat, sp, h, _spare)
        else:
            lg = flat if inputs == "logits" else stateful._kit_logits(flat)  # checked above
            flat = stateful._apply_logits(lg, sp, h, _spare)
            inputs = "logits"
        sp = sp.stateless()
        if sp.identity and not exact:
            return _float_temperature(flat, 1.0, "logits").reshape(shape)
    return _stateless_steps(flat, sp, inputs, exact, power).reshape(shape)


def _stateless_steps(flat, sp, inputs: str, exact: bool, power):
    """The steps of `process_rows` after the stateful ones, on checked rows ``flat [N, V]``
    (normalised probabilities, or logits): greedy, temperature (``power``: its exact power in
    exact mode), then top-k, top-p and min-p. Each row is processed alone."""
    V = flat.shape[-1]
    if sp is not None and sp.greedy:
        first = B.argsort(flat, axis=-1, descending=True)[:, 0]  # lowest id among the maxima
        return B.one_hot(first, V, flat)
    if exact:
        probs = flat if power in (None, 1) else flat ** power
        probs = probs / B.sum(probs, axis=-1, keepdims=True)
    elif inputs == "logits" or (sp is not None and sp.temperature != 1):
        probs = _float_temperature(flat, 1.0 if sp is None else float(sp.temperature), inputs)
    else:
        probs = flat
    if sp is None or (sp.top_k is None and sp.top_p == 1 and sp.min_p == 0):
        return probs
    keep = _keep_mask(probs, sp)  # rows normalised just above
    kept = B.where(keep, probs, B.zeros_like(probs))
    return kept / B.sum(kept, axis=-1, keepdims=True)


# ----------------------------------------------------------------------------- instances


def _process_model(model, params, depth: int = 0):
    if params.stateful:
        return ProcessedModel.build(model, params, depth)
    return TableModel(model.vocab_size, tuple(np.ascontiguousarray(process_rows(t, params))
                                              for t in model.tables))


def _process_level(base, params, d: int, above=None):
    """Level d of ``base`` processed with its histories. ``above``: the processed level d - 1
    and which of its prefixes the processed model reaches (None at d = 0); a row whose masks
    leave no token at a history reached with probability zero (after a token of probability
    zero: no_repeat_ngram_size or min_tokens there) is kept as given, as a grammar leaves a
    rejected history unconstrained. Returns (rows, reached [V^d])."""
    V = base.vocab_size
    rows = np.ascontiguousarray(base.level(d))
    if above is None:
        reached = np.ones(1, dtype=bool)
    else:
        prev, prev_reached = above
        reached = (prev_reached[:, None] & (np.asarray(prev) > 0).astype(bool)).reshape(-1)
    out = process_rows(rows, params, history=all_prefixes(d, V), _spare=~reached)
    return np.ascontiguousarray(out), reached


@dataclass(frozen=True)
class ProcessedModel(TableModel):
    """A table model processed by stateful sampling parameters: the row after prefix s is the
    base model's row processed with history s (`spectheory.inputs.stateful`). Its tables are
    materialised to a depth; a deeper level is processed on first use with its own histories
    (never the order-D Markov extension of the processed tables, which would forget the
    history)."""

    base: Any = None
    params: Any = None
    deeper: Any = None  # {depth: processed level} beyond the tables, filled on first use
    reached: Any = None  # {depth: which prefixes the processed model reaches}

    @classmethod
    def build(cls, base, params, depth: int) -> "ProcessedModel":
        depth = max(int(depth), base.depth, 1)
        tables, reached, above = [], {}, None
        for d in range(depth + 1):
            rows, reached[d] = _process_level(base, params, d, above)
            tables.append(rows)
            above = (rows, reached[d])
        return cls(base.vocab_size, tuple(tables), base, params, {}, reached)

    @property
    def context_independent(self) -> bool:
        return False

    def level(self, d: int) -> np.ndarray:
        if d < len(self.tables):
            return self.tables[d]
        if d not in self.deeper:
            above = (self.level(d - 1), self.reached[d - 1])
            self.deeper[d], self.reached[d] = _process_level(self.base, self.params, d, above)
        return self.deeper[d]

    def conditional(self, prefix) -> np.ndarray:
        prefix = tuple(int(t) for t in prefix)
        return self.level(len(prefix))[prefix_index(prefix, self.vocab_size)]

    def to_float(self) -> "ProcessedModel":
        if not self.exact:
            return self
        return ProcessedModel.build(self.base.to_float(), self.params, self.depth)

    def to_exact(self) -> "ProcessedModel":
        if self.exact:
            return self
        self.params.exact_power()  # refuses what is not rational, in one line
        return ProcessedModel.build(self.base.to_exact(), self.params, self.depth)


def process_instance(instance, sampling=None, draft_sampling=None, exact: bool | None = None):
    """The instance with target rows processed by ``sampling`` and draft rows by
    ``draft_sampling`` (each anything [`parse_sampling`][spectheory.inputs.processing.parse_sampling]
    accepts; None: rows as given), in exact rationals when ``exact`` (default: as the instance)
    and float64 otherwise.

    Every table row is processed (also the deeper levels a multi-iteration analysis reads, and
    the order-D Markov extension is that of the processed rows). The instance is returned
    unchanged when neither is given or both are the identity. Drafts are then sampled from the
    processed draft rows and the verifier is handed those rows (the q it drafted from), and the
    law is compared with the processed target's: the setting of an engine that verifies a
    request with these parameters.
    """
    from .instances import Instance
    from .stateful import check_vocabulary

    sp, dp = parse_sampling(sampling), parse_sampling(draft_sampling)
    for p, where in ((sp, ""), (dp, "draft sampling")):  # stop tokens with no min_tokens are
        if p is not None and isinstance(instance, Instance):  # the identity, but checked
            check_vocabulary(p, instance.vocab_size, where)
    sp = None if sp is None or sp.identity else sp
    dp = None if dp is None or dp.identity else dp
    if sp is None and dp is None:
        return instance
    if not isinstance(instance, Instance):
        raise SpectheoryError(f"expected a spectheory Instance, got {type(instance).__name__}")
    exact = instance.exact if exact is None else bool(exact)
    for which, p in (("sampling", sp), ("draft sampling", dp)):
        if exact and p is not None:
            try:
                p.exact_power()
            except SamplingError as exc:
                raise SamplingError(f"{which}: {exc}") from None
    inst = instance.to_exact() if exact else instance.to_float()
    L = inst.block_length
    from .stateful import GrammarError

    try:
        target = inst.target if sp is None else _process_model(inst.target, sp, L)
    except GrammarError as exc:  # the line names the rows: the same mask may be on either side
        raise GrammarError(f"target rows (sampling): {exc}") from None
    try:
        draft = inst.draft if dp is None else _process_model(inst.draft, dp, max(L - 1, 0))
    except GrammarError as exc:
        raise GrammarError(f"draft rows (draft sampling): {exc}") from None
    return Instance(inst.vocab_size, inst.block_length, target, draft)


def rational(*params) -> bool:
    """True when every one of ``params`` (anything `parse_sampling` accepts) processes rows
    exactly in rationals (no temperature other than 0 or 1/n)."""
    for x in params:
        sp = parse_sampling(x)
        if sp is None:
            continue
        try:
            sp.exact_power()
        except SamplingError:
            return False
    return True


def describe(sampling=None, draft_sampling=None) -> dict:
    """The ``extra`` entries of an analysis under sampling parameters (empty when none)."""
    sp, dp = parse_sampling(sampling), parse_sampling(draft_sampling)
    out = {}
    if sp is not None and not sp.identity:
        out["sampling"] = str(sp)
    if dp is not None and not dp.identity:
        out["draft_sampling"] = str(dp)
    return out


# ----------------------------------------------------------------------------- sampler checks


def handed_rows(p, inputs: str = "probs"):
    """The target rows a sampler under test is handed: the raw probabilities (float64), or with
    ``inputs="logits"`` float32 logits log p (-inf for a zero), which the sampler turns into
    probabilities with the engine's float32 softmax."""
    if inputs not in INPUTS:
        raise SamplingError(f"inputs = {inputs!r} is not one of {', '.join(INPUTS)}")
    if inputs == "probs":
        return p
    if p.dim() >= 1 and p.shape[0] > 1 and p.stride(0) == 0:  # one row repeated (an expanded
        # view, as repeat-aware samplers are handed): converted once, handed as the same view
        return handed_rows(p[:1], inputs).expand(p.shape)
    return torch.log(p.to(torch.float64)).to(torch.float32)


def sampler_setup(sampler, instances, sampling=None, draft_sampling=None,
                  inputs: str = "probs"):
    """What `spectheory.testing.check_sampler` runs under sampling parameters.

    Returns ``(wrapped sampler, instances, proc)``:

    * the instances with their draft rows processed by ``draft_sampling`` (drafts are sampled
      from these rows and the sampler is handed them: the q it drafted from); for `DraftRows`
      the given q rows are processed;
    * a sampler that is handed the RAW target rows (`handed_rows`: probabilities, or float32
      logits), so that it applies the processing itself as the engine does;
    * ``proc(p, drafts)``: the rows the exact law is computed against, `process_rows` of
      exactly what the sampler was handed (row i of ``p [..., L+1, V]`` with the history
      ``drafts[..., :i]`` for stateful parameters; ``proc(level_rows, level=d)`` for the rows
      of a table level) (the float32 logits' float64 softmax with ``inputs="logits"``), so
      the reference and the sampler see the same row, greedy ties included.
    """
    from .instances import Instance

    sp, dp = parse_sampling(sampling), parse_sampling(draft_sampling)
    handed_rows(torch.zeros(1, 1, dtype=torch.float64) + 1, inputs)  # checks ``inputs``
    out = []
    for inst in instances:
        if isinstance(inst, Instance):
            out.append(process_instance(inst, None, dp, exact=False))
        elif dp is not None and isinstance(inst, tuple) and len(inst) == 3:
            d, q, p = inst
            q = torch.as_tensor(q, dtype=torch.float64)
            if dp.stateful:
                d_ = torch.as_tensor(d)
                q = torch.stack([process_rows(q[..., i, :], dp, history=d_[..., :i])
                                 for i in range(q.shape[-2])], dim=-2)
            else:
                q = process_rows(q, dp)
            out.append(type(inst)(d, q, p) if hasattr(inst, "_fields") else (d, q, p))
        else:
            out.append(inst)

    def wrapped(drafts, q, p, extra=None):
        return sampler(drafts, q, handed_rows(p, inputs), extra)

    def proc(p, drafts=None, level=None):
        rows = handed_rows(p, inputs).to(torch.float64)
        if sp is None or not sp.stateful:
            return process_rows(rows, sp, inputs=inputs)
        if level is not None:  # a table level [V^level, V]: every history of that length
            return process_rows(rows, sp, inputs=inputs,
                                history=torch.as_tensor(all_prefixes(level, rows.shape[-1])))
        if drafts is None:
            raise SamplingError("stateful sampling parameters need the drafts each row follows")
        drafts = torch.as_tensor(drafts)
        if drafts.dim() >= 1 and drafts.shape[:-1] == rows.shape[:-2] \
                and drafts.shape[-1] == rows.shape[-2] - 1:
            # along the drafts, as the exact engine's tables: a row after a drafted token the
            # processed rows give probability 0 is never reached and is kept as given (refused
            # before, where exact and check computed the same law)
            flat = process_rows_along(rows.reshape(-1, *rows.shape[-2:]),
                                      drafts.reshape(-1, drafts.shape[-1]), sp, inputs=inputs)
            return flat.reshape(rows.shape)
        return torch.stack([process_rows(rows[..., i, :], sp, inputs=inputs,
                                         history=drafts[..., :i])
                            for i in range(rows.shape[-2])], dim=-2)

    try:  # the name and declared attributes (coin_convention, repeat_aware) carry over
        functools.update_wrapper(wrapped, sampler)
    except (AttributeError, TypeError):  # a callable object without the usual attributes
        wrapped.__name__ = getattr(sampler, "__name__", "sampler")
    return wrapped, out, proc


def note_sampling(report, sampling=None, draft_sampling=None, inputs: str = "probs"):
    """Add to a sampler report's notes what its rows were (processing and inputs)."""
    extra = describe(sampling, draft_sampling)
    if "sampling" in extra:
        report.notes.append(f"law against the target processed by {extra['sampling']}; the "
                            f"sampler was handed the raw target rows")
    if "draft_sampling" in extra:
        report.notes.append(f"drafts sampled from the draft rows processed by "
                            f"{extra['draft_sampling']} (handed to the sampler as q)")
    if inputs == "logits":
        report.notes.append("target rows handed as float32 logits")
    return report


# ----------------------------------------------------------------------------- command line


def sampling_type(text: str):
    """An argparse type for ``--sampling`` / ``--draft-sampling``: one line on a bad value. A
    blank value is refused (a shell variable that expanded to nothing would otherwise read as
    raw rows); ``none`` says no processing."""
    import argparse

    if isinstance(text, str) and not text.strip():
        raise argparse.ArgumentTypeError("an empty value; give key=value pairs such as "
                                          "temperature=0.7,top_k=20, or none for raw rows")
    try:
        return parse_sampling(text)
    except SpectheoryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


sampling_type.__name__ = "sampling parameters"


def add_sampling_options(p, draft: bool = True) -> None:
    """``--sampling`` and (with ``draft``) ``--draft-sampling`` on a command's parser."""
    p.add_argument("--sampling", type=sampling_type, default=None, metavar="PARAMS",
                   help="process the target rows as an engine does before verifying, e.g. "
                        "'temperature=0' (greedy) or 'temperature=0.7,top_k=20,top_p=0.9,"
                        "min_p=0.05' (order=vllm|transformers); with the history each row "
                        "follows: repetition_penalty, presence_penalty, frequency_penalty, "
                        "min_tokens + stop_token_ids (3;5), logit_bias (0:-inf;2:1.5;1:*1/2), "
                        "no_repeat_ngram_size, grammar=FILE.json (default: raw rows)")
    if draft:
        p.add_argument("--draft-sampling", type=sampling_type, default=None, metavar="PARAMS",
                       help="process the draft rows the same way: drafts are sampled from "
                            "them and the verifier is handed them (default: raw rows)")


__all__ = ["GREEDY_BELOW", "INPUTS", "KEYS", "MAX_EXACT_POWER", "ORDERS", "ROW_SUM_TOL",
           "STATEFUL_KEYS", "STATELESS_KEYS", "ProcessedModel", "SamplingError", "SamplingParams", "add_sampling_options", "check_history", "check_model_rows", "describe", "keep_mask",
           "parse_sampling", "handed_rows", "note_sampling", "process_instance", "process_rows",
           "process_rows_along",
           "rational", "sampler_setup", "sampling_type"]
