"""Strict and lossy acceptance rules, the contrasts of the lossless verifiers.

Every rule here walks the draft left to right: X_i is accepted with probability a_i (given that
X_1..X_{i-1} were), the walk stops at the first rejection, and the extra token Y comes from a
rejection row r_i at the rejected position or from the bonus row after L acceptances:

    P(tau = i | X) = (prod_{j<=i} a_j) (1 - a_{i+1})  (i < L),   P(tau = L | X) = prod_j a_j,
    Y | tau = i  ~  r_{i+1}(.|X^i)  (i < L),   Y | tau = L  ~  b(.|X^L).

With p_i = p(.|X^{i-1}) and q_i = q(.|X^{i-1}):

* ``strict`` (sampled verification): draw Z ~ p_i and accept iff Z = X_i, so a_i = p_i(X_i) and
  r_i = p_i conditioned on Z != X_i; b = p. **Lossless** (each emitted token is a fresh target
  sample), but accepts less than token verification: E[a_i] = sum_x q(x) p(x) <=
  sum_x min(p(x), q(x)).
* ``greedy`` (greedy matching): accept iff X_i = argmax p_i (smallest id on ties); r_i and b are
  the argmax one-hot rows. The output is greedy decoding of the target: lossy unless p is one-hot.
* ``threshold`` (a probability threshold theta): accept iff p_i(X_i) >= theta; r_i = b = p.
* ``lenient`` (lenience l in (0, 1], Leviathan, Kalman, Matias, ICML 2023, appendix on
  lenience): a_i = min(1, p_i(X_i) / (l q_i(X_i))), r_i = normalise(max(p_i - l q_i, 0)),
  b = p; l = 1 is token verification.
* ``typical`` (Medusa's typical acceptance, Cai et al., arXiv 2401.10774): accept iff
  p_i(X_i) > min(epsilon, delta exp(-H(p_i))) with H the entropy (defaults epsilon = 0.09,
  delta = 0.3); r_i = b = p. Uses exp and log: float law only.
* ``typical-medusa`` and ``typical-medusa-fast`` (Medusa's typical acceptance as its repository
  runs it, github.com/FasterDecoding/Medusa ``medusa/model/utils.py`` at e2a5d20): the same
  acceptance as ``evaluate_posterior``'s typical branch computes it,
  p_i(X_i) > t_i = min(epsilon, delta exp(-H_i)) with H_i = -sum_v p_i(v) log(p_i(v) + 1e-5)
  (``posterior_threshold`` = epsilon = 0.09, ``posterior_alpha`` = delta = 0.3 in
  ``medusa_model.py``), and the next token (after the first rejection as after L acceptances)
  drawn as ``generate_candidates`` draws it from the target's logits after the accepted prefix:
  ``typical-medusa`` from ``get_typical_one_token``, i.e. p restricted to {v : p_i(v) >= t_i}
  and renormalised (r_i = b = that row), ``typical-medusa-fast`` (``fast=True``, the default of
  ``MedusaModel.medusa_generate``) the argmax (``torch.argmax``: smallest id on ties). They
  differ from ``typical`` only in Y: ``typical`` draws Y from p itself, so a token below the
  threshold can still be emitted there. In the repository, ``fast=False`` also routes
  ``evaluate_posterior`` to ``get_typical_posterior_mask``, called with one argument more than it
  takes (a TypeError at e2a5d20); ``typical-medusa`` is the paper's threshold acceptance with the
  shipped ``get_typical_one_token`` correction. Where no token reaches t_i (possible only for
  delta near or above 1: e^{-H} <= max p, and the 1e-5 shift adds at most 1e-5) Medusa's
  ``torch.multinomial`` gets an all -inf row and raises; the law emits the argmax there. Uses
  exp and log: float law only.

All but ``strict`` are lossy and registered with ``lossless=False``: the exact engine gives their
total variation from the target law next to their block efficiency (the distortion-efficiency
frontier on which the lossless verifiers sit at zero distortion), and the checker flags them.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from ..runtime import backend as B
from ..law import Law
from ..registry import VerifierSpec
from ..runtime.errors import check_arrays
from .common import drafted_probs, float_law_only
from .params import nonnegative, number, positive_unit, unit


def _const(like, value):
    """``value`` as a Fraction in exact mode, as a float otherwise."""
    return Fraction(value) if B.is_exact(like) else float(value)


def _normalise(rows, fallback):
    return B.safe_div(rows, B.sum(rows, axis=-1, keepdims=True), fallback)


def chain_law(accept, reject_rows, bonus) -> Law:
    """Law of a left-to-right rule: ``accept`` a_i [B, L], ``reject_rows`` r_i [B, L, V] (the
    row of Y when X_i is rejected), ``bonus`` b [B, V] (the row of Y after L acceptances)."""
    one = B.ones_like(accept[:, :1])
    reached = B.cumprod(B.concat([one, accept], axis=1), axis=1)  # prod_{j<=i} a_j
    stop = reached * B.concat([1 - accept, one], axis=1)
    return Law(stop, B.concat([reject_rows, B.expand_dims(bonus, 1)], axis=1))


def _argmax_onehot(rows):
    """One-hot rows of the argmax (smallest index among ties), same backend and dtype."""
    top = B.argsort(rows, axis=-1, descending=True)[..., :1]  # stable: first maximum
    ids = B.arange(rows.shape[-1], top)
    return B.where(ids == top, B.ones_like(rows), B.zeros_like(rows))


def strict_verification(drafts, q, p) -> Law:
    """Sampled verification: accept X_i iff a fresh target sample equals it (module doc)."""
    L = drafts.shape[-1]
    px, _ = drafted_probs(drafts, q, p)
    hit = B.where(B.arange(q.shape[-1], drafts) == B.expand_dims(drafts, -1),
                  B.ones_like(q), B.zeros_like(q))  # one-hot of X_i, [B, L, V]
    rest = _normalise(p[:, :L] * (1 - hit), p[:, :L])
    return chain_law(px, rest, p[:, L])


def greedy_matching(drafts, q, p) -> Law:
    """Accept while X_i is the target's argmax (tied maxima: the lowest token id); Y is the
    argmax (module doc)."""
    check_arrays(drafts, q, p, paths=False)
    L = drafts.shape[-1]
    top = _argmax_onehot(p)  # [B, L+1, V]
    hit = B.take_along(top[:, :L], B.expand_dims(B.as_index(drafts, q), -1), axis=-1)[..., 0]
    return chain_law(hit, top[:, :L], top[:, L])


def threshold_verification(theta) -> VerifierSpec:
    """The rule "accept iff p(X_i|X^{i-1}) >= theta", Y ~ p (module doc), as a verifier."""
    theta = number(theta, "threshold", unit("theta"))

    def law(drafts, q, p) -> Law:
        L = drafts.shape[-1]
        px, _ = drafted_probs(drafts, q, p)
        ok = B.where(px >= _const(px, theta), B.ones_like(px), B.zeros_like(px))
        return chain_law(ok, p[:, :L], p[:, L])

    return VerifierSpec(f"threshold({theta})", law, lossless=False, numpy_float=True,
                        paper="probability-threshold acceptance",
                        summary=f"LOSSY: accept while p(X_i) >= {theta}, Y ~ p")


def lenient_verification(lenience) -> VerifierSpec:
    """Token verification with lenience l in (0, 1] (module doc), as a verifier."""
    lam = lenience = number(lenience, "lenient", positive_unit("lenience"))

    def law(drafts, q, p) -> Law:
        L = drafts.shape[-1]
        px, qx = drafted_probs(drafts, q, p)
        lq = qx * _const(qx, lam)
        a = B.minimum(B.safe_div(px, lq, B.scalar(px, 1)), 1)
        # p(x) = 0 is rejected however small l q(x) is: where l q(x) underflows to 0 (l = 5e-324)
        # the division's fallback of 1 accepted tokens the target never emits
        a = B.where((px == 0) & (qx != 0), B.zeros_like(a), a)
        res = B.positive_part(p[:, :L] - q * _const(q, lam))
        return chain_law(a, _normalise(res, p[:, :L]), p[:, L])

    return VerifierSpec(f"lenient({lenience})", law, lossless=(lam == 1), numpy_float=True,
                        paper="Leviathan, Kalman, Matias, ICML 2023 (lenience)",
                        summary=f"{'' if lam == 1 else 'LOSSY: '}token verification with "
                                f"lenience {lenience}")


def typical_acceptance(epsilon: float = 0.09, delta: float = 0.3) -> VerifierSpec:
    """Medusa's typical acceptance (module doc), as a verifier (float law only)."""
    epsilon = float(number(epsilon, "typical", unit("epsilon")))
    delta = float(number(delta, "typical", nonnegative("delta")))

    def law(drafts, q, p) -> Law:
        import torch

        float_law_only(p, "typical acceptance")
        L = drafts.shape[-1]
        px, _ = drafted_probs(drafts, q, p)
        logp = torch.where(p[:, :L] > 0, p[:, :L].log(), torch.zeros_like(p[:, :L]))
        entropy = -(p[:, :L] * logp).sum(-1)
        bar = torch.clamp(delta * torch.exp(-entropy), max=epsilon)
        return chain_law((px > bar).to(p.dtype), p[:, :L], p[:, L])

    return VerifierSpec(f"typical({epsilon}, {delta})", law, lossless=False, exact=False,
                        paper="Cai et al., Medusa, arXiv 2401.10774 (typical acceptance)",
                        summary=f"LOSSY: accept while p(X_i) > min({epsilon}, {delta} e^-H(p))")



