"""Random and degenerate instances for property-based tests (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from spectheory.instances import Instance
from spectheory.models import TableModel
from spectheory.random_instances import quantize_rows

KINDS = ["dirichlet", "context_independent", "sparse", "equal", "onehot_target", "onehot_draft",
         "peaked"]


def _tables(rng, V, depth, alpha, kind, ci=False):
    out = []
    for d in range(1 if ci else depth + 1):
        rows = rng.dirichlet(np.full(V, alpha), size=V**d)
        if kind == "sparse":
            mask = rng.random(rows.shape) < 0.4
            mask[np.arange(len(rows)), rng.integers(0, V, len(rows))] = False
            rows = np.where(mask, 0.0, rows)
        rows = rows / rows.sum(axis=1, keepdims=True)
        out.append(rows)
    return out


def _onehot(rng, V, depth):
    return [np.eye(V)[rng.integers(0, V, V**d)] for d in range(depth + 1)]


def make_instance(kind: str, V: int, L: int, seed: int, alpha: float = 1.0,
                  denominator: int | None = None) -> Instance:
    rng = np.random.default_rng(seed)
    ci = kind == "context_independent"
    a = 0.05 if kind == "peaked" else alpha
    target = _onehot(rng, V, L) if kind == "onehot_target" else _tables(rng, V, L, a, kind, ci)
    if kind == "equal":
        draft = [t.copy() for t in target[:L]] if not ci else [target[0].copy()]
    elif kind == "onehot_draft":
        draft = _onehot(rng, V, L - 1)
    else:
        draft = _tables(rng, V, L - 1, a, kind, ci)
    if denominator:
        conv = lambda ts: tuple(quantize_rows(t, denominator) for t in ts)  # noqa: E731
        tt = conv(target)
        dt = tt[:L] if kind == "equal" else conv(draft)
        return Instance(V, L, TableModel(V, tt), TableModel(V, dt))
    return Instance(V, L, TableModel(V, tuple(target)), TableModel(V, tuple(draft)))


@st.composite
def instances(draw, max_vocab=4, max_block=4, max_leaves=1024, exact=False, kinds=KINDS):
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
