"""A table of bad inputs to every core command: each is refused cleanly.

Every case runs ``spectheory ARGS`` in-process and must end with exit code 2, exactly one line
on stderr (no traceback), nothing on stdout and no new file in the working directory; most cases
also name the problem (a word the one line must contain). The classes: instance files (not
JSON, not UTF-8, wrong types, sizes, non-canonical / duplicate / missing / extra prefix keys,
entries that are not probabilities, rows that do not sum to 1), options out of range, unknown
names, environment variables, size and time limits, and the LP time guard.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cli_helpers import TOY, run
from spectheory.inputs.instances import instance_to_dict
from spectheory.inputs.random_instances import random_instance

V2L2 = {"vocab_size": 2, "block_length": 2}
ROW = [0.5, 0.5]


def table(target=None, draft=None, **top):
    """A prefix-dependent V = 2, L = 2 instance (rows differ by prefix) with overrides."""
    tgt = {"": [0.25, 0.75], "0": [0.5, 0.5], "1": [0.9, 0.1],
           "0,0": [0.3, 0.7], "0,1": [0.6, 0.4], "1,0": [0.2, 0.8], "1,1": [1.0, 0.0]}
    drf = {"": [0.6, 0.4], "0": [0.1, 0.9], "1": [0.5, 0.5]}
    tgt.update(target or {})
    drf.update(draft or {})
    return {**V2L2, "target": tgt, "draft": drf, **top}


def without(d, *keys):
    return {k: v for k, v in d.items() if k not in keys}


def dumps(obj) -> str:
    return json.dumps(obj)


CASES = []


def case(cid, *args, files=None, env=None, stdin=None, expect=None):
    CASES.append(pytest.param(list(args), files or {}, env or {}, stdin, expect, id=cid))


# ----------------------------------------------------------------------------- instance files
BAD_INSTANCES = [
    # (id, file content (str or bytes), a word the error names)
    ("empty-file", "", "empty"),
    ("blank-file", "  \n ", "empty"),
    ("truncated-json", '{"vocab_size": 2', "JSON"),
    ("trailing-garbage", dumps(TOY) + " x", "JSON"),
    ("single-quotes", "{'vocab_size': 2}", "JSON"),
    ("not-utf8", b'{"vocab_size": 2, "block_length": 2, "target": ["1/3", "2/3"], '
                 b'"draft": ["2/3", "1/3"], "note": "\xff"}', "UTF-8"),
    ("latin1-byte-first", b"\xe9{}", "UTF-8"),
    ("utf16-file", dumps(TOY).encode("utf-16"), "UTF-8"),
    ("deep-nesting", "[" * 100_000 + "]" * 100_000, "JSON"),
    ("huge-int-literal", '{"vocab_size": ' + "9" * 5000 + "}", "JSON"),
    ("top-level-list", "[]", "JSON object"),
    ("top-level-number", "1", "JSON object"),
    ("top-level-string", '"x"', "JSON object"),
    ("top-level-null", "null", "JSON object"),
    ("missing-vocab", dumps(without(TOY, "vocab_size")), "vocab_size"),
    ("missing-block", dumps(without(TOY, "block_length")), "block_length"),
    ("missing-target", dumps(without(TOY, "target")), "target"),
    ("missing-draft", dumps(without(TOY, "draft")), "draft"),
    ("vocab-1", dumps({**TOY, "vocab_size": 1}), "vocab_size"),
    ("vocab-0", dumps({**TOY, "vocab_size": 0}), "vocab_size"),
    ("vocab-negative", dumps({**TOY, "vocab_size": -2}), "vocab_size"),
    ("vocab-float", dumps({**TOY, "vocab_size": 2.0}), "vocab_size"),
    ("vocab-string", dumps({**TOY, "vocab_size": "2"}), "vocab_size"),
    ("vocab-bool", dumps({**TOY, "vocab_size": True}), "vocab_size"),
    ("vocab-null", dumps({**TOY, "vocab_size": None}), "vocab_size"),
    ("vocab-huge", dumps({**TOY, "vocab_size": 10**7}), "vocab_size"),
    ("block-0", dumps({**TOY, "block_length": 0}), "block_length"),
    ("block-65", dumps({**TOY, "block_length": 65}), "block_length"),
    ("block-float", dumps({**TOY, "block_length": 2.5}), "block_length"),
    ("block-bool", dumps({**TOY, "block_length": False}), "block_length"),
    ("target-number", dumps({**TOY, "target": 1}), "target"),
    ("target-string", dumps({**TOY, "target": "1/3,2/3"}), "target"),
    ("target-null", dumps({**TOY, "target": None}), "target"),
    ("draft-bool", dumps({**TOY, "draft": True}), "draft"),
    ("row-too-short", dumps({**TOY, "target": [1.0]}), "entries"),
    ("row-too-long", dumps({**TOY, "target": [0.5, 0.25, 0.25]}), "entries"),
    ("row-empty", dumps({**TOY, "draft": []}), "entries"),
    ("entry-bool", dumps({**TOY, "target": [True, False]}), "not a number"),
    ("entry-null", dumps({**TOY, "target": [None, 1]}), "not a number"),
    ("entry-list", dumps({**TOY, "target": [[0.5], 0.5]}), "not a number"),
    ("entry-object", dumps({**TOY, "target": [{}, 1]}), "not a number"),
    ("entry-text", dumps({**TOY, "target": ["abc", "1"]}), "not a number"),
    ("entry-div-zero", dumps({**TOY, "target": ["1/0", "1"]}), "not a number"),
    ("entry-nan-string", dumps({**TOY, "target": ["nan", "1"]}), "not finite"),
    ("entry-inf-string", dumps({**TOY, "target": ["inf", "0"]}), "not finite"),
    ("entry-NaN-constant", '{"vocab_size": 2, "block_length": 2, "target": [NaN, 1], '
                           '"draft": [0.5, 0.5]}', "not finite"),
    ("entry-Infinity", '{"vocab_size": 2, "block_length": 2, "target": [Infinity, 0], '
                       '"draft": [0.5, 0.5]}', "not finite"),
    ("entry-minus-Infinity", '{"vocab_size": 2, "block_length": 2, "target": [-Infinity, 1], '
                             '"draft": [0.5, 0.5]}', "not finite"),
    ("entry-overflow-float", '{"vocab_size": 2, "block_length": 2, "target": [1e999, 0], '
                             '"draft": [0.5, 0.5]}', "not finite"),
    ("entry-huge-int", '{"vocab_size": 2, "block_length": 2, "target": [' + "9" * 400
                       + ', 0], "draft": [0.5, 0.5]}', "over 1"),
    ("entry-negative", dumps({**TOY, "draft": [1.5, -0.5]}), "negative"),
    ("entry-over-one", dumps({**TOY, "draft": [1.25, "-1/4"]}), "negative"),
    ("entry-long-string", dumps({**TOY, "draft": ["1" * 500, "0"]}), "200 characters"),
    ("row-sum-low", dumps({**TOY, "draft": [0.5, 0.4]}), "sums to"),
    ("row-sum-high", dumps({**TOY, "draft": [0.5, 0.6]}), "sums to"),
    ("row-all-zero", dumps(table(target={"0,1": [0, 0]})), "sums to"),
    ("key-leading-zero", dumps(table(target={"00": [0.5, 0.5]})), "canonical"),
    ("key-leading-zero-deep", dumps(table(target={"0,01": [0.5, 0.5]})), "canonical"),
    ("key-space-before", dumps(table(target={" 0": [0.5, 0.5]})), "canonical"),
    ("key-space-after-comma", dumps(table(target={"0, 1": [0.5, 0.5]})), "canonical"),
    ("key-blank", dumps(table(target={" ": [0.5, 0.5]})), "canonical"),
    ("key-double-comma", dumps(table(target={"0,,1": [0.5, 0.5]})), "canonical"),
    ("key-trailing-comma", dumps(table(target={"0,": [0.5, 0.5]})), "canonical"),
    ("key-plus-sign", dumps(table(target={"+1": [0.5, 0.5]})), "canonical"),
    ("key-negative", dumps(table(target={"-1": [0.5, 0.5]})), "canonical"),
    ("key-hex", dumps(table(target={"0x1": [0.5, 0.5]})), "canonical"),
    ("key-decimal-point", dumps(table(target={"1.0": [0.5, 0.5]})), "canonical"),
    ("key-unicode-digit", dumps(table(target={"\u0661": [0.5, 0.5]})), "canonical"),
    ("key-token-out-of-range", dumps(table(target={"2": [0.5, 0.5]})), "outside"),
    ("key-duplicate-json", dumps(table()).replace('"0": [0.5, 0.5]',
                                                  '"0": [0.5, 0.5], "0": [0.4, 0.6]'), "twice"),
    ("top-key-duplicate", '{"vocab_size": 2, "vocab_size": 3, "block_length": 2, '
                          '"target": ["1/3", "2/3"], "draft": ["2/3", "1/3"]}', "twice"),
    ("missing-prefix", dumps({**V2L2, "target": {"": ROW, "0": ROW, "0,0": ROW, "0,1": ROW,
                                                 "1,0": ROW, "1,1": ROW},
                              "draft": ROW}), "missing prefix '1'"),
    ("missing-target-depth-L", dumps({**V2L2, "target": {"": ROW, "0": ROW, "1": ROW},
                                      "draft": ROW}), "missing prefix '0,0'"),
    ("missing-draft-depth", dumps({**V2L2, "target": ROW, "draft": {"": ROW}}),
     "missing prefix '0'"),
    ("extra-deeper-prefix", dumps(table(target={"0,1,1": ROW})),
     "target: depth 3 is partly given (1 of 8 prefixes; first given '0,1,1', first missing "
     "'0,0,0')"),
    ("deeper-prefix-missing", dumps(table(target={",".join(map(str, (a, b, c))): ROW
                                                  for a in (0, 1) for b in (0, 1) for c in (0, 1)
                                                  if (a, b, c) != (1, 1, 0)})),
     "target: depth 3 is partly given (7 of 8 prefixes; first given '0,0,0', first missing "
     "'1,1,0')"),
    ("extra-draft-prefix", dumps(table(draft={"1,0": ROW})),
     "draft: depth 2 is partly given (1 of 4 prefixes; first given '1,0', first missing '0,0')"),
    ("prefix-too-deep", dumps(table(target={",".join(["0"] * 70): ROW})), "70 tokens"),
]
for cid, content, word in BAD_INSTANCES:
    case(f"instance:{cid}", "exact", "bad.json", files={"bad.json": content}, expect=word)

# the same parser behind every command that reads an instance, and standard input
for cid, content, word in BAD_INSTANCES[::6]:
    case(f"check:{cid}", "check", "bad.json", files={"bad.json": content}, expect=word)
    case(f"lp:{cid}", "lp", "bad.json", files={"bad.json": content}, expect=word)
case("stdin:not-utf8", "exact", "-", stdin=b"\xff\xfe{}", expect="UTF-8")
case("stdin:empty", "exact", "-", stdin=b"", expect="empty")
case("stdin:duplicate-key", "check", "-", stdin=b'{"a": 1, "a": 2}', expect="twice")

# exact mode: rows that do not sum to exactly 1 as rationals
case("exact-mode:float-rows", "exact", "@rand.json", "--exact", expect="exactly 1")
case("exact-mode:lp-float-rows", "lp", "@rand.json", "--exact", expect="exactly 1")

# ----------------------------------------------------------------------------- files
case("file:missing", "exact", "nope.json", expect="cannot read")
case("file:directory", "exact", "adir", files={"adir/x": "{}"}, expect="cannot read")
case("file:nul-in-name", "exact", "a\0b.json", expect="cannot read")
case("file:missing-check", "check", "nope.json", expect="cannot read")
case("file:missing-lp", "lp", "nope.json", expect="cannot read")

# ----------------------------------------------------------------------------- exact options
for v in ("2", "-1", "nan", "inf", "-inf", "abc", "0.01", ""):
    case(f"exact:--tol={v!r}", "exact", "@rand.json", "--tol", v, expect="--tol")
case("exact:--tol-2-all-zero-row", "exact", "bad.json", "--tol", "2",
     files={"bad.json": dumps(table(target={"0,1": [0, 0]}))}, expect="--tol")
case("exact:--tol-max-all-zero-row", "exact", "bad.json", "--tol", "0.001",
     files={"bad.json": dumps(table(target={"0,1": [0, 0]}))}, expect="sums to")
for v in ("0", "-1", "abc", "1.5e0", "1.5", "10000000000000000"):
    case(f"exact:--max-sequences={v}", "exact", "@rand.json", "--max-sequences", v,
         expect="--max-sequences")
for v in ("0", "-3", "abc", "1000", "21", "2.0"):
    case(f"exact:--paths={v}", "exact", "@rand.json", "--verifier", "gbv", "--paths", v,
         expect="--paths")
for v in ("0", "-1", "nan", "inf", "abc", "1e9"):
    case(f"exact:--time-limit={v}", "exact", "@rand.json", "--time-limit", v,
         expect="--time-limit")
case("exact:single-path-verifier-with-paths", "exact", "@rand.json", "--paths", "2",
     expect="single-path")
case("exact:drafting-unknown", "exact", "@rand.json", "--drafting", "xyz", expect="--drafting")
case("exact:verifier-unknown", "exact", "@rand.json", "--verifier", "nope", expect="nope")
case("exact:verifier-no-module", "exact", "@rand.json", "--verifier", "no_such_mod_x:f",
     expect="no_such_mod_x")
case("exact:verifier-no-function", "exact", "@rand.json", "--verifier", "math:no_such_fn",
     expect="no_such_fn")
case("exact:verifier-not-callable", "exact", "@rand.json", "--verifier", "math:pi",
     expect="pi")
case("exact:verifier-raises", "exact", "@rand.json", "--verifier", "os.path:join",
     expect="raised TypeError")
case("check:verifier-raises", "check", "@rand.json", "--verifier", "json:dumps",
     expect="raised TypeError")
case("exact:verifier-wrong-signature", "exact", "@rand.json", "--verifier", "math:sqrt",
     expect="raised TypeError")
case("exact:size-over-max-sequences", "exact", "@rand.json", "--max-sequences", "7",
     expect="exceed")
case("exact:paths-20-size-guard", "exact", "@rand.json", "--verifier", "spectr",
     "--paths", "20", expect="exceed")
case("exact:traversal-iid-paths-12-size-guard", "exact", "@d33.json", "--verifier",
     "traversal-iid", "--paths", "12", expect="exceed")
case("exact:float-only-verifier-exact", "exact", "@toy.json", "--exact", "--verifier",
     "uniform-product", expect="float law only")
case("exact:missing-instance-arg", "exact", expect="instance")
case("exact:unknown-option", "exact", "@rand.json", "--frobnicate", expect="frobnicate")
case("exact:time-limit-reached", "exact", "@ci16.json", "--time-limit", "0.001",
     expect="time limit")

# ----------------------------------------------------------------------------- check options
for v in ("nan", "-1", "1", "0.01", "inf", "abc", "-0.5"):
    case(f"check:--lossless-tol={v}", "check", "@rand.json", "--lossless-tol", v,
         expect="--lossless-tol")
for v in ("0", "-2", "65", "abc", "1000000000"):
    case(f"check:--tokens={v}", "check", "@rand.json", "--tokens", v, expect="--tokens")
case("check:uniform-product-exact", "check", "@toy.json", "--verifier", "uniform-product",
     "--exact", expect="float law only")
case("check:token-with-paths", "check", "@rand.json", "--verifier", "token", "--paths", "3",
     expect="single-path")
case("check:--tol-2", "check", "@rand.json", "--tol", "2", expect="--tol")
case("check:multi-iteration-size-guard", "check", "@rand.json", "--tokens", "40",
     expect="exceed")
case("check:max-sequences-zero", "check", "@rand.json", "--max-sequences", "0",
     expect="--max-sequences")
case("check:time-limit-negative", "check", "@rand.json", "--time-limit", "-5",
     expect="--time-limit")
case("check:time-limit-reached", "check", "@ci16.json", "--time-limit", "0.001",
     expect="time limit")

# ----------------------------------------------------------------------------- instance random
R = ("instance", "random")
for v in ("1", "0", "-4", "abc", "10000001", "2.5"):
    case(f"random:--vocab={v}", *R, "--vocab", v, "--block", "2", expect="--vocab")
for v in ("0", "65", "-1", "x"):
    case(f"random:--block={v}", *R, "--vocab", "2", "--block", v, expect="--block")
for v in ("-1", "abc", str(2**64), "1.5"):
    case(f"random:--seed={v}", *R, "--vocab", "2", "--block", "2", "--seed", v, expect="--seed")
for v in ("inf", "nan", "0", "-1", "1e-9", "abc", "1e7", "-inf"):
    case(f"random:--alpha={v}", *R, "--vocab", "2", "--block", "2", "--alpha", v,
         expect="--alpha")
for v in ("0", "-5", "10000000000", "x"):
    case(f"random:--denominator={v}", *R, "--vocab", "2", "--block", "2", "--denominator", v,
         expect="--denominator")
case("random:missing-vocab", *R, "--block", "2", expect="--vocab")
case("random:too-many-prefixes", *R, "--vocab", "100", "--block", "4", expect="prefixes")
case("random:unknown-kind", "instance", "uniform", expect="uniform")
case("random:no-kind", "instance", expect="KIND")

# ----------------------------------------------------------------------------- lp
case("lp:problem-unknown", "lp", "@rand.json", "--problem", "xyz", expect="--problem")
case("lp:node-budget-paths", "lp", "@rand.json", "--problem", "node-budget", "--paths", "2",
     expect="single-path")
case("lp:coupling-paths", "lp", "@rand.json", "--problem", "coupling", "--paths", "3",
     expect="single-path")
case("lp:multipath-exact", "lp", "@toy.json", "--problem", "multipath", "--exact",
     expect="--exact")
case("lp:drafting-node-budget", "lp", "@rand.json", "--drafting", "norep", expect="--drafting")
case("lp:solver-unknown", "lp", "@rand.json", "--solver", "glpk", expect="--solver")
case("lp:solver-coupling", "lp", "@rand.json", "--problem", "coupling", "--solver", "highs",
     expect="--solver")
case("lp:paths-zero", "lp", "@rand.json", "--problem", "direct", "--paths", "0",
     expect="--paths")
case("lp:paths-huge", "lp", "@rand.json", "--problem", "direct", "--paths", "10000",
     expect="--paths")
case("lp:tol-nan", "lp", "@rand.json", "--tol", "nan", expect="--tol")
case("lp:time-limit-zero", "lp", "@rand.json", "--time-limit", "0", expect="--time-limit")
case("lp:direct-over-max-sequences", "lp", "@rand.json", "--problem", "direct", "--paths", "2",
     "--max-sequences", "10", expect="exceed")
case("lp:direct-estimated-too-long", "lp", "@d33.json", "--problem", "direct", "--paths", "4",
     expect="--time-limit")
case("lp:multipath-estimated-too-long", "lp", "@mp38.json", "--problem", "multipath",
     "--paths", "2", expect="--time-limit")
case("lp:node-budget-over-max-sequences", "lp", "@mp38.json", "--max-sequences", "100",
     expect="exceed")

# ----------------------------------------------------------------------------- toy
for cid, params, word in [
    ("unknown-family", ["nope"], "nope"),
    ("not-name-value", ["dirichlet", "x"], "NAME=VALUE"),
    ("empty-name", ["dirichlet", "=3"], "NAME=VALUE"),
    ("bad-name", ["dirichlet", "a b=3"], "name"),
    ("unknown-param", ["dirichlet", "foo=1"], "foo"),
    ("duplicate-param", ["dirichlet", "alpha=1", "alpha=2"], "twice"),
    ("vocab-text", ["dirichlet", "vocab_size=abc"], "vocab_size"),
    ("vocab-1", ["dirichlet", "vocab_size=1"], "vocab_size"),
    ("vocab-overflow", ["dirichlet", "vocab_size=1e400"], "vocab_size"),
    ("block-0", ["mixture", "block_length=0"], "block_length"),
    ("block-too-long", ["two-token", "block_length=100"], "block_length"),
    ("seed-negative", ["dirichlet", "seed=-1"], "seed"),
    ("seed-float", ["markov", "seed=1.5"], "seed"),
    ("alpha-inf", ["dirichlet", "alpha=inf"], "alpha"),
    ("alpha-nan", ["dirichlet", "alpha=nan"], "alpha"),
    ("alpha-tiny", ["dirichlet", "alpha=1e-9"], "alpha"),
    ("eps-over-1", ["mixture", "eps=2"], "eps"),
    ("lam-text", ["markov", "lam=abc"], "lam"),
    ("temperature-0", ["temperature", "temperature=0"], "temperature"),
    ("sigma-overflow", ["logit-noise", "sigma=1e308"], "non-finite"),
    ("ngram-order", ["ngram", "order=100"], "order"),
    ("ngram-draft-order", ["ngram", "draft_order=0"], "draft_order"),
    ("two-token-q0", ["two-token", "q0=3/2"], "q0"),
    ("too-many-prefixes", ["dirichlet", "vocab_size=64", "block_length=4"], "prefixes"),
]:
    case(f"toy:{cid}", "toy", *params, expect=word)

# ----------------------------------------------------------------------------- report, misc
for v in ("-1", "abc", str(2**64), "0.5"):
    case(f"report:--seed={v}", "report", "--seed", v, expect="--seed")
case("verifiers:extra-argument", "verifiers", "extra", expect="extra")
case("top:no-command", expect="COMMAND")
case("top:unknown-command", "frobnicate", expect="frobnicate")
case("top:unknown-global-option", "--frobnicate", "verifiers", expect="frobnicate")
case("figures:unknown-option", "figures", "--frobnicate", expect="frobnicate")
case("validate:no-action", "validate", expect="ACTION")
case("models:no-action", "models", expect="ACTION")

# ----------------------------------------------------------------------------- environment
for name, v in [("SPECTHEORY_MAX_SEQUENCES", "abc"), ("SPECTHEORY_MAX_SEQUENCES", "1.5e0"),
                ("SPECTHEORY_MAX_SEQUENCES", "0"), ("SPECTHEORY_MAX_SEQUENCES", "-5"),
                ("SPECTHEORY_MAX_SEQUENCES", "1.5"), ("SPECTHEORY_MAX_SEQUENCES", str(10**16)),
                ("SPECTHEORY_MAX_EXACT_SEQUENCES", "many"),
                ("SPECTHEORY_MAX_LP_VARIABLES", "abc"),
                ("SPECTHEORY_MAX_EXACT_LP_VARIABLES", "1e5.5"),
                ("SPECTHEORY_MAX_SYMPY_LP_VARIABLES", "-1")]:
    case(f"env:{name}={v}:exact", "exact", "@rand.json", env={name: v}, expect=name)
case("env:lp-variables:lp", "lp", "@rand.json", env={"SPECTHEORY_MAX_LP_VARIABLES": "abc"},
     expect="SPECTHEORY_MAX_LP_VARIABLES")
case("env:sequences:verifiers", "verifiers", env={"SPECTHEORY_MAX_SEQUENCES": "2.5e0"},
     expect="SPECTHEORY_MAX_SEQUENCES")
case("env:sequences:random", *R, "--vocab", "2", "--block", "2",
     env={"SPECTHEORY_MAX_SEQUENCES": "x"}, expect="SPECTHEORY_MAX_SEQUENCES")
case("env:sequences:check", "check", "@rand.json",
     env={"SPECTHEORY_MAX_EXACT_SEQUENCES": "2e5x"}, expect="SPECTHEORY_MAX_EXACT_SEQUENCES")

# ----------------------------------------------------------------------------- strict keys
# an unknown key of an instance is refused, naming the nearest valid one (a misspelt "target"
# used to be reported as a missing key; an extra key was silently ignored)
case("instance:misspelt-target", "exact", "bad.json",
     files={"bad.json": dumps({**without(TOY, "target"), "tagret": ["1/3", "2/3"]})},
     expect="did you mean 'target'")
case("instance:misspelt-vocab", "check", "bad.json",
     files={"bad.json": dumps({**without(TOY, "vocab_size"), "vocabsize": 2})},
     expect="did you mean 'vocab_size'")
case("instance:extra-key", "exact", "bad.json",
     files={"bad.json": dumps({**TOY, "comment": "made by hand"})}, expect="unknown key 'comment'")
case("instance:extra-key-lp", "lp", "bad.json",
     files={"bad.json": dumps({**table(), "drafts": {}})}, expect="did you mean 'draft'")

# ----------------------------------------------------------------------------- resource guards
# threads: torch's pool crashed the process (exit 139) on a request for 100000 threads
for where in ("before", "after"):
    for v in ("100000", "257", "9" * 40):
        argv = ["--threads", v, "verifiers"] if where == "before" else ["verifiers", "--threads", v]
        case(f"threads:{where}:{v[:8]}", *argv, expect="--threads")
case("threads:env", "verifiers", env={"SPECTHEORY_THREADS": "100000"}, expect="SPECTHEORY_THREADS")
case("threads:figures", "figures", "--quick", "--threads", "100000", "--out", "figs",
     expect="--threads")
# check-sampler: every size is parsed and bounded before the sampler is imported or anything
# is allocated (1e13 samples used to be handed to the check, which tried to allocate 2.5 TB)
S = ("check-sampler", "math:sqrt")
for v in ("1e13", "10000000000000", "1e999", "1.5", "1.25e1", "0", "-3", "many", ""):
    case(f"check-sampler:--samples={v!r}", *S, "--samples", v, expect="--samples")
for v in ("0", "21", "1000000000", "x"):
    case(f"check-sampler:--paths={v}", *S, "--paths", v, expect="--paths")
for v in ("-1", str(2**63), "x"):
    case(f"check-sampler:--seed={v}", *S, "--seed", v, expect="--seed")
# vectors export: K, decisions and the seed bounded before the V^(LK) joint drafts are counted
V = ("vectors", "export", "out", "--verifier", "block")
for opt, v in [("--paths", "0"), ("--paths", "21"), ("--paths", "1000000000"),
               ("--decisions", "101"), ("--decisions", "-1"), ("--decisions", "10000000000"),
               ("--seed", "-1"), ("--seed", str(2**64)), ("--paths", "x")]:
    case(f"vectors:{opt}={v}", *V, opt, v, expect=opt)
case("vectors:unwritable-dir", "vectors", "export", "/proc/spectheory-vectors", "--verifier",
     "block", expect="cannot write")
case("vectors:into-a-file", "vectors", "export", "f.txt", "--verifier", "block",
     files={"f.txt": "x"}, expect="not an empty directory")


# ----------------------------------------------------------------------------- the test


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Valid instance files the cases point at with '@NAME'."""
    d = tmp_path_factory.mktemp("instances")
    files = {
        "toy.json": TOY,
        "rand.json": instance_to_dict(random_instance(2, 2, seed=1)),
        "ci16.json": instance_to_dict(random_instance(16, 5, seed=0, context_independent=True)),
        "d33.json": instance_to_dict(random_instance(3, 3, seed=0)),
        "mp38.json": instance_to_dict(random_instance(3, 8, seed=0)),
    }
    for name, obj in files.items():
        (d / name).write_text(json.dumps(obj))
    return d


