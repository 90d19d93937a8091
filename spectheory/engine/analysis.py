"""Exact law of a verifier's output, by enumerating the whole sequence tree; the checker.

One engine for 1 and K paths. [`analyze`][spectheory.exact.analyze],
[`multi_iteration_law`][spectheory.exact.multi_iteration_law] and
[`check_lossless`][spectheory.exact.check_lossless] take any verifier (a name, ``module:function``,
a [`VerifierSpec`][spectheory.registry.VerifierSpec] or a function), a number of paths K (default 1)
and a drafting scheme (default: the verifier's own). K = 1 runs the per-draft route below; K > 1
enumerates the joint draft outcomes ([`spectheory.multipath`][spectheory.multipath]); both aggregate
into the same [`BlockLaw`][spectheory.exact.BlockLaw], from which everything else follows.

For an instance (draft q, target p, block length L) and a verifier with law
(P(tau = i | X), correction_i(. | X)), the per-draft route evaluates the verifier once on the batch
of all V**L drafts (in chunks, float64 torch, or numpy Fractions in exact mode) and forms

* the pmf of tau:        P(tau = i) = sum_X q(X) P(tau = i | X);
* the emitted block law: E_{i+1}(y^{i+1}) = sum_{X : X^i = y^i} q(X) P(tau = i | X)
  correction_i(y_{i+1} | X), the probability that the verifier outputs exactly the block y^{i+1};
* the output law over V**(L+1) of "output block, then target sampling up to length L+1":
  A_1 = E_1,  A_{j+1}(y^{j+1}) = A_j(y^j) p(y_{j+1} | y^j) + E_{j+1}(y^{j+1});
* its total variation distance to the target law p(y^{L+1}) (zero iff the verifier is valid).

Applied iteration after iteration from every context, the same block law gives the exact law of the
first N generated tokens ([`multi_iteration_law`][spectheory.exact.multi_iteration_law]), which
shows that composition is lossless. Validity: Sun et al. (arXiv 2403.10444), section 2.

Every chunk of a verifier's law is checked by [`validate_law`][spectheory.law.validate_law] before
it is used, so a law with NaN, negative entries or rows that are not distributions raises
[`LawError`][spectheory.law.LawError] instead of producing a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

import numpy as np
from ._lazy import is_tensor, torch

from . import backend as Bk
from . import limits
from .errors import SpectheoryError
from .instances import Instance
from .law import validate_law
from .models import prefix_from_index
from .processing import describe as sampling_extra
from .processing import process_instance
from .registry import Plan, VerifierSpec, get_verifier, plan
from .tree import check_size, levels, path_probabilities, sequence_tokens

#: Most draft paths K the engine accepts (K! must fit in int64).
MAX_PATHS = 20
#: Elements of one [B, L+1, V] array per chunk in float mode (keeps the working set ~1 GiB).
CHUNK_ELEMENTS = 2**22


@dataclass
class BlockLaw:
    """Exact output-block law below C contexts.

    ``tau_pmf`` [C, L+1]; ``emitted[j]`` [C * V**j] for j = 1..L+1 (index 0 unused): probability
    that the verifier's output block is exactly y^j (j = tau + 1 tokens), per context.
    """

    tau_pmf: Any
    emitted: list


def _segment_sum(x, seg: int, chunk: int):
    """Sum consecutive groups of ``seg`` rows of x [chunk, ...]; either seg | chunk or chunk | seg."""
    if seg <= chunk:
        return Bk.sum(x.reshape((chunk // seg, seg) + tuple(x.shape[1:])), axis=1)
    return Bk.sum(x, axis=0, keepdims=True)


def _chunk_size(n_contexts: int, V: int, L: int, exact: bool) -> int:
    total = n_contexts * V**L
    if exact:
        return total
    per_draft = (L + 1) * V
    if V**L * per_draft <= CHUNK_ELEMENTS:
        k = max(1, CHUNK_ELEMENTS // (V**L * per_draft))
        while n_contexts % k:
            k -= 1
        return k * V**L
    c = L
    while c > 0 and V**c * per_draft > CHUNK_ELEMENTS:
        c -= 1
    return V**c


def block_output_law(verifier, q_levels, p_levels, V: int, L: int,
                     progress: Callable[[int], None] | None = None) -> BlockLaw:
    """Per-draft route (one path): evaluate ``verifier`` on every draft below C contexts and
    aggregate its law.

    ``q_levels[d]`` [C*V**d, V] for d = 0..L-1 and ``p_levels[d]`` for d = 0..L are the draft and
    target conditionals below each context (see [`levels`][spectheory.tree.levels]).
    """
    spec = get_verifier(verifier)
    exact = Bk.is_exact(p_levels[0])
    C = p_levels[0].shape[0]
    like = p_levels[0]
    roots = Bk.full((C,), 1, like)
    qpath = path_probabilities(q_levels, roots)[L]  # q(X | context), [C*V**L]
    total = C * V**L
    chunk = _chunk_size(C, V, L, exact)
    tau_pmf = Bk.full((C, L + 1), 0, like)
    emitted = [None] + [Bk.full((C * V**i, V), 0, like) for i in range(L + 1)]
    for f0 in range(0, total, chunk):
        if exact:
            f = np.arange(f0, f0 + chunk, dtype=np.int64)
        else:
            f = torch.arange(f0, f0 + chunk, device=like.device)
        drafts = sequence_tokens(f, L, V)
        q = Bk.stack([q_levels[j][f // V ** (L - j)] for j in range(L)], axis=1)
        p = Bk.stack([p_levels[j][f // V ** (L - j)] for j in range(L + 1)], axis=1)
        law = validate_law(spec.law(Bk.expand_dims(drafts, 1), Bk.expand_dims(q, 1),
                                    Bk.expand_dims(p, 1)),
                           drafts.shape[0], 1, L, V, exact, Bk.expand_dims(drafts, 1), name=spec.name)
        stop, correction = law.stop[:, 0], law.correction[:, 0]
        weight = qpath[f0:f0 + chunk]
        wstop = Bk.expand_dims(weight, 1) * stop  # [B, L+1]
        seg = V**L
        part = _segment_sum(wstop, seg, chunk)
        r0 = f0 // seg
        tau_pmf[r0:r0 + part.shape[0]] += part
        for i in range(L + 1):
            seg = V ** (L - i)
            contrib = Bk.expand_dims(wstop[:, i], 1) * correction[:, i, :]
            part = _segment_sum(contrib, seg, chunk)
            r0 = f0 // seg
            emitted[i + 1][r0:r0 + part.shape[0]] += part
        if progress is not None:
            progress(chunk)
    return BlockLaw(tau_pmf, [None] + [e.reshape(-1) for e in emitted[1:]])


#: Routes of the exact engine: ``auto`` picks the fastest available one.
ROUTES = ("auto", "node", "per-draft", "tree", "enumerate", "analytic")


def tree_route_available(how: Plan) -> bool:
    """K > 1 paths of a verifier that declares a node rule (`VerifierSpec.rule`), under ``iid``
    drafting or (for rules that skip repeated tokens) ``norep``: the K paths of length L are the
    draft tree (K, 1, ..., 1) with equal siblings merged, whose law the draft-tree engine computes
    node by node ([`tree_block_law_nodes`][spectheory.trees.tree_block_law_nodes]), the same law as
    the joint enumeration (tested exactly) at a cost that grows with the number of paths through a
    node instead of V^(L K)."""
    spec = how.spec
    return (how.paths > 1 and spec.rule is not None and how.drafting in ("iid", "norep") and
            (how.drafting == "iid" or spec.rule_skips_repeats))


def resolve_route(how: Plan, route: str | None = "auto", symmetric: bool | None = None) -> str:
    """The route that runs for a planned verifier: K = 1: ``node`` (the verifier declares a
    [`NodeForm`][spectheory.nodes.NodeForm]) or ``per-draft``; K > 1: ``analytic`` (a closed route
    under the verifier's own drafting scheme, GBV), ``tree`` (node-rule verifiers,
    [`tree_route_available`][spectheory.exact.tree_route_available]) or ``enumerate`` (joint draft
    outcomes). ``auto`` (default) takes the first available, except that an explicit ``symmetric``
    (an option of the enumeration) selects the enumeration; asking for a route the verifier does not
    have raises [`SpectheoryError`][spectheory.errors.SpectheoryError]."""
    route = "auto" if route is None else route
    if route not in ROUTES:
        raise SpectheoryError(f"unknown route {route!r}; choose from {', '.join(ROUTES)}")
    spec = how.spec
    if spec.single_path:
        have = spec.routes()
    else:  # an analytic route holds under the verifier's own drafting scheme only
        analytic = spec.analytic is not None and how.drafting == spec.default_drafting
        have = (["analytic"] if analytic else []) + (
            ["tree"] if tree_route_available(how) else []) + (
            ["per-draft", "enumerate"] if how.paths == 1 else ["enumerate"])
    if route == "auto":
        if symmetric is not None and how.paths > 1:
            return "enumerate"
        return have[0]
    if route == "enumerate" and how.paths == 1:
        route = "per-draft"
    if route not in have:
        raise SpectheoryError(f"route {route!r} is not available for verifier {spec.name!r} "
                              f"with {how.paths} path(s); available: {', '.join(have)}")
    return route


def _cheaper(how: Plan, resolved: str, asked, V: int, L: int, symmetric) -> str:
    """With ``auto``, the tree route gives way to the joint enumeration where that visits
    fewer cases (short blocks of an order-invariant rule: C(V^L + K - 1, K) sorted outcomes
    against the tree's V^K candidate tuples at the root)."""
    if resolved != "tree" or asked not in (None, "auto"):
        return resolved
    from .multipath import outcome_count, use_symmetry
    from .trees import node_route_work

    tree = node_route_work((how.paths,) + (1,) * (L - 1), V, how.drafting, how.spec)
    enum = outcome_count(V, L, how.paths, use_symmetry(how, symmetric))
    return "enumerate" if enum < tree else "tree"


def node_route_law(spec: VerifierSpec, q_levels, p_levels, V: int, L: int):
    """Per-node route ([`node_block_law`][spectheory.nodes.node_block_law]) of a node-form
    verifier."""
    from .nodes import node_block_law

    return node_block_law(spec.node, q_levels, p_levels, V, L, name=spec.name)


def _node_to_block(nodes, C: int, L: int) -> BlockLaw:
    return BlockLaw(nodes.tau_pmf(C), [None] + [nodes.emitted(d) for d in range(L + 1)])


def block_law(how: Plan, q_levels, p_levels, V: int, L: int,
              progress: Callable[[int], None] | None = None,
              symmetric: bool | None = None, route: str | None = "auto") -> BlockLaw:
    """The block law below C contexts of a planned verifier ([`plan`][spectheory.registry.plan]).

    Routes ([`resolve_route`][spectheory.exact.resolve_route]): K = 1 the per-node route for
    node-form verifiers, else the per-draft route; K > 1 a verifier's analytic route (GBV), else the
    joint-outcome route of [`spectheory.multipath`][spectheory.multipath] (once per context)."""
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
        return how.spec.analytic(how, q_levels, p_levels, V, L)
    from .multipath import multipath_block_law  # the joint-outcome route builds on this module
    from .trees import tree_block_law_nodes  # so does the draft-tree engine

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
    cat = (lambda xs: np.concatenate(xs)) if Bk.is_exact(p_levels[0]) else torch.cat
    return BlockLaw(cat([b.tau_pmf for b in parts]),
                    [None] + [cat([b.emitted[j] for b in parts]) for j in range(1, L + 2)])


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


# ----------------------------------------------------------------------------- results


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

    ``output_law`` and ``target_law`` are the laws over V^(L+1) sequences (None when the
    analysis ran with ``laws=False``); the target law is computed on first access. ``route`` is
    the exact route that ran ([`resolve_route`][spectheory.exact.resolve_route]).
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
    ([`spectheory.limits`][spectheory.limits])."""
    if not (enabled or limits.progress_enabled()):
        return limits.tick, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="draft", unit_scale=True, leave=False)

    def update(n):
        bar.update(n)
        limits.tick(n)

    return update, bar.close


def _check_instance(instance) -> None:
    if not isinstance(instance, Instance):
        raise SpectheoryError(f"expected a spectheory Instance (see load_instance / "
                              f"instance_from_dict), got {type(instance).__name__}")


def _plan_sizes(how: Plan, V: int, L: int, contexts: int, exact: bool, max_sequences,
                what: str, formula: str, symmetric: bool | None = None,
                route: str = "enumerate") -> None:
    """Size guards of one analysis: the output law, and for K > 1 enumerated joint outcomes."""
    if exact and not how.spec.exact:
        raise SpectheoryError(f"verifier {how.spec.name!r} has a float law only (no exact "
                              f"rational mode); drop --exact / exact=True")
    if how.paths > MAX_PATHS:
        raise SpectheoryError(f"paths = {how.paths} is out of range 1..{MAX_PATHS} (the K-path "
                              f"engine counts the K! orderings of a joint outcome in int64)")
    check_size(contexts * V ** (L + 1), what, exact, max_sequences, formula)
    if how.paths > 1 and route == "tree":
        from .trees import node_route_work

        work = node_route_work((how.paths,) + (1,) * (L - 1), V, how.drafting, how.spec)
        check_size(contexts * work, f"{what} ({how.paths} paths, node by node)", exact,
                   max_sequences, "sum over nodes of V^depth x candidate tuples" +
                   (f" x {contexts:,} contexts" if contexts > 1 else ""), outcomes=True)
    if how.paths > 1 and route == "enumerate":
        from .multipath import outcome_count, use_symmetry

        K = how.paths
        sym = use_symmetry(how, symmetric)
        n = outcome_count(V, L, K, sym)
        formula = (f"C(V^L + K - 1, K) = C({V}^{L} + {K - 1}, {K}) sorted joint draft outcomes"
                   if sym else f"V^(L K) = {V}^{L * K} joint draft outcomes")
        check_size(contexts * n, f"{what} ({K} paths)", exact, max_sequences,
                   formula + (f" x {contexts:,} contexts" if contexts > 1 else ""), outcomes=True)


def analyze(instance: Instance, verifier, name: str | None = None,
            exact: bool | None = None, max_sequences: int | None = None,
            progress: bool = False, device="cpu", *, paths: int | None = None,
            drafting: str | None = None, symmetric: bool | None = None,
            route: str | None = "auto", laws: bool = True, sampling=None,
            draft_sampling=None, executor: str | None = None, split_depth: int = 1,
            workers: int | None = None, address: str | None = None) -> ExactAnalysis:
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
        Exact rationals (numpy arrays of Fractions) or float64 torch; default: as the instance.
    max_sequences : int, optional
        Size guard on the enumeration ([`check_size`][spectheory.tree.check_size]).
    paths : int, optional
        Number of draft paths K (default 1).
    drafting : {"iid", "norep"}, optional
        Drafting scheme of the K paths (default: the verifier's own).
    symmetric : bool, optional
        K > 1: enumerate sorted tuples of paths (default: i.i.d. drafting and an
        order-invariant verifier).
    route : {"auto", "node", "per-draft", "enumerate", "analytic"}
        Which exact route runs ([`resolve_route`][spectheory.exact.resolve_route]). ``auto``
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
        Sampling parameters (`spectheory.processing.parse_sampling`: a string such as
        ``"temperature=0"`` or ``"top_k=20,top_p=0.9"``, a mapping or a `SamplingParams`) that
        process the target rows, and the draft rows, before anything else
        (`spectheory.processing.process_instance`): the law is the verifier's against the
        processed target, drafts are sampled from the processed draft rows, and the TV is to
        the processed target's law. Default None: rows as given (the draft rows stay raw unless
        ``draft_sampling`` is given).
    executor : {None, "local", "ray"}
        Split the per-node route into the V^d subtrees below depth ``split_depth`` (default 1)
        and evaluate them as tasks (`spectheory.split`): ``"local"`` on ``workers`` processes
        (1: in this process), ``"ray"`` as Ray tasks (``address`` of a cluster, else a local
        one). The same law exactly in rationals; the size guard applies to one task
        (V^(L+1-d) sequences). Node-form verifiers (token, block, ...) with one path.

    Returns
    -------
    ExactAnalysis
        ``tau_pmf[i] = sum_X P(X) P(tau = i | X)``, E[tau], the block efficiency E[tau+1], and
        the total variation between "output block, then target sampling up to L+1 tokens" and
        p(y^{L+1}) (zero iff the verifier is valid; Sun et al., arXiv 2403.10444, sec. 2).
        ``extra`` holds ``paths`` and ``drafting`` for multi-path verifiers.
    """
    how = plan(verifier, paths, drafting)
    _check_instance(instance)
    V, L = instance.vocab_size, instance.block_length
    route = _cheaper(how, resolve_route(how, route, symmetric), route, V, L, symmetric)
    exact = instance.exact if exact is None else exact
    if executor is None:  # a split analysis guards the size of one task instead
        _plan_sizes(how, V, L, 1, exact, max_sequences, "exact analysis",
                    f"V^(L+1) = {V}^{L + 1}", symmetric, route)
    instance = process_instance(instance, sampling, draft_sampling, exact)
    if executor is None:
        q_levels = levels(instance.draft, 0, L, exact, device)
        p_levels = levels(instance.target, 0, L + 1, exact, device)
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

        tau, out, tgt, tv = analyze_split(instance, how.spec, exact, laws, split_depth,
                                          executor, workers, address, max_sequences)
        tau_pmf = [tau]
        route = f"node, split at depth {split_depth} ({executor})"
    elif route == "node":
        nodes = node_route_law(how.spec, q_levels, p_levels, V, L)
        tau_pmf = nodes.tau_pmf(1)
        out, tgt, tv = node_output_law(nodes, p_levels, V, L, laws)
    else:
        total = V**L
        if how.paths > 1 and route == "enumerate":
            from .multipath import outcome_count, use_symmetry

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
        output_law=out,
        target_law=tgt,
        extra=extra,
        route=route,
    )


