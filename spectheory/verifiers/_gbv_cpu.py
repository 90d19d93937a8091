"""Compiled CPU kernels (numba) for GBV's rank orders and q^G rows at real vocabulary sizes.

The same values as the torch route of [`spectheory.verifiers.gbv`][spectheory.verifiers.gbv], bit
for bit (``tests/test_real_laws_exact.py`` compares them; a NaN may carry another sign or
payload), in fewer passes over a row. No bounds are checked: the caller passes p and q rows of
one dtype and length, the scratch of that length and tokens in range.

* `ratio_keys`: r = p/q (-1 where q = 0) and its bit patterns as unsigned sort keys (sign bit
  flipped: ascending keys = ascending signed patterns = ascending ratios for the ratios GBV meets);
  ``odd`` says whether a pattern is a NaN or a negative other than -1.0 (where bit order and float
  comparisons could disagree; the caller then counts ranks by comparisons).
* `rank_order32`, `rank_order64`: the worst-first rank order by a stable least-significant-digit
  radix sort on 16-bit digits (2 passes for float32 keys, with key and id packed in one word; 4
  for float64, a pass whose digit is the same for all keys skipped). Ties: for the rule "low" (smaller id ranks better) the worst-first order lists
  equal ratios by decreasing id, so the first pass reads the tokens from the last; for "high" from
  the first. This is the order of one stable sort of the patterns in the torch route.
* `skew_row`: below(a) = the q-mass ranked strictly below a, accumulated in float64 in rank order
  from the worst and rounded to the row's dtype (what ``torch.cumsum`` does for float32 rows), and
  the q^G row q S_K(A + x below, x q) / S_K(A, x) by Horner's rule in the row's dtype, operation
  for operation as the torch route (no fused multiply-add: numba does not contract without
  ``fastmath``), q where S_K(A, x) = 0. For K <= 4 each entry's operations run in one pass
  (the torch route's K + 1 passes, entry by entry: 166 rows of a real-size law 68 -> 52 ms).
* `positions`: rank positions (0 = best) of a few tokens in a worst-first order.
* `row_total`: a row's sum (float64, any order: the screen's bound holds for every order) and
  whether any entry has its sign bit set, in one read (the screen of one node, instead of
  torch's sum and minimum of every row of the path).
* `rows_equal`: whether two rows are equal bit for bit (the K root rows of a shared root), one
  read of each.
* `path_positions`: a selected path's positions in one call (the loop of
  ``gbv._compiled_positions``): A_i and x_i, the screen (`row_total`, `_negligible`, the float64
  operations of ``gbv._negligible_node``), and where it does not pass the node's sort and q^G row
  (`ratio_keys`, `rank_order32` or `rank_order64`, `skew_row`), without a Python step between.
* `path_tail`: what a selected path needs between its sorts and the block rule, in one call:
  the q^G rows q S_K(A, 0) / S_K(A, x) of the nodes that need no rank order (product and
  quotient of each entry in one pass), the drafted tokens' p and q^G, and the block weights
  along the path (the torch route's S_K by `_power_sum`, its gathers and ``block_weight``
  position by position: about 15 torch and numpy calls a path).

Imported only when the route is taken (it imports numba, which compiles these functions on first
use and caches them on disk).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_DIGIT = 16  # radix digits: 65,536 bins (2 passes for float32 keys, 4 for float64)
_BINS = 1 << _DIGIT
_MASK = _BINS - 1


@njit(nogil=True, cache=True, error_model="numpy")
def ratio_keys(p, q, ratio, keys, sign, minus_one, inf):  # pragma: no cover - compiled
    """ratio[a] = p[a]/q[a] (-1 where q[a] = 0); keys (an unsigned view of ``ratio``) ^= sign.
    ``sign``, ``minus_one``, ``inf``: the sign bit and the keys of -1.0 and +inf. Returns True
    when a key is a NaN or a negative pattern other than -1.0."""
    V = p.shape[0]
    for a in range(V):
        qa = q[a]
        r = p[a] / qa
        ratio[a] = r if qa != 0 else np.float32(-1.0)
    odd = 0
    for a in range(V):
        k = keys[a] ^ sign
        keys[a] = k
        odd |= (k > inf) | ((k < sign) & (k != minus_one))
    return odd != 0


@njit(nogil=True, cache=True, error_model="numpy")
def rank_order32(keys, ties_low, buf_a, buf_b, order):  # pragma: no cover - compiled
    """Worst-first order [V] (int32, into ``order``) of 32-bit ``keys`` [V]: ascending keys,
    ties by decreasing id when ``ties_low``, else by increasing id. Two stable passes on 16-bit
    digits of (key, id) packed in one 64-bit word; ``buf_a``, ``buf_b`` [V] uint64 scratch."""
    V = keys.shape[0]
    h0 = np.zeros(_BINS, np.int32)
    h1 = np.zeros(_BINS, np.int32)
    for a in range(V):
        k = keys[a]
        h0[k & _MASK] += 1
        h1[k >> _DIGIT] += 1
    s0 = 0
    s1 = 0
    for b in range(_BINS):
        c = h0[b]
        h0[b] = s0
        s0 += c
        c = h1[b]
        h1[b] = s1
        s1 += c
    for m in range(V):  # the input in the order that breaks ties
        a = V - 1 - m if ties_low else m
        k = keys[a]
        d = k & _MASK
        j = h0[d]
        h0[d] = j + 1
        buf_a[j] = (np.uint64(k) << np.uint64(32)) | np.uint64(a)
    for m in range(V):
        e = buf_a[m]
        d = e >> np.uint64(32 + _DIGIT)
        j = h1[d]
        h1[d] = j + 1
        order[j] = np.int32(e & np.uint64(0xFFFFFFFF))
    return order


@njit(nogil=True, cache=True, error_model="numpy")
def rank_order64(keys, ties_low, key_a, idx_a, key_b, idx_b):  # pragma: no cover - compiled
    """`rank_order32` for 64-bit ``keys``: keys and ids in separate arrays (``key_a``,
    ``key_b`` uint64, ``idx_a``, ``idx_b`` int32 [V]), four passes, a pass whose digit is the
    same for every key skipped. Returns the order (a view of ``idx_a`` or ``idx_b``)."""
    V = keys.shape[0]
    passes = 64 // _DIGIT
    hist = np.zeros((passes, _BINS), np.int32)
    for a in range(V):
        k = keys[a]
        for s in range(passes):
            hist[s, (k >> np.uint64(_DIGIT * s)) & np.uint64(_MASK)] += 1
    run = np.zeros(passes, np.bool_)
    for s in range(passes):
        total = 0
        for b in range(_BINS):
            c = hist[s, b]
            if c == V:
                break  # every key has this digit: the pass would keep the order
            hist[s, b] = total
            total += c
        else:
            run[s] = True
    first = True
    src_k, src_i, dst_k, dst_i = key_a, idx_a, key_b, idx_b
    for s in range(passes):
        if not run[s]:
            continue
        shift = np.uint64(_DIGIT * s)
        h = hist[s]
        if first:  # from the input, tokens in the order that breaks ties
            for m in range(V):
                a = V - 1 - m if ties_low else m
                k = keys[a]
                d = (k >> shift) & np.uint64(_MASK)
                j = h[d]
                h[d] = j + 1
                src_k[j] = k
                src_i[j] = a
            first = False
            continue
        for m in range(V):
            k = src_k[m]
            d = (k >> shift) & np.uint64(_MASK)
            j = h[d]
            h[d] = j + 1
            dst_k[j] = k
            dst_i[j] = src_i[m]
        src_k, src_i, dst_k, dst_i = dst_k, dst_i, src_k, src_i
    if first:  # all keys equal: the tie order alone
        for m in range(V):
            src_i[m] = V - 1 - m if ties_low else m
    return src_i


@njit(nogil=True, cache=True, error_model="numpy")
def skew_row(q, order, A, x, K, tok, below, ud, power, out):  # pragma: no cover - compiled
    """q^G row into ``out`` [V] at a node with masses A (ranked below the node) and x (its draft
    probability), from the worst-first ``order``; ``below``, ``ud``, ``power`` [V] scratch of q's
    dtype. Returns below(tok), the mass ranked below the drafted token."""
    V = q.shape[0]
    acc = 0.0
    for m in range(V):
        t = order[m]
        below[t] = acc
        acc += q[t]
    b_tok = below[tok]
    if K == 1:  # S_1 = 1: q 1 / 1
        for a in range(V):
            out[a] = q[a]
        return b_tok
    den = _power_sum(A, x, K, x)  # S_K(A, x), K >= 2 here: Horner as in the torch route
    if den == 0:
        for a in range(V):
            out[a] = q[a]
    elif K == 2:  # one pass for K <= 4 (each entry's operations in the torch route's order)
        for a in range(V):
            u = below[a] * x + A
            s = q[a] * x + u
            out[a] = (s + u) * q[a] / den
    elif K == 3:
        for a in range(V):
            u = below[a] * x + A
            s = q[a] * x + u
            out[a] = ((s + u) * s + u * u) * q[a] / den
    elif K == 4:
        for a in range(V):
            u = below[a] * x + A
            s = q[a] * x + u
            w = u * u
            out[a] = (((s + u) * s + w) * s + w * u) * q[a] / den
    else:
        for a in range(V):
            u = below[a] * x + A
            s = q[a] * x + u
            below[a] = u
            ud[a] = s
            out[a] = s + u
            power[a] = u
        for _ in range(K - 2):
            for a in range(V):
                w = power[a] * below[a]
                power[a] = w
                out[a] = out[a] * ud[a] + w
        for a in range(V):
            out[a] = out[a] * q[a] / den
    return b_tok


@njit(nogil=True, cache=True, error_model="numpy")
def positions(order, toks, out):  # pragma: no cover - compiled
    """out[k] = rank position (0 = best) of token toks[k] in the worst-first ``order`` (a
    permutation: one match per token, found by a sum that vectorises)."""
    V = order.shape[0]
    for k in range(toks.shape[0]):
        t = toks[k]
        at = 0
        for m in range(V):
            at += m if order[m] == t else 0
        out[k] = V - 1 - at
    return out


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "nsz"})
def row_total(row, bits, shift):  # pragma: no cover - compiled
    """(sum of ``row`` [V] in float64, whether an entry's sign bit is set): ``bits`` is an
    unsigned view of ``row``, ``shift`` its sign bit's position. The sum is reassociated (it
    vectorises); a NaN or an infinity makes it NaN or infinite."""
    s = 0.0
    o = bits[0] ^ bits[0]
    for a in range(row.shape[0]):
        s += row[a]
        o |= bits[a]
    return s, (o >> shift) != 0


@njit(nogil=True, cache=True, error_model="numpy")
def rows_equal(a, b):  # pragma: no cover - compiled
    """Whether rows ``a`` and ``b`` [V] (integer views of float rows: bit for bit) are equal, in
    one read of each (blocks of 4,096 entries, or-ing the xors; stops at the first block that
    differs), without numpy's temporary of V booleans."""
    V = a.shape[0]
    for s in range(0, V, 4096):
        x, y = a[s:s + 4096], b[s:s + 4096]  # slices: loops from 0 vectorise
        diff = x[0] ^ y[0]
        for k in range(x.shape[0]):
            diff |= x[k] ^ y[k]
        if diff != 0:
            return False
    return True


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _power_sum(u, d, K, one):  # pragma: no cover - compiled
    """S_K(u, d) by the Horner form of ``gbv._power_sum``, operation for operation: S_1 = 1,
    S_2 = (u + d) + u, S_{j+1} = S_j (u + d) + u^j."""
    if K == 1:
        return one
    ud = u + d
    total = ud + u
    power = u
    for _ in range(K - 2):
        power = power * u
        total = total * ud + power
    return total


