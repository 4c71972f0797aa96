"""Answers: generate, split the reasoning off, and check each against its schema.

With a response schema the engine constrains decoding; the answer is still
validated (a schema keyword the grammar cannot express, or a token budget
that ran out mid-object, can leave it invalid). On failure the request runs
once more with the validator's message appended to the prompt. A batch goes
through the same steps: the items that fail are generated again together.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from comfy_llm_structured import check_response, retry_instruction

from ._generation import parse_reasoning
from ._run_metadata import SchemaFacts
from .backend import BatchItem, refuse_unaccepted

if TYPE_CHECKING:
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_profiles import ModelProfile
    from comfy_llm_reasoning import ReasoningResult

    from ._generation import TokenRelay
    from .backend import Backend, BackendResult, GenerationSettings

__all__ = ["Answer", "Generate", "answer_items", "generate_answer"]

MAX_SCHEMA_RETRIES = 1

Generate = Callable[[Sequence[BatchItem], Sequence[int]], list["BackendResult"]]
"""Generates ``items`` (whose positions in the request are the given indices);
returns their results in the same order."""


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """The last generation of a request and its schema verdict.

    Attributes:
        result: The backend's raw result.
        parsed: Response and reasoning split apart.
        schema_valid: None without a schema, else whether the response satisfies it.
        schema_retries: Generations re-run because validation failed.
        schema_problem: The validator's message when the final answer is invalid.
    """

    result: BackendResult
    parsed: ReasoningResult
    schema_valid: bool | None = None
    schema_retries: int = 0
    schema_problem: str | None = None

    def schema_facts(self) -> SchemaFacts | None:
        """The schema section of the request's metadata (None without a schema)."""
        if self.schema_valid is None:
            return None
        return SchemaFacts(
            schema_valid=self.schema_valid,
            schema_retries=self.schema_retries,
            constrained_decoding=self.result.constrained,
            schema_problem=self.schema_problem,
        )


def _judge(
    profile: ModelProfile,
    backend: Backend,
    settings: GenerationSettings,
    result: BackendResult,
    retries: int,
) -> Answer:
    parsed = parse_reasoning(profile, backend, settings, result)
    schema = settings.schema
    if schema is None:
        return Answer(result, parsed)
    check = check_response(parsed.response, schema)
    return Answer(result, parsed, check.valid, retries, check.problem)


def answer_items(
    profile: ModelProfile, backend: Backend, items: Sequence[BatchItem], generate: Generate
) -> list[Answer]:
    """Generate every item, then retry (once) those whose answer fails its schema."""
    results = generate(items, range(len(items)))
    answers = [
        _judge(profile, backend, i.settings, r, 0) for i, r in zip(items, results, strict=True)
    ]
    for retries in range(1, MAX_SCHEMA_RETRIES + 1):
        failing = [index for index, answer in enumerate(answers) if answer.schema_valid is False]
        if not failing:
            break
        again = [
            BatchItem(
                items[index].inputs.with_text(
                    retry_instruction(answers[index].schema_problem or "")
                ),
                items[index].settings,
            )
            for index in failing
        ]
        for index, result in zip(failing, generate(again, failing), strict=True):
            answers[index] = _judge(profile, backend, items[index].settings, result, retries)
    return answers


def generate_answer(
    profile: ModelProfile,
    backend: Backend,
    inputs: PreparedInputs,
    settings: GenerationSettings,
    relay: TokenRelay,
) -> Answer:
    """One request's answer (validated and retried as the module docstring says).

    The engine is called here directly: one request is not a batch of one.
    """
    refuse_unaccepted(backend, inputs, profile.backend)
    relay.next_generation()
    answer = _judge(profile, backend, settings, backend.generate(inputs, settings, relay), 0)
    for retries in range(1, MAX_SCHEMA_RETRIES + 1):
        if answer.schema_valid is not False:
            break
        again = inputs.with_text(retry_instruction(answer.schema_problem or ""))
        relay.next_generation()
        result = backend.generate(again, settings, relay)
        answer = _judge(profile, backend, settings, result, retries)
    return answer