def _empty_table(shape, like):
    """An uninitialised array of ``shape`` like ``like``; on the CPU allocated by numpy, which
    asks the kernel for huge pages on large arrays (cheaper first touch of V^(L+1) entries)."""
    if not Bk.is_torch(like):
        return Bk.full(shape, 0, like)
    if like.device.type == "cpu" and like.dtype in (torch.float32, torch.float64):
        return torch.from_numpy(np.empty(tuple(shape), dtype=np.float64 if like.dtype ==
                                         torch.float64 else np.float32))
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


def node_output_law(nodes, p_levels, V: int, L: int, laws: bool = True, A0=None, T0=None):
    """Output law, target law (both [V^(L+1)] for one context; None when ``laws`` is False) and
    their TV from the per-node results of one context.

    The target law is returned as a function that builds it
    ([`ExactAnalysis`][spectheory.exact.ExactAnalysis] calls it on first access). With A_j the
    output law and T_j the target law over j tokens, A_0 = 0, T_0 = 1, A_{j+1} = A_j p + E_{j+1},
    T_{j+1} = T_j p (E_{j+1} = m_j corr_j). At the last level E_{L+1} = m_L corr_L; when corr_L is
    the target row (token, block) A_{L+1} = (A_L + m_L) p and, since every target row sums to 1,
    TV = 1/2 sum_{y^L} |A_L(y^L) + m_L(y^L) - T_L(y^L)|: the deepest level (V^(L+1) entries) is
    read once per law that is asked for and never for the TV (with ``laws`` False the TV is
    accumulated as |(A_{L-1} - T_{L-1}) p + m_{L-1} corr_{L-1} + m_L| in one array). The last
    two steps (A_L, T_L over V^L sequences, and level L+1) run a chunk of `TV_CHUNK_ROWS`
    sequences at a time, so no V^L-sized temporary is built.

    ``A0``, ``T0`` (1-entry arrays): the output and target mass of the prefix below which
    ``nodes`` and ``p_levels`` lie, for one subtree of a split analysis (`spectheory.split`);
    default 0 and 1, the root.
    """
    like = p_levels[0]
    A = Bk.full((1,), 0, like) if A0 is None else A0
    T = Bk.full((1,), 1, like) if T0 is None else T0
    fused = Bk.is_torch(like)
    for j in range(L - 1):
        if fused:  # A p + m corr in one output array
            A = torch.mul(p_levels[j], A.unsqueeze(1)).addcmul_(
                nodes.correction[j], nodes.stop_mass[j].unsqueeze(1)).reshape(-1)
        else:
            A = (Bk.expand_dims(A, 1) * p_levels[j]).reshape(-1) + nodes.emitted(j)
        T = (Bk.expand_dims(T, 1) * p_levels[j]).reshape(-1)
    mL, pL, cL = nodes.stop_mass[L], p_levels[L], nodes.correction[L]
    top_is_p = nodes.corr_is_target[L]
    out = _empty_table(pL.shape, pL) if laws else None
    tgt = _empty_table(pL.shape, pL) if laws and not top_is_p else None
    tv = Fraction(0) if Bk.is_exact(pL) else torch.zeros((), dtype=pL.dtype, device=pL.device)
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
    for r0 in range(0, n, step):
        r1 = min(r0 + step, n)
        k0, k1 = r0 * V, r1 * V
        a, t = _last_step(A, T, r0, r1, nodes, p_levels, L)
        if top_is_p:
            top = a.add_(mL[k0:k1]) if fused else a + mL[k0:k1]
            tv = tv + Bk.sum(Bk.abs(top - t), axis=0)
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


