"""Relaxed acceptance rules (spectheory.verifiers.relaxed): every rule's exact law equals a
brute-force sequence tree written here in plain Fractions (independent of the engine), on
prefix-dependent instances with ties; a planted bug in each rule family is caught."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

import spectheory as st
from spectheory.engine.analysis import multi_iteration_law
from spectheory.verifiers import relaxed as R


def instances():
    """Prefix-dependent rows rounded to sixths: many ties (checked below). Seed 4 tells the
    greedy tree's top m from its top m + 1 (the others give every m the same tau)."""
    return [st.random_instance(3, 2, seed, alpha=0.5, denominator=6) for seed in range(5)]


def rows(inst, which, prefix):
    V = inst.vocab_size
    idx = 0
    for t in prefix:
        idx = idx * V + t
    table = inst.target if which == "p" else inst.draft
    return [Fraction(v) for v in table.level(len(prefix))[idx]]


def argmax(row):
    return max(range(len(row)), key=lambda x: (row[x], -x))


def onehot(V, k):
    return [Fraction(int(i == k)) for i in range(V)]


def complete_by_target(inst, law, block, mass):
    """Add ``mass`` times the target's continuation of ``block`` up to length L + 1 to ``law``
    (a dict over sequences)."""
    if len(block) == inst.block_length + 1:
        law[tuple(block)] += mass
        return
    pr = rows(inst, "p", block)
    for a in range(inst.vocab_size):
        if pr[a]:
            complete_by_target(inst, law, block + [a], mass * pr[a])


def brute_law(inst, node, exact=True):
    """Output law over V^(L+1) of a chain rule given per node: node(x, p_row, q_row) ->
    (accept probability, rejection row), bonus row = node(None, p_row, q_row)[1]."""
    V, L = inst.vocab_size, inst.block_length
    law = {y: 0 for y in itertools.product(range(V), repeat=L + 1)}

    for x in itertools.product(range(V), repeat=L):
        qx = Fraction(1)
        for i in range(L):
            qx *= rows(inst, "q", list(x[:i]))[x[i]]
        if qx == 0:
            continue
        reach = qx
        for i in range(L):
            pr, qr = rows(inst, "p", list(x[:i])), rows(inst, "q", list(x[:i]))
            a, rej = node(x[i], pr if exact else [float(v) for v in pr],
                          qr if exact else [float(v) for v in qr])
            for y in range(V):
                if rej[y]:
                    complete_by_target(inst, law, list(x[:i]) + [y], reach * (1 - a) * rej[y])
            reach = reach * a
        _, bonus = node(None, rows(inst, "p", list(x)), rows(inst, "q", list(x)))
        for y in range(V):
            if bonus[y]:
                complete_by_target(inst, law, list(x) + [y], reach * bonus[y])
    return [law[y] for y in sorted(law)]


def greedy_node(test):
    def node(x, pr, qr):
        g = onehot(len(pr), argmax(pr))
        return (None if x is None else Fraction(int(test(x, pr)))), g
    return node


def tiebreak_rank(x, pr):
    order = sorted(range(len(pr)), key=lambda t: (-pr[t], t))
    return order.index(x)


def nodes():
    """Independent per-node rules (name, spec, node, exact)."""
    eps, lam, m, k, d = Fraction(1, 6), Fraction(1, 2), 2, 2, Fraction(1, 6)
    ts, ta = Fraction(1, 2), Fraction(2, 3)

    def sg(x, pr, qr):
        if x is None:
            return None, pr
        a = Fraction(1) if pr[x] >= ts else min(Fraction(1), pr[x] / ta)
        rest = [pr[y] * (y != x) for y in range(len(pr))]
        tot = sum(rest)
        return a, ([v / tot for v in rest] if tot else pr)

    def third(pr):
        return sorted(pr, reverse=True)[m - 1]

    return [
        ("additive", R.additive_acceptance(eps),
         greedy_node(lambda x, pr: pr[x] >= max(pr) - eps), True),
        ("multiplicative", R.multiplicative_acceptance(lam),
         greedy_node(lambda x, pr: pr[x] >= lam * max(pr)), True),
        ("top-m", R.top_m_acceptance(m), greedy_node(lambda x, pr: pr[x] >= third(pr)), True),
        ("trtllm", R.trtllm_relaxed_acceptance(k, d),
         greedy_node(lambda x, pr: tiebreak_rank(x, pr) == 0 or (
             tiebreak_rank(x, pr) < k and pr[x] >= max(pr) - d)), True),
        ("sglang", R.sglang_threshold_acceptance(ts, ta), sg, True),
    ]


