"""The claims ledger: every published claim about draft verification that spectheory can check,
recomputed exactly, one row each.

A row names its source (an arXiv id, or an engine's issue / pull request), states the claim in
one line, computes spectheory's number on a stated instance, and gives a verdict:

* ``confirmed``: the claim holds on every instance checked (exactly, in rationals, unless the
  row says float64 and its tolerance);
* ``refuted``: an instance where it fails, with the numbers;
* ``qualified``: it holds under a condition the claim does not state, or in a weaker form;
* ``reproduced`` / ``not reproduced``: for an empirical observation (no theorem states it), whether
  the exact numbers on the stated instance show the same trend.

Each row also carries the verdict recorded in the repository (`CLAIMS`); the ledger's
command (``spectheory claims``) exits 1 when a recomputed verdict differs from the recorded one,
so the test command runs it as a regression test. The documentation page ``docs/claims.md`` is
generated from it (``spectheory claims --markdown``) and a test checks that it is current.

The instances are named in each row: ``toy`` is the two-token example p = (1/3, 2/3), q = (2/3, 1/3)
(context-independent) at L = 2, ``toy L=1`` the same at L = 1; ``random(V, L, seed, d)`` is
[`random_instance`][spectheory.inputs.random_instances.random_instance] with prefix-dependent rows whose
entries are fractions of denominator d
(``spectheory instance random --vocab V --block L --seed S --denominator d``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

VERDICTS = ("confirmed", "refuted", "qualified", "reproduced", "not reproduced")


@dataclass(frozen=True)
class Finding:
    """What a check computed: spectheory's number(s), the verdict, the instance(s)."""

    ours: str
    verdict: str
    instance: str


@dataclass(frozen=True)
class Claim:
    """One row of the ledger (module doc)."""

    id: str
    source: str
    claim: str
    recorded: str
    check: Callable[[], Finding]

    @property
    def command(self) -> str:
        return f"spectheory claims --only {self.id}"


# ----------------------------------------------------------------------------- instances


def _toy(L: int = 2):
    from spectheory.inputs.instances import instance_from_dict

    return instance_from_dict({"vocab_size": 2, "block_length": L, "target": ["1/3", "2/3"],
                               "draft": ["2/3", "1/3"]}, exact=True)


def _random(V, L, seed, d=8):
    from spectheory.inputs.random_instances import random_instance

    return random_instance(V, L, seed, denominator=d)


def _rows(inst):
    return list(inst.target.level(0)[0]), list(inst.draft.level(0)[0])


def _be(inst, name, K=1, drafting=None):
    """Block efficiency E[tau + 1] of a registered verifier, exactly."""
    from spectheory.engine.analysis import analyze_multipath
    from spectheory.registry import get_verifier

    spec = get_verifier(name, multi_path=True)
    return analyze_multipath(inst, spec, K, drafting or spec.default_drafting).block_efficiency


def _tv(inst, name, K=1, drafting=None):
    from spectheory.engine.lossless import check_lossless_multipath
    from spectheory.registry import get_verifier

    spec = get_verifier(name, multi_path=True)
    rep = check_lossless_multipath(spec, inst, K, drafting or spec.default_drafting)
    return rep.tv


def _direct(inst, K, drafting="iid"):
    from .direct import direct_lp

    return direct_lp(inst, K, exact=True, drafting=drafting).optimum


def _f(x) -> str:
    x = Fraction(x)
    return str(x) if x.denominator <= 10**6 else f"{float(x):.12g}"


def _all(flags) -> str:
    return "confirmed" if all(flags) else "refuted"


RANDOM_L1 = [(3, 1, 4, 9), (4, 1, 9, 5), (3, 1, 2, 8), (4, 1, 5, 6)]
RANDOM_L2 = [(2, 2, 3, 8), (3, 2, 7, 9), (2, 3, 5, 10)]


# ----------------------------------------------------------------------------- seed papers


def c_block_toy() -> Finding:
    toy = _toy()
    tok, blk = _be(toy, "token") - 1, _be(toy, "block") - 1
    return Finding(f"E[tau]: token {tok}, block {blk}",
                   _all([tok == Fraction(10, 9), blk == Fraction(11, 9)]), "toy")


def c_block_never_worse() -> Finding:
    gains = []
    for V, L, s in [(2, 2, s) for s in range(6)] + [(3, 2, s) for s in range(4)] + \
            [(2, 3, s) for s in range(3)]:
        inst = _random(V, L, s)
        gains.append(_be(inst, "block") - _be(inst, "token"))
    return Finding(f"smallest E[tau] gain of block over token {_f(min(gains))}, over "
                   f"{len(gains)} instances", _all(g >= 0 for g in gains),
                   "random(2,2,0..5,8), random(3,2,0..3,8), random(2,3,0..2,8)")


def c_block_optimal() -> Finding:
    from .node_budget import node_budget_lp

    ok, vals = [], []
    for inst in [_toy()] + [_random(*a) for a in RANDOM_L2]:
        opt = node_budget_lp(inst, exact=True).optimum
        ok.append(opt == _be(inst, "block"))
        vals.append(_f(opt))
    return Finding(f"node-budget LP optimum = block E[tau+1] exactly: {', '.join(vals)}",
                   _all(ok), "toy, " + ", ".join(f"random{a}" for a in RANDOM_L2))