def multi_iteration_law(instance: Instance, verifier, n_tokens: int,
                        exact: bool | None = None, max_sequences: int | None = None,
                        device="cpu", *, paths: int | None = None, drafting: str | None = None,
                        route: str | None = "auto", sampling=None, draft_sampling=None):
    """Exact law of the first ``n_tokens`` generated tokens when the verifier runs iteration after
    iteration (each iteration drafts K paths of L tokens from the current context, verifies, appends
    the tau + 1 output tokens). Returns (generated law [V**N], target law [V**N], TV). ``route``,
    ``sampling`` and ``draft_sampling`` as for [`analyze`][spectheory.exact.analyze] (the target law
    is then the processed target's).

    Contexts deeper than the instance's tables use the models' order-D Markov extension
    ([`TableModel`][spectheory.models.TableModel]).
    """
    how = plan(verifier, paths, drafting)
    _check_instance(instance)
    route = resolve_route(how, route)
    V, L = instance.vocab_size, instance.block_length
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, (int, np.integer)) or \
            not 1 <= n_tokens <= 64:
        raise SpectheoryError(f"n_tokens = {n_tokens!r} must be an integer in [1, 64]")
    N = int(n_tokens)
    exact = instance.exact if exact is None else exact
    _plan_sizes(how, V, L, V ** (N - 1), exact, max_sequences, "multi-iteration law",
                f"V^(N-1) contexts x V^(L+1) = {V}^{N - 1 + L + 1}", route=route)
    instance = process_instance(instance, sampling, draft_sampling, exact)
    p_top = levels(instance.target, 0, 1, exact, device)[0]
    like = p_top
    start = [Bk.full((V**n,), 0, like) for n in range(N)]
    start[0] = Bk.full((1,), 1, like)
    final = Bk.full((V**N,), 0, like)
    for n in range(N):
        q_levels = levels(instance.draft, n, L, exact, device)
        p_levels = levels(instance.target, n, L + 1, exact, device)
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
    tgt = target_law(levels(instance.target, 0, N, exact, device), N)[0]
    return final, tgt, _to_py(total_variation(final, tgt))


