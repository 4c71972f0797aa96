"""The node, the CLI, the pipeline and the manager use the same defaults."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from comfy_llm_core import defaults

RESERVE_ENVS = ("COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB", "COMFY_MODAL_LLM_RESERVE_FREE_GB")


@pytest.fixture(autouse=True)
def _no_reserve_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in RESERVE_ENVS:
        monkeypatch.delenv(name, raising=False)


def _node_defaults(comfyui: Path) -> dict[str, object]:
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    return {item.id: item.default for item in ModalLLMNode.define_schema().inputs}


def _run_defaults() -> dict[str, object]:
    """What the run takes when ComfyUI passes no value: the record's own defaults."""
    from comfy_llm._comfyui._node_inputs import NodeInputs

    return dict(vars(NodeInputs()))


def _cli_run_defaults() -> dict[str, object]:
    from comfy_llm._cli._main import _build_parser

    parser = _build_parser()
    return vars(parser.parse_args(["run", "--prompt", "x"]))


def test_node_reserves_what_the_manager_reserves(comfyui: Path) -> None:
    from comfy_llm_residency import default_reserve_gb

    node = _node_defaults(comfyui)
    run = _run_defaults()
    assert node["reserve_free_vram_gb"] == run["reserve_free_vram_gb"]
    assert node["reserve_free_vram_gb"] == default_reserve_gb("modal")
    assert node["local_reserve_free_memory_gb"] == run["local_reserve_free_memory_gb"]
    assert node["local_reserve_free_memory_gb"] == default_reserve_gb("local_cuda")
    assert node["local_reserve_free_memory_gb"] == default_reserve_gb("local_apple")
    assert node["local_reserve_free_memory_gb"] == default_reserve_gb("local_cpu")


def test_generation_defaults_agree_everywhere(comfyui: Path) -> None:
    from comfy_llm._pipeline import LLMRequest
    from comfy_llm_inputs import prepare_inputs
    from comfy_llm_residency.backend import GenerationSettings

    node = _node_defaults(comfyui)
    run = _run_defaults()
    cli = _cli_run_defaults()
    settings = GenerationSettings()
    prepare = inspect.signature(prepare_inputs).parameters

    assert node["max_new_tokens"] == run["max_new_tokens"] == cli["max_new_tokens"]
    assert settings.max_new_tokens == defaults.MAX_NEW_TOKENS == node["max_new_tokens"]
    assert node["temperature"] == run["temperature"] == cli["temperature"] == settings.temperature
    assert node["top_p"] == run["top_p"] == cli["top_p"] == settings.top_p
    assert node["video_frames"] == run["video_frames"] == cli["video_frames"]
    # a request without one asks prepare_inputs' default (LLMRequest.inputs holds no default)
    assert "video_frames" not in LLMRequest(model="m", prompt="p").inputs
    assert prepare["video_frames"].default == defaults.VIDEO_FRAMES == node["video_frames"]


def test_modal_reserve_default_and_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from comfy_llm_residency import default_reserve_gb

    assert default_reserve_gb("modal") == 24.0
    monkeypatch.setenv("COMFY_MODAL_LLM_RESERVE_FREE_GB", "30")
    assert default_reserve_gb("modal") == 30.0
    assert default_reserve_gb("local_cuda") == defaults.RESERVE_GB["local_cuda"]


SEED_NODE = {
    # input: (default, min, max) of the seed node (issue 20 item 20)
    "temperature": (0.2, 0.0, 2.0),
    "video_frames": (12, 1, 32),
    "reserve_free_vram_gb": (24.0, 0.0, 256.0),
    "local_reserve_free_memory_gb": (4.0, 0.0, 256.0),
}


def test_the_node_keeps_the_seed_nodes_defaults_and_ranges(comfyui: Path) -> None:
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    by_name = {item.id: item for item in ModalLLMNode.define_schema().inputs}
    for name, (default, low, high) in SEED_NODE.items():
        item = by_name[name]
        found = (item.default, item.options["min"], item.options["max"])
        assert found == (default, low, high), name


def test_a_seed_era_reserve_means_the_modal_gpu_and_local_runs_take_the_local_reserve(
    comfyui: Path,
) -> None:
    from comfy_llm._comfyui._node_inputs import reserve_for

    seed_era = {"reserve_free_vram_gb": 24.0, "local_reserve_free_memory_gb": 4.0}
    assert reserve_for(run_on_modal=True, **seed_era) == 24.0
    # every local target, a local NVIDIA GPU included: the local reserve
    assert reserve_for(run_on_modal=False, **seed_era) == 4.0
