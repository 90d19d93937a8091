"""``spectheory report``: the main job on built-in defaults, and a check.

A short, reproducible report: the two-token example of the block verification paper in exact
rationals, a handful of random instances in float64 (token vs block verification, block
efficiency, losslessness), a multi-iteration losslessness check, the known-wrong "running product
of uniforms" variant, and multi-path verifiers side by side. Every comparison it prints (an
equality with a published or optimal value, a losslessness verdict, a lossy control caught) is a
counted check; the report ends with one verdict line, ``N checks, all passed`` or ``N checks,
M FAILED: ...``, and the command exits 1 when any check fails.

The report is extensible without the core importing the outer packages: another package adds a
section with `add_section` (the [`spectheory.lp`][spectheory.lp] package adds its optimality section
this way when its sub-commands are registered) and an optimum for the multi-path table with
`add_multipath_optimum`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

from ..engine.analysis import analyze
from ..engine.lossless import check_lossless
from ..inputs.instances import Instance, instance_from_dict
from ..inputs.random_instances import random_instance

# The verifiers (and torch) are imported by the sections that run them, not when the command
# line registers ``report``.

TOY = {"vocab_size": 2, "block_length": 2, "target": ["1/3", "2/3"], "draft": ["2/3", "1/3"]}

#: E[tau] on the two-token example as published (Sun et al., arXiv 2403.10444).
TOY_PUBLISHED = {"token": Fraction(10, 9), "block": Fraction(11, 9)}

#: Float64 losslessness tolerance of the report's checks (largest TV still called lossless).
FLOAT_TOL = 1e-12


def toy_instance(exact: bool = True):
    """The paper's two-token example: p = (1/3, 2/3), q = (2/3, 1/3), L = 2."""
    return instance_from_dict(TOY, exact=exact)


# ----------------------------------------------------------------------------- checks


@dataclass
class Checks:
    """The comparisons a report makes. Calling ``checks(label, passed)`` records one and returns
    ``passed``, so a section prints its verdict from the same boolean that is counted."""

    results: list[tuple[str, bool]] = field(default_factory=list)

    def __call__(self, label: str, passed) -> bool:
        passed = bool(passed)
        self.results.append((label, passed))
        return passed

    @property
    def failed(self) -> list[str]:
        return [label for label, ok in self.results if not ok]

    def verdict(self) -> str:
        """``N checks, all passed`` or ``N checks, M FAILED: label; label``."""
        n, bad = len(self.results), self.failed
        head = f"{n} check{'' if n == 1 else 's'}"
        if not bad:
            return f"{head}, all passed"
        return f"{head}, {len(bad)} FAILED: " + "; ".join(bad)


def mark(ok: bool, yes: str = "ok", no: str = "FAILED") -> str:
    return yes if ok else no


# ----------------------------------------------------------------------------- sections


def section_toy(args, checks: Checks) -> list[str]:
    from ..verifiers import SINGLE_PATH, block_verification

    inst = toy_instance()
    lines = ["p = (1/3, 2/3), q = (2/3, 1/3), L = 2, exact rationals:"]
    for name, v in SINGLE_PATH.items():
        r = analyze(inst, v, name)
        pmf = ", ".join(str(x) for x in r.tau_pmf)
        lossless = checks(f"{name} lossless on the two-token example", r.tv_to_target == 0)
        line = (f"  {name:6s} E[tau] = {r.expected_accepted} ({float(r.expected_accepted):.4f})"
                f"  E[tau+1] = {r.block_efficiency}  tau pmf = ({pmf})"
                f"  TV to target = {r.tv_to_target} ({mark(lossless, 'lossless', 'LOSSY')})")
        if name in TOY_PUBLISHED:
            ok = checks(f"{name} E[tau] = published {TOY_PUBLISHED[name]}",
                        r.expected_accepted == TOY_PUBLISHED[name])
            line += f"; published {TOY_PUBLISHED[name]}: {mark(ok, 'equal', 'DIFFERENT')}"
        lines.append(line)
    rep = check_lossless(block_verification, inst, n_tokens=6)
    checks("block lossless over 6 tokens of repeated iterations", rep.lossless)
    lines.append(f"  block, 6 tokens over repeated iterations: {rep}")
    return lines


