"""The checks of the conformance kit, one module per mode, with the helpers they share.

* Samplers: [`sampler`][spectheory.testing.checks.sampler] (the dispatcher,
  [`check_sampler`][spectheory.testing.checks.sampler.check_sampler]) and its modes
  [`law_mode`][spectheory.testing.checks.law_mode],
  [`lossless_mode`][spectheory.testing.checks.lossless_mode],
  [`coins_mode`][spectheory.testing.checks.coins_mode] (``coins`` and ``coins-tau``) and
  [`proposal_mode`][spectheory.testing.checks.proposal_mode]
  ([`check_proposal`][spectheory.testing.checks.sampler.check_proposal]); the reference sampler
  [`own_sampler`][spectheory.testing.checks.own_sampler]; what a check plans before its first
  call, [`sizing`][spectheory.testing.checks.sizing].
* A verifier's formula, exactly: [`lossless`][spectheory.testing.checks.lossless] on the instances
  of [`battery`][spectheory.testing.checks.battery]
  ([`strategies`][spectheory.testing.checks.strategies]: the same kinds for hypothesis), and
  [`vectors`][spectheory.testing.checks.vectors], language-neutral test vectors.
* Draft trees: [`tree`][spectheory.testing.checks.tree] and
  [`tree_ports`][spectheory.testing.checks.tree_ports] (two engines' tree kernels and their
  presets; they stand with the tree mode because the exact laws of their planted bugs are
  written on its conditional law).
* Whole steps: [`step`][spectheory.testing.checks.step],
  [`seeds`][spectheory.testing.checks.seeds] (seed replay, batch invariance), and real engines
  run unmodified, [`hf_generate`][spectheory.testing.checks.hf_generate] and
  [`mlx_generate`][spectheory.testing.checks.mlx_generate].
* Shared by the checks: [`report`][spectheory.testing.checks.report] (the reports and the guard
  around user code), [`calls`][spectheory.testing.checks.calls] (calling and counting) and
  [`rows`][spectheory.testing.checks.rows] (the rows a check hands over).

Every public name is also in [`spectheory.testing`][spectheory.testing].
"""
