"""Published divergence bounds of relaxed acceptance rules, checked against exact divergences.

Each check returns a [`Verdict`][spectheory.lp.claims.relaxed_checks.Verdict]: the claim, its
source, the instance it was checked on, the bound, the exact value (float with a stated error bound,
from the rule's exact law) and ``refuted`` (the exact value exceeds the bound by more than the
error: a bound below the exact value is a refuted certificate). Ledger-ready: every verdict has an
instance, a bound and an exact value.

**Cactus** (Hao, Mou, ICLR 2026, arXiv 2604.04987; ``solve_constraint`` in
github.com/MANGA-UOFA/Cactus). The rule replaces the target row p by h, which moves the drafted
token x from p(x) to h(x) = min(1, p(x) + sqrt(2 delta p(x) (1 - p(x)))) and scales the others by
(1 - h(x)) / (1 - p(x)); the claim is that h stays within the budget, D(h || p) <= delta, with
D = KL (the repository's "KL-divergence budget"), reportedly through a second-order Taylor step:
(h(x) - p(x))^2 / (2 p(x) (1 - p(x))) = delta is the quadratic term of KL(h || p). The exact
divergence of this two-block move is

    KL(h || p) = h(x) log(h(x) / p(x)) + (1 - h(x)) log((1 - h(x)) / (1 - p(x))),

which the Taylor step does not bound: at p(x) = 1/2, delta = 1/10 it is 0.10363 > 0.1, and where
the clamp h(x) = 1 binds it is log(1 / p(x)) (0.10536 at p(x) = 9/10, delta = 1/10).
[`cactus_h_claim`][spectheory.lp.claims.relaxed_checks.cactus_h_claim] checks the claim at every
node and drafted token of an instance;
[`cactus_output_claim`][spectheory.lp.claims.relaxed_checks.cactus_output_claim] checks the
same budget against what a user receives, the exact law of the token Cactus emits at a node
(accept or correct), KL(out || p).

**arXiv 2606.30265** ("When Is a Draft Accepted?", Sharma 2026) states exact KL certificates (the
least divergence from the target that makes a rule reject the drafted token) for strict greedy,
additive, multiplicative, top-m, entropy-thresholded and greedy-tree top-m rules. Only the
abstract was reachable, so its formulas are not transcribed here and no verdict is issued for
them. What is checked instead is the certificate its abstract describes, for strict greedy
decoding, derived here: the drafted token x (the argmax of p) is rejected under a target r iff
some y != x has r(y) >= r(x), and the least such divergence is

    min KL(r || p) = min_{y != x} -log(1 - (sqrt p(x) - sqrt p(y))^2)    (r proportional to p
                                                         except r(x) = r(y) = sqrt(p(x) p(y))),
    min KL(p || r) = min_{y != x} [p(x) log(2 p(x) / (p(x) + p(y))) + p(y) log(2 p(y) / (p(x) + p(y)))]
                                                        (r(x) = r(y) = (p(x) + p(y)) / 2),

[`greedy_rejection_radius`][spectheory.lp.claims.relaxed_checks.greedy_rejection_radius];
[`check_greedy_radius`][spectheory.lp.claims.relaxed_checks.check_greedy_radius] compares it with
the minimum that a convex solver finds (cvxpy) over each competitor y.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np

#: Float64 relative error allowance per term of an exact-divergence evaluation.
_EPS = 64 * 2.0**-52


@dataclass
class Verdict:
    """One checked claim: ``refuted`` when ``exact`` > ``bound`` + ``error``."""

    claim: str
    source: str
    instance: str
    bound: float
    exact: float
    error: float
    refuted: bool
    where: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def _kl_two_block(hx: float, px: float) -> float:
    """KL(h || p) of a move of x from px to hx with the rest scaled proportionally."""
    out = 0.0
    if hx > 0:
        out += hx * math.log(hx / px)
    if hx < 1:
        out += (1 - hx) * math.log((1 - hx) / (1 - px))
    return out


def cactus_h(px: float, delta: float) -> float:
    """Cactus's h(x) = min(1, p(x) + sqrt(2 delta p(x) (1 - p(x))))."""
    return min(1.0, px + math.sqrt(2 * delta * px * (1 - px)))


def _nodes(instance):
    """(prefix, p row, q row) at every node of depth < L of the instance (floats)."""
    inst = instance.to_float()
    V, L = inst.vocab_size, inst.block_length
    for d in range(L):
        P, Q = np.asarray(inst.target.level(d)), np.asarray(inst.draft.level(d))
        for c in range(V**d):
            yield f"depth {d}, context {c}", P[c], Q[c]