def float_nodes():
    beta, delta = 0.6, 0.3

    def ent(x, pr):
        H = -sum(v * math.log(v) for v in map(float, pr) if v > 0)
        return x == argmax(pr) or float(pr[x]) >= beta * math.exp(-H)

    def cactus(x, pr, qr):
        pr = [float(v) for v in pr]
        if x is None:
            return None, pr
        qr = [float(v) for v in qr]
        px = pr[x]
        hx = min(1.0, px + math.sqrt(2 * delta * px * (1 - px)))
        h = [v * ((1 - hx) / (1 - px) if px < 1 else 1.0) for v in pr]
        h[x] = hx
        res = [max(hv - qv, 0.0) for hv, qv in zip(h, qr)]
        tot = sum(res)
        return min(1.0, hx / qr[x]), ([v / tot for v in res] if tot > 0 else pr)

    def entropy_node(x, pr, qr):
        g = [float(v) for v in onehot(len(pr), argmax(pr))]
        return (None if x is None else float(ent(x, pr))), g

    return [("entropy", R.entropy_threshold_acceptance(beta), entropy_node),
            ("cactus", R.cactus_acceptance(delta), cactus)]


def test_instances_have_ties_and_prefix_dependence():
    tied = dependent = 0
    for inst in instances():
        for j in range(inst.block_length + 1):
            lev = inst.target.level(j)
            tied += sum(len(set(r)) < len(r) for r in lev)
            dependent += len({tuple(r) for r in lev}) > 1
    assert tied > 0 and dependent > 0


@pytest.mark.parametrize("i", range(5))
def test_exact_law_equals_brute_force_tree(i):
    name, spec, node, _ = nodes()[i]
    for inst in instances():
        res = st.analyze(inst, spec)
        assert list(res.output_law) == brute_law(inst, node), name
        assert res.tv_to_target == sum(abs(a - b) for a, b in
                                       zip(res.output_law, res.target_law)) / 2


@pytest.mark.parametrize("i", range(2))
def test_float_law_equals_brute_force_tree(i):
    name, spec, node = float_nodes()[i]
    # V = 4 too: on V = 3 in sixths, Cactus's residual from p or from its target h normalise alike
    for inst in instances() + [st.random_instance(4, 2, 0, alpha=0.5, denominator=6)]:
        res = st.analyze(inst.to_float(), spec)
        brute = brute_law(inst, node, exact=False)
        assert max(abs(float(a) - float(b)) for a, b in zip(res.output_law, brute)) < 1e-12, name


def test_multi_iteration_law_is_a_distribution_and_lossless_only_at_defaults():
    inst = instances()[0]
    for spec in (R.additive_acceptance(Fraction(1, 6)), R.sglang_threshold_acceptance()):
        law, tgt, tv = multi_iteration_law(inst, spec, 3)
        assert sum(law) == 1 and sum(tgt) == 1
        assert (tv == 0) == spec.lossless


def test_divergences_and_special_cases():
    for inst in instances():
        greedy = st.analyze(inst, "greedy")
        tok = st.analyze(inst.to_float(), "token")
        # sglang with thresholds (1, 1) is strict verification, lossless exactly
        sg = st.analyze(inst, R.sglang_threshold_acceptance(1, 1))
        assert sg.tv_to_target == 0
        assert sg.block_efficiency == st.analyze(inst, "strict").block_efficiency
        # cactus at delta = 0 is token verification
        c0 = st.analyze(inst.to_float(), R.cactus_acceptance(0.0))
        assert abs(c0.block_efficiency - tok.block_efficiency) < 1e-12 and c0.tv_to_target < 1e-12
        # top-1 accepts the tied maxima: at least greedy matching's acceptance
        top1 = st.analyze(inst, R.top_m_acceptance(1))
        assert top1.block_efficiency >= greedy.block_efficiency
        # the checker flags the lossy members against the target, exactly
        rep = st.check_lossless(R.additive_acceptance(Fraction(1, 6)), inst)
        assert not rep.lossless and rep.tv > 0
        d = R.divergences(st.analyze(inst, R.additive_acceptance(Fraction(1, 6))))
        assert d["kl_output_target"] >= 2 * float(d["tv"]) ** 2 - 1e-12  # Pinsker
        assert d["kl_output_target_err"] < 1e-12


