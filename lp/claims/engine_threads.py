"""Engine threads: claims made in engines' pull requests, issues and reviews about the law their
speculative path samples, each checked in the thread's own terms.

* mlx-lm PR #1709: exact-match ("sample-match") verification against rejection sampling when the
  draft equals the target: per drafted token, exact match accepts sum_x p(x)^2, rejection
  sampling accepts 1.
* mistral.rs PR #2424: before the PR, the speculative path returned the argmax of the processed
  target row at every position, at any temperature (ported in
  [`mistralrs_step`][spectheory.testing.engines.ports.mistralrs.mistralrs_step]).
* vllm-ascend PR #11985 (review): block verification's backward scan, tau = the last i with
  u_i <= h_i over independent coins u_i, is block verification's law (P(tau = i) = h_i
  prod_{j > i} (1 - h_j), Sun et al., arXiv 2403.10444), not a break of contiguous acceptance.
* z-lab/dflash #74: the draft greedy (``sample(draft_logits)`` with temperature 0), the target
  sampled (``sample(output.logits, temperature)``), drafts accepted while they equal the target's
  samples, the target's sample emitted at the first mismatch (``dflash/model.py`` at the issue's
  commit): sample-match verification with a deterministic draft, whose emitted tokens are the
  target's own samples.
* SGLang PR #28242 and PR #33643: the stateful seam replicas of
  [`spectheory.testing.mutants.stateful_steps`][spectheory.testing.mutants.stateful_steps]
  (float64 laws over one and two steps; the effective frequency penalty).

Notation: every thread writes the target's row as the model's (processed) probabilities and the
draft's as the drafter's; spectheory's p is the target, q the draft.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from .common import Claim, Finding, Hypotheses, be, f, note, one, rnd
from .engines import _table, sample_match_law, tv_to_target

# ----------------------------------------------------------------------------- mlx-lm #1709

#: One-token rows with q = p (ties and a zero included).
MLX_ROWS = (["1/2", "1/2"], ["1/2", "1/4", "1/4"], ["3/5", "1/5", "1/5", "0"],
            ["1/10", "2/5", "1/2"])


def c_mlx_lm_1709() -> Finding:
    ok, parts = [], []
    for row in MLX_ROWS:
        inst = one(row, row)
        note(inst, "single", 1)
        law = sample_match_law(inst)
        p, _ = _table(inst)
        match = sum(p(())[x] * p(())[x] for x in range(inst.vocab_size))
        # P(accept) read off the exact law: the first token equals the draft and a bonus follows
        walked = sum(_match_accept(inst).values(), Fraction(0))
        rejection = be(inst, "token") - 1
        ok += [walked == match, rejection == 1, match < 1,
               tv_to_target(law, inst) == 0]
        parts.append(f"p = q = ({', '.join(row)}): exact match {f(walked)} = sum p^2, "
                     f"rejection sampling {f(rejection)}")
    return Finding("; ".join(parts) + " (both lossless)", "confirmed" if all(ok) else "refuted",
                   "one-token rows with q = p: " + "; ".join("(" + ", ".join(r) + ")"
                                                             for r in MLX_ROWS))


def _match_accept(inst) -> dict:
    """{drafted token: P(drafted and accepted)} of one-token exact match, by the walk of
    `sample_match_tau` (the mass that matched one position)."""
    from .engines import sample_match_tau

    return {"accepted": sample_match_tau(inst)}


# ----------------------------------------------------------------------------- mistral.rs #2424

MISTRAL_SAMPLINGS = ("temperature=0.5", "temperature=1", "temperature=2",
                     "temperature=1,top_p=0.9")


def greedy_chain(inst, n: int) -> tuple:
    """The target's greedy chain of ``n`` tokens (argmax rows, ties to the lowest id), exactly."""
    p, _ = _table(inst)
    seq: tuple = ()
    for _ in range(n):
        row = p(seq[-inst.target.depth:] if inst.target.depth else ())
        best = max(range(len(row)), key=lambda a: (row[a], -a))
        seq += (best,)
    return seq


