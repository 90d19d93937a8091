"""A kit of real lossiness bugs: faithful replicas, each with the check that catches it.

Every entry of `MUTANTS` (name -> [`Mutant`][spectheory.testing.mutants.Mutant]) replicates one bug
found in a serving engine or a published reference implementation, named by project and issue
number, written from the bug's public description. Five kinds:

* ``"law"``: a wrong verifier formula. The replica is a law function with a
  [`VerifierSpec`][spectheory.registry.VerifierSpec] (``lossless=False``);
  [`check_lossless`][spectheory.engine.lossless.check_lossless] computes its exact output law (exact rationals
  where the formula allows, else float64) and names the total variation to the target and the first
  offending output sequence.
* ``"proposal"``: the verifier is right but the q handed to it is not the law the drafts follow. The
  replica is a draft sampler (for
  [`check_proposal`][spectheory.testing.checks.sampler.check_proposal]) and a composed law
  ([`proposals.reported_q_verifier`][spectheory.testing.mutants.proposals.reported_q_verifier],
  analysed on an instance whose draft model is the actual sampling law), caught exactly.
* ``"sampler"``: the formula is right, the randomness is not. The replica is a sampler in the
  canonical signature (or the coin-driven one), caught by
  [`check_sampler`][spectheory.testing.checks.sampler.check_sampler] in ``law`` or ``coins`` mode at
  a stated sample size.
* ``"acceptance"``: the output law is right (lossless, exactly) but the engine accepts fewer
  tokens than the rule it meant to run, because the verifier is handed a stand-in for q. The
  replica is a law function; the check is the exact expected number of accepted tokens
  ([`analyze`][spectheory.engine.analysis.analyze]) against the fixed engine's, on the same instance. A
  losslessness check cannot catch these (and must not: they are lossless).
* ``"step"``: the drafting and the verification are each right alone, or each wrong in a way
  that shows only when they are joined: the replica is a whole draft-and-verify step
  (`spectheory.testing.mutants.steps`), caught by
  [`check_step`][spectheory.testing.checks.step.check_step] at a stated sample size, with the exact
  TV of its law.

Engine claims around these bugs (an output law "does not change", a rule "is not lossless") are
checked exactly in `CLAIMS` (name -> [`Claim`][spectheory.testing.mutants.Claim]): each entry
recomputes its numbers and returns a [`ClaimCheck`][spectheory.testing.mutants.ClaimCheck]
whose verdict is "confirmed", "refuted" or "qualified".

``MUTANTS[name].catch()`` runs the stated check on the stated instance and returns a
[`Catch`][spectheory.testing.mutants.Catch] (caught or not, TV, first offending sequence, samples
used, the underlying report). The kit's tests assert that every mutant is caught.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from ...engine.analysis import analyze
from ...engine.lossless import check_lossless
from ...inputs.instances import instance_from_dict
from ...inputs.random_instances import random_instance
from ...registry import VerifierSpec
from . import coins, draft_q, formulas, gbv_reference, proposals
from . import stateful_steps, steps

__all__ = ["Catch", "Claim", "ClaimCheck", "CLAIMS", "Mutant", "MUTANTS", "KINDS", "VERDICTS",
           "coins", "draft_q", "formulas", "gbv_reference", "proposals", "stateful_steps",
           "steps",
           "two_token_example",
           "pq_half_instance", "gbv_three_token_instance", "capped_tie_instance",
           "fp16_instance"]

#: Kinds of mutants.
KINDS = ("law", "sampler", "proposal", "acceptance", "step")
#: Verdicts of a checked claim.
VERDICTS = ("confirmed", "refuted", "qualified")


@dataclass
class Catch:
    """What a check found on a mutant.

    ``caught`` is the verdict; ``how`` names the check; ``tv`` the exact (or float64) total
    variation to the target where a law exists; ``offending`` the first offending output sequence
    with ``output_probability`` / ``target_probability``; ``samples`` the sampler outputs (or
    coin rows) the check used; ``report`` the underlying report; ``control`` a second report where
    the mutant's story needs one (e.g. the same check on context-independent rows, where some bugs
    are invisible, or the fixed engine, which passes); ``proposal`` the
    [`check_proposal`][spectheory.testing.checks.sampler.check_proposal] report of a proposal
    mutant's draft sampler; ``accepted`` / ``accepted_fixed`` the exact E[tau] of the engine and of
    the fixed engine (acceptance mutants).
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
    proposal: Any = None
    accepted: Any = None
    accepted_fixed: Any = None


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
    kind : {"law", "sampler", "proposal", "acceptance", "step"}
    function : callable
        The replica: a [`VerifierSpec`][spectheory.registry.VerifierSpec] (law), a canonical or
        coin-driven sampler (sampler), a draft sampler
        ``(q_rows, generator) -> (tokens, q_reported)`` (proposal), the engine's law function
        as a [`VerifierSpec`][spectheory.registry.VerifierSpec] (acceptance), or a whole step
        ``step(request) -> emitted`` (step).
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


