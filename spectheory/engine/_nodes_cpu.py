"""Compiled CPU kernels (numba) for the per-node route of token and block verification and for
their output law.

The same values as the torch route of [`node_block_law`][spectheory.engine.nodes.node_block_law] and
[`node_output_law`][spectheory.engine.output.node_output_law] (``torch.equal``; a zero may carry
another sign), in two passes over the deepest rows instead of about a dozen, and one pass per
shallower depth instead of about twenty small torch operations (`block_level` / `token_level` for
the steps of depths d < L-1, `block_last` / `token_last` for depths L-1 and L, `block_scan` /
`token_scan` for the stop masses up from depth L-2, `output_level` and `output_top` for the
output law). Each kernel does, per node x (a row of V entries), the operations of the torch
route in the same order and with the same roundings:

* ``addcmul``: torch's ``addcmul`` rounds once where the CPU build contracts the product and the
  sum into a fused multiply-add (``fma``), twice otherwise; which one holds here is read off torch
  itself ([`spectheory.engine.nodes`][spectheory.engine.nodes] probes it once per process and
  vocabulary size) and passed in as ``fma_neg`` (block's ``q - p w``) and ``fma_out`` (the output
  law's ``A p + m corr``).
* Row sums over V entries: torch's order for a contiguous row (`row_sum`, ``lanes`` the width
  of torch's vector accumulator; also probed), valid while the row holds fewer than 64 vectors of
  ``lanes`` entries (``MAX_ROW_VECTORS``); above that the caller keeps the torch route.
* Elementwise operations (``/``, ``*``, ``+``, ``min(., 1)``, ``max(., 0)``) are single IEEE
  operations; NaN propagates as through torch's ``clamp``. numba does not contract ``a * b + c``
  without ``fastmath``; ``fma`` is LLVM's ``llvm.fma`` intrinsic.
* Sums over whole arrays (the tau pmf, the TV) stay with torch: the kernels write the terms (the
  TV's as one sum per node of depth L-1, in torch's row order).

Validation: each kernel screens what [`validate_nodes`][spectheory.engine.nodes.validate_nodes]
checks (weights in [0, 1 + tol], corrections non-negative, correction rows summing to 1 within
tol/2 in the kernel's order) and returns False when a screen fails; the caller then reruns the
torch route, which raises the same diagnosis as before. ``pL`` (the target rows at depth L, read
only by the output law) is screened for non-finite entries on the way (`output_top`).

Rows of a whole number of vectors of eight float64 entries (V = 8, 16, ...) take, at depths
L-1 and L and in the output law's last step, kernels that handle eight entries as one vector
(`_block8`, `_token8`, `_div8`, `_top8`, `_scale8`: numba intrinsics emitting LLVM vector
instructions, each lane the scalar lines' IEEE operations) and write the output law by
non-temporal stores; they also screen the rows they read for non-finite entries (the caller's
finiteness check of those tables). Other rows take the entry-by-entry kernels
(`_block_last_entries`, `_token_last_entries`, `_output_top_entries`), kept as they were: a
vector kernel with a scalar tail slowed small vocabularies (token at V = 4: 31 -> 64 ms a call).

The few lines that turn a residual row into its correction row are written out in each step
kernel (the two deepest twice, vector and entry by entry): the same lines as one inlined helper
made ``block_last`` 7.3 -> 10 ms a call at V = 8, L = 7 (measured, cause not traced), and the
branches that loops of other vocabularies meet slow them (above).

Imported only when the route is taken (it imports numba, which compiles these functions on first
use and caches them on disk). No bounds are checked: the caller passes C-contiguous float64
arrays of consistent shapes.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: Flat indices of the kernels' loops are unsigned: numba tests a signed index for a negative
#: value (counted from the end) on every access, which an unsigned one skips.
_UINT = np.uint64

#: The largest ratio p / q, the largest float64 (as `spectheory.verifiers.common.cap_ratio`): a
#: subnormal q made it inf, and a weight underflowed to 0 times inf NaN.
_MAX_RATIO = sys.float_info.max

#: A row is summed in torch's order only while it holds fewer than this many vectors (torch's
#: cascade of partial sums starts at 16 groups of 4 vectors).
MAX_ROW_VECTORS = 64


@intrinsic
def _fma(typingctx, a, b, c):  # pragma: no cover - compiled
    """round(a b + c), one rounding (LLVM's llvm.fma.f64)."""
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return sig, codegen


@intrinsic
def _bits(typingctx, x):  # pragma: no cover - compiled
    """The bit pattern of a float64 as an int64: ordered as the numbers for x >= +0.0 (NaN
    above +inf), negative for a set sign bit (-0.0 included)."""
    sig = types.int64(types.float64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return sig, codegen


#: Entries of a row handled as one vector by the eight-lane helpers below (a whole AVX-512
#: register of float64; two AVX2 registers); rows that are not a whole number of such vectors
#: take the entry-by-entry kernels.
LANES8 = 8

#: The exponent bits of a float64 as an int64 (`_bits`): all set for an infinite or NaN entry.
_EXPONENT_FIELD = 0x7FF0000000000000

_F64x8 = ir.VectorType(ir.DoubleType(), LANES8)
_I64x8 = ir.VectorType(ir.IntType(64), LANES8)
_NONTEMPORAL = "nontemporal"


def _contiguous_f64(*arrays) -> bool:
    """Typing guard of the eight-lane helpers: C-contiguous 1-D float64 arrays only."""
    return all(isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"
               and a.dtype == types.float64 for a in arrays)


def _vector_at(context, builder, aryty, ary, idx):
    """Pointer to the 8 entries ary[idx:idx+8] as one <8 x double> (no bounds check)."""
    arr = context.make_array(aryty)(context, builder, ary)
    ptr = cgutils.get_item_pointer(context, builder, aryty, arr, [idx], wraparound=False)
    return builder.bitcast(ptr, _F64x8.as_pointer())


def _reduce(builder, kind, vec):
    """LLVM's ``llvm.vector.reduce.<kind>`` of an <8 x i64> (``kind``: umax, smin, smax)."""
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), [_I64x8]),
                                        f"llvm.vector.reduce.{kind}.v8i64")
    return builder.call(fn, [vec])


