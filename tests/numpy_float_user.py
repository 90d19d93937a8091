"""User verifiers for the numpy float tests, importable as ``numpy_float_user:NAME``."""

from __future__ import annotations

import dataclasses

import torch

from spectheory.verifiers import block_verification
from spectheory.verifiers.block import BLOCK

#: Whether each call of `spy` received torch tensors.
SEEN: list = []


def spy(drafts, q, p):
    """Block verification that records the type of its inputs."""
    SEEN.append(all(isinstance(a, torch.Tensor) for a in (drafts, q, p)))
    return block_verification(drafts, q, p)


#: A spec that declares numpy floats: loaded as module:function it still receives tensors.
declared = dataclasses.replace(BLOCK, name="declared-block")
