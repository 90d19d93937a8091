"""Instances (a draft model, a target model and a block length) and their JSON format.

JSON format:

```text
{"vocab_size": V, "block_length": L,
 "target": {"": [..V..], "0": [..V..], "0,2": [..V..], ...},
 "draft":  {"": [..V..], ...}}
```

Each model maps a prefix key (comma-joined token ids, "" for the empty prefix) to V probabilities.
The target needs every prefix of length <= L, the draft every prefix of length < L; complete deeper
levels are kept (they are used by the multi-iteration analysis). Context-independent models may
be given as a plain list: ``"target": [..V..]``. Probabilities are JSON numbers or strings holding
a fraction or decimal (``"1/3"``, ``"0.25"``). These four keys are the only ones: any other
top-level key (a misspelt ``"tagret"``) is refused, naming the nearest valid key.

Prefix keys must be canonical: ``""`` or token ids in decimal without leading zeros, joined by
single commas with no spaces (``"0,12"``; not ``"00"``, ``"0, 12"`` or ``"+1"``), so that every
prefix has exactly one spelling; a JSON object with the same key twice is refused. The target
needs every prefix of length <= L and the draft every prefix of length < L; a deeper level is
kept only when it is complete (a partial deeper level is an error naming its first given and
first missing prefix).

Float mode: rows must be non-negative, finite and sum to 1 within ``tol`` (a finite number in
[0, `MAX_TOL`]; so a row that is not a distribution, such as all zeros, is refused whatever
the tolerance); they are then divided by their sum. Exact mode: entries are read as exact
rationals (numbers through their decimal text) and rows must sum to exactly 1.

Every problem raises [`InstanceError`][spectheory.runtime.errors.InstanceError] (a ``ValueError``) with a
one-line message naming the place and the accepted range.
"""

from __future__ import annotations

import errno
import itertools
import json
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..runtime.backend import all_fractions, to_exact
from ..runtime.errors import InstanceError, SpectheoryError, check_keys, is_integer
from ..runtime.limits import check_real, human_count, shown
from .models import TableModel, prefix_from_index

MAX_VOCAB = 1_000_000
MAX_BLOCK = 64
#: Most prefixes a JSON model may list (a JSON table bigger than this is not a sensible input).
MAX_JSON_PREFIXES = 2_000_000
DEFAULT_TOL = 1e-9
#: Largest row-sum tolerance accepted in float mode.
MAX_TOL = 1e-3
#: Largest instance file read (bytes): a JSON table at `MAX_JSON_PREFIXES` is far smaller.
MAX_FILE_BYTES = 2 * 1024**3
#: Memory that parsing an instance file takes per byte of it (JSON numbers become Python objects).
PARSE_BYTES_PER_BYTE = 12

#: The keys of an instance JSON object, all required; any other key is refused (naming the
#: nearest of these), so that a misspelt key is never silently ignored.
INSTANCE_KEYS = ("vocab_size", "block_length", "target", "draft")

_KEY = re.compile(r"(0|[1-9][0-9]*)(,(0|[1-9][0-9]*))*")


def check_row_tolerance(tol, what: str = "tol") -> float:
    """A row-sum tolerance must be a finite number in [0, `MAX_TOL`]."""
    return check_real(tol, what, 0.0, MAX_TOL, InstanceError,
                      f"row sums are checked within a finite tolerance in [0, {MAX_TOL:g}]")


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
        return _derived(self, Instance(self.vocab_size, self.block_length,
                                       self.target.to_exact(), self.draft.to_exact()))

    def to_float(self) -> "Instance":
        return _derived(self, Instance(self.vocab_size, self.block_length,
                                       self.target.to_float(), self.draft.to_float()))


#: How far from 1 a float row of an instance built in Python may sum (`check_instance` then divides
#: it by its sum, as a file's rows, checked within ``tol``, are normalised when read): float64
#: rows made from float32 ones are off by up to about 1e-7.
PYTHON_ROW_TOL = 1e-6


def check_instance(instance, where: str = "instance") -> "Instance":
    """Refuse, in one line naming the model, the depth and the prefix, an `Instance` that is not
    one the engines can compute with, else return it: sizes (integers, V in 1..`MAX_VOCAB`, L in
    1..`MAX_BLOCK`), two `TableModel`s of V tokens whose tables are numpy arrays [V^d, V], all
    float or all exact (entries `Fraction` or int), and every row a distribution (finite,
    non-negative, summing to 1: within `PYTHON_ROW_TOL` in floats, exactly in rationals). Float
    rows accepted off 1 by more than rounding are divided by their sums (`_normalise_rows`: the
    model's tables replaced by normalised float64 copies).

    Instances read from files
    ([`instance_from_dict`][spectheory.inputs.instances.instance_from_dict]) and made by the
    package's generators are checked when made; an instance built in Python is
    checked here once (the result is remembered on the object: tables changed in place
    afterwards are the caller's business). The engines and the LPs call this at their entry."""
    if getattr(instance, "_checked", False):
        return instance
    if not isinstance(instance, Instance):
        raise InstanceError(f"expected a spectheory Instance (see load_instance / "
                            f"instance_from_dict), got {type(instance).__name__}")
    V, L = instance.vocab_size, instance.block_length
    for name, n, hi, lo in (("vocab_size", V, MAX_VOCAB, 1), ("block_length", L, MAX_BLOCK, 1)):
        if not is_integer(n):
            raise InstanceError(f"{where}: {name} = {_short(n)} is not an integer")
        if not lo <= n <= hi:
            raise InstanceError(f"{where}: {name} = {human_count(n)} is out of range ({lo}..{hi})")
    V = int(V)
    check_models(instance.target, V, instance.draft, V, where)
    object.__setattr__(instance, "_checked", True)
    return instance


