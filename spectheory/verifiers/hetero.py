"""Exact laws of speculative decoding with heterogeneous vocabularies: SLEM, SLRS and TLI.

Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding Algorithms for
Heterogeneous Vocabularies" (arXiv 2502.05202, ICML 2025) give three lossless schemes for a draft
and a target with different tokenizers. On a
[`HeteroInstance`][spectheory.inputs.tokenizers.HeteroInstance] (longest-match tokenizers over one
alphabet, prefix-dependent models over each vocabulary) this module enumerates, exactly (rationals
in exact mode, float64 otherwise), what one target forward emits from a target context ``c`` (a
tuple of target token ids), and from that the law of the first ``n_tokens`` emitted target tokens
over repeated iterations.

Every scheme emits **target tokens**, and the target is a law over target-token sequences, so the
verdict compares laws over exactly ``n_tokens`` target tokens (the iterations run until that many
are emitted; a block that overshoots is cut). Fixing the number of target tokens (not of
characters) is what makes the comparison consistent: a string such as ``"ab"`` emitted as one
target token ``[ab]`` and as two ``[a][b]`` are different outcomes of the target, and both sides are
measured on the same count. Equality of these token laws implies equality of the laws of the
emitted strings (their image under decoding), which the report also gives
([`HeteroLosslessReport`][spectheory.verifiers.hetero.HeteroLosslessReport] names the offending
token sequence and its string).

The draft's context at an iteration is the draft tokenization of the emitted string
(``encode_D(decode_T(c))``, "converted back to the drafter's tokenization", section 3); inside an
iteration the draft conditions on its own tokens.

* **SLEM** (string-level exact match, Algorithm 2): the draft samples ``draft_length`` tokens; their
  string is re-tokenized alone by the target tokenizer into ``t_1..t_m``; the target samples
  ``y_j ~ p(.|c, t_<j)`` at every position; the emitted block is ``t_1..t_{k-1}, y_k`` with ``k``
  the first mismatch (``y_{m+1}`` the bonus when all match). Choice: the new text is tokenized on its
  own, from the boundary after ``c``, so the target's context stays its own token sequence.
* **SLRS** (string-level rejection sampling, Algorithm 3): the draft samples tokens until the first
  target token of the string's target tokenization is settled for every continuation (the lookahead
  S1; [`first_token_settled`][spectheory.inputs.tokenizers.Tokenizer.first_token_settled]), proposes
  that token ``t``, whose law under the draft is ``psi(t)``; accept with ``min(1, p(t)/psi(t))``,
  else sample the residual ``max(p - psi, 0)`` normalised. One target token per target forward. The
  paper leaves the stopping rule S1 open; the smallest lookahead that settles the first target
  token is chosen (a draft string that ends inside a longer target token is never cut there).
* **TLI** (token-level intersection, Algorithm 4): the draft's row is restricted to the draft
  tokens whose string is also a target token and renormalised, ``q'``; ``draft_length`` tokens are
  drafted from ``q'`` and verified by standard speculative sampling against ``p`` over the whole
  target vocabulary: accept ``x`` with ``min(1, p(x)/q'(x))``, residual ``max(p - q', 0)`` over the
  target vocabulary (``q' = 0`` off the intersection). Choice: where the draft's row has no mass on
  the intersection, drafting stops and the target samples the next token.

[`vllm_tli_block`][spectheory.verifiers.hetero.vllm_tli_block] ports vLLM's rule as merged in vLLM
#38174 (`vllm/v1/spec_decode/vocab_mapping.py`): the draft is greedy over the intersection (the
masked argmax), its ids are mapped to target ids by normalised string, the draft's context is the
target tokens mapped back (an unknown-token id off the intersection), and the rejection sampler runs
with no draft probabilities (one-hot proposals: accept ``x`` with ``p(x)``, residual ``p`` with
``x`` removed). vLLM validates heterogeneous vocabularies with greedy drafting only
(`_sample_draft_tokens` in `vllm/v1/spec_decode/llm_base_proposer.py` asserts that no draft
probabilities come back), so that route is the one ported.

Block functions return ``{emitted target-token tuple: probability}`` for one target forward.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

from ..engine.lossless import check_tolerance
from ..inputs.tokenizers import (MAX_ENUMERATION, HeteroInstance, Tokenizer, check_hetero_instance,
                                 check_hetero_sizes)
from ..runtime.errors import (InputError, OptionError, SizeLimitError, UserCodeError, call_user,
                              is_integer)
from ..runtime.limits import shown as _repr_cut

SCHEMES = ("slem", "slrs", "tli")


def _zero(inst: HeteroInstance):
    return Fraction(0) if inst.exact else 0.0


def _row(model, prefix) -> list:
    return list(model.conditional(prefix))


def _draft_context(inst: HeteroInstance, c: tuple) -> tuple:
    return inst.draft_tokenizer.encode(inst.target_tokenizer.decode(c))


def _add(d: dict, key, value) -> None:
    if value:
        d[key] = d.get(key, 0) + value


# ----------------------------------------------------------------------------- proposals


def draft_paths(inst: HeteroInstance, dctx: tuple, length: int) -> dict:
    """Law of the draft's next ``length`` tokens after the draft context ``dctx``:
    ``{draft-token tuple: probability}`` (zero-probability paths left out)."""
    if inst.draft_tokenizer.size ** length > MAX_ENUMERATION:
        raise SizeLimitError(f"{inst.draft_tokenizer.size ** length:,} draft paths, over the "
                             f"limit of {MAX_ENUMERATION:,}")
    paths = {(): 1 if not inst.exact else Fraction(1)}
    for _ in range(length):
        nxt = {}
        for path, w in paths.items():
            q = _row(inst.draft, dctx + path)
            for d, qd in enumerate(q):
                if qd:
                    nxt[path + (d,)] = w * qd
        paths = nxt
    return paths


def slem_proposals(inst: HeteroInstance, c: tuple) -> dict:
    """SLEM's proposals from context ``c``: ``{target-token tuple t_1..t_m: probability}``, the
    draft's string re-tokenized alone by the target tokenizer."""
    out: dict = {}
    D, T = inst.draft_tokenizer, inst.target_tokenizer
    for path, w in draft_paths(inst, _draft_context(inst, c), inst.draft_length).items():
        _add(out, T.encode(D.decode(path)), w)
    return out


