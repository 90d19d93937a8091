"""Exact laws of the bug kit's sampler-level replicas: the planted bugs of the engine-layout ports
(`spectheory.testing.engines.adapters`, ``bug=``) and vLLM #47386's shared Gumbel noise.

A sampling check sees a bug through the law of (tau, Y) given a draft row; these functions state
that law exactly (float64), in spectheory's single-path verifier signature
``f(drafts [B, L], q [B, L, V], p [B, L+1, V]) -> Law``, so that the power of a check against
each replica can be computed before sampling (`spectheory.testing.designs.sharp`). Each is written
from the port's code (the file and branch named in its docstring), not from the sampler's
output. A row on which a replica's behaviour is not fixed by a law (a correction row of mass
zero, where an engine falls back to token 0, a NaN or an error) gets NaN in that row's
correction, and designs leave such rows out.

Token rule (Leviathan et al., ICML 2023): accept X_i with a_i = min(1, p_i(X_i) / q_i(X_i)),
correction normalise(max(p_i - q_i, 0)) at a rejection, p_L after L acceptances (p_i = p(.|X^i),
q_i = q(.|X^i)). Block rule (Sun et al., arXiv 2403.10444): weights w_i, acceptance weights h_i,
corrections normalise(max(w_tau p_tau - q_tau, 0)) (`spectheory.verifiers.block`).

Variants of the ports (``next``: rows i + 1 with the target's bonus row p_L reachable; ``clamped``:
rows min(i + 1, L - 1), the request's last draft row, as vLLM V1's ``nxt`` index):

=====================  ======================================  ===================================
bug                    token ports                             law
=====================  ======================================  ===================================
target-row             SGLang, transformers, MRV2: next;       a_i from p_{i+1}(X_i) (next) or
                       vLLM V1: clamped                        p_{min(i+1, L-1)}(X_i) (clamped)
correction-from-p      all                                     correction p_i at a rejection
residual-row           SGLang, transformers, MRV2: next;       normalise(max(p_{i+1} -
                       vLLM V1: clamped                        q_{min(i+1, L-1)}, 0)) (next) or
                                                               both rows min(i+1, L-1) (clamped)
coin-compare           vLLM V1, transformers, MRV2: reversed   a_i = 1 - min(1, p_i/q_i)
                       SGLang: strict made non-strict          the law is unchanged (a coin of
                                                               exactly 0: coins mode only)
=====================  ======================================  ===================================
"""

from __future__ import annotations

import numpy as np
import torch

from ...law import Law
from ...verifiers.block import block_weights
from ...verifiers.common import drafted_probs, residuals, stop_from_acceptance_weights
from ...verifiers.contrasts import chain_law
from ..engines.adapters import MRV2_BUGS

__all__ = ["token_port_law", "block_port_law", "shared_noise_law", "shared_noise_row",
           "TOKEN_PORT_VARIANTS", "BLOCK_PORT_BUGS"]

#: (bug, variant) pairs of the token-rule ports whose law differs from token verification.
TOKEN_PORT_VARIANTS = (("target-row", "next"), ("target-row", "clamped"),
                       ("correction-from-p", None), ("residual-row", "next"),
                       ("residual-row", "clamped"), ("coin-compare", "reversed"))
#: Planted bugs of the block-rule port (vLLM MRV2, ``method="block"``).
BLOCK_PORT_BUGS = MRV2_BUGS


def _rows_at(x, idx):
    """x[:, idx[i]] for a list of row indices: x [B, R, V] -> [B, len(idx), V]."""
    return x[:, list(idx)]


def _normalise_or_nan(rows):
    """rows / their sum [B, L, V]; NaN rows where the mass is 0 (no law: engine-specific)."""
    s = rows.sum(-1, keepdim=True)
    return torch.where(s > 0, rows / torch.where(s > 0, s, torch.ones_like(s)),
                       torch.full_like(rows, float("nan")))


def _ratio(px, qx):
    return torch.where(qx > 0, px / torch.where(qx > 0, qx, torch.ones_like(qx)),
                       torch.ones_like(px))


