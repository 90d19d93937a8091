"""Loading Hugging Face causal LMs (from a GGUF file or a saved model folder), with the checks that
must pass before any work: files exist, draft and target share a vocabulary.

GGUF files are read by ``transformers`` (which dequantises the weights, here to float32):
``AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=...)``; this needs the
``gguf`` and ``accelerate`` packages (the ``models`` extra).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from spectheory.errors import SpectheoryError


@dataclass
class LoadedModel:
    model: object  # transformers PreTrainedModel
    tokenizer: object | None
    path: str
    vocab_size: int
    load_seconds: float


DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


def _check_exists(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise SpectheoryError(f"model file not found: {p}")
    return p


def gguf_vocab_size(path: str | Path) -> int:
    """Vocabulary size declared by a GGUF file (length of ``tokenizer.ggml.tokens``), read from the
    metadata only (no weights)."""
    from gguf import GGUFReader

    p = _check_exists(path)
    try:
        reader = GGUFReader(str(p), "r")
    except Exception as exc:  # noqa: BLE001 - any parse failure is a bad file
        raise SpectheoryError(f"{p} is not a readable GGUF file: {exc}") from None
    field = reader.fields.get("tokenizer.ggml.tokens")
    if field is None:
        raise SpectheoryError(f"{p}: GGUF file has no tokenizer.ggml.tokens")
    return len(field.data)


def declared_vocab_size(path: str | Path) -> int:
    """Vocabulary size of a model file (GGUF) or a saved folder (config.json ``vocab_size``)."""
    p = _check_exists(path)
    if p.is_dir():
        cfg = p / "config.json"
        if not cfg.exists():
            raise SpectheoryError(f"{p} has no config.json")
        return int(json.loads(cfg.read_text())["vocab_size"])
    return gguf_vocab_size(p)


def check_pair(draft_path: str | Path, target_path: str | Path) -> int:
    """Both files exist and declare the same vocabulary; returns its size (no weights loaded)."""
    vd, vt = declared_vocab_size(draft_path), declared_vocab_size(target_path)
    if vd != vt:
        raise SpectheoryError(
            f"vocabulary mismatch: draft {draft_path} has {vd} tokens, target {target_path} has "
            f"{vt}; speculative decoding needs one shared vocabulary")
    return vd


def load_model(path: str | Path, device: str = "cpu", dtype: torch.dtype = torch.float32,
               tokenizer: bool = True) -> LoadedModel:
    """Load a causal LM from a GGUF file or a saved folder, in eval mode on ``device``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    p = _check_exists(path)
    t0 = time.perf_counter()
    if p.is_dir():
        kw = {}
    else:
        kw = {"gguf_file": p.name}
        p = p.parent
    model = AutoModelForCausalLM.from_pretrained(str(p), dtype=dtype, **kw)
    model.to(device).eval()
    tok = AutoTokenizer.from_pretrained(str(p), **kw) if tokenizer else None
    vocab = int(model.get_output_embeddings().weight.shape[0])
    return LoadedModel(model, tok, str(path), vocab, time.perf_counter() - t0)


def load_pair(draft_path, target_path, device: str = "cpu", dtype=torch.float32):
    """(draft, target) after :func:`check_pair`; the output layers must also agree."""
    check_pair(draft_path, target_path)
    draft = load_model(draft_path, device, dtype)
    target = load_model(target_path, device, dtype, tokenizer=False)
    if draft.vocab_size != target.vocab_size:
        raise SpectheoryError(
            f"vocabulary mismatch: draft output layer {draft.vocab_size}, target "
            f"{target.vocab_size}")
    return draft, target


def early_exit_draft(target_model, n_layers: int):
    """A draft built from a target: its first ``n_layers`` decoder layers, then its own final norm
    and output layer (an early-exit slice sharing the tokenizer). Used for SmolLM2-135M, which has
    no same-tokenizer draft offline; it is a constructed draft, not a pretrained one."""
    import copy

    layers = target_model.model.layers
    if not 1 <= n_layers < len(layers):
        raise SpectheoryError(f"early-exit draft needs 1 <= layers < {len(layers)}")
    # Shallow copies that share the weights; their module tables are copied so that the target
    # keeps all of its layers (a plain copy.copy of an nn.Module shares ``_modules``).
    inner = copy.copy(target_model.model)
    inner._modules = dict(target_model.model._modules)
    inner.layers = torch.nn.ModuleList(list(layers)[:n_layers])
    draft = copy.copy(target_model)
    draft._modules = dict(target_model._modules)
    draft.model = inner
    draft.config = copy.deepcopy(target_model.config)
    draft.config.num_hidden_layers = n_layers
    inner.config = draft.config
    return draft


def load_models_for(args):
    """(draft, target, tokenizer, description) for the lossless/crosscheck commands:
    ``--pair qwen2.5-coder`` (the fetched GGUF pair, or --draft/--target) or
    ``--pair smollm2-early-exit`` (SmolLM2-135M target, its first ``--draft-layers`` layers as
    draft)."""
    from .fetch import require

    dtype = DTYPES[args.dtype]
    if getattr(args, "pair", "qwen2.5-coder") == "smollm2-early-exit":
        t = load_model(args.target or require("smollm2-135m"), args.device, dtype)
        d = early_exit_draft(t.model, args.draft_layers)
        return d, t.model, t.tokenizer, (f"SmolLM2-135M target, early-exit draft "
                                         f"(first {args.draft_layers} layers)")
    draft_path = args.draft or str(require("qwen2.5-coder-0.5b"))
    target_path = args.target or str(require("qwen2.5-coder-1.5b"))
    d, t = load_pair(draft_path, target_path, args.device, dtype)
    return d.model, t.model, d.tokenizer, f"{draft_path} -> {target_path}"
