"""Paired, low-variance comparison of verifiers on one drafted batch.

One proposal holds K_max i.i.d. draft paths of length L_max with the full draft and target
conditionals along them. Its first K paths truncated to L tokens are themselves K i.i.d. paths of
length L (`Proposal.prefix`), so one drafted batch serves every verifier and every
(K <= K_max, L <= L_max). For each configuration we record

* ``e_tau``: the verifier's exact conditional expected accepted length E[tau | context, drafts]
  = sum_i i P(tau = i | drafts), from its law (block efficiency of the step is e_tau + 1);
  for single-path verifiers (K = 1) the mean over the K_max paths, each alone a valid K = 1 draft
  (unbiased, lower variance than one path);
* ``tau``: a realised tau sampled from the same law with common random numbers (the same two
  uniforms for every configuration at a step), for histograms.

The trajectory itself is advanced by one verifier (``advance``, at K_max and L_max) with its own
sample; every verifier compared is lossless, so the visited contexts are distributed as target
samples whichever one advances, but the *weighting* of contexts (which positions start an
iteration) is that of the advancing verifier.
"""

from __future__ import annotations

import time

import torch

from spectheory.law import Law

from .decoding import Proposal, expected_tau, sample_on


def config_key(name: str, K: int, L: int) -> str:
    return f"{name}/K{K}/L{L}"


def parse_key(key: str) -> tuple[str, int, int]:
    name, k, l_ = key.rsplit("/", 2)
    return name, int(k[1:]), int(l_[1:])


def paired_step(prop: Proposal, verifiers: dict, Ks, Ls, uniforms: torch.Tensor,
                multi_min_K: int = 2) -> dict:
    """Evaluate every verifier (name -> VerifierSpec) at every (K, L) on prefixes of ``prop``.
    Multi-path verifiers are evaluated for K >= ``multi_min_K`` only (the default 2 skips K = 1,
    where GBV and traversal reduce to block verification and SpecInfer to token verification).

    Returns {"e_tau": {key: float}, "tau": {key: int}, "law_s": {key: seconds}, "accept1": {key:
    P(tau >= 1 | drafts)}, "opt_L1": {"K<k>": the largest first-token acceptance any valid verifier
    can reach with k i.i.d. drafts from this step's root rows (Hu et al.,
    [`multidraft_acceptance`][spectheory.bounds.multidraft_acceptance])}, "stop_dev": max |sum of a
    law's stop
    - 1| (a sanity check of every law evaluated)}. ``accept1`` of a single-path verifier is the
    mean over the K_max paths, each alone (as ``e_tau``)."""
    from spectheory.bounds import multidraft_acceptance

    e_tau, taus, secs, acc1 = {}, {}, {}, {}
    root_p, root_q = prop.p[0, 0], prop.q[0, 0]
    opt = {f"K{K}": float(multidraft_acceptance(root_p, root_q, K)) for K in sorted(set(Ks))}
    dev = 0.0
    uniforms = uniforms.to(prop.p.device)
    for name, spec in verifiers.items():
        for L in Ls:
            if spec.single_path:
                sub = prop.prefix(prop.K, L)
                t0 = time.perf_counter()
                # all K paths as batch rows, each alone
                law = spec.law(sub.drafts[:, None], sub.q[:, None], sub.p[:, None])
                e = expected_tau(law)
                dev = max(dev, float((law.stop.sum((-2, -1)) - 1).abs().max()))
                first = Law(law.stop[:1], law.correction[:1])
                _, tau, _ = sample_on(first, uniforms=uniforms)
                key = config_key(name, 1, L)
                acc1[key] = float((1 - law.stop[:, :, 0].sum(-1)).mean())
                e_tau[key] = float(e.mean())
                taus[key] = tau
                secs[key] = time.perf_counter() - t0
            else:
                for K in [k for k in Ks if k >= multi_min_K]:
                    sub = prop.prefix(K, L)
                    t0 = time.perf_counter()
                    law = spec.law(sub.drafts[None], sub.q[None], sub.p[None])
                    e = expected_tau(law)
                    dev = max(dev, float((law.stop.sum((-2, -1)) - 1).abs().max()))
                    _, tau, _ = sample_on(law, uniforms=uniforms)
                    key = config_key(name, K, L)
                    acc1[key] = float(1 - law.stop[0, :, 0].sum())
                    e_tau[key] = float(e[0])
                    taus[key] = tau
                    secs[key] = time.perf_counter() - t0
    return {"e_tau": e_tau, "tau": taus, "law_s": secs, "accept1": acc1, "opt_L1": opt,
            "stop_dev": dev}
