"""The live split: what a live view shows is the split the final parse gives."""

from __future__ import annotations

import pytest
from comfy_llm_reasoning import TokenVocabulary, live_split, parser_for_profile
from hypothesis import given
from hypothesis import strategies as st

MARKERS = ["<think>", "</think>"]
WORDS = ["a", "b", "answer", "hmm"]
PIECES = MARKERS + WORDS
VOCABULARY = TokenVocabulary(
    {piece: index for index, piece in enumerate(PIECES)},
    lambda ids: " ".join(PIECES[index] for index in ids),
)


@given(
    ids=st.lists(st.integers(min_value=0, max_value=len(PIECES) - 1), max_size=12),
    opened=st.booleans(),
    enable_reasoning=st.booleans(),
    parser=st.sampled_from([None, "qwen3", "none", "direct"]),
)
def test_every_prefix_is_split_as_the_final_parse_of_that_prefix(
    ids: list[int], opened: bool, enable_reasoning: bool, parser: str | None
) -> None:
    final_parser = parser_for_profile(
        parser, "Qwen3_5ForCausalLM", enable_reasoning=enable_reasoning, vocabulary=VOCABULARY
    )
    for end in range(len(ids) + 1):
        prefix = ids[:end]
        final = final_parser.parse(prefix, None, prompt_opened_reasoning=opened)
        live = live_split(
            VOCABULARY.decode(prefix),
            reasoning_parser=parser,
            architecture="Qwen3_5ForCausalLM",
            enable_reasoning=enable_reasoning,
            prompt_opened_reasoning=opened,
        )
        # (the test vocabulary spaces its pieces: a removed marker leaves two spaces)
        assert _words(live.response) == _words(final.response)
        if final_parser.name == "qwen3":
            assert _words(live.reasoning) == _words(final.reasoning)
        else:  # no reasoning channel: everything shown is the answer
            assert live.reasoning is None and final.reasoning == ""
        assert live.thinking == (final.truncated and not final.response.strip())


def _words(text: str | None) -> list[str] | None:
    return None if text is None else text.split()


@pytest.mark.parametrize(
    ("opened", "thinking", "response"),
    [(True, True, ""), (False, False, "cut off mid thought")],
)
def test_a_budget_ending_in_the_reasoning_is_labelled_by_the_prompts_think_state(
    opened: bool, thinking: bool, response: str
) -> None:
    live = live_split(
        "cut off mid thought",
        reasoning_parser="qwen3",
        architecture=None,
        enable_reasoning=True,
        prompt_opened_reasoning=opened,
    )
    assert (live.thinking, live.response) == (thinking, response)
