"""Ready-made captioning instructions: short prose, detailed prose, booru-style tags.

Trainers want one of two caption styles (peers review §4): natural
sentences (Flux, SD3, video models) or comma-separated booru tags (SDXL
anime fine-tunes, kohya's ``keep_tokens``). ``custom``, the default, keeps
the user's own prompt, so a saved workflow asks what it asked before.
"""

from __future__ import annotations

from comfy_llm_core import InvalidSettingError

__all__ = ["PROMPT_PRESETS", "preset_prompt"]

PROMPT_PRESETS: dict[str, str | None] = {
    "custom": None,
    "prose_short": (
        "Write one short sentence (under 25 words) describing this image as a caption for "
        "training: the main subject, what it is doing and the setting. No preamble, no quotes."
    ),
    "prose_detailed": (
        "Describe this image in one detailed paragraph as a caption for training: the subject, "
        "its appearance, pose and clothing, the setting, lighting, colours, composition and "
        "style. State only what is visible. No preamble, no quotes."
    ),
    "booru_tags": (
        "List booru-style tags for this image, most important first, separated by commas: "
        "subject count (1girl, 1boy, ...), appearance, clothing, pose, expression, setting, "
        "lighting, style. Lowercase, underscores between words of a tag, no sentences."
    ),
}
"""Preset name to its instruction; ``custom`` (None) keeps the user's prompt."""


def preset_prompt(preset: str, prompt: str) -> str:
    """The instruction a batch gives: the preset's, or ``prompt`` for ``custom``.

    Raises:
        InvalidSettingError: An unknown preset.
    """
    if preset not in PROMPT_PRESETS:
        raise InvalidSettingError("prompt_preset", preset, " / ".join(PROMPT_PRESETS))
    return PROMPT_PRESETS[preset] or prompt
