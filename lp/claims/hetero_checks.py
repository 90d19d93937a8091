"""Claim checks for heterogeneous vocabularies, ready to be rows of the claims ledger.

Each check returns ``(verdict, instances, numbers)``: the verdict (True when the claim holds on
every instance), the instances it was checked on (toy pairs of
[`hetero_pair`][spectheory.inputs.hetero_pairs.hetero_pair], named with their seed,
``draft_length`` and ``n_tokens``), and the exact numbers behind the verdict per instance.
[`claim_checks`][spectheory.lp.claims.hetero_checks.claim_checks] runs them all:

* ``2502.05202/slem-lossless``, ``/slrs-lossless``, ``/tli-lossless``: Timor et al.,
  arXiv 2502.05202, state that the three schemes preserve the target distribution;
* ``2502.05202/tli-acceptance-at-least-union``: TLI's first-token acceptance is at least the
  union-vocabulary baseline's;
* ``vllm-38174/tli-lossless``: vLLM #38174's rule (greedy drafting over the intersection, one-hot
  rejection sampling) is lossless.
"""

from __future__ import annotations

from fractions import Fraction

from spectheory.inputs.hetero_pairs import hetero_pair
from spectheory.verifiers.hetero import check_hetero_lossless, intersection

#: The instances the claim checks run on: (pair, seed).
CLAIM_INSTANCES = (("chars-vs-merges", 0), ("two-merge-sets", 1), ("crossed-bounds", 2),
                   ("three-letters", 3))


def _instances():
    for pair, seed in CLAIM_INSTANCES:
        yield f"{pair} (seed {seed}, draft_length 2, n_tokens 3)", \
            hetero_pair(pair, seed, draft_length=2, n_tokens=3)


def claim_lossless(scheme: str) -> tuple:
    """arXiv 2502.05202 (abstract and section 3): SLEM, SLRS and TLI "preserve the target
    distribution". Checked exactly (rationals) over ``n_tokens`` target tokens of repeated
    iterations; also run on ``"vllm-tli"`` (vLLM #38174's rule). Returns (verdict, instances,
    numbers): numbers maps each instance to (TV, target tokens per forward, characters per
    forward), exact."""
    numbers = {}
    ok = True
    for label, inst in _instances():
        rep = check_hetero_lossless(inst, scheme, exact=True)
        numbers[label] = (rep.tv, rep.tokens_per_forward, rep.chars_per_forward)
        ok = ok and rep.lossless
    return ok, [label for label, _ in _instances()], numbers


def claim_tli_at_least_union() -> tuple:
    """TLI's acceptance of its first drafted token, sum over the intersection of
    min(p(t), q(t) / q(intersection)), is at least the union-vocabulary baseline's
    (arXiv 2502.05202, Algorithm 1: sum over the intersection of min(p(t), q(t))); restated from
    secondary summaries of the paper's comparison of the two rules (the paper's own wording not
    consulted; it follows from q / q(I) >= q entrywise). Checked at every context of
    fewer than ``n_tokens`` target tokens. Returns (verdict, instances, numbers): the smallest
    margin (TLI minus baseline) per instance, exact."""
    numbers = {}
    ok = True
    for label, inst in _instances():
        inter = intersection(inst)
        worst = None
        contexts = [()]
        for _ in range(inst.n_tokens - 1):
            contexts += [c + (y,) for c in contexts if len(c) == len(contexts[-1])
                         for y in range(inst.target_tokenizer.size)]
        for c in contexts:
            p = list(inst.target.conditional(c))
            dctx = inst.draft_tokenizer.encode(inst.target_tokenizer.decode(c))
            q = list(inst.draft.conditional(dctx))
            mass = sum((q[d] for d in inter), Fraction(0))
            if not mass:
                continue
            tli = sum((min(p[x], q[d] / mass) for d, x in inter.items()), Fraction(0))
            union = sum((min(p[x], q[d]) for d, x in inter.items()), Fraction(0))
            worst = tli - union if worst is None else min(worst, tli - union)
        numbers[label] = worst
        ok = ok and (worst is None or worst >= 0)
    return ok, [label for label, _ in _instances()], numbers


def claim_checks() -> dict:
    """Every claim check: {claim id: (verdict, instances, numbers)}."""
    return {
        "2502.05202/slem-lossless": claim_lossless("slem"),
        "2502.05202/slrs-lossless": claim_lossless("slrs"),
        "2502.05202/tli-lossless": claim_lossless("tli"),
        "2502.05202/tli-acceptance-at-least-union": claim_tli_at_least_union(),
        "vllm-38174/tli-lossless": claim_lossless("vllm-tli"),
    }


__all__ = ["CLAIM_INSTANCES", "claim_checks", "claim_lossless", "claim_tli_at_least_union"]