def slrs_psi(inst: HeteroInstance, c: tuple) -> dict:
    """SLRS's proposal law ``psi``: ``{target token: probability}`` that the first target token
    of the draft's string, drawn until that token is settled, is that token."""
    D, T = inst.draft_tokenizer, inst.target_tokenizer
    dctx = _draft_context(inst, c)
    psi: dict = {}
    stack = [((), "", 1 if not inst.exact else Fraction(1))]
    visited = 0
    while stack:
        path, text, w = stack.pop()
        if T.first_token_settled(text):
            _add(psi, T.encode(text)[0], w)
            continue
        visited += 1  # every draft token adds a character: the lookahead ends by the longest
        if visited > MAX_ENUMERATION:  # target token's length; the tree is still bounded here
            raise SizeLimitError(f"SLRS's lookahead visits over {MAX_ENUMERATION:,} draft "
                                 "prefixes; use shorter target tokens or fewer draft tokens")
        for d, qd in enumerate(_row(inst.draft, dctx + path)):
            if qd:
                stack.append((path + (d,), text + D.vocab[d], w * qd))
    return psi


# ----------------------------------------------------------------------------- verification


def exact_match_block(inst: HeteroInstance, c: tuple, proposals: dict) -> dict:
    """Exact-match verification of target-token proposals (SLEM's verifier): the target samples
    ``y_j ~ p(.|c, t_<j)``; emitted ``t_<k, y_k`` at the first mismatch ``k``, or all ``m`` proposed
    tokens and the bonus ``y_{m+1}``."""
    out: dict = {}
    rows: dict = {}  # proposals share prefixes: each target row is read once
    for t, w in proposals.items():
        for k in range(len(t) + 1):
            p = rows.get(t[:k])
            if p is None:
                p = rows[t[:k]] = _row(inst.target, c + t[:k])
            for y, py in enumerate(p):
                if k < len(t) and y == t[k]:
                    continue
                _add(out, t[:k] + (y,), w * py)
            if k == len(t):
                break
            w = w * p[t[k]]
            if not w:
                break
    return out


