"""Greedy multi-path block verification, GBV (Thomas & Pal, arXiv 2602.16961).

K draft paths X_1..X_K of length L are drawn i.i.d. from q (with replacement). At every node c
tokens are ranked by the ratio r(a) = p(a|c) / q(a|c), largest first, ties broken by the
smaller token id (ONE rule, used both for selecting the path and for the skewed law below;
tokens with q(a|c) = 0 are never drafted and rank last). This ranking of the children of every
node orders all sequences of one length lexicographically.

Selection. x* = the lexicographically largest drafted path: walk from the root and at each node
step to the drafted child of best rank (among the paths still through the current node).

Skewed draft law. x* is the maximum of K i.i.d. draws in a total order, so P(x*^i <= s) = Q(<= s)^K
and x* is autoregressive with conditionals q^G: at a node c on x* of depth i, with x = Q(c) the
draft probability of c, A = the q-mass of depth-i prefixes ranked strictly below c,
y(a) = x * sum_{b ranked below a} q(b|c) and z(a) = x q(a|c),

    q^G(a|c) = ((A + y + z)^K - (A + y)^K) / ((A + x)^K - A^K)
             = q(a|c) * S_K(A + y, z) / S_K(A, x),   S_K(u, d) = sum_{j<K} (u + d)^j u^(K-1-j),

(the second form, from (u+d)^K - u^K = d S_K(u, d), has no cancellation and no division by x; it is
what we compute). Along x*: A_0 = 0, x_0 = 1, A_{i+1} = A_i + y(X*_{i+1}), x_{i+1} = x_i q(X*_{i+1}|c).
At the root q^G(a) = F(a)^K - F(a-)^K with F the CDF of q in rank order.

Verification. Block verification (Sun et al., arXiv 2403.10444) of x* with q replaced by q^G:
weights w_i = min(1, w_{i-1} p/q^G), residuals max(w_i p - q^G, 0), h_i = S_i / (S_i + 1 - w_i),
P(tau = i) = h_i prod_{j>i} (1 - h_j). It is lossless because x* has the autoregressive law q^G
and the verifier sees only x* and the rows along it. For K = 1, S_K = 1 and q^G = q: exactly
block verification (in exact rationals, too).

Exact analysis. Because of this, the exact engine's default route for GBV (``analytic``,
[`gbv_block_law`][spectheory.verifiers.gbv.gbv_block_law]) is block verification against q^G
evaluated per node of the sequence tree; ``route="enumerate"`` keeps the enumeration of all joint
draft outcomes as the independent cross-check (the tests compare the two exactly).

Computation of the batched law (the same values as selecting by
[`select_path`][spectheory.verifiers.gbv.select_path] on all rank positions, then block
verification of the selected path against its q^G rows): rank positions are counted only at
nodes where two or more paths are still in the running
([`best_path`][spectheory.verifiers.gbv.best_path]); at a root whose K rows are equal (bit for
bit) they are read off the one sort that the root q^G row needs anyway (a stable sort of the
ratios' bit patterns, `_order_by_bits`, or on the kernels' route below its radix sort). Along
each selected path (`_path_law`, its rows read in
place) the masses A, x and the sorted rows come first, position by position; then the q^G rows
of all positions, and block verification against them, in batched passes. A q^G row below the
root needs no sort when x below(a) is under half an ulp of A for every token (then A + x below(a)
and A + x q(a) both round to A, and the row is q S_K(A, 0) / S_K(A, x) exactly; `_skew_step`),
which in float32 holds once the draft mass x of the prefix is below about 2^-25 A. Large outputs
reuse pooled memory ([`spectheory.runtime.buffers`][spectheory.runtime.buffers]).

Two routes for CPU float32/float64 rows, the same values bit for bit (a NaN result may carry
another sign or payload; the order of a row holding NaN draft probabilities is unspecified): from
`KERNEL_MIN_VOCAB` (16,384) tokens on, with p and q of one dtype, the rank order of a row (a
stable radix sort of its ratios' bit patterns on 16-bit digits), the masses below (float64 running sums from the worst rank, rounded to the row's dtype,
as ``torch.cumsum``) and the q^G row (Horner's rule, operation for operation) come from compiled
kernels (``spectheory.verifiers._gbv_cpu``, numba; about 1.2 ms per row at V = 151,936 against
2.4 ms); below that size, without numba, or with ``SPECTHEORY_NUMBA=0``, from torch operations.
On the kernels' route the root's q^G row is computed right after the sort that the selection
makes of a shared root (while order and row are in cache), and a row below the root is screened
from one compiled read of its sum and sign bits. Block verification against the q^G rows runs on
torch in both.

Rows on a GPU (the device route): the rows of a batch are ranked together, in chunks of
`DEVICE_CHUNK_ELEMENTS`, one sort per chunk for all its rows (at a depth where some rows pass the
screen, the others in one batch; `_device_below`), where the CPU's routes sort one row at a time
(a kernel launch and a host synchronisation per row on a GPU). The order is the CPU's, bit for
bit (`DEVICE_SORT` picks how the sort is made: unique int64 keys row | bit pattern | tie key in
one flat sort, a segmented sort of the bit patterns, or torch's float sort); the sums in rank
order are torch's cumulative sums on the device, so the law equals the CPU's to float rounding
(and the CPU route's bit for bit when the route is taken with CPU rows, as the tests do).

Mismatched tie-breaking ([`gbv_mismatched_ties`][spectheory.verifiers.gbv.gbv_mismatched_ties]):
selecting with one tie rule and ranking for q^G with the other (a constructed example of a tie-rule
mismatch between selection and ranking) makes the selected path's law differ from q^G on instances
with equal ratios, and the result is lossy; it is kept as a negative control for the checker.
"""

from __future__ import annotations

import threading

import numpy as np
from ..runtime._lazy import torch

from ..runtime import backend as B
from ..runtime import buffers, limits
from ..engine import nodes
from ..law import Law, MultiLaw, empty_law
from ..registry import VerifierSpec
from ..runtime._kernels import load_once
from ..runtime.errors import InputError, check_row_dtypes
from .block import BLOCK_NODE, block_rows, block_verification, block_weight

#: Tie rules: "low" ranks the smaller token id first among equal ratios, "high" the larger one.
TIE_RULES = ("low", "high")

#: From this vocabulary size on, rank orders and q^G rows of CPU float32/float64 rows go through
#: the compiled kernels of ``spectheory.verifiers._gbv_cpu`` (numba), the same values in fewer
#: passes; below it (and without numba) through torch operations. The kernels cost about 0.5 s
#: once per process (importing numba, loading the compiled code; 1.4 s the first time, when they
#: are compiled and cached) and save about 1.2 ms per sorted row at V = 151,936: worth it at
#: real vocabulary sizes, not for small tables.
KERNEL_MIN_VOCAB = 16384
#: Environment variable: "0" (or off, false, no) keeps GBV on the torch route (numba is then never
#: imported); unset, empty, "1" (on, true, yes) allow the kernels; any other value is refused in
#: one line ([`env_switch`][spectheory.runtime.limits.env_switch]).
KERNEL_ENV = "SPECTHEORY_NUMBA"
_KERNELS: list = []  # [the kernels module, or None where numba cannot be imported], once tried
_KERNELS_UNAVAILABLE: list = []  # why the kernels could not be loaded, where they could not
_SCRATCH = threading.local()  # per thread: the kernels' scratch arrays of the last (V, dtype)


def _kernels_for(rows, other=None):
    """The compiled kernels for rows like ``rows`` [..., V] (torch, CPU, float32/float64, V at
    least `KERNEL_MIN_VOCAB`; ``other``, the rows read beside them, of the same dtype, device and
    V), or None (then the torch route)."""
    if not (B.is_torch(rows) and rows.device.type == "cpu"
            and rows.dtype in (torch.float32, torch.float64)
            and rows.shape[-1] >= KERNEL_MIN_VOCAB):
        return None
    if other is not None and not (B.is_torch(other) and other.dtype == rows.dtype
                                  and other.device == rows.device
                                  and other.shape[-1] == rows.shape[-1]):
        return None
    if not limits.env_switch(KERNEL_ENV):  # validated on each read: a typo is refused
        return None
    return load_once(_KERNELS, _KERNELS_UNAVAILABLE, "._gbv_cpu", __package__)


