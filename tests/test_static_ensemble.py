"""Static ensemble verification (DIVERSED, arXiv 2604.07622; transformers PR #45979): the exact
law against a hand-written formula at L = 1 (E[tau + 1] = 2 - w T, TV = (1 - w) T, T = TV(p, q)
at the root) and against a brute-force walk written here in plain Fractions at L = 2, on
prefix-dependent instances with ties; the float64 routes agree; planted bugs are caught."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction as F

import pytest

import spectheory as st
from spectheory.inputs.instances import instance_from_dict, instance_to_dict
from spectheory.registry import VerifierSpec
from spectheory.verifiers.static_ensemble import static_ensemble, static_ensemble_greedy

from cli_helpers import run, write

WEIGHTS = [F(0), F(1, 3), F(1, 2), F(3, 4), F(1)]


def one_token(p, q, level1=None):
    """An L = 1 instance with root rows p, q (and prefix-dependent rows after the first token
    when ``level1`` is given)."""
    V = len(p)
    target = [str(x) for x in p] if level1 is None else \
        {"": [str(x) for x in p], **{str(a): [str(x) for x in level1[a]] for a in range(V)}}
    return instance_from_dict({"vocab_size": V, "block_length": 1, "target": target,
                               "draft": [str(x) for x in q]}, exact=True)


def l1_instances():
    third, sixth = F(1, 3), F(1, 6)
    out = [
        one_token([F(1, 2), third, sixth], [sixth, F(1, 2), third]),
        one_token([F(1, 2), F(1, 2)], [F(1, 2), F(1, 2)]),  # p = q: T = 0
        one_token([F(1), F(0), F(0)], [F(0), F(1, 2), F(1, 2)]),  # disjoint supports: T = 1
        one_token([F(1, 4)] * 4, [F(1, 2), F(1, 4), F(1, 4), F(0)]),  # ties in p
        one_token([third, third, third], [F(1, 2), F(1, 2), F(0)],
                  level1=[[F(1), F(0), F(0)], [F(0), F(1, 2), F(1, 2)], [third] * 3]),
    ]
    out += [st.random_instance(V, 1, seed, alpha=0.5, denominator=6)
            for V, seed in ((2, 0), (3, 1), (4, 2), (3, 5))]
    return out


def rows(inst, which, prefix):
    V, idx = inst.vocab_size, 0
    for t in prefix:
        idx = idx * V + t
    table = inst.target if which == "p" else inst.draft
    return [F(v) for v in table.level(len(prefix))[idx]]


def tv_rows(a, b):
    return sum((abs(x - y) for x, y in zip(a, b)), F(0)) / 2


def test_one_token_law_is_the_hand_formula_on_the_command_line(tmp_path, capsys):
    """The done-when check: ``spectheory exact INST --verifier 'static-ensemble(w)' --exact
    --json`` at L = 1 gives E[tau + 1] = 2 - w T and TV = (1 - w) T."""
    for k, inst in enumerate(l1_instances()):
        T = tv_rows(rows(inst, "p", ()), rows(inst, "q", ()))
        path = write(tmp_path, instance_to_dict(inst), f"i{k}.json")
        for w in WEIGHTS:
            code, out, err = run(["exact", path, "--verifier", f"static-ensemble({w})",
                                  "--exact", "--json"], capsys)
            assert code == 0, err
            got = json.loads(out)
            assert F(got["block_efficiency"]) == 2 - w * T, (k, w)
            assert F(got["tv_to_target"]) == (1 - w) * T, (k, w)
            assert got["tau_pmf"] == [str(w * T), str(1 - w * T)]


def test_acceptance_rises_from_one_minus_tv_to_one_minus_w_tv():
    """Per token: P(accept) = 1 - w TV(q, p), token verification's 1 - TV(q, p) at w = 1."""
    for inst in l1_instances():
        T = tv_rows(rows(inst, "p", ()), rows(inst, "q", ()))
        token = st.analyze(inst, "token").tau_pmf[1]
        assert token == 1 - T
        for w in WEIGHTS:
            assert st.analyze(inst, static_ensemble(w)).tau_pmf[1] == 1 - w * T


# ----------------------------------------------------------------------------- brute force


def complete(inst, law, block, mass):
    L1 = inst.block_length + 1
    if len(block) == L1:
        law[block] = law.get(block, F(0)) + mass
        return
    p = rows(inst, "p", block)
    for a, pa in enumerate(p):
        if pa:
            complete(inst, law, block + (a,), mass * pa)


