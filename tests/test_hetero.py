"""Heterogeneous vocabularies (arXiv 2502.05202): exact laws of SLEM, SLRS and TLI, vLLM #38174's
TLI rule, planted bugs caught with a named offending string, a brute-force law, the JSON form."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction as F

import numpy as np
import pytest

from spectheory.inputs.models import TableModel
from spectheory.inputs.tokenizers import (HeteroInstance, hetero_from_dict, hetero_to_dict,
                                          make_tokenizer)
from spectheory.runtime.errors import InputError, InstanceError
from spectheory.inputs.hetero_pairs import hetero_pair, random_rational_model
from spectheory.lp.claims.hetero_checks import claim_checks
from spectheory.verifiers.hetero import (_draft_context, _row, check_hetero_lossless,
                                         emitted_law, first_token_acceptance, intersection, slem_block, slem_proposals,
                                         slrs_psi, target_law, tli_block)

SCHEMES = ("slem", "slrs", "tli", "vllm-tli")
CASES = [("chars-vs-merges", 0), ("two-merge-sets", 1), ("crossed-bounds", 2),
         ("three-letters", 3)]


def _inst(pair, seed, **kw):
    kw.setdefault("n_tokens", 3)
    return hetero_pair(pair, seed, **kw)


def _ci(rows, V):
    return TableModel(V, (np.array([[F(x) for x in rows]], dtype=object),))


def _hand_instance(L=1):
    """Target vocab [a, b, ab], p = (1/2, 1/4, 1/4); draft [a, b], q = (1/2, 1/2)."""
    return HeteroInstance("ab", make_tokenizer(["a", "b", "ab"], "ab"),
                          make_tokenizer(["a", "b"], "ab"), _ci(["1/2", "1/4", "1/4"], 3),
                          _ci(["1/2", "1/2"], 2), L, 2)


# ----------------------------------------------------------------------------- lossless


@pytest.mark.parametrize("pair,seed", CASES)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_schemes_lossless_exactly(pair, seed, scheme):
    inst = _inst(pair, seed)
    assert inst.exact and inst.target.depth == 2  # prefix-dependent rows
    rep = check_hetero_lossless(inst, scheme)
    assert rep.lossless and rep.tv == 0 and rep.exact, str(rep)
    assert rep.tokens_per_forward >= 1


def test_instances_are_prefix_dependent_with_ties():
    inst = _inst("crossed-bounds", 2)
    rows = inst.target.tables[1]
    assert any((rows[i] != rows[j]).any() for i in range(3) for j in range(3))
    assert any(len(set(r)) < len(r) for t in inst.target.tables for r in t)  # a tie somewhere


def test_float_mode_agrees_with_exact():
    inst = _inst("two-merge-sets", 1)
    for scheme in ("slem", "tli"):
        ex = check_hetero_lossless(inst, scheme, exact=True)
        fl = check_hetero_lossless(inst, scheme, exact=False)
        assert fl.lossless and float(fl.tv) < 1e-12
        assert abs(fl.tokens_per_forward - float(ex.tokens_per_forward)) < 1e-12
        assert abs(fl.chars_per_forward - float(ex.chars_per_forward)) < 1e-12


# ----------------------------------------------------------------------------- exact values


def test_hand_computed_acceptance():
    inst = _hand_instance(L=1)
    tli = check_hetero_lossless(inst, "tli")
    assert (tli.tokens_per_forward, tli.chars_per_forward) == (F(7, 4), F(35, 16))
    assert tli.forwards == F(5, 4)  # two tokens: a second forward only after a rejection (1/4)
    assert check_hetero_lossless(inst, "slrs").forwards == 2
    slem = check_hetero_lossless(inst, "slem")
    assert slem.tokens_per_forward == F(11, 8)
    # SLRS: "a" is not settled (the target has "ab"), so psi = (aa -> a, ab -> ab, b -> b)
    assert slrs_psi(inst, ()) == {0: F(1, 4), 2: F(1, 4), 1: F(1, 2)}
    acc = first_token_acceptance(inst)
    assert acc == {"slem": F(3, 8), "slrs": F(3, 4), "tli": F(3, 4)}
    assert check_hetero_lossless(inst, "slrs").chars_per_forward == F(5, 4)


# ----------------------------------------------------------------------------- brute force


def _longest_match(vocab, text):
    out, i = [], 0
    while i < len(text):
        k = max(len(u) for u in vocab if text.startswith(u, i))
        out.append(vocab.index(text[i:i + k]))
        i += k
    return tuple(out)


def _slem_block_brute(inst, c):
    """SLEM's block by enumerating every draft path and every target sample at every position
    (the target's samples at positions after a mismatch are drawn too, then ignored)."""
    tv, dv = list(inst.target_tokenizer.vocab), list(inst.draft_tokenizer.vocab)
    dctx = _longest_match(dv, "".join(tv[t] for t in c))
    out = {}
    for path in itertools.product(range(len(dv)), repeat=inst.draft_length):
        wq = F(1)
        for i, d in enumerate(path):
            wq *= inst.draft.conditional(dctx + path[:i])[d]
        if not wq:
            continue
        t = _longest_match(tv, "".join(dv[d] for d in path))
        for ys in itertools.product(range(len(tv)), repeat=len(t) + 1):
            w = wq
            for j, y in enumerate(ys):
                w *= inst.target.conditional(c + t[:j])[y]
            k = next((j for j in range(len(t)) if ys[j] != t[j]), len(t))
            block = t[:k] + (ys[k],)
            out[block] = out.get(block, 0) + w
    return {b: w for b, w in out.items() if w}


@pytest.mark.parametrize("pair,seed", CASES[:3])
def test_slem_block_equals_brute_force(pair, seed):
    inst = _inst(pair, seed)
    for c in [(), (0,), (2,), (1, 0)]:
        assert slem_block(inst, c) == _slem_block_brute(inst, c)


def test_string_law_is_the_image_of_the_token_law():
    from spectheory.verifiers.hetero import string_law

    inst = _inst("crossed-bounds", 4)  # p(b | a) > 0
    law = target_law(inst)
    strings = string_law(inst, law)
    assert sum(strings.values()) == 1
    # over 3 target tokens "aba" is only [a][b][a]; "abab" is [ab][a][b] or [a][b][ab]
    assert strings.get("aba", 0) == law.get((0, 1, 0), 0)
    assert strings.get("abab", 0) == law.get((2, 0, 1), 0) + law.get((0, 1, 2), 0) > 0


def test_target_law_brute_force():
    inst = _inst("crossed-bounds", 2)
    law = target_law(inst)
    for s in itertools.product(range(3), repeat=3):
        w = F(1)
        for i, y in enumerate(s):
            w *= inst.target.conditional(s[:i])[y]
        assert law.get(s, 0) == w


# ----------------------------------------------------------------------------- planted bugs


def slem_string_prefix_bug(inst, c):
    """SLEM that, at the first mismatch, accepts the target's token when its string is a proper
    prefix of the proposed token's string (not a target-token boundary of the proposal) and then
    emits a bonus from the row after the proposed token."""
    out = {}
    T = inst.target_tokenizer
    for t, w in slem_proposals(inst, c).items():
        for k in range(len(t) + 1):
            p = _row(inst.target, c + t[:k])
            for y, py in enumerate(p):
                if k < len(t) and y == t[k]:
                    continue
                if k < len(t) and T.vocab[t[k]].startswith(T.vocab[y]):
                    for z, pz in enumerate(_row(inst.target, c + t[:k + 1])):
                        key = t[:k] + (y, z)
                        out[key] = out.get(key, 0) + w * py * pz
                    continue
                out[t[:k] + (y,)] = out.get(t[:k] + (y,), 0) + w * py
            if k == len(t):
                break
            w = w * p[t[k]]
    return out


def slrs_single_token_psi_bug(inst, c):
    """SLRS that proposes the first target token of the settled lookahead string but takes psi
    from single draft tokens (first target token of each draft token's own string)."""
    T, D = inst.target_tokenizer, inst.draft_tokenizer
    q = _row(inst.draft, _draft_context(inst, c))
    psi_bug = {}
    for d, qd in enumerate(q):
        if qd:
            t = T.encode(D.vocab[d])[0]
            psi_bug[t] = psi_bug.get(t, 0) + qd
    p = _row(inst.target, c)
    out, reject = {}, F(0)
    for t, w in slrs_psi(inst, c).items():
        a = min(1, p[t] / psi_bug[t]) if t in psi_bug else F(1)
        out[(t,)] = out.get((t,), 0) + w * a
        reject += w * (1 - a)
    if reject:
        res = [max(py - psi_bug.get(y, 0), 0) for y, py in enumerate(p)]
        z = sum(res)
        for y, r in enumerate(res):
            if r:
                out[(y,)] = out.get((y,), 0) + reject * r / z
    return out


def tli_residual_over_intersection(inst, c):
    return tli_block(inst, c, residual_over="intersection")


def tli_unrenormalised_draft(inst, c):
    """TLI whose verifier divides by the draft's raw row q (not q' = q / q(I)) while drafting
    from q'."""
    inter = intersection(inst)
    dctx = _draft_context(inst, c)
    q = _row(inst.draft, dctx)
    mass = sum(q[d] for d in inter)
    if not mass:
        return tli_block(inst, c)
    p = _row(inst.target, c)
    qraw = [F(0)] * len(p)
    for d, x in inter.items():
        qraw[x] = q[d]
    out, reject = {}, F(0)
    for d, x in inter.items():
        qx = q[d] / mass
        a = min(1, p[x] / qraw[x]) if qraw[x] else F(0)
        for z, pz in enumerate(_row(inst.target, c + (x,))):
            out[(x, z)] = out.get((x, z), 0) + qx * a * pz
        reject += qx * (1 - a)
    res = [max(py - qraw[y], 0) for y, py in enumerate(p)]
    for y, r in enumerate(res):
        if r and reject:
            out[(y,)] = out.get((y,), 0) + reject * r / sum(res)
    return out


def slem_retokenized_context_bug(inst, c):
    """SLEM whose target conditions on the canonical target tokenization of the emitted string
    (a text-state implementation), not on the target tokens it emitted: after "a" then "b" the
    target reads [ab], a token it never emitted."""
    T = inst.target_tokenizer
    return slem_block(inst, T.encode(T.decode(c)))


@pytest.mark.parametrize("bug,pairs", [
    (slem_retokenized_context_bug, ("crossed-bounds@4", "chars-vs-merges@3")),
    (slem_string_prefix_bug, ("chars-vs-merges", "crossed-bounds")),
    (slrs_single_token_psi_bug, ("chars-vs-merges", "crossed-bounds")),
    (tli_residual_over_intersection, ("chars-vs-merges", "two-merge-sets")),
])
def test_planted_bugs_caught_with_named_string(bug, pairs):
    for pair in pairs:
        pair, _, seed = pair.partition("@")  # seed 2 of crossed-bounds has p(b | a) = 0
        inst = _inst(pair, int(seed) if seed else dict(CASES)[pair])
        rep = check_hetero_lossless(inst, bug)
        assert not rep.lossless and rep.tv > 0, (pair, str(rep))
        assert rep.offending_string == inst.target_tokenizer.decode(rep.offending)
        out, tgt = emitted_law(inst, bug), target_law(inst)
        assert out.get(rep.offending, 0) == rep.output_probability
        assert tgt.get(rep.offending, 0) == rep.target_probability
        assert rep.output_probability != rep.target_probability
        assert rep.offending_string in str(rep)


def test_retokenized_context_needs_three_target_tokens():
    """A context of one target token is always canonical, so re-tokenizing the context can only
    show from the third target token on: over 2 tokens the bug is invisible, over 3 it is caught."""
    inst = _inst("three-letters", 3)
    assert check_hetero_lossless(inst, slem_retokenized_context_bug, n_tokens=2).lossless
    assert inst.n_tokens == 3
    rep = check_hetero_lossless(inst, slem_retokenized_context_bug, n_tokens=3)
    assert not rep.lossless and len(rep.offending) == 3


def test_unrenormalised_tli_caught():
    rep = check_hetero_lossless(_inst("two-merge-sets", 1, draft_length=1), 
                                tli_unrenormalised_draft)
    assert not rep.lossless and rep.offending_string


def test_block_bug_on_one_instance_named():
    """The residual over the intersection loses the target's mass on "ab" (not a draft token)."""
    inst = _hand_instance(L=1)
    rep = check_hetero_lossless(inst, tli_residual_over_intersection)
    assert not rep.lossless
    # p = (1/2, 1/4, 1/4): the correct residual puts all of its mass on "ab"
    assert tli_block(inst, ())[(2,)] == F(1, 4)
    assert (2,) not in tli_residual_over_intersection(inst, ())


# ----------------------------------------------------------------------------- vLLM port


def test_vllm_mapping_normalises_space_markers():
    from spectheory.verifiers.hetero import vllm_vocab_mapping
    d = make_tokenizer(["a", " ", "\u2581", " a"], "a \u2581")
    t = make_tokenizer(["a", " ", "\u2581", "\u2581a"], "a \u2581")
    # " a" (draft) <-> "\u2581a" (target); "\u2581" normalises to " ", whose first id wins
    assert vllm_vocab_mapping(t, d) == {0: 0, 1: 1, 3: 3}


# ----------------------------------------------------------------------------- JSON, guards


def test_json_round_trip_keeps_laws():
    inst = _inst("three-letters", 3)
    text = json.dumps(hetero_to_dict(inst))
    back = hetero_from_dict(json.loads(text), exact=True)
    assert back.target_tokenizer == inst.target_tokenizer
    for s in ("slem", "tli"):
        assert emitted_law(back, s) == emitted_law(inst, s)
    fl = hetero_from_dict(json.loads(text), exact=False)
    assert not fl.exact


@pytest.mark.parametrize("change,needle", [
    (lambda d: d.update(target_vocab=["a", "ab"]), "lacks the single character 'b'"),
    (lambda d: d.update(draft_vocab=["a", "b", "a"]), "appears twice"),
    (lambda d: d.update(draft_vocab=["a", "b", "c"]), "not in the alphabet"),
    (lambda d: d.update(tagret=1), "tagret"),
    (lambda d: d.update(n_tokens=99), "n_tokens"),
    (lambda d: d.update(draft_length=6, draft_vocab=[c for c in "ab"] + ["aa", "ab", "ba", "bb",
                                                                          "aab", "abb"]),
     "draft paths"),
    (lambda d: d.pop("draft"), "missing the key 'draft'"),
    (lambda d: d["target"].update({"": ["1/2", "1/2", "1/2"]}), "sums to"),
])
def test_bad_instances_refused(change, needle):
    data = hetero_to_dict(_inst("crossed-bounds", 2))
    change(data)
    with pytest.raises(InstanceError, match=None) as err:
        hetero_from_dict(data, exact=True)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_unknown_scheme_refused():
    with pytest.raises(InputError, match="unknown scheme"):
        check_hetero_lossless(_hand_instance(), "slemm")


def test_claim_checks_hold():
    claims = claim_checks()
    assert set(claims) >= {"2502.05202/slem-lossless", "2502.05202/slrs-lossless",
                           "2502.05202/tli-lossless", "vllm-38174/tli-lossless"}
    for cid, (verdict, instances, numbers) in claims.items():
        assert verdict is True, cid
        assert len(instances) >= 3 and set(numbers) == set(instances)


# ----------------------------------------------------------------------------- command line


def test_cli_verdicts_and_bad_input(tmp_path, capsys):
    from cli_helpers import run, write

    inst = _inst("crossed-bounds", 2)
    path = write(tmp_path, hetero_to_dict(inst))
    code, out, _ = run(["hetero", path, "--scheme", "tli", "--exact", "--json"], capsys)
    obj = json.loads(out)
    rep = check_hetero_lossless(inst, "tli")
    assert code == 0 and obj["lossless"] is True and obj["tv"] == "0"
    assert F(obj["tokens_per_forward"]) == rep.tokens_per_forward
    bad = hetero_to_dict(inst)
    bad["draft_vocab"] = ["a", "ba"]
    code, out, err = run(["hetero", write(tmp_path, bad, "bad.json"), "--scheme", "slem"], capsys)
    assert code == 2 and out == "" and "lacks the single character 'b'" in err
    assert len(err.strip().splitlines()) == 1
    code, out, err = run(["hetero", path, "--scheme", "slem", "--n-tokens", "0"], capsys)
    assert code == 2 and out == "" and "--n-tokens" in err


def test_docs_example_runs(capsys):
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parent.parent / "docs" / "heterogeneous-vocabularies.md"
    code = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)[0]
    exec(compile(code, str(page), "exec"), {})
    out = capsys.readouterr().out
    assert out.count("lossless exactly") == 4


