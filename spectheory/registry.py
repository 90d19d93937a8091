"""One verifier protocol for 1 and K paths, and the one registry of verifiers.

Every verifier, built in or yours, is described by a :class:`VerifierSpec`: its law function and
what is known about it (how many paths it takes, the drafting scheme under which it is lossless,
whether its law depends on the order of the paths, whether it runs in exact rationals, its node
form, the paper). :meth:`VerifierSpec.law` always speaks the K-path form of :mod:`spectheory.law`,
so the exact engine (:func:`spectheory.analyze`), the checker (:func:`spectheory.check_lossless`),
the sampler (:func:`spectheory.sampling.sample_output`) and the real-model loop each exist once; a
single-path verifier is the case K = 1.

Finding a verifier (:func:`get_verifier`) accepts

* a registered name (``"block"``, ``"gbv"``, ...; :func:`verifier_names` lists them);
* ``"module:function"``: an importable function (or :class:`VerifierSpec`); a bare function is
  read as a single-path verifier unless it carries a ``spectheory_spec`` attribute (set by
  :func:`verifier`);
* a name registered by an installed package under the entry-point group ``spectheory.verifiers``;
* a :class:`VerifierSpec` or a plain callable.

Defaults are decided here and only here: :func:`plan` turns (verifier, paths, drafting) into what
the engine runs, with the verifier's own drafting scheme as the default.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from . import backend as B
from .errors import SpectheoryError
from .law import Law

#: Drafting schemes of K paths (see :mod:`spectheory.multipath`).
DRAFTING = ("iid", "norep", "hub")
#: The most paths a drafting scheme defines (schemes not listed take any K): ``hub`` drafts the
#: draft's most probable token and one companion (SpecHub, arXiv 2411.05289), so K <= 2.
DRAFTING_MAX_PATHS = {"hub": 2}
#: Entry-point group through which installed packages register verifiers.
ENTRY_POINT_GROUP = "spectheory.verifiers"


class DraftingWarning(UserWarning):
    """A verifier is analysed under a drafting scheme other than the one it is designed for."""


@dataclass(frozen=True)
class VerifierSpec:
    """A verifier and what is known about it.

    Parameters
    ----------
    name : str
        Command-line name.
    function : callable
        The law function. ``paths == 1``: ``f(drafts [B, L], q [B, L, V], p [B, L+1, V])``;
        otherwise the K-path form ``f(drafts [B, K, L], q [B, K, L, V], p [B, K, L+1, V])``.
        Either returns a :class:`spectheory.law.Law`.
    paths : int or None
        1 for a single-path verifier; ``None`` for one that takes any K >= 1.
    drafting : {"iid", "norep", "hub", "any"}
        The drafting scheme of the K paths under which the verifier is lossless (``"any"``: iid
        and norep).
    lossless : bool
        False for the known-lossy negative controls and bug replicas.
    order_invariant : bool
        The law over output sequences depends only on the multiset of drafted paths, so the
        exact engine may enumerate sorted tuples of paths (i.i.d. drafting).
    exact : bool
        The law runs on numpy arrays of Fractions (exact rational mode).
    node_form : str or None
        The per-node rule, where the verifier has one (for the documentation and the tree engine).
    paper : str
        Where it comes from.
    summary : str
        One line for listings.
    node : spectheory.nodes.NodeForm or None
        The verifier's rule per node of the sequence tree, for verifiers whose law at position i
        depends only on the prefix X^i (token, block). When set, ``function`` is derived from it
        (:func:`spectheory.nodes.law_from_nodes`) and the exact engine evaluates once per node
        instead of once per draft and position.
    analytic : callable or None
        K-path verifiers whose exact block law has a closed route (GBV: block verification
        against the skewed draft q^G): ``analytic(how, q_levels, p_levels, V, L)`` returns the
        :class:`spectheory.exact.BlockLaw` that the joint enumeration would give.
    paths_read : int or None
        K-path verifiers whose law depends on the first ``paths_read`` drafted paths only and
        puts no stop mass on the others (the first-path baselines: 1). Their law on K > m paths
        is their law on the first m, padded with zeros, and the marginal law of the first m of
        K drafted paths is that of m drafted paths (either scheme), so the joint enumeration
        visits V**(L m) outcomes instead of V**(L K) (checked on a sample of K-path outcomes).
    rule : callable or None
        Node-recursive K-path verifiers: the rule at one node of the token tree, in the
        signature of :func:`spectheory.verifiers.specinfer.node_recursive_law`
        (``rule(member, tokens, q_rows, p_rows) -> (accept, none, correction)``); the draft-tree
        engine's node route (:mod:`spectheory.trees`) runs it on any tree shape.
    rule_skips_repeats : bool
        The rule ignores a candidate whose token an earlier candidate carries (rules for
        drafting without replacement), so the node route may run it under ``norep``.
    """

    name: str
    function: Callable
    paths: int | None = 1
    drafting: str = "any"
    lossless: bool = True
    order_invariant: bool = False
    exact: bool = True
    node_form: str | None = None
    paper: str = ""
    summary: str = ""
    node: Any = None
    analytic: Callable | None = None
    paths_read: int | None = None
    rule: Callable | None = None
    rule_skips_repeats: bool = False

    def __post_init__(self):
        if self.paths not in (1, None):
            raise SpectheoryError(f"verifier {self.name!r}: paths must be 1 or None (any K), "
                                  f"not {self.paths!r}")
        if self.paths_read is not None and (isinstance(self.paths_read, bool) or not isinstance(
                self.paths_read, int) or self.paths_read < 1):
            raise SpectheoryError(f"verifier {self.name!r}: paths_read must be a positive "
                                  f"integer or None, not {self.paths_read!r}")
        if self.drafting not in DRAFTING + ("any",):
            raise SpectheoryError(f"verifier {self.name!r}: unknown drafting scheme "
                                  f"{self.drafting!r}; choose from "
                                  f"{', '.join(DRAFTING + ('any',))}")

    @property
    def single_path(self) -> bool:
        return self.paths == 1

    @property
    def default_drafting(self) -> str:
        """The drafting scheme used when none is asked for."""
        return "iid" if self.drafting == "any" else self.drafting

    def law(self, drafts, q, p) -> Law:
        """The K-path law ``stop [B, K, L+1]``, ``correction [B, K, L+1, V]`` on K-path inputs."""
        if not self.single_path:
            return Law(*self.function(drafts, q, p))
        if drafts.shape[1] != 1:
            raise SpectheoryError(f"verifier {self.name!r} is single-path; it got "
                                  f"{drafts.shape[1]} paths")
        out = self.function(drafts[:, 0], q[:, 0], p[:, 0])
        try:
            stop, corr = out
        except (TypeError, ValueError):
            return out  # not a law: the checker names it
        if len(getattr(stop, "shape", ())) == 2:
            stop = B.expand_dims(stop, 1)
        if len(getattr(corr, "shape", ())) == 3:
            corr = B.expand_dims(corr, 1)
        return Law(stop, corr)

    def __call__(self, drafts, q, p) -> Law:
        """The law in the verifier's own form (as ``function``)."""
        return self.function(drafts, q, p)

    def describe(self) -> dict:
        return {"name": self.name, "paths": "1" if self.single_path else "any",
                "drafting": self.drafting, "lossless": self.lossless,
                "order_invariant": self.order_invariant, "exact": self.exact,
                "node_form": self.node_form, "paper": self.paper, "summary": self.summary,
                "routes": self.routes()}

    def routes(self) -> list[str]:
        """Exact-engine routes available to this verifier (see :func:`spectheory.analyze`)."""
        if self.single_path:
            return (["node"] if self.node is not None else []) + ["per-draft"]
        return (["analytic"] if self.analytic is not None else []) + ["enumerate"]


