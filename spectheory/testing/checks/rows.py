"""The rows a sampler check hands over: the kit's default instances and fixed draft rows.

[`default_instances`][spectheory.testing.checks.rows.default_instances] (prefix-dependent rows,
zeros, ties), `_fixed_rows` (draft rows drawn from an instance's draft model, or given as
[`DraftRows`][spectheory.testing.checks.report.DraftRows]) and `_dims` (an instance's sizes, without
building anything).
"""

from __future__ import annotations

import numpy as np
from ...runtime._lazy import torch

from ...runtime.errors import SpectheoryError
from ...inputs.instances import Instance, bad_float_row
from ...inputs.models import prefix_from_index
from ...engine.joint import draft_rows as _rows_along
from ...engine.sampling import sample_drafts
from ...inputs.random_instances import random_instance
from ...engine.seqtree import levels
from .report import DraftRows
from ...runtime.limits import shown as _repr_cut


def _zeroed_instance(V: int, L: int, seed: int) -> Instance:
    """Prefix-dependent Dirichlet tables with about 40% of the entries zeroed (never a whole row),
    so each model has zeros where the other has mass."""
    from ...inputs.models import TableModel

    rng = np.random.default_rng(seed)

    def tables(depth):
        out = []
        for d in range(depth + 1):
            rows = rng.dirichlet(np.ones(V), size=V**d)
            mask = rng.random(rows.shape) < 0.4
            mask[np.arange(len(rows)), rng.integers(0, V, len(rows))] = False
            rows = np.where(mask, 0.0, rows)
            out.append(rows / rows.sum(axis=1, keepdims=True))
        return TableModel(V, tuple(out))

    target = tables(L)
    return Instance(V, L, target, tables(L - 1))


def _equal_at_some_nodes(V: int, L: int, seed: int) -> Instance:
    """Prefix-dependent random tables where the draft copies the target at every other node
    (root included): every token ties in p/q there, as multi-draft selection rules must handle."""
    from ...inputs.models import TableModel

    base = random_instance(V, L, seed)
    draft = []
    for d in range(L):
        q = base.draft.level(d).copy()
        q[0::2] = base.target.level(d)[0::2]
        draft.append(q)
    return Instance(V, L, base.target, TableModel(V, tuple(draft)))


#: Sampler check modes ([`check_sampler`][spectheory.testing.checks.sampler.check_sampler]).
MODES = ("law", "lossless", "coins", "coins-tau")


def default_instances(mode: str = "law") -> list:
    """The default instances, all with prefix-dependent rows (a different conditional after
    every prefix) and V >= 3, L >= 3: ``random_instance(3, 3, 11)``, ``random_instance(4, 3, 12,
    alpha=0.5)``, a V = 4, L = 3 instance with about 40% zeros in both models (so each model has
    zeros where the other has mass), and a V = 3, L = 3 instance whose draft equals the target at
    every other node (ties in p/q). The same set serves every mode; ``mode`` must be one of
    `MODES`."""
    if not isinstance(mode, str) or mode not in MODES:
        raise SpectheoryError(f"default_instances: mode = {_repr_cut(mode, 40)} is not one of "
                              f"{', '.join(MODES)}")
    return [random_instance(3, 3, 11), random_instance(4, 3, 12, alpha=0.5),
            _zeroed_instance(4, 3, 13), _equal_at_some_nodes(3, 3, 14)]


def _row_tensor(x, name: str):
    """One array of given draft rows as a tensor: exact entries (numpy object arrays of
    Fractions) read as the float64 values they round to, else a one-line error naming it."""
    if isinstance(x, np.ndarray) and x.dtype == object:
        try:
            x = x.astype(np.float64)
        except (TypeError, ValueError, OverflowError):
            raise SpectheoryError(f"draft rows: {name} is an object array whose entries are not "
                                  "all numbers") from None
    try:
        return torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise SpectheoryError(f"draft rows: {name} is a {type(x).__name__} that is not a "
                              f"numeric array ({' '.join(str(exc).split())[:80]})") from None


