"""Static ensemble verification: token verification against the mixture of target and draft.

DIVERSED (Wang, Kasa et al., AISTATS 2026, arXiv 2604.07622) introduces the *static ensemble*, a
fixed-weight mixture of the target and the draft used as the verification target; transformers
ships it as ``assistant_ensemble_weight`` (huggingface/transformers PR #45979, issue #45865;
``_speculative_sampling`` in ``src/transformers/generation/utils.py``). With p_i = p(.|X^{i-1})
the target row and q_i = q(.|X^{i-1}) the draft row at the node of X_i, and w in [0, 1] the
target's weight,

    v_i = w p_i + (1 - w) q_i,
    a_i = min(1, v_i(X_i) / q_i(X_i))  ( = min(1, 1 - w + w p_i(X_i) / q_i(X_i)) ),
    r_i = normalise(max(v_i - q_i, 0))  ( = normalise(max(p_i - q_i, 0)) for w > 0, since
          v_i - q_i = w (p_i - q_i); p_i where it is zero, a node where no rejection happens),
    b   = p(.|X^L)  (after L acceptances the bonus token is the target's: transformers samples it
          from the target logits at position L + 1, the mixture is used for verification only).

One node's emitted token has law exactly v_i (token verification's argument with v_i in place of
p_i): its acceptance is sum_x min(q_i, v_i) = 1 - TV(q_i, v_i) = 1 - w TV(p_i, q_i) (up from
token verification's 1 - TV(p_i, q_i)), and its distance to the target is TV(v_i, p_i) =
(1 - w) TV(p_i, q_i). At L = 1 this gives E[tau + 1] = 2 - w T and TV to the target = (1 - w) T
with T = TV(p, q) at the root. w = 1 is token verification exactly (lossless); w = 0 accepts
every draft (the output is the draft's law). Rational w keeps the law exact in rationals.

``static-ensemble-greedy(w)`` is the PR's greedy (``do_sample=False``) branch: the selected
token at positions 1..L is argmax v_i (ties to the smallest id, as ``torch.argmax`` returns the
first maximal index) and at position L + 1 argmax p(.|X^L); the drafts are kept up to the first
mismatch and the selected token there is emitted. So a_i = 1{X_i = argmax v_i}, r_i = e_{argmax
v_i} and b = e_{argmax p}. In transformers the rows p_i, q_i of v_i are the softmax of the
processed logits (not temperature-0 one-hot rows) while the assistant drafts its own argmax; the
law here is that of whatever rows and drafting the instance gives (X ~ q; a one-hot q drafts
its argmax). w = 1 is greedy matching
([`greedy_matching`][spectheory.verifiers.contrasts.greedy_matching]); both are lossy unless p is
one-hot.

Both are pure batched chain laws ([`chain_law`][spectheory.verifiers.contrasts.chain_law]) of
(drafts [B, L], q [B, L, V], p [B, L+1, V]), run in exact rationals and on numpy float64 as on
torch, and are registered with ``lossless`` True only for ``static-ensemble(1)``.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from ..runtime import backend as B
from ..law import Law
from ..registry import VerifierSpec
from ..runtime.errors import check_arrays
from .common import drafted_probs
from .contrasts import _argmax_onehot, _const, _normalise, chain_law
from .params import number, unit

PAPER = ("Wang, Kasa et al., DIVERSED, AISTATS 2026, arXiv 2604.07622 (static ensemble); "
         "transformers PR #45979 (assistant_ensemble_weight)")


def static_ensemble(w) -> VerifierSpec:
    """Static ensemble verification with target weight ``w`` in [0, 1] (module doc): accept X_i
    with min(1, v(X_i) / q(X_i)), v = w p + (1 - w) q; on rejection Y ~ normalise(max(v - q, 0));
    after L acceptances Y ~ p (the target's bonus token, as transformers)."""
    w = number(w, "static-ensemble", unit("w"))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        L = drafts.shape[-1]
        px, qx = drafted_probs(drafts, q, p)  # [B, L]
        wt, wd = _const(px, w), _const(px, 1 - w)
        vx = px * wt + qx * wd  # v(X_i), [B, L]
        a = B.minimum(B.safe_div(vx, qx, B.scalar(px, 1)), 1)
        v = p[:, :L] * wt + q * wd  # [B, L, V]
        res = B.positive_part(v - q)
        return chain_law(a, _normalise(res, p[:, :L]), p[:, L])

    lossless = w == 1
    return VerifierSpec(f"static-ensemble({w})", law, lossless=lossless, numpy_float=True,
                        paper=PAPER,
                        node_form="v = w p + (1-w) q; accept X_i w.p. min(1, v(X_i)/q(X_i)), "
                                  "else Y ~ normalise(max(v - q, 0)); bonus Y ~ p",
                        summary=f"{'' if lossless else 'LOSSY: '}static ensemble, target "
                                f"weight {w}")


def static_ensemble_greedy(w) -> VerifierSpec:
    """The greedy branch of static ensemble verification (module doc): accept X_i iff it is
    argmax v_i, v = w p + (1 - w) q; Y = argmax v_i at the first mismatch, argmax p after L
    acceptances."""
    w = number(w, "static-ensemble-greedy", unit("w"))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        check_arrays(drafts, q, p, paths=False)
        L = drafts.shape[-1]
        v = p[:, :L] * _const(p, w) + q * _const(q, 1 - w)  # [B, L, V]
        top = _argmax_onehot(v)  # [B, L, V]
        hit = B.take_along(top, B.expand_dims(B.as_index(drafts, q), -1), axis=-1)[..., 0]
        return chain_law(hit, top, _argmax_onehot(p[:, L]))

    return VerifierSpec(f"static-ensemble-greedy({w})", law, lossless=False, numpy_float=True,
                        paper=PAPER + ", greedy branch",
                        node_form="accept X_i iff X_i = argmax (w p + (1-w) q); else Y = that "
                                  "argmax; bonus Y = argmax p",
                        summary=f"LOSSY: greedy static ensemble, target weight {w}")


#: The registered members (target weight 1/2; the factories take any w in [0, 1]).
STATIC_ENSEMBLE = replace(static_ensemble(Fraction(1, 2)), name="static-ensemble")
STATIC_ENSEMBLE_GREEDY = replace(static_ensemble_greedy(Fraction(1, 2)),
                                 name="static-ensemble-greedy")

__all__ = ["PAPER", "STATIC_ENSEMBLE", "STATIC_ENSEMBLE_GREEDY", "static_ensemble",
           "static_ensemble_greedy"]
