"""Experiments on real models, each a function of a typed configuration:

* `run`: ``validate run`` (`RunConfig`, `validate_run`) and ``validate costs``
  (`CostsConfig`, `measure`): paired block efficiency of every verifier on one
  drafted batch per iteration, and per-forward costs;
* [`lossless`][spectheory.testing.checks.lossless]: ``validate lossless`` (`LosslessConfig`,
  `run_lossless`): the large-sample tests of the first two output tokens;
* `crosscheck`: ``validate crosscheck`` (`CrosscheckConfig`,
  `run_crosscheck`): token verification against transformers' own routine;
* `summarize`: ``validate summarize`` (`SummarizeConfig`, `summarize`):
  tables with bootstrap intervals and the cost model.

The command-line adapters are in `spectheory.gpu_validation.cli`; nothing here reads an argparse
namespace or prints results to stdout.
"""