def c_block_off_path() -> Finding:
    ok, vals = [], []
    for inst in [_toy(), _random(2, 2, 3), _random(3, 2, 1, 6)]:
        opt = _direct(inst, 1)
        ok.append(opt == _be(inst, "block"))
        vals.append(_f(opt))
    return Finding(f"direct LP over all randomised maps (any information) = block: "
                   f"{', '.join(vals)}", _all(ok), "toy, random(2,2,3,8), random(3,2,1,6)")


def c_gbv_toy_optimum() -> Finding:
    toy = _toy()
    g, opt = _be(toy, "gbv", 2), _direct(toy, 2)
    return Finding(f"GBV K=2 {g}, direct LP {opt}", _all([g == opt == Fraction(212, 81)]),
                   "toy, K = 2 i.i.d.")


def c_gbv_best_selection() -> Finding:
    from .selection import selection_lp

    toy = _toy()
    s2, s3 = (selection_lp(toy, K, exact=True).optimum for K in (2, 3))
    g2, g3 = _be(toy, "gbv", 2), _be(toy, "gbv", 3)
    verdict = "qualified" if g2 == s2 and g3 < s3 else ("confirmed" if g3 == s3 else "refuted")
    return Finding(f"K=2: GBV {g2} = best selection rule {s2}; K=3: GBV {g3} < best selection "
                   f"rule {s3}", verdict, "toy")


def c_gbv_beats_block() -> Finding:
    toy, inst = _toy(), _random(3, 2, 7)
    gt, bt = _be(toy, "gbv", 2), _be(toy, "block")
    gi, bi = _be(inst, "gbv", 2), _be(inst, "block")
    verdict = "qualified" if gt > bt and gi < bi else ("confirmed" if gi >= bi else "refuted")
    return Finding(f"toy: GBV K=2 {gt} > block {bt}; random(3,2,7,8): GBV K=2 {gi} < block "
                   f"{bi}", verdict, "toy, random(3,2,7,8)")


def c_gbv_monotone() -> Finding:
    toy = _toy(1)
    vals = [_be(toy, "gbv", K) for K in range(1, 7)]
    drops = [K for K in range(2, 7) if vals[K - 1] < vals[K - 2]]
    return Finding("GBV E[tau+1] for K = 1..6: " + ", ".join(map(str, vals)) +
                   (f" (falls from K = {drops[0] - 1} to K = {drops[0]})" if drops else ""),
                   "not reproduced" if drops else "reproduced", "toy L=1")


def c_selection_equals_direct() -> Finding:
    from .selection import selection_lp

    ok, vals = [], []
    for inst, K in [(_toy(), 2), (_toy(), 3), (_random(2, 2, 3), 2), (_random(3, 1, 4, 9), 2)]:
        s, d = selection_lp(inst, K, exact=True).optimum, _direct(inst, K)
        ok.append(s == d)
        vals.append(f"{_f(s)}={_f(d)}" if s == d else f"{_f(s)}!={_f(d)}")
    return Finding("best selection rule vs direct LP: " + ", ".join(vals) + " (proved equal "
                   "in docs/selection-optimum.md)", _all(ok),
                   "toy K=2,3; random(2,2,3,8) K=2; random(3,1,4,9) K=2")


# ----------------------------------------------------------------------------- Hu et al.


def c_hu_subset_formula() -> Finding:
    from spectheory.bounds import optimal_acceptance

    ok, n = [], 0
    for a in RANDOM_L1:
        inst = _random(*a)
        p, q = _rows(inst)
        for K in (2, 3):
            for drafting in ("iid", "norep"):
                ok.append(1 + optimal_acceptance(p, q, K, drafting)[0] ==
                          _direct(inst, K, drafting))
                n += 1
    return Finding(f"1 + min_H [p(H) - D(all drafts in H)] = direct LP exactly in {sum(ok)} of "
                   f"{n} cases (K = 2, 3; i.i.d. and without replacement)", _all(ok),
                   ", ".join(f"random{a}" for a in RANDOM_L1))


def c_hu_threshold_sets() -> Finding:
    import itertools

    from spectheory.bounds import draws_inside, optimal_acceptance, ratio_order

    ok, n = [], 0
    for V in (3, 4, 5):
        for s in range(6):
            p, q = _rows(_random(V, 1, s, 7))
            for K in (2, 3):
                brute = min(sum((p[a] for a in H), Fraction(0)) + 1 - sum(
                    (q[a] for a in H), Fraction(0)) ** K for r in range(V + 1)
                    for H in itertools.combinations(range(V), r))
                ok.append(brute == optimal_acceptance(p, q, K)[0])
                # without replacement: the best threshold set of p/q against all 2^V sets
                order = ratio_order(p, q)
                pref = min(sum((p[a] for a in order[:k]), Fraction(0)) + 1 -
                           draws_inside(q, K, set(order[:k])) for k in range(V + 1))
                ok.append(pref == optimal_acceptance(p, q, K, "norep")[0])
                n += 2
    return Finding(f"a lower threshold set of p/q attains the minimum over all 2^V sets in "
                   f"{sum(ok)} of {n} cases (i.i.d. and without replacement)", _all(ok),
                   "random(V,1,0..5,7), V = 3, 4, 5, K = 2, 3")


