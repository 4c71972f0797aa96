"""The LoRA captioner's conventions: joining, templating, modes, extensions, manifest, media."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import InvalidSettingError
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.media import write_test_video
from PIL import Image

SCRIPTED = "tiny/qwen35-scripted"  # answers "answer" whatever it is shown


@pytest.mark.parametrize(
    ("parts", "separator", "joined"),
    [
        (["sks cat,", "a cat", ""], ", ", "sks cat, a cat"),
        (["sks cat, ", ", a cat", "by X"], ", ", "sks cat, a cat, by X"),
        (["sks.", "A cat."], ", ", "sks. A cat."),
        (["", "a cat", "  "], ", ", "a cat"),
        (["ohwx", "a cat"], " ", "ohwx a cat"),
        (["tag1;", "tag2"], "; ", "tag1; tag2"),
    ],
)
def test_separators_never_double(parts: list[str], separator: str, joined: str) -> None:
    from comfy_llm._caption_conventions import join_caption

    assert join_caption(parts, separator) == joined


def test_templating_fills_name_and_folder_and_the_trigger_only_when_given(tmp_path: Path) -> None:
    from comfy_llm._caption_conventions import CaptionConventions, compose_caption

    path = tmp_path / "cats" / "tom.png"
    kept = CaptionConventions(suffix="from {folder}")
    assert compose_caption("[trigger] {name},", "a cat", kept, path, "cats/tom.png") == (
        "[trigger] tom, a cat, from cats"  # left for ai-toolkit's trigger_word
    )
    given = CaptionConventions(trigger_word="sks")
    assert compose_caption("[trigger]", "a cat", given, path, "tom.png") == "sks, a cat"
    # an IMAGE batch slice has no file: {name} is its slice name, {folder} empty
    assert compose_caption("{name}:", "a cat", given, None, "image 2") == "image 2: a cat"


def test_bad_values_are_refused_naming_the_value_and_the_choices() -> None:
    from comfy_llm._caption_conventions import CaptionConventions, check_template

    with pytest.raises(InvalidSettingError, match=r"caption_suffix.*\{stem\}.*\{name\}"):
        check_template("caption_suffix", "by {stem}")
    with pytest.raises(InvalidSettingError, match=r"caption_mode.*replace.*skip_existing"):
        CaptionConventions(mode="replace")
    with pytest.raises(InvalidSettingError, match=r"caption_extension.*txt"):
        CaptionConventions(extension="txt")
    with pytest.raises(InvalidSettingError, match=r"caption_extension.*media or manifest"):
        CaptionConventions(extension=".png")
    with pytest.raises(InvalidSettingError, match="caption_separator"):
        CaptionConventions(separator="\n")


def _dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "dataset"
    (folder / "sub" / "deeper").mkdir(parents=True)
    (folder / ".hidden").mkdir()
    for index, name in enumerate(["a.png", "b.png", "sub/c.jpg", "sub/deeper/d.webp"]):
        Image.new("RGB", (32, 24), (60 * index, 90, 30)).save(folder / name)
    Image.new("RGB", (8, 8)).save(folder / ".hidden" / "x.png")
    return folder


def _node(**kwargs: Any) -> tuple[list[str], dict[str, Any]]:
    from comfy_api.latest import io
    from comfy_llm._comfyui._caption_node import CaptionImagesNode

    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="9")
    captions, metadata = CaptionImagesNode.execute(**kwargs).args
    return captions, json.loads(metadata)


@pytest.mark.slow
def test_node_subfolders_modes_extension_and_manifest(
    model_hub: FakeHub, storage: Path, comfyui: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    folder = _dataset(tmp_path)
    (folder / "a.caption").write_text("old a\n")
    (folder / "b.caption").write_text("old b\n")
    common = {"model_profile": SCRIPTED, "prompt": "Caption it.", "folder": str(folder)}
    common |= {"max_new_tokens": 16, "caption_extension": ".caption", "subfolders": True}
    # defaults: files written, skip_existing keeps a and b
    captions, metadata = _node(**common, caption_prefix="[trigger] {folder},")
    assert [r["name"] for r in metadata["per_image"]] == [
        "a.png",
        "b.png",
        "sub/c.jpg",
        "sub/deeper/d.webp",
    ]
    assert captions == ["old a", "old b", "[trigger] sub, answer", "[trigger] deeper, answer"]
    assert (folder / "sub" / "c.caption").read_text() == "[trigger] sub, answer\n"
    assert (
        not (folder / "sub" / "c.txt").exists() and not (folder / ".hidden" / "x.caption").exists()
    )

    # append / prepend join the old caption once; a trigger word replaces [trigger]
    _node(**common, caption_mode="append", caption_suffix="{name}", trigger_word="sks")
    assert (folder / "a.caption").read_text() == "old a, answer, a\n"
    _node(**common, caption_mode="prepend", caption_prefix="[trigger],", trigger_word="sks")
    assert (folder / "b.caption").read_text() == "sks, answer, old b, answer, b\n"

    # overwrite, .json sidecars and the manifest
    captions, metadata = _node(
        **common | {"caption_extension": ".json"},
        caption_mode="overwrite",
        write_manifest=True,
    )
    sidecar = json.loads((folder / "sub" / "deeper" / "d.json").read_text())
    assert sidecar["caption"] == "answer" and sidecar["model"] == SCRIPTED
    assert metadata["manifest"] == "metadata.jsonl" and metadata["manifest_lines"] == 4
    assert str(tmp_path) not in json.dumps(metadata)  # names, not this disk's paths
    lines = [json.loads(line) for line in (folder / "metadata.jsonl").read_text().splitlines()]
    assert [line["media_path"] for line in lines] == [
        "a.png",
        "b.png",
        "sub/c.jpg",
        "sub/deeper/d.webp",
    ]
    for line in lines:  # musubi-tuner's image_jsonl_file keys, absolute paths
        assert Path(line["image_path"]) == (folder / line["media_path"]).resolve()
        assert line["caption"] == "answer"


@pytest.mark.slow
def test_two_files_sharing_one_caption_file_are_refused_before_any_model_work(
    model_hub: FakeHub, storage: Path, comfyui: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    folder = _dataset(tmp_path)
    Image.new("RGB", (8, 8)).save(folder / "a.jpg")
    model_hub.clear_requests()
    with pytest.raises(ValueError, match=r"'a.jpg' and 'a.png' would share the caption file"):
        _node(model_profile=SCRIPTED, prompt="Caption it.", folder=str(folder))
    assert model_hub.requests == []
    with pytest.raises(ValueError, match=r"caption_prefix.*\{file\}"):
        _node(
            model_profile=SCRIPTED,
            prompt="Caption it.",
            folder=str(folder),
            caption_prefix="{file}",
        )


@pytest.mark.slow
def test_videos_in_the_folder_are_captioned_from_sampled_frames(
    model_hub: FakeHub, storage: Path, comfyui: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    folder = tmp_path / "clips"
    folder.mkdir()
    write_test_video(folder / "walk.mp4", frames=20)
    Image.new("RGB", (32, 24), (1, 2, 3)).save(folder / "still.png")
    captions, metadata = _node(
        model_profile="tiny/smolvlm-scripted",
        prompt="Caption it.",
        folder=str(folder),
        max_new_tokens=16,
        write_manifest=True,
    )
    statuses = {r["name"]: r["status"] for r in metadata["per_image"]}
    assert statuses == {"still.png": "captioned", "walk.mp4": "captioned"}, metadata["per_image"]
    assert (folder / "walk.txt").read_text() == captions[1] + "\n"
    lines = [json.loads(line) for line in (folder / "metadata.jsonl").read_text().splitlines()]
    assert [sorted(line) for line in lines] == [
        ["caption", "image_path", "media_path"],
        ["caption", "media_path", "video_path"],  # musubi-tuner's video_jsonl_file key
    ]


@pytest.mark.slow
def test_cli_caption_options(
    model_hub: FakeHub, storage: Path, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    from comfy_llm._cli import main

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    folder = _dataset(tmp_path)
    (folder / "a.txt").write_text("old a\n")
    argv = ["caption", str(folder), "--model", SCRIPTED, "--json", "--max-new-tokens", "16"]
    options = ["--prefix", "[trigger],", "--suffix", "{name}", "--trigger-word", "ohwx"]
    assert main([*argv, *options, "--mode", "append", "--recursive", "--jsonl"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["captions"][0] == "old a, ohwx, answer, a"  # written without --write
    assert (folder / "sub" / "deeper" / "d.txt").read_text() == "ohwx, answer, d\n"
    assert result["metadata"]["manifest_lines"] == 4
    assert main([*argv, "--caption-extension", ".caption", "--no-write"]) == 0
    capsys.readouterr()
    assert not list(folder.glob("*.caption"))
    assert main([*argv, "--suffix", "{stem}"]) != 0
    assert "{stem}" in capsys.readouterr().err


@pytest.mark.slow
def test_progress_says_failed_and_kept_as_such_and_already_downloaded(
    model_hub: FakeHub, storage: Path, comfyui: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    from comfy_execution.progress import get_progress_state
    from server import PromptServer

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    folder = tmp_path / "set"
    folder.mkdir()
    Image.new("RGB", (32, 24)).save(folder / "a.png")
    (folder / "b.png").write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    (folder / "c.png").write_bytes((folder / "a.png").read_bytes())
    (folder / "c.txt").write_text("kept\n")
    common = {"model_profile": SCRIPTED, "prompt": "Caption it.", "folder": str(folder)}
    _node(**common, max_new_tokens=16)  # downloads
    PromptServer.instance.progress_texts.clear()
    get_progress_state().activities.clear()
    _node(**common, max_new_tokens=16, caption_mode="overwrite")
    texts = [text for node, text in PromptServer.instance.progress_texts if node == "9"]
    assert "Already downloaded" in texts and not [t for t in texts if "Downloading" in t]
    assert ("9", "Already downloaded") in get_progress_state().activities
    assert "1/3 images done; b.png failed (see metadata_json)" in texts, texts
    assert not [t for t in texts if "images (b.png)" in t], texts  # never "Captioned" b.png


def test_the_new_inputs_come_after_every_older_one_with_defaults(comfyui: Path) -> None:
    """Saved workflows restore widgets_values by position: older ones keep their meaning,
    and a node without the new values behaves as before (skip_existing, .txt, no manifest)."""
    from comfy_llm._comfyui._caption_inputs import CaptionInputs
    from comfy_llm._comfyui._caption_node import CaptionImagesNode

    inputs = CaptionImagesNode.define_schema().inputs
    names = [item.id for item in inputs]
    new = names[names.index("custom_model") + 1 :]
    assert new == [
        "caption_suffix",
        "trigger_word",
        "caption_mode",
        "caption_extension",
        "write_manifest",
        "subfolders",
        "caption_separator",
        "clean_think_tags",
        "clean_whitespace",
        "clean_quotes",
        "clean_repetition",
        "include_patterns",
        "exclude_patterns",
        "max_files",
        "write_csv",
        "prompt_preset",
    ]
    assert all(item.optional for item in inputs if item.id in new)
    older = CaptionInputs().conventions()
    assert (older.mode, older.extension, older.manifest, older.subfolders) == (
        None,
        ".txt",
        False,
        False,
    )
