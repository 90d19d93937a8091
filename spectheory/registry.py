"""One verifier protocol for 1 and K paths, and the one registry of verifiers.

Every verifier, built in or yours, is described by a
[`VerifierSpec`][spectheory.registry.VerifierSpec]: its law function and what is known about it (how
many paths it takes, the drafting scheme under which it is lossless, whether its law depends on the
order of the paths, whether it runs in exact rationals, its node form, the paper).
[`VerifierSpec.law`][spectheory.registry.VerifierSpec.law] always speaks the K-path form of
[`spectheory.law`][spectheory.law], so the exact engine ([`analyze`][spectheory.engine.analysis.analyze]), the
checker ([`check_lossless`][spectheory.engine.lossless.check_lossless]), the sampler
([`sample_output`][spectheory.sampling.sample_output]) and the real-model loop each exist once; a
single-path verifier is the case K = 1.

Finding a verifier ([`get_verifier`][spectheory.registry.get_verifier]) accepts

* a registered name (``"block"``, ``"gbv"``, ...; `verifier_names` lists them);
* a parametric rule with its parameters, ``"additive(1/4)"``, ``"trtllm-relaxed(2, 1/10)"``,
  ``"static-ensemble(1/3)"`` ([`parse_name`][spectheory.verifiers.params.parse_name]: numbers
  read exactly, out-of-range, NaN, inf, text or a wrong count refused in one line naming the rule,
  the parameter and its range);
* ``"module:function"``: an importable function (or
  [`VerifierSpec`][spectheory.registry.VerifierSpec]); a bare function is read as a single-path
  verifier unless it carries a ``spectheory_spec`` attribute (set by
  [`verifier`][spectheory.registry.verifier]);
* a name registered by an installed package under the entry-point group ``spectheory.verifiers``
  (the built-in verifiers are registered the same way, by this package's own entry point);
* a [`VerifierSpec`][spectheory.registry.VerifierSpec] or a plain callable.

Defaults are decided here and only here: [`plan`][spectheory.registry.plan] turns (verifier, paths,
drafting) into what the engine runs, with the verifier's own drafting scheme as the default.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import warnings
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from .runtime import backend as B
from .runtime._lazy import is_tensor, torch
from .runtime.errors import (InputError, SpectheoryError, TimeLimitError, call_user, check_flag,
                             check_law_shapes, check_token_ids, import_user, is_integer,
                             package_code)
from .law import ROW_SUM_TOL, Law, LawError, dtype_tolerance, validate_law
from .runtime.limits import shown as _repr_cut

#: Drafting schemes of K paths (see [`spectheory.engine.joint`][spectheory.engine.joint]).
DRAFTING = ("iid", "norep", "hub")
#: Drafting schemes of a draft tree (`spectheory.engine.drafttrees`, which takes them from here:
#: a spec's ``tree_drafting`` is checked against them).
TREE_DRAFTING = ("iid", "norep", "topk")
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
        Either returns a [`Law`][spectheory.law.Law].
    paths : int or None
        1 for a single-path verifier; ``None`` for one that takes any K >= 1.
    drafting : {"iid", "norep", "hub", "any"}
        The drafting scheme of the K paths under which the verifier is lossless (``"any"``: iid
        and norep).
    lossless : bool
        False for the known-lossy negative controls and bug replicas.
    order_invariant : bool
        The law over output sequences depends only on the multiset of drafted paths, so the
        exact engine may enumerate sorted tuples of paths (i.i.d. drafting). Checked before it
        is relied on: on a sample of 64 outcomes, the paths rotated and the first two swapped
        must give the same emitted law (`spectheory.engine.joint`), else the analysis is refused.
    exact : bool
        The law runs on numpy arrays of Fractions (exact rational mode).
    node_form : str or None
        The per-node rule, where the verifier has one (for the documentation and the tree engine).
    paper : str
        Where it comes from.
    summary : str
        One line for listings.
    node : spectheory.engine.nodes.NodeForm or None
        The verifier's rule per node of the sequence tree, for verifiers whose law at position i
        depends only on the prefix X^i (token, block). When set, ``function`` is derived from it
        ([`law_from_nodes`][spectheory.engine.nodes.law_from_nodes]) and the exact engine evaluates once
        per node instead of once per draft and position.
    analytic : callable or None
        K-path verifiers whose exact block law has a closed route (GBV: block verification
        against the skewed draft q^G): ``analytic(how, q_levels, p_levels, V, L)`` returns the
        [`BlockLaw`][spectheory.engine.perdraft.BlockLaw] that the joint enumeration would give.
    paths_read : int or None
        K-path verifiers whose law depends on the first ``paths_read`` drafted paths only and
        puts no stop mass on the others (the first-path baselines: 1). Their law on K > m paths
        is their law on the first m, padded with zeros, and the marginal law of the first m of
        K drafted paths is that of m drafted paths (either scheme), so the joint enumeration
        visits V**(L m) outcomes instead of V**(L K) (checked on a sample of K-path outcomes).
    rule : callable or None
        Node-recursive K-path verifiers: the rule at one node of the token tree, in the
        signature of [`node_recursive_law`][spectheory.verifiers.specinfer.node_recursive_law]
        (``rule(member, tokens, q_rows, p_rows) -> (accept, none, correction)``); the draft-tree
        engine's node route ([`spectheory.engine.drafttrees`][spectheory.engine.drafttrees]) runs it on any tree shape.
    rule_skips_repeats : bool
        The rule ignores a candidate whose token an earlier candidate carries (rules for
        drafting without replacement), so the node route may run it under ``norep``.
    rule_merges_repeats : bool
        Under ``iid`` tree drafting, children of a node that drew the same token are one
        token-tree node whose children are the concatenation of theirs (SpecInfer's token tree;
        the default). False for a rule that walks the drafted tree itself: accepting a child
        moves into that child's subtree only (SGLang's tree kernel,
        [`spectheory.verifiers.sglang_tree`][spectheory.verifiers.sglang_tree]).
    numpy_float : bool
        The law function (and the node form) also run on numpy float64 arrays, giving the values
        they give on float64 torch tensors (code written against
        [`spectheory.runtime.backend`][spectheory.runtime.backend] throughout). The exact engine's
        float route on the CPU then computes on numpy and never imports torch
        ([`float_backend`][spectheory.engine.plan.float_backend]). False (the default, and for
        every bare function, ``module:function`` included): float laws receive torch tensors, as
        documented for verifier functions. ``dataclasses.replace(spec, function=...)`` keeps the
        declaration: set ``numpy_float=False`` there unless the new function runs on numpy too.
    tree_drafting : tuple of str
        The draft-tree schemes (``iid``, ``norep``, ``topk``;
        [`spectheory.engine.drafttrees`][spectheory.engine.drafttrees]) under which the node rule is
        lossless, first the one its engine drafts with; the tree mode of the conformance kit
        ([`spectheory.testing.checks.tree`][spectheory.testing.checks.tree]) checks a sampler under
        that first scheme by default and says which. Empty: not declared.
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
    rule_merges_repeats: bool = True
    tree_drafting: tuple = ()
    numpy_float: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise SpectheoryError(f"a verifier's name must be a non-empty string, not "
                                  f"{_repr_cut(self.name, 40)}")
        if not callable(self.function):
            raise SpectheoryError(f"verifier {self.name!r}: its function is "
                                  f"{type(self.function).__name__}, not callable")
        if not isinstance(self.function, (GuardedFunction, UserVerifier)) \
                and not package_code(self.function):  # a spec built in Python around user code
            object.__setattr__(self, "function", GuardedFunction(self.function, self.name))
        for flag in ("lossless", "order_invariant", "exact", "rule_skips_repeats",
                     "rule_merges_repeats", "numpy_float"):  # "yes" or 1 would read as True
            object.__setattr__(self, flag, check_flag(getattr(self, flag),
                                                      f"verifier {self.name!r}: {flag}"))
        for text in ("paper", "summary"):
            if not isinstance(getattr(self, text), str):
                raise SpectheoryError(f"verifier {self.name!r}: {text} = "
                                      f"{_repr_cut(getattr(self, text), 40)} must be a string")
        if self.node_form is not None and not isinstance(self.node_form, str):
            raise SpectheoryError(f"verifier {self.name!r}: node_form = {_repr_cut(self.node_form, 40)} "
                                  "must be a string (the rule in words) or None")
        for part in ("analytic", "rule"):
            if getattr(self, part) is not None and not callable(getattr(self, part)):
                raise SpectheoryError(f"verifier {self.name!r}: {part} must be callable or None")
        if self.node is not None and not callable(getattr(self.node, "step", None)):
            raise SpectheoryError(f"verifier {self.name!r}: node = {_repr_cut(self.node, 40)} is not a "
                                  "NodeForm (spectheory.engine.nodes.NodeForm: a step function "
                                  "and a scan)")
        if isinstance(self.paths, bool) or not (  # 1.0 and numpy's 1 are 1
                self.paths is None or (isinstance(self.paths, numbers.Real) and self.paths == 1)):
            raise SpectheoryError(f"verifier {self.name!r}: paths must be 1 or None (any K), "
                                  f"not {self.paths!r}")
        if self.paths_read is not None and (not is_integer(self.paths_read)
                                            or self.paths_read < 1):
            raise SpectheoryError(f"verifier {self.name!r}: paths_read must be a positive "
                                  f"integer or None, not {_repr_cut(self.paths_read, 40)}")
        if self.paths_read is not None:
            object.__setattr__(self, "paths_read", int(self.paths_read))  # numpy's 1 as 1
        if not isinstance(self.tree_drafting, tuple) or any(
                not isinstance(t, str) or t not in TREE_DRAFTING for t in self.tree_drafting):
            raise SpectheoryError(f"verifier {self.name!r}: tree_drafting = "
                                  f"{_repr_cut(self.tree_drafting, 60)} must be a tuple of draft-tree "
                                  f"schemes from {', '.join(TREE_DRAFTING)}")
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
        """The K-path law ``stop [B, K, L+1]``, ``correction [B, K, L+1, V]`` on K-path inputs.
        Rows that require grad are read as values
        ([`values`][spectheory.runtime.backend.values]): every law is a table of values."""
        q, p = B.values(q, p)
        check_law_inputs(drafts, q, p, paths=True, name=self.name)
        if not self.single_path:
            out = self.function(drafts, q, p)
            try:
                stop, corr = out
            except (TypeError, ValueError):  # None, a number, a 3-tuple: named, as below
                raise LawError("shape", f"{self.name} returned {type(out).__name__}, not a law "
                               f"(stop, correction)") from None
            return Law(_like(stop, q), _like(corr, q))
        if drafts.shape[1] != 1:
            raise SpectheoryError(f"verifier {self.name!r} is single-path; it got "
                                  f"{drafts.shape[1]} paths")
        out = self.function(drafts[:, 0], q[:, 0], p[:, 0])
        try:
            stop, corr = out
        except (TypeError, ValueError):  # None, a number, a 3-tuple: named, as above
            raise LawError("shape", f"{self.name} returned {type(out).__name__}, not a law "
                           f"(stop, correction)") from None
        stop, corr = _like(stop, q), _like(corr, q)
        if len(getattr(stop, "shape", ())) == 2:
            stop = B.expand_dims(stop, 1)
        if len(getattr(corr, "shape", ())) == 3:
            corr = B.expand_dims(corr, 1)
        return Law(stop, corr)

    def __call__(self, drafts, q, p) -> Law:
        """The law in the verifier's own form (as ``function``), of the rows' values (as
        `law`)."""
        q, p = B.values(q, p)
        check_law_inputs(drafts, q, p, paths=not self.single_path, name=self.name)
        return self.function(drafts, q, p)

    def describe(self) -> dict:
        return {"name": self.name, "paths": "1" if self.single_path else "any",
                "drafting": self.drafting, "lossless": self.lossless,
                "order_invariant": self.order_invariant, "exact": self.exact,
                "node_form": self.node_form, "paper": self.paper, "summary": self.summary,
                "routes": self.routes()}

    def routes(self) -> list[str]:
        """Exact-engine routes available to this verifier (see
        [`analyze`][spectheory.engine.analysis.analyze])."""
        if self.single_path:
            return (["node"] if self.node is not None else []) + ["per-draft"]
        return (["analytic"] if self.analytic is not None else []) + ["enumerate"]


def _like(arr, q):
    """A law table a verifier returned as a float numpy array while its rows were torch tensors,
    as a tensor on their device (torch times numpy warned, four times a call, and held
    numpy's array type in torch's arithmetic); anything else as it is (the checks name it)."""
    import numpy as np

    if is_tensor(q) and isinstance(arr, np.ndarray) and arr.dtype.kind == "f":
        return torch.as_tensor(arr, device=q.device)
    return arr


def check_law_inputs(drafts, q, p, paths: bool, name: str = "verifier") -> None:
    """Refuse, in one line naming the verifier, law inputs of the wrong form: ``drafts [B, L]``,
    ``q [B, L, V]``, ``p [B, L+1, V]`` (``paths``: ``[B, K, L]``, ``[B, K, L, V]``,
    ``[B, K, L+1, V]``), drafts of integer token ids in 0..V-1 (an id past the vocabulary
    indexed a row out of bounds, or gave its path the mass of another). The rows' values are
    the caller's: reading them would cost a pass over every row of a real-size law (the exact
    engine's tables, and files, are checked when made or read)."""
    shape = getattr(drafts, "shape", None)
    if shape is None or not hasattr(q, "shape") or not hasattr(p, "shape"):
        raise InputError(f"verifier {name!r}: drafts, q and p must be arrays (torch or numpy), "
                         f"got {type(drafts).__name__}, {type(q).__name__}, {type(p).__name__}")
    torch_given = [is_tensor(x) for x in (drafts, q, p)]
    if any(torch_given) and not all(torch_given):
        raise InputError(f"verifier {name!r}: drafts, q and p must be all torch tensors or all "
                         "numpy arrays, not a mix")
    if all(torch_given):
        devices = {x.device for x in (drafts, q, p)}
        if any(d.type == "meta" for d in devices):
            raise InputError(f"verifier {name!r}: tensors on the meta device hold shapes and no "
                             "values; hand them on the CPU or a GPU")
        if len(devices) > 1:
            raise InputError(f"verifier {name!r}: drafts, q and p are on different devices "
                             f"({', '.join(sorted(map(str, devices)))})")
    qs = tuple(q.shape)
    check_law_shapes(tuple(shape), qs, tuple(p.shape), paths, f"verifier {name!r}")
    kind = str(getattr(drafts, "dtype", ""))
    if "int" not in kind:
        raise InputError(f"verifier {name!r}: drafts are {kind or type(drafts).__name__}; "
                         "draft tokens are integer ids")
    V = qs[-1]
    check_token_ids(drafts, V, f"verifier {name!r}")


