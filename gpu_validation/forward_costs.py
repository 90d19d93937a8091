"""Measured per-forward costs of a draft/target pair: the inputs of the cost model of
`spectheory.gpu_validation.experiments.summarize` (speed-up = BE t_T(1) / (L t_D(K) + t_T(K, L+1) +
t_verify), Leviathan et al. 2023, section 3.4, with K paths)."""

from __future__ import annotations

import copy
import os
import platform
import time

import torch

from .decoding import crop_cache, sync


def machine_info(device: str) -> dict:
    """Platform, Python, torch, CPU count, device and torch's thread count; on a CUDA device also
    the GPU's name, memory and compute capability, and the CUDA and cuDNN versions torch was
    built with."""
    import transformers

    info = {"platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "cpu_count": os.cpu_count(), "device": device,
            "torch_threads": torch.get_num_threads()}
    dev = torch.device(device)
    if dev.type == "cuda" and torch.cuda.is_available():
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        info.update({"gpu": torch.cuda.get_device_name(index),
                     "gpu_memory_gib": round(props.total_memory / 2 ** 30, 2),
                     "gpu_capability": f"{props.major}.{props.minor}",
                     "cuda": torch.version.cuda,
                     "cudnn": torch.backends.cudnn.version(),
                     "tf32_matmul": torch.backends.cuda.matmul.allow_tf32})
    return info


def _timed_forward(model, cache, ids, device, keep) -> float:
    sync(device)
    t0 = time.perf_counter()
    with torch.no_grad():
        model(input_ids=ids.to(device), past_key_values=cache, use_cache=True,
              logits_to_keep=keep)
    sync(device)
    return time.perf_counter() - t0


def measure_costs(draft, target, prompt_ids, Ks, Ls, device: str = "cpu", reps: int = 3,
                  log=None) -> dict:
    """Median seconds (over ``reps``) of: a target forward of 1 token at batch 1 (the
    autoregressive baseline), a draft forward of 1 token at batch K, and a target forward of L+1
    tokens at batch K, each on top of a KV cache of the prompt.

    Returns
    -------
    dict
        ``context_tokens``, ``reps``, ``target_1tok``, ``draft_1tok_batch1``,
        ``draft_1tok`` {"K<k>": s}, ``target_Ltok`` {"K<k>/L<l>": s}.
    """
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


__all__ = ["machine_info", "measure_costs"]
