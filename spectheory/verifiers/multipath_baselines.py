"""Naive multi-path baselines: a single-path verifier applied to the first drafted path only.

``block-first``: block verification (Sun et al., arXiv 2403.10444) of X_1; ``token-first``: token
verification (Leviathan et al. 2023) of X_1. The other K - 1 paths are ignored, so the law is the
single-path law on path 1 (P(k = 1) = 1). Under both drafting schemes path 1 is a plain q-path, so
both are lossless under either; they are the K = 1 reference every multi-path method should beat.
Their specs declare ``paths_read=1``: the exact engine enumerates path 1 alone (V**L outcomes).
"""

from __future__ import annotations

from ..runtime import backend as B
from ..law import MultiLaw, empty_law
from ..registry import VerifierSpec
from ..runtime.errors import check_arrays
from .block import block_verification
from .token import token_verification


def on_first_path(single_path_verifier, drafts, q, p) -> MultiLaw:
    """Run ``single_path_verifier`` on path 1 and return the multi-path law (the ids of every
    path checked, `check_arrays`)."""
    check_arrays(drafts, q, p, paths=True)
    if drafts.shape[0] == 0:
        return empty_law(p)
    Bsz, K, L = drafts.shape
    law = single_path_verifier(drafts[:, 0], q[:, 0], p[:, 0])
    first = B.expand_dims(B.expand_dims(B.arange(K, drafts) == 0, 0), -1)  # [1, K, 1]
    stop = B.where(first, B.expand_dims(law.stop, 1), B.zeros_like(B.expand_dims(law.stop, 1)))
    corr = B.broadcast_to(B.expand_dims(law.correction, 1), (Bsz, K, L + 1, q.shape[-1]))
    return MultiLaw(stop, corr)


def block_first(drafts, q, p) -> MultiLaw:
    """Block verification of the first path."""
    return on_first_path(block_verification, drafts, q, p)


def token_first(drafts, q, p) -> MultiLaw:
    """Token verification of the first path."""
    return on_first_path(token_verification, drafts, q, p)


BLOCK_FIRST = VerifierSpec(
    "block-first", block_first, paths=None, drafting="any",
    paper="baseline", summary="block verification of the first path (others ignored)",
    paths_read=1)
TOKEN_FIRST = VerifierSpec(
    "token-first", token_first, paths=None, drafting="any",
    paper="baseline", summary="token verification of the first path (others ignored)",
    paths_read=1)
