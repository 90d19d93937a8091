"""Exact law of a verifier's output, by enumerating the whole sequence tree; the checker.

One engine for 1 and K paths. [`analyze`][spectheory.engine.analysis.analyze],
[`multi_iteration_law`][spectheory.engine.analysis.multi_iteration_law] and
[`check_lossless`][spectheory.engine.lossless.check_lossless] take any verifier (a name, ``module:function``,
a [`VerifierSpec`][spectheory.registry.VerifierSpec] or a function), a number of paths K (default 1)
and a drafting scheme (default: the verifier's own). K = 1 runs the per-draft route below; K > 1
enumerates the joint draft outcomes ([`spectheory.engine.joint`][spectheory.engine.joint]); both aggregate
into the same [`BlockLaw`][spectheory.engine.perdraft.BlockLaw], from which everything else follows.

For an instance (draft q, target p, block length L) and a verifier with law
(P(tau = i | X), correction_i(. | X)), the per-draft route evaluates the verifier once on the batch
of all V**L drafts (in chunks; float64 numpy or torch, or numpy Fractions in exact mode) and forms

* the pmf of tau:        P(tau = i) = sum_X q(X) P(tau = i | X);
* the emitted block law: E_{i+1}(y^{i+1}) = sum_{X : X^i = y^i} q(X) P(tau = i | X)
  correction_i(y_{i+1} | X), the probability that the verifier outputs exactly the block y^{i+1};
* the output law over V**(L+1) of "output block, then target sampling up to length L+1":
  A_1 = E_1,  A_{j+1}(y^{j+1}) = A_j(y^j) p(y_{j+1} | y^j) + E_{j+1}(y^{j+1});
* its total variation distance to the target law p(y^{L+1}) (zero iff the verifier is valid).

Applied iteration after iteration from every context, the same block law gives the exact law of the
first N generated tokens ([`multi_iteration_law`][spectheory.engine.analysis.multi_iteration_law]), which
shows that composition is lossless. Validity: Sun et al. (arXiv 2403.10444), section 2.

Every chunk of a verifier's law is checked by [`validate_law`][spectheory.law.validate_law] before
it is used, so a law with NaN, negative entries or rows that are not distributions raises
[`LawError`][spectheory.law.LawError] instead of producing a verdict.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

import numpy as np
from ..runtime._lazy import is_tensor, torch

from ..runtime import backend as Bk
from ..runtime import limits
from ..runtime.errors import SpectheoryError, check_flag
from ..inputs.instances import Instance, check_instance
from ..inputs.processing import describe as sampling_extra
from ..inputs.processing import process_instance
from ..registry import Plan, VerifierSpec, plan
from .output import node_output_law, output_law, target_law, total_variation
from .perdraft import BlockLaw, block_output_law
from .plan import (_cheaper, _check_instance, _plan_sizes, check_paths, float_backend,
                   resolve_route)
from .seqtree import levels
from ..runtime.limits import shown as _repr_cut

def node_route_law(spec: VerifierSpec, q_levels, p_levels, V: int, L: int,
                   screen: list | None = None, compiled: bool = True):
    """Per-node route ([`node_block_law`][spectheory.engine.nodes.node_block_law]) of a node-form
    verifier (``screen``, ``compiled``: as there)."""
    from .nodes import node_block_law

    return node_block_law(spec.node, q_levels, p_levels, V, L, name=spec.name, screen=screen,
                          compiled=compiled)


def _node_to_block(nodes, C: int, L: int) -> BlockLaw:
    return BlockLaw(nodes.tau_pmf(C), [None] + [nodes.emitted(d) for d in range(L + 1)])


def _analytic(how: Plan, q_levels, p_levels, V: int, L: int) -> BlockLaw:
    """A spec's analytic route: the package's own called directly, a user's through
    [`call_user`][spectheory.runtime.errors.call_user]; its result must be a `BlockLaw`."""
    from ..runtime.errors import UserCodeError, call_user, package_code

    fn = how.spec.analytic
    if package_code(fn):
        return fn(how, q_levels, p_levels, V, L)
    what = f"verifier {how.spec.name!r}'s analytic route"
    out = call_user(fn, how, q_levels, p_levels, V, L, what=what)
    if not isinstance(out, BlockLaw):
        raise UserCodeError(f"{what} returned a {type(out).__name__}, not a BlockLaw (tau_pmf "
                            "and the emitted law per level; spectheory.engine.perdraft)")
    return out


def block_law(how: Plan, q_levels, p_levels, V: int, L: int,
              progress: Callable[[int], None] | None = None,
              symmetric: bool | None = None, route: str | None = "auto") -> BlockLaw:
    """The block law below C contexts of a planned verifier ([`plan`][spectheory.registry.plan]).

    Routes ([`resolve_route`][spectheory.engine.plan.resolve_route]): K = 1 the per-node route for
    node-form verifiers, else the per-draft route; K > 1 a verifier's analytic route (GBV), else the
    joint-outcome route of [`spectheory.engine.joint`][spectheory.engine.joint] (once per context)."""
    route = resolve_route(how, route, symmetric)
    if route == "node":
        block = _node_to_block(node_route_law(how.spec, q_levels, p_levels, V, L),
                               p_levels[0].shape[0], L)
        if progress is not None:  # one step: the clock (--time-limit) is checked after it
            progress(V**L * p_levels[0].shape[0])
        return block
    if route == "per-draft":
        return block_output_law(how.spec, q_levels, p_levels, V, L, progress)
    if route == "analytic":
        return _analytic(how, q_levels, p_levels, V, L)
    from .drafttrees import tree_block_law_nodes
    from .joint import multipath_block_law

    C = p_levels[0].shape[0]
    parts = []
    for c in range(C):
        ql = [q_levels[d][c * V**d:(c + 1) * V**d] for d in range(L)]
        pl = [p_levels[d][c * V**d:(c + 1) * V**d] for d in range(L + 1)]
        if route == "tree":  # the K paths as the draft tree (K, 1, ..., 1)
            parts.append(tree_block_law_nodes(how.spec, (how.paths,) + (1,) * (L - 1), ql, pl,
                                              V, how.drafting))
            if progress is not None:
                progress(1)
            continue
        parts.append(multipath_block_law(how.spec, ql, pl, V, L, how.paths, how.drafting,
                                         progress, symmetric))
    if C == 1:
        return parts[0]
    cat = torch.cat if Bk.is_torch(p_levels[0]) else (lambda xs: np.concatenate(xs))
    return BlockLaw(cat([b.tau_pmf for b in parts]),
                    [None] + [cat([b.emitted[j] for b in parts]) for j in range(1, L + 2)])


# ----------------------------------------------------------------------------- results


def as_result(x):
    """A law as results hold it (one type per mode, whatever the route computed on): a numpy
    float64 array in float mode, a numpy object array of Fractions in exact mode; a function
    (a target law built on first access) returns its result converted; None stays None."""
    if is_tensor(x):
        return x.detach().cpu().numpy()
    if callable(x) and not isinstance(x, np.ndarray):
        return lambda: as_result(x())
    return x


def _numpy_floats(arrays: str, exact: bool):
    """Around a numpy float computation, numpy's floating-point errors as torch's (inf / NaN
    silently, found by the engine's validation); elsewhere numpy's settings are left alone."""
    return Bk.float_errors() if arrays == "numpy" and not exact else contextlib.nullcontext()


def _to_py(x):
    if is_tensor(x):
        return x.item()
    if isinstance(x, Fraction):
        return x
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return x


class _Lazy:
    """A dataclass field holding an array, or a zero-argument function that computes it on first
    access (the target law over V^(L+1) sequences is only built when someone reads it)."""

    def __set_name__(self, owner, name):
        self.slot = "_lazy_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return None
        value = obj.__dict__.get(self.slot)
        if callable(value) and not (is_tensor(value) or isinstance(value, np.ndarray)):
            value = value()
            obj.__dict__[self.slot] = value
        return value

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = value


@dataclass
class ExactAnalysis:
    """Exact analysis of one verifier on one instance (floats, or Fractions in exact mode).

    ``tau_pmf``, ``expected_accepted``, ``block_efficiency`` and ``tv_to_target`` are Python
    floats (Fractions in exact mode). ``output_law`` and ``target_law`` are the laws over
    V^(L+1) sequences in lexicographic order, 1-D numpy arrays: float64 in float mode, object
    arrays of Fractions in exact mode, whichever route and backend computed them (None when the
    analysis ran with ``laws=False``); the target law is computed on first access. ``route`` is
    the exact route that ran ([`resolve_route`][spectheory.engine.plan.resolve_route]);
    ``backend`` the arrays it computed on (``"numpy"`` or ``"torch"``,
    [`float_backend`][spectheory.engine.plan.float_backend]; ``"numpy"`` in exact mode).
    """

    verifier: str
    vocab_size: int
    block_length: int
    exact: bool
    tau_pmf: list
    expected_accepted: Any
    block_efficiency: Any
    tv_to_target: Any
    output_law: Any = field(repr=False)
    target_law: Any = field(default=_Lazy(), repr=False)
    extra: dict = field(default_factory=dict)
    route: str = ""
    backend: str = ""

    def to_json(self) -> dict:
        enc = (lambda v: str(v)) if self.exact else (lambda v: float(v))
        out = {
            "verifier": self.verifier,
            "vocab_size": self.vocab_size,
            "block_length": self.block_length,
            "expected_accepted": enc(self.expected_accepted),
            "block_efficiency": enc(self.block_efficiency),
            "tau_pmf": [enc(v) for v in self.tau_pmf],
            "tv_to_target": enc(self.tv_to_target),
        }
        out.update(self.extra)
        return out


def _progress_bar(total: int, enabled: bool, desc: str):
    """(update, close) of a progress bar on stderr (when ``enabled`` or the command line asks for
    one); ``update`` also checks the time limit between chunks
    ([`spectheory.runtime.limits`][spectheory.runtime.limits])."""
    if not (enabled or limits.progress_enabled()):
        return limits.tick, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="draft", unit_scale=True, leave=False)

    def update(n):
        bar.update(n)
        limits.tick(n)

    return update, bar.close

def analyze(instance: Instance, verifier, name: str | None = None,
            exact: bool | None = None, max_sequences: int | None = None,
            progress: bool = False, device="cpu", *, paths: int | None = None,
            drafting: str | None = None, symmetric: bool | None = None,
            route: str | None = "auto", laws: bool = True, sampling=None,
            draft_sampling=None, executor: str | None = None,
            split_depth: int | None = None,
            workers: int | None = None, address: str | None = None,
            backend: str | None = "auto") -> ExactAnalysis:
    """Exact tau pmf, E[tau], E[tau+1] and TV(output law, target law) of a verifier.

    Parameters
    ----------
    instance : Instance
        Draft q and target p tables, block length L.
    verifier : str, VerifierSpec or callable
        A registered name, ``"module:function"``, a spec, or a law function (a bare function is
        a single-path verifier; see [`spectheory.registry`][spectheory.registry]).
    name : str, optional
        Label of the result (default: the verifier's name).
    exact : bool, optional
        Exact rationals (numpy arrays of Fractions) or float64; default: as the instance.
    max_sequences : int, optional
        Size guard on the enumeration ([`check_size`][spectheory.runtime.sizes.check_size]).
    paths : int, optional
        Number of draft paths K (default 1).
    drafting : {"iid", "norep"}, optional
        Drafting scheme of the K paths (default: the verifier's own).
    symmetric : bool, optional
        K > 1: enumerate sorted tuples of paths (default: i.i.d. drafting and an
        order-invariant verifier). True is checked as a declaration is: a verifier whose law
        changes with the paths' order on a sample of outcomes is refused.
    route : {"auto", "node", "per-draft", "enumerate", "analytic"}
        Which exact route runs ([`resolve_route`][spectheory.engine.plan.resolve_route]). ``auto``
        (default): the per-node route for verifiers with a node form (token, block; cost ~ one step
        per node of the sequence tree), else the per-draft route (one path) or the verifier's
        analytic route (GBV: block verification against the skewed draft q^G) or the joint
        enumeration (K paths). ``per-draft`` / ``enumerate`` force the enumeration, as an
        independent cross-check.
    laws : bool
        Keep the output and target laws over V^(L+1) sequences (default). With False, only the
        tau pmf and the TV are computed (per-node route: the TV is accumulated without
        materialising the V^(L+1) laws, which then are None).
    sampling, draft_sampling : optional
        Sampling parameters (`spectheory.inputs.processing.parse_sampling`: a string such as
        ``"temperature=0"`` or ``"top_k=20,top_p=0.9"``, a mapping or a `SamplingParams`) that
        process the target rows, and the draft rows, before anything else
        (`spectheory.inputs.processing.process_instance`): the law is the verifier's against the
        processed target, drafts are sampled from the processed draft rows, and the TV is to
        the processed target's law. Default None: rows as given (the draft rows stay raw unless
        ``draft_sampling`` is given).
    executor : {None, "local", "ray"}
        Split the per-node route into the V^d subtrees below depth ``split_depth`` (default 1)
        and evaluate them as tasks (`spectheory.engine.split`): ``"local"`` on ``workers`` processes
        (1: in this process), ``"ray"`` as Ray tasks (``address`` of a cluster, else a local
        one). ``split_depth`` or ``workers`` without ``executor``, and ``address`` without
        ``executor="ray"``, would do nothing: refused
        ([`OptionError`][spectheory.runtime.errors.OptionError] naming the option). The same law
        exactly in rationals; the size guard applies to one task (V^(L+1-d) sequences).
        Node-form verifiers (token, block, ...) with one path; floats on torch.
    device : str
        Where float64 torch computes (``"cpu"``, ``"cuda"``, ``"cuda:0"``, ...).
    backend : {"auto", "numpy", "torch"}
        What the float route computes on ([`float_backend`][spectheory.engine.plan.float_backend]):
        ``auto`` (default) numpy float64 on the CPU for verifiers that declare it
        (`VerifierSpec.numpy_float`) on the per-node and per-draft routes of one path and the
        analytic route of K paths, up to
        ``spectheory.engine.plan.NUMPY_MAX_SEQUENCES`` sequences; torch is then never
        imported), else torch;
        ``torch`` forces torch, ``numpy`` refuses where numpy cannot run. The results have the
        same types either way.

    Returns
    -------
    ExactAnalysis
        ``tau_pmf[i] = sum_X P(X) P(tau = i | X)``, E[tau], the block efficiency E[tau+1], and
        the total variation between "output block, then target sampling up to L+1 tokens" and
        p(y^{L+1}) (zero iff the verifier is valid; Sun et al., arXiv 2403.10444, sec. 2).
        ``extra`` holds ``paths`` and ``drafting`` for multi-path verifiers. The laws are numpy
        arrays ([`ExactAnalysis`][spectheory.engine.analysis.ExactAnalysis]).
    """
    from .split import check_executor_options

    check_executor_options(executor, split_depth, workers, address)
    laws = check_flag(laws, "laws")
    symmetric = check_flag(symmetric, "symmetric", none=True)
    progress = check_flag(progress, "progress")
    if name is not None and not isinstance(name, str):  # the result's label, printed as is
        raise SpectheoryError(f"name = {_repr_cut(name, 40)} must be a string (the result's label) or "
                              "None")
    how = plan(verifier, paths, drafting)
    check_paths(how)
    defer = _screens_top(instance, how, route, symmetric, exact, device, backend, laws,
                         executor, sampling, draft_sampling, max_sequences)
    _check_instance(instance, skip_top=defer)
    V, L = instance.vocab_size, instance.block_length
    route = _cheaper(how, resolve_route(how, route, symmetric), route, V, L, symmetric)
    exact = instance.exact if exact is None else exact
    if executor is not None and not exact:  # the split executors compute floats on torch
        if backend == "numpy":
            raise SpectheoryError(f"executor={executor!r} computes floats on torch; backend "
                                  "'numpy' cannot run there (use backend 'auto' or 'torch')")
        backend = "torch" if backend in (None, "auto") else backend
    arrays = float_backend(how, route, device, backend, exact, V ** (L + 1))
    if sampling is not None or draft_sampling is not None:  # refused before the size's note
        from ..inputs.processing import parse_sampling
        from ..inputs.stateful import check_vocabulary

        for params, where in ((parse_sampling(sampling), ""),
                              (parse_sampling(draft_sampling), "draft sampling")):
            if params is not None:
                check_vocabulary(params, V, where)
    if executor is None:  # a split analysis guards the size of one task instead
        _plan_sizes(how, V, L, 1, exact, max_sequences, "exact analysis",
                    f"V^(L+1) = {V}^{L + 1}", symmetric, route)
    given = instance
    instance = process_instance(instance, sampling, draft_sampling, exact)
    with _numpy_floats(arrays, exact):
        return _analyze(instance, how, name, exact, max_sequences, progress, device, symmetric,
                        route, laws, sampling, draft_sampling, executor, split_depth, workers,
                        address, arrays, given if defer else None)


def _screens_top(instance, how, route, symmetric, exact, device, backend, laws, executor,
                 sampling, draft_sampling, max_sequences) -> bool:
    """Whether the analysis may leave the finiteness check of the deepest tables (the target's
    at depths L-1 and L, the draft's at depth L-1) to the compiled kernels of the per-node route
    and its output law, which read those tables once anyway (the largest, about as long as the
    rest of the analysis to check): token or block verification with one path, the full laws
    asked for, float64 torch on the CPU, no sampling parameters, no executor, L >= 2 and a size
    at which the kernels run ([`compiled_kernels`][spectheory.engine.nodes.compiled_kernels],
    which loads them: the analysis would). Anything these options would refuse is refused later
    in the usual order, after the whole check (then False)."""
    from ..runtime import limits
    from ..inputs.instances import MAX_BLOCK, MAX_VOCAB
    from ..runtime.errors import is_integer
    from .nodes import COMPILED_MIN_NODES, KERNEL_ENV, has_kernels

    try:
        if not (isinstance(instance, Instance) and executor is None and laws is True
                and sampling is None and draft_sampling is None and str(device) == "cpu"
                and how.paths == 1 and has_kernels(how.spec.node)):
            return False
        V, L = instance.vocab_size, instance.block_length
        ex = instance.exact if exact is None else exact
        if not (is_integer(V) and is_integer(L) and 2 <= L <= MAX_BLOCK
                and 1 <= V <= MAX_VOCAB):
            return False  # refused by check_instance, before any V^L is formed
        if ex or V ** L < COMPILED_MIN_NODES or not limits.env_switch(KERNEL_ENV):
            return False
        r = _cheaper(how, resolve_route(how, route, symmetric), route, V, L, symmetric)
        if r != "node" or float_backend(how, r, device, backend, False, V ** (L + 1)) != "torch":
            return False
        from .nodes import compiled_kernels

        row = torch.zeros((1, V), dtype=torch.float64)
        if compiled_kernels(how.spec.node, row, V, nodes=V ** L) is None:
            return False  # numba missing, or its arithmetic unlike torch's: nothing screens
        with limits.without_notes():  # the analysis checks (and notes) the size again
            _plan_sizes(how, V, L, 1, False, max_sequences, "exact analysis",
                        f"V^(L+1) = {V}^{L + 1}", symmetric, r)
    except Exception:  # noqa: BLE001 - refused later, in the usual order
        return False
    return True


def _analyze(instance, how, name, exact, max_sequences, progress, device, symmetric, route,
             laws, sampling, draft_sampling, executor, split_depth, workers, address,
             arrays, deferred=None) -> ExactAnalysis:
    V, L = instance.vocab_size, instance.block_length
    if executor is None:
        q_levels = levels(instance.draft, 0, L, exact, device, arrays)
        p_levels = levels(instance.target, 0, L + 1, exact, device, arrays)
    label = name or how.spec.name
    if executor is not None:
        if how.paths != 1 or how.spec.node is None:
            raise SpectheoryError(f"executor={executor!r} splits the per-node route: verifier "
                                  f"{how.spec.name!r} with {how.paths} path(s) has none "
                                  "(node-form verifiers with one path only)")
        if route != "node" or str(device) != "cpu":
            raise SpectheoryError(f"executor={executor!r} runs the per-node route on the CPU; "
                                  f"route={route!r} / device={device!r} cannot be split (leave "
                                  "them at their defaults, or drop executor)")
        from .split import analyze_split

        if split_depth is None:
            split_depth = 1
        tau, out, tgt, tv = analyze_split(instance, how.spec, exact, laws, split_depth,
                                          executor, workers, address, max_sequences)
        tau_pmf = [tau]
        route = f"node, split at depth {split_depth} ({executor})"
    elif route == "node":
        checked = deferred is None  # else the deepest tables are screened by the kernels
        screen: list | None = None if checked else []
        nodes = node_route_law(how.spec, q_levels, p_levels, V, L, screen=screen)
        if not checked and screen != [True]:  # the tables at depth L-1 not known finite
            _check_instance(deferred)
            checked = True
        if nodes is None:  # the tables are finite and a kernel's screen failed: the torch
            # route's diagnosis of the node quantities
            nodes = node_route_law(how.spec, q_levels, p_levels, V, L, compiled=False)
        tau_pmf = nodes.tau_pmf(1)
        top: list = []
        out, tgt, tv = node_output_law(nodes, p_levels, V, L, laws, screen=top)
        if not checked and top != [True]:  # the target table at depth L not known finite
            _check_instance(deferred)
    else:
        total = V**L
        if how.paths > 1 and route == "enumerate":
            from .joint import outcome_count, use_symmetry

            total = outcome_count(V, L, how.paths, use_symmetry(how, symmetric))
        if route == "tree":
            total = 1  # one step per context
        update, close = _progress_bar(total, progress and route != "analytic", label)
        try:
            block = block_law(how, q_levels, p_levels, V, L, update, symmetric, route)
        finally:
            close()
        tau_pmf = block.tau_pmf
        out = output_law(block, p_levels, V, L)[0]
        tgt = target_law(p_levels, L + 1)[0]
        tv = total_variation(out, tgt)
        if not laws:
            out = tgt = None
    pmf = [_to_py(v) for v in tau_pmf[0]]
    zero = Fraction(0) if exact else 0.0
    e_tau = sum((i * v for i, v in enumerate(pmf)), zero)
    extra = {} if how.spec.single_path else {"paths": how.paths, "drafting": how.drafting}
    extra.update(sampling_extra(sampling, draft_sampling))
    return ExactAnalysis(
        verifier=label,
        vocab_size=V,
        block_length=L,
        exact=exact,
        tau_pmf=pmf,
        expected_accepted=e_tau,
        block_efficiency=e_tau + 1,
        tv_to_target=_to_py(tv),
        output_law=as_result(out),
        target_law=as_result(tgt),
        extra=extra,
        route=route,
        backend=arrays,
    )

def multi_iteration_law(instance: Instance, verifier, n_tokens: int,
                        exact: bool | None = None, max_sequences: int | None = None,
                        device="cpu", *, paths: int | None = None, drafting: str | None = None,
                        route: str | None = "auto", sampling=None, draft_sampling=None,
                        backend: str | None = "auto"):
    """Exact law of the first ``n_tokens`` generated tokens when the verifier runs iteration after
    iteration (each iteration drafts K paths of L tokens from the current context, verifies, appends
    the tau + 1 output tokens). Returns (generated law [V**N], target law [V**N], TV): the laws as
    1-D numpy arrays (float64, or Fractions in exact mode), the TV a float (a Fraction). ``route``,
    ``sampling``, ``draft_sampling``, ``device`` and ``backend`` as for
    [`analyze`][spectheory.engine.analysis.analyze] (the target law is then the processed target's).

    Contexts deeper than the instance's tables use the models' order-D Markov extension
    ([`TableModel`][spectheory.inputs.models.TableModel]).
    """
    how = plan(verifier, paths, drafting)
    _check_instance(instance)
    route = resolve_route(how, route)
    V, L = instance.vocab_size, instance.block_length
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, (int, np.integer)) or \
            not 1 <= n_tokens <= 64:
        raise SpectheoryError(f"n_tokens = {limits.shown(n_tokens)} must be an integer in "
                              "[1, 64]")
    N = int(n_tokens)
    exact = instance.exact if exact is None else exact
    _plan_sizes(how, V, L, V ** (N - 1), exact, max_sequences, "multi-iteration law",
                f"V^(N-1) contexts x V^(L+1) = {V}^{N - 1 + L + 1}", route=route)
    arrays = float_backend(how, route, device, backend, exact, V ** (N - 1) * V ** (L + 1))
    instance = process_instance(instance, sampling, draft_sampling, exact)
    with _numpy_floats(arrays, exact):
        final, tgt, tv = _multi_iteration(instance, how, N, exact, device, route, arrays)
    return as_result(final), as_result(tgt), _to_py(tv)


def _multi_iteration(instance, how, N: int, exact: bool, device, route, arrays):
    V, L = instance.vocab_size, instance.block_length
    p_top = levels(instance.target, 0, 1, exact, device, arrays)[0]
    like = p_top
    start = [Bk.full((V**n,), 0, like) for n in range(N)]
    start[0] = Bk.full((1,), 1, like)
    final = Bk.full((V**N,), 0, like)
    for n in range(N):
        q_levels = levels(instance.draft, n, L, exact, device, arrays)
        p_levels = levels(instance.target, n, L + 1, exact, device, arrays)
        block = block_law(how, q_levels, p_levels, V, L, limits.tick, route=route)
        C = V**n
        mass = start[n].reshape(C, 1)
        for j in range(1, L + 2):
            e = block.emitted[j].reshape(C, V**j) * mass
            if n + j < N:
                start[n + j] = start[n + j] + e.reshape(-1)
            else:
                keep = N - n
                final = final + Bk.sum(e.reshape(C, V**keep, V ** (j - keep)), axis=2).reshape(-1)
    tgt = target_law(levels(instance.target, 0, N, exact, device, arrays), N)[0]
    return final, tgt, total_variation(final, tgt)


def analyze_multipath(instance: Instance, verifier, paths: int, drafting: str | None = None,
                      name: str | None = None, exact: bool | None = None,
                      max_sequences: int | None = None, progress: bool = False,
                      device="cpu", symmetric: bool | None = None,
                      route: str | None = "auto") -> ExactAnalysis:
    """Same as ``analyze(instance, verifier, paths=paths, drafting=drafting, ...)``
    ([`analyze`][spectheory.engine.analysis.analyze], the one engine for 1 and K paths)."""
    return analyze(instance, verifier, name, exact, max_sequences, progress, device,
                   paths=paths, drafting=drafting, symmetric=symmetric, route=route)


def analyze_gbv_fast(instance: Instance, paths: int, exact: bool | None = None,
                     max_sequences: int | None = None, name: str = "gbv") -> ExactAnalysis:
    """Exact analysis of GBV (i.i.d. drafting) as block verification against the skewed draft
    q^G: ~V**L work instead of V**(L K). The default route of ``analyze(.., "gbv", paths=K)``
    (``route="analytic"``); same result as the enumeration ``route="enumerate"``."""
    from .joint import _check_args

    _check_args(paths, "iid")
    return analyze(instance, "gbv", name=name, exact=exact, max_sequences=max_sequences,
                   paths=paths, drafting="iid", route="analytic")


def analyze_tree(instance: Instance, verifier, shape, drafting: str | None = None,
                 exact: bool | None = None, route: str = "auto", rows: str = "auto",
                 max_sequences: int | None = None, name: str | None = None,
                 device="cpu") -> ExactAnalysis:
    """Exact tau pmf, E[tau], block efficiency E[tau+1] and TV to the target of a verifier on a
    drafted tree.

    Parameters
    ----------
    instance : Instance
        Draft q and target p tables; the block length is the tree's depth D (its deepest
        leaf).
    verifier : str or VerifierSpec
        Any K-path verifier (``specinfer``, ``specinfer-norep``, ``traversal-tree``,
        ``block-first``, ...) or ``"topk"``
        ([`spectheory.verifiers.topk`][spectheory.verifiers.topk]).
    shape : any form of [`tree_shape`][spectheory.engine.drafttrees.tree_shape]
        Branching factors ("3,2,1"), a choices list, ``{"parents": [...]}``, a graph with
        ``nodes``/``successors``, or a TreeShape. Leaves may be at different depths (node
        route only; the enumerate route refuses, [`refuse_uneven`][spectheory.engine.drafttrees.refuse_uneven]).
    drafting : {"iid", "norep", "topk"}, optional
        Default: the verifier's home scheme (`HOME_DRAFTING`).
    exact : bool, optional
        Exact rationals; default as the instance.
    route : {"auto", "enumerate", "nodes"}
        Exact route (module doc); "auto" picks with [`choose_route`][spectheory.engine.drafttrees.choose_route].
    rows : {"auto", "raw", "point"}
        Draft rows handed to verifiers on the enumerate route (module doc).
    max_sequences : int, optional
        Size guard ([`check_size`][spectheory.runtime.sizes.check_size]).

    Returns
    -------
    ExactAnalysis
        As [`analyze`][spectheory.engine.analysis.analyze], with ``extra`` holding the tree, K, the number of
        drafted nodes, the drafting scheme and the route. TV(output, target) = 0 iff the verifier
        is lossless on this tree under this scheme (Sun et al., arXiv 2403.10444, sec. 2).
    """
    from .drafttrees import (_check_drafting, _guard, _instance_levels, choose_route,
                             default_drafting, refuse_uneven, tree_block_law, tree_shape,
                             tree_verifier)

    check_instance(instance)
    spec = tree_verifier(verifier)
    tree = tree_shape(shape)
    _check_drafting(default_drafting(spec) if drafting is None else drafting,
                    spec if drafting is None else None)  # the verifier's own default named
    drafting = default_drafting(spec) if drafting is None else drafting
    if rows not in ("auto", "raw", "point"):
        raise SpectheoryError(f"unknown rows {rows!r}; choose from auto, raw, point")
    V, L = instance.vocab_size, tree.height
    exact = instance.exact if exact is None else exact
    how = choose_route(spec, drafting, route, rows)
    if how == "enumerate":
        refuse_uneven(spec, tree)
    _guard(spec, tree, V, drafting, how, exact, max_sequences)
    if drafting == "topk" and max(len(k) for k in tree.children) > V:
        raise SpectheoryError(f"top-k drafting needs at most V = {V} children per node")
    q_levels, p_levels = _instance_levels(instance, L, exact, device)
    block = tree_block_law(spec, tree, q_levels, p_levels, V, drafting, how, rows)
    out = output_law(block, p_levels, V, L)[0]
    tgt = target_law(p_levels, L + 1)[0]
    pmf = [_to_py(v) for v in block.tau_pmf[0]]
    zero = Fraction(0) if exact else 0.0
    e_tau = sum((i * v for i, v in enumerate(pmf)), zero)
    return ExactAnalysis(
        verifier=name or spec.name, vocab_size=V, block_length=L, exact=exact, tau_pmf=pmf,
        expected_accepted=e_tau, block_efficiency=e_tau + 1,
        tv_to_target=_to_py(total_variation(out, tgt)), output_law=as_result(out),
        target_law=as_result(tgt),
        extra={"tree": tree.describe(), "paths": tree.paths, "drafted_nodes": tree.n_drafted,
               "leaf_depths": sorted(set(tree.leaf_depths)), "drafting": drafting,
               "route": how}, backend="numpy" if exact else "torch")


def analysis_summary(res: ExactAnalysis) -> str:
    fmt = (lambda v: f"{v} (= {float(v):.6f})") if res.exact else (lambda v: f"{float(v):.6f}")
    return (f"{res.verifier}: E[tau] = {fmt(res.expected_accepted)}, block efficiency "
            f"E[tau+1] = {fmt(res.block_efficiency)}, TV to target = "
            f"{res.tv_to_target if res.exact else format(float(res.tv_to_target), '.3g')}")


__all__ = [
    "ExactAnalysis",
    "analysis_summary",
    "analyze",
    "analyze_gbv_fast",
    "analyze_multipath",
    "analyze_tree",
    "as_result",
    "block_law",
    "multi_iteration_law",
    "node_route_law",
]
