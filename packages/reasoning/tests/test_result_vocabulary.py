"""ReasoningResult checks, TokenVocabulary behaviour, and the public surface."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import comfy_llm_reasoning
import pytest
from comfy_llm_reasoning import ReasoningError, ReasoningResult, TokenVocabulary


def _result(**overrides):
    fields = {
        "response": "a",
        "reasoning": "b",
        "reasoning_tokens": 1,
        "output_tokens": 4,
        "parser": "qwen3",
        "response_tokens": 1,
        "marker_tokens": 1,
        "special_tokens": 1,
    }
    fields.update(overrides)
    return ReasoningResult(**fields)


def test_result_is_frozen_and_reports_metadata():
    result = _result(truncated=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.response = "x"  # type: ignore[misc]
    assert result.as_metadata() == {
        "reasoning_parser": "qwen3",
        "output_tokens": 4,
        "reasoning_tokens": 1,
        "reasoning_truncated": True,
        "token_accounting": "exact",
    }


def test_result_counts_must_add_up():
    with pytest.raises(ReasoningError, match="do not add up"):
        _result(output_tokens=5)


@pytest.mark.parametrize("bad", [-1, True, 1.0])
def test_result_counts_must_be_non_negative_ints(bad):
    with pytest.raises(ReasoningError, match="reasoning_tokens must be a non-negative int"):
        _result(reasoning_tokens=bad)


def test_result_accounting_must_be_known():
    with pytest.raises(ReasoningError, match="accounting"):
        _result(accounting="guess")


def test_vocabulary_lookups(fake):
    vocabulary = fake.vocabulary()
    assert vocabulary.id_of("</think>") == fake.CLOSE_ID
    assert vocabulary.id_of("</thinking>") is None
    assert vocabulary.special_strings() == ("<|endoftext|>", "<|im_end|>")
    assert TokenVocabulary({}, fake.decode).special_strings() == ()


def test_vocabulary_validation(fake):
    with pytest.raises(ReasoningError, match="decode must be callable"):
        TokenVocabulary({}, "decode")  # type: ignore[arg-type]
    with pytest.raises(ReasoningError, match="special_ids"):
        TokenVocabulary({}, fake.decode, frozenset({-3}))
    with pytest.raises(ReasoningError, match=r"token_to_id\['<think>'\]"):
        TokenVocabulary({"<think>": "7"}, fake.decode).id_of("<think>")  # type: ignore[dict-item]


class _ConvertOnlyTokenizer:
    """Duck-typed tokenizer without get_vocab."""

    unk_token_id = 0
    all_special_ids = (0, 50)
    all_special_tokens = ("<unk>", "<|im_end|>")
    _table: ClassVar[dict[str, int]] = {"<unk>": 0, "<think>": 40, "</think>": 41, "<|im_end|>": 50}

    def convert_tokens_to_ids(self, token):
        return self._table.get(token, self.unk_token_id)

    def decode(self, ids, skip_special_tokens=False):
        assert skip_special_tokens is True
        return "|".join(str(token_id) for token_id in ids)


def test_from_tokenizer_without_get_vocab():
    vocabulary = TokenVocabulary.from_tokenizer(_ConvertOnlyTokenizer())
    assert vocabulary.id_of("<think>") == 40
    assert vocabulary.id_of("</think>") == 41
    assert vocabulary.id_of("<unk>") is None
    assert vocabulary.special_ids == frozenset({0, 50})
    assert vocabulary.decode((1, 2)) == "1|2"


def test_from_tokenizer_refuses_objects_that_are_not_tokenizers():
    with pytest.raises(ReasoningError, match="decode"):
        TokenVocabulary.from_tokenizer(object())

    class DecodeOnly:
        def decode(self, ids, skip_special_tokens=False):
            return ""

    with pytest.raises(ReasoningError, match="get_vocab"):
        TokenVocabulary.from_tokenizer(DecodeOnly())


def test_public_surface():
    expected = {
        "ReasoningResult",
        "ReasoningParser",
        "TokenVocabulary",
        "get_parser",
        "parser_for_profile",
        "chat_template_kwargs",
        "Qwen3ReasoningParser",
        "PassthroughParser",
        "DirectResponseParser",
        "ReasoningError",
    }
    assert expected <= set(comfy_llm_reasoning.__all__)
    for name in comfy_llm_reasoning.__all__:
        assert hasattr(comfy_llm_reasoning, name)
    assert issubclass(ReasoningError, ValueError)


@pytest.mark.parametrize(
    ("rendered", "opened"),
    [
        ("<|im_start|>assistant\n<think>\n", True),
        ("<|im_start|>assistant\n<think>\n\n</think>\n\n", False),
        ("Assistant: ", False),
        ("<think>old</think> then <think>", True),
    ],
)
def test_a_rendered_prompt_opens_reasoning_when_its_last_think_is_unclosed(
    rendered: str, opened: bool
) -> None:
    from comfy_llm_reasoning import prompt_opens_reasoning

    assert prompt_opens_reasoning(rendered) is opened
