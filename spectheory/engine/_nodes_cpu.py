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

The few lines that turn a residual row into its correction row are written out in each of the
four step kernels: the same lines as one inlined helper made ``block_last`` 7.3 -> 10 ms a call
at V = 8, L = 7 (measured, cause not traced).

Imported only when the route is taken (it imports numba, which compiles these functions on first
use and caches them on disk). No bounds are checked: the caller passes C-contiguous float64
arrays of consistent shapes.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

#: Flat indices of the kernels' loops are unsigned: numba tests a signed index for a negative
#: value (counted from the end) on every access, which an unsigned one skips.
_UINT = np.uint64

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


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _mul_add(a, b, c, fused):  # pragma: no cover - compiled
    """a b + c, rounded once (``fused``) or twice."""
    if fused:
        return _fma(a, b, c)
    return a * b + c


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
    """px / qx, 1 where qx = 0 (``screened_ratio``)."""
    return 1.0 if qx == 0 else px / qx


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _at_most_one(x):  # pragma: no cover - compiled
    """min(x, 1), NaN kept (torch's ``clamp(max=1)``)."""
    return 1.0 if x > 1.0 else x


@njit(nogil=True, cache=True, error_model="numpy")
def block_last(state, px, qx, q, p, mass, lanes, fma_neg, tol,
               h, corr, stop_L, G, stop_prev):  # pragma: no cover - compiled
    """Block verification at depths L-1 and L below n nodes of depth L-1.

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
def token_last(px, qx, q, p, mass, R_parent, lanes, tol,
               a_out, R, corr, stop_L, stop_prev):  # pragma: no cover - compiled
    """Token verification at depths L-1 and L below n nodes of depth L-1.

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
_EXPONENT = np.uint64(0x7FF0000000000000)


@njit(nogil=True, cache=True, error_model="numpy")
def output_top(A, T, m, corr, p, stop_L, pL, fma_out, lanes, diff,
               out):  # pragma: no cover - compiled
    """The last step of the output law below r nodes x of depth L-1 whose bonus rows are the
    target (token, block): A_L(x a) = A_{L-1}(x) p(a|x) + m_{L-1}(x) corr(a|x), T_L(x a) =
    T_{L-1}(x) p(a|x), top = A_L + m_L; ``diff`` [r] = sum_a |top(x a) - T_L(x a)| (the TV's
    terms below each node, summed in torch's row order, `row_sum`) and ``out`` [r V, V] = top p_L
    (the output law). ``A``, ``T``, ``m`` [r]; ``corr``, ``p`` [r, V]; ``stop_L`` [r V]; ``pL``
    [r V, V]. Returns True when every entry of pL is finite (the largest exponent field read is
    not all ones: an integer maximum, which vectorises)."""
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
def probe_sums(rows, lanes, out):  # pragma: no cover - compiled
    """`row_sum` of every row [n, V] into ``out`` [n]."""
    for x in range(rows.shape[0]):
        out[x] = row_sum(rows[x], lanes)
    return out
