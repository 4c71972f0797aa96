"""Modal's clocks and preemption on the strict stand-in (review r2 findings 24, 25).

The kinder stand-in never ends an input, never scales a container down and
fails a killed container's input. Here an input ends at its function's
``timeout`` (``FunctionTimeoutError``), an idle container goes after its
window, and a preempted input runs again on another container; each rule
cites the modal 1.6.4 client in ``comfy_llm_testworld._modal_host`` /
``modal_strict``. The product tests say what the user meets under them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ProgressEvent
from comfy_llm_modal_remote import Dispatcher, RemoteTimeoutError, caption_fan_out
from comfy_llm_testworld import FakeHub, long_prefill, timed_gpu

from .conftest import SCRIPTED
from .test_dispatch import _run
from .test_fanout import Recorder, _images, _job

pytestmark = pytest.mark.slow

_ENGINE_LIMIT = 3.0
"""Real seconds the engine's 3600 s input limit takes here (the stager's 3 h: 9 s)."""


def _timed(make_transport: Any, **options: Any) -> Any:
    return make_transport(platform_seconds=_ENGINE_LIMIT / 3600, **options)


def _wait_for(predicate: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the state never came"
        time.sleep(0.02)


# -- input timeouts (finding 24) -----------------------------------------------------------
def test_a_request_past_modal_time_limit_is_one_line_naming_the_limit(
    model_hub: FakeHub, make_transport: Any
) -> None:
    """``FunctionTimeoutError`` is a ``TimeoutError``: it must not read as "no network"."""
    transport = _timed(
        make_transport,
        backend_factory=long_prefill.FACTORY,
        engine_env={long_prefill.MARKER_ENV: "1"},  # holds 5 s: past the limit
    )
    with pytest.raises(RemoteTimeoutError, match="3600 s time limit") as raised:
        Dispatcher(transport).run(_run(SCRIPTED))
    assert "\n" not in str(raised.value) and "max_new_tokens" not in str(raised.value)
    generate = [call for kind, _, call in transport.calls if kind == "generate"]
    assert len(generate) == 1 and generate[0].timed_out  # not retried elsewhere


def test_a_chunk_past_modal_time_limit_is_named_failed_not_run_again(
    model_hub: FakeHub, make_transport: Any, tmp_path: Path
) -> None:
    """A retry would run (and bill) as long again on another container."""
    transport = _timed(
        make_transport, backend_factory=timed_gpu.FACTORY, engine_env=timed_gpu.env(30.0, 0.0)
    )
    recorder = Recorder()
    report = caption_fan_out(
        Dispatcher(transport), _job(workers=1, chunk_images=2), _images(tmp_path, 2), recorder
    )
    assert report.chunks_retried == 0 and report.captioned == 0
    assert [indices for indices, _ in recorder.failures] == [[0, 1]]
    assert "time limit" in recorder.failures[0][1]
    assert len([kind for kind, _, _ in transport.calls if kind == "chunk"]) == 1


# -- scaledown after the idle window (finding 24) ------------------------------------------
def test_an_idle_container_scales_down_and_the_next_request_starts_cold(
    model_hub: FakeHub, make_transport: Any
) -> None:
    """The engine's 600 s window is 10 s here (its 3600 s limit 60 s: a cold load fits)."""
    transport = make_transport(platform_seconds=60 / 3600)
    dispatcher = Dispatcher(transport)
    first = dispatcher.run(_run(SCRIPTED))
    _wait_for(lambda: any(c.key != "__stager__" for c in transport.scaled_down))
    second = dispatcher.run(_run(SCRIPTED))
    assert first.response == second.response
    assert second.metadata.to_dict()["cache_status"] == "cold"  # loaded again, and says so
    engines = {call.container.pid for kind, _, call in transport.calls if kind == "generate"}
    assert len(engines) == 2


# -- preemption replay (finding 25) --------------------------------------------------------
def test_a_preempted_request_runs_again_and_the_user_is_told_why(
    model_hub: FakeHub, make_transport: Any
) -> None:
    transport = make_transport(
        backend_factory=long_prefill.FACTORY, engine_env={long_prefill.MARKER_ENV: "1"}
    )
    preempted: list[Any] = []

    def progress(event: ProgressEvent) -> None:
        for kind, info, call in transport.calls:
            if kind == "generate" and call.started.is_set() and not preempted:
                _wait_for(lambda c=call: c.container is not None)
                home = Path(call.container.volume_view).parent
                _wait_for(lambda h=home: (h / "in-prefill").exists())
                preempted.append(transport.preempt(info["affinity_key"]))

    events: list[ProgressEvent] = []
    result = Dispatcher(transport).run(
        _run(SCRIPTED), progress=lambda e: (events.append(e), progress(e))
    )
    assert result.response.endswith("answer")
    generate = next(call for kind, _, call in transport.calls if kind == "generate")
    assert generate.attempts == 2 and preempted[0].process.wait(30) is not None
    messages = [e.message for e in events]
    told = next((i for i, m in enumerate(messages) if "preempted" in m), None)
    assert told is not None, messages
    assert any(e.stage.value == "load" for e in events[told:])  # it started over, after saying so


def test_a_preempted_chunk_is_captioned_once_and_not_retried_by_the_fan_out(
    model_hub: FakeHub, make_transport: Any, tmp_path: Path
) -> None:
    transport = make_transport(backend_factory=timed_gpu.FACTORY, engine_env=timed_gpu.env(2.0, 0))
    preempted: list[Any] = []

    def progress(event: ProgressEvent) -> None:
        for kind, info, call in transport.calls:
            if kind == "chunk" and call.started.is_set() and not preempted:
                preempted.append(transport.preempt(info["affinity_key"]))

    recorder = Recorder()
    report = caption_fan_out(
        Dispatcher(transport),
        _job(workers=1, chunk_images=2),
        _images(tmp_path, 2),
        recorder,
        progress=progress,
    )
    assert preempted and recorder.captioned() == [0, 1] and not recorder.failures
    assert report.chunks_retried == 0
    chunk = next(call for kind, _, call in transport.calls if kind == "chunk")
    assert chunk.attempts == 2