def c_hu_norep_beats_iid() -> Finding:
    from spectheory.bounds import optimal_acceptance

    worse, n = None, 0
    for V in (2, 3, 4):
        for s in range(8):
            p, q = _rows(_random(V, 1, s, 7))
            for K in (2, 3):
                d = optimal_acceptance(p, q, K, "norep")[0] - optimal_acceptance(p, q, K)[0]
                n += 1
                if d < 0 and worse is None:
                    worse = (V, s, K, d)
    if worse:
        return Finding(f"without replacement below i.i.d. by {_f(-worse[3])}", "refuted",
                       f"random({worse[0]},1,{worse[1]},7) K={worse[2]}")
    return Finding(f"alpha*(without replacement) >= alpha*(i.i.d.) in all {n} cases",
                   "confirmed", "random(V,1,0..7,7), V = 2, 3, 4, K = 2, 3")


def c_hu_rrs_gap() -> Finding:
    inst = _random(3, 1, 2, 6)
    opt_i, opt_n = _direct(inst, 2), _direct(inst, 2, "norep")
    rrs, rrsn = _be(inst, "specinfer", 2), _be(inst, "specinfer-norep", 2)
    return Finding(f"E[tau+1], K=2: RRS {rrs} < optimum {opt_i} (i.i.d.); RRS without "
                   f"replacement {rrsn} < optimum {opt_n}", _all([rrs < opt_i, rrsn < opt_n]),
                   "random(3,1,2,6)")


# ----------------------------------------------------------------------------- Khisti et al.


def c_khisti_canonical() -> Finding:
    from spectheory.bounds import optimal_acceptance
    from spectheory.verifiers.coupling import node_acceptance
    from spectheory.verifiers.khisti import khisti_plan

    ok, n = [], 0
    for a in RANDOM_L1 + [(2, 1, 0, 3)]:
        p, q = _rows(_random(*a))
        for K in (2, 3, 4):
            sel = khisti_plan(q, p, K, "iid").stats["selected_acceptance"]
            alpha = optimal_acceptance(p, q, K)[0]
            ok.append(sel == alpha == node_acceptance(khisti_plan, q, p, K, "iid"))
            n += 1
    return Finding(f"importance-weighted selection + single-draft verification reaches alpha* "
                   f"exactly in {sum(ok)} of {n} cases", _all(ok),
                   ", ".join(f"random{a}" for a in RANDOM_L1) + ", K = 2..4")


FIG2 = [(["1/3", "0", "2/3"], "8/9"), (["1/3", "1/18", "11/18"], "17/18"),
        (["1/3", "1/9", "5/9"], "1"), (["1/6", "0", "5/6"], "13/18"),
        (["1/6", "1/3", "1/2"], "1")]


def c_khisti_full_acceptance() -> Finding:
    from spectheory.bounds import full_acceptance_possible, optimal_acceptance

    u = [Fraction(1, 3)] * 3
    ok = []
    for p, _ in FIG2:
        p = [Fraction(x) for x in p]
        ok.append(full_acceptance_possible(p, u, 2)[0] == (optimal_acceptance(p, u, 2)[0] == 1))
    for a in RANDOM_L1:
        p, q = _rows(_random(*a))
        ok.append(full_acceptance_possible(p, q, 2)[0] == (optimal_acceptance(p, q, 2)[0] == 1))
    return Finding(f"alpha* = 1 exactly when p(S) >= q(S)^2 for every S, in {sum(ok)} of "
                   f"{len(ok)} cases (both outcomes occur)", _all(ok),
                   "uniform q on 3 tokens with Figure 2's targets; random L=1 instances")


def c_khisti_closed_form() -> Finding:
    from spectheory.bounds import two_identical_drafts_acceptance

    u = [Fraction(1, 3)] * 3
    ok, vals = [], []
    for p, want in FIG2:
        inst = _one(p, ["1/3"] * 3)
        a = two_identical_drafts_acceptance([Fraction(x) for x in p], u)
        ok.append(a == Fraction(want) and 1 + a == _direct(inst, 2))
        vals.append(str(a))
    return Finding("Theorem 3's closed form = direct LP for Figure 2's targets: " +
                   ", ".join(vals), _all(ok), "uniform q on 3 tokens, K = 2, L = 1")


