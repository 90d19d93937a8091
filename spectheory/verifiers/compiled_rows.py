"""The compiled route of token's and block's correction rows at real vocabulary sizes.

[`token_node`][spectheory.verifiers.token.token_node] and
[`block_node`][spectheory.verifiers.block.block_node] build a batch of correction rows [N, V]
with torch in about five passes over memory (residual, clamp, sum, division). On float32 CPU
rows of at least `ROWS_MIN_VOCAB` entries,
[`compiled_corrections`][spectheory.verifiers.compiled_rows.compiled_corrections] builds them
with the kernels of ``spectheory.verifiers._rows_cpu`` (numba) instead: one read of p and q and
one write of the rows, the same values bit for bit as torch with one thread. (With more
threads torch sums a lone row of at least 32,768 entries in pieces, one per thread, so the last
bits of its own route then depend on the thread count and on how the rows are batched; the
kernels' do not. The tests and the benchmarks run torch with one thread.) Whether this
machine's torch does the arithmetic the kernels reproduce (the width of its vector sums, one or
two roundings in ``addcmul``) is probed once per process and vocabulary size by running both
routes on random rows; where they differ, or numba cannot be loaded, or ``SPECTHEORY_NUMBA`` is
off, the torch route runs.
"""

from __future__ import annotations

import numpy as np
from ..runtime._lazy import torch

from ..runtime._kernels import load_once, probed_kernels

#: Fewest entries per row for which the correction rows take the compiled kernels: they cost
#: about 0.5 s once per process (importing numba, loading their cached code, probing torch)
#: and save a third (token) to a half (block) of a law at V = 151,936; small tables stay on
#: torch.
ROWS_MIN_VOCAB = 16384
#: Environment switch shared with the other compiled kernels: "0" keeps the torch route.
KERNEL_ENV = "SPECTHEORY_NUMBA"
_MODULE: list = []  # [the kernels module, or None where it cannot be loaded], once tried
_UNAVAILABLE: list = []  # why the kernels could not be loaded, where they could not
_PROBES: dict = {}  # V -> whether torch's addcmul rounds once (bool), or None: torch's
# arithmetic is not the kernels' for rows of V entries


def _module():
    return load_once(_MODULE, _UNAVAILABLE, "._rows_cpu", __package__)


def _probed(V: int):
    """(the kernels module, whether torch's addcmul rounds once) for rows of V entries, or None:
    the kernels switched off, not loadable, or not reproducing torch's arithmetic (probed once
    per process and V)."""
    return probed_kernels(KERNEL_ENV, _module, _PROBES, V, _probe)


def _flat(t):
    """(flat numpy view from the first entry of the rows [N, V] ``t`` on, row stride)."""
    n, V = t.shape
    stride = t.stride(0) if n > 1 else V
    return t.detach().as_strided(((n - 1) * stride + V,), (1,)).numpy(), stride


def _run(mod, kind, w, p, q, out):
    """The kernel of ``kind`` over rows p, q into out; the totals [N] (float32 numpy), or None
    where a row must take the torch route."""
    n, V = p.shape
    (qf, qs), (pf, ps), (of, os) = _flat(q), _flat(p), _flat(out)
    wn = np.zeros(n, np.float32) if w is None else w.detach().numpy()
    totals = np.empty(n, np.float32)
    if mod.correction_rows(kind, qf, 0, qs, pf, 0, ps, of, 0, os, n, V, wn, totals):
        return totals
    return None


