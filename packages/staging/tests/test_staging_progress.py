"""The tqdm stand-in handed to snapshot_download (no network)."""

from __future__ import annotations

import threading

from comfy_llm_core import ProgressEvent, ProgressStage
from comfy_llm_staging._progress import DownloadProgress


def test_bars_map_to_byte_and_file_events(capsys) -> None:
    events: list[ProgressEvent] = []
    tracker = DownloadProgress(events.append, planned_bytes=300)
    bar_class = tracker.make_bar_class()
    transfer = bar_class(desc="Downloading bytes", total=0, initial=0, unit="B", unit_scale=True)
    disk = bar_class(desc="Reconstructing (incomplete total...)", total=0, unit="B")
    with bar_class(total=2, desc="Fetching 2 files") as files:
        disk.total += 300
        disk.refresh()
        for _ in range(3):
            transfer.total = transfer.n + 200
            transfer.update(100)
            disk.update(100)
        files.update(1)
        files.update(1)
    transfer.set_description_str("Download complete")
    disk.set_postfix_str("1 MB/s", refresh=False)
    assert disk.format_dict["rate"] is None
    transfer.some_future_tqdm_method(1, x=2)  # unknown display calls are no-ops

    assert tracker.network_bytes == 300
    assert all(e.stage is ProgressStage.DOWNLOAD for e in events)
    byte_events = [e for e in events if e.unit == "bytes"]
    file_events = [e for e in events if e.unit == "files"]
    assert byte_events[-1].value == 300
    assert byte_events[-1].maximum == 300
    assert [e.value for e in file_events] == [0, 1, 2]
    assert file_events[-1].maximum == 2
    assert capsys.readouterr() == ("", "")


def test_updates_from_many_threads_are_counted_exactly() -> None:
    events: list[ProgressEvent] = []
    tracker = DownloadProgress(events.append, planned_bytes=8 * 2000 * 3)
    bar_class = tracker.make_bar_class()
    transfer = bar_class(desc="Downloading bytes", total=0, unit="B")
    disk = bar_class(desc="Reconstructing", total=0, unit="B")

    def worker() -> None:
        for _ in range(2000):
            transfer.update(3)
            disk.update(3)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert transfer.n == disk.n == 8 * 2000 * 3
    assert tracker.network_bytes == 8 * 2000 * 3
    values = [e.value for e in events if e.unit == "bytes"]
    assert values == sorted(values)  # events leave in order
    assert values[-1] == 8 * 2000 * 3


def test_resume_rollback_is_reflected() -> None:
    tracker = DownloadProgress(lambda event: None)
    transfer = tracker.make_bar_class()(desc="Downloading bytes", unit="B")
    transfer.update(100)
    transfer.update(-40)  # a server ignored Range: huggingface_hub rolls back
    assert tracker.network_bytes == 60


def test_bar_classes_of_two_downloads_do_not_share_state() -> None:
    first, second = DownloadProgress(lambda e: None), DownloadProgress(lambda e: None)
    first.make_bar_class()(desc="Downloading bytes", unit="B").update(5)
    assert second.network_bytes == 0
    assert first.network_bytes == 5


def test_works_with_tqdm_thread_map_as_huggingface_hub_1x_uses_it() -> None:
    from tqdm.contrib.concurrent import thread_map

    events: list[ProgressEvent] = []
    bar_class = DownloadProgress(events.append).make_bar_class()
    result = thread_map(lambda x: x * 2, range(5), tqdm_class=bar_class, max_workers=2)
    assert result == [0, 2, 4, 6, 8]
    assert [e.value for e in events if e.unit == "files"][-1] == 5
