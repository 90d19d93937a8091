"""Verifiers: pure batched functions from a draft and the conditionals along it to a law.

Single-path verifiers have the signature ``verifier(drafts [B, L], q [B, L, V], p [B, L+1, V])
-> Law(stop [B, L+1], correction [B, L+1, V])`` (see :mod:`spectheory.law`).
"""

from __future__ import annotations

from .block import block_verification
from .lossy import uniform_product_verification
from .token import token_verification

#: Single-path verifiers by command-line name.
SINGLE_PATH = {
    "token": token_verification,
    "block": block_verification,
}

#: Known-lossy variants, kept as negative controls (not offered as real verifiers).
LOSSY_EXAMPLES = {
    "uniform-product": uniform_product_verification,
}

__all__ = [
    "SINGLE_PATH",
    "LOSSY_EXAMPLES",
    "block_verification",
    "token_verification",
    "uniform_product_verification",
]
