"""Adaptive draft length: exact laws under stopping rules against a separate brute force.

The brute force below shares nothing with `spectheory.engine.adaptive` but the instance tables:
its own token and block verification on one draft (Leviathan et al.; Sun et al., arXiv
2403.10444, written from the papers' formulas in Fractions), its own walk over the draft tree
with the stopping probabilities, its own completion by the target and its own node-budget
closed form. Instances are prefix-dependent, with ties (equal entries, p = q entries, rows equal
to a threshold) and zeros.
"""

from fractions import Fraction as F
import itertools
import json

import numpy as np
import pytest

from spectheory.engine.adaptive import (StoppingRule, analyze_adaptive, continuation_levels,
                                        parse_rule)
from spectheory.inputs.instances import Instance
from spectheory.inputs.models import TableModel
from spectheory.inputs.random_instances import random_instance
from spectheory.lp.adaptive import adaptive_node_budget_lp, adaptive_optimality
from spectheory.runtime.errors import InputError, SizeLimitError, UserCodeError

# ----------------------------------------------------------------------------- instances


def _tables(V, depth, rows):
    """A TableModel from rows(prefix) -> list of V Fractions, for every prefix up to depth."""
    tabs = []
    for d in range(depth + 1):
        tabs.append(np.array([rows(s) for s in itertools.product(range(V), repeat=d)],
                             dtype=object).reshape(V**d, V))
    return TableModel(V, tuple(tabs))


def tie_instance():
    """V = 2, L = 3: p = q on some rows, rows at 1/2 (ties with draft-confidence(1/2)), zeros."""
    def q(s):
        return [F(1, 2), F(1, 2)] if sum(s) % 2 == 0 else [F(2, 3), F(1, 3)]

    def p(s):
        if len(s) == 1 and s[0] == 1:
            return [F(1), F(0)]
        return [F(1, 3), F(2, 3)] if len(s) % 2 == 0 else [F(1, 2), F(1, 2)]
    return Instance(2, 3, _tables(2, 3, p), _tables(2, 2, q))


def skew_instance():
    """V = 3, L = 2, prefix-dependent, a zero draft entry where the target has mass."""
    def q(s):
        return {(): [F(1, 2), F(1, 4), F(1, 4)], (0,): [F(3, 4), F(1, 4), F(0)]}.get(
            s, [F(1, 3), F(1, 3), F(1, 3)])

    def p(s):
        if len(s) == 2:
            return [F(1, 6), F(1, 2), F(1, 3)]
        return {(): [F(1, 4), F(1, 4), F(1, 2)], (1,): [F(1, 3), F(1, 3), F(1, 3)]}.get(
            s, [F(1, 2), F(1, 6), F(1, 3)])
    return Instance(3, 2, _tables(3, 2, p), _tables(3, 1, q))


def rational_random(V, L, seed, den=6):
    return random_instance(V, L, seed, denominator=den).to_exact()


INSTANCES = {"ties": tie_instance, "skew": skew_instance,
             "random-2-3": lambda: rational_random(2, 3, 3),
             "random-3-2": lambda: rational_random(3, 2, 5, 12)}


def rows_of(inst):
    V, L = inst.vocab_size, inst.block_length
    P = {s: list(inst.target.conditional(s)) for d in range(L + 2)
         for s in itertools.product(range(V), repeat=d)}
    Q = {s: list(inst.draft.conditional(s)) for d in range(L + 1)
         for s in itertools.product(range(V), repeat=d)}
    return P, Q


# ----------------------------------------------------------------------------- brute force


def bf_token(x, P, Q, V):
    """Token verification on draft x: {output block: probability}."""
    out, alive = {}, F(1)
    for i in range(len(x) + 1):
        s = x[:i]
        if i == len(x):
            for a in range(V):
                out[s + (a,)] = out.get(s + (a,), 0) + alive * P[s][a]
            return out
        px, qx = P[s][x[i]], Q[s][x[i]]
        acc = min(F(1), px / qx)
        res = [max(P[s][a] - Q[s][a], F(0)) for a in range(V)]
        if acc < 1:
            for a in range(V):
                out[s + (a,)] = out.get(s + (a,), 0) + alive * (1 - acc) * res[a] / sum(res)
        alive *= acc


