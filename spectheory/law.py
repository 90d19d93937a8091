"""The law of a single-path verifier's output, the common currency of the whole toolkit.

A single-path verifier is a pure, batched function

    verifier(drafts, q, p) -> Law

with ``drafts`` [B, L] token ids, ``q`` [B, L, V] the draft conditionals q(.|c, X^{i}) for
i = 0..L-1 along each draft, and ``p`` [B, L+1, V] the target conditionals p(.|c, X^{i}) for
i = 0..L. It returns the conditional law of its output given the draft:

* ``stop[b, i] = P(tau = i | X)`` for i = 0..L (rows sum to 1), and
* ``correction[b, i, :]`` the distribution of the extra token Y given tau = i (rows sum to 1;
  for tau = L it is the bonus distribution p(.|X^L)).

Everything else is generic on top of a law: the exact engine (:mod:`spectheory.exact`) weights
laws by draft probabilities over the whole sequence tree, the sampler
(:mod:`spectheory.sampling`) draws (tau, Y), and the real-model harness evaluates the very same
function on model probabilities.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple


class Law(NamedTuple):
    stop: Any  # [B, L+1]
    correction: Any  # [B, L+1, V]


Verifier = Callable[[Any, Any, Any], Law]


class MultiLaw(NamedTuple):
    """Law of a K-path verifier's output given the K drafted paths.

    ``stop[b, k, i] = P(output follows path k, tau = i | drafts)`` (sums to 1 over k and i) and
    ``correction[b, k, i, :]`` the distribution of Y given (k, tau = i). The output block is
    (X_{k,1}..X_{k,i}, Y). Paths sharing a prefix may split the mass of the same output.
    """

    stop: Any  # [B, K, L+1]
    correction: Any  # [B, K, L+1, V]


#: A multi-path verifier: ``verifier(drafts [B, K, L], q [B, K, L, V], p [B, K, L+1, V])``
#: -> MultiLaw, where q[b, k, i] = q(.|c, X_k^{i}) and p[b, k, i] = p(.|c, X_k^{i}) are the
#: conditionals at every drafted node (the full rows, so verifiers may use sibling masses).
MultiVerifier = Callable[[Any, Any, Any], MultiLaw]
