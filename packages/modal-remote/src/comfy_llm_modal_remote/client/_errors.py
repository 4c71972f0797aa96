"""What the Modal client raises on this machine, turned into one line naming the fix.

Read in the modal 1.6.4 client: a token Modal refuses raises
``modal.exception.AuthError`` at the first RPC (``_grpc_client.py:43`` maps
gRPC UNAUTHENTICATED to it; ``client.py:517`` says the hello RPC raises
AuthError or ConnectionError); no network ends, after the client's retries,
in ``modal.exception.ConnectionError`` (or a plain ``OSError``/``TimeoutError``
from the transport below it); a stopped or deleted app makes
``Function.from_name(...).hydrate()``/``.spawn`` raise ``NotFoundError``; and
``FunctionCall.get()`` of a call whose input was terminated raises
``RemoteError('')`` (``_utils/function_utils.py:527-574``: a TERMINATED result
carries no exception text), and of an input that ran past its function's
``timeout`` raises ``FunctionTimeoutError`` (function_utils.py:533-534), a
``TimeoutError`` subclass (exception.py:209) that must not read as "no
network". Checked by class name and module, so importing this costs nothing
when Modal is not installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from comfy_llm_core import ProgressCallback

from ..errors import (
    ModalAppMissingError,
    ModalDeployError,
    ModalUnavailableError,
    RemoteCallCancelledError,
    RemoteTimeoutError,
)
from ..wire._plain import WireDict
from ..wire._settings import ENGINE_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from ._transport import RemoteCall

_Call = TypeVar("_Call")

__all__ = [
    "call_outcome",
    "ensure_ready",
    "is_cancelled_outcome",
    "spawn_checked",
    "translate_client_error",
]


class _Deployable(Protocol):
    app_name: str

    def ensure_ready(
        self, progress: ProgressCallback, check_interrupt: Callable[[], None] = ...
    ) -> None: ...

    def forget_deployment(self) -> None: ...


def _modal_error(error: BaseException, name: str) -> bool:
    kind = type(error)
    return any(cls.__name__ == name and cls.__module__.startswith("modal") for cls in kind.__mro__)


def is_cancelled_outcome(error: BaseException) -> bool:
    """``FunctionCall.get()``'s answer for a cancelled call: ``RemoteError`` with no text."""
    return _modal_error(error, "RemoteError") and not str(error).strip()


def translate_client_error(error: BaseException, app_name: str) -> BaseException | None:
    """The node's error for a Modal client error, or None when it is not one of these."""
    if _modal_error(error, "AuthError"):
        return ModalUnavailableError("token", " ".join(str(error).split())[:200])
    if _modal_error(error, "NotFoundError"):
        detail = " ".join(str(error).split())[:200]
        suffix = f" ({detail})" if detail else ""
        return ModalAppMissingError(
            f"The Modal app {app_name!r} was stopped or deleted outside ComfyUI{suffix}. It is "
            "deployed again on the next run: queue the prompt again.",
            app_name=app_name,
        )
    if _modal_error(error, "ConnectionError") or isinstance(error, (ConnectionError, TimeoutError)):
        return ModalUnavailableError("network", f"{type(error).__name__}: {error}"[:200])
    return None


def call_outcome(
    call: RemoteCall, what: str, *, limit_seconds: float = ENGINE_TIMEOUT_SECONDS
) -> WireDict:
    """``call.outcome()``; a call Modal ended cancelled raises :class:`RemoteCallCancelledError`.

    One Modal ended at its function's ``limit_seconds`` raises
    :class:`RemoteTimeoutError`.
    """
    try:
        outcome = call.outcome()
    except Exception as error:
        if _modal_error(error, "FunctionTimeoutError"):
            raise RemoteTimeoutError(
                f"Modal ended {what} at its {limit_seconds:g} s time limit. Fix: ask for less "
                "in one call (fewer new tokens; for captions, fewer images a chunk: "
                "comfy-llm caption --chunk-images), "
                "then queue the prompt again; captions already written are kept.",
                what=what,
                limit_seconds=limit_seconds,
            ) from error
        if is_cancelled_outcome(error):
            raise RemoteCallCancelledError(
                f"Modal cancelled {what}: it was stopped outside ComfyUI (the Modal dashboard, "
                "`modal app stop`, or a deploy of this app from another machine). Fix: queue the "
                "prompt again; captions already written are kept.",
                what=what,
            ) from error
        raise
    return outcome


def ensure_ready(
    transport: _Deployable, progress: ProgressCallback, check_interrupt: Callable[[], None]
) -> None:
    """``transport.ensure_ready``: a refused token or no network is one line naming the fix.

    A deploy that failed for either (``ModalDeployError`` wraps the client's
    error) is said the same way: the build log does not help there.
    """
    try:
        transport.ensure_ready(progress, check_interrupt)
    except Exception as error:
        cause = error.__cause__ if isinstance(error, ModalDeployError) else error
        translated = translate_client_error(cause or error, transport.app_name)
        if translated is None or isinstance(translated, ModalAppMissingError):
            raise
        raise translated from error


def spawn_checked(transport: _Deployable, start: Callable[[], _Call]) -> _Call:
    """A spawn; the app gone is :class:`ModalAppMissingError` (deployment forgotten)."""
    try:
        return start()
    except Exception as error:
        translated = translate_client_error(error, transport.app_name)
        if translated is None:
            raise
        if isinstance(translated, ModalAppMissingError):
            transport.forget_deployment()  # stopped outside ComfyUI: deploy anew next
        raise translated from error
