"""Batch captioning and JSON answers through the nodes (ComfyUI stand-in) and the CLI."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from comfy_llm_core import item_seed
from comfy_llm_testworld import FakeHub
from PIL import Image

from .conftest import node_raises

pytestmark = pytest.mark.slow

TARGETS = ["local_cpu", "local_apple"]
SCHEMA = {
    "type": "object",
    "properties": {"color": {"enum": ["red", "blue"]}, "n": {"type": "integer", "maximum": 9}},
    "required": ["color", "n"],
    "additionalProperties": False,
}


@pytest.fixture
def target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", request.param)
    return request.param


def _caption_node() -> Any:
    from comfy_api.latest import io
    from comfy_llm._comfyui._caption_node import CaptionImagesNode

    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="9")
    return CaptionImagesNode


def _llm_node() -> Any:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    ModalLLMNode.hidden = io.HiddenHolder(unique_id="7")
    return ModalLLMNode


def _caption(**kwargs: Any) -> tuple[list[str], dict[str, Any]]:
    output = _caption_node().execute(**kwargs)
    captions, metadata = output.args
    return captions, json.loads(metadata)


def _folder(tmp_path: Path, names: list[str]) -> Path:
    folder = tmp_path / "dataset"
    folder.mkdir()
    for index, name in enumerate(names):
        Image.new("RGB", (32, 24), (40 * index, 200, 90)).save(folder / name)
    return folder


@pytest.mark.parametrize("target", TARGETS, indirect=True)
def test_batch_gives_one_caption_per_image_identical_to_single_runs(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    images = np.random.default_rng(3).random((3, 24, 32, 3), dtype=np.float32)
    sampling = {"temperature": 0.9, "top_p": 0.9, "seed": 11, "max_new_tokens": 6}
    captions, metadata = _caption(
        model_profile="tiny/qwen35", prompt="Caption it.", images=images, **sampling
    )
    singles = []
    for index in range(3):
        # each image has its own seed, from the job's seed and its name
        seed = item_seed(11, f"image {index + 1}")
        output = _llm_node().execute(
            prompt="Caption it.",
            model_profile="tiny/qwen35",
            images=images[index : index + 1],
            enable_reasoning=False,
            **{**sampling, "seed": seed},
        )
        singles.append(output.args[0])
    assert captions == singles
    assert [r["seed"] for r in metadata["per_image"]] == [
        item_seed(11, f"image {n}") for n in (1, 2, 3)
    ]
    assert metadata["images"] == metadata["captioned"] == 3
    assert [r["name"] for r in metadata["per_image"]] == ["image 1", "image 2", "image 3"]
    assert [r["cache_status"] for r in metadata["per_image"]] == ["cold", "warm", "warm"]
    assert {"comfy-llm", "comfy-llm-residency"} <= set(metadata["comfy_llm_versions"])


@pytest.mark.parametrize("target", ["local_cpu"], indirect=True)
def test_folder_captions_written_atomically_existing_kept_corrupt_reported(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, ["a.png", "b.jpg", "d.webp"])
    (folder / "c.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    (folder / "b.txt").write_text("kept caption\n")
    (folder / "notes.md").write_text("not an image")
    captions, metadata = _caption(
        model_profile="tiny/qwen35-scripted",
        prompt="Caption it.",
        folder=str(folder),
        write_caption_files=True,
        caption_prefix="sks",
        max_new_tokens=8,
    )
    statuses = {r["name"]: r["status"] for r in metadata["per_image"]}
    assert statuses == {
        "a.png": "captioned",
        "b.jpg": "kept_existing",
        "c.png": "failed",
        "d.webp": "captioned",
    }
    assert captions[1] == "kept caption"
    assert captions[2] == ""
    assert "c.png" in metadata["per_image"][2]["error"]
    assert (folder / "a.txt").read_text() == captions[0] + "\n"
    assert captions[0].startswith("sks, ")
    assert (folder / "b.txt").read_text() == "kept caption\n"
    assert not (folder / "c.txt").exists()
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []
    assert metadata["written"] == 2


@pytest.mark.parametrize("target", TARGETS, indirect=True)
def test_greedy_captions_take_the_engines_batch_where_it_has_one(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    images = np.random.default_rng(8).random((3, 24, 32, 3), dtype=np.float32)
    sampling = {"temperature": 0.0, "max_new_tokens": 6}
    captions, metadata = _caption(
        model_profile="tiny/qwen35", prompt="Caption it.", images=images, batch_size=3, **sampling
    )
    singles = [
        _llm_node()
        .execute(
            prompt="Caption it.",
            model_profile="tiny/qwen35",
            images=images[index : index + 1],
            enable_reasoning=False,
            **sampling,
        )
        .args[0]
        for index in range(3)
    ]
    assert captions == singles
    # Transformers and MLX-VLM batch greedy images of one size
    assert metadata["batched"] is True
    assert metadata["engine_batch_size"] == 3
    assert [r["batch_size"] for r in metadata["per_image"]] == [3, 3, 3]
    assert metadata["last_request"]["batched"] is True


@pytest.mark.parametrize("target", ["local_cpu"], indirect=True)
def test_the_next_chunk_is_prepared_while_the_engine_runs_the_current_one(
    target: str,
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine never waits on the CPU's decoding between chunks (vLLM review r2, F5).

    Each engine call holds until the next chunk's inputs are ready: fed
    serially, that chunk would be prepared only after the call returned, and
    the hold would run out.
    """
    import comfy_llm._caption as caption
    from comfy_llm_residency import ResidentModelManager

    prepared: dict[int, threading.Event] = {}
    threads: dict[int, str] = {}
    overlapped: list[bool] = []
    original_prepare, original_run = caption._prepare, ResidentModelManager.run_batch

    def prepare(job: Any, items: Any, chunk: Any, **kwargs: Any) -> Any:
        ready = original_prepare(job, items, chunk, **kwargs)
        threads[chunk[0]] = threading.current_thread().name
        prepared.setdefault(chunk[0], threading.Event()).set()
        return ready

    def run_batch(self: Any, profile: Any, path: Any, items: Any, **kwargs: Any) -> Any:
        first = len(overlapped) * 2  # chunks of 2: this call's images start here
        if first + 2 < 6:
            following = prepared.setdefault(first + 2, threading.Event())
            overlapped.append(following.wait(timeout=20))
        return original_run(self, profile, path, items, **kwargs)

    monkeypatch.setattr(caption, "_prepare", prepare)
    monkeypatch.setattr(ResidentModelManager, "run_batch", run_batch)
    images = np.random.default_rng(5).random((6, 24, 32, 3), dtype=np.float32)
    captions, metadata = _caption(
        model_profile="tiny/qwen35",
        prompt="Caption it.",
        images=images,
        batch_size=2,
        temperature=0.0,
        max_new_tokens=4,
    )
    assert overlapped == [True, True]  # chunks 2 and 3 were ready before the engine's turn
    assert threads[0] == threading.current_thread().name  # the first, with its progress
    assert threads[2].startswith("caption-feed") and threads[4].startswith("caption-feed")
    assert metadata["captioned"] == 6 and all(captions)


