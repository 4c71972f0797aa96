"""Reading a ``response_schema`` once, where it enters, before any model loads.

A schema is refused when it is too large, not JSON, nested too deep, not a
valid JSON Schema for its declared draft, or not compilable into a grammar by
llguidance (the engines' constrained decoding would otherwise fail mid-run).
The accepted schema is kept as canonical JSON text: that is what crosses
process boundaries and what every engine compiles.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

from comfy_llm_structured.errors import InvalidSchemaError

__all__ = ["MAX_SCHEMA_CHARS", "ResponseSchema", "parse_response_schema"]

MAX_SCHEMA_CHARS = 65_536
_MAX_DEPTH = 32
# Compact JSON: a model (even a random one) cannot pad the answer with endless whitespace.
_GRAMMAR_OPTIONS = {"whitespace_flexible": False}


@dataclasses.dataclass(frozen=True, slots=True)
class ResponseSchema:
    """A checked JSON Schema.

    Attributes:
        text: The schema as canonical JSON (sorted keys, compact).
    """

    text: str

    @property
    def schema(self) -> dict[str, Any]:
        """The schema as a fresh dict."""
        value: dict[str, Any] = json.loads(self.text)
        return value

    @property
    def grammar(self) -> str:
        """The llguidance grammar engines compile for constrained decoding."""
        return _grammar(self.text)


@functools.lru_cache(maxsize=32)
def _grammar(text: str) -> str:
    from llguidance import LLMatcher

    grammar: str = LLMatcher.grammar_from_json_schema(text, defaults=_GRAMMAR_OPTIONS)  # type: ignore[arg-type]
    return grammar


def parse_response_schema(text: str) -> ResponseSchema:
    """Check ``text`` as a JSON Schema and return it in canonical form.

    Raises:
        InvalidSchemaError: Too long, not JSON, too deep, not an object, invalid
            for its draft, or not compilable into a decoding grammar.
    """
    import jsonschema
    from llguidance import LLMatcher

    if not isinstance(text, str):
        raise InvalidSchemaError(f"expected JSON text, got {type(text).__name__}")
    if len(text) > MAX_SCHEMA_CHARS:
        raise InvalidSchemaError(f"it has {len(text)} characters, the limit is {MAX_SCHEMA_CHARS}")
    if _depth_of_text(text) > _MAX_DEPTH:
        raise InvalidSchemaError(f"it nests deeper than {_MAX_DEPTH} levels")
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidSchemaError(
            f"it is not JSON ({error.msg} at line {error.lineno}, column {error.colno})"
        ) from None
    if not isinstance(schema, dict):
        raise InvalidSchemaError(f"the top level is a JSON {type(schema).__name__}, not an object")
    validator = jsonschema.validators.validator_for(schema)
    try:
        validator.check_schema(schema)
    except jsonschema.SchemaError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "the top level"
        raise InvalidSchemaError(f"{error.message} (at {where})") from None
    canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        grammar = _grammar(canonical)
    except (ValueError, RuntimeError) as error:
        raise InvalidSchemaError(f"constrained decoding cannot compile it ({error})") from None
    problem = LLMatcher.validate_grammar(grammar)
    if problem:
        raise InvalidSchemaError(f"constrained decoding cannot compile it ({problem})")
    return ResponseSchema(text=canonical)


def _depth_of_text(text: str) -> int:
    """Bracket depth of JSON text, counted without parsing (strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