def cactus_h_claim(instance, delta: float, name: str = "") -> Verdict:
    """The claim KL(h || p) <= delta of Cactus's reweighted row h, checked at every node and
    every drafted token x (q(x) > 0, 0 < p(x) < 1) of ``instance``; reports the worst."""
    worst, where = -1.0, ""
    for label, p, q in _nodes(instance):
        for x in range(len(p)):
            px = float(p[x])
            if q[x] <= 0 or not 0 < px < 1:
                continue
            kl = _kl_two_block(cactus_h(px, delta), px)
            if kl > worst:
                worst, where = kl, f"{label}, token {x}, p(x) = {px:.6g}"
    err = _EPS * max(1.0, abs(worst))
    return Verdict("D_KL(h || p) <= delta (Cactus's reweighted target)",
                   "Hao, Mou, ICLR 2026, arXiv 2604.04987", name or "instance", float(delta),
                   max(worst, 0.0), err, worst > delta + err, where)


def cactus_output_law(p, q, delta: float) -> np.ndarray:
    """Exact law [V] of the token Cactus emits at one node (L = 1): accept X ~ q w.p.
    min(1, h_X(X) / q(X)), else correct from normalise(max(h_X - q, 0))."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    out = np.zeros(len(p))
    for x in range(len(p)):
        if q[x] <= 0:
            continue
        px = p[x]
        hx = cactus_h(px, delta)
        h = p * ((1 - hx) / (1 - px) if px < 1 else 1.0)
        h[x] = hx
        a = min(1.0, hx / q[x])
        res = np.maximum(h - q, 0.0)
        tot = res.sum()
        corr = res / tot if tot > 0 else p
        out += q[x] * (a * np.eye(len(p))[x] + (1 - a) * corr)
    return out


def cactus_output_claim(instance, delta: float, name: str = "") -> Verdict:
    """The same budget against the law of the token Cactus emits at each node:
    KL(out || p) <= delta, the worst node reported."""
    worst, where = -1.0, ""
    for label, p, q in _nodes(instance):
        out = cactus_output_law(p, q, delta)
        kl = float(sum(o * math.log(o / t) for o, t in zip(out, p) if o > 0)) \
            if all(t > 0 or o == 0 for o, t in zip(out, p)) else math.inf
        if kl > worst:
            worst, where = kl, label
    err = _EPS * max(1.0, abs(worst)) * len(np.asarray(instance.target.level(0))[0])
    return Verdict("KL(emitted token's law || p) <= delta at every node (Cactus, as received)",
                   "Hao, Mou, ICLR 2026, arXiv 2604.04987", name or "instance", float(delta),
                   worst, err, worst > delta + err, where)


def greedy_rejection_radius(p, x: int, direction: str = "rp") -> float:
    """The least KL(r || p) (``direction="rp"``) or KL(p || r) (``"pr"``) over targets r under
    which the greedy rule rejects x (some y != x with r(y) >= r(x)); closed forms in the module
    doc. ``p`` [V] a target row with x its argmax."""
    p = [float(v) for v in p]
    best = math.inf
    for y in range(len(p)):
        if y == x or (p[y] == 0 and direction == "rp"):  # KL(r || p): r(y) >= r(x) with
            continue  # p(y) = 0 forces r(x) = 0, and a z with p(z) > 0 then beats x at a cost
        # its own term covers. KL(p || r) puts mass on y freely (p = (1, 0): log 2, not inf)
        a, b = p[x], p[y]
        if direction == "rp":
            val = -math.log(1 - (math.sqrt(a) - math.sqrt(b)) ** 2)
        else:
            m = (a + b) / 2
            val = (a * math.log(a / m) if a > 0 else 0.0) + (b * math.log(b / m) if b > 0 else 0.0)
        best = min(best, val)
    return best


def check_greedy_radius(p, x: int, direction: str = "rp", name: str = "") -> Verdict:
    """The closed-form radius against cvxpy's minimum of the same convex problem, one per
    competitor y (min KL s.t. r(y) >= r(x), r a distribution). ``refuted`` when they differ by
    more than the solver tolerance (1e-6): the closed form is then not the minimum."""
    import cvxpy as cp

    p = np.asarray([float(v) for v in p])
    # r off the support of p: an infinite KL(r || p); KL(p || r) lets r put mass there (the
    # competitor y may be such a token)
    support = [i for i in range(len(p)) if p[i] > 0 or direction == "pr"]
    ps = p[support]
    xs = support.index(x)
    numeric = math.inf
    for ys in range(len(support)):
        if ys == xs:
            continue
        r = cp.Variable(len(support), nonneg=True)
        obj = cp.sum(cp.rel_entr(r, ps)) if direction == "rp" else cp.sum(cp.rel_entr(ps, r))
        prob = cp.Problem(cp.Minimize(obj), [cp.sum(r) == 1, r[ys] >= r[xs]])
        prob.solve(solver=cp.CLARABEL)
        numeric = min(numeric, float(prob.value))
    closed = greedy_rejection_radius(p, x, direction)
    tol = 1e-6
    return Verdict(f"least KL({'r || p' if direction == 'rp' else 'p || r'}) that makes greedy "
                   "reject its argmax: the closed form", "derived here (arXiv 2606.30265's "
                   "exact-certificate notion)", name or f"p = {list(p)}", closed, numeric, tol,
                   abs(numeric - closed) > tol, f"token {x}")


def ledger_rows() -> list:
    """The verdicts on the named instances the tests use: Cactus's h-claim at p = (1/2, 1/4,
    1/4), q = (1/4, 1/2, 1/4) with delta = 1/10 (refuted: 0.10363 > 0.1
    at x = 0), at p = (1/10, 9/10), q = (1, 0) (holds: 0.0756), the received law's claim at both, and the greedy radius on a three-token row."""
    from spectheory.inputs.instances import instance_from_dict

    a = instance_from_dict({"vocab_size": 3, "block_length": 1, "target": ["1/2", "1/4", "1/4"],
                            "draft": ["1/4", "1/2", "1/4"]})
    b = instance_from_dict({"vocab_size": 2, "block_length": 1, "target": ["1/10", "9/10"],
                            "draft": ["1", "0"]})
    rows = [cactus_h_claim(a, 0.1, "p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4), L = 1"),
            cactus_h_claim(b, 0.1, "p = (1/10, 9/10), q = (1, 0), L = 1"),
            cactus_output_claim(a, 0.1, "p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4), L = 1"),
            cactus_output_claim(b, 0.1, "p = (1/10, 9/10), q = (1, 0), L = 1")]
    for d in ("rp", "pr"):
        rows.append(check_greedy_radius([Fraction(1, 2), Fraction(3, 10), Fraction(1, 5)], 0, d,
                                        "p = (1/2, 3/10, 1/5)"))
    return rows