def bf_block(x, P, Q, V):
    """Block verification (Sun et al., Alg. 2) on draft x: {output block: probability}."""
    n = len(x)
    w = [F(1)]
    for i in range(n):
        w.append(min(F(1), w[-1] * P[x[:i]][x[i]] / Q[x[:i]][x[i]]))
    out, keep = {}, F(1)
    for i in range(n, -1, -1):  # scan from the end: accept the first success
        s = x[:i]
        if i == n:
            h, corr = w[n], P[s]
        else:
            res = [max(w[i] * P[s][a] - Q[s][a], F(0)) for a in range(V)]
            S = sum(res)
            h = F(1) if i == 0 else (S / (S + 1 - w[i]) if S + 1 - w[i] else F(1))
            corr = [r / S for r in res] if S else P[s]
        for a in range(V):
            if keep * h * corr[a]:
                out[s + (a,)] = out.get(s + (a,), 0) + keep * h * corr[a]
        keep *= 1 - h
    return out


def bf_law(inst, verify, stop_prob=None, drop_prob=None):
    """Walk the draft tree: at prefix s (|s| < L) stop with stop_prob(s, P, Q) (a stop rule), or
    draft a ~ q and drop it and stop with drop_prob(s, a, P, Q) (a drop rule). Returns
    (output law over L+1 tokens, target law, E[tau+1], E[N])."""
    V, L = inst.vocab_size, inst.block_length
    P, Q = rows_of(inst)
    blocks, e_n = {}, F(0)

    def emit(s, mass):
        nonlocal e_n
        e_n += mass * len(s)
        law = {(a,): P[()][a] for a in range(V)} if not s else verify(s, P, Q, V)
        for b, m in law.items():
            blocks[b] = blocks.get(b, 0) + mass * m

    def walk(s, mass):
        if mass == 0:
            return
        if len(s) == L:
            return emit(s, mass)
        if stop_prob is not None:
            h = stop_prob(s, P, Q)
            emit(s, mass * h)
            for a in range(V):
                walk(s + (a,), mass * (1 - h) * Q[s][a])
        else:
            stop = sum(Q[s][a] * drop_prob(s, a, P, Q) for a in range(V))
            emit(s, mass * stop)
            for a in range(V):
                walk(s + (a,), mass * Q[s][a] * (1 - drop_prob(s, a, P, Q)))
    walk((), F(1))

    def complete(law):
        out = {}
        for b, m in law.items():
            todo = [(b, m)]
            while todo:
                s, mm = todo.pop()
                if len(s) == L + 1:
                    out[s] = out.get(s, 0) + mm
                    continue
                todo += [(s + (a,), mm * P[s][a]) for a in range(V)]
        return np.array([out.get(s, F(0)) for s in itertools.product(range(V), repeat=L + 1)],
                        dtype=object)
    e_tau1 = sum((len(b) * m for b, m in blocks.items()), F(0))
    return complete(blocks), complete({(): F(1)}), e_tau1, e_n


def bf_lp(inst, stop_prob):
    """The node-budget closed form with q_stop: 1 + sum_s M*(s)."""
    V, L = inst.vocab_size, inst.block_length
    P, Q = rows_of(inst)
    total = F(1)

    def rec(s, reach, m_parent):
        nonlocal total
        if not s:
            h = stop_prob(s, P, Q)
            for a in range(V):
                rec((a,), (1 - h) * Q[()][a], F(1))
            return
        M = min(reach, P[s[:-1]][s[-1]] * m_parent)
        total += M
        if len(s) < L:
            h = stop_prob(s, P, Q)
            for a in range(V):
                rec(s + (a,), reach * (1 - h) * Q[s][a], M)
    rec((), F(1), F(1))
    return total


# Brute-force versions of the built-in rules (own comparisons, in Fractions).
BF_STOP = {
    "never": lambda s, P, Q: F(0),
    "draft-confidence(1/2)": lambda s, P, Q: F(int(max(Q[s]) < F(1, 2))),
    "draft-prob(1/2)": lambda s, P, Q: F(int(bool(s) and Q[s[:-1]][s[-1]] < F(1, 2))),
    "target-peek(1)": lambda s, P, Q: F(int(bool(s) and P[s[:-1]][s[-1]] < Q[s[:-1]][s[-1]])),
    "coin(1/3)": lambda s, P, Q: F(1, 3),
    "draft-soft-confidence": lambda s, P, Q: 1 - max(Q[s]),
}
BF_DROP = {
    "draft-drop(1/2)": lambda s, a, P, Q: F(int(Q[s][a] < F(1, 2))),
    "target-drop(1)": lambda s, a, P, Q: F(int(Q[s][a] > 0 and P[s][a] < Q[s][a])),
}
VERIFIERS = {"token": bf_token, "block": bf_block}