def test_vllm_port_greedy_ties_and_unknown_context():
    """vLLM #38174: the masked argmax takes the first index on a tie, and the draft's context maps
    a target token outside the intersection ("ab") to the unknown id (here draft id 0, "a")."""
    from spectheory.verifiers.hetero import vllm_tli_block

    inst = _hand_instance(L=1)
    rep = check_hetero_lossless(inst, "vllm-tli")
    assert rep.lossless and rep.tokens_per_forward == F(3, 2)  # tie (1/2, 1/2): proposes "a"
    rows = [np.array([[F(1, 2), F(1, 2)]], dtype=object),
            np.array([[F(1, 4), F(3, 4)], [F(3, 4), F(1, 4)]], dtype=object)]
    inst = HeteroInstance("ab", inst.target_tokenizer, inst.draft_tokenizer, inst.target,
                          TableModel(2, tuple(rows)), 1, 2)
    block = vllm_tli_block(inst, (2,))  # context "ab" -> draft (unk,) -> row after "a" -> "b"
    assert block[(1, 0)] == F(1, 4) * F(1, 2) and block[(0,)] == F(1, 2)
    assert vllm_tli_block(inst, (2,), draft_unk=1)[(0, 0)] == F(1, 2) * F(1, 2)
    assert check_hetero_lossless(inst, "vllm-tli").lossless


