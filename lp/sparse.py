"""A linear program held as sparse triplets, solved by HiGHS, by cvxpy, or exactly.

Every LP in :mod:`lp` is put in one standard form,

    maximise  c.x + offset   subject to   A_ub x <= b_ub,   A_eq x = b_eq,   x >= 0,

with the constraint matrices given as COO triplets (row, column, value) built by vectorised
numpy from the sequence-tree arrays (no Python object per variable). The same triplets feed

* HiGHS directly (``scipy.optimize.linprog(method="highs")``, scipy's bundled HiGHS),
* cvxpy (``x = cp.Variable(n, nonneg=True)`` with the same scipy.sparse matrices; solved by
  cvxpy's HiGHS interface, or Clarabel when HiGHS is not installed),
* exact rational arithmetic: :meth:`SparseLP.check_certificate` verifies a rational primal point
  and a rational dual point (feasibility of both and equal objectives, LP duality) with
  :class:`fractions.Fraction` entries, and :meth:`SparseLP.solve_sympy` finds both with sympy's
  rational simplex on tiny problems.

Dual (used by the certificates): minimise b_eq.y + b_ub.lam + offset subject to
A_eq^T y + A_ub^T lam >= c, lam >= 0, y free. Weak duality makes a matching pair optimal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from spectheory import limits
from spectheory.errors import SizeLimitError, TimeLimitError
from spectheory.tree import human_bytes

from .result import LPError

#: Most LP variables a float solve may have (HiGHS needs roughly 150 bytes per nonzero);
#: environment variable SPECTHEORY_MAX_LP_VARIABLES (read on use, :func:`lp_limit`).
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


def check_lp_size(variables: int, nonzeros: int, what: str, limit: int | None = None,
                  mode: str = "float", formula: str = "") -> None:
    """Refuse an LP with more than ``limit`` variables before anything big is allocated."""
    if limit is None:
        limit = lp_limit(mode)
    if variables > limit:
        need = human_bytes(nonzeros * BYTES_PER_NONZERO)
        raise SizeLimitError(
            f"{what}: {formula + ' = ' if formula else ''}{variables:,} LP variables exceed the "
            f"{mode} limit of {limit:,} by {variables - limit:,} ({variables / limit:.1f}x; "
            f"{nonzeros:,} nonzeros, about {need} of memory); use a smaller vocabulary, block "
            f"length or number of paths, or raise the limit with --max-sequences")


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
    #: tolerance (1e-7) and make large instances look infeasible.
    col_scale: Any = None
    #: The same scale as exact Fractions (exact LPs): lets :func:`solve_exact_via_highs` round
    #: x / scale (conditional probabilities, small denominators) instead of x itself.
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

        scale = (np.ones(self.n) if self.col_scale is None
                 else np.asarray(self.col_scale, dtype=np.float64))
        scale = np.where(scale > 0, scale, 1.0)

        def mat(block, m):
            r, col, v, b = block
            v = np.asarray(v, dtype=np.float64) * scale[col]
            rmax = np.zeros(m)
            np.maximum.at(rmax, r, np.abs(v))
            rmax = np.where(rmax > 0, rmax, 1.0)
            A = sp.csr_matrix((v / rmax[r], (r, col)), shape=(m, self.n))
            return A, np.asarray(b, dtype=np.float64) / rmax, rmax

        A_ub, b_ub, r_ub = mat(self.ub, self.m_ub)
        A_eq, b_eq, r_eq = mat(self.eq, self.m_eq)
        self._scale, self._row_scale = scale, (r_ub, r_eq)
        return np.asarray(self.c, dtype=np.float64) * scale, A_ub, b_ub, A_eq, b_eq

    def solve(self, solver: str | None = None):
        """Float solve; returns (x, optimum including offset, status, solver name)."""
        solver = solver or DEFAULT_SOLVER
        if solver == "highs":
            return self.solve_highs()
        if solver == "cvxpy":
            return self.solve_cvxpy()
        raise LPError(f"unknown LP solver {solver!r}; choose from {', '.join(SOLVERS)}")

    def solve_highs(self):
        from scipy.optimize import linprog

        c, A_ub, b_ub, A_eq, b_eq = self.matrices()
        left = _time_left("the HiGHS solve")
        options = {} if left is None else {"time_limit": max(left, 0.01)}
        res = linprog(-c, A_ub=A_ub if self.m_ub else None, b_ub=b_ub if self.m_ub else None,
                      A_eq=A_eq if self.m_eq else None, b_eq=b_eq if self.m_eq else None,
                      bounds=(0, None), method="highs", options=options)
        if res.status == 1 and left is not None:  # HiGHS stopped at the time limit
            limits.check_time(" (in the HiGHS solve)")
            raise TimeLimitError(f"HiGHS stopped at its time limit ({res.message}); stopped "
                                 "with no result: raise --time-limit or use a smaller instance")
        if res.status != 0:
            what = {2: "infeasible", 3: "unbounded"}.get(res.status, "failed")
            raise LPError(f"HiGHS: the LP is {what} (status {res.status}: {res.message})")
        # duals of the max problem in the original (unscaled) rows: y = -marginal / row scale
        self.last_duals = (-res.eqlin.marginals / self._row_scale[1] if self.m_eq else np.zeros(0),
                           -res.ineqlin.marginals / self._row_scale[0] if self.m_ub
                           else np.zeros(0))
        return res.x * self._scale, float(-res.fun) + float(self.offset), "optimal", "highs"

    def solve_cvxpy(self):
        import cvxpy as cp

        c, A_ub, b_ub, A_eq, b_eq = self.matrices()
        x = cp.Variable(self.n, nonneg=True)
        cons = []
        if self.m_ub:
            cons.append(A_ub @ x <= b_ub)
        if self.m_eq:
            cons.append(A_eq @ x == b_eq)
        prob = cp.Problem(cp.Maximize(c @ x), cons)
        backend = "HIGHS" if "HIGHS" in cp.installed_solvers() else "CLARABEL"
        left = _time_left("the cvxpy solve")
        kw = {} if left is None else {"time_limit": max(left, 0.01)}
        try:
            prob.solve(solver=backend, **kw)
        except cp.error.SolverError as exc:
            limits.check_time(" (in the cvxpy solve)")
            raise LPError(f"cvxpy ({backend}): solver failed: "
                          f"{' '.join(str(exc).split())}") from None
        limits.check_time(" (in the cvxpy solve)")
        if prob.status not in (cp.OPTIMAL,):
            raise LPError(f"cvxpy ({backend}): the LP is {prob.status}")
        return (np.asarray(x.value) * self._scale, float(prob.value) + float(self.offset), prob.status,
                f"cvxpy-{backend.lower()}")

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
        objectives). Raises :class:`LPError` naming the first failed check.
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
            raise LPError(f"certificate: equality row {bad[0]} violated ({ax[bad[0]]} != "
                          f"{self.eq[3][bad[0]]})")
        ax = self._apply(self.ub, x, self.m_ub)
        bad = np.flatnonzero(ax > self.ub[3])
        if len(bad):
            raise LPError(f"certificate: inequality row {bad[0]} violated ({ax[bad[0]]} > "
                          f"{self.ub[3][bad[0]]})")
        if any(v < 0 for v in lam):
            raise LPError("certificate: a dual multiplier of an inequality is negative")
        aty = self._apply_t(self.eq, y_eq) + self._apply_t(self.ub, lam)
        bad = np.flatnonzero(aty < self.c)
        if len(bad):
            raise LPError(f"certificate: dual constraint of variable {bad[0]} violated")
        primal = sum(self.c * x, Fraction(0))
        dual = sum(self.eq[3] * y_eq, Fraction(0)) + sum(self.ub[3] * lam, Fraction(0))
        if primal != dual:
            raise LPError(f"certificate: primal objective {primal} != dual objective {dual}")
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
        is certified separately (:meth:`solve_sympy`)."""
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
        self.solve_highs()
        opt, last = first_certificate(self, lambda den: [xs], *self.last_duals)
        if opt is None:
            raise LPError(f"sympy primal found, but no exact dual certificate ({last})")
        return xs, opt