def mistralrs_released_sequence(inst, sampling, n: int) -> tuple:
    """The first ``n`` tokens of repeated released mistral.rs steps (deterministic: argmax drafts,
    argmax targets), from the empty context."""
    import torch

    from spectheory.inputs.processing import parse_sampling
    from spectheory.testing.engines.ports.mistralrs import mistralrs_step
    from spectheory.testing.checks.step import StepRequest, TableLM

    sp = parse_sampling(sampling)
    draft, target = TableLM(inst.draft, "draft"), TableLM(inst.target, "target")
    seq: list = []
    while len(seq) < n:
        ctx = torch.tensor([seq], dtype=torch.long).reshape(1, len(seq))
        out = mistralrs_step(StepRequest(ctx, draft, target, inst.block_length, sp, None,
                                         generator=torch.Generator().manual_seed(0)))
        seq += [int(t) for t in out[0] if int(t) >= 0]
    return tuple(seq[:n])


def c_mistralrs_2424() -> Finding:
    from spectheory.testing.mutants.stateful_steps import stateful_instance
    from spectheory.testing.checks.step import target_sequence_law

    inst = stateful_instance()
    note(inst, "single", 1)
    n = inst.block_length + 2
    chain = greedy_chain(inst, n)
    ok, parts = [], []
    for s in MISTRAL_SAMPLINGS:
        seq = mistralrs_released_sequence(inst, s, n)
        idx = 0
        for t in chain:
            idx = idx * inst.vocab_size + t
        tv = 1 - float(target_sequence_law(inst, n, s)[idx])
        ok += [seq == chain, tv > 0.5]
        parts.append(f"{s}: {seq}, TV {tv:.4f}")
    return Finding(f"the released step emits the target's greedy chain {chain} (N = {n}) at "
                   f"every temperature; TV of that point mass to the processed target's law: "
                   + "; ".join(parts), "confirmed" if all(ok) else "refuted",
                   "stateful_instance() (random(3,2,2,12), target rows with ties)")


# ----------------------------------------------------------------------------- vllm-ascend #11985


def backward_scan_law(inst):
    """Exact law of one iteration (L + 1 tokens, completed by the target) and tau pmf of the
    backward scan: h_i from Sun et al. (w_i = min(1, w_{i-1} p/q), S_i = sum_a max(w_i p(a) -
    q(a), 0), h_i = S_i / (S_i + 1 - w_i), h_L = w_L, h_0 = 1), independent coins u_i, tau = the
    last i with u_i <= h_i (each pattern of the L coins enumerated), then a token of
    normalise(max(w_tau p - q, 0)) (tau < L) or of p (tau = L)."""
    p, q = _table(inst)
    V, L = inst.vocab_size, inst.block_length
    law: dict = {}
    taus = [Fraction(0)] * (L + 1)

    def extend(prefix, mass):
        if mass == 0:
            return
        if len(prefix) == L + 1:
            law[prefix] = law.get(prefix, Fraction(0)) + mass
            return
        for a, pa in enumerate(p(prefix)):
            extend(prefix + (a,), mass * pa)

    for x in itertools.product(range(V), repeat=L):
        Qx = Fraction(1)
        for i in range(L):
            Qx *= q(x[:i])[x[i]]
        if Qx == 0:
            continue
        w = [Fraction(1)]
        for i in range(L):
            w.append(min(Fraction(1), w[-1] * p(x[:i])[x[i]] / q(x[:i])[x[i]]))
        h = [Fraction(1)]
        for i in range(1, L):
            S = sum((max(w[i] * a - b, Fraction(0)) for a, b in zip(p(x[:i]), q(x[:i]))),
                    Fraction(0))
            h.append(S / (S + 1 - w[i]) if S + 1 - w[i] else Fraction(1))
        h.append(w[L])
        for eta in itertools.product((0, 1), repeat=L):
            m = Qx
            for i, e in enumerate(eta, start=1):
                m *= h[i] if e else 1 - h[i]
            if m == 0:
                continue
            tau = max([i for i, e in enumerate(eta, start=1) if e], default=0)
            taus[tau] += m
            if tau == L:
                row = p(x)
            else:
                up = [max(w[tau] * a - b, Fraction(0)) for a, b in zip(p(x[:tau]), q(x[:tau]))]
                z = sum(up, Fraction(0))
                row = [u / z for u in up] if z else p(x[:tau])
            for y, r in enumerate(row):
                extend(x[:tau] + (y,), m * r)
    return law, taus


