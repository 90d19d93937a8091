"""The claims ledger: every published claim about draft verification that spectheory can check,
recomputed exactly, one row each, laid out one module per source (or family of sources), the rows
as data beside their checks.

A row ([`Claim`][spectheory.lp.claims.common.Claim]) states, from its source: the claim in
spectheory's letters with its theorem, equation, section or file (``where``); its ``kind``
(theorem, lemma, conjecture, stated result, empirical observation, released code, engine
behaviour, spectheory result); the ``notation`` map from the source's letters and counts to
spectheory's (which letter is the draft and which the target, whether tau counts accepted draft
tokens, E[tau] or E[tau + 1], per iteration or per generation); its ``hypotheses``
([`Hypotheses`][spectheory.lp.claims.common.Hypotheses]: drafting scheme, identical drafts, K, L,
one iteration, exact numbers, cross-iteration corrections in words); the verdict recorded in the
repository; its check, which computes spectheory's numbers on stated instances; and, where the
source leaves a choice open, the shared ``reading`` that the check and its independent
recomputation both follow (so their agreement does not test that choice). Every exact
computation a check runs records what it ran on ([`Fact`][spectheory.lp.claims.common.Fact]), and
[`run_claims`][spectheory.lp.claims.run_claims] asserts that each lies within the row's hypotheses
(and that every instance's rows are distributions), so a row cannot silently check a claim outside
the conditions its source states.

Verdicts: ``confirmed`` (holds on every instance checked, exactly unless the row says float64),
``refuted`` (an instance where it fails, with the numbers), ``qualified`` (holds only under a
condition the claim does not state, or in a weaker form); for an empirical observation, which no
theorem states, ``reproduced`` / ``not reproduced`` (never ``refuted``).

Modules: [`leviathan`][spectheory.lp.claims.leviathan] (arXiv 2211.17192),
[`block_gbv`][spectheory.lp.claims.block_gbv] (arXiv 2403.10444, 2602.16961),
[`hu`][spectheory.lp.claims.hu] (2502.18779), [`khisti`][spectheory.lp.claims.khisti]
(2410.18234), [`spechub`][spectheory.lp.claims.spechub] (2411.05289),
[`global_resolution`][spectheory.lp.claims.global_resolution] (2511.15898),
[`hsd`][spectheory.lp.claims.hsd] (2601.05724), [`spectr_gbv`][spectheory.lp.claims.spectr_gbv]
(2604.25925), [`trees`][spectheory.lp.claims.trees] (2602.16994 and the 2025-2026 sources left
out), [`engines`][spectheory.lp.claims.engines] (engines' issues and code, the bug kit),
[`relaxed`][spectheory.lp.claims.relaxed] (2604.04987, 2606.30265, the lossy frontier; its
divergence checks in [`relaxed_checks`][spectheory.lp.claims.relaxed_checks]),
[`diversed`][spectheory.lp.claims.diversed] (2604.07622, the static ensemble),
[`cascades`][spectheory.lp.claims.cascades] (2405.19261, speculative cascades),
[`hetero`][spectheory.lp.claims.hetero] (2502.05202, vLLM #38174; its checks in
[`hetero_checks`][spectheory.lp.claims.hetero_checks]),
[`fvo_spec`][spectheory.lp.claims.fvo_spec] (2605.07698, grammar-constrained decoding),
[`engine_threads`][spectheory.lp.claims.engine_threads] (engines' pull requests, issues and
reviews: mlx-lm, mistral.rs, vllm-ascend, z-lab/dflash, SGLang).

Ids are stable: ``spectheory claims --only ID`` is cited from the docs and the changelog, so a
row whose source is corrected (re-attributed, re-quoted) keeps its id and says so in ``where``.

The command (``spectheory claims``) exits 1 when a recomputed verdict differs from the recorded
one, so the test suite runs it as a regression test; ``docs/claims.md`` is generated from it
(``spectheory claims --markdown``) and a test checks that it is current. Instances: ``toy`` is
p = (1/3, 2/3), q = (2/3, 1/3) (context-independent) at L = 2; ``random(V, L, seed, d)`` is
[`random_instance`][spectheory.inputs.random_instances.random_instance] with prefix-dependent rows
of denominator d (``spectheory instance random --vocab V --block L --seed S --denominator d``).
The tests recompute every refutation and optimality confirmation with a second implementation
that imports nothing from spectheory's engine, verifiers or LPs (``tests/independent_claims.py``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from typing import Callable

from spectheory.runtime.errors import result_stream

from . import block_gbv, cascades, diversed, engine_threads, engines, fvo_spec, global_resolution, hetero, \
    hsd, hu, khisti, leviathan, relaxed, spechub, spectr_gbv, trees
from .common import KIND_VERDICTS, KINDS, VERDICTS, Claim, Fact, Finding, Hypotheses, \
    reset_facts, take_facts

__all__ = ["CLAIMS", "KINDS", "VERDICTS", "Claim", "Fact", "Finding", "Hypotheses", "Row",
           "ledger", "markdown", "run_claims", "select"]

#: The rows of the papers, the released code and the engines, module by module (the bug kit's own
#: engine claims are added by `ledger`).
CLAIMS: list[Claim] = (leviathan.ROWS + block_gbv.ROWS + hu.ROWS + khisti.ROWS +
                       global_resolution.ROWS + spechub.ROWS + hsd.ROWS + spectr_gbv.ROWS +
                       trees.ROWS + engines.ROWS + relaxed.ROWS + diversed.ROWS + cascades.ROWS +
                       hetero.ROWS + fvo_spec.ROWS + engine_threads.ROWS)


def ledger() -> list[Claim]:
    """Every row: `CLAIMS` and the bug kit's engine claims (loaded on first use: the bug kit
    loads torch, the command line's parser does not)."""
    return list(CLAIMS) + engines.kit_rows()


