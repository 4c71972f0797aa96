"""Golden records of what a user sees: ``metadata_json`` and the rendered chat prompt.

A refactor that must not change behaviour runs the node as a user would and
compares what came out with a record kept in the repository. Values that
differ from run to run (timings, memory readings, paths, content ids,
library versions) are replaced by a placeholder naming their kind, so the
record still pins every key, its position (``metadata_json`` is sorted),
every stable value and the type and presence of every volatile one.

The chat prompt is recorded where every engine renders it: Jinja's
``Template.render`` (Transformers' and vLLM's ``apply_chat_template`` and
MLX-VLM's all end there), with the messages it was given and the exact text
it returned.

Set ``COMFY_LLM_WRITE_GOLDEN=1`` to (re)write a record instead of comparing;
review the diff before committing it.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "WRITE_ENV",
    "InputFileContent",
    "VideoFromFile",
    "check_golden",
    "node_requests",
    "node_run",
    "normalise",
    "recorded_chat_prompts",
]

WRITE_ENV = "COMFY_LLM_WRITE_GOLDEN"

_VOLATILE_NUMBER = re.compile(
    r"(^seconds$|_seconds|tokens_per_second|captions_per_second|_gib"
    r"|^(available|total)_memory_(bytes|gb)$|^measured_allocation_(bytes|gb)$"
    r"|^cuda_memory_\w+_bytes$|^(active|cache|peak)_memory_bytes$|^vllm_engine_memory$)"
)
"""Keys whose numbers are measurements (times, rates, memory read from the machine)."""

_VOLATILE_TEXT = {
    "profile_id": "<profile-id>",
    "revision": "<revision>",
    "snapshot_path": "<path>",
    "modal_affinity_key": "<affinity-key>",
    "modal_app_name": "<app-name>",
    "vllm_compile_cache_namespace": "<namespace>",
    "vllm_compile_cache_dir": "<path>",
    "device_name": "<device-name>",
}
"""Keys whose text names this run's ids, paths or machine."""

_ID_LISTS = {"resident_profiles", "evicted_profiles"}
_PROFILE_ID = re.compile(r"^hf-[0-9a-f]{16,64}$")
_HEX_40 = re.compile(r"^[0-9a-f]{40}$")


def _placeholder(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return "<int>"
    if isinstance(value, float):
        return "<float>"
    if isinstance(value, Mapping):
        return {str(k): _placeholder(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_placeholder(v) for v in value]
    return "<text>"


def _text(value: str) -> str:
    if _PROFILE_ID.match(value):
        return "<profile-id>"
    if _HEX_40.match(value):
        return "<revision>"
    if os.path.isabs(value) and (os.sep in value[1:] or len(value) > 1):
        return "<path>"
    return value


def normalise(value: Any, key: str = "") -> Any:
    """``value`` with its run-to-run differences replaced by placeholders.

    Args:
        value: Decoded JSON (``json.loads`` of ``metadata_json``).
        key: The key ``value`` sits under (the rules are keyed by name).

    Returns:
        The same structure; measurements, ids, paths and versions replaced.
    """
    keyed = _by_key(value, key)
    if keyed is not _NO_RULE:
        return keyed
    if isinstance(value, Mapping):
        return {str(k): normalise(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, key) for v in value]
    if isinstance(value, str):
        return _text(value)
    return value


_NO_RULE = object()

_MAPPING_RULES: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    # the packages this process served with: its history decides
    "comfy_llm_versions": lambda value: "<versions>",
    # vLLM's own scheduler statistics of this run (steps, peaks, blocks the engine's KV
    # space holds): their keys are the record, not their values
    "vllm_engine_load": lambda value: {str(k): _placeholder(v) for k, v in value.items()},
}


def _by_key(value: Any, key: str) -> Any:
    """The placeholder the rule for ``key`` gives ``value``, or ``_NO_RULE``."""
    if key in _VOLATILE_TEXT and isinstance(value, str):
        return _VOLATILE_TEXT[key]
    if key.endswith("_version") and isinstance(value, str):
        return "<version>"
    if key in _MAPPING_RULES and isinstance(value, Mapping):
        return _MAPPING_RULES[key](value)
    if key in _ID_LISTS and isinstance(value, list):
        return ["<profile-id>" if isinstance(v, str) else v for v in value]
    if _VOLATILE_NUMBER.search(key) and not isinstance(value, str):
        return _placeholder(value)
    return _NO_RULE


def _plain(value: Any) -> Any:
    """Messages as JSON (an image object or anything else by its type name)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return f"<{type(value).__name__}>"


@contextlib.contextmanager
def recorded_chat_prompts() -> Iterator[list[dict[str, Any]]]:
    """Record every chat-template render in this process: its messages and its text."""
    import jinja2

    records: list[dict[str, Any]] = []
    original = jinja2.Template.render

    def render(self: jinja2.Template, *args: Any, **kwargs: Any) -> str:
        text = original(self, *args, **kwargs)
        if "messages" in kwargs:
            records.append(
                {
                    "messages": _plain(copy.deepcopy(kwargs["messages"])),
                    "add_generation_prompt": kwargs.get("add_generation_prompt"),
                    "text": text,
                }
            )
        return text

    jinja2.Template.render = render  # type: ignore[method-assign]
    try:
        yield records
    finally:
        jinja2.Template.render = original  # type: ignore[method-assign]


class VideoFromFile:
    """ComfyUI's VIDEO: a file-backed source."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def get_stream_source(self) -> str:
        """The file ComfyUI would read."""
        return str(self._path)


class InputFileContent:
    """ComfyUI's OPENAI_INPUT_FILES item (a text file as a data URL)."""

    def __init__(self, name: str, text: str) -> None:
        self.filename = name
        self.file_data = "data:text/plain;base64," + base64.b64encode(text.encode()).decode()
        self.file_id = None
        self.type = "input_file"


SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"color": {"enum": ["red", "blue"]}},
        "required": ["color"],
        "additionalProperties": False,
    }
)