def test_option_guards():
    inst = _hand_instance()
    with pytest.raises(InputError, match="tolerance"):
        check_hetero_lossless(inst, "tli", exact=False, tol=0.5)
    with pytest.raises(InputError, match="n_tokens"):
        check_hetero_lossless(inst, "tli", n_tokens=0)
    with pytest.raises(InstanceError, match="n_tokens = 16 is out of range"):
        check_hetero_lossless(inst, "tli", n_tokens=16)
    with pytest.raises(InstanceError, match="279,936 target sequences"):  # 6 ** 7, refused
        check_hetero_lossless(_inst("three-letters", 3), "tli", n_tokens=7)  # before enumerating
    with pytest.raises(InstanceError, match="exact must be"):
        hetero_from_dict(hetero_to_dict(inst), exact="yes")


def _complete(inst, block, n):
    """A block law from the empty context completed by the target to ``n`` target tokens."""
    law = dict(block)
    while any(len(s) < n for s in law):
        nxt = {}
        for s, w in law.items():
            if len(s) >= n:
                nxt[s] = nxt.get(s, 0) + w
                continue
            for y, py in enumerate(inst.target.conditional(s)):
                if py:
                    nxt[s + (y,)] = nxt.get(s + (y,), 0) + w * py
        law = nxt
    return law


