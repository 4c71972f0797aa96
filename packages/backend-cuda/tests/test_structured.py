"""Constrained JSON decoding through real Transformers, from random weights."""

from __future__ import annotations

import json

import jsonschema
import pytest
from comfy_llm_inputs import PreparedInputs
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld.sinks import RecordingSink

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 9},
        "ok": {"type": "boolean"},
    },
    "required": ["color", "count", "ok"],
    "additionalProperties": False,
}


def _settings(**changes: object) -> GenerationSettings:
    base: dict[str, object] = {
        "max_new_tokens": 64,
        "temperature": 0.0,
        "enable_reasoning": False,
        "response_schema": json.dumps(SCHEMA),
    }
    base.update(changes)
    return GenerationSettings(**base)  # type: ignore[arg-type]


def _answer(loaded, settings: GenerationSettings) -> str:
    result = loaded.backend.generate(
        PreparedInputs.text("Describe it as JSON."), settings, RecordingSink()
    )
    assert result.constrained is True
    assert result.finish_reason == "stop"
    return result.text


@pytest.mark.parametrize("name", ["qwen", "smolvlm"])
def test_random_weights_answer_valid_json_greedy(request, name: str) -> None:
    loaded = request.getfixturevalue(name)
    unconstrained = loaded.backend.generate(
        PreparedInputs.text("Describe it as JSON."),
        _settings(response_schema=None),
        RecordingSink(),
    )
    with pytest.raises(json.JSONDecodeError):
        json.loads(unconstrained.text)  # random weights: not JSON on their own
    jsonschema.validate(json.loads(_answer(loaded, _settings())), SCHEMA)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_weights_answer_valid_json_when_sampling(qwen, seed: int) -> None:
    text = _answer(qwen, _settings(temperature=1.0, top_p=0.9, seed=seed))
    jsonschema.validate(json.loads(text), SCHEMA)


def test_reasoning_stays_free_and_only_the_answer_is_constrained(scripted) -> None:
    from comfy_llm_reasoning import parser_for_profile

    settings = _settings(enable_reasoning=True)
    result = scripted.backend.generate(
        PreparedInputs.text("Describe it as JSON."), settings, RecordingSink()
    )
    profile = scripted.staged.profile
    parsed = parser_for_profile(
        profile.reasoning_parser,
        profile.architecture,
        enable_reasoning=True,
        vocabulary=scripted.backend.vocabulary,
    ).parse(result.token_ids, result.text, prompt_opened_reasoning=result.prompt_opened_reasoning)
    assert parsed.reasoning == "a b"  # the scripted thinking, untouched
    jsonschema.validate(json.loads(parsed.response), SCHEMA)
