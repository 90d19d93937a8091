"""Verifiers: pure batched functions from a draft and the conditionals along it to a law.

Single-path verifiers have the signature ``verifier(drafts [B, L], q [B, L, V], p [B, L+1, V])
-> Law(stop [B, L+1], correction [B, L+1, V])`` (see :mod:`spectheory.law`).
"""

from __future__ import annotations

from .block import block_verification
from .gbv import gbv, gbv_mismatched_ties
from .lossy import uniform_product_verification
from .multipath_baselines import block_first, token_first
from .specinfer import specinfer, specinfer_norep
from .spectr import spectr
from .token import token_verification
from .traversal import traversal, traversal_iid, traversal_tree

#: Single-path verifiers by command-line name.
SINGLE_PATH = {
    "token": token_verification,
    "block": block_verification,
}

#: Known-lossy variants, kept as negative controls (not offered as real verifiers).
LOSSY_EXAMPLES = {
    "uniform-product": uniform_product_verification,
}

#: Multi-path verifiers by command-line name: ``f(drafts [B,K,L], q [B,K,L,V], p [B,K,L+1,V])
#: -> MultiLaw``. Each function's ``drafting`` attribute names the drafting scheme it is lossless
#: under ("iid", "norep", or "any"); see :mod:`spectheory.multipath`.
MULTI_PATH = {
    "gbv": gbv,
    "specinfer": specinfer,
    "specinfer-norep": specinfer_norep,
    "spectr": spectr,
    "traversal": traversal,
    "traversal-iid": traversal_iid,
    "traversal-tree": traversal_tree,
    "block-first": block_first,
    "token-first": token_first,
}

#: Known-lossy multi-path variants (negative controls for the multi-path checker).
LOSSY_MULTI_PATH = {
    "gbv-mismatched-ties": gbv_mismatched_ties,
}

__all__ = [
    "MULTI_PATH",
    "LOSSY_MULTI_PATH",
    "gbv",
    "gbv_mismatched_ties",
    "specinfer",
    "specinfer_norep",
    "spectr",
    "traversal",
    "traversal_iid",
    "traversal_tree",
    "block_first",
    "token_first",
    "SINGLE_PATH",
    "LOSSY_EXAMPLES",
    "block_verification",
    "token_verification",
    "uniform_product_verification",
]
