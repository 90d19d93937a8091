"""``spectheory check-sampler MODULE:FUNCTION``: check a sampler against the exact law.

Exit codes: 0 the sampler passes, 1 it fails, 2 bad input (an unimportable sampler, a sampler
that raises or exits on the kit's inputs, non-positive samples, alpha outside (0, 1), an option
that does nothing in the chosen mode, ...), always as one line without a traceback. Too few
samples for any degree of freedom to be tested is bad input too (exit 2, not 1): such a run says
nothing about the sampler, and the line says how many samples a test needs. Under ``--budget`` a
watchdog stops a sampler call that never returns (one line naming the sampler, exit 2).
"""

from __future__ import annotations

import json
import sys

from ..runtime.errors import (OptionError, SpectheoryError, TooFewSamplesError, import_user,
                              result_stream)
from ..runtime.limits import ascii_int
from ..runtime.limits import shown as _repr_cut


def _import(text: str, what: str):
    """The user's function ``module:function`` ([`import_user`][spectheory.runtime.errors.import_user], the
    loader behind every ``module:function`` of the command line)."""
    obj = import_user(text, what)
    if not callable(obj):
        raise SpectheoryError(f"{what} {text!r} is {type(obj).__name__}, not a function")
    return obj


def parse_samples(text) -> int:
    """``--samples``: a whole number (``100000``, ``1e5``), at least 1, refused in one line before
    anything is allocated when even the check's own least cost a sample
    (`spectheory.testing.checks.sampler.MIN_SECONDS_PER_SAMPLE`) would take it past the longest run
    a check plans (`spectheory.testing.checks.sampler.MAX_SECONDS`, one day). Memory does not grow
    with the count: samples are counted call by call (`check_sampler` guards its plan's memory)."""
    from ..runtime.limits import parse_count
    from .checks.sampler import MAX_SECONDS, _refuse_time

    samples = parse_count(text, "--samples")
    _refuse_time(samples, MAX_SECONDS, f"--samples {samples:,}",
                 "use fewer samples, or --budget SECONDS to size the run")
    return samples


def _int(text: str, name: str) -> int:
    value = ascii_int(text)
    if value is None:
        raise SpectheoryError(f"{name} = {_repr_cut(text, 40)} is not an integer in ASCII digits")
    return value


def _float(text: str, name: str) -> float:
    from ..runtime.limits import parse_float

    return parse_float(text, f"{name} =")


def run_check_sampler(args) -> int:
    if getattr(args, "tree", None) is not None or getattr(args, "parents", None) is not None:
        return run_check_tree_sampler(args)  # the tree mode (block below)
    for flag, value in (("--tree-drafting", getattr(args, "tree_drafting", None)),
                        ("--tree-layout", getattr(args, "tree_layout", None))):
        if value is not None:  # else silently a chain check
            raise OptionError(f"{flag} applies to the tree mode: give --tree or --parents")
    from ..cli.commands import MAX_PATHS
    from ..inputs.instances import load_instance
    from ..inputs.random_instances import MAX_SEED
    from ..registry import get_verifier
    from .checks.sampler import check_sampler

    budget = None
    if args.budget is not None or args.samples == "auto":  # size the run by a time budget
        from .statistics.budget import check_budget

        if args.samples not in (None, "auto"):
            raise OptionError("--samples N and --budget SECONDS both size the run: give one")
        if args.budget is None:
            raise OptionError("--samples auto needs --budget SECONDS")
        budget, samples = check_budget(_float(args.budget, "--budget"), "--budget"), "auto"
    else:
        samples = parse_samples("100000" if args.samples is None else args.samples)
    alpha = _float(args.alpha, "--alpha")
    if not 0 < alpha < 1:
        raise SpectheoryError(f"--alpha = {args.alpha} must lie strictly between 0 and 1")
    seed = _int(args.seed, "--seed")
    if not 0 <= seed <= MAX_SEED:
        raise OptionError(f"--seed = {seed} is out of range 0..2^63-1")
    paths = None if args.paths is None else _int(args.paths, "--paths")
    if paths is not None and not 1 <= paths <= MAX_PATHS:
        raise OptionError(f"--paths = {paths} is out of range 1..{MAX_PATHS}")
    verifier = "block" if args.verifier is None else args.verifier
    if args.convention is not None and args.mode not in ("coins", "coins-tau"):
        raise OptionError(f"--convention {args.convention} applies to --mode coins and "
                          f"coins-tau only; --mode {args.mode} checks the law of --verifier and "
                          f"would ignore it")
    if args.mode not in ("coins", "coins-tau"):
        get_verifier(verifier, multi_path=(paths or 1) > 1)  # a bad name fails before importing
    instances = [load_instance(f) for f in args.instance] if args.instance else None
    sampler = _import(args.sampler, "sampler")
    try:
        report = check_sampler(sampler, verifier, instances, samples=samples, alpha=alpha,
                               mode=args.mode, seed=seed, paths=paths,
                               convention=args.convention, sampling=args.sampling,
                               draft_sampling=args.draft_sampling, inputs=args.inputs,
                               budget_s=budget)
    except TooFewSamplesError as exc:  # nothing was tested: a bad --samples (or --budget)
        what = '--budget ' + args.budget if budget else '--samples ' + str(samples)
        raise OptionError(f"{what}: {str(exc).partition(': ')[2]}") from None
    except SpectheoryError:
        raise
    except Exception as exc:  # the sampler's own calls are guarded (a UserCodeError above):
        # what reaches here was raised outside them, so it is not blamed on the sampler
        raise SpectheoryError(f"check-sampler stopped on {type(exc).__name__} outside the "
                              f"sampler's calls: {' '.join(str(exc).split())[:200]} (--debug "
                              f"shows where)") from exc
    if args.json:
        result_stream().write(json.dumps({"sampler": args.sampler, **report.to_json()}) + "\n")
    else:
        sys.stdout.write(str(report) + "\n")
    return 0 if report.passed else 1