def _splat(builder, x):
    """<x, x, ..., x> (8 lanes)."""
    v = builder.insert_element(ir.Constant(_F64x8, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(v, ir.Constant(_F64x8, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), LANES8), [0] * LANES8))


def _vector_function(builder, name, argc):
    """The LLVM intrinsic ``name`` on <8 x double> (``llvm.fma.v8f64``, ``llvm.fabs.v8f64``)."""
    return cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(_F64x8, [_F64x8] * argc), name)


@intrinsic
def _scale8(typingctx, dest, i, src, j, s, stream):  # pragma: no cover - compiled
    """dest[i:i+8] = src[j:j+8] * s (eight IEEE products, as the scalar loop) by one store,
    non-temporal where ``stream`` (then dest[i] must be 64-byte aligned: the output law is
    written once and not read back here, so it need not pass through the cache). Returns the
    largest of (bit pattern of src[j + k]) & `_EXPONENT_FIELD` over the eight (the finite
    screen)."""
    if not (_contiguous_f64(dest, src) and isinstance(stream, types.Boolean)):
        return None
    sig = types.uint64(dest, i, src, j, s, stream)

    def codegen(context, builder, signature, args):
        dty, _, sty, _, _, _ = signature.args
        vec = builder.load(_vector_at(context, builder, sty, args[2], args[3]), align=8)
        prod = builder.fmul(vec, _splat(builder, args[4]))
        target = _vector_at(context, builder, dty, args[0], args[1])
        with builder.if_else(args[5]) as (streamed, cached):
            with streamed:
                store = builder.store(prod, target, align=64)
                store.set_metadata(_NONTEMPORAL, builder.module.add_metadata(
                    [ir.Constant(ir.IntType(32), 1)]))
            with cached:
                builder.store(prod, target, align=8)
        exponents = builder.and_(builder.bitcast(vec, _I64x8),
                                 ir.Constant(_I64x8, [_EXPONENT_FIELD] * LANES8))
        return _reduce(builder, "umax", exponents)

    return sig, codegen


@intrinsic
def _top8(typingctx, p, corr, stop, k, Ax, Tx, mx, fused, tops, terms,
          t):  # pragma: no cover - compiled
    """Eight entries k..k+7 of the output law's last step (`output_top`'s scalar lines, lane by
    lane): tops[t:t+8] = (corr m + p A) + stop (the first sum by one ``fma`` where ``fused``)
    and terms[t:t+8] = |top - p T|."""
    if not (_contiguous_f64(p, corr, stop, tops, terms) and isinstance(fused, types.Boolean)):
        return None
    sig = types.void(p, corr, stop, k, Ax, Tx, mx, fused, tops, terms, t)

    def codegen(context, builder, signature, args):
        ty = signature.args
        pv, cv, sv = (builder.load(_vector_at(context, builder, ty[n], args[n], args[3]), align=8)
                      for n in (0, 1, 2))
        pA = builder.fmul(pv, _splat(builder, args[4]))
        mv = _splat(builder, args[6])
        fused_sum = builder.call(_vector_function(builder, "llvm.fma.v8f64", 3), [cv, mv, pA])
        av = builder.select(args[7], fused_sum, builder.fadd(builder.fmul(cv, mv), pA))
        top = builder.fadd(av, sv)
        term = builder.call(_vector_function(builder, "llvm.fabs.v8f64", 1),
                            [builder.fsub(top, builder.fmul(pv, _splat(builder, args[5])))])
        builder.store(top, _vector_at(context, builder, ty[8], args[8], args[10]), align=8)
        builder.store(term, _vector_at(context, builder, ty[9], args[9], args[10]), align=8)
        return context.get_dummy_value()

    return sig, codegen


def _weights_screen(builder, weights, lo, hi):
    """(min(lo, bits), max(hi, bits)) over the bit patterns of weights + 0.0 (the kernels'
    screen of a weight in [0, 1 + tol] by two integer reductions)."""
    bits = builder.bitcast(builder.fadd(weights, ir.Constant(_F64x8, [0.0] * LANES8)), _I64x8)
    new_lo, new_hi = _reduce(builder, "smin", bits), _reduce(builder, "smax", bits)
    return (builder.select(builder.icmp_signed("<", new_lo, lo), new_lo, lo),
            builder.select(builder.icmp_signed(">", new_hi, hi), new_hi, hi))


def _exponent_screen(builder, qv, pv, ex):
    """max(ex, largest exponent field (bits & `_EXPONENT_FIELD`) of the eight entries of q and
    p): `_EXPONENT_FIELD` exactly when one of them is infinite or NaN (the finite screen of the
    rows read)."""
    mask = ir.Constant(_I64x8, [_EXPONENT_FIELD] * LANES8)
    fq = builder.and_(builder.bitcast(qv, _I64x8), mask)
    fp = builder.and_(builder.bitcast(pv, _I64x8), mask)
    fields = builder.select(builder.icmp_unsigned(">", fq, fp), fq, fp)
    new = _reduce(builder, "umax", fields)
    return builder.select(builder.icmp_unsigned(">", new, ex), new, ex)


def _capped_ratio(builder, num, den, scale):
    """min(ratio(num, den) scale, 1) lane by lane, NaN kept: ratio = num / den, 1 where den = 0
    (`_ratio`, `_at_most_one`)."""
    one = ir.Constant(_F64x8, [1.0] * LANES8)
    zero = ir.Constant(_F64x8, [0.0] * LANES8)
    ratio = builder.select(builder.fcmp_ordered("==", den, zero), one, builder.fdiv(num, den))
    big = ir.Constant(_F64x8, [_MAX_RATIO] * LANES8)  # p / q overflowing at a subnormal q
    ratio = builder.select(builder.fcmp_ordered("==", ratio, ir.Constant(
        _F64x8, [math.inf] * LANES8)), big, ratio)
    scaled = ratio if scale is None else builder.fmul(ratio, scale)
    return builder.select(builder.fcmp_ordered(">", scaled, one), one, scaled)


