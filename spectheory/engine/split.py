"""The exact engine split into independent subtree tasks, on a local process pool or on Ray.

The per-node route ([`node_block_law`][spectheory.engine.nodes.node_block_law]) steps every node of the
sequence tree once. Below depth s the tree falls into V^s subtrees, one per prefix u = x^s, and
every quantity of the route inside a subtree depends on the rest of the tree only through four
numbers of its root: the parent's state, the drafted token's p and q, and the root's draft mass
Q(u) (and, for a forward scan, the parent's pass product R_{s-1}). So with the nodes of depth < s
stepped here (V^s nodes), each subtree is a task:

1. **phase 1** (one task per u): the subtree's stop masses summed by depth (its part of the tau
   pmf at depths s..L) and its value for the parent, ``upward`` (forward: the root's pass weight
   c_s(u); backward: (1 - h_s(u)) G_s(u));
2. **merge**: from the upward values, the stop masses m_d of the nodes above depth s
   (forward: m_d = Q R_d (1 - sum_a q(a|x) c_{d+1}(x a)); backward: G_{s-1}(x) = sum_a q(a|x)
   upward(x a), then up to the root, m_d = Q h_d G_d) and the output and target masses of every
   prefix of length s, A_s(u) = sum_{d < s} m_d(u^d) corr_d(u_{d+1}|u^d) p(u_{d+2..s}|u^{d+1}),
   T_s(u) = p(u);
3. **phase 2** (one task per u): starting from A_s(u), T_s(u), the subtree's part of
   sum |output law - target law| over the sequences that begin with u (and, with ``laws``, its
   slices of both laws, which are contiguous in the lexicographic order).

The tau pmf is the sum of the parts, the TV half the sum of the phase-2 sums; in rationals both
equal the single-process analysis exactly (the same terms, added in another order), in float64 to
rounding. Each task's working memory is that of the per-node route on V^(L+1-s) sequences; the
instance's tables travel to the workers once (Ray: one object in the object store). The cost is
about twice the single-process route's (each subtree is stepped in both phases) divided by the
workers.

```python
import spectheory as st

inst = st.random_instance(4, 4, seed=0, denominator=100)
one = st.analyze(inst, "block", exact=True, laws=False)
split = st.analyze(inst, "block", exact=True, laws=False, executor="local", split_depth=2)
assert split.tau_pmf == one.tau_pmf and split.tv_to_target == one.tv_to_target
```
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from fractions import Fraction

import numpy as np

from ..runtime import backend as Bk
from ..runtime._lazy import torch
from ..runtime.errors import OptionError, SizeLimitError
from ..runtime.limits import shown as _repr_cut
from ..inputs.instances import Instance
from .nodes import SubtreeStart, _repeat, node_block_law, validate_nodes
from ..runtime.sizes import check_size

EXECUTORS = ("local", "ray")
#: Largest number of subtree tasks (V^s) a split may ask for.
MAX_TASKS = 1_000_000


def check_executor_options(executor, split_depth=None, workers=None, address=None, *,
                           flags: bool = False) -> None:
    """Refuse the options that would do nothing, one rule for
    [`analyze`][spectheory.engine.analysis.analyze], the ``exact`` command and the sweeps:
    ``split_depth`` or ``workers`` without an ``executor``, and ``address`` without
    ``executor="ray"`` ([`OptionError`][spectheory.runtime.errors.OptionError] naming the option).
    ``None`` is "not given". ``flags``: name the options as the command line spells them
    (``--split-depth 2``) rather than as keyword arguments (``split_depth=2``)."""
    def shown(option: str, value) -> str:
        if not flags:
            return f"{option}={_repr_cut(value, 40)}"
        return f"--{option.replace('_', '-')} " + (repr(value) if option == "address" else
                                                   str(value))

    use = "--executor" if flags else "executor"
    if executor is None:
        for option, value in (("split_depth", split_depth), ("workers", workers)):
            if value is not None:
                drop = f"--{option.replace('_', '-')}" if flags else option
                raise OptionError(f"{shown(option, value)} does nothing without "
                                  + ("--executor local|ray" if flags else
                                     "executor='local' or 'ray'")
                                  + f" (it sets how the split route runs); add {use} or drop "
                                  + drop)
    if address is not None and executor != "ray":
        now = f"--executor {executor or '(none)'}" if flags else f"executor={executor!r}"
        raise OptionError(f"{shown('address', address)} is for "
                          + ("--executor ray" if flags else "executor='ray'")
                          + f" (the Ray cluster to use); with {now} it would do nothing")
    if workers is not None and executor == "ray" and address:
        raise OptionError(f"{shown('workers', workers)} does nothing with "
                          + (f"--address {address!r}" if flags else f"address={address!r}")
                          + ": the Ray cluster's CPUs set how many tasks run at once; drop "
                          + ("--workers" if flags else "workers"))
    if workers is not None:
        check_workers(workers, flags=flags)


def max_workers() -> int:
    """The most workers (child processes, or the CPUs of a local Ray cluster) a split or a
    sweep may start on this machine: 4 x its cores."""
    return 4 * (os.cpu_count() or 1)


def check_workers(workers, *, flags: bool = False) -> int:
    """``workers`` as an int, or [`OptionError`][spectheory.runtime.errors.OptionError]: one
    rule and one message for the ``exact`` and ``sweep`` commands, `analyze` and `run_sweep`
    (an integer in [1, `max_workers`])."""
    top = max_workers()
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) \
            or not 1 <= workers <= top:
        shown = f"--workers {_repr_cut(workers, 40)}" if flags else f"workers={_repr_cut(workers, 40)}"
        raise OptionError(f"{shown} must be an integer in [1, {top}] (4 x this machine's "
                          f"{top // 4} cores)")
    return int(workers)


def _rows(model, d: int, a: int, b: int, exact: bool):
    """Rows a..b of the model's level d (conditionals after prefixes of length d), without
    building the whole level."""
    V, D = model.vocab_size, model.depth
    if d <= D:
        rows = model.tables[d][a:b]
    elif D == 0:
        rows = np.broadcast_to(model.tables[0], (b - a, V))
    else:
        rows = model.tables[D][np.arange(a, b) % (V ** D)]
    rows = np.array(rows, copy=True, order="C")  # its own writable rows (tables may be views)
    return rows if exact else torch.from_numpy(rows.astype(np.float64, copy=False))


def _subtree_levels(inst: Instance, s: int, u: int, exact: bool):
    """The draft rows (depths s..L-1) and target rows (depths s..L) below prefix index u of
    depth s, as relative levels [V^j, V]."""
    V, L = inst.vocab_size, inst.block_length
    q = [_rows(inst.draft, s + j, u * V ** j, (u + 1) * V ** j, exact) for j in range(L - s)]
    p = [_rows(inst.target, s + j, u * V ** j, (u + 1) * V ** j, exact) for j in range(L - s + 1)]
    return q, p


def _one(x, i: int):
    return None if x is None else x[i:i + 1]


def _subtree(payload, u: int):
    inst, spec, s, exact, starts = payload
    q, p = _subtree_levels(inst, s, u, exact)
    st = starts
    start = SubtreeStart(_one(st["state"], u), st["px"][u:u + 1], st["qx"][u:u + 1],
                         st["mass"][u:u + 1], st["R"][u:u + 1] if st["R"] is not None else 1,
                         depth=s, index=u)
    nodes = node_block_law(spec.node, q, p, inst.vocab_size, inst.block_length - s,
                           name=spec.name, start=start)
    return nodes, p


def _phase1(payload, u: int):
    """Subtree u: its stop masses summed by relative depth, and its upward value."""
    nodes, _ = _subtree(payload, u)
    sums = [Bk.sum(m, axis=0) for m in nodes.stop_mass]
    exact = payload[3]
    conv = (lambda v: v) if exact else (lambda v: float(v))
    return [conv(v) for v in sums], conv(nodes.upward[0])


def _phase2(payload, u: int, A0, T0, laws: bool):
    """Subtree u: sum |output - target| over the sequences beginning with u (and its slices of
    the two laws)."""
    from .output import node_output_law

    inst, _, s, exact, _ = payload
    nodes, p = _subtree(payload, u)
    like = p[0]
    if exact:
        a0, t0 = np.array([A0], dtype=object), np.array([T0], dtype=object)
    else:
        a0 = torch.tensor([A0], dtype=like.dtype)
        t0 = torch.tensor([T0], dtype=like.dtype)
    out, tgt, tv = node_output_law(nodes, p, inst.vocab_size, inst.block_length - s, laws,
                                   A0=a0, T0=t0)
    half = tv * 2  # node_output_law halves its sum; the halving happens once, after the merge
    if laws and callable(tgt):
        tgt = tgt()
    if laws and not exact:
        out, tgt = out.numpy(), tgt.numpy()
    return (half if exact else float(half)), (out if laws else None), (tgt if laws else None)


# ----------------------------------------------------------------------------- executors


def _run(fn, args_list, executor: str, workers: int, payload, remote=None):
    """``[fn(payload, *args) for args in args_list]`` on the executor, in order; ``remote`` is
    ``(ray, payload's object ref)`` for the Ray executor (one session and one copy of the
    payload for both phases)."""
    if executor == "local" and workers == 1:
        return [fn(payload, *args) for args in args_list]
    if executor == "local":
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        global _PAYLOAD
        _PAYLOAD = payload  # inherited by the forked workers, not pickled per task
        try:
            with ProcessPoolExecutor(max_workers=workers,
                                     mp_context=mp.get_context("fork")) as pool:
                return list(pool.map(_with_payload, [(fn, args) for args in args_list],
                                     chunksize=max(1, len(args_list) // (4 * workers))))
        finally:
            _PAYLOAD = None
    ray, ref = remote
    task = ray.remote(num_cpus=1, max_retries=0)(_ray_call)
    return ray.get([task.remote(fn, ref, *args) for args in args_list])


def _payload_bytes(inst: Instance, exact: bool) -> int:
    """About the size of the instance's tables in Ray's object store (Fractions pickle to
    roughly 100 bytes an entry)."""
    tables = list(inst.target.tables) + list(inst.draft.tables)
    return sum(t.size * 100 if exact else t.nbytes for t in tables)


_PAYLOAD = None


def _with_payload(item):
    fn, args = item
    return fn(_PAYLOAD, *args)


def _ray_call(fn, payload, *args):
    return fn(payload, *args)


# ----------------------------------------------------------------------------- driver


def _upper(spec, q_levels, p_levels, V: int, s: int):
    """Step the nodes of depths 0..s-1; the subtree roots' starts and the upper weights."""
    form = spec.node
    exact = Bk.is_exact(p_levels[0])
    mass = Bk.full((1,), 1, p_levels[0])
    state = px = qx = None
    masses, weights, corrs = [], [], []
    R = None
    for d in range(s):
        state, w, c = form.step(state, px, qx, q_levels[d], p_levels[d])
        validate_nodes(w, c, d, exact, spec.name, skip_corr=c is p_levels[d])
        masses.append(mass)
        weights.append(w)
        corrs.append(c)
        R = w if R is None else _repeat(R, V) * w
        px = p_levels[d].reshape(-1)
        qx = q_levels[d].reshape(-1)
        if state is not None:
            state = _repeat(state, V)
        mass = (Bk.expand_dims(mass, 1) * q_levels[d]).reshape(-1)
    starts = {"state": state, "px": px, "qx": qx, "mass": mass,
              "R": _repeat(R, V) if form.scan == "forward" else None}
    return starts, masses, weights, corrs