# ----------------------------------------------------------------------------- tree mode
# ``check-sampler MODULE:FN --tree SHAPE``: spectheory.testing.checks.tree.check_tree_sampler.


def _tree_option(args):
    """The tree of ``--tree`` (branching factors ``3,2,1`` or a choices list ``[[0],[1],[0,0]]``)
    or ``--parents 0,0,1``, exactly one of them."""
    from ..engine.drafttrees import choices_text, tree_shape

    if args.tree is not None and args.parents is not None:
        raise OptionError("give the tree once: --tree SHAPE or --parents LIST, not both")
    if args.parents is not None:
        return tree_shape({"parents": args.parents})
    text = args.tree.strip()
    if text.startswith("["):
        return tree_shape({"choices": choices_text(text, "--tree")})
    return tree_shape(text)


def run_check_tree_sampler(args) -> int:
    """The tree mode of ``check-sampler`` (``--tree`` / ``--parents``)."""
    from ..inputs.instances import load_instance
    from ..inputs.random_instances import MAX_SEED
    from .checks.tree import TREE_MODES, check_tree_sampler
    from .checks.tree_ports import tree_engine_sampler

    if args.mode not in TREE_MODES:
        raise OptionError(f"--tree checks modes {', '.join(TREE_MODES)}, not --mode {args.mode}")
    for flag, value in (("--paths", args.paths), ("--convention", args.convention),
                        ("--budget", args.budget), ("--sampling", args.sampling),
                        ("--draft-sampling", getattr(args, "draft_sampling", None))):
        if value is not None:
            raise OptionError(f"{flag} does not apply to the tree mode (--tree)")
    if args.inputs != "probs":
        raise OptionError("--inputs logits does not apply to the tree mode (--tree)")
    shape = _tree_option(args)
    samples = parse_samples("20000" if args.samples is None else args.samples)
    alpha = _float(args.alpha, "--alpha")
    if not 0 < alpha < 1:
        raise OptionError(f"--alpha = {args.alpha} must lie strictly between 0 and 1")
    seed = _int(args.seed, "--seed")
    if not 0 <= seed <= MAX_SEED:
        raise OptionError(f"--seed = {seed} is out of range 0..2^63-1")
    verifier = args.verifier  # None: the tree check's default rule (block has no node rule)
    instances = [load_instance(f) for f in args.instance] if args.instance else None
    sampler = _import(args.sampler, "sampler")
    if args.tree_layout is not None:
        sampler = tree_engine_sampler(sampler, args.tree_layout)
    report = check_tree_sampler(sampler, verifier, shape, drafting=args.tree_drafting,
                                instances=instances, samples=samples, alpha=alpha,
                                mode=args.mode, seed=seed)
    if args.json:
        result_stream().write(json.dumps({"sampler": args.sampler, **report.to_json()}) + "\n")
    else:
        sys.stdout.write(str(report) + "\n")
    return 0 if report.passed else 1