# ----------------------------------------------------------------------------- checker


#: Largest tolerance the float checker accepts: a TV above this is never "lossless".
MAX_LOSSLESS_TOL = 1e-3


@dataclass
class LosslessReport:
    """Verdict of [`check_lossless`][spectheory.exact.check_lossless].

    ``lossless`` is True iff the total variation ``tv`` between the output law and the target law
    over ``n_tokens`` tokens is 0 (exact mode) or at most ``tolerance`` (float mode). When it is
    False, ``offending`` is the first output sequence (lexicographic order) whose probability
    differs from the target's by more than the tolerance (or, when no single sequence does, the one
    that differs most), with both probabilities; ``max_difference`` is the largest difference.
    ``instance`` names the instance when the report comes from a battery
    ([`check_lossless_battery`][spectheory.testing.lossless.check_lossless_battery]), which also
    reports a verifier that returned no law as ``lossless = False`` with the
    [`LawError`][spectheory.law.LawError] in ``law_error`` (``tv`` is then None).
    """

    lossless: bool
    tv: Any
    n_tokens: int
    exact: bool
    tolerance: float
    offending: tuple | None = None
    output_probability: Any = None
    target_probability: Any = None
    max_difference: Any = None
    verifier: str = ""
    paths: int = 1
    drafting: str = "iid"
    instance: str = ""
    law_error: Any = None

    def __str__(self) -> str:
        if self.law_error is not None:
            return f"NOT A LAW ({self.law_error.kind}): {self.law_error}"
        if self.lossless:
            how = "exactly" if self.exact else f"within {self.tolerance:g}"
            return f"lossless {how} over {self.n_tokens} tokens (TV = {self.tv})"
        return (f"LOSSY over {self.n_tokens} tokens: TV = {float(self.tv):.6g}; first offending "
                f"sequence {self.offending}: output probability {self.output_probability} vs "
                f"target probability {self.target_probability}")