# ----------------------------------------------------------------------------- exact values


@pytest.mark.parametrize("name", sorted(INSTANCES))
@pytest.mark.parametrize("rule", sorted(BF_STOP))
@pytest.mark.parametrize("verifier", ["token", "block"])
def test_stop_rules_equal_brute_force_and_are_lossless(name, rule, verifier):
    inst = INSTANCES[name]()
    res = analyze_adaptive(inst, verifier, rule)
    out, tgt, e_tau1, e_n = bf_law(inst, VERIFIERS[verifier], stop_prob=BF_STOP[rule])
    assert list(res.output_law) == list(out)
    assert res.block_efficiency == e_tau1 and res.expected_drafted == e_n
    assert sum(res.length_pmf) == 1 and sum(res.tau_pmf) == 1
    # a stopping time of the draft: lossless exactly, whatever the rule reads (target-peek)
    assert list(out) == list(tgt) and res.tv_to_target == 0 and res.lossless
    assert res.offending is None
    if e_n:
        assert res.tokens_per_drafted == e_tau1 / e_n


@pytest.mark.parametrize("name", sorted(INSTANCES))
@pytest.mark.parametrize("rule", sorted(BF_DROP))
@pytest.mark.parametrize("verifier", ["token", "block"])
def test_drop_rules_equal_brute_force(name, rule, verifier):
    inst = INSTANCES[name]()
    res = analyze_adaptive(inst, verifier, rule)
    out, tgt, e_tau1, e_n = bf_law(inst, VERIFIERS[verifier], drop_prob=BF_DROP[rule])
    assert list(res.output_law) == list(out)
    assert res.block_efficiency == e_tau1 and res.expected_drafted == e_n
    tv = sum(abs(a - b) for a, b in zip(out, tgt)) / 2
    assert res.tv_to_target == tv and res.lossless == (tv == 0)
    if tv:
        V, L = inst.vocab_size, inst.block_length
        k = next(i for i, (a, b) in enumerate(zip(out, tgt)) if a != b)
        assert res.offending == next(itertools.islice(
            itertools.product(range(V), repeat=L + 1), k, None))
        assert (res.output_probability, res.target_probability) == (out[k], tgt[k])


def test_drop_rules_are_lossy_draft_only_included():
    """Dropping the drafted token on its own value is no stopping time: lossy, even when the
    rule reads only the draft. Exact TVs and the first offending sequence on the skew instance."""
    inst = skew_instance()
    for rule in ("draft-drop(1/2)", "target-drop(1)"):
        for v in ("token", "block"):
            res = analyze_adaptive(inst, v, rule)
            assert not res.lossless and res.tv_to_target > 0, (rule, v)
            assert res.output_probability != res.target_probability
    res = analyze_adaptive(inst, "token", "target-drop(1)")
    out, tgt, _, _ = bf_law(inst, bf_token, drop_prob=BF_DROP["target-drop(1)"])
    assert res.tv_to_target == sum(abs(a - b) for a, b in zip(out, tgt)) / 2


@pytest.mark.parametrize("name", sorted(INSTANCES))
@pytest.mark.parametrize("rule", sorted(BF_STOP) + sorted(BF_DROP))
def test_stop_aware_block_is_lossless_and_attains_the_lp(name, rule):
    inst = INSTANCES[name]()
    aware = analyze_adaptive(inst, "block", rule, aware=True)
    assert aware.lossless and aware.tv_to_target == 0
    lp = adaptive_node_budget_lp(inst, rule, exact=True)
    assert lp.solver == "exact-certificate" and lp.optimum == aware.block_efficiency
    if rule in BF_STOP:
        assert lp.optimum == bf_lp(inst, BF_STOP[rule])


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_block_optimal_under_deterministic_rules_not_under_randomised(name):
    inst = INSTANCES[name]()
    for rule in ("never", "draft-confidence(1/2)", "draft-prob(1/2)", "target-peek(1)"):
        r = adaptive_optimality(inst, rule)
        assert r.deterministic and r.block_lossless and r.token_lossless
        assert r.optimal and r.gap == 0 and r.block == r.aware, rule
        assert r.token <= r.block
    r = adaptive_optimality(inst, "coin(1/3)")
    assert not r.deterministic and r.block_lossless and r.block <= r.optimum
    assert r.optimum == r.aware


