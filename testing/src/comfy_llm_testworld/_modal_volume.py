"""One stand-in container's view of a Modal Volume, under the modal 1.6.4 client's rules.

Each rule cites ``site-packages/modal``:

* The container sees the Volume as of its start or its last ``reload()``,
  and others see its changes only after it commits ("you need to explicitly
  commit any changes you make to the volume for the changes to become
  visible outside the current container", volume.py:492-494).
* A commit publishes **the container's own changes** since its last
  reload or commit: files it wrote and files it removed or renamed away
  ("use normal filesystem operations like ``os.rename()`` and then
  ``commit()`` the volume", volume.py:1191-1194; the exit commit "persist[s]
  uncommitted changes", task_lifecycle_manager.py:129-133). A file it never
  touched is not republished, so a stale view never puts an old file back
  over one another container committed since; two containers changing the
  same file: the last commit wins (volume.py:496-498).
* ``commit()`` reloads after committing (volume.py:902-904), and that
  reload, like ``reload()`` itself, fails while any process of the container
  holds files open or mapped under the mount, or has its working directory
  there (volume.py:503-504, 917; RuntimeError, volume.py:935; the client's
  diagnosis scans every process, volume.py:1725-1765).
  ``reload()`` may commit uncommitted changes implicitly (volume.py:914-915):
  here it always does, then mounts the latest committed state, others'
  deletions included.
* Background commits (``allow_background_commits``, volume.py:480) publish
  the container's changes, partial writes included, every
  ``background_commit_seconds``; they do not reload.

One commit or reload at a time per store (a lock file in it): a commit is
one server-side operation on Modal, never interleaved file by file with
another container's. A container killed mid-commit still leaves old or new
files, never a torn one: each file is copied under a ``.standin-`` name and
renamed into place, and such a name is never published or mounted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

__all__ = ["StrictVolume"]

#: How a commit or reload names a file it is still copying (never published itself).
_TEMPORARY_PREFIX = ".standin-"
_STORE_LOCK = f"{_TEMPORARY_PREFIX}lock"


def _container_pids() -> list[str]:
    """This container's processes: each stand-in container leads its own process group.

    On Modal the container is a sandbox: every process in it counts (vLLM's
    EngineCore is a child of the worker). The client's own diagnosis of a refused
    reload scans every process's working directory and open files
    (modal/volume.py:1725-1765).
    """
    group = os.getpgid(0)
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] not in {"Z", "X"}:  # pgrp, not a zombie
            pids.append(entry)
    return pids


def _open_under(root: Path) -> list[str]:
    """What keeps ``root`` busy in this container: open or mapped files, working directories."""
    base = str(root.resolve())
    prefix = base + os.sep
    found: list[str] = []
    for pid in _container_pids():
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            if cwd == base or cwd.startswith(prefix):
                found.append(f"cwd of process {pid} is inside the Volume ({cwd})")
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith(prefix):
                    found.append(f"{target} (open in process {pid})")
            with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
                found.extend(
                    f"{parts[5].strip()} (mapped in process {pid})"
                    for line in maps
                    if len(parts := line.split(None, 5)) == 6 and parts[5].startswith(prefix)
                )
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue  # it ended while being read
    return found


@dataclasses.dataclass
class _Tree:
    """What a folder holds: each file's (size, mtime_ns), and its folders (relative)."""

    files: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    folders: set[str] = dataclasses.field(default_factory=set)


def _scan(root: Path) -> _Tree:
    tree = _Tree()
    for folder, subfolders, names in os.walk(root):
        relative = Path(folder).relative_to(root)
        tree.folders.update((relative / name).as_posix() for name in subfolders)
        for name in names:
            if name.startswith(_TEMPORARY_PREFIX):
                continue
            with contextlib.suppress(FileNotFoundError):  # removed while walking
                stat = (Path(folder) / name).stat()
                tree.files[(relative / name).as_posix()] = (stat.st_size, stat.st_mtime_ns)
    return tree


