"""Error text in the CLI's own words: flag names for widget names, CLI verbs for node verbs.

Errors are written once, where they are raised, in the words of the node the
most people use (``max_new_tokens``, "connect an input"). A CLI user typed
``--max-new-tokens`` and has nothing to connect, so the one error line the
CLI prints says it that way. The names are data: a new widget with a flag is
one more line here.
"""

from __future__ import annotations

import re

__all__ = ["in_cli_words"]

_FLAGS = {
    "max_new_tokens": "--max-new-tokens",
    "video_frames": "--video-frames",
    "top_p": "--top-p",
    "response_schema": "--schema",
    "system_prompt": "--system",
    "batch_size": "--batch-size",
    "prompt_preset": "--preset",
    "clip_tokenizer": "--clip-tokenizer",
    "enable_reasoning": "--no-reasoning",
}
_LEADING = {"seed": "--seed", "temperature": "--temperature"}
"""Plain words that are a flag only where a message starts with them ("seed must be ...")."""
_PHRASES = {
    "or unset for an unseeded (random) run": "or leave --seed out for an unseeded (random) run",
    "type a prompt or connect an input": "give a non-empty --prompt or an input "
    "(--image, --video, --file)",
    "the prompt is blank and no image, video or file is connected": "the prompt is blank and "
    "no --image, --video or --file is given",
    "disconnect the IMAGE or the VIDEO input": "drop the --image or the --video",
    "disconnect the VIDEO input": "drop the --video",
    "connect images or give a folder": "give a folder of images",
    "(IMAGE input)": "(--image)",
    "connect a file": "pass --file",
}
_NAME = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, _FLAGS)) + r")(?![\w-])")
_START = re.compile(r"^(" + "|".join(map(re.escape, _LEADING)) + r")\b")


def in_cli_words(message: str) -> str:
    """``message`` with the node's widget names and verbs replaced by the CLI's."""
    for phrase, cli in _PHRASES.items():
        message = message.replace(phrase, cli)
    message = _NAME.sub(lambda match: _FLAGS[match.group(1)], message)
    return _START.sub(lambda match: _LEADING[match.group(1)], message)
