"""Verifiers: pure batched functions from drafted paths and the conditionals along them to a law.

Each verifier lives in one module with its formula and paper in the docstring, and is described
there by a [`VerifierSpec`][spectheory.registry.VerifierSpec] (paths, drafting scheme, order
invariance, exact-mode support, node form, paper). Importing this package registers them all; the
dictionaries below are views of that one registry, not lists kept by hand.

Single-path verifiers have the signature ``verifier(drafts [B, L], q [B, L, V], p [B, L+1, V])
-> Law(stop [B, L+1], correction [B, L+1, V])``; K-path ones ``verifier(drafts [B, K, L],
q [B, K, L, V], p [B, K, L+1, V]) -> Law(stop [B, K, L+1], correction [B, K, L+1, V])`` (see
[`spectheory.law`][spectheory.law]).
"""

from __future__ import annotations

from ..registry import register
from .block import BLOCK, block_verification
from .contrasts import GREEDY, LENIENT, STRICT, THRESHOLD, TYPICAL, TYPICAL_MEDUSA, TYPICAL_MEDUSA_FAST
from .cascades import CASCADES
from .ears import EARS
from .entropy_verify import ENTROPY_VERIFY
from .hsd import HSD, HSD_RELEASED, hsd, hsd_released
from .hu import HU, HU_NOREP, hu, hu_norep
from .global_resolution import GLOBAL_RESOLUTION, global_resolution
from .khisti import KHISTI, khisti
from .gbv import GBV, GBV_MISMATCHED_TIES, gbv, gbv_mismatched_ties
from .lossy import UNIFORM_PRODUCT, uniform_product_verification
from .ngram import NGRAM, ngram_verification
from .relaxed import RELAXED
from .static_ensemble import STATIC_ENSEMBLE, STATIC_ENSEMBLE_GREEDY
from .multipath_baselines import BLOCK_FIRST, TOKEN_FIRST, block_first, token_first
from .specinfer import SPECINFER, SPECINFER_NOREP, specinfer, specinfer_norep
from .spechub import SPECHUB, spechub
from .spectr import SPECTR, spectr
from .spectr_gbv import SPECTR_GBV, spectr_gbv
from .token import TOKEN, token_verification
from .topk import TOPK
from .sglang_tree import SGLANG_TREE
from .traversal import TRAVERSAL, TRAVERSAL_IID, TRAVERSAL_TREE, traversal, traversal_iid, traversal_tree



def _register_families() -> None:
    """The parametric rules by name (``additive(1/4)``; `spectheory.verifiers.params`)."""
    from . import cascades as cs, contrasts, ears, entropy_verify as ev, relaxed, \
        static_ensemble as se
    from .params import count, nonnegative, positive_unit, register_family, unit
    from ..registry import set_name_parser

    for rule, factory, params in (
            ("additive", relaxed.additive_acceptance, (unit("eps"),)),
            ("multiplicative", relaxed.multiplicative_acceptance, (unit("lam"),)),
            ("top-m", relaxed.top_m_acceptance, (count("m"),)),
            ("entropy-threshold", relaxed.entropy_threshold_acceptance, (nonnegative("beta"),)),
            ("trtllm-relaxed", relaxed.trtllm_relaxed_acceptance, (count("k"), unit("delta"))),
            ("sglang-threshold", relaxed.sglang_threshold_acceptance,
             (unit("threshold_single"), positive_unit("threshold_acc"))),
            ("cactus", relaxed.cactus_acceptance, (nonnegative("delta"),)),
            ("threshold", contrasts.threshold_verification, (unit("theta"),)),
            ("lenient", contrasts.lenient_verification, (positive_unit("lenience"),)),
            ("typical", contrasts.typical_acceptance, (unit("epsilon"), nonnegative("delta"))),
            ("static-ensemble", se.static_ensemble, (unit("w"),)),
            ("static-ensemble-greedy", se.static_ensemble_greedy, (unit("w"),)),
            ("typical-medusa", contrasts.typical_medusa, (unit("epsilon"), nonnegative("delta"))),
            ("typical-medusa-fast", lambda e, d: contrasts.typical_medusa(e, d, fast=True),
             (unit("epsilon"), nonnegative("delta"))),
            ("cascade-opt", cs.cascade_opt, (nonnegative("alpha"),)),
            ("cascade-token-v1", cs.cascade_token_v1, (unit("alpha"),)),
            ("cascade-token-v2", cs.cascade_token_v2, (nonnegative("alpha"),)),
            ("cascade-token-v3", cs.cascade_token_v3, (unit("alpha"),)),
            ("entropy-verify", ev.entropy_verify,
             (positive_unit("posterior_threshold"), nonnegative("posterior_alpha"))),
            ("ears", ears.ears, (unit("tolerance"),))):
        register_family(rule, factory, params)
    from .params import parse_name

    set_name_parser(parse_name)


#: The built-in verifiers, in the order listings show them.
BUILTIN = (TOKEN, BLOCK, NGRAM, HSD, GBV, SPECINFER, SPECINFER_NOREP, SPECTR, TRAVERSAL, TRAVERSAL_IID,
           TRAVERSAL_TREE, HU, HU_NOREP, KHISTI, GLOBAL_RESOLUTION, SPECHUB, BLOCK_FIRST,
           TOKEN_FIRST, STRICT, UNIFORM_PRODUCT, HSD_RELEASED, GBV_MISMATCHED_TIES, SPECTR_GBV,
           GREEDY, THRESHOLD, LENIENT, TYPICAL) + RELAXED + (STATIC_ENSEMBLE,
                                                         STATIC_ENSEMBLE_GREEDY) + (
    TYPICAL_MEDUSA, TYPICAL_MEDUSA_FAST) + CASCADES + (ENTROPY_VERIFY, EARS)
for _spec in BUILTIN:
    register(_spec)
_register_families()
register(TOPK, listed=False)  # the draft-tree engine's rule for top-k trees, not listed
register(SGLANG_TREE, listed=False)  # SGLang's tree kernel rule, a rule of draft trees too

#: Views of the registry (name -> spec; a spec is callable like its function).
SINGLE_PATH = {s.name: s for s in BUILTIN if s.lossless and s.single_path}
MULTI_PATH = {s.name: s for s in BUILTIN if s.lossless and not s.single_path}
#: Known-lossy negative controls (never offered as real verifiers).
LOSSY_EXAMPLES = {s.name: s for s in BUILTIN if not s.lossless and s.single_path}
LOSSY_MULTI_PATH = {s.name: s for s in BUILTIN if not s.lossless and not s.single_path}

__all__ = [
    "BUILTIN",
    "NGRAM",
    "MULTI_PATH",
    "LOSSY_MULTI_PATH",
    "gbv",
    "global_resolution",
    "hu",
    "hu_norep",
    "khisti",
    "gbv_mismatched_ties",
    "specinfer",
    "specinfer_norep",
    "spechub",
    "hsd",
    "hsd_released",
    "spectr_gbv",
    "spectr",
    "traversal",
    "traversal_iid",
    "traversal_tree",
    "block_first",
    "token_first",
    "SINGLE_PATH",
    "LOSSY_EXAMPLES",
    "block_verification",
    "ngram_verification",
    "token_verification",
    "uniform_product_verification",
]
