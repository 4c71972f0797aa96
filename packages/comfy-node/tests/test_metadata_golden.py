"""What a user sees stays as it is: ``metadata_json`` and the prompt each engine renders.

The nodes run through the ComfyUI stand-in on the engines that run here
(Transformers on ``local_cpu``, MLX-VLM on ``local_apple`` through
``mlx[cpu]``) and on the strict Modal stand-in; vLLM's record is taken in the
vLLM tier (``packages/backend-cuda/vllm_tests/test_vllm_metadata_golden.py``).
Each run's ``metadata_json`` (measurements, ids and paths replaced by
placeholders: ``comfy_llm_testworld.golden``) and every chat prompt the
engine rendered are compared with the records in ``golden/``. Rewrite a
record with ``COMFY_LLM_WRITE_GOLDEN=1`` only for a change meant to be seen.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.golden import (
    check_golden,
    node_requests,
    node_run,
    normalise,
    recorded_chat_prompts,
)

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def prompt_id() -> Iterator[None]:
    """ComfyUI executing prompt ``golden-1`` (the metadata carries it)."""
    import comfy_execution.utils as execution

    execution.current = execution.ExecutionContext("golden-1", "7", None)
    yield
    execution.current = None


@pytest.mark.parametrize(
    ("target", "engine"), [("local_cpu", "transformers"), ("local_apple", "mlx_vlm")]
)
def test_node_metadata_and_prompts_unchanged(
    target: str,
    engine: str,
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    prompt_id: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", target)
    requests = node_requests(tmp_path, second_model="tiny/smolvlm-scripted")
    with recorded_chat_prompts() as prompts:
        runs = [node_run(**request) for request in requests]
    check_golden(GOLDEN / f"node_{engine}.json", {"runs": runs, "prompts": prompts})


def test_caption_node_metadata_unchanged(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    prompt_id: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_api.latest import io
    from comfy_llm._comfyui._caption_node import CaptionImagesNode

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="9")
    images = np.random.default_rng(3).random((3, 24, 32, 3), dtype=np.float32)
    with recorded_chat_prompts() as prompts:
        captions, metadata_json = CaptionImagesNode.execute(
            model_profile="tiny/qwen35-scripted",
            prompt="Caption it.",
            images=images,
            temperature=0.0,
            max_new_tokens=8,
            batch_size=2,
        ).args
    record = {"captions": captions, "metadata_json": normalise(json.loads(metadata_json))}
    check_golden(GOLDEN / "caption_transformers.json", {**record, "prompts": prompts})


@pytest.fixture
def modal_standin(tmp_path: Path) -> Iterator[None]:
    from comfy_llm_modal_remote import use_transport
    from comfy_llm_testworld.modal_strict import StrictTransport

    made: list[StrictTransport] = []

    def factory(name: str, directory: Path) -> StrictTransport:
        made.append(StrictTransport(name, directory, root=tmp_path / "modal"))
        return made[-1]

    use_transport(factory)
    yield
    use_transport(None)
    for transport in made:
        transport.close()


def test_modal_node_metadata_unchanged(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    prompt_id: None,
    modal_standin: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    common = {
        "prompt": "What is this?",
        "model_profile": "tiny/smolvlm-scripted",
        "images": np.random.default_rng(0).random((1, 24, 32, 3), dtype=np.float32),
        "run_on_modal": True,
        "modal_gpu": "H100",
        "reserve_free_vram_gb": 0.0,
    }
    first = node_run(**common, system_prompt="Be brief.")
    second = node_run(**common, max_new_tokens=3)  # staged before: the stage is reused
    check_golden(GOLDEN / "node_modal.json", {"runs": [first, second]})
