"""The stand-in container's line survives cancellations landing mid-message.

In a real container a blocking client call runs on synchronicity's event-loop
thread while the caller waits on a future, so ``InputCancellation`` raised by
the SIGUSR1 handler abandons the wait and never splits a message. The stand-in
must keep that: one cancel landing inside a main-thread ``recv`` once left the
line out of step (CI: EOFError in the container, then a 60 s hang).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from multiprocessing import Pipe
from types import FrameType

from comfy_llm_testworld._modal_container import _Link


class _Cancelled(Exception):
    pass


def _echo_puts(connection: object, stop: threading.Event) -> None:
    """The test process's side: answer each put with a large reply."""
    while not stop.is_set():
        if not connection.poll(0.05):  # type: ignore[attr-defined]
            continue
        message = connection.recv()  # type: ignore[attr-defined]
        if message[0] == "put":
            payload = "x" * 400_000
            connection.send(("put-reply", (message[1], payload), message[-1]))  # type: ignore[attr-defined]
        else:
            connection.send(("echo", message))  # type: ignore[attr-defined]


def test_cancels_landing_mid_message_never_desynchronise_the_line() -> None:
    ours, theirs = Pipe()
    stop = threading.Event()
    echo = threading.Thread(target=_echo_puts, args=(theirs, stop), daemon=True)
    echo.start()
    link = _Link(ours)

    armed = [False]  # as in a container: the handler raises while an input runs

    def cancel(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        if armed[0]:
            armed[0] = False
            raise _Cancelled

    calm = threading.Event()  # the pester stops; the echo side keeps serving

    def pester() -> None:
        while not calm.is_set():
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.0007)

    previous = signal.signal(signal.SIGUSR1, cancel)
    pesterer = threading.Thread(target=pester, daemon=True)
    cancelled = answered = 0
    try:
        pesterer.start()
        for index in range(300):
            try:
                armed[0] = True
                reply = link.request(("put", index))
                armed[0] = False
            except _Cancelled:
                cancelled += 1
                continue
            assert reply[0] == index  # a reply never belongs to another request
            answered += 1
    finally:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        calm.set()
        pesterer.join(5)
    signal.signal(signal.SIGUSR1, previous)
    assert cancelled > 0  # the cancels did land inside requests
    try:
        assert link.request(("put", "last"))[0] == "last"  # the line still works
        link.send(("hello",))
        assert link.recv() == ("echo", ("hello",))
    finally:
        stop.set()
        echo.join(5)  # one reader of the other end at a time
        link.close()
