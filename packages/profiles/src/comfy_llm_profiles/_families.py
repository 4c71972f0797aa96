"""The reviewed model families: one record each, everything the review decided.

A family is what the registries of every target share about a model line:
its architectures, modalities (with why), reasoning parser, the engines it
was reviewed on (in order of preference), their family-specific options, and
any reviewed caps on its limits or quantizations. Which of its engines a
target uses follows from where each engine runs (``EngineSpec.targets``), so
adding a reviewed family is one record here plus a version bump of each
target it reaches (``_registry``); an architecture that is in no record is
refused before any download (``_decide``).

Modalities are a review claim, each written down with its reason: a family
gets ``video`` only where the model was trained for it and its processor
takes it, so a request with a video is refused up front rather than fed to a
model that never saw one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["FAMILIES", "Family", "family_of"]

_Options = tuple[tuple[str, str | int | float | bool], ...]


@dataclass(frozen=True, slots=True)
class Family:
    """One reviewed model line.

    Attributes:
        name: Short name (``qwen3_5``, ``qwen2_vl``, ``gemma3``, ``llava``, ...);
            curated entries name it.
        architectures: ``(architectures[0], model_type)`` pairs of config.json.
        moe_architectures: The mixture-of-experts members (left out on CPU).
        modalities: Inputs the family accepts.
        modality_reason: One line: why these modalities.
        reasoning_parser: ``qwen3`` or ``none``.
        allow_mixed_image_video: Whether images and video may share a request.
        engines: Engines it was reviewed on, in order of preference (names in
            ``ENGINES``); on each target the first available one that loads
            the checkpoint's format runs it.
        engine_options: Family-specific backend options per engine (part of
            the profile identity).
        quantizations: Quantization methods reviewed for it, None for whatever
            its engines load.
        limits: Reviewed caps on :class:`ProfileLimits` values (e.g. one image
            per request); a target's or curated entry's value above a cap is
            lowered to it.
        gguf: How llama.cpp's converter writes the family as GGUF:
            ``(general.architecture, projector type, architectures[0])`` triples;
            projector type ``""`` admits the model file without a projector
            (text only). A GGUF matching no triple of a family is not reviewed.
        refused_engines: ``(engine, why)`` for each engine the review found
            cannot run it at the pinned version; a target left with no engine
            refuses the family with that reason.
    """

    name: str
    architectures: tuple[tuple[str, str], ...]
    moe_architectures: frozenset[str]
    modalities: tuple[str, ...]
    modality_reason: str
    reasoning_parser: str
    allow_mixed_image_video: bool
    engines: tuple[str, ...]
    engine_options: tuple[tuple[str, _Options], ...] = ()
    quantizations: tuple[str, ...] | None = None
    limits: tuple[tuple[str, int], ...] = ()
    gguf: tuple[tuple[str, str, str], ...] = ()
    refused_engines: tuple[tuple[str, str], ...] = ()

    def options_for(self, engine: str) -> dict[str, str | int | float | bool]:
        """Family-specific options for ``engine``."""
        return dict(dict(self.engine_options).get(engine, ()))


_WITH_VIDEO = ("text", "image", "video", "file")
_NO_VIDEO = ("text", "image", "file")
# Reviewed on Transformers (CUDA, CPU, Modal) and MLX-VLM (Apple).
_TRANSFORMERS_MLX = ("transformers", "mlx_vlm")
# ... and as GGUF on llama.cpp (local targets; libmtmd for images, no video).
_WITH_LLAMACPP = (*_TRANSFORMERS_MLX, "llama_cpp")
# The GGUF names below are what the converter vendored by llama-cpp-python 0.3.36
# writes: conversion/qwen.py:652-662 (Qwen3.5 -> qwen35/qwen35moe), conversion/qwen3vl.py
# :16,28,280-306 (Qwen3-VL -> qwen3vl/qwen3vlmoe; both projectors qwen3vl_merger),
# conversion/smolvlm.py:11,25 (Idefics3 and SmolVLM -> a llama model + idefics3 projector).
_QWEN3VL_MERGER = "qwen3vl_merger"

FAMILIES: Final = {
    family.name: family
    for family in (
        Family(
            name="qwen3_5",
            architectures=(
                ("Qwen3_5ForConditionalGeneration", "qwen3_5"),
                ("Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe"),
            ),
            moe_architectures=frozenset({"Qwen3_5MoeForConditionalGeneration"}),
            modalities=_WITH_VIDEO,
            modality_reason=(
                "Qwen3.5 is natively multimodal: one vision encoder for images and video "
                "(config.json carries video_token_id; the processor has a video processor)."
            ),
            reasoning_parser="qwen3",
            allow_mixed_image_video=True,
            # vLLM first where it is installed (local_cuda falls back on Transformers).
            engines=("vllm", "transformers", "mlx_vlm", "llama_cpp"),
            # The seed hands MLX a thinking budget of half of max_new_tokens.
            engine_options=(("mlx_vlm", (("thinking_budget_fraction", 0.5),)),),
            gguf=(
                ("qwen35", _QWEN3VL_MERGER, "Qwen3_5ForConditionalGeneration"),
                ("qwen35", "", "Qwen3_5ForConditionalGeneration"),
                ("qwen35moe", _QWEN3VL_MERGER, "Qwen3_5MoeForConditionalGeneration"),
                ("qwen35moe", "", "Qwen3_5MoeForConditionalGeneration"),
            ),
        ),
        Family(
            name="qwen3_vl",
            architectures=(
                ("Qwen3VLForConditionalGeneration", "qwen3_vl"),
                ("Qwen3VLMoeForConditionalGeneration", "qwen3_vl_moe"),
            ),
            moe_architectures=frozenset({"Qwen3VLMoeForConditionalGeneration"}),
            modalities=_WITH_VIDEO,
            modality_reason=(
                "Qwen3-VL is trained for video understanding with text-timestamp alignment "
                "(model card); config.json carries video_token_id, the processor takes video."
            ),
            # Instruct checkpoints emit no <think> (all response); Thinking ones share the
            # architecture and do.
            reasoning_parser="qwen3",
            allow_mixed_image_video=True,
            engines=_WITH_LLAMACPP,
            gguf=(
                ("qwen3vl", _QWEN3VL_MERGER, "Qwen3VLForConditionalGeneration"),
                ("qwen3vl", "", "Qwen3VLForConditionalGeneration"),
                ("qwen3vlmoe", _QWEN3VL_MERGER, "Qwen3VLMoeForConditionalGeneration"),
                ("qwen3vlmoe", "", "Qwen3VLMoeForConditionalGeneration"),
            ),
        ),
        Family(
            name="smolvlm2",
            architectures=(("SmolVLMForConditionalGeneration", "smolvlm"),),
            moe_architectures=frozenset(),
            modalities=_WITH_VIDEO,
            modality_reason=(
                "SmolVLM2 added video to SmolVLM's training mix (its model cards report "
                "Video-MME scores) and SmolVLMProcessor takes video."
            ),
            reasoning_parser="none",
            # The seed's reviewed SmolVLM2 limits: one kind of visual input per request.
            allow_mixed_image_video=False,
            engines=_TRANSFORMERS_MLX,
        ),
        Family(
            name="smolvlm",
            architectures=(("Idefics3ForConditionalGeneration", "idefics3"),),
            moe_architectures=frozenset(),
            modalities=_NO_VIDEO,
            modality_reason=(
                "SmolVLM (v1, Idefics3 architecture) was trained on image-text data only: its "
                "model cards claim no video and Idefics3Processor has no video input."
            ),
            reasoning_parser="none",
            allow_mixed_image_video=False,
            engines=_WITH_LLAMACPP,
            # A SmolVLM or SmolVLM2 GGUF is a plain llama model + an idefics3 projector; the
            # projector is what says SmolVLM, so a llama file alone matches nothing here.
            # Both lines land in this family (images, no video: llama.cpp takes no video).
            gguf=(("llama", "idefics3", "Idefics3ForConditionalGeneration"),),
        ),
        Family(
            name="muse_glimmer",
            architectures=(("MuseGlimmerForConditionalGeneration", "muse_glimmer"),),
            moe_architectures=frozenset(),
            modalities=_NO_VIDEO,
            modality_reason=(
                "Video is not reviewed: no model card or processor of this family was "
                "available to check, so it takes images and files (as the seed ran it) only."
            ),
            reasoning_parser="none",
            allow_mixed_image_video=False,
            engines=_TRANSFORMERS_MLX,
        ),
        # Issue 29's captioner families; the evidence of each record (engines, placement,
        # modalities, limits, with source lines) is packages/profiles/reviews/<family>.md.
        Family(
            name="qwen2_vl",
            architectures=(
                ("Qwen2VLForConditionalGeneration", "qwen2_vl"),
                ("Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl"),
            ),
            moe_architectures=frozenset(),
            modalities=_WITH_VIDEO,
            modality_reason=(
                "Qwen2-VL and Qwen2.5-VL were trained on video (model cards: long videos, "
                "dynamic-FPS training) and Qwen2VLProcessor has a video processor."
            ),
            reasoning_parser="none",
            allow_mixed_image_video=True,
            engines=("vllm", "transformers", "mlx_vlm"),
        ),
        Family(
            name="gemma3",
            architectures=(("Gemma3ForConditionalGeneration", "gemma3"),),
            moe_architectures=frozenset(),
            modalities=_NO_VIDEO,
            modality_reason=(
                "Gemma 3 takes text and images (model card); neither Gemma3Processor nor "
                "vLLM's gemma3_mm takes video."
            ),
            reasoning_parser="none",
            allow_mixed_image_video=False,
            engines=_TRANSFORMERS_MLX,
            refused_engines=(
                (
                    "vllm",
                    "vLLM 0.32 runs it, but comfy-llm's vLLM memory terms do not model "
                    "its sliding-window layers yet",
                ),
            ),
        ),
        Family(
            name="llava",
            architectures=(("LlavaForConditionalGeneration", "llava"),),
            moe_architectures=frozenset(),
            modalities=_NO_VIDEO,
            modality_reason=(
                "LLaVA-1.5 and JoyCaption Beta One were trained on single images (Transformers' "
                "LLaVA docs: not trained for several images a prompt); video is LLaVA-NeXT-Video."
            ),
            reasoning_parser="none",
            allow_mixed_image_video=False,
            # vLLM first where it is installed: both CUDA engines render a template that
            # reads content as a string (JoyCaption's) with the text alone.
            engines=("vllm", "transformers"),
            limits=(("max_images", 1),),
            refused_engines=(
                (
                    "mlx_vlm",
                    "MLX-VLM 0.7.10's LlavaProcessor passes 'padding' to Transformers "
                    "5.24's image processor, which refuses it, so every request fails",
                ),
            ),
        ),
        Family(
            name="llava_next",
            architectures=(("LlavaNextForConditionalGeneration", "llava_next"),),
            moe_architectures=frozenset(),
            modalities=_NO_VIDEO,
            modality_reason=(
                "LLaVA-NeXT (v1.6) was trained on images (AnyRes tiles); its video line is a "
                "separate architecture (LlavaNextVideo)."
            ),
            reasoning_parser="none",
            allow_mixed_image_video=False,
            engines=("vllm", "transformers", "mlx_vlm"),
        ),
        Family(
            name="mllama",
            architectures=(("MllamaForConditionalGeneration", "mllama"),),
            moe_architectures=frozenset(),
            modalities=_NO_VIDEO,
            modality_reason=(
                "Llama 3.2 Vision takes one image through cross-attention (model card); "
                "MllamaProcessor has no video input."
            ),
            reasoning_parser="none",
            allow_mixed_image_video=False,
            engines=_TRANSFORMERS_MLX,
            limits=(("max_images", 1),),
            refused_engines=(("vllm", "vLLM removed Mllama in 0.10.2"),),
        ),
        Family(
            name="internvl",
            architectures=(("InternVLForConditionalGeneration", "internvl"),),
            moe_architectures=frozenset(),
            modalities=_WITH_VIDEO,
            modality_reason=(
                "InternVL 3 was trained with video data (model card: Video-MME) and "
                "InternVLProcessor has a video processor."
            ),
            reasoning_parser="none",
            allow_mixed_image_video=True,
            engines=("vllm", "transformers"),
            refused_engines=(
                (
                    "mlx_vlm",
                    "MLX-VLM 0.7.10's internvl reads a Qwen3 text config, so InternVL "
                    "3's Qwen2.5 text does not load (InternVL 3.5 is MLX's route)",
                ),
            ),
        ),
        Family(
            name="mistral3",
            architectures=(("Mistral3ForConditionalGeneration", "mistral3"),),
            moe_architectures=frozenset(),
            modalities=_NO_VIDEO,
            modality_reason=(
                "Mistral Small 3.x takes text and images (model card); PixtralProcessor and "
                "vLLM's mistral3 take no video."
            ),
            reasoning_parser="none",
            allow_mixed_image_video=False,
            engines=("vllm", "transformers", "mlx_vlm"),
        ),
        Family(
            name="glm4v",
            architectures=(("Glm4vForConditionalGeneration", "glm4v"),),
            moe_architectures=frozenset(),
            modalities=_WITH_VIDEO,
            modality_reason=(
                "GLM-4.1V is trained for video understanding (model card) and Glm4vProcessor "
                "has a video processor."
            ),
            # It opens and closes <think> itself: the qwen3 split (the same tags) applies.
            reasoning_parser="qwen3",
            allow_mixed_image_video=True,
            engines=("vllm", "transformers", "mlx_vlm"),
        ),
        Family(
            name="lfm2_vl",
            architectures=(("Lfm2VlForConditionalGeneration", "lfm2_vl"),),
            moe_architectures=frozenset(),
            modalities=_NO_VIDEO,
            modality_reason=(
                "LFM2-VL takes text and images (model card); Lfm2VlProcessor and vLLM's "
                "lfm2_vl take no video."
            ),
            reasoning_parser="none",
            allow_mixed_image_video=False,
            engines=_TRANSFORMERS_MLX,
            refused_engines=(
                (
                    "vllm",
                    "vLLM 0.32 runs it, but pads the convolution state into its KV pages, "
                    "which comfy-llm's vLLM memory terms do not model yet",
                ),
            ),
        ),
    )
}
"""Every reviewed family by name."""


def family_of(architecture: str) -> Family | None:
    """The family whose architectures include ``architecture``, or None."""
    for family in FAMILIES.values():
        if any(name == architecture for name, _ in family.architectures):
            return family
    return None
