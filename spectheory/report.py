"""``spectheory report``: the main job on built-in defaults.

A short, reproducible report: the two-token example of the block verification paper in exact
rationals, a handful of random instances in float64 (token vs block verification, block
efficiency, losslessness), a multi-iteration losslessness check, and the known-wrong
"running product of uniforms" variant flagged by the checker. Other packages add sections by
appending ``(title, function)`` to :data:`SECTIONS`; each function takes the parsed arguments and
returns the section's text lines.
"""

from __future__ import annotations

import sys
import time

from .exact import analyze, check_lossless
from .instances import instance_from_dict
from .random_instances import random_instance
from .verifiers import SINGLE_PATH, block_verification, uniform_product_verification

TOY = {"vocab_size": 2, "block_length": 2, "target": ["1/3", "2/3"], "draft": ["2/3", "1/3"]}


def toy_instance(exact: bool = True):
    """The paper's two-token example: p = (1/3, 2/3), q = (2/3, 1/3), L = 2."""
    return instance_from_dict(TOY, exact=exact)


def section_toy(args) -> list[str]:
    inst = toy_instance()
    lines = ["p = (1/3, 2/3), q = (2/3, 1/3), L = 2, exact rationals:"]
    for name, v in SINGLE_PATH.items():
        r = analyze(inst, v, name)
        pmf = ", ".join(str(x) for x in r.tau_pmf)
        lines.append(f"  {name:6s} E[tau] = {r.expected_accepted} ({float(r.expected_accepted):.4f})"
                     f"  E[tau+1] = {r.block_efficiency}  tau pmf = ({pmf})"
                     f"  TV to target = {r.tv_to_target}")
    rep = check_lossless(block_verification, inst, n_tokens=6)
    lines.append(f"  block, 6 tokens over repeated iterations: {rep}")
    return lines


def section_random(args) -> list[str]:
    lines = [f"{'V':>3} {'L':>3} {'alpha':>6} {'seed':>5} {'E[tau+1] token':>15} "
             f"{'E[tau+1] block':>15} {'gain':>7} {'TV token':>9} {'TV block':>9}"]
    cases = [(4, 4, 0.5), (4, 4, 1.0), (4, 4, 2.0), (3, 6, 1.0), (8, 3, 1.0)]
    for k, (V, L, alpha) in enumerate(cases):
        seed = args.seed + k
        inst = random_instance(V, L, seed, alpha=alpha)
        tok = analyze(inst, SINGLE_PATH["token"], "token")
        blk = analyze(inst, SINGLE_PATH["block"], "block")
        gain = blk.block_efficiency / tok.block_efficiency - 1
        lines.append(f"{V:>3} {L:>3} {alpha:>6} {seed:>5} {tok.block_efficiency:>15.6f} "
                     f"{blk.block_efficiency:>15.6f} {gain:>+7.2%} {tok.tv_to_target:>9.1e} "
                     f"{blk.tv_to_target:>9.1e}")
    inst = random_instance(3, 3, args.seed, denominator=24)
    tok = analyze(inst, SINGLE_PATH["token"], "token")
    blk = analyze(inst, SINGLE_PATH["block"], "block")
    lines.append(f"exact rationals, V = 3, L = 3, rows in multiples of 1/24 (seed {args.seed}): "
                 f"E[tau] token = {tok.expected_accepted}, block = {blk.expected_accepted}; "
                 f"TV to target {tok.tv_to_target} and {blk.tv_to_target}")
    return lines


def section_wrong_variant(args) -> list[str]:
    inst = toy_instance(exact=False)
    rep = check_lossless(uniform_product_verification, inst)
    return ["'running product of uniforms' variant on the two-token example:", f"  {rep}"]


def section_lp(args) -> list[str]:
    """Optimality LPs (lp package): node-budget optimum = block verification's E[tau+1]."""
    from lp import coupling_bound, direct_lp, node_budget_lp

    inst = toy_instance()
    nb = node_budget_lp(inst, exact=True)
    blk = analyze(inst, block_verification, "block").block_efficiency
    lines = [f"two-token example, exact rationals: node-budget LP optimum {nb.optimum} "
             f"({nb.solver}: primal and dual verified exactly) = block E[tau+1] {blk}: "
             f"{'equal' if nb.optimum == blk else 'DIFFERENT'}",
             f"  direct LP over all valid verifiers, K = 1: {direct_lp(inst, 1, exact=True).optimum};"
             f" K = 2 i.i.d. paths: {direct_lp(inst, 2, exact=True).optimum};"
             f" full-knowledge coupling bound: {coupling_bound(inst, exact=True).optimum}"]
    inst = random_instance(4, 6, args.seed, alpha=0.7)
    nb = node_budget_lp(inst)
    blk = float(analyze(inst, block_verification, "block").block_efficiency)
    lines.append(f"random V = 4, L = 6 (seed {args.seed}), float64: node-budget LP "
                 f"{nb.optimum:.10f} ({nb.solver}, {nb.variables:,} variables, {nb.seconds:.2f} s)"
                 f" vs block {blk:.10f}: |difference| = {abs(nb.optimum - blk):.1e}")
    return lines