def rejection_block(p: list, psi: dict, zero) -> dict:
    """One-token rejection sampling of a proposal with law ``psi`` against ``p`` (SLRS's
    verifier): accept ``t`` with ``min(1, p(t)/psi(t))``, else sample ``max(p - psi, 0)``
    normalised. ``{(token,): probability}``."""
    out: dict = {}
    reject = zero
    for t, w in psi.items():
        a = 1 if p[t] >= w else p[t] / w  # min(1, p / psi) without overflow at a tiny psi
        _add(out, (t,), w * a)
        reject = reject + w * (1 - a)
    res = [max(py - psi.get(y, zero), zero) for y, py in enumerate(p)]
    z = sum(res, zero)  # = the rejected mass in exact arithmetic; where it is 0 the float
    if reject and z:    # reject is rounding noise (a row of 1 - 1e-17: 0/0 was NaN)
        for y, r in enumerate(res):
            _add(out, (y,), reject * r / z)
    return out


def slem_block(inst: HeteroInstance, c: tuple) -> dict:
    """SLEM: what one target forward emits from context ``c`` (module docstring)."""
    return exact_match_block(inst, c, slem_proposals(inst, c))


def slrs_block(inst: HeteroInstance, c: tuple) -> dict:
    """SLRS: what one target forward emits from context ``c`` (module docstring)."""
    return rejection_block(_row(inst.target, c), slrs_psi(inst, c), _zero(inst))


def intersection(inst: HeteroInstance) -> dict:
    """Draft token id -> target token id for the draft tokens whose string is a target token."""
    T = inst.target_tokenizer
    return {d: T.id_of(s) for d, s in enumerate(inst.draft_tokenizer.vocab)
            if T.id_of(s) is not None}


def tli_block(inst: HeteroInstance, c: tuple, *, residual_over: str = "target") -> dict:
    """TLI: what one target forward emits from context ``c`` (module docstring).

    ``residual_over="intersection"`` takes the residual over the intersection only: a wrong rule,
    kept as the planted bug the checker must catch; any other value than these two is refused
    (``"both"`` ran as ``"target"``)."""
    if not isinstance(residual_over, str) or residual_over not in ("target", "intersection"):
        raise OptionError(f"residual_over = {_repr_cut(residual_over, 40)} must be 'target' (the rule) or "
                          "'intersection' (the planted bug)")
    zero = _zero(inst)
    one = zero + 1
    inter = intersection(inst)
    images = set(inter.values())
    dctx = _draft_context(inst, c)
    out: dict = {}

    def step(i: int, dpath: tuple, tpath: tuple, w) -> None:
        p = _row(inst.target, c + tpath)
        qd = _row(inst.draft, dctx + dpath) if i < inst.draft_length else None
        mass = sum((qd[d] for d in inter), zero) if qd is not None else zero
        if not mass:  # block complete, or no draft mass on the intersection: the target samples
            for y, py in enumerate(p):
                _add(out, tpath + (y,), w * py)
            return
        qt = [zero] * len(p)
        for d, x in inter.items():
            qt[x] = qd[d] / mass
        reject = zero
        for d, x in inter.items():
            if not qt[x]:
                continue
            a = one if p[x] >= qt[x] else p[x] / qt[x]  # min(1, p / q), no overflow
            if a:
                step(i + 1, dpath + (d,), tpath + (x,), w * qt[x] * a)
            reject = reject + qt[x] * (1 - a)
        if reject:
            res = [max(py - qt[y], zero) for y, py in enumerate(p)]
            if residual_over == "intersection":
                res = [r if y in images else zero for y, r in enumerate(res)]
                if not sum(res, zero):
                    res = [py if y in images else zero for y, py in enumerate(p)]
            z = sum(res, zero)
            if not z:  # the rejected mass is rounding noise there (0/0 was NaN)
                return
            for y, r in enumerate(res):
                _add(out, tpath + (y,), w * reject * r / z)

    step(0, (), (), one)
    return out


