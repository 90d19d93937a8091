"""Grammar-constrained speculative decoding, exactly: the locally masked law, the
grammar-conditional law, the future-validity statistic and the Doob-transformed target.

Nie et al., *Future Validity is the Missing Statistic: From Impossibility to Phi-Estimation for
Grammar-Faithful Speculative Decoding* (arXiv 2605.07698, "FVO-Spec"; its abstract is what was
reachable here, the definitions below follow it and state every choice). Letters: p the target,
q the draft, a grammar a [`TokenAutomaton`][spectheory.inputs.stateful.TokenAutomaton] g, a
horizon of N tokens, sequences x = (x_1, ..., x_N) in V^N.

**Allowed.** Token a is *allowed after* s when g's mask at the state s reaches allows it (the
mask `spectheory.inputs.stateful.mask` computes; after the grammar's stop token every token is
allowed, as engines end a generation there). x is allowed when every x_i is allowed after x_<i.

**Valid** (the choice made here): x is valid when it is allowed *and* the generation ends
within the horizon: the grammar's stop token ``g.eos`` occurs among x_1..x_N (it is allowed only
after a complete word, so the text before it is a word of the grammar; the tokens after it are
free and weighted by p). ``complete=False`` drops the second condition (prefix validity: every
token allowed, the word may stay open at N). A grammar without a stop token has only prefix
validity.

**The laws** (both over V^N):

    mu_proj(x) = prod_i p(x_i | x_<i) 1[x_i allowed after x_<i] / Z(x_<i),
                 Z(s) = sum_{a allowed after s} p(a | s)

(local masking: what an engine with local mask access, Leviathan rejection and sound rollback
samples; computed through `spectheory.inputs.processing.process_instance` with
``SamplingParams(grammar=g)``, the one implementation of grammar masks), and the
grammar-conditional law

    mu*(x) = p(x) 1[x valid] / Phi(()),

with the **future validity** of a prefix s of length k <= N

    Phi(s) = P_p(x valid | x_<=k = s) = sum_{y: s y in V^N} p(y | s) 1[s y valid],

so Phi(s) = sum_a p(a | s) Phi(s a), and mu*'s conditionals are the Doob transform of p with
h = Phi:

    mu*(a | s) = p(a | s) Phi(s a) / Phi(s)      (Phi(s) > 0).

Local masking is the same transform with h(s a) = 1[a allowed after s] (h = 1 on the allowed
tokens). [`doob_instance`][spectheory.inputs.grammar_laws.doob_instance] builds the target of any
h; with the exact Phi
([`grammar_conditional_instance`][spectheory.inputs.grammar_laws.grammar_conditional_instance])
every lossless verifier run against it samples mu* (FVO-Spec's rule: verification against the
Phi-reweighted target); with an estimate
([`lookahead_validity`][spectheory.inputs.grammar_laws.lookahead_validity]: Phi over a horizon
of k more tokens; k = 0 is local masking, k >= N the exact Phi) it samples the estimate's law,
whose TV to mu* is bounded by
[`chain_tv_bound`][spectheory.inputs.grammar_laws.chain_tv_bound].

Numbers: exact rationals (`fractions.Fraction`, numpy object arrays) when the instance is exact,
float64 otherwise. Laws are 1-D arrays over V^N in lexicographic order (first token most
significant), as the exact engine's laws. The enumeration is guarded: V^N at most
`MAX_SEQUENCES`.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..runtime.errors import OptionError, SizeLimitError
from .instances import Instance, check_instance
from .models import TableModel
from .stateful import GrammarError, TokenAutomaton, grammar_mask
from ..runtime.limits import shown as _repr_cut

#: Most sequences V^N a law here enumerates.
MAX_SEQUENCES = 2_000_000


# ----------------------------------------------------------------------------- checks


#: How far a float64 phi may stray outside [0, 1] by rounding (sums of products of float64
#: probabilities come out as 1.0000000000000004).
PHI_FLOAT_TOL = 1e-9


def _horizon(V: int, N) -> None:
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 1:
        raise OptionError(f"horizon N = {N!r} must be an integer >= 1")
    if N > 64 or V ** int(N) > MAX_SEQUENCES:  # 64: V >= 2 passes the limit long before
        raise SizeLimitError(f"V^N = {V}^{N} sequences, over the limit of {MAX_SEQUENCES:,}; "
                             f"use a shorter horizon or a smaller vocabulary")


def _check(inst, grammar, N, complete: bool = True, exact=None) -> None:
    if not isinstance(complete, bool):
        raise OptionError(f"complete must be True or False, got {_repr_cut(complete, 40)}")
    if exact is not None and not isinstance(exact, bool):
        raise OptionError(f"exact must be True, False or None, got {_repr_cut(exact, 40)}")
    if not isinstance(inst, Instance):
        raise OptionError(f"expected a spectheory Instance, got {type(inst).__name__}")
    check_instance(inst)
    if not isinstance(grammar, TokenAutomaton):
        raise OptionError(f"grammar must be a TokenAutomaton, not {type(grammar).__name__}")
    if grammar.vocab_size != inst.vocab_size:
        raise GrammarError(f"{grammar.name}: it has {grammar.vocab_size} tokens, the instance "
                           f"{inst.vocab_size}")
    _horizon(inst.vocab_size, N)
    if complete and grammar.eos is None:
        raise GrammarError(f"{grammar.name}: complete validity needs a stop token (eos); give "
                           f"one, or use complete=False (prefix validity)")


def _zero(exact: bool):
    return Fraction(0) if exact else 0.0


def _one(exact: bool):
    return Fraction(1) if exact else 1.0


# ----------------------------------------------------------------------------- validity


def validity_levels(grammar: TokenAutomaton, V: int, N: int):
    """For every prefix s of length d = 0..N (lexicographic order): ``allowed[d]`` [V^d] (every
    token of s allowed in turn), ``ended[d]`` [V^d] (allowed and the stop token among them) and
    ``mask[d]`` [V^d, V] (the tokens allowed after s, as `spectheory.inputs.stateful.mask`
    gives them: every token after the stop token or after a rejected prefix)."""
    if not isinstance(grammar, TokenAutomaton):
        raise OptionError(f"grammar must be a TokenAutomaton, not {type(grammar).__name__}")
    if isinstance(V, bool) or not isinstance(V, (int, np.integer)) or V != grammar.vocab_size:
        raise GrammarError(f"{grammar.name}: it has {grammar.vocab_size} tokens, V = {V!r}")
    _horizon(V, N)  # V^N is allocated below: bounded first
    states = np.zeros(1, dtype=np.int64)
    allowed, ended, masks = [np.ones(1, bool)], [np.zeros(1, bool)], []
    eos = grammar.eos
    for d in range(N + 1):
        m = grammar_mask(grammar, None, len(states), states)  # [V^d, V]
        masks.append(m)
        if d == N:
            break
        ok = (allowed[d][:, None] & m).reshape(-1)
        tok = np.tile(np.arange(V), len(states))
        stop = np.zeros_like(ok) if eos is None else (tok == eos)
        ended.append(ok & (np.repeat(ended[d], V) | stop))
        allowed.append(ok)
        states = grammar.step(np.repeat(states, V), tok)
    return allowed, ended, masks


def _target_levels(inst: Instance, N: int, exact: bool):
    out = []
    for d in range(N):
        lv = np.asarray(inst.target.level(d))
        out.append(lv.astype(object) if exact else lv.astype(np.float64))
    return out


def _as(inst, exact):
    return inst.to_exact() if exact else inst.to_float()


def future_validity(inst: Instance, grammar: TokenAutomaton, N: int, complete: bool = True,
                    exact: bool | None = None) -> list:
    """Phi per prefix: ``phi[d]`` [V^d] for d = 0..N, Phi(s) = P_p(a continuation of s to N
    tokens is valid | s) (module docstring), by the backward recursion Phi(s) = sum_a p(a | s)
    Phi(s a) from Phi = 1[valid] at depth N. Fractions when ``exact`` (default: as the
    instance), else float64."""
    _check(inst, grammar, N, complete, exact)
    exact = inst.exact if exact is None else bool(exact)
    inst = _as(inst, exact)
    V = inst.vocab_size
    allowed, ended, _ = validity_levels(grammar, V, N)
    p = _target_levels(inst, N, exact)
    last = ended[N] if complete else allowed[N]
    phi = [None] * (N + 1)
    phi[N] = np.where(last, _one(exact), _zero(exact)).astype(object if exact else np.float64)
    for d in range(N - 1, -1, -1):
        phi[d] = (p[d] * phi[d + 1].reshape(-1, V)).sum(axis=1)
    return phi


def lookahead_validity(inst: Instance, grammar: TokenAutomaton, N: int, k: int,
                       complete: bool = True, exact: bool | None = None) -> list:
    """An estimate of Phi by a shorter horizon. For k >= 1, Phi_k(s), s of length d, is the
    probability under p that s and the next min(k, N - d) tokens after it are allowed, and, when
    d + k >= N, that the continuation to N tokens is valid (so Phi_k = Phi once d + k >= N, and
    k >= N gives the exact Phi). Phi_0(s) = 1[s allowed] looks at nothing past s: its Doob
    transform is local masking (mu_proj). ``phi[d]`` [V^d] for d = 0..N."""
    _check(inst, grammar, N, complete, exact)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise OptionError(f"lookahead k = {k!r} must be an integer >= 0")
    exact = inst.exact if exact is None else bool(exact)
    inst = _as(inst, exact)
    V = inst.vocab_size
    allowed, ended, _ = validity_levels(grammar, V, N)
    p = _target_levels(inst, N, exact)
    dt = object if exact else np.float64
    out = []
    for d in range(N + 1):
        m = min(d + int(k), N)
        last = ended[N] if (m == N and complete and k > 0) else allowed[m]
        h = np.where(last, _one(exact), _zero(exact)).astype(dt)
        for j in range(m - 1, d - 1, -1):
            h = (p[j] * h.reshape(-1, V)).sum(axis=1)
        out.append(h)
    return out


# ----------------------------------------------------------------------------- laws


def _path_law(levels, V: int, N: int, exact: bool) -> np.ndarray:
    law = np.array([_one(exact)], dtype=object if exact else np.float64)
    for d in range(N):
        law = (law[:, None] * levels[d]).reshape(-1)
    return law


def masked_law(inst: Instance, grammar: TokenAutomaton, N: int,
               exact: bool | None = None) -> np.ndarray:
    """mu_proj over V^N [V^N]: the target's rows masked by the grammar at each prefix and
    renormalised (`process_instance` with ``SamplingParams(grammar=grammar)``), chained. A
    reachable prefix whose allowed tokens all have probability 0 is refused in one line
    (`GrammarError`)."""
    from .processing import SamplingParams, process_instance

    _check(inst, grammar, N, complete=False, exact=exact)
    exact = inst.exact if exact is None else bool(exact)
    proc = process_instance(inst, SamplingParams(grammar=grammar), None, exact=exact)
    return _path_law(_target_levels(proc, N, exact), inst.vocab_size, N, exact)


def grammar_conditional_law(inst: Instance, grammar: TokenAutomaton, N: int,
                            complete: bool = True, exact: bool | None = None) -> np.ndarray:
    """mu* over V^N [V^N]: p(x) 1[x valid] / Phi(()). Refused in one line when no sequence of
    positive probability is valid (Phi(()) = 0)."""
    _check(inst, grammar, N, complete, exact)
    exact = inst.exact if exact is None else bool(exact)
    inst = _as(inst, exact)
    V = inst.vocab_size
    allowed, ended, _ = validity_levels(grammar, V, N)
    valid = ended[N] if complete else allowed[N]
    p = _path_law(_target_levels(inst, N, exact), V, N, exact)
    w = np.where(valid, p, _zero(exact)).astype(p.dtype)
    z = w.sum()
    if z == 0:
        raise GrammarError(f"{grammar.name}: no sequence of positive target probability is "
                           f"valid within N = {N} tokens; the grammar-conditional law is "
                           f"undefined")
    return w / z


def total_variation(a: np.ndarray, b: np.ndarray):
    """TV = sum |a - b| / 2 of two laws over the same sequences (exact for Fractions). Each
    must be a law: finite non-negative numbers summing to 1 (Fractions and integers exactly,
    floats within `PHI_FLOAT_TOL`), else one line (a TV above 1 from two non-laws read as
    a distance)."""
    try:
        a, b = np.asarray(a), np.asarray(b)
    except ValueError:  # ragged lists: numpy's own "inhomogeneous shape" error
        raise OptionError("laws must be flat lists or arrays of numbers (one a sequence), "
                          "not ragged nested lists") from None
    if a.shape != b.shape:
        raise OptionError(f"laws over {a.shape} and {b.shape} sequences")
    for name, x in (("a", a), ("b", b)):
        if x.dtype.kind not in "iufO" or (x.dtype.kind == "f" and not np.isfinite(x).all()):
            raise OptionError(f"laws must hold finite numbers, not {x.dtype} (or NaN/inf)")
        flat = x.reshape(-1)
        if x.dtype.kind == "O" and not all(
                isinstance(v, (int, float, Fraction, np.integer, np.floating))
                and not isinstance(v, (bool, np.bool_)) and v == v and abs(v) != float("inf")
                for v in flat):
            raise OptionError(f"law {name} must hold finite numbers (Fractions, integers or "
                              "floats)")
        if flat.size and (flat < 0).any():
            raise OptionError(f"law {name} has a negative entry ({str(flat[flat < 0][0]):.40}); a "
                              "law's probabilities are non-negative")
        total = flat.sum()
        exact = all(not isinstance(v, (float, np.floating)) for v in flat)
        if (total != 1) if exact else abs(float(total) - 1) > PHI_FLOAT_TOL:
            raise OptionError(f"law {name} sums to {str(total):.40}, not 1")
    if a.dtype.kind in "iu" or b.dtype.kind in "iu":  # a - b wraps around in unsigned integers
        a, b = a.astype(object), b.astype(object)  # exact: a law of integers is a point mass
    return abs(a - b).sum() / 2


def masking_tv(inst: Instance, grammar: TokenAutomaton, N: int, complete: bool = True,
               exact: bool | None = None):
    """TV(mu_proj, mu*) over N tokens."""
    return total_variation(masked_law(inst, grammar, N, exact),
                           grammar_conditional_law(inst, grammar, N, complete, exact))


# ----------------------------------------------------------------------------- Doob targets


def _check_phi(inst, phi, N) -> None:
    """phi: N + 1 levels [V^d] of numbers in [0, 1] (Phi and its estimates are probabilities);
    a NaN, infinity, negative or non-number would come back as rows that are not
    distributions."""
    if not isinstance(inst, Instance):
        raise OptionError(f"expected a spectheory Instance, got {type(inst).__name__}")
    V = inst.vocab_size
    _horizon(V, N)
    if not isinstance(phi, (list, tuple)) or len(phi) != N + 1:
        raise OptionError(f"phi must be a list of N + 1 = {N + 1} levels of shapes [V^d]")
    for d in range(N + 1):
        a = np.asarray(phi[d])
        if a.shape != (V ** d,):
            raise OptionError(f"phi must hold N + 1 = {N + 1} levels of shapes [V^d]; level {d} "
                              f"has shape {list(a.shape)}")
        for v in a.reshape(-1):
            # floats may sit a rounding error outside [0, 1] (a sum of products of float64
            # probabilities); rationals may not
            tol = PHI_FLOAT_TOL if isinstance(v, (float, np.floating)) else 0
            if isinstance(v, (bool, np.bool_)) or not isinstance(
                    v, (int, float, Fraction, np.integer, np.floating)) or \
                    not -tol <= v <= 1 + tol:
                raise OptionError(f"phi[{d}] holds {_repr_cut(v, 40)}; phi values are probabilities "
                                  f"in [0, 1]")


def _check_root(inst: Instance, phi: list, exact: bool) -> None:
    """The empty prefix is always reached: its transformed row must exist."""
    root = _target_levels(inst, 1, exact)[0][0] * np.asarray(phi[1]).reshape(-1)
    if not (root.sum() > 0):
        raise OptionError("phi is 0 on every token of positive target probability after the "
                          "empty prefix: the transformed law is undefined (no sequence is "
                          "valid)")


def _doob_levels(inst: Instance, phi: list, N: int, exact: bool):
    """Rows p(a | s) phi(s a) / sum_b p(b | s) phi(s b) at depths 0..N-1; p's own row where the
    sum is 0: under the exact Phi a prefix the transformed law never reaches, under an estimate
    (`lookahead_validity`) a dead end it reaches, where this convention keeps the law defined. The
    empty prefix is always reached: a sum of 0 there is refused (`_check_root`)."""
    V = inst.vocab_size
    _check_root(inst, phi, exact)
    rows = []
    for d, p in enumerate(_target_levels(inst, N, exact)):
        w = p * np.asarray(phi[d + 1]).reshape(-1, V)
        z = w.sum(axis=1)
        dead = np.asarray(z == 0, dtype=bool)
        safe = np.where(dead, _one(exact), z).astype(w.dtype)
        r = w / safe[:, None]
        r[dead] = p[dead]
        rows.append(np.ascontiguousarray(r))
    return rows


def doob_instance(inst: Instance, phi: list, N: int) -> Instance:
    """The instance whose target rows at depths 0..N-1 are the Doob transform of p by ``phi``
    (``phi[d]`` [V^d] for d = 0..N, e.g. `future_validity` or `lookahead_validity`):
    p(a | s) phi(s a) / sum_b p(b | s) phi(s b); the draft rows as given. N >= L + 1 so that one
    block reads transformed rows only (deeper levels are absent)."""
    if not isinstance(inst, Instance):
        raise OptionError(f"expected a spectheory Instance, got {type(inst).__name__}")
    L = inst.block_length
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < L + 1:
        raise OptionError(f"horizon N = {N!r} must be an integer >= L + 1 = {L + 1} (one block "
                          f"reads the target rows at depths 0..L)")
    V = inst.vocab_size
    _check_phi(inst, phi, N)
    exact = inst.exact
    tables = tuple(_doob_levels(inst, phi, N, exact))
    return Instance(V, L, TableModel(V, tables), inst.draft)


def grammar_conditional_instance(inst: Instance, grammar: TokenAutomaton, N: int,
                                 complete: bool = True) -> Instance:
    """The instance whose target rows are mu*'s conditionals mu*(a | s) = p(a | s) Phi(s a) /
    Phi(s) up to depth N - 1 (draft rows as given): any lossless verifier run against it, with
    the draft masked by the grammar (``draft_sampling=SamplingParams(grammar=g)``), is
    FVO-Spec's rule given exact Phi, and samples mu* over its block (N >= L + 1)."""
    return doob_instance(inst, future_validity(inst, grammar, N, complete), N)


