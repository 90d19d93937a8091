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
