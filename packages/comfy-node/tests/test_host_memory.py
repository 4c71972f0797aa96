"""ComfyUI's model manager can unload comfy-llm's resident models (stand-in, real engines)."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld import FakeHub

MODEL = "tiny/qwen35-scripted"


def _node(comfyui: Path) -> Any:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    ModalLLMNode.hidden = io.HiddenHolder(unique_id="3")
    return ModalLLMNode


def _run(node: Any, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("prompt", "hi")
    kwargs.setdefault("model_profile", MODEL)
    kwargs.setdefault("temperature", 0.0)
    return json.loads(node.execute(**kwargs).args[1])


def _ours(mm: Any) -> list[Any]:
    return [entry for entry in mm.current_loaded_models if hasattr(entry, "profile_id")]


def _manager(target: str) -> Any:
    from comfy_llm_residency import get_manager

    return get_manager(target, backend_factory=None)  # type: ignore[arg-type]


class DiffusionModel:
    """A ComfyUI model of ``size`` bytes, loaded the way ComfyUI loads its own."""

    def __init__(self, size: int, device: str) -> None:
        from comfy.model_patcher import ModelPatcher

        self.device: Any = None
        self.patcher = ModelPatcher(self, device, "cpu", size=size)


@pytest.fixture
def cpu_target(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    return "local_cpu"


@pytest.mark.slow
def test_unload_all_models_evicts_the_llm_and_the_next_run_is_cold(
    cpu_target: str, model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    import comfy.model_management as mm

    node = _node(comfyui)
    first = _run(node)
    assert first["cache_status"] == "cold" and first["evicted_by_host"] is False
    [entry] = _ours(mm)
    assert entry.device == "cpu"
    assert entry.model_memory() == first["measured_allocation_bytes"] > 0
    assert first["comfyui_managed_models"] == []  # its own entry is not "ComfyUI's"

    mm.unload_all_models()  # what "Unload models" and POST /free call

    assert _ours(mm) == []
    state = _manager(cpu_target).state()
    assert state.resident_profiles == () and state.busy is False
    again = _run(node)
    assert again["cache_status"] == "cold"
    assert again["evicted_by_host"] is True
    assert "Unload models" in again["host_eviction_reason"]
    assert len(_ours(mm)) == 1
    warm = _run(node)
    assert warm["cache_status"] == "warm" and warm["evicted_by_host"] is False


@pytest.mark.slow
def test_a_comfyui_model_load_that_needs_the_room_evicts_the_idle_llm(
    model_hub: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import comfy.model_management as mm
    import psutil

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_apple")
    mm.torch_device = "mps"  # a GPU device: load_models_gpu frees memory there
    node = _node(comfyui)
    vae = DiffusionModel(1024, "mps")
    mm.load_models_gpu([vae.patcher])
    _run(node)
    assert [type(e).__name__ for e in mm.current_loaded_models] == [
        "ResidentLLMEntry",
        "LoadedModel",
    ]
    # A model bigger than the machine's free memory: everything idle must go.
    unet = DiffusionModel(psutil.virtual_memory().total, "mps")
    mm.load_models_gpu([unet.patcher])

    assert [e.model for e in mm.current_loaded_models] == [unet.patcher]
    assert _manager("local_apple").state().resident_profiles == ()
    again = _run(node)
    assert again["evicted_by_host"] is True
    assert "more on mps" in again["host_eviction_reason"]


@pytest.mark.slow
def test_a_busy_llm_is_not_evicted_mid_generation(
    cpu_target: str,
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import comfy.model_management as mm
    from server import PromptServer

    node = _node(comfyui)
    _run(node)  # resident and registered
    send = PromptServer.instance.send_progress_text
    seen: dict[str, Any] = {}

    def unload_from_another_thread(text: str, node_id: str, sid: Any = None) -> None:
        # The first live text of the generation: ComfyUI's other thread asks now.
        generating = text.startswith(("Thinking", "Reasoning:", "Answer:"))
        if "busy" not in seen and generating and _manager(cpu_target).state().busy:
            seen["busy"] = True
            other = threading.Thread(target=mm.unload_all_models)
            other.start()
            other.join(30)
            seen["ours_during"] = len(_ours(mm))
        send(text, node_id, sid)

    monkeypatch.setattr(PromptServer.instance, "send_progress_text", unload_from_another_thread)
    caplog.set_level(logging.INFO, logger="comfy_llm")
    result = _run(node, enable_reasoning=False)

    assert seen == {"busy": True, "ours_during": 1}
    assert result["cache_status"] == "warm" and result["output_tokens"] > 0
    assert "while it is in use; declined" in caplog.text
    assert len(_ours(mm)) == 1
    assert _manager(cpu_target).state().resident_profiles != ()
    mm.unload_all_models()  # idle again: now it goes
    assert _ours(mm) == []


@pytest.mark.slow
def test_own_lru_eviction_keeps_comfyuis_list_consistent(
    cpu_target: str,
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import comfy.model_management as mm

    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_MAX_RESIDENT_MODELS", "1")
    node = _node(comfyui)
    vae = DiffusionModel(1024, "cpu")
    mm.load_models_gpu([vae.patcher])
    _run(node)
    _run(node, model_profile="tiny/smolvlm-scripted")
    [entry] = _ours(mm)
    assert entry.repository == "tiny/smolvlm-scripted"
    assert len(mm.current_loaded_models) == 2  # ComfyUI's own model untouched
    # comfy-llm's own frees keep its entries out of ComfyUI's walk.
    from comfy_llm._comfyui._glue import ComfyGlue

    mm.free_bytes["cpu"] = 0
    ComfyGlue("3", reasoning_enabled=False).free_memory(1 << 40)
    assert _ours(mm) == [entry]
    assert _manager(cpu_target).state().resident_profiles != ()


@pytest.mark.slow
def test_an_unknown_comfyui_surface_falls_back_to_one_way_and_says_so_once(
    cpu_target: str,
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import comfy.model_management as mm

    monkeypatch.delattr(mm, "LoadedModel")  # an older/newer ComfyUI
    caplog.set_level(logging.INFO, logger="comfy_llm")
    import asyncio

    from comfy_llm import comfy_entrypoint

    asyncio.run(comfy_entrypoint())  # ComfyUI loading the extension checks the surface
    assert "model manager differs" in caplog.text
    node = _node(comfyui)
    _run(node)
    _run(node)
    warnings = [r for r in caplog.records if "model manager differs" in r.getMessage()]
    assert len(warnings) == 1
    assert "LoadedModel is missing" in warnings[0].getMessage()
    assert mm.current_loaded_models == []
    from comfy_llm._comfyui._glue import ComfyGlue

    ComfyGlue("3", reasoning_enabled=False).free_memory(123)  # one way still works
    assert mm.free_memory_calls[-1] == (123, "cpu")
    mm.unload_all_models()
    assert _run(node)["cache_status"] == "warm"  # ComfyUI cannot reach it


@pytest.mark.slow
def test_the_caption_nodes_model_is_visible_to_comfyui_too(
    cpu_target: str, model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    import comfy.model_management as mm
    import numpy as np
    from comfy_api.latest import io
    from comfy_llm._comfyui._caption_node import CaptionImagesNode

    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="9")
    images = np.random.default_rng(0).random((2, 24, 32, 3), dtype=np.float32)
    CaptionImagesNode.execute(
        model_profile=MODEL, prompt="Caption it.", images=images, max_new_tokens=4
    )
    assert [entry.repository for entry in _ours(mm)] == [MODEL]
    mm.unload_all_models()
    assert _ours(mm) == []
    assert _manager(cpu_target).state().resident_profiles == ()
