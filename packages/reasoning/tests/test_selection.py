"""Choosing a parser for a profile and the chat-template arguments."""

from __future__ import annotations

import pytest
from comfy_llm_reasoning import (
    KNOWN_PARSERS,
    DirectResponseParser,
    PassthroughParser,
    Qwen3ReasoningParser,
    ReasoningError,
    chat_template_kwargs,
    get_parser,
    parser_for_profile,
    resolve_parser_name,
)


def test_known_parsers():
    assert KNOWN_PARSERS == ("qwen3", "none", "direct")


def test_get_parser_qwen3(fake):
    parser = get_parser(" Qwen3 ", fake.vocabulary())
    assert isinstance(parser, Qwen3ReasoningParser)
    assert parser.uses_boundary_ids


def test_unknown_parser_names_value_and_known_parsers():
    with pytest.raises(ReasoningError) as caught:
        get_parser("deepseek_r1", None)
    message = str(caught.value)
    assert "'deepseek_r1'" in message
    for name in KNOWN_PARSERS:
        assert name in message
    assert isinstance(caught.value, ValueError)


def test_non_string_parser_name_is_refused():
    with pytest.raises(ReasoningError, match="must be a parser name"):
        get_parser(None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("profile_parser", "architecture", "expected"),
    [
        ("qwen3", "SmolVLMForConditionalGeneration", "qwen3"),
        ("none", "Qwen3_5ForConditionalGeneration", "none"),
        (None, "Qwen3_5ForConditionalGeneration", "qwen3"),
        (None, "Qwen3ForCausalLM", "qwen3"),
        (None, "Qwen3VLMoeForConditionalGeneration", "qwen3"),
        (None, "qwen3_5", "qwen3"),
        (None, "Qwen2_5_VLForConditionalGeneration", "none"),
        (None, "SmolVLMForConditionalGeneration", "none"),
        (None, "MuseGlimmerForConditionalGeneration", "none"),
        (None, None, "none"),
    ],
)
def test_profile_parser_wins_then_architecture_fallback(profile_parser, architecture, expected):
    assert resolve_parser_name(profile_parser, architecture) == expected
    parser = parser_for_profile(
        profile_parser, architecture, enable_reasoning=True, vocabulary=None
    )
    assert parser.name == expected


def test_reasoning_disabled_always_gives_the_direct_parser(fake):
    vocabulary = fake.vocabulary()
    qwen = parser_for_profile("qwen3", None, enable_reasoning=False, vocabulary=vocabulary)
    assert isinstance(qwen, DirectResponseParser)
    assert qwen.think_markers is True
    plain = parser_for_profile(None, "SmolVLM", enable_reasoning=False, vocabulary=vocabulary)
    assert isinstance(plain, DirectResponseParser)
    assert plain.think_markers is False


def test_enabled_profile_parsers(fake):
    vocabulary = fake.vocabulary()
    assert isinstance(
        parser_for_profile(None, "Qwen3ForCausalLM", enable_reasoning=True, vocabulary=vocabulary),
        Qwen3ReasoningParser,
    )
    assert isinstance(
        parser_for_profile(
            "none", "Qwen3ForCausalLM", enable_reasoning=True, vocabulary=vocabulary
        ),
        PassthroughParser,
    )


def test_unknown_profile_parser_is_refused_even_when_disabled():
    with pytest.raises(ReasoningError, match="profile's reasoning_parser"):
        parser_for_profile("bogus", "Qwen3ForCausalLM", enable_reasoning=False, vocabulary=None)


@pytest.mark.parametrize(
    ("profile_parser", "architecture", "enable", "expected"),
    [
        ("qwen3", None, True, {"enable_thinking": True}),
        ("qwen3", None, False, {"enable_thinking": False}),
        (None, "Qwen3_5ForConditionalGeneration", False, {"enable_thinking": False}),
        ("none", "Qwen3_5ForConditionalGeneration", True, {}),
        (None, "SmolVLMForConditionalGeneration", True, {}),
        ("direct", None, True, {}),
    ],
)
def test_chat_template_kwargs(profile_parser, architecture, enable, expected):
    kwargs = chat_template_kwargs(profile_parser, architecture, enable_reasoning=enable)
    assert kwargs == expected
    kwargs["mutated"] = True
    assert "mutated" not in chat_template_kwargs(
        profile_parser, architecture, enable_reasoning=enable
    )


def test_chat_template_kwargs_unknown_parser():
    with pytest.raises(ReasoningError, match="known parsers"):
        chat_template_kwargs("bogus", None, enable_reasoning=True)
