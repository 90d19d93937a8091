"""LP toolkit: optimality LPs for single-path and multi-path draft verification.

* [`node_budget_lp`][spectheory.lp.node_budget.node_budget_lp] -- Thomas & Pal's node-budget LP
  (single path); optimum = block verification's E[tau + 1].
* [`direct_lp`][spectheory.lp.direct.direct_lp] -- all valid K-path verifiers as randomised maps
  (tiny instances; K = 1 is the single-path direct LP).
* [`selection_lp`][spectheory.lp.selection.selection_lp] -- the best "select a path, then
  block-verify it against its induced law" K-path verifier (the class GBV belongs to).
* [`tree_lp`][spectheory.lp.tree.tree_lp] -- the direct LP for a draft tree and its drafting scheme
  (tiny instances).
* [`coupling_bound`][spectheory.lp.coupling.coupling_bound] -- the full-knowledge coupling bound
  (closed form).
* [`multipath_lp`][spectheory.lp.multipath.multipath_lp] -- compact node-budget relaxation for K
  i.i.d. paths with lazily separated coverage constraints;
  [`optimal_multidraft_L1`][spectheory.lp.multipath.optimal_multidraft_L1] -- Hu et al.'s L = 1
  closed form.

Every result is an [`LPResult`][spectheory.lp.result.LPResult]; every ``optimum`` is in
block-efficiency units E[tau + 1]. Every float optimum comes with a closed float certificate
([`float_certificate`][spectheory.lp.sparse.SparseLP.float_certificate]), every exact one with an
exact certificate, and every optimum is checked against independent bounds before it is returned
([`spectheory.lp.trust`][spectheory.lp.trust]); what fails either is refused
([`LPError`][spectheory.lp.result.LPError],
[`UntrustedLPError`][spectheory.lp.trust.UntrustedLPError]), never printed.
"""

from .coupling import coupling_bound, coupling_lp
from .direct import direct_lp
from .multipath import multidraft_acceptance_L1, multipath_lp, optimal_multidraft_L1
from .node_budget import node_budget_lp
from .result import LPError, LPResult
from .selection import selection_lp
from .tree import tree_lp
from .trust import UntrustedLPError

__all__ = [
    "LPError",
    "LPResult",
    "UntrustedLPError",
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
