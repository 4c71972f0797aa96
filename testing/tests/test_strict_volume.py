"""The stand-in Volume never mounts another container's half-copied file."""

from __future__ import annotations

from pathlib import Path

from comfy_llm_testworld._modal_container import StrictVolume


def test_a_reload_skips_a_commit_still_copying_in_the_store(tmp_path: Path) -> None:
    store, view = tmp_path / "store", tmp_path / "view"
    snapshot = store / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").write_bytes(b"whole")
    (snapshot / ".standin-4242-config.json").write_bytes(b"{half")  # another container's
    volume = StrictVolume(store, view)
    volume.reload()
    assert sorted(p.name for p in (view / "snapshots" / "abc").iterdir()) == ["model.safetensors"]
