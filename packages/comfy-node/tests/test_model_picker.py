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


def _completed_snapshot(root: Path, repository: str, revision: str, checkpoint: Path) -> Path:
    """A snapshot staged at ``repository@revision`` (the marker format staging documents;
    ``list_staged_snapshots``, the real one, checks it): a curated pin's real commit
    cannot come from the fake Hub."""
    import hashlib

    from comfy_llm_staging import MARKER_FILENAME, snapshot_path

    folder = snapshot_path(root, repository, revision)
    folder.mkdir(parents=True)
    files = {}
    for source in checkpoint.iterdir():
        data = source.read_bytes()
        (folder / source.name).write_bytes(data)
        files[source.name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    marker = {"schema": 1, "repository": repository, "revision": revision, "files": files}
    (folder / MARKER_FILENAME).write_text(json.dumps(marker), encoding="utf-8")
    return folder


def _labels(node: Any) -> dict[str, str]:
    from comfy_llm._comfyui._inputs import MODEL_LABELS

    return dict(_input(node, "model_profile").extra_dict[MODEL_LABELS])


def test_the_picker_lists_what_this_target_accepts_once_each_on_both_nodes(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_llm._comfyui._inputs import DEFAULT_MODEL
    from comfy_llm_core import ExecutionTarget
    from comfy_llm_staging import stage_snapshot

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    sha = model_hub.head("tiny/smolvlm")
    stage_snapshot("tiny/smolvlm", sha, storage_root=storage)
    curated = load_curated_registry().get(DEFAULT_MODEL)  # reviewed for every target
    # the curated pin, downloaded: listed once, as the curated id, "downloaded"
    tiny = write_checkpoint("smolvlm", tmp_path / "tiny-smolvlm")
    pinned = _completed_snapshot(storage, curated.repository, curated.revision, tiny)
    weights = sum(p.stat().st_size for p in pinned.glob("*.safetensors"))
    models = Path(os.environ["COMFYUI_STANDIN_BASE"]) / "models"  # folder_paths.models_dir
    write_checkpoint("qwen3_5", models / "LLM" / "Qwen3.5-tiny")
    write_checkpoint("smolvlm", models / "VLM" / "HuggingFaceTB" / "SmolVLM-tiny")
    (models / "LLM" / "not-a-checkpoint").mkdir()
    refused = models / "LLM" / "custom-code"  # a folder the registry refuses (custom code)
    write_checkpoint("smolvlm", refused)
    config = json.loads((refused / "config.json").read_text())
    (refused / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModel": "x.Y"}}))
    for node in _nodes():
        picker = _input(node, "model_profile")
        assert picker.io_type == "COMBO" and picker.default == DEFAULT_MODEL
        options = picker.options_list
        assert options[0] == DEFAULT_MODEL
        assert len(options) == len(set(options))  # each model once
        accepted = {e.id for e in load_curated_registry().for_target(ExecutionTarget.LOCAL_CPU)}
        assert set(options) & set(load_curated_registry().ids) == accepted
        assert "qwen3.5-2b" not in options and "qwen3.5-2b-mlx-4bit" not in options
        assert f"{curated.repository}@{curated.revision}" not in options  # it is the curated id
        assert f"tiny/smolvlm@{sha}" in options
        assert "models/LLM/Qwen3.5-tiny" in options
        assert "models/VLM/HuggingFaceTB/SmolVLM-tiny" in options
        assert "models/LLM/not-a-checkpoint" not in options
        assert "models/LLM/custom-code" not in options
        labels = _labels(node)
        assert set(labels) <= set(options)
        size = f"{max(1, round(weights / 1000**2))} MB"
        assert labels[DEFAULT_MODEL] == f"{curated.display_name} · downloaded · {size}"
        assert labels["smolvlm2-500m-video-instruct"] == "SmolVLM2 500M Video Instruct"
        assert labels[f"tiny/smolvlm@{sha}"].startswith(f"tiny/smolvlm @ {sha[:7]} · downloaded")
        assert labels["models/LLM/Qwen3.5-tiny"].startswith("models/LLM/Qwen3.5-tiny · ")
        # the typed override comes after every older input: saved widget positions stay
        # valid (the caption node's captioner options came later still)
        ids = [item.id for item in node.define_schema().inputs]
        after = ids[ids.index("custom_model") + 1 :]
        assert after == [] or after[0] == "caption_suffix", ids


def test_a_curated_id_the_registry_refuses_here_is_not_offered(
    storage: Path, comfyui: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the decision is the registry's, per curated id (no hand list): a commit whose stored
    # facts the target refuses (here: a config naming custom code) leaves the picker
    from comfy_llm._comfyui._inputs import DEFAULT_MODEL
    from comfy_llm_profiles._pins import PinnedFacts, save_pinned_facts

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    entry = load_curated_registry().get("smolvlm2-500m-video-instruct")
    assert "smolvlm2-500m-video-instruct" in _input(_nodes()[0], "model_profile").options_list
    config = json.loads((write_checkpoint("smolvlm", tmp_path / "c") / "config.json").read_text())
    facts = PinnedFacts(entry.repository, entry.revision, 10, {**config, "auto_map": {"A": "b.C"}})
    save_pinned_facts(storage, facts)
    for node in _nodes():
        options = _input(node, "model_profile").options_list
        assert "smolvlm2-500m-video-instruct" not in options
        assert DEFAULT_MODEL in options


@pytest.mark.parametrize(
    ("model_profile", "problem"),
    [
        ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", None),  # a seed-era value, off the list
        ("Qwen/Qwen3-VL-2B-Instruct@main", None),
        ("smolvlm2-2.2b-instruct", None),
        ("/opt/models/never-checked-at-queue-time/../x", "'..' folder"),
        ("Qwen/Qwen3-VL 2B", "whitespace"),
        ("smolvlm-256m-instrct", "neither owner/model nor a known curated id"),
        ("https://huggingface.co/Qwen/Qwen3-VL-2B/", None),  # a pasted model page
        ("https://huggingface.co/datasets/Qwen/x", "not a model page"),
        ("models/LLM/missing", "no such folder"),
    ],
)
def test_queue_time_check_refuses_only_what_cannot_parse(
    comfyui: Path, model_profile: str, problem: str | None
) -> None:
    for node in _nodes():
        verdict = node.validate_inputs(model_profile=model_profile)
        if problem is None:
            assert verdict is True, verdict
        else:
            assert isinstance(verdict, str) and problem in verdict and "\n" not in verdict
            assert verdict.startswith("model_profile: ")


def test_validate_inputs_names_only_the_picker(comfyui: Path) -> None:
    # ComfyUI skips its own min/max/list checks for every input validate_inputs names
    # (all of them with **kwargs), and reports a refusal once per named input: naming
    # custom_model too showed one bad value as two errors. Only the picker is named.
    import inspect

    for node in _nodes():
        spec = inspect.getfullargspec(node.validate_inputs)
        assert spec.args == ["cls", "model_profile"] and spec.varkw is None


@pytest.mark.parametrize(
    ("custom_model", "problem"),
    [
        ("owner/model@", "Model reference 'owner/model@'"),
        ("Qwen/Qwen3-VL 2B", "whitespace"),
        ("models/LLM/missing", "no such folder"),
    ],
)
def test_a_bad_custom_model_is_one_error_naming_custom_model(
    comfyui: Path, custom_model: str, problem: str
) -> None:
    from comfy_llm._picker import chosen_model

    with pytest.raises(ValueError, match=r"^custom_model: ") as caught:
        chosen_model("smolvlm2-2.2b-instruct", custom_model)
    assert problem in str(caught.value)
    assert chosen_model("not valid!", " HuggingFaceTB/SmolVLM-256M-Instruct ") == (
        "HuggingFaceTB/SmolVLM-256M-Instruct"  # the typed one wins
    )


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
    from comfy_llm._catalogue import picker_choices
    from comfy_llm_core import ExecutionTarget

    elsewhere = tmp_path / "shared-models" / "llm"
    write_checkpoint("smolvlm", elsewhere / "SmolVLM-elsewhere")
    folder_paths.add_model_folder_path("llm", str(elsewhere))
    listed = [c.value for c in picker_choices(storage, ExecutionTarget.LOCAL_CPU)]
    assert "models/LLM/SmolVLM-elsewhere" in listed
    for node in _nodes():
        verdict = node.validate_inputs(model_profile="models/LLM/SmolVLM-elsewhere")
        assert verdict is True, verdict