@pytest.mark.parametrize("pair,seed", [("crossed-bounds", 2), ("three-letters", 3),
                                       ("two-merge-sets", 1)])
def test_tli_block_equals_core_token_verification(pair, seed):
    """TLI from the empty context is token verification of the target against q' (the draft's
    row on the intersection, renormalised, written over target ids): the core engine's law of
    token verification over L + 1 target tokens must equal TLI's block completed by the target."""
    from spectheory.engine.analysis import analyze
    from spectheory.inputs.instances import Instance
    from spectheory.inputs.models import prefix_from_index

    inst = _inst(pair, seed)
    L, VT = inst.draft_length, inst.target_tokenizer.size
    inter = intersection(inst)
    back = {x: d for d, x in inter.items()}
    draft_tables = []
    for depth in range(L):
        rows = np.empty((VT**depth, VT), dtype=object)
        for n in range(VT**depth):
            xs = prefix_from_index(n, depth, VT)
            row = [F(1, VT)] * VT  # a prefix the draft never reaches
            if all(x in back for x in xs):
                q = inst.draft.conditional(tuple(back[x] for x in xs))
                mass = sum(q[d] for d in inter)
                assert mass, "an instance with no draft mass on the intersection"
                row = [F(0)] * VT
                for d, x in inter.items():
                    row[x] = q[d] / mass
            rows[n] = row
        draft_tables.append(rows)
    target_tables = tuple(inst.target.level(d) for d in range(L + 1))
    core = Instance(VT, L, TableModel(VT, target_tables), TableModel(VT, tuple(draft_tables)))
    res = analyze(core, "token", exact=True)
    mine = _complete(inst, tli_block(inst, ()), L + 1)
    for n, w in enumerate(res.output_law):
        assert mine.get(prefix_from_index(n, L + 1, VT), 0) == w


