"""CLIP's 75-token warning, counted with ComfyUI's own CLIP tokenizer.

ComfyUI ships the tokenizer its SD1.x/SDXL text encoders use
(``comfy/sd1_tokenizer``, loaded by ``comfy/sd1_clip.py``'s ``SDTokenizer``
with transformers' ``CLIPTokenizer``; comfy-node builds the same pipeline
with ``tokenizers``, checked here against ``CLIPTokenizer``). The caption
node finds it inside ComfyUI; the CLI is given it with ``--clip-tokenizer``. A caption over 75
tokens is named with its count, the limit and the fix, and the run succeeds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import build_checkpoint_files
from comfy_llm_testworld.real_comfyui import ComfyUIClient, ComfyUIServer, find_comfyui
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parents[2]
LONG = (
    "a small tabby cat with green eyes sits on a faded red velvet armchair beside a tall "
    "window, late afternoon sunlight falling across a wooden floor covered in scattered "
    "books, a knitted blue blanket hanging from the armrest, potted ferns on the sill, "
    "dust motes drifting in the warm light, an old brass lamp and a chipped teacup on a "
    "round side table, soft shadows, shallow depth of field, film grain"
)
"""An old caption of well over 75 CLIP tokens (a detailed prose caption's length)."""


SAMPLES = (
    LONG,
    "1girl, solo, long_hair, blue eyes, (masterpiece:1.2), looking_at_viewer",
    "Ünïcödé café — naïve 東京 🐱 emoji!!",
    "multi\n\nline   caption\twith tabs",
    "it's a dog's life; they're 12,345 years old",
    "<|endoftext|> tokens <|startoftext|> in text",
    "\uff21\uff22\uff23 full-width, DON'T SHOUT",
    "",
)
"""Captions across CLIP's pipeline: case, Unicode, digits, contractions, whitespace."""


def _tokenizer_folder() -> Path:
    source = find_comfyui(REPO_ROOT)
    assert source is not None, "the tier runs with a ComfyUI source tree"
    return source / "comfy" / "sd1_tokenizer"


@pytest.fixture
def fresh_managers() -> Iterator[None]:
    from comfy_llm._pipeline import forget_resolved_profiles
    from comfy_llm_residency import reset_managers

    forget_resolved_profiles()
    reset_managers()
    yield
    reset_managers()
    forget_resolved_profiles()


def test_comfyuis_clip_tokenizer_is_found_and_counts_at_the_window_edge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_llm._caption_clip import check_clip_tokens, clip_counter, comfyui_clip_tokenizer

    folder = _tokenizer_folder()
    monkeypatch.syspath_prepend(str(folder.parent.parent))  # ComfyUI's folder, as main.py runs
    assert comfyui_clip_tokenizer() == folder
    counter, source = clip_counter()
    assert counter is not None and source == "ComfyUI comfy/sd1_tokenizer"
    # BPE pieces, start and end tokens left out: "a photo of a cat , sitting on a red sofa"
    assert counter.count("a photo of a cat, sitting on a red sofa") == 11
    assert counter.count("cat " * 75) == 75
    # the same counts as transformers' CLIPTokenizer, which ComfyUI's SDTokenizer loads
    from transformers import CLIPTokenizer

    reference = CLIPTokenizer.from_pretrained(str(folder))
    for text in SAMPLES:
        assert counter.count(text) == len(reference(text)["input_ids"]) - 2, text
    records = [{"name": n, "status": "captioned"} for n in ("edge.png", "over.png", "ok.png")]
    summary = check_clip_tokens(["cat " * 75, "cat " * 76, "a cat"], records)
    assert summary == {
        "counted": True,
        "limit": 75,
        "tokenizer": "ComfyUI comfy/sd1_tokenizer",
        "over_limit": 1,
        "longest": 76,
    }
    assert [r["clip_tokens"] for r in records] == [75, 76, 2]
    assert [("clip_warning" in r) for r in records] == [False, True, False]
    assert records[1]["clip_warning"].startswith("76 CLIP tokens, over the 75 ")
    assert "prompt_preset prose_short or lower max_new_tokens" in records[1]["clip_warning"]


@pytest.mark.usefixtures("fresh_managers")
def test_cli_names_each_caption_over_the_window_and_still_succeeds(
    hf_env: FakeHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_llm._caption_clip import clip_counter
    from comfy_llm._cli import main

    hf_env.add_repo("tiny/qwen35-scripted", build_checkpoint_files("qwen3_5", scripted=True))
    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT", str(tmp_path / "storage"))
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    folder = tmp_path / "set"
    folder.mkdir()
    for name in ("long.png", "short.png"):
        Image.new("RGB", (32, 32), (200, 30, 30)).save(folder / name)
    (folder / "long.txt").write_text(LONG + "\n", encoding="utf-8")
    argv = ["caption", str(folder), "--model", "tiny/qwen35-scripted", "--mode", "append"]
    argv += ["--max-new-tokens", "8", "--json", "--clip-tokenizer", str(_tokenizer_folder())]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    metadata = json.loads(out)["metadata"]
    counter, _ = clip_counter(_tokenizer_folder())
    assert counter is not None
    written = (folder / "long.txt").read_text(encoding="utf-8").strip()
    tokens = counter.count(written)
    assert tokens > 75
    assert metadata["clip_tokens"]["counted"] is True
    assert metadata["clip_tokens"]["over_limit"] == 1
    warnings = [line for line in err.splitlines() if line.startswith("comfy-llm: warning:")]
    assert warnings == [
        f"comfy-llm: warning: long.png: {tokens} CLIP tokens, over the 75 a CLIP text encoder "
        "reads (SD1.x/SDXL trainers cut the rest); pick --preset prose_short or lower "
        "--max-new-tokens for shorter captions"
    ]
    short = metadata["per_image"][1]
    assert short["name"] == "short.png" and short["clip_tokens"] < 75
    assert "clip_warning" not in short


def test_caption_node_warns_on_the_node_and_in_its_metadata(
    client: ComfyUIClient, server: ComfyUIServer
) -> None:
    from comfy_llm._caption_clip import clip_counter

    folder = server.input_dir / "clip_set"
    folder.mkdir()
    for name in ("long.png", "short.png"):
        Image.new("RGB", (32, 32), (30, 30, 200)).save(folder / name)
    (folder / "long.txt").write_text(LONG + "\n", encoding="utf-8")
    caption: dict[str, Any] = {
        "class_type": "ComfyLLMCaption",
        "inputs": {
            "model_profile": "tiny/qwen35-scripted",
            "prompt": "Caption this image.",
            "folder": str(folder),
            "caption_mode": "append",
            "temperature": 0.0,
            "max_new_tokens": 8,
            "seed": 0,
        },
    }
    preview = {"class_type": "PreviewAny", "inputs": {"source": ["70", 1]}}
    run = client.run({"70": caption, "71": preview})
    assert run.status == "execution_success", run.error()
    counter, _ = clip_counter(_tokenizer_folder())
    assert counter is not None
    tokens = counter.count((folder / "long.txt").read_text(encoding="utf-8").strip())
    summary = run.outputs["70"]["text"][0].splitlines()
    assert summary[0].startswith("Captioned 2 of 2, kept 0, failed 0; wrote 2 caption files")
    assert summary[1] == (
        f"Warning: long.png: {tokens} CLIP tokens, over the 75 a CLIP text encoder reads "
        "(SD1.x/SDXL trainers cut the rest); pick prompt_preset prose_short or lower "
        "max_new_tokens for shorter captions"
    )
    metadata = json.loads(run.text_of("71"))
    assert metadata["clip_tokens"] == {
        "counted": True,
        "limit": 75,
        "longest": tokens,
        "over_limit": 1,
        "tokenizer": "ComfyUI comfy/sd1_tokenizer",
    }
    long, short = metadata["per_image"]
    assert long["clip_tokens"] == tokens and "clip_warning" in long
    assert short["clip_tokens"] < 75 and "clip_warning" not in short
