"""The engine's GGUF rules: what a model file and a projector file must declare.

:mod:`_gguf_format` checks that the bytes are a well-formed, bounded GGUF;
this module checks that what they declare is something this engine loads: a
text architecture from :data:`TEXT_ARCHITECTURES` with a consistent
tokenizer, or a ``clip`` projector of a vision type from
:data:`VISION_PROJECTORS` whose output width matches the model's. Both run
in Python, before any path reaches llama.cpp; a file that fails is refused
with :class:`~comfy_llm_profiles.errors.UnsafeGgufError` naming the
file and the rule.

Names are llama.cpp's own (``src/llama-arch.cpp`` ``LLM_ARCH_NAMES`` and
``tools/mtmd/clip-impl.h`` ``PROJECTOR_TYPE_NAMES`` of the llama.cpp that
llama-cpp-python 0.3.36 vendors); the tests check each one against the
strings of the built libraries.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Final

from comfy_llm_profiles._gguf_format import (
    GGUF_LIMITS,
    GgufFile,
    GgufFormatError,
    GgufLimits,
    read_gguf,
)
from comfy_llm_profiles.errors import UnsafeGgufError

__all__ = [
    "FILE_TYPES",
    "TEXT_ARCHITECTURES",
    "VISION_PROJECTORS",
    "GgufModel",
    "GgufProjector",
    "check_model_file",
    "check_projector_file",
]

#: Decoder-only text architectures with chat models (and, for most, a vision
#: projector) that this engine loads. Encoders, embedding and speech models
#: llama.cpp also reads are not text generators for the node.
TEXT_ARCHITECTURES: Final = frozenset(
    {
        "llama",
        "llama4",
        "mistral3",
        "qwen2",
        "qwen2vl",
        "qwen3",
        "qwen3moe",
        "qwen3vl",
        "qwen3vlmoe",
        "qwen35",
        "qwen35moe",
        "gemma3",
        "gemma4",
        "glm4",
        "glm4moe",
        "lfm2",
        "phi3",
        "minicpm",
        "internlm2",
        "smollm3",
    }
)

#: Projector types (``clip.projector_type``) that turn images into the model's
#: embeddings. Audio projectors are refused until the node takes audio.
VISION_PROJECTORS: Final = frozenset(
    {
        "mlp",
        "ldp",
        "ldpv2",
        "resampler",
        "qwen2vl_merger",
        "qwen2.5vl_merger",
        "qwen3vl_merger",
        "gemma3",
        "gemma4v",
        "idefics3",
        "pixtral",
        "internvl",
        "llama4",
        "lfm2",
        "glm4v",
        "kimivl",
    }
)

#: ``general.file_type`` (llama.h ``llama_ftype``) -> the quantization's usual name.
FILE_TYPES: Final = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
    41: "Q2_0",
}

_MAX_LAYERS: Final = 512  # LLAMA_MAX_LAYERS (src/llama-hparams.h:11)
_MAX_IMAGE_SIDE: Final = 8192
_MAX_VISION_LAYERS: Final = 256
_MAX_WIDTH: Final = 1 << 17


@dataclasses.dataclass(frozen=True, slots=True)
class GgufModel:
    """A checked model file.

    Attributes:
        file: What the file declares.
        architecture: ``general.architecture``.
        layers: ``<arch>.block_count``.
        embedding_width: ``<arch>.embedding_length``.
        context_tokens: ``<arch>.context_length`` (None when absent).
        quantization: The file type's name (``Q4_K_M``, ``F16``, ...), or None.
        chat_template: ``tokenizer.chat_template``, or None.
        tokens: ``tokenizer.ggml.tokens``.
        token_types: ``tokenizer.ggml.token_type`` (empty when absent).
    """

    file: GgufFile
    architecture: str
    layers: int
    embedding_width: int
    context_tokens: int | None
    quantization: str | None
    chat_template: str | None
    tokens: tuple[str, ...]
    token_types: tuple[int, ...]

    @property
    def path(self) -> Path:
        """The file."""
        return self.file.path

    @property
    def weight_bytes(self) -> int:
        """Bytes of tensor data."""
        return sum(tensor.nbytes for tensor in self.file.tensors)


@dataclasses.dataclass(frozen=True, slots=True)
class GgufProjector:
    """A checked vision projector (``mmproj``) file.

    Attributes:
        file: What the file declares.
        projector_type: ``clip.projector_type``.
        output_width: ``clip.vision.projection_dim`` (None when absent).
    """

    file: GgufFile
    projector_type: str
    output_width: int | None

    @property
    def path(self) -> Path:
        """The file."""
        return self.file.path

    @property
    def weight_bytes(self) -> int:
        """Bytes of tensor data."""
        return sum(tensor.nbytes for tensor in self.file.tensors)


def _read(path: Path, limits: GgufLimits) -> GgufFile:
    try:
        return read_gguf(path, limits)
    except GgufFormatError as error:
        raise UnsafeGgufError(str(path), error.reason) from None
    except OSError as error:
        raise UnsafeGgufError(str(path), f"it cannot be read ({error.strerror or error})") from None


def _bounded(path: Path, gguf: GgufFile, key: str, low: int, high: int) -> int:
    value = gguf.integer(key)
    if value is None:
        raise UnsafeGgufError(str(path), f"{key} is missing or not an integer")
    if not low <= value <= high:
        raise UnsafeGgufError(str(path), f"{key} is {value}; {low} to {high} allowed")
    return value


def _not_split(path: Path, gguf: GgufFile) -> None:
    count = gguf.integer("split.count")
    if count is not None and count != 1:
        raise UnsafeGgufError(
            str(path),
            f"it is one part of a split GGUF (split.count={count}); merge the parts into one "
            "file first (llama-gguf-split --merge)",
        )


def _tokenizer(path: Path, gguf: GgufFile) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Check the tokenizer arrays llama.cpp indexes by token id against each other."""
    tokens = gguf.metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, tuple) or not tokens or not isinstance(tokens[0], str):
        raise UnsafeGgufError(str(path), "tokenizer.ggml.tokens is missing or not a string list")
    if not isinstance(gguf.string("tokenizer.ggml.model"), str):
        raise UnsafeGgufError(str(path), "tokenizer.ggml.model is missing")
    for key in ("tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
        values = gguf.metadata.get(key)
        if values is not None and (not isinstance(values, tuple) or len(values) != len(tokens)):
            size = len(values) if isinstance(values, tuple) else "not a list"
            raise UnsafeGgufError(str(path), f"{key} has {size} entries for {len(tokens)} tokens")
    for key, value in gguf.metadata.items():
        is_id = key.startswith("tokenizer.ggml.") and key.endswith("_token_id")
        if is_id and (
            not isinstance(value, int) or isinstance(value, bool) or value >= len(tokens)
        ):
            raise UnsafeGgufError(
                str(path), f"{key} is {value!r}, not a token id below {len(tokens)}"
            )
    types = gguf.metadata.get("tokenizer.ggml.token_type", ())
    token_types = tuple(int(t) for t in types) if isinstance(types, tuple) else ()
    return tokens, token_types


def check_model_file(path: Path | str, limits: GgufLimits = GGUF_LIMITS) -> GgufModel:
    """Check a model GGUF before llama.cpp reads it.

    Args:
        path: The file.
        limits: Format bounds (defaults: ``GGUF_LIMITS``).

    Returns:
        What the checked file declares.

    Raises:
        UnsafeGgufError: The file breaks a format bound or is not a text model
            this engine loads; the message names the file and the rule.
    """
    path = Path(path)
    gguf = _read(path, limits)
    architecture = gguf.string("general.architecture")
    if architecture is None:
        raise UnsafeGgufError(str(path), "general.architecture is missing")
    if architecture == "clip":
        raise UnsafeGgufError(
            str(path), "it is a vision projector (mmproj), not a model; pass it as the projector"
        )
    if architecture not in TEXT_ARCHITECTURES:
        raise UnsafeGgufError(
            str(path),
            f"architecture {architecture!r} is not one this engine loads "
            f"({', '.join(sorted(TEXT_ARCHITECTURES))})",
        )
    _not_split(path, gguf)
    if not gguf.tensors:
        raise UnsafeGgufError(str(path), "it holds no tensors")
    layers = _bounded(path, gguf, f"{architecture}.block_count", 1, _MAX_LAYERS)
    width = _bounded(path, gguf, f"{architecture}.embedding_length", 1, _MAX_WIDTH)
    tokens, token_types = _tokenizer(path, gguf)
    file_type = gguf.integer("general.file_type")
    return GgufModel(
        file=gguf,
        architecture=architecture,
        layers=layers,
        embedding_width=width,
        context_tokens=gguf.integer(f"{architecture}.context_length"),
        quantization=FILE_TYPES.get(file_type) if file_type is not None else None,
        chat_template=gguf.string("tokenizer.chat_template"),
        tokens=tokens,
        token_types=token_types,
    )


def check_projector_file(
    path: Path | str, model: GgufModel | None = None, limits: GgufLimits = GGUF_LIMITS
) -> GgufProjector:
    """Check a vision projector (``mmproj``) GGUF before libmtmd reads it.

    Args:
        path: The file.
        model: The checked model it will be paired with; its width must match.
        limits: Format bounds (defaults: ``GGUF_LIMITS``).

    Returns:
        What the checked file declares.

    Raises:
        UnsafeGgufError: The file breaks a format bound, is not a vision
            projector of a supported type, or does not fit the model.
    """
    path = Path(path)
    gguf = _read(path, limits)
    architecture = gguf.string("general.architecture")
    if architecture != "clip":
        raise UnsafeGgufError(
            str(path), f"general.architecture is {architecture!r}, not 'clip' (not a projector)"
        )
    _not_split(path, gguf)
    if gguf.metadata.get("clip.has_vision_encoder") is not True:
        raise UnsafeGgufError(str(path), "it has no vision encoder (clip.has_vision_encoder)")
    projector = gguf.string("clip.vision.projector_type") or gguf.string("clip.projector_type")
    if projector not in VISION_PROJECTORS:
        raise UnsafeGgufError(
            str(path),
            f"projector type {projector!r} is not a vision projector this engine loads "
            f"({', '.join(sorted(VISION_PROJECTORS))})",
        )
    side = _bounded(path, gguf, "clip.vision.image_size", 1, _MAX_IMAGE_SIDE)
    _bounded(path, gguf, "clip.vision.patch_size", 1, side)
    _bounded(path, gguf, "clip.vision.block_count", 1, _MAX_VISION_LAYERS)
    _bounded(path, gguf, "clip.vision.embedding_length", 1, _MAX_WIDTH)
    if not gguf.tensors:
        raise UnsafeGgufError(str(path), "it holds no tensors")
    output = gguf.integer("clip.vision.projection_dim")
    if model is not None and output is not None and output != model.embedding_width:
        raise UnsafeGgufError(
            str(path),
            f"it projects to width {output}, but the model {model.path.name} has width "
            f"{model.embedding_width}: it is another model's projector",
        )
    return GgufProjector(file=gguf, projector_type=str(projector), output_width=output)
