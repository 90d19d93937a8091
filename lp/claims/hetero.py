"""Draft and target with different tokenizers: the three lossless schemes of Timor et al.
(arXiv 2502.05202, ICML 2025) and vLLM's vocabulary mapping (vLLM #38174).

Notation: the paper writes p for the target and q for the draft, as spectheory does; its schemes
SLEM (string-level exact match), SLRS (string-level rejection sampling) and TLI (token-level
intersection) are spectheory's ``slem``, ``slrs``, ``tli``
([`spectheory.verifiers.hetero`][spectheory.verifiers.hetero]); "preserves the target
distribution" is compared over a fixed number of target tokens of repeated iterations (equal
token laws give equal string laws). The rules were rebuilt from the paper's abstract and section
3, vLLM's code and public descriptions of the algorithms (the algorithm boxes' text was not
available): [Heterogeneous vocabularies](../heterogeneous-vocabularies.md) states each choice.
Instances: the toy pairs of [`hetero_pair`][spectheory.inputs.hetero_pairs.hetero_pair]
(prefix-dependent models), checked in exact rationals by
[`spectheory.lp.claims.hetero_checks`][spectheory.lp.claims.hetero_checks].
"""

from __future__ import annotations

from .common import _FACTS, Claim, Fact, Finding, Hypotheses


def _lossless(scheme: str) -> Finding:
    from .hetero_checks import CLAIM_INSTANCES, claim_lossless

    for _ in CLAIM_INSTANCES:  # draft_length 2, exact rationals, prefix-dependent tables
        _FACTS.append(Fact("single", 1, 2, True, True))
    ok, names, numbers = claim_lossless(scheme)
    ours = "; ".join(f"{name}: TV {tv}, target tokens / forward {tok}"
                     for name, (tv, tok, _) in numbers.items())
    return Finding(ours, "confirmed" if ok else "refuted", ", ".join(names))


def c_slem() -> Finding:
    return _lossless("slem")


def c_slrs() -> Finding:
    return _lossless("slrs")


def c_tli() -> Finding:
    return _lossless("tli")


def c_vllm_tli() -> Finding:
    return _lossless("vllm-tli")


HETERO = ("arXiv 2502.05202: p the target, q the draft (as spectheory), over two tokenizers of one "
          "string alphabet; the output law compared over a fixed number of target tokens")
#: The reading every scheme's row shares with its recomputation.
SHARED = ("the draft's context at a forward is the draft tokenization of the emitted string; laws "
          "compared over 3 target tokens of repeated forwards")
HYP = Hypotheses(("single",), K=(1,),
                 notes="two longest-match tokenizers over one alphabet, every character a token "
                       "of both; draft length 2, 3 target tokens compared")

ROWS = [
    Claim("hetero-slem-lossless", "arXiv 2502.05202", "SLEM (section 3)", "theorem",
          "string-level exact match preserves the target distribution", HETERO, HYP,
          "confirmed", c_slem,
          reading="the draft's string re-tokenized alone by the target tokenizer, from the "
                  "boundary after the context, so the target's context stays its own tokens; "
                  + SHARED),
    Claim("hetero-slrs-lossless", "arXiv 2502.05202", "SLRS (section 3)", "theorem",
          "string-level rejection sampling preserves the target distribution", HETERO, HYP,
          "confirmed", c_slrs,
          reading="the lookahead S1 is the smallest that settles the first target token of the "
                  "draft's string for every continuation; " + SHARED),
    Claim("hetero-tli-lossless", "arXiv 2502.05202", "TLI (section 3)", "theorem",
          "token-level intersection preserves the target distribution", HETERO, HYP,
          "confirmed", c_tli,
          reading="where the draft's row has no mass on the intersection, drafting stops and "
                  "the target samples the next token; " + SHARED),
    Claim("vllm-38174-tli-lossless", "vLLM #38174", "vocabulary mapping (greedy drafting over the "
          "intersection, one-hot rejection sampling)", "engine behaviour",
          "vLLM's heterogeneous-vocabulary route preserves the target distribution", HETERO, HYP,
          "confirmed", c_vllm_tli,
          reading="the greedy route (vLLM validates heterogeneous vocabularies with greedy "
                  "drafting only), the masked argmax's ties to the lowest id, target tokens off "
                  "the intersection mapped to draft id 0 in the draft's context; laws compared "
                  "over 3 target tokens of repeated forwards"),
]