def listing(root) -> set:
    return {os.path.relpath(os.path.join(dp, f), root)
            for dp, dn, fn in os.walk(root) for f in fn + dn}


def test_table_is_large():
    assert len(CASES) >= 150


@pytest.mark.parametrize("args,files,env,stdin,expect", CASES)
def test_bad_input_refused_in_one_line(args, files, env, stdin, expect, shared, tmp_path,
                                       monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name, content in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    args = [str(shared / a[1:]) if a.startswith("@") else a for a in args]
    before, before_shared = listing(tmp_path), listing(shared)
    code, out, err = run(args, capsys)
    assert code == 2, err
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert err.startswith("spectheory") and ": error: " in err
    if expect is not None:
        assert expect in err, err
    assert listing(tmp_path) == before
    assert listing(shared) == before_shared


# ----------------------------------------------------------------------------- interrupts


def test_interrupt_while_building_the_parser_is_one_line(monkeypatch, capsys):
    import spectheory.cli as cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    code, out, err = run(["verifiers"], capsys)
    assert (code, out, err) == (130, "", "spectheory: interrupted\n")


@pytest.mark.skipif(not os.path.isdir("/proc/self") or sys.platform != "linux",
                    reason="needs /proc to see when the child has started importing torch")
def test_sigint_during_start_up_exits_130_with_one_line(tmp_path):
    """SIGINT while the command line is still importing its modules (torch): exit code 130 and
    one line, no traceback."""
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(TOY))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
        + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    child = subprocess.Popen([sys.executable, "-m", "spectheory.cli", "exact", str(path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             cwd=tmp_path)
    t0 = time.monotonic()
    started = False
    while time.monotonic() - t0 < 60 and child.poll() is None:
        try:
            with open(f"/proc/{child.pid}/maps") as fh:
                if "torch" in fh.read():
                    started = True
                    break
        except OSError:
            break
        time.sleep(0.005)
    if not started:  # pragma: no cover - the child finished before torch appeared
        child.kill()
        child.communicate()
        pytest.skip("could not catch the child during start-up")
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    if child.returncode == 0:  # pragma: no cover - the signal arrived after the work was done
        pytest.skip("the child finished before the signal arrived")
    assert child.returncode == 130, err
    assert out == b""
    assert err.decode() == "spectheory: interrupted\n"
    assert sorted(os.listdir(tmp_path)) == ["toy.json"]


# ----------------------------------------------------------------------------- controls
# The refusals above are caused by the defect each case plants: the same inputs without it are
# accepted and give the right values.


def test_control_the_table_base_instance_is_valid(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ok.json").write_text(dumps(table()))
    code, out, err = run(["exact", "ok.json", "--json"], capsys)
    assert code == 0 and err == ""
    assert abs(json.loads(out)["tv_to_target"]) < 1e-12
    code, out, err = run(["check", "ok.json", "--tol", "0.001", "--time-limit", "600"], capsys)
    assert code == 0 and out.startswith("block: lossless")
    assert os.listdir(tmp_path) == ["ok.json"]


def two_token_table(L: int = 2) -> dict:
    """The two-token example with explicit prefix keys (every row the same)."""
    p, q = ["1/3", "2/3"], ["2/3", "1/3"]
    keys = lambda depth: [""] + [",".join(str((n >> (d - 1 - i)) & 1) for i in range(d))
                                 for d in range(1, depth + 1) for n in range(2**d)]
    return {"vocab_size": 2, "block_length": L, "target": {k: p for k in keys(L)},
            "draft": {k: q for k in keys(L - 1)}}


def test_leading_zero_key_no_longer_overrides_its_row(tmp_path, capsys):
    from fractions import Fraction

    from spectheory.runtime.errors import InstanceError
    from spectheory.inputs.instances import instance_from_dict

    good = two_token_table()
    path = tmp_path / "good.json"
    path.write_text(dumps(good))
    code, out, _ = run(["exact", str(path), "--exact", "--json"], capsys)
    # block verification on the two-token example: E[tau] = 11/9 (Sun et al.), as in list form
    assert code == 0 and Fraction(json.loads(out)["expected_accepted"]) == Fraction(11, 9)
    bad = dict(good, target={**good["target"], "00": ["0", "1"]})
    with pytest.raises(InstanceError) as exc:
        instance_from_dict(bad, exact=True)
    assert isinstance(exc.value, ValueError)
    path.write_text(dumps(bad))
    code, out, err = run(["exact", str(path), "--exact"], capsys)
    assert code == 2 and out == ""
    assert err == f"spectheory: error: {exc.value}\n"  # the same message as the Python API


def test_environment_limits_are_read_when_used(tmp_path, monkeypatch, capsys):
    path = tmp_path / "ok.json"
    path.write_text(dumps(table()))
    monkeypatch.setenv("SPECTHEORY_MAX_SEQUENCES", "7")
    code, out, err = run(["exact", str(path)], capsys)
    assert code == 2 and "limit of 7 by 1" in err and out == ""
    monkeypatch.setenv("SPECTHEORY_MAX_SEQUENCES", "8")
    code, out, err = run(["exact", str(path)], capsys)
    assert code == 0 and out.startswith("block: E[tau]")


def test_time_limit_stops_cutting_plane_rounds(shared, capsys):
    """The multipath relaxation at V, L, K = 3, 8, 2 (estimated several minutes) runs once
    --time-limit is given and stops there."""
    t0 = time.monotonic()
    code, out, err = run(["lp", str(shared / "mp38.json"), "--problem", "multipath",
                          "--paths", "2", "--time-limit", "1"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "time limit of 1 s reached" in err
    assert time.monotonic() - t0 < 60


# ----------------------------------------------------------------------------- Python API
# The same validation behind the public functions: one exception type (SpectheoryError, a
# ValueError) with a one-line message.


def _api_cases():
    from spectheory import analyze, check_lossless, instance_from_dict, load_instance
    from spectheory import multi_iteration_law, random_instance as ri

    inst = ri(2, 2, 0)
    return [
        ("random-seed-negative", lambda: ri(2, 2, -1), "seed"),
        ("random-alpha-inf", lambda: ri(2, 2, 0, alpha=float("inf")), "alpha"),
        ("random-alpha-nan", lambda: ri(2, 2, 0, alpha=float("nan")), "alpha"),
        ("random-vocab-float", lambda: ri(2.5, 2, 0), "vocab_size"),
        ("random-block-0", lambda: ri(2, 0, 0), "block_length"),
        ("random-denominator-0", lambda: ri(2, 2, 0, denominator=0), "denominator"),
        ("from-dict-tol-2", lambda: instance_from_dict(TOY, tol=2), "tol"),
        ("from-dict-tol-nan", lambda: instance_from_dict(TOY, tol=float("nan")), "tol"),
        # rows of floats only (read without a call an entry): the first non-finite one named
        ("from-dict-nan-among-floats",
         lambda: instance_from_dict({**TOY, "target": [0.5, float("nan")]}),
         "target: context-independent row: entry nan is not finite"),
        ("from-dict-inf-among-floats",
         lambda: instance_from_dict({**TOY, "draft": [float("inf"), float("-inf")]}),
         "draft: context-independent row: entry inf is not finite"),
        ("from-dict-exact-text", lambda: instance_from_dict(TOY, exact="yes"), "exact"),
        ("from-dict-leading-zero", lambda: instance_from_dict(table(target={"00": ROW})),
         "canonical"),
        ("from-dict-int-key", lambda: instance_from_dict(table(target={0: ROW})), "string"),
        ("load-tol-negative", lambda: load_instance("x.json", tol=-1), "tol"),
        ("load-not-a-path", lambda: load_instance(3.5), "file name"),
        ("analyze-not-an-instance", lambda: analyze(TOY, "block"), "Instance"),
        ("analyze-bad-device", lambda: analyze(inst, "block", device="tpu9"), "device"),
        ("analyze-max-sequences-0", lambda: analyze(inst, "block", max_sequences=0),
         "max_sequences"),
        ("analyze-exact-text", lambda: analyze(inst, "block", exact="no"), "exact"),
        ("analyze-paths-21", lambda: analyze(inst, "gbv", paths=21), "paths"),
        ("analyze-unknown-verifier", lambda: analyze(inst, "nope"), "nope"),
        ("check-tol-nan", lambda: check_lossless("uniform-product", inst, tol=float("nan")),
         "tolerance"),
        ("check-tokens-65", lambda: check_lossless("block", inst, n_tokens=65), "n_tokens"),
        ("multi-iteration-tokens-0", lambda: multi_iteration_law(inst, "block", 0), "n_tokens"),
    ]


API_CASES = [pytest.param(i, id=c[0]) for i, c in enumerate(_api_cases())]


def test_api_table_is_large():
    assert len(API_CASES) >= 20


@pytest.mark.parametrize("index", API_CASES)
def test_python_api_refuses_with_one_exception_type(index):
    from spectheory.runtime.errors import SpectheoryError

    _, call, word = _api_cases()[index]
    with pytest.raises(SpectheoryError) as exc:
        call()
    assert isinstance(exc.value, ValueError)
    assert word in str(exc.value) and "\n" not in str(exc.value)


def test_time_limit_stops_one_long_exact_step(tmp_path, capsys):
    """Exact rational mode enumerates in one step (no chunk boundary to check the clock at):
    the SIGALRM backstop stops it shortly after the limit, and the previous handler is back.
    (Strict verification has no per-node form, so it takes the per-draft route, seconds here.)"""
    path = tmp_path / "exact.json"
    path.write_text(json.dumps(instance_to_dict(random_instance(3, 8, 0, denominator=24))))
    before = signal.getsignal(signal.SIGALRM)
    t0 = time.monotonic()
    code, out, err = run(["check", str(path), "--exact", "--verifier", "strict", "--time-limit",
                          "0.5"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "time limit of 0.5 s reached" in err
    assert time.monotonic() - t0 < 30
    assert signal.getsignal(signal.SIGALRM) is before
    assert os.listdir(tmp_path) == ["exact.json"]


def test_time_limit_backstop_survives_a_finaliser():
    """The SIGALRM backstop may fire while the garbage collector runs a finaliser, which would
    swallow the exception (the limit silently lost); it waits for the collection to end and
    stops the work after it. Negative control: a block without a limit runs to its end."""
    import gc

    from spectheory.runtime import limits
    from spectheory.runtime.errors import TimeLimitError

    class Slow:
        def __del__(self):
            t = time.monotonic()
            while time.monotonic() - t < 0.8:  # past the backstop at limit + 0.5 s
                pass

    def work(seconds):
        a = Slow()
        a.cycle = a
        del a
        gc.collect()
        t = time.monotonic()
        while time.monotonic() - t < seconds:  # no soft clock check here: only the alarm
            pass

    callbacks = list(gc.callbacks)
    t0 = time.monotonic()
    with pytest.raises(TimeLimitError, match="time limit of 0.1 s reached"):
        with limits.running(0.1):
            work(5.0)
    assert time.monotonic() - t0 < 3  # stopped soon after the finaliser, not after 5.8 s
    assert gc.callbacks == callbacks  # the collection tracker is removed with the alarm
    with limits.running(None):
        work(0.1)


def test_bad_environment_does_not_break_import_or_help(tmp_path):
    """Limits are read on use, never at import: with bad values set, ``spectheory --help``
    (which imports every command module, lp.sparse and spectheory.engine.seqtree included) still works."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, SPECTHEORY_MAX_SEQUENCES="1.5e0", SPECTHEORY_MAX_LP_VARIABLES="abc",
               PYTHONPATH=os.pathsep.join([root] + os.environ.get("PYTHONPATH", "").split(
                   os.pathsep)))
    done = subprocess.run([sys.executable, "-m", "spectheory.cli", "--help"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: spectheory") and done.stderr == ""


# ----------------------------------------------------------------------------- error classes


def test_a_time_limit_is_not_a_value_error():
    """Bad input is a ValueError (`SpectheoryError(...)` raised directly included); a time limit
    is not, so that no number parser's ``except ValueError`` can take the alarm for a bad
    number."""
    from spectheory.runtime.errors import (InputError, InstanceError, OptionError, SizeLimitError,
                                           SpectheoryError, TimeLimitError, UserCodeError)

    plain = SpectheoryError("refused")
    assert type(plain) is InputError and isinstance(plain, ValueError)
    for cls in (InstanceError, OptionError, SizeLimitError, UserCodeError):
        assert issubclass(cls, InputError) and issubclass(cls, ValueError)
    assert issubclass(TimeLimitError, SpectheoryError)
    assert not issubclass(TimeLimitError, ValueError)
    with pytest.raises(TimeLimitError):
        try:
            raise TimeLimitError("time limit")
        except ValueError:  # pragma: no cover - what the instance parser does around Fraction
            pass


def test_the_alarm_inside_fraction_parsing_is_a_time_limit(tmp_path, monkeypatch, capsys):
    """The SIGALRM backstop fires while the instance parser runs ``Fraction(text)`` inside its
    ``except (ValueError, ZeroDivisionError)``: the run must end with the time-limit error, not
    with 'entry ... is not a number' (what it said while TimeLimitError was a ValueError)."""
    import spectheory.inputs.instances as instances
    from fractions import Fraction

    real = Fraction
    fired = []

    def alarmed(value, *rest):
        if isinstance(value, str) and not fired:
            fired.append(value)
            signal.raise_signal(signal.SIGALRM)  # the handler runs here, inside the parser
        return real(value, *rest)

    monkeypatch.setattr(instances, "Fraction", alarmed)
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(TOY))
    args = ["lp", str(path), "--exact", "--time-limit", "600"]  # reads the instance, no torch
    code, out, err = run(args, capsys)
    assert fired == ["1/3"]
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "time limit of 600 s reached" in err and "not a number" not in err
    # control: without the alarm the same file is read and solved
    monkeypatch.setattr(instances, "Fraction", real)
    code, out, err = run(args, capsys)
    assert code == 0 and err == ""


# ----------------------------------------------------------------------------- outputs


def _spectheory(args, **kwargs):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.run([sys.executable, "-m", "spectheory", *args], env=env, timeout=120,
                          **kwargs)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_device_is_one_line(capsys, monkeypatch):
    """``spectheory ... > /dev/full``: one line, exit 2 (it was a traceback, exit 1), in-process
    and as a process (where the interpreter's own flush at exit must not add a second message or
    exit code 120)."""
    full = open("/dev/full", "w")
    try:
        monkeypatch.setattr(sys, "stdout", full)
        code = main_quiet(["instance", "random", "--vocab", "2", "--block", "2"])
        monkeypatch.undo()
    finally:
        with contextlib.suppress(OSError):  # the unwritten text is still in its buffer
            full.close()
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "No space left" in err, err
    with open("/dev/full", "w") as full:
        res = _spectheory(["instance", "random", "--vocab", "2", "--block", "2"], stdout=full,
                          stderr=subprocess.PIPE, text=True)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "cannot write the output" in res.stderr
    assert "Traceback" not in res.stderr and "Exception ignored" not in res.stderr


def main_quiet(argv):
    from spectheory.cli import main

    return main(argv)


def test_a_closed_pipe_ends_quietly():
    """``spectheory instance random ... | head -c 1``: the reader goes away; exit 0 and nothing
    on stderr (an output of about 1 MB: far more than a pipe buffer, so the write fails)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    child = subprocess.Popen([sys.executable, "-m", "spectheory", "instance", "random",
                              "--vocab", "6", "--block", "5"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
    assert child.stdout.read(1) == b"{"
    child.stdout.close()
    err = child.stderr.read()
    assert child.wait(timeout=120) == 0, err
    assert err == b""


def test_vectors_export_writes_nothing_half_way(tmp_path, monkeypatch, capsys):
    """The disk fills up while the second vector file is written: one line, exit 2, and neither
    the output folder nor a temporary folder is left behind."""
    import errno

    import spectheory.testing.checks.vectors as vectors

    real = vectors.json.dump
    calls = []

    def dump(obj, fh, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(obj, fh, **kw)

    monkeypatch.setattr(vectors.json, "dump", dump)
    toy = tmp_path / "toy.json"
    toy.write_text(json.dumps(TOY))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = ["vectors", "export", "out", "--verifier", "block", "--verifier", "token",
            "--instances", str(toy)]
    code, out, err = run(args, capsys)
    assert len(calls) == 2
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "No space left on device" in err and "nothing was written" in err
    assert os.listdir(work) == []
    monkeypatch.setattr(vectors.json, "dump", real)  # control: the same export succeeds
    code, out, err = run(args, capsys)
    assert code == 0 and sorted(os.listdir(work / "out")) == [
        "block--K1--toy.json", "token--K1--toy.json"]


def test_an_unknown_vector_field_is_refused(tmp_path, capsys):
    """A vector file with a misspelt field is refused naming the nearest valid one (it was
    reported as a mismatch, exit 1); the untouched file checks out."""
    d = tmp_path / "vec"
    toy = tmp_path / "toy.json"
    toy.write_text(json.dumps(TOY))
    code, _, _ = run(["vectors", "export", str(d), "--verifier", "block", "--instances",
                      str(toy)], capsys)
    assert code == 0
    f = sorted(d.iterdir())[0]
    good = f.read_text()
    assert run(["vectors", "check", str(d)], capsys)[0] == 0
    f.write_text(good.replace('"tau_pmf"', '"tau_pfm"', 1))
    code, out, err = run(["vectors", "check", str(d)], capsys)
    assert code == 2 and out == "" and "did you mean 'tau_pmf'" in err
    data = json.loads(good)
    data["decisions"][0]["tokn"] = 0
    f.write_text(json.dumps(data))
    code, out, err = run(["vectors", "check", str(d)], capsys)
    assert code == 2 and "decisions[0]" in err and "did you mean 'token'" in err


# ----------------------------------------------------------------------------- memory guards


def test_sizes_are_bounded_by_the_memory_estimate(monkeypatch, capsys):
    """``--samples`` is bounded by the time the check's own work needs (memory does not grow with
    it), ``instance random`` by its memory, above half of the machine's (here a machine of
    1 GiB); each refusal names the option and the estimate, and below the bound the values are
    accepted."""
    from spectheory.runtime import limits
    from spectheory.testing.checks.sampler import MAX_SECONDS, MIN_SECONDS_PER_SAMPLE
    from spectheory.testing.sampler_cli import parse_samples

    monkeypatch.setattr(limits, "physical_memory", lambda: 2**30)
    n = int(MAX_SECONDS / MIN_SECONDS_PER_SAMPLE)  # a day of the check's own least cost
    assert parse_samples(str(n)) == n  # memory does not grow with the count
    with pytest.raises(limits.SizeLimitError, match=f"--samples {n + 1:,} would take at least"):
        parse_samples(str(n + 1))
    assert parse_samples("1e5") == 100_000
    code, out, err = run(["instance", "random", "--vocab", "3000", "--block", "1"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--vocab 3000 --block 1" in err and "9,003,000 probabilities" in err
    code, out, err = run(["instance", "random", "--vocab", "100", "--block", "1"], capsys)
    assert code == 0 and json.loads(out)["vocab_size"] == 100
