"""The ``ComfyLLMCaption`` node: one caption per image, caption files for LoRA datasets.

Shares the request path and the resident manager with ``ModalLLM``: the
model loads once for the whole batch. Outputs a ComfyUI output list of
captions (one per image, in order) and one metadata JSON.
"""

from __future__ import annotations

import json
from typing import Any

from comfy_api.latest import io
from comfy_llm_core import defaults

from comfy_llm._node import _supported

__all__ = ["CAPTION_NODE_ID", "CaptionImagesNode"]

CAPTION_NODE_ID = "ComfyLLMCaption"
_DEFAULT_PROMPT = "Describe this image in one detailed sentence, as a caption for training."


class CaptionImagesNode(io.ComfyNode):
    """Caption an IMAGE batch and/or a folder of images with a vision-language model."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        """Declare inputs and outputs."""
        return io.Schema(
            node_id=CAPTION_NODE_ID,
            display_name="Caption images (comfy-llm)",
            category="comfy-llm",
            description=(
                "Captions every image of a batch or a folder under one resident model; "
                "optionally writes <name>.txt next to each image (LoRA training datasets)."
            ),
            inputs=[
                io.String.Input(
                    "model_profile",
                    default="smolvlm-256m-instruct",
                    tooltip="A curated profile id or a Hugging Face id owner/model[@revision].",
                ),
                io.String.Input(
                    "prompt",
                    multiline=True,
                    default=_DEFAULT_PROMPT,
                    tooltip="The instruction given with every image.",
                ),
                io.Image.Input("images", optional=True, tooltip="An IMAGE batch to caption."),
                io.String.Input(
                    "folder",
                    default="",
                    optional=True,
                    tooltip="A folder of images (png, jpg, webp, ...) to caption, sorted by name.",
                ),
                io.String.Input(
                    "caption_prefix",
                    default="",
                    optional=True,
                    tooltip="Text put before every caption, e.g. a LoRA trigger word.",
                ),
                io.Boolean.Input(
                    "write_caption_files",
                    default=False,
                    optional=True,
                    tooltip="Write <name>.txt next to each image from the folder (atomically).",
                ),
                io.Boolean.Input(
                    "skip_existing",
                    default=True,
                    optional=True,
                    tooltip="Keep captions already on disk and do not caption those images.",
                ),
                io.Boolean.Input(
                    "overwrite_captions",
                    default=False,
                    optional=True,
                    tooltip="Replace existing caption files (only with skip_existing off).",
                ),
                io.String.Input("system_prompt", multiline=True, default="", optional=True),
                io.String.Input(
                    "response_schema",
                    multiline=True,
                    default="",
                    optional=True,
                    tooltip="A JSON Schema every caption must satisfy (constrained decoding).",
                ),
                io.Int.Input(
                    "max_new_tokens",
                    default=128,
                    min=1,
                    max=32768,
                    optional=True,
                ),
                io.Boolean.Input("enable_reasoning", default=False, optional=True),
                io.Float.Input(
                    "temperature",
                    default=0.0,
                    min=0.0,
                    max=2.0,
                    step=0.05,
                    optional=True,
                ),
                io.Float.Input(
                    "top_p",
                    default=defaults.TOP_P,
                    min=0.01,
                    max=1.0,
                    step=0.01,
                    optional=True,
                ),
                io.Int.Input(
                    "seed",
                    default=0,
                    min=0,
                    max=defaults.SEED_MAX,
                    optional=True,
                    tooltip="The same seed is used for every image.",
                ),
                io.Boolean.Input("keep_model_loaded", default=True, optional=True),
                io.Int.Input(
                    "batch_size",
                    default=defaults.CAPTION_BATCH_SIZE,
                    min=1,
                    max=defaults.MAX_CAPTION_BATCH_SIZE,
                    optional=True,
                    **_supported(io.Int.Input, advanced=True),
                    tooltip=(
                        "Images the engine captions at once (vLLM always; Transformers and MLX-VLM "
                        "with temperature 0). Captions are written as each batch ends."
                    ),
                ),
            ],
            outputs=[
                io.String.Output("captions", display_name="captions", is_output_list=True),
                io.String.Output("metadata_json", display_name="metadata_json"),
            ],
            hidden=[io.Hidden.unique_id],
            not_idempotent=True,
        )

    @classmethod
    def execute(cls, model_profile: str, prompt: str, **optional: Any) -> io.NodeOutput:
        """Caption the batch; returns the captions (a list) and metadata_json.

        Errors reach ComfyUI unchanged unless their text would show a Hub
        token (see ``comfy_llm._node_run.scrubbed``).
        """
        from comfy_llm._node_run import scrubbed

        try:
            return cls._execute(model_profile, prompt, **optional)
        except Exception as error:
            replacement = scrubbed(error)
            if replacement is error:
                raise
            raise replacement from None

    @classmethod
    def _execute(cls, model_profile: str, prompt: str, **optional: Any) -> io.NodeOutput:
        from comfy_llm_core import redact
        from comfy_llm_residency import GenerationSettings

        from comfy_llm._caption import CaptionJob, caption_items, run_captions
        from comfy_llm._comfy_glue import ComfyGlue, executing_prompt_id
        from comfy_llm._host_memory import host_bridge
        from comfy_llm._storage import register_model_folder, storage_root
        from comfy_llm._targets import detect_target

        node_id = getattr(cls.hidden, "unique_id", None) if cls.hidden is not None else None
        root = storage_root()
        register_model_folder(root)
        settings = GenerationSettings(
            max_new_tokens=optional.get("max_new_tokens", 128),
            temperature=optional.get("temperature", 0.0),
            top_p=optional.get("top_p", defaults.TOP_P),
            seed=optional.get("seed", 0),
            enable_reasoning=optional.get("enable_reasoning", False),
            response_schema=optional.get("response_schema") or None,
        )
        items = caption_items(optional.get("images"), (optional.get("folder") or "").strip())
        job = CaptionJob(
            model=model_profile.strip(),
            prompt=prompt,
            system_prompt=optional.get("system_prompt") or None,
            settings=settings,
            prefix=optional.get("caption_prefix", ""),
            write_files=optional.get("write_caption_files", False),
            skip_existing=optional.get("skip_existing", True),
            overwrite=optional.get("overwrite_captions", False),
            storage_root=root,
            keep_loaded=optional.get("keep_model_loaded", True),
            batch_size=optional.get("batch_size", defaults.CAPTION_BATCH_SIZE),
        )
        glue = ComfyGlue(node_id, reasoning_enabled=settings.enable_reasoning)
        batch = run_captions(
            job,
            items,
            progress=glue.progress,
            on_token=glue.on_token,
            free_host_memory=glue.free_memory,
            prompt_id=executing_prompt_id(),
            host_listener=host_bridge(detect_target(job.target)),
        )
        glue.finish("\n".join(batch.captions), "")
        metadata = redact(json.dumps(batch.metadata, sort_keys=True, indent=2, default=str))
        return io.NodeOutput(batch.captions, metadata)
