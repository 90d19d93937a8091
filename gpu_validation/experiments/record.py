"""Record real conditionals: drafted paths and the full draft and target rows along them.

Each recorded step is one proposal of the speculative decoding loop (`SpeculativeDecoder`)
at a real context: K drafted paths of L tokens, q [K, L, V] and p [K, L+1, V] (float64, one row
per distinct prefix), after which the trajectory advances by block verification. The file
(``torch.save`` of a dict with ``drafts`` [B, K, L], ``q`` [B, K, L, V], ``p`` [B, K, L+1, V],
``models``, ``prompts``) is what ``spectheory audit --rows-file`` reads, so a verifier's
low-precision law can be audited on the conditionals of a real model pair.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..checks import check_int, check_seed
from ..decoding import SamplingConfig, SpeculativeDecoder, law_on, resolve_verifier, sample_on
from ..hf_models import ModelSpec
from .config import check_out_file, stderr_log


@dataclass(frozen=True)
class RecordConfig:
    """Configuration of `record_rows`: ``steps`` proposals of K paths of L tokens, spread
    over the first ``prompts`` HumanEval prompts."""

    out: str
    models: ModelSpec = field(default_factory=ModelSpec)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    steps: int = 8
    K: int = 1
    L: int = 8
    prompts: int = 4
    seed: int = 0

    def __post_init__(self):
        check_int("steps", self.steps, 1, 10_000)
        check_int("K", self.K, 1, 64)
        check_int("L", self.L, 1, 64)
        check_int("prompts", self.prompts, 1, 164)
        check_seed(self.seed)
        if check_out_file(self.out) is None:
            from spectheory.runtime.errors import SpectheoryError

            raise SpectheoryError("--out: a file name for the recorded rows is required")


def save_rows(path, rows: dict) -> Path:
    """``torch.save`` through a temporary file renamed into place (nothing half-written; a
    device, FIFO or folder at ``path`` refused: `spectheory.runtime.files.atomic_file`)."""
    from spectheory.runtime.files import atomic_file, output_path

    with atomic_file(path, "--out") as tmp:
        torch.save(rows, tmp)
    return output_path(path)


def record_rows(cfg: RecordConfig, log=stderr_log) -> dict:
    """Record ``cfg.steps`` proposals (module doc) and write them to ``cfg.out``; returns a
    summary (shapes, models, prompts)."""
    from ..data import encode, load_prompts
    from ..hf_models import load_models

    from spectheory.runtime.limits import check_memory

    V = cfg.models.check()
    # the rows kept in float64, then stacked into one tensor each (twice the rows at the end)
    check_memory(2 * 8 * cfg.steps * cfg.K * (2 * cfg.L + 1) * int(V),
                 f"--steps {cfg.steps} --K {cfg.K} --L {cfg.L} at V = {int(V):,}",
                 "lower --steps, --K or --L")
    prompts = load_prompts((("humaneval", cfg.prompts),), cfg.seed)
    pair = load_models(cfg.models)
    log(f"models: {pair.description}")
    dec = SpeculativeDecoder(pair.draft, pair.target, cfg.sampling, torch.float64,
                             cfg.models.device)
    advance = resolve_verifier("block")
    g = torch.Generator().manual_seed(cfg.seed)
    per_prompt = -(-cfg.steps // len(prompts))
    drafts, qs, ps = [], [], []
    shown = [0.0]  # when the next progress line may be written
    for prompt in prompts:
        dec.start(encode(prompt, pair.tokenizer, 512))
        for _ in range(per_prompt):
            if len(drafts) == cfg.steps:
                break
            prop = dec.propose(cfg.K, cfg.L, g)
            if time.monotonic() >= shown[0]:  # long work shows progress, every 10 s at most
                shown[0] = time.monotonic() + 10.0
                log(f"step {len(drafts) + 1:,} of {cfg.steps:,}")
            drafts.append(prop.drafts.cpu())
            qs.append(prop.q.double().cpu())
            ps.append(prop.p.double().cpu())
            k, tau, y = sample_on(law_on(advance, prop), g)
            dec.commit(prop, k, tau, y)
    import re

    models = re.sub(r"(/[^ ,]+/)([^/ ,]+)", r"\2", pair.description)  # file names, not paths
    rows = {"drafts": torch.stack(drafts), "q": torch.stack(qs), "p": torch.stack(ps),
            "models": models, "prompts": len(prompts)}
    save_rows(cfg.out, rows)
    log(f"recorded {len(drafts)} steps to {cfg.out}")
    return {"out": str(cfg.out), "steps": len(drafts), "K": cfg.K, "L": cfg.L,
            "vocab_size": int(rows["q"].shape[-1]), "models": models}


__all__ = ["RecordConfig", "record_rows", "save_rows"]
