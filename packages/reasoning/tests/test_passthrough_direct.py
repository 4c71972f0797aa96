"""The passthrough (``none``) and direct-response (``direct``) parsers."""

from __future__ import annotations

import pytest
from comfy_llm_reasoning import DirectResponseParser, PassthroughParser, get_parser


def test_passthrough_returns_the_whole_text(fake):
    parser = PassthroughParser(fake.vocabulary())
    ids = fake.enc("<think>", " Let", "</think>", " The", " answer", "<|im_end|>")
    result = parser.parse(ids, fake.decode(ids), native_reasoning="ignored")
    assert result.response == "<think> Let</think> The answer"
    assert result.reasoning == ""
    assert result.reasoning_tokens == 0
    assert result.response_tokens == 5
    assert result.special_tokens == 1
    assert result.marker_tokens == 0
    assert result.parser == "none"
    assert result.accounting == "exact"


def test_passthrough_decodes_ids_and_strips_special_strings(fake):
    parser = PassthroughParser(fake.vocabulary())
    ids = fake.enc("\n", " The", " answer", "<|im_end|>")
    assert parser.parse(ids, None).response == "The answer"
    assert parser.parse(ids, " The answer<|im_end|><|endoftext|>\n").response == "The answer"


def test_passthrough_without_vocabulary_counts_everything_as_response():
    result = PassthroughParser(None).parse([1, 2, 3], " text ")
    assert result.response == "text"
    assert result.response_tokens == 3
    assert result.accounting == "estimated"


def test_direct_plain_answer(fake):
    parser = DirectResponseParser(fake.vocabulary())
    ids = fake.enc(" The", " answer", "<|im_end|>")
    result = parser.parse(ids, fake.decode(ids))
    assert (result.response, result.reasoning) == ("The answer", "")
    assert result.parser == "direct"
    assert result.truncated is False
    assert result.response_tokens == 2


def test_direct_removes_an_emitted_think_block_but_counts_it(fake):
    parser = DirectResponseParser(fake.vocabulary())
    ids = fake.enc("<think>", " Let", " me", "</think>", "\n\n", " The", " answer")
    result = parser.parse(ids, fake.decode(ids))
    assert result.response == "The answer"
    assert result.reasoning == ""
    assert result.reasoning_tokens == 2
    assert result.marker_tokens == 2
    assert result.output_tokens == 7


def test_direct_unclosed_block_reports_truncation_with_empty_channels(fake):
    parser = DirectResponseParser(fake.vocabulary())
    ids = fake.enc("<think>", " Let", " me")
    result = parser.parse(ids, fake.decode(ids))
    assert (result.response, result.reasoning, result.truncated) == ("", "", True)


def test_direct_keeps_literal_close_text(fake):
    parser = DirectResponseParser(fake.vocabulary())
    ids = fake.enc(" The", "<", "/", "think", ">", " answer")
    assert parser.parse(ids, None).response == "The</think> answer"


def test_direct_discards_native_reasoning(fake):
    parser = DirectResponseParser(fake.vocabulary())
    ids = fake.enc("<think>", " Let", "</think>", " The", " answer")
    result = parser.parse(ids, "The answer", native_reasoning="Let")
    assert (result.response, result.reasoning) == ("The answer", "")
    assert result.reasoning_tokens == 1
    unknown = DirectResponseParser(None).parse([1, 2, 3], "The answer", native_reasoning="Let")
    assert (unknown.response, unknown.reasoning) == ("The answer", "")
    assert unknown.output_tokens == 3


def test_direct_text_mode_strips_the_block():
    parser = DirectResponseParser(None)
    result = parser.parse([1, 2, 3, 4], "<think>\nLet me\n</think>\n\nThe answer")
    assert (result.response, result.reasoning) == ("The answer", "")
    assert result.accounting == "estimated"
    assert result.output_tokens == 4


def test_direct_without_think_format_is_passthrough_named_direct(fake):
    parser = DirectResponseParser(fake.vocabulary(), think_markers=False)
    ids = fake.enc("<think>", " The", "</think>", "<|im_end|>")
    result = parser.parse(ids, None)
    assert result.response == "<think> The</think>"
    assert result.parser == "direct"
    assert result.reasoning == ""


@pytest.mark.parametrize(
    ("name", "cls"),
    [("none", PassthroughParser), ("direct", DirectResponseParser), ("NONE", PassthroughParser)],
)
def test_get_parser_builds_each(name, cls, fake):
    parser = get_parser(name, fake.vocabulary())
    assert isinstance(parser, cls)
    assert parser.name == name.lower()
