"""CLIP's 75-token warning where no CLIP tokenizer is at hand, and how it is shown.

The count itself runs on ComfyUI's real CLIP tokenizer in the real-ComfyUI
tier (``testing/comfyui_tier/test_caption_clip.py``): its files are not
here, and a stand-in tokenizer would only test itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PIL import Image


def _records(*names: str) -> list[dict[str, Any]]:
    return [{"name": name, "status": "captioned"} for name in names]


def test_without_a_clip_tokenizer_nothing_is_counted_and_the_record_says_why() -> None:
    from comfy_llm._caption_clip import check_clip_tokens, comfyui_clip_tokenizer

    assert comfyui_clip_tokenizer() is None  # no ComfyUI here
    records = _records("a.png")
    summary = check_clip_tokens(["a cat " * 60], records)
    assert summary["counted"] is False and summary["limit"] == 75
    assert "--clip-tokenizer" in summary["reason"] and "sd1_tokenizer" in summary["reason"]
    assert "clip_tokens" not in records[0] and "clip_warning" not in records[0]
    kept = [{"name": "a.png", "status": "kept_existing"}]
    assert check_clip_tokens(["old"], kept)["reason"] == "not counted: no caption was made"


def test_a_comfy_package_without_the_tokenizer_is_not_comfyuis(comfyui: Path) -> None:
    from comfy_llm._caption_clip import check_clip_tokens, comfyui_clip_tokenizer

    assert comfyui_clip_tokenizer() is None  # the stand-in's comfy has no sd1_tokenizer
    assert check_clip_tokens(["a cat"], _records("a.png"))["counted"] is False


def test_the_node_summary_names_each_caption_over_the_window(comfyui: Path) -> None:
    from comfy_llm._comfyui._caption_node import caption_summary

    warning = (
        "82 CLIP tokens, over the 75 a CLIP text encoder reads (SD1.x/SDXL trainers cut the "
        "rest); pick prompt_preset prose_short or lower max_new_tokens for shorter captions"
    )
    per_image = [
        {"name": "a.png", "status": "captioned", "clip_tokens": 82, "clip_warning": warning},
        {"name": "b.png", "status": "captioned", "clip_tokens": 12},
    ]
    metadata = {"images": 2, "captioned": 2, "kept_existing": 0, "failed": 0, "written": 2}
    summary = caption_summary(["long", "short"], {**metadata, "per_image": per_image})
    lines = summary.splitlines()
    assert lines[1] == f"Warning: a.png: {warning}"
    assert "b.png" not in "".join(line for line in lines if line.startswith("Warning"))


def test_cli_refuses_a_clip_tokenizer_folder_without_its_files_before_captioning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from comfy_llm._cli import main

    folder = tmp_path / "set"
    folder.mkdir()
    Image.new("RGB", (16, 16)).save(folder / "a.png")
    wrong = tmp_path / "sd1_tokenizr"
    wrong.mkdir()
    argv = ["caption", str(folder), "--model", "tiny/never-resolved"]
    assert main([*argv, "--clip-tokenizer", str(wrong)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("comfy-llm: error: --clip-tokenizer=")
    assert "sd1_tokenizr" in error and "vocab.json or merges.txt" in error
    assert "ComfyUI/comfy/sd1_tokenizer" in error
    assert not (folder / "a.txt").exists()