def doob_law(inst: Instance, phi: list, N: int) -> np.ndarray:
    """The law over V^N [V^N] of sampling token by token from the Doob transform of p by
    ``phi`` (what a lossless verifier against `doob_instance` samples)."""
    _check_phi(inst, phi, N)
    exact = inst.exact
    return _path_law(_doob_levels(inst, phi, N, exact), inst.vocab_size, N, exact)


def chain_tv_bound(inst: Instance, grammar: TokenAutomaton, N: int, phi: list,
                   complete: bool = True):
    """A bound on TV(law of the Doob transform by ``phi``, mu*): the sum over depths d < N of
    E_{s ~ mu*}[TV(r(. | s), mu*(. | s))], r the transformed rows (coupling the two chains
    token by token: they part at depth d with probability at most that expectation). Equal to
    0 when ``phi`` is the exact Phi. A spectheory bound (the paper's own bound on approximate
    Phi was not reachable here)."""
    _check(inst, grammar, N, complete)
    _check_phi(inst, phi, N)
    exact = inst.exact
    V = inst.vocab_size
    star = _doob_levels(inst, future_validity(inst, grammar, N, complete), N, exact)
    r = _doob_levels(inst, phi, N, exact)
    mass = np.array([_one(exact)], dtype=object if exact else np.float64)
    total = _zero(exact)
    for d in range(N):
        total = total + (mass * abs(star[d] - r[d]).sum(axis=1) / 2).sum()
        mass = (mass[:, None] * star[d]).reshape(-1)
    return total


