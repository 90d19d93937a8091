"""Tiny causal LMs built locally (random weights, tiny vocabulary) and tiny GGUF files written with
the ``gguf`` package: the test fixtures that exercise the real loading and decoding code without
any download."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

#: Hugging Face Qwen2 parameter name pieces -> GGUF tensor names (gguf-py's qwen2 layout).
_GGUF_LAYER = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}
_GGUF_TOP = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}


def tiny_qwen2(vocab_size: int = 5, seed: int = 0, hidden: int = 16, layers: int = 2,
               scale: float = 4.0, dtype=torch.float64):
    """A random 2-layer Qwen2 causal LM; ``scale`` multiplies the weight matrices so that the
    conditionals are far from uniform (and differ a lot between seeds)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=2, num_key_value_heads=1, intermediate_size=2 * hidden,
                      max_position_embeddings=256, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg).to(dtype).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(scale)
    return model


def write_gguf(model, path: str | Path, n_tokens: int | None = None) -> Path:
    """Write a Qwen2 model's weights (float32) and a placeholder tokenizer to a GGUF file.
    ``n_tokens`` (default: the model's vocabulary) is the declared tokenizer size."""
    import gguf

    cfg = model.config
    V = cfg.vocab_size
    n_tokens = V if n_tokens is None else n_tokens
    path = Path(path)
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_name("tiny-qwen2")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    rope = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    w.add_rope_freq_base(float(rope))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(n_tokens)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(n_tokens)])
    w.add_token_types([1] * n_tokens)
    for k, v in model.state_dict().items():
        if k in _GGUF_TOP:
            name = _GGUF_TOP[k]
        else:
            parts = k.split(".")  # model.layers.<i>.<module...>.<weight|bias>
            name = f"blk.{parts[2]}.{_GGUF_LAYER['.'.join(parts[3:-1])]}.{parts[-1]}"
        w.add_tensor(name, v.detach().to(torch.float32).numpy().astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def char_tokenizer(vocab_size: int):
    """A byte-level BPE tokenizer (the Qwen2 class) without merges over the letters ``a, b, ...``
    (id i for the i-th letter): text made of those letters encodes to one id per letter."""
    from transformers import Qwen2Tokenizer

    return Qwen2Tokenizer(vocab={chr(ord("a") + i): i for i in range(vocab_size)}, merges=[])


def write_folder(model, path: str | Path) -> Path:
    """Save a tiny model with `char_tokenizer` as a Hugging Face folder (config.json,
    weights, tokenizer), loadable by `spectheory.gpu_validation.hf_models.load_model`."""
    path = Path(path)
    model.save_pretrained(path)
    char_tokenizer(model.config.vocab_size).save_pretrained(path)
    return path
