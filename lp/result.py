"""The result record every LP in :mod:`lp` returns, and the LP error type.

Every ``optimum`` is in block-efficiency units, E[tau + 1] (tokens produced per target call): an
LP whose natural objective is E[tau] reports that value plus one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from spectheory.errors import SpectheoryError


class LPError(SpectheoryError):
    """A solve that did not end at a certified optimum (infeasible, unbounded, solver failure)."""


@dataclass
class LPResult:
    """One solved problem.

    ``problem``: "node-budget", "direct", "coupling", "multipath" or "selection"; ``paths``: K, the number of
    drafted paths; ``optimum``: E[tau + 1] at the optimum (a :class:`fractions.Fraction` when the
    solve was exact, else a float); ``solver``: which route produced it (``highs``, ``cvxpy``,
    ``closed-form``, ``exact-certificate``, ``sympy``, ...); ``status``: ``optimal`` (or the
    solver's wording of it); ``variables``/``constraints``: problem size as solved (constraint
    rows, not counting the sign bounds x >= 0); ``seconds``: wall time of build + solve.
    ``details`` holds extra, problem-specific facts (not part of :meth:`to_json`).
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
        opt = (f"{self.optimum} (= {float(self.optimum):.10f})" if self.exact
               else f"{float(self.optimum):.10f}")
        return (f"{self.problem} LP, K = {self.paths}: optimum E[tau+1] = {opt}; solver "
                f"{self.solver}, status {self.status}; {self.variables:,} variables, "
                f"{self.constraints:,} constraints; {self.seconds:.3f} s")
