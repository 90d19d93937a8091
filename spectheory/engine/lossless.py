"""The losslessness checker: the exact verdict on whether a verifier is lossless, and its report.

A verifier is lossless iff the law of its output (the output block, then target sampling, over
``n_tokens`` tokens) equals the target law (Sun et al., arXiv 2403.10444, section 2): exactly, as
rationals, in exact mode; within a tolerance in float mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..runtime import backend as Bk
from ..runtime import limits
from ..runtime.errors import SpectheoryError
from ..inputs.instances import Instance
from ..inputs.models import prefix_from_index
from ..law import law_rounding
from ..registry import plan
from .analysis import _to_py, analyze, analyze_tree, as_result, multi_iteration_law
from .plan import _check_instance
from ..runtime.limits import shown as _repr_cut

#: Largest tolerance the float checker accepts: a TV above this is never "lossless".
MAX_LOSSLESS_TOL = 1e-3


@dataclass
class LosslessReport:
    """Verdict of [`check_lossless`][spectheory.engine.lossless.check_lossless].

    ``lossless`` is True iff the total variation ``tv`` between the output law and the target law
    over ``n_tokens`` tokens is 0 (exact mode) or at most ``tolerance`` (float mode). When it is
    False, ``offending`` is the first output sequence (lexicographic order) whose probability
    differs from the target's by more than the tolerance (or, when no single sequence does, the one
    that differs most), with both probabilities; ``max_difference`` is the largest difference.
    ``instance`` names the instance when the report comes from a battery
    ([`check_lossless_battery`][spectheory.testing.checks.lossless.check_lossless_battery]), which also
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
    return limits.check_real(tol, what, 0.0, MAX_LOSSLESS_TOL, SpectheoryError,
                             f"it must be a finite number in [0, {MAX_LOSSLESS_TOL:g}]")


def check_lossless(verifier, instance: Instance, exact: bool | None = None,
                   tol: float = 1e-12, n_tokens: int | None = None,
                   max_sequences: int | None = None, *, paths: int | None = None,
                   drafting: str | None = None, route: str | None = "auto", sampling=None,
                   draft_sampling=None, backend: str | None = "auto") -> LosslessReport:
    """Exact verdict on whether a verifier is lossless.

    Compares the law of the output block followed by target sampling to L+1 tokens (``n_tokens``
    None, the default) or of the first ``n_tokens`` tokens over repeated iterations (at any
    ``n_tokens``, L+1 included: a lossy rule's second iteration then counts, as in
    [`multi_iteration_law`][spectheory.engine.analysis.multi_iteration_law]) with the target law,
    for K = ``paths`` draft paths under ``drafting`` (default: the verifier's own scheme).

    In exact mode the verdict is exact: lossless iff the two laws are equal as rationals. In float
    mode it is lossless iff TV(output, target) <= ``tol`` (a finite number in [0, 1e-3]), so the
    verdict never says "lossless within t" with a TV above t, and a TV within the rounding of
    the laws the verifier returned
    ([`rounding_resolution`][spectheory.engine.lossless.rounding_resolution] at float64's
    epsilon, or float32's for a verifier returning float32 laws) is refused a "lossy" verdict:
    exact mode (or float64 laws) decides it. A verifier whose law is not a law
    (NaN, negative entries, rows not summing to 1, wrong shapes, floats in exact mode) raises
    [`LawError`][spectheory.law.LawError] and gets no verdict. ``route`` picks the exact route
    ([`analyze`][spectheory.engine.analysis.analyze]; default the fastest available). ``sampling`` /
    ``draft_sampling`` process the target / draft rows first
    ([`analyze`][spectheory.engine.analysis.analyze]): the verdict is then against the processed target's law,
    as an engine serving a request with those parameters must meet it. ``backend``: what the
    float route computes on ([`float_backend`][spectheory.engine.plan.float_backend]; default
    numpy float64 for the verifiers and routes that declare it, torch for the others).
    """
    how = plan(verifier, paths, drafting)
    _check_instance(instance)
    exact = instance.exact if exact is None else exact
    tol = check_tolerance(tol)  # refused even where exact mode does not use it
    if exact:
        tol = 0.0
    V, L = instance.vocab_size, instance.block_length
    if n_tokens is not None and (isinstance(n_tokens, (bool, np.bool_))
                                 or not isinstance(n_tokens, (int, np.integer))
                                 or n_tokens < 1):
        raise SpectheoryError(f"n_tokens = {_repr_cut(n_tokens, 40)} must be a whole number >= 1 (the "
                              f"tokens compared; default L + 1 = {L + 1})")
    with law_rounding() as law_eps:
        out, tgt, tv, N = _laws(instance, how, exact, max_sequences, n_tokens, route, sampling,
                                draft_sampling, backend)
    rep = lossless_report(out, tgt, tv, N, V, exact, tol)
    coarse = law_eps[0] > np.finfo(np.float64).eps  # a law in float32 or coarser
    least = rounding_resolution(N, law_eps[0] if coarse else None)
    if not (exact or rep.lossless) and float(tv) <= least:
        within, remedy = ((f"the rounding of the verifier's {law_eps[1]} law", "compute the law "
                           "in float64 (or in exact mode)") if coarse else
                          ("float64 rounding", "use exact mode (--exact)"))
        raise SpectheoryError(
            f"TV = {float(tv):.3g} is within {within} of 0 (about {least:.1g} over {N} tokens): "
            f"at tolerance {tol:g} a float verdict cannot tell a lossy verifier from rounding; "
            f"{remedy}, or a tolerance of at least {least:.1g}")
    rep.verifier, rep.paths, rep.drafting = how.spec.name, how.paths, how.drafting
    return rep