@pytest.mark.parametrize("target", ["local_cpu"], indirect=True)
def test_cancel_mid_batch_keeps_the_files_of_finished_chunks(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path, tmp_path: Path
) -> None:
    import comfy.model_management as mm

    folder = _folder(tmp_path, ["a.png", "b.png", "c.png", "d.png"])
    # A warm run counts ComfyUI's interrupt checks; Cancel then lands in the second chunk.
    args = {
        "model_profile": "tiny/qwen35-scripted",
        "prompt": "x",
        "max_new_tokens": 8,
        "batch_size": 2,
        "write_caption_files": False,  # the warm runs leave the folder as it is
    }
    _caption(folder=str(folder), **args)
    before = mm._checks
    _, metadata = _caption(folder=str(folder), **args)
    assert [r["chunk"] for r in metadata["per_image"]] == [0, 0, 1, 1]
    assert metadata["batched"] is True
    per_run = mm._checks - before
    mm.interrupt_after_checks = mm._checks + per_run * 3 // 4
    try:
        with pytest.raises(mm.InterruptProcessingException):
            _caption(
                folder=str(folder), **args | {"write_caption_files": True, "skip_existing": False}
            )
    finally:
        mm.interrupt_after_checks = None
    written = sorted(p.name for p in folder.glob("*.txt"))
    assert written == ["a.txt", "b.txt"]  # the first chunk's, whole
    assert all((folder / name).read_text().strip() for name in written)
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