def check_tolerance(tol, what: str = "tolerance") -> float:
    """A float-mode tolerance must be a finite number in [0, MAX_LOSSLESS_TOL]."""
    try:
        t = float(tol)
    except (TypeError, ValueError):
        raise SpectheoryError(f"{what} {tol!r} is not a number") from None
    if not math.isfinite(t) or t < 0 or t > MAX_LOSSLESS_TOL:
        raise SpectheoryError(f"{what} {tol!r} is out of range: it must be a finite number in "
                              f"[0, {MAX_LOSSLESS_TOL:g}]")
    return t


def check_lossless(verifier, instance: Instance, exact: bool | None = None,
                   tol: float = 1e-12, n_tokens: int | None = None,
                   max_sequences: int | None = None, *, paths: int | None = None,
                   drafting: str | None = None, route: str | None = "auto", sampling=None,
                   draft_sampling=None) -> LosslessReport:
    """Exact verdict on whether a verifier is lossless.

    Compares the law of the output block followed by target sampling (``n_tokens`` = L+1, the
    default) or of the first ``n_tokens`` tokens over repeated iterations with the target law,
    for K = ``paths`` draft paths under ``drafting`` (default: the verifier's own scheme).

    In exact mode the verdict is exact: lossless iff the two laws are equal as rationals. In float
    mode it is lossless iff TV(output, target) <= ``tol`` (a finite number in [0, 1e-3]), so the
    verdict never says "lossless within t" with a TV above t. A verifier whose law is not a law
    (NaN, negative entries, rows not summing to 1, wrong shapes, floats in exact mode) raises
    [`LawError`][spectheory.law.LawError] and gets no verdict. ``route`` picks the exact route
    ([`analyze`][spectheory.exact.analyze]; default the fastest available). ``sampling`` /
    ``draft_sampling`` process the target / draft rows first
    ([`analyze`][spectheory.exact.analyze]): the verdict is then against the processed target's law,
    as an engine serving a request with those parameters must meet it.
    """
    how = plan(verifier, paths, drafting)
    _check_instance(instance)
    exact = instance.exact if exact is None else exact
    tol = check_tolerance(tol)  # refused even where exact mode does not use it
    if exact:
        tol = 0.0
    V, L = instance.vocab_size, instance.block_length
    if n_tokens is None or n_tokens == L + 1:
        res = analyze(instance, how.spec, exact=exact, max_sequences=max_sequences,
                      paths=how.paths, drafting=how.drafting, route=route, sampling=sampling,
                      draft_sampling=draft_sampling)
        out, tgt, tv, N = res.output_law, res.target_law, res.tv_to_target, L + 1
    else:
        out, tgt, tv = multi_iteration_law(instance, how.spec, n_tokens, exact, max_sequences,
                                           paths=how.paths, drafting=how.drafting, route=route,
                                           sampling=sampling, draft_sampling=draft_sampling)
        N = int(n_tokens)
    rep = lossless_report(out, tgt, tv, N, V, exact, tol)
    rep.verifier, rep.paths, rep.drafting = how.spec.name, how.paths, how.drafting
    return rep