def _laws(instance, how, exact, max_sequences, n_tokens, route, sampling, draft_sampling,
          backend):
    """(output law, target law, TV, tokens compared) for `check_lossless`."""
    L = instance.block_length
    if n_tokens is None:  # one block, completed by target sampling (an explicit L + 1 iterates)
        res = analyze(instance, how.spec, exact=exact, max_sequences=max_sequences,
                      paths=how.paths, drafting=how.drafting, route=route, sampling=sampling,
                      draft_sampling=draft_sampling, backend=backend)
        out, tgt, tv, N = res.output_law, res.target_law, res.tv_to_target, L + 1
    else:
        out, tgt, tv = multi_iteration_law(instance, how.spec, n_tokens, exact, max_sequences,
                                           paths=how.paths, drafting=how.drafting, route=route,
                                           sampling=sampling, draft_sampling=draft_sampling,
                                           backend=backend)
        N = int(n_tokens)
    return out, tgt, tv, N


def rounding_resolution(n_tokens: int, eps: float | None = None) -> float:
    """The TV below which a float law over ``n_tokens`` tokens cannot be told from rounding:
    8 (N + 1)^2 eps (each sequence's probability a sum of up to N + 1 products of N + 1 factors;
    a generous, not a proved, bound), eps float64's unless given (a verifier returning float32
    laws: float32's). `check_lossless` refuses a float verdict of "lossy" on a TV below it (a
    tolerance under it, such as 0, otherwise calls rounding a loss); exact mode decides such
    cases."""
    return 8 * (n_tokens + 1) ** 2 * (float(np.finfo(np.float64).eps) if eps is None else eps)


def lossless_report(out, tgt, tv, n_tokens: int, vocab_size: int, exact: bool,
                    tol: float = 1e-12) -> LosslessReport:
    """Verdict from an output law and the target law over V**n_tokens sequences (see
    [`check_lossless`][spectheory.engine.lossless.check_lossless]): numpy arrays (float64, or
    Fractions in exact mode) or torch tensors, read as numpy."""
    N, V = n_tokens, vocab_size
    tol = check_tolerance(tol)  # refused even where exact mode does not use it
    if exact:
        tol = 0.0
    out, tgt = as_result(out).reshape(-1), as_result(tgt).reshape(-1)  # numpy, either backend
    diff = Bk.abs(out - tgt)
    if exact:
        bad = np.flatnonzero(diff != 0)
        lossless = len(bad) == 0
        k = int(bad[0]) if len(bad) else None
        worst = max(diff) if len(bad) else Fraction(0)
    else:
        if not bool(np.isfinite(out).all()):  # cannot happen after validate_law; kept as a guard
            raise SpectheoryError("the output law has NaN or infinite entries")
        lossless = bool(float(tv) <= tol)
        worst = float(diff.max()) if diff.size else 0.0
        k = None
        if not lossless:
            over = np.flatnonzero(diff > tol)
            k = int(over[0]) if len(over) else int(np.argmax(diff))
    if lossless:
        return LosslessReport(True, tv, N, exact, tol, max_difference=_to_py(worst))
    return LosslessReport(False, tv, N, exact, tol,
                          offending=prefix_from_index(k, N, V),
                          output_probability=_to_py(out[k]), target_probability=_to_py(tgt[k]),
                          max_difference=_to_py(worst))


def check_lossless_multipath(verifier, instance: Instance, paths: int,
                             drafting: str | None = None, exact: bool | None = None,
                             tol: float = 1e-12, max_sequences: int | None = None,
                             route: str | None = "auto") -> LosslessReport:
    """Same as ``check_lossless(verifier, instance, paths=paths, drafting=drafting, ...)``
    ([`check_lossless`][spectheory.engine.lossless.check_lossless])."""
    return check_lossless(verifier, instance, exact, tol, None, max_sequences, paths=paths,
                          drafting=drafting, route=route)


def check_tree_lossless(verifier, instance: Instance, shape, drafting: str | None = None,
                        exact: bool | None = None, tol: float = 1e-12, route: str = "auto",
                        rows: str = "auto", max_sequences: int | None = None) -> LosslessReport:
    """Exact verdict on whether a verifier is lossless on a drafted tree (as
    [`check_lossless`][spectheory.engine.lossless.check_lossless]: exact mode compares rationals, float mode
    TV <= tol).
    """
    res = analyze_tree(instance, verifier, shape, drafting, exact, route, rows, max_sequences)
    rep = lossless_report(res.output_law, res.target_law, res.tv_to_target,
                          res.block_length + 1, res.vocab_size, res.exact, tol)
    rep.verifier, rep.paths, rep.drafting = res.verifier, res.extra["paths"], \
        res.extra["drafting"]
    return rep


__all__ = ["LosslessReport", "MAX_LOSSLESS_TOL", "check_lossless", "check_lossless_multipath",
           "check_tolerance", "check_tree_lossless", "lossless_report"]
