"""The real-model validation run (``spectheory validate run``): resumable, one JSON per prompt.

For each prompt: prefill, then iterate until ``max_new_tokens`` are generated. Every iteration
drafts K_max i.i.d. paths of L_max tokens, runs the target once over them, evaluates every
verifier at every (K <= K_max, L in Ls) on prefixes of that batch (:func:`compare.paired_step`),
and advances the trajectory with the ``advance`` verifier at (K_max, L_max) (single-path: path 0).
Results go to ``OUT/prompts/<dataset>-<index>.json`` (written atomically when the prompt is done);
a restarted run skips the prompts already written. ``OUT/run.json`` holds the configuration and a
restart with a different configuration is refused. ``OUT/costs.json`` holds measured per-forward
costs (the inputs of the cost model in :mod:`results`).
"""

from __future__ import annotations

import copy
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

from spectheory.errors import SpectheoryError

from .compare import config_key, paired_step
from .decoding import (SamplingConfig, SpeculativeDecoder, crop_cache, law_on, resolve_verifier,
                       sample_on, verifier_registry)

RESULT_KEYS = ("draft", "target", "datasets", "seed", "max_new_tokens", "K", "Ls", "advance",
               "temperature", "top_k", "top_p", "dtype", "max_prompt_tokens", "verifiers")