def test_randomised_rule_gap_is_positive_on_a_known_instance():
    r = adaptive_optimality(skew_instance(), "coin(1/3)")
    assert r.gap > 0 and not r.optimal
    assert r.optimum == bf_lp(skew_instance(), BF_STOP["coin(1/3)"])
    _, _, blk, _ = bf_law(skew_instance(), bf_block, stop_prob=BF_STOP["coin(1/3)"])
    assert r.block == blk


def test_float_mode_matches_exact():
    inst = rational_random(3, 2, 5, 12)
    for rule in ("draft-confidence(1/2)", "coin(1/3)", "draft-drop(1/3)", "target-peek(1)"):
        for v in ("token", "block"):
            ex = analyze_adaptive(inst, v, rule)
            fl = analyze_adaptive(inst.to_float(), v, rule)
            assert fl.block_efficiency == pytest.approx(float(ex.block_efficiency), abs=1e-12)
            assert fl.tv_to_target == pytest.approx(float(ex.tv_to_target), abs=1e-12)
            assert fl.lossless == ex.lossless
        lp = adaptive_node_budget_lp(inst.to_float(), rule)
        assert lp.optimum == pytest.approx(float(adaptive_node_budget_lp(inst, rule, True).optimum),
                                           abs=1e-7)


def test_threshold_tie_is_the_same_in_float_and_exact():
    """Rows at exactly 1/3 against draft-prob(1/3): no stop in rationals, none in float."""
    inst = rational_random(3, 3, 4, 12)
    ex = analyze_adaptive(inst, "block", "draft-prob(1/3)")
    fl = analyze_adaptive(inst.to_float(), "block", "draft-prob(1/3)")
    assert fl.expected_drafted == pytest.approx(float(ex.expected_drafted), abs=1e-12)


def test_never_equals_the_fixed_length_engine():
    import spectheory as st

    for name, make in INSTANCES.items():
        inst = make()
        for v in ("token", "block"):
            assert analyze_adaptive(inst, v, "never").block_efficiency == \
                st.analyze(inst, v).block_efficiency, (name, v)


# ----------------------------------------------------------------------------- planted bugs


def test_planted_bug_stop_probability_one_position_late(monkeypatch):
    """The stop probability of s applied after drafting one more token (the rule read at the
    parent): still lossless, but the exact values differ from the brute force."""
    import spectheory.engine.adaptive as A

    real = A._kernel

    def late(rule, q_levels, p_levels, V, L, exact):
        K, H = real(rule, q_levels, p_levels, V, L, exact)
        for d in range(L - 1, 0, -1):  # depth d uses depth d-1's decision
            H[d] = np.repeat(H[d - 1], V)
            K[d] = (1 - H[d])[:, None] * q_levels[d]
        H[0] = H[0] * 0
        K[0] = q_levels[0] * 1
        return K, H
    inst = tie_instance()
    _, _, e_tau1, e_n = bf_law(inst, bf_block, stop_prob=BF_STOP["draft-prob(1/2)"])
    assert analyze_adaptive(inst, "block", "draft-prob(1/2)").block_efficiency == e_tau1
    monkeypatch.setattr(A, "_kernel", late)
    bad = analyze_adaptive(inst, "block", "draft-prob(1/2)")
    assert (bad.block_efficiency, bad.expected_drafted) != (e_tau1, e_n)


def test_planted_bug_draft_only_rule_handed_the_target(monkeypatch):
    """A draft-only rule gets p_rows = None; an engine that hands it the target rows is caught
    by a rule that refuses them."""
    import spectheory.engine.adaptive as A

    def strict(s, q, p):
        assert p is None, "a draft-only rule was given the target rows"
        return F(int(max(q[-1]) < F(2, 3)))
    rule = StoppingRule("strict", strict)
    inst = skew_instance()
    analyze_adaptive(inst, "token", rule)  # the engine as built passes
    real = A._kernel
    monkeypatch.setattr(A, "_kernel", lambda r, q, p, V, L, e: real(r, q, q, V, L, e))
    with pytest.raises(UserCodeError, match="draft-only rule was given the target rows"):
        analyze_adaptive(inst, "token", rule)


