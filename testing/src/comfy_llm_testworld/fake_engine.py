"""A fake engine: a whole backend package in one module, added to the house by one record.

It proves the "add an engine" recipe: :data:`RECORD` is the only thing the
engine table learns (a test adds it with ``monkeypatch.setitem(ENGINES, ...)``),
this module is its package (named by ``RECORD.module``, loaded by name by
``comfy_llm_residency.create_backend``), and ``RECORD.extras`` is its extra.
:data:`FAMILY` is the "add a model family" recipe's one record, routing a
tiny checkpoint (:func:`checkpoint_files`) to the engine on ``local_cpu``.

The engine "generates" ``echo: <prompt> (<n> images)`` one character per
token, so a test can see the request went through it unchanged.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

from comfy_llm_core import ExecutionTarget, Modality
from comfy_llm_profiles import EngineSpec, Family, ModelProfile
from comfy_llm_residency import (
    BackendUnloadedError,
    EngineNotInstalledError,
    ModelLoadError,
    UnsupportedBackendError,
)
from comfy_llm_residency.backend import BackendResult, BackendTimings
from comfy_llm_staging import require_completed_snapshot

if TYPE_CHECKING:
    from comfy_llm_core import ProgressCallback
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_residency.backend import GenerationSettings, TokenSink

__all__ = [
    "ENGINE_NAMES",
    "FAMILY",
    "RECORD",
    "BackendUnloadedError",
    "EngineNotInstalledError",
    "FakeEchoBackend",
    "ModelLoadError",
    "UnsupportedBackendError",
    "checkpoint_files",
    "create_backend",
]

ENGINE_NAME: Final = "fake_echo"
ENGINE_NAMES: Final = (ENGINE_NAME,)
ARCHITECTURE: Final = "FakeEchoForConditionalGeneration"

RECORD: Final = EngineSpec(
    name=ENGINE_NAME,
    label="Fake Echo",
    module=__name__,
    extras=("fake-echo",),
    targets=frozenset({ExecutionTarget.LOCAL_CPU}),
    quantizations=("none",),
    requirements=("fake-echo==1.0",),
    vram_overhead_gb=1,
)
"""The engine's one record."""

FAMILY: Final = Family(
    name="fake_echo_vlm",
    architectures=((ARCHITECTURE, "fake_echo"),),
    moe_architectures=frozenset(),
    modalities=("text", "image", "file"),
    modality_reason="A test family: it counts images and never looks at them.",
    reasoning_parser="none",
    allow_mixed_image_video=False,
    engines=(ENGINE_NAME,),
)
"""The family that routes :func:`checkpoint_files` to the engine."""


def checkpoint_files() -> dict[str, bytes]:
    """A checkpoint of :data:`FAMILY`: config.json and an empty safetensors file."""
    config = {
        "architectures": [ARCHITECTURE],
        "model_type": "fake_echo",
        "torch_dtype": "float32",
        "max_position_embeddings": 2048,
    }
    return {
        "config.json": json.dumps(config).encode(),
        "model.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ",
    }


class FakeEchoBackend:
    """The engine's backend: echoes the prompt, one character per token."""

    ENGINE_NAME: ClassVar[str] = ENGINE_NAME
    modalities: frozenset[Modality] = frozenset({Modality.TEXT, Modality.IMAGE, Modality.FILE})

    def __init__(self, profile: ModelProfile, config: dict[str, Any]) -> None:
        self.profile = profile
        self._config: dict[str, Any] | None = config

    @property
    def loaded(self) -> bool:
        """False once :meth:`unload` ran."""
        return self._config is not None

    @property
    def vocabulary(self) -> None:
        """No token vocabulary (its parser is ``none``)."""
        return None

    def generate(
        self, inputs: PreparedInputs, settings: GenerationSettings, sink: TokenSink
    ) -> BackendResult:
        """Echo the prompt and the image count, handing ``sink`` one character per token."""
        if self._config is None:
            raise BackendUnloadedError(self.profile.profile_id)
        started = time.perf_counter()
        text = f"echo: {inputs.prompt} ({inputs.counts()['image_count']} images)"
        text = text[: settings.max_new_tokens]
        sink.prompt_opened(False)
        for index in range(len(text)):
            sink.token(ord(text[index]), text[: index + 1])
        seconds = time.perf_counter() - started
        return BackendResult(
            token_ids=tuple(ord(c) for c in text),
            text=text,
            native_reasoning=None,
            timings=BackendTimings(generation_seconds=seconds, prompt_tokens=len(inputs.prompt)),
            finish_reason="stop",
        )

    def unload(self) -> None:
        """Forget the "model"."""
        self._config = None

    def runtime_metadata(self) -> dict[str, object]:
        """The engine's facts."""
        return {"engine": ENGINE_NAME, "device": "cpu", "loaded": self.loaded}


def create_backend(
    profile: ModelProfile, snapshot_path: Path, progress: ProgressCallback
) -> FakeEchoBackend:
    """Load a :data:`FAMILY` checkpoint (this package's ``create_backend``).

    Raises:
        UnsupportedBackendError: The profile names another engine.
        ModelLoadError: config.json cannot be read.
    """
    if profile.backend != ENGINE_NAME:
        raise UnsupportedBackendError(profile.profile_id, "backend", profile.backend, ENGINE_NAME)
    path = require_completed_snapshot(
        Path(snapshot_path), repository=profile.repository, revision=profile.revision
    )
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelLoadError(
            ENGINE_NAME, profile.profile_id, str(path), "model", str(error)
        ) from error
    return FakeEchoBackend(profile, config)
