"""Adaptive draft length: the exact law of a single-path verifier when the draft stops early.

Engines stop drafting before the block length L when the draft looks unsure: llama.cpp's
``--spec-draft-p-min`` (``common/speculative.cpp``: stop once the draft's top probability
``cur_p->data[0].p`` falls below ``p_min``; its default and effect are discussed in llama.cpp
issue #25908), ExLlamaV3's dynamic draft length, confidence-scheduled verification (DSpark,
arXiv 2607.05147). The drafted block X^N then has a random length N in 0..L, and the verifier runs
on that block with block length N.

**Drafting policies as data.** A [`StoppingRule`][spectheory.engine.adaptive.StoppingRule] is
evaluated at every prefix s (|s| = d < L) the draft may reach, with the rows along it:
``q_rows`` [d+1, V] (row i = q(.|s^i); row d = q(.|s), the row the next token would be drafted
from) and ``p_rows`` [d+1, V] (the target's, passed only to a rule that declares
``reads_target``; ``None`` otherwise). Two kinds:

* ``"stop"``: ``rule(prefix, q_rows, p_rows)`` is h(s), the probability of stopping *before*
  drafting the next token (deterministic: 0 or 1; randomised: in between). The next kept token
  is then drawn from q(.|s) whatever was decided, so N is a (randomised) stopping time of the
  draft process;
* ``"drop"``: ``rule(prefix, q_rows, p_rows)`` is a vector d(s, .) [V]: the next token a is
  drafted from q(.|s), then dropped, and drafting stops, with probability d(s, a). The decision
  reads the token it drops, so N is *not* a stopping time of the kept tokens.

Both give a continuation kernel K(a|s) = P(the draft goes on past s with token a | it reached s):
K = (1 - h(s)) q(.|s) for a stop rule and K = q(.|s) (1 - d(s, .)) for a drop rule; K = 0 at
depth L (the maximum length). The drafted block is x^n with probability

    P(X^N = x^n) = prod_{i<n} K(x_{i+1} | x^i) * (1 - sum_a K(a | x^n))   (last factor 1 at n = L).

**The exact law.** For every n = 0..L and every draft x^n of positive probability the verifier's
law (P(tau = i | x^n), correction_i) is evaluated with block length n on the instance's own rows
(the verifier does not see the rule: ``aware=False``, what engines run); with no drafted token
(n = 0) there is nothing to verify and the output token is drawn from p(.|context). The emitted
blocks are summed into a [`BlockLaw`][spectheory.engine.perdraft.BlockLaw] over lengths 1..L+1
and completed by target sampling up to L+1 tokens exactly as for a fixed length
([`output_law`][spectheory.engine.output.output_law]); the total variation to p(y^{L+1}) is zero
iff the adaptive verifier is lossless (Sun et al., arXiv 2403.10444, section 2).

``aware=True`` runs the verifier against the stopped draft itself: on the vocabulary V+1 with a
stop token ⊥ (index V), draft rows q'(.|s) = (K(.|s), 1 - sum K(.|s)), target rows
p'(.|s) = (p(.|s), 0), and the draft x^n ⊥ (x^L at n = L): the verifier of a fixed block length
on that instance, so a lossless verifier stays lossless under every rule, and block
verification's value is the node-budget LP's optimum with the cap M(s) <= q_stop(s) (Thomas &
Pal, arXiv 2602.16961, Thm 3.3; `spectheory.lp.adaptive`).

**What is proved and checked (docs/adaptive-draft-length.md).** (i) A stop rule, whatever it
reads along the drafted prefix (draft rows, target rows, a coin), keeps token and block
verification lossless; (ii) a drop rule does not in general (draft-only ones included); (iii) for
a deterministic stop rule block verification on the drafted prefix equals its stop-aware form and
attains the LP optimum; for a randomised one it stays lossless but can fall below it.
"""

from __future__ import annotations

import collections.abc
import itertools
import math
import numbers
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from ..inputs.instances import Instance
from ..inputs.models import prefix_from_index
from ..law import validate_law
from ..registry import plan
from ..runtime._lazy import is_tensor
from ..runtime.errors import (InputError, MissingExtraError, SpectheoryError, TimeLimitError, UserCodeError,
                              call_user, check_flag)
from ..runtime.limits import about_digits
from ..runtime.sizes import check_size
from .lossless import lossless_report
from .output import output_law, target_law, total_variation
from .perdraft import BlockLaw
from .plan import _check_instance
from .seqtree import levels, sequence_tokens
from ..runtime.limits import shown as _repr_cut


