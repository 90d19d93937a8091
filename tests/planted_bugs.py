"""Verifiers with planted bugs, for the checker's and the battery's tests.

Each function has the law signature of :mod:`spectheory.law` (single path unless named
``*_multi``) and is importable as ``planted_bugs:NAME`` (the test directory is on the path), so
the command line can be pointed at it with ``--verifier planted_bugs:NAME``.
"""

from __future__ import annotations

import numpy as np
import torch

from spectheory.runtime import backend as B
from spectheory.law import Law
from spectheory.registry import verifier
from spectheory.verifiers import MULTI_PATH, block_verification, token_verification
from spectheory.verifiers.block import block_weights
from spectheory.verifiers.common import (residual_corrections, residuals,
                                         stop_from_acceptance_weights)


def off_by_one_token(drafts, q, p):
    """Token verification that accepts X_i with p(.|X^i) instead of p(.|X^{i-1}) (and takes its
    residual from the same wrong row): the target rows are read one position late."""
    L = drafts.shape[-1]
    late = B.concat([p[:, 1:], p[:, L:]], axis=1)  # row i+1 at position i; the bonus row kept
    return token_verification(drafts, q, late)


def block_residual_mass_previous_rows(drafts, q, p):
    """Block verification whose residual mass S_i (in h_i = S_i / (S_i + 1 - w_i)) is computed
    from the rows at position i-1 instead of i; corrections are right."""
    L = drafts.shape[-1]
    w = block_weights(drafts, q, p)
    res = residuals(w[:, :L], q, p)
    p_prev = B.concat([p[:, :1], p[:, :L]], axis=1)
    q_prev = B.concat([q[:, :1], q[:, : L - 1]], axis=1)
    S = B.sum(residuals(w[:, :L], q_prev, p_prev), axis=-1)
    h_mid = B.safe_div(S, S + (1 - w[:, :L]), B.scalar(S, 1))
    h = B.concat([B.ones_like(S[:, :1]), h_mid[:, 1:], w[:, L:]], axis=1)
    return Law(stop_from_acceptance_weights(h), residual_corrections(res, p))


@verifier(exact=False, lossless=False)
def softmax_residual(drafts, q, p):
    """Token verification whose correction is softmax(max(p - q, 0)) instead of the normalised
    residual (float only: a softmax has no exact rational form)."""
    stop, corr = token_verification(drafts, q, p)
    L = drafts.shape[-1]
    res = torch.clamp(p[:, :L] - q, min=0.0)
    return Law(stop, torch.cat([torch.softmax(res, dim=-1), corr[:, L:]], dim=1))


def _move_stop_mass(stop, eps):
    """Move ``eps`` of stop mass on every row from its most likely tau to tau = L (or to tau = 0
    when the most likely is L): rows stay normalised and non-negative."""
    s = stop.clone()
    L = s.shape[-1] - 1
    src = torch.argmax(s, dim=-1)
    dst = torch.where(src == L, torch.zeros_like(src), torch.full_like(src, L))
    rows = torch.arange(s.shape[0])
    s[rows, src] -= eps
    s[rows, dst] += eps
    return s


def biased_block(eps: float):
    """Block verification with an acceptance bias of ``eps`` on every draft (float only)."""

    @verifier(exact=False, lossless=False, name=f"block+bias{eps:g}")
    def f(drafts, q, p):
        stop, corr = block_verification(drafts, q, p)
        return Law(_move_stop_mass(stop, eps), corr)

    return f


def nan_law(drafts, q, p):
    """Block verification with NaN as P(tau = 1) on every draft."""
    stop, corr = block_verification(drafts, q, p)
    stop = stop.clone() if isinstance(stop, torch.Tensor) else stop.copy()
    stop[:, 1] = float("nan")
    return Law(stop, corr)


def context_switch(drafts, q, p):
    """Block verification when the context row has p(0|c) >= 1/2, the off-by-one token rule
    otherwise: lossless in the first block from a context with p(0|c) >= 1/2, lossy later."""
    good = block_verification(drafts, q, p)
    bad = off_by_one_token(drafts, q, p)
    keep = p[:, 0, 0] >= B.scalar(p, 1) / 2
    if isinstance(keep, np.ndarray):
        keep = keep.astype(bool)
    k1 = B.expand_dims(keep, 1)
    return Law(B.where(k1, good.stop, bad.stop),
               B.where(B.expand_dims(k1, 2), good.correction, bad.correction))


def specinfer_multi(drafts, q, p):
    """The lossless K-path SpecInfer law (a base for corrupted K-path laws)."""
    return MULTI_PATH["specinfer"](drafts, q, p)


def _hu_reject_into_p(q, p, m, scheme):
    """Hu's transport plan whose rejection law is the whole target row p instead of the
    unmatched part of p."""
    from spectheory.verifiers.coupling import NodePlan
    from spectheory.verifiers.hu import hu_plan

    plan = hu_plan(q, p, m, scheme)
    return NodePlan(plan.accept, plan.reject, list(p), plan.stats)


@verifier(paths=None, drafting="iid", lossless=False)
def hu_reject_into_p_multi(drafts, q, p):
    """Planted bug: the optimal-transport rule at each node rejects into p itself, so tokens
    already covered by the accepted mass are emitted twice."""
    from spectheory.verifiers.coupling import plan_rule
    from spectheory.verifiers.specinfer import node_recursive_law

    return node_recursive_law(drafts, q, p, plan_rule(_hu_reject_into_p, "iid", "hu-bug"))
