"""Where grammars come from: JSON objects and files (`grammar_from_dict`, `load_grammar`,
`as_grammar`), and token masks from a real grammar engine: llguidance (the Rust engine behind Guidance, used by
vLLM, SGLang and llama.cpp for structured outputs), as a spectheory grammar.

[`llguidance_grammar`][spectheory.inputs.grammar_engines.llguidance_grammar] compiles a regex, a
JSON schema or a Lark grammar with ``llguidance`` over a small vocabulary of token strings and
returns a [`TokenAutomaton`][spectheory.inputs.stateful.TokenAutomaton] whose mask after a history
is the engine's own bitmask: a fresh ``LLMatcher`` consumes the history token by token and
``fill_next_token_bitmask`` gives the allowed tokens. States are the histories the analysis
reaches, expanded on first use. The stop token (``eos``) is allowed where the engine allows it
(a complete match), and is the only token allowed where the matcher has stopped (a complete match
that cannot go on, where an engine ends the request); it ends the grammar: the rows after it are
unconstrained, as for the kit's own automata.

So the exact engine, `check_step` and `check_sampler` can compute laws under the engine's masks
(`SamplingParams(grammar=llguidance_grammar(...))`), and the masks can be held against an
automaton written independently (`TokenAutomaton.from_regex`, or a transition table).

``llguidance`` is an optional dependency (extra ``[grammar]``); without it the constructor
refuses in one line.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any, Sequence

import numpy as np

from .stateful import (END, MAX_STATES, GrammarError, TokenAutomaton, _check_regex_size,
                       refuse_duplicate_tokens)

#: Largest grammar file read, bytes.
MAX_GRAMMAR_BYTES = 64 * 1024**2

#: Largest vocabulary a llguidance grammar is built over here (every state's mask is a full row).
MAX_ENGINE_VOCAB = 4096


class _Tokenizer:
    """The minimal tokenizer llguidance's ``TokenizerWrapper`` reads: token byte strings, the
    eos id, and a greedy longest-match encoder (llguidance tokenizes grammar literals with it)."""

    def __init__(self, tokens: Sequence[str], eos: int):
        self.tokens = [t.encode("utf-8") for t in tokens]
        self.eos_token_id = eos
        self.bos_token_id = None
        self.special_token_ids = [eos]

    def __call__(self, s):
        data = s.encode("utf-8") if isinstance(s, str) else bytes(s)
        out, i = [], 0
        while i < len(data):
            best = None
            for j, t in enumerate(self.tokens):
                if j != self.eos_token_id and t and data.startswith(t, i) and \
                        (best is None or len(t) > len(self.tokens[best])):
                    best = j
            if best is None:
                raise ValueError(f"no token spells {data[i:i + 8]!r}")
            out.append(best)
            i += len(self.tokens[best])
        return out


def _first_line(text) -> str:
    """llguidance's errors quote the grammar over several lines: the first non-empty line,
    at most 200 characters (the message stays one line)."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    first = " ".join(lines[:2]) if lines else "no reason given"
    return first if len(first) <= 200 else first[:197] + "..."