SCAN_INSTANCES = ((3, 2, 0, 6), (2, 3, 5, 10), (3, 3, 1, 4))


def c_vllm_ascend_11985() -> Finding:
    import spectheory as st

    ok, parts = [], []
    for a in SCAN_INSTANCES:
        inst = rnd(*a)
        note(inst, "single", 1)
        law, taus = backward_scan_law(inst)
        res = st.analyze(inst, "block", exact=True)
        d = tv_to_target(law, inst)
        ok += [d == 0, list(taus) == [Fraction(t) for t in res.tau_pmf]]
        parts.append(f"random{a}: TV {d}, tau pmf {', '.join(map(f, taus))} (block "
                     f"verification's: {', '.join(map(f, res.tau_pmf))})")
    verdict = "refuted" if all(ok) else "confirmed"
    return Finding("the last i with u_i <= h_i over independent coins: " + "; ".join(parts),
                   verdict, ", ".join(f"random{a}" for a in SCAN_INSTANCES))


# ----------------------------------------------------------------------------- z-lab/dflash #74


def c_dflash_74() -> Finding:
    from spectheory.testing.mutants.draft_q import greedy_chain_instance

    ok, parts = [], []
    for a in ((3, 2, 1, 6), (3, 2, 0, 12), (2, 3, 5, 10)):
        inst = greedy_chain_instance(rnd(*a))
        note(inst, "single", 1)
        d = tv_to_target(sample_match_law(inst), inst)
        ok.append(d == 0)
        parts.append(f"random{a}: TV {d}")
    return Finding("greedy draft, target sampled at each position, accepted while equal, the "
                   "target's sample emitted at the first mismatch: " + "; ".join(parts) +
                   " (the emitted tokens are the target's own samples)",
                   "refuted" if all(ok) else "confirmed",
                   "random(3,2,1,6), random(3,2,0,12), random(2,3,5,10) with greedy-chain drafts")


# ----------------------------------------------------------------------------- SGLang #28242, #33643


def c_sglang_28242() -> Finding:
    from spectheory.inputs.processing import SamplingParams
    from spectheory.testing.mutants import stateful_steps as ss
    from spectheory.testing.checks.step import target_sequence_law

    inst = ss.stateful_instance()
    note(inst, "single", 1)
    sp = SamplingParams(repetition_penalty=2.0)
    tvs = [ss.tv(ss.stateful_step_law("sglang-28242", inst, s, sp),
                 target_sequence_law(inst, s + inst.block_length, sp)) for s in (1, 2)]
    # "minimal": the row reads it as a TV below 0.01 that does not grow with the steps
    minimal = tvs[0] < 0.01 and tvs[1] <= tvs[0] * 1.5
    return Finding(f"exact TV to the penalised target: {tvs[0]:.4f} over one step, {tvs[1]:.4f} "
                   f"over two ({tvs[1] / tvs[0]:.2f} times the first)",
                   "reproduced" if minimal else "not reproduced",
                   "stateful_instance() (random(3,2,2,12)), repetition_penalty = 2, float64")


def c_sglang_33643() -> Finding:
    from spectheory.testing.mutants import stateful_steps as ss

    inst = ss.toy_repeat_instance()
    note(inst, "single", 1)
    e = ss.effective_frequency_penalty(1.0)
    per = 1 / e["tokens_per_step"]
    close = abs(e["ratio"] - per) <= 0.1 * per
    return Finding(f"effective frequency penalty {e['ratio']:.4f} x nominal (equal expected "
                   f"repeats over N = 6 tokens: {e['repeats_buggy']:.4f}), against nominal / L = "
                   f"{per:.4f} (L = {e['tokens_per_step']:.4f} tokens per step)",
                   "confirmed" if close else "refuted",
                   "toy_repeat_instance() (q = p, random(3,2,2,12)'s target), frequency penalty "
                   "1, four steps, float64")


# ----------------------------------------------------------------------------- rows