def section_random(args, checks: Checks) -> list[str]:
    lines = [f"{'V':>3} {'L':>3} {'alpha':>6} {'seed':>5} {'E[tau+1] token':>15} "
             f"{'E[tau+1] block':>15} {'gain':>7} {'TV token':>9} {'TV block':>9}  "
             f"lossless, block >= token"]
    from ..verifiers import SINGLE_PATH

    cases = [(4, 4, 0.5), (4, 4, 1.0), (4, 4, 2.0), (3, 6, 1.0), (8, 3, 1.0)]
    for k, (V, L, alpha) in enumerate(cases):
        seed = (args.seed + k) % 2**63  # the seeds in turn, wrapping past the last one
        inst = random_instance(V, L, seed, alpha=alpha)
        tok = analyze(inst, SINGLE_PATH["token"], "token")
        blk = analyze(inst, SINGLE_PATH["block"], "block")
        gain = blk.block_efficiency / tok.block_efficiency - 1
        where = f"V = {V}, L = {L}, seed {seed}"
        ok = [checks(f"token lossless ({where})", tok.tv_to_target <= FLOAT_TOL),
              checks(f"block lossless ({where})", blk.tv_to_target <= FLOAT_TOL),
              checks(f"block >= token ({where})",
                     blk.block_efficiency >= tok.block_efficiency - FLOAT_TOL)]
        lines.append(f"{V:>3} {L:>3} {alpha:>6} {seed:>5} {tok.block_efficiency:>15.6f} "
                     f"{blk.block_efficiency:>15.6f} {gain:>+7.2%} {tok.tv_to_target:>9.1e} "
                     f"{blk.tv_to_target:>9.1e}  " + ", ".join(mark(o) for o in ok))
    inst = random_instance(3, 3, args.seed, denominator=24)
    tok = analyze(inst, SINGLE_PATH["token"], "token")
    blk = analyze(inst, SINGLE_PATH["block"], "block")
    where = f"V = 3, L = 3, seed {args.seed}, exact"
    ok = [checks(f"token lossless ({where})", tok.tv_to_target == 0),
          checks(f"block lossless ({where})", blk.tv_to_target == 0),
          checks(f"block >= token ({where})", blk.expected_accepted >= tok.expected_accepted)]
    lines.append(f"exact rationals, V = 3, L = 3, rows in multiples of 1/24 (seed {args.seed}): "
                 f"E[tau] token = {tok.expected_accepted}, block = {blk.expected_accepted}; "
                 f"TV to target {tok.tv_to_target} and {blk.tv_to_target}: "
                 + ", ".join(mark(o) for o in ok))
    return lines


def section_wrong_variant(args, checks: Checks) -> list[str]:
    from ..verifiers import uniform_product_verification

    inst = toy_instance(exact=False)
    rep = check_lossless(uniform_product_verification, inst)
    caught = checks("'running product of uniforms' caught as lossy", not rep.lossless)
    return ["'running product of uniforms' variant on the two-token example:", f"  {rep}",
            f"  caught by the checker: {mark(caught, 'yes', 'NO')}"]


def section_stateful(args, checks: Checks) -> list[str]:
    """Token and block verification under stateful sampling parameters, over several
    iterations; a history-blind rule and a grammar mask's exact law."""
    from ..inputs.processing import SamplingParams
    from ..inputs.stateful import TokenAutomaton
    from ..verifiers import SINGLE_PATH

    lines = []
    inst = random_instance(3, 2, args.seed)
    for sp in ("repetition_penalty=1.4,presence_penalty=0.3,frequency_penalty=0.2",
               "min_tokens=2,stop_token_ids=0,no_repeat_ngram_size=3,logit_bias=1:1.5"):
        for name in ("token", "block"):
            rep = check_lossless(SINGLE_PATH[name], inst, sampling=sp, n_tokens=5)
            ok = checks(f"{name} lossless over 5 tokens under {sp}", rep.lossless)
            lines.append(f"  {name:5s} {sp}: TV over 5 tokens = {float(rep.tv):.2e} "
                         f"({mark(ok, 'lossless', 'LOSSY')})")
    from ..verifiers import uniform_product_verification

    sp0 = "repetition_penalty=1.4,presence_penalty=0.3,frequency_penalty=0.2"
    rep = check_lossless(uniform_product_verification, inst, sampling=sp0, n_tokens=5)
    caught = checks("'running product of uniforms' caught as lossy under penalties",
                    not rep.lossless)
    lines.append(f"  uniform-product {sp0}: TV over 5 tokens = {float(rep.tv):.4f} (caught: "
                 f"{mark(caught, 'yes', 'NO')})")
    # a grammar (after token 0, token 1 is banned) in exact rationals
    grammar = TokenAutomaton([[1, 0, 0], [1, None, 0]])
    ex = random_instance(3, 2, args.seed, denominator=24)
    sp = SamplingParams(grammar=grammar, min_tokens=1, stop_token_ids=(2,))
    blk = analyze(ex, SINGLE_PATH["block"], "block", sampling=sp, draft_sampling=sp)
    tok = analyze(ex, SINGLE_PATH["token"], "token", sampling=sp, draft_sampling=sp)
    ok = [checks("block lossless under a grammar mask (exact)", blk.tv_to_target == 0),
          checks("token lossless under a grammar mask (exact)", tok.tv_to_target == 0),
          checks("block >= token under a grammar mask (exact)",
                 blk.block_efficiency >= tok.block_efficiency)]
    lines.append(f"  grammar mask + min_tokens, exact rationals (rows in multiples of 1/24): "
                 f"E[tau+1] token = {tok.block_efficiency}, block = {blk.block_efficiency}: "
                 + ", ".join(mark(o) for o in ok))
    return lines