# ----------------------------------------------------------------------------- vLLM #38174


def _normalize(token: str, prefixes: tuple) -> str:
    for pre in prefixes:
        if token.startswith(pre):
            return " " + token[len(pre):]
    return token


def vllm_vocab_mapping(target: Tokenizer, draft: Tokenizer,
                       space_prefixes: tuple = ("\u0120", "\u2581")) -> dict:
    """vLLM's `VocabMapping` (vLLM #38174, `vllm/v1/spec_decode/vocab_mapping.py`) on two toy
    tokenizers: tokens are matched by normalised string (a leading space marker read as a space;
    the first id of a normalised string wins); ``{draft id: target id}`` on the intersection."""
    for which, tok in (("target", target), ("draft", draft)):
        if not isinstance(tok, Tokenizer):
            raise InputError(f"vllm_vocab_mapping: the {which} is a {type(tok).__name__}, not a "
                             "Tokenizer (see make_tokenizer)")
    if isinstance(space_prefixes, str) or not isinstance(space_prefixes, tuple) or \
            not all(isinstance(x, str) for x in space_prefixes):
        raise InputError("vllm_vocab_mapping: space_prefixes must be a tuple of strings")
    tn: dict = {}
    for tid, s in enumerate(target.vocab):
        tn.setdefault(_normalize(s, space_prefixes), tid)
    dn: dict = {}
    for did, s in enumerate(draft.vocab):
        dn.setdefault(_normalize(s, space_prefixes), did)
    return {dn[s]: tn[s] for s in set(tn) & set(dn)}


def vllm_tli_block(inst: HeteroInstance, c: tuple, *, draft_unk: int = 0) -> dict:
    """vLLM's TLI as merged (vLLM #38174): what one target forward emits from context ``c``.

    Draft context: the target tokens mapped to draft ids, ``draft_unk`` off the intersection
    (``map_target_to_draft_ids``). Drafting: ``draft_length`` greedy tokens, the argmax (first
    index on ties, as ``torch.argmax``) of the draft row masked to the intersection
    (``constrain_draft_logits``), mapped to target ids. Verification: the rejection sampler with no
    draft probabilities (one-hot proposals): accept ``x_i`` with ``p(x_i)``, on rejection sample
    ``p`` with ``x_i`` removed, renormalised; all accepted: the bonus from ``p``."""
    zero = _zero(inst)
    d2t = vllm_vocab_mapping(inst.target_tokenizer, inst.draft_tokenizer)
    t2d = {t: d for d, t in d2t.items()}
    dctx = tuple(t2d.get(t, draft_unk) for t in c)
    dpath: tuple = ()
    xs: list = []
    for _ in range(inst.draft_length):
        q = _row(inst.draft, dctx + dpath)
        best = None
        for d in range(len(q)):
            if d in d2t and (best is None or q[d] > q[best]):
                best = d
        if best is None:
            break
        dpath += (best,)
        xs.append(d2t[best])
    out: dict = {}
    w = zero + 1
    for k in range(len(xs) + 1):
        p = _row(inst.target, c + tuple(xs[:k]))
        if k == len(xs):
            for y, py in enumerate(p):
                _add(out, tuple(xs) + (y,), w * py)
            break
        x = xs[k]
        if p[x] < 1:
            for y, py in enumerate(p):
                if y != x:
                    _add(out, tuple(xs[:k]) + (y,), w * (1 - p[x]) * py / (1 - p[x]))
        w = w * p[x]
        if not w:
            break
    return out


BLOCKS: dict = {"slem": slem_block, "slrs": slrs_block, "tli": tli_block,
                "vllm-tli": vllm_tli_block}


# ----------------------------------------------------------------------------- laws


