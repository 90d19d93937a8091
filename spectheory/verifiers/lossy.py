"""Deliberately wrong verifiers, kept as negative controls for the losslessness checkers.

``uniform_product_verification`` is the "running product of uniforms" variant that a fork of a
serving engine once shipped as block verification (and later fixed). Forward scan: accept X_k while

    U_1 U_2 ... U_k  <=  c_k := prod_{j<=k} min(1, p(X_j|X^{j-1}) / q(X_j|X^{j-1})),

with U_j i.i.d. uniform, stopping at the first failure; corrections are block-style residuals
normalise(max(c_tau p(.|X^tau) - q(.|X^tau), 0)), and p(.|X^L) after L acceptances.
It is not block verification and is lossy in general.

Its exact law: with E_j = -ln U_j ~ Exp(1) and b_k = -ln c_k, the running sums are the arrival
times of a unit Poisson process N, and "accept X_1..X_k" is {N(b_j) <= j - 1 for all j <= k}.
Because N is monotone the event only needs checking at the points b_j, so a forward recursion over
f_k(n) = P(accepted through k, N(b_k) = n), n < k, with Poisson(b_{k+1} - b_k) increments gives
P(tau >= k) exactly. The increments involve exp/log, so this verifier has a float (torch) law only.
"""

from __future__ import annotations

import math

from ..runtime._lazy import torch

from ..runtime.errors import check_arrays
from ..law import Law
from ..registry import VerifierSpec
from .common import drafted_probs, float_law_only, residual_corrections, residuals


def uniform_product_verification(drafts, q, p) -> Law:
    """Law of the running-product-of-uniforms variant (torch only; see module docstring)."""
    check_arrays(drafts, q, p, paths=False)
    float_law_only(p, "uniform_product_verification")
    L = drafts.shape[-1]
    px, qx = drafted_probs(drafts, q, p)
    a = torch.where(qx > 0, px / torch.where(qx > 0, qx, torch.ones_like(qx)), torch.ones_like(px))
    a = a.clamp(max=1.0)  # [B, L]
    Bsz = a.shape[0]
    # f[:, n] = P(accepted through k, N(b_k) = n); before position 1: N(0) = 0 with prob 1.
    f = torch.zeros(Bsz, L + 1, dtype=p.dtype, device=p.device)
    f[:, 0] = 1.0
    survive = [torch.ones(Bsz, dtype=p.dtype, device=p.device)]  # P(tau >= 0) = 1
    for k in range(L):
        ak = a[:, k]
        delta = -torch.log(torch.where(ak > 0, ak, torch.ones_like(ak)))
        # Poisson(delta) pmf e^{-delta} delta^j / j! = a_k * delta^j / j!, and 0 when a_k = 0.
        pois = torch.stack(
            [torch.where(ak > 0, ak * delta**j / math.factorial(j), torch.zeros_like(ak))
             for j in range(k + 1)], dim=1)  # [B, k+1]
        g = torch.zeros_like(f)
        for m in range(k + 1):  # new count m must satisfy m <= k (N(b_{k+1}) <= k)
            g[:, m] = (f[:, : m + 1] * pois[:, : m + 1].flip(1)).sum(1)
        f = g
        survive.append(f.sum(1))
    surv = torch.stack(survive, dim=1)  # P(tau >= k), k = 0..L
    stop = torch.cat([surv[:, :-1] - surv[:, 1:], surv[:, -1:]], dim=1).clamp(min=0.0)
    c = torch.cumprod(torch.cat([torch.ones_like(a[:, :1]), a[:, :-1]], dim=1), dim=1)
    return Law(stop, residual_corrections(residuals(c, q, p), p))


UNIFORM_PRODUCT = VerifierSpec(
    "uniform-product", uniform_product_verification, paths=1, lossless=False, exact=False,
    paper="negative control (a running product of uniforms shipped once as block verification)",
    summary="LOSSY control: running product of uniforms against prod min(1, p/q)")