@dataclass(frozen=True)
class StoppingRule:
    """A drafting policy: when the draft stops before the maximum block length L.

    ``function(prefix, q_rows, p_rows)``: ``prefix`` a tuple of token ids (length d < L),
    ``q_rows`` [d+1, V] the draft rows along it (row d = q(.|prefix)), ``p_rows`` [d+1, V] the
    target rows along it when ``reads_target``, else ``None``. ``kind="stop"``: it returns h, the
    probability of stopping before drafting the next token; ``kind="drop"``: a vector [V], the
    probability of dropping the next token a (drafted from q(.|prefix)) and stopping. In exact
    mode it returns Fractions or integers (numerator and denominator of at most
    `MAX_RULE_DIGITS` digits), in float mode real numbers, all in [0, 1].
    ``deterministic``: a stop rule whose values are always 0 or 1 (informational; the engine
    reads the values it gets).
    """

    name: str
    function: Callable
    kind: str = "stop"
    reads_target: bool = False
    formula: str = ""
    deterministic: bool | None = None

    def __post_init__(self):
        if self.kind not in ("stop", "drop"):
            raise InputError(f"stopping rule kind {self.kind!r}: choose stop or drop")
        from ..runtime.errors import check_flag

        # a string such as "no" was taken as true (the rule was handed the target rows)
        object.__setattr__(self, "reads_target",
                           check_flag(self.reads_target, f"stopping rule {self.name!r} "
                                                         "reads_target"))
        if self.deterministic is not None:
            object.__setattr__(self, "deterministic",
                               check_flag(self.deterministic, f"stopping rule {self.name!r} "
                                                              "deterministic"))
        if not callable(self.function):
            raise InputError(f"stopping rule {self.name!r}: function is not callable")

    @property
    def stopping_time(self) -> bool:
        """True for a stop rule: the drafted length is a (randomised) stopping time of the draft."""
        return self.kind == "stop"


def _last_ratio(prefix, q_rows, p_rows):
    """p(x_d | s^(d-1)) / q(x_d | s^(d-1)) of the last drafted token (inf where q = 0)."""
    x = prefix[-1]
    qx, px = q_rows[-2][x], p_rows[-2][x]
    return math.inf if qx == 0 else px / qx


def _at(c, rows):
    """The threshold c as the rows hold numbers: the Fraction itself against exact rows, its
    float64 rounding against float rows (a float row equal to the rounded threshold is a tie,
    as it is in rationals)."""
    return c if rows.dtype == object else float(c)


def _builtin(name: str, c):
    """The built-in rules (module docstring); ``c`` the parameter (a Fraction) or None."""
    one, zero = Fraction(1), Fraction(0)
    if name == "never":
        return StoppingRule("never", lambda s, q, p: zero, formula="h = 0 (always L tokens)",
                            deterministic=True)
    if name == "draft-confidence":
        return StoppingRule(f"draft-confidence({c})",
                            lambda s, q, p: one if max(q[-1]) < _at(c, q) else zero,
                            formula=f"h(s) = 1[max_a q(a|s) < {c}] (llama.cpp p_min)",
                            deterministic=True)
    if name == "draft-prob":
        return StoppingRule(f"draft-prob({c})",
                            lambda s, q, p: one if s and q[-2][s[-1]] < _at(c, q) else zero,
                            formula=f"h(s) = 1[q(x_d | s^(d-1)) < {c}] for the last drafted "
                                    "token (0 at the root)", deterministic=True)
    if name == "target-peek":
        return StoppingRule(f"target-peek({c})",
                            lambda s, q, p: one if s and _last_ratio(s, q, p) < _at(c, q) else zero,
                            reads_target=True,
                            formula=f"h(s) = 1[p(x_d)/q(x_d) < {c}] for the last drafted token "
                                    "(0 at the root)", deterministic=True)
    if name == "coin":
        return StoppingRule(f"coin({c})", lambda s, q, p: c,
                            formula=f"h(s) = {c} (randomised: geometric length)",
                            deterministic=c in (0, 1))
    if name == "draft-soft-confidence":
        return StoppingRule("draft-soft-confidence", lambda s, q, p: 1 - max(q[-1]),
                            formula="h(s) = 1 - max_a q(a|s) (randomised)", deterministic=False)
    if name == "draft-drop":
        return StoppingRule(f"draft-drop({c})",
                            lambda s, q, p: [one if v < _at(c, q) else zero for v in q[-1]],
                            kind="drop",
                            formula=f"drop the drafted token a and stop iff q(a|s) < {c}")
    if name == "target-drop":
        return StoppingRule(
            f"target-drop({c})",
            lambda s, q, p: [one if qa > 0 and pa / qa < _at(c, q) else zero
                             for qa, pa in zip(q[-1], p[-1])],
            kind="drop", reads_target=True,
            formula=f"drop the drafted token a and stop iff p(a|s)/q(a|s) < {c}")
    raise AssertionError(name)