def _check_split(V: int, L: int, depth, workers, executor: str):
    if executor not in EXECUTORS:
        raise OptionError(f"unknown executor {executor!r}; choose from {', '.join(EXECUTORS)}")
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) \
            or not 1 <= depth <= L - 1:
        raise OptionError(f"split_depth = {_repr_cut(depth, 40)} must be an integer in [1, L - 1] = "
                          f"[1, {L - 1}] (the subtrees below depth d are the tasks)")
    if V ** depth > MAX_TASKS:
        raise SizeLimitError(f"split_depth = {depth}: V^d = {V}^{depth} = {V ** depth:,} tasks "
                             f"exceed {MAX_TASKS:,}; use a smaller split depth")
    check_workers(workers)


def analyze_split(instance: Instance, spec, exact: bool, laws: bool, split_depth: int = 1,
                  executor: str = "local", workers: int | None = None,
                  address: str | None = None, max_sequences: int | None = None):
    """Tau pmf, output and target laws (None unless ``laws``) and TV of a node-form verifier,
    its V^d subtrees evaluated as tasks (module docstring). Returns ``(tau_pmf, out, tgt, tv)``
    as the per-node route does; `spectheory.analyze` with ``executor=`` calls this."""
    from .seqtree import levels

    V, L = instance.vocab_size, instance.block_length
    if spec.node is None:
        raise OptionError(f"a split analysis runs the per-node route; verifier {spec.name!r} "
                          "has no node form (token, block and other node-rule verifiers do)")
    if L < 2:
        raise OptionError("a split analysis needs L >= 2 (the subtrees below depth d >= 1)")
    if workers is None:
        workers = max(1, min(os.cpu_count() or 1, 8))
    _check_split(V, L, split_depth, workers, executor)
    s = int(split_depth)
    # the guard applies to one task's enumeration, V^(L+1-s) sequences, and, when the laws are
    # assembled here, to the whole V^(L+1)
    check_size(V ** (L + 1 - s), "one subtree task of the split analysis", exact,
               max_sequences, f"V^(L+1-d) = {V}^{L + 1 - s}")
    if laws:
        check_size(V ** (L + 1), "split analysis with laws=True (the output and target laws "
                   "are assembled whole; laws=False keeps only the tau pmf and the TV)", exact,
                   max_sequences, f"V^(L+1) = {V}^{L + 1}")
    model_d = instance.draft.to_exact() if exact else instance.draft.to_float()
    model_p = instance.target.to_exact() if exact else instance.target.to_float()
    inst = Instance(V, L, model_p, model_d)
    q_up = levels(inst.draft, 0, s, exact)
    p_up = levels(inst.target, 0, s, exact)
    starts, masses, weights, corrs = _upper(spec, q_up, p_up, V, s)
    one = weights[0]
    if (one != 1).any() if exact else bool((Bk.abs(one - 1) > 1e-9).any()):
        from ..law import LawError

        raise LawError("stop-sum", f"{spec.name}: the node weight at the root is {one[0]}, not 1",
                       (0,), one[0])
    payload = (inst, spec, s, exact, starts)
    n = V ** s
    with ExitStack() as stack:
        remote = None
        if executor == "ray":
            from ..runtime.raycluster import ray_session

            ray = stack.enter_context(ray_session(workers, address,
                                                  2 * _payload_bytes(inst, exact)))
            remote = (ray, ray.put(payload))
        first = _run(_phase1, [(u,) for u in range(n)], executor, workers, payload, remote)
        tau, A, T = _merge(spec, first, q_up, p_up, masses, weights, corrs, V, L, s, exact)
        conv = (lambda v: v) if exact else (lambda v: float(v))
        second = _run(_phase2, [(u, conv(A[u]), conv(T[u]), laws) for u in range(n)],
                      executor, workers, payload, remote)
    zero = Fraction(0) if exact else 0.0
    tv = sum((t for t, _, _ in second), zero) / 2
    out = tgt = None
    if laws:
        out = np.concatenate([o for _, o, _ in second])
        tgt = np.concatenate([g for _, _, g in second])
    return tau, out, tgt, tv


