"""Validating an answer against its schema (the engines constrain; this verifies)."""

from __future__ import annotations

import dataclasses
import json

from comfy_llm_structured._schema import ResponseSchema

__all__ = ["SchemaCheck", "check_response", "retry_instruction"]


@dataclasses.dataclass(frozen=True, slots=True)
class SchemaCheck:
    """The outcome of validating one answer.

    Attributes:
        valid: True when the answer is JSON that satisfies the schema.
        problem: The first validation problem, in words, when not valid.
    """

    valid: bool
    problem: str | None = None


def check_response(text: str, schema: ResponseSchema) -> SchemaCheck:
    """Validate ``text`` (the answer, reasoning already removed) against ``schema``."""
    import jsonschema

    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return SchemaCheck(False, f"the answer is not JSON ({error.msg} at character {error.pos})")
    validator_class = jsonschema.validators.validator_for(schema.schema)
    found = jsonschema.exceptions.best_match(validator_class(schema.schema).iter_errors(value))
    if found is None:
        return SchemaCheck(True)
    where = "/".join(str(part) for part in found.absolute_path) or "the top level"
    return SchemaCheck(False, f"{found.message} (at {where})")


def retry_instruction(problem: str) -> str:
    """The text appended to the prompt for the one retry after a failed validation."""
    return (
        "\n\nYour previous answer did not satisfy the required JSON Schema: "
        f"{problem}. Answer again with only a JSON value that satisfies the schema."
    )
