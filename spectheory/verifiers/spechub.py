"""SpecHub (Sun, Zhou, Chen, Sun, "SpecHub: Provable Acceleration to Multi-Draft Speculative
Decoding", EMNLP 2024, arXiv 2411.05289): two drafts that share a hub token, verified in O(V).

Drafting (the ``hub`` scheme of [`spectheory.engine.joint`][spectheory.engine.joint]). At a node with
draft row q the hub is the draft's most probable token a = argmax_x q(x) (ties: the smallest token
id, [`hub_tokens`][spectheory.registry.hub_tokens]). X1 ~ q; if X1 != a then X2 = a, else
X2 ~ q~ with

    q~(i) = q(i) / (1 - q(a))  for i != a,   q~(a) = 0,

so the ordered pair of drafts has the sparse law

    Q(i, a) = q(i),   Q(a, i) = q(a) q~(i)   (i != a),   Q = 0 on every other pair:

the drafts are distinct, X1 ~ q, and the set {X1, X2} is {a, I} with I ~ q~.

Rule at one node ([`spechub_rule`][spectheory.verifiers.spechub.spechub_rule]), for the ordered
candidates (x1, x2). With

    q_ai(j) = q(a) q~(j),   p1(j) = (p(j) - q(j))^+              (j != a),
    S_ia = sum_{j != a} (q(j) - p(j))^+,   S_ai = sum_{j != a} (q_ai(j) - p1(j))^+,
    p_a' = (p(a) - S_ai)^+,
    R(j) proportional to (p(j) - q~(j))^+ = (p1(j) - q_ai(j))^+ for j != a,   R(a) = 0,

* (x1, x2) = (i, a): accept i w.p. min(1, p(i) / q(i)); else accept a w.p. min(1, p_a' / S_ia);
  else reject, Y ~ R;
* (x1, x2) = (a, i): accept i (the second draft) w.p. min(1, p1(i) / q_ai(i)); else accept a w.p.
  min(1, p(a) / S_ai); else reject, Y ~ R

(a zero S makes its step one of probability zero: it accepts). Read as a transport from the pairs
to their members: a non-hub token i gets min(p(i), q(i)) from the pair (i, a) and then
min(q_ai(i), p1(i)) from (a, i), together min(p(i), q~(i)); the hub gets what the pairs have left,
first from the (a, .) pairs, then from the (., a) pairs, min(p(a), S_ai + S_ia), and since
S_ai + S_ia = sum_{j != a} (q~(j) - p(j))^+ = p(a) + sum_{j != a} (p(j) - q~(j))^+ >= p(a), exactly
p(a). So the output has law p, R(a) = 0, the rejection mass is R's mass, and the acceptance is

    alpha = 1 - sum_{i != a} (p(i) - q(i) / (1 - q(a)))^+ = p(a) + sum_{i != a} min(p(i), q~(i)),

the maximum flow from the pairs to their members, i.e. the best any verifier can do for this draft
law (the min-cut bound; at L = 1 it equals the direct LP optimum under ``hub`` drafting,
[`direct_lp`][spectheory.lp.direct.direct_lp], a test). With one candidate x the rule is token
verification: accept w.p. min(1, p(x) / q(x)), else Y ~ normalise((p - q)^+).

What is reconstructed. The paper's body was not available; the sampler and the staged order above
(non-hub tokens first, the hub last; for (a, i) the second draft is tested before the first) are
read from the authors' public code (the ``spechub`` branches of their Sequoia and EAGLE
verifiers), and the formulas and the acceptance were checked in exact rationals. The code's
floating-point shortcuts (accepting the hub outright when p(a) > 1 - 1e-3, for one) are not
reproduced. Choices made here:

* ties in argmax q go to the smallest token id, and the rule finds the hub from the same row q
  the drafting scheme used, so sampler and verifier agree;
* q(a) = 1 (one token of positive draft probability): q~ is undefined, the scheme drafts a alone
  and path 2 repeats path 1 (as the ``norep`` scheme's surplus paths), the rule skips the repeat
  (``rule_skips_repeats``) and is token verification, which accepts a surely;
* a pair the hub scheme never drafts (neither token is the hub, or under another scheme) rejects
  into R, so the rule is a law on any input; under other schemes SpecHub is not lossless.

Paths. K = 2 (K = 1: one draft X1 ~ q, token verification); K > 2 is refused (the paper and code
define two drafts). At L > 1 the two paths branch at the root only (each continues autoregressively
from q along its own prefix, as under ``norep``), so every deeper node of the token tree has one
candidate and the walk below the root is token verification; the node-by-node engine is
[`node_recursive_law`][spectheory.verifiers.specinfer.node_recursive_law]. The rule is O(V) per
node, a few vector operations, on torch (float32/float64, any device) and on numpy arrays of
Fractions.
"""

