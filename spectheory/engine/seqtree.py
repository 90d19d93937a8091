"""The sequence tree as arrays: level d holds the V**d prefixes of length d in lexicographic order.

Everything is vectorised by level (no Python loop per node): path probabilities are built by
``P_{d+1} = (P_d[:, None] * cond_d).reshape(-1)``, and the prefix of length i of the sequence with
index n at depth d has index ``n // V**(d - i)``. Sizes are guarded before anything is allocated.
"""

from __future__ import annotations

import numpy as np
from ._lazy import is_tensor, torch

from . import limits
from .errors import SizeLimitError
from .models import TableModel

#: Default limit on the number of leaves an enumeration may touch (float64 mode); the environment
#: variable SPECTHEORY_MAX_SEQUENCES overrides it (read on use:
#: [`max_sequences`][spectheory.tree.max_sequences]).
DEFAULT_MAX_SEQUENCES = limits.ENV_LIMITS["SPECTHEORY_MAX_SEQUENCES"]
#: Default limit in exact rational mode (Python Fractions are ~1000x slower and ~20x bigger);
#: environment variable SPECTHEORY_MAX_EXACT_SEQUENCES.
DEFAULT_MAX_EXACT_SEQUENCES = limits.ENV_LIMITS["SPECTHEORY_MAX_EXACT_SEQUENCES"]

#: Bytes per leaf the exact engine keeps alive at once (about six float64 arrays over the
#: leaves: target levels, output law, target law, emitted-block masses), and in exact mode.
BYTES_PER_LEAF = {False: 6 * 8, True: 6 * 120}


def max_sequences(exact: bool = False) -> int:
    """The default enumeration limit, from the environment when set (validated on each call)."""
    return limits.env_limit("SPECTHEORY_MAX_EXACT_SEQUENCES" if exact
                            else "SPECTHEORY_MAX_SEQUENCES")


def human_bytes(n: float) -> str:
    if n >= 1024**6:
        return f"10^{len(str(int(n))) - 1} B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def check_size(count: int, what: str, exact: bool = False, limit: int | None = None,
               formula: str = "", outcomes: bool = False) -> None:
    """Refuse an enumeration of ``count`` leaves over the limit, naming sizes, memory and time.

    ``limit`` None means the default ([`max_sequences`][spectheory.tree.max_sequences]); an explicit
    limit must be a positive integer. The time estimate uses the throughput constants of
    [`spectheory.limits`][spectheory.limits] (``outcomes``: ``count`` joint draft outcomes of the
    K-path engine). An accepted enumeration estimated above `spectheory.limits.NOTE_SECONDS` is
    announced on stderr by the command line before it starts.
    """
    if not isinstance(exact, (bool, np.bool_)):
        raise SizeLimitError(f"exact = {exact!r} must be True or False")
    exact = bool(exact)
    if limit is None:
        limit = max_sequences(exact)
    elif isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise SizeLimitError(f"max_sequences = {limit!r} must be a positive integer")
    count = int(count)
    seconds = limits.estimate_seconds(count, exact, outcomes)
    rate = ("exact" if exact else "outcomes" if outcomes else "float")
    need = human_bytes(count * BYTES_PER_LEAF[exact])
    mode = "exact" if exact else "float64"
    if count > limit:
        raise SizeLimitError(
            f"{what}: {formula + ' = ' if formula else ''}{limits.human_count(count)} "
            f"sequences exceed the {mode} limit of {limit:,} by {limits.human_count(count - limit)} "
            f"({limits.ratio(count, limit)}; about {need} of memory and "
            f"{limits.human_seconds(seconds)} would be needed); use a smaller vocabulary or "
            f"block length, or raise the limit with --max-sequences")
    if seconds > limits.NOTE_SECONDS:
        per = {"exact": limits.EXACT_SEQUENCES_PER_SECOND, "float": limits.FLOAT_SEQUENCES_PER_SECOND,
               "outcomes": limits.OUTCOMES_PER_SECOND}[rate]
        limits.note(f"{what}: {count:,} {'outcomes' if outcomes else 'sequences'}, estimated "
                    f"{limits.human_seconds(seconds)} (at about {per:.2g}/s) and {need}; "
                    f"--time-limit SECONDS bounds it")


def levels(model: TableModel, start: int, count: int, exact: bool, device="cpu"):
    """Conditional tables at depths start..start+count-1 as backend arrays.

    ``levels(m, n, k)[d]`` has shape [V**(n+d), V]: for every context of length n, the
    conditionals after each of its relative prefixes of length d (flat index ctx*V**d + rel).
    """
    model = model.to_exact() if exact else model.to_float()
    if exact:
        return [np.ascontiguousarray(model.level(d)) for d in range(start, start + count)]
    device = check_device(device)
    return [model.torch_level(d, device=device) for d in range(start, start + count)]


def check_device(device) -> torch.device:
    """A torch device that exists here ("cpu", "cuda", "cuda:0", ...), else SpectheoryError."""
    from .errors import SpectheoryError

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise SpectheoryError(f"device {device!r} is not a torch device (e.g. 'cpu', "
                              "'cuda', 'cuda:0')") from None
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

    ``cond_levels[d]`` [V**d, V] torch tensors (as from [`levels`][spectheory.tree.levels] with
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
