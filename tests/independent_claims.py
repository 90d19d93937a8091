"""Second implementations behind the claims ledger's verdicts, written from the papers alone.

Nothing here imports spectheory's engine, verifiers, bounds or LPs: an instance arrives as its
JSON dictionary (the documented instance format: ``{"vocab_size", "block_length", "target",
"draft"}``, rows keyed by comma-joined prefixes, or one context-independent row), every
probability is a `fractions.Fraction`, the sequence tree is enumerated here, and every LP optimum
comes with an exact certificate (`certified_max`): HiGHS (scipy) finds a basis, then the primal
and the dual are re-solved in rationals on the support HiGHS reports and checked exactly
(primal feasibility, dual feasibility, equal objectives). A certificate that does not close is an
error, never a number.

Conventions (Sun et al., arXiv 2403.10444, section 2): p is the target, q the draft; tau is the
number of accepted draft tokens in one iteration; E[tau + 1] counts the emitted tokens.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction
from math import prod

import numpy as np

F = Fraction


# ----------------------------------------------------------------------------- instances


class Model:
    """Target and draft rows of one instance (prefix tuple -> row of Fractions)."""

    def __init__(self, data: dict):
        self.V = int(data["vocab_size"])
        self.L = int(data["block_length"])
        self.p_rows = self._read(data["target"])
        self.q_rows = self._read(data["draft"])

    def _read(self, obj):
        if isinstance(obj, list):
            row = [F(x) for x in obj]
            return lambda prefix: row
        table = {tuple(int(t) for t in k.split(",")) if k else (): [F(x) for x in v]
                 for k, v in obj.items()}
        return lambda prefix: table[tuple(prefix)]

    def p(self, prefix, token):
        return self.p_rows(prefix)[token]

    def q(self, prefix, token):
        return self.q_rows(prefix)[token]

    def P(self, seq, start=()):
        """Target probability of ``seq`` following ``start``."""
        out, ctx = F(1), tuple(start)
        for a in seq:
            out *= self.p(ctx, a)
            ctx += (a,)
        return out

    def Q(self, seq):
        out, ctx = F(1), ()
        for a in seq:
            out *= self.q(ctx, a)
            ctx += (a,)
        return out

    def seqs(self, n):
        return list(itertools.product(range(self.V), repeat=n))


def toy(L=2):
    return Model({"vocab_size": 2, "block_length": L, "target": ["1/3", "2/3"],
                  "draft": ["2/3", "1/3"]})


def one_step(p, q):
    return Model({"vocab_size": len(p), "block_length": 1, "target": [str(x) for x in p],
                  "draft": [str(x) for x in q]})


# ----------------------------------------------------------------------------- exact LP


class CertificateError(AssertionError):
    """The rational re-solve did not close the certificate."""


def _solve_rational(rows, rhs, ncols, guess):
    """One solution of the consistent linear system ``rows x = rhs`` (rows: list of dict
    col -> Fraction), in rationals: Gauss-Jordan elimination, free columns pinned to the rounded
    ``guess``. None when the system is inconsistent."""
    M = [dict(r) for r in rows]
    b = list(rhs)
    pivots = []  # (row index, column)
    r = 0
    cols = sorted({c for row in M for c in row})
    for c in cols:
        piv = next((i for i in range(r, len(M)) if M[i].get(c, 0) != 0), None)
        if piv is None:
            continue
        M[r], M[piv] = M[piv], M[r]
        b[r], b[piv] = b[piv], b[r]
        inv = 1 / M[r][c]
        M[r] = {k: v * inv for k, v in M[r].items()}
        b[r] *= inv
        for i in range(len(M)):
            if i != r and M[i].get(c, 0) != 0:
                f = M[i][c]
                for k, v in M[r].items():
                    nv = M[i].get(k, 0) - f * v
                    if nv == 0:
                        M[i].pop(k, None)
                    else:
                        M[i][k] = nv
                b[i] -= f * b[r]
        pivots.append((r, c))
        r += 1
    if any(b[i] != 0 for i in range(r, len(M))):
        return None
    x = [F(guess[j]).limit_denominator(10**6) for j in range(ncols)]
    for i, c in pivots:
        x[c] = b[i] - sum(v * x[k] for k, v in M[i].items() if k != c)
    return x


def certified_max(c, A, b):
    """max c.x subject to A x = b, x >= 0, exactly: (optimum, x, y) with x primal-feasible and y
    dual-feasible (A^T y >= c) in rationals and c.x = b.y. ``A`` is a list of dict rows
    (column -> Fraction); ``c``, ``b`` lists of Fractions."""
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix

    n, m = len(c), len(A)
    data, ri, ci = [], [], []
    for i, row in enumerate(A):
        for j, v in row.items():
            ri.append(i), ci.append(j), data.append(float(v))
    Af = csr_matrix((data, (ri, ci)), shape=(m, n))
    res = linprog(-np.array([float(v) for v in c]), A_eq=Af,
                  b_eq=np.array([float(v) for v in b]), bounds=(0, None), method="highs")
    if res.status != 0:
        raise CertificateError(f"HiGHS: {res.message}")
    xf, yf = res.x, -res.eqlin.marginals
    support = [j for j in range(n) if xf[j] > 1e-9]
    # primal: A[:, S] x_S = b on the support
    sub = [{j: v for j, v in row.items() if j in set(support)} for row in A]
    x = _solve_rational(sub, b, n, [xf[j] if j in set(support) else 0 for j in range(n)])
    if x is None:
        raise CertificateError("primal system on HiGHS's support is inconsistent")
    x = [x[j] if j in set(support) else F(0) for j in range(n)]
    # dual: (A^T y)_j = c_j on the support (complementary slackness)
    cols = [{} for _ in range(n)]
    for i, row in enumerate(A):
        for j, v in row.items():
            cols[j][i] = v
    y = _solve_rational([cols[j] for j in support], [c[j] for j in support], m, list(yf))
    if y is None:
        raise CertificateError("dual system on HiGHS's support is inconsistent")
    # the certificate, in rationals
    if any(v < 0 for v in x):
        raise CertificateError("rational primal has a negative entry")
    for i, row in enumerate(A):
        if sum(v * x[j] for j, v in row.items()) != b[i]:
            raise CertificateError(f"primal row {i} violated")
    for j in range(n):
        if sum(v * y[i] for i, v in cols[j].items()) < c[j]:
            raise CertificateError(f"dual column {j} violated")
    primal = sum(c[j] * x[j] for j in range(n))
    dual = sum(b[i] * y[i] for i in range(m))
    if primal != dual:
        raise CertificateError(f"gap {primal} != {dual}")
    return primal, x, y


# ----------------------------------------------------------------------------- direct LP


def _outputs(drafts, V):
    """Blocks a K-path verifier may emit: a prefix of one drafted path, then one token."""
    prefixes = {()}
    for d in drafts:
        for j in range(1, len(d) + 1):
            prefixes.add(tuple(d[:j]))
    return [pre + (a,) for pre in sorted(prefixes) for a in range(V)]


def draft_tuples(model, K, drafting="iid"):
    """(ordered K-tuple of paths, probability) for i.i.d. paths of length L from q, or
    (``norep``) first tokens without replacement (each later path's first token drawn from q
    restricted to the tokens not drawn yet, the rest of each path from q), or (``hub``, K = 2)
    SpecHub's pair."""
    paths = model.seqs(model.L)
    if drafting == "norep" and K > sum(1 for x in model.q_rows(()) if x > 0):
        raise ValueError("fewer drafted first tokens than paths: without replacement undefined")
    out = []
    q0 = model.q_rows(())
    hub = max(range(model.V), key=lambda a: (q0[a], -a))  # argmax q, ties to the smaller id
    if drafting == "hub" and (K != 2 or sum(1 for x in q0 if x > 0) < 2):
        raise ValueError("hub drafting: two paths and two drafted first tokens")
    for tup in itertools.product(paths, repeat=K):
        if drafting == "iid":
            pr = prod((model.Q(x) for x in tup), start=F(1))
        elif drafting == "hub":
            # SpecHub (arXiv 2411.05289): X_1 ~ q; X_2 = the hub a if X_1 != a, else a draw from
            # q without a; the rest of each path from q
            (x1, x2) = tup
            if x1[0] != hub:
                second = F(1) if x2[0] == hub else F(0)
            else:
                second = F(0) if x2[0] == hub else q0[x2[0]] / (1 - q0[hub])
            pr = model.Q(x1) * second * (model.Q(x2) / q0[x2[0]] if q0[x2[0]] else F(0))
        else:
            firsts = [x[0] for x in tup]
            if len(set(firsts)) < K:
                continue
            pr, used = F(1), F(0)
            for x in tup:
                q0 = model.q((), x[0])
                if 1 - used == 0:
                    pr = F(0)
                    break
                pr *= q0 / (1 - used) * (model.Q(x) / q0 if q0 else 0)
                used += q0
        if pr > 0:
            out.append((tup, pr))
    return out


def direct_lp(model, K, drafting="iid"):
    """The best E[tau + 1] of any valid K-path verifier (Sun et al.'s validity: the emitted block
    followed by target sampling to length L + 1 has the target law), certified exactly."""
    V, L = model.V, model.L
    tuples = draft_tuples(model, K, drafting)
    cols, c = [], []
    A, b = [], []
    for ti, (tup, pr) in enumerate(tuples):
        row = {}
        for o in _outputs(tup, V):
            row[len(cols)] = F(1)
            cols.append((ti, o))
            c.append(F(len(o)))
        A.append(row)
        b.append(pr)
    ys = model.seqs(L + 1)
    yindex = {y: i for i, y in enumerate(ys)}
    law = [dict() for _ in ys]
    for j, (ti, o) in enumerate(cols):
        k = len(o)
        for rest in itertools.product(range(V), repeat=L + 1 - k):
            y = o + rest
            w = model.P(rest, o)
            if w:
                law[yindex[y]][j] = w
    for y in ys:
        A.append(law[yindex[y]])
        b.append(model.P(y))
    opt, _, _ = certified_max(c, A, b)
    return opt


def node_budget_free_single_path(model):
    """K = 1 direct LP (any information about the rows), certified."""
    return direct_lp(model, 1)


# ----------------------------------------------------------------------------- closed forms


def full_blocks_expression(model, K, weight="target"):
    """sum_{t<=L} sum_{x^t} w(x^t) [1 - (1 - min(r(x^t)/w(x^t), 1))^K]: with weight = the target
    (m_b) and r = the draft (m_s), SpecTr-GBV's Theorem 5.3 in the paper's letters; with the
    letters swapped (weight = the draft), the reading the ledger once used."""
    tot = F(0)
    for t in range(1, model.L + 1):
        for x in model.seqs(t):
            P, Q = model.P(x), model.Q(x)
            w, r = (P, Q) if weight == "target" else (Q, P)
            if w > 0:
                tot += w * (1 - (1 - min(r / w, F(1))) ** K)
    return tot


def k_draft_coupling_bound(model, K):
    """sum_{t<=L} sum_{x^t} min(p(x^t), 1 - (1 - q(x^t))^K): the expected common prefix of the
    target sequence with the best of K i.i.d. drafts under any coupling (E[tau])."""
    return sum((min(model.P(x), 1 - (1 - model.Q(x)) ** K)
                for t in range(1, model.L + 1) for x in model.seqs(t)), F(0))


def gbv_L1(p, q, K):
    """GBV (Thomas & Pal, arXiv 2602.16961) at L = 1: the drafted token of best p/q rank
    (ties: smaller id; q = 0 last) has law q^G(a) = F(a)^K - F(a-)^K, F the q-CDF from the worst
    rank up; token verification against q^G accepts sum_a min(p(a), q^G(a)). Returns E[tau+1]."""
    V = len(p)
    order = sorted(range(V), key=lambda a: (q[a] == 0, -(p[a] / q[a]) if q[a] else 0, a))
    worst_first = list(reversed(order))
    cdf, qg = F(0), {}
    for a in worst_first:
        qg[a] = (cdf + q[a]) ** K - cdf ** K
        cdf += q[a]
    return 1 + sum(min(p[a], qg[a]) for a in range(V))


def hu_alpha(p, q, K):
    """Hu et al. (arXiv 2502.18779) Eq. 8 by brute force over all subsets H:
    alpha* = min_H [p(H) + 1 - q(H)^K] (i.i.d. drafts)."""
    V = len(p)
    return min(sum((p[a] for a in H), F(0)) + 1 - sum((q[a] for a in H), F(0)) ** K
               for r in range(V + 1) for H in itertools.combinations(range(V), r))


# ----------------------------------------------------------------------------- single path


