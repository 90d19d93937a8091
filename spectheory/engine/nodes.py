"""Node form of a verifier: one rule per node of the sequence tree, and the two routes built on it.

Many verifiers look at a drafted block X^L only through quantities that depend on the prefix: at
position i they use p(.|X^i), q(.|X^i), the ratio of the drafted token p(X_i|X^{i-1}) /
q(X_i|X^{i-1}) and a running state (block verification's weight w_i). Such a verifier is stated
once, as a [`NodeForm`][spectheory.engine.nodes.NodeForm]: a ``step`` evaluated on a batch of nodes of one
depth i,

    step(state, px, qx, q, p) -> (state_i, weight_i, correction_i)

with ``state`` [N] the parent's state (``None`` at the root), ``px``, ``qx`` [N] the target and
draft probabilities of the token leading into the node (``None`` at the root), ``q`` [N, V] the
draft row at the node (``None`` at depth L, where nothing more is drafted) and ``p`` [N, V] the
target row. ``correction_i`` [N, V] is the law of the token emitted when tau = i at this node;
``weight_i`` [N] in [0, 1] is read according to ``scan``:

* ``"forward"`` (token verification): the probability of passing the node once its parent is
  passed, c_0 = 1; P(tau >= i | X) = prod_{j <= i} c_j, so
  P(tau = i | X) = prod_{j<=i} c_j (1 - c_{i+1}) and P(tau = L | X) = prod_{j<=L} c_j.
* ``"backward"`` (block verification, Sun et al., arXiv 2403.10444): the acceptance weight h_i of
  a scan from i = L down to 0 that stops at the first success, h_0 = 1;
  P(tau = i | X) = h_i prod_{j>i} (1 - h_j).

From the one ``step`` follow both routes of the exact engine, so they cannot drift apart:

* the **per-draft law** [`law_from_nodes`][spectheory.engine.nodes.law_from_nodes] (the verifier's batched
  law function, used by the per-draft route, the multi-path wrappers and real-model loops): ``step``
  along each draft;
* the **per-node route** [`node_block_law`][spectheory.engine.nodes.node_block_law]: ``step`` once per
  node, level by level (level d holds C V^d nodes below C contexts), with the draft mass Q(x^d) of
  every node, then

  - forward:  m_d(x^d) = Q(x^d) R_d(x^d) (1 - sum_a q(a|x^d) c_{d+1}(x^d a)), R_d = prod c_j,
    m_L = Q R_L;
  - backward: G_L = 1, G_d(x^d) = sum_a q(a|x^d) (1 - h_{d+1}(x^d a)) G_{d+1}(x^d a),
    m_d = Q(x^d) h_d(x^d) G_d(x^d);

  m_d(x^d) = P(X^d = x^d, tau = d) is the stop mass of the node, P(tau = d) = sum m_d and the
  emitted block law is E_{d+1}(x^d y) = m_d(x^d) correction_d(y | x^d).

This costs one step per node (sum_d V^d nodes) instead of L+1 steps per draft (V^L drafts). The
deepest level holds as many nodes as the largest input table has rows; it is stepped a chunk of
parents at a time and only its stop masses are kept, so the route's memory beyond the inputs is
about two arrays of V^L entries (m_L and the corrections of depth L-1). Node quantities are
validated like laws ([`validate_nodes`][spectheory.engine.nodes.validate_nodes]): weights in [0, 1], no
NaN, every correction row a distribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np
from ..runtime._lazy import is_tensor, torch

from ..runtime import backend as B
from ..runtime import buffers
from ..law import ROW_SUM_TOL, Law, LawError, empty_law
from ..runtime.errors import check_arrays

#: Scan orders of a node form.
SCANS = ("forward", "backward")


@dataclass(frozen=True)
class NodeForm:
    """A verifier's rule at one node (see the module docstring).

    Parameters
    ----------
    step : callable
        ``step(state, px, qx, q, p) -> (state, weight, correction)`` on a batch of nodes of one
        depth; backend-generic (torch float or numpy Fractions).
    scan : {"forward", "backward"}
        How the weights combine into P(tau = i | X).
    formula : str
        The rule in words (listings).
    weights_only : bool
        ``step`` accepts the keywords ``correction`` and ``out``: with ``correction=False`` it
        returns ``None`` for the correction and skips its V-sized work (used by
        [`stop_probabilities`][spectheory.engine.nodes.stop_probabilities]); ``out`` (torch, [N, V], or
        None) is where it may build the correction rows, saving a copy.
    row_by_row : callable or None
        ``row_by_row(p) -> bool`` on the target rows [B, L+1, V] of a per-draft law: True where
        ``step`` builds each correction row on its own in one pass (compiled kernels), so that
        [`law_from_nodes`][spectheory.engine.nodes.law_from_nodes] hands it every draft at once
        instead of chunks of `ROW_CHUNK_ELEMENTS` (which only keep torch's temporaries in
        cache; a row's values do not depend on its batch).
    """

    step: Callable
    scan: str
    formula: str = ""
    weights_only: bool = False
    row_by_row: Callable | None = None

    def __post_init__(self):
        if self.scan not in SCANS:
            raise ValueError(f"unknown scan {self.scan!r}; choose from {SCANS}")


# ----------------------------------------------------------------------------- per draft


def stop_forward(c):
    """P(tau = i | X) from pass probabilities c [B, L+1] (c_0 = 1): prod_{j<=i} c_j (1 - c_{i+1})
    for i < L and prod_{j<=L} c_j at L."""
    reached = B.cumprod(c, axis=1)
    one = B.ones_like(c[:, :1])
    return reached * B.concat([1 - c[:, 1:], one], axis=1)


def stop_backward(h):
    """P(tau = i | X) = h_i prod_{j>i} (1 - h_j) from acceptance weights h [B, L+1] (h_0 = 1)."""
    survive = B.flip(B.cumprod(B.flip(1 - h, 1), axis=1), 1)  # prod_{j>=i} (1 - h_j)
    tail = B.concat([survive[:, 1:], B.ones_like(h[:, :1])], axis=1)  # prod_{j>i}
    return h * tail


def stop_from_weights(scan: str, weights):
    return stop_forward(weights) if scan == "forward" else stop_backward(weights)


#: Elements of one [rows, V] working array per step of the per-draft route (torch): 2^18 (1 MiB
#: in float32) keeps the step's temporaries in cache, so a step costs about one read of its
#: rows of p and q and one write of its correction.
ROW_CHUNK_ELEMENTS = 2**20


def _draft_weights(form: NodeForm, px_all, qx_all, q, p, L: int, out=None, want=True):
    """Weights [n, L+1] and correction rows of drafts (``out`` [n, L+1, V]: corrections written
    there; ``want`` False: not needed, and skipped by a ``weights_only`` step)."""
    rows, weights = [], []
    state = None
    lean = not want and form.weights_only
    for i in range(L + 1):
        px = None if i == 0 else px_all[:, i - 1]
        qx = None if i == 0 else qx_all[:, i - 1]
        q_row = q[:, i] if i < L else None
        if lean:
            state, w, c = form.step(state, px, qx, q_row, p[:, i], correction=False)
        elif form.weights_only and out is not None:
            state, w, c = form.step(state, px, qx, q_row, p[:, i], out=out[:, i])
        else:
            state, w, c = form.step(state, px, qx, q_row, p[:, i])
        weights.append(w)
        if out is not None:
            if c.data_ptr() != out[:, i].data_ptr():
                out[:, i] = c
        elif want:
            rows.append(c)
    return B.stack(weights, axis=1), rows


def law_from_nodes(form: NodeForm, drafts, q, p, corrections: bool = True) -> Law:
    """The per-draft law of a node-form verifier: ``form.step`` at positions 0..L of each draft.

    Shapes: drafts [B, L], q [B, L, V], p [B, L+1, V]; returns stop [B, L+1], correction
    [B, L+1, V]. On torch the drafts are taken a few rows at a time (`ROW_CHUNK_ELEMENTS`)
    and each correction row is written once into one preallocated array: about one read of p
    and q and one write of the corrections. ``corrections=False`` returns the stop table only
    (``Law(stop, None)``; steps declared ``weights_only`` then skip the correction rows).
    Rows that require grad are read as values ([`values`][spectheory.runtime.backend.values]).
    """
    check_arrays(drafts, q, p, paths=False)
    q, p = B.values(q, p)
    if drafts.shape[0] == 0:
        law = empty_law(p)
        return law if corrections else Law(law.stop, None)
    L = drafts.shape[-1]
    idx = B.expand_dims(B.as_index(drafts, q), -1)
    px_all = B.take_along(p[:, :L], idx, axis=-1)[..., 0]
    qx_all = B.take_along(q, idx, axis=-1)[..., 0]
    if not B.is_torch(p):
        w, rows = _draft_weights(form, px_all, qx_all, q, p, L, None, corrections)
        return Law(stop_from_weights(form.scan, w),
                   B.stack(rows, axis=1) if corrections else None)
    n = drafts.shape[0]
    V = p.shape[-1]
    corr = buffers.empty_like(p) if corrections else None
    step = max(1, ROW_CHUNK_ELEMENTS // max(1, V)) if p.device.type == "cpu" else max(n, 1)
    if corrections and form.row_by_row is not None and form.row_by_row(p):
        step = max(n, 1)  # each row in one pass on its own: no chunks needed
    parts = []
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        out = corr[r0:r1] if corrections else None
        w, _ = _draft_weights(form, px_all[r0:r1], qx_all[r0:r1], q[r0:r1], p[r0:r1], L, out,
                              corrections)
        parts.append(w)
    w = parts[0] if len(parts) == 1 else torch.cat(parts)
    return Law(stop_from_weights(form.scan, w), corr)


def stop_probabilities(verifier, drafts, q, p):
    """P(tau = i | X) [B, L+1] of a single-path verifier, without its corrections.

    For paired comparisons of verifiers on the same drafts (E[tau | X] = sum_i i P(tau = i | X))
    only the stop table is needed: a node-form verifier whose step is ``weights_only`` (token,
    block) then skips the correction rows (no V-sized write per position); others run their full
    law. Shapes as [`law_from_nodes`][spectheory.engine.nodes.law_from_nodes]."""
    from ..registry import get_verifier

    spec = get_verifier(verifier)
    if spec.node is not None:
        return law_from_nodes(spec.node, drafts, q, p, corrections=False).stop
    return spec(drafts, q, p)[0]


def expected_accepted(verifier, drafts, q, p):
    """``E[tau | X]`` ``[B]`` = sum_i i P(tau = i | X) from
    [`stop_probabilities`][spectheory.engine.nodes.stop_probabilities]."""
    stop = stop_probabilities(verifier, drafts, q, p)
    i = B.arange(stop.shape[1], drafts)
    if B.is_torch(stop):
        return (stop * i.to(stop.dtype)).sum(dim=1)
    return B.sum(stop * i, axis=1)


def per_draft_function(form: NodeForm, name: str, doc: str = "") -> Callable:
    """The batched single-path law function ``f(drafts, q, p) -> Law`` of a node form."""

    def law(drafts, q, p) -> Law:
        return law_from_nodes(form, drafts, q, p)

    law.__name__ = law.__qualname__ = name
    law.__doc__ = doc or f"Per-draft law of the node form {form.formula!r}."
    law.node_form = form
    return law


def node_verifier(form: NodeForm, name: str, *, lossless: bool = True, exact: bool = True,
                  paper: str = "", summary: str = "", numpy_float: bool = False):
    """A single-path [`VerifierSpec`][spectheory.registry.VerifierSpec] from a node form alone: its
    law function is [`law_from_nodes`][spectheory.engine.nodes.law_from_nodes] of the form, and the exact
    engine uses the per-node route. ``numpy_float``: the form's ``step`` also runs on numpy float64
    arrays ([`VerifierSpec`][spectheory.registry.VerifierSpec])."""
    from ..registry import VerifierSpec

    return VerifierSpec(name, per_draft_function(form, name), paths=1, lossless=lossless,
                        exact=exact, node_form=form.formula, paper=paper,
                        summary=summary or form.formula, node=form, numpy_float=numpy_float)


# ----------------------------------------------------------------------------- validation


def _numpy(x):
    return x.detach().cpu().numpy() if is_tensor(x) else np.asarray(x)


def validate_nodes(weight, corr, depth: int, exact: bool, name: str = "verifier",
                   tol: float = ROW_SUM_TOL, skip_corr: bool = False, offset: int = 0) -> None:
    """Check the node quantities of one depth: weights [N] in [0, 1], corrections [N, V]
    non-negative rows summing to 1 (exactly in exact mode); raises
    [`LawError`][spectheory.law.LawError] (kinds nan, inf, negative, stop-sum, correction-sum,
    not-exact, shape). ``skip_corr``: the correction is the (already validated) target table.
    ``offset``: index of the first node among all nodes of the depth (a chunk of a level), added
    to the node index that an error names."""
    where = f"at depth {depth}"

    def at(ix):  # node index among all nodes of the depth
        return (ix[0] + offset,) + tuple(ix[1:])

    if exact:
        for what, a in (("weight", weight), ("correction", corr)):
            if what == "correction" and skip_corr:
                continue
            a = np.asarray(a, dtype=object)
            ok = np.frompyfunc(lambda v: isinstance(v, (Fraction, int, np.integer))
                               and not isinstance(v, bool), 1, 1)(a).astype(bool)
            if not ok.all():
                ix = tuple(int(i) for i in np.argwhere(~ok)[0])
                raise LawError("not-exact", f"{name}: node {what} {where} {at(ix)} = {a[ix]!r} "
                               f"is not a Fraction in an exact-mode law", at(ix), a[ix])
        w = np.asarray(weight, dtype=object)
        bad = (w < 0) | (w > 1)
        if bad.any():
            n = int(np.flatnonzero(bad)[0])
            raise LawError("negative" if w[n] < 0 else "stop-sum",
                           f"{name}: node weight {where}, node {n + offset} = {w[n]} is outside "
                           f"[0, 1]", (n + offset,), w[n])
        if skip_corr:
            return
        c = np.asarray(corr, dtype=object)
        if (c < 0).any():
            ix = tuple(int(i) for i in np.argwhere(c < 0)[0])
            raise LawError("negative", f"{name}: negative correction {where} {at(ix)} = "
                           f"{c[ix]}", at(ix), c[ix])
        rows = c.sum(axis=1)
        if (rows != 1).any():
            n = int(np.flatnonzero(rows != 1)[0])
            raise LawError("correction-sum", f"{name}: correction row {where}, node "
                           f"{n + offset} sums to {rows[n]}, not 1", (n + offset,), rows[n])
        return
    if is_tensor(weight) or is_tensor(corr):
        w = weight if is_tensor(weight) else torch.as_tensor(_numpy(weight))
        c = None if skip_corr else (corr if is_tensor(corr)
                                    else torch.as_tensor(_numpy(corr)))
        xp, size, bounds = torch, (lambda t: t.numel()), torch.aminmax  # one read
        first = (lambda mask: tuple(int(i) for i in torch.nonzero(mask)[0]))
    else:  # numpy float64: the same checks, the same messages
        w = np.asarray(weight)
        c = None if skip_corr else np.asarray(corr)
        xp, size, bounds = np, (lambda t: t.size), (lambda t: (t.min(), t.max()))
        first = (lambda mask: tuple(int(i) for i in np.argwhere(mask)[0]))
    with B.float_errors():
        _check_float_nodes(w, c, xp, size, bounds, first, where, at, name, tol, offset)


def _check_float_nodes(w, c, xp, size, bounds, first, where, at, name, tol, offset):
    """[`validate_nodes`][spectheory.engine.nodes.validate_nodes] in float mode, on torch tensors
    (``xp`` torch) or numpy arrays (``xp`` numpy)."""
    # fast screen: min >= 0 fails on NaN and negatives, max <= 1 + tol on inf and w > 1, row sums
    # within tol on inf; the detailed diagnosis below runs only when a screen fails
    if size(w):
        lo, hi = bounds(w)
        ok = bool(lo >= 0) and bool(hi <= 1 + tol)  # False on NaN
    else:
        ok = True
    if c is not None and ok and size(c):
        ok = bool(c.min() >= 0) and bool((B.abs(B.sum(c, axis=1) - 1) <= tol).all())
    if ok:
        return
    checks = [("weight", w)] + ([] if c is None else [("correction", c)])
    for what, t in checks:
        if not xp.isfinite(t).all():
            kind = "nan" if xp.isnan(t).any() else "inf"
            ix = first(~xp.isfinite(t))
            raise LawError(kind, f"{name}: {'NaN' if kind == 'nan' else 'infinite'} node {what} "
                           f"{where} {at(ix)}", at(ix), float(t[ix]))
        if (t < 0).any():
            ix = first(t < 0)
            raise LawError("negative", f"{name}: negative node {what} {where} {at(ix)} = "
                           f"{float(t[ix])!r}", at(ix), float(t[ix]))
    if (w > 1 + tol).any():
        n = first(w > 1 + tol)[0]
        raise LawError("stop-sum", f"{name}: node weight {where}, node {n + offset} = "
                       f"{float(w[n])!r} exceeds 1", (n + offset,), float(w[n]))
    err = B.abs(B.sum(c, axis=1) - 1)
    n = first(err > tol)[0]
    raise LawError("correction-sum", f"{name}: correction row {where}, node {n + offset} sums "
                   f"to {float(c[n].sum())!r}, not 1 (tolerance {tol:g}); every row must be a "
                   f"distribution, also where P(tau) = 0", (n + offset,), float(c[n].sum()))


# ----------------------------------------------------------------------------- per node


def _repeat(x, V: int):
    """Each entry of x [N] repeated V times (the parent's value at each of its children)."""
    if B.is_torch(x):
        return x.unsqueeze(1).expand(x.shape[0], V).reshape(-1)
    return np.repeat(x, V)


@dataclass
class NodeLaw:
    """Per-node results below C contexts: ``stop_mass[d]`` [C V^d] = P(X^d = x^d, tau = d) and
    ``correction[d]`` [C V^d, V]; ``corr_is_target[d]``: the correction is the target table."""

    stop_mass: list
    correction: list
    corr_is_target: list
    #: a subtree's value for its parent (`node_block_law` with ``start``): forward, the pass
    #: weight c of the subtree's root; backward, (1 - h) G of the subtree's root
    upward: object = None

    def tau_pmf(self, C: int):
        return B.stack([B.sum(m.reshape(C, -1), axis=1) for m in self.stop_mass], axis=1)

    def emitted(self, d: int):
        """E_{d+1} [C V^(d+1)]: probability that the output block is exactly x^d y."""
        return (B.expand_dims(self.stop_mass[d], 1) * self.correction[d]).reshape(-1)


#: Nodes of the deepest level (depth L, V^L of them per context) per chunk of the per-node
#: route on the CPU: that level's node quantities (drafted ratios, states, weights, draft masses)
#: are built a few parents at a time, so only its stop masses [V^L] are kept whole; 2^18 nodes
#: (2 MiB per float64 working array) keep a chunk's temporaries in cache. Other devices take
#: `DEVICE_CHUNK_NODES`.
LAST_LEVEL_CHUNK_NODES = 2**18
DEVICE_CHUNK_NODES = 2**24


def last_level_parents(V: int, like) -> int:
    """Parents (nodes of depth L-1) per chunk of the deepest level (`LAST_LEVEL_CHUNK_NODES`
    children, or `DEVICE_CHUNK_NODES` off the CPU)."""
    nodes = (DEVICE_CHUNK_NODES if B.is_torch(like) and like.device.type != "cpu"
             else LAST_LEVEL_CHUNK_NODES)
    return max(1, nodes // max(1, V))


def _uninitialised(n: int, like):
    """An array of n entries like ``like``, every entry to be written (torch: uninitialised;
    numpy: object zeros)."""
    if B.is_torch(like):
        return torch.empty((n,), dtype=like.dtype, device=like.device)
    return B.full((n,), 0, like)


@dataclass(frozen=True)
class SubtreeStart:
    """Where a subtree of the sequence tree begins (`node_block_law`'s ``start``): the parent's
    ``state``, the drafted token's target and draft probabilities ``px``, ``qx`` and the draft
    mass ``mass`` Q(x^s) of the subtree's root (each a 1-entry array), and ``R`` the pass
    product R_{s-1} of the parent (forward scan; 1 otherwise)."""

    state: object
    px: object
    qx: object
    mass: object
    R: object
    depth: int = 0  # the root's depth s and its index among the nodes of that depth: errors
    index: int = 0  # name nodes by their place in the whole tree


def node_block_law(form: NodeForm, q_levels, p_levels, V: int, L: int,
                   name: str = "verifier", start: SubtreeStart | None = None, *,
                   compiled: bool = True, screen: list | None = None) -> NodeLaw | None:
    """Per-node route: the stop mass and correction of every node below C contexts.

    ``q_levels[d]`` [C V^d, V] (d < L) and ``p_levels[d]`` [C V^d, V] (d <= L) as from
    [`levels`][spectheory.engine.seqtree.levels]. One ``form.step`` call per depth on all nodes of that depth,
    except at the deepest level, which holds as many nodes as the largest input table has rows (C
    V^L) and is stepped a chunk of parents at a time
    ([`last_level_parents`][spectheory.engine.nodes.last_level_parents]): its weights are folded into the
    scan as they come (forward: R_L = R_{L-1} c_L and sum_a q(a|x) c_L(x a); backward: G_{L-1}(x) =
    sum_a q(a|x) (1 - h_L(x a))), and only the stop masses m_L [C V^L] are kept. Values do not
    depend on the chunking (every quantity of a chunk depends on its own parents only). Memory
    beyond the inputs: m_L, the corrections of depth L-1 ([C V^(L-1), V]) and vectors over depths <
    L.

    With ``start`` (a `SubtreeStart`) the levels are those of one subtree whose root lies at
    some depth s >= 1 (``q_levels[j]`` [V^j, V] the rows below it at depth s + j, L the remaining
    depth): the scan starts from the parent's state and the root's draft mass, stop masses are
    the subtree's (depths s..s+L), and ``upward`` carries what the parent needs
    (`spectheory.engine.split` evaluates the subtrees as separate tasks and adds their laws).

    Token and block verification on float64 CPU tensors take the compiled kernels of
    `spectheory.engine._nodes_cpu` (`compiled_kernels`; ``compiled=False`` or
    ``SPECTHEORY_NUMBA=0``: the torch route throughout): one pass per depth above L-1, two over
    the deepest rows, one per depth for the scan up, the same values; where a kernel's screen of
    the node quantities fails, the torch route reruns and raises its diagnosis.

    ``screen`` (a list): where the kernels ran, whether every entry of the draft and target rows
    at depth L-1 was finite is appended (they screen them on the way; False also where a kernel
    of a shallower depth failed its screen before); after False, None is returned at once, for
    the caller to run its own check of the tables (which names the entry) before any diagnosis
    of the node quantities. Nothing is appended where the torch route ran.
    """
    exact = B.is_exact(p_levels[0])
    C = p_levels[0].shape[0]
    kernels = (compiled_kernels(form, p_levels[L - 1], V) if compiled and L >= 2 and not exact
               else None)
    mass = B.full((C,), 1, p_levels[0])  # Q(x^d), the draft probability of each node
    masses, weights, corrs, is_p = [], [], [], []
    state = px = qx = None
    at = first = 0  # absolute depth and first node index of the levels, for error messages
    if start is not None:
        state, px, qx, mass = start.state, start.px, start.qx, start.mass
        at, first = start.depth, start.index
    if kernels is not None:
        finite = np.zeros(1, dtype=np.bool_)  # set by the kernel of depth L-1
        law = _compiled_route(kernels, form, q_levels, p_levels, V, L, start, name, finite)
        if screen is not None:
            screen.append(bool(finite[0]))
            if not finite[0]:
                return None
        if law is not None:
            return law
        return node_block_law(form, q_levels, p_levels, V, L, name, start, compiled=False)
    for d in range(L):
        if form.weights_only and B.is_torch(p_levels[d]):  # build the rows in one fresh array
            state, w, c = form.step(state, px, qx, q_levels[d], p_levels[d],
                                    out=buffers.empty_like(p_levels[d]))
        else:
            state, w, c = form.step(state, px, qx, q_levels[d], p_levels[d])
        same = c is p_levels[d]
        validate_nodes(w, c, d + at, exact, name, skip_corr=same, offset=first * V ** d)
        masses.append(mass)
        weights.append(w)
        corrs.append(c)
        is_p.append(same)
        if d < L - 1:
            px = p_levels[d].reshape(-1)
            qx = q_levels[d].reshape(-1)
            if state is not None:
                state = _repeat(state, V)
            mass = (B.expand_dims(mass, 1) * q_levels[d]).reshape(-1)
    forward = form.scan == "forward"
    if forward:  # R_d = prod_{j<=d} c_j at depths < L
        R = [weights[0] if start is None else start.R * weights[0]]
        for d in range(1, L):
            R.append(_repeat(R[-1], V) * weights[d])
        QR = masses[L - 1] * R[L - 1]  # Q(x^(L-1)) R_{L-1}(x^(L-1))
    # depth L, by chunks of parents (nodes of depth L-1)
    qP, pP, pL, mP = q_levels[L - 1], p_levels[L - 1], p_levels[L], masses[L - 1]
    n = qP.shape[0]
    stop_L = _uninitialised(n * V, pL)
    parent_sum = _uninitialised(n, pL)  # forward: sum_a q c_L; backward: G_{L-1}
    corr_L = None  # [C V^L, V] only when the correction at depth L is not the target row
    step = last_level_parents(V, pL)
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        k0, k1 = r0 * V, r1 * V
        q_r = qP[r0:r1]
        s = None if state is None else _repeat(state[r0:r1], V)
        p_k = pL[k0:k1]
        _, w, c = form.step(s, pP[r0:r1].reshape(-1), q_r.reshape(-1), None, p_k)
        same = c is p_k
        validate_nodes(w, c, L + at, exact, name, skip_corr=same, offset=first * V ** L + k0)
        if not same and corr_L is None:
            corr_L = (torch.empty(pL.shape, dtype=pL.dtype, device=pL.device)
                      if B.is_torch(pL) else B.full(pL.shape, 0, pL))
            corr_L[:k0] = pL[:k0]  # earlier chunks returned the target rows
        if corr_L is not None:
            corr_L[k0:k1] = c
        # q(a|x) w(x a) below each parent x; m_L(x a) = Q(x) q(a|x) R_{L-1}(x) c_L(x a)
        # (forward) or Q(x) q(a|x) h_L(x a) (backward)
        qw = q_r * w.reshape(-1, V)
        rows = QR[r0:r1] if forward else mP[r0:r1]
        if B.is_torch(qw):
            torch.mul(qw, rows.unsqueeze(1), out=stop_L[k0:k1].view(-1, V))
        else:
            stop_L[k0:k1] = (qw * B.expand_dims(rows, 1)).reshape(-1)
        if forward:  # sum_a q(a|x) c_L(x a)
            parent_sum[r0:r1] = B.sum(qw, axis=1)
        else:  # G_{L-1}(x) = sum_a q(a|x) (1 - h_L(x a))
            parent_sum[r0:r1] = B.sum(torch.sub(q_r, qw, out=qw) if B.is_torch(qw)
                                      else q_r - qw, axis=1)
    one = weights[0]
    bad = (one != 1) if exact else (B.abs(one - 1) > ROW_SUM_TOL)
    if start is None and bool(bad.any()):
        n = int(np.flatnonzero(_numpy(bad))[0])
        raise LawError("stop-sum", f"{name}: the node weight at the root (context {n}) is "
                       f"{one[n]}, not 1 (c_0 = 1 / h_0 = 1)", (n,), one[n])
    stop = [None] * L + [stop_L]
    if forward:
        passed = parent_sum  # sum_a q(a|x^d) c_{d+1}(x^d a) at d = L-1
        for d in range(L - 1, -1, -1):
            if d < L - 1:
                passed = B.sum(q_levels[d] * weights[d + 1].reshape(-1, V), axis=1)
            stop[d] = masses[d] * R[d] * (1 - passed)
    else:
        G = parent_sum  # G_{L-1}
        stop[L - 1] = masses[L - 1] * weights[L - 1] * G
        for d in range(L - 2, -1, -1):
            go_on = 1 - weights[d + 1]
            go_on = go_on.mul_(G) if B.is_torch(go_on) else go_on * G
            G = B.sum(q_levels[d] * go_on.reshape(-1, V), axis=1)
            stop[d] = masses[d] * weights[d] * G
    upward = None
    if start is not None:
        upward = weights[0] if forward else (1 - weights[0]) * G
    return NodeLaw(stop, corrs + [pL if corr_L is None else corr_L], is_p + [corr_L is None],
                   upward)


# ----------------------------------------------------------------------------- compiled


#: Environment switch of the compiled kernels (shared with GBV's,
#: [`KERNEL_ENV`][spectheory.verifiers.gbv.KERNEL_ENV]): "0" keeps the per-node route on torch.
KERNEL_ENV = "SPECTHEORY_NUMBA"
_KERNELS: list = []  # [the kernels module, or None where numba cannot be imported], once tried
_KERNELS_UNAVAILABLE: list = []  # why the kernels could not be loaded, where they could not
_PROBES: dict = {}  # V -> (lanes, fma_neg, fma_out), or None where torch's arithmetic is not
# reproduced
#: Fewest nodes at the deepest level (C V^L) for which the compiled kernels run: they cost about
#: 1.2 s once per process (importing numba, loading the cached code; 5 s the first time, when
#: they are compiled) and save about a third of an analysis (V = 8, L = 7: 2^21 nodes, about
#: 50 ms of 140 ms warm), so they pay off over repeated analyses of this size and more.
COMPILED_MIN_NODES = 2**21


@dataclass(frozen=True)
class CompiledKernels:
    """The kernels module and torch's arithmetic on this machine for rows of V entries: the
    width ``lanes`` of torch's row sums and whether its ``addcmul`` rounds once (``fma_neg``:
    ``addcmul(q, p, w, value=-1)``; ``fma_out``: ``mul(p, A).addcmul_(c, m)``)."""

    module: object
    lanes: int
    fma_neg: bool
    fma_out: bool


def _kernel_module():
    """`spectheory.engine._nodes_cpu`, or None (numba absent or not loadable; the reason is kept
    in ``_KERNELS_UNAVAILABLE``)."""
    from ..runtime._kernels import load_once

    return load_once(_KERNELS, _KERNELS_UNAVAILABLE, "._nodes_cpu", __package__)


def _probe(mod, V: int):
    """(lanes, fma_neg, fma_out) that reproduce torch's row sums and ``addcmul`` bit for bit on
    random rows of V entries (spread over 2^-30..1, both signs), or None. Each candidate is
    compared with torch on 64 rows: a wrong order of addition or a wrong number of roundings
    differs from torch's on such rows with near certainty."""
    rng = np.random.default_rng(V)

    def rows(n=64):
        return (rng.random((n, V)) * np.exp2(-rng.integers(0, 30, (n, V)))
                * rng.choice([-1.0, 1.0], (n, V)))

    q, p, c = rows(), np.abs(rows()), rows()
    w, A, m = rng.random(64), rng.random(64), rng.random(64)
    tq, tp, tc, tw, tA, tm = (torch.from_numpy(a) for a in (q, p, c, w, A, m))
    out = np.empty((64, V))
    ref = torch.addcmul(tq, tp, tw.unsqueeze(-1), value=-1).numpy()
    fma_neg = [f for f in (True, False)
               if np.array_equal(mod.probe_addcmul(q, p, w, f, out), ref)]
    ref = torch.mul(tp, tA.unsqueeze(1)).addcmul_(tc, tm.unsqueeze(1)).numpy()
    fma_out = [f for f in (True, False) if np.array_equal(mod.probe_out(p, A, c, m, f, out), ref)]
    ref = tc.sum(dim=-1).numpy()
    sums = np.empty(64)
    lanes = [k for k in (4, 8, 2, 16, 1)
             if (V if k == 1 or V < k else V // k) < mod.MAX_ROW_VECTORS
             and np.array_equal(mod.probe_sums(c, k, sums), ref)]
    if not (fma_neg and fma_out and lanes):
        return None
    return lanes[0], fma_neg[0], fma_out[0]


def has_kernels(form) -> bool:
    """Whether ``form`` is the node form of registered token or block verification (the rules
    the compiled kernels implement), by identity."""
    from ..registry import get_verifier

    return form is not None and any(form is get_verifier(name).node
                                    for name in ("token", "block"))


def compiled_kernels(form: NodeForm | None, like, V: int, nodes: int | None = None):
    """The compiled kernels for the deepest levels of ``form`` on rows like ``like`` [N, V], or
    None (then the torch route): ``form`` is token or block verification (None: any, for the
    output law's last step), ``like`` a float64 CPU tensor, ``SPECTHEORY_NUMBA`` is not off,
    numba loads, the deepest level holds at least `COMPILED_MIN_NODES` ``nodes`` (default: the
    rows of ``like`` times V) and the kernels reproduce torch's arithmetic for rows of V entries
    ([`CompiledKernels`][spectheory.engine.nodes.CompiledKernels], probed once per process and
    V)."""
    if not (B.is_torch(like) and like.device.type == "cpu" and like.dtype == torch.float64):
        return None
    if (like.shape[0] * V if nodes is None else nodes) < COMPILED_MIN_NODES:
        return None
    if form is not None and not has_kernels(form):
        return None
    from ..runtime._kernels import probed_kernels

    found = probed_kernels(KERNEL_ENV, _kernel_module, _PROBES, V, _probe)
    return None if found is None else CompiledKernels(found[0], *found[1])


def _flat(x):
    """A contiguous numpy view of a CPU tensor (a copy only where it is not contiguous)."""
    return x.contiguous().numpy()


def _finite_screen(table) -> bool:
    """True when every entry of a float table (numpy) is finite, from one read: the sum of the
    entries is finite (an infinite or NaN entry makes any sum of them infinite or NaN, in any
    order). False also when finite entries overflow the sum: then the caller looks entry by
    entry (the instance check, `spectheory.engine.plan`)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(np.add.reduce(table, axis=None)))


def _compiled_route(kernels: CompiledKernels, form, q_levels, p_levels, V: int, L: int,
                    start, name, finite=None) -> NodeLaw | None:
    """`node_block_law` by the compiled kernels: each depth d < L-1 in one pass over its rows
    (`block_level` / `token_level`: the step, its screens, the children's states and draft
    masses), depths L-1 and L in one more (`block_last` / `token_last`), then the scan up from
    depth L-2 (`block_scan` / `token_scan`). The same values as the torch route; None when a
    kernel's screen fails (the caller then runs the torch route, which raises its diagnosis).
    ``finite`` [1] (bool): set to whether every entry of the rows at depth L-1 is finite (by the
    kernel where its rows are whole vectors, else by one numpy sum of each table; unchanged
    where a kernel of a shallower depth failed its screen first)."""
    if finite is None:
        finite = np.ones(1, dtype=np.bool_)
    mod, tol, lanes = kernels.module, float(ROW_SUM_TOL), kernels.lanes
    # rows normalised by a finite non-zero total sum to 1 within 2 (V + 1) ulps: the kernels skip
    # that sum, which needs a factor 4 of margin below tol / 2 (else the torch route)
    if 16 * (V + 1) * float(np.finfo(np.float64).eps) > tol:
        return None
    f64 = dict(dtype=torch.float64)
    forward = form.scan == "forward"
    C = p_levels[0].shape[0]
    root = start is None
    if root:
        ones = torch.ones(C, **f64)
        state = px = qx = mass = R_parent = ones  # state, px, qx unread at the roots
    else:
        mass, px, qx = start.mass, start.px, start.qx
        state = px if start.state is None else start.state  # unread by token verification
        R_parent = start.R
    masses, weights, corrs, Rs = [], [], [], []
    for d in range(L - 1):
        q, p = q_levels[d], p_levels[d]
        n = q.shape[0]
        w = torch.empty(n, **f64)  # h_d (block) or a_d (token)
        corr = buffers.empty_like(p)
        child, child_mass = torch.empty(n * V, **f64), torch.empty(n * V, **f64)
        if forward:
            R = torch.empty(n, **f64)
            ok = mod.token_level(_flat(px), _flat(qx), _flat(q), _flat(p), _flat(mass),
                                 _flat(R_parent), root, lanes, tol, w.numpy(), R.numpy(),
                                 corr.numpy(), child.numpy(), child_mass.numpy())
            Rs.append(R)
            R_parent = child
        else:
            ok = mod.block_level(_flat(state), _flat(px), _flat(qx), _flat(q), _flat(p),
                                 _flat(mass), root, lanes, kernels.fma_neg, tol, w.numpy(),
                                 corr.numpy(), child.numpy(), child_mass.numpy())
            state = child
        if not ok:
            return None
        masses.append(mass)
        weights.append(w)
        corrs.append(corr)
        px, qx, mass, root = p.reshape(-1), q.reshape(-1), child_mass, False
    q, p, pL = q_levels[L - 1], p_levels[L - 1], p_levels[L]
    n = q.shape[0]
    if V % mod.LANES8 != 0:  # the entry-by-entry kernels do not screen q and p: one read
        finite[0] = _finite_screen(_flat(q)) and _finite_screen(_flat(p))
    w_last = torch.empty(n, **f64)  # h_{L-1} (block) or a_{L-1} (token)
    corr = buffers.empty_like(p)
    stop_L = torch.empty(n * V, **f64)
    stop_prev = torch.empty(n, **f64)
    if forward:
        R_last = torch.empty(n, **f64)
        ok = mod.token_last(_flat(px), _flat(qx), _flat(q), _flat(p), _flat(mass),
                            _flat(R_parent), lanes, tol, w_last.numpy(), R_last.numpy(),
                            corr.numpy(), stop_L.numpy(), stop_prev.numpy(), finite)
    else:
        G = torch.empty(n, **f64)
        ok = mod.block_last(_flat(state), _flat(px), _flat(qx), _flat(q), _flat(p), _flat(mass),
                            lanes, kernels.fma_neg, tol, w_last.numpy(), corr.numpy(),
                            stop_L.numpy(), G.numpy(), stop_prev.numpy(), finite)
    if not ok:
        return None
    masses.append(mass)
    weights.append(w_last)
    corrs.append(corr)
    one = weights[0]
    bad = B.abs(one - 1) > ROW_SUM_TOL
    if start is None and bool(bad.any()):
        k = int(np.flatnonzero(_numpy(bad))[0])
        raise LawError("stop-sum", f"{name}: the node weight at the root (context {k}) is "
                       f"{one[k]}, not 1 (c_0 = 1 / h_0 = 1)", (k,), one[k])
    stop = [None] * (L - 1) + [stop_prev, stop_L]
    for d in range(L - 2, -1, -1):  # as the torch route, from depth L-2 up
        n = q_levels[d].shape[0]
        stop[d] = torch.empty(n, **f64)
        if forward:
            mod.token_scan(_flat(q_levels[d]), _flat(weights[d + 1]), _flat(masses[d]),
                           _flat(Rs[d]), lanes, stop[d].numpy())
        else:
            G_up = torch.empty(n, **f64)
            mod.block_scan(_flat(q_levels[d]), _flat(weights[d + 1]), _flat(G),
                           _flat(masses[d]), _flat(weights[d]), lanes, G_up.numpy(),
                           stop[d].numpy())
            G = G_up
    upward = None
    if start is not None:
        upward = weights[0] if forward else (1 - weights[0]) * G
    return NodeLaw(stop, corrs + [pL], [False] * L + [True], upward)


__all__ = ["COMPILED_MIN_NODES", "CompiledKernels", "KERNEL_ENV", "NodeForm", "NodeLaw", "SCANS",
           "compiled_kernels", "expected_accepted", "has_kernels", "law_from_nodes",
           "node_block_law", "node_verifier", "stop_probabilities",
           "per_draft_function", "stop_backward", "stop_forward", "stop_from_weights",
           "validate_nodes"]
