"""CLIP's 75-token window: which captions a trainer's CLIP text encoder would cut.

An SD1.x/SDXL LoRA trainer (kohya sd-scripts, OneTrainer, ComfyUI's own
training nodes) gives each caption to a CLIP text encoder, which reads 77
tokens: a start token, 75 of the caption and an end token (ComfyUI's
``comfy/sd1_clip.py``, ``SDTokenizer(max_length=77)``); kohya cuts the rest
unless ``--max_token_length`` is raised. A caption over 75 tokens therefore
trains on its first 75 only, silently. Each caption the batch wrote is
counted with ComfyUI's own CLIP tokenizer files (``comfy/sd1_tokenizer``,
the ones ``SDTokenizer`` loads with transformers' ``CLIPTokenizer``; built
here as that class builds them, see :func:`_load`) or a tokenizer folder the
CLI was given; one over the limit is named with
its count, the limit and the fix in the record, the node's summary and the
CLI's output, and the run still succeeds (the caption may be meant for a
T5 or LLM text encoder, which reads far more).

Without a tokenizer (the CLI outside ComfyUI, no ``--clip-tokenizer``, or
the ``tokenizers`` package missing) nothing is counted: a words-per-token guess would
warn wrongly both ways, so ``clip_tokens`` in the metadata says the count
was not made and how to have it made.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from comfy_llm_core import InvalidSettingError

__all__ = [
    "CLIP_TOKEN_LIMIT",
    "ClipCounter",
    "check_clip_folder",
    "check_clip_tokens",
    "clip_counter",
    "clip_warnings",
    "comfyui_clip_tokenizer",
]

CLIP_TOKEN_LIMIT = 75
"""Caption tokens a CLIP text encoder reads: its 77-token window less start and end."""
CLIP_FIX = "pick prompt_preset prose_short or lower max_new_tokens for shorter captions"
_NEEDED_FILES = ("vocab.json", "merges.txt")
_CLIP_SPLIT = (
    r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|"
    r"[^\s\p{L}\p{N}]+"
)
"""CLIP's word pattern (transformers' ``CLIPTokenizer``, from OpenAI's ``simple_tokenizer``)."""


@dataclasses.dataclass(frozen=True)
class ClipCounter:
    """A CLIP tokenizer that counts a caption's tokens (start and end tokens left out).

    Attributes:
        source: Where its files came from, as metadata shows it.
        count: The caption's token count.
    """

    source: str
    count: Callable[[str], int]


def comfyui_clip_tokenizer() -> Path | None:
    """ComfyUI's ``comfy/sd1_tokenizer`` folder when ComfyUI's ``comfy`` package is importable.

    Found without importing ``comfy`` (inside ComfyUI it already is); a
    ``comfy`` package without the folder (another package of that name) is
    not ComfyUI's.
    """
    try:
        spec = importlib.util.find_spec("comfy")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(location) / "sd1_tokenizer"
        if all((folder / name).is_file() for name in _NEEDED_FILES):
            return folder
    return None


def check_clip_folder(folder: str | Path) -> Path:
    """An explicit tokenizer folder, checked before any image is captioned.

    Raises:
        InvalidSettingError: It lacks ``vocab.json`` or ``merges.txt`` (the
            user asked for this one: a typo must not pass as "not counted").
    """
    chosen = Path(folder).expanduser()
    missing = [name for name in _NEEDED_FILES if not (chosen / name).is_file()]
    if missing:
        raise InvalidSettingError(
            "clip_tokenizer",
            str(folder),
            f"a CLIP tokenizer folder (this one has no {' or '.join(missing)}), such as "
            "ComfyUI/comfy/sd1_tokenizer",
        )
    return chosen