def block_verification_E(model):
    """Block verification (Sun et al., arXiv 2403.10444, Algorithm 2) on one path, E[tau + 1] by
    enumerating the drafted path: weights p_i = min(1, p_{i-1} p(x_i)/q(x_i)), residual masses
    r_i = sum_a max(p_i p(a|x^i) - q(a|x^i), 0) (p_L has none: the block is complete), stop
    probabilities h_i = r_i / (r_i + 1 - p_i) (h_L = p_L), tau = the largest i that stops, scanning
    from L down."""
    L, V = model.L, model.V
    total = F(0)
    for x in model.seqs(L):
        Qx = model.Q(x)
        if Qx == 0:
            continue
        w, h = F(1), []
        for i in range(1, L + 1):
            pre = x[:i - 1]
            w = min(F(1), w * model.p(pre, x[i - 1]) / model.q(pre, x[i - 1]))
            if i == L:
                h.append(w)
            else:
                r = sum(max(w * model.p(x[:i], a) - model.q(x[:i], a), F(0)) for a in range(V))
                h.append(r / (r + 1 - w) if r + 1 - w else F(1))
        # P(tau = i) = h_i prod_{j > i} (1 - h_j); tau = 0 with the rest
        tail, Etau = F(1), F(0)
        for i in range(L, 0, -1):
            Etau += i * h[i - 1] * tail
            tail *= 1 - h[i - 1]
        total += Qx * Etau
    return 1 + total


def token_verification_E(model):
    """Token verification (Leviathan et al.): accept x_i with min(1, p/q) while all accepted;
    E[tau + 1] = 1 + sum_{t<=L} sum_{x^t} prod_i min(p, q)(x_i | x^{i-1})."""
    tot = F(0)
    for t in range(1, model.L + 1):
        for x in model.seqs(t):
            tot += prod((min(model.p(x[:i], x[i]), model.q(x[:i], x[i])) for i in range(t)),
                        start=F(1))
    return 1 + tot


# ----------------------------------------------------------------------------- laws


def target_law(model):
    """{y in V^(L+1): p(y)}."""
    return {y: model.P(y) for y in model.seqs(model.L + 1)}


def tv(law, model):
    tgt = target_law(model)
    keys = set(tgt) | set(law)
    return sum((abs(law.get(k, F(0)) - tgt.get(k, F(0))) for k in keys), F(0)) / 2


def _complete(law, model, block, mass):
    """Add ``mass`` on ``block`` followed by target sampling to length L + 1."""
    n = model.L + 1 - len(block)
    for rest in itertools.product(range(model.V), repeat=n):
        w = mass * model.P(rest, block)
        if w:
            law[block + rest] = law.get(block + rest, F(0)) + w


def chain_law(model, weights_fn):
    """Law of a one-path verifier given per-draft stop probabilities: ``weights_fn(x)`` returns
    (P(tau = t | x) for t = 0..L, residual rows res_t for t < L (distributions over the next
    token)). Returns (law of the L + 1 tokens, E[tau + 1])."""
    law, E = {}, F(0)
    for x in model.seqs(model.L):
        Qx = model.Q(x)
        if Qx == 0:
            continue
        stops, res = weights_fn(x)
        for t, pt in enumerate(stops):
            if pt == 0:
                continue
            E += Qx * pt * (t + 1)
            if t == model.L:
                _complete(law, model, tuple(x), Qx * pt)
            else:
                for a in range(model.V):
                    if res[t][a]:
                        _complete(law, model, tuple(x[:t]) + (a,), Qx * pt * res[t][a])
    return law, E


def _normalise(v, fallback):
    z = sum(v)
    return [a / z for a in v] if z else list(fallback)


def _scan(h):
    """P(tau = t) = h_t prod_{j > t} (1 - h_j) for a scan from t = L down (h_0 = 1)."""
    L = len(h) - 1
    out, tail = [F(0)] * (L + 1), F(1)
    for t in range(L, -1, -1):
        out[t] = h[t] * tail
        tail *= 1 - h[t]
    return out


def hsd(model, released=False):
    """HSD, Algorithm 2 (Zhou et al., arXiv 2601.05724, Definitions 4-6, eqs. 19-20): capped
    ratios r*(x^t v) = p(x^t v) / (q(x^t v) M_t), M_t = max(1, max_{i<=t} r_i); h_t =
    D*(p,q|x^t) / D*(q,p|x^t) (0 < t < L), h_L = min(1, r*(x^L)) (``released``: the released
    code's uncapped min(1, r_L)), h_0 = 1; residual normalise((p(x^t v)/M_t - q(x^t v))^+)."""
    V, L = model.V, model.L

    def weights(x):
        r = [F(1)] + [model.P(x[:t]) / model.Q(x[:t]) for t in range(1, L + 1)]
        M = [max([F(1)] + r[1:t + 1]) for t in range(L + 1)]
        h, res = [F(1)] + [F(0)] * L, []
        for t in range(L):
            pre = tuple(x[:t])
            Pt, Qt = model.P(pre), model.Q(pre)
            up = [Pt * model.p(pre, v) / M[t] - Qt * model.q(pre, v) for v in range(V)]
            res.append(_normalise([max(u, F(0)) for u in up], model.p_rows(pre)))
            if t > 0:
                dpq = sum(max(u, F(0)) for u in up)
                dqp = sum(max(-u, F(0)) for u in up)
                h[t] = dpq / dqp if dqp else F(0)
        h[L] = min(F(1), r[L]) if released else min(F(1), r[L] / M[L - 1])
        return _scan(h), res

    return chain_law(model, weights)


def block_law(model, wrong_row=False):
    """Block verification (Sun et al., arXiv 2403.10444), law and E[tau + 1]. ``wrong_row``: vLLM
    PR 40819's pure-torch reference, whose h_t reads its residual mass S from the rows one
    position too early (at x^{t-1} instead of x^t); weights and residuals as in the paper."""
    V, L = model.V, model.L

    def weights(x):
        w, ws = F(1), [F(1)]
        for i in range(1, L + 1):
            pre = tuple(x[:i - 1])
            w = min(F(1), w * model.p(pre, x[i - 1]) / model.q(pre, x[i - 1]))
            ws.append(w)
        h, res = [F(1)] + [F(0)] * L, []
        for t in range(L):
            pre = tuple(x[:t])
            up = [ws[t] * model.p(pre, v) - model.q(pre, v) for v in range(V)]
            S = sum(max(u, F(0)) for u in up)
            res.append(_normalise([max(u, F(0)) for u in up], model.p_rows(pre)))
            if t > 0:
                if wrong_row:
                    early = tuple(x[:t - 1])
                    S = sum(max(ws[t] * model.p(early, v) - model.q(early, v), F(0))
                            for v in range(V))
                h[t] = S / (S + 1 - ws[t]) if S + 1 - ws[t] else F(1)
        h[L] = ws[L]
        return _scan(h), res

    return chain_law(model, weights)


def greedy_block_released(model):
    """One iteration of SpecTr-GBV's released loop at K = 1 (arXiv 2604.25925, src/engine.py, as
    transcribed in the paper's code): uncapped joint ratios r_l = P_l / Q_l; h_l = 1 if r_l >= 1
    else S_l / (S_l + 1 - r_l), S_l = sum_v (r_l p(v|x^l) - q(v|x^l))^+ (0 < l < L); full block
    min(1, r_L); prefixes tried l = 1..L-1 upward, a later success overwriting an earlier one,
    then the full block; residual normalise((r_a p - q)^+) at the accepted length a (r_0 = 1)."""
    V, L = model.V, model.L

    def weights(x):
        r = [F(1)] + [model.P(x[:t]) / model.Q(x[:t]) for t in range(1, L + 1)]
        h, res = [F(1)] + [F(0)] * L, []
        for t in range(L):
            pre = tuple(x[:t])
            up = [r[t] * model.p(pre, v) - model.q(pre, v) for v in range(V)]
            S = sum(max(u, F(0)) for u in up)
            res.append(_normalise([max(u, F(0)) for u in up], model.p_rows(pre)))
            if t > 0:
                h[t] = F(1) if r[t] >= 1 else S / (S + 1 - r[t])
        h[L] = min(F(1), r[L])
        return _scan(h), res  # the last success in upward order = the first from L down

    return chain_law(model, weights)


def gbv(model, K):
    """GBV (Thomas & Pal, arXiv 2602.16961) by enumeration: K i.i.d. paths; at every node the
    children are ranked by p/q (largest first, ties to the smaller id, q = 0 last); the selected
    path is the lexicographically best drafted one; its law q^G is computed here by enumerating the
    K-tuples; the selected path is block-verified against q^G. Returns E[tau + 1]."""
    V, L = model.V, model.L

    def rank(pre, a):
        qa = model.q(pre, a)
        return (qa == 0, -(model.p(pre, a) / qa) if qa else 0, a)

    def key(x):
        return tuple(rank(tuple(x[:i]), x[i]) for i in range(L))

    sel = {}
    for tup in itertools.product(model.seqs(L), repeat=K):
        pr = prod((model.Q(x) for x in tup), start=F(1))
        if pr:
            best = min(tup, key=key)
            sel[best] = sel.get(best, F(0)) + pr
    prefix_mass = {}
    for x, m in sel.items():
        for t in range(L + 1):
            prefix_mass[x[:t]] = prefix_mass.get(x[:t], F(0)) + m

    def qg(pre, a):
        return prefix_mass.get(pre + (a,), F(0)) / prefix_mass[pre]

    E = F(0)
    for x, m in sel.items():
        w, ws = F(1), [F(1)]
        for i in range(1, L + 1):
            pre = tuple(x[:i - 1])
            w = min(F(1), w * model.p(pre, x[i - 1]) / qg(pre, x[i - 1]))
            ws.append(w)
        h = [F(1)] + [F(0)] * L
        for t in range(1, L):
            pre = tuple(x[:t])
            S = sum(max(ws[t] * model.p(pre, v) - qg(pre, v), F(0)) for v in range(V))
            h[t] = S / (S + 1 - ws[t]) if S + 1 - ws[t] else F(1)
        h[L] = ws[L]
        stops = _scan(h)
        E += m * sum((t + 1) * s for t, s in enumerate(stops))
    return E


def rrs_L1(p, q, K):
    """Recursive rejection sampling (SpecInfer) at L = 1 with K i.i.d. drafts: draft k is accepted
    with min(1, r_k(x_k)/q(x_k)), else r_{k+1} = normalise((r_k - q)^+), r_1 = p. Returns
    E[tau + 1] = 1 + P(some draft accepted)."""
    V = len(p)
    acc = F(0)
    for tup in itertools.product(range(V), repeat=K):
        pr = prod((q[x] for x in tup), start=F(1))
        if not pr:
            continue
        r, stay = list(p), F(1)
        for x in tup:
            a = min(F(1), r[x] / q[x])
            acc += pr * stay * a
            stay *= 1 - a
            r = _normalise([max(r[v] - q[v], F(0)) for v in range(V)], r)
    return 1 + acc


def first_token_sets(model, K, drafting="iid"):
    """{set of drafted first tokens: probability}, L = 1."""
    out = {}
    for tup, pr in draft_tuples(model, K, drafting):
        key = frozenset(x[0] for x in tup)
        out[key] = out.get(key, F(0)) + pr
    return out


def all_in(model, K, H, drafting="iid", sets=None):
    """P(every drafted first token lies in H), L = 1."""
    sets = first_token_sets(model, K, drafting) if sets is None else sets
    return sum((pr for key, pr in sets.items() if key <= set(H)), F(0))


def hu_alpha_scheme(model, K, drafting):
    """min_H [p(H) + 1 - P(all drafts in H)] over all subsets H, for the scheme ``drafting``."""
    V = model.V
    p = model.p_rows(())
    sets = first_token_sets(model, K, drafting)
    return min(sum((p[a] for a in H), F(0)) + 1 - all_in(model, K, H, drafting, sets)
               for r in range(V + 1) for H in itertools.combinations(range(V), r))


def khisti_theorem3(p, q):
    """Two identical drafts (Khisti et al., arXiv 2410.18234, Theorem 3):
    alpha* = min_S p(S) + q(S^c)^2 + 2 q(S) q(S^c)."""
    V = len(p)
    out = None
    for r in range(V + 1):
        for S in itertools.combinations(range(V), r):
            pS = sum((p[a] for a in S), F(0))
            qS = sum((q[a] for a in S), F(0))
            v = pS + (1 - qS) ** 2 + 2 * qS * (1 - qS)
            out = v if out is None else min(out, v)
    return out


# ----------------------------------------------------------------------------- engines


def coin_law(model, bits, strict):
    """Token verification whose acceptance is P(r <= p/q) (``strict``: r < p/q) for r uniform on
    {k 2^-bits} (``bits`` None: uniform on [0, 1], acceptance min(1, p/q)); residual
    normalise((p - q)^+); law of the L + 1 tokens."""
    n = 2**bits if bits is not None else None

    def acc(t):
        if t >= 1:
            return F(1)
        if n is None:  # a continuous coin: Leviathan et al.'s rule exactly
            return t
        c = t * n
        k = math.ceil(c) if strict else math.floor(c) + 1
        return F(k, n)

    law = {}

    def walk(pre, mass):
        if len(pre) == model.L:
            _complete(law, model, pre, mass)
            return
        pr, qr = model.p_rows(pre), model.q_rows(pre)
        res = _normalise([max(a - b, F(0)) for a, b in zip(pr, qr)], pr)
        rej = F(0)
        for x in range(model.V):
            if qr[x]:
                a = acc(pr[x] / qr[x])
                walk(pre + (x,), mass * qr[x] * a)
                rej += qr[x] * (1 - a)
        for y in range(model.V):
            if res[y]:
                _complete(law, model, pre + (y,), mass * rej * res[y])

    walk((), F(1))
    return law