def medusa_entropy(rows):
    """The entropy in Medusa's typical threshold, -sum p log(p + 1e-5) as shipped, [..., V] ->
    [...]."""
    import torch

    return -(rows * torch.log(rows + 1e-5)).sum(-1)


def typical_medusa(epsilon: float = 0.09, delta: float = 0.3, fast: bool = False
                   ) -> VerifierSpec:
    """Medusa's typical acceptance as its repository runs it (module doc): accept while
    p(X_i) > min(epsilon, delta e^{-H}), H with Medusa's log(p + 1e-5); Y from p restricted to
    p >= that threshold (``get_typical_one_token``), or the argmax with ``fast``. Float law only."""
    rule = "typical-medusa-fast" if fast else "typical-medusa"
    epsilon = float(number(epsilon, rule, unit("epsilon")))
    delta = float(number(delta, rule, nonnegative("delta")))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        import torch

        float_law_only(p, rule)
        L = drafts.shape[-1]
        px, _ = drafted_probs(drafts, q, p)
        bar = torch.clamp(delta * torch.exp(-medusa_entropy(p)), max=epsilon)  # [B, L+1]
        if fast:
            rows = _argmax_onehot(p)
        else:
            kept = p * (p >= bar.unsqueeze(-1)).to(p.dtype)  # [B, L+1, V]
            rows = _normalise(kept, _argmax_onehot(p))
        return chain_law((px > bar[:, :L]).to(p.dtype), rows[:, :L], rows[:, L])

    y = "argmax p" if fast else "p on {p >= t}"
    return VerifierSpec(f"{rule}({epsilon}, {delta})", law, lossless=False, exact=False,
                        paper="Cai et al., Medusa, arXiv 2401.10774; FasterDecoding/Medusa "
                              "evaluate_posterior, " + ("generate_candidates fast=True" if fast
                                                        else "get_typical_one_token"),
                        node_form=f"t = min(eps, delta e^-H(p)); accept X_i iff p(X_i) > t; "
                                  f"Y ~ {y}",
                        summary=f"LOSSY: Medusa typical acceptance as run, Y ~ {y}")

