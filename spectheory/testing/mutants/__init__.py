"""A kit of real lossiness bugs: faithful replicas, each with the check that catches it.

Every entry of :data:`MUTANTS` (name -> :class:`Mutant`) replicates one bug found in a serving
engine or a published reference implementation, named by project and issue number, written from
the bug's public description. Three kinds:

* ``"law"``: a wrong verifier formula. The replica is a law function with a
  :class:`spectheory.registry.VerifierSpec` (``lossless=False``); :func:`spectheory.check_lossless`
  computes its exact output law (exact rationals where the formula allows, else float64) and
  names the total variation to the target and the first offending output sequence.
* ``"proposal"``: the verifier is right but the q handed to it is not the law the drafts follow.
  The replica is a draft sampler (for :func:`spectheory.testing.check_proposal`) and a composed
  law (:func:`proposals.reported_q_verifier`, analysed on an instance whose draft model is the
  actual sampling law), caught exactly.
* ``"sampler"``: the formula is right, the randomness is not. The replica is a sampler in the
  canonical signature (or the coin-driven one), caught by
  :func:`spectheory.testing.check_sampler` in ``law`` or ``coins`` mode at a stated sample size.

``MUTANTS[name].catch()`` runs the stated check on the stated instance and returns a
:class:`Catch` (caught or not, TV, first offending sequence, samples used, the underlying
report). The kit's tests assert that every mutant is caught.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from ...exact import check_lossless
from ...instances import instance_from_dict
from ...random_instances import random_instance
from ...registry import VerifierSpec
from . import coins, formulas, gbv_reference, proposals

__all__ = ["Catch", "Mutant", "MUTANTS", "KINDS", "coins", "formulas", "gbv_reference",
           "proposals", "two_token_example", "pq_half_instance", "gbv_three_token_instance",
           "capped_tie_instance",
           "fp16_instance"]

#: Kinds of mutants.
KINDS = ("law", "sampler", "proposal")


@dataclass
class Catch:
    """What a check found on a mutant.

    ``caught`` is the verdict; ``how`` names the check; ``tv`` the exact (or float64) total
    variation to the target where a law exists; ``offending`` the first offending output sequence
    with ``output_probability`` / ``target_probability``; ``samples`` the sampler outputs (or
    coin rows) the check used; ``report`` the underlying report; ``control`` a second report where
    the mutant's story needs one (e.g. the same check on context-independent rows, where some bugs
    are invisible).
    """

    caught: bool
    how: str
    tv: Any = None
    offending: tuple | None = None
    output_probability: Any = None
    target_probability: Any = None
    samples: int | None = None
    report: Any = None
    control: Any = None
    notes: list = field(default_factory=list)


@dataclass(frozen=True)
class Mutant:
    """One replicated bug.

    Attributes
    ----------
    name : str
        ``project-issue-what``.
    project, issue : str
        Where the bug was reported (issue or pull-request number as the project writes it).
    description : str
        One line: what the code did.
    kind : {"law", "sampler", "proposal"}
    function : callable
        The replica: a :class:`VerifierSpec` (law), a canonical or coin-driven sampler (sampler),
        or a draft sampler ``(q_rows, generator) -> (tokens, q_reported)`` (proposal).
    caught_by : str
        The check that catches it, with its instance and (for samplers) its sample size.
    catch : callable
        ``catch() -> Catch`` runs that check.
    """

    name: str
    project: str
    issue: str
    description: str
    kind: str
    function: Any
    caught_by: str
    catch: Callable[[], Catch]


# ----------------------------------------------------------------------------- instances


def two_token_example(exact: bool = True):
    """p = (1/3, 2/3), q = (2/3, 1/3), L = 2 (context-independent; Sun et al.'s example)."""
    return instance_from_dict({"vocab_size": 2, "block_length": 2, "target": ["1/3", "2/3"],
                               "draft": ["2/3", "1/3"]}, exact=exact)


def pq_half_instance():
    """p = q = (1/2, 1/2), V = 2, L = 1 (exact)."""
    return instance_from_dict({"vocab_size": 2, "block_length": 1, "target": ["1/2", "1/2"],
                               "draft": ["1/2", "1/2"]}, exact=True)


def gbv_three_token_instance():
    """p = (1/4, 3/8, 3/8), q = (1/2, 1/4, 1/4), L = 2 (exact; tokens 1 and 2 tie in p/q)."""
    return instance_from_dict({"vocab_size": 3, "block_length": 2,
                               "target": ["1/4", "3/8", "3/8"], "draft": ["1/2", "1/4", "1/4"]},
                              exact=True)


def capped_tie_instance():
    """p = (1/4, 5/12, 1/3), q = (1/2, 1/4, 1/4), L = 2 (exact): the ratios 5/3 and 4/3 differ,
    so no p/q tie, but both cap to 1."""
    return instance_from_dict({"vocab_size": 3, "block_length": 2,
                               "target": ["1/4", "5/12", "1/3"], "draft": ["1/2", "1/4", "1/4"]},
                              exact=True)


def fp16_instance():
    """V = 2, L = 2, exact, prefix-dependent: token 1 has p/q = 1/2 at the root (ranked last) and
    q(1) = 1/500, so with K = 3 the q^G normaliser x^3 = 8e-9 at node (1) underflows in float16;
    q(.|1) = (1/4, 3/4) differs from its skewed law."""
    half = ["1/2", "1/2"]
    return instance_from_dict({
        "vocab_size": 2, "block_length": 2,
        "target": {"": ["999/1000", "1/1000"], "0": half, "1": half, "0,0": half, "0,1": half,
                   "1,0": half, "1,1": half},
        "draft": {"": ["998/1000", "2/1000"], "0": half, "1": ["1/4", "3/4"]}}, exact=True)


# ----------------------------------------------------------------------------- catches


def _from_lossless(rep, how: str, control=None) -> Catch:
    return Catch(not rep.lossless, how, rep.tv, rep.offending, rep.output_probability,
                 rep.target_probability, report=rep, control=control)


def _law_catch(spec: VerifierSpec, instance_fn, paths=None, control_fn=None,
               control_spec=None) -> Callable[[], Catch]:
    def catch() -> Catch:
        rep = check_lossless(spec, instance_fn(), paths=paths)
        control = check_lossless(control_spec or spec, control_fn(), paths=paths) \
            if control_fn else None
        return _from_lossless(rep, "check_lossless", control)
    return catch


def _proposal_catch(build, verifier, draft_sampler, proposal_rows, samples) -> Callable[[], Catch]:
    def catch() -> Catch:
        from ..sampler import check_proposal

        inst, reported = build()
        rep = check_lossless(proposals.reported_q_verifier(reported, verifier), inst)
        c = _from_lossless(rep, "check_lossless (composed law) + check_proposal")
        if draft_sampler is not None:
            prop = check_proposal(draft_sampler, instances=[proposal_rows()], samples=samples,
                                  seed=0)
            c.control = prop
            c.samples = samples
            c.caught = c.caught and not prop.passed
        return c
    return catch


def _sampler_catch(sampler, verifier, rows_fn, samples, mode="law", repeat=64
                   ) -> Callable[[], Catch]:
    def catch() -> Catch:
        from ..sampler import DraftRows, check_sampler

        d, q, p = rows_fn()
        rows = DraftRows(d.repeat(repeat, 1), q.repeat(repeat, 1, 1), p.repeat(repeat, 1, 1))
        rep = check_sampler(sampler, verifier, instances=[rows], samples=samples, mode=mode,
                            seed=0)
        return Catch(not rep.passed, f"check_sampler(mode={mode!r})", samples=rep.samples,
                     report=rep)
    return catch


def _zero_coin_catch() -> Catch:
    from ..sampler import DraftRows, check_sampler

    d, q, p = coins.zero_probability_rows()
    rows = DraftRows(d.repeat(32, 1), q.repeat(32, 1, 1), p.repeat(32, 1, 1))
    rep = check_sampler(coins.zero_coin_coin_sampler, "token", instances=[rows], samples=32,
                        mode="coins", seed=0)
    c = Catch(not rep.passed, "check_sampler(mode='coins') with pinned coins",
              samples=rep.samples, report=rep)
    c.control = coins.check_zero_coin(coins.zero_coin_coin_sampler)
    return c


def _proposal_rows_soft():
    return torch.tensor([[0.8, 0.2], [0.6, 0.4], [0.55, 0.45]], dtype=torch.float64)


def _proposal_rows_topk():
    """4 Dirichlet(1/2) rows over V = 80 (seeded): top-50 filtering drops their tail."""
    rng = np.random.default_rng(1)
    return torch.as_tensor(rng.dirichlet(np.full(80, 0.5), size=4), dtype=torch.float64)


def _proposal_rows_bf16():
    """2 rows over V = 4 whose logits, at level 16, sit near the middle of bfloat16's steps of
    1/16: the bfloat16 law is 0.0103 away in TV (the largest found on a grid of such rows)."""
    logits = torch.tensor([[0.0, -0.1065, -0.298, -0.522], [0.0, -0.1185, -0.298, -0.528]],
                          dtype=torch.float64)
    return torch.softmax(logits, dim=-1)


# ----------------------------------------------------------------------------- the table


def _m(name, project, issue, description, kind, function, caught_by, catch):
    return name, Mutant(name, project, issue, description, kind, function, caught_by, catch)


MUTANTS: dict[str, Mutant] = dict([
    _m("hf-28508-softmax-residual", "Hugging Face transformers", "#28508",
       "residual softmax(clamp(p - q, 0)) instead of normalising by its sum",
       "law", formulas.SOFTMAX_RESIDUAL,
       "check_lossless, float64, two-token example",
       _law_catch(formulas.SOFTMAX_RESIDUAL, lambda: two_token_example(exact=False))),
    _m("vllm-ascend-3794-uniform-product", "vllm-ascend", "#3794 (found in #7807)",
       "block verification as a running product of uniforms, last accepted position, plain "
       "residual", "law", formulas.LAST_ACCEPTED_UNIFORM_PRODUCT,
       "check_lossless, float64, two-token example",
       _law_catch(formulas.LAST_ACCEPTED_UNIFORM_PRODUCT, lambda: two_token_example(exact=False))),
    _m("vllm-40819-block-wrong-row", "vLLM", "PR 40819",
       "block verification reference computes h_i's residual mass from the rows at i - 1",
       "law", formulas.BLOCK_WRONG_ROW,
       "check_lossless, exact, random_instance(3, 3, seed=0, denominator=60) (prefix-dependent);"
       " control: the same seed context-independent is exactly lossless",
       _law_catch(formulas.BLOCK_WRONG_ROW, lambda: random_instance(3, 3, 0, denominator=60),
                  control_fn=lambda: random_instance(3, 3, 0, denominator=60,
                                                     context_independent=True))),
    _m("trtllm-15098-off-by-one", "TensorRT-LLM", "#15098 (class)",
       "token verification reads p(X_i) from the row at X^i (one position late)",
       "law", formulas.TOKEN_OFF_BY_ONE,
       "check_lossless, exact, random_instance(2, 2, seed=0, denominator=60) (prefix-dependent);"
       " control: the same seed context-independent is exactly lossless",
       _law_catch(formulas.TOKEN_OFF_BY_ONE, lambda: random_instance(2, 2, 0, denominator=60),
                  control_fn=lambda: random_instance(2, 2, 0, denominator=60,
                                                     context_independent=True))),
    _m("gbv-ref-tie-rule", "GBV reference code (arXiv 2602.16961)", "tie rule",
       "selection keeps the earliest-drafted child on a p/q tie, q^G ranks the larger id first",
       "law", gbv_reference.GBV_TIE_RULE,
       "check_lossless, exact, ordered enumeration, p = q = (1/2, 1/2), K = 2, L = 1",
       _law_catch(gbv_reference.GBV_TIE_RULE, pq_half_instance, paths=2,
                  control_fn=gbv_three_token_instance)),
    _m("gbv-ref-capped-ranking", "GBV reference code (arXiv 2602.16961)", "capped ranking",
       "ranks by min(1, p/q), so every token with p >= q ties, with the mismatched tie rules",
       "law", gbv_reference.GBV_CAPPED_RANKING,
       "check_lossless, exact, ordered enumeration, p = (1/4, 5/12, 1/3), q = (1/2, 1/4, 1/4),"
       " L = 2, K = 2 (no exact p/q tie: the uncapped tie replica is lossless there)",
       _law_catch(gbv_reference.GBV_CAPPED_RANKING, capped_tie_instance, paths=2,
                  control_fn=capped_tie_instance, control_spec=gbv_reference.GBV_TIE_RULE)),
    _m("gbv-ref-fp16-skew", "GBV reference code (arXiv 2602.16961)", "float16 skew",
       "q^G computed in float16 falls back to q where its normaliser underflows to 0",
       "law", gbv_reference.GBV_FP16_SKEW,
       "check_lossless, exact, fp16_instance(), K = 3 (float32 / bfloat16: exactly lossless)",
       _law_catch(gbv_reference.GBV_FP16_SKEW, fp16_instance, paths=3)),
    _m("gbv-ref-traversal-first-leaf", "GBV reference code (arXiv 2602.16961)",
       "traversal baseline", "traversal visits the remaining leaf of smallest node index, not "
       "post-order", "law", gbv_reference.TRAVERSAL_FIRST_LEAF,
       "check_lossless, exact, ordered enumeration, two-token example, K = 3 (K = 2: lossless)",
       _law_catch(gbv_reference.TRAVERSAL_FIRST_LEAF, two_token_example, paths=3)),
    _m("hf-32867-greedy-draft-soft-q", "Hugging Face transformers", "#32867 (from #30778)",
       "assistant drafts greedily but the verifier is handed its soft q", "proposal",
       proposals.greedy_draft_sampler,
       "check_lossless of the composed law, exact, p = (3/5, 2/5), soft q = (4/5, 1/5), L = 1; "
       "check_proposal, 3 rows, 3,000 draws",
       _proposal_catch(proposals.greedy_instance, "token", proposals.greedy_draft_sampler,
                       _proposal_rows_soft, 3_000)),
    _m("hf-47932-raw-vs-topk-q", "Hugging Face transformers", "#47932",
       "drafts sampled from top-k-filtered logits, verifier handed the raw q", "proposal",
       proposals.topk_draft_sampler(50),
       "check_lossless of the composed law, exact, random_instance(4, 2, seed=0, denominator=60)"
       " with top-2 drafting; check_proposal, top_k = 50 on 4 rows of V = 80, 20,000 draws",
       _proposal_catch(functools.partial(proposals.topk_instance, 0, 4, 2, 2), "token",
                       proposals.topk_draft_sampler(50), _proposal_rows_topk, 20_000)),
    _m("deepspec-31-bf16-vs-f32", "DeepSpec", "#31",
       "drafts sampled from bfloat16 logits, rejection computed with float32 probabilities",
       "proposal", proposals.bf16_draft_sampler,
       "check_lossless of the composed law, float64, bf16_instance(seed=0, V=8, L=2), logits "
       "at level 16; check_proposal, 2 rows of V = 4, 200,000 draws",
       _proposal_catch(proposals.bf16_instance, "token", proposals.bf16_draft_sampler,
                       _proposal_rows_bf16, 200_000)),
    _m("sglang-35771-zero-coin", "SGLang", "#35771 (fixed by #35798)",
       "acceptance coin <= p/q with coins in [0, 1) accepts a zero-probability draft on coin 0",
       "sampler", coins.zero_coin_coin_sampler,
       "check_sampler(mode='coins'), pinned coins, 32 rows with p(X_1) = 0",
       _zero_coin_catch),
    _m("vllm-47386-shared-noise", "vLLM", "#47386 (fixed by #54282)",
       "draft and recovery share one Gumbel noise stream", "sampler",
       coins.shared_noise_sampler,
       "check_sampler(mode='law'), token verification, shared_noise_rows(), 20,000 samples",
       _sampler_catch(coins.shared_noise_sampler, "token", coins.shared_noise_rows, 20_000)),
])