def test_kl_divergence_exact_small_case():
    val, err = R.kl_divergence([Fraction(1, 2), Fraction(1, 2)], [Fraction(1, 4), Fraction(3, 4)])
    assert abs(val - (0.5 * math.log(2) + 0.5 * math.log(2 / 3))) <= err + 1e-16
    assert R.kl_divergence([Fraction(1)], [Fraction(0)])[0] == math.inf


# ------------------------------------------------------------------ planted bugs, one per family


def _mutant(spec, law):
    from dataclasses import replace

    return replace(spec, function=law, name=spec.name + "-mutant")


def _greedy_strict_inequality(drafts, q, p):
    """Additive rule with > instead of >=: differs exactly on the ties."""
    from spectheory.verifiers.common import drafted_probs

    L = drafts.shape[-1]
    px, _ = drafted_probs(drafts, q, p)
    top = R._kth_largest(p[:, :L], 1)
    return R.greedy_family_law(R._indicator(px > top - Fraction(1, 6), px), p)


def _sglang_keeps_x(drafts, q, p):
    """SGLang rule correcting from p itself (the rejected token not removed)."""
    from spectheory.verifiers.contrasts import chain_law
    from spectheory.verifiers.common import drafted_probs

    L = drafts.shape[-1]
    px, _ = drafted_probs(drafts, q, p)
    a = R.B.where(px >= Fraction(1, 2), R.B.ones_like(px), R.B.minimum(px / Fraction(2, 3), 1))
    return chain_law(a, p[:, :L], p[:, L])


def _trtllm_no_topk(drafts, q, p):
    """TensorRT-LLM rule without the top-k window (k = V)."""
    return R.trtllm_relaxed_acceptance(3, Fraction(1, 6)).function(drafts, q, p)


def _top_m_by_rank(drafts, q, p):
    """Top-m by rank (ties broken by id) instead of the level set."""
    return R.trtllm_relaxed_acceptance(2, Fraction(1)).function(drafts, q, p)


def _cactus_no_rescale(drafts, q, p):
    """Cactus accepting against p(X_i) (delta ignored in the acceptance)."""
    return R.cactus_acceptance(0.0).function(drafts, q, p)


@pytest.mark.parametrize("i,bug", [(0, _greedy_strict_inequality), (4, _sglang_keeps_x),
                                   (3, _trtllm_no_topk), (2, _top_m_by_rank)])
def test_planted_bug_caught_exactly(i, bug):
    name, spec, node, _ = nodes()[i]
    caught = [list(st.analyze(inst, _mutant(spec, bug)).output_law) != brute_law(inst, node)
              for inst in instances()]
    assert any(caught), name


def test_planted_cactus_bug_caught():
    name, spec, node = float_nodes()[1]
    inst = instances()[0]
    res = st.analyze(inst.to_float(), _mutant(spec, _cactus_no_rescale))
    brute = brute_law(inst, node, exact=False)
    assert max(abs(float(a) - float(b)) for a, b in zip(res.output_law, brute)) > 1e-6


# ------------------------------------------------------------------ greedy tree top-m coverage


def brute_greedy_tree(inst, m):
    """Plain recursion: follow the target argmax while the draft's top-m level set covers it."""
    V, L = inst.vocab_size, inst.block_length
    path, tau = [], L
    for i in range(L + 1):
        g = argmax(rows(inst, "p", path))
        if i < L:
            q = rows(inst, "q", path)
            if q[g] == 0 or q[g] < sorted(q, reverse=True)[min(m, V) - 1]:
                path.append(g)
                tau = i
                break
        path.append(g)
    law = {y: 0 for y in itertools.product(range(V), repeat=L + 1)}

    complete_by_target(inst, law, path[:tau + 1], Fraction(1))
    return tau, [law[y] for y in sorted(law)]