ENGINE_P = ("engine code: p the target's (processed) probabilities, q the draft's (spectheory's "
            "letters); tau = accepted draft tokens of one iteration")
STATEFUL = ("engine code: p the target's probabilities processed by the request's penalties "
            "(vLLM's semantics on logits, spectheory.inputs.stateful), q the draft's; laws of "
            "the first N = steps + L tokens under check_step's schedule, completed by the "
            "correctly penalised target")

ROWS = [
    Claim("mlx-lm-1709-acceptance", "mlx-lm PR #1709", "per-token acceptance of exact-match "
          "against rejection sampling", "engine behaviour",
          "with the draft equal to the target (q = p), exact-match verification accepts a "
          "drafted token with probability sum_x p(x)^2, rejection sampling with probability 1",
          ENGINE_P, Hypotheses(("single",), K=(1,), L=(1,),
                               notes="one drafted token; q = p; rows with ties and a zero"),
          "confirmed", c_mlx_lm_1709),
    Claim("mistralrs-2424-greedy-chain", "mistral.rs PR #2424", "sample_target_sequence_"
          "speculative (sample_speculative=true) before the PR", "engine behaviour",
          "the released speculative path returns the argmax instead of sampling: its law is "
          "the processed target's greedy chain at any temperature", ENGINE_P,
          Hypotheses(("single",), K=(1,), L=(2,), exact=False,
                     notes="the port mistralrs_step(version='released') run step after step from "
                           "the empty context (deterministic); argmax ties to the lowest id"),
          "confirmed", c_mistralrs_2424,
          reading="argmax ties to the lowest id (torch.argmax), as both the port and the "
                  "recomputation take them"),
    Claim("vllm-ascend-11985-backward-scan", "vllm-ascend PR #11985", "review: taking the last "
          "i with u <= h", "engine behaviour",
          "taking the last i with u_i <= h_i breaks contiguous acceptance (the backward scan is "
          "not block verification's rule)", ENGINE_P,
          Hypotheses(("single",), K=(1,),
                     notes="h_i as in arXiv 2403.10444 (docs: verification.md); independent "
                           "coins, every pattern enumerated"),
          "refuted", c_vllm_ascend_11985),
    Claim("dflash-74-greedy-draft", "z-lab/dflash #74", "dflash/model.py at the issue's "
          "commit: block_output_ids[:, 1:] = sample(draft_logits) (temperature 0), posterior = "
          "sample(output.logits, temperature), accepted while equal", "engine behaviour",
          "with the draft greedy and the target sampled, acceptance by token equality makes the "
          "output distribution diverge from the target's", ENGINE_P,
          Hypotheses(("single",), K=(1,),
                     notes="the draft a deterministic function of the context (its greedy "
                           "chain); the target's sample emitted at the first mismatch, its next "
                           "sample after L matches"),
          "refuted", c_dflash_74),
    Claim("sglang-28242-minimal-impact", "SGLang PR #28242", "the bonus-only repetition "
          "penalty's impact described as minimal", "empirical observation",
          "applying the repetition penalty at the bonus position only (from a snapshot one "
          "round late) has minimal impact on the output", STATEFUL,
          Hypotheses(("single",), K=(1,), L=(2,), exact=False,
                     notes="float64 laws; 'minimal' read as a TV below 0.01 that does not grow "
                           "with the steps"),
          "not reproduced", c_sglang_28242,
          reading="the replica's rule (rows j < L unpenalised, the bonus row penalised with the "
                  "previous step's starting context plus the drafts) and vLLM's repetition "
                  "penalty on logits"),
    Claim("sglang-33643-nominal-over-l", "SGLang PR #33643", "penalizers fed output_ids[-1] "
          "once per step", "stated result",
          "the effective frequency penalty is about nominal / L (L the tokens emitted per "
          "step)", STATEFUL,
          Hypotheses(("single",), K=(1,), L=(2,), exact=False,
                     notes="effective penalty: the f' at which a correct engine's expected "
                           "repeats over N = 6 tokens equal the replica's at nominal 1 "
                           "(bisection to 1e-10); float64"),
          "refuted", c_sglang_33643,
          reading="the replica's rule (one token per step in the counts) and vLLM's frequency "
                  "penalty on logits"),
]
