"""The ModelStager body against the fake Hub, on the strict stand-in's Volume view."""

from __future__ import annotations

from pathlib import Path

import pytest
from comfy_llm_core import ProgressEvent, ProgressStage
from comfy_llm_modal_remote import StageLeases, StageRequest, stage_model
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld._modal_container import StrictVolume
from comfy_llm_testworld.modal_strict import StrictDict

from .conftest import SCRIPTED


def _leases(root: Path) -> StageLeases:
    return StageLeases(StrictDict.from_name("leases", root=root, create_if_missing=True), 60, 5)


def test_commits_only_when_something_changed_and_restages_nothing(
    model_hub: FakeHub, tmp_path: Path
) -> None:
    volume = StrictVolume(tmp_path / "store", tmp_path / "stager")
    events: list[ProgressEvent] = []
    first = stage_model(
        StageRequest("r1", SCRIPTED),
        storage_root=volume.view,
        volume=volume,
        leases=_leases(tmp_path),
        progress=events.append,
    )
    assert first.downloaded and first.manifest_created and first.committed
    assert volume.commits == 1
    assert first.bytes_downloaded > 0
    assert first.profile["execution_target"] == "modal"
    assert first.profile["backend"] == "transformers"
    # What was committed is on the shared store, at the path the engine will be told.
    assert (volume.store / first.snapshot / "config.json").is_file()
    assert ProgressStage.DOWNLOAD in {event.stage for event in events}

    model_hub.clear_requests()
    second = stage_model(
        StageRequest("r2", SCRIPTED),
        storage_root=volume.view,
        volume=volume,
        leases=_leases(tmp_path),
        progress=events.append,
    )
    assert not second.downloaded and not second.manifest_created and not second.committed
    assert volume.commits == 1
    assert second.snapshot == first.snapshot
    # Resolution reads config.json again (metadata); no weight is fetched twice.
    assert [f for f in model_hub.file_requests() if f.endswith(".safetensors")] == []


def test_a_new_manifest_alone_is_committed(model_hub: FakeHub, tmp_path: Path) -> None:
    volume = StrictVolume(tmp_path / "store", tmp_path / "stager")
    first = stage_model(
        StageRequest("r1", SCRIPTED),
        storage_root=volume.view,
        volume=volume,
        leases=_leases(tmp_path),
        progress=print,
    )
    # The weights stay; the manifest is gone (e.g. written by an older app version).
    manifest = volume.view / "profiles" / f"{first.profile['profile_id']}.json"
    assert manifest.is_file()
    manifest.unlink()  # gone from the Volume itself: the stager reloads before staging
    (volume.store / manifest.relative_to(volume.view)).unlink()
    again = stage_model(
        StageRequest("r2", SCRIPTED),
        storage_root=volume.view,
        volume=volume,
        leases=_leases(tmp_path),
        progress=print,
    )
    assert (again.downloaded, again.manifest_created, again.committed) == (False, True, True)
    assert volume.commits == 2


def test_a_lease_file_another_container_left_on_the_volume_does_not_stall_the_stager(
    model_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed holder's background commit published its lease file, fresh and from
    another host: under the Dict lease it is a leftover, never waited on (finding 10)."""
    import json
    import time

    from comfy_llm_staging import snapshot_path

    monkeypatch.setenv("COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS", "5")  # fail fast if waited
    snapshot = snapshot_path(tmp_path / "store", SCRIPTED, model_hub.head(SCRIPTED))
    snapshot.parent.mkdir(parents=True)
    left = {"pid": 1, "host": "another-container", "token": "t", "heartbeat": time.time()}
    snapshot.with_name(snapshot.name + ".lease.json").write_text(json.dumps(left))
    volume = StrictVolume(tmp_path / "store", tmp_path / "stager")
    events: list[ProgressEvent] = []
    staged = stage_model(
        StageRequest("r1", SCRIPTED),
        storage_root=volume.view,
        volume=volume,
        leases=_leases(tmp_path),
        progress=events.append,
    )
    assert staged.downloaded
    assert not [e.message for e in events if "Waiting for another stager" in e.message]
