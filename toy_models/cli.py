"""``spectheory toy FAMILY [NAME=VALUE ...]``: a toy instance as JSON on stdout (``--list``: the
families and their divergence knobs). The JSON is the instance format of
:mod:`spectheory.instances`, so it feeds ``spectheory exact`` / ``spectheory check``."""

from __future__ import annotations

import json
import sys

from spectheory.errors import InstanceError
from spectheory.instances import instance_to_dict

from .families import FAMILIES, make_instance


def parse_value(text: str):
    """``3`` -> int, ``0.5`` -> float, ``true``/``false`` -> bool, anything else stays a string
    (families read fraction strings such as ``1/3`` themselves)."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_params(items: list[str]) -> dict:
    params = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InstanceError(f"parameter {item!r} is not NAME=VALUE")
        params[name.strip().replace("-", "_")] = parse_value(value)
    return params


def listing() -> str:
    rows = [f"{'family':<12} {'knob':<12} {'range':<10} {'more divergent':<28} description"]
    for f in FAMILIES.values():
        rows.append(f"{f.name:<12} {f.knob:<12} {f.knob_range:<10} {f.more_divergent:<28} "
                    f"{f.description}")
    return "\n".join(rows)


def cmd_toy(args) -> int:
    if args.list or not args.family:
        sys.stdout.write(listing() + "\n")
        return 0
    inst = make_instance(args.family, **parse_params(args.params))
    sys.stdout.write(json.dumps(instance_to_dict(inst)) + "\n")
    return 0


def register(sub) -> None:
    p = sub.add_parser("toy", help="a toy-family instance as JSON (--list: families and knobs)")
    p.add_argument("family", nargs="?", help=f"one of: {', '.join(FAMILIES)}")
    p.add_argument("params", nargs="*", metavar="NAME=VALUE",
                   help="family parameters, e.g. vocab_size=4 block_length=3 seed=1 sigma=0.5")
    p.add_argument("--list", action="store_true", help="list the families and their knobs")
    p.set_defaults(func=cmd_toy)
