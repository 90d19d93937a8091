"""The lossy rules shipped in 2026: speculative cascades (OPT, TokenV1-V3; arXiv 2405.19261, MTPLX
#485), Entropy Verify (vllm-ascend #9772), EARS (vllm-ascend #7845) and Medusa's typical
acceptance as its repository runs it. Each law is checked against a brute-force walk written here
(plain Fractions for the rational rules, Python floats for the others) at L = 1 and L = 2 on
prefix-dependent instances with ties; the lossless limits; the difference between ``typical`` and
``typical-medusa``; planted bugs; and the position of each rule against the lossy frontier LP."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction as F

import pytest

import spectheory as st
from spectheory.inputs.instances import instance_from_dict
from spectheory.registry import VerifierSpec
from spectheory.runtime.errors import OptionError
from spectheory.verifiers import cascades as K
from spectheory.verifiers.contrasts import typical_acceptance, typical_medusa
from spectheory.verifiers.ears import ears
from spectheory.verifiers.entropy_verify import entropy_verify

# ----------------------------------------------------------------------------- instances


def rows(inst, which, prefix, exact=True):
    V, idx = inst.vocab_size, 0
    for t in prefix:
        idx = idx * V + t
    table = inst.target if which == "p" else inst.draft
    conv = F if exact else float
    return [conv(v) for v in table.level(len(prefix))[idx]]


def one_token(p, q, level1=None):
    V = len(p)
    target = [str(x) for x in p] if level1 is None else \
        {"": [str(x) for x in p], **{str(a): [str(x) for x in level1[a]] for a in range(V)}}
    return instance_from_dict({"vocab_size": V, "block_length": 1, "target": target,
                               "draft": [str(x) for x in q]}, exact=True)


def instances():
    """L = 1 and L = 2, prefix-dependent rows on a grid of sixths (ties, zeros), a hand-made root
    with ties in p and a p = q node."""
    third, sixth = F(1, 3), F(1, 6)
    return [
        one_token([F(1, 2), third, sixth], [sixth, F(1, 2), third]),
        one_token([F(1, 4)] * 4, [F(1, 2), F(1, 4), F(1, 4), F(0)]),  # ties in p
        one_token([third, third, third], [F(1, 2), F(1, 2), F(0)],
                  level1=[[F(1), F(0), F(0)], [F(0), F(1, 2), F(1, 2)], [third] * 3]),
        st.random_instance(3, 1, 2, alpha=0.5, denominator=6),
        st.random_instance(3, 2, 1, alpha=0.5, denominator=6),
        st.random_instance(2, 2, 3, denominator=6),
        st.random_instance(3, 2, 4, alpha=0.3, denominator=6),
    ]


# ----------------------------------------------------------------------------- brute force


def normalise(row, fallback):
    s = sum(row)
    return [v / s for v in row] if s else list(fallback)


def tv(a, b):
    return sum(abs(x - y) for x, y in zip(a, b)) / 2


def spec_sampling(pi, p, q, x):
    """(a, r) of token verification of x against the node law pi (r: p where empty)."""
    a = min(1, pi[x] / q[x])
    return a, normalise([max(u - v, 0) for u, v in zip(pi, q)], p)


def cascade_node(kind, alpha):
    def node(p, q, x):
        T = sum(max(u - v, 0) for u, v in zip(p, q))
        if kind == "opt":
            pi = p if max(q) < max(p) - alpha * T else q
        else:
            bar = {"v1": max(p) - alpha, "v2": max(p) - alpha * T,
                   "v3": (1 - alpha) * max(p)}[kind]
            d = [1 if pv < bar else 0 for pv in p]
            D = sum(qv * dv for qv, dv in zip(q, d))
            pi = [qv * (1 - dv) + pv * D for pv, qv, dv in zip(p, q, d)]
        return spec_sampling(pi, p, q, x)
    return node, None


def ears_node(t):
    def node(p, q, x):
        a = 0 if p[x] == 0 else min(1, p[x] / q[x] + t * (1 - max(p)))
        return a, normalise([max(u - v, 0) for u, v in zip(p, q)], p)
    return node, None


def entropy_verify_node(tau, alpha):
    def node(p, q, x):
        H = -sum(v * math.log(v + 1e-10) for v in p)
        s = min(math.exp(-alpha * H), tau)
        return min(1.0, p[x] / (s * q[x])), normalise([max(u - v, 0) for u, v in zip(p, q)], p)
    return node, None


def medusa_node(eps, delta, fast):
    def row(p):
        t = min(eps, delta * math.exp(sum(v * math.log(v + 1e-5) for v in p)))
        g = max(range(len(p)), key=lambda k: (p[k], -k))
        top = [1.0 if k == g else 0.0 for k in range(len(p))]
        return t, top if fast else normalise([v if v >= t else 0.0 for v in p], top)

    def node(p, q, x):
        t, r = row(p)
        return (1.0 if p[x] > t else 0.0), r
    return node, (lambda p: row(p)[1])


def complete(inst, law, block, mass, exact):
    if len(block) == inst.block_length + 1:
        law[block] = law.get(block, 0) + mass
        return
    for a, pa in enumerate(rows(inst, "p", block, exact)):
        if pa:
            complete(inst, law, block + (a,), mass * pa, exact)


def walk(inst, rule, exact=True):
    """(law over V^(L+1), E[tau + 1]) of a chain rule given as (node, bonus): node(p, q, x) ->
    (acceptance, rejection row), bonus(p) -> row (p when None), walking every drafted path."""
    node, bonus = rule
    V, L = inst.vocab_size, inst.block_length
    law, E = {}, 0
    for x in itertools.product(range(V), repeat=L):
        Qx = 1
        for i in range(L):
            Qx *= rows(inst, "q", x[:i], exact)[x[i]]
        if Qx == 0:
            continue
        reach = Qx
        for i in range(L):
            p, q = rows(inst, "p", x[:i], exact), rows(inst, "q", x[:i], exact)
            a, r = node(p, q, x[i])
            for y, ry in enumerate(r):
                if ry:
                    complete(inst, law, x[:i] + (y,), reach * (1 - a) * ry, exact)
            E += reach * (1 - a) * (i + 1)
            reach *= a
        p = rows(inst, "p", x, exact)
        b = p if bonus is None else bonus(p)
        for y, by in enumerate(b):
            if by:
                complete(inst, law, x + (y,), reach * by, exact)
        E += reach * (L + 1)
    return law, E


def flat(inst, law):
    V, L1 = inst.vocab_size, inst.block_length + 1
    return [law.get(s, 0) for s in itertools.product(range(V), repeat=L1)]


def assert_exact_match(inst, spec, rule):
    res = st.analyze(inst, spec)
    law, E = walk(inst, rule)
    assert res.block_efficiency == E
    assert list(res.output_law) == flat(inst, law)


def assert_float_match(inst, spec, rule, tol=1e-12):
    finst = inst.to_float()
    res = st.analyze(finst, spec)
    law, E = walk(finst, rule, exact=False)
    assert abs(float(res.block_efficiency) - E) < tol
    for a, b in zip(res.output_law, flat(finst, law)):
        assert abs(float(a) - b) < tol


ALPHAS = [F(0), F(1, 10), F(1, 3), F(1, 2), F(1)]


# ----------------------------------------------------------------------------- exact laws


@pytest.mark.parametrize("kind", ["opt", "v1", "v2", "v3"])
def test_cascade_laws_are_the_brute_force_walk_exactly(kind):
    make = {"opt": K.cascade_opt, "v1": K.cascade_token_v1, "v2": K.cascade_token_v2,
            "v3": K.cascade_token_v3}[kind]
    for inst in instances():
        for alpha in ALPHAS:
            assert_exact_match(inst, make(alpha), cascade_node(kind, alpha))


def test_ears_law_is_the_brute_force_walk_exactly():
    for inst in instances():
        for t in (F(0), F(1, 10), F(1, 3), F(1)):
            assert_exact_match(inst, ears(t), ears_node(t))


def test_float_rules_are_the_brute_force_walk():
    for inst in instances():
        for tau, alpha in ((1.0, 0.0), (0.95, 0.4), (0.5, 1.0), (0.2, 0.0)):
            assert_float_match(inst, entropy_verify(tau, alpha), entropy_verify_node(tau, alpha))
        for eps, delta in ((0.09, 0.3), (0.5, 0.9), (1.0, 0.05)):
            for fast in (False, True):
                assert_float_match(inst, typical_medusa(eps, delta, fast=fast),
                                   medusa_node(eps, delta, fast))


def entropy_verify_node_in_logs(tau, alpha):
    """The same node with s in logs (log s = min(-alpha H, log tau)): no underflow at any alpha;
    a = 0 where p(X) = 0, min(1, exp(log p - log q - log s)) elsewhere."""
    def node(p, q, x):
        H = -sum(v * math.log(v + 1e-10) for v in p)
        log_s = min(-alpha * H, math.log(tau))
        a = 0.0 if p[x] == 0 else min(1.0, math.exp(min(math.log(p[x]) - math.log(q[x]) - log_s,
                                                        0.0)))
        return a, normalise([max(u - v, 0) for u, v in zip(p, q)], p)
    return node, None


@pytest.mark.parametrize("alpha", [700.0, 2000.0, 1e6])
def test_entropy_verify_at_a_large_alpha_is_its_limit_not_a_nan(alpha):
    """alpha = 2000 (allowed: [0, 1e6]) made s q(X) underflow to 0 and a token with p = 0 gave
    0/0: "not a law: ... NaN probability". The law is the limit (accept every drafted token with
    p > 0), the same as an oracle that keeps s in logs, on rows with zeros and ties."""
    for inst in instances():
        assert_float_match(inst, entropy_verify(1.0, alpha), entropy_verify_node_in_logs(1.0, alpha))
        assert_float_match(inst, entropy_verify(0.5, alpha), entropy_verify_node_in_logs(0.5, alpha))


def test_registered_names_build_the_same_rules():
    inst = instances()[4]
    assert st.analyze(inst, "cascade-token-v2(1/3)").output_law.tolist() == \
        st.analyze(inst, K.cascade_token_v2(F(1, 3))).output_law.tolist()
    assert st.analyze(inst, "ears(1/3)").block_efficiency == walk(inst, ears_node(F(1, 3)))[1]
    with pytest.raises(OptionError, match="cascade-token-v1: alpha"):
        K.cascade_token_v1(F(3, 2))
    with pytest.raises(OptionError, match="ears: tolerance"):
        ears(-F(1, 10))


# ----------------------------------------------------------------------------- limits


def test_one_node_law_is_the_cascade_target():
    """L = 1: the emitted token's law is pi exactly (speculative sampling against pi)."""
    for inst in instances()[:4]:
        p, q = rows(inst, "p", ()), rows(inst, "q", ())
        for alpha in ALPHAS:
            T = sum(max(u - v, 0) for u, v in zip(p, q))
            pi = p if max(q) < max(p) - alpha * T else q
            res = st.analyze(inst, K.cascade_opt(alpha))
            assert res.tv_to_target == tv(pi, p)
            assert res.block_efficiency == 2 - tv(pi, q)


