"""TokenVocabulary.from_tokenizer on a real Hugging Face tokenizer built in-test."""

from __future__ import annotations

import pytest
from comfy_llm_reasoning import Qwen3ReasoningParser, TokenVocabulary

tokenizers = pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def hf_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    words = ["[UNK]", "The", "answer", "is", "42", "Let", "me", "reason", "<", "/", "think", ">"]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.decoder = decoders.WordPiece()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    tokenizer.add_tokens(
        [
            transformers.AddedToken("<think>", special=False, normalized=False),
            transformers.AddedToken("</think>", special=False, normalized=False),
        ]
    )
    tokenizer.add_special_tokens({"eos_token": "<|im_end|>"})
    return tokenizer


def test_from_tokenizer_reads_markers_and_special_ids(hf_tokenizer):
    vocabulary = TokenVocabulary.from_tokenizer(hf_tokenizer)
    open_id = hf_tokenizer.convert_tokens_to_ids("<think>")
    close_id = hf_tokenizer.convert_tokens_to_ids("</think>")
    end_id = hf_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert vocabulary.id_of("<think>") == open_id
    assert vocabulary.id_of("</think>") == close_id
    assert end_id in vocabulary.special_ids
    assert open_id not in vocabulary.special_ids
    assert close_id not in vocabulary.special_ids
    assert "<|im_end|>" in vocabulary.special_strings()


def test_parses_a_real_tokenizer_generation(hf_tokenizer):
    vocabulary = TokenVocabulary.from_tokenizer(hf_tokenizer)
    ids = hf_tokenizer.encode(
        "<think> Let me reason </think> The answer is < / think > 42 <|im_end|>",
        add_special_tokens=False,
    )
    text = hf_tokenizer.decode(ids, skip_special_tokens=True)
    result = Qwen3ReasoningParser(vocabulary).parse(ids, text)
    assert result.reasoning == "Let me reason"
    assert result.response.startswith("The answer is <")
    assert result.response.endswith("42")
    assert "<|im_end|>" not in result.response
    assert result.reasoning_tokens == 3
    assert result.marker_tokens == 2
    assert result.special_tokens == 1
    assert result.output_tokens == len(ids)