def check_models(target, V_target: int, draft, V_draft: int, where: str,
                 size_of: str = "the instance") -> None:
    """The two models of an instance (`check_model` each, over ``V_target`` and ``V_draft``
    tokens), both float or both exact; float rows accepted off 1 by more than rounding are then
    divided by their sums (`_normalise_rows`). Shared by `check_instance` and the heterogeneous
    instances' check."""
    kinds = (check_model(target, V_target, "target", where, size_of)
             | check_model(draft, V_draft, "draft", where, size_of))
    if len(kinds) > 1:
        raise InstanceError(f"{where}: some tables hold floats and others exact Fractions; "
                            "make both models float (to_float) or exact (to_exact)")
    if kinds == {"f"}:
        _normalise_rows(target)
        _normalise_rows(draft)
    else:
        _fractions(target)
        _fractions(draft)


def _fractions(model: TableModel) -> None:
    """Replace ``model``'s exact tables that hold plain integers by copies of Fractions: the
    engines divide entries (p / q of two Python ints is a float), so an exact row (0, 1) of
    ints ended in a float node weight and a refusal blamed on the verifier. Tables of
    Fractions only are kept as they are."""
    tables = list(model.tables)
    changed = False
    for d, table in enumerate(tables):
        if not all_fractions(table.reshape(-1)):
            tables[d] = to_exact(table)
            changed = True
    if changed:
        object.__setattr__(model, "tables", tuple(tables))


def check_model(model, V: int, which: str, where: str, size_of: str = "the instance") -> set:
    """Refuse, in one line, a ``which`` model (``"target"``, ``"draft"``) of ``where`` that is not
    a `TableModel` of ``V`` tokens whose tables are numpy arrays [V^d, V] of floats or exact
    Fractions, every row a distribution (`check_instance`'s rule); else return the kinds of its
    tables (``{"f"}`` float, ``{"O"}`` exact, both when they mix). ``size_of`` says whose size V
    is in the message."""
    kinds = set()
    if not isinstance(model, TableModel):
        raise InstanceError(f"{where}: the {which} is a {type(model).__name__}, not a "
                            "TableModel (see spectheory.inputs.models)")
    if model.vocab_size != V:
        raise InstanceError(f"{where}: the {which} has vocab_size {_short(model.vocab_size)}"
                            f", {size_of} {V}")
    tables = model.tables
    if not isinstance(tables, (tuple, list)) or not tables:
        raise InstanceError(f"{where}: the {which}'s tables must be a non-empty tuple of "
                            "numpy arrays [V^d, V], one per depth d")
    for d, table in enumerate(tables):
        if not isinstance(table, np.ndarray):
            raise InstanceError(f"{where}: the {which}'s table at depth {d} is a "
                                f"{type(table).__name__}, not a numpy array")
        if isinstance(table, np.ma.MaskedArray):  # the engines read the masked entries too
            raise InstanceError(f"{where}: the {which}'s table at depth {d} is a masked array; "
                                "give a plain numpy array (np.ma.filled: the engines read every "
                                "entry, masked or not)")
        if table.dtype.kind == "f" and table.dtype.itemsize > 8:
            raise InstanceError(f"{where}: the {which}'s table at depth {d} holds "
                                f"{table.dtype}; give float64 (or exact Fractions): the torch "
                                "routes read at most float64")
        if table.shape != (V ** d, V):
            raise InstanceError(f"{where}: the {which}'s table at depth {d} has shape "
                                f"{list(table.shape)}, expected [V^{d}, V] = "
                                f"[{V ** d}, {V}]")
        if table.dtype.kind not in "fO":
            raise InstanceError(f"{where}: the {which}'s table at depth {d} holds "
                                f"{table.dtype}; entries are floats or exact Fractions")
        kinds.add(table.dtype.kind)
        bad = _bad_row(table)
        if bad is not None:
            row, why = bad
            prefix = prefix_from_index(row, d, V)
            raise InstanceError(f"{which}: the row after prefix {prefix} {why}")
    return kinds


#: A float row whose sum is off 1 by more than this (about ten thousand float64 roundings; rows
#: normalised in float64 are within a few) is divided by its sum in `check_instance`.
ROUNDED_ROW_TOL = 1e-12