# ----------------------------------------------------------------------------- grammars


def _table(rows, V: int, name: str, eos: int | None) -> TokenAutomaton:
    return TokenAutomaton([[(-1 if v is None else v) for v in r] for r in rows],
                          vocab_size=V, name=name, _eos=eos)


def dyck1(depth: int | None = None, max_depth_states: int = 64) -> TokenAutomaton:
    """Dyck-1 over the tokens 0 ``(``, 1 ``)``, 2 eos: balanced words (the empty word too),
    nesting at most ``depth`` (None: up to ``max_depth_states``, more than any horizon here
    reaches); eos allowed exactly at depth 0, then every token (an absorbing end state).
    States: depth 0..D, then the end state D + 1."""
    D = max_depth_states if depth is None else depth
    name = "max_depth_states" if depth is None else "depth"
    if isinstance(D, bool) or not isinstance(D, (int, np.integer)) or not 0 <= D <= 10_000:
        raise OptionError(f"{name} {_repr_cut(D, 40)} must be an integer in 0..10000")
    D = int(D)
    end = D + 1
    rows = []
    for k in range(D + 1):
        rows.append([k + 1 if k < D else None, k - 1 if k > 0 else None, end if k == 0 else None])
    rows.append([end, end, end])
    return _table(rows, 3, "dyck1" if depth is None else f"dyck1(depth={D})", 2)


