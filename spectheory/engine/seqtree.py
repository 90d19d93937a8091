"""The sequence tree as arrays: level d holds the V**d prefixes of length d in lexicographic order.

Everything is vectorised by level (no Python loop per node): path probabilities are built by
``P_{d+1} = (P_d[:, None] * cond_d).reshape(-1)``, and the prefix of length i of the sequence with
index n at depth d has index ``n // V**(d - i)``. Sizes are guarded before anything is allocated
([`check_size`][spectheory.runtime.sizes.check_size]).
"""

from __future__ import annotations

import numpy as np
from ..runtime._lazy import is_tensor, torch

from ..inputs.models import TableModel
from ..runtime.limits import shown as _repr_cut


def levels(model: TableModel, start: int, count: int, exact: bool, device="cpu",
           backend: str = "torch"):
    """Conditional tables at depths start..start+count-1 as backend arrays.

    ``levels(m, n, k)[d]`` has shape [V**(n+d), V]: for every context of length n, the
    conditionals after each of its relative prefixes of length d (flat index ctx*V**d + rel).
    Exact: numpy object arrays of Fractions. Float: float64 torch tensors on ``device``, or with
    ``backend="numpy"`` float64 numpy arrays (on the CPU, without importing torch; see
    [`float_backend`][spectheory.engine.plan.float_backend]).
    """
    model = model.to_exact() if exact else model.to_float()
    _check_copies(model, start, count)
    if exact:
        check_exact_device(device)
        return [np.ascontiguousarray(model.level(d)) for d in range(start, start + count)]
    if backend == "numpy":
        if str(device) != "cpu":
            raise ValueError(f"numpy levels are on the CPU, not on device {device!r}")
        return [np.ascontiguousarray(model.level(d), dtype=np.float64)
                for d in range(start, start + count)]
    if backend != "torch":
        raise ValueError(f"unknown float backend {backend!r}; choose from torch, numpy")
    device = check_device(device)
    return [model.torch_level(d, device=device) for d in range(start, start + count)]


def _check_copies(model, start: int, count: int) -> None:
    """Refuse at once the levels that `levels` would build past the model's tables (a
    context-independent model's broadcast rows copied out, or a deeper model's rows repeated:
    V^(d+1) entries each) when together they exceed the memory bound: each was checked alone as
    it was built, so V = 1000, L = 4 built levels 0-2 (8 GB, 5-20 s) before level 3 (7.28 TiB)
    was refused. Read off the model's depth; no level is built here."""
    from ..runtime.limits import check_memory

    ends = [d for d in range(start, start + count) if d > model.depth]
    if ends:
        V = model.vocab_size
        check_memory(sum(V ** (d + 1) for d in ends) * (100 if model.exact else 8),
                     f"levels {ends[0]}..{ends[-1]} of a depth-{model.depth} model as tables "
                     f"(V^(d+1) entries each, V = {V})")


def check_exact_device(device) -> None:
    """Exact rationals compute on numpy arrays of Fractions on the CPU: a ``device`` other than
    the CPU (``"cpu"``, ``"cpu:N"`` or its torch.device) would do nothing there, and a name that
    is no device at all would pass unread, so both are refused (SpectheoryError)."""
    from ..runtime.errors import SpectheoryError

    if str(device).split(":")[0] != "cpu":
        raise SpectheoryError(f"device {_repr_cut(str(device), 60)} is for float analyses on torch; exact "
                              "rationals compute on numpy arrays on the CPU (leave device out, "
                              "or analyse in float)")


def check_device(device) -> torch.device:
    """A torch device that exists here ("cpu", "cuda", "cuda:0", ...), else SpectheoryError."""
    from ..runtime.errors import SpectheoryError

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise SpectheoryError(f"device {_repr_cut(device, 40)} is not a torch device (e.g. 'cpu', "
                              "'cuda', 'cuda:0')") from None
    if dev.type == "meta":
        raise SpectheoryError(f"device {device!r} holds shapes and no values; the exact law is "
                              "computed on 'cpu' or 'cuda'")
    if dev.type == "cuda" and (not torch.cuda.is_available()
                               or (dev.index or 0) >= torch.cuda.device_count()):
        raise SpectheoryError(f"device {device!r} is not available here (CUDA devices: "
                              f"{torch.cuda.device_count()})")
    return dev


def path_probabilities(cond_levels, roots):
    """Probabilities of all paths below each root, level by level.

    ``cond_levels[d]`` ``[R*V**d, V]`` are conditionals below R roots with masses ``roots``
    ``[R]``. Returns a list P with ``P[d]`` ``[R*V**d]`` for d = 0..len(cond_levels).
    """
    out = [roots]
    for cond in cond_levels:
        prev = out[-1]
        out.append((prev.reshape(-1, 1) * cond).reshape(-1))
    return out


def sequence_tokens(flat_index, depth: int, vocab_size: int):
    """Token ids [B, depth] of sequences given their flat indices (contexts ignored: n mod V**d)."""
    if is_tensor(flat_index):
        powers = vocab_size ** torch.arange(depth - 1, -1, -1, device=flat_index.device)
        return (flat_index[:, None] // powers[None, :]) % vocab_size
    powers = vocab_size ** np.arange(depth - 1, -1, -1, dtype=np.int64)
    return (np.asarray(flat_index)[:, None] // powers[None, :]) % vocab_size


def sample_paths(cond_levels, n: int, generator: torch.Generator | None = None):
    """Sample n paths of length len(cond_levels) from one root; returns token ids [n, depth].

    ``cond_levels[d]`` [V**d, V] torch tensors (as from [`levels`][spectheory.engine.seqtree.levels] with
    start 0).
    """
    node = torch.zeros(n, dtype=torch.long, device=cond_levels[0].device)
    tokens = []
    for cond in cond_levels:
        V = cond.shape[-1]
        x = torch.multinomial(cond[node], 1, generator=generator)[:, 0]
        tokens.append(x)
        node = node * V + x
    return torch.stack(tokens, dim=1)


def path_conditionals(cond_levels, paths, depth: int):
    """Conditionals at every node along given paths: [B, depth, V].

    ``cond_levels[j]`` [V**j, V] (from the root); ``paths`` [B, >= depth - 1] token ids; row j
    is the conditional after the path's first j tokens, for j = 0..depth-1.
    """
    V = cond_levels[0].shape[-1]
    node = paths[:, 0] * 0
    rows = []
    for j in range(depth):
        rows.append(cond_levels[j][node])
        if j < depth - 1:
            node = node * V + paths[:, j]
    if is_tensor(rows[0]):
        return torch.stack(rows, dim=1)
    return np.stack(rows, axis=1)
