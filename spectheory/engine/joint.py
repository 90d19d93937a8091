"""Exact analysis of multi-path verifiers: drafting schemes, joint enumeration, checker.

Drafting schemes for K paths of length L below a context c (`DRAFTING`):

* ``iid``: the K paths are i.i.d. draft sequences (with replacement; repeats allowed). The joint
  draft outcome (X_1..X_K) has probability prod_k q(X_k).
* ``norep``: sampling without replacement at the root (Jeon et al., arXiv 2402.14160; an RSD-C
  tree with branching (K, 1, ..., 1)). Path k's first token is drawn from q(.|c) restricted to the
  tokens not used by paths 1..k-1 (renormalised), the rest of the path autoregressively from q. If
  q(.|c) has only m < K tokens of positive probability, paths m+1..K repeat path 1 (they add no
  draft). P(X_1..X_K) = prod_{k<=m} q(X_{k,1}|c) / (1 - sum_{j<k} q(X_{j,1}|c))
  * prod_{i>1} q(X_{k,i}|X_k^{i-1}), and zero unless the first tokens are distinct.
* ``hub``: SpecHub's drafting (Sun et al., arXiv 2411.05289), K <= 2 (larger K is refused,
  `spectheory.registry.DRAFTING_MAX_PATHS`). With a = argmax q(.|c) (ties: the smallest token id,
  [`hub_tokens`][spectheory.registry.hub_tokens]), path 1's first token is X_1 ~ q(.|c);
  path 2's is a if X_1 != a, else a draw from q(.|c) without a, renormalised; the rest of each path
  autoregressively from q, as under ``norep``. So P(first tokens (i, a)) = q(i|c) and P((a, i)) =
  q(a|c) q(i|c) / (1 - q(a|c)) for i != a, zero on other pairs, times prod_{i>1}
  q(X_{k,i}|X_k^{i-1}) for each path. If q(.|c) has one token of positive probability, path 2
  repeats path 1 (as the surplus paths of ``norep``). K = 1 is plain drafting.

The exact engine enumerates all V**(L K) joint outcomes (in chunks, float64 torch or numpy
Fractions), evaluates the verifier's [`MultiLaw`][spectheory.law.Law] on each, and accumulates the
tau pmf and the law of the emitted block, E_{i+1}(y^{i+1}) = sum_outcomes P(outcome) sum_k P(k,
tau = i | outcome) correction_{k,i}(y_{i+1}) [X_k^i = y^i]; the output law (block then target
sampling up to L+1 tokens), its TV to the target and the checker are then the single-path ones of
[`spectheory.engine.analysis`][spectheory.engine.analysis]. Outcomes of probability zero are skipped before the
verifier is evaluated; order-invariant verifiers under i.i.d. drafting are evaluated on sorted
tuples only; verifiers that read only their first m paths (``paths_read``, the first-path
baselines) on the V**(L m) outcomes of those paths, whose law is the marginal of the K-path
scheme.

GBV also has a fast exact route, its default in [`analyze`][spectheory.engine.analysis.analyze]
(``route= "analytic"``): its selected path has the autoregressive law q^G, so its analysis is block
verification with the draft replaced by the skewed model
([`gbv_skewed_draft`][spectheory.verifiers.gbv.gbv_skewed_draft]), evaluated per node of the sequence
tree, ~V**L work instead of V**(L K). ``route="enumerate"`` runs the joint enumeration; the tests
check the two routes agree exactly.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from ..runtime._lazy import torch

from ..runtime import backend as Bk
from ..runtime.errors import SpectheoryError
from ..runtime.limits import shown as _repr_cut
from ..law import ROW_SUM_TOL, note_rounding, rows_follow_prefixes, validate_law
from ..registry import DRAFTING, Plan, check_drafting_paths, get_verifier, hub_tokens
from .perdraft import BlockLaw
from .seqtree import path_probabilities, sequence_tokens

#: Joint outcomes per chunk in exact rational mode.
EXACT_CHUNK = 2048
#: Elements of one [n, K, L+1, V] array per chunk in float mode: 2^18 (2 MiB) keeps a chunk's
#: working set in cache, 1.6x faster than 2^22 for GBV on V = 4, L = 3, K = 3.
CHUNK_ELEMENTS = 2**18


def use_symmetry(how: Plan, symmetric: bool | None = None) -> bool:
    """Whether the joint-outcome route enumerates sorted tuples: by default for i.i.d. drafting
    and an order-invariant verifier."""
    if symmetric is None:
        return how.drafting == "iid" and how.spec.order_invariant
    return bool(symmetric)


def _check_args(paths, drafting):
    if isinstance(paths, bool) or not isinstance(paths, int) or paths < 1:
        raise SpectheoryError(f"paths = {_repr_cut(paths, 40)} must be a positive integer")
    if drafting not in DRAFTING:
        raise SpectheoryError(f"unknown drafting scheme {drafting!r}; choose from "
                              f"{', '.join(DRAFTING)}")
    check_drafting_paths(drafting, paths)


def draft_rows(q_levels, p_levels, drafts, L: int, V: int):
    """Conditionals along every drafted path: q [B,K,L,V], p [B,K,L+1,V] for drafts [B,K,L]
    (levels below one context, as from [`levels`][spectheory.engine.seqtree.levels] with start 0)."""
    node = Bk.zeros_like(drafts[:, :, 0])
    qs, ps = [], []
    for i in range(L + 1):
        ps.append(p_levels[i][node])
        if i < L:
            qs.append(q_levels[i][node])
            node = node * V + drafts[:, :, i]
    return Bk.stack(qs, axis=2), Bk.stack(ps, axis=2)


def _norep_weight(seq, q_root, tail, L: int, V: int):
    """Probability of joint outcomes ``seq`` [B, K] (path sequence indices) under ``norep``."""
    Bsz, K = seq.shape
    first = seq // V ** (L - 1)
    m = int(Bk.sum(Bk.to_int(q_root > 0), axis=0))
    weight = Bk.full((Bsz,), 1, q_root)
    used = Bk.zeros_like(Bk.broadcast_to(Bk.expand_dims(q_root, 0), (Bsz, V)))
    for k in range(K):
        if k < m:
            onehot = Bk.one_hot(first[:, k], V, q_root)
            left = Bk.sum(Bk.expand_dims(q_root, 0) * (1 - used), axis=-1)
            fresh = 1 - Bk.sum(used * onehot, axis=-1)
            # q(x) / left before the tail: (5e-324 x 0.5) / 5e-324 underflowed to 0, and with
            # it every outcome of a K = V draw (an all-zero law, TV 0.5)
            prob = q_root[first[:, k]] * fresh
            weight = weight * Bk.safe_div(prob, left, Bk.scalar(left, 0)) * tail[seq[:, k]]
            used = Bk.maximum(used, onehot)
        else:
            same = seq[:, k] == seq[:, 0]
            weight = Bk.where(same, weight, Bk.zeros_like(weight))
    return weight


def _hub_weight(seq, q_root, tail, L: int, V: int):
    """Probability of joint outcomes ``seq`` [B, K] (path sequence indices, K <= 2) under
    ``hub`` (module doc)."""
    Bsz, K = seq.shape
    first = seq // V ** (L - 1)
    weight = q_root[first[:, 0]] * tail[seq[:, 0]]  # path 1: a plain draft path
    if K == 1:
        return weight
    check_drafting_paths("hub", K)
    zero = Bk.zeros_like(weight)
    if int(Bk.sum(Bk.to_int(q_root > 0), axis=0)) == 1:  # no companion: path 2 repeats path 1
        return Bk.where(seq[:, 1] == seq[:, 0], weight, zero)
    a = int(hub_tokens(q_root))
    f0, f1 = first[:, 0], first[:, 1]
    rest = Bk.others_mass(q_root)[a]  # 1 - q(a), without the cancellation near q(a) = 1
    companion = Bk.safe_div(q_root[f1], Bk.full((Bsz,), 1, q_root) * rest, zero)
    second = Bk.where(f0 == a, Bk.where(f1 == a, zero, companion),
                      Bk.where(f1 == a, Bk.ones_like(weight), zero))
    return weight * second * tail[seq[:, 1]]


def draft_weight(seq, drafting: str, qpath, q_root, tail, L: int, V: int):
    """Probability of joint outcomes ``seq`` [B, K] (path sequence indices) under a drafting
    scheme: ``qpath`` [V**L] the draft's path probabilities, ``q_root`` [V] its root row,
    ``tail`` [V**L] the probability of each path's tokens after the first."""
    if drafting == "iid":
        weight = qpath[seq[:, 0]]
        for k in range(1, seq.shape[1]):
            weight = weight * qpath[seq[:, k]]
        return weight
    if drafting == "hub":
        return _hub_weight(seq, q_root, tail, L, V)
    return _norep_weight(seq, q_root, tail, L, V)


