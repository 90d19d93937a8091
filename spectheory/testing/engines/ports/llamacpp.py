"""llama.cpp's stochastic speculative verification, ported to torch from its C++ sources.

Source (ggml-org/llama.cpp): ``examples/speculative/speculative.cpp``, ``main``, the block
"stochastic verification" (``params.sampling.temp > 0``) with one draft sequence
(``n_seq_dft = 1``, no tree branches); the drafting itself (``common/speculative.cpp``) is not part
of the rule. At every draft position i:

* ``dist_tgt``: the target's candidates after its sampler chain (``common_sampler_get_candidates``,
  sorted by probability, descending); ``dist_dft``: the draft's candidates saved when it drafted;
* ``r = u_dist(rng)``: a ``double`` in [0, 1) from ``std::uniform_real_distribution<>`` stored in a
  ``float``, so r can round up to exactly 1.0f;
* ``p_tgt``, ``p_dft``: the drafted token's probability in each list (0 when it is not listed);
  accept when ``r <= p_tgt / p_dft`` in float (a coin of 0 accepts a draft of target probability
  0, the class of SGLang #35771);
* at a rejection, both lists are sorted by token id and the residual is taken **position by
  position**, ``max(0, dist_tgt[i].p - dist_dft[i].p)`` (``dist_tgt[i].p`` alone past the end of
  ``dist_dft``), divided by its float sum, and the next token is drawn by
  ``std::discrete_distribution`` over it;
* with every draft accepted, the loop reaches a position with no draft, rejects nothing and draws
  from ``dist_tgt`` there unchanged (the target's next-token distribution).

The port represents a candidate list as the tokens of nonzero probability of a row (a sampler
chain that drops tokens, top-k for instance, shortens the list; a full row keeps all of them),
so the position-by-position residual is reproduced as the C++ computes it: aligned by token id when
both lists hold the same tokens, misaligned otherwise. ``std::default_random_engine`` is replaced
by a ``torch.Generator`` (``torch.rand`` in float64 rounded to float32 for r, ``torch.multinomial``
for the discrete distribution).
"""

from __future__ import annotations

import torch

from ....runtime.kept import Kept
from ..adapters import PORT_BUGS

__all__ = ["candidates", "verify"]

_BUGS = PORT_BUGS


def candidates(row) -> tuple[torch.Tensor, torch.Tensor]:
    """A candidate list ``(ids, p)`` (float32) of a probability row [V]: its tokens of nonzero
    probability, sorted by probability descending (ties by id). A row with a NaN, an infinite
    or a negative entry is refused (``row > 0`` would drop a NaN silently)."""
    from ....runtime.errors import OptionError

    row = torch.as_tensor(row, dtype=torch.float32).reshape(-1)
    if not bool((torch.isfinite(row) & (row >= 0)).all()):
        bad = row[~(torch.isfinite(row) & (row >= 0))][0]
        raise OptionError(f"llama.cpp candidates: a probability row holds {float(bad)!r}; "
                          "every entry must be finite and >= 0")
    ids = (row > 0).nonzero().reshape(-1)
    p = row[ids]
    order = torch.sort(-p, stable=True).indices
    return ids[order], p[order]


#: candidate lists by row content: the float32 bytes of a CPU row -> (ids, probabilities) as
#: tuples of Python ints and floats (immutable; a float32 value is exactly a Python float).
#: ``candidates`` reads nothing but the row's float32 values, so equal bytes give equal lists;
#: the verification asks for the same few rows (an instance's prefixes) again and again.
#: Bounded: the oldest list is dropped when 4096 are kept.
_CANDIDATES = Kept(4096)