def verifier(function: Callable | None = None, *, name: str | None = None, paths: int | None = 1,
             drafting: str = "any", lossless: bool = True, order_invariant: bool = False,
             exact: bool = True, node_form: str | None = None, paper: str = "",
             summary: str = "", node=None, paths_read: int | None = None):
    """Declare a function as a verifier: returns the function with a ``spectheory_spec`` attribute
    (a [`VerifierSpec`][spectheory.registry.VerifierSpec]). Usable as
    ``@verifier(paths=None, drafting="iid")`` or ``verifier(f, ...)``; ``module:function`` then
    finds the spec. ``node`` declares the verifier's [`NodeForm`][spectheory.engine.nodes.NodeForm] (its
    law at position i depends on the prefix X^i only);
    [`node_verifier`][spectheory.engine.nodes.node_verifier] builds a verifier from a node form alone, so
    that its per-draft law cannot differ from it. ``paths_read`` declares that a K-path law reads
    only the first ``paths_read`` paths ([`VerifierSpec`][spectheory.registry.VerifierSpec]; checked
    before use)."""

    def wrap(f):
        if not callable(f):
            raise SpectheoryError(f"@verifier declares a function, not {type(f).__name__}")
        def given(text, default):  # a string's truth only: a tensor's raised "ambiguous"; any
            # other object goes to VerifierSpec, which names it
            return (text or default) if text is None or isinstance(text, str) else text

        f.spectheory_spec = VerifierSpec(given(name, f.__name__), f, paths, drafting, lossless,
                                         order_invariant, exact,
                                         given(node_form, getattr(node, "formula", None)), paper,
                                         given(summary,
                                               (f.__doc__ or "").strip().split("\n")[0]),
                                         node=node, paths_read=paths_read)
        return f

    return wrap(function) if function is not None else wrap


