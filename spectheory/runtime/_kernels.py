"""Loading the package's compiled kernels (numba), once per process.

The per-node route of the exact engine, GBV's rows and the correction rows of token and block
each keep their kernels in a module of their own that imports numba; each caller keeps the
loaded module (or None) in a one-element list of its own, which the tests replace to simulate a
machine without numba.
"""

from __future__ import annotations

import importlib


def load_once(slot: list, why: list, name: str, package: str):
    """The kernels module ``name`` (relative to ``package``), imported on the first call and kept
    in ``slot`` (then ``[module]``, or ``[None]``); None where it cannot be imported (numba
    missing, not usable with this numpy, or no writable cache for its compiled code: the torch
    routes give the same values), the reason appended to ``why``."""
    if not slot:
        try:
            slot.append(importlib.import_module(name, package))
        except Exception as err:  # noqa: BLE001 - any failure to load leaves the torch route
            slot.append(None)
            why.append(f"{type(err).__name__}: {err}")
    return slot[0]
