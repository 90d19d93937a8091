"""Stateful sampling parameters (penalties, min_tokens, no-repeat n-grams, logit bias, grammar
masks): the processing against a brute-force reference written separately here, one prefix at a
time in plain Python (math.exp, lists, dicts), and the exact engine's laws under them.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from fractions import Fraction

import numpy as np
import pytest

import spectheory as st
from spectheory.inputs.processing import (SamplingError, SamplingParams, parse_sampling,
                                          process_instance, process_rows)
from spectheory.inputs.stateful import GrammarError, TokenAutomaton, kit_logits

# ----------------------------------------------------------------------------- the reference


def ref_logits(p):
    """The kit's logits, by the written formula: log p - (max + min finite log p) / 2."""
    finite = [math.log(v) for v in p if v > 0]
    shift = (max(finite) + min(finite)) / 2
    return [math.log(v) - shift if v > 0 else -math.inf for v in p]


def ref_allowed(history, V, *, grammar=None, no_repeat=0, min_tokens=0, stops=(), banned=()):
    ok = [True] * V
    if grammar is not None:  # a table automaton: walk it
        state = 0
        for t in history:
            if state < 0:
                break
            state = grammar[state][t] if grammar[state][t] is not None else -1
        if state >= 0:
            ok = [ok[t] and grammar[state][t] is not None for t in range(V)]
    if no_repeat:
        n = no_repeat
        grams = set(tuple(history[k:k + n]) for k in range(len(history) - n + 1))
        key = tuple(history[len(history) - n + 1:]) if n > 1 else ()
        if len(history) >= n - 1:
            ok = [ok[t] and (key + (t,)) not in grams for t in range(V)]
    if len(history) < min_tokens:
        ok = [ok[t] and t not in stops for t in range(V)]
    return [ok[t] and t not in banned for t in range(V)]


def ref_process(p, history, *, rep=1.0, pres=0.0, freq=0.0, bias=None, **masks):
    """vLLM's order: masks, bias, repetition, frequency, presence; then softmax."""
    V = len(p)
    lg = ref_logits(p)
    ok = ref_allowed(history, V, **masks)
    lg = [lg[t] if ok[t] else -math.inf for t in range(V)]
    for t, b in (bias or {}).items():
        lg[t] += b
    cnt = {t: history.count(t) for t in range(V)}
    out = []
    for t in range(V):
        x = lg[t]
        if cnt[t] and math.isfinite(x):
            x = x / rep if x > 0 else x * rep
        x = x - freq * cnt[t] - pres * (cnt[t] > 0)
        out.append(x)
    top = max(out)
    w = [math.exp(x - top) if math.isfinite(x) else 0.0 for x in out]
    z = sum(w)
    return [v / z for v in w]


def ref_sequence_law(inst, N, **kw):
    """Law of N target tokens, one prefix at a time, processed by ``ref_process``."""
    V = inst.vocab_size
    law = {}
    for seq in itertools.product(range(V), repeat=N):
        pr = 1.0
        for j in range(N):
            row = [float(v) for v in inst.target.conditional(seq[:j])]
            pr *= ref_process(row, list(seq[:j]), **kw)[seq[j]]
        law[seq] = pr
    return law


def engine_sequence_law(inst, N, sampling):
    from spectheory.testing.checks.step import target_sequence_law

    flat = target_sequence_law(inst, N, sampling)
    V = inst.vocab_size
    return {seq: flat[i] for i, seq in enumerate(itertools.product(range(V), repeat=N))}


@pytest.fixture(scope="module")
def inst():
    return st.random_instance(3, 2, 7)  # prefix-dependent rows