def c_khisti_remark2() -> Finding:
    from spectheory.bounds import full_acceptance_possible, optimal_acceptance

    ok, both = [], set()
    for V in (2, 3):
        for s in range(10):
            p, q = _rows(_random(V, 1, s, 4))
            for K in (3, 4):
                full = optimal_acceptance(p, q, K)[0] == 1
                both.add(full)
                ok.append(full_acceptance_possible(p, q, K)[0] == full)
    return Finding(f"alpha* = 1 exactly when p(S) >= q(S)^K for every S (K = 3, 4), in "
                   f"{sum(ok)} of {len(ok)} cases; {len(both)} outcome(s) seen", _all(ok),
                   "random(V,1,0..9,4), V = 2, 3")


def c_khisti_ordering() -> Finding:
    ok, vals = [], []
    for p, _ in FIG2:
        inst = _one(p, ["1/3"] * 3)
        k, t, s = (float(_be(inst.to_float(), n, 2)) for n in ("khisti", "spectr",
                                                                "specinfer"))
        ok.append(k >= t - 1e-12 and t >= s - 1e-12)
        vals.append(f"{k:.4f}/{t:.4f}/{s:.4f}")
    return Finding("E[tau+1] IS/SpecTr/SpecInfer at L=1, K=2: " + "; ".join(vals), _all(ok),
                   "uniform q on 3 tokens with Figure 2's targets (float64)")


def _one(p, q):
    from spectheory.inputs.instances import instance_from_dict

    return instance_from_dict({"vocab_size": len(p), "block_length": 1, "target": p,
                               "draft": q}, exact=True)


# ----------------------------------------------------------------------------- SpecHub


def c_spechub_lossless() -> Finding:
    ok = [_tv(_random(V, L, s, d), "spechub", 2) == 0 for V, L, s, d in RANDOM_L1 + RANDOM_L2]
    return Finding(f"TV = 0 exactly on {sum(ok)} of {len(ok)} instances", _all(ok),
                   "RANDOM_L1 and RANDOM_L2 rows, K = 2, hub drafting")


def c_spechub_own_optimum() -> Finding:
    ok, vals = [], []
    for V, L, s, d in RANDOM_L1:
        inst = _random(V, L, s, d)
        be = _be(inst, "spechub", 2)
        ok.append(be == _direct(inst, 2, "hub"))
        vals.append(_f(be))
    return Finding("E[tau+1] = the direct LP optimum under hub drafting: " + ", ".join(vals),
                   _all(ok), "RANDOM_L1 rows, K = 2, L = 1")


def c_spechub_beats_rrs() -> Finding:
    heavy = _one(["1/10", "3/5", "3/10"], ["3/5", "1/5", "1/5"])
    flat = _one(["0"] * 9 + ["1"], ["11/100"] + ["89/900"] * 9)
    a, b = _be(heavy, "spechub", 2), _be(heavy, "specinfer", 2)
    c, d = _be(flat, "spechub", 2), _be(flat, "specinfer", 2)
    verdict = "confirmed" if c >= d else ("qualified" if a > b else "refuted")
    return Finding(f"E[tau+1] {_f(a)} vs RRS {_f(b)} with q(a) = 3/5; {_f(c)} vs {_f(d)} with a "
                   f"near-flat q, q(a) = 11/100", verdict,
                   "p = (1/10, 3/5, 3/10), q = (3/5, 1/5, 1/5); q near-flat on 10 tokens, p "
                   "one-hot on a non-hub token; K = 2, L = 1")


def c_spechub_beats_iid_ot() -> Finding:
    inst = _one(["0", "1/2", "1/2"], ["2/5", "3/10", "3/10"])
    a, opt = _be(inst, "spechub", 2), _direct(inst, 2)
    return Finding(f"SpecHub {_f(a)} > i.i.d. optimum {_f(opt)}",
                   "confirmed" if a > opt else "refuted",
                   "p = (0, 1/2, 1/2), q = (2/5, 3/10, 3/10), K = 2, L = 1")


# ----------------------------------------------------------------------------- Global Resolution


def c_gr_same_relaxation() -> Finding:
    from spectheory.bounds import optimal_acceptance
    from spectheory.verifiers.coupling import node_acceptance, outcomes
    from spectheory.verifiers.hu import hu_plan, max_transport
    from spectheory.verifiers.khisti import khisti_plan

    ok, n = [], 0
    for a in RANDOM_L1:
        p, q = _rows(_random(*a))
        for K in (2, 3):
            flow = max_transport(outcomes(q, K, "iid"), p)[1]
            ok.append(flow == optimal_acceptance(p, q, K)[0] ==
                      node_acceptance(khisti_plan, q, p, K, "iid") ==
                      node_acceptance(hu_plan, q, p, K, "iid"))
            n += 1
    return Finding(f"max-flow value = subset formula = importance-sampling optimum, exactly, in "
                   f"{sum(ok)} of {n} cases", _all(ok), ", ".join(f"random{a}"
                                                                 for a in RANDOM_L1))


