"""Toy tokenizer pairs with prefix-dependent models, for heterogeneous-vocabulary laws, sweeps and
figures (kept in the core, as [`random_instances`][spectheory.inputs.random_instances] is, so that
the claim checks of [`spectheory.lp.claims.hetero_checks`][spectheory.lp.claims.hetero_checks] can build them).

Each pair is a target vocabulary and a draft vocabulary over one alphabet (both hold every single
character); [`hetero_pair`][spectheory.inputs.hetero_pairs.hetero_pair] builds a
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

"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..runtime.errors import InstanceError, is_integer
from ..runtime.sizes import check_size
from .models import TableModel
from .tokenizers import HeteroInstance, check_hetero_sizes, make_tokenizer
from ..runtime.limits import shown as _repr_cut

PAIRS = {
    "chars-vs-merges": ("ab", ("a", "b", "ab"), ("a", "b")),
    "two-merge-sets": ("ab", ("a", "b", "aa", "ab"), ("a", "b", "ba", "bb")),
    "crossed-bounds": ("ab", ("a", "b", "ab"), ("a", "b", "ba")),
    "three-letters": ("abc", ("a", "b", "c", "ab", "bc", "abc"), ("a", "b", "c", "ca", "bc")),
}


def random_rational_model(rng: np.random.Generator, V: int, depth: int,
                          max_weight: int) -> TableModel:
    """Exact tables to ``depth``: each row integer weights in 1..``max_weight`` (at most one set to
    0) over their sum. The sizes are checked first: V and ``max_weight`` integers >= 1, and the
    V^(depth+1) exact entries within the exact engine's limit."""
    if not isinstance(rng, np.random.Generator):
        raise InstanceError(f"random_rational_model: rng = {_repr_cut(rng, 40)} is not a numpy Generator "
                            "(np.random.default_rng(seed))")
    for name, n, lo, hi in (("V", V, 1, None), ("depth", depth, 0, None),
                            ("max_weight", max_weight, 1, 2**62)):
        if not is_integer(n) or n < lo or (hi is not None and n > hi):
            raise InstanceError(f"random_rational_model: {name} = {_repr_cut(n, 40)} must be an integer "
                                f">= {lo}" + (f" and <= 2^62" if hi is not None else ""))
    check_size(V ** (depth + 1), "random_rational_model", exact=True,
               formula=f"V^(depth+1) = {V}^{depth + 1}")
    tables = []
    for d in range(depth + 1):
        t = np.empty((V**d, V), dtype=object)
        for n in range(V**d):
            w = rng.integers(1, max_weight + 1, size=V)
            zeros = np.flatnonzero(rng.random(V) < 0.15)
            if V > 1:  # an exact zero in some rows, never more than one (nor the only entry)
                w[zeros[:1]] = 0
            s = int(w.sum())
            for a in range(V):
                t[n, a] = Fraction(int(w[a]), s)
        tables.append(t)
    return TableModel(V, tuple(tables))


def hetero_pair(name: str = "crossed-bounds", seed: int = 0, draft_length: int = 2,
                n_tokens: int = 3, depth: int = 2, max_weight: int = 3) -> HeteroInstance:
    """A toy pair (`PAIRS`) with random prefix-dependent rational models (depth ``depth``, rows of
    integer weights in 1..``max_weight`` over their sum, at most one entry set to 0)."""
    if not isinstance(name, str) or name not in PAIRS:
        raise InstanceError(f"unknown tokenizer pair {_repr_cut(name, 40)}: choose one of "
                            f"{', '.join(PAIRS)}")
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= 3:
        raise InstanceError(f"depth = {depth!r} is out of range (0..3)")
    if isinstance(max_weight, bool) or not isinstance(max_weight, int) or not 1 <= max_weight <= 100:
        raise InstanceError(f"max_weight = {max_weight!r} is out of range (1..100)")
    alphabet, tv, dv = PAIRS[name]
    tt, dt = make_tokenizer(list(tv), alphabet, "target_vocab"), make_tokenizer(list(dv), alphabet,
                                                                                 "draft_vocab")
    check_hetero_sizes(tt.size, dt.size, draft_length, n_tokens)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InstanceError(f"seed must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng(int(seed))
    target = random_rational_model(rng, tt.size, depth, max_weight)
    draft = random_rational_model(rng, dt.size, depth, max_weight)
    return HeteroInstance(alphabet, tt, dt, target, draft, draft_length, n_tokens)


__all__ = ["PAIRS", "hetero_pair", "random_rational_model"]