@dataclass
class ClaimCheck:
    """The outcome of checking a [`Claim`][spectheory.testing.mutants.Claim]: ``verdict`` (one of
    `VERDICTS`), ``summary`` (one line with the decisive numbers), ``numbers`` (name -> exact
    value or float) and ``details`` (the underlying reports)."""

    verdict: str
    summary: str
    numbers: dict = field(default_factory=dict)
    details: Any = None


@dataclass(frozen=True)
class Claim:
    """A statement made in an engine's issue or pull request, checked exactly.

    Attributes
    ----------
    name : str
        ``project-issue-what``.
    project, issue : str
        Where the statement was made.
    statement : str
        The statement, quoted or closely paraphrased.
    verdict : {"confirmed", "refuted", "qualified"}
        The recorded verdict; ``check()`` recomputes it (the kit's tests assert they agree).
    how : str
        The check, with its instances.
    check : callable
        ``check() -> ClaimCheck``.
    """

    name: str
    project: str
    issue: str
    statement: str
    verdict: str
    how: str
    check: Callable[[], ClaimCheck]


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
        from ..checks.sampler import check_proposal

        inst, reported = build()
        rep = check_lossless(proposals.reported_q_verifier(reported, verifier), inst)
        fixed = check_lossless(proposals.reported_q_verifier(inst.draft, verifier), inst)
        c = _from_lossless(rep, "check_lossless (composed law) + check_proposal", fixed)
        if draft_sampler is not None:
            prop = check_proposal(draft_sampler, instances=[proposal_rows()], samples=samples,
                                  seed=0)
            c.proposal = prop
            c.samples = samples
            c.caught = c.caught and not prop.passed
        return c
    return catch


def _processed_catch(instance_fn, sampling, draft_sampler, proposal_rows, samples
                     ) -> Callable[[], Catch]:
    """Hugging Face transformers #47932: drafts from the processed draft rows, the raw q handed,
    the verdict against the processed target; the fix hands the processed q."""
    def catch() -> Catch:
        from ..checks.sampler import check_proposal

        raw = instance_fn()
        rep = check_lossless(proposals.reported_q_verifier(raw.draft, "token"), raw,
                             sampling=sampling, draft_sampling=sampling)
        fixed = check_lossless("token", raw, sampling=sampling, draft_sampling=sampling)
        c = _from_lossless(rep, "check_lossless (composed law, processed target) + "
                                "check_proposal", fixed)
        prop = check_proposal(draft_sampler, instances=[proposal_rows()], samples=samples, seed=0)
        c.proposal, c.samples = prop, samples
        c.caught = c.caught and not prop.passed
        return c
    return catch


def _acceptance_catch(engine, fixed) -> Callable[[], Catch]:
    """``engine()`` / ``fixed()`` return exact analyses (`ExactAnalysis`) of the engine as it ran
    and of the fixed engine on the same target; caught when the engine accepts fewer tokens."""
    def catch() -> Catch:
        eng, fix = engine(), fixed()
        c = Catch(eng.expected_accepted < fix.expected_accepted,
                  "analyze: exact E[tau] against the fixed engine", tv=eng.tv_to_target,
                  report=eng, control=fix, accepted=eng.expected_accepted,
                  accepted_fixed=fix.expected_accepted)
        c.notes.append(f"E[tau] {eng.expected_accepted} (engine) vs {fix.expected_accepted} "
                       f"(fixed); TV to the target {eng.tv_to_target} and "
                       f"{fix.tv_to_target}: both lossless")
        return c
    return catch


