"""A battery of small instances built to expose the known classes of lossiness bugs.

A verifier that is lossless on one convenient instance can still be wrong: many real bugs in serving
engines only show on some shapes of input.
[`default_battery`][spectheory.testing.checks.battery.default_battery] returns named instances, each
aimed at one such class:

=========================  =====================================================================
instance                   what it exposes
=========================  =====================================================================
``two-token``              the two-token example of Sun et al. (arXiv 2403.10444): p = (1/3, 2/3),
                           q = (2/3, 1/3), L = 2; a wrong residual or acceptance rule shows at once
``prefix-dependent``       a different conditional after every prefix (V = 3, L = 3): a target or
                           draft row read at the wrong position (off-by-one rows, residual mass
                           of the previous position) is invisible on context-independent rows
``zeros``                  each model has zeros where the other has mass (a draft of target
                           probability zero must be rejected; a token the draft never proposes
                           must come from the residual); a coin of exactly 0 or 1 matters
``p=q-some-nodes``         the draft equals the target at some nodes only (certain acceptance
                           there, a residual of mass zero, a 0/0 in the correction)
``one-hot-target``         greedy (one-hot) target rows: block and token verification coincide
``one-hot-draft``          greedy (one-hot) draft rows: a draft handed as soft q but sampled
                           greedily is another law
``peaked``                 nearly one-hot, dissimilar rows (V = 4): low acceptance, tiny ratios
``ties``                   p/q equal for two tokens at a node (p = (1/4, 3/8, 3/8),
                           q = (1/2, 1/4, 1/4)): tie-breaking rules of multi-path selection
=========================  =====================================================================

All rows are exact rationals (multiples of 1/12 or 1/24), so the verdict of
[`check_lossless`][spectheory.engine.lossless.check_lossless] is exact; ``exact=False`` returns the same
instances in float64. Sizes shrink with the number of paths K so that the whole battery stays quick:
at most ``MAX_JOINT_DRAFTS`` joint draft outcomes V**(L K) per instance.

[`make_instance`][spectheory.testing.checks.battery.make_instance] builds the random kinds of
instance (`KINDS`) used here and by the hypothesis strategies of
[`spectheory.testing.checks.strategies`][spectheory.testing.checks.strategies].
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ...runtime.errors import InstanceError, OptionError, SpectheoryError, check_flag
from ...runtime.sizes import check_size
from ...inputs.instances import Instance, instance_from_dict
from ...inputs.models import TableModel
from ...inputs.instances import MAX_BLOCK, MAX_VOCAB
from ...inputs.random_instances import (MAX_DENOMINATOR, check_alpha, check_integer, check_seed,
                                        quantize_rows)
from ...runtime.limits import shown as _repr_cut

#: The kinds of instance [`make_instance`][spectheory.testing.checks.battery.make_instance] builds
#: (see [`spectheory.testing.checks.strategies`][spectheory.testing.checks.strategies]).
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
    """One instance of a given kind (see `KINDS`).

    Parameters
    ----------
    kind : str
        One of `KINDS`.
    V, L : int
        Vocabulary size and block length (target rows to depth L, draft rows to depth L-1).
    seed : int
        Seed of ``numpy.random.default_rng``.
    alpha : float
        Dirichlet concentration (``peaked`` uses 0.05).
    denominator : int, optional
        Round every row to exact multiples of 1/denominator (exact Fractions).
    """
    if not isinstance(kind, str) or kind not in KINDS:
        raise OptionError(f"make_instance: kind = {_repr_cut(kind, 40)} is not one of {', '.join(KINDS)}")
    try:  # the ranges of random_instance, each checked before anything is drawn
        V = check_integer(V, "make_instance: V", 2, MAX_VOCAB)
        L = check_integer(L, "make_instance: L", 1, MAX_BLOCK)
        seed = check_seed(seed, "make_instance: seed")
        alpha = check_alpha(alpha, "make_instance: alpha")
        if denominator is not None:
            denominator = check_integer(denominator, "make_instance: denominator", 1,
                                        MAX_DENOMINATOR)
    except InstanceError as exc:
        raise OptionError(str(exc)) from None
    ci = kind == "context_independent"
    if not ci:  # the deepest target table holds V^(L+1) entries: bounded before it is drawn
        check_size(V ** (L + 1), f"make_instance({kind!r})", exact=bool(denominator),
                   formula=f"V^(L+1) = {V}^{L + 1}")
    rng = np.random.default_rng(seed)
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



#: Largest number of joint draft outcomes V**(L K) of one battery instance.
MAX_JOINT_DRAFTS = 1024


@dataclass(frozen=True)
class BatteryInstance:
    """A named instance of the battery and the bug class it is built to expose."""

    name: str
    instance: Instance
    exposes: str

    def __str__(self) -> str:
        i = self.instance
        return f"{self.name} (V = {i.vocab_size}, L = {i.block_length})"


def _ci(p, q, L) -> Instance:
    return instance_from_dict({"vocab_size": len(p), "block_length": L, "target": p, "draft": q},
                              exact=True)


def _equal_at_some_nodes(V: int, L: int, seed: int, denominator: int) -> Instance:
    """Prefix-dependent rows; the draft copies the target at every other node (root included)."""
    base = make_instance("dirichlet", V, L, seed, 1.0, denominator)
    draft = []
    for d in range(L):
        t, q = base.target.level(d), base.draft.level(d).copy()
        q[0::2] = t[0::2]
        draft.append(q)
    return Instance(V, L, base.target, TableModel(V, tuple(draft)))


def _zeros(V: int, L: int, seed: int, denominator: int) -> Instance:
    """Prefix-dependent rows with exactly one zero in every row of both models: at the node of
    index n (lexicographic, per depth) the target is zero at token n mod V and the draft at token
    (n + 1) mod V, so at every node each model has a zero where the other has mass, and the zero
    moves from node to node. Other entries are random multiples of 1/denominator, at least
    1/denominator each."""
    rng = np.random.default_rng(seed)

    def tables(depth, shift):
        out = []
        for d in range(depth + 1):
            n = V**d
            counts = np.zeros((n, V), dtype=np.int64)
            for r in range(n):
                cols = [c for c in range(V) if c != (r + shift) % V]
                counts[r, cols] = 1 + rng.multinomial(denominator - len(cols),
                                                      rng.dirichlet(np.ones(len(cols))))
            out.append(np.vectorize(lambda c: Fraction(int(c), denominator),
                                    otypes=[object])(counts))
        return tuple(out)

    return Instance(V, L, TableModel(V, tables(L, 0)), TableModel(V, tables(L - 1, 1)))


def _size(paths: int, candidates) -> tuple[int, int]:
    """The first (V, L) of ``candidates`` with V**(L K) <= MAX_JOINT_DRAFTS."""
    for V, L in candidates:
        if V ** (L * paths) <= MAX_JOINT_DRAFTS:
            return V, L
    return candidates[-1]


def default_battery(paths: int = 1, exact: bool = True) -> list[BatteryInstance]:
    """Named instances built to expose the known bug classes (see the module docstring).

    Parameters
    ----------
    paths : int
        Number of draft paths K the battery is for. K = 1 gets V = 3, L = 3 (V = 4 for
        ``peaked``); larger K smaller sizes, so that each instance has at most
        `MAX_JOINT_DRAFTS` joint draft outcomes V**(L K) (for K > 1 ``prefix-dependent``
        has V = 3, L = 2: its dense rationals make exact K-path laws slow at L = 3; ``zeros``
        keeps L = 3 for K = 2).
    exact : bool
        Exact Fractions (default) or the same instances in float64.

    Returns
    -------
    list of BatteryInstance
        ``name``, ``instance``, ``exposes`` (one line).
    """
    from ...engine.plan import MAX_PATHS

    exact = check_flag(exact, "exact")
    if isinstance(paths, bool) or not isinstance(paths, int) or not 1 <= paths <= MAX_PATHS:
        raise SpectheoryError(f"paths = {_repr_cut(paths, 40)} must be an integer in 1..{MAX_PATHS} (the "
                              "K-path engine's limit)")
    big = _size(paths, [(3, 3), (3, 2), (3, 1), (2, 2), (2, 1)])
    mid = _size(paths, [(3, 2), (2, 2), (3, 1), (2, 1)])
    peaked = _size(paths, [(4, 3), (4, 2), (4, 1), (3, 1), (2, 1)])
    two = _size(paths, [(2, 2), (2, 1)])
    items = [
        BatteryInstance("two-token", _ci(["1/3", "2/3"], ["2/3", "1/3"], two[1]),
                        "the two-token example of arXiv 2403.10444 (context-independent)"),
        BatteryInstance("prefix-dependent",
                        make_instance("dirichlet", *(big if paths == 1 else mid), 3, 1.0, 12),
                        "rows read at the wrong position (off-by-one target rows, residual "
                        "mass of the previous position)"),
        BatteryInstance("zeros", _zeros(*big, seed=5, denominator=12),
                        "zeros where the other model has mass (coins of 0 or 1, residuals "
                        "that must hold unproposed tokens)"),
        BatteryInstance("p=q-some-nodes", _equal_at_some_nodes(*mid, seed=7, denominator=12),
                        "p = q at some nodes only (residual of mass zero there)"),
        BatteryInstance("one-hot-target", make_instance("onehot_target", *mid, 11, 1.0, 12),
                        "greedy target rows"),
        BatteryInstance("one-hot-draft", make_instance("onehot_draft", *mid, 13, 1.0, 12),
                        "greedy draft rows"),
        BatteryInstance("peaked", make_instance("dirichlet", *peaked, 17, 0.2, 24),
                        "nearly one-hot, dissimilar rows (low acceptance)"),
        BatteryInstance("ties", _ci(["1/4", "3/8", "3/8"], ["1/2", "1/4", "1/4"], mid[1]),
                        "equal ratios p/q for two tokens (tie-breaking of multi-path "
                        "selection)"),
    ]
    if not exact:
        items = [BatteryInstance(b.name, b.instance.to_float(), b.exposes) for b in items]
    return items


__all__ = ["BatteryInstance", "KINDS", "MAX_JOINT_DRAFTS", "default_battery", "make_instance"]