def token_port_law(drafts, q, p, bug: str, variant: str | None = None) -> Law:
    """Law of a token-rule port with a planted bug (see the module table); float64.

    ``drafts [B, L]``, ``q [B, L, V]``, ``p [B, L+1, V]``. Drafts with q(X_i) = 0 are outside the
    ports' domain (they divide by it) and get the ratio 1, as in spectheory's token rule.
    """
    q, p = q.to(torch.float64), p.to(torch.float64)
    L = drafts.shape[-1]
    px, qx = drafted_probs(drafts, q, p)
    idx = drafts.unsqueeze(-1)
    nxt = [i + 1 for i in range(L)]
    clamped = [min(i + 1, L - 1) for i in range(L)]
    accept = _ratio(px, qx).clamp(max=1.0)
    corr = _normalise_or_nan(residuals(torch.ones_like(px), q, p))
    if bug == "target-row":
        rows = nxt if variant == "next" else clamped
        px2 = _rows_at(p, rows).gather(-1, idx)[..., 0]
        accept = _ratio(px2, qx).clamp(max=1.0)
    elif bug == "coin-compare":
        if variant != "reversed":
            raise ValueError("only the reversed comparison changes the law")
        accept = 1.0 - _ratio(px, qx).clamp(max=1.0)
    elif bug == "correction-from-p":
        corr = p[:, :L]
    elif bug == "residual-row":
        prow = nxt if variant == "next" else clamped
        corr = _normalise_or_nan((_rows_at(p, prow) - _rows_at(q, clamped)).clamp(min=0))
    else:
        raise ValueError(f"unknown bug {bug!r}")
    law = chain_law(accept, corr, p[:, L])
    # a correction of mass 0 matters only where its stop has probability > 0
    live = law.stop[:, :L].unsqueeze(-1) > 0
    corr = torch.where(live | ~torch.isnan(corr), corr, p[:, :L])
    return Law(law.stop, torch.cat([corr, p[:, L:]], dim=1))


def _block_h(w, q, p, rows):
    """Acceptance weights h [B, L+1] of block verification from weights w [B, L+1] with the
    residual mass S_i taken at rows ``rows[i]`` (i = 1..L-1)."""
    Bsz, L = q.shape[0], q.shape[1]
    h = [torch.ones(Bsz, dtype=torch.float64)]
    for i in range(1, L):
        r = rows[i]
        S = (w[:, i:i + 1] * p[:, r] - q[:, r]).clamp(min=0).sum(-1)
        den = S + (1.0 - w[:, i])
        h.append(torch.where(den > 0, S / torch.where(den > 0, den, torch.ones_like(den)),
                             torch.ones_like(S)))
    h.append(w[:, L])
    return torch.stack(h, dim=1)


def block_port_law(drafts, q, p, bug: str) -> Law:
    """Law of vLLM MRV2's block-verification port with a planted bug (``bug`` in
    `BLOCK_PORT_BUGS`; `spectheory.testing.engines.adapters.vllm_mrv2_rejection_sample`, method
    ``"block"``), float64.

    ``target-row``: the weights' ratios read p_{i+1}(X_i) (the bonus row for the last draft);
    ``correction-from-p``: correction p_tau; ``residual-row``: correction
    normalise(max(w_tau p_{tau+1} - q_{min(tau+1, L-1)}, 0)); ``coin-compare``: position i
    succeeds with probability 1 - h_i (u > h); ``wrong-row``: S_i from the rows at i - 1 (vLLM PR
    40819). A correction of mass 0 at a stop of positive probability is NaN (the port's
    all--inf Gumbel-max returns token 0: no law).
    """
    q, p = q.to(torch.float64), p.to(torch.float64)
    L = drafts.shape[-1]
    if bug == "target-row":
        idx = drafts.unsqueeze(-1)
        px2 = p[:, 1:L + 1].gather(-1, idx)[..., 0]
        qx = q.gather(-1, idx)[..., 0]
        ratio = _ratio(px2, qx)
        w = [torch.ones_like(ratio[:, 0])]
        for i in range(L):
            w.append(torch.clamp(w[-1] * ratio[:, i], max=1.0))
        w = torch.stack(w, dim=1)
    else:
        w = block_weights(drafts, q, p)
    rows = list(range(L + 1))
    if bug == "wrong-row":
        rows = [max(i - 1, 0) for i in range(L + 1)]
    h = _block_h(w, q, p, rows)
    if bug == "coin-compare":
        h = torch.cat([h[:, :1], 1.0 - h[:, 1:]], dim=1)
    stop = stop_from_acceptance_weights(h)
    if bug == "correction-from-p":
        corr = p[:, :L]
    elif bug == "residual-row":
        pr = p[:, 1:L + 1]
        qr = q[:, [min(i + 1, L - 1) for i in range(L)]]
        corr = _normalise_or_nan((w[:, :L].unsqueeze(-1) * pr - qr).clamp(min=0))
    elif bug in ("target-row", "coin-compare", "wrong-row"):
        corr = _normalise_or_nan(residuals(w[:, :L], q, p))
    else:
        raise ValueError(f"unknown bug {bug!r}")
    # a NaN correction matters only where its stop has probability > 0
    live = stop[:, :L].unsqueeze(-1) > 0
    corr = torch.where(live | ~torch.isnan(corr), corr, p[:, :L])
    return Law(stop, torch.cat([corr, p[:, L:]], dim=1))