@dataclass(frozen=True)
class Row:
    """A ledger row after its check ran."""

    claim: Claim
    finding: Finding

    @property
    def matches(self) -> bool:
        return self.finding.verdict == self.claim.recorded

    def to_json(self) -> dict:
        c, f = self.claim, self.finding
        return {"id": c.id, "source": c.source, "where": c.where, "kind": c.kind,
                "claim": c.claim, "notation": c.notation, "hypotheses": c.hypotheses.text(),
                "ours": f.ours, "verdict": f.verdict, "recorded": c.recorded,
                "instance": f.instance, "command": c.command, "reading": c.reading}


def select(only: str | None = None) -> list[Claim]:
    """The claims whose id or source contains ``only`` (case-insensitive), all for None."""
    from spectheory.runtime.errors import SpectheoryError

    if only is not None and (not isinstance(only, str) or not only.strip()):
        raise SpectheoryError(f"--only {only!r} names nothing: give part of a claim id or "
                              "source (leave --only out for the whole ledger)")
    rows = ledger()
    if only is None:
        return rows
    key = only.lower()
    chosen = [c for c in rows if key in c.id.lower() or key in c.source.lower()]
    if not chosen:
        raise SpectheoryError(f"--only {only!r} matches no claim id or source; sources: "
                              f"{', '.join(sorted({c.source for c in rows}))}")
    return chosen


def check_row(claim: Claim, finding: Finding) -> None:
    """Assert that a finding may stand: its verdict is one of `VERDICTS` and allowed for the
    row's kind, and every computation it ran lies within the row's hypotheses (at least one, unless
    the bug kit states the hypotheses)."""
    if claim.kind not in KINDS:
        raise AssertionError(f"claim {claim.id}: kind {claim.kind!r}")
    if finding.verdict not in KIND_VERDICTS[claim.kind]:
        raise AssertionError(f"claim {claim.id}: verdict {finding.verdict!r} is not one a "
                             f"{claim.kind} may take ({', '.join(KIND_VERDICTS[claim.kind])})")
    if not claim.hypotheses.kit and not finding.facts:
        raise AssertionError(f"claim {claim.id}: the check recorded no computation, so its "
                             f"hypotheses were not asserted")
    for fact in finding.facts:
        why = claim.hypotheses.admits(fact)
        if why is not None:
            raise AssertionError(f"claim {claim.id}: an instance outside the row's hypotheses "
                                 f"({why}): {fact}")