def sample_match(model):
    """Sample match: x ~ q and y ~ p(.|x^{<i}) at every position; accept while y = x; emit y at
    the first mismatch, the bonus after L matches. Returns (law, E[tau])."""
    law, Etau = {}, F(0)
    for x in model.seqs(model.L):
        for y in model.seqs(model.L + 1):
            m = model.Q(x)
            for i in range(model.L + 1):
                m *= model.p(tuple(x[:i]), y[i])
            if not m:
                continue
            k = 0
            while k < model.L and y[k] == x[k]:
                k += 1
            Etau += m * k
            _complete(law, model, tuple(x[:k]) + (y[k],), m)
    return law, Etau


def multi_candidate_match(model, candidates, consistent):
    """fms-extras #12 (per-candidate target samples, longest match wins, ties to the smaller
    index) or PR #17 (one target sample per tree node); law of the L + 1 tokens."""
    L, V = model.L, model.V
    law = {}
    if consistent:
        def walk(pre, mass):
            for y in range(V):
                m = mass * model.p(pre, y)
                if not m:
                    continue
                if len(pre) < L and any(c[:len(pre) + 1] == pre + (y,) for c in candidates):
                    walk(pre + (y,), m)
                else:
                    _complete(law, model, pre + (y,), m)
        walk((), F(1))
        return law
    # each candidate's own target samples matter only through (match length k, sample y_k)
    outcomes = []
    for c in candidates:
        dist = {}
        for y in model.seqs(L + 1):
            m = prod((model.p(tuple(c[:i]), y[i]) for i in range(L + 1)), start=F(1))
            if m:
                k = 0
                while k < L and y[k] == c[k]:
                    k += 1
                dist[(k, y[k])] = dist.get((k, y[k]), F(0)) + m
        outcomes.append(list(dist.items()))
    for combo in itertools.product(*outcomes):
        m = prod((w for _, w in combo), start=F(1))
        best = max(range(len(candidates)), key=lambda j: (combo[j][0][0], -j))
        k, yk = combo[best][0]
        _complete(law, model, tuple(candidates[best][:k]) + (yk,), m)
    return law


# ----------------------------------------------------------------------------- trees


def specinfer_tree(model, shape):
    """SpecInfer's tree verification (Miao et al., recursive rejection sampling at every node) on
    a drafted tree with ``shape[d]`` i.i.d. children from q(.|node) at depth d: the candidates of
    a node are tried in drafting order, candidate x accepted with min(1, r(x)/q(x)) (r = p(.|node)
    at first, then normalise((r - q)^+) after each rejection); equal candidates are one token-tree
    node (SpecInfer merges equal prefixes), so an accepted x continues with the children of every
    candidate equal to x (a rejected token has r(x) = 0 afterwards and is never accepted later);
    after every candidate is rejected a token is drawn from r; below a leaf the bonus comes from p.
    Returns (law of the L + 1 tokens, E[tau + 1])."""
    law, E = {}, [F(0)]

    def emit(block, mass):
        E[0] += mass * len(block)
        _complete(law, model, block, mass)

    def node(pre, mass, copies):
        d = len(pre)
        if d == len(shape):
            for a in range(model.V):
                if model.p(pre, a):
                    emit(pre + (a,), mass * model.p(pre, a))
            return
        for kids in itertools.product(range(model.V), repeat=copies * shape[d]):
            pr = prod((model.q(pre, x) for x in kids), start=F(1))
            if not pr:
                continue
            r, stay = list(model.p_rows(pre)), mass * pr
            for x in kids:
                a = min(F(1), r[x] / model.q(pre, x))
                if a:
                    node(pre + (x,), stay * a, kids.count(x))
                stay *= 1 - a
                r = _normalise([max(r[v] - model.q(pre, v), F(0)) for v in range(model.V)], r)
            for y in range(model.V):
                if r[y]:
                    emit(pre + (y,), stay * r[y])

    node((), F(1), 1)
    return law, E[0]


def spectr_gbv_released(model, K):
    """One iteration of the released SpecTr-GBV loop (arXiv 2604.25925, src/engine.py
    ``Decoding.speculative_decoding``), as transcribed: K i.i.d. candidates; for candidate j and
    prefix length l, with P_l, Q_l the joint probabilities of x^j_{1:l}, m(v) = min(1, Q_l q(v) /
    (P_l p(v))) (taken as 1 where P_l p(v) = 0), m_0 = min(1, Q_l / P_l):
    h_l = [sum_v P_l p(v) (1 - m(v))^K - P_l (1 - m_0)^K]
          / [1 - (1 - Q_l)^K - sum_v P_l p(v) (1 - (1 - m(v))^K)]  (l < L),
    a_L = P_L (1 - (1 - m_0)^K) / (1 - (1 - Q_L)^K), clamped to [0, 1] (0/0 = 0, x/0 = 1).
    Candidates in index order try l = a+1..L-1 (a when the candidate starts), skipping prefixes
    rejected before; a success replaces the accepted prefix; then the full block with a_L ends the
    loop. Y ~ normalise(P_a p(v|A) (1 - m(v))^K) at the accepted prefix A (p(.|A) where that has no
    mass), the bonus from p after a full block. Returns (law, E[tau + 1])."""
    V, L = model.V, model.L

    def clamp(num, den):
        if den == 0:
            return F(1) if num > 0 else F(0)
        return min(F(1), max(F(0), num / den))

    def m_of(P, Q, pre, v):
        Pv = P * model.p(pre, v)
        return F(1) if Pv == 0 else min(F(1), Q * model.q(pre, v) / Pv)

    def h(x, l):
        pre = tuple(x[:l])
        P, Q = model.P(pre), model.Q(pre)
        m0 = F(1) if P == 0 else min(F(1), Q / P)
        ms = [m_of(P, Q, pre, v) for v in range(V)]
        num = sum((P * model.p(pre, v) * (1 - ms[v]) ** K for v in range(V)), F(0)) - \
            P * (1 - m0) ** K
        den = 1 - (1 - Q) ** K - sum((P * model.p(pre, v) * (1 - (1 - ms[v]) ** K)
                                      for v in range(V)), F(0))
        return clamp(num, den)

    def a_full(x):
        P, Q = model.P(x), model.Q(x)
        m0 = F(1) if P == 0 else min(F(1), Q / P)
        return clamp(P * (1 - (1 - m0) ** K), 1 - (1 - Q) ** K)

    law, E = {}, [F(0)]

    def emit(A, mass):
        if len(A) == L:
            rho = model.p_rows(A)
        else:
            P, Q = model.P(A), model.Q(A)
            rho = _normalise([P * model.p(A, v) * (1 - m_of(P, Q, A, v)) ** K
                              for v in range(V)], model.p_rows(A))
        for y in range(V):
            if rho[y]:
                E[0] += mass * rho[y] * (len(A) + 1)
                _complete(law, model, A + (y,), mass * rho[y])

    def run(cands, j, A, seen, mass):
        if j == len(cands):
            emit(A, mass)
            return
        x = cands[j]
        a0 = len(A)

        def prefixes(l, A, seen, mass):
            if l == L:  # the full block
                af = a_full(x)
                if af:
                    emit(tuple(x), mass * af)
                if af < 1:
                    run(cands, j + 1, A, seen, mass * (1 - af))
                return
            pre = tuple(x[:l])
            if pre in seen:
                prefixes(l + 1, A, seen, mass)
                return
            hl = h(x, l)
            if hl:
                prefixes(l + 1, pre, seen, mass * hl)
            if hl < 1:
                prefixes(l + 1, A, seen | {pre}, mass * (1 - hl))

        prefixes(a0 + 1, A, seen, mass)

    for cands in itertools.product(model.seqs(L), repeat=K):
        pr = prod((model.Q(c) for c in cands), start=F(1))
        if pr:
            run(cands, 0, (), frozenset(), pr)
    return law, E[0]


def point_mass_tree(model, shape, drafting):
    """EAGLE's non-greedy rule with q(x) = 1 (EAGLE #329) on a drafted tree: candidates tried in
    order, x accepted with probability r(x) (r = p(.|node) at first), after a rejection r loses x
    and is renormalised; an accepted x continues in its subtree; after every rejection a token is
    drawn from r; the bonus below a leaf from p. Children: ``topk`` the shape[d] most probable
    tokens of q(.|node) (ties to the smaller id), ``iid`` i.i.d. draws from q(.|node), equal ones
    one node (as in `specinfer_tree`). Returns the law of the L + 1 tokens."""
    law = {}

    def node(pre, mass, copies):
        d = len(pre)
        if d == len(shape):
            _complete(law, model, pre, mass)
            return
        n = copies * shape[d]
        if drafting == "topk":
            qr = model.q_rows(pre)
            options = [(tuple(sorted(range(model.V), key=lambda a: (-qr[a], a))[:n]), F(1))]
        else:
            options = [(kids, prod((model.q(pre, x) for x in kids), start=F(1)))
                       for kids in itertools.product(range(model.V), repeat=n)]
        for kids, pr in options:
            if not pr:
                continue
            r, stay = list(model.p_rows(pre)), mass * pr
            for x in kids:
                a = r[x]
                if a:
                    node(pre + (x,), stay * a, kids.count(x) if drafting == "iid" else 1)
                stay *= 1 - a
                r = _normalise([F(0) if v == x else r[v] for v in range(model.V)], r)
            for y in range(model.V):
                if r[y] and stay:
                    _complete(law, model, pre + (y,), stay * r[y])

    node((), F(1), 1)
    return law


def gbv_tie_rule_L1(p, q, K):
    """The GBV reference code's tie rule at L = 1 (arXiv 2602.16961's code, as the ledger's row
    describes it): the selection keeps, among the drafted tokens of best p/q, the earliest drafted
    one, while the skewed law q^G(a) = F(a)^K - F(a-)^K ranks ties with the larger token id first
    (F the q-CDF from the worst rank up); the selected token is verified against q^G
    (accept min(1, p/q^G), else normalise((p - q^G)^+)). Returns the law of the emitted token."""
    V = len(p)
    ratio = [p[a] / q[a] if q[a] else None for a in range(V)]
    rank = sorted(range(V), key=lambda a: (q[a] == 0, -(ratio[a] or 0), -a))  # best first
    cdf, qg = F(0), {}
    for a in reversed(rank):
        qg[a] = (cdf + q[a]) ** K - cdf ** K
        cdf += q[a]
    res = _normalise([max(p[a] - qg[a], F(0)) for a in range(V)], p)
    out = [F(0)] * V
    for tup in itertools.product(range(V), repeat=K):
        pr = prod((q[x] for x in tup), start=F(1))
        if not pr:
            continue
        best = max(ratio[x] for x in tup)
        x = next(x for x in tup if ratio[x] == best)  # the earliest drafted of the best ratio
        a = min(F(1), p[x] / qg[x])
        out[x] += pr * a
        for y in range(V):
            out[y] += pr * (1 - a) * res[y]
    return out


# ----------------------------------------------------------------------------- Cactus (2604.04987)


def cactus_kl_reweighted(p, x, delta, digits=50):
    """KL(h || p) in `digits` decimal digits: h(x) = min(1, p(x) + sqrt(2 delta p(x)(1 - p(x)))),
    every other token's target probability scaled by (1 - h(x)) / (1 - p(x)) (Hao & Mou's
    reweighted target), written from the paper's formula with Python's decimal module."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = digits
        P = [Decimal(Fraction(v).numerator) / Decimal(Fraction(v).denominator) for v in p]
        d = Decimal(Fraction(delta).numerator) / Decimal(Fraction(delta).denominator)
        hx = min(Decimal(1), P[x] + (2 * d * P[x] * (1 - P[x])).sqrt())
        scale = (1 - hx) / (1 - P[x])
        kl = Decimal(0)
        for y, py in enumerate(P):
            hy = hx if y == x else py * scale
            if hy > 0:
                kl += hy * (hy / py).ln()
        return kl


def cactus_emitted_kl(p, q, delta, digits=50):
    """KL(law of the emitted token || p) for Cactus as received at one node: draft X ~ q, accept it
    with probability min(1, h_X(X) / q(X)), else emit from the positive part of h_X - q
    normalised; the emitted law summed token by token, in `digits` decimal digits."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = digits
        conv = lambda v: Decimal(Fraction(v).numerator) / Decimal(Fraction(v).denominator)  # noqa: E731
        P, Q, d = [conv(v) for v in p], [conv(v) for v in q], conv(delta)
        V = len(P)
        out = [Decimal(0)] * V
        for x in range(V):
            if Q[x] == 0:
                continue
            hx = min(Decimal(1), P[x] + (2 * d * P[x] * (1 - P[x])).sqrt())
            h = [hx if y == x else P[y] * (1 - hx) / (1 - P[x]) for y in range(V)]
            accept = min(Decimal(1), h[x] / Q[x])
            pos = [max(h[y] - Q[y], Decimal(0)) for y in range(V)]
            mass = sum(pos)
            corr = [v / mass for v in pos] if mass > 0 else P
            for y in range(V):
                out[y] += Q[x] * ((accept if y == x else 0) + (1 - accept) * corr[y])
        return sum((o * (o / t).ln() for o, t in zip(out, P) if o > 0), Decimal(0))


