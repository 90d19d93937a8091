"""SpecHub (Sun et al., "SpecHub: Provable Acceleration to Multi-Draft Speculative Decoding",
EMNLP 2024, arXiv 2411.05289): hub drafting (the draft's most probable first token a and one
companion) with its sparse transport verifier.

Notation: one token step (L = 1) or short blocks, two drafts (K = 2) drawn by the hub scheme,
not i.i.d.; acceptance = E[tau] per iteration; target and draft by role (spectheory's p, q)."""

from __future__ import annotations

from .common import (RANDOM_L1, RANDOM_L2, Claim, Finding, Hypotheses, all_hold, be, direct, f,
                      one, rnd, tv)


def c_spechub_lossless() -> Finding:
    ok = [tv(rnd(V, L, s, d), "spechub", 2) == 0 for V, L, s, d in RANDOM_L1 + RANDOM_L2]
    return Finding(f"TV = 0 exactly on {sum(ok)} of {len(ok)} instances", all_hold(ok),
                   "RANDOM_L1 and RANDOM_L2 rows, K = 2, hub drafting")


def c_spechub_own_optimum() -> Finding:
    ok, vals = [], []
    for V, L, s, d in RANDOM_L1:
        inst = rnd(V, L, s, d)
        e = be(inst, "spechub", 2)
        ok.append(e == direct(inst, 2, "hub"))
        vals.append(f(e))
    return Finding("E[tau+1] = the direct LP optimum under hub drafting: " + ", ".join(vals),
                   all_hold(ok), "RANDOM_L1 rows, K = 2, L = 1")


def c_spechub_beats_rrs() -> Finding:
    heavy = one(["1/10", "3/5", "3/10"], ["3/5", "1/5", "1/5"])
    flat = one(["0"] * 9 + ["1"], ["11/100"] + ["89/900"] * 9)
    a, b = be(heavy, "spechub", 2), be(heavy, "specinfer", 2)
    c, d = be(flat, "spechub", 2), be(flat, "specinfer", 2)
    verdict = "confirmed" if c >= d else ("qualified" if a > b else "refuted")
    return Finding(f"E[tau+1] {f(a)} vs RRS {f(b)} with q(a) = 3/5; {f(c)} vs {f(d)} with a "
                   f"near-flat q, q(a) = 11/100", verdict,
                   "p = (1/10, 3/5, 3/10), q = (3/5, 1/5, 1/5); q near-flat on 10 tokens, p "
                   "one-hot on a non-hub token; K = 2, L = 1")


def c_spechub_beats_iid_ot() -> Finding:
    inst = one(["0", "1/2", "1/2"], ["2/5", "3/10", "3/10"])
    a, opt = be(inst, "spechub", 2), direct(inst, 2)
    return Finding(f"SpecHub {f(a)} > i.i.d. optimum {f(opt)}",
                   "confirmed" if a > opt else "refuted",
                   "p = (0, 1/2, 1/2), q = (2/5, 3/10, 3/10), K = 2, L = 1")



HUB = ("arXiv 2411.05289: target and draft by role (p, q); two drafts by hub sampling; "
       "acceptance = E[tau] of one iteration, E[tau + 1] = 1 + acceptance at L = 1")

ROWS = [
    Claim("spechub-lossless", "arXiv 2411.05289", "losslessness of the SpecHub verifier",
          "theorem", "SpecHub's hub drafting with its verifier keeps the target law", HUB,
          Hypotheses(("hub",), K=(2,)), "confirmed", c_spechub_lossless,
          reading="the hub is argmax q with ties to the smallest id; the staged order of the "
                  "authors' released verifier (non-hub members before the hub, for (a, i) the "
                  "second draft before the first); at L > 1 the two paths branch at the root "
                  "only and each deeper node is token-verified"),
    Claim("spechub-own-optimum", "arXiv 2411.05289", "sparse optimal transport, solved in "
          "linear time", "theorem", "the hub transport is solved in linear time, optimally for "
          "its draft law", HUB, Hypotheses(("hub",), K=(2,), L=(1,)), "confirmed",
          c_spechub_own_optimum),
    Claim("spechub-beats-rrs", "arXiv 2411.05289", "acceptance comparisons", "stated result",
          "SpecHub accepts more than recursive rejection sampling with two drafts", HUB,
          Hypotheses(("hub", "iid"), K=(2,), L=(1,)), "qualified", c_spechub_beats_rrs),
    Claim("spechub-beats-otm", "arXiv 2411.05289", "as summaries of the paper report it",
          "stated result", "SpecHub can beat the optimal transport of two i.i.d. drafts", HUB,
          Hypotheses(("hub", "iid"), K=(2,), L=(1,)), "confirmed", c_spechub_beats_iid_ot),
]
