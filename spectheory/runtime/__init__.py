"""What every layer stands on: errors, limits and size guards, the array backend, the process.

* [`errors`][spectheory.runtime.errors]: the one-line errors of the toolkit and the guarded calls
  into user code;
* [`limits`][spectheory.runtime.limits] and [`sizes`][spectheory.runtime.sizes]: environment
  limits, time limits, progress, and the size guard of an enumeration;
* [`backend`][spectheory.runtime.backend] (with ``_lazy``): one array
  API over torch tensors, numpy float64 arrays and numpy arrays of Fractions, torch imported on
  first use;
* [`threads`][spectheory.runtime.threads], [`allocator`][spectheory.runtime.allocator],
  [`raycluster`][spectheory.runtime.raycluster]: torch's CPU threads, the C allocator, a Ray
  session;
* [`kept`][spectheory.runtime.kept]: bounded memos of pure results (the oldest dropped first).

Nothing here imports the rest of the package.
"""