def shared_noise_row(qr: np.ndarray, pr: np.ndarray, x: int) -> np.ndarray:
    """P(Y = y | X = x) [V] when the draft X = argmax(log q + G) and the correction
    Y = argmax(log r + G) read the same Gumbel noise G (vLLM #47386), r = max(p - q, 0).

    With G_j = -log E_j (E_j ~ Exp(1), independent), X = argmin E_j / q_j and Y = argmin
    E_j / r_j. Conditioning on E_x = s, E_y = t and putting t = u s,

        P(X = x, Y = y) = int_{q_y/q_x}^{inf} du / k(u)^2,
        k(u) = 1 + u + sum_{j != x, y} max(q_j / q_x, u r_j / r_y)

    (for r_x = 0, which holds whenever X = x can be rejected; the constraint from j = x is then
    void), and k is piecewise linear in u with breakpoints (q_j / q_x) / (r_j / r_y), so each
    piece integrates in closed form: int du / (a + b u)^2 = [-1 / (b (a + b u))]. Divided by
    P(X = x) = q_x. Returns NaN when r_x > 0 or r = 0 (no rejection possible: any row serves).
    """
    qr = np.asarray(qr, dtype=np.float64) / np.sum(qr)
    pr = np.asarray(pr, dtype=np.float64)
    r = np.clip(pr - qr, 0.0, None)
    V = len(qr)
    out = np.zeros(V)
    if r[x] > 0 or r.sum() <= 0 or qr[x] <= 0:
        return np.full(V, np.nan)
    for y in range(V):
        if y == x or r[y] <= 0:
            continue
        a_const, slopes, points = 1.0, 1.0, []
        for j in range(V):
            if j in (x, y):
                continue
            aj, bj = qr[j] / qr[x], r[j] / r[y]
            if bj <= 0:
                a_const += aj
            elif aj <= 0:
                slopes += bj
            else:
                points.append((aj / bj, aj, bj))
        lo = qr[y] / qr[x]
        # at u: the terms whose breakpoint is above u still count a_j; the others u b_j
        points.sort()
        total = 0.0
        alpha = a_const + sum(aj for bp, aj, bj in points if bp > lo)
        beta = slopes + sum(bj for bp, aj, bj in points if bp <= lo)
        u0 = lo
        for bp, aj, bj in points:
            if bp <= lo:
                continue
            total += (1.0 / (alpha + beta * u0) - 1.0 / (alpha + beta * bp)) / beta
            alpha -= aj
            beta += bj
            u0 = bp
        total += 1.0 / (beta * (alpha + beta * u0))
        out[y] = total / qr[x]
    return out


def shared_noise_law(drafts, q, p) -> Law:
    """Law of token verification whose correction at a rejected position i reuses the Gumbel noise
    that drew X_i (vLLM #47386, fixed by #54282; the sampler
    [`shared_noise_sampler`][spectheory.testing.mutants.coins.shared_noise_sampler]): acceptance
    as token verification (its own uniforms), the correction row at i from
    [`shared_noise_row`][spectheory.testing.mutants.replica_laws.shared_noise_row]; float64.
    Rows where a rejection has probability 0 keep the residual (their stop is 0)."""
    q, p = q.to(torch.float64), p.to(torch.float64)
    Bsz, L = drafts.shape
    px, qx = drafted_probs(drafts, q, p)
    accept = _ratio(px, qx).clamp(max=1.0)
    res = residuals(torch.ones_like(px), q, p)
    mass = res.sum(-1, keepdim=True)
    corr = torch.where(mass > 0, res / torch.where(mass > 0, mass, torch.ones_like(mass)),
                       p[:, :L]).clone()
    qn, pn, dn = q.numpy(), p.numpy(), drafts.numpy()
    for b in range(Bsz):
        for i in range(L):
            if accept[b, i] < 1:
                row = shared_noise_row(qn[b, i], pn[b, i], int(dn[b, i]))
                corr[b, i] = torch.from_numpy(row)
    return chain_law(accept, corr, p[:, L])
