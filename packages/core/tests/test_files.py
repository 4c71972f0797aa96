"""``write_atomically``: the one atomic file writer (mode, links, races, failures)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from comfy_llm_core import write_atomically


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_file_is_0644_minus_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        write_atomically(tmp_path / "a.txt", "caption\n")
        os.umask(0o077)
        write_atomically(tmp_path / "b.txt", "caption\n")
    finally:
        os.umask(previous)
    assert _mode(tmp_path / "a.txt") == 0o644
    assert _mode(tmp_path / "b.txt") == 0o600
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "caption\n"


def test_replaces_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "m.json"
    target.write_text("old", encoding="utf-8")
    assert write_atomically(target, b"new") is True
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_keep_existing_leaves_the_winner(tmp_path: Path) -> None:
    target = tmp_path / "m.json"
    target.write_text("first", encoding="utf-8")
    assert write_atomically(target, "second", keep_existing=True) is False
    assert target.read_text(encoding="utf-8") == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_a_symlink_target_is_never_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep", encoding="utf-8")
    link = tmp_path / "link.txt"
    link.symlink_to(outside)
    with pytest.raises(OSError) as caught:
        write_atomically(link, "x")
    assert caught.value.errno == errno.ELOOP
    assert outside.read_text(encoding="utf-8") == "keep"


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "m.json"
    target.write_text("old", encoding="utf-8")

    class Exploding(str):
        def encode(self, *args: object, **kwargs: object) -> bytes:  # type: ignore[override]
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError):
        write_atomically(target, Exploding("new"))
    assert target.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]
