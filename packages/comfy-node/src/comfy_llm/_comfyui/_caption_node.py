"""The ``ComfyLLMCaption`` node: one caption per image, caption files for LoRA datasets.

Shares the request path and the resident manager with ``ModalLLM``: the
model loads once for the whole batch. Outputs a ComfyUI output list of
captions (one per image, in order) and one metadata JSON. With
``run_on_modal`` the images go to ``modal_workers`` GPU containers on Modal
(``comfy_llm._caption_modal``), with the same file rules.
"""

from __future__ import annotations

from typing import Any

from comfy_api.latest import io

from comfy_llm._caption import run_captions
from comfy_llm._caption_conventions import write_batch_manifest
from comfy_llm._caption_job import caption_items
from comfy_llm._caption_modal import run_captions_on_modal
from comfy_llm._comfyui._caption_inputs import CaptionInputs, input_folder
from comfy_llm._comfyui._glue import ComfyGlue, executing_prompt_id
from comfy_llm._comfyui._host_memory import host_bridge
from comfy_llm._comfyui._inputs import SEARCH_ALIASES, schema_inputs, supported
from comfy_llm._comfyui._metadata import metadata_json
from comfy_llm._comfyui._run import comfyui_errors, hidden_node_id, node_status
from comfy_llm._json import JsonRecord
from comfy_llm._picker import validate_model_inputs
from comfy_llm._storage import register_model_folder, storage_root
from comfy_llm._targets import detect_target

__all__ = ["CAPTION_NODE_ID", "CaptionImagesNode", "caption_summary"]

CAPTION_NODE_ID = "ComfyLLMCaption"


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
                "Captions every image of a batch, or every image and video of a folder, under "
                "one resident model; writes <name>.txt next to each file (LoRA training "
                "datasets), with prefix, suffix, trigger word, modes and a JSONL manifest."
            ),
            inputs=schema_inputs(CaptionInputs),
            outputs=[
                io.String.Output(
                    "captions",
                    display_name="captions",
                    is_output_list=True,
                    tooltip="One caption per image, in input order (prefix included).",
                ),
                io.String.Output(
                    "metadata_json",
                    display_name="metadata_json",
                    tooltip=(
                        "Indented JSON about the batch: counts (captioned, kept, failed, "
                        "written), per-image status and timings, model and backend."
                    ),
                ),
            ],
            hidden=[io.Hidden.unique_id],
            is_output_node=True,  # writing caption files is its job: it runs on its own
            not_idempotent=True,
            **supported(io.Schema, search_aliases=[*SEARCH_ALIASES, "LoRA", "dataset"]),
        )

    @classmethod
    def validate_inputs(cls, model_profile: str) -> bool | str:
        """Refuse at queue time a model reference that cannot parse (see ``_picker``)."""
        return validate_model_inputs(model_profile)

    @classmethod
    def execute(cls, **values: Any) -> io.NodeOutput:
        """Caption the batch; returns the captions (a list) and metadata_json.

        ComfyUI passes the inputs by name; one left out keeps its field's
        default. Errors reach ComfyUI as ``comfy_llm._comfyui._run.for_comfyui``
        has them (a comfy-llm error as a plain builtin; tokens scrubbed).
        """
        inputs = CaptionInputs(**values)
        inputs.model()  # a custom_model that cannot be used is refused before the status changes
        return comfyui_errors(_execute)(inputs, hidden_node_id(cls))


def _execute(inputs: CaptionInputs, node_id: str | None) -> io.NodeOutput:
    with node_status(node_id, reasoning_enabled=inputs.enable_reasoning) as glue:
        return _caption(glue, inputs)


def _caption(glue: ComfyGlue, inputs: CaptionInputs) -> io.NodeOutput:
    root = storage_root()
    register_model_folder(root)
    settings = inputs.settings()
    conventions = inputs.conventions()
    folder = input_folder(inputs.folder.strip())
    items = caption_items(inputs.images, folder, conventions)
    job = inputs.job(settings, conventions, root)
    if inputs.run_on_modal:
        batch = run_captions_on_modal(
            job,
            items,
            inputs.modal_options(),
            progress=glue.progress,
            check_interrupt=glue.check_interrupt,
            prompt_id=executing_prompt_id(),
        )
    else:
        batch = run_captions(
            job,
            items,
            progress=glue.progress,
            on_token=glue.on_token,
            free_host_memory=glue.free_memory,
            prompt_id=executing_prompt_id(),
            host_listener=host_bridge(detect_target(job.target)),
        )
    write_batch_manifest(conventions, folder, items, batch.captions, batch.metadata)
    summary = caption_summary(batch.captions, batch.metadata)
    glue.complete(summary)
    metadata = metadata_json(batch.metadata)
    return io.NodeOutput(batch.captions, metadata, ui={"text": [summary]})


SUMMARY_CAPTIONS = 3
"""Captions shown on the node after a batch (the rest are in the outputs)."""


def caption_summary(captions: list[str], metadata: JsonRecord) -> str:
    """What the node shows when a batch ends: counts, where files went, a few captions.

    Captions over CLIP's 75 tokens are named right after the counts
    (``_caption_clip``): the run succeeded, but a trainer would cut them.
    """
    from comfy_llm._caption_clip import clip_warnings

    written = metadata["written"]
    counts = (
        f"Captioned {metadata['captioned']} of {metadata['images']}, "
        f"kept {metadata['kept_existing']}, failed {metadata['failed']}; "
        f"wrote {written} caption file{'' if written == 1 else 's'}"
        + "".join(f" and {metadata[key]}" for key in ("manifest", "csv") if metadata.get(key))
        + "."
    )
    lines = [counts]
    cleaned = [f"{rule} {n}" for rule, n in (metadata.get("cleanup") or {}).items() if n]
    if cleaned:
        lines.append(f"Cleaned (images per rule): {', '.join(cleaned)}.")
    long = clip_warnings(metadata)
    for warning in long[:SUMMARY_CAPTIONS]:
        lines.append(f"Warning: {warning}")
    if len(long) > SUMMARY_CAPTIONS:
        lines.append(f"… and {len(long) - SUMMARY_CAPTIONS} more over CLIP's 75 tokens.")
    failed = [r for r in metadata.get("per_image", []) if r.get("status") == "failed"]
    for record in failed[:SUMMARY_CAPTIONS]:
        lines.append(f"Failed: {record['name']}: {record.get('error', '')}"[:200])
    shown = [
        (record["name"], caption)
        for record, caption in zip(metadata.get("per_image", []), captions, strict=False)
        if caption
    ]
    for name, caption in shown[:SUMMARY_CAPTIONS]:
        lines.append(f"{name}: {caption}"[:200])
    if len(shown) > SUMMARY_CAPTIONS:
        lines.append(f"… and {len(shown) - SUMMARY_CAPTIONS} more in the captions output.")
    return "\n".join(lines)