def _random_vocab(rng, alphabet, extra):
    words = set()
    while len(words) < extra:
        n = int(rng.integers(2, 4))
        words.add("".join(rng.choice(list(alphabet), size=n)))
    return list(alphabet) + sorted(words)


@pytest.mark.parametrize("seed", range(6))
def test_random_vocabularies_lossless(seed):
    """Random merge sets (strings of 2-3 characters) on both sides, random prefix-dependent
    rational models: every scheme is lossless exactly over 3 target tokens."""
    rng = np.random.default_rng(100 + seed)
    alphabet = "ab" if seed % 2 else "abc"
    tt = make_tokenizer(_random_vocab(rng, alphabet, 2), alphabet)
    dt = make_tokenizer(_random_vocab(rng, alphabet, 2), alphabet)
    inst = HeteroInstance(alphabet, tt, dt, random_rational_model(rng, tt.size, 2, 3),
                          random_rational_model(rng, dt.size, 1, 3), 1 + seed % 2, 3)
    for scheme in SCHEMES:
        rep = check_hetero_lossless(inst, scheme)
        assert rep.lossless, (tt.vocab, dt.vocab, str(rep))
    if set(tt.vocab) - set(dt.vocab):  # target tokens off the intersection, with mass
        assert not check_hetero_lossless(inst, tli_residual_over_intersection).lossless


def test_float_mode_names_the_offending_string():
    inst = _inst("chars-vs-merges", 0).to_float()
    rep = check_hetero_lossless(inst, tli_residual_over_intersection, exact=False, tol=1e-9)
    assert not rep.lossless and rep.tv > 1e-9 and isinstance(rep.offending_string, str)
    assert abs(rep.output_probability - rep.target_probability) > 1e-9
