"""Instances (a draft model, a target model and a block length) and their JSON format.

JSON format::

    {"vocab_size": V, "block_length": L,
     "target": {"": [..V..], "0": [..V..], "0,2": [..V..], ...},
     "draft":  {"": [..V..], ...}}

Each model maps a prefix key (comma-joined token ids, "" for the empty prefix) to V probabilities.
The target needs every prefix of length <= L, the draft every prefix of length < L; complete deeper
levels are kept (they are used by the multi-iteration analysis). Context-independent models may
be given as a plain list: ``"target": [..V..]``. Probabilities are JSON numbers or strings holding
a fraction or decimal (``"1/3"``, ``"0.25"``).

Float mode: rows must be non-negative, finite and sum to 1 within ``tol``; they are then divided
by their sum. Exact mode: entries are read as exact rationals (numbers through their decimal
text) and rows must sum to exactly 1.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .backend import to_exact
from .errors import InstanceError
from .models import TableModel, prefix_from_index

MAX_VOCAB = 1_000_000
MAX_BLOCK = 64
#: Most prefixes a JSON model may list (a JSON table bigger than this is not a sensible input).
MAX_JSON_PREFIXES = 2_000_000
DEFAULT_TOL = 1e-9


@dataclass(frozen=True)
class Instance:
    vocab_size: int
    block_length: int
    target: TableModel
    draft: TableModel

    @property
    def exact(self) -> bool:
        return self.target.exact

    def to_exact(self) -> "Instance":
        return Instance(self.vocab_size, self.block_length, self.target.to_exact(),
                        self.draft.to_exact())

    def to_float(self) -> "Instance":
        return Instance(self.vocab_size, self.block_length, self.target.to_float(),
                        self.draft.to_float())


# ----------------------------------------------------------------------------- parsing


def _parse_number(value: Any, exact: bool, where: str):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InstanceError(f"{where}: entry {value!r} is not a number or fraction string")
    if isinstance(value, str):
        try:
            frac = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            if value.strip().lower() in ("nan", "inf", "-inf", "infinity", "-infinity"):
                raise InstanceError(f"{where}: entry {value!r} is not finite") from None
            raise InstanceError(f"{where}: entry {value!r} is not a number or fraction") from None
        return frac if exact else float(frac)
    if isinstance(value, float) and not math.isfinite(value):
        raise InstanceError(f"{where}: entry {value!r} is not finite")
    if exact:
        return Fraction(value) if isinstance(value, int) else Fraction(repr(value))
    return float(value)


def _check_row(row, V: int, exact: bool, tol: float, where: str):
    if not isinstance(row, list):
        raise InstanceError(f"{where}: expected a list of {V} probabilities, got {type(row).__name__}")
    if len(row) != V:
        raise InstanceError(f"{where}: has {len(row)} entries, expected vocab_size = {V}")
    vals = [_parse_number(v, exact, where) for v in row]
    for a, v in enumerate(vals):
        if v < 0:
            raise InstanceError(f"{where}: entry for token {a} is negative ({v})")
    total = sum(vals, Fraction(0) if exact else 0.0)
    if exact:
        if total != 1:
            raise InstanceError(
                f"{where}: sums to {total}, off from 1 by {float(total - 1):.3g}; exact mode "
                "needs rows that sum to exactly 1 (write fractions such as \"1/3\", or make the "
                "instance with --denominator)")
    elif abs(total - 1.0) > tol:
        raise InstanceError(f"{where}: sums to {total:.17g}, not 1 within tolerance {tol:g}")
    return vals


def _prefix_key(prefix: tuple) -> str:
    return ",".join(str(t) for t in prefix)


def parse_model(obj: Any, V: int, min_depth: int, name: str, exact: bool,
                tol: float = DEFAULT_TOL) -> TableModel:
    """Parse one model (dict of prefix rows, or a list for a context-independent model)."""
    if isinstance(obj, list):
        row = _check_row(obj, V, exact, tol, f"{name}: context-independent row")
        return _finish_model([[row]], V, exact)
    if not isinstance(obj, dict):
        raise InstanceError(f"{name}: must be an object mapping prefixes to rows, or a list")
    levels: dict[int, dict[tuple, Any]] = {}
    for key, row in obj.items():
        if not isinstance(key, str):
            raise InstanceError(f"{name}: prefix key {key!r} is not a string")
        try:
            prefix = tuple(int(t) for t in key.split(",")) if key.strip() else ()
        except ValueError:
            raise InstanceError(f"{name}: prefix key {key!r} is not comma-joined token ids") from None
        if any(t < 0 or t >= V for t in prefix):
            raise InstanceError(f"{name}: prefix {key!r} has a token id outside 0..{V - 1}")
        levels.setdefault(len(prefix), {})[prefix] = row
    tables = []
    d = 0
    while d in levels or d < min_depth:
        expected = V**d
        have = levels.get(d, {})
        if len(have) != expected:
            for n in range(expected):
                prefix = prefix_from_index(n, d, V)
                if prefix not in have:
                    raise InstanceError(
                        f"{name}: missing prefix {_prefix_key(prefix)!r} (depth {d}: "
                        f"{len(have)} of {expected} prefixes given)")
        rows = []
        for n in range(expected):
            prefix = prefix_from_index(n, d, V)
            rows.append(_check_row(have[prefix], V, exact, tol,
                                   f"{name}: row for prefix {_prefix_key(prefix)!r}"))
        tables.append(rows)
        d += 1
    extra = sorted(k for k in levels if k >= d)
    if extra:
        raise InstanceError(f"{name}: rows of depth {extra[0]} given but depth {d} is incomplete")
    return _finish_model(tables, V, exact)


def _finish_model(tables, V: int, exact: bool) -> TableModel:
    out = []
    for rows in tables:
        if exact:
            out.append(to_exact(rows).reshape(len(rows), V))
        else:
            arr = np.asarray(rows, dtype=np.float64)
            out.append(arr / arr.sum(axis=1, keepdims=True))
    return TableModel(V, tuple(out))


def _check_sizes(V: Any, L: Any) -> tuple[int, int]:
    if isinstance(V, bool) or not isinstance(V, int):
        raise InstanceError(f"vocab_size must be an integer, got {V!r}")
    if isinstance(L, bool) or not isinstance(L, int):
        raise InstanceError(f"block_length must be an integer, got {L!r}")
    if not 2 <= V <= MAX_VOCAB:
        raise InstanceError(f"vocab_size = {V} is out of range (2..{MAX_VOCAB})")
    if not 1 <= L <= MAX_BLOCK:
        raise InstanceError(f"block_length = {L} is out of range (1..{MAX_BLOCK})")
    return V, L


def _count_prefixes(obj: Any) -> int:
    return len(obj) if isinstance(obj, dict) else 1


def instance_from_dict(data: Any, exact: bool = False, tol: float = DEFAULT_TOL) -> Instance:
    if not isinstance(data, dict):
        raise InstanceError("instance must be a JSON object with vocab_size, block_length, "
                            "target and draft")
    for key in ("vocab_size", "block_length", "target", "draft"):
        if key not in data:
            raise InstanceError(f"instance is missing the key {key!r}")
    V, L = _check_sizes(data["vocab_size"], data["block_length"])
    for name in ("target", "draft"):
        n = _count_prefixes(data[name])
        if n > MAX_JSON_PREFIXES:
            raise InstanceError(f"{name}: {n} prefixes exceed the JSON limit of "
                                f"{MAX_JSON_PREFIXES} by {n - MAX_JSON_PREFIXES}")
    target = parse_model(data["target"], V, L, "target", exact, tol)
    draft = parse_model(data["draft"], V, L - 1, "draft", exact, tol)
    return Instance(V, L, target, draft)


def load_instance(path: str, exact: bool = False, tol: float = DEFAULT_TOL) -> Instance:
    """Read and validate an instance file ("-" for standard input)."""
    import sys

    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
    except OSError as exc:
        raise InstanceError(f"cannot read instance {path!r}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text, parse_constant=lambda c: float(c))
    except json.JSONDecodeError as exc:
        raise InstanceError(f"{path}: unreadable JSON ({exc.msg} at line {exc.lineno} "
                            f"column {exc.colno})") from None
    return instance_from_dict(data, exact=exact, tol=tol)


# ----------------------------------------------------------------------------- writing


def _encode_value(v) -> Any:
    if isinstance(v, Fraction):
        return str(v)
    return float(v)


def model_to_json(model: TableModel, depth: int) -> Any:
    V = model.vocab_size
    if model.context_independent:
        return [_encode_value(v) for v in model.tables[0][0]]
    out = {}
    for d in range(depth + 1):
        table = model.level(d)
        for n in range(V**d):
            out[_prefix_key(prefix_from_index(n, d, V))] = [_encode_value(v) for v in table[n]]
    return out


def instance_to_dict(inst: Instance) -> dict:
    L = inst.block_length
    return {
        "vocab_size": inst.vocab_size,
        "block_length": L,
        "target": model_to_json(inst.target, max(L, inst.target.depth)),
        "draft": model_to_json(inst.draft, max(L - 1, inst.draft.depth)),
    }
