"""Leases: one download per snapshot across threads and processes, and recovery."""

from __future__ import annotations

import collections
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from comfy_llm_core import ProgressEvent
from comfy_llm_staging import (
    StagingLeaseTimeoutError,
    require_completed_snapshot,
    snapshot_path,
    stage_snapshot,
)
from huggingface_hub._local_folder import get_local_download_paths

STAGER = r"""
import json, sys
from pathlib import Path
from comfy_llm_staging import stage_snapshot

waits = []
def progress(event):
    if event.indeterminate and event.message.startswith("Waiting"):
        waits.append(event.message)

staged = stage_snapshot(sys.argv[1], sys.argv[2], storage_root=Path(sys.argv[3]), progress=progress)
print(json.dumps({"downloaded": staged.downloaded, "path": str(staged.path), "waits": len(waits)}))
"""


def _spawn_stager(repository: str, revision: str, root: Path) -> subprocess.Popen[str]:
    """Start a stager in a fresh interpreter; it inherits HF_ENDPOINT etc. from hf_env."""
    return subprocess.Popen(
        [sys.executable, "-c", STAGER, repository, revision, str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> dict:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _lease_file(world) -> Path:
    canonical = snapshot_path(world.root, world.repository, world.revision)
    return canonical.with_name(f"{world.revision}.lease.json")


def _write_lease(path: Path, *, pid: int, host: str, heartbeat: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"pid": pid, "host": host, "token": "someone-else", "heartbeat": heartbeat}
    path.write_text(json.dumps(record))


def test_waiter_gives_up_after_the_lease_timeout(world) -> None:
    lease = _lease_file(world)
    _write_lease(lease, pid=os.getpid(), host=socket.gethostname(), heartbeat=time.time() + 60)
    events: list[ProgressEvent] = []
    started = time.monotonic()
    with pytest.raises(StagingLeaseTimeoutError) as caught:
        stage_snapshot(
            world.repository,
            world.revision,
            storage_root=world.root,
            progress=events.append,
            lease_timeout_seconds=0.6,
        )
    assert 0.5 <= time.monotonic() - started < 10
    error = caught.value
    assert isinstance(error, TimeoutError)
    assert error.holder is not None and error.holder["pid"] == os.getpid()
    assert "COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS" in str(error)
    waiting = [e for e in events if e.message.startswith("Waiting for another stager")]
    assert waiting and all(e.indeterminate for e in waiting)
    assert world.hub.requests == []  # a waiter never talks to the Hub


def test_lease_timeout_comes_from_the_environment(world, monkeypatch) -> None:
    _write_lease(
        _lease_file(world), pid=os.getpid(), host=socket.gethostname(), heartbeat=time.time()
    )
    monkeypatch.setenv("COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS", "0.3")
    with pytest.raises(StagingLeaseTimeoutError, match=r"limit 0\.3 s"):
        stage_snapshot(world.repository, world.revision, storage_root=world.root)


def test_lease_of_an_exited_process_is_taken_over(world) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    _write_lease(
        _lease_file(world), pid=int(gone.stdout), host=socket.gethostname(), heartbeat=time.time()
    )
    events: list[ProgressEvent] = []
    staged = stage_snapshot(
        world.repository, world.revision, storage_root=world.root, progress=events.append
    )
    assert staged.downloaded is True
    assert not any(e.message.startswith("Waiting") for e in events)
    assert not _lease_file(world).exists()


def test_lease_with_an_old_heartbeat_is_taken_over(world) -> None:
    _write_lease(_lease_file(world), pid=1, host="another-host", heartbeat=time.time() - 3600)
    staged = stage_snapshot(
        world.repository, world.revision, storage_root=world.root, lease_timeout_seconds=5
    )
    assert staged.downloaded is True


def test_two_threads_download_once(world) -> None:
    world.hub.inject_fault("HEAD", "model.safetensors", delay=1.0)
    results = []

    def stage() -> None:
        results.append(stage_snapshot(world.repository, world.revision, storage_root=world.root))

    threads = [threading.Thread(target=stage) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(r.downloaded for r in results) == [False, True]
    assert results[0].path == results[1].path
    counts = collections.Counter(world.hub.file_requests("GET"))
    assert counts == dict.fromkeys(world.files, 1)


def test_two_processes_download_each_file_once(world, make_files) -> None:
    files = make_files(weight_bytes=5 * 1024 * 1024, seed=3)
    sha = world.hub.add_repo("acme/five-mb", files)
    # hold the first stager inside its download so the second must wait on the lease
    # (long enough that a second interpreter, slow to import on a loaded machine, still sees it)
    world.hub.inject_fault("HEAD", "model.safetensors", delay=10.0)
    first = _spawn_stager("acme/five-mb", sha, world.root)
    world.hub.wait_for_request(lambda r: r.path.startswith("/api/models/acme/five-mb"), 60)
    second = _spawn_stager("acme/five-mb", sha, world.root)
    results = [_finish(first), _finish(second)]
    assert [r["downloaded"] for r in results] == [True, False]
    assert results[1]["waits"] > 0
    assert results[0]["path"] == results[1]["path"]
    counts = collections.Counter(world.hub.file_requests("GET", repo_id="acme/five-mb"))
    assert counts == dict.fromkeys(files, 1)
    info_requests = [r for r in world.hub.requests if r.path.startswith("/api/models/")]
    assert len([r for r in info_requests if "/revision/" in r.path]) == 1
    assert require_completed_snapshot(Path(results[0]["path"]))


def test_stager_killed_mid_download_is_followed_by_one_that_completes(world, make_files) -> None:
    files = make_files(weight_bytes=5 * 1024 * 1024, seed=4)
    sha = world.hub.add_repo("acme/killed", files)
    canonical = snapshot_path(world.root, "acme/killed", sha)
    partial = canonical.with_name(f"{sha}.partial")
    lease = canonical.with_name(f"{sha}.lease.json")
    # send part of the weights, then hang: the stager is mid-download when killed
    world.hub.inject_fault("GET", "model.safetensors", cut_after_bytes=64 * 1024, delay=60)
    victim = _spawn_stager("acme/killed", sha, world.root)
    try:
        world.hub.wait_for_request(
            lambda r: r.method == "GET" and r.filename == "model.safetensors", 60
        )
        small = [name for name in files if name != "model.safetensors"]
        # Done as a resume judges it: huggingface_hub moves a file into place, then
        # writes its download metadata (file_download.py:1505, 1518); killed between
        # the two (a loaded machine), the next stager fetches that file again.
        done = [get_local_download_paths(partial, name).metadata_path for name in small]
        deadline = time.monotonic() + 30
        while not all(path.is_file() for path in done):
            assert time.monotonic() < deadline, "the first stager never fetched the small files"
            time.sleep(0.05)
        assert json.loads(lease.read_text())["pid"] == victim.pid
    finally:
        victim.kill()
        victim.communicate(timeout=30)

    world.hub.clear_requests()
    staged = stage_snapshot("acme/killed", sha, storage_root=world.root, lease_timeout_seconds=30)
    assert staged.downloaded is True
    assert world.hub.file_requests("GET") == ["model.safetensors"]  # the rest was resumed
    assert (staged.path / "model.safetensors").read_bytes() == files["model.safetensors"]
    assert require_completed_snapshot(staged.path, repository="acme/killed", revision=sha)
    assert not lease.exists()
    assert not partial.exists()
    assert list(staged.path.rglob("*.incomplete")) == []


def test_lease_heartbeats_and_is_released_only_by_its_owner(tmp_path: Path, monkeypatch) -> None:
    from comfy_llm_staging import _lease, _settings

    monkeypatch.setattr(_settings, "LEASE_HEARTBEAT_SECONDS", 0.05)
    snapshot = tmp_path / "llm_models" / "repo-x" / ("a" * 40)
    held = _lease.acquire_lease(
        snapshot, timeout_seconds=5, is_complete=lambda: False, progress=lambda e: None
    )
    assert held is not None
    first = json.loads(held.path.read_text())
    assert first["pid"] == os.getpid()
    assert first["host"] == socket.gethostname()
    deadline = time.monotonic() + 5
    while json.loads(held.path.read_text())["heartbeat"] == first["heartbeat"]:
        assert time.monotonic() < deadline, "the heartbeat never advanced"
        time.sleep(0.02)
    # another stager took the lease over: ours is lost and release leaves theirs alone
    _write_lease(held.path, pid=os.getpid(), host="elsewhere", heartbeat=time.time())
    assert not held.still_held()
    held.release()
    assert json.loads(held.path.read_text())["host"] == "elsewhere"


def test_waiter_returns_without_lease_once_the_snapshot_is_complete(tmp_path: Path) -> None:
    from comfy_llm_staging import _lease

    snapshot = tmp_path / "llm_models" / "repo-x" / ("b" * 40)
    snapshot.parent.mkdir(parents=True)
    _write_lease(
        snapshot.with_name(snapshot.name + ".lease.json"),
        pid=os.getpid(),
        host=socket.gethostname(),
        heartbeat=time.time(),
    )
    checks = []

    def complete_on_second_look() -> bool:
        checks.append(1)
        return len(checks) >= 2

    outcome = _lease.acquire_lease(
        snapshot,
        timeout_seconds=10,
        is_complete=complete_on_second_look,
        progress=lambda event: None,
    )
    assert outcome is None
    assert len(checks) == 2
