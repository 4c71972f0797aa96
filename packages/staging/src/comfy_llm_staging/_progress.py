"""A tqdm stand-in that turns huggingface_hub's download bars into ProgressEvents.

``snapshot_download(tqdm_class=...)`` builds three kinds of bar from the class
it is given (huggingface_hub 2.x; 1.x builds a subset):

- ``"Downloading bytes"`` (unit ``B``): bytes received over HTTP; its total
  grows as files start. Counted as the bytes this call downloaded.
- ``"Reconstructing …"`` (unit ``B``): bytes written to disk, total = sum of
  the sizes of files being fetched. Reported as the byte progress.
- ``"Fetching N files"`` (unit ``it``): one step per finished file. Reported
  as file progress.

Per-file updates arrive from worker threads, so every bar shares one lock
held by a :class:`DownloadProgress`. Nothing is ever printed. Byte events are
throttled; the caller's callback runs under the lock (events stay ordered) and
may raise to cancel the download (ComfyUI's interrupt check does).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage

_MIN_EVENT_INTERVAL_SECONDS = 0.1


class DownloadProgress:
    """Shared state of one snapshot download's progress bars.

    Args:
        callback: Where events go.
        planned_bytes: Bytes expected to be fetched (from the Hub metadata);
            used as the byte maximum when larger than the bars' own total.
    """

    def __init__(self, callback: ProgressCallback, planned_bytes: int = 0) -> None:
        self._callback = callback
        self._planned_bytes = planned_bytes
        self._lock = threading.RLock()
        self._started = time.monotonic()
        self._last_bytes_event = 0.0
        self._have_disk_bar = False
        self.network_bytes = 0
        """Bytes received over HTTP by this download (after resume rollbacks)."""

    def make_bar_class(self) -> type[ProgressBar]:
        """Return a tqdm-compatible class bound to this progress state."""
        return type("BoundProgressBar", (ProgressBar,), {"_shared": self})

    def _emit(self, event: ProgressEvent) -> None:
        self._callback(event)

    def _elapsed(self) -> float:
        return time.monotonic() - self._started

    def bar_updated(self, bar: ProgressBar, increment: float, *, force: bool = False) -> None:
        """Translate one bar's new state into an event (caller holds the lock)."""
        if bar.role == "transfer":
            self.network_bytes += int(increment)
            if self._have_disk_bar:
                return
        elif bar.role == "files":
            self._emit(
                ProgressEvent(
                    stage=ProgressStage.DOWNLOAD,
                    message="Fetching model files",
                    value=float(bar.n),
                    maximum=float(bar.total) if bar.total else None,
                    unit="files",
                    elapsed_seconds=self._elapsed(),
                )
            )
            return
        now = time.monotonic()
        known_total = max(int(bar.total or 0), self._planned_bytes)
        finished = known_total > 0 and bar.n >= known_total
        if not (force or finished) and now - self._last_bytes_event < _MIN_EVENT_INTERVAL_SECONDS:
            return
        self._last_bytes_event = now
        self._emit(
            ProgressEvent(
                stage=ProgressStage.DOWNLOAD,
                message="Downloading model files",
                value=float(max(bar.n, 0)),
                maximum=float(max(known_total, int(bar.n))) if known_total else None,
                unit="bytes",
                indeterminate=known_total == 0,
                elapsed_seconds=self._elapsed(),
            )
        )


class ProgressBar:
    """The subset of ``tqdm`` that huggingface_hub's snapshot download uses.

    Instances are made by huggingface_hub through the class returned by
    :meth:`DownloadProgress.make_bar_class`. Unknown tqdm methods are accepted
    as no-ops so a newer huggingface_hub calling one more display method does
    not break a download.
    """

    _shared: DownloadProgress
    _lock: Any

    def __init__(self, iterable: Any = None, *args: Any, **kwargs: Any) -> None:
        del args
        self.iterable = iterable
        self.desc = str(kwargs.get("desc") or "")
        self.unit = str(kwargs.get("unit") or "it")
        self.total = kwargs.get("total")
        self.n = kwargs.get("initial") or 0
        self.disable = True
        if self.unit != "B":
            self.role = "files"
        elif self.desc.startswith("Downloading bytes"):
            self.role = "transfer"
        else:
            self.role = "disk"
            self._shared._have_disk_bar = True
        with self._shared._lock:
            if self.role == "files" or self.n:
                self._shared.bar_updated(self, 0, force=True)

    # --- the methods huggingface_hub calls -------------------------------------------------
    def update(self, n: float | None = 1) -> None:
        """Advance by ``n`` (negative when a resumed download restarts)."""
        increment = n or 0
        with self._shared._lock:
            self.n += increment
            self._shared.bar_updated(self, increment)

    def refresh(self, *args: Any, **kwargs: Any) -> None:
        """Report the current state (called after ``total`` changes)."""
        del args, kwargs
        with self._shared._lock:
            if self.role != "transfer":
                self._shared.bar_updated(self, 0)

    def close(self) -> None:
        """Nothing to tear down."""

    def clear(self, *args: Any, **kwargs: Any) -> None:
        """Nothing is displayed."""
        del args, kwargs

    def reset(self, total: float | None = None) -> None:
        """Restart the count, optionally with a new total."""
        with self._shared._lock:
            self.n = 0
            if total is not None:
                self.total = total

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        """Remember the description (never shown)."""
        del refresh
        self.desc = str(desc or "")

    def set_description_str(self, desc: str | None = None, refresh: bool = True) -> None:
        """Remember the description (never shown)."""
        del refresh
        self.desc = str(desc or "")

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        """Ignored: rates are not reported."""
        del args, kwargs

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """Ignored: rates are not reported."""
        del s, refresh

    @property
    def format_dict(self) -> dict[str, Any]:
        """What tqdm would format; ``rate`` is unknown."""
        return {"n": self.n, "total": self.total, "unit": self.unit, "rate": None}

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __iter__(self) -> Any:
        for item in self.iterable or ():
            yield item
            self.update(1)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def ignored(*args: Any, **kwargs: Any) -> None:
            del args, kwargs

        return ignored

    # --- tqdm's class-level lock protocol (thread_map helpers use it) ---------------------
    @classmethod
    def get_lock(cls) -> Any:
        """Return the class-wide lock tqdm helpers share with worker threads."""
        if not hasattr(cls, "_lock"):
            cls._lock = threading.RLock()
        return cls._lock

    @classmethod
    def set_lock(cls, lock: Any) -> None:
        """Store a lock handed over by tqdm helpers (the shared state has its own)."""
        cls._lock = lock

    @classmethod
    def write(cls, *args: Any, **kwargs: Any) -> None:
        """Swallow tqdm.write: staging never prints."""
        del args, kwargs
