"""``spectheory toy FAMILY [NAME=VALUE ...]``: a toy instance as JSON on stdout (``--list``: the
families and their divergence knobs). The JSON is the instance format of
[`spectheory.inputs.instances`][spectheory.inputs.instances], so it feeds ``spectheory exact`` /
``spectheory check``."""

from __future__ import annotations

import json
import re
import sys

from spectheory.runtime.errors import InstanceError
from spectheory.inputs.instances import instance_to_dict

from .families import FAMILIES, make_instance


def parse_value(text: str):
    """``3`` -> int, ``0.5`` -> float, ``true``/``false`` -> bool, anything else stays a string
    (families read fraction strings such as ``1/3`` themselves). Numbers in ASCII digits only,
    as every option of the command line: Python's ``int`` and ``float`` also read other
    scripts' digits (``١``) and ``1_0``, which stay strings here and are refused by the family
    as not numbers."""
    from spectheory.runtime.errors import OptionError
    from spectheory.runtime.limits import parse_float

    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if re.fullmatch(r"[+-]?[0-9]+", text.strip()):
        return int(text)
    try:
        return parse_float(text.strip())
    except OptionError:
        return text


def parse_params(items: list[str]) -> dict:
    """NAME=VALUE items as keyword arguments; a name given twice is refused (it would silently
    keep the last value)."""
    params = {}
    for item in items:
        name, sep, value = item.partition("=")
        key = name.strip().replace("-", "_")
        if not sep or not key:
            raise InstanceError(f"parameter {item!r} is not NAME=VALUE")
        if not key.isidentifier():
            raise InstanceError(f"parameter name {name!r} is not a valid name")
        if key in params:
            raise InstanceError(f"parameter {key!r} is given twice")
        params[key] = parse_value(value)
    return params


def checked_instance(family: str, params: dict):
    """The family's instance, checked as the instance parser would read it back (sizes in
    range, finite rows that sum to 1), so ``toy`` never prints an instance that ``exact`` refuses.
    Numerical warnings of extreme parameters are not shown: the check reports the problem."""
    import warnings

    import numpy as np

    from spectheory.inputs.instances import instance_from_dict

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        inst = make_instance(family, **params)
    try:
        data = instance_to_dict(inst)
        instance_from_dict(data, exact=inst.exact)
    except InstanceError as exc:
        raise InstanceError(f"toy family {family!r} with these parameters gives an invalid "
                            f"instance: {exc}") from None
    return data


def listing() -> str:
    rows = [f"{'family':<12} {'knob':<12} {'range':<10} {'more divergent':<28} description"]
    for f in FAMILIES.values():
        rows.append(f"{f.name:<12} {f.knob:<12} {f.knob_range:<10} {f.more_divergent:<28} "
                    f"{f.description}")
    return "\n".join(rows)


def family_listing(family: str) -> str:
    """One family's parameters with their defaults (``toy --list FAMILY``)."""
    import inspect

    if family not in FAMILIES:
        raise InstanceError(f"unknown toy family {family!r}; choose from {', '.join(FAMILIES)}")
    f = FAMILIES[family]
    rows = [f"{f.name}: {f.description}", f"knob {f.knob} in {f.knob_range} ({f.more_divergent} "
            "is more divergent)", f"{'parameter':<20} default"]
    for name, par in inspect.signature(f.make).parameters.items():
        rows.append(f"{name:<20} {par.default}")
    return "\n".join(rows)


def cmd_toy(args) -> int:
    if args.list and args.params:
        raise InstanceError("toy --list takes at most a family name, not NAME=VALUE parameters")
    if args.list and args.family is not None:
        sys.stdout.write(family_listing(args.family) + "\n")
        return 0
    if args.list or args.family is None:  # an empty name is a family name, and no family's
        sys.stdout.write(listing() + "\n")
        return 0
    data = checked_instance(args.family, parse_params(args.params))
    sys.stdout.write(json.dumps(data) + "\n")
    return 0


def register(sub) -> None:
    p = sub.add_parser("toy", help="a toy-family instance as JSON (--list: families and knobs)")
    p.add_argument("family", nargs="?", help=f"one of: {', '.join(FAMILIES)}")
    p.add_argument("params", nargs="*", metavar="NAME=VALUE",
                   help="family parameters, e.g. vocab_size=4 block_length=3 seed=1 sigma=0.5")
    p.add_argument("--list", action="store_true", help="list the families and their knobs; with a family: its "
                   "parameters and their defaults")
    p.set_defaults(func=cmd_toy)