def _eagle_catch() -> Catch:
    """EAGLE #329: the rule the issue asks for (q-aware token verification / recursive rejection
    sampling with the draft model's soft q) on EAGLE's top-k drafts; EAGLE's own qx = 1 rule on
    the same drafts is the control."""
    from ...engine.lossless import check_tree_lossless
    from ..checks.sampler import check_proposal

    inst = random_instance(3, 2, 0, denominator=60)
    rep = check_lossless(proposals.reported_q_verifier(inst.draft, "token"),
                         draft_q.greedy_chain_instance(inst))
    control = check_tree_lossless(draft_q.EAGLE_Q_ONE, inst, "2,1", drafting="topk")
    c = _from_lossless(rep, "check_lossless (composed law: top-1 chain handed the soft q) + "
                            "check_proposal", control)
    tree = check_tree_lossless("specinfer-norep", inst, "2,1", drafting="topk", rows="raw")
    c.notes.append(f"tree (2, 1), recursive rejection sampling handed the soft q: {tree}")
    prop = check_proposal(draft_q.eagle_top1_soft_q_sampler, instances=[_proposal_rows_soft()],
                          samples=3_000, seed=0)
    c.proposal, c.samples = prop, 3_000
    c.caught = c.caught and not tree.lossless and not prop.passed
    return c


def _sampler_catch(sampler, verifier, rows_fn, samples, mode="law", repeat=64
                   ) -> Callable[[], Catch]:
    def catch() -> Catch:
        from ..checks.sampler import DraftRows, check_sampler

        d, q, p = rows_fn()
        rows = DraftRows(d.repeat(repeat, 1), q.repeat(repeat, 1, 1), p.repeat(repeat, 1, 1))
        rep = check_sampler(sampler, verifier, instances=[rows], samples=samples, mode=mode,
                            seed=0)
        return Catch(not rep.passed, f"check_sampler(mode={mode!r})", samples=rep.samples,
                     report=rep)
    return catch


def _zero_coin_catch() -> Catch:
    from ..checks.sampler import DraftRows, check_sampler

    d, q, p = coins.zero_probability_rows()
    rows = DraftRows(d.repeat(32, 1), q.repeat(32, 1, 1), p.repeat(32, 1, 1))
    rep = check_sampler(coins.zero_coin_coin_sampler, "token", instances=[rows], samples=32,
                        mode="coins", seed=0)
    c = Catch(not rep.passed, "check_sampler(mode='coins') with pinned coins",
              samples=rep.samples, report=rep)
    c.control = coins.check_zero_coin(coins.zero_coin_coin_sampler)
    return c


def _step_catch(name: str, samples: int) -> Callable[[], Catch]:
    """Whole-step replica ``name`` of `steps.REPLICAS`: ``check_step`` on its instance at
    ``samples`` (power >= 0.99 against its exact law,
    `spectheory.testing.checks.step.detection_power`), with the exact TV of its law
    (`steps.exact_step_law`); control: the same check of the correct step of the same engine, which
    passes."""
    def catch() -> Catch:
        from ..checks.step import check_step

        step, inst_fn, sampling, draft_sampling = steps.REPLICAS[name]
        _, _, tv = steps.exact_step_law(name, inst_fn(), sampling, draft_sampling)
        rep = check_step(step, instances=[inst_fn()], samples=samples, sampling=sampling,
                         draft_sampling=draft_sampling, seed=0)
        c = Catch(not rep.passed, "check_step (one step, exact target law)", tv=tv,
                  samples=samples, report=rep)
        c.notes.append(f"exact TV of the step's law to the target: {tv} ({float(tv):.6g})")
        return c
    return catch


