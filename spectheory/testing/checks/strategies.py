"""Hypothesis strategies for random and degenerate instances.

For property-based tests of verifiers, in this project's suite or yours:

```python
from hypothesis import given
from spectheory.testing import instances
from spectheory import check_lossless

@given(instances(max_vocab=3, max_block=3, exact=True))
def test_my_verifier_is_lossless(inst):
    assert check_lossless(my_verifier, inst).lossless
```

This is the only module of [`spectheory`][spectheory] that imports ``hypothesis`` (install the
``test`` extra: ``pip install spectheory[test]``).
[`make_instance`][spectheory.testing.checks.battery.make_instance] needs numpy only and is usable
without hypothesis from [`spectheory.testing.checks.battery`][spectheory.testing.checks.battery],
where it is defined.

Kinds of instance (`KINDS`), all prefix-dependent (a different conditional after every
prefix) unless named otherwise:

* ``dirichlet``: every row i.i.d. Dirichlet(alpha);
* ``context_independent``: one row for every prefix (many real bugs are invisible on these);
* ``sparse``: Dirichlet rows with about 40 % of the entries set to zero (never all of a row), so
  that one model has zeros where the other has mass;
* ``equal``: the draft equals the target at every node (p = q, everything accepted);
* ``onehot_target`` / ``onehot_draft``: one-hot (greedy) rows for one model;
* ``peaked``: Dirichlet(0.05) rows, nearly one-hot and dissimilar.

With ``denominator`` D every row is rounded to multiples of 1/D summing to exactly 1
([`quantize_rows`][spectheory.inputs.random_instances.quantize_rows]), giving exact Fractions.
"""

from __future__ import annotations

from hypothesis import strategies as st

from .battery import KINDS, make_instance


@st.composite
def instances(draw, max_vocab=4, max_block=4, max_leaves=1024, exact=False, kinds=KINDS):
    """Strategy for instances: V in 2..max_vocab, L in 1..max_block with V**(L+1) <= max_leaves,
    a kind from ``kinds``, alpha in {0.2, 0.5, 1, 4}; exact Fractions (denominator in
    {2, 3, 4, 6, 12}) when ``exact``."""
    V = draw(st.integers(2, max_vocab))
    Lmax = max_block
    while Lmax > 1 and V ** (Lmax + 1) > max_leaves:
        Lmax -= 1
    L = draw(st.integers(1, Lmax))
    kind = draw(st.sampled_from(kinds))
    seed = draw(st.integers(0, 2**31 - 1))
    alpha = draw(st.sampled_from([0.2, 0.5, 1.0, 4.0]))
    denominator = draw(st.sampled_from([2, 3, 4, 6, 12])) if exact else None
    return make_instance(kind, V, L, seed, alpha, denominator)


__all__ = ["KINDS", "instances", "make_instance"]
