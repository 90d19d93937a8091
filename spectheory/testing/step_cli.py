"""``spectheory check-step MODULE:FUNCTION``: check a whole draft-and-verify step.

Runs [`check_step`][spectheory.testing.checks.step.check_step] on the step ``MODULE:FUNCTION``
(``step(request) -> emitted [B, L+1]``, see `spectheory.testing.checks.step`). Exit codes: 0 the
step passes, 1 it fails, 2 bad input (an unimportable step, a step that raises, a bad option or
instance), always as one line without a traceback.
"""

from __future__ import annotations

import json
import sys

from ..runtime.errors import OptionError, SpectheoryError, import_user, result_stream
from ..runtime.limits import shown as _repr_cut


def _int(text: str, name: str, lo: int, hi: int) -> int:
    from ..runtime.limits import ascii_int, parse_count

    if name == "--samples":
        value = parse_count(text, name, lo, hi)
    else:
        value = ascii_int(text)
        if value is None:
            raise OptionError(f"{name} = {_repr_cut(text, 40)} is not an integer (accepted: "
                              f"{lo:,}..{hi:,})")
    if not lo <= value <= hi:
        raise OptionError(f"{name} = {value} is out of range {lo}..{hi:,}")
    return value


def run_check_step(args) -> int:
    from ..inputs.instances import load_instance
    from ..inputs.random_instances import MAX_SEED
    from .checks.step import MAX_SAMPLES, MAX_STEPS, check_step

    samples = _int(args.samples, "--samples", 1, MAX_SAMPLES)
    steps = _int(args.steps, "--steps", 1, MAX_STEPS)
    seed = _int(args.seed, "--seed", 0, MAX_SEED)
    from ..runtime.limits import parse_float

    # ASCII digits, as check-sampler reads it (float() read '٠.٠١' and '0.0_1' as 0.01)
    alpha = parse_float(args.alpha, "--alpha =")
    if not 0 < alpha < 1:
        raise OptionError(f"--alpha = {args.alpha} must lie strictly between 0 and 1")
    instances = [load_instance(f) for f in args.instance] if args.instance else None
    step = import_user(args.step, "step")
    if not callable(step):
        raise SpectheoryError(f"step {args.step!r} is {type(step).__name__}, not a function")
    report = check_step(step, instances, samples=samples, alpha=alpha, seed=seed, steps=steps,
                        sampling=args.sampling, draft_sampling=args.draft_sampling,
                        inputs=args.inputs)
    if args.json:
        result_stream().write(json.dumps({"step_function": args.step, **report.to_json()}) + "\n")
    else:
        sys.stdout.write(str(report) + "\n")
    return 0 if report.passed else 1


def register(sub) -> None:
    p = sub.add_parser(
        "check-step",
        help="check a whole draft-and-verify step (module:function) against the target law "
             "(exit 1 when it fails)",
        description="Check a step step(request) -> emitted [B, L+1] (-1 padded) that drafts L "
                    "tokens from the kit's draft model with its own randomness, verifies them "
                    "against the kit's target model and returns what it emits: the emitted "
                    "sequences against the target law processed by --sampling, enumerated "
                    "exactly. Exit 0 pass, 1 fail, 2 bad input.")
    p.add_argument("step", metavar="MODULE:FUNCTION", help="the step to check")
    p.add_argument("--instance", action="append", default=None, metavar="FILE",
                   help="instance JSON file (repeatable; default: the kit's prefix-dependent "
                        "step instances)")
    p.add_argument("--samples", default="20000", metavar="N",
                   help="sequences generated (default 20000)")
    p.add_argument("--steps", default="1", metavar="S",
                   help="1: one step, its block completed by the target to L+1 tokens "
                        "(default); S > 1: S consecutive steps, the first S + L tokens")
    p.add_argument("--alpha", default="0.001", metavar="A",
                   help="family-wise false-alarm rate in (0, 1) (default 0.001)")
    p.add_argument("--seed", default="0", metavar="S", help="seed of the step's generator (default 0)")
    from ..inputs.processing import add_sampling_options

    add_sampling_options(p)
    p.add_argument("--inputs", choices=("probs", "logits"), default=None,
                   help="the models return probabilities or float32 logits (default: logits "
                        "when --sampling has a penalty or an added bias, else probabilities)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(json_result=True)  # the result through result_stream (json_stdout)
    from ..cli.commands import add_time_limit_option

    add_time_limit_option(p)  # also stops a step call that never returns
    p.set_defaults(func=run_check_step)
