"""An independent, deliberately naive exact-rational reference (tests only).

Plain Python loops over every draft, dicts of Fractions, and the verifier definitions written out
directly from the papers (token verification: Leviathan et al., ICML 2023; block verification:
Sun et al., arXiv 2403.10444), not through spectheory.runtime.backend or spectheory.verifiers, so that a
mistake in the main engine or verifiers shows up as a disagreement.
"""

from __future__ import annotations

import itertools
from fractions import Fraction


def cond(model, prefix):
    return list(model.conditional(prefix))


def token_law(x, q_rows, p_rows):
    """P(tau = i) and corrections, straight from the definition (Fractions)."""
    L = len(x)
    stop, corr = [], []
    reach = Fraction(1)
    for i in range(L):
        p, q = p_rows[i], q_rows[i]
        a = Fraction(1) if q[x[i]] == 0 else min(Fraction(1), p[x[i]] / q[x[i]])
        stop.append(reach * (1 - a))
        res = [max(pi - qi, Fraction(0)) for pi, qi in zip(p, q)]
        s = sum(res)
        corr.append([r / s for r in res] if s > 0 else list(p))
        reach *= a
    stop.append(reach)
    corr.append(list(p_rows[L]))
    return stop, corr


def block_law(x, q_rows, p_rows):
    L = len(x)
    w = [Fraction(1)]
    for i in range(L):
        p, q = p_rows[i], q_rows[i]
        r = Fraction(1) if q[x[i]] == 0 else p[x[i]] / q[x[i]]
        w.append(min(Fraction(1), w[-1] * r))
    h, corr = [], []
    for i in range(L):
        p, q = p_rows[i], q_rows[i]
        res = [max(w[i] * pi - qi, Fraction(0)) for pi, qi in zip(p, q)]
        S = sum(res)
        den = S + 1 - w[i]
        h.append(Fraction(1) if i == 0 or den == 0 else S / den)
        corr.append([r / S for r in res] if S > 0 else list(p))
    h.append(w[L])
    corr.append(list(p_rows[L]))
    stop = []
    for i in range(L + 1):
        v = h[i]
        for j in range(i + 1, L + 1):
            v *= 1 - h[j]
        stop.append(v)
    return stop, corr


def reference_analysis(instance, law_fn):
    """(tau pmf, output law over V^(L+1) as a dict, target law as a dict), all exact."""
    V, L = instance.vocab_size, instance.block_length
    tq, tp = instance.draft.to_exact(), instance.target.to_exact()
    pmf = [Fraction(0)] * (L + 1)
    out = {}
    for x in itertools.product(range(V), repeat=L):
        q_rows = [cond(tq, x[:i]) for i in range(L)]
        p_rows = [cond(tp, x[:i]) for i in range(L + 1)]
        px = Fraction(1)
        for i in range(L):
            px *= q_rows[i][x[i]]
        stop, corr = law_fn(x, q_rows, p_rows)
        for i in range(L + 1):
            pmf[i] += px * stop[i]
            for y in range(V):
                m = px * stop[i] * corr[i][y]
                if m:
                    _extend(out, x[:i] + (y,), m, tp, L + 1, V)
    target = {}
    _extend(target, (), Fraction(1), tp, L + 1, V)
    return pmf, out, target


def _extend(acc, seq, mass, tp, n, V):
    """Add ``mass`` for ``seq`` continued by target sampling up to length n."""
    if len(seq) == n:
        acc[seq] = acc.get(seq, Fraction(0)) + mass
        return
    row = cond(tp, seq)
    for y in range(V):
        if row[y]:
            _extend(acc, seq + (y,), mass * row[y], tp, n, V)