#: name -> (takes a parameter, the parameter's largest value or None).
BUILTIN_RULES = {
    "never": (False, None), "draft-confidence": (True, 1), "draft-prob": (True, 1),
    "target-peek": (True, None), "coin": (True, 1), "draft-soft-confidence": (False, None),
    "draft-drop": (True, 1), "target-drop": (True, None),
}
_RULE = re.compile(r"\s*([a-z-]+)\s*(?:\(\s*([^()]*?)\s*\))?\s*")
#: Longest parameter text accepted ("1/2", "0.75", ...).
MAX_PARAMETER_CHARS = 40


def parse_rule(rule: Any) -> StoppingRule:
    """A [`StoppingRule`][spectheory.engine.adaptive.StoppingRule] from itself, a built-in name
    with its parameter (``"draft-confidence(1/2)"``, ``"draft-prob(0.3)"``, ``"target-peek(1)"``,
    ``"coin(1/4)"``, ``"draft-soft-confidence"``, ``"draft-drop(1/2)"``, ``"target-drop(1)"``,
    ``"never"``), or a function (a stop rule that reads the target: it gets all three rows).
    Parameters are exact rationals (a decimal, ``1e-3`` too, or a p/q string), in [0, 1] for
    thresholds on probabilities and >= 0 for ratio thresholds; anything else is refused in one
    line."""
    if isinstance(rule, StoppingRule):
        return rule
    if callable(rule):
        label = getattr(rule, "__name__", None) or repr(rule)
        return StoppingRule(label, rule, reads_target=True)
    if not isinstance(rule, str) or len(rule) > 200:
        raise InputError(f"stopping rule {_repr_cut(rule, 60)} is not a rule name (e.g. "
                         "'draft-confidence(1/2)') or a function")
    m = _RULE.fullmatch(rule)
    if m is None or m.group(1) not in BUILTIN_RULES:
        raise InputError(f"unknown stopping rule {rule!r}; choose from "
                         f"{', '.join(BUILTIN_RULES)} (e.g. 'draft-confidence(1/2)')")
    name, text = m.group(1), m.group(2)
    takes, top = BUILTIN_RULES[name]
    if not takes:
        if text not in (None, ""):
            raise InputError(f"stopping rule {name!r} takes no parameter (got {text!r})")
        return _builtin(name, None)
    if text is None or text == "":
        raise InputError(f"stopping rule {name!r} needs a parameter, e.g. '{name}(1/2)'")
    if len(text) > MAX_PARAMETER_CHARS:
        raise InputError(f"stopping rule {name!r}: parameter {text[:20]!r}... has {len(text):,} "
                         f"characters; at most {MAX_PARAMETER_CHARS}")
    # a fraction with blanks around its bar, as a verifier's parameter is read ('1 / 3')
    text = re.sub(r"^(-?[0-9]+)\s*/\s*([0-9]+)$", r"\1/\2", text)
    negative = text.startswith("-")  # -0, -0.0: zero, as additive(-0.0) reads it
    m = re.fullmatch(r"(?P<digits>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
                     r"(?:[eE](?P<exponent>[-+]?[0-9]+))?|[0-9]+/[0-9]+", text[negative:])
    if m is None:
        raise InputError(f"stopping rule {name!r}: parameter {text!r} is not a non-negative "
                         "decimal or fraction (e.g. 1/2, 0.75, 1e-3)")
    too_fine = (f"stopping rule {name!r}: parameter {text!r} is an exact value of more than "
                f"{MAX_RULE_DIGITS} digits; the rules take at most {MAX_RULE_DIGITS}")
    exponent = m.group("exponent")
    digits = m.group("digits")
    zero = digits is not None and not digits.strip("0.")
    # an exponent past the digits a parameter's text can bring back is over the bound whatever
    # the digits before it: refused before the number is built (1e-999999999: a billion
    # digits). Zero is zero whatever its exponent, and never built from it (0e-99999999)
    if not zero and exponent is not None and \
            abs(int(exponent)) > MAX_RULE_DIGITS + MAX_PARAMETER_CHARS:
        raise InputError(too_fine)
    try:
        c = Fraction(0) if zero else Fraction(text[negative:])
    except (ValueError, ZeroDivisionError):
        raise InputError(f"stopping rule {name!r}: parameter {text!r} is not a number") from None
    if negative and c != 0:
        raise InputError(f"stopping rule {name!r}: parameter {text!r} is negative; a "
                         f"non-negative decimal or fraction (e.g. 1/2, 0.75, 1e-3)")
    if max(c.numerator, c.denominator) >= _RULE_BOUND:  # the bound of a rule's values
        raise InputError(too_fine)
    if top is not None and c > top:
        raise InputError(f"stopping rule {name!r}: parameter {text} is above {top}")
    return _builtin(name, c)


