"""Old module paths that users import, still importable.

The core was laid out flat until it was grouped by role ([`spectheory.engine`][spectheory.engine],
[`spectheory.cli`][spectheory.cli], [`spectheory.runtime`][spectheory.runtime],
[`spectheory.inputs`][spectheory.inputs]); the claims ledger's computations stood apart from their
rows ([`spectheory.lp.claims`][spectheory.lp.claims]); the conformance kit was one folder until it
was laid out by role ([`spectheory.testing`][spectheory.testing]). Code written against the old
paths (``import spectheory.exact``, ``from spectheory.testing.layouts import VLLM_V1``) keeps
working: [`install`][spectheory._moved.install] (run by ``import spectheory``) adds a finder that
answers an old name with the module it moved to, the very module object (so ``isinstance`` and
monkeypatching act on the module that runs), under both names in ``sys.modules``. Where an old
module was split, its public names that left (`LEFT`) are set on the module the old name maps to,
the same objects.
"""

from __future__ import annotations

import importlib
import sys
from importlib.machinery import ModuleSpec

#: Old module name -> the module it now is.
MOVED = {
    **{f"spectheory.{m}": f"spectheory.runtime.{m}"
       for m in ("_lazy", "allocator", "backend", "errors", "limits", "raycluster", "threads")},
    **{f"spectheory.{m}": f"spectheory.inputs.{m}"
       for m in ("instances", "models", "processing", "random_instances")},
    "spectheory.tree": "spectheory.engine.seqtree",
    "spectheory.nodes": "spectheory.engine.nodes",
    "spectheory.exact": "spectheory.engine.analysis",
    "spectheory.multipath": "spectheory.engine.joint",
    "spectheory.trees": "spectheory.engine.drafttrees",
    "spectheory.split": "spectheory.engine.split",
    "spectheory.commands": "spectheory.cli.commands",
    "spectheory.trees_cli": "spectheory.cli.trees",
    "spectheory.figures": "spectheory.cli.figures",
    "spectheory.report": "spectheory.cli.report",
    "spectheory.audit": "spectheory.cli.audit",
    # the claims ledger's computations, beside their rows (named in docs/relaxed-acceptance.md
    # and docs/heterogeneous-vocabularies.md)
    "spectheory.lp.relaxed_claims": "spectheory.lp.claims.relaxed_checks",
    "spectheory.lp.hetero_claims": "spectheory.lp.claims.hetero_checks",
    # the conformance kit by role: its modules that README.md and docs/ named; the internal ones
    # (calls, rows, report, sizing, own_sampler, lossless and the sampler's *_mode) are gone
    **{f"spectheory.testing.{m}": f"spectheory.testing.checks.{m}" for m in (
        "battery", "hf_generate", "mlx_generate", "sampler", "seeds", "step", "strategies",
        "tree", "tree_ports", "vectors")},
    **{f"spectheory.testing.{m}": f"spectheory.testing.engines.{m}"
       for m in ("adapters", "engine_sampling", "layouts")},
    "spectheory.testing.engine_ports": "spectheory.testing.engines.ports",
    **{f"spectheory.testing.engine_ports.{m}": f"spectheory.testing.engines.ports.{m}"
       for m in ("llamacpp", "mistralrs", "tgi", "trtllm")},
    "spectheory.testing.stats": "spectheory.testing.statistics.stats",
    "spectheory.testing.budget": "spectheory.testing.statistics.budget",
    "spectheory.testing.sharp": "spectheory.testing.designs.sharp",
}

#: Old module name -> {public name that left it: the module that holds it now}.
LEFT = {
    "spectheory.tree": {n: "spectheory.runtime.sizes" for n in (
        "BYTES_PER_LEAF", "DEFAULT_MAX_EXACT_SEQUENCES", "DEFAULT_MAX_SEQUENCES", "check_size",
        "human_bytes", "max_sequences")},
    "spectheory.exact": {
        **{n: "spectheory.engine.perdraft" for n in ("BlockLaw", "block_output_law")},
        **{n: "spectheory.engine.plan" for n in ("ROUTES", "resolve_route")},
        **{n: "spectheory.engine.output" for n in (
            "node_output_law", "output_law", "target_law", "total_variation")},
        **{n: "spectheory.engine.lossless" for n in (
            "LosslessReport", "MAX_LOSSLESS_TOL", "check_lossless", "check_tolerance",
            "lossless_report")},
    },
    "spectheory.multipath": {
        "analyze_gbv_fast": "spectheory.engine.analysis",
        "analyze_multipath": "spectheory.engine.analysis",
        "check_lossless_multipath": "spectheory.engine.lossless",
        "gbv_skewed_draft": "spectheory.verifiers.gbv",
        "sample_drafts": "spectheory.engine.sampling",
        "sample_outputs": "spectheory.engine.sampling",
    },
    "spectheory.trees": {"analyze_tree": "spectheory.engine.analysis",
                         "check_tree_lossless": "spectheory.engine.lossless"},
}


class _Moved:
    """Loader of an old name: the module it moved to, with the names that left it."""

    def __init__(self, old: str):
        self.old = old

    def create_module(self, spec):
        module = importlib.import_module(MOVED[self.old])
        for name, home in LEFT.get(self.old, {}).items():
            if name not in module.__dict__:
                setattr(module, name, getattr(importlib.import_module(home), name))
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module):
        # the import system set the old name's spec on the module: give it back its own, so that
        # its relative imports, pickling and reloads still see the module where it lives
        module.__spec__ = self.own_spec


class _Finder:
    """Meta-path finder of the old names (`MOVED`), consulted before the regular finders: an
    old name under a package that moved whole would otherwise be found by the path finder in the
    moved package's folder and loaded a second time, as a module of its own."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return ModuleSpec(fullname, _Moved(fullname))


def install() -> None:
    """Let the old module names import (once per process)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


__all__ = ["LEFT", "MOVED", "install"]
