"""What the verifier is told about q: replicas of engine reports from 2025-2026.

Every rule of speculative sampling divides by q, the law the draft tokens were drawn from. The
reports replicated here each hand the verifier something else, and they fall into three groups
with three different consequences:

**Stand-ins for q.** The verifier is handed no q at all and treats each drafted token as drafted
with probability one (q = 1 at X_i, 0 elsewhere):

    accept X_i with probability p(X_i|X^{i-1});
    on rejection Y ~ p(.|X^{i-1}) with X_i removed, renormalised.

Given any drafted token x, position one then emits x with probability p(x) and y != x with
probability (1 - p(x)) p(y) / (1 - p(x)) = p(y): the target law, **whatever** law x was drawn
from. So these rules are lossless for every proposer (the registered `ngram` verifier is this
rule); what they lose is acceptance. With drafts sampled from q a position accepts
sum_x q(x) p(x) where token verification (Leviathan et al., ICML 2023) accepts
sum_x min(p(x), q(x)); the two agree exactly when, on every row, each token of both supports has
p(x) = 1 or q(x) = 1 (a point-mass draft, or a greedy target). With deterministic drafts
(greedy or top-k) the point mass *is* the draft's law, the rule is the right one, and it attains
the node-budget bound P(tau >= i) = p(X^i) (Thomas & Pal, arXiv 2602.16961).

* vLLM #40149 (fixed by PR #40269): the draft-model path passed `draft_probs=None` to V1's
  rejection sampler, whose fallback for n-gram drafts accepts iff p(X_i) >= u and draws the
  recovered token from p with X_i zeroed. Drafts sampled from the draft model's q:
  [`draft_probs_none`][spectheory.testing.mutants.draft_q.draft_probs_none].
* SGLang #9877 ("FIXME: leverage draft probs"): `tree_speculative_sampling_target_only` keeps
  a zero `draft_probs` buffer, walks the children with one coin against the cumulative target
  mass, and writes the target probability of each rejected child into the buffer, so the
  correction relu(p - draft_probs) is p without the rejected children. EAGLE drafts are top-k
  (greedy for one child): [`zero_draft_probs`][spectheory.testing.mutants.draft_q.zero_draft_probs]
  on the greedy chain. The issue states the acceptance as p(x) against sum min(p, q).
* EAGLE #329: the non-greedy `evaluate_posterior` sets `qx = 1.0`, accepts with `px / qx`,
  zeroes a rejected candidate in the target row and renormalises, and samples the extra token
  from that row ([`eagle_posterior_rule`][spectheory.testing.mutants.draft_q.eagle_posterior_rule]).
  EAGLE drafts the top-k children of every node, a point mass: the rule is the registered
  `topk` rule, lossless on its trees, and the issue's claim that it is not lossless is refuted.
  The rule the issue asks for instead (min(1, p/q) and norm(max(p - q, 0)) with the draft
  model's soft q) is lossy on those same top-k drafts: the kit's mutant
  `eagle-329-requested-q-on-topk`.

**Processed q.** Engines verify against the target row processed by the request's sampling
parameters (`spectheory.inputs.processing`), and drafts may be sampled from processed draft rows too.
Token verification is lossless for every draft law, so the processed target law is met exactly
whenever the verifier is handed the q the drafts were sampled from, processed or not.

* Hugging Face transformers #47932 (fix proposed in PR #47961; PR #48007 returns the
  processor-applied logits): candidate generators sample from the top-k-filtered draft row
  (`generate()`'s default top_k = 50, applied to the target's logits too) but return the raw
  logits as q. On a kept token the ratio p'/q is inflated by 1/Z, Z the raw mass top-k keeps, and
  the residual (p' - q)+ is built from mass on tokens the drafter can never propose: lossy
  ([`processed_drafting`][spectheory.testing.mutants.draft_q.processed_drafting] with
  `handed="raw"`).
* vLLM PR #56724 applies the request's top-k / top-p to the draft distribution and states that
  "the output distribution does not change": true exactly when the rejection step reads the
  processed draft q (`handed="processed"`), and the same bug as #47932 when it reads the raw one
  ([`check_draft_in_request_set`][spectheory.testing.mutants.draft_q.check_draft_in_request_set]).

**q rounded to zero.** mlxcel PR #992: in float16 a draft probability below 2^-25 rounds to 0,
and the acceptance then treats the draft as certain, so a small ratio p/q becomes an automatic
accept ([`fp16_underflow_accept`][spectheory.testing.mutants.draft_q.fp16_underflow_accept]).

All law functions take spectheory's verifier signature (`f(drafts [B, L], q [B, L, V],
p [B, L+1, V]) -> Law`, or the K-path / node-rule forms) and run in float64 torch or in exact
rationals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...runtime import backend as B
from ...runtime.errors import OptionError
from ...inputs.instances import Instance, instance_from_dict
from ...law import Law, MultiLaw
from ...registry import VerifierSpec
from ...verifiers.common import drafted_probs, residual_corrections, residuals
from ...verifiers.contrasts import chain_law
from ...verifiers.specinfer import node_recursive_law
from . import proposals

__all__ = [
    "draft_probs_none", "zero_draft_probs", "eagle_posterior_rule", "eagle_posterior",
    "eagle_top1_soft_q_sampler",
    "fp16_underflow_accept", "fp16_underflowed", "float32_accept", "processed_drafting",
    "check_draft_in_request_set", "DraftInSetCheck", "greedy_chain_instance",
    "sglang_example", "underflow_instance", "underflow_tail_instance",
    "VLLM_DRAFT_PROBS_NONE", "SGLANG_ZERO_DRAFT_PROBS", "EAGLE_Q_ONE", "MLXCEL_FP16_UNDERFLOW",
    "MLXCEL_FLOAT32_CONTROL", "FP16_UNDERFLOW_BELOW",
]


def _normalise(rows, fallback):
    return B.safe_div(rows, B.sum(rows, axis=-1, keepdims=True), fallback)


def _onehot_drafts(drafts, p):
    """One-hot rows of the drafted tokens, [B, L, V], in the backend of ``p``."""
    return B.one_hot(B.as_index(drafts, p), p.shape[-1], p)


# ----------------------------------------------------------------------------- vLLM #40149


def draft_probs_none(drafts, q, p) -> Law:
    """vLLM V1's rejection sampler called with `draft_probs=None` on model drafts (vLLM #40149).

    Replica of the consequence described in vLLM issue #40149 (fixed by PR #40269): the
    draft-model path of `GPUModelRunner._sample` passed `None` for `draft_probs`, so the
    rejection sampler took its fallback for n-gram drafts, which regards the draft probability
    as 1:

        accept X_i iff p(X_i|X^{i-1}) / 1 >= u,  u uniform in [0, 1): probability p(X_i|X^{i-1});
        recovered token: p(.|X^{i-1}) with X_i zeroed, renormalised;
        after L acceptances the bonus token from p(.|X^L).

    `q` is not read. Lossless for any drafting (module doc), so the exact engine finds TV = 0;
    with drafts sampled from q each position accepts sum_x q(x) p(x) instead of
    sum_x min(p(x), q(x)). The same law as the registered `ngram` verifier (a test).
    """
    L = drafts.shape[-1]
    px, _ = drafted_probs(drafts, q, p)
    accept = B.minimum(px, 1)
    rows = p[:, :L] * (1 - _onehot_drafts(drafts, p))
    return chain_law(accept, _normalise(rows, p[:, :L]), p[:, L])


# ----------------------------------------------------------------------------- SGLang #9877


def zero_draft_probs(drafts, q, p) -> Law:
    """SGLang's `tree_speculative_sampling_target_only` with its zero `draft_probs` buffer, on
    a chain (one child per node; SGLang issue #9877).

    Replica from the description in SGLang issue #9877 ("FIXME: leverage draft probs"; the
    buffer is allocated as zeros in `eagle_utils.py`): at each depth one coin u is compared with
    the cumulative target mass of the children tried so far (threshold_acc = 1; with one child,
    `prob_acc` = p(X_i)), a child is accepted when u <= prob_acc, and a rejected child's target
    probability is written into `draft_probs`, so the correction is
    normalise(relu(p - draft_probs)) = p without X_i. `q` is not read.

    On EAGLE's greedy chain (top-1 drafts) this is the right rule for the draft (the draft's law
    is the point mass) and accepts p(X^i) at depth i; the loss the issue describes is against
    sampling the child from q and verifying with q: sum_x min(p(x), q(x)) per position.
    """
    L = drafts.shape[-1]
    px, _ = drafted_probs(drafts, q, p)
    prob_acc = px
    accept = B.minimum(prob_acc, 1)  # P(u <= prob_acc), u uniform
    buffer = _onehot_drafts(drafts, p) * B.expand_dims(px, -1)  # the rejected child's p
    corr = _normalise(B.positive_part(p[:, :L] - buffer), p[:, :L])
    return chain_law(accept, corr, p[:, L])


# ----------------------------------------------------------------------------- EAGLE #329


def _row_at(rows, tok):
    """rows[b, k, tok[b]] for rows [B, K, V] and tok [B] -> [B, K]."""
    Bsz, K, _ = rows.shape
    idx = B.broadcast_to(tok.reshape(Bsz, 1, 1), (Bsz, K, 1))
    return B.take_along(rows, idx, axis=-1)[..., 0]


def eagle_posterior_rule(member, tok, q_rows, p_rows):
    """EAGLE's non-greedy `evaluate_posterior` at one node (EAGLE #329), as a node rule.

    Replica from the code quoted in EAGLE issue #329 (and #183): the target row `gtp` is the
    processed target p(.|u); the candidates of the node are visited in path order and, for
    each, `qx = 1.0`, `acp = px / qx = gtp[x]`; accepted with probability `acp`, else
    `gtp[x] = 0` and `gtp` is renormalised; when every candidate is rejected the extra token is
    sampled from `gtp`. A candidate token met again (paths through one node) has `gtp[x] = 0`
    and is rejected surely. `q_rows` is not read.

    Node-rule signature of `spectheory.verifiers.specinfer.node_recursive_law`:
    `member [B, K, K']`, `tok [B, K']`, rows `[B, K, V]` -> (accept [B, K, K'], none [B, K],
    correction [B, K, V]). On EAGLE's top-k children this is the registered `topk` rule
    (a test checks the laws are equal).
    """
    K = tok.shape[1]
    V = p_rows.shape[-1]
    gtp = p_rows
    survive = B.ones_like(p_rows[..., 0])
    accepts = []
    for j in range(K):
        t = tok[:, j]
        active = member[:, :, j] == 1
        acp = B.where(active, _row_at(gtp, t), B.zeros_like(survive))  # px / qx with qx = 1
        accepts.append(survive * acp)
        survive = survive * (1 - acp)
        onehot = B.one_hot(B.broadcast_to(B.expand_dims(t, 1), active.shape), V, p_rows)
        zeroed = gtp * (1 - onehot)
        gtp = B.where(B.expand_dims(active, -1), _normalise(zeroed, gtp), gtp)
    return B.stack(accepts, axis=2), survive, gtp


def eagle_top1_soft_q_sampler(q_rows: torch.Tensor, generator=None):
    """Draft sampler of the change EAGLE #329 asks for, made in the verifier alone: EAGLE still
    drafts its top-ranked child (argmax of q; top-k for k children) while the verifier is handed
    the draft model's soft q. Returns (tokens [B], q_reported [B, V]) for
    [`check_proposal`][spectheory.testing.checks.sampler.check_proposal]."""
    return torch.argmax(q_rows, dim=-1), q_rows


def eagle_posterior(drafts, q, p) -> MultiLaw:
    """EAGLE's non-greedy verification on the token tree of K drafted paths (EAGLE #329): the
    node rule [`eagle_posterior_rule`][spectheory.testing.mutants.draft_q.eagle_posterior_rule]
    at every node of the accepted walk."""
    return node_recursive_law(drafts, q, p, eagle_posterior_rule)


# ----------------------------------------------------------------------------- mlxcel #992

#: Positive values at or below this round to 0 in float16 (round to nearest even: 2^-25 is the
#: midpoint between 0 and the smallest subnormal 2^-24).
FP16_UNDERFLOW_BELOW = 2.0**-25


def fp16_underflowed(x, dtype=torch.float16):
    """Boolean array like ``x`` (torch, or exact Fractions): where x, stored in ``dtype``, is 0.
    Exact values are rounded to float64 first; torch converts float64 to float16 through float32,
    so a value within a float32 step of 2^-25 is decided on its float32 rounding."""
    if B.is_exact(x):
        as_float = torch.as_tensor(np.asarray(x, dtype=np.float64))
        return (as_float.to(dtype) == 0).numpy()
    return x.to(dtype) == 0


def fp16_underflow_accept(drafts, q, p, dtype=torch.float16) -> Law:
    """Token verification whose acceptance treats a draft probability that underflows in
    ``dtype`` as certain (mlxcel PR #992).

    Reconstruction from the one-line description of mlxcel pull request #992 ("fp16 underflow
    turns a small ratio into an automatic accept"): with q(X_i) stored in float16, a draft
    probability at or below 2^-25 becomes 0, and the acceptance test then accepts the draft
    whatever p(X_i) is (a zero-q guard, or p/0 handled as acceptance). Where q(X_i) does not
    underflow the ratio min(1, p/q) is computed exactly, and the residual
    normalise(max(p - q, 0)) and the bonus row are right, so the law's TV is that of the
    underflow alone. Lossy where p(X_i) < q(X_i) <= 2^-25; the excess is at most the draft mass
    that underflows. float32 and bfloat16 (8 exponent bits) do not underflow there: with
    ``dtype=torch.float32`` the law is token verification exactly.
    """
    L = drafts.shape[-1]
    px, qx = drafted_probs(drafts, q, p)
    ratio = B.minimum(B.safe_div(px, qx, B.scalar(px, 1)), 1)
    under = fp16_underflowed(qx, dtype)
    if not B.is_exact(qx):
        under = under.to(qx.device)
    accept = B.where(under, B.ones_like(ratio), ratio)
    corr = residual_corrections(residuals(B.ones_like(accept), q, p), p)
    return chain_law(accept, corr[:, :L], p[:, L])


def float32_accept(drafts, q, p) -> Law:
    """The control of mlxcel PR #992: the same rule with q stored in float32, where no draft
    probability of the kit's instances underflows: token verification exactly."""
    return fp16_underflow_accept(drafts, q, p, dtype=torch.float32)


# ----------------------------------------------------------------------------- specs

VLLM_DRAFT_PROBS_NONE = VerifierSpec(
    "vllm-40149-draft-probs-none", draft_probs_none, paths=1,
    paper="vLLM issue #40149 (fixed by PR #40269): draft_probs=None on model drafts",
    summary="vLLM V1 rejection sampler without draft probs: accept iff p(X_i) >= u, recovered "
            "from p without X_i (lossless for any drafting; accepts sum q p)")
SGLANG_ZERO_DRAFT_PROBS = VerifierSpec(
    "sglang-9877-zero-draft-probs", zero_draft_probs, paths=1,
    paper="SGLang issue #9877 (FIXME: leverage draft probs)",
    summary="SGLang target-only tree sampling on a chain: cumulative-coin acceptance p(X_i), "
            "correction relu(p - draft_probs) with the rejected child's p")
EAGLE_Q_ONE = VerifierSpec(
    "eagle-329-q-one", eagle_posterior, paths=None, drafting="any",
    paper="EAGLE issue #329 (qx = 1.0 in evaluate_posterior)",
    summary="EAGLE's non-greedy posterior: qx = 1, acp = gtp[x], rejected candidates zeroed "
            "in gtp (lossless on top-k trees)",
    rule=eagle_posterior_rule)
MLXCEL_FP16_UNDERFLOW = VerifierSpec(
    "mlxcel-992-fp16-underflow-accept", fp16_underflow_accept, paths=1, lossless=False,
    paper="mlxcel pull request #992 (float16 underflow of the draft probability)",
    summary="LOSSY replica: token verification accepting every draft whose q underflows to 0 "
            "in float16")
MLXCEL_FLOAT32_CONTROL = VerifierSpec(
    "mlxcel-992-float32-control", float32_accept, paths=1,
    paper="mlxcel pull request #992 (control: the draft probability kept in float32)",
    summary="token verification with the underflow decision taken in float32")


# ----------------------------------------------------------------------------- instances


def sglang_example() -> Instance:
    """The example of SGLang issue #10308 (the proposal that follows #9877): target
    (0.6, 0.2, 0.1, 0.1), draft (0.7, 0.2, 0.05, 0.05), L = 1, exact. Sampled drafts verified with
    q accept sum min(p, q) = 9/10, sampled drafts without q sum q p = 47/100, the greedy draft
    without q p(0) = 3/5."""
    return instance_from_dict({"vocab_size": 4, "block_length": 1,
                               "target": ["3/5", "1/5", "1/10", "1/10"],
                               "draft": ["7/10", "1/5", "1/20", "1/20"]}, exact=True)


def greedy_chain_instance(instance: Instance) -> Instance:
    """The instance whose draft is the greedy chain of ``instance``'s draft (argmax rows, ties to
    the lowest id): the law of EAGLE / SGLang top-1 drafts."""
    return Instance(instance.vocab_size, instance.block_length, instance.target,
                    proposals.greedy_model(instance.draft))


def underflow_instance() -> Instance:
    """V = 3, L = 2, exact, prefix-dependent: token 2 has q = 1/10^8 (float16: 0) and
    p = 1/10^9 at the root (ratio 1/10), and q = 2/10^8 (float16: 0), p = 0 after token 0."""
    third = ["1/3", "1/3", "1/3"]
    target = {"": ["1/2", "499999999/1000000000", "1/1000000000"], "0": ["1/4", "3/4", "0"],
              "1": third, "2": third}
    target.update({f"{a},{b}": ["1/2", "1/4", "1/4"] for a in range(3) for b in range(3)})
    return instance_from_dict({
        "vocab_size": 3, "block_length": 2, "target": target,
        "draft": {"": ["1/2", "49999999/100000000", "1/100000000"],
                  "0": ["1/2", "24999999/50000000", "1/50000000"],
                  "1": ["1/2", "1/4", "1/4"], "2": ["1/3", "1/3", "1/3"]}}, exact=True)


def underflow_tail_instance(V: int = 200, tail_q: float = 2e-8, tail_p: float = 2e-9) -> Instance:
    """V tokens, L = 1, float64: two head tokens and V - 2 tail tokens of draft probability
    ``tail_q`` (below 2^-25: float16 0) and target probability ``tail_p``. The tail's excess
    draft mass (V - 2)(tail_q - tail_p) is what the underflow lets through."""
    n = V - 2
    q = [0.5, 0.5 - n * tail_q] + [tail_q] * n
    p = [0.3, 0.7 - n * tail_p] + [tail_p] * n
    return instance_from_dict({"vocab_size": V, "block_length": 1, "target": p, "draft": q},
                              exact=False)


# ----------------------------------------------------------------------------- processed q


def processed_drafting(instance: Instance, sampling, handed: str = "raw",
                       draft_sampling=None, verifier="token"):
    """Exact analysis of drafting from processed draft rows, verified against processed target
    rows (Hugging Face transformers #47932; vLLM PR #56724).

    The target rows are processed by ``sampling`` and the draft rows by ``draft_sampling``
    (default: the same parameters, as `generate()` and vLLM PR #56724 do), anything
    `spectheory.inputs.processing.parse_sampling` accepts. The drafts follow the processed draft
    rows; the verifier is handed them (``handed="processed"``: the fix of #47932, and what
    #56724 needs) or the raw draft rows (``handed="raw"``: the bug of #47932). Returns the
    `spectheory.engine.analysis.ExactAnalysis` whose `tv_to_target` is the TV to the *processed*
    target's law.
    """
    from ...engine.analysis import analyze

    if handed not in ("raw", "processed"):
        raise OptionError(f"handed = {handed!r} is not 'raw' or 'processed'")
    ds = sampling if draft_sampling is None else draft_sampling
    spec = verifier
    if handed == "raw":
        spec = proposals.reported_q_verifier(instance.draft, verifier,
                                             name=f"{verifier}-handed-raw-q")
    return analyze(instance, spec, sampling=sampling, draft_sampling=ds)


@dataclass
class DraftInSetCheck:
    """One instance of the check of vLLM PR #56724's claim
    ([`check_draft_in_request_set`][spectheory.testing.mutants.draft_q.check_draft_in_request_set]).

    ``tv_processed``: TV to the processed target law when the drafts come from the processed
    draft rows and the verifier is handed them (the claim); ``tv_raw_handed``: the same drafting
    with the raw draft rows handed to the verifier (the #47932 mistake); ``accepted_main``:
    E[tau] of `main` (drafts from the raw draft rows, target processed); ``accepted_pr``: E[tau]
    with the PR's drafting.
    """

    instance: str
    sampling: str
    tv_processed: Any
    tv_raw_handed: Any
    accepted_main: Any
    accepted_pr: Any

    @property
    def output_unchanged(self) -> bool:
        """TV exactly 0 (exact instances; a float instance reports its rounding, ~1e-17)."""
        return self.tv_processed == 0

    @property
    def more_accepted(self) -> bool:
        """The PR's drafting accepts at least as many tokens as `main`'s."""
        return self.accepted_pr >= self.accepted_main


def check_draft_in_request_set(instances, samplings) -> list[DraftInSetCheck]:
    """Check vLLM PR #56724's claims on every (instance, sampling) pair, exactly.

    `instances`: (label, Instance) pairs; `samplings`: sampling parameters (strings such as
    ``"top_k=2"``). For each pair: the output law of drafting from the processed draft rows with
    the processed q handed to token verification (its TV to the processed target law; 0 is the
    claim "the output distribution does not change"), the same with the raw q handed, and E[tau]
    with and without drafting inside the request's set ("more draft tokens are accepted").
    """
    from ...engine.analysis import analyze

    out = []
    for label, inst in instances:
        for s in samplings:
            pr = processed_drafting(inst, s, handed="processed")
            bad = processed_drafting(inst, s, handed="raw")
            main = analyze(inst, "token", sampling=s)
            out.append(DraftInSetCheck(label, str(s), pr.tv_to_target, bad.tv_to_target,
                                       main.expected_accepted, pr.expected_accepted))
    return out

