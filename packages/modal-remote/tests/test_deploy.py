"""Deploying through Modal's Python API: recreate, output relayed, Cancel, failures with logs."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from comfy_llm_core import ProgressEvent
from comfy_llm_modal_remote.client._deploy import DEPLOY_STRATEGY, DeployJob, progress_output


def test_recreate_is_a_strategy_modal_accepts_and_deploy_takes() -> None:
    import inspect

    from modal.app import _App as ModalApp
    from modal.runner import _validate_deployment_strategy

    assert "strategy" in inspect.signature(ModalApp.deploy).parameters
    assert _validate_deployment_strategy(DEPLOY_STRATEGY) == "recreate"


class _App:
    """Stands in for ``modal.App`` at the deploy call: writes through the current
    OutputManager as Modal's image build does (modal/_image.py:549-555)."""

    def __init__(self, *, fail: bool = False, release: threading.Event | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail
        self.release = release

    def deploy(self, **kwargs: Any) -> None:
        from modal._output.manager import OutputManager
        from modal.runner import _validate_deployment_strategy
        from modal_proto import api_pb2

        self.calls.append(kwargs)
        _validate_deployment_strategy(kwargs["strategy"])
        output = OutputManager.get()
        row = output.add_status_row()
        row.message("Building image im-123")
        asyncio.run(
            output.put_streaming_log(api_pb2.TaskLogs(data="Step 1/3 : FROM python:3.11\n"))
        )
        asyncio.run(
            output.put_streaming_log(api_pb2.TaskLogs(data="=> nvcc --version\nCuda 13.0\n"))
        )
        if self.release is not None:
            self.release.wait(10)
        if self.fail:
            asyncio.run(output.put_streaming_log(api_pb2.TaskLogs(data="error: nvcc: not found\n")))
            raise RuntimeError("Image build for im-123 failed")
        output.step_completed("App deployed in 1.0s!")


def test_the_deploy_recreates_and_its_log_reaches_the_progress_text() -> None:
    events: list[ProgressEvent] = []
    app = _App()
    DeployJob(app, "comfy-llm-x", events.append).wait(lambda: None)
    assert app.calls == [{"name": "comfy-llm-x", "strategy": "recreate"}]
    messages = [e.message for e in events]
    assert "Deploying comfy-llm-x: Building image im-123" in messages
    assert "Deploying comfy-llm-x: Step 1/3 : FROM python:3.11" in messages
    assert "Deploying comfy-llm-x: Cuda 13.0" in messages
    assert messages[-1] == "Deploying comfy-llm-x: App deployed in 1.0s!"
    from modal._output.manager import DisabledOutputManager, OutputManager

    assert isinstance(OutputManager.get(), DisabledOutputManager)  # restored afterwards


def test_a_failed_build_reaches_the_node_with_its_last_log_lines() -> None:
    from comfy_llm_modal_remote.errors import ModalDeployError

    with pytest.raises(ModalDeployError) as raised:
        DeployJob(_App(fail=True), "comfy-llm-x", lambda event: None).wait(lambda: None)
    message = str(raised.value)
    assert "Image build for im-123 failed" in message
    assert "error: nvcc: not found" in message and "Step 1/3" in message
    assert raised.value.log_tail.endswith("error: nvcc: not found")


def test_cancel_returns_at_once_and_the_next_wait_joins_the_same_deploy() -> None:
    class Interrupted(BaseException):
        pass

    release = threading.Event()
    app = _App(release=release)
    job = DeployJob(app, "comfy-llm-x", lambda event: None)
    started = time.monotonic()

    def interrupt() -> None:
        raise Interrupted

    with pytest.raises(Interrupted):
        job.wait(interrupt)
    assert time.monotonic() - started < 2 and job.running()
    release.set()
    job.wait(lambda: None)
    assert len(app.calls) == 1


def test_the_output_manager_is_complete_for_the_installed_client() -> None:
    """Every abstract method of modal's OutputManager is implemented (instantiable)."""
    output = progress_output(lambda event: None, "a")
    output.print("hello\nworld")
    output.add_status_row().finish("done")
    assert output.tail() == "hello\nworld\ndone"


@pytest.mark.parametrize(("name", "created"), [("comfy", True), ("my-typo", False)])
def test_a_missing_default_secret_is_created_empty_a_missing_named_one_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, created: bool
) -> None:
    """Public models deploy without a ``comfy`` secret (review r2 finding 15).

    The client's own classes and signatures; only the two workspace RPCs are
    replaced (no credentials here): ``hydrate`` answers NotFoundError as Modal
    does for a missing secret, ``objects.create`` records what it was asked.
    """
    import inspect

    import modal
    import modal.exception
    from comfy_llm_modal_remote import ModalUnavailableError
    from comfy_llm_modal_remote.client._transport import _require_secret

    parameters = inspect.signature(modal.Secret.objects.create).parameters
    assert {"name", "env_dict", "allow_existing"} <= set(parameters)
    calls: list[tuple[str, dict[str, str], bool]] = []

    class Missing:
        def hydrate(self) -> None:
            raise modal.exception.NotFoundError(f"Secret '{name}' not found")

    monkeypatch.setattr(modal.Secret, "from_name", lambda looked_up: Missing())
    monkeypatch.setattr(
        type(modal.Secret.objects),
        "create",
        lambda self, n, env, *, allow_existing=False: calls.append((n, env, allow_existing)),
    )
    events: list[Any] = []
    if created:
        _require_secret(name, events.append)
        assert calls == [("comfy", {"HF_TOKEN": ""}, True)]
        assert "modal secret create comfy HF_TOKEN=<token> --force" in events[0].message
    else:
        with pytest.raises(ModalUnavailableError, match="COMFY_MODAL_SECRET_NAME"):
            _require_secret(name, events.append)
        assert calls == []