class _KernelScratch:
    """Scratch arrays [V] of the kernels for one (V, dtype), kept per thread, and one path's
    q^G rows [L, V] (`path_rows`, kept while L is the same)."""

    def __init__(self, V: int, dtype):
        f = np.dtype(dtype)
        uint = np.uint32 if f.itemsize == 4 else np.uint64
        self.key = (V, f)
        self.ratio = np.empty(V, f)
        self.keys = self.ratio.view(uint)
        self.buf_a, self.buf_b = np.empty(V, np.uint64), np.empty(V, np.uint64)
        self.idx_a, self.idx_b = np.empty(V, np.int32), np.empty(V, np.int32)
        self.below, self.ud, self.power = (np.empty(V, f) for _ in range(3))
        self.sign = uint(1 << (8 * f.itemsize - 1))
        self.minus_one = uint(np.array(-1, f).view(uint)) ^ self.sign
        self.inf = uint(np.array(np.inf, f).view(uint)) ^ self.sign

    def path_rows(self, L: int):
        """Rows [L, V] of this dtype for one path's q^G rows (kept while L is the same)."""
        rows = getattr(self, "_path_rows", None)
        if rows is None or rows.shape[0] != L:
            rows = self._path_rows = np.empty((L, self.key[0]), self.key[1])
        return rows

    @staticmethod
    def get(V: int, dtype) -> "_KernelScratch":
        held = getattr(_SCRATCH, "held", None)
        if held is None or held.key != (V, np.dtype(dtype)):
            held = _SCRATCH.held = _KernelScratch(V, dtype)
        return held

    def order(self, kernels, p_row, q_row, ties: str):
        """(worst-first order [V] int32, odd) of one row (numpy views); the order is a view of
        this scratch (valid until the next call)."""
        if not (p_row.shape == q_row.shape == self.ratio.shape
                and p_row.dtype == q_row.dtype == self.ratio.dtype):
            raise ValueError("GBV kernels: p and q rows must match the scratch's length and "
                             "dtype")  # the kernels check no bounds
        odd = kernels.ratio_keys(p_row, q_row, self.ratio, self.keys, self.sign, self.minus_one,
                                 self.inf)
        if self.keys.itemsize == 4:
            order = kernels.rank_order32(self.keys, ties == "low", self.buf_a, self.buf_b,
                                         self.idx_a)
        else:
            order = kernels.rank_order64(self.keys, ties == "low", self.buf_a, self.idx_a,
                                         self.buf_b, self.idx_b)
        return order, bool(odd)


#: On a GPU (torch rows on any device but the CPU) the rows of a batch are ranked, and their q^G
#: rows computed, in chunks of at most this many elements (int64 sort keys and orders of about
#: 1 GiB each), all rows of a chunk in one sort. The CPU's cache-sized chunks
#: (`RANK_CHUNK_ELEMENTS`) and one sort per row cost a kernel launch and a host synchronisation
#: per row there (GBV's law at B = 256, V = 151,936 took 120-330 ms on an H100 that way, 10-49x
#: block verification's; docs/gpu.md).
DEVICE_CHUNK_ELEMENTS = 2**27
#: How the device route sorts: "flat" (float32 rows: one sort of unique int64 keys
#: row << (32 + t) | bit pattern << t | tie key, t the bits of V - 1, all rows of a chunk at
#: once; at most 2^(31 - t) rows, 2^13 at V = 151,936), "rows" (one stable segmented sort of the
#: [n, V] int32/int64 bit patterns), "float" (torch's stable descending sort of the ratios,
#: which takes a -0.0 ratio for 0.0). The order of `_order_by_bits` in each;
#: ``benchmarks/bench_gbv_device.py`` times the three on a GPU.
DEVICE_SORT = "flat"
_DEVICE_ROUTE_ON_CPU = False  # tests: take the device route with CPU rows (the same values)


def _device(t) -> bool:
    """Whether torch rows ``t`` take the device route (rows off the CPU)."""
    return B.is_torch(t) and (t.device.type != "cpu" or _DEVICE_ROUTE_ON_CPU)


def _device_worst_first(r, ties: str):
    """Worst-first rank order [n, V] (long) of float ratios r [n, V] (device rows), every row of
    the chunk in one sort: the order of `_order_by_bits` (``worst_first``), which sorts the
    ratios' bit patterns as signed integers (-1, the ratio of q = 0, ranks last; among equal
    ratios the larger id ranks last under ties "low", the smaller under "high")."""
    n, V = r.shape
    dev = r.device
    tb = max(1, (V - 1).bit_length())  # bits of the tie key
    if DEVICE_SORT == "flat" and r.dtype == torch.float32 and n <= 2**(31 - tb):
        # unique int64 keys: the row (bits 32 + tb..62), the pattern shifted to unsigned (bits
        # tb..tb + 31), the tie key (bits 0..tb - 1): ascending = row by row, worst ratio
        # first, ties as the rule says
        tok = torch.arange(V, device=dev)
        tie = (V - 1) - tok if ties == "low" else tok  # listed first = ranked worse
        key = r.contiguous().view(torch.int32).to(torch.int64).add_(2**31).bitwise_left_shift_(tb)
        key.bitwise_or_(tie).bitwise_or_(torch.arange(n, device=dev).unsqueeze(1) << (32 + tb))
        low = torch.sort(key.reshape(-1)).values.reshape(n, V).bitwise_and_(2**tb - 1)
        return low.neg_().add_(V - 1) if ties == "low" else low
    if DEVICE_SORT in ("flat", "rows") and r.dtype in (torch.float32, torch.float64):
        flip = ties == "low"  # a stable ascending sort lists equal keys in id order: reversed
        key = r.contiguous().view(_int_view(r.dtype))
        pos = torch.sort(key.flip(-1) if flip else key, dim=-1, stable=True).indices
        return pos.neg_().add_(V - 1) if flip else pos
    if ties == "low":
        order = B.argsort(r, axis=-1, descending=True)
    else:
        order = (V - 1) - B.argsort(B.flip(r, -1), axis=-1, descending=True)
    return B.flip(order, -1)