def _normalise_rows(model: TableModel) -> None:
    """Divide by its sum, in float64, every row of ``model``'s float tables whose sum is off 1 by
    more than `ROUNDED_ROW_TOL` (accepted within `PYTHON_ROW_TOL`, e.g. float32 rows): the model
    then holds the distribution the row stands for, as a file's rows do once read. Without it
    a lossless rule's law would differ from the target's by the row's rounding (a LOSSY verdict
    of about 3e-8, or a correction row refused as no distribution). A table that needs it is
    replaced by a float64 copy (the caller's array is left as it was); the others are kept."""
    tables = list(model.tables)
    changed = False
    for d, table in enumerate(tables):
        off = np.abs(table.sum(axis=-1, dtype=np.float64) - 1) > ROUNDED_ROW_TOL
        if off.any():
            fixed = np.array(table, dtype=np.float64)
            fixed[off] /= fixed[off].sum(axis=-1, keepdims=True)
            tables[d] = fixed
            changed = True
    if changed:
        object.__setattr__(model, "tables", tuple(tables))


def bad_float_row(table, sums: bool = True):
    """``(n, why)`` for the first row n of the float table [N, V] with a non-finite or negative
    entry or (``sums``) a sum off 1 by more than `PYTHON_ROW_TOL`, else None: three reads of the
    table (least, greatest, sum), no temporary of its size. The one test of float rows of an
    instance built in Python, shared by `check_instance` and the testing kit's checks (which
    also catch tables changed in place after that check)."""
    with np.errstate(all="ignore"):
        ok = (table.min(axis=-1) >= 0) & np.isfinite(table.max(axis=-1))  # NaN: min is NaN
        if sums:
            total = table.sum(axis=-1, dtype=np.float64)
            ok &= np.abs(total - 1) <= PYTHON_ROW_TOL
    if ok.all():
        return None
    n = int(np.flatnonzero(~ok)[0])
    row = table[n]
    if not np.isfinite(row).all():
        value = row[~np.isfinite(row)][0]
        return n, (f"has a non-finite entry ({value}); every probability must be finite")
    if (row < 0).any():
        return n, (f"has a negative entry ({row[row < 0][0]:.6g}); every row must be a "
                   "distribution")
    return n, (f"sums to {float(total[n]):.17g}, not 1 within {PYTHON_ROW_TOL:g}; every row "
               "must be a distribution")


def _bad_row(table):
    """(the first row of ``table`` [N, V] that is not a distribution, why) or None."""
    if table.dtype.kind == "f":
        return bad_float_row(table)
    for n in range(table.shape[0]):
        row = table[n]
        for v in row:
            if isinstance(v, bool) or not isinstance(v, (_FRACTION, int)):
                return n, (f"has the entry {_short(v)} ({type(v).__name__}): an exact table "
                           "holds Fractions (or integers)")
            if not 0 <= v <= 1:
                small = isinstance(v, _FRACTION) and max(
                    v.numerator.bit_length(), v.denominator.bit_length()) <= 128
                shown = str(v) if small else _short(v)
                return n, f"has the entry {shown}, not a probability"
        total = sum(row, Fraction(0))
        if total != 1:
            return n, (f"sums to {_shown_sum(total)}, not exactly 1; every row must be a "
                       "distribution")
    return None


def _trusted(instance: "Instance") -> "Instance":
    """Mark an instance the package made (and checked, or built valid) as checked."""
    object.__setattr__(instance, "_checked", True)
    return instance


def _derived(source: "Instance", made: "Instance") -> "Instance":
    """``made`` from a checked ``source`` by a conversion that keeps rows distributions."""
    if getattr(source, "_checked", False):
        _trusted(made)
    return made


# ----------------------------------------------------------------------------- parsing


#: Largest decimal exponent of an entry written as text ("1e-300"): beyond it the exact value
#: would take thousands of digits (and "1e-99999999" would not fit in memory).
MAX_EXPONENT = 1000
_EXPONENT = re.compile(r"[eE]\s*([+-]?[0-9]+)")


#: The rational type, for isinstance (the name ``Fraction`` is the constructor the parser calls).
_FRACTION = Fraction


class JsonNumber(float):
    """A JSON number with a fraction or exponent, as float64 with its text kept: exact mode
    reads the text (``0.10000000000000000001`` is not 1/10, ``1e-400`` is not 0), float mode
    the float json would give."""

    __slots__ = ("text",)


def _json_number(text: str) -> JsonNumber:
    number = JsonNumber(text)
    number.text = text
    return number


#: A number or fraction in ASCII digits: ``1/3``, ``0.25``, ``2.5e-3``, ``-0`` (Python's
#: ``Fraction`` would also take other scripts' digits and ``1_0``; an instance file does not).
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+/[0-9]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)"
                          r"(?:[eE][+-]?[0-9]+)?)")


