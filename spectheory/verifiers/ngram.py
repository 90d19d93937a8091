"""Verification of drafts that come without a draft distribution (n-gram / prompt-lookup drafts).

An n-gram or prompt-lookup proposer (Saxena, "Prompt Lookup Decoding", 2023; vLLM's `ngram`
speculative method, which hands the rejection sampler `draft_probs=None`) proposes tokens by
copying a continuation from the context: there is no q to divide by. The verifier treats each
drafted token as drafted with probability one, q(.|X^{i-1}) = 1{X_i}, and runs token verification
(Leviathan et al., ICML 2023) against it:

    accept X_i with probability a_i = min(1, p(X_i|X^{i-1}) / 1) = p(X_i|X^{i-1});
    on rejection at position tau+1, Y ~ normalise((p(.|X^tau) - 1{X_{tau+1}})_+)
                                      = p(.|X^tau) with X_{tau+1} removed, renormalised;
    after L acceptances, Y ~ p(.|X^L).

So P(tau = i | X) = (prod_{j<=i} p(X_j|X^{j-1})) (1 - p(X_{i+1}|X^i)) for i < L, and
prod_{j<=L} p(X_j|X^{j-1}) for i = L. When p(X_{tau+1}) = 1 the rejection has probability 0 and
the correction row falls back to p.

**Lossless for any proposer.** Conditionally on the drafted token x, position one outputs x with
probability p(x) and any y != x with probability (1 - p(x)) p(y) / (1 - p(x)) = p(y): the target
law, whatever x is and however it was chosen (deterministically, from the context, or at random
from the instance's draft rows, which this verifier ignores). By induction over positions the
output block followed by target sampling has the target's law. The exact engine's verdict on any
instance is therefore lossless (tested), and under processed targets
(`spectheory.analyze(..., sampling=...)`) the same argument holds with p the processed row.

**Why a verifier, not a drafting option.** The alternative, handing an existing verifier the
point mass instead of the q the drafts came from, would need the engine to draft from one q and
verify against another; as a verifier of its own the rule composes with every entry point (the
exact engine, `check_lossless`, `check_sampler`, the real-model loop) unchanged. Token
verification is also the right rule to run on point masses: the node-budget bound (Thomas & Pal,
arXiv 2602.16961) gives P(output passes through X^i) <= min(q(X^i), p(X^i)) = p(X^i) for a
deterministic drafter, and this rule attains it (P(tau >= i) = p(X^i)), so block verification
cannot accept more on such drafts. Engines: vLLM V1 runs n-gram drafts through its rejection
sampler with `draft_probs=None` (treated as q = 1 at the drafted token); vllm-ascend PR #7839
(block verification with q = 1 for n-gram drafts) is the same setting.
"""

from __future__ import annotations

from ..runtime.errors import check_arrays
from ..runtime import backend as B
from ..law import Law
from ..registry import VerifierSpec
from .token import token_verification


def ngram_verification(drafts, q, p) -> Law:
    """Law of verifying drafts without a q: token verification against the point mass on each
    drafted token (``q`` is ignored). Shapes: drafts [B, L], q [B, L, V] (unused), p [B, L+1, V];
    torch, numpy float64 or exact Fractions."""
    check_arrays(drafts, q, p, paths=False, q_read=False)  # q is not read
    V = p.shape[-1]
    point = B.one_hot(B.as_index(drafts, p), V, p)
    return token_verification(drafts, point, p)


NGRAM = VerifierSpec(
    "ngram", ngram_verification, paths=1, numpy_float=True,
    node_form="q = 1{X_i}: accept X_i w.p. p(X_i|X^{i-1}); correction p(.|X^tau) without "
              "X_{tau+1}, renormalised",
    paper="Leviathan et al., ICML 2023 (token verification); Saxena 2023 (prompt lookup "
          "decoding); vLLM n-gram drafts (draft_probs=None)",
    summary="verification of drafts without a q (n-gram / prompt lookup): q = 1 at the "
            "drafted token")


__all__ = ["NGRAM", "ngram_verification"]