#: Optima for the multi-path table: label -> ``f(instance, paths, drafting) -> float``, the
#: largest E[tau+1] of any valid verifier (filled by `add_multipath_optimum`).
MULTIPATH_OPTIMA: dict[str, Callable[[Instance, int, str], float]] = {}


def add_multipath_optimum(label: str, optimum: Callable[[Instance, int, str], float]) -> None:
    """Add (or replace) an optimum row of the multi-path table.

    Parameters
    ----------
    label : str
        Row label (also names its checks).
    optimum : callable
        ``optimum(instance, paths, drafting) -> float``: the largest E[tau+1] of any valid
        K-path verifier under ``drafting`` ("iid" or "norep").

    Notes
    -----
    Each verifier's E[tau+1] is checked to be at most the optimum (to 1e-7) for K = 1, 2, 3, and
    at K = 1 the best verifier to attain it: block verification is the optimal single-path
    verifier (Sun et al., arXiv 2403.10444; the node-budget LP of Thomas & Pal, arXiv
    2602.16961, has the same optimum).
    """
    MULTIPATH_OPTIMA[label] = optimum


def section_multipath(args, checks: Checks) -> list[str]:
    """Multi-path verifiers side by side, each checked lossless, against any registered optimum,
    and the lossy mismatched-tie GBV caught by the checker."""
    from ..registry import DRAFTING_MAX_PATHS
    from ..verifiers import LOSSY_MULTI_PATH, MULTI_PATH

    inst = random_instance(3, 2, args.seed, alpha=0.7)
    Ks = (1, 2, 3)

    def defined(drafting):  # the Ks a drafting scheme defines (hub: K <= 2)
        return [K for K in Ks if K <= DRAFTING_MAX_PATHS.get(drafting, K)]

    lines = [f"random V = 3, L = 2 (seed {args.seed}, alpha 0.7), exact float64 over all "
             f"V^(LK) joint drafts; E[tau+1] and the largest TV to the target:",
             f"  {'verifier':16s} {'drafting':8s} " + " ".join(f"{'K = ' + str(K):>9s}"
                                                        for K in Ks) + "   max TV   lossless"]
    best: dict[tuple[str, int], float] = {}
    for name, v in MULTI_PATH.items():
        drafting = v.default_drafting
        Kd = defined(drafting)
        res = [analyze(inst, v, name, paths=K, drafting=drafting) for K in Kd]
        for K, r in zip(Kd, res):
            best[(drafting, K)] = max(best.get((drafting, K), 0.0), float(r.block_efficiency))
        tv = max(float(r.tv_to_target) for r in res)
        ok = checks(f"{name} lossless for K = 1..{Kd[-1]}", tv <= FLOAT_TOL)
        cells = [f"{float(r.block_efficiency):9.6f}" for r in res]
        cells += [f"{'-':>9s}"] * (len(Ks) - len(Kd))  # K beyond what the scheme defines
        lines.append(f"  {name:16s} {drafting:8s} " + " ".join(cells)
                     + f"   {tv:.1e}  {mark(ok, 'yes', 'NO')}")
    # at K = 1 every scheme drafts one plain path: the best K = 1 verifier of any scheme
    best1 = max(v for (_, K), v in best.items() if K == 1)
    tol = 1e-7  # LP solver tolerance
    for label, optimum in MULTIPATH_OPTIMA.items():
        for drafting in sorted({d for d, _ in best}):
            Kd = defined(drafting)
            opt = [float(optimum(inst, K, drafting)) for K in Kd]
            gaps = [o - best[(drafting, K)] for K, o in zip(Kd, opt)]
            ok = [checks(f"{label} ({drafting}, K = {K}) >= every verifier", g >= -tol)
                  for K, g in zip(Kd, gaps)]
            ok.append(checks(f"{label} ({drafting}, K = 1) attained",
                             abs(opt[0] - best1) <= tol))
            lines.append(f"  {label:16s} {drafting:8s} " + " ".join(f"{o:9.6f}" for o in opt))
            lines.append(f"  {'gap of the best':16s} {drafting:8s} " + " ".join(
                f"{g:9.2e}" for g in gaps) + "   (optimum - best verifier above; relative: "
                + ", ".join(f"{g / o:.2%}" for g, o in zip(gaps, opt))
                + "; no verifier above the optimum, attained at K = 1: "
                + mark(all(ok)) + ")")
    tie = instance_from_dict({"vocab_size": 3, "block_length": 2, "target": ["1/4", "3/8", "3/8"],
                              "draft": ["1/2", "1/4", "1/4"]}, exact=True)
    rep = check_lossless(LOSSY_MULTI_PATH["gbv-mismatched-ties"], tie, paths=2)
    good = check_lossless(MULTI_PATH["gbv"], tie, paths=2)
    caught = checks("gbv-mismatched-ties caught as lossy", not rep.lossless)
    ok = checks("gbv lossless on the tie instance", good.lossless)
    lines += ["GBV whose selection and ranking break ties differently, p = (1/4, 3/8, 3/8), "
              "q = (1/2, 1/4, 1/4) (p/q ties between tokens 1 and 2), L = 2, K = 2, exact:",
              f"  gbv-mismatched-ties: {rep} (caught: {mark(caught, 'yes', 'NO')})",
              f"  gbv (one tie rule): {good} ({mark(ok)})"]
    return lines


