"""The wire carries plain data only: errors by allow-listed class name and fields."""

from __future__ import annotations

import json
import queue
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ProgressEvent, ProgressStage
from comfy_llm_modal_remote import RemoteExecutionError, WorkerUnsafeError
from comfy_llm_modal_remote.wire._wire import (
    LIVE_TEXT_BYTES,
    EventSender,
    error_envelope,
    unwrap,
)
from comfy_llm_profiles.errors import ModelNotFoundError


def _plain_only(value: Any) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str)
            _plain_only(item)
    elif isinstance(value, list):
        for item in value:
            _plain_only(item)
    else:
        assert value is None or isinstance(value, str | int | float | bool), repr(value)


def _through_json(envelope: dict[str, Any]) -> dict[str, Any]:
    _plain_only(envelope)
    loaded: dict[str, Any] = json.loads(json.dumps(envelope))
    return loaded


def test_a_comfy_llm_error_crosses_as_class_name_and_fields() -> None:
    original = WorkerUnsafeError("memory stuck.", {"promoted": True, "prompt_ids": ["a"]})
    envelope = _through_json(error_envelope(original))
    assert envelope["error"]["class"] == "comfy_llm_modal_remote.WorkerUnsafeError"
    with pytest.raises(WorkerUnsafeError) as raised:
        unwrap(envelope)
    assert str(raised.value) == str(original)
    assert raised.value.promotion_state == {"promoted": True, "prompt_ids": ["a"]}
    assert raised.value.reason == "memory stuck."


def test_attributes_keep_their_values_and_the_action() -> None:
    from comfy_llm_core import ErrorAction
    from comfy_llm_profiles.errors import HubAccessError

    original = HubAccessError(
        "refused",
        repository="owner/repo",
        revision="main",
        kind="forbidden",
        endpoint="https://x",
        status=403,
        url="https://x/api",
        token_provided=True,
    )
    original.action = ErrorAction.RETRY  # an instance may say what only its raise site knows
    with pytest.raises(HubAccessError) as rebuilt:
        unwrap(_through_json(error_envelope(original)))
    assert vars(rebuilt.value) == {
        k: (v.value if isinstance(v, ErrorAction) else v) for k, v in vars(original).items()
    }
    assert rebuilt.value.action is original.action


def test_an_import_error_keeps_its_slots() -> None:
    from comfy_llm_backend_cuda import EngineNotInstalledError

    original = EngineNotInstalledError("vllm", "vllm", "no vllm")
    with pytest.raises(EngineNotInstalledError) as raised:
        unwrap(_through_json(error_envelope(original)))
    assert raised.value.name == "vllm" and raised.value.engine == "vllm"


def test_paths_and_tuples_become_plain_values() -> None:
    original = ModelNotFoundError(
        "not found",
        repository="tiny/missing",
        revision="main",
        kind="repo_not_found",
        endpoint="https://x",
    )
    original.extra = (Path("/a/b"), {"k": (1, 2)})  # type: ignore[attr-defined]
    with pytest.raises(ModelNotFoundError) as raised:
        unwrap(_through_json(error_envelope(original)))
    assert raised.value.extra == ["/a/b", {"k": [1, 2]}]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "qualified",
    [
        "builtins.ValueError",  # not a comfy-llm package
        "os.system",  # never imported: not allow-listed
        "comfy_llm_profiles.NoSuchError",  # allow-listed package, no such class
        "comfy_llm_core.ProgressEvent",  # exists, not an error
        "comfy_llm_backend_mlx.MlxBackendError",  # not on the worker's list
        "comfy_llm_profiles.errors.__class__",
    ],
)
def test_anything_else_is_a_generic_remote_error_with_the_message(qualified: str) -> None:
    envelope = {
        "version": 2,
        "error": {"class": qualified, "message": "it broke", "fields": {}, "slots": {}},
    }
    with pytest.raises(RemoteExecutionError) as raised:
        unwrap(envelope)
    assert raised.value.remote_class == qualified and raised.value.remote_message == "it broke"


def test_a_foreign_exception_becomes_a_remote_error() -> None:
    with pytest.raises(RemoteExecutionError, match=r"builtins\.KeyError"):
        unwrap(_through_json(error_envelope(KeyError("x"))))


def test_the_envelope_module_holds_no_pickle() -> None:
    import comfy_llm_modal_remote.wire._wire as wire

    source = Path(wire.__file__).read_text()
    assert "import pickle" not in source and "pickle.loads" not in source


class _FullChannel:
    """A partition that is full: Modal's non-blocking put raises queue.Full (queue.py:719)."""

    def __init__(self, capacity: int) -> None:
        self.items: list[dict[str, Any]] = []
        self.capacity = capacity

    def put_many(self, items: Any) -> None:
        if len(self.items) + len(items) > self.capacity:
            raise queue.Full("partition full")
        self.items.extend(items)


def test_a_full_partition_drops_and_counts_events_instead_of_blocking() -> None:
    channel = _FullChannel(capacity=2)
    sender = EventSender(channel, interval=0.0)
    for index in range(5):
        sender(ProgressEvent(stage=ProgressStage.LOAD, message=f"step {index}"))
    sender.flush()
    assert [item["message"] for item in channel.items] == ["step 0", "step 1"]
    assert sender.dropped == 3


def test_a_long_answer_sends_only_its_tail() -> None:
    channel = _FullChannel(capacity=100)
    sender = EventSender(channel, interval=0.0)
    text = "é" * 50_000
    sender(ProgressEvent(stage=ProgressStage.GENERATE, value=1, text=text))
    (item,) = channel.items
    assert len(item["text"].encode()) <= LIVE_TEXT_BYTES
    assert item["text"].startswith("\u2026") and text.endswith(item["text"][1:])
    # 5,000 such events (a partition's item limit) stay under its 64 MiB (queue.py:294-295).
    assert 5000 * len(json.dumps(item, ensure_ascii=False).encode()) < 64 * 1024 * 1024


def test_the_modal_channel_puts_without_blocking_and_with_a_ttl() -> None:
    import inspect

    import modal
    from comfy_llm_modal_remote.worker._container import PROGRESS_TTL_SECONDS, ModalQueueChannel

    calls: list[dict[str, Any]] = []

    class RecordingQueue:
        def put_many(
            self, vs: list[Any], block: bool = True, timeout: Any = None, **kw: Any
        ) -> None:
            calls.append({"block": block, "timeout": timeout, **kw})

    ModalQueueChannel(RecordingQueue(), "p" * 32).put_many([{"stage": "load"}])
    assert calls == [
        {
            "block": False,
            "timeout": None,
            "partition": "p" * 32,
            "partition_ttl": PROGRESS_TTL_SECONDS,
        }
    ]
    # The keywords are modal 1.6's own (queue.py:643-651).
    parameters = inspect.signature(modal.Queue.put_many).parameters
    assert {"block", "partition", "partition_ttl"} <= set(parameters)
