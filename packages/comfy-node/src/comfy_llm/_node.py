"""The ``ModalLLM`` V3 node: ComfyUI's face of comfy-llm.

The node id and input names are the seed system's, so workflows saved with it
load unchanged; outputs stay ``response, metadata_json, reasoning`` in that
order (reasoning was appended last to keep saved link indices valid).
Everything ComfyUI-specific that happens at run time lives in ``_comfy_glue``;
the request itself follows the same path as ``comfy-llm run``.
"""

from __future__ import annotations

from typing import Any

from comfy_api.latest import ComfyExtension, io
from comfy_llm_core import defaults

__all__ = ["NODE_ID", "ComfyLLMExtension", "ModalLLMNode", "build_extension"]

NODE_ID = "ModalLLM"
MODAL_GPUS = ("L4", "L40S", "A100-40GB", "A100-80GB", "H100", "H200", "B200", "RTX-PRO-6000")
_DEFAULT_MODEL = "HuggingFaceTB/SmolVLM-256M-Instruct"


class ModalLLMNode(io.ComfyNode):
    """Answer a prompt about images, video and files with a multimodal LLM."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        """Declare inputs and outputs (names kept from the seed node)."""
        return io.Schema(
            node_id=NODE_ID,
            display_name="Multimodal LLM (comfy-llm)",
            category="comfy-llm",
            description=(
                "Runs a Hugging Face vision-language model in this ComfyUI process "
                "(MLX-VLM on Apple Silicon, Transformers on NVIDIA or CPU) or on Modal."
            ),
            inputs=[
                io.String.Input("prompt", multiline=True, default="Describe the image."),
                io.String.Input(
                    "model_profile",
                    default=_DEFAULT_MODEL,
                    tooltip="A curated profile id or a Hugging Face id owner/model[@revision].",
                ),
                io.Image.Input("images", optional=True),
                io.Video.Input("video", optional=True),
                io.Custom("OPENAI_INPUT_FILES").Input("files", optional=True),
                io.String.Input("system_prompt", multiline=True, default="", optional=True),
                io.Int.Input(
                    "max_new_tokens",
                    default=defaults.MAX_NEW_TOKENS,
                    min=1,
                    max=32768,
                    optional=True,
                ),
                io.Boolean.Input("enable_reasoning", default=True, optional=True),
                io.Float.Input(
                    "temperature",
                    default=defaults.TEMPERATURE,
                    min=0.0,
                    max=2.0,
                    step=0.05,
                    optional=True,
                ),
                io.Float.Input(
                    "top_p", default=defaults.TOP_P, min=0.01, max=1.0, step=0.01, optional=True
                ),
                io.Int.Input("seed", default=0, min=0, max=2**32 - 1, optional=True),
                io.Int.Input(
                    "video_frames", default=defaults.VIDEO_FRAMES, min=1, max=256, optional=True
                ),
                io.Float.Input(
                    "reserve_free_vram_gb",
                    default=defaults.RESERVE_GB["local_cuda"],
                    min=0.0,
                    max=512.0,
                    optional=True,
                ),
                io.Boolean.Input("keep_model_loaded", default=True, optional=True),
                io.Float.Input(
                    "local_reserve_free_memory_gb",
                    default=defaults.RESERVE_GB["local_apple"],
                    min=0.0,
                    max=512.0,
                    optional=True,
                ),
                io.Boolean.Input("run_on_modal", default=False, optional=True),
                io.Combo.Input(
                    "modal_gpu", options=list(MODAL_GPUS), default="L40S", optional=True
                ),
                # New inputs go last: saved workflows keep their widget order.
                io.String.Input(
                    "response_schema",
                    multiline=True,
                    default="",
                    optional=True,
                    tooltip=(
                        "Optional JSON Schema: the answer is constrained to JSON that satisfies "
                        "it and validated (one retry). Empty = free text."
                    ),
                ),
            ],
            outputs=[
                io.String.Output("response", display_name="response"),
                io.String.Output("metadata_json", display_name="metadata_json"),
                io.String.Output("reasoning", display_name="reasoning"),
            ],
            hidden=[io.Hidden.unique_id],
            not_idempotent=True,
        )

    @classmethod
    def execute(cls, prompt: str, model_profile: str, **optional: Any) -> io.NodeOutput:
        """Run one request; returns response, metadata_json and reasoning."""
        from comfy_llm._node_run import run_node

        node_id = getattr(cls.hidden, "unique_id", None) if cls.hidden is not None else None
        response, metadata_json, reasoning = run_node(
            prompt=prompt, model_profile=model_profile, node_id=node_id, **optional
        )
        return io.NodeOutput(response, metadata_json, reasoning)


class ComfyLLMExtension(ComfyExtension):
    """The extension ComfyUI loads through ``comfy_entrypoint``."""

    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        """List the nodes this package provides."""
        from comfy_llm._caption_node import CaptionImagesNode

        return [ModalLLMNode, CaptionImagesNode]


def build_extension() -> ComfyLLMExtension:
    """Create the extension object returned by ``comfy_entrypoint``."""
    return ComfyLLMExtension()