def _arange(f0: int, n: int, exact: bool, like):
    if exact:
        return np.arange(f0, f0 + n, dtype=np.int64)
    return torch.arange(f0, f0 + n, device=like.device)


def sorted_tuples(n_items: int, K: int) -> np.ndarray:
    """All sorted K-tuples s_1 <= ... <= s_K of range(n_items), [C(n+K-1, K), K] int64, in
    lexicographic order."""
    flat = np.fromiter(itertools.chain.from_iterable(
        itertools.combinations_with_replacement(range(n_items), K)), dtype=np.int64)
    return flat.reshape(-1, K)


def _multiplicity(tuples: np.ndarray) -> np.ndarray:
    """Number of distinct orderings K! / prod(run lengths!) of each sorted tuple [n, K]."""
    n, K = tuples.shape
    mult = np.full(n, math.factorial(K), dtype=np.int64)
    run = np.ones(n, dtype=np.int64)
    for k in range(1, K):
        run = np.where(tuples[:, k] == tuples[:, k - 1], run + 1, 1)
        mult //= run
    return mult


def outcome_count(V: int, L: int, K: int, symmetric: bool) -> int:
    """Joint outcomes the engine visits: V**(L K), or C(V**L + K - 1, K) sorted tuples."""
    return math.comb(V**L + K - 1, K) if symmetric else V ** (L * K)


