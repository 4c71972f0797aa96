"""A tiny dict tokenizer: tokens are word pieces, decode joins them."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from comfy_llm_reasoning import TokenVocabulary

OPEN_ID = 100
CLOSE_ID = 101
IM_END_ID = 200
EOT_ID = 201

ORDINARY = {
    " The": 1,
    " answer": 2,
    " is": 3,
    " 42": 4,
    "\n": 5,
    "\n\n": 6,
    "<": 7,
    "/": 8,
    "think": 9,
    ">": 10,
    " Let": 11,
    " me": 12,
    " reason": 13,
    ".": 14,
    " ": 15,
    "Hi": 16,
}
MARKERS = {"<think>": OPEN_ID, "</think>": CLOSE_ID}
SPECIAL = {"<|im_end|>": IM_END_ID, "<|endoftext|>": EOT_ID}
TOKENS = {**ORDINARY, **MARKERS, **SPECIAL}
ID_TO_TOKEN = {token_id: token for token, token_id in TOKENS.items()}
SPECIAL_IDS = frozenset(SPECIAL.values())


def fake_decode(ids: Sequence[int]) -> str:
    """Join the pieces, skipping special tokens (like skip_special_tokens=True)."""
    return "".join(ID_TO_TOKEN[token_id] for token_id in ids if token_id not in SPECIAL_IDS)


def make_vocabulary(*, markers: bool = True) -> TokenVocabulary:
    table = dict(TOKENS) if markers else {**ORDINARY, **SPECIAL}
    return TokenVocabulary(token_to_id=table, decode=fake_decode, special_ids=SPECIAL_IDS)


def enc(*tokens: str) -> list[int]:
    """Ids for the given pieces."""
    return [TOKENS[token] for token in tokens]


class FakeVocab:
    """Namespace handed to tests through the ``fake`` fixture."""

    OPEN_ID = OPEN_ID
    CLOSE_ID = CLOSE_ID
    IM_END_ID = IM_END_ID
    EOT_ID = EOT_ID
    ORDINARY = ORDINARY
    SPECIAL_IDS = SPECIAL_IDS
    decode = staticmethod(fake_decode)
    enc = staticmethod(enc)
    vocabulary = staticmethod(make_vocabulary)


@pytest.fixture(scope="session")
def fake() -> type[FakeVocab]:
    return FakeVocab