def number_text(text: str, label: str) -> Fraction:
    """A number or fraction written as text (``1/3``, ``0.25``, ``2.5e-3``) as an exact
    Fraction, else an `InstanceError` in one line led by ``label``: ASCII digits only (Python's
    ``Fraction`` also reads other scripts' digits and ``1_0``), at most 200 characters, a decimal
    exponent within +-`MAX_EXPONENT` (``Fraction("1e999999999")`` would build a billion-digit
    integer), NaN and infinities named as not finite."""
    if len(text) > 200:
        raise InstanceError(f"{label} is longer than 200 characters")
    exponent = _EXPONENT.search(text)
    if exponent is not None and abs(int(exponent.group(1))) > MAX_EXPONENT:
        raise InstanceError(f"{label} has a decimal exponent beyond +-{MAX_EXPONENT} (not a "
                            "probability that can be computed with)")
    try:
        if not _NUMBER_TEXT.fullmatch(text.strip()):
            raise ValueError(text)
        return Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        if text.strip().lower() in ("nan", "inf", "-inf", "infinity", "-infinity", "+inf",
                                    "+infinity"):
            raise InstanceError(f"{label} is not finite") from None
        raise InstanceError(f"{label} is not a number or fraction in ASCII digits (e.g. 1/3, "
                            "0.25, 2.5e-3)") from None


def plain_fraction(text, digits: int = 400) -> Fraction:
    """An exact rational as spectheory writes one in its own files (test vectors, sweep caches):
    ``"13/9"``, ``"-1"``, ASCII digits, at most ``digits`` a side; else ValueError. Python's
    ``Fraction`` would also read ``"1e999999999"`` (a billion-digit integer, minutes), other
    scripts' digits, ``"1_0"`` and spaces."""
    if not isinstance(text, str) or not re.fullmatch(
            rf"-?[0-9]{{1,{digits}}}(?:/[0-9]{{1,{digits}}})?", text):
        raise ValueError(f"not a fraction: {str(text)[:40]!r}")
    return Fraction(text)


def _parse_number(value: Any, exact: bool, where: str):
    if isinstance(value, JsonNumber) and not math.isfinite(value):  # 1e400 in the file
        raise InstanceError(f"{where}: entry {_short(value.text)} overflows float64 (not a "
                            "probability)")
    if isinstance(value, JsonNumber):  # read from a file in exact mode: its text
        value = value.text if exact else float(value)
    if isinstance(value, _FRACTION):  # an exact entry built in Python
        if not 0 <= value <= 2:
            raise InstanceError(f"{where}: entry {_short(value)} is "
                                f"{'negative' if value < 0 else 'over 1'} (not a probability)")
        return value if exact else float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InstanceError(f"{where}: entry {_short(value)} is not a number or fraction string")
    if isinstance(value, str):
        frac = number_text(value, f"{where}: entry {_short(value)}")
        if not 0 <= frac <= 2:  # before float(): "1e999" would overflow
            raise InstanceError(f"{where}: entry {_short(value)} is "
                                f"{'negative' if frac < 0 else 'over 1'} (not a probability)")
        return frac if exact else float(frac)
    if isinstance(value, float) and not math.isfinite(value):
        raise InstanceError(f"{where}: entry {value!r} is not finite")
    if isinstance(value, int) and abs(value) > 1:  # also keeps huge integers out of float()
        raise InstanceError(f"{where}: entry {_short(value)} is "
                            f"{'negative' if value < 0 else 'over 1'} (not a probability)")
    if exact:
        return Fraction(value) if isinstance(value, int) else Fraction(repr(value))
    return float(value)


def _short(value) -> str:
    """``repr(value)`` cut at 40 characters; an integer or fraction too long to print (Python
    refuses int -> str past 4,300 digits) is named by its size
    (`spectheory.runtime.limits.shown`)."""
    return shown(value)


def _check_row(row, V: int, exact: bool, tol: float, where: str):
    if not isinstance(row, list):
        raise InstanceError(f"{where}: expected a list of {V} probabilities, got {type(row).__name__}")
    if len(row) != V:
        raise InstanceError(f"{where}: has {len(row)} entries, expected vocab_size = {V}")
    if not exact and all(type(v) is float for v in row) and all(map(math.isfinite, row)):
        vals = list(row)  # what _parse_number returns for finite floats, without a call each
    else:
        vals = [_parse_number(v, exact, where) for v in row]
    for a, v in enumerate(vals):
        if v < 0:
            raise InstanceError(f"{where}: entry for token {a} is negative ({_short(v)})")
    for a, v in enumerate(vals):
        if v > (1 if exact else 1 + tol):
            raise InstanceError(f"{where}: entry for token {a} is {_short(v)}, over 1 (not a "
                                "probability)")
    total = sum(vals, Fraction(0) if exact else 0.0)
    if exact:
        if total != 1:
            raise InstanceError(
                f"{where}: sums to {_shown_sum(total)}, off from 1 by {_sci(total - 1)}; exact "
                "mode needs rows that sum to exactly 1 (write fractions such as \"1/3\", or make "
                "the instance with --denominator)")
    elif abs(total - 1.0) > tol:
        raise InstanceError(f"{where}: sums to {total:.17g}, not 1 within tolerance {tol:g}")
    return vals


def _shown_sum(total: Fraction) -> str:
    """An exact row sum as text: the fraction itself when short, else ``1 +- 1.23e-400``."""
    small = max(total.numerator.bit_length(), total.denominator.bit_length()) <= 128
    return str(total) if small and len(str(total)) <= 40 else \
        f"1 {'+-'[total < 1]} {_sci(total - 1)}"