def test_planted_bug_stop_weight_forgotten(monkeypatch):
    """A drafted block weighted by the probability of reaching it, without the probability of
    stopping there: caught by the exact values and the pmf's sum."""
    import spectheory.engine.adaptive as A

    inst = tie_instance()
    _, _, e_tau1, _ = bf_law(inst, bf_block, stop_prob=BF_STOP["coin(1/3)"])
    assert analyze_adaptive(inst, "block", "coin(1/3)").block_efficiency == e_tau1
    real = A.stop_masses

    def forgotten(K, H, L, exact):
        reach, stop = real(K, H, L, exact)
        return reach, [np.where(H[d] != 0, reach[d], reach[d] * 0) for d in range(L)] + [stop[L]]
    monkeypatch.setattr(A, "stop_masses", forgotten)
    bad = analyze_adaptive(inst, "block", "coin(1/3)")
    assert bad.block_efficiency != e_tau1 and sum(bad.tau_pmf) != 1


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("text,match", [
    ("draft-confidence", "needs a parameter"), ("draft-confidence(2)", "above 1"),
    ("draft-confidence(-1)", "is negative"), ("nonsense(1)", "unknown stopping rule"),
    ("never(1)", "takes no parameter"), ("coin(1/0)", "not a number"),
    ("draft-prob(nan)", "not a non-negative"), ("draft-prob(" + "9" * 50 + ")", "50 characters; at most 40"),
    (3, "not a rule name"),
])
def test_bad_rules_refused_in_one_line(text, match):
    with pytest.raises(InputError, match=match):
        parse_rule(text)


def test_rule_values_checked():
    inst = skew_instance()
    for fn, match in [(lambda s, q, p: 0.5, "in exact mode"), (lambda s, q, p: F(3, 2),
                                                               "not a probability"),
                      (lambda s, q, p: 1 / 0, "raised"), (lambda s, q, p: "x", "in exact mode")]:
        with pytest.raises(UserCodeError, match=match):
            analyze_adaptive(inst, "block", StoppingRule("bad", fn))
    with pytest.raises(UserCodeError, match="returns 3"):
        analyze_adaptive(inst, "block", StoppingRule("bad", lambda s, q, p: [0, 0], kind="drop"))
    with pytest.raises(UserCodeError, match="not a finite"):
        analyze_adaptive(inst.to_float(), "block",
                         StoppingRule("bad", lambda s, q, p: float("nan")))
    with pytest.raises(InputError, match="kind"):
        StoppingRule("bad", lambda s, q, p: 0, kind="maybe")


def test_size_guard_before_work():
    inst = random_instance(8, 6, 0)
    with pytest.raises(SizeLimitError):
        analyze_adaptive(inst, "block", "never", max_sequences=1000)
    # a K-path verifier runs with one path: SpecInfer with K = 1 is token verification
    a = analyze_adaptive(skew_instance(), "specinfer", "coin(1/3)")
    assert a.output_law.tolist() == analyze_adaptive(skew_instance(), "token",
                                                     "coin(1/3)").output_law.tolist()


def test_continuation_kernel_rows():
    K, H = continuation_levels(tie_instance(), "draft-confidence(1/2)")
    # root row (1/2, 1/2): max = 1/2 is not below 1/2, so the draft goes on
    assert H[0][0] == 0 and list(K[0][0]) == [F(1, 2), F(1, 2)]
    # prefix (1,): row (2/3, 1/3), no stop either; every row K + H = q-mass 1
    for d in range(3):
        assert all(sum(K[d][n]) + H[d][n] == 1 for n in range(2**d))


# ----------------------------------------------------------------------------- command line


