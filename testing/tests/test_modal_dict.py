"""The stand-in's named Dict holds to the modal 1.6.4 client's rules (modal/dict.py)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from comfy_llm_testworld.modal_strict import StrictDict


def test_get_put_and_pop_as_the_real_client(tmp_path: Path) -> None:
    leases = StrictDict.from_name("leases", root=tmp_path, create_if_missing=True)
    assert leases.get("k") is None and leases.get("k", 5) == 5  # dict.py:494-503
    assert leases.put("k", {"holder": "a"}, skip_if_exists=True) is True  # dict.py:556-571
    assert leases.put("k", {"holder": "b"}, skip_if_exists=True) is False
    assert leases.get("k") == {"holder": "a"}
    assert leases.put("k", [1, 2.5, None]) is True  # a plain put overwrites
    assert leases.pop("k") == [1, 2.5, None]  # dict.py:583-595
    assert leases.pop("k", None) is None
    with pytest.raises(KeyError):
        leases.pop("k")
    with pytest.raises(TypeError):
        leases.put("k", (1, 2))  # would not come back a tuple: refused


def test_a_dict_is_shared_by_its_store_path_and_names_are_checked(tmp_path: Path) -> None:
    from modal.exception import InvalidError, NotFoundError

    first = StrictDict.from_name("leases", root=tmp_path, create_if_missing=True)
    second = StrictDict.from_name("leases", root=tmp_path)
    first.put("k", 1)
    assert second.get("k") == 1 and second.keys() == ["k"]
    with pytest.raises(InvalidError):
        StrictDict.from_name("not a name", root=tmp_path)
    with pytest.raises(NotFoundError):  # lazily, at first use (dict.py:385-416)
        StrictDict.from_name("missing", root=tmp_path).get("k")


def test_one_of_many_racing_claims_creates_the_key(tmp_path: Path) -> None:
    leases = StrictDict.from_name("leases", root=tmp_path, create_if_missing=True)
    start = threading.Barrier(12)
    won: list[int] = []

    def claim(number: int) -> None:
        start.wait()
        if leases.put("k", number, skip_if_exists=True):
            won.append(number)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(won) == 1 and leases.get("k") == won[0]


def test_an_entry_idle_for_seven_days_is_gone(tmp_path: Path) -> None:
    leases = StrictDict.from_name("leases", root=tmp_path, create_if_missing=True)
    leases.put("k", 1)
    (entry,) = (tmp_path / "dicts" / "leases").glob("*.json")
    idle = time.time() - 7 * 24 * 3600 - 60  # dict.py:265-266
    os.utime(entry, (idle, idle))
    assert leases.get("k") is None
    assert leases.put("k", 2, skip_if_exists=True) is True
