"""Planning an exact analysis: which route runs, and whether its size is allowed.

The routes (`ROUTES`) are chosen from what a verifier declares
in its [`VerifierSpec`][spectheory.registry.VerifierSpec] (a node form, a node rule, an analytic
route, order invariance) and the [`Plan`][spectheory.registry.Plan] (K paths, drafting scheme),
never from the verifier's code; the size guards
([`check_size`][spectheory.runtime.sizes.check_size]) run before anything is allocated.
"""

from __future__ import annotations

import numpy as np

from ..runtime.errors import SpectheoryError, check_flag
from ..runtime.limits import shown
from ..inputs.instances import Instance, check_instance
from ..registry import Plan
from ..runtime.sizes import check_size
from .nodes import _finite_screen
from .seqtree import check_exact_device

#: Most draft paths K the engine accepts (K! must fit in int64).
MAX_PATHS = 20

#: Routes of the exact engine: ``auto`` picks the fastest available one.
ROUTES = ("auto", "node", "per-draft", "tree", "enumerate", "analytic")


#: Float backends of the exact engine ([`float_backend`][spectheory.engine.plan.float_backend]).
BACKENDS = ("auto", "numpy", "torch")

#: Routes whose engine code runs on numpy float64 arrays (the per-node and per-draft routes of
#: one path, the analytic route of any number of paths); the others compute floats on torch.
NUMPY_ROUTES = ("node", "per-draft", "analytic")

#: Most sequences (contexts x V^(L+1)) of an analysis that ``backend="auto"`` runs on numpy: below
#: it importing torch (about 1 s) costs more than the whole analysis, above it the work pays for
#: the import once and torch's fused in-place passes run up to ~3x faster than numpy's
#: (V = 32, L = 4, one thread; equal at V = 8, L = 6, 2^21 sequences).
NUMPY_MAX_SEQUENCES = 2**20


def float_backend(how: Plan, route: str, device="cpu", backend: str | None = "auto",
                  exact: bool = False, sequences: int = 0) -> str:
    """The arrays an analysis computes on: ``"numpy"`` or ``"torch"``.

    Exact mode computes on numpy object arrays of Fractions (``"numpy"``; asking for torch there
    is refused). In float mode, ``backend="auto"`` (default) picks numpy float64 when nothing
    needs torch: the device is the CPU (``"cpu"``), the route is one of `NUMPY_ROUTES` (one path,
    or the analytic route with any number of paths), the verifier declares that its code runs on
    numpy floats ([`VerifierSpec.numpy_float`][spectheory.registry.VerifierSpec]: token, block,
    GBV and the other single-path verifiers written against the array layer alone; never a
    ``module:function`` verifier, whose float laws receive torch tensors) and the analysis covers
    at most `NUMPY_MAX_SEQUENCES` ``sequences``; else float64 torch on ``device``. The choice is
    made from these declarations and the size, never by trying. ``"torch"`` forces
    torch (the same law, to within a few ulps: elementwise operations are the same IEEE
    operations, sums may add in another order); ``"numpy"`` refuses, naming the reason, where
    numpy cannot run. Either way the results have one type per mode
    ([`ExactAnalysis`][spectheory.engine.analysis.ExactAnalysis])."""
    backend = "auto" if backend is None else backend
    if not isinstance(backend, str):  # an array: `in` compared it element by element
        raise SpectheoryError(f"backend = {shown(backend)} must be one of {', '.join(BACKENDS)}")
    exact = check_flag(exact, "exact")
    if backend not in BACKENDS:
        raise SpectheoryError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    if exact:
        if backend == "torch":
            raise SpectheoryError("backend 'torch' is for the float route; exact rationals "
                                  "compute on numpy arrays of Fractions (use exact=False, or "
                                  "drop --exact)")
        check_exact_device(device)
        return "numpy"
    if backend == "torch":
        return "torch"
    why = None
    if str(device) != "cpu":
        why = f"device {device!r} is not the CPU"
    elif route not in NUMPY_ROUTES or (how.paths != 1 and route != "analytic"):
        why = f"the {route!r} route with {how.paths} path(s) computes floats on torch"
    elif not how.spec.numpy_float:
        why = (f"verifier {how.spec.name!r} does not declare numpy float support "
               "(VerifierSpec.numpy_float); its float law receives torch tensors")
    if why is None and (backend == "numpy" or sequences <= NUMPY_MAX_SEQUENCES):
        return "numpy"
    if backend == "numpy":
        raise SpectheoryError(f"backend 'numpy' cannot run here: {why}; use backend 'auto' or "
                              "'torch' (--backend on the command line)")
    return "torch"


def tree_route_available(how: Plan) -> bool:
    """K > 1 paths of a verifier that declares a node rule (`VerifierSpec.rule`), under ``iid``
    drafting or (for rules that skip repeated tokens) ``norep``: the K paths of length L are the
    draft tree (K, 1, ..., 1) with equal siblings merged, whose law the draft-tree engine computes
    node by node ([`tree_block_law_nodes`][spectheory.engine.drafttrees.tree_block_law_nodes]), the same law as
    the joint enumeration (tested exactly) at a cost that grows with the number of paths through a
    node instead of V^(L K)."""
    spec = how.spec
    return (how.paths > 1 and spec.rule is not None and how.drafting in ("iid", "norep") and
            (how.drafting == "iid" or spec.rule_skips_repeats))


