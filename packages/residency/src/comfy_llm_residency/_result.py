"""What the manager answers for one request."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["InferenceResult"]


@dataclasses.dataclass(frozen=True, slots=True)
class InferenceResult:
    """The outcome of one request.

    Attributes:
        response: The answer with reasoning removed.
        reasoning: The reasoning text, empty when none.
        metadata: JSON-ready telemetry (see the package README).
    """

    response: str
    reasoning: str
    metadata: dict[str, object]

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"response", "reasoning", "metadata"}`` (JSON-ready)."""
        return {"response": self.response, "reasoning": self.reasoning, "metadata": self.metadata}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InferenceResult:
        """Rebuild a result from :meth:`to_dict` output (e.g. sent back by a remote worker)."""
        return cls(
            response=str(data["response"]),
            reasoning=str(data["reasoning"]),
            metadata=dict(data["metadata"]),
        )