def path_tables(q_levels, p_levels, L: int, V: int):
    """Per-path tables indexed by a path's sequence index s in range(V**L): tokens [V**L, L],
    draft rows q [V**L, L, V], target rows p [V**L, L+1, V] along the path, and the flat index
    [V**L, L+1] of its depth-i node among the sum_i V**i nodes of depths 0..L (depth i at offset
    sum_{j<i} V**j). The engine gathers a chunk's drafts and rows from them in one index each."""
    like = p_levels[0]
    s = _arange(0, V**L, Bk.is_exact(like), like)
    node = [s // V ** (L - i) for i in range(L + 1)]
    q = Bk.stack([q_levels[i][node[i]] for i in range(L)], axis=1)
    p = Bk.stack([p_levels[i][node[i]] for i in range(L + 1)], axis=1)
    offsets = [(V**i - 1) // (V - 1) if V > 1 else i for i in range(L + 1)]
    flat = Bk.stack([node[i] + offsets[i] for i in range(L + 1)], axis=1)
    return sequence_tokens(s, L, V), q, p, flat


def _law_ok(law, n: int, K: int, L: int, V: int, tol: float) -> bool:
    """A cheap sufficient test, on torch float laws, that
    [`validate_law`][spectheory.law.validate_law] would accept ``law`` with tolerance ``tol``: every
    entry >= 0 (false for NaN) and every stop table and correction row summing to 1 within
    ``tol / 2`` (false for an infinite entry: its sum is inf or NaN; half the tolerance covers the
    rounding between this summation order and the validator's, a few ulps). Anything else (a failing
    law, another type) returns False and goes to [`validate_law`][spectheory.law.validate_law],
    which names the problem; so no law is accepted that it would refuse."""
    try:
        stop, corr = law
    except (TypeError, ValueError):
        return False
    if not (torch.is_tensor(stop) and torch.is_tensor(corr)) or \
            not (stop.is_floating_point() and corr.is_floating_point()) or \
            tuple(stop.shape) != (n, K, L + 1) or tuple(corr.shape) != (n, K, L + 1, V):
        return False
    if n == 0:
        return True
    ok = (stop.amin() >= 0) & (corr.amin() >= 0)
    ok &= (stop.sum(dim=(1, 2)) - 1).abs_().amax() <= tol / 2
    # row sums as one matrix-vector product: ~3x faster than sum(dim=3) for a short row
    rows = corr.reshape(-1, V) @ torch.ones(V, dtype=corr.dtype, device=corr.device)
    ok &= (rows - 1).abs_().amax() <= tol / 2
    return bool(ok)


#: K-path outcomes on which a ``paths_read`` declaration is checked before it is relied on.
PATHS_READ_SAMPLE = 64


def _check_paths_read(spec, m: int, K: int, tables, weight_of, exact: bool, tol: float = 1e-12):
    """Check ``spec.paths_read = m`` on a sample of K-path outcomes of positive probability: the
    law must put no stop mass on paths m+1..K and agree, on paths 1..m, with the verifier's law
    on the first m paths (exactly in rationals, to ``tol`` in float). A verifier that reads the
    other paths is refused rather than analysed on the wrong outcomes."""
    tok_tab, q_tab, p_tab, _ = tables
    n_paths = int(tok_tab.shape[0])
    like = p_tab
    s = _arange(0, min(n_paths, PATHS_READ_SAMPLE), exact, like)
    seq = Bk.stack([(s * (2 * k + 1) + 7 * k) % n_paths for k in range(K)], axis=1)
    keep = weight_of(seq) != 0
    seq = seq[keep]
    n = int(seq.shape[0])
    if n == 0:
        return
    L, V = int(tok_tab.shape[1]), int(q_tab.shape[-1])
    full = validate_law(spec.law(tok_tab[seq], q_tab[seq], p_tab[seq]), n, K, L, V, exact,
                        name=spec.name)
    sub = seq[:, :m]
    part = validate_law(spec.law(tok_tab[sub], q_tab[sub], p_tab[sub]), n, m, L, V, exact,
                        name=spec.name)
    diffs = [Bk.abs(full.stop[:, m:]), Bk.abs(full.stop[:, :m] - part.stop),
             Bk.abs(full.correction[:, :m] - part.correction)]
    worst = max(float(d.max()) if int(np.prod(d.shape)) else 0.0 for d in diffs)
    if (worst != 0) if exact else (worst > tol):
        raise SpectheoryError(
            f"verifier {spec.name!r} declares paths_read={m}, but its law on {K} paths differs "
            f"from its law on the first {m} (by {worst:.3g}): it reads or stops on the other "
            f"paths; drop the declaration")


#: K-path outcomes on which an ``order_invariant`` declaration is checked before the sorted
#: enumeration relies on it.
ORDER_SAMPLE = 64


def _emitted_on(spec, seq, tables, exact: bool):
    """The emitted law of each of the outcomes ``seq`` [n, K] (path indices) as keys
    ``(i, node, token)`` flattened and their masses, numpy arrays (object in exact mode)."""
    tok_tab, q_tab, p_tab, node_tab = tables
    drafts, q, p, nodes = (_rows(t, seq) for t in tables)
    n, K = int(seq.shape[0]), int(seq.shape[1])
    L, V = int(tok_tab.shape[1]), int(q_tab.shape[-1])
    with rows_follow_prefixes(drafts, q, p):
        law = validate_law(spec.law(drafts, q, p), n, K, L, V, exact, drafts, name=spec.name)
    mass = Bk.mul(Bk.expand_dims(law.stop, 3), law.correction)  # [n, K, L+1, V]
    mass = np.asarray(mass.cpu().numpy() if Bk.is_torch(mass) else mass)
    nodes = np.asarray(nodes.cpu().numpy() if Bk.is_torch(nodes) else nodes, dtype=np.int64)
    n_nodes = int(np.asarray(node_tab[-1, -1])) + 1
    row = np.arange(n, dtype=np.int64).reshape(n, 1, 1)
    keys = ((row * n_nodes + nodes)[..., None] * V + np.arange(V, dtype=np.int64))
    return keys.reshape(-1), mass.reshape(-1)


def _check_order_invariant(spec, K: int, tables, weight_of, exact: bool, tol: float = 1e-12,
                           forced: bool = False):
    """Check ``spec.order_invariant`` on a sample of K-path outcomes of positive probability: the
    law over emitted sequences must not change when the paths are handed over rotated by one or
    with the first two swapped (the two permutations generate every order). The sorted
    enumeration counts each multiset of paths once, so a verifier that reads the paths' order
    would get a wrong law (a LOSSY verdict for a lossless rule, or the converse) rather than be
    refused. ``forced``: the caller asked for the sorted enumeration (``symmetric=True``) of a
    verifier that need not declare it; the same sample decides, and the refusal says so."""
    if K < 2:
        return
    tok_tab = tables[0]
    n_paths = int(tok_tab.shape[0])
    s = _arange(0, min(n_paths, ORDER_SAMPLE), exact, tables[2])
    seq = Bk.stack([(s * (2 * k + 1) + 7 * k) % n_paths for k in range(K)], axis=1)
    seq = seq[weight_of(seq) != 0]
    if int(seq.shape[0]) == 0:
        return
    keys, mass = _emitted_on(spec, seq, tables, exact)
    for order in (list(range(1, K)) + [0], [1, 0] + list(range(2, K))):
        other_keys, other = _emitted_on(spec, seq[:, order], tables, exact)
        every, where = np.unique(np.concatenate([keys, other_keys]), return_inverse=True)
        diff = np.zeros(len(every), dtype=object if exact else np.float64)
        np.add.at(diff, where, np.concatenate([mass, -other]))
        worst = max((abs(v) for v in diff), default=0)
        if (worst != 0) if exact else (float(worst) > tol):
            said = "symmetric=True was asked for" if forced else \
                "it declares order_invariant=True"
            raise SpectheoryError(
                f"verifier {spec.name!r}: {said}, but its law over emitted sequences changes "
                f"with the order of the {K} paths (by {float(worst):.3g}): the sorted "
                "enumeration would count its outcomes wrongly; "
                + ("leave symmetric unset (or False)" if forced else "drop the declaration"))


def _rows(table, seq):
    """table[seq] for a table [N, ...] and indices seq [n, K] -> [n, K, ...] (on torch one
    index_select of the flattened indices, cheaper than advanced indexing)."""
    if not Bk.is_torch(table):
        return table[seq]
    n, K = seq.shape
    return table.index_select(0, seq.reshape(-1)).reshape((n, K) + tuple(table.shape[1:]))


def _scaled_progress(progress, full_total: int, total: int):
    """A progress callback counting ``total`` visited outcomes as ``full_total`` joint ones."""
    state = [0, 0]  # visited, reported

    def update(n: int) -> None:
        state[0] += n
        upto = full_total * state[0] // total
        progress(upto - state[1])
        state[1] = upto

    return update


def multipath_block_law(verifier, q_levels, p_levels, V: int, L: int, K: int,
                        drafting: str = "iid", progress=None, symmetric: bool | None = None
                        ) -> BlockLaw:
    """Exact tau pmf and emitted-block law (one context) of a K-path verifier (module doc).

    ``symmetric`` (default: i.i.d. drafting and a verifier with ``order_invariant = True``, i.e.
    whose law over output sequences depends only on the multiset of paths) enumerates sorted
    tuples of paths weighted by their number of orderings: C(V**L + K - 1, K) instead of
    V**(L K) outcomes, the same result.

    A chunk of n joint outcomes is n rows of K path indices; its drafts [n, K, L] and rows q [n, K,
    L, V], p [n, K, L+1, V] are gathered from [`path_tables`][spectheory.engine.joint.path_tables], its
    law validated ([`validate_law`][spectheory.law.validate_law]; on torch first the cheap
    sufficient test `_law_ok`), and its weighted corrections added to all L+1 levels of the emitted
    law in one ``index_add``. The verifier is called inside
    [`rows_follow_prefixes`][spectheory.law.rows_follow_prefixes] (these arrays' rows
    are functions of the drafted prefix: a verifier handed exactly them need not compare repeated
    node inputs' rows). A verifier declaring ``paths_read = m < K`` is enumerated on m paths
    (checked first on a sample, `_check_paths_read`); progress is still counted in joint outcomes of
    K paths.
    """
    spec = get_verifier(verifier)
    _check_args(int(K), drafting)
    exact = Bk.is_exact(p_levels[0])
    like = p_levels[0]
    declared = symmetric is None  # sorted tuples on the spec's word: checked below
    symmetric = use_symmetry(Plan(spec, K, drafting), symmetric)
    if symmetric and drafting != "iid":
        raise SpectheoryError("symmetric enumeration needs i.i.d. drafting")
    one = Bk.full((1,), 1, like)
    qpath = path_probabilities(q_levels, one)[L]  # [V**L]
    q_root = q_levels[0][0]
    tail = path_probabilities(q_levels[1:], Bk.full((V,), 1, like))[L - 1]  # [V**L]
    tok_tab, q_tab, p_tab, node_tab = path_tables(q_levels, p_levels, L, V)

    def weight_of(seq):
        return draft_weight(seq, drafting, qpath, q_root, tail, L, V)

    if symmetric:  # declared, or asked for (symmetric=True): checked on a sample either way
        _check_order_invariant(spec, K, (tok_tab, q_tab, p_tab, node_tab), weight_of, exact,
                               forced=not spec.order_invariant)
    if spec.paths_read is not None and spec.paths_read < K:  # enumerate the paths it reads
        _check_paths_read(spec, spec.paths_read, K, (tok_tab, q_tab, p_tab, node_tab),
                          weight_of, exact)
        full_total = outcome_count(V, L, K, symmetric)
        K = spec.paths_read
        if progress is not None:  # report in joint outcomes of all K paths, as announced
            progress = _scaled_progress(progress, full_total, outcome_count(V, L, K, symmetric))
    total = outcome_count(V, L, K, symmetric)
    per = K * (L + 1) * V
    chunk = EXACT_CHUNK if exact else max(1, CHUNK_ELEMENTS // per)
    chunk = min(chunk, total)
    tuples = sorted_tuples(V**L, K) if symmetric else None
    tau_pmf = Bk.full((1, L + 1), 0, like)
    n_nodes = int(node_tab[-1, -1]) + 1  # sum_{i<=L} V**i
    emitted = Bk.full((n_nodes, V), 0, like)
    base = _arange(0, K, exact, like)
    shifts = (V**L) ** Bk.flip(base, 0).reshape(1, K)
    for f0 in range(0, total, chunk):
        n = min(chunk, total - f0)
        if symmetric:
            block = tuples[f0:f0 + n]
            mult = _multiplicity(block)
            if exact:
                seq, weight = block, Bk.to_exact(mult)
            else:
                seq = torch.as_tensor(block, device=like.device)
                weight = torch.as_tensor(mult, dtype=like.dtype, device=like.device)
        else:
            seq = _arange(f0, n, exact, like).reshape(n, 1) // shifts % V**L
            weight = None
        if drafting == "iid":
            for k in range(K):
                weight = qpath[seq[:, k]] if weight is None else weight * qpath[seq[:, k]]
        else:
            weight = draft_weight(seq, drafting, qpath, q_root, tail, L, V)
        keep = weight != 0  # outcomes of probability zero contribute nothing: skip them
        if not bool(keep.all()):
            seq, weight = seq[keep], weight[keep]
            n = int(seq.shape[0])
            if n == 0:
                if progress is not None:
                    progress(int(keep.shape[0]))
                continue
        drafts, q, p, nodes = (_rows(t, seq) for t in (tok_tab, q_tab, p_tab, node_tab))
        with rows_follow_prefixes(drafts, q, p):  # gathered from the per-path tables above
            law = spec.law(drafts, q, p)
        if exact or not _law_ok(law, n, K, L, V, ROW_SUM_TOL):
            law = validate_law(law, n, K, L, V, exact, drafts, name=spec.name)
        else:  # accepted by the cheap test: its dtype is noted as validate_law would
            note_rounding(law[0], law[1])
        wstop = Bk.mul(Bk.expand_dims(Bk.expand_dims(weight, 1), 2), law.stop)  # [n, K, L+1]
        tau_pmf[0] = tau_pmf[0] + Bk.sum(Bk.sum(wstop, axis=1), axis=0)
        Bk.index_add_weighted(emitted, nodes.reshape(-1), wstop.reshape(-1),
                              law.correction.reshape(-1, V))  # [n K (L+1), V]
        if progress is not None:
            progress(int(keep.shape[0]))
    offsets = [(V**i - 1) // (V - 1) if V > 1 else i for i in range(L + 2)]
    return BlockLaw(tau_pmf, [None] + [emitted[offsets[i]:offsets[i + 1]].reshape(-1)
                                       for i in range(L + 1)])


__all__ = [
    "DRAFTING",
    "draft_rows",
    "draft_weight",
    "multipath_block_law",
    "outcome_count",
    "sorted_tuples",
    "use_symmetry",
]
