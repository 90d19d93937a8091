"""Toy tokenizer pairs with prefix-dependent models, for heterogeneous-vocabulary laws and figures.

Each pair is a target vocabulary and a draft vocabulary over one alphabet (both hold every single
character); [`hetero_pair`][spectheory.toy_models.hetero.hetero_pair] builds a
[`HeteroInstance`][spectheory.inputs.tokenizers.HeteroInstance] with random prefix-dependent
conditional tables (depth 2, read as order-2 chains beyond) whose rows are small integer weights
over their sum: exact rationals, with ties and zeros.

=================  ======================  ======================  ===========================
pair               target vocabulary       draft vocabulary        what it exercises
=================  ======================  ======================  ===========================
chars-vs-merges    a b ab                  a b                     character draft, a merge in
                                                                   the target
two-merge-sets     a b aa ab               a b ba bb               different merges, a small
                                                                   intersection
crossed-bounds     a b ab                  a b ba                  "aba" is ab|a for the
                                                                   target, a|ba for the draft
three-letters      a b c ab bc abc         a b c ca bc             longer tokens, alphabet abc
=================  ======================  ======================  ===========================

[`claim_checks`][spectheory.toy_models.hetero.claim_checks] evaluates the losslessness claims of
arXiv 2502.05202 (and vLLM #38174's port of TLI) on these pairs, each as (verdict, instance,
numbers).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from spectheory.inputs.models import TableModel
from spectheory.inputs.tokenizers import HeteroInstance, check_hetero_sizes, make_tokenizer
from spectheory.runtime.errors import InstanceError
from spectheory.verifiers.hetero import (check_hetero_lossless, intersection, slem_proposals,
                                         slrs_psi)

from .checks import check_seed

PAIRS = {
    "chars-vs-merges": ("ab", ("a", "b", "ab"), ("a", "b")),
    "two-merge-sets": ("ab", ("a", "b", "aa", "ab"), ("a", "b", "ba", "bb")),
    "crossed-bounds": ("ab", ("a", "b", "ab"), ("a", "b", "ba")),
    "three-letters": ("abc", ("a", "b", "c", "ab", "bc", "abc"), ("a", "b", "c", "ca", "bc")),
}


def _table_model(rng: np.random.Generator, V: int, depth: int, max_weight: int) -> TableModel:
    tables = []
    for d in range(depth + 1):
        t = np.empty((V**d, V), dtype=object)
        for n in range(V**d):
            w = rng.integers(1, max_weight + 1, size=V)
            zeros = np.flatnonzero(rng.random(V) < 0.15)
            w[zeros[:1]] = 0  # an exact zero in some rows, never more than one
            s = int(w.sum())
            for a in range(V):
                t[n, a] = Fraction(int(w[a]), s)
        tables.append(t)
    return TableModel(V, tuple(tables))


def hetero_pair(name: str = "crossed-bounds", seed: int = 0, draft_length: int = 2,
                n_tokens: int = 3, depth: int = 2, max_weight: int = 3) -> HeteroInstance:
    """A toy pair (`PAIRS`) with random prefix-dependent rational models (depth ``depth``, rows of
    integer weights in 1..``max_weight`` over their sum, at most one entry set to 0)."""
    if name not in PAIRS:
        raise InstanceError(f"unknown tokenizer pair {name!r}: choose one of {', '.join(PAIRS)}")
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= 3:
        raise InstanceError(f"depth = {depth!r} is out of range (0..3)")
    if isinstance(max_weight, bool) or not isinstance(max_weight, int) or not 1 <= max_weight <= 100:
        raise InstanceError(f"max_weight = {max_weight!r} is out of range (1..100)")
    alphabet, tv, dv = PAIRS[name]
    tt, dt = make_tokenizer(list(tv), alphabet, "target_vocab"), make_tokenizer(list(dv), alphabet,
                                                                                 "draft_vocab")
    check_hetero_sizes(tt.size, dt.size, draft_length, n_tokens)
    rng = np.random.default_rng(check_seed(seed))
    target = _table_model(rng, tt.size, depth, max_weight)
    draft = _table_model(rng, dt.size, depth, max_weight)
    return HeteroInstance(alphabet, tt, dt, target, draft, draft_length, n_tokens)


# ----------------------------------------------------------------------------- claims

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


def first_token_acceptance(inst: HeteroInstance, c: tuple = ()) -> dict:
    """Probability that the first proposed target token is accepted, per scheme, from context
    ``c``: SLEM sum_t p(t) P(t_1 = t); SLRS sum_t min(p(t), psi(t)); TLI
    sum_{t in I} min(p(t), q'(t)). Measured numbers (exact in exact mode), not a paper claim."""
    p = list(inst.target.conditional(c))
    z = Fraction(0) if inst.exact else 0.0
    first: dict = {}
    for t, w in slem_proposals(inst, c).items():
        first[t[0]] = first.get(t[0], z) + w
    slem = sum((p[t] * w for t, w in first.items()), z)
    slrs = sum((min(p[t], w) for t, w in slrs_psi(inst, c).items()), z)
    inter = intersection(inst)
    q = list(inst.draft.conditional(inst.draft_tokenizer.encode(inst.target_tokenizer.decode(c))))
    mass = sum((q[d] for d in inter), z)
    tli = sum((min(p[x], q[d] / mass) for d, x in inter.items()), z) if mass else z
    return {"slem": slem, "slrs": slrs, "tli": tli}


def claim_checks() -> dict:
    """Every claim check: {claim id: (verdict, instances, numbers)}."""
    return {
        "2502.05202/slem-lossless": claim_lossless("slem"),
        "2502.05202/slrs-lossless": claim_lossless("slrs"),
        "2502.05202/tli-lossless": claim_lossless("tli"),
        "2502.05202/tli-acceptance-at-least-union": claim_tli_at_least_union(),
        "vllm-38174/tli-lossless": claim_lossless("vllm-tli"),
    }


__all__ = ["CLAIM_INSTANCES", "PAIRS", "claim_checks", "claim_lossless",
           "claim_tli_at_least_union", "first_token_acceptance", "hetero_pair"]
