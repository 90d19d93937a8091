"""Experiments on real models, each a function of a typed configuration:

* :mod:`.run`: ``validate run`` (:class:`RunConfig`, :func:`validate_run`) and ``validate costs``
  (:class:`CostsConfig`, :func:`measure`): paired block efficiency of every verifier on one
  drafted batch per iteration, and per-forward costs;
* :mod:`.lossless`: ``validate lossless`` (:class:`LosslessConfig`, :func:`run_lossless`): the
  large-sample tests of the first two output tokens;
* :mod:`.crosscheck`: ``validate crosscheck`` (:class:`CrosscheckConfig`,
  :func:`run_crosscheck`): token verification against transformers' own routine;
* :mod:`.summarize`: ``validate summarize`` (:class:`SummarizeConfig`, :func:`summarize`):
  tables with bootstrap intervals and the cost model.

The command-line adapters are in :mod:`gpu_validation.cli`; nothing here reads an argparse
namespace or prints results to stdout.
"""
