"""The exact engine: the law of a verifier's output over the whole sequence tree, and the verdict.

Its modules read top to bottom in pipeline order:

```text
plan ──> route ──> law ──────────────────────────────> output law and verdict
 │        │         per-node       (nodes)                 (output, lossless)
 │        │         per-draft      (perdraft)
 │        │         joint-outcome  (joint)
 │        │         draft-tree     (drafttrees)
 │        └ subtree tasks (split) for the per-node route
 └ resolve_route, size guards                   analysis: runs the pipeline
```

* [`seqtree`][spectheory.engine.seqtree]: the sequence tree as arrays: levels of conditional
  tables, path probabilities, sequence indices;
* [`plan`][spectheory.engine.plan]: which route runs for a planned verifier
  ([`resolve_route`][spectheory.engine.plan.resolve_route], from what the verifier declares), and
  the size guards of an analysis;
* the laws, each a [`BlockLaw`][spectheory.engine.perdraft.BlockLaw] (the pmf of tau and the law
  of the emitted block below each context):
  [`nodes`][spectheory.engine.nodes] (per-node route, one step per node of the sequence tree),
  [`perdraft`][spectheory.engine.perdraft] (per-draft route, the verifier evaluated on all V^L
  drafts), [`joint`][spectheory.engine.joint] (K paths: the joint draft outcomes under a drafting
  scheme), [`drafttrees`][spectheory.engine.drafttrees] (draft trees, node by node or by
  enumeration), [`split`][spectheory.engine.split] (the per-node route as subtree tasks);
* [`output`][spectheory.engine.output]: the output law (block, then target sampling), the target
  law and their total variation;
* [`analysis`][spectheory.engine.analysis]: [`analyze`][spectheory.engine.analysis.analyze],
  [`multi_iteration_law`][spectheory.engine.analysis.multi_iteration_law] and
  [`analyze_tree`][spectheory.engine.analysis.analyze_tree], the one place that dispatches to the
  routes; [`sampling`][spectheory.engine.sampling]: drafts and outputs sampled under a drafting
  scheme;
* [`lossless`][spectheory.engine.lossless]: [`check_lossless`][spectheory.engine.lossless.check_lossless]
  and its report, zero TV iff the verifier is valid (Sun et al., arXiv 2403.10444, section 2);
* [`adaptive`][spectheory.engine.adaptive]: the same laws under a random draft length (a
  stopping rule on the drafted prefix), on top of the per-draft laws and the output law.

Routes are chosen from the capabilities a verifier declares in its
[`VerifierSpec`][spectheory.registry.VerifierSpec] (node form, node rule, analytic route, order
invariance); the engine never imports a verifier.
"""
