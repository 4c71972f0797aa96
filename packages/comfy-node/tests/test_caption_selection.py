"""Which of a folder's files a caption batch takes: include/exclude globs and a limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import InvalidSettingError
from comfy_llm_testworld import FakeHub
from PIL import Image

SCRIPTED = "tiny/qwen35-scripted"  # answers "answer" whatever it is shown


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "set"
    (folder / "sub").mkdir(parents=True)
    for name in ["a.png", "B.PNG", "c.jpg", "sub/d.png", "sub/e.jpg"]:
        Image.new("RGB", (16, 12)).save(folder / name)
    return folder


def _names(folder: Path, **selection: Any) -> list[str]:
    from comfy_llm._caption_conventions import CaptionConventions
    from comfy_llm._caption_job import caption_items

    conventions = CaptionConventions(subfolders=True, **selection)
    return [item.name for item in caption_items(folder=folder, conventions=conventions)]


def test_patterns_match_the_name_or_the_path_below_and_the_limit_keeps_the_order(
    tmp_path: Path,
) -> None:
    from comfy_llm._caption_media import split_patterns

    folder = _folder(tmp_path)
    assert _names(folder) == ["B.PNG", "a.png", "c.jpg", "sub/d.png", "sub/e.jpg"]
    assert _names(folder, include=("*.png",)) == ["B.PNG", "a.png", "sub/d.png"]
    assert _names(folder, include=("sub/*",)) == ["sub/d.png", "sub/e.jpg"]
    assert _names(folder, exclude=("sub/*", "b.*")) == ["a.png", "c.jpg"]
    assert _names(folder, include=("*.png",), exclude=("sub/*",), limit=1) == ["B.PNG"]
    assert _names(folder, limit=3) == ["B.PNG", "a.png", "c.jpg"]
    assert split_patterns(" *.png, sub/*\n*.jpg ,") == ("*.png", "sub/*", "*.jpg")


def test_a_selection_nothing_matches_or_a_bad_limit_is_refused(tmp_path: Path) -> None:
    from comfy_llm._caption_conventions import CaptionConventions
    from comfy_llm.errors import CaptionFolderError

    with pytest.raises(
        CaptionFolderError, match=r"none of its 5 files matches include \['\*.gif'\]"
    ):
        _names(_folder(tmp_path), include=("*.gif",))
    with pytest.raises(InvalidSettingError, match="max_files"):
        CaptionConventions(limit=-1)


@pytest.mark.slow
def test_node_and_cli_select_files(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    tmp_path: Path,
    capsys: Any,
    monkeypatch: Any,
) -> None:
    from comfy_api.latest import io
    from comfy_llm._cli import main
    from comfy_llm._comfyui._caption_node import CaptionImagesNode

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    folder = _folder(tmp_path)
    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="9")
    _, text = CaptionImagesNode.execute(
        model_profile=SCRIPTED,
        prompt="Caption it.",
        folder=str(folder),
        max_new_tokens=16,
        subfolders=True,
        include_patterns="*.png, *.jpg",
        exclude_patterns="sub/e*",
        max_files=3,
    ).args
    assert [r["name"] for r in json.loads(text)["per_image"]] == ["B.PNG", "a.png", "c.jpg"]
    assert not (folder / "sub" / "d.txt").exists()

    argv = ["caption", str(folder), "--model", SCRIPTED, "--json", "--max-new-tokens", "16"]
    assert (
        main([*argv, "--recursive", "--include", "sub/*", "--exclude", "*.jpg", "--limit", "5"])
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in result["metadata"]["per_image"]] == ["sub/d.png"]
    assert (folder / "sub" / "d.txt").read_text() == "answer\n"
