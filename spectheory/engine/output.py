"""Output laws: the law of the output block followed by target sampling, the target law, the TV.

From a [`BlockLaw`][spectheory.engine.perdraft.BlockLaw], the law over V**(L+1) of "output block,
then target sampling up to length L+1": A_1 = E_1,
A_{j+1}(y^{j+1}) = A_j(y^j) p(y_{j+1} | y^j) + E_{j+1}(y^{j+1}); its total variation distance to
the target law p(y^{L+1}) is zero iff the verifier is valid (Sun et al., arXiv 2403.10444,
section 2). [`node_output_law`][spectheory.engine.output.node_output_law] does the same from the
per-node results ([`spectheory.engine.nodes`][spectheory.engine.nodes]) without building the
emitted block arrays.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from ..runtime._lazy import torch

from ..runtime import backend as Bk
from .nodes import _flat
from .perdraft import BlockLaw
from .seqtree import path_probabilities

def output_law(block: BlockLaw, p_levels, V: int, L: int):
    """Law [C, V**(L+1)] of the output block followed by target sampling up to length L+1."""
    C = p_levels[0].shape[0]
    A = block.emitted[1].reshape(C, V)
    for j in range(1, L + 1):
        cond = p_levels[j].reshape(C, V**j, V)
        A = (Bk.expand_dims(A, 2) * cond).reshape(C, V ** (j + 1)) + block.emitted[j + 1].reshape(
            C, V ** (j + 1))
    return A


def target_law(p_levels, upto: int):
    """Target law [C, V**upto] below each of C contexts (``p_levels`` from depth 0)."""
    C = p_levels[0].shape[0]
    roots = Bk.full((C,), 1, p_levels[0])
    return path_probabilities(p_levels[:upto], roots)[upto].reshape(C, -1)


def total_variation(a, b):
    """Half the L1 distance along the last axis."""
    return Bk.sum(Bk.abs(a - b), axis=-1) / 2


#: Byte boundary the output law starts on (a cache line; where the compiled kernel writes its
#: rows with non-temporal stores, which need one).
TABLE_ALIGN = 64


def _empty_table(shape, like):
    """An uninitialised array of ``shape`` like ``like``; on the CPU allocated by numpy, which
    asks the kernel for huge pages on large arrays (cheaper first touch of V^(L+1) entries), and
    starting on a `TABLE_ALIGN`-byte boundary."""
    if not Bk.is_torch(like):
        return Bk.full(shape, 0, like)
    if like.device.type == "cpu" and like.dtype in (torch.float32, torch.float64):
        dtype = np.dtype(np.float64 if like.dtype == torch.float64 else np.float32)
        size = int(np.prod(shape, dtype=np.int64))
        raw = np.empty(size + TABLE_ALIGN // dtype.itemsize, dtype=dtype)
        skip = (-raw.ctypes.data % TABLE_ALIGN) // dtype.itemsize
        return torch.from_numpy(raw[skip:skip + size].reshape(tuple(shape)))
    return torch.empty(tuple(shape), dtype=like.dtype, device=like.device)


#: Rows of the deepest level (depth L) per chunk of the output law's last step.
TV_CHUNK_ROWS = 2**18


def _last_step(A, T, r0, r1, nodes, p_levels, L: int):
    """A_L and T_L [(r1 - r0) V] below the nodes r0..r1 of depth L-1: A_{L-1} p + m corr and
    T_{L-1} p."""
    p, m = p_levels[L - 1][r0:r1], nodes.stop_mass[L - 1][r0:r1]
    c = nodes.correction[L - 1][r0:r1]
    if Bk.is_torch(p):
        a = torch.mul(p, A[r0:r1].unsqueeze(1)).addcmul_(c, m.unsqueeze(1))
        return a.reshape(-1), torch.mul(p, T[r0:r1].unsqueeze(1)).reshape(-1)
    return ((Bk.expand_dims(A[r0:r1], 1) * p + Bk.expand_dims(m, 1) * c).reshape(-1),
            (Bk.expand_dims(T[r0:r1], 1) * p).reshape(-1))


def _target_top(T, p_levels, L: int, V: int):
    """The target law over L+1 tokens, T_{L-1} p_{L-1} p_L, a chunk of rows at a time."""
    pL = p_levels[L]
    tgt = _empty_table(pL.shape, pL)
    step = max(1, TV_CHUNK_ROWS // V)
    for r0 in range(0, p_levels[L - 1].shape[0], step):
        r1 = min(r0 + step, p_levels[L - 1].shape[0])
        t = (Bk.expand_dims(T[r0:r1], 1) * p_levels[L - 1][r0:r1]).reshape(-1)
        if Bk.is_torch(pL):
            torch.mul(pL[r0 * V:r1 * V], t.unsqueeze(1), out=tgt[r0 * V:r1 * V])
        else:
            tgt[r0 * V:r1 * V] = Bk.expand_dims(t, 1) * pL[r0 * V:r1 * V]
    return tgt.reshape(-1)


def _tv_terms(top, t, V: int):
    """sum |top - t| over a chunk of sequences [r V]: the V terms below each node of depth L-1
    summed first (a row sum, the order the compiled kernel reproduces), then the r row sums."""
    return Bk.sum(Bk.sum(Bk.abs(top - t).reshape(-1, V), axis=1), axis=0)


def _compiled_top(kernels, A, T, nodes, p_levels, L: int, V: int, out, tv, step: int):
    """The last step of `node_output_law` (target bonus rows, laws asked for) by the compiled
    kernel, a chunk of ``step`` nodes of depth L-1 at a time: (TV sum so far, whether every
    target row at depth L was finite). The same chunks and the same torch sums as the torch
    route."""
    p, m, c = p_levels[L - 1], nodes.stop_mass[L - 1], nodes.correction[L - 1]
    mL, pL = nodes.stop_mass[L], p_levels[L]
    A, T, m, c, p, mL, pL = (_flat(x) for x in (A, T, m, c, p, mL, pL))
    o = out.numpy()
    n = p.shape[0]
    diff = torch.empty(min(n, step), dtype=torch.float64)  # the TV's terms, one per node
    d = diff.numpy()
    finite = True
    for r0 in range(0, n, step):
        r1 = min(r0 + step, n)
        k0, k1 = r0 * V, r1 * V
        finite &= bool(kernels.module.output_top(A[r0:r1], T[r0:r1], m[r0:r1], c[r0:r1],
                                                 p[r0:r1], mL[k0:k1], pL[k0:k1],
                                                 kernels.fma_out, kernels.lanes, d[:r1 - r0],
                                                 o[k0:k1]))
        tv = tv + Bk.sum(diff[:r1 - r0], axis=0)  # as the torch route adds its row sums
    return tv, finite


def node_output_law(nodes, p_levels, V: int, L: int, laws: bool = True, A0=None, T0=None,
                    screen: list | None = None):
    """Output law, target law (both [V^(L+1)] for one context; None when ``laws`` is False) and
    their TV from the per-node results of one context.

    The target law is returned as a function that builds it
    ([`ExactAnalysis`][spectheory.engine.analysis.ExactAnalysis] calls it on first access). With A_j the
    output law and T_j the target law over j tokens, A_0 = 0, T_0 = 1, A_{j+1} = A_j p + E_{j+1},
    T_{j+1} = T_j p (E_{j+1} = m_j corr_j). At the last level E_{L+1} = m_L corr_L; when corr_L is
    the target row (token, block) A_{L+1} = (A_L + m_L) p and, since every target row sums to 1,
    TV = 1/2 sum_{y^L} |A_L(y^L) + m_L(y^L) - T_L(y^L)|: the deepest level (V^(L+1) entries) is
    read once per law that is asked for and never for the TV (with ``laws`` False the TV is
    accumulated as |(A_{L-1} - T_{L-1}) p + m_{L-1} corr_{L-1} + m_L| in one array). The last
    two steps (A_L, T_L over V^L sequences, and level L+1) run a chunk of `TV_CHUNK_ROWS`
    sequences at a time, so no V^L-sized temporary is built.

    ``A0``, ``T0`` (1-entry arrays): the output and target mass of the prefix below which
    ``nodes`` and ``p_levels`` lie, for one subtree of a split analysis (`spectheory.engine.split`);
    default 0 and 1, the root.

    On float64 CPU tensors with the law asked for and target bonus rows, each level above the
    last runs in one compiled pass (`spectheory.engine._nodes_cpu.output_level`) and the last
    step in one compiled pass per chunk (`spectheory.engine._nodes_cpu.output_top`, where
    [`compiled_kernels`][spectheory.engine.nodes.compiled_kernels] allows it; the same values:
    the TV's terms below each node are summed by the kernel in torch's row order, and the row sums
    added by torch, as on the torch route). It also screens the
    target rows at depth L for non-finite entries: with ``screen`` (a list) given, it appends
    whether they were all finite (nothing is appended where the torch route ran).
    """
    like = p_levels[0]
    A = Bk.full((1,), 0, like) if A0 is None else A0
    T = Bk.full((1,), 1, like) if T0 is None else T0
    fused = Bk.is_torch(like)
    mL, pL, cL = nodes.stop_mass[L], p_levels[L], nodes.correction[L]
    top_is_p = nodes.corr_is_target[L]
    kernels = None
    if fused and top_is_p and laws:
        from .nodes import compiled_kernels

        kernels = compiled_kernels(None, pL, V, nodes=pL.shape[0])
    for j in range(L - 1):
        if kernels is not None:  # the same two arrays in one compiled pass
            p = p_levels[j]
            A_next = torch.empty(p.numel(), dtype=torch.float64)
            T_next = torch.empty(p.numel(), dtype=torch.float64)
            kernels.module.output_level(
                _flat(A), _flat(T), _flat(nodes.stop_mass[j]), _flat(nodes.correction[j]),
                _flat(p), kernels.fma_out, A_next.numpy(), T_next.numpy())
            A, T = A_next, T_next
            continue
        if fused:  # A p + m corr in one output array
            A = torch.mul(p_levels[j], A.unsqueeze(1)).addcmul_(
                nodes.correction[j], nodes.stop_mass[j].unsqueeze(1)).reshape(-1)
        else:
            A = (Bk.expand_dims(A, 1) * p_levels[j]).reshape(-1) + nodes.emitted(j)
        T = (Bk.expand_dims(T, 1) * p_levels[j]).reshape(-1)
    out = _empty_table(pL.shape, pL) if laws else None
    tgt = _empty_table(pL.shape, pL) if laws and not top_is_p else None
    if Bk.is_exact(pL):
        tv = Fraction(0)
    elif Bk.is_torch(pL):
        tv = torch.zeros((), dtype=pL.dtype, device=pL.device)
    else:
        tv = pL.dtype.type(0)  # a numpy float64 scalar
    n = p_levels[L - 1].shape[0]
    step = max(1, TV_CHUNK_ROWS // V)
    if fused and top_is_p and out is None:  # TV only: A_L + m_L - T_L = (A - T) p + m corr + m_L
        D = A - T
        p, m, c = p_levels[L - 1], nodes.stop_mass[L - 1], nodes.correction[L - 1]
        for r0 in range(0, n, step):
            r1 = min(r0 + step, n)
            diff = torch.mul(p[r0:r1], D[r0:r1].unsqueeze(1)).addcmul_(
                c[r0:r1], m[r0:r1].unsqueeze(1)).reshape(-1).add_(mL[r0 * V:r1 * V])
            tv = tv + diff.abs_().sum()
        return None, None, tv / 2
    if kernels is not None:
        tv, finite = _compiled_top(kernels, A, T, nodes, p_levels, L, V, out, tv, step)
        if screen is not None:
            screen.append(finite)
        return out.reshape(-1), lambda: _target_top(T, p_levels, L, V), tv / 2
    for r0 in range(0, n, step):
        r1 = min(r0 + step, n)
        k0, k1 = r0 * V, r1 * V
        a, t = _last_step(A, T, r0, r1, nodes, p_levels, L)
        if top_is_p:
            top = a.add_(mL[k0:k1]) if fused else a + mL[k0:k1]
            tv = tv + _tv_terms(top, t, V)
            if out is not None and fused:
                torch.mul(pL[k0:k1], top.unsqueeze(1), out=out[k0:k1])
            elif out is not None:
                out[k0:k1] = Bk.expand_dims(top, 1) * pL[k0:k1]
            continue
        o = Bk.expand_dims(a, 1) * pL[k0:k1] + Bk.expand_dims(mL[k0:k1], 1) * cL[k0:k1]
        g = Bk.expand_dims(t, 1) * pL[k0:k1]
        tv = tv + Bk.sum(Bk.abs(o - g).reshape(-1), axis=0)
        if out is not None:
            out[k0:k1], tgt[k0:k1] = o, g
    tv = tv / 2
    if not laws:
        return None, None, tv
    if top_is_p:
        return out.reshape(-1), lambda: _target_top(T, p_levels, L, V), tv
    return out.reshape(-1), tgt.reshape(-1), tv


__all__ = ["TV_CHUNK_ROWS", "node_output_law", "output_law", "target_law", "total_variation"]
