"""Compiled CPU kernels (numba) for the correction rows of token and block verification on
float32 rows: one read of a row of p and q and one write of its correction, in torch's
arithmetic.

At a node with rows q, p [V] (and block's weight w) the torch route of
[`token_node`][spectheory.verifiers.token.token_node] and
[`block_node`][spectheory.verifiers.block.block_node] makes about five passes over the row
(the residual, its clamp, its sum, the division; each a read and a write of V entries). Here a
first pass reads q and p and adds the residual r into torch's partial sums (`accumulate`); a
second pass, while the row's q and p are still in the cache, computes r again and writes r /
sum(r) by non-temporal stores (`write`: storing r in the first pass would read the output's
lines from memory before writing them). Per row:

* token: r = max(p - q, 0) (``torch.sub(p, q).clamp_(min=0)``), correction r / sum(r);
* block: r = min(q - p w, 0) (``torch.addcmul(q, p, w, value=-1).clamp_(max=0)``, rounded once
  where ``fused``: whether torch's CPU build contracts ``addcmul`` into a fused multiply-add is
  probed, as is everything below), correction r / sum(r) (both negative; a zero of the residual
  keeps its sign through torch's clamp, as here);
* a residual of total zero: the correction is p (`residual_rows`'s patch; that row alone);
* sum(r) in the order of torch's CPU sum over a contiguous row (ATen's ``cascade_sum``: rows
  of ``LANES``-entry vectors taken four at a time into four vector accumulators, which cascade
  into three further levels every 2^k steps, k = max(4, ceil(log2(steps)) / 4), whole steps
  first, then the vectors past the last whole step into accumulator 0, the accumulators folded
  0 + 1 + 2 + 3, then from 0 the entries past the last whole vector one by one and the lanes in
  order); rows of fewer than ``LANES`` entries are not taken.

The values are torch's bit for bit with one torch thread (with more, torch splits the sum of a
lone row of at least 32,768 entries between threads; ``tests/test_real_rows.py`` compares the
routes over
vocabularies with tails of every length). Where the two could part the kernel returns False and
leaves the batch to the torch route (which overwrites what the kernel wrote): an entry of q or p
negative, -0.0, infinite or NaN (the entries' bits or-ed reach `BAD_BITS`), a weight outside
[0, 1] or NaN.

Imported only when the route is taken (numba compiles these functions on first use and caches
them on disk). No bounds are checked: the caller passes flat C-contiguous float32 arrays and
offsets that lie inside them.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: Entries of torch's vector accumulator for float32 row sums that these kernels reproduce (the
#: caller probes that torch's sums agree; where they do not, the torch route is kept).
LANES = 8
#: Vector steps of four vectors each: entries per step.
STEP = 4 * LANES

_F32 = ir.FloatType()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_VEC = ir.VectorType(_F32, LANES)
_IVEC = ir.VectorType(_I32, LANES)
#: Bit patterns of float32 at or above this are +inf, NaN or carry a sign bit (negative, -0.0):
#: the entries the kernels leave to torch.
BAD_BITS = 0x7F800000

#: ``kind`` of the kernels: token's residual, block's (one rounding, two roundings); COPY (p
#: itself) writes the row of a residual of total zero.
TOKEN, BLOCK_FUSED, BLOCK, COPY = 0, 1, 2, 3


def _flat_f32(*arrays) -> bool:
    return all(isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"
               and a.dtype == types.float32 for a in arrays)


def _base(context, builder, aryty, ary, idx):
    """Pointer to ary[idx] (no bounds check)."""
    arr = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, arr, [idx], wraparound=False)


def _vector(builder, base, e):
    """base + e as a pointer to LANES float32."""
    return builder.bitcast(builder.gep(base, [e]), _VEC.as_pointer())


def _splat(builder, x):
    """<x, x, ..., x> (LANES lanes)."""
    one = builder.insert_element(ir.Constant(_VEC, ir.Undefined), x, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(_VEC, ir.Undefined),
                                  ir.Constant(_IVEC, [0] * LANES))


def _residual(builder, kind, pv, qv, wv):
    """The residual of ``kind`` on vectors (each lane the scalar `_residual_entry`). The clamps
    are torch's: ``clamp_(min=0)`` is (0 > d) ? 0 : d and ``clamp_(max=0)`` is (0 < d) ? 0 : d, so a
    -0.0 is kept (block's q - p w rounded once can underflow to -0.0; a quotient then has the
    other sign)."""
    zero = ir.Constant(_VEC, [0.0] * LANES)
    if kind == TOKEN:  # max(p - q, 0)
        d = builder.fsub(pv, qv)
        return builder.select(builder.fcmp_ordered("<", d, zero), zero, d)
    minus_p = builder.fneg(pv)
    if kind == BLOCK_FUSED:
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_VEC, [_VEC] * 3),
                                             "llvm.fma.v8f32")
        d = builder.call(fma, [minus_p, wv, qv])
    else:
        d = builder.fadd(builder.fmul(minus_p, wv), qv)
    return builder.select(builder.fcmp_ordered(">", d, zero), zero, d)


def _accumulator(kind):
    """The intrinsic ``accumulate`` of one residual kind (see its docstring)."""

    @intrinsic
    def accumulate(typingctx, q, qo, p, po, t0, steps, w, acc):  # pragma: no cover - compiled
        """Steps t0 .. t0+steps-1 of a row (entries (4 t + k) LANES + l, l < LANES, of the row
        starting at q[qo], p[po]): acc[k LANES + l] += residual (acc holds the four vector
        accumulators, 4 LANES entries). Returns the screen: the largest of (bits of q | bits of
        p) over the entries read, at least `BAD_BITS` where an entry is negative, -0.0, infinite
        or NaN (or, harmlessly, for a pair of finite entries whose bits or-ed reach it)."""
        if not (_flat_f32(q, p, acc) and isinstance(w, types.Float)):
            return None
        sig = types.uint32(q, qo, p, po, t0, steps, w, acc)

        def codegen(context, builder, signature, args):
            ty = signature.args
            qa, qo_, pa, po_, t0_, steps_, w_, acca = args
            qbase = _base(context, builder, ty[0], qa, qo_)
            pbase = _base(context, builder, ty[2], pa, po_)
            abase = builder.bitcast(_base(context, builder, ty[7], acca, ir.Constant(_I64, 0)),
                                    _VEC.as_pointer())
            slots = []
            for k in range(4):
                slot = cgutils.alloca_once(builder, _VEC)
                builder.store(builder.load(builder.gep(abase, [ir.Constant(_I64, k)]), align=4),
                              slot)
                slots.append(slot)
            seen = cgutils.alloca_once(builder, _IVEC)
            builder.store(ir.Constant(_IVEC, [0] * LANES), seen)
            wv = _splat(builder, context.cast(builder, w_, ty[6], types.float32))
            with cgutils.for_range(builder, steps_) as loop:
                t = builder.add(loop.index, t0_)
                first = builder.mul(t, ir.Constant(_I64, STEP))
                for k in range(4):
                    e = builder.add(first, ir.Constant(_I64, k * LANES))
                    qv = builder.load(_vector(builder, qbase, e), align=4)
                    pv = builder.load(_vector(builder, pbase, e), align=4)
                    r = _residual(builder, kind, pv, qv, wv)
                    builder.store(builder.fadd(builder.load(slots[k]), r), slots[k])
                    b = builder.or_(builder.bitcast(qv, _IVEC), builder.bitcast(pv, _IVEC))
                    cur = builder.load(seen)
                    builder.store(builder.select(builder.icmp_unsigned(">", b, cur), b, cur),
                                  seen)
            for k in range(4):
                builder.store(builder.load(slots[k]), builder.gep(abase, [ir.Constant(_I64, k)]),
                              align=4)
            umax = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(_I32, [_IVEC]), "llvm.vector.reduce.umax.v8i32")
            return builder.call(umax, [builder.load(seen)])

        return sig, codegen

    return accumulate


def _writer(kind):
    """The intrinsic ``write`` of one residual kind (see its docstring)."""

    @intrinsic
    def write(typingctx, q, qo, p, po, out, oo, count, w, total):  # pragma: no cover - compiled
        """For the ``count`` vectors of LANES entries from q[qo], p[po] on: out[oo + ...] = residual
        / total, by non-temporal stores (the rows are written once and
        not read back here): out[oo] must lie on a 4 LANES-byte boundary. The residual is
        recomputed from q and p (still in the cache from the first pass): storing it in the
        first pass would read the output's lines from memory before writing them."""
        if not (_flat_f32(q, p, out) and isinstance(w, types.Float)
                and isinstance(total, types.Float)):
            return None
        sig = types.void(q, qo, p, po, out, oo, count, w, total)

        def codegen(context, builder, signature, args):
            ty = signature.args
            qa, qo_, pa, po_, oa, oo_, count_, w_, total_ = args
            qbase = _base(context, builder, ty[0], qa, qo_)
            pbase = _base(context, builder, ty[2], pa, po_)
            obase = _base(context, builder, ty[4], oa, oo_)
            wv = _splat(builder, context.cast(builder, w_, ty[7], types.float32))
            tv = _splat(builder, context.cast(builder, total_, ty[8], types.float32))
            hint = builder.module.add_metadata([ir.Constant(_I32, 1)])
            with cgutils.for_range(builder, count_) as loop:
                e = builder.mul(loop.index, ir.Constant(_I64, LANES))
                qv = builder.load(_vector(builder, qbase, e), align=4)
                pv = builder.load(_vector(builder, pbase, e), align=4)
                if kind == COPY:
                    d = pv
                else:
                    d = builder.fdiv(_residual(builder, kind, pv, qv, wv), tv)
                store = builder.store(d, _vector(builder, obase, e), align=4 * LANES)
                store.set_metadata("nontemporal", hint)
            return context.get_dummy_value()

        return sig, codegen

    return write