# ----------------------------------------------------------------------------- traversal (2505.12398)


def merged_tree(paths):
    """The token tree of drafted paths: nodes are the distinct drafted prefixes (the root ``()``
    included), numbered level by level and, within a level, by the first path (smallest path
    index) through them. Returns the list of nodes in that numbering."""
    nodes = [()]
    for depth in range(1, len(paths[0]) + 1):
        for x in paths:
            if tuple(x[:depth]) not in nodes:
                nodes.append(tuple(x[:depth]))
    return nodes


def post_order_visit(nodes):
    """Leaf-to-root post-order (Weng et al., arXiv 2505.12398, Algorithm 1: the deepest leftmost
    remaining node first; a node after all its children), children in node-number order."""
    out = []

    def walk(u):
        for v in nodes:
            if len(v) == len(u) + 1 and v[:len(u)] == u:
                walk(v)
        out.append(u)

    walk(())
    return out


def smallest_leaf_visit(nodes):
    """The GBV reference code's traversal baseline (arXiv 2602.16961's code, as the ledger's row
    and docs/engine-bugs.md entry 8 describe it): next, the remaining leaf of smallest node
    number; a node becomes a leaf once all its children are visited."""
    left, out = list(nodes), []
    while left:
        v = next(u for u in left if not any(len(w) == len(u) + 1 and w[:len(u)] == u
                                            for w in left))
        out.append(v)
        left.remove(v)
    return out


def traversal_law(model, K, visit):
    """Traversal verification (Weng et al., arXiv 2505.12398) on the merged tree of K i.i.d.
    drafted paths, walked in the order ``visit(nodes)``, by enumerating the ordered K-tuples of
    paths. Rule: every node u carries a target row M_b(.|u) (p(.|u) at first), a draft row
    M_s(.|u) (q(.|u); none at depth L) and an acceptance p_a(u), p_a(root) = 1 and
    p_a(v) = min(1, p_a(u) M_b(x|u) / M_s(x|u)) for v = u + (x,). The visited node v is accepted
    with probability p_a(v): the block is v followed by a token from M_b(.|v) (the bonus from p at
    depth L). Rejected, v leaves the tree and its parent u updates, with S = sum_y (p_a(u)
    M_b(y|u) - M_s(y|u))^+: M_b(.|u) = normalise((p_a(u) M_b - M_s)^+), M_s(.|u) = M_s with x
    removed, renormalised, p_a(u) = S / (S + 1 - p_a(u)); the acceptances of u's descendants are
    recomputed top-down from the new rows, except at a node that has itself updated (its p_a is
    already its S / (S + 1 - p_a) value; post-order never meets one, the smallest-leaf order
    does). Returns (law of the L + 1 tokens, E[tau + 1])."""
    V = model.V
    law, E = {}, F(0)
    for paths in itertools.product(model.seqs(model.L), repeat=K):
        pr = prod((model.Q(x) for x in paths), start=F(1))
        if not pr:
            continue
        nodes = merged_tree(paths)
        Mb = {u: list(model.p_rows(u)) for u in nodes}
        Ms = {u: list(model.q_rows(u)) for u in nodes if len(u) < model.L}
        updated = set()
        pa = {(): F(1)}

        def recompute(u):
            for v in nodes:
                if len(v) == len(u) + 1 and v[:len(u)] == u and v in Mb:
                    if v not in updated:
                        x = v[-1]
                        pa[v] = min(F(1), pa[u] * Mb[u][x] / Ms[u][x])
                    recompute(v)

        recompute(())
        alive = pr
        for v in visit(nodes):
            acc = alive * pa[v]
            for y in range(V):
                if Mb[v][y] and acc:
                    E += acc * Mb[v][y] * (len(v) + 1)
                    _complete(law, model, v + (y,), acc * Mb[v][y])
            alive -= acc
            if v == () or not alive:
                break
            u, x, w = v[:-1], v[-1], pa[v[:-1]]
            up = [max(w * Mb[u][y] - Ms[u][y], F(0)) for y in range(V)]
            S = sum(up)
            Mb[u] = _normalise(up, Mb[u])
            Ms[u] = _normalise([F(0) if y == x else Ms[u][y] for y in range(V)], Ms[u])
            pa[u] = S / (S + 1 - w) if S + 1 - w else F(1)
            updated.add(u)
            del Mb[v]
            recompute(u)
    return law, E


# ----------------------------------------------------------------------------- frontier at TV 0


def free_block_lp(model):
    """The best E[tau + 1] of a rule that chooses the whole L + 1 block jointly with the draft (not
    a verifier): a joint law w(x, z) >= 0 of the drafted path x in V^L and the output z in V^{L+1},
    sum_z w(x, z) = q(x), sum_x w(x, z) = p(z) (TV 0), tau = the common prefix of z and x (at most
    L); certified exactly (`certified_max`)."""
    xs, zs = model.seqs(model.L), model.seqs(model.L + 1)
    c, A, b = [], [], []
    col = {}
    for x in xs:
        for z in zs:
            col[x, z] = len(c)
            k = 0
            while k < model.L and z[k] == x[k]:
                k += 1
            c.append(F(k + 1))
    for x in xs:
        A.append({col[x, z]: F(1) for z in zs})
        b.append(model.Q(x))
    for z in zs:
        A.append({col[x, z]: F(1) for x in xs})
        b.append(model.P(z))
    return certified_max(c, A, b)[0]


def coupling_bound(model):
    """1 + sum_{t <= L} sum_{x^t} min(p(x^t), q(x^t)): E[tau + 1] of a maximal coupling of the
    draft path and the target sequence, prefix by prefix (an upper bound for every rule)."""
    return 1 + sum((min(model.P(x), model.Q(x)) for t in range(1, model.L + 1)
                    for x in model.seqs(t)), F(0))


# ----------------------------------------------------------------------------- greedy radius (2606.30265)