def clip_counter(folder: str | Path | None = None) -> tuple[ClipCounter | None, str]:
    """The counter for ``folder`` (else ComfyUI's tokenizer), or None and why there is none.

    Raises:
        InvalidSettingError: As :func:`check_clip_folder`.
    """
    if folder is not None:
        chosen = check_clip_folder(folder)
        source = f".../{chosen.name}"
    else:
        found = comfyui_clip_tokenizer()
        if found is None:
            return None, (
                "not counted: no CLIP tokenizer here (ComfyUI's comfy/sd1_tokenizer is found "
                "inside ComfyUI; the CLI takes --clip-tokenizer FOLDER)"
            )
        chosen, source = found, "ComfyUI comfy/sd1_tokenizer"
    try:
        count = _load(str(chosen.resolve()))
    except ImportError:
        return None, "not counted: the tokenizers package is not installed (ComfyUI requires it)"
    return ClipCounter(source, count), source


@functools.lru_cache(maxsize=2)
def _load(folder: str) -> Callable[[str], int]:
    """The folder's CLIP BPE, built as transformers' ``CLIPTokenizer`` builds it.

    The same ``tokenizers`` pipeline as ``transformers/models/clip/
    tokenization_clip.py`` (``CLIPTokenizer.__init__``: NFC, whitespace runs
    to one space, lowercase; CLIP's split pattern, then byte level; BPE with
    ``</w>`` word ends; start and end as special tokens), without importing
    transformers, the engine package comfy-node must not load (the
    import-linter contract). The real-ComfyUI tier checks the counts equal
    ``CLIPTokenizer``'s on ComfyUI's own files. ComfyUI requires
    ``tokenizers``; elsewhere transformers brings it.

    Raises:
        ImportError: ``tokenizers`` is not installed.
    """
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    vocab, merges = BPE.read_file(f"{folder}/vocab.json", f"{folder}/merges.txt")
    unknown = "<|endoftext|>"
    tokenizer = Tokenizer(
        BPE(
            vocab,
            merges,
            continuing_subword_prefix="",
            end_of_word_suffix="</w>",
            unk_token=unknown,
        )
    )
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_CLIP_SPLIT), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tokenizer.add_special_tokens(["<|startoftext|>", unknown])

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count


def check_clip_tokens(
    captions: Sequence[str],
    records: Sequence[dict[str, Any]],
    folder: str | Path | None = None,
) -> dict[str, Any]:
    """Count each captioned image's caption; note the ones over the limit in their records.

    A record over the limit gets a ``clip_warning`` naming
    the count, the limit and the fix; every counted record gets
    ``clip_tokens``. Nothing is counted when no caption was made (the
    tokenizer is not even loaded).

    Returns:
        The batch's ``clip_tokens`` record: ``counted``, ``limit``,
        ``tokenizer`` (or ``reason``), ``over_limit`` and ``longest``.

    Raises:
        InvalidSettingError: As :func:`check_clip_folder` for an explicit ``folder``.
    """
    summary: dict[str, Any] = {"counted": False, "limit": CLIP_TOKEN_LIMIT}
    made = [
        (record, caption)
        for record, caption in zip(records, captions, strict=True)
        if record.get("status") == "captioned" and caption
    ]
    if not made:
        return {**summary, "reason": "not counted: no caption was made"}
    counter, note = clip_counter(folder)
    if counter is None:
        return {**summary, "reason": note}
    over = 0
    longest = 0
    for record, caption in made:
        tokens = counter.count(caption)
        record["clip_tokens"] = tokens
        longest = max(longest, tokens)
        if tokens > CLIP_TOKEN_LIMIT:
            over += 1
            record["clip_warning"] = (
                f"{tokens} CLIP tokens, over the {CLIP_TOKEN_LIMIT} a CLIP text encoder reads "
                f"(SD1.x/SDXL trainers cut the rest); {CLIP_FIX}"
            )
    return {
        **summary,
        "counted": True,
        "tokenizer": counter.source,
        "over_limit": over,
        "longest": longest,
    }


def clip_warnings(metadata: dict[str, Any]) -> list[str]:
    """``<name>: <warning>`` for each image over the limit, in input order."""
    return [
        f"{record['name']}: {record['clip_warning']}"
        for record in metadata.get("per_image", [])
        if record.get("clip_tokens", 0) > CLIP_TOKEN_LIMIT and record.get("clip_warning")
    ]