CASES = [
    ("repetition_penalty=1.7", dict(rep=1.7)),
    ("repetition_penalty=0.6", dict(rep=0.6)),
    ("presence_penalty=0.8", dict(pres=0.8)),
    ("frequency_penalty=0.5", dict(freq=0.5)),
    ("frequency_penalty=-0.4,presence_penalty=0.3", dict(freq=-0.4, pres=0.3)),
    ("min_tokens=2,stop_token_ids=1", dict(min_tokens=2, stops=(1,))),
    ("no_repeat_ngram_size=1", dict(no_repeat=1)),
    ("no_repeat_ngram_size=2", dict(no_repeat=2)),
    ("logit_bias=0:1.25;2:-0.5", dict(bias={0: 1.25, 2: -0.5})),
    ("logit_bias=1:-inf", dict(banned=(1,))),
    ("repetition_penalty=1.3,frequency_penalty=0.2,presence_penalty=0.1,min_tokens=1,"
     "stop_token_ids=2,no_repeat_ngram_size=2",
     dict(rep=1.3, freq=0.2, pres=0.1, min_tokens=1, stops=(2,), no_repeat=2)),
]


@pytest.mark.parametrize("text,kw", CASES, ids=[c[0] for c in CASES])
def test_sequence_law_matches_brute_force(inst, text, kw):
    # deeper than the instance's tables: the deeper levels keep their histories (no-repeat
    # 1-grams ban every token after V distinct ones: 3 tokens at most)
    N = 3 if kw.get("no_repeat") == 1 else 4
    ref = ref_sequence_law(inst, N, **kw)
    got = engine_sequence_law(inst, N, text)
    assert max(abs(ref[s] - got[s]) for s in ref) < 1e-13
    assert abs(sum(got.values()) - 1) < 1e-12


def test_grammar_law_matches_brute_force(inst):
    table = [[1, None, 0], [None, 0, 1]]  # state 0: tokens 0 and 2; state 1: tokens 1 and 2
    ref = ref_sequence_law(inst, 4, grammar=table, rep=1.2)
    got = engine_sequence_law(inst, 4, SamplingParams(grammar={"transitions": table},
                                                      repetition_penalty=1.2))
    assert max(abs(ref[s] - got[s]) for s in ref) < 1e-13
    assert got[(1, 0, 0, 0)] == 0 and got[(0, 0, 1, 0)] == 0 and got[(0, 1, 0, 2)] > 0


def test_kit_logits_have_both_signs_and_give_p_back():
    p = np.array([[0.6, 0.3, 0.1, 0.0], [0.25, 0.25, 0.25, 0.25]])
    lg = kit_logits(p)
    assert lg[0, 0] > 0 > lg[0, 2] and lg[0, 3] == -math.inf
    assert np.allclose(lg[0, :3], ref_logits(list(p[0]))[:3])
    assert np.allclose(lg[0, 0], -lg[0, 2])
    e = np.exp(lg - lg.max(-1, keepdims=True))
    assert np.allclose(e / e.sum(-1, keepdims=True), p)
    import torch

    assert torch.allclose(kit_logits(torch.as_tensor(p)), torch.as_tensor(lg))


def test_repetition_penalty_both_branches():
    p = [0.6, 0.3, 0.1]  # logits +0.904, +0.211, -0.904
    for hist in ([0], [2], [0, 2]):
        got = process_rows(np.array([p]), "repetition_penalty=2", history=np.array([hist]))[0]
        assert np.allclose(got, ref_process(p, hist, rep=2.0))
    up = process_rows(np.array([p]), "repetition_penalty=2", history=np.array([[2]]))[0]
    assert up[2] < 0.1  # a negative logit multiplied by 2: less likely
    down = process_rows(np.array([p]), "repetition_penalty=2", history=np.array([[0]]))[0]
    assert down[0] < 0.6


def test_exact_masks_and_factor_bias():
    inst = st.random_instance(3, 2, 3, denominator=12)
    assert inst.exact
    sp = "min_tokens=1,stop_token_ids=0,no_repeat_ngram_size=2,logit_bias=1:*1/2"
    ex = process_instance(inst, sp, exact=True)
    for d in range(3):
        for prefix in itertools.product(range(3), repeat=d):
            base = list(inst.target.conditional(prefix))
            ok = ref_allowed(list(prefix), 3, no_repeat=2, min_tokens=1, stops=(0,))
            w = [base[t] * (Fraction(1, 2) if t == 1 else 1) if ok[t] else Fraction(0)
                 for t in range(3)]
            assert list(ex.target.conditional(prefix)) == [x / sum(w) for x in w]
    res = st.analyze(inst, "block", exact=True, sampling=sp)
    assert res.tv_to_target == 0 and isinstance(res.block_efficiency, Fraction)
    assert st.check_lossless("lenient", inst, exact=True, sampling=sp).lossless is False