def target_law(inst: HeteroInstance, n_tokens: int | None = None) -> dict:
    """The target's law of its first ``n_tokens`` target tokens: ``{token tuple: probability}``
    (zero-probability sequences left out)."""
    check_hetero_instance(inst, n_tokens)
    N = inst.n_tokens if n_tokens is None else n_tokens
    if inst.target_tokenizer.size ** N > MAX_ENUMERATION:
        raise SizeLimitError(f"{inst.target_tokenizer.size ** N:,} target sequences, over the "
                             f"limit of {MAX_ENUMERATION:,}")
    law = {(): _zero(inst) + 1}
    for _ in range(N):
        nxt = {}
        for s, w in law.items():
            for y, py in enumerate(_row(inst.target, s)):
                _add(nxt, s + (y,), w * py)
        law = nxt
    return law


def _block_fn(scheme) -> Callable:
    """The block function of a scheme name, or a user's block function guarded: called through
    `call_user` (what it raises or an exit is one line naming it) and its result checked
    (`_checked_block`)."""
    if callable(scheme):
        label = f"block function {getattr(scheme, '__name__', type(scheme).__name__)}"

        def block(inst, c):
            return _checked_block(call_user(scheme, inst, c, what=label), inst, c, label)
        return block
    if not isinstance(scheme, str) or scheme not in BLOCKS:
        raise InputError(f"unknown scheme {_repr_cut(scheme, 60)}: choose one of {', '.join(BLOCKS)} or "
                         "give a block function f(inst, c) -> {block: probability}")
    return BLOCKS[scheme]


def _checked_block(out, inst: HeteroInstance, c: tuple, label: str) -> dict:
    """A user block function's result ``out`` for context ``c`` as ``{tuple of target ids:
    probability}``, or a one-line `UserCodeError`: a dict whose keys are non-empty sequences of
    target token ids (integers in 0..V_T-1) and whose values are probabilities (exact: Fractions
    or integers; float mode: finite numbers), non-negative and summing to 1 (exactly in exact
    mode, within 1e-12 in float mode, the verdict's default tolerance)."""
    V = inst.target_tokenizer.size
    if not isinstance(out, dict):
        raise UserCodeError(f"{label} returned {type(out).__name__} after context {c}, not a dict "
                            "{block of target ids: probability}")
    fixed = {}
    for b, w in out.items():
        if isinstance(b, (str, bytes)) or not hasattr(b, "__len__") or len(b) == 0 or \
                len(b) > MAX_ENUMERATION or not all(is_integer(t) and 0 <= t < V for t in b):
            raise UserCodeError(f"{label} returned the block {_repr_cut(b, 60)} after context {c}: a "
                                f"block is a non-empty tuple of target ids in 0..{V - 1}")
        if is_integer(w):  # numpy's integers too
            w = int(w)
        elif not inst.exact and isinstance(w, numbers.Real) and \
                not isinstance(w, (bool, float, Fraction)):  # numpy's bool is no numbers.Real
            w = float(w)  # numpy floats (np.float32(1.0) was refused)
        ok = (isinstance(w, (Fraction, int)) and not isinstance(w, bool)) if inst.exact else \
            (isinstance(w, (int, float, Fraction)) and not isinstance(w, bool)
             and math.isfinite(w))
        if not ok or w < 0:
            kind = "an exact probability (Fraction)" if inst.exact else "a finite probability"
            raise UserCodeError(f"{label} returned {_repr_cut(w, 40)} for the block {tuple(b)} after "
                                f"context {c}: each value must be {kind} >= 0")
        key = tuple(int(t) for t in b)
        fixed[key] = fixed.get(key, 0) + w
    total = sum(fixed.values(), _zero(inst))
    if (total != 1) if inst.exact else not abs(total - 1) <= 1e-12:  # the verdict's default
        raise UserCodeError(f"{label} returned probabilities summing to {float(total):.12g} "
                            f"after context {c}, not 1")
    return fixed


def _context(inst: HeteroInstance, c) -> tuple:
    """A target context ``c``: a tuple of target token ids in range (one-line `InputError`)."""
    V = inst.target_tokenizer.size
    if isinstance(c, (str, bytes)) or not isinstance(c, (tuple, list)) or \
            len(c) > MAX_ENUMERATION or not all(is_integer(t) and 0 <= t < V for t in c):
        raise InputError(f"the context c = {_repr_cut(c, 60)} must be a tuple of target token ids in "
                         f"0..{V - 1}")
    return tuple(int(t) for t in c)