def walk(inst, w, greedy=False):
    """(law over V^(L+1), E[tau + 1]) of static ensemble verification, by walking every drafted
    path node by node (module doc of spectheory.verifiers.static_ensemble)."""
    V, L = inst.vocab_size, inst.block_length
    law, E = {}, F(0)
    for x in itertools.product(range(V), repeat=L):
        Qx = F(1)
        for i in range(L):
            Qx *= rows(inst, "q", x[:i])[x[i]]
        if Qx == 0:
            continue
        reach = Qx
        for i in range(L):
            p, q = rows(inst, "p", x[:i]), rows(inst, "q", x[:i])
            v = [w * a + (1 - w) * b for a, b in zip(p, q)]
            if greedy:
                g = max(range(V), key=lambda t: (v[t], -t))
                acc = F(int(x[i] == g))
                res = [F(int(t == g)) for t in range(V)]
            else:
                acc = min(F(1), v[x[i]] / q[x[i]])
                pos = [max(a - b, F(0)) for a, b in zip(v, q)]
                res = [a / sum(pos) for a in pos] if sum(pos) else p
            rej = reach * (1 - acc)
            if rej:
                E += rej * (i + 1)
                for y in range(V):
                    if res[y]:
                        complete(inst, law, x[:i] + (y,), rej * res[y])
            reach *= acc
        if reach:
            E += reach * (L + 1)
            p = rows(inst, "p", x)
            if greedy:
                g = max(range(V), key=lambda t: (p[t], -t))
                law[x + (g,)] = law.get(x + (g,), F(0)) + reach
            else:
                complete(inst, law, x, reach)
    return law, E


def engine_law(res, V, L):
    return {seq: F(res.output_law[i]) for i, seq in
            enumerate(itertools.product(range(V), repeat=L + 1)) if res.output_law[i] != 0}


def l2_instances():
    out = [st.random_instance(V, 2, seed, alpha=0.5, denominator=6)
           for V, seed in ((2, 0), (3, 1), (3, 4), (2, 7))]
    third = F(1, 3)
    out.append(instance_from_dict({
        "vocab_size": 3, "block_length": 2,
        "target": {"": ["1/3", "1/3", "1/3"], "0": ["1", "0", "0"], "1": ["0", "1/2", "1/2"],
                   "2": ["1/3", "1/3", "1/3"], **{f"{a},{b}": ["1/3", "1/3", "1/3"]
                                                  for a in range(3) for b in range(3)}},
        "draft": {"": ["1/2", "1/2", "0"], "0": ["0", "1/2", "1/2"], "1": ["1/2", "1/2", "0"],
                  "2": ["1", "0", "0"]}}, exact=True))
    assert third  # ties at the root, disjoint supports below
    return out


@pytest.mark.parametrize("greedy", [False, True])
def test_two_token_law_equals_a_brute_force_walk(greedy):
    make = static_ensemble_greedy if greedy else static_ensemble
    for inst in l2_instances():
        V, L = inst.vocab_size, inst.block_length
        target = {}
        complete(inst, target, (), F(1))
        for w in WEIGHTS:
            law, E = walk(inst, w, greedy)
            res = st.analyze(inst, make(w))
            assert res.exact and engine_law(res, V, L) == law, (w, greedy)
            assert res.block_efficiency == E
            keys = set(law) | set(target)
            assert res.tv_to_target == sum((abs(law.get(k, F(0)) - target.get(k, F(0)))
                                            for k in keys), F(0)) / 2


def test_weight_one_is_token_verification_and_declared_lossless():
    for inst in l2_instances():
        a, b = st.analyze(inst, "static-ensemble(1)"), st.analyze(inst, "token")
        assert list(a.output_law) == list(b.output_law) and a.tv_to_target == 0
    assert static_ensemble(1).lossless and static_ensemble(1.0).lossless
    assert not static_ensemble(F(99, 100)).lossless and not static_ensemble(0).lossless
    assert not static_ensemble_greedy(1).lossless
    # below one, some instance shows the bias
    assert st.analyze(l2_instances()[0], "static-ensemble(99/100)").tv_to_target > 0


def test_pr_greedy_example_accepts_where_greedy_matching_rejects():
    """transformers' test: p = (0.50, 0.49, 0.01), q = (0.10, 0.89, 0.01), w = 0.5: argmax v is
    the drafted token 1, argmax p is 0."""
    p = [F(50, 100), F(49, 100), F(1, 100)]
    q = [F(0), F(1), F(0)]  # the assistant drafts its argmax, token 1
    inst = one_token(p, q)
    # v uses q as given: with q one-hot on 1, v(1) = 1/2 * 49/100 + 1/2 > v(0)
    assert st.analyze(inst, static_ensemble_greedy(F(1, 2))).tau_pmf[1] == 1
    assert st.analyze(inst, "greedy").tau_pmf[1] == 0
    assert st.analyze(inst, static_ensemble_greedy(1)).tau_pmf[1] == 0