class EngineAutomaton(TokenAutomaton):
    """A `TokenAutomaton` whose rows come from a grammar engine's matcher, one state per history
    reached (see `spectheory.inputs.grammar_engines`)."""

    def __init__(self, tokenizer, grammar_text: str, vocab_size: int, eos: int, name: str,
                 spec: dict):
        import llguidance
        from llguidance.numpy import allocate_token_bitmask

        self.name = name
        self.eos = eos
        self.vocab_size = vocab_size
        self._pattern = None
        self._llg = llguidance
        self._tok = tokenizer
        self._grammar = grammar_text
        self._spec = spec
        self._histories = [()]
        self._ids = {(): 0}
        self._table = [None]
        self._bitmask = allocate_token_bitmask(1, vocab_size)

    def _matcher(self, history: tuple):
        m = self._llg.LLMatcher(self._tok, self._grammar)
        if m.is_error():
            raise GrammarError(f"{self.name}: llguidance refused the grammar "
                               f"({_first_line(m.get_error())})")
        for t in history:
            if not m.consume_token(int(t)):
                raise GrammarError(f"{self.name}: llguidance rejected token {t} after "
                                   f"{history} ({_first_line(m.get_error())})")
        return m

    def _row(self, s: int) -> np.ndarray:
        row = self._table[s]
        if row is not None:
            return row
        from llguidance.numpy import fill_next_token_bitmask

        h = self._histories[s]
        m = self._matcher(h)
        row = np.full(self.vocab_size, -1, dtype=np.int64)
        if m.is_stopped():  # a complete match that cannot go on: the engine ends here
            row[self.eos] = END
        else:
            fill_next_token_bitmask(m, self._bitmask, 0)
            words = self._bitmask[0].astype(np.int64) & 0xFFFFFFFF
            bits = (words[:, None] >> np.arange(32)[None, :]) & 1
            allowed = bits.reshape(-1)[:self.vocab_size].astype(bool)
            accepting = bool(m.is_accepting())
            for t in np.flatnonzero(allowed):
                t = int(t)
                if t == self.eos:
                    # llguidance's mask keeps the stop token where no text can match (a dead
                    # grammar ends the generation); the kit allows it at a complete match only,
                    # as its own automaton does, so that a grammar that accepts nothing is refused
                    if accepting:
                        row[t] = END
                    continue
                nxt = h + (t,)
                if nxt not in self._ids:
                    if len(self._histories) >= MAX_STATES:
                        raise GrammarError(f"{self.name}: more than {MAX_STATES:,} histories "
                                           f"reached")
                    self._ids[nxt] = len(self._histories)
                    self._histories.append(nxt)
                    self._table.append(None)
                row[t] = self._ids[nxt]
        self._table[s] = row
        return row

    def to_dict(self) -> dict:
        """JSON-ready form: the engine's grammar and tokens, as `llguidance_grammar` took them."""
        return dict(self._spec)

    def __repr__(self) -> str:
        return f"EngineAutomaton({self.name!r}, llguidance, V={self.vocab_size})"


def llguidance_grammar(tokens: Sequence[str], eos: int, *, regex: str | None = None,
                       json_schema: Any = None, lark: str | None = None,
                       name: str | None = None) -> EngineAutomaton:
    """A grammar whose masks are llguidance's, over the vocabulary ``tokens`` (token id i spells
    ``tokens[i]``; ``eos`` is the stop token's id, its string is not matched).

    Give exactly one of ``regex``, ``json_schema`` (a dict or JSON text) or ``lark``. Refused in
    one line: llguidance not installed, a grammar it rejects, a vocabulary over
    `MAX_ENGINE_VOCAB` tokens, an empty token string, two ids spelling the same string
    (`spectheory.inputs.stateful.refuse_duplicate_tokens`: llguidance keeps one id per string,
    the kit's automaton would allow both)."""
    where = f"{name}: " if name else ""  # a grammar file's name leads its messages
    try:
        import llguidance
    except ImportError:
        raise GrammarError(f"{where}llguidance_grammar needs the package 'llguidance' (pip install "
                           "'spectheory[grammar]')") from None
    given = [k for k, v in (("regex", regex), ("json_schema", json_schema), ("lark", lark))
             if v is not None]
    if len(given) != 1:
        raise GrammarError(f"{where}give exactly one of regex, json_schema or lark")
    if not isinstance(tokens, (list, tuple)) or not tokens or \
            not all(isinstance(t, str) for t in tokens):
        raise GrammarError(f"{where}tokens must be a non-empty list of strings (one per token id)")
    V = len(tokens)
    if V > MAX_ENGINE_VOCAB:
        raise GrammarError(f"{where}{V:,} tokens, over the limit of {MAX_ENGINE_VOCAB:,} for engine "
                           f"masks")
    if isinstance(eos, bool) or not isinstance(eos, (int, np.integer)) or not 0 <= eos < V:
        raise GrammarError(f"{where}eos = {eos!r} is not a token id in 0..{V - 1}")
    if any(t == "" for i, t in enumerate(tokens) if i != eos):
        raise GrammarError(f"{where}every token but eos must spell at least one character")
    refuse_duplicate_tokens(tokens, name or "llguidance grammar")
    if regex is not None:  # its size as for the kit's own regex: masks cost time in it
        if not isinstance(regex, str):
            raise GrammarError(f"{where}regex must be a string, not {type(regex).__name__}")
        _check_regex_size(regex, name or "llguidance regex", constructs=False)
    try:
        tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Tokenizer(tokens, int(eos))),
                                     slices=[])
        if regex is not None:
            text = llguidance.LLMatcher.grammar_from_regex(regex)
            spec = {"engine": "llguidance", "tokens": list(tokens), "eos": int(eos),
                    "regex": regex}
        elif json_schema is not None:
            schema = json_schema if isinstance(json_schema, str) else json.dumps(json_schema)
            text = llguidance.LLMatcher.grammar_from_json_schema(schema)
            spec = {"engine": "llguidance", "tokens": list(tokens), "eos": int(eos),
                    "json_schema": json.loads(schema)}
        else:
            text = llguidance.LLMatcher.grammar_from_lark(lark)
            spec = {"engine": "llguidance", "tokens": list(tokens), "eos": int(eos),
                    "lark": lark}
    except (ValueError, TypeError, RuntimeError) as exc:
        raise GrammarError(f"{where}llguidance refused the grammar ({_first_line(exc)})") \
            from None
    label = name or f"llguidance {given[0]}"
    g = EngineAutomaton(tok, text, V, int(eos), label, spec)
    g._row(0)  # compiles and checks the grammar now, in one line if it fails
    return g