@pytest.mark.parametrize("factor,exact", [("*2", Fraction(2)), ("*0.5", Fraction(1, 2)),
                                          ("*2.5", Fraction(5, 2)),
                                          ("*1e-16", Fraction(1, 10**16))])
def test_exact_factor_biases_written_as_floats_count_by_their_decimal_text(factor, exact, capsys,
                                                                          tmp_path):
    """``logit_bias=0:*2`` under --exact multiplied exact rows by the float 2.0: the rows became
    floats and a correct verifier was reported NOT A LAW. A float factor counts as its shortest
    decimal text, like every float parameter in exact mode: the law of ``*2`` is that of
    ``*2/1``, and the text the command prints reads back to it."""
    from spectheory.cli import main

    inst = st.random_instance(3, 2, 3, denominator=12)
    as_float = st.analyze(inst, "block", exact=True, sampling=f"logit_bias=0:{factor}")
    as_fraction = st.analyze(inst, "block", exact=True, sampling=f"logit_bias=0:*{exact}")
    assert as_float.tau_pmf == as_fraction.tau_pmf and as_float.tv_to_target == 0
    assert all(isinstance(v, Fraction) for v in as_float.tau_pmf)
    assert st.check_lossless("token", inst, exact=True,
                             sampling=f"logit_bias=0:{factor}").lossless
    path = tmp_path / "inst.json"
    path.write_text(json.dumps(st.instance_to_dict(inst)))
    code = main(["check", str(path), "--exact", "--verifier", "block", "--sampling",
                 f"logit_bias=0:{factor}"])
    out = capsys.readouterr().out
    assert code == 0 and "lossless exactly" in out, out


@pytest.mark.parametrize("text,words", [
    ("stop_token_ids=1", "stop_token_ids = 1 act here only with min_tokens"),
    ("temperature=0.5,stop_token_ids=0;2", "stop_token_ids = 0;2 act here only with min_tokens"),
    ("stop_token_ids=", "stop_token_ids = '' has no value"),
    ("top_k=,temperature=0", "top_k = '' has no value"),
    ("logit_bias= ", "logit_bias = '' has no value"),
])
def test_parameters_that_would_do_nothing_are_refused(text, words):
    """Stop tokens without min_tokens (the rows' law models no end of generation) and a key with
    no value were dropped silently: the command printed the unprocessed law."""
    with pytest.raises(SamplingError, match=re.escape(words)):
        parse_sampling(text)
    with pytest.raises(SamplingError, match=re.escape(words)):
        st.analyze(st.random_instance(3, 2, 3), "block", sampling=text)
    assert parse_sampling("min_tokens=1,stop_token_ids=1").stop_token_ids == (1,)


def test_exact_refuses_penalties_in_one_line():
    inst = st.random_instance(3, 2, 3, denominator=12)
    with pytest.raises(SamplingError, match="repetition_penalty acts on logits"):
        st.analyze(inst, "block", exact=True, sampling="repetition_penalty=1.2")


def test_multi_iteration_under_penalties_token_and_block_lossless(inst):
    sp = "repetition_penalty=1.4,presence_penalty=0.3,min_tokens=2,stop_token_ids=0"
    for v in ("token", "block"):
        rep = st.check_lossless(v, inst, sampling=sp, n_tokens=5)
        assert rep.lossless, rep
    assert not st.check_lossless("uniform-product", inst, sampling=sp, n_tokens=5).lossless


def test_all_masked_row_refused(inst):
    with pytest.raises(GrammarError, match=r"after history \(\d, \d, \d\)"):
        engine_sequence_law(inst, 4, "no_repeat_ngram_size=1")


