"""Character n-gram (target, draft) pairs estimated from a real public-domain text.

Text: the preface and the entries A-C of Ambrose Bierce, *The Devil's Dictionary* (1911, public
domain), as shipped by Debian's ``dict-devil`` package (see ``toy_models/data/SOURCE.md``).

Tokens: the text is lower-cased, every run of whitespace becomes one space, and the ``V - 1``
most frequent characters become tokens 0..V-2 (by decreasing frequency, ties by character); all
other characters share the last token ("other").

An order-n model has conditionals for contexts of length d = 0..n-1, estimated with add-k smoothing:
p(a | s) = (count(s a) + k) / (count(s) + k V),  where count runs over all positions of the token
stream. It is stored as a depth-(n-1) [`TableModel`][spectheory.inputs.models.TableModel], i.e. read as an
order-(n-1) Markov chain beyond (contexts shorter than n-1 at the start of a block use the
lower-order estimate, as an n-gram model does at the start of a text).

Target: order ``order``, whole text. Draft: order ``draft_order`` <= ``order`` (the divergence
knob: smaller order = less context = further from the target), estimated on a contiguous slice of
a fraction ``draft_fraction`` of the token stream whose start is chosen by the seed (a second
knob: less data = noisier draft; with draft_fraction = 1 the seed plays no role).
"""

from __future__ import annotations

import io
import math
import os
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np

from spectheory.runtime.errors import InstanceError
from spectheory.runtime.files import open_input
from spectheory.inputs.instances import Instance
from spectheory.inputs.models import TableModel

from .checks import check_range, check_sizes, checked, text_knob
from spectheory.runtime.limits import shown as _repr_cut

DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_TEXT = DATA_DIR / "devils_dictionary_a_to_c.txt"
MAX_ORDER = 8
#: Longest text an n-gram model is counted from (characters).
MAX_TEXT_CHARS = 64 * 2**20


@lru_cache(maxsize=4)
def load_text(path: str | None = None) -> str:
    """The normalised text (lower case, single spaces) of ``path`` (default: the shipped text)."""
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise InstanceError(f"text_path = {_repr_cut(path, 40)} is not a file path")
    p = Path(path) if path else DEFAULT_TEXT
    try:  # a named pipe with no writer is refused after a second (open_input), not waited on
        with io.TextIOWrapper(open_input(p), encoding="utf-8") as fh:
            raw = fh.read(MAX_TEXT_CHARS + 1)  # bounded: a device such as /dev/zero ends
    except OSError as exc:
        raise InstanceError(f"cannot read text {str(p)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InstanceError(f"text {str(p)!r} is not UTF-8 ({exc.reason} at byte "
                            f"{exc.start})") from None
    if len(raw) > MAX_TEXT_CHARS:
        raise InstanceError(f"text {str(p)!r} holds more than {MAX_TEXT_CHARS // 2**20} Mi "
                            "characters; an n-gram model is counted from a shorter text")
    text = re.sub(r"\s+", " ", raw.lower()).strip()
    if len(text) < 100:
        raise InstanceError(f"text {str(p)!r} is too short ({len(text)} characters, need 100)")
    return text


def tokenize(text: str, vocab_size: int) -> tuple[np.ndarray, list[str]]:
    """Token ids of ``text`` and the symbol of each token (the last one is "other")."""
    counts = Counter(text)
    chars = sorted(counts, key=lambda c: (-counts[c], c))
    if vocab_size - 1 > len(chars):
        raise InstanceError(f"vocab_size = {vocab_size} is out of range for this text: it has "
                            f"{len(chars)} distinct characters (at most {len(chars) + 1})")
    keep = chars[: vocab_size - 1]
    lookup = {c: i for i, c in enumerate(keep)}
    other = vocab_size - 1
    ids = np.fromiter((lookup.get(c, other) for c in text), dtype=np.int64, count=len(text))
    return ids, keep + ["<other>"]


def ngram_tables(tokens: np.ndarray, vocab_size: int, order: int, smoothing: float) -> TableModel:
    """Add-k smoothed conditionals for contexts of length 0..order-1 (see module docstring)."""
    V = vocab_size
    tables = []
    for d in range(order):
        n = len(tokens) - d
        ctx = np.zeros(n, dtype=np.int64)
        for j in range(d):
            ctx = ctx * V + tokens[j: j + n]
        counts = np.zeros((V**d, V), dtype=np.float64)
        np.add.at(counts, (ctx, tokens[d: d + n]), 1.0)
        counts += smoothing
        with np.errstate(over="ignore", invalid="ignore"):  # a smoothing past float64: refused
            tables.append(counts / counts.sum(axis=1, keepdims=True))  # by ngram_instance
    return TableModel(V, tuple(tables))


def ngram_instance(vocab_size: int = 5, block_length: int = 4, seed: int = 0, order: int = 4,
                   draft_order: int = 2, draft_fraction: float = 1.0, smoothing: float = 0.5,
                   text_path: str | None = None) -> Instance:
    """Target: order-``order`` character model of the text; draft: order-``draft_order`` model on
    a seeded slice of ``draft_fraction`` of it (knob: draft_order). See the module docstring."""
    for name, v in (("vocab_size", vocab_size), ("block_length", block_length), ("order", order),
                    ("draft_order", draft_order), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise InstanceError(f"{name} must be an integer, got {v!r}")
    if not 1 <= order <= MAX_ORDER:
        raise InstanceError(f"order = {order} is out of range (1..{MAX_ORDER})")
    if not 1 <= draft_order <= order:
        raise InstanceError(f"draft_order = {draft_order} is out of range (1..order = {order})")
    if seed < 0:
        raise InstanceError(f"seed = {seed} must be non-negative")
    # read as the other families read their knobs: numbers of any kind, or text such as "1/2"
    draft_fraction = check_range("draft_fraction", text_knob("draft_fraction", draft_fraction),
                                 0, 1, lo_open=True)
    smoothing = check_range("smoothing", text_knob("smoothing", smoothing), 0, math.inf,
                            lo_open=True, hi_open=True)
    if text_path is not None and not isinstance(text_path, (str, os.PathLike)):
        raise InstanceError(f"text_path = {_repr_cut(text_path, 40)} is not a file path")
    if text_path is not None and not str(text_path).strip():
        raise InstanceError("text_path is empty: give a text file, or leave it out for the "
                            "shipped text")
    V, L = check_sizes(vocab_size, block_length, table_depth=order - 1)
    tokens, _ = tokenize(load_text(text_path), V)
    target = ngram_tables(tokens, V, order, smoothing)
    n = len(tokens)
    size = max(order + 1, int(round(draft_fraction * n)))
    if size >= n:
        part = tokens
    else:
        start = int(np.random.default_rng(seed).integers(0, n - size + 1))
        part = tokens[start: start + size]
    draft = ngram_tables(part, V, draft_order, smoothing)
    return checked(Instance(V, L, target, draft), f"ngram smoothing = {smoothing:g}")

