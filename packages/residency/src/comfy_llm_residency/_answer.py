"""One answer: generate, split the reasoning off, and check it against the schema.

With a response schema the engine constrains decoding; the answer is still
validated (a schema keyword the grammar cannot express, or a token budget
that ran out mid-object, can leave it invalid). On failure the request runs
once more with the validator's message appended to the prompt.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from comfy_llm_structured import check_response, retry_instruction

from ._generation import parse_reasoning

if TYPE_CHECKING:
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_profiles import ModelProfile
    from comfy_llm_reasoning import ReasoningResult

    from ._types import Backend, BackendResult, GenerationSettings, TokenCallback

__all__ = ["Answer", "generate_answer"]

MAX_SCHEMA_RETRIES = 1


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

    def metadata(self) -> dict[str, object]:
        """The schema fields of the request's metadata (empty without a schema)."""
        if self.schema_valid is None:
            return {}
        fields: dict[str, object] = {
            "schema_valid": self.schema_valid,
            "schema_retries": self.schema_retries,
            "constrained_decoding": self.result.constrained,
        }
        if self.schema_problem is not None:
            fields["schema_problem"] = self.schema_problem
        return fields


def generate_answer(
    profile: ModelProfile,
    backend: Backend,
    inputs: PreparedInputs,
    settings: GenerationSettings,
    on_token: TokenCallback,
) -> Answer:
    """Generate (and, with a schema, validate and retry once); see the module docstring."""
    result = backend.generate(inputs, settings, on_token)
    parsed = parse_reasoning(profile, backend, settings, result)
    schema = settings.schema
    if schema is None:
        return Answer(result, parsed)
    check = check_response(parsed.response, schema)
    retries = 0
    while not check.valid and retries < MAX_SCHEMA_RETRIES:
        retries += 1
        assert check.problem is not None
        again = dataclasses.replace(inputs, prompt=inputs.prompt + retry_instruction(check.problem))
        result = backend.generate(again, settings, on_token)
        parsed = parse_reasoning(profile, backend, settings, result)
        check = check_response(parsed.response, schema)
    return Answer(result, parsed, check.valid, retries, check.problem)
