"""The stand-in Volume: per-container views; a commit publishes only the container's own changes."""

from __future__ import annotations

import time
from pathlib import Path

from comfy_llm_testworld._modal_volume import StrictVolume


def test_a_reload_skips_a_commit_still_copying_in_the_store(tmp_path: Path) -> None:
    store, view = tmp_path / "store", tmp_path / "view"
    snapshot = store / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").write_bytes(b"whole")
    (snapshot / ".standin-4242-config.json").write_bytes(b"{half")  # another container's
    volume = StrictVolume(store, view)
    volume.reload()
    assert sorted(p.name for p in (view / "snapshots" / "abc").iterdir()) == ["model.safetensors"]


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_a_stale_view_never_puts_an_old_file_back_over_a_newer_commit(tmp_path: Path) -> None:
    """A commit publishes the container's own changes, not its whole view (volume.py:492-498)."""
    store = tmp_path / "store"
    _write(store / "models" / "manifest.json", b"old")
    stale = StrictVolume(store, tmp_path / "stale")
    fresh = StrictVolume(store, tmp_path / "fresh")
    _write(fresh.view / "models" / "manifest.json", b"newer, committed by another container")
    fresh.commit()
    _write(stale.view / "models" / "other.json", b"the stale container's own write")
    stale.commit()
    assert (store / "models" / "manifest.json").read_bytes() == (
        b"newer, committed by another container"
    )
    assert (store / "models" / "other.json").read_bytes() == b"the stale container's own write"
    assert (stale.view / "models" / "manifest.json").read_bytes() == (
        b"newer, committed by another container"
    )  # commit() reloads after committing (volume.py:902-904)


def test_a_background_commit_of_a_stale_view_publishes_nothing_old(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _write(store / "lease.json", b"old holder")
    stale = StrictVolume(store, tmp_path / "stale", background_commit_seconds=0.01)
    fresh = StrictVolume(store, tmp_path / "fresh")
    _write(fresh.view / "lease.json", b"new holder, a longer record")
    fresh.commit()
    seen = stale.background_commits
    deadline = time.monotonic() + 60
    while stale.background_commits < seen + 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    stale.close()
    assert stale.background_commits >= seen + 3
    assert (store / "lease.json").read_bytes() == b"new holder, a longer record"


def test_a_commit_publishes_the_containers_deletions_and_renames(tmp_path: Path) -> None:
    """Remove or ``os.rename()``, then ``commit()`` (volume.py:1191-1194): others see it."""
    store = tmp_path / "store"
    _write(store / "snap" / "abc.lock", b"a leftover lease")
    _write(store / "snap" / "abc.partial" / "model.safetensors", b"weights")
    _write(store / "snap" / "abc.partial" / "sub" / "config.json", b"{}")
    other = StrictVolume(store, tmp_path / "other")
    stager = StrictVolume(store, tmp_path / "stager")
    (stager.view / "snap" / "abc.lock").unlink()
    (stager.view / "snap" / "abc.partial").rename(stager.view / "snap" / "abc")
    stager.commit()
    assert sorted(
        p.relative_to(store).as_posix() for p in store.rglob("*") if "standin" not in p.name
    ) == [
        "snap",
        "snap/abc",
        "snap/abc/model.safetensors",
        "snap/abc/sub",
        "snap/abc/sub/config.json",
    ]
    other.reload()  # another container's deletions reach a view on reload
    assert sorted(p.relative_to(other.view).as_posix() for p in other.view.rglob("*")) == [
        "snap",
        "snap/abc",
        "snap/abc/model.safetensors",
        "snap/abc/sub",
        "snap/abc/sub/config.json",
    ]


def test_a_deletion_never_removes_what_the_view_still_changes(tmp_path: Path) -> None:
    """A reload keeps the container's own new file (it is committed, volume.py:914-915)."""
    store = tmp_path / "store"
    _write(store / "a.bin", b"a")
    one = StrictVolume(store, tmp_path / "one")
    two = StrictVolume(store, tmp_path / "two")
    (one.view / "a.bin").unlink()
    one.commit()
    _write(two.view / "b.bin", b"b")
    (two.view / ".standin-99-c.bin").write_bytes(b"a temporary")
    two.reload()
    assert sorted(p.name for p in two.view.iterdir()) == [".standin-99-c.bin", "b.bin"]
    assert sorted(p.name for p in store.iterdir() if not p.name.startswith(".standin-")) == [
        "b.bin"
    ]
    assert not (store / ".standin-99-c.bin").exists()
