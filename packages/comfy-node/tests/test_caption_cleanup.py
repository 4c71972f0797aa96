"""Caption cleanup: each rule alone, the switches, and the counts a batch reports."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import InvalidSettingError
from comfy_llm_testworld import FakeHub
from PIL import Image

SCRIPTED = "tiny/qwen35-scripted"  # answers "answer" whatever it is shown


@pytest.mark.parametrize(
    ("answer", "cleaned", "rules"),
    [
        ("a cat, a cat, a cat, a cat sitting", "a cat sitting", ["repetition"]),
        ("very very very good", "very good", ["repetition"]),
        ("a red car on a red car on a red car on a road", "a red car on a road", ["repetition"]),
        ("the the cat", "the the cat", []),  # twice is not a loop
        ("bob bobby bob bob", "bob bobby bob bob", []),  # whole words only
        (
            '<think>hm "x"</think>\n"A red   car\nparked."',
            "A red car parked.",
            ["think", "whitespace", "quotes"],
        ),
        ("the template opened it</think> A dog", "A dog", ["think"]),
        ("A dog <think>", "A dog", ["think"]),
        ('"a" and "b"', '"a" and "b"', []),  # quotes inside are kept
        ("\u201cQuoted\u201d", "Quoted", ["quotes"]),
        ("a  dog\n\non grass", "a dog on grass", ["whitespace"]),
    ],
)
def test_each_rule_and_what_it_leaves_alone(answer: str, cleaned: str, rules: list[str]) -> None:
    from comfy_llm._caption_cleanup import clean_caption

    assert clean_caption(answer) == (cleaned, rules)


def test_a_rule_switched_off_leaves_its_mess() -> None:
    from comfy_llm._caption_cleanup import CLEANUP_RULES, clean_caption

    messy = '"<think>x</think>a cat a cat a cat"'
    assert clean_caption(messy, [r for r in CLEANUP_RULES if r != "repetition"])[0] == (
        "a cat a cat a cat"
    )
    assert clean_caption(messy, [])[0] == messy
    with pytest.raises(ValueError, match="spelling"):
        clean_caption(messy, ["spelling"])


def test_finish_cleans_the_answer_before_the_prefix_and_records_the_rules(
    tmp_path: Path, comfyui: Path
) -> None:
    from comfy_llm._caption_conventions import CaptionConventions
    from comfy_llm._caption_job import CaptionItem, CaptionJob
    from comfy_llm._caption_records import Pending, batch_summary, finish_caption
    from comfy_llm._comfyui._caption_node import caption_summary
    from comfy_llm_residency import InferenceResult, RunMetadata
    from comfy_llm_residency._run_metadata import MANAGER_KEYS

    flat: dict[str, Any] = dict.fromkeys(MANAGER_KEYS)
    flat.update(generation_settings={}, evicted_profiles=[], resident_profiles=[])
    result = InferenceResult('"a cat, a cat, a cat\nsitting"', None, RunMetadata.from_dict(flat))
    item = CaptionItem("a.png", tmp_path / "a.png")
    job = CaptionJob(model=SCRIPTED, prompt="p", prefix="sks,", write_files=True)
    records: list[dict[str, Any]] = [{"name": "a.png"}]
    caption = finish_caption(job, Pending(0, item, None, 0.0), result, records[0], 0)
    assert caption == "sks, a cat sitting"
    assert (tmp_path / "a.txt").read_text() == "sks, a cat sitting\n"
    assert records[0]["cleaned"] == ["whitespace", "quotes", "repetition"]
    summary = batch_summary(job, [item], records, 1.0, {}, captions=[caption])
    assert summary["cleanup"] == {"think": 0, "whitespace": 1, "quotes": 1, "repetition": 1}
    shown = caption_summary([caption], summary | {"written": 1})
    assert "Cleaned (images per rule): whitespace 1, quotes 1, repetition 1." in shown

    off = dataclasses.replace(job, conventions=CaptionConventions(cleanup=()))
    again = finish_caption(off, Pending(0, item, None, 0.0), result, {}, 0)
    assert again.startswith('sks, "a cat,')
    with pytest.raises(InvalidSettingError, match=r"caption_cleanup.*spelling"):
        CaptionConventions(cleanup=("spelling",))


@pytest.mark.slow
def test_node_and_cli_switch_each_rule_and_report_the_counts(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    tmp_path: Path,
    capsys: Any,
    monkeypatch: Any,
) -> None:
    from comfy_api.latest import io
    from comfy_llm._cli import main
    from comfy_llm._comfyui._caption_inputs import CaptionInputs
    from comfy_llm._comfyui._caption_node import CaptionImagesNode

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    assert CaptionInputs().conventions().cleanup == ("think", "whitespace", "quotes", "repetition")
    assert CaptionInputs(clean_quotes=False, clean_think_tags=False).conventions().cleanup == (
        "whitespace",
        "repetition",
    )
    folder = tmp_path / "set"
    folder.mkdir()
    Image.new("RGB", (32, 24)).save(folder / "a.png")
    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="9")
    common = {"model_profile": SCRIPTED, "prompt": "Caption it.", "folder": str(folder)}
    _, text = CaptionImagesNode.execute(**common, max_new_tokens=16, clean_repetition=False).args
    metadata = json.loads(text)
    assert metadata["cleanup"] == {"think": 0, "whitespace": 0, "quotes": 0, "repetition": 0}
    assert metadata["per_image"][0]["cleaned"] == []

    argv = ["caption", str(folder), "--model", SCRIPTED, "--json", "--max-new-tokens", "16"]
    assert main([*argv, "--mode", "overwrite", "--no-clean-quotes", "--no-clean-think"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metadata"]["cleanup"]["quotes"] == 0 and result["captions"] == ["answer"]
    with pytest.raises(SystemExit):  # argparse names the unknown switch
        main([*argv, "--no-clean-spelling"])
    assert "--no-clean-spelling" in capsys.readouterr().err
