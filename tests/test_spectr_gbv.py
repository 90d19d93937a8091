"""SpecTr-GBV as released (``spectr-gbv``, arXiv 2604.25925, github.com/junemily/SpecTr-GBV
src/engine.py): the exact law equals a literal transcription of the released loop (every
uniform's two outcomes enumerated); K = 1 accepts the full-information bound sum min(P, Q) per
iteration; one iteration is lossy at K = 1, 2, 3; K = 2 can accept fewer tokens than K = 1; the
quoted Theorem 5.3 expression exceeds the best E[tau] of any valid K-path verifier."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
import torch

from spectheory.runtime import backend as B
from spectheory.runtime.errors import SizeLimitError, SpectheoryError
from spectheory.engine.analysis import analyze
from spectheory.engine.lossless import check_lossless
from spectheory.inputs.instances import instance_from_dict
from spectheory.engine.joint import path_tables
from spectheory.inputs.random_instances import random_instance
from spectheory.cli.report import toy_instance
from spectheory.engine.seqtree import levels, path_probabilities
from spectheory.verifiers.hsd import HSD_RELEASED
from spectheory.verifiers.spectr_gbv import MAX_DECISIONS, SPECTR_GBV, spectr_gbv

from spectheory import lp


# ----------------------------------------------------------------------------- a transcription


def _released_loop(cands, prow, qrow, K: int, L: int) -> dict:
    """{(j*, a): probability} of one iteration of the released code (src/engine.py) on the
    candidates ``cands`` (tuples), following its control flow: the running products m_s, m_b,
    the accepted count n, ``seen``, the + eps denominators as exact zero guards, and both
    outcomes of every ``torch.rand(1) < acceptance_prob``."""
    out: dict = {}

    def coin(num, den):  # P(u < num / (den + eps)), u ~ U[0, 1)
        if den == 0:
            return Fraction(1) if num > 0 else Fraction(0)
        return min(max(num / den, Fraction(0)), Fraction(1))

    def ratio(a, b):  # min(a / (b + eps), 1)
        if b == 0:
            return Fraction(1) if a > 0 else Fraction(0)
        return min(a / b, Fraction(1))

    def candidate(j, n, sel, seen, prob):
        if prob == 0:
            return
        if j == K:
            out[(sel, n)] = out.get((sel, n), 0) + prob
            return
        x = cands[j]
        m_s = m_b = Fraction(1)
        for k in range(n):  # candidate j's own first n tokens
            m_s *= qrow(x[:k])[x[k]]
            m_b *= prow(x[:k])[x[k]]
        step(j, n, n, sel, seen, m_s, m_b, prob)

    def step(j, i, n, sel, seen, m_s, m_b, prob):
        if prob == 0:
            return
        x = cands[j]
        if i == L - 1:  # the full-length test
            m_s, m_b = m_s * qrow(x[:L - 1])[x[L - 1]], m_b * prow(x[:L - 1])[x[L - 1]]
            acc = coin(m_b * (1 - (1 - ratio(m_s, m_b)) ** K), 1 - (1 - m_s) ** K)
            out[(j, L)] = out.get((j, L), 0) + prob * acc
            candidate(j + 1, n, sel, seen, prob * (1 - acc))
            return
        m_s, m_b = m_s * qrow(x[:i])[x[i]], m_b * prow(x[:i])[x[i]]
        nb, ns = prow(x[:i + 1]), qrow(x[:i + 1])
        mins = [ratio(m_s * ns[v], m_b * nb[v]) for v in range(len(nb))]
        num = sum(m_b * nb[v] * (1 - mins[v]) ** K for v in range(len(nb))) \
            - m_b * (1 - ratio(m_s, m_b)) ** K
        den = 1 - (1 - m_s) ** K - sum(m_b * nb[v] * (1 - (1 - mins[v]) ** K)
                                       for v in range(len(nb)))
        acc = coin(num, den)
        key = x[:i + 1]
        if key in seen:
            step(j, i + 1, n, sel, seen, m_s, m_b, prob)
            return
        step(j, i + 1, i + 1, j, seen, m_s, m_b, prob * acc)
        step(j, i + 1, n, sel, seen | {key}, m_s, m_b, prob * (1 - acc))

    candidate(0, 0, 0, frozenset(), Fraction(1))
    return out


def _released_token_law(x, n, prow, qrow, K: int, L: int) -> list:
    """The law of the token the released code appends after accepting n tokens of candidate x:
    p(.|x) at n = L, else normalise(m_b p (1 - min(m_s q / (m_b p + eps), 1)^K))."""
    if n == L:
        return prow(x)
    m_s = m_b = Fraction(1)
    for k in range(n):
        m_s *= qrow(x[:k])[x[k]]
        m_b *= prow(x[:k])[x[k]]
    pb, ps = prow(x[:n]), qrow(x[:n])
    res = [m_b * pb[v] * (1 - (min(m_s * ps[v] / (m_b * pb[v]), Fraction(1))
                               if m_b * pb[v] != 0 else Fraction(1)) ** K)
           for v in range(len(pb))]
    total = sum(res)
    return [r / total for r in res] if total != 0 else pb  # all-zero: spectheory uses p


def _rows(inst):
    V, L = inst.vocab_size, inst.block_length
    pl, ql = levels(inst.target, 0, L + 1, True), levels(inst.draft, 0, L, True)

    def node(prefix):
        return sum(t * V ** (len(prefix) - 1 - i) for i, t in enumerate(prefix))

    return (lambda pre: list(pl[len(pre)][node(pre)])), (lambda pre: list(ql[len(pre)][node(pre)]))


@pytest.mark.parametrize("V,L,K,seed", [(2, 2, 1, 0), (2, 2, 2, 1), (2, 2, 3, 2), (2, 3, 2, 3),
                                        (3, 2, 2, 4), (2, 3, 1, 5)])
def test_law_equals_the_released_loop_draft_tuple_by_draft_tuple(V, L, K, seed):
    inst = random_instance(V, L, seed, denominator=10, alpha=0.8)
    prow, qrow = _rows(inst)
    drafts, q, p, _ = path_tables(levels(inst.draft, 0, L, True),
                                  levels(inst.target, 0, L + 1, True), L, V)
    tuples = list(itertools.product(range(V**L), repeat=K))
    idx = [list(t) for t in tuples]
    law = spectr_gbv(drafts[idx], q[idx], p[idx])
    for b, t in enumerate(tuples):
        cands = [tuple(int(x) for x in drafts[s]) for s in t]
        want = _released_loop(cands, prow, qrow, K, L)
        got = {(j, a): law.stop[b, j, a] for j in range(K) for a in range(L + 1)
               if law.stop[b, j, a] != 0}
        assert got == {k: v for k, v in want.items() if v != 0}, cands
        for j, a in got:
            assert list(law.correction[b, j, a]) == _released_token_law(cands[j], a, prow,
                                                                        qrow, K, L)
    assert all(sum(law.stop[b].reshape(-1)) == 1 for b in range(len(tuples)))


# ----------------------------------------------------------------------------- K = 1


def _joints(inst):
    V, L = inst.vocab_size, inst.block_length
    one = B.to_exact([1])
    return (path_probabilities(levels(inst.target, 0, L, True), one),
            path_probabilities(levels(inst.draft, 0, L, True), one))


def full_information_bound(inst):
    """sum_{l=1..L} sum_{x^l} min(p(x^l), q(x^l))."""
    P, Q = _joints(inst)
    return sum((min(a, b) for t in range(1, inst.block_length + 1) for a, b in zip(P[t], Q[t])),
               Fraction(0))


INSTANCES = [toy_instance()] + [random_instance(V, L, seed, denominator=12)
                                for V, L, seed in ((2, 2, 0), (2, 3, 1), (3, 2, 2), (3, 3, 3))]


@pytest.mark.parametrize("i", range(len(INSTANCES)))
def test_k1_accepts_the_full_information_bound_and_is_lossy(i):
    inst = INSTANCES[i]
    res = analyze(inst, SPECTR_GBV, paths=1)
    bound = full_information_bound(inst)
    assert res.expected_accepted == bound
    assert res.block_efficiency == lp.coupling_bound(inst, exact=True).optimum
    assert res.expected_accepted > analyze(inst, "block").expected_accepted  # above the optimum
    rep = check_lossless(SPECTR_GBV, inst, paths=1)
    assert not rep.lossless and rep.tv > 0 and rep.offending is not None


def test_k1_l2_acceptance_is_the_released_hsd_test():
    """At L = 2 the K = 1 rule accepts like ``hsd-released`` (both end with min(1, r_2), both
    accept X^1 surely when r_1 >= 1); its residual uses the uncapped r_1, so the output laws
    agree at V = 2 and differ at V = 3."""
    for V, seed, same in ((2, 0, True), (2, 5, True), (3, 0, False), (3, 5, False)):
        inst = random_instance(V, 2, seed, denominator=12)
        a, b = analyze(inst, SPECTR_GBV, paths=1), analyze(inst, HSD_RELEASED)
        assert a.tau_pmf == b.tau_pmf
        assert bool((a.output_law == b.output_law).all()) == same


# ----------------------------------------------------------------------------- K > 1


def test_toy_values():
    toy = toy_instance()
    want = {1: (Fraction(7, 3), Fraction(1, 9)),
            2: (Fraction(32673647, 13594560), Fraction(2633413, 40783680))}
    for K, (be, tv) in want.items():
        res = analyze(toy, SPECTR_GBV, paths=K)
        assert (res.block_efficiency, res.tv_to_target) == (be, tv)
        assert res.extra == {"paths": K, "drafting": "iid"}
    three = analyze(toy, SPECTR_GBV, paths=3)
    assert float(three.block_efficiency) == pytest.approx(2.499542456756565, abs=1e-14)
    assert float(three.tv_to_target) == pytest.approx(0.0581648478213426, abs=1e-14)
    # against valid verifiers: block 20/9 (K = 1), the direct LP optimum 212/81 (K = 2)
    assert analyze(toy, "block").block_efficiency == Fraction(20, 9)
    assert lp.direct_lp(toy, 2, exact=True).optimum == Fraction(212, 81)
    assert want[2][0] < Fraction(212, 81)


def test_lossy_for_k2_and_k3():
    for inst in (toy_instance(), random_instance(2, 3, 1, denominator=12),
                 random_instance(3, 2, 2, denominator=12)):
        for K in (2, 3):
            if inst.vocab_size ** (inst.block_length * K) > 729:
                continue
            rep = check_lossless(SPECTR_GBV, inst, paths=K)
            assert not rep.lossless and rep.tv > 0 and rep.offending is not None


def test_two_drafts_can_accept_fewer_tokens_than_one():
    inst = random_instance(2, 2, 4, denominator=12, alpha=0.5)
    one = analyze(inst, SPECTR_GBV, paths=1).expected_accepted
    two = analyze(inst, SPECTR_GBV, paths=2).expected_accepted
    assert (one, two) == (Fraction(5, 3), Fraction(130, 81))
    # p = q below depth L: one draft is accepted whole (E[tau] = L), two drafts are not
    same = random_instance(2, 2, 3, denominator=10)
    for d in range(2):
        assert (same.target.level(d) == same.draft.level(d)).all()
    assert analyze(same, SPECTR_GBV, paths=1).expected_accepted == 2
    two = analyze(same, SPECTR_GBV, paths=2)
    assert two.expected_accepted == Fraction(2123857839, 1250400032) and two.tv_to_target > 0


def theorem_5_3(inst, K: int):
    """The quoted Theorem 5.3 value sum_t sum_{x^t} q(x^t) [1 - (1 - min(p(x^t)/q(x^t), 1))^K]."""
    P, Q = _joints(inst)
    return sum((b * (1 - (1 - min(a / b, Fraction(1))) ** K)
                for t in range(1, inst.block_length + 1) for a, b in zip(P[t], Q[t]) if b != 0),
               Fraction(0))


def test_quoted_theorem_5_3_exceeds_every_valid_verifier():
    inst = random_instance(2, 2, 2, denominator=10)
    best = lp.direct_lp(inst, 2, exact=True).optimum - 1  # best E[tau] of a valid verifier
    assert theorem_5_3(inst, 2) == Fraction(1209, 700)
    assert best == Fraction(79, 50) and theorem_5_3(inst, 2) > best
    # also above the ceiling sum min(p(x^t), 1 - (1 - q(x^t))^K) that bounds the LP
    P, Q = _joints(inst)
    ceiling = sum(min(a, 1 - (1 - b) ** 2) for t in (1, 2) for a, b in zip(P[t], Q[t]))
    assert ceiling == Fraction(1981, 1250) and best <= ceiling < theorem_5_3(inst, 2)
    # on the two-token example it stays below: 19/12 < 131/81
    toy = toy_instance()
    assert theorem_5_3(toy, 2) == Fraction(19, 12)
    assert lp.direct_lp(toy, 2, exact=True).optimum - 1 == Fraction(131, 81)
    # K = 1: the expression is the full-information bound
    assert theorem_5_3(inst, 1) == full_information_bound(inst)


# ----------------------------------------------------------------------------- floats, guards


def test_float64_matches_exact_and_float32_rows_are_a_law():
    inst = random_instance(2, 3, 1, denominator=12)
    a = analyze(inst, SPECTR_GBV, paths=2)
    b = analyze(inst.to_float(), SPECTR_GBV, paths=2)
    assert float(b.expected_accepted) == pytest.approx(float(a.expected_accepted), abs=1e-12)
    assert float(b.tv_to_target) == pytest.approx(float(a.tv_to_target), abs=1e-12)
    g = torch.Generator().manual_seed(0)
    Bsz, K, L, V = 4, 3, 4, 50
    q = torch.softmax(3 * torch.randn(Bsz, K, L, V, generator=g), -1)
    p = torch.softmax(3 * torch.randn(Bsz, K, L + 1, V, generator=g), -1)
    drafts = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(Bsz, K, L)
    law = spectr_gbv(drafts, q, p)
    assert law.stop.dtype == torch.float32 and law.stop.shape == (Bsz, K, L + 1)
    assert (law.stop >= 0).all() and torch.allclose(law.stop.sum((1, 2)), torch.ones(Bsz))
    assert torch.allclose(law.correction.sum(-1), torch.ones(Bsz, K, L + 1))
    law64 = spectr_gbv(drafts, q.double(), p.double())
    assert torch.allclose(law.stop.double(), law64.stop, atol=1e-5)


def test_refusals_are_one_line():
    one = instance_from_dict({"vocab_size": 2, "block_length": 1, "target": ["1/3", "2/3"],
                              "draft": ["2/3", "1/3"]}, exact=True)
    with pytest.raises(SpectheoryError, match=r"L >= 2 .*gamma") as err:
        analyze(one, SPECTR_GBV, paths=2)
    assert "\n" not in str(err.value)
    K = MAX_DECISIONS + 1
    drafts = torch.zeros(1, K, 2, dtype=torch.long)
    q, p = torch.full((1, K, 2, 2), 0.5), torch.full((1, K, 3, 2), 0.5)
    with pytest.raises(SizeLimitError, match="2\\^\\(\\(L-1\\) K\\)") as err:
        spectr_gbv(drafts, q, p)
    assert "\n" not in str(err.value)


def test_registration_metadata():
    s = SPECTR_GBV
    assert s.name == "spectr-gbv" and s.paths is None and s.drafting == "iid"
    assert not s.lossless and s.exact and "2604.25925" in s.paper
    assert "Algorithm 2" in s.summary and "released" in s.summary


def test_the_decision_limit_itself_is_accepted():
    """(L - 1) K = MAX_DECISIONS runs (2^16 histories, K = 2, L = 9: a law that sums to 1); one
    decision more is refused."""
    from spectheory.verifiers.spectr_gbv import check_sizes

    assert MAX_DECISIONS == 16
    for L, K in ((17, 1), (9, 2), (5, 4)):
        check_sizes(L, K)
    for L, K in ((18, 1), (10, 2), (6, 4)):
        with pytest.raises(SizeLimitError, match="above the limit of 16"):
            check_sizes(L, K)
    g = torch.Generator().manual_seed(0)
    q = torch.softmax(torch.randn(1, 2, 9, 2, generator=g, dtype=torch.float64), -1)
    p = torch.softmax(torch.randn(1, 2, 10, 2, generator=g, dtype=torch.float64), -1)
    drafts = torch.randint(0, 2, (1, 2, 9), generator=g)
    out = spectr_gbv(drafts, q, p)
    assert tuple(out.stop.shape) == (1, 2, 10)
    assert float(out.stop.sum()) == pytest.approx(1.0, abs=1e-12)
