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


def probed_kernels(env: str, module, probes: dict, V: int, probe):
    """``(kernels module, probes[V])`` where the environment switch ``env`` is not off
    ([`env_switch`][spectheory.runtime.limits.env_switch], validated on each read: a typo is
    refused), ``module()`` loads the kernels and ``probe(module, V)`` (run once per process and
    V, kept in ``probes``) found them reproducing torch's arithmetic for rows of V entries (a
    result other than None); else None (the torch route)."""
    from . import limits

    if not limits.env_switch(env):
        return None
    mod = module()
    if mod is None:
        return None
    if V not in probes:
        probes[V] = probe(mod, V)
    return None if probes[V] is None else (mod, probes[V])