def c_gr_convex() -> Finding:
    from spectheory.bounds import optimal_acceptance
    from spectheory.verifiers.coupling import node_acceptance, node_output_law
    from spectheory.verifiers.global_resolution import global_resolution_plan

    gap, exact = Fraction(0), True
    for V in (3, 4, 5, 6):
        for s in range(3):
            p, q = _rows(_random(V, 1, s, 11))
            for K in (2, 3, 4):
                acc = node_acceptance(global_resolution_plan, q, p, K, "iid")
                gap = max(gap, optimal_acceptance(p, q, K)[0] - acc)
                exact &= node_output_law(global_resolution_plan, q, p, K, "iid") == p
    verdict = "confirmed" if gap <= 1e-9 and exact else "refuted"
    return Finding(f"largest gap to alpha* {float(gap):.2e} (V <= 6, K <= 4); output law exactly "
                   f"p after spectheory's repair", verdict, "random(V,1,0..2,11), V = 3..6")


def c_gr_truncation() -> Finding:
    from spectheory.engine.analysis import analyze_multipath
    from spectheory.inputs.random_instances import random_instance
    from spectheory.verifiers.global_resolution import truncated_global_resolution

    parts, ok = [], []
    for tau in (0.01, 0.05):
        spec = truncated_global_resolution(tau)
        worst = max(2 * analyze_multipath(random_instance(8, 1, s, alpha=0.3), spec,
                                          K).tv_to_target for s in range(4) for K in (2, 3))
        ok.append(1e-6 < worst <= 15 * tau)
        parts.append(f"tau = {tau}: largest L1 distance to p {worst:.3g} <= 15 tau")
    return Finding("; ".join(parts) + " (the paper's handling of the truncated sets is not "
                   "published: spectheory's reading)", "qualified" if all(ok) else "refuted",
                   "random_instance(8, 1, 0..3, alpha=0.3) float64, K = 2, 3")


# ----------------------------------------------------------------------------- HSD, SpecTr-GBV


def c_hsd_equals_block() -> Finding:
    same, n = [], 0
    for V, L in ((2, 2), (2, 3), (3, 2)):
        for seed in range(4):
            inst = _random(V, L, seed, 12)
            a, b = _analysis(inst, "hsd"), _analysis(inst, "block")
            same.append(a.tau_pmf == b.tau_pmf and a.tv_to_target == 0 and
                        all(x == y for x, y in zip(a.output_law, b.output_law)))
            n += 1
    return Finding(f"HSD's tau law and output law equal block verification's exactly on {sum(same)}"
                   f" of {n} instances; TV = 0", _all(same),
                   "random(V,L,0..3,12), (V, L) = (2,2), (2,3), (3,2)")


def c_hsd_strictly_more() -> Finding:
    toy = _toy(3)
    h, b = _be(toy, "hsd"), _be(toy, "block")
    return Finding(f"E[tau+1] at L = 3: HSD {h}, block {b} (equal; equal everywhere, see "
                   f"hsd-equals-block)", "confirmed" if h > b else "refuted", "toy, L = 3")


def c_hsd_released() -> Finding:
    toy = _toy()
    tv = _tv(toy, "hsd-released")
    return Finding(f"TV {tv}; E[tau+1] {_be(toy, 'hsd-released')} above block's optimum "
                   f"{_be(toy, 'block')}", "confirmed" if tv == 0 else "refuted", "toy")


def _full_blocks_expression(inst, K):
    """sum_{t<=L} sum_{x^t} m_b(x^t) [1 - (1 - min(m_s(x^t) / m_b(x^t), 1))^K] with m_b the target
    (big model) and m_s the draft (small model): Theorem 5.3's expression in the paper's letters
    (the released code's full-block mass is target-weighted)."""
    import numpy as np

    from spectheory.engine.seqtree import levels, path_probabilities

    L = inst.block_length
    root = np.array([Fraction(1)], dtype=object)
    Qs = path_probabilities(levels(inst.draft, 0, L, True), root)
    Ps = path_probabilities(levels(inst.target, 0, L, True), root)
    total = Fraction(0)
    for t in range(1, L + 1):
        for qx, px in zip(Qs[t], Ps[t]):
            if px > 0:
                total += px * (1 - (1 - min(qx / px, Fraction(1))) ** K)
    coupling = sum((min(px, 1 - (1 - qx) ** K) for t in range(1, L + 1)
                    for qx, px in zip(Qs[t], Ps[t])), Fraction(0))
    return total, coupling


def c_spectr_gbv_optimal() -> Finding:
    K = 2
    a, b = _random(2, 2, 2, 10), _random(2, 2, 10, 6)
    ea, _ = _full_blocks_expression(a, K)
    oa = _direct(a, K) - 1
    eb, cb = _full_blocks_expression(b, K)
    ob = _direct(b, K) - 1
    want = (Fraction(1547, 1000), Fraction(79, 50), Fraction(359, 270), Fraction(215, 162),
            Fraction(115, 81))
    if (ea, oa, eb, ob, cb) != want:
        raise AssertionError(f"spectr-gbv-bound: recomputed {(ea, oa, eb, ob, cb)} != {want}")
    return Finding(f"random(2,2,2,10): the expression is {ea}, but the direct LP's valid 2-path "
                   f"verifier reaches E[tau] = {oa} > {ea}, so the expression is not the optimum; "
                   f"random(2,2,10,6): the expression {eb} exceeds {ob}, the best E[tau] of any "
                   f"verifier lossless within one iteration, and stays below the 2-draft coupling "
                   f"bound {cb}: only the paper's cross-iteration correction could reach it",
                   "refuted" if oa > ea else "confirmed",
                   "random(2,2,2,10) and random(2,2,10,6), K = 2 i.i.d., L = 2")