def test_float_routes_agree_with_the_exact_law():
    for inst in l2_instances()[:3]:
        for w in (F(1, 3), F(3, 4)):
            exact = st.analyze(inst, static_ensemble(w))
            for backend in ("numpy", "torch"):
                fl = st.analyze(inst.to_float(), f"static-ensemble({w})", backend=backend)
                assert fl.backend == backend
                assert abs(float(fl.block_efficiency) - float(exact.block_efficiency)) < 1e-12
                assert abs(float(fl.tv_to_target) - float(exact.tv_to_target)) < 1e-12


# ----------------------------------------------------------------------------- planted bugs


def _planted(bug):
    """static ensemble with one planted bug: ``swap`` the weights (v = (1 - w) p + w q),
    ``sign`` the residual max(q - v, 0), ``bonus`` the bonus row from the draft's last row."""
    from spectheory.runtime import backend as B
    from spectheory.verifiers.common import drafted_probs
    from spectheory.verifiers.contrasts import _normalise, chain_law

    w = F(1, 3)

    def law(drafts, q, p):
        L = drafts.shape[-1]
        px, qx = drafted_probs(drafts, q, p)
        wt, wd = (1 - w, w) if bug == "swap" else (w, 1 - w)
        vx = px * wt + qx * wd
        a = B.minimum(B.safe_div(vx, qx, B.scalar(px, 1)), 1)
        v = p[:, :L] * wt + q * wd
        res = B.positive_part(q - v) if bug == "sign" else B.positive_part(v - q)
        bonus = q[:, L - 1] if bug == "bonus" else p[:, L]
        return chain_law(a, _normalise(res, p[:, :L]), bonus)

    return VerifierSpec(f"planted-{bug}", law, lossless=False)


@pytest.mark.parametrize("bug", ["swap", "sign", "bonus"])
def test_the_brute_force_walk_catches_a_planted_bug(bug):
    caught = False
    for inst in l2_instances():
        law, E = walk(inst, F(1, 3))
        res = st.analyze(inst, _planted(bug))
        caught |= engine_law(res, inst.vocab_size, inst.block_length) != law
    assert caught


# ----------------------------------------------------------------------------- the ledger's rows


def test_ledger_rows_recomputed_independently():
    """The DIVERSED rows of the claims ledger, recomputed by tests/independent_claims.py (own
    enumeration, own frontier LP with an exact certificate) and found in each row's numbers."""
    import independent_claims as ind
    from spectheory.lp import claims
    from spectheory.lp.claims import diversed as D

    rows = {r.claim.id: r for r in claims.run_claims("diversed")}
    assert all(r.matches for r in rows.values())
    for (V, seed) in D.L1:
        m = ind.Model(instance_to_dict(D.instance(V, 1, seed)))
        T = ind.tv(ind.static_ensemble(m, 1)[0], m)  # 0: token verification is lossless
        assert T == 0
        p, q = m.p_rows(()), m.q_rows(())
        T = sum((abs(a - b) for a, b in zip(p, q)), F(0)) / 2
        accs = []
        for w in D.WEIGHTS:
            law, E, acc = ind.static_ensemble(m, w)
            tv = ind.tv(law, m)
            assert acc == 1 - w * T and E == 2 - w * T and tv == (1 - w) * T
            front = ind.frontier_lp(m, tv)
            assert front == E  # per token: on the frontier
            accs.append(acc)
            assert f"(TV {D.f(tv)}, E {D.f(E)}, frontier {D.f(front)})" in \
                rows["diversed-pareto-one-token"].finding.ours
        assert ", ".join(map(D.f, accs)) in rows["diversed-acceptance-identity"].finding.ours
    strictly_below = False
    for (V, seed) in D.L2:
        m = ind.Model(instance_to_dict(D.instance(V, 2, seed)))
        for w in D.WEIGHTS:
            law, E, _ = ind.static_ensemble(m, w)
            tv = ind.tv(law, m)
            front = ind.frontier_lp(m, tv)
            assert E <= front
            strictly_below |= w > 0 and E < front
            assert f"w = {D.f(w)}: E {D.f(E)} at TV {D.f(tv)}, frontier {D.f(front)}" in \
                rows["diversed-pareto-not-over-blocks"].finding.ours
    assert strictly_below
