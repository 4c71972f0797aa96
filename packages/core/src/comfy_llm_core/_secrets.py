"""Secret hygiene: Hub tokens never reach a message, a log, metadata or a file.

Every piece of exception text that leaves the process for a person or a file
goes through :func:`render_error` (or :func:`redact` for other text). Token
values are taken from the environment at call time, together with any token
a caller passes explicitly, and every occurrence — bare, in a ``Bearer``
header, as a ``repr`` of bytes — is replaced by ``[REDACTED]``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from comfy_llm_core._errors import ComfyLLMError, ErrorAction

__all__ = [
    "REDACTED",
    "TOKEN_ENVS",
    "InvalidTokenError",
    "check_token",
    "redact",
    "render_error",
]

TOKEN_ENVS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
REDACTED = "[REDACTED]"
_MIN_SECRET_LENGTH = 4  # never scrub "a" out of every word


class InvalidTokenError(ComfyLLMError, ValueError):
    """A Hub token cannot be sent as an HTTP header value (the value is not echoed).

    Attributes:
        source: Where the token came from (an environment variable or "argument").
        problem: What is wrong with it, without its characters.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(
            f"The Hugging Face token in {source} is malformed: {problem}. Copy the token "
            "again from https://huggingface.co/settings/tokens (it is one line of "
            f"printable ASCII, usually starting with 'hf_'), or unset {source}."
        )


def check_token(token: str, source: str = "HF_TOKEN") -> str:
    """Return ``token`` stripped, or raise :class:`InvalidTokenError` without echoing it."""
    value = token.strip()
    for char in value:
        if char in "\r\n":
            raise InvalidTokenError(source, "it contains a line break")
        if not char.isascii():
            raise InvalidTokenError(source, "it contains a non-ASCII character")
        if not char.isprintable() or char.isspace():
            raise InvalidTokenError(source, "it contains a space or a control character")
    return value


def _secrets(extra: Iterable[str | None]) -> list[str]:
    found: set[str] = set()
    for value in (*(os.environ.get(name) for name in TOKEN_ENVS), *extra):
        if not value:
            continue
        for candidate in (value, value.strip(), *value.split()):
            if len(candidate) >= _MIN_SECRET_LENGTH:
                found.add(candidate)
                found.add(repr(candidate)[1:-1])  # escaped form inside a repr
    return sorted(found, key=len, reverse=True)


def redact(text: str, *, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every known token value replaced by ``[REDACTED]``."""
    for secret in _secrets(secrets):
        text = text.replace(secret, REDACTED)
    return text


def render_error(error: BaseException, *, secrets: Iterable[str | None] = ()) -> str:
    """One user-facing line for ``error``: its message, tokens scrubbed.

    Multi-line library text is folded onto one line; an empty message falls
    back to the class name so the user always sees something.
    """
    message = str(error).strip() or type(error).__name__
    message = " ".join(line.strip() for line in message.splitlines() if line.strip())
    return redact(message, secrets=secrets)
