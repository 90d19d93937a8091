"""Exact losslessness checks of a verifier on a battery of instances, for any test suite.

A verifier (draft-verification rule) is *lossless* when the tokens it outputs, followed by target
sampling, have exactly the target's law: for every output sequence y^{N},

    P(output block, then target sampling, gives y^{N}) = p(y^{N})

(Sun et al., "Block Verification Accelerates Speculative Decoding", arXiv 2403.10444, sec. 2; for K
draft paths, the same with the paths drafted under the verifier's drafting scheme).
[`check_lossless`][spectheory.engine.lossless.check_lossless] decides this exactly on one instance by
enumerating the whole sequence tree; this module runs it on many instances at once:

* [`check_lossless_battery`][spectheory.testing.checks.lossless.check_lossless_battery] returns one
  [`LosslessReport`][spectheory.engine.lossless.LosslessReport] per instance, never raising for a lossy
  verifier or one that returns something that is not a law (``report.law_error``);
* [`assert_lossless`][spectheory.testing.checks.lossless.assert_lossless] raises ``AssertionError``
  naming the instance, the first offending output sequence and both probabilities (or "NOT A LAW"
  and the bad entry), and returns the reports when every instance passes. For pytest:

    ```python
    from spectheory.testing import assert_lossless

    def test_my_verifier():
        assert_lossless(my_verifier)                      # single path, exact battery
        assert_lossless(my_multi_path_verifier, paths=2)  # K = 2 paths
    ```

By default the instances are [`default_battery`][spectheory.testing.checks.battery.default_battery]
(prefix-dependent rows, zeros, p = q at some nodes, one-hot rows, ties; exact rationals), sized for
``paths``.
"""

from __future__ import annotations

from typing import Any, Iterable

from ...runtime.errors import SpectheoryError, as_list
from ...engine.lossless import LosslessReport, check_lossless
from ...inputs.instances import Instance
from ...law import LawError
from ...registry import plan
from .battery import BatteryInstance, default_battery


def _named(instances, paths: int) -> list[tuple[str, Instance]]:
    if instances is None:
        return [(b.name, b.instance) for b in default_battery(paths, exact=True)]
    if isinstance(instances, dict):
        items = list(instances.items())
    else:
        items = []
        for k, x in enumerate(as_list(instances, "instances", "spectheory Instances",
                                      lone=(Instance, BatteryInstance))):
            if isinstance(x, BatteryInstance):
                items.append((x.name, x.instance))
            elif isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], Instance):
                items.append((str(x[0]), x[1]))
            else:
                items.append((f"instance {k}", x))
    for name, inst in items:
        if not isinstance(inst, Instance):
            raise SpectheoryError(f"instance {name!r} is a {type(inst).__name__}, not a "
                                  f"spectheory Instance")
    if not items:
        raise SpectheoryError("no instances to check")
    return items