def _add_tree_options(p) -> None:
    p.add_argument("--tree", default=None, metavar="SHAPE",
                   help="check a tree sampler tree_sampler(tokens [B, N], parents, q [B, N+1, V], "
                        "p [B, N+1, V], generator) -> (node [B], token [B]) on this tree: "
                        "branching factors (3,2,1) or a JSON choices list ([[0],[1],[0,0]])")
    p.add_argument("--parents", default=None, metavar="LIST",
                   help="the tree as a parent list (0,1,0: the parent of drafted node 1, 2, ...)")
    p.add_argument("--tree-drafting", choices=("topk", "iid", "norep"), default=None,
                   help="how the kit drafts the trees (default: the verifier's declared scheme)")
    p.add_argument("--tree-layout", choices=("sglang-tree", "eagle-posterior"), default=None,
                   help="MODULE:FUNCTION is an engine function in this layout "
                        "(spectheory.testing.checks.tree_ports), not a canonical tree sampler")


# ----------------------------------------------------------------------------- parser


def register(sub) -> None:
    p = sub.add_parser(
        "check-sampler",
        help="check a sampler (module:function) against the exact law (exit 1 when it fails)",
        description="Check a rejection sampler with the canonical signature sampler(drafts [B, L], "
                    "q [B, L, V], p [B, L+1, V], generator) -> (accepted [B], token [B]) (K-path "
                    "form with --paths K; coin-driven form sampler(drafts, q, p, "
                    "uniforms [B, L+1]) "
                    "with --mode coins) against the exact law of --verifier, block verification "
                    "by default (a token-level sampler needs --verifier token). Exit 0 pass, "
                    "1 fail, 2 bad input.")
    p.add_argument("sampler", metavar="MODULE:FUNCTION", help="the sampler to check")
    p.add_argument("--verifier", default=None,
                   help="the law it claims: a registered name or module:function (default "
                        "block; token for a token-level sampler; with --tree, the tree "
                        "check's default rule)")
    p.add_argument("--mode", choices=("law", "lossless", "coins", "coins-tau"), default="law",
                   help="law: (tau, Y) per fixed draft against the verifier's exact law; "
                        "lossless: output plus target completion against the target law; coins: "
                        "decisions against the reference on the same uniforms; coins-tau: the "
                        "accepted count alone against the reference (the engine may draw its "
                        "correction token with its own randomness)")
    p.add_argument("--convention", choices=("token", "block"), default=None,
                   help="coins modes: the coin convention (default the verifier's name)")
    p.add_argument("--samples", default=None, metavar="N",
                   help="sampler outputs drawn (default 100000, 20000 in tree mode "
                        "(--tree/--parents); auto: sized by --budget)")
    p.add_argument("--budget", default=None, metavar="SECONDS",
                   help="size the run to take about SECONDS in all (implies --samples auto): "
                        "pilot checks measure the sampler's cost, and one line on stderr states "
                        "the sample count and the bias it detects before the run")
    p.add_argument("--alpha", default="0.001", metavar="A",
                   help="family-wise false-alarm rate in (0, 1) (default 0.001)")
    p.add_argument("--seed", default="0", metavar="S", help="seed of drafts and generator (default 0)")
    p.add_argument("--paths", default=None, metavar="K", help="K for a K-path sampler")
    p.add_argument("--instance", action="append", default=None, metavar="FILE",
                   help="instance JSON file to check on (repeatable; default: the kit's "
                        "prefix-dependent instances)")
    from ..inputs.processing import add_sampling_options

    add_sampling_options(p)  # the sampler is handed raw target rows and processes them itself
    p.add_argument("--inputs", choices=("probs", "logits"), default="probs",
                   help="hand the target rows as probabilities (default) or as float32 logits")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(json_result=True)  # the result through result_stream (json_stdout)
    from ..cli.commands import add_time_limit_option

    add_time_limit_option(p)  # also stops a sampler call that never returns
    _add_tree_options(p)
    p.set_defaults(func=run_check_sampler)