def c_spectr_gbv_released() -> Finding:
    toy = _toy()
    tvs = [_tv(toy, "spectr-gbv", K) for K in (1, 2, 3)]
    return Finding("TV of one iteration for K = 1, 2, 3: " + ", ".join(_f(t) for t in tvs) +
                   " (the paper's cross-iteration modification is not in the released code)",
                   "confirmed" if all(t == 0 for t in tvs) else "refuted", "toy")


def c_spectr_gbv_grows() -> Finding:
    from spectheory.inputs.random_instances import random_instance

    inst = random_instance(2, 2, 4, alpha=0.5, denominator=12)
    e1, e2 = (_be(inst, "spectr-gbv", K) - 1 for K in (1, 2))
    return Finding(f"E[tau] of the released rule: K = 1 {e1}, K = 2 {e2}",
                   "confirmed" if e2 >= e1 else "refuted",
                   "random_instance(2, 2, 4, alpha=0.5, denominator=12)")


def _analysis(inst, name):
    from spectheory.engine.analysis import analyze

    return analyze(inst, name)


# ----------------------------------------------------------------------------- engines


def _mutant(name) -> Finding:
    from spectheory.testing.mutants import MUTANTS

    c = MUTANTS[name].catch()
    return Finding(f"TV {_f(c.tv) if isinstance(c.tv, Fraction) else f'{float(c.tv):.3g}'}, "
                   f"first offending sequence {c.offending}", "refuted" if c.caught else
                   "confirmed", MUTANTS[name].caught_by)


def c_vllm_40819() -> Finding:
    return _mutant("vllm-40819-block-wrong-row")


def c_gbv_ref_tie() -> Finding:
    return _mutant("gbv-ref-tie-rule")


def c_gbv_ref_leaf() -> Finding:
    return _mutant("gbv-ref-traversal-first-leaf")


