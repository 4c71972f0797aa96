"""Shared fixtures for the staging tests: a small repository on the fake Hub.

pytest runs with --import-mode=importlib, so tests reach these helpers only
through fixtures (``make_files``, ``world``), never by importing this module.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from comfy_llm_testworld import FakeHub

REPO = "acme/tiny-vlm"


def _make_files(weight_bytes: int = 64 * 1024, *, seed: int = 7) -> dict[str, bytes]:
    """Return the files of a small but plausible model repository."""
    import random

    rng = random.Random(seed)
    return {
        "config.json": json.dumps({"model_type": "qwen3_5", "hidden_size": 8}).encode(),
        "generation_config.json": b'{"do_sample": false}',
        "tokenizer.json": json.dumps({"version": "1.0", "model": {"vocab": {"a": 0}}}).encode(),
        "tokenizer_config.json": b'{"bos_token": null}',
        "chat_template.jinja": b"{% for m in messages %}{{ m.content }}{% endfor %}",
        "preprocessor_config.json": b'{"size": 32}',
        "model.safetensors": rng.randbytes(weight_bytes),
    }


@dataclass
class StagingWorld:
    """A fake Hub with one repository, and a storage root to stage it into."""

    hub: FakeHub
    root: Path
    repository: str
    revision: str
    files: dict[str, bytes]


@pytest.fixture
def make_files() -> Callable[..., dict[str, bytes]]:
    """Factory of repository contents: ``make_files(weight_bytes=..., seed=...)``."""
    return _make_files


@pytest.fixture
def world(hf_env: FakeHub, tmp_path: Path) -> StagingWorld:
    """A fake Hub holding ``acme/tiny-vlm`` and an empty storage root."""
    files = _make_files()
    sha = hf_env.add_repo(REPO, files)
    return StagingWorld(hf_env, tmp_path / "storage", REPO, sha, files)