def test_cli_exact_stop(tmp_path, capsys):
    import json

    from spectheory.inputs.instances import instance_to_dict
    from tests.cli_helpers import run, write

    inst = skew_instance()
    path = write(tmp_path, instance_to_dict(inst))
    code, out, err = run(["exact", path, "--exact", "--verifier", "token", "--stop",
                          "target-drop(1)", "--json"], capsys)
    obj = json.loads(out)
    _, _, e_tau1, e_n = bf_law(inst, bf_token, drop_prob=BF_DROP["target-drop(1)"])
    assert code == 0 and obj["block_efficiency"] == str(e_tau1)
    assert obj["expected_drafted"] == str(e_n) and obj["lossless"] is False
    code, out, _ = run(["exact", path, "--exact", "--stop", "coin(1/3)", "--stop-aware",
                        "--json"], capsys)
    assert json.loads(out)["block_efficiency"] == str(bf_lp(inst, BF_STOP["coin(1/3)"]))
    for extra, match in [(["--stop", "nope"], "unknown stopping rule"),
                         (["--stop-aware"], "needs --stop"),
                         (["--stop", "coin(1/2)", "--executor", "local"], "does not combine"),
                         (["--stop", "coin(1/2)", "--verifier", "gbv", "--paths", "2"],
                          "one draft path")]:
        code, out, err = run(["exact", path, *extra], capsys)
        assert code == 2 and out == "" and match in err and len(err.strip().splitlines()) == 1
    # a float-only rule under --exact: the rule's own TypeError came out as a traceback (exit 1)
    for name, shown in (("typical(0.09,0.3)", "typical(0.09, 0.3)"), ("cactus", "cactus")):
        code, out, err = run(["exact", path, "--exact", "--verifier", name, "--stop",
                              "coin(1/3)"], capsys)
        assert code == 2 and out == "" and err == (
            f"spectheory: error: verifier {shown!r} has a float law only (no exact rational "
            "mode); drop --exact / exact=True\n"), err


def test_the_analysis_is_refused_when_its_memory_would_not_fit(monkeypatch):
    """The adaptive analysis holds about 520 B a leaf of the V^(L+1) tree, ten times the exact
    engine's 48 B its size guard assumed: V = 4, L = 12, at the default float limit, ran out of
    24 GB after 6 minutes. Its own bytes per leaf are checked against the machine first (here on
    instances small enough that a broken guard still ends quickly)."""
    from spectheory.engine.adaptive import ADAPTIVE_BYTES_PER_LEAF, analyze_adaptive
    from spectheory.runtime import limits
    from spectheory.runtime.errors import SizeLimitError
    from spectheory.runtime.sizes import check_size

    monkeypatch.setattr(limits, "physical_memory", lambda: 24 * 2**30)
    with pytest.raises(SizeLimitError, match=r"adaptive exact analysis: V\^\(L\+1\) = 4\^13 = "
                                             r"67,108,864 sequences needs about 40 GiB"):
        check_size(4**13, "adaptive exact analysis", False, None, "V^(L+1) = 4^13",
                   bytes_per_leaf=ADAPTIVE_BYTES_PER_LEAF[False])
    assert ADAPTIVE_BYTES_PER_LEAF[False] >= 520 and ADAPTIVE_BYTES_PER_LEAF[True] >= 800
    # the bound is the leaves times the adaptive analysis's own bytes: 3^9 leaves pass with
    # 2 * 3^9 * 640 B of memory and are refused with a byte less
    small = random_instance(3, 8, 0, context_independent=True)
    need = 3**9 * ADAPTIVE_BYTES_PER_LEAF[False]
    monkeypatch.setattr(limits, "physical_memory", lambda: 2 * need - 1)
    with pytest.raises(SizeLimitError, match="19,683 sequences needs about 12 MiB"):
        analyze_adaptive(small, "block", "never")
    monkeypatch.setattr(limits, "physical_memory", lambda: 2 * need)
    assert analyze_adaptive(small, "block", "never").lossless


@pytest.mark.parametrize("flag", ["reads_target", "deterministic"])
def test_a_rule_flag_given_as_text_is_refused(flag):
    """``StoppingRule(..., reads_target="no")`` was read as true: the rule was handed the target
    rows and reported reads_target='no'."""
    from spectheory.runtime.errors import OptionError

    with pytest.raises(OptionError, match=rf"^stopping rule 'r' {flag} = 'no' must be True or "
                                          r"False"):
        StoppingRule("r", lambda *a: 0, **{flag: "no"})
    rule = StoppingRule("r", lambda *a: 0, **{flag: np.bool_(True)})
    assert getattr(rule, flag) is True
    assert StoppingRule("r", lambda *a: 0).deterministic is None


