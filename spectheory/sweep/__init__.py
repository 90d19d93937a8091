"""Sweeps: grids of exact analyses and LP optima, run as independent jobs, cached, as one table.

A sweep is a TOML file (``spectheory sweep --example`` prints one) naming instance families with
their knobs, seeds, vocabulary sizes V and block lengths L, verifiers with their path counts K and
drafting schemes, and LP optima. It expands into jobs, one per (instance, verifier or optimum),
each computed by the public API (`spectheory.analyze`, `spectheory.lp.direct_lp`) in a child
process with its own time and memory limit, so a job that runs away is a row that says so, never
a lost sweep. Finished jobs are cached under ``OUT/cache/`` by a content hash of their inputs (and
the spectheory version): a re-run, a resumed run after a kill, or an extended grid computes only
what is missing. The result is one tidy table, ``OUT/results.csv`` (and ``OUT/results.parquet``
with pyarrow), one row per job with every input, every output and the command that reproduces it.

Executors: ``local`` (default; child processes on this machine, no Ray needed) and ``ray``
(``spectheory[ray]``: one Ray task per job, on the cluster at ``--address`` or on a local Ray
cluster started for the run). Both run the same job function, so their tables agree bit for bit
apart from the timing columns.

```python
from spectheory.sweep import example_config, load_config, run_sweep

table = run_sweep(load_config(example_config()), out="sweep-out", executor="local")
```
"""

from .config import SweepConfig, example_config, expand, load_config
from .runner import OUTPUT_COLUMNS, run_sweep

__all__ = ["OUTPUT_COLUMNS", "SweepConfig", "example_config", "expand", "load_config", "run_sweep"]
