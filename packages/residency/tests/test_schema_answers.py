"""Response schemas through the manager: checked up front, validated after, one retry."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from comfy_llm_core import Modality
from comfy_llm_residency.backend import BackendResult, BackendTimings, GenerationSettings
from comfy_llm_structured import InvalidSchemaError

SCHEMA = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})


IDEFICS = "Idefics3ForConditionalGeneration"


class AnswersInTurn:
    """A backend that returns the given texts in turn and records each prompt."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.prompts: list[str] = []
        self.vocabulary = None
        self.modalities = frozenset(Modality)

    def generate(self, inputs: Any, settings: GenerationSettings, sink: Any) -> BackendResult:
        self.prompts.append(inputs.prompt)
        text = self.texts[len(self.prompts) - 1]
        sink.token(1, text)
        return BackendResult(
            token_ids=(1,),
            text=text,
            native_reasoning=None,
            timings=BackendTimings(0.0, 3),
            constrained=True,
        )

    def unload(self) -> None:
        pass

    def runtime_metadata(self) -> dict[str, object]:
        return {"device": "fake0"}


def _run(world, fake, texts: list[str]) -> tuple[Any, AnswersInTurn]:
    backend = AnswersInTurn(texts)
    manager = world.manager(backend_factory=lambda *_: backend)
    profile = fake.make_profile(
        reasoning_parser=None, architecture="Idefics3ForConditionalGeneration"
    )
    settings = GenerationSettings(
        max_new_tokens=8, temperature=0.0, enable_reasoning=False, response_schema=SCHEMA
    )
    return manager.run(profile, world.snapshot(profile), fake.make_inputs(), settings), backend


def test_valid_first_answer_is_not_retried(world, fake) -> None:
    result, backend = _run(world, fake, ['{"n": 3}'])
    assert result.response == '{"n": 3}'
    assert len(backend.prompts) == 1
    meta = result.metadata.to_dict()
    assert (meta["schema_valid"], meta["schema_retries"], meta["constrained_decoding"]) == (
        True,
        0,
        True,
    )


def test_invalid_answer_is_retried_once_with_the_validators_message(world, fake) -> None:
    result, backend = _run(world, fake, ['{"n": "three"}', '{"n": 3}'])
    assert result.response == '{"n": 3}'
    assert len(backend.prompts) == 2
    assert "'three' is not of type 'integer' (at n)" in backend.prompts[1]
    assert backend.prompts[1].startswith(backend.prompts[0])
    assert result.metadata.to_dict()["schema_valid"] is True
    assert result.metadata.to_dict()["schema_retries"] == 1


def test_still_invalid_after_the_retry_is_reported_not_hidden(world, fake) -> None:
    result, backend = _run(world, fake, ["not json", "{}"])
    assert len(backend.prompts) == 2
    assert result.response == "{}"
    assert result.metadata.to_dict()["schema_valid"] is False
    assert "'n' is a required property" in result.metadata.to_dict()["schema_problem"]


def test_without_schema_no_schema_fields(world, fake) -> None:
    backend = AnswersInTurn(["free text"])
    manager = world.manager(backend_factory=lambda *_: backend)
    profile = fake.make_profile(
        reasoning_parser=None, architecture="Idefics3ForConditionalGeneration"
    )
    settings = GenerationSettings(max_new_tokens=8, temperature=0.0, enable_reasoning=False)
    result = manager.run(profile, world.snapshot(profile), fake.make_inputs(), settings)
    assert "schema_valid" not in result.metadata.to_dict()


@pytest.mark.parametrize(
    "schema, problem",
    [
        ("{", "not JSON"),
        ("[]", "not an object"),
        ('{"type": "strnig"}', "at type"),
        ('{"properties": {"a": {"pattern": "("}}}', "regex"),
        ("[" * 40 + "]" * 40, "deeper than"),
        ('{"a": "' + "x" * 70_000 + '"}', "limit is"),
    ],
)
def test_invalid_schema_refused_before_any_model_load(
    world, fake, schema: str, problem: str
) -> None:
    with pytest.raises(InvalidSchemaError, match=problem) as caught:
        GenerationSettings(response_schema=schema)
    assert caught.value.action == "fix_input"
    assert pickle.loads(pickle.dumps(caught.value)).problem == caught.value.problem
    assert world.log.events == []


def test_schema_is_canonical_and_round_trips(world, fake) -> None:
    settings = GenerationSettings(response_schema='{ "type" : "object" }')
    assert settings.response_schema == '{"type":"object"}'
    assert GenerationSettings.from_dict(settings.to_dict()) == settings
    assert GenerationSettings(response_schema="  ").response_schema is None