def greedy_radius(p, x, direction, digits=50):
    """The least divergence that moves the target row p to a row r where greedy verification of
    the drafted token x (the argmax of p) rejects, i.e. r(y) >= r(x) for some y != x (Sharma,
    arXiv 2606.30265: the certificate of a greedy acceptance), with a two-sided bound in
    `digits` decimal digits. Per competitor y the problem is convex with one linear constraint:

    * KL(r || p): the feasible point r(x) = r(y) = sqrt(p(x) p(y)) / Z, r(v) = p(v) / Z
      otherwise (Z normalises) gives the upper bound; the Lagrangian dual at
      e^lambda = sqrt(p(x) / p(y)), -log(p(x) e^-lambda + p(y) e^lambda + 1 - p(x) - p(y)), the
      lower bound.
    * KL(p || r): the feasible point r(x) = r(y) = (p(x) + p(y)) / 2, r = p elsewhere, and the
      dual at mu = 1, lambda = (p(x) - p(y)) / (p(x) + p(y)):
      sum_v p(v) log c(v), c(x) = 1 + lambda, c(y) = 1 - lambda, c = 1 elsewhere.

    The radius is the smallest over the competitors y. Returns (lower, upper)."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = digits
        P = [Decimal(Fraction(v).numerator) / Decimal(Fraction(v).denominator) for v in p]
        assert all(P[x] >= v for v in P)

        def kl(a, b):
            return sum((u * (u / w).ln() for u, w in zip(a, b) if u > 0), Decimal(0))

        lows, ups = [], []
        for y in range(len(P)):
            if y == x:
                continue
            if direction == "rp":
                s = (P[x] * P[y]).sqrt()
                Z = 2 * s + (1 - P[x] - P[y])
                r = [s / Z if v in (x, y) else P[v] / Z for v in range(len(P))]
                lam = (P[x] / P[y]).sqrt().ln() if P[y] > 0 else None
                low = -(P[x] * (-lam).exp() + P[y] * lam.exp() + 1 - P[x] - P[y]).ln() \
                    if lam is not None else Decimal(0)
                up = kl(r, P)
            else:
                m = (P[x] + P[y]) / 2
                r = [m if v in (x, y) else P[v] for v in range(len(P))]
                lam = (P[x] - P[y]) / (P[x] + P[y])
                c = [1 + lam if v == x else 1 - lam if v == y else Decimal(1)
                     for v in range(len(P))]
                low = sum((P[v] * c[v].ln() for v in range(len(P)) if P[v] > 0), Decimal(0))
                up = kl(P, r)
            assert r[y] >= r[x] - Decimal(10) ** (4 - digits) and abs(sum(r) - 1) < \
                Decimal(10) ** (4 - digits)
            lows.append(low)
            ups.append(up)
        return min(lows), min(ups)


# ----------------------------------------------------------------------------- Global Resolution


def _lbfgsb(fg, n, gtol, ftol, maxiter):
    """Minimise f by scipy's L-BFGS-B from x = 0 in R^n without bounds, ``fg(x) = (f(x),
    grad f(x))``, with `scipy.optimize.minimize`'s other defaults (maxcor 10, maxls 20, maxfun
    15000); returns the point where it stops. scipy's compiled routine (``setulb``) is driven by
    the loop `minimize` runs around it: f and g at x = 0 first, f and g again only at a point
    that differs from the last one evaluated, maxiter and maxfun checked at each new iterate. So
    the iterates and the stopping point are `minimize`'s bit for bit, without the wrappers
    `minimize` puts around every evaluation (copies, memoisation, array checks: most of the time
    on a program that runs to maxiter with up to 21 evaluations per iterate). Where the routine
    has another interface (scipy before 1.15), `minimize` itself."""
    from scipy.optimize import minimize

    def by_minimize():
        return minimize(fg, np.zeros(n), jac=True, method="L-BFGS-B",
                        options={"gtol": gtol, "ftol": ftol, "maxiter": maxiter}).x

    try:
        from scipy.optimize import _lbfgsb
        setulb = _lbfgsb.setulb
    except (ImportError, AttributeError):
        return by_minimize()
    m, maxls, maxfun = 10, 20, 15000
    factr = ftol / np.finfo(float).eps
    x = np.zeros(n, np.float64)
    bound = np.zeros(n, np.float64)  # no bounds: nbd = 0, the bounds unread
    nbd, iwa = np.zeros(n, np.int32), np.zeros(3 * n, np.int32)
    wa = np.zeros(2 * m * n + 5 * n + 11 * m * m + 8 * m, np.float64)
    task, ln_task = np.zeros(2, np.int32), np.zeros(2, np.int32)
    lsave, isave, dsave = np.zeros(4, np.int32), np.zeros(44, np.int32), np.zeros(29, np.float64)
    f, g = np.array(0.0), np.zeros(n, np.float64)
    last = x.copy()
    known, nfev, nit = fg(last.copy()), 1, 0  # as minimize: f and g at x = 0 before the start
    while True:
        g = g.astype(np.float64)
        try:
            setulb(m, x, bound, bound, nbd, f, g, factr, gtol, wa, iwa, task, lsave, isave,
                   dsave, maxls, ln_task)
        except TypeError:
            if nfev > 1 or nit:
                raise
            return by_minimize()
        if task[0] == 3:  # f and g wanted at x
            if not (x == last).all():  # np.array_equal(x, last), as minimize
                last = x.copy()
                known, nfev = fg(last.copy()), nfev + 1
            f, g = known
        elif task[0] == 1:  # a new iterate
            nit += 1
            if nit >= maxiter:
                task[:] = 5, 504
            elif nfev > maxfun:
                task[:] = 5, 502
        else:
            return x


def _lse_program(groups, target, n):
    """min_w sum_g P_g log(c_g + sum_{j in g} e^{w_j}) - sum_j target_j w_j (c_g = 0 or 1), by
    scipy's L-BFGS-B (`_lbfgsb`), then Newton steps on the gradient with the exact Hessian;
    returns w (float64). Where every group has c_g = 0, or every group c_g = 1 (each of Global
    Resolution's programs), f and g leave out the selections by c_g: they would pick one operand
    throughout, and 0 + a sum of exponentials is that sum bit for bit. f and g are the same
    float64 numbers either way, so the solver takes the same steps: this matters on a program
    without a minimiser, whose weights are where the solver stops
    (`truncated_global_resolution_l1`)."""
    live = [(idx, c, Pg) for (idx, c), Pg in groups if len(idx)]
    # one row per group: its members (a 0/1 matrix), its constant c_g and its weight P_g
    member = np.zeros((len(live), n), bool)
    for row, (idx, _, _) in enumerate(live):
        member[row, idx] = True
    cap = np.array([bool(c) for _, c, _ in live], bool)
    every, none = bool(cap.all()), not cap.any()
    weight = np.array([Pg for _, _, Pg in live], float)
    target = np.array(target, float)

    def parts(w, hessian=True):
        # the Hessian only for the Newton steps: L-BFGS-B asks for f and g alone
        wm = np.where(member, w, -np.inf)
        top = np.maximum.reduce(wm, axis=1)  # log-sum-exp, shifted
        if every:
            top = np.maximum(top, 0.0)
        elif not none:
            top = np.where(cap, np.maximum(top, 0.0), top)
        e = np.exp(wm - top[:, None])  # 0 off the group
        z = np.add.reduce(e, axis=1)
        if every:
            z = np.exp(-top) + z
        elif not none:
            z = np.where(cap, np.exp(-np.where(cap, top, 0.0)), 0.0) + z
        s = e / z[:, None]
        f = float(weight @ (np.log(z) + top))
        g = weight @ s - target
        H = None
        if hessian:  # sum_g P_g (diag(s_g) - s_g s_g^T)
            H = np.diag(weight @ s) - (s.T * weight) @ s
        return f - float(np.dot(target, w)), g, H

    w = _lbfgsb(lambda w: parts(w, False)[:2], n, 1e-12, 1e-15, 500)
    # L-BFGS-B (the paper's optimiser) stops once f is flat to rounding: finish with Newton
    # steps on the gradient (least squares, the Hessian may be singular), keeping the smallest
    best = np.abs(parts(w, False)[1]).max()
    for _ in range(20):
        _, g, H = parts(w)
        nxt = w - np.linalg.lstsq(H, g, rcond=None)[0]
        with np.errstate(all="ignore"):
            try:
                gn = np.abs(parts(nxt, False)[1]).max()
            except (ValueError, OverflowError):  # a step out of range: keep the last point
                break
        if not gn < best:
            break
        w, best = nxt, gn
    return w


def global_resolution_acceptance(p, q, K, plain_outer=False):
    """Global Resolution (Thomas & Pal, arXiv 2511.15898) at one node, K i.i.d. drafts, as the
    paper states it: H* minimises psi(H) = p(H) - q(H)^K (all subsets, the smallest minimiser);
    a draft set D (the distinct drafted tokens) with tokens outside H* always accepts one of
    A = D minus H*, by softmax(a) over A; a set inside H* accepts d in D with e^{b_d} /
    (1 + sum_{j in D} e^{b_j}), else rejects. a minimises Phi(a) = sum_A P(A) log sum_A e^{a} -
    sum_v p_out(v) a_v with the outer targets of the polymatroid greedy (tokens outside H* in id
    order v_1..v_k, H_i = H* + {v_i..v_k}, g(B) = min_{T >= B} psi(T), p_out(v_i) = p(v_i) +
    g(H_{i+1}) - g(H_i)); b minimises Theta(b) = sum_D P(D) log(1 + sum_D e^{b}) - sum_i p(i) b_i.
    Tokens of target 0 get weight 0 (their variables would run to -infinity). The weights the
    solver returns are read as the rationals they are; every token whose accepted mass exceeds
    p(y) is scaled down to p(y) and the rest rejected into normalise(p - accepted), so the plan
    is lossless exactly and its acceptance, returned with alpha* = 1 + psi(H*), is a lower bound
    on the optimum that is exact in rationals. ``plain_outer`` (a planted error): outer targets
    p(v) instead of the greedy's p_out(v). Returns (acceptance, alpha*, output law)."""
    V = len(p)
    subsets = [frozenset(S) for r in range(V + 1) for S in itertools.combinations(range(V), r)]

    def psi(T):
        return sum((p[a] for a in T), F(0)) - sum((q[a] for a in T), F(0)) ** K

    H = min(subsets, key=lambda S: (psi(S), len(S), sorted(S)))
    alpha = 1 + psi(H)
    law = {}
    for tup in itertools.product(range(V), repeat=K):
        pr = prod((q[x] for x in tup), start=F(1))
        if pr:
            law[frozenset(tup)] = law.get(frozenset(tup), F(0)) + pr

    def g(B):
        return min(psi(T) for T in subsets if B <= T)

    outer = [v for v in range(V) if v not in H]
    p_out = {v: p[v] + g(H | set(outer[i + 1:])) - g(H | set(outer[i:]))
             for i, v in enumerate(outer)}
    if plain_outer:
        p_out = {v: p[v] for v in outer}
    pi = {}  # (set, token) -> probability of emitting the token
    for tokens, weight, cap in ((outer, p_out, 0), (sorted(H), {i: p[i] for i in H}, 1)):
        live = [v for v in tokens if weight[v] > 0]
        pos = {v: j for j, v in enumerate(live)}
        groups = {}
        for D, P in law.items():
            part = D - H if cap == 0 else D
            if (cap == 0 and not part) or (cap == 1 and not D <= H):
                continue
            key = tuple(sorted(pos[v] for v in part if v in pos))
            groups[key] = groups.get(key, F(0)) + P
        w = _lse_program([((np.array(k, int), cap), float(P)) for k, P in groups.items()],
                         [float(weight[v]) for v in live], len(live)) if live else []
        top = max(w) if cap == 0 and live else 0.0  # the outer softmax ignores a shift
        e = {v: F(float(np.exp(w[pos[v]] - top))) for v in live}
        for D in law:
            part = D - H if cap == 0 else D
            if (cap == 0 and not part) or (cap == 1 and not D <= H):
                continue
            z = cap + sum((e.get(v, F(0)) for v in part), F(0))
            for v in part:
                if v in e and z:  # z = 0: every weight underflowed; the set rejects
                    pi[D, v] = e[v] / z
    acc = {y: sum((P * pi.get((D, y), F(0)) for D, P in law.items()), F(0)) for y in range(V)}
    acc = {y: min(a, p[y]) for y, a in acc.items()}  # the repair: scale a row above p down
    rest = 1 - sum(acc.values())
    res = _normalise([p[y] - acc[y] for y in range(V)], p)
    out = [acc[y] + rest * res[y] for y in range(V)]
    return sum(acc.values()), alpha, out


# ----------------------------------------------------------------------------- static ensemble (2604.07622)


def static_ensemble(model, w):
    """DIVERSED's static ensemble (arXiv 2604.07622; transformers PR #45979): at each node
    v = w p + (1 - w) q, accept x_i with min(1, v(x_i) / q(x_i)), else resample from
    normalise(max(v - q, 0)); after L acceptances the target's bonus token. Returns (law of the
    L + 1 tokens, E[tau + 1], P(first draft accepted))."""
    w = F(w)

    def weights(x):
        acc, res = [], []
        for i in range(model.L):
            p, q = model.p_rows(x[:i]), model.q_rows(x[:i])
            v = [w * a + (1 - w) * b for a, b in zip(p, q)]
            acc.append(min(F(1), v[x[i]] / q[x[i]]))
            res.append(_normalise([max(a - b, F(0)) for a, b in zip(v, q)], p))
        stops, reach = [], F(1)
        for a in acc:
            stops.append(reach * (1 - a))
            reach *= a
        return stops + [reach], res

    law, E = chain_law(model, weights)
    p, q = model.p_rows(()), model.q_rows(())
    first = sum((min(q[x], w * p[x] + (1 - w) * q[x]) for x in range(model.V)), F(0))
    return law, E, first


def frontier_lp(model, delta):
    """The lossy frontier: max E[tau + 1] over every verifier whose one-iteration output law is
    within TV ``delta`` of the target. A verifier maps each drafted path x (probability Q(x)) to a
    kept prefix x^i (0 <= i <= L) and one more token a: z(x, i, a) >= 0, sum_{i, a} z = Q(x);
    the output is the block (x^i, a) followed by target sampling to L + 1 tokens, A(y); the budget
    is sum_y |A(y) - p(y)| <= 2 delta, written with s+ - s- = A - p and a slack. Certified
    exactly (`certified_max`)."""
    delta = F(delta)
    xs = [x for x in model.seqs(model.L) if model.Q(x)]
    ys = model.seqs(model.L + 1)
    yi = {y: k for k, y in enumerate(ys)}
    c, A, b = [], [], []
    rows_out = [dict() for _ in ys]
    for n, x in enumerate(xs):
        own = {}
        for i in range(model.L + 1):
            for a in range(model.V):
                j = len(c)
                c.append(F(i + 1))
                own[j] = F(1)
                block = tuple(x[:i]) + (a,)
                rest = model.L + 1 - len(block)
                for tail in itertools.product(range(model.V), repeat=rest):
                    m = model.P(tail, block)
                    if m:
                        rows_out[yi[block + tail]][j] = m
        A.append(own)
        b.append(model.Q(x))
    plus = {y: len(c) + 2 * k for k, y in enumerate(ys)}
    c += [F(0)] * (2 * len(ys) + 1)
    for y in ys:  # A(y) - s+ + s- = p(y)
        row = dict(rows_out[yi[y]])
        row[plus[y]], row[plus[y] + 1] = F(-1), F(1)
        A.append(row)
        b.append(model.P(y))
    budget = {plus[y] + k: F(1) for y in ys for k in (0, 1)}
    budget[len(c) - 1] = F(1)  # slack
    A.append(budget)
    b.append(2 * delta)
    return certified_max(c, A, b)[0]


# ----------------------------------------------------------------------------- grammars (2605.07698)
#
# Grammar-constrained decoding (Nie et al., arXiv 2605.07698, FVO-Spec), by brute force over
# V^N: a grammar is a status function of a token tuple, "bad" (some token not allowed),
# "open" (every token allowed, no stop token yet) or "ended" (every token allowed up to a stop
# token, anything after it). Valid within N tokens = "ended".


def dyck_status(kinds, eos, depth=None):
    """Dyck words over ``kinds`` bracket pairs (token 2k opens kind k, 2k + 1 closes it), the
    stop token ``eos`` allowed at an empty stack, nesting at most ``depth`` (None: any)."""

    def status(seq):
        stack = []
        for t in seq:
            if t == eos:
                if stack:
                    return "bad"
                return "ended"
            kind, closing = divmod(t, 2)
            if kind >= kinds:
                return "bad"
            if closing:
                if not stack or stack[-1] != kind:
                    return "bad"
                stack.pop()
            else:
                if depth is not None and len(stack) >= depth:
                    return "bad"
                stack.append(kind)
        return "open"

    return status


#: The finite JSON-like language over ``{ } "k" : 1 ,`` (ids 0..5), eos 6: every word spelt out.
_MEMBER = [(2, 3, 4), (2, 3, 0, 1)]
JSON_WORDS = [(0, 1)] + [(0,) + m + (1,) for m in _MEMBER] + \
    [(0,) + m + (5,) + n + (1,) for m in _MEMBER for n in _MEMBER]


def json_status(seq):
    seq = tuple(seq)
    for i, t in enumerate(seq):
        if t == 6:
            return "ended" if seq[:i] in JSON_WORDS else "bad"
    return "open" if any(w[:len(seq)] == seq for w in JSON_WORDS) else "bad"


def _allowed_after(status, s, a):
    """After the stop token every token is allowed; after a rejected prefix too (a prefix of
    probability zero under the masked law: its row is then left as it is)."""
    return status(tuple(s)) != "open" or status(tuple(s) + (a,)) != "bad"


class RowsModel(Model):
    """A model given by row functions (prefix -> row of Fractions)."""

    def __init__(self, V, L, p_rows, q_rows):
        self.V, self.L, self.p_rows, self.q_rows = V, L, p_rows, q_rows


def masked_rows(rows, status, V):
    """The rows masked by the grammar at each prefix and renormalised (local masking)."""

    def out(prefix):
        r = [x if _allowed_after(status, prefix, a) else F(0) for a, x in enumerate(rows(prefix))]
        z = sum(r)
        if z == 0:
            raise ValueError(f"no allowed mass after {prefix}")
        return [x / z for x in r]

    return out


def proj_law(model, status, N):
    """mu_proj over V^N: the masked rows chained."""
    rows = masked_rows(model.p_rows, status, model.V)
    out = {}
    for x in model.seqs(N):
        w = F(1)
        for i in range(N):
            w *= rows(x[:i])[x[i]]
            if not w:
                break
        out[x] = w
    return out


def star_law(model, status, N):
    """mu* over V^N: p(x) 1[x ended within N] normalised."""
    w = {x: (model.P(x) if status(x) == "ended" else F(0)) for x in model.seqs(N)}
    z = sum(w.values())
    return {x: v / z for x, v in w.items()}


def law_tv(a, b):
    keys = set(a) | set(b)
    return sum((abs(a.get(k, F(0)) - b.get(k, F(0))) for k in keys), F(0)) / 2


def marginal(law, n):
    out = {}
    for x, v in law.items():
        out[x[:n]] = out.get(x[:n], F(0)) + v
    return out


def law_rows(law, V, fallback):
    """The conditionals of a law over V^N: row(s)[a] = law(s a .) / law(s .); ``fallback``'s row
    where law(s .) = 0."""
    cache = {}

    def rows(prefix):
        prefix = tuple(prefix)
        if prefix not in cache:
            tot = sum((v for x, v in law.items() if x[:len(prefix)] == prefix), F(0))
            if tot == 0:
                cache[prefix] = list(fallback(prefix))
            else:
                cache[prefix] = [sum((v for x, v in law.items()
                                      if x[:len(prefix) + 1] == prefix + (a,)), F(0)) / tot
                                 for a in range(V)]
        return cache[prefix]

    return rows


def grammar_verification_laws(model, status, fvo):
    """Token and block verification over one block (N = L + 1) with the draft masked by the
    grammar, against the locally masked target (``fvo`` False) or against mu*'s conditionals
    (``fvo`` True: FVO-Spec with exact Phi). Returns {"token": (law, E[tau + 1]), "block": ...}
    over V^(L+1), each law completed by sampling the verification target."""
    N = model.L + 1
    q = masked_rows(model.q_rows, status, model.V)
    if fvo:
        p = law_rows(star_law(model, status, N), model.V, model.p_rows)
    else:
        p = masked_rows(model.p_rows, status, model.V)
    m = RowsModel(model.V, model.L, p, q)
    tok_law, tok_e, _ = static_ensemble(m, 1)  # weight 1 on the target: token verification
    blk_law, blk_e = block_law(m)
    return {"token": (tok_law, tok_e), "block": (blk_law, blk_e)}


def lookahead_law(model, status, N, k):
    """The law of sampling token by token from p(a | s) h(s a) normalised, h = Phi_k (k >= 1:
    the probability that the next min(k, N - |s|) tokens after s keep the word allowed, and that
    it ends within N when |s| + k >= N; k = 0: 1[s allowed])."""

    def h(s):
        d = len(s)
        if k == 0:
            return F(0) if status(s) == "bad" else F(1)
        m = min(d + k, N)
        tot = F(0)
        for rest in itertools.product(range(model.V), repeat=m - d):
            st = status(tuple(s) + rest)
            if st == "bad" or (m == N and st != "ended"):
                continue
            tot += model.P(rest, s)
        return tot

    out = {}
    for x in model.seqs(N):
        w = F(1)
        for i in range(N):
            s = x[:i]
            num = [model.p(s, a) * h(s + (a,)) for a in range(model.V)]
            z = sum(num)
            w *= num[x[i]] / z if z else model.p(s, x[i])
            if not w:
                break
        out[x] = w
    return out


# ----------------------------------------------------------------------------- engine threads


def greedy_draft(model):
    """The model whose draft rows are the one-hot rows of the draft's argmax (ties to the lowest
    id): a deterministic draft, as z-lab/dflash's ``sample(draft_logits)`` at temperature 0."""
    out = Model.__new__(Model)
    out.V, out.L, out.p_rows = model.V, model.L, model.p_rows

    def q_rows(prefix):
        row = model.q_rows(prefix)
        best = max(range(model.V), key=lambda a: (row[a], -a))
        return [F(int(a == best)) for a in range(model.V)]

    out.q_rows = q_rows
    return out


def _markov_row(model, prefix):
    """The target row after ``prefix``; past the tables' depth L, the row after its last L
    tokens (the instance format's order-L extension)."""
    prefix = tuple(prefix)
    return model.p_rows(prefix[-model.L:] if len(prefix) > model.L else prefix)


def target_greedy_chain(model, n):
    """The target's argmax chain of ``n`` tokens (ties to the lowest id)."""
    seq = ()
    for _ in range(n):
        row = _markov_row(model, seq)
        seq += (max(range(model.V), key=lambda a: (row[a], -a)),)
    return seq


def tempered_probability(model, seq, temperature):
    """P(seq) under the target at ``temperature`` (rows p^(1/T) renormalised), float64."""
    out, ctx = 1.0, ()
    for a in seq:
        w = [float(x) ** (1 / temperature) for x in _markov_row(model, ctx)]
        out *= w[a] / sum(w)
        ctx += (a,)
    return out


def backward_scan(model):
    """Block verification's backward scan written from arXiv 2403.10444: h_i from the weights
    w_i = min(1, w_{i-1} p/q) and residual masses, one independent coin u_i per position
    (every pattern of the events u_i <= h_i enumerated), tau = the last i whose coin falls
    below h_i (0 if none), then a token of the residual at tau (p after L). Returns
    (law of the L + 1 tokens completed by the target, [P(tau = i)])."""
    V, L = model.V, model.L
    law, taus = {}, [F(0)] * (L + 1)
    for x in model.seqs(L):
        Qx = model.Q(x)
        if Qx == 0:
            continue
        w = [F(1)]
        for i in range(L):
            w.append(min(F(1), w[i] * model.p(x[:i], x[i]) / model.q(x[:i], x[i])))
        h = {L: w[L]}
        for i in range(1, L):
            S = sum(max(w[i] * model.p(x[:i], a) - model.q(x[:i], a), F(0)) for a in range(V))
            h[i] = S / (S + 1 - w[i]) if S + 1 - w[i] else F(1)
        for coins in itertools.product((True, False), repeat=L):
            m = Qx * prod(h[i + 1] if c else 1 - h[i + 1] for i, c in enumerate(coins))
            if m == 0:
                continue
            tau = max((i + 1 for i, c in enumerate(coins) if c), default=0)
            taus[tau] += m
            if tau == L:
                row = model.p_rows(x)
            else:
                row = _normalise([max(w[tau] * model.p(x[:tau], a) - model.q(x[:tau], a), F(0))
                                  for a in range(V)], model.p_rows(x[:tau]))
            for y in range(V):
                _complete(law, model, x[:tau] + (y,), m * row[y])
    return law, taus


def _kit_logits(row):
    """log p shifted by the midpoint of the largest and smallest finite logs (-inf for 0)."""
    lg = [math.log(x) if x > 0 else -math.inf for x in row]
    fin = [v for v in lg if v != -math.inf]
    return [v - (max(fin) + min(fin)) / 2 for v in lg]


def repetition_penalised(row, history, penalty):
    """vLLM's repetition penalty on logits: a token seen in ``history`` has its logit divided by
    ``penalty`` when positive, multiplied when not; softmax back to probabilities."""
    lg = _kit_logits([float(x) for x in row])
    lg = [(v / penalty if v > 0 else v * penalty) if a in set(history) else v
          for a, v in enumerate(lg)]
    top = max(lg)
    e = [math.exp(v - top) if v != -math.inf else 0.0 for v in lg]
    return [v / sum(e) for v in e]


def bonus_only_penalty_tv(model, penalty):
    """One step of SGLang PR #28242's rule from the empty context (token verification; rows
    j < L unpenalised; the bonus row penalised with the drafts as history; the raw draft), the
    sequence completed to N = L + 1 tokens by the penalised target: TV to the penalised target's
    law of N tokens (float64)."""
    V, L = model.V, model.L
    N = L + 1

    def pen(prefix):
        return repetition_penalised(model.p_rows(prefix), prefix, penalty)

    def target_prob(seq):
        return prod(pen(seq[:i])[seq[i]] for i in range(len(seq)))

    out = {}

    def complete(seq, m):
        if len(seq) >= N:
            out[seq[:N]] = out.get(seq[:N], 0.0) + m
            return
        for y, v in enumerate(pen(seq)):
            if v > 0:
                complete(seq + (y,), m * v)

    def verify(x, j, m):
        if j == L:
            for y, v in enumerate(pen(x)):  # the bonus row, history = the drafts
                complete(x + (y,), m * v)
            return
        p = [float(v) for v in model.p_rows(x[:j])]
        q = [float(v) for v in model.q_rows(x[:j])]
        a = min(1.0, p[x[j]] / q[x[j]])
        verify(x, j + 1, m * a)
        res = [max(u - v, 0.0) for u, v in zip(p, q)]
        z = sum(res)
        for y in range(V):
            if res[y] > 0:
                complete(x[:j] + (y,), m * (1 - a) * res[y] / z)

    for x in model.seqs(L):
        Qx = float(model.Q(x))
        if Qx > 0:
            verify(x, 0, Qx)
    keys = set(out) | set(model.seqs(N))
    return sum(abs(out.get(k, 0.0) - target_prob(k)) for k in keys) / 2


# ----------------------------------------------------------------------------- SGLang #33643


def _markov_q(model, prefix):
    prefix = tuple(prefix)
    return model.q_rows(prefix[-model.L:] if len(prefix) > model.L else prefix)


def frequency_penalised(row, history, penalty):
    """vLLM's frequency penalty on logits: logit(x) - penalty * count(x in history), softmax back:
    p(x) exp(-penalty count(x)) renormalised (zeros stay zero), float64."""
    w = [float(x) * math.exp(-penalty * history.count(a)) for a, x in enumerate(row)]
    return [v / sum(w) for v in w]


def _token_verification_blocks(p_rows, q_rows, drafts, V):
    """{emitted block: probability} of token verification of ``drafts`` (the drafts' own
    probability left out): P(tau = t, y) = prod_{j<t} a_j times (1 - a_t) r_t(y) for t < L, or
    p_L(y) at t = L; a_j = min(1, p_j(x_j)/q_j(x_j)), r_t = norm(max(p_t - q_t, 0)) (a rejection
    whose residual is empty, p = q up to float64 rounding, counts as an acceptance)."""
    L = len(drafts)
    acc = []
    for j in range(L):
        p, q, x = p_rows[j], q_rows[j], drafts[j]
        res = [max(a - b, 0.0) for a, b in zip(p, q)]
        acc.append((min(1.0, p[x] / q[x]) if sum(res) > 0 else 1.0, res))
    out = {}
    for t in range(L + 1):
        head = prod(a for a, _ in acc[:t])
        if t == L:
            tail = p_rows[L]
            for y in range(V):
                if head * tail[y] > 0:
                    out[drafts + (y,)] = out.get(drafts + (y,), 0.0) + head * tail[y]
        else:
            a, res = acc[t]
            if a >= 1:
                continue
            for y in range(V):
                m = head * (1 - a) * res[y] / sum(res)
                if m > 0:
                    out[drafts[:t] + (y,)] = out.get(drafts[:t] + (y,), 0.0) + m
    return out


def per_step_penalty_law(model, steps, penalty, per_step_history=True):
    """SGLang PR #33643's rule, enumerated: one step drafts L tokens from the raw draft rows, and
    target row j is frequency-penalised with the history ``H + drafts[:j]``, H the last emitted
    token of each earlier step (the penalizers fed ``output_ids[-1]`` once per step; with
    ``per_step_history=False``, H is the whole committed context: the correct engine). Steps run
    on check_step's schedule (each round steps every sample at each count present at the round's
    start, in ascending order, a sample moved to a later count of the round stepped again);
    after ``steps`` rounds each sequence is completed by the correctly penalised target to
    N = steps + L tokens. Returns ({N-token tuple: probability}, mean tokens of the first
    step), float64."""
    V, L = model.V, model.L
    N = steps + L

    def step(ctx, hist):
        out = {}
        for d in itertools.product(range(V), repeat=L):
            qs = [[float(x) for x in _markov_q(model, ctx + d[:j])] for j in range(L)]
            qd = prod(qs[j][d[j]] for j in range(L))
            if qd == 0:
                continue
            h = hist if per_step_history else ctx
            ps = [frequency_penalised(_markov_row(model, ctx + d[:j]), h + d[:j], penalty)
                  for j in range(L + 1)]
            for block, m in _token_verification_blocks(ps, qs, d, V).items():
                out[block] = out.get(block, 0.0) + qd * m
        return out

    first = step((), ())
    mean_first = sum(len(b) * m for b, m in first.items())
    pool = {((), ()): 1.0}
    for _ in range(steps):
        counts = sorted({len(s) for s, _ in pool if len(s) < N})
        for c in counts:
            here = [(k, m) for k, m in pool.items() if len(k[0]) == c]
            for k, _ in here:
                del pool[k]
            for (seq, hist), m in here:
                for block, w in step(seq, hist).items():
                    k2 = (seq + block, hist + (block[-1],))
                    pool[k2] = pool.get(k2, 0.0) + m * w
    law = {}

    def complete(seq, m):
        if len(seq) >= N:
            law[seq[:N]] = law.get(seq[:N], 0.0) + m
            return
        for y, v in enumerate(frequency_penalised(_markov_row(model, seq), seq, penalty)):
            if v > 0:
                complete(seq + (y,), m * v)

    for (seq, _), m in pool.items():
        complete(seq, m)
    return law, mean_first


def penalised_target_law(model, N, penalty):
    """The correctly frequency-penalised target's law of N tokens (history: the whole prefix)."""
    law = {(): 1.0}
    for _ in range(N):
        nxt = {}
        for s, m in law.items():
            for y, v in enumerate(frequency_penalised(_markov_row(model, s), s, penalty)):
                if v > 0:
                    nxt[s + (y,)] = m * v
        law = nxt
    return law


def expected_repeats(law):
    """E[number of positions whose token occurred earlier in the sequence]."""
    return sum(m * sum(1 for i in range(len(s)) if s[i] in s[:i]) for s, m in law.items())


def effective_frequency_penalty(model, steps, nominal, tol=1e-10):
    """The penalty f' at which the correct engine's expected repeats over N = steps + L tokens
    equal the per-step rule's at ``nominal`` (bisection on [0, nominal]; repeats fall as f'
    grows). Returns (f' / nominal, the rule's expected repeats, its mean tokens per step)."""
    law, mean_first = per_step_penalty_law(model, steps, nominal)
    want = expected_repeats(law)
    N = steps + model.L
    lo, hi = 0.0, float(nominal)
    assert expected_repeats(penalised_target_law(model, N, lo)) >= want >= \
        expected_repeats(penalised_target_law(model, N, hi))
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if expected_repeats(penalised_target_law(model, N, mid)) > want:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2 / nominal, want, mean_first


# ----------------------------------------------------------------------------- two tokenizers


def longest_match(vocab, text):
    """Token ids of ``text`` under left-to-right longest match over ``vocab`` (a list of
    strings, id = index)."""
    ids, i = [], 0
    while i < len(text):
        fits = [t for t, s in enumerate(vocab) if text.startswith(s, i)]
        if not fits:
            raise ValueError(f"no token at {text[i:]!r}")
        best = max(fits, key=lambda t: len(vocab[t]))
        ids.append(best)
        i += len(vocab[best])
    return tuple(ids)


class Hetero:
    """A two-tokenizer instance from its JSON dictionary (alphabet, target_vocab, draft_vocab,
    draft_length, n_tokens, target, draft): rows keyed by comma-joined ids of the model's own
    vocabulary up to the table's depth, an order-depth chain beyond."""

    def __init__(self, data):
        self.alphabet = data["alphabet"]
        self.tv, self.dv = list(data["target_vocab"]), list(data["draft_vocab"])
        self.L, self.N = int(data["draft_length"]), int(data["n_tokens"])
        self._p, self._pd = self._table(data["target"])
        self._q, self._qd = self._table(data["draft"])
        self.inter = {d: self.tv.index(s) for d, s in enumerate(self.dv) if s in self.tv}

    @staticmethod
    def _table(obj):
        if isinstance(obj, list):
            return {(): [F(x) for x in obj]}, 0
        t = {tuple(int(a) for a in k.split(",")) if k else (): [F(x) for x in v]
             for k, v in obj.items()}
        return t, max(len(k) for k in t)

    @staticmethod
    def _row(table, depth, prefix):
        prefix = tuple(prefix)
        return table[prefix[len(prefix) - depth:] if len(prefix) > depth else prefix]

    def p(self, c):
        return self._row(self._p, self._pd, c)

    def q(self, dc):
        return self._row(self._q, self._qd, dc)

    def t_text(self, ids):
        return "".join(self.tv[t] for t in ids)

    def d_text(self, ids):
        return "".join(self.dv[d] for d in ids)

    def draft_context(self, c):
        """The draft's tokenization of the emitted string (its context at an iteration)."""
        return longest_match(self.dv, self.t_text(c))


def _draft_path_law(h, dctx, n):
    """{n draft tokens: probability} after the draft context ``dctx`` (zero paths dropped)."""
    out = {}
    for path in itertools.product(range(len(h.dv)), repeat=n):
        w = prod((h.q(dctx + path[:i])[path[i]] for i in range(n)), start=F(1))
        if w:
            out[path] = w
    return out


def _put(d, k, v):
    if v:
        d[k] = d.get(k, F(0)) + v


def hetero_slem_block(h, c):
    """SLEM (arXiv 2502.05202, Algorithm 2): the draft's ``draft_length`` tokens, their string
    re-tokenized alone by the target's longest match into t_1..t_m; the target samples at every
    position; emitted t_<k y_k at the first mismatch k, or t_1..t_m and the bonus."""
    out = {}
    for path, w in _draft_path_law(h, h.draft_context(c), h.L).items():
        t = longest_match(h.tv, h.d_text(path))
        alive = w
        for k in range(len(t) + 1):
            row = h.p(c + t[:k])
            for y, py in enumerate(row):
                if k == len(t) or y != t[k]:
                    _put(out, t[:k] + (y,), alive * py)
            if k < len(t):
                alive *= row[t[k]]
    return out


def _first_token_settled(h, text):
    """Brute force: the first target token of ``text + x`` is one token for every continuation
    x of up to the longest target token's length (and ``text`` is not empty)."""
    return _settled(tuple(h.tv), tuple(h.alphabet), text)


@functools.lru_cache(maxsize=4096)
def _settled(tv, alphabet, text):
    # `_first_token_settled` on the target vocabulary and the alphabet as tuples: the answer
    # (a bool) depends on these three values alone, so one brute force per text and instance
    if not text:
        return False
    longest = max(len(s) for s in tv)
    firsts = {longest_match(tv, text + "".join(x))[0]
              for n in range(longest + 1) for x in itertools.product(alphabet, repeat=n)}
    return len(firsts) == 1


def hetero_slrs_psi(h, c):
    """SLRS's proposal law: draft tokens drawn until the first target token of their string is
    settled (the smallest such lookahead), that token's law under the draft."""
    dctx = h.draft_context(c)
    psi, level = {}, {(): F(1)}
    while level:
        nxt = {}
        for path, w in level.items():
            text = h.d_text(path)
            if _first_token_settled(h, text):
                _put(psi, longest_match(h.tv, text)[0], w)
                continue
            for d, qd in enumerate(h.q(dctx + path)):
                _put(nxt, path + (d,), w * qd)
        level = nxt
    return psi


def hetero_slrs_block(h, c):
    """SLRS (Algorithm 3): accept the proposal t with min(1, p(t)/psi(t)), else a token of
    norm(max(p - psi, 0)); one target token per forward."""
    p, psi = h.p(c), hetero_slrs_psi(h, c)
    out = {}
    rejected = F(0)
    for t, w in psi.items():
        _put(out, (t,), min(w, p[t]))
        rejected += w - min(w, p[t])
    if rejected:
        res = [max(p[y] - psi.get(y, F(0)), F(0)) for y in range(len(p))]
        for y, r in enumerate(res):
            _put(out, (y,), rejected * r / sum(res))
    return out


def hetero_tli_block(h, c):
    """TLI (Algorithm 4): the draft row restricted to the draft tokens whose string is a target
    token, renormalised (q'); up to ``draft_length`` tokens drafted from q' (drafting stops where
    q' has no mass); standard speculative sampling against the whole target row, residual
    max(p - q', 0) over the target vocabulary; the bonus after all are accepted."""
    dctx = h.draft_context(c)
    # the drafted paths with their probabilities under q' (shorter when q' runs dry)
    paths, level = {}, {(): F(1)}
    for _ in range(h.L):
        nxt = {}
        for dp, w in level.items():
            q = h.q(dctx + dp)
            mass = sum((q[d] for d in h.inter), F(0))
            if not mass:
                _put(paths, dp, w)
                continue
            for d in h.inter:
                _put(nxt, dp + (d,), w * q[d] / mass)
        level = nxt
    for dp, w in level.items():
        _put(paths, dp, w)
    out = {}
    for dp, w in paths.items():
        xs = tuple(h.inter[d] for d in dp)
        alive = w
        for k in range(len(xs) + 1):
            p = h.p(c + xs[:k])
            if k == len(xs):
                for y, py in enumerate(p):
                    _put(out, xs + (y,), alive * py)
                break
            q = h.q(dctx + dp[:k])
            mass = sum((q[d] for d in h.inter), F(0))
            qt = [F(0)] * len(p)
            for d, x in h.inter.items():
                qt[x] += q[d] / mass
            a = min(F(1), p[xs[k]] / qt[xs[k]])
            res = [max(p[y] - qt[y], F(0)) for y in range(len(p))]
            for y, r in enumerate(res):
                if r:
                    _put(out, xs[:k] + (y,), alive * (1 - a) * r / sum(res))
            alive *= a
    return out


def hetero_vllm_block(h, c, unk=0):
    """vLLM #38174's route: the draft greedy over the intersection (argmax of the masked row,
    ties to the lowest id), its context the target tokens mapped to draft ids by string (``unk``
    off the intersection); one-hot proposals verified by the rejection sampler with no draft
    probabilities: accept x with p(x), else a token of p with x removed; the bonus after all."""
    back = {x: d for d, x in h.inter.items()}
    dctx = tuple(back.get(t, unk) for t in c)
    dp, xs = (), ()
    for _ in range(h.L):
        q = h.q(dctx + dp)
        if not h.inter:
            break
        d = min(h.inter, key=lambda d: (-q[d], d))
        dp, xs = dp + (d,), xs + (h.inter[d],)
    out, alive = {}, F(1)
    for k in range(len(xs) + 1):
        p = h.p(c + xs[:k])
        for y, py in enumerate(p):
            if k == len(xs):
                _put(out, xs + (y,), alive * py)
            elif y != xs[k]:
                _put(out, xs[:k] + (y,), alive * py)  # (1 - p(x)) p(y) / (1 - p(x))
        if k < len(xs):
            alive *= p[xs[k]]
    return out


HETERO_BLOCKS = {"slem": hetero_slem_block, "slrs": hetero_slrs_block, "tli": hetero_tli_block,
                 "vllm-tli": hetero_vllm_block}


def hetero_emitted_law(h, block):
    """The law of the first N target tokens emitted by repeated forwards of ``block`` (a block
    that overshoots is cut), by recursion over the emitted context."""
    memo = {}

    def rest(c):
        if len(c) >= h.N:
            return {c[:h.N]: F(1)}
        if c not in memo:
            law = {}
            for b, w in block(h, c).items():
                for s, v in rest(c + b).items():
                    _put(law, s, w * v)
            memo[c] = law
        return memo[c]

    return rest(())


def hetero_check(h, scheme):
    """(TV to the target's law of N target tokens, expected target tokens of the first forward)
    for one scheme, exact."""
    block = HETERO_BLOCKS[scheme]
    out = hetero_emitted_law(h, block)
    tgt = {}
    for s in itertools.product(range(len(h.tv)), repeat=h.N):
        _put(tgt, s, prod((h.p(s[:i])[s[i]] for i in range(h.N)), start=F(1)))
    d = sum((abs(out.get(k, F(0)) - tgt.get(k, F(0))) for k in set(out) | set(tgt)), F(0)) / 2
    toks = sum((len(b) * w for b, w in block(h, ()).items()), F(0))
    return d, toks


# ----------------------------------------------------------------------------- vLLM PR #56724


def top_k_top_p(row, k=None, top_p=F(1)):
    """vLLM V1's order at temperature 1: top-k keeps every token with fewer than k tokens
    strictly more probable (ties at the k-th value kept); top-p, on the survivors renormalised,
    keeps a token when the survivors strictly more probable than it hold mass < top_p (tied
    tokens kept or dropped together); the kept mass renormalised. Exact."""
    keep = [x > 0 and (k is None or sum(1 for y in row if y > x) < k) for x in row]
    z = sum((x for x, c in zip(row, keep) if c), F(0))
    surv = [x / z if c else F(0) for x, c in zip(row, keep)]
    keep = [c and sum((y for y in surv if y > x), F(0)) < top_p for x, c in zip(surv, keep)]
    z = sum((x for x, c in zip(surv, keep) if c), F(0))
    return [x / z if c else F(0) for x, c in zip(surv, keep)]


def token_verification_handed(model, draw, handed, target):
    """Token verification of one path of L drafts drawn from ``draw(prefix)`` rows, the verifier
    handed ``handed(prefix)`` rows as q, against ``target(prefix)`` rows: accept x with
    min(1, p(x)/q(x)), else a token of norm(max(p - q, 0)) (an empty residual: p = q, never
    rejected); the bonus from p after L acceptances; completed to L + 1 tokens. Returns
    (law of L + 1 tokens, E[tau])."""
    V, L = model.V, model.L
    law, etau = {}, F(0)
    for x in model.seqs(L):
        w = prod((draw(x[:i])[x[i]] for i in range(L)), start=F(1))
        if not w:
            continue
        alive = w
        for j in range(L + 1):
            p = target(x[:j])
            if j == L:
                for y in range(V):
                    _put(law, x + (y,), alive * p[y])
                etau += alive * L
                break
            q = handed(x[:j])
            res = [max(a - b, F(0)) for a, b in zip(p, q)]
            a = min(F(1), p[x[j]] / q[x[j]]) if sum(res) else F(1)
            for y in range(V):
                if res[y]:
                    m = alive * (1 - a) * res[y] / sum(res)
                    etau += m * j
                    ends = {x[:j] + (y,): m}  # completed to L + 1 tokens by the target
                    while len(next(iter(ends))) < L + 1:
                        ends = {s + (z,): v * target(s)[z] for s, v in ends.items()
                                for z in range(V) if target(s)[z]}
                    for s, v in ends.items():
                        _put(law, s, v)
            alive *= a
            if not alive:
                break
    return law, etau


def draft_in_request_set(model, k=None, top_p=F(1)):
    """vLLM PR #56724 on one instance and one request: (TV with the processed draft rows handed,
    TV with the raw rows handed, E[tau] of main (raw drafts), E[tau] of the PR's drafting), the
    TVs to the processed target's law of L + 1 tokens."""
    def proc(rows):
        # each prefix's processed row computed once (a function of the prefix alone: one model,
        # one request), kept as a tuple so no caller can alter it
        done = {}

        def processed(prefix):
            if prefix not in done:
                done[prefix] = tuple(top_k_top_p(rows(prefix), k, top_p))
            return done[prefix]

        return processed

    P, Qp = proc(model.p_rows), proc(model.q_rows)
    tgt = {}
    for y in model.seqs(model.L + 1):
        _put(tgt, y, prod((P(y[:i])[y[i]] for i in range(len(y))), start=F(1)))

    def dist(law):
        return sum((abs(law.get(s, F(0)) - tgt.get(s, F(0))) for s in set(law) | set(tgt)),
                   F(0)) / 2

    pr_law, pr_tau = token_verification_handed(model, Qp, Qp, P)
    raw_law, _ = token_verification_handed(model, Qp, model.q_rows, P)
    _, main_tau = token_verification_handed(model, model.q_rows, model.q_rows, P)
    return dist(pr_law), dist(raw_law), main_tau, pr_tau


# ----------------------------------------------------------------------------- SpecTr's K-SEQ


def kseq_L1(p, q, m, iters=200):
    """SpecTr's K-SEQ (Sun et al., arXiv 2310.15141) at one token, m i.i.d. drafts: candidates
    tried in order, x_j accepted with min(1, p(x_j) / (rho q(x_j))); the output is p iff
    rho >= c_m(beta) = sum_{j<m} (1 - beta)^j, beta(rho) = sum_x min(q(x), p(x)/rho). With the
    smallest valid rho in [1, m] (bisection; beta falls as rho grows, so it accepts most),
    E[tau + 1] = 1 + 1 - (1 - beta)^m. Returns (E[tau + 1], rho), float64; asserts the
    residual p - min(q, p/rho) c_m(beta) is non-negative (lossless)."""
    p, q = [float(x) for x in p], [float(x) for x in q]

    def beta(rho):
        return sum(min(a, b / rho) for a, b in zip(q, p))

    def valid(rho):
        return rho >= sum((1 - beta(rho)) ** j for j in range(m))

    lo, hi = 1.0, float(m)
    if valid(lo):
        hi = lo
    for _ in range(iters):
        if hi - lo <= 1e-15:
            break
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if valid(mid) else (mid, hi)
    rho, b = hi, beta(hi)
    cm = sum((1 - b) ** j for j in range(m))
    assert min(x - min(a, x / rho) * cm for a, x in zip(q, p)) >= -1e-12
    return 2 - (1 - b) ** m, rho


# ----------------------------------------------------------------------------- SpecHub (2411.05289)


def spechub_transport(p, q, planted=None):
    """SpecHub's sparse transport at one node (Sun et al., arXiv 2411.05289; the staged plan as
    the authors' released verifier states it): hub a = argmax q (ties: the smallest id), pairs
    Q(i, a) = q(i) and Q(a, i) = q(a) q(i) / (1 - q(a)) for i != a. Stages, each sending at most
    what the target still lacks: (1) every pair (i, a) sends min(Q(i, a), p(i)) to i; (2) every
    pair (a, i) sends min(Q(a, i), p'(i)) to i (p' what i still lacks); (3) the pairs (a, .) send
    their remaining mass to a, together min(p(a), their remainder), each in proportion; (4) the
    pairs (., a) the same with what a still lacks. Returns (a, {pair: Q}, {pair: {token: mass
    sent}}); everything not sent is rejected into normalise(p - sent). None when q has a single
    token of positive mass (no companion). ``planted = "uncapped"`` (a planted error): stage 2
    sends min(Q(a, i), p(i)), forgetting what stage 1 sent."""
    V = len(q)
    a = max(range(V), key=lambda x: (q[x], -x))
    if q[a] == 1:
        return None
    Q = {}
    for i in range(V):
        if i != a:
            Q[i, a] = q[i]
            Q[a, i] = q[a] * q[i] / (1 - q[a])
    Q = {k: v for k, v in Q.items() if v}
    left = dict(Q)  # what each pair has not sent
    need = list(p)  # what each token still lacks
    sent = {k: {} for k in Q}

    def send(pair, tok, m):
        if m:
            sent[pair][tok] = sent[pair].get(tok, F(0)) + m
            left[pair] -= m
            need[tok] -= m

    for first_hub in (False, True):  # stages 1, 2: the non-hub member i
        for pair in Q:
            if (pair[0] == a) == first_hub:
                i = pair[1] if first_hub else pair[0]
                cap = p[i] if first_hub and planted == "uncapped" else need[i]
                send(pair, i, min(left[pair], cap))
    for first_hub in (True, False):  # stages 3, 4: the hub
        group = [k for k in Q if (k[0] == a) == first_hub]
        tot = sum((left[k] for k in group), F(0))
        if tot:
            frac = min(F(1), need[a] / tot)
            for k in group:
                send(k, a, left[k] * frac)
    return a, Q, sent


def spechub_law(model, planted=None):
    """One iteration of SpecHub with its hub drafting, K = 2: the root pair (X1, X2) has law Q
    (`spechub_transport`), each path continues autoregressively from q along its own prefix;
    at the root the verifier emits token y with sent[pair][y] / Q(pair) (y a member of the
    pair: the path that carries it is kept), else draws from normalise(p - sum of everything
    sent); below the root each node has one candidate, token verification (accept x with
    min(1, p(x)/q(x)), else normalise((p - q)^+)), and after L accepted tokens the bonus from p.
    With q one-hot at the root the second path repeats the first: token verification.
    ``planted``: passed to `spechub_transport`. Returns (law of the L + 1 tokens, E[tau + 1])."""
    law, E = {}, [F(0)]
    p0, q0 = model.p_rows(()), model.q_rows(())

    def emit(block, mass):
        E[0] += mass * len(block)
        _complete(law, model, block, mass)

    def below(x, mass):
        """Path x (L tokens) with its first token accepted: token verification below the root."""
        for t in range(1, model.L):
            pre = tuple(x[:t])
            pr, qr = model.p_rows(pre), model.q_rows(pre)
            acc = min(F(1), pr[x[t]] / qr[x[t]])
            res = _normalise([max(u - v, F(0)) for u, v in zip(pr, qr)], pr)
            for y in range(model.V):
                if res[y]:
                    emit(pre + (y,), mass * (1 - acc) * res[y])
            mass *= acc
        E[0] += mass  # the bonus token from p, added by _complete
        emit(tuple(x), mass)

    def tails(first):
        """Paths with first token ``first``: (path, probability of its tokens after the first)."""
        for rest in itertools.product(range(model.V), repeat=model.L - 1):
            w, ctx = F(1), (first,)
            for t in rest:
                w *= model.q(ctx, t)
                ctx += (t,)
            if w:
                yield (first,) + rest, w

    plan = spechub_transport(p0, q0, planted)
    if plan is None:  # one draft token: token verification of path 1
        x1 = q0.index(F(1))
        acc = min(F(1), p0[x1] / q0[x1])
        res = _normalise([max(u - v, F(0)) for u, v in zip(p0, q0)], p0)
        for path, w in tails(x1):
            below(path, w * acc)
        for y in range(model.V):
            if res[y]:
                emit((y,), (1 - acc) * res[y])
        return law, E[0]
    a, Q, sent = plan
    got = [sum((s.get(y, F(0)) for s in sent.values()), F(0)) for y in range(model.V)]
    res = _normalise([max(u - g, F(0)) for u, g in zip(p0, got)], p0)
    for pair, Qp in Q.items():
        rejected = F(1)
        for y, m in sent[pair].items():
            rejected -= m / Qp
            for path, w in tails(y):
                below(path, m * w)  # Q(pair) * (m / Q(pair)) * the kept path's tail
        for y in range(model.V):
            if res[y]:
                emit((y,), Qp * rejected * res[y])
    return law, E[0]


# ----------------------------------------------------------------------------- truncated GR


def truncated_global_resolution_l1(p, q, K, tau):
    """Global Resolution in its truncated setting (Thomas & Pal, arXiv 2511.15898, Lemma 6.6),
    one node, K i.i.d. drafts, under the ledger's reading of what the paper leaves open. H* the
    shortest lower threshold set of p/q (tokens with q = 0 last, ties by id) minimising
    psi(H) = p(H) - q(H)^K; outer targets by the polymatroid greedy over the other tokens in
    p/q order, g(B) = min over all supersets T of B of psi(T) (brute force); kept outer tokens
    T_out: by q decreasing (ties by id), added while 1 - q(H* + T_out)^K > tau; kept inner
    tokens T_in: the same while q(H*)^K - q(T_in)^K > tau (both tests in float64). The two
    convex programs (`_lse_program`) run over the draft sets D whose tokens are all kept; every
    set then takes its softmax over the kept weights (an outer set with no kept weight: uniform
    over its tokens outside H*; an inner set: weights 0, so it rejects), no repair, and the
    rejection draws from normalise((p - accepted)^+). Returns (the L1 distance of the output
    law to p, exact on the weights the solver returned; the outer program's imbalance
    sum of its targets - mass of its sets, exact). A non-zero imbalance leaves the outer program
    without a minimiser (a common shift of its variables lowers it without end), so its weights
    are where the solver stops."""
    V = len(p)
    order = sorted(range(V), key=lambda a: (q[a] == 0, p[a] / q[a] if q[a] else 0, a))
    subsets = [frozenset(S) for r in range(V + 1) for S in itertools.combinations(range(V), r)]

    def psi(T):
        return sum((p[a] for a in T), F(0)) - sum((q[a] for a in T), F(0)) ** K

    prefixes = [frozenset(order[:k]) for k in range(V + 1)]
    H = min(prefixes, key=lambda S: (psi(S), len(S)))
    outer = [v for v in order if v not in H]

    def g(B):
        return min(psi(T) for T in subsets if B <= T)

    gs = [g(H | set(outer[i:])) for i in range(len(outer) + 1)]
    p_out = {v: p[v] + gs[i + 1] - gs[i] for i, v in enumerate(outer)}
    qH = sum((q[a] for a in H), F(0))
    keep_out, mass = set(), qH
    for v in sorted(outer, key=lambda v: (-q[v], v)):
        if 1 - float(mass) ** K <= tau:
            break
        keep_out.add(v)
        mass += q[v]
    keep_in, mass = set(), F(0)
    for v in sorted(H, key=lambda v: (-q[v], v)):
        if float(qH) ** K - float(mass) ** K <= tau:
            break
        keep_in.add(v)
        mass += q[v]
    kept = keep_out | keep_in
    law = {}
    for tup in itertools.product(range(V), repeat=K):
        pr = prod((q[x] for x in tup), start=F(1))
        if pr:
            law[frozenset(tup)] = law.get(frozenset(tup), F(0)) + pr
    weights, imbalance = {}, F(0)
    for cap, keep, target in ((0, keep_out, p_out), (1, keep_in, {i: p[i] for i in H})):
        live = sorted(v for v in keep if target[v] > 0 and q[v] > 0)
        pos = {v: j for j, v in enumerate(live)}
        groups = {}
        for D, P in law.items():
            if not D <= kept or (cap == 0 and D <= H) or (cap == 1 and not D <= H):
                continue
            key = tuple(sorted(pos[v] for v in (D - H if cap == 0 else D) if v in pos))
            if key:
                groups[key] = groups.get(key, F(0)) + P
        if cap == 0:
            imbalance = sum((target[v] for v in live), F(0)) - sum(groups.values(), F(0))
        if live and groups:
            w = _lse_program([((np.array(k, int), cap), float(P)) for k, P in groups.items()],
                             [float(target[v]) for v in live], len(live))
            top = max(w) if cap == 0 else 0.0  # the outer softmax ignores a shift
            weights.update({v: F(float(np.exp(w[pos[v]] - top))) for v in live})
    acc = [F(0)] * V
    for D, P in law.items():
        A = D - H
        if A:
            z = sum((weights.get(v, F(0)) for v in A), F(0))
            for v in A:
                acc[v] += P * (weights.get(v, F(0)) / z if z else F(1, len(A)))
        else:
            z = 1 + sum((weights.get(v, F(0)) for v in D), F(0))
            for v in D:
                acc[v] += P * weights.get(v, F(0)) / z
    res = _normalise([max(p[y] - acc[y], F(0)) for y in range(V)], p)
    rest = 1 - sum(acc)
    return sum((abs(acc[y] + rest * res[y] - p[y]) for y in range(V)), F(0)), imbalance


# ----------------------------------------------------------------------------- speculative cascades (2405.19261)


def cascade(model, kind, alpha):
    """Speculative cascades (arXiv 2405.19261, the rules as spectheory reads them): token
    verification of the draft against a cascade target pi at each node, the target's bonus token
    after L acceptances. ``kind`` "opt": pi = p when max q < max p - alpha TV(p, q), else q;
    "v1": pi(v) = q(v) (1 - d(v)) + p(v) sum_u q(u) d(u), d(v) = [p(v) < max p - alpha].
    Returns (law of the L + 1 tokens, E[tau + 1])."""
    alpha = F(alpha)

    def target(p, q):
        if kind == "opt":
            tv = sum((abs(a - b) for a, b in zip(p, q)), F(0)) / 2
            return list(p) if max(q) < max(p) - alpha * tv else list(q)
        d = [1 if a < max(p) - alpha else 0 for a in p]
        moved = sum((b for b, dv in zip(q, d) if dv), F(0))
        return [b * (1 - dv) + a * moved for a, b, dv in zip(p, q, d)]

    def weights(x):
        acc, res = [], []
        for i in range(model.L):
            p, q = model.p_rows(x[:i]), model.q_rows(x[:i])
            pi = target(p, q)
            acc.append(min(F(1), pi[x[i]] / q[x[i]]))
            res.append(_normalise([max(a - b, F(0)) for a, b in zip(pi, q)], p))
        stops, reach = [], F(1)
        for a in acc:
            stops.append(reach * (1 - a))
            reach *= a
        return stops + [reach], res

    return chain_law(model, weights)