@njit(nogil=True, cache=True, error_model="numpy")
def path_tail(q, p, toks, A, x, K, j, skipped, qg, px, qx, w, zero,
              one):  # pragma: no cover - compiled
    """Steps 2 and 3 of ``gbv._path_law`` up to the block rule, in one call: the q^G rows
    q S_K(A, 0) / S_K(A, x) (q where S_K(A, x) = 0) of the positions i >= ``j`` and of those
    flagged in ``skipped`` [L] (the others were written by `skew_row`), into ``qg`` [L, V];
    then the drafted tokens' p and q^G (``px``, ``qx`` [L]) and the block weights w_0..w_L
    (``w`` [L + 1]: ratio 1 where q^G = 0, then min(ratio w, 1), a NaN kept), each a single
    IEEE operation of the rows' dtype as the torch route's (``zero``, ``one``: 0 and 1 of that
    dtype). q [L, V], p [L + 1, V], toks [L] in range: the caller's."""
    L, V = q.shape
    for i in range(L):
        if i >= j or skipped[i]:
            den = _power_sum(A[i], x[i], K, one)
            num = _power_sum(A[i], zero, K, one)
            if den == 0:
                for a in range(V):
                    qg[i, a] = q[i, a]
            else:
                for a in range(V):
                    qg[i, a] = q[i, a] * num / den
    w[0] = one
    for i in range(L):
        t = toks[i]
        pv = p[i, t]
        qv = qg[i, t]
        px[i] = pv
        qx[i] = qv
        r = pv / qv if qv != 0 else one
        m = r * w[i]
        w[i + 1] = one if m > 1 else m


