"""Entropy Verify: token verification with the acceptance uniform scaled by an entropy threshold.

vllm-ascend PR #9772 ("fix Magic MTP and add Entropy Verify", merged; ``rejection_sampler_config``
``enable_entropy_verify``, ``posterior_threshold`` = tau in (0, 1], default 0.95,
``posterior_alpha`` = alpha >= 0, default 0.4). In ``rejection_random_sample_pytorch``
(``vllm_ascend/sample/rejection_sampler.py``; the Triton kernel in
``vllm_ascend/ops/triton/reject_sample.py`` the same), with p_i the target row at the node of X_i:

    H_i   = -sum_v p_i(v) log(p_i(v) + 1e-10)          (natural log, EPSILON = 1e-10 as shipped)
    s_i   = min(exp(-alpha H_i), tau)
    accept X_i iff q_i(X_i) > 0 and p_i(X_i) / q_i(X_i) >= s_i u,   u ~ U[0, 1)

so a_i = min(1, p_i(X_i) / (s_i q_i(X_i))) (where s_i q_i(X_i) underflows to 0 in float64, as
alpha H_i grows large, its limit: 1 where p_i(X_i) > 0, 0 where p_i(X_i) = 0); the recovered token is vLLM's,
normalise(max(p_i - q_i, 0)) (``sample_recovered_tokens_pytorch``), and the bonus token is the
target's. This is token verification with lenience s_i on the acceptance only (the residual is
not scaled): s_i = 1, i.e. tau = 1 and alpha = 0, is token verification (lossless); any s_i < 1
accepts more and is lossy wherever p_i != q_i. A rejection happens only where
p_i(X_i) < s_i q_i(X_i) <= q_i(X_i), so the residual is never empty.

Uses exp and log: float (torch) law only. A pure batched chain law
([`chain_law`][spectheory.verifiers.contrasts.chain_law]) of (drafts [B, L], q [B, L, V],
p [B, L+1, V]).
"""

from __future__ import annotations

from dataclasses import replace

from ..law import Law
from ..registry import VerifierSpec
from .common import drafted_probs, float_law_only
from .contrasts import _normalise, chain_law
from .params import nonnegative, number, positive_unit

PAPER = "vllm-ascend PR #9772 (Entropy Verify: posterior_threshold, posterior_alpha)"
#: The shipped EPSILON inside the entropy's log.
EPSILON = 1e-10


def entropy_verify(threshold=0.95, alpha=0.4) -> VerifierSpec:
    """Entropy Verify with posterior_threshold tau in (0, 1] and posterior_alpha >= 0 (module
    doc): accept X_i w.p. min(1, p(X_i) / (min(e^{-alpha H}, tau) q(X_i))); Y ~ normalise(max(p -
    q, 0)); bonus ~ p. Float law only."""
    tau = float(number(threshold, "entropy-verify", positive_unit("posterior_threshold")))
    alpha = float(number(alpha, "entropy-verify", nonnegative("posterior_alpha")))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        import torch

        float_law_only(p, "entropy verify")
        L = drafts.shape[-1]
        rows = p[:, :L]
        px, qx = drafted_probs(drafts, q, p)  # [B, L]
        entropy = -(rows * torch.log(rows + EPSILON)).sum(-1)  # [B, L]
        s = torch.clamp(torch.exp(-entropy * alpha), max=tau)
        # s q(X) underflows to 0 as alpha H grows (alpha up to 1e6 is allowed):
        # the limit, a = 1 where p(X) > 0 and 0 where p(X) = 0 (s > 0), not 0/0
        ratio = px / torch.where(qx > 0, s * qx, torch.ones_like(qx))
        a = torch.where(qx > 0, torch.where(px > 0, ratio, torch.zeros_like(ratio)),
                        torch.ones_like(qx)).clamp(max=1.0)
        return chain_law(a, _normalise((rows - q).clamp(min=0.0), rows), p[:, L])

    lossless = tau == 1 and alpha == 0
    return VerifierSpec(f"entropy-verify({tau}, {alpha})", law, lossless=lossless, exact=False,
                        paper=PAPER,
                        node_form="s = min(e^{-alpha H(p)}, tau); accept X_i w.p. min(1, "
                                  "p(X_i)/(s q(X_i))); else Y ~ normalise(max(p - q, 0)); "
                                  "bonus ~ p",
                        summary=f"{'' if lossless else 'LOSSY: '}Entropy Verify, threshold "
                                f"{tau}, alpha {alpha}")


#: The registered member (the documented defaults tau = 0.95, alpha = 0.4).
ENTROPY_VERIFY = replace(entropy_verify(), name="entropy-verify")

__all__ = ["ENTROPY_VERIFY", "EPSILON", "PAPER", "entropy_verify"]