def test_a_gap_of_2e_7_is_no_optimum_in_float_mode_either():
    """coin(1/10^7): block verification under a random stop is below the LP optimum by an exact
    gap of 2.39e-7 (rationals); float mode finds the same gap and must not call it optimal (its
    tolerance is 1e-9, the LP's own accuracy, not 1e-6)."""
    inst = random_instance(2, 3, 0, denominator=10)
    exact = adaptive_optimality(inst, "coin(1/10000000)")
    assert not exact.optimal and F(2, 10**7) < exact.gap < F(3, 10**7)
    flt = adaptive_optimality(inst.to_float(), "coin(1/10000000)", exact=False)
    assert abs(float(flt.gap) - float(exact.gap)) < 1e-12
    assert not flt.optimal
    assert adaptive_optimality(inst.to_float(), "coin(0)", exact=False).optimal  # no stop


def test_a_rule_random_at_the_last_drafted_depth_is_not_deterministic():
    """A stop rule with h = 1/2 after one token (the last depth where L = 2 can stop before the
    end) randomises; only depths before it were read, and it was reported deterministic."""
    inst = Instance(2, 2, TableModel(2, (np.array([[F(1, 3), F(2, 3)]], dtype=object),)),
                    TableModel(2, (np.array([[F(2, 3), F(1, 3)]], dtype=object),)))
    half = StoppingRule("half-at-depth-1", lambda s, q, p: F(1, 2) if len(s) == 1 else 0)
    r = adaptive_optimality(inst, half)
    assert not r.deterministic and r.gap == F(1, 9)
    sure = StoppingRule("stop-at-depth-1", lambda s, q, p: 1 if len(s) == 1 else 0)
    assert adaptive_optimality(inst, sure).deterministic


def test_a_long_float_adaptive_analysis_is_announced_with_its_own_estimate(tmp_path, capsys,
                                                                            monkeypatch):
    """V = 2, L = 21 under coin(1/2) ran past 55 s with no note: the estimate was the per-leaf
    rate of the other routes (21 s, under the 30 s note), where the stopping rule's Python call
    at each of the 2^21 prefixes dominates (`float_seconds`: 2^18 measured 10.8 s, 2^20 51 s)."""
    from spectheory.engine.adaptive import float_seconds
    from tests.cli_helpers import run

    assert float_seconds(2, 21) > 60 and float_seconds(4, 8) < 2  # measured 0.75 s
    path = tmp_path / "L21.json"
    path.write_text(json.dumps({"vocab_size": 2, "block_length": 21, "target": [0.3, 0.7],
                                "draft": [0.6, 0.4]}))
    import spectheory.engine.adaptive as adaptive

    def stop_here(*args, **kwargs):  # the work itself is not run: the note comes before it
        raise InputError("stopped after the size check")

    monkeypatch.setattr(adaptive, "levels", stop_here)
    code, out, err = run(["exact", str(path), "--stop", "coin(1/2)"], capsys)
    assert code == 2 and out == "" and "stopped after the size check" in err
    note = [ln for ln in err.splitlines() if "note: adaptive" in ln]
    assert len(note) == 1 and "4,194,304 sequences, estimated 2" in note[0], err
    assert "(at about" not in note[0]  # not the per-leaf rate


def test_a_negative_zero_parameter_is_zero_and_a_negative_one_says_negative():
    """coin(-0.0) was "not a non-negative decimal" where additive(-0.0) is read as 0; -0.5 is
    refused as negative, not as unreadable."""
    from spectheory.engine.adaptive import parse_rule

    for text in ("coin(-0.0)", "coin(-0)", "coin(-0/3)", "coin(-0e5)"):
        assert parse_rule(text).name == "coin(0)", text
    with pytest.raises(InputError, match=r"parameter '-0\.5' is negative"):
        parse_rule("coin(-0.5)")
    with pytest.raises(InputError, match="is not a non-negative decimal"):
        parse_rule("coin(-x)")


def test_an_adaptive_size_past_the_float_range_is_refused_not_an_overflow():
    """V = 100,000, L = 64: the new time estimate multiplied floats by V^d past 1e308 and raised
    a bare OverflowError before the size check refused the instance."""
    from spectheory.engine.adaptive import float_seconds

    assert float_seconds(100_000, 64) == float("inf")
    with pytest.raises(SizeLimitError, match="sequences exceed the float64 limit"):
        analyze_adaptive(random_instance(100_000, 64, 0, context_independent=True), "token",
                         "never", exact=False)