def _sci(x: Fraction) -> str:
    """``x`` in three significant digits, also where it is beyond float's range (an entry of
    ``"1e-400"`` leaves a row off from 1 by 1e-400, which float() would show as 0)."""
    from decimal import Decimal, localcontext

    if x == 0:
        return "0"
    with localcontext() as ctx:
        ctx.prec = 3
        return f"{Decimal(abs(x.numerator)) / Decimal(x.denominator):.3g}"


def _prefix_key(prefix: tuple) -> str:
    return ",".join(str(t) for t in prefix)


def parse_model(obj: Any, V: int, min_depth: int, name: str, exact: bool,
                tol: float = DEFAULT_TOL) -> TableModel:
    """Parse one model (dict of prefix rows, or a list for a context-independent model)."""
    tol = check_row_tolerance(tol)
    if isinstance(obj, list):
        row = _check_row(obj, V, exact, tol, f"{name}: context-independent row")
        return _finish_model([[row]], V, exact)
    if not isinstance(obj, dict):
        raise InstanceError(f"{name}: must be an object mapping prefixes to rows, or a list")
    keys = _complete_keys(obj, V, min_depth)
    if keys is not None:  # every prefix key canonical and every level complete
        return _finish_model([_check_level([obj[k] for k in level], level, V, exact, tol, name)
                              for level in keys], V, exact)
    levels: dict[int, dict[tuple, Any]] = {}
    for key, row in obj.items():
        prefix = parse_prefix_key(key, V, name)
        if len(prefix) > MAX_BLOCK + 1:
            raise InstanceError(f"{name}: prefix {_short(key)} has {len(prefix)} tokens, more "
                                f"than the deepest level used ({MAX_BLOCK + 1})")
        levels.setdefault(len(prefix), {})[prefix] = row
    tables = []
    d = 0
    while d in levels or d <= min_depth:
        expected = V**d
        have = levels.get(d, {})
        if len(have) != expected:
            if d > min_depth:  # an optional deeper level that is only partly given: the
                # first prefix given and the first missing (naming only a given one called
                # '0,0' extra where '2,2' alone was missing)
                missing = next(prefix_from_index(n, d, V) for n in range(expected)
                               if prefix_from_index(n, d, V) not in have)
                raise InstanceError(
                    f"{name}: depth {d} is partly given ({len(have)} of {expected} prefixes; "
                    f"first given {_prefix_key(min(have))!r}, first missing "
                    f"{_prefix_key(missing)!r}): levels deeper than {min_depth} are optional "
                    f"but must be complete; give every prefix of depth {d} or remove its rows")
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
        prefix = min(levels[extra[0]])
        raise InstanceError(
            f"{name}: extra prefix {_prefix_key(prefix)!r} of depth {extra[0]}: levels deeper "
            f"than {max(min_depth, 0)} are optional but must be complete, and depth {d} has "
            f"{len(levels.get(d, {}))} of {V**d} prefixes; remove the deeper rows or give "
            f"every prefix of depth {d}")
    return _finish_model(tables, V, exact)


def _complete_keys(obj: dict, V: int, min_depth: int):
    """The canonical keys of every level of ``obj``, a list per depth 0..D in prefix order
    (`prefix_from_index`), when ``obj``'s keys are exactly the canonical keys of all prefixes of
    length <= D for some D >= ``min_depth``; else None (`parse_model` then reads the keys one by
    one and names the first bad, missing or extra one). Sound: the keys of a dict are distinct,
    so when it has as many keys as the complete levels 0..D and holds each of their canonical
    keys, it holds no other key; every such key parses (`parse_prefix_key`) to its prefix."""
    n, total, D = len(obj), 1, 0
    while total < n:
        D += 1
        total += V**D
    if total != n or D < min_depth or D > MAX_BLOCK + 1:
        return None
    keys = []
    for level in _level_keys(V, D):
        if not all(map(obj.__contains__, level)):
            return None
        keys.append(level)
    return keys


def _level_keys(V: int, D: int):
    """The canonical keys (`_prefix_key`) of all prefixes of each length 0..D, one list per
    length in prefix order (`prefix_from_index`): a key of length d + 1 is one of length d
    followed by a token, the last token varying fastest."""
    level = [""]
    yield level
    tokens = [str(t) for t in range(V)]
    for d in range(1, D + 1):
        level = tokens if d == 1 else [f"{k},{t}" for k in level for t in tokens]
        yield level


#: How far a float row sum taken in numpy, adding the entries left to right, may be from the one
#: Python's ``sum`` gives (it compensates its rounding from Python 3.12 on), per entry of the row.
_SUM_SLACK = 4 * np.finfo(np.float64).eps