def test_a_batch_size_out_of_range_is_refused_before_any_download(
    model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    from comfy_llm_core import InvalidSettingError

    images = np.zeros((1, 8, 8, 3), dtype=np.float32)
    with node_raises(InvalidSettingError, match="batch_size"):
        _caption(model_profile="tiny/qwen35", prompt="x", images=images, batch_size=0)
    assert model_hub.file_requests() == []


def test_folder_bounds_and_symlinks_outside_refused(tmp_path: Path) -> None:
    from comfy_llm._caption_job import find_images
    from comfy_llm.errors import CaptionFolderError

    folder = _folder(tmp_path, ["a.png", "b.png"])
    outside = tmp_path / "secret.png"
    Image.new("RGB", (4, 4)).save(outside)
    assert [p.name for p in find_images(folder)] == ["a.png", "b.png"]
    with pytest.raises(CaptionFolderError, match="more than the limit of 1"):
        find_images(folder, limit=1)
    (folder / "link.png").symlink_to(outside)
    with pytest.raises(CaptionFolderError, match="outside the folder"):
        find_images(folder)
    with pytest.raises(CaptionFolderError, match="is not a folder"):
        find_images(tmp_path / "missing")


@pytest.mark.parametrize("target", TARGETS, indirect=True)
def test_node_answers_schema_valid_json_from_random_weights(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    output = _llm_node().execute(
        prompt="Describe the colour as JSON.",
        model_profile="tiny/qwen35",
        response_schema=json.dumps(SCHEMA),
        enable_reasoning=False,
        temperature=0.0,
        max_new_tokens=40,
    )
    response, metadata_json, _ = output.args
    jsonschema.validate(json.loads(response), SCHEMA)
    metadata = json.loads(metadata_json)
    assert metadata["schema_valid"] is True
    assert metadata["constrained_decoding"] is True


@pytest.mark.parametrize("target", ["local_cpu"], indirect=True)
def test_a_schema_answer_cut_by_the_budget_fails_the_run_with_the_reason(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    # 3 tokens cannot hold {"color": ..., "n": ...}: constrained decoding stops mid-object,
    # the retry too; the run must not end green with text the next node cannot parse
    from comfy_llm_structured import AnswerSchemaError

    with node_raises(AnswerSchemaError) as failure:
        _llm_node().execute(
            prompt="Describe the colour as JSON.",
            model_profile="tiny/qwen35",
            response_schema=json.dumps(SCHEMA),
            enable_reasoning=False,
            temperature=0.0,
            max_new_tokens=3,
        )
    shown = str(failure.shown)
    assert "does not satisfy response_schema after its retry" in shown, shown
    assert "not JSON" in shown and "cut off at max_new_tokens (3 tokens)" in shown, shown
    assert "The answer began: '{" in shown, shown
    assert failure.value.retries == 1 and failure.value.cut_at_tokens == 3


@pytest.mark.parametrize("target", ["local_cpu"], indirect=True)
def test_caption_answers_that_fail_the_schema_are_failed_images_not_files(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, ["a.png", "b.png"])
    captions, metadata = _caption(
        model_profile="tiny/qwen35",
        prompt="Describe the colour as JSON.",
        folder=str(folder),
        write_caption_files=True,
        response_schema=json.dumps(SCHEMA),
        temperature=0.0,
        max_new_tokens=3,
    )
    assert captions == ["", ""]
    assert (metadata["captioned"], metadata["failed"], metadata["written"]) == (0, 2, 0)
    for record in metadata["per_image"]:
        assert record["status"] == "failed", record
        assert "does not satisfy response_schema (cut off at max_new_tokens)" in record["error"]
    assert not list(folder.glob("*.txt"))


def test_nothing_to_caption_says_so_without_a_made_up_folder_name(comfyui: Path) -> None:
    from comfy_llm.errors import CaptionFolderError

    with node_raises(CaptionFolderError) as failure:
        _caption_node().execute(model_profile="tiny/qwen35", prompt="Caption this.")
    shown = str(failure.shown)
    assert shown.startswith("Nothing to caption: no images are connected and no folder"), shown
    assert "(no input)" not in shown and "'" not in shown.split(".")[0], shown


def test_invalid_schema_is_refused_before_any_download(
    model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    from comfy_llm_structured import InvalidSchemaError

    with node_raises(InvalidSchemaError):
        _llm_node().execute(prompt="x", model_profile="tiny/qwen35", response_schema="{not json")
    assert model_hub.file_requests() == []


@pytest.mark.parametrize("target", ["local_cpu"], indirect=True)
def test_cli_caption_writes_files_and_prints_json(
    target: str, model_hub: FakeHub, storage: Path, tmp_path: Path, capsys
) -> None:
    from comfy_llm._cli import main

    folder = _folder(tmp_path, ["x.png", "y.png"])
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    argv = ["caption", str(folder), "--model", "tiny/qwen35", "--write", "--json"]
    assert main([*argv, "--schema", str(schema), "--max-new-tokens", "40"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["captions"]) == 2
    for name, caption in zip(("x", "y"), result["captions"], strict=True):
        assert (folder / f"{name}.txt").read_text() == caption + "\n"
        jsonschema.validate(json.loads(caption), SCHEMA)
    assert result["metadata"]["batched"] is False  # a schema mask follows one row: looped


@pytest.mark.parametrize("target", ["local_cpu"], indirect=True)
def test_cli_caption_batches_greedy_images(
    target: str, model_hub: FakeHub, storage: Path, tmp_path: Path, capsys
) -> None:
    from comfy_llm._cli import main

    folder = _folder(tmp_path, ["x.png", "y.png", "z.png"])
    argv = ["caption", str(folder), "--model", "tiny/qwen35", "--write", "--json"]
    assert main([*argv, "--max-new-tokens", "6", "--batch-size", "2"]) == 0
    metadata = json.loads(capsys.readouterr().out)["metadata"]
    assert metadata["batch_size"] == 2
    assert [(r["chunk"], r["batch_size"]) for r in metadata["per_image"]] == [
        (0, 2),
        (0, 2),
        (1, 1),
    ]
    assert sorted(p.name for p in folder.glob("*.txt")) == ["x.txt", "y.txt", "z.txt"]
