"""The result record every LP in [`spectheory.lp`][spectheory.lp] returns, and the LP error type.

Every ``optimum`` is in block-efficiency units, E[tau + 1] (tokens produced per target call): an
LP whose natural objective is E[tau] reports that value plus one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from spectheory.runtime.errors import SpectheoryError


class LPError(SpectheoryError):
    """A solve that did not end at a certified optimum: a solver failure (every LP here is feasible
    and bounded by construction, so "infeasible" from a solver is a numerical failure), an
    uncertified float point, an exact certificate not found, or an optimum outside its
    independent bounds (`spectheory.lp.trust.UntrustedLPError`)."""


@dataclass
class LPResult:
    """One solved problem.

    ``problem``: "node-budget", "direct", "coupling", "multipath" or "selection"; ``paths``: K, the
    number of drafted paths; ``optimum``: E[tau + 1] at the optimum (a `fractions.Fraction` when the
    solve was exact, else a float); ``solver``: which route produced it (``highs``, ``cvxpy``,
    ``closed-form``, ``exact-certificate``, ``sympy``, ...); ``status``: ``optimal`` (or the
    solver's wording of it); ``variables``/``constraints``: problem size as solved (constraint rows,
    not counting the sign bounds x >= 0); ``seconds``: wall time of build + solve. ``details`` holds
    extra, problem-specific facts (not part of [`to_json`][spectheory.lp.result.LPResult.to_json]).
    """

    problem: str
    paths: int
    optimum: Any
    solver: str
    status: str
    variables: int
    constraints: int
    seconds: float
    details: dict = field(default_factory=dict, repr=False)

    @property
    def exact(self) -> bool:
        return isinstance(self.optimum, Fraction)

    def to_json(self) -> dict:
        """Exactly the keys problem, paths, optimum, solver, status, variables, constraints,
        seconds; the optimum is a fraction string ("20/9") when exact, else a float."""
        return {
            "problem": self.problem,
            "paths": int(self.paths),
            "optimum": str(self.optimum) if self.exact else float(self.optimum),
            "solver": self.solver,
            "status": self.status,
            "variables": int(self.variables),
            "constraints": int(self.constraints),
            "seconds": float(self.seconds),
        }

    def summary(self) -> str:
        """One line: the optimum (with the dual bound's gap of a float certificate, and the
        tightest independent bounds it was checked against), solver, status, size and time."""
        opt = (f"{self.optimum} (= {float(self.optimum):.10f})" if self.exact
               else f"{float(self.optimum):.10f}")
        cert = self.details.get("float_certificate")
        if cert is not None:
            opt += f" (dual bound {cert['dual_bound']:.10f})"
        bounds = self.details.get("bounds")
        checks = ""
        if bounds and bounds["lower"] is not None and bounds["upper"] is not None:
            lo, hi = float(bounds["lower"].value), float(bounds["upper"].value)
            checks = f"; within the independent bounds [{lo:.10f}, {hi:.10f}]"
            def printed(x):  # the values as the line shows them (an ulp apart: the same)
                return float(f"{x:.10f}")

            if not printed(lo) <= printed(float(self.optimum)) <= printed(hi):  # a float
                # solve's tolerance: 1.7500000600 "within [1.7500000100, 1.7500000100]" read as
                # a contradiction (the tolerance as `spectheory.lp.trust.checked` records it)
                tol = bounds.get("tolerance")
                checks += (" to the float solver's tolerance" + (
                    f" (the check allows {tol:g} x max(1, |bound|))" if tol is not None else ""))
        return (f"{self.problem} LP, K = {self.paths}: optimum E[tau+1] = {opt}; solver "
                f"{self.solver}, status {self.status}{checks}; {self.variables:,} variables, "
                f"{self.constraints:,} constraints; {self.seconds:.3f} s")