from __future__ import annotations

from ..runtime import backend as B
from ..runtime.errors import SpectheoryError
from ..law import MultiLaw
from ..registry import DRAFTING_MAX_PATHS, VerifierSpec, hub_tokens
from .common import drafted_ratio, normalise_residual
from .specinfer import node_recursive_law

#: Most drafts SpecHub verifies at a node (the ``hub`` scheme's K).
MAX_CANDIDATES = DRAFTING_MAX_PATHS["hub"]


def _refuse(K: int, what: str) -> None:
    if K > MAX_CANDIDATES:
        raise SpectheoryError(f"spechub verifies at most {MAX_CANDIDATES} drafts ({what}; "
                              f"SpecHub, arXiv 2411.05289, defines two); got {K}")


def _at(rows, idx):
    """rows[b, k, idx[b, k, j]] for rows [B, Kr, V] and idx [B, Kr, J] -> [B, Kr, J]."""
    return B.take_along(rows, idx, axis=-1)


def hub_quantities(q_rows, p_rows):
    """The node quantities of SpecHub (module doc), rows [B, Kr, V]: a dict with ``a`` [B, Kr]
    (the hub), ``hub`` [B, Kr, V] (bool, token == a), ``qt`` (q~), ``qai``, ``p1``, ``R`` (the
    unnormalised rejection row) [B, Kr, V], and ``qa``, ``pa``, ``S_ia``, ``S_ai``, ``pa1`` (p_a')
    [B, Kr]. ``qt`` is 0 where q(a) = 1 (no companion)."""
    V = q_rows.shape[-1]
    a = hub_tokens(q_rows)
    vocab = B.arange(V, a).reshape((1,) * len(a.shape) + (V,))
    hub = vocab == B.expand_dims(a, -1)
    zero = B.zeros_like(q_rows)
    ai = B.expand_dims(a, -1)
    qa = _at(q_rows, ai)[..., 0]
    pa = _at(p_rows, ai)[..., 0]
    rest = B.sum(B.where(hub, zero, q_rows), axis=-1)  # 1 - q(a), summed: no cancellation
    qt = B.where(hub, zero, B.safe_div(q_rows, B.expand_dims(rest, -1), zero))
    qai = B.expand_dims(qa, -1) * qt
    p1 = B.where(hub, zero, B.positive_part(p_rows - q_rows))
    s_ia = B.sum(B.where(hub, zero, B.positive_part(q_rows - p_rows)), axis=-1)
    s_ai = B.sum(B.positive_part(qai - p1), axis=-1)  # 0 at the hub: qai = p1 = 0 there
    return {"a": a, "hub": hub, "qt": qt, "qai": qai, "p1": p1, "qa": qa, "pa": pa,
            "S_ia": s_ia, "S_ai": s_ai, "pa1": B.positive_part(pa - s_ai),
            "R": B.where(hub, zero, B.positive_part(p_rows - qt))}


def _normalised_rows(res, p_rows):
    """normalise(res) row by row, p where res has no mass (rows [B, Kr, V]); a fresh array."""
    shape = tuple(res.shape)
    V = shape[-1]
    res = res.reshape(-1, V)  # a fresh array (normalised in place on torch)
    out = normalise_residual(res, B.sum(res, axis=-1), p_rows.reshape(-1, V))
    return out.reshape(shape)