@intrinsic
def _block8(typingctx, q, p, i, w, m, fused, stop_L, neg, rest, a, lo, hi,
            ex):  # pragma: no cover - compiled
    """Eight entries i..i+7 of a row of `block_last` (its scalar lines, lane by lane): neg[a:a+8]
    = min(q - p w, 0) (one rounding where ``fused``), w' = min(ratio(p, q) w, 1), stop_L[i:i+8]
    = (q w') m and rest[a:a+8] = q - q w'. Returns the screens' (lo, hi, ex) updated by the w'
    and by the entries of q and p (`_exponent_screen`)."""
    if not _contiguous_f64(q, p, stop_L, neg, rest) or not isinstance(fused, types.Boolean):
        return None
    triple = types.UniTuple(types.int64, 3)
    sig = triple(q, p, i, w, m, fused, stop_L, neg, rest, a, lo, hi, ex)

    def codegen(context, builder, signature, args):
        ty = signature.args
        qv, pv = (builder.load(_vector_at(context, builder, ty[n], args[n], args[2]), align=8)
                  for n in (0, 1))
        wv = _splat(builder, args[3])
        minus_p = builder.fneg(pv)
        fused_r = builder.call(_vector_function(builder, "llvm.fma.v8f64", 3), [minus_p, wv, qv])
        r = builder.select(args[5], fused_r, builder.fadd(builder.fmul(minus_p, wv), qv))
        zero = ir.Constant(_F64x8, [0.0] * LANES8)
        negv = builder.select(builder.fcmp_ordered(">", r, zero), zero, r)
        wa = _capped_ratio(builder, pv, qv, wv)
        qw = builder.fmul(qv, wa)
        builder.store(builder.fmul(qw, _splat(builder, args[4])),
                      _vector_at(context, builder, ty[6], args[6], args[2]), align=8)
        builder.store(negv, _vector_at(context, builder, ty[7], args[7], args[9]), align=8)
        builder.store(builder.fsub(qv, qw),
                      _vector_at(context, builder, ty[8], args[8], args[9]), align=8)
        lo, hi = _weights_screen(builder, wa, args[10], args[11])
        ex = _exponent_screen(builder, qv, pv, args[12])
        return context.make_tuple(builder, triple, [lo, hi, ex])

    return sig, codegen


@intrinsic
def _token8(typingctx, q, p, i, qr, stop_L, res, rest, a, lo, hi,
            ex):  # pragma: no cover - compiled
    """Eight entries i..i+7 of a row of `token_last` (its scalar lines, lane by lane):
    res[a:a+8] = max(p - q, 0), c = min(ratio(p, q), 1), stop_L[i:i+8] = (q c) qr and
    rest[a:a+8] = q c. Returns the screens' (lo, hi, ex) updated by the c and by the entries of
    q and p (`_exponent_screen`)."""
    if not _contiguous_f64(q, p, stop_L, res, rest):
        return None
    triple = types.UniTuple(types.int64, 3)
    sig = triple(q, p, i, qr, stop_L, res, rest, a, lo, hi, ex)

    def codegen(context, builder, signature, args):
        ty = signature.args
        qv, pv = (builder.load(_vector_at(context, builder, ty[n], args[n], args[2]), align=8)
                  for n in (0, 1))
        zero = ir.Constant(_F64x8, [0.0] * LANES8)
        r = builder.fsub(pv, qv)
        resv = builder.select(builder.fcmp_ordered("<", r, zero), zero, r)
        ca = _capped_ratio(builder, pv, qv, None)
        qw = builder.fmul(qv, ca)
        builder.store(builder.fmul(qw, _splat(builder, args[3])),
                      _vector_at(context, builder, ty[4], args[4], args[2]), align=8)
        builder.store(resv, _vector_at(context, builder, ty[5], args[5], args[7]), align=8)
        builder.store(qw, _vector_at(context, builder, ty[6], args[6], args[7]), align=8)
        lo, hi = _weights_screen(builder, ca, args[8], args[9])
        ex = _exponent_screen(builder, qv, pv, args[10])
        return context.make_tuple(builder, triple, [lo, hi, ex])

    return sig, codegen


