"""The spectheory hetero command: exact law of a heterogeneous-vocabulary scheme.

    spectheory hetero INSTANCE --scheme slem|slrs|tli|vllm-tli [--exact] [--json] [--tol T]
                      [--n-tokens N]

reads a heterogeneous instance ([`spectheory.inputs.tokenizers`][spectheory.inputs.tokenizers]:
two longest-match tokenizers over one alphabet, a target and a draft model over their own token
ids) and prints the lossless verdict of the scheme over ``n_tokens`` target tokens (naming the
first offending string when it is lossy) and the target tokens and characters one target forward
emits ([`check_hetero_lossless`][spectheory.verifiers.hetero.check_hetero_lossless]). Exit code
0 when the scheme is lossless on the instance, 1 when it is lossy (as ``spectheory check``), 2 on
bad input (one line on stderr).
"""

from __future__ import annotations

from fractions import Fraction

from ..inputs.instances import DEFAULT_TOL
from ..runtime.errors import OptionError
from .commands import emit, row_tol, row_tolerance


def _num(x):
    return str(x) if isinstance(x, Fraction) else float(x)


def cmd_hetero(args) -> int:
    """Run ``spectheory hetero`` (module doc); returns the exit code."""
    from ..inputs.tokenizers import MAX_N_TOKENS, check_hetero_sizes, load_hetero
    from ..verifiers.hetero import check_hetero_lossless

    inst = load_hetero(args.instance, exact=args.exact, tol=row_tol(args))
    n = args.n_tokens
    if n is not None:
        if not 1 <= n <= MAX_N_TOKENS:
            raise OptionError(f"--n-tokens {n} is out of range (1..{MAX_N_TOKENS})")
        check_hetero_sizes(inst.target_tokenizer.size, inst.draft_tokenizer.size,
                           inst.draft_length, n)
    rep = check_hetero_lossless(inst, args.scheme, exact=args.exact, n_tokens=n)
    obj = {"scheme": rep.scheme, "lossless": rep.lossless, "exact": rep.exact,
           "n_tokens": rep.n_tokens, "tv": _num(rep.tv),
           "tokens_per_forward": _num(rep.tokens_per_forward),
           "chars_per_forward": _num(rep.chars_per_forward), "forwards": _num(rep.forwards)}
    if not rep.lossless:
        obj.update(offending=list(rep.offending), offending_string=rep.offending_string,
                   output_probability=_num(rep.output_probability),
                   target_probability=_num(rep.target_probability))
    emit(obj, args.json, str(rep))
    return 0 if rep.lossless else 1


def register(sub) -> None:
    """Add the ``hetero`` sub-command to an argparse sub-parser collection."""
    p = sub.add_parser("hetero", help="exact law of SLEM, SLRS or TLI (draft and target with "
                       "different tokenizers)", description=__doc__.split("\n\n")[0])
    p.add_argument("instance", help="heterogeneous instance JSON file ('-' for standard input)")
    p.add_argument("--scheme", required=True, choices=["slem", "slrs", "tli", "vllm-tli"],
                   help="the scheme (vllm-tli: vLLM #38174's rule)")
    p.add_argument("--exact", action="store_true",
                   help="exact rational arithmetic (rows must sum to exactly 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(json_result=True)  # the result through result_stream (json_stdout)
    p.add_argument("--tol", type=row_tolerance, default=None,
                   help=f"row-sum tolerance in float mode (default {DEFAULT_TOL:g}; not with "
                        "--exact)")
    p.add_argument("--n-tokens", type=int, default=None,
                   help="compare laws over this many target tokens (default: the instance's)")
    p.set_defaults(func=cmd_hetero)


__all__ = ["cmd_hetero", "register"]
