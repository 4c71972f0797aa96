"""Tidying a model's answer into a caption a trainer can use: pure functions, one per rule.

Small captioners loop ("a cat, a cat, a cat, ..."), leak a reasoning block,
wrap the caption in quotes or spread it over lines; a caption file is one
line of text that a trainer tokenizes whole. Each rule is a switch, all on
by default (the node's ``clean_*`` inputs, the CLI's ``--no-clean-*``); a
rule that changed a caption is counted in the batch's metadata
(``cleanup``) and named in the image's record (``cleaned``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "CLEANUP_RULES",
    "clean_caption",
    "cleanup_counts",
    "collapse_whitespace",
    "cut_repetition",
    "strip_quotes",
    "strip_think",
]

CLEANUP_RULES = ("think", "whitespace", "quotes", "repetition")
"""The rules in the order they run (tags first: a reasoning block may hold quotes and lines)."""

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S | re.I)
_THINK_TAG = re.compile(r"</?think>", re.I)
_SPACE = re.compile(r"\s+")
# a phrase (word characters at both ends, at most 200 characters) followed by
# the same phrase twice or more, each after a space, comma or semicolon
_REPEATED = re.compile(r"(?<!\w)(\w(?:.{0,198}?\w)?)(?:[\s,;]+\1(?!\w)){2,}", re.S)
_QUOTES = {'"': '"', "'": "'", "“": "”", "\u2018": "\u2019", "«": "»", "„": "“", "`": "`"}


def strip_think(text: str) -> str:
    """Drop ``<think>…</think>`` blocks, then any lone tag.

    A lone ``</think>`` ends reasoning whose opening tag the chat template
    gave: the text before it is reasoning, the caption follows it.
    """
    text = _THINK_BLOCK.sub(" ", text)
    closing = text.lower().rfind("</think>")
    if closing >= 0 and "<think>" not in text.lower():
        text = text[closing + len("</think>") :]
    return _THINK_TAG.sub(" ", text)


def collapse_whitespace(text: str) -> str:
    """One line: newlines, tabs and runs of spaces become one space; ends trimmed."""
    return _SPACE.sub(" ", text).strip()


def strip_quotes(text: str) -> str:
    """Drop one pair of quotes around the whole caption (not quotes inside it)."""
    stripped = text.strip()
    if len(stripped) < 2:
        return text
    opening, closing = stripped[0], stripped[-1]
    inner = stripped[1:-1]
    if _QUOTES.get(opening) != closing or opening in inner or closing in inner:
        return text
    return inner.strip()


def cut_repetition(text: str) -> str:
    """A phrase repeated three or more times in a row is cut to one occurrence."""
    return _REPEATED.sub(r"\1", text)


_RULES = {
    "think": strip_think,
    "whitespace": collapse_whitespace,
    "quotes": strip_quotes,
    "repetition": cut_repetition,
}


def clean_caption(text: str, rules: Iterable[str] = CLEANUP_RULES) -> tuple[str, list[str]]:
    """The caption after the ``rules`` asked for, and the rules that changed it.

    Raises:
        ValueError: A rule not in ``CLEANUP_RULES``.
    """
    wanted = set(rules)
    unknown = wanted - set(CLEANUP_RULES)
    if unknown:
        raise ValueError(f"unknown caption cleanup rule(s) {sorted(unknown)}: {CLEANUP_RULES}")
    fired: list[str] = []
    for name in CLEANUP_RULES:
        if name in wanted:
            cleaned = _RULES[name](text)
            if cleaned.strip() != text.strip():
                fired.append(name)
            text = cleaned
    return text.strip(), fired


def cleanup_counts(records: Iterable[dict[str, object]]) -> dict[str, int]:
    """For each rule, how many images' captions it changed (their records' ``cleaned``)."""
    counts = dict.fromkeys(CLEANUP_RULES, 0)
    for record in records:
        for rule in record.get("cleaned") or ():  # type: ignore[attr-defined]
            counts[rule] += 1
    return counts
