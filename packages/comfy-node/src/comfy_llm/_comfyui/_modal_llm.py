"""The ``ModalLLM`` V3 node: ComfyUI's face of comfy-llm.

The node id and input names are the seed system's, so workflows saved with it
load unchanged; outputs stay ``response, metadata_json, reasoning`` in that
order (reasoning was appended last to keep saved link indices valid).
Everything ComfyUI-specific that happens at run time lives in ``_comfy_glue``;
the request itself follows the same path as ``comfy-llm run``.
"""

from __future__ import annotations

import json
from typing import Any

from comfy_api.latest import io

from comfy_llm._comfyui._inputs import SEARCH_ALIASES, schema_inputs, supported
from comfy_llm._comfyui._node_inputs import NodeInputs
from comfy_llm._comfyui._run import hidden_node_id, run_node
from comfy_llm._picker import validate_model_inputs

__all__ = ["NODE_ID", "ModalLLMNode", "answer_ui"]

NODE_ID = "ModalLLM"


def _outputs() -> list[io.Output]:
    return [
        io.String.Output(
            "response",
            display_name="response",
            tooltip="The model's answer, without its reasoning.",
        ),
        io.String.Output(
            "metadata_json",
            display_name="metadata_json",
            tooltip=(
                "Indented JSON about the run: model and pinned revision, target and backend, "
                "tokens, timings, memory, cache status."
            ),
        ),
        io.String.Output(
            "reasoning",
            display_name="reasoning",
            tooltip="The model's thinking, when it has a reasoning mode that is on; else empty.",
        ),
    ]


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
                "Answers a prompt about images, video and text/PDF files with a Hugging Face "
                "vision-language model, in this ComfyUI process (MLX-VLM on Apple Silicon, "
                "Transformers on NVIDIA or CPU)."
            ),
            inputs=schema_inputs(NodeInputs),
            outputs=_outputs(),
            hidden=[io.Hidden.unique_id],
            not_idempotent=True,
            **supported(
                io.Schema,
                # no essentials_category: the 1.58.1 frontend files a node that has one
                # under "Comfy" (nodeSource "essentials"), away from the caption node
                # and the search box's "Extensions" filter (nodeDefStore getNodeSource)
                search_aliases=SEARCH_ALIASES,
                # The answer is also UI output (below); this flag makes ComfyUI send it
                # again when a later run takes the node from its cache
                # (comfy_api/latest/_io.py Schema, execution.py _is_intermediate_output).
                has_intermediate_output=True,
            ),
        )

    @classmethod
    def validate_inputs(cls, model_profile: str) -> bool | str:
        """Refuse at queue time a model reference that cannot parse (any other passes).

        Naming ``model_profile`` here takes it off ComfyUI's list check, so saved
        workflows with a model not in the list run (``comfy_llm._picker``).
        """
        return validate_model_inputs(model_profile)

    @classmethod
    def execute(cls, **values: Any) -> io.NodeOutput:
        """Run one request; returns response, metadata_json and reasoning.

        ComfyUI passes the inputs by name; one left out (an unlinked socket, a
        workflow saved before the input existed) keeps its field's default.
        """
        inputs = NodeInputs(**values)
        inputs.model()  # a custom_model that cannot be used is refused before the status changes
        response, metadata_json, reasoning = run_node(inputs, node_id=hidden_node_id(cls))
        return io.NodeOutput(
            response, metadata_json, reasoning, ui=answer_ui(response, reasoning, metadata_json)
        )


def answer_ui(response: str, reasoning: str, metadata_json: str) -> dict[str, list[str]]:
    """What the node shows once it ran: the answer, its reasoning, why it is empty.

    ``text`` has the shape of ``ui.PreviewText(response).as_dict()``
    (comfy_api/latest/_ui.py); ``reasoning`` and ``note`` are for the node's
    frontend extension (``web/comfy-llm.js``), which folds the reasoning away.
    ComfyUI keeps UI output in the prompt's history, from which the extension
    shows the answer again after a browser reload. Plain lists of strings, so
    ComfyUI releases without ``ui.PreviewText`` take it too.
    """
    ui = {"text": [response]}
    if reasoning:
        ui["reasoning"] = [reasoning]
    note = (json.loads(metadata_json).get("empty_answer") or {}).get("message")
    if note:
        ui["note"] = [str(note)]
    return ui