def test_lossless_limits():
    insts = instances()
    for inst in insts:
        assert st.analyze(inst, ears(0)).tv_to_target == 0
        assert st.analyze(inst.to_float(), entropy_verify(1, 0)).tv_to_target < 1e-15
        # the lossless limit of the cascades lies at alpha < 0 (outside the accepted range):
        # the token rules then defer every token (pi = p), OPT defers every node with TV > 0
        L = inst.block_length

        def deferred(version):
            def law(drafts, q, p):
                d = K.token_deferral(version, q, p[:, :L], F(-1, 10))
                return K.verify_against(K.token_target(q, p[:, :L], d), drafts, q, p)
            return VerifierSpec(f"v{version}-negative", law, lossless=True, paper="-",
                                summary="-")

        for version in (1, 3):
            assert st.analyze(inst, deferred(version)).tv_to_target == 0
        # V2's bar is max p wherever p = q: no lossless limit on instances with such a node
        has_equal_node = inst is insts[5]  # random(2, 2, 3): p = q = (1/6, 5/6) at the root
        assert (st.analyze(inst, deferred(2)).tv_to_target == 0) != has_equal_node

        def opt_negative(drafts, q, p):
            return K.verify_against(K.opt_target(q, p[:, :L], F(-11, 10)), drafts, q, p)
        assert st.analyze(inst, VerifierSpec("opt-negative", opt_negative, paper="-",
                                             summary="-")).tv_to_target == 0
    # ... and no alpha >= 0 is lossless on the first instance, nor EARS t > 0 or Entropy
    # Verify below 1
    inst = insts[0]
    for make in (K.cascade_opt, K.cascade_token_v1, K.cascade_token_v2, K.cascade_token_v3):
        assert st.analyze(inst, make(0)).tv_to_target > 0
    assert st.analyze(inst, ears(F(1, 10))).tv_to_target > 0
    assert st.analyze(inst.to_float(), entropy_verify(0.95, 0)).tv_to_target > 0.01
    # the declared flag: lossless only at tau = 1 and alpha = 0 (s = 1), as measured
    for tau, alpha in ((1, 0), (0.5, 0), (1, 0.5), (0.5, 0.5)):
        spec = entropy_verify(tau, alpha)
        tv = st.analyze(inst.to_float(), spec).tv_to_target
        assert spec.lossless == (tv < 1e-15) == (tau == 1 and alpha == 0), (tau, alpha, tv)
    with pytest.raises(OptionError):
        K.cascade_opt(-1)