def _probe(mod, V: int):
    """Whether torch's ``addcmul`` rounds once (True) or twice (False) where the kernels
    reproduce torch's token and block rows of V entries bit for bit (the residuals, their sums
    and the corrections on 8 random rows, entries spread over 2^-40..1 and a seventh of them
    subnormal, ties included), else None."""
    rng = np.random.default_rng(V)

    def rows():
        x = rng.random((8, V)) * np.exp2(-rng.integers(0, 40, (8, V)))
        x = (x / x.sum(1, keepdims=True)).astype(np.float32)
        x[:, 1::7] *= np.float32(2.0 ** -120)  # subnormal entries: q - p w can underflow
        return torch.from_numpy(x)

    p, q = rows(), rows()
    q[:, : V // 3] = p[:, : V // 3]  # ties: zero residual entries
    w = torch.from_numpy(rng.uniform(0.3, 1, 8).astype(np.float32))
    w[0] = 1
    out = torch.empty_like(p)
    res = torch.sub(p, q).clamp_(min=0)
    total = res.sum(dim=-1)
    got = _run(mod, mod.TOKEN, None, p, q, out)
    ref = res.div_(total.unsqueeze(-1))
    if got is None or not (np.array_equal(got, total.numpy()) and np.array_equal(
            out.numpy().view(np.int32), ref.numpy().view(np.int32))):
        return None
    neg = torch.addcmul(q, p, w.unsqueeze(-1), value=-1).clamp_(max=0)
    total = neg.sum(dim=-1)
    ref = neg.div_(total.unsqueeze(-1))
    for fused, kind in ((True, mod.BLOCK_FUSED), (False, mod.BLOCK)):
        got = _run(mod, kind, w, p, q, out)
        if got is not None and np.array_equal(got, total.numpy()) and torch.equal(out, ref) \
                and np.array_equal(out.numpy().view(np.int32), ref.numpy().view(np.int32)):
            return fused
    return None


def _eligible(p, q, out) -> bool:
    """Rows the kernels take: float32 CPU rows [N, V] of one shape, each contiguous, V at least
    `ROWS_MIN_VOCAB`; ``out`` (None where nothing is written) apart from p and q."""
    rows = (p, q) if out is None else (p, q, out)
    if not all(isinstance(t, torch.Tensor) and t.device.type == "cpu"
               and t.dtype == torch.float32 and t.dim() == 2 and t.stride(-1) == 1
               and not t.requires_grad for t in rows):
        return False  # (rows that require grad: the laws detach them before they come here)
    if not (all(t.shape == p.shape for t in rows) and p.shape[0] >= 1
            and p.shape[1] >= ROWS_MIN_VOCAB):
        return False
    if out is None:
        return True
    lo, hi = _span(out)  # the output overlaps no input: a row left to torch is recomputed
    return all(hi <= a or b <= lo for a, b in (_span(p), _span(q)))


def _span(t):
    n, V = t.shape
    start = t.data_ptr()
    return start, start + 4 * ((n - 1) * t.stride(0) + V)


def takes(rows) -> bool:
    """Whether correction rows over target rows like ``rows`` [..., V] go through the kernels
    (float32 CPU rows of at least `ROWS_MIN_VOCAB` entries, the kernels available, switched on
    and reproducing torch's arithmetic for V entries); a row may still be left to torch for its
    entries (`compiled_corrections`). The node forms of token and block verification declare it
    as their ``row_by_row``."""
    if not (isinstance(rows, torch.Tensor) and rows.device.type == "cpu"
            and rows.dtype == torch.float32 and rows.dim() >= 1
            and rows.shape[-1] >= ROWS_MIN_VOCAB):
        return False
    return _probed(rows.shape[-1]) is not None


def compiled_copy(p, out) -> bool:
    """out = p for rows [N, V] (the corrections at depth L) by the kernels' non-temporal stores,
    where the rows are ones they take (`compiled_corrections`'s conditions); False (nothing
    written) elsewhere."""
    probed = _probed(p.shape[1]) if _eligible(p, p, out) else None
    if probed is None:
        return False
    mod = probed[0]
    (pf, ps), (of, os) = _flat(p), _flat(out)
    return mod.copy_rows(pf, 0, ps, of, 0, os, p.shape[0], p.shape[1])


def _kernel_kind(w, p, q, out):
    """(the kernels module, the residual kind: token for ``w`` None, else block rounded as this
    machine's addcmul) for rows the kernels take (`_eligible`; ``w`` a float32 CPU vector [N]),
    or None (the torch route)."""
    if not _eligible(p, q, out) or (w is not None and not (
            isinstance(w, torch.Tensor) and w.dtype == torch.float32 and w.dim() == 1
            and w.shape[0] == p.shape[0] and w.device.type == "cpu")):
        return None
    probed = _probed(p.shape[1])
    if probed is None:
        return None
    mod, fused = probed
    return mod, mod.TOKEN if w is None else (mod.BLOCK_FUSED if fused else mod.BLOCK)


def compiled_totals(w, p, q):
    """The sums of token's (``w`` None) or block's (``w`` [N]) residual rows of rows p, q [N, V],
    as [`compiled_corrections`][spectheory.verifiers.compiled_rows.compiled_corrections] returns
    them, without writing the rows (the stop probabilities alone: one read of p and q). None
    where the torch route must run (the same conditions, with no output)."""
    found = _kernel_kind(w, p, q, None)
    if found is None:
        return None
    mod, kind = found
    n, V = p.shape
    (qf, qs), (pf, ps) = _flat(q), _flat(p)
    wn = np.zeros(n, np.float32) if w is None else w.detach().contiguous().numpy()
    totals = np.empty(n, np.float32)
    if mod.residual_totals(kind, qf, 0, qs, pf, 0, ps, n, V, wn, totals):
        return torch.from_numpy(totals)
    return None


def compiled_corrections(w, p, q, out):
    """Token's (``w`` None) or block's (``w`` [N], the weights w_i) correction rows of rows p, q
    [N, V] written into ``out`` [N, V] by the compiled kernels: out = r / sum(r) with r = max(p -
    q, 0) (token) or r = min(q - p w, 0) (block), the values of the torch route bit for bit
    (torch with one thread: module docstring).
    Returns sum(r) [N] (float32), or None where the torch route must run (then nothing is to be
    read from ``out``): not float32 CPU rows of at least `ROWS_MIN_VOCAB` entries, each row
    contiguous, ``out`` apart from p and q; the kernels unavailable, switched off, or not
    reproducing this machine's torch; or an entry, weight or total the kernels leave to torch
    (``spectheory.verifiers._rows_cpu``)."""
    found = _kernel_kind(w, p, q, out)
    if found is None:
        return None
    mod, kind = found
    totals = _run(mod, kind, None if w is None else w.contiguous(), p, q, out)
    return None if totals is None else torch.from_numpy(totals)