# ----------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class Section:
    """One report section: ``function(args, checks)`` returns its text lines and records each
    comparison it prints in ``checks``."""

    key: str
    title: str
    function: Callable[..., list[str]]


SECTIONS: list[Section] = [
    Section("toy", "The paper's two-token example (Sun et al., block verification)", section_toy),
    Section("random", "Random Dirichlet instances: token vs block verification (float64)",
            section_random),
    Section("wrong-variant", "A known-wrong variant, caught by the losslessness checker",
            section_wrong_variant),
    Section("multipath", "Multi-path verification: GBV, SpecInfer, SpecTr, traversal vs "
            "first-path baselines", section_multipath),
    Section("stateful", "The state around the sampler: penalties, min_tokens, no-repeat "
            "n-grams, logit bias and a grammar mask, on each row's history", section_stateful),
]


def add_section(section: Section, before: str | None = None) -> None:
    """Add ``section`` to `SECTIONS`.

    Parameters
    ----------
    section : Section
        Replaces a section with the same key, so registering twice is harmless.
    before : str, optional
        Key of the section to insert before; at the end when None or not present.
    """
    SECTIONS[:] = [s for s in SECTIONS if s.key != section.key]
    keys = [s.key for s in SECTIONS]
    SECTIONS.insert(keys.index(before) if before in keys else len(SECTIONS), section)


#: Modules outside the core that add sections to the report (their ``contribute()``), loaded by
#: module name when the report runs, as the command line loads their sub-commands: the command
#: line imports only the module of the command it runs, so nothing else would load them.
CONTRIBUTORS = ("spectheory.lp.report",)


def load_contributions() -> None:
    """Call ``contribute()`` of every module of `CONTRIBUTORS` (idempotent)."""
    import importlib

    for name in CONTRIBUTORS:
        importlib.import_module(name).contribute()


def run_report(args) -> tuple[list[str], Checks]:
    """Every section's lines and the checks they made."""
    load_contributions()
    checks = Checks()
    out = ["spectheory report", "================="]
    for s in SECTIONS:
        print(f"[report] {s.title} ...", file=sys.stderr, flush=True)
        out += ["", s.title, "-" * len(s.title)] + s.function(args, checks)
    return out, checks


def cmd_report(args) -> int:
    t0 = time.time()
    out, checks = run_report(args)
    out += ["", f"(report took {time.time() - t0:.1f} s)", checks.verdict()]
    sys.stdout.write("\n".join(out) + "\n")
    return 1 if checks.failed else 0


def register(sub) -> None:
    from .commands import seed_type

    p = sub.add_parser("report", help="the main job: a short exact report on built-in defaults, "
                                      "ending in a verdict (exit 1 if any check fails)")
    p.add_argument("--seed", type=seed_type, default=0,
                   help="seed of the random instances (0..2^63-1; the random section uses it and the next four, wrapping past 2^63-1)")
    p.set_defaults(func=cmd_report)