def _image(seed: int) -> Any:
    import numpy as np

    return np.random.default_rng(seed).random((1, 24, 32, 3), dtype=np.float32)


def node_requests(folder: Path, *, second_model: str | None) -> list[dict[str, Any]]:
    """The node requests whose metadata, between them, holds every key of a local run.

    Args:
        folder: Where the test video is written.
        second_model: A second repository to load last (evicting or joining the
            first, unloaded after), or None.
    """
    from .media import write_test_video

    video = VideoFromFile(write_test_video(folder / "clip.mp4", frames=20, fps=10))
    requests: list[dict[str, Any]] = [
        # cold; an image, a file and a system prompt
        {
            "prompt": "What is this?",
            "model_profile": "tiny/qwen35-scripted",
            "system_prompt": "Be brief.",
            "images": _image(0),
            "files": [InputFileContent("notes.txt", "a red square moves")],
        },
        # warm; video frames; every token spent thinking: the empty-answer note
        {
            "prompt": "Summarise.",
            "model_profile": "tiny/qwen35-scripted",
            "video": video,
            "video_frames": 3,
            "max_new_tokens": 2,
        },
        # a response schema (constrained decoding, the schema's fields), reasoning off
        {
            "prompt": "Which color?",
            "model_profile": "tiny/qwen35-scripted",
            "enable_reasoning": False,
            "response_schema": SCHEMA,
            "max_new_tokens": 24,
        },
    ]
    if second_model is not None:
        requests.append(
            {
                "prompt": "Describe.",
                "model_profile": second_model,
                "images": _image(1),
                "keep_model_loaded": False,
                "seed": 7,
            }
        )
    return requests


def node_run(node_id: str = "7", **inputs: Any) -> dict[str, Any]:
    """Run the ModalLLM node (ComfyUI stand-in installed) once; its outputs, normalised."""
    from comfy_api.latest import io
    from comfy_llm import ModalLLMNode

    ModalLLMNode.hidden = io.HiddenHolder(unique_id=node_id)
    inputs.setdefault("temperature", 0.0)
    response, metadata_json, reasoning = ModalLLMNode.execute(**inputs).args
    return {
        "response": response,
        "reasoning": reasoning,
        "metadata_json": normalise(json.loads(metadata_json)),
    }


def check_golden(path: Path, record: Any) -> None:
    """Compare ``record`` with the JSON kept at ``path`` (or write it, see the module).

    Raises:
        AssertionError: The record differs; the message shows both.
    """
    text = json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get(WRITE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.is_file():
        raise AssertionError(f"No golden record at {path}; run once with {WRITE_ENV}=1")
    kept = path.read_text(encoding="utf-8")
    assert text == kept, f"{path.name} changed:\n--- kept\n{kept}\n--- now\n{text}"