def test_typical_medusa_differs_from_typical_only_in_the_correction():
    """On random(2, 3, 15) (float rows) ``typical`` has TV 0.4799 and ``typical-medusa``, whose Y
    is drawn from the tokens above the threshold, 0.4897; the fast branch (Y = argmax) 0.5397.
    Both values come from the brute force here; acceptance (the tau pmf) is the same."""
    inst = st.random_instance(2, 3, 15)
    a = st.analyze(inst, typical_acceptance(0.09, 0.3))
    b = st.analyze(inst, typical_medusa(0.09, 0.3))
    c = st.analyze(inst, typical_medusa(0.09, 0.3, fast=True))
    assert [float(x) for x in a.tau_pmf] == pytest.approx([float(x) for x in b.tau_pmf],
                                                          abs=1e-15)
    law, _ = walk(inst, medusa_node(0.09, 0.3, False), exact=False)
    target = {}
    complete(inst, target, (), 1.0, False)
    exact_tv = tv(flat(inst, law), flat(inst, target))
    assert abs(float(b.tv_to_target) - exact_tv) < 1e-12
    assert float(b.tv_to_target) - float(a.tv_to_target) > 0.009
    assert round(float(a.tv_to_target), 4) == 0.4799 and round(float(b.tv_to_target), 4) == 0.4897
    assert round(float(c.tv_to_target), 4) == 0.5397


