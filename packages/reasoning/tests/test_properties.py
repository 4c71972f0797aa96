"""Property tests: the channels and the markers account for every generated token."""

from __future__ import annotations

from comfy_llm_reasoning import (
    DirectResponseParser,
    PassthroughParser,
    Qwen3ReasoningParser,
    ReasoningResult,
)
from comfy_llm_reasoning._split import apportion
from hypothesis import given
from hypothesis import strategies as st

from .conftest import (  # type: ignore[import-not-found]
    CLOSE_ID,
    OPEN_ID,
    ORDINARY,
    SPECIAL,
    SPECIAL_IDS,
    fake_decode,
    make_vocabulary,
)

VOCABULARY = make_vocabulary()
TOKEN_IDS = st.lists(
    st.one_of(
        st.sampled_from(sorted(ORDINARY.values())),
        st.sampled_from([OPEN_ID, CLOSE_ID]),
        st.sampled_from(sorted(SPECIAL.values())),
    ),
    max_size=40,
)
MARKER_STRINGS = ("<think>", "</think>")


def _accounted(result: ReasoningResult, ids: list[int]) -> None:
    assert result.output_tokens == len(ids)
    assert (
        result.reasoning_tokens
        + result.response_tokens
        + result.marker_tokens
        + result.special_tokens
        == result.output_tokens
    )
    for text in (result.response, result.reasoning):
        assert text == text.strip()
        for special in SPECIAL:
            assert special not in text


def _clean(ids):
    return [i for i in ids if i not in (OPEN_ID, CLOSE_ID) and i not in SPECIAL_IDS]


def _reference(ids, prompt_opened):
    """An independent statement of the split rules (first </think> wins)."""
    if CLOSE_ID in ids:
        close = ids.index(CLOSE_ID)
        head, tail = ids[:close], ids[close + 1 :]
        if not prompt_opened and OPEN_ID in head:
            opener = head.index(OPEN_ID)
            return _clean(head[opener + 1 :]), _clean(head[:opener] + tail), False
        return _clean(head), _clean(tail), False
    if prompt_opened:
        return _clean(ids), [], True
    if OPEN_ID in ids:
        opener = ids.index(OPEN_ID)
        return _clean(ids[opener + 1 :]), _clean(ids[:opener]), True
    return [], _clean(ids), False


@given(ids=TOKEN_IDS, prompt_opened=st.booleans())
def test_qwen3_ids_account_for_every_token(ids, prompt_opened):
    result = Qwen3ReasoningParser(VOCABULARY).parse(
        ids, fake_decode(ids), prompt_opened_reasoning=prompt_opened
    )
    _accounted(result, ids)
    reasoning, response, truncated = _reference(ids, prompt_opened)
    assert result.reasoning_tokens == len(reasoning)
    assert result.response_tokens == len(response)
    assert result.marker_tokens == ids.count(OPEN_ID) + ids.count(CLOSE_ID)
    assert result.special_tokens == sum(i in SPECIAL_IDS for i in ids)
    assert result.reasoning == fake_decode(reasoning).strip()
    assert result.response == fake_decode(response).strip()
    assert result.truncated is truncated
    if truncated:
        assert CLOSE_ID not in ids
    assert result.accounting == "exact"


@given(ids=TOKEN_IDS, prompt_opened=st.booleans())
def test_direct_ids_account_for_every_token_and_reasoning_is_empty(ids, prompt_opened):
    direct = DirectResponseParser(VOCABULARY).parse(
        ids, fake_decode(ids), prompt_opened_reasoning=prompt_opened
    )
    qwen = Qwen3ReasoningParser(VOCABULARY).parse(
        ids, fake_decode(ids), prompt_opened_reasoning=prompt_opened
    )
    _accounted(direct, ids)
    assert direct.reasoning == ""
    assert direct.response == qwen.response
    assert direct.reasoning_tokens == qwen.reasoning_tokens


@given(ids=TOKEN_IDS)
def test_passthrough_accounts_for_every_token(ids):
    result = PassthroughParser(VOCABULARY).parse(ids, None)
    _accounted(result, ids)
    assert result.reasoning == ""
    assert result.response == fake_decode(ids).strip()


@given(ids=TOKEN_IDS, prompt_opened=st.booleans(), with_vocabulary=st.booleans())
def test_text_fallback_accounts_for_every_token(ids, prompt_opened, with_vocabulary):
    vocabulary = make_vocabulary(markers=False) if with_vocabulary else None
    for parser in (Qwen3ReasoningParser(vocabulary), DirectResponseParser(vocabulary)):
        result = parser.parse(ids, fake_decode(ids), prompt_opened_reasoning=prompt_opened)
        _accounted(result, ids)
        assert result.accounting == "estimated"
        for text in (result.response, result.reasoning):
            for marker in MARKER_STRINGS:
                assert marker not in text


@given(ids=TOKEN_IDS, native=st.text(max_size=30), use_vocabulary=st.booleans())
def test_native_reasoning_accounts_for_every_token(ids, native, use_vocabulary):
    parser = Qwen3ReasoningParser(VOCABULARY if use_vocabulary else None)
    result = parser.parse(ids, "the answer", native_reasoning=native)
    _accounted(result, ids)
    assert result.response == "the answer"
    assert result.reasoning == native.strip()


@given(
    total=st.integers(min_value=0, max_value=500),
    weights=st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=5),
)
def test_apportion_sums_and_respects_zero_weights(total, weights):
    counts = apportion(total, weights)
    assert sum(counts) == total
    assert all(count >= 0 for count in counts)
    if any(weights):
        assert all(count == 0 for count, weight in zip(counts, weights, strict=True) if not weight)
        positive = [count for count, weight in zip(counts, weights, strict=True) if weight]
        if total >= len(positive):
            assert all(positive)