def verifier(function: Callable | None = None, *, name: str | None = None, paths: int | None = 1,
             drafting: str = "any", lossless: bool = True, order_invariant: bool = False,
             exact: bool = True, node_form: str | None = None, paper: str = "",
             summary: str = "", node=None, paths_read: int | None = None):
    """Declare a function as a verifier: returns the function with a ``spectheory_spec``
    attribute (a :class:`VerifierSpec`). Usable as ``@verifier(paths=None, drafting="iid")`` or
    ``verifier(f, ...)``; ``module:function`` then finds the spec. ``node`` declares the
    verifier's :class:`spectheory.nodes.NodeForm` (its law at position i depends on the prefix
    X^i only); :func:`spectheory.nodes.node_verifier` builds a verifier from a node form alone,
    so that its per-draft law cannot differ from it. ``paths_read`` declares that a K-path law
    reads only the first ``paths_read`` paths (:class:`VerifierSpec`; checked before use)."""

    def wrap(f):
        f.spectheory_spec = VerifierSpec(name or f.__name__, f, paths, drafting, lossless,
                                         order_invariant, exact,
                                         node_form or getattr(node, "formula", None), paper,
                                         summary or (f.__doc__ or "").strip().split("\n")[0],
                                         node=node, paths_read=paths_read)
        return f

    return wrap(function) if function is not None else wrap