# ----------------------------------------------------------------------------- planted bugs


def test_planted_bugs_are_caught_by_the_brute_force():
    """A sign flipped in OPT's deferral, the non-strict token inequality, EARS without its zero
    guard and Entropy Verify scaling the residual: each changes some law on these instances."""
    def mismatch(spec, rule, exact=True):
        for inst in instances():
            i2 = inst if exact else inst.to_float()
            res = st.analyze(i2, spec)
            law, E = walk(i2, rule, exact=exact)
            got = [float(v) for v in res.output_law]
            want = [float(v) for v in flat(i2, law)]
            if max(abs(x - y) for x, y in zip(got, want)) > 1e-9:
                return True
        return False

    def opt_flipped(alpha):
        def law(drafts, q, p):
            L = drafts.shape[-1]
            return K.verify_against(K.opt_target(q, p[:, :L], -alpha), drafts, q, p)
        return VerifierSpec("planted", law, paper="-", summary="-")

    assert mismatch(opt_flipped(F(1, 2)), cascade_node("opt", F(1, 2)))

    def token_non_strict(drafts, q, p):
        L = drafts.shape[-1]
        d = K.token_deferral(1, q, p[:, :L], F(1, 3))
        bar_hit = (p[:, :L] == p[:, :L].max(-1, keepdims=True) - F(1, 3))
        d = d + bar_hit * (1 - d)
        return K.verify_against(K.token_target(q, p[:, :L], d), drafts, q, p)
    assert mismatch(VerifierSpec("planted", token_non_strict, paper="-", summary="-"),
                    cascade_node("v1", F(1, 3)))

    def ears_unguarded(t):
        def node(p, q, x):
            return min(1, p[x] / q[x] + t * (1 - max(p))), \
                normalise([max(u - v, 0) for u, v in zip(p, q)], p)
        return node, None
    assert mismatch(ears(F(1, 2)), ears_unguarded(F(1, 2)))

    def ev_scaled_residual(tau, alpha):
        def node(p, q, x):
            H = -sum(v * math.log(v + 1e-10) for v in p)
            s = min(math.exp(-alpha * H), tau)
            return min(1.0, p[x] / (s * q[x])), \
                normalise([max(u - s * v, 0) for u, v in zip(p, q)], p)
        return node, None
    assert mismatch(entropy_verify(0.5, 0.4), ev_scaled_residual(0.5, 0.4), exact=False)
    assert mismatch(typical_medusa(0.5, 0.9), medusa_node(0.5, 0.9, True), exact=False)