def rationalize(values, max_denominator: int) -> np.ndarray:
    """Nearest fractions with denominator <= max_denominator (continued fractions)."""
    out = np.empty(len(values), dtype=object)
    out[:] = [Fraction(float(v)).limit_denominator(max_denominator) for v in values]
    return out


#: Denominator caps tried when rounding a float solution to fractions.
DENOMINATORS = (10**3, 10**4, 10**5, 10**6, 10**8)


def first_certificate(lp: SparseLP, primals, y_eq, lam):
    """For each cap in :data:`DENOMINATORS`, try the candidate primal points ``primals(cap)``
    with the float duals rounded to that cap; return (optimum, None) for the first pair that
    :meth:`SparseLP.check_certificate` verifies exactly, else (None, the last failure)."""
    last = None
    lam = np.maximum(lam, 0.0)
    for den in DENOMINATORS:
        for xr in primals(den):
            try:
                return lp.check_certificate(xr, rationalize(y_eq, den),
                                            rationalize(lam, den)), None
            except LPError as exc:
                last = exc
    return None, last


def solve_exact_via_highs(lp: SparseLP, sympy_primal: bool = True):
    """Exact optimum of an exact LP from a float HiGHS solve: the float primal and dual points are
    rounded to nearby fractions (denominators up to 10^3 .. 10^8; the primal also as x / scale
    times the exact scale) and kept only once :meth:`SparseLP.check_certificate` has verified
    them exactly; when no rounding of the primal verifies, sympy's rational simplex supplies the
    primal point (tiny LPs only). Returns (optimum, how) or raises :class:`LPError`."""
    x, _, _, _ = lp.solve_highs()
    x = np.maximum(x, 0)
    y_eq, lam = lp.last_duals

    def rounded(den):
        if lp.exact_col_scale is not None:
            scale = np.asarray(lp.col_scale, dtype=np.float64)
            yield rationalize(x / np.where(scale > 0, scale, 1.0), den) * lp.exact_col_scale
        yield rationalize(x, den)

    opt, last = first_certificate(lp, rounded, y_eq, lam)
    if opt is not None:
        return opt, "rounded"
    if sympy_primal:
        try:
            xs, _ = lp.solve_sympy_primal()
        except SizeLimitError as exc:
            raise LPError(f"no exact certificate: the float solution rounded to fractions with "
                          f"denominators up to 10^8 does not verify ({last}), and the fallback "
                          f"is refused ({exc})") from None
        opt, last = first_certificate(lp, lambda den: [xs], y_eq, lam)
        if opt is not None:
            return opt, "sympy-primal"
    raise LPError(f"no exact certificate found from the float solution ({last})")


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
