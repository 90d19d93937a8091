"""Statistical tests of an output law against the target's: the G-test of counts, the
large-sample Hotelling T^2 test of a mean vector, and the Rao-Blackwellised pair vectors it is
applied to.

References: G-test (likelihood-ratio goodness of fit), Sokal & Rohlf, *Biometry*, ch. 17;
Hotelling's T^2 in its large-sample chi-square form, Anderson, *An Introduction to Multivariate
Statistical Analysis*, section 5.2; Rao-Blackwellisation (conditioning on the draft),
Casella & Robert, Biometrika 83 (1996).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import torch

from spectheory.runtime.errors import SpectheoryError

#: Most pair bins a Hotelling test is run over (its covariance is bins x bins float64: 3.2 GB).
MAX_PAIR_BINS = 20_000


def gtest(observed: Counter, expected_probs: dict, n: int, min_expected: float = 5.0) -> dict:
    """G-test of counts against probabilities.

    G = 2 sum_bins O ln(O / E), compared with chi-square on (bins - 1) degrees of freedom.

    Parameters
    ----------
    observed : Counter
        category -> count, ``n`` in total.
    expected_probs : dict
        category -> probability; need not cover everything: the uncovered mass is a remainder bin
        (with every observed category not listed).
    n : int
        Number of observations.
    min_expected : float
        Categories with expected count ``n p < min_expected`` join the remainder bin.

    Returns
    -------
    dict
        ``G``, ``dof``, ``p_value``, ``bins``. A count outside the support of the expected law
        gives ``G = inf``, ``p_value = 0``.
    """
    from scipy.stats import chi2

    kept = [c for c, pr in expected_probs.items() if pr * n >= min_expected]
    E = np.array([expected_probs[c] * n for c in kept], dtype=np.float64)
    O = np.array([observed.get(c, 0) for c in kept], dtype=np.float64)
    rest_E = n - E.sum()
    rest_O = n - O.sum()
    if rest_E >= 1e-9 * n:
        E = np.append(E, rest_E)
        O = np.append(O, rest_O)
    elif rest_O > 0:  # observed outside the support of the expected law
        return {"G": math.inf, "dof": len(E), "p_value": 0.0, "bins": len(E) + 1}
    nz = O > 0
    G = float(2.0 * np.sum(O[nz] * np.log(O[nz] / E[nz])))
    dof = max(len(E) - 1, 1)
    return {"G": G, "dof": dof, "p_value": float(chi2.sf(G, dof)), "bins": int(len(E))}


def hotelling(total: torch.Tensor, outer: torch.Tensor, n: int, expected: torch.Tensor) -> dict:
    """Large-sample test that the mean of n i.i.d. vectors equals ``expected``.

    T^2 = n d' S^+ d with d = mean - expected and S the sample covariance (pseudo-inverse over
    eigenvalues above 1e-10 of the largest), against chi-square with rank(S) degrees of freedom.

    Parameters
    ----------
    total : Tensor [nb]
        Sum of the vectors.
    outer : Tensor [nb, nb]
        Sum of their outer products.
    n : int
        Number of vectors.
    expected : Tensor [nb]
        The mean under the null hypothesis.

    Returns
    -------
    dict
        ``T2``, ``dof``, ``p_value`` and ``tv_bins`` = 0.5 sum |d| (size of the bias).
    """
    from scipy.stats import chi2

    if total.numel() == 0:  # no pair bin reaches the expected count: nothing to test
        return {"T2": 0.0, "dof": 0, "p_value": 1.0, "tv_bins": 0.0}
    mean = total / n
    cov = (outer - n * torch.outer(mean, mean)) / max(n - 1, 1)
    d = mean - expected
    evals, evecs = torch.linalg.eigh(cov)
    keep = evals > evals.max() * 1e-10
    proj = evecs[:, keep].T @ d
    T2 = float(n * (proj ** 2 / evals[keep]).sum())
    dof = int(keep.sum())
    return {"T2": T2, "dof": dof, "p_value": float(chi2.sf(T2, max(dof, 1))),
            "tv_bins": float(0.5 * d.abs().sum())}


def rb_pair_rows(X: torch.Tensor, law, y1b: torch.Tensor, y2b: torch.Tensor,
                 prow_b: torch.Tensor) -> torch.Tensor:
    """Rao-Blackwellised pair vectors of a single-path law (L >= 2).

    Per drafted row, the exact conditional probability given the draft X that the first two
    output tokens are the pair bin (y1, y2):

        P(tau >= 2) 1[X1 X2 = y1 y2] + P(tau = 1) 1[X1 = y1] corr_1(y2)
        + P(tau = 0) corr_0(y1) p(y2 | c, y1).

    Their mean over rows is an unbiased estimate of the output pair law, which a lossless
    verifier makes p(y1|c) p(y2|c, y1).

    Parameters
    ----------
    X : Tensor [B, L]
        Drafts.
    law : Law
        Single-path law: ``stop [B, L+1]``, ``correction [B, L+1, V]``.
    y1b, y2b : Tensor [nb]
        The pair bins.
    prow_b : Tensor [nb]
        p(y2 | c, y1) per bin.

    Returns
    -------
    Tensor [B, nb]
    """
    st, corr = law.stop, law.correction
    x1, x2 = X[:, 0:1], X[:, 1:2]
    a = st[:, 2:].sum(1, keepdim=True) * ((x1 == y1b) & (x2 == y2b)).to(st.dtype)
    b = st[:, 1:2] * (x1 == y1b).to(st.dtype) * corr[:, 1][:, y2b]
    c = st[:, 0:1] * corr[:, 0][:, y1b] * prow_b.to(st.dtype)
    return a + b + c


def check_pair_bins(nb: int) -> None:
    """Refuse more than `MAX_PAIR_BINS` pair bins (memory of the Hotelling covariance)."""
    if nb > MAX_PAIR_BINS:
        raise SpectheoryError(
            f"{nb} pair bins would need a {nb}x{nb} covariance ({nb * nb * 8 / 1e9:.1f} GB); "
            f"at most {MAX_PAIR_BINS} are supported: use fewer samples")


__all__ = ["MAX_PAIR_BINS", "gtest", "hotelling", "rb_pair_rows", "check_pair_bins"]