def emitted_law(inst: HeteroInstance, scheme, n_tokens: int | None = None,
                with_forwards: bool = False):
    """Law of the first ``n_tokens`` target tokens emitted by repeated iterations of ``scheme``
    (a name in `BLOCKS` or a block function ``f(inst, c) -> {block: probability}``).

    With ``with_forwards``, returns ``(law, forwards)``: ``forwards`` is the expected number of
    target forwards (iterations) until ``n_tokens`` target tokens are emitted."""
    check_hetero_instance(inst, n_tokens)
    block = _block_fn(scheme)
    N = inst.n_tokens if n_tokens is None else n_tokens
    frontier = {(): _zero(inst) + 1}
    done: dict = {}
    cache: dict = {}
    forwards = _zero(inst)
    while frontier:
        nxt: dict = {}
        for c, w in frontier.items():
            forwards = forwards + w
            if c not in cache:
                cache[c] = block(inst, c)
            for b, pb in cache[c].items():
                if not b:
                    raise InputError(f"a block function emitted nothing after context {c}")
                s = c + tuple(b)
                if len(s) >= N:
                    _add(done, s[:N], w * pb)
                else:
                    _add(nxt, s, w * pb)
        frontier = nxt
    return (done, forwards) if with_forwards else done


@dataclass
class HeteroLosslessReport:
    """Verdict of [`check_hetero_lossless`][spectheory.verifiers.hetero.check_hetero_lossless].

    ``lossless`` iff the emitted law of ``n_tokens`` target tokens equals the target's (exactly in
    exact mode; total variation at most ``tolerance`` in float mode). Otherwise ``offending`` is the
    first token sequence (lexicographic) whose probabilities differ by more than the tolerance,
    ``offending_string`` its string, with both probabilities. ``tokens_per_forward`` and
    ``chars_per_forward`` are the expected target tokens and characters one target forward emits
    from the empty context; ``forwards`` the expected number of target forwards until
    ``n_tokens`` target tokens are emitted (``n_tokens`` for the target alone)."""

    scheme: str
    lossless: bool
    tv: Any
    n_tokens: int
    exact: bool
    tolerance: float
    tokens_per_forward: Any
    chars_per_forward: Any
    forwards: Any = None
    offending: tuple | None = None
    offending_string: str | None = None
    output_probability: Any = None
    target_probability: Any = None
    extra: dict = field(default_factory=dict)

    def __str__(self) -> str:
        if self.lossless:
            how = "exactly" if self.exact else f"within {self.tolerance:g}"
            return (f"{self.scheme}: lossless {how} over {self.n_tokens} target tokens; "
                    f"{_fmt(self.tokens_per_forward)} target tokens and "
                    f"{_fmt(self.chars_per_forward)} characters per target forward; "
                    f"{_fmt(self.forwards)} target forwards for {self.n_tokens} target tokens")
        return (f"{self.scheme}: LOSSY over {self.n_tokens} target tokens: TV = "
                f"{float(self.tv):.6g}; first offending string {self.offending_string!r} "
                f"(target tokens {self.offending}): output probability "
                f"{self.output_probability} vs target probability {self.target_probability}")


def _fmt(x) -> str:
    return f"{x} (= {float(x):.6g})" if isinstance(x, Fraction) else f"{float(x):.6g}"


def acceptance(inst: HeteroInstance, scheme, c: tuple = ()) -> tuple:
    """Expected target tokens and characters emitted by one target forward from context ``c``."""
    check_hetero_instance(inst)
    c = _context(inst, c)
    block = _block_fn(scheme)(inst, c)
    T = inst.target_tokenizer
    z = _zero(inst)
    toks = sum((w * len(b) for b, w in block.items()), z)
    chars = sum((w * len(T.decode(b)) for b, w in block.items()), z)
    return toks, chars