# ----------------------------------------------------------------------------- the kernel


def _real_number(v) -> bool:
    """A real number: ``numbers.Real`` (int, float, Fraction, numpy scalars), or a numpy array
    or torch tensor of one real number. Text, bytes, ``Decimal`` and complex numbers are not."""
    if isinstance(v, numbers.Real):
        return True
    if isinstance(v, np.ndarray):
        return v.ndim == 0 and v.dtype.kind in "biuf"
    if is_tensor(v):  # a meta tensor has no value to read
        return v.numel() == 1 and not v.is_complex() and v.device.type != "meta"
    return False


#: The most digits a rule's exact value may have (numerator or denominator): a value of 5,000
#: digits made the report unprintable (Python's 4,300-digit limit on int -> str), one of two
#: million digits kept the analysis adding Fractions for minutes.
MAX_RULE_DIGITS = 100
_RULE_BOUND = 10**MAX_RULE_DIGITS  # the least integer of MAX_RULE_DIGITS + 1 digits


def _probability(v, exact: bool, where: str):
    """One value a rule returned, as a probability of the mode, or a one-line refusal. A bool
    is a deterministic decision: True is 1, False 0 (docs/adaptive-draft-length.md)."""
    if isinstance(v, (bool, np.bool_)):
        v = int(v)
    if exact:
        if isinstance(v, (int, np.integer)):
            v = Fraction(int(v))
        if not isinstance(v, Fraction):
            raise UserCodeError(f"{where} returned {_repr_cut(v, 60)} ({type(v).__name__}) in exact mode; "
                                "return a Fraction or an integer")
        big = max(abs(v.numerator), v.denominator)
        if big >= _RULE_BOUND:  # its products over the tree would not be printable
            raise UserCodeError(f"{where} returned a Fraction of about {about_digits(big):,} "
                                f"digits; the exact analysis takes rule values of at most "
                                f"{MAX_RULE_DIGITS} digits (round it, or use floats)")
    else:
        if not _real_number(v):  # float() would also read " 0.5 ", b"0.5" and Decimal("0.5")
            raise UserCodeError(f"{where} returned {_repr_cut(v, 60)} ({type(v).__name__}), not a "
                                "number; return a real number: a float, an int, a Fraction or a "
                                "numpy/torch number")
        try:
            v = float(v)
        except (TypeError, ValueError, OverflowError):
            raise UserCodeError(f"{where} returned {_repr_cut(v, 60)}, not a number") from None
        if not math.isfinite(v):
            raise UserCodeError(f"{where} returned {v!r}, not a finite number")
    if v < 0 or v > 1:
        raise UserCodeError(f"{where} returned {v}, not a probability in [0, 1]")
    return v


#: Float seconds of the adaptive analysis (2-core machine, `float_seconds`): a prefix's
#: stopping-rule call, each token of a prefix, each position of a leaf's rows.
FLOAT_SECONDS_PER = {"prefix": 15e-6, "prefix token": 2.5e-6, "leaf position": 0.1e-6}


def float_seconds(V: int, L: int) -> float:
    """The float analysis' time: the stopping rule is called in Python at each of the
    sum_{d<L} V^d prefixes (its cost growing with the prefix's length d), then the verifier's law
    reads rows of L + 1 positions for each of the V^(L+1) leaves. The per-leaf rate of the other
    routes (2e5 a second) put V = 2, L = 21 at 21 s where it ran past 55 s, with no note;
    measured: V = 2, L = 18 10.8 s (this gives 15 s), V = 4, L = 8 0.75 s (0.9 s), V = 3,
    L = 10 1.2 s (1.3 s)."""
    per = FLOAT_SECONDS_PER
    if (L + 1) * math.log10(V) > 300:  # past the float range (the size check refuses it)
        return math.inf
    prefixes = sum(V ** d for d in range(L))
    tokens = sum(V ** d * d for d in range(L))
    return (per["prefix"] * prefixes + per["prefix token"] * tokens
            + per["leaf position"] * V ** (L + 1) * (L + 1))