def _lists(row) -> tuple[tuple, tuple]:
    """``candidates(row)`` as ``(ids, p)`` tuples, memoised by the row's float32 content."""
    row = torch.as_tensor(row, dtype=torch.float32).reshape(-1)
    if row.device.type != "cpu":
        ids, p = candidates(row)
        return tuple(ids.tolist()), tuple(p.tolist())
    key = row.detach().numpy().tobytes()
    hit = _CANDIDATES.get(key)
    if hit is None:
        ids, p = candidates(row)
        hit = _CANDIDATES.keep(key, (tuple(ids.tolist()), tuple(p.tolist())))
    return hit


def _tensors(lists: tuple[tuple, tuple], device) -> tuple[torch.Tensor, torch.Tensor]:
    """A candidate list's tuples as the tensors ``candidates`` returns (int64 ids, float32
    probabilities: the same values)."""
    return (torch.tensor(lists[0], dtype=torch.long, device=device),
            torch.tensor(lists[1], dtype=torch.float32, device=device))


def _prob_of(lists: tuple[tuple, tuple], token: int) -> float:
    listed = lists[0]  # a short list: searched in Python, not by tensor ops
    return lists[1][listed.index(token)] if token in listed else 0.0


def verify(target_probs, draft_probs, draft_tokens, rng, *, bug: str | None = None):
    """One sequence's verification: ``target_probs [L+1, V]`` (the target's processed rows at the
    draft positions and the one after), ``draft_probs [L, V]`` (the draft's processed rows),
    ``draft_tokens`` (L ids), ``rng`` (a ``torch.Generator``) -> ``(tokens [1, n + 1], n)``."""
    if bug is not None and bug not in _BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose from {', '.join(_BUGS)}")
    tgt = torch.as_tensor(target_probs).reshape(-1, torch.as_tensor(target_probs).shape[-1])
    dft = torch.as_tensor(draft_probs).reshape(-1, tgt.shape[-1])
    toks = [int(t) for t in torch.as_tensor(draft_tokens).reshape(-1)]
    L = len(toks)
    out = []
    tgt32, dft32 = tgt.to(torch.float32), dft.to(torch.float32)  # the rows candidates reads
    for i in range(L + 1):
        lt = _lists(tgt32[min(i + 1, L)] if bug == "target-row" and i < L else tgt32[i])
        if i == L:  # no draft left: draw from the target's candidates as they are
            return _emit(out, *_tensors(lt, tgt.device), rng)
        ld = _lists(dft32[i])
        r = torch.rand((), dtype=torch.float64, generator=rng).to(torch.float32)
        p_tgt = torch.tensor(_prob_of(lt, toks[i]), dtype=torch.float32)
        p_dft = torch.tensor(_prob_of(ld, toks[i]), dtype=torch.float32)
        ratio = p_tgt / p_dft
        ok = bool(r >= ratio) if bug == "coin-compare" else bool(r <= ratio)
        if ok:
            out.append(toks[i])
            continue
        ids_t, p_t = _tensors(lt, tgt.device)
        if bug == "correction-from-p":
            return _emit(out, ids_t, p_t, rng)
        ids_d, p_d = _tensors(ld, dft.device)
        if bug == "residual-row":
            ids_t, p_t = candidates(tgt[i + 1])
            ids_d, p_d = candidates(dft[min(i + 1, L - 1)])
        # sort both lists by id, subtract position by position
        o_t, o_d = torch.argsort(ids_t), torch.argsort(ids_d)
        ids_t, p_t, p_d = ids_t[o_t], p_t[o_t], p_d[o_d]
        res = p_t.clone()
        m = min(p_t.numel(), p_d.numel())
        res[:m] = torch.clamp(p_t[:m] - p_d[:m], min=0.0)
        res = res / res.sum()
        order = torch.sort(-res, stable=True).indices  # sort dist_tgt by p, descending
        return _emit(out, ids_t[order], res[order], rng)
    raise AssertionError("unreachable")


def _emit(out, ids, p, rng):
    idx = int(torch.multinomial(p.to(torch.float64), 1, generator=rng))
    tokens = torch.tensor(out + [int(ids[idx])], dtype=torch.long)
    return tokens.unsqueeze(0), len(out)
