"""Deploying the app through Modal's Python API, its build log in the node's progress.

``App.deploy(name=..., strategy="recreate")`` (modal/app.py:598-681): a
rolling deploy (the default) "shifts traffic gradually to new containers
while old ones drain" (app.py:627-628), so an old-version engine could take a
request right after a redeploy; recreate stops the old containers first.

The first deploy builds the image (minutes). Modal streams the build's log
lines to whatever ``OutputManager`` is current (``put_streaming_log``,
modal/_image.py:549-555; ``modal.enable_output()`` installs a terminal one,
modal/output.py:19). :func:`progress_output` builds such a manager that turns the
lines and status rows into progress events and keeps the last lines for the
error a failed build raises. The deploy runs on its own thread while the
caller polls ``check_interrupt``: ComfyUI's Cancel returns at once, the build
goes on at Modal, and the next run waits for that same deploy instead of
starting another.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage

from ..errors import ModalDeployError

if TYPE_CHECKING:
    import modal

__all__ = ["DEPLOY_STRATEGY", "DeployJob", "progress_output"]

DEPLOY_STRATEGY = "recreate"
_TAIL_LINES = 20
_LINE_CHARS = 300


def _manager_base() -> type:
    from modal._output.manager import DisabledOutputManager

    base: type = DisabledOutputManager
    return base


class _LineSink(Protocol):
    def line(self, text: object) -> None: ...


def _status_row(output: _LineSink) -> Any:
    from modal._output.manager import StatusRow

    class _Row(StatusRow):
        def message(self, message: str) -> None:
            output.line(message)

        def warn(self, warning: object) -> None:
            output.line(f"warning: {getattr(warning, 'message', warning)}")

        def details(self, message: str) -> None:
            output.line(message)

        def finish(self, message: str) -> None:
            output.line(message)

    return _Row()


def progress_output(progress: ProgressCallback, app_name: str) -> Any:
    """An ``OutputManager`` relaying Modal's deploy output to ``progress``.

    Built on ``DisabledOutputManager`` (every other method a no-op) so it is
    complete for the installed client; ``lines`` keeps the last lines.
    """

    class _ProgressOutput(_manager_base()):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lines: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
            self._lock = threading.Lock()

        def line(self, text: object) -> None:
            for raw in str(text).splitlines():
                stripped = raw.strip()
                if not stripped:
                    continue
                stripped = stripped[:_LINE_CHARS]
                with self._lock:
                    self.lines.append(stripped)
                event = ProgressEvent(
                    stage=ProgressStage.INSPECT,
                    message=f"Deploying {app_name}: {stripped}",
                    indeterminate=True,
                )
                # A failing progress sink must not break the deploy.
                with contextlib.suppress(Exception):
                    progress(event)

        def tail(self) -> str:
            with self._lock:
                return "\n".join(self.lines)

        def add_status_row(self) -> Any:
            return _status_row(self)

        def print(self, renderable: object, **kwargs: object) -> None:
            del kwargs
            self.line(renderable)

        def step_completed(self, message: str) -> None:
            self.line(message)

        async def put_streaming_log(self, log: object, prefix: str = "") -> None:
            self.line(f"{prefix}{getattr(log, 'data', '')}")

        async def put_fetched_log(self, log: object, prefix: str = "") -> None:
            self.line(f"{prefix}{getattr(log, 'data', '')}")

    return _ProgressOutput()


class DeployJob:
    """One deploy of ``app`` as ``name`` on a thread, output relayed to ``progress``."""

    def __init__(self, app: modal.App, name: str, progress: ProgressCallback) -> None:
        self.name = name
        self.output = progress_output(progress, name)
        self.error: BaseException | None = None
        self._app = app
        self._thread = threading.Thread(
            target=self._run, name="comfy-llm-modal-deploy", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        from modal._output.manager import OutputManager

        previous = OutputManager.get()
        OutputManager._set(self.output)
        try:
            self._app.deploy(name=self.name, strategy=DEPLOY_STRATEGY)
        except BaseException as error:  # handed to the waiting caller
            self.error = error
        finally:
            OutputManager._set(previous)

    def wait(self, check_interrupt: Callable[[], None], poll_seconds: float = 0.2) -> None:
        """Block until the deploy ends, checking for Cancel between polls.

        Raises:
            ModalDeployError: The deploy failed (with the log's last lines).
            BaseException: Whatever ``check_interrupt`` raised (the deploy goes on).
        """
        while self._thread.is_alive():
            check_interrupt()
            self._thread.join(poll_seconds)
        if self.error is not None:
            reason = " ".join(f"{type(self.error).__name__}: {self.error}".split())[:500]
            log_tail = self.output.tail()
            tail = f" Last build log lines:\n{log_tail}" if log_tail else ""
            raise ModalDeployError(
                f"Deploying the Modal app {self.name!r} failed: {reason}. Fix: check the lines "
                "below and your Modal workspace (modal.com/apps), then queue the prompt again; or "
                f"switch run_on_modal off to run in this ComfyUI process.{tail}",
                app_name=self.name,
                reason=reason,
                log_tail=log_tail,
            ) from self.error

    def running(self) -> bool:
        """True while the deploy thread runs."""
        return self._thread.is_alive()