_REGISTRY: dict[str, VerifierSpec] = {}
#: The reader of parametric names (``additive(1/4)``), set by ``spectheory.verifiers`` on import.
_NAME_PARSER: list = []


def set_name_parser(parser: Callable) -> None:
    """Set the function that turns a parametric name ``rule(a, b)`` into its spec (None for any
    other text); ``spectheory.verifiers`` sets
    [`parse_name`][spectheory.verifiers.params.parse_name]."""
    _NAME_PARSER[:] = [parser]
_UNLISTED: set[str] = set()
_ENTRY_POINTS_LOADED = False


def _check_new_name(name: str) -> None:
    """Refuse a name that could never be looked up as registered: one with surrounding blanks
    (names are looked up stripped: ``" token "`` found the built-in ``token``) or a character
    that is not printable (a newline split every message naming it), and one that a built-in
    parametric rule reads (``additive(1/4)`` registered by a user shadowed the rule of that
    name, while ``additive( 1/4 )`` still found the rule)."""
    if name != name.strip() or not name.isprintable():
        raise SpectheoryError(f"verifier name {_repr_cut(name, 60)} has surrounding blanks or a "
                              "character that is not printable; names are looked up with blanks "
                              "stripped and printed on one line")
    if _NAME_PARSER:
        try:
            read = _NAME_PARSER[0](name)
        except SpectheoryError:  # the syntax of a built-in rule, with a parameter it refuses
            read = name
        if read is not None:
            raise SpectheoryError(f"verifier name {name!r} is a parametric name of the built-in "
                                  f"rule {name.partition('(')[0].strip()!r}; register it under "
                                  "another name")


