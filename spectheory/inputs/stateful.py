"""The state around the sampler: penalties, min_tokens, no-repeat n-grams, logit bias and grammar
masks, as functions of the history a row follows.

Serving engines process a row with more than its probabilities: the tokens generated so far
change it. The history of a row is the tuple of tokens emitted since the instance's root, the
drafted tokens before the row's position included (the row after prefix ``s`` has history ``s``).
This module holds the one implementation of that processing; `spectheory.inputs.processing`
runs it before the stateless steps (temperature, min-p, top-k, top-p), and the exact engine,
`check_step` and `check_sampler` all compute their laws through it.

**The kit's logits.** Penalties act on logits, and `repetition_penalty` depends on their sign,
so the logits must be stated: for a probability row p they are

    kit_logits(p) = log p - (max_x log p(x) + min_{x: p(x) > 0} log p(x)) / 2

(-inf where p = 0): log p shifted per row so that its largest and smallest finite entries are
symmetric about 0, so both signs occur whenever the row is not uniform on its support. A softmax
of them gives p back. A model callable handed to a step with ``inputs="logits"`` returns these
logits (float32), and the law is computed from the same logits.

**Order of operations** (vLLM V1's sampler, `vllm/v1/sample/sampler.py`: logits processors,
then penalties, then temperature and the argmax-invariant steps):

1. **masks**, which commute with each other: the `grammar`'s mask at the state its history
   reaches; transformers' `no_repeat_ngram_size` n (`NoRepeatNGramLogitsProcessor`: a token that
   would complete an n-gram already in the history is banned; n = 1 bans every token seen);
   `min_tokens` m (while fewer than m tokens are in the history, every token of
   `stop_token_ids` is banned: vLLM's `MinTokensLogitsProcessor`, transformers'
   `MinNewTokensLengthLogitsProcessor`); a `logit_bias` of -inf;
2. **logit bias**: logit(x) += b(x) (vLLM's `LogitBiasLogitsProcessor`), or, for an entry given
   as a factor ``*f``, p(x) *= f (logit += log f);
3. **penalties** (vLLM's `apply_penalties`, `vllm/model_executor/layers/utils.py`): for a token
   in the history, a positive logit is divided by `repetition_penalty` r and a non-positive one
   multiplied by it; then logit(x) -= `frequency_penalty` * count(x) + `presence_penalty` *
   [count(x) > 0], with count(x) the occurrences of x in the history. (vLLM counts the prompt
   in the repetition mask; here the history starts at the instance's root, which has no prompt.)

A mask that leaves no token of positive probability is refused in one line naming the history.
A history that the grammar rejects (reachable only through drafts the grammar forbids, so of
target probability zero) leaves the row unconstrained by the grammar.

**Exactness.** Masks, min_tokens, no-repeat n-grams and biases given as rational factors are
rational operations: exact rows stay exact. Repetition, frequency and presence penalties and
additive biases act on logits (exp of a penalised log p is irrational in general): float64 only,
refused in exact mode.
"""

from __future__ import annotations

import math
import re
import time
import warnings
from fractions import Fraction
from typing import Mapping, Sequence

import numpy as np

from ..runtime import backend as B
from ..runtime._lazy import is_tensor, torch
from ..runtime.errors import OptionError, is_integer
from ..runtime.limits import shown as _repr_cut

#: A transition that allows the token and ends the grammar (the stop token after a complete
#: match): the rows after it are unconstrained.
END = -2
#: Most automaton states a grammar may hold (table automata, and regex automata as they grow).
MAX_STATES = 100_000
#: Most pattern items a regex grammar unrolls when it is compiled: the package ``regex`` writes a
#: counted repeat out ``min`` times (nested repeats multiply), about 270 bytes an item, so that
#: ``a{1000000000}`` took 24 GB before anything was checked; 10^5 items are about 30 MB.
MAX_REGEX_ITEMS = 100_000
#: Longest one match of a regex grammar against a history's text may take, seconds (the `regex`
#: package's ``timeout=``). A history's text is a few tokens' strings: a match of the grammars
#: in the docs and tests takes microseconds, so 1 s is a million times that (room for a loaded
#: machine), while a regex that backtracks without end ("(a|a)*c" on 30 a's and a b: 2^30
#: steps, minutes) is stopped after 1 s instead of hanging the analysis.
REGEX_TIMEOUT_S = 1.0
#: Largest distance of a row's sum from 1 that `kit_logits` accepts: the processing's
#: `spectheory.inputs.processing.ROW_SUM_TOL` (a test holds them equal; the processing imports
#: this module, not the other way round).
ROW_SUM_TOL = 1e-5
#: Longest the matches of one row of a regex grammar (one per token of the vocabulary after a
#: history's text) may take in all, seconds. Each match stays under `REGEX_TIMEOUT_S`, but a row
#: makes V of them: "(a|a)*c" after 20 a's backtracks about 0.15 s a match, an hour for a row of
#: 25,000 tokens. From `REGEX_ROW_PROJECT_S` on, the row's pace projects its whole time, and a
#: row projected past this bound is refused in one line (a real tokenizer's row of 150,000
#: tokens at 10 us a match takes 1.5 s).
REGEX_ROW_S = 60.0
#: Seconds a row's matches run before their pace projects the row's time (`REGEX_ROW_S`).
REGEX_ROW_PROJECT_S = 2.0


class GrammarError(OptionError):
    """A grammar (token automaton) is malformed, or its mask leaves a row without probability."""


# ----------------------------------------------------------------------------- the kit's logits


def _np_of(t) -> np.ndarray:
    return t.detach().cpu().numpy()


def _refuse_not_probs(bad: np.ndarray, probs) -> None:
    """One line naming the first entry flagged in ``bad`` (same shape as ``probs``)."""
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise OptionError(f"kit_logits takes probabilities (finite, non-negative); entry "
                          f"{list(idx)} is {float(probs[idx])}")