def test_penalised_law_differs_from_stateless(inst):
    a = engine_sequence_law(inst, 3, "frequency_penalty=1")
    b = engine_sequence_law(inst, 3, None)
    assert max(abs(a[s] - b[s]) for s in a) > 1e-2


def test_regex_grammar_masks():
    g = TokenAutomaton.from_regex(r"\((x|\(x\))*\)", ["(", ")", "x"])
    assert g.accepts_prefix([0, 2, 0, 2, 1, 1])
    assert not g.accepts_prefix([1])
    assert not g.accepts_prefix([0, 0, 0])  # nesting deeper than the regex allows
    m = g.allowed(g.run(np.array([[0, 0]])))
    assert m.tolist() == [[False, False, True]]


def test_a_regex_grammars_complete_words_are_accepted_prefixes():
    """A regex grammar's eos steps to END, which the state update reads as -1: accepts_prefix
    answered False for every complete word ({ } <eos> of json_like, <e> at the start of a*),
    while the masks allow them."""
    from spectheory.inputs import grammar_laws as G

    g = TokenAutomaton.from_regex("a*", ["a", "<e>"], eos=1)
    assert g.allowed(np.zeros(1, dtype=np.int64)).tolist() == [[True, True]]
    assert g.accepts_prefix([1]) and g.accepts_prefix([0, 0, 1]) and g.accepts_prefix([0, 1, 0])
    j = G.json_like()
    assert j.accepts_prefix([0, 1, 6]) and j.accepts_prefix([0, 1])
    assert not j.accepts_prefix([1])
    ab = TokenAutomaton.from_regex("ab", ["a", "b", "<e>"], eos=2)
    assert ab.accepts_prefix([0, 1, 2]) and not ab.accepts_prefix([0, 2])
    assert not ab.accepts_prefix([2])  # eos before the word is complete


def test_grammar_from_file_and_errors(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"transitions": [[0, None, 1], [None, 0, None]]}))
    sp = parse_sampling(f"grammar={path},temperature=0.5")
    assert sp.grammar.vocab_size == 3 and str(path) in str(sp)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"transitions": [[0, 5]]}))
    with pytest.raises(GrammarError, match="token 1 is 5"):
        parse_sampling(f"grammar={bad}")
    with pytest.raises(GrammarError, match="cannot read"):
        parse_sampling(f"grammar={tmp_path / 'missing.json'}")
    # a FIFO without a writer blocked the reader (past --time-limit: it is read as the
    # arguments are parsed); a folder was "not a JSON grammar (Is a directory)"
    import os

    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(GrammarError, match="not a regular file"):
        parse_sampling(f"grammar={tmp_path / 'pipe'}")
    with pytest.raises(GrammarError, match="is a folder"):
        parse_sampling(f"grammar={tmp_path}")
    # a mask that leaves nothing: the only allowed token has probability zero
    rows = np.array([[0.0, 0.5, 0.5]])
    with pytest.raises(GrammarError, match="no token of positive probability"):
        process_rows(rows, SamplingParams(grammar={"transitions": [[0, None, None]]}))


@pytest.mark.parametrize("text,match", [
    ("repetition_penalty=0", "repetition_penalty"),
    ("repetition_penalty=nan", "not finite"),
    ("presence_penalty=abc", "not a number"),
    ("min_tokens=2", "needs stop_token_ids"),
    ("min_tokens=-1,stop_token_ids=0", "min_tokens"),
    ("no_repeat_ngram_size=1.5", "not an integer"),
    ("logit_bias=0", "not token:bias"),
    ("logit_bias=0:*0", "factor outside"),
    ("logit_bias=0:1;0:2", "twice"),
    ("stop_token_ids=-1", "not a token id"),
    ("frequency_penalty=1e9", "beyond"),
])
def test_bad_stateful_parameters_one_line(text, match):
    with pytest.raises(SamplingError, match=match) as exc:
        parse_sampling(text)
    assert "\n" not in str(exc.value)