def register(spec: VerifierSpec, replace_existing: bool = False, listed: bool = True
             ) -> VerifierSpec:
    """Add ``spec`` to the registry under ``spec.name``. With ``listed`` False the name is found
    ([`get_verifier`][spectheory.registry.get_verifier]) but not listed by
    [`registered`][spectheory.registry.registered] (``topk``, a rule of the draft-tree engine)."""
    if not isinstance(spec, VerifierSpec):
        raise SpectheoryError(f"register takes a VerifierSpec, not {type(spec).__name__} (a "
                              "function: declare it with @verifier, or use get_verifier)")
    replace_existing = check_flag(replace_existing, "register: replace_existing")
    listed = check_flag(listed, "register: listed")
    _check_new_name(spec.name)
    if spec.name in _REGISTRY and not replace_existing and _REGISTRY[spec.name] != spec:
        raise SpectheoryError(f"a verifier named {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    if not listed:
        _UNLISTED.add(spec.name)
    return spec


def _load_entry_points():
    """Load the entry points of the group `ENTRY_POINT_GROUP`, this package's own first: the
    built-in verifiers are declared there (pyproject's ``[project.entry-points]``) as the package
    ``spectheory.verifiers``, which registers them on import; a package's entry point registers
    what it registers on import, a function or spec is registered under the entry point's name."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    import types
    from importlib.metadata import entry_points

    points = sorted(entry_points(group=ENTRY_POINT_GROUP),
                    key=lambda ep: getattr(ep.dist, "name", None) != "spectheory")
    if not any(getattr(ep.dist, "name", None) == "spectheory" for ep in points):
        _ENTRY_POINTS_LOADED = False
        raise SpectheoryError(f"the built-in verifiers are not registered: the installed "
                              f"metadata of spectheory has no {ENTRY_POINT_GROUP!r} entry point "
                              f"(reinstall it: pip install -e .)")
    for ep in points:
        if ep.name in _REGISTRY:
            continue
        try:
            obj = ep.load()
        except (KeyboardInterrupt, TimeLimitError):
            raise
        except (Exception, SystemExit) as exc:  # a broken plug-in must not break the toolkit
            what = (f"called sys.exit({exc.code!r})" if isinstance(exc, SystemExit)
                    else f"{type(exc).__name__}: {exc}")
            warnings.warn(f"verifier entry point {ep.name!r} ({ep.value}) failed to load: {what}")
            continue
        if isinstance(obj, types.ModuleType):  # registered its verifiers on import
            continue
        try:
            register(_as_spec(obj, ep.name, user=True))
        except SpectheoryError as exc:  # a bad name or spec: as a plug-in that fails to load
            warnings.warn(f"verifier entry point {ep.name!r} ({ep.value}) failed to load: {exc}")


def registered(lossless: bool | None = None, single_path: bool | None = None
               ) -> dict[str, VerifierSpec]:
    """The registry (name -> spec), optionally only lossless / lossy, single- / K-path ones
    (True, False or None: ``"yes"`` would match no verifier)."""
    lossless = check_flag(lossless, "registered: lossless", none=True)
    single_path = check_flag(single_path, "registered: single_path", none=True)
    _load_entry_points()
    return {n: s for n, s in _REGISTRY.items() if n not in _UNLISTED
            and (lossless is None or s.lossless == lossless)
            and (single_path is None or s.single_path == single_path)}


def verifier_names(lossless: bool | None = None) -> list[str]:
    return list(registered(lossless))


def _as_spec(obj: Any, name: str, multi_path: bool = False, user: bool = False
             ) -> VerifierSpec:
    """The spec of a VerifierSpec, a function carrying one, or a bare function. ``user``: the object
    was loaded from user code (``module:function``, an entry point), so its law function is called
    through [`UserVerifier`][spectheory.registry.UserVerifier] (exceptions and exits one line, every
    law it returns validated)."""
    spec = obj if isinstance(obj, VerifierSpec) else getattr(obj, "spectheory_spec", None)
    if isinstance(spec, VerifierSpec):
        if user and not isinstance(spec.function, UserVerifier):
            # user code receives torch tensors in float mode, as documented
            spec = dataclasses.replace(spec, function=UserVerifier(spec.function, name,
                                                                   spec.single_path),
                                       numpy_float=False)
        return spec
    if callable(obj):
        summary = (_doc(obj) or "").strip().split("\n")[0]
        single = not multi_path
        return VerifierSpec(name, UserVerifier(obj, name, single) if user else obj,
                            paths=1 if single else None, summary=summary)
    raise SpectheoryError(f"{name!r} is {type(obj).__name__}, not a verifier function")


def _callable_name(obj) -> str:
    try:
        name = getattr(obj, "__name__", None)
    except Exception:  # noqa: BLE001 - a user object's __getattr__ may raise anything
        name = None
    return name if isinstance(name, str) and name else "verifier"


def _doc(obj) -> str:
    try:
        doc = getattr(obj, "__doc__", "")
    except Exception:  # noqa: BLE001 - a user object's __getattr__ may raise anything
        return ""
    return doc if isinstance(doc, str) else ""


class GuardedFunction:
    """A law function handed over in Python, called through
    [`call_user`][spectheory.runtime.errors.call_user]: an exception it raises, ``sys.exit``,
    ``os._exit`` or a wrong signature is one [`UserCodeError`][spectheory.runtime.errors.UserCodeError]
    line naming it (as for ``module:function`` on the command line), never a bare traceback from
    inside the engine. What it returns is validated where the engine uses it
    ([`validate_law`][spectheory.law.validate_law], which names the draft and position)."""

    def __init__(self, function: Callable, name: str):
        functools.update_wrapper(self, function, updated=())
        self.function = function
        self.name = name

    def __call__(self, drafts, q, p):
        return call_user(self.function, drafts, q, p, what=f"verifier {self.name!r}")


class UserVerifier:
    """A user's law function (loaded from ``module:function`` or an entry point), as the toolkit
    calls it: through [`call_user`][spectheory.runtime.errors.call_user] (an exception or ``sys.exit``
    becomes one [`UserCodeError`][spectheory.runtime.errors.UserCodeError] line naming the verifier), and
    every result checked by [`validate_law`][spectheory.law.validate_law] before anything uses it,
    in every command (the exact engine, the checker, ``check-sampler``'s reference law, test
    vectors, the real-model loop).

    The check speaks the function's own form: single-path ``stop [B, L+1]``,
    ``correction [B, L+1, V]`` on ``drafts [B, L]``; K-path ``stop [B, K, L+1]``,
    ``correction [B, K, L+1, V]`` on ``drafts [B, K, L]``. A result that is not
    ``(stop, correction)``, of another shape, of a dtype that is not a real number (bool, complex,
    text), with NaN, infinite or negative entries, or with rows that do not sum to 1 raises
    [`LawError`][spectheory.law.LawError] naming the verifier, the row and the value. Rows are
    summed within `spectheory.law.ROW_SUM_TOL` for float64 laws, and within ``4 V eps`` (at most
    1e-2) for laws in a coarser float type.
    """

    def __init__(self, function: Callable, name: str, single_path: bool):
        functools.update_wrapper(self, function, updated=())
        self.function = function
        self.name = name
        self.single_path = single_path

    def __call__(self, drafts, q, p):
        label = f"verifier {self.name!r}"
        out = call_user(self.function, drafts, q, p, what=label)
        return check_user_law(out, drafts, q, label, self.single_path)


def _real_kind(arr) -> str | None:
    """None when ``arr`` holds real numbers (float, int or Python objects), else a word for
    its dtype."""
    dtype = getattr(arr, "dtype", None)
    if dtype is None:
        return None
    if is_tensor(arr):
        if dtype == torch.bool:
            return "bool"
        return "complex" if dtype.is_complex else None
    kind = getattr(dtype, "kind", "O")
    return None if kind in "fiuO" else {"b": "bool", "c": "complex"}.get(kind, str(dtype))


def _for_validation(arr):
    """A torch half / bfloat16 tensor as float32 (numpy has no bfloat16), detached."""
    if is_tensor(arr):
        arr = arr.detach()
        if arr.dtype in (torch.float16, torch.bfloat16):
            arr = arr.float()
    return arr


def check_user_law(out, drafts, q, label: str, single_path: bool):
    """``out`` if it is a law for ``drafts`` and ``q``
    ([`UserVerifier`][spectheory.registry.UserVerifier]), else [`LawError`][spectheory.law.LawError]
    naming ``label``. Inputs of another rank are not checked here (the engine's own
    [`validate_law`][spectheory.law.validate_law] still is)."""
    d_shape = tuple(getattr(drafts, "shape", ()))
    q_shape = tuple(getattr(q, "shape", ()))
    rank = 2 if single_path else 3
    if len(d_shape) != rank or len(q_shape) != rank + 1:
        return out
    try:
        stop, corr = out
    except (TypeError, ValueError):
        raise LawError("shape", f"{label} returned {type(out).__name__}, not a law "
                       f"(stop, correction)") from None
    batch, length, vocab = d_shape[0], d_shape[-1], q_shape[-1]
    paths = 1 if single_path else d_shape[1]
    want = ((batch, length + 1), (batch, length + 1, vocab)) if single_path else \
        ((batch, paths, length + 1), (batch, paths, length + 1, vocab))
    form = ("[B, L+1]", "[B, L+1, V]") if single_path else ("[B, K, L+1]", "[B, K, L+1, V]")
    for what, arr, shape, text in zip(("stop", "correction"), (stop, corr), want, form):
        have = getattr(arr, "shape", None)
        if have is None:
            raise LawError("shape", f"{label} returned a {type(arr).__name__} as {what}, not an "
                           f"array of shape {list(shape)} {text}")
        if tuple(have) != shape:
            raise LawError("shape", f"{label} returned {what} of shape {list(have)}, expected "
                           f"{list(shape)} {text}")
        kind = _real_kind(arr)
        if kind is not None:
            raise LawError("dtype", f"{label} returned a {kind} {what}, not probabilities "
                           f"(real numbers)")
    exact = getattr(getattr(q, "dtype", None), "kind", None) == "O"
    s, c = _for_validation(stop), _for_validation(corr)
    d = drafts
    if single_path:
        s, c, d = s[:, None], c[:, None], d[:, None]
    tol = ROW_SUM_TOL if exact else dtype_tolerance(corr, vocab)  # the returned dtype's
    validate_law(Law(s, c), batch, paths, length, vocab, exact, d, tol=tol, name=label)
    return Law(stop, corr)


def _import_target(text: str) -> Any:
    """The object of a ``module:function`` verifier
    ([`import_user`][spectheory.runtime.errors.import_user])."""
    return import_user(text, "verifier")


def get_verifier(verifier: Any, multi_path: bool = False) -> VerifierSpec:
    """The [`VerifierSpec`][spectheory.registry.VerifierSpec] for a name, ``module:function``, spec
    or callable.

    A function without a spec is read as a single-path verifier, or as a K-path one when
    ``multi_path`` is True (as [`plan`][spectheory.registry.plan] does when more than one path is
    asked for)."""
    multi_path = check_flag(multi_path, "get_verifier: multi_path")
    if isinstance(verifier, VerifierSpec):
        return verifier
    if isinstance(verifier, str):
        table = registered()
        verifier = verifier.strip()  # ' token ' as ' additive ( 1/4 ) ' is read
        if verifier in _REGISTRY:  # listed, or registered unlisted
            return _REGISTRY[verifier]
        spec = _NAME_PARSER[0](verifier) if _NAME_PARSER else None
        if spec is not None:  # ``rule(a, b)``: parameters checked, refused in one line
            return spec
        if ":" in verifier:
            return _as_spec(_import_target(verifier), verifier, multi_path, user=True)
        raise SpectheoryError(f"unknown verifier {verifier!r}; choose from "
                              f"{', '.join(table)}, a parametric rule such as additive(1/4), "
                              f"or give module:function")
    if callable(verifier):
        for spec in registered().values():  # a built-in function keeps its metadata
            if spec.function is verifier:
                return spec
        spec = _as_spec(verifier, _callable_name(verifier), multi_path)
        if spec.function is verifier:  # a bare function: user code, called through call_user
            spec = dataclasses.replace(spec, function=GuardedFunction(verifier, spec.name))
        return spec
    raise SpectheoryError(f"a verifier must be a name, module:function or a function, not "
                          f"{type(verifier).__name__}")


def check_drafting_paths(drafting: str, paths: int) -> None:
    """Refuse K = ``paths`` paths under a scheme that defines fewer (`DRAFTING_MAX_PATHS`),
    in one line naming both."""
    cap = DRAFTING_MAX_PATHS.get(drafting)
    if cap is not None and paths > cap:
        raise SpectheoryError(f"the {drafting} drafting scheme drafts at most {cap} paths "
                              f"(the draft's most probable token and one companion; SpecHub, "
                              f"arXiv 2411.05289), not {paths}; use --paths {cap} or less")


def hub_tokens(q_rows):
    """The hub argmax_x q(x) of each row, ties to the smallest token id: q_rows [..., V] ->
    [...] int64 (torch long / numpy int64). The ``hub`` drafting scheme drafts it first (SpecHub,
    Sun et al., arXiv 2411.05289)."""
    if B.is_torch(q_rows):
        return q_rows.argmax(dim=-1)  # the first maximal index
    import numpy as np

    return np.argmax(q_rows, axis=-1).astype(np.int64)


class Plan(NamedTuple):
    """What the engine runs: the verifier, K and the drafting scheme."""

    spec: VerifierSpec
    paths: int
    drafting: str


def plan(verifier: Any, paths: int | None = None, drafting: str | None = None) -> Plan:
    """Resolve (verifier, paths, drafting), with the defaults: K = 1 and the verifier's own drafting
    scheme. A function without a spec is a K-path verifier when ``paths > 1`` and a single-path one
    otherwise. A single-path verifier takes K = 1 only (``block-first`` / ``token-first`` run block
    / token verification on the first of K paths). Asking for a drafting scheme the verifier is not
    designed for is allowed (that is how lossiness under the wrong scheme is shown) and issues a
    [`DraftingWarning`][spectheory.registry.DraftingWarning]. K beyond what the scheme defines
    (``hub``: K <= 2, `DRAFTING_MAX_PATHS`) is refused."""
    if paths is None:
        paths = 1
    if isinstance(paths, bool) or not isinstance(paths, numbers.Integral) or paths < 1:
        raise SpectheoryError(f"paths = {_repr_cut(paths, 40)} must be a positive integer")
    paths = int(paths)  # a numpy integer too, as the LPs take it
    spec = get_verifier(verifier, multi_path=paths > 1)
    if drafting is not None and (not isinstance(drafting, str) or drafting not in DRAFTING):
        raise SpectheoryError(f"unknown drafting scheme {_repr_cut(drafting, 40)}; choose from "
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
           "TREE_DRAFTING",
           "UserVerifier", "VerifierSpec", "check_drafting_paths", "check_user_law",
           "get_verifier", "hub_tokens", "plan", "register", "registered", "set_name_parser",
           "verifier", "verifier_names"]
