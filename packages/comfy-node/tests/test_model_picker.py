"""The model picker on both nodes: a list to pick from; typed and saved references still work."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_profiles import load_curated_registry
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import write_checkpoint


def _nodes() -> list[Any]:
    from comfy_llm._comfyui._caption_node import CaptionImagesNode
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    return [ModalLLMNode, CaptionImagesNode]


def _input(node: Any, name: str) -> Any:
    return next(item for item in node.define_schema().inputs if item.id == name)


def test_the_picker_lists_curated_staged_and_local_on_both_nodes(
    model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    from comfy_llm._comfyui._inputs import DEFAULT_MODEL
    from comfy_llm_staging import stage_snapshot

    sha = model_hub.head("tiny/smolvlm")
    stage_snapshot("tiny/smolvlm", sha, storage_root=storage)
    models = Path(os.environ["COMFYUI_STANDIN_BASE"]) / "models"  # folder_paths.models_dir
    write_checkpoint("qwen3_5", models / "LLM" / "Qwen3.5-tiny")
    write_checkpoint("smolvlm", models / "VLM" / "HuggingFaceTB" / "SmolVLM-tiny")
    (models / "LLM" / "not-a-checkpoint").mkdir()
    for node in _nodes():
        picker = _input(node, "model_profile")
        assert picker.io_type == "COMBO" and picker.default == DEFAULT_MODEL
        options = picker.options_list
        assert options[0] == DEFAULT_MODEL
        assert set(load_curated_registry().ids) <= set(options)
        assert f"tiny/smolvlm@{sha}" in options
        assert "models/LLM/Qwen3.5-tiny" in options
        assert "models/VLM/HuggingFaceTB/SmolVLM-tiny" in options
        assert "models/LLM/not-a-checkpoint" not in options
        # the typed override is the last input: saved widget positions stay valid
        assert node.define_schema().inputs[-1].id == "custom_model"


@pytest.mark.parametrize(
    ("model_profile", "custom_model", "problem"),
    [
        ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", "", None),  # a seed-era value, off the list
        ("Qwen/Qwen3-VL-2B-Instruct@main", "", None),
        ("smolvlm2-2.2b-instruct", "", None),
        ("/opt/models/never-checked-at-queue-time/../x", "", "'..' folder"),
        ("Qwen/Qwen3-VL 2B", "", "whitespace"),
        ("smolvlm-256m-instrct", "", "neither owner/model nor a known curated id"),
        ("https://huggingface.co/Qwen/Qwen3-VL-2B", "", "URLs are not accepted"),
        ("models/LLM/missing", "", "no such folder"),
        ("smolvlm2-2.2b-instruct", "owner/model@", "custom_model: Model reference"),
        ("not valid!", "HuggingFaceTB/SmolVLM-256M-Instruct", None),  # the typed one wins
    ],
)
def test_queue_time_check_refuses_only_what_cannot_parse(
    comfyui: Path, model_profile: str, custom_model: str, problem: str | None
) -> None:
    for node in _nodes():
        verdict = node.validate_inputs(model_profile=model_profile, custom_model=custom_model)
        if problem is None:
            assert verdict is True, verdict
        else:
            assert isinstance(verdict, str) and problem in verdict and "\n" not in verdict


def test_validate_inputs_names_only_the_model_inputs(comfyui: Path) -> None:
    # ComfyUI skips its own min/max/list checks for every input validate_inputs names
    # (all of them with **kwargs): only the two model inputs may be named.
    import inspect

    for node in _nodes():
        spec = inspect.getfullargspec(node.validate_inputs)
        assert spec.args == ["cls", "model_profile", "custom_model"] and spec.varkw is None


@pytest.mark.slow
def test_custom_model_wins_over_the_picker(
    model_hub: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    ModalLLMNode.hidden = io.HiddenHolder(unique_id="9")
    output = ModalLLMNode.execute(
        prompt="hi",
        model_profile="smolvlm-256m-instruct",  # not served: only the typed one may be used
        custom_model=" tiny/qwen35-scripted ",
        temperature=0.0,
    )
    response, metadata_json, _ = output.args
    assert response == "answer"
    assert json.loads(metadata_json)["repository"] == "tiny/qwen35-scripted"


def test_extra_model_paths_for_llm_are_searched_and_listed(
    storage: Path, comfyui: Path, tmp_path: Path
) -> None:
    # extra_model_paths.yaml entries reach folder_paths as add_model_folder_path(name, path)
    import folder_paths
    from comfy_llm._catalogue import picker_values

    elsewhere = tmp_path / "shared-models" / "llm"
    write_checkpoint("smolvlm", elsewhere / "SmolVLM-elsewhere")
    folder_paths.add_model_folder_path("llm", str(elsewhere))
    assert "models/LLM/SmolVLM-elsewhere" in picker_values(storage)
    for node in _nodes():
        verdict = node.validate_inputs(model_profile="models/LLM/SmolVLM-elsewhere")
        assert verdict is True, verdict
