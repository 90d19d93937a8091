"""LP toolkit: optimality LPs for single-path and multi-path draft verification.

* :func:`node_budget_lp` -- Thomas & Pal's node-budget LP (single path); optimum = block
  verification's E[tau + 1].
* :func:`direct_lp` -- all valid K-path verifiers as randomised maps (tiny instances; K = 1 is the
  single-path direct LP).
* :func:`selection_lp` -- the best "select a path, then block-verify it against its induced law"
  K-path verifier (the class GBV belongs to).
* :func:`tree_lp` -- the direct LP for a draft tree and its drafting scheme (tiny instances).
* :func:`coupling_bound` -- the full-knowledge coupling bound (closed form).
* :func:`multipath_lp` -- compact node-budget relaxation for K i.i.d. paths with lazily separated
  coverage constraints; :func:`optimal_multidraft_L1` -- Hu et al.'s L = 1 closed form.

Every result is an :class:`LPResult`; every ``optimum`` is in block-efficiency units E[tau + 1].
"""

from .coupling import coupling_bound, coupling_lp
from .direct import direct_lp
from .multipath import multidraft_acceptance_L1, multipath_lp, optimal_multidraft_L1
from .node_budget import node_budget_lp
from .result import LPError, LPResult
from .selection import selection_lp
from .tree import tree_lp

__all__ = [
    "LPError",
    "LPResult",
    "coupling_bound",
    "coupling_lp",
    "direct_lp",
    "multidraft_acceptance_L1",
    "multipath_lp",
    "node_budget_lp",
    "optimal_multidraft_L1",
    "selection_lp",
    "tree_lp",
]
