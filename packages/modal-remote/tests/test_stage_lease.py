"""Two installations (two apps) on one weight Volume stage a snapshot once (review finding 10).

Each installation has its own stager (``max_containers=1`` serializes only
one app's), so the lease lives in a named Dict both reach. The Hub holds the
weight download at a gate, so every step waits on an event, not a sleep.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_modal_remote import ModalSettings, StageRequest, StageResult
from comfy_llm_modal_remote.wire._settings import STAGE_LEASE_ENV, STAGE_LEASE_RENEW_ENV
from comfy_llm_modal_remote.wire._wire import unwrap
from comfy_llm_staging import require_completed_snapshot
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import build_checkpoint_files
from comfy_llm_testworld.modal_strict import STAGER_KEY, StrictCall, StrictDict, StrictTransport

from .conftest import SCRIPTED

pytestmark = pytest.mark.slow

WAITING = "Waiting for another installation staging"
_OUTER_SECONDS = 300.0


@pytest.fixture
def installations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[StrictTransport, StrictTransport]]:
    """Two apps with different names sharing one store root (one Volume, one Dict space).

    The gate holds the first download until the second stager waits, which on a
    loaded box can outlast huggingface_hub's 10 s read timeout: its resume would
    count as a second download. The stagers' secret carries HF_* variables.
    """
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "600")
    made = [
        StrictTransport(name, tmp_path / name, root=tmp_path / "modal")
        for name in ("comfy-llm-first", "comfy-llm-second")
    ]
    yield made[0], made[1]
    for transport in made:
        transport.close()


def _leases(tmp_path: Path) -> StrictDict:
    name = ModalSettings.from_env().stage_lease_dict_name
    return StrictDict.from_name(name, root=tmp_path / "modal", create_if_missing=True)


def _stage(transport: StrictTransport, request_id: str) -> StrictCall:
    return transport.start_stage(StageRequest(request_id, SCRIPTED).to_wire())


def _wait_for_message(call: StrictCall, text: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + _OUTER_SECONDS
    while not any(text in str(event.get("message")) for event in seen):
        messages = [event.get("message") for event in seen]
        assert not call.done() and time.monotonic() < deadline, messages
        seen.extend(call.events(1.0))
    return seen


def _answer(call: StrictCall) -> StageResult:
    call.join(_OUTER_SECONDS)
    assert call.done(), "the stage did not end"
    return StageResult.from_wire(unwrap(call.outcome()))


def _weight_requests(hub: FakeHub) -> list[str]:
    return [f for f in hub.file_requests() if f.endswith(".safetensors")]


def _second_waits_on_first(
    model_hub: FakeHub, first_app: StrictTransport, second_app: StrictTransport
) -> tuple[Any, StrictCall, StrictCall]:
    """The first installation downloading (held at its weights), the second waiting on the lease."""
    gate = model_hub.gate(".safetensors")
    first = _stage(first_app, "stage-first")
    assert gate.reached.wait(_OUTER_SECONDS), "the first stager never reached the weights"
    second = _stage(second_app, "stage-second")
    _wait_for_message(second, WAITING)
    return gate, first, second


def test_two_installations_on_one_volume_download_a_snapshot_once(
    model_hub: FakeHub,
    installations: tuple[StrictTransport, StrictTransport],
    tmp_path: Path,
) -> None:
    first_app, second_app = installations
    gate, first, second = _second_waits_on_first(model_hub, first_app, second_app)
    gate.release()
    results = [_answer(first), _answer(second)]
    assert [r.downloaded for r in results] == [True, False]
    assert results[0].snapshot == results[1].snapshot
    weights = _weight_requests(model_hub)
    assert weights and len(weights) == len(set(weights)), weights
    assert _leases(tmp_path).keys() == []  # released, beat included


def test_a_killed_holder_is_taken_over_after_its_lease_expires(
    model_hub: FakeHub,
    installations: tuple[StrictTransport, StrictTransport],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from modal.exception import RemoteError

    monkeypatch.setenv(STAGE_LEASE_ENV, "2")  # baked into both apps' images at deploy
    monkeypatch.setenv(STAGE_LEASE_RENEW_ENV, "0.25")
    first_app, second_app = installations
    gate, first, second = _second_waits_on_first(model_hub, first_app, second_app)
    first_app.kill(STAGER_KEY)  # the holder's container dies mid-download
    first.join(_OUTER_SECONDS)
    with pytest.raises(RemoteError):
        first.outcome()
    gate.release()
    _wait_for_message(second, "Another installation stopped staging")
    staged = _answer(second)
    assert staged.downloaded
    # One snapshot, whole: every file the Hub serves, byte for byte, under a valid marker.
    store = tmp_path / "modal" / "volume"
    snapshot = require_completed_snapshot(store / staged.snapshot)
    expected = build_checkpoint_files("smolvlm", scripted=True)
    held = {
        path.relative_to(snapshot).as_posix(): path.read_bytes()
        for path in snapshot.rglob("*")
        if path.is_file() and path.relative_to(snapshot).as_posix() in expected
    }
    weights = {name for name in expected if name.endswith(".safetensors")}
    assert weights and weights <= held.keys()
    assert all(held[name] == expected[name] for name in held)
    # Only the takeover record of the dead holder remains (left to the Dict's idle expiry).
    left = _leases(tmp_path).keys()
    assert [key.split("#")[1] for key in left] == ["takeover"], left


def test_a_cancel_while_waiting_on_the_lease_ends_cleanly(
    model_hub: FakeHub,
    installations: tuple[StrictTransport, StrictTransport],
    tmp_path: Path,
) -> None:
    from modal.exception import RemoteError

    first_app, second_app = installations
    gate, first, second = _second_waits_on_first(model_hub, first_app, second_app)
    second.cancel()
    second.join(_OUTER_SECONDS)
    with pytest.raises(RemoteError, match=r"^$"):  # cancelled: TERMINATED
        second.outcome()
    assert second.terminated
    gate.release()
    assert _answer(first).downloaded
    # The cancelled installation's stager serves on and finds the snapshot staged.
    again = _answer(_stage(second_app, "stage-again"))
    assert not again.downloaded
    weights = _weight_requests(model_hub)
    assert weights and len(weights) == len(set(weights)), weights
    assert _leases(tmp_path).keys() == []


def test_installations_whose_clocks_disagree_still_download_once(
    model_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first host's clock is 5 minutes behind: its lease reads as expired (finding 23).

    Today's default lease is 120 s: on a deadline alone the second stager
    would take over a holder that is downloading, and download again.
    """
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "600")
    first_app, second_app = (
        StrictTransport(name, tmp_path / name, root=tmp_path / "modal", clock_offset_seconds=offset)
        for name, offset in (("comfy-llm-first", -300.0), ("comfy-llm-second", 0.0))
    )
    try:
        gate, first, second = _second_waits_on_first(model_hub, first_app, second_app)
        _wait_for_message(second, WAITING)  # a second poll: still waiting, not taking over
        gate.release()
        results = [_answer(first), _answer(second)]
        assert [r.downloaded for r in results] == [True, False]
        weights = _weight_requests(model_hub)
        assert weights and len(weights) == len(set(weights)), weights
    finally:
        first_app.close()
        second_app.close()
