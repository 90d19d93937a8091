"""Relaxed (lossy) acceptance rules as one family of left-to-right chain laws.

Every rule here walks the single drafted path X_1..X_L left to right exactly as
[`chain_law`][spectheory.verifiers.contrasts.chain_law] describes: X_i is accepted with probability
a_i given that X_1..X_{i-1} were, the walk stops at the first rejection, and the extra token Y comes
from a rejection row r_i (X_i rejected) or from the bonus row b (all L accepted). With
p_i = p(.|X^{i-1}) (target) and q_i = q(.|X^{i-1}) (draft), ``max p_i`` its largest entry,
``p_i[m]`` its m-th largest entry (counted with multiplicity) and ``g_i`` its argmax (smallest id
among ties), the rules are:

| rule | a_i | r_i | b | source |
|---|---|---|---|---|
| ``additive(eps)`` | 1{p_i(X_i) >= max p_i - eps} | e_{g_i} | e_{g} | arXiv 2606.30265 (additive relaxation) |
| ``multiplicative(lam)`` | 1{p_i(X_i) >= lam max p_i} | e_{g_i} | e_{g} | arXiv 2606.30265 (multiplicative) |
| ``top_m(m)`` | 1{p_i(X_i) >= p_i[m]} | e_{g_i} | e_{g} | arXiv 2606.30265 (top-m) |
| ``entropy_threshold(beta)`` | 1{X_i = g_i or p_i(X_i) >= beta e^{-H(p_i)}} | e_{g_i} | e_{g} | arXiv 2606.30265 (entropy threshold; form chosen here) |
| ``trtllm_relaxed(k, delta)`` | X_i is among the k most probable and (rank 1 or p_i(X_i) >= max p_i - delta) | e_{g_i} | e_{g} | TensorRT-LLM #3865, ``mtpRelaxedAcceptanceKernel`` |
| ``sglang_threshold(ts, ta)`` | 1 if p_i(X_i) >= ts, else min(1, p_i(X_i) / ta) | p_i without X_i | p | SGLang ``TreeSpeculativeSamplingTargetOnly`` |
| ``cactus(delta)`` | min(1, h_i(X_i) / q_i(X_i)) | normalise(max(h_i - q_i, 0)) | p | Cactus, arXiv 2604.04987 |

Rejection and bonus rows. The greedy-family rules (the first five) are rules of greedy decoding:
arXiv 2606.30265 studies them as acceptance events of a deterministic decoder and does not sample
a correction, and TensorRT-LLM emits its "golden token", the target's top-1 (``topKIndices[0]``),
after the accepted tokens. So Y is the target argmax in every case here (the choice for
2606.30265's rules, where the paper leaves Y's law open; e_g is one-hot). ``additive(0)`` and
``multiplicative(1)`` accept exactly the tokens tied at the maximum, which is greedy matching
([`greedy_matching`][spectheory.verifiers.contrasts.greedy_matching]) up to ties; ``top_m(1)`` the
same.

* **top-m, ties.** "Among the m most probable tokens" is read as the lower level set
  {x : p_i(x) >= p_i[m]} (2606.30265 characterises rejection regions as lower level sets), so a
  token tied with the m-th is accepted.
* **entropy threshold.** The exact form of 2606.30265's entropy-thresholded criterion was not
  reachable; the form here is a typical-set test, accept iff X_i is the argmax or
  p_i(X_i) >= beta exp(-H(p_i)) (exp(-H) is the typical probability; Medusa's
  [`typical_acceptance`][spectheory.verifiers.contrasts.typical_acceptance] caps it at epsilon and
  samples Y ~ p instead). Uses exp and log: float law only.
* **TensorRT-LLM.** The kernel reads the target's top-k (probabilities: ``torch.softmax`` in
  ``_process_generation_logits`` of ``tensorrt_llm/_torch/speculative/mtp.py``, then
  ``torch.topk``) and accepts X_i iff it equals entry 0, or entry jj >= 1 with value
  >= (entry 0) - delta; the scan stops at the first entry below that threshold. Ties at the k-th
  place are ranked here by id (smallest first); ``torch.topk`` leaves their order open.
* **SGLang.** On a chain (one candidate per node) the kernel's accumulated probability is the
  candidate's own, one uniform coin per node: accept iff coin <= p(X_i) / ta or
  p(X_i) >= ts. On rejection it writes the candidate's target probability into the (zero)
  draft buffer and samples relu(p - that buffer), i.e. p with X_i removed, renormalised; the bonus
  row is p. ts = ta = 1 (the defaults) is strict verification
  ([`strict_verification`][spectheory.verifiers.contrasts.strict_verification]): lossless.
* **Cactus** (``solve_constraint`` in github.com/MANGA-UOFA/Cactus, ``cactus/cactus.py``; its q is
  our target p, its p our draft q): h_i(X_i) = min(1, p_i(X_i) + sqrt(2 delta p_i(X_i)
  (1 - p_i(X_i)))) and h_i(y) = p_i(y) (1 - h_i(X_i)) / (1 - p_i(X_i)) for y != X_i (h_i = p_i when
  p_i(X_i) = 1): the target reweighted towards the drafted token, the move chosen so that the
  second-order Taylor term of KL(h_i || p_i) equals delta. Accept w.p. min(1, h_i(X_i) /
  q_i(X_i)), correct from normalise(max(h_i - q_i, 0)) (p_i where that is zero); the bonus token
  is the target's (vLLM's rejection sampler, which Cactus patches). delta = 0 is token
  verification. Uses a square root: float law only.

Every rule is a pure batched function of (drafts [B, L], q [B, L, V], p [B, L+1, V]) and is
registered with ``lossless=False``; the exact engine gives its tau pmf, block efficiency and TV
to the target ([`analyze`][spectheory.engine.analysis.analyze]) and its law over n iterations
([`multi_iteration_law`][spectheory.engine.analysis.multi_iteration_law]);
[`divergences`][spectheory.verifiers.relaxed.divergences] adds KL.

Greedy-tree top-m coverage (arXiv 2606.30265) drafts a tree, not a chain: its exact law is
[`greedy_tree_coverage`][spectheory.verifiers.relaxed.greedy_tree_coverage] (deterministic; the
target's greedy path while the drafter's top-m covers it).
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np

from ..runtime import backend as B
from ..law import Law
from ..registry import VerifierSpec
from ..runtime.errors import InputError, check_arrays
from .common import drafted_probs, float_law_only
from .params import count, nonnegative, number, positive_unit, unit
from .contrasts import _argmax_onehot, _const, _normalise, chain_law
from ..runtime.limits import shown as _repr_cut




def _kth_largest(rows, k: int):
    """The k-th largest entry of each row (with multiplicity), [..., V] -> [...]."""
    order = B.argsort(rows, axis=-1, descending=True)[..., k - 1:k]
    return B.take_along(rows, order, axis=-1)[..., 0]


def _indicator(cond, like):
    return B.where(cond, B.ones_like(like), B.zeros_like(like))


def _greedy_rows(p, L: int):
    """(r [B, L, V], b [B, V]): the argmax one-hot rows of the greedy-family rules."""
    top = _argmax_onehot(p)  # [B, L+1, V]
    return top[:, :L], top[:, L]


def greedy_family_law(accept, p) -> Law:
    """Chain law of a greedy-family rule: ``accept`` a_i [B, L], Y = the target argmax."""
    r, b = _greedy_rows(p, accept.shape[-1])
    return chain_law(accept, r, b)


def additive_acceptance(eps) -> VerifierSpec:
    """Accept X_i iff p(X_i) >= max p - eps; Y = argmax p (arXiv 2606.30265, additive
    relaxation; module doc). Exact in rationals for rational eps."""
    eps = number(eps, "additive", unit("eps"))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        L = drafts.shape[-1]
        px, _ = drafted_probs(drafts, q, p)  # [B, L]
        top = _kth_largest(p[:, :L], 1)  # [B, L]
        return greedy_family_law(_indicator(px >= top - _const(px, eps), px), p)

    return VerifierSpec(f"additive({eps})", law, lossless=False, numpy_float=True,
                        paper="Sharma, arXiv 2606.30265 (additive relaxed acceptance)",
                        node_form="accept X_i iff p(X_i) >= max p - eps; Y = argmax p",
                        summary=f"LOSSY: accept while p(X_i) >= max p - {eps}, Y = argmax")


def multiplicative_acceptance(lam) -> VerifierSpec:
    """Accept X_i iff p(X_i) >= lam max p, lam in [0, 1]; Y = argmax p (arXiv 2606.30265,
    multiplicative relaxation; module doc)."""
    lam = number(lam, "multiplicative", unit("lam"))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        L = drafts.shape[-1]
        px, _ = drafted_probs(drafts, q, p)
        top = _kth_largest(p[:, :L], 1)
        return greedy_family_law(_indicator(px >= top * _const(px, lam), px), p)

    return VerifierSpec(f"multiplicative({lam})", law, lossless=False, numpy_float=True,
                        paper="Sharma, arXiv 2606.30265 (multiplicative relaxed acceptance)",
                        node_form="accept X_i iff p(X_i) >= lambda max p; Y = argmax p",
                        summary=f"LOSSY: accept while p(X_i) >= {lam} max p, Y = argmax")


def top_m_acceptance(m: int) -> VerifierSpec:
    """Accept X_i iff p(X_i) >= the m-th largest target probability (X_i among the m most
    probable, ties included); Y = argmax p (arXiv 2606.30265, top-m; module doc)."""
    m = number(m, "top-m", count("m"))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        L = drafts.shape[-1]
        px, _ = drafted_probs(drafts, q, p)
        bar = _kth_largest(p[:, :L], min(m, p.shape[-1]))
        return greedy_family_law(_indicator(px >= bar, px), p)

    return VerifierSpec(f"top-m({m})", law, lossless=False, numpy_float=True,
                        paper="Sharma, arXiv 2606.30265 (top-m relaxed acceptance)",
                        node_form="accept X_i iff p(X_i) >= m-th largest p; Y = argmax p",
                        summary=f"LOSSY: accept while X_i is among the {m} most probable, "
                                "Y = argmax")


def entropy_threshold_acceptance(beta: float) -> VerifierSpec:
    """Accept X_i iff it is the argmax or p(X_i) >= beta exp(-H(p)); Y = argmax p (the
    entropy-thresholded form chosen in the module doc; float law only)."""
    beta = float(number(beta, "entropy-threshold", nonnegative("beta")))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        import torch

        float_law_only(p, "entropy-threshold acceptance")
        L = drafts.shape[-1]
        px, _ = drafted_probs(drafts, q, p)
        rows = p[:, :L]
        logp = torch.where(rows > 0, rows.log(), torch.zeros_like(rows))
        bar = beta * torch.exp((rows * logp).sum(-1))  # beta e^{-H}, [B, L]
        top = _argmax_onehot(rows)
        hit = B.take_along(top, B.expand_dims(B.as_index(drafts, q), -1), axis=-1)[..., 0]
        ok = ((px >= bar) | (hit > 0)).to(p.dtype)
        return greedy_family_law(ok, p)

    return VerifierSpec(f"entropy-threshold({beta})", law, lossless=False, exact=False,
                        paper="Sharma, arXiv 2606.30265 (entropy-thresholded acceptance; form "
                              "chosen: typical-set test)",
                        node_form="accept X_i iff X_i = argmax p or p(X_i) >= beta e^{-H(p)}",
                        summary=f"LOSSY: accept while p(X_i) >= {beta} e^-H(p), Y = argmax")


def trtllm_relaxed_acceptance(topk: int, delta) -> VerifierSpec:
    """TensorRT-LLM's relaxed acceptance (#3865; ``mtpRelaxedAcceptanceKernel``): accept X_i iff
    it is the target's top-1, or among its top-``topk`` with p(X_i) >= max p - delta; Y = the
    top-1 (module doc)."""
    topk = number(topk, "trtllm-relaxed", count("k"))
    delta = number(delta, "trtllm-relaxed", unit("delta"))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        check_arrays(drafts, q, p, paths=False)
        L, V = drafts.shape[-1], p.shape[-1]
        rows = p[:, :L]
        order = B.argsort(rows, axis=-1, descending=True)  # rank by (p desc, id asc)
        idx = B.expand_dims(B.as_index(drafts, q), -1)
        rank = B.take_along(B.argsort(order, axis=-1), idx, axis=-1)[..., 0]  # 0-based
        px, _ = drafted_probs(drafts, q, p)
        top = _kth_largest(rows, 1)
        near = px >= top - _const(px, delta)
        ok = (rank == 0) | ((rank < min(topk, V)) & near)
        return greedy_family_law(_indicator(ok, px), p)

    return VerifierSpec(f"trtllm-relaxed({topk}, {delta})", law, lossless=False,
                        numpy_float=True,
                        paper="TensorRT-LLM #3865 (relaxed acceptance, mtpRelaxedAcceptanceKernel)",
                        node_form="accept X_i iff rank 1, or rank <= k and p(X_i) >= max p - "
                                  "delta; Y = top-1",
                        summary=f"LOSSY: TensorRT-LLM relaxed top-{topk}/delta {delta}, "
                                "Y = top-1")


def sglang_threshold_acceptance(threshold_single=1, threshold_acc=1) -> VerifierSpec:
    """SGLang's ``threshold_single`` / ``threshold_acc`` on a chain: a_i = 1 if p(X_i) >= ts,
    else min(1, p(X_i) / ta); Y ~ p without X_i on rejection, ~ p as bonus (module doc)."""
    ts = number(threshold_single, "sglang-threshold", unit("threshold_single"))
    ta = number(threshold_acc, "sglang-threshold", positive_unit("threshold_acc"))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        L = drafts.shape[-1]
        px, _ = drafted_probs(drafts, q, p)
        a = B.where(px >= _const(px, ts), B.ones_like(px),
                    B.minimum(px / _const(px, ta), 1))
        hit = _indicator(B.arange(q.shape[-1], drafts) == B.expand_dims(drafts, -1), q)
        rest = _normalise(p[:, :L] * (1 - hit), p[:, :L])
        return chain_law(a, rest, p[:, L])

    lossless = ts == 1 and ta == 1
    return VerifierSpec(f"sglang-threshold({ts}, {ta})", law, lossless=lossless,
                        numpy_float=True,
                        paper="SGLang sgl-kernel speculative_sampling.cuh "
                              "(threshold_single, threshold_acc)",
                        node_form="accept X_i w.p. 1 if p(X_i) >= ts else min(1, p(X_i)/ta); "
                                  "else Y ~ p without X_i",
                        summary=f"{'' if lossless else 'LOSSY: '}SGLang thresholds "
                                f"single {ts}, acc {ta} on a chain")


def cactus_target(px, p_rows, drafts, delta: float):
    """Cactus's reweighted target h [B, L, V] for the drafted tokens (module doc); ``px``
    [B, L] = p(X_i), ``p_rows`` [B, L, V], ``drafts`` [B, L]."""
    import torch

    hx = (px + torch.sqrt(2 * delta * px * (1 - px))).clamp(0.0, 1.0)  # [B, L]
    scale = torch.where(px < 1, (1 - hx) / torch.where(px < 1, 1 - px, torch.ones_like(px)),
                        torch.ones_like(px))
    h = p_rows * scale.unsqueeze(-1)
    h = h.scatter(-1, drafts.long().unsqueeze(-1), hx.unsqueeze(-1))
    return h.clamp(0.0, 1.0)


def cactus_acceptance(delta: float) -> VerifierSpec:
    """Cactus (Hao, Mou, ICLR 2026, arXiv 2604.04987): token verification against the
    reweighted target h (module doc). Float law only."""
    delta = float(number(delta, "cactus", nonnegative("delta")))

    def law(drafts, q, p) -> Law:  # drafts [B, L], q [B, L, V], p [B, L+1, V]
        import torch

        float_law_only(p, "cactus")
        L = drafts.shape[-1]
        px, qx = drafted_probs(drafts, q, p)
        h = cactus_target(px, p[:, :L], drafts, delta)  # [B, L, V]
        hx = torch.gather(h, -1, drafts.long().unsqueeze(-1))[..., 0]
        a = torch.where(qx > 0, hx / torch.where(qx > 0, qx, torch.ones_like(qx)),
                        torch.ones_like(qx)).clamp(max=1.0)
        res = (h - q).clamp(min=0.0)
        return chain_law(a, _normalise(res, p[:, :L]), p[:, L])

    return VerifierSpec(f"cactus({delta})", law, lossless=(delta == 0), exact=False,
                        paper="Hao, Mou, Cactus, ICLR 2026, arXiv 2604.04987",
                        node_form="h = p moved towards X_i by sqrt(2 delta p(1-p)); accept w.p. "
                                  "min(1, h(X_i)/q(X_i)), else Y ~ normalise(max(h - q, 0))",
                        summary=f"LOSSY: Cactus, KL budget {delta} (second-order)")


# ----------------------------------------------------------------------------- divergences

#: Relative error bound of one float64 log term, used in the stated KL error bound.
_ULP = 2.0**-52


def _law_values(law, name: str) -> list:
    """A law's entries as a list (a 1-D array or sequence of Fractions or real numbers), each
    finite and >= 0, else a one-line `InputError`."""
    if isinstance(law, (dict, str, bytes)) or not hasattr(law, "__len__"):
        raise InputError(f"kl_divergence: {name} must be a 1-D array of probabilities, not "
                         f"{type(law).__name__}")
    if hasattr(law, "detach"):  # a torch tensor: its values
        vals = law.detach().cpu().double().reshape(-1).tolist()
    elif hasattr(law, "shape"):
        vals = list(np.asarray(law, dtype=object).reshape(-1))
    else:
        vals = list(law)
    for v in vals:
        ok = isinstance(v, (Fraction, int, float, np.integer, np.floating)) and \
            not isinstance(v, (bool, np.bool_))
        if not ok or not math.isfinite(v) or v < 0:
            raise InputError(f"kl_divergence: {name} holds {_repr_cut(v, 40)}; entries are finite "
                             "probabilities >= 0")
    return vals


def kl_divergence(a, b):
    """KL(a || b) = sum a log(a / b) of two laws over the same sequences (1-D arrays of
    Fractions or floats); returns (value, error bound). ``inf`` where a > 0 = b. Each term is
    a float64 log of the exact ratio (Fractions) or of float ratios; the bound
    sum_y a(y) (|log(a(y)/b(y))| + 2) * 4 * 2^-52 + n 2^-52 covers the rounding of the ratio,
    the log, the product and the sum (float inputs: add their own error)."""
    a, b = _law_values(a, "a"), _law_values(b, "b")
    if len(a) != len(b):
        raise InputError(f"kl_divergence: the laws have {len(a)} and {len(b)} entries; they "
                         "must be over the same sequences")
    total, err, n = 0.0, 0.0, 0
    for x, y in zip(a, b):
        if x == 0:
            continue
        if y == 0:
            return math.inf, 0.0
        r = x / y
        lg = math.log(r) if not isinstance(r, Fraction) else \
            (math.log(r.numerator) - math.log(r.denominator))
        term = float(x) * lg
        total += term
        err += float(x) * (abs(lg) + 2) * 4 * _ULP
        n += 1
    return total, err + n * _ULP * max(1.0, abs(total))


def divergences(analysis) -> dict:
    """TV (exact where the analysis is) and KL(output || target), KL(target || output) (float,
    with error bounds) of an [`ExactAnalysis`][spectheory.engine.analysis.ExactAnalysis] run with
    its laws kept."""
    out, tgt = getattr(analysis, "output_law", None), getattr(analysis, "target_law", None)
    if not hasattr(analysis, "tv_to_target") or not hasattr(analysis, "exact"):
        raise InputError(f"divergences take an ExactAnalysis (from analyze), not "
                         f"{type(analysis).__name__}")
    if out is None or tgt is None:
        raise InputError("divergences need the output and target laws (analyze(..., "
                         "laws=True))")
    conv = (lambda t: list(t)) if analysis.exact else (lambda t: [float(v) for v in t.reshape(-1)])
    o, t = conv(out), conv(tgt)
    kl_ot, e1 = kl_divergence(o, t)
    kl_to, e2 = kl_divergence(t, o)
    return {"tv": analysis.tv_to_target, "kl_output_target": kl_ot, "kl_output_target_err": e1,
            "kl_target_output": kl_to, "kl_target_output_err": e2,
            "block_efficiency": analysis.block_efficiency}


#: The registered members (default parameters; the factories above take any).
ADDITIVE = replace(additive_acceptance(Fraction(1, 10)), name="additive")
MULTIPLICATIVE = replace(multiplicative_acceptance(Fraction(1, 2)), name="multiplicative")
TOP_M = replace(top_m_acceptance(2), name="top-m")
ENTROPY_THRESHOLD = replace(entropy_threshold_acceptance(0.5), name="entropy-threshold")
TRTLLM_RELAXED = replace(trtllm_relaxed_acceptance(3, Fraction(1, 5)), name="trtllm-relaxed")
SGLANG_THRESHOLD = replace(sglang_threshold_acceptance(Fraction(1, 2), Fraction(1, 2)),
                           name="sglang-threshold")
CACTUS = replace(cactus_acceptance(0.5), name="cactus")

#: Registered relaxed rules, in listing order.
RELAXED = (ADDITIVE, MULTIPLICATIVE, TOP_M, ENTROPY_THRESHOLD, TRTLLM_RELAXED, SGLANG_THRESHOLD,
           CACTUS)

__all__ = ["ADDITIVE", "CACTUS", "ENTROPY_THRESHOLD", "MULTIPLICATIVE", "RELAXED",
           "SGLANG_THRESHOLD", "TOP_M", "TRTLLM_RELAXED", "additive_acceptance",
           "cactus_acceptance", "cactus_target", "divergences", "entropy_threshold_acceptance",
           "greedy_family_law", "greedy_tree_coverage", "kl_divergence", "multiplicative_acceptance",
           "sglang_threshold_acceptance", "top_m_acceptance", "trtllm_relaxed_acceptance"]


# ----------------------------------------------------------------------------- greedy trees


def greedy_tree_coverage(instance, m: int, exact: bool | None = None):
    """Greedy tree decoding with the drafter's top-m candidates at every node (arXiv 2606.30265,
    greedy-tree top-m coverage), as an [`ExactAnalysis`][spectheory.engine.analysis.ExactAnalysis].

    The drafter proposes, below each node, its m most probable tokens (the level set
    q(x) >= q[m], ties with the m-th included, as for ``top_m_acceptance``; a token of draft
    probability 0 is never proposed); the verifier follows the target's greedy token
    g_i = argmax p(.|g^{i-1}) (smallest id among ties) while it is covered by the candidates, and
    emits g_{tau+1} after the last covered one (tau <= L):

        tau = min{i : g_{i+1} not in top-m q(.|g^i)} (L if every g_i is covered),
        output block = g_1 .. g_{tau+1}, then target sampling up to L + 1 tokens.

    Deterministic: tau has a one-point law. The output law is compared with the target's over
    L + 1 tokens (TV exact in rationals). m >= V covers every greedy token of positive draft
    probability."""
    from ..engine.analysis import ExactAnalysis

    m = number(m, "greedy-tree-coverage", count("m"))
    from ..inputs.instances import check_instance

    instance = check_instance(instance, "greedy_tree_coverage")
    exact = instance.exact if exact is None else exact
    inst = instance.to_exact() if exact else instance.to_float()
    V, L = inst.vocab_size, inst.block_length
    one = Fraction(1) if exact else 1.0

    def row(model, prefix):
        idx = 0
        for t in prefix:
            idx = idx * V + t
        return list(model.level(len(prefix))[idx])

    g: list = []
    tau = L
    for i in range(L + 1):
        p = row(inst.target, g)
        gi = max(range(V), key=lambda x: (p[x], -x))
        if i < L and tau == L:
            q = row(inst.draft, g)
            bar = sorted(q, reverse=True)[min(m, V) - 1]
            if q[gi] < bar or q[gi] == 0:
                tau = i
        g.append(gi)
        if tau < L and len(g) == tau + 1:
            break
    block = g[:tau + 1]
    out = [one * 0] * V ** (L + 1)
    tgt = [one * 0] * V ** (L + 1)

    def fill(prefix, mass, law):
        if len(prefix) == L + 1:
            idx = 0
            for t in prefix:
                idx = idx * V + t
            law[idx] += mass
            return
        p = row(inst.target, prefix)
        for a in range(V):
            if p[a] != 0:
                fill(prefix + [a], mass * p[a], law)

    fill(block, one, out)
    fill([], one, tgt)
    tv = sum((abs(a - b) for a, b in zip(out, tgt)), one * 0) / 2
    tv = tv if exact else float(tv)  # a Python float in float mode, as every analysis gives
    pmf = [one * int(i == tau) for i in range(L + 1)]
    laws = [np.array(law, dtype=object if exact else np.float64) for law in (out, tgt)]
    return ExactAnalysis(f"greedy-tree-top-{m}", V, L, exact, pmf, one * tau, one * (tau + 1),
                         tv, *laws, {"greedy_path": block, "m": m}, "closed form",
                         backend="numpy")