def _merge(spec, first, q_up, p_up, masses, weights, corrs, V: int, L: int, s: int,
           exact: bool):
    """From phase 1's parts: the tau pmf, and the output and target masses A_s, T_s of the
    prefixes of length s (the stop masses above depth s from the subtrees' upward values)."""
    zero = Fraction(0) if exact else 0.0
    tau = [zero] * (L + 1)
    for sums, _ in first:
        for j, v in enumerate(sums):
            tau[s + j] = tau[s + j] + v
    up = [v for _, v in first]
    up = np.array(up, dtype=object) if exact else torch.tensor(up, dtype=torch.float64)
    stop = [None] * s
    if spec.node.scan == "forward":
        R = [weights[0]]
        for d in range(1, s):
            R.append(_repeat(R[-1], V) * weights[d])
        for d in range(s - 1, -1, -1):
            below = up if d == s - 1 else weights[d + 1]
            passed = Bk.sum(q_up[d] * below.reshape(-1, V), axis=1)
            stop[d] = masses[d] * R[d] * (1 - passed)
    else:
        G = Bk.sum(q_up[s - 1] * up.reshape(-1, V), axis=1)  # G_{s-1}
        stop[s - 1] = masses[s - 1] * weights[s - 1] * G
        for d in range(s - 2, -1, -1):
            go_on = (1 - weights[d + 1]) * G
            G = Bk.sum(q_up[d] * go_on.reshape(-1, V), axis=1)
            stop[d] = masses[d] * weights[d] * G
    for d in range(s):
        tau[d] = Bk.sum(stop[d], axis=0) if exact else float(Bk.sum(stop[d], axis=0))
    A, T = Bk.full((1,), 0, p_up[0]), Bk.full((1,), 1, p_up[0])
    for j in range(s):
        A = (Bk.expand_dims(A, 1) * p_up[j] + Bk.expand_dims(stop[j], 1) * corrs[j]).reshape(-1)
        T = (Bk.expand_dims(T, 1) * p_up[j]).reshape(-1)
    return tau, A, T