def test_string_form_round_trips():
    sp = parse_sampling("repetition_penalty=1.5,presence_penalty=0.25,min_tokens=2,"
                        "stop_token_ids=2;0,logit_bias=1:*3/2;0:-inf;2:0.5,"
                        "no_repeat_ngram_size=3,top_k=2")
    assert parse_sampling(str(sp)) == sp
    assert sp.stop_token_ids == (0, 2)
    assert sp.logit_bias == ((0, -math.inf, False), (1, Fraction(3, 2), True), (2, 0.5, False))


def test_token_out_of_vocabulary_refused(inst):
    with pytest.raises(Exception, match="outside the vocabulary"):
        st.analyze(inst, "token", sampling="min_tokens=1,stop_token_ids=7")


# ----------------------------------------------------------------------------- the kit


def _token_sampler(params, blind: bool):
    """Token verification as an engine samples it, processing the raw target rows itself: row i
    with the history drafts[:i] (``blind``: with the empty history, the planted bug)."""
    import torch

    def sampler(drafts, q, p, generator):
        B, L = drafts.shape
        rows = torch.stack([process_rows(p[:, i], params,
                                         history=drafts[:, :0] if blind else drafts[:, :i])
                            for i in range(L + 1)], 1)
        b = torch.arange(B)
        accepted = torch.full((B,), L)
        for i in range(L):
            x = drafts[:, i]
            u = torch.rand(B, generator=generator, dtype=torch.float64)
            rej = (u * q[b, i, x] >= rows[b, i, x]) & (accepted == L)
            accepted[rej] = i
        r = rows[b, accepted] - q[b, accepted.clamp(max=L - 1)] * (accepted < L).unsqueeze(-1)
        return accepted, torch.multinomial(r.clamp(min=0), 1, generator=generator)[:, 0]

    return sampler


@pytest.mark.parametrize("mode", ["law", "lossless"])
def test_check_sampler_under_penalties(mode):
    """alpha = 1e-3: a correct sampler fails with probability <= 1e-3; the history-blind one
    (penalties from an empty history) is off by TV >= 0.05 on these rows and fails."""
    from spectheory.testing import check_sampler

    sp = parse_sampling("repetition_penalty=1.8,frequency_penalty=0.5")
    ok = check_sampler(_token_sampler(sp, False), "token", mode=mode, samples=20000,
                       sampling=sp)
    assert ok.passed, ok
    bad = check_sampler(_token_sampler(sp, True), "token", mode=mode, samples=20000,
                        sampling=sp)
    assert not bad.passed, bad


