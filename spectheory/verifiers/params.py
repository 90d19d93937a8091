"""Parameters of the parametric rules: their accepted ranges, their checks, and the names that
carry them (``additive(1/4)``, ``trtllm-relaxed(2, 1/10)``).

Every parametric rule checks its parameters when it is built, in Python as on the command line
([`number`][spectheory.verifiers.params.number]): a parameter must be a real number (an int, a
`fractions.Fraction`, a float or a numpy real scalar; not a bool, not a string), finite, and in
the rule's range; integer parameters must be integers. A refusal is one
[`OptionError`][spectheory.runtime.errors.OptionError] line naming the rule, the parameter, the
value and the accepted range, e.g. ``trtllm-relaxed: delta nan must be in [0, 1]
(a finite number)``.

A name ``rule(a, b, ...)`` ([`parse_name`][spectheory.verifiers.params.parse_name]; the
registry's [`get_verifier`][spectheory.registry.get_verifier] reads it, so ``--verifier``,
``spectheory.analyze(inst, "additive(1/4)")`` and sweep files all take it) builds the rule with
the parameters as written: ``3`` an integer, ``1/4``, ``0.25`` and ``2.5e-1`` the exact rational
1/4 (decimals are read in base ten, not through a float), so a rule that is rational keeps them
exact in exact mode; float-only rules (entropy-threshold, cactus, typical, typical-medusa, entropy-verify) take
their float.
``nan``, ``inf``, text and a wrong number of parameters are refused in one line.

| rule | parameters (accepted range) |
|---|---|
| ``additive(eps)`` | eps in [0, 1] |
| ``multiplicative(lam)`` | lam in [0, 1] |
| ``top-m(m)`` | m an integer >= 1 |
| ``entropy-threshold(beta)`` | beta in [0, 1e6] |
| ``trtllm-relaxed(k, delta)`` | k an integer >= 1; delta in [0, 1] |
| ``sglang-threshold(ts, ta)`` | ts in [0, 1]; ta in (0, 1] |
| ``cactus(delta)`` | delta in [0, 1e6] |
| ``threshold(theta)`` | theta in [0, 1] |
| ``lenient(l)`` | l in (0, 1] |
| ``typical(epsilon, delta)`` | epsilon in [0, 1]; delta in [0, 1e6] |
| ``static-ensemble(w)``, ``static-ensemble-greedy(w)`` | w in [0, 1] |
| ``typical-medusa(epsilon, delta)``, ``typical-medusa-fast(epsilon, delta)`` | epsilon in [0, 1]; delta in [0, 1e6] |
| ``cascade-opt(alpha)``, ``cascade-token-v2(alpha)`` | alpha in [0, 1e6] |
| ``cascade-token-v1(alpha)``, ``cascade-token-v3(alpha)`` | alpha in [0, 1] |
| ``entropy-verify(tau, alpha)`` | tau in (0, 1]; alpha in [0, 1e6] |
| ``ears(t)`` | t in [0, 1] |

The upper bounds 1e6 of the unbounded float parameters are far past the point where the rule
stops changing (beta e^{-H} >= max p once beta >= V; Cactus's move saturates at h = 1).
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from fractions import Fraction

from ..runtime.errors import OptionError

#: Largest value of the unbounded float parameters (module doc).
FLOAT_CAP = 10**6
#: Largest integer parameter (top-m's m, TensorRT-LLM's k): a count of tokens.
INT_CAP = 2**31 - 1


@dataclass(frozen=True)
class Param:
    """One parameter: its name, range [lo, hi] (open ends where ``lo_open`` / ``hi_open``) and
    whether it must be an integer."""

    name: str
    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False

    def range_text(self) -> str:
        if self.integer:
            return f"an integer in [{self.lo}, {self.hi}]"
        lo, hi = _show(self.lo), _show(self.hi)
        return f"in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"


#: Most bits of an exact parameter's numerator or denominator (about 300 digits): the rule's
#: name prints it, and a longer one (past Python's 4,300-digit limit) could not be printed.
MAX_PARAM_BITS = 1000


def _show(x) -> str:
    """A bound or value as text: an integral float below 1e16 as an integer (``1`` for 1.0),
    others as Python writes them (``1e+308``, not 309 digits); long integers and fractions by
    their number of digits (`spectheory.bounds.shown`)."""
    from ..bounds import shown

    if isinstance(x, float) and math.isfinite(x) and x == int(x) and abs(x) < 1e16:
        return str(int(x))
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, (int, Fraction)) and not isinstance(x, bool):
        f = Fraction(x)
        if max(abs(f.numerator).bit_length(), f.denominator.bit_length()) <= 600:
            return str(x)  # 3/2, as the rule's name writes it
    return shown(x, 60)


def _refuse(rule: str, param: Param, value, why: str = "") -> OptionError:
    from ..bounds import shown

    numeric = isinstance(value, (int, Fraction, float)) and not isinstance(value, bool)
    text = _show(value) if numeric else shown(value, 60)
    return OptionError(f"{rule}: {param.name} {text} must be {param.range_text()}"
                       + (f" ({why})" if why else ""))


def number(value, rule: str, param: Param):
    """``value`` checked against ``param`` for ``rule``: an int for integer parameters, else a
    `Fraction` for exact input (int, Fraction, numpy integer) and a float for a float (numpy
    floats included). Raises [`OptionError`][spectheory.runtime.errors.OptionError] (module
    doc)."""
    if isinstance(value, bool) or isinstance(value, str) or not isinstance(value, numbers.Real):
        what = "text" if isinstance(value, str) else type(value).__name__
        raise _refuse(rule, param, value, f"a number, not {what}")
    if isinstance(value, numbers.Integral):
        v = int(value)
    elif isinstance(value, Fraction):
        v = value
    elif isinstance(value, numbers.Rational):
        v = Fraction(value.numerator, value.denominator)
    else:
        v = float(value)
        if not math.isfinite(v):
            raise _refuse(rule, param, v, "a finite number")
    if param.integer:
        if isinstance(v, float) or (isinstance(v, Fraction) and v.denominator != 1):
            raise _refuse(rule, param, v)
        v = int(v)
    below = v <= param.lo if param.lo_open else v < param.lo
    above = v >= param.hi if param.hi_open else v > param.hi
    if below or above:
        raise _refuse(rule, param, v)
    if isinstance(v, (int, Fraction)) and max(abs(Fraction(v).numerator).bit_length(),
                                              Fraction(v).denominator.bit_length()) \
            > MAX_PARAM_BITS:
        raise OptionError(f"{rule}: {param.name} {_show(v)} is longer than an exact parameter "
                          f"may be ({MAX_PARAM_BITS} bits, about 300 digits, in numerator and "
                          "denominator); give a shorter fraction or a float")
    if param.integer or isinstance(v, float):
        return v
    return Fraction(v)


def unit(name: str) -> Param:
    """A parameter in [0, 1]."""
    return Param(name, 0, 1)


def positive_unit(name: str) -> Param:
    """A parameter in (0, 1]."""
    return Param(name, 0, 1, lo_open=True)


def nonnegative(name: str) -> Param:
    """A float parameter in [0, `FLOAT_CAP`]."""
    return Param(name, 0, FLOAT_CAP)


def count(name: str) -> Param:
    """An integer parameter in [1, `INT_CAP`]."""
    return Param(name, 1, INT_CAP, integer=True)


# ----------------------------------------------------------------------------- names


#: rule name -> (factory, parameters), filled by `register_family` (the package
#: ``spectheory.verifiers`` registers the built-in rules on import).
_TABLE: dict = {}


def register_family(rule: str, factory, params: tuple) -> None:
    """Make ``rule(a, b, ...)`` names build ``factory(a, b, ...)``, the parameters checked
    against ``params`` (`Param`)."""
    _TABLE[rule] = (factory, tuple(params))


def _families() -> dict:
    """rule name -> (factory, parameters) of every parametric rule."""
    return _TABLE


#: The rules that take parameters, in listing order.
FAMILIES = ("additive", "multiplicative", "top-m", "entropy-threshold", "trtllm-relaxed",
            "sglang-threshold", "cactus", "threshold", "lenient", "typical", "static-ensemble",
            "static-ensemble-greedy", "typical-medusa", "typical-medusa-fast", "cascade-opt",
            "cascade-token-v1", "cascade-token-v2", "cascade-token-v3", "entropy-verify", "ears")

_NAME = re.compile(r"^\s*([A-Za-z][\w-]*)\s*\((.*)\)\s*$", re.S)
# ASCII digits only (re.ASCII): \d alone also matches other scripts' digits, which int() and
# Fraction() read ("multiplicative(\u0661)" was multiplicative(1))
_INT = re.compile(r"^[+-]?\d+$", re.ASCII)
_DECIMAL = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$", re.ASCII)
_RATIO = re.compile(r"^[+-]?\d+\s*/\s*[+-]?\d+$", re.ASCII)
#: Longest parameter text read (a guard before any arithmetic on it).
MAX_TEXT = 200


def is_parametric(text) -> bool:
    """Whether ``text`` has the form ``rule(...)`` of a parametric rule in `FAMILIES`."""
    if not isinstance(text, str):
        return False
    m = _NAME.match(text)
    return m is not None and m.group(1) in _TABLE


def _read(token: str, rule: str, param: Param):
    t = token.strip()
    if len(t) > MAX_TEXT:
        raise _refuse(rule, param, t[:20] + "...", "a number of at most "
                      f"{MAX_TEXT} characters")
    if _INT.match(t):
        return int(t)
    if _RATIO.match(t):
        num, den = (int(s) for s in t.split("/"))
        if den == 0:
            raise _refuse(rule, param, t, "a finite number, not a division by zero")
        return Fraction(num, den)
    if _DECIMAL.match(t):
        exponent = re.search(r"[eE]([+-]?\d+)$", t, re.ASCII)
        if exponent and abs(int(exponent.group(1))) > 400:
            raise _refuse(rule, param, t, "a number with an exponent within 400")
        return Fraction(t)
    if t.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        raise _refuse(rule, param, t, "a finite number")
    raise OptionError(f"verifier {rule}({', '.join(p.name for p in _families()[rule][1])}): "
                      f"the parameters must be numbers, e.g. {rule}(1/2); {param.name} is "
                      f"{t!r}")


def parse_name(text: str):
    """The [`VerifierSpec`][spectheory.registry.VerifierSpec] of a parametric rule's name
    ``rule(a, b, ...)`` (module doc), or None when ``text`` is not of that form. Refuses a
    wrong number of parameters, text, NaN, inf and values out of range in one
    [`OptionError`][spectheory.runtime.errors.OptionError] line."""
    if not is_parametric(text):
        return None
    m = _NAME.match(text)
    rule, body = m.group(1), m.group(2)
    factory, params = _families()[rule]
    tokens = [] if not body.strip() else body.split(",")
    signature = f"{rule}({', '.join(p.name for p in params)})"
    if len(tokens) != len(params):  # the name cut: 100,000 parameters made a 200 KB line
        from ..runtime.limits import shown

        raise OptionError(f"verifier {shown(text.strip(), 60)}: {signature} takes {len(params)} "
                          f"parameter{'s' if len(params) > 1 else ''}, got {len(tokens)}")
    values = [number(_read(t, rule, p), rule, p) for t, p in zip(tokens, params)]
    return factory(*values)


__all__ = ["FAMILIES", "FLOAT_CAP", "INT_CAP", "Param", "count", "is_parametric", "nonnegative",
           "number", "parse_name", "positive_unit", "register_family", "unit"]
