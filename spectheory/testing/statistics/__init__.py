"""The statistics of the sampler checks: [`stats`][spectheory.testing.statistics.stats] (pooled
chi-square per row, the Bonferroni family, its power and the smallest bias it detects) and
[`budget`][spectheory.testing.statistics.budget] (a check sized to a time budget, its power
stated before the run). Nothing here imports a check.
"""
