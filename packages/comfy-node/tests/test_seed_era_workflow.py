"""A workflow saved with the seed node means the same thing on both paths.

Its ``reserve_free_vram_gb`` (24 GiB, the seed's default) is the reserve kept
free on the Modal GPU a request runs on; a local run keeps
``local_reserve_free_memory_gb`` (4 GiB) free instead. The Modal path goes
through the strict stand-in: the dispatcher, the stager and the engine each in
their own container process with only the image's environment.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.modal_strict import GIB, FixedMemoryProbe, StrictTransport

from .conftest import node_raises

pytestmark = pytest.mark.slow

SCRIPTED = "tiny/smolvlm-scripted"
SEED_ERA_WIDGETS = {
    # the seed node's widgets in its order, with its defaults (MODAL_LLM seeds): a saved
    # workflow's widgets_values end at modal_gpu (no response_schema, no custom_model)
    "prompt": "Say the scripted answer.",
    "model_profile": SCRIPTED,
    "system_prompt": "",
    "max_new_tokens": 16,
    "enable_reasoning": True,
    "temperature": 0.2,
    "top_p": 0.95,
    "seed": 0,
    "video_frames": 12,
    "reserve_free_vram_gb": 24.0,
    "keep_model_loaded": True,
    "local_reserve_free_memory_gb": 4.0,
    "run_on_modal": False,
    "modal_gpu": "L40S",
}


@pytest.fixture
def gpus(tmp_path: Path) -> Iterator[dict[str, int]]:
    """The strict stand-in as the node's transport; the GPU's free bytes are the test's."""
    from comfy_llm_modal_remote import use_transport

    free = {"bytes": 40 * GIB}
    made: list[StrictTransport] = []

    def probe(key: str) -> FixedMemoryProbe:
        return FixedMemoryProbe(total_bytes=48 * GIB, available_bytes=free["bytes"])

    def factory(name: str, directory: Path) -> StrictTransport:
        made.append(StrictTransport(name, directory, root=tmp_path / "modal", probe_for=probe))
        return made[-1]

    use_transport(factory)
    yield free
    use_transport(None)
    for transport in made:
        transport.close()


def _run(comfyui: Path, **changes: Any) -> tuple[str, dict[str, Any], str]:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    schema = ModalLLMNode.define_schema()
    widgets = [item.id for item in schema.inputs if item.id not in ("images", "video", "files")]
    assert widgets[: len(SEED_ERA_WIDGETS)] == list(SEED_ERA_WIDGETS)  # the seed's order
    ModalLLMNode.hidden = io.HiddenHolder(unique_id="11")
    values = {**SEED_ERA_WIDGETS, **changes}
    response, metadata, reasoning = ModalLLMNode.execute(**values).args
    return response, json.loads(metadata), reasoning


def test_the_seed_reserve_is_the_modal_gpus_and_local_keeps_its_own(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    gpus: dict[str, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    local = _run(comfyui)
    assert local[1]["execution_target"] == "local_cpu"
    assert local[1]["reserve_gb"] == 4.0  # local_reserve_free_memory_gb, not the Modal 24

    remote = _run(comfyui, run_on_modal=True)
    assert (remote[0], remote[2]) == (local[0], local[2])  # the same answer
    assert remote[1]["execution_target"] == "modal" and remote[1]["modal_gpu"] == "L40S"
    assert remote[1]["reserve_gb"] == 24.0  # reserve_free_vram_gb, on the Modal GPU


def test_on_modal_the_24_gib_reserve_is_kept_on_the_gpu(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    gpus: dict[str, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_llm_residency import InsufficientMemoryError

    monkeypatch.setenv("COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS", "0.1")
    gpus["bytes"] = 20 * GIB  # a tiny model fits; the tiny model plus 24 GiB does not
    with node_raises(InsufficientMemoryError, match="24") as caught:
        _run(comfyui, run_on_modal=True)
    assert caught.shown is not None and "comfy_llm" not in str(caught.shown)
    # the same GPU serves the workflow once its reserve fits there
    _, metadata, _ = _run(comfyui, run_on_modal=True, reserve_free_vram_gb=4.0)
    assert metadata["reserve_gb"] == 4.0