def kit_logits(probs):
    """The kit's logits of probability rows ``probs [..., V]`` (float64 numpy or torch):
    log p shifted per row by the midpoint of its largest and smallest finite entries, -inf for
    a zero (see `spectheory.inputs.stateful`). ``softmax(kit_logits(p)) = p``. A NaN, negative
    or infinite entry is not a probability: refused in one line (`OptionError`), where log
    would give NaN."""
    if is_tensor(probs):
        if probs.dtype.is_complex or probs.dtype == torch.bool:
            raise OptionError(f"kit_logits takes probability rows [..., V] of real numbers, not "
                              f"{probs.dtype}")
        if probs.is_meta:
            raise OptionError("kit_logits: rows on the meta device have a shape and no values; "
                              "hand rows with values (CPU or an accelerator)")
        p64 = probs.to(torch.float64)
        _check_prob_shape(tuple(p64.shape))
        bad = torch.isnan(p64) | (p64 < 0) | torch.isinf(p64)
        if bool(bad.any()):
            _refuse_not_probs(_np_of(bad), _np_of(p64))
        _refuse_not_rows(_np_of(p64.sum(-1)))
        return _kit_logits(p64)
    a = np.asarray(probs)
    if a.dtype.kind not in "fiuO":  # text, bools, ...: not probabilities
        raise OptionError(f"kit_logits takes probability rows [..., V] of numbers, not {a.dtype}")
    try:
        p64 = a.astype(np.float64)
    except (TypeError, ValueError):
        raise OptionError("kit_logits takes probability rows [..., V] of numbers (an entry is "
                          "not one)") from None
    _check_prob_shape(p64.shape)
    _refuse_not_probs(np.isnan(p64) | (p64 < 0) | np.isinf(p64), p64)
    _refuse_not_rows(p64.sum(axis=-1))
    return _kit_logits(p64)


def _check_prob_shape(shape: tuple) -> None:
    if len(shape) == 0 or shape[-1] == 0:
        raise OptionError(f"kit_logits takes probability rows [..., V] with V >= 1, not shape "
                          f"{list(shape)}")


def _refuse_not_rows(sums: np.ndarray) -> None:
    """One line naming the first row that does not sum to 1 (within the rows' tolerance of
    `ROW_SUM_TOL`): softmax(kit_logits(p)) = p holds for
    distributions only (an all-zero row has no logits at all)."""
    off = np.abs(np.asarray(sums, dtype=np.float64) - 1) > ROW_SUM_TOL
    if off.any():
        idx = tuple(int(i) for i in np.argwhere(off)[0]) if off.ndim else ()
        which = f"row {list(idx)}" if idx else "the row"
        raise OptionError(f"kit_logits takes probability rows that sum to 1; {which} sums to "
                          f"{float(np.asarray(sums)[idx]):.6g}")


def _kit_logits(p64):
    """`kit_logits` of float64 rows ``p64 [..., V]`` (numpy or torch) already checked finite and
    non-negative (`spectheory.inputs.processing.process_rows` checks them first)."""
    if is_tensor(p64):
        lg = torch.log(p64)
        finite = torch.isfinite(lg)
        hi = torch.where(finite, lg, torch.full_like(lg, -math.inf)).amax(-1, keepdim=True)
        lo = torch.where(finite, lg, torch.full_like(lg, math.inf)).amin(-1, keepdim=True)
        shift = torch.where(torch.isfinite(hi) & torch.isfinite(lo), (hi + lo) / 2,
                            torch.zeros_like(hi))
        return lg - shift
    with np.errstate(divide="ignore"):
        lg = np.log(p64)
    finite = np.isfinite(lg)
    hi = np.where(finite, lg, -np.inf).max(axis=-1, keepdims=True)
    lo = np.where(finite, lg, np.inf).min(axis=-1, keepdims=True)
    ok = np.isfinite(hi) & np.isfinite(lo)
    shift = np.where(ok, (np.where(ok, hi, 0) + np.where(ok, lo, 0)) / 2, 0.0)
    return lg - shift


# ----------------------------------------------------------------------------- grammars


def _ids(values, what: str, ndim: int, name: str) -> np.ndarray:
    """``values`` as an int64 numpy array of ``ndim`` dimensions, or one line naming them
    (floats, booleans and strings are not ids: 0.5 would be truncated to token 0)."""
    try:
        a = values.detach().cpu().numpy() if is_tensor(values) else np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise GrammarError(f"{name}: {what} must be an array of integer ids ({exc})") from None
    if a.ndim != ndim:
        raise GrammarError(f"{name}: {what} must be a {ndim}-D array of integer ids, not of "
                           f"shape {list(a.shape)}")
    if a.size and a.dtype.kind not in "iu":
        raise GrammarError(f"{name}: {what} must hold integer ids, not {a.dtype}")
    return a.astype(np.int64, copy=False)


def _clip(text: str, n: int = 60) -> str:
    r = repr(text)
    return r if len(r) <= n else r[:n - 3] + "..."


def refuse_duplicate_tokens(tokens: Sequence[str], name: str = "grammar") -> None:
    """One line when two token ids spell the same string, wherever a grammar is built from
    token strings (`TokenAutomaton.from_regex`, `llguidance_grammar`).

    One rule for both: llguidance's tokenizer keeps one id per string (``["a", "a", "<e>"]``
    under ``a+``: it allows token 0 and masks token 1), while the kit's automaton matches each
    id's string and allows both; a law under the one mask would silently differ from the law
    under the other. Refusing the duplicate in both keeps them interchangeable (the eos token
    counts too: a token spelling the stop token's string is matched as text by one and as the
    stop token by the other)."""
    first: dict = {}
    for i, t in enumerate(tokens):
        if t in first:
            raise GrammarError(f"{name}: tokens {first[t]} and {i} both spell {_clip(t)}; "
                               f"each token id must spell a different string")
        first[t] = i


class _BoundedRegex:
    """A compiled regex whose ``fullmatch`` stops after `REGEX_TIMEOUT_S` seconds and refuses
    in one line naming the grammar, the regex, the text and the bound."""

    def __init__(self, compiled, name: str):
        self._compiled, self._name = compiled, name
        self.pattern = compiled.pattern

    def fullmatch(self, text: str, partial: bool = False):
        try:
            return self._compiled.fullmatch(text, partial=partial, timeout=REGEX_TIMEOUT_S)
        except TimeoutError:
            raise GrammarError(f"{self._name}: regex {_clip(self.pattern)} took over "
                               f"{REGEX_TIMEOUT_S:g} s (the bound on one match) on the text "
                               f"{_clip(text)}: it backtracks without end there (a nested "
                               f"repetition such as (a|a)* or (a+)+); rewrite the regex") \
                from None


def _check_eos(eos, V: int, name: str) -> int | None:
    """A grammar's stop token: None, or a token id in 0..V-1 (an int, never a bool)."""
    if eos is not None and (not is_integer(eos) or not 0 <= eos < V):
        raise GrammarError(f"{name}: eos = {_repr_cut(eos, 40)} is not a token id in 0..{V - 1}")
    return None if eos is None else int(eos)