@njit(nogil=True, cache=True, error_model="numpy")
def _negligible(a, x, total, signed, V, eps, pinf, ninf):  # pragma: no cover - compiled
    """``gbv._negligible_node`` at a node with A = ``a`` and x (values of the rows' dtype, whose
    infinities are ``pinf``, ``ninf``), the row's float64 sum ``total`` and whether an entry has
    its sign bit set: the same float64 operations."""
    af = np.float64(a)
    if not (0 < af < np.inf and not signed):
        return False
    up = np.float64(np.nextafter(a, pinf)) - af
    down = af - np.float64(np.nextafter(a, ninf))
    M = total * (1 + 2 * V * eps)
    return abs(np.float64(x)) * M * (1 + 4 * eps) < min(up, down) / 2


@njit(nogil=True, cache=True, error_model="numpy")
def path_positions(q, p, qbits, shift, toks, K, ties_low, A, x, qg, root_row, root_below,
                   screens, half_eps, eps, pinf, ninf, ratio, keys, sign, minus_one, kinf,
                   buf_a, buf_b, idx_a, idx_b, below, ud, power,
                   skipped):  # pragma: no cover - compiled
    """Step 1 of ``gbv._path_law`` in one call (``gbv._compiled_positions``' loop, position by
    position): A_i, x_i (into ``A``, ``x`` [L], A_0 = 0 and x_0 = 1 given), the screen of a
    node where it can pass (`row_total`, `_negligible`; ``screens``: V eps <= 1/4), else the
    node's rank order (`ratio_keys`, `rank_order32` or, where ``idx_b`` is given, float64's
    `rank_order64`) and q^G row (`skew_row`, into ``qg`` [L, V]); at position 0 the root's q^G
    row ``root_row`` with the drafted token's mass below ``root_below`` where given (None: the
    root is sorted here). ``skipped`` [L] (bool, False on entry) flags the nodes that passed
    the screen. Returns the last position sorted (-1: none). Scratch as `_KernelScratch`'s;
    q [L, V], p [L + 1, V] and toks [L] in range: the caller's."""
    L, V = q.shape
    last = -1
    for i in range(L):
        a_i = A[i]
        x_i = x[i]
        t = toks[i]
        q_tok = q[i, t]
        if i + 1 < L:
            x[i + 1] = x_i * q_tok
        a = np.float64(a_i)
        xq_tok = np.float64(x_i) * np.float64(q_tok)
        # x q(X_i) >= A eps / 2 >= ulp(A) / 2: the screen cannot pass, so it is not run
        if screens and not (a <= 0 or xq_tok >= a * half_eps):
            total, signed = row_total(q[i], qbits[i], shift)
            if _negligible(a_i, x_i, total, signed, V, eps, pinf, ninf):
                skipped[i] = True
                if i + 1 < L:
                    A[i + 1] = a_i  # A + x 0 = A
                continue
        last = i
        if i == 0 and root_row is not None:
            for e in range(V):
                qg[0, e] = root_row[e]
            b_tok = root_below
        else:
            ratio_keys(p[i], q[i], ratio, keys, sign, minus_one, kinf)
            if idx_b is None:
                order = rank_order32(keys, ties_low, buf_a, buf_b, idx_a)
            else:
                order = rank_order64(keys, ties_low, buf_a, idx_a, buf_b, idx_b)
            b_tok = skew_row(q[i], order, a_i, x_i, K, t, below, ud, power, qg[i])
        if i + 1 < L:
            A[i + 1] = a_i + x_i * b_tok
    return last
