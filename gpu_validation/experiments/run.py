"""The real-model validation run (``spectheory validate run``): resumable, one JSON per prompt,
and the per-forward cost measurement (``spectheory validate costs``).

For each prompt: prefill, then iterate until ``max_new_tokens`` are generated. Every iteration
drafts K_max i.i.d. paths of L_max tokens, runs the target once over them, evaluates every
verifier at every (K <= K_max, L in Ls) on prefixes of that batch
(`spectheory.gpu_validation.compare.paired_step`), and advances the trajectory with the ``advance``
verifier at (K_max, L_max) (single-path: path 0). Results go to
``OUT/prompts/<dataset>-<index>.json`` (written atomically when the prompt is done); a restarted
run skips the prompts already written. ``OUT/run.json`` holds the configuration and a restart
with a different configuration is refused. ``OUT/costs.json`` holds measured per-forward costs
(the inputs of the cost model in `summarize`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from spectheory.runtime.errors import SpectheoryError

from ..atomic import write_json
from ..checks import check_float, check_int, check_seed
from ..compare import paired_step
from ..data import format_datasets, parse_datasets
from ..decoding import (SamplingConfig, SpeculativeDecoder, check_memory, law_on,
                        resolve_verifier, sample_on)
from ..forward_costs import machine_info, measure_costs
from ..hf_models import ModelSpec
from .config import DEFAULT_OUT, check_out_folder, stderr_log

RESULT_KEYS = ("draft", "target", "datasets", "seed", "max_new_tokens", "K", "Ls", "advance",
               "temperature", "top_k", "top_p", "dtype", "max_prompt_tokens", "verifiers")

#: Verifiers of the default run: single-path token/block, and the multi-path ones that are
#: lossless under i.i.d. drafting (the drafting of the loop). SpecTr is left out for its cost at
#: V = 151,936 (seconds per law on 2 CPU cores); norep-drafting verifiers (specinfer-norep,
#: traversal) need another drafting scheme; block-first/token-first duplicate block/token.
DEFAULT_VERIFIERS = ("token", "block", "gbv", "specinfer", "traversal-iid")

MAX_PATHS = 1024
MAX_LENGTH = 1024
MAX_TOKENS = 1_000_000


def _block_lengths(Ls) -> tuple:
    """The distinct block lengths of a non-empty sequence, sorted, each in 1..MAX_LENGTH."""
    if isinstance(Ls, (str, int)) or not Ls:
        raise SpectheoryError(f"Ls must be a non-empty sequence of block lengths, got {Ls!r}")
    return tuple(sorted({check_int("L", x, 1, MAX_LENGTH) for x in Ls}))


def _datasets(value) -> tuple:
    return parse_datasets(value) if isinstance(value, str) else parse_datasets(
        format_datasets(value))


@dataclass(frozen=True)
class RunConfig:
    """Configuration of `validate_run` (checked on construction, one-line errors).

    Parameters
    ----------
    out : str
        Output folder (resumable).
    models : ModelSpec
        The draft/target pair, device and dtype.
    sampling : SamplingConfig
        Temperature, top-k, top-p (applied to draft and target alike).
    datasets : str or tuple
        ``"humaneval:30,sharegpt:30"`` or its parsed form (:func:`gpu_validation.data.
        parse_datasets`); stored parsed.
    max_new_tokens : int
        Tokens generated per prompt.
    K : int
        Paths drafted per iteration (every K' <= K is evaluated on a prefix of them).
    Ls : tuple of int
        Block lengths evaluated (drafted at the largest).
    verifiers : tuple of str
        Names or ``module:function`` of the verifiers compared.
    advance : str
        The verifier whose sample advances the trajectory (at K, max Ls).
    max_prompt_tokens : int
        Prompts are cut to their last ``max_prompt_tokens`` tokens.
    costs : bool
        Measure per-forward costs (OUT/costs.json, and costs_final.json at the end).
    cost_reps : int
        Repetitions per cost measurement (median).
    seed : int
        Seed of the prompt subset and of every draw.
    memory_limit_gib : float
        Refuse (before loading) a drafted batch estimated above this size.
    """

    out: str = DEFAULT_OUT
    models: ModelSpec = field(default_factory=ModelSpec)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    datasets: tuple = (("humaneval", 30), ("sharegpt", 30))
    max_new_tokens: int = 64
    K: int = 4
    Ls: tuple = (4, 8)
    verifiers: tuple = DEFAULT_VERIFIERS
    advance: str = "gbv"
    max_prompt_tokens: int = 512
    costs: bool = True
    cost_reps: int = 3
    seed: int = 0
    memory_limit_gib: float = 16.0

    def __post_init__(self):
        object.__setattr__(self, "datasets", _datasets(self.datasets))
        check_int("max new tokens", self.max_new_tokens, 1, MAX_TOKENS)
        check_int("K", self.K, 1, MAX_PATHS)
        object.__setattr__(self, "Ls", _block_lengths(self.Ls))
        check_int("max prompt tokens", self.max_prompt_tokens, 1, MAX_TOKENS)
        check_int("cost reps", self.cost_reps, 1, 1000)
        check_seed(self.seed)
        check_float("memory limit (GiB)", self.memory_limit_gib, 0, None, lo_open=True)
        check_out_folder(self.out)
        if isinstance(self.verifiers, str) or not self.verifiers:
            raise SpectheoryError("verifiers must be a non-empty sequence of names")
        object.__setattr__(self, "verifiers", tuple(self.verifiers))
        if len(set(self.verifiers)) != len(self.verifiers):
            raise SpectheoryError(f"a verifier is listed twice: {', '.join(self.verifiers)}")
        specs = self.specs()
        resolve_verifier(self.advance)
        multi = [n for n, s in specs.items() if not s.single_path]
        if multi and self.K < 2:
            raise SpectheoryError(
                f"K-path verifier(s) {', '.join(multi)} are compared at K >= 2 only; use K >= 2 "
                "or single-path verifiers (token, block)")

    def specs(self) -> dict:
        """name -> VerifierSpec of the compared verifiers."""
        return {n: resolve_verifier(n) for n in self.verifiers}

    def record(self) -> dict:
        """The fields stored in OUT/run.json and compared on a restart."""
        return {"draft": self.models.draft_path() or
                f"first {self.models.draft_layers} layers of the target",
                "target": self.models.target_path(), "datasets": format_datasets(self.datasets),
                "seed": self.seed, "max_new_tokens": self.max_new_tokens, "K": self.K,
                "Ls": list(self.Ls), "advance": self.advance,
                "temperature": self.sampling.temperature, "top_k": self.sampling.top_k,
                "top_p": self.sampling.top_p, "dtype": self.models.dtype,
                "max_prompt_tokens": self.max_prompt_tokens, "verifiers": list(self.verifiers)}


def run_prompt(decoder: SpeculativeDecoder, prompt_ids, verifiers: dict, advance, K: int,
               Ls, max_new_tokens: int, generator: torch.Generator, log=None) -> dict:
    """Generate ``max_new_tokens`` from one prompt; at every iteration record the paired
    comparison of ``verifiers`` (name -> VerifierSpec) at every (K' <= K, L in Ls) and advance
    with the spec ``advance`` at (K, max Ls). Returns the per-prompt JSON record."""
    Lmax = max(Ls)
    Ks = list(range(1, K + 1))
    t_start = time.perf_counter()
    decoder.start(prompt_ids)
    steps, new = [], []
    while len(new) < max_new_tokens:
        prop = decoder.propose(K, Lmax, generator)
        u = torch.rand(1, 2, generator=generator, dtype=torch.float64)
        paired = paired_step(prop, verifiers, Ks, Ls, u)
        t0 = time.perf_counter()
        law = law_on(advance, prop, path=0)
        k, tau, y = sample_on(law, uniforms=u.to(prop.p.device), path=0)
        t_verify = time.perf_counter() - t0
        steps.append({"ctx": len(decoder.tokens), "draft_s": prop.draft_seconds,
                      "target_s": prop.target_seconds, "verify_s": t_verify,
                      "advance": [k, tau, y], **paired})
        new.extend(decoder.commit(prop, k, tau, y))
        if log is not None:
            log(f"  step {len(steps)}: draft {prop.draft_seconds:.1f}s target "
                f"{prop.target_seconds:.1f}s laws {sum(paired['law_s'].values()):.1f}s "
                f"tau {tau} tokens {len(new)}")
    return {"prompt_tokens": len(prompt_ids), "new_tokens": new, "steps": steps,
            "wall_s": time.perf_counter() - t_start}


def hash_prompt(p) -> int:
    """A stable per-prompt seed offset (not Python's salted hash)."""
    h = 0
    for ch in f"{p.dataset}:{p.index}":
        h = (h * 131 + ord(ch)) % 1_000_000_007
    return h


def _check_restart(out: Path, cfg: dict) -> dict:
    run_file = out / "run.json"
    if not run_file.exists():
        return cfg
    try:
        old = json.loads(run_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpectheoryError(f"{run_file} is unreadable ({type(exc).__name__}); use another "
                              "--out") from None
    diff = [k for k in RESULT_KEYS if k != "verifiers" and old.get(k) != cfg.get(k)]
    if diff:
        raise SpectheoryError(f"{out} holds a run with another configuration "
                              f"({', '.join(diff)} differ); use another --out")
    missing = [v for v in cfg["verifiers"] if v not in old.get("verifiers", [])]
    if missing:
        raise SpectheoryError(f"{out} was started without verifier(s) {', '.join(missing)}; use "
                              "another --out")
    return {**cfg, "verifiers": [v for v in old["verifiers"] if v in cfg["verifiers"]]}


def validate_run(cfg: RunConfig, log=stderr_log) -> dict:
    """Run (or resume) the validation run of ``cfg``; returns {"prompts", "done", "out"}.

    Every check (files, vocabularies, memory, restart compatibility, data sets present) runs
    before the models are loaded and before anything is written."""
    from ..data import encode, load_prompts
    from ..hf_models import load_models

    out = Path(cfg.out)
    V = cfg.models.check()
    check_memory(cfg.K, max(cfg.Ls), V, cfg.memory_limit_gib, "--K and --L")
    record = _check_restart(out, cfg.record())
    prompts = load_prompts(cfg.datasets, cfg.seed)
    todo = [p for p in prompts if not (out / "prompts" / f"{p.dataset}-{p.index}.json").exists()]
    log(f"{len(prompts)} prompts, {len(prompts) - len(todo)} already done, output {out}")
    result = {"prompts": len(prompts), "done": len(prompts) - len(todo), "out": str(out)}
    if not todo and (not cfg.costs or (out / "costs_final.json").exists()):
        return result
    pair = load_models(cfg.models)
    log(f"models loaded in {pair.load_seconds['draft'] + pair.load_seconds['target']:.0f}s")
    tok = pair.tokenizer
    if not (out / "run.json").exists():
        write_json(out / "run.json", {**record, "machine": machine_info(cfg.models.device),
                                      "load_seconds": pair.load_seconds})
    decoder = SpeculativeDecoder(pair.draft, pair.target, cfg.sampling, torch.float64,
                                 cfg.models.device)
    verifiers = {n: resolve_verifier(n) for n in record["verifiers"]}
    advance = resolve_verifier(cfg.advance)
    Ks = list(range(1, cfg.K + 1))

    def costs(name: str, reps: int) -> None:
        ids = encode(prompts[0], tok, cfg.max_prompt_tokens)
        c = measure_costs(pair.draft, pair.target, ids, Ks, list(cfg.Ls), cfg.models.device,
                          reps=reps, log=log)
        c["machine"] = machine_info(cfg.models.device)
        c["loadavg"] = os.getloadavg()
        write_json(out / name, c)
        log(f"{name} written")

    if cfg.costs and not (out / "costs.json").exists():
        costs("costs.json", cfg.cost_reps)
    for i, p in enumerate(todo, 1):
        ids = encode(p, tok, cfg.max_prompt_tokens)
        g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + hash_prompt(p))
        log(f"[{i}/{len(todo)}] {p.dataset}-{p.index}: {len(ids)} prompt tokens")
        res = run_prompt(decoder, ids, verifiers, advance, cfg.K, cfg.Ls, cfg.max_new_tokens, g,
                         log=log)
        res.update({"dataset": p.dataset, "index": p.index, "id": p.id})
        if tok is not None:
            res["text"] = tok.decode(res["new_tokens"])
        res["loadavg"] = os.getloadavg()
        write_json(out / "prompts" / f"{p.dataset}-{p.index}.json", res)
        result["done"] += 1
        log(f"{p.dataset}-{p.index}: {len(res['steps'])} steps, {res['wall_s']:.0f}s, "
            f"realised tokens/step {len(res['new_tokens']) / len(res['steps']):.2f}")
    if cfg.costs and not (out / "costs_final.json").exists():
        # Measured again once every prompt is done, with more repetitions: the start of a run is
        # often its busiest moment. The summary prefers these.
        costs("costs_final.json", max(5, cfg.cost_reps))
    return result


@dataclass(frozen=True)
class CostsConfig:
    """Configuration of `measure`: per-forward costs with the run's models at the first
    prompt of ``datasets`` (cut to ``max_prompt_tokens``), median of ``reps``, written to
    ``OUT/costs.json``."""

    out: str = DEFAULT_OUT
    models: ModelSpec = field(default_factory=ModelSpec)
    K: int = 4
    Ls: tuple = (4, 8)
    reps: int = 5
    datasets: tuple = (("humaneval", 30), ("sharegpt", 30))
    max_prompt_tokens: int = 512
    seed: int = 0
    memory_limit_gib: float = 16.0

    def __post_init__(self):
        object.__setattr__(self, "datasets", _datasets(self.datasets))
        check_int("K", self.K, 1, MAX_PATHS)
        object.__setattr__(self, "Ls", _block_lengths(self.Ls))
        check_int("reps", self.reps, 1, 1000)
        check_int("max prompt tokens", self.max_prompt_tokens, 1, MAX_TOKENS)
        check_seed(self.seed)
        check_float("memory limit (GiB)", self.memory_limit_gib, 0, None, lo_open=True)
        check_out_folder(self.out)


def measure(cfg: CostsConfig, log=stderr_log) -> dict:
    """Measure per-forward costs (`spectheory.gpu_validation.forward_costs.measure_costs`) and
    (over)write OUT/costs.json atomically; returns the measurement."""
    from ..data import encode, load_prompts
    from ..hf_models import load_models

    V = cfg.models.check()
    check_memory(cfg.K, max(cfg.Ls), V, cfg.memory_limit_gib, "--K and --L")
    prompts = load_prompts(cfg.datasets, cfg.seed)
    pair = load_models(cfg.models)
    ids = encode(prompts[0], pair.tokenizer, cfg.max_prompt_tokens)
    costs = measure_costs(pair.draft, pair.target, ids, list(range(1, cfg.K + 1)), list(cfg.Ls),
                          cfg.models.device, reps=cfg.reps, log=log)
    costs["machine"] = machine_info(cfg.models.device)
    costs["measured_at"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    write_json(Path(cfg.out) / "costs.json", costs)
    return costs


__all__ = ["DEFAULT_VERIFIERS", "RESULT_KEYS", "RunConfig", "CostsConfig", "run_prompt",
           "hash_prompt", "validate_run", "measure"]