def resolve_route(how: Plan, route: str | None = "auto", symmetric: bool | None = None) -> str:
    """The route that runs for a planned verifier: K = 1: ``node`` (the verifier declares a
    [`NodeForm`][spectheory.engine.nodes.NodeForm]) or ``per-draft``; K > 1: ``analytic`` (a closed route
    under the verifier's own drafting scheme, GBV), ``tree`` (node-rule verifiers,
    [`tree_route_available`][spectheory.engine.plan.tree_route_available]) or ``enumerate`` (joint draft
    outcomes). ``auto`` (default) takes the first available, except that an explicit ``symmetric``
    (an option of the enumeration) selects the enumeration; asking for a route the verifier does not
    have raises [`SpectheoryError`][spectheory.runtime.errors.SpectheoryError]."""
    route = "auto" if route is None else route
    if not isinstance(route, str):  # an array: `in` compared it element by element
        raise SpectheoryError(f"route = {shown(route)} must be one of {', '.join(ROUTES)}")
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
    from .joint import outcome_count, use_symmetry
    from .drafttrees import node_route_work

    tree = node_route_work((how.paths,) + (1,) * (L - 1), V, how.drafting, how.spec)
    enum = outcome_count(V, L, how.paths, use_symmetry(how, symmetric))
    return "enumerate" if enum < tree else "tree"

def _check_instance(instance, skip_top: bool = False) -> None:
    """An Instance the engines can compute with: its structure and rows
    ([`check_instance`][spectheory.inputs.instances.check_instance]: once per instance built in
    Python; files are checked when read), and its float tables finite, the engine's own screen
    for tables changed in place after that check (a NaN or infinite entry would make every
    number of the analysis NaN). One read of each table (`_finite_screen`); only a table that
    fails the screen is searched row by row for the first non-finite entry.

    ``skip_top``: the deepest tables (the target's at depths L-1 and L, the draft's at depth
    L-1) are left to the caller, who screens them on the way (the compiled kernels of the
    per-node route read them once anyway; together they are seven eighths of the check at V =
    8) and calls this again without ``skip_top`` where a screen fails or did not run, before
    any result is returned; a table that fails here is reported in the usual order (the whole
    check runs again)."""
    check_instance(instance)  # its structure and rows (once per instance built in Python)
    L = instance.block_length
    deep = [t for model, depths in ((instance.target, (L - 1, L)), (instance.draft, (L - 1,)))
            for d, t in enumerate(getattr(model, "tables", ())) if d in depths] if skip_top \
        else []
    for which, model in (("target", instance.target), ("draft", instance.draft)):
        for d, table in enumerate(getattr(model, "tables", ())):
            if isinstance(table, np.ndarray) and table.dtype.kind == "f":
                if any(table is t for t in deep) or _finite_screen(table):
                    continue
                if deep:  # the full check, in its order
                    return _check_instance(instance)
                bad = np.flatnonzero(~np.isfinite(table).all(axis=-1))
                if bad.size:
                    row, V = int(bad[0]), instance.vocab_size
                    prefix = tuple(row // V ** (d - 1 - j) % V for j in range(d))
                    value = table[row][~np.isfinite(table[row])][0]
                    raise SpectheoryError(
                        f"{which}: the row after prefix {prefix} has a non-finite entry "
                        f"({value}); every probability must be finite")


def check_paths(how: Plan) -> None:
    """Refuse K past `MAX_PATHS`, before any route is weighed (a tree route's size named the
    paths = 10^400 a user typed as a tree '~10^400,1')."""
    if how.paths > MAX_PATHS:
        raise SpectheoryError(f"paths = {shown(how.paths)} is out of range 1..{MAX_PATHS} (the "
                              f"K-path engine counts the K! orderings of a joint outcome in int64)")


def _plan_sizes(how: Plan, V: int, L: int, contexts: int, exact: bool, max_sequences,
                what: str, formula: str, symmetric: bool | None = None,
                route: str = "enumerate") -> None:
    """Size guards of one analysis: the output law, and for K > 1 enumerated joint outcomes."""
    if exact and not how.spec.exact:
        raise SpectheoryError(f"verifier {how.spec.name!r} has a float law only (no exact "
                              f"rational mode); drop --exact / exact=True")
    check_paths(how)
    check_size(contexts * V ** (L + 1), what, exact, max_sequences, formula,
               node=route == "node")
    if how.paths > 1 and route == "tree":
        from .drafttrees import node_route_work

        work = node_route_work((how.paths,) + (1,) * (L - 1), V, how.drafting, how.spec)
        check_size(contexts * work, f"{what} ({how.paths} paths, node by node)", exact,
                   max_sequences, "sum over nodes of V^depth x candidate tuples" +
                   (f" x {contexts:,} contexts" if contexts > 1 else ""), outcomes=True)
    if how.paths > 1 and route == "enumerate":
        from .joint import outcome_count, use_symmetry

        K = how.paths
        sym = use_symmetry(how, symmetric)
        n = outcome_count(V, L, K, sym)
        formula = (f"C(V^L + K - 1, K) = C({V}^{L} + {K - 1}, {K}) sorted joint draft outcomes"
                   if sym else f"V^(L K) = {V}^{L * K} joint draft outcomes")
        check_size(contexts * n, f"{what} ({K} paths)", exact, max_sequences,
                   formula + (f" x {contexts:,} contexts" if contexts > 1 else ""), outcomes=True)


__all__ = ["BACKENDS", "MAX_PATHS", "NUMPY_MAX_SEQUENCES", "NUMPY_ROUTES", "ROUTES", "float_backend", "resolve_route",
           "tree_route_available"]