# ----------------------------------------------------------------------------- frontier


def frontier_gap(inst, spec):
    from spectheory.lp.frontier import frontier_lp

    if not spec.exact:
        inst = inst.to_float()
    res = st.analyze(inst, spec)
    if spec.exact and inst.exact:
        return frontier_lp(inst, tv=res.tv_to_target, exact=True, rules=()).optimum - \
            res.block_efficiency
    return float(frontier_lp(inst.to_float(), tv=float(res.tv_to_target), rules=()).optimum) - \
        float(res.block_efficiency)


def test_at_one_token_opt_ears_and_entropy_verify_are_on_the_frontier():
    """L = 1: the node law pi lies between p and q coordinatewise and the acceptance is the
    maximal coupling of q and pi, so E = 2 - TV(q, pi) = 2 - (T - TV(pi, p)): the frontier
    2 - max(T - delta, 0). Token cascades leave the segment from p to q: off the frontier."""
    inst = st.random_instance(3, 1, 0, denominator=12)
    for spec in (K.cascade_opt(F(1, 10)), ears(F(1, 10)), ears(F(1, 2)), ears(F(1))):
        assert frontier_gap(inst, spec) == 0
    assert abs(frontier_gap(inst, entropy_verify(0.95, 0.4))) < 1e-9
    assert frontier_gap(inst, K.cascade_token_v1(F(1, 4))) > F(1, 10)


def test_at_two_tokens_no_rule_is_above_the_frontier_and_the_cascades_fall_below():
    inst = st.random_instance(3, 2, 0, denominator=12)
    for spec in (K.cascade_opt(0), K.cascade_token_v1(F(1, 4)), K.cascade_token_v3(F(1, 2)),
                 ears(F(1, 10)), ears(F(1))):
        gap = frontier_gap(inst, spec)
        assert gap > F(1, 100), spec.name
    # accept-every-draft is on the frontier exactly: E = L + 1 at its own TV
    assert frontier_gap(inst, K.cascade_opt(1)) == 0
    for spec in (entropy_verify(0.95, 0.4), typical_medusa(0.09, 0.3)):
        assert frontier_gap(inst, spec) > 1e-2