def run_claims(only: str | None = None, progress: Callable | None = None) -> list[Row]:
    """Recompute the selected claims (module doc), asserting each row's hypotheses."""
    rows = []
    for claim in select(only):
        if progress is not None:
            progress(claim)
        reset_facts()
        finding = claim.check()
        finding = dataclasses.replace(finding, facts=take_facts())
        check_row(claim, finding)
        rows.append(Row(claim, finding))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def markdown(rows: list[Row]) -> str:
    """The documentation page (docs/claims.md) for the full ledger."""
    out = ["# Claims ledger", "",
           "Every published claim about draft verification that spectheory can check, "
           "recomputed exactly by `spectheory claims` (generated by `spectheory claims "
           "--markdown > docs/claims.md`; do not edit by hand). Each row gives the claim with its "
           "location in the source, its kind, the map from the source's notation to "
           "spectheory's (p the target, q the draft; tau the draft tokens accepted in one "
           "iteration; E[tau + 1] the tokens emitted per iteration), the hypotheses under which "
           "the source states it (asserted on every instance the check uses), spectheory's "
           "numbers, the verdict and the instance. Verdicts: **confirmed** on every instance "
           "checked, **refuted** with the instance, **qualified** when the claim holds only "
           "under a condition it does not state; an empirical observation is **reproduced** or "
           "**not reproduced**, never refuted. Instances: `toy` is p = (1/3, 2/3), q = (2/3, "
           "1/3) at L = 2; `random(V,L,seed,d)` is `spectheory instance random --vocab V "
           "--block L --seed seed --denominator d` (prefix-dependent rows). Each row is "
           "reproduced by `spectheory claims --only ID`; every refutation and optimality "
           "confirmation is recomputed in the tests by a second implementation written from "
           "the papers alone (own enumeration, own LP with an exact certificate); where the "
           "source leaves a choice open and both implementations follow one reading of it, the "
           "row says so (**shared reading**). The rules and "
           "the papers are on [Multi-draft optimal transport](multidraft-ot.md).", "",
           f"{len(rows)} rows: " + ", ".join(
               f"{sum(r.finding.verdict == v for r in rows)} {v}" for v in VERDICTS) + ".", ""]
    for source in dict.fromkeys(r.claim.source for r in rows):
        out += [f"## {source}", ""]
        for r in rows:
            if r.claim.source != source:
                continue
            c, f = r.claim, r.finding
            out += [f"### `{c.id}`: **{f.verdict}**", "",
                    "| | |", "|---|---|",
                    f"| claim | {_cell(c.claim)} |",
                    f"| where | {_cell(c.where)} |",
                    f"| kind | {_cell(c.kind)} |",
                    f"| notation | {_cell(c.notation)} |",
                    f"| hypotheses | {_cell(c.hypotheses.text())} |"]
            if c.reading:
                out += [f"| shared reading | {_cell(c.reading)} |"]
            out += [f"| spectheory | {_cell(f.ours)} |",
                    f"| instance | {_cell(f.instance)} |",
                    f"| command | `{c.command}` |", ""]
    out += ["## Considered and left out", ""]
    out += [f"- **{_cell(src)}**: {_cell(why)}." for src, why in trees.LEFT_OUT]
    return "\n".join(out).rstrip("\n") + "\n"


def cmd_claims(args) -> int:
    from spectheory.runtime import limits
    from spectheory.runtime.errors import SpectheoryError

    if args.markdown and args.only:
        raise SpectheoryError("--markdown writes the whole ledger; drop --only")
    if args.markdown and args.json:
        raise SpectheoryError("--markdown and --json are two forms of the output; give one")
    chosen = select(args.only)
    step = [0]

    def progress(claim):
        step[0] += 1
        if limits.progress_enabled():
            print(f"[{step[0]}/{len(chosen)}] {claim.id}", file=sys.stderr, flush=True)

    rows = run_claims(args.only, progress)
    if args.markdown:
        result_stream().write(markdown(rows))
    elif args.json:
        result_stream().write(json.dumps([r.to_json() for r in rows]) + "\n")
    else:
        for r in rows:
            c, f = r.claim, r.finding
            flag = "" if r.matches else f"   <-- recorded {c.recorded}"
            sys.stdout.write(f"{f.verdict.upper():9s} {c.id} ({c.source}, {c.where}; {c.kind}): "
                             f"{c.claim}\n"
                             f"          notation: {c.notation}\n"
                             f"          hypotheses: {c.hypotheses.text()}\n" +
                             (f"          shared reading: {c.reading}\n" if c.reading else "") +
                             f"          spectheory: {f.ours} [{f.instance}]{flag}\n")
        differ = sum(not r.matches for r in rows)
        sys.stdout.write(f"{len(rows)} claims: " + ", ".join(
            f"{sum(r.finding.verdict == v for r in rows)} {v}" for v in VERDICTS) +
            (f"; {differ} differ from the recorded verdict\n" if differ else
             "; all as recorded\n"))
    return 1 if any(not r.matches for r in rows) else 0


def register(sub) -> None:
    p = sub.add_parser(
        "claims", help="recompute every checkable published claim (the claims ledger)",
        description="Recompute the claims ledger: one row per published claim spectheory can "
                    "check (source and location, kind, notation map, hypotheses, spectheory's "
                    "numbers, verdict, instance, command). Exit code 1 when a verdict differs "
                    "from the one recorded in the repository.")
    p.add_argument("--only", metavar="TEXT", default=None,
                   help="the claims whose id or source contains TEXT (e.g. 2502.18779, hu-)")
    p.add_argument("--json", action="store_true", help="one JSON list of rows")
    p.set_defaults(json_result=True)  # the result through result_stream (json_stdout)
    p.add_argument("--markdown", action="store_true",
                   help="the documentation page (docs/claims.md) for the whole ledger")
    p.set_defaults(func=cmd_claims)