STRICT = VerifierSpec(
    "strict", strict_verification, paths=1, numpy_float=True,
    node_form="accept X_i iff Z = X_i for Z ~ p(.|X^{i-1}); else output Z",
    paper="sampled verification (exact-match acceptance of a target sample)",
    summary="strict (sampled) verification: lossless, accepts less than token verification")
GREEDY = VerifierSpec(
    "greedy", greedy_matching, paths=1, lossless=False, numpy_float=True,
    node_form="accept X_i iff X_i = argmax p(.|X^{i-1}); Y = argmax",
    paper="greedy matching", summary="LOSSY: greedy matching (target argmax)")
THRESHOLD = replace(threshold_verification(Fraction(3, 10)), name="threshold")
LENIENT = replace(lenient_verification(Fraction(1, 2)), name="lenient")
TYPICAL = replace(typical_acceptance(), name="typical")
TYPICAL_MEDUSA = replace(typical_medusa(), name="typical-medusa")
TYPICAL_MEDUSA_FAST = replace(typical_medusa(fast=True), name="typical-medusa-fast")

__all__ = ["GREEDY", "LENIENT", "STRICT", "THRESHOLD", "TYPICAL", "TYPICAL_MEDUSA",
           "TYPICAL_MEDUSA_FAST", "chain_law", "greedy_matching", "lenient_verification",
           "medusa_entropy", "strict_verification", "threshold_verification",
           "typical_acceptance", "typical_medusa"]