def spechub_rule(member, tok, q_rows, p_rows):
    """SpecHub at one node of the token tree (module doc), in the signature of
    [`node_recursive_law`][spectheory.verifiers.specinfer.node_recursive_law].

    member [B, Kr, K'] (int 0/1; K' <= 2), tok [B, K'], q_rows, p_rows [B, Kr, V] ->
    accept [B, Kr, K'], none [B, Kr], correction [B, Kr, V]. A candidate whose token the first
    carries is skipped (a repeated path of the ``hub`` scheme); two distinct candidates are the
    ordered drafts (x1, x2), one is token-verified."""
    Bsz, Kr, K = (int(s) for s in member.shape)
    _refuse(K, "candidates at a node")
    h = hub_quantities(q_rows, p_rows)
    one = B.ones_like(h["qa"])
    zero = B.zeros_like(h["qa"])
    t = B.broadcast_to(B.expand_dims(tok, 1), (Bsz, Kr, K))  # [B, Kr, K']
    on = member == 1
    if B.is_torch(t):
        t = t.contiguous()
    c1 = on[:, :, 0]
    if K == 2:  # the second candidate counts when it carries a new token
        c2 = on[:, :, 1] & ~(c1 & (t[:, :, 1] == t[:, :, 0]))
    else:
        c2 = c1 & ~c1
    # one candidate: token verification of x (column 0 if it is a candidate, else column 1)
    col = B.to_int(~c1) if K == 2 else B.to_int(c1 & ~c1)
    x = _at(t, B.expand_dims(col, -1))  # [B, Kr, 1]
    s = B.minimum(drafted_ratio(_at(p_rows, x), _at(q_rows, x)), 1)[..., 0]
    if K == 1:
        pair_a = pair_b = c1 & ~c1
        s1 = s4 = s2 = s3 = zero
    else:
        x1, x2 = t[:, :, 0], t[:, :, 1]
        both = c1 & c2
        pair_a = both & (x2 == h["a"]) & (x1 != h["a"])  # (i, a): the hub second
        pair_b = both & (x1 == h["a"]) & (x2 != h["a"])  # (a, i): the hub first
        s1 = B.minimum(drafted_ratio(_at(p_rows, t[:, :, :1]), _at(q_rows, t[:, :, :1])),
                       1)[..., 0]
        s4 = B.minimum(B.safe_div(h["pa1"], h["S_ia"], one), 1)
        s2 = B.minimum(B.safe_div(_at(h["p1"], t[:, :, 1:]), _at(h["qai"], t[:, :, 1:]),
                                  B.expand_dims(one, -1)), 1)[..., 0]
        s3 = B.minimum(B.safe_div(h["pa"], h["S_ai"], one), 1)
    single = c1 ^ c2
    # pair (i, a): x1 w.p. s1, then x2 = a w.p. s4; pair (a, i): x2 w.p. s2, then x1 = a w.p. s3
    acc1 = B.where(pair_a, s1, B.where(pair_b, (1 - s2) * s3, B.where(single & c1, s, zero)))
    acc2 = B.where(pair_a, (1 - s1) * s4, B.where(pair_b, s2, B.where(single & c2, s, zero)))
    none = B.where(pair_a, (1 - s1) * (1 - s4), B.where(pair_b, (1 - s2) * (1 - s3),
                                                          B.where(single, 1 - s, one)))
    accept = B.stack([acc1, acc2][:K], axis=2)
    # corrections: R after two candidates, normalise((p - q)^+) after one, p after none
    res = B.where(B.expand_dims(c1 & c2, -1), h["R"], B.positive_part(p_rows - q_rows))
    corr = _normalised_rows(res, p_rows)
    corr = B.where(B.expand_dims(c1 | c2, -1), corr, p_rows)
    return accept, none, corr


def spechub(drafts, q, p) -> MultiLaw:
    """SpecHub on the token tree of K <= 2 paths under ``hub`` drafting (module doc)."""
    _refuse(int(drafts.shape[1]), "paths")
    return node_recursive_law(drafts, q, p, spechub_rule)


SPECHUB = VerifierSpec(
    "spechub", spechub, paths=None, drafting="hub",
    node_form="hub a = argmax q; (i, a): accept i w.p. min(1, p/q), then a; (a, i): accept i "
              "w.p. min(1, (p-q)^+/(q(a) q~)), then a; reject into (p - q~)^+ off a",
    paper="Sun et al., SpecHub: Provable Acceleration to Multi-Draft Speculative Decoding, "
          "EMNLP 2024, arXiv 2411.05289",
    summary="two drafts through the draft's top token, verified in O(V) (hub drafting, K <= 2)",
    rule=spechub_rule, rule_skips_repeats=True)
