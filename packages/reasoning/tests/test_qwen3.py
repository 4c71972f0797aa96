"""The qwen3 parser: ids first, native field first of all, text as the fallback."""

from __future__ import annotations

import pytest
from comfy_llm_reasoning import (
    Qwen3ReasoningParser,
    ReasoningError,
    ReasoningParser,
    get_parser,
)


class _IntLike:
    """Like a numpy integer or a 0-d integer tensor: has __index__, is not an int."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def _total(result):
    return (
        result.reasoning_tokens
        + result.response_tokens
        + result.marker_tokens
        + result.special_tokens
    )


@pytest.fixture
def parser(fake):
    return Qwen3ReasoningParser(fake.vocabulary())


def test_splits_on_boundary_ids_with_exact_counts(parser, fake):
    ids = fake.enc(
        "<think>",
        "\n",
        " Let",
        " me",
        " reason",
        "</think>",
        "\n\n",
        " The",
        " answer",
        "<|im_end|>",
    )
    result = parser.parse(ids, fake.decode(ids))
    assert result.reasoning == "Let me reason"
    assert result.response == "The answer"
    assert result.reasoning_tokens == 4
    assert result.response_tokens == 3
    assert result.marker_tokens == 2
    assert result.special_tokens == 1
    assert result.output_tokens == len(ids) == _total(result)
    assert result.parser == "qwen3"
    assert result.truncated is False
    assert result.accounting == "exact"
    assert isinstance(parser, ReasoningParser)


def test_prompt_opened_reasoning_starts_inside_the_block(parser, fake):
    ids = fake.enc(" Let", " me", " reason", ".", "</think>", "\n\n", " The", " answer")
    result = parser.parse(ids, fake.decode(ids), prompt_opened_reasoning=True)
    assert result.reasoning == "Let me reason."
    assert result.response == "The answer"
    assert result.reasoning_tokens == 4
    assert result.marker_tokens == 1
    assert result.truncated is False


def test_prompt_opened_and_model_reopens_drops_the_extra_opener(parser, fake):
    ids = fake.enc("<think>", " Let", " me", "</think>", " The", " answer")
    result = parser.parse(ids, None, prompt_opened_reasoning=True)
    assert result.reasoning == "Let me"
    assert result.response == "The answer"
    assert result.reasoning_tokens == 2
    assert result.marker_tokens == 2


def test_closing_marker_without_opener_means_prompt_opened(parser, fake):
    ids = fake.enc(" Let", " me", "</think>", " The", " answer")
    result = parser.parse(ids, fake.decode(ids))
    assert result.reasoning == "Let me"
    assert result.response == "The answer"


def test_truncated_reasoning_keeps_what_was_produced(parser, fake):
    ids = fake.enc("<think>", "\n", " Let", " me", " reason")
    result = parser.parse(ids, fake.decode(ids))
    assert result.truncated is True
    assert result.reasoning_truncated is True
    assert result.response == ""
    assert result.reasoning == "Let me reason"
    assert result.reasoning_tokens == 4
    assert result.response_tokens == 0
    assert result.as_metadata()["reasoning_truncated"] is True


def test_truncated_when_prompt_opened_and_no_close(parser, fake):
    ids = fake.enc(" Let", " me", "<|endoftext|>")
    result = parser.parse(ids, None, prompt_opened_reasoning=True)
    assert result.truncated is True
    assert (result.response, result.reasoning) == ("", "Let me")
    assert result.special_tokens == 1


def test_no_think_block_is_all_response(parser, fake):
    ids = fake.enc("Hi", " The", " answer", "<|im_end|>")
    result = parser.parse(ids, fake.decode(ids))
    assert (result.response, result.reasoning) == ("Hi The answer", "")
    assert result.truncated is False
    assert result.reasoning_tokens == 0
    assert result.response_tokens == 3


def test_repeated_close_splits_at_the_first_and_drops_later_markers(parser, fake):
    ids = fake.enc(
        "<think>", " Let", "</think>", " The", " answer", "</think>", " is", "<think>", " 42"
    )
    result = parser.parse(ids, fake.decode(ids))
    assert result.reasoning == "Let"
    assert result.response == "The answer is 42"
    assert result.marker_tokens == 4
    assert result.response_tokens == 4
    assert result.output_tokens == _total(result)


def test_immediately_repeated_close(parser, fake):
    ids = fake.enc("<think>", " Let", "</think>", "</think>", "\n\n", " The", " answer")
    result = parser.parse(ids, None)
    assert (result.reasoning, result.response) == ("Let", "The answer")
    assert result.marker_tokens == 3


def test_literal_close_text_spelled_by_ordinary_tokens_does_not_split(parser, fake):
    ids = fake.enc(
        "<think>", " Let", "</think>", " The", " answer", " ", "<", "/", "think", ">", " is", " 42"
    )
    result = parser.parse(ids, fake.decode(ids))
    assert result.reasoning == "Let"
    assert result.response == "The answer </think> is 42"
    assert result.marker_tokens == 2
    assert result.response_tokens == 9


def test_literal_close_text_without_any_block_stays_in_response(parser, fake):
    ids = fake.enc(" The", " ", "<", "/", "think", ">", " answer")
    result = parser.parse(ids, fake.decode(ids))
    assert result.response == "The </think> answer"
    assert result.reasoning == ""
    assert result.truncated is False


def test_special_tokens_stripped_from_both_channels(parser, fake):
    ids = fake.enc(
        "<think>", " Let", "<|im_end|>", " me", "</think>", " The", "<|endoftext|>", " answer"
    )
    result = parser.parse(ids, "ignored when ids are known")
    assert result.reasoning == "Let me"
    assert result.response == "The answer"
    assert result.special_tokens == 2


def test_whitespace_trimmed_at_boundaries(parser, fake):
    ids = fake.enc("<think>", "\n\n", " ", " Let", "\n", "</think>", "\n\n", " ", " The", "\n")
    result = parser.parse(ids, None)
    assert result.reasoning == "Let"
    assert result.response == "The"
    assert result.reasoning_tokens == 4  # whitespace tokens still count
    assert result.response_tokens == 4


def test_empty_generation(parser):
    result = parser.parse([], None)
    assert (result.response, result.reasoning, result.output_tokens) == ("", "", 0)
    assert result.truncated is False


def test_native_reasoning_takes_precedence(parser, fake):
    ids = fake.enc("<think>", " Let", " me", "</think>", " The", " answer", "<|im_end|>")
    result = parser.parse(ids, "The answer", native_reasoning="\nengine reasoning\n")
    assert result.reasoning == "engine reasoning"
    assert result.response == "The answer"
    assert result.reasoning_tokens == 2
    assert result.marker_tokens == 2
    assert result.special_tokens == 1
    assert result.accounting == "exact"


def test_native_empty_string_still_takes_precedence(parser, fake):
    ids = fake.enc(" The", " answer")
    result = parser.parse(ids, "The answer", native_reasoning="")
    assert (result.response, result.reasoning) == ("The answer", "")


def test_native_reasoning_without_text_decodes_the_response_ids(parser, fake):
    ids = fake.enc("<think>", " Let", "</think>", " The", " answer")
    result = parser.parse(ids, None, native_reasoning="Let")
    assert (result.response, result.reasoning) == ("The answer", "Let")


def test_native_reasoning_without_vocabulary_estimates_counts(fake):
    parser = Qwen3ReasoningParser(None)
    ids = list(range(1, 11))
    result = parser.parse(ids, "The answer", native_reasoning="Let me reason")
    assert (result.response, result.reasoning) == ("The answer", "Let me reason")
    assert result.accounting == "estimated"
    assert result.output_tokens == 10 == _total(result)
    assert result.reasoning_tokens > 0
    assert result.response_tokens > 0


def test_text_delimiters_when_vocabulary_missing(fake):
    parser = Qwen3ReasoningParser(None)
    assert not parser.uses_boundary_ids
    ids = fake.enc("<think>", " Let", " me", "</think>", "\n\n", " The", " answer")
    result = parser.parse(ids, "<think> Let me</think>\n\nThe answer")
    assert (result.reasoning, result.response) == ("Let me", "The answer")
    assert result.accounting == "estimated"
    assert result.output_tokens == len(ids) == _total(result)
    assert result.marker_tokens > 0


def test_text_delimiters_when_markers_are_not_single_tokens(fake):
    parser = Qwen3ReasoningParser(fake.vocabulary(markers=False))
    assert not parser.uses_boundary_ids
    ids = fake.enc("<", "think", ">", " Let", "<", "/", "think", ">", " The", "<|im_end|>")
    result = parser.parse(ids, None)
    assert (result.reasoning, result.response) == ("Let", "The")
    assert result.special_tokens == 1
    assert result.output_tokens == _total(result)


def test_text_delimiters_truncated_and_prompt_opened():
    parser = Qwen3ReasoningParser(None)
    result = parser.parse([1, 2, 3], " Let me reason", prompt_opened_reasoning=True)
    assert result.truncated is True
    assert (result.response, result.reasoning) == ("", "Let me reason")
    assert result.reasoning_tokens == 3


def test_text_mode_strips_special_token_strings_the_backend_left_in(fake):
    parser = Qwen3ReasoningParser(fake.vocabulary(markers=False))
    result = parser.parse([1, 200], "<think>a</think> The<|im_end|>")
    assert (result.reasoning, result.response) == ("a", "The")


def test_no_text_and_no_vocabulary_is_refused():
    with pytest.raises(ReasoningError, match="pass the decoded text or a TokenVocabulary"):
        Qwen3ReasoningParser(None).parse([1, 2], None)


@pytest.mark.parametrize("bad", [[-1], [True], [1.5], ["a"], [_IntLike(-2)]])
def test_malformed_token_ids_are_refused(parser, bad):
    with pytest.raises(ReasoningError, match=r"token_ids\[0\]"):
        parser.parse(bad, None)


def test_integer_like_token_ids_are_accepted(parser, fake):
    ids = [_IntLike(i) for i in fake.enc("<think>", " Let", "</think>", " The")]
    result = parser.parse(ids, None)
    assert (result.reasoning, result.response, result.output_tokens) == ("Let", "The", 4)


def test_non_iterable_token_ids_are_refused(parser):
    with pytest.raises(ReasoningError, match="sequence of ints"):
        parser.parse(42, None)  # type: ignore[arg-type]


def test_text_passed_as_token_ids_is_refused(parser):
    with pytest.raises(ReasoningError, match="not the text"):
        parser.parse("<think>", None)


def test_non_string_text_and_native_are_refused(parser, fake):
    with pytest.raises(ReasoningError, match="text must be a str"):
        Qwen3ReasoningParser(None).parse([1], b"x")  # type: ignore[arg-type]
    with pytest.raises(ReasoningError, match="native_reasoning must be a str"):
        parser.parse([1], "x", native_reasoning=3)  # type: ignore[arg-type]


def test_vocabulary_of_wrong_type_is_refused():
    with pytest.raises(ReasoningError, match=r"TokenVocabulary\.from_tokenizer"):
        get_parser("qwen3", {"<think>": 1})  # type: ignore[arg-type]


def test_repr_says_how_it_splits(parser):
    assert "ids" in repr(parser)
    assert "text" in repr(Qwen3ReasoningParser(None))
