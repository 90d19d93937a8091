"""Tree drafting (arXiv 2602.16994, Thomas, Kitanovski, Goldblum, Pal: "Dynamic Delayed Tree
Expansion For Improved Multi-Path Speculative Decoding"), and the 2025-2026 sources the ledger
leaves out, with the reason.

Delayed tree expansion drafts a single path for the first d tokens and branches into K i.i.d.
paths only below it; root-node i.i.d. rollouts branch at the root. With K = 2, L = 2, d = 1 the
two trees are the shapes ``1,2`` and ``2,1`` of
[`analyze_tree`][spectheory.engine.analysis.analyze_tree] with i.i.d. children, verified here by
SpecInfer's recursive rejection sampling at every node (an optimal-transport-style verifier of
the paper's comparison). The paper reports, from experiments, that delayed expansion improves on
root-node rollouts because draft and target diverge deeper in the tree; the ledger checks that
observation on an instance built that way (draft and target agree at the root, diverge below) and
reports the two-token example, where they diverge at the root, beside it.

Left out, with the reason:

* arXiv 2512.11718 (Pankratov & Alistarh, "Speculative Decoding Speed-of-Light"): its bound
  E[X] <= (mu + mu_(2)) log(P) / mu^2 + O(1) on the expected number of tokens predicted per
  iteration holds for deterministic speculative generation under an assumption on the acceptance
  probabilities across prefixes, with an unspecified O(1) term; no finite instance can confirm
  or refute a bound with an unspecified additive constant, so there is no exact row. (The exact
  node-budget and tree LPs on small trees give the instance-wise optimum such a bound must
  exceed; without the constant nothing is compared.)
* UniVer (arXiv 2605.04543, "lossless and optimal under the conditional framework"): the
  verification rule (composition of local transport plans under prefix constraints) is not
  specified in the material available to the ledger beyond its abstract, so its optimum cannot be
  recomputed; no rule was invented for it.

`LEFT_OUT` lists these (and the other sources considered and left out) for the documentation page.
"""

from __future__ import annotations

from .common import Claim, Finding, Hypotheses, note, toy


def setting_instance():
    """V = 3, L = 2, exact, prefix-dependent: draft and target agree at the root
    (p = q = (1/2, 1/4, 1/4)) and diverge below it (the setting 2602.16994 describes)."""
    from spectheory.inputs.instances import instance_from_dict

    third = ["1/3", "1/3", "1/3"]
    return instance_from_dict({
        "vocab_size": 3, "block_length": 2,
        "target": {"": ["1/2", "1/4", "1/4"], "0": ["1/2", "1/4", "1/4"],
                   "1": ["1/4", "1/2", "1/4"], "2": ["1/4", "1/4", "1/2"], "0,0": third,
                   "0,1": third, "0,2": third, "1,0": third, "1,1": ["1/2", "1/4", "1/4"],
                   "1,2": ["1/4", "1/2", "1/4"], "2,0": ["1/4", "1/4", "1/2"], "2,1": third,
                   "2,2": ["1/2", "1/4", "1/4"]},
        "draft": {"": ["1/2", "1/4", "1/4"], "0": ["1/8", "1/8", "3/4"],
                  "1": ["3/4", "1/8", "1/8"], "2": ["1/8", "3/4", "1/8"]}}, exact=True)


def tree(inst, shape, verifier="specinfer"):
    """Exact analysis of ``verifier`` on the drafted tree ``shape`` with i.i.d. children."""
    from spectheory.engine.analysis import analyze_tree

    note(inst, "tree", 2)
    return analyze_tree(inst, verifier, shape, drafting="iid")


def c_delayed_lossless() -> Finding:
    tvs = [tree(inst, "1,2").tv_to_target for inst in (toy(), setting_instance())]
    return Finding("TV to the target of the delayed tree 1,2 verified by SpecInfer: " +
                   ", ".join(map(str, tvs)), "confirmed" if all(t == 0 for t in tvs)
                   else "refuted", "toy and setting_instance(), K = 2, L = 2, d = 1")


def c_delayed_improves() -> Finding:
    s = setting_instance()
    ds, rs = tree(s, "1,2").block_efficiency, tree(s, "2,1").block_efficiency
    t = toy()
    dt, rt = tree(t, "1,2").block_efficiency, tree(t, "2,1").block_efficiency
    return Finding(f"SpecInfer E[tau+1]: delayed {ds} vs root rollouts {rs} where draft and "
                   f"target agree at the root; on the two-token example (they differ at the "
                   f"root) delayed {dt} vs root {rt}",
                   "reproduced" if ds > rs else "not reproduced",
                   "setting_instance() and toy, K = 2 i.i.d. children, L = 2, d = 1")


#: Sources considered for the ledger and left out: (source, reason). Shown on docs/claims.md.
LEFT_OUT = [
    ("arXiv 2512.11718 (Pankratov & Alistarh)",
     "its bound E[X] <= (mu + mu_(2)) log(P) / mu^2 + O(1) has an unspecified additive O(1) term "
     "and assumes deterministic generation; no finite instance can confirm or refute it"),
    ("UniVer, arXiv 2605.04543",
     "the verification rule is not specified beyond the abstract available to the ledger; its "
     "optimum under the conditional framework cannot be recomputed, and no rule was invented"),
    ("Partial Resolution (Thomas & Pal, NeurIPS 2025); layer verification (AdaptFM @ ICML 2026)",
     "no full text found; nothing to transcribe"),
    ("vLLM #47386 (shared Philox offset for draft, coin and recovery noise)",
     "its exact bias needs the joint law of two Gumbel argmaxes over one noise vector (a cone "
     "integral) that spectheory does not compute in rationals; the bug kit catches it by sampling"),
    ("Traversal verification against optimal-transport methods (arXiv 2602.16994, experiments)",
     "spectheory computes it (traversal-tree vs specinfer), but the ledger has no second, "
     "independent implementation of traversal verification behind a verdict yet"),
]

DTE = ("arXiv 2602.16994: target and draft by role (p, q); block efficiency E[tau + 1] per "
       "iteration; K i.i.d. rollouts from the branching node")

ROWS = [
    Claim("delayed-expansion-lossless", "arXiv 2602.16994", "delayed tree expansion",
          "stated result", "delayed tree expansion preserves the target distribution", DTE,
          Hypotheses(("tree",), K=(2,), L=(2,), notes="a single path to depth d = 1, then K "
                     "i.i.d. children"), "confirmed", c_delayed_lossless),
    Claim("delayed-expansion-improves", "arXiv 2602.16994", "experiments (abstract)",
          "empirical observation", "delayed tree expansion improves on root-node i.i.d. "
          "rollouts, because draft and target diverge deeper in the tree", DTE,
          Hypotheses(("tree",), K=(2,), L=(2,), notes="SpecInfer at every node"), "reproduced",
          c_delayed_improves),
]