@intrinsic
def _div8(typingctx, dest, i, src, j, s):  # pragma: no cover - compiled
    """dest[i:i+8] = src[j:j+8] / s (eight IEEE quotients)."""
    if not _contiguous_f64(dest, src):
        return None
    sig = types.void(dest, i, src, j, s)

    def codegen(context, builder, signature, args):
        dty, _, sty, _, _ = signature.args
        vec = builder.load(_vector_at(context, builder, sty, args[2], args[3]), align=8)
        builder.store(builder.fdiv(vec, _splat(builder, args[4])),
                      _vector_at(context, builder, dty, args[0], args[1]), align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _store_fence(typingctx):  # pragma: no cover - compiled
    """A full memory fence (``mfence`` on x86): orders the non-temporal stores of `_scale8`
    before anything after the kernel."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return sig, codegen


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _mul_add(a, b, c, fused):  # pragma: no cover - compiled
    """a b + c, rounded once (``fused``) or twice."""
    if fused:
        return _fma(a, b, c)
    return a * b + c


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _row_sum_of_8(row, lanes):  # pragma: no cover - compiled
    """`row_sum` of a row of 8 entries, its loops unrolled for each width of torch's vector
    (``lanes`` 8, 4, 2; anything else is the scalar order): about 3 of the 8 ms of `token_last`
    at V = 8, L = 7 went to the loops' control, not to the additions. tests/test_exact_floor.py
    compares it with the loops (`probe_sums8` against `probe_sums`) and with torch. ``lanes``
    is 0 or a power of two (16 and above: the scalar order, as the loops take for V < lanes).
    Called by the kernels of rows of 8 only: a branch to it inside `row_sum` slowed the loops
    of other vocabularies (token_last at V = 4: 31 -> 64 ms)."""
    r0, r1, r2, r3, r4, r5, r6, r7 = (row[0], row[1], row[2], row[3], row[4], row[5], row[6],
                                      row[7])
    if lanes == 8:  # one vector: 0 + lane 0 + ... + lane 7
        return ((((((((0.0 + r0) + r1) + r2) + r3) + r4) + r5) + r6) + r7)
    if lanes == 4:  # two vectors, one accumulator
        return (((0.0 + (r0 + r4)) + (r1 + r5)) + (r2 + r6)) + (r3 + r7)
    if lanes == 2:  # four vectors, four accumulators
        return ((0.0 + ((((0.0 + r0) + (0.0 + r2)) + (0.0 + r4)) + (0.0 + r6)))
                + ((((0.0 + r1) + (0.0 + r3)) + (0.0 + r5)) + (0.0 + r7)))
    return ((((0.0 + r0) + r4) + ((0.0 + r1) + r5)) + ((0.0 + r2) + r6)) + ((0.0 + r3) + r7)


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _vector_row_sum(row, lanes):  # pragma: no cover - compiled
    """`row_sum` in the kernels of rows of whole vectors: `_row_sum_of_8` for a row of 8, else
    the loops."""
    if row.shape[0] == LANES8:
        return _row_sum_of_8(row, lanes)
    return row_sum(row, lanes)


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def row_sum(row, lanes):  # pragma: no cover - compiled
    """Sum of a row [V] in the order of torch's CPU sum over a contiguous last dimension
    (ATen's ``cascade_sum``: ``row_sum`` with four accumulators). With ``lanes`` < 2 or V <
    lanes, on scalars: accumulator k adds entries 4i + k, the remainder goes to accumulator 0,
    then ((a0 + a1) + a2) + a3. Else the same on vectors of ``lanes`` entries (lane j of
    accumulator k adds entry (4i + k) lanes + j), then, from 0, the entries past the last whole
    vector one by one and the lanes of the accumulated vector in order. Valid for rows of fewer
    than `MAX_ROW_VECTORS` vectors (no cascade level of torch's is reached)."""
    V = row.shape[0]
    scalar = lanes < 2 or V < lanes
    width = 1 if scalar else lanes
    nv = V // width
    n4 = nv // 4
    total = 0.0
    if not scalar:
        for i in range(nv * width, V):
            total += row[i]
    for j in range(width):
        if n4 == 0:  # one accumulator: torch's 0 + r_j + ... and + 0 + 0 + 0 (a zero's sign
            # aside, the same value)
            lane = row[j]
            for i in range(1, nv):
                lane += row[i * width + j]
        else:
            a0 = 0.0
            a1 = 0.0
            a2 = 0.0
            a3 = 0.0
            for i in range(n4):
                base = 4 * i * width + j
                a0 += row[base]
                a1 += row[base + width]
                a2 += row[base + 2 * width]
                a3 += row[base + 3 * width]
            for i in range(4 * n4, nv):
                a0 += row[i * width + j]
            lane = ((a0 + a1) + a2) + a3
        if scalar:
            return lane
        total += lane
    return total


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _near_one(x, V, half):  # pragma: no cover - compiled
    """|sum of x[0:V] - 1| <= half, the sum in four interleaved parts (a screen: any order of
    addition is within 2 V ulps of torch's, far below the margin tol / 2 it is given)."""
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    n4 = V // 4
    for i in range(n4):
        a0 += x[4 * i]
        a1 += x[4 * i + 1]
        a2 += x[4 * i + 2]
        a3 += x[4 * i + 3]
    for i in range(4 * n4, V):
        a0 += x[i]
    return abs((a0 + a1) + (a2 + a3) - 1.0) <= half


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _ratio(px, qx):  # pragma: no cover - compiled
    """px / qx at most _MAX_RATIO (NaN kept), 1 where qx = 0 (``screened_ratio``)."""
    if qx == 0:
        return 1.0
    r = px / qx
    return _MAX_RATIO if r == math.inf else r


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _at_most_one(x):  # pragma: no cover - compiled
    """min(x, 1), NaN kept (torch's ``clamp(max=1)``)."""
    return 1.0 if x > 1.0 else x


@njit(nogil=True, cache=True, error_model="numpy")
def _block_last_entries(state, px, qx, q, p, mass, lanes, fma_neg, tol,
               h, corr, stop_L, G, stop_prev):  # pragma: no cover - compiled
    """`block_last` entry by entry, for rows that are not a whole number of vectors of
    `LANES8` entries (the kernel as it was before the vectors; the caller screens q and p for
    non-finite entries itself). Block verification at depths L-1 and L below n nodes of depth
    L-1.

    In: ``state`` = w_{L-2} at each node's parent, ``px``, ``qx`` the drafted token's target and
    draft probabilities, ``mass`` Q(x^(L-1)) [n]; ``q``, ``p`` the rows at the nodes [n, V].
    Out: ``h`` = h_{L-1} [n], ``corr`` = normalise(max(w_{L-1} p - q, 0)) [n, V] (p where the
    residual is zero), ``stop_L`` = m_L [n V] = Q q(a|x) h_L(x a), ``G`` = G_{L-1} =
    sum_a q(a|x) (1 - h_L(x a)) and ``stop_prev`` = m_{L-1} = Q h_{L-1} G_{L-1} [n]. Returns
    False when a screen of the node quantities fails (then nothing is to be trusted).

    Screens: every weight in [0, 1 + tol] (the least and largest bit patterns of w + 0.0,
    integer reductions that vectorise; NaN fails); a residual of finite non-zero total s
    (entries <= 0) gives corrections >= 0 whose sum is within 2 (V + 1) ulps of 1 in any order
    of addition (the caller's tol is far above that bound), so only the rows that fall back to p
    are summed; a residual total that is NaN or infinite fails the screen."""
    n, V = q.shape
    qf, pf, cf = q.reshape(-1), p.reshape(-1), corr.reshape(-1)
    neg = np.empty(V)
    rest = np.empty(V)
    half = tol / 2
    ok = True
    lo = 0  # least and largest bit patterns of the weights
    hi = 0
    for x in range(n):
        w = _at_most_one(_ratio(px[x], qx[x]) * state[x])
        m = mass[x]
        row = _UINT(x * V)  # unsigned flat indices: no wrap-around test per entry
        for a in range(V):
            i = row + _UINT(a)
            qa = qf[i]
            pa = pf[i]
            r = _mul_add(-pa, w, qa, fma_neg)
            neg[a] = 0.0 if r > 0 else r
            wa = _at_most_one(_ratio(pa, qa) * w)
            b = _bits(wa + 0.0)
            lo = min(lo, b)
            hi = max(hi, b)
            qw = qa * wa
            stop_L[i] = qw * m
            rest[a] = qa - qw
        s = row_sum(neg, lanes)
        g = row_sum(rest, lanes)
        G[x] = g
        S = -s
        den = S + (1.0 - w)
        hx = 1.0 if den == 0 else S / den
        h[x] = hx
        b = _bits(hx + 0.0)
        lo = min(lo, b)
        hi = max(hi, b)
        stop_prev[x] = m * hx * g
        if s == 0:
            for a in range(V):
                cf[row + _UINT(a)] = pf[row + _UINT(a)]
            ok &= _near_one(p[x], V, half)
        elif s > -np.inf:
            for a in range(V):
                cf[row + _UINT(a)] = neg[a] / s
        else:  # NaN or -inf
            ok = False
    return ok and lo >= 0 and hi <= _bits(1.0 + tol)


@njit(nogil=True, cache=True, error_model="numpy")
def _token_last_entries(px, qx, q, p, mass, R_parent, lanes, tol,
               a_out, R, corr, stop_L, stop_prev):  # pragma: no cover - compiled
    """`token_last` entry by entry, for rows that are not a whole number of vectors (as
    `_block_last_entries`). Token verification at depths L-1 and L below n nodes of depth L-1.

    In: ``px``, ``qx`` [n] the drafted token's probabilities, ``mass`` Q(x^(L-1)) [n],
    ``R_parent`` R_{L-2} at each node's parent [n]; ``q``, ``p`` [n, V]. Out: ``a_out`` = a_{L-1}
    = min(1, px/qx), ``R`` = R_{L-1} = R_{L-2} a_{L-1} [n], ``corr`` = normalise(max(p - q, 0))
    [n, V], ``stop_L`` = m_L = Q R_{L-1} q(a|x) a_L(x a) [n V] and ``stop_prev`` = m_{L-1} =
    Q R_{L-1} (1 - sum_a q(a|x) a_L(x a)) [n]. Returns False when a screen fails (the screens
    of `block_last`)."""
    n, V = q.shape
    qf, pf, cf = q.reshape(-1), p.reshape(-1), corr.reshape(-1)
    res = np.empty(V)
    rest = np.empty(V)
    half = tol / 2
    ok = True
    lo = 0  # least and largest bit patterns of the weights
    hi = 0
    for x in range(n):
        ax = _at_most_one(_ratio(px[x], qx[x]))
        a_out[x] = ax
        b = _bits(ax + 0.0)
        lo = min(lo, b)
        hi = max(hi, b)
        rx = R_parent[x] * ax
        R[x] = rx
        qr = mass[x] * rx
        row = _UINT(x * V)  # unsigned flat indices: no wrap-around test per entry
        for a in range(V):
            i = row + _UINT(a)
            qa = qf[i]
            pa = pf[i]
            r = pa - qa
            res[a] = 0.0 if r < 0 else r
            ca = _at_most_one(_ratio(pa, qa))
            b = _bits(ca + 0.0)
            lo = min(lo, b)
            hi = max(hi, b)
            qw = qa * ca
            stop_L[i] = qw * qr
            rest[a] = qw
        s = row_sum(res, lanes)
        stop_prev[x] = qr * (1.0 - row_sum(rest, lanes))
        if s == 0:
            for a in range(V):
                cf[row + _UINT(a)] = pf[row + _UINT(a)]
            ok &= _near_one(p[x], V, half)
        elif s < np.inf:
            for a in range(V):
                cf[row + _UINT(a)] = res[a] / s
        else:  # NaN or inf
            ok = False
    return ok and lo >= 0 and hi <= _bits(1.0 + tol)


@njit(nogil=True, cache=True, error_model="numpy")
def block_last(state, px, qx, q, p, mass, lanes, fma_neg, tol,
               h, corr, stop_L, G, stop_prev, finite):  # pragma: no cover - compiled
    """Block verification at depths L-1 and L below n nodes of depth L-1.

    In: ``state`` = w_{L-2} at each node's parent, ``px``, ``qx`` the drafted token's target and
    draft probabilities, ``mass`` Q(x^(L-1)) [n]; ``q``, ``p`` the rows at the nodes [n, V].
    Out: ``h`` = h_{L-1} [n], ``corr`` = normalise(max(w_{L-1} p - q, 0)) [n, V] (p where the
    residual is zero), ``stop_L`` = m_L [n V] = Q q(a|x) h_L(x a), ``G`` = G_{L-1} =
    sum_a q(a|x) (1 - h_L(x a)) and ``stop_prev`` = m_{L-1} = Q h_{L-1} G_{L-1} [n]; ``finite``
    [1] whether every entry of ``q`` and ``p`` is finite (the largest exponent field read is not
    all ones: the caller's finiteness check of those tables, on the way). Returns False when a
    screen of the node quantities fails (then nothing is to be trusted). Rows of a whole number
    of vectors of `LANES8` entries are handled eight entries at a time (`_block8`, `_div8`);
    others by `_block_last_entries` (``finite`` then left as it was: the caller screens).

    Screens: every weight in [0, 1 + tol] (the least and largest bit patterns of w + 0.0,
    integer reductions that vectorise; NaN fails); a residual of finite non-zero total s
    (entries <= 0) gives corrections >= 0 whose sum is within 2 (V + 1) ulps of 1 in any order
    of addition (the caller's tol is far above that bound), so only the rows that fall back to p
    are summed; a residual total that is NaN or infinite fails the screen."""
    n, V = q.shape
    if V % LANES8 != 0:
        return _block_last_entries(state, px, qx, q, p, mass, lanes, fma_neg, tol, h, corr,
                                   stop_L, G, stop_prev)
    qf, pf, cf = q.reshape(-1), p.reshape(-1), corr.reshape(-1)
    neg = np.empty(V)
    rest = np.empty(V)
    half = tol / 2
    ok = True
    lo = 0  # least and largest bit patterns of the weights
    hi = 0
    ex = 0  # largest exponent field of the entries of q and p
    for x in range(n):
        w = _at_most_one(_ratio(px[x], qx[x]) * state[x])
        m = mass[x]
        row = _UINT(x * V)  # unsigned flat indices: no wrap-around test per entry
        for a in range(0, V, LANES8):
            lo, hi, ex = _block8(qf, pf, row + _UINT(a), w, m, fma_neg, stop_L, neg, rest, a, lo,
                                 hi, ex)
        s = _vector_row_sum(neg, lanes)
        g = _vector_row_sum(rest, lanes)
        G[x] = g
        S = -s
        den = S + (1.0 - w)
        hx = 1.0 if den == 0 else S / den
        h[x] = hx
        b = _bits(hx + 0.0)
        lo = min(lo, b)
        hi = max(hi, b)
        stop_prev[x] = m * hx * g
        if s == 0:
            for a in range(V):
                cf[row + _UINT(a)] = pf[row + _UINT(a)]
            ok &= _near_one(p[x], V, half)
        elif s > -np.inf:
            for a in range(0, V, LANES8):
                _div8(cf, row + _UINT(a), neg, a, s)
        else:  # NaN or -inf
            ok = False
    finite[0] = ex != _EXPONENT_FIELD
    return ok and lo >= 0 and hi <= _bits(1.0 + tol)


@njit(nogil=True, cache=True, error_model="numpy")
def token_last(px, qx, q, p, mass, R_parent, lanes, tol,
               a_out, R, corr, stop_L, stop_prev, finite):  # pragma: no cover - compiled
    """Token verification at depths L-1 and L below n nodes of depth L-1.

    In: ``px``, ``qx`` [n] the drafted token's probabilities, ``mass`` Q(x^(L-1)) [n],
    ``R_parent`` R_{L-2} at each node's parent [n]; ``q``, ``p`` [n, V]. Out: ``a_out`` = a_{L-1}
    = min(1, px/qx), ``R`` = R_{L-1} = R_{L-2} a_{L-1} [n], ``corr`` = normalise(max(p - q, 0))
    [n, V], ``stop_L`` = m_L = Q R_{L-1} q(a|x) a_L(x a) [n V] and ``stop_prev`` = m_{L-1} =
    Q R_{L-1} (1 - sum_a q(a|x) a_L(x a)) [n]; ``finite`` [1] as in `block_last`. Returns False
    when a screen fails (the screens of `block_last`). Rows of whole vectors eight entries at a
    time (`_token8`, `_div8`), others by `_token_last_entries` (as `block_last`)."""
    n, V = q.shape
    if V % LANES8 != 0:
        return _token_last_entries(px, qx, q, p, mass, R_parent, lanes, tol, a_out, R, corr,
                                   stop_L, stop_prev)
    qf, pf, cf = q.reshape(-1), p.reshape(-1), corr.reshape(-1)
    res = np.empty(V)
    rest = np.empty(V)
    half = tol / 2
    ok = True
    lo = 0  # least and largest bit patterns of the weights
    hi = 0
    ex = 0  # largest exponent field of the entries of q and p
    for x in range(n):
        ax = _at_most_one(_ratio(px[x], qx[x]))
        a_out[x] = ax
        b = _bits(ax + 0.0)
        lo = min(lo, b)
        hi = max(hi, b)
        rx = R_parent[x] * ax
        R[x] = rx
        qr = mass[x] * rx
        row = _UINT(x * V)  # unsigned flat indices: no wrap-around test per entry
        for a in range(0, V, LANES8):
            lo, hi, ex = _token8(qf, pf, row + _UINT(a), qr, stop_L, res, rest, a, lo, hi, ex)
        s = _vector_row_sum(res, lanes)
        stop_prev[x] = qr * (1.0 - _vector_row_sum(rest, lanes))
        if s == 0:
            for a in range(V):
                cf[row + _UINT(a)] = pf[row + _UINT(a)]
            ok &= _near_one(p[x], V, half)
        elif s < np.inf:
            for a in range(0, V, LANES8):
                _div8(cf, row + _UINT(a), res, a, s)
        else:  # NaN or inf
            ok = False
    finite[0] = ex != _EXPONENT_FIELD
    return ok and lo >= 0 and hi <= _bits(1.0 + tol)


@njit(nogil=True, cache=True, error_model="numpy")
def block_level(state, px, qx, q, p, mass, root, lanes, fma_neg, tol,
                h, corr, child_state, child_mass):  # pragma: no cover - compiled
    """Block verification at n nodes of one depth d < L-1 (the step of the torch route, and what
    is handed to the next depth).

    In: ``state`` = w_{d-1} at each node's parent, ``px``, ``qx`` the drafted token's target and
    draft probabilities, ``mass`` Q(x^d) [n] (``state``, ``px``, ``qx`` unread where ``root``:
    the nodes are the roots, w = h = 1); ``q``, ``p`` the rows at the nodes [n, V]. Out: ``h`` =
    h_d [n], ``corr`` = normalise(max(w_d p - q, 0)) [n, V] (p where the residual is zero),
    ``child_state`` = w_d at each child [n V] and ``child_mass`` = Q(x^d) q(a|x^d) [n V]. Returns
    False when a screen fails (the screens of `block_last` on h and the corrections)."""
    n, V = q.shape
    qf, pf, cf = q.reshape(-1), p.reshape(-1), corr.reshape(-1)
    neg = np.empty(V)
    half = tol / 2
    ok = True
    lo = 0  # least and largest bit patterns of the weights
    hi = 0
    for x in range(n):
        w = 1.0 if root else _at_most_one(_ratio(px[x], qx[x]) * state[x])
        m = mass[x]
        row = _UINT(x * V)
        for a in range(V):
            i = row + _UINT(a)
            qa = qf[i]
            r = _mul_add(-pf[i], w, qa, fma_neg)
            neg[a] = 0.0 if r > 0 else r
            child_state[i] = w
            child_mass[i] = m * qa
        s = row_sum(neg, lanes)
        S = -s
        if root:
            hx = 1.0
        else:
            den = S + (1.0 - w)
            hx = 1.0 if den == 0 else S / den
        h[x] = hx
        b = _bits(hx + 0.0)
        lo = min(lo, b)
        hi = max(hi, b)
        if s == 0:
            for a in range(V):
                cf[row + _UINT(a)] = pf[row + _UINT(a)]
            ok &= _near_one(p[x], V, half)
        elif s > -np.inf:
            for a in range(V):
                cf[row + _UINT(a)] = neg[a] / s
        else:  # NaN or -inf
            ok = False
    return ok and lo >= 0 and hi <= _bits(1.0 + tol)


@njit(nogil=True, cache=True, error_model="numpy")
def token_level(px, qx, q, p, mass, R_parent, root, lanes, tol,
                a_out, R, corr, child_R, child_mass):  # pragma: no cover - compiled
    """Token verification at n nodes of one depth d < L-1.

    In: ``px``, ``qx`` [n] the drafted token's probabilities (unread where ``root``: a = 1),
    ``mass`` Q(x^d) and ``R_parent`` R_{d-1} at each node's parent [n]; ``q``, ``p`` [n, V].
    Out: ``a_out`` = a_d = min(1, px/qx), ``R`` = R_{d-1} a_d [n], ``corr`` =
    normalise(max(p - q, 0)) [n, V], ``child_R`` = R_d at each child and ``child_mass`` =
    Q(x^d) q(a|x^d) [n V]. Returns False when a screen fails (the screens of `token_last`)."""
    n, V = q.shape
    qf, pf, cf = q.reshape(-1), p.reshape(-1), corr.reshape(-1)
    res = np.empty(V)
    half = tol / 2
    ok = True
    lo = 0
    hi = 0
    for x in range(n):
        ax = 1.0 if root else _at_most_one(_ratio(px[x], qx[x]))
        a_out[x] = ax
        b = _bits(ax + 0.0)
        lo = min(lo, b)
        hi = max(hi, b)
        rx = R_parent[x] * ax
        R[x] = rx
        m = mass[x]
        row = _UINT(x * V)
        for a in range(V):
            i = row + _UINT(a)
            qa = qf[i]
            r = pf[i] - qa
            res[a] = 0.0 if r < 0 else r
            child_R[i] = rx
            child_mass[i] = m * qa
        s = row_sum(res, lanes)
        if s == 0:
            for a in range(V):
                cf[row + _UINT(a)] = pf[row + _UINT(a)]
            ok &= _near_one(p[x], V, half)
        elif s < np.inf:
            for a in range(V):
                cf[row + _UINT(a)] = res[a] / s
        else:  # NaN or inf
            ok = False
    return ok and lo >= 0 and hi <= _bits(1.0 + tol)


@njit(nogil=True, cache=True, error_model="numpy")
def block_scan(q, h_child, G_child, mass, h, lanes, G, stop):  # pragma: no cover - compiled
    """One step up the backward scan at n nodes of depth d: G_d(x) = sum_a q(a|x) (1 -
    h_{d+1}(x a)) G_{d+1}(x a) (``G`` [n], the sum in torch's row order) and ``stop`` = m_d =
    Q(x) h_d(x) G_d(x) [n], from ``q`` [n, V], ``h_child``, ``G_child`` [n V] and ``mass``,
    ``h`` [n]."""
    n, V = q.shape
    qf = q.reshape(-1)
    terms = np.empty(V)
    for x in range(n):
        row = _UINT(x * V)
        for a in range(V):
            i = row + _UINT(a)
            terms[a] = qf[i] * ((1.0 - h_child[i]) * G_child[i])
        g = row_sum(terms, lanes)
        G[x] = g
        stop[x] = (mass[x] * h[x]) * g


@njit(nogil=True, cache=True, error_model="numpy")
def token_scan(q, a_child, mass, R, lanes, stop):  # pragma: no cover - compiled
    """The stop masses of n nodes of depth d on the forward scan: m_d = Q(x) R_d(x) (1 - sum_a
    q(a|x) a_{d+1}(x a)) (``stop`` [n]; the sum in torch's row order), from ``q`` [n, V],
    ``a_child`` [n V] and ``mass``, ``R`` [n]."""
    n, V = q.shape
    qf = q.reshape(-1)
    terms = np.empty(V)
    for x in range(n):
        row = _UINT(x * V)
        for a in range(V):
            i = row + _UINT(a)
            terms[a] = qf[i] * a_child[i]
        stop[x] = (mass[x] * R[x]) * (1.0 - row_sum(terms, lanes))


@njit(nogil=True, cache=True, error_model="numpy")
def output_level(A, T, m, corr, p, fma_out, A_out, T_out):  # pragma: no cover - compiled
    """One level of the output and target laws below n nodes: A_{d+1}(x a) = A_d(x) p(a|x) +
    m_d(x) corr(a|x) (torch's ``mul(p, A).addcmul_(corr, m)``, rounded as ``fma_out`` says) and
    T_{d+1}(x a) = T_d(x) p(a|x) (``A_out``, ``T_out`` [n V]); ``A``, ``T``, ``m`` [n],
    ``corr``, ``p`` [n, V]."""
    n, V = p.shape
    pf, cf = p.reshape(-1), corr.reshape(-1)
    for x in range(n):
        Ax = A[x]
        Tx = T[x]
        mx = m[x]
        row = _UINT(x * V)
        for a in range(V):
            i = row + _UINT(a)
            pa = pf[i]
            A_out[i] = _mul_add(cf[i], mx, pa * Ax, fma_out)
            T_out[i] = Tx * pa


#: The exponent bits of a float64: all set for an infinite or NaN entry, and only there.
_EXPONENT = np.uint64(_EXPONENT_FIELD)


@njit(nogil=True, cache=True, error_model="numpy")
def _output_top_entries(A, T, m, corr, p, stop_L, pL, fma_out, lanes, diff,
                        out):  # pragma: no cover - compiled
    """`output_top` where a row of ``pL`` is not a whole number of vectors of `LANES8`
    entries (V = 3 or 17, say): the V Vb entries below a node in one flat loop, which numba's
    loop vectoriser takes (the rows of 3 or 4 entries took 4.5 and 6.2 ms against 3.8 and 5.1
    ms by `output_top`'s row loops)."""
    r, V = p.shape
    Vb = pL.shape[1]
    W = V * Vb  # the output entries below one node x: one loop of V Vb, which vectorises
    flat = pL.reshape(-1)
    bits = flat.view(np.uint64)
    dest = out.reshape(-1)
    tops = np.empty(W)
    terms = np.empty(V)
    top_exponent = np.uint64(0)
    for x in range(r):
        Ax = A[x]
        Tx = T[x]
        mx = m[x]
        for a in range(V):
            pa = p[x, a]
            av = _mul_add(corr[x, a], mx, pa * Ax, fma_out)
            top = av + stop_L[_UINT(x * V + a)]
            terms[a] = abs(top - pa * Tx)
            for b in range(Vb):
                tops[a * Vb + b] = top
        diff[x] = row_sum(terms, lanes)
        base = _UINT(x * W)
        for e in range(W):
            i = base + _UINT(e)
            top_exponent = max(top_exponent, bits[i] & _EXPONENT)
            dest[i] = flat[i] * tops[e]
    return top_exponent != _EXPONENT


@njit(nogil=True, cache=True, error_model="numpy")
def output_top(A, T, m, corr, p, stop_L, pL, fma_out, lanes, diff,
               out):  # pragma: no cover - compiled
    """The last step of the output law below r nodes x of depth L-1 whose bonus rows are the
    target (token, block): A_L(x a) = A_{L-1}(x) p(a|x) + m_{L-1}(x) corr(a|x), T_L(x a) =
    T_{L-1}(x) p(a|x), top = A_L + m_L; ``diff`` [r] = sum_a |top(x a) - T_L(x a)| (the TV's
    terms below each node, summed in torch's row order, `row_sum`) and ``out`` [r V, V] = top p_L
    (the output law). ``A``, ``T``, ``m`` [r]; ``corr``, ``p`` [r, V]; ``stop_L`` [r V]; ``pL``
    [r V, V]. Returns True when every entry of pL is finite (the largest exponent field read is
    not all ones).

    Where a row of ``pL`` is a whole number of vectors of `LANES8` entries (V = 8, 16, ...),
    rows are handled eight entries at a time (`_top8`, `_scale8`, each entry by the same
    operations) and, where ``out`` starts on a 64-byte boundary, the law is written by
    non-temporal stores (it is not read back here): 15 -> 10 ms at V = 8, L = 7. Other rows
    take `_output_top_entries`."""
    r, V = p.shape
    Vb = pL.shape[1]
    pf, cf, flat, dest = p.reshape(-1), corr.reshape(-1), pL.reshape(-1), out.reshape(-1)
    stream = dest.ctypes.data % 64 == 0
    if V % LANES8 != 0 or Vb != V:  # rows that are not whole vectors: entry by entry
        return _output_top_entries(A, T, m, corr, p, stop_L, pL, fma_out, lanes, diff, out)
    tops = np.empty(V)
    terms = np.empty(V)
    top_exponent = np.uint64(0)
    for x in range(r):
        Ax = A[x]
        Tx = T[x]
        mx = m[x]
        row = _UINT(x * V)
        for a in range(0, V, LANES8):
            _top8(pf, cf, stop_L, row + _UINT(a), Ax, Tx, mx, fma_out, tops, terms, a)
        diff[x] = _vector_row_sum(terms, lanes)
        if Vb == LANES8:  # a row of pL is one vector: one loop (the nested loops' control
            # cost a tenth of this step at V = 8, L = 7)
            for a in range(V):
                i = (row + _UINT(a)) * _UINT(LANES8)
                top_exponent = max(top_exponent, _scale8(dest, i, flat, i, tops[a], stream))
            continue
        for a in range(V):  # rows of several whole vectors
            base = (row + _UINT(a)) * _UINT(Vb)
            for b in range(0, Vb, LANES8):
                i = base + _UINT(b)
                top_exponent = max(top_exponent, _scale8(dest, i, flat, i, tops[a], stream))
    if stream:
        _store_fence()
    return top_exponent != _EXPONENT


@njit(nogil=True, cache=True, error_model="numpy")
def probe_addcmul(q, p, w, fused, out):  # pragma: no cover - compiled
    """q - p w row by row [n, V] (``w`` [n]) rounded once (``fused``) or twice: what the block
    kernel computes, to compare with torch's ``addcmul(q, p, w, value=-1)``."""
    n, V = q.shape
    for x in range(n):
        for a in range(V):
            out[x, a] = _mul_add(-p[x, a], w[x], q[x, a], fused)
    return out


@njit(nogil=True, cache=True, error_model="numpy")
def probe_out(p, A, c, m, fused, out):  # pragma: no cover - compiled
    """p A + c m row by row (``A``, ``m`` [n]): torch's ``mul(p, A).addcmul_(c, m)``."""
    n, V = p.shape
    for x in range(n):
        for a in range(V):
            out[x, a] = _mul_add(c[x, a], m[x], p[x, a] * A[x], fused)
    return out


@njit(nogil=True, cache=True, error_model="numpy")
def probe_sums8(rows, lanes, out):  # pragma: no cover - compiled
    """`_row_sum_of_8` of every row [n, 8] into ``out`` [n] (compared with `probe_sums`)."""
    for x in range(rows.shape[0]):
        out[x] = _row_sum_of_8(rows[x], lanes)
    return out


@njit(nogil=True, cache=True, error_model="numpy")
def probe_sums(rows, lanes, out):  # pragma: no cover - compiled
    """`row_sum` of every row [n, V] into ``out`` [n]."""
    for x in range(rows.shape[0]):
        out[x] = row_sum(rows[x], lanes)
    return out