def dyck2(depth: int = 3) -> TokenAutomaton:
    """Dyck-2 over the tokens 0 ``(``, 1 ``)``, 2 ``[``, 3 ``]``, 4 eos, nesting at most
    ``depth``: the states are the open stacks (tuples of bracket kinds), then an end state."""
    D = depth
    if isinstance(D, bool) or not isinstance(D, (int, np.integer)) or not 0 <= D <= 12:
        raise OptionError(f"depth {_repr_cut(depth, 40)} must be an integer in 0..12")
    D = int(D)
    stacks = [()]
    for k in range(D):
        stacks += [s + (b,) for s in stacks if len(s) == k for b in (0, 1)]
    ids = {s: i for i, s in enumerate(stacks)}
    end = len(stacks)
    rows = []
    for s in stacks:
        row = [None] * 5
        for b, (open_, close) in enumerate(((0, 1), (2, 3))):
            if len(s) < D:
                row[open_] = ids[s + (b,)]
            if s and s[-1] == b:
                row[close] = ids[s[:-1]]
        if not s:
            row[4] = end
        rows.append(row)
    rows.append([end] * 5)
    return _table(rows, 5, f"dyck2(depth={D})", 4)


#: The tokens of the JSON-like grammar, by id.
JSON_TOKENS = ("{", "}", '"k"', ":", "1", ",", "<eos>")


def json_like() -> TokenAutomaton:
    """A finite JSON-like grammar over `JSON_TOKENS` (``{`` ``}`` ``"k"`` ``:`` ``1`` ``,``
    eos): one object of at most two members, each ``"k":1`` or ``"k":{}``, e.g. ``{}``,
    ``{"k":1}``, ``{"k":{},"k":1}``; eos after the closing brace."""
    return TokenAutomaton.from_regex(r'\{("k":(1|\{\})(,"k":(1|\{\}))?)?\}', list(JSON_TOKENS),
                                     name="json-like", eos=6)


__all__ = ["JSON_TOKENS", "MAX_SEQUENCES", "chain_tv_bound", "doob_instance", "doob_law",
           "dyck1", "dyck2", "future_validity", "grammar_conditional_instance",
           "grammar_conditional_law", "json_like", "lookahead_validity", "masked_law",
           "masking_tv", "total_variation", "validity_levels"]