def grammar_mask(grammar, history, n: int, states=None) -> np.ndarray:
    """``grammar.allowed(grammar.run(history))`` (or at the given ``states``) as a bool mask
    [n, V]. A grammar of the user's own class (a subclass of `TokenAutomaton` outside this
    package) is user code: what its ``run`` or ``allowed`` raises becomes one
    [`UserCodeError`][spectheory.runtime.errors.UserCodeError] line naming the grammar, and a
    mask of another shape or dtype (None, floats) one `GrammarError` line."""
    from ..runtime.errors import call_user, package_code

    own = package_code(type(grammar))
    what = f"grammar {_repr_cut(grammar.name, 60)}"

    def call(fn, *args):
        return fn(*args) if own else call_user(fn, *args, what=f"{fn.__name__}() of {what}")

    if states is None:
        states = call(grammar.run, history)
    m = call(grammar.allowed, states)
    V = grammar.vocab_size
    if not (isinstance(m, np.ndarray) and m.dtype == bool and m.shape == (n, V)):
        got = (f"{m.dtype} {list(m.shape)}" if isinstance(m, np.ndarray)
               else type(m).__name__)
        raise GrammarError(f"{what}: allowed() returned {got}; a mask is a bool array "
                           f"[{n}, {V}]")
    return m


def _parts(op, av) -> list | None:
    """The subpatterns of one item of a parsed pattern (``re``'s parser) as (copies, subpattern)
    pairs, copies the ``min`` of a counted repeat (an upper bound is a loop, not copies) and 1
    otherwise; None for an item with none (a literal, a class, an anchor)."""
    name = str(op)
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return [(max(int(av[0]), 1), av[2])]
    if name == "SUBPATTERN":
        return [(1, av[-1])]
    if name == "BRANCH":
        return [(1, b) for b in av[1]]
    if name in ("ASSERT", "ASSERT_NOT"):
        return [(1, av[1])]
    if name == "ATOMIC_GROUP":
        return [(1, av)]
    if name == "GROUPREF_EXISTS":
        return [(1, b) for b in av[1:] if b is not None]
    return None


def _regex_items(parsed) -> int:
    """Items a parsed pattern (``re``'s parser) unrolls to: counted repeats their ``min`` times,
    nested repeats multiplied (`_parts`)."""
    total = 0
    for op, av in parsed:
        parts = _parts(op, av)
        total += 1 if parts is None else sum(k * _regex_items(sub) for k, sub in parts)
        if total > MAX_REGEX_ITEMS:
            break
    return total


#: ``regex``'s own escapes that ``re``'s parser does not read (a Unicode property, a named
#: character or list, a grapheme), each one item; an escaped backslash is kept as it is.
_REGEX_ONLY_ESCAPE = re.compile(r"\\\\|\\[pPN]\{[^}]*\}|\\[pP][A-Za-z]|\\L<[^>]*>|\\X")

#: The constructs that partial matching cannot be trusted with: the `regex` package says that
#: a text can still be completed where it cannot ("a" under (?>a+)ab|b+, a*(?<!a)b, a*+ab|b,
#: a\bb|c, a$b|c; "aaa" under (?=.*c)[abc]{3}), and the mask would allow a token no
#: continuation completes. An anchor is sound only where it always holds: ^ or \A first, $ or \Z
#: last, at the top of the pattern.
_UNSOUND = {"ASSERT": "a lookahead or lookbehind ((?=...), (?!...), (?<=...), (?<!...))",
            "ASSERT_NOT": "a lookahead or lookbehind ((?=...), (?!...), (?<=...), (?<!...))",
            "ATOMIC_GROUP": "an atomic group (?>...)",
            "POSSESSIVE_REPEAT": "a possessive quantifier (*+, ++, ?+, {m,n}+)",
            "AT": "a word boundary or an anchor inside the pattern (\\b, \\B, ^, $, \\A, \\Z "
                  "other than ^ or \\A first and $ or \\Z last)"}
_UNSOUND_TEXT = re.compile(r"\(\?(?:=|!|<=|<!|>)|[*+?}]\+|\$.|.\^|\x00", re.S)


def _unsound(parsed, top: bool = True) -> str | None:
    """The first construct of `_UNSOUND` in a parsed pattern (``re``'s parser), or None; at the
    top level (``top``) a leading ^ / \\A and a trailing $ / \\Z are sound."""
    items = list(parsed)
    for i, (op, av) in enumerate(items):
        if str(op) == "AT" and top and (
                (i == 0 and str(av) in ("AT_BEGINNING", "AT_BEGINNING_STRING")) or
                (i == len(items) - 1 and str(av) in ("AT_END", "AT_END_STRING"))):
            continue
        what = _UNSOUND.get(str(op))
        if what:
            return what
        for _, sub in _parts(op, av) or ():
            what = _unsound(sub, False)
            if what:
                return what
    return None


#: A group's opening in ``regex``'s syntax: "(?" then a lookaround or atomic group (kept),
#: a group's own prefix ("(?:", "(?P<name>", "(?<name>", "(?flags:", "(?(cond)"), a flags
#: group or comment ("(?i)", "(?V1)", "(?#...)": no item), or a recursion or backreference
#: ("(?R)", "(?+1)", "(?1)", "(?&name)", "(?P=name)", "(?P>name)": one item).
_GROUP = re.compile(r"\(\?(?:(?P<look>=|!|<=|<!|>)|(?P<open>:|P?<[A-Za-z_]\w*>|"
                    r"[a-zA-Z0-9^-]*:|\(\w+\))|(?P<none>[a-zA-Z0-9^-]*\)|#[^)]*\))|"
                    r"(?P<item>R\)|[-+]?\d+\)|&\w+\)|P=\w+\)|P>\w+\)))")