def write_json(path: Path, obj) -> None:
    """Atomic JSON write (temporary file + rename): a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)


def machine_info(device: str) -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__, "cpu_count": os.cpu_count(), "device": device,
            "torch_threads": torch.get_num_threads()}
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _timed_forward(model, cache, ids, device, keep):
    from .decoding import _sync
    _sync(device)
    t0 = time.perf_counter()
    with torch.no_grad():
        model(input_ids=ids.to(device), past_key_values=cache, use_cache=True,
              logits_to_keep=keep)
    _sync(device)
    return time.perf_counter() - t0


def measure_costs(draft, target, prompt_ids, Ks, Ls, device="cpu", reps=3, log=None) -> dict:
    """Median seconds of: a target forward of 1 token (batch 1: the autoregressive baseline),
    a draft forward of 1 token at batch K, and a target forward of L+1 tokens at batch K, all on
    top of a KV cache of the prompt. Measured, on this machine, while it may be shared."""
    from transformers import DynamicCache

    def prefill(model):
        c = DynamicCache()
        with torch.no_grad():
            model(input_ids=torch.tensor([prompt_ids]).to(device), past_key_values=c,
                  use_cache=True, logits_to_keep=1)
        return c

    n = len(prompt_ids)
    out = {"context_tokens": n, "reps": reps, "draft_1tok": {}, "target_Ltok": {}}

    def med(model, cache, K, m):
        times = []
        for _ in range(reps):
            c = copy.deepcopy(cache)
            c.batch_repeat_interleave(K)
            times.append(_timed_forward(model, c, torch.full((K, m), 1, dtype=torch.long),
                                        device, m))
            crop_cache(c, n)
        return sorted(times)[len(times) // 2]

    tc = prefill(target)
    out["target_1tok"] = med(target, tc, 1, 1)
    for K in Ks:
        for L in Ls:
            out["target_Ltok"][f"K{K}/L{L}"] = med(target, tc, K, L + 1)
            if log:
                log(f"cost target K={K} L={L}: {out['target_Ltok'][f'K{K}/L{L}']:.3f}s")
    del tc
    dc = prefill(draft)
    out["draft_1tok_batch1"] = med(draft, dc, 1, 1)
    for K in Ks:
        out["draft_1tok"][f"K{K}"] = med(draft, dc, K, 1)
    return out


def run_prompt(decoder: SpeculativeDecoder, prompt_ids, cfg: dict, verifiers: dict,
               generator: torch.Generator, step_bar=None, log=None) -> dict:
    Kmax, Ls = cfg["K"], cfg["Ls"]
    Lmax = max(Ls)
    Ks = list(range(1, Kmax + 1))
    adv = resolve_verifier(cfg["advance"])
    t_start = time.perf_counter()
    decoder.start(prompt_ids)
    steps, new = [], []
    while len(new) < cfg["max_new_tokens"]:
        prop = decoder.propose(Kmax, Lmax, generator)
        u = torch.rand(1, 2, generator=generator, dtype=torch.float64)
        paired = paired_step(prop, verifiers, Ks, Ls, u)
        t0 = time.perf_counter()
        law = law_on(adv, prop, path=0)
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
        if step_bar is not None:
            step_bar.update(1)
            step_bar.set_postfix(tokens=len(new), tau=tau)
    return {"prompt_tokens": len(prompt_ids), "new_tokens": new, "steps": steps,
            "wall_s": time.perf_counter() - t_start}


def run(args) -> int:
    """Entry point of ``spectheory validate run``."""
    from tqdm import tqdm

    from .data import encode, load_prompts
    from .fetch import require
    from .hf_models import DTYPES, check_pair, load_model

    out = Path(args.out)
    draft_path = args.draft or str(require("qwen2.5-coder-0.5b"))
    target_path = args.target or str(require("qwen2.5-coder-1.5b"))
    Ls = sorted({int(x) for x in args.L.split(",")})
    reg = verifier_registry()
    names = [v for v in (args.verifiers.split(",") if args.verifiers else list(reg))]
    for v in names + [args.advance]:
        resolve_verifier(v)
    cfg = {"draft": str(draft_path), "target": str(target_path), "datasets": args.datasets,
           "seed": args.seed, "max_new_tokens": args.max_new_tokens, "K": args.K, "Ls": Ls,
           "advance": args.advance, "temperature": args.temperature, "top_k": args.top_k,
           "top_p": args.top_p, "dtype": args.dtype, "max_prompt_tokens": args.max_prompt_tokens,
           "verifiers": names}
    run_file = out / "run.json"
    if run_file.exists():
        old = json.loads(run_file.read_text())
        diff = [k for k in RESULT_KEYS if k != "verifiers" and old.get(k) != cfg.get(k)]
        if diff:
            raise SpectheoryError(
                f"{out} holds a run with another configuration ({', '.join(diff)} differ); "
                "use another --out")
        missing = [v for v in names if v not in old.get("verifiers", [])]
        if missing:
            raise SpectheoryError(
                f"{out} was started without verifier(s) {', '.join(missing)}; use another --out")
        cfg["verifiers"] = names = [v for v in old["verifiers"] if v in names]
    sampling = SamplingConfig(args.temperature, args.top_k, args.top_p)
    check_pair(draft_path, target_path)  # files exist, same vocabulary: before any work
    prompts = load_prompts(args.datasets, args.seed)
    todo = [p for p in prompts if not (out / "prompts" / f"{p.dataset}-{p.index}.json").exists()]

    def log(msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    log(f"{len(prompts)} prompts, {len(prompts) - len(todo)} already done, output {out}")
    if not todo and (out / "costs_final.json").exists():
        return 0
    dtype = DTYPES[args.dtype]
    draft = load_model(draft_path, args.device, dtype)
    log(f"draft loaded in {draft.load_seconds:.0f}s")
    target = load_model(target_path, args.device, dtype, tokenizer=False)
    log(f"target loaded in {target.load_seconds:.0f}s")
    tok = draft.tokenizer
    if not run_file.exists():
        write_json(run_file, {**cfg, "machine": machine_info(args.device),
                              "load_seconds": {"draft": draft.load_seconds,
                                               "target": target.load_seconds}})
    decoder = SpeculativeDecoder(draft.model, target.model, sampling, torch.float64, args.device)
    verifiers = {n: reg[n] for n in names}
    if not (out / "costs.json").exists() and not args.no_costs:
        ids = encode(prompts[0], tok, args.max_prompt_tokens)
        costs = measure_costs(draft.model, target.model, ids, list(range(1, args.K + 1)), Ls,
                              args.device, reps=args.cost_reps, log=log)
        costs["machine"] = machine_info(args.device)
        costs["loadavg"] = os.getloadavg()
        write_json(out / "costs.json", costs)
        log(f"costs: {json.dumps({k: v for k, v in costs.items() if k != 'machine'})}")
    bar = tqdm(todo, desc="prompts", file=sys.stderr, mininterval=5)
    for p in bar:
        ids = encode(p, tok, args.max_prompt_tokens)
        g = torch.Generator().manual_seed(args.seed * 1_000_003 + hash_prompt(p))
        log(f"{p.dataset}-{p.index}: {len(ids)} prompt tokens")
        res = run_prompt(decoder, ids, cfg, verifiers, g, log=log)
        res.update({"dataset": p.dataset, "index": p.index, "id": p.id})
        if tok is not None:
            res["text"] = tok.decode(res["new_tokens"])
        res["loadavg"] = os.getloadavg()
        write_json(out / "prompts" / f"{p.dataset}-{p.index}.json", res)
        log(f"{p.dataset}-{p.index}: {len(res['steps'])} steps, {res['wall_s']:.0f}s, "
            f"realised tokens/step {len(res['new_tokens']) / len(res['steps']):.2f}")
    bar.close()
    if not args.no_costs and not (out / "costs_final.json").exists():
        # Measured again once every prompt is done, with more repetitions: on a shared machine
        # the start of a run is often its busiest moment. The summary prefers these.
        ids = encode(prompts[0], tok, args.max_prompt_tokens)
        costs = measure_costs(draft.model, target.model, ids, list(range(1, args.K + 1)), Ls,
                              args.device, reps=max(5, args.cost_reps), log=log)
        costs["machine"] = machine_info(args.device)
        costs["loadavg"] = os.getloadavg()
        write_json(out / "costs_final.json", costs)
        log("final costs written")
    return 0


def hash_prompt(p) -> int:
    """A stable per-prompt seed offset (not Python's salted hash)."""
    h = 0
    for ch in f"{p.dataset}:{p.index}":
        h = (h * 131 + ord(ch)) % 1_000_000_007
    return h


def costs_command(args) -> int:
    """``spectheory validate costs``: measure per-forward costs (median of ``--reps``) with the
    run's models at its first prompt and (over)write OUT/costs.json; for a quieter moment than
    the start of a run on a shared machine."""
    from .data import encode, load_prompts
    from .fetch import require
    from .hf_models import DTYPES, load_pair

    out = Path(args.out)
    draft_path = args.draft or str(require("qwen2.5-coder-0.5b"))
    target_path = args.target or str(require("qwen2.5-coder-1.5b"))
    dtype = DTYPES[args.dtype]
    d, t = load_pair(draft_path, target_path, args.device, dtype)
    prompts = load_prompts("humaneval:30,sharegpt:30", args.seed)
    ids = encode(prompts[0], d.tokenizer, 512)
    Ls = sorted({int(x) for x in args.L.split(",")})
    costs = measure_costs(d.model, t.model, ids, list(range(1, args.K + 1)), Ls, args.device,
                          reps=args.reps,
                          log=lambda m: print(m, file=sys.stderr, flush=True))
    costs["machine"] = machine_info(args.device)
    costs["measured_at"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    write_json(out / "costs.json", costs)
    print(json.dumps({k: v for k, v in costs.items() if k != "machine"}))
    return 0