def grammar_from_dict(obj: Any, name: str = "grammar") -> TokenAutomaton:
    """A `TokenAutomaton` from its JSON form (see `TokenAutomaton`)."""
    if not isinstance(obj, dict):
        raise GrammarError(f"{name}: a grammar is a JSON object with 'transitions', or "
                           f"'tokens' and 'regex'")
    keys = set(obj)
    if obj.get("engine") == "llguidance":
        extra = keys - {"engine", "tokens", "eos", "regex", "json_schema", "lark"}
        if extra or "tokens" not in obj or "eos" not in obj:
            raise GrammarError(f"{name}: an llguidance grammar has 'tokens', 'eos' and one of "
                               f"'regex', 'json_schema', 'lark'")
        return llguidance_grammar(obj["tokens"], obj["eos"], regex=obj.get("regex"),
                                  json_schema=obj.get("json_schema"), lark=obj.get("lark"),
                                  name=name)
    if keys == {"transitions"}:
        return TokenAutomaton(obj["transitions"], name=name)
    if keys in ({"tokens", "regex"}, {"tokens", "regex", "eos"}):
        return TokenAutomaton.from_regex(obj["regex"], obj["tokens"], name=name,
                                         eos=obj.get("eos"))
    raise GrammarError(f"{name}: keys {sorted(keys)}; a grammar has 'transitions', or 'tokens' "
                       f"and 'regex' (and optionally 'eos')")


def load_grammar(path: str) -> TokenAutomaton:
    """Read a grammar JSON file (see `TokenAutomaton`), one-line errors."""
    from .instances import parse_json  # refuses duplicate keys, NaN, deep nesting, huge ints
    from ..runtime.errors import InstanceError

    name = f"grammar {path!r}"[:200]
    if not isinstance(path, (str, bytes)) and not hasattr(path, "__fspath__"):
        # an int would be read as an open file descriptor
        raise GrammarError(f"{name}: a grammar file is a path, not {type(path).__name__}")
    try:
        st = os.stat(path)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise GrammarError(f"{name}: cannot read it ({getattr(exc, 'strerror', None) or exc})") \
            from None
    if stat.S_ISDIR(st.st_mode):
        raise GrammarError(f"{name}: is a folder, not a grammar file")
    if not stat.S_ISREG(st.st_mode):  # a FIFO without a writer blocked past --time-limit
        raise GrammarError(f"{name}: not a regular file (a pipe or a device); save the grammar "
                           "to a file")
    size = st.st_size
    if size > MAX_GRAMMAR_BYTES:
        raise GrammarError(f"{name}: {size:,} bytes, over the limit of {MAX_GRAMMAR_BYTES:,}")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(MAX_GRAMMAR_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise GrammarError(f"{name}: not a JSON grammar ({exc})") from None
    try:
        obj = parse_json(text, name)
    except InstanceError as exc:
        raise GrammarError(str(exc).replace("unreadable JSON", "not a JSON grammar")) from None
    g = grammar_from_dict(obj, name=name)
    g.path = path
    return g


def as_grammar(x: Any) -> TokenAutomaton | None:
    """None, a `TokenAutomaton`, its JSON form (a dict) or a path to a JSON file."""
    if x is None or isinstance(x, TokenAutomaton):
        return x
    if isinstance(x, dict):
        return grammar_from_dict(x)
    if isinstance(x, (str, os.PathLike)):
        return load_grammar(os.fspath(x))
    raise GrammarError(f"grammar must be a TokenAutomaton, a JSON object or a path, not "
                       f"{type(x).__name__}")


__all__ = ["EngineAutomaton", "MAX_ENGINE_VOCAB", "MAX_GRAMMAR_BYTES", "as_grammar",
           "grammar_from_dict", "llguidance_grammar", "load_grammar"]
