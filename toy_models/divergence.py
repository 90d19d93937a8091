"""Draft/target divergence of an instance, averaged along the draft's own paths.

For positions i = 1..L the draft sits at a prefix s of length i-1 with probability q(s); there
the per-step divergence is D(p(.|s), q(.|s)). We report the average over positions

    D_bar = (1/L) sum_{i=1..L} sum_{|s| = i-1} q(s) D(p(.|s), q(.|s)),

with D = total variation TV = (1/2) sum_a |p(a|s) - q(a|s)| (then 1 - TV is the chance that
token verification accepts one token at s, Leviathan et al. arXiv 2211.17192), or
D = KL(p || q) = sum_a p(a|s) log(p(a|s) / q(a|s)) in nats. For context-independent models both
reduce to the divergence of the two rows.
"""

from __future__ import annotations

import numpy as np

from spectheory.bounds import shown
from spectheory.inputs.instances import Instance, check_instance
from spectheory.runtime.errors import OptionError
from spectheory.runtime.sizes import check_size

MEASURES = ("tv", "kl")


def _row_divergence(p: np.ndarray, q: np.ndarray, measure: str) -> np.ndarray:
    if measure == "tv":
        return 0.5 * np.abs(p - q).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0)
    return terms.sum(axis=1)


def per_position_divergence(instance: Instance, measure: str = "tv") -> np.ndarray:
    """[L] array: E_{s ~ q, |s| = i-1} D(p(.|s), q(.|s)) for i = 1..L (float64)."""
    if measure not in MEASURES:
        raise OptionError(f"measure must be one of {', '.join(MEASURES)}, got {shown(measure)}")
    inst = check_instance(instance).to_float()
    V, L = inst.vocab_size, inst.block_length
    check_size(V ** max(L - 1, 0), "divergence along draft paths", False, None,
               f"V^(L-1) = {V}^{L - 1}")
    out = np.zeros(L)
    mass = np.ones(1)
    for d in range(L):
        p = np.asarray(inst.target.level(d), dtype=np.float64)
        q = np.asarray(inst.draft.level(d), dtype=np.float64)
        div = _row_divergence(p, q, measure)  # inf where KL meets q = 0 < p
        with np.errstate(invalid="ignore"):  # unreached rows (mass 0) weigh 0, not 0 inf = nan
            out[d] = float(np.where(mass > 0, mass * div, 0.0).sum())
        mass = (mass[:, None] * q).reshape(-1)
    return out


def mean_divergence(instance: Instance, measure: str = "tv") -> float:
    """D_bar of the module docstring (average over the L draft positions)."""
    return float(per_position_divergence(instance, measure).mean())


def mean_acceptance(instance: Instance) -> float:
    """1 - mean TV: the average per-position chance that token verification accepts."""
    return 1.0 - mean_divergence(instance, "tv")