def _fixed_rows(inst, K: int, drafting: str, rows: int, generator) -> DraftRows:
    """DraftRows in K-path form from an Instance (rows drafted from its draft model) or given."""
    if isinstance(inst, DraftRows) or (isinstance(inst, tuple) and len(inst) == 3):
        d, q, p = (_row_tensor(x, name) for x, name in zip(inst, ("drafts", "q", "p")))
        if d.dim() == 2:
            d, q, p = d.unsqueeze(1), q.unsqueeze(1), p.unsqueeze(1)
        if d.dim() != 3 or q.dim() != 4 or p.dim() != 4 or q.shape[:3] != d.shape or \
                p.shape[:2] != d.shape[:2] or p.shape[2] != d.shape[2] + 1 or \
                p.shape[3] != q.shape[3]:
            raise SpectheoryError(f"draft rows of shapes drafts {list(d.shape)}, q "
                                  f"{list(q.shape)}, p {list(p.shape)} do not fit drafts [B, L], "
                                  f"q [B, L, V], p [B, L+1, V] (or with a path axis K)")
        if d.shape[1] != K:
            raise SpectheoryError(f"draft rows have {d.shape[1]} paths; the check is for {K}")
        if d.shape[0] == 0 or q.shape[-1] == 0:
            raise SpectheoryError(f"draft rows of shapes drafts {list(d.shape)}, q "
                                  f"{list(q.shape)}: no rows to check (a batch of B >= 1 rows "
                                  "of V >= 1 tokens)")
        _check_draft_rows(d, q, p)
        return DraftRows(d.detach().to(torch.long), _as_law(q), _as_law(p))
    if not isinstance(inst, Instance):
        raise SpectheoryError(f"an instance must be a spectheory Instance or DraftRows, not "
                              f"{type(inst).__name__}")
    inst = inst.to_float()
    V, L = inst.vocab_size, inst.block_length
    d = sample_drafts(inst, K, rows, drafting, generator)
    ql = levels(inst.draft, 0, L, False)
    pl = levels(inst.target, 0, L + 1, False)
    q, p = _rows_along(ql, pl, d, L, V)
    return DraftRows(d, q, p)


#: How far from 1 a row of given draft rows may sum: float64 and float32 rows (a float32 softmax
#: over 151,936 tokens sums to 1 within about 5e-7), and rows given in a lower precision (a
#: softmax rounded to bfloat16 or float16 is off by up to a few 1e-4).
DRAFT_ROW_TOL = {"torch.float64": 1e-6, "torch.float32": 1e-6}  # by dtype name: torch loads lazily
DRAFT_ROW_TOL_LOW = 1e-3


def _as_law(rows):
    """Given rows in float64: float64 and float32 rows as given (within `DRAFT_ROW_TOL` of
    summing to 1), float16 and bfloat16 rows divided by their sums, the distributions they round
    (off 1 by up to a few 1e-4): the sampler and the reference law then read the same law."""
    wide = rows.detach().to(torch.float64)  # rows that require grad: their values (the kit's
    # own samplers read them through numpy)
    if str(rows.dtype) in DRAFT_ROW_TOL:
        return wide
    return wide / wide.sum(-1, keepdim=True)


