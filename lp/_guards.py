"""Argument checks shared by the LP entry points, run before anything is built: each refusal is
one line naming the argument and its value (cut by `spectheory.bounds.shown`)."""

from __future__ import annotations

import numpy as np

from spectheory.bounds import check_paths as bounds_check_paths
from spectheory.bounds import shown
from spectheory.inputs.instances import Instance
from spectheory.inputs.instances import check_instance as inputs_check_instance
from spectheory.runtime import limits
from spectheory.runtime.errors import InstanceError, OptionError, SizeLimitError, is_integer

from .result import LPError

#: Float routes of a solved LP (`spectheory.lp.sparse.SparseLP.solve`).
FLOAT_SOLVERS = ("highs", "cvxpy")
#: Exact routes: HiGHS' point rounded and verified as a certificate, or sympy's simplex.
EXACT_SOLVERS = ("exact-certificate", "sympy")


def check_instance(instance, what: str) -> None:
    """``instance`` must be an [`Instance`][spectheory.inputs.instances.Instance]."""
    if not isinstance(instance, Instance):
        raise InstanceError(f"{what}: instance = {shown(instance)} is not an Instance (a "
                            f"{type(instance).__name__}; load one with st.load_instance or "
                            "build one with st.random_instance)")
    inputs_check_instance(instance, what)  # its structure and rows, once per instance


def check_paths(paths, most: int | None = None) -> int:
    """K: a Python or numpy integer >= 1 (bools, floats and strings refused, never rounded):
    [`spectheory.bounds.check_paths`][spectheory.bounds.check_paths]'s check, its refusal
    raised as an `LPError` with the same line; at most ``most`` where given (the K-path LPs:
    the engine's `spectheory.engine.plan.MAX_PATHS`)."""
    from spectheory.runtime.limits import human_count
    from spectheory.runtime.errors import is_integer

    if most is not None and is_integer(paths) and paths > most:  # before the closed forms'
        # bound: 10^20 was told "past 2^63 - 1", not the LPs' own range
        raise LPError(f"paths = {human_count(paths)} is out of range 1..{most} for the K-path "
                      "LPs (as for the K-path engine and --paths: the K! orderings of a joint "
                      "outcome are counted in int64)")
    try:
        return bounds_check_paths(paths)
    except OptionError as err:
        raise LPError(str(err)) from None


def check_flag(value, name: str) -> bool:
    """A switch such as ``exact``: True or False (a numpy bool too), never a truthy string."""
    if not isinstance(value, (bool, np.bool_)):
        raise LPError(f"{name} = {shown(value)} must be True or False")
    return bool(value)


def check_limit(limit) -> int | None:
    """An LP variable limit: None (the default) or a whole number in 1..MAX_LIMIT."""
    if limit is None:
        return None
    if not is_integer(limit) \
            or not 1 <= int(limit) <= limits.MAX_LIMIT:
        raise SizeLimitError(f"limit = {shown(limit)} must be a whole number of LP variables in "
                             f"1..{limits.MAX_LIMIT:.0e}")
    return int(limit)


def check_solver(solver, exact: bool, floats=FLOAT_SOLVERS, exacts=EXACT_SOLVERS) -> None:
    """``solver``: None (the default route) or one of the routes of the mode."""
    routes = exacts if exact else floats
    if solver is None or (isinstance(solver, str) and solver in routes):
        return
    other = floats if exact else exacts
    mode = "an exact" if exact else "a float"
    hint = (f" ({'a float' if exact else 'an exact'} route: "
            f"{'drop exact=True' if exact else 'pass exact=True'})"
            if isinstance(solver, str) and solver in other else "")
    raise LPError(f"unknown LP solver {shown(solver)} for {mode} solve{hint}; choose from "
                  f"{', '.join(routes)} (or None)")


#: Bytes an LP entry point holds per entry of the instance's tables while it reads them (the
#: instance's conversion to float64 or rationals and the levels read from it: two copies; a
#: Fraction with its numerator and denominator about 120 bytes).
TABLE_ENTRY_BYTES = {False: 2 * 8, True: 2 * 120}


def check_table_memory(instance, exact: bool, what: str) -> None:
    """Refuse, before the tables are read, an instance whose conditionals (the target's
    sum_{j=0..L} V^j rows of V entries, the draft's path probabilities) would not fit the
    machine's memory (`spectheory.runtime.limits.check_memory`): an LP's variable count can be
    small (V = 1000, L = 2: 10^6 reduced node-budget variables) while its tables take 8 GB."""
    V, L = instance.vocab_size, instance.block_length
    entries = sum(V ** j for j in range(L + 1)) * (V + 1)
    limits.check_memory(entries * TABLE_ENTRY_BYTES[bool(exact)],
                        f"{what}: reading the instance's tables (V = {V}, L = {L}: "
                        f"{limits.human_count(entries)} entries)",
                        "use a smaller vocabulary or block length")


def check_common(instance, what: str, exact=False, limit=None, solver=None, floats=FLOAT_SOLVERS,
                 exacts=EXACT_SOLVERS) -> bool:
    """The checks every LP entry point makes first; returns ``exact`` as a bool."""
    check_instance(instance, what)
    exact = check_flag(exact, "exact")
    check_limit(limit)
    check_solver(solver, exact, floats, exacts)
    return exact


__all__ = ["EXACT_SOLVERS", "FLOAT_SOLVERS", "TABLE_ENTRY_BYTES", "check_common", "check_flag",
           "check_instance", "check_limit", "check_paths", "check_solver", "check_table_memory"]