def _hf_zero_coin_catch() -> Catch:
    from ..checks.sampler import DraftRows, check_sampler

    d, q, p = coins.zero_probability_rows()
    rows = DraftRows(d.repeat(32, 1), q.repeat(32, 1, 1), p.repeat(32, 1, 1))
    rep = check_sampler(coins.hf_zero_coin_coin_sampler, "token", instances=[rows], samples=32,
                        mode="coins-tau", seed=0)
    return Catch(not rep.passed, "check_sampler(mode='coins-tau') with pinned float32 coins",
                 samples=rep.samples, report=rep)


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
    _m("hf-47932-raw-vs-topk-q", "Hugging Face transformers", "#47932 (fix proposed in PR #47961)",
       "drafts sampled from top-k-filtered logits, verifier handed the raw q (target processed "
       "with the same top-k)", "proposal", proposals.topk_draft_sampler(50),
       "check_lossless of the composed law, exact, random_instance(4, 2, seed=0, denominator=60),"
       " sampling = draft_sampling = top_k=2, verdict against the processed target; "
       "check_proposal, top_k = 50 on 4 rows of V = 80, 20,000 draws; control: the processed q "
       "handed is exactly lossless",
       _processed_catch(lambda: random_instance(4, 2, 0, denominator=60), "top_k=2",
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
    _m("hf-speculative-sampling-zero-coin", "Hugging Face transformers",
       "_speculative_sampling, 5.x (no issue number)",
       "acceptance r <= p/q with float32 torch.rand_like coins in [0, 1) accepts a "
       "zero-probability draft on coin 0 (the class of SGLang #35771)",
       "sampler", coins.hf_zero_coin_coin_sampler,
       "check_sampler(mode='coins-tau'), pinned coins mapped onto float32 [0, 1), 32 rows with "
       "p(X_1) = 0", _hf_zero_coin_catch),
    _m("vllm-47386-shared-noise", "vLLM", "#47386 (fixed by #54282)",
       "draft and recovery share one Gumbel noise stream", "sampler",
       coins.shared_noise_sampler,
       "check_sampler(mode='law'), token verification, shared_noise_rows(), 20,000 samples",
       _sampler_catch(coins.shared_noise_sampler, "token", coins.shared_noise_rows, 20_000)),
    _m("vllm-40149-draft-probs-none", "vLLM", "#40149 (fixed by PR #40269)",
       "the draft-model path passed draft_probs=None: drafts sampled from q verified as if q "
       "were one-hot at the drafted token (lossless; accepts sum q p, not sum min(p, q))",
       "acceptance", draft_q.VLLM_DRAFT_PROBS_NONE,
       "analyze, exact, random_instance(3, 3, seed=0, denominator=60) with drafts sampled from "
       "its q: E[tau] against token verification handed the draft probs (PR #40269); both "
       "lossless exactly",
       _acceptance_catch(
           lambda: analyze(random_instance(3, 3, 0, denominator=60),
                           draft_q.VLLM_DRAFT_PROBS_NONE),
           lambda: analyze(random_instance(3, 3, 0, denominator=60), "token"))),
    _m("sglang-9877-zero-draft-probs", "SGLang", "#9877",
       "draft probabilities left as zeros in target-only tree sampling (FIXME: leverage draft "
       "probs): top-1 drafts accepted with p(x), not sum min(p, q) (lossless)",
       "acceptance", draft_q.SGLANG_ZERO_DRAFT_PROBS,
       "analyze, exact, the #10308 example p = (3/5, 1/5, 1/10, 1/10), q = (7/10, 1/5, 1/20, "
       "1/20), L = 1: greedy chain without q against drafts sampled from q verified with q; both "
       "lossless exactly",
       _acceptance_catch(
           lambda: analyze(draft_q.greedy_chain_instance(draft_q.sglang_example()),
                           draft_q.SGLANG_ZERO_DRAFT_PROBS),
           lambda: analyze(draft_q.sglang_example(), "token"))),
    _m("eagle-329-requested-q-on-topk", "EAGLE", "#329",
       "the rule #329 asks for (min(1, p/q), norm(max(p - q, 0)) with the draft model's soft q) "
       "put into the verifier while EAGLE still drafts top-k children", "proposal",
       draft_q.eagle_top1_soft_q_sampler,
       "check_lossless of the composed law, exact, random_instance(3, 2, seed=0, denominator=60)"
       " on the top-1 chain (and the (2, 1) top-k tree); check_proposal, 3 rows, 3,000 draws; "
       "control: EAGLE's qx = 1 rule on the same top-k tree is exactly lossless",
       _eagle_catch),
    _m("mlxcel-992-fp16-underflow-accept", "mlxcel", "PR #992",
       "a draft probability that underflows to 0 in float16 makes the draft an automatic "
       "accept, whatever p/q is", "law", draft_q.MLXCEL_FP16_UNDERFLOW,
       "check_lossless, exact, underflow_instance() (V = 3, L = 2; q = 1e-8 and 2e-8 under "
       "2^-25); control: the decision in float32 is exactly lossless",
       _law_catch(draft_q.MLXCEL_FP16_UNDERFLOW, draft_q.underflow_instance,
                  control_fn=draft_q.underflow_instance,
                  control_spec=draft_q.MLXCEL_FLOAT32_CONTROL)),
    _m("vllm-47386-shared-noise-step", "vLLM", "#47386 (fixed by #54282)",
       "whole step: the draft's exponential-race (Gumbel) noise re-used for the recovery token",
       "step", steps.shared_noise_step,
       "check_step, shared_noise_instance() (V = 3, L = 1), 10,000 samples; exact TV 1/26",
       _step_catch("vllm-47386", 10_000)),
    _m("sglang-7207-reused-final-coin", "SGLang", "PR #7207",
       "whole step: the final token drawn at the coin of the last acceptance test",
       "step", steps.reused_coin_step,
       "check_step, reused_coin_instance() (V = 3, L = 1), 2,000 samples; exact TV 23/200",
       _step_catch("sglang-7207", 2_000)),
    _m("hf-47932-raw-q-step", "Hugging Face transformers", "#47932 (fix proposed in PR #47961)",
       "whole step: drafts from the top-1 processed draft rows, the raw rows handed as q",
       "step", steps.raw_q_step,
       "check_step, raw_q_instance() (V = 2, L = 1), draft_sampling top_k=1, 2,000 samples; "
       "exact TV 1/4", _step_catch("hf-47932", 2_000)),
    _m("deepspec-31-bf16-draft-step", "DeepSpec", "#31 (fixed by PR #30)",
       "whole step: drafts from the softmax of bfloat16 logits, the ratio from the full q",
       "step", steps.bf16_draft_step,
       "check_step, bf16_instance() (V = 2, L = 1), 120,000 samples; exact TV 0.01173",
       _step_catch("deepspec-31", 120_000)),
])