def _outside_classes(pattern: str) -> str:
    """The pattern's syntax with every escape and character class written as one ``e``, a
    zero-width escape (\\b, \\B, \\A, \\Z, \\z, \\G, \\m, \\M, \\K) as a NUL, and each
    group's opening read by `_GROUP`: what is left is groups, quantifiers, alternations,
    anchors and literal characters (a class ends at its first ``]`` that is not its first
    character; a nested set's remainder is then read as syntax, which can only refuse more)."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            m = _REGEX_ONLY_ESCAPE.match(pattern, i)
            nxt = pattern[i + 1:i + 2]
            i = m.end() if m else i + 2
            out.append("\0" if not m and nxt and nxt in "bBAZzGmMK" else "e")
        elif c == "[":
            i += 1
            if pattern.startswith("^", i):
                i += 1
            if pattern.startswith("]", i):
                i += 1
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            i += 1
            out.append("e")
        elif c == "(" and pattern.startswith("(?", i):
            m = _GROUP.match(pattern, i)
            if m is None:  # an opening this reading does not know: a group, to count inside
                out.append("(")
                i += 2
            elif m.group("look"):
                out.append(m.group(0))
                i = m.end()
            elif m.group("none") is not None:
                i = m.end()
            elif m.group("item"):
                out.append("e")
                i = m.end()
            else:
                out.append("(")
                i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _text_items(syntax: str) -> int:
    """Items a pattern unrolls to, read off its syntax (`_outside_classes`): every character
    one item, a group the sum of its items, a count {m} or {m,n} multiplies the item or group
    before it by m (as `_regex_items`; an alternation's branches add up, as they compile)."""
    stack = [[0, 0]]  # per open group: [its items so far, the items of its last item]
    for m in re.finditer(r"\{(\d+)(?:,\d*)?\}|.", syntax, re.S):
        top = stack[-1]
        if m.group(1) is not None:
            k = max(int(m.group(1)), 1)
            top[0] += top[1] * (k - 1)
            top[1] *= k
        elif m.group(0) == "(":
            stack.append([0, 0])
        elif m.group(0) == ")" and len(stack) > 1:
            done = stack.pop()[0]
            stack[-1][0] += done
            stack[-1][1] = done
        elif m.group(0) in "|*+?^$\0":  # syntax, no item of its own
            continue
        else:
            top[0] += 1
            top[1] = 1
        if stack[0][0] > MAX_REGEX_ITEMS or top[0] > MAX_REGEX_ITEMS:
            return MAX_REGEX_ITEMS + 1
    return sum(level[0] for level in stack)


def _check_regex_size(pattern: str, name: str, constructs: bool = True) -> None:
    """Refuse, before it is compiled, a regex whose counted repeats unroll past
    `MAX_REGEX_ITEMS` items, or (``constructs``) one with a construct partial matching cannot be
    trusted with (`_UNSOUND`). The pattern is parsed by ``re``'s parser, with ``regex``'s own
    escapes read as one character each (`_REGEX_ONLY_ESCAPE`); one that parser still cannot
    read (``regex``'s other extensions) is counted off its text (`_text_items`), nested counts
    multiplied. ``constructs=False``: the size alone (a grammar engine's regex, matched by the
    engine's own rules: its masks cost time in the size too)."""
    items, what = _regex_facts(pattern)
    if items > MAX_REGEX_ITEMS:
        raise GrammarError(f"{name}: regex has over {MAX_REGEX_ITEMS:,} items once its counted "
                           f"repeats are unrolled (a{{n}} is n copies of a, nested counts "
                           f"multiply); use a shorter pattern or smaller counts")
    if what and constructs:
        raise GrammarError(f"{name}: regex {_clip(pattern)} has {what}: partial matching can "
                           f"allow a token there that no continuation completes, so the mask "
                           f"would not be exact; write the language without it")


def _regex_facts(pattern: str) -> tuple[int, str | None]:
    """(items the pattern unrolls to, the first construct of `_UNSOUND` in it or None), as
    `_check_regex_size` reads them."""
    parser = re._parser if hasattr(re, "_parser") else __import__("sre_parse")
    parsed = None
    for text in (pattern, _REGEX_ONLY_ESCAPE.sub(lambda m: m.group(0) if m.group(0) == "\\\\"
                                                  else "e", pattern)):
        try:
            with warnings.catch_warnings():  # re's FutureWarning on a V1 set such as [a--b]
                warnings.simplefilter("ignore")
                parsed = parser.parse(text)
            break
        except Exception:  # noqa: BLE001 - regex's extensions, or an error regex reports itself
            continue
    if parsed is not None:
        items, what = _regex_items(parsed), _unsound(parsed)
    else:
        syntax = _outside_classes(pattern)
        items = _text_items(syntax)
        found = _UNSOUND_TEXT.search(syntax)
        text = "" if found is None else found.group(0)
        what = None if found is None else (
            _UNSOUND["POSSESSIVE_REPEAT"] if text.endswith("+") else
            _UNSOUND["ATOMIC_GROUP"] if text == "(?>" else
            _UNSOUND["ASSERT"] if text.startswith("(?") else _UNSOUND["AT"])
    return items, what


class TokenAutomaton:
    """A deterministic automaton over token ids: ``next(state, token)`` is the next state, or
    -1 when the grammar rejects the token there. The start state is 0; the mask at a state
    allows the tokens with a next state.

    Build one from a transition table (``TokenAutomaton(table)``, ``table[s][t]`` the next state
    or -1 / None), from a regex over the tokens' strings (`TokenAutomaton.from_regex`), or read
    one from JSON (`spectheory.inputs.grammar_engines.load_grammar`):

    ```text
    {"transitions": [[1, -1, null], [-1, 0, 1]]}          # S x V, null or -1: rejected
    {"tokens": ["(", ")", "x", "<eos>"], "eos": 3, "regex": "\\\\((x|\\\\(x\\\\))*\\\\)"}
    ```

    A regex automaton allows token t after history h when the concatenated strings of h and t
    can still be extended to a full match of the regex (the `regex` package's partial matching);
    its states are the distinct strings reached, added as histories reach them. An ``eos``
    token is allowed exactly after a full match and ends the grammar (rows after it are
    unconstrained).
    """

    def __init__(self, transitions=None, *, vocab_size: int | None = None, name: str = "grammar",
                 eos: int | None = None, _regex=None, _tokens=None, _eos=None):
        self.name = name
        self.eos = eos if eos is not None else _eos  # the stop token's id, if the grammar has one
        if _regex is not None:
            self._pattern, self._tokens = _regex, list(_tokens)
            self.vocab_size = len(self._tokens)
            self._strings = [""]
            self._ids = {"": 0}
            self._table = [None]  # filled on first use
            return
        self._pattern = None
        if vocab_size is not None and (isinstance(vocab_size, bool) or not isinstance(
                vocab_size, (int, np.integer)) or vocab_size < 1):
            raise GrammarError(f"{name}: vocab_size = {_repr_cut(vocab_size, 40)} is not an integer >= 1")
        if transitions is None or isinstance(transitions, (str, bytes, Mapping)):
            raise GrammarError(f"{name}: transitions must be a list of rows (states) of next "
                               f"states per token, not a {type(transitions).__name__}")
        try:
            arr = np.array([[(-1 if v is None else v) for v in row] for row in transitions],
                           dtype=object)
        except TypeError:
            raise GrammarError(f"{name}: transitions must be a list of rows (states) of next "
                               f"states per token") from None
        if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
            raise GrammarError(f"{name}: transitions must be a non-empty S x V table, not shape "
                               f"{list(arr.shape)}")
        S, V = arr.shape
        if S > MAX_STATES:
            raise GrammarError(f"{name}: {S:,} states, over the limit of {MAX_STATES:,}")
        for s in range(S):
            for t in range(V):
                v = arr[s, t]
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or \
                        not -1 <= int(v) < S:
                    raise GrammarError(f"{name}: transition from state {s} on token {t} is "
                                       f"{v!r}; a next state is an integer in 0..{S - 1}, or "
                                       f"-1 / null for a rejected token")
        if vocab_size is not None and V != vocab_size:
            raise GrammarError(f"{name}: the table has {V} tokens per state, the vocabulary "
                               f"{vocab_size}")
        self.eos = _check_eos(self.eos, V, name)
        self.vocab_size = V
        self._table = [np.asarray(arr[s], dtype=np.int64) for s in range(S)]

    # -- construction

    @classmethod
    def from_regex(cls, pattern: str, tokens: Sequence[str], name: str = "grammar",
                   eos: int | None = None):
        """The automaton of a regex over the tokens' strings (see the class docstring). With
        ``eos``, that token is a stop token: allowed exactly when the text so far is a full
        match, and the rows after it are unconstrained (as grammar engines end a
        generation)."""
        try:
            import regex
        except ImportError:  # pragma: no cover - a core dependency
            raise GrammarError("regex grammars need the package 'regex' (pip install regex)") \
                from None
        if not isinstance(pattern, str):
            raise GrammarError(f"{name}: regex must be a string, not {type(pattern).__name__}")
        if not isinstance(tokens, (list, tuple)) or not tokens or \
                not all(isinstance(t, str) for t in tokens):
            raise GrammarError(f"{name}: tokens must be a non-empty list of strings (one per "
                               f"token id)")
        eos = _check_eos(eos, len(tokens), name)
        if any(t == "" for i, t in enumerate(tokens) if i != eos):
            raise GrammarError(f"{name}: token {list(tokens).index('')} is the empty string; "
                               f"every token must spell at least one character")
        refuse_duplicate_tokens(tokens, name)
        _check_regex_size(pattern, name)
        try:
            compiled = regex.compile(pattern)
        except regex.error as exc:
            raise GrammarError(f"{name}: regex {pattern!r} does not compile ({exc})") from None
        return cls(_regex=_BoundedRegex(compiled, name), _tokens=tokens, name=name,
                   _eos=eos)

    # -- reading

    @property
    def n_states(self) -> int:
        return len(self._table)

    def _row(self, s: int) -> np.ndarray:
        row = self._table[s]
        if row is None:  # a regex state: compute its transitions once
            text = self._strings[s]
            row = np.full(self.vocab_size, -1, dtype=np.int64)
            start = time.monotonic()
            for t, tok in enumerate(self._tokens):
                spent = time.monotonic() - start
                if t and spent > REGEX_ROW_PROJECT_S and spent / t * self.vocab_size > REGEX_ROW_S:
                    raise GrammarError(
                        f"{self.name}: regex {_clip(self._pattern.pattern)} would take about "
                        f"{spent / t * self.vocab_size:,.0f} s to read one row of "
                        f"{self.vocab_size:,} tokens after the text {_clip(text)} ({spent / t:.2g} "
                        f"s a match over the first {t:,}; at most {REGEX_ROW_S:g} s a row): it "
                        f"backtracks there (a nested repetition such as (a|a)* or (a+)+); "
                        f"rewrite the regex")
                if t == self.eos:
                    if self._pattern.fullmatch(text) is not None:
                        row[t] = END
                    continue
                nxt = text + tok
                if self._pattern.fullmatch(nxt, partial=True) is None:
                    continue
                if nxt not in self._ids:
                    if len(self._strings) >= MAX_STATES:
                        raise GrammarError(f"{self.name}: the regex automaton grew past "
                                           f"{MAX_STATES:,} states")
                    self._ids[nxt] = len(self._strings)
                    self._strings.append(nxt)
                    self._table.append(None)
                row[t] = self._ids[nxt]
            self._table[s] = row
        return row

    def _check_states(self, states) -> np.ndarray:
        """``states`` [N] as int64, each -1 (rejected) or a state reached so far; one line
        otherwise (a negative id would wrap to the last row and answer for another state)."""
        s = _ids(states, "states", 1, self.name)
        if s.size and (s.min() < -1 or s.max() >= self.n_states):
            bad = s[(s < -1) | (s >= self.n_states)][0]
            raise GrammarError(f"{self.name}: state {int(bad)} is not -1 or a state reached "
                               f"so far (0..{self.n_states - 1})")
        return s

    def _check_tokens(self, tokens, what: str = "tokens", ndim: int = 1) -> np.ndarray:
        """``tokens`` as int64 with every id in 0..V-1; one line otherwise (a negative id would
        wrap to the last token's column and answer for another token)."""
        t = _ids(tokens, what, ndim, self.name)
        if t.size and (t.min() < 0 or t.max() >= self.vocab_size):
            bad = t[(t < 0) | (t >= self.vocab_size)][0]
            raise GrammarError(f"{self.name}: token {int(bad)} is outside the vocabulary "
                               f"0..{self.vocab_size - 1}")
        return t

    def step(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Next states [N] after ``tokens`` [N] from ``states`` [N] (-1 stays -1). A state
        that is not -1 or reached so far, or a token outside 0..V-1, is refused in one line
        (`GrammarError`)."""
        states, tokens = self._check_states(states), self._check_tokens(tokens)
        if len(states) != len(tokens):
            raise GrammarError(f"{self.name}: {len(states)} states and {len(tokens)} tokens; "
                               f"step takes one token per state")
        return self._step(states, tokens)

    def _step(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """`step` on ``states`` [N] and ``tokens`` [N] already checked (int64, in range)."""
        out = np.full(len(states), -1, dtype=np.int64)
        for s in np.unique(states):
            if s < 0:
                continue
            sel = states == s
            out[sel] = np.maximum(self._row(int(s))[tokens[sel]], -1)  # END: unconstrained
        return out

    def allowed(self, states: np.ndarray) -> np.ndarray:
        """The mask [N, V] at ``states`` [N]; a rejected history (-1) allows every token."""
        states = self._check_states(states)
        out = np.ones((len(states), self.vocab_size), dtype=bool)
        for s in np.unique(states):
            if s >= 0:
                row = self._row(int(s))
                out[states == s] = (row >= 0) | (row == END)
        return out

    def run(self, history: np.ndarray) -> np.ndarray:
        """States [N] reached from 0 by each row of ``history`` [N, n] (token ids in 0..V-1)."""
        history = self._check_tokens(history, "history", 2)
        states = np.zeros(history.shape[0], dtype=np.int64)
        for j in range(history.shape[1]):  # checked once: each step's states are -1 or reached
            states = self._step(states, history[:, j])
        return states

    def accepts_prefix(self, tokens: Sequence[int]) -> bool:
        """True when the grammar allows every token of ``tokens`` in turn from the start (as
        `allowed` has it: after an end of sequence the grammar constrains nothing)."""
        try:
            tokens = list(tokens)
        except TypeError:
            raise GrammarError(f"{self.name}: tokens must be a sequence of token ids, not "
                               f"{type(tokens).__name__}") from None
        t = self._check_tokens(np.array(tokens, dtype=np.int64) if not tokens else tokens)
        state = 0
        for x in t:  # a regex grammar's eos steps to END, which _step reads as -1 (rejected):
            nxt = int(self._row(state)[int(x)])  # its complete words were refused
            if nxt == END:
                return True
            if nxt < 0:
                return False
            state = nxt
        return True

    def to_dict(self) -> dict:
        """JSON-ready form: the regex and tokens, or the transition table."""
        if self._pattern is not None:
            out = {"tokens": list(self._tokens), "regex": self._pattern.pattern}
            if self.eos is not None:
                out["eos"] = self.eos
            return out
        return {"transitions": [[int(v) if v >= 0 else None for v in row]
                                for row in self._table]}

    def __repr__(self) -> str:
        kind = "regex" if self._pattern is not None else "table"
        return f"TokenAutomaton({self.name!r}, {kind}, V={self.vocab_size})"


# ----------------------------------------------------------------------------- histories


def _np_history(history, N: int, V: int | None = None) -> np.ndarray:
    """History as int64 numpy [N, n] (None: n = 0), with every token in 0..V-1 when V is
    given."""
    if history is None:
        return np.zeros((N, 0), dtype=np.int64)
    h = history.detach().cpu().numpy() if is_tensor(history) else np.asarray(history)
    if h.ndim != 2 or h.shape[0] != N:
        raise OptionError(f"history must have shape [{N}, n] (one row per processed row), not "
                          f"{list(h.shape)}")
    if h.size and h.dtype.kind not in "iu":
        raise OptionError(f"history holds token ids (integers), not {h.dtype}")
    if V is not None and h.size and (h.min() < 0 or h.max() >= V):  # in its own dtype: a
        bad = h[(h < 0) | (h >= V)][0]  # uint64 token past 2^63 was named as a negative one
        raise OptionError(f"history holds token {int(bad)}, outside 0..{V - 1}")
    return h.astype(np.int64, copy=False)


def _params(sp, what: str):
    """``sp``, the `SamplingParams` these helpers read, or one line: the string and mapping
    forms are parsed by `spectheory.inputs.processing.parse_sampling` (the processing calls
    this module, not the other way round)."""
    if not all(hasattr(sp, key) for key in _READ):
        raise OptionError(f"{what}: sp = {_repr_cut(sp, 40)} is not SamplingParams (build them with "
                          "spectheory.inputs.processing.parse_sampling, which takes the string "
                          "form)")
    return sp


#: The fields of `SamplingParams` the stateful helpers read.
_READ = ("stop_token_ids", "logit_bias", "grammar", "no_repeat_ngram_size", "min_tokens",
         "repetition_penalty", "frequency_penalty", "presence_penalty")


def _history_2d(history, what: str) -> np.ndarray:
    """A history [N, n] of token ids as int64 numpy (a list or tensor too), or one line."""
    h = history.detach().cpu().numpy() if is_tensor(history) else np.asarray(history)
    if h.ndim != 2 or (h.size and h.dtype.kind not in "iu"):
        raise OptionError(f"{what}: history must be an integer array [N, n] of token ids, not "
                          f"{h.dtype} of shape {list(h.shape)}")
    return h.astype(np.int64, copy=False)


def _vocabulary(V, N: int, what: str, per_cell: int) -> int:
    """V as an int in 1..`spectheory.inputs.instances.MAX_VOCAB`, with the [N, V] table of
    ``per_cell`` bytes a cell checked against the machine's memory before it is allocated."""
    from ..runtime.limits import check_memory
    from .instances import MAX_VOCAB

    if isinstance(V, bool) or not isinstance(V, (int, np.integer)) or not 1 <= V <= MAX_VOCAB:
        raise OptionError(f"{what}: V = {_repr_cut(V, 40)} is not an integer in 1..{MAX_VOCAB:,}")
    check_memory(int(N) * int(V) * per_cell, f"{what}: a table of {N:,} x {int(V):,} tokens")
    return int(V)


def counts(history: np.ndarray, V: int) -> np.ndarray:
    """Occurrences [N, V] of each token in each history row [N, n]."""
    history = _history_2d(history, "counts")
    N, n = history.shape
    V = _vocabulary(V, N, "counts", 8)
    if (history < 0).any() or (history >= V).any():
        bad = history[(history < 0) | (history >= V)][0]
        raise OptionError(f"history holds token {int(bad)}, outside 0..{V - 1}")
    out = np.zeros((N, V), dtype=np.int64)
    if n:
        np.add.at(out, (np.repeat(np.arange(N), n), history.reshape(-1)), 1)
    return out


def no_repeat_mask(history: np.ndarray, V: int, n: int) -> np.ndarray:
    """Allowed tokens [N, V] under transformers' `NoRepeatNGramLogitsProcessor` of size n: a
    token t is banned when (last n-1 tokens of the history, t) already occurs as an n-gram in
    the history. ``n`` and ``V`` are integers >= 1 and the history's tokens lie in 0..V-1, or
    one line (`OptionError`): n <= 0 bans nothing and would read as a mask that ran."""
    for key, v in (("n", n), ("V", V)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise OptionError(f"no_repeat_mask: {key} = {v!r} is not an integer >= 1")
    history = _history_2d(history, "no_repeat_mask")
    V = _vocabulary(V, history.shape[0], "no_repeat_mask", 1)
    if history.size and (history.min() < 0 or history.max() >= V):
        bad = history[(history < 0) | (history >= V)][0]
        raise OptionError(f"history holds token {int(bad)}, outside 0..{V - 1}")
    N, m = history.shape
    allowed = np.ones((N, V), dtype=bool)
    starts = m - n + 1  # the n-grams of the history start at k = 0 .. m - n
    if starts <= 0:  # no whole n-gram in the history yet
        return allowed
    key = history[:, m - n + 1:]  # [N, n-1]
    windows = np.lib.stride_tricks.sliding_window_view(history, n, axis=1)  # [N, m-n+2, n]
    # in blocks of starts, about 2^24 compared entries each (a history of 10^6 tokens took
    # 11 s one start at a time)
    step = max(1, (1 << 24) // max(1, N * max(n - 1, 1)))
    for k0 in range(0, starts, step):
        w = windows[:, k0:min(starts, k0 + step)]  # [N, b, n]
        same = (w[..., :n - 1] == key[:, None, :]).all(axis=2)  # [N, b]; n = 1: all True
        r, c = np.nonzero(same)
        allowed[r, w[r, c, n - 1]] = False
    return allowed


def check_vocabulary(sp, V: int, where: str = "") -> None:
    """One line when the parameters ``sp`` name a token outside 0..V-1 (a stop token or a
    logit_bias token), once, before any row; stop tokens are checked even without min_tokens
    (they are the instance's stop tokens, and one outside the vocabulary is a typo). ``where``
    (such as ``"draft sampling"``) leads the line: whose parameters they are."""
    sp = _params(sp, "check_vocabulary")
    if isinstance(V, bool) or not isinstance(V, (int, np.integer)) or V < 1:
        raise OptionError(f"check_vocabulary: V = {_repr_cut(V, 40)} is not an integer >= 1")
    lead = f"{where}: " if where else ""
    for t in sp.stop_token_ids:
        if t >= V:
            raise OptionError(f"{lead}stop token {t} is outside the vocabulary 0..{V - 1}")
    for t, _, _ in sp.logit_bias:
        if t >= V:
            raise OptionError(f"{lead}logit_bias token {t} is outside the vocabulary "
                              f"0..{V - 1}")
    if sp.grammar is not None:
        _grammar_vocabulary(sp.grammar, V)


def _grammar_vocabulary(grammar, V: int) -> None:
    """A grammar's ``vocab_size`` is an integer equal to the rows' V (a user grammar class may
    set it to anything: ``"3"`` was reported as a mismatch of 3 against 3)."""
    n = getattr(grammar, "vocab_size", V)
    name = getattr(grammar, "name", type(grammar).__name__)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise GrammarError(f"{name}: the grammar's vocab_size = {_repr_cut(n, 40)} is not an integer")
    if n != V:
        raise GrammarError(f"{name}: the grammar has {n} tokens, the rows it masks {V} (a "
                           f"grammar is built over the instance's vocabulary)")


def mask(sp, history: np.ndarray, V: int) -> np.ndarray | None:
    """The allowed tokens [N, V] of every mask in ``sp`` at each history, or None when no mask
    applies."""
    sp = _params(sp, "mask")
    history = _history_2d(history, "mask")
    N, n = history.shape
    check_vocabulary(sp, V)
    out = None

    def _and(m):
        nonlocal out
        out = m if out is None else out & m

    if sp.grammar is not None:
        _grammar_vocabulary(sp.grammar, V)
        _and(grammar_mask(sp.grammar, history, N))
    if sp.no_repeat_ngram_size:
        _and(no_repeat_mask(history, V, sp.no_repeat_ngram_size))
    if sp.min_tokens and n < sp.min_tokens:
        m = np.ones((N, V), dtype=bool)
        m[:, list(sp.stop_token_ids)] = False
        _and(m)
    banned = [t for t, v, _ in sp.logit_bias if v == -math.inf]
    if banned:
        m = np.ones((N, V), dtype=bool)
        m[:, banned] = False
        _and(m)
    return out


def _describe_history(history: np.ndarray, r: int) -> str:
    if history is None:  # rows processed together (`process_rows_along`), refused one by one
        return "(...)"
    return "(" + ", ".join(str(int(t)) for t in history[r]) + ("," if history.shape[1] == 1
                                                               else "") + ")"


def _refuse_empty(history: np.ndarray, empty: np.ndarray) -> None:
    """One line naming the first row (flagged in ``empty [N]``) that no token can follow."""
    rows = np.flatnonzero(empty)
    if len(rows):
        r = int(rows[0])
        raise GrammarError(f"the masks leave no token of positive probability after history "
                           f"{_describe_history(history, r)} (row {r}); the law is undefined "
                           f"there")


def _refuse_overflow(history: np.ndarray, before: np.ndarray, after: np.ndarray, rep) -> None:
    """One line when the repetition penalty took a finite logit of ``before [N, V]`` beyond the
    float range in ``after [N, V]`` and the law cannot be read from it: a logit that became
    +inf (x / r with x > 0 and r tiny: inf - inf is NaN in the softmax), or a row left with no
    finite logit (x * r with x < 0 for all its tokens). A single logit that became -inf beside
    a finite one is kept: its exact value is below -1.8e308, so its probability is 0 in float64
    anyway (exp of a gap over 1e292), the same value the float computation gives."""
    grew = np.isfinite(before) & ~np.isfinite(after)
    if not grew.any():
        return
    rows = np.flatnonzero((grew & (after > 0)).any(axis=-1)
                          | ~np.isfinite(after).any(axis=-1) & grew.any(axis=-1))
    if len(rows):
        r = int(rows[0])
        t = int(np.flatnonzero(grew[r])[0])
        x = float(before[r, t])
        op = "/" if x > 0 else "*"
        raise OptionError(f"repetition_penalty = {float(rep):.6g} takes logit {x:.6g} of token "
                          f"{t} after history {_describe_history(history, r)} (row {r}) beyond "
                          f"the float range ({x:.6g} {op} {float(rep):.6g} overflows to "
                          f"{after[r, t]}); float64 cannot compute the law there: use a "
                          f"repetition_penalty nearer 1")


def apply_exact(probs: np.ndarray, sp, history) -> np.ndarray:
    """Exact rows [N, V] (Fractions, normalised) after the rational stateful steps: masks and
    factor biases, renormalised. ``probs`` are exact probability rows (Fractions or integers,
    non-negative, each summing to 1); the penalties and additive biases act on logits, which
    exact rows do not have: refused in one line, as the exact path of
    `spectheory.inputs.processing.process_rows` refuses them (they were ignored here)."""
    sp = _params(sp, "apply_exact")
    logit_steps = [k for k, on in (
        ("repetition_penalty", float(sp.repetition_penalty) != 1),
        ("frequency_penalty", bool(float(sp.frequency_penalty))),
        ("presence_penalty", bool(float(sp.presence_penalty))),
        ("an additive logit_bias", any(not f and v not in (-math.inf, 0) for _, v, f in sp.logit_bias)))
        if on]
    if logit_steps:
        raise OptionError(f"apply_exact: {logit_steps[0]} acts on logits, which exact rows do not "
                          "have (masks and factor biases only; use apply_logits in float64)")
    return _apply_exact(_exact_rows(probs), sp, history)


def _apply_exact(probs: np.ndarray, sp, history, spare=None) -> np.ndarray:
    """`apply_exact` on rows and parameters already checked (the processing's own call: its
    rows are validated, its exact parameters refused before). ``spare`` [N] (optional): rows at
    histories the model reaches with probability zero; one that the masks leave empty is kept
    as given (its law is never weighed: any law is valid there) instead of refused."""
    N, V = probs.shape
    h = _np_history(history, N, V)
    allowed = mask(sp, h, V)
    x = probs
    if allowed is not None:
        x = np.where(allowed, x, Fraction(0)).astype(object)
    # a factor given as a float (``*2``, ``*0.5``) counts by its shortest decimal text, as every
    # float parameter does in exact mode: a float factor made the row's entries floats
    factors = [(t, v if isinstance(v, Fraction) else Fraction(repr(float(v))))
               for t, v, is_factor in sp.logit_bias if is_factor and v != -math.inf]
    if factors:
        x = x.copy()
        for t, f in factors:
            x[:, t] = x[:, t] * f
    total = B.sum(x, axis=-1, keepdims=True)
    empty = np.asarray(total == 0).reshape(-1)
    if spare is not None and (empty & spare).any():
        keep = empty & spare
        x = np.where(keep[:, None], probs, x).astype(object)
        total = B.sum(x, axis=-1, keepdims=True)
        empty = empty & ~keep
    _refuse_empty(h, empty)
    return x / total


def _exact_rows(probs) -> np.ndarray:
    """``probs`` as an object array [N, V] of Fractions, each row non-negative and summing to 1
    exactly, or one line."""
    a = np.asarray(probs, dtype=object)
    if a.ndim != 2 or a.shape[1] == 0:
        raise OptionError(f"apply_exact: probs must be rows [N, V] with V >= 1, not shape "
                          f"{list(a.shape)}")
    for (r, t), v in np.ndenumerate(a):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, Fraction, np.integer)):
            raise OptionError(f"apply_exact: probs[{r}, {t}] = {_repr_cut(v, 40)} is not an exact "
                              "rational (a Fraction or an integer)")
        if v < 0:
            raise OptionError(f"apply_exact: probs[{r}, {t}] = {v} is negative")
    for r in range(a.shape[0]):
        if sum(a[r], Fraction(0)) != 1:
            raise OptionError(f"apply_exact: row {r} sums to {sum(a[r], Fraction(0))}, not 1")
    return np.vectorize(Fraction, otypes=[object])(a) if a.size else a


def apply_logits(logits, sp, history):
    """Float64 logits [N, V] (numpy or torch) after masks, biases and penalties. ``logits`` are
    real numbers, finite or -inf (a token of probability zero); NaN or +inf is refused in one
    line naming the entry (it read as a mask that left no token)."""
    sp = _params(sp, "apply_logits")
    if is_tensor(logits):
        if logits.dtype.is_complex or logits.dtype == torch.bool:
            raise OptionError(f"apply_logits: logits must be real numbers, not {logits.dtype}")
        view = _np_of(logits.to(torch.float64))
    else:
        a = np.asarray(logits)
        if a.dtype.kind not in "fiu":
            raise OptionError(f"apply_logits: logits must be real numbers, not {a.dtype}")
        view = a.astype(np.float64, copy=False)
    if view.ndim != 2 or view.shape[1] == 0:
        raise OptionError(f"apply_logits: logits must be rows [N, V] with V >= 1, not shape "
                          f"{list(view.shape)}")
    bad = np.isnan(view) | (view == np.inf)
    if bad.any():
        r, t = (int(i) for i in np.argwhere(bad)[0])
        raise OptionError(f"apply_logits: logit [{r}, {t}] is {view[r, t]}; logits are finite "
                          "numbers, or -inf for a token of probability zero")
    return _apply_logits(logits, sp, history)


def _apply_logits(logits, sp, history, spare=None):
    """`apply_logits` on logits already checked (the processing's own call: the kit's logits of
    validated rows, or validated logits); ``spare`` as for `_apply_exact`."""
    N, V = logits.shape
    h = _np_history(history, N, V)
    allowed = mask(sp, h, V)
    c = None
    if _penalised(sp):  # the counts are read by the penalties only (h is checked)
        c = counts(h, V) if h.shape[1] else np.zeros((N, V), dtype=np.int64)
    return _after_history(logits, sp, allowed, c, h, spare)


def _penalised(sp) -> bool:
    """Whether a penalty of ``sp`` reads the token counts of the history."""
    return (float(sp.repetition_penalty) != 1 or bool(float(sp.frequency_penalty))
            or bool(float(sp.presence_penalty)))


def _after_history(logits, sp, allowed, c, h, spare=None):
    """`apply_logits` given what it reads of the histories: ``allowed [N, V]`` (`mask`, or
    None), ``c [N, V]`` (`counts`, or None without penalties) and ``h`` (the histories, named
    in the refusals). Every step acts on each row alone."""
    N, V = logits.shape
    add = 0.0  # x + 0.0 (as x + an array of zeros: -0.0 becomes 0.0) with no additive bias
    for t, v, is_factor in sp.logit_bias:
        if v == -math.inf:
            continue
        if isinstance(add, float):
            add = np.zeros((N, V), dtype=np.float64)
        add[:, t] += math.log(v) if is_factor else float(v)
    rep = float(sp.repetition_penalty)
    freq, pres = float(sp.frequency_penalty), float(sp.presence_penalty)
    if c is not None:
        seen = c > 0
    torch_out = is_tensor(logits)
    x = logits.detach().cpu().numpy().astype(np.float64) if torch_out else \
        np.asarray(logits, dtype=np.float64)  # every step below makes a new array
    if allowed is not None:
        x = np.where(allowed, x, -np.inf)
    x = x + add
    if rep != 1:
        pen = seen & np.isfinite(x)
        before = x
        with np.errstate(over="ignore"):  # an overflow is refused just below, or is exact
            x = np.where(pen & (x > 0), x / rep, np.where(pen, x * rep, x))
        _refuse_overflow(h, before, x, sp.repetition_penalty)
    if freq or pres:
        x = x - freq * c - pres * seen
    top = x.max(axis=-1)
    empty = ~np.isfinite(top) | np.isnan(top)
    if spare is not None and (empty & spare).any():  # unreached: the row as given
        keep = empty & spare
        raw = logits.detach().cpu().numpy() if torch_out else np.asarray(logits)
        x = np.where(keep[:, None], raw.astype(np.float64), x)
        empty = empty & ~keep
    _refuse_empty(h, empty)
    if torch_out:
        return torch.as_tensor(x, device=logits.device)
    return x


__all__ = ["END", "GrammarError", "MAX_STATES", "REGEX_ROW_S", "REGEX_TIMEOUT_S", "TokenAutomaton",
           "apply_exact", "apply_logits", "check_vocabulary", "counts", "kit_logits", "mask",
           "no_repeat_mask",
           "refuse_duplicate_tokens"]