@pytest.mark.parametrize("pattern,words", [
    ("a{1000000000}", "has over 100,000 items once its counted repeats are unrolled"),
    ("(a{1000}){1000}", "has over 100,000 items once its counted repeats are unrolled"),
    ("(b|a{400}){300}c", "has over 100,000 items once its counted repeats are unrolled"),
    (r"\p{L}{200000}", "has over 100,000 items once its counted repeats are unrolled"),
    ("a{99999999999}", "has over 100,000 items once its counted repeats are unrolled"),
    # regex's own syntax, which re's parser cannot read even with \p{L} as one character: its
    # nested counts were held to 1,000 each, not multiplied (2 x 10^9 items, 400 GB to compile)
    (r"(?:(?:(?:\p{L}b){1000}){1000}){1000}(?:x){e<=1}",
     "has over 100,000 items once its counted repeats are unrolled"),
    (r"(?:(?:\p{L}b){1000}){1000}", "has over 100,000 items once its counted repeats are"),
    (r"(?V0)(?:(?:\p{L}b){1000}){1000}", "has over 100,000 items once"),  # off its text
])
def test_a_regex_that_unrolls_too_far_is_refused_before_it_is_compiled(pattern, words):
    """The package regex writes a counted repeat out min times when it compiles: a{1000000000}
    took 24 GB (or a raw MemoryError) before anything was checked. The unrolled size is
    counted on the parsed pattern first; bounded upper counts are loops and pass."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(GrammarError, match=re.escape(words)):
        TokenAutomaton.from_regex(pattern, ["a", "b", "c"])
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB
    for fine in ("a{2,1000000}b", "a{100000}", "(ab|c){5}d*", r"\p{L}{5000}",
                 r"(?:(?:ab){e<=1}){1000}", r"[(?=]a", r"\(?>a",
                 # off the text: group prefixes, alternations and quantifiers are no items
                 r"(?V1)(?:(?:ab|cd|ef){100}){150}", r"(?V1)hello!|c"):
        TokenAutomaton.from_regex(fine, ["a", "b", "c"])
    with pytest.raises(GrammarError, match="unrolled"):
        st.analyze(st.random_instance(3, 2, 0), "block",
                   sampling={"grammar": {"tokens": ["a", "b", "c"], "regex": "a{1000000000}"}})


def _completable(pattern: str, text: str, alphabet: str, longest: int) -> bool:
    """Brute force: some string over ``alphabet`` of at most ``longest`` characters that starts
    with ``text`` is a full match."""
    import regex

    c = regex.compile(pattern)
    return any(c.fullmatch(text + "".join(tail)) is not None
               for k in range(longest - len(text) + 1)
               for tail in itertools.product(alphabet, repeat=k))


@pytest.mark.parametrize("pattern,text,words", [
    ("(?>a+)ab|b+", "a", "an atomic group"),
    ("a*(?<!a)b", "a", "a lookahead or lookbehind"),
    ("(?=.*c)[abc]{3}", "aaa", "a lookahead or lookbehind"),
    ("a*+ab|b", "a", "a possessive quantifier"),
    (r"(?>\p{L}+)ab|b+", "a", "an atomic group"),  # \p{L} read as one character
    (r"(?V0)a*(?<!a)b", "a", "a lookahead or lookbehind"),  # read off the text (no re parse)
    (r"(?V0)a*+ab|b", "a", "a possessive quantifier"),
    (r"a\bb|c", "a", "a word boundary or an anchor inside the pattern"),  # the language: c
    ("a$b|c", "a", "a word boundary or an anchor inside the pattern"),
    (r"(?V1)a\Zb|c", "a", "a word boundary or an anchor inside the pattern"),  # off its text
])
def test_a_regex_partial_matching_cannot_be_trusted_with_is_refused(pattern, text, words):
    """The `regex` package's partial matching says a text can still be completed where it
    cannot under atomic groups, lookarounds and possessive quantifiers: "a" under (?>a+)ab|b+
    (the same language as b+) was allowed, and E[tau+1] of block verification under that
    grammar came out 3841/1800 where b+ gives 241/200. Such a regex is refused; for the rest,
    partial matching agrees with a brute force (the control). Word boundaries and anchors inside
    the pattern fool it too (a\\bb|c allowed "a"); ^ / \\A first and $ / \\Z last always hold."""
    import regex

    # the refusal is warranted: partial matching allows a text no continuation completes
    assert regex.compile(pattern).fullmatch(text, partial=True) is not None
    assert not _completable(pattern, text, "abc", 6)
    with pytest.raises(GrammarError, match=re.escape(words)):
        TokenAutomaton.from_regex(pattern, ["a", "b", "c"])
    with pytest.raises(GrammarError, match=re.escape(words)):
        st.analyze(st.random_instance(3, 2, 0), "block",
                   sampling={"grammar": {"tokens": ["a", "b", "c"], "regex": pattern}})
    # control: plain patterns (word boundaries and backreferences included) keep their masks,
    # and each mask is the brute force's
    for plain in ("b+", "(a|ab)(c|bcc)", r"(a)b\1", "^(?:ab|c)$", r"\A(?:a{2,3}c?)\Z",
                  r"(?V1)(?:ab|c)+", r"(?+1)(a|b)"):
        g = TokenAutomaton.from_regex(plain, ["a", "b", "c"])
        for hist in itertools.chain([()], itertools.product(range(3), repeat=1),
                                    itertools.product(range(3), repeat=2)):
            prefix = "".join("abc"[t] for t in hist)
            if not _completable(plain, prefix, "abc", 6):
                continue
            states = g.run(np.array([hist], dtype=np.int64)) if hist else np.zeros(1, np.int64)
            allowed = g.allowed(states)[0]
            for t in range(3):
                assert allowed[t] == _completable(plain, prefix + "abc"[t], "abc", 6), \
                    (plain, prefix, t)


@pytest.mark.parametrize("exact", [True, False])
def test_a_mask_that_empties_a_row_the_target_never_reaches_is_not_a_refusal(exact):
    """V = 2, L = 1, target root [1, 0], both depth-1 rows [0, 1], no_repeat_ngram_size=1: the
    row after (1,) has no token left, but the target never emits 1 first. The analysis was
    refused ("the masks leave no token ... after history (1,)"); now the row is kept as given
    (as a grammar leaves a rejected history unconstrained) and the law is exact. A history the
    target reaches is still refused."""
    from spectheory.engine.analysis import analyze
    from spectheory.engine.lossless import check_lossless
    from spectheory.inputs.instances import instance_from_dict
    from spectheory.inputs.stateful import GrammarError

    d = {"vocab_size": 2, "block_length": 1,
         "target": {"": ["1", "0"], "0": ["0", "1"], "1": ["0", "1"]},
         "draft": {"": ["1/2", "1/2"]}}
    inst = instance_from_dict(d, exact=exact)
    res = analyze(inst, "token", exact=exact, sampling="no_repeat_ngram_size=1")
    assert [float(x) for x in res.tau_pmf] == [0.5, 0.5]
    assert check_lossless("token", inst, sampling="no_repeat_ngram_size=1").lossless
    d["target"][""] = ["1/2", "1/2"]
    d["target"]["0"] = ["1", "0"]  # (0,) is reached and only 0 follows: no token is left
    with pytest.raises(GrammarError, match=r"after history \(0,\)"):
        analyze(instance_from_dict(d, exact=exact), "token", exact=exact,
                sampling="no_repeat_ngram_size=1")


def test_steps_along_a_draft_the_target_never_takes_are_not_refused():
    """The same instance in the kit: the steps process target rows along every draft, also
    after the drafted token 1 that the target never emits, whose row no_repeat_ngram_size=1
    empties. Each of the kit's correct steps ended in that refusal; they now pass, and rows
    along tokens of positive probability are still refused when emptied."""
    import torch

    from spectheory.inputs.instances import instance_from_dict
    from spectheory.inputs.processing import process_rows_along
    from spectheory.inputs.stateful import GrammarError
    from spectheory.testing import check_step, sample_match_step, vllm_v1_step

    d = {"vocab_size": 2, "block_length": 1,
         "target": {"": ["1", "0"], "0": ["0", "1"], "1": ["0", "1"]},
         "draft": {"": ["1/2", "1/2"]}}
    inst = instance_from_dict(d, exact=False)
    for step in (vllm_v1_step, sample_match_step):
        assert check_step(step, instances=[inst], samples=500,
                          sampling="no_repeat_ngram_size=1").passed
    rows = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.5, 0.5], [0.0, 1.0]]])
    kept = process_rows_along(rows[:1], torch.tensor([[1]]), "no_repeat_ngram_size=1")
    assert kept[0, 1].tolist() == [0.0, 1.0]  # (1,) is not reached: the row as given
    with pytest.raises(GrammarError, match=r"after history \(1,\)"):
        process_rows_along(rows[1:], torch.tensor([[1]]), "no_repeat_ngram_size=1")


def test_an_emptied_row_is_named_as_target_or_draft():
    """The same ban on every token refused on either side: the line says which rows it emptied
    (--draft-sampling's refusal read as the target's)."""
    from spectheory.engine.analysis import analyze
    from spectheory.inputs.stateful import GrammarError

    inst = st.random_instance(3, 2, 1, alpha=0.5)
    ban = "logit_bias=0:-inf;1:-inf;2:-inf"
    with pytest.raises(GrammarError, match=r"^target rows \(sampling\): the masks leave no"):
        analyze(inst, "block", sampling=ban)
    with pytest.raises(GrammarError, match=r"^draft rows \(draft sampling\): the masks leave no"):
        analyze(inst, "block", draft_sampling=ban)
