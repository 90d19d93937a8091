"""Cross-check of token verification against a peer implementation: Hugging Face transformers'
own speculative sampling routine ``transformers.generation.utils._speculative_sampling``
(Leviathan et al. 2023, algorithm 1), on identical inputs with identical random draws.

The peer routine takes logits and draws, from torch's global generator, first L uniforms
``r = torch.rand_like(ratio)`` (accept X_i iff r_i <= p_i / q_i, stop at the first rejection) and
then one ``torch.multinomial`` draw from the normalised residual max(p - q, 0) (or from p(.|X^L)
when all L are accepted). We feed it logits log q and log p of the same (processed) probabilities,
reseed the global generator, draw the same L uniforms ourselves, and decide with OUR law
([`token_verification`][spectheory.verifiers.token.token_verification]): the acceptance probability
of X_i is a_i = P(tau >= i | X) / P(tau >= i-1 | X) from the law's ``stop``, and the next token is
one ``torch.multinomial`` draw from the law's ``correction[tau]`` with the generator in the same
state. The accepted count must match every time; the emitted token matches unless the two rows
differ by float rounding exactly at a draw boundary, and the rows themselves must agree.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import torch

from spectheory.verifiers import token_verification

from ..atomic import write_json
from ..checks import check_int, check_seed
from ..decoding import SamplingConfig, SpeculativeDecoder
from ..hf_models import ModelSpec
from .config import check_out_file, stderr_log


def peer_routine():
    try:
        from transformers.generation.utils import _speculative_sampling
    except ImportError as exc:  # pragma: no cover - depends on the installed transformers
        from spectheory.runtime.errors import SpectheoryError
        raise SpectheoryError(f"transformers has no _speculative_sampling: {exc}") from None
    return _speculative_sampling


def compare_one(drafts: torch.Tensor, q: torch.Tensor, p: torch.Tensor, seed: int) -> dict:
    """drafts [L], q [L, V], p [L+1, V] (probabilities). Returns both decisions."""
    L = drafts.shape[0]
    spec = peer_routine()
    with torch.no_grad():
        cand_ids = drafts.view(1, L)
        torch.manual_seed(seed)
        tokens, n_hf = spec(cand_ids, torch.log(q).unsqueeze(0), L, torch.log(p).unsqueeze(0))
        n_hf = int(n_hf)
        y_hf = int(tokens[0, -1])
        law = token_verification(drafts.view(1, L), q.unsqueeze(0), p.unsqueeze(0))
        reach = 1 - torch.cumsum(law.stop[0], 0) + law.stop[0]  # P(tau >= i), i = 0..L
        a = torch.where(reach[:-1] > 0, reach[1:] / reach[:-1].clamp(min=1e-300),
                        torch.zeros_like(reach[1:]))
        torch.manual_seed(seed)
        r = torch.rand(L, dtype=q.dtype)  # the peer's rand_like(ratio) draws
        ok = r <= a
        n_ours = int(torch.cumprod(ok.long(), 0).sum())
        row = law.correction[0, n_ours]
        y_ours = int(torch.multinomial(row.unsqueeze(0), 1)[0, 0])
        # the peer's residual, recomputed from its own formula, vs our correction row
        if n_ours < L:
            peer_row = torch.clamp(p[n_ours] - q[n_ours], min=0)
            peer_row = peer_row / peer_row.sum()
        else:
            peer_row = p[L]
        row_diff = float((row - peer_row).abs().max())
    return {"n_hf": n_hf, "n_ours": n_ours, "y_hf": y_hf, "y_ours": y_ours, "row_diff": row_diff}


def crosscheck_proposals(proposals, seed: int = 0) -> dict:
    """Run `compare_one` on every path of every proposal (one seed per trial)."""
    res = {"trials": 0, "accept_count_match": 0, "token_match": 0, "max_row_diff": 0.0,
           "accepted_hist": {}}
    t = 0
    for prop in proposals:
        for k in range(prop.K):
            # on CPU: the peer draws from torch's global CPU generator
            c = compare_one(prop.drafts[k].cpu(), prop.q[k].cpu(), prop.p[k].cpu(), seed + t)
            t += 1
            res["trials"] += 1
            res["accept_count_match"] += c["n_hf"] == c["n_ours"]
            res["token_match"] += c["y_hf"] == c["y_ours"]
            res["max_row_diff"] = max(res["max_row_diff"], c["row_diff"])
            res["accepted_hist"][c["n_ours"]] = res["accepted_hist"].get(c["n_ours"], 0) + 1
    return res


@dataclass(frozen=True)
class CrosscheckConfig:
    """Configuration of `run_crosscheck`: exactly ``trials`` paths (16 per drafted batch,
    the last batch the remainder, at the first eight prompts in turn) of ``L`` tokens from the pair ``models``."""

    models: ModelSpec = field(default_factory=ModelSpec)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    trials: int = 2000
    L: int = 4
    seed: int = 0
    out: str | None = None

    def __post_init__(self):
        check_int("trials", self.trials, 1, 10_000_000)
        check_int("L", self.L, 1, 1024)
        check_seed(self.seed)
        check_out_file(self.out)


def run_crosscheck(cfg: CrosscheckConfig, log=stderr_log) -> dict:
    """Real model conditionals at real contexts, compared with `crosscheck_proposals`.
    Returns its result plus ``models``, ``L`` and ``ok`` (every accepted count equal, rows equal
    to 1e-6, and rejections at two depths or more exercised); written to ``cfg.out`` when given.
    """
    from tqdm import tqdm

    from ..data import encode, load_prompts
    from ..hf_models import load_models

    cfg.models.check()
    prompts = load_prompts((("humaneval", 4), ("sharegpt", 4)), cfg.seed)
    peer_routine()
    pair = load_models(cfg.models)
    log(f"models: {pair.description}")
    dec = SpeculativeDecoder(pair.draft, pair.target, cfg.sampling, device=cfg.models.device)
    g = torch.Generator().manual_seed(cfg.seed)
    per_batch = 16
    props = []
    bar = tqdm(total=cfg.trials, desc="crosscheck", file=sys.stderr)
    i = done = 0
    while done < cfg.trials:  # exactly cfg.trials paths (the last batch is the remainder)
        p = prompts[i % len(prompts)]
        i += 1
        k = min(per_batch, cfg.trials - done)
        dec.start(encode(p, pair.tokenizer, 512))
        props.append(dec.propose(k, cfg.L, g))
        done += k
        bar.update(k)
    bar.close()
    res = crosscheck_proposals(props, cfg.seed)
    res["models"] = pair.description
    res["L"] = cfg.L
    res["exercised"] = len(res["accepted_hist"]) >= 2
    res["ok"] = (res["exercised"] and res["accept_count_match"] == res["trials"]
                 and res["max_row_diff"] < 1e-6)
    if cfg.out:
        write_json(cfg.out, res)
    return res


__all__ = ["peer_routine", "compare_one", "crosscheck_proposals", "CrosscheckConfig",
           "run_crosscheck"]
