"""A linear program held as sparse triplets, solved by HiGHS, by cvxpy, or exactly.

Every LP in [`spectheory.lp`][spectheory.lp] is put in one standard form,

    maximise  c.x + offset   subject to   A_ub x <= b_ub,   A_eq x = b_eq,   x >= 0,

with the constraint matrices given as COO triplets (row, column, value) built by vectorised
numpy from the sequence-tree arrays (no Python object per variable). The same triplets feed

* HiGHS directly (``scipy.optimize.linprog(method="highs")``, scipy's bundled HiGHS),
* cvxpy (``x = cp.Variable(n, nonneg=True)`` with the same scipy.sparse matrices; solved by
  cvxpy's HiGHS interface, or Clarabel when HiGHS is not installed),
* exact rational arithmetic:
  [`SparseLP.check_certificate`][spectheory.lp.sparse.SparseLP.check_certificate] verifies a
  rational primal point and a rational dual point (feasibility of both and equal objectives, LP
  duality) with `fractions.Fraction` entries, and
  [`SparseLP.solve_sympy`][spectheory.lp.sparse.SparseLP.solve_sympy] finds both with sympy's
  rational simplex on tiny problems.

Dual (used by the certificates): minimise b_eq.y + b_ub.lam + offset subject to
A_eq^T y + A_ub^T lam >= c, lam >= 0, y free. Weak duality makes a matching pair optimal.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from spectheory.runtime import limits
from spectheory.runtime.errors import MissingExtraError, SizeLimitError, TimeLimitError
from spectheory.runtime.limits import about_digits, check_memory, human_count, ratio
from spectheory.runtime.sizes import human_bytes

from .result import LPError

#: Most LP variables a float solve may have (HiGHS needs roughly 150 bytes per nonzero); environment
#: variable SPECTHEORY_MAX_LP_VARIABLES (read on use, [`lp_limit`][spectheory.lp.sparse.lp_limit]).
MAX_LP_VARIABLES = limits.ENV_LIMITS["SPECTHEORY_MAX_LP_VARIABLES"]
#: Most variables for an exact (Fraction) certificate (SPECTHEORY_MAX_EXACT_LP_VARIABLES).
MAX_EXACT_LP_VARIABLES = limits.ENV_LIMITS["SPECTHEORY_MAX_EXACT_LP_VARIABLES"]
#: Most variables for sympy's dense rational simplex (SPECTHEORY_MAX_SYMPY_LP_VARIABLES).
MAX_SYMPY_LP_VARIABLES = limits.ENV_LIMITS["SPECTHEORY_MAX_SYMPY_LP_VARIABLES"]

_LIMIT_ENV = {"float": "SPECTHEORY_MAX_LP_VARIABLES", "exact": "SPECTHEORY_MAX_EXACT_LP_VARIABLES",
              "sympy": "SPECTHEORY_MAX_SYMPY_LP_VARIABLES"}


def lp_limit(mode: str = "float") -> int:
    """Default variable limit of a float, exact or sympy solve (environment, validated on use)."""
    return limits.env_limit(_LIMIT_ENV[mode])


def _time_left(what: str) -> float | None:
    """Seconds left under ``--time-limit`` (None: no limit); raises when none are left."""
    left = limits.remaining()
    if left is not None and left <= 0:
        limits.check_time(f" (before {what})")
    return left
#: Bytes per nonzero a float solve needs (triplets, CSR copies, HiGHS' own copies and presolve).
BYTES_PER_NONZERO = 150

SOLVERS = ("highs", "cvxpy")
#: Default float route: direct HiGHS was faster than cvxpy in benchmarks/bench_lp.py at every
#: size measured (docs/benchmarks.md, LP section).
DEFAULT_SOLVER = "highs"
#: HiGHS attempts of a float solve, in order (scipy ``linprog`` method and options): the first whose
#: point passes [`SparseLP.float_certificate`][spectheory.lp.sparse.SparseLP.float_certificate] is
#: the answer. Presolve comes first (fastest); it has declared feasible but badly scaled LPs
#: infeasible (the direct LP with many paths), which the later attempts solve.
HIGHS_ATTEMPTS = (("highs", {}), ("highs", {"presolve": False}), ("highs-ipm", {}),
                  ("highs-ipm", {"presolve": False}))
#: Largest primal violation of a certified float point, per row scaled to largest
#: |coefficient x variable bound| 1 (HiGHS' own feasibility tolerance is 1e-7).
PRIMAL_TOL = 1e-6
#: Largest |dual bound - objective| of a certified float point, times max(1, |objective|). The
#: dual bound adds HiGHS' dual infeasibilities (tolerance 1e-7 each) times the variables' bounds,
#: so a sound optimum can show a few 1e-7 (3.4e-7 on the multipath relaxation, V = 4, L = 6).
GAP_TOL = 1e-6


@contextlib.contextmanager
def _quiet_stdout():
    """Send what C extensions write to file descriptor 1 to the null device for the duration
    (cvxpy's HiGHS interface prints a licence banner there, which would corrupt ``--json``)."""
    import os
    import sys

    try:
        sys.stdout.flush()
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
        saved = os.dup(fd)
    except (OSError, ValueError, AttributeError):  # no real descriptor: nothing to protect
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def check_lp_size(variables: int, nonzeros: int, what: str, limit: int | None = None,
                  mode: str = "float", formula: str = "") -> None:
    """Refuse an LP with more than ``limit`` variables before anything big is allocated
    (``limit``: None for the default, else a whole number in 1..MAX_LIMIT)."""
    from ._guards import check_limit

    limit = check_limit(limit)
    if limit is None:
        limit = lp_limit(mode)
    if variables > limit:
        need = human_bytes(nonzeros * BYTES_PER_NONZERO)
        raise SizeLimitError(
            f"{what}: {formula + ' = ' if formula else ''}{human_count(variables)} LP variables "
            f"exceed the {mode} limit of {limit:,} by {human_count(variables - limit)} "
            f"({ratio(variables, limit)}; {human_count(nonzeros)} nonzeros, about {need} of "
            "memory); use a smaller vocabulary, block length or number of paths, or raise the "
            + ("limit with --max-sequences" if mode != "sympy" else
               f"limit with the environment variable {_LIMIT_ENV[mode]} (--max-sequences does "
               f"not raise it)"))
    check_memory(nonzeros * BYTES_PER_NONZERO, f"{what}: {human_count(variables)} LP variables "
                 f"and {human_count(nonzeros)} nonzeros", "use a smaller vocabulary, block length "
                 "or number of paths")  # under the variable limit, still past the machine


def _frac(v) -> Fraction:
    if isinstance(v, Fraction):
        return v
    if isinstance(v, (int, np.integer)):
        return Fraction(int(v))
    return Fraction(v)  # sympy Rational or float (exact binary value)


def _object(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = [_frac(v) for v in values]
    return out


@dataclass
class SparseLP:
    """maximise c.x + offset s.t. A_ub x <= b_ub, A_eq x = b_eq, x >= 0 (COO triplets).

    Values are float64 arrays, or object arrays of Fractions for an exact LP.
    """

    n: int
    c: Any
    ub: tuple  # (rows, cols, vals, b)
    eq: tuple  # (rows, cols, vals, b)
    offset: Any = 0
    #: Optional positive column scale for float solves: the solver sees x' = x / col_scale.
    #: Builders pass a natural magnitude of each variable (a path probability), since raw
    #: probabilities of deep sequences (1e-8 and below) sit under HiGHS' absolute feasibility
    #: tolerance (1e-7) and make large instances look infeasible. It must bound the variable at
    #: some optimal point: the float certificate uses it as the variable's upper bound
    #: ([`upper_bounds`][spectheory.lp.sparse.SparseLP.upper_bounds]).
    col_scale: Any = None
    #: The same scale as exact Fractions (exact LPs): lets
    #: [`solve_exact_via_highs`][spectheory.lp.sparse.solve_exact_via_highs] round x / scale
    #: (conditional probabilities, small denominators) instead of x itself.
    exact_col_scale: Any = None

    # ---------------------------------------------------------------- sizes
    @property
    def m_ub(self) -> int:
        return len(self.ub[3])

    @property
    def m_eq(self) -> int:
        return len(self.eq[3])

    @property
    def constraints(self) -> int:
        return self.m_ub + self.m_eq

    @property
    def nonzeros(self) -> int:
        return len(self.ub[0]) + len(self.eq[0])

    @property
    def exact(self) -> bool:
        return np.asarray(self.c).dtype == object

    # ---------------------------------------------------------------- float routes
    def matrices(self):
        """(c, A_ub, b_ub, A_eq, b_eq) as float64 numpy / scipy.sparse CSR, in the scaled
        variables x' = x / col_scale, with every row divided by its largest |coefficient|
        (row equilibration; empty rows are left alone). The optimum is unchanged."""
        import scipy.sparse as sp

        scale = self.upper_bounds()

        def mat(block, m):
            r, col, v, b = block
            v = np.asarray(v, dtype=np.float64) * scale[col]
            rmax = _row_scales(m, r, v)
            A = sp.csr_matrix((v / rmax[r], (r, col)), shape=(m, self.n))
            rhs = np.asarray(b, dtype=np.float64) / rmax
            if not (np.isfinite(A.data).all() and np.isfinite(rhs).all()):
                raise LPError("the LP's coefficients leave the float64 range once scaled (a "
                              "probability near the subnormal range); use --exact")
            return A, rhs, rmax

        A_ub, b_ub, r_ub = mat(self.ub, self.m_ub)
        A_eq, b_eq, r_eq = mat(self.eq, self.m_eq)
        self._scale, self._row_scale = scale, (r_ub, r_eq)
        return np.asarray(self.c, dtype=np.float64) * scale, A_ub, b_ub, A_eq, b_eq

    def upper_bounds(self) -> np.ndarray:
        """u >= 0 with x*_j <= u_j at some optimal point x*: ``col_scale`` (every builder in
        [`spectheory.lp`][spectheory.lp] passes a probability that bounds its variable: a path or
        outcome probability), 1 where it is absent or not positive (every variable of these LPs is a
        probability)."""
        if self.col_scale is None:
            return np.ones(self.n)
        scale = np.asarray(self.col_scale, dtype=np.float64)
        return np.where(scale > 0, scale, 1.0)

    def float_certificate(self, x, y_eq, lam) -> dict:
        """Check a float primal point ``x`` and dual point (``y_eq``, ``lam``) of the LP as
        stated (original rows and variables), without trusting the solver's status.

        * ``residual``: the largest primal violation, |A_eq x - b_eq| and (A_ub x - b_ub)^+ and
          (-x)^+, each row divided by its largest |coefficient x u_j| (the units the solver
          saw);
        * ``objective``: c.x + offset;
        * ``dual_bound``: b_eq.y + b_ub.lam+ + sum_j u_j (c - A_eq^T y - A_ub^T lam+)_j^+ + offset,
          an upper bound on the optimum for ANY y and lam (weak duality with the bounds 0 <= x*_j <=
          u_j of [`upper_bounds`][spectheory.lp.sparse.SparseLP.upper_bounds]): c.x* = (c - A^T
          y).x* + y.A x*;
        * ``gap``: dual_bound - objective."""
        u = self.upper_bounds()
        x = np.asarray(x, dtype=np.float64)
        lam = np.maximum(np.asarray(lam, dtype=np.float64), 0.0)
        y_eq = np.asarray(y_eq, dtype=np.float64)
        c = np.asarray(self.c, dtype=np.float64)
        aty = np.zeros(self.n)
        worst = float(np.max(np.maximum(-x / u, 0.0), initial=0.0))
        for (r, col, v, b), y, ineq in ((self.eq, y_eq, False), (self.ub, lam, True)):
            m = len(b)
            if not m:
                continue
            r, col = np.asarray(r, dtype=np.int64), np.asarray(col, dtype=np.int64)
            v, b = np.asarray(v, dtype=np.float64), np.asarray(b, dtype=np.float64)
            ax = np.bincount(r, weights=v * x[col], minlength=m)
            rmax = _row_scales(m, r, v * u[col])
            res = (ax - b) / rmax
            worst = max(worst, float(np.max(np.maximum(res, 0.0) if ineq else np.abs(res),
                                            initial=0.0)))
            aty += np.bincount(col, weights=v * y[r], minlength=self.n)
        off = float(self.offset)
        objective = float(c @ x) + off
        dual_bound = (float(np.asarray(self.eq[3], dtype=np.float64) @ y_eq if self.m_eq else 0.0)
                      + float(np.asarray(self.ub[3], dtype=np.float64) @ lam if self.m_ub else 0.0)
                      + float(u @ np.maximum(c - aty, 0.0)) + off)
        return {"objective": objective, "dual_bound": dual_bound,
                "gap": dual_bound - objective, "residual": worst}

    def certified(self, cert: dict) -> str | None:
        """None when a [`float_certificate`][spectheory.lp.sparse.SparseLP.float_certificate] closes
        (residual <= `PRIMAL_TOL`, gap within `GAP_TOL` x max(1, |objective|) either way), else what
        failed."""
        scale = max(1.0, abs(cert["objective"]))
        if not np.isfinite([cert["objective"], cert["dual_bound"], cert["residual"]]).all():
            return "a non-finite objective, bound or residual"
        if cert["residual"] > PRIMAL_TOL:
            return f"primal rows violated by {cert['residual']:.1e} (over {PRIMAL_TOL:g})"
        if abs(cert["gap"]) > GAP_TOL * scale:
            return (f"objective {cert['objective']:.12g} vs dual bound "
                    f"{cert['dual_bound']:.12g} (gap {cert['gap']:.1e}, over {GAP_TOL:g})")
        return None

    def solve(self, solver: str | None = None, certify: bool = True):
        """Float solve; returns (x, optimum including offset, status, solver name). The answer is
        returned only with a closed
        [`float_certificate`][spectheory.lp.sparse.SparseLP.float_certificate]
        (``self.last_certificate``); otherwise [`LPError`][spectheory.lp.result.LPError] names every
        attempt and why it was not trusted. With ``certify=False`` the first point the solver calls
        optimal is returned unchecked (its certificate is still in ``self.last_certificate``: the
        rounds of a cutting-plane loop, whose last point is checked with `recertify`)."""
        solver = solver or DEFAULT_SOLVER
        if solver == "highs":
            return self.solve_highs(certify)
        if solver == "cvxpy":
            return self.solve_cvxpy(certify)
        raise LPError(f"unknown LP solver {solver!r}; choose from {', '.join(SOLVERS)}")

    def _refuse(self, route: str, failures: list):
        raise LPError(
            f"{route} found no trustworthy optimum of this LP ({'; '.join(failures)}); the LP "
            "is feasible and bounded by construction (the verifier that rejects every draft is "
            "a feasible point), so this is a numerical failure of the solver, not an infeasible "
            "problem: try --exact, fewer paths or the other --solver")

    def recertify(self, solver: str | None, solved):
        """``solved`` (the result of ``solve(solver, certify=False)`` on this LP) if its certificate
        closes, else a certified solve with the attempts that remain."""
        if self.certified(self.last_certificate) is None:
            return solved
        first = self.last_certificate["attempt"]
        if (solver or DEFAULT_SOLVER) == "highs":
            return self.solve_highs(after=first)
        return self.solve_cvxpy(after=first)

    def highs_points(self, after: str | None = None):
        """HiGHS' primal and dual points, one per attempt of `HIGHS_ATTEMPTS` that ended
        optimal (no check of the point): yields (label, x, y_eq, lam); ``self.highs_failures``
        lists the attempts that did not end optimal. ``after``: start past the attempt of that
        label."""
        import warnings

        from scipy.optimize import OptimizeWarning, linprog

        c, A_ub, b_ub, A_eq, b_eq = self.matrices()
        self.highs_failures = []
        skip = after is not None
        for method, options in HIGHS_ATTEMPTS:
            label = method + ("" if options.get("presolve", True) else ", no presolve")
            if skip:
                skip = label != after
                continue
            left = _time_left("the HiGHS solve")
            opts = dict(options)
            if left is not None:
                opts["time_limit"] = max(left, 0.01)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OptimizeWarning)
                res = limits.interruptible(  # signals are handled while HiGHS solves
                    linprog, -c, A_ub=A_ub if self.m_ub else None,
                    b_ub=b_ub if self.m_ub else None,
                    A_eq=A_eq if self.m_eq else None, b_eq=b_eq if self.m_eq else None,
                    bounds=(0, None), method=method, options=opts)
            if res.status == 1 and left is not None:  # HiGHS stopped at the time limit
                limits.check_time(" (in the HiGHS solve)")
                raise TimeLimitError(f"HiGHS stopped at its time limit ({res.message}); stopped "
                                     "with no result: raise --time-limit or use a smaller "
                                     "instance")
            if res.status != 0 or res.x is None:
                what = {2: "infeasible", 3: "unbounded"}.get(res.status, "failed")
                self.highs_failures.append(f"{label}: reported {what} (status {res.status}: "
                                           f"{' '.join(str(res.message).split())})")
                continue
            # duals of the max problem in the original (unscaled) rows: y = -marginal / row scale
            y_eq = (-res.eqlin.marginals / self._row_scale[1] if self.m_eq else np.zeros(0))
            lam = (-res.ineqlin.marginals / self._row_scale[0] if self.m_ub else np.zeros(0))
            yield label, res.x * self._scale, y_eq, lam

    def solve_highs(self, certify: bool = True, after: str | None = None):
        """HiGHS through scipy, tried as `HIGHS_ATTEMPTS` in order (presolve on, then off, then the
        interior-point method): the first point whose
        [`float_certificate`][spectheory.lp.sparse.SparseLP.float_certificate] closes is returned.
        Badly scaled rows (probabilities from 1 down to 1e-30 in one row) can make HiGHS drop
        coefficients under 1e-9 or its presolve declare a feasible LP infeasible; such attempts are
        passed over, and when none is left the solve is refused."""
        failures = []
        for label, x, y_eq, lam in self.highs_points(after):
            cert = self.float_certificate(x, y_eq, lam)
            why = self.certified(cert)
            if why is None or not certify:
                self.last_duals = (y_eq, lam)
                self.last_certificate = dict(cert, attempt=label)
                return x, cert["objective"], "optimal", "highs"
            failures.append(f"{label}: not certified, {why}")
        self._refuse("HiGHS", self.highs_failures + failures)

    def solve_cvxpy(self, certify: bool = True, after: str | None = None):
        """cvxpy with the same scaled matrices (its HiGHS interface, or Clarabel when HiGHS is not
        installed), presolve on and then off; the answer is checked as for HiGHS
        ([`float_certificate`][spectheory.lp.sparse.SparseLP.float_certificate] with cvxpy's dual
        values). Needs the ``[cvxpy]`` extra."""
        try:
            import cvxpy as cp
        except ImportError:
            raise MissingExtraError(
                "solver cvxpy needs the cvxpy package: install spectheory[cvxpy] "
                "(pip install 'spectheory[cvxpy]'), or use the default solver highs") from None
        c, A_ub, b_ub, A_eq, b_eq = self.matrices()
        backend = "HIGHS" if "HIGHS" in cp.installed_solvers() else "CLARABEL"
        attempts = ([{}, {"presolve": "off"}] if backend == "HIGHS" else [{}])
        failures = []
        skip = after is not None
        for extra in attempts:
            label = f"cvxpy ({backend}{', no presolve' if extra else ''})"
            if skip:
                skip = label != after
                continue
            x = cp.Variable(self.n, nonneg=True)
            cons = []
            if self.m_ub:
                cons.append(A_ub @ x <= b_ub)
            if self.m_eq:
                cons.append(A_eq @ x == b_eq)
            prob = cp.Problem(cp.Maximize(c @ x), cons)
            left = _time_left("the cvxpy solve")
            kw = dict(extra)
            if left is not None:
                kw["time_limit"] = max(left, 0.01)
            try:
                with _quiet_stdout():  # highspy prints a banner on file descriptor 1
                    limits.interruptible(prob.solve, solver=backend, **kw)
            except Exception as exc:  # noqa: BLE001 - cvxpy raises SolverError, ValueError, ...
                limits.check_time(" (in the cvxpy solve)")
                failures.append(f"{label}: {type(exc).__name__}: {' '.join(str(exc).split())}"
                                [:300])
                continue
            limits.check_time(" (in the cvxpy solve)")
            if prob.status != cp.OPTIMAL or x.value is None:
                failures.append(f"{label}: ended {prob.status}")
                continue
            lam = (np.asarray(cons[0].dual_value, dtype=np.float64).reshape(-1) / self._row_scale[0]
                   if self.m_ub else np.zeros(0))
            y_eq = (np.asarray(cons[-1].dual_value, dtype=np.float64).reshape(-1)
                    / self._row_scale[1] if self.m_eq else np.zeros(0))
            xs = np.asarray(x.value, dtype=np.float64) * self._scale
            cert = self.float_certificate(xs, y_eq, lam)
            why = self.certified(cert)
            if why is None or not certify:
                self.last_duals = (y_eq, lam)
                self.last_certificate = dict(cert, attempt=label)
                return xs, cert["objective"], prob.status, f"cvxpy-{backend.lower()}"
            failures.append(f"{label}: not certified, {why}")
        self._refuse("cvxpy", failures)

    # ---------------------------------------------------------------- exact routes
    def _apply(self, block, x, m):
        """A x for one block, exactly (object arrays)."""
        r, col, v, _ = block
        out = np.empty(m, dtype=object)
        out[:] = [Fraction(0)] * m
        if len(r):
            np.add.at(out, r, v * x[col])
        return out

    def _apply_t(self, block, y):
        """A^T y for one block, exactly."""
        r, col, v, _ = block
        out = np.empty(self.n, dtype=object)
        out[:] = [Fraction(0)] * self.n
        if len(r):
            np.add.at(out, col, v * y[r])
        return out

    def check_certificate(self, x, y_eq, lam_ub) -> Fraction:
        """Verify an optimality certificate exactly; return the optimum (with offset).

        Checks x >= 0, A_eq x = b_eq, A_ub x <= b_ub (primal feasibility), lam >= 0 and
        A_eq^T y + A_ub^T lam >= c (dual feasibility), and c.x = b_eq.y + b_ub.lam (equal
        objectives). Raises [`LPError`][spectheory.lp.result.LPError] naming the first failed check.
        """
        if not self.exact:
            raise LPError("check_certificate needs an exact LP (Fraction coefficients)")
        x, y_eq, lam = _object(x), _object(y_eq), _object(lam_ub)
        if len(x) != self.n or len(y_eq) != self.m_eq or len(lam) != self.m_ub:
            raise LPError("certificate has the wrong length")
        if any(v < 0 for v in x):
            raise LPError("certificate: primal point has a negative entry")
        ax = self._apply(self.eq, x, self.m_eq)
        bad = np.flatnonzero(ax != self.eq[3])
        if len(bad):
            raise LPError(f"certificate: equality row {bad[0]} violated ({_show(ax[bad[0]])} != "
                          f"{_show(self.eq[3][bad[0]])})")
        ax = self._apply(self.ub, x, self.m_ub)
        bad = np.flatnonzero(ax > self.ub[3])
        if len(bad):
            raise LPError(f"certificate: inequality row {bad[0]} violated ({_show(ax[bad[0]])} > "
                          f"{_show(self.ub[3][bad[0]])})")
        if any(v < 0 for v in lam):
            raise LPError("certificate: a dual multiplier of an inequality is negative")
        aty = self._apply_t(self.eq, y_eq) + self._apply_t(self.ub, lam)
        bad = np.flatnonzero(aty < self.c)
        if len(bad):
            raise LPError(f"certificate: dual constraint of variable {bad[0]} violated")
        primal = sum(self.c * x, Fraction(0))
        dual = sum(self.eq[3] * y_eq, Fraction(0)) + sum(self.ub[3] * lam, Fraction(0))
        if primal != dual:
            gap = LPError(f"certificate: primal objective {_show(primal)} != dual objective "
                          f"{_show(dual)}")
            # both points hold exactly (checked above): the optimum lies between their values
            gap.bounds = (primal + _frac(self.offset), dual + _frac(self.offset))
            raise gap
        return primal + _frac(self.offset)

    def dense(self):
        """Dense exact matrices as lists of Fractions (tiny problems only)."""
        def mat(block, m):
            A = [[Fraction(0)] * self.n for _ in range(m)]
            for r, col, v in zip(*block[:3]):
                A[int(r)][int(col)] += _frac(v)
            return A
        return mat(self.ub, self.m_ub), mat(self.eq, self.m_eq)

    def solve_sympy_primal(self):
        """Optimal primal point by sympy's rational simplex (dense; tiny LPs only), as Fractions.
        Returns (x, c.x + offset); the point is checked for feasibility exactly, its optimality
        is certified separately ([`solve_sympy`][spectheory.lp.sparse.SparseLP.solve_sympy])."""
        import sympy
        from sympy.solvers.simplex import linprog as sym_linprog

        check_lp_size(self.n, self.nonzeros, "sympy rational LP", mode="sympy")
        A_ub, A_eq = self.dense()
        R = sympy.Rational

        def smat(rows, ncols):
            return sympy.Matrix(len(rows), ncols, [R(v.numerator, v.denominator)
                                                   for row in rows for v in row])

        def svec(vals):
            vals = [_frac(v) for v in vals]
            return sympy.Matrix([R(v.numerator, v.denominator) for v in vals])

        kw = {}
        if self.m_ub:
            kw.update(A=smat(A_ub, self.n), b=svec(self.ub[3]))
        else:  # sympy 1.14 fails on A=None with A_eq given: add the trivial row 0.x <= 1
            kw.update(A=sympy.zeros(1, self.n), b=sympy.Matrix([1]))
        if self.m_eq:
            kw.update(A_eq=smat(A_eq, self.n), b_eq=svec(self.eq[3]))
        try:
            _, x = sym_linprog(-svec(self.c), **kw)
        except Exception as exc:  # sympy raises InfeasibleLPError / UnboundedLPError
            raise LPError(f"sympy: LP {type(exc).__name__}: {exc}") from None
        x = _object(x)
        return x, sum(self.c * x, Fraction(0)) + _frac(self.offset)

    def solve_sympy(self):
        """Exact optimum on tiny LPs: sympy's rational simplex gives the primal point, the dual
        point is HiGHS' float dual rounded to fractions, and the pair is verified exactly as a
        certificate. (sympy's own solve of the dual LP is not used: sympy 1.14 returned an
        infeasible "optimum" for free variables and for the split dual of the direct LP.)
        Returns (x, optimum as Fraction)."""
        xs, _ = self.solve_sympy_primal()
        last = "no HiGHS attempt ended optimal"
        for _, _, y_eq, lam in self.highs_points():
            opt, last = first_certificate(self, lambda den: [xs], y_eq, lam)
            if opt is not None:
                return xs, opt
        raise LPError(f"sympy primal found, but no exact dual certificate ({last})")


def rationalize(values, max_denominator: int) -> np.ndarray:
    """Nearest fractions with denominator <= max_denominator (continued fractions)."""
    out = np.empty(len(values), dtype=object)
    out[:] = [Fraction(float(v)).limit_denominator(max_denominator) for v in values]
    return out


#: Denominator caps tried when rounding a float solution to fractions.
DENOMINATORS = (10**3, 10**4, 10**5, 10**6, 10**8)


def first_certificate(lp: SparseLP, primals, y_eq, lam):
    """For each cap in `DENOMINATORS`, try the candidate primal points ``primals(cap)`` with the
    float duals rounded to that cap, as they are and then repaired (`repair_duals`); return
    (optimum, None) for the first pair that
    [`SparseLP.check_certificate`][spectheory.lp.sparse.SparseLP.check_certificate] verifies
    exactly, else (None, the last failure)."""
    last = None
    lam = np.maximum(lam, 0.0)
    for den in DENOMINATORS:
        y_r, lam_r = rationalize(y_eq, den), rationalize(lam, den)
        for xr in primals(den):
            for y in (y_r, None):
                try:
                    if y is None:
                        y = repair_duals(lp, y_r, lam_r)
                    return lp.check_certificate(xr, y, lam_r), None
                except LPError as exc:
                    last = exc
    return None, last


def repair_duals(lp: SparseLP, y_eq, lam):
    """Rounded duals with the multiplier of each equality row r whose coefficients are all
    positive and whose right side is >= 0 (rows sum_b z(omega, b) = P(omega) of an outcome) reset
    to the least value that makes the dual constraints of its variables hold exactly:
    y_r = max_j (c_j - sum_{i != r} a_ij y_i) / a_rj, given the other multipliers. Such a row's
    float multiplier is its scaled multiplier divided by the row's scale P(omega), which for
    weights of 1e-30 is noise that no rounding makes exact; at an optimum y_r equals this least
    value (complementary slackness on the block the outcome emits). Rows sharing a variable with
    another such row are left as rounded. Raises `LPError` when nothing is to repair."""
    r, col, v, b = lp.eq
    r, col = np.asarray(r, dtype=np.int64), np.asarray(col, dtype=np.int64)
    v = np.asarray(v, dtype=object)
    ok = np.ones(lp.m_eq, dtype=bool)
    ok[r[v <= 0]] = False
    ok &= np.array([bi >= 0 for bi in b], dtype=bool)
    sel = ok[r]
    count = np.bincount(col[sel], minlength=lp.n)
    ok[np.unique(r[sel & (count[col] > 1)])] = False
    sel = ok[r]
    if not sel.any():
        raise LPError("certificate: no dual to repair")
    y = _object(y_eq)
    rest = y.copy()
    rest[ok] = Fraction(0)
    need = np.asarray(lp.c, dtype=object) - lp._apply_t(lp.eq, rest) - lp._apply_t(lp.ub,
                                                                                  _object(lam))
    best: dict = {}
    for row, j, a in zip(r[sel], col[sel], v[sel]):
        cand = need[j] / a
        if row not in best or cand > best[row]:
            best[row] = cand
    for row, val in best.items():
        y[row] = val
    return y


def _row_scales(m: int, rows, values) -> np.ndarray:
    """Each of the ``m`` rows' largest |value| (``values`` [nnz] in ``rows`` [nnz]), 1 for an
    empty row and for one whose largest entry is subnormal (a probability of 3e-315): b / rmax
    overflowed to inf there (scipy: "b_ub must not contain values inf")."""
    rmax = np.zeros(m)
    np.maximum.at(rmax, rows, np.abs(values))
    return np.where(rmax >= np.finfo(np.float64).tiny, rmax, 1.0)


def _show(v) -> str:
    """A fraction in a message: as written when short, else its float value and its size (a
    budget of 1e-400 made certificates of 800-digit fractions, printed in full)."""
    text = str(v)
    if len(text) <= 40:
        return text
    digits = len(str(abs(Fraction(v).numerator))) + len(str(Fraction(v).denominator))
    return f"{float(Fraction(v)):.12g} (a fraction of {digits:,} digits)"


def solve_exact_via_highs(lp: SparseLP, sympy_primal: bool = True):
    """Exact optimum of an exact LP from a float HiGHS solve: the float primal and dual points are
    rounded to nearby fractions (denominators up to 10^3 .. 10^8; the primal also as x / scale times
    the exact scale) and kept only once
    [`SparseLP.check_certificate`][spectheory.lp.sparse.SparseLP.check_certificate] has verified
    them exactly; when no rounding of the primal verifies, sympy's rational simplex supplies the
    primal point (tiny LPs only). Returns (optimum, how) or raises
    [`LPError`][spectheory.lp.result.LPError]."""
    duals, last = [], None
    for _, x, y_eq, lam in lp.highs_points():  # each HiGHS attempt that ended optimal
        x = np.maximum(x, 0)
        duals.append((y_eq, lam))

        def rounded(den, x=x):
            if lp.exact_col_scale is not None:
                scale = np.asarray(lp.col_scale, dtype=np.float64)
                yield rationalize(x / np.where(scale > 0, scale, 1.0), den) * lp.exact_col_scale
            yield rationalize(x, den)

        opt, last = first_certificate(lp, rounded, y_eq, lam)
        if opt is not None:
            return opt, "rounded"
    if not duals:
        lp._refuse("HiGHS (for the exact certificate)", lp.highs_failures)
    if sympy_primal:
        try:
            xs, _ = lp.solve_sympy_primal()
        except SizeLimitError as exc:
            raise LPError(f"no exact certificate: the float solutions rounded to fractions with "
                          f"denominators up to 10^8 do not verify ({last}), and the fallback "
                          f"is refused ({exc})") from None
        for y_eq, lam in duals:
            opt, last = first_certificate(lp, lambda den: [xs], y_eq, lam)
            if opt is not None:
                return opt, "sympy-primal"
    bounds = getattr(last, "bounds", None)
    if bounds is not None:  # an exact primal point and an exact dual point that do not meet
        lo, hi = sorted(bounds)
        gap = hi - lo
        shown_gap = (f"{float(gap):.3g}" if float(gap) != 0 else  # past float64's range
                     f"about 10^{about_digits(gap.numerator) - about_digits(gap.denominator)}")
        raise LPError(f"no exact certificate: the float solutions give an exact feasible point "
                      f"of value {_show(lo)} and an exact dual bound {_show(hi)} (the optimum "
                      f"lies between; a gap of {shown_gap}) that no rounding closes: the float "
                      f"solver's tolerances (about 1e-9) are coarser than the gap")
    raise LPError(f"no exact certificate found from the float solutions ({last})")


class Timer:
    def __init__(self):
        self.t0 = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0


def concat_blocks(blocks, exact: bool):
    """Stack constraint blocks [(rows, cols, vals, b), ...] into one (rows renumbered)."""
    rows, cols, vals, bs = [], [], [], []
    base = 0
    for r, col, v, b in blocks:
        rows.append(np.asarray(r, dtype=np.int64) + base)
        cols.append(np.asarray(col, dtype=np.int64))
        vals.append(np.asarray(v, dtype=object if exact else np.float64))
        bs.append(np.asarray(b, dtype=object if exact else np.float64))
        base += len(b)
    if not blocks:
        empty_i = np.zeros(0, dtype=np.int64)
        empty_v = np.zeros(0, dtype=object if exact else np.float64)
        return empty_i, empty_i, empty_v, empty_v
    return (np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
            np.concatenate(bs))