def check_lossless_battery(verifier: Any, instances: Iterable | None = None, *,
                           paths: int | None = None, drafting: str | None = None,
                           n_tokens: int | None = None, tol: float = 1e-12,
                           exact: bool | None = None, sampling=None,
                           draft_sampling=None) -> list[LosslessReport]:
    """Exact losslessness verdicts of ``verifier`` on every instance, without raising.

    Parameters
    ----------
    verifier : str, VerifierSpec or callable
        A registered name, ``"module:function"``, a spec or a law function
        ([`get_verifier`][spectheory.registry.get_verifier]).
    instances : optional
        An `Instance`, a
        [`BatteryInstance`][spectheory.testing.checks.battery.BatteryInstance], a list of either (or
        of ``(name, instance)`` pairs), or a dict name -> instance. Default: the battery of
        [`default_battery`][spectheory.testing.checks.battery.default_battery] for ``paths``.
    paths, drafting :
        K draft paths (default 1) and their drafting scheme (default: the verifier's own).
    n_tokens : int, optional
        Compare the law of the first ``n_tokens`` generated tokens over repeated iterations
        (default: one block and its target completion, L+1 tokens).
    tol : float
        Float mode: largest total variation still called lossless (finite, in [0, 1e-3]).
    exact : bool, optional
        Exact rationals or float64. Default: exact when the instance is exact, the verifier
        has an exact law and the sampling parameters are rational, float64 otherwise.
    sampling, draft_sampling : optional
        Process the target / draft rows first (`spectheory.inputs.processing`, e.g.
        ``sampling="temperature=0"``): the verdict is against the processed target's law.

    Returns
    -------
    list of LosslessReport
        One per instance, in order, with ``instance`` set to its name. A verifier that returned
        something that is not a law gets ``lossless = False``, ``tv = None`` and the
        [`LawError`][spectheory.law.LawError] in ``law_error``.
    """
    how = plan(verifier, paths, drafting)
    from ...inputs.processing import rational

    ratl = rational(sampling, draft_sampling)  # also refuses bad parameters before any work
    reports = []
    for name, inst in _named(instances, how.paths):
        mode = exact if exact is not None else (inst.exact and how.spec.exact and ratl)
        try:
            rep = check_lossless(how.spec, inst, exact=mode, tol=tol, n_tokens=n_tokens,
                                 paths=how.paths, drafting=how.drafting, sampling=sampling,
                                 draft_sampling=draft_sampling)
        except LawError as exc:
            rep = LosslessReport(False, None, int(n_tokens or inst.block_length + 1), bool(mode),
                                 0.0 if mode else float(tol), verifier=how.spec.name,
                                 paths=how.paths, drafting=how.drafting, law_error=exc)
        rep.instance = name
        reports.append(rep)
    return reports


def _describe(rep: LosslessReport, inst_size: str) -> str:
    where = (f"{rep.verifier} (K = {rep.paths}, {rep.drafting} drafting)" if rep.paths > 1
             else rep.verifier)
    if rep.law_error is not None:
        e = rep.law_error
        return (f"{where}: NOT A LAW ({e.kind}) on instance {rep.instance!r} {inst_size}: {e}")
    tv = str(rep.tv) if rep.exact else f"{float(rep.tv):.6g} > tolerance {rep.tolerance:g}"
    return (f"{where} is LOSSY on instance {rep.instance!r} {inst_size} over {rep.n_tokens} "
            f"tokens: TV = {tv}; first offending output sequence "
            f"{rep.offending}: output probability {rep.output_probability} vs target probability "
            f"{rep.target_probability}")


def assert_lossless(verifier: Any, instances: Iterable | None = None, *,
                    paths: int | None = None, drafting: str | None = None,
                    n_tokens: int | None = None, tol: float = 1e-12,
                    exact: bool | None = None, sampling=None,
                    draft_sampling=None) -> list[LosslessReport]:
    """Raise ``AssertionError`` unless ``verifier`` is lossless on every instance.

    Same parameters as
    [`check_lossless_battery`][spectheory.testing.checks.lossless.check_lossless_battery]. The
    message names the first failing instance, the first offending output sequence (lexicographic
    order) with its output and target probabilities (or "NOT A LAW" with the kind, position and
    value of the bad entry), and lists every failing instance. Returns the reports when all pass.
    """
    named = _named(instances, plan(verifier, paths, drafting).paths)
    reports = check_lossless_battery(verifier, named, paths=paths, drafting=drafting,
                                     n_tokens=n_tokens, tol=tol, exact=exact, sampling=sampling,
                                     draft_sampling=draft_sampling)
    bad = [(rep, inst) for rep, (_, inst) in zip(reports, named) if not rep.lossless]
    if bad:
        rep, inst = bad[0]
        msg = _describe(rep, f"(V = {inst.vocab_size}, L = {inst.block_length})")
        if len(bad) > 1:
            msg += (f"; fails on {len(bad)} of {len(reports)} instances: "
                    + ", ".join(r.instance for r, _ in bad))
        raise AssertionError(msg)
    return reports


__all__ = ["assert_lossless", "check_lossless_battery"]