def continuation_levels(instance: Instance, rule, exact: bool | None = None):
    """The drafting policy by depth, (K, H): ``K[d]`` [V**d, V] for d = 0..L-1, row n = K(.|s)
    for the prefix s of index n (module docstring), and ``H[d]`` [V**d] the probability of
    stopping at s (h(s) for a stop rule, sum_a q(a|s) d(s, a) for a drop rule; computed from the
    rule, not as 1 - sum K, so that float rounding leaves no spurious stop mass). numpy arrays,
    Fractions in exact mode. Rows at prefixes the draft cannot reach are evaluated too."""
    rule = parse_rule(rule)
    _check_instance(instance)
    exact = instance.exact if exact is None else exact
    V, L = instance.vocab_size, instance.block_length
    check_size(V ** L, "adaptive draft: stopping-rule calls V^L", exact,
               formula=f"{V}^{L}")
    q_levels = levels(instance.draft, 0, L, exact, backend="numpy")
    p_levels = levels(instance.target, 0, L, exact, backend="numpy") if rule.reads_target \
        else None
    return _kernel(rule, q_levels, p_levels, V, L, exact)


def _kernel(rule: StoppingRule, q_levels, p_levels, V: int, L: int, exact: bool):
    dt = object if exact else np.float64
    Ks, Hs = [], []
    for d in range(L):
        K = np.empty((V**d, V), dtype=dt)
        H = np.empty(V**d, dtype=dt)
        for n in range(V**d):
            s = tuple(int(t) for t in prefix_from_index(n, d, V)) if d else ()
            q_rows = np.stack([q_levels[i][n // V ** (d - i)] for i in range(d + 1)])
            p_rows = None if p_levels is None else \
                np.stack([p_levels[i][n // V ** (d - i)] for i in range(d + 1)])
            where = f"stopping rule {rule.name!r} at prefix {s}"
            v = call_user(rule.function, s, q_rows, p_rows, what=f"stopping rule {rule.name!r}")
            qrow = q_levels[d][n]
            if rule.kind == "stop":
                h = _probability(v, exact, where)
                K[n] = [(1 - h) * x for x in qrow]
                H[n] = h
                continue
            try:
                # list("0.5") would be three "values", a mapping its keys, a set no order
                if isinstance(v, (str, bytes, bytearray, memoryview, set, frozenset,
                                  collections.abc.Mapping)):
                    raise TypeError
                vals = list(itertools.islice(iter(v), V + 1))  # an endless iterator: V + 1
            except TypeError:
                raise UserCodeError(f"{where} returned {_repr_cut(v, 60)}; a drop rule returns "
                                    f"{V} probabilities, one per token (a list or an array)"
                                    ) from None
            except (KeyboardInterrupt, TimeLimitError):
                raise
            except Exception as exc:  # the user's iterator raised
                raise UserCodeError(f"{where} returned values that raised when read: "
                                    f"{type(exc).__name__}: {exc}"[:300]) from None
            if len(vals) != V:
                raise UserCodeError(f"{where} returned "
                                    f"{f'more than {V}' if len(vals) > V else len(vals)} values; "
                                    f"a drop rule returns {V}, one per token")
            dv = [_probability(x, exact, where) for x in vals]
            K[n] = [(1 - a) * x for a, x in zip(dv, qrow)]
            H[n] = sum((a * x for a, x in zip(dv, qrow)), Fraction(0) if exact else 0.0)
        Ks.append(K)
        Hs.append(H)
    return Ks, Hs


def stop_masses(K: list, H: list, L: int, exact: bool):
    """(reach, stop): ``reach[d]`` [V**d] the probability that the draft covers the prefix
    (q_stop(s) = prod K along s), ``stop[d]`` [V**d] that the drafted block is exactly s
    (reach * H at depth d < L, reach at depth L)."""
    one = Fraction(1) if exact else 1.0
    reach = [np.array([one], dtype=object if exact else np.float64)]
    for d in range(L):
        reach.append((reach[d][:, None] * K[d]).reshape(-1))
    stop = [reach[d] * H[d] for d in range(L)] + [reach[L]]
    return reach, stop


# ----------------------------------------------------------------------------- the analysis


@dataclass
class AdaptiveAnalysis:
    """Exact analysis of one verifier under one stopping rule (floats, or Fractions exactly).

    ``tau_pmf`` [L+1] and ``length_pmf`` [L+1] (P(N = n), the drafted length);
    ``expected_drafted`` E[N]; ``block_efficiency`` E[tau+1] per verification;
    ``tokens_per_drafted`` E[tau+1] / E[N] and ``acceptance_rate`` E[tau] / E[N] (None when
    E[N] = 0); ``tv_to_target`` TV(output then target sampling, p(y^{L+1})); ``lossless`` the
    verdict (exactly TV = 0 in rationals, TV <= ``tol`` in float); ``offending`` the first
    offending output sequence with its output and target probabilities when lossy; the laws over
    V^(L+1) sequences as numpy arrays.
    """

    verifier: str
    rule: str
    vocab_size: int
    block_length: int
    exact: bool
    aware: bool
    stopping_time: bool
    reads_target: bool
    tau_pmf: list
    length_pmf: list
    expected_accepted: Any
    block_efficiency: Any
    expected_drafted: Any
    tokens_per_drafted: Any
    acceptance_rate: Any
    tv_to_target: Any
    lossless: bool
    offending: tuple | None = None
    output_probability: Any = None
    target_probability: Any = None
    output_law: Any = field(default=None, repr=False)
    target_law: Any = field(default=None, repr=False)
    tolerance: float = 0.0  # float mode: the largest TV called lossless

    def to_json(self) -> dict:
        enc = (lambda v: None if v is None else str(v)) if self.exact else \
            (lambda v: None if v is None else float(v))
        out = {"verifier": self.verifier, "stop": self.rule, "stop_aware": self.aware,
               "stopping_time": self.stopping_time, "reads_target": self.reads_target,
               "vocab_size": self.vocab_size, "block_length": self.block_length,
               "expected_accepted": enc(self.expected_accepted),
               "block_efficiency": enc(self.block_efficiency),
               "expected_drafted": enc(self.expected_drafted),
               "tokens_per_drafted": enc(self.tokens_per_drafted),
               "acceptance_rate": enc(self.acceptance_rate),
               "tau_pmf": [enc(v) for v in self.tau_pmf],
               "length_pmf": [enc(v) for v in self.length_pmf],
               "tv_to_target": enc(self.tv_to_target), "lossless": self.lossless}
        if self.offending is not None:
            out.update({"offending": list(self.offending),
                        "output_probability": enc(self.output_probability),
                        "target_probability": enc(self.target_probability)})
        return out

    def summary(self) -> str:
        fmt = (lambda v: f"{v} (= {float(v):.6f})") if self.exact else \
            (lambda v: f"{float(v):.6f}")
        per = "n/a (nothing drafted)" if self.tokens_per_drafted is None else \
            fmt(self.tokens_per_drafted)
        verdict = ("lossless" if self.exact else f"lossless within {self.tolerance:g}") \
            if self.lossless else (
            f"LOSSY: first offending sequence {self.offending}, output probability "
            f"{self.output_probability} vs target {self.target_probability}")
        tv = self.tv_to_target if self.exact else format(float(self.tv_to_target), ".3g")
        return (f"{self.verifier}{' (stop-aware)' if self.aware else ''} under {self.rule}: "
                f"E[tau+1] = {fmt(self.block_efficiency)}, E[N drafted] = "
                f"{fmt(self.expected_drafted)}, E[tau+1]/E[N] = {per}, TV to target = {tv}; "
                f"{verdict}")


def _verifier_law(spec, drafts, q, p, exact: bool, V: int):
    """(stop [B, n+1], correction [B, n+1, V']) of a single-path verifier as numpy arrays; float
    laws of verifiers without a numpy declaration are computed on torch float64."""
    B, n = drafts.shape
    if not exact and not spec.numpy_float:
        from ..runtime._lazy import torch

        law = spec.law(torch.as_tensor(drafts)[:, None], torch.as_tensor(q)[:, None],
                       torch.as_tensor(p)[:, None])
        law = validate_law(law, B, 1, n, V, exact, torch.as_tensor(drafts)[:, None],
                           name=spec.name)
        return law.stop[:, 0].detach().cpu().numpy(), law.correction[:, 0].detach().cpu().numpy()
    law = validate_law(spec.law(drafts[:, None], q[:, None], p[:, None]), B, 1, n, V, exact,
                       drafts[:, None], name=spec.name)
    return np.asarray(law.stop[:, 0]), np.asarray(law.correction[:, 0])


def _stopped_law(spec, drafts, q, p, exact: bool, V: int, rule, n: int, L: int):
    """`_verifier_law` on the drafts the rule stopped after ``n`` of the instance's ``L`` tokens;
    a verifier that refuses their length names it as its block length (spectr-gbv: "needs
    block length L >= 2 ... not L = 1"), so its refusal says where that length comes from."""
    try:
        return _verifier_law(spec, drafts, q, p, exact, V)
    except (TimeLimitError, MissingExtraError):
        raise
    except SpectheoryError as exc:
        if n == L:
            raise
        m = drafts.shape[1]  # the stop-aware draft ends in its stop token
        note = f" (with the stop token, {m})" if m != n else ""
        try:
            told = type(exc)(f"{exc}: the stopping rule {rule.name!r} ends drafts after {n} of "
                             f"the instance's L = {L} tokens{note}")
        except TypeError:  # an error class with its own arguments: as it was
            raise exc from None
        raise told from None


def _rows(levels_, idx, n: int, upto: int, V: int):
    """Rows [B, upto, V] along the drafts of length n with flat indices idx (row j after x^j)."""
    return np.stack([levels_[j][idx // V ** (n - j)] for j in range(upto)], axis=1)


def _aware_inputs(drafts, p, K, H, idx, n: int, L: int, V: int, exact: bool):
    """The draft x^n ⊥ on the vocabulary V+1 (module docstring): drafts [B, n'], q' [B, n', V+1],
    p' [B, n'+1, V+1] with n' = n+1 (n at n = L)."""
    B = len(idx)
    zero = Fraction(0) if exact else 0.0
    m = n if n == L else n + 1
    dt = object if exact else np.float64
    qa = np.full((B, m, V + 1), zero, dtype=dt)
    pa = np.full((B, m + 1, V + 1), zero, dtype=dt)
    for j in range(min(n + 1, m)):
        r = idx // V ** (n - j)
        qa[:, j, :V] = K[j][r]
        qa[:, j, V] = H[j][r]
    pa[:, :n + 1, :V] = p
    if m > n:  # after ⊥: any distribution without ⊥ (never used: ⊥ is never accepted)
        pa[:, n + 1, :V] = p[:, n]
    d = np.full((B, m), V, dtype=np.int64)
    d[:, :n] = drafts
    return d, qa, pa


#: Memory the adaptive analysis holds per leaf of the V^(L+1) tree (float64, exact), with a
#: margin: measured peaks of about 520 B (V = 4, L = 9 and 10) and 800 B (exact, V = 3, L = 9), the
#: rows of every stopping length gathered at once. The engine's `BYTES_PER_LEAF` (48 B) held for
#: it let V = 4, L = 12 (at the float limit) run out of memory after 6 minutes.
ADAPTIVE_BYTES_PER_LEAF = {False: 640, True: 1_200}


def analyze_adaptive(instance: Instance, verifier, rule, exact: bool | None = None,
                     aware: bool = False, max_sequences: int | None = None,
                     tol: float = 1e-12) -> AdaptiveAnalysis:
    """Exact law of a single-path verifier on the drafted prefix of random length under ``rule``
    (module docstring).

    Parameters
    ----------
    instance : Instance
        Draft q and target p tables; the block length L is the maximum drafted length.
    verifier : str, VerifierSpec or callable
        A single-path verifier (``"token"``, ``"block"``, ``module:function``, ...).
    rule : StoppingRule, str or callable
        The drafting policy ([`parse_rule`][spectheory.engine.adaptive.parse_rule]).
    exact : bool, optional
        Exact rationals (default: as the instance).
    aware : bool
        Run the verifier against the stopped draft (vocabulary V+1 with a stop token) instead of
        on the drafted prefix with the instance's rows.
    max_sequences : int, optional
        Size guard on V^(L+1) ([`check_size`][spectheory.runtime.sizes.check_size]).
    tol : float
        Float mode: largest TV still called lossless.
    """
    how = plan(verifier, 1)
    spec = how.spec
    aware = check_flag(aware, "aware")
    rule = parse_rule(rule)
    _check_instance(instance)
    exact = instance.exact if exact is None else exact
    V, L = instance.vocab_size, instance.block_length
    check_size(V ** (L + 1), "adaptive exact analysis", exact, max_sequences,
               f"V^(L+1) = {V}^{L + 1}", bytes_per_leaf=ADAPTIVE_BYTES_PER_LEAF[bool(exact)],
               seconds=None if exact else float_seconds(V, L))
    if exact and not spec.exact:  # as `analyze` refuses it (a TypeError from the rule before)
        raise SpectheoryError(f"verifier {spec.name!r} has a float law only (no exact "
                              f"rational mode); drop --exact / exact=True")
    q_levels = levels(instance.draft, 0, L, exact, backend="numpy")
    p_levels = levels(instance.target, 0, L + 1, exact, backend="numpy")
    K, H = _kernel(rule, q_levels, p_levels if rule.reads_target else None, V, L, exact)
    _, stop = stop_masses(K, H, L, exact)
    zero = Fraction(0) if exact else 0.0
    dt = object if exact else np.float64
    tau_pmf = np.full((1, L + 1), zero, dtype=dt)
    emitted = [None] + [np.full(V**j, zero, dtype=dt) for j in range(1, L + 2)]
    for n in range(L + 1):
        idx = np.flatnonzero(stop[n] != 0).astype(np.int64)
        if len(idx) == 0:
            continue
        weight = stop[n][idx]
        if n == 0 and not aware:  # nothing drafted: the token comes from the target
            tau_pmf[0, 0] += weight[0]
            emitted[1] += weight[0] * p_levels[0][0]
            continue
        drafts = sequence_tokens(idx, n, V) if n else np.zeros((len(idx), 0), dtype=np.int64)
        q = _rows(q_levels, idx, n, n, V) if n else np.zeros((len(idx), 0, V), dtype=dt)
        p = _rows(p_levels, idx, n, n + 1, V)
        if aware:
            d2, q2, p2 = _aware_inputs(drafts, p, K, H, idx, n, L, V, exact)
            st, corr = _stopped_law(spec, d2, q2, p2, exact, V + 1, rule, n, L)
            m = d2.shape[1]
            if m > n and any(v != 0 for v in st[:, n + 1]):
                raise SpectheoryError(f"verifier {spec.name!r} accepted the stop token of the "
                                      "stop-aware draft; it is not a valid verifier there")
            if ((st[:, :n + 1] != 0) & (corr[:, :n + 1, V] != 0)).any():
                raise SpectheoryError(f"verifier {spec.name!r} emitted the stop token")
            st, corr = st[:, :n + 1], corr[:, :n + 1, :V]
        else:
            st, corr = _stopped_law(spec, drafts, q, p, exact, V, rule, n, L)
        wst = weight[:, None] * st  # [B, n+1]
        tau_pmf[0, :n + 1] += wst.sum(axis=0)
        for i in range(n + 1):
            contrib = wst[:, i][:, None] * corr[:, i, :]  # [B, V]
            rows = idx // V ** (n - i)  # the accepted prefix x^i
            flat = (rows[:, None] * V + np.arange(V)[None, :]).reshape(-1)
            np.add.at(emitted[i + 1], flat, contrib.reshape(-1))
    block = BlockLaw(tau_pmf, emitted)
    out = output_law(block, p_levels, V, L)[0]
    tgt = target_law(p_levels, L + 1)[0]
    tv = total_variation(out, tgt)
    rep = lossless_report(out, tgt, tv, L + 1, V, exact, tol)
    pmf = [_scalar(v) for v in tau_pmf[0]]
    lengths = [_scalar(sum(s, zero)) for s in stop]
    e_tau = sum((i * v for i, v in enumerate(pmf)), zero)
    e_n = sum((n * v for n, v in enumerate(lengths)), zero)
    per = None if e_n == 0 else (e_tau + 1) / e_n
    rate = None if e_n == 0 else e_tau / e_n
    return AdaptiveAnalysis(
        verifier=spec.name, rule=rule.name, vocab_size=V, block_length=L, exact=exact,
        aware=aware, stopping_time=rule.stopping_time, reads_target=rule.reads_target,
        tau_pmf=pmf, length_pmf=lengths, expected_accepted=e_tau, block_efficiency=e_tau + 1,
        expected_drafted=e_n, tokens_per_drafted=per, acceptance_rate=rate,
        tv_to_target=_scalar(tv), lossless=rep.lossless, offending=rep.offending,
        output_probability=rep.output_probability, target_probability=rep.target_probability,
        output_law=out, target_law=tgt, tolerance=0.0 if exact else float(tol))


def _scalar(v):
    if isinstance(v, Fraction):
        return v
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    return v


__all__ = ["AdaptiveAnalysis", "BUILTIN_RULES", "StoppingRule", "analyze_adaptive",
           "continuation_levels", "parse_rule", "stop_masses"]