def frontier_rows() -> list:
    """Ledger-ready checks of the frontier LP (`spectheory.lp.frontier`) on the instance of
    ``spectheory instance random --vocab 3 --block 2 --seed 0 --denominator 12`` rebuilt in
    Python (``random_instance(3, 2, 0, alpha=0.5, denominator=12)``): at delta = 0 it equals
    block verification's E[tau + 1] exactly (Sun et al., arXiv 2403.10444, optimality of block
    verification), and the free-block rule's value equals the coupling bound exactly and exceeds
    it. Each row: claim, source, instance, expected, value, holds."""
    import spectheory as st
    from spectheory.lp.coupling import coupling_bound

    from ..frontier import free_block_lp, frontier_lp
    from ..trust import _tables, greedy_value

    inst = st.random_instance(3, 2, 0, alpha=0.5, denominator=12)
    name = "random_instance(3, 2, 0, alpha=0.5, denominator=12)"
    p, Q = _tables(inst, True)
    block = greedy_value(p, Q, 2)
    front = frontier_lp(inst, tv=0, exact=True, rules=()).optimum
    free = free_block_lp(inst, exact=True).optimum
    coupling = coupling_bound(inst, exact=True).optimum
    return [
        {"claim": "the best verifier within TV 0 is block verification (frontier at delta = 0)",
         "source": "Sun et al., arXiv 2403.10444; spectheory.lp.frontier", "instance": name,
         "expected": block, "value": front, "holds": front == block},
        {"claim": "choosing the whole L + 1 block freely reaches the coupling bound, above every "
                  "verifier", "source": "spectheory.lp.frontier.free_block_lp", "instance": name,
         "expected": coupling, "value": free, "holds": free == coupling and free > block}]


__all__ = ["Verdict", "cactus_h", "cactus_h_claim", "cactus_output_claim", "cactus_output_law",
           "check_greedy_radius", "frontier_rows", "greedy_rejection_radius", "ledger_rows"]