# ----------------------------------------------------------------------------- claims

#: Instances of the claim checks (exact, prefix-dependent).
_TREE_SHAPES = ("1,1", "2,1", "3,1", "2,2")
_REQUEST_SETS = ("top_k=1", "top_k=2", "top_p=0.8", "top_k=3,top_p=0.9")


def _request_set_instances():
    return [(f"random_instance(4, 2, {s}, denominator=60)",
             random_instance(4, 2, s, denominator=60)) for s in range(3)]


def _claim_eagle_lossless() -> ClaimCheck:
    from ...engine.analysis import analyze_tree

    inst = random_instance(3, 2, 0, denominator=60)
    rows = {}
    for drafting in ("topk", "iid"):
        for shape in _TREE_SHAPES:
            rows[(drafting, shape)] = analyze_tree(inst, draft_q.EAGLE_Q_ONE, shape,
                                                   drafting=drafting)
    worst = max(r.tv_to_target for r in rows.values())
    numbers = {f"TV {d} {s}": r.tv_to_target for (d, s), r in rows.items()}
    numbers.update({f"E[tau] topk {s}": rows[("topk", s)].expected_accepted
                    for s in _TREE_SHAPES})
    return ClaimCheck("refuted" if worst == 0 else "confirmed",
                      f"TV of EAGLE's qx = 1 rule = {worst} exactly on the top-k trees "
                      f"{', '.join(_TREE_SHAPES)} and on i.i.d. sampled children of the same "
                      f"shapes (random_instance(3, 2, 0, denominator=60))", numbers, rows)


def _claim_56724_unchanged() -> ClaimCheck:
    checks = draft_q.check_draft_in_request_set(_request_set_instances(), _REQUEST_SETS)
    unchanged = all(c.output_unchanged for c in checks)
    raw = max(checks, key=lambda c: c.tv_raw_handed)
    return ClaimCheck(
        "confirmed" if unchanged else "refuted",
        f"TV to the processed target law = 0 exactly on all {len(checks)} (instance, "
        f"parameters) pairs when the verifier is handed the processed draft q; handed the raw "
        f"q instead (the #47932 bug), TV up to {float(raw.tv_raw_handed):.6f} "
        f"({raw.instance}, {raw.sampling})" if unchanged else
        "a pair with the processed q handed is lossy",
        {"pairs": len(checks), "max TV processed q": max(c.tv_processed for c in checks),
         "max TV raw q": raw.tv_raw_handed}, checks)