def _copy_whole(origin: Path, target: Path) -> bool:
    """Copy one file under a temporary name, then rename it into place (False: it went)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.parent / f"{_TEMPORARY_PREFIX}{os.getpid()}-{target.name}"
    try:
        shutil.copy2(origin, temporary)
        os.replace(temporary, target)
    except FileNotFoundError:
        temporary.unlink(missing_ok=True)
        return False
    return True


def _remove_folders(root: Path, folders: set[str]) -> None:
    """Remove ``folders`` under ``root`` that are empty, deepest first."""
    for folder in sorted(folders, key=lambda name: name.count("/"), reverse=True):
        with contextlib.suppress(FileNotFoundError, OSError):
            (root / folder).rmdir()  # not empty: something else lives there now


class StrictVolume:
    """One container's view of a Volume; ``store`` holds what was committed."""

    def __init__(self, store: Path, view: Path, *, background_commit_seconds: float = 0.0) -> None:
        self.store = Path(store)
        self.view = Path(view)
        self.store.mkdir(parents=True, exist_ok=True)
        self.view.mkdir(parents=True, exist_ok=True)
        self.commits = 0
        self.reloads = 0
        self.background_commits = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._synced = _Tree()
        """The view as of its last reload or commit: what differs from it is this container's."""
        with self._store_locked():
            self._mount()  # what a fresh container mounts
        if background_commit_seconds > 0:
            threading.Thread(
                target=self._background, args=(background_commit_seconds,), daemon=True
            ).start()

    @contextlib.contextmanager
    def _store_locked(self) -> Iterator[None]:
        with self._lock, open(self.store / _STORE_LOCK, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released when the handle (or process) goes
            yield

    def _publish(self) -> None:
        """Copy this view's own changes to the store: written files, removed ones."""
        current = _scan(self.view)
        synced = self._synced
        for relative, stat in list(current.files.items()):  # popped from below
            if synced.files.get(relative) != stat and not _copy_whole(
                self.view / relative, self.store / relative
            ):
                current.files.pop(relative)  # removed while publishing: published next time
        for folder in current.folders - synced.folders:
            (self.store / folder).mkdir(parents=True, exist_ok=True)
        for relative in synced.files.keys() - current.files.keys():
            (self.store / relative).unlink(missing_ok=True)
        _remove_folders(self.store, synced.folders - current.folders)
        self._synced = current

    def _mount(self) -> None:
        """Make the view the store's state (after :meth:`_publish`: nothing here is unpublished).

        A file the view has and the store lacks is removed only when the view
        still holds it as synced (another container removed it); one new here
        (a fresh container's view given files before the mount) stays.
        """
        store, view, synced = _scan(self.store), _scan(self.view), self._synced
        for relative in view.files.keys() - store.files.keys():
            if synced.files.get(relative) == view.files[relative]:  # removed by another
                (self.view / relative).unlink(missing_ok=True)
        _remove_folders(self.view, (view.folders & synced.folders) - store.folders)
        for folder in store.folders:
            (self.view / folder).mkdir(parents=True, exist_ok=True)
        for relative, stat in store.files.items():
            if view.files.get(relative) != stat:
                _copy_whole(self.store / relative, self.view / relative)
        self._synced = _scan(self.view)

    def _refuse_open_files(self, what: str) -> None:
        held = _open_under(self.view)
        if held:
            raise RuntimeError(
                f"{what} failed: there are open files under the Volume mount ({held[0]})"
            )

    def close(self) -> None:
        """Stop the background commits (a test's volume; a container's ends with its process)."""
        self._closed.set()

    def _background(self, seconds: float) -> None:
        while not self._closed.wait(seconds):
            try:
                with self._store_locked():
                    self._publish()
            except OSError:
                continue
            self.background_commits += 1

    def commit(self) -> None:
        """``Volume.commit``: publish this container's changes, then reload (no open files)."""
        with self._store_locked():
            self._publish()
            self.commits += 1
            self._refuse_open_files("Volume.commit() reload")
            self._mount()

    def reload(self) -> None:
        """``Volume.reload``: commit what changed here, then see what others committed."""
        with self._store_locked():  # never counting this stand-in's own copying as open
            self._refuse_open_files("Volume.reload()")
            self._publish()
            self._mount()
            self.reloads += 1
