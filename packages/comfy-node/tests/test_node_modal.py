"""The node with run_on_modal on, end to end through the dispatcher.

The transport is the strict Modal stand-in: the real ModelStager and
RemoteEngine bodies run in container processes that see only the image's
environment, and every request, event, answer and error crosses the wire
as data. No Modal credentials are set.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from comfy_llm_core import install_command
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.modal_strict import StrictTransport

from .conftest import node_raises

SCRIPTED = "tiny/smolvlm-scripted"


def _transports(root: Path, **options: Any) -> Iterator[list[StrictTransport]]:
    from comfy_llm_modal_remote import use_transport

    made: list[StrictTransport] = []

    def factory(name: str, directory: Path) -> StrictTransport:
        made.append(StrictTransport(name, directory, root=root, **options))
        return made[-1]

    use_transport(factory)
    yield made
    use_transport(None)
    for transport in made:
        transport.close()


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[list[StrictTransport]]:
    yield from _transports(tmp_path / "modal")


@pytest.fixture
def gated_standin(tmp_path: Path) -> Iterator[list[StrictTransport]]:
    """Engines gated per container: a container's second request holds until opened."""
    from comfy_llm_testworld import gated_gpu

    yield from _transports(tmp_path / "modal", backend_factory=gated_gpu.HOME_FACTORY)


def _execute(comfyui: Path, **kwargs: Any) -> tuple[str, dict[str, Any], str]:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    ModalLLMNode.hidden = io.HiddenHolder(unique_id="9")
    kwargs.setdefault("temperature", 0.0)
    kwargs.setdefault("reserve_free_vram_gb", 0.0)
    kwargs.setdefault("local_reserve_free_memory_gb", 0.0)
    response, metadata, reasoning = ModalLLMNode.execute(**kwargs).args
    return response, json.loads(metadata), reasoning