def _check_level(rows: list, keys: list, V: int, exact: bool, tol: float, name: str):
    """`_check_row` of every row of one level (``keys`` their prefix keys), as one float array
    [N, V] when the rows are lists of V Python floats, else a list of the checked rows.

    Exact rows of strings and ints are read through the values of their distinct entries
    (`_exact_values`); a row whose entries are all probabilities is accepted when their sum,
    in integer multiples of 1 / (the least common denominator of the level's values; their
    `Fraction` sum when that denominator passes 1024 bits), is 1.

    Float rows are checked at once with `_check_row`'s tests: finite, ``v >= 0``,
    ``v <= 1 + tol`` (the same float comparisons) and the sum off 1 by at most ``tol``, the sum
    taken left to right (Python's ``sum`` of floats, bit for bit before 3.12; rows whose sum is
    within `_SUM_SLACK` per entry of the bound are decided by `_check_row` itself). A row that
    fails, or is near the bound, is passed to `_check_row` in order, so that the first bad row
    raises the error it raises there; the array holds the entries as given, `_check_row`'s
    result for float rows."""
    label = f"{name}: row for prefix "
    if not exact and set(map(type, rows)) == {list} and set(map(len, rows)) == {V}:
        flat = list(itertools.chain.from_iterable(rows))
        if set(map(type, flat)) == {float}:
            arr = np.array(flat, dtype=np.float64).reshape(len(rows), V)
            with np.errstate(all="ignore"):
                total = arr[:, 0].copy()
                for a in range(1, V):
                    total += arr[:, a]
                off = np.abs(total - 1.0)
                ok = (np.isfinite(arr).all(axis=1) & (arr >= 0).all(axis=1)
                      & (arr <= 1 + tol).all(axis=1) & (off <= tol))
                ok &= ~(np.abs(off - tol) <= _SUM_SLACK * V)
            for n in np.flatnonzero(~ok).tolist():
                _check_row(rows[n], V, exact, tol, f"{label}{keys[n]!r}")
            return arr
    if exact and set(map(type, rows)) == {list} and set(map(len, rows)) == {V}:
        flat = list(itertools.chain.from_iterable(rows))
        if set(map(type, flat)) <= {str, int}:
            value = _exact_values(set(flat))
            good = {t: f for t, f in value.items() if f is not None}
            scale = 1
            for f in good.values():
                scale = math.lcm(scale, f.denominator)
                if scale.bit_length() > 1024:  # unrelated denominators: sum the Fractions
                    scale, units = 1, {t: f for t, f in good.items()}
                    break
            else:
                units = {t: f.numerator * (scale // f.denominator) for t, f in good.items()}
            out = []
            for row, key in zip(rows, keys):
                if all(map(good.__contains__, row)) and sum(map(units.__getitem__, row)) == scale:
                    out.append(list(map(good.__getitem__, row)))
                else:
                    out.append(_check_row(row, V, exact, tol, f"{label}{key!r}"))
            return out
    return [_check_row(row, V, exact, tol, f"{label}{key!r}") for row, key in zip(rows, keys)]


def _exact_values(entries: set) -> dict:
    """The exact value, a `Fraction` in [0, 1], of each distinct entry (a string or an int) of
    an exact-mode level, as `_parse_number` reads it; None for an entry it refuses or whose
    value is not a probability (its rows are then read by `_check_row`, which names the error).
    A level of N rows holds few distinct entries, so each is parsed once."""
    value = {}
    for t in entries:
        try:
            f = _parse_number(t, True, "entry")
        except InstanceError:
            f = None
        value[t] = f if f is not None and 0 <= f <= 1 else None
    return value


def parse_prefix_key(key: Any, V: int, name: str = "model") -> tuple:
    """The prefix of a canonical key: ``""`` or decimal token ids without leading zeros joined
    by single commas, no spaces; each id in 0..V-1."""
    if not isinstance(key, str):
        raise InstanceError(f"{name}: prefix key {key!r} is not a string")
    if key == "":
        return ()
    if len(key) > 20 * (MAX_BLOCK + 2) or not _KEY.fullmatch(key):
        raise InstanceError(
            f"{name}: prefix key {_short(key)} is not canonical: write token ids in decimal "
            f"without leading zeros, joined by single commas, no spaces (e.g. \"0,12\"; "
            f"\"\" for the empty prefix)")
    prefix = tuple(int(t) for t in key.split(","))
    for t in prefix:
        if t >= V:
            raise InstanceError(f"{name}: prefix {key!r} has token id {t} outside 0..{V - 1}")
    return prefix


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
    if not is_integer(V):  # numpy's integers too, as random_instance and Instance take them
        raise InstanceError(f"vocab_size must be an integer, got {shown(V)}")
    if not is_integer(L):
        raise InstanceError(f"block_length must be an integer, got {shown(L)}")
    V, L = int(V), int(L)
    if not 2 <= V <= MAX_VOCAB:
        raise InstanceError(f"vocab_size = {human_count(V)} is out of range "
                            f"(2..{MAX_VOCAB:,})")
    if not 1 <= L <= MAX_BLOCK:
        raise InstanceError(f"block_length = {human_count(L)} is out of range (1..{MAX_BLOCK})")
    return V, L


def _count_prefixes(obj: Any) -> int:
    return len(obj) if isinstance(obj, dict) else 1


def instance_from_dict(data: Any, exact: bool = False, tol: float = DEFAULT_TOL) -> Instance:
    """Validate and build an `Instance` from its JSON object (see the module docstring).

    Raises [`InstanceError`][spectheory.runtime.errors.InstanceError] (a ``ValueError``) with a one-line
    message naming the first problem: an unknown key (with the nearest valid one), a missing key,
    sizes out of range, a non-canonical, missing or extra prefix key, a row of the wrong length, an
    entry that is not a probability, a row sum off 1 (beyond ``tol`` in float mode, a finite number
    in [0, 1e-3]; at all in exact mode).
    """
    tol = check_row_tolerance(tol)
    if not isinstance(exact, bool):
        raise InstanceError(f"exact must be True or False, got {exact!r}")
    if not isinstance(data, dict):
        raise InstanceError("instance must be a JSON object with vocab_size, block_length, "
                            "target and draft")
    check_keys(data, INSTANCE_KEYS, "instance", InstanceError)  # "tagret": not ignored
    for key in INSTANCE_KEYS:
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
    return _trusted(Instance(V, L, target, draft))


def _no_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise InstanceError(f"the JSON object key {_short(key)} appears twice (a duplicate "
                                "key would silently replace the first value)")
        out[key] = value
    return out


def _constant(name: str):
    raise InstanceError(f"the JSON constant {name} is not finite (entries must be finite "
                        "numbers in [0, 1])")


def parse_json(text: str, where: str = "instance", exact_numbers: bool = False) -> Any:
    """Parse JSON text, refusing duplicate object keys and NaN/Infinity constants.
    ``exact_numbers``: numbers with a fraction or exponent keep their text (`JsonNumber`), for
    exact mode."""
    try:
        if exact_numbers:
            return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_constant,
                              parse_float=_json_number)
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        # json's own message may end in "at" already ("Unterminated string starting at")
        msg = exc.msg[:-3] if exc.msg.endswith(" at") else exc.msg
        raise InstanceError(f"{where}: unreadable JSON ({msg} at line {exc.lineno} "
                            f"column {exc.colno})") from None
    except InstanceError as exc:
        raise InstanceError(f"{where}: {exc}") from None
    except RecursionError:
        raise InstanceError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal over Python's digit limit
        raise InstanceError(f"{where}: unreadable JSON ({str(exc).splitlines()[0]})") from None


#: Bytes read at a time from an input file (`read_json_text`).
READ_CHUNK = 1 << 20


def _size_text(n: int) -> str:
    return f"{n // 1024**3} GiB" if n >= 1024**3 else f"{n // 1024**2} MiB"


def read_json_text(path, name: str, max_bytes: int, what: str = "instance") -> str:
    """The text of a JSON input file (``"-"``: standard input; ``what`` names its kind, as
    ``"instance"``), every failure one [`InstanceError`][spectheory.runtime.errors.InstanceError]
    line naming ``name``.

    The size is bounded before the memory is taken: a regular file over ``max_bytes``, or whose
    parsing would need more memory than the machine allows (`PARSE_BYTES_PER_BYTE` a byte,
    [`check_memory`][spectheory.runtime.limits.check_memory]), is refused before it is read; a
    stream (a pipe, a device) is read ``READ_CHUNK`` bytes at a time and refused at the chunk that
    passes either bound. Text that cannot be JSON is refused at its first chunk: bytes that are
    not UTF-8, or a first character other than ``{`` (every input read here is a JSON object),
    so that ``/dev/zero``, ``/dev/urandom`` or ``yes |`` end at once instead of after gigabytes.
    """
    import codecs
    import os
    import stat
    import sys

    from ..runtime.limits import check_memory

    a = "an" if what[:1] in "aeiou" else "a"

    def too_big(n: int, exact_size: bool):
        size = f"{n:,} bytes" if exact_size else f"over {_size_text(max_bytes)}"
        return InstanceError(f"{name}: {size}, too big for {a} {what} file (at most "
                             f"{_size_text(max_bytes)})")

    def memory(n: int):
        check_memory(PARSE_BYTES_PER_BYTE * n, f"reading the {what} {name} ({n:,} bytes)",
                     f"{a} {what} file this large cannot be parsed here")

    try:
        if path == "-":
            if sys.stdin is None:  # the command was started with standard input closed (<&-)
                raise OSError(errno.EBADF, "standard input is closed")
            fh, close = (sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin), False
        else:
            from ..runtime.files import open_input

            fh, close = open_input(path), True  # a FIFO with no writer: empty, not a hang
        try:
            try:
                st = os.fstat(fh.fileno())
            except (AttributeError, OSError, ValueError):  # a stream with no descriptor
                st = None
            if st is not None and stat.S_ISREG(st.st_mode):
                if st.st_size > max_bytes:
                    raise too_big(st.st_size, True)
                memory(st.st_size)
            decoder = codecs.getincrementaldecoder("utf-8-sig")()
            raw, texts, n, first = [], [], 0, None
            while True:
                chunk = fh.read(READ_CHUNK)
                if not chunk:
                    break
                n += len(chunk)
                if n > max_bytes:
                    raise too_big(n, False)
                memory(n)
                if isinstance(chunk, str):
                    piece = chunk
                else:
                    raw.append(chunk)
                    try:
                        piece = decoder.decode(chunk)
                    except UnicodeDecodeError:
                        whole = b"".join(raw)
                        try:  # the offset in the whole input, as a one-piece decode gives it
                            whole.decode("utf-8-sig")
                        except UnicodeDecodeError as exc:
                            raise InstanceError(
                                f"{name}: not UTF-8 text (byte 0x{whole[exc.start]:02x} at "
                                f"offset {exc.start}); save it as UTF-8 JSON") from None
                        raise
                texts.append(piece)
                if first is None and piece.strip():
                    first = piece.lstrip()[0]
                    if first != "{":
                        shown = repr(first) if first.isprintable() else f"U+{ord(first):04X}"
                        raise InstanceError(f"{name}: not a JSON object (it starts with {shown}); "
                                            f"{a} {what} file is a JSON object {{...}}")
            if raw:
                try:
                    texts.append(decoder.decode(b"", final=True))
                except UnicodeDecodeError:
                    raise InstanceError(f"{name}: not UTF-8 text (it ends inside a character); "
                                        "save it as UTF-8 JSON") from None
        finally:
            if close:
                fh.close()
    except OSError as exc:
        raise InstanceError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from None
    except (TypeError, ValueError) as exc:  # e.g. a NUL byte in the name
        if isinstance(exc, SpectheoryError):  # the refusals above, and check_memory's
            raise
        raise InstanceError(f"cannot read {what} {str(path)!r}: {exc}") from None
    return "".join(texts)


def load_instance(path: str, exact: bool = False, tol: float = DEFAULT_TOL) -> Instance:
    """Read and validate an instance file ("-" for standard input), UTF-8 JSON.

    Options are checked first, then the file: unreadable, over `MAX_FILE_BYTES`, not UTF-8, not
    JSON, duplicate keys, or an invalid instance
    ([`instance_from_dict`][spectheory.inputs.instances.instance_from_dict]) each raise
    [`InstanceError`][spectheory.runtime.errors.InstanceError] with a one-line message.
    """
    tol = check_row_tolerance(tol)
    return instance_from_text(*read_instance_text(path), exact=exact, tol=tol)


def read_instance_text(path: str) -> tuple[str, str]:
    """(name, text) of an instance file ("-" for standard input), read once: the command line
    parses the same text in float64 and, for its tie check, as written."""
    if not isinstance(path, (str, bytes)) and not hasattr(path, "__fspath__"):
        raise InstanceError(f"instance path {path!r} is not a file name")
    name = "standard input" if path == "-" else str(path)
    text = read_json_text(path, name, MAX_FILE_BYTES, "instance")
    if not text.strip():
        raise InstanceError(f"{name}: empty file, expected an instance JSON object")
    return name, text


def instance_from_text(name: str, text: str, exact: bool = False,
                       tol: float = DEFAULT_TOL) -> Instance:
    """The instance in the JSON ``text`` read from ``name`` (see `load_instance`)."""
    return instance_from_dict(parse_json(text, name, exact_numbers=bool(exact)), exact=exact,
                              tol=check_row_tolerance(tol))


# ----------------------------------------------------------------------------- writing


def _encode_value(v) -> Any:
    if isinstance(v, Fraction):
        return str(v)
    return float(v)


def model_to_json(model: TableModel, depth: int) -> Any:
    """The JSON form of ``model``: its row (context-independent), or a row for every prefix of
    length 0..``depth``; refused with `InstanceError` before any row is written when those
    prefixes are more than `MAX_JSON_PREFIXES` (a file no reader takes: a depth-1 chain listed
    to depth 20 over 2 tokens wrote 2 million rows for 21 s before its read-back refused it)."""
    V = model.vocab_size
    if model.context_independent:
        return [_encode_value(v) for v in model.tables[0][0]]
    rows_total = sum(V**d for d in range(min(depth, 64) + 1))
    if depth > 64 or rows_total > MAX_JSON_PREFIXES:
        raise InstanceError(f"a table model with V = {V} written to depth {depth} has "
                            f"{rows_total:,}{'+' if depth > 64 else ''} prefixes, over the "
                            f"limit of {MAX_JSON_PREFIXES:,} of an instance file; use smaller "
                            f"sizes (or a context-independent model)")
    out = {}
    for d, keys in enumerate(_level_keys(V, depth)):
        table = model.level(d)
        if isinstance(table, np.ndarray) and table.dtype == np.float64:
            rows = table.tolist()  # the Python floats _encode_value gives, a table at a time
        else:
            rows = [[_encode_value(v) for v in table[n]] for n in range(V**d)]
        out.update(zip(keys, rows))
    return out


def instance_to_dict(inst: Instance) -> dict:
    check_instance(inst)
    L = inst.block_length
    return {
        "vocab_size": inst.vocab_size,
        "block_length": L,
        "target": model_to_json(inst.target, max(L, inst.target.depth)),
        "draft": model_to_json(inst.draft, max(L - 1, inst.draft.depth)),
    }
