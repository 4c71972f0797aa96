"""ComfyUI glue: what reaches ComfyUI's bar, live text and interrupt hook."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from comfy_llm_core import ProgressEvent, ProgressStage


def _generate(
    text: str, value: int, maximum: int = 100, *, opened: bool | None = None
) -> ProgressEvent:
    return ProgressEvent(
        stage=ProgressStage.GENERATE,
        value=value,
        maximum=maximum,
        unit="tokens",
        text=text,
        prompt_opened_reasoning=opened,
    )


QWEN35 = type("Profile", (), {"reasoning_parser": "qwen3", "architecture": "Qwen3_5ForCausalLM"})


COMMIT = "2fc06364715b967f1860aea9cf38778875588b17"
PROFILE_ID = "hf-d82ef9e531e93238eb0ed88f221633c51ad9be4d2db000ccaa74ab54c1c43f31"


def test_status_is_plain_words_without_internal_ids_or_invisible_characters(
    comfyui: Path,
) -> None:
    from comfy_llm._comfyui._glue import ComfyGlue
    from server import PromptServer

    glue = ComfyGlue("5", reasoning_enabled=True, text_interval=0)
    glue.start()
    # what resolution reports (profiles._resolve): ids, commits and target keys
    for message in (
        "Inspecting acme/m (metadata only)",
        f"Checking acme/m@{COMMIT[:12]} for local_cpu",
        f"Using curated profile qwen3.5-0.8b (Qwen/Qwen3.5-0.8B@{COMMIT})",
        f"Profile {PROFILE_ID} (transformers, none)",
    ):
        glue.progress(ProgressEvent(stage=ProgressStage.INSPECT, message=message))
    glue.progress(ProgressEvent(stage=ProgressStage.INSPECT, message="Hashing Qwen3.5-tiny"))
    glue.progress(ProgressEvent(stage=ProgressStage.LOAD, message="Loading model"))
    glue.progress(ProgressEvent(stage=ProgressStage.ADMISSION, message="needs 4.00 GiB"))
    glue.progress(
        ProgressEvent(stage=ProgressStage.DOWNLOAD, message=f"Fetching acme/m@{COMMIT} 1,024 MiB")
    )
    texts = [text for _, text in PromptServer.instance.progress_texts]
    assert texts == [
        "Starting",
        "Checking the model",
        "Checking the model: Hashing Qwen3.5-tiny",
        "Loading model",
        "Making room in memory: needs 4.00 GiB",
        "Downloading: Fetching acme/m 1,024 MiB",
    ]
    shown = "".join(texts)
    assert shown.isascii(), [ch for ch in shown if not ch.isascii()]  # no U+2060, no U+00A0
    assert COMMIT[:12] not in shown and "hf-" not in shown and "local_cpu" not in shown


def test_bar_moves_once_per_percent(comfyui: Path) -> None:
    import comfy.utils
    from comfy_llm._comfyui._glue import ComfyGlue

    glue = ComfyGlue("5", reasoning_enabled=False, text_interval=3600)
    for token in range(1, 1001):
        glue.progress(_generate("x", token, 1000))
    glue.finish("x", "")
    values = [value for node, value, _ in comfy.utils.calls if node == "5"]
    assert len(values) <= 101  # one per percent
    assert values[-1] == 1000


def _one_cold_request(glue: object) -> None:
    """The stages of a cold request, as the pipeline reports them."""
    from comfy_llm._comfyui._glue import ComfyGlue

    assert isinstance(glue, ComfyGlue)
    glue.progress(ProgressEvent(stage=ProgressStage.INSPECT, message="Inspect", indeterminate=True))
    for done in range(0, 11):
        glue.progress(
            ProgressEvent(stage=ProgressStage.DOWNLOAD, value=done, maximum=10, unit="bytes")
        )
    glue.progress(ProgressEvent(stage=ProgressStage.PREPARE_INPUTS, value=1, maximum=1))
    glue.progress(ProgressEvent(stage=ProgressStage.LOAD, message="Loading", indeterminate=True))
    for token in range(1, 41):
        glue.progress(_generate("x" * token, token, 40))
    glue.progress(ProgressEvent(stage=ProgressStage.DONE, value=40, maximum=40))
    glue.finish("answer", "")


def test_each_phase_shows_its_own_fraction_and_the_bar_fills_once_on_comfyui_033(
    comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ComfyUI 0.33 drops backward moves of one bar and always sends a final value:
    # each phase gets a fresh bar, and no phase reaches 100 % before the end.
    import comfy.utils
    from comfy_llm._comfyui._glue import ComfyGlue

    monkeypatch.setattr(comfy.utils, "PROGRESS_THROTTLE_MIN_INTERVAL", 0.0)
    _one_cold_request(ComfyGlue("5", reasoning_enabled=False, text_interval=3600))
    sent = [value for node, value, _ in comfy.utils.updates if node == "5"]
    assert sent.count(1000) == 1 and sent[-1] == 1000
    download, rest = sent[: sent.index(990) + 1], sent[sent.index(990) + 1 :]
    assert download[0] == 0 and download[1] == 100  # 1 of 10 bytes: 10 %, not a share of 50 %
    load_starts, generate = rest[0], rest[1:]
    assert load_starts == 0  # loading has no fraction: an empty bar
    assert generate[0] == 0 and generate[1] == 20  # 1 of 40 tokens: 2 %
    assert generate[-2] == 990 and generate[-1] == 1000


def test_live_text_shows_the_answer_first_and_the_tail_of_the_reasoning(comfyui: Path) -> None:
    from comfy_llm._comfyui._glue import LIVE_TEXT_MAX_CHARS, ComfyGlue
    from server import PromptServer

    glue = ComfyGlue("5", reasoning_enabled=True, text_interval=0)
    glue.use_profile(QWEN35())
    long_reasoning = "r" * (LIVE_TEXT_MAX_CHARS * 3)
    glue.progress(_generate(long_reasoning, 1, opened=True))
    thinking = PromptServer.instance.progress_texts[-1][1]
    assert thinking.startswith("Thinking… (the answer comes after the reasoning)\n\nReasoning:\n…")
    assert len(thinking) < LIVE_TEXT_MAX_CHARS + 100
    glue.progress(_generate(long_reasoning + "</think> the answer", 2, opened=True))
    text = PromptServer.instance.progress_texts[-1][1]
    assert text.startswith("Answer:\nthe answer\n\nReasoning:\n…r")
    assert len(text) < 400  # the answer stays visible at the node's default size
    many_lines = "\n".join(f"line {n}" for n in range(100))
    glue.progress(_generate(many_lines, 3, opened=False))
    shown = PromptServer.instance.progress_texts[-1][1]
    assert shown.endswith("line 99") and "line 80" not in shown  # the last lines only


def test_live_text_of_a_model_without_a_reasoning_parser_is_all_answer(comfyui: Path) -> None:
    from comfy_llm._comfyui._glue import ComfyGlue
    from comfy_llm_profiles import ModelProfile
    from server import PromptServer

    glue = ComfyGlue("5", reasoning_enabled=True)
    assert "reasoning_parser" in {f.name for f in dataclasses.fields(ModelProfile)}
    profile = type("Profile", (), {"reasoning_parser": "none", "architecture": None})()
    glue.use_profile(profile)
    glue.progress(_generate("A red square.", 1))
    assert PromptServer.instance.progress_texts[-1][1] == "Answer:\nA red square."
    glue.finish("A red square.", "")
    assert PromptServer.instance.progress_texts[-1][1] == "Answer:\nA red square."


@pytest.mark.parametrize(
    ("opened", "enable_reasoning", "text"),
    [
        (False, True, "Plain words, no think block"),  # the template did not open <think>
        (True, True, "Still reasoning when the budget ran out"),  # it did
        (False, True, "Preamble <think> cut inside"),
        (True, True, "done thinking</think> The answer."),
        (False, False, "<think> a block the model emitted anyway"),  # direct parser
    ],
)
def test_the_live_label_is_the_split_the_outputs_get(
    comfyui: Path, opened: bool, enable_reasoning: bool, text: str
) -> None:
    # issue 20 item 8: a budget that ends inside the reasoning (or text the template
    # never opened a block for) is labelled live exactly as the outputs will be
    from comfy_llm._comfyui._glue import ComfyGlue, _compose
    from comfy_llm_reasoning import TokenVocabulary, parser_for_profile
    from server import PromptServer

    glue = ComfyGlue("5", reasoning_enabled=enable_reasoning, text_interval=0)
    glue.use_profile(QWEN35())
    glue.progress(_generate(text, 1, opened=opened))
    live = PromptServer.instance.progress_texts[-1][1]
    # the final parse, as the manager runs it: boundary ids of a real vocabulary
    markers = ["<think>", "</think>"]
    pieces = markers + sorted(set(_spaced(text).split()) - set(markers))
    vocabulary = TokenVocabulary(
        {piece: index for index, piece in enumerate(pieces)},
        lambda ids: " ".join(pieces[index] for index in ids),
    )
    parser = parser_for_profile(
        "qwen3", "Qwen3_5ForCausalLM", enable_reasoning=enable_reasoning, vocabulary=vocabulary
    )
    final = parser.parse(_ids(text, pieces), None, prompt_opened_reasoning=opened)
    if final.response:
        assert live.startswith(f"Answer:\n{final.response}"), (live, final)
    else:
        assert live.startswith("Thinking…"), (live, final)
    if final.reasoning:
        assert live.endswith(f"Reasoning:\n{final.reasoning}"), (live, final)
    else:
        assert "Reasoning:" not in live, (live, final)
    glue.finish(final.response, final.reasoning)
    assert PromptServer.instance.progress_texts[-1][1] == _compose(
        final.response, final.reasoning or None
    )


def _spaced(text: str) -> str:
    return text.replace("</think>", " </think> ").replace("<think>", " <think> ")


def _ids(text: str, pieces: list[str]) -> list[int]:
    """``text`` as ids of the test vocabulary: markers one id each, words space-joined."""
    return [pieces.index(word) for word in _spaced(text).split()]


def test_every_token_checks_for_cancel(comfyui: Path) -> None:
    import comfy.model_management as mm
    from comfy_llm._comfyui._glue import ComfyGlue

    glue = ComfyGlue("5", reasoning_enabled=False)
    glue.on_token(1, "a")
    mm.interrupt_current_processing()
    with pytest.raises(mm.InterruptProcessingException):
        glue.on_token(2, "a b")


def test_each_phase_is_labelled_as_an_activity_and_cleared_at_the_end(comfyui: Path) -> None:
    # Newer ComfyUI (comfy_execution/progress.py after 0.33): set_activity labels
    # what the node spends its time on, beside its bar; the end clears the label.
    from comfy_execution.progress import get_progress_state
    from comfy_llm._comfyui._glue import ComfyGlue

    _one_cold_request(ComfyGlue("5", reasoning_enabled=False, text_interval=3600))
    assert get_progress_state().activities == [
        ("5", "Checking the model"),
        ("5", "Downloading"),
        ("5", "Reading the inputs"),
        ("5", "Loading"),
        ("5", "Answering"),
        ("5", "Finishing"),
        ("5", None),
    ]
    assert "activity" not in get_progress_state().nodes["5"]


def test_a_cancelled_run_clears_its_activity(comfyui: Path) -> None:
    from comfy import model_management
    from comfy_execution.progress import get_progress_state
    from comfy_llm._comfyui._glue import ComfyGlue

    glue = ComfyGlue("5", reasoning_enabled=False)
    glue.progress(ProgressEvent(stage=ProgressStage.LOAD, message="Loading"))
    assert get_progress_state().nodes["5"]["activity"] == "Loading"
    glue.fail(model_management.InterruptProcessingException())
    assert "activity" not in get_progress_state().nodes["5"]


@pytest.mark.parametrize("comfyui_has", ["no set_activity (0.33)", "no progress module (0.8)"])
def test_without_set_activity_the_phases_still_show(
    comfyui: Path, monkeypatch: pytest.MonkeyPatch, comfyui_has: str
) -> None:
    import sys

    import comfy_execution.progress
    from comfy_llm._comfyui._glue import ComfyGlue
    from server import PromptServer

    if comfyui_has.startswith("no set_activity"):
        monkeypatch.delattr(comfy_execution.progress.ProgressRegistry, "set_activity")
    else:
        monkeypatch.setitem(sys.modules, "comfy_execution.progress", None)  # ImportError
    _one_cold_request(ComfyGlue("5", reasoning_enabled=False, text_interval=3600))
    texts = [text for _, text in PromptServer.instance.progress_texts]
    assert texts[-1] == "Answer:\nanswer"
    assert comfy_execution.progress.get_progress_state().activities == []