def _check_draft_rows(d, q, p) -> None:
    """Refuse in one line given draft rows ``d [B, K, L]``, ``q [B, K, L, V]``, ``p [B, K, L+1,
    V]`` that cannot be a sampler's input: drafts that are not integer token ids in 0..V-1, and
    rows that are not distributions (a non-finite or negative entry, or a sum off 1 by more than
    `DRAFT_ROW_TOL`). A check would otherwise compare the sampler with a "law" computed from
    them and report the sampler as failing for the rows' fault."""
    V = int(q.shape[-1])
    for name, t in (("drafts", d), ("q", q), ("p", p)):
        if t.device.type == "meta":  # int(d.min()) raised torch's own RuntimeError
            raise SpectheoryError(f"draft rows: {name} is on the meta device, which holds no "
                                  "values")
    if d.is_floating_point() or d.is_complex() or d.dtype == torch.bool:
        raise SpectheoryError(f"draft rows: drafts are {d.dtype}; draft tokens are integer ids")
    if d.numel() and (int(d.min()) < 0 or int(d.max()) >= V):
        b, k, i = (int(x) for x in torch.nonzero((d < 0) | (d >= V))[0])
        raise SpectheoryError(f"draft rows: the drafted token {int(d[b, k, i])} (row {b}, path "
                              f"{k}, position {i}) is outside 0..{V - 1}")
    for name, t in (("q", q), ("p", p)):
        if t.is_complex() or t.dtype == torch.bool:
            raise SpectheoryError(f"draft rows: {name} is {t.dtype}, not real probabilities")
        # a lower precision's rounding: each entry within eps/2 of its value, so the row's sum
        # within eps/2 of 1 (bfloat16: 2^-8; a softmax rounded to it summed to 0.998)
        tol = DRAFT_ROW_TOL.get(str(t.dtype),
                                max(DRAFT_ROW_TOL_LOW, torch.finfo(t.dtype).eps / 2)
                                if t.is_floating_point() else DRAFT_ROW_TOL_LOW)
        x = t.to(torch.float64)
        finite = torch.isfinite(x).all(-1)
        negative = (x < 0).any(-1)
        off = (x.sum(-1) - 1).abs() > tol
        bad = ~finite | negative | off
        if bool(bad.any()):
            b, k, i = (int(v) for v in torch.nonzero(bad)[0])
            why = ("has a non-finite entry" if not bool(finite[b, k, i]) else
                   "has a negative entry" if bool(negative[b, k, i]) else
                   f"sums to {float(x[b, k, i].sum()):.9g}, not 1 within {tol:g}")
            raise SpectheoryError(f"draft rows: the {name} row of row {b}, path {k}, position {i} "
                                  f"{why}; every row must be a distribution")
    if d.numel():  # a token its own row gives probability 0 cannot have been drafted from it
        drafted = q.to(torch.float64).gather(-1, d.to(torch.long).unsqueeze(-1)).squeeze(-1)
        if bool((drafted <= 0).any()):
            b, k, i = (int(v) for v in torch.nonzero(drafted <= 0)[0])
            raise SpectheoryError(f"draft rows: the drafted token {int(d[b, k, i])} (row {b}, "
                                  f"path {k}, position {i}) has probability 0 in its q row: it "
                                  f"cannot have been drafted from it")


def _dims(inst) -> tuple[int | None, int, int]:
    """(rows or None for a table instance, L, V) of an instance or DraftRows, without
    building anything."""
    if isinstance(inst, Instance):
        return None, inst.block_length, inst.vocab_size
    if not (isinstance(inst, DraftRows) or (isinstance(inst, tuple) and len(inst) == 3)):
        raise SpectheoryError(f"an instance must be a spectheory Instance or DraftRows, not "
                              f"{type(inst).__name__}")
    d, q = (x if hasattr(x, "shape") else _row_tensor(x, name)  # lists: read as _fixed_rows does
            for x, name in zip(inst[:2], ("drafts", "q")))
    if len(d.shape) < 1 or len(q.shape) < 1:
        raise SpectheoryError(f"draft rows of shapes drafts {list(d.shape)}, q {list(q.shape)} "
                              f"do not fit drafts [B, L], q [B, L, V] (or with a path axis K)")
    return int(d.shape[0]), int(d.shape[-1]), int(q.shape[-1])


def bad_row(instance: Instance, sums: bool = False):
    """The first float row of an instance built in Python that is not a distribution: a
    non-finite or negative entry (and, with ``sums``, a sum off 1 by more than 1e-6,
    ``PYTHON_ROW_TOL``; `spectheory.inputs.instances.bad_float_row`). Returns
    ``(model, depth, prefix, row)`` ("target" or "draft", the row [V]) or None. Files are
    checked when read; a check refuses such an instance before it computes a law from it."""
    V = instance.vocab_size
    for which, model in (("target", instance.target), ("draft", instance.draft)):
        for d, table in enumerate(getattr(model, "tables", ())):
            if not (isinstance(table, np.ndarray) and table.dtype.kind == "f"):
                continue
            found = bad_float_row(table, sums)  # the instance check's test of float rows
            if found is not None:
                row = found[0]
                return which, d, prefix_from_index(row, d, V), table[row]
    return None

