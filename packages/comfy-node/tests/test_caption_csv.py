"""The CSV a caption batch writes beside its JSONL manifest."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld import FakeHub
from PIL import Image

SCRIPTED = "tiny/qwen35-scripted"  # answers "answer" whatever it is shown


def test_csv_quotes_commas_quotes_and_newlines_and_skips_failed_files(tmp_path: Path) -> None:
    from comfy_llm._caption_conventions import write_csv

    entries = [
        (tmp_path / "a.png", 'sks, a "red" cat', False),
        (tmp_path / "b.png", "", False),  # failed: no row
        (tmp_path / "c.mp4", "line one\nline two", True),
    ]
    written = write_csv(tmp_path, entries)
    assert written == (tmp_path / "metadata.csv", 2)
    with (tmp_path / "metadata.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows == [
        ["image_path", "caption"],
        [str((tmp_path / "a.png").resolve()), 'sks, a "red" cat'],
        [str((tmp_path / "c.mp4").resolve()), "line one\nline two"],
    ]
    assert write_csv(tmp_path, [(tmp_path / "b.png", "", False)]) is None
    assert not list(tmp_path.glob("*.tmp*")) and not list(tmp_path.glob(".*"))


@pytest.mark.slow
def test_node_and_cli_write_the_csv_beside_the_manifest(
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
    folder = tmp_path / "set"
    folder.mkdir()
    for name in ("a.png", "b.png"):
        Image.new("RGB", (16, 12)).save(folder / name)
    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="9")
    common = {"model_profile": SCRIPTED, "prompt": "Caption it.", "folder": str(folder)}
    output = CaptionImagesNode.execute(
        **common, max_new_tokens=16, caption_prefix="sks,", write_manifest=True, write_csv=True
    )
    metadata = json.loads(output.args[1])
    assert (metadata["csv"], metadata["csv_rows"], metadata["manifest_lines"]) == (
        "metadata.csv",
        2,
        2,
    )
    assert "and metadata.jsonl and metadata.csv." in output.ui["text"][0]
    with (folder / "metadata.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(Path(r["image_path"]).name, r["caption"]) for r in rows] == [
        ("a.png", "sks, answer"),
        ("b.png", "sks, answer"),
    ]

    (folder / "metadata.csv").unlink()
    argv = ["caption", str(folder), "--model", SCRIPTED, "--json", "--max-new-tokens", "16"]
    assert main([*argv, "--csv"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metadata"]["csv_rows"] == 2 and "manifest" not in result["metadata"]
    assert (folder / "metadata.csv").read_text(encoding="utf-8").startswith("image_path,caption")