@pytest.mark.parametrize("m", [1, 2, 3])
def test_greedy_tree_coverage_equals_brute_force(m):
    taus = set()
    for inst in instances():
        res = R.greedy_tree_coverage(inst, m)
        tau, law = brute_greedy_tree(inst, m)
        taus.add(tau)
        assert list(res.output_law) == law and res.block_efficiency == tau + 1
        assert res.tv_to_target == sum(abs(a - b) for a, b in zip(law, res.target_law)) / 2
        assert res.tau_pmf[tau] == 1
    if m == 3:  # m = V covers every greedy token of positive draft probability
        full = st.random_instance(3, 2, 0, alpha=1.0)
        assert R.greedy_tree_coverage(full, 3).block_efficiency == 3


def test_greedy_tree_planted_bug_caught():
    """Coverage read by rank (ties with the m-th excluded) differs on tied draft rows."""
    caught = False
    for inst in instances():
        for m in (1, 2):
            tau, _ = brute_greedy_tree(inst, m)
            V = inst.vocab_size
            path, t_rank = [], inst.block_length
            for i in range(inst.block_length):
                g = argmax(rows(inst, "p", path))
                q = rows(inst, "q", path)
                if sorted(range(V), key=lambda t: (-q[t], t)).index(g) >= m:
                    t_rank = i
                    break
                path.append(g)
            caught |= t_rank != R.greedy_tree_coverage(inst, m).block_efficiency - 1
    assert caught


def test_sweep_names_resolve_to_the_factories():
    from spectheory.runtime.errors import OptionError
    from spectheory.sweep.jobs import resolve_verifier

    inst = instances()[0]
    for name, spec in (("additive(0.5)", R.additive_acceptance(Fraction(1, 2))),
                       ("top-m(2)", R.top_m_acceptance(2)),
                       ("sglang-threshold(1, 1)", R.sglang_threshold_acceptance(1, 1)),
                       ("trtllm-relaxed(2, 0.5)", R.trtllm_relaxed_acceptance(2, Fraction(1, 2)))):
        assert list(st.analyze(inst, resolve_verifier(name)).output_law) == \
            list(st.analyze(inst, spec).output_law), name
    assert resolve_verifier("cactus(0.3)").name == "cactus(0.3)"
    for bad in ("top-m(0)", "cactus(-1)", "additive(x)"):
        with pytest.raises(OptionError):
            resolve_verifier(bad)


def test_float_only_laws_refuse_exact_rows_naming_the_rule():
    """Rules with exp/log (or running random products) have a float law only: exact rows are
    refused with a TypeError that names the rule, not computed."""
    from spectheory.verifiers.contrasts import typical_acceptance
    from spectheory.verifiers.lossy import uniform_product_verification
    import numpy as np

    from spectheory.engine.seqtree import levels
    from spectheory.verifiers.relaxed import cactus_acceptance, entropy_threshold_acceptance

    inst = st.random_instance(2, 2, 3, denominator=4)
    L = inst.block_length
    q_levels, p_levels = levels(inst.draft, 0, L, True), levels(inst.target, 0, L + 1, True)
    drafts = np.array([[0, 1]])
    q = np.stack([q_levels[0][0], q_levels[1][0]])[None]  # the draft 0 1's rows, exact
    p = np.stack([p_levels[0][0], p_levels[1][0], p_levels[2][1]])[None]
    for name, fn in [("entropy-threshold acceptance", entropy_threshold_acceptance(0.5).function),
                     ("cactus", cactus_acceptance(0.1).function),
                     ("typical acceptance", typical_acceptance(0.09, 0.3).function),
                     ("uniform_product_verification", uniform_product_verification)]:
        with pytest.raises(TypeError, match=f"^{name} has a float"):
            fn(drafts, q, p)
