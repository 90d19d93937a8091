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

from spectheory.runtime.errors import SpectheoryError

from .checks import check_choice, check_device, check_int

#: Model pairs: the fetched GGUF pair (or any --draft/--target), or a SmolLM2-135M target with an
#: early-exit draft made of its first ``draft_layers`` layers.
PAIRS = ("qwen2.5-coder", "smollm2-early-exit")


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


def _config_int(folder: Path, key: str) -> int:
    cfg = folder / "config.json"
    if not cfg.exists():
        raise SpectheoryError(f"{folder} has no config.json")
    try:
        value = json.loads(cfg.read_text(encoding="utf-8"))[key]
        return int(value)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError,
            ValueError) as exc:
        raise SpectheoryError(f"{cfg}: no integer {key} ({type(exc).__name__})") from None


def _gguf_reader(path: str | Path):
    from gguf import GGUFReader

    p = _check_exists(path)
    if p.is_dir():
        raise SpectheoryError(f"{p} is a folder without config.json, not a model")
    try:
        return GGUFReader(str(p), "r")
    except Exception as exc:  # noqa: BLE001 - any parse failure is a bad file
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SpectheoryError(f"{p} is not a readable GGUF file: {msg}") from None


def gguf_vocab_size(path: str | Path) -> int:
    """Vocabulary size declared by a GGUF file (length of ``tokenizer.ggml.tokens``), read from the
    metadata only (no weights)."""
    reader = _gguf_reader(path)
    field = reader.fields.get("tokenizer.ggml.tokens")
    if field is None:
        raise SpectheoryError(f"{path}: GGUF file has no tokenizer.ggml.tokens")
    return len(field.data)


def declared_layers(path: str | Path) -> int:
    """Number of decoder layers of a model file (GGUF ``<arch>.block_count``) or a saved folder
    (config.json ``num_hidden_layers``), from the metadata only."""
    p = _check_exists(path)
    if p.is_dir():
        return _config_int(p, "num_hidden_layers")
    reader = _gguf_reader(p)
    for name, field in reader.fields.items():
        if name.endswith(".block_count"):
            return int(field.parts[field.data[0]][0])
    raise SpectheoryError(f"{p}: GGUF file declares no block_count")


def declared_vocab_size(path: str | Path) -> int:
    """Vocabulary size of a model file (GGUF) or a saved folder (config.json ``vocab_size``)."""
    p = _check_exists(path)
    if p.is_dir():
        return _config_int(p, "vocab_size")
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
    what = "a causal language model"
    try:
        model = AutoModelForCausalLM.from_pretrained(str(p), dtype=dtype, **kw)
        model.to(device).eval()
        vocab = int(model.get_output_embeddings().weight.shape[0])
        what = "the tokenizer"  # the model loaded: a failure now is the tokenizer's
        tok = AutoTokenizer.from_pretrained(str(p), **kw) if tokenizer else None
    except (KeyboardInterrupt, MemoryError, SpectheoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt or foreign file: the library's reason
        first = (" ".join(str(exc).split()) or type(exc).__name__)[:200]
        raise SpectheoryError(f"cannot load {what} from {path}"
                              + (" (the model itself loads; the draft's tokenizer encodes the "
                                 "prompts)" if what == "the tokenizer" else "")
                              + f" ({type(exc).__name__}: {first})") from None
    return LoadedModel(model, tok, str(path), vocab, time.perf_counter() - t0)


def load_pair(draft_path, target_path, device: str = "cpu", dtype=torch.float32):
    """(draft, target) after `check_pair`; the output layers must also agree."""
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


@dataclass(frozen=True)
class ModelSpec:
    """Which draft/target pair to load, where and how.

    Parameters
    ----------
    pair : str
        ``"qwen2.5-coder"``: ``draft``/``target`` files (default: the fetched Qwen2.5-Coder 0.5B
        and 1.5B GGUF files); ``"smollm2-early-exit"``: the ``target`` file (default: the fetched
        SmolLM2-135M) with a draft made of its first ``draft_layers`` layers.
    draft, target : str or None
        GGUF files or saved model folders.
    draft_layers : int
        Depth of the early-exit draft (1 <= draft_layers < layers of the target).
    device : str
        ``cpu``, ``cuda`` or ``cuda:N`` (checked against this machine).
    dtype : str
        Weights' dtype: float32, float64 or bfloat16.
    """

    pair: str = "qwen2.5-coder"
    draft: str | None = None
    target: str | None = None
    draft_layers: int = 28
    device: str = "cpu"
    dtype: str = "float32"

    def __post_init__(self):
        check_choice("model pair", self.pair, PAIRS)
        check_choice("dtype", self.dtype, tuple(DTYPES))
        check_int("draft layers", self.draft_layers, 1)
        check_device(self.device)
        if self.pair == "smollm2-early-exit" and self.draft is not None:
            raise SpectheoryError("the smollm2-early-exit pair builds its draft from the target; "
                                  "give --target only")

    @property
    def early_exit(self) -> bool:
        return self.pair == "smollm2-early-exit"

    def target_path(self) -> str:
        """The target's file (the fetched default when none is given; a one-line error saying how
        to fetch it when missing)."""
        from .fetch import require

        if self.target:
            return str(self.target)
        return str(require("smollm2-135m" if self.early_exit else "qwen2.5-coder-1.5b"))

    def draft_path(self) -> str | None:
        """The draft's file; None for an early-exit draft."""
        from .fetch import require

        if self.early_exit:
            return None
        return str(self.draft) if self.draft else str(require("qwen2.5-coder-0.5b"))

    def describe(self) -> str:
        if self.early_exit:
            return (f"{self.target_path()} target, early-exit draft (first {self.draft_layers} "
                    f"layers)")
        return f"{self.draft_path()} -> {self.target_path()}"

    def check(self) -> int:
        """Checks that need no weights: the files exist and parse, the vocabularies agree, the
        early-exit depth is below the target's. Returns the vocabulary size."""
        if self.early_exit:
            target = self.target_path()
            n = declared_layers(target)
            if not self.draft_layers < n:
                raise SpectheoryError(f"draft layers = {self.draft_layers} is out of range; the "
                                      f"target has {n} layers: accepted 1 to {n - 1}")
            return declared_vocab_size(target)
        return check_pair(self.draft_path(), self.target_path())


@dataclass
class LoadedPair:
    """Draft and target models (eval mode, on the device), the tokenizer and a description."""

    draft: object
    target: object
    tokenizer: object | None
    description: str
    load_seconds: dict


def load_models(spec: ModelSpec) -> LoadedPair:
    """Load the pair of ``spec`` (after `ModelSpec.check`)."""
    dtype = DTYPES[spec.dtype]
    spec.check()
    if spec.early_exit:
        t = load_model(spec.target_path(), spec.device, dtype)
        d = early_exit_draft(t.model, spec.draft_layers)
        return LoadedPair(d, t.model, t.tokenizer, spec.describe(),
                          {"draft": 0.0, "target": t.load_seconds})
    d, t = load_pair(spec.draft_path(), spec.target_path(), spec.device, dtype)
    return LoadedPair(d.model, t.model, d.tokenizer, spec.describe(),
                      {"draft": d.load_seconds, "target": t.load_seconds})


__all__ = ["PAIRS", "DTYPES", "LoadedModel", "LoadedPair", "ModelSpec", "gguf_vocab_size",
           "declared_vocab_size", "declared_layers", "check_pair", "load_model", "load_pair",
           "early_exit_draft", "load_models"]