def _device_below(q_rows, p_rows, ties: str):
    """below [n, V] of `below_mass` for device rows [n, V] (n >= 1): one sort per chunk of
    `DEVICE_CHUNK_ELEMENTS`, the q-mass in rank order summed from the last rank up and put back
    in token order."""
    n, V = q_rows.shape
    below = torch.empty_like(q_rows)
    step = max(1, DEVICE_CHUNK_ELEMENTS // max(V, 1))
    for r0 in range(0, n, step):
        q, p = q_rows[r0:r0 + step], p_rows[r0:r0 + step]
        order = _device_worst_first(_ratio(p, q), ties)
        at_or_below = torch.gather(q, -1, order).cumsum_(-1)  # last m + 1 ranks
        out = below[r0:r0 + step]
        out.scatter_(-1, order[:, 1:], at_or_below[:, :-1])
        out.scatter_(-1, order[:, :1], 0.0)  # the last rank has nothing below it
    return below


def _ratio(p_rows, q_rows, out=None):
    """p/q with ratio -1 where q = 0 (never drafted: ranked last); into ``out`` (torch) if
    given."""
    if B.is_torch(p_rows):
        r = torch.div(p_rows, q_rows, out=out)
        if q_rows.numel() and not float(q_rows.amin()) > 0:  # a read-only screen for zeros
            r = r.masked_fill_(q_rows == 0, -1)  # (a NaN minimum does not rule zeros out)
        return r
    return B.safe_div(p_rows, q_rows, B.scalar(p_rows, -1))


_INT_VIEW: dict = {}  # torch float dtype -> the signed integer dtype of its bit patterns


def _int_view(dtype):
    """The signed integer dtype of a float32/float64 dtype's bit patterns (None for others)."""
    if not _INT_VIEW:
        _INT_VIEW.update({torch.float32: torch.int32, torch.float64: torch.int64})
    return _INT_VIEW.get(dtype)


def _same_bits(a, b) -> bool:
    """Whether two rows hold the same bit patterns (``torch.equal`` takes -0.0 for 0.0, and the
    rank orders here read the bits)."""
    view = _int_view(a.dtype)  # the rows of one batch share a dtype
    if view is None:  # equal values with equal signs (zeros included)
        return torch.equal(a, b) and torch.equal(torch.signbit(a), torch.signbit(b))
    return torch.equal(a.view(view), b.view(view))


def _order_by_bits(r, ties: str, worst_first: bool = False, keep_bits: bool = False,
                   scratch=None):
    """Rank order (best first) of float ratios r [..., V] (float32/float64, CPU) by one stable
    sort per row of their bit patterns.

    Non-negative float bit patterns, read as signed integers, increase with the value (and -1,
    the ratio of q = 0, has a negative pattern), so the best-first order is the ascending order of
    the complemented patterns ~bits(r) (= -bits - 1, no overflow), ties in token order: a
    stable sort of one row (torch's CPU radix sort, about 1 ms for 151,936 int32 keys, against
    6 ms for numpy's sort of packed int64 keys) gives ties "low" directly; ties "high" sort the
    reversed row and map the positions back (id = V - 1 - position). ``worst_first``: the reverse
    order, from the patterns themselves (ties reversed as well). ``keep_bits``: return
    ``(order, sorted patterns)`` (ascending in the sort's key, i.e. ``bits`` when
    ``worst_first``). ``scratch`` (one row): (sorted patterns, order) arrays [V] that receive
    the sort's outputs; the order returned is then a view of the second."""
    V = r.shape[-1]
    bits = r.contiguous().view(_int_view(r.dtype)).reshape(-1, V)
    flip = (ties == "high") != worst_first
    if bits.shape[0] == 1 and not keep_bits:  # one row: the sort's output is the order
        key = bits[0] if worst_first else torch.bitwise_not(bits[0])
        pos = torch.sort(key.flip(0) if flip else key, stable=True, out=scratch)[1]
        if flip:
            pos = torch.sub(V - 1, pos, out=pos if scratch is not None else None)
        return pos.reshape(tuple(r.shape))
    order = torch.empty(bits.shape, dtype=torch.long)
    kept = torch.empty_like(bits) if keep_bits else None
    for i in range(bits.shape[0]):  # one row at a time: torch sorts 2-D int rows far slower
        key = bits[i] if worst_first else torch.bitwise_not(bits[i])
        if flip:
            key = key.flip(0)
        values, pos = torch.sort(key, stable=True)
        if flip:
            pos = torch.sub(V - 1, pos)
        order[i] = pos
        if keep_bits:
            kept[i] = values
    order = order.reshape(tuple(r.shape))
    return (order, kept.reshape(tuple(r.shape))) if keep_bits else order


def _rank_order(r, ties: str, worst_first: bool = False, scratch=None):
    """Token order by rank (ratio descending, ties by id per ``ties``): one sort per row;
    ``worst_first``: the same order reversed. ``scratch``: as for `_order_by_bits` (used where
    it sorts)."""
    V = r.shape[-1]
    if (B.is_torch(r) and r.dtype in (torch.float32, torch.float64)
            and r.device.type == "cpu"):
        return _order_by_bits(r, ties, worst_first, scratch=scratch)
    if ties == "low":
        order = B.argsort(r, axis=-1, descending=True)
    else:  # stable sort of the reversed token axis, mapped back: equal ratios, larger id first
        order = (V - 1) - B.argsort(B.flip(r, -1), axis=-1, descending=True)
    return B.flip(order, -1) if worst_first else order


def rank_and_below(q_rows, p_rows, ties: str = "low"):
    """Rank of every token at each node and the draft mass ranked strictly below it.

    ``q_rows``, ``p_rows`` [..., V] conditionals at the same nodes. Returns ``(pos, below)``:
    ``pos[..., a]`` the rank position of token a (0 = largest p/q) and ``below[..., a]`` =
    sum_{b ranked below a} q(b|node). Tokens with q = 0 get ratio -1 (ranked last). One stable
    sort per row; positions and masses are put back in token order by a scatter (O(V)).
    """
    if ties not in TIE_RULES:
        raise ValueError(f"unknown tie rule {ties!r}; choose from {TIE_RULES}")
    _check_rows(q_rows, p_rows, "GBV rank_and_below")
    V = q_rows.shape[-1]
    order = _rank_order(_ratio(p_rows, q_rows), ties)
    ranks = B.broadcast_to(B.arange(V, order), tuple(order.shape))
    pos = B.unsort(ranks.contiguous() if B.is_torch(order) else np.ascontiguousarray(ranks),
                  order)
    return pos, _below_from_order(q_rows, order)


def _below_from_order(q_rows, order, worst_first: bool = False, out=None, scratch=None):
    """below[..., a] = q-mass of the tokens after a in ``order`` (best first; ``worst_first``:
    ``order`` lists the ranks last to first): a cumulative sum in rank order from the last rank
    up, put back in token order by one scatter (into ``out``, torch, if given; ``scratch``, one
    row: two float arrays [V] for the sorted row and its sums)."""
    if B.is_torch(q_rows):
        rev = order if worst_first else order.flip(-1)
        if q_rows.numel() == q_rows.shape[-1]:  # one row: index_select, faster than gather
            q_rev = torch.index_select(q_rows.reshape(-1), 0, rev.reshape(-1),
                                       out=None if scratch is None else scratch[0])
            q_rev = q_rev.view(q_rows.shape)
        else:
            q_rev = torch.gather(q_rows, -1, rev)
        at_or_below = torch.cumsum(q_rev, dim=-1, out=None if scratch is None else
                                   scratch[1].view(q_rows.shape))  # last m + 1 ranks
        below = torch.empty_like(q_rows) if out is None else out
        below.scatter_(-1, rev[..., 1:], at_or_below[..., :-1])
        return below.scatter_(-1, rev[..., :1], 0.0)  # the last rank has nothing below it
    if worst_first:
        order = B.flip(order, -1)
    q_sorted = B.take_along(q_rows, order, axis=-1)
    at_or_below = B.flip(B.cumsum(B.flip(q_sorted, -1), axis=-1), -1)  # sum over ranks >= j
    below_sorted = B.concat([at_or_below[..., 1:], B.zeros_like(q_sorted[..., :1])], axis=-1)
    return B.unsort(below_sorted, order)


def below_mass(q_rows, p_rows, ties: str = "low"):
    """``below`` of [`rank_and_below`][spectheory.verifiers.gbv.rank_and_below] alone (no rank
    positions): one sort, one scatter."""
    if ties not in TIE_RULES:
        raise ValueError(f"unknown tie rule {ties!r}; choose from {TIE_RULES}")
    _check_rows(q_rows, p_rows, "GBV below_mass")
    if _device(q_rows) and q_rows.dim() == 2 and q_rows.shape[0] > 0:
        return _device_below(q_rows, p_rows, ties)
    worst_first = B.is_torch(q_rows)
    order = _rank_order(_ratio(p_rows, q_rows), ties, worst_first)
    return _below_from_order(q_rows, order, worst_first)


def _power_sum(u, d, K: int, own_d: bool = False, work=None):
    """S_K(u, d) = sum_{j<K} (u + d)^j u^(K-1-j) = ((u + d)^K - u^K) / d, without division.
    ``own_d``: ``d`` is a fresh torch array of the result's shape that may be overwritten.
    ``work`` (torch, with ``own_d``): two arrays of d's shape that receive the result and a
    temporary instead of new allocations (the same operations)."""
    # Horner form: S_1 = 1, S_{j+1} = (u + d) S_j + u^j.
    if B.is_torch(d) and K > 1:  # same operations, in place
        fits = own_d and u.dim() <= d.dim() and all(
            a in (1, b) for a, b in zip(reversed(u.shape), reversed(d.shape)))
        ud = d.add_(u) if fits else u + d  # u + d = d + u, in place when d has the full shape
        if work is not None and fits and tuple(u.shape) == tuple(d.shape):
            total = torch.add(ud, u, out=work[0])
            power = work[1].copy_(u)
        else:
            total = ud + u  # S_2 = (u + d) + u
            power = u.clone()
        for _ in range(K - 2):
            power.mul_(u)
            total.mul_(ud).add_(power)
        return total
    ud = u + d
    total = B.ones_like(ud)
    power = B.ones_like(u)
    for _ in range(K - 1):
        power = power * u
        total = total * ud + power
    return total


def _skew_from_u(q_rows, u, x1, den1, K: int, work=None):
    """q^G rows q S_K(u, x q) / S_K(A, x) ([`skewed_rows`][spectheory.verifiers.gbv.skewed_rows])
    from u = A + x below (or u = A, see `_negligible_rows`), x1 [N, 1] and the denominators
    den1 = S_K(A, x) [N, 1]; rows with den = 0 fall back to q. On torch the product and quotient
    run in place on the fresh numerator (q num = num q: the same values). ``work`` (torch): three
    arrays of q_rows' shape for x q, the result and a temporary (no allocation)."""
    if work is not None:
        d = torch.mul(q_rows, x1, out=work[0])  # q x = x q
        num = _power_sum(u, d, K, own_d=True, work=work[1:])
    else:
        num = _power_sum(u, x1 * q_rows, K, own_d=True)
    if B.is_torch(num) and tuple(num.shape) == tuple(q_rows.shape):
        num.mul_(q_rows)
        if bool((den1 != 0).all()):
            return num.div_(den1)
        zero = den1 == 0
        return torch.where(zero, q_rows, num.div_(torch.where(zero, torch.ones_like(den1), den1)))
    return B.safe_div(q_rows * num, den1, q_rows)


def skewed_rows(q_rows, below, A, x, K: int):
    """q^G(.|c) rows [N, V] at N nodes with masses ``A`` [N] (ranked below c) and ``x`` = Q(c)."""
    A1, x1 = B.expand_dims(A, -1), B.expand_dims(x, -1)
    return _skew_from_u(q_rows, A1 + x1 * below, x1, _power_sum(A1, x1, K), K)


_NP_FLOAT = {}  # torch float dtype -> numpy scalar type, filled on first use


def _np_float(dtype):
    """The numpy scalar type of a torch float32/float64 dtype (None for others)."""
    if not _NP_FLOAT:
        _NP_FLOAT.update({torch.float32: np.float32, torch.float64: np.float64})
    return _NP_FLOAT.get(dtype)


def _negligible_rows(q_rows, A, x, row_stats=None):
    """Row by row (q rows [N, V], A, x [N], torch floats): True where x below(a) is under half
    a unit in the last place of A for every token a, so that A + x below(a) rounds to A exactly:
    the q^G row then does not depend on the ranking (no sort is needed) and the mass A of the
    child is A. A screen with a rigorous bound: below(a) <= M = (row sum) (1 + 2 V eps) (the
    cumulative sums are exact in double up to rounding to the row's dtype; any float sum is
    within (V - 1) eps / 2 of the true one), and fl(x b) <= |x| M (1 + eps). Rows with a
    negative entry or a NaN, and A = 0, never pass. ``row_stats`` (one CPU row): its sum and
    minimum as floats, read beforehand (any float sum of the row is within the bound). Returns a
    bool tensor [N], or None where the screen does not apply (exact mode, integer rows,
    V eps > 1/4)."""
    if not B.is_torch(q_rows) or not q_rows.dtype.is_floating_point or q_rows.numel() == 0:
        return None
    V = q_rows.shape[-1]
    eps = torch.finfo(q_rows.dtype).eps
    if V * eps > 0.25:
        return None
    f = _np_float(q_rows.dtype)
    if f is not None and q_rows.numel() == V and q_rows.device.type == "cpu":  # one node
        a = A.item()
        if not 0 < a < float("inf"):  # never passes: the row is not read
            return torch.tensor([False])
        total, least = row_stats if row_stats is not None else (q_rows.sum().item(),
                                                                q_rows.amin().item())
        return torch.tensor([_negligible_node(a, x.item(), total, least, V, q_rows.dtype)])
    M = q_rows.sum(dim=-1).double() * (1 + 2 * V * eps)
    Ad = A.double()
    inf = torch.full_like(A, float("inf"))
    ulp = torch.minimum(torch.nextafter(A, inf).double() - Ad,
                        Ad - torch.nextafter(A, -inf).double())
    ok = x.double().abs() * M * (1 + 4 * eps) < ulp / 2
    return ok & (q_rows.amin(dim=-1) >= 0) & (A > 0)


def _negligible_node(a: float, x: float, total: float, least: float, V: int, dtype) -> bool:
    """`_negligible_rows` at one CPU node of a float ``dtype`` whose screen applies (V eps <=
    1/4), from its A, x and its row's sum as Python floats; ``least`` is the row's least entry,
    or any number of the same sign (the kernels' route passes -1.0 when an entry's sign bit is
    set, else 0.0): the screen never passes a row with a negative entry."""
    if not (0 < a < float("inf") and least >= 0):
        return False
    f, eps = _np_float(dtype), torch.finfo(dtype).eps
    up = float(np.nextafter(f(a), f(np.inf))) - a
    down = a - float(np.nextafter(f(a), f(-np.inf)))
    M = total * (1 + 2 * V * eps)
    return abs(x) * M * (1 + 4 * eps) < min(up, down) / 2


def _below_rows(q_rows, p_rows, ties: str, skip):
    """below [N, V] of `below_mass`, computed (one sort each) only for the rows not in ``skip``
    (a bool tensor [N]); those rows get 0."""
    below = torch.zeros_like(q_rows)
    if _device(q_rows):  # the rows that need a sort, in one batch
        need = torch.nonzero(~skip).reshape(-1)
        return below.index_copy_(0, need, _device_below(q_rows.index_select(0, need),
                                                        p_rows.index_select(0, need), ties))
    for r in torch.nonzero(~skip).reshape(-1).tolist():
        below[r:r + 1] = below_mass(q_rows[r:r + 1], p_rows[r:r + 1], ties)
    return below


def _skew_negligible(q_rows, A, den1, K: int, out=None):
    """q^G rows q S_K(A, 0) / S_K(A, x) of nodes whose x below is negligible against A
    (`_negligible_rows`), from the denominators den1 = S_K(A, x) [N, 1]; rows with den = 0 fall
    back to q. ``out`` (torch) receives them. (The kernels' route: `_gbv_cpu.path_tail`.)"""
    num = B.expand_dims(_power_sum(A, B.zeros_like(A), K), -1)  # u = A, u + d = A
    if B.is_torch(q_rows) and bool((den1 != 0).all()):
        return torch.mul(q_rows, num, out=out).div_(den1)
    row = B.safe_div(q_rows * num, den1, q_rows)
    if out is not None:
        out.copy_(row)
        return out
    return row


def _skew_step(q_rows, p_rows, tok, A, x, K: int, ties: str):
    """One depth of the q^G recursion along drafted paths at N nodes: q^G rows [N, V], their
    denominators S_K(A, x) [N], and (A, x) of the drafted children tok [N]: A += x below(tok),
    x *= q(tok) (module doc).

    When x below is negligible against A (`_negligible_rows`), so is x q(a) <= x M at every
    token: A + x below(a) and A + x q(a) both round to A, the numerator S_K(A + x below, x q) is
    the same number S_K(A, 0) at every token (the same float operations on the same values), the
    row is q S_K(A, 0) / S_K(A, x) (no sort, two passes) and A is unchanged: the same values. In
    a batch where only some rows pass, those rows take below = 0 in the general formula, which
    performs the same operations on the same values (A + x 0 = A), so only the others are
    sorted."""
    t = B.expand_dims(tok, -1)
    A1, x1 = B.expand_dims(A, -1), B.expand_dims(x, -1)
    den = _power_sum(A, x, K)
    den1 = B.expand_dims(den, -1)
    skip = _negligible_rows(q_rows, A, x)
    if skip is not None and bool(skip.all()):
        row = _skew_negligible(q_rows, A, den1, K)
        A_next = A
    else:
        below = (below_mass(q_rows, p_rows, ties) if skip is None or not bool(skip.any())
                 else _below_rows(q_rows, p_rows, ties, skip))
        row = _skew_from_u(q_rows, A1 + x1 * below, x1, den1, K)
        A_next = A + x * B.take_along(below, t, axis=-1)[:, 0]
    return row, den, A_next, x * B.take_along(q_rows, t, axis=-1)[:, 0]


def skewed_levels(q_levels, p_levels, K: int, V: int):
    """q^G tables below C contexts, level by level (``q_levels[d]``, ``p_levels[d]`` [C V^d, V],
    d < L): at each context A = 0, x = 1; for a child c a, A = A_c + x_c below_c(a) and
    x = x_c q(a|c) (module doc). Returns the list of [C V^d, V] rows of q^G."""
    C = q_levels[0].shape[0]
    A = B.full((C,), 0, q_levels[0])
    x = B.full((C,), 1, q_levels[0])
    out = []
    for d, q in enumerate(q_levels):
        below = below_mass(q, p_levels[d], "low")
        out.append(skewed_rows(q, below, A, x, K))
        A = (B.expand_dims(A, 1) + B.expand_dims(x, 1) * below).reshape(-1)
        x = (B.expand_dims(x, 1) * q).reshape(-1)
    return out


def gbv_block_law(how, q_levels, p_levels, V: int, L: int):
    """Analytic route of GBV (i.i.d. drafting): the exact block law below C contexts is that of
    block verification with the draft q replaced by q^G (the selected path has the
    autoregressive law q^G and the verifier sees only it), computed per node of the sequence
    tree: ~V^L work instead of the V^(L K) joint outcomes of the enumeration, the same law
    (equal in exact rationals)."""
    from ..engine.perdraft import BlockLaw
    from ..engine.nodes import node_block_law
    from .block import BLOCK_NODE

    qg = skewed_levels(q_levels, p_levels, how.paths, V)
    nodes = node_block_law(BLOCK_NODE, qg, p_levels, V, L, name=how.spec.name)
    C = p_levels[0].shape[0]
    return BlockLaw(nodes.tau_pmf(C), [None] + [nodes.emitted(d) for d in range(L + 1)])


def _first_true(mask, like_index):
    """Index of the first True along axis 1 of ``mask`` [B, K] (every row has one)."""
    K = mask.shape[1]
    idx = B.broadcast_to(B.expand_dims(B.arange(K, like_index), 0), mask.shape)
    return B.amin(B.where(mask, idx, K), axis=1)


#: Elements per chunk of rows when ranking drafted tokens on torch (keeps temporaries in cache).
RANK_CHUNK_ELEMENTS = 2**18

#: Up to this many rows, `_rank_rows` counts row by row on the CPU (two slices per row).
_FEW_ROWS = 16


def _rank_rows(q, p, x, ties: str):
    """Number of tokens ranked above token x[...] in each row: q, p [..., V], x [...]."""
    V = q.shape[-1]
    r = _ratio(p, q)
    if B.is_torch(r) and 0 < r.numel() <= _FEW_ROWS * V and not _device(r):
        # a few rows: one comparison per token, >= on the side where an equal ratio ranks above
        # (the same count as below; a NaN ratio compares false either way)
        counts = []
        for row, t in zip(r.reshape(-1, V), x.reshape(-1).tolist()):
            rt = row[t]
            if ties == "low":
                n = torch.count_nonzero(row[:t] >= rt) + torch.count_nonzero(row[t:] > rt)
            else:
                n = torch.count_nonzero(row[:t + 1] > rt) + torch.count_nonzero(row[t + 1:] >= rt)
            counts.append(n)
        return torch.stack(counts).reshape(tuple(x.shape))
    xi = B.expand_dims(x, -1)
    rx = B.take_along(r, xi, axis=-1)
    ids = B.arange(V, x)
    earlier = (lambda: (ids < xi) if ties == "low" else (ids > xi))
    if B.is_torch(r):  # count r > rx; ties (another token with the same ratio) are rare
        above = (r > rx).sum(dim=-1, dtype=torch.int64)
        n_eq = (r == rx).sum(dim=-1, dtype=torch.int64)
        tied = n_eq > 1
        if bool(tied.any()):
            above = above + torch.where(tied, ((r == rx) & earlier()).sum(dim=-1), 0)
        return above
    above = (r > rx) | ((r == rx) & earlier())
    return B.sum(B.to_int(above), axis=-1)


def drafted_rank(drafts, q, p, ties: str = "low"):
    """Rank position [B, K, L] of every drafted token at its node (0 = best): the number of tokens
    ranked above it, by the same order as
    [`rank_and_below`][spectheory.verifiers.gbv.rank_and_below] (ratio descending, ties by token
    id), counted by comparisons (O(V) per node, no sort; on torch a few paths at a time, so the
    temporaries stay small). Inputs are checked first
    ([`check_inputs`][spectheory.verifiers.gbv.check_inputs])."""
    check_inputs(drafts, q, p, "GBV drafted_rank")
    if ties not in TIE_RULES:
        raise InputError(f"unknown tie rule {ties!r}; choose from {TIE_RULES}")
    L, V = drafts.shape[-1], q.shape[-1]
    lead = tuple(drafts.shape)
    x = B.as_index(drafts, q)
    if not B.is_torch(q):
        return _rank_rows(q, p[:, :, :L], x, ties)
    qf = q.reshape(-1, L, V)
    pf = p.reshape(-1, L + 1, V)
    xf = x.reshape(-1, L)
    n = qf.shape[0]
    step = max(1, (DEVICE_CHUNK_ELEMENTS if _device(q) else RANK_CHUNK_ELEMENTS) // (L * V))
    out = torch.empty(n, L, dtype=torch.long, device=q.device)
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        out[r0:r1] = _rank_rows(qf[r0:r1], pf[r0:r1, :L], xf[r0:r1], ties)
    return out.reshape(lead)


def select_path(drafts, dpos, V: int):
    """Index [B] of the lexicographically best drafted path, from the rank positions ``dpos``
    [B, K, L] of the drafted tokens (walk from the root keeping the best-ranked children)."""
    L = drafts.shape[-1]
    alive = drafts[:, :, 0] == drafts[:, :, 0]
    for i in range(L):
        key = B.where(alive, dpos[:, :, i], V)
        alive = alive & (key == B.amin(key, axis=1, keepdims=True))
    return _first_true(alive, drafts)


def _nonzero(mask):
    """Indices of the True entries of a 1-D mask (torch long / numpy int64)."""
    if B.is_torch(mask):
        return torch.nonzero(mask).reshape(-1)
    return np.flatnonzero(mask)


def best_path(drafts, q, p, ties: str = "low", root_orders: dict | None = None):
    """Index [B] of the lexicographically best drafted path: the same index as
    ``select_path(drafts, drafted_rank(drafts, q, p, ties), V)``, with the rank positions counted
    only where they decide the walk, i.e. at depth i for the blocks where two or more paths are
    still in the running (every block at the root when K >= 2; below it, only where paths share
    their prefix so far). Elsewhere a rank position does not change which path is kept, so it is
    not computed: O(V) work per contested node instead of per drafted node.

    ``root_orders`` (a dict; CPU rows, float32 on the torch route, float32 or float64 on the
    kernels' route): at the root of a block whose K root rows are equal, the rank positions are
    read off one sort of the shared row (`_root_ranks`) and its order (worst rank first; a torch
    [1, V] tensor) is stored under the block's index, for the q^G row at the root of the
    selected path; on the kernels' route that q^G row itself is stored (with the drafted
    tokens' masses below), computed while the sort is in cache. Inputs are checked first
    ([`check_inputs`][spectheory.verifiers.gbv.check_inputs])."""
    check_inputs(drafts, q, p, "GBV best_path")
    q, p = B.values(q, p)  # rows that require grad: their values
    if ties not in TIE_RULES:
        raise InputError(f"unknown tie rule {ties!r}; choose from {TIE_RULES}")
    return _best_path(drafts, q, p, ties, root_orders)


def _best_path(drafts, q, p, ties: str, root_orders: dict | None, root_space=None):
    """`best_path`; ``root_space`` [B, V] (torch, CPU, optional): where the kernels' route
    writes block b's root q^G row (`_RootRow`) instead of a new array (the law's last correction
    row of the block, written only after the row is read)."""
    Bsz, K, L = drafts.shape
    V = q.shape[-1]
    x = B.as_index(drafts, q)
    alive = drafts[:, :, 0] == drafts[:, :, 0]
    for i in range(L):
        rows = _nonzero(B.sum(B.to_int(alive), axis=1) >= 2)
        if rows.shape[0] == 0:
            break  # one path left in every block: the rest of the walk keeps it
        dpos = B.full((Bsz, K), V, x)  # uncontested blocks: any constant
        if B.is_torch(q):  # a few blocks at a time, their rows read in place where one
            step = max(1, (DEVICE_CHUNK_ELEMENTS if _device(q) else RANK_CHUNK_ELEMENTS)
                       // (K * V))
            listed = rows.tolist()
            for c0 in range(0, len(listed), step):
                sel = listed[c0:c0 + step]
                at = slice(sel[0], sel[0] + 1) if len(sel) == 1 else rows[c0:c0 + step]
                if i == 0 and root_orders is not None and len(sel) == 1 and not _device(q):
                    ranked = _root_ranks(q[sel[0], :, 0], p[sel[0], :, 0], x[sel[0], :, 0], ties,
                                         None if root_space is None else root_space[sel[0]])
                    if ranked is not None:
                        dpos[sel[0]], root_orders[sel[0]] = ranked
                        continue
                dpos[at] = _rank_rows(q[at, :, i], p[at, :, i], x[at, :, i], ties)
        else:
            dpos[rows] = _rank_rows(q[rows, :, i], p[rows, :, i], x[rows, :, i], ties)
        key = B.where(alive, dpos, V)
        alive = alive & (key == B.amin(key, axis=1, keepdims=True))
    return _first_true(alive, drafts)


#: bits of the float32 -1.0 (the ratio of a token with q = 0), as a signed int32
_MINUS_ONE_BITS = int(np.array(-1.0, dtype=np.float32).view(np.int32))
_INF_BITS = int(np.array(np.inf, dtype=np.float32).view(np.int32))


class _RootRow:
    """On the kernels' route, what `_root_ranks` keeps of a shared root for the selected path
    (instead of its order): the root's q^G row ``row`` [V] (numpy, A = 0, x = 1: every path
    through the root has it) and ``below`` {drafted token: below(token)} (the mass A of its
    child), both from `_gbv_cpu.skew_row` right after the sort, while order and row are in
    cache."""

    __slots__ = ("row", "below")

    def __init__(self, row, below):
        self.row, self.below = row, below


def _root_ranks(q_rows, p_rows, x, ties: str, row_out=None):
    """Rank positions [K] of the drafted tokens x [K] at a root whose K rows q_rows, p_rows
    [K, V] (torch float32, CPU; float64 too on the kernels' route) are equal, from ONE sort of
    the shared row's ratio bit patterns (the one q^G at the root needs): position = V - 1 - (the
    token's index in the worst-first order). Returns ``(positions, worst-first order)`` (a torch
    [1, V] order), or on the kernels' route ``(positions, _RootRow)`` (the root's q^G row and the
    drafted tokens' masses below, computed right after the sort), or None (the caller counts) when the
    rows differ (bit for bit) or a ratio is NaN, -0.0 or negative other than the -1 of q = 0,
    where the bit order and the comparisons of `_rank_rows` could disagree. ``row_out`` [V]
    (torch, optional): where the kernels' route writes the root's q^G row."""
    K, V = q_rows.shape
    kernels = _kernels_for(q_rows, p_rows)
    if kernels is None and (q_rows.dtype != torch.float32 or q_rows.device.type != "cpu"
                            or p_rows.dtype != q_rows.dtype):
        return None
    iv = np.int32 if q_rows.dtype == torch.float32 else np.int64
    qn, pn = q_rows.detach().numpy().view(iv), p_rows.detach().numpy().view(iv)
    same = kernels.rows_equal if kernels is not None else np.array_equal
    for k in range(1, K):  # bit for bit: then every ratio, key and count is the same
        if not (same(qn[k], qn[0]) and same(pn[k], pn[0])):
            return None
    if kernels is not None:
        scratch = _KernelScratch.get(V, _np_float(q_rows.dtype))
        order, odd = scratch.order(kernels, pn[0].view(scratch.ratio.dtype),
                                   qn[0].view(scratch.ratio.dtype), ties)
        if odd:
            return None
        toks = x.contiguous().numpy()
        pos = kernels.positions(order, toks, np.empty(K, np.int64))
        # the root's q^G row (A = 0, x = 1; the same for every path through this root) while
        # its order and row are in cache, and below(a) of the drafted tokens
        f = scratch.ratio.dtype.type
        row = (row_out.numpy() if row_out is not None and row_out.dtype == q_rows.dtype
               else np.empty(V, scratch.ratio.dtype))
        kernels.skew_row(qn[0].view(row.dtype), order, f(0), f(1), K, int(toks[0]),
                         scratch.below, scratch.ud, scratch.power, row)
        return torch.from_numpy(pos), _RootRow(row, {int(t): scratch.below[t] for t in toks})
    r = _ratio(p_rows[:1], q_rows[:1])
    order, kept = _order_by_bits(r, ties, worst_first=True, keep_bits=True)
    bits = kept[0].numpy()  # ascending
    if int(bits[-1]) > _INF_BITS:
        return None  # a NaN ratio
    if int(bits[0]) < 0:  # negative bit patterns: only -1.0 is allowed
        if int(bits[0]) != _MINUS_ONE_BITS:
            return None
        j = int(np.searchsorted(bits, _MINUS_ONE_BITS + 1))
        if j < V and int(bits[j]) < 0:
            return None
    mine = r[0].detach().numpy().view(np.int32)[x.tolist()]
    lo = np.searchsorted(bits, mine, side="left")
    hi = np.searchsorted(bits, mine, side="right")
    at = lo.copy()
    for j in np.flatnonzero(hi - lo > 1).tolist():  # tied ratios: the token's place in its run
        run = order[0, int(lo[j]):int(hi[j])]
        at[j] = lo[j] + int(torch.nonzero(run == int(x[j])).reshape(-1)[0])
    return torch.from_numpy(V - 1 - at.astype(np.int64)), order


def _gather_path(x, k):
    """x[b, k[b]] for x [B, K, ...]."""
    idx = k.reshape((k.shape[0], 1) + (1,) * (x.ndim - 2))
    idx = B.broadcast_to(idx, (x.shape[0], 1) + tuple(x.shape[2:]))
    return B.take_along(x, idx, axis=1)[:, 0]


def _skewed_path_rows(d_sel, q_sel, p_sel, K: int, ties: str, denominators=None):
    """q^G rows [B, L, V] along the selected paths: A_0 = 0, x_0 = 1, then per position
    `_skew_step` (one sort,
    [`below_mass`][spectheory.verifiers.gbv.below_mass], unless x below is negligible against A)
    and the skewed row; A += x below(X_i), x *= q(X_i). On torch a few rows at a time (their
    temporaries stay in cache), written into one array.

    ``denominators`` [B, L], if given, receives the skew denominator S_K(A, x) of every position
    (zero where the row falls back to q; [`spectheory.cli.audit`][spectheory.cli.audit] reports that
    underflow)."""
    Bsz, L = d_sel.shape
    V = q_sel.shape[-1]
    if B.is_torch(q_sel):
        out = torch.empty_like(q_sel)
        step = max(1, (DEVICE_CHUNK_ELEMENTS if _device(q_sel) else RANK_CHUNK_ELEMENTS) // V)
    else:
        out, step = None, max(Bsz, 1)
    rows_all = []
    for b0 in range(0, Bsz, step):
        b1 = min(Bsz, b0 + step)
        A = B.zeros_like(q_sel[b0:b1, 0, 0])
        x = B.ones_like(A)
        rows = []
        for i in range(L):
            row, den, A, x = _skew_step(q_sel[b0:b1, i], p_sel[b0:b1, i], d_sel[b0:b1, i], A, x,
                                        K, ties)
            if denominators is not None:
                denominators[b0:b1, i] = den
            if out is not None:
                out[b0:b1, i] = row
            else:
                rows.append(row)
        if out is None:
            rows_all.append(B.stack(rows, axis=1))
    return out if out is not None else rows_all[0]


def _skewed_block_law(drafts, q, p, k, K: int, ties: str, root_orders=None, corr=None) -> Law:
    """Block verification of the selected paths ``k`` [B] with the draft rows replaced by q^G:
    ``block_verification(d, q^G, p)`` along the selected paths. On the CPU one path at a time
    (`_path_law`), its rows read in place; the corrections are written into one array. A path
    selected again with the same tokens and rows (the exact engine's outcomes share paths)
    takes the first one's weights and corrections: the same values, computed once.
    ``root_orders`` {block: worst-first order of its root row, or on the kernels' route its
    q^G row (`_RootRow`)} (from [`best_path`][spectheory.verifiers.gbv.best_path], same tie
    rule) saves those sorts. ``corr`` [B, L+1, V] (optional): the output array, if the caller
    made it (`_gbv` lets the selection keep root rows in it)."""
    d_sel = _gather_path(drafts, k)
    Bsz, L = d_sel.shape
    if not (B.is_torch(q) and not _device(q) and Bsz > 0):
        q_sel, p_sel = _gather_path(q, k), _gather_path(p, k)
        return block_verification(d_sel, _skewed_path_rows(d_sel, q_sel, p_sel, K, ties), p_sel)
    if corr is None:
        corr = buffers.empty(tuple(p[:, 0].shape), p.dtype)  # [B, L+1, V]
    d_all = B.as_index(d_sel, q)
    weights = torch.empty((Bsz, L + 1), dtype=p.dtype)
    V = q.shape[-1]
    kernels = _kernels_for(q, p)
    if kernels is not None:  # the kernels' route: only the q^G rows [L, V] (reused by every path,
        # and kept per thread with the kernels' scratch: no fresh pages at every call)
        work = (None, None, None,
                torch.from_numpy(_KernelScratch.get(V, _np_float(q.dtype)).path_rows(L)))
    else:
        rows = torch.empty((5, L, V), dtype=q.dtype)  # reused by every path
        work = (*rows, torch.empty((3, V), dtype=q.dtype),
                torch.empty(V, dtype=_int_view(q.dtype) or torch.int64),
                torch.empty(V, dtype=torch.long))
    first: dict = {}  # path tokens -> the first block row that selected them
    for b, (kb, toks) in enumerate(zip(k.tolist(), d_all.tolist())):
        q_path, p_path = q[b, kb], p[b, kb]
        b0 = first.setdefault(tuple(toks), b)
        if b0 != b:  # a path already done (the exact engine's outcomes repeat paths): the
            k0 = int(k[b0])  # law is a function of its tokens and rows, reused when both match
            if _same_bits(q_path, q[b0, k0]) and _same_bits(p_path, p[b0, k0]):
                weights[b] = weights[b0]
                corr[b] = corr[b0]
                continue
        order = root_orders.get(b) if root_orders else None
        if kernels is None and isinstance(order, _RootRow):
            order = None  # the kernels' root row serves the kernels' route only
        if kernels is not None:
            q_path, p_path = q_path.contiguous(), p_path.contiguous()
        weights[b] = _path_law(q_path, p_path, d_all[b], K, ties, order, corr[b], work,
                               kernels)
    return Law(nodes.stop_from_weights(BLOCK_NODE.scan, weights), corr)


def _path_law(q_path, p_path, tok, K: int, ties: str, root_order, out, work, kernels=None):
    """Acceptance weights h_0..h_L [L+1] of block verification against q^G along one selected
    path, its corrections written into ``out`` [L+1, V]: the same values as
    `_skewed_path_rows` then the block node step position by position, in three passes.

    1. Position by position (scalars, and a sort where one is needed): A_i, x_i and the rows
       below_i; a row passing the screen of `_negligible_rows` takes below = 0 (module doc: the
       same values), and A_{i+1} = A_i + x_i below_i(X_i), x_{i+1} = x_i q(X_i). On the kernels'
       route (``kernels``, `spectheory.verifiers._gbv_cpu`) a row that needs its rank order gets
       it, and its q^G row, from two compiled calls instead (the same values); the root's
       q^G row comes ready from the selection (`_RootRow`), and the screen reads a row's sum
       and sign bits in one compiled pass (`row_total`), only where it runs.
    2. The q^G rows of all positions at once: the general formula `_skew_from_u` on the
       positions up to the last one sorted, the row q S_K(A, 0) / S_K(A, x) after it (as
       `_skew_step`: the same operations on the same values per row); on the kernels' route the
       second form for the rows that passed the screen (the general formula with below = 0
       performs the same operations on the same values).
    3. The block weights w_i ([`block_weight`][spectheory.verifiers.block.block_weight]) along
       the path, then the block rule at the positions 0..L-1 with those weights in one call
       ([`block_rows`][spectheory.verifiers.block.block_rows]: the values of
       [`block_node`][spectheory.verifiers.block.block_node] with states w_0..w_{L-2}, h_0 = 1
       at the root), and at L (h_L = w_L, the correction p).

    ``q_path`` [L, V], ``p_path`` [L+1, V] (views of the selected path's rows), ``tok`` [L]
    (long), ``root_order`` the root row's worst-first order, its q^G row (`_RootRow`, on the
    kernels' route) or None, ``work`` [5, L, V] scratch
    (below, u, x q, q^G, a temporary; on the kernels' route only q^G)."""
    L, V = q_path.shape
    dt = q_path.dtype
    half_eps = torch.finfo(dt).eps / 2  # ulp(A) / 2 <= A eps / 2
    A, x = torch.zeros(L, dtype=dt), torch.ones(L, dtype=dt)
    toks = tok.tolist()
    below, u, xq, qg, tmp = work[:5] if kernels is None else (*work, None)
    last, skipped, stats = -1, [], None
    if kernels is not None:
        last, skipped = _compiled_positions(kernels, q_path, p_path, tok, K, ties, root_order,
                                            A, x, qg)
    for i in range(L if kernels is None else 0):
        Ai, xi = A[i:i + 1], x[i:i + 1]
        if i + 1 < L:
            x[i + 1] = xi * q_path[i, toks[i]]
        a, xq_tok = float(Ai), float(xi) * float(q_path[i, toks[i]])
        # x q(X_i) >= A eps / 2 >= ulp(A) / 2: the screen cannot pass (its bound M >= q(X_i)),
        # so it is not run; A = 0 (the root) never passes either
        if not (a <= 0 or xq_tok >= a * half_eps):
            if stats is None:  # the path's row sums and minima, read once
                stats = (q_path.sum(dim=-1).tolist(), q_path.amin(dim=-1).tolist())
            screen = _negligible_rows(q_path[i:i + 1], Ai, xi, (stats[0][i], stats[1][i]))
            if screen is not None and bool(screen[0]):  # None: the screen does not apply
                skipped.append(i)
                if i + 1 < L:
                    A[i + 1] = Ai  # A + x 0 = A
                continue
        last = i
        order = root_order if i == 0 else None
        fscr, iscr, lscr = work[5:]  # one sort's scratch: floats [3, V], int [V], long [V]
        if order is None:
            r = _ratio(p_path[i:i + 1], q_path[i:i + 1], out=fscr[0:1])
            order = _rank_order(r, ties, worst_first=True, scratch=(iscr, lscr))
        _below_from_order(q_path[i:i + 1], order, worst_first=True, out=below[i:i + 1],
                          scratch=(fscr[1], fscr[2]))
        if i + 1 < L:
            A[i + 1] = Ai + xi * below[i, toks[i]]
    j = last + 1  # positions 0..j-1: general formula; j..L-1: no sort was needed
    if kernels is not None:  # the rows that passed the screen, px, qx and the weights: one call
        f = _np_float(dt)
        pxn, qxn, wn = np.empty(L, f), np.empty(L, f), np.empty(L + 1, f)
        kernels.path_tail(q_path.numpy(), p_path.numpy(), tok.numpy(), A.numpy(), x.numpy(), K,
                          j, skipped, qg.numpy(), pxn, qxn, wn, f(0), f(1))
        px, qx, w = torch.from_numpy(pxn), torch.from_numpy(qxn), torch.from_numpy(wn)
    else:
        den1 = _power_sum(A, x, K).unsqueeze(-1)
        if j > 0:
            for i in skipped:
                if i < j:
                    below[i].zero_()  # a row that passed the screen before a sorted one
            A1, x1 = A[:j].unsqueeze(-1), x[:j].unsqueeze(-1)
            u_j = torch.mul(below[:j], x1, out=u[:j]).add_(A1)  # A + x below
            head = _skew_from_u(q_path[:j], u_j, x1, den1[:j], K, (xq[:j], qg[:j], tmp[:j]))
            if head.data_ptr() != qg.data_ptr():
                qg[:j] = head
        if j < L:
            _skew_negligible(q_path[j:], A[j:], den1[j:], K, out=qg[j:])
        t = tok.unsqueeze(-1)
        px = p_path[:L].gather(1, t)[:, 0]  # p and q^G of the token leading into 1..L
        qx = qg.gather(1, t)[:, 0]
        w = torch.ones(L + 1, dtype=dt)
        for i in range(1, L + 1):
            w[i:i + 1] = block_weight(w[i - 1:i], px[i - 1:i], qx[i - 1:i])
    h = torch.empty(L + 1, dtype=dt)
    # positions 0..L-1 in one call of the block rule with their weights w_0..w_{L-1} (h_0 = 1:
    # the root), and L (no q row: h_L = w_L, the correction p)
    h[:L], c = block_rows(w[:L], qg, p_path[:L], out=out[:L])
    h[0] = 1
    if c.data_ptr() != out.data_ptr():
        out[:L].copy_(c)
    h[L:], c = block_rows(w[L:], None, p_path[L:], out=out[L:])
    if c.data_ptr() != out[L:].data_ptr():
        out[L:].copy_(c)
    return h


def _compiled_positions(kernels, q_path, p_path, tok, K: int, ties: str, root_order, A, x,
                        qg):
    """Step 1 of `_path_law` on the kernels' route, in one compiled call
    (`_gbv_cpu.path_positions`): A_i, x_i (written into ``A``, ``x``), the q^G rows that need a
    rank order (into ``qg``), and (the last such position, the positions that passed the
    screen, a bool array [L]). The same operations as the torch route's loop, each a single
    IEEE operation in the rows' dtype (the screen's in float64, as `_negligible_node`'s), so
    the same values, without a Python step per operation. A root order other than the kernels'
    `_RootRow` is sorted again (the same order)."""
    L, V = q_path.shape
    dt = q_path.dtype
    f = _np_float(dt)
    eps = torch.finfo(dt).eps
    scratch = _KernelScratch.get(V, f)
    qn, pn = q_path.detach().numpy(), p_path.detach().numpy()
    skipped = np.zeros(L, np.bool_)
    root = root_order if isinstance(root_order, _RootRow) else None
    wide = scratch.keys.itemsize == 8  # float64 keys: rank_order64's scratch
    last = kernels.path_positions(
        qn, pn, qn.view(scratch.keys.dtype), 8 * qn.itemsize - 1, tok.numpy(), K,
        ties == "low", A.numpy(), x.numpy(), qg.numpy(), None if root is None else root.row,
        None if root is None else f(root.below[int(tok[0])]), V * eps <= 0.25, eps / 2, eps,
        f(np.inf), f(-np.inf), scratch.ratio, scratch.keys, scratch.sign, scratch.minus_one,
        scratch.inf, scratch.buf_a, scratch.buf_b, scratch.idx_a,
        scratch.idx_b if wide else None, scratch.below, scratch.ud, scratch.power, skipped)
    return last, skipped


def _shape(x) -> str:
    return "[" + ", ".join(str(int(n)) for n in x.shape) + "]"


def check_inputs(drafts, q, p, where: str = "GBV") -> None:
    """Refuse, in one line ([`InputError`][spectheory.runtime.errors.InputError], a
    ``ValueError``) and before any row is read by a token or the compiled kernels run (they check
    no bounds), arguments that are not drafts [B, K, L] of whole-number token ids in 0..V-1, q
    [B, K, L, V] and p [B, K, L+1, V] over one vocabulary, K, L >= 1: a negative or
    out-of-range token (one drawn over another vocabulary), NaN or fractional ids, p over
    another vocabulary, shapes that do not line up. One read of the tokens (their minimum and
    maximum)."""
    for name, x, nd in (("drafts", drafts, 3), ("q", q, 4), ("p", p, 4)):
        if not hasattr(x, "shape") or len(x.shape) != nd:
            got = _shape(x) if hasattr(x, "shape") else type(x).__name__
            raise InputError(f"{where}: {name} must be an array of {nd} dimensions "
                             f"({'[B, K, L]' if nd == 3 else '[B, K, L(+1), V]'}); got {got}")
    Bsz, K, L = (int(n) for n in drafts.shape)
    V = int(q.shape[-1])
    if int(p.shape[-1]) != V:
        raise InputError(f"{where}: p and q rows must have one vocabulary; got {p.shape[-1]} "
                         f"and {V}")
    if tuple(q.shape[:3]) != (Bsz, K, L) or tuple(p.shape[:3]) != (Bsz, K, L + 1):
        raise InputError(f"{where}: shapes do not line up: drafts {_shape(drafts)} [B, K, L], q "
                         f"{_shape(q)} [B, K, L, V], p {_shape(p)} [B, K, L+1, V]")
    if K < 1 or L < 1 or V < 1:
        raise InputError(f"{where}: K = {K} paths, L = {L} positions and V = {V} tokens must "
                         "each be at least 1")
    if B.is_torch(q) != B.is_torch(p):
        raise InputError(f"{where}: q and p must both be torch tensors or both numpy arrays")
    check_row_dtypes(where, q=q, p=p)
    if any(getattr(x, "is_meta", False) for x in (drafts, q, p)):
        raise InputError(f"{where}: drafts, q and p must hold values, not meta tensors")
    if Bsz == 0:
        return
    if B.is_torch(drafts):
        if drafts.dtype.is_floating_point or drafts.dtype.is_complex:
            if not bool(torch.all(torch.isfinite(drafts) & (drafts == torch.round(drafts)))):
                raise InputError(f"{where}: draft tokens must be whole numbers; got a NaN, an "
                                 "infinity or a fraction")
        elif drafts.dtype == torch.bool:
            raise InputError(f"{where}: draft tokens must be integer ids, not booleans")
        lo, hi = drafts.min().item(), drafts.max().item()
    else:
        d = np.asarray(drafts)
        if d.dtype.kind not in "iuf":
            raise InputError(f"{where}: draft tokens must be integer ids; got dtype {d.dtype}")
        if d.dtype.kind == "f" and not bool(np.all(np.isfinite(d) & (d == np.round(d)))):
            raise InputError(f"{where}: draft tokens must be whole numbers; got a NaN, an "
                             "infinity or a fraction")
        lo, hi = d.min().item(), d.max().item()
    if lo < 0 or hi >= V:
        raise InputError(f"{where}: draft tokens must lie in 0..{V - 1} (V = {V}); "
                         f"found {int(lo if lo < 0 else hi)}")


def _check_rows(q_rows, p_rows, where: str) -> None:
    """q and p rows [..., V] of one shape (the row functions pair them entry by entry)."""
    if not (hasattr(q_rows, "shape") and hasattr(p_rows, "shape")) \
            or tuple(q_rows.shape) != tuple(p_rows.shape) or len(q_rows.shape) == 0:
        qs = _shape(q_rows) if hasattr(q_rows, "shape") else type(q_rows).__name__
        ps = _shape(p_rows) if hasattr(p_rows, "shape") else type(p_rows).__name__
        raise InputError(f"{where}: q and p rows must have one shape [..., V]; got {qs} and {ps}")


def _gbv(drafts, q, p, selection_ties: str, ranking_ties: str) -> MultiLaw:
    check_inputs(drafts, q, p)  # before every route indexes rows with the tokens
    q, p = B.values(q, p)  # rows that require grad: their values (the law has no gradient)
    if drafts.shape[0] == 0:
        return empty_law(p)
    Bsz, K, L = drafts.shape
    V = q.shape[-1]
    shared = {} if selection_ties == ranking_ties else None  # root sorts serve both
    corr = None
    if shared is not None and B.is_torch(q) and not _device(q) and Bsz > 0:
        # the output first: the selection keeps the kernels' root q^G rows in its last
        # correction rows (buffers.empty: reused memory, no fresh pages)
        corr = buffers.empty(tuple(p[:, 0].shape), p.dtype)  # [B, L+1, V]
    k = _best_path(drafts, q, p, selection_ties, shared,
                   None if corr is None else corr[:, L])
    law = _skewed_block_law(drafts, q, p, k, K, ranking_ties, shared, corr)
    chosen = B.expand_dims(B.arange(K, drafts) == B.expand_dims(k, 1), -1)  # [B, K, 1]
    stop = B.where(chosen, B.expand_dims(law.stop, 1), B.zeros_like(B.expand_dims(law.stop, 1)))
    corr = B.broadcast_to(B.expand_dims(law.correction, 1), (Bsz, K, L + 1, V))
    return MultiLaw(stop, corr)


def gbv(drafts, q, p) -> MultiLaw:
    """Law of GBV (i.i.d. drafting). drafts [B,K,L], q [B,K,L,V], p [B,K,L+1,V]; see module doc."""
    return _gbv(drafts, q, p, "low", "low")


def gbv_mismatched_ties(drafts, q, p) -> MultiLaw:
    """LOSSY negative control: select with ties to the larger token id, rank for q^G with ties to
    the smaller one. Equal to [`gbv`][spectheory.verifiers.gbv.gbv] when no two drafted children
    have equal p/q."""
    return _gbv(drafts, q, p, "high", "low")


# The law over output sequences depends only on the multiset of drafted paths (the selected path
# is the lexicographic maximum), so the exact engine may enumerate sorted tuples of paths.
GBV = VerifierSpec(
    "gbv", gbv, paths=None, drafting="iid", order_invariant=True,
    node_form="select the lexicographically best path by p/q; block verification against q^G",
    paper="Thomas & Pal, arXiv 2602.16961",
    summary="greedy multi-path block verification",
    analytic=gbv_block_law, numpy_float=True)
GBV_MISMATCHED_TIES = VerifierSpec(
    "gbv-mismatched-ties", gbv_mismatched_ties, paths=None, drafting="iid", lossless=False,
    order_invariant=True, paper="Thomas & Pal, arXiv 2602.16961 (tie rule mismatched)",
    summary="LOSSY control: GBV selecting and ranking with different tie rules")


def gbv_skewed_draft(instance, paths: int, exact: bool | None = None,
                     max_sequences: int | None = None):
    """The skewed draft model q^G of GBV with K = ``paths`` i.i.d. paths, as tables of depth
    0..L-1 (same ranking and formula as [`gbv`][spectheory.verifiers.gbv.gbv]). Level by level:
    A_root = 0, x_root = 1; for a child c a: A = A_c + x_c below_c(a), x = x_c q(a|c)."""
    from ..engine.joint import _check_args
    from ..engine.seqtree import levels
    from ..inputs.models import TableModel
    from ..runtime.sizes import check_size

    _check_args(paths, "iid")
    V, L = instance.vocab_size, instance.block_length
    exact = instance.exact if exact is None else exact
    check_size(V**L, "GBV skewed draft", exact, max_sequences, f"V^L = {V}^{L}")
    q_levels = levels(instance.draft, 0, L, exact)
    p_levels = levels(instance.target, 0, L, exact)
    tables = skewed_levels(q_levels, p_levels, paths, V)
    if not exact:
        tables = [t.cpu().numpy() for t in tables]
    return TableModel(V, tuple(tables))