def _claim_56724_more_accepted() -> ClaimCheck:
    checks = draft_q.check_draft_in_request_set(_request_set_instances(), _REQUEST_SETS)
    fewer = [c for c in checks if not c.more_accepted]
    more = [c for c in checks if c.accepted_pr > c.accepted_main]
    worst = min(checks, key=lambda c: c.accepted_pr - c.accepted_main)
    verdict = "confirmed" if not fewer else ("qualified" if more else "refuted")
    return ClaimCheck(
        verdict,
        f"E[tau] with drafting inside the request's set is higher on {len(more)} and lower on "
        f"{len(fewer)} of {len(checks)} pairs; worst {worst.accepted_pr} vs "
        f"{worst.accepted_main} on main ({worst.instance}, {worst.sampling}): truncating the "
        f"draft moves its mass to its own top set, which may lie outside the target's",
        {"higher": len(more), "lower": len(fewer), "pairs": len(checks),
         "worst PR": worst.accepted_pr, "worst main": worst.accepted_main}, checks)


def _claim_sglang_acceptance() -> ClaimCheck:
    ex = draft_q.sglang_example()
    greedy = analyze(draft_q.greedy_chain_instance(ex), draft_q.SGLANG_ZERO_DRAFT_PROBS)
    sampled = analyze(ex, "token")
    flip = instance_from_dict({"vocab_size": 2, "block_length": 1, "target": ["9/10", "1/10"],
                               "draft": ["3/5", "2/5"]}, exact=True)
    greedy2 = analyze(draft_q.greedy_chain_instance(flip), draft_q.SGLANG_ZERO_DRAFT_PROBS)
    sampled2 = analyze(flip, "token")
    ok = (greedy.expected_accepted == ex.target.tables[0][0][0]
          and sampled.expected_accepted < 1)
    verdict = "qualified" if ok and greedy2.expected_accepted > sampled2.expected_accepted \
        else ("confirmed" if ok else "refuted")
    return ClaimCheck(
        verdict,
        f"acceptance p(x) of the greedy draft without q: {greedy.expected_accepted} against "
        f"sum min(p, q) = {sampled.expected_accepted} on the #10308 example (confirmed), but "
        f"{greedy2.expected_accepted} against {sampled2.expected_accepted} on p = (9/10, 1/10), "
        f"q = (3/5, 2/5): the greedy draft accepts more where the target agrees with the "
        f"draft's top token more than q does",
        {"greedy #10308": greedy.expected_accepted, "sampled #10308": sampled.expected_accepted,
         "greedy flip": greedy2.expected_accepted, "sampled flip": sampled2.expected_accepted},
        [greedy, sampled, greedy2, sampled2])


def _c(name, project, issue, statement, verdict, how, check):
    return name, Claim(name, project, issue, statement, verdict, how, check)


CLAIMS: dict[str, Claim] = dict([
    _c("eagle-329-not-lossless", "EAGLE", "#329",
       "the non-greedy rejection sampling path ignores the draft q (qx = 1) and is not lossless",
       "refuted",
       "analyze_tree, exact, EAGLE's qx = 1 rule on the top-k trees (1,1), (2,1), (3,1), (2,2) "
       "of random_instance(3, 2, 0, denominator=60), and on i.i.d. sampled children",
       _claim_eagle_lossless),
    _c("vllm-56724-output-unchanged", "vLLM", "PR #56724",
       "drafting inside the request's top-k / top-p: the output distribution does not change",
       "confirmed",
       "analyze with sampling = draft_sampling on random_instance(4, 2, s, denominator=60), "
       "s = 0, 1, 2, and top_k=1, top_k=2, top_p=0.8, top_k=3,top_p=0.9: TV to the processed "
       "target law with the processed draft q handed (holds only if the rejection step reads "
       "the processed q)", _claim_56724_unchanged),
    _c("vllm-56724-more-accepted", "vLLM", "PR #56724",
       "drafting inside the request's top-k / top-p: more draft tokens are accepted",
       "qualified", "exact E[tau] with and without draft processing on the same 12 pairs",
       _claim_56724_more_accepted),
    _c("sglang-9877-acceptance", "SGLang", "#9877",
       "with the draft probabilities left as zeros the acceptance rate is p(x) instead of "
       "sum min(p, q), which significantly reduces it", "qualified",
       "analyze, exact, the #10308 example and p = (9/10, 1/10), q = (3/5, 2/5), L = 1",
       _claim_sglang_acceptance),
])