CLAIMS: list[Claim] = [
    Claim("block-toy", "arXiv 2403.10444",
          "on the two-token example block verification gets E[tau] = 11/9, token 10/9",
          "confirmed", c_block_toy),
    Claim("block-never-worse", "arXiv 2403.10444",
          "block verification never accepts fewer tokens than token verification",
          "confirmed", c_block_never_worse),
    Claim("block-optimal", "arXiv 2602.16961",
          "block verification attains the node-budget LP optimum among valid single-path "
          "verifiers (Thm 3.3)", "confirmed", c_block_optimal),
    Claim("block-off-path", "arXiv 2403.10444",
          "block verification is optimal even among verifiers that read off-path "
          "probabilities", "confirmed", c_block_off_path),
    Claim("gbv-toy-optimum", "arXiv 2602.16961",
          "GBV with 2 i.i.d. paths attains the best valid 2-path verifier on the two-token "
          "example", "confirmed", c_gbv_toy_optimum),
    Claim("gbv-best-selection", "arXiv 2602.16961",
          "GBV is optimal among select-a-path-then-block-verify rules", "qualified",
          c_gbv_best_selection),
    Claim("gbv-beats-block", "arXiv 2602.16961",
          "GBV with K > 1 paths accepts more than block verification", "qualified",
          c_gbv_beats_block),
    Claim("gbv-monotone-K", "arXiv 2602.16961",
          "observation: GBV's block efficiency grew with the number of paths K in the paper's "
          "experiments (no theorem states it)", "not reproduced",
          c_gbv_monotone),
    Claim("selection-equals-direct", "spectheory",
          "the best select-then-block-verify rule equals the direct K-path LP optimum",
          "confirmed", c_selection_equals_direct),
    Claim("hu-subset-formula", "arXiv 2502.18779",
          "the optimal multi-draft acceptance is 1 + min_H [p(H) - P(all drafts in H)] "
          "(Eq. 8), with and without replacement", "confirmed", c_hu_subset_formula),
    Claim("hu-threshold-sets", "arXiv 2502.18779",
          "the minimising H is found among the V + 1 threshold sets of p/q (q-convex cases)",
          "confirmed", c_hu_threshold_sets),
    Claim("hu-norep-beats-iid", "arXiv 2502.18779",
          "drafting without replacement gives a higher optimal acceptance than i.i.d.",
          "confirmed", c_hu_norep_beats_iid),
    Claim("hu-rrs-gap", "arXiv 2502.18779",
          "recursive rejection sampling, with and without replacement, falls short of the "
          "optimum", "confirmed", c_hu_rrs_gap),
    Claim("khisti-canonical", "arXiv 2410.18234",
          "importance-weighted selection then single-draft speculative sampling is optimal "
          "(Thm 1)", "confirmed", c_khisti_canonical),
    Claim("khisti-full-acceptance", "arXiv 2410.18234",
          "with two identical drafts, acceptance 1 is possible iff p(S) >= q(S)^2 for all S "
          "(Thm 2)", "confirmed", c_khisti_full_acceptance),
    Claim("khisti-closed-form", "arXiv 2410.18234",
          "two identical drafts: alpha* = min_S p(S) + q(S^c)^2 + 2 q(S) q(S^c) (Thm 3)",
          "confirmed", c_khisti_closed_form),
    Claim("khisti-remark-2", "arXiv 2410.18234",
          "K identical drafts: acceptance 1 iff p(S) >= q(S)^K for all S (conjectured, "
          "Remark 2)", "confirmed", c_khisti_remark2),
    Claim("khisti-ordering", "arXiv 2410.18234",
          "importance sampling accepts more than SpecTr, which accepts more than SpecInfer "
          "(Table 3)", "confirmed", c_khisti_ordering),
    Claim("gr-same-relaxation", "arXiv 2511.15898",
          "Khisti's importance sampling and Hu's subset selection solve the same relaxed OT "
          "LP (Thm 4.1)", "confirmed", c_gr_same_relaxation),
    Claim("gr-convex-program", "arXiv 2511.15898",
          "the OT reduces to a convex program in at most V variables whose rule is optimal",
          "confirmed", c_gr_convex),
    Claim("gr-truncation-bound", "arXiv 2511.15898",
          "the truncated solver deviates from p by at most 15 tau in L1 (Lemma 6.6)",
          "qualified", c_gr_truncation),
    Claim("spechub-lossless", "arXiv 2411.05289",
          "SpecHub's hub drafting with its verifier keeps the target law", "confirmed",
          c_spechub_lossless),
    Claim("spechub-own-optimum", "arXiv 2411.05289",
          "the sparse (hub) transport is solved in linear time, optimally for its draft law",
          "confirmed", c_spechub_own_optimum),
    Claim("spechub-beats-rrs", "arXiv 2411.05289",
          "SpecHub accepts more than recursive rejection sampling with two drafts",
          "qualified", c_spechub_beats_rrs),
    Claim("spechub-beats-otm", "arXiv 2411.05289",
          "SpecHub can beat the optimal transport of two i.i.d. drafts (as summaries of the "
          "paper report it)", "confirmed",
          c_spechub_beats_iid_ot),
    Claim("hsd-equals-block", "arXiv 2601.05724",
          "HSD (Algorithm 2) is a lossless sequence-level verifier (Thm 6)", "confirmed",
          c_hsd_equals_block),
    Claim("hsd-beats-block", "arXiv 2601.05724",
          "HSD accepts strictly more tokens than block verification for L > 1 (Thm 7)",
          "refuted", c_hsd_strictly_more),
    Claim("hsd-released-code", "arXiv 2601.05724 (released code)",
          "the released HSD code (and Listing 2) keeps the target law", "refuted",
          c_hsd_released),
    Claim("spectr-gbv-bound", "arXiv 2604.25925",
          "SpecTr-GBV attains the optimal E[tau] for i.i.d. drafts, sum_t sum_x m_b [1 - (1 - "
          "min(m_s/m_b, 1))^K], m_s the draft, m_b the target (Thm 5.3)", "refuted",
          c_spectr_gbv_optimal),
    Claim("spectr-gbv-released-code", "arXiv 2604.25925 (released code)",
          "one iteration of the released SpecTr-GBV verifier keeps the target law", "refuted",
          c_spectr_gbv_released),
    Claim("spectr-gbv-grows-with-K", "arXiv 2604.25925 (released code)",
          "the released SpecTr-GBV accepts more with more drafts", "refuted",
          c_spectr_gbv_grows),
    Claim("vllm-40819-reference", "vLLM PR 40819",
          "the pure-torch block-verification reference follows the target law like the "
          "kernel", "refuted", c_vllm_40819),
    Claim("gbv-reference-ties", "arXiv 2602.16961 (reference code)",
          "the GBV reference code's tie rule keeps GBV lossless", "refuted", c_gbv_ref_tie),
    Claim("gbv-reference-leaf-order", "arXiv 2602.16961 (reference code)",
          "the reference traversal baseline's first leaf (smallest node index) is a valid "
          "post-order", "refuted", c_gbv_ref_leaf),
]


def _engine_claim(name: str) -> Callable[[], Finding]:
    """A statement from an engine's issue or pull request, checked by the bug kit
    (`spectheory.testing.mutants.CLAIMS`)."""
    def check() -> Finding:
        from spectheory.testing.mutants import CLAIMS as ENGINE_CLAIMS

        c = ENGINE_CLAIMS[name]
        r = c.check()
        return Finding(r.summary, r.verdict, c.how)

    return check


def _engine_claims() -> list[Claim]:
    from spectheory.testing.mutants import CLAIMS as ENGINE_CLAIMS

    return [Claim(name, f"{c.project} {c.issue}", c.statement, c.verdict, _engine_claim(name))
            for name, c in ENGINE_CLAIMS.items()]


