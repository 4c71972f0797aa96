"""A wider random GGUF for benchmarks: per-token engine time closer to a real model's.

The test world's tiny SmolVLM is 64 wide with 2 layers: llama.cpp decodes a
token of it in tens to hundreds of microseconds, so any per-token work of the
caller (progress, Cancel check, live text) weighs far more against it than
against a real 4B-8B GGUF (10-50 ms a token). This writes the same pair (a
llama GGUF with the same vocabulary, tokenizer and chat template, and the same
tiny vision projector) but with random text weights of a chosen width and
depth and a projection to that width, converted by the test world's own
converter (``comfy_llm_testworld.gguf_checkpoints``), so its files pass the
same checks before llama.cpp sees them.

    uv run --frozen python bench/wide_gguf.py bench/results/wide --hidden 1024 --layers 8
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

WIDE_NAME = "bench-wide-Q8_0.gguf"
WIDE_MMPROJ_NAME = "mmproj-bench-wide-F32.gguf"


def write_wide_gguf(
    dest: Path, *, hidden: int = 1024, layers: int = 8, head_dim: int = 64, seed: int = 0
) -> Path:
    """Write ``dest/bench-wide-Q8_0.gguf`` (Q8_0 text weights) and its projector."""
    import numpy as np
    from comfy_llm_testworld.checkpoints import build_checkpoint_files
    from comfy_llm_testworld.gguf_checkpoints import _mmproj_gguf, _text_gguf
    from safetensors.numpy import load, save

    files = dict(build_checkpoint_files("smolvlm"))
    config = json.loads(files["config.json"])
    text = config["text_config"]
    heads = hidden // head_dim
    kv_heads = max(1, heads // 4)
    ffn = (hidden * 11 // 4 + 63) // 64 * 64
    vocab = text["vocab_size"]
    text.update(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=ffn,
    )
    rng = np.random.default_rng(seed)

    def weight(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(cols)).astype(
            np.float32
        )

    tensors = {
        name: value
        for name, value in load(files["model.safetensors"]).items()
        if "vision_model" in name
    }
    connector = "model.connector.modality_projection.proj.weight"
    tensors[connector] = weight(hidden, load(files["model.safetensors"])[connector].shape[1])
    tensors |= {
        "lm_head.weight": weight(vocab, hidden),
        "model.text_model.embed_tokens.weight": weight(vocab, hidden),
        "model.text_model.norm.weight": np.ones(hidden, np.float32),
    }
    for index in range(layers):
        prefix = f"model.text_model.layers.{index}."
        tensors |= {
            prefix + "input_layernorm.weight": np.ones(hidden, np.float32),
            prefix + "post_attention_layernorm.weight": np.ones(hidden, np.float32),
            prefix + "self_attn.q_proj.weight": weight(heads * head_dim, hidden),
            prefix + "self_attn.k_proj.weight": weight(kv_heads * head_dim, hidden),
            prefix + "self_attn.v_proj.weight": weight(kv_heads * head_dim, hidden),
            prefix + "self_attn.o_proj.weight": weight(hidden, heads * head_dim),
            prefix + "mlp.gate_proj.weight": weight(ffn, hidden),
            prefix + "mlp.up_proj.weight": weight(ffn, hidden),
            prefix + "mlp.down_proj.weight": weight(hidden, ffn),
        }
    files["config.json"] = json.dumps(config).encode()
    files["model.safetensors"] = save(tensors)
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / WIDE_NAME
    _text_gguf(files, "Q8_0", path, None)
    _mmproj_gguf(files, dest / WIDE_MMPROJ_NAME)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    args = parser.parse_args()
    path = write_wide_gguf(args.dest, hidden=args.hidden, layers=args.layers)
    print(f"{path} ({path.stat().st_size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
