"""Prompt presets: short prose, detailed prose, booru tags; custom keeps the user's prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import InvalidSettingError
from comfy_llm_testworld import FakeHub
from PIL import Image

SCRIPTED = "tiny/qwen35-scripted"  # answers "answer" whatever it is shown


def test_custom_keeps_the_prompt_and_an_unknown_preset_is_refused() -> None:
    from comfy_llm._caption_presets import PROMPT_PRESETS, preset_prompt

    assert preset_prompt("custom", "Mine.") == "Mine."
    assert preset_prompt("booru_tags", "Mine.") == PROMPT_PRESETS["booru_tags"]
    assert len({preset_prompt(name, "Mine.") for name in PROMPT_PRESETS}) == 4
    with pytest.raises(InvalidSettingError, match=r"prompt_preset.*tags.*prose_short"):
        preset_prompt("tags", "Mine.")


@pytest.mark.slow
def test_node_and_cli_give_the_preset_to_the_model(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    tmp_path: Path,
    capsys: Any,
    monkeypatch: Any,
) -> None:
    """The model sees the preset's instruction: as many prompt tokens as that text typed in."""
    from comfy_api.latest import io
    from comfy_llm._caption_presets import PROMPT_PRESETS
    from comfy_llm._cli import main
    from comfy_llm._comfyui._caption_node import CaptionImagesNode

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    folder = tmp_path / "set"
    folder.mkdir()
    Image.new("RGB", (16, 12)).save(folder / "a.png")
    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="9")

    def tokens(prompt: str, **preset: Any) -> int:
        output = CaptionImagesNode.execute(
            model_profile=SCRIPTED,
            prompt=prompt,
            folder=str(folder),
            max_new_tokens=16,
            caption_mode="overwrite",
            **preset,
        )
        return int(json.loads(output.args[1])["last_request"]["prompt_tokens"])

    typed = tokens(PROMPT_PRESETS["booru_tags"] or "")
    assert tokens("Caption it.", prompt_preset="booru_tags") == typed
    assert tokens("Caption it.") < typed  # custom: the user's prompt, as before

    argv = ["caption", str(folder), "--model", SCRIPTED, "--json", "--max-new-tokens", "16"]
    assert main([*argv, "--mode", "overwrite", "--preset", "booru_tags"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metadata"]["last_request"]["prompt_tokens"] == typed
