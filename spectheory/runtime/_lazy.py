"""Torch, imported on first use.

The foundation modules ([`spectheory.runtime.backend`][spectheory.runtime.backend],
[`spectheory.inputs.models`][spectheory.inputs.models], [`spectheory.engine.seqtree`][spectheory.engine.seqtree],
[`spectheory.law`][spectheory.law], [`spectheory.engine.analysis`][spectheory.engine.analysis]) only touch torch when
they are handed a tensor or asked for one, so instances, their JSON format, size guards, the LPs
(numpy and scipy) and the exact engine's numpy routes (Fractions, and float64 where
[`float_backend`][spectheory.engine.plan.float_backend] picks numpy) work without loading torch,
and the command line starts in a fraction of the ~1 s that importing torch takes. They bind ``torch`` to `torch` below, a stand-in that imports the real
module on the first attribute access.
"""

from __future__ import annotations

import importlib
import sys


class LazyModule:
    """A module imported on first attribute access (``importlib.import_module(name)``)."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str):
        module = sys.modules.get(self._name)
        if module is None:
            module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"


#: torch, imported when first used.
torch = LazyModule("torch")


def is_tensor(x) -> bool:
    """``isinstance(x, torch.Tensor)`` without importing torch (no tensor exists before it is)."""
    module = sys.modules.get("torch")
    return module is not None and isinstance(x, module.Tensor)