@pytest.mark.slow
def test_run_on_modal_answers_like_the_local_run(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    standin: list[StrictTransport],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import comfy.utils
    from server import PromptServer

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    image = np.random.default_rng(0).random((1, 24, 32, 3), dtype=np.float32)
    common = {"prompt": "What is this?", "model_profile": SCRIPTED, "images": image}
    local = _execute(comfyui, **common)
    comfy.utils.updates.clear()
    PromptServer.instance.progress_texts.clear()
    remote = _execute(comfyui, **common, run_on_modal=True, modal_gpu="H100")

    assert (remote[0], remote[2]) == (local[0], local[2])
    local_meta, remote_meta = local[1], remote[1]
    for key in ("output_tokens", "reasoning_tokens", "finish_reason", "image_count", "backend"):
        assert remote_meta[key] == local_meta[key], key
    assert remote_meta["execution_target"] == "modal"
    assert remote_meta["modal_gpu"] == "H100"
    assert remote_meta["modal_retry_count"] == 0
    assert remote_meta["modal_staging_downloaded"] is True
    assert remote_meta["modal_app_name"].startswith("comfy-llm-")
    assert "gpu_free_after_gib" in remote_meta and "comfyui_managed_models" in remote_meta
    # The GPU call went to the chosen GPU, after the stager.
    (transport,) = standin
    assert [(kind, info.get("gpu")) for kind, info, _ in transport.calls] == [
        ("stage", None),
        ("generate", "H100"),
    ]
    # Remote progress reached ComfyUI's bar and the node's live text.
    assert any(node_id == "9" for node_id, _, _ in comfy.utils.updates)
    texts = [text for node_id, text in PromptServer.instance.progress_texts if node_id == "9"]
    assert any(text.startswith("Download") for text in texts)
    assert any(text.startswith("Loading") for text in texts)
    assert texts[-1].endswith("answer")


@pytest.mark.slow
def test_cancel_in_comfyui_cancels_the_remote_call(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    gated_standin: list[StrictTransport],
    tmp_path: Path,
) -> None:
    import threading
    import time

    import comfy.model_management as mm
    from comfy_llm_testworld import gated_gpu

    # One model throughout: a warm container asked for a model it has not staged
    # reloads its Volume view, which Modal refuses while a resident model holds
    # files open (the worker retires; test_strict_modal covers that path).
    other = "tiny/smolvlm"
    _execute(comfyui, prompt="warm", model_profile=other, run_on_modal=True, max_new_tokens=2)
    (transport,) = gated_standin
    before = len(transport.calls)
    # The container's next request holds at its GPU step until the gate opens, so the
    # generation cannot end before the Cancel arrives, however loaded the machine.
    homes = tmp_path / "modal" / "containers"
    pressed = threading.Event()

    def press_cancel_once_generation_holds() -> None:  # as POST /interrupt does
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            calls = transport.calls[before:]
            if calls and any(gated_gpu.held(home / "gate") for home in homes.iterdir()):
                break
            time.sleep(0.01)
        mm.interrupt_current_processing(True)
        pressed.set()

    presser = threading.Thread(target=press_cancel_once_generation_holds)
    presser.start()
    with pytest.raises(mm.InterruptProcessingException):
        _execute(
            comfyui, prompt="long", model_profile=other, run_on_modal=True, max_new_tokens=4000
        )
    presser.join()
    assert pressed.is_set()
    kind, _, call = transport.calls[-1]
    call.join()
    assert kind == "generate"
    assert call.terminated  # cancelled while it held: it never answered
    # The worker is free: the next request is served warm at once, in the same container.
    for home in homes.iterdir():
        if (home / "gate").is_dir():
            gated_gpu.open_gate(home / "gate")
    _, metadata, _ = _execute(
        comfyui, prompt="again", model_profile=other, run_on_modal=True, max_new_tokens=2
    )
    assert metadata["cache_status"] == "warm" and metadata["modal_retry_count"] == 0
    assert transport.calls[-1][2].container is call.container


def test_without_credentials_one_clear_error_before_inputs(
    model_hub: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from comfy_llm_modal_remote import ModalUnavailableError, use_transport
    from server import PromptServer

    use_transport(None)
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    PromptServer.instance.progress_texts.clear()
    bad_image = object()  # preparing it would fail: it must never be prepared
    with node_raises(ModalUnavailableError, match="modal token new") as raised:
        _execute(comfyui, prompt="hi", model_profile=SCRIPTED, images=bad_image, run_on_modal=True)
    assert isinstance(raised.value, ModalUnavailableError)
    assert raised.value.missing == "credentials"
    assert model_hub.requests == []
    # the status is replaced at once, then says what stopped the run: no stage began
    assert PromptServer.instance.progress_texts == [
        ("9", "Starting"),
        ("9", f"Stopped: {raised.value}"),
    ]


def test_without_the_modal_package_one_clear_error_before_inputs(
    model_hub: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from comfy_llm_modal_remote import ModalUnavailableError, use_transport
    from server import PromptServer

    use_transport(None)
    monkeypatch.setitem(sys.modules, "modal", None)  # as if never installed
    monkeypatch.setitem(sys.modules, "modal.config", None)
    PromptServer.instance.progress_texts.clear()
    bad_image = object()  # preparing it would fail: it must never be prepared
    with node_raises(ModalUnavailableError, match=re.escape(install_command("modal"))) as raised:
        _execute(comfyui, prompt="hi", model_profile=SCRIPTED, images=bad_image, run_on_modal=True)
    assert isinstance(raised.value, ModalUnavailableError)
    assert raised.value.missing == "package"
    assert "modal token new" in str(raised.value)
    assert model_hub.requests == []
    # the status is replaced at once, then says what stopped the run: no stage began
    assert PromptServer.instance.progress_texts == [
        ("9", "Starting"),
        ("9", f"Stopped: {raised.value}"),
    ]
