"""What the manager answers for one request."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ._run_metadata import RunMetadata

__all__ = ["InferenceResult"]


@dataclasses.dataclass(frozen=True, slots=True)
class InferenceResult:
    """The outcome of one request.

    Attributes:
        response: The answer with reasoning removed.
        reasoning: The reasoning text, empty when none.
        metadata: The request's telemetry, section by section.
    """

    response: str
    reasoning: str
    metadata: RunMetadata

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"response", "reasoning", "metadata"}`` (JSON-ready; metadata flat)."""
        return {
            "response": self.response,
            "reasoning": self.reasoning,
            "metadata": self.metadata.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InferenceResult:
        """Rebuild a result from :meth:`to_dict` output (e.g. sent back by a remote worker).

        Raises:
            ValueError: The metadata lacks a key every request's metadata has.
        """
        return cls(
            response=str(data["response"]),
            reasoning=str(data["reasoning"]),
            metadata=RunMetadata.from_dict(data["metadata"]),
        )
