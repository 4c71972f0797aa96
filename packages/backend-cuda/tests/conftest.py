"""Tiny checkpoints served by the fake Hub, resolved, staged and loaded once per session.

Every checkpoint goes the product's way: the fake Hub serves it, the CPU
registry resolves a ``local_cpu`` profile for it, staging downloads it into a
completed snapshot, and ``create_backend`` loads it with real Transformers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from comfy_llm_core import ExecutionTarget, ProgressEvent
from comfy_llm_profiles import ModelProfile
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.staged import staged_profile

KINDS = {
    "qwen": ("qwen3_5", False, "tiny-owner/qwen3.5-tiny"),
    "smolvlm": ("smolvlm", False, "tiny-owner/smolvlm-tiny"),
    "scripted": ("qwen3_5", True, "tiny-owner/qwen3.5-scripted"),
}


@dataclasses.dataclass(frozen=True)
class Staged:
    """A resolved profile and its completed snapshot."""

    profile: ModelProfile
    path: Path


@pytest.fixture(scope="session")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Staged]]:
    from comfy_llm_testworld.checkpoints import build_checkpoint_files

    root = tmp_path_factory.mktemp("storage")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf_home")))
        patch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        patch.delenv("HF_TOKEN", raising=False)
        patch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        hub = FakeHub()
        with hub:
            for kind, scripted, repo in KINDS.values():
                hub.add_repo(repo, build_checkpoint_files(kind, scripted=scripted))
            result: dict[str, Staged] = {}
            for name, (_, _, repo) in KINDS.items():
                result[name] = Staged(
                    *staged_profile(
                        repo, ExecutionTarget.LOCAL_CPU, storage_root=root, endpoint=hub.endpoint
                    )
                )
        assert not hub.internal_errors, hub.internal_errors
        yield result


@dataclasses.dataclass
class Loaded:
    """A loaded backend plus the progress events its load emitted."""

    backend: object
    staged: Staged
    events: list[ProgressEvent]


def _load(staged: Staged) -> Loaded:
    from comfy_llm_backend_cuda import create_backend

    events: list[ProgressEvent] = []
    backend = create_backend(staged.profile, staged.path, events.append)
    return Loaded(backend, staged, events)


@pytest.fixture(scope="session")
def qwen(staged: dict[str, Staged]) -> Iterator[Loaded]:
    loaded = _load(staged["qwen"])
    yield loaded
    loaded.backend.unload()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def smolvlm(staged: dict[str, Staged]) -> Iterator[Loaded]:
    loaded = _load(staged["smolvlm"])
    yield loaded
    loaded.backend.unload()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def scripted(staged: dict[str, Staged]) -> Iterator[Loaded]:
    loaded = _load(staged["scripted"])
    yield loaded
    loaded.backend.unload()  # type: ignore[attr-defined]