def ledger() -> list[Claim]:
    """Every row: the claims of the papers (`CLAIMS`) and the engines' claims of the bug kit
    (loaded on first use: the bug kit loads torch, the command line's parser does not)."""
    return list(CLAIMS) + _engine_claims()


# ----------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Row:
    """A ledger row after its check ran."""

    claim: Claim
    finding: Finding

    @property
    def matches(self) -> bool:
        return self.finding.verdict == self.claim.recorded

    def to_json(self) -> dict:
        c, f = self.claim, self.finding
        return {"id": c.id, "source": c.source, "claim": c.claim, "ours": f.ours,
                "verdict": f.verdict, "recorded": c.recorded, "instance": f.instance,
                "command": c.command}


def select(only: str | None = None) -> list[Claim]:
    """The claims whose id or source contains ``only`` (case-insensitive), all for None."""
    from spectheory.runtime.errors import SpectheoryError

    rows = ledger()
    if not only:
        return rows
    key = only.lower()
    chosen = [c for c in rows if key in c.id.lower() or key in c.source.lower()]
    if not chosen:
        raise SpectheoryError(f"--only {only!r} matches no claim id or source; sources: "
                              f"{', '.join(sorted({c.source for c in rows}))}")
    return chosen


def run_claims(only: str | None = None, progress: Callable | None = None) -> list[Row]:
    """Recompute the selected claims (module doc)."""
    rows = []
    for claim in select(only):
        if progress is not None:
            progress(claim)
        finding = claim.check()
        if finding.verdict not in VERDICTS:
            raise AssertionError(f"claim {claim.id}: verdict {finding.verdict!r}")
        rows.append(Row(claim, finding))
    return rows


def markdown(rows: list[Row]) -> str:
    """The documentation page (docs/claims.md) for the full ledger."""
    out = ["# Claims ledger", "",
           "Every published claim about draft verification that spectheory can check, "
           "recomputed exactly by `spectheory claims` (generated by `spectheory claims "
           "--markdown > docs/claims.md`; do not edit by hand). Verdicts: **confirmed** on "
           "every instance checked, **refuted** with the instance, **qualified** when the "
           "claim holds only under a condition it does not state. Instances: `toy` is p = "
           "(1/3, 2/3), q = (2/3, 1/3) at L = 2; `random(V,L,seed,d)` is `spectheory instance "
           "random --vocab V --block L --seed seed --denominator d` (prefix-dependent rows). "
           "Each row is reproduced by `spectheory claims --only ID`; the rules and the papers "
           "are on [Multi-draft optimal transport](multidraft-ot.md).", ""]
    for source in dict.fromkeys(r.claim.source for r in rows):
        out += [f"## {source}", "", "| id | claim | spectheory | verdict | instance |",
                "|---|---|---|---|---|"]
        for r in rows:
            if r.claim.source == source:
                cells = [f"`{r.claim.id}`", r.claim.claim, r.finding.ours,
                         f"**{r.finding.verdict}**", r.finding.instance]
                out.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def cmd_claims(args) -> int:
    from spectheory.runtime import limits

    chosen = select(args.only)
    step = [0]

    def progress(claim):
        step[0] += 1
        if limits.progress_enabled():
            print(f"[{step[0]}/{len(chosen)}] {claim.id}", file=sys.stderr, flush=True)

    rows = run_claims(args.only, progress)
    if args.markdown:
        if args.only:
            from spectheory.runtime.errors import SpectheoryError
            raise SpectheoryError("--markdown writes the whole ledger; drop --only")
        sys.stdout.write(markdown(rows) + "\n")
    elif args.json:
        sys.stdout.write(json.dumps([r.to_json() for r in rows]) + "\n")
    else:
        for r in rows:
            flag = "" if r.matches else f"   <-- recorded {r.claim.recorded}"
            sys.stdout.write(f"{r.finding.verdict.upper():9s} {r.claim.id} "
                             f"({r.claim.source}): {r.claim.claim}\n"
                             f"          spectheory: {r.finding.ours} [{r.finding.instance}]"
                             f"{flag}\n")
        differ = sum(not r.matches for r in rows)
        sys.stdout.write(f"{len(rows)} claims: " + ", ".join(
            f"{sum(r.finding.verdict == v for r in rows)} {v}" for v in VERDICTS) +
            (f"; {differ} differ from the recorded verdict\n" if differ else
             "; all as recorded\n"))
    return 1 if any(not r.matches for r in rows) else 0


def register(sub) -> None:
    p = sub.add_parser(
        "claims", help="recompute every checkable published claim (the claims ledger)",
        description="Recompute the claims ledger: one row per published claim spectheory can "
                    "check (source, claim, spectheory's number, verdict, instance, command). "
                    "Exit code 1 when a verdict differs from the one recorded in the "
                    "repository.")
    p.add_argument("--only", metavar="TEXT", default=None,
                   help="the claims whose id or source contains TEXT (e.g. 2502.18779, hu-)")
    p.add_argument("--json", action="store_true", help="one JSON list of rows")
    p.add_argument("--markdown", action="store_true",
                   help="the documentation page (docs/claims.md) for the whole ledger")
    p.set_defaults(func=cmd_claims)