_REGISTRY: dict[str, VerifierSpec] = {}
_ENTRY_POINTS_LOADED = False


def register(spec: VerifierSpec, replace_existing: bool = False) -> VerifierSpec:
    """Add ``spec`` to the registry under ``spec.name``."""
    if spec.name in _REGISTRY and not replace_existing and _REGISTRY[spec.name] != spec:
        raise SpectheoryError(f"a verifier named {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def _load_builtins():
    from . import verifiers  # noqa: F401  (registers the built-in verifiers on import)


def _load_entry_points():
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY:
            continue
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plug-in must not break the toolkit
            warnings.warn(f"verifier entry point {ep.name!r} ({ep.value}) failed to load: {exc}")
            continue
        register(_as_spec(obj, ep.name))


def registered(lossless: bool | None = None, single_path: bool | None = None
               ) -> dict[str, VerifierSpec]:
    """The registry (name -> spec), optionally only lossless / lossy, single- / K-path ones."""
    _load_builtins()
    _load_entry_points()
    return {n: s for n, s in _REGISTRY.items()
            if (lossless is None or s.lossless == lossless)
            and (single_path is None or s.single_path == single_path)}


def verifier_names(lossless: bool | None = None) -> list[str]:
    return list(registered(lossless))


def _as_spec(obj: Any, name: str, multi_path: bool = False) -> VerifierSpec:
    if isinstance(obj, VerifierSpec):
        return obj
    spec = getattr(obj, "spectheory_spec", None)
    if isinstance(spec, VerifierSpec):
        return spec
    if callable(obj):
        return VerifierSpec(name, obj, paths=None if multi_path else 1, summary=(getattr(obj, "__doc__", "") or "").strip()
                            .split("\n")[0])
    raise SpectheoryError(f"{name!r} is {type(obj).__name__}, not a verifier function")


def _import_target(text: str) -> Any:
    module, _, attr = text.partition(":")
    if not module or not attr:
        raise SpectheoryError(f"{text!r} is not of the form module:function")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        # a console script does not put the current folder on sys.path (python -m does): look
        # there too, as a user who names `mymodule:f` in their working folder expects
        import os
        import sys

        here = os.getcwd()
        if exc.name != module.split(".")[0] or here in sys.path:
            raise SpectheoryError(f"cannot import module {module!r} for verifier {text!r}: "
                                  f"{exc}") from None
        sys.path.append(here)
        try:
            mod = importlib.import_module(module)
        except ImportError as exc2:
            raise SpectheoryError(f"cannot import module {module!r} for verifier {text!r}: "
                                  f"{exc2}") from None
    except ImportError as exc:
        raise SpectheoryError(f"cannot import module {module!r} for verifier {text!r}: "
                              f"{exc}") from None
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise SpectheoryError(f"module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def get_verifier(verifier: Any, multi_path: bool = False) -> VerifierSpec:
    """The :class:`VerifierSpec` for a name, ``module:function``, spec or callable.

    A function without a spec is read as a single-path verifier, or as a K-path one when
    ``multi_path`` is True (as :func:`plan` does when more than one path is asked for)."""
    if isinstance(verifier, VerifierSpec):
        return verifier
    if isinstance(verifier, str):
        table = registered()
        if verifier in table:
            return table[verifier]
        if ":" in verifier:
            return _as_spec(_import_target(verifier), verifier, multi_path)
        raise SpectheoryError(f"unknown verifier {verifier!r}; choose from "
                              f"{', '.join(table)} or give module:function")
    if callable(verifier):
        for spec in registered().values():  # a built-in function keeps its metadata
            if spec.function is verifier:
                return spec
        return _as_spec(verifier, getattr(verifier, "__name__", "verifier"), multi_path)
    raise SpectheoryError(f"a verifier must be a name, module:function or a function, not "
                          f"{type(verifier).__name__}")


def check_drafting_paths(drafting: str, paths: int) -> None:
    """Refuse K = ``paths`` paths under a scheme that defines fewer (:data:`DRAFTING_MAX_PATHS`),
    in one line naming both."""
    cap = DRAFTING_MAX_PATHS.get(drafting)
    if cap is not None and paths > cap:
        raise SpectheoryError(f"the {drafting} drafting scheme drafts at most {cap} paths "
                              f"(the draft's most probable token and one companion; SpecHub, "
                              f"arXiv 2411.05289), not {paths}; use --paths {cap} or less")


class Plan(NamedTuple):
    """What the engine runs: the verifier, K and the drafting scheme."""

    spec: VerifierSpec
    paths: int
    drafting: str


def plan(verifier: Any, paths: int | None = None, drafting: str | None = None) -> Plan:
    """Resolve (verifier, paths, drafting), with the defaults: K = 1 and the verifier's own
    drafting scheme. A function without a spec is a K-path verifier when ``paths > 1`` and a
    single-path one otherwise. A single-path verifier takes K = 1 only (``block-first`` /
    ``token-first`` run block / token verification on the first of K paths). Asking for a
    drafting scheme the verifier is not designed for is allowed (that is how lossiness under the
    wrong scheme is shown) and issues a :class:`DraftingWarning`. K beyond what the scheme
    defines (``hub``: K <= 2, :data:`DRAFTING_MAX_PATHS`) is refused."""
    if paths is None:
        paths = 1
    if isinstance(paths, bool) or not isinstance(paths, int) or paths < 1:
        raise SpectheoryError(f"paths = {paths!r} must be a positive integer")
    spec = get_verifier(verifier, multi_path=paths > 1)
    if drafting is not None and drafting not in DRAFTING:
        raise SpectheoryError(f"unknown drafting scheme {drafting!r}; choose from "
                              f"{', '.join(DRAFTING)}")
    if spec.single_path:
        if paths > 1:
            multi = [n for n, s in registered(lossless=True).items() if not s.single_path]
            raise SpectheoryError(
                f"verifier {spec.name!r} is single-path; {paths} paths need a multi-path "
                f"verifier ({', '.join(multi)}; block-first / token-first run block / token "
                f"verification on the first path)")
        return Plan(spec, 1, drafting or "iid")
    if drafting is None:
        drafting = spec.default_drafting
    elif spec.drafting not in ("any", drafting) and paths > 1:
        warnings.warn(f"{spec.name} is designed for {spec.drafting} drafting; analysing it "
                      f"under {drafting} drafting", DraftingWarning, stacklevel=2)
    check_drafting_paths(drafting, paths)
    return Plan(spec, paths, drafting)


__all__ = ["DRAFTING", "DRAFTING_MAX_PATHS", "DraftingWarning", "ENTRY_POINT_GROUP", "Plan",
           "VerifierSpec", "check_drafting_paths", "get_verifier", "plan", "register",
           "registered", "verifier", "verifier_names"]
