"""JSON-schema responses: check the schema once, constrain decoding, validate the answer.

* :func:`parse_response_schema` → :class:`ResponseSchema` (or
  :class:`InvalidSchemaError` before any model loads).
* :class:`JsonConstraint` + :func:`llg_tokenizer`: the next-token mask the
  backends apply through their engine's logits hook.
* :func:`check_response` → :class:`SchemaCheck`; :func:`retry_instruction`
  for the one retry after a failed validation.
"""

from comfy_llm_structured._check import SchemaCheck, check_response, retry_instruction
from comfy_llm_structured._constraint import JsonConstraint, llg_tokenizer
from comfy_llm_structured._schema import MAX_SCHEMA_CHARS, ResponseSchema, parse_response_schema
from comfy_llm_structured.errors import (
    AnswerSchemaError,
    InvalidSchemaError,
    StructuredOutputError,
)

__version__ = "0.1.0"

__all__ = [
    "MAX_SCHEMA_CHARS",
    "AnswerSchemaError",
    "InvalidSchemaError",
    "JsonConstraint",
    "ResponseSchema",
    "SchemaCheck",
    "StructuredOutputError",
    "check_response",
    "llg_tokenizer",
    "parse_response_schema",
    "retry_instruction",
]