def lossless_report(out, tgt, tv, n_tokens: int, vocab_size: int, exact: bool,
                    tol: float = 1e-12) -> LosslessReport:
    """Verdict from an output law and the target law over V**n_tokens sequences (see
    [`check_lossless`][spectheory.exact.check_lossless])."""
    N, V = n_tokens, vocab_size
    tol = check_tolerance(tol)  # refused even where exact mode does not use it
    if exact:
        tol = 0.0
    diff = Bk.abs(out - tgt)
    if exact:
        bad = np.flatnonzero(diff != 0)
        lossless = len(bad) == 0
        k = int(bad[0]) if len(bad) else None
        worst = max(diff) if len(bad) else Fraction(0)
    else:
        if not bool(torch.isfinite(out).all()):  # cannot happen after validate_law; kept as a guard
            raise SpectheoryError("the output law has NaN or infinite entries")
        lossless = bool(float(tv) <= tol)
        worst = float(diff.max()) if diff.numel() else 0.0
        k = None
        if not lossless:
            over = torch.nonzero(diff > tol).reshape(-1)
            k = int(over[0]) if len(over) else int(torch.argmax(diff))
    if lossless:
        return LosslessReport(True, tv, N, exact, tol, max_difference=_to_py(worst))
    return LosslessReport(False, tv, N, exact, tol,
                          offending=prefix_from_index(k, N, V),
                          output_probability=_to_py(out[k]), target_probability=_to_py(tgt[k]),
                          max_difference=_to_py(worst))


def analysis_summary(res: ExactAnalysis) -> str:
    fmt = (lambda v: f"{v} (= {float(v):.6f})") if res.exact else (lambda v: f"{float(v):.6f}")
    return (f"{res.verifier}: E[tau] = {fmt(res.expected_accepted)}, block efficiency "
            f"E[tau+1] = {fmt(res.block_efficiency)}, TV to target = "
            f"{res.tv_to_target if res.exact else format(float(res.tv_to_target), '.3g')}")


__all__ = [
    "BlockLaw",
    "MAX_LOSSLESS_TOL",
    "ROUTES",
    "node_output_law",
    "node_route_law",
    "resolve_route",
    "block_law",
    "check_tolerance",
    "ExactAnalysis",
    "LosslessReport",
    "analysis_summary",
    "analyze",
    "block_output_law",
    "check_lossless",
    "lossless_report",
    "multi_iteration_law",
    "output_law",
    "target_law",
    "total_variation",
]