def section_multipath(args) -> list[str]:
    """Multi-path verifiers side by side (issue 4), with the direct-LP optimum and the lossy
    mismatched-tie GBV caught by the multi-path checker."""
    from .multipath import analyze_multipath, check_lossless_multipath
    from .verifiers import LOSSY_MULTI_PATH, MULTI_PATH

    inst = random_instance(3, 2, args.seed, alpha=0.7)
    Ks = (1, 2, 3)
    lines = [f"random V = 3, L = 2 (seed {args.seed}, alpha 0.7), exact float64 over all "
             f"V^(LK) joint drafts; E[tau+1] and the largest TV to the target:",
             f"  {'verifier':16s} {'drafting':8s} " + " ".join(f"{'K = ' + str(K):>9s}"
                                                        for K in Ks) + "   max TV"]
    best = {}
    for name, v in MULTI_PATH.items():
        drafting = "iid" if v.drafting == "any" else v.drafting
        res = [analyze_multipath(inst, v, K, drafting, name=name) for K in Ks]
        for K, r in zip(Ks, res):
            best[(drafting, K)] = max(best.get((drafting, K), 0.0), float(r.block_efficiency))
        lines.append(f"  {name:16s} {drafting:8s} " + " ".join(
            f"{float(r.block_efficiency):9.6f}" for r in res)
            + f"   {max(float(r.tv_to_target) for r in res):.1e}")
    try:
        from lp import direct_lp
    except ImportError:  # pragma: no cover - the lp package ships with the repository
        direct_lp = None
    if direct_lp is not None:
        for drafting in ("iid", "norep"):
            opt = [float(direct_lp(inst, K, drafting=drafting).optimum) for K in Ks]
            lines.append(f"  {'LP optimum':16s} {drafting:8s} "
                         + " ".join(f"{o:9.6f}" for o in opt))
            lines.append(f"  {'gap of the best':16s} {drafting:8s} " + " ".join(
                f"{o - best[(drafting, K)]:9.2e}" for K, o in zip(Ks, opt))
                + "   (optimum - best verifier above; relative: " + ", ".join(
                f"{(o - best[(drafting, K)]) / o:.2%}" for K, o in zip(Ks, opt)) + ")")
    tie = instance_from_dict({"vocab_size": 3, "block_length": 2, "target": ["1/4", "3/8", "3/8"],
                              "draft": ["1/2", "1/4", "1/4"]}, exact=True)
    rep = check_lossless_multipath(LOSSY_MULTI_PATH["gbv-mismatched-ties"], tie, 2)
    ok = check_lossless_multipath(MULTI_PATH["gbv"], tie, 2)
    lines += ["GBV whose selection and ranking break ties differently, p = (1/4, 3/8, 3/8), "
              "q = (1/2, 1/4, 1/4) (p/q ties between tokens 1 and 2), L = 2, K = 2, exact:",
              f"  gbv-mismatched-ties: {rep}", f"  gbv (one tie rule): {ok}"]
    return lines


SECTIONS = [
    ("The paper's two-token example (Sun et al., block verification)", section_toy),
    ("Random Dirichlet instances: token vs block verification (float64)", section_random),
    ("A known-wrong variant, caught by the losslessness checker", section_wrong_variant),
    ("Optimality LPs: block verification attains the node-budget LP optimum", section_lp),
    ("Multi-path verification: GBV, SpecInfer, SpecTr, traversal vs first-path baselines",
     section_multipath),
]


def cmd_report(args) -> int:
    t0 = time.time()
    out = ["spectheory report", "================="]
    for title, fn in SECTIONS:
        print(f"[report] {title} ...", file=sys.stderr, flush=True)
        out += ["", title, "-" * len(title)] + fn(args)
    out += ["", f"(report took {time.time() - t0:.1f} s)"]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def register(sub) -> None:
    from .commands import seed_type

    p = sub.add_parser("report", help="the main job: a short exact report on built-in defaults")
    p.add_argument("--seed", type=seed_type, default=0,
                   help="seed of the random instances (0..2^63-1)")
    p.set_defaults(func=cmd_report)