_accumulate_token = _accumulator(TOKEN)
_accumulate_block_fused = _accumulator(BLOCK_FUSED)
_accumulate_block = _accumulator(BLOCK)
_write_token = _writer(TOKEN)
_write_block_fused = _writer(BLOCK_FUSED)
_write_block = _writer(BLOCK)
_write_copy = _writer(COPY)


@intrinsic
def _store_fence(typingctx):  # pragma: no cover - compiled
    """A full memory fence (``mfence`` on x86): orders the non-temporal stores before anything
    after the kernel."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _fma32(typingctx, a, b, c):  # pragma: no cover - compiled
    """round(a b + c) in float32, one rounding (LLVM's llvm.fma.f32)."""
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return sig, codegen


@intrinsic
def _bits32(typingctx, x):  # pragma: no cover - compiled
    """The bit pattern of a float32 as a uint32."""
    sig = types.uint32(types.float32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _I32)

    return sig, codegen


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _residual_entry(kind, pe, qe, w):  # pragma: no cover - compiled
    """One entry of the residual of ``kind`` (the lanes of `_residual`)."""
    zero = np.float32(0)
    if kind == TOKEN:
        d = pe - qe
        return zero if d < zero else d
    if kind == BLOCK_FUSED:
        d = _fma32(-pe, w, qe)
    else:
        d = -pe * w + qe
    return zero if d > zero else d


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _ceil_log2(x):  # pragma: no cover - compiled
    """ATen's ``CeilLog2``: 1 for x <= 2, else the number of bits of x - 1."""
    if x <= 2:
        return 1
    y = x - 1
    n = 0
    while y:
        y >>= 1
        n += 1
    return n


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _steps(kind, q, qo, p, po, t0, steps, w, acc):  # pragma: no cover - compiled
    """The `accumulate` of ``kind``."""
    if kind == TOKEN:
        return _accumulate_token(q, qo, p, po, t0, steps, w, acc)
    if kind == BLOCK_FUSED:
        return _accumulate_block_fused(q, qo, p, po, t0, steps, w, acc)
    return _accumulate_block(q, qo, p, po, t0, steps, w, acc)


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _write(kind, q, qo, p, po, out, oo, count, w, total):  # pragma: no cover - compiled
    """The `write` of ``kind``."""
    if kind == TOKEN:
        _write_token(q, qo, p, po, out, oo, count, w, total)
    elif kind == BLOCK_FUSED:
        _write_block_fused(q, qo, p, po, out, oo, count, w, total)
    elif kind == BLOCK:
        _write_block(q, qo, p, po, out, oo, count, w, total)
    else:
        _write_copy(q, qo, p, po, out, oo, count, w, total)


@njit(nogil=True, cache=True, error_model="numpy")
def residual_sum(kind, q, qo, p, po, V, w, levels):  # pragma: no cover - compiled
    """(Sum in torch's order of the residual of ``kind`` of the rows q[qo:qo+V], p[po:po+V] with
    weight ``w``, the screen of `accumulate` over the rows). ``levels`` [4 STEP] float32 is
    scratch (the four cascade levels of accumulators). V >= LANES."""
    nv = V // LANES
    n4 = nv // 4
    power = max(4, _ceil_log2(n4) // 4)
    span = 1 << power
    mask = span - 1
    levels[:] = 0
    acc = levels[0:STEP]
    seen = np.uint32(0)
    t = 0
    while t + span <= n4:
        seen = max(seen, _steps(kind, q, qo, p, po, t, span, w, acc))
        t += span
        for j in range(1, 4):
            for x in range(STEP):
                levels[STEP * j + x] += levels[STEP * (j - 1) + x]
                levels[STEP * (j - 1) + x] = 0
            if (t & (mask << (j * power))) != 0:
                break
    if t < n4:
        seen = max(seen, _steps(kind, q, qo, p, po, t, n4 - t, w, acc))
    for j in range(1, 4):
        for x in range(STEP):
            levels[x] += levels[STEP * j + x]
    tail = np.float32(0)
    for e in range(4 * n4 * LANES, V):  # the vectors past the last whole step, then the entries
        # past the last whole vector
        pe, qe = p[po + e], q[qo + e]
        seen = max(seen, _bits32(pe) | _bits32(qe))
        r = _residual_entry(kind, pe, qe, w)
        if e < nv * LANES:
            levels[e % LANES] += r
        else:
            tail += r
    for k in range(1, 4):
        for lane in range(LANES):
            levels[lane] += levels[k * LANES + lane]
    total = tail  # 0 + the entries past the last whole vector (in order), then the lanes
    for lane in range(LANES):
        total += levels[lane]
    return total, seen


@njit(nogil=True, cache=True, error_model="numpy")
def write_row(kind, q, qo, p, po, out, oo, V, w, total):  # pragma: no cover - compiled
    """out[oo:oo+V] = residual / total, or the row of p where ``kind``
    is COPY: entry by entry up to a 4 LANES-byte boundary of out, then whole vectors by
    non-temporal stores, then the entries past the last whole vector."""
    head = 0
    while head < V and (out[oo + head:].ctypes.data % (4 * LANES)) != 0:
        head += 1
    count = (V - head) // LANES
    for e in range(head):
        _write_entry(kind, q, qo + e, p, po + e, out, oo + e, w, total)
    _write(kind, q, qo + head, p, po + head, out, oo + head, count, w, total)
    for e in range(head + count * LANES, V):
        _write_entry(kind, q, qo + e, p, po + e, out, oo + e, w, total)


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _write_entry(kind, q, qe, p, pe, out, oe, w, total):  # pragma: no cover - compiled
    """One entry of `write_row` (the lanes of `write`)."""
    if kind == COPY:
        out[oe] = p[pe]
    else:
        d = _residual_entry(kind, p[pe], q[qe], w) / total
        out[oe] = d


@njit(nogil=True, cache=True, error_model="numpy")
def correction_rows(kind, q, qo, qs, p, po, ps, out, oo, os, n, V, w,
                    totals):  # pragma: no cover - compiled
    """Correction rows r = 0..n-1 of ``kind``: row r of q starts at q[qo + r qs] (p, out
    likewise), weight w[r] (block; unread for token); totals[r] = sum of row r's residual.
    Returns False (and stops) at the first row the torch route must take (module docstring).

    As torch's route (`residual_rows`), each row on its own: a row of total zero becomes p, the
    others residual / total. A row is written right after its sum, while its q and p are still
    in the cache."""
    levels = np.empty(4 * STEP, np.float32)
    for r in range(n):
        wr = w[r]
        if kind != TOKEN and not (wr >= 0 and wr <= 1):
            return False
        qr, pr = qo + r * qs, po + r * ps
        total, seen = residual_sum(kind, q, qr, p, pr, V, wr, levels)
        totals[r] = total
        if seen >= BAD_BITS or not (total >= 0 if kind == TOKEN else total <= 0):
            return False
        write_row(COPY if total == 0 else kind, q, qr, p, pr, out, oo + r * os, V, wr, total)
    _store_fence()
    return True


@njit(nogil=True, cache=True, error_model="numpy")
def residual_totals(kind, q, qo, qs, p, po, ps, n, V, w, totals):  # pragma: no cover - compiled
    """totals[r] = sum of row r's residual of ``kind`` (rows and weights as `correction_rows`),
    without writing the rows: the stop probabilities alone. Returns False (and stops) at the
    first row the torch route must take."""
    levels = np.empty(4 * STEP, np.float32)
    for r in range(n):
        wr = w[r]
        if kind != TOKEN and not (wr >= 0 and wr <= 1):
            return False
        total, seen = residual_sum(kind, q, qo + r * qs, p, po + r * ps, V, wr, levels)
        totals[r] = total
        if seen >= BAD_BITS or not (total >= 0 if kind == TOKEN else total <= 0):
            return False
    return True


@njit(nogil=True, cache=True, error_model="numpy")
def copy_rows(p, po, ps, out, oo, os, n, V):  # pragma: no cover - compiled
    """out row r = p row r (r < n; rows start at p[po + r ps], out[oo + r os]) by non-temporal
    stores: the correction rows of depth L, which are the target rows themselves."""
    for r in range(n):
        write_row(COPY, p, po + r * ps, p, po + r * ps, out, oo + r * os, V, np.float32(1),
                  np.float32(1))
    _store_fence()
    return True
