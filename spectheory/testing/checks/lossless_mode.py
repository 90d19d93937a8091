"""``mode="lossless"`` of the sampler check: drafts drawn by the kit from the instance's draft
model; the output block followed by a target completion to length L+1 against the target law
p(y_1..y_{L+1}) (Chen et al. 2023; Leviathan et al. 2023), for any valid verifier, named or not.
"""

from __future__ import annotations

import numpy as np
from ...runtime._lazy import torch

from ...runtime.errors import SpectheoryError, TooFewSamplesError
from ...inputs.instances import Instance
from ...engine.joint import draft_rows as _rows_along
from ...engine.sampling import sample_drafts
from ...engine.seqtree import levels, path_probabilities
from ..statistics import stats
from .calls import (_cells, _chunk, _collect_law, _failed, _outputs, _pace_add, _report,
                    _sequence_label, _split)
from .report import MIN_EXPECTED

#: Largest number of output sequences V^(L+1) that ``mode="lossless"`` enumerates.
MAX_LOSSLESS_CELLS = 2**22


def _lossless_mode(sampler, how, instances, samples, alpha, seed, max_batch, proc=None):
    spec, K = how.spec, how.paths
    insts = []
    for inst in instances:
        if not isinstance(inst, Instance):
            raise SpectheoryError("mode 'lossless' needs table instances (it completes the "
                                  "output with the target); DraftRows only serve mode 'law'")
        V, L = inst.vocab_size, inst.block_length
        if V ** (L + 1) > MAX_LOSSLESS_CELLS:
            raise SpectheoryError(f"mode 'lossless' enumerates V^(L+1) = {V}^{L + 1} = "
                                  f"{V ** (L + 1):,} sequences, over the limit of "
                                  f"{MAX_LOSSLESS_CELLS:,}; use mode 'law' or a smaller instance")
        insts.append(inst.to_float())
    per = _split(samples, len(insts))
    if min(per) < 1:
        raise TooFewSamplesError(f"samples = {samples} is fewer than the {len(insts)} instances", len(insts))
    g = torch.Generator().manual_seed(seed)
    sg = torch.Generator().manual_seed(seed + 1)
    tests, worst, impossible, laws = [], None, None, []
    for inst_i, (inst, n) in enumerate(zip(insts, per)):
        V, L = inst.vocab_size, inst.block_length
        ql = levels(inst.draft, 0, L, False)
        raw = levels(inst.target, 0, L + 1, False)  # handed to the sampler
        # the target law it must meet (level i: rows after every history of length i)
        pl = raw if proc is None else [proc(x, level=i) for i, x in enumerate(raw)]
        chunk = _chunk(K, L, V, max_batch)
        obs = np.zeros(V ** (L + 1), dtype=np.int64)  # counted call by call
        done = 0
        while done < n:
            m = min(chunk, n - done)
            d = sample_drafts(inst, K, m, how.drafting, g)
            q, p = _rows_along(ql, raw, d, L, V)
            dd = d.clone()  # the kit reads the drafts after the call
            out = sampler(dd[:, 0], q[:, 0], p[:, 0], sg) if K == 1 else sampler(dd, q, p, sg)
            res, note = _outputs(out, K, m, L, V)
            if note:
                return _failed("lossless", samples, alpha, spec.name, note, len(insts))
            _pace_add(m)
            k, tau, y = res
            path = d[torch.arange(m), k]  # [m, L]
            node = torch.zeros(m, dtype=torch.long)
            seq = torch.zeros(m, L + 1, dtype=torch.long)
            for j in range(L + 1):
                drawn = torch.multinomial(pl[j][node], 1, generator=g)[:, 0]
                tok = torch.where(j < tau, path[:, min(j, L - 1)],
                                  torch.where(j == tau, y, drawn))
                seq[:, j] = tok
                node = node * V + tok
            obs += np.bincount(node.numpy(), minlength=V ** (L + 1))
            done += m
        probs = path_probabilities(pl[: L + 1], torch.ones(1, dtype=torch.float64))[L + 1]
        probs = probs.numpy()
        _collect_law(probs)
        t = stats.row_chi_square(obs, probs, n, MIN_EXPECTED)
        tests.append(t)
        laws.append(probs)

        impossible, worst = _cells(t, probs, obs, _sequence_label(inst_i, V, L),
                                   "target probability 0", impossible, worst)
    name = spec.name if K == 1 else f"{spec.name} (K = {K}, {how.drafting} drafting)"
    return _report("lossless", tests, samples, alpha, name, worst, impossible, laws)

