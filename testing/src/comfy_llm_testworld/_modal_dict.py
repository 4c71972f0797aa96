"""A named ``modal.Dict`` for the strict stand-in: a folder every process with its path shares.

On Modal a named Dict belongs to the workspace, not to an app: two apps
(two installations) that look up one name reach one Dict. The stand-in keys
it by the store path, the way its Volumes are shared: every transport with
the same root, whatever its app name, and every container it starts, opens
``<root>/dicts/<name>``. Each rule is the modal 1.6.4 client's
(``site-packages/modal/dict.py``):

* ``from_name`` checks the name (``check_object_name``, dict.py:401;
  ``_utils/name_utils.py:26-34``: at most 64 characters of ``[a-zA-Z0-9-_.]``);
  without ``create_if_missing`` a missing Dict fails at its first use
  (hydration is lazy, dict.py:385-416) with ``NotFoundError``.
* ``put(key, value, skip_if_exists=True)`` creates the key only if it is
  absent and says whether it did, atomically on the server
  (``if_not_exists``, dict.py:556-571); a plain ``put`` overwrites and returns
  True. Here: a hard link of a finished file (``os.link`` fails when the name
  exists), or ``os.replace``.
* ``get(key, default=None)`` returns ``default`` for a missing key
  (dict.py:494-503); ``pop(key)`` removes and returns the value, ``default``
  when given, else ``KeyError`` (dict.py:583-595). Only one of two racing pops
  gets the value (a rename).
* There is no per-key TTL and no compare-and-swap; an entry expires after 7
  days without a read or a write (dict.py:265-266): :attr:`IDLE_EXPIRY_SECONDS`,
  which a test may shorten.
* Every operation is an RPC and can fail as the client's do after their
  retries (``ConnectionError``, ``InternalError``; _grpc_client.py maps the
  gRPC statuses): :meth:`StrictDict.fail_next` makes the next operations on
  the Dict, from any process, raise them. With ``applied=True`` the operation
  takes effect first and only its answer is lost, as when the server applied
  an update whose response timed out and the client gave up or retried: a
  retried ``put(skip_if_exists=True)`` of one's own claim then answers False.
* Every operation is a network round trip: ``get`` is the ``DictGet`` RPC
  (dict.py:500), ``contains`` ``DictContains`` (dict.py:509), ``put``
  ``DictUpdate`` (dict.py:566), ``pop`` ``DictPop`` (dict.py:589), ``keys`` a
  ``DictContents`` stream (dict.py:620), and the first use of a Dict from
  ``from_name`` hydrates it with ``DictGetOrCreate`` first (dict.py:415), each
  awaited by the blocking wrapper. When the transport runs on Modal's clocks
  (``platform_seconds``), each call takes :data:`ROUND_TRIP_SECONDS` platform
  seconds (the hydration one more), and every call is counted
  (:meth:`StrictDict.rpc_count`, all processes together), so a loop that polls
  the Dict without pause shows up in a test as time and as calls.

Stricter than Modal on one point: keys are strings and values plain JSON data
(None, bool, int, float, str, lists and str-keyed dicts of them). Modal
cloudpickles anything; a value that would not come back the same here (a
tuple, a dataclass) is refused, so the product writes plain data.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["IDLE_EXPIRY_SECONDS", "ROUND_TRIP_SECONDS", "StrictDict", "set_round_trip"]

IDLE_EXPIRY_SECONDS = 7 * 24 * 3600.0
ROUND_TRIP_SECONDS = 0.03
"""One Dict RPC, in Modal's seconds: a gRPC round trip to Modal's control plane. Not a
figure Modal documents; tens of milliseconds is what a unary RPC across a region costs."""
_ROUND_TRIP_FILE = ".round-trip"
_COUNT_FILE = ".rpc-count"


def set_round_trip(root: Path, seconds: float) -> None:
    """Every Dict under ``root`` (any process) takes ``seconds`` per RPC from now on."""
    folder = Path(root) / "dicts"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / _ROUND_TRIP_FILE).write_text(repr(float(seconds)), encoding="utf-8")


_NO_DEFAULT: Any = object()
_T = TypeVar("_T")


def _check_plain(value: Any, where: str) -> None:
    if value is None or isinstance(value, bool | int | float | str):
        return
    if type(value) is list:
        for item in value:
            _check_plain(item, where)
        return
    if type(value) is dict:
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: a dict key {key!r} is not a str")
            _check_plain(item, where)
        return
    raise TypeError(f"{where}: {type(value).__name__} is not plain data (the stand-in's rule)")


class StrictDict:
    """One named Dict: a file per key under ``folder``.

    Args:
        folder: ``<root>/dicts/<name>``.
        name: The Dict's name (for messages).
        create_if_missing: Create the folder on first use.
    """

    idle_expiry_seconds = IDLE_EXPIRY_SECONDS

    def __init__(self, folder: Path, name: str, *, create_if_missing: bool) -> None:
        self.folder = Path(folder)
        self.name = name
        self._create = create_if_missing
        self._hydrated = False

    @classmethod
    def from_name(cls, name: str, *, root: Path, create_if_missing: bool = False) -> StrictDict:
        """``modal.Dict.from_name`` over the stand-in's ``root`` (its store path)."""
        from modal._utils.name_utils import check_object_name

        check_object_name(name, "Dict")
        return cls(Path(root) / "dicts" / name, name, create_if_missing=create_if_missing)

    def fail_next(
        self, count: int, kind: str = "ConnectionError", *, applied: bool = False
    ) -> None:
        """The next ``count`` operations (any process) raise ``modal.exception.<kind>``.

        ``applied``: each takes effect before it raises (the answer was lost).
        """
        if kind not in {"ConnectionError", "InternalError"}:
            raise ValueError(f"kind must be ConnectionError or InternalError, got {kind!r}")
        self.folder.mkdir(parents=True, exist_ok=True)
        when = "after" if applied else "before"
        for _ in range(count):
            (self.folder / f".fail-{uuid.uuid4().hex}-{when}-{kind}").touch()

    def rpc_count(self) -> int:
        """Operations made on this Dict so far, from every process (hydrations included)."""
        try:
            return (self.folder / _COUNT_FILE).stat().st_size
        except FileNotFoundError:
            return 0

    def _take_failure(self) -> tuple[str, str] | None:
        """(when, kind) of the next injected failure, claimed by this operation."""
        for marker in sorted(self.folder.glob(".fail-*")):
            taken = marker.with_name(f".failing-{uuid.uuid4().hex}")
            try:
                os.rename(marker, taken)  # one operation takes one failure
            except FileNotFoundError:
                continue
            taken.unlink(missing_ok=True)
            _, _, when, kind = marker.name.split("-", 3)
            return when, kind
        return None

    def _round_trip(self) -> None:
        """One RPC: counted, and as slow as the transport's clocks make it."""
        try:
            seconds = float((self.folder.parent / _ROUND_TRIP_FILE).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            seconds = 0.0
        calls = 1 if self._hydrated else 2  # DictGetOrCreate first (dict.py:415)
        self._hydrated = True
        with open(self.folder / _COUNT_FILE, "ab") as count:  # O_APPEND: racing writers add up
            count.write(b"." * calls)
        if seconds > 0:
            time.sleep(seconds * calls)

    def _rpc(self, operation: Callable[[], _T]) -> _T:
        """Run one Dict operation as the client does: hydrate, one round trip, maybe fail."""
        if not self.folder.is_dir():
            if not self._create:
                from modal.exception import NotFoundError

                raise NotFoundError(f"Dict '{self.name}' not found")
            self.folder.mkdir(parents=True, exist_ok=True)
        self._round_trip()
        failure = self._take_failure()
        if failure is not None and failure[0] == "after":
            operation()
        if failure is not None:
            import modal.exception

            kind = failure[1]
            raise getattr(modal.exception, kind)(f"Dict {self.name}: deadline exceeded ({kind})")
        return operation()

    def _path(self, key: Any) -> Path:
        if not isinstance(key, str):
            raise TypeError(f"Dict {self.name}: key {key!r} is not a str (the stand-in's rule)")
        return self.folder / (hashlib.sha256(key.encode()).hexdigest()[:40] + ".json")

    def _read(self, path: Path, field: str = "value") -> Any:
        """The entry's ``field``, or ``_NO_DEFAULT`` when it is absent or idle too long."""
        try:
            age = time.time() - path.stat().st_mtime
            if age > self.idle_expiry_seconds:
                path.unlink(missing_ok=True)
                return _NO_DEFAULT
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return _NO_DEFAULT
        os.utime(path)  # a read counts as activity
        return json.loads(text)[field]

    def _temporary(self, key: str, value: Any) -> Path:
        _check_plain(value, f"Dict {self.name}[{key!r}]")
        temporary = self.folder / f".tmp-{uuid.uuid4().hex}"
        temporary.write_text(json.dumps({"key": key, "value": value}), encoding="utf-8")
        return temporary

    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` (dict.py:494-503)."""
        return self._rpc(lambda: self._get(key, default))

    def _get(self, key: Any, default: Any) -> Any:
        value = self._read(self._path(key))
        return default if value is _NO_DEFAULT else value

    def contains(self, key: Any) -> bool:
        """Whether ``key`` is present (dict.py:506-510)."""
        return bool(self._rpc(lambda: self._get(key, _NO_DEFAULT) is not _NO_DEFAULT))

    def put(self, key: Any, value: Any, *, skip_if_exists: bool = False) -> bool:
        """Set ``key``; with ``skip_if_exists`` only if absent, atomically (dict.py:556-571)."""
        return bool(self._rpc(lambda: self._put(key, value, skip_if_exists)))

    def _put(self, key: Any, value: Any, skip_if_exists: bool) -> bool:
        path = self._path(key)
        temporary = self._temporary(key, value)
        try:
            if not skip_if_exists:
                os.replace(temporary, path)
                return True
            if self._read(path) is not _NO_DEFAULT:
                return False  # present (an idle-expired entry was removed by the read)
            try:
                os.link(temporary, path)
            except FileExistsError:
                return False
            return True
        finally:
            temporary.unlink(missing_ok=True)

    def pop(self, key: Any, default: Any = _NO_DEFAULT) -> Any:
        """Remove ``key`` and return its value (dict.py:583-595)."""
        return self._rpc(lambda: self._pop(key, default))

    def _pop(self, key: Any, default: Any) -> Any:
        path = self._path(key)
        taken = self.folder / f".pop-{uuid.uuid4().hex}"
        try:
            os.rename(path, taken)  # one of two racing pops wins
        except FileNotFoundError:
            taken = path  # absent: fall through to the default
        value = self._read(taken) if taken != path else _NO_DEFAULT
        if taken != path:
            taken.unlink(missing_ok=True)
        if value is _NO_DEFAULT:
            if default is not _NO_DEFAULT:
                return default
            raise KeyError(f"{key} not in dict {self.name}")
        return value

    def keys(self) -> list[str]:
        """Every key present (``Dict.keys``, dict.py:613-622; a list here)."""
        return self._rpc(self._keys)

    def _keys(self) -> list[str]:
        found: list[str] = []
        for path in sorted(self.folder.glob("*.json")):
            key = self._read(path, "key")
            if key is not _NO_DEFAULT:
                found.append(key)
        return found


def stage_leases(root: Path) -> Any:
    """The stager's leases as ``worker/_app.py`` builds them, over the stand-in's Dicts at ``root``.

    Read in the container, from the image's environment (the Volume's name and
    the lease times), as the real app reads its settings at import.
    """
    from comfy_llm_modal_remote import ModalSettings, StageLeases

    settings = ModalSettings.from_env()
    store = StrictDict.from_name(settings.stage_lease_dict_name, root=root, create_if_missing=True)
    return StageLeases.from_settings(store, settings)
