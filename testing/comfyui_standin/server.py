"""Stand-in for ComfyUI's ``server.PromptServer`` (tests only): records texts."""

from __future__ import annotations

from typing import Any


class PromptServer:
    instance: PromptServer

    def __init__(self) -> None:
        self.progress_texts: list[tuple[str, str]] = []

    def send_progress_text(self, text: str | bytes, node_id: str, sid: Any = None) -> None:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        self.progress_texts.append((str(node_id), text))


PromptServer.instance = PromptServer()
