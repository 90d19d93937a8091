"""The ``spectheory tree`` command: exact analysis of a verifier on a drafted tree.

    spectheory tree INSTANCE (--tree 3,2,1 | --parents 0,0,1 | --choices JSON)
                    [--verifier specinfer] [--drafting iid|norep|topk]
                    [--route auto|enumerate|nodes] [--exact] [--json]

prints E[tau], the block efficiency E[tau + 1], the tau pmf and the lossless verdict (TV of the
output law to the target, exact in rationals with ``--exact``) of
[`analyze_tree`][spectheory.engine.analysis.analyze_tree]. The tree is given by branching factors
per depth (``--tree``), or, for trees whose leaves are at different depths, by a parent list
(``--parents 0,0,1``: the parent of drafted node 1, 2, ...; 0 is the root) or a Medusa / EAGLE
choices list (``--choices '[[0],[1],[0,0]]'``). Bad input (a malformed tree, two tree options, an
unknown verifier, scheme or route, a K-path verifier on an uneven tree, an enumeration over the size
limit) is one line on stderr with exit code 2.
"""

from __future__ import annotations

import warnings

from .commands import add_instance_options, emit, row_tol
from ..runtime import limits
from ..engine.analysis import analysis_summary
from ..engine.lossless import lossless_report
from ..inputs.instances import load_instance
from ..engine.drafttrees import ROUTES, TREE_DRAFTING, tree_shape, tree_verifier
from ..engine.analysis import analyze_tree


def cmd_tree(args) -> int:
    """Run ``spectheory tree`` (module doc); returns the exit code."""
    shape = tree_shape(_tree_argument(args))
    spec = tree_verifier(args.verifier)
    inst = load_instance(args.instance, exact=args.exact, tol=row_tol(args))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = analyze_tree(inst, spec, shape, args.drafting, exact=args.exact, route=args.route,
                           max_sequences=args.max_sequences)
    if res.block_length > inst.block_length:  # said where it is read, not only in the docs
        limits.note(f"the tree is {res.block_length} tokens deep, past the instance's block "
                    f"length {inst.block_length}: E[tau+1] is over the tree's depth (at most "
                    f"{res.block_length + 1}), and rows past the instance's tables are read as "
                    f"its order-D Markov chain (docs/exact-engine.md)")
    rep = lossless_report(res.output_law, res.target_law, res.tv_to_target,
                          res.block_length + 1, res.vocab_size, res.exact)
    res.verifier = (f"{args.verifier} on tree {res.extra['tree']} ({res.extra['drafting']} "
                    f"drafting, {res.extra['drafted_nodes']} drafted nodes, "
                    f"{res.extra['route']} route)")
    text = (analysis_summary(res) + "\n  tau pmf: " + ", ".join(
        str(v) if res.exact else f"{v:.6f}" for v in res.tau_pmf) + "\n  " + str(rep))
    obj = res.to_json()
    obj["verifier"] = args.verifier
    obj["lossless"] = rep.lossless
    limits.check_time(" (after the analysis)")  # a result past the limit is not printed
    emit(obj, args.json, text)
    return 0


def _tree_argument(args):
    """The shape given by exactly one of --tree, --parents, --choices (a form of
    [`tree_shape`][spectheory.engine.drafttrees.tree_shape])."""
    from ..runtime.errors import SpectheoryError

    given = [(k, v) for k, v in (("tree", args.tree), ("parents", getattr(args, "parents", None)),
                                 ("choices", getattr(args, "choices", None))) if v is not None]
    if len(given) != 1:
        raise SpectheoryError(f"give the tree by exactly one of --tree, --parents, --choices "
                              f"(got {len(given)})")
    key, value = given[0]
    if key == "tree":
        return value
    if key == "parents":
        return {"parents": value}
    from ..engine.drafttrees import choices_text

    return {"choices": choices_text(value, "--choices")}


def register(sub) -> None:
    """Add the ``tree`` sub-command to an argparse sub-parser collection."""
    p = sub.add_parser("tree", help="exact analysis of a verifier on a drafted token tree",
                       description=__doc__.split("\n\n")[0].replace("``", ""))  # plain text
    add_instance_options(p)
    p.add_argument("--tree", default=None,
                   help="branching factors per depth, e.g. 3,2,1 (K = 6 leaf paths)")
    p.add_argument("--parents", default=None,
                   help="the tree as a parent list: parent of drafted node 1, 2, ... (0 is the "
                        "root), e.g. 0,0,1; leaves may be at different depths")
    p.add_argument("--choices", default=None,
                   help="the tree as a Medusa / EAGLE choices list (JSON lists of child ranks), "
                        "e.g. '[[0],[1],[0,0]]'; leaves may be at different depths")
    p.add_argument("--verifier", default="specinfer",
                   help="specinfer, specinfer-norep, topk, traversal-tree, block-first, any "
                        "K-path verifier or module:function (default specinfer)")
    p.add_argument("--drafting", default=None,
                   help=f"{' | '.join(TREE_DRAFTING)} (default: the verifier's own)")
    p.add_argument("--route", default="auto", help=f"{' | '.join(ROUTES)} (default auto)")
    p.set_defaults(func=cmd_tree)


__all__ = ["cmd_tree", "register"]

