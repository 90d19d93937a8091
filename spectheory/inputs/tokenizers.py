"""Two tokenizers over one string alphabet: the instance form for heterogeneous vocabularies.

A [`Tokenizer`][spectheory.inputs.tokenizers.Tokenizer] is a list of distinct non-empty strings
over an alphabet that holds every single character of the alphabet, so that every string has a
tokenization. Encoding is deterministic longest match, left to right (at each position the longest
vocabulary string that is a prefix of the rest); decoding concatenates.

A [`HeteroInstance`][spectheory.inputs.tokenizers.HeteroInstance] holds a target tokenizer and
model (conditional tables over target token ids, as in
[`TableModel`][spectheory.inputs.models.TableModel]: prefix-dependent rows up to the tables'
depth, read as a Markov chain of that order beyond) and a draft tokenizer and model over draft token
ids, the number of draft tokens per iteration (``draft_length``) and the number of target tokens
``n_tokens`` over which the exact law of the output is compared with the target's.

JSON format:

```text
{"alphabet": "ab",
 "target_vocab": ["a", "b", "ab"], "draft_vocab": ["a", "b", "ba"],
 "draft_length": 2, "n_tokens": 3,
 "target": {"": [..3..], "0": [..3..], ...},    # prefix keys over target ids
 "draft":  {"": [..3..], ...}}                   # prefix keys over draft ids
```

Models are read by [`parse_model`][spectheory.inputs.instances.parse_model] (complete levels,
canonical prefix keys, rows that sum to 1; a plain list is a context-independent row). Every
problem raises [`InstanceError`][spectheory.runtime.errors.InstanceError] with one line naming it;
sizes are checked before any table is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime.errors import InstanceError, check_keys, is_integer
from .instances import (DEFAULT_TOL, check_models, check_row_tolerance, model_to_json,
                        parse_json, parse_model, read_json_text)
from .models import TableModel
from ..runtime.limits import shown as _repr_cut

#: Largest alphabet, vocabulary, token length, draft length and output length accepted: the exact
#: laws enumerate draft paths (up to ``V_D ** draft_length``) and target sequences
#: (``V_T ** n_tokens``).
MAX_ALPHABET = 16
MAX_HETERO_VOCAB = 64
MAX_TOKEN_CHARS = 8
MAX_DRAFT_LENGTH = 6
#: Largest heterogeneous instance file read (bytes): its tables are bounded far below this.
MAX_FILE_BYTES = 64 * 1024**2
MAX_N_TOKENS = 8
#: Largest number of sequences one enumeration may visit (draft paths or target sequences).
MAX_ENUMERATION = 200_000
#: Largest product (target contexts the emitted law may reach, sum of V_T^n for n < n_tokens)
#: x (draft paths per context, V_D^draft_length): each context's block law enumerates every
#: draft path. Measured, one core: 349,525 (V_T, n_tokens, V_D, draft_length = 4, 5, 4, 5) took
#: 5.3 s (SLEM, float) and 25.8 s (SLEM, exact); 488,125 (5, 5, 5, 4) 61.8 s exact under load;
#: 1,769,145 (4, 6, 6, 4) 42.5 s in float, and 22,369,621 (4, 8, 8, 5), within both
#: enumeration limits, ran past three minutes.
MAX_WORK = 250_000

HETERO_KEYS = ("alphabet", "target_vocab", "draft_vocab", "draft_length", "n_tokens", "target",
               "draft")


@dataclass(frozen=True)
class Tokenizer:
    """Deterministic longest-match tokenizer over a vocabulary of strings (token id = index)."""

    vocab: tuple

    def __post_init__(self):
        if not isinstance(self.vocab, tuple) or not self.vocab or not all(
                isinstance(s, str) and s for s in self.vocab):
            raise InstanceError(f"Tokenizer: vocab = {_repr_cut(self.vocab, 40)} must be a non-empty "
                                "tuple of non-empty strings (make_tokenizer checks the rest)")
        index = {s: i for i, s in enumerate(self.vocab)}
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_longest", max(len(s) for s in self.vocab))

    @property
    def size(self) -> int:
        return len(self.vocab)

    def id_of(self, text: str) -> int | None:
        """The token id whose string is ``text``, or None."""
        return self._index.get(text)

    def encode(self, text: str) -> tuple:
        """Longest match, left to right: token ids of ``text``."""
        out, i, n = [], 0, len(text)
        while i < n:
            for k in range(min(self._longest, n - i), 0, -1):
                t = self._index.get(text[i:i + k])
                if t is not None:
                    out.append(t)
                    i += k
                    break
            else:
                raise InstanceError(f"character {text[i]!r} has no token (not in the alphabet)")
        return tuple(out)

    def decode(self, ids) -> str:
        """The text of token ids in 0..size-1 (a negative id read a string from the end)."""
        out = []
        for t in ids:
            if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)) \
                    or not 0 <= t < len(self.vocab):
                raise InstanceError(f"token id {_repr_cut(t, 40)} is not in 0..{len(self.vocab) - 1}")
            out.append(self.vocab[int(t)])
        return "".join(out)

    def first_token_settled(self, text: str) -> bool:
        """Whether the first token of ``encode(text + x)`` is the same for every continuation x:
        true iff no vocabulary string has ``text`` as a proper prefix (longest match can only
        reach past ``text`` through such a string)."""
        return bool(text) and not any(len(u) > len(text) and u.startswith(text)
                                      for u in self.vocab)


def make_tokenizer(vocab: Any, alphabet: str, name: str = "vocab") -> Tokenizer:
    """Validate a vocabulary (a list of distinct non-empty strings over ``alphabet`` holding every
    character of it, at most `MAX_HETERO_VOCAB` strings of at most `MAX_TOKEN_CHARS`)."""
    if not isinstance(vocab, (list, tuple)):
        raise InstanceError(f"{name}: expected a list of strings, got {type(vocab).__name__}")
    if not isinstance(alphabet, str) or not alphabet:
        raise InstanceError(f"{name}: the alphabet must be a non-empty string, not "
                            f"{_repr_cut(alphabet, 40)}")
    if not 1 <= len(vocab) <= MAX_HETERO_VOCAB:
        raise InstanceError(f"{name}: {len(vocab)} strings, out of range (1..{MAX_HETERO_VOCAB})")
    seen = set()
    for i, s in enumerate(vocab):
        if not isinstance(s, str) or not s:
            raise InstanceError(f"{name}: entry {i} ({s!r}) is not a non-empty string")
        if len(s) > MAX_TOKEN_CHARS:
            raise InstanceError(f"{name}: entry {i} has {len(s)} characters, over "
                                f"{MAX_TOKEN_CHARS}")
        bad = [c for c in s if c not in alphabet]
        if bad:
            raise InstanceError(f"{name}: entry {i} ({s!r}) has the character {bad[0]!r}, not in "
                                f"the alphabet {alphabet!r}")
        if s in seen:
            raise InstanceError(f"{name}: the string {s!r} appears twice")
        seen.add(s)
    missing = [c for c in alphabet if c not in seen]
    if missing:
        raise InstanceError(f"{name}: lacks the single character {missing[0]!r} (every character "
                            "of the alphabet must be a token, so that every string tokenizes)")
    return Tokenizer(tuple(vocab))


@dataclass(frozen=True)
class HeteroInstance:
    """A target and a draft over different tokenizers of one alphabet (see the module docstring).

    ``target`` is a [`TableModel`][spectheory.inputs.models.TableModel] over target token ids,
    ``draft`` one over draft token ids; ``draft_length`` draft tokens are proposed per target
    forward; laws are compared over ``n_tokens`` target tokens."""

    alphabet: str
    target_tokenizer: Tokenizer
    draft_tokenizer: Tokenizer
    target: TableModel
    draft: TableModel
    draft_length: int
    n_tokens: int

    @property
    def exact(self) -> bool:
        return self.target.exact

    def to_exact(self) -> "HeteroInstance":
        return HeteroInstance(self.alphabet, self.target_tokenizer, self.draft_tokenizer,
                              self.target.to_exact(), self.draft.to_exact(), self.draft_length,
                              self.n_tokens)

    def to_float(self) -> "HeteroInstance":
        return HeteroInstance(self.alphabet, self.target_tokenizer, self.draft_tokenizer,
                              self.target.to_float(), self.draft.to_float(), self.draft_length,
                              self.n_tokens)


def _int_in(value: Any, lo: int, hi: int, name: str) -> int:
    if not is_integer(value):  # Python's or numpy's integers, as the other counts take
        raise InstanceError(f"{name} must be an integer, got {_repr_cut(value, 40)}")
    if not lo <= value <= hi:
        raise InstanceError(f"{name} = {value} is out of range ({lo}..{hi})")
    return int(value)


def check_hetero_sizes(V_T: int, V_D: int, draft_length: int, n_tokens: int) -> None:
    """Refuse sizes whose enumerations exceed `MAX_ENUMERATION` (before anything is built)."""
    _int_in(draft_length, 1, MAX_DRAFT_LENGTH, "draft_length")
    _int_in(n_tokens, 1, MAX_N_TOKENS, "n_tokens")
    if V_D ** draft_length > MAX_ENUMERATION:
        raise InstanceError(f"{V_D} draft tokens over draft_length = {draft_length} give "
                            f"{V_D ** draft_length:,} draft paths, over the limit of "
                            f"{MAX_ENUMERATION:,}")
    if V_T ** n_tokens > MAX_ENUMERATION:
        raise InstanceError(f"{V_T} target tokens over n_tokens = {n_tokens} give "
                            f"{V_T ** n_tokens:,} target sequences, over the limit of "
                            f"{MAX_ENUMERATION:,}")
    contexts = sum(V_T ** n for n in range(n_tokens))
    work = contexts * V_D ** draft_length
    if work > MAX_WORK:
        raise InstanceError(f"up to {contexts:,} target contexts x {V_D ** draft_length:,} draft "
                            f"paths = {work:,} draft-path evaluations, over the limit of "
                            f"{MAX_WORK:,} (about a minute in exact arithmetic); lower "
                            f"n_tokens, draft_length or a vocabulary")


def check_hetero_instance(inst: Any, n_tokens: Any = None) -> "HeteroInstance":
    """Refuse, in one line ([`InstanceError`][spectheory.runtime.errors.InstanceError]), a
    [`HeteroInstance`][spectheory.inputs.tokenizers.HeteroInstance] built in Python that is not
    one the enumerations compute with: two `Tokenizer`s, each model a `TableModel` over its
    tokenizer's ids whose rows are distributions (`spectheory.inputs.instances.check_model`),
    both float or both exact, and sizes (``draft_length``, ``n_tokens`` or the given
    ``n_tokens``) within `check_hetero_sizes`. Float rows accepted off 1 by more than rounding
    are divided by their sums, as for an `Instance`. Returns ``inst``."""
    if not isinstance(inst, HeteroInstance):
        raise InstanceError(f"expected a HeteroInstance (see load_hetero / hetero_from_dict), got "
                            f"{type(inst).__name__}")
    where = "heterogeneous instance"
    for which in ("target_tokenizer", "draft_tokenizer"):
        if not isinstance(getattr(inst, which), Tokenizer):
            raise InstanceError(f"{where}: the {which} is a {type(getattr(inst, which)).__name__}"
                                f", not a Tokenizer (see make_tokenizer)")
        # the alphabet and the tokenizer agree (make_tokenizer's rule): every string over the
        # alphabet, every character of it a token; another alphabet made another instance
        make_tokenizer(list(getattr(inst, which).vocab), inst.alphabet, which)
    check_models(inst.target, inst.target_tokenizer.size, inst.draft, inst.draft_tokenizer.size,
                 where, "its tokenizer has")
    N = inst.n_tokens if n_tokens is None else n_tokens
    check_hetero_sizes(inst.target_tokenizer.size, inst.draft_tokenizer.size, inst.draft_length,
                       N)
    return inst


def hetero_from_dict(data: Any, exact: bool = False, tol: float = DEFAULT_TOL) -> HeteroInstance:
    """Validate and build a [`HeteroInstance`][spectheory.inputs.tokenizers.HeteroInstance] from
    its JSON object (module docstring); one-line
    [`InstanceError`][spectheory.runtime.errors.InstanceError] on the first problem."""
    tol = check_row_tolerance(tol)
    if not isinstance(exact, bool):
        raise InstanceError(f"exact must be True or False, got {exact!r}")
    if not isinstance(data, dict):
        raise InstanceError("heterogeneous instance must be a JSON object with "
                            + ", ".join(HETERO_KEYS))
    check_keys(data, HETERO_KEYS, "heterogeneous instance", InstanceError)
    for key in HETERO_KEYS:
        if key not in data:
            raise InstanceError(f"heterogeneous instance is missing the key {key!r}")
    alphabet = data["alphabet"]
    if not isinstance(alphabet, str) or not 1 <= len(alphabet) <= MAX_ALPHABET \
            or len(set(alphabet)) != len(alphabet):
        raise InstanceError(f"alphabet must be a string of 1..{MAX_ALPHABET} distinct "
                            f"characters, got {str(alphabet)[:40]!r}")
    tt = make_tokenizer(data["target_vocab"], alphabet, "target_vocab")
    dt = make_tokenizer(data["draft_vocab"], alphabet, "draft_vocab")
    if tt.size < 2:
        raise InstanceError("target_vocab needs at least 2 strings")
    L = _int_in(data["draft_length"], 1, MAX_DRAFT_LENGTH, "draft_length")
    N = _int_in(data["n_tokens"], 1, MAX_N_TOKENS, "n_tokens")
    check_hetero_sizes(tt.size, dt.size, L, N)
    if dt.size < 2:
        raise InstanceError("draft_vocab needs at least 2 strings")
    for name in ("target", "draft"):
        obj = data[name]
        if isinstance(obj, dict) and len(obj) > MAX_ENUMERATION:
            raise InstanceError(f"{name}: {len(obj):,} prefixes, over the limit of "
                                f"{MAX_ENUMERATION:,}")
    target = parse_model(data["target"], tt.size, 0, "target", exact, tol)
    draft = parse_model(data["draft"], dt.size, 0, "draft", exact, tol)
    return HeteroInstance(alphabet, tt, dt, target, draft, L, N)


def hetero_to_dict(inst: HeteroInstance) -> dict:
    """The JSON object of an instance (exact entries as fraction strings)."""
    return {
        "alphabet": inst.alphabet,
        "target_vocab": list(inst.target_tokenizer.vocab),
        "draft_vocab": list(inst.draft_tokenizer.vocab),
        "draft_length": inst.draft_length,
        "n_tokens": inst.n_tokens,
        "target": model_to_json(inst.target, inst.target.depth),
        "draft": model_to_json(inst.draft, inst.draft.depth),
    }


def load_hetero(path: str, exact: bool = False, tol: float = DEFAULT_TOL) -> HeteroInstance:
    """Read a heterogeneous instance file (UTF-8 JSON; ``"-"`` for standard input); every failure
    is one [`InstanceError`][spectheory.runtime.errors.InstanceError] line."""
    if not isinstance(path, (str, bytes)) and not hasattr(path, "__fspath__"):
        raise InstanceError(f"instance path {path!r} is not a file name")
    name = "standard input" if path == "-" else str(path)
    text = read_json_text(path, name, MAX_FILE_BYTES, "heterogeneous instance")
    if not text.strip():
        raise InstanceError(f"{name}: empty file, expected a JSON object")
    return hetero_from_dict(parse_json(text, str(path), exact_numbers=bool(exact)), exact=exact,
                            tol=tol)


__all__ = ["HETERO_KEYS", "HeteroInstance", "MAX_ENUMERATION", "MAX_WORK", "Tokenizer",
           "check_hetero_sizes",
           "hetero_from_dict", "hetero_to_dict", "load_hetero", "make_tokenizer"]
