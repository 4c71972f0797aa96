"""Tiny GGUF models for the llama.cpp engine: the tiny SmolVLM as model + mmproj.

The test world's tiny SmolVLM checkpoint (:mod:`comfy_llm_testworld.checkpoints`,
a Llama text model behind a one-block SigLIP tower and an Idefics3 connector)
is converted offline with the ``gguf`` package into the two files a llama.cpp
user keeps side by side: the text model (``general.architecture = llama``)
and its vision projector (``clip``, projector type ``idefics3``).

The conversion is the one llama.cpp's own ``convert_hf_to_gguf.py`` (as
vendored by llama-cpp-python 0.3.36: ``conversion/llama.py``,
``conversion/smolvlm.py``, ``conversion/base.py``) does for this
architecture, key for key and tensor for tensor: names through gguf's tensor
map, Q/K rows permuted for llama.cpp's rotary layout (``LlamaModel.permute``),
the byte-level BPE vocabulary with added special tokens as CONTROL and
``<think>``/``</think>`` as USER_DEFINED. With the same ``general.name`` the
files are byte-identical to that converter's output (checked once by hand,
see the backend README); the converter itself is not used because it only
ships in the llama-cpp-python sdist and refuses this trained tokenizer's
pre-tokenizer hash.

``quantization="Q8_0"`` quantizes the 2-D text weights (gguf's numpy
quantizer), as ``--outtype q8_0`` would; the projector stays F32.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any, Literal

from comfy_llm_testworld.checkpoints import build_checkpoint_files

__all__ = [
    "GGUF_MMPROJ_NAME",
    "GGUF_MODEL_NAME",
    "GgufPair",
    "build_gguf_files",
    "write_gguf_pair",
]

GgufQuantization = Literal["F32", "Q8_0"]

GGUF_MODEL_NAME = "tiny-smolvlm-{quantization}.gguf"
GGUF_MMPROJ_NAME = "mmproj-tiny-smolvlm-F32.gguf"
_NAME = "Smolvlm"


@dataclasses.dataclass(frozen=True)
class GgufPair:
    """A model GGUF and its projector, written side by side.

    Attributes:
        model: The text model file.
        mmproj: The vision projector file.
    """

    model: Path
    mmproj: Path


def _permute(weights: Any, n_head: int) -> Any:
    """Reorder Q/K rows from Hugging Face's rotate-half layout to llama.cpp's pairs."""
    rows = weights.shape[0]
    return (
        weights.reshape(n_head, 2, rows // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _vocabulary(tokenizer_json: bytes) -> tuple[list[str], list[int], list[str]]:
    """Tokens, token types and merges of a byte-level BPE ``tokenizer.json``."""
    import gguf

    data = json.loads(tokenizer_json)
    vocab: dict[str, int] = dict(data["model"]["vocab"])
    types = dict.fromkeys(vocab.values(), int(gguf.TokenType.NORMAL))
    for added in data["added_tokens"]:
        vocab[added["content"]] = added["id"]
        special = gguf.TokenType.CONTROL if added["special"] else gguf.TokenType.USER_DEFINED
        types[added["id"]] = int(special)
    by_id = {token_id: token for token, token_id in vocab.items()}
    tokens = [by_id[i] for i in range(len(by_id))]
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return tokens, [types[i] for i in range(len(tokens))], merges


def _tensors(files: dict[str, bytes]) -> dict[str, Any]:
    from safetensors.numpy import load

    return dict(load(files["model.safetensors"]))


def _text_gguf(
    files: dict[str, bytes], quantization: GgufQuantization, dest: Path, context: int | None
) -> None:
    import gguf
    import numpy as np

    config = json.loads(files["config.json"])
    text = config["text_config"]
    tokenizer_config = json.loads(files["tokenizer_config.json"])
    tokens, types, merges = _vocabulary(files["tokenizer.json"])
    ids = {token: index for index, token in enumerate(tokens)}
    layers, heads, kv_heads = (
        text["num_hidden_layers"],
        text["num_attention_heads"],
        text["num_key_value_heads"],
    )
    writer = gguf.GGUFWriter(dest, "llama")
    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name(_NAME)
    writer.add_size_label("127K")
    writer.add_block_count(layers)
    writer.add_context_length(context or text["max_position_embeddings"])
    writer.add_embedding_length(text["hidden_size"])
    writer.add_feed_forward_length(text["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(text["rope_theta"])
    writer.add_layer_norm_rms_eps(text["rms_norm_eps"])
    writer.add_key_length(text["head_dim"])
    writer.add_value_length(text["head_dim"])
    file_type = (
        gguf.LlamaFileType.MOSTLY_Q8_0 if quantization == "Q8_0" else gguf.LlamaFileType.ALL_F32
    )
    writer.add_file_type(file_type)
    writer.add_vocab_size(len(tokens))
    writer.add_rope_dimension_count(text["head_dim"])
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_add_space_prefix(False)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(ids[tokenizer_config["bos_token"]])
    writer.add_eos_token_id(ids[tokenizer_config["eos_token"]])
    writer.add_unk_token_id(ids[tokenizer_config["unk_token"]])
    writer.add_pad_token_id(ids[tokenizer_config["pad_token"]])
    writer.add_chat_template(files["chat_template.jinja"].decode("utf-8"))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, layers)
    for hf_name, tensor in sorted(_tensors(files).items()):
        if not (hf_name.startswith("model.text_model.") or hf_name == "lm_head.weight"):
            continue
        short = hf_name.replace("text_model.", "")
        value = tensor
        if short.endswith("q_proj.weight"):
            value = _permute(tensor, heads)
        elif short.endswith("k_proj.weight"):
            value = _permute(tensor, kv_heads)
        name = names.get_name(short, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise RuntimeError(f"no GGUF name for {hf_name}")
        array = np.ascontiguousarray(value, dtype=np.float32)
        if quantization == "Q8_0" and array.ndim == 2:
            quantized = gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, array)
    _finish(writer)


def _mmproj_gguf(files: dict[str, bytes], dest: Path) -> None:
    import gguf
    import numpy as np

    config = json.loads(files["config.json"])
    vision = config["vision_config"]
    preprocessor = json.loads(files["preprocessor_config.json"])
    writer = gguf.GGUFWriter(dest, "clip")
    writer.add_type(gguf.GGUFType.MMPROJ)
    writer.add_name(_NAME)
    writer.add_size_label("42K")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_clip_has_vision_encoder(True)
    writer.add_vision_projection_dim(config["text_config"]["hidden_size"])
    writer.add_vision_image_size(vision["image_size"])
    writer.add_vision_patch_size(vision["patch_size"])
    writer.add_vision_embedding_length(vision["hidden_size"])
    writer.add_vision_feed_forward_length(vision["intermediate_size"])
    writer.add_vision_block_count(vision["num_hidden_layers"])
    writer.add_vision_head_count(vision["num_attention_heads"])
    writer.add_vision_image_mean(preprocessor["image_mean"])
    writer.add_vision_image_std(preprocessor["image_std"])
    writer.add_clip_projector_type(gguf.VisionProjectorType.IDEFICS3)
    writer.add_vision_attention_layernorm_eps(vision["layer_norm_eps"])
    writer.add_vision_projector_scale_factor(config["scale_factor"])
    writer.add_vision_use_gelu(True)
    writer.add_vision_preproc_image_size(preprocessor["size"]["longest_edge"])
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, vision["num_hidden_layers"])
    for hf_name, value in sorted(_tensors(files).items()):
        if not ("vision_model" in hf_name or "model.connector" in hf_name):
            continue
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise RuntimeError(f"no GGUF name for {hf_name}")
        writer.add_tensor(name, np.ascontiguousarray(value, dtype=np.float32))
    _finish(writer)


def _finish(writer: Any) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@cache
def _build(scripted: bool, quantization: str, context: int | None) -> tuple[bytes, bytes]:
    files = build_checkpoint_files("smolvlm", scripted=scripted)
    with tempfile.TemporaryDirectory(prefix="comfy-llm-gguf-") as folder:
        model, mmproj = Path(folder, "model.gguf"), Path(folder, "mmproj.gguf")
        _text_gguf(files, quantization, model, context)  # type: ignore[arg-type]
        _mmproj_gguf(files, mmproj)
        return model.read_bytes(), mmproj.read_bytes()


def build_gguf_files(
    *,
    scripted: bool = False,
    quantization: GgufQuantization = "F32",
    context_tokens: int | None = None,
) -> dict[str, bytes]:
    """The model and projector GGUF files of the tiny SmolVLM, in memory.

    Args:
        scripted: Convert the scripted checkpoint (greedy decoding follows the
            fixed chain of :mod:`comfy_llm_testworld.checkpoints`).
        quantization: ``"F32"`` or ``"Q8_0"`` for the text weights.
        context_tokens: ``llama.context_length`` to declare instead of the
            checkpoint's 4096 (a long context makes the KV cache big enough
            for memory measurements).

    Returns:
        File name -> content: :data:`GGUF_MODEL_NAME` (with the quantization)
        and :data:`GGUF_MMPROJ_NAME`. Cached per process; a fresh dict per call.
    """
    model, mmproj = _build(bool(scripted), quantization, context_tokens)
    return {GGUF_MODEL_NAME.format(quantization=quantization): model, GGUF_MMPROJ_NAME: mmproj}


def write_gguf_pair(
    dest: Path,
    *,
    scripted: bool = False,
    quantization: GgufQuantization = "F32",
    context_tokens: int | None = None,
) -> GgufPair:
    """Write the tiny SmolVLM's model and projector GGUF files into ``dest``.

    Args:
        dest: The folder (created if missing).
        scripted: Convert the scripted checkpoint.
        quantization: ``"F32"`` or ``"Q8_0"`` for the text weights.
        context_tokens: ``llama.context_length`` to declare (see ``build_gguf_files``).

    Returns:
        The two paths.
    """
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    built = build_gguf_files(
        scripted=scripted, quantization=quantization, context_tokens=context_tokens
    )
    for name, content in built.items():
        path = dest / name
        path.write_bytes(content)
        paths.append(path)
    return GgufPair(model=paths[0], mmproj=paths[1])