def check_hetero_lossless(inst: HeteroInstance, scheme, *, exact: bool | None = None,
                          tol: float = 1e-12, n_tokens: int | None = None,
                          name: str | None = None) -> HeteroLosslessReport:
    """Exact verdict on whether ``scheme`` (a name in `BLOCKS` or a block function) emits the
    target's law over ``n_tokens`` target tokens (default the instance's), with acceptance."""
    check_hetero_instance(inst, n_tokens)
    if exact is None:
        exact = inst.exact
    if not isinstance(exact, bool):
        raise InputError(f"exact must be True or False, got {exact!r}")
    tol = check_tolerance(tol)  # refused even where exact mode does not use it
    inst = inst.to_exact() if exact else inst.to_float()
    if exact:
        tol = 0.0
    N = inst.n_tokens if n_tokens is None else n_tokens
    check_hetero_sizes(inst.target_tokenizer.size, inst.draft_tokenizer.size, inst.draft_length, N)
    out, forwards = emitted_law(inst, scheme, N, with_forwards=True)
    tgt = target_law(inst, N)
    z = _zero(inst)
    keys = sorted(set(out) | set(tgt))
    tv = sum((abs(out.get(k, z) - tgt.get(k, z)) for k in keys), z) / 2
    toks, chars = acceptance(inst, scheme)
    label = name or (scheme if isinstance(scheme, str) else getattr(scheme, "__name__", "scheme"))
    rep = HeteroLosslessReport(label, bool(tv <= tol) if not exact else tv == 0, tv, N, exact,
                               tol, toks, chars, forwards)
    if not rep.lossless:
        bad = [k for k in keys if abs(out.get(k, z) - tgt.get(k, z)) > tol]
        k = bad[0] if bad else max(keys, key=lambda s: abs(out.get(s, z) - tgt.get(s, z)))
        rep.offending = k
        rep.offending_string = inst.target_tokenizer.decode(k)
        rep.output_probability = out.get(k, z)
        rep.target_probability = tgt.get(k, z)
    return rep


def first_token_acceptance(inst: HeteroInstance, c: tuple = ()) -> dict:
    """Probability that the first proposed target token is accepted, per scheme, from context
    ``c``: SLEM sum_t p(t) P(t_1 = t); SLRS sum_t min(p(t), psi(t)); TLI
    sum_{t in I} min(p(t), q'(t)). Measured numbers (exact in exact mode), not a paper claim."""
    check_hetero_instance(inst)
    c = _context(inst, c)
    p = list(inst.target.conditional(c))
    z = _zero(inst)
    first: dict = {}
    for t, w in slem_proposals(inst, c).items():
        first[t[0]] = first.get(t[0], z) + w
    slem = sum((p[t] * w for t, w in first.items()), z)
    slrs = sum((min(p[t], w) for t, w in slrs_psi(inst, c).items()), z)
    inter = intersection(inst)
    q = _row(inst.draft, _draft_context(inst, c))
    mass = sum((q[d] for d in inter), z)
    tli = sum((min(p[x], q[d] / mass) for d, x in inter.items()), z) if mass else z
    return {"slem": slem, "slrs": slrs, "tli": tli}


def string_law(inst: HeteroInstance, token_law: dict) -> dict:
    """Image of a law over target-token sequences under decoding: ``{string: probability}``."""
    if not isinstance(token_law, Mapping):
        raise InputError(f"string_law: token_law must be a dict {{target tokens: probability}}, "
                         f"not {type(token_law).__name__}")
    out: dict = {}
    for s, w in token_law.items():
        _add(out, inst.target_tokenizer.decode(s), w)
    return out


__all__ = ["BLOCKS", "HeteroLosslessReport", "SCHEMES", "acceptance", "check_hetero_lossless",
           "draft_paths", "first_token_acceptance", "emitted_law", "exact_match_block", "intersection", "rejection_block",
           "slem_block", "slem_proposals", "slrs_block", "slrs_psi", "string_law", "target_law",
           "tli_block", "vllm_tli_block", "vllm_vocab_mapping"]
